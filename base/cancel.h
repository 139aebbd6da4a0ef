/*
 * cancel.h - the cancel token every blocking wait honours.
 *
 * Invariants: a token fires at most once and never un-fires; firing is safe
 * from any thread and wakes every waiter at once through an eventfd that
 * stays readable afterwards, so a waiter can poll() the fd beside its own
 * descriptors.  A NULL token is valid everywhere and never fires.
 */
#ifndef SG_CANCEL_H
#define SG_CANCEL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "base/err.h"

struct sg_cancel {
	atomic_int why; /* SG_OK until fired, then SG_E_CANCELLED or another code */
	_Atomic(const char *) reason; /* why, in words (static), or NULL */
	int fd;         /* eventfd, readable once fired; -1 if creation failed */
};

sg_err sg_cancel_init(struct sg_cancel *c) SG_MUST_CHECK;
void sg_cancel_release(struct sg_cancel *c);

/* Fire with a reason (SG_E_CANCELLED, SG_E_TIMEOUT ...); later fires are ignored. */
void sg_cancel_fire(struct sg_cancel *c, sg_err why);

/*
 * Fire, and say why in words: `reason` must outlive the token (a string
 * literal).  The words are the token's, so whoever fires it never writes
 * into the state of the thread that waits on it; the first reason given
 * is kept.
 */
void sg_cancel_fire_with(struct sg_cancel *c, sg_err why, const char *reason);

/* The words of the first fire that gave some, or NULL. */
const char *sg_cancel_reason(const struct sg_cancel *c);

/* SG_OK, or the reason the token fired. */
sg_err sg_cancel_check(const struct sg_cancel *c);

/* The descriptor to poll for POLLIN, or -1 for a NULL token. */
int sg_cancel_fd(const struct sg_cancel *c);

/* Sleep ms milliseconds or until fired; returns SG_OK or the reason. */
sg_err sg_cancel_sleep(const struct sg_cancel *c, int64_t ms);

/*
 * The process's own deadline: the moment (sg_now_ms) by which a shutdown
 * must have ended, set once when it starts.  A wait that begins after
 * its token fired (the kill of what a cancel left running on a remote
 * host) has no token left to bound it, so it is clipped to this instead:
 * sg_cancel_quit_clip(ms) is ms, or what is left before the deadline
 * when that is less, 0 once it has passed (the wait must not start).
 * Without a deadline set (no shutdown yet, the operator commands), ms.
 */
void sg_cancel_set_quit(int64_t at_ms);
int64_t sg_cancel_quit_clip(int64_t ms);

/* Monotonic clock helpers used by every deadline. */
int64_t sg_now_ms(void);
int64_t sg_now_ns(void);

/* The time ms milliseconds from now on clock, for the waits that take an
 * absolute time (pthread_cond_timedwait, sigtimedwait's loops). */
struct timespec sg_time_after(clockid_t clock, int64_t ms);

#endif
