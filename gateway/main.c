/*
 * main.c - the sandgate command line: one function per command of the
 * table in cli.c, which also parses the options and writes every help.
 *
 * Everything here runs before any thread starts, so getopt_long is safe.
 */
#define _GNU_SOURCE /* getopt_long, readlink of /proc/self/exe */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <getopt.h>
#include <poll.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "base/cancel.h"
#include "base/fsutil.h"
#include "base/limits.h"
#include "base/log.h"
#include "base/progress.h"
#include "gateway/budget.h"
#include "gateway/check.h"
#include "gateway/cli.h"
#include "gateway/envs.h"
#include "gateway/reaper.h"
#include "gateway/server.h"
#include "gateway/wire.h"
#include "sg_config.h"

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

/* Load the config (NULL: the default place); 78 with the reason on stderr. */
static int load_config(const char *path, struct sg_config **cfg, struct sg_errinfo *err)
{
	char *def = path ? NULL : sg_config_default_path();
	int status = SG_EXIT_OK;

	if (sg_config_load(path ? path : def, cfg, err))
		status = SG_EXIT_CONFIG;
	free(def);
	return status;
}

/* The state directory (state_dir_of), made if missing; *dir becomes the
 * absolute path and *own what to free. */
static int state_dir(const char **dir, char **own)
{
	*dir = *own = state_dir_of(*dir);
	if (!*dir)
		return SG_EXIT_CONFIG; /* a relative XDG_STATE_HOME or HOME, said why */
	if (sg_mkdir_p(*dir, 0700)) {
		fprintf(stderr, "sandgate: cannot create the state directory %s: %s\n",
			*dir ? *dir : "(none)", strerror(errno));
		return SG_EXIT_CANTCREAT;
	}
	return SG_EXIT_OK;
}

/* Parse a number from min to max, or name the option's mistake (64). */
static int number(const struct sg_cli_cmd *cmd, const char *opt, const char *s,
		  long long min, long long max, long long *out)
{
	char *end;

	errno = 0;
	*out = strtoll(s, &end, 10);
	if (end == s || *end || errno || *out < min || *out > max)
		return sg_cli_usage_error(cmd, "%s must be a number from %lld to %lld, not '%s'",
					  opt, min, max, s);
	return SG_EXIT_OK;
}

static int cmd_serve(const struct sg_cli_cmd *cmd, int argc, char **argv)
{
	struct sg_server_opts o = { 0 };
	struct sg_errinfo err = { 0 };
	const char *config = NULL, *arg;
	char *state = NULL, *helper = NULL;
	struct sg_config *cfg = NULL;
	enum sg_log_level level;
	int c, first, status = -1;
	long long v;

	while (status < 0 && (c = sg_cli_next(cmd, argc, argv, &arg, &first, &status))) {
		switch (c) {
		case 'c': config = arg; break;
		case 'p': o.profile = arg; break;
		case 's': o.state_dir = arg; break;
		case 'a': o.audit_log = arg; break;
		case 'l':
			if (!sg_log_parse_level(arg, &level))
				return sg_cli_usage_error(cmd, "--log-level must be error, warn, info or debug, not '%s'", arg);
			sg_log_set_level(level);
			break;
		case 'b':
			if ((status = number(cmd, "--shutdown-budget-ms", arg, 1, 2147483647, &v)))
				return status;
			status = -1;
			o.budget_ms = v;
			break;
		case 'm':
			if ((status = number(cmd, "--max-output", arg, 1024,
					     (long long)SG_TOOL_OUTPUT_MAX, &v)))
				return status;
			status = -1;
			o.tool_output = (size_t)v;
			break;
		case 'P': o.peer = true; break;
		case 'T': o.toolchains = true; break;
		}
	}
	if (status >= 0)
		return status;
	/* Before the first frame: a profile serve cannot serve ends here. */
	status = load_config(config, &cfg, &err);
	if (!status && sg_profile_check(cfg, o.profile, NULL, &err)) {
		status = SG_EXIT_CONFIG;
		fprintf(stderr, "sandgate serve: %s: %s\n", sg_err_word(err.code), err.msg);
	} else if (status) {
		fprintf(stderr, "sandgate serve: %s\n", err.msg);
	}
	if (!status)
		status = state_dir(&o.state_dir, &state);
	if (status)
		goto out;
	helper = find_helper();
	if (!helper) {
		fprintf(stderr, "sandgate serve: sg-helper was not found beside sandgate or in ../libexec/sandgate/; set SANDGATE_HELPER\n");
		status = SG_EXIT_CONFIG;
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

/* ---- probe ---- */

struct probe_run {
	struct sg_buf out, err;  /* the child's stdout and stderr, by line */
	json_t *init, *cmd;      /* the two replies */
	json_t *steps;           /* step -> {ms, ok}, from its progress lines */
	int64_t t_init, t_cmd;   /* when each request was written */
	int64_t init_ms, cmd_ms; /* how long each reply took, or -1 */
	char step[32];           /* the step being shown (progress.h borrows it) */
	int in;                  /* the child's stdin, -1 once closed */
};

static void probe_close_in(struct probe_run *r)
{
	if (r->in >= 0)
		close(r->in);
	r->in = -1;
}

static bool send_line(int fd, const char *line)
{
	size_t n = strlen(line);

	return write(fd, line, n) == (ssize_t)n;
}

/* A progress line of the child: kept for the report and shown here. */
static void probe_progress(struct probe_run *r, json_t *j)
{
	const char *step = json_string_value(json_object_get(j, "progress"));
	const char *event = json_string_value(json_object_get(j, "event"));
	const char *text = json_string_value(json_object_get(j, "text"));

	if (!step || !event)
		return;
	if (strcmp(event, "begin") == 0) {
		snprintf(r->step, sizeof(r->step), "%s", step);
		sg_progress_begin(r->step, "%s", text ? text : "");
	} else if (strcmp(event, "update") == 0) {
		sg_progress_update("%s", text ? text : "");
	} else if (strcmp(event, "end") == 0) {
		bool ok = json_is_true(json_object_get(j, "ok"));

		sg_progress_end(ok ? SG_OK : SG_E_UNAVAILABLE);
		json_object_set_new(r->steps, step,
				    json_pack("{s:O, s:b}", "ms", json_object_get(j, "ms"), "ok", ok));
	}
}

/* Complete lines of b: replies from stdout, progress from stderr. */
static void probe_lines(struct probe_run *r, struct sg_buf *b, bool is_err)
{
	char *nl;

	while ((nl = memchr(b->p, '\n', b->len))) {
		size_t n = (size_t)(nl - b->p) + 1;
		json_t *j = json_loadb(b->p, n - 1, 0, NULL);
		const char *id = json_string_value(json_object_get(j, "id"));

		if (is_err && json_object_get(j, "progress")) {
			probe_progress(r, j);
		} else if (is_err) {
			fprintf(stderr, "%.*s", (int)n, b->p);
		} else if (id && strcmp(id, "probe") == 0 && !r->init) {
			r->init = json_incref(j);
			r->init_ms = sg_now_ms() - r->t_init;
			r->t_cmd = sg_now_ms();
			/* The first command: what a tool call costs once ready. */
			if (!json_object_get(j, "data") ||
			    !send_line(r->in, "{\"id\":\"probe-cmd\",\"method\":\"execute\",\"token\":\"probe\","
					   "\"data\":{\"call\":{\"id\":\"c1\",\"name\":\"bash\","
					   "\"arguments\":\"{\\\"command\\\":\\\"true\\\"}\",\"kind\":\"function\"},"
					   "\"permission_mode\":\"standard\",\"actor\":\"probe\"}}\n"))
				probe_close_in(r);
		} else if (id && strcmp(id, "probe-cmd") == 0 && !r->cmd) {
			r->cmd = json_incref(j);
			r->cmd_ms = sg_now_ms() - r->t_cmd;
			probe_close_in(r);
		}
		json_decref(j);
		sg_buf_consume(b, n);
	}
}

/*
 * Run argv (this binary as `serve`, progress as JSON on its stderr), send
 * the initialize, then one bash command, keeping stdin open until each reply
 * arrived (an EOF earlier would cancel the request); then close stdin and
 * wait for the clean shutdown.
 */
static int probe_session(const char *const *argv, const char *init, struct probe_run *r)
{
	extern char **environ;
	posix_spawn_file_actions_t fa;
	int in[2], out[2], err[2], st, rc = -1;
	size_t nenv = 0;
	char **env;
	pid_t pid;

	for (char **e = environ; *e; e++)
		nenv++;
	env = calloc(nenv + 2, sizeof(char *));
	if (!env || pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) {
		free(env);
		return -1;
	}
	nenv = 0;
	for (char **e = environ; *e; e++)
		if (strncmp(*e, "SANDGATE_PROGRESS=", 18) != 0)
			env[nenv++] = *e;
	env[nenv] = "SANDGATE_PROGRESS=json";
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_adddup2(&fa, err[1], 2);
	if (posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, env) == 0) {
		struct pollfd pf[2] = { { .fd = out[0], .events = POLLIN },
					{ .fd = err[0], .events = POLLIN } };
		struct sg_buf *bufs[2] = { &r->out, &r->err };
		int open_fds = 2;

		close(in[0]);
		close(out[1]);
		close(err[1]);
		r->in = in[1];
		r->t_init = sg_now_ms();
		if (!send_line(r->in, init))
			probe_close_in(r);
		while (open_fds > 0 && poll(pf, 2, -1) >= 0) {
			for (int i = 0; i < 2; i++) {
				char *dst;
				ssize_t got = 0;

				if (pf[i].fd < 0 || !pf[i].revents)
					continue;
				if (sg_buf_reserve(bufs[i], 65536, &dst) == SG_OK)
					got = read(pf[i].fd, dst, 65536);
				if (got <= 0) {
					close(pf[i].fd);
					pf[i].fd = -1;
					open_fds--;
					continue;
				}
				sg_buf_commit(bufs[i], (size_t)got);
				probe_lines(r, bufs[i], i == 1);
			}
		}
		probe_close_in(r);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		rc = 0;
	} else {
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		close(err[0]);
		close(err[1]);
	}
	posix_spawn_file_actions_destroy(&fa);
	free(env);
	return rc;
}

/* A report on stdout, as indented JSON. */
static void dump_json(const json_t *report)
{
	char *text = json_dumps(report, JSON_INDENT(2) | JSON_SORT_KEYS);

	sg_cli_printf("%s\n", text ? text : "{}");
	free(text);
}

static const char *str_or(json_t *j, const char *key, const char *def)
{
	const char *v = json_string_value(json_object_get(j, key));

	return v ? v : def;
}

/* The shutdown budgets (config check, probe). */

/*
 * The shutdown report of profile `name` (budget.h), or NULL (a select
 * profile, or one that does not build).
 */
static json_t *shutdown_report(const struct sg_config *cfg, const char *name,
			       const char *state)
{
	struct sg_errinfo ignore = { 0 };
	struct sg_profile *p = NULL;
	json_t *report = NULL;

	if (sg_config_profile(cfg, name, NULL, &p, &ignore) == SG_OK)
		report = sg_budget_report(p, state);
	sg_profile_free(p);
	return report;
}

/* The report as text: what the cleanup needs, each budget, the warnings. */
static void print_shutdown(const char *indent, json_t *sh)
{
	json_t *v;
	size_t i;

	if (!sh)
		return;
	sg_cli_printf("%sshutdown needs %lld ms:", indent,
		(long long)json_integer_value(json_object_get(sh, "needs_ms")));
	json_array_foreach(json_object_get(sh, "steps"), i, v)
		sg_cli_printf("%s %s %lld ms%s", i ? "," : "", str_or(v, "step", "?"),
			(long long)json_integer_value(json_object_get(v, "ms")),
			!json_object_get(v, "measured") ? ""
			: json_is_true(json_object_get(v, "measured")) ? " (measured)"
								      : " (default)");
	sg_cli_printf("\n");
	json_array_foreach(json_object_get(sh, "budgets"), i, v)
		sg_cli_printf("%s%s budget %lld ms (%s): %s\n", indent, str_or(v, "role", "?"),
			(long long)json_integer_value(json_object_get(v, "ms")), str_or(v, "from", "?"),
			json_is_true(json_object_get(v, "enough")) ? "enough" : "too short");
	json_array_foreach(json_object_get(sh, "warnings"), i, v)
		sg_cli_printf("%swarning: %s\n", indent, json_string_value(v));
}

static void probe_print(json_t *report)
{
	json_t *facts = json_object_get(report, "facts"), *v;
	json_t *creds = json_object_get(report, "credentials");
	json_t *timings = json_object_get(report, "timings");
	const char *k;

	sg_cli_printf("profile      %s (%s)\n", str_or(report, "profile", "?"),
		str_or(report, "backend", "?"));
	sg_cli_printf("credentials  ");
	json_object_foreach(creds, k, v)
		sg_cli_printf("%s=%s ", k, json_string_value(v));
	sg_cli_printf("%s\n", json_object_size(creds) ? "" : "none needed");
	sg_cli_printf("reachable    %s\n", facts ? "yes" : "no");
	if (json_object_get(report, "error"))
		sg_cli_printf("error        %s\n", str_or(report, "error", ""));
	json_object_foreach(json_object_get(facts, "isolation"), k, v)
		sg_cli_printf("isolation    %-30s %s\n", k, json_is_true(v) ? "yes" : "no");
	json_object_foreach(json_object_get(facts, "toolchains"), k, v)
		sg_cli_printf("toolchain    %-30s %s\n", k, json_string_value(v));
	sg_cli_printf("safety_class %s\nmechanism    %s\n", str_or(facts, "safety_class", "-"),
		str_or(facts, "mechanism", "-"));
	json_object_foreach(json_object_get(timings, "steps"), k, v)
		sg_cli_printf("time         %-30s %lld ms%s\n", k,
			(long long)json_integer_value(json_object_get(v, "ms")),
			json_is_true(json_object_get(v, "ok")) ? "" : " (failed)");
	json_object_foreach(timings, k, v)
		if (json_is_integer(v))
			sg_cli_printf("time         %-30s %lld ms\n", k,
				(long long)json_integer_value(v));
	print_shutdown("", json_object_get(report, "shutdown"));
}

/*
 * The profile cannot be probed (no config, or the profile does not build):
 * the same words as `config check` and serve's startup.
 */
static void probe_refused(const struct sg_config *cfg, const char *profile,
			  const struct sg_errinfo *err, bool as_json)
{
	char text[SG_ERR_MSG + 64];
	json_t *report;

	sg_err_format(err, text, sizeof(text));
	if (as_json && cfg) {
		report = json_pack("{s:s, s:b, s:s}", "profile",
				   profile ? profile : sg_config_default(cfg),
				   "reachable", 0, "error", text);
		dump_json(report);
		json_decref(report);
	}
	fprintf(stderr, "sandgate probe: %s\n", text);
}

/*
 * Run the session: this binary as `serve` with the probe's state directory
 * and the caller's config and profile, sent one initialize whose identity
 * is new.  0, or -1 with errno.
 */
static int probe_start(const char *config, const char *profile, const char *state,
		       int64_t t0, struct probe_run *r, char **line)
{
	char self[PATH_MAX], ident[64];
	/* The toolchains are part of what a probe reports (protocol.md section 5). */
	const char *av[10] = { self, "serve", "--toolchains", "--state-dir", state };
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	size_t k = 5;

	self[n > 0 ? n : 0] = '\0';
	snprintf(ident, sizeof(ident), "probe-%ld-%lld", (long)getpid(), (long long)t0);
	if (asprintf(line,
		     "{\"id\":\"probe\",\"method\":\"initialize\",\"token\":\"probe\","
		     "\"data\":{\"version\":4,\"root\":\"/workspace\",\"session\":\"%s\","
		     "\"remove_workspace_on_exit\":true}}\n", ident) < 0) {
		*line = NULL;
		errno = ENOMEM;
		return -1;
	}
	if (config) {
		av[k++] = "--config";
		av[k++] = config;
	}
	if (profile) {
		av[k++] = "--profile";
		av[k++] = profile;
	}
	return probe_session(av, *line, r);
}

/*
 * The report of a finished session: the profile, the credentials found,
 * whether initialize answered, the timings, the facts, and the first error
 * (initialize's, else the first command's).  New reference, or NULL.
 */
static json_t *probe_report(const struct sg_profile *p, json_t *creds,
			    const struct probe_run *r, int64_t t0)
{
	json_t *data = json_object_get(r->init, "data");
	json_t *report = json_pack("{s:s, s:s, s:O, s:b, s:I, s:{s:O}}", "profile", p->name,
				   "backend", p->backend, "credentials", creds, "reachable",
				   data != NULL, "duration_ms",
				   (json_int_t)(sg_now_ms() - t0), "timings", "steps", r->steps);

	if (r->init_ms >= 0)
		json_object_set_new(json_object_get(report, "timings"), "initialize_ms",
				    json_integer(r->init_ms));
	if (r->cmd_ms >= 0)
		json_object_set_new(json_object_get(report, "timings"), "first_command_ms",
				    json_integer(r->cmd_ms));
	if (data)
		json_object_set(report, "facts",
				json_object_get(json_object_get(data, "environment"), "facts"));
	else
		json_object_set_new(report, "error",
				    json_string(str_or(r->init, "error", "the probe session gave no reply")));
	if (json_object_get(report, "facts") && !json_object_get(r->cmd, "data"))
		json_object_set_new(report, "error",
				    json_string(str_or(r->cmd, "error", "the first command got no reply")));
	return report;
}

/*
 * `sandgate probe`: a real, throwaway session of the profile (this binary
 * as `serve`, an initialize with a fresh identity and removal at exit), and
 * a report of what was observed: credentials found (never values), whether
 * the backend answered, the facts inside, and where the time went.
 */
static int cmd_probe(const struct sg_cli_cmd *cmd, int argc, char **argv)
{
	const char *config = NULL, *profile = NULL, *state = NULL, *backend, *arg;
	char *own_state = NULL, *line = NULL;
	struct probe_run r = { .out = SG_BUF_INIT(SG_MAX_FRAME), .err = SG_BUF_INIT(SG_MAX_FRAME),
			       .init_ms = -1, .cmd_ms = -1, .in = -1 };
	struct sg_errinfo err = { 0 };
	struct sg_config *cfg = NULL;
	struct sg_profile *p = NULL;
	json_t *report = NULL, *creds = json_object(), *sh;
	const struct sg_adapter *ad;
	int64_t t0 = sg_now_ms();
	bool as_json = false;
	int c, first, status = -1;

	while (status < 0 && (c = sg_cli_next(cmd, argc, argv, &arg, &first, &status))) {
		switch (c) {
		case 'c': config = arg; break;
		case 'p': profile = arg; break;
		case 's': state = arg; break;
		case 'j': as_json = true; break;
		}
	}
	if (status >= 0)
		goto out;
	status = load_config(config, &cfg, &err);
	if (!status && (sg_profile_check(cfg, profile, &backend, &err) ||
			sg_config_profile(cfg, profile, NULL, &p, &err)))
		status = SG_EXIT_CONFIG;
	if (status) {
		probe_refused(cfg, profile, &err, as_json);
		goto out;
	}
	ad = sg_adapter_find(p->backend);
	if (ad && ad->credentials)
		ad->credentials(p, creds);
	else if (ad)
		sg_profile_credentials(p, creds);
	status = state_dir(&state, &own_state);
	if (status)
		goto out;
	r.steps = json_object();
	if (!r.steps) {
		status = SG_EXIT_SOFTWARE;
		goto out;
	}
	if (probe_start(config, profile, state, t0, &r, &line)) {
		/* No line is out of memory, which the status alone reports. */
		if (line)
			fprintf(stderr, "sandgate probe: cannot run the probe session: %s\n",
				strerror(errno));
		status = SG_EXIT_SOFTWARE;
		goto out;
	}
	report = probe_report(p, creds, &r, t0);
	/* After the session: its own cleanup was just measured. */
	sh = shutdown_report(cfg, profile, state);
	if (sh)
		json_object_set_new(report, "shutdown", sh);
	if (as_json) {
		dump_json(report);
	} else {
		probe_print(report);
	}
	status = json_object_get(report, "error") ? SG_EXIT_UNAVAILABLE : SG_EXIT_OK;
out:
	sg_buf_release(&r.out);
	sg_buf_release(&r.err);
	json_decref(r.init);
	json_decref(r.cmd);
	json_decref(r.steps);
	json_decref(report);
	json_decref(creds);
	sg_profile_free(p);
	sg_config_free(cfg);
	free(own_state);
	free(line);
	return status;
}

/* ---- config check ---- */

/*
 * One profile's line of the check (and its shutdown budgets when it
 * builds), appended to report's profiles.  SG_EXIT_CONFIG when it does not
 * build, else 0.
 */
static int check_profile(const struct sg_config *cfg, const char *name, const char *state,
			 bool as_json, json_t *report)
{
	json_t *list = json_object_get(report, "profiles"), *sh = NULL;
	struct sg_errinfo err = { 0 };
	const char *backend = "?";
	char word[SG_ERR_MSG + 64];
	int status = 0;

	if (sg_profile_check(cfg, name, &backend, &err)) {
		sg_err_format(&err, word, sizeof(word));
		json_array_append_new(list, json_pack("{s:s, s:s, s:b, s:s}", "name", name,
						      "backend", backend, "ok", 0,
						      "error", word));
		json_object_set_new(report, "ok", json_false());
		status = SG_EXIT_CONFIG;
	} else {
		snprintf(word, sizeof(word), "ok");
		sh = shutdown_report(cfg, name, state);
		json_array_append_new(list, json_pack("{s:s, s:s, s:b}", "name", name,
						      "backend", backend, "ok", 1));
		if (sh)
			json_object_set_new(json_array_get(list, json_array_size(list) - 1),
					    "shutdown", sh);
	}
	if (!as_json) {
		sg_cli_printf("%s: profile \"%s\" (%s): %s\n", sg_config_path(cfg), name,
			backend, word);
		print_shutdown("  ", sh);
	}
	return status;
}

static int cmd_config_check(const struct sg_cli_cmd *cmd, int argc, char **argv)
{
	const char *config = NULL, *only = NULL, *given_state = NULL, *arg;
	struct sg_errinfo err = { 0 };
	struct sg_config *cfg = NULL;
	json_t *report = NULL, *list;
	char *state = NULL;
	bool as_json = false;
	int c, first, status = -1;

	while (status < 0 && (c = sg_cli_next(cmd, argc, argv, &arg, &first, &status))) {
		switch (c) {
		case 'c': config = arg; break;
		case 'p': only = arg; break;
		case 's': given_state = arg; break;
		case 'j': as_json = true; break;
		}
	}
	if (status >= 0)
		return status;
	/* Only read, for the measured cleanup times: never created here. */
	state = state_dir_of(given_state);
	report = json_pack("{s:b, s:[]}", "ok", 1, "profiles");
	list = json_object_get(report, "profiles");
	status = load_config(config, &cfg, &err);
	if (status) {
		/* The file as a whole: its message names it already. */
		json_object_set_new(report, "ok", json_false());
		json_object_set_new(report, "error", json_string(err.msg));
		if (!as_json)
			sg_cli_printf("%s\n", err.msg);
		goto print;
	}
	json_object_set_new(report, "config", json_string(sg_config_path(cfg)));
	json_object_set_new(report, "default", json_string(sg_config_default(cfg)));
	for (const char *const *n = sg_config_names(cfg); *n; n++)
		if ((!only || strcmp(only, *n) == 0) &&
		    check_profile(cfg, *n, state, as_json, report))
			status = SG_EXIT_CONFIG;
	if (only && json_array_size(list) == 0) {
		sg_err_clear(&err);
		if (sg_profile_check(cfg, only, NULL, &err) == SG_OK)
			sg_err_set(&err, SG_E_NOT_FOUND, "no profile \"%s\"", only);
		json_object_set_new(report, "ok", json_false());
		json_object_set_new(report, "error", json_string(err.msg));
		if (!as_json)
			sg_cli_printf("%s\n", err.msg);
		status = SG_EXIT_CONFIG;
	}
print:
	if (as_json)
		dump_json(report);
	json_decref(report);
	sg_config_free(cfg);
	free(state);
	return status;
}

/* ---- envs ---- */

static int cmd_envs(const struct sg_cli_cmd *cmd, const char *sub, int argc, char **argv)
{
	struct sg_envs_args a = { .older_than = -1 };
	const char *config = NULL, *state = NULL, *arg;
	struct sg_errinfo err = { 0 };
	struct sg_config *cfg = NULL;
	char *own = NULL;
	int c, first, status = -1;

	while (status < 0 && (c = sg_cli_next(cmd, argc, argv, &arg, &first, &status))) {
		switch (c) {
		case 'c': config = arg; break;
		case 's': state = arg; break;
		case 'p': a.profile = arg; break;
		case 'j': a.json = true; break;
		case 'f': a.force = true; break;
		case 'n': a.dry_run = true; break;
		case 'o':
			if (sg_envs_duration(arg, &a.older_than))
				return sg_cli_usage_error(cmd, "--older-than: '%s' is not a duration (N, Ns, Nm, Nh or Nd)", arg);
			break;
		}
	}
	if (status >= 0)
		return status;
	a.ids = argv + first;
	a.nids = argc - first;
	status = load_config(config, &cfg, &err);
	if (status)
		fprintf(stderr, "sandgate %s: %s\n", cmd->name, err.msg);
	else
		status = state_dir(&state, &own);
	if (!status)
		status = sg_envs_run(sub, &a, cfg, state);
	sg_config_free(cfg);
	free(own);
	return status;
}

/* ---- help and version ---- */

/* `sandgate config --help`, `sandgate envs`: the group's commands. */
static int group_help(const char *group, FILE *out)
{
	char *text = NULL;
	size_t len = 0;

	if (!out) {
		/* stdout is written only through sg_cli_printf (wire.h). */
		FILE *mem = open_memstream(&text, &len);

		if (!mem)
			return SG_EXIT_SOFTWARE;
		group_help(group, mem);
		fclose(mem);
		sg_cli_printf("%s", text);
		free(text);
		return SG_EXIT_OK;
	}
	static const char *const subs[] = { "config check", "envs list", "envs show",
					    "envs rm", "envs gc", NULL };

	fprintf(out, "usage:\n");
	for (size_t i = 0; subs[i]; i++) {
		const struct sg_cli_cmd *c = sg_cli_find(subs[i]);

		if (strncmp(subs[i], group, strlen(group)) == 0 && subs[i][strlen(group)] == ' ')
			fprintf(out, "  sandgate %s%s%s [options]\n", c->name, c->operands ? " " : "",
				c->operands ? c->operands : "");
	}
	fprintf(out, "Run 'sandgate %s SUBCOMMAND --help' for one's options.\n", group);
	return 0;
}

static int cmd_help(const struct sg_cli_cmd *cmd, int argc, char **argv)
{
	const char *arg;
	char name[64];
	int first, status = -1;

	while (status < 0 && sg_cli_next(cmd, argc, argv, &arg, &first, &status))
		;
	if (status >= 0)
		return status;
	if (first == argc) {
		sg_cli_help(NULL, NULL);
		return SG_EXIT_OK;
	}
	snprintf(name, sizeof(name), "%s%s%s", argv[first], first + 1 < argc ? " " : "",
		 first + 1 < argc ? argv[first + 1] : "");
	if (sg_cli_find(name)) {
		sg_cli_help(NULL, sg_cli_find(name));
		return SG_EXIT_OK;
	}
	if (first + 1 == argc && (strcmp(name, "config") == 0 || strcmp(name, "envs") == 0))
		return group_help(name, NULL);
	return sg_cli_usage_error(cmd, "unknown command '%s'", name);
}

static int cmd_version(const struct sg_cli_cmd *cmd, int argc, char **argv)
{
	const char *arg;
	bool as_json = false;
	int c, first, status = -1;

	while (status < 0 && (c = sg_cli_next(cmd, argc, argv, &arg, &first, &status)))
		as_json = as_json || c == 'j';
	if (status >= 0)
		return status;
	if (as_json) {
		json_t *v = json_pack("{s:s, s:i, s:[]}", "version", SG_VERSION, "protocol", 4,
				      "backends");
		char *text;

		for (const struct sg_adapter *const *a = sg_adapter_all(); *a; a++)
			json_array_append_new(json_object_get(v, "backends"),
					      json_string((*a)->name));
		text = json_dumps(v, JSON_COMPACT);
		sg_cli_printf("%s\n", text ? text : "{}");
		free(text);
		json_decref(v);
	} else {
		sg_cli_printf("sandgate %s (protocol 4; backends: %s)\n", SG_VERSION,
			sg_cli_backends());
	}
	return SG_EXIT_OK;
}

int main(int argc, char **argv)
{
	const struct sg_cli_cmd *cmd;
	const char *word = argc >= 2 ? argv[1] : NULL;
	char name[64];

	if (!word)
		return sg_cli_usage_error(NULL, "no command given (serve, config check, envs, probe, help, version)");
	sg_reaper_enable();
	if ((strcmp(word, "__man") == 0 || strcmp(word, "__bash") == 0) && argc == 3) {
		/* Internal: the build writes the man page and the completion. */
		FILE *f = fopen(argv[2], "we");

		if (!f)
			return SG_EXIT_CANTCREAT;
		if (word[2] == 'm')
			sg_cli_man(f, SG_VERSION);
		else
			sg_cli_bash(f);
		return fclose(f) == 0 ? SG_EXIT_OK : SG_EXIT_CANTCREAT;
	}
	/* Internal: a removal that outlives its gateway (reaper.h). */
	if (strcmp(word, "__reap") == 0)
		return sg_reaper_main(argc, argv);
	if (strcmp(word, "--help") == 0 || strcmp(word, "-h") == 0) {
		sg_cli_help(NULL, NULL);
		return SG_EXIT_OK;
	}
	if (strcmp(word, "--version") == 0)
		return cmd_version(sg_cli_find("version"), argc - 1, argv + 1);
	if (strcmp(word, "config") == 0 || strcmp(word, "envs") == 0) {
		if (argc < 3 || argv[2][0] == '-') {
			if (argc >= 3 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0))
				return group_help(word, NULL);
			group_help(word, stderr);
			return sg_cli_usage_error(NULL, "'%s' needs a subcommand", word);
		}
		snprintf(name, sizeof(name), "%s %s", word, argv[2]);
		cmd = sg_cli_find(name);
		if (!cmd) {
			group_help(word, stderr);
			return sg_cli_usage_error(NULL, "unknown command '%s'", name);
		}
		if (word[0] == 'c')
			return cmd_config_check(cmd, argc - 2, argv + 2);
		return cmd_envs(cmd, argv[2], argc - 2, argv + 2);
	}
	cmd = word[0] == '-' ? NULL : sg_cli_find(word);
	if (!cmd && word[0] == '-')
		return sg_cli_usage_error(NULL, "unknown option '%s'", word);
	if (!cmd)
		return sg_cli_usage_error(NULL, "unknown command '%s'", word);
	if (strcmp(word, "serve") == 0)
		return cmd_serve(cmd, argc - 1, argv + 1);
	if (strcmp(word, "probe") == 0)
		return cmd_probe(cmd, argc - 1, argv + 1);
	if (strcmp(word, "help") == 0)
		return cmd_help(cmd, argc - 1, argv + 1);
	return cmd_version(cmd, argc - 1, argv + 1);
}
