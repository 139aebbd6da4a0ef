/*
 * vercel.c - the vercel backend: environments in Vercel Sandboxes, over
 * Vercel's Sandbox REST API as the official @vercel/sandbox SDK uses it
 * (v2 named sandboxes and their sessions, created with POST /v3/sandboxes).
 *
 * Provisioning.  One named sandbox per identity; its name is a pure
 * function of the identity (adapters/cloud.h), so a create that is sent
 * again (after a 5xx, a 429 or a dropped connection: the create is
 * protected by its name and retried as the SDK retries) meets a conflict
 * and never starts a second sandbox.  When the state registry knew the
 * identity (or the binding requires an existing workspace), provision()
 * first asks for the name with ?resume=true, which starts a new session of
 * a stopped sandbox from its last snapshot; a missing one is created
 * (unless the binding requires an existing workspace: workspace_lost).  An
 * identity never recorded is created at once, and a 409 leads to the same
 * lookup.  An expired snapshot is workspace_lost for a persistent profile,
 * never a fresh sandbox.  A sandbox found either way is taken only when
 * its tags say it is sandgate's for this identity.  Tags
 * (Vercel allows five) carry managed-by, the identity, the session, the
 * expiry and the profile, so `sandgate envs` finds orphans by tag; a
 * resumed sandbox is re-tagged with this session and given the profile's
 * network policy and timeout (one PATCH).  The timeout is lifetime_seconds,
 * and a keep-alive thread extends it while the session lives.
 *
 * Inside.  The one set-up script all cloud adapters share (cloud.h)
 * prepares root, sandgate's directories and sg-helper; a sandbox this
 * provision made receives sg-helper by fs/write (a gzip'd tar, adapters/
 * targz.h) sent beside that command (sg_install_run_beside), so a new
 * sandbox is ready two round trips after the create began.  A new
 * scratch sandbox does not wait for the second: the set-up goes on beside
 * the first commands, which wait in the sandbox for sg-helper
 * (vcl_prepare, adapters/remote.h).
 *
 * One exec, one request.  Vercel's cmd takes an argv, an environment and
 * no stdin; with wait:true it streams NDJSON until the command ends.  Each
 * exec is one such request running `sh -c 'eval "exec $SG_X"'` with SG_X
 * (a variable) holding sg-helper's `job` line (adapters/jobreply.h) and
 * stdin in variables SG_IN<n> (or, beyond SG_VERCEL_STDIN_VARS, uploaded
 * with fs/write first).  The job runs the command in a session of its own
 * with exactly the gateway's environment, and prints a bounded reply with
 * a random trailer; a command still running when the wait ends answers
 * "pending" and the next request attaches.  The stream is read as it
 * arrives and bounded (api.h, vcl_stream); a stream cut before its last
 * line is a provider_error, never a result.  Background processes are
 * sg-helper's spools, never Vercel's command logs (gone after a stop).
 *
 * A 410 sandbox_stopped (the sandbox stopped under us) resumes the named
 * sandbox and repeats the request once; 422 sandbox_stopping or
 * sandbox_snapshotting is waited out (within SG_VERCEL_SETTLE_MS) first.
 *
 * Teardown: KEEP stops the session (Vercel snapshots a persistent sandbox
 * as it stops); REMOVE deletes the named sandbox; DETACH does nothing
 * remote.
 */
#define _GNU_SOURCE /* asprintf, pthread with a POSIX profile */
#include "adapters/adapter.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "adapters/cloud.h"
#include "core/exec.h"
#include "adapters/install.h"
#include "adapters/jobreply.h"
#include "core/leg.h"
#include "adapters/remote.h"
#include "core/targz.h"
#include "base/crash.h"
#include "base/limits.h"
#include "base/log.h"
#include "base/progress.h"
#include "vercel/api.h"

/*
 * The set-up answers for itself before its request's timeout, with room
 * for the time its polls take beyond what they count.
 */
_Static_assert(SG_VERCEL_UPLOAD_WAIT_MS * 3 / 2 < SG_VERCEL_CALL_MS, "upload wait < call timeout");

/* Tag keys (Vercel allows five).  managed-by is what listings filter on. */
#define VCL_T_MANAGED "managed-by"
#define VCL_T_IDENTITY "sandgate-identity"
#define VCL_T_SESSION "sandgate-session"
#define VCL_T_EXPIRES "sandgate-expires"
#define VCL_T_PROFILE "sandgate-profile"
#define VCL_TAG_MAX 256 /* bytes of one tag value */
#define VCL_CANCEL_STOP_MS 3000 /* a stop sent after a cancel: waited for this long */
/*
 * How far Vercel's session timestamps may run ahead of the Date of its
 * replies (different machines, Date truncated to the second): a session
 * requested up to this long before a lookup was sent may be taken for one
 * that the lookup started.
 */
#define VCL_CLOCK_SLACK_MS 1000

struct vcl_env {
	struct sg_remote rm; /* first: its base is the env; rm.lock guards sid */
	struct vcl_client cl;
	int64_t vcpus;    /* asked for, 0: Vercel's default */
	/*
	 * This provision's lookup resumed a stopped sandbox (a new VM, billed):
	 * a provisioning that fails stops it again (vcl_provision).
	 */
	bool woke;
	/*
	 * sg_now_ms() when a lookup with ?resume=true was sent whose outcome
	 * is unknown (no answer, a cancel, a 5xx, an answer that could not be
	 * read): it may have started a session that nobody heard of.  0: none.
	 * A provisioning that fails looks for that session and stops it
	 * (vcl_settle_doubt).
	 */
	int64_t doubt_ms;
	atomic_bool lost; /* its files are gone: no resume brings them back */
	atomic_bool resuming; /* one resume at a time (vcl_resume) */
	char sid[128];    /* the current session */
	struct sg_install_cost install;
	/*
	 * sg-helper as the set-up sends it (vcl_prep_start): read and summed
	 * before a create, packed on a thread of its own while it travels.
	 */
	struct vcl_prep {
		struct sg_leg pack;
		bool inited, done; /* done: read and summed */
		bool upload;       /* its bytes and paths are wanted, not only its sum */
		sg_err rc;
		struct sg_errinfo err;
		struct sg_helper_bin bin;
		/*
		 * The directory a set-up left under way will use
		 * (sg_remote_later_dir), when it may be left so: the upload
		 * goes there, with the directories it holds.  NULL: /tmp.
		 */
		char *dir;
		char *up, *mark;    /* the upload's path and its marker's */
		struct sg_buf tgz;  /* all of it, packed; empty until packed */
	} prep;
};

/* ---- validate --------------------------------------------------------------- */

/*
 * The profile fields the vercel backend honours; the config layer refuses
 * every other one.  `workspace` is accepted for the host's sake: commands
 * see the workspace at binding.root.
 */
static const struct sg_field vcl_fields[] = {
	SG_FIELD("image"), SG_FIELD("workspace"), SG_FIELD("persistent"), SG_FIELD("shared"),
	SG_FIELD("network"), SG_FIELD("cpus"), SG_FIELD("memory_mb"),
	SG_FIELD_OWN_STRING("team"), SG_FIELD_OWN_STRING("project"),
	SG_FIELD_OWN_STRING("api_url"),
	SG_FIELD_OWN_ENV("token_env", VCL_ENV_TOKEN, SG_FIELD_PROBE),
	SG_FIELD_ENV(VCL_ENV_TEAM, SG_FIELD_PROBE), SG_FIELD_ENV(VCL_ENV_PROJECT, SG_FIELD_PROBE),
	SG_FIELD_ENV(VCL_ENV_OIDC, SG_FIELD_PROBE), SG_FIELD_ENV(VCL_ENV_URL, 0),
	SG_FIELD_OWN_STRING("region"), SG_FIELD_OWN_INT("vcpus_round_up", 0, 1),
	SG_FIELDS_END,
};

/* The networkPolicy for the profile (new), or NULL with err set. */
static json_t *vcl_network_policy(const struct sg_profile *p, struct sg_errinfo *err)
{
	json_t *domains, *cidrs;

	if (p->network == SG_NET_NONE)
		return json_pack("{s:s}", "mode", "deny-all");
	if (p->network != SG_NET_ALLOW)
		return json_pack("{s:s}", "mode", "allow-all");
	domains = json_array();
	cidrs = json_array();
	for (size_t i = 0; p->network_allow && p->network_allow[i]; i++) {
		const char *e = p->network_allow[i];

		if (strchr(e, '/') && sg_allow_kind(e) == SG_ALLOW_BAD) {
			json_decref(domains);
			json_decref(cidrs);
			sg_err_set(err, SG_E_INVALID_ARGUMENT,
				   "network allow entry \"%.60s\" (profile \"%s\") is not a CIDR range",
				   e, p->name);
			return NULL;
		}
		json_array_append_new(strchr(e, '/') ? cidrs : domains, json_string(e));
	}
	return json_pack("{s:s, s:o, s:o}", "mode", "custom", "allowedDomains", domains,
			 "allowedCIDRs", cidrs);
}

static bool vcl_round_up(const struct sg_profile *p)
{
	return sg_profile_int(p, "vcpus_round_up", 0) == 1;
}

static sg_err vcl_validate(const struct sg_profile *p, struct sg_errinfo *err)
{
	struct vcl_client cl;
	bool exact;
	int64_t n = vcl_vcpus(p->cpus, p->memory_mb, &exact);
	json_t *np;
	sg_err rc;

	if (!exact && !vcl_round_up(p))
		return sg_err_set(err, SG_E_UNSUPPORTED,
				  "field \"memory_mb\" (profile \"%s\"): Vercel gives 2048 MB per vCPU, so %lld vCPU give %lld MB, not %lld; set memory_mb to a multiple of 2048 or \"vcpus_round_up\": 1",
				  p->name, (long long)n, (long long)(n * 2048),
				  (long long)p->memory_mb);
	if (p->image && (strlen(p->image) > 255 || strpbrk(p->image, "\r\n")))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "field \"image\" (profile \"%s\") is not an image name Vercel takes",
				  p->name);
	if (!(np = vcl_network_policy(p, err)))
		return err->code ? err->code : sg_err_set(err, SG_E_INTERNAL, "out of memory");
	json_decref(np);
	/* Credentials are looked at here too, so missing ones are refused
	 * before anything is attempted (the host may fix it and retry). */
	rc = vcl_client_init(&cl, p, err);
	if (!rc)
		vcl_client_release(&cl);
	return rc;
}

/* ---- The control plane -------------------------------------------------------- */

/* "/v2/sandboxes/<name><suffix>" or "/v2/sandboxes/sessions/<sid><suffix>" (new). */
static char *vcl_path(const char *kind, const char *id, const char *suffix)
{
	struct sg_buf b = SG_BUF_INIT(SG_PATH_MAX);

	if (sg_buf_adds(&b, kind) || sg_cloud_urlenc(&b, id) ||
	    (suffix && sg_buf_adds(&b, suffix))) {
		sg_buf_release(&b);
		return NULL;
	}
	return sg_buf_take(&b, NULL);
}

/* "projectId=<p>[&<more>]" (new). */
static char *vcl_pq(const struct vcl_client *cl, const char *more)
{
	struct sg_buf b = SG_BUF_INIT(SG_PATH_MAX);

	if (sg_buf_adds(&b, "projectId=") || sg_cloud_urlenc(&b, cl->project) ||
	    (more && (sg_buf_addc(&b, '&') || sg_buf_adds(&b, more)))) {
		sg_buf_release(&b);
		return NULL;
	}
	return sg_buf_take(&b, NULL);
}

static bool vcl_settling(const struct vcl_reply *r)
{
	return r->status == 422 && (strcmp(r->code, "sandbox_stopping") == 0 ||
				    strcmp(r->code, "sandbox_snapshotting") == 0);
}

/*
 * One call on a named sandbox (or, with kind sessions, a session), waiting
 * out 422 sandbox_stopping/sandbox_snapshotting (as the SDK: every
 * SG_VERCEL_POLL_MS) within SG_VERCEL_SETTLE_MS, or within the call's own
 * timeout when that is shorter: a stop sent after a cancel may wait 3 s
 * in all, not one request's 3 s per poll.  SG_OK with r set when a reply
 * other than those came.
 */
static sg_err vcl_call_settled(struct vcl_client *cl, const struct vcl_call *call,
			       struct vcl_reply *r, struct sg_cancel *cancel,
			       struct sg_errinfo *err)
{
	int64_t until = sg_now_ms() + (call->timeout_ms > 0 && call->timeout_ms < SG_VERCEL_SETTLE_MS
					       ? call->timeout_ms
					       : SG_VERCEL_SETTLE_MS);
	sg_err rc;

	for (;;) {
		rc = vcl_do(cl, call, r, cancel, err);
		if (rc || !vcl_settling(r))
			return rc;
		sg_progress_update("the sandbox is %s", r->code + 8);
		if (sg_now_ms() > until) {
			rc = vcl_fail(cl, call->what, r, SG_E_TIMEOUT, err);
			vcl_reply_release(r);
			return rc;
		}
		vcl_reply_release(r);
		rc = sg_cancel_sleep(cancel, SG_VERCEL_POLL_MS);
		if (rc)
			return sg_err_set(err, rc, "%s was cancelled", call->what);
	}
}

/*
 * What a lookup tells besides its reply: when it was sent (sg_now_ms()
 * as its request began, retries included) and answered, Vercel's clock at the answer (the Date
 * header, unix ms, 0 without one), how many times it was sent, and
 * whether a lookup with ?resume=true may have started a session that its
 * reply does not show (unknown: no reply, a cancel, a 5xx, a reply that
 * could not be read).
 */
struct vcl_look {
	int64_t sent_ms, got_ms, date_ms;
	int attempts;
	bool unknown;
};

/*
 * GET the named sandbox (resume: start a session from its snapshot when
 * it is stopped), within timeout_ms (0: the default for the kind).  *got
 * (new) is the reply's object; SG_E_NOT_FOUND when there is none,
 * SG_E_WORKSPACE_LOST when its snapshot expired.  look (or NULL) is
 * filled whatever the outcome.
 */
static sg_err vcl_get(struct vcl_client *cl, const char *name, bool resume, int64_t timeout_ms,
		      json_t **got, struct vcl_look *look, struct sg_cancel *cancel,
		      struct sg_errinfo *err)
{
	char *path = vcl_path("/v2/sandboxes/", name, NULL);
	char *q = vcl_pq(cl, resume ? "resume=true" : NULL);
	struct vcl_reply r = { 0 };
	struct vcl_look lk = { .sent_ms = sg_now_ms() };
	const char *what = resume ? "resuming the sandbox" : "looking up the sandbox";
	sg_err rc;

	*got = NULL;
	if (!path || !q) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (!timeout_ms)
		timeout_ms = resume ? SG_VERCEL_CREATE_MS : 0;
	rc = vcl_call_settled(cl,
			      &(struct vcl_call){ .path = path, .query = q, .idempotent = true,
						  .timeout_ms = timeout_ms, .what = what },
			      &r, cancel, err);
	/* The last try's start: earlier ones met 422 (a stop settling) and started nothing. */
	if (r.sent_ms)
		lk.sent_ms = r.sent_ms;
	lk.got_ms = sg_now_ms();
	lk.date_ms = r.date_ms;
	lk.attempts = r.attempts;
	/* Gone without an answer that says what happened: it may have landed. */
	lk.unknown = rc != SG_OK;
	if (rc)
		goto out;
	if (r.status == 404)
		rc = SG_E_NOT_FOUND; /* callers decide what a missing sandbox means */
	else if (r.status == 410 && strcmp(r.code, "snapshot_not_found") == 0)
		rc = sg_err_set(err, SG_E_WORKSPACE_LOST,
				"sandbox %s cannot be resumed: its snapshot has expired (snapshot_not_found)",
				name);
	else if (r.status != 200 || !json_is_object(json_object_get(r.json, "sandbox"))) {
		/*
		 * A refusal (4xx) started nothing; a 5xx, a timeout or a 200
		 * that cannot be read may come from a resume that was done.
		 */
		lk.unknown = r.status >= 500 || r.status == 408 || r.status == 200;
		rc = vcl_fail(cl, what, &r, SG_OK, err);
	}
	if (!rc) {
		*got = r.json;
		r.json = NULL;
	}
out:
	if (look) {
		lk.unknown = lk.unknown && resume;
		*look = lk;
	}
	vcl_reply_release(&r);
	free(path);
	free(q);
	return rc;
}

/* Is this sandbox sandgate's, for this identity? */
static sg_err vcl_check_owner(const struct vcl_env *ve, const json_t *got,
			      struct sg_errinfo *err)
{
	const json_t *tags = json_object_get(json_object_get(got, "sandbox"), "tags");
	const char *m = vcl_str(tags, VCL_T_MANAGED), *id = vcl_str(tags, VCL_T_IDENTITY);

	if (!m || strcmp(m, "sandgate") != 0 || !id ||
	    strncmp(id, ve->rm.base.identity, VCL_TAG_MAX) != 0)
		return sg_err_set(err, SG_E_PROVIDER,
				  "a Vercel sandbox named %s exists and is not sandgate's sandbox for identity \"%.60s\"; rename or delete it",
				  ve->rm.name, ve->rm.base.identity);
	return SG_OK;
}

/*
 * Does the binding need the sandbox's files: a persistent profile, a kept
 * workspace (remove_on_exit off) or require_existing_workspace?
 */
static bool vcl_needs_files(const struct sg_env *env)
{
	return env->profile->persistent || !env->remove_on_exit || env->require_existing;
}

/*
 * Is the session in got (a reply with "session", answered at got_ms with
 * Vercel's Date date_ms) running or booting, and was it requested no
 * earlier than a request this host sent at sent_ms?  Then that request may
 * have started it.  The time is Vercel's: its Date, less what passed here
 * since the request left, so this host's wall clock plays no part (it
 * stands in only when the reply had no Date).  A session that tells no
 * time may be the request's too.
 */
static bool vcl_started_since(const json_t *got, int64_t sent_ms, int64_t date_ms, int64_t got_ms)
{
	const json_t *s = json_object_get(got, "session"), *t = json_object_get(s, "requestedAt");
	const char *st = vcl_str(s, "status");
	struct timespec now;
	int64_t vercel_now = date_ms;

	if (!st || (strcmp(st, "running") != 0 && strcmp(st, "pending") != 0))
		return false;
	if (!json_is_integer(t))
		t = json_object_get(s, "createdAt");
	if (!json_is_integer(t))
		return true;
	if (vercel_now <= 0) {
		clock_gettime(CLOCK_REALTIME, &now);
		vercel_now = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
	}
	return (int64_t)json_integer_value(t) >= vercel_now - (got_ms - sent_ms) - VCL_CLOCK_SLACK_MS;
}

/*
 * A lookup with ?resume=true that started a new session of a stopped
 * sandbox: note it (ve->woke, and the session, so that a failure can stop
 * it), and refuse it when it came up empty.  Vercel resumes from the last
 * snapshot, and a sandbox that was not persistent when it stopped has
 * none: its session starts with no files at all.  For a binding that
 * needs the files that is a lost workspace, never a fresh empty one.
 *
 * Vercel says "resumed" only to the request that resumed.  A lookup sent
 * more than once (its first reply lost, a 5xx) may have resumed with a
 * try whose reply never came and then found that session running: a
 * session requested since the lookup was sent counts as its own (look).
 */
static sg_err vcl_check_woken(struct vcl_env *ve, const json_t *got, const struct vcl_look *look,
			      struct sg_errinfo *err)
{
	const json_t *s = json_object_get(got, "session");

	if (!json_is_true(json_object_get(got, "resumed")) &&
	    !(look && look->attempts > 1 &&
	      vcl_started_since(got, look->sent_ms, look->date_ms, look->got_ms)))
		return SG_OK;
	ve->woke = true;
	pthread_mutex_lock(&ve->rm.lock);
	snprintf(ve->sid, sizeof(ve->sid), "%s", vcl_str(s, "id") ? vcl_str(s, "id") : "");
	pthread_mutex_unlock(&ve->rm.lock);
	if (vcl_str(s, "sourceSnapshotId") || !vcl_needs_files(&ve->rm.base))
		return SG_OK;
	atomic_store(&ve->lost, true);
	return sg_err_set(err, SG_E_WORKSPACE_LOST,
			  "sandbox %s was stopped without a snapshot (it was not persistent then), so its files are gone; a resume would give an empty workspace",
			  ve->rm.name);
}

static json_t *vcl_tags(const struct vcl_env *ve)
{
	const struct sg_env *env = &ve->rm.base;
	char expires[32];

	snprintf(expires, sizeof(expires), "%lld",
		 (long long)time(NULL) + (long long)env->profile->lifetime_seconds);
	return json_pack("{s:s, s:s%, s:s%, s:s, s:s%}", VCL_T_MANAGED, "sandgate", VCL_T_IDENTITY,
			 env->identity, strnlen(env->identity, VCL_TAG_MAX), VCL_T_SESSION,
			 env->session, strnlen(env->session, VCL_TAG_MAX), VCL_T_EXPIRES, expires,
			 VCL_T_PROFILE, env->profile->name,
			 strnlen(env->profile->name, VCL_TAG_MAX));
}

/*
 * Does this environment's workspace outlive the session?  A persistent
 * profile's does, and so does one the binding keeps (remove_on_exit off):
 * on Vercel only a persistent sandbox keeps its files across a stop.
 */
static bool vcl_keeps(const struct sg_env *env)
{
	return env->profile->persistent || !env->remove_on_exit;
}

/*
 * The sandbox's Vercel timeout: lifetime_seconds, but never so short that
 * the keep-alive (a third of it) would have to call all the time.
 */
static int64_t vcl_timeout_ms(const struct sg_profile *p)
{
	return p->lifetime_seconds * 1000 > SG_VERCEL_MIN_TIMEOUT_MS ? p->lifetime_seconds * 1000
								     : SG_VERCEL_MIN_TIMEOUT_MS;
}

static sg_err vcl_create_body(struct vcl_env *ve, json_t **out, struct sg_errinfo *err)
{
	const struct sg_profile *p = ve->rm.base.profile;
	json_t *body = json_object(), *np = vcl_network_policy(p, err);
	const char *region = sg_profile_str(p, "region");

	*out = NULL;
	if (!np || !body) {
		json_decref(body);
		json_decref(np);
		return err->code ? err->code : sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	json_object_set_new(body, "projectId", json_string(ve->cl.project));
	json_object_set_new(body, "name", json_string(ve->rm.name));
	json_object_set_new(body, "ports", json_array());
	json_object_set_new(body, "timeout", json_integer(vcl_timeout_ms(p)));
	json_object_set_new(body, "persistent", json_boolean(vcl_keeps(&ve->rm.base)));
	json_object_set_new(body, "networkPolicy", np);
	json_object_set_new(body, "tags", vcl_tags(ve));
	if (ve->vcpus > 0)
		json_object_set_new(body, "resources", json_pack("{s:I}", "vcpus",
								 (json_int_t)ve->vcpus));
	if (p->image)
		json_object_set_new(body, "image", json_string(p->image));
	if (region)
		json_object_set_new(body, "region", json_string(region));
	*out = body;
	return SG_OK;
}

/*
 * What a create left in doubt: it failed (a reply lost, a 5xx, a 429) or
 * met a conflict (a 409), possibly after being sent more than once.
 */
struct vcl_doubt {
	sg_err rc;              /* the create's own failure, or SG_OK (a 409) */
	struct sg_errinfo once; /* its sentence when rc is set */
	int sent;               /* how many times the create went out */
};

/*
 * The name holds a sandbox after a create in doubt (*got, which the
 * lookup gave): adopt it when it is ours, else drop it.
 */
static sg_err vcl_create_adopt(struct vcl_env *ve, json_t **got, const struct vcl_look *lk,
			       struct sg_errinfo *err)
{
	struct sg_errinfo ignore = { 0 };
	sg_err rc = vcl_check_owner(ve, *got, err);
	const char *sess = vcl_str(json_object_get(json_object_get(*got, "sandbox"), "tags"),
				   VCL_T_SESSION);

	/* A foreign sandbox that the lookup woke is stopped again. */
	if (!rc)
		rc = vcl_check_woken(ve, *got, lk, err);
	else
		(void)vcl_check_woken(ve, *got, lk, &ignore);
	if (rc) {
		json_decref(*got);
		*got = NULL;
		return rc;
	}
	/* Our own create, repeated: this session's tag is on it. */
	ve->rm.fresh = sess && strncmp(sess, ve->rm.base.session, VCL_TAG_MAX) == 0;
	return SG_OK;
}

/*
 * The lookup after a create in doubt found nothing to adopt (lr, *look):
 * the error to give, and whether what the create did may remain.
 */
static sg_err vcl_create_unsettled(struct vcl_env *ve, const struct vcl_doubt *d, sg_err lr,
				   const struct sg_errinfo *look, struct sg_errinfo *err)
{
	/* An expired snapshot: vcl_obtain decides what that means. */
	if (!d->rc && lr == SG_E_WORKSPACE_LOST)
		return sg_err_set(err, lr, "%s", look->msg);
	if (!d->rc && d->sent > 1) {
		ve->rm.base.may_remain = true;
		return sg_err_set(err, lr == SG_E_NOT_FOUND ? SG_E_PROVIDER : lr,
				  "creating the sandbox met a conflict after it was sent %d times, so the sandbox of that name may be this create's own, and %s",
				  d->sent, look->msg[0] ? look->msg : "the name is not found");
	}
	if (d->rc) {
		/*
		 * A create whose answer was lost may still land after
		 * this lookup: the gateway settles it by the tags.
		 */
		ve->rm.base.may_remain = true;
		if (lr == SG_E_NOT_FOUND)
			return sg_err_set(err, d->once.code,
					  "%s (and no sandbox of that name appeared)", d->once.msg);
		return sg_err_set(err, d->once.code, "%s; whether it was made is not known: %s",
				  d->once.msg, look->msg);
	}
	return sg_err_set(err, lr == SG_E_NOT_FOUND ? SG_E_PROVIDER : lr,
			  "creating the sandbox met a conflict, but %s",
			  look->msg[0] ? look->msg : "the name is not found");
}

/* A conflict or a doubt: what does the name hold now?  It is looked up once. */
static sg_err vcl_create_settle(struct vcl_env *ve, const struct vcl_doubt *d, json_t **got,
				struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_errinfo look = { 0 };
	struct vcl_look lk;
	sg_err lr = vcl_get(&ve->cl, ve->rm.name, true, 0, got, &lk, cancel, &look);

	if (lk.unknown)
		ve->doubt_ms = lk.sent_ms;
	if (lr == SG_OK)
		return vcl_create_adopt(ve, got, &lk, err);
	return vcl_create_unsettled(ve, d, lr, &look, err);
}

/*
 * Create the named sandbox.  The name makes the create safe to repeat, so
 * the HTTP layer retries it on 429 and 5xx as the SDK does; a 409 means
 * the name exists (a repeat, or another gateway's), and it is adopted if
 * it is ours.  When no reply settles it, the name is looked up once; if
 * that fails too, whatever the create did may remain (may_remain).
 */
static sg_err vcl_create(struct sg_remote *rm, json_t **got, struct sg_cancel *cancel,
			 struct sg_errinfo *err)
{
	struct vcl_env *ve = (struct vcl_env *)rm;
	struct vcl_reply r = { 0 };
	struct vcl_doubt d = { 0 };
	json_t *body = NULL;
	sg_err rc;

	*got = NULL;
	rc = vcl_create_body(ve, &body, err);
	if (rc)
		return rc;
	rc = vcl_do(&ve->cl,
		    &(struct vcl_call){ .method = "POST", .path = "/v3/sandboxes", .body = body,
					.idempotent = true, .timeout_ms = SG_VERCEL_CREATE_MS,
					.what = "creating the sandbox" },
		    &r, cancel, &d.once);
	json_decref(body);
	if (!rc && r.status == 200 && json_is_object(json_object_get(r.json, "session"))) {
		*got = r.json;
		r.json = NULL;
		ve->rm.fresh = true;
		vcl_reply_release(&r);
		return SG_OK;
	}
	if (!rc && r.status != 409 && r.status < 500 && r.status != 429) {
		/* Refused before anything was made. */
		rc = vcl_fail(&ve->cl, "creating the sandbox", &r, SG_OK, err);
		vcl_reply_release(&r);
		return rc;
	}
	if (!rc && r.status != 409)
		rc = vcl_fail(&ve->cl, "creating the sandbox", &r, SG_OK, &d.once);
	/*
	 * Sent more than once (a reply lost, a 5xx, a 429): a 409 may be
	 * about this create's own earlier copy, which landed.  Until a lookup
	 * says whose the sandbox is, it may be ours.
	 */
	d.rc = rc;
	d.sent = r.attempts;
	vcl_reply_release(&r);
	if (sg_cancel_check(cancel)) {
		ve->rm.base.may_remain = d.rc != SG_OK || d.sent > 1;
		return sg_err_set(err, sg_cancel_check(cancel), "creating the sandbox was cancelled");
	}
	return vcl_create_settle(ve, &d, got, cancel, err);
}

/* The session of a reply (borrowed), and its status. */
static const json_t *vcl_session(const json_t *got)
{
	return json_object_get(got, "session");
}

static void vcl_set_sid(struct vcl_env *ve, const char *sid)
{
	pthread_mutex_lock(&ve->rm.lock);
	snprintf(ve->sid, sizeof(ve->sid), "%s", sid ? sid : "");
	pthread_mutex_unlock(&ve->rm.lock);
}

static void vcl_get_sid(struct vcl_env *ve, char *out, size_t n)
{
	pthread_mutex_lock(&ve->rm.lock);
	snprintf(out, n, "%s", ve->sid);
	pthread_mutex_unlock(&ve->rm.lock);
}

/*
 * Wait until the session in *got is running (pending: a VM is booting),
 * polling GET /v2/sandboxes/sessions/{id}; *got is replaced by
 * {"session": ...} replies as it goes.
 */
static sg_err vcl_wait_running(struct vcl_env *ve, json_t **got, struct sg_cancel *cancel,
			       struct sg_errinfo *err)
{
	int64_t until = sg_now_ms() + SG_VERCEL_CREATE_MS;

	for (;;) {
		const json_t *s = vcl_session(*got);
		const char *st = vcl_str(s, "status"), *sid = vcl_str(s, "id");
		struct vcl_reply r = { 0 };
		char *path;
		sg_err rc;

		if (!sid)
			return sg_err_set(err, SG_E_PROVIDER, "Vercel's reply names no session");
		if (st && strcmp(st, "running") == 0)
			return SG_OK;
		if (!st || (strcmp(st, "pending") != 0 && strcmp(st, "snapshotting") != 0))
			return sg_err_set(err, SG_E_PROVIDER, "session %s of sandbox %s is %s", sid,
					  ve->rm.name, st ? st : "in no state");
		sg_progress_update("session %s is %s", sid, st);
		if (sg_now_ms() > until)
			return sg_err_set(err, SG_E_TIMEOUT, "session %s was still %s after %d s", sid,
					  st, SG_VERCEL_CREATE_MS / 1000);
		rc = sg_cancel_sleep(cancel, SG_VERCEL_POLL_MS);
		if (rc)
			return sg_err_set(err, rc, "waiting for the sandbox was cancelled");
		if (!(path = vcl_path("/v2/sandboxes/sessions/", sid, NULL)))
			return sg_err_set(err, SG_E_INTERNAL, "out of memory");
		rc = vcl_do(&ve->cl,
			    &(struct vcl_call){ .path = path, .idempotent = true,
						.what = "looking up the session" },
			    &r, cancel, err);
		free(path);
		if (!rc && (r.status != 200 || !json_is_object(vcl_session(r.json))))
			rc = vcl_fail(&ve->cl, "looking up the session", &r, SG_OK, err);
		if (rc) {
			vcl_reply_release(&r);
			return rc;
		}
		json_decref(*got);
		*got = r.json;
		r.json = NULL;
		vcl_reply_release(&r);
	}
}

/*
 * A sandbox found (not made) by this provision: this session's tags, the
 * profile's network policy and timeout, in one PATCH.
 */
static sg_err vcl_adopt(struct vcl_env *ve, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const struct sg_profile *p = ve->rm.base.profile;
	char *path = vcl_path("/v2/sandboxes/", ve->rm.name, NULL), *q = vcl_pq(&ve->cl, NULL);
	json_t *np = vcl_network_policy(p, err), *body = NULL;
	struct vcl_reply r = { 0 };
	sg_err rc = SG_OK;

	if (!np) {
		rc = err->code ? err->code : sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	body = json_pack("{s:o, s:O, s:I}", "tags", vcl_tags(ve), "networkPolicy", np, "timeout",
			 (json_int_t)vcl_timeout_ms(p));
	/*
	 * A sandbox made for a scratch session (persistent: false) keeps no
	 * snapshot when it stops: a session that keeps its workspace makes it
	 * persistent, or its files would be gone at the stop that ends it.
	 * Never the other way: another session may keep it.
	 */
	if (body && vcl_keeps(&ve->rm.base) &&
	    json_object_set_new(body, "persistent", json_true())) {
		json_decref(body);
		body = NULL;
	}
	if (!path || !q || !body) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	rc = vcl_call_settled(&ve->cl,
			      &(struct vcl_call){ .method = "PATCH", .path = path, .query = q,
						  .body = body, .idempotent = true,
						  .what = "updating the sandbox" },
			      &r, cancel, err);
	if (!rc && r.status != 200)
		rc = vcl_fail(&ve->cl, "updating the sandbox", &r, SG_OK, err);
	/*
	 * The session that is running already has the old policy: set it
	 * there too, so it is never weaker than this profile asks.
	 */
	if (!rc) {
		char sid[128], *sp;

		vcl_reply_release(&r);
		vcl_get_sid(ve, sid, sizeof(sid));
		sp = vcl_path("/v2/sandboxes/sessions/", sid, "/network-policy");
		rc = sp ? vcl_do(&ve->cl,
				 &(struct vcl_call){ .method = "POST", .path = sp, .body = np,
						     .idempotent = true,
						     .what = "setting the network policy" },
				 &r, cancel, err)
			: sg_err_set(err, SG_E_INTERNAL, "out of memory");
		free(sp);
		if (!rc && r.status != 200)
			rc = vcl_fail(&ve->cl, "setting the network policy", &r, SG_OK, err);
	}
out:
	vcl_reply_release(&r);
	json_decref(np);
	json_decref(body);
	free(path);
	free(q);
	return rc;
}

/* DELETE the named sandbox and its snapshots; one that is gone already is fine. */
static sg_err vcl_delete(struct sg_remote *rm, const char *name, struct sg_cancel *cancel,
			 struct sg_errinfo *err)
{
	struct vcl_client *cl = &((struct vcl_env *)rm)->cl;
	/*
	 * Its snapshots go with it: Vercel keeps (and bills) them until they
	 * expire otherwise, and nothing of sandgate's would list them again.
	 */
	char *path = vcl_path("/v2/sandboxes/", name, NULL),
	     *q = vcl_pq(cl, "deleteOrphanSnapshots=true");
	struct vcl_reply r = { 0 };
	sg_err rc;

	rc = path && q ? vcl_call_settled(cl,
					  &(struct vcl_call){ .method = "DELETE", .path = path,
							      .query = q, .idempotent = true,
							      .what = "deleting the sandbox" },
					  &r, cancel, err)
		       : sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (!rc && r.status != 200 && r.status != 404)
		rc = vcl_fail(cl, "deleting the sandbox", &r, SG_OK, err);
	vcl_reply_release(&r);
	free(path);
	free(q);
	return rc;
}

/* ---- Commands ------------------------------------------------------------------- */

/*
 * One cmd request with wait:true: argv (command, then args) with vars as
 * its environment, its NDJSON read into s.  SG_OK with *status the HTTP
 * status (200: s holds a whole stream) and, for others, r the error reply.
 * resend_safe: running the command twice is harmless (sg-helper job), so
 * the request may go on a kept connection (see struct sg_http_request).
 */
static sg_err vcl_cmd(struct vcl_env *ve, const char *sid, const char *command, json_t *args,
		      json_t *vars, int64_t timeout_ms, bool resend_safe, struct vcl_stream *s,
		      struct vcl_reply *r, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	char *path = vcl_path("/v2/sandboxes/sessions/", sid, "/cmd");
	json_t *body = json_pack("{s:s, s:O, s:O, s:b, s:b, s:b}", "command", command, "args",
				 args, "env", vars, "sudo", 0, "wait", 1, "logs", 1);
	sg_err rc;

	if (!path || !body) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	} else {
		/*
		 * Not idempotent for the HTTP layer: bytes may have reached the
		 * stream; the caller decides what a repeat means.
		 */
		rc = vcl_do(&ve->cl,
			    &(struct vcl_call){ .method = "POST", .path = path, .body = body,
						.resend_safe = resend_safe,
						.timeout_ms = timeout_ms, .sink = vcl_stream_feed,
						.sink_payload = s,
						.what = "running a command in the sandbox" },
			    r, cancel, err);
		/* Stopped at a --linger job's last line: a whole reply. */
		if (rc && s->stopped) {
			sg_err_clear(err);
			rc = SG_OK;
			r->status = 200;
		}
		/*
		 * The connection broke after the stream began: that is a stream
		 * cut short (the command may have run), not a host unreachable.
		 */
		if (rc && rc != SG_E_CANCELLED && rc != SG_E_TIMEOUT && s->nd.bytes > 0 &&
		    !sg_cancel_check(cancel)) {
			sg_err_clear(err);
			rc = vcl_stream_end(s, err);
			if (!rc)
				rc = sg_err_set(err, SG_E_PROVIDER,
						"Vercel's command stream broke after %llu bytes",
						(unsigned long long)s->nd.bytes);
		}
	}
	json_decref(body);
	free(path);
	return rc;
}

static sg_err vcl_stop(struct vcl_env *ve, int64_t timeout_ms, struct sg_cancel *cancel,
		       struct sg_errinfo *err);
static bool vcl_settle_doubt(struct vcl_env *ve);

/*
 * The sandbox stopped under us (410) or is stopping (422): resume it, once
 * per stop whichever thread sees it first.  sid is the session that
 * failed; the current one is then in ve->sid.
 */
static sg_err vcl_resume(struct vcl_env *ve, const char *sid, struct sg_cancel *cancel,
			 struct sg_errinfo *err)
{
	char now[128];
	json_t *got = NULL;
	sg_err rc;

	/*
	 * Calls that met the same stop wait for the first one's resume and
	 * then see its new session, rather than each resuming: the wait is
	 * a poll, so it still honours the caller's cancel.
	 */
	while (atomic_exchange(&ve->resuming, true)) {
		rc = sg_cancel_sleep(cancel, SG_VERCEL_RESUME_POLL_MS);
		if (rc)
			return sg_err_set(err, rc, "cancelled while sandbox %s was resumed", ve->rm.name);
	}
	vcl_get_sid(ve, now, sizeof(now));
	if (strcmp(now, sid) != 0) {
		rc = SG_OK; /* another exec resumed it already */
		goto out;
	}
	if (!vcl_keeps(&ve->rm.base) || atomic_load(&ve->lost)) {
		rc = sg_err_set(err, SG_E_WORKSPACE_LOST,
				"sandbox %s stopped (its timeout, or Vercel), and %s",
				ve->rm.name, atomic_load(&ve->lost) ? "it had no snapshot to resume from"
								 : "a non-persistent sandbox keeps no files");
		goto out;
	}
	sg_log_info("sandbox %s stopped; resuming it", ve->rm.name);
	rc = vcl_get(&ve->cl, ve->rm.name, true, 0, &got, NULL, cancel, err);
	if (rc == SG_E_NOT_FOUND)
		rc = sg_err_set(err, SG_E_WORKSPACE_LOST, "sandbox %s is gone", ve->rm.name);
	if (!rc && (rc = vcl_check_woken(ve, got, NULL, err))) {
		/* An empty VM is no workspace: stop it, and stay lost. */
		struct sg_errinfo e2 = { 0 };

		if (vcl_stop(ve, 0, cancel, &e2))
			sg_log_warn("sandbox %s: %s", ve->rm.name, e2.msg);
	}
	if (!rc)
		rc = vcl_wait_running(ve, &got, cancel, err);
	if (!rc)
		vcl_set_sid(ve, vcl_str(vcl_session(got), "id"));
out:
	atomic_store(&ve->resuming, false);
	json_decref(got);
	return rc;
}

/*
 * Run argv (command, args) in the sandbox as one cmd request, resuming a
 * stopped sandbox and repeating once.  The stream is whole on SG_OK.
 */
static sg_err vcl_run(struct vcl_env *ve, const char *command, json_t *args, json_t *vars,
		      int64_t timeout_ms, bool resend_safe, size_t max_out, struct vcl_stream *s,
		      struct sg_cancel *cancel, struct sg_errinfo *err)
{
	sg_err rc = SG_OK;

	for (int round = 0; round < 2; round++) {
		struct vcl_reply r = { 0 };
		const char *stop = s->stop_mark;
		char sid[128];

		vcl_stream_release(s);
		vcl_stream_init(s, max_out);
		s->stop_mark = stop;
		vcl_get_sid(ve, sid, sizeof(sid));
		rc = vcl_cmd(ve, sid, command, args, vars, timeout_ms, resend_safe, s, &r, cancel,
			     err);
		if (rc) {
			vcl_reply_release(&r);
			return rc;
		}
		if (r.status == 200) {
			vcl_reply_release(&r);
			return vcl_stream_end(s, err);
		}
		if (round == 0 && ((r.status == 410 && strcmp(r.code, "sandbox_stopped") == 0) ||
				   vcl_settling(&r))) {
			vcl_reply_release(&r);
			rc = vcl_resume(ve, sid, cancel, err);
			if (rc)
				return rc;
			continue;
		}
		rc = vcl_fail(&ve->cl, "running a command in the sandbox", &r,
			      r.status == 404 || r.status == 410 ? SG_E_WORKSPACE_LOST : SG_OK, err);
		vcl_reply_release(&r);
		return rc;
	}
	return rc;
}

/* A short shell script with vars as its parameters: *out (new) what it printed. */
static sg_err vcl_script(struct sg_remote *rm, const char *script, json_t *vars, char **out,
			 struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct vcl_env *ve = (struct vcl_env *)rm;
	json_t *args = json_pack("[s, s]", "-c", script);
	struct vcl_stream s;
	sg_err rc;

	*out = NULL;
	vcl_stream_init(&s, SG_VERCEL_SCRIPT_REPLY);
	rc = args ? vcl_run(ve, "sh", args, vars, SG_VERCEL_CALL_MS, false, SG_VERCEL_SCRIPT_REPLY,
			    &s, cancel, err)
		  : sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (!rc && !(*out = strndup(s.out.p, s.out.len)))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	vcl_stream_release(&s);
	json_decref(args);
	return rc;
}

/* Send tgz (a gzip'd tar, its entries named relative to /) with one fs/write. */
static sg_err vcl_write_tgz(struct vcl_env *ve, const struct sg_buf *tgz, struct sg_cancel *cancel,
			    struct sg_errinfo *err)
{
	struct vcl_reply r = { 0 };
	char sid[128], *p = NULL;
	sg_err rc;

	vcl_get_sid(ve, sid, sizeof(sid));
	p = vcl_path("/v2/sandboxes/sessions/", sid, "/fs/write");
	/* Extracting the same archive twice gives the same file: idempotent. */
	rc = p ? vcl_do(&ve->cl,
			&(struct vcl_call){ .method = "POST", .path = p, .raw = tgz->p,
					    .raw_len = tgz->len, .raw_type = "application/gzip",
					    .extra_headers = (const char *[]){ "x-cwd: /", NULL },
					    .idempotent = true, .timeout_ms = SG_VERCEL_CREATE_MS,
					    .what = "writing a file in the sandbox" },
			&r, cancel, err)
	       : sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (!rc && r.status != 200)
		rc = vcl_fail(&ve->cl, "writing a file in the sandbox", &r, SG_OK, err);
	vcl_reply_release(&r);
	free(p);
	return rc;
}

/* Pack n files into tgz (emptied first) for one fs/write, extracted in their order. */
static sg_err vcl_pack(const struct sg_targz_entry *e, size_t n, struct sg_buf *tgz,
		       struct sg_errinfo *err)
{
	sg_err rc;

	sg_buf_reset(tgz);
	rc = sg_targz(e, n, tgz);
	return rc ? sg_err_set(err, rc, "cannot pack /%s for Vercel's fs/write", e[0].name)
		  : SG_OK;
}

/* Write n files in the sandbox with one fs/write. */
static sg_err vcl_write_tar(struct vcl_env *ve, const struct sg_targz_entry *e, size_t n,
			    struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_buf tgz = SG_BUF_INIT(SG_MAX_FRAME * 8);
	sg_err rc;

	rc = vcl_pack(e, n, &tgz, err);
	if (!rc)
		rc = vcl_write_tgz(ve, &tgz, cancel, err);
	sg_buf_release(&tgz);
	return rc;
}

/* Write data to path in the sandbox with fs/write. */
static sg_err vcl_write(struct vcl_env *ve, const char *path, const void *data, size_t len,
			unsigned mode, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_targz_entry e = { .name = path + 1, .mode = mode, .data = data, .len = len };

	if (path[0] != '/')
		return sg_err_set(err, SG_E_INTERNAL, "%s is not an absolute path", path);
	return vcl_write_tar(ve, &e, 1, cancel, err);
}

/* The driver's upload (remote.h): fs/write. */
static sg_err vcl_upload(struct sg_remote *rm, const char *path, const void *data, size_t len,
			 unsigned mode, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	return vcl_write((struct vcl_env *)rm, path, data, len, mode, cancel, err);
}

/* Give up on the job of prefix dir: it never starts, or it is killed. */
static void vcl_kill(struct sg_remote *rm, const char *dir)
{
	struct vcl_env *ve = (struct vcl_env *)rm;
	struct sg_errinfo err = { 0 };
	json_t *args = json_pack("[s, s, s, s]", "job", "--dir", dir, "--kill"), *vars = json_object();
	struct vcl_stream s;
	sg_err rc;

	vcl_stream_init(&s, SG_VERCEL_SCRIPT_REPLY);
	/* A fresh wait: the caller's token has usually fired.  Killing twice is killing. */
	rc = args && vars ? vcl_run(ve, ve->rm.base.helper, args, vars, SG_VERCEL_KILL_MS, true,
				    SG_VERCEL_SCRIPT_REPLY, &s, NULL, &err)
			  : SG_E_INTERNAL;
	if (rc)
		sg_log_warn("sandbox %s: a command may still run: %s", ve->rm.name, err.msg);
	vcl_stream_release(&s);
	json_decref(args);
	json_decref(vars);
}

/*
 * One cmd request of a job (remote.h): sh -c its start or its attach.
 * Resend-safe: the job's start takes its .s file exclusively, so a copy
 * of the request attaches to the job instead of running the command
 * again, and an attach only reads.  (A relayed job's files go once it has
 * reported; curl sends a copy only when no byte of the reply came back,
 * and the stream's first line leaves when the command starts.)
 */
static enum sg_job_trip vcl_trip(struct sg_remote *rm, struct sg_remote_job *j, bool attach,
				 struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const struct sg_exec *x = j->x;
	size_t max_out = x->max_output + SG_HELPER_STDERR + 64 * SG_KiB;
	/* in the environment: the job's words, from SG_X or in the text */
	json_t *args = json_pack("[s, s]", "-c", attach ? SG_JOB_EVAL : j->command);
	int64_t trip_ms = 0; /* one request's HTTP timeout; 0: the cancel bounds it */
	struct vcl_stream s;
	sg_err rc;

	if (x->flags & SG_EXEC_DETACHES)
		trip_ms = SG_VERCEL_WAIT_MS + SG_VERCEL_TRIP_SLACK_MS;
	else if (x->timeout_ms > 0)
		trip_ms = x->timeout_ms + SG_VERCEL_TRIP_SLACK_MS;
	vcl_stream_init(&s, max_out);
	/* A start's job may outlive the request: stop at its last line. */
	s.stop_mark = j->linger && !attach ? j->mark : NULL;
	rc = args ? vcl_run((struct vcl_env *)rm, "sh", args, attach ? j->attach : j->start,
			    trip_ms, true, max_out, &s, cancel, err)
		  : sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (!rc && sg_buf_add(&j->reply, s.out.p, s.out.len))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	vcl_stream_release(&s);
	json_decref(args);
	if (rc == SG_E_WORKSPACE_LOST)
		return SG_JOB_TRIP_FATAL;
	return rc ? SG_JOB_TRIP_FAILED : SG_JOB_TRIP_REPLY;
}

/* ---- Keep-alive --------------------------------------------------------------- */

/* One keep-alive step (remote.h): extend the session's timeout by ka_ms. */
static void vcl_extend(struct sg_remote *rm, struct sg_cancel *stop)
{
	struct vcl_env *ve = (struct vcl_env *)rm;
	struct sg_errinfo err = { 0 };
	struct vcl_reply r = { 0 };
	json_t *body = json_pack("{s:I}", "duration", (json_int_t)rm->ka_ms);
	char sid[128], *p;

	vcl_get_sid(ve, sid, sizeof(sid));
	p = vcl_path("/v2/sandboxes/sessions/", sid, "/extend-timeout");
	if (p && body &&
	    !vcl_do(&ve->cl,
		    &(struct vcl_call){ .method = "POST", .path = p, .body = body,
					.what = "extending the sandbox's timeout" },
		    &r, stop, &err) &&
	    r.status != 200)
		vcl_fail(&ve->cl, "extending the sandbox's timeout", &r, SG_OK, &err);
	if (err.msg[0])
		sg_log_debug("sandbox %s: %s", ve->rm.name, err.msg);
	vcl_reply_release(&r);
	json_decref(body);
	free(p);
}

static const struct sg_remote_ops vcl_ops;

/* ---- provision ---------------------------------------------------------------- */

/* The installer's native transfer (adapters/install.h): fs/write. */
static sg_err vcl_install_upload(void *ctx, const char *path, int fd, struct sg_cancel *cancel,
				 struct sg_errinfo *err)
{
	struct sg_helper_bin b = { .fd = fd };
	sg_err rc;

	sg_progress_update("uploading sg-helper");
	b.size = lseek(fd, 0, SEEK_END);
	rc = b.size < 0 ? sg_err_set(err, SG_E_INTERNAL, "cannot size sg-helper")
			: sg_helper_bin_load(&b, err);
	if (!rc)
		rc = vcl_write(ctx, path, b.data, (size_t)b.size, 0600, cancel, err);
	free(b.data);
	return rc;
}

/*
 * What the set-up sends of sg-helper: its checksum always; for a sandbox
 * that cannot hold it yet (pp->upload), its bytes, the upload's path and
 * its marker's, in pp->dir or /tmp.  Into ve->prep, done set.
 */
static void vcl_prep_run(struct vcl_env *ve)
{
	struct vcl_prep *pp = &ve->prep;
	struct sg_install in = { .dir = pp->dir ? pp->dir : "/tmp", .nonce = ve->rm.nonce };

	pp->done = true;
	pp->rc = sg_helper_bin_open(ve->rm.base.helper_host, &pp->bin, &pp->err);
	if (pp->rc || !pp->upload)
		return;
	pp->rc = sg_install_beside_paths(&in, &pp->bin, &pp->up, &pp->mark, &pp->err);
	if (!pp->rc)
		pp->rc = sg_helper_bin_load(&pp->bin, &pp->err);
}

/*
 * Pack the upload into pp->tgz: in pp->dir, its directories first (the
 * set-up then makes none before the install), then the program, then
 * its marker (last: it exists once the program is whole).  tgz is left
 * empty when it fails.
 */
static sg_err vcl_prep_pack(struct vcl_prep *pp, struct sg_errinfo *err)
{
	static const char *const sub[] = { "", "/ctl", "/ctl/proc", "/ctl/home", "/ctl/tmp",
					   "/run" };
	enum { NSUB = sizeof(sub) / sizeof(sub[0]) };
	struct sg_targz_entry files[NSUB + 2];
	char *dirs[NSUB] = { 0 };
	size_t n = 0;
	sg_err rc = SG_OK;

	for (size_t k = 0; pp->dir && k < NSUB && !rc; k++) {
		if (asprintf(&dirs[k], "%s%s", pp->dir + 1, sub[k]) < 0) {
			dirs[k] = NULL;
			rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		} else {
			files[n++] = (struct sg_targz_entry){ .name = dirs[k], .mode = 0700,
							      .dir = true };
		}
	}
	/* 0700: the install need not chmod it (SG_INSTALL_SH). */
	files[n++] = (struct sg_targz_entry){ .name = pp->up + 1, .mode = 0700,
					      .data = pp->bin.data, .len = (size_t)pp->bin.size };
	files[n++] = (struct sg_targz_entry){ .name = pp->mark + 1, .mode = 0600, .data = "" };
	if (!rc)
		rc = vcl_pack(files, n, &pp->tgz, err);
	if (rc)
		sg_buf_reset(&pp->tgz);
	for (size_t k = 0; k < NSUB; k++)
		free(dirs[k]);
	return rc;
}

/* The packing leg: when it fails, the upload packs again and says why. */
static sg_err vcl_prep_pack_run(void *arg, struct sg_cancel *stop)
{
	struct sg_errinfo err = { 0 };

	(void)stop; /* a few ms of gzip, waited for */
	return vcl_prep_pack(arg, &err);
}

static void vcl_prep_init(struct vcl_env *ve, bool upload)
{
	sg_buf_init(&ve->prep.tgz, SG_MAX_FRAME * 8);
	ve->prep.bin.fd = -1;
	ve->prep.upload = upload;
	ve->prep.inited = true;
}

/*
 * Before a create: sg-helper read and summed here (a few ms), and its
 * archive packed on a thread while the create travels, so that the
 * upload can leave with the set-up command instead of after a gzip of
 * its own (docs/vercel.md, "What initialize sends").  A set-up that may
 * be left under way gets the upload in its directory.  Without a thread
 * the upload packs it.
 */
static void vcl_prep_start(struct vcl_env *ve)
{
	struct sg_errinfo no_thread = { 0 };

	vcl_prep_init(ve, true);
	if (sg_remote_may_defer(&ve->rm) && !(ve->prep.dir = sg_remote_later_dir(&ve->rm))) {
		ve->prep.done = true;
		ve->prep.rc = sg_err_set(&ve->prep.err, SG_E_INTERNAL, "out of memory");
		return;
	}
	vcl_prep_run(ve);
	ve->prep.pack = (struct sg_leg){ .run = vcl_prep_pack_run, .arg = &ve->prep };
	if (!ve->prep.rc && sg_leg_start(&ve->prep.pack, &no_thread))
		sg_log_debug("sandbox %s: %s: the upload packs sg-helper", ve->rm.name, no_thread.msg);
}

/* Wait for the packing leg, if one runs. */
static void vcl_prep_join(struct vcl_env *ve)
{
	sg_leg_end(&ve->prep.pack, SG_OK);
}

static void vcl_prep_release(struct vcl_env *ve)
{
	if (!ve->prep.inited)
		return;
	vcl_prep_join(ve);
	sg_helper_bin_close(&ve->prep.bin);
	sg_buf_release(&ve->prep.tgz);
	free(ve->prep.dir);
	free(ve->prep.up);
	free(ve->prep.mark);
	ve->prep.dir = ve->prep.up = ve->prep.mark = NULL;
	ve->prep.done = ve->prep.inited = false;
}

/*
 * The set-up of a sandbox this provision made, which cannot hold sg-helper
 * yet: the fs/write of sg-helper and the set-up command go out at once
 * (adapters/install.h, sg_install_run_beside).  The archive's last entry
 * is the marker that the script waits for.
 */
struct vcl_beside {
	struct vcl_env *ve; /* its prep: the upload, packed here when the thread did not */
	json_t *vars; /* the set-up's (borrowed) */
};

static sg_err vcl_beside_upload(void *ctx, struct sg_cancel *stop, struct sg_errinfo *err)
{
	struct vcl_env *ve = ((struct vcl_beside *)ctx)->ve;
	sg_err rc;

	vcl_prep_join(ve); /* its archive, when a thread packs it */
	rc = ve->prep.tgz.len ? SG_OK : vcl_prep_pack(&ve->prep, err);
	return rc ? rc : vcl_write_tgz(ve, &ve->prep.tgz, stop, err);
}

static sg_err vcl_beside_setup(void *ctx, char **reply, struct sg_cancel *stop,
			       struct sg_errinfo *err)
{
	struct vcl_beside *vb = ctx;

	return vcl_script(&vb->ve->rm, sg_cloud_setup_sh, vb->vars, reply, stop, err);
}

/* Root, sandgate's directories, sg-helper and the probe (cloud.h). */
static sg_err vcl_setup(struct sg_remote *rm, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct vcl_env *ve = (struct vcl_env *)rm;
	struct sg_env *env = &ve->rm.base;
	struct vcl_prep *pp = &ve->prep;
	struct sg_install_cost cost = { 0 };
	struct sg_install in = { .ctx = ve, .dir = "/tmp", .nonce = ve->rm.nonce,
				 .run = sg_remote_install_run, .upload = vcl_install_upload };
	char *reply = NULL, *up = NULL;
	json_t *vars = NULL;
	sg_err rc;

	/* A lookup came first: nothing was prepared. */
	if (!pp->inited) {
		vcl_prep_init(ve, ve->rm.fresh);
		vcl_prep_run(ve);
	}
	rc = pp->rc;
	if (rc) {
		sg_err_set(err, rc, "%s", pp->err.msg);
		goto out;
	}
	/* A new sandbox cannot have it: send it beside the set-up. */
	up = ve->rm.fresh ? pp->up : NULL;
	vars = sg_cloud_setup_vars(env->root, pp->bin.sha, 1440, up, up ? pp->mark : NULL,
				   SG_VERCEL_UPLOAD_WAIT_MS);
	if (!vars) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	} else if (up) {
		struct vcl_beside vb = { .ve = ve, .vars = vars };
		const struct sg_install_beside side = { .ctx = &vb, .upload = vcl_beside_upload,
							.setup = vcl_beside_setup };

		rc = sg_install_run_beside(&side, &reply, &cost.ms, cancel, err);
		cost.requests = 1;
		cost.bytes = pp->bin.size;
	} else {
		rc = vcl_script(&ve->rm, sg_cloud_setup_sh, vars, &reply, cancel, err);
	}
	rc = sg_remote_setup_read(rm, rc, reply, up != NULL, &in, &pp->bin, &cost, cancel, err);
	ve->install = cost;
out:
	vcl_prep_release(ve);
	json_decref(vars);
	free(reply);
	return rc;
}

/*
 * The set-up left under way (sg_remote_setup_begin): the same upload and
 * script as vcl_setup's, on the driver's leg, with sandgate's directory
 * chosen beforehand.  The leg owns ve->prep from here and releases it.
 */
static sg_err vcl_setup_later(struct sg_remote *rm, const char *fail, struct sg_cancel *stop,
			      struct sg_errinfo *err)
{
	struct vcl_env *ve = (struct vcl_env *)rm;
	struct vcl_prep *pp = &ve->prep;
	json_t *vars = sg_remote_later_vars(rm, fail, pp->bin.sha, pp->up, pp->mark,
					    SG_VERCEL_UPLOAD_WAIT_MS);
	struct vcl_beside vb = { .ve = ve, .vars = vars };
	const struct sg_install_beside side = { .ctx = &vb, .upload = vcl_beside_upload,
						.setup = vcl_beside_setup };
	char *reply = NULL;
	int64_t ms = 0;
	sg_err rc;

	rc = vars ? sg_install_run_beside(&side, &reply, &ms, stop, err)
		  : sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (!rc)
		rc = sg_remote_later_read(rm, reply, pp->bin.sha, err);
	if (!rc)
		sg_log_info("sandbox %s prepared beside its first commands in %lld ms", rm->name,
			    (long long)ms);
	vcl_prep_release(ve);
	json_decref(vars);
	free(reply);
	return rc;
}

/*
 * A new scratch sandbox: the set-up goes on beside the first commands
 * (adapters/remote.h), so the session starts one round trip sooner.
 * Anything else, or without a prepared upload: the set-up, waited for.
 */
static sg_err vcl_prepare(struct vcl_env *ve, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct vcl_prep *pp = &ve->prep;

	if (!sg_remote_can_defer(&ve->rm) || !pp->done || pp->rc || !pp->up || !pp->dir)
		return sg_remote_setup(&ve->rm, ve->rm.name, cancel, err);
	ve->install = (struct sg_install_cost){ .bytes = pp->bin.size, .requests = 1 };
	return sg_remote_setup_begin(&ve->rm, pp->bin.sha, vcl_setup_later, err);
}

/*
 * A scratch sandbox's expired snapshot holds nothing to keep: delete the
 * sandbox so that its name can be created again, but only when its tags
 * say it is sandgate's for this identity (the lookup that met the expired
 * snapshot showed no tags).
 */
static sg_err vcl_drop_expired(struct vcl_env *ve, struct sg_cancel *cancel,
			       struct sg_errinfo *err)
{
	json_t *got = NULL;
	sg_err rc = vcl_get(&ve->cl, ve->rm.name, false, 0, &got, NULL, cancel, err);

	if (rc == SG_E_NOT_FOUND) {
		sg_err_clear(err);
		rc = SG_OK; /* gone already */
	} else if (!rc) {
		rc = vcl_check_owner(ve, got, err);
		if (!rc)
			rc = vcl_delete(&ve->rm, ve->rm.name, cancel, err);
	}
	json_decref(got);
	return rc;
}

/*
 * Find the identity's sandbox (resuming it), or create it; wait until its
 * session runs.  *got (new) is the last reply with a session.
 *
 * When the state registry never knew the identity and the binding does
 * not require an existing workspace, the create goes first, without a
 * lookup: its name keeps it from making a second sandbox, and a sandbox
 * that exists anyway answers 409, which vcl_create settles by the lookup
 * it would have made (adopting it only when its tags say it is ours).
 */
static sg_err vcl_obtain(struct vcl_env *ve, json_t **got, struct sg_cancel *cancel,
			 struct sg_errinfo *err)
{
	struct sg_env *env = &ve->rm.base;
	bool look = env->known || env->require_existing;
	sg_err rc;

	for (int round = 0; round < 2; round++, look = true) {
		struct vcl_look lk = { 0 };
		bool made = false;

		rc = look ? vcl_get(&ve->cl, ve->rm.name, true, 0, got, &lk, cancel, err)
			  : SG_E_NOT_FOUND;
		if (lk.unknown)
			ve->doubt_ms = lk.sent_ms;
		if (rc == SG_E_NOT_FOUND) {
			sg_err_clear(err);
			rc = sg_remote_create(&ve->rm, ve->rm.name, got, &made, cancel, err);
			if (!made)
				return rc;
		}
		if (rc == SG_E_WORKSPACE_LOST && !vcl_keeps(env) && !env->require_existing) {
			/* A scratch sandbox's old snapshot: nothing to keep. */
			sg_err_clear(err);
			rc = vcl_drop_expired(ve, cancel, err);
			if (rc)
				return rc;
			continue;
		}
		if (rc)
			return rc;
		if (made) {
			/* vcl_create checked the tags of a sandbox it met. */
			env->resumed = !ve->rm.fresh;
		} else {
			struct sg_errinfo scratch = { 0 };

			rc = vcl_check_owner(ve, *got, err);
			/* Whoever owns it, a session this lookup started is noted. */
			if (!rc)
				rc = vcl_check_woken(ve, *got, &lk, err);
			else
				(void)vcl_check_woken(ve, *got, &lk, &scratch);
			if (rc)
				return rc;
			env->resumed = true;
		}
		snprintf(env->id, sizeof(env->id), "%s", ve->rm.name);
		return vcl_wait_running(ve, got, cancel, err);
	}
	return sg_err_set(err, SG_E_PROVIDER, "sandbox %s keeps disappearing", ve->rm.name);
}

static json_t *vcl_facts(const struct vcl_env *ve, const json_t *got)
{
	const struct sg_profile *p = ve->rm.base.profile;
	const json_t *s = vcl_session(got), *sb = json_object_get(got, "sandbox");
	json_t *req = json_object(), *app = json_object();

	if (p->cpus > 0)
		json_object_set_new(req, "cpus", json_real(p->cpus));
	if (p->memory_mb > 0)
		json_object_set_new(req, "memory_mb", json_integer(p->memory_mb));
	json_object_set_new(app, "cpus", json_integer(json_integer_value(json_object_get(s, "vcpus"))));
	json_object_set_new(app, "memory_mb",
			    json_integer(json_integer_value(json_object_get(s, "memory"))));
	/*
	 * What is observed is that commands run on another machine, reached
	 * only through Vercel's API: remote_host.  No mechanism: the API does
	 * not say what runs the sandbox (its documentation does), and facts
	 * are observed, never what a backend's name suggests.
	 */
	return json_pack("{s:{s:o, s:o}, s:s, s:{s:b}, s:{s:I, s:i, s:I}, s:{s:s, s:s?, s:s?, s:b, s:O?}}",
			 "resources", "requested", req, "applied", app, "safety_class",
			 "remote_host", "isolation", "host_filesystem_restricted", 1,
			 "helper_install", "bytes", (json_int_t)ve->install.bytes, "requests",
			 ve->install.requests, "ms", (json_int_t)ve->install.ms, "vercel",
			 "sandbox", ve->rm.name, "session", vcl_str(s, "id"), "region",
			 vcl_str(s, "region"), "persistent",
			 json_is_true(json_object_get(sb, "persistent")), "network_policy",
			 json_object_get(s, "networkPolicy"));
}

static sg_err vcl_provision(struct sg_env *env, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct vcl_env *ve = (struct vcl_env *)env;
	const struct sg_profile *p = env->profile;
	json_t *got = NULL;
	bool exact;
	sg_err rc;

	rc = sg_remote_init(&ve->rm, &vcl_ops, err);
	if (rc)
		return rc;
	ve->vcpus = vcl_vcpus(p->cpus, p->memory_mb, &exact);
	if (env->root[0] != '/')
		return sg_err_set(err, SG_E_INVALID_ARGUMENT, "root %s is not an absolute path",
				  env->root);
	rc = sg_remote_open(&ve->rm, p, err);
	if (rc)
		return rc;
	/* No lookup first: a create, and a new sandbox needs sg-helper sent. */
	if (!env->known && !env->require_existing)
		vcl_prep_start(ve);
	rc = vcl_obtain(ve, &got, cancel, err);
	if (rc)
		goto out;
	vcl_set_sid(ve, vcl_str(vcl_session(got), "id"));
	if (ve->vcpus > 0 &&
	    json_integer_value(json_object_get(vcl_session(got), "vcpus")) < ve->vcpus) {
		rc = sg_err_set(err, SG_E_UNSUPPORTED,
				"sandbox %s has %lld vCPU, fewer than the %lld profile \"%s\" asks for",
				ve->rm.name,
				(long long)json_integer_value(json_object_get(vcl_session(got), "vcpus")),
				(long long)ve->vcpus, p->name);
		goto out;
	}
	if (!ve->rm.fresh)
		rc = vcl_adopt(ve, cancel, err);
	if (!rc)
		rc = vcl_prepare(ve, cancel, err);
	if (!rc && !(env->facts = vcl_facts(ve, got)))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (!rc)
		sg_remote_keepalive_start(&ve->rm, vcl_timeout_ms(p) / 3);
out:
	if (sg_remote_failed(&ve->rm, rc, cancel)) {
		/* A failed create leaves nothing behind (remote.h). */
	} else if (rc && ve->woke && !ve->rm.fresh) {
		/*
		 * The lookup resumed a stopped sandbox, and the provisioning
		 * failed: stop it again rather than leave a VM running (and
		 * billed) until its timeout.  After a cancel the stop is only
		 * sent (Vercel finishes it without us), so that the cancel is
		 * answered within VCL_CANCEL_STOP_MS.
		 */
		struct sg_errinfo e2 = { 0 };
		bool quick = sg_cancel_check(cancel) != SG_OK;

		if (vcl_stop(ve, quick ? VCL_CANCEL_STOP_MS : 0, NULL, &e2)) {
			sg_log_warn("sandbox %s was resumed for a failed initialize and %s: %s",
				    ve->rm.name,
				    quick ? "its stop was sent, not seen through"
					  : "may run until its timeout",
				    e2.msg);
			env->may_run = true;
		}
	} else if (rc && !ve->rm.fresh && ve->doubt_ms) {
		/* A resume that may have happened unseen is looked for, not forgotten. */
		env->may_run = !vcl_settle_doubt(ve);
	}
	/* A set-up under way owns the upload (vcl_setup_later). */
	if (!env->setup_later)
		vcl_prep_release(ve);
	json_decref(got);
	return rc;
}

/* ---- Files ------------------------------------------------------------------------ */

static sg_err vcl_get_file(struct sg_env *env, const char *path, int fd, size_t max,
			   struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct vcl_env *ve = (struct vcl_env *)env;
	struct sg_http_fd_sink sink = { .fd = fd, .max = max };
	struct vcl_reply r = { 0 };
	json_t *body = json_pack("{s:s}", "path", path);
	char sid[128], *p;
	sg_err rc;

	vcl_get_sid(ve, sid, sizeof(sid));
	p = vcl_path("/v2/sandboxes/sessions/", sid, "/fs/read");
	rc = p && body ? vcl_do(&ve->cl,
				&(struct vcl_call){ .method = "POST", .path = p, .body = body,
						    .timeout_ms = SG_VERCEL_CREATE_MS * 5,
						    .sink = sg_http_sink_fd, .sink_payload = &sink,
						    .what = "reading a file in the sandbox" },
				&r, cancel, err)
		       : sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (rc == SG_E_TOO_LARGE)
		rc = sg_err_set(err, rc, "%s is larger than %zu bytes", path, max);
	else if (!rc && r.status == 404)
		rc = sg_err_set(err, SG_E_NOT_FOUND, "%s does not exist in the sandbox", path);
	else if (!rc && r.status != 200)
		rc = vcl_fail(&ve->cl, "reading a file in the sandbox", &r, SG_OK, err);
	vcl_reply_release(&r);
	json_decref(body);
	free(p);
	return rc;
}

/* ---- teardown, list, destroy, release ------------------------------------------ */

/* Stop session sid, waiting for it at most timeout_ms (0: SG_VERCEL_SETTLE_MS). */
static sg_err vcl_stop_sid(struct vcl_env *ve, const char *sid, int64_t timeout_ms,
			   struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct vcl_reply r = { 0 };
	char *p;
	sg_err rc;

	p = vcl_path("/v2/sandboxes/sessions/", sid, "/stop");
	/* Stopping a stopped session changes nothing: idempotent. */
	rc = p ? vcl_call_settled(&ve->cl,
				  &(struct vcl_call){ .method = "POST", .path = p,
						      .idempotent = true,
						      .timeout_ms = timeout_ms ? timeout_ms
									       : SG_VERCEL_SETTLE_MS,
						      .what = "stopping the sandbox" },
				  &r, cancel, err)
	       : sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (!rc && r.status != 200 && !(r.status == 410 && strcmp(r.code, "sandbox_stopped") == 0))
		rc = vcl_fail(&ve->cl, "stopping the sandbox", &r, SG_OK, err);
	vcl_reply_release(&r);
	free(p);
	return rc;
}

/* Stop the current session, waiting for it at most timeout_ms (0: SG_VERCEL_SETTLE_MS). */
static sg_err vcl_stop(struct vcl_env *ve, int64_t timeout_ms, struct sg_cancel *cancel,
		       struct sg_errinfo *err)
{
	char sid[128];

	vcl_get_sid(ve, sid, sizeof(sid));
	return vcl_stop_sid(ve, sid, timeout_ms, cancel, err);
}

/*
 * A failed provisioning after a lookup with ?resume=true whose outcome is
 * unknown (ve->doubt_ms): that lookup may have started a session which no
 * reply showed, and which would run, billed, until Vercel's timeout.  Ask
 * again without resume, and stop the sandbox's session when it was
 * requested since the lookup was sent (vcl_started_since).  A request
 * given up on (a cancel) may land only after this asks, so the question
 * is repeated for VCL_CANCEL_STOP_MS while no such session shows; the
 * stop is waited for as long again at most, so that a cancel is answered
 * soon.  A session older than the lookup is another's, and left alone.
 * False when it could not be seen that nothing of it runs (env->may_run).
 */
static bool vcl_settle_doubt(struct vcl_env *ve)
{
	int64_t until = sg_now_ms() + VCL_CANCEL_STOP_MS;
	struct sg_errinfo e = { 0 };
	sg_err rc;

	for (;;) {
		struct vcl_look lk;
		json_t *got = NULL;
		int64_t left = until - sg_now_ms();

		sg_err_clear(&e);
		rc = vcl_get(&ve->cl, ve->rm.name, false, left > 500 ? left : 500, &got, &lk, NULL, &e);
		if (!rc && vcl_started_since(got, ve->doubt_ms, lk.date_ms, lk.got_ms)) {
			const char *sid = vcl_str(vcl_session(got), "id");

			sg_err_clear(&e);
			rc = sid ? vcl_stop_sid(ve, sid, VCL_CANCEL_STOP_MS, NULL, &e)
				 : sg_err_set(&e, SG_E_PROVIDER, "Vercel's reply names no session");
			if (rc)
				sg_log_warn("sandbox %s: session %s, which a lookup of a failed initialize may have started, was sent a stop not seen through: %s",
					    ve->rm.name, sid ? sid : "(unnamed)", e.msg);
			else
				sg_log_info("sandbox %s: stopped session %s, which a lookup of a failed initialize started",
					    ve->rm.name, sid);
			json_decref(got);
			return rc == SG_OK;
		}
		json_decref(got);
		/* Gone: nothing of it runs. */
		if (rc == SG_E_NOT_FOUND)
			return true;
		if (sg_now_ms() + SG_VERCEL_POLL_MS > until)
			break;
		(void)sg_cancel_sleep(NULL, SG_VERCEL_POLL_MS);
	}
	/* Seen, and no session started since, for as long as a resume may take to land. */
	if (!rc)
		return true;
	sg_log_warn("sandbox %s: a lookup of a failed initialize may have started a session, and it cannot be looked up now (%s); it runs until Vercel's timeout",
		    ve->rm.name, e.msg);
	return false;
}

/* Teardown's KEEP (remote.h): Vercel snapshots a persistent sandbox as it stops. */
static sg_err vcl_keep(struct sg_remote *rm, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	return vcl_stop((struct vcl_env *)rm, 0, cancel, err);
}

static void vcl_copy(char *dst, size_t n, const char *src)
{
	snprintf(dst, n, "%s", src ? src : "");
}

/* An operator's view of one listed sandbox (Vercel's five tags). */
static bool vcl_info(const json_t *item, struct sg_env_info *info)
{
	const json_t *tags = json_object_get(item, "tags");
	const char *ex = vcl_str(tags, VCL_T_EXPIRES), *m = vcl_str(tags, VCL_T_MANAGED);

	/* The filter is Vercel's; sandgate checks it anyway. */
	if (!m || strcmp(m, SG_CLOUD_MANAGER) != 0)
		return false;
	vcl_copy(info->id, sizeof(info->id), vcl_str(item, "name"));
	vcl_copy(info->state, sizeof(info->state), vcl_str(item, "status"));
	vcl_copy(info->identity, sizeof(info->identity), vcl_str(tags, VCL_T_IDENTITY));
	vcl_copy(info->session, sizeof(info->session), vcl_str(tags, VCL_T_SESSION));
	vcl_copy(info->profile, sizeof(info->profile), vcl_str(tags, VCL_T_PROFILE));
	info->created = json_integer_value(json_object_get(item, "createdAt")) / 1000;
	info->expires = ex ? strtoll(ex, NULL, 10) : 0;
	info->persistent = json_is_true(json_object_get(item, "persistent"));
	return true;
}

/* One page of sandboxes tagged with p's name (remote.h). */
static sg_err vcl_list_page(struct sg_remote *rm, const struct sg_profile *p,
			    const char *cursor, json_t **items, char **next,
			    struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct vcl_client *cl = &((struct vcl_env *)rm)->cl;
	struct sg_buf q = SG_BUF_INIT(SG_PATH_MAX * 2);
	struct vcl_reply r = { 0 };
	const char *more;
	sg_err rc;

	if (sg_buf_adds(&q, "project=") || sg_cloud_urlenc(&q, cl->project) ||
	    sg_buf_adds(&q, "&limit=100&tags=managed-by%3Asandgate&tags=" VCL_T_PROFILE "%3A") ||
	    sg_cloud_urlenc(&q, p->name) ||
	    (cursor && (sg_buf_adds(&q, "&cursor=") || sg_cloud_urlenc(&q, cursor)))) {
		sg_buf_release(&q);
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	rc = vcl_do(cl,
		    &(struct vcl_call){ .path = "/v2/sandboxes", .query = q.p, .idempotent = true,
					.what = "listing sandboxes" },
		    &r, cancel, err);
	sg_buf_release(&q);
	if (!rc && (r.status != 200 || !json_is_array(json_object_get(r.json, "sandboxes"))))
		rc = vcl_fail(cl, "listing sandboxes", &r, SG_E_PROVIDER, err);
	*items = rc ? NULL : json_incref(json_object_get(r.json, "sandboxes"));
	more = rc ? NULL : vcl_str(json_object_get(r.json, "pagination"), "next");
	*next = more && *more ? strdup(more) : NULL;
	vcl_reply_release(&r);
	return rc;
}

/* The named sandbox id's view (remote.h). */
static sg_err vcl_lookup(struct sg_remote *rm, const char *id, json_t **got,
			 struct sg_cancel *cancel, struct sg_errinfo *err)
{
	return vcl_get(&((struct vcl_env *)rm)->cl, id, false, 0, got, NULL, cancel, err);
}

static const char *vcl_tag(const json_t *got, const char *key)
{
	return vcl_str(json_object_get(json_object_get(got, "sandbox"), "tags"), key);
}

/* The client, for a session or an operator's call (remote.h). */
static sg_err vcl_open(struct sg_remote *rm, const struct sg_profile *p, struct sg_errinfo *err)
{
	return vcl_client_init(&((struct vcl_env *)rm)->cl, p, err);
}

static void vcl_close(struct sg_remote *rm)
{
	vcl_client_release(&((struct vcl_env *)rm)->cl);
}

static const struct sg_remote_ops vcl_ops = {
	.provider = "Vercel",
	.inline_max = SG_VERCEL_INLINE_MAX,
	.stdin_vars = SG_VERCEL_STDIN_VARS,
	.relays = true,
	.lingers = true,
	.relay_wait_ms = SG_VERCEL_WAIT_MS,
	.fails = 1,
	.kill_unseen = true,
	.list_pages = SG_VERCEL_LIST_PAGES,
	.trip = vcl_trip,
	.kill = vcl_kill,
	.upload = vcl_upload,
	.extend = vcl_extend,
	.script = vcl_script,
	.setup = vcl_setup,
	.keep = vcl_keep,
	.create = vcl_create,
	.env_size = sizeof(struct vcl_env),
	.open = vcl_open,
	.close = vcl_close,
	.lookup = vcl_lookup,
	.tag = vcl_tag,
	.remove = vcl_delete,
	.list_page = vcl_list_page,
	.info = vcl_info,
};

SG_REMOTE_OPERATOR(vcl, &vcl_ops)

static void vcl_release(struct sg_env *env)
{
	struct vcl_env *ve = (struct vcl_env *)env;

	if (ve->cl.rest.api)
		sg_log_debug("sandbox %s: %llu Vercel requests", ve->rm.name ? ve->rm.name : "?",
			     (unsigned long long)atomic_load(&ve->cl.requests));
	sg_remote_release(&ve->rm);
	sg_env_release_base(env);
}

const struct sg_adapter sg_adapter_vercel = {
	.name = "vercel",
	.caps = SG_CAP_FILES | SG_CAP_LIST,
	.env_size = sizeof(struct vcl_env),
	.fields = vcl_fields,
	.validate = vcl_validate,
	.provision = vcl_provision,
	.exec = sg_remote_exec,
	.get_file = vcl_get_file,
	.teardown = sg_remote_teardown,
	.list = vcl_list,
	.destroy = vcl_destroy,
	.release = vcl_release,
};
