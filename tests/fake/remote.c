/*
 * remote.c - `fake_remote`, the toy cloud backend of adapters/README.md's
 * walk-through: a whole remote adapter on the driver (adapters/remote.h),
 * whose provider is a directory on this host instead of an HTTP API.
 *
 * The toy provider ("the cloud") is the directory $SG_FAKE_URL, or
 * /tmp/sg-fake-cloud-<pid> (one process's own).  A sandbox is a
 * subdirectory named as the driver names an identity's sandbox
 * (sg_cloud_name): tags.json holds its tags (cloudkit.h) and its state,
 * home/ is the HOME its commands see.  "Running a command in the sandbox",
 * the provider's one call the driver builds everything on, is sh -c on
 * this host with the request's variables and that HOME: so sandgate's
 * files land in home/.sandgate exactly as on a cloud, sg-helper is
 * installed there through the installer, and every exec goes through
 * sg-helper job as on Vercel.  Commands are not confined (the fake's rule).
 *
 * Faults and counters are the fake's (fake.h): lost makes the sandbox gone
 * (lookups say so, execs meet it), provision_fail fails after the create
 * (the driver must remove what it made), the delays are cancellable.
 */
#define _GNU_SOURCE /* asprintf */
#include "tests/fake/fake.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adapters/cloud.h"
#include "adapters/hostutil.h"
#include "adapters/remote.h"
#include "base/fsutil.h"
#include "base/limits.h"
#include "base/strv.h"

#define TOY_SCRIPT_MS 60000          /* a set-up or install script, at most */
#define TOY_KILL_MS 15000            /* a kill after a cancel */
#define TOY_WAIT_MS 20000            /* a detached start's wait (the job's --wait) */
#define TOY_TRIP_SLACK_MS 10000      /* a trip past its command's own timeout */
#define TOY_REPLY_MAX (256 * SG_KiB) /* what our own scripts print, at most */
#define TOY_INLINE_MAX (96 * SG_KiB) /* one variable: a part of stdin, the job line */

/* The env: the driver's fields first (struct sg_env first in them). */
struct toy_env {
	struct sg_remote rm;
	char *cloud; /* the provider's directory: the "client" open() makes */
	bool own;    /* cloud is this process's default, gone when empty */
};

/* ---- The provider: a directory of sandboxes ---------------------------- */

/* cloud/<id>[/<leaf>] (new), or NULL. */
static char *toy_path(const struct toy_env *te, const char *id, const char *leaf)
{
	char *p = NULL;

	if (asprintf(&p, "%s/%s%s%s", te->cloud, id, leaf ? "/" : "", leaf ? leaf : "") < 0)
		return NULL;
	return p;
}

/* The sandbox's record {"id", "state", "tags"} (new) into *got, or NOT_FOUND. */
static sg_err toy_lookup(struct sg_remote *rm, const char *id, json_t **got,
			 struct sg_cancel *cancel, struct sg_errinfo *err)
{
	/* An operator's id is a name in the cloud, never a path out of it. */
	char *path = id[0] == '.' || strchr(id, '/') ? NULL
						      : toy_path((struct toy_env *)rm, id, "tags.json");

	(void)cancel;
	*got = NULL;
	if (!sg_fake.lost && path)
		*got = json_load_file(path, 0, NULL);
	free(path);
	if (!*got)
		return sg_err_set(err, SG_E_NOT_FOUND, "fake: no sandbox %s", id);
	return SG_OK;
}

static sg_err toy_save(struct toy_env *te, const char *id, json_t *rec, struct sg_errinfo *err)
{
	char *path = toy_path(te, id, "tags.json");
	sg_err rc = SG_OK;

	if (!path || json_dump_file(rec, path, JSON_COMPACT))
		rc = sg_err_set(err, SG_E_PROVIDER, "fake: cannot record sandbox %s", id);
	free(path);
	return rc;
}

static const char *toy_tag(const json_t *got, const char *key)
{
	return json_string_value(json_object_get(json_object_get(got, "tags"), key));
}

/* Create the identity's sandbox, tagged; one of the same name is taken. */
static sg_err toy_create(struct sg_remote *rm, json_t **got, struct sg_cancel *cancel,
			 struct sg_errinfo *err)
{
	struct toy_env *te = (struct toy_env *)rm;
	struct sg_env *env = &rm->base;
	struct sg_cloud_tags t;
	char create_id[33], *home = toy_path(te, rm->name, "home");
	json_t *tags = json_object();
	sg_err rc = SG_OK;

	if (!home || !tags) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (sg_mkdir_p(home, 0700) != 0) {
		rc = sg_err_set(err, SG_E_PROVIDER, "fake: cannot create sandbox %s", rm->name);
		goto out;
	}
	sg_cloud_random_hex(create_id, 16);
	sg_cloud_tags_fill(env, create_id, &t);
	for (size_t i = 0; i < t.n; i++)
		json_object_set_new(tags, t.key[i], json_string(t.value[i]));
	*got = json_pack("{s:s, s:s, s:O}", "id", rm->name, "state", "running", "tags", tags);
	rc = *got ? toy_save(te, rm->name, *got, err) : sg_err_set(err, SG_E_INTERNAL,
								  "out of memory");
	if (!rc) {
		rm->fresh = true;
		snprintf(env->id, sizeof(env->id), "%s", rm->name);
	}
out:
	(void)cancel;
	json_decref(tags);
	free(home);
	return rc;
}

/* Remove sandbox id and everything in it. */
static sg_err toy_remove(struct sg_remote *rm, const char *id, struct sg_cancel *cancel,
			 struct sg_errinfo *err)
{
	char *dir = toy_path((struct toy_env *)rm, id, NULL);
	sg_err rc = dir ? sg_host_remove(dir, err) : sg_err_set(err, SG_E_INTERNAL, "out of memory");

	(void)cancel;
	free(dir);
	return rc;
}

/* Teardown's KEEP: the sandbox is marked stopped, its files kept. */
static sg_err toy_keep(struct sg_remote *rm, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	json_t *got = NULL;
	sg_err rc = toy_lookup(rm, rm->base.id, &got, cancel, err);

	if (!rc)
		json_object_set_new(got, "state", json_string("stopped"));
	if (!rc)
		rc = toy_save((struct toy_env *)rm, rm->base.id, got, err);
	json_decref(got);
	return rc;
}

/* The one page of p's sandboxes: every record tagged with its name. */
static sg_err toy_list_page(struct sg_remote *rm, const struct sg_profile *p, const char *cursor,
			    json_t **items, char **next, struct sg_cancel *cancel,
			    struct sg_errinfo *err)
{
	DIR *d = opendir(((struct toy_env *)rm)->cloud);
	struct dirent *de;

	(void)cursor;
	*next = NULL;
	*items = json_array();
	while (d && *items && (de = readdir(d)) != NULL) {
		json_t *got = NULL;
		struct sg_errinfo none = { 0 };
		const char *prof;

		if (de->d_name[0] == '.' || toy_lookup(rm, de->d_name, &got, cancel, &none))
			continue;
		prof = toy_tag(got, SG_CLOUD_TAG_PROFILE);
		if (prof && strcmp(prof, p->name) == 0)
			json_array_append(*items, got);
		json_decref(got);
	}
	if (d)
		closedir(d);
	return *items ? SG_OK : sg_err_set(err, SG_E_INTERNAL, "out of memory");
}

static const char *toy_get(const void *src, const char *key)
{
	return toy_tag(src, key);
}

static bool toy_info(const json_t *item, struct sg_env_info *info)
{
	const char *m = toy_tag(item, SG_CLOUD_TAG_MANAGED);

	if (!m || strcmp(m, SG_CLOUD_MANAGER) != 0)
		return false;
	sg_cloud_info(json_string_value(json_object_get(item, "id")),
		      json_string_value(json_object_get(item, "state")), toy_get, item, info);
	return true;
}

/* ---- The provider's one command call ----------------------------------- */

/*
 * Run argv in the sandbox, as a provider's "run a command" request: the
 * variables vars and the sandbox's HOME, nothing of ours; stdout into
 * reply (at most its max), whatever the exit status.  SG_E_WORKSPACE_LOST
 * when the sandbox is gone.
 */
static sg_err toy_run(struct toy_env *te, const char *const *argv, json_t *vars,
		      int64_t timeout_ms, struct sg_buf *reply, struct sg_cancel *cancel,
		      struct sg_errinfo *err)
{
	struct sg_remote *rm = &te->rm;
	struct sg_strv envp = SG_STRV_INIT;
	struct sg_exec_result r;
	struct sg_child c = { .argv = argv, .cwd = "/", .timeout_ms = timeout_ms };
	char *home = toy_path(te, rm->base.id, "home");
	json_t *got = NULL, *v;
	const char *k;
	sg_err rc = toy_lookup(rm, rm->base.id, &got, cancel, err);

	sg_exec_result_init(&r, reply->max);
	if (rc) {
		rc = sg_err_set(err, SG_E_WORKSPACE_LOST, "fake: sandbox %s is gone", rm->base.id);
		goto out;
	}
	rc = home ? sg_strv_addf(&envp, "HOME=%s", home) : SG_E_INTERNAL;
	if (!rc)
		rc = sg_strv_add(&envp, "PATH=/usr/local/bin:/usr/bin:/bin");
	json_object_foreach(vars, k, v)
		if (!rc)
			rc = sg_strv_addf(&envp, "%s=%s", k, json_string_value(v));
	if (rc) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	c.envp = sg_strv_get(&envp);
	rc = sg_exec_run(&c, &r, cancel, err);
	if (!rc && sg_buf_add(reply, r.out.p, r.out.len))
		rc = sg_err_set(err, SG_E_TOO_LARGE, "fake: the command's reply is too long");
out:
	sg_exec_result_release(&r);
	sg_strv_release(&envp);
	json_decref(got);
	free(home);
	return rc;
}

/* A short shell script with vars as its variables: *out (new) what it printed. */
static sg_err toy_script(struct sg_remote *rm, const char *script, json_t *vars, char **out,
			 struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_buf b = SG_BUF_INIT(TOY_REPLY_MAX);
	sg_err rc = toy_run((struct toy_env *)rm, (const char *[]){ "sh", "-c", script, NULL },
			    vars, TOY_SCRIPT_MS, &b, cancel, err);

	*out = rc ? NULL : sg_buf_take(&b, NULL);
	sg_buf_release(&b);
	return rc;
}

/* Write data to path in the sandbox, made with mode. */
static sg_err toy_upload(struct sg_remote *rm, const char *path, const void *data, size_t len,
			 unsigned mode, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
	sg_err rc = SG_OK;

	(void)rm;
	(void)cancel;
	if (fd < 0 || write(fd, data, len) != (ssize_t)len)
		rc = sg_err_set(err, SG_E_PROVIDER, "fake: cannot write %s", path);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* One request of a job (remote.h): sh -c its start or its attach. */
static enum sg_job_trip toy_trip(struct sg_remote *rm, struct sg_remote_job *j, bool attach,
				 struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const struct sg_exec *x = j->x;
	int64_t ms = x->flags & SG_EXEC_DETACHES ? TOY_WAIT_MS + TOY_TRIP_SLACK_MS
		     : x->timeout_ms > 0	    ? x->timeout_ms + TOY_TRIP_SLACK_MS
						    : 0;
	sg_err rc = toy_run((struct toy_env *)rm,
			    (const char *[]){ "sh", "-c", attach ? SG_JOB_EVAL : j->command, NULL },
			    attach ? j->attach : j->start, ms, &j->reply, cancel, err);

	if (rc == SG_E_WORKSPACE_LOST)
		return SG_JOB_TRIP_FATAL;
	return rc ? SG_JOB_TRIP_FAILED : SG_JOB_TRIP_REPLY;
}

/* Give up on the job of prefix dir: it never starts, or it is killed. */
static void toy_kill(struct sg_remote *rm, const char *dir)
{
	struct sg_buf b = SG_BUF_INIT(TOY_REPLY_MAX);
	struct sg_errinfo err = { 0 };
	json_t *vars = json_object();

	/* A fresh wait: the caller's token has usually fired. */
	if (!vars || toy_run((struct toy_env *)rm,
			     (const char *[]){ rm->base.helper, "job", "--dir", dir, "--kill", NULL },
			     vars, TOY_KILL_MS, &b, NULL, &err))
		fprintf(stderr, "fake: sandbox %s: a command may still run: %s\n", rm->base.id,
			err.msg);
	json_decref(vars);
	sg_buf_release(&b);
}

/* ---- Set-up: sandgate's directories, sg-helper and the probe ----------- */

/* The installer's native transfer (install.h): the program copied to path. */
static sg_err toy_install_upload(void *ctx, const char *path, int fd, struct sg_cancel *cancel,
				 struct sg_errinfo *err)
{
	struct sg_helper_bin b = { .fd = fd };
	sg_err rc;

	b.size = lseek(fd, 0, SEEK_END);
	rc = b.size < 0 ? sg_err_set(err, SG_E_INTERNAL, "cannot size sg-helper")
			: sg_helper_bin_load(&b, err);
	if (!rc)
		rc = toy_upload(ctx, path, b.data, (size_t)b.size, 0600, cancel, err);
	free(b.data);
	return rc;
}

/* The one set-up script (cloud.h), then sg-helper installed if it was not there. */
static sg_err toy_setup(struct sg_remote *rm, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_env *env = &rm->base;
	struct sg_helper_bin bin = { .fd = -1 };
	struct sg_install_cost cost = { 0 };
	struct sg_install in = { .ctx = rm, .dir = "/tmp", .nonce = rm->nonce,
				 .run = sg_remote_install_run, .upload = toy_install_upload };
	char *reply = NULL;
	json_t *vars = NULL;
	sg_err rc = sg_helper_bin_open(env->helper_host, &bin, err);

	if (!rc && !(vars = sg_cloud_setup_vars(env->root, bin.sha, 1440, NULL, NULL, 0)))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (!rc)
		rc = toy_script(rm, sg_cloud_setup_sh, vars, &reply, cancel, err);
	if (bin.fd >= 0)
		rc = sg_remote_setup_read(rm, rc, reply, false, &in, &bin, &cost, cancel, err);
	sg_helper_bin_close(&bin);
	json_decref(vars);
	free(reply);
	return rc;
}

/* ---- The client: the cloud's directory --------------------------------- */

static sg_err toy_open(struct sg_remote *rm, const struct sg_profile *p, struct sg_errinfo *err)
{
	struct toy_env *te = (struct toy_env *)rm;
	const char *url = sg_profile_env(p, "SG_FAKE_URL", NULL);

	te->own = !url;
	if (url ? !(te->cloud = strdup(url))
		: asprintf(&te->cloud, "/tmp/sg-fake-cloud-%d", (int)getpid()) < 0) {
		te->cloud = NULL;
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	if (sg_mkdir_p(te->cloud, 0700))
		return sg_err_set(err, SG_E_UNAVAILABLE, "fake: cannot reach the cloud %s",
				  te->cloud);
	return SG_OK;
}

static void toy_close(struct sg_remote *rm)
{
	struct toy_env *te = (struct toy_env *)rm;

	/* Only an empty directory goes: another session's sandbox keeps it. */
	if (te->own && te->cloud)
		rmdir(te->cloud);
	free(te->cloud);
	te->cloud = NULL;
}

static const struct sg_remote_ops toy_ops = {
	.provider = "the fake cloud",
	.inline_max = TOY_INLINE_MAX,
	.stdin_vars = SG_MiB,
	.relays = true,
	.relay_wait_ms = TOY_WAIT_MS,
	.fails = 1,
	.kill_unseen = true,
	.list_pages = 1,
	.trip = toy_trip,
	.kill = toy_kill,
	.upload = toy_upload,
	.script = toy_script,
	.setup = toy_setup,
	.keep = toy_keep,
	.create = toy_create,
	.env_size = sizeof(struct toy_env),
	.open = toy_open,
	.close = toy_close,
	.lookup = toy_lookup,
	.tag = toy_tag,
	.remove = toy_remove,
	.list_page = toy_list_page,
	.info = toy_info,
};

SG_REMOTE_OPERATOR(toy, &toy_ops)

/* ---- The adapter's own methods ------------------------------------------ */

/* The identity's sandbox: looked up, else created (the driver's rules). */
static sg_err toy_obtain(struct toy_env *te, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_remote *rm = &te->rm;
	json_t *got = NULL;
	bool made = false;
	const char *who;
	sg_err rc = toy_lookup(rm, rm->name, &got, cancel, err);

	if (rc == SG_E_NOT_FOUND) {
		sg_err_clear(err);
		rc = sg_remote_create(rm, rm->name, &got, &made, cancel, err);
	} else if (!rc) {
		who = toy_tag(got, SG_CLOUD_TAG_IDENTITY);
		/* A name is the identity's: never attach to another's sandbox. */
		if (!who || strcmp(who, rm->base.identity) != 0)
			rc = sg_err_set(err, SG_E_PERMISSION, "fake: sandbox %s is not this identity's",
					rm->name);
		rm->base.resumed = true;
		snprintf(rm->base.id, sizeof(rm->base.id), "%s", rm->name);
		json_object_set_new(got, "state", json_string("running"));
		if (!rc)
			rc = toy_save(te, rm->name, got, err);
	}
	json_decref(got);
	return rc;
}

static sg_err toy_provision(struct sg_env *env, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct toy_env *te = (struct toy_env *)env;
	sg_err rc;

	atomic_fetch_add(&sg_fake.provisions, 1);
	rc = sg_remote_init(&te->rm, &toy_ops, err);
	if (!rc)
		rc = sg_remote_open(&te->rm, env->profile, err);
	if (!rc && sg_fake.provision_delay_ms) {
		rc = sg_cancel_sleep(cancel, sg_fake.provision_delay_ms);
		if (rc)
			sg_err_set(err, rc, "fake: provision was cancelled");
	}
	if (!rc && sg_fake.lost)
		rc = sg_err_set(err, SG_E_WORKSPACE_LOST, "fake: the environment of %s is gone",
				env->identity);
	if (!rc)
		rc = toy_obtain(te, cancel, err);
	if (!rc && sg_fake.provision_fail)
		rc = sg_err_set(err, (sg_err)atomic_load(&sg_fake.provision_fail),
				"fake: provision fails by request");
	if (!rc)
		rc = sg_remote_setup(&te->rm, te->rm.name, cancel, err);
	if (!rc && !(env->facts = json_pack("{s:s, s:s}", "mechanism", "fake",
					    "safety_class", "none")))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	/* A sandbox this provision made is removed, or left on record. */
	sg_remote_failed(&te->rm, rc, cancel);
	return rc;
}

static sg_err toy_exec(struct sg_env *env, const struct sg_exec *x, struct sg_exec_result *out,
		       struct sg_cancel *cancel, struct sg_errinfo *err)
{
	int n = atomic_fetch_add(&sg_fake.execs, 1) + 1;

	if (sg_fake.exec_fail_at == n) {
		sg_exec_result_reset(out);
		return sg_err_set(err, atomic_load(&sg_fake.exec_fail_code)
					       ? (sg_err)atomic_load(&sg_fake.exec_fail_code)
					       : SG_E_UNAVAILABLE,
				  "fake: exec call %d fails by request", n);
	}
	return sg_remote_exec(env, x, out, cancel, err);
}

static sg_err toy_teardown(struct sg_env *env, enum sg_fate fate, struct sg_cancel *cancel,
			   struct sg_errinfo *err)
{
	sg_err rc = SG_OK;

	atomic_fetch_add(&sg_fake.teardowns, 1);
	if (sg_fake.teardown_delay_ms)
		rc = sg_cancel_sleep(cancel, sg_fake.teardown_delay_ms);
	if (rc) {
		atomic_fetch_add(&sg_fake.teardown_cancelled, 1);
		return sg_err_set(err, rc, "fake: teardown ran over its budget");
	}
	if (fate == SG_FATE_REMOVE)
		atomic_fetch_add(&sg_fake.removed, 1);
	return sg_remote_teardown(env, fate, cancel, err);
}

static void toy_release(struct sg_env *env)
{
	atomic_fetch_add(&sg_fake.releases, 1);
	sg_remote_release(&((struct toy_env *)env)->rm);
	sg_env_release_base(env);
}

const struct sg_adapter sg_adapter_fake_remote = {
	.name = "fake_remote",
	.caps = SG_CAP_LIST,
	.env_size = sizeof(struct toy_env),
	.fields = sg_fake_fields,
	.validate = sg_fake_validate,
	.provision = toy_provision,
	.exec = toy_exec,
	.teardown = toy_teardown,
	.list = toy_list,
	.destroy = toy_destroy,
	.release = toy_release,
};
