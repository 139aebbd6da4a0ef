/*
 * cli.c - the tables of cli.h, and what reads them: the option parser,
 * --help and the man page.
 */
#define _GNU_SOURCE /* getopt_long */
#include "gateway/cli.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/adapter.h"
#include "base/limits.h"
#include "gateway/wire.h"

/* ---- the tables ---- */

#define OPT_CONFIG                                                                  \
	{ "config", 'c', "FILE",                                                    \
	  "the config file (default: $SANDGATE_CONFIG, else "                      \
	  "$XDG_CONFIG_HOME/sandgate/config.json; with no file, one embedded "     \
	  "profile \"local\" on the local backend)" }
#define OPT_STATE                                                                   \
	{ "state-dir", 's', "DIR",                                                  \
	  "where sandgate records the environments it made "                       \
	  "(default: $XDG_STATE_HOME/sandgate, else ~/.local/state/sandgate)" }
#define OPT_JSON(what) { "json", 'j', NULL, "print " what " as JSON on stdout" }
#define OPT_HELP { "help", 'h', NULL, "print this help on stdout and exit 0" }
#define OPT_END { NULL, 0, NULL, NULL }
/* How every envs command and probe end: where the config and state are. */
#define OPT_PLACES_END OPT_CONFIG, OPT_STATE, OPT_HELP, OPT_END
#define OPT_FORCE { "force", 'f', NULL, "remove an environment even when a live session is attached" }

static const struct sg_cli_opt serve_opts[] = {
	OPT_CONFIG,
	{ "profile", 'p', "NAME", "the profile to serve (default: the config's default)" },
	OPT_STATE,
	{ "audit-log", 'a', "FILE",
	  "append one JSON line per request: method, tool, outcome and duration; "
	  "never arguments or secrets" },
	{ "log-level", 'l', "LEVEL", "error, warn (default), info or debug, on stderr" },
	{ "shutdown-budget-ms", 'b', "N",
	  "time from the end of input to exit, cleanup included (default: the "
	  "profile's shutdown_timeout_ms, else 60000)" },
	{ "max-output", 'm', "BYTES",
	  "output kept per tool call, 1024 to 2097152 (default 1048576), so any "
	  "reply fits in a frame" },
	{ "peer", 'P', NULL,
	  "run as a delegated peer of another adapter: the default shutdown budget "
	  "is 10 s instead of 60 s" },
	{ "toolchains", 'T', NULL,
	  "observe the environment's toolchains (python, node, go, c++, git, rg) at "
	  "initialize, as `sandgate probe` does; by default only a select candidate "
	  "that requires one is asked" },
	OPT_HELP,
	OPT_END,
};

static const struct sg_cli_opt check_opts[] = {
	OPT_CONFIG,
	{ "profile", 'p', "NAME", "check this profile only (default: every profile)" },
	{ "state-dir", 's', "DIR",
	  "where the measured cleanup times are read from, for the shutdown "
	  "budgets (default: $XDG_STATE_HOME/sandgate, else "
	  "~/.local/state/sandgate; never created)" },
	OPT_JSON("the verdicts"),
	OPT_HELP,
	OPT_END,
};

static const struct sg_cli_opt list_opts[] = {
	{ "profile", 'p', "NAME", "only the environments of this profile" },
	OPT_JSON("the environments"),
	OPT_PLACES_END,
};

static const struct sg_cli_opt show_opts[] = {
	OPT_JSON("the environment"),
	OPT_PLACES_END,
};

static const struct sg_cli_opt rm_opts[] = {
	OPT_FORCE,
	OPT_JSON("what was removed"),
	OPT_PLACES_END,
};

static const struct sg_cli_opt gc_opts[] = {
	{ "older-than", 'o', "DUR",
	  "also remove environments created longer ago than DUR: a number of "
	  "seconds, or N followed by s, m, h or d" },
	{ "dry-run", 'n', NULL, "say what would be removed, remove nothing" },
	OPT_FORCE,
	OPT_JSON("what was (or would be) removed and kept"),
	OPT_PLACES_END,
};

static const struct sg_cli_opt probe_opts[] = {
	{ "profile", 'p', "NAME", "the profile to probe (default: the config's default)" },
	OPT_JSON("the report"),
	OPT_PLACES_END,
};

static const struct sg_cli_opt help_opts[] = { OPT_HELP, OPT_END };
static const struct sg_cli_opt version_opts[] = { OPT_JSON("the version"), OPT_HELP, OPT_END };

#define EXITS(...) ((const int[]){ __VA_ARGS__, -1 })

static const struct sg_cli_cmd commands[] = {
	{ "serve", NULL, 0, 0, "be the command backend: the host's execution protocol (v3, v4) on stdin and stdout",
	  "An agent host starts `sandgate serve` as its command backend and speaks "
	  "newline-delimited JSON to it (docs/protocol.md).  The profile and the "
	  "config are checked before the first frame is read, so a missing profile "
	  "or an invalid config ends the command at once with status 78.\n\n"
	  "At the end of input, requests still running are cancelled, processes "
	  "stopped and the environment kept or removed as the binding asked, "
	  "within the shutdown budget.",
	  "protocol frames on stdout; diagnostics and progress on stderr", serve_opts,
	  EXITS(SG_EXIT_OK, SG_EXIT_USAGE, SG_EXIT_UNAVAILABLE, SG_EXIT_SOFTWARE,
		SG_EXIT_CANTCREAT, SG_EXIT_CONFIG) },
	{ "config check", NULL, 0, 0, "check the config file and every profile in it",
	  "Loads the config and checks each profile as `serve` would before it "
	  "provisions anything: the fields, the backend's own checks, and for a "
	  "`select` profile its candidates.  The verdict for a profile is the one "
	  "`serve --profile` and `probe --profile` reach.\n\n"
	  "For each profile that passes, it also reports the shutdown budget its "
	  "cleanup needs (stopping processes, then deleting or keeping the "
	  "environment, from the times measured in the state directory, else "
	  "conservative defaults) and warns, without changing the verdict, where a "
	  "configured or default budget is shorter: sandgate's own "
	  "(shutdown_timeout_ms), an outer adapter's grace (shutdown_grace_ms) and "
	  "the host's over it (docs/delegation.md).",
	  "one line per profile on stdout (\"ok\", or the error), then its shutdown "
	  "budget and any warnings; --json: one object",
	  check_opts, EXITS(SG_EXIT_OK, SG_EXIT_USAGE, SG_EXIT_CONFIG) },
	{ "envs list", NULL, 0, 0, "list the environments sandgate made",
	  "The state registry merged with what each backend reports for "
	  "sandgate's own tags, so an environment the registry lacks shows up as "
	  "an orphan and a record whose resource is gone as vanished.",
	  "a table on stdout; --json: an array of objects", list_opts,
	  EXITS(SG_EXIT_OK, SG_EXIT_USAGE, SG_EXIT_UNAVAILABLE, SG_EXIT_CANTCREAT,
		SG_EXIT_CONFIG) },
	{ "envs show", "ID", 1, 1, "show one environment",
	  "Everything known about the environment ID: its registry record and what "
	  "its backend reports.",
	  "one \"key value\" line per field on stdout; --json: one object", show_opts,
	  EXITS(SG_EXIT_OK, SG_EXIT_USAGE, SG_EXIT_NOINPUT, SG_EXIT_UNAVAILABLE,
		SG_EXIT_CANTCREAT, SG_EXIT_CONFIG) },
	{ "envs rm", "ID...", 1, -1, "remove environments",
	  "Removes each environment named (the backend's resource, then its "
	  "record).  One attached to a live session is kept unless --force.",
	  "\"removed ID\" lines on stdout; --json: one object", rm_opts,
	  EXITS(SG_EXIT_OK, SG_EXIT_USAGE, SG_EXIT_NOINPUT, SG_EXIT_UNAVAILABLE,
		SG_EXIT_CANTCREAT, SG_EXIT_CONFIG) },
	{ "envs gc", NULL, 0, 0, "remove what was left behind",
	  "Removes environments whose cleanup did not finish, records whose "
	  "resource vanished, those whose gateway died while creating them, "
	  "non-persistent ones past their expiry, orphans, and (with --older-than) "
	  "old ones.  One attached to a live session is kept unless --force.",
	  "one line per environment on stdout, with the reason; --json: one object",
	  gc_opts, EXITS(SG_EXIT_OK, SG_EXIT_USAGE, SG_EXIT_UNAVAILABLE, SG_EXIT_CANTCREAT,
			 SG_EXIT_CONFIG) },
	{ "probe", NULL, 0, 0, "try a profile for real and say what was found",
	  "Runs a throwaway session of the profile (this binary as `serve`, removed "
	  "at exit) and reports the credentials found (never their values), whether "
	  "the backend answered, the facts inside the environment, and where the "
	  "time went: each provisioning step the backend reported (create, ready, "
	  "connect, helper), the whole initialize, and a first command.  The "
	  "session's own cleanup is timed into the measurements, and the report "
	  "ends with the shutdown budget the profile needs, as `config check` "
	  "gives it.",
	  "a report on stdout; --json: one object", probe_opts,
	  EXITS(SG_EXIT_OK, SG_EXIT_USAGE, SG_EXIT_UNAVAILABLE, SG_EXIT_SOFTWARE,
		SG_EXIT_CANTCREAT, SG_EXIT_CONFIG) },
	{ "help", "[COMMAND]", 0, 2, "print the help of sandgate or of a command",
	  "The same text as `sandgate --help` or `sandgate COMMAND --help`.",
	  "the help on stdout", help_opts, EXITS(SG_EXIT_OK, SG_EXIT_USAGE) },
	{ "version", NULL, 0, 0, "print the version and the backends built in",
	  "Also `sandgate --version`.",
	  "one line on stdout; --json: one object", version_opts, EXITS(SG_EXIT_OK, SG_EXIT_USAGE) },
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

struct named {
	int code;
	const char *name;
	const char *text;
};

static const struct named exits[] = {
	{ SG_EXIT_OK, "ok", "success" },
	{ SG_EXIT_USAGE, "usage",
	  "the command line is wrong: an unknown command or option, a missing or "
	  "malformed value, the wrong number of operands (named on stderr)" },
	{ SG_EXIT_NOINPUT, "noinput", "an environment named on the command line does not exist" },
	{ SG_EXIT_UNAVAILABLE, "unavailable",
	  "a backend could not do what was asked: probe found no working "
	  "environment, a backend could not be listed, an environment could not be "
	  "removed, or serve could not finish its cleanup within the budget "
	  "(run `sandgate envs gc`)" },
	{ SG_EXIT_SOFTWARE, "software", "an internal error (out of memory, a process or thread could not start)" },
	{ SG_EXIT_CANTCREAT, "cantcreat", "the state directory or the audit log cannot be created" },
	{ SG_EXIT_CONFIG, "config",
	  "the config file or a profile is invalid, the profile asked for does not "
	  "exist, sg-helper was not found, or XDG_STATE_HOME or HOME is not an "
	  "absolute path" },
};

struct pair {
	const char *name, *text;
};

static const struct pair environment[] = {
	{ "SANDGATE_CONFIG", "the config file, when --config is not given; a missing file is an error" },
	{ "XDG_CONFIG_HOME", "the config is $XDG_CONFIG_HOME/sandgate/config.json (when absolute), else ~/.config/sandgate/config.json" },
	{ "XDG_STATE_HOME", "the state directory is $XDG_STATE_HOME/sandgate, else ~/.local/state/sandgate" },
	{ "HOME", "the base of the defaults above" },
	{ "SANDGATE_HELPER", "the sg-helper program to use instead of the one beside sandgate or in ../libexec/sandgate/" },
	{ "SANDGATE_PROGRESS", "how provisioning steps that wait on a provider are reported on stderr: auto (default: a progress line on a terminal, else log lines), line, log, json or off" },
	{ "DAYTONA_API_KEY", "daytona backend: the API key (the profile's api_key_env names another variable)" },
	{ "DAYTONA_API_URL", "daytona backend: the API's URL (api_url_env names another variable)" },
	{ "DAYTONA_TARGET", "daytona backend: the region (target_env names another variable)" },
	{ "SSH_AUTH_SOCK", "ssh backend: the agent ssh authenticates with" },
	{ "SANDGATE_TEST_CRASH_AT", "tests only: kill the gateway at a named step (docs/operators.md)" },
};

static const struct pair files[] = {
	{ "~/.config/sandgate/config.json", "the profiles (config/README.md documents every field)" },
	{ "~/.local/state/sandgate/", "the state directory: registry/ holds one record per environment sandgate made; local/ the local backend's environments" },
	{ "PREFIX/libexec/sandgate/sg-helper", "the helper sandgate runs in environments (uploaded to remote ones)" },
	{ "PREFIX/share/doc/sandgate/examples/", "example configs, one per backend" },
	{ "~/.cache/sandgate/sg-helper-SHA256", "on an ssh host: the uploaded sg-helper, once per user and version" },
};

/* ---- lookup and parsing ---- */

const struct sg_cli_cmd *sg_cli_find(const char *name)
{
	for (size_t i = 0; name && i < NCOMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

int sg_cli_usage_error(const struct sg_cli_cmd *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "sandgate%s%s: ", cmd ? " " : "", cmd ? cmd->name : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nRun 'sandgate %s%s--help' for usage.\n", cmd ? cmd->name : "",
		cmd ? " " : "");
	return SG_EXIT_USAGE;
}

int sg_cli_next(const struct sg_cli_cmd *cmd, int argc, char **argv,
		const char **arg, int *first, int *status)
{
	struct option lo[16];
	size_t n = 0;
	int c, operands;

	for (; cmd->opts[n].name && n + 1 < sizeof(lo) / sizeof(lo[0]); n++)
		lo[n] = (struct option){ cmd->opts[n].name,
					 cmd->opts[n].arg ? required_argument : no_argument,
					 NULL, cmd->opts[n].key };
	lo[n] = (struct option){ NULL, 0, NULL, 0 };
	*arg = NULL;
	opterr = 0;
	c = getopt_long(argc, argv, ":h", lo, NULL);
	if (c == 'h') {
		sg_cli_help(NULL, cmd);
		*status = SG_EXIT_OK;
		return 0;
	}
	if (c == '?') {
		*status = sg_cli_usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
		return 0;
	}
	if (c == ':') {
		*status = sg_cli_usage_error(cmd, "option '%s' needs a value", argv[optind - 1]);
		return 0;
	}
	if (c != -1) {
		*arg = optarg;
		return c;
	}
	*first = optind;
	operands = argc - optind;
	if (operands < cmd->min_operands)
		*status = sg_cli_usage_error(cmd, "needs %s", cmd->operands);
	else if (cmd->max_operands >= 0 && operands > cmd->max_operands)
		*status = sg_cli_usage_error(cmd, "unexpected operand '%s'",
					     argv[optind + (cmd->max_operands)]);
	else
		*status = -1;
	return 0;
}

const char *sg_cli_backends(void)
{
	static char out[128];
	const struct sg_adapter *const *a = sg_adapter_all();
	size_t n = 0;

	out[0] = '\0';
	for (; *a && n < sizeof(out); a++)
		n += (size_t)snprintf(out + n, sizeof(out) - n, "%s%s", n ? " " : "", (*a)->name);
	return out;
}

/* ---- help ---- */

/* text, wrapped at 79 columns, each line indented by `indent` (the first
 * line too when `first` is set). */
static void wrap(FILE *out, const char *text, int indent, int col)
{
	const char *p = text;

	while (*p) {
		size_t word = strcspn(p, " \n");

		if (col > indent && col + 1 + (int)word > 79) {
			fprintf(out, "\n%*s", indent, "");
			col = indent;
		} else if (col > indent) {
			fputc(' ', out);
			col++;
		}
		fprintf(out, "%.*s", (int)word, p);
		col += (int)word;
		p += word;
		if (p[0] == '\n' && p[1] == '\n') {
			fprintf(out, "\n\n%*s", indent, "");
			col = indent;
		}
		p += strspn(p, " \n");
	}
	fputc('\n', out);
}

static const struct named *exit_named(int code)
{
	for (size_t i = 0; i < sizeof(exits) / sizeof(exits[0]); i++)
		if (exits[i].code == code)
			return &exits[i];
	return &exits[0];
}

static void help_command(FILE *out, const struct sg_cli_cmd *c)
{
	fprintf(out, "usage: sandgate %s%s%s [options]\n\n", c->name, c->operands ? " " : "",
		c->operands ? c->operands : "");
	wrap(out, c->text, 0, 0);
	fprintf(out, "\noptions:\n");
	for (const struct sg_cli_opt *o = c->opts; o->name; o++) {
		int n = fprintf(out, "  --%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");

		if (n > 24) {
			fprintf(out, "\n%*s", 25, "");
			n = 25;
		} else {
			fprintf(out, "%*s", 25 - n, "");
			n = 25;
		}
		wrap(out, o->help, 25, n);
	}
	fprintf(out, "\noutput: ");
	wrap(out, c->output, 2, 8);
	fprintf(out, "\nexit status:\n");
	for (const int *e = c->exits; *e >= 0; e++) {
		fprintf(out, "  %-4d", *e);
		wrap(out, exit_named(*e)->text, 6, 6);
	}
}

void sg_cli_help(FILE *out, const struct sg_cli_cmd *cmd)
{
	if (!out) {
		/* stdout is written only through sg_cli_printf (wire.h). */
		char *text = NULL;
		size_t len = 0;
		FILE *mem = open_memstream(&text, &len);

		if (!mem)
			return;
		sg_cli_help(mem, cmd);
		fclose(mem);
		sg_cli_printf("%s", text);
		free(text);
		return;
	}
	if (cmd) {
		help_command(out, cmd);
		return;
	}
	fprintf(out, "usage: sandgate COMMAND [options]\n"
		     "       sandgate --help | --version\n\ncommands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++) {
		char name[40];

		snprintf(name, sizeof(name), "%s%s%s", commands[i].name,
			 commands[i].operands ? " " : "",
			 commands[i].operands ? commands[i].operands : "");
		fprintf(out, "  %-21s", name);
		wrap(out, commands[i].summary, 23, 23);
	}
	fprintf(out, "\nRun 'sandgate COMMAND --help' for a command's options.  `serve` is what\n"
		     "an agent host starts; the others are for operators.\n\nexit status:\n");
	for (size_t i = 0; i < sizeof(exits) / sizeof(exits[0]); i++) {
		fprintf(out, "  %-4d", exits[i].code);
		wrap(out, exits[i].text, 6, 6);
	}
	fprintf(out, "\nenvironment:\n");
	for (size_t i = 0; i < sizeof(environment) / sizeof(environment[0]); i++) {
		fprintf(out, "  %s\n%6s", environment[i].name, "");
		wrap(out, environment[i].text, 6, 6);
	}
	fprintf(out, "\nbackends built in: %s.  The manual: man sandgate.\n", sg_cli_backends());
}

/* ---- the man page ---- */

/* Text for roff: backslashes escaped, `code` spans bold, a leading dot or
 * quote guarded, "--" as two hyphens. */
static void roff(FILE *out, const char *s)
{
	bool bold = false, start = true;

	for (; *s; s++) {
		if (start && (*s == '.' || *s == '\''))
			fputs("\\&", out);
		start = false;
		if (*s == '\\')
			fputs("\\e", out);
		else if (*s == '-')
			fputs("\\-", out);
		else if (*s == '`') {
			fputs(bold ? "\\fR" : "\\fB", out);
			bold = !bold;
		} else if (*s == '\n' && s[1] == '\n') {
			fputs("\n.PP\n", out);
			s++;
			start = true;
		} else {
			fputc(*s, out);
			start = *s == '\n';
		}
	}
	if (bold)
		fputs("\\fR", out);
}

static void man_options(FILE *out, const struct sg_cli_opt *o)
{
	for (; o->name; o++) {
		fputs(".TP\n.B \\-\\-", out);
		roff(out, o->name);
		if (o->arg) {
			fputs(" \\fI", out);
			roff(out, o->arg);
			fputs("\\fR", out);
		}
		fputc('\n', out);
		roff(out, o->help);
		fputc('\n', out);
	}
}

/* A section of tagged paragraphs: the name in `font`, then its text. */
static void man_pairs(FILE *out, const char *section, const char *font,
		      const struct pair *p, size_t n)
{
	fputs(section, out);
	for (size_t i = 0; i < n; i++) {
		fprintf(out, ".TP\n%s", font);
		roff(out, p[i].name);
		fputc('\n', out);
		roff(out, p[i].text);
		fputc('\n', out);
	}
}

void sg_cli_man(FILE *out, const char *version)
{
	fprintf(out, ".TH SANDGATE 1 \"\" \"sandgate %s\" \"User Commands\"\n", version);
	fputs(".SH NAME\nsandgate \\- an execution backend for AI coding agents\n.SH SYNOPSIS\n", out);
	for (size_t i = 0; i < NCOMMANDS; i++) {
		fputs(".B sandgate ", out);
		roff(out, commands[i].name);
		if (commands[i].operands) {
			fputs("\n.I ", out);
			roff(out, commands[i].operands);
		}
		fputs("\n[\\fIoptions\\fR]\n.br\n", out);
	}
	fputs(".B sandgate \\-\\-help\n.br\n.B sandgate \\-\\-version\n", out);
	fputs(".SH DESCRIPTION\n", out);
	roff(out, "sandgate runs the tools of an AI coding agent (files, commands, "
		  "processes) in an environment made by one of its backends: this "
		  "host (local), a machine over ssh, or a cloud sandbox.  The agent "
		  "host starts `sandgate serve` as its command backend and speaks its execution protocol (version 3 or 4) to it "
		  "over stdin and stdout.  The other commands are for operators: "
		  "checking the config, trying a profile, and listing and cleaning up "
		  "the environments sandgate made.\n\nBackends built in: ");
	roff(out, sg_cli_backends());
	fputs(".\n.SH COMMANDS\n", out);
	for (size_t i = 0; i < NCOMMANDS; i++) {
		const struct sg_cli_cmd *c = &commands[i];

		fputs(".SS sandgate ", out);
		roff(out, c->name);
		if (c->operands) {
			fputc(' ', out);
			roff(out, c->operands);
		}
		fputc('\n', out);
		roff(out, c->text);
		fputs("\n.PP\nOutput: ", out);
		roff(out, c->output);
		fputs(".\nExit status:", out);
		for (const int *e = c->exits; *e >= 0; e++)
			fprintf(out, "%s %d", e == c->exits ? "" : ",", *e);
		fputs(".\n", out);
		man_options(out, c->opts);
	}
	fputs(".SH EXIT STATUS\nEvery command uses the same numbers (those of sysexits.h):\n", out);
	for (size_t i = 0; i < sizeof(exits) / sizeof(exits[0]); i++) {
		fprintf(out, ".TP\n.B %d\n", exits[i].code);
		roff(out, exits[i].text);
		fputc('\n', out);
	}
	man_pairs(out, ".SH ENVIRONMENT\n", ".B ", environment,
		  sizeof(environment) / sizeof(environment[0]));
	man_pairs(out, ".SH FILES\n", ".I ", files, sizeof(files) / sizeof(files[0]));
	fputs(".SH EXAMPLES\n.nf\nsandgate config check\nsandgate probe \\-\\-profile lab\n"
	      "sandgate envs list \\-\\-json\nsandgate envs gc \\-\\-older-than 7d \\-\\-dry-run\n.fi\n",
	      out);
	fputs(".SH SEE ALSO\nThe protocol, the config fields and the operators' guide: "
	      "docs/protocol.md, config/README.md and docs/operators.md in the sources, "
	      "installed under PREFIX/share/doc/sandgate/.\n", out);
}

/* ---- bash completion ---- */

/* Is o the first option of that name in the table (commands up to i)? */
static bool first_use(size_t i, const struct sg_cli_opt *o)
{
	for (size_t j = 0; j <= i; j++)
		for (const struct sg_cli_opt *q = commands[j].opts; q->name && q != o; q++)
			if (strcmp(q->name, o->name) == 0)
				return false;
	return true;
}

void sg_cli_bash(FILE *out)
{
	fputs("# bash completion for sandgate, written by `sandgate __bash` from the\n"
	      "# same table as --help and the man page.\n"
	      "_sandgate() {\n"
	      "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
	      "  local cmd=${COMP_WORDS[1]} words=\n"
	      "  case $cmd in config|envs) cmd=\"$cmd ${COMP_WORDS[2]}\" ;; esac\n"
	      "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
	      "    words=\"--help --version", out);
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (!strchr(commands[i].name, ' ') ||
		    strncmp(commands[i].name, commands[i - 1].name,
			    strcspn(commands[i].name, " ")) != 0)
			fprintf(out, " %.*s", (int)strcspn(commands[i].name, " "), commands[i].name);
	fputs("\"\n  elif [ \"$COMP_CWORD\" -eq 2 ] && [ \"$cmd\" != \"${cmd% *}\" ]; then\n"
	      "    case ${COMP_WORDS[1]} in\n", out);
	for (size_t i = 0; i < NCOMMANDS; i++) {
		size_t w = strcspn(commands[i].name, " ");

		if (!commands[i].name[w] || (i && strncmp(commands[i].name, commands[i - 1].name, w) == 0 &&
					     commands[i - 1].name[w] == ' '))
			continue;
		fprintf(out, "      %.*s) words=\"", (int)w, commands[i].name);
		for (size_t j = i; j < NCOMMANDS && strncmp(commands[j].name, commands[i].name, w + 1) == 0; j++)
			fprintf(out, "%s%s", j == i ? "" : " ", commands[j].name + w + 1);
		fputs("\" ;;\n", out);
	}
	fputs("    esac\n  else\n    case $prev in\n", out);
	for (size_t i = 0; i < NCOMMANDS; i++)
		for (const struct sg_cli_opt *o = commands[i].opts; o->name; o++)
			if (o->arg && (strcmp(o->arg, "FILE") == 0 || strcmp(o->arg, "DIR") == 0) &&
			    first_use(i, o))
				fprintf(out, "      --%s) COMPREPLY=($(compgen -%c -- \"$cur\")); return ;;\n",
					o->name, o->arg[0] == 'F' ? 'f' : 'd');
	fputs("      --log-level) COMPREPLY=($(compgen -W \"error warn info debug\" -- \"$cur\")); return ;;\n"
	      "    esac\n    case $cmd in\n", out);
	for (size_t i = 0; i < NCOMMANDS; i++) {
		fprintf(out, "      \"%s\") words=\"", commands[i].name);
		for (const struct sg_cli_opt *o = commands[i].opts; o->name; o++)
			fprintf(out, "%s--%s", o == commands[i].opts ? "" : " ", o->name);
		fputs("\" ;;\n", out);
	}
	fputs("    esac\n  fi\n  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n}\n"
	      "complete -F _sandgate sandgate\n", out);
}
