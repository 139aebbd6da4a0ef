/*
 * pool.h - requests in flight and the workers that run them.
 *
 * Invariants: an op is in the in-flight list from sg_pool_submit until its
 * terminal reply is queued, which the worker that ran it does exactly once,
 * after its handler returned.  The op belongs to that worker: cancel and
 * drain only fire its token, with the reason in words on the token, and
 * never write into the op.  The pool grows with its queue, up to
 * SG_WORKERS_MAX threads.  At most SG_INFLIGHT_MAX requests, holding at
 * most SG_INFLIGHT_BYTES of frames, are in flight: what a host sends past
 * that is refused, so a host cannot make the gateway hold without bound.
 */
#ifndef SG_POOL_H
#define SG_POOL_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/cancel.h"
#include "base/err.h"

struct sg_audit;
struct sg_job;
struct sg_op;
struct sg_session;

/* A method's handler: runs on a worker, *out is the reply's data (new). */
typedef sg_err (*sg_handler)(struct sg_op *op, json_t **out);

struct sg_pool {
	struct sg_session *s;   /* borrowed */
	struct sg_audit *audit; /* borrowed; NULL: no audit log */

	pthread_mutex_t lock;
	pthread_cond_t work, idle;
	struct sg_op *inflight;    /* every op between submit and reply */
	struct sg_job *jobs, **jobs_tail;
	int replying;              /* ops out of the list whose reply is going out */
	int count;                 /* ops in the in-flight list */
	size_t bytes;              /* their frames' bytes */
	int threads, idle_threads;
	int queued;                /* jobs waiting for a worker */
	bool quit;
};

void sg_pool_init(struct sg_pool *p, struct sg_session *s, struct sg_audit *audit);

/*
 * A request for method (a static name) from frame, whose `data` must be an
 * object; new, with a cancel token; it steals frame.  NULL when out of
 * memory (frame is then still the caller's).
 */
struct sg_op *sg_op_new(struct sg_session *s, json_t *frame, const char *method);
void sg_op_free(struct sg_op *op);

/*
 * Put op, whose frame was bytes long, in flight and queue it to run
 * (steals op).  SG_E_INVALID_REQUEST when a request with its id is still
 * in flight, SG_E_UNAVAILABLE when the pool holds SG_INFLIGHT_MAX requests
 * or this one would take it past SG_INFLIGHT_BYTES: op is then still the
 * caller's, nothing was replied, and err says why.
 */
sg_err sg_pool_submit(struct sg_pool *p, struct sg_op *op, sg_handler run, size_t bytes,
		      struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * The host's cancel of target (borrowed; protocol section 5): fire the
 * token of the request in flight with that id, if any.  Nothing is
 * replied; the target's own reply says it was cancelled once its handler
 * stopped.  An unknown or finished id is a no-op.
 */
void sg_pool_cancel(struct sg_pool *p, json_t *target);

/*
 * Cancel every request in flight and wait until each has replied, or
 * until deadline fires; true when none is left.
 */
bool sg_pool_drain(struct sg_pool *p, const struct sg_cancel *deadline);

/*
 * Let the workers go once the queue is empty and wait up to wait_ms for
 * them to end; false when a handler that ignores its token still runs.
 */
bool sg_pool_stop(struct sg_pool *p, int64_t wait_ms);

#endif
