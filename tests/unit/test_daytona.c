/*
 * test_daytona.c - the daytona adapter's primitives against the fake
 * Daytona (tests/fakes/daytona/server.mjs) in bwrap mode.
 *
 * The fake is started once, on a port the kernel picks, with a random
 * API key and a short toolbox limit (3 s); each test resets it.  Every
 * assertion about the provider is made on the fake's own state
 * (/__fake/state) and request log (/__fake/requests), never on what the
 * adapter says it did.  stderr is captured for the whole run and scanned,
 * with every error sentence, for the key.  Without node, or without the
 * namespaces bwrap mode needs, every test is skipped with a message.
 */
#define _GNU_SOURCE /* asprintf, memmem, pipe2 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "adapters/adapter.h"
#include "core/exec.h"
#include "core/http.h"
#include "base/cancel.h"

extern const struct sg_adapter sg_adapter_daytona;
extern char **environ;

static const struct sg_adapter *const A = &sg_adapter_daytona;

static struct {
	pid_t pid;
	int in;              /* the fake's stdin: closing it stops the fake */
	int port;
	char base[128];      /* http://127.0.0.1:<port> */
	char key[64];
	bool up;
	char *why_not;       /* the reason tests are skipped */
	int saved_stderr;
	char stderr_file[256];
	char helper[1024];
	unsigned serial;
	char secrets_seen[512]; /* sentences that leaked the key */
} F;

#define SKIP_WITHOUT_FAKE()                                             \
	do {                                                                \
		if (!F.up) {                                                \
			print_message("skipped: %s\n", F.why_not);          \
			skip();                                             \
		}                                                           \
	} while (0)

/* ---- Admin API ----------------------------------------------------------- */

static json_t *admin(const char *method, const char *path, json_t *body)
{
	char url[256], *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };
	json_t *j = NULL;
	json_error_t je;

	snprintf(url, sizeof(url), "%s%s", F.base, path);
	sg_http_response_init(&r, 64 * 1024 * 1024);
	{
		struct sg_http_request req = { .method = method, .url = url,
					       .content_type = text ? "application/json" : NULL,
					       .body = text, .body_len = text ? strlen(text) : 0,
					       .timeout_ms = 30000 };

		sg_err rc = sg_http_do(&req, &r, NULL, &err);

		if (rc) {
			int st = 0;
			pid_t w = waitpid(F.pid, &st, WNOHANG);

			print_message("the fake did not answer %s %s: %s (fake %s, status %d)\n",
				      method, path, err.msg, w == 0 ? "alive" : "gone", st);
		}
		assert_int_equal(rc, SG_OK);
	}
	assert_true(r.status >= 200 && r.status < 300);
	if (r.body.len)
		j = json_loadb(r.body.p, r.body.len, 0, &je);
	sg_http_response_release(&r);
	free(text);
	json_decref(body);
	return j;
}

static void reset(void)
{
	json_decref(admin("POST", "/__fake/reset", NULL));
}

static json_t *fake_state(void)
{
	return admin("GET", "/__fake/state", NULL);
}

/* The fake's record of sandbox id (new), or NULL. */
static json_t *sandbox(const char *id)
{
	json_t *st = fake_state(), *s, *found = NULL;
	size_t i;

	json_array_foreach(json_object_get(st, "sandboxes"), i, s)
		if (strcmp(json_string_value(json_object_get(s, "id")), id) == 0)
			found = json_incref(s);
	json_decref(st);
	return found;
}

static size_t n_sandboxes(void)
{
	json_t *st = fake_state();
	size_t n = json_array_size(json_object_get(st, "sandboxes"));

	json_decref(st);
	return n;
}

static bool destroyed(const char *id)
{
	json_t *st = fake_state(), *d;
	size_t i;
	bool yes = false;

	json_array_foreach(json_object_get(st, "destroyed"), i, d)
		if (strcmp(json_string_value(d), id) == 0)
			yes = true;
	json_decref(st);
	return yes;
}

/* Wait until the sandbox is destroyed (the fake takes one transition). */
static bool wait_destroyed(const char *id)
{
	for (int i = 0; i < 100; i++) {
		if (destroyed(id))
			return true;
		usleep(20000);
	}
	return false;
}

static void fault(const char *json)
{
	json_error_t je;
	json_t *f = json_loads(json, 0, &je);

	assert_non_null(f);
	json_decref(admin("POST", "/__fake/faults", f));
}

static long long last_seq(void)
{
	json_t *r = admin("GET", "/__fake/requests", NULL), *a = json_object_get(r, "requests");
	long long s = json_array_size(a)
			      ? json_integer_value(json_object_get(json_array_get(a, json_array_size(a) - 1), "seq"))
			      : 0;

	json_decref(r);
	return s;
}

/* Requests since seq (new array). */
static json_t *requests_since(long long seq)
{
	char path[64];
	json_t *r, *a;

	snprintf(path, sizeof(path), "/__fake/requests?since=%lld", seq);
	r = admin("GET", path, NULL);
	a = json_incref(json_object_get(r, "requests"));
	json_decref(r);
	return a;
}

/* Requests with this method and path (faulted ones have no route). */
static size_t count_path(json_t *reqs, const char *method, const char *path, long status)
{
	json_t *e;
	size_t i, n = 0;

	json_array_foreach(reqs, i, e) {
		if (strcmp(json_string_value(json_object_get(e, "method")), method) == 0 &&
		    strcmp(json_string_value(json_object_get(e, "path")), path) == 0 &&
		    (status < 0 || json_integer_value(json_object_get(e, "status")) == status))
			n++;
	}
	return n;
}

static size_t count_route(json_t *reqs, const char *route, long status)
{
	json_t *e;
	size_t i, n = 0;

	json_array_foreach(reqs, i, e) {
		const char *r = json_string_value(json_object_get(e, "route"));

		if (r && strcmp(r, route) == 0 &&
		    (status < 0 || json_integer_value(json_object_get(e, "status")) == status))
			n++;
	}
	return n;
}

/* ---- Profiles and environments --------------------------------------------- */

struct tprof {
	struct sg_profile p;
	const char *allow[16];
	json_t *raw;
};

/* A profile from its JSON; the generic fields are read like config.c does. */
static struct tprof *profile(const char *json)
{
	struct tprof *t = calloc(1, sizeof(*t));
	json_error_t je;
	json_t *net, *a;
	size_t i;

	assert_non_null(t);
	t->raw = json_loads(json, 0, &je);
	assert_non_null(t->raw);
	if (!json_object_get(t->raw, "api_url_env"))
		json_object_set_new(t->raw, "api_url_env", json_string("DT_TEST_URL"));
	if (!json_object_get(t->raw, "api_key_env"))
		json_object_set_new(t->raw, "api_key_env", json_string("DT_TEST_KEY"));
	if (!json_object_get(t->raw, "toolbox_timeout_ms"))
		json_object_set_new(t->raw, "toolbox_timeout_ms", json_integer(3000));
	t->p.raw = t->raw;
	t->p.name = "dt";
	t->p.backend = "daytona";
	t->p.image = json_string_value(json_object_get(t->raw, "image"));
	t->p.snapshot = json_string_value(json_object_get(t->raw, "snapshot"));
	t->p.user = json_string_value(json_object_get(t->raw, "user"));
	t->p.host_workspace = json_string_value(json_object_get(t->raw, "host_workspace"));
	t->p.cpus = json_number_value(json_object_get(t->raw, "cpus"));
	t->p.memory_mb = json_integer_value(json_object_get(t->raw, "memory_mb"));
	t->p.persistent = json_is_true(json_object_get(t->raw, "persistent"));
	t->p.lifetime_seconds = json_integer_value(json_object_get(t->raw, "lifetime_seconds"));
	if (!t->p.lifetime_seconds)
		t->p.lifetime_seconds = 600;
	net = json_object_get(t->raw, "network");
	if (json_is_string(net) && strcmp(json_string_value(net), "none") == 0)
		t->p.network = SG_NET_NONE;
	if (json_is_object(net)) {
		t->p.network = SG_NET_ALLOW;
		json_array_foreach(json_object_get(net, "allow"), i, a)
			if (i < 15)
				t->allow[i] = json_string_value(a);
		t->p.network_allow = t->allow;
	}
	if (json_is_array(json_object_get(t->raw, "best_effort"))) {
		static const char *be[8];

		json_array_foreach(json_object_get(t->raw, "best_effort"), i, a)
			if (i < 7)
				be[i] = json_string_value(a);
		t->p.best_effort = be;
	}
	return t;
}

static void profile_free(struct tprof *t)
{
	json_decref(t->raw);
	free(t);
}

/* A fresh identity for this run. */
static char *unique(const char *what)
{
	char *s = NULL;

	assert_true(asprintf(&s, "%s-%d-%u", what, (int)getpid(), ++F.serial) > 0);
	return s;
}

struct tenv {
	struct sg_env *env;
	char *identity, *session;
};

static void check_no_secret(const struct sg_errinfo *err)
{
	if (strstr(err->msg, F.key))
		snprintf(F.secrets_seen, sizeof(F.secrets_seen), "%s", err->msg);
	assert_null(strstr(err->msg, F.key));
}

/* Provision; returns the code, env kept in *out (release with env_free). */
/* As env_up, for a state directory whose registry had no record (unrecorded). */
static sg_err env_up_as(struct tprof *t, const char *identity, bool require, bool unrecorded,
			struct tenv *out, struct sg_errinfo *err);

static sg_err env_up(struct tprof *t, const char *identity, bool require, struct tenv *out,
		     struct sg_errinfo *err)
{
	return env_up_as(t, identity, require, false, out, err);
}

static sg_err env_up_as(struct tprof *t, const char *identity, bool require, bool unrecorded,
			struct tenv *out, struct sg_errinfo *err)
{
	struct sg_env *env = calloc(1, A->env_size);
	sg_err rc;

	assert_non_null(env);
	out->env = env;
	out->identity = strdup(identity);
	out->session = unique("sess");
	env->ad = A;
	env->profile = &t->p;
	env->root = "/workspace";
	env->session = out->session;
	env->identity = out->identity;
	env->state_dir = "/tmp";
	env->helper_host = F.helper;
	env->require_existing = require;
	env->known = !unrecorded;
	rc = A->provision(env, NULL, err);
	check_no_secret(err);
	return rc;
}

static void env_free(struct tenv *e)
{
	if (!e->env)
		return;
	A->release(e->env);
	free(e->env);
	free(e->identity);
	free(e->session);
	memset(e, 0, sizeof(*e));
}

static const char *const base_envp[] = { "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
					  NULL };

/* Run argv; asserts the transport worked. */
static void run(struct tenv *e, const struct sg_exec *x, struct sg_exec_result *r)
{
	struct sg_errinfo err = { 0 };
	sg_err rc = A->exec(e->env, x, r, NULL, &err);

	check_no_secret(&err);
	if (rc)
		print_message("exec failed: %s\n", err.msg);
	assert_int_equal(rc, SG_OK);
}

static void sh(struct tenv *e, const char *script, struct sg_exec_result *r)
{
	const char *argv[] = { "/bin/sh", "-c", script, NULL };
	struct sg_exec x = { .argv = argv, .envp = base_envp, .max_output = 1 << 20 };

	run(e, &x, r);
}

/* ---- The fake's lifetime ------------------------------------------------------ */

static bool on_path(const char *name)
{
	const char *path = getenv("PATH");
	char *copy = strdup(path ? path : "/usr/bin:/bin"), *save = NULL, *d;
	bool found = false;

	for (d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
		char p[1024];

		snprintf(p, sizeof(p), "%s/%s", d, name);
		found = access(p, X_OK) == 0;
	}
	free(copy);
	return found;
}

static int fake_start(void **state)
{
	int in[2], out[2], errfd;
	posix_spawn_file_actions_t fa;
	char server[1024], self[1024], *src = NULL;
	unsigned char rnd[12];
	ssize_t n;
	char line[256] = "";
	size_t used = 0;

	(void)state;
	F.up = false;
	/* Capture stderr for the credential scan. */
	snprintf(F.stderr_file, sizeof(F.stderr_file), "/tmp/test_daytona-stderr-%d", (int)getpid());
	F.saved_stderr = dup(2);
	errfd = open(F.stderr_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (errfd >= 0) {
		dup2(errfd, 2);
		close(errfd);
	}
	if (getentropy(rnd, sizeof(rnd)) != 0)
		memset(rnd, 7, sizeof(rnd));
	snprintf(F.key, sizeof(F.key), "sgkey-");
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(F.key + strlen(F.key), 3, "%02x", rnd[i]);
	/* sg-helper: from ctest, or beside sandgate in the build tree. */
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = '\0';
	if (getenv("SG_HELPER"))
		snprintf(F.helper, sizeof(F.helper), "%s", getenv("SG_HELPER"));
	else
		snprintf(F.helper, sizeof(F.helper), "%.*s/../sg-helper",
			 (int)(strrchr(self, '/') ? strrchr(self, '/') - self : 1), self);
	if (access(F.helper, R_OK) != 0) {
		F.why_not = "sg-helper is not built (set SG_HELPER)";
		return 0;
	}
	if (!on_path("node")) {
		F.why_not = "node is not installed";
		return 0;
	}
	if (!on_path("bwrap") || !on_path("nsenter")) {
		F.why_not = "bwrap mode of the fake needs bwrap and nsenter";
		return 0;
	}
	/* The source tree: SG_SOURCE_DIR, else where this file was compiled from. */
	src = getenv("SG_SOURCE_DIR");
	if (src) {
		snprintf(server, sizeof(server), "%s/tests/fakes/daytona/server.mjs", src);
	} else {
		const char *me = __FILE__, *cut = strstr(me, "tests/unit/test_daytona.c");

		snprintf(server, sizeof(server), "%.*stests/fakes/daytona/server.mjs",
			 (int)(cut ? cut - me : 0), me);
	}
	if (access(server, R_OK) != 0) {
		F.why_not = "tests/fakes/daytona/server.mjs is missing";
		return 0;
	}
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	{
		char *argv[] = { "node", server, "--port", "0", "--exec-mode", "bwrap",
				 "--exec-limit-ms", "3000", "--transition-ms", "40",
				 "--create-block-ms", "5000", "--api-key", F.key, NULL };

		if (posix_spawnp(&F.pid, "node", &fa, NULL, argv, environ) != 0) {
			F.why_not = "node could not be started";
			return 0;
		}
	}
	posix_spawn_file_actions_destroy(&fa);
	close(in[0]);
	close(out[1]);
	F.in = in[1];
	for (;;) {
		struct pollfd p = { .fd = out[0], .events = POLLIN };
		ssize_t k;

		if (poll(&p, 1, 15000) <= 0)
			break;
		k = read(out[0], line + used, sizeof(line) - 1 - used);
		if (k <= 0)
			break;
		used += (size_t)k;
		line[used] = '\0';
		if (strchr(line, '\n'))
			break;
	}
	close(out[0]);
	if (sscanf(line, "LISTENING %d", &F.port) != 1) {
		F.why_not = "the fake did not start (see its stderr)";
		return 0;
	}
	snprintf(F.base, sizeof(F.base), "http://127.0.0.1:%d", F.port);
	{
		char url[200];

		snprintf(url, sizeof(url), "%s/api", F.base);
		setenv("DT_TEST_URL", url, 1);
		setenv("DT_TEST_KEY", F.key, 1);
	}
	F.up = true;
	return 0;
}

static int fake_stop(void **state)
{
	int leaked = 0;

	(void)state;
	if (F.pid > 0) {
		int st;

		close(F.in);
		kill(F.pid, SIGTERM);
		waitpid(F.pid, &st, 0);
	}
	fflush(stderr);
	if (F.saved_stderr >= 0) {
		dup2(F.saved_stderr, 2);
		close(F.saved_stderr);
	}
	/* Scan everything written on stderr for the key, then show it. */
	{
		FILE *f = fopen(F.stderr_file, "r");
		char line[4096];

		while (f && fgets(line, sizeof(line), f)) {
			if (F.key[0] && strstr(line, F.key)) {
				fprintf(stderr, "test_daytona: the API key appeared on stderr\n");
				leaked = -1;
			}
			fputs(line, stderr);
		}
		if (f)
			fclose(f);
	}
	unlink(F.stderr_file);
	return leaked;
}

static int each(void **state)
{
	(void)state;
	if (F.up)
		reset();
	return 0;
}

/* ---- validate ------------------------------------------------------------------- */

static sg_err validate(const char *json, struct sg_errinfo *err)
{
	struct tprof *t = profile(json);
	sg_err rc;

	memset(err, 0, sizeof(*err));
	rc = A->validate(&t->p, err);
	profile_free(t);
	return rc;
}

static void test_validate(void **state)
{
	struct sg_errinfo err;

	(void)state;
	SKIP_WITHOUT_FAKE();
	assert_int_equal(validate("{\"image\":\"debian:12\",\"cpus\":1.5,\"memory_mb\":1500}", &err), SG_OK);
	assert_int_equal(validate("{\"image\":\"a\",\"snapshot\":\"b\"}", &err), SG_E_INVALID_ARGUMENT);
	/* Which fields daytona takes is its table's: test_config.c. */
	assert_int_equal(validate("{\"network\":{\"allow\":[\"fd00::/8\"]}}", &err), SG_E_UNSUPPORTED);
	assert_non_null(strstr(err.msg, "network"));
	assert_int_equal(validate("{\"network\":{\"allow\":[\"fd00::/8\",\"10.0.0.0/8\"]},\"best_effort\":[\"network\"]}", &err), SG_OK);
	assert_int_equal(validate("{\"network\":{\"allow\":[\"1.0.0.0/8\",\"2.0.0.0/8\",\"3.0.0.0/8\","
				  "\"4.0.0.0/8\",\"5.0.0.0/8\",\"6.0.0.0/8\",\"7.0.0.0/8\",\"8.0.0.0/8\","
				  "\"9.0.0.0/8\",\"10.0.0.0/8\",\"11.0.0.0/8\"]}}", &err), SG_E_UNSUPPORTED);
	assert_int_equal(validate("{\"network\":{\"allow\":[\"10.0.0.0/33\"]}}", &err), SG_E_INVALID_ARGUMENT);
	assert_int_equal(validate("{\"network\":{\"allow\":[\"github.com\",\"10.0.0.0/8\"]}}", &err), SG_OK);
	/* No key: refused, naming the variable and never a value. */
	assert_int_equal(validate("{\"api_key_env\":\"DT_TEST_NO_SUCH_VAR\"}", &err), SG_E_PERMISSION);
	assert_non_null(strstr(err.msg, "DT_TEST_NO_SUCH_VAR"));
}

/* ---- provision ------------------------------------------------------------------- */

static void test_create_labels_resources(void **state)
{
	struct tprof *t = profile("{\"image\":\"debian:12\",\"cpus\":1.5,\"memory_mb\":1500,"
				  "\"network\":\"none\",\"lifetime_seconds\":90}");
	struct sg_errinfo err = { 0 };
	struct tenv e = { 0 }, e2 = { 0 };
	char *id = unique("ident");
	json_t *sb, *labels, *req, *app;
	const char *name;

	(void)state;
	SKIP_WITHOUT_FAKE();
	assert_int_equal(env_up(t, id, false, &e, &err), SG_OK);
	assert_false(e.env->resumed);
	sb = sandbox(e.env->id);
	assert_non_null(sb);
	assert_int_equal(json_integer_value(json_object_get(sb, "cpu")), 2);
	assert_int_equal(json_integer_value(json_object_get(sb, "memory")), 2);
	assert_true(json_is_true(json_object_get(sb, "networkBlockAll")));
	assert_int_equal(json_integer_value(json_object_get(sb, "autoStopInterval")), 2);
	assert_int_equal(json_integer_value(json_object_get(sb, "autoDeleteInterval")), 2);
	assert_non_null(json_object_get(sb, "buildInfo"));
	labels = json_object_get(sb, "labels");
	assert_string_equal(json_string_value(json_object_get(labels, "managed-by")), "sandgate");
	assert_string_equal(json_string_value(json_object_get(labels, "sandgate.identity")), id);
	assert_string_equal(json_string_value(json_object_get(labels, "sandgate.session")), e.session);
	assert_string_equal(json_string_value(json_object_get(labels, "sandgate.profile")), "dt");
	assert_true(strtoll(json_string_value(json_object_get(labels, "sandgate.expires")), NULL, 10) -
			    strtoll(json_string_value(json_object_get(labels, "sandgate.created")), NULL, 10) ==
		    90);
	name = json_string_value(json_object_get(sb, "name"));
	assert_true(strncmp(name, "sg-ident-", 9) == 0);
	/* Requested vs applied, in the facts. */
	req = json_object_get(json_object_get(e.env->facts, "resources"), "requested");
	app = json_object_get(json_object_get(e.env->facts, "resources"), "applied");
	assert_true(json_real_value(json_object_get(req, "cpus")) == 1.5);
	assert_int_equal(json_integer_value(json_object_get(req, "memory_mb")), 1500);
	assert_int_equal(json_integer_value(json_object_get(app, "cpus")), 2);
	assert_int_equal(json_integer_value(json_object_get(app, "memory_mb")), 2048);
	assert_non_null(e.env->helper);
	assert_non_null(strstr(e.env->ctl_dir, "/.sandgate/ctl"));
	/* The same identity meets the same sandbox (deterministic name). */
	assert_int_equal(env_up(t, id, false, &e2, &err), SG_OK);
	assert_true(e2.env->resumed);
	assert_string_equal(e.env->id, e2.env->id);
	assert_int_equal(n_sandboxes(), 1);
	env_free(&e2);
	env_free(&e);
	json_decref(sb);
	free(id);
	profile_free(t);
}

static void test_snapshot_too_small_refused(void **state)
{
	struct tprof *t = profile("{\"snapshot\":\"daytonaio/sandbox:fake\",\"cpus\":2}");
	struct sg_errinfo err = { 0 };
	struct tenv e = { 0 };
	char *id = unique("snap");
	json_t *st;

	(void)state;
	SKIP_WITHOUT_FAKE();
	assert_int_equal(env_up(t, id, false, &e, &err), SG_E_UNSUPPORTED);
	assert_non_null(strstr(err.msg, "vCPU"));
	/* What the refused provision made is gone. */
	st = fake_state();
	for (int i = 0; i < 100 && json_array_size(json_object_get(st, "sandboxes")); i++) {
		json_decref(st);
		usleep(20000);
		st = fake_state();
	}
	assert_int_equal(json_array_size(json_object_get(st, "sandboxes")), 0);
	assert_int_equal(json_array_size(json_object_get(st, "destroyed")), 1);
	json_decref(st);
	env_free(&e);
	free(id);
	profile_free(t);
}

static void test_allow_list(void **state)
{
	struct tprof *t = profile("{\"network\":{\"allow\":[\"10.20.0.0/16\",\"github.com\","
				  "\"*.githubusercontent.com\",\"192.168.1.0/24\"]}}");
	struct sg_errinfo err = { 0 };
	struct tenv e = { 0 };
	char *id = unique("allow");
	json_t *sb;

	(void)state;
	SKIP_WITHOUT_FAKE();
	assert_int_equal(env_up(t, id, false, &e, &err), SG_OK);
	sb = sandbox(e.env->id);
	assert_false(json_is_true(json_object_get(sb, "networkBlockAll")));
	assert_string_equal(json_string_value(json_object_get(sb, "networkAllowList")),
			    "10.20.0.0/16,192.168.1.0/24");
	assert_string_equal(json_string_value(json_object_get(sb, "domainAllowList")),
			    "github.com,*.githubusercontent.com");
	json_decref(sb);
	/* Resumed under a stricter profile: the sandbox is changed to match. */
	{
		struct tprof *none = profile("{\"network\":\"none\"}");
		struct tenv e2 = { 0 };

		assert_int_equal(env_up(none, id, false, &e2, &err), SG_OK);
		assert_true(e2.env->resumed);
		sb = sandbox(e2.env->id);
		assert_true(json_is_true(json_object_get(sb, "networkBlockAll")));
		assert_string_equal(json_string_value(json_object_get(sb, "networkAllowList")), "");
		json_decref(sb);
		env_free(&e2);
		profile_free(none);
	}
	env_free(&e);
	free(id);
	profile_free(t);
}

static void test_create_retried_adopts(void **state)
{
	struct tprof *t = profile("{}");
	struct sg_errinfo err = { 0 };
	struct tenv e = { 0 };
	char *id = unique("adopt");
	long long seq;
	json_t *reqs;

	(void)state;
	SKIP_WITHOUT_FAKE();
	/*
	 * The create happens but its reply is lost; the lookup that follows
	 * misses it once (Daytona's list can lag): the adapter must then
	 * create again, meet 409 and adopt, never leaving two sandboxes.
	 */
	fault("{\"path\":\"^/api/sandbox$\",\"method\":\"POST\",\"action\":\"drop\",\"after\":true}");
	fault("{\"path\":\"^/api/sandbox/sg-adopt\",\"method\":\"GET\",\"status\":404,\"count\":2}");
	seq = last_seq();
	assert_int_equal(env_up(t, id, false, &e, &err), SG_OK);
	reqs = requests_since(seq);
	assert_int_equal(count_route(reqs, "createSandbox", 409), 1);
	assert_int_equal(n_sandboxes(), 1);
	assert_false(e.env->resumed); /* it is the one this provision made */
	json_decref(reqs);
	/* ... so a failure now would remove it: REMOVE does. */
	assert_int_equal(A->teardown(e.env, SG_FATE_REMOVE, NULL, &err), SG_OK);
	assert_true(wait_destroyed(e.env->id));
	env_free(&e);
	free(id);
	profile_free(t);
}

/* The route of the first control-plane request in reqs (the stream's aside). */
static const char *first_route(json_t *reqs)
{
	json_t *e;
	size_t i;

	json_array_foreach(reqs, i, e) {
		const char *r = json_string_value(json_object_get(e, "route"));

		if (r && strcmp(r, "socketIo") != 0)
			return r;
	}
	return "";
}

/*
 * A state directory that knows nothing of the identity creates at once,
 * with no lookup first (one request less at initialize).  What the
 * lookup guarded still holds through the create's 409: the identity's
 * own sandbox made elsewhere is adopted, somebody else's is refused, and
 * require_existing still looks and never creates.
 */
static void test_unrecorded_creates_first(void **state)
{
	struct tprof *t = profile("{\"persistent\":true}");
	struct sg_errinfo err = { 0 };
	struct tenv e = { 0 }, e2 = { 0 }, e3 = { 0 }, e4 = { 0 };
	char *id = unique("unrec"), *other = unique("unrec"), url[512], auth[200];
	const char *hdr[] = { auth, NULL };
	long long seq;
	json_t *reqs;

	(void)state;
	SKIP_WITHOUT_FAKE();
	seq = last_seq();
	assert_int_equal(env_up_as(t, id, false, true, &e, &err), SG_OK);
	assert_false(e.env->resumed);
	reqs = requests_since(seq);
	assert_string_equal(first_route(reqs), "createSandbox");
	assert_int_equal(count_route(reqs, "getSandbox", 404), 0);
	assert_int_equal(count_route(reqs, "createSandbox", -1), 1);
	json_decref(reqs);
	assert_int_equal(A->teardown(e.env, SG_FATE_KEEP, NULL, &err), SG_OK);
	/* Another state directory, same identity: 409, looked up, adopted. */
	seq = last_seq();
	assert_int_equal(env_up_as(t, id, false, true, &e2, &err), SG_OK);
	assert_true(e2.env->resumed);
	assert_string_equal(e.env->id, e2.env->id);
	assert_int_equal(n_sandboxes(), 1);
	reqs = requests_since(seq);
	assert_int_equal(count_route(reqs, "createSandbox", 409), 1);
	json_decref(reqs);
	/* The name taken by a sandbox that is not this identity's: refused. */
	snprintf(url, sizeof(url), "%s/api/sandbox/%s/labels", F.base, e2.env->id);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", F.key);
	{
		const char *body = "{\"labels\":{\"made-by\":\"someone\"}}";
		struct sg_http_request req = { .method = "PUT", .url = url, .headers = hdr,
					       .content_type = "application/json", .body = body,
					       .body_len = strlen(body), .timeout_ms = 30000 };
		struct sg_http_response r;
		struct sg_errinfo herr = { 0 };

		sg_http_response_init(&r, 1 << 20);
		assert_int_equal(sg_http_do(&req, &r, NULL, &herr), SG_OK);
		assert_int_equal(r.status, 200);
		sg_http_response_release(&r);
	}
	assert_int_equal(env_up_as(t, id, false, true, &e3, &err), SG_E_PROVIDER);
	assert_non_null(strstr(err.msg, "is not sandgate's sandbox"));
	assert_int_equal(n_sandboxes(), 1);
	/* require_existing looks up (and finds nothing) rather than creating. */
	seq = last_seq();
	assert_int_equal(env_up_as(t, other, true, true, &e4, &err), SG_E_WORKSPACE_LOST);
	reqs = requests_since(seq);
	assert_int_equal(count_route(reqs, "createSandbox", -1), 0);
	assert_int_equal(count_route(reqs, "getSandbox", 404), 1);
	json_decref(reqs);
	env_free(&e4);
	env_free(&e3);
	env_free(&e2);
	env_free(&e);
	free(other);
	free(id);
	profile_free(t);
}

static void test_create_fails_halfway(void **state)
{
	struct tprof *t = profile("{\"image\":\"debian:12\"}");
	struct sg_errinfo err = { 0 };
	struct tenv e = { 0 };
	char *id = unique("half");
	char sid[128];

	(void)state;
	SKIP_WITHOUT_FAKE();
	/* Every command fails: the sandbox exists, provisioning cannot finish. */
	fault("{\"path\":\"/process/execute$\",\"status\":500,\"count\":100}");
	assert_int_not_equal(env_up(t, id, false, &e, &err), SG_OK);
	snprintf(sid, sizeof(sid), "%s", e.env->id);
	assert_true(sid[0] != '\0');
	assert_true(wait_destroyed(sid));
	assert_int_equal(n_sandboxes(), 0);
	json_decref(admin("DELETE", "/__fake/faults", NULL));
	env_free(&e);
	free(id);
	profile_free(t);
}

/*
 * sg-helper's upload fails while the set-up sent beside it waits for the
 * program: initialize fails at once with the upload's error (not when the
 * set-up's wait runs out), and the sandbox it made is deleted.
 */
static void test_upload_fails_beside_setup(void **state)
{
	struct tprof *t = profile("{\"image\":\"debian:12\",\"toolbox_timeout_ms\":20000}");
	struct sg_errinfo err = { 0 };
	struct tenv e = { 0 };
	char *id = unique("upfail");
	char sid[128];
	int64_t t0;
	long long seq;
	json_t *reqs;

	(void)state;
	SKIP_WITHOUT_FAKE();
	seq = last_seq();
	fault("{\"path\":\"/files/bulk-upload$\",\"status\":500,\"count\":100}");
	t0 = sg_now_ms();
	assert_int_not_equal(env_up(t, id, false, &e, &err), SG_OK);
	/* The set-up would have waited 10 s for the program. */
	assert_true(sg_now_ms() - t0 < 8000);
	assert_non_null(strstr(err.msg, "uploading a file to the sandbox"));
	assert_null(strstr(err.msg, "did not arrive"));
	snprintf(sid, sizeof(sid), "%s", e.env->id);
	assert_true(sid[0] != '\0');
	assert_true(wait_destroyed(sid));
	assert_int_equal(n_sandboxes(), 0);
	/* The set-up did go out beside the upload. */
	reqs = requests_since(seq);
	assert_true(count_route(reqs, "execute", -1) >= 1);
	json_decref(reqs);
	json_decref(admin("DELETE", "/__fake/faults", NULL));
	env_free(&e);
	free(id);
	profile_free(t);
}

static void test_throttled_and_5xx_survived(void **state)
{
	struct tprof *t = profile("{}");
	struct sg_errinfo err = { 0 };
	struct tenv e = { 0 };
	struct sg_exec_result r;
	char *id = unique("thr");
	long long seq;
	json_t *reqs;
	int64_t t0;

	(void)state;
	SKIP_WITHOUT_FAKE();
	fault("{\"path\":\"^/api/sandbox/\",\"method\":\"GET\",\"status\":429,\"retryAfter\":1}");
	fault("{\"path\":\"^/api/sandbox$\",\"method\":\"POST\",\"status\":429,\"retryAfter\":1}");
	seq = last_seq();
	t0 = sg_now_ms();
	assert_int_equal(env_up(t, id, false, &e, &err), SG_OK);
	/* Retry-After-<throttler> was honoured: about a second, twice. */
	assert_true(sg_now_ms() - t0 >= 1800);
	reqs = requests_since(seq);
	assert_int_equal(count_path(reqs, "POST", "/api/sandbox", 429), 1);
	assert_int_equal(count_path(reqs, "POST", "/api/sandbox", 200), 1);
	assert_int_equal(count_path(reqs, "POST", "/api/sandbox", -1), 2);
	json_decref(reqs);
	fault("{\"path\":\"/process/execute$\",\"status\":503,\"count\":2}");
	fault("{\"path\":\"/process/execute$\",\"status\":502}");
	sg_exec_result_init(&r, 4096);
	sh(&e, "echo survived", &r);
	assert_string_equal(r.out.p, "survived\n");
	assert_int_equal(r.exit_code, 0);
	sg_exec_result_release(&r);
	env_free(&e);
	free(id);
	profile_free(t);
}

/* One environment shared by the exec tests (made on first use). */
static struct tprof *shared_prof;
static struct tenv shared;

static struct tenv *shared_env(void)
{
	struct sg_errinfo err = { 0 };
	char *id;

	if (shared.env) {
		json_t *sb = sandbox(shared.env->id);

		json_decref(sb);
		if (sb)
			return &shared; /* still there */
	}
	env_free(&shared);
	if (!shared_prof)
		shared_prof = profile("{\"image\":\"debian:12\"}");
	id = unique("shared");
	assert_int_equal(env_up(shared_prof, id, false, &shared, &err), SG_OK);
	free(id);
	return &shared;
}

static void test_dropped_connections(void **state)
{
	struct tenv *e;
	struct sg_exec_result r;
	const char *argv[] = { "/bin/sh", "-c", "echo once >>/workspace/dropped; cat /workspace/dropped", NULL };
	struct sg_exec x = { .argv = argv, .envp = base_envp, .max_output = 4096 };

	(void)state;
	SKIP_WITHOUT_FAKE();
	e = shared_env();
	/* Lost before the toolbox saw it, then a reply lost after it ran. */
	fault("{\"path\":\"/process/execute$\",\"action\":\"drop\"}");
	fault("{\"path\":\"/process/execute$\",\"action\":\"drop\",\"after\":true}");
	sg_exec_result_init(&r, 4096);
	run(e, &x, &r);
	/* The command ran exactly once. */
	assert_string_equal(r.out.p, "once\n");
	sg_exec_result_release(&r);
}

static void test_exec_exact(void **state)
{
	struct tenv *e;
	struct sg_exec_result r;
	long long seq;
	json_t *reqs;

	(void)state;
	SKIP_WITHOUT_FAKE();
	e = shared_env();
	sg_exec_result_init(&r, 1 << 20);
	seq = last_seq();
	/* Exit codes, one request each. */
	sh(e, "exit 3", &r);
	assert_int_equal(r.exit_code, 3);
	assert_int_equal(r.signal, 0);
	sh(e, "exit 255", &r);
	assert_int_equal(r.exit_code, 255);
	/* A signal is a signal, not 128+n. */
	sh(e, "kill -TERM $$", &r);
	assert_int_equal(r.signal, 15);
	assert_int_equal(r.exit_code, -1);
	{
		/* argv exactly: spaces, quotes, newlines, an empty word, '$'. */
		const char *argv[] = { "printf", "[%s]", "a b", "it's", "", "$HOME", "x\ny", NULL };
		struct sg_exec x = { .argv = argv, .envp = base_envp, .max_output = 4096 };

		run(e, &x, &r);
		assert_string_equal(r.out.p, "[a b][it's][][$HOME][x\ny]");
	}
	reqs = requests_since(seq);
	assert_int_equal(json_array_size(reqs), 4);
	assert_int_equal(count_route(reqs, "execute", 200), 4);
	json_decref(reqs);
	{
		/* The environment is exactly envp. */
		const char *argv[] = { "env", NULL };
		const char *envp[] = { "PATH=/usr/bin:/bin", "A=1 2", "B=x=y", NULL };
		struct sg_exec x = { .argv = argv, .envp = envp, .max_output = 4096 };

		run(e, &x, &r);
		assert_string_equal(r.out.p, "PATH=/usr/bin:/bin\nA=1 2\nB=x=y\n");
	}
	{
		/* cwd exactly; a missing one is 127 with a sentence. */
		const char *argv[] = { "pwd", NULL };
		struct sg_exec x = { .argv = argv, .envp = base_envp, .cwd = "/tmp", .max_output = 4096 };

		run(e, &x, &r);
		assert_string_equal(r.out.p, "/tmp\n");
		x.cwd = "/no/such/dir";
		run(e, &x, &r);
		assert_int_equal(r.exit_code, 127);
		assert_non_null(strstr(r.err.p, "/no/such/dir"));
		x.cwd = NULL;
		run(e, &x, &r);
		assert_string_equal(r.out.p, "/workspace\n");
	}
	{
		const char *argv[] = { "no-such-program-sg", NULL };
		struct sg_exec x = { .argv = argv, .envp = base_envp, .max_output = 4096 };

		run(e, &x, &r);
		assert_int_equal(r.exit_code, 127);
	}
	{
		/* stderr apart, or merged in order with MERGE. */
		const char *argv[] = { "/bin/sh", "-c", "echo out; echo err >&2; echo out2", NULL };
		struct sg_exec x = { .argv = argv, .envp = base_envp, .max_output = 4096 };

		run(e, &x, &r);
		assert_string_equal(r.out.p, "out\nout2\n");
		assert_string_equal(r.err.p, "err\n");
		x.flags = SG_EXEC_MERGE;
		run(e, &x, &r);
		assert_string_equal(r.out.p, "out\nerr\nout2\n");
	}
	{
		/* Bounded capture: the head, and truncated. */
		const char *argv[] = { "/bin/sh", "-c", "head -c 100000 /dev/zero | tr '\\0' a", NULL };
		struct sg_exec x = { .argv = argv, .envp = base_envp, .max_output = 1000 };
		struct sg_exec_result small;

		sg_exec_result_init(&small, 1000);
		run(e, &x, &small);
		assert_int_equal(small.out.len, 1000);
		assert_true(small.truncated);
		sg_exec_result_release(&small);
	}
	sg_exec_result_release(&r);
}

static void test_exec_stdin(void **state)
{
	struct tenv *e;
	struct sg_exec_result r;
	const char *argv[] = { "sha256sum", NULL };
	const char *wc[] = { "wc", "-c", NULL };
	struct sg_exec x = { .argv = argv, .envp = base_envp, .max_output = 4096 };
	static char big[300000];
	long long seq;
	json_t *reqs;

	(void)state;
	SKIP_WITHOUT_FAKE();
	e = shared_env();
	sg_exec_result_init(&r, 4096);
	/* Small text travels in the same request. */
	x.argv = (const char *const *)(const char *[]){ "cat", NULL };
	x.stdin_data = "hello\nworld";
	x.stdin_len = 11;
	seq = last_seq();
	run(e, &x, &r);
	assert_string_equal(r.out.p, "hello\nworld");
	reqs = requests_since(seq);
	assert_int_equal(json_array_size(reqs), 1);
	json_decref(reqs);
	/*
	 * Text up to 1 MiB travels in variables of at most 96 KiB, cut
	 * between characters: one request, the bytes exact.
	 */
	{
		static char text[400000];
		const char *sum[] = { "/bin/sh", "-c", "wc -c; printf x | od -An -c >/dev/null", NULL };
		const char *three = "\xe2\x82\xac"; /* a three-byte character at many offsets */

		size_t i = 0;

		while (i + 8 <= sizeof(text)) {
			memcpy(text + i, three, 3);
			i += 3;
			for (size_t k = 0, gap = i % 5; k < gap; k++)
				text[i++] = (char)('a' + k);
		}
		while (i < sizeof(text))
			text[i++] = 'q';
		x.argv = sum;
		x.stdin_data = text;
		x.stdin_len = sizeof(text);
		seq = last_seq();
		run(e, &x, &r);
		assert_int_equal(strtol(r.out.p, NULL, 10), (long)sizeof(text));
		reqs = requests_since(seq);
		assert_int_equal(json_array_size(reqs), 1);
		assert_int_equal(count_route(reqs, "execute", 200), 1);
		json_decref(reqs);
		x.argv = (const char *const *)(const char *[]){ "cat", NULL };
		run(e, &x, &r);
		assert_int_equal(r.out.len, 4096); /* the head only */
		assert_memory_equal(r.out.p, text, 4096);
		/* A toolbox that refuses such a body gets the upload instead. */
		fault("{\"path\":\"/process/execute$\",\"status\":413,\"count\":1}");
		x.argv = sum;
		seq = last_seq();
		run(e, &x, &r);
		assert_int_equal(strtol(r.out.p, NULL, 10), (long)sizeof(text));
		reqs = requests_since(seq);
		/* (the fake logs a faulted request without its route) */
		assert_int_equal(json_array_size(reqs), 3);
		assert_int_equal(json_integer_value(json_object_get(json_array_get(reqs, 0), "status")),
				 413);
		assert_int_equal(count_route(reqs, "bulkUpload", 200), 1);
		assert_int_equal(count_route(reqs, "execute", 200), 1);
		json_decref(reqs);
	}
	/* Binary and large stdin go up first (one more request), exactly. */
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 7 + (i >> 8));
	x.argv = wc;
	x.stdin_data = big;
	x.stdin_len = sizeof(big);
	seq = last_seq();
	run(e, &x, &r);
	assert_int_equal(strtol(r.out.p, NULL, 10), (long)sizeof(big));
	reqs = requests_since(seq);
	assert_int_equal(count_route(reqs, "bulkUpload", 200), 1);
	assert_int_equal(count_route(reqs, "execute", 200), 1);
	json_decref(reqs);
	x.argv = argv;
	x.stdin_data = "\xff\x00\x01" "binary";
	x.stdin_len = 9;
	{
		const char *argv2[] = { "/bin/sh", "-c", "od -An -tx1 | tr -d ' \\n'", NULL };

		x.argv = argv2;
		run(e, &x, &r);
		assert_string_equal(r.out.p, "ff000162696e617279");
	}
	/* No stdin: empty, never the script's own input. */
	x.argv = wc;
	x.stdin_data = NULL;
	x.stdin_len = 0;
	run(e, &x, &r);
	assert_int_equal(strtol(r.out.p, NULL, 10), 0);
	sg_exec_result_release(&r);
}

static void test_long_command_outlives_408(void **state)
{
	struct tenv *e;
	struct sg_exec_result r;
	long long seq;
	json_t *reqs;
	struct tprof *t;
	struct tenv e2 = { 0 };
	struct sg_errinfo err = { 0 };
	char *id;

	(void)state;
	SKIP_WITHOUT_FAKE();
	e = shared_env();
	sg_exec_result_init(&r, 4096);
	/* Longer than the toolbox's 3 s: the exec attaches again, no 408. */
	seq = last_seq();
	sh(e, "echo start; sleep 5; echo done; exit 7", &r);
	assert_string_equal(r.out.p, "start\ndone\n");
	assert_int_equal(r.exit_code, 7);
	reqs = requests_since(seq);
	assert_true(count_route(reqs, "execute", 200) >= 2);
	assert_int_equal(count_route(reqs, "execute", 408), 0);
	json_decref(reqs);
	/*
	 * Told the toolbox allows 20 s when it allows 3: every first wait
	 * ends in 408, which kills the script but not the command.
	 */
	t = profile("{\"toolbox_timeout_ms\":20000}");
	id = unique("late");
	assert_int_equal(env_up(t, id, false, &e2, &err), SG_OK);
	seq = last_seq();
	sh(&e2, "sleep 4; echo survived", &r);
	assert_string_equal(r.out.p, "survived\n");
	reqs = requests_since(seq);
	assert_true(count_route(reqs, "execute", 408) >= 1);
	json_decref(reqs);
	env_free(&e2);
	free(id);
	profile_free(t);
	sg_exec_result_release(&r);
}

/* How many processes in the sandbox have `needle` in their command line. */
static int count_procs(struct tenv *e, const char *needle)
{
	struct sg_exec_result r;
	char script[512];
	int n;

	snprintf(script, sizeof(script),
		 "for p in /proc/[0-9]*; do tr '\\0' ' ' <$p/cmdline 2>/dev/null; echo; done | grep -c -e '%s' || true",
		 needle);
	sg_exec_result_init(&r, 4096);
	sh(e, script, &r);
	/* needle is a pattern that does not match its own text. */
	n = (int)strtol(r.out.p, NULL, 10);
	sg_exec_result_release(&r);
	return n;
}

static void test_timeout_kills(void **state)
{
	struct tenv *e;
	struct sg_exec_result r;
	const char *argv[] = { "/bin/sh", "-c", "echo before; sleep 41.5; echo after", NULL };
	struct sg_exec x = { .argv = argv, .envp = base_envp, .max_output = 4096,
			     .timeout_ms = 1500 };
	int base;

	(void)state;
	SKIP_WITHOUT_FAKE();
	e = shared_env();
	base = count_procs(e, "sleep 4[1][.]5");
	sg_exec_result_init(&r, 4096);
	run(e, &x, &r);
	assert_true(r.timed_out);
	assert_int_equal(r.signal, 9);
	assert_string_equal(r.out.p, "before\n");
	assert_true(r.duration_ms < 6000);
	assert_int_equal(count_procs(e, "sleep 4[1][.]5"), base);
	assert_int_equal(base, 0);
	sg_exec_result_release(&r);
}

struct cancel_run {
	struct tenv *e;
	struct sg_cancel c;
	sg_err rc;
	int64_t ms;
};

static void *cancel_thread(void *arg)
{
	struct cancel_run *cr = arg;
	const char *argv[] = { "/bin/sh", "-c", "sleep 42.5", NULL };
	struct sg_exec x = { .argv = argv, .envp = base_envp, .max_output = 4096 };
	struct sg_exec_result r;
	struct sg_errinfo err = { 0 };
	int64_t t0 = sg_now_ms();

	sg_exec_result_init(&r, 4096);
	cr->rc = A->exec(cr->e->env, &x, &r, &cr->c, &err);
	cr->ms = sg_now_ms() - t0;
	sg_exec_result_release(&r);
	return NULL;
}

static void test_cancel_kills(void **state)
{
	struct cancel_run cr = { 0 };
	pthread_t th;
	int base;

	(void)state;
	SKIP_WITHOUT_FAKE();
	cr.e = shared_env();
	base = count_procs(cr.e, "sleep 4[2][.]5");
	assert_int_equal(sg_cancel_init(&cr.c), SG_OK);
	assert_int_equal(pthread_create(&th, NULL, cancel_thread, &cr), 0);
	usleep(800000);
	assert_true(count_procs(cr.e, "sleep 4[2][.]5") > base);
	sg_cancel_fire(&cr.c, SG_E_CANCELLED);
	pthread_join(th, NULL);
	assert_int_equal(cr.rc, SG_E_CANCELLED);
	assert_true(cr.ms < 5000);
	/* Killed before exec returned. */
	assert_int_equal(count_procs(cr.e, "sleep 4[2][.]5"), base);
	sg_cancel_release(&cr.c);
}

static void test_detaches(void **state)
{
	struct tenv *e;
	struct sg_exec_result r;
	const char *argv[] = { "/bin/sh", "-c",
			       "setsid sh -c 'sleep 43.5' </dev/null >/dev/null 2>&1 & echo left", NULL };
	struct sg_exec x = { .argv = argv, .envp = base_envp, .max_output = 4096,
			     .flags = SG_EXEC_DETACHES };

	(void)state;
	SKIP_WITHOUT_FAKE();
	e = shared_env();
	sg_exec_result_init(&r, 4096);
	run(e, &x, &r);
	assert_string_equal(r.out.p, "left\n");
	assert_true(r.duration_ms < 2500);
	assert_true(count_procs(e, "sleep 4[3][.]5") >= 1);
	/* Without DETACHES the group's leftovers die with the command. */
	{
		const char *argv2[] = { "/bin/sh", "-c", "sleep 44.5 & echo x", NULL };

		x.argv = argv2;
		x.flags = 0;
		run(e, &x, &r);
		assert_int_equal(count_procs(e, "sleep 4[4][.]5"), 0);
	}
	sg_exec_result_release(&r);
}

static void test_requests_per_exec(void **state)
{
	struct tenv *e;
	struct sg_exec_result r;
	long long seq;
	json_t *reqs;

	(void)state;
	SKIP_WITHOUT_FAKE();
	e = shared_env();
	sg_exec_result_init(&r, 4096);
	sh(e, "true", &r); /* a warm-up that clears the previous run dirs */
	seq = last_seq();
	for (int i = 0; i < 5; i++) {
		const char *argv[] = { e->env->helper, "fs", "stat", "--root", "/workspace", ".", NULL };
		struct sg_exec x = { .argv = argv, .envp = base_envp, .max_output = 65536 };

		run(e, &x, &r);
		assert_int_equal(r.exit_code, 0);
		assert_non_null(strstr(r.out.p, "\"ok\":true"));
	}
	reqs = requests_since(seq);
	assert_int_equal(json_array_size(reqs), 5);
	assert_int_equal(count_route(reqs, "execute", 200), 5);
	json_decref(reqs);
	sg_exec_result_release(&r);
}

static void test_files(void **state)
{
	struct tenv *e;
	struct sg_errinfo err = { 0 };
	char tmpl[] = "/tmp/test_daytona-file-XXXXXX", buf[64];
	int fd;
	ssize_t n;
	struct sg_exec_result r;

	(void)state;
	SKIP_WITHOUT_FAKE();
	e = shared_env();
	sg_exec_result_init(&r, 4096);
	sh(e, "printf 'contents\\n' >/workspace/f.txt; cat /workspace/f.txt", &r);
	assert_string_equal(r.out.p, "contents\n");
	sg_exec_result_release(&r);
	fd = mkstemp(tmpl);
	assert_true(fd >= 0);
	assert_int_equal(A->get_file(e->env, "/workspace/f.txt", fd, 100, NULL, &err), SG_OK);
	n = pread(fd, buf, sizeof(buf), 0);
	assert_int_equal(n, 9);
	assert_memory_equal(buf, "contents\n", 9);
	assert_int_equal(ftruncate(fd, 0), 0);
	assert_int_equal(A->get_file(e->env, "/workspace/f.txt", fd, 4, NULL, &err), SG_E_TOO_LARGE);
	memset(&err, 0, sizeof(err));
	assert_int_equal(A->get_file(e->env, "/workspace/nope", fd, 4, NULL, &err), SG_E_NOT_FOUND);
	check_no_secret(&err);
	close(fd);
	unlink(tmpl);
}

static void test_keep_resume_lost_remove(void **state)
{
	struct tprof *t = profile("{\"persistent\":true,\"lifetime_seconds\":3600}");
	struct sg_errinfo err = { 0 };
	struct tenv e = { 0 }, e2 = { 0 }, e3 = { 0 };
	struct sg_exec_result r;
	char *id = unique("keep"), path[256];
	json_t *sb;

	(void)state;
	SKIP_WITHOUT_FAKE();
	assert_int_equal(env_up(t, id, false, &e, &err), SG_OK);
	sb = sandbox(e.env->id);
	assert_int_equal(json_integer_value(json_object_get(sb, "autoArchiveInterval")), 60);
	assert_int_equal(json_integer_value(json_object_get(sb, "autoDeleteInterval")), -1);
	json_decref(sb);
	sg_exec_result_init(&r, 4096);
	sh(&e, "echo kept >/workspace/note", &r);
	assert_int_equal(A->teardown(e.env, SG_FATE_KEEP, NULL, &err), SG_OK);
	for (int i = 0; i < 100; i++) {
		sb = sandbox(e.env->id);
		if (strcmp(json_string_value(json_object_get(sb, "state")), "stopped") == 0)
			break;
		json_decref(sb);
		sb = NULL;
		usleep(20000);
	}
	assert_non_null(sb);
	json_decref(sb);
	/* Resumed: started again, the file is there. */
	assert_int_equal(env_up(t, id, true, &e2, &err), SG_OK);
	assert_true(e2.env->resumed);
	assert_string_equal(e.env->id, e2.env->id);
	sh(&e2, "cat /workspace/note", &r);
	assert_string_equal(r.out.p, "kept\n");
	/*
	 * Stopped meanwhile (Daytona's auto-stop): keeping it is a stop that
	 * Daytona refuses with 400, which is fine when the sandbox is down.
	 */
	snprintf(path, sizeof(path), "/__fake/sandboxes/%s/state", e2.env->id);
	json_decref(admin("POST", path, json_pack("{s:s}", "state", "stopped")));
	assert_int_equal(A->teardown(e2.env, SG_FATE_KEEP, NULL, &err), SG_OK);
	sb = sandbox(e2.env->id);
	assert_string_equal(json_string_value(json_object_get(sb, "state")), "stopped");
	json_decref(sb);
	/* The sandbox vanishes (deleted from the dashboard): workspace_lost. */
	snprintf(path, sizeof(path), "/__fake/sandboxes/%s", e2.env->id);
	json_decref(admin("DELETE", path, NULL));
	assert_int_equal(env_up(t, id, true, &e3, &err), SG_E_WORKSPACE_LOST);
	env_free(&e3);
	/* Without require_existing a new one is made, and REMOVE deletes it. */
	assert_int_equal(env_up(t, id, false, &e3, &err), SG_OK);
	assert_false(e3.env->resumed);
	/* Broken (state error): the stop is refused, and nothing will move it. */
	snprintf(path, sizeof(path), "/__fake/sandboxes/%s/state", e3.env->id);
	json_decref(admin("POST", path, json_pack("{s:s}", "state", "error")));
	assert_int_equal(A->teardown(e3.env, SG_FATE_KEEP, NULL, &err), SG_E_PROVIDER);
	assert_string_equal(err.msg, "stopping the sandbox failed: it is error");
	sg_err_clear(&err);
	assert_int_equal(A->teardown(e3.env, SG_FATE_REMOVE, NULL, &err), SG_OK);
	assert_true(wait_destroyed(e3.env->id));
	sg_exec_result_release(&r);
	env_free(&e3);
	env_free(&e2);
	env_free(&e);
	free(id);
	profile_free(t);
}

struct listed {
	int n;
	bool found;
	char want[128];
};

static int on_env(const struct sg_env_info *info, void *payload)
{
	struct listed *l = payload;

	l->n++;
	if (strcmp(info->id, l->want) == 0 && strcmp(info->profile, "dt") == 0 &&
	    info->created > 0 && info->expires > info->created && info->identity[0])
		l->found = true;
	return 0;
}

static void test_list_destroy(void **state)
{
	struct tprof *t = profile("{}");
	struct sg_errinfo err = { 0 };
	struct tenv e = { 0 };
	struct listed l = { 0 };
	char *id = unique("list");

	(void)state;
	SKIP_WITHOUT_FAKE();
	assert_int_equal(env_up(t, id, false, &e, &err), SG_OK);
	snprintf(l.want, sizeof(l.want), "%s", e.env->id);
	assert_int_equal(A->list(&t->p, "/tmp", on_env, &l, NULL, &err), SG_OK);
	assert_int_equal(l.n, 1);
	assert_true(l.found);
	assert_int_equal(A->destroy(&t->p, "/tmp", e.env->id, NULL, &err), SG_OK);
	assert_true(wait_destroyed(e.env->id));
	assert_int_equal(A->destroy(&t->p, "/tmp", "no-such-sandbox", NULL, &err), SG_E_NOT_FOUND);
	env_free(&e);
	free(id);
	profile_free(t);
}

/* Bytes of the captured stderr so far, to look at what a step wrote. */
static long stderr_mark(void)
{
	struct stat st;

	fflush(stderr);
	return stat(F.stderr_file, &st) == 0 ? (long)st.st_size : 0;
}

/* Whether what was written to stderr since mark holds needle. */
static bool stderr_since_has(long mark, const char *needle)
{
	FILE *f;
	char line[4096];
	bool hit = false;

	fflush(stderr);
	f = fopen(F.stderr_file, "r");
	if (!f)
		return false;
	fseek(f, mark, SEEK_SET);
	while (fgets(line, sizeof(line), f))
		hit = hit || strstr(line, needle) != NULL;
	fclose(f);
	return hit;
}

static void test_delete_reply_lost(void **state)
{
	struct tprof *t = profile("{}");
	struct sg_errinfo err = { 0 };
	struct tenv e = { 0 };
	char *id = unique("dellost");

	(void)state;
	SKIP_WITHOUT_FAKE();
	assert_int_equal(env_up(t, id, false, &e, &err), SG_OK);
	/* Every answer to a delete is lost, though the first one worked. */
	fault("{\"path\":\"^/api/sandbox/\",\"method\":\"DELETE\",\"action\":\"drop\","
	      "\"after\":true,\"count\":20}");
	memset(&err, 0, sizeof(err));
	assert_int_equal(A->teardown(e.env, SG_FATE_REMOVE, NULL, &err), SG_OK);
	assert_true(wait_destroyed(e.env->id));
	json_decref(admin("DELETE", "/__fake/faults", NULL));
	env_free(&e);
	free(id);
	profile_free(t);
}

static void test_failed_provision_delete_reply_lost(void **state)
{
	struct tprof *t = profile("{\"image\":\"debian:12\"}");
	struct sg_errinfo err = { 0 };
	struct tenv e = { 0 };
	char *id = unique("halflost");
	char sid[128];
	long mark = stderr_mark();

	(void)state;
	SKIP_WITHOUT_FAKE();
	fault("{\"path\":\"/process/execute$\",\"status\":500,\"count\":100}");
	fault("{\"path\":\"^/api/sandbox/\",\"method\":\"DELETE\",\"action\":\"drop\","
	      "\"after\":true,\"count\":20}");
	assert_int_not_equal(env_up(t, id, false, &e, &err), SG_OK);
	snprintf(sid, sizeof(sid), "%s", e.env->id);
	assert_true(wait_destroyed(sid));
	/* It is gone: nothing may say otherwise, nor leave work for gc. */
	assert_false(stderr_since_has(mark, "could not be removed"));
	assert_false(e.env->may_remain);
	json_decref(admin("DELETE", "/__fake/faults", NULL));
	env_free(&e);
	free(id);
	profile_free(t);
}

static void test_http_500_one_mapping(void **state)
{
	struct tprof *t = profile("{}");
	struct sg_errinfo cerr = { 0 }, uerr = { 0 };
	struct tenv e = { 0 }, *sh_env;
	char *id = unique("five");
	sg_err crc, urc;

	(void)state;
	SKIP_WITHOUT_FAKE();
	sh_env = shared_env();
	fault("{\"path\":\"^/api/sandbox$\",\"method\":\"POST\",\"status\":500,\"count\":10}");
	crc = env_up(t, id, false, &e, &cerr);
	json_decref(admin("DELETE", "/__fake/faults", NULL));
	fault("{\"path\":\"/files/download$\",\"status\":500,\"count\":10}");
	{
		int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

		assert_true(fd >= 0);
		urc = A->get_file(sh_env->env, "/workspace/five.txt", fd, 100, NULL, &uerr);
		close(fd);
	}
	json_decref(admin("DELETE", "/__fake/faults", NULL));
	print_message("create: %s: %s\ndownload: %s: %s\n", sg_err_word(crc), cerr.msg,
		      sg_err_word(urc), uerr.msg);
	/* One status, one code, and the status in both sentences. */
	assert_int_equal(crc, urc);
	assert_int_equal(crc, SG_E_PROVIDER);
	assert_non_null(strstr(cerr.msg, "HTTP 500"));
	assert_non_null(strstr(uerr.msg, "HTTP 500"));
	/* A 500 may still have made it: the gateway must look for it. */
	assert_true(e.env->may_remain);
	env_free(&e);
	free(id);
	profile_free(t);
}

static void test_exec_reply_lost_may_have_run(void **state)
{
	struct tenv *e;
	struct sg_exec_result r;
	struct sg_errinfo err = { 0 };
	const char *argv[] = { "/bin/sh", "-c", "echo ran >>/workspace/lost-run", NULL };
	struct sg_exec x = { .argv = argv, .envp = base_envp, .max_output = 4096 };
	sg_err rc;

	(void)state;
	SKIP_WITHOUT_FAKE();
	e = shared_env();
	/* The command runs; no reply ever comes back. */
	fault("{\"path\":\"/process/execute$\",\"action\":\"drop\",\"after\":true,\"count\":50}");
	sg_exec_result_init(&r, 4096);
	rc = A->exec(e->env, &x, &r, NULL, &err);
	json_decref(admin("DELETE", "/__fake/faults", NULL));
	print_message("exec: %s: %s\n", sg_err_word(rc), err.msg);
	assert_int_equal(rc, SG_E_UNAVAILABLE);
	assert_non_null(strstr(err.msg, "may have run"));
	sg_exec_result_release(&r);
	sg_exec_result_init(&r, 4096);
	sh(e, "cat /workspace/lost-run", &r);
	assert_string_equal(r.out.p, "ran\n"); /* it did run */
	sg_exec_result_release(&r);
}

static void test_keepalive(void **state)
{
	struct tprof *t = profile("{\"keepalive_ms\":500}");
	struct sg_errinfo err = { 0 };
	struct tenv e = { 0 };
	struct sg_exec_result r;
	char *id = unique("ka"), ctl[600];
	long long seq;
	json_t *reqs;

	(void)state;
	SKIP_WITHOUT_FAKE();
	assert_int_equal(env_up(t, id, false, &e, &err), SG_OK);
	snprintf(ctl, sizeof(ctl), "%s/proc", e.env->ctl_dir);
	{
		const char *argv[] = { e.env->helper, "proc", "spawn", "--ctl", ctl, "--id", "p1",
				       "--session", e.session, "--", "sleep", "2", NULL };
		struct sg_exec x = { .argv = argv, .envp = base_envp, .max_output = 65536,
				     .flags = SG_EXEC_DETACHES };

		sg_exec_result_init(&r, 65536);
		seq = last_seq();
		run(&e, &x, &r);
		assert_non_null(strstr(r.out.p, "\"ok\":true"));
	}
	/* While it runs, the activity clock is kept; afterwards, not. */
	usleep(3000000);
	reqs = requests_since(seq);
	assert_true(count_route(reqs, "lastActivity", 201) >= 1);
	json_decref(reqs);
	seq = last_seq();
	usleep(1500000);
	reqs = requests_since(seq);
	assert_int_equal(count_route(reqs, "lastActivity", -1), 0);
	json_decref(reqs);
	sg_exec_result_release(&r);
	assert_int_equal(A->teardown(e.env, SG_FATE_REMOVE, NULL, &err), SG_OK);
	env_free(&e);
	free(id);
	profile_free(t);
}

static void test_secrets_scrubbed(void **state)
{
	struct tprof *t = profile("{}");
	struct sg_errinfo err = { 0 };
	struct tenv e = { 0 };
	char *id = unique("leak"), body[300];
	FILE *f;
	char line[4096];

	(void)state;
	SKIP_WITHOUT_FAKE();
	/* A provider that echoes the key in its error message. */
	snprintf(body, sizeof(body),
		 "{\"path\":\"^/api/sandbox$\",\"method\":\"POST\",\"status\":400,"
		 "\"body\":{\"statusCode\":400,\"message\":\"bad token Bearer %s here\"}}",
		 F.key);
	fault(body);
	assert_int_equal(env_up(t, id, false, &e, &err), SG_E_PROVIDER);
	assert_non_null(strstr(err.msg, "[redacted]"));
	env_free(&e);
	/* Nothing this run wrote on stderr holds the key. */
	fflush(stderr);
	f = fopen(F.stderr_file, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		assert_null(strstr(line, F.key));
	fclose(f);
	assert_string_equal(F.secrets_seen, "");
	free(id);
	profile_free(t);
}

static int cleanup_shared(void **state)
{
	(void)state;
	env_free(&shared);
	if (shared_prof)
		profile_free(shared_prof);
	shared_prof = NULL;
	return fake_stop(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_validate, each),
		cmocka_unit_test_setup(test_create_labels_resources, each),
		cmocka_unit_test_setup(test_snapshot_too_small_refused, each),
		cmocka_unit_test_setup(test_allow_list, each),
		cmocka_unit_test_setup(test_create_retried_adopts, each),
		cmocka_unit_test_setup(test_create_fails_halfway, each),
		cmocka_unit_test_setup(test_upload_fails_beside_setup, each),
		cmocka_unit_test_setup(test_unrecorded_creates_first, each),
		cmocka_unit_test_setup(test_throttled_and_5xx_survived, each),
		cmocka_unit_test_setup(test_keep_resume_lost_remove, each),
		cmocka_unit_test_setup(test_list_destroy, each),
		cmocka_unit_test_setup(test_keepalive, each),
		cmocka_unit_test_setup(test_secrets_scrubbed, each),
		cmocka_unit_test_setup(test_delete_reply_lost, each),
		cmocka_unit_test_setup(test_failed_provision_delete_reply_lost, each),
		cmocka_unit_test_setup(test_http_500_one_mapping, each),
		cmocka_unit_test_setup(test_exec_reply_lost_may_have_run, each),
		/* These share one sandbox: no reset between them. */
		cmocka_unit_test(test_exec_exact),
		cmocka_unit_test(test_exec_stdin),
		cmocka_unit_test(test_dropped_connections),
		cmocka_unit_test(test_requests_per_exec),
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_timeout_kills),
		cmocka_unit_test(test_cancel_kills),
		cmocka_unit_test(test_detaches),
		cmocka_unit_test(test_long_command_outlives_408),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, fake_start, cleanup_shared);
}
