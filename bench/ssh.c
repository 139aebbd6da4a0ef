/*
 * ssh.c - the ssh set: bash and read_file against a raw multiplexed
 * client of this program's own (S1, S2), the export of a file made on the
 * host (S3), and the ssh client runs per tool call, counted by a second
 * gateway whose PATH starts with a counting client (S4).
 */
#include "bench/sgbench.h"

/* The first executable `name` on PATH (new), or NULL. */
static char *find_on_path(const char *name)
{
	const char *path = getenv("PATH"), *p, *end;

	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (p = path; *p; p = *end ? end + 1 : end) {
		char *cand;

		end = strchr(p, ':');
		if (!end)
			end = p + strlen(p);
		if (end == p || *p != '/')
			continue;
		cand = xasprintf("%.*s/%s", (int)(end - p), p, name);
		if (access(cand, X_OK) == 0)
			return cand;
		free(cand);
	}
	return NULL;
}

/* A profile's path field with "~/" expanded (new), or NULL when absent. */
static char *profile_path(json_t *prof, const char *key)
{
	const char *v = json_string_value(json_object_get(prof, key));
	const char *home = getenv("HOME");

	if (!v)
		return NULL;
	if (strncmp(v, "~/", 2) == 0 && home)
		return xasprintf("%s/%s", home, v + 2);
	return xasprintf("%s", v);
}

/*
 * The host, port, user, key and known hosts of the ssh profile, read from
 * the same config file the gateway reads, so the raw client reaches the
 * same sshd the same way.
 */
void ssh_target_load(struct ssh_target *t, const struct opts *o)
{
	json_t *cfg, *prof;
	const char *name, *v;

	memset(t, 0, sizeof(*t));
	prof = bench_profile(o, "the ssh set needs --config FILE (to reach the host without sandgate)",
			     &cfg, &name);
	v = json_string_value(json_object_get(prof, "backend"));
	if (!v || strcmp(v, "ssh") != 0)
		die("profile %s is not on the ssh backend", name);
	v = json_string_value(json_object_get(prof, "host"));
	if (!v)
		die("profile %s has no host", name);
	t->host = xasprintf("%s", v);
	v = json_string_value(json_object_get(prof, "user"));
	t->user = v ? xasprintf("%s", v) : NULL;
	t->port = (long)json_integer_value(json_object_get(prof, "port"));
	t->key = profile_path(prof, "identity_file");
	t->known_hosts = profile_path(prof, "known_hosts_file");
	t->dest = t->user ? xasprintf("%s@%s", t->user, t->host) : xasprintf("%s", t->host);
	t->ssh = find_on_path("ssh");
	if (!t->ssh)
		die("no ssh client on PATH");
	json_decref(cfg);
}

void ssh_target_free(struct ssh_target *t)
{
	free(t->ssh);
	free(t->host);
	free(t->user);
	free(t->key);
	free(t->known_hosts);
	free(t->dest);
	free(t->sock);
	free(t->directory);
}

/* Run argv with stdio on /dev/null and stderr into log; its exit status. */
static int run_quiet(char *const *argv, const char *log)
{
	posix_spawn_file_actions_t fa;
	int status = -1, e;
	pid_t pid;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_APPEND, 0600);
	e = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (e)
		die("cannot spawn %s: %s", argv[0], strerror(e));
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/*
 * This program's own ControlMaster to the profile's host, with the same
 * key and known hosts as the gateway and strict host key checking, so the
 * raw clients below pay only what a multiplexed session costs.
 */
void ssh_master_open(struct ssh_target *t, const char *state)
{
	char *argv[32], *log = xasprintf("%s/raw-ssh.log", state);
	char *kh = NULL, *ctl, *port = NULL;
	int k = 0;

	t->sock = xasprintf("%s/raw.sock", state);
	if (strchr(t->sock, '%') || strlen(t->sock) > 90)
		die("the state directory %s cannot hold an ssh control socket", state);
	ctl = xasprintf("ControlPath=%s", t->sock);
	argv[k++] = t->ssh;
	argv[k++] = "-o";
	argv[k++] = "ControlMaster=yes";
	argv[k++] = "-o";
	argv[k++] = ctl;
	argv[k++] = "-o";
	argv[k++] = "ControlPersist=60";
	argv[k++] = "-o";
	argv[k++] = "BatchMode=yes";
	argv[k++] = "-o";
	argv[k++] = "StrictHostKeyChecking=yes";
	if (t->known_hosts) {
		kh = xasprintf("UserKnownHostsFile=%s", t->known_hosts);
		argv[k++] = "-o";
		argv[k++] = kh;
		argv[k++] = "-o";
		argv[k++] = "GlobalKnownHostsFile=none";
	}
	if (t->key) {
		argv[k++] = "-o";
		argv[k++] = "IdentitiesOnly=yes";
		argv[k++] = "-i";
		argv[k++] = t->key;
	}
	if (t->port) {
		port = xasprintf("%ld", t->port);
		argv[k++] = "-p";
		argv[k++] = port;
	}
	argv[k++] = "-N";
	argv[k++] = "-f";
	argv[k++] = "--";
	argv[k++] = t->dest;
	argv[k] = NULL;
	if (run_quiet(argv, log) != 0)
		die("cannot open a ControlMaster to %s (see %s)", t->dest, log);
	free(log);
	free(kh);
	free(ctl);
	free(port);
}

void ssh_master_close(const struct ssh_target *t, const char *state)
{
	char *log = xasprintf("%s/raw-ssh.log", state);
	char *argv[] = { t->ssh, "-S", t->sock, "-O", "exit", "--", t->dest, NULL };

	if (run_quiet(argv, log) != 0)
		fprintf(stderr, "sgbench: the raw ControlMaster did not exit cleanly (see %s)\n",
			log);
	free(log);
}

/* The raw client: `ssh -S <socket> [-p PORT] user@host <words...>` (new). */
static char **ssh_raw_argv(const struct ssh_target *t, const char *const *words)
{
	char **v = calloc(16, sizeof(*v));
	size_t k = 0;

	if (!v)
		die("out of memory");
	v[k++] = xasprintf("%s", t->ssh);
	v[k++] = xasprintf("-S");
	v[k++] = xasprintf("%s", t->sock);
	if (t->port) {
		v[k++] = xasprintf("-p");
		v[k++] = xasprintf("%ld", t->port);
	}
	v[k++] = xasprintf("%s", t->dest);
	for (size_t i = 0; words[i] && k < 15; i++)
		v[k++] = xasprintf("%s", words[i]);
	return v;
}

static char *argv_text(char *const *v)
{
	json_t *a = json_array();
	char *s;

	for (size_t i = 0; v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	s = json_dumps(a, JSON_COMPACT);
	json_decref(a);
	if (!s)
		die("out of memory");
	return s;
}

/* A bash call of `command` that exited 0; its stdout (new). */
static char *run_shell(struct gw *g, const char *command)
{
	char *data = execute_data("bash", json_pack("{s:s, s:i}", "command", command,
						     "timeout_seconds", 120));
	json_t *f, *d, *sc;
	char *out;

	f = gw_reply(g, gw_send(g, "execute", data), NULL);
	free(data);
	d = check_tool(f, command);
	sc = json_object_get(d, "structured_content");
	if (!json_is_integer(json_object_get(sc, "exit_code")) ||
	    json_integer_value(json_object_get(sc, "exit_code")) != 0)
		die("bash %s: %.300s", command, tool_text(d));
	out = xasprintf("%s", json_string_value(json_object_get(sc, "stdout")) ?
				      json_string_value(json_object_get(sc, "stdout")) : "");
	json_decref(f);
	return out;
}

const char *const ssh_names[SSH_KINDS] = {
	"sandgate bash \"true\"",
	"raw ssh -S <socket> host env HOME=... bash -l -c true",
	"raw ssh -S <socket> host true",
	"sandgate read_file (1 MiB)",
	"raw ssh -S <socket> host cat (1 MiB)",
};
const char *const ssh_keys[SSH_KINDS] = { "gateway_true", "raw_login_true", "raw_true",
					  "gateway_read", "raw_cat" };

/*
 * read_file of the 1 MiB file at path: the file's text is the result's
 * structured_content.text (the view numbers its lines), whole.
 */
static int64_t gateway_read(struct gw *g, const char *path, const char *expect)
{
	char *data = execute_data("read_file", read_args(path));
	int64_t t0 = now_ns(), t1, id;
	json_t *f, *d, *text, *sc;

	id = gw_send(g, "execute", data);
	f = gw_reply(g, id, &t1);
	free(data);
	d = check_tool(f, "read_file");
	sc = json_object_get(d, "structured_content");
	text = json_object_get(sc, "text");
	if (json_string_length(text) != SSH_READ_BYTES ||
	    json_integer_value(json_object_get(sc, "num_lines")) !=
		    json_integer_value(json_object_get(sc, "total_lines")) ||
	    (expect && memcmp(json_string_value(text), expect, SSH_READ_BYTES) != 0))
		die("read_file did not return the 1 MiB written");
	json_decref(f);
	return t1 - t0;
}

/* What S1 and S2 run: the gateway's requests and the raw clients' argvs. */
struct ssh_calls {
	char *d_true;       /* execute(bash "true") */
	char **raw_login;   /* the bash tool's login shell: env HOME=<empty> bash -l -c true */
	char **raw_true;    /* the bare command, for information */
	char **raw_cat;
	const char *text;   /* the 1 MiB file's text, compared on the first read */
};

/* One call of kind k, timed; `first` compares read_file's whole text. */
static int64_t ssh_one(struct gw *g, const struct ssh_calls *c, int k, bool first)
{
	size_t got = 0;
	int64_t ns;

	switch (k) {
	case SSH_GW_TRUE:
		return gateway_cmd(g, c->d_true);
	case SSH_RAW_LOGIN:
		return spawn_timed(c->raw_login, environ, -1, NULL, "raw ssh env HOME=... bash -l -c true");
	case SSH_RAW_TRUE:
		return spawn_timed(c->raw_true, environ, -1, NULL, "raw ssh true");
	case SSH_GW_READ:
		return gateway_read(g, SSH_READ_FILE, first ? c->text : NULL);
	default:
		ns = spawn_timed(c->raw_cat, environ, -1, &got, "raw ssh cat");
		if (got != SSH_READ_BYTES)
			die("raw ssh cat gave %zu bytes, not 1 MiB", got);
		return ns;
	}
}

/* The 1 MiB file written through the gateway, for read_file and the raw cat. */
static void ssh_write_text(struct gw *g, const char *text)
{
	char *d_write = execute_data("write_file", json_pack("{s:s, s:s, s:s}", "path",
							     SSH_READ_FILE, "content", text,
							     "overwrite_policy",
							     "explicit_user_requested"));
	json_t *f = gw_reply(g, gw_send(g, "execute", d_write), NULL);
	json_t *d = check_tool(f, "write_file");

	if (view_int(d, "written_bytes", "write_file") != (json_int_t)SSH_READ_BYTES)
		die("write_file did not write 1 MiB");
	json_decref(f);
	free(d_write);
}

/*
 * S1 and S2: the gateway's bash and read_file against the raw
 * multiplexed client, the kinds interleaved in rotating order.  The host's
 * bash tool runs a login shell, so S1's reference is the same command
 * line through the raw client (`bash -l -c true`); the bare `true` is
 * timed beside it for information.  The gateway gives its commands a
 * home of their own, empty, so the raw login shell gets an empty home too
 * (the login's own ~/.profile would be timed otherwise, as in the local
 * set's cmd).
 */
void ssh_compare(struct gw *g, const struct ssh_target *t, long n, struct ssh_result *r)
{
	static const char *const w_true[] = { "true", NULL };
	char *text = text_mib(), *path = xasprintf("%s/%s", t->directory, SSH_READ_FILE);
	char *home = xasprintf("HOME=%s/" SSH_HOME_DIR, t->directory);
	char *made = run_shell(g, "mkdir -p " SSH_HOME_DIR);
	const char *w_login[] = { "env", home, "bash", "-l", "-c", "true", NULL };
	const char *w_cat[] = { "cat", path, NULL };
	struct ssh_calls c = {
		.d_true = execute_data("bash", json_pack("{s:s}", "command", "true")),
		.raw_login = ssh_raw_argv(t, w_login),
		.raw_true = ssh_raw_argv(t, w_true),
		.raw_cat = ssh_raw_argv(t, w_cat),
		.text = text,
	};
	int64_t *v[SSH_KINDS];

	ssh_write_text(g, text);
	for (int k = 0; k < SSH_KINDS; k++) {
		v[k] = calloc((size_t)n + 1, sizeof(int64_t));
		if (!v[k])
			die("out of memory");
	}
	for (long i = -SSH_WARM; i < n; i++) {
		for (int j = 0; j < SSH_KINDS; j++) {
			int k = (int)(((i + SSH_WARM) + j) % SSH_KINDS);
			int64_t ns = ssh_one(g, &c, k, i == -SSH_WARM);

			if (i >= 0)
				v[k][i] = ns;
		}
	}
	for (int k = 0; k < SSH_KINDS; k++) {
		r->d[k] = dist_of(v[k], (size_t)n);
		free(v[k]);
	}
	r->raw_login = argv_text(c.raw_login);
	r->raw_true = argv_text(c.raw_true);
	r->raw_cat = argv_text(c.raw_cat);
	free_strv(c.raw_login);
	free_strv(c.raw_true);
	free_strv(c.raw_cat);
	free(c.d_true);
	free(made);
	free(home);
	free(path);
	free(text);
}

/*
 * S3: a pseudo-random file made on the host by bash, exported
 * like the local set's file; then the same file through the raw client,
 * for the transport's own rate.
 */
void ssh_export(struct gw *g, const struct ssh_target *t, size_t bytes, int runs,
		       struct ssh_result *r)
{
	char *cmd = xasprintf("head -c %zu /dev/urandom >" EXPORT_FILE
			      " && sha256sum " EXPORT_FILE, bytes);
	char *out = run_shell(g, cmd), *path = xasprintf("%s/" EXPORT_FILE, t->directory);
	const char *w_cat[] = { "cat", path, NULL };
	char **raw = ssh_raw_argv(t, w_cat), sha_hex[65];
	int64_t v[3];

	if (strspn(out, "0123456789abcdef") != 64)
		die("sha256sum on the host gave no digest: %.200s", out);
	memcpy(sha_hex, out, 64);
	sha_hex[64] = '\0';
	r->ex = export_measure(g, sha_hex, bytes, runs);
	r->export = true;
	for (int i = 0; i < 3; i++) {
		size_t got = 0;

		v[i] = spawn_timed(raw, environ, -1, &got, "raw ssh cat of the export file");
		if (got != bytes)
			die("raw ssh cat gave %zu bytes, not %zu", got, bytes);
	}
	r->raw_export_s = (double)dist_of(v, 3).p50 / 1e9;
	free_strv(raw);
	free(path);
	free(out);
	free(cmd);
}

/*
 * The counting client (bench/README.md): one line per invocation into log,
 * "<kind> <step>", kind session, control (-O) or master; then the real
 * client with the same arguments.  A session that runs `sg-helper job
 * --spec-stdin` (every ssh exec) carries the command's spec first on stdin
 * ("<n>\n" and n bytes of NUL-terminated words, NAME=value... -- argv): the
 * script reads it to name the step (the sg-helper subcommand, "command"
 * for a confined one, else the program) and hands it on unchanged ahead of
 * the rest of stdin.  sg-helper's `proc wait` is the gateway's event watcher,
 * counted apart.
 */
static const char rt_script[] =
	"#!/bin/sh\n"
	"# sgbench's counting ssh client (bench/README.md).\n"
	"log=%s\n"
	"real=%s\n"
	"kind=session what=script prev=\n"
	"for a in \"$@\"; do\n"
	"\tcase $a in\n"
	"\tControlMaster=yes) kind=master what=- ;;\n"
	"\tesac\n"
	"\t[ \"$prev\" = -O ] && kind=control what=$a\n"
	"\tprev=$a\n"
	"done\n"
	"eval \"last=\\${$#}\"\n"
	"step() {\n"
	"\tset -- $(tr '\\000' '\\n' <\"$1\" | sed '1,/^--$/d' | head -3)\n"
	"\tcase $1:$2 in\n"
	"\t*/sg-helper-*:confine) echo command ;;\n"
	"\t*/sg-helper-*:probe) echo helper probe ;;\n"
	"\t*/sg-helper-*) echo \"$2 $3\" ;;\n"
	"\t*) echo \"${1##*/}\" ;;\n"
	"\tesac\n"
	"}\n"
	"if [ $kind = session ]; then\n"
	"\tcase $last in\n"
	"\t*' job '*--spec-stdin*)\n"
	"\t\tIFS= read -r n || n=0\n"
	"\t\th=$(mktemp \"${log%%/*}/hdr.XXXXXX\") || exit 255\n"
	"\t\thead -c \"$n\" >\"$h\"\n"
	"\t\tprintf 'session %%s\\n' \"$(step \"$h\")\" >>\"$log\"\n"
	"\t\t{ printf '%%s\\n' \"$n\"; cat \"$h\"; rm -f \"$h\"; exec cat; } | \"$real\" \"$@\"\n"
	"\t\texit $?\n"
	"\t\t;;\n"
	"\t*has_%%s*) what='host probe' ;;\n"
	"\t*env.json.tmp*) what=setup ;;\n"
	"\t*.sg-helper-*) what=upload ;;\n"
	"\t*subtree_control*) what=cgroup ;;\n"
	"\t*' job '*--kill*) what=kill ;;\n"
	"\t'exec cat -- '*) what=cat ;;\n"
	"\t*'leases/$l'*) what=teardown ;;\n"
	"\tesac\n"
	"fi\n"
	"printf '%%s %%s\\n' \"$kind\" \"$what\" >>\"$log\"\n"
	"exec \"$real\" \"$@\"\n";

/* 'text' for sh, or death when it holds a single quote. */
static char *sh_word(const char *text)
{
	if (strchr(text, '\''))
		die("a path with a single quote cannot go into the counting script: %s", text);
	return xasprintf("'%s'", text);
}

static long file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) ? 0 : (long)st.st_size;
}

/* Tally the log's lines from offset `from` into row (calls already set). */
static void rt_collect(const char *log, long from, struct rt_row *row)
{
	FILE *f = fopen(log, "re");
	char line[256];

	if (!f)
		die("%s: %s", log, strerror(errno));
	if (fseek(f, from, SEEK_SET))
		die("%s: %s", log, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		char *sp = strchr(line, ' '), *nl = strchr(line, '\n');
		const char *what;
		int i;

		if (!sp || !nl)
			die("%s: an unreadable line", log);
		*sp = *nl = '\0';
		what = sp + 1;
		if (strcmp(line, "master") == 0) {
			row->masters++;
			continue;
		}
		if (strcmp(line, "control") == 0) {
			row->controls++;
			continue;
		}
		if (strcmp(what, "proc wait") == 0) {
			row->watcher++;
			continue;
		}
		row->sessions++;
		for (i = 0; i < row->nsteps && strcmp(row->step[i], what) != 0; i++)
			;
		if (i == row->nsteps && i < RT_STEPS_MAX) {
			snprintf(row->step[i], sizeof(row->step[i]), "%s", what);
			row->nsteps++;
		}
		if (i < RT_STEPS_MAX)
			row->step_n[i]++;
	}
	fclose(f);
}

static struct rt_row *rt_begin(struct ssh_result *r, const char *name, bool target,
			       long *mark, const char *log)
{
	struct rt_row *row = &r->rt[r->nrt++];

	memset(row, 0, sizeof(*row));
	row->name = name;
	row->target = target;
	*mark = file_size(log);
	return row;
}

/*
 * The counting client's directory under state: the script `ssh` and its
 * log; the environment a gateway gets to run it first (new, its PATH
 * element in *path_var, also new).
 */
static char **rt_setup(const char *state, char **log, char **path_var)
{
	char *dir = xasprintf("%s/rt", state), *script, *real, *qlog, *qreal, **envp;
	size_t ne = 0;
	FILE *sf;

	if (mkdir(dir, 0700) && errno != EEXIST)
		die("%s: %s", dir, strerror(errno));
	script = xasprintf("%s/ssh", dir);
	*log = xasprintf("%s/ssh.log", dir);
	real = find_on_path("ssh");
	if (!real)
		die("no ssh client on PATH");
	qlog = sh_word(*log);
	qreal = sh_word(real);
	sf = fopen(script, "we");
	if (!sf || fprintf(sf, rt_script, qlog, qreal) < 0 || fclose(sf) ||
	    chmod(script, 0700))
		die("cannot write %s", script);
	close(open(*log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
	*path_var = xasprintf("PATH=%s:%s", dir, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	while (environ[ne])
		ne++;
	envp = calloc(ne + 2, sizeof(*envp));
	if (!envp)
		die("out of memory");
	envp[0] = *path_var;
	for (size_t i = 0, k = 1; i < ne; i++)
		if (strncmp(environ[i], "PATH=", 5) != 0)
			envp[k++] = environ[i];
	free(qlog);
	free(qreal);
	free(real);
	free(script);
	free(dir);
	return envp;
}

/*
 * n calls of one tool (its i-th arguments from args), their sessions
 * counted; `target`: exactly one session per call is the target.
 */
static void rt_tool(struct gw *g, struct ssh_result *r, const char *log, const char *tool,
		    bool target, long n, json_t *(*args)(long i))
{
	long mark;
	struct rt_row *row = rt_begin(r, tool, target, &mark, log);

	for (long i = 0; i < n; i++)
		execute_ok(g, tool, args(i));
	row->calls = n;
	rt_collect(log, mark, row);
}

static json_t *rt_write_args(long i)
{
	(void)i;
	return json_pack("{s:s, s:s}", "path", RT_FILE, "content", "sgbench a\n");
}

static json_t *rt_read_args(long i)
{
	(void)i;
	return read_args(RT_FILE);
}

static json_t *rt_list_args(long i)
{
	(void)i;
	return json_pack("{s:s}", "path", ".");
}

static json_t *rt_bash_args(long i)
{
	(void)i;
	return json_pack("{s:s}", "command", "true");
}

static json_t *rt_edit_args(long i)
{
	return edit_args(RT_FILE, i);
}

/* process/read at offset 0 of a process that runs throughout, and process/start. */
static void rt_processes(struct gw *g, struct ssh_result *r, const char *log, long n)
{
	char pid_id[64], data[256];
	struct rt_row *row;
	long mark;
	json_t *f;

	start_process(g, "echo sgbench; exec sleep 120", pid_id);
	row = rt_begin(r, "process/read", true, &mark, log);
	for (long i = 0; i < n; i++) {
		f = gw_call(g, "process/read", pread_data(pid_id));
		reply_data(f, "process/read");
		json_decref(f);
	}
	row->calls = n;
	rt_collect(log, mark, row);
	snprintf(data, sizeof(data), "{\"id\":\"%s\"}", pid_id);
	json_decref(gw_reply(g, gw_send(g, "process/stop", data), NULL));

	rt_tool(g, r, log, "edit_file", false, n, rt_edit_args);

	row = rt_begin(r, "process/start", false, &mark, log);
	for (long i = 0; i < n; i++)
		start_process(g, "sleep 0.2", pid_id);
	row->calls = n;
	rt_collect(log, mark, row);
}

/* present_artifact, then export/read + export/close, counted apart. */
static void rt_exports(struct gw *g, struct ssh_result *r, const char *log, long n)
{
	struct rt_row *row, *rd;
	long mark, mark_rd;
	char token[128];
	json_t *f;

	row = rt_begin(r, "present_artifact", false, &mark, log);
	rd = rt_begin(r, "export/read + export/close", false, &mark_rd, log);
	for (long i = 0; i < n; i++) {
		long before = file_size(log), after;

		present_artifact(g, RT_FILE, token, sizeof(token));
		after = file_size(log);
		rt_collect(log, before, row);
		f = gw_call(g, "export/read", json_pack("{s:s, s:i}", "token", token, "offset", 0));
		reply_data(f, "export/read");
		json_decref(f);
		f = gw_call(g, "export/close", json_pack("{s:s}", "token", token));
		reply_data(f, "export/close");
		json_decref(f);
		rt_collect(log, after, rd);
	}
	row->calls = rd->calls = n;
}

/*
 * S4: a second gateway, on the same profile, whose PATH starts with the
 * counting client; n calls of each kind, the log read between them.
 */
void ssh_round_trips(const struct opts *o, const char *sandgate, const char *state,
		     long n, struct ssh_result *r)
{
	char *log, *path_var, **envp = rt_setup(state, &log, &path_var);
	struct rt_row *row;
	struct gw g;
	long mark;
	json_t *f;

	row = rt_begin(r, "initialize", false, &mark, log);
	gw_start(&g, o, sandgate, state, "gateway-rt.log", envp);
	f = gw_call(&g, "initialize",
		    json_pack("{s:i, s:s, s:s, s:b}", "version", 4, "root", ROOT,
			      "session", SESSION "-rt", "remove_workspace_on_exit", true));
	reply_data(f, "initialize");
	json_decref(f);
	row->calls = 1;
	rt_collect(log, mark, row);

	rt_tool(&g, r, log, "write_file", true, n, rt_write_args);
	rt_tool(&g, r, log, "read_file", true, n, rt_read_args);
	rt_tool(&g, r, log, "list_files", true, n, rt_list_args);
	rt_tool(&g, r, log, "bash", true, n, rt_bash_args);
	rt_processes(&g, r, log, n);
	rt_exports(&g, r, log, n);

	row = rt_begin(r, "shutdown (stdin closed)", false, &mark, log);
	if (gw_stop(&g) != 0)
		die("the counting gateway did not exit cleanly (see %s/gateway-rt.log)", state);
	row->calls = 1;
	rt_collect(log, mark, row);
	free(envp);
	free(path_var);
	free(log);
}
