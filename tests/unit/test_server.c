/*
 * test_server.c - the gateway's server, in-process, with the fake adapter.
 *
 * sg_server_run() serves one end of a socketpair on a thread; the test
 * speaks the protocol on the other end.  The fake adapter (tests/fake/)
 * makes environments of directories on this host and injects faults: an
 * exec that fails at call N, a slow or failing provision, a lost
 * environment, a teardown that runs over the shutdown budget.  Its
 * counters show the cleanup the gateway did: every provisioned environment
 * torn down and released, whatever failed.
 */
#define _GNU_SOURCE /* asprintf */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cancel.h"
#include "base/limits.h"
#include "config/config.h"
#include "gateway/budget.h"
#include "gateway/server.h"
#include "tests/fake/fake.h"

struct srv {
	char dir[64];      /* everything of this test */
	char root[128];    /* binding.root: the fake's workspace */
	char state[128];
	struct sg_config *cfg;
	struct sg_server_opts o;
	int fd;            /* the host's end */
	pthread_t thread;
	int status;
	char buf[SG_MAX_FRAME + 1]; /* one whole frame and its newline */
	size_t len;
	json_t *events;    /* every process event read so far, in order */
};

static void *serve(void *arg)
{
	struct srv *v = arg;

	v->status = sg_server_run(&v->o);
	return NULL;
}

/* Start a server on a fresh state dir, with profile `profile` (JSON). */
static struct srv *start(const char *profile, int64_t budget_ms)
{
	struct srv *v = calloc(1, sizeof(*v));
	struct sg_errinfo err = { 0 };
	char *cfg = NULL, *json = NULL;
	int sv[2];
	FILE *f;

	assert_non_null(v);
	v->events = json_array();
	sg_fake_reset();
	snprintf(v->dir, sizeof(v->dir), "/tmp/sg-test-server-XXXXXX");
	assert_non_null(mkdtemp(v->dir));
	snprintf(v->root, sizeof(v->root), "%s/ws", v->dir);
	snprintf(v->state, sizeof(v->state), "%s/state", v->dir);
	assert_int_equal(mkdir(v->state, 0700), 0);
	assert_true(asprintf(&cfg, "%s/config.json", v->dir) > 0);
	assert_true(asprintf(&json, "{\"profiles\": {\"f\": %s}}", profile) > 0);
	f = fopen(cfg, "w");
	assert_non_null(f);
	fputs(json, f);
	fclose(f);
	if (sg_config_load(cfg, &v->cfg, &err))
		fail_msg("%s", err.msg);
	free(cfg);
	free(json);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	v->fd = sv[0];
	v->o.cfg = v->cfg;
	v->o.state_dir = v->state;
	v->o.helper_path = getenv("SG_HELPER");
	assert_non_null(v->o.helper_path);
	v->o.budget_ms = budget_ms;
	v->o.in_fd = v->o.out_fd = sv[1];
	assert_int_equal(pthread_create(&v->thread, NULL, serve, v), 0);
	return v;
}

static void sendf(struct srv *v, const char *fmt, ...) SG_PRINTF(2, 3);
static void sendf(struct srv *v, const char *fmt, ...)
{
	char *line = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&line, fmt, ap);
	va_end(ap);
	assert_true(n > 0);
	assert_int_equal(write(v->fd, line, (size_t)n), n);
	assert_int_equal(write(v->fd, "\n", 1), 1);
	free(line);
}

/*
 * The next message with "id" == id, or with id NULL, the next one of any
 * kind; NULL when none came by the time end (sg_now_ms).  Events are kept
 * on v->events as they pass.
 */
static json_t *next_message(struct srv *v, const char *id, int64_t end)
{
	for (;;) {
		char *nl = memchr(v->buf, '\n', v->len);
		struct pollfd p = { .fd = v->fd, .events = POLLIN };
		ssize_t n;

		while (nl) {
			size_t k = (size_t)(nl - v->buf) + 1;
			json_t *m = json_loadb(v->buf, k - 1, 0, NULL);
			const char *meth;
			json_t *mid;

			memmove(v->buf, v->buf + k, v->len - k);
			v->len -= k;
			assert_non_null(m);
			meth = json_string_value(json_object_get(m, "method"));
			if (meth && strcmp(meth, "process") == 0)
				json_array_append(v->events, m);
			mid = json_object_get(m, "id");
			if (!id || (json_is_string(mid) && strcmp(json_string_value(mid), id) == 0))
				return m;
			json_decref(m);
			nl = memchr(v->buf, '\n', v->len);
		}
		if (sg_now_ms() >= end)
			return NULL;
		if (poll(&p, 1, (int)(end - sg_now_ms())) <= 0)
			continue;
		n = read(v->fd, v->buf + v->len, sizeof(v->buf) - v->len);
		if (n <= 0)
			fail_msg("the server closed the connection waiting for %s", id ? id : "a message");
		v->len += (size_t)n;
	}
}

/* The next message with "id" == id (events and other replies skipped). */
static json_t *reply(struct srv *v, const char *id, int timeout_ms)
{
	json_t *m = next_message(v, id, sg_now_ms() + timeout_ms);

	if (!m)
		fail_msg("no reply to %s", id);
	return m;
}

/* The error string of the reply to id, or NULL when it succeeded. */
static char *call_error(struct srv *v, const char *id, int timeout_ms)
{
	json_t *r = reply(v, id, timeout_ms);
	const char *e = json_string_value(json_object_get(r, "error"));
	char *out = e ? strdup(e) : NULL;

	json_decref(r);
	return out;
}

/* initialize as request id; `extra` adds binding fields (",\"k\":v"). */
static void initialize_as(struct srv *v, const char *id, int version, bool rm, const char *extra)
{
	sendf(v, "{\"id\":\"%s\",\"method\":\"initialize\",\"token\":\"T\",\"data\":"
		 "{\"version\":%d,\"root\":\"%s\",\"session\":\"s1\"%s%s}}", id, version,
	      v->root, rm ? ",\"remove_workspace_on_exit\":true" : "", extra ? extra : "");
}

static void initialize(struct srv *v, const char *id, const char *extra)
{
	initialize_as(v, id, 4, true, extra);
}

static void init_ok(struct srv *v)
{
	char *e;

	initialize(v, "init", NULL);
	e = call_error(v, "init", 30000);
	if (e)
		fail_msg("initialize: %s", e);
}

/* Send execute of `tool` with arguments (a JSON object as text), unconfined. */
static void send_execute(struct srv *v, const char *id, const char *tool, const char *args)
{
	json_t *a = json_string(args);
	char *quoted = json_dumps(a, JSON_ENCODE_ANY);

	sendf(v, "{\"id\":\"%s\",\"method\":\"execute\",\"token\":\"T\",\"data\":"
		 "{\"call\":{\"id\":\"c\",\"name\":\"%s\",\"arguments\":%s,"
		 "\"kind\":\"function\"},\"permission_mode\":\"unconfined\","
		 "\"actor\":\"s1\"}}", id, tool, quoted);
	free(quoted);
	json_decref(a);
}

/* execute `tool`; the reply. */
static json_t *execute(struct srv *v, const char *id, const char *tool, const char *args)
{
	send_execute(v, id, tool, args);
	return reply(v, id, 30000);
}

/*
 * The JSON view in a ToolResult reply's one text part (new), failing the
 * test on an error reply.
 */
static json_t *view(json_t *r)
{
	json_t *part = json_array_get(json_object_get(json_object_get(r, "data"), "content"), 0);
	json_t *v = json_loads(json_string_value(json_object_get(part, "text")) ?
				       json_string_value(json_object_get(part, "text")) : "",
			       0, NULL);

	if (!v)
		fail_msg("not a tool view: %s",
			 json_string_value(json_object_get(r, "error")) ?
				 json_string_value(json_object_get(r, "error")) : "(no text part)");
	return v;
}

/* A bash command's output, from its view. */
static char *bash_output(struct srv *v, const char *id, const char *cmd)
{
	json_t *a = json_pack("{s:s}", "command", cmd);
	char *args = json_dumps(a, JSON_COMPACT);
	json_t *r = execute(v, id, "bash", args), *w = view(r);
	char *out = strdup(json_string_value(json_object_get(w, "output")) ?
				   json_string_value(json_object_get(w, "output")) : "");

	free(args);
	json_decref(a);
	json_decref(w);
	json_decref(r);
	return out;
}

/* EOF from the host; the server's exit status, within timeout_ms. */
static int finish(struct srv *v, int timeout_ms, int64_t *took_ms)
{
	int64_t t0 = sg_now_ms();
	struct timespec ts;

	shutdown(v->fd, SHUT_WR);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += timeout_ms / 1000 + 1;
	assert_int_equal(pthread_timedjoin_np(v->thread, NULL, &ts), 0);
	if (took_ms)
		*took_ms = sg_now_ms() - t0;
	return v->status;
}

static void cleanup(struct srv *v)
{
	const char *argv[] = { "rm", "-rf", v->dir, NULL };
	pid_t pid;

	close(v->fd);
	close(v->o.in_fd);
	sg_config_free(v->cfg);
	json_decref(v->events);
	/* The test's own directory, by its exact name. */
	pid = fork();
	if (pid == 0) {
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	while (pid > 0 && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	free(v);
}

/* Nothing provisioned was left unreleased; no environment directory left. */
static void assert_all_released(struct srv *v)
{
	char *d = NULL;
	struct stat st;

	assert_int_equal(atomic_load(&sg_fake.releases), atomic_load(&sg_fake.provisions));
	assert_true(asprintf(&d, "%s/fake/s1", v->state) > 0);
	assert_int_not_equal(stat(d, &st), 0);
	free(d);
}

/* EOF, a clean exit, and every environment released; then cleanup. */
static void end_clean(struct srv *v)
{
	assert_int_equal(finish(v, 30000, NULL), 0);
	assert_all_released(v);
	cleanup(v);
}

/* The reply to id is an error containing want. */
static void expect_error(struct srv *v, const char *id, int timeout_ms, const char *want)
{
	char *e = call_error(v, id, timeout_ms);

	if (!e || !strstr(e, want))
		fail_msg("reply to %s: %s, want an error with \"%s\"", id, e ? e : "success",
			 want);
	free(e);
}

/* bash `cmd` (no quotes in it) as request id; its reply comes later. */
static void send_run(struct srv *v, const char *id, const char *cmd)
{
	char args[256];

	snprintf(args, sizeof(args), "{\"command\":\"%s\"}", cmd);
	send_execute(v, id, "bash", args);
}

/* ---- the tests ---------------------------------------------------------- */

static void test_session_and_tools(void **state)
{
	struct srv *v = start("{\"backend\":\"fake\"}", 0);
	json_t *r;
	char *out;

	(void)state;
	init_ok(v);
	r = execute(v, "w", "write_file", "{\"path\":\"a.txt\",\"content\":\"hello\\n\"}");
	assert_null(json_object_get(r, "error"));
	json_decref(r);
	r = execute(v, "r", "read_file", "{\"path\":\"a.txt\"}");
	assert_string_equal(json_string_value(json_object_get(
				    json_object_get(json_object_get(r, "data"), "structured_content"),
				    "text")), "hello\n");
	json_decref(r);
	out = bash_output(v, "c", "cat a.txt; echo $((6*7))");
	assert_non_null(strstr(out, "hello\n42"));
	free(out);
	assert_int_equal(finish(v, 30000, NULL), 0);
	assert_int_equal(atomic_load(&sg_fake.provisions), 1);
	assert_int_equal(atomic_load(&sg_fake.teardowns), 1);
	assert_int_equal(atomic_load(&sg_fake.removed), 1);
	assert_all_released(v);
	cleanup(v);
}

/* An exec that fails mid-session fails that call only. */
static void test_exec_fails_at_call_n(void **state)
{
	struct srv *v = start("{\"backend\":\"fake\"}", 0);
	char *out;

	(void)state;
	init_ok(v);
	sg_fake.exec_fail_at = atomic_load(&sg_fake.execs) + 1;
	send_run(v, "x", "true");
	expect_error(v, "x", 30000, "unavailable: fake: exec call");
	out = bash_output(v, "y", "echo again");
	assert_non_null(strstr(out, "again"));
	free(out);
	end_clean(v);
}

/* The probe inside the new environment fails: initialize undoes it all. */
static void test_exec_fails_in_initialize(void **state)
{
	struct srv *v = start("{\"backend\":\"fake\"}", 0);

	(void)state;
	sg_fake.exec_fail_at = 1;
	initialize(v, "init", NULL);
	expect_error(v, "init", 30000, "fake: exec call 1 fails by request");
	assert_int_equal(finish(v, 30000, NULL), 0);
	assert_int_equal(atomic_load(&sg_fake.provisions), 1);
	assert_int_equal(atomic_load(&sg_fake.removed), 1);
	assert_all_released(v);
	cleanup(v);
}

static void test_provision_fails(void **state)
{
	struct srv *v = start("{\"backend\":\"fake\"}", 0);
	char *e;

	(void)state;
	sg_fake.provision_fail = SG_E_PROVIDER;
	initialize(v, "init", NULL);
	e = call_error(v, "init", 30000);
	assert_non_null(e);
	assert_string_equal(e, "provider_error: fake: provision fails by request");
	free(e);
	/* A failure after the environment existed ends the connection's
	 * chances: the host must reconnect (docs/protocol.md 4.1). */
	sg_fake.provision_fail = SG_OK;
	initialize(v, "again", NULL);
	expect_error(v, "again", 30000, "init_failed: ");
	assert_int_equal(finish(v, 30000, NULL), 0);
	assert_int_equal(atomic_load(&sg_fake.provisions), 1);
	assert_all_released(v);
	cleanup(v);
}

/*
 * A slow provision is cancelled by the host, promptly and cleanly: the
 * cancel carries the target's id and no data, and gets no reply of its
 * own; the one message that follows is the target's `cancelled`.
 */
static void test_slow_provision_cancelled(void **state)
{
	struct srv *v = start("{\"backend\":\"fake\"}", 0);
	int64_t t0;
	json_t *m;

	(void)state;
	sg_fake.provision_delay_ms = 20000;
	initialize(v, "init", NULL);
	usleep(200 * 1000);
	t0 = sg_now_ms();
	sendf(v, "{\"token\":\"T\",\"id\":\"init\",\"method\":\"cancel\"}");
	m = next_message(v, NULL, sg_now_ms() + 10000);
	assert_non_null(m);
	assert_string_equal(json_string_value(json_object_get(m, "id")), "init");
	assert_non_null(strstr(json_string_value(json_object_get(m, "error")), "cancelled"));
	json_decref(m);
	assert_true(sg_now_ms() - t0 < 5000);
	/* Nothing else: no reply to the cancel, no second one to init. */
	assert_null(next_message(v, NULL, sg_now_ms() + 300));
	end_clean(v);
}

/* The reply to a request whose id is not a string (an integer, say). */
static json_t *next_any(struct srv *v)
{
	json_t *m = next_message(v, NULL, sg_now_ms() + 10000);

	if (!m)
		fail_msg("no message");
	return m;
}

/*
 * The frame rules of protocol section 1: integer ids echoed as integers,
 * a frame without an id answered under "", a wrong token refused (cancel
 * included) while the connection goes on, a callback nobody waits for
 * dropped without a reply, an unknown process operation named as such,
 * and a cancel of an unknown id ignored, never taken for a duplicate.
 */
static void test_frame_rules(void **state)
{
	struct srv *v = start("{\"backend\":\"fake\"}", 0);
	json_t *m;

	(void)state;
	init_ok(v);
	sendf(v, "{\"token\":\"T\",\"id\":12,\"method\":\"process/nope\"}");
	m = next_any(v);
	assert_true(json_is_integer(json_object_get(m, "id")));
	assert_int_equal(json_integer_value(json_object_get(m, "id")), 12);
	assert_string_equal(json_string_value(json_object_get(m, "error")),
			    "unknown_method: unknown remote process operation \"nope\"");
	json_decref(m);
	sendf(v, "{\"token\":\"T\",\"method\":\"process/list\"}");
	m = next_any(v);
	assert_string_equal(json_string_value(json_object_get(m, "id")), "");
	assert_non_null(strstr(json_string_value(json_object_get(m, "error")), "invalid_request"));
	json_decref(m);
	sendf(v, "{\"token\":\"X\",\"id\":\"b1\",\"method\":\"process/nope\"}");
	expect_error(v, "b1", 10000, "bad_token");
	sendf(v, "{\"token\":\"X\",\"id\":\"b2\",\"method\":\"cancel\"}");
	expect_error(v, "b2", 10000, "bad_token");
	/* Neither answered: a callback no call waits for, a stray cancel. */
	sendf(v, "{\"token\":\"T\",\"id\":\"cb1\",\"method\":\"callback\","
		 "\"data\":{\"id\":\"cb1\",\"data\":{\"content\":[]}}}");
	sendf(v, "{\"token\":\"T\",\"id\":\"never\",\"method\":\"cancel\"}");
	sendf(v, "{\"token\":\"T\",\"id\":\"after\",\"method\":\"frob\"}");
	m = next_any(v);
	assert_string_equal(json_string_value(json_object_get(m, "id")), "after");
	assert_string_equal(json_string_value(json_object_get(m, "error")),
			    "unknown_method: no method \"frob\"");
	json_decref(m);
	end_clean(v);
}

/*
 * Versions 3 and 4 are spoken and echoed; others are refused before
 * anything is made, with a sentence that says the protocol mismatched.
 */
static void test_versions(void **state)
{
	static const int refused[] = { 2, 5, 0 };
	struct srv *v;
	json_t *m;

	(void)state;
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		v = start("{\"backend\":\"fake\"}", 0);
		initialize_as(v, "init", refused[i], true, NULL);
		expect_error(v, "init", 10000, "unsupported: protocol mismatch");
		assert_int_equal(atomic_load(&sg_fake.provisions), 0);
		end_clean(v);
	}
	v = start("{\"backend\":\"fake\"}", 0);
	initialize_as(v, "init", 3, true, NULL);
	m = reply(v, "init", 30000);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(m, "data"), "version")),
			 3);
	assert_string_equal(json_string_value(json_object_get(json_object_get(m, "data"), "root")),
			    v->root);
	json_decref(m);
	/*
	 * Its end is not this test's: a version-3 host kills its backend 3 s
	 * after EOF, so the removal goes to a reaper (shutdown.c).
	 */
	(void)finish(v, 30000, NULL);
	cleanup(v);
}

/*
 * Without remove_workspace_on_exit, the profile decides: a plain one is
 * removed at shutdown, a persistent or shared one kept; `true` removes.
 */
static void test_cleanup_default(void **state)
{
	static const struct {
		const char *profile;
		bool rm;
		int removed;
	} cases[] = {
		{ "{\"backend\":\"fake\"}", false, 1 },
		{ "{\"backend\":\"fake\",\"persistent\":true}", false, 0 },
		{ "{\"backend\":\"fake\",\"shared\":true}", false, 0 },
		{ "{\"backend\":\"fake\",\"persistent\":true}", true, 1 },
	};
	char *e;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct srv *v = start(cases[i].profile, 0);

		initialize_as(v, "init", 4, cases[i].rm, NULL);
		e = call_error(v, "init", 30000);
		if (e)
			fail_msg("case %zu: %s", i, e);
		assert_int_equal(finish(v, 30000, NULL), 0);
		assert_int_equal(atomic_load(&sg_fake.teardowns), 1);
		assert_int_equal(atomic_load(&sg_fake.removed), cases[i].removed);
		cleanup(v);
	}
}

/* A persistent environment that is gone is workspace_lost, never fresh. */
static void test_lost_environment(void **state)
{
	struct srv *v = start("{\"backend\":\"fake\"}", 0);

	(void)state;
	initialize(v, "init", ",\"require_existing_workspace\":true");
	expect_error(v, "init", 30000, "workspace_lost: ");
	end_clean(v);

	/* Lost in the middle of a session: the call says so. */
	v = start("{\"backend\":\"fake\"}", 0);
	init_ok(v);
	sg_fake.lost = true;
	send_run(v, "x", "true");
	expect_error(v, "x", 30000, "workspace_lost: fake: the environment");
	end_clean(v);
}

/* The one registry record of the fake's session s1 (new), or NULL. */
static json_t *record(struct srv *v)
{
	char *path = NULL;
	json_t *j;

	assert_true(asprintf(&path, "%s/registry/fake--s1.json", v->state) > 0);
	j = json_load_file(path, 0, NULL);
	free(path);
	return j;
}

/*
 * A teardown past the shutdown budget is cut short; exit stays in budget.
 * The plan (the fake has no measured times: 66 s by default) said so
 * first, and the record says what remains and why.
 */
static void test_teardown_over_budget(void **state)
{
	struct srv *v = start("{\"backend\":\"fake\"}", 500);
	int64_t took;
	json_t *rec;

	(void)state;
	init_ok(v);
	sg_fake.teardown_delay_ms = 30000;
	finish(v, 10000, &took);
	assert_true(took < 3000);
	assert_int_equal(atomic_load(&sg_fake.teardowns), 1);
	assert_int_equal(atomic_load(&sg_fake.teardown_cancelled), 1);
	assert_int_equal(atomic_load(&sg_fake.releases), 1);
	rec = record(v);
	assert_non_null(rec);
	assert_string_equal(json_string_value(json_object_get(rec, "status")), "cleanup-pending");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(rec, "budget"),
							     "given_ms")), 500);
	assert_true(json_integer_value(json_object_get(json_object_get(rec, "budget"),
							"needs_ms")) > 500);
	json_decref(rec);
	cleanup(v);
}

/* A removal that finished is timed into the state directory, and the
 * record is gone. */
static void test_removal_is_measured(void **state)
{
	struct srv *v = start("{\"backend\":\"fake\"}", 0);
	json_t *stats;

	(void)state;
	init_ok(v);
	sg_fake.teardown_delay_ms = 300;
	assert_int_equal(finish(v, 30000, NULL), 0);
	assert_null(record(v));
	stats = sg_budget_load(v->state, "fake");
	assert_non_null(stats);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(stats, "remove"),
							     "samples")), 1);
	assert_true(json_integer_value(json_object_get(json_object_get(stats, "remove"),
							"last_ms")) >= 300);
	json_decref(stats);
	sg_fake.teardown_delay_ms = 0;
	assert_all_released(v);
	cleanup(v);
}

/* The process supervisor: a started process is listed, and stopped at
 * shutdown. */
static void test_process_stopped_at_shutdown(void **state)
{
	struct srv *v = start("{\"backend\":\"fake\"}", 0);
	json_t *r, *p;
	long long pid;

	(void)state;
	init_ok(v);
	sendf(v, "{\"id\":\"ps\",\"method\":\"process/start\",\"token\":\"T\",\"data\":"
		 "{\"command\":\"sleep 60\",\"permission_mode\":\"unconfined\"}}");
	r = reply(v, "ps", 30000);
	p = json_object_get(r, "data");
	if (!p)
		fail_msg("process/start: %s", json_string_value(json_object_get(r, "error")));
	pid = json_integer_value(json_object_get(p, "pid"));
	json_decref(r);
	sendf(v, "{\"id\":\"pl\",\"method\":\"process/list\",\"token\":\"T\",\"data\":{}}");
	r = reply(v, "pl", 30000);
	assert_int_equal(json_array_size(json_object_get(r, "data")), 1);
	json_decref(r);
	assert_int_equal(finish(v, 30000, NULL), 0);
	if (pid > 0)
		assert_true(kill((pid_t)pid, 0) != 0 && errno == ESRCH);
	assert_all_released(v);
	cleanup(v);
}

/*
 * A server whose sg-helper is a shell wrapper: `intercept` (shell lines,
 * run first, with the helper's arguments in "$@") may answer a step
 * itself; everything else goes to the real helper.  The wrapper's path
 * is in *wrapper (new), for the caller to unlink.
 */
static struct srv *start_wrapped(const char *profile, const char *intercept, char **wrapper)
{
	const char *real = getenv("SG_HELPER");
	char *saved = strdup(real);
	struct srv *v;
	FILE *f;

	assert_non_null(saved);
	assert_true(asprintf(wrapper, "/tmp/sg-test-hostile-%d", (int)getpid()) > 0);
	f = fopen(*wrapper, "w");
	assert_non_null(f);
	fprintf(f, "#!/bin/sh\n%s\nexec '%s' \"$@\"\n", intercept, real);
	fclose(f);
	assert_int_equal(chmod(*wrapper, 0700), 0);
	setenv("SG_HELPER", *wrapper, 1);
	v = start(profile, 0);
	setenv("SG_HELPER", saved, 1);
	free(saved);
	init_ok(v);
	return v;
}

/*
 * The connection still serves after a hostile reply: a tool that needs
 * neither `proc spawn` nor `fs read`, which the hostile helpers answer.
 */
static void assert_alive(struct srv *v)
{
	json_t *r = execute(v, "alive", "list_files", "{}");

	if (!json_object_get(r, "data"))
		fail_msg("list_files: %s", json_string_value(json_object_get(r, "error")));
	json_decref(r);
}

/*
 * sg-helper's replies come from inside the environment, where anything may
 * have replaced it: a spawn reply whose record has no status fails that
 * process/start, and the gateway serves on.
 */
static void test_hostile_spawn_reply(void **state)
{
	char *wrapper = NULL;
	struct srv *v = start_wrapped(
		"{\"backend\":\"fake\"}",
		"if [ \"$1 $2\" = 'proc spawn' ]; then echo '{\"process\":{\"id\":\"x\"}}'; exit 0; fi",
		&wrapper);
	json_t *r;

	(void)state;
	sendf(v, "{\"id\":\"ps\",\"method\":\"process/start\",\"token\":\"T\",\"data\":"
		 "{\"command\":\"sleep 60\"}}");
	r = reply(v, "ps", 30000);
	assert_non_null(strstr(json_string_value(json_object_get(r, "error")), "no record"));
	json_decref(r);
	assert_alive(v);
	end_clean(v);
	unlink(wrapper);
	free(wrapper);
}

/* Live processes on this host whose command line holds needle. */
static int live_with(const char *needle)
{
	char path[300], cmd[256];
	struct dirent *de;
	int n = 0;
	DIR *d = opendir("/proc");

	assert_non_null(d);
	while ((de = readdir(d))) {
		FILE *f;
		size_t k;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		k = fread(cmd, 1, sizeof(cmd) - 1, f);
		fclose(f);
		for (size_t i = 0; i < k; i++)
			if (cmd[i] == '\0')
				cmd[i] = ' ';
		cmd[k] = '\0';
		if (strstr(cmd, needle))
			n++;
	}
	closedir(d);
	return n;
}

/*
 * A spawn whose reply is lost (here the helper's answer is replaced by
 * garbage after the real spawn ran) has an unknown outcome: the
 * supervisor may be running the command.  The host is told the start
 * failed, so it must not go on running (a retry would run it twice):
 * the gateway stops the id it chose.
 */
static void test_lost_spawn_reply_is_stopped(void **state)
{
	char *intercept = NULL, *wrapper = NULL, needle[64];
	struct srv *v;
	json_t *r;
	int alive = -1;

	(void)state;
	snprintf(needle, sizeof(needle), "sleep 61.%d ", (int)getpid());
	assert_true(asprintf(&intercept,
			     "if [ \"$1 $2\" = 'proc spawn' ]; then '%s' \"$@\" >/dev/null; "
			     "echo garbage; exit 0; fi", getenv("SG_HELPER")) > 0);
	v = start_wrapped("{\"backend\":\"fake\"}", intercept, &wrapper);
	sendf(v, "{\"id\":\"ps\",\"method\":\"process/start\",\"token\":\"T\",\"data\":"
		 "{\"command\":\"sleep 61.%d\",\"permission_mode\":\"unconfined\"}}", (int)getpid());
	r = reply(v, "ps", 30000);
	assert_non_null(json_object_get(r, "error"));
	json_decref(r);
	/* The stop is made before the reply; its SIGTERM may take a moment. */
	for (int i = 0; i < 50 && (alive = live_with(needle)) > 0; i++)
		usleep(100000);
	assert_int_equal(alive, 0);
	assert_alive(v);
	end_clean(v);
	unlink(wrapper);
	free(wrapper);
	free(intercept);
}

/*
 * The process watcher's records come from the environment (through its
 * helper on a remote backend), which may forge them: records of another
 * session bring no event, and the watcher follows at most
 * SG_PROC_KNOWN_MAX processes it did not start, so a flood of forged ids
 * neither grows its table nor floods the host.  Here `proc wait` answers
 * once with 5000 running records of this session and one of another,
 * then with all of them ended, then with nothing.
 */
static void test_watcher_forged_records(void **state)
{
	char *intercept = NULL, *wrapper = NULL, count[96];
	size_t own = 0, foreign = 0, i;
	int64_t end;
	json_t *ev, *m;
	struct srv *v;

	(void)state;
	snprintf(count, sizeof(count), "/tmp/sg-test-waits-%d", (int)getpid());
	unlink(count);
	assert_true(asprintf(&intercept,
		"if [ \"$1 $2\" = 'proc wait' ]; then\n"
		"  n=$(cat %s 2>/dev/null || echo 0); echo $((n + 1)) > %s\n"
		"  [ \"$n\" -ge 2 ] && { sleep 1; echo '{\"stamp\":3,\"changed\":[]}'; exit 0; }\n"
		"  st=running; [ \"$n\" = 1 ] && st=stopped\n"
		"  awk -v st=$st -v n=$n 'BEGIN { printf \"{\\\"stamp\\\":%%d,\\\"changed\\\":[\", n + 1;\n"
		"    for (i = 0; i < 5000; i++) printf \"{\\\"id\\\":\\\"proc-%%08x\\\",\\\"root_thread_id\\\":\\\"s1\\\",\\\"status\\\":\\\"%%s\\\",\\\"exit_code\\\":0},\", i, st;\n"
		"    printf \"{\\\"id\\\":\\\"proc-ffffffff\\\",\\\"root_thread_id\\\":\\\"s2\\\",\\\"status\\\":\\\"%%s\\\",\\\"exit_code\\\":0}]}\\n\", st }'\n"
		"  exit 0\n"
		"fi", count, count) > 0);
	v = start_wrapped("{\"backend\":\"fake_remote\"}", intercept, &wrapper);
	/* The events of the second answer, and then a quiet second. */
	end = sg_now_ms() + 20000;
	while ((m = next_message(v, NULL, end)) != NULL) {
		json_decref(m);
		if (json_array_size(v->events) >= SG_PROC_KNOWN_MAX)
			end = sg_now_ms() + 1000;
	}
	json_array_foreach(v->events, i, ev) {
		const char *id = json_string_value(json_object_get(
			json_object_get(json_object_get(ev, "data"), "Process"), "id"));

		/* Only proc-<8 hex> ids are processes of the gateway's making. */
		if (id && strcmp(id, "proc-ffffffff") == 0)
			foreign++;
		else if (id && strncmp(id, "proc-", 5) == 0)
			own++;
	}
	assert_int_equal(foreign, 0);
	assert_int_equal(own, SG_PROC_KNOWN_MAX);
	assert_alive(v);
	end_clean(v);
	unlink(count);
	unlink(wrapper);
	free(wrapper);
	free(intercept);
}

/*
 * read_file's text comes after the helper's JSON line, and on a remote
 * backend the helper is the environment's.  Text over the output limit
 * is refused, not passed on; text that would make the reply exactly as
 * long as the frame limit (no room for its newline) is refused too, where
 * it used to leave the request without any reply.
 */
static void test_hostile_read_reply(void **state)
{
	char *wrapper = NULL;
	/*
	 * `fs read --raw ... -- LEN`: LEN bytes of text, then a JSON line.
	 * `LEN` alone: a reply the gateway must refuse; `wLEN`: a reply in
	 * the helper's own form, whose text is the whole window.
	 */
	struct srv *v = start_wrapped(
		"{\"backend\":\"fake_remote\"}",
		"if [ \"$1 $2\" = 'fs read' ]; then\n"
		"  for a; do n=$a; done\n"
		"  m=${n#w}; head -c \"$m\" /dev/zero | tr '\\0' a; echo\n"
		"  case $n in w*) printf '{\"ok\":true,\"path\":\"f\",\"content_sha256\":\"00\","
		"\"workspace_revision\":\"r\",\"text_bytes\":%s,\"total_lines\":1,"
		"\"start_line\":1,\"num_lines\":1}\\n' \"$m\";;\n"
		"  *) echo '{\"ok\":true}';; esac\n"
		"  exit 0\n"
		"fi",
		&wrapper);
	char path[64];

	(void)state;
	/* A malformed header before a large text: an error, never a crash. */
	snprintf(path, sizeof(path), "{\"path\":\"%zu\"}", (size_t)SG_TOOL_OUTPUT + 64 * SG_KiB);
	send_execute(v, "ra", "read_file", path);
	expect_error(v, "ra", 30000, "internal");
	/* A window whose reply would pass the frame limit: too_large, not silence. */
	snprintf(path, sizeof(path), "{\"path\":\"w%zu\"}", (size_t)SG_MAX_FRAME);
	send_execute(v, "rb", "read_file", path);
	expect_error(v, "rb", 30000, "too_large");
	assert_alive(v);
	end_clean(v);
	unlink(wrapper);
	free(wrapper);
}

/* Exports: a snapshot read in chunks, released at close and at exit. */
static void test_export(void **state)
{
	struct srv *v = start("{\"backend\":\"fake\"}", 0);
	json_t *r, *w;
	char tok[80];

	(void)state;
	init_ok(v);
	json_decref(execute(v, "w", "write_file", "{\"path\":\"e.bin\",\"content\":\"0123456789\"}"));
	r = execute(v, "eo", "present_artifact", "{\"path\":\"e.bin\"}");
	w = view(r);
	assert_int_equal(json_integer_value(json_object_get(w, "size")), 10);
	snprintf(tok, sizeof(tok), "%s", json_string_value(json_object_get(w, "execution_export")));
	json_decref(w);
	json_decref(r);
	sendf(v, "{\"id\":\"er\",\"method\":\"export/read\",\"token\":\"T\",\"data\":"
		 "{\"token\":\"%s\",\"offset\":4}}", tok);
	r = reply(v, "er", 30000);
	assert_string_equal(json_string_value(json_object_get(json_object_get(r, "data"), "data")),
			    "NDU2Nzg5"); /* "456789" */
	json_decref(r);
	/* Left open: shutdown releases it. */
	end_clean(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_session_and_tools),
		cmocka_unit_test(test_exec_fails_at_call_n),
		cmocka_unit_test(test_exec_fails_in_initialize),
		cmocka_unit_test(test_provision_fails),
		cmocka_unit_test(test_slow_provision_cancelled),
		cmocka_unit_test(test_frame_rules),
		cmocka_unit_test(test_versions),
		cmocka_unit_test(test_cleanup_default),
		cmocka_unit_test(test_lost_environment),
		cmocka_unit_test(test_teardown_over_budget),
		cmocka_unit_test(test_removal_is_measured),
		cmocka_unit_test(test_process_stopped_at_shutdown),
		cmocka_unit_test(test_export),
		cmocka_unit_test(test_hostile_spawn_reply),
		cmocka_unit_test(test_hostile_read_reply),
		cmocka_unit_test(test_lost_spawn_reply_is_stopped),
		cmocka_unit_test(test_watcher_forged_records),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
