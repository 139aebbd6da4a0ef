/*
 * daytona.c - the daytona backend: environments in Daytona sandboxes,
 * over Daytona's HTTP APIs (libcurl through core/http.h, jansson).
 *
 * Provisioning.  One sandbox per identity, named deterministically from
 * it ("sg-<readable part>-<sha256 prefix>"), labelled managed-by=sandgate
 * with the identity, session, profile, creation time and expiry, and
 * given Daytona's own backstops: autoStopInterval from lifetime_seconds,
 * autoDeleteInterval for non-persistent sandboxes, autoArchiveInterval
 * for persistent ones.  provision() first asks for the sandbox by name:
 * a stopped or archived one is started (resumed), a missing one created
 * from `image` (buildInfo, the only way Daytona lets CPU and memory be
 * chosen) or `snapshot`.  Creating is the one call that must not be
 * repeated blindly; a unique name is Daytona's only guard against a
 * duplicate (it has no idempotency key), so after any doubtful create the
 * adapter looks the name up, and a create that meets 409 adopts what is
 * there.  A random label (sandgate.create) tells a sandbox this very
 * provision made from one that already existed: only the former is
 * deleted when provisioning fails halfway.
 *
 * Inside the sandbox.  binding.root is created (mkdir -p, else sudo -n);
 * sandgate's own files live in $HOME/.sandgate (or /tmp/.sandgate-<uid>
 * when root would contain that): ctl/ (env->ctl_dir: proc/, home/, tmp/),
 * run/ (one set of files per exec, below), and sg-helper-<sha256>, put
 * there by the installer all remote adapters share (adapters/install.h)
 * only when that file is not already there with the right checksum
 * (sha256sum in the sandbox).  A sandbox this provision created cannot
 * have it, so its copy is uploaded first and the one set-up request
 * installs it and runs sg-helper's probe (env->probe), so a new sandbox is
 * ready after the upload and one script; a new scratch sandbox does not
 * wait for those: they go on beside the first commands, which wait in the
 * sandbox for sg-helper (dtn_prepare, adapters/remote.h).  While it waits for `started`,
 * provision() listens to Daytona's event stream (events.h), as the SDK
 * does, and polls only as a fallback.
 *
 * One exec, one request.  The toolbox runs a shell *script* (given on
 * the shell's stdin) and merges stderr into stdout; sandgate needs argv
 * exactly, an exact environment, stdin, stdout apart from stderr, the
 * real exit status or signal, a timeout that kills the process group, and
 * cancel.  Each exec therefore sends one POST /process/execute whose
 * command is the short line `eval "exec $SG_X"`, with SG_X (in the
 * request's `envs`) holding sg-helper's `job` command line, quoted (bash
 * reads a script on stdin one byte per read(2), about 0.7 s per MiB;
 * variables cost nothing).  `sg-helper job` (helper/job.c)
 * creates run/<token>.s exclusively (the "start once" guard), writes
 * stdin beside it, and forks a runner in a session of its own that runs
 * the command with exactly the given environment, stdout and stderr to
 * files, records the real wait status, and kills what the command left
 * in its group.  The job waits for the runner at most toolbox_timeout_ms
 * minus a margin, then prints a bounded head of stdout, a trailer line
 * with a per-exec random marker (exit status, "exit N"/"signal N", timed
 * out, total size), and a bounded head of stderr.  Beyond the toolbox's
 * own shell, an exec costs the sandbox one fork and one fork+exec.
 *
 * Departure from the brief's "sessions for long commands": a command that
 * is still running when the wait ends makes the script answer "pending",
 * and the next request for the same token attaches to it and waits again.
 * The command never depended on the HTTP exchange (it has its own session
 * and writes to files), so a 408, a dropped connection or a lost reply
 * loses nothing, and every request is idempotent and retried.  Sessions
 * would give the same survival, but at four or more requests for every
 * command (create, exec, poll, logs), with stdout and stderr split but the
 * exit signal lost; this way a command that ends in time costs exactly one
 * request, which is what a tool call should cost (issue 4).
 *
 * Timeouts and cancel.  x->timeout_ms is enforced in the sandbox by the
 * runner, which SIGKILLs its group when the time is up (so a timed-out
 * command is killed even if sandgate is gone).  A cancel aborts
 * the HTTP request and sends a second, short request that marks the token
 * cancelled (run/<token>.cancel, honoured by a runner that had not yet
 * recorded its pid) and kills the group; only then does exec return the
 * token's reason.
 *
 * Activity.  Daytona's auto-stop counts only API traffic.  After an exec
 * that left a daemon behind (sg-helper proc spawn), a keep-alive thread
 * wakes every keepalive_ms (a third of the auto-stop interval by default),
 * asks sg-helper whether this session still has running processes (with
 * X-Daytona-Skip-Last-Activity-Update, so the question alone keeps
 * nothing alive) and, while it has, posts /sandbox/{id}/last-activity.
 *
 * Teardown: KEEP stops the sandbox (persistent or not: a non-persistent
 * one is then deleted by Daytona's autoDeleteInterval, lifetime_seconds
 * after it stopped), REMOVE deletes it and waits until Daytona no longer
 * finds it, DETACH does nothing remote.  A
 * 409 (a transition in progress) is waited out and the call repeated, all
 * within the cancel token's deadline.
 *
 * The sandbox needs a POSIX sh, sha256sum, cut, find, cp and mv
 * (coreutils or busybox) to install sg-helper; provision() checks and
 * refuses, naming what is missing.
 */
#define _GNU_SOURCE /* asprintf, getentropy, pthread with a POSIX profile */
#include "adapters/adapter.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
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
#include "core/http.h"
#include "adapters/install.h"
#include "adapters/jobreply.h"
#include "core/leg.h"
#include "adapters/remote.h"
#include "core/shquote.h"
#include "base/crash.h"
#include "base/hex.h"
#include "base/limits.h"
#include "base/log.h"
#include "base/progress.h"
#include "base/strv.h"
#include "base/utf8.h"
#include "daytona/api.h"
#include "daytona/events.h"

/* Naming bounds; the waits and sizes are in base/limits.h. */
#define DTN_GARBAGE_BATCH 16 /* finished execs whose files one rm removes */
/* Lookups of an identity's sandbox while what is found keeps going away (dtn_obtain). */
#define DTN_OBTAIN_ROUNDS 4

/* Label keys: the cloud adapters' one vocabulary (adapters/cloudkit.h). */
#define DTN_L_MANAGED SG_CLOUD_TAG_MANAGED
#define DTN_L_IDENTITY SG_CLOUD_TAG_IDENTITY
#define DTN_L_PROFILE SG_CLOUD_TAG_PROFILE
#define DTN_L_CREATE SG_CLOUD_TAG_CREATE
#define DTN_L_CREATED SG_CLOUD_TAG_CREATED

struct dtn_env {
	/* first: its base is the env; rm.lock guards garbage and ka_armed, ka_gen */
	struct sg_remote rm;
	struct dtn_client cl;
	char *toolbox;   /* <toolboxProxyUrl>/<id> */
	char *proc_dir;  /* ctl_dir/proc, where sg-helper keeps process records */
	int64_t limit_ms; /* toolbox_timeout_ms */
	bool started;     /* this provision asked Daytona to start it */
	char create_id[33];
	struct sg_strv garbage; /* run directories whose results arrived */
	/* keep-alive, while a daemon may run */
	bool ka_armed;          /* a daemon was left since the last check */
	unsigned ka_gen;        /* bumped by every arm */
	struct sg_install_cost install; /* what set-up spent on sg-helper */
	struct sg_helper_bin later_bin; /* sent by a set-up under way (dtn_setup_later) */
};

/* ---- Scripts run in the sandbox ------------------------------------------
 *
 * Parameters arrive as variables (SG_*), never spliced into the text.
 * Every script silences its own stderr: the toolbox merges it into the
 * reply, which must hold only what the script prints on purpose.
 */

/* Kill the exec of prefix SG_D, or keep it from ever starting. */
static const char dtn_kill_sh[] =
	"exec 2>/dev/null\n"
	"d=$SG_D p=\n"
	": >\"$d.s\"\n"
	": >\"$d.cancel\"\n"
	"read -r p <\"$d.pid\"\n"
	"if [ -n \"$p\" ]; then kill -9 -\"$p\" || kill -9 \"$p\"; fi\n"
	"test -s \"$d.x\" || printf '137\\n' >\"$d.x\"\n"
	"printf 'ok=1\\n'\n";

/* This session's processes, for the keep-alive (SG_H, SG_CTL, SG_SESS). */
static const char dtn_procs_sh[] =
	"exec 2>/dev/null\n"
	"\"$SG_H\" proc list --ctl \"$SG_CTL\" --session \"$SG_SESS\"\n";

/* ---- Small helpers ------------------------------------------------------- */

/*
 * A step of provisioning at --log-level debug, with the wall clock in ms,
 * so that a timeline of initialize lines up with a provider's request log.
 */
static void dtn_mark(const char *what)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	sg_log_debug("timeline %s at %lld.%03ld", what,
		     (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000,
		     (ts.tv_nsec / 1000) % 1000);
}

/* Whole vCPUs: Daytona takes integers, so a fraction is rounded up. */
static int64_t dtn_cpus(double cpus)
{
	int64_t n = (int64_t)cpus;

	if (cpus <= 0)
		return 0;
	return (double)n + 1e-9 < cpus ? n + 1 : n;
}

/* Whole GiB, rounded up. */
static int64_t dtn_gib(int64_t mb)
{
	return mb > 0 ? (mb + 1023) / 1024 : 0;
}

/* Minutes, rounded up, at least 1. */
static int64_t dtn_minutes(int64_t seconds)
{
	int64_t m = (seconds + 59) / 60;

	return m < 1 ? 1 : m;
}

/* ---- validate ------------------------------------------------------------ */

/*
 * The profile fields the daytona backend honours (adapter.h), its own
 * (README.md) with their types; the config layer refuses every other one.
 * IPv6 allow entries cannot be expressed: network may be best-effort.
 * `workspace` is accepted for the host's sake and changes nothing:
 * commands see the workspace at binding.root (docs/daytona.md).
 */
static const struct sg_field dtn_fields[] = {
	SG_FIELD("image"), SG_FIELD("snapshot"), SG_FIELD("workspace"),
	SG_FIELD("user"), SG_FIELD("persistent"), SG_FIELD("shared"),
	SG_FIELD_BEST_EFFORT("network"), SG_FIELD("cpus"), SG_FIELD("memory_mb"),
	SG_FIELD_OWN_STRING("target"),
	SG_FIELD_OWN_ENV("api_key_env", DTN_ENV_KEY, SG_FIELD_PROBE),
	SG_FIELD_OWN_ENV("api_url_env", DTN_ENV_URL, SG_FIELD_PROBE),
	SG_FIELD_OWN_ENV("target_env", DTN_ENV_TARGET, SG_FIELD_PROBE),
	SG_FIELD_OWN_INT("toolbox_timeout_ms", 2000, INT32_MAX),
	SG_FIELD_OWN_INT("keepalive_ms", 1000, INT32_MAX), SG_FIELDS_END,
};

static bool dtn_in(const char *const *list, const char *s)
{
	for (size_t i = 0; list[i]; i++)
		if (strcmp(list[i], s) == 0)
			return true;
	return false;
}

/*
 * The allow list as Daytona takes it: IPv4 CIDRs for networkAllowList,
 * domains for domainAllowList, comma-separated, at most 10 of each.
 * IPv6 ranges cannot be expressed: refused, or with network best-effort
 * left out (which is stricter, never weaker: they stay blocked).
 */
static sg_err dtn_allow_lists(const struct sg_profile *p, struct sg_buf *cidrs,
			      struct sg_buf *domains, struct sg_errinfo *err)
{
	size_t nc = 0, nd = 0;
	sg_err rc = SG_OK;

	for (size_t i = 0; !rc && p->network_allow && p->network_allow[i]; i++) {
		const char *e = p->network_allow[i];

		if (strchr(e, ':')) {
			if (!sg_profile_best_effort(p, "network"))
				return sg_err_set(err, SG_E_UNSUPPORTED,
						  "network allow entry \"%.60s\" (profile \"%s\"): the daytona backend can allow IPv4 ranges and domains only",
						  e, p->name);
			continue;
		}
		if (strchr(e, '/')) {
			if (sg_allow_kind(e) != SG_ALLOW_IPV4)
				return sg_err_set(err, SG_E_INVALID_ARGUMENT,
						  "network allow entry \"%.60s\" (profile \"%s\") is not an IPv4 CIDR",
						  e, p->name);
			rc = nc ? sg_buf_addc(cidrs, ',') : SG_OK;
			if (!rc)
				rc = sg_buf_adds(cidrs, e);
			nc++;
		} else {
			rc = nd ? sg_buf_addc(domains, ',') : SG_OK;
			if (!rc)
				rc = sg_buf_adds(domains, e);
			nd++;
		}
	}
	if (rc)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (nc > 10 || nd > 10)
		return sg_err_set(err, SG_E_UNSUPPORTED,
				  "network allow list (profile \"%s\"): Daytona enforces at most 10 IPv4 ranges and 10 domains, and this one has %zu and %zu",
				  p->name, nc, nd);
	if (p->network == SG_NET_ALLOW && nc == 0 && nd == 0)
		return sg_err_set(err, SG_E_UNSUPPORTED,
				  "network allow list (profile \"%s\"): nothing in it can be enforced by the daytona backend; use \"none\"",
				  p->name);
	return SG_OK;
}

static sg_err dtn_validate(const struct sg_profile *p, struct sg_errinfo *err)
{
	struct sg_buf cidrs = SG_BUF_INIT(SG_KiB * 4), domains = SG_BUF_INIT(SG_KiB * 4);
	struct dtn_client cl;
	sg_err rc;

	if (p->image && p->snapshot)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "profile \"%s\" sets both image and snapshot; Daytona creates a sandbox from one of them",
				  p->name);
	if (p->image && strpbrk(p->image, "\r\n"))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "field \"image\" (profile \"%s\") holds a line break", p->name);
	rc = dtn_allow_lists(p, &cidrs, &domains, err);
	sg_buf_release(&cidrs);
	sg_buf_release(&domains);
	if (rc)
		return rc;
	/* Credentials are looked at here too, so a missing key is refused
	 * before anything is attempted (the host may fix it and retry). */
	rc = dtn_client_init(&cl, p, err);
	if (!rc)
		dtn_client_release(&cl);
	return rc;
}

/* ---- The control plane --------------------------------------------------- */

static const char *const dtn_stable_states[] = {
	"started", "stopped", "archived", "error", "build_failed", "paused",
	"destroyed", NULL,
};

static const char *dtn_state(const json_t *dto)
{
	const char *s = dtn_str(dto, "state");

	return s ? s : "unknown";
}

/* A transition runs while state differs from desiredState (cloud-apis 1.5). */
static bool dtn_in_transition(const json_t *dto)
{
	const char *st = dtn_state(dto), *want = dtn_str(dto, "desiredState");

	if (!dtn_in(dtn_stable_states, st))
		return true;
	return want && strcmp(want, st) != 0 && strcmp(st, "error") != 0 &&
	       strcmp(st, "build_failed") != 0;
}

/* GET /sandbox/{id}: *dto (new), or SG_E_NOT_FOUND once it is gone. */
static sg_err dtn_get(const struct dtn_client *cl, const char *id, json_t **dto,
		      struct sg_cancel *cancel, struct sg_errinfo *err)
{
	char *url = dtn_sandbox_url(cl, id, NULL);
	struct dtn_reply r;
	sg_err rc;

	*dto = NULL;
	if (!url)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	rc = dtn_do(cl, &(struct dtn_call){ .url = url, .what = "looking up the sandbox" },
		    &r, cancel, err);
	if (!rc && r.status == 404)
		rc = SG_E_NOT_FOUND; /* callers decide what a missing sandbox means */
	else if (!rc && (r.status != 200 || !json_is_object(r.json)))
		rc = dtn_fail(cl, "looking up the sandbox", &r, SG_OK, err);
	if (!rc) {
		*dto = r.json;
		r.json = NULL;
	}
	dtn_reply_release(&r);
	free(url);
	return rc;
}

/* Is the event stream worth waiting on (live, or still connecting)? */
static bool dtn_events_wanted(struct dtn_events *ev)
{
	return dtn_events_live(ev) || !dtn_events_gone(ev);
}

/*
 * Wait on the event stream for the next news of sandbox id after last (the
 * DTO last judged): a new DTO from an event (new reference), or NULL when
 * it is time to poll (the stream came up, went away, or was quiet for
 * SG_DAYTONA_EVENT_POLL_MS).  An event older than last is no news: it was
 * delivered late (the "started" of a start before the stop that last
 * shows), and taken for the state it would end a wait too early.
 */
static json_t *dtn_wait_events(struct dtn_events *ev, const char *id, const json_t *last,
			       unsigned *gen, struct sg_cancel *cancel)
{
	int64_t until = sg_now_ms() + SG_DAYTONA_EVENT_POLL_MS;
	bool live = dtn_events_live(ev);

	for (;;) {
		int64_t left = until - sg_now_ms();
		json_t *seen;

		if (left <= 0 || sg_cancel_check(cancel))
			return NULL;
		seen = dtn_events_wait(ev, id, left, gen, cancel);
		if (seen && seen != last && !json_equal(seen, last) && !dtn_older(seen, last))
			return seen;
		json_decref(seen);
		/* Up (a change may have been missed meanwhile) or down: poll. */
		if (dtn_events_live(ev) != live || dtn_events_gone(ev))
			return NULL;
	}
}

/*
 * The state of one wait for a sandbox: what was seen, what came by event,
 * and the poll's timers.
 */
struct dtn_poll {
	int64_t max_ms, deadline, delay;
	const json_t *first; /* the create's answer, standing for the first poll */
	json_t *cur;         /* the sandbox as last seen (new) */
	json_t *heard;       /* news from the event stream, not yet judged (new) */
	unsigned gen;        /* the event stream's generation, for dtn_events_wait */
	bool polled;         /* an API answer was seen, so events may be waited on */
	bool from_event;     /* cur came from the event stream */
};

/* What a wait does after judging the state it saw. */
enum dtn_poll_next { DTN_POLL_SETTLED, DTN_POLL_RECHECK, DTN_POLL_PAUSE };

/* The sandbox's next state: the create's answer, an event's, or a GET's. */
static sg_err dtn_poll_next(const struct dtn_client *cl, const char *id, struct dtn_poll *w,
			    struct sg_cancel *cancel, struct sg_errinfo *err)
{
	sg_err rc;

	json_decref(w->cur);
	w->cur = NULL;
	w->from_event = false;
	if (w->first) {
		/* An API answer, not an event: as good as this poll. */
		w->cur = json_deep_copy(w->first);
		w->first = NULL;
		w->polled = true;
		return w->cur ? SG_OK : sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	if (w->heard) {
		/* The event stream's word for it: as good as a GET for a state
		 * we wait for, not for giving up (dtn_poll_judge). */
		w->cur = w->heard;
		w->heard = NULL;
		w->from_event = true;
		return SG_OK;
	}
	rc = dtn_get(cl, id, &w->cur, cancel, err);
	if (!rc)
		w->polled = true;
	return rc;
}

/*
 * Judge the state just seen: wanted (settled), failed for good (an
 * error), or still to be waited for, at once when an event's word must
 * be checked with the API first.
 */
static sg_err dtn_poll_judge(const struct dtn_client *cl, const char *id,
			     const char *const *want, const struct dtn_poll *w,
			     enum dtn_poll_next *next, struct sg_errinfo *err)
{
	const char *st = dtn_state(w->cur);

	*next = DTN_POLL_PAUSE;
	dtn_mark(w->from_event ? "state from an event" : "state from the API");
	sg_progress_update("sandbox %s is %s", id, st);
	if (want ? dtn_in(want, st) : !dtn_in_transition(w->cur)) {
		*next = DTN_POLL_SETTLED;
		return SG_OK;
	}
	if (strcmp(st, "error") == 0 || strcmp(st, "build_failed") == 0) {
		const char *why = dtn_str(w->cur, "errorReason");
		char msg[200];

		snprintf(msg, sizeof(msg), "%s", why ? why : "no reason given");
		sg_cloud_scrub(msg, cl->rest.secret);
		return sg_err_set(err, SG_E_PROVIDER, "sandbox %s is in state %s: %s", id, st,
				  msg);
	}
	if (want && !dtn_in_transition(w->cur) && w->from_event) {
		/*
		 * Events can arrive late and out of order (the "stopped" of a
		 * stop just before our start): ask the sandbox itself before
		 * deciding nothing is moving it.
		 */
		*next = DTN_POLL_RECHECK;
		return SG_OK;
	}
	if (want && !dtn_in_transition(w->cur))
		return sg_err_set(err, SG_E_PROVIDER,
				  "sandbox %s is %s and nothing is moving it to %s", id, st,
				  want[0]);
	return SG_OK;
}

/*
 * Wait before the next look: on the event stream once an API answer was
 * seen (as the SDK learns of a change), else a sleep that grows by half
 * up to SG_DAYTONA_POLL_MAX_MS; a timeout once the next look would come
 * after the deadline.
 */
static sg_err dtn_poll_pause(const struct dtn_client *cl, const char *id, struct dtn_poll *w,
			     struct sg_cancel *cancel, struct sg_errinfo *err)
{
	sg_err rc;

	if (sg_now_ms() + w->delay > w->deadline)
		return sg_err_set(err, SG_E_TIMEOUT, "sandbox %s was still %s after %lld s", id,
				  dtn_state(w->cur), (long long)(w->max_ms / 1000));
	if (cl->events && w->polled && dtn_events_wanted(cl->events)) {
		/* Learn of the change as the SDK does; poll now and then anyway. */
		w->heard = dtn_wait_events(cl->events, id, w->cur, &w->gen, cancel);
		rc = sg_cancel_check(cancel);
		if (rc)
			sg_err_set(err, rc, "waiting for sandbox %s was cancelled", id);
		return rc;
	}
	rc = sg_cancel_sleep(cancel, w->delay);
	if (rc)
		return sg_err_set(err, rc, "waiting for sandbox %s was cancelled", id);
	w->delay = w->delay * 3 / 2 > SG_DAYTONA_POLL_MAX_MS ? SG_DAYTONA_POLL_MAX_MS
							     : w->delay * 3 / 2;
	return SG_OK;
}

/*
 * Poll the sandbox until it reaches a state in want (NULL: any state
 * outside a transition), within max_ms.  error and build_failed end the
 * wait with SG_E_PROVIDER unless wanted; a stable state that is not
 * wanted and not moving either.  404 is SG_E_NOT_FOUND.  *dto (new) is
 * the last sandbox seen.  first (borrowed, may be NULL) is the sandbox as
 * Daytona answered it a moment ago (the create's reply): it stands for
 * the first poll, one request less.
 */
static sg_err dtn_wait_from(const struct dtn_client *cl, const char *id,
			    const char *const *want, int64_t max_ms, const json_t *first,
			    json_t **dto, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct dtn_poll w = { .max_ms = max_ms, .deadline = sg_now_ms() + max_ms,
			      .delay = SG_DAYTONA_POLL_FIRST_MS, .first = first };
	enum dtn_poll_next next = DTN_POLL_PAUSE;
	sg_err rc;

	*dto = NULL;
	for (;;) {
		rc = dtn_poll_next(cl, id, &w, cancel, err);
		if (!rc)
			rc = dtn_poll_judge(cl, id, want, &w, &next, err);
		if (rc || next == DTN_POLL_SETTLED)
			break;
		if (next == DTN_POLL_RECHECK)
			continue;
		rc = dtn_poll_pause(cl, id, &w, cancel, err);
		if (rc)
			break;
	}
	json_decref(w.heard);
	if (rc)
		json_decref(w.cur);
	else
		*dto = w.cur;
	return rc;
}

static sg_err dtn_wait(const struct dtn_client *cl, const char *id,
		       const char *const *want, int64_t max_ms, json_t **dto,
		       struct sg_cancel *cancel, struct sg_errinfo *err)
{
	return dtn_wait_from(cl, id, want, max_ms, NULL, dto, cancel, err);
}

enum dtn_op { DTN_START, DTN_STOP, DTN_DELETE };

/*
 * A stop refused with 400 ("not in a stoppable state"), which is fine
 * when the sandbox is already down: *settled when it is (stopped,
 * archived, gone) or when nothing is moving it or the tries are spent
 * (an error); otherwise a transition runs and the stop is tried again
 * after it.
 */
static sg_err dtn_stop_refused(const struct dtn_client *cl, const char *id, int tries,
			       bool *settled, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	json_t *dto = NULL;
	sg_err rc = dtn_get(cl, id, &dto, cancel, err);

	*settled = true;
	if (rc == SG_E_NOT_FOUND) {
		sg_err_clear(err);
		return SG_OK;
	}
	if (rc)
		return rc;
	if (strcmp(dtn_state(dto), "stopped") == 0 || strcmp(dtn_state(dto), "archived") == 0)
		rc = SG_OK;
	else if (!dtn_in_transition(dto) || tries >= 8)
		rc = sg_err_set(err, SG_E_PROVIDER, "stopping the sandbox failed: it is %s",
				dtn_state(dto));
	else
		*settled = false;
	json_decref(dto);
	return rc;
}

/*
 * Start, stop or delete the sandbox, waiting out the 409 Daytona answers
 * while another transition runs, and repeating the call after it.  A stop
 * of a sandbox that is already stopped (or archived) and a delete of one
 * that is gone succeed.  None of these waits for the transition it starts.
 */
static sg_err dtn_lifecycle(const struct dtn_client *cl, const char *id, enum dtn_op op,
			    int64_t max_ms, struct sg_cancel *cancel,
			    struct sg_errinfo *err)
{
	static const char *const what[] = { "starting the sandbox", "stopping the sandbox",
					     "deleting the sandbox" };
	char *url = dtn_sandbox_url(cl, id, op == DTN_START  ? "/start"
					    : op == DTN_STOP ? "/stop"
							     : NULL);
	int64_t deadline = sg_now_ms() + max_ms;
	sg_err rc = SG_OK;

	if (!url)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	for (int tries = 0;; tries++) {
		struct dtn_reply r;
		json_t *dto = NULL;

		rc = dtn_do(cl,
			    &(struct dtn_call){ .method = op == DTN_DELETE ? "DELETE" : "POST",
						.url = url, .idempotent = true,
						.what = what[op] },
			    &r, cancel, err);
		if (rc)
			break;
		if (r.status >= 200 && r.status < 300) {
			dtn_reply_release(&r);
			break;
		}
		if (r.status == 404) {
			rc = op == DTN_DELETE ? SG_OK
					      : sg_err_set(err, SG_E_NOT_FOUND,
							   "%s failed: sandbox %s is gone",
							   what[op], id);
			dtn_reply_release(&r);
			break;
		}
		if (r.status == 400 && op == DTN_STOP) {
			bool settled;

			dtn_reply_release(&r);
			rc = dtn_stop_refused(cl, id, tries, &settled, cancel, err);
			if (settled)
				break;
		} else if (r.status != 409 || tries >= 8) {
			rc = dtn_fail(cl, what[op], &r, SG_OK, err);
			dtn_reply_release(&r);
			break;
		} else {
			dtn_reply_release(&r);
		}
		/* A transition is running: let it settle, then ask again. */
		rc = dtn_wait(cl, id, NULL, deadline - sg_now_ms(), &dto, cancel, err);
		json_decref(dto);
		if (rc == SG_E_NOT_FOUND && op == DTN_DELETE) {
			sg_err_clear(err);
			rc = SG_OK;
			break;
		}
		if (rc == SG_E_PROVIDER) {
			/* An errored sandbox can still be stopped or deleted. */
			sg_err_clear(err);
			rc = SG_OK;
		}
		if (rc)
			break;
	}
	free(url);
	return rc;
}

/*
 * After a stop or a delete whose replies were all lost, which may well
 * have worked: ask Daytona once more, briefly and whatever the token
 * says, whether the sandbox is in one of `done` (or gone, when gone
 * counts).  Only Daytona's own answer settles it.
 */
static bool dtn_landed(const struct dtn_client *cl, const char *id,
		       const char *const done[], bool gone_counts)
{
	char *url = dtn_sandbox_url(cl, id, NULL);
	struct dtn_reply r = { 0 };
	bool landed = false;

	if (url && dtn_do(cl,
			  &(struct dtn_call){ .url = url, .no_retry = true,
					      .timeout_ms = SG_DAYTONA_VERIFY_MS,
					      .what = "looking up the sandbox" },
			  &r, NULL, &(struct sg_errinfo){ 0 }) == SG_OK) {
		const char *st = r.status == 200 ? dtn_str(r.json, "state") : NULL;

		landed = r.status == 404 && gone_counts;
		for (size_t i = 0; st && done[i]; i++)
			landed = landed || strcmp(st, done[i]) == 0;
	}
	dtn_reply_release(&r);
	free(url);
	return landed;
}

/*
 * Delete the sandbox and wait until it is gone (404, or `destroyed`):
 * Daytona deletes asynchronously, and its listing keeps showing a
 * sandbox that is still `destroying`, so "removed" is only said once the
 * per-id lookup, which is monotonic, no longer finds it.
 */
static sg_err dtn_remove(struct sg_remote *rm, const char *id, struct sg_cancel *cancel,
			 struct sg_errinfo *err)
{
	const struct dtn_client *cl = &((struct dtn_env *)rm)->cl;
	json_t *last = NULL;
	sg_err rc = dtn_lifecycle(cl, id, DTN_DELETE, SG_DAYTONA_DELETE_MS, cancel, err);

	if (!rc) {
		rc = dtn_wait(cl, id, (const char *const[]){ "destroyed", NULL },
			      SG_DAYTONA_DELETE_MS, &last, cancel, err);
		json_decref(last);
		last = NULL;
	}
	if (rc == SG_E_NOT_FOUND) {
		sg_err_clear(err);
		rc = SG_OK;
	}
	/* Gone, or on its way out (Daytona finishes an accepted delete). */
	if (rc && rc != SG_E_PERMISSION &&
	    dtn_landed(cl, id, (const char *const[]){ "destroyed", "destroying", NULL }, true)) {
		sg_err_clear(err);
		rc = SG_OK;
	}
	return rc;
}

/*
 * Stop the sandbox to keep it.  A stop whose replies were lost is looked
 * up as a delete is: stopped, or on its way there, is kept (a gone one is
 * not: that is a lost workspace, for the next session to report).
 */
static sg_err dtn_keep(const struct dtn_client *cl, const char *id, struct sg_cancel *cancel,
		       struct sg_errinfo *err)
{
	sg_err rc = dtn_lifecycle(cl, id, DTN_STOP, SG_DAYTONA_START_MS, cancel, err);

	if (rc && rc != SG_E_PERMISSION && rc != SG_E_NOT_FOUND &&
	    dtn_landed(cl, id, (const char *const[]){ "stopped", "stopping", "archived",
						      "archiving", NULL }, false)) {
		sg_err_clear(err);
		rc = SG_OK;
	}
	return rc;
}

static json_t *dtn_labels(const struct dtn_env *de)
{
	struct sg_cloud_tags t;
	json_t *labels = json_object();

	sg_cloud_tags_fill(&de->rm.base, de->create_id, &t);
	for (size_t i = 0; labels && i < t.n; i++)
		if (json_object_set_new(labels, t.key[i], json_string(t.value[i]))) {
			json_decref(labels);
			return NULL;
		}
	return labels;
}

/* The network fields of a create (or network-settings) body. */
static sg_err dtn_network_body(const struct sg_profile *p, json_t *body,
			       struct sg_errinfo *err)
{
	struct sg_buf cidrs = SG_BUF_INIT(SG_KiB * 4), domains = SG_BUF_INIT(SG_KiB * 4);
	sg_err rc = SG_OK;

	if (p->network == SG_NET_NONE) {
		json_object_set_new(body, "networkBlockAll", json_true());
	} else if (p->network == SG_NET_ALLOW) {
		rc = dtn_allow_lists(p, &cidrs, &domains, err);
		if (!rc) {
			json_object_set_new(body, "networkBlockAll", json_false());
			if (cidrs.len)
				json_object_set_new(body, "networkAllowList", json_string(cidrs.p));
			if (domains.len)
				json_object_set_new(body, "domainAllowList", json_string(domains.p));
		}
	}
	sg_buf_release(&cidrs);
	sg_buf_release(&domains);
	return rc;
}

static sg_err dtn_create_body(struct dtn_env *de, json_t **out, struct sg_errinfo *err)
{
	const struct sg_profile *p = de->rm.base.profile;
	int64_t minutes = dtn_minutes(p->lifetime_seconds);
	json_t *body = json_object(), *labels = dtn_labels(de);
	sg_err rc = SG_OK;

	*out = NULL;
	if (!body || !labels) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	json_object_set_new(body, "name", json_string(de->rm.name));
	json_object_set(body, "labels", labels);
	if (p->image) {
		/* What the SDK sends for Image.base(): a one-line Dockerfile. */
		char *df = NULL;

		if (asprintf(&df, "FROM %s\n", p->image) < 0) {
			rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
			goto out;
		}
		json_object_set_new(body, "buildInfo", json_pack("{s:s}", "dockerfileContent", df));
		free(df);
		if (p->cpus > 0)
			json_object_set_new(body, "cpu", json_integer(dtn_cpus(p->cpus)));
		if (p->memory_mb > 0)
			json_object_set_new(body, "memory", json_integer(dtn_gib(p->memory_mb)));
	} else if (p->snapshot) {
		json_object_set_new(body, "snapshot", json_string(p->snapshot));
	}
	if (p->user)
		json_object_set_new(body, "user", json_string(p->user));
	if (de->cl.target)
		json_object_set_new(body, "target", json_string(de->cl.target));
	json_object_set_new(body, "autoStopInterval", json_integer(minutes));
	if (p->persistent) {
		json_object_set_new(body, "autoArchiveInterval",
				    json_integer(minutes > 43200 ? 43200 : minutes));
		json_object_set_new(body, "autoDeleteInterval", json_integer(-1));
	} else {
		json_object_set_new(body, "autoDeleteInterval", json_integer(minutes));
	}
	rc = dtn_network_body(p, body, err);
out:
	json_decref(labels);
	if (rc)
		json_decref(body);
	else
		*out = body;
	return rc;
}

/*
 * Is this sandbox sandgate's, for this identity?  *read says whether the
 * reply could tell: a sandbox DTO with no labels object, or under another
 * name than the one looked up, is no answer (a reply cut short, a proxy's
 * page), and must not be taken as another owner's, which would let a
 * create of this provision's run on unrecorded.
 */
static sg_err dtn_check_owner(const struct dtn_env *de, const json_t *dto, bool *read,
			      struct sg_errinfo *err)
{
	const json_t *labels = json_object_get(dto, "labels");
	const char *m = dtn_str(labels, DTN_L_MANAGED), *id = dtn_str(labels, DTN_L_IDENTITY);
	const char *name = dtn_str(dto, "name");

	*read = json_is_object(labels) && (!name || strcmp(name, de->rm.name) == 0);
	if (!*read)
		return sg_err_set(err, SG_E_PROVIDER,
				  "Daytona's reply for sandbox %s does not say whose it is (no labels, or another name)",
				  de->rm.name);
	if (!m || strcmp(m, "sandgate") != 0 || !id || strcmp(id, de->rm.base.identity) != 0)
		return sg_err_set(err, SG_E_PROVIDER,
				  "a Daytona sandbox named %s exists and is not sandgate's sandbox for identity \"%.60s\"; rename or delete it",
				  de->rm.name, de->rm.base.identity);
	return SG_OK;
}

/* Did this very provision create it (our random create label)? */
static bool dtn_made_here(const struct dtn_env *de, const json_t *dto)
{
	const char *c = dtn_str(json_object_get(dto, "labels"), DTN_L_CREATE);

	return c && strcmp(c, de->create_id) == 0;
}

/*
 * The sentence of a create that ends without a sandbox after a doubtful
 * try (once: the create's own failure, with the HTTP status and the code
 * every other call maps it to) or a 409 whose lookup failed (look).
 */
static sg_err dtn_create_failed(const struct sg_errinfo *once, bool doubt, sg_err lr,
				const struct sg_errinfo *look, struct sg_errinfo *err)
{
	if (!doubt)
		return sg_err_set(err, SG_E_PROVIDER, "creating the sandbox failed: %s", look->msg);
	if (lr == SG_E_NOT_FOUND)
		return sg_err_set(err, once->code ? once->code : SG_E_UNAVAILABLE,
				  "%s (and no sandbox of that name appeared)", once->msg);
	return sg_err_set(err, once->code ? once->code : SG_E_UNAVAILABLE,
			  "%s; whether it was made is not known: %s", once->msg, look->msg);
}

/*
 * Did Daytona refuse the create, so that nothing was made?  Only a 4xx
 * says so (409: the name exists, 429: the rate limit, both refusals made
 * before anything happened); 408 is what a proxy sends when it gives up
 * waiting, while the create may go on behind it.  Every other reply, a
 * 5xx, a 2xx or 3xx that cannot be read, may come from a create that
 * landed.
 */
static bool dtn_create_refused(long status)
{
	return status >= 400 && status < 500 && status != 408;
}

/* One create of the sandbox, across its attempts. */
struct dtn_creating {
	char *url;     /* POST /sandbox */
	json_t *body;  /* the same body for every attempt */
	int attempt;   /* from 1 */
	bool doubted;  /* some attempt may have made a sandbox */
	bool foreign;  /* the name holds a sandbox whose labels name another owner */
};

/* What a create attempt calls for next. */
enum dtn_create_next { DTN_CREATE_END, DTN_CREATE_AGAIN, DTN_CREATE_LOOK };

/*
 * A 429: wait as long as Daytona asks (1 s per attempt when it does not
 * say), unless that is longer than any retry waits.  Releases r.
 */
static sg_err dtn_create_backoff(struct dtn_reply *r, int attempt, struct sg_cancel *cancel,
				 struct sg_errinfo *err)
{
	int64_t wait = r->retry_after_ms >= 0 ? r->retry_after_ms : 1000 * attempt;
	sg_err rc;

	dtn_reply_release(r);
	if (wait > SG_HTTP_RETRY_MAX_DELAY_MS)
		return sg_err_set(err, SG_E_UNAVAILABLE,
				  "creating the sandbox failed: Daytona's rate limit asks to wait %lld s",
				  (long long)(wait / 1000));
	rc = sg_cancel_sleep(cancel, wait);
	if (rc)
		sg_err_set(err, rc, "creating the sandbox was cancelled");
	return rc;
}

/*
 * One POST of the create and what its answer calls for: the sandbox
 * (*dto, new), a refusal that ends the create, another attempt after a
 * 429, or a look at the name (a doubtful outcome, or a 409).  *once holds
 * a doubtful attempt's own failure, *doubt says whether it was one.
 */
static sg_err dtn_create_post(struct dtn_env *de, struct dtn_creating *c, json_t **dto,
			      struct sg_errinfo *once, bool *doubt, enum dtn_create_next *next,
			      struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct dtn_reply r;
	sg_err rc;

	*next = DTN_CREATE_END;
	rc = dtn_do(&de->cl,
		    &(struct dtn_call){ .method = "POST", .url = c->url, .body = c->body,
					.timeout_ms = SG_DAYTONA_CREATE_MS,
					.what = "creating the sandbox" },
		    &r, cancel, once);
	/* Never sent (out of memory, a body too large): nothing landed. */
	if (rc && !r.sent)
		return sg_err_set(err, rc, "%s", once->msg);
	if (!rc && r.status == 200 && json_is_object(r.json)) {
		*dto = r.json;
		r.json = NULL;
		de->rm.fresh = true;
		dtn_reply_release(&r);
		return SG_OK;
	}
	*doubt = rc || !dtn_create_refused(r.status);
	c->doubted = c->doubted || *doubt;
	if (!rc && r.status == 429 && c->attempt < 4) {
		*next = DTN_CREATE_AGAIN;
		return dtn_create_backoff(&r, c->attempt, cancel, err);
	}
	if (!rc && !*doubt && r.status != 409) {
		rc = dtn_fail(&de->cl, "creating the sandbox", &r, SG_OK, err);
		dtn_reply_release(&r);
		return rc;
	}
	if (!rc && *doubt)
		dtn_fail(&de->cl, "creating the sandbox", &r, SG_OK, once);
	if (!rc)
		dtn_reply_release(&r);
	/*
	 * Cancelled (a cancel request, or the shutdown): no waiting here,
	 * beyond the token.  What the create did is for the gateway to
	 * settle within its budget (may_remain, dtn_create).
	 */
	if (sg_cancel_check(cancel))
		return sg_err_set(err, sg_cancel_check(cancel), "creating the sandbox was cancelled");
	*next = DTN_CREATE_LOOK;
	return SG_OK;
}

/*
 * The name holds a sandbox after a doubtful create or a 409: adopt it
 * when it is this identity's (*dto, new), and note whether this very
 * provision made it.
 */
static sg_err dtn_create_adopt(struct dtn_env *de, struct dtn_creating *c, json_t **dto,
			       struct sg_cancel *cancel, struct sg_errinfo *err)
{
	bool read;
	sg_err rc = dtn_check_owner(de, *dto, &read, err);

	de->rm.fresh = !rc && dtn_made_here(de, *dto);
	/* Only labels that were read and name another owner. */
	c->foreign = rc && read;
	if (rc) {
		json_decref(*dto);
		*dto = NULL;
	} else if (sg_cancel_check(cancel)) {
		rc = sg_err_set(err, sg_cancel_check(cancel), "creating the sandbox was cancelled");
	}
	return rc;
}

/*
 * Doubt or 409: what does the name hold now?  A sandbox is adopted; a
 * name still free after a doubtful attempt is created again (*again)
 * after a short wait, at most three attempts in all.
 */
static sg_err dtn_create_look(struct dtn_env *de, struct dtn_creating *c,
			      const struct sg_errinfo *once, bool doubt, json_t **dto,
			      bool *again, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_errinfo look = { 0 };
	sg_err lr = dtn_get(&de->cl, de->rm.name, dto, cancel, &look), rc;

	*again = false;
	if (lr == SG_OK)
		return dtn_create_adopt(de, c, dto, cancel, err);
	if (sg_cancel_check(cancel))
		return sg_err_set(err, sg_cancel_check(cancel), "creating the sandbox was cancelled");
	if (lr != SG_E_NOT_FOUND || c->attempt >= 3)
		return dtn_create_failed(once, doubt, lr, &look, err);
	rc = sg_cancel_sleep(cancel, SG_HTTP_RETRY_BASE_MS * c->attempt);
	if (rc)
		sg_err_set(err, rc, "creating the sandbox was cancelled");
	*again = true;
	return rc;
}

/*
 * Create the sandbox.  Daytona has no idempotency key, so a create whose
 * outcome is unknown (the connection dropped, a 5xx, a reply that cannot
 * be read or is larger than any sandbox's) is never simply sent again:
 * the name is looked up first, and only a sandbox that is still missing
 * is created again; a 409 means the name exists and is adopted.  429 is a
 * refusal made before anything happened, so it is retried after the wait
 * Daytona asks for.  *dto (new) is the sandbox; de->rm.fresh says whether
 * this provision made it.
 */
static sg_err dtn_create(struct sg_remote *rm, json_t **dto, struct sg_cancel *cancel,
			 struct sg_errinfo *err)
{
	struct dtn_env *de = (struct dtn_env *)rm;
	struct dtn_creating c = { .url = dtn_sandbox_url(&de->cl, NULL, NULL) };
	sg_err rc;

	*dto = NULL;
	rc = c.url ? dtn_create_body(de, &c.body, err)
		   : sg_err_set(err, SG_E_INTERNAL, "out of memory");
	for (c.attempt = 1; !rc; c.attempt++) {
		struct sg_errinfo once = { 0 };
		enum dtn_create_next next = DTN_CREATE_END;
		bool doubt = false, again = false;

		rc = dtn_create_post(de, &c, dto, &once, &doubt, &next, cancel, err);
		if (rc || next == DTN_CREATE_END)
			break;
		if (next == DTN_CREATE_AGAIN)
			continue;
		rc = dtn_create_look(de, &c, &once, doubt, dto, &again, cancel, err);
		if (!again)
			break;
	}
	/*
	 * No sandbox in hand after a create that may have been carried out:
	 * it may still land.  The gateway settles it (adapter.h, may_remain).
	 */
	if (rc && !*dto && c.doubted && !c.foreign)
		de->rm.base.may_remain = true;
	json_decref(c.body);
	free(c.url);
	return rc;
}

/* ---- The toolbox ----------------------------------------------------------- */

/* "<toolbox><path>" (new). */
static char *dtn_toolbox_url(const struct dtn_env *de, const char *path)
{
	char *u = NULL;

	if (asprintf(&u, "%s%s", de->toolbox, path) < 0)
		return NULL;
	return u;
}

/*
 * One POST /process/execute whose command is `command` (NULL: the usual
 * `eval "$SG_S"`) with envs (borrowed) as its variables.  SG_OK when a
 * reply arrived; r holds it.
 */
static sg_err dtn_execute(struct dtn_env *de, const char *command, json_t *envs,
			  int64_t timeout_ms, size_t max_body, bool skip_activity,
			  struct dtn_reply *r, struct sg_cancel *cancel,
			  struct sg_errinfo *err)
{
	char *url = dtn_toolbox_url(de, "/process/execute");
	json_t *body = json_pack("{s:s, s:O}", "command",
				 command ? command : "eval \"$SG_S\"", "envs", envs);
	sg_err rc;

	memset(r, 0, sizeof(*r));
	if (!url || !body) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	} else {
		/*
		 * Idempotent: every script sent this way may run twice (the exec
		 * script's mkdir makes its start happen once), so dropped
		 * connections and 5xx are retried by the HTTP layer.
		 */
		rc = dtn_do(&de->cl,
			    &(struct dtn_call){ .method = "POST", .url = url, .body = body,
						.idempotent = true, .timeout_ms = timeout_ms,
						.max_body = max_body,
						.skip_activity = skip_activity,
						.what = "running a command in the sandbox" },
			    r, cancel, err);
	}
	json_decref(body);
	free(url);
	return rc;
}

/*
 * Run one of this file's short scripts: *out (new) is what it printed.
 * envs (borrowed, may be NULL) are its parameters.
 */
static sg_err dtn_script(struct dtn_env *de, const char *script, json_t *envs,
			 bool skip_activity, char **out, struct sg_cancel *cancel,
			 struct sg_errinfo *err)
{
	json_t *vars = envs ? json_copy(envs) : json_object();
	const char *text;
	struct dtn_reply r = { 0 };
	sg_err rc;

	*out = NULL;
	if (!vars || json_object_set_new(vars, "SG_S", json_string(script))) {
		json_decref(vars);
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	rc = dtn_execute(de, NULL, vars, de->limit_ms, SG_DAYTONA_SCRIPT_REPLY, skip_activity,
			 &r, cancel, err);
	if (!rc && r.status != 200)
		rc = dtn_fail(&de->cl, "running a command in the sandbox", &r, SG_OK, err);
	text = dtn_str(r.json, "result");
	if (!rc && (!text || json_integer_value(json_object_get(r.json, "exitCode")) != 0))
		rc = sg_err_set(err, SG_E_PROVIDER,
				"the sandbox's shell failed (exit %lld) running sandgate's script",
				(long long)json_integer_value(json_object_get(r.json, "exitCode")));
	if (!rc && !(*out = strdup(text)))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	dtn_reply_release(&r);
	json_decref(vars);
	return rc;
}

/*
 * Write a file in the sandbox through the files API (bulk-upload, as the
 * SDK does: the path part first, then the file part named by its
 * basename).  The bytes come from data or from file.  With mark, an empty
 * file of that path follows in the same request: the toolbox writes the
 * files in their order, so mark exists once the first is whole (a set-up
 * sent beside the upload waits for it).
 */
static sg_err dtn_upload(struct dtn_env *de, const char *path, const void *data,
			 size_t len, const struct sg_http_source *file, const char *mark,
			 struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	const char *mbase = mark && strrchr(mark, '/') ? strrchr(mark, '/') + 1 : mark;
	char *url = dtn_toolbox_url(de, "/files/bulk-upload");
	struct sg_http_part parts[4] = {
		{ .name = "files[0].path", .data = path, .len = strlen(path) },
		{ .name = "files[0].file", .filename = base,
		  .content_type = "application/octet-stream", .data = data, .len = len,
		  .file = file },
		{ .name = "files[1].path", .data = mark, .len = mark ? strlen(mark) : 0 },
		{ .name = "files[1].file", .filename = mbase,
		  .content_type = "application/octet-stream", .data = "", .len = 0 },
	};
	struct dtn_reply r;
	sg_err rc;

	if (!url)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	rc = dtn_do(&de->cl,
		    &(struct dtn_call){ .method = "POST", .url = url, .parts = parts,
					.nparts = mark ? 4 : 2, .idempotent = true,
					.timeout_ms = SG_DAYTONA_CREATE_MS,
					.what = "uploading a file to the sandbox" },
		    &r, cancel, err);
	if (!rc && (r.status < 200 || r.status > 299))
		rc = dtn_fail(&de->cl, "uploading a file to the sandbox", &r, SG_OK, err);
	dtn_reply_release(&r);
	free(url);
	return rc;
}

/* ---- exec -------------------------------------------------------------------- */

/* Kill the exec of run directory dir, or keep it from starting (remote.h). */
static void dtn_kill(struct sg_remote *rm, const char *dir)
{
	struct dtn_env *de = (struct dtn_env *)rm;
	struct sg_errinfo err = { 0 };
	json_t *envs = json_pack("{s:s}", "SG_D", dir);
	sg_err rc;

	if (!envs)
		return;
	json_object_set_new(envs, "SG_S", json_string(dtn_kill_sh));
	{
		struct dtn_reply r;

		/* A fresh wait: the caller's token has usually fired. */
		rc = dtn_execute(de, NULL, envs, SG_DAYTONA_KILL_MS, SG_DAYTONA_SCRIPT_REPLY,
				 false, &r, NULL, &err);
		if (!rc && r.status != 200)
			rc = dtn_fail(&de->cl, "killing a command in the sandbox", &r, SG_OK, &err);
		dtn_reply_release(&r);
	}
	if (rc)
		sg_log_warn("sandbox %s: a command may still run: %s", de->rm.base.id, err.msg);
	json_decref(envs);
}

/*
 * The prefixes of finished execs, a line each (new; NULL for none), once
 * DTN_GARBAGE_BATCH of them have gathered: the next job then removes
 * many execs' files at once, and each exec's files stay until its reply
 * has surely arrived (remote.h's gc).
 */
static char *dtn_gc(struct sg_remote *rm)
{
	struct dtn_env *de = (struct dtn_env *)rm;
	struct sg_buf g = SG_BUF_INIT(SG_KiB * 96);

	pthread_mutex_lock(&rm->lock);
	while (de->garbage.n >= DTN_GARBAGE_BATCH || (g.len && de->garbage.n > 0)) {
		struct sg_buf one = SG_BUF_INIT(SG_PATH_MAX + 1);
		char *d = de->garbage.v[de->garbage.n - 1];
		bool ok = !(g.len && sg_buf_addc(&one, '\n')) && !sg_buf_adds(&one, d) &&
			  !sg_buf_add(&g, one.p, one.len);

		sg_buf_release(&one);
		if (!ok)
			break; /* the rest waits for the next exec */
		free(d);
		de->garbage.v[--de->garbage.n] = NULL;
	}
	pthread_mutex_unlock(&rm->lock);
	return g.len ? sg_buf_take(&g, NULL) : NULL;
}

static void dtn_keepalive_arm(struct dtn_env *de);

/* An exec's result arrived: its files go with a later job (remote.h's done). */
static void dtn_done(struct sg_remote *rm, const struct sg_remote_job *j)
{
	struct dtn_env *de = (struct dtn_env *)rm;

	pthread_mutex_lock(&rm->lock);
	/* A full list only delays the removal to the next day's sweep. */
	if (de->garbage.n < DTN_GARBAGE_BATCH * 8 && sg_strv_add(&de->garbage, j->dir))
		sg_log_debug("cannot remember %s for removal", j->dir);
	pthread_mutex_unlock(&rm->lock);
	if (j->x->flags & SG_EXEC_DETACHES)
		dtn_keepalive_arm(de);
}

/*
 * The toolbox gave up on the script (408); the command lives on in its
 * own session and the next request attaches.  A 408 sooner than the wait
 * means toolbox_timeout_ms is set above the toolbox's real limit: slow
 * down, never spin.
 */
static enum sg_job_trip dtn_trip_408(struct dtn_env *de, struct sg_remote_job *j,
				     int64_t trip_start, struct sg_cancel *cancel)
{
	if (sg_now_ms() - trip_start < de->rm.wait_ms) {
		if (++j->quick == 1)
			sg_log_warn("the Daytona toolbox ends requests sooner than toolbox_timeout_ms (%lld ms) says; lower it",
				    (long long)de->limit_ms);
		/* Cancelled: a failed trip, which the driver reads as the cancel. */
		if (sg_cancel_sleep(cancel, j->quick > 10 ? 1000 : 100 * j->quick))
			return SG_JOB_TRIP_FAILED;
	}
	return SG_JOB_TRIP_LIVES;
}

/* One toolbox request of the job: its start, or an attach (remote.h). */
static enum sg_job_trip dtn_trip(struct sg_remote *rm, struct sg_remote_job *j, bool attach,
				 struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct dtn_env *de = (struct dtn_env *)rm;
	int64_t trip_start = sg_now_ms();
	enum sg_job_trip t = SG_JOB_TRIP_REPLY;
	struct dtn_reply r;
	const json_t *res;
	sg_err rc;

	rc = dtn_execute(de, attach ? SG_JOB_EVAL : j->command, attach ? j->attach : j->start,
			 de->limit_ms + SG_DAYTONA_TRIP_SLACK_MS, j->reply.max, false, &r, cancel,
			 err);
	if (rc)
		return SG_JOB_TRIP_FAILED;
	res = json_object_get(r.json, "result");
	if (r.status == 408) {
		t = dtn_trip_408(de, j, trip_start, cancel);
	} else if (!attach && j->in_vars &&
		   (r.status == 413 ||
		    (r.status == 200 &&
		     json_integer_value(json_object_get(r.json, "exitCode")) == -1))) {
		/*
		 * The toolbox could not take stdin in variables (a body limit,
		 * or E2BIG under a small stack limit) and started nothing:
		 * upload it instead, once.
		 */
		sg_log_debug("sandbox %s: stdin in variables refused (HTTP %ld); uploading it",
			     de->rm.base.id, (long)r.status);
		t = sg_remote_job_unvars(j, cancel, err) ? SG_JOB_TRIP_FATAL : SG_JOB_TRIP_RESTART;
	} else if (r.status != 200) {
		rc = dtn_fail(&de->cl, "running a command in the sandbox", &r, SG_OK, err);
		t = rc == SG_E_NOT_FOUND || rc == SG_E_PERMISSION ? SG_JOB_TRIP_FATAL
								  : SG_JOB_TRIP_FAILED;
	} else if (res && sg_buf_add(&j->reply, json_string_value(res), json_string_length(res))) {
		t = sg_err_set(err, SG_E_INTERNAL, "out of memory") ? SG_JOB_TRIP_FATAL : t;
	}
	dtn_reply_release(&r);
	return t;
}

/* A short script (remote.h): one toolbox request, which counts as activity. */
static sg_err dtn_script_op(struct sg_remote *rm, const char *script, json_t *vars, char **reply,
			    struct sg_cancel *cancel, struct sg_errinfo *err)
{
	return dtn_script((struct dtn_env *)rm, script, vars, false, reply, cancel, err);
}

/* stdin too large for variables, uploaded first (remote.h). */
static sg_err dtn_upload_op(struct sg_remote *rm, const char *path, const void *data,
			    size_t len, unsigned mode, struct sg_cancel *cancel,
			    struct sg_errinfo *err)
{
	(void)mode; /* the toolbox writes 0644; sg-helper job reads it once */
	return dtn_upload((struct dtn_env *)rm, path, data, len, NULL, NULL, cancel, err);
}

/* ---- Keep-alive ------------------------------------------------------------ */

/* Does a `proc list` reply show a running process? */
static bool dtn_any_running(const char *reply)
{
	json_error_t je;
	json_t *j = json_loads(reply, 0, &je), *v;
	size_t i;
	bool running = false;

	json_array_foreach(json_object_get(j, "processes"), i, v) {
		const char *st = dtn_str(v, "status");

		if (st && strcmp(st, "running") == 0)
			running = true;
	}
	json_decref(j);
	return running;
}

/* Tell Daytona the sandbox is active, so that its auto-stop waits. */
static void dtn_touch(struct dtn_env *de, struct sg_cancel *stop)
{
	char *url = dtn_sandbox_url(&de->cl, de->rm.base.id, "/last-activity");
	struct sg_errinfo err = { 0 };
	struct dtn_reply r;

	if (url && !dtn_do(&de->cl,
			   &(struct dtn_call){ .method = "POST", .url = url, .idempotent = true,
					       .what = "keeping the sandbox active" },
			   &r, stop, &err)) {
		if (r.status >= 300)
			sg_log_debug("sandbox %s: last-activity answered HTTP %ld", de->rm.base.id,
				     r.status);
		dtn_reply_release(&r);
	}
	free(url);
}

/* One keep-alive step (remote.h): while a daemon of this session runs. */
static void dtn_extend(struct sg_remote *rm, struct sg_cancel *stop)
{
	struct dtn_env *de = (struct dtn_env *)rm;
	struct sg_errinfo err = { 0 };
	unsigned gen;
	bool armed;
	char *reply = NULL;
	json_t *envs;
	sg_err rc;

	pthread_mutex_lock(&rm->lock);
	armed = de->ka_armed;
	gen = de->ka_gen;
	pthread_mutex_unlock(&rm->lock);
	if (!armed)
		return;
	envs = json_pack("{s:s, s:s, s:s}", "SG_H", rm->base.helper, "SG_CTL", de->proc_dir,
			 "SG_SESS", rm->base.session);
	/* The question alone must not keep the sandbox up. */
	rc = envs ? dtn_script(de, dtn_procs_sh, envs, true, &reply, stop, &err) : SG_E_INTERNAL;
	json_decref(envs);
	if (rc && !sg_cancel_check(stop))
		sg_log_debug("sandbox %s: keep-alive check failed: %s", rm->base.id, err.msg);
	if (!rc && dtn_any_running(reply)) {
		dtn_touch(de, stop);
	} else if (!rc) {
		pthread_mutex_lock(&rm->lock);
		if (de->ka_gen == gen)
			de->ka_armed = false; /* until the next daemon */
		pthread_mutex_unlock(&rm->lock);
	}
	free(reply);
}

static void dtn_keepalive_arm(struct dtn_env *de)
{
	pthread_mutex_lock(&de->rm.lock);
	de->ka_gen++;
	de->ka_armed = true;
	pthread_mutex_unlock(&de->rm.lock);
	if (de->rm.base.helper && de->proc_dir)
		sg_remote_keepalive_start(&de->rm, de->rm.ka_ms);
}

static const struct sg_remote_ops dtn_ops;

/* ---- provision ----------------------------------------------------------- */

/* The comma-separated list s as a sorted set, for comparing lists. */
static bool dtn_same_list(const char *a, const char *b)
{
	struct sg_strv va = SG_STRV_INIT, vb = SG_STRV_INIT;
	const char *src[2] = { a ? a : "", b ? b : "" };
	struct sg_strv *dst[2] = { &va, &vb };
	bool same = true;

	for (int k = 0; k < 2; k++) {
		const char *p = src[k];

		while (*p) {
			const char *e = strchr(p, ',');
			size_t n = e ? (size_t)(e - p) : strlen(p);

			while (n && (*p == ' ')) {
				p++;
				n--;
			}
			while (n && p[n - 1] == ' ')
				n--;
			if (n && sg_strv_addf(dst[k], "%.*s", (int)n, p))
				same = false;
			p = e ? e + 1 : p + strlen(p);
		}
	}
	if (same && va.n != vb.n)
		same = false;
	for (size_t i = 0; same && i < va.n; i++) {
		bool found = false;

		for (size_t j = 0; j < vb.n && !found; j++)
			found = strcmp(va.v[i], vb.v[j]) == 0;
		same = found;
	}
	sg_strv_release(&va);
	sg_strv_release(&vb);
	return same;
}

static bool dtn_network_matches(const json_t *want, const json_t *dto)
{
	return json_is_true(json_object_get(want, "networkBlockAll")) ==
		       json_is_true(json_object_get(dto, "networkBlockAll")) &&
	       dtn_same_list(dtn_str(want, "networkAllowList"), dtn_str(dto, "networkAllowList")) &&
	       dtn_same_list(dtn_str(want, "domainAllowList"), dtn_str(dto, "domainAllowList"));
}

/*
 * The sandbox's network must be what the profile says, observed on the
 * sandbox itself (never assumed from what was asked): an adopted sandbox
 * made under other settings is changed through network-settings, and a
 * sandbox that still differs is refused.
 */
static sg_err dtn_enforce_network(struct dtn_env *de, json_t **dto,
				  struct sg_cancel *cancel, struct sg_errinfo *err)
{
	json_t *want = json_object();
	char *url = NULL;
	struct dtn_reply r = { 0 };
	sg_err rc;

	if (!want)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	rc = dtn_network_body(de->rm.base.profile, want, err);
	if (rc || dtn_network_matches(want, *dto))
		goto out;
	json_object_set_new(want, "networkBlockAll",
			    json_boolean(json_is_true(json_object_get(want, "networkBlockAll"))));
	if (!json_object_get(want, "networkAllowList"))
		json_object_set_new(want, "networkAllowList", json_string(""));
	if (!json_object_get(want, "domainAllowList"))
		json_object_set_new(want, "domainAllowList", json_string(""));
	url = dtn_sandbox_url(&de->cl, de->rm.base.id, "/network-settings");
	if (!url) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	rc = dtn_do(&de->cl,
		    &(struct dtn_call){ .method = "POST", .url = url, .body = want,
					.idempotent = true,
					.what = "setting the sandbox's network" },
		    &r, cancel, err);
	if (!rc && (r.status < 200 || r.status > 299 || !json_is_object(r.json)))
		rc = dtn_fail(&de->cl, "setting the sandbox's network", &r, SG_OK, err);
	if (!rc && !dtn_network_matches(want, r.json))
		rc = sg_err_set(err, SG_E_UNSUPPORTED,
				"sandbox %s does not report the network the profile asks for (network_block_all %s)",
				de->rm.base.id,
				json_is_true(json_object_get(r.json, "networkBlockAll")) ? "true" : "false");
	if (!rc) {
		json_decref(*dto);
		*dto = r.json;
		r.json = NULL;
	}
out:
	dtn_reply_release(&r);
	json_decref(want);
	free(url);
	return rc;
}

/* Replace the labels of an adopted sandbox: this session, a new expiry. */
static sg_err dtn_relabel(struct dtn_env *de, const json_t *dto, struct sg_cancel *cancel,
			  struct sg_errinfo *err)
{
	json_t *labels = json_deep_copy(json_object_get(dto, "labels")), *ours = dtn_labels(de);
	json_t *body = NULL;
	char *url = dtn_sandbox_url(&de->cl, de->rm.base.id, "/labels");
	struct dtn_reply r = { 0 };
	sg_err rc = SG_OK;

	if (!json_is_object(labels)) {
		json_decref(labels);
		labels = json_object();
	}
	if (!labels || !ours || !url) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	/* The creation time and the create id stay the sandbox's own. */
	json_object_del(ours, DTN_L_CREATED);
	json_object_del(ours, DTN_L_CREATE);
	json_object_update(labels, ours);
	body = json_pack("{s:O}", "labels", labels);
	rc = dtn_do(&de->cl,
		    &(struct dtn_call){ .method = "PUT", .url = url, .body = body,
					.what = "labelling the sandbox" },
		    &r, cancel, err);
	if (!rc && (r.status < 200 || r.status > 299))
		rc = dtn_fail(&de->cl, "labelling the sandbox", &r, SG_OK, err);
out:
	dtn_reply_release(&r);
	json_decref(labels);
	json_decref(ours);
	json_decref(body);
	free(url);
	return rc;
}

/*
 * A persistent profile that adopts a sandbox made for a scratch session
 * (same identity, autoDeleteInterval set) turns Daytona's auto-delete off:
 * left on, Daytona would delete the workspace some minutes after this
 * session's stop, and the next session would find it lost.  The setting
 * is read back, never assumed.  Never the reverse: a scratch session
 * leaves a persistent sandbox's setting alone (another session keeps it).
 */
static sg_err dtn_keep_forever(struct dtn_env *de, json_t **dto, struct sg_cancel *cancel,
			       struct sg_errinfo *err)
{
	const json_t *v = json_object_get(*dto, "autoDeleteInterval");
	char *url;
	struct dtn_reply r = { 0 };
	json_t *now = NULL;
	sg_err rc;

	if (json_is_integer(v) && json_integer_value(v) < 0)
		return SG_OK;
	url = dtn_sandbox_url(&de->cl, de->rm.base.id, "/autodelete/-1");
	if (!url)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	rc = dtn_do(&de->cl,
		    &(struct dtn_call){ .method = "POST", .url = url, .idempotent = true,
					.what = "turning off the sandbox's auto-delete" },
		    &r, cancel, err);
	if (!rc && (r.status < 200 || r.status > 299))
		rc = dtn_fail(&de->cl, "turning off the sandbox's auto-delete", &r, SG_OK, err);
	/* Older APIs answer with no body: then the sandbox itself says. */
	if (!rc && !json_is_integer(json_object_get(r.json, "autoDeleteInterval")))
		rc = dtn_get(&de->cl, de->rm.base.id, &now, cancel, err);
	v = json_object_get(now ? now : r.json, "autoDeleteInterval");
	if (!rc && (!json_is_integer(v) || json_integer_value(v) >= 0))
		rc = sg_err_set(err, SG_E_UNSUPPORTED,
				"sandbox %s was made for a session that is not persistent and still reports auto-delete; Daytona would delete the workspace after it stops",
				de->rm.base.id);
	if (!rc)
		json_object_set_new(*dto, "autoDeleteInterval", json_integer(-1));
	json_decref(now);
	dtn_reply_release(&r);
	free(url);
	return rc;
}

/* A number member (integer or real) of a JSON object, or 0. */
static double dtn_num(const json_t *o, const char *key)
{
	return json_number_value(json_object_get(o, key));
}

/* What the provider says about the sandbox, as facts (new). */
static json_t *dtn_facts(const struct dtn_env *de, const json_t *dto)
{
	const struct sg_profile *p = de->rm.base.profile;
	const char *cls = dtn_str(dto, "sandboxClass");
	json_t *req = json_object(), *app = json_object(), *f, *d;

	if (p->cpus > 0)
		json_object_set_new(req, "cpus", json_real(p->cpus));
	if (p->memory_mb > 0)
		json_object_set_new(req, "memory_mb", json_integer(p->memory_mb));
	json_object_set_new(app, "cpus", json_integer((json_int_t)dtn_num(dto, "cpu")));
	json_object_set_new(app, "memory_mb",
			    json_integer((json_int_t)(dtn_num(dto, "memory") * 1024)));
	json_object_set_new(app, "disk_gb", json_integer((json_int_t)dtn_num(dto, "disk")));
	/*
	 * Commands run on Daytona's machines and reach nothing of this host
	 * but what the toolbox API carries, so this host's files are out of
	 * their reach; the network, by contrast, is left to sg-helper's
	 * probe, which observes it from inside.
	 */
	f = json_pack("{s:{s:o, s:o}, s:{s:b}, s:{s:I, s:i, s:I}}", "resources", "requested",
		      req, "applied", app, "isolation", "host_filesystem_restricted", 1,
		      "helper_install", "bytes", (json_int_t)de->install.bytes, "requests",
		      de->install.requests, "ms", (json_int_t)de->install.ms);
	if (!f)
		return NULL;
	if (cls) {
		char mech[64];

		/* Daytona's own word for what runs the sandbox. */
		snprintf(mech, sizeof(mech), "daytona-%s", cls);
		json_object_set_new(f, "mechanism", json_string(mech));
		if (strcmp(cls, "container") == 0)
			json_object_set_new(f, "safety_class", json_string("container"));
		else if (strcmp(cls, "linux-vm") == 0)
			json_object_set_new(f, "safety_class", json_string("microvm"));
	}
	d = json_pack("{s:s, s:s, s:s?, s:s?, s:s?, s:b, s:I, s:I, s:I}", "sandbox", de->rm.base.id,
		      "name", de->rm.name, "state", dtn_str(dto, "state"), "target",
		      dtn_str(dto, "target"), "snapshot", dtn_str(dto, "snapshot"),
		      "network_block_all", json_is_true(json_object_get(dto, "networkBlockAll")),
		      "auto_stop_minutes", (json_int_t)dtn_num(dto, "autoStopInterval"),
		      "auto_archive_minutes", (json_int_t)dtn_num(dto, "autoArchiveInterval"),
		      "auto_delete_minutes", (json_int_t)dtn_num(dto, "autoDeleteInterval"));
	if (d) {
		const char *nl = dtn_str(dto, "networkAllowList"),
			   *dl = dtn_str(dto, "domainAllowList");

		if (nl && *nl)
			json_object_set_new(d, "network_allow_list", json_string(nl));
		if (dl && *dl)
			json_object_set_new(d, "domain_allow_list", json_string(dl));
		json_object_set_new(f, "daytona", d);
	}
	return f;
}

/* The installer's native transfer (adapters/install.h). */
static sg_err dtn_install_upload(void *ctx, const char *path, int fd, struct sg_cancel *cancel,
				 struct sg_errinfo *err)
{
	struct sg_http_source src = { .fd = fd, .offset = 0, .len = -1 };

	sg_progress_update("uploading sg-helper");
	return dtn_upload(ctx, path, NULL, 0, &src, NULL, cancel, err);
}

/*
 * A sandbox this provision made: sg-helper's upload and the set-up that
 * installs it go out side by side (adapters/install.h).
 */
struct dtn_beside {
	struct dtn_env *de;
	const char *up, *mark; /* the upload's path and the marker after it */
	int fd;                /* the program */
	json_t *envs;          /* the set-up's (borrowed) */
};

static sg_err dtn_beside_upload(void *ctx, struct sg_cancel *stop, struct sg_errinfo *err)
{
	struct dtn_beside *db = ctx;
	struct sg_http_source src = { .fd = db->fd, .offset = 0, .len = -1 };
	sg_err rc;

	dtn_mark("upload sent");
	rc = dtn_upload(db->de, db->up, NULL, 0, &src, db->mark, stop, err);
	dtn_mark("upload answered");
	return rc;
}

static sg_err dtn_beside_setup(void *ctx, char **reply, struct sg_cancel *stop,
			       struct sg_errinfo *err)
{
	struct dtn_beside *db = ctx;
	sg_err rc;

	dtn_mark("setup sent");
	rc = dtn_script(db->de, sg_cloud_setup_sh, db->envs, false, reply, stop, err);
	dtn_mark("setup answered");
	return rc;
}

/*
 * Prepare the inside: root, sandgate's directories, sg-helper, and the
 * probe, in one round trip where it can be.  A sandbox this provision
 * made cannot have sg-helper yet, so its copy is uploaded beside the
 * set-up request, which waits for it and installs it; a resumed one
 * usually has it (the set-up finds it by checksum) and otherwise receives
 * it through the installer afterwards.
 */
static sg_err dtn_setup(struct sg_remote *rm, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct dtn_env *de = (struct dtn_env *)rm;
	struct sg_env *env = &de->rm.base;
	struct sg_helper_bin bin = { .fd = -1 };
	struct sg_install_cost cost = { 0 };
	struct sg_install in = { .ctx = de, .dir = "/tmp", .nonce = de->rm.nonce,
				 .run = sg_remote_install_run, .upload = dtn_install_upload };
	char *reply = NULL, *up = NULL, *mark = NULL;
	/* The set-up answers for itself well within its request's timeout. */
	int64_t wait_ms = de->limit_ms / 2 < SG_DAYTONA_UPLOAD_WAIT_MS ? de->limit_ms / 2
								       : SG_DAYTONA_UPLOAD_WAIT_MS;
	json_t *envs = NULL;
	sg_err rc;

	rc = sg_helper_bin_open(env->helper_host, &bin, err);
	if (rc)
		goto out;
	if (de->rm.fresh && (rc = sg_install_beside_paths(&in, &bin, &up, &mark, err)))
		goto out;
	envs = sg_cloud_setup_vars(env->root, bin.sha, SG_DAYTONA_SWEEP_MIN, up, mark, wait_ms);
	if (!envs) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	} else if (up) {
		struct dtn_beside db = { .de = de, .up = up, .mark = mark, .fd = bin.fd,
					 .envs = envs };
		const struct sg_install_beside side = { .ctx = &db, .upload = dtn_beside_upload,
							.setup = dtn_beside_setup };

		rc = sg_install_run_beside(&side, &reply, &cost.ms, cancel, err);
		cost.requests = 1;
		cost.bytes = bin.size;
	} else {
		dtn_mark("setup sent");
		rc = dtn_script(de, sg_cloud_setup_sh, envs, false, &reply, cancel, err);
		dtn_mark("setup answered");
	}
	rc = sg_remote_setup_read(rm, rc, reply, up != NULL, &in, &bin, &cost, cancel, err);
	if (!rc && asprintf(&de->proc_dir, "%s/ctl/proc", rm->base_dir) < 0) {
		de->proc_dir = NULL;
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	de->install = cost;
out:
	sg_helper_bin_close(&bin);
	json_decref(envs);
	free(reply);
	free(up);
	free(mark);
	return rc;
}

/*
 * The set-up left under way (sg_remote_setup_begin): dtn_setup's upload
 * and script on the driver's leg, sandgate's directory chosen beforehand.
 * The leg owns de->later_bin and closes it.
 */
static sg_err dtn_setup_later(struct sg_remote *rm, const char *fail, struct sg_cancel *stop,
			      struct sg_errinfo *err)
{
	struct dtn_env *de = (struct dtn_env *)rm;
	/*
	 * Into sandgate's directory itself: the set-up then checks it where
	 * it lies, one process less before the first command can run.
	 */
	struct sg_install in = { .dir = rm->base_dir, .nonce = rm->nonce };
	int64_t wait_ms = de->limit_ms / 2 < SG_DAYTONA_UPLOAD_WAIT_MS ? de->limit_ms / 2
								       : SG_DAYTONA_UPLOAD_WAIT_MS;
	char *reply = NULL, *up = NULL, *mark = NULL;
	json_t *envs = NULL;
	int64_t ms = 0;
	sg_err rc = sg_install_beside_paths(&in, &de->later_bin, &up, &mark, err);

	if (!rc && !(envs = sg_remote_later_vars(rm, fail, de->later_bin.sha, up, mark, wait_ms)))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (!rc) {
		struct dtn_beside db = { .de = de, .up = up, .mark = mark,
					 .fd = de->later_bin.fd, .envs = envs };
		const struct sg_install_beside side = { .ctx = &db, .upload = dtn_beside_upload,
							.setup = dtn_beside_setup };

		rc = sg_install_run_beside(&side, &reply, &ms, stop, err);
	}
	if (!rc)
		rc = sg_remote_later_read(rm, reply, de->later_bin.sha, err);
	if (!rc)
		sg_log_info("sandbox %s prepared beside its first commands in %lld ms", rm->base.id,
			    (long long)ms);
	sg_helper_bin_close(&de->later_bin);
	json_decref(envs);
	free(reply);
	free(up);
	free(mark);
	return rc;
}

/*
 * A new scratch sandbox: the set-up goes on beside the first commands
 * (adapters/remote.h), so the session starts one round trip sooner;
 * anything else: the set-up, waited for.
 */
static sg_err dtn_prepare(struct dtn_env *de, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_remote *rm = &de->rm;
	sg_err rc;

	if (!sg_remote_can_defer(rm)) {
		sg_helper_bin_close(&de->later_bin);
		return sg_remote_setup(rm, rm->base.id, cancel, err);
	}
	/* Read and summed while the sandbox started, when it could be. */
	rc = de->later_bin.fd >= 0 ? SG_OK
				   : sg_helper_bin_open(rm->base.helper_host, &de->later_bin, err);
	if (rc)
		return rc;
	de->install = (struct sg_install_cost){ .bytes = de->later_bin.size, .requests = 1 };
	rc = sg_remote_setup_begin(rm, de->later_bin.sha, dtn_setup_later, err);
	if (!rc && asprintf(&de->proc_dir, "%s/ctl/proc", rm->base_dir) < 0) {
		de->proc_dir = NULL;
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	if (!rm->base.setup_later)
		sg_helper_bin_close(&de->later_bin);
	return rc;
}

/* The toolbox's base URL for the sandbox: <toolboxProxyUrl>/<id>. */
static sg_err dtn_toolbox_base(struct dtn_env *de, const json_t *dto,
			       struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const char *base = dtn_str(dto, "toolboxProxyUrl");
	struct dtn_reply r = { 0 };
	struct sg_buf b = SG_BUF_INIT(SG_PATH_MAX);
	sg_err rc = SG_OK;

	if (!base) {
		/* Older APIs leave it out of the sandbox; the SDK asks then. */
		char *url = dtn_sandbox_url(&de->cl, de->rm.base.id, "/toolbox-proxy-url");

		rc = url ? dtn_do(&de->cl,
				  &(struct dtn_call){ .url = url,
						      .what = "looking up the sandbox's toolbox" },
				  &r, cancel, err)
			 : sg_err_set(err, SG_E_INTERNAL, "out of memory");
		free(url);
		if (!rc && (r.status != 200 || !(base = dtn_str(r.json, "url"))))
			rc = dtn_fail(&de->cl, "looking up the sandbox's toolbox", &r,
				      SG_E_PROVIDER, err);
	}
	if (!rc && (strncmp(base, "https://", 8) != 0 && strncmp(base, "http://", 7) != 0))
		rc = sg_err_set(err, SG_E_PROVIDER, "Daytona gave a toolbox URL that is not http(s)");
	if (!rc) {
		size_t n = strlen(base);

		while (n > 0 && base[n - 1] == '/')
			n--;
		if (sg_buf_add(&b, base, n) || sg_buf_addc(&b, '/') || sg_cloud_urlenc(&b, de->rm.base.id))
			rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		else
			de->toolbox = sg_buf_take(&b, NULL);
	}
	sg_buf_release(&b);
	dtn_reply_release(&r);
	return rc;
}

/*
 * Look the identity's sandbox up by name, or create it when it is
 * missing, and check that a found one is this identity's.  env->id is
 * then the sandbox's id; *dto (new) the sandbox.
 */
static sg_err dtn_find(struct dtn_env *de, int round, json_t **dto, struct sg_cancel *cancel,
		       struct sg_errinfo *err)
{
	struct sg_env *env = &de->rm.base;
	sg_err rc;

	/*
	 * Nothing of this identity in the registry: create at once.  A
	 * sandbox of that name made elsewhere (another state directory, a
	 * lost registry) makes the create a 409, and dtn_create looks the
	 * name up then and checks its owner as this lookup would.  Only the
	 * first round: a later one follows a sandbox seen here.
	 */
	if (round == 0 && !env->known && !env->require_existing)
		rc = SG_E_NOT_FOUND;
	else
		rc = dtn_get(&de->cl, de->rm.name, dto, cancel, err);
	if (rc == SG_E_NOT_FOUND) {
		bool made;

		rc = sg_remote_create(&de->rm, de->rm.name, dto, &made, cancel, err);
		if (rc)
			return rc;
		env->resumed = !de->rm.fresh;
	} else if (rc) {
		return rc;
	} else {
		bool read;

		rc = dtn_check_owner(de, *dto, &read, err);
		if (rc)
			return rc;
		env->resumed = true;
	}
	snprintf(env->id, sizeof(env->id), "%s",
		 dtn_str(*dto, "id") ? dtn_str(*dto, "id") : de->rm.name);
	return SG_OK;
}

/*
 * A sandbox found in no state to be used: one on its way out is waited
 * for until it is gone, a kept scratch one that broke is deleted, and
 * *again says to look for the sandbox once more.  A wait that ends in
 * 404 returns SG_E_NOT_FOUND with *again; the next round replaces it.
 */
static sg_err dtn_clear_way(struct dtn_env *de, const json_t *dto, bool *again,
			    struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_env *env = &de->rm.base;
	const char *st = dtn_state(dto);
	sg_err rc;

	*again = false;
	if (strcmp(st, "destroying") == 0 || strcmp(st, "destroyed") == 0) {
		/* On its way out: wait until it is gone, then decide again. */
		json_t *last = NULL;

		rc = dtn_wait(&de->cl, env->id, (const char *const[]){ "destroyed", NULL },
			      SG_DAYTONA_START_MS, &last, cancel, err);
		json_decref(last);
		if (rc && rc != SG_E_NOT_FOUND)
			return rc;
		sg_err_clear(err);
		de->rm.fresh = false;
		*again = true;
		return rc;
	}
	if ((strcmp(st, "error") == 0 || strcmp(st, "build_failed") == 0) && !de->rm.fresh &&
	    !env->profile->persistent && !env->require_existing) {
		/* A kept scratch sandbox that broke: replace it. */
		rc = dtn_lifecycle(&de->cl, env->id, DTN_DELETE, SG_DAYTONA_START_MS, cancel,
				   err);
		*again = !rc;
		return rc;
	}
	return SG_OK;
}

/*
 * Bring the sandbox in *dto (new, replaced) to `started`: let a
 * transition elsewhere settle, start it when it is down, and wait for it.
 */
static sg_err dtn_start_up(struct dtn_env *de, json_t **dto, struct sg_cancel *cancel,
			   struct sg_errinfo *err)
{
	static const char *const started[] = { "started", NULL };
	struct sg_env *env = &de->rm.base;
	const char *desired = dtn_str(*dto, "desiredState");
	json_t *cur = NULL;
	/* The sandbox as just answered, unless a start made it stale. */
	const json_t *seen = *dto;
	sg_err rc;

	if (strcmp(dtn_state(*dto), "started") == 0)
		return SG_OK;
	/* Closed by dtn_provision, whichever way this ends. */
	sg_progress_begin("ready", "waiting for sandbox %s to start", env->id);
	if (dtn_in_transition(*dto) && strcmp(desired ? desired : "", "started") != 0) {
		rc = dtn_wait(&de->cl, env->id, NULL, SG_DAYTONA_START_MS, &cur, cancel, err);
		if (rc)
			return rc;
		json_decref(*dto);
		*dto = cur;
		seen = cur;
		cur = NULL;
	}
	if (dtn_in((const char *const[]){ "stopped", "archived", "paused", NULL },
		   dtn_state(*dto))) {
		/* Before the call: a start whose reply is lost may have run. */
		de->started = true;
		rc = dtn_lifecycle(&de->cl, env->id, DTN_START, SG_DAYTONA_START_MS, cancel, err);
		if (rc)
			return rc;
		seen = NULL;
	}
	rc = dtn_wait_from(&de->cl, env->id, started, SG_DAYTONA_START_MS, seen, &cur, cancel,
			   err);
	if (rc == SG_E_NOT_FOUND)
		rc = sg_err_set(err, env->resumed ? SG_E_WORKSPACE_LOST : SG_E_PROVIDER,
				"sandbox %s disappeared while it was starting", env->id);
	if (rc)
		return rc;
	json_decref(*dto);
	*dto = cur;
	return SG_OK;
}

/*
 * Find the identity's sandbox, or create it; bring it to `started`.  *dto
 * (new) is the sandbox as last seen.
 */
static sg_err dtn_obtain(struct dtn_env *de, json_t **dto, struct sg_cancel *cancel,
			 struct sg_errinfo *err)
{
	bool again = true;
	sg_err rc = SG_OK;

	*dto = NULL;
	for (int round = 0; again && round < DTN_OBTAIN_ROUNDS; round++) {
		json_decref(*dto);
		*dto = NULL;
		rc = dtn_find(de, round, dto, cancel, err);
		if (rc)
			return rc;
		rc = dtn_clear_way(de, *dto, &again, cancel, err);
	}
	/* What is found is gone or replaced every time: say so, never start it. */
	if (again)
		return sg_err_set(err, SG_E_UNAVAILABLE,
				  "sandbox %s was still being removed or replaced after %d lookups",
				  de->rm.base.id, DTN_OBTAIN_ROUNDS);
	if (rc)
		return rc;
	return dtn_start_up(de, dto, cancel, err);
}

/*
 * A provisioning that started a stopped sandbox and then failed stops it
 * again: left started, it would run (and be billed) until Daytona's
 * auto-stop, with no session to use it.  After a cancel the host waits for
 * the answer, so the stop is tried for at most SG_DAYTONA_VERIFY_MS; a
 * sandbox still starting by then is left to the auto-stop, a warning says
 * so, and the record says keep-pending (env->may_run).
 */
static void dtn_stop_started(struct dtn_env *de, bool cancelled)
{
	struct sg_errinfo e = { 0 };
	char *url = NULL;
	int64_t deadline = sg_now_ms() + SG_DAYTONA_VERIFY_MS;
	sg_err rc = SG_E_TIMEOUT;

	if (!cancelled) {
		rc = dtn_keep(&de->cl, de->rm.base.id, NULL, &e);
		goto out;
	}
	url = dtn_sandbox_url(&de->cl, de->rm.base.id, "/stop");
	if (!url) {
		rc = sg_err_set(&e, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	sg_err_set(&e, rc, "the stop did not finish within %d s", SG_DAYTONA_VERIFY_MS / 1000);
	for (int64_t left; (left = deadline - sg_now_ms()) > 0;) {
		struct dtn_reply r;

		if (dtn_do(&de->cl,
			   &(struct dtn_call){ .method = "POST", .url = url, .idempotent = true,
					       .no_retry = true, .timeout_ms = left,
					       .what = "stopping the sandbox" },
			   &r, NULL, &e) == SG_OK) {
			/* 400: not stoppable, which a stopped one is not either. */
			if ((r.status >= 200 && r.status < 300) || r.status == 404 ||
			    r.status == 400) {
				rc = SG_OK;
				dtn_reply_release(&r);
				break;
			}
			/* 409: still starting; anything else, try again while there is time. */
			dtn_fail(&de->cl, "stopping the sandbox", &r, SG_OK, &e);
			dtn_reply_release(&r);
		}
		if (sg_cancel_sleep(NULL, 200))
			break;
	}
out:
	if (rc) {
		sg_log_warn("sandbox %s was started for a session that failed and may run until Daytona's auto-stop: %s",
			    de->rm.base.id, e.msg);
		de->rm.base.may_run = true;
	}
	free(url);
}

static sg_err dtn_provision(struct sg_env *env, struct sg_cancel *cancel,
			    struct sg_errinfo *err)
{
	struct dtn_env *de = (struct dtn_env *)env;
	const struct sg_profile *p = env->profile;
	json_t *dto = NULL;
	int64_t want_cpu = dtn_cpus(p->cpus), want_gib = dtn_gib(p->memory_mb);
	sg_err rc;

	dtn_mark("provision");
	rc = sg_remote_init(&de->rm, &dtn_ops, err);
	if (rc)
		return rc;
	sg_cloud_random_hex(de->create_id, 16);
	de->limit_ms = sg_profile_int(p, "toolbox_timeout_ms", SG_DAYTONA_TOOLBOX_MS);
	de->rm.wait_ms = de->limit_ms - (de->limit_ms / 10 > 1000 ? de->limit_ms / 10 : 1000);
	/* Past this a pending job's own watchdog should have ended it. */
	de->rm.pending_slack_ms = 2 * de->limit_ms + 10000;
	de->rm.ka_ms = sg_profile_int(p, "keepalive_ms",
				dtn_minutes(p->lifetime_seconds) * 60000 / 3);
	if (env->root[0] != '/')
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "root %s is not an absolute path", env->root);
	rc = sg_remote_open(&de->rm, p, err);
	if (rc)
		return rc;
	/* Listening from the start, so no state change goes unheard. */
	de->cl.events = dtn_events_open(de->cl.rest.api, de->cl.rest.secret);
	/*
	 * A new sandbox whose set-up may go on beside the first commands:
	 * sg-helper read and summed now, not once the sandbox has started
	 * (dtn_prepare).  Nothing is lost when it is not needed.
	 */
	de->later_bin.fd = -1;
	if (!env->known && !env->require_existing && sg_remote_may_defer(&de->rm) &&
	    sg_helper_bin_open(env->helper_host, &de->later_bin, &(struct sg_errinfo){ 0 }))
		sg_helper_bin_close(&de->later_bin);
	rc = dtn_obtain(de, &dto, cancel, err);
	sg_progress_end(rc); /* the "ready" wait, when there was one */
	dtn_events_close(de->cl.events);
	de->cl.events = NULL;
	if (rc)
		goto out;
	if (dtn_num(dto, "cpu") < (double)want_cpu || dtn_num(dto, "memory") < (double)want_gib) {
		rc = sg_err_set(err, SG_E_UNSUPPORTED,
				"sandbox %s has %g vCPU and %g GiB, less than the %lld vCPU and %lld GiB profile \"%s\" asks for%s",
				env->id, dtn_num(dto, "cpu"), dtn_num(dto, "memory"),
				(long long)want_cpu, (long long)want_gib, p->name,
				p->image ? "" : " (a snapshot's resources are fixed: use image to choose them)");
		goto out;
	}
	if (p->user && dtn_str(dto, "user") && strcmp(p->user, dtn_str(dto, "user")) != 0) {
		rc = sg_err_set(err, SG_E_UNSUPPORTED,
				"sandbox %s runs commands as %s, not as the profile's user %s",
				env->id, dtn_str(dto, "user"), p->user);
		goto out;
	}
	rc = dtn_enforce_network(de, &dto, cancel, err);
	if (!rc && env->resumed && p->persistent)
		rc = dtn_keep_forever(de, &dto, cancel, err);
	if (!rc && env->resumed)
		rc = dtn_relabel(de, dto, cancel, err);
	if (!rc)
		rc = dtn_toolbox_base(de, dto, cancel, err);
	if (!rc)
		rc = dtn_prepare(de, cancel, err);
	if (!rc && !(env->facts = dtn_facts(de, dto)))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	dtn_mark("provisioned");
out:
	if (sg_remote_failed(&de->rm, rc, cancel)) {
		/* A failed create leaves nothing behind (remote.h). */
	} else if (rc && de->started && env->id[0]) {
		/* Resumed, then failed: as this provision found it, stopped. */
		dtn_stop_started(de, sg_cancel_check(cancel) != SG_OK);
	}
	/* A set-up under way owns it (dtn_setup_later). */
	if (!env->setup_later)
		sg_helper_bin_close(&de->later_bin);
	json_decref(dto);
	return rc;
}

/* ---- Files --------------------------------------------------------------- */

static sg_err dtn_get_file(struct sg_env *env, const char *path, int fd, size_t max,
			   struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct dtn_env *de = (struct dtn_env *)env;
	struct sg_buf u = SG_BUF_INIT(SG_PATH_MAX * 4);
	struct sg_http_fd_sink sink = { .fd = fd, .max = max };
	struct sg_http_response resp;
	struct sg_errinfo inner = { 0 };
	sg_err rc;

	sg_http_response_init(&resp, SG_HTTP_ERROR_BODY);
	if (sg_buf_adds(&u, de->toolbox) || sg_buf_adds(&u, "/files/download?path=") ||
	    sg_cloud_urlenc(&u, path)) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	{
		struct sg_http_request req = {
			.url = u.p,
			.headers = sg_strv_get(&de->cl.rest.headers),
			.timeout_ms = SG_DAYTONA_CREATE_MS * 5,
			.sink = sg_http_sink_fd,
			.sink_payload = &sink,
		};

		rc = sg_http_do_retry(&req, &resp, NULL, cancel, &inner);
	}
	if (rc == SG_E_TOO_LARGE) {
		rc = sg_err_set(err, rc, "%s is larger than %zu bytes", path, max);
	} else if (rc) {
		rc = sg_err_set(err, rc, "downloading %s from the sandbox: %s", path, inner.msg);
	} else if (resp.status != 200) {
		struct dtn_reply r = { .status = resp.status };
		json_error_t je;

		r.json = json_loadb(resp.body.p, resp.body.len, 0, &je);
		rc = dtn_fail(&de->cl, "downloading a file from the sandbox", &r,
			      resp.status == 400 ? SG_E_INVALID_ARGUMENT : SG_OK, err);
		json_decref(r.json);
	}
out:
	sg_http_response_release(&resp);
	sg_buf_release(&u);
	return rc;
}

/* ---- teardown, list, destroy, release ------------------------------- */

/*
 * Teardown's KEEP (remote.h) stops the sandbox whether or not it is
 * persistent: the files stay (and use disk quota) until Daytona's
 * autoDeleteInterval, or for persistent ones autoArchiveInterval, acts.
 */
static sg_err dtn_keep_op(struct sg_remote *rm, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	return dtn_keep(&((struct dtn_env *)rm)->cl, rm->base.id, cancel, err);
}

/* A label's value (sg_cloud_info's getter). */
static const char *dtn_label(const void *labels, const char *key)
{
	return dtn_str(labels, key);
}

/* The URL of one page of p's sandboxes after cursor (new), or NULL. */
static char *dtn_list_url(const struct dtn_client *cl, const struct sg_profile *p,
			  const char *cursor)
{
	json_t *filter = json_pack("{s:s, s:s}", DTN_L_MANAGED, "sandgate", DTN_L_PROFILE, p->name);
	char *fj = filter ? json_dumps(filter, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	struct sg_buf u = SG_BUF_INIT(SG_PATH_MAX * 2);
	bool ok = fj && !sg_buf_adds(&u, cl->rest.api) && !sg_buf_adds(&u, "/sandbox?labels=") &&
		  !sg_cloud_urlenc(&u, fj) && !sg_buf_adds(&u, "&limit=100") &&
		  !(cursor && (sg_buf_adds(&u, "&cursor=") || sg_cloud_urlenc(&u, cursor)));

	json_decref(filter);
	free(fj);
	if (!ok) {
		sg_buf_release(&u);
		return NULL;
	}
	return sg_buf_take(&u, NULL);
}

/* One page of sandboxes labelled with p's name (remote.h). */
static sg_err dtn_list_page(struct sg_remote *rm, const struct sg_profile *p,
			    const char *cursor, json_t **items, char **next,
			    struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const struct dtn_client *cl = &((struct dtn_env *)rm)->cl;
	char *url = dtn_list_url(cl, p, cursor);
	struct dtn_reply r = { 0 };
	const char *more;
	sg_err rc;

	if (!url)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	rc = dtn_do(cl, &(struct dtn_call){ .url = url, .what = "listing sandboxes" }, &r, cancel,
		    err);
	free(url);
	if (!rc && (r.status != 200 || !json_is_array(json_object_get(r.json, "items"))))
		rc = dtn_fail(cl, "listing sandboxes", &r, SG_E_PROVIDER, err);
	*items = rc ? NULL : json_incref(json_object_get(r.json, "items"));
	more = rc ? NULL : dtn_str(r.json, "nextCursor");
	*next = more && *more ? strdup(more) : NULL;
	dtn_reply_release(&r);
	return rc;
}

/* An operator's view of a listed sandbox (remote.h). */
static bool dtn_info(const json_t *item, struct sg_env_info *info)
{
	const char *st = dtn_str(item, "state");

	/* Gone already: Daytona may list it for a moment longer. */
	if (st && strcmp(st, "destroyed") == 0)
		return false;
	sg_cloud_info(dtn_str(item, "id"), st, dtn_label, json_object_get(item, "labels"), info);
	return true;
}

/* The client, for a session or an operator's call (remote.h). */
static sg_err dtn_open(struct sg_remote *rm, const struct sg_profile *p, struct sg_errinfo *err)
{
	return dtn_client_init(&((struct dtn_env *)rm)->cl, p, err);
}

/* Sandbox id's view (remote.h): an id or a name. */
static sg_err dtn_lookup(struct sg_remote *rm, const char *id, json_t **dto,
			 struct sg_cancel *cancel, struct sg_errinfo *err)
{
	return dtn_get(&((struct dtn_env *)rm)->cl, id, dto, cancel, err);
}

static void dtn_close(struct sg_remote *rm)
{
	dtn_client_release(&((struct dtn_env *)rm)->cl);
}

static const char *dtn_id_of(const json_t *dto)
{
	return dtn_str(dto, "id");
}

/* A label of a sandbox dtn_lookup returned. */
static const char *dtn_label_of(const json_t *dto, const char *key)
{
	return dtn_str(json_object_get(dto, "labels"), key);
}

static const struct sg_remote_ops dtn_ops = {
	.provider = "Daytona's toolbox",
	.inline_max = SG_DAYTONA_INLINE_MAX,
	.stdin_vars = SG_DAYTONA_STDIN_VARS,
	.words_in_text = true,
	.fails = SG_DAYTONA_TRIP_FAILS,
	.list_pages = SG_DAYTONA_LIST_PAGES,
	.trip = dtn_trip,
	.kill = dtn_kill,
	.upload = dtn_upload_op,
	.gc = dtn_gc,
	.done = dtn_done,
	.extend = dtn_extend,
	.script = dtn_script_op,
	.setup = dtn_setup,
	.keep = dtn_keep_op,
	.create = dtn_create,
	.env_size = sizeof(struct dtn_env),
	.open = dtn_open,
	.close = dtn_close,
	.lookup = dtn_lookup,
	.tag = dtn_label_of,
	.id_of = dtn_id_of,
	.remove = dtn_remove,
	.list_page = dtn_list_page,
	.info = dtn_info,
};

SG_REMOTE_OPERATOR(dtn, &dtn_ops)

static void dtn_release(struct sg_env *env)
{
	struct dtn_env *de = (struct dtn_env *)env;

	sg_remote_release(&de->rm);
	sg_strv_release(&de->garbage);
	free(de->toolbox);
	free(de->proc_dir);
	sg_env_release_base(env);
}

/*
 * The key, URL and region variables (dtn_fields), but the region's only
 * when the profile does not set target itself, which is then never read.
 */
static void dtn_credentials(const struct sg_profile *p, json_t *out)
{
	const char *target_var;

	sg_profile_credentials(p, out);
	if (sg_profile_str(p, "target")) {
		sg_profile_env(p, DTN_ENV_TARGET, &target_var);
		json_object_del(out, target_var);
	}
}

const struct sg_adapter sg_adapter_daytona = {
	.name = "daytona",
	.caps = SG_CAP_FILES | SG_CAP_LIST,
	.env_size = sizeof(struct dtn_env),
	.fields = dtn_fields,
	.validate = dtn_validate,
	.provision = dtn_provision,
	.exec = sg_remote_exec,
	.get_file = dtn_get_file,
	.teardown = sg_remote_teardown,
	.list = dtn_list,
	.destroy = dtn_destroy,
	.release = dtn_release,
	.credentials = dtn_credentials,
};
