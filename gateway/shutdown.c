/*
 * shutdown.c - the end of a connection (protocol section 9): cancel and
 * await requests, stop the session's processes, release exports, then keep
 * or remove the environment, all inside the shutdown budget.
 *
 * Invariants: the budget is one deadline token that every must-do step
 * waits on; the optional work (awaiting the cancelled requests) waits on a
 * second one that fires early enough to leave the processes and the
 * environment their planned time (budget.h).  The plan comes first: when
 * the budget is shorter, that is said on stderr at once, the processes
 * get no grace (they die with the environment), and the registry record
 * says so before anything is removed.  The last session marks its record
 * cleanup-pending before a removal starts, so a gateway killed mid-removal
 * (an outer adapter's grace ran out) leaves a record that `sandgate envs
 * gc` acts on; whatever the budget cut short is said on stderr and stays in
 * the record too.  That includes what a failed initialize may have left (a
 * create whose outcome is unknown): it is looked for and removed here,
 * within the budget.  Every real stop, removal and keep is timed into the
 * state directory's measurements, which the next plan uses.
 *
 * A version-3 host gives its command backend SG_BUDGET_V3_HOST_GRACE_MS
 * from EOF to exit, whatever the budget says: the gateway then plans for
 * its exit window, and a removal that does not fit is handed to a reaper
 * (reaper.h) bounded by the whole budget, with the processes left to end
 * with their environment.
 */
#include "gateway/shutdown.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/crash.h"
#include "base/limits.h"
#include "base/log.h"
#include "gateway/budget.h"
#include "gateway/cli.h"
#include "gateway/envs.h"
#include "gateway/reaper.h"
#include "gateway/registry.h"

/*
 * Keep a measured duration for the next plans: a step that finished, or
 * one the budget cut short after it had already outlasted its plan (the
 * time it took is then a lower bound worth knowing).
 */
static void measure(const struct sg_session *s, enum sg_budget_op op, sg_err rc, int64_t ms,
		    int64_t planned_ms)
{
	if (op < SG_BUDGET_NOPS && (!rc || (rc == SG_E_TIMEOUT && ms > planned_ms)))
		sg_budget_record(s->state_dir, s->env->ad->name, op, ms);
}

/*
 * Keep, remove or let go of the environment, as the binding and the other
 * sessions attached to it say, and record the outcome.  Returns non-zero
 * when the environment may remain against the binding's wish.
 */
static int teardown(struct sg_session *s, const struct sg_budget_plan *plan, bool marked,
		    struct sg_cancel *deadline)
{
	struct sg_reg_key key = { s->env->ad->name, s->identity };
	struct sg_errinfo err = { 0 };
	enum sg_fate fate;
	json_t *fields;
	int others = 0;
	int64_t t0;
	sg_err rc;

	if (sg_registry_detach(s->state_dir, &key, s->session_id, &others, &err))
		sg_log_warn("%s", err.msg);
	sg_crashpoint("teardown:detached");
	fate = others ? SG_FATE_DETACH
		      : s->env->remove_on_exit ? SG_FATE_REMOVE : SG_FATE_KEEP;
	sg_err_clear(&err);
	t0 = sg_now_ms();
	rc = s->env->ad->teardown(s->env, fate, deadline, &err);
	measure(s, fate == SG_FATE_REMOVE ? SG_BUDGET_REMOVE
		   : fate == SG_FATE_KEEP ? SG_BUDGET_KEEP : SG_BUDGET_NOPS,
		rc, sg_now_ms() - t0, plan->env.ms);
	if (rc && fate == SG_FATE_KEEP) {
		/*
		 * Not a removal gone wrong: what did not happen is the keep, so
		 * the environment itself (still running) may be the only copy of
		 * a persistent workspace.  cleanup-pending would have gc remove
		 * it; keep-pending leaves it for the next session to resume.
		 */
		fprintf(stderr,
			"sandgate: environment %s (%s, profile %s) could not be kept: %s: %s; it is left as it is, for the next session of identity \"%s\" to resume (`sandgate envs gc` leaves it; `sandgate envs rm` removes it)\n",
			s->env->id, s->env->ad->name, s->profile->name, sg_err_word(rc),
			err.msg, s->identity);
		fields = json_pack("{s:s, s:s, s:I}", "status", SG_REG_KEEP_FAILED, "error",
				   err.msg, "expires",
				   (json_int_t)(time(NULL) + s->profile->lifetime_seconds));
	} else if (rc) {
		fprintf(stderr,
			"sandgate: cleanup of environment %s (%s, profile %s) did not finish: %s: %s; it may remain: run `sandgate envs gc`\n",
			s->env->id, s->env->ad->name, s->profile->name, sg_err_word(rc),
			err.msg);
		fields = json_pack("{s:s, s:s}", "status", SG_REG_CLEANUP, "error", err.msg);
	} else if (fate == SG_FATE_REMOVE) {
		fields = NULL;
		sg_err_clear(&err);
		if (sg_registry_remove(s->state_dir, &key, &err))
			sg_log_warn("%s", err.msg);
	} else {
		/* The idle clock starts now: gc removes a kept non-persistent
		 * environment once lifetime_seconds have passed unattached. */
		fields = others ? NULL
				: json_pack("{s:s, s:I}", "status", SG_REG_KEPT, "expires",
					    (json_int_t)(time(NULL) + s->profile->lifetime_seconds));
		/* Marked for a removal that another session's arrival turned
		 * into a detach: the record is live again. */
		if (marked && !fields)
			fields = json_pack("{s:s, s:s}", "status", SG_REG_ACTIVE, "error", "");
	}
	if (fields) {
		sg_err_clear(&err);
		if (sg_registry_update(s->state_dir, &key, fields, &err))
			sg_log_warn("%s", err.msg);
		json_decref(fields);
	}
	return rc ? 1 : 0;
}

/* When a reaper must take over, and what bounds it (sg_shutdown_run). */
struct hand_over {
	bool allowed;                /* the exit window is shorter than the budget */
	int64_t budget_ms;
	int64_t reap_until, exit_until;
};

/*
 * Hand the settling of what a failed provisioning may have left (rec) to
 * a reaper, its record saying so first.  SG_OK once the reaper took it.
 */
static sg_err settle_later(struct sg_session *s, json_t *rec, const struct hand_over *h,
			   struct sg_errinfo *err)
{
	struct sg_reg_key key = { json_string_value(json_object_get(rec, "backend")),
				  json_string_value(json_object_get(rec, "identity")) };
	json_t *fields = json_pack("{s:{s:I, s:I}}", "reaper", "budget_ms",
				   (json_int_t)h->budget_ms, "since", (json_int_t)time(NULL));
	sg_err rc = sg_registry_update(s->state_dir, &key, fields, err);

	json_decref(fields);
	if (!rc)
		rc = sg_reaper_start(s, &key, h->reap_until, h->exit_until - sg_now_ms(), err);
	return rc;
}

/*
 * Settle what failed provisionings may have left (initialize.c,
 * keep_pending) within the budget, or when the host's window is too short
 * for it, in reapers.  Returns non-zero when something may remain; stderr
 * says what, and its record stays for `sandgate envs gc`.
 */
static int settle_pending(struct sg_session *s, struct sg_cancel *deadline,
			  const struct hand_over *h)
{
	json_t *pending, *rec;
	size_t i;
	int status = 0;

	pthread_mutex_lock(&s->lock);
	pending = s->pending;
	s->pending = NULL;
	pthread_mutex_unlock(&s->lock);
	json_array_foreach(pending, i, rec) {
		struct sg_errinfo err = { 0 };

		if (h->allowed ? !settle_later(s, rec, h, &err)
			       : !sg_envs_settle(s->cfg, s->state_dir, rec, deadline, &err))
			continue;
		fprintf(stderr,
			"sandgate: a failed initialize may have left an environment of identity \"%s\" (%s, profile %s) that could not be removed: %s: %s; it may remain: run `sandgate envs gc`\n",
			json_string_value(json_object_get(rec, "identity")),
			json_string_value(json_object_get(rec, "backend")),
			json_string_value(json_object_get(rec, "profile")), sg_err_word(err.code),
			err.msg);
		status = SG_EXIT_UNAVAILABLE;
	}
	json_decref(pending);
	return status;
}

struct deadline {
	struct sg_cancel token;    /* the whole budget */
	struct sg_cancel optional; /* the optional work's share of it */
	struct sg_cancel done;
	int64_t ms, optional_ms;
	pthread_t thread;
};

static void *deadline_main(void *arg)
{
	struct deadline *d = arg;

	if (sg_cancel_sleep(&d->done, d->optional_ms) == SG_OK)
		sg_cancel_fire_with(&d->optional, SG_E_TIMEOUT,
				    "the time left for optional work ran out");
	if (sg_cancel_sleep(&d->done, d->ms - d->optional_ms) == SG_OK)
		sg_cancel_fire_with(&d->token, SG_E_TIMEOUT, "the shutdown budget ran out");
	return NULL;
}

/*
 * Plan the shutdown of a ready session before any step runs: the fate it
 * will most likely meet (the last session removes or keeps, otherwise it
 * detaches), its cost, and whether the budget covers it.  The last session
 * marks its record before a removal; when the budget is short, stderr and
 * the record say so now, while sandgate still can.  Returns whether the
 * plan fits; *marked says whether the record was marked.
 */
static bool plan_shutdown(struct sg_session *s, int64_t budget_ms, bool can_hand_off,
			  struct sg_budget_plan *plan, int64_t *optional_ms, bool *marked,
			  bool *handoff)
{
	struct sg_reg_key key = { s->env->ad->name, s->identity };
	enum sg_fate fate = s->env->remove_on_exit ? SG_FATE_REMOVE : SG_FATE_KEEP;
	json_t *stats = sg_budget_load(s->state_dir, s->env->ad->name), *fields;
	struct sg_errinfo err = { 0 };
	char why[SG_ERR_MSG];
	int others = 0;
	bool fits;

	sg_budget_plan(s->env->ad->name, &fate, stats, plan);
	fits = sg_budget_split(plan, budget_ms, optional_ms);
	snprintf(why, sizeof(why),
		 "the shutdown budget (%lld ms) is shorter than its cleanup needs (%lld ms)",
		 (long long)budget_ms, (long long)plan->total_ms);
	if (fate == SG_FATE_REMOVE)
		fields = json_pack("{s:s, s:s}", "status", SG_REG_CLEANUP, "error",
				   fits ? "its gateway stopped while removing it" : why);
	else
		fields = json_object();
	if (!fits)
		json_object_set_new(fields, "budget",
				    json_pack("{s:I, s:I}", "given_ms", (json_int_t)budget_ms,
					      "needs_ms", (json_int_t)plan->total_ms));
	*marked = false;
	if (json_object_size(fields) &&
	    sg_registry_update_if_last(s->state_dir, &key, s->session_id, fields, &others, &err))
		sg_log_warn("%s", err.msg);
	else
		*marked = fate == SG_FATE_REMOVE && !others;
	if (others) {
		/* Another session stays: this one only lets go. */
		fate = SG_FATE_DETACH;
		sg_budget_plan(s->env->ad->name, &fate, stats, plan);
		fits = sg_budget_split(plan, budget_ms, optional_ms);
	}
	/* The removal goes to a reaper: the window is the optional work's. */
	*handoff = !fits && can_hand_off && *marked;
	if (*handoff)
		*optional_ms = budget_ms > SG_BUDGET_HANDOFF_MS ? budget_ms - SG_BUDGET_HANDOFF_MS : 0;
	if (!fits && !*handoff)
		fprintf(stderr,
			"sandgate: %s for environment %s (%s, profile %s: %s %lld ms%s, %s %lld ms%s, slack %lld ms); processes are killed without a grace so that %s has its time; what does not finish stays in the registry for `sandgate envs gc`\n",
			why, s->env->id, s->env->ad->name, s->profile->name,
			sg_budget_op_words(plan->stop.op), (long long)plan->stop.ms,
			plan->stop.samples ? " measured" : " by default",
			sg_budget_op_words(plan->env.op), (long long)plan->env.ms,
			plan->env.samples ? " measured" : " by default", (long long)plan->slack_ms,
			plan->env.op == SG_BUDGET_REMOVE ? "the delete" : "the environment's step");
	json_decref(fields);
	json_decref(stats);
	return fits;
}

/*
 * Hand the removal of the session's environment to a reaper that may
 * take until reap_until, waiting at most until exit_until for its claim.
 * The session detaches first, and the record says cleanup-pending with
 * the reaper's bound before the reaper starts.  Returns non-zero when the
 * reaper did not take it: the record then stays for `sandgate envs gc`.
 */
static int hand_off(struct sg_session *s, int64_t budget_ms, int64_t reap_until,
		    int64_t exit_until)
{
	struct sg_reg_key key = { s->env->ad->name, s->identity };
	struct sg_errinfo err = { 0 };
	json_t *fields;
	int others = 0;
	sg_err rc;

	if (sg_registry_detach(s->state_dir, &key, s->session_id, &others, &err))
		sg_log_warn("%s", err.msg);
	sg_err_clear(&err);
	if (others) {
		/* A session attached since: the environment is its now. */
		fields = json_pack("{s:s, s:s}", "status", SG_REG_ACTIVE, "error", "");
		if (sg_registry_update(s->state_dir, &key, fields, &err))
			sg_log_warn("%s", err.msg);
		json_decref(fields);
		return 0;
	}
	fields = json_pack("{s:s, s:s, s:{s:I, s:I}}", "status", SG_REG_CLEANUP, "error",
			   "its removal was handed to a reaper: the host allowed its gateway too little time",
			   "reaper", "budget_ms", (json_int_t)budget_ms, "since", (json_int_t)time(NULL));
	rc = sg_registry_update(s->state_dir, &key, fields, &err);
	json_decref(fields);
	if (!rc)
		rc = sg_reaper_start(s, &key, reap_until, exit_until - sg_now_ms(), &err);
	if (rc) {
		fprintf(stderr,
			"sandgate: the removal of environment %s (%s, profile %s) could not be handed to a reaper: %s: %s; it may remain: run `sandgate envs gc`\n",
			s->env->id, s->env->ad->name, s->profile->name, sg_err_word(rc), err.msg);
		return 1;
	}
	sg_log_warn("the host allows %lld ms to exit: the removal of environment %s (%s, profile %s) goes on in a reaper for at most %lld ms; what it cannot finish stays for `sandgate envs gc`",
		    (long long)(exit_until - (reap_until - budget_ms)), s->env->id,
		    s->env->ad->name, s->profile->name, (long long)budget_ms);
	return 0;
}

/*
 * The host's protocol version: the binding's, or the one an initialize
 * that has not bound the session (yet) asked for; 4 before any.
 */
static int session_version(struct sg_session *s)
{
	int v;

	pthread_mutex_lock(&s->lock);
	v = s->version ? s->version : 4;
	pthread_mutex_unlock(&s->lock);
	return v;
}

/*
 * The time from EOF to exit: the budget, or for a version-3 host the
 * shorter window its grace leaves (budget.h).
 */
static int64_t exit_window(struct sg_session *s, int64_t budget_ms)
{
	int64_t w = s->peer ? SG_BUDGET_V3_PEER_EXIT_MS : SG_BUDGET_V3_EXIT_MS;

	return session_version(s) == 3 && budget_ms > w ? w : budget_ms;
}

/*
 * Does the session own an environment to stop and tear down?  Read under
 * the session's lock: an initialize may still be finishing on a worker.
 */
static bool session_ready(struct sg_session *s)
{
	bool ready;

	pthread_mutex_lock(&s->lock);
	ready = s->state == SG_S_READY && s->env;
	pthread_mutex_unlock(&s->lock);
	return ready;
}

/*
 * The shutdown's last steps, whatever came before: the exit status made
 * to say a budget overrun, the replies flushed within what is left of the
 * budget, the deadline thread stopped.  Returns the exit status.
 */
static int shutdown_end(struct sg_session *s, struct deadline *d, int64_t start, int64_t exit_ms,
			int status)
{
	int64_t took = sg_now_ms() - start;

	/*
	 * Past the budget the exit says so even when every step succeeded
	 * (protocol section 9): the deadline thread fires the token at the
	 * budget, but a loaded machine can run it late, after steps that never
	 * waited on it had already finished.
	 */
	if (status == 0 && took > exit_ms) {
		fprintf(stderr, "sandgate: the shutdown took %lld ms, past its budget of %lld ms\n",
			(long long)took, (long long)exit_ms);
		status = SG_EXIT_UNAVAILABLE;
	}
	/*
	 * The replies get what is left of the budget, a second at most: a
	 * host that does not read its stdout must not hold the exit past the
	 * budget, which counts from EOF to exit.
	 */
	if (!sg_wire_flush(s->wire, start + exit_ms < sg_now_ms() + 1000 ? start + exit_ms
									: sg_now_ms() + 1000) &&
	    !sg_wire_dead(s->wire))
		sg_log_warn("replies could not all be written before exit");
	sg_cancel_fire(&d->done, SG_E_CANCELLED);
	if (!pthread_equal(d->thread, pthread_self()))
		pthread_join(d->thread, NULL);
	sg_cancel_release(&d->token);
	sg_cancel_release(&d->optional);
	sg_cancel_release(&d->done);
	return status;
}

int sg_shutdown_run(struct sg_session *s, struct sg_pool *pool, int64_t budget_ms,
		    const char *why)
{
	int64_t exit_ms = exit_window(s, budget_ms);
	struct deadline d = { .ms = exit_ms, .optional_ms = exit_ms };
	struct sg_budget_plan plan = { 0 };
	struct sg_errinfo err = { 0 };
	bool ready = session_ready(s), fits = true, marked = false, handoff = false;
	bool can_hand_off = exit_ms < budget_ms;
	int status = 0, stopped = 0;
	int64_t t0, start = sg_now_ms(), late_optional;
	struct hand_over over = { can_hand_off, budget_ms, start + budget_ms, start + exit_ms };
	sg_err rc = SG_OK;

	sg_log_info("shutting down: %s", why);
	/* What a cancelled request still waits for ends by then too (cancel.h). */
	sg_cancel_set_quit(start + exit_ms);
	/* An initialize cut short may leave a create to settle: a reaper's start. */
	if (can_hand_off && exit_ms > SG_BUDGET_HANDOFF_MS)
		d.optional_ms = exit_ms - SG_BUDGET_HANDOFF_MS;
	if (ready)
		fits = plan_shutdown(s, exit_ms, can_hand_off, &plan, &d.optional_ms, &marked,
				     &handoff);
	if (sg_cancel_init(&d.token) || sg_cancel_init(&d.optional) || sg_cancel_init(&d.done))
		return 70;
	if (pthread_create(&d.thread, NULL, deadline_main, &d) != 0)
		d.thread = pthread_self();
	/* The mode's first step: a relay's peer sees EOF before the drain (relay.h). */
	if (s->mode->shutdown(s, pool, &d.token,
			      can_hand_off ? exit_ms - SG_BUDGET_V3_PEER_KILL_MS : INT64_MAX))
		status = SG_EXIT_UNAVAILABLE;
	/* Optional: awaiting the cancelled requests; those still cancelling
	 * when their share ran out finish beside the cleanup. */
	if (!sg_pool_drain(pool, &d.optional))
		sg_log_info("requests are still cancelling; the cleanup goes on beside them");
	/*
	 * An initialize that finished while its cancel drained made an
	 * environment all the same: plan it with what is left of the budget
	 * (the deadline thread's split is already fixed).
	 */
	if (!ready && (ready = session_ready(s)))
		fits = plan_shutdown(s, exit_ms - (sg_now_ms() - start), can_hand_off, &plan,
				     &late_optional, &marked, &handoff);
	if (ready && handoff) {
		/* The processes end with their environment, in the reaper's removal. */
		if (hand_off(s, budget_ms, start + budget_ms, start + exit_ms))
			status = SG_EXIT_UNAVAILABLE;
	} else if (ready) {
		/* Must-do, in this order: the processes (without a grace when
		 * the budget is short), then the environment. */
		t0 = sg_now_ms();
		rc = sg_procs_shutdown(s, fits ? SG_PROC_GRACE_MS : 0, &d.token, &stopped, &err);
		if (rc)
			fprintf(stderr, "sandgate: %s\n", err.msg);
		if (stopped && fits)
			measure(s, SG_BUDGET_STOP, rc, sg_now_ms() - t0, plan.stop.ms);
		sg_err_clear(&err);
		if (teardown(s, &plan, marked, &d.token) || rc)
			status = SG_EXIT_UNAVAILABLE;
	}
	if (!sg_pool_drain(pool, &d.token)) {
		fprintf(stderr, "sandgate: requests still running when the shutdown budget ran out\n");
		status = SG_EXIT_UNAVAILABLE;
	}
	if (ready) {
		/* Only now: a request still cancelling may use them. */
		sg_procs_free(s);
		sg_exports_free(s);
	}
	if (settle_pending(s, &d.token, &over))
		status = SG_EXIT_UNAVAILABLE;
	return shutdown_end(s, &d, start, exit_ms, status);
}
