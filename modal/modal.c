/*
 * modal.c - the modal backend: environments in Modal sandboxes, over
 * Modal's gRPC control plane and each sandbox's command router (api.h,
 * on core/grpc.h).
 *
 * Provisioning.  One sandbox per identity in the profile's app (`app`,
 * default "sandgate"), named from the identity (adapters/cloudkit.h) and
 * tagged managed-by=sandgate with the identity, session, profile,
 * creation time, expiry, a random create tag and its limits (network,
 * CPU, memory).  A running sandbox of that name is adopted (after its tags
 * say it is sandgate's for this identity, made with this session's
 * limits); otherwise one is created from the image (a registry
 * reference, its id cached per reference for the process's life) or, for
 * a persistent profile, from the filesystem snapshot kept at the last
 * shutdown.  SandboxCreate[V2] commits the sandbox before it answers, so a
 * create whose answer is lost may still have made one: the gateway has
 * recorded the intent before provision() runs, a retried create meets
 * ALREADY_EXISTS and adopts the sandbox only when its create tag is this
 * provision's, and a create whose outcome stays unknown sets
 * env->may_remain, so the gateway settles it by tags (gateway/envs.h).
 * Modal's own backstops: timeout_secs from lifetime_seconds (at least
 * SG_MODAL_MIN_TIMEOUT_S, at most 24 h) and, with `idle_timeout_s`, an
 * idle timeout.
 *
 * Exec.  Every command runs through `sg-helper job --rm`
 * (adapters/jobreply.h), driven by sg_job_drive: one TaskExecStart of
 * `sh -c 'eval "exec $SG_X"'` with the job's words in the exec's variable
 * SG_X (stdin text in SG_IN0.., larger or binary stdin on the exec's
 * stdin, written to a file first), stderr merged into stdout, and one
 * TaskExecStdioRead of that stream, which ends when the job does.  The
 * job relays the command's output through a pipe (no runner, no output
 * files), and its trailer carries the exit status, the signal, the timeout
 * and the sizes, so no TaskExecWait is needed: two router requests per
 * command (three with stdin too large for variables).  The router has no
 * call that starts and reads at once, and a read sent before the start has
 * answered may find no exec yet (a gRPC server serves one connection's
 * streams concurrently), so the read follows the start's answer.  The
 * router keeps the output by offset: a broken read reconnects where it
 * stopped, and a start is retried under its own exec id, so nothing runs
 * twice; an exec whose output stays out of reach is killed, never started
 * again.  A job that detaches (process/start) keeps its files and may
 * answer "pending"; the next request attaches.  Each exec's request count
 * is logged at debug level and summed in the environment's counter (logged
 * at teardown), for the benchmarks.
 *
 * Teardown: KEEP of a persistent sandbox snapshots its filesystem
 * (TaskSnapshotFilesystem, always with a lifetime: `snapshot_ttl_seconds`,
 * else the SDK's 30 days), records the image id in this host's state
 * (<state>/modal/<app>-<name>.image) and in the sandbox's tags, then
 * terminates it; KEEP of a non-persistent one leaves it running (Modal
 * cannot stop a sandbox; its timeout or `envs gc` ends it, and the next
 * session adopts it by name); REMOVE terminates it and forgets the
 * snapshot.  Resuming creates from the recorded image;
 * Modal answering NOT_FOUND for it is workspace_lost.  A persistent
 * sandbox handed to a session is recorded too (.live) until a snapshot
 * holds its work: if it is gone by the next session (its keep failed, then
 * Modal's timeout ended it), that session is workspace_lost, naming the
 * older snapshot, never resumed from it as if nothing was lost.
 */
#define _GNU_SOURCE /* asprintf */
#include "adapters/adapter.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "adapters/cloudkit.h"
#include "core/digest.h"
#include "core/exec.h"
#include "adapters/install.h"
#include "adapters/jobreply.h"
#include "adapters/remote.h"
#include "base/crash.h"
#include "base/limits.h"
#include "base/log.h"
#include "base/progress.h"
#include "base/strv.h"
#include "base/utf8.h"
#include "modal/api.h"

#define MDL_APP_DEFAULT "sandgate"
#define MDL_IMAGE_DEFAULT "debian:12"
#define MDL_TAG_IMAGE "sandgate.image"
#define MDL_TAG_LIMITS "sandgate.limits"
#define MDL_CIDRS_MAX 64 /* allow-list entries sent, at most */

/* A command router shared by the env's execs, replaced when its JWT ages. */
struct mdl_rt {
	struct mdl_router r;
	int refs; /* under the env's lock */
};

struct mdl_env {
	struct sg_remote rm; /* first: its base is the env; rm.lock guards rt */
	struct mdl_client cl;
	bool cl_ready;
	char *app;       /* the app's name */
	char *app_id;
	char *name;      /* the sandbox name for the identity */
	char *image_id;  /* what the sandbox was created from */
	char create_id[33];
	struct mdl_rt *rt; /* under rm.lock */
	atomic_uint_fast64_t requests; /* router requests of every exec */
	atomic_uint_fast64_t execs;
	struct sg_install_cost install;
};

/* ---- Scripts run in the sandbox ------------------------------------------
 *
 * Parameters arrive as the exec's variables (SG_*), never spliced into the
 * text; the scripts print key=value lines.
 */

/*
 * Set-up, in one exec: SG_ROOT binding.root, SG_SHA sg-helper's sha256,
 * SG_UP "-" when the program comes on stdin (a sandbox this provision
 * created cannot have it); SG_PROBE runs `sg-helper probe` after a line
 * "probe<<" once the helper is in place.
 */
static const char mdl_setup_sh[] =
	"exec 2>/dev/null\n"
	"h=$HOME r=$SG_ROOT\n"
	"case $h in /*) ;; *) h=/root ;; esac\n"
	"b=$h/.sandgate\n"
	"case $b/ in \"${r%/}\"/*) b=/tmp/.sandgate-$(id -u) ;; esac\n"
	"printf 'base=%s\\n' \"$b\"\n"
	"(umask 077; mkdir -p -- \"$b/ctl/proc\" \"$b/ctl/home\" \"$b/ctl/tmp\" \"$b/run\") "
	"&& chmod 700 -- \"$b\" \"$b/ctl\" \"$b/run\" || "
	"{ printf 'error=cannot create %s\\n' \"$b\"; exit 0; }\n"
	"find \"$b/run\" -mindepth 1 -maxdepth 1 -mmin +1440 -exec rm -rf -- {} +\n"
	"mkdir -p -- \"$r\" && test -d \"$r\" && printf 'root=1\\n'\n"
	SG_INSTALL_PROBE_SH;

/* The job (remote.h) whose stdin is written to SG_UP first. */
static const char mdl_job_up_sh[] =
	"(umask 077; cat >\"$SG_UP\") || exit 126; eval \"exec $SG_X\"";

/* ---- validate ------------------------------------------------------------ */

/*
 * The profile fields the modal backend honours (adapter.h) and its own
 * (docs/modal.md).  network is partial: IPv6 ranges and domains cannot be
 * enforced by Modal's CIDR allow list.  `workspace` is accepted for the
 * host's sake: commands see the workspace at binding.root.
 */
static const struct sg_field mdl_fields[] = {
	SG_FIELD("image"), SG_FIELD("workspace"), SG_FIELD("persistent"),
	SG_FIELD("shared"), SG_FIELD_BEST_EFFORT("network"), SG_FIELD("cpus"),
	SG_FIELD("memory_mb"), SG_FIELD_OWN_STRING("app"),
	SG_FIELD_OWN_INT("idle_timeout_s", 60, SG_MODAL_MAX_TIMEOUT_S),
	SG_FIELD_OWN_INT("snapshot_ttl_seconds", MDL_SNAPSHOT_TTL_NONE, MDL_SNAPSHOT_TTL_MAX_S),
	/* Modal's own variables, read as its tools read them (api.h). */
	SG_FIELD_ENV("MODAL_TOKEN_ID", 0), SG_FIELD_ENV("MODAL_TOKEN_SECRET", 0),
	SG_FIELD_ENV("MODAL_PROFILE", 0), SG_FIELD_ENV("MODAL_CONFIG_PATH", 0),
	SG_FIELD_ENV("MODAL_ENVIRONMENT", 0), SG_FIELD_ENV("MODAL_SERVER_URL", 0),
	SG_FIELD_ENV("MODAL_SANDBOX_V2", 0),
	SG_FIELDS_END,
};

/* The app's name: the profile's own, or sandgate's. */
static const char *mdl_app_name(const struct sg_profile *p)
{
	const char *app = sg_profile_str(p, "app");

	return app ? app : MDL_APP_DEFAULT;
}

/* Modal's names: letters, digits, ".", "_", "-", at most 64. */
static bool mdl_name_ok(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n <= 64 && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
					 "0123456789._-") == n;
}

static sg_err mdl_validate(const struct sg_profile *p, struct sg_errinfo *err)
{
	const char *app = mdl_app_name(p);

	if (!mdl_name_ok(app))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "field \"app\": a Modal app name is 1 to 64 letters, digits, '.', '_' or '-'");
	/* The table's range lets 0 through; Modal's lifetimes are at least a second. */
	if (sg_profile_int(p, "snapshot_ttl_seconds", 1) == 0)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "field \"snapshot_ttl_seconds\": must be at least 1 (seconds), or -1 for no expiry");
	if (p->image && (!p->image[0] || strpbrk(p->image, " \t\r\n")))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "field \"image\": a registry reference is one word");
	if (p->cpus < 0 || p->cpus * 1000 > 4294967295.0)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT, "field \"cpus\": out of range");
	if (p->memory_mb < 0 || p->memory_mb > 4294967295LL)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT, "field \"memory_mb\": out of range");
	for (size_t i = 0; p->network == SG_NET_ALLOW && p->network_allow &&
			   p->network_allow[i]; i++) {
		const char *e = p->network_allow[i];

		/*
		 * Modal enforces an allow list of IPv4 CIDRs only; a domain or
		 * an IPv6 range would not be enforced.  Best-effort drops them,
		 * which is stricter: they stay blocked.
		 */
		if (sg_allow_kind(e) != SG_ALLOW_IPV4 && !sg_profile_best_effort(p, "network"))
			return sg_err_set(err, SG_E_UNSUPPORTED,
					  "field \"network\": allow entry \"%.80s\" cannot be enforced by backend modal (only IPv4 CIDRs; list network in best_effort to leave it blocked)",
					  e);
	}
	return SG_OK;
}

/* ---- The client ----------------------------------------------------------- */

static sg_err mdl_client_open(const struct sg_profile *p, struct mdl_client *cl,
			      struct sg_errinfo *err)
{
	struct mdl_creds creds;
	sg_err rc = mdl_creds_load(&creds, err);

	if (!rc)
		rc = mdl_client_init(cl, &creds, NULL, err);
	memset(&creds, 0, sizeof(creds));
	(void)p;
	return rc;
}

/* The image id for a registry reference, cached for the process's life. */
static pthread_mutex_t mdl_cache_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char key[SG_PATH_MAX]; /* server, environment, app id, reference */
	char id[128];
} mdl_cache[SG_MODAL_IMAGE_CACHE];
static unsigned mdl_cache_next;

static sg_err mdl_image_for(struct mdl_env *me, const char *ref, char **out,
			    struct sg_cancel *cancel, struct sg_errinfo *err)
{
	char key[SG_PATH_MAX];
	sg_err rc;

	*out = NULL;
	snprintf(key, sizeof(key), "%s|%s|%s|%s", me->cl.creds.server_url,
		 me->cl.creds.environment, me->app_id, ref);
	pthread_mutex_lock(&mdl_cache_mu);
	for (size_t i = 0; i < SG_MODAL_IMAGE_CACHE && !*out; i++)
		if (mdl_cache[i].id[0] && strcmp(mdl_cache[i].key, key) == 0)
			*out = strdup(mdl_cache[i].id);
	pthread_mutex_unlock(&mdl_cache_mu);
	if (*out)
		return SG_OK;
	sg_progress_begin("image", "building image %s", ref);
	rc = mdl_image(&me->cl, me->app_id, ref, SG_MODAL_IMAGE_MS, out, cancel, err);
	sg_progress_end(rc);
	if (rc)
		return rc;
	pthread_mutex_lock(&mdl_cache_mu);
	{
		unsigned i = mdl_cache_next++ % SG_MODAL_IMAGE_CACHE;

		snprintf(mdl_cache[i].key, sizeof(mdl_cache[i].key), "%s", key);
		snprintf(mdl_cache[i].id, sizeof(mdl_cache[i].id), "%s", *out);
	}
	pthread_mutex_unlock(&mdl_cache_mu);
	return SG_OK;
}

/*
 * Whether the reference's image is cached for this server and environment
 * in any app (the app id is not known yet when this is asked).
 */
static bool mdl_image_cached(const struct mdl_env *me, const char *ref)
{
	char head[SG_PATH_MAX], tail[SG_PATH_MAX];
	size_t hn, tn;
	bool found = false;

	snprintf(head, sizeof(head), "%s|%s|", me->cl.creds.server_url, me->cl.creds.environment);
	snprintf(tail, sizeof(tail), "|%s", ref);
	hn = strlen(head);
	tn = strlen(tail);
	pthread_mutex_lock(&mdl_cache_mu);
	for (size_t i = 0; i < SG_MODAL_IMAGE_CACHE && !found; i++) {
		size_t n = strlen(mdl_cache[i].key);

		found = mdl_cache[i].id[0] && n >= hn + tn &&
			strncmp(mdl_cache[i].key, head, hn) == 0 &&
			strcmp(mdl_cache[i].key + n - tn, tail) == 0;
	}
	pthread_mutex_unlock(&mdl_cache_mu);
	return found;
}

/* ---- Tags ------------------------------------------------------------------ */

/*
 * The profile's enforceable IPv4 CIDRs (at most MDL_CIDRS_MAX) into v;
 * their count.  Domains and IPv6 ranges are left out: validate() refused
 * them unless best_effort lets them stay blocked.
 */
static size_t mdl_cidrs(const struct sg_profile *p, char **v)
{
	size_t n = 0;

	for (size_t i = 0; p->network == SG_NET_ALLOW && p->network_allow &&
			   p->network_allow[i] && n < MDL_CIDRS_MAX; i++)
		if (sg_allow_kind(p->network_allow[i]) == SG_ALLOW_IPV4)
			v[n++] = (char *)p->network_allow[i];
	return n;
}

/*
 * What a sandbox enforces that no call shows on a running one and Modal
 * cannot change once it runs: its network, CPU and memory limits, as the
 * value of the tag sandgate.limits ("net=none cpu=1500 mem=768"; an allow
 * list is the first 12 hex digits of the SHA-256 of its CIDRs).  A sandbox
 * is adopted only when it carries exactly the limits this session asks for.
 */
static void mdl_limits(const struct sg_profile *p, char out[96])
{
	char *cidrs[MDL_CIDRS_MAX], hex[65] = "", net[32];
	struct sg_buf b = SG_BUF_INIT(SG_KiB * 64);
	size_t nc = mdl_cidrs(p, cidrs);

	for (size_t i = 0; i < nc; i++)
		if (sg_buf_adds(&b, cidrs[i]) || sg_buf_addc(&b, ','))
			hex[0] = '?'; /* out of memory: matches no sandbox's tag */
	if (p->network == SG_NET_DEFAULT)
		snprintf(net, sizeof(net), "default");
	else if (p->network == SG_NET_NONE || nc == 0)
		snprintf(net, sizeof(net), "none");
	else if (hex[0] == '?' || !sg_sha256_hex(b.p, b.len, hex))
		snprintf(net, sizeof(net), "allow:?");
	else
		snprintf(net, sizeof(net), "allow:%.12s", hex);
	snprintf(out, 96, "net=%s cpu=%u mem=%u", net,
		 p->cpus > 0 ? (unsigned)(p->cpus * 1000 + 0.5) : 0u,
		 p->memory_mb > 0 ? (unsigned)p->memory_mb : 0u);
	sg_buf_release(&b);
}

/* A tag's value among n tags, or NULL. */
static const char *mdl_tag(Modal__Client__SandboxTag *const *tags, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (tags[i]->tag_name && strcmp(tags[i]->tag_name, key) == 0)
			return tags[i]->tag_value;
	return NULL;
}

struct mdl_tagv {
	Modal__Client__SandboxTag *const *v;
	size_t n;
};

static const char *mdl_tag_get(const void *src, const char *key)
{
	const struct mdl_tagv *t = src;

	return mdl_tag(t->v, t->n, key);
}

/* SandboxTagsGet of id into *out (new). */
static sg_err mdl_tags_get(struct mdl_client *cl, const char *id,
			   Modal__Client__SandboxTagsGetResponse **out,
			   struct sg_cancel *cancel, struct sg_errinfo *err)
{
	Modal__Client__SandboxTagsGetRequest req = MODAL__CLIENT__SANDBOX_TAGS_GET_REQUEST__INIT;
	int status = 0;
	sg_err rc;

	req.sandbox_id = (char *)id;
	rc = mdl_call(cl, MDL_SANDBOX_RPC(cl, "SandboxTagsGet"), &req.base,
		      &modal__client__sandbox_tags_get_response__descriptor,
		      (ProtobufCMessage **)out, 0, &status, cancel, err);
	if (rc && status == SG_GRPC_NOT_FOUND)
		rc = SG_E_NOT_FOUND;
	return rc;
}

/*
 * Is sandbox id sandgate's for this identity?  *made_here: its create tag
 * is this provision's.  *foreign (may be NULL): its tags were read and say
 * it is not this provision's to adopt (another owner, other limits), as
 * opposed to a failure to read them, which proves nothing.
 */
static sg_err mdl_check_owner(struct mdl_env *me, const char *id, bool *made_here,
			      bool *foreign, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	Modal__Client__SandboxTagsGetResponse *t = NULL;
	const char *m, *who, *c, *lim;
	char want[96];
	sg_err rc = mdl_tags_get(&me->cl, id, &t, cancel, err);

	*made_here = false;
	if (foreign)
		*foreign = false;
	if (rc)
		return rc;
	m = mdl_tag(t->tags, t->n_tags, SG_CLOUD_TAG_MANAGED);
	who = mdl_tag(t->tags, t->n_tags, SG_CLOUD_TAG_IDENTITY);
	c = mdl_tag(t->tags, t->n_tags, SG_CLOUD_TAG_CREATE);
	lim = mdl_tag(t->tags, t->n_tags, MDL_TAG_LIMITS);
	mdl_limits(me->rm.base.profile, want);
	if (!m || strcmp(m, SG_CLOUD_MANAGER) != 0 || !who || strcmp(who, me->rm.base.identity) != 0)
		rc = sg_err_set(err, SG_E_PROVIDER,
				"a Modal sandbox named %s exists in app %s and is not sandgate's sandbox for identity \"%.60s\"; terminate or rename it",
				me->name, me->app, me->rm.base.identity);
	/*
	 * Adopting a sandbox made under other limits (another profile or
	 * binding of the identity, say with the network open) would run this
	 * session without the limits it asked for: refused.
	 */
	else if (!lim || strcmp(lim, want) != 0)
		rc = sg_err_set(err, SG_E_UNSUPPORTED,
				"sandbox %s of identity \"%.60s\" runs with limits \"%.60s\" and this session asks for \"%s\"; Modal cannot change them on a running sandbox: end it (remove_workspace_on_exit, or `sandgate envs rm %s`) or ask for the same",
				id, me->rm.base.identity, lim ? lim : "(unknown)", want, id);
	if (foreign)
		*foreign = rc != SG_OK;
	*made_here = !rc && c && strcmp(c, me->create_id) == 0;
	protobuf_c_message_free_unpacked(&t->base, NULL);
	return rc;
}

/* The running sandbox of our name: SG_OK with id, or SG_E_NOT_FOUND. */
static sg_err mdl_by_name(struct mdl_env *me, char id[128], struct sg_cancel *cancel,
			  struct sg_errinfo *err)
{
	Modal__Client__SandboxGetFromNameRequest req =
		MODAL__CLIENT__SANDBOX_GET_FROM_NAME_REQUEST__INIT;
	Modal__Client__SandboxGetFromNameResponse *resp = NULL;
	int status = 0;
	sg_err rc;

	req.sandbox_name = me->name;
	req.app_name = me->app;
	req.environment_name = me->cl.creds.environment;
	rc = mdl_call(&me->cl, MDL_SANDBOX_RPC(&me->cl, "SandboxGetFromName"), &req.base,
		      &modal__client__sandbox_get_from_name_response__descriptor,
		      (ProtobufCMessage **)&resp, 0, &status, cancel, err);
	if (rc && status == SG_GRPC_NOT_FOUND) {
		sg_err_clear(err);
		return SG_E_NOT_FOUND;
	}
	if (!rc)
		snprintf(id, 128, "%s", resp->sandbox_id);
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

/* A sandbox's tags, as Modal's messages carry them. */
struct mdl_tags {
	struct sg_cloud_tags cloud;
	char limits[96];
	Modal__Client__SandboxTag v[SG_CLOUD_TAGS + 2];
	Modal__Client__SandboxTag *p[SG_CLOUD_TAGS + 2];
	size_t n;
};

static void mdl_tag_add(struct mdl_tags *t, const char *name, const char *value)
{
	modal__client__sandbox_tag__init(&t->v[t->n]);
	t->v[t->n].tag_name = (char *)name;
	t->v[t->n].tag_value = (char *)value;
	t->p[t->n] = &t->v[t->n];
	t->n++;
}

/*
 * Ours (sg_cloud_tags_fill), the limits the sandbox is made with (for the
 * owner check of an adopter) and, when image is not NULL, the snapshot's
 * image id.
 */
static void mdl_tags_build(struct mdl_env *me, const char *image, struct mdl_tags *t)
{
	t->n = 0;
	sg_cloud_tags_fill(&me->rm.base, me->create_id, &t->cloud);
	for (size_t i = 0; i < t->cloud.n; i++)
		mdl_tag_add(t, t->cloud.key[i], t->cloud.value[i]);
	mdl_limits(me->rm.base.profile, t->limits);
	mdl_tag_add(t, MDL_TAG_LIMITS, t->limits);
	if (image)
		mdl_tag_add(t, MDL_TAG_IMAGE, image);
}

/* Set the sandbox's tags to ours, plus the snapshot's image id (or none). */
static sg_err mdl_tags_set(struct mdl_env *me, const char *image, struct sg_cancel *cancel,
			   struct sg_errinfo *err)
{
	Modal__Client__SandboxTagsSetRequest req = MODAL__CLIENT__SANDBOX_TAGS_SET_REQUEST__INIT;
	struct mdl_tags t;
	ProtobufCMessage *resp = NULL;
	sg_err rc;

	mdl_tags_build(me, image, &t);
	req.sandbox_id = me->rm.base.id;
	req.environment_name = me->cl.creds.environment;
	req.n_tags = t.n;
	req.tags = t.p;
	rc = mdl_call(&me->cl, MDL_SANDBOX_RPC(&me->cl, "SandboxTagsSet"), &req.base, &modal__client__empty__descriptor,
		      &resp, 0, NULL, cancel, err);
	if (resp)
		protobuf_c_message_free_unpacked(resp, NULL);
	return rc;
}

/* ---- The records on this host ----------------------------------------------
 *
 * Two files per persistent identity in <state>/modal/, named
 * <app>-<name>.<ext>:
 *   .image  the id of the newest snapshot (written when the keep took it);
 *   .live   the id of the sandbox handed to a session since then.
 * A .live file says the workspace's newest state is in that sandbox, not
 * in a snapshot: it is written before initialize answers and removed only
 * once a snapshot is recorded (or the environment removed).  When the
 * sandbox it names is gone (a keep that failed, then Modal's timeout; a
 * gateway killed mid-session), the work done in it is lost, and the next
 * initialize says so instead of resuming an older snapshot as if it were
 * the workspace (mdl_lost).
 */
#define MDL_REC_IMAGE "image"
#define MDL_REC_LIVE "live"

/* <state>/modal/<app>-<name>.<ext> (new), or NULL. */
static char *mdl_record_path(const char *state_dir, const char *app, const char *name,
			     const char *ext)
{
	char *p = NULL;

	if (asprintf(&p, "%s/modal/%s-%s.%s", state_dir, app, name, ext) < 0)
		return NULL;
	return p;
}

/*
 * The record's id into id (empty when there is none); the time it was
 * written into *when (zero when there is none), when when is not NULL.
 */
static void mdl_record_read(const struct mdl_env *me, const char *ext, char id[128],
			    struct timespec *when)
{
	char *path = mdl_record_path(me->rm.base.state_dir, me->app, me->name, ext);
	FILE *f = path ? fopen(path, "re") : NULL;
	struct stat st;

	id[0] = '\0';
	if (when)
		*when = (struct timespec){ 0 };
	if (f) {
		if (!fgets(id, 128, f))
			id[0] = '\0';
		id[strcspn(id, "\r\n")] = '\0';
		if (when && fstat(fileno(f), &st) == 0)
			*when = st.st_mtim;
		fclose(f);
	}
	free(path);
}

static sg_err mdl_record_write(const struct mdl_env *me, const char *ext, const char *id,
			       struct sg_errinfo *err)
{
	char *path = mdl_record_path(me->rm.base.state_dir, me->app, me->name, ext), *dir = NULL,
	     *tmp = NULL;
	sg_err rc = SG_OK;
	int fd = -1;

	if (!path || asprintf(&dir, "%s/modal", me->rm.base.state_dir) < 0 ||
	    asprintf(&tmp, "%s.tmp", path) < 0) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot create %s: %s", dir, strerror(errno));
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || dprintf(fd, "%s\n", id) < 0 || fsync(fd) != 0 || close(fd) != 0 ||
	    rename(tmp, path) != 0)
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot record the %s in %s: %s",
				strcmp(ext, MDL_REC_IMAGE) == 0 ? "snapshot" : "sandbox", path,
				strerror(errno));
	else
		fd = -1;
	if (fd >= 0)
		close(fd);
out:
	free(path);
	free(dir);
	free(tmp);
	return rc;
}

static void mdl_record_forget(const char *state_dir, const char *app, const char *name,
			      const char *ext)
{
	char *path = mdl_record_path(state_dir, app, name, ext);

	if (path && unlink(path) != 0 && errno != ENOENT)
		sg_log_warn("cannot remove %s: %s", path, strerror(errno));
	free(path);
}

/* Both records of an environment that is being removed. */
static void mdl_records_forget(const char *state_dir, const char *app, const char *name)
{
	mdl_record_forget(state_dir, app, name, MDL_REC_IMAGE);
	mdl_record_forget(state_dir, app, name, MDL_REC_LIVE);
}

/*
 * The sandbox named by the .live record (live) is gone, or another one
 * (other, or NULL) runs under its name: the work done in it since the
 * newest snapshot (snap, taken at snap_at; none when snap is empty) is
 * lost.  workspace_lost, never a resume that presents the older snapshot
 * as the workspace: the sentence names the snapshot's time and the one
 * act that accepts it, deleting the .live record.  The error's sentence
 * is bounded (SG_ERR_MSG), so the log has the whole story.
 */
static sg_err mdl_lost(const struct mdl_env *me, const char *live, const char *other,
		       const char *snap, time_t snap_at, struct sg_errinfo *err)
{
	char *path = mdl_record_path(me->rm.base.state_dir, me->app, me->name, MDL_REC_LIVE),
	     *img = mdl_record_path(me->rm.base.state_dir, me->app, me->name, MDL_REC_IMAGE),
	     *why = NULL;
	char when[32] = "an unknown time";
	struct tm tm;
	sg_err rc;
	int n;

	if (!path || !img) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (snap_at && gmtime_r(&snap_at, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (other)
		n = asprintf(&why, "sandbox %s ended and %s now runs under its name: the work done in the first is lost; to adopt the second, delete %s",
			     live, other, path);
	else if (snap[0])
		n = asprintf(&why, "sandbox %s ended before its snapshot: the work since the snapshot of %s is lost; to resume that snapshot, delete %s",
			     live, when, path);
	else
		n = asprintf(&why, "sandbox %s ended before its first snapshot: its workspace is lost; to start with an empty one, delete %s",
			     live, path);
	if (n < 0) {
		why = NULL;
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	} else {
		/* The whole sentence, and the other way out, whatever SG_ERR_MSG cuts. */
		sg_log_err("modal: identity \"%s\": %s%s%s", me->rm.base.identity, why,
			   snap[0] && !other ? "; to start over instead, delete " : "",
			   snap[0] && !other ? img : "");
		rc = sg_err_set(err, SG_E_WORKSPACE_LOST, "%s", why);
	}
out:
	free(why);
	free(path);
	free(img);
	return rc;
}

/* ---- The router ------------------------------------------------------------- */

static void mdl_rt_drop(struct mdl_env *me, struct mdl_rt *rt)
{
	bool last;

	if (!rt)
		return;
	pthread_mutex_lock(&me->rm.lock);
	last = --rt->refs == 0;
	pthread_mutex_unlock(&me->rm.lock);
	if (last) {
		mdl_router_release(&rt->r);
		free(rt);
	}
}

/*
 * The router, opened (waiting for the sandbox to be ready within
 * wait_ms) or reopened when its JWT is within SG_MODAL_ROUTER_REFRESH_S of
 * its exp.  A reference: give it back with mdl_rt_drop.
 */
static sg_err mdl_rt_get(struct mdl_env *me, int64_t wait_ms, struct mdl_rt **out,
			 struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct mdl_rt *rt, *old = NULL;
	sg_err rc = SG_OK;

	*out = NULL;
	pthread_mutex_lock(&me->rm.lock);
	rt = me->rt;
	if (rt && (!rt->r.exp || (int64_t)time(NULL) + SG_MODAL_ROUTER_REFRESH_S < rt->r.exp)) {
		rt->refs++;
		*out = rt;
		pthread_mutex_unlock(&me->rm.lock);
		return SG_OK;
	}
	/* Opened (or refreshed) under the lock: once an hour, or at start. */
	rt = calloc(1, sizeof(*rt));
	if (!rt)
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (!rc)
		rc = mdl_router_open(&me->cl, me->rm.base.id, wait_ms, &rt->r, cancel, err);
	if (!rc) {
		old = me->rt;
		rt->refs = 2; /* the env's and the caller's */
		me->rt = rt;
		*out = rt;
	} else {
		free(rt);
	}
	pthread_mutex_unlock(&me->rm.lock);
	if (old)
		mdl_rt_drop(me, old);
	return rc;
}

/*
 * One exec through the router, counted.  Output (stdout, with stderr
 * merged) into *out (new, NUL-terminated).
 */
static sg_err mdl_do(struct mdl_env *me, const struct mdl_exec *x, char **out, size_t *len,
		     struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct mdl_exec_result res;
	struct mdl_rt *rt = NULL;
	sg_err rc;

	*out = NULL;
	*len = 0;
	mdl_exec_result_init(&res, x->max_output);
	rc = mdl_rt_get(me, SG_MODAL_READY_MS, &rt, cancel, err);
	if (!rc)
		rc = mdl_run(&me->cl, &rt->r, x, &res, cancel, err);
	mdl_rt_drop(me, rt);
	atomic_fetch_add(&me->requests, (uint_fast64_t)res.router_calls);
	atomic_fetch_add(&me->execs, 1);
	sg_log_debug("modal: sandbox %s: exec of %s: %d router requests", me->rm.base.id,
		     x->argv[0], res.router_calls);
	if (!rc && sg_buf_addc(&res.out, '\0'))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (!rc) {
		*len = res.out.len - 1;
		*out = res.out.p;
		res.out.p = NULL;
	}
	mdl_exec_result_release(&res);
	return rc;
}

/* A script through sh -c with variables vars ("NAME=value", NULL-ended). */
static sg_err mdl_script(struct mdl_env *me, const char *script, const char *const *vars,
			 const void *in, size_t inlen, char **reply, struct sg_cancel *cancel,
			 struct sg_errinfo *err)
{
	const char *argv[] = { "/bin/sh", "-c", script, NULL }; /* in the environment */
	struct mdl_exec x = { .argv = argv, .env = vars, .stdin_data = in, .stdin_len = inlen,
			      .wait_ms = SG_MODAL_JOB_WAIT_MS + SG_MODAL_TRIP_SLACK_MS,
			      .max_output = SG_MiB, .merge = true, .no_wait = true };
	size_t len;

	return mdl_do(me, &x, reply, &len, cancel, err);
}

/* ---- exec -------------------------------------------------------------------- */

/* "NAME=value" into v; false when out of memory. */
static bool mdl_var(struct sg_strv *v, const char *name, const char *value, size_t n)
{
	return sg_strv_addf(v, "%s=%.*s", name, (int)n, value) == SG_OK;
}

/* Give up on the job of prefix dir: it never starts, or its group dies (remote.h). */
static void mdl_kill(struct sg_remote *rm, const char *dir)
{
	struct mdl_env *me = (struct mdl_env *)rm;
	const char *argv[] = { rm->base.helper, "job", "--dir", dir, "--kill", NULL };
	struct mdl_exec x = { .argv = argv, .wait_ms = SG_MODAL_KILL_MS, .max_output = SG_KiB,
			      .merge = true, .no_wait = true };
	struct sg_errinfo e = { 0 };
	struct sg_cancel none;
	char *reply = NULL;
	size_t len;

	if (sg_cancel_init(&none) != SG_OK)
		return;
	if (mdl_do(me, &x, &reply, &len, &none, &e))
		sg_log_warn("sandbox %s: cannot stop a cancelled command: %s", rm->base.id, e.msg);
	free(reply);
	sg_cancel_release(&none);
}

/* A job's variables (remote.h) as an exec's "NAME=value" list into v. */
static bool mdl_vars(const json_t *vars, struct sg_strv *v)
{
	const char *k;
	json_t *val;

	json_object_foreach((json_t *)vars, k, val) {
		if (!mdl_var(v, k, json_string_value(val), json_string_length(val)))
			return false;
	}
	return true;
}

/*
 * One request of the job (remote.h): the start, or (for a job that
 * detaches and answered "pending") the attach.  A simple exec's job
 * relays its output through pipes (--rm: no runner, no output files) and
 * the router keeps it by offset, so a broken read reconnects where it
 * stopped (api.c) and nothing attaches later; a trip that fails even so
 * is never sent again under a new exec id (an attach could not read a
 * relayed job's output): the driver kills the job and says it may have
 * run.  stdin that is not in variables travels on the start's stdin.
 */
static enum sg_job_trip mdl_trip(struct sg_remote *rm, struct sg_remote_job *j, bool attach,
				 struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const struct sg_exec *x = j->x;
	const char *argv[] = { "/bin/sh", "-c", SG_JOB_EVAL, NULL }; /* in the environment */
	struct mdl_exec mx = {
		.argv = argv, .max_output = x->max_output + SG_HELPER_STDERR + SG_KiB * 4,
		.merge = true, .no_wait = true,
	};
	struct sg_strv v = SG_STRV_INIT;
	char *reply = NULL;
	size_t len = 0;
	sg_err rc;

	/* The job's own timer ends the command; the slack covers the trips. */
	if ((x->flags & SG_EXEC_DETACHES) || attach)
		mx.wait_ms = SG_MODAL_JOB_WAIT_MS + SG_MODAL_TRIP_SLACK_MS;
	else if (x->timeout_ms > 0)
		mx.wait_ms = x->timeout_ms + SG_MODAL_TRIP_SLACK_MS;
	if (!attach && j->upload) {
		argv[2] = mdl_job_up_sh;
		mx.stdin_data = x->stdin_data;
		mx.stdin_len = x->stdin_len;
	}
	rc = mdl_vars(attach ? j->attach : j->start, &v)
		     ? SG_OK : sg_err_set(err, SG_E_INTERNAL, "out of memory");
	mx.env = sg_strv_get(&v);
	if (!rc)
		rc = mdl_do((struct mdl_env *)rm, &mx, &reply, &len, cancel, err);
	if (!rc && sg_buf_add(&j->reply, reply, len))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	free(reply);
	sg_strv_release(&v);
	if (rc == SG_E_WORKSPACE_LOST || rc == SG_E_PERMISSION || rc == SG_E_NOT_FOUND) {
		char why[sizeof(err->msg)];

		snprintf(why, sizeof(why), "%s", err->msg);
		sg_err_clear(err);
		sg_err_set(err, rc == SG_E_NOT_FOUND ? SG_E_UNAVAILABLE : rc, "sandbox %s: %s",
			   rm->base.id, why);
		return SG_JOB_TRIP_FATAL;
	}
	return rc ? SG_JOB_TRIP_FAILED : SG_JOB_TRIP_REPLY;
}

static const struct sg_remote_ops mdl_ops = {
	.provider = "Modal's exec variables",
	.inline_max = SG_MODAL_INLINE_MAX,
	.stdin_vars = SG_MODAL_STDIN_VARS,
	.relays = true,
	.relay_wait_ms = SG_MODAL_JOB_WAIT_MS,
	.fails = 1,
	.kill_unseen = true,
	.trip = mdl_trip,
	.kill = mdl_kill,
};

/* The number on text's last non-empty line, or ULLONG_MAX. */
static unsigned long long last_number(const char *text)
{
	const char *end = text + strlen(text), *p;
	char *stop;
	unsigned long long n;

	while (end > text && (end[-1] == '\n' || end[-1] == ' '))
		end--;
	p = end;
	while (p > text && p[-1] != '\n')
		p--;
	n = strtoull(p, &stop, 10);
	return stop == end && stop != p ? n : ULLONG_MAX;
}

/*
 * Exports: the file's bytes (sg_exec_read_file_sh, one exec through the
 * router) written to fd as they arrive, so the gateway's memory stays
 * flat whatever the size.  No job around it: the bytes are the whole
 * output, and stderr and the exit status come apart.
 */
static sg_err mdl_get_file(struct sg_env *env, const char *path, int fd, size_t max,
			   struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct mdl_env *me = (struct mdl_env *)env;
	const struct mdl_exec x = {
		.argv = (const char *const[]){ "/bin/sh", "-c", /* in the environment */
					       sg_exec_read_file_sh, "sg", path, "auto", NULL },
	};
	struct mdl_exec_result res;
	struct mdl_rt *rt = NULL;
	unsigned long long now;
	const char *why;
	sg_err rc;

	mdl_exec_result_init(&res, max);
	sg_buf_init(&res.err, SG_HELPER_STDERR);
	res.out_fd = fd;
	rc = mdl_rt_get(me, SG_MODAL_READY_MS, &rt, cancel, err);
	if (!rc)
		rc = mdl_run(&me->cl, &rt->r, &x, &res, cancel, err);
	mdl_rt_drop(me, rt);
	atomic_fetch_add(&me->requests, (uint_fast64_t)res.router_calls);
	atomic_fetch_add(&me->execs, 1);
	why = res.err.len && !sg_buf_addc(&res.err, '\0') ? res.err.p : "no message";
	if (rc == SG_E_TOO_LARGE)
		rc = sg_err_set(err, rc, "%s is larger than %zu bytes", path, max);
	else if (!rc && res.code == 3)
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT,
				"%s is not a regular file (it changed after it was checked)", path);
	else if (!rc && res.code == 4)
		rc = sg_err_set(err, SG_E_NOT_FOUND, "%s does not exist", path);
	else if (!rc && res.code != 0)
		rc = sg_err_set(err, SG_E_NOT_FOUND, "%s cannot be read in sandbox %s: %.160s",
				path, me->rm.base.id, why);
	else if (!rc && (now = last_number(why)) != res.out_total)
		rc = sg_err_set(err, SG_E_PROVIDER,
				"%s: %llu bytes arrived from sandbox %s, and the file now holds %llu (it changed while it was read, or the router cut its output short)",
				path, (unsigned long long)res.out_total, me->rm.base.id,
				(unsigned long long)now);
	mdl_exec_result_release(&res);
	return rc;
}

/* ---- provision --------------------------------------------------------------- */

static uint32_t mdl_timeout_secs(const struct sg_profile *p)
{
	int64_t t = p->lifetime_seconds;

	if (t < SG_MODAL_MIN_TIMEOUT_S)
		t = SG_MODAL_MIN_TIMEOUT_S;
	if (t > SG_MODAL_MAX_TIMEOUT_S)
		t = SG_MODAL_MAX_TIMEOUT_S;
	return (uint32_t)t;
}

/*
 * SandboxCreateV2 of def with tags: its answer carries the task and the
 * router's access too, so the first exec needs neither SandboxGetTaskId
 * nor TaskGetCommandRouterAccess (two round trips fewer to ready).  An
 * answer without them is still a sandbox: the router is then opened the
 * v1 way, on first use.
 */
static sg_err mdl_create_v2(struct mdl_env *me, Modal__Client__Sandbox *def,
			    Modal__Client__SandboxTag **tags, size_t n_tags, int *status,
			    struct sg_cancel *cancel, struct sg_errinfo *err)
{
	Modal__Client__SandboxCreateV2Request req = MODAL__CLIENT__SANDBOX_CREATE_V2_REQUEST__INIT;
	Modal__Client__SandboxCreateV2Response *resp = NULL;
	const Modal__Client__CommandRouterAccess *acc;
	struct mdl_rt *rt = NULL;
	struct sg_errinfo soft = { 0 };
	sg_err rc;

	req.app_id = me->app_id;
	req.definition = def;
	req.n_tags = n_tags;
	req.tags = tags;
	rc = mdl_call(&me->cl, "SandboxCreateV2", &req.base,
		      &modal__client__sandbox_create_v2_response__descriptor,
		      (ProtobufCMessage **)&resp, 0, status, cancel, err);
	if (!rc && !resp->sandbox_id[0])
		rc = sg_err_set(err, SG_E_PROVIDER, "Modal's create gave no sandbox id");
	if (rc)
		goto out;
	snprintf(me->rm.base.id, sizeof(me->rm.base.id), "%s", resp->sandbox_id);
	acc = resp->command_router_access;
	if (!acc || !resp->task_id[0] || !acc->url[0] || !acc->jwt[0])
		goto out;
	rt = calloc(1, sizeof(*rt));
	if (rt && mdl_router_attach(&me->cl, resp->task_id, acc->url, acc->jwt, &rt->r,
				    &soft) == SG_OK) {
		rt->refs = 1; /* the env's */
		pthread_mutex_lock(&me->rm.lock);
		if (!me->rt) {
			me->rt = rt;
			rt = NULL;
		}
		pthread_mutex_unlock(&me->rm.lock);
	} else {
		sg_log_warn("Modal's access to the router of sandbox %s is unusable (%s); "
			    "asking for it again", me->rm.base.id, soft.msg[0] ? soft.msg : "out of memory");
	}
	if (rt)
		mdl_router_release(&rt->r);
	free(rt);
out:
	if (resp) {
		if (resp->command_router_access)
			mdl_wipe(resp->command_router_access->jwt,
				strlen(resp->command_router_access->jwt));
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	}
	return rc;
}

/*
 * SandboxCreate from image.  *status is the gRPC status; rc SG_OK means a
 * sandbox id in me->rm.base.id.
 */
static sg_err mdl_create_once(struct mdl_env *me, const char *image, int *status,
			      struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const struct sg_profile *p = me->rm.base.profile;
	Modal__Client__SandboxCreateRequest req = MODAL__CLIENT__SANDBOX_CREATE_REQUEST__INIT;
	Modal__Client__SandboxCreateResponse *resp = NULL;
	Modal__Client__Sandbox def = MODAL__CLIENT__SANDBOX__INIT;
	Modal__Client__Resources res = MODAL__CLIENT__RESOURCES__INIT;
	Modal__Client__NetworkAccess na = MODAL__CLIENT__NETWORK_ACCESS__INIT;
	char *cidrs[MDL_CIDRS_MAX];
	size_t nc = 0;
	struct mdl_tags t;
	sg_err rc;

	mdl_tags_build(me, NULL, &t);
	def.image_id = (char *)image;
	def.timeout_secs = mdl_timeout_secs(p);
	def._name_case = MODAL__CLIENT__SANDBOX___NAME_NAME;
	def.name = me->name;
	/* The table's range starts at 60: 0 means the field is absent. */
	if (sg_profile_int(p, "idle_timeout_s", 0) > 0) {
		def._idle_timeout_secs_case = MODAL__CLIENT__SANDBOX___IDLE_TIMEOUT_SECS_IDLE_TIMEOUT_SECS;
		def.idle_timeout_secs = (uint32_t)sg_profile_int(p, "idle_timeout_s", 0);
	}
	/*
	 * milli_cpu and memory_mb alone are what Modal reserves, not a bound:
	 * a sandbox may use more CPU and memory than that.  cpus and memory_mb
	 * are limits (docs/security.md), so each is sent as the limit too.
	 */
	if (p->cpus > 0 || p->memory_mb > 0) {
		res.milli_cpu = (uint32_t)(p->cpus * 1000 + 0.5);
		res.milli_cpu_max = res.milli_cpu;
		res.memory_mb = (uint32_t)p->memory_mb;
		res.memory_mb_max = res.memory_mb;
		def.resources = &res;
	}
	if (p->network == SG_NET_NONE) {
		def.block_network = true;
	} else if (p->network == SG_NET_ALLOW) {
		nc = mdl_cidrs(p, cidrs);
		if (nc == 0) {
			def.block_network = true; /* nothing enforceable is left */
		} else {
			na.network_access_type =
				MODAL__CLIENT__NETWORK_ACCESS_TYPE__NETWORK_ACCESS_TYPE_ALLOWLIST;
			na.n_allowed_cidrs = nc;
			na.allowed_cidrs = cidrs;
			def.network_access = &na;
		}
	}
	if (me->cl.creds.sandbox_v2)
		return mdl_create_v2(me, &def, t.p, t.n, status, cancel, err);
	req.app_id = me->app_id;
	req.definition = &def;
	req.environment_name = me->cl.creds.environment;
	req.n_tags = t.n;
	req.tags = t.p;
	rc = mdl_call(&me->cl, "SandboxCreate", &req.base,
		      &modal__client__sandbox_create_response__descriptor,
		      (ProtobufCMessage **)&resp, 0, status, cancel, err);
	if (!rc && !resp->sandbox_id[0])
		rc = sg_err_set(err, SG_E_PROVIDER, "Modal's create gave no sandbox id");
	if (!rc)
		snprintf(me->rm.base.id, sizeof(me->rm.base.id), "%s", resp->sandbox_id);
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

/*
 * Whether a create that failed with gRPC status `status` (rc its code) was
 * refused by Modal, so that nothing was made.  Only a status the server
 * sent to refuse the request proves that.  Everything else leaves the
 * outcome unknown, because Modal commits a sandbox before it answers: a
 * lost or cut reply, a retryable status, and also a reply that said OK
 * but could not be read (no protobuf, no sandbox id) or one whose message
 * was over the size limit, which this side turns into RESOURCE_EXHAUSTED
 * (rc SG_E_TOO_LARGE) although the server may have sent OK.
 */
static bool mdl_create_refused(int status, sg_err rc)
{
	switch (status) {
	case SG_GRPC_INVALID_ARGUMENT:
	case SG_GRPC_NOT_FOUND:
	case SG_GRPC_PERMISSION_DENIED:
	case SG_GRPC_UNAUTHENTICATED:
	case SG_GRPC_FAILED_PRECONDITION:
	case SG_GRPC_OUT_OF_RANGE:
	case SG_GRPC_UNIMPLEMENTED:
		return true;
	case SG_GRPC_RESOURCE_EXHAUSTED:
		return rc != SG_E_TOO_LARGE;
	default:
		return false;
	}
}

/*
 * Create the sandbox, or adopt the one its name already holds.  A create
 * whose answer never came, or came unreadable, may have made it: the name
 * is looked up, and only a sandbox carrying this provision's create tag
 * counts as made here; when the lookup cannot tell, may_remain tells the
 * gateway to settle it.
 */
static sg_err mdl_create(struct mdl_env *me, const char *image, bool from_snapshot,
			 struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_errinfo once = { 0 }, look = { 0 };
	int status = 0;
	bool mine = false, foreign = false;
	sg_err rc, lr;

	sg_progress_begin("create", "creating sandbox %s", me->name);
	rc = mdl_create_once(me, image, &status, cancel, &once);
	if (!rc) {
		me->rm.fresh = true;
		sg_progress_end(rc);
		sg_crashpoint("adapter:created");
		return SG_OK;
	}
	sg_progress_end(rc);
	if (status == SG_GRPC_NOT_FOUND && from_snapshot)
		return sg_err_set(err, SG_E_WORKSPACE_LOST,
				  "the snapshot of identity \"%.60s\" (image %s) is gone at Modal",
				  me->rm.base.identity, image);
	if (mdl_create_refused(status, rc))
		return sg_err_set(err, rc, "creating the sandbox failed: %s", once.msg);
	if (sg_cancel_check(cancel)) {
		me->rm.base.may_remain = true;
		return sg_err_set(err, sg_cancel_check(cancel), "creating the sandbox was cancelled");
	}
	/* What does the name hold now? */
	lr = mdl_by_name(me, me->rm.base.id, cancel, &look);
	if (!lr)
		lr = mdl_check_owner(me, me->rm.base.id, &mine, &foreign, cancel, &look);
	if (!lr) {
		me->rm.fresh = mine;
		me->rm.base.resumed = !mine;
		if (mine)
			sg_crashpoint("adapter:created");
		return SG_OK;
	}
	me->rm.base.id[0] = '\0';
	/*
	 * Whose it is cannot be told (even ALREADY_EXISTS may answer our own
	 * retried create, and a lookup whose reply cannot be read proves
	 * nothing): the gateway settles it by this session's tags, which never
	 * match another's sandbox.  Only tags that were read and name another
	 * owner settle it here.
	 */
	if (foreign)
		return sg_err_set(err, lr, "%s", look.msg);
	me->rm.base.may_remain = true;
	return sg_err_set(err, status == SG_GRPC_ALREADY_EXISTS ? SG_E_PROVIDER : rc,
			  "creating the sandbox failed: %s; %s", once.msg,
			  lr == SG_E_NOT_FOUND ? "no sandbox of that name appeared"
					       : look.msg);
}

static sg_err mdl_install_run(void *ctx, const char *script, const char *dir, const char *sha,
			      const char *upload, const void *in, size_t inlen, char **reply,
			      struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct mdl_env *me = ctx;
	struct sg_strv v = { 0 };
	char *text = NULL;
	sg_err rc;

	*reply = NULL;
	if (!mdl_var(&v, "d", dir, strlen(dir)) || !mdl_var(&v, "s", sha, strlen(sha)) ||
	    !mdl_var(&v, "u", upload, strlen(upload)) ||
	    asprintf(&text, "exec 2>/dev/null\n%s", script) < 0) {
		text = NULL;
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	} else {
		rc = mdl_script(me, text, sg_strv_get(&v), in, inlen, reply, cancel, err);
	}
	free(text);
	sg_strv_release(&v);
	return rc;
}

/*
 * Prepare the inside in one exec: sandgate's directories, root, sg-helper
 * (on the exec's stdin for a sandbox made here; a resumed one is asked
 * first and sent it only when it lacks it), and the probe.
 */
static sg_err mdl_setup(struct mdl_env *me, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_env *env = &me->rm.base;
	struct sg_helper_bin bin = { .fd = -1 };
	struct sg_install in = { .ctx = me, .dir = "/tmp", .nonce = me->rm.nonce,
				 .run = mdl_install_run };
	struct sg_strv v = { 0 };
	char *reply = NULL, *e = NULL, *probe;
	int64_t t0 = sg_now_ms();
	sg_err rc;

	rc = sg_helper_bin_open(env->helper_host, &bin, err);
	if (!rc && me->rm.fresh)
		rc = sg_helper_bin_load(&bin, err);
	if (rc)
		goto out;
	if (!mdl_var(&v, "SG_ROOT", env->root, strlen(env->root)) ||
	    !mdl_var(&v, "SG_SHA", bin.sha, strlen(bin.sha)) ||
	    !mdl_var(&v, "SG_PROBE", "1", 1) || (me->rm.fresh && !mdl_var(&v, "SG_UP", "-", 1))) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	rc = mdl_script(me, mdl_setup_sh, sg_strv_get(&v), me->rm.fresh ? bin.data : NULL,
			me->rm.fresh ? (size_t)bin.size : 0, &reply, cancel, err);
	if (rc)
		goto out;
	if ((e = sg_cloud_kv(reply, "error"))) {
		rc = sg_err_set(err, SG_E_PROVIDER, "sandbox %s: %s", env->id, e);
		goto out;
	}
	if (!(e = sg_cloud_kv(reply, "base")) || e[0] != '/') {
		rc = sg_err_set(err, SG_E_PROVIDER,
				"sandbox %s: the set-up script gave no answer (is there a POSIX sh?)",
				env->id);
		goto out;
	}
	rc = sg_remote_dirs(&me->rm, SG_OK, e, err);
	e = NULL;
	if (rc)
		goto out;
	if (!sg_cloud_flag(reply, "root")) {
		rc = sg_err_set(err, SG_E_PROVIDER, "sandbox %s: cannot create root %s", env->id,
				env->root);
		goto out;
	}
	if (asprintf(&env->ctl_dir, "%s/ctl", me->rm.base_dir) < 0 ||
	    asprintf(&env->helper, "%s/sg-helper-%s", me->rm.base_dir, bin.sha) < 0) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (!sg_cloud_flag(reply, "helper") && !sg_cloud_flag(reply, "installed")) {
		char *ie = sg_cloud_kv(reply, "install_error");

		if (ie || me->rm.fresh) {
			rc = sg_err_set(err, SG_E_PROVIDER, "sandbox %s: installing sg-helper failed: %s",
					env->id, ie ? ie : "no answer");
			free(ie);
			goto out;
		}
		/* A resumed sandbox without it: install, then probe via the gateway. */
		in.dir = me->rm.base_dir;
		rc = sg_install_helper(&in, &bin, &me->install, cancel, err);
		goto out;
	}
	me->install.requests = me->rm.fresh ? 1 : 0;
	me->install.bytes = me->rm.fresh ? bin.size : 0;
	me->install.ms = sg_now_ms() - t0;
	probe = strstr(reply, "probe<<\n");
	if (probe && !(env->probe = strdup(probe + 8)))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
out:
	sg_helper_bin_close(&bin);
	sg_strv_release(&v);
	free(reply);
	free(e);
	return rc;
}

static json_t *mdl_facts(const struct mdl_env *me)
{
	const struct sg_profile *p = me->rm.base.profile;
	json_t *req = json_object(), *app = json_object(), *f;

	if (p->cpus > 0) {
		json_object_set_new(req, "cpus", json_real(p->cpus));
		json_object_set_new(app, "cpus", json_real((double)(uint32_t)(p->cpus * 1000 + 0.5) / 1000));
	}
	if (p->memory_mb > 0) {
		json_object_set_new(req, "memory_mb", json_integer(p->memory_mb));
		json_object_set_new(app, "memory_mb", json_integer(p->memory_mb));
	}
	/*
	 * Nothing of this host is in a sandbox's reach but what the router
	 * carries: it is a remote_host.  No mechanism: Modal's API does not
	 * say what runs the sandbox, and facts are observed, never what a
	 * backend's name suggests.
	 */
	f = json_pack("{s:{s:o, s:o}, s:s, s:{s:b}, s:{s:I, s:i, s:I}, "
		      "s:{s:s, s:s, s:s, s:s, s:I, s:b}}",
		      "resources", "requested", req, "applied", app, "safety_class",
		      "remote_host", "isolation", "host_filesystem_restricted", 1,
		      "helper_install", "bytes", (json_int_t)me->install.bytes, "requests",
		      me->install.requests, "ms", (json_int_t)me->install.ms, "modal", "sandbox",
		      me->rm.base.id, "name", me->name, "app", me->app, "image", me->image_id ? me->image_id : "",
		      "timeout_secs", (json_int_t)mdl_timeout_secs(p), "network_blocked",
		      p->network != SG_NET_DEFAULT);
	return f;
}

/* Find or make the sandbox; sets base.id, fresh, resumed, image_id. */
static sg_err mdl_obtain(struct mdl_env *me, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const struct sg_profile *p = me->rm.base.profile;
	char snap[128], live[128];
	struct timespec snap_at, live_at;
	bool mine;
	sg_err rc;

	snap[0] = live[0] = '\0';
	if (p->persistent) {
		mdl_record_read(me, MDL_REC_IMAGE, snap, &snap_at);
		mdl_record_read(me, MDL_REC_LIVE, live, &live_at);
	}
	/*
	 * A snapshot recorded after the live sandbox was: the keep took the
	 * work, and the gateway ended before it could forget .live.  Strictly
	 * later, so that a tie (one clock tick) stays a loss: never a silent
	 * step back.
	 */
	if (live[0] && snap[0] &&
	    (snap_at.tv_sec > live_at.tv_sec ||
	     (snap_at.tv_sec == live_at.tv_sec && snap_at.tv_nsec > live_at.tv_nsec))) {
		sg_log_info("modal: identity \"%s\": the snapshot %s was recorded after sandbox %s, so it holds the work",
			    me->rm.base.identity, snap, live);
		mdl_record_forget(me->rm.base.state_dir, me->app, me->name, MDL_REC_LIVE);
		live[0] = '\0';
	}
	/*
	 * An identity this state directory has no record of (and no snapshot
	 * or live sandbox of) is created at once, one request less: a sandbox
	 * of that name made elsewhere turns the create into ALREADY_EXISTS,
	 * which mdl_create answers with the lookup and the owner check.
	 */
	rc = SG_E_NOT_FOUND;
	if (me->rm.base.known || me->rm.base.require_existing || snap[0] || live[0])
		rc = mdl_by_name(me, me->rm.base.id, cancel, err);
	if (!rc && live[0] && strcmp(me->rm.base.id, live) != 0) {
		/* Not the sandbox whose work is unsnapshotted: that one is gone. */
		rc = mdl_lost(me, live, me->rm.base.id, snap, snap_at.tv_sec, err);
		me->rm.base.id[0] = '\0';
		return rc;
	}
	if (!rc) {
		rc = mdl_check_owner(me, me->rm.base.id, &mine, NULL, cancel, err);
		if (!rc)
			me->rm.base.resumed = true;
		return rc;
	}
	me->rm.base.id[0] = '\0';
	if (rc != SG_E_NOT_FOUND)
		return rc;
	/* The sandbox that held the newest work is gone: never a silent step back. */
	if (live[0])
		return mdl_lost(me, live, NULL, snap, snap_at.tv_sec, err);
	if (me->rm.base.require_existing && !snap[0])
		return sg_err_set(err, SG_E_WORKSPACE_LOST,
				  "identity \"%.60s\" has no sandbox or snapshot in Modal app %s",
				  me->rm.base.identity, me->app);
	if (snap[0]) {
		me->image_id = strdup(snap);
		if (!me->image_id)
			return sg_err_set(err, SG_E_INTERNAL, "out of memory");
		rc = mdl_create(me, snap, true, cancel, err);
		if (rc == SG_E_WORKSPACE_LOST)
			mdl_record_forget(me->rm.base.state_dir, me->app, me->name, MDL_REC_IMAGE);
		if (!rc)
			me->rm.base.resumed = true;
		return rc;
	}
	rc = mdl_image_for(me, p->image ? p->image : MDL_IMAGE_DEFAULT, &me->image_id, cancel, err);
	if (!rc)
		rc = mdl_create(me, me->image_id, false, cancel, err);
	return rc;
}

static sg_err mdl_provision(struct sg_env *env, struct sg_cancel *cancel,
			    struct sg_errinfo *err)
{
	struct mdl_env *me = (struct mdl_env *)env;
	const struct sg_profile *p = env->profile;
	struct mdl_rt *rt = NULL;
	sg_err rc;

	rc = sg_remote_init(&me->rm, &mdl_ops, err);
	if (rc)
		return rc;
	atomic_init(&me->requests, 0);
	atomic_init(&me->execs, 0);
	sg_cloud_random_hex(me->create_id, 16);
	if (env->root[0] != '/')
		return sg_err_set(err, SG_E_INVALID_ARGUMENT, "root %s is not an absolute path",
				  env->root);
	if (!(me->app = strdup(mdl_app_name(p))) ||
	    !(me->name = sg_cloud_name(env->identity)))
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	rc = mdl_client_open(p, &me->cl, err);
	if (rc)
		return rc;
	me->cl_ready = true;
	/*
	 * A sandbox made from the profile's image (no record, so no lookup and
	 * no snapshot first) needs the environment's builder version unless the
	 * image is cached: asked beside the app, one round trip for both.
	 */
	rc = mdl_app_and_env(&me->cl, me->app,
			     !env->known && !env->require_existing &&
				     !mdl_image_cached(me, p->image ? p->image : MDL_IMAGE_DEFAULT),
			     &me->app_id, cancel, err);
	if (!rc)
		rc = mdl_obtain(me, cancel, err);
	if (rc)
		goto out;
	/* The first exec waits for the router within SG_MODAL_READY_MS. */
	sg_progress_begin("ready", "waiting for sandbox %s", env->id);
	rc = mdl_rt_get(me, SG_MODAL_READY_MS, &rt, cancel, err);
	mdl_rt_drop(me, rt);
	sg_progress_end(rc);
	if (!rc) {
		sg_progress_begin("helper", "preparing sandbox %s", env->id);
		rc = mdl_setup(me, cancel, err);
		sg_progress_end(rc);
	}
	/* The sandbox's /tmp is its own, never another user's of this host. */
	env->own_tmp = true;
	if (!rc && !(env->facts = mdl_facts(me)))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	/*
	 * From the reply on, the session may write: the workspace's newest
	 * state is in this sandbox until a keep snapshots it.  Recorded before
	 * the reply, so that its loss is told however the session ends.
	 */
	if (!rc && p->persistent)
		rc = mdl_record_write(me, MDL_REC_LIVE, env->id, err);
out:
	if (rc && me->rm.fresh && env->id[0] && sg_cancel_check(cancel)) {
		/* Cancelled: the gateway settles it within its budget. */
		env->may_remain = true;
	} else if (rc && me->rm.fresh && env->id[0]) {
		/* A failed create leaves nothing behind. */
		struct sg_errinfo e2 = { 0 };

		if (mdl_terminate(&me->cl, env->id, NULL, &e2)) {
			sg_log_err("sandbox %s may remain after a failed provisioning: %s", env->id,
				   e2.msg);
			env->may_remain = true;
		}
	}
	return rc;
}

/* ---- teardown, list, destroy, release ------------------------------------- */

/* Snapshot, record, terminate: a persistent sandbox kept. */
static sg_err mdl_keep(struct mdl_env *me, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct mdl_rt *rt = NULL;
	char *image = NULL;
	sg_err rc;

	sg_progress_begin("snapshot", "snapshotting sandbox %s", me->rm.base.id);
	rc = mdl_rt_get(me, SG_MODAL_CALL_MS, &rt, cancel, err);
	if (!rc)
		rc = mdl_snapshot(&rt->r, sg_profile_int(me->rm.base.profile, "snapshot_ttl_seconds",
						      MDL_SNAPSHOT_TTL_DEFAULT_S),
				  SG_MODAL_IMAGE_MS, &image, cancel, err);
	mdl_rt_drop(me, rt);
	sg_progress_end(rc);
	if (rc)
		return sg_err_set(err, rc, "snapshotting sandbox %s: %s", me->rm.base.id, err->msg);
	rc = mdl_record_write(me, MDL_REC_IMAGE, image, err);
	if (!rc) {
		struct sg_errinfo e2 = { 0 };

		/* The snapshot holds the newest work now, not the sandbox. */
		mdl_record_forget(me->rm.base.state_dir, me->app, me->name, MDL_REC_LIVE);
		/* The tag helps an operator; the record on this host is what resumes. */
		if (mdl_tags_set(me, image, cancel, &e2))
			sg_log_warn("sandbox %s: cannot tag it with its snapshot: %s", me->rm.base.id,
				    e2.msg);
		rc = mdl_terminate(&me->cl, me->rm.base.id, cancel, err);
	}
	free(image);
	return rc;
}

static sg_err mdl_teardown(struct sg_env *env, enum sg_fate fate, struct sg_cancel *cancel,
			   struct sg_errinfo *err)
{
	struct mdl_env *me = (struct mdl_env *)env;

	sg_log_info("modal: sandbox %s: %llu execs, %llu router requests", env->id,
		    (unsigned long long)atomic_load(&me->execs),
		    (unsigned long long)atomic_load(&me->requests));
	if (fate == SG_FATE_DETACH || !env->id[0] || !me->cl_ready)
		return SG_OK;
	/*
	 * A kept workspace that is not persistent stays as it is, running:
	 * Modal cannot stop a sandbox, and the next session of the identity
	 * adopts it by name.  Its lifetime (timeout_secs), the idle timeout
	 * or `sandgate envs gc` ends it.
	 */
	if (fate == SG_FATE_KEEP && !env->profile->persistent)
		return SG_OK;
	if (fate == SG_FATE_KEEP)
		return mdl_keep(me, cancel, err);
	mdl_records_forget(env->state_dir, me->app, me->name);
	return mdl_terminate(&me->cl, env->id, cancel, err);
}

struct mdl_list_ctx {
	sg_env_list_cb cb;
	void *payload;
};

static int mdl_list_one(const Modal__Client__SandboxInfo *info, void *payload)
{
	struct mdl_list_ctx *c = payload;
	struct mdl_tagv t = { info->tags, info->n_tags };
	struct sg_env_info e;

	sg_cloud_info(info->id, info->task_info && info->task_info->result ? "finished" : "running",
		      mdl_tag_get, &t, &e);
	return c->cb(&e, c->payload);
}

static sg_err mdl_envs_list(const struct sg_profile *p, const char *state_dir, sg_env_list_cb cb,
		       void *payload, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	char tag_m[128], tag_p[256];
	const char *tags[] = { tag_m, tag_p, NULL };
	struct mdl_list_ctx c = { cb, payload };
	struct mdl_client cl;
	char *app_id = NULL;
	sg_err rc;

	(void)state_dir;
	snprintf(tag_m, sizeof(tag_m), "%s=%s", SG_CLOUD_TAG_MANAGED, SG_CLOUD_MANAGER);
	snprintf(tag_p, sizeof(tag_p), "%s=%s", SG_CLOUD_TAG_PROFILE, p->name);
	rc = mdl_client_open(p, &cl, err);
	if (rc)
		return rc;
	rc = mdl_app(&cl, mdl_app_name(p), &app_id, cancel, err);
	if (!rc)
		rc = mdl_list(&cl, app_id, tags, mdl_list_one, &c, cancel, err);
	free(app_id);
	mdl_client_release(&cl);
	return rc;
}

static sg_err mdl_destroy(const struct sg_profile *p, const char *state_dir, const char *id,
			  struct sg_cancel *cancel, struct sg_errinfo *err)
{
	Modal__Client__SandboxTagsGetResponse *t = NULL;
	struct mdl_client cl;
	const char *m, *who;
	sg_err rc;

	rc = mdl_client_open(p, &cl, err);
	if (rc)
		return rc;
	rc = mdl_tags_get(&cl, id, &t, cancel, err);
	if (rc == SG_E_NOT_FOUND)
		rc = sg_err_set(err, rc, "there is no sandbox %s", id);
	m = rc ? NULL : mdl_tag(t->tags, t->n_tags, SG_CLOUD_TAG_MANAGED);
	/* An operator's typo must never terminate a sandbox sandgate did not make. */
	if (!rc && (!m || strcmp(m, SG_CLOUD_MANAGER) != 0))
		rc = sg_err_set(err, SG_E_PERMISSION, "sandbox %s was not made by sandgate", id);
	if (!rc)
		rc = mdl_terminate(&cl, id, cancel, err);
	who = rc ? NULL : mdl_tag(t->tags, t->n_tags, SG_CLOUD_TAG_IDENTITY);
	if (who) {
		/* Removing an environment removes its snapshot's record too. */
		char *name = sg_cloud_name(who);

		if (name)
			mdl_records_forget(state_dir, mdl_app_name(p), name);
		free(name);
	}
	if (t)
		protobuf_c_message_free_unpacked(&t->base, NULL);
	mdl_client_release(&cl);
	return rc;
}

static void mdl_release(struct sg_env *env)
{
	struct mdl_env *me = (struct mdl_env *)env;

	if (me->rt) {
		mdl_router_release(&me->rt->r);
		free(me->rt);
		me->rt = NULL;
	}
	sg_remote_release(&me->rm);
	if (me->cl_ready)
		mdl_client_release(&me->cl);
	free(me->app);
	free(me->app_id);
	free(me->name);
	free(me->image_id);
	sg_env_release_base(env);
}

static void mdl_credentials(const struct sg_profile *p, json_t *out)
{
	struct mdl_creds c;
	struct sg_errinfo e = { 0 };
	sg_err rc = mdl_creds_load(&c, &e);
	const char *id = sg_profile_env(p, "MODAL_TOKEN_ID", NULL);

	if (id)
		json_object_set_new(out, "MODAL_TOKEN_ID", json_string(rc ? "missing" : "found"));
	else
		json_object_set_new(out, "~/.modal.toml", json_string(rc ? "missing" : "found"));
	memset(&c, 0, sizeof(c));
}

const struct sg_adapter sg_adapter_modal = {
	.name = "modal",
	.caps = SG_CAP_FILES | SG_CAP_LIST,
	.env_size = sizeof(struct mdl_env),
	.fields = mdl_fields,
	.validate = mdl_validate,
	.provision = mdl_provision,
	.exec = sg_remote_exec,
	.get_file = mdl_get_file,
	.teardown = mdl_teardown,
	.list = mdl_envs_list,
	.destroy = mdl_destroy,
	.release = mdl_release,
	.credentials = mdl_credentials,
};
