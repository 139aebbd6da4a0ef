/*
 * remote.c - the remote-adapter driver (remote.h): one exec through
 * sg_job_drive, the keep-alive thread, the clean-up of a failed provision,
 * and the paging and owner check of an operator's list and destroy.
 */
#define _GNU_SOURCE /* asprintf */
#include "adapters/remote.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/cloud.h"
#include "core/exec.h"
#include "core/http.h"
#include "core/shquote.h"
#include "base/crash.h"
#include "base/limits.h"
#include "base/log.h"
#include "base/progress.h"
#include "base/utf8.h"

sg_err sg_remote_init(struct sg_remote *rm, const struct sg_remote_ops *ops,
		      struct sg_errinfo *err)
{
	rm->ops = ops;
	sg_cloud_random_hex(rm->nonce, 8);
	if (pthread_mutex_init(&rm->lock, NULL) != 0)
		return sg_err_set(err, SG_E_INTERNAL, "cannot create a mutex");
	rm->lock_ready = true;
	return SG_OK;
}

sg_err sg_remote_open(struct sg_remote *rm, const struct sg_profile *p, struct sg_errinfo *err)
{
	sg_err rc = rm->ops->open(rm, p, err);

	rm->opened = rc == SG_OK;
	if (!rc && rm->base.identity && !(rm->name = sg_cloud_name(rm->base.identity)))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	return rc;
}

sg_err sg_remote_dirs(struct sg_remote *rm, sg_err rc, char *base_dir, struct sg_errinfo *err)
{
	free(rm->base_dir);
	free(rm->run_dir);
	rm->run_dir = NULL;
	rm->base_dir = base_dir;
	if (rc)
		return rc;
	if (!base_dir || asprintf(&rm->run_dir, "%s/run", base_dir) < 0) {
		rm->run_dir = NULL;
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	return SG_OK;
}

sg_err sg_remote_create(struct sg_remote *rm, const char *name, json_t **got, bool *made,
			struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const struct sg_env *env = &rm->base;
	sg_err rc;

	sg_err_clear(err);
	*made = false;
	/* With snapshot_records the adapter's own records decided (remote.h). */
	if (env->require_existing && !rm->ops->snapshot_records)
		return sg_err_set(err, SG_E_WORKSPACE_LOST,
				  "the sandbox of identity \"%.60s\" (%s) is gone", env->identity,
				  name);
	if (env->persisted && !rm->ops->snapshot_records)
		return sg_cloud_lost(env, name, err);
	*made = true;
	sg_progress_begin("create", "creating sandbox %s", name);
	rc = rm->ops->create(rm, got, cancel, err);
	sg_progress_end(rc);
	/* The crash-matrix tests kill the gateway here (adapter.h). */
	if (!rc)
		sg_crashpoint("adapter:created");
	return rc;
}

sg_err sg_remote_setup_read(struct sg_remote *rm, sg_err rc, char *reply, bool uploaded,
			    struct sg_install *in, struct sg_helper_bin *b,
			    struct sg_install_cost *cost, struct sg_cancel *cancel,
			    struct sg_errinfo *err)
{
	struct sg_env *env = &rm->base;
	struct sg_cloud_setup got = { 0 };

	if (!rc)
		rc = sg_cloud_setup_read(env, reply, b->sha, uploaded, env->ad->name, &got, err);
	rc = sg_remote_dirs(rm, rc, got.base_dir, err);
	if (rc)
		return rc;
	if (sg_cloud_flag(reply, "helper")) {
		cost->bytes = 0; /* found, whatever was sent */
	} else if (!got.helper) {
		/* Resumed without it: the installer's upload and step. */
		in->dir = rm->base_dir;
		rc = sg_install_helper(in, b, cost, cancel, err);
		free(env->probe);
		env->probe = NULL; /* the gateway runs it */
	}
	return rc;
}

sg_err sg_remote_setup(struct sg_remote *rm, const char *name, struct sg_cancel *cancel,
		       struct sg_errinfo *err)
{
	sg_err rc;

	sg_progress_begin("helper", "preparing sandbox %s", name);
	rc = rm->ops->setup(rm, cancel, err);
	sg_progress_end(rc);
	return rc;
}

sg_err sg_remote_install_run(void *ctx, const char *script, const char *dir, const char *sha,
			     const char *upload, const void *in, size_t inlen, char **reply,
			     struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_remote *rm = ctx;
	json_t *vars = json_pack("{s:s, s:s, s:s}", "SG_D", dir, "SG_SHA", sha, "SG_UP", upload);
	char *text = NULL;
	sg_err rc;

	(void)in; /* a cloud command has no stdin: installs go through the upload */
	(void)inlen;
	*reply = NULL;
	if (!vars || asprintf(&text, "exec 2>/dev/null\nd=$SG_D s=$SG_SHA u=$SG_UP\n%s", script) < 0) {
		text = NULL;
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	} else {
		rc = rm->ops->script(rm, text, vars, reply, cancel, err);
	}
	free(text);
	json_decref(vars);
	return rc;
}

sg_err sg_remote_teardown(struct sg_env *env, enum sg_fate fate, struct sg_cancel *cancel,
			  struct sg_errinfo *err)
{
	struct sg_remote *rm = (struct sg_remote *)env;

	sg_remote_keepalive_stop(rm);
	/* Its requests use the sandbox: none may outlive the teardown. */
	sg_leg_end(&rm->later, SG_E_CANCELLED);
	if (fate == SG_FATE_DETACH || !env->id[0] || !rm->opened)
		return SG_OK;
	if (fate == SG_FATE_REMOVE && rm->ops->forget && env->identity)
		rm->ops->forget(rm, env->identity);
	if (fate == SG_FATE_REMOVE)
		return rm->ops->remove(rm, env->id, cancel, err);
	return rm->ops->keep(rm, cancel, err);
}

/* ---- A set-up under way ------------------------------------------------------ */

/*
 * What a job's start prints, alone, when it gave up waiting for sg-helper:
 * the set-up ended without it (its file SG_HFAIL appeared) or took longer
 * than SG_REMOTE_LATER_WAIT_MS.  Nothing was started then.
 */
#define REMOTE_LATER_FAILED "sg-setup-failed\n"
#define REMOTE_STR(x) REMOTE_STR2(x)
#define REMOTE_STR2(x) #x

bool sg_remote_can_defer(const struct sg_remote *rm)
{
	const struct sg_env *env = &rm->base;
	size_t n = strlen(env->root);

	while (n > 0 && env->root[n - 1] == '/')
		n--;
	/* Root "/", or one that holds /tmp/.sandgate-s...: no room outside it. */
	if (n == 0 || (strncmp(SG_REMOTE_LATER_BASE, env->root, n) == 0 &&
		       (SG_REMOTE_LATER_BASE[n] == '/' || SG_REMOTE_LATER_BASE[n] == '\0')))
		return false;
	return rm->fresh && env->remove_on_exit && !env->profile->shared;
}

/*
 * The set-up failed on this side (an upload refused, a request lost) while
 * its script may still wait in the environment: leave its SG_HFAIL file
 * now, so that the starts waiting there give up at once, not after their
 * whole wait.  Best effort: they give up anyway.
 */
static void remote_later_give_up(struct sg_remote *rm, struct sg_cancel *stop)
{
	json_t *vars = json_pack("{s:s}", "SG_HFAIL", rm->later_fail);
	struct sg_errinfo e2 = { 0 };
	char *reply = NULL;

	if (vars && !sg_cancel_check(stop) &&
	    rm->ops->script(rm, ": >\"$SG_HFAIL\"", vars, &reply, stop, &e2))
		sg_log_debug("sandbox %s: %s", rm->base.id, e2.msg);
	free(reply);
	json_decref(vars);
}

static sg_err remote_later_run(void *arg, struct sg_cancel *stop)
{
	struct sg_remote *rm = arg;
	sg_err rc = rm->later_run(rm, rm->later_fail, stop, &rm->later_err);

	if (rc) {
		sg_log_err("preparing sandbox %s failed: %s", rm->base.id, rm->later_err.msg);
		atomic_store(&rm->base.setup_failed, true);
		remote_later_give_up(rm, stop);
	} else {
		atomic_store(&rm->later_ok, true);
	}
	return rc;
}

sg_err sg_remote_setup_begin(struct sg_remote *rm, const char *sha,
			     sg_err (*run)(struct sg_remote *rm, const char *fail,
					   struct sg_cancel *stop, struct sg_errinfo *err),
			     struct sg_errinfo *err)
{
	struct sg_env *env = &rm->base;
	char *base = NULL;
	sg_err rc;

	if (asprintf(&base, "%s%s", SG_REMOTE_LATER_BASE, rm->nonce) < 0)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	rc = sg_remote_dirs(rm, SG_OK, base, err);
	free(env->ctl_dir);
	free(env->helper);
	if (asprintf(&env->ctl_dir, "%s/ctl", base) < 0)
		env->ctl_dir = NULL;
	if (asprintf(&env->helper, "%s/sg-helper-%s", base, sha) < 0)
		env->helper = NULL;
	if (asprintf(&rm->later_fail, "%s.failed", base) < 0)
		rm->later_fail = NULL;
	if (!rc && (!env->ctl_dir || !env->helper || !rm->later_fail))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	/* A sandbox is a machine of its own: its /tmp is nobody else's. */
	env->own_tmp = true;
	rm->later_run = run;
	rm->later = (struct sg_leg){ .run = remote_later_run, .arg = rm };
	if (!rc)
		rc = sg_leg_start(&rm->later, err);
	env->setup_later = rc == SG_OK;
	return rc;
}

sg_err sg_remote_setup_wait(struct sg_remote *rm, struct sg_cancel *cancel,
			    struct sg_errinfo *err)
{
	if (!rm->base.setup_later)
		return SG_OK;
	while (!sg_leg_ended(&rm->later)) {
		struct pollfd p[2] = {
			{ .fd = sg_cancel_fd(cancel), .events = POLLIN },
			{ .fd = sg_leg_fd(&rm->later), .events = POLLIN },
		};

		if (sg_cancel_check(cancel))
			return sg_err_set(err, sg_cancel_check(cancel),
					  "cancelled while the sandbox was being prepared");
		/* Bounded anyway: the set-up's requests have timeouts of their own. */
		if (poll(p, 2, SG_INSTALL_POLL_MS) < 0 && errno != EINTR)
			return sg_err_set(err, SG_E_INTERNAL, "cannot wait for the set-up: %s",
					  strerror(errno));
	}
	if (atomic_load(&rm->later_ok))
		return SG_OK;
	return sg_err_set(err, rm->later_err.code ? rm->later_err.code : SG_E_PROVIDER, "%s",
			  rm->later_err.msg);
}

json_t *sg_remote_later_vars(const struct sg_remote *rm, const char *fail, const char *sha,
			     const char *up, const char *mark, int64_t wait_ms)
{
	json_t *vars = sg_cloud_setup_vars(rm->base.root, sha, 1440, up, mark, wait_ms);

	/* No probe: nothing waits for its facts (env->setup_later). */
	if (vars && (json_object_del(vars, "SG_PROBE") ||
		     json_object_set_new(vars, "SG_BASE", json_string(rm->base_dir)) ||
		     json_object_set_new(vars, "SG_HFAIL", json_string(fail)))) {
		json_decref(vars);
		vars = NULL;
	}
	return vars;
}

sg_err sg_remote_later_read(const struct sg_remote *rm, char *reply, const char *sha,
			    struct sg_errinfo *err)
{
	/* A scratch env: the session's is read by other threads meanwhile. */
	struct sg_env scratch = { .ad = rm->base.ad, .root = rm->base.root };
	struct sg_cloud_setup got = { 0 };
	sg_err rc = sg_cloud_setup_read(&scratch, reply, sha, true, rm->base.ad->name, &got, err);

	if (!rc && (!got.helper || !got.base_dir || strcmp(got.base_dir, rm->base_dir) != 0))
		rc = sg_err_set(err, SG_E_PROVIDER,
				"preparing the sandbox failed: sandgate's directory is not %s",
				rm->base_dir);
	free(got.base_dir);
	free(scratch.ctl_dir);
	free(scratch.helper);
	free(scratch.probe);
	return rc;
}

/* Does a job's start still have to wait for sg-helper in the environment? */
static bool remote_waits(const struct sg_remote *rm)
{
	return rm->base.setup_later && !atomic_load(&rm->later_ok);
}

/*
 * command preceded by the wait for sg-helper (new), for the start of the
 * job of prefix dir sent while the set-up is under way: the program
 * appears (an atomic rename) only once its checksum matched, so a command
 * never runs before it is whole.  A kill meanwhile leaves <dir>.cancel
 * (remote_kill), and the start then runs nothing.
 */
static char *remote_wait_text(const struct sg_remote *rm, const char *dir, const char *command)
{
	struct sg_buf b = SG_BUF_INIT(SG_MAX_FRAME * 2);

	if (sg_buf_adds(&b, "h=") || sg_shquote(&b, rm->base.helper) || sg_buf_adds(&b, " f=") ||
	    sg_shquote(&b, rm->later_fail) || sg_buf_adds(&b, " c=") || sg_shquote(&b, dir) ||
	    sg_buf_adds(&b, ".cancel\n") ||
	    sg_buf_adds(&b, SG_CLOUD_WAIT_SH("{ [ -x \"$h\" ] || [ -e \"$c\" ]; }",
					     "[ -e \"$f\" ] || [ \"$w\" -ge " REMOTE_STR(
						     SG_REMOTE_LATER_WAIT_MS) " ]",
					     "printf '" REMOTE_LATER_FAILED "'; exit 0")) ||
	    sg_buf_adds(&b, "[ -e \"$c\" ] && exit 0\n") || sg_buf_adds(&b, command)) {
		sg_buf_release(&b);
		return NULL;
	}
	return sg_buf_take(&b, NULL);
}

/* ---- exec ------------------------------------------------------------------- */

/* One exec: its job, the driver's context. */
struct remote_exec {
	struct sg_remote *rm;
	struct sg_remote_job j;
	char mark[SG_JOB_MARK_SIZE];
	char *text; /* the start's command text when it is the words */
	char *wait; /* the start's text with the wait for sg-helper before it */
};

/*
 * stdin into j: in variables SG_IN<n> when vars allows and it fits
 * (cloud.h), else uploaded to <dir>.up first, a request of its own.
 */
static sg_err remote_stdin(struct remote_exec *e, bool vars, struct sg_buf *names,
			   struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const struct sg_exec *x = e->j.x;
	const struct sg_remote_ops *ops = e->rm->ops;

	if (!x->stdin_data || x->stdin_len == 0)
		return SG_OK;
	e->j.in_vars = vars && sg_cloud_stdin_vars(x->stdin_data, x->stdin_len, ops->inline_max,
						   ops->stdin_vars, e->j.start, names);
	if (e->j.in_vars)
		return SG_OK;
	if (asprintf(&e->j.upload, "%s.up", e->j.dir) < 0) {
		e->j.upload = NULL;
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	if (!ops->upload)
		return json_object_set_new(e->j.start, "SG_UP", json_string(e->j.upload))
			       ? sg_err_set(err, SG_E_INTERNAL, "out of memory")
			       : SG_OK;
	return ops->upload(e->rm, e->j.upload, x->stdin_data, x->stdin_len, 0600, cancel, err);
}

/* The start's and the attach's words into their variables (or the text). */
static sg_err remote_words(struct remote_exec *e, const char *in_vars, struct sg_buf *start,
			   struct sg_buf *attach, struct sg_errinfo *err)
{
	struct sg_remote *rm = e->rm;
	const struct sg_exec *x = e->j.x;
	bool relays = rm->ops->relays, detaches = (x->flags & SG_EXEC_DETACHES) != 0;
	struct sg_job_line l = {
		/*
		 * A relayed job's output travels through pipes, so no later
		 * request could attach to it: it waits as long as the command
		 * may run (its own --timeout-ms ends it).  Only a detached
		 * start, which keeps its files, returns after one wait.
		 */
		.helper = rm->base.helper, .dir = e->j.dir, .mark = e->mark,
		.wait_ms = relays ? (detaches ? rm->ops->relay_wait_ms : 0) : rm->wait_ms,
		.stdin_vars = in_vars, .stdin_file = e->j.upload, .gc = e->j.gc, .rm = relays,
		.keep_tail = e->j.keep_tail,
		/* Only a spawn detaches, and only its helper's JSON reaches the reply. */
		.linger = relays && detaches && rm->ops->lingers,
	};
	sg_err rc = sg_job_words(&l, x, rm->base.root, start, attach);

	e->j.linger = l.linger;
	if (rc == SG_E_INVALID_ARGUMENT)
		return sg_err_set(err, rc, "an empty command");
	if (rc || (start->len > rm->ops->inline_max && !rm->ops->words_in_text))
		return sg_err_set(err, SG_E_TOO_LARGE,
				  "the command and its environment are too large to send");
	if (!sg_utf8_valid(start->p, start->len))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "the command or its working directory holds bytes that are not UTF-8, which %s cannot carry",
				  rm->ops->provider);
	json_object_set_new(e->j.attach, "SG_X", json_stringn(attach->p, attach->len));
	if (start->len <= rm->ops->inline_max) {
		json_object_set_new(e->j.start, "SG_X", json_stringn(start->p, start->len));
		e->j.command = SG_JOB_EVAL;
	} else if (asprintf(&e->text, "exec %s\n", start->p) < 0) {
		e->text = NULL;
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	} else {
		e->j.command = e->text;
	}
	return SG_OK;
}

/* Prepare e's job: stdin in variables (when vars) or uploaded, then the words. */
static sg_err remote_prepare(struct remote_exec *e, bool vars, struct sg_cancel *cancel,
			     struct sg_errinfo *err)
{
	struct sg_buf start = SG_BUF_INIT(SG_MAX_FRAME * 2), attach = SG_BUF_INIT(SG_PATH_MAX * 8),
		      names = SG_BUF_INIT(SG_KiB);
	sg_err rc;

	json_decref(e->j.start);
	json_decref(e->j.attach);
	free(e->j.upload);
	free(e->text);
	e->j.upload = e->text = NULL;
	e->j.in_vars = false;
	e->j.start = json_object();
	e->j.attach = json_object();
	if (!e->j.start || !e->j.attach)
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	else
		rc = remote_stdin(e, vars, &names, cancel, err);
	if (!rc)
		rc = remote_words(e, e->j.in_vars && names.len ? names.p : NULL, &start, &attach,
				  err);
	sg_buf_release(&start);
	sg_buf_release(&attach);
	sg_buf_release(&names);
	return rc;
}

/* A trip is only ever handed the job inside a remote_exec: its container. */
sg_err sg_remote_job_unvars(struct sg_remote_job *j, struct sg_cancel *cancel,
			    struct sg_errinfo *err)
{
	struct remote_exec *e = (struct remote_exec *)((char *)j - offsetof(struct remote_exec, j));

	return remote_prepare(e, false, cancel, err);
}

/*
 * A start that gave up waiting for sg-helper: the set-up's own outcome
 * says why (a start sent again once it ended well finds the program).
 */
static enum sg_job_trip remote_later_failed(struct remote_exec *e, struct sg_cancel *cancel,
					    struct sg_errinfo *err)
{
	if (sg_remote_setup_wait(e->rm, cancel, err))
		return SG_JOB_TRIP_FATAL;
	return SG_JOB_TRIP_RESTART;
}

static enum sg_job_trip remote_trip(void *ctx, bool attach, const char **text, size_t *len,
				    struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct remote_exec *e = ctx;
	const char *command = e->j.command;
	bool waits = !attach && remote_waits(e->rm);
	enum sg_job_trip t;

	sg_buf_reset(&e->j.reply);
	if (waits) {
		free(e->wait);
		if (!(e->wait = remote_wait_text(e->rm, e->j.dir, command))) {
			sg_err_set(err, SG_E_INTERNAL, "out of memory");
			return SG_JOB_TRIP_FATAL;
		}
		e->j.command = e->wait;
	}
	t = e->rm->ops->trip(e->rm, &e->j, attach, cancel, err);
	e->j.command = command;
	if (waits && t == SG_JOB_TRIP_REPLY &&
	    strcmp(e->j.reply.p, REMOTE_LATER_FAILED) == 0)
		t = remote_later_failed(e, cancel, err);
	*text = e->j.reply.p;
	*len = e->j.reply.len;
	return t;
}

/*
 * Leave <dir>.cancel (its directory made first: the set-up may not have
 * made it yet).  A start still waiting for sg-helper then runs nothing,
 * and one that went on meanwhile meets it as it forks (sg-helper job).
 */
static const char remote_cancel_sh[] =
	"exec 2>/dev/null\n"
	"umask 077\n"
	"mkdir -p -- \"${SG_D%/*}\" && : >\"$SG_D.cancel\"\n";

static void remote_kill(void *ctx)
{
	struct remote_exec *e = ctx;
	struct sg_remote *rm = e->rm;

	/*
	 * A start sent beside the set-up may be waiting for sg-helper: mark
	 * it cancelled first, without waiting for the set-up, then kill as
	 * usual (a job that already started).
	 */
	if (remote_waits(rm)) {
		json_t *vars = json_pack("{s:s}", "SG_D", e->j.dir);
		struct sg_errinfo why = { 0 };
		char *reply = NULL;

		if (!vars || rm->ops->script(rm, remote_cancel_sh, vars, &reply, NULL, &why))
			sg_log_warn("sandbox %s: a command may still start: %s", rm->base.id,
				    vars ? why.msg : "out of memory");
		free(reply);
		json_decref(vars);
	}
	rm->ops->kill(rm, e->j.dir);
}

static void remote_exec_release(struct remote_exec *e)
{
	json_decref(e->j.start);
	json_decref(e->j.attach);
	sg_buf_release(&e->j.reply);
	free(e->j.upload);
	free((char *)e->j.dir);
	free((char *)e->j.gc);
	free(e->text);
	free(e->wait);
}

sg_err sg_remote_exec(struct sg_env *env, const struct sg_exec *x, struct sg_exec_result *out,
		      struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_remote *rm = (struct sg_remote *)env;
	const struct sg_remote_ops *ops = rm->ops;
	/* The reply carries the heads, in JSON strings for some: allow for escapes. */
	struct remote_exec e = {
		.rm = rm, .j = { .x = x, .keep_tail = out->keep_tail,
				 .reply = SG_BUF_INIT((x->max_output + SG_HELPER_STDERR) * 6 +
						      SG_KiB * 64) },
	};
	struct sg_job_driver d = {
		.ctx = &e, .mark = e.mark, .trip = remote_trip, .kill = remote_kill,
		.fails = ops->fails, .backoff_ms = SG_HTTP_RETRY_BASE_MS,
		.kill_unseen = ops->kill_unseen,
		/* Past this a pending job's own watchdog should have ended it. */
		.pending_ms = x->timeout_ms > 0 && rm->pending_slack_ms > 0
				      ? x->timeout_ms + rm->pending_slack_ms : 0,
	};
	int64_t start = sg_now_ms();
	char *dir = NULL;
	sg_err rc;

	sg_exec_result_reset(out);
	/* A set-up that failed: nothing can run, so nothing is sent. */
	if (atomic_load(&env->setup_failed)) {
		rc = sg_remote_setup_wait(rm, cancel, err);
		goto out;
	}
	sg_job_mark(e.mark);
	e.j.mark = e.mark;
	if (asprintf(&dir, "%s/%s-%u", rm->run_dir, rm->nonce, atomic_fetch_add(&rm->seq, 1)) < 0) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	e.j.dir = dir;
	e.j.gc = ops->gc ? ops->gc(rm) : NULL;
	rc = remote_prepare(&e, true, cancel, err);
	if (!rc)
		rc = sg_job_drive(&d, x->max_output, out, cancel, err);
	if (!rc && ops->done)
		ops->done(rm, &e.j);
out:
	out->duration_ms = sg_now_ms() - start;
	remote_exec_release(&e);
	return rc;
}

/* ---- Keep-alive ------------------------------------------------------------- */

static sg_err remote_keepalive_run(void *arg, struct sg_cancel *stop)
{
	struct sg_remote *rm = arg;

	while (!sg_cancel_sleep(stop, rm->ka_ms))
		rm->ops->extend(rm, stop);
	return SG_OK;
}

void sg_remote_keepalive_start(struct sg_remote *rm, int64_t every_ms)
{
	struct sg_errinfo no_thread = { 0 };

	pthread_mutex_lock(&rm->lock);
	if (!rm->ka_started) {
		rm->ka_ms = every_ms;
		rm->ka = (struct sg_leg){ .run = remote_keepalive_run, .arg = rm };
		if (sg_leg_start(&rm->ka, &no_thread) == SG_OK)
			rm->ka_started = true;
		else
			sg_log_warn("sandbox %s: %s; it is not kept alive while the session lives",
				    rm->base.id, no_thread.msg);
	}
	pthread_mutex_unlock(&rm->lock);
}

void sg_remote_keepalive_stop(struct sg_remote *rm)
{
	bool started;

	if (!rm->lock_ready)
		return; /* provision never got as far as the mutex */
	pthread_mutex_lock(&rm->lock);
	started = rm->ka_started;
	rm->ka_started = false;
	pthread_mutex_unlock(&rm->lock);
	/* Outside the lock: an extend step may take it. */
	if (started)
		sg_leg_end(&rm->ka, SG_E_CANCELLED);
}

/* ---- Nothing leaks ---------------------------------------------------------- */

bool sg_remote_failed(struct sg_remote *rm, sg_err rc, struct sg_cancel *cancel)
{
	struct sg_env *env = &rm->base;
	struct sg_errinfo e2 = { 0 };

	if (!rc)
		return false;
	/* Its requests use the sandbox: none may outlive the provision. */
	sg_leg_end(&rm->later, SG_E_CANCELLED);
	if (!rm->fresh || !env->id[0])
		return false;
	if (sg_cancel_check(cancel)) {
		/*
		 * Cancelled: removing it here would outlast the shutdown
		 * budget, which the gateway keeps while it settles this.
		 */
		env->may_remain = true;
	} else if (rm->ops->remove(rm, env->id, NULL, &e2)) {
		/* The provider's own answer, checked by remove: it is there. */
		sg_log_err("sandbox %s may remain after a failed provisioning: %s", env->id,
			   e2.msg);
		env->may_remain = true;
	}
	return true;
}

/* ---- An operator's list and destroy ----------------------------------------- */

/* An env for an operator's call (new; NULL when out of memory), its client open. */
static struct sg_remote *remote_operator(const struct sg_remote_ops *ops,
					 const struct sg_profile *p, const char *state_dir,
					 sg_err *rc, struct sg_errinfo *err)
{
	struct sg_remote *rm = calloc(1, ops->env_size);

	if (!rm) {
		*rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		return NULL;
	}
	rm->ops = ops;
	rm->base.profile = p;
	rm->base.state_dir = state_dir;
	*rc = sg_remote_open(rm, p, err);
	return rm;
}

static void remote_operator_end(struct sg_remote *rm)
{
	if (rm && rm->opened)
		rm->ops->close(rm);
	free(rm);
}

sg_err sg_remote_list(const struct sg_remote_ops *ops, const struct sg_profile *p,
		      sg_env_list_cb cb, void *payload, struct sg_cancel *cancel,
		      struct sg_errinfo *err)
{
	sg_err rc;
	struct sg_remote *rm = remote_operator(ops, p, NULL, &rc, err);
	char *cursor = NULL;
	bool stop = false;

	for (int page = 0; !rc && !stop && page < ops->list_pages; page++) {
		json_t *items = NULL, *item;
		char *next = NULL;
		size_t i;

		rc = ops->list_page(rm, p, cursor, &items, &next, cancel, err);
		json_array_foreach(rc ? NULL : items, i, item) {
			struct sg_env_info info;

			memset(&info, 0, sizeof(info));
			if (ops->info(item, &info) && (stop = cb(&info, payload) != 0))
				break;
		}
		json_decref(items);
		free(cursor);
		cursor = next;
		if (!cursor)
			break;
	}
	free(cursor);
	remote_operator_end(rm);
	return rc;
}

sg_err sg_remote_destroy(const struct sg_remote_ops *ops, const struct sg_profile *p,
			 const char *state_dir, const char *id, struct sg_cancel *cancel,
			 struct sg_errinfo *err)
{
	sg_err rc;
	struct sg_remote *rm = remote_operator(ops, p, state_dir, &rc, err);
	json_t *got = NULL;
	const char *m, *real, *who;

	if (!rc)
		rc = ops->lookup(rm, id, &got, cancel, err);
	if (rc == SG_E_NOT_FOUND)
		rc = sg_err_set(err, rc, "there is no sandbox %s", id);
	m = rc ? NULL : ops->tag(got, SG_CLOUD_TAG_MANAGED);
	/* An operator's typo must never delete a sandbox sandgate did not make. */
	if (!rc && (!m || strcmp(m, SG_CLOUD_MANAGER) != 0))
		rc = sg_err_set(err, SG_E_PERMISSION, "sandbox %s was not made by sandgate", id);
	real = rc || !ops->id_of ? NULL : ops->id_of(got);
	if (!rc)
		rc = ops->remove(rm, real ? real : id, cancel, err);
	/* Removing an environment removes what this host kept of it too. */
	who = rc || !ops->forget ? NULL : ops->tag(got, SG_CLOUD_TAG_IDENTITY);
	if (who)
		ops->forget(rm, who);
	json_decref(got);
	remote_operator_end(rm);
	return rc;
}

void sg_remote_release(struct sg_remote *rm)
{
	sg_remote_keepalive_stop(rm);
	sg_leg_end(&rm->later, SG_E_CANCELLED);
	free(rm->later_fail);
	rm->later_fail = NULL;
	if (rm->lock_ready)
		pthread_mutex_destroy(&rm->lock);
	rm->lock_ready = false;
	if (rm->opened)
		rm->ops->close(rm);
	rm->opened = false;
	free(rm->base_dir);
	free(rm->run_dir);
	free(rm->name);
	rm->base_dir = rm->run_dir = rm->name = NULL;
}
