/*
 * pool.c - requests in flight and the workers that run them (pool.h).
 */
#include "gateway/pool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "core/http.h"
#include "gateway/audit.h"
#include "base/limits.h"
#include "gateway/session.h"

/* A queued request: ops chain through `next` in the in-flight list, so the
 * queue has links of its own. */
struct sg_job {
	struct sg_job *next;
	struct sg_op *op;
	sg_handler run;
	size_t bytes; /* the request's frame, counted in sg_pool.bytes */
};

void sg_pool_init(struct sg_pool *p, struct sg_session *s, struct sg_audit *audit)
{
	memset(p, 0, sizeof(*p));
	p->s = s;
	p->audit = audit;
	p->jobs_tail = &p->jobs;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->idle, NULL);
}

struct sg_op *sg_op_new(struct sg_session *s, json_t *frame, const char *method)
{
	struct sg_op *op = calloc(1, sizeof(*op));

	if (!op || sg_cancel_init(&op->cancel)) {
		free(op);
		return NULL;
	}
	op->id = json_incref(json_object_get(frame, "id"));
	op->req = frame;
	op->method = method;
	op->data = json_object_get(frame, "data");
	op->s = s;
	op->start_ns = sg_now_ns();
	return op;
}

void sg_op_free(struct sg_op *op)
{
	json_decref(op->id);
	json_decref(op->req);
	json_decref(op->after);
	free(op->after_id);
	free(op->raw_reply);
	free(op->fail_text);
	sg_cancel_release(&op->cancel);
	free(op);
}

void sg_op_after(struct sg_op *op, json_t *ev)
{
	if (!op->after)
		op->after = json_array();
	json_array_append_new(op->after, ev);
}

/* Caller holds the lock. */
static struct sg_op *find_inflight(struct sg_pool *p, json_t *id)
{
	for (struct sg_op *op = p->inflight; op; op = op->next)
		if (json_equal(op->id, id))
			return op;
	return NULL;
}

/*
 * The terminal reply.  The op leaves the in-flight list first: once the
 * host can read the reply, a cancel of that id is a no-op and the id may be
 * used again.
 */
static void finish(struct sg_pool *p, struct sg_op *op, size_t bytes, sg_err rc,
		   json_t *data)
{
	struct sg_wire *wire = p->s->wire;
	struct sg_op **link;

	pthread_mutex_lock(&p->lock);
	for (link = &p->inflight; *link; link = &(*link)->next) {
		if (*link == op) {
			*link = op->next;
			break;
		}
	}
	p->count--;
	p->bytes -= bytes;
	p->replying++;
	pthread_mutex_unlock(&p->lock);
	/* Before the reply: the log then lists calls in the order the host
	 * saw them end. */
	sg_audit_write(p->audit, op, rc);
	if (!rc && op->raw_reply) {
		sg_wire_send_text(wire, op->raw_reply, op->raw_len);
		op->raw_reply = NULL;
	} else if (!rc) {
		sg_wire_send(wire, json_pack("{s:O, s:o}", "id", op->id, "data",
					     data ? data : json_object()));
	} else if (op->fail_text && op->err.code == rc) {
		sg_wire_send_error_text(wire, op->id, rc, op->fail_text);
	} else {
		sg_wire_send_error(wire, op->id, &op->err);
	}
	if (!rc && op->after) {
		json_t *ev;
		size_t i;

		json_array_foreach(op->after, i, ev)
			sg_wire_send(wire, json_incref(ev));
	}
	if (!rc && op->after_sent)
		op->after_sent(op);
	if (op->replied)
		op->replied(op);
	sg_op_free(op);
	pthread_mutex_lock(&p->lock);
	p->replying--;
	pthread_cond_broadcast(&p->idle);
	pthread_mutex_unlock(&p->lock);
}

/* The reason sg_pool_drain() fires with; compared by address. */
static const char shutdown_reason[] = "the gateway is shutting down";

/*
 * Run one request.  A request whose token fired and that did not succeed
 * answers with the token's reason: the host asked for the cancel, or the
 * gateway is shutting down, whatever the handler made of being stopped.
 *
 * Except for a request received before EOF whose token only the shutdown
 * fired: it still runs, so one that needs no provider work receives
 * its own answer (a validation error, a process/list) instead of
 * `cancelled`, even when EOF came in the same write.  Anything that would
 * reach the provider sees the fired token first (exec and http check it
 * before they start) and ends SG_E_CANCELLED, which answers with the
 * shutdown's reason as before; any other error the handler set is its own.
 */
static void run_job(struct sg_pool *p, struct sg_job *j)
{
	struct sg_op *op = j->op;
	json_t *data = NULL;
	bool shutdown;
	sg_err rc, why;

	rc = sg_cancel_check(&op->cancel);
	shutdown = rc && sg_cancel_reason(&op->cancel) == shutdown_reason;
	if (!rc || shutdown)
		rc = j->run(op, &data);
	why = rc ? sg_cancel_check(&op->cancel) : SG_OK;
	shutdown = why && sg_cancel_reason(&op->cancel) == shutdown_reason;
	if (why && op->keep_err && rc && op->err.code) {
		/* The handler's own verdict stands (session.h). */
	} else if (why && (!shutdown || rc == SG_E_CANCELLED || !op->err.code)) {
		const char *reason = sg_cancel_reason(&op->cancel);

		sg_err_clear(&op->err);
		rc = sg_err_set(&op->err, why, "%s",
				reason ? reason : "the request was cancelled");
	} else if (rc && !op->err.code) {
		sg_err_set(&op->err, rc, "%s failed", op->method);
	}
	if (rc)
		json_decref(data), data = NULL;
	finish(p, op, j->bytes, rc, data);
}

static void *worker_main(void *arg)
{
	struct sg_pool *p = arg;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct sg_job *j;

		while (!p->jobs && !p->quit) {
			p->idle_threads++;
			pthread_cond_wait(&p->work, &p->lock);
			p->idle_threads--;
		}
		if (!p->jobs)
			break;
		j = p->jobs;
		p->jobs = j->next;
		p->queued--;
		if (!p->jobs)
			p->jobs_tail = &p->jobs;
		pthread_mutex_unlock(&p->lock);
		run_job(p, j);
		free(j);
		pthread_mutex_lock(&p->lock);
	}
	pthread_mutex_unlock(&p->lock);
	/*
	 * A detached worker frees what it keeps per thread (OpenSSL's random
	 * generators, curl's handles) before it counts itself gone: the
	 * process exits once the count is 0, and thread-local destructors
	 * still running then would leave that memory half freed.
	 */
	sg_http_thread_end();
	OPENSSL_thread_stop();
	pthread_mutex_lock(&p->lock);
	p->threads--;
	pthread_cond_broadcast(&p->idle);
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

sg_err sg_pool_submit(struct sg_pool *p, struct sg_op *op, sg_handler run, size_t bytes,
		      struct sg_errinfo *err)
{
	struct sg_job *j = calloc(1, sizeof(*j));
	sg_err rc = SG_OK;
	pthread_t t;

	pthread_mutex_lock(&p->lock);
	/*
	 * Checked on the reader thread, before anything is queued: a host
	 * that pipelines without waiting for replies is told at once, and
	 * the queue, the frames it holds and the in-flight search stay
	 * bounded.
	 */
	if (find_inflight(p, op->id))
		rc = sg_err_set(err, SG_E_INVALID_REQUEST,
				"a request with this id is still in flight");
	else if (p->count >= SG_INFLIGHT_MAX)
		rc = sg_err_set(err, SG_E_UNAVAILABLE,
				"%d requests are in flight already; wait for a reply before sending more",
				SG_INFLIGHT_MAX);
	else if (bytes > SG_INFLIGHT_BYTES - p->bytes)
		rc = sg_err_set(err, SG_E_UNAVAILABLE,
				"the requests in flight hold %zu of at most %zu MiB; wait for a reply before sending more",
				p->bytes / SG_MiB, (size_t)SG_INFLIGHT_BYTES / SG_MiB);
	if (rc) {
		pthread_mutex_unlock(&p->lock);
		free(j);
		return rc;
	}
	op->next = p->inflight;
	p->inflight = op;
	p->count++;
	if (!j) {
		pthread_mutex_unlock(&p->lock);
		sg_err_set(&op->err, SG_E_INTERNAL, "out of memory");
		finish(p, op, 0, SG_E_INTERNAL, NULL);
		return SG_OK;
	}
	j->op = op;
	j->run = run;
	j->bytes = bytes;
	p->bytes += bytes;
	*p->jobs_tail = j;
	p->jobs_tail = &j->next;
	p->queued++;
	/*
	 * An idle worker already signalled counts as idle until it wakes, so
	 * compare with the queue, not with zero: every job of a burst finds a worker.
	 */
	if (p->queued > p->idle_threads && p->threads < SG_WORKERS_MAX) {
		if (pthread_create(&t, NULL, worker_main, p) == 0) {
			pthread_detach(t);
			p->threads++;
		}
	}
	pthread_mutex_unlock(&p->lock);
	/* After the unlock: a worker woken under the lock would wake only to
	 * wait for it, a second sleep and wake-up on every request. */
	pthread_cond_signal(&p->work);
	return SG_OK;
}

/*
 * Under the lock, so the target cannot leave flight between the search and
 * the fire: a target found here has not queued its reply yet, and the one
 * it queues says it was cancelled.  The cancel itself is never answered.
 */
void sg_pool_cancel(struct sg_pool *p, json_t *target)
{
	struct sg_op *op;

	pthread_mutex_lock(&p->lock);
	op = find_inflight(p, target);
	if (op)
		sg_cancel_fire_with(&op->cancel, SG_E_CANCELLED,
				    "request cancelled by the host");
	pthread_mutex_unlock(&p->lock);
}

/* ---- run_code's nested calls (session.h) ---- */

void sg_callback_add(struct sg_session *s, struct sg_callback *cb)
{
	pthread_mutex_lock(&s->callback_lock);
	cb->next = s->callbacks;
	s->callbacks = cb;
	pthread_mutex_unlock(&s->callback_lock);
}

void sg_callback_remove(struct sg_session *s, struct sg_callback *cb)
{
	pthread_mutex_lock(&s->callback_lock);
	for (struct sg_callback **link = &s->callbacks; *link; link = &(*link)->next) {
		if (*link == cb) {
			*link = cb->next;
			break;
		}
	}
	pthread_mutex_unlock(&s->callback_lock);
}

bool sg_callback_deliver(struct sg_session *s, const char *id, json_t *answer)
{
	struct sg_callback *cb;

	pthread_mutex_lock(&s->callback_lock);
	for (cb = s->callbacks; cb; cb = cb->next)
		if (strcmp(cb->id, id) == 0)
			break;
	if (cb)
		cb->deliver(cb, answer);
	pthread_mutex_unlock(&s->callback_lock);
	return cb != NULL;
}

/* Wait on cond for at most ms, the pool's lock held. */
static bool timed_wait(pthread_cond_t *cond, pthread_mutex_t *lock, int64_t ms)
{
	struct timespec ts = sg_time_after(CLOCK_REALTIME, ms);

	return pthread_cond_timedwait(cond, lock, &ts) != ETIMEDOUT;
}

bool sg_pool_drain(struct sg_pool *p, const struct sg_cancel *deadline)
{
	bool empty;

	pthread_mutex_lock(&p->lock);
	for (struct sg_op *op = p->inflight; op; op = op->next)
		sg_cancel_fire_with(&op->cancel, SG_E_CANCELLED, shutdown_reason);
	/* The deadline fires from another thread without touching this
	 * condition, so wake up often enough to notice it. */
	while ((p->inflight || p->replying) && !sg_cancel_check(deadline))
		timed_wait(&p->idle, &p->lock, 20);
	empty = !p->inflight && !p->replying;
	pthread_mutex_unlock(&p->lock);
	return empty;
}

bool sg_pool_stop(struct sg_pool *p, int64_t wait_ms)
{
	int64_t until = sg_now_ms() + wait_ms;
	bool stopped;

	pthread_mutex_lock(&p->lock);
	p->quit = true;
	pthread_cond_broadcast(&p->work);
	while (p->threads > 0 && sg_now_ms() < until)
		timed_wait(&p->idle, &p->lock, until - sg_now_ms());
	stopped = p->threads == 0;
	pthread_mutex_unlock(&p->lock);
	return stopped;
}
