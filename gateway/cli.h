/*
 * cli.h - the one description of sandgate's command line.
 *
 * Invariants: every command, option, exit status, environment variable and
 * file of the tool is in the tables of cli.c, and nothing else describes
 * them: `--help`, the man page sandgate(1) (written by the hidden command
 * `sandgate __man` at build time) and the option parser all read those
 * tables (and so does the bash completion, `sandgate __bash`), so an
 * option cannot be accepted without being documented, nor documented
 * without being accepted.  Everything returned is static and
 * borrowed.  Help goes to stdout; diagnostics to stderr, naming the command.
 */
#ifndef SG_CLI_H
#define SG_CLI_H

#include <stdio.h>

/* The exit statuses of every command (sysexits.h numbering). */
enum sg_exit {
	SG_EXIT_OK = 0,
	SG_EXIT_USAGE = 64,       /* the command line is wrong */
	SG_EXIT_NOINPUT = 66,     /* an environment named does not exist */
	SG_EXIT_UNAVAILABLE = 69, /* a backend could not do what was asked */
	SG_EXIT_SOFTWARE = 70,    /* an internal error */
	SG_EXIT_CANTCREAT = 73,   /* the state directory or audit log */
	SG_EXIT_CONFIG = 78,      /* the config, a profile, or sg-helper */
};

struct sg_cli_opt {
	const char *name; /* without the leading "--" */
	int key;          /* what sg_cli_next() returns for it */
	const char *arg;  /* the value's placeholder, or NULL for a flag */
	const char *help;
};

struct sg_cli_cmd {
	const char *name;     /* "serve", "envs rm" */
	const char *operands; /* "ID...", or NULL */
	int min_operands, max_operands; /* max -1: any number */
	const char *summary;  /* one line */
	const char *text;     /* what it does, paragraphs separated by "\n\n" */
	const char *output;   /* what it prints, and where */
	const struct sg_cli_opt *opts; /* ends with a NULL name */
	const int *exits;     /* the statuses it may return, ending with -1 */
};

/* The command named `name` ("envs rm"), or NULL. */
const struct sg_cli_cmd *sg_cli_find(const char *name);

/*
 * The next option of argv (argv[0] is the command's last word) for cmd:
 * its key, or 0 once the options are over.  Then *status is -1 when the
 * command goes on (operands from argv[*first] to argv[argc - 1], their
 * number checked), else the exit status: SG_EXIT_OK after --help was
 * printed, SG_EXIT_USAGE after the mistake was named on stderr.  *arg is
 * the option's value.  Not reentrant (getopt_long's state).
 */
int sg_cli_next(const struct sg_cli_cmd *cmd, int argc, char **argv,
		const char **arg, int *first, int *status);

/* "sandgate CMD: <message>" and the --help hint on stderr; returns 64. */
int sg_cli_usage_error(const struct sg_cli_cmd *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The top-level help, or cmd's help (cmd NULL: the top level); out NULL:
 * stdout, through sg_cli_printf (wire.h). */
void sg_cli_help(FILE *out, const struct sg_cli_cmd *cmd);

/* The man page sandgate(1) in roff. */
void sg_cli_man(FILE *out, const char *version);

/* The bash completion script, from the same table. */
void sg_cli_bash(FILE *out);

/* "local ssh daytona": the backends built in (static buffer). */
const char *sg_cli_backends(void);

#endif
