/*
 * test_ssh.c - the ssh adapter against a real OpenSSH server.
 *
 * The group setup starts tests/ssh/sshd-harness.sh (sshd on 127.0.0.1, a
 * generated host key and client key) and every test provisions through
 * it.  The "remote" host is this machine, so a test can look at the
 * directories and processes the adapter made on the other side directly.
 * Without /usr/sbin/sshd every test is skipped with a message.
 *
 * SG_HELPER names sg-helper (ctest sets it); otherwise it is looked for
 * beside the build tree's tests directory.  SG_SSHD_HARNESS may name the
 * harness script; otherwise it is found from this file's path.
 */
#define _GNU_SOURCE /* asprintf */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "adapters/adapter.h"
#include "core/exec.h"
#include "base/strv.h"

extern const struct sg_adapter sg_adapter_ssh;

/* What the harness printed. */
struct harness {
	char dir[512], port[16], user[64], key[600], known_hosts[600],
		workspace[600];
	bool up;
};

static struct harness H;
static char *helper_path, *harness_script, *state_dir;
static bool have_sshd;
static unsigned serial;

static const char *const minimal_env[] = { "PATH=/usr/local/bin:/usr/bin:/bin", NULL };
static const char *const empty_list[] = { NULL };

/* ---- The harness ---------------------------------------------------- */

static const char *const *tool_env(void)
{
	static char path[512], home[512];
	static const char *env[3];

	snprintf(path, sizeof(path), "PATH=%s",
		 getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	snprintf(home, sizeof(home), "HOME=%s", getenv("HOME") ? getenv("HOME") : "/");
	env[0] = path;
	env[1] = home;
	env[2] = NULL;
	return env;
}

/* Run a program of the test's own (the harness, ssh-keygen). */
static int run_tool(const char *const *argv, struct sg_exec_result *r)
{
	struct sg_child c = { .argv = argv, .envp = tool_env(), .timeout_ms = 60000 };
	struct sg_errinfo err = { 0 };

	sg_exec_result_init(r, 64 * 1024);
	if (sg_exec_run(&c, r, NULL, &err) != SG_OK)
		return -1;
	return r->exit_code;
}

/* KEY='value' lines; the values the harness prints hold no quote. */
static void harness_value(const char *text, const char *key, char *out, size_t n)
{
	size_t kn = strlen(key);

	out[0] = '\0';
	for (const char *line = text; line && *line;) {
		if (strncmp(line, key, kn) == 0 && line[kn] == '=' && line[kn + 1] == '\'') {
			const char *v = line + kn + 2, *end = strchr(v, '\'');

			if (end)
				snprintf(out, n, "%.*s", (int)(end - v), v);
		}
		line = strchr(line, '\n');
		if (line)
			line++;
	}
}

static bool harness_start(struct harness *h)
{
	const char *argv[] = { "/bin/sh", harness_script, "start", NULL };
	struct sg_exec_result r;
	int status = run_tool(argv, &r);

	memset(h, 0, sizeof(*h));
	if (status == 0) {
		harness_value(r.out.p, "SSHD_DIR", h->dir, sizeof(h->dir));
		harness_value(r.out.p, "SSHD_PORT", h->port, sizeof(h->port));
		harness_value(r.out.p, "SSHD_USER", h->user, sizeof(h->user));
		harness_value(r.out.p, "SSHD_KEY", h->key, sizeof(h->key));
		harness_value(r.out.p, "SSHD_KNOWN_HOSTS", h->known_hosts,
			      sizeof(h->known_hosts));
		harness_value(r.out.p, "SSHD_WORKSPACE", h->workspace, sizeof(h->workspace));
		h->up = h->dir[0] && h->port[0];
	} else {
		print_message("sshd-harness.sh start failed (%d): %s\n", status, r.err.p);
	}
	sg_exec_result_release(&r);
	return h->up;
}

static void harness_do(struct harness *h, const char *what)
{
	const char *argv[] = { "/bin/sh", harness_script, what, h->dir, NULL };
	struct sg_exec_result r;

	if (h->dir[0])
		assert_int_equal(run_tool(argv, &r), 0);
	else
		sg_exec_result_init(&r, 16);
	sg_exec_result_release(&r);
	if (strcmp(what, "stop") == 0)
		h->up = false;
}

/* ---- Profiles and environments -------------------------------------- */

struct prof {
	struct sg_profile p;
	const char *best[4];
	char kh[600], key[600];
};

static void prof_init(struct prof *pr, const struct harness *h)
{
	memset(pr, 0, sizeof(*pr));
	snprintf(pr->kh, sizeof(pr->kh), "%s", h->known_hosts);
	snprintf(pr->key, sizeof(pr->key), "%s", h->key);
	pr->p.name = "ssh";
	pr->p.backend = "ssh";
	pr->p.host = "127.0.0.1";
	pr->p.port = (int)strtol(h->port, NULL, 10);
	pr->p.user = h->user;
	pr->p.identity_file = pr->key;
	pr->p.known_hosts_file = pr->kh;
	pr->p.workspace = h->workspace;
	pr->p.lifetime_seconds = 600;
	pr->p.network_allow = empty_list;
	pr->p.forward_env = empty_list;
	pr->p.best_effort = pr->best;
}

struct tenv {
	struct sg_env *env;
	char identity[64], session[64], root[1024], files[1024];
};

/* A fresh identity; root defaults to the workspace directory itself. */
static void tenv_init(struct tenv *t, const struct harness *h, const char *root)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->identity, sizeof(t->identity), "id-%ld-%u", (long)getpid(), ++serial);
	snprintf(t->session, sizeof(t->session), "s-%ld-%u", (long)getpid(), serial);
	snprintf(t->files, sizeof(t->files), "%s/%s/workspace", h->workspace, t->identity);
	snprintf(t->root, sizeof(t->root), "%s", root ? root : t->files);
}

static struct sg_env *env_new(struct tenv *t, const struct sg_profile *p,
			      bool require_existing)
{
	struct sg_env *env = calloc(1, sg_adapter_ssh.env_size);

	assert_non_null(env);
	env->ad = &sg_adapter_ssh;
	env->profile = p;
	env->root = t->root;
	env->session = t->session;
	env->identity = t->identity;
	env->state_dir = state_dir;
	env->helper_host = helper_path;
	env->require_existing = require_existing;
	t->env = env;
	return env;
}

static void env_free(struct sg_env *env)
{
	if (!env)
		return;
	sg_adapter_ssh.release(env);
	json_decref(env->facts);
	free(env->helper);
	free(env->ctl_dir);
	free(env->host_root);
	free(env->host_ctl);
	free(env);
}

static sg_err provision(struct tenv *t, const struct sg_profile *p, bool require,
			struct sg_errinfo *err)
{
	memset(err, 0, sizeof(*err));
	return sg_adapter_ssh.provision(env_new(t, p, require), NULL, err);
}

static void provision_ok(struct tenv *t, const struct sg_profile *p)
{
	struct sg_errinfo err;
	sg_err rc = provision(t, p, false, &err);

	if (rc)
		print_message("provision: %s: %s\n", sg_err_word(rc), err.msg);
	assert_int_equal(rc, SG_OK);
}

static void teardown_env(struct tenv *t, enum sg_fate fate)
{
	struct sg_errinfo err = { 0 };
	sg_err rc = sg_adapter_ssh.teardown(t->env, fate, NULL, &err);

	if (rc)
		print_message("teardown: %s: %s\n", sg_err_word(rc), err.msg);
	assert_int_equal(rc, SG_OK);
	env_free(t->env);
	t->env = NULL;
}

static sg_err run(struct sg_env *env, const char *const *argv,
		  const char *const *envp, const char *cwd, const void *in,
		  size_t inlen, int64_t timeout_ms, unsigned flags,
		  struct sg_exec_result *r, struct sg_cancel *cancel,
		  struct sg_errinfo *err)
{
	struct sg_exec x = {
		.argv = argv,
		.envp = envp ? envp : minimal_env,
		.cwd = cwd,
		.stdin_data = in,
		.stdin_len = inlen,
		.timeout_ms = timeout_ms,
		.max_output = 4 * 1024 * 1024,
		.flags = flags,
	};

	memset(err, 0, sizeof(*err));
	sg_exec_result_init(r, x.max_output);
	return sg_adapter_ssh.exec(env, &x, r, cancel, err);
}

/* Run sh -c script; expects the transport to work. */
static void sh_ok(struct sg_env *env, const char *script, struct sg_exec_result *r)
{
	const char *argv[] = { "sh", "-c", script, NULL };
	struct sg_errinfo err;
	sg_err rc = run(env, argv, NULL, NULL, NULL, 0, 30000, 0, r, NULL, &err);

	if (rc)
		print_message("exec: %s: %s\n", sg_err_word(rc), err.msg);
	assert_int_equal(rc, SG_OK);
}

static bool exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

static char *path_of(const char *fmt, ...) SG_PRINTF(1, 2);
static char *path_of(const char *fmt, ...)
{
	va_list ap;
	char *p = NULL;

	va_start(ap, fmt);
	assert_true(vasprintf(&p, fmt, ap) >= 0);
	va_end(ap);
	return p;
}

static long read_long(const char *path)
{
	FILE *f = fopen(path, "re");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/* Wait up to ms for a process to be gone (or a zombie). */
static bool gone_within(long pid, int ms)
{
	for (int i = 0; i < ms / 20; i++) {
		char path[64], state = '?';
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
		f = fopen(path, "re");
		if (!f)
			return true;
		if (fscanf(f, "%*d (%*[^)]) %c", &state) != 1)
			state = '?';
		fclose(f);
		if (state == 'Z')
			return true;
		usleep(20000);
	}
	return false;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define NEED_SSHD()                                                          \
	do {                                                                 \
		if (!have_sshd) {                                            \
			print_message("skipped: /usr/sbin/sshd is not installed (apt-get install openssh-server)\n"); \
			skip();                                              \
		}                                                            \
	} while (0)

/* ---- validate ------------------------------------------------------- */

static void t_validate(void **state)
{
	struct prof pr;
	struct sg_errinfo err = { 0 };

	(void)state;
	NEED_SSHD();
	prof_init(&pr, &H);
	assert_int_equal(sg_adapter_ssh.validate(&pr.p, &err), SG_OK);

	/* Which fields ssh takes is its table's: test_config.c. */
	prof_init(&pr, &H);
	pr.p.network = SG_NET_ALLOW;
	assert_int_equal(sg_adapter_ssh.validate(&pr.p, &err), SG_E_UNSUPPORTED);
	sg_err_clear(&err);

	prof_init(&pr, &H);
	pr.p.host = NULL;
	assert_int_equal(sg_adapter_ssh.validate(&pr.p, &err), SG_E_INVALID_ARGUMENT);
	sg_err_clear(&err);
	pr.p.host = "-oProxyCommand=touch /tmp/pwned";
	assert_int_equal(sg_adapter_ssh.validate(&pr.p, &err), SG_E_INVALID_ARGUMENT);
	sg_err_clear(&err);
	/*
	 * Shell metacharacters reach a local shell through a ProxyCommand or
	 * Match exec with %h or %r in the user's ssh config, on an OpenSSH
	 * older than 9.6; they are refused before ssh is ever run.
	 */
	{
		static const char *const hosts[] = { "h;touch${IFS}x", "$(id)", "`id`",
						     "h|x", "h&x", "h>x", "h\x1bx", "(h)",
						     "h{a,b}", NULL };
		static const char *const users[] = { "a$(id)", "u;x", "u`x`", "u|x",
						     "-oProxyCommand=x", "u@h", "u x",
						     NULL };

		for (size_t i = 0; hosts[i]; i++) {
			prof_init(&pr, &H);
			pr.p.host = hosts[i];
			assert_int_equal(sg_adapter_ssh.validate(&pr.p, &err),
					 SG_E_INVALID_ARGUMENT);
			sg_err_clear(&err);
		}
		for (size_t i = 0; users[i]; i++) {
			prof_init(&pr, &H);
			pr.p.user = users[i];
			assert_int_equal(sg_adapter_ssh.validate(&pr.p, &err),
					 SG_E_INVALID_ARGUMENT);
			sg_err_clear(&err);
		}
		prof_init(&pr, &H);
		pr.p.host = "lab-box.example.com";
		pr.p.user = "agent.1_x";
		assert_int_equal(sg_adapter_ssh.validate(&pr.p, &err), SG_OK);
	}

	prof_init(&pr, &H);
	pr.p.identity_file = "/nonexistent/sandgate-key";
	assert_int_equal(sg_adapter_ssh.validate(&pr.p, &err), SG_E_INVALID_ARGUMENT);
	assert_non_null(strstr(err.msg, "/nonexistent/sandgate-key"));
	sg_err_clear(&err);

	prof_init(&pr, &H);
	pr.p.workspace = "relative/dir";
	assert_int_equal(sg_adapter_ssh.validate(&pr.p, &err), SG_E_INVALID_ARGUMENT);
	sg_err_clear(&err);
	pr.p.workspace = "/srv/../etc";
	assert_int_equal(sg_adapter_ssh.validate(&pr.p, &err), SG_E_INVALID_ARGUMENT);
	sg_err_clear(&err);
	pr.p.workspace = "~/agents";
	assert_int_equal(sg_adapter_ssh.validate(&pr.p, &err), SG_OK);

	/* credentials: presence only, never a value. */
	{
		json_t *c = json_object();
		char *dump;

		prof_init(&pr, &H);
		sg_adapter_ssh.credentials(&pr.p, c);
		assert_string_equal(json_string_value(json_object_get(c, "identity_file")),
				    "found");
		assert_string_equal(json_string_value(json_object_get(c, "known_hosts_file")),
				    "found");
		pr.p.identity_file = "/nonexistent/sandgate-key";
		sg_adapter_ssh.credentials(&pr.p, c);
		assert_string_equal(json_string_value(json_object_get(c, "identity_file")),
				    "missing");
		dump = json_dumps(c, 0);
		assert_null(strstr(dump, "BEGIN OPENSSH"));
		free(dump);
		json_decref(c);
	}
}

/* ---- provision, exec, teardown -------------------------------------- */

static void t_provision_creates_and_remove_deletes(void **state)
{
	struct prof pr;
	struct tenv t;
	struct sg_exec_result r;
	char *p, *envdir;
	json_t *marker;
	struct stat st;

	(void)state;
	NEED_SSHD();
	prof_init(&pr, &H);
	tenv_init(&t, &H, NULL);
	provision_ok(&t, &pr.p);
	assert_false(t.env->resumed);
	envdir = path_of("%s/%s", H.workspace, t.identity);
	assert_true(exists(t.files));
	assert_int_equal(stat(envdir, &st), 0);
	assert_int_equal(st.st_mode & 077, 0);
	for (const char *const *sub = (const char *const[]){ "proc", "home", "tmp", NULL };
	     *sub; sub++) {
		p = path_of("%s/%s", t.env->ctl_dir, *sub);
		assert_true(exists(p));
		free(p);
	}
	/* ctl_dir is outside the root the tools see. */
	assert_null(strstr(t.env->ctl_dir, t.files));
	p = path_of("%s/env.json", envdir);
	marker = json_load_file(p, 0, NULL);
	free(p);
	assert_non_null(marker);
	assert_string_equal(json_string_value(json_object_get(marker, "identity")), t.identity);
	json_decref(marker);
	assert_int_equal(access(t.env->helper, X_OK), 0);
	assert_string_equal(json_string_value(json_object_get(t.env->facts, "safety_class")),
			    "remote_host");
	assert_string_equal(json_string_value(json_object_get(
				    json_object_get(t.env->facts, "ssh"), "view")),
			    "direct");

	/* The uploaded helper runs there. */
	{
		const char *argv[] = { t.env->helper, "probe", NULL };
		struct sg_errinfo err;

		assert_int_equal(run(t.env, argv, NULL, NULL, NULL, 0, 30000, 0, &r, NULL,
				     &err), SG_OK);
		assert_int_equal(r.exit_code, 0);
		assert_true(r.out.len > 0 && r.out.p[0] == '{');
		sg_exec_result_release(&r);
	}

	teardown_env(&t, SG_FATE_REMOVE);
	assert_false(exists(envdir));
	free(envdir);
	/* The master's socket went with it. */
	p = path_of("%s/ssh", state_dir);
	{
		struct sg_exec_result lr;
		const char *argv[] = { "ls", "-A", p, NULL };

		assert_int_equal(run_tool(argv, &lr), 0);
		assert_int_equal(lr.out.len, 0);
		sg_exec_result_release(&lr);
	}
	free(p);
}

static void t_exec_quoting(void **state)
{
	static const char *const words[] = {
		"a b", "it's", "$HOME", "`id`", "", "x\ny", "*", "-n", "\\",
		"\"q\"", "caf\xc3\xa9", ";ls", "'", "$(echo no)", "~", "a=b", NULL
	};
	struct prof pr;
	struct tenv t;
	struct sg_exec_result r;
	struct sg_errinfo err;
	const char *argv[32] = { "printf", "[%s]\n" };
	char expect[512] = "";
	size_t n = 2, used = 0;

	(void)state;
	NEED_SSHD();
	for (size_t i = 0; words[i]; i++) {
		argv[n++] = words[i];
		used += (size_t)snprintf(expect + used, sizeof(expect) - used, "[%s]\n",
					 words[i]);
		assert_true(used < sizeof(expect));
	}
	argv[n] = NULL;
	prof_init(&pr, &H);
	tenv_init(&t, &H, NULL);
	provision_ok(&t, &pr.p);
	assert_int_equal(run(t.env, argv, NULL, NULL, NULL, 0, 30000, 0, &r, NULL, &err),
			 SG_OK);
	assert_int_equal(r.exit_code, 0);
	assert_string_equal(r.out.p, expect);
	assert_int_equal(r.err.len, 0);
	sg_exec_result_release(&r);
	/* A command name with '=' is a name, not an assignment for env. */
	{
		const char *odd[] = { "sg=odd-name", "arg", NULL };

		assert_int_equal(run(t.env, odd, NULL, NULL, NULL, 0, 30000, 0, &r, NULL,
				     &err), SG_OK);
		assert_int_equal(r.exit_code, 127);
		assert_non_null(strstr(r.err.p, "sg=odd-name"));
		sg_exec_result_release(&r);
	}
	teardown_env(&t, SG_FATE_REMOVE);
}

static void t_exit_codes_and_stdin(void **state)
{
	struct prof pr;
	struct tenv t;
	struct sg_exec_result r;
	struct sg_errinfo err;
	char *data;
	size_t len = 300 * 1024;

	(void)state;
	NEED_SSHD();
	prof_init(&pr, &H);
	tenv_init(&t, &H, NULL);
	provision_ok(&t, &pr.p);

	sh_ok(t.env, "exit 3", &r);
	assert_int_equal(r.exit_code, 3);
	sg_exec_result_release(&r);
	/* 255 from the command is the command's, not a transport failure. */
	sh_ok(t.env, "echo bye; exit 255", &r);
	assert_int_equal(r.exit_code, 255);
	assert_string_equal(r.out.p, "bye\n");
	sg_exec_result_release(&r);
	/* sg-helper job reports the real wait status: a death by signal... */
	sh_ok(t.env, "kill -9 $$", &r);
	assert_int_equal(r.exit_code, -1);
	assert_int_equal(r.signal, SIGKILL);
	sg_exec_result_release(&r);
	/* ...and an exit with 128+n are told apart. */
	sh_ok(t.env, "exit 130", &r);
	assert_int_equal(r.exit_code, 130);
	assert_int_equal(r.signal, 0);
	sg_exec_result_release(&r);
	sh_ok(t.env, "exit 128", &r);
	assert_int_equal(r.exit_code, 128);
	assert_int_equal(r.signal, 0);
	sg_exec_result_release(&r);
	{
		const char *argv[] = { "sandgate-no-such-command", NULL };

		assert_int_equal(run(t.env, argv, NULL, NULL, NULL, 0, 30000, 0, &r, NULL,
				     &err), SG_OK);
		assert_int_equal(r.exit_code, 127);
		assert_non_null(strstr(r.err.p, "sandgate-no-such-command"));
		sg_exec_result_release(&r);
	}

	/* stdin, binary, larger than a pipe, passes byte for byte. */
	data = malloc(len);
	assert_non_null(data);
	for (size_t i = 0; i < len; i++)
		data[i] = (char)((i * 7919u) >> 3);
	data[10] = '\0';
	data[11] = '\n';
	{
		const char *argv[] = { "cat", NULL };

		assert_int_equal(run(t.env, argv, NULL, NULL, data, len, 30000, 0, &r, NULL,
				     &err), SG_OK);
		assert_int_equal(r.exit_code, 0);
		assert_int_equal(r.out.len, len);
		assert_memory_equal(r.out.p, data, len);
		sg_exec_result_release(&r);
		/* No stdin: EOF at once. */
		assert_int_equal(run(t.env, argv, NULL, NULL, NULL, 0, 30000, 0, &r, NULL,
				     &err), SG_OK);
		assert_int_equal(r.exit_code, 0);
		assert_int_equal(r.out.len, 0);
		sg_exec_result_release(&r);
	}
	free(data);
	/*
	 * Each exec's job removed its files after its reply (--rm): run/ holds
	 * only the setup's link to sg-helper.
	 */
	{
		char *run = path_of("%s/%s/run", H.workspace, t.identity);
		const char *argv[] = { "ls", "-A", run, NULL };
		struct sg_exec_result lr;

		assert_int_equal(run_tool(argv, &lr), 0);
		assert_string_equal(lr.out.p, "helper\n");
		sg_exec_result_release(&lr);
		free(run);
	}
	teardown_env(&t, SG_FATE_REMOVE);
}

/*
 * A long output keeps its head and its tail (keep_tail, sg-helper job
 * --keep-tail) and counts every byte and line, as the local backend does.
 */
static void t_keep_tail(void **state)
{
	struct prof pr;
	struct tenv t;
	struct sg_exec_result r;
	struct sg_errinfo err = { 0 };
	const char *argv[] = { "seq", "1", "1000", NULL };
	struct sg_exec x = { .argv = argv, .envp = minimal_env, .timeout_ms = 30000,
			     .max_output = 20 };

	(void)state;
	NEED_SSHD();
	prof_init(&pr, &H);
	tenv_init(&t, &H, NULL);
	provision_ok(&t, &pr.p);
	sg_exec_result_init(&r, x.max_output);
	r.keep_tail = true;
	assert_int_equal(sg_adapter_ssh.exec(t.env, &x, &r, NULL, &err), SG_OK);
	assert_int_equal(r.exit_code, 0);
	assert_true(r.truncated);
	assert_string_equal(r.out.p, "1\n2\n3\n4\n5\n");
	assert_string_equal(r.tail.p, "\n999\n1000\n");
	assert_int_equal(r.total, 3893);
	assert_int_equal(r.lines, 1000);
	sg_exec_result_release(&r);
	teardown_env(&t, SG_FATE_REMOVE);
}

static void t_env_cwd_merge(void **state)
{
	static const char *const envp[] = { "PATH=/usr/bin:/bin", "FOO=bar baz",
					    "MULTI=a\nb 'c'", NULL };
	struct prof pr;
	struct tenv t;
	struct sg_exec_result r;
	struct sg_errinfo err;
	char *sub, *want;

	(void)state;
	NEED_SSHD();
	setenv("SG_SSH_TEST_CANARY", "must-not-travel", 1);
	prof_init(&pr, &H);
	tenv_init(&t, &H, NULL);
	provision_ok(&t, &pr.p);
	{
		const char *argv[] = { "env", NULL };

		assert_int_equal(run(t.env, argv, envp, NULL, NULL, 0, 30000, 0, &r, NULL,
				     &err), SG_OK);
		assert_int_equal(r.exit_code, 0);
		/* Exactly envp: nothing of ours, nothing of sshd's. */
		assert_string_equal(r.out.p,
				    "PATH=/usr/bin:/bin\nFOO=bar baz\nMULTI=a\nb 'c'\n");
		sg_exec_result_release(&r);
	}

	sub = path_of("%s/sub dir", t.files);
	assert_int_equal(mkdir(sub, 0755), 0);
	{
		const char *argv[] = { "pwd", NULL };

		assert_int_equal(run(t.env, argv, NULL, sub, NULL, 0, 30000, 0, &r, NULL,
				     &err), SG_OK);
		want = path_of("%s\n", sub);
		assert_string_equal(r.out.p, want);
		free(want);
		sg_exec_result_release(&r);
		/* cwd defaults to root. */
		assert_int_equal(run(t.env, argv, NULL, NULL, NULL, 0, 30000, 0, &r, NULL,
				     &err), SG_OK);
		want = path_of("%s\n", t.root);
		assert_string_equal(r.out.p, want);
		free(want);
		sg_exec_result_release(&r);
		assert_int_equal(run(t.env, argv, NULL, "/nonexistent/dir", NULL, 0, 30000,
				     0, &r, NULL, &err), SG_OK);
		assert_int_equal(r.exit_code, 127);
		assert_non_null(strstr(r.err.p, "/nonexistent/dir"));
		sg_exec_result_release(&r);
	}
	free(sub);
	{
		const char *argv[] = { "sh", "-c", "echo out; echo err >&2; echo out2", NULL };

		assert_int_equal(run(t.env, argv, NULL, NULL, NULL, 0, 30000,
				     SG_EXEC_MERGE, &r, NULL, &err), SG_OK);
		assert_string_equal(r.out.p, "out\nerr\nout2\n");
		assert_int_equal(r.err.len, 0);
		sg_exec_result_release(&r);
		assert_int_equal(run(t.env, argv, NULL, NULL, NULL, 0, 30000, 0, &r, NULL,
				     &err), SG_OK);
		assert_string_equal(r.out.p, "out\nout2\n");
		assert_string_equal(r.err.p, "err\n");
		sg_exec_result_release(&r);
	}
	teardown_env(&t, SG_FATE_REMOVE);
}

/* ---- timeouts, cancel, leftovers, daemons --------------------------- */

struct bg {
	struct sg_env *env;
	const char *script;
	struct sg_cancel cancel;
	sg_err rc;
	struct sg_exec_result r;
	struct sg_errinfo err;
	int64_t took;
};

static void *bg_run(void *arg)
{
	struct bg *b = arg;
	const char *argv[] = { "sh", "-c", b->script, NULL };
	int64_t t0 = now_ms();

	b->rc = run(b->env, argv, NULL, NULL, NULL, 0, 0, 0, &b->r, &b->cancel, &b->err);
	b->took = now_ms() - t0;
	return NULL;
}

static long wait_pid_file(const char *path, int ms)
{
	for (int i = 0; i < ms / 20; i++) {
		long pid = read_long(path);

		if (pid > 0)
			return pid;
		usleep(20000);
	}
	return -1;
}

static void t_timeout_and_cancel_kill_remote(void **state)
{
	struct prof pr;
	struct tenv t;
	struct sg_exec_result r;
	struct sg_errinfo err;
	char *pidfile, *script;
	int64_t t0;
	long pid;

	(void)state;
	NEED_SSHD();
	prof_init(&pr, &H);
	tenv_init(&t, &H, NULL);
	provision_ok(&t, &pr.p);
	pidfile = path_of("%s/pid", t.files);
	script = path_of("echo $$ > '%s'; exec sleep 30", pidfile);

	{
		const char *argv[] = { "sh", "-c", script, NULL };

		t0 = now_ms();
		assert_int_equal(run(t.env, argv, NULL, NULL, NULL, 0, 700, 0, &r, NULL,
				     &err), SG_OK);
		assert_true(r.timed_out);
		assert_int_equal(r.exit_code, -1);
		assert_int_equal(r.signal, SIGKILL);
		assert_true(now_ms() - t0 < 5000);
		sg_exec_result_release(&r);
		pid = read_long(pidfile);
		assert_true(pid > 0);
		assert_true(gone_within(pid, 3000));
	}

	unlink(pidfile);
	{
		struct bg b = { .env = t.env, .script = script };
		pthread_t th;

		assert_int_equal(sg_cancel_init(&b.cancel), SG_OK);
		assert_int_equal(pthread_create(&th, NULL, bg_run, &b), 0);
		pid = wait_pid_file(pidfile, 10000);
		assert_true(pid > 0);
		t0 = now_ms();
		sg_cancel_fire(&b.cancel, SG_E_CANCELLED);
		pthread_join(th, NULL);
		assert_int_equal(b.rc, SG_E_CANCELLED);
		assert_true(now_ms() - t0 < 3000);
		assert_true(gone_within(pid, 3000));
		sg_exec_result_release(&b.r);
		sg_cancel_release(&b.cancel);
	}
	free(script);
	free(pidfile);
	teardown_env(&t, SG_FATE_REMOVE);
}

static void t_leftovers_and_detached(void **state)
{
	struct prof pr;
	struct tenv t;
	struct sg_exec_result r;
	struct sg_errinfo err;
	int64_t t0;
	long pid;

	(void)state;
	NEED_SSHD();
	prof_init(&pr, &H);
	tenv_init(&t, &H, NULL);
	provision_ok(&t, &pr.p);

	/* What a command leaves in its group is killed when it exits. */
	t0 = now_ms();
	sh_ok(t.env, "sleep 30 & echo $!", &r);
	assert_true(now_ms() - t0 < 5000);
	pid = strtol(r.out.p, NULL, 10);
	assert_true(pid > 0);
	assert_true(gone_within(pid, 3000));
	sg_exec_result_release(&r);

	/*
	 * A daemon in its own session that closed its stdio outlives it.  The
	 * command waits until the daemon has left its group (the pid file is
	 * written after setsid), as sg-helper's spawn does before it replies.
	 */
	{
		const char *argv[] = { "sh", "-c",
				       "setsid sh -c 'echo $$ > daemon.pid; exec sleep 30' "
				       "</dev/null >/dev/null 2>&1 & "
				       "while [ ! -s daemon.pid ]; do sleep 0.05; done; cat daemon.pid",
				       NULL };

		t0 = now_ms();
		assert_int_equal(run(t.env, argv, NULL, NULL, NULL, 0, 30000,
				     SG_EXEC_DETACHES, &r, NULL, &err), SG_OK);
		assert_true(now_ms() - t0 < 5000);
		pid = strtol(r.out.p, NULL, 10);
		assert_true(pid > 0);
		usleep(300 * 1000);
		assert_int_equal(kill((pid_t)pid, 0), 0);
		kill((pid_t)pid, SIGKILL);
		sg_exec_result_release(&r);
	}
	teardown_env(&t, SG_FATE_REMOVE);
}

struct par {
	struct sg_env *env;
	int i;
	bool ok;
};

static void *par_run(void *arg)
{
	struct par *p = arg;
	char n[16], want[32];
	const char *argv[] = { "sh", "-c", "sleep 0.2; echo \"$1\"", "sh", n, NULL };
	struct sg_exec_result r;
	struct sg_errinfo err;

	snprintf(n, sizeof(n), "%d", p->i);
	snprintf(want, sizeof(want), "%d\n", p->i);
	p->ok = run(p->env, argv, NULL, NULL, NULL, 0, 30000, 0, &r, NULL, &err) == SG_OK &&
		r.exit_code == 0 && strcmp(r.out.p, want) == 0;
	sg_exec_result_release(&r);
	return NULL;
}

static void t_concurrent_exec(void **state)
{
	struct prof pr;
	struct tenv t;
	struct par p[8];
	pthread_t th[8];

	(void)state;
	NEED_SSHD();
	prof_init(&pr, &H);
	tenv_init(&t, &H, NULL);
	provision_ok(&t, &pr.p);
	for (int i = 0; i < 8; i++) {
		p[i] = (struct par){ .env = t.env, .i = i };
		assert_int_equal(pthread_create(&th[i], NULL, par_run, &p[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		assert_true(p[i].ok);
	}
	teardown_env(&t, SG_FATE_REMOVE);
}

/* ---- namespaces and limits ------------------------------------------ */

static void t_root_through_mount_namespace(void **state)
{
	struct prof pr;
	struct tenv t;
	struct sg_exec_result r;
	struct sg_errinfo err;
	char *root, *want, *inside, *outside;

	(void)state;
	NEED_SSHD();
	prof_init(&pr, &H);
	root = path_of("%s/view/workspace", H.dir);
	tenv_init(&t, &H, root);
	if (provision(&t, &pr.p, false, &err) == SG_E_UNSUPPORTED) {
		print_message("skipped: no mount namespace on this host: %s\n", err.msg);
		env_free(t.env);
		free(root);
		skip();
	}
	assert_int_equal(err.code, SG_OK);
	assert_string_equal(json_string_value(json_object_get(
				    json_object_get(t.env->facts, "ssh"), "view")),
			    "mount namespace");
	sh_ok(t.env, "pwd; echo hi > made-inside", &r);
	want = path_of("%s\n", root);
	assert_string_equal(r.out.p, want);
	sg_exec_result_release(&r);
	/* The file is in the environment's directory, not at root on the host. */
	inside = path_of("%s/made-inside", t.files);
	outside = path_of("%s/made-inside", root);
	assert_true(exists(inside));
	assert_false(exists(outside));
	/* sg-helper sees the files at root too. */
	{
		const char *argv[] = { t.env->helper, "fs", "read", "--root", root,
				       "made-inside", NULL };

		assert_int_equal(run(t.env, argv, NULL, NULL, NULL, 0, 30000, 0, &r, NULL,
				     &err), SG_OK);
		assert_int_equal(r.exit_code, 0);
		assert_non_null(strstr(r.out.p, "hi"));
		sg_exec_result_release(&r);
	}
	teardown_env(&t, SG_FATE_REMOVE);
	free(want);
	free(inside);
	free(outside);
	free(root);

	/* A root that would hide the system is refused; nothing is left. */
	tenv_init(&t, &H, "/usr");
	assert_int_equal(provision(&t, &pr.p, false, &err), SG_E_INVALID_ARGUMENT);
	inside = path_of("%s/%s", H.workspace, t.identity);
	assert_false(exists(inside));
	free(inside);
	env_free(t.env);
}

static void t_network_none(void **state)
{
	struct prof pr;
	struct tenv t;
	struct sg_exec_result r;
	struct sg_errinfo err;

	(void)state;
	NEED_SSHD();
	prof_init(&pr, &H);
	pr.p.network = SG_NET_NONE;
	tenv_init(&t, &H, NULL);
	if (provision(&t, &pr.p, false, &err) == SG_E_UNSUPPORTED) {
		print_message("skipped: %s\n", err.msg);
		env_free(t.env);
		skip();
	}
	assert_int_equal(err.code, SG_OK);
	sh_ok(t.env, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '", &r);
	assert_string_equal(r.out.p, "lo\n");
	sg_exec_result_release(&r);
	teardown_env(&t, SG_FATE_REMOVE);
}

static void t_memory_limit(void **state)
{
	struct prof pr;
	struct tenv t;
	struct sg_exec_result r;
	struct sg_errinfo err;
	sg_err rc;
	char *line, *dir = NULL;

	(void)state;
	NEED_SSHD();
	prof_init(&pr, &H);
	pr.p.memory_mb = 256;
	tenv_init(&t, &H, NULL);
	rc = provision(&t, &pr.p, false, &err);
	if (rc == SG_E_UNSUPPORTED) {
		/* Refused, naming the field: also a pass. */
		assert_non_null(strstr(err.msg, "memory_mb"));
		env_free(t.env);
		return;
	}
	assert_int_equal(rc, SG_OK);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(
				 json_object_get(t.env->facts, "resources"), "applied"),
						"memory_mb")),
			 256);
	sh_ok(t.env, "grep -E ':memory:|^0::' /proc/self/cgroup", &r);
	line = strstr(r.out.p, "/sandgate/");
	assert_non_null(line);
	line[strcspn(line, "\n")] = '\0';
	if (strstr(r.out.p, ":memory:"))
		dir = path_of("/sys/fs/cgroup/memory%s", line);
	else
		dir = path_of("/sys/fs/cgroup%s", line);
	{
		char *f = path_of("%s/%s", dir, strstr(r.out.p, ":memory:")
							  ? "memory.limit_in_bytes"
							  : "memory.max");

		assert_int_equal(read_long(f), 256L * 1024 * 1024);
		free(f);
	}
	sg_exec_result_release(&r);
	teardown_env(&t, SG_FATE_REMOVE);
	assert_false(exists(dir));
	free(dir);
}

/* ---- failures that must be closed ----------------------------------- */

static char *tmp_file(const char *name, const char *content)
{
	char *p = path_of("%s/%s", state_dir, name);
	FILE *f = fopen(p, "we");

	assert_non_null(f);
	fputs(content, f);
	fclose(f);
	return p;
}

static void assert_nothing_left(const struct tenv *t)
{
	char *envdir = path_of("%s/%s", H.workspace, t->identity);
	char *sockdir = path_of("%s/ssh", state_dir);
	struct sg_exec_result lr;
	const char *argv[] = { "ls", "-A", sockdir, NULL };

	assert_false(exists(envdir));
	if (exists(sockdir)) {
		assert_int_equal(run_tool(argv, &lr), 0);
		assert_int_equal(lr.out.len, 0);
		sg_exec_result_release(&lr);
	}
	free(envdir);
	free(sockdir);
}

static void t_host_keys_fail_closed(void **state)
{
	struct prof pr;
	struct tenv t;
	struct sg_errinfo err;
	struct sg_exec_result r;
	char *kh, *keyfile, *line;

	(void)state;
	NEED_SSHD();
	/* Unknown: the file does not have the key. */
	prof_init(&pr, &H);
	kh = tmp_file("empty_known_hosts", "");
	snprintf(pr.kh, sizeof(pr.kh), "%s", kh);
	tenv_init(&t, &H, NULL);
	assert_int_equal(provision(&t, &pr.p, false, &err), SG_E_UNAVAILABLE);
	print_message("unknown key: %s\n", err.msg);
	assert_non_null(strstr(err.msg, kh));
	assert_non_null(strstr(err.msg, "plain ssh"));
	env_free(t.env);
	assert_nothing_left(&t);
	free(kh);

	/* Changed: the file has another key for this host and port. */
	keyfile = path_of("%s/other_host_key", state_dir);
	{
		const char *argv[] = { "ssh-keygen", "-q", "-t", "ed25519", "-N", "",
				       "-f", keyfile, NULL };

		unlink(keyfile);
		assert_int_equal(run_tool(argv, &r), 0);
		sg_exec_result_release(&r);
	}
	{
		char *pub = path_of("%s.pub", keyfile);
		FILE *f = fopen(pub, "re");
		char buf[512] = "";

		assert_non_null(f);
		assert_non_null(fgets(buf, sizeof(buf), f));
		fclose(f);
		*strrchr(buf, ' ') = '\0'; /* drop the comment */
		line = path_of("[127.0.0.1]:%s %s\n", H.port, buf);
		free(pub);
	}
	kh = tmp_file("changed_known_hosts", line);
	free(line);
	prof_init(&pr, &H);
	snprintf(pr.kh, sizeof(pr.kh), "%s", kh);
	tenv_init(&t, &H, NULL);
	assert_int_equal(provision(&t, &pr.p, false, &err), SG_E_UNAVAILABLE);
	print_message("changed key: %s\n", err.msg);
	assert_non_null(strstr(err.msg, kh));
	assert_non_null(strstr(err.msg, "does not match"));
	assert_non_null(strstr(err.msg, "ssh-keygen -R"));
	env_free(t.env);
	assert_nothing_left(&t);
	free(kh);

	/* Wrong identity: a key the server does not know. */
	prof_init(&pr, &H);
	snprintf(pr.key, sizeof(pr.key), "%s", keyfile);
	tenv_init(&t, &H, NULL);
	assert_int_equal(provision(&t, &pr.p, false, &err), SG_E_UNAVAILABLE);
	print_message("wrong identity: %s\n", err.msg);
	assert_non_null(strstr(err.msg, "refused the ssh login"));
	assert_non_null(strstr(err.msg, keyfile));
	env_free(t.env);
	assert_nothing_left(&t);
	free(keyfile);
}

/*
 * The user's (or the system's) ssh config cannot weaken the host key
 * check: an `ssh` first on PATH runs the real client with a config file
 * that says NoHostAuthenticationForLocalhost (which accepts any key from
 * 127.0.0.1) or a KnownHostsCommand that supplies the key, and a profile
 * whose known_hosts_file is empty must still fail closed.
 */
static char *saved_path;

static int restore_path(void **state)
{
	(void)state;
	if (saved_path)
		setenv("PATH", saved_path, 1);
	free(saved_path);
	saved_path = NULL;
	return 0;
}

static void t_user_config_cannot_weaken_host_keys(void **state)
{
	static const char *const configs[] = { "NoHostAuthenticationForLocalhost yes",
						"KnownHostsCommand", NULL };
	char *real = sg_exec_which("ssh"), *bindir = path_of("%s/fakebin", state_dir);
	char *kh = tmp_file("weak_empty_known_hosts", "");
	char *feeder = path_of("%s/kh-feeder.sh", state_dir);

	(void)state;
	NEED_SSHD();
	assert_non_null(real);
	saved_path = strdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	assert_int_equal(mkdir(bindir, 0700), 0);
	{
		/* The KnownHostsCommand: prints the real host key. */
		char *text = path_of("#!/bin/sh\ncat '%s'\n", H.known_hosts);
		char *f = tmp_file("kh-feeder.sh", text);

		assert_int_equal(chmod(f, 0700), 0);
		free(text);
		free(f);
	}
	for (size_t i = 0; configs[i]; i++) {
		struct prof pr;
		struct tenv t;
		struct sg_errinfo err;
		char *cfgtext = path_of("%s %s\n", configs[i], i == 1 ? feeder : "");
		char *cfg = tmp_file("weak_ssh_config", cfgtext);
		char *wrap = path_of("#!/bin/sh\nexec '%s' -F '%s' \"$@\"\n", real, cfg);
		char *ssh = path_of("%s/ssh", bindir), *path = path_of("%s:%s", bindir, saved_path);
		FILE *f = fopen(ssh, "we");

		assert_non_null(f);
		fputs(wrap, f);
		fclose(f);
		assert_int_equal(chmod(ssh, 0700), 0);
		setenv("PATH", path, 1);
		prof_init(&pr, &H);
		snprintf(pr.kh, sizeof(pr.kh), "%s", kh);
		tenv_init(&t, &H, NULL);
		assert_int_equal(provision(&t, &pr.p, false, &err), SG_E_UNAVAILABLE);
		print_message("with \"%s\": %s\n", configs[i], err.msg);
		assert_non_null(strstr(err.msg, "is not in"));
		env_free(t.env);
		setenv("PATH", saved_path, 1);
		assert_nothing_left(&t);
		free(cfgtext);
		free(cfg);
		free(wrap);
		free(ssh);
		free(path);
	}
	free(real);
	free(bindir);
	free(kh);
	free(feeder);
}

struct found {
	const char *id;
	bool seen;
	char state[32], identity[128];
};

static int found_cb(const struct sg_env_info *info, void *payload)
{
	struct found *f = payload;

	if (strcmp(info->id, f->id) != 0)
		return 0;
	f->seen = true;
	snprintf(f->state, sizeof(f->state), "%s", info->state);
	snprintf(f->identity, sizeof(f->identity), "%s", info->identity);
	return 1;
}

static void t_require_existing(void **state)
{
	struct prof pr;
	struct tenv t, t2;
	struct sg_errinfo err;
	struct sg_exec_result r;
	char *envdir, *expires, *kept;
	long deadline;

	(void)state;
	NEED_SSHD();
	prof_init(&pr, &H);
	tenv_init(&t, &H, NULL);
	assert_int_equal(provision(&t, &pr.p, true, &err), SG_E_WORKSPACE_LOST);
	assert_non_null(strstr(err.msg, t.identity));
	env_free(t.env);
	assert_nothing_left(&t);

	/* Kept (not persistent): the idle deadline is left behind. */
	provision_ok(&t, &pr.p);
	sh_ok(t.env, "echo kept > kept.txt", &r);
	sg_exec_result_release(&r);
	teardown_env(&t, SG_FATE_KEEP);
	envdir = path_of("%s/%s", H.workspace, t.identity);
	expires = path_of("%s/expires", envdir);
	deadline = read_long(expires);
	assert_true(deadline >= (long)time(NULL) + 590 && deadline <= (long)time(NULL) + 610);

	/* Resumed: same files, deadline cleared. */
	memcpy(&t2, &t, sizeof(t2));
	snprintf(t2.session, sizeof(t2.session), "%.40s-again", t.session);
	assert_int_equal(provision(&t2, &pr.p, true, &err), SG_OK);
	assert_true(t2.env->resumed);
	kept = path_of("%s/kept.txt", t.files);
	assert_true(exists(kept));
	assert_false(exists(expires));

	/* list sees it, attached. */
	{
		struct found f = { .id = t2.env->id };

		assert_int_equal(sg_adapter_ssh.list(&pr.p, state_dir, found_cb, &f, NULL,
						     &err),
				 SG_OK);
		assert_true(f.seen);
		assert_string_equal(f.state, "attached");
		assert_string_equal(f.identity, t.identity);
	}
	teardown_env(&t2, SG_FATE_REMOVE);
	assert_false(exists(envdir));
	free(kept);
	free(expires);
	free(envdir);

	/* destroy (sandgate envs rm) removes a kept one by its id. */
	tenv_init(&t, &H, NULL);
	provision_ok(&t, &pr.p);
	{
		char id[128];

		snprintf(id, sizeof(id), "%s", t.env->id);
		teardown_env(&t, SG_FATE_KEEP);
		envdir = path_of("%s/%s", H.workspace, t.identity);
		assert_true(exists(envdir));
		assert_int_equal(sg_adapter_ssh.destroy(&pr.p, state_dir, id, NULL, &err),
				 SG_OK);
		assert_false(exists(envdir));
		assert_int_equal(sg_adapter_ssh.destroy(&pr.p, state_dir, id, NULL, &err),
				 SG_E_NOT_FOUND);
		sg_err_clear(&err);
		assert_int_equal(sg_adapter_ssh.destroy(&pr.p, state_dir, "ssh-../x", NULL,
							&err),
				 SG_E_INVALID_ARGUMENT);
		free(envdir);
	}
}

static void t_helper_upload_is_cached(void **state)
{
	struct prof pr;
	struct tenv t;
	struct stat st1, st2;
	char *cached;

	(void)state;
	NEED_SSHD();
	prof_init(&pr, &H);
	tenv_init(&t, &H, NULL);
	provision_ok(&t, &pr.p);
	cached = strdup(t.env->helper);
	teardown_env(&t, SG_FATE_REMOVE);

	/* Gone from the cache: the next provision uploads it. */
	assert_int_equal(unlink(cached), 0);
	tenv_init(&t, &H, NULL);
	provision_ok(&t, &pr.p);
	assert_true(json_is_true(json_object_get(json_object_get(t.env->facts, "ssh"),
						 "helper_uploaded")));
	assert_int_equal(stat(cached, &st1), 0);
	assert_int_equal(st1.st_mode & 0777, 0700);
	teardown_env(&t, SG_FATE_REMOVE);

	/* Cached: the one after that does not (an upload renames a new file in). */
	tenv_init(&t, &H, NULL);
	provision_ok(&t, &pr.p);
	assert_false(json_is_true(json_object_get(json_object_get(t.env->facts, "ssh"),
						  "helper_uploaded")));
	assert_int_equal(stat(cached, &st2), 0);
	assert_int_equal(st1.st_mtime, st2.st_mtime);
	assert_int_equal(st1.st_ino, st2.st_ino);
	teardown_env(&t, SG_FATE_REMOVE);

	/* A corrupted cached copy fails its checksum and is replaced. */
	{
		FILE *f = fopen(cached, "r+e");

		assert_non_null(f);
		fputs("corrupt", f);
		fclose(f);
	}
	tenv_init(&t, &H, NULL);
	provision_ok(&t, &pr.p);
	assert_true(json_is_true(json_object_get(json_object_get(t.env->facts, "ssh"),
						 "helper_uploaded")));
	teardown_env(&t, SG_FATE_REMOVE);
	free(cached);
}

/* A directory sandgate did not make is never adopted (nor removed later). */
static void t_foreign_directory_refused(void **state)
{
	struct prof pr;
	struct tenv t;
	struct sg_errinfo err;
	char *envdir, *precious;

	(void)state;
	NEED_SSHD();
	prof_init(&pr, &H);
	tenv_init(&t, &H, NULL);
	envdir = path_of("%s/%s", H.workspace, t.identity);
	precious = path_of("%s/precious.txt", envdir);
	assert_int_equal(mkdir(envdir, 0755), 0);
	fclose(fopen(precious, "we"));
	assert_int_equal(provision(&t, &pr.p, false, &err), SG_E_PERMISSION);
	assert_non_null(strstr(err.msg, envdir));
	env_free(t.env);
	assert_true(exists(precious));
	assert_false(exists(t.files));
	unlink(precious);
	rmdir(envdir);
	free(precious);
	free(envdir);
}

/* ---- the host goes away --------------------------------------------- */

static void t_sshd_killed_mid_session(void **state)
{
	struct harness h2;
	struct prof pr;
	struct tenv t;
	struct sg_exec_result r;
	struct sg_errinfo err;
	char *pidfile, *script;
	long pid;

	(void)state;
	NEED_SSHD();
	assert_true(harness_start(&h2));
	prof_init(&pr, &h2);
	tenv_init(&t, &h2, NULL);
	provision_ok(&t, &pr.p);
	sh_ok(t.env, "true", &r);
	sg_exec_result_release(&r);

	pidfile = path_of("%s/pid", t.files);
	script = path_of("echo $$ > '%s'; exec sleep 30", pidfile);
	{
		struct bg b = { .env = t.env, .script = script };
		pthread_t th;

		assert_int_equal(sg_cancel_init(&b.cancel), SG_OK);
		assert_int_equal(pthread_create(&th, NULL, bg_run, &b), 0);
		pid = wait_pid_file(pidfile, 10000);
		assert_true(pid > 0);
		/* The server and its connections vanish; the command stays. */
		harness_do(&h2, "kill");
		pthread_join(th, NULL);
		print_message("in flight: %s: %s\n", sg_err_word(b.rc), b.err.msg);
		assert_int_equal(b.rc, SG_E_UNAVAILABLE);
		assert_non_null(strstr(b.err.msg, "outcome is unknown"));
		/* The wrapper's watchdog kills what the lost session ran. */
		assert_true(gone_within(pid, 4000));
		sg_exec_result_release(&b.r);
		sg_cancel_release(&b.cancel);
	}
	{
		const char *argv[] = { "true", NULL };

		assert_int_equal(run(t.env, argv, NULL, NULL, NULL, 0, 30000, 0, &r, NULL,
				     &err), SG_E_UNAVAILABLE);
		print_message("next exec: %s\n", err.msg);
		assert_non_null(strstr(err.msg, "127.0.0.1"));
		sg_exec_result_release(&r);
		assert_int_equal(run(t.env, argv, NULL, NULL, NULL, 0, 30000, 0, &r, NULL,
				     &err), SG_E_UNAVAILABLE);
		sg_exec_result_release(&r);
	}
	memset(&err, 0, sizeof(err));
	assert_int_equal(sg_adapter_ssh.teardown(t.env, SG_FATE_REMOVE, NULL, &err),
			 SG_E_UNAVAILABLE);
	env_free(t.env);
	free(script);
	free(pidfile);
	harness_do(&h2, "stop");
}

/* ---- setup ---------------------------------------------------------- */

static char *beside_exe(const char *rel)
{
	char self[4096], *slash;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0)
		return NULL;
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (!slash)
		return NULL;
	*slash = '\0';
	return path_of("%s/%s", self, rel);
}

static int group_setup(void **state)
{
	char tmpl[] = "/tmp/sg-ssh-test.XXXXXX";
	const char *env;

	(void)state;
	signal(SIGPIPE, SIG_IGN);
	env = getenv("SG_HELPER");
	helper_path = env && *env ? strdup(env) : beside_exe("../sg-helper");
	env = getenv("SG_SSHD_HARNESS");
	if (env && *env) {
		harness_script = strdup(env);
	} else {
		char *dir = strdup(__FILE__), *slash = strrchr(dir, '/');

		if (slash)
			*slash = '\0';
		harness_script = path_of("%s/../ssh/sshd-harness.sh", dir);
		free(dir);
	}
	if (!mkdtemp(tmpl))
		return -1;
	state_dir = strdup(tmpl);
	have_sshd = access("/usr/sbin/sshd", X_OK) == 0;
	if (!have_sshd)
		return 0;
	if (!helper_path || access(helper_path, X_OK) != 0) {
		print_message("sg-helper not found (set SG_HELPER)\n");
		return -1;
	}
	return harness_start(&H) ? 0 : -1;
}

static int group_teardown(void **state)
{
	const char *argv[] = { "rm", "-rf", state_dir, NULL };
	struct sg_exec_result r;

	(void)state;
	if (H.up)
		harness_do(&H, "stop");
	run_tool(argv, &r);
	sg_exec_result_release(&r);
	free(state_dir);
	free(helper_path);
	free(harness_script);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_validate),
		cmocka_unit_test(t_provision_creates_and_remove_deletes),
		cmocka_unit_test(t_exec_quoting),
		cmocka_unit_test(t_exit_codes_and_stdin),
		cmocka_unit_test(t_keep_tail),
		cmocka_unit_test(t_env_cwd_merge),
		cmocka_unit_test(t_timeout_and_cancel_kill_remote),
		cmocka_unit_test(t_leftovers_and_detached),
		cmocka_unit_test(t_concurrent_exec),
		cmocka_unit_test(t_root_through_mount_namespace),
		cmocka_unit_test(t_network_none),
		cmocka_unit_test(t_memory_limit),
		cmocka_unit_test(t_host_keys_fail_closed),
		cmocka_unit_test_teardown(t_user_config_cannot_weaken_host_keys, restore_path),
		cmocka_unit_test(t_require_existing),
		cmocka_unit_test(t_helper_upload_is_cached),
		cmocka_unit_test(t_foreign_directory_refused),
		cmocka_unit_test(t_sshd_killed_mid_session),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
