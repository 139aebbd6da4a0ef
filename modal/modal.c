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
 * command (three with stdin too large for variables), sent side by side
 * (api.c): the read leaves a few ms after the start, and one that found no
 * exec yet (it overtook the start) is sent again once the start answered.
 * The
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

#include "adapters/cloud.h"
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
	struct mdl_client cl; /* rm.opened: ready */
	char *app;       /* the app's name (with cl) */
	char *app_id;
	char *image_id;  /* what the sandbox is created from */
	bool from_snap;  /* image_id is the identity's snapshot */
	char create_id[33];
	struct mdl_rt *rt; /* under rm.lock */
	atomic_uint_fast64_t requests; /* router requests of every exec */
	atomic_uint_fast64_t execs;
	struct sg_install_cost install;
};

/* ---- Scripts run in the sandbox ------------------------------------------
 *
 * Parameters arrive as the exec's variables (SG_*), never spliced into the
 * text.  The set-up is cloud.h's, after a HOME that Modal's runtime may
 * leave unset is made /root, where its sandboxes run.
 */
static const char mdl_home_sh[] = "case $HOME in /*) ;; *) HOME=/root ;; esac\n";

/* The job (remote.h) whose stdin is written to SG_UP first. */
static const char mdl_job_up_sh[] =
	"(umask 077; cat >\"$SG_UP\") || exit 126; eval \"exec $SG_X\"";

/* ---- validate ------------------------------------------------------------ */

/*
 * The profile fields the modal backend honours (adapter.h), its own first
 * (docs/modal.md).  network is partial: IPv6 ranges and domains cannot be
 * enforced by Modal's CIDR allow list.  `workspace` is accepted for the
 * host's sake: commands see the workspace at binding.root.
 */
static const struct sg_field mdl_fields[] = {
	SG_FIELD_OWN_STRING("app"), SG_FIELD_OWN_INT("idle_timeout_s", 60, SG_MODAL_MAX_TIMEOUT_S),
	SG_FIELD_OWN_INT("snapshot_ttl_seconds", MDL_SNAPSHOT_TTL_NONE, MDL_SNAPSHOT_TTL_MAX_S),
	SG_FIELD("image"), SG_FIELD("workspace"), SG_FIELD("persistent"), SG_FIELD("shared"),
	SG_FIELD_BEST_EFFORT("network"), SG_FIELD("cpus"), SG_FIELD("memory_mb"),
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

/* The client and the app's name, for a session or an operator's call (remote.h). */
static sg_err mdl_open(struct sg_remote *rm, const struct sg_profile *p, struct sg_errinfo *err)
{
	struct mdl_env *me = (struct mdl_env *)rm;
	struct mdl_creds creds;
	sg_err rc = mdl_creds_load(&creds, err);

	if (!rc)
		rc = mdl_client_init(&me->cl, &creds, NULL, err);
	mdl_wipe(&creds, sizeof(creds));
	if (!rc && !(me->app = strdup(mdl_app_name(p)))) {
		mdl_client_release(&me->cl);
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	return rc;
}

/* The client and the app's names go with the env, or with an operator's call. */
static void mdl_close(struct sg_remote *rm)
{
	struct mdl_env *me = (struct mdl_env *)rm;

	free(me->app_id);
	free(me->app);
	me->app = me->app_id = NULL;
	mdl_client_release(&me->cl);
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

/*
 * A sandbox as the driver reads it (remote.h), new: {"id", "state",
 * "tags": {name: value}} from Modal's messages; NULL when out of memory.
 */
static json_t *mdl_view(const char *id, const char *state, Modal__Client__SandboxTag *const *tags,
			size_t n)
{
	json_t *t = json_object(), *v = json_pack("{s:s, s:s, s:o}", "id", id ? id : "", "state",
						 state, "tags", json_incref(t));

	for (size_t i = 0; v && i < n; i++)
		if (tags[i]->tag_name && tags[i]->tag_value &&
		    json_object_set_new(t, tags[i]->tag_name, json_string(tags[i]->tag_value))) {
			json_decref(v);
			v = NULL;
		}
	json_decref(t);
	return v;
}

/* A tag of a sandbox's view, or NULL (remote.h). */
static const char *mdl_tag(const json_t *got, const char *key)
{
	return json_string_value(json_object_get(json_object_get(got, "tags"), key));
}

static const char *mdl_tag_get(const void *src, const char *key)
{
	return mdl_tag(src, key);
}

/* SandboxTagsGet of id: *got (new) its view.  SG_E_NOT_FOUND when it is gone. */
static sg_err mdl_lookup(struct sg_remote *rm, const char *id, json_t **got,
			 struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct mdl_client *cl = &((struct mdl_env *)rm)->cl;
	Modal__Client__SandboxTagsGetRequest req = MODAL__CLIENT__SANDBOX_TAGS_GET_REQUEST__INIT;
	Modal__Client__SandboxTagsGetResponse *t = NULL;
	int status = 0;
	sg_err rc;

	*got = NULL;
	req.sandbox_id = (char *)id;
	rc = mdl_call(cl, MDL_SANDBOX_RPC(cl, "SandboxTagsGet"), &req.base,
		      &modal__client__sandbox_tags_get_response__descriptor,
		      (ProtobufCMessage **)&t, 0, &status, cancel, err);
	if (rc && status == SG_GRPC_NOT_FOUND)
		rc = SG_E_NOT_FOUND;
	if (!rc && !(*got = mdl_view(id, "running", t->tags, t->n_tags)))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (t)
		protobuf_c_message_free_unpacked(&t->base, NULL);
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
	json_t *t = NULL;
	const char *m, *who, *c, *lim;
	char want[96];
	sg_err rc = mdl_lookup(&me->rm, id, &t, cancel, err);

	*made_here = false;
	if (foreign)
		*foreign = false;
	if (rc)
		return rc;
	m = mdl_tag(t, SG_CLOUD_TAG_MANAGED);
	who = mdl_tag(t, SG_CLOUD_TAG_IDENTITY);
	c = mdl_tag(t, SG_CLOUD_TAG_CREATE);
	lim = mdl_tag(t, MDL_TAG_LIMITS);
	mdl_limits(me->rm.base.profile, want);
	if (!m || strcmp(m, SG_CLOUD_MANAGER) != 0 || !who || strcmp(who, me->rm.base.identity) != 0)
		rc = sg_err_set(err, SG_E_PROVIDER,
				"a Modal sandbox named %s exists in app %s and is not sandgate's sandbox for identity \"%.60s\"; terminate or rename it",
				me->rm.name, me->app, me->rm.base.identity);
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
	json_decref(t);
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

	req.sandbox_name = me->rm.name;
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
	char *path = mdl_record_path(me->rm.base.state_dir, me->app, me->rm.name, ext);
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

/* Remove one record; one that is not there is no error. */
static void mdl_record_forget(const char *state_dir, const char *app, const char *name,
			      const char *ext)
{
	char *path = mdl_record_path(state_dir, app, name, ext);

	if (path && unlink(path) != 0 && errno != ENOENT)
		sg_log_warn("cannot remove %s: %s", path, strerror(errno));
	free(path);
}

static sg_err mdl_record_write(const struct mdl_env *me, const char *ext, const char *id,
			       struct sg_errinfo *err)
{
	char *path = mdl_record_path(me->rm.base.state_dir, me->app, me->rm.name, ext), *dir = NULL,
	     *tmp = NULL;
	sg_err rc = SG_OK;
	bool ok;
	int fd;

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
	ok = fd >= 0 && dprintf(fd, "%s\n", id) >= 0 && fsync(fd) == 0;
	/* Closed once whatever failed: a second close could hit another thread's file. */
	ok = fd >= 0 && close(fd) == 0 && ok;
	if (!ok || rename(tmp, path) != 0)
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot record the %s in %s: %s",
				strcmp(ext, MDL_REC_IMAGE) == 0 ? "snapshot" : "sandbox", path,
				strerror(errno));
out:
	free(path);
	free(dir);
	free(tmp);
	return rc;
}

/* Both records of an environment that is being removed. */
static void mdl_records_forget(const char *state_dir, const char *app, const char *name)
{
	mdl_record_forget(state_dir, app, name, MDL_REC_IMAGE);
	mdl_record_forget(state_dir, app, name, MDL_REC_LIVE);
}

/* What this host keeps of identity's environment: its records (remote.h). */
static void mdl_forget(struct sg_remote *rm, const char *identity)
{
	char *name = sg_cloud_name(identity);

	if (name && rm->base.state_dir)
		mdl_records_forget(rm->base.state_dir, ((struct mdl_env *)rm)->app, name);
	free(name);
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
	char *path = mdl_record_path(me->rm.base.state_dir, me->app, me->rm.name, MDL_REC_LIVE),
	     *img = mdl_record_path(me->rm.base.state_dir, me->app, me->rm.name, MDL_REC_IMAGE),
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
	free(path);
	free(img);
	free(why);
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

/* A job's or a script's variables as an exec's "NAME=value" list into v. */
static bool mdl_vars(const json_t *vars, struct sg_strv *v)
{
	const char *k;
	json_t *val;

	json_object_foreach((json_t *)vars, k, val) {
		if (sg_strv_addf(v, "%s=%.*s", k, (int)json_string_length(val),
				 json_string_value(val)))
			return false;
	}
	return true;
}

/* A script through sh -c with variables vars, and stdin in (inlen bytes; may be NULL). */
static sg_err mdl_script_in(struct mdl_env *me, const char *script, const json_t *vars,
			    const void *in, size_t inlen, char **reply, struct sg_cancel *cancel,
			    struct sg_errinfo *err)
{
	const char *argv[] = { "/bin/sh", "-c", script, NULL }; /* in the environment */
	struct mdl_exec x = { .argv = argv, .stdin_data = in, .stdin_len = inlen,
			      .wait_ms = SG_MODAL_JOB_WAIT_MS + SG_MODAL_TRIP_SLACK_MS,
			      .max_output = SG_MiB, .merge = true, .no_wait = true };
	struct sg_strv v = SG_STRV_INIT;
	size_t len;
	sg_err rc;

	*reply = NULL;
	if (!mdl_vars(vars, &v)) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	} else {
		x.env = sg_strv_get(&v);
		rc = mdl_do(me, &x, reply, &len, cancel, err);
	}
	sg_strv_release(&v);
	return rc;
}

/* The driver's script step (remote.h): no stdin. */
static sg_err mdl_script(struct sg_remote *rm, const char *script, json_t *vars, char **reply,
			 struct sg_cancel *cancel, struct sg_errinfo *err)
{
	return mdl_script_in((struct mdl_env *)rm, script, vars, NULL, 0, reply, cancel, err);
}

/* ---- exec -------------------------------------------------------------------- */

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
		/* A start's job may outlive the exec's read: stop at its last line. */
		.stop_mark = j->linger && !attach ? j->mark : NULL,
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

static const struct sg_remote_ops mdl_ops;

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
	def.name = me->rm.name;
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

	rc = mdl_create_once(me, image, &status, cancel, &once);
	if (!rc) {
		me->rm.fresh = true;
		return SG_OK;
	}
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

/* The create step (remote.h): from what mdl_obtain chose, the snapshot or the image. */
static sg_err mdl_create_step(struct sg_remote *rm, json_t **got, struct sg_cancel *cancel,
			      struct sg_errinfo *err)
{
	struct mdl_env *me = (struct mdl_env *)rm;

	*got = NULL;
	return mdl_create(me, me->image_id, me->from_snap, cancel, err);
}

/*
 * The installer's transfer (install.h), for a resumed sandbox that lacks
 * sg-helper: the program on an exec's stdin into path.
 */
static sg_err mdl_install_upload(void *ctx, const char *path, int fd, struct sg_cancel *cancel,
				 struct sg_errinfo *err)
{
	struct sg_helper_bin prog = { .fd = fd, .size = lseek(fd, 0, SEEK_END) };
	json_t *vars = json_pack("{s:s}", "SG_P", path);
	char *reply = NULL;
	sg_err rc = SG_OK;

	if (!vars)
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	else if (prog.size < 0)
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot size sg-helper");
	if (!rc)
		rc = sg_helper_bin_load(&prog, err);
	if (!rc)
		rc = mdl_script_in(ctx, "umask 077; cat >\"$SG_P\"", vars, prog.data,
				   (size_t)prog.size, &reply, cancel, err);
	free(prog.data);
	free(reply);
	json_decref(vars);
	return rc;
}

/*
 * The set-up (remote.h) in one exec of cloud.h's script, sg-helper on its
 * stdin for a sandbox made here (which cannot have it); a resumed one is
 * asked first and sent it only when it lacks it (the installer).
 */
static sg_err mdl_setup(struct sg_remote *rm, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct mdl_env *me = (struct mdl_env *)rm;
	struct sg_env *env = &rm->base;
	struct sg_helper_bin bin = { .fd = -1 };
	struct sg_install in = { .ctx = me, .dir = "/tmp", .nonce = rm->nonce,
				 .run = sg_remote_install_run, .upload = mdl_install_upload };
	json_t *vars = NULL;
	char *reply = NULL, *text = NULL;
	int64_t t0 = sg_now_ms();
	sg_err rc = sg_helper_bin_open(env->helper_host, &bin, err);

	if (!rc && rm->fresh)
		rc = sg_helper_bin_load(&bin, err);
	me->install = (struct sg_install_cost){ .bytes = rm->fresh ? bin.size : 0,
						.requests = rm->fresh };
	if (!rc && (!(vars = sg_cloud_setup_vars(env->root, bin.sha, SG_MODAL_SWEEP_MIN, NULL,
						  NULL, 0)) ||
		    (rm->fresh && json_object_set_new(vars, "SG_UP", json_string("-"))) ||
		    asprintf(&text, "%s%s", mdl_home_sh, sg_cloud_setup_sh) < 0)) {
		text = NULL;
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	if (!rc)
		rc = mdl_script_in(me, text, vars, rm->fresh ? bin.data : NULL,
				   rm->fresh ? (size_t)bin.size : 0, &reply, cancel, err);
	rc = sg_remote_setup_read(rm, rc, reply, rm->fresh, &in, &bin, &me->install, cancel, err);
	me->install.ms = sg_now_ms() - t0;
	sg_helper_bin_close(&bin);
	json_decref(vars);
	free(reply);
	free(text);
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
		      me->rm.base.id, "name", me->rm.name, "app", me->app, "image", me->image_id ? me->image_id : "",
		      "timeout_secs", (json_int_t)mdl_timeout_secs(p), "network_blocked",
		      p->network != SG_NET_DEFAULT);
	return f;
}

/*
 * The identity's sandbox is not running: made again from its snapshot
 * (snap, when there is one), else from the profile's image, by the
 * driver's create (remote.h), which Modal's records allowed.
 */
static sg_err mdl_make(struct mdl_env *me, const char *snap, struct sg_cancel *cancel,
		       struct sg_errinfo *err)
{
	const struct sg_profile *p = me->rm.base.profile;
	json_t *got = NULL;
	bool made;
	sg_err rc;

	me->from_snap = snap[0] != '\0';
	if (!me->from_snap)
		rc = mdl_image_for(me, p->image ? p->image : MDL_IMAGE_DEFAULT, &me->image_id,
				   cancel, err);
	else if (!(me->image_id = strdup(snap)))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	else
		rc = SG_OK;
	if (!rc)
		rc = sg_remote_create(&me->rm, me->rm.name, &got, &made, cancel, err);
	json_decref(got);
	if (rc == SG_E_WORKSPACE_LOST && me->from_snap)
		mdl_record_forget(me->rm.base.state_dir, me->app, me->rm.name, MDL_REC_IMAGE);
	if (!rc && me->from_snap)
		me->rm.base.resumed = true;
	return rc;
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
		mdl_record_forget(me->rm.base.state_dir, me->app, me->rm.name, MDL_REC_LIVE);
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
	return mdl_make(me, snap, cancel, err);
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
	rc = sg_remote_open(&me->rm, p, err);
	/*
	 * A sandbox made from the profile's image (no record, so no lookup and
	 * no snapshot first) needs the environment's builder version unless the
	 * image is cached: asked beside the app, one round trip for both.
	 */
	if (!rc)
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
	if (!rc)
		rc = sg_remote_setup(&me->rm, env->id, cancel, err);
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
	/* A failed create leaves nothing behind (remote.h). */
	(void)sg_remote_failed(&me->rm, rc, cancel);
	return rc;
}

/* ---- teardown, list, destroy, release ------------------------------------- */

/*
 * Teardown's KEEP (remote.h).  A workspace that is not persistent stays
 * as it is, running: Modal cannot stop a sandbox, and the next session of
 * the identity adopts it by name; its lifetime (timeout_secs), the idle
 * timeout or `sandgate envs gc` ends it.  A persistent one is
 * snapshotted, recorded, then terminated.
 */
static sg_err mdl_keep(struct sg_remote *rm, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct mdl_env *me = (struct mdl_env *)rm;
	struct mdl_rt *rt = NULL;
	char *image = NULL;
	sg_err rc;

	if (!rm->base.profile->persistent)
		return SG_OK;
	sg_progress_begin("snapshot", "snapshotting sandbox %s", rm->base.id);
	rc = mdl_rt_get(me, SG_MODAL_CALL_MS, &rt, cancel, err);
	if (!rc)
		rc = mdl_snapshot(&rt->r, sg_profile_int(rm->base.profile, "snapshot_ttl_seconds",
						      MDL_SNAPSHOT_TTL_DEFAULT_S),
				  SG_MODAL_IMAGE_MS, &image, cancel, err);
	mdl_rt_drop(me, rt);
	sg_progress_end(rc);
	if (rc)
		return sg_err_set(err, rc, "snapshotting sandbox %s: %s", rm->base.id, err->msg);
	rc = mdl_record_write(me, MDL_REC_IMAGE, image, err);
	if (!rc) {
		struct sg_errinfo e2 = { 0 };

		/* The snapshot holds the newest work now, not the sandbox. */
		mdl_record_forget(rm->base.state_dir, me->app, rm->name, MDL_REC_LIVE);
		/* The tag helps an operator; the record on this host is what resumes. */
		if (mdl_tags_set(me, image, cancel, &e2))
			sg_log_warn("sandbox %s: cannot tag it with its snapshot: %s", rm->base.id,
				    e2.msg);
		rc = mdl_terminate(&me->cl, rm->base.id, cancel, err);
	}
	free(image);
	return rc;
}

/* Terminate sandbox id (remote.h); an ended one is not an error. */
static sg_err mdl_remove(struct sg_remote *rm, const char *id, struct sg_cancel *cancel,
			 struct sg_errinfo *err)
{
	return mdl_terminate(&((struct mdl_env *)rm)->cl, id, cancel, err);
}

/*
 * One page of p's sandboxes in its app (remote.h): the cursor is the
 * creation time of the last one listed, before which the next page lists.
 */
static sg_err mdl_list_step(struct sg_remote *rm, const struct sg_profile *p, const char *cursor,
			    json_t **items, char **next, struct sg_cancel *cancel,
			    struct sg_errinfo *err)
{
	struct mdl_env *me = (struct mdl_env *)rm;
	char tag_m[128], tag_p[256], at[64];
	const char *tags[] = { tag_m, tag_p, NULL };
	Modal__Client__SandboxListResponse *resp = NULL;
	sg_err rc = SG_OK;

	*items = NULL;
	*next = NULL;
	snprintf(tag_m, sizeof(tag_m), "%s=%s", SG_CLOUD_TAG_MANAGED, SG_CLOUD_MANAGER);
	snprintf(tag_p, sizeof(tag_p), "%s=%s", SG_CLOUD_TAG_PROFILE, p->name);
	if (!me->app_id)
		rc = mdl_app(&me->cl, me->app, &me->app_id, cancel, err);
	if (!rc)
		rc = mdl_list_page(&me->cl, me->app_id, tags, cursor ? strtod(cursor, NULL) : 0,
				   &resp, cancel, err);
	if (!rc && !(*items = json_array()))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	for (size_t i = 0; !rc && i < resp->n_sandboxes; i++) {
		const Modal__Client__SandboxInfo *sb = resp->sandboxes[i];
		bool ended = sb->task_info && sb->task_info->result;

		if (json_array_append_new(*items, mdl_view(sb->id, ended ? "finished" : "running",
							   sb->tags, sb->n_tags)))
			rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		snprintf(at, sizeof(at), "%.17g", sb->created_at);
	}
	if (!rc && resp->n_sandboxes && !(*next = strdup(at)))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

/* An operator's view of one listed sandbox (remote.h). */
static bool mdl_info(const json_t *item, struct sg_env_info *info)
{
	sg_cloud_info(json_string_value(json_object_get(item, "id")),
		      json_string_value(json_object_get(item, "state")), mdl_tag_get, item, info);
	return true;
}

static const struct sg_remote_ops mdl_ops = {
	.provider = "Modal's exec variables",
	/* A job's words and stdin in variables, its output relayed (remote.h). */
	.inline_max = SG_MODAL_INLINE_MAX, .stdin_vars = SG_MODAL_STDIN_VARS,
	.relays = true, .relay_wait_ms = SG_MODAL_JOB_WAIT_MS, .fails = 1, .kill_unseen = true,
	.lingers = true,
	.list_pages = SG_MODAL_LIST_PAGES, .snapshot_records = true,
	.env_size = sizeof(struct mdl_env),
	/* The client, and the calls an operator's list and destroy make. */
	.open = mdl_open, .close = mdl_close,
	.lookup = mdl_lookup, .tag = mdl_tag, .remove = mdl_remove,
	.list_page = mdl_list_step, .info = mdl_info,
	/* A session's life: create, set up, its commands, keep or forget. */
	.create = mdl_create_step, .setup = mdl_setup, .script = mdl_script,
	.trip = mdl_trip, .kill = mdl_kill,
	.keep = mdl_keep, .forget = mdl_forget,
};

SG_REMOTE_OPERATOR(mdl_envs, &mdl_ops)

static void mdl_release(struct sg_env *env)
{
	struct mdl_env *me = (struct mdl_env *)env;

	/* For the benchmarks: what the session's commands cost. */
	if (env->id[0])
		sg_log_info("modal: sandbox %s: %llu execs, %llu router requests", env->id,
			    (unsigned long long)atomic_load(&me->execs),
			    (unsigned long long)atomic_load(&me->requests));
	if (me->rt) {
		mdl_router_release(&me->rt->r);
		free(me->rt);
		me->rt = NULL;
	}
	sg_remote_release(&me->rm);
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

/* What is Modal's own (validate, provision, files); the rest is the driver's. */
const struct sg_adapter sg_adapter_modal = {
	.name = "modal",
	.fields = mdl_fields, .validate = mdl_validate,
	.caps = SG_CAP_FILES | SG_CAP_LIST, .env_size = sizeof(struct mdl_env),
	.provision = mdl_provision, .get_file = mdl_get_file, .release = mdl_release,
	.credentials = mdl_credentials,
	.exec = sg_remote_exec, .teardown = sg_remote_teardown,
	.list = mdl_envs_list, .destroy = mdl_envs_destroy,
};
