/*
 * test_modal_api.c - modal/api.c (credentials, the auth token, apps,
 * images, sandboxes, the command router) against the fake Modal of
 * tests/fakes/modal (proven by the official SDK), started here on
 * 127.0.0.1 in tmpdir mode.  Faults are injected through the fake's admin
 * API, and what reached the fake is read back from its request log.
 *
 * Needs SG_NODE and SG_FAKE_MODAL_DIR (the ctest fixture fakes/modal-npm
 * installs the fake's packages).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/http.h"
#include "base/limits.h"
#include "modal/api.h"

static struct {
	pid_t pid;
	int in_fd;
	char url[300], admin[300];
	char tmp[256];
} fake = { .pid = -1, .in_fd = -1 };

static int start_fake(void **state)
{
	const char *node = getenv("SG_NODE"), *dir = getenv("SG_FAKE_MODAL_DIR");
	char script[2048], line[256];
	int in[2], out[2];
	FILE *f;

	(void)state;
	signal(SIGPIPE, SIG_IGN);
	unsetenv("http_proxy");
	unsetenv("HTTP_PROXY");
	unsetenv("https_proxy");
	unsetenv("HTTPS_PROXY");
	unsetenv("all_proxy");
	if (!node || !dir)
		return -1;
	snprintf(fake.tmp, sizeof(fake.tmp), "/tmp/test-modal-api-XXXXXX");
	if (!mkdtemp(fake.tmp))
		return -1;
	snprintf(script, sizeof(script), "%s/server.mjs", dir);
	if (pipe(in) < 0 || pipe(out) < 0)
		return -1;
	fake.pid = fork();
	if (fake.pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl(node, node, script, "--exec-mode", "tmpdir", "--ready-ms",
		      "200", "--build-ms", "100", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	fake.in_fd = in[1];
	f = fdopen(out[0], "r");
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "ADMIN ", 6) == 0)
			snprintf(fake.admin, sizeof(fake.admin),
				 "http://127.0.0.1:%s", line + 6);
		if (strncmp(line, "LISTENING ", 10) == 0) {
			snprintf(fake.url, sizeof(fake.url), "http://127.0.0.1:%s",
				 line + 10);
			break;
		}
	}
	if (f)
		fclose(f);
	if (!fake.url[0] || !fake.admin[0])
		return -1;
	setenv("MODAL_SERVER_URL", fake.url, 1);
	setenv("MODAL_TOKEN_ID", "ak-test", 1);
	setenv("MODAL_TOKEN_SECRET", "as-test", 1);
	/* These tests call the v1 sandbox calls by name (test_modal.py covers both kinds). */
	setenv("MODAL_SANDBOX_V2", "0", 1);
	return 0;
}

static int stop_fake(void **state)
{
	char cmd[300];

	(void)state;
	if (fake.in_fd >= 0)
		close(fake.in_fd);
	if (fake.pid > 0)
		waitpid(fake.pid, NULL, 0);
	snprintf(cmd, sizeof(cmd), "%s", fake.tmp);
	if (fake.tmp[0]) {
		char path[512];

		snprintf(path, sizeof(path), "%s/modal.toml", cmd);
		unlink(path);
		rmdir(cmd);
	}
	return 0;
}

/* An admin call; the reply's JSON (new) or NULL. */
static json_t *admin(const char *method, const char *path, const char *body)
{
	char url[300];
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };
	struct sg_http_request req = { .method = method, .url = url,
				       .body = body,
				       .body_len = body ? strlen(body) : 0,
				       .content_type = body ? "application/json"
							    : NULL };
	json_t *j = NULL;

	snprintf(url, sizeof(url), "%s%s", fake.admin, path);
	sg_http_response_init(&r, 64 * 1024 * 1024);
	if (sg_http_do(&req, &r, NULL, &err) == SG_OK && r.status == 200)
		j = json_loadb(r.body.p, r.body.len, 0, NULL);
	sg_http_response_release(&r);
	assert_non_null(j);
	return j;
}

/* Calls of method in the fake's log since the last clear. */
static size_t logged(const char *method, json_t **calls)
{
	json_t *log = admin("GET", "/__fake/log", NULL), *v, *out = json_array();
	size_t i;

	json_array_foreach(log, i, v)
		if (strcmp(json_string_value(json_object_get(v, "method")), method) == 0)
			json_array_append(out, v);
	json_decref(log);
	i = json_array_size(out);
	if (calls)
		*calls = out;
	else
		json_decref(out);
	return i;
}

static void client(struct mdl_client *c)
{
	struct mdl_creds cr;
	struct sg_errinfo err = { 0 };

	assert_int_equal(mdl_creds_load(&cr, &err), SG_OK);
	assert_int_equal(mdl_client_init(c, &cr, NULL, &err), SG_OK);
}

/* ---- Credentials ---------------------------------------------------------- */

static void write_toml(const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/modal.toml", fake.tmp);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	setenv("MODAL_CONFIG_PATH", path, 1);
}

static void test_creds(void **state)
{
	struct mdl_creds c;
	struct sg_errinfo err = { 0 };
	char *saved_id = strdup(getenv("MODAL_TOKEN_ID"));
	char *saved_url = strdup(getenv("MODAL_SERVER_URL"));

	(void)state;
	unsetenv("MODAL_TOKEN_ID");
	unsetenv("MODAL_SERVER_URL");
	unsetenv("MODAL_SANDBOX_V2");
	write_toml("[default]\ntoken_id = \"ak-one\"\ntoken_secret = \"as-one\"\n"
		   "\n# a comment\n[work]\ntoken_id = 'ak-two'\n"
		   "token_secret = \"as-two\"\nactive = true\n"
		   "environment = \"dev\"\nserver_url = \"https://example.test\"\n");
	/* The active profile; the env's secret alone does not override. */
	assert_int_equal(mdl_creds_load(&c, &err), SG_OK);
	assert_string_equal(c.token_id, "ak-two");
	assert_string_equal(c.token_secret, "as-two");
	assert_string_equal(c.environment, "dev");
	assert_string_equal(c.server_url, "https://example.test");
	assert_string_equal(c.profile, "work");
	assert_true(c.sandbox_v2); /* as modal-js: v2 unless told otherwise */
	/* MODAL_PROFILE picks another; MODAL_ENVIRONMENT wins over the file. */
	setenv("MODAL_PROFILE", "default", 1);
	setenv("MODAL_ENVIRONMENT", "prod", 1);
	assert_int_equal(mdl_creds_load(&c, &err), SG_OK);
	assert_string_equal(c.token_id, "ak-one");
	assert_string_equal(c.environment, "prod");
	assert_string_equal(c.server_url, MDL_SERVER_DEFAULT);
	/* A profile's sandbox_v2, and MODAL_SANDBOX_V2 over it. */
	write_toml("[default]\ntoken_id = \"ak-one\"\ntoken_secret = \"as-one\"\n"
		   "sandbox_v2 = false\n");
	assert_int_equal(mdl_creds_load(&c, &err), SG_OK);
	assert_false(c.sandbox_v2);
	setenv("MODAL_SANDBOX_V2", "1", 1);
	assert_int_equal(mdl_creds_load(&c, &err), SG_OK);
	assert_true(c.sandbox_v2);
	write_toml("[default]\ntoken_id = \"ak-one\"\ntoken_secret = \"as-one\"\n");
	setenv("MODAL_SANDBOX_V2", "False", 1);
	assert_int_equal(mdl_creds_load(&c, &err), SG_OK);
	assert_false(c.sandbox_v2);
	unsetenv("MODAL_SANDBOX_V2");
	write_toml("[default]\ntoken_id = \"ak-one\"\ntoken_secret = \"as-one\"\n"
		   "\n# a comment\n[work]\ntoken_id = 'ak-two'\n"
		   "token_secret = \"as-two\"\nactive = true\n"
		   "environment = \"dev\"\nserver_url = \"https://example.test\"\n");
	setenv("MODAL_PROFILE", "nope", 1);
	sg_err_clear(&err);
	assert_int_equal(mdl_creds_load(&c, &err), SG_E_PERMISSION);
	unsetenv("MODAL_PROFILE");
	unsetenv("MODAL_ENVIRONMENT");
	/* The variables win over every profile. */
	setenv("MODAL_TOKEN_ID", "ak-env", 1);
	assert_int_equal(mdl_creds_load(&c, &err), SG_OK);
	assert_string_equal(c.token_id, "ak-env");
	assert_string_equal(c.token_secret, "as-test");
	/* No token anywhere: refused, saying where it looked, not a value. */
	unsetenv("MODAL_TOKEN_ID");
	write_toml("[a]\ntoken_id = \"ak-only\"\n");
	sg_err_clear(&err);
	assert_int_equal(mdl_creds_load(&c, &err), SG_E_PERMISSION);
	assert_non_null(strstr(err.msg, "MODAL_TOKEN_ID"));
	assert_null(strstr(err.msg, "ak-only"));
	assert_null(strstr(err.msg, "as-test"));
	write_toml("token_id = \"outside a profile\"\n");
	sg_err_clear(&err);
	assert_int_equal(mdl_creds_load(&c, &err), SG_E_INVALID_ARGUMENT);
	unsetenv("MODAL_CONFIG_PATH");

	setenv("MODAL_TOKEN_ID", saved_id, 1);
	setenv("MODAL_SERVER_URL", saved_url, 1);
	setenv("MODAL_SANDBOX_V2", "0", 1);
	free(saved_id);
	free(saved_url);
}

static void test_refusals(void **state)
{
	struct mdl_creds cr;
	struct mdl_client c;
	struct sg_errinfo err = { 0 };
	char *app = NULL;

	(void)state;
	assert_int_equal(mdl_creds_load(&cr, &err), SG_OK);
	/* A token never crosses a network in the clear. */
	snprintf(cr.server_url, sizeof(cr.server_url), "http://api.example.com:80");
	assert_int_equal(mdl_client_init(&c, &cr, NULL, &err), SG_E_INVALID_ARGUMENT);
	/* A wrong secret: PERMISSION, and the secret is not in the sentence. */
	assert_int_equal(mdl_creds_load(&cr, &err), SG_OK);
	snprintf(cr.token_secret, sizeof(cr.token_secret), "as-wrong-secret");
	assert_int_equal(mdl_client_init(&c, &cr, NULL, &err), SG_OK);
	sg_err_clear(&err);
	assert_int_equal(mdl_app(&c, "x", &app, NULL, &err), SG_E_PERMISSION);
	assert_null(strstr(err.msg, "as-wrong-secret"));
	mdl_client_release(&c);
}

/* ---- A sandbox's life ----------------------------------------------------- */

static sg_err create(struct mdl_client *c, const char *app, const char *image,
		     const char *name, const char *run, char **id, int *status)
{
	Modal__Client__SandboxCreateRequest req =
		MODAL__CLIENT__SANDBOX_CREATE_REQUEST__INIT;
	Modal__Client__Sandbox def = MODAL__CLIENT__SANDBOX__INIT;
	Modal__Client__Resources res = MODAL__CLIENT__RESOURCES__INIT;
	Modal__Client__NetworkAccess net = MODAL__CLIENT__NETWORK_ACCESS__INIT;
	Modal__Client__SandboxTag t1 = MODAL__CLIENT__SANDBOX_TAG__INIT;
	Modal__Client__SandboxTag t2 = MODAL__CLIENT__SANDBOX_TAG__INIT;
	Modal__Client__SandboxTag *tags[] = { &t1, &t2 };
	Modal__Client__SandboxCreateResponse *resp = NULL;
	struct sg_errinfo err = { 0 };
	sg_err rc;

	res.milli_cpu = 1500;
	res.memory_mb = 2048;
	net.network_access_type =
		MODAL__CLIENT__NETWORK_ACCESS_TYPE__NETWORK_ACCESS_TYPE_BLOCKED;
	def.image_id = (char *)image;
	def.resources = &res;
	def.timeout_secs = 600;
	def.network_access = &net;
	def._workdir_case = MODAL__CLIENT__SANDBOX___WORKDIR_WORKDIR;
	def.workdir = "/workspace";
	if (name) {
		def._name_case = MODAL__CLIENT__SANDBOX___NAME_NAME;
		def.name = (char *)name;
	}
	def._idle_timeout_secs_case =
		MODAL__CLIENT__SANDBOX___IDLE_TIMEOUT_SECS_IDLE_TIMEOUT_SECS;
	def.idle_timeout_secs = 300;
	t1.tag_name = "managed-by";
	t1.tag_value = "sandgate-test";
	t2.tag_name = "run";
	t2.tag_value = (char *)run;
	req.app_id = (char *)app;
	req.definition = &def;
	req.n_tags = 2;
	req.tags = tags;
	rc = mdl_call(c, "SandboxCreate", &req.base,
		      &modal__client__sandbox_create_response__descriptor,
		      (ProtobufCMessage **)&resp, 0, status, NULL, &err);
	if (!rc) {
		*id = strdup(resp->sandbox_id);
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	}
	return rc;
}

static void run_ok(struct mdl_client *c, struct mdl_router *r,
		   const char *const *argv, const char *stdin_text,
		   struct mdl_exec_result *res, size_t max)
{
	struct sg_errinfo err = { 0 };
	struct mdl_exec x = { .argv = argv, .stdin_data = stdin_text,
			      .stdin_len = stdin_text ? strlen(stdin_text) : 0,
			      .wait_ms = 30000, .max_output = max };
	sg_err rc;

	mdl_exec_result_init(res, max);
	rc = mdl_run(c, r, &x, res, NULL, &err);
	if (rc)
		fail_msg("%s", err.msg);
}

/* The lifetime the fake recorded for image id (a snapshot's), or 0. */
static json_int_t image_ttl(const char *id)
{
	json_t *st = admin("GET", "/__fake/state", NULL), *im;
	json_int_t ttl = 0;
	size_t i;

	json_array_foreach(json_object_get(st, "images"), i, im)
		if (strcmp(json_string_value(json_object_get(im, "id")), id) == 0)
			ttl = json_integer_value(json_object_get(im, "ttlSeconds"));
	json_decref(st);
	return ttl;
}

static int count_cb(const Modal__Client__SandboxInfo *info, void *payload)
{
	(void)info;
	(*(int *)payload)++;
	return 0;
}

static void test_lifecycle(void **state)
{
	struct mdl_client c;
	struct mdl_router r, r2;
	struct mdl_exec_result res;
	struct sg_errinfo err = { 0 };
	char *app = NULL, *image = NULL, *id = NULL, *id2 = NULL, *snap = NULL;
	char *dup = NULL, name[64], run[32], tagrun[48];
	const char *tags[] = { "managed-by=sandgate-test", tagrun, NULL };
	const char *echo[] = { "echo", "hi", NULL };
	const char *both[] = { "sh", "-c", "echo out; echo err >&2; exit 7", NULL };
	const char *cat[] = { "cat", NULL };
	const char *killme[] = { "sh", "-c", "kill -9 $$", NULL };
	const char *big[] = { "sh", "-c", "head -c 3000000 /dev/zero", NULL };
	const char *write[] = { "sh", "-c", "echo kept > kept.txt", NULL };
	const char *read[] = { "cat", "kept.txt", NULL };
	int n = 0, status = 0;
	json_t *st;

	(void)state;
	snprintf(run, sizeof(run), "r%d", (int)getpid());
	snprintf(name, sizeof(name), "sg-test-%s", run);
	snprintf(tagrun, sizeof(tagrun), "run=%s", run);
	client(&c);
	assert_int_equal(mdl_app(&c, "sandgate-test", &app, NULL, &err), SG_OK);
	assert_int_equal(mdl_image(&c, app, "python:3.13-slim", 60000, &image, NULL,
				   &err),
			 SG_OK);
	assert_int_equal(strncmp(image, "im-", 3), 0);
	assert_int_equal(create(&c, app, image, name, run, &id, &status), SG_OK);

	/* What the fake received. */
	st = admin("GET", "/__fake/state", NULL);
	{
		json_t *sb = json_array_get(json_object_get(st, "sandboxes"), 0);

		assert_string_equal(json_string_value(json_object_get(sb, "name")), name);
		assert_int_equal(json_integer_value(json_object_get(
					 json_object_get(sb, "resources"), "milliCpu")),
				 1500);
		assert_int_equal(json_integer_value(json_object_get(
					 json_object_get(sb, "network"), "type")),
				 2);
		assert_int_equal(json_integer_value(json_object_get(sb, "idleTimeoutSecs")),
				 300);
	}
	json_decref(st);

	/* The name is unique: a second create says ALREADY_EXISTS. */
	assert_int_equal(create(&c, app, image, name, run, &dup, &status),
			 SG_E_PROVIDER);
	assert_int_equal(status, SG_GRPC_ALREADY_EXISTS);

	assert_int_equal(mdl_router_open(&c, id, 30000, &r, NULL, &err), SG_OK);
	run_ok(&c, &r, echo, NULL, &res, 1 << 20);
	assert_int_equal(res.code, 0);
	assert_int_equal(res.out.len, 3);
	assert_memory_equal(res.out.p, "hi\n", 3);
	/* Start, stdout, stderr, wait: four router requests. */
	assert_int_equal(res.router_calls, 4);
	mdl_exec_result_release(&res);

	run_ok(&c, &r, both, NULL, &res, 1 << 20);
	assert_int_equal(res.code, 7);
	assert_memory_equal(res.out.p, "out\n", 4);
	assert_memory_equal(res.err.p, "err\n", 4);
	mdl_exec_result_release(&res);

	run_ok(&c, &r, cat, "through stdin", &res, 1 << 20);
	assert_int_equal(res.out.len, strlen("through stdin"));
	assert_int_equal(res.router_calls, 5);
	mdl_exec_result_release(&res);

	run_ok(&c, &r, killme, NULL, &res, 1 << 20);
	assert_int_equal(res.signal, 9);
	assert_int_equal(res.code, -1);
	mdl_exec_result_release(&res);

	/* The bound keeps the first MiB and counts the rest. */
	run_ok(&c, &r, big, NULL, &res, 1 << 20);
	assert_int_equal(res.out.len, 1 << 20);
	assert_int_equal(res.out_total, 3000000);
	mdl_exec_result_release(&res);

	/* A snapshot carries the workspace into a new sandbox. */
	run_ok(&c, &r, write, NULL, &res, 1 << 20);
	mdl_exec_result_release(&res);
	/*
	 * It carries its lifetime, as the SDK's do: the fake, like the
	 * service it suggests, refuses one without ttl_seconds.
	 */
	assert_int_equal(mdl_snapshot(&r, MDL_SNAPSHOT_TTL_NONE, 60000, &snap, NULL, &err),
			 SG_OK);
	assert_int_equal(image_ttl(snap), -1);
	free(snap);
	assert_int_equal(mdl_snapshot(&r, MDL_SNAPSHOT_TTL_DEFAULT_S, 60000, &snap, NULL, &err),
			 SG_OK);
	assert_int_equal(image_ttl(snap), 2592000);
	assert_int_equal(create(&c, app, snap, NULL, run, &id2, &status), SG_OK);
	assert_int_equal(mdl_router_open(&c, id2, 30000, &r2, NULL, &err), SG_OK);
	run_ok(&c, &r2, read, NULL, &res, 1 << 20);
	assert_int_equal(res.out.len, 5);
	assert_memory_equal(res.out.p, "kept\n", 5);
	mdl_exec_result_release(&res);

	/* Listing by tags, across pages. */
	assert_int_equal(mdl_list(&c, app, tags, count_cb, &n, NULL, &err), SG_OK);
	assert_int_equal(n, 2);

	assert_int_equal(mdl_terminate(&c, id, NULL, &err), SG_OK);
	assert_int_equal(mdl_terminate(&c, id2, NULL, &err), SG_OK);
	assert_int_equal(mdl_terminate(&c, id2, NULL, &err), SG_OK);
	n = 0;
	assert_int_equal(mdl_list(&c, app, tags, count_cb, &n, NULL, &err), SG_OK);
	assert_int_equal(n, 0);
	/* A router of an ended sandbox: the workspace is lost. */
	mdl_router_release(&r2);
	sg_err_clear(&err);
	assert_int_equal(mdl_router_open(&c, id2, 30000, &r2, NULL, &err),
			 SG_E_WORKSPACE_LOST);

	/* One auth token served every call. */
	assert_int_equal(atomic_load(&c.auth_fetches), 1);
	mdl_router_release(&r);
	free(app);
	free(image);
	free(id);
	free(id2);
	free(snap);
	mdl_client_release(&c);
}

/* ---- Faults ------------------------------------------------------------- */

static void test_faults(void **state)
{
	struct mdl_client c;
	struct mdl_router r;
	struct mdl_exec_result res;
	struct sg_errinfo err = { 0 };
	char *app = NULL, *image = NULL, *id = NULL;
	const char *seq[] = { "sh", "-c", "seq 1 20000", NULL };
	json_t *calls;
	int n = 0, status;

	(void)state;
	client(&c);
	assert_int_equal(mdl_app(&c, "sandgate-test", &app, NULL, &err), SG_OK);
	assert_int_equal(mdl_image(&c, app, "alpine", 60000, &image, NULL, &err),
			 SG_OK);
	assert_int_equal(create(&c, app, image, NULL, "faults", &id, &status), SG_OK);
	assert_int_equal(mdl_router_open(&c, id, 30000, &r, NULL, &err), SG_OK);

	/* UNAVAILABLE, then success: one logical call, one idempotency key. */
	json_decref(admin("POST", "/__fake/log/clear", "{}"));
	json_decref(admin("POST", "/__fake/faults",
			  "{\"method\":\"SandboxList\",\"kind\":\"status\",\"code\":14}"));
	assert_int_equal(mdl_list(&c, app, NULL, count_cb, &n, NULL, &err), SG_OK);
	assert_int_equal(logged("SandboxList", &calls), 3); /* 2 tries, 1 empty page */
	{
		json_t *a = json_object_get(json_array_get(calls, 0), "metadata");
		json_t *b = json_object_get(json_array_get(calls, 1), "metadata");

		assert_string_equal(json_string_value(json_object_get(a, "x-idempotency-key")),
				    json_string_value(json_object_get(b, "x-idempotency-key")));
		assert_string_equal(json_string_value(json_object_get(a, "x-retry-attempt")), "0");
		assert_string_equal(json_string_value(json_object_get(b, "x-retry-attempt")), "1");
		/* The token secret travels, and the log redacts it. */
		assert_string_equal(json_string_value(json_object_get(a, "x-modal-token-secret")),
				    "<redacted>");
	}
	json_decref(calls);

	/* A GOAWAY before TaskExecStart ran: retried; the command ran once. */
	json_decref(admin("POST", "/__fake/log/clear", "{}"));
	json_decref(admin("POST", "/__fake/faults",
			  "{\"method\":\"TaskExecStart\",\"kind\":\"goaway\"}"));
	run_ok(&c, &r, seq, NULL, &res, 1 << 20);
	assert_int_equal(res.code, 0);
	assert_int_equal(res.out_total, 108894);
	mdl_exec_result_release(&res);
	assert_int_equal(logged("TaskExecStart", NULL), 2);

	/* An output stream cut inside a message: read again from the offset. */
	json_decref(admin("POST", "/__fake/faults",
			  "{\"method\":\"TaskExecStdioRead\",\"kind\":\"cut\"}"));
	run_ok(&c, &r, seq, NULL, &res, 1 << 20);
	assert_int_equal(res.out_total, 108894);
	assert_int_equal(res.out.len, 108894);
	assert_memory_equal(res.out.p, "1\n2\n3\n", 6);
	assert_memory_equal(res.out.p + res.out.len - 6, "20000\n", 6);
	mdl_exec_result_release(&res);

	/*
	 * Stdin in pieces of SG_MODAL_STDIN_CHUNK, the merged output read
	 * beside them: all of it comes back, in one read.
	 */
	{
		const char *cat[] = { "cat", NULL };
		size_t blen = SG_MODAL_STDIN_CHUNK + 1000;
		char *big = malloc(blen);
		struct mdl_exec x = { .argv = cat, .merge = true, .no_wait = true,
				      .wait_ms = 30000, .max_output = 4 << 20 };

		assert_non_null(big);
		for (size_t i = 0; i < blen; i++)
			big[i] = (char)('a' + i % 26);
		x.stdin_data = big;
		x.stdin_len = blen;
		json_decref(admin("POST", "/__fake/log/clear", "{}"));
		mdl_exec_result_init(&res, 4 << 20);
		sg_err_clear(&err);
		assert_int_equal(mdl_run(&c, &r, &x, &res, NULL, &err), SG_OK);
		assert_int_equal(res.out.len, blen);
		assert_memory_equal(res.out.p, big, blen);
		assert_int_equal(res.router_calls, 4);
		assert_int_equal(logged("TaskExecStdinWrite", &calls), 2);
		{
			/* Side by side: the read began before the last write ended. */
			json_t *w = json_array_get(calls, 1), *rd;
			double w_end = json_number_value(json_object_get(w, "t_ms")), r_start;

			assert_int_equal(logged("TaskExecStdioRead", &rd), 1);
			r_start = json_number_value(json_object_get(json_array_get(rd, 0), "t_ms")) -
				  json_number_value(json_object_get(json_array_get(rd, 0), "serving_ms"));
			if (!(r_start < w_end))
				fail_msg("the read began at %.1f ms, after the writes ended at %.1f ms",
					 r_start, w_end);
			json_decref(rd);
		}
		json_decref(calls);
		mdl_exec_result_release(&res);

		/*
		 * A write that fails stops the read beside it at once, instead
		 * of waiting for a command that never sees its stdin end.  A
		 * small one: a large request answered before the server read it
		 * can stall libcurl 7.88.1 until the call's deadline (grpc.h).
		 */
		x.stdin_len = 3;
		json_decref(admin("POST", "/__fake/faults",
				  "{\"method\":\"TaskExecStdinWrite\",\"kind\":\"status\",\"code\":7}"));
		mdl_exec_result_init(&res, 4 << 20);
		sg_err_clear(&err);
		{
			int64_t t0 = sg_now_ms();
			sg_err rc = mdl_run(&c, &r, &x, &res, NULL, &err);

			if (rc != SG_E_PERMISSION)
				fail_msg("the run gave %s after %lld ms: %s", sg_err_word(rc),
					 (long long)(sg_now_ms() - t0), err.msg);
			assert_true(sg_now_ms() - t0 < 10000);
		}
		mdl_exec_result_release(&res);
		free(big);
	}

	/* A code Modal's clients do not retry is not retried. */
	json_decref(admin("POST", "/__fake/log/clear", "{}"));
	json_decref(admin("POST", "/__fake/faults",
			  "{\"method\":\"SandboxTerminate\",\"kind\":\"status\",\"code\":7}"));
	sg_err_clear(&err);
	assert_int_equal(mdl_terminate(&c, id, NULL, &err), SG_E_PERMISSION);
	assert_int_equal(logged("SandboxTerminate", NULL), 1);
	assert_int_equal(mdl_terminate(&c, id, NULL, &err), SG_OK);

	mdl_router_release(&r);
	free(app);
	free(image);
	free(id);
	mdl_client_release(&c);
}

struct firer {
	struct sg_cancel *c;
	int64_t at;
};

static void *fire(void *arg)
{
	struct firer *f = arg;

	(void)sg_cancel_sleep(NULL, 400);
	f->at = sg_now_ms();
	sg_cancel_fire(f->c, SG_E_CANCELLED);
	return NULL;
}

static void test_cancel(void **state)
{
	struct mdl_client c;
	struct mdl_router r;
	struct mdl_exec_result res;
	struct sg_errinfo err = { 0 };
	struct sg_cancel cancel;
	struct firer f = { .c = &cancel };
	pthread_t t;
	char *app = NULL, *image = NULL, *id = NULL;
	const char *sleeper[] = { "sleep", "30", NULL };
	struct mdl_exec x = { .argv = sleeper, .wait_ms = 60000 };
	int status;

	(void)state;
	client(&c);
	assert_int_equal(mdl_app(&c, "sandgate-test", &app, NULL, &err), SG_OK);
	assert_int_equal(mdl_image(&c, app, "alpine", 60000, &image, NULL, &err),
			 SG_OK);
	assert_int_equal(create(&c, app, image, NULL, "cancel", &id, &status), SG_OK);
	assert_int_equal(mdl_router_open(&c, id, 30000, &r, NULL, &err), SG_OK);
	assert_int_equal(sg_cancel_init(&cancel), SG_OK);
	mdl_exec_result_init(&res, 1024);
	assert_int_equal(pthread_create(&t, NULL, fire, &f), 0);
	assert_int_equal(mdl_run(&c, &r, &x, &res, &cancel, &err), SG_E_CANCELLED);
	assert_true(sg_now_ms() - f.at < 200);
	pthread_join(t, NULL);
	mdl_exec_result_release(&res);
	sg_cancel_release(&cancel);
	assert_int_equal(mdl_terminate(&c, id, NULL, &err), SG_OK);
	mdl_router_release(&r);
	free(app);
	free(image);
	free(id);
	mdl_client_release(&c);
}

/* ---- The auth token is refreshed before it expires ------------------------ */

static void test_token_refresh(void **state)
{
	struct mdl_client c;
	struct sg_errinfo err = { 0 };
	char *app = NULL;
	json_t *log, *v;
	int64_t exp0;
	size_t i;

	(void)state;
	/* Tokens that live 62 s: one is used while more than SG_MODAL_REFRESH_S remain. */
	json_decref(admin("POST", "/__fake/token-ttl", "{\"auth_s\": 62}"));
	json_decref(admin("POST", "/__fake/log/clear", NULL));
	client(&c);
	assert_int_equal(mdl_app(&c, "sandgate-test", &app, NULL, &err), SG_OK);
	free(app);
	exp0 = c.auth_exp;
	/* 63: time() reads a coarse clock, a tick behind the fake's at a second's turn. */
	assert_in_range(exp0 - (int64_t)time(NULL), SG_MODAL_REFRESH_S, 63);
	assert_int_equal(mdl_app(&c, "sandgate-test", &app, NULL, &err), SG_OK);
	free(app);
	assert_int_equal(atomic_load(&c.auth_fetches), 1);
	/* Within SG_MODAL_REFRESH_S of its exp: the next call fetches a new one first. */
	while ((int64_t)time(NULL) + SG_MODAL_REFRESH_S < exp0)
		nanosleep(&(struct timespec){ .tv_nsec = 100 * 1000 * 1000 }, NULL);
	assert_int_equal(mdl_app(&c, "sandgate-test", &app, NULL, &err), SG_OK);
	free(app);
	assert_int_equal(atomic_load(&c.auth_fetches), 2);
	assert_true(c.auth_exp > exp0);
	/* Before the old one expired, and no call was ever refused. */
	assert_true((int64_t)time(NULL) < exp0);
	assert_int_equal(logged("AuthTokenGet", NULL), 2);
	log = admin("GET", "/__fake/log", NULL);
	json_array_foreach(log, i, v)
		assert_int_equal(json_integer_value(json_object_get(v, "status")), 0);
	json_decref(log);
	json_decref(admin("POST", "/__fake/token-ttl", "{\"auth_s\": 3600}"));
	mdl_client_release(&c);
}

/*
 * An image id longer than any Modal gives today: the build is still
 * joined with the whole id, and the image is the one the fake made (the
 * join's request holds the id, so nothing may bound it but the id).
 */
static void test_long_image_id(void **state)
{
	struct mdl_client c;
	struct sg_errinfo err = { 0 };
	char *app = NULL, *image = NULL;
	json_t *st, *im;
	size_t i, found = 0;

	(void)state;
	json_decref(admin("POST", "/__fake/image-id-pad", "{\"n\": 4000}"));
	json_decref(admin("POST", "/__fake/log/clear", NULL));
	client(&c);
	assert_int_equal(mdl_app(&c, "sandgate-test", &app, NULL, &err), SG_OK);
	/* A reference of its own: a new image, built, so its build is joined. */
	assert_int_equal(mdl_image(&c, app, "busybox:long-image-id", 60000, &image, NULL, &err),
			 SG_OK);
	json_decref(admin("POST", "/__fake/image-id-pad", "{\"n\": 0}"));
	assert_true(logged("ImageJoinStreaming", NULL) >= 1);
	assert_int_equal(strlen(image), strlen("im-") + 22 + 4000);
	st = admin("GET", "/__fake/state", NULL);
	json_array_foreach(json_object_get(st, "images"), i, im)
		found += strcmp(json_string_value(json_object_get(im, "id")), image) == 0;
	json_decref(st);
	assert_int_equal(found, 1);
	free(image);
	free(app);
	mdl_client_release(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_creds),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_lifecycle),
		cmocka_unit_test(test_faults),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_token_refresh),
		cmocka_unit_test(test_long_image_id),
	};

	return cmocka_run_group_tests(tests, start_fake, stop_fake);
}
