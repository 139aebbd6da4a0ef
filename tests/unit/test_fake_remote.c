/*
 * test_fake_remote.c - the walk-through's toy cloud backend (tests/fake/
 * remote.c, adapters/README.md) does what the recipe promises, through
 * the remote driver alone: a sandbox made and tagged, sg-helper installed
 * once and found again on resume, commands run through sg-helper job with
 * their stdin, exit codes and timeouts, keep and remove, an operator's
 * list and destroy by the tags (and never of a sandbox sandgate did not
 * make), and nothing left behind by a provision that fails.
 */
#define _GNU_SOURCE /* asprintf */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/exec.h"
#include "adapters/hostutil.h"
#include "base/fsutil.h"
#include "config/config.h"
#include "tests/fake/fake.h"

#define A (&sg_adapter_fake_remote)

static struct {
	char dir[64];   /* this test's scratch directory */
	char cloud[96]; /* $SG_FAKE_URL: the toy provider */
	char root[96];  /* binding.root */
	struct sg_config *cfg;
	struct sg_profile *p;
} F;

static int setup(void **state)
{
	char path[128];
	FILE *f;
	struct sg_errinfo err = { 0 };

	(void)state;
	snprintf(F.dir, sizeof(F.dir), "/tmp/sg-test-toy-XXXXXX");
	assert_non_null(mkdtemp(F.dir));
	snprintf(F.cloud, sizeof(F.cloud), "%s/cloud", F.dir);
	snprintf(F.root, sizeof(F.root), "%s/root", F.dir);
	assert_int_equal(mkdir(F.root, 0700), 0);
	setenv("SG_FAKE_URL", F.cloud, 1);
	snprintf(path, sizeof(path), "%s/config.json", F.dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("{\"profiles\": {\"toy\": {\"backend\": \"fake_remote\"}}}", f);
	fclose(f);
	assert_int_equal(sg_config_load(path, &F.cfg, &err), SG_OK);
	assert_int_equal(sg_config_profile(F.cfg, "toy", NULL, &F.p, &err), SG_OK);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	sg_profile_free(F.p);
	sg_config_free(F.cfg);
	sg_host_rm_tree(F.dir);
	unsetenv("SG_FAKE_URL");
	return 0;
}

/* A new env for identity, provisioned: its code; *out to release with down(). */
static sg_err up(const char *identity, bool require, struct sg_env **out, struct sg_errinfo *err)
{
	struct sg_env *env = calloc(1, A->env_size);

	assert_non_null(env);
	env->ad = A;
	env->profile = F.p;
	env->root = F.root;
	env->session = "s1";
	env->identity = identity;
	env->state_dir = F.dir;
	env->helper_host = getenv("SG_HELPER");
	env->require_existing = require;
	env->known = true;
	*out = env;
	return A->provision(env, NULL, err);
}

static void down(struct sg_env *env, enum sg_fate fate)
{
	struct sg_errinfo err = { 0 };

	if (fate != SG_FATE_DETACH)
		assert_int_equal(A->teardown(env, fate, NULL, &err), SG_OK);
	A->release(env);
	free(env);
}

/* The sandbox's directory in the toy cloud, for env's id. */
static void box(const struct sg_env *env, const char *leaf, char *out, size_t n)
{
	snprintf(out, n, "%s/%s%s%s", F.cloud, env->id, leaf ? "/" : "", leaf ? leaf : "");
}

static int count_cb(const struct sg_env_info *info, void *payload)
{
	int *n = payload;

	assert_string_equal(info->profile, "toy");
	(*n)++;
	return 0;
}

static int listed(void)
{
	struct sg_errinfo err = { 0 };
	int n = 0;

	assert_int_equal(A->list(F.p, F.dir, count_cb, &n, NULL, &err), SG_OK);
	return n;
}

static void run(struct sg_env *env, const char *script, const char *in, int64_t timeout_ms,
		struct sg_exec_result *r)
{
	static const char *const envp[] = { "PATH=/usr/local/bin:/usr/bin:/bin", NULL };
	const char *argv[] = { "/bin/sh", "-c", script, NULL };
	struct sg_exec x = { .argv = argv, .envp = envp, .max_output = 1 << 16,
			     .stdin_data = in, .stdin_len = in ? strlen(in) : 0,
			     .timeout_ms = timeout_ms };
	struct sg_errinfo err = { 0 };
	sg_err rc = A->exec(env, &x, r, NULL, &err);

	if (rc)
		print_message("exec failed: %s\n", err.msg);
	assert_int_equal(rc, SG_OK);
}

/* Made, tagged, the helper installed; commands run; kept, resumed, removed. */
static void test_lifetime(void **state)
{
	struct sg_errinfo err = { 0 };
	struct sg_exec_result r;
	struct sg_env *env;
	char path[256];
	struct stat st;

	(void)state;
	sg_fake_reset();
	assert_int_equal(up("alice", false, &env, &err), SG_OK);
	assert_false(env->resumed);
	box(env, "tags.json", path, sizeof(path));
	assert_int_equal(stat(path, &st), 0);
	/* sandgate's files live in the sandbox's HOME, as on a cloud. */
	box(env, "home/.sandgate", path, sizeof(path));
	assert_non_null(env->helper);
	assert_int_equal(strncmp(env->helper, path, strlen(path)), 0);
	assert_int_equal(access(env->helper, X_OK), 0);
	assert_int_equal(listed(), 1);

	sg_exec_result_init(&r, 1 << 16);
	run(env, "cat; echo \" in $PWD\"; exit 3", "piped", 0, &r);
	assert_int_equal(r.exit_code, 3);
	assert_non_null(strstr(r.out.p, "piped in "));
	assert_non_null(strstr(r.out.p, F.root));
	run(env, "sleep 30", NULL, 300, &r);
	assert_true(r.timed_out);
	sg_exec_result_release(&r);
	down(env, SG_FATE_KEEP);

	/* The same identity's sandbox again: resumed, sg-helper found, not sent. */
	assert_int_equal(up("alice", true, &env, &err), SG_OK);
	assert_true(env->resumed);
	assert_non_null(env->helper);
	box(env, NULL, path, sizeof(path));
	down(env, SG_FATE_REMOVE);
	assert_int_not_equal(stat(path, &st), 0);
	assert_int_equal(listed(), 0);
	assert_int_equal(sg_fake.provisions, 2);
	assert_int_equal(sg_fake.releases, 2);
}

/* A binding that requires an existing workspace finds none: lost, nothing made. */
static void test_require_existing(void **state)
{
	struct sg_errinfo err = { 0 };
	struct sg_env *env;

	(void)state;
	assert_int_equal(up("bob", true, &env, &err), SG_E_WORKSPACE_LOST);
	down(env, SG_FATE_DETACH);
	assert_int_equal(listed(), 0);
}

/* A provision that fails after the create removes the sandbox it made. */
static void test_failed_provision_leaves_nothing(void **state)
{
	struct sg_errinfo err = { 0 };
	struct sg_env *env;

	(void)state;
	sg_fake_reset();
	sg_fake.provision_fail = SG_E_PROVIDER;
	assert_int_equal(up("carol", false, &env, &err), SG_E_PROVIDER);
	assert_false(env->may_remain);
	down(env, SG_FATE_DETACH);
	sg_fake_reset();
	assert_int_equal(listed(), 0);
}

/* An operator destroys sandgate's sandboxes by id, and nothing else. */
static void test_destroy(void **state)
{
	struct sg_errinfo err = { 0 };
	struct sg_env *env;
	char path[256], id[128];
	FILE *f;

	(void)state;
	assert_int_equal(up("dave", false, &env, &err), SG_OK);
	snprintf(id, sizeof(id), "%s", env->id);
	down(env, SG_FATE_DETACH);
	assert_int_equal(A->destroy(F.p, F.dir, "../x", NULL, &err), SG_E_NOT_FOUND);
	/* A sandbox that does not say it is sandgate's stays. */
	snprintf(path, sizeof(path), "%s/stranger", F.cloud);
	assert_int_equal(sg_mkdir_p(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/stranger/tags.json", F.cloud);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("{\"id\": \"stranger\", \"state\": \"running\", \"tags\": {}}", f);
	fclose(f);
	assert_int_equal(A->destroy(F.p, F.dir, "stranger", NULL, &err), SG_E_PERMISSION);
	assert_int_equal(access(path, F_OK), 0);
	assert_int_equal(listed(), 1);
	assert_int_equal(A->destroy(F.p, F.dir, id, NULL, &err), SG_OK);
	assert_int_equal(listed(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lifetime),
		cmocka_unit_test(test_require_existing),
		cmocka_unit_test(test_failed_provision_leaves_nothing),
		cmocka_unit_test(test_destroy),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
