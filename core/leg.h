/*
 * leg.h - blocking work run on a thread of its own beside the caller's:
 * requests an adapter sends side by side, and its background loops.
 *
 * Invariants: the caller talks to a running leg only through two cancel
 * tokens.  It stops the leg by firing the leg's stop token, which run
 * receives and must honour in every wait; the leg says it ended by firing
 * its done token as run returns, so the caller can poll() sg_leg_fd beside
 * descriptors of its own.  rc, ms and whatever run wrote through arg are
 * the caller's to read once sg_leg_ended says so (the done token fires
 * after they are stored) or after sg_leg_end.  A leg that never started
 * has ended; sg_leg_end is safe on it, and twice.
 */
#ifndef SG_LEG_H
#define SG_LEG_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/cancel.h"
#include "base/err.h"

struct sg_leg {
	/* Set by the caller before sg_leg_start. */
	sg_err (*run)(void *arg, struct sg_cancel *stop);
	void *arg;             /* borrowed; run's to use until sg_leg_end */
	/* run's result and how long it took, once it has ended. */
	sg_err rc;
	int64_t ms;
	/* The leg's own. */
	struct sg_cancel stop, done;
	pthread_t thread;
	bool started;
};

/*
 * Start run(arg, stop) on a new thread.  SG_E_INTERNAL (said in err) when
 * no thread or token could be had: then nothing runs, and the caller may
 * do the work itself.
 */
sg_err sg_leg_start(struct sg_leg *l, struct sg_errinfo *err) SG_MUST_CHECK;

/* Has run returned (or never started)? */
bool sg_leg_ended(const struct sg_leg *l);

/* A descriptor readable once run has returned; -1 when it already has. */
int sg_leg_fd(const struct sg_leg *l);

/* Fire the leg's stop token, with reason (static words, or NULL). */
void sg_leg_stop(struct sg_leg *l, sg_err why, const char *reason);

/*
 * Wait for the leg to end and let its thread and tokens go.  Unless it has
 * ended, why (not SG_OK) is fired on its stop token first; SG_OK waits for
 * run to return by itself.
 */
void sg_leg_end(struct sg_leg *l, sg_err why);

#endif
