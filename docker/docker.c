/*
 * docker.c - the docker backend: one container per identity on a Docker
 * (or Podman) daemon reached over its unix socket (engine.h), on the
 * remote-adapter driver (adapters/remote.h).
 *
 * The container is made as the host makes its own (host-wire §9): every
 * capability dropped, no-new-privileges, a pids limit, tini as PID 1,
 * HOME=/tmp/wuu-home and `sleep infinity`, an unprivileged user (the
 * profile's, else host_workspace's owner, else nobody), cpus, memory_mb,
 * network none, host_workspace bound at binding.root (read-only with
 * mount_read_only), and labels: cloudkit.h's tags and the host's own
 * wuu.execution.identity.  A profile's `runtime` (runsc, crun, kata...)
 * must be one the daemon lists in GET /info, or the profile is refused
 * before anything is made; what runs is observed from inside at the
 * set-up (gVisor's kernel log, the kernel release), never taken from the
 * runtime's name.
 *
 * Its name is a function of the identity (cloudkit.h), so a session that
 * comes back (persistent, or shared) finds it: a stopped one is started
 * again, one that is gone is workspace_lost for a persistent identity.
 * Teardown KEEP stops it, REMOVE deletes it with its anonymous volumes.
 *
 * gVisor implements no Landlock, so on runsc the container's root file
 * system is read-only: the workspace (host_workspace, else an anonymous
 * volume) and /tmp (a volume: sandgate's directories, HOME, TMPDIR) are
 * its only writable places and IPC has no /dev/shm.  sg-helper checks
 * that at every `standard` command (helper/confine.c), so that mode runs
 * there; `read_only` needs Landlock and stays refused.  Docker takes an
 * archive only into a volume of such a container (dk_archive_dir).
 *
 * Commands run as every remote backend's do: one exec per job request
 * (POST /containers/{id}/exec, then /exec/{id}/start, its stream read as
 * it comes) running `sg-helper job`, stdin in variables or uploaded with
 * PUT /containers/{id}/archive.  sg-helper itself is sent the same way
 * (a tar whose entries Docker gives to the container's user, copyUIDGID)
 * before the set-up script installs it.
 */
#define _GNU_SOURCE /* asprintf */
#include "adapters/adapter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "adapters/cloud.h"
#include "adapters/cloudkit.h"
#include "adapters/install.h"
#include "adapters/remote.h"
#include "core/path.h"
#include "core/targz.h"
#include "base/cancel.h"
#include "base/limits.h"
#include "base/log.h"
#include "base/progress.h"
#include "docker/engine.h"

#define DK_PIDS_LIMIT 512             /* the host's --pids-limit */
/*
 * gVisor's: its Sentry's own threads and, on the ptrace platform, a stub
 * process per address space count against the container's host pids
 * limit; at 512, twelve background commands and their long polls made a
 * clone fail (EAGAIN), which the Sentry answers with a panic that ends
 * the container.
 */
#define DK_PIDS_LIMIT_GVISOR 4096
#define DK_DEFAULT_USER "65534:65534" /* nobody, when neither user nor host_workspace says */
#define DK_HOME "/tmp/wuu-home"       /* the host's HOME in its containers */
#define DK_TMP "/tmp"                 /* where sg-helper and sandgate's directories go */
#define DK_RO_RUNTIME "runsc"         /* the runtime whose containers get a read-only root */
#define DK_LABEL_HOST "wuu.execution.identity" /* the host's own label */
#define DK_INLINE_MAX (64 * SG_KiB)   /* one variable: far below Linux's 128 KiB per string */
#define DK_STDIN_VARS (512 * SG_KiB)  /* stdin in variables at most; beyond, an upload */
#define DK_WAIT_MS 2000               /* a detached job's wait */
#define DK_TRIP_SLACK_MS 30000        /* a trip's request beyond the command's timeout */
#define DK_STOP_S "2"                 /* seconds a stop waits before SIGKILL */
#define DK_SCRIPT_REPLY (SG_MiB)      /* a set-up script's reply (with the probe) */
#define DK_KILL_MS 10000

/* What the set-up sees of the kernel it runs on, before the shared script. */
#define DK_OBSERVE_SH                                                          \
	"printf 'dk_kernel=%s\\n' \"$(uname -r 2>/dev/null)\"\n"               \
	"case $(dmesg 2>/dev/null | head -n 3) in *'Starting gVisor'*) "         \
	"printf 'dk_gvisor=1\\n' ;; esac\n"

struct dk_env {
	struct sg_remote rm; /* first: its base is the env */
	struct dk_client cl;
	char user[64];       /* the container's user, uid:gid or a name */
	/*
	 * Its numeric ids ("uid:gid"), the owner of what is copied in; a name
	 * (by_name) is left to Docker to look up in the image (copyUIDGID).
	 */
	unsigned uid, gid;
	bool by_name;
	/* sg-helper, and where the archive put it before the start (fresh only) */
	struct sg_helper_bin bin;
	char *up, *mark;
	bool woke;           /* this provision started a stopped container */
	bool ro_root;        /* its root file system is read-only (DK_RO_RUNTIME) */
	char kernel[128];    /* the release commands see */
	bool gvisor;         /* gVisor's kernel log was seen inside */
	json_t *warnings;    /* the daemon's, at create (new) */
	struct sg_install_cost install;
};

static const struct sg_field dk_fields[] = {
	SG_FIELD("image"), SG_FIELD("workspace"), SG_FIELD("persistent"), SG_FIELD("shared"),
	SG_FIELD("network"), SG_FIELD("cpus"), SG_FIELD("memory_mb"), SG_FIELD("user"),
	SG_FIELD("host_workspace"), SG_FIELD("mount_read_only"),
	SG_FIELD_OWN_STRING("runtime"),
	/* The daemon's socket: never forwarded into commands. */
	SG_FIELD_ENV(DK_ENV_HOST, 0),
	SG_FIELDS_END,
};

static const char *dk_runtime(const struct sg_profile *p)
{
	return sg_profile_str(p, "runtime");
}

/* Is p's container made with a read-only root (see the top of the file)? */
static bool dk_wants_ro_root(const struct sg_profile *p)
{
	return dk_runtime(p) && strcmp(dk_runtime(p), DK_RO_RUNTIME) == 0;
}

/* ---- validate --------------------------------------------------------------- */

/*
 * Does the daemon list runtime?  GET /info; SG_E_UNAVAILABLE when it does
 * not, as when the daemon is down: this host cannot serve the profile now,
 * and a select profile falls back from it.
 */
static sg_err dk_runtime_check(struct dk_client *cl, const struct sg_profile *p,
			       struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const char *want = dk_runtime(p);
	struct dk_call c = { .path = "/info", .what = "asking the Docker daemon for its runtimes" };
	struct dk_reply r;
	sg_err rc;

	if (!want)
		return SG_OK;
	rc = dk_do(cl, &c, &r, cancel, err);
	if (!rc && r.status != 200)
		rc = dk_fail(&c, &r, SG_E_UNAVAILABLE, err);
	if (!rc && !json_object_get(json_object_get(r.json, "Runtimes"), want))
		rc = sg_err_set(err, SG_E_UNAVAILABLE,
				"field \"runtime\" (profile \"%s\"): the Docker daemon at %s has no runtime \"%.60s\" (it lists those in its daemon.json \"runtimes\"; docs/docker.md)",
				p->name, cl->socket, want);
	dk_reply_release(&r);
	return rc;
}

/*
 * The user commands run as: the profile's; else host_workspace's owner
 * (a writable one that is root's is refused, as local refuses it); else
 * nobody.
 */
static sg_err dk_user(const struct sg_profile *p, char *out, size_t n, struct sg_errinfo *err)
{
	struct stat st;

	if (p->user) {
		if (strlen(p->user) >= n || strpbrk(p->user, " \t\r\n"))
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "field \"user\" (profile \"%s\") is not a user Docker takes",
					  p->name);
		snprintf(out, n, "%s", p->user);
		return SG_OK;
	}
	if (!p->host_workspace) {
		snprintf(out, n, "%s", DK_DEFAULT_USER);
		return SG_OK;
	}
	if (stat(p->host_workspace, &st) != 0 || !S_ISDIR(st.st_mode))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "host_workspace %.200s (profile \"%s\") is not a directory",
				  p->host_workspace, p->name);
	if (st.st_uid == 0 && !p->mount_read_only)
		return sg_err_set(err, SG_E_UNSUPPORTED,
				  "host_workspace %.200s (profile \"%s\") belongs to root, and commands never run as root: chown it to the user they should run as, set \"user\", or set mount_read_only",
				  p->host_workspace, p->name);
	snprintf(out, n, "%u:%u", (unsigned)st.st_uid, (unsigned)st.st_gid);
	return SG_OK;
}

static sg_err dk_validate(const struct sg_profile *p, struct sg_errinfo *err)
{
	struct dk_client cl;
	char user[64];
	sg_err rc;

	if (!p->image)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "profile \"%s\": the docker backend needs \"image\"", p->name);
	if (p->network == SG_NET_ALLOW && !sg_profile_best_effort(p, "network"))
		return sg_err_set(err, SG_E_UNSUPPORTED,
				  "field \"network\" (profile \"%s\"): the docker backend has no allow list; use \"none\" or the daemon's default",
				  p->name);
	rc = dk_user(p, user, sizeof(user), err);
	if (!rc && dk_runtime(p)) {
		rc = dk_client_init(&cl, p, err);
		if (!rc)
			rc = dk_runtime_check(&cl, p, NULL, err);
		dk_client_release(&cl);
	}
	return rc;
}

/* ---- Commands --------------------------------------------------------------- */

/* Start container id (204, or 304: running already); a missing one is lost. */
static sg_err dk_start(struct dk_client *cl, const char *id, struct sg_cancel *cancel,
		       struct sg_errinfo *err)
{
	return dk_container(cl, "POST", id, "/start", NULL, (const long[]){ 204, 304, 0 },
			    SG_E_WORKSPACE_LOST, "starting the container", cancel, err);
}

/*
 * Run argv in the container, its stdout into out.  A container stopped
 * under us (the daemon restarted, an operator's stop) is started again
 * once when its files are kept; one that is gone is workspace_lost.
 */
static sg_err dk_run(struct dk_env *de, json_t *argv, json_t *vars, int64_t timeout_ms,
		     const char *stop_mark, struct sg_buf *out, struct sg_cancel *cancel,
		     struct sg_errinfo *err)
{
	struct dk_exec e = { .cmd = argv, .vars = vars, .timeout_ms = timeout_ms, .out = out,
			     .stop_mark = stop_mark };
	bool stopped = false;
	sg_err rc = SG_OK;

	for (int round = 0; round < 2; round++) {
		sg_buf_reset(out);
		sg_err_clear(err);
		rc = dk_exec(&de->cl, de->rm.base.id, &e, &stopped, cancel, err);
		if (rc == SG_E_NOT_FOUND)
			return sg_err_set(err, SG_E_WORKSPACE_LOST, "container %s is gone",
					  de->rm.base.id);
		if (!stopped || round > 0)
			return rc;
		sg_log_info("container %s is not running; starting it", de->rm.base.id);
		sg_err_clear(err);
		rc = dk_start(&de->cl, de->rm.base.id, cancel, err);
		if (rc)
			return rc;
	}
	return rc;
}

/* sh -c script with vars: *reply (new) what it printed. */
static sg_err dk_script(struct sg_remote *rm, const char *script, json_t *vars, char **reply,
			struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_buf out = SG_BUF_INIT(DK_SCRIPT_REPLY);
	json_t *argv = json_pack("[s, s, s]", "sh", "-c", script);
	sg_err rc;

	*reply = NULL;
	rc = argv ? dk_run((struct dk_env *)rm, argv, vars, DK_CALL_MS, NULL, &out, cancel, err)
		  : sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (!rc)
		*reply = sg_buf_take(&out, NULL);
	sg_buf_release(&out);
	json_decref(argv);
	return rc;
}

static sg_err dk_upload(struct sg_remote *rm, const char *path, const void *data, size_t len,
			unsigned mode, struct sg_cancel *cancel, struct sg_errinfo *err);

/* One job request (remote.h): the start or an attach, as one exec. */
static enum sg_job_trip dk_trip(struct sg_remote *rm, struct sg_remote_job *j, bool attach,
				struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const struct sg_exec *x = j->x;
	const char *text = attach ? SG_JOB_EVAL : j->command;
	struct sg_buf out = SG_BUF_INIT(x->max_output + SG_HELPER_STDERR + 64 * SG_KiB);
	int64_t trip_ms = -1; /* none: the cancel bounds it */
	char *file = NULL;
	json_t *argv;
	sg_err rc = SG_OK;

	/*
	 * Words too long for one argv string (Linux takes 128 KiB) travel as
	 * a script file, copied in first; copying it again is harmless.
	 */
	if (strlen(text) > DK_INLINE_MAX) {
		if (asprintf(&file, "%s.sh", j->dir) < 0)
			file = NULL;
		rc = file ? dk_upload(rm, file, text, strlen(text), 0600, cancel, err)
			  : sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	argv = file ? json_pack("[s, s]", "sh", file) : json_pack("[s, s, s]", "sh", "-c", text);
	free(file);
	if (rc) {
		json_decref(argv);
		return SG_JOB_TRIP_FAILED;
	}
	if (x->flags & SG_EXEC_DETACHES)
		trip_ms = DK_WAIT_MS + DK_TRIP_SLACK_MS;
	else if (x->timeout_ms > 0)
		trip_ms = x->timeout_ms + DK_TRIP_SLACK_MS;
	/* A start's job may outlive the exec's stream: stop at its last line. */
	rc = argv ? dk_run((struct dk_env *)rm, argv, attach ? j->attach : j->start, trip_ms,
			   j->linger && !attach ? j->mark : NULL, &out, cancel, err)
		  : sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (!rc && sg_buf_add(&j->reply, out.p, out.len))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	sg_buf_release(&out);
	json_decref(argv);
	if (rc == SG_E_WORKSPACE_LOST)
		return SG_JOB_TRIP_FATAL;
	return rc ? SG_JOB_TRIP_FAILED : SG_JOB_TRIP_REPLY;
}

/* Give up on the job of prefix dir: sg-helper job --kill, with a wait of its own. */
static void dk_kill(struct sg_remote *rm, const char *dir)
{
	struct dk_env *de = (struct dk_env *)rm;
	struct sg_buf out = SG_BUF_INIT(64 * SG_KiB);
	struct sg_errinfo err = { 0 };
	json_t *argv = json_pack("[s, s, s, s, s]", rm->base.helper, "job", "--dir", dir, "--kill");

	if (!argv || dk_run(de, argv, NULL, DK_KILL_MS, NULL, &out, NULL, &err))
		sg_log_warn("container %s: a command may still run: %s", rm->base.id, err.msg);
	sg_buf_release(&out);
	json_decref(argv);
}

/*
 * The directory an archive holding path is unpacked at: "/", or on a
 * read-only root the volume path lies in (Docker refuses a PUT elsewhere
 * there).  Names in the archive are relative to it.
 */
static const char *dk_archive_dir(const struct dk_env *de, const char *path)
{
	if (!de->ro_root)
		return "/";
	if (strncmp(path, DK_TMP "/", sizeof(DK_TMP)) == 0)
		return DK_TMP;
	if (sg_path_under(path, de->rm.base.root))
		return de->rm.base.root;
	return "/";
}

/* path's name in an archive unpacked at dir (dk_archive_dir's). */
static const char *dk_archive_name(const char *dir, const char *path)
{
	return path + strlen(dir) + (dir[1] != '\0');
}

/* PUT the n entries (a gzip'd tar, names relative to dir), given to the container's user. */
static sg_err dk_put(struct dk_env *de, const char *dir, struct sg_targz_entry *e, size_t n,
		     struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_buf tgz = SG_BUF_INIT(SG_MAX_FRAME * 8), q = SG_BUF_INIT(SG_PATH_MAX * 3);
	char *path = dk_path("/containers/", de->rm.base.id, "/archive");
	struct dk_call c = { .method = "PUT", .path = path, .raw_type = "application/x-tar",
			     .timeout_ms = DK_PULL_MS, .what = "copying files into the container" };
	struct dk_reply r = { 0 };
	sg_err rc;

	/* Docker keeps a tar's owners: the files are the commands' user's. */
	for (size_t i = 0; i < n; i++) {
		e[i].uid = de->uid;
		e[i].gid = de->gid;
	}
	rc = path && !sg_buf_adds(&q, "path=") && !sg_cloud_urlenc(&q, dir) &&
			     !(de->by_name && sg_buf_adds(&q, "&copyUIDGID=1"))
		     ? sg_targz(e, n, &tgz) : SG_E_INTERNAL;
	if (rc) {
		rc = sg_err_set(err, rc, "cannot pack %s/%s for the container", dir, e[0].name);
		goto out;
	}
	c.query = q.p;
	c.raw = tgz.p;
	c.raw_len = tgz.len;
	rc = dk_do(&de->cl, &c, &r, cancel, err);
	if (!rc && r.status != 200)
		rc = dk_fail(&c, &r, r.status == 404 ? SG_E_WORKSPACE_LOST : SG_OK, err);
	dk_reply_release(&r);
out:
	sg_buf_release(&tgz);
	sg_buf_release(&q);
	free(path);
	return rc;
}

/* The driver's upload (remote.h): one file, by archive. */
static sg_err dk_upload(struct sg_remote *rm, const char *path, const void *data, size_t len,
			unsigned mode, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const char *dir = dk_archive_dir((struct dk_env *)rm, path);
	struct sg_targz_entry e = { .name = dk_archive_name(dir, path), .mode = mode, .data = data,
				    .len = len };

	if (path[0] != '/')
		return sg_err_set(err, SG_E_INTERNAL, "%s is not an absolute path", path);
	return dk_put((struct dk_env *)rm, dir, &e, 1, cancel, err);
}

/* ---- The container ------------------------------------------------------------ */

/*
 * The container's mounts: host_workspace bound at the root, and with a
 * read-only root file system an anonymous volume at each place that stays
 * writable (removed with the container, kept while it is stopped).
 */
static json_t *dk_mounts(const struct dk_env *de)
{
	const struct sg_profile *p = de->rm.base.profile;
	json_t *m = json_array();

	if (m && p->host_workspace)
		json_array_append_new(m, json_pack("{s:s, s:s, s:s, s:b}", "Type", "bind", "Source",
						   p->host_workspace, "Target", de->rm.base.root,
						   "ReadOnly", p->mount_read_only));
	else if (m && de->ro_root)
		json_array_append_new(m, json_pack("{s:s, s:s}", "Type", "volume", "Target",
						   de->rm.base.root));
	if (m && de->ro_root)
		json_array_append_new(m, json_pack("{s:s, s:s}", "Type", "volume", "Target", DK_TMP));
	return m;
}

/* HostConfig: the host's docker run flags, the profile's limits and runtime. */
static json_t *dk_host_config(const struct dk_env *de)
{
	const struct sg_profile *p = de->rm.base.profile;
	json_t *hc = json_pack("{s:b, s:[s], s:[s], s:i, s:o}", "Init", 1, "CapDrop", "ALL",
			       "SecurityOpt", "no-new-privileges", "PidsLimit",
			       de->ro_root ? DK_PIDS_LIMIT_GVISOR : DK_PIDS_LIMIT,
			       "Mounts", dk_mounts(de));

	if (!hc)
		return NULL;
	if (de->ro_root) {
		json_object_set_new(hc, "ReadonlyRootfs", json_true());
		json_object_set_new(hc, "IpcMode", json_string("none"));
	}
	if (p->network == SG_NET_NONE)
		json_object_set_new(hc, "NetworkMode", json_string("none"));
	if (p->cpus > 0)
		json_object_set_new(hc, "NanoCpus", json_integer((json_int_t)(p->cpus * 1e9)));
	if (p->memory_mb > 0) {
		json_object_set_new(hc, "Memory", json_integer(p->memory_mb * SG_MiB));
		json_object_set_new(hc, "MemorySwap", json_integer(p->memory_mb * SG_MiB));
	}
	if (dk_runtime(p))
		json_object_set_new(hc, "Runtime", json_string(dk_runtime(p)));
	return hc;
}

static json_t *dk_create_body(const struct dk_env *de)
{
	const struct sg_env *env = &de->rm.base;
	struct sg_cloud_tags t;
	char create_id[17];
	json_t *labels = json_object(), *hc = dk_host_config(de);

	sg_cloud_random_hex(create_id, 8);
	sg_cloud_tags_fill(env, create_id, &t);
	for (size_t i = 0; labels && i < t.n; i++)
		json_object_set_new(labels, t.key[i], json_string(t.value[i]));
	if (labels)
		json_object_set_new(labels, DK_LABEL_HOST, json_string(env->identity));
	if (!labels || !hc) {
		json_decref(labels);
		json_decref(hc);
		return NULL;
	}
	return json_pack("{s:s, s:s, s:s, s:[s], s:[s], s:[s, s], s:o, s:o}", "Image",
			 env->profile->image, "User", de->user, "WorkingDir", env->root, "Env",
			 "HOME=" DK_HOME, "Entrypoint", "/bin/sh", "Cmd", "-c",
			 "mkdir -p -m 700 \"$HOME\" && exec sleep infinity", "Labels", labels,
			 "HostConfig", hc);
}

/* Pull image (POST /images/create), its progress on stderr; the stream's error, if any. */
struct dk_pull {
	char last[256];
	bool failed;
};

static sg_err dk_pull_feed(const char *data, size_t len, void *payload)
{
	struct dk_pull *pl = payload;
	const char *e = memmem(data, len, "\"error\"", 7);

	if (e) {
		pl->failed = true;
		snprintf(pl->last, sizeof(pl->last), "%.*s",
			 (int)(len - (size_t)(e - data) < 200 ? len - (size_t)(e - data) : 200), e);
	}
	sg_progress_update("pulling the image");
	return SG_OK;
}

static sg_err dk_pull(struct dk_env *de, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const char *image = de->rm.base.profile->image;
	struct sg_buf q = SG_BUF_INIT(SG_PATH_MAX);
	struct dk_pull pl = { .failed = false };
	struct dk_call c = { .method = "POST", .path = "/images/create", .timeout_ms = DK_PULL_MS,
			     .sink = dk_pull_feed, .sink_payload = &pl,
			     .what = "pulling the image" };
	struct dk_reply r = { 0 };
	sg_err rc;

	sg_log_info("image %s is not on the daemon; pulling it", image);
	if (sg_buf_adds(&q, "fromImage=") || sg_cloud_urlenc(&q, image)) {
		sg_buf_release(&q);
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	c.query = q.p;
	rc = dk_do(&de->cl, &c, &r, cancel, err);
	if (!rc && r.status != 200)
		rc = dk_fail(&c, &r, SG_E_UNAVAILABLE, err);
	else if (!rc && pl.failed)
		rc = sg_err_set(err, SG_E_UNAVAILABLE, "image %.200s could not be pulled: %s", image,
				pl.last);
	dk_reply_release(&r);
	sg_buf_release(&q);
	return rc;
}

/* GET /containers/{id}/json: *got (new); SG_E_NOT_FOUND when there is none. */
static sg_err dk_lookup(struct sg_remote *rm, const char *id, json_t **got,
			struct sg_cancel *cancel, struct sg_errinfo *err)
{
	char *path = dk_path("/containers/", id, "/json");
	struct dk_call c = { .path = path, .what = "looking up the container" };
	struct dk_reply r = { 0 };
	sg_err rc = path ? dk_do(&((struct dk_env *)rm)->cl, &c, &r, cancel, err)
			 : sg_err_set(err, SG_E_INTERNAL, "out of memory");

	*got = NULL;
	if (!rc && r.status == 404)
		rc = SG_E_NOT_FOUND;
	else if (!rc && (r.status != 200 || !json_is_object(r.json)))
		rc = dk_fail(&c, &r, SG_E_PROVIDER, err);
	if (!rc) {
		*got = r.json;
		r.json = NULL;
	}
	dk_reply_release(&r);
	free(path);
	return rc;
}

/* POST /containers/create?name=..., pulling the image once when it is missing. */
static sg_err dk_create_once(struct dk_env *de, json_t *body, bool *no_image,
			     struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_buf q = SG_BUF_INIT(SG_PATH_MAX);
	struct dk_call c = { .method = "POST", .path = "/containers/create", .body = body,
			     .what = "creating the container" };
	struct dk_reply r = { 0 };
	sg_err rc;

	*no_image = false;
	if (sg_buf_adds(&q, "name=") || sg_cloud_urlenc(&q, de->rm.name)) {
		sg_buf_release(&q);
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	c.query = q.p;
	rc = dk_do(&de->cl, &c, &r, cancel, err);
	if (!rc && r.status == 201) {
		de->rm.fresh = true;
		snprintf(de->rm.base.id, sizeof(de->rm.base.id), "%s", de->rm.name);
		de->warnings = json_incref(json_object_get(r.json, "Warnings"));
	} else if (!rc && r.status == 404 && strstr(r.message, "image")) {
		*no_image = true;
	} else if (!rc) {
		rc = dk_fail(&c, &r, r.status == 409 ? SG_E_PROVIDER : SG_OK, err);
	}
	dk_reply_release(&r);
	sg_buf_release(&q);
	return rc;
}

/*
 * A new container, before its start: one archive with binding.root (made
 * the user's, unless host_workspace is bound there), sg-helper and its
 * marker, so that the set-up installs it at once.  Before the start,
 * because gVisor puts a tmpfs of its own over an empty /tmp and sees
 * only what the rootfs held when it began.  A read-only root takes two:
 * the root's volume made the user's, then /tmp's files.  That first entry
 * is named "/": Docker skips one named "." but gives a "/" entry's owner
 * and mode to the directory it unpacks at.
 */
static sg_err dk_send_helper(struct dk_env *de, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const struct sg_env *env = &de->rm.base;
	struct sg_install in = { .dir = DK_TMP, .nonce = de->rm.nonce };
	struct sg_targz_entry e[3], dot = { .name = "/", .mode = 0700, .dir = true };
	const char *dir;
	size_t n = 0;
	int requests = 1;
	sg_err rc = sg_helper_bin_open(env->helper_host, &de->bin, err);

	if (!rc)
		rc = sg_install_beside_paths(&in, &de->bin, &de->up, &de->mark, err);
	if (!rc)
		rc = sg_helper_bin_load(&de->bin, err);
	if (rc)
		return rc;
	sg_progress_update("copying sg-helper in");
	if (!env->profile->host_workspace && env->root[1] && de->ro_root) {
		rc = dk_put(de, env->root, &dot, 1, cancel, err);
		requests++;
	} else if (!env->profile->host_workspace && env->root[1]) {
		e[n++] = (struct sg_targz_entry){ .name = env->root + 1, .mode = 0700, .dir = true };
	}
	dir = dk_archive_dir(de, de->up);
	e[n++] = (struct sg_targz_entry){ .name = dk_archive_name(dir, de->up), .mode = 0700,
					  .data = de->bin.data, .len = (size_t)de->bin.size };
	e[n++] = (struct sg_targz_entry){ .name = dk_archive_name(dir, de->mark), .mode = 0600,
					  .data = "" };
	if (!rc)
		rc = dk_put(de, dir, e, n, cancel, err);
	de->install = (struct sg_install_cost){ .bytes = de->bin.size, .requests = requests };
	return rc;
}

/*
 * The driver's create (remote.h): the container made and started, *got
 * its inspect.  The daemon answers on this host, so a create either
 * happened or not; only a cancel mid-way leaves a doubt (may_remain).
 */
static sg_err dk_create(struct sg_remote *rm, json_t **got, struct sg_cancel *cancel,
			struct sg_errinfo *err)
{
	struct dk_env *de = (struct dk_env *)rm;
	json_t *body = dk_create_body(de);
	bool no_image = false;
	sg_err rc;

	*got = NULL;
	if (!body)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	rc = dk_create_once(de, body, &no_image, cancel, err);
	if (!rc && no_image && !(rc = dk_pull(de, cancel, err)))
		rc = dk_create_once(de, body, &no_image, cancel, err);
	if (!rc && no_image)
		rc = sg_err_set(err, SG_E_UNAVAILABLE, "image %.200s is not on the Docker daemon",
				rm->base.profile->image);
	json_decref(body);
	if (rc && sg_cancel_check(cancel))
		rm->base.may_remain = true;
	if (!rc) {
		int64_t t0 = sg_now_ms();

		rc = dk_send_helper(de, cancel, err);
		de->install.ms = sg_now_ms() - t0;
	}
	if (!rc)
		rc = dk_start(&de->cl, rm->base.id, cancel, err);
	if (!rc)
		rc = dk_lookup(rm, rm->base.id, got, cancel, err);
	return rc;
}

/* DELETE the container and its anonymous volumes; one that is gone is fine. */
static sg_err dk_remove(struct sg_remote *rm, const char *id, struct sg_cancel *cancel,
			struct sg_errinfo *err)
{
	return dk_container(&((struct dk_env *)rm)->cl, "DELETE", id, NULL, "force=1&v=1",
			    (const long[]){ 204, 0 }, SG_OK, "removing the container", cancel, err);
}

/* Teardown's KEEP (remote.h): stop it, its files kept. */
static sg_err dk_keep(struct sg_remote *rm, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	return dk_container(&((struct dk_env *)rm)->cl, "POST", rm->base.id, "/stop",
			    "t=" DK_STOP_S, (const long[]){ 204, 304, 0 }, SG_OK,
			    "stopping the container", cancel, err);
}

static const char *dk_tag(const json_t *got, const char *key)
{
	return json_string_value(
		json_object_get(json_object_get(json_object_get(got, "Config"), "Labels"), key));
}

static const char *dk_label(const void *labels, const char *key)
{
	return json_string_value(json_object_get(labels, key));
}

/* An operator's view of one listed container (remote.h). */
static bool dk_info(const json_t *item, struct sg_env_info *info)
{
	const json_t *labels = json_object_get(item, "Labels");
	const char *m = dk_label(labels, SG_CLOUD_TAG_MANAGED);
	const char *name = json_string_value(json_array_get(json_object_get(item, "Names"), 0));

	if (!m || strcmp(m, SG_CLOUD_MANAGER) != 0 || !name)
		return false;
	sg_cloud_info(name[0] == '/' ? name + 1 : name,
		      json_string_value(json_object_get(item, "State")), dk_label, labels, info);
	return true;
}

/* Every container labelled with p's name: one page, the daemon filtering (remote.h). */
static sg_err dk_list_page(struct sg_remote *rm, const struct sg_profile *p, const char *cursor,
			   json_t **items, char **next, struct sg_cancel *cancel,
			   struct sg_errinfo *err)
{
	json_t *f = json_pack("{s:[s, s+]}", "label", SG_CLOUD_TAG_MANAGED "=" SG_CLOUD_MANAGER,
			      SG_CLOUD_TAG_PROFILE "=", p->name);
	char *fs = f ? json_dumps(f, JSON_COMPACT) : NULL;
	struct sg_buf q = SG_BUF_INIT(SG_PATH_MAX * 2);
	struct dk_call c = { .path = "/containers/json", .what = "listing containers" };
	struct dk_reply r = { 0 };
	sg_err rc;

	(void)cursor;
	*items = NULL;
	*next = NULL;
	if (!fs || sg_buf_adds(&q, "all=1&filters=") || sg_cloud_urlenc(&q, fs)) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	c.query = q.p;
	rc = dk_do(&((struct dk_env *)rm)->cl, &c, &r, cancel, err);
	if (!rc && (r.status != 200 || !json_is_array(r.json)))
		rc = dk_fail(&c, &r, SG_E_PROVIDER, err);
	if (!rc)
		*items = json_incref(r.json);
	dk_reply_release(&r);
out:
	sg_buf_release(&q);
	free(fs);
	json_decref(f);
	return rc;
}

static sg_err dk_open(struct sg_remote *rm, const struct sg_profile *p, struct sg_errinfo *err)
{
	return dk_client_init(&((struct dk_env *)rm)->cl, p, err);
}

static void dk_close(struct sg_remote *rm)
{
	dk_client_release(&((struct dk_env *)rm)->cl);
}

/* ---- provision ---------------------------------------------------------------- */

/* The installer's native transfer (install.h): the program by archive. */
static sg_err dk_install_upload(void *ctx, const char *path, int fd, struct sg_cancel *cancel,
				struct sg_errinfo *err)
{
	struct sg_helper_bin b = { .fd = fd };
	sg_err rc;

	b.size = lseek(fd, 0, SEEK_END);
	rc = b.size < 0 ? sg_err_set(err, SG_E_INTERNAL, "cannot size sg-helper")
			: sg_helper_bin_load(&b, err);
	if (!rc)
		rc = dk_upload(ctx, path, b.data, (size_t)b.size, 0700, cancel, err);
	free(b.data);
	return rc;
}

/* Root, sandgate's directories, sg-helper and the probe (cloud.h), and the kernel seen. */
static sg_err dk_setup(struct sg_remote *rm, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct dk_env *de = (struct dk_env *)rm;
	struct sg_env *env = &rm->base;
	struct sg_install in = { .ctx = de, .dir = DK_TMP, .nonce = rm->nonce,
				 .run = sg_remote_install_run, .upload = dk_install_upload };
	char *reply = NULL, *text = NULL, *k;
	json_t *vars = NULL;
	sg_err rc = de->bin.fd >= 0 ? SG_OK : sg_helper_bin_open(env->helper_host, &de->bin, err);

	if (!rc && (!(vars = sg_cloud_setup_vars(env->root, de->bin.sha, 1440, de->up, de->mark,
						 DK_KILL_MS)) ||
		    asprintf(&text, "%s%s", DK_OBSERVE_SH, sg_cloud_setup_sh) < 0)) {
		text = NULL;
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	if (!rc)
		rc = dk_script(rm, text, vars, &reply, cancel, err);
	if (!rc && (k = sg_cloud_kv(reply, "dk_kernel"))) {
		snprintf(de->kernel, sizeof(de->kernel), "%s", k);
		free(k);
	}
	de->gvisor = !rc && sg_cloud_flag(reply, "dk_gvisor");
	rc = sg_remote_setup_read(rm, rc, reply, de->up != NULL, &in, &de->bin, &de->install,
				  cancel, err);
	json_decref(vars);
	free(reply);
	free(text);
	return rc;
}

/* Is the container found for this identity sandgate's, and on the profile's runtime? */
static sg_err dk_check_found(struct dk_env *de, const json_t *got, struct sg_errinfo *err)
{
	const struct sg_env *env = &de->rm.base;
	const char *m = dk_tag(got, SG_CLOUD_TAG_MANAGED), *id = dk_tag(got, SG_CLOUD_TAG_IDENTITY);
	const char *want = dk_runtime(env->profile);
	const char *have = json_string_value(
		json_object_get(json_object_get(got, "HostConfig"), "Runtime"));

	if (!m || strcmp(m, SG_CLOUD_MANAGER) != 0 || !id || strcmp(id, env->identity) != 0)
		return sg_err_set(err, SG_E_PROVIDER,
				  "a container named %s exists and is not sandgate's container for identity \"%.60s\"; rename or remove it",
				  de->rm.name, env->identity);
	if (want && (!have || strcmp(have, want) != 0))
		return sg_err_set(err, SG_E_UNSUPPORTED,
				  "container %s runs on runtime \"%s\", not the \"%s\" profile \"%s\" asks for; remove it (sandgate envs destroy) to make it again",
				  de->rm.name, have ? have : "?", want, env->profile->name);
	/* As it was made (an older sandgate made runsc's writable). */
	de->ro_root = json_is_true(
		json_object_get(json_object_get(got, "HostConfig"), "ReadonlyRootfs"));
	return SG_OK;
}

/* The identity's container: found (and started when stopped) or made. */
static sg_err dk_obtain(struct dk_env *de, json_t **got, struct sg_cancel *cancel,
			struct sg_errinfo *err)
{
	struct sg_env *env = &de->rm.base;
	bool made = false;
	sg_err rc = dk_lookup(&de->rm, de->rm.name, got, cancel, err);

	if (rc == SG_E_NOT_FOUND) {
		sg_err_clear(err);
		return sg_remote_create(&de->rm, de->rm.name, got, &made, cancel, err);
	}
	if (!rc)
		rc = dk_check_found(de, *got, err);
	if (rc)
		return rc;
	snprintf(env->id, sizeof(env->id), "%s", de->rm.name);
	env->resumed = true;
	if (json_is_true(json_object_get(json_object_get(*got, "State"), "Running")))
		return SG_OK;
	de->woke = true;
	return dk_start(&de->cl, env->id, cancel, err);
}

/* What was asked, what the daemon applied, and what runs, as seen from inside. */
static json_t *dk_facts(const struct dk_env *de, const json_t *got)
{
	const struct sg_profile *p = de->rm.base.profile;
	const json_t *hc = json_object_get(got, "HostConfig");
	json_t *req = json_object(), *app = json_object();
	struct utsname u;
	bool own_kernel = de->kernel[0] && uname(&u) == 0 && strcmp(u.release, de->kernel) != 0;
	const char *runtime = json_string_value(json_object_get(hc, "Runtime"));

	if (p->cpus > 0)
		json_object_set_new(req, "cpus", json_real(p->cpus));
	if (p->memory_mb > 0)
		json_object_set_new(req, "memory_mb", json_integer(p->memory_mb));
	json_object_set_new(app, "cpus", json_real((double)json_integer_value(
						    json_object_get(hc, "NanoCpus")) / 1e9));
	json_object_set_new(app, "memory_mb", json_integer(json_integer_value(
							 json_object_get(hc, "Memory")) / SG_MiB));
	json_object_set_new(app, "pids_limit",
			    json_integer(json_integer_value(json_object_get(hc, "PidsLimit"))));
	/*
	 * gVisor says so in its kernel log (still a container: its kernel is a
	 * process on this host's); another kernel release than this host's
	 * (kata) is a virtual machine's; the same one is namespaces.
	 */
	return json_pack("{s:{s:b}, s:{s:o, s:o}, s:s, s:s, s:{s:s?, s:s?, s:b, s:b}, s:{s:s, s:s, s:O?}, s:{s:I, s:i, s:I}}",
			 "isolation", "host_filesystem_restricted", 1, "resources", "requested", req, "applied", app, "safety_class",
			 own_kernel && !de->gvisor ? "microvm" : "container",
			 "mechanism", de->gvisor ? "gvisor" : own_kernel ? "separate_kernel"
								 : "namespaces",
			 "runtime", "requested", dk_runtime(p), "used", runtime, "gvisor_seen",
			 de->gvisor, "own_kernel", own_kernel, "docker", "container", de->rm.name,
			 "user", de->user, "warnings", de->warnings, "helper_install", "bytes",
			 (json_int_t)de->install.bytes, "requests", de->install.requests, "ms",
			 (json_int_t)de->install.ms);
}

static const struct sg_remote_ops dk_ops;

static sg_err dk_provision(struct sg_env *env, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct dk_env *de = (struct dk_env *)env;
	json_t *got = NULL;
	sg_err rc;

	de->bin.fd = -1; /* closed at the end: the set-up is its last use */
	rc = sg_remote_init(&de->rm, &dk_ops, err);

	if (!rc && env->root[0] != '/')
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT, "root %s is not an absolute path",
				env->root);
	if (!rc)
		rc = dk_user(env->profile, de->user, sizeof(de->user), err);
	de->ro_root = dk_wants_ro_root(env->profile);
	if (!rc) {
		int end = 0;

		de->by_name = sscanf(de->user, "%u:%u%n", &de->uid, &de->gid, &end) != 2 ||
			      de->user[end];
	}
	if (!rc)
		rc = sg_remote_open(&de->rm, env->profile, err);
	/* Fail closed: never a container on the daemon's default runtime instead. */
	if (!rc)
		rc = dk_runtime_check(&de->cl, env->profile, cancel, err);
	if (!rc)
		rc = dk_obtain(de, &got, cancel, err);
	if (!rc)
		rc = sg_remote_setup(&de->rm, de->rm.name, cancel, err);
	if (!rc && !(env->facts = dk_facts(de, got)))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (!sg_remote_failed(&de->rm, rc, cancel) && rc && de->woke) {
		/* A kept container this provision started is stopped again. */
		struct sg_errinfo e2 = { 0 };

		if (dk_keep(&de->rm, NULL, &e2)) {
			sg_log_warn("container %s was started for a failed initialize: %s",
				    de->rm.name, e2.msg);
			env->may_run = true;
		}
	}
	sg_helper_bin_close(&de->bin);
	json_decref(got);
	return rc;
}

/* Exports' native download (SG_CAP_FILES): the file out of GET archive's tar. */
static sg_err dk_get_file(struct sg_env *env, const char *path, int fd, size_t max,
			  struct sg_cancel *cancel, struct sg_errinfo *err)
{
	return dk_get_file_of(&((struct dk_env *)env)->cl, env->id, path, fd, max, cancel, err);
}

static const struct sg_remote_ops dk_ops = {
	.provider = "Docker",
	.inline_max = DK_INLINE_MAX,
	.stdin_vars = DK_STDIN_VARS,
	.words_in_text = true,
	.relays = true,
	.lingers = true,
	.relay_wait_ms = DK_WAIT_MS,
	.fails = 1,
	.kill_unseen = true,
	.list_pages = 1,
	.trip = dk_trip,
	.kill = dk_kill,
	.upload = dk_upload,
	.script = dk_script,
	.create = dk_create,
	.setup = dk_setup,
	.keep = dk_keep,
	.env_size = sizeof(struct dk_env),
	.open = dk_open,
	.close = dk_close,
	.lookup = dk_lookup,
	.tag = dk_tag,
	.remove = dk_remove,
	.list_page = dk_list_page,
	.info = dk_info,
};

SG_REMOTE_OPERATOR(dk, &dk_ops)

static void dk_release(struct sg_env *env)
{
	struct dk_env *de = (struct dk_env *)env;

	if (de->cl.socket)
		sg_log_debug("container %s: %llu Docker requests", de->rm.name ? de->rm.name : "?",
			     (unsigned long long)atomic_load(&de->cl.requests));
	json_decref(de->warnings);
	de->warnings = NULL;
	free(de->up);
	free(de->mark);
	de->up = de->mark = NULL;
	sg_remote_release(&de->rm);
	sg_env_release_base(env);
}

const struct sg_adapter sg_adapter_docker = {
	.name = "docker",
	.caps = SG_CAP_FILES | SG_CAP_LIST,
	.env_size = sizeof(struct dk_env),
	.fields = dk_fields,
	.validate = dk_validate,
	.provision = dk_provision,
	.exec = sg_remote_exec,
	.get_file = dk_get_file,
	.teardown = sg_remote_teardown,
	.list = dk_list,
	.destroy = dk_destroy,
	.release = dk_release,
};
