/*
 * fake.c - the fake adapter (fake.h).
 */
#define _GNU_SOURCE /* asprintf */
#include "tests/fake/fake.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/exec.h"
#include "base/fsutil.h"
#include "base/slug.h"

struct sg_fake sg_fake;

struct fake_env {
	struct sg_env base;
	char *dir; /* <state_dir>/fake/<slug>: everything but the workspace */
};

const struct sg_field sg_fake_fields[] = {
	SG_FIELD("image"), SG_FIELD("snapshot"), SG_FIELD("workspace"),
	SG_FIELD("user"), SG_FIELD("host_workspace"), SG_FIELD("host"),
	SG_FIELD("identity_file"), SG_FIELD("known_hosts_file"),
	SG_FIELD("persistent"), SG_FIELD("shared"), SG_FIELD("mount_read_only"),
	SG_FIELD_BEST_EFFORT("network"), SG_FIELD_BEST_EFFORT("cpus"),
	SG_FIELD_BEST_EFFORT("memory_mb"), SG_FIELD("port"),
	SG_FIELD_OWN_INT("fake_knob", 1, 10),
	SG_FIELD_OWN_ENV("fake_token_env", "SG_FAKE_TOKEN", SG_FIELD_PROBE),
	SG_FIELD_ENV("SG_FAKE_URL", 0), SG_FIELDS_END,
};

void sg_fake_reset(void)
{
	memset(&sg_fake, 0, sizeof(sg_fake));
}

sg_err sg_fake_validate(const struct sg_profile *p, struct sg_errinfo *err)
{
	(void)p;
	(void)err;
	return SG_OK;
}

static int rm_entry(const char *path, const struct stat *st, int type,
		    struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return type == FTW_DP ? rmdir(path) : unlink(path);
}

static sg_err fake_provision(struct sg_env *env, struct sg_cancel *cancel,
			     struct sg_errinfo *err)
{
	struct fake_env *fe = (struct fake_env *)env;
	char *slug = sg_slug(env->identity);
	struct stat st;
	sg_err rc = SG_OK;

	atomic_fetch_add(&sg_fake.provisions, 1);
	if (!slug || asprintf(&fe->dir, "%s/fake/%s", env->state_dir, slug) < 0) {
		fe->dir = NULL;
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (sg_fake.provision_delay_ms) {
		rc = sg_cancel_sleep(cancel, sg_fake.provision_delay_ms);
		if (rc) {
			sg_err_set(err, rc, "fake: provision was cancelled");
			goto out;
		}
	}
	if (stat(fe->dir, &st) == 0)
		env->resumed = true;
	else if (env->require_existing || sg_fake.lost) {
		rc = sg_err_set(err, SG_E_WORKSPACE_LOST, "fake: the environment of %s is gone",
				env->identity);
		goto out;
	}
	if (asprintf(&env->ctl_dir, "%s/ctl", fe->dir) < 0) {
		env->ctl_dir = NULL;
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	{
		static const char *const subs[] = { "proc", "home", "tmp" };

		for (size_t i = 0; i < 3 && !rc; i++) {
			char *d = NULL;

			if (asprintf(&d, "%s/%s", env->ctl_dir, subs[i]) < 0 ||
			    sg_mkdir_p(d, 0700))
				rc = sg_err_set(err, SG_E_INTERNAL, "fake: cannot create %s",
						d ? d : subs[i]);
			free(d);
		}
	}
	if (!rc && sg_mkdir_p(env->root, 0755))
		rc = sg_err_set(err, SG_E_INTERNAL, "fake: cannot create %s: %s",
				env->root, strerror(errno));
	if (rc)
		goto out;
	snprintf(env->id, sizeof(env->id), "fake-%s", slug);
	if (sg_fake.provision_fail) {
		rc = sg_err_set(err, (sg_err)atomic_load(&sg_fake.provision_fail),
				"fake: provision fails by request");
		if (!env->resumed)
			nftw(fe->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		goto out;
	}
	env->helper = strdup(env->helper_host);
	env->host_root = strdup(env->root);
	env->host_ctl = strdup(env->ctl_dir);
	env->facts = json_pack("{s:s, s:s}", "mechanism", "fake", "safety_class", "none");
	if (!env->helper || !env->host_root || !env->host_ctl || !env->facts)
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
out:
	free(slug);
	return rc;
}

static sg_err fake_exec(struct sg_env *env, const struct sg_exec *x,
			struct sg_exec_result *out, struct sg_cancel *cancel,
			struct sg_errinfo *err)
{
	int n = atomic_fetch_add(&sg_fake.execs, 1) + 1;
	struct sg_child c = {
		.argv = x->argv,
		.envp = x->envp,
		.cwd = x->cwd ? x->cwd : env->root,
		.stdin_data = x->stdin_data,
		.stdin_len = x->stdin_len,
		.timeout_ms = x->timeout_ms,
		.merge = x->flags & SG_EXEC_MERGE,
		.detaches = x->flags & SG_EXEC_DETACHES,
	};

	sg_exec_result_reset(out);
	if (sg_fake.lost)
		return sg_err_set(err, SG_E_WORKSPACE_LOST, "fake: the environment %s is gone",
				  env->id);
	if (sg_fake.exec_fail_at == n)
		return sg_err_set(err, atomic_load(&sg_fake.exec_fail_code)
					       ? (sg_err)atomic_load(&sg_fake.exec_fail_code)
					       : SG_E_UNAVAILABLE,
				  "fake: exec call %d fails by request", n);
	return sg_exec_run(&c, out, cancel, err);
}

static sg_err fake_teardown(struct sg_env *env, enum sg_fate fate,
			    struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct fake_env *fe = (struct fake_env *)env;
	sg_err rc = SG_OK;

	atomic_fetch_add(&sg_fake.teardowns, 1);
	if (sg_fake.teardown_delay_ms) {
		rc = sg_cancel_sleep(cancel, sg_fake.teardown_delay_ms);
		if (rc) {
			atomic_fetch_add(&sg_fake.teardown_cancelled, 1);
			return sg_err_set(err, rc, "fake: teardown ran over its budget");
		}
	}
	if (fate == SG_FATE_REMOVE) {
		atomic_fetch_add(&sg_fake.removed, 1);
		if (fe->dir && nftw(fe->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) &&
		    errno != ENOENT)
			rc = sg_err_set(err, SG_E_INTERNAL, "fake: cannot remove %s", fe->dir);
	}
	return rc;
}

static void fake_release(struct sg_env *env)
{
	struct fake_env *fe = (struct fake_env *)env;

	atomic_fetch_add(&sg_fake.releases, 1);
	sg_env_release_base(env);
	free(fe->dir);
	fe->dir = NULL;
}

const struct sg_adapter sg_adapter_fake = {
	.name = "fake",
	.caps = SG_CAP_HOST_FS,
	.env_size = sizeof(struct fake_env),
	.fields = sg_fake_fields,
	.validate = sg_fake_validate,
	.provision = fake_provision,
	.exec = fake_exec,
	.teardown = fake_teardown,
	.release = fake_release,
};
