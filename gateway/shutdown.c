/*
 * shutdown.c - the end of a connection (protocol section 9): cancel and
 * await requests, stop the session's processes, release exports, then keep
 * or remove the environment, all inside the shutdown budget.
 *
 * Invariants: the budget is one deadline token that every step waits on;
 * whatever the budget cut short is said on stderr and left in the state
 * registry as cleanup-pending, so `sandgate envs gc` finds it.  That
 * includes what a failed initialize may have left (a create whose outcome
 * is unknown): it is looked for and removed here, within the budget.
 */
#include "shutdown.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/crash.h"
#include "base/log.h"
#include "cli.h"
#include "envs.h"
#include "registry.h"
#include "relay.h"

/*
 * Keep, remove or let go of the environment, as the binding and the other
 * sessions attached to it say, and record the outcome.  Returns non-zero
 * when the environment may remain against the binding's wish.
 */
static int teardown(struct sg_session *s, struct sg_cancel *deadline)
{
	struct sg_reg_key key = { s->env->ad->name, s->identity };
	struct sg_errinfo err = { 0 };
	enum sg_fate fate;
	json_t *fields;
	int others = 0;
	sg_err rc;

	if (sg_registry_detach(s->state_dir, &key, s->session_id, &others, &err))
		sg_log_warn("%s", err.msg);
	sg_crashpoint("teardown:detached");
	fate = others ? SG_FATE_DETACH
		      : s->env->remove_on_exit ? SG_FATE_REMOVE : SG_FATE_KEEP;
	sg_err_clear(&err);
	rc = s->env->ad->teardown(s->env, fate, deadline, &err);
	if (rc) {
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
	}
	if (fields) {
		sg_err_clear(&err);
		if (sg_registry_update(s->state_dir, &key, fields, &err))
			sg_log_warn("%s", err.msg);
		json_decref(fields);
	}
	return rc ? 1 : 0;
}

/*
 * Settle what failed provisionings may have left (initialize.c,
 * keep_pending) within the budget.  Returns non-zero when something may
 * remain; stderr says what, and its record stays for `sandgate envs gc`.
 */
static int settle_pending(struct sg_session *s, struct sg_cancel *deadline)
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

		if (!sg_envs_settle(s->cfg, s->state_dir, rec, deadline, &err))
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
	struct sg_cancel token, done;
	int64_t ms;
	pthread_t thread;
};

static void *deadline_main(void *arg)
{
	struct deadline *d = arg;

	if (sg_cancel_sleep(&d->done, d->ms) == SG_OK)
		sg_cancel_fire_with(&d->token, SG_E_TIMEOUT, "the shutdown budget ran out");
	return NULL;
}

int sg_shutdown_run(struct sg_session *s, struct sg_pool *pool, int64_t budget_ms,
		    const char *why)
{
	struct deadline d = { .ms = budget_ms };
	struct sg_errinfo err = { 0 };
	int status = 0;
	sg_err rc = SG_OK;

	sg_log_info("shutting down: %s", why);
	if (sg_cancel_init(&d.token) || sg_cancel_init(&d.done))
		return 70;
	if (pthread_create(&d.thread, NULL, deadline_main, &d) != 0)
		d.thread = pthread_self();
	/*
	 * A peer sees EOF first: it cancels its own requests, whose replies
	 * still reach the host while they drain here (relay.h).
	 */
	if (sg_relay_shutdown(s, &d.token))
		status = SG_EXIT_UNAVAILABLE;
	if (!sg_pool_drain(pool, &d.token)) {
		fprintf(stderr, "sandgate: requests still running when the shutdown budget ran out\n");
		status = SG_EXIT_UNAVAILABLE;
	}
	if (s->state == SG_S_READY && !s->relay) {
		rc = sg_procs_shutdown(s, &d.token, &err);
		if (rc)
			fprintf(stderr, "sandgate: %s\n", err.msg);
		sg_procs_free(s);
		sg_exports_free(s);
		sg_err_clear(&err);
		if (teardown(s, &d.token) || rc)
			status = SG_EXIT_UNAVAILABLE;
	}
	if (settle_pending(s, &d.token))
		status = SG_EXIT_UNAVAILABLE;
	if (!sg_wire_flush(s->wire, sg_now_ms() + 1000) && !sg_wire_dead(s->wire))
		sg_log_warn("replies could not all be written before exit");
	sg_cancel_fire(&d.done, SG_E_CANCELLED);
	if (!pthread_equal(d.thread, pthread_self()))
		pthread_join(d.thread, NULL);
	sg_cancel_release(&d.token);
	sg_cancel_release(&d.done);
	return status;
}
