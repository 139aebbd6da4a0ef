/*
 * main.c - the sandgate command line.
 *
 *   sandgate serve [options]      the command backend (protocol v4 on stdio)
 *   sandgate config check         validate every profile of the config
 *   sandgate --help | --version
 *
 * Everything here runs before any thread starts, so getopt_long is safe.
 */
#define _GNU_SOURCE /* getopt_long, readlink of /proc/self/exe */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../config/config.h"
#include "base/cancel.h"
#include "base/fsutil.h"
#include "base/limits.h"
#include "base/log.h"
#include "envs.h"
#include "server.h"
#include "wire.h"
#include "sg_config.h"

#define EX_USAGE 64
#define EX_CONFIG 78

static const char usage[] =
	"usage: sandgate serve [--config FILE] [--profile NAME] [--state-dir DIR]\n"
	"                      [--audit-log FILE] [--log-level LEVEL]\n"
	"                      [--shutdown-budget-ms N] [--max-output BYTES] [--peer]\n"
	"       sandgate config check [--config FILE]\n"
	"       sandgate envs list|show|rm|gc ... [--config FILE] [--state-dir DIR]\n"
	"       sandgate probe [--profile NAME] [--json] [--config FILE] [--state-dir DIR]\n"
	"       sandgate --help | --version\n"
	"\n"
	"serve speaks the execution backend protocol, version 4, on stdin and\n"
	"stdout; an agent host starts it as its command backend.\n"
	"\n"
	"  --config FILE          profiles (default $SANDGATE_CONFIG, else\n"
	"                         $XDG_CONFIG_HOME/sandgate/config.json; with no\n"
	"                         file, one embedded profile on the local backend)\n"
	"  --profile NAME         the profile to serve (default: the config's default)\n"
	"  --state-dir DIR        local state (default $XDG_STATE_HOME/sandgate)\n"
	"  --audit-log FILE       one JSON line per request: method, tool, outcome,\n"
	"                         duration; never arguments or secrets\n"
	"  --log-level LEVEL      error, warn (default), info or debug, on stderr\n"
	"  --shutdown-budget-ms N time from stdin EOF to exit, cleanup included\n"
	"                         (default: the profile's shutdown_timeout_ms, else 60000)\n"
	"  --max-output BYTES     output kept per tool call (default 1048576, at most\n"
	"                         2097152 so any reply fits in a frame)\n"
	"  --peer                 run as a delegated peer of another adapter: the\n"
	"                         default shutdown budget is 10 s instead of 60 s\n";

/*
 * The state directory, always absolute (new), or NULL after saying why on
 * stderr.  Every path derived from it reaches sg-helper, which accepts
 * only absolute roots, so a relative one would break every file tool
 * later instead of failing here.  --state-dir is the caller's own word and
 * is taken relative to the working directory; a relative XDG_STATE_HOME
 * or HOME is invalid (the XDG Base Directory spec requires absolute
 * paths) and is refused rather than guessed at.
 */
static char *state_dir_of(const char *given)
{
	const char *xdg = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	char cwd[SG_PATH_MAX], *p = NULL;

	if (given && given[0] != '/') {
		if (!getcwd(cwd, sizeof(cwd))) {
			fprintf(stderr, "sandgate: --state-dir %s is relative and the working directory is unknown: %s\n",
				given, strerror(errno));
			return NULL;
		}
		return asprintf(&p, "%s/%s", cwd, given) < 0 ? NULL : p;
	}
	if (given)
		return strdup(given);
	if (xdg && *xdg && xdg[0] != '/') {
		fprintf(stderr, "sandgate: XDG_STATE_HOME=%s is not an absolute path (the XDG Base Directory spec requires one); set it to an absolute path or pass --state-dir\n",
			xdg);
		return NULL;
	}
	if (xdg && *xdg)
		return asprintf(&p, "%s/sandgate", xdg) < 0 ? NULL : p;
	if (home && *home && home[0] != '/') {
		fprintf(stderr, "sandgate: HOME=%s is not an absolute path; set XDG_STATE_HOME or pass --state-dir\n",
			home);
		return NULL;
	}
	if (home && *home)
		return asprintf(&p, "%s/.local/state/sandgate", home) < 0 ? NULL : p;
	return strdup("/tmp/sandgate-state");
}

/*
 * sg-helper on this host: $SANDGATE_HELPER, else beside this executable
 * (the build tree), else ../libexec/sandgate/ (an installed tree).
 */
static char *find_helper(void)
{
	const char *env = getenv("SANDGATE_HELPER");
	char self[PATH_MAX], *slash, *p = NULL;
	ssize_t n;

	if (env && *env)
		return strdup(env);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return NULL;
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (!slash)
		return NULL;
	*slash = '\0';
	if (asprintf(&p, "%s/sg-helper", self) >= 0 && access(p, X_OK) == 0)
		return p;
	free(p);
	p = NULL;
	if (asprintf(&p, "%s/../libexec/sandgate/sg-helper", self) >= 0 &&
	    access(p, X_OK) == 0)
		return p;
	free(p);
	return NULL;
}

static int load_config(const char *path, struct sg_config **cfg)
{
	struct sg_errinfo err = { 0 };
	char *def = path ? NULL : sg_config_default_path();
	int status = 0;

	if (sg_config_load(path ? path : def, cfg, &err)) {
		fprintf(stderr, "sandgate: %s\n", err.msg);
		status = EX_CONFIG;
	}
	free(def);
	return status;
}

static int cmd_serve(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "profile", required_argument, NULL, 'p' },
		{ "state-dir", required_argument, NULL, 's' },
		{ "audit-log", required_argument, NULL, 'a' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "shutdown-budget-ms", required_argument, NULL, 'b' },
		{ "max-output", required_argument, NULL, 'm' },
		{ "peer", no_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sg_server_opts o = { 0 };
	const char *config = NULL;
	char *state = NULL, *helper = NULL, *end;
	struct sg_config *cfg = NULL;
	enum sg_log_level level;
	int c, status = 0;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': config = optarg; break;
		case 'p': o.profile = optarg; break;
		case 's': o.state_dir = optarg; break;
		case 'a': o.audit_log = optarg; break;
		case 'l':
			if (!sg_log_parse_level(optarg, &level)) {
				fprintf(stderr, "sandgate: --log-level must be error, warn, info or debug\n");
				return EX_USAGE;
			}
			sg_log_set_level(level);
			break;
		case 'b':
			o.budget_ms = strtoll(optarg, &end, 10);
			if (*end || o.budget_ms < 1 || o.budget_ms > 2147483647) {
				fprintf(stderr, "sandgate: --shutdown-budget-ms must be 1 to 2147483647\n");
				return EX_USAGE;
			}
			break;
		case 'm':
			o.tool_output = (size_t)strtoull(optarg, &end, 10);
			if (*end || o.tool_output < 1024 || o.tool_output > SG_TOOL_OUTPUT_MAX) {
				fprintf(stderr, "sandgate: --max-output must be 1024 to %zu\n",
					SG_TOOL_OUTPUT_MAX);
				return EX_USAGE;
			}
			break;
		case 'P': o.peer = true; break;
		case 'h': fputs(usage, stderr); return 0;
		default: fputs(usage, stderr); return EX_USAGE;
		}
	}
	if (optind != argc) {
		fputs(usage, stderr);
		return EX_USAGE;
	}
	status = load_config(config, &cfg);
	if (status)
		return status;
	o.state_dir = state = state_dir_of(o.state_dir);
	if (!state) {
		status = EX_CONFIG;
		goto out;
	}
	if (sg_mkdir_p(o.state_dir, 0700)) {
		fprintf(stderr, "sandgate: cannot create the state directory %s: %s\n",
			o.state_dir ? o.state_dir : "(none)", strerror(errno));
		status = EX_CONFIG;
		goto out;
	}
	helper = find_helper();
	if (!helper) {
		fprintf(stderr, "sandgate: sg-helper was not found beside sandgate; set SANDGATE_HELPER\n");
		status = EX_CONFIG;
		goto out;
	}
	/*
	 * Export chunks and large replies are a few megabytes each: keep them
	 * on the heap and keep freed memory for the next one, instead of a
	 * fresh mmap (and a page fault per 4 KiB) on every request.  The
	 * export RSS target (64 MiB) allows it; idle RSS is unaffected.
	 */
	mallopt(M_MMAP_THRESHOLD, (int)(32 * SG_MiB));
	mallopt(M_TRIM_THRESHOLD, (int)(64 * SG_MiB));
	o.cfg = cfg;
	o.helper_path = helper;
	status = sg_server_run(&o);
out:
	sg_config_free(cfg);
	free(state);
	free(helper);
	return status;
}

/*
 * Run `argv` (this binary as `serve`), send one request line, and keep its
 * stdin open until the reply line arrived (an EOF earlier would cancel the
 * request); then close stdin and wait for the clean shutdown.
 */
static int converse(const char *const *argv, const char *request, struct sg_buf *reply)
{
	extern char **environ;
	posix_spawn_file_actions_t fa;
	int in[2], out[2], st;
	pid_t pid;
	int rc = -1;

	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	if (posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ) == 0) {
		size_t n = strlen(request);

		close(in[0]);
		close(out[1]);
		if (write(in[1], request, n) == (ssize_t)n) {
			char *dst;

			while (!memchr(reply->p, '\n', reply->len) &&
			       sg_buf_reserve(reply, 65536, &dst) == SG_OK) {
				ssize_t got = read(out[0], dst, 65536);

				if (got <= 0)
					break;
				sg_buf_commit(reply, (size_t)got);
			}
			rc = 0;
		}
		close(in[1]);
		close(out[0]);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
	} else {
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
	}
	posix_spawn_file_actions_destroy(&fa);
	return rc;
}

/* The probe's report on stdout, as indented JSON. */
static void dump_json(const json_t *report)
{
	char *text = json_dumps(report, JSON_INDENT(2) | JSON_SORT_KEYS);

	sg_cli_printf("%s\n", text ? text : "{}");
	free(text);
}

/*
 * `sandgate probe [--profile P] [--json] [--config F] [--state-dir D]`:
 * run a real, throwaway session of the profile (this same binary as
 * `serve`, an initialize with a fresh identity and removal at exit) and
 * report what was observed: credentials found (never values), whether the
 * backend answered, and the facts inside the environment.
 */
static int cmd_probe(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "profile", required_argument, NULL, 'p' },
		{ "state-dir", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config = NULL, *profile = NULL, *state_dir = NULL;
	char self[PATH_MAX], *state = NULL, *line = NULL, ident[64];
	struct sg_config *cfg = NULL;
	struct sg_profile *p = NULL;
	struct sg_errinfo err = { 0 };
	struct sg_buf out = SG_BUF_INIT(SG_MAX_FRAME);
	json_t *report = NULL, *creds = json_object(), *reply = NULL;
	const struct sg_adapter *ad;
	bool as_json = false;
	int c, status;
	ssize_t n;
	int64_t t0 = sg_now_ms();

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'c': config = optarg; break;
		case 'p': profile = optarg; break;
		case 's': state_dir = optarg; break;
		case 'j': as_json = true; break;
		default: fputs(usage, stderr); return EX_USAGE;
		}
	}
	status = load_config(config, &cfg);
	if (status)
		goto out;
	if (sg_config_profile(cfg, profile, NULL, &p, &err)) {
		/* The same words as `config check` and serve's initialize. */
		char text[SG_ERR_MSG + 64];

		sg_err_format(&err, text, sizeof(text));
		if (as_json) {
			report = json_pack("{s:s, s:b, s:s}", "profile",
					   profile ? profile : sg_config_default(cfg),
					   "reachable", 0, "error", text);
			dump_json(report);
		} else {
			fprintf(stderr, "%s\n", text);
		}
		status = EX_CONFIG;
		goto out;
	}
	ad = sg_adapter_find(p->backend);
	if (ad && ad->credentials)
		ad->credentials(p, creds);
	state_dir = state = state_dir_of(state_dir);
	if (!state) {
		status = EX_CONFIG;
		goto out;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = '\0';
	snprintf(ident, sizeof(ident), "probe-%ld-%lld", (long)getpid(), (long long)t0);
	if (asprintf(&line,
		     "{\"id\":\"probe\",\"method\":\"initialize\",\"token\":\"probe\","
		     "\"data\":{\"version\":4,\"root\":\"/workspace\",\"session\":\"%s\","
		     "\"remove_workspace_on_exit\":true}}\n", ident) < 0) {
		status = 70;
		goto out;
	}
	{
		const char *av[] = { self, "serve", "--state-dir", state_dir,
				     config ? "--config" : NULL, config, NULL, NULL, NULL };

		if (profile) {
			av[config ? 6 : 4] = "--profile";
			av[config ? 7 : 5] = profile;
		}
		if (converse(av, line, &out)) {
			fprintf(stderr, "sandgate: cannot run the probe session: %s\n",
				strerror(errno));
			status = 70;
			goto out;
		}
	}
	reply = json_loadb(out.p, strcspn(out.p, "\n"), 0, NULL);
	report = json_pack("{s:s, s:s, s:O, s:b, s:I}", "profile", p->name, "backend",
			   p->backend, "credentials", creds, "reachable",
			   json_object_get(reply, "data") != NULL, "duration_ms",
			   (json_int_t)(sg_now_ms() - t0));
	if (json_object_get(reply, "data"))
		json_object_set(report, "facts",
				json_object_get(json_object_get(json_object_get(reply, "data"),
								"environment"), "facts"));
	else
		json_object_set_new(report, "error",
				    json_string(json_string_value(json_object_get(reply, "error"))
							? json_string_value(json_object_get(reply, "error"))
							: "the probe session gave no reply"));
	if (as_json) {
		dump_json(report);
	} else {
		const char *k;
		json_t *v, *facts = json_object_get(report, "facts");

		sg_cli_printf("profile      %s (%s)\n", p->name, p->backend);
		sg_cli_printf("credentials  ");
		json_object_foreach(creds, k, v)
			sg_cli_printf("%s=%s ", k, json_string_value(v));
		sg_cli_printf("%s\n", json_object_size(creds) ? "" : "none needed");
		sg_cli_printf("reachable    %s\n", facts ? "yes" : "no");
		if (!facts)
			sg_cli_printf("error        %s\n",
				json_string_value(json_object_get(report, "error")));
		json_object_foreach(json_object_get(facts, "isolation"), k, v)
			sg_cli_printf("isolation    %-30s %s\n", k, json_is_true(v) ? "yes" : "no");
		json_object_foreach(json_object_get(facts, "toolchains"), k, v)
			sg_cli_printf("toolchain    %-30s %s\n", k, json_string_value(v));
		sg_cli_printf("safety_class %s\nmechanism    %s\n",
			json_string_value(json_object_get(facts, "safety_class")) ? json_string_value(json_object_get(facts, "safety_class")) : "-",
			json_string_value(json_object_get(facts, "mechanism")) ? json_string_value(json_object_get(facts, "mechanism")) : "-");
	}
	status = json_object_get(report, "facts") ? 0 : 1;
out:
	sg_buf_release(&out);
	json_decref(report);
	json_decref(reply);
	json_decref(creds);
	sg_profile_free(p);
	sg_config_free(cfg);
	free(state);
	free(line);
	return status;
}

static int cmd_config(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config = NULL;
	struct sg_config *cfg = NULL;
	int c, status, bad = 0;

	if (argc < 2 || strcmp(argv[1], "check") != 0) {
		fputs(usage, stderr);
		return EX_USAGE;
	}
	argv++;
	argc--;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c != 'c') {
			fputs(usage, stderr);
			return EX_USAGE;
		}
		config = optarg;
	}
	status = load_config(config, &cfg);
	if (status)
		return status;
	for (const char *const *n = sg_config_names(cfg); *n; n++) {
		struct sg_errinfo err = { 0 };
		struct sg_profile *p = NULL;
		const struct sg_adapter *ad = NULL;

		if (sg_config_profile(cfg, *n, NULL, &p, &err) == SG_OK) {
			ad = sg_adapter_find(p->backend);
			/* Fields and backend were checked building it; not
			 * `select`, which has no adapter of its own. */
			if (ad)
				ad->validate(p, &err);
		}
		if (err.code) {
			/* Config messages name the file already. */
			fprintf(stderr, "%s: %s\n", sg_err_word(err.code), err.msg);
			bad = 1;
		} else {
			fprintf(stderr, "%s: profile \"%s\" (%s): ok\n",
				sg_config_path(cfg), *n, p->backend);
		}
		sg_profile_free(p);
	}
	sg_config_free(cfg);
	return bad ? EX_CONFIG : 0;
}

/*
 * `sandgate envs ...`: --config and --state-dir may appear anywhere; the
 * rest belongs to the envs subcommand.
 */
static int cmd_envs(int argc, char **argv)
{
	const char *config = NULL, *state_dir = NULL;
	char *state = NULL, **rest = calloc((size_t)argc + 1, sizeof(char *));
	struct sg_config *cfg = NULL;
	int n = 0, status;

	if (!rest)
		return 70;
	for (int i = 0; i < argc; i++) {
		if ((strcmp(argv[i], "--config") == 0 || strcmp(argv[i], "--state-dir") == 0) &&
		    i + 1 < argc) {
			*(argv[i][2] == 'c' ? &config : &state_dir) = argv[i + 1];
			i++;
			continue;
		}
		rest[n++] = argv[i];
	}
	status = load_config(config, &cfg);
	if (!status) {
		state_dir = state = state_dir_of(state_dir);
		status = state ? sg_envs_main(n, rest, cfg, state_dir) : EX_CONFIG;
	}
	sg_config_free(cfg);
	free(state);
	free(rest);
	return status;
}

/*
 * `sandgate __cgroup-exec FILE... -- ARGV`: move this process into the
 * cgroups whose cgroup.procs files are given, then exec ARGV.  The local
 * backend prefixes commands with it so that a command is inside its limits
 * before its first instruction (moving it after spawning would race with
 * the children it forks).  Internal: not in --help.
 */
static int cmd_cgroup_exec(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		FILE *f = fopen(argv[i], "we");

		if (!f || fputs("0\n", f) == EOF || fclose(f) == EOF) {
			fprintf(stderr, "sandgate: cannot join the cgroup %s: %s\n",
				argv[i], strerror(errno));
			return 126;
		}
	}
	if (i + 1 >= argc) {
		fprintf(stderr, "sandgate: __cgroup-exec needs -- and a command\n");
		return 126;
	}
	execvp(argv[i + 1], argv + i + 1);
	fprintf(stderr, "sandgate: %s: %s\n", argv[i + 1], strerror(errno));
	return 127;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "__cgroup-exec") == 0)
		return cmd_cgroup_exec(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "serve") == 0)
		return cmd_serve(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "config") == 0)
		return cmd_config(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "envs") == 0)
		return cmd_envs(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "probe") == 0)
		return cmd_probe(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
		sg_cli_printf("sandgate %s (protocol 4)\n", SG_VERSION);
		return 0;
	}
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		sg_cli_printf("%s", usage);
		return 0;
	}
	fputs(usage, stderr);
	return EX_USAGE;
}
