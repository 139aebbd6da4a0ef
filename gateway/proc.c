/*
 * proc.c - the process methods and process/event, over sg-helper's spools.
 *
 * Processes live in the environment: sg-helper's supervisor keeps each
 * one's record and output spool there, so this file holds no process
 * state of its own beyond what events need.  A watcher thread long-polls
 * `proc wait` for this session's records and turns each transition it sees
 * (running -> exited/stopped/lost) into one process/event.
 *
 * Ordering: process/start's reply, then its `started` event, then any later
 * event of that process.  Until the reply is out the id is "starting"; an
 * end the watcher sees meanwhile is parked and sent by the after_sent hook.
 */
#include "session.h"

#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hex.h"
#include "base/limits.h"
#include "base/log.h"

#define WATCH_POLL_MS 30000

struct sg_procs {
	pthread_mutex_t lock;
	/*
	 * id -> {"status": last status seen, "starting": bool, "parked": event}
	 * for the processes of this session this connection follows: those
	 * it started, and up to SG_PROC_KNOWN_MAX others seen running.  An
	 * ended one leaves (observe).
	 */
	json_t *known;
	struct sg_cancel stop;
	pthread_t watcher;
	bool watching;
	struct sg_session *s;
};

static json_t *event(const char *type, const char *cause, json_t *record)
{
	return json_pack("{s:s, s:{s:s, s:s, s:O}}", "method", "process/event",
			 "data", "Type", type, "Cause", cause, "Process", record);
}

static const char *final_cause(json_t *rec, char *buf, size_t n)
{
	const char *st = json_string_value(json_object_get(rec, "status"));
	const char *sig = json_string_value(json_object_get(rec, "signal"));
	json_t *code = json_object_get(rec, "exit_code");

	if (st && strcmp(st, "lost") == 0)
		return "the process's supervisor is gone; its outcome is unknown";
	if (sig)
		snprintf(buf, n, "the process %s after %s",
			 strcmp(st, "stopped") == 0 ? "was stopped" : "was killed", sig);
	else if (json_is_integer(code))
		snprintf(buf, n, "the process exited with code %lld",
			 (long long)json_integer_value(code));
	else
		snprintf(buf, n, "the process ended (%s)", st ? st : "unknown");
	return buf;
}

static bool is_final(const char *st)
{
	return st && (strcmp(st, "exited") == 0 || strcmp(st, "stopped") == 0 ||
		      strcmp(st, "lost") == 0 || strcmp(st, "failed") == 0);
}

static bool owned(const struct sg_session *s, json_t *rec)
{
	const char *root = json_string_value(json_object_get(rec, "root_thread_id"));

	return json_is_object(rec) && root && strcmp(root, s->session_id) == 0;
}

/*
 * Note a record; returns the event its transition calls for (new) or NULL.
 * Called with the lock held.
 *
 * The records come from the environment, which may forge them (and, on a
 * remote backend, the helper that reads them): a record of another
 * session is ignored, as process/read ignores it, and the table follows
 * at most SG_PROC_KNOWN_MAX processes it did not start itself.  An ended
 * process leaves the table: it has no further transition to report.
 */
static json_t *observe(struct sg_procs *p, json_t *rec)
{
	const char *id = json_string_value(json_object_get(rec, "id"));
	const char *st = json_string_value(json_object_get(rec, "status"));
	json_t *k = id ? json_object_get(p->known, id) : NULL;
	const char *prev = json_string_value(json_object_get(k, "status"));
	json_t *ev = NULL;
	char cause[160];

	if (!id || !st || !owned(p->s, rec))
		return NULL;
	if (!k) {
		if (is_final(st) || json_object_size(p->known) >= SG_PROC_KNOWN_MAX)
			return NULL;
		k = json_object();
		json_object_set_new(p->known, id, k);
	}
	if (prev && strcmp(prev, "running") == 0 && is_final(st) &&
	    strcmp(st, "failed") != 0)
		ev = event(st, final_cause(rec, cause, sizeof(cause)), rec);
	json_object_set_new(k, "status", json_string(st));
	if (ev && json_is_true(json_object_get(k, "starting"))) {
		json_object_set_new(k, "parked", ev);
		ev = NULL;
	}
	if (is_final(st) && !json_is_true(json_object_get(k, "starting")))
		json_object_del(p->known, id);
	return ev;
}

static void *watch_main(void *arg)
{
	struct sg_procs *p = arg;
	struct sg_session *s = p->s;
	long long stamp = 0;

	while (!sg_cancel_check(&p->stop)) {
		char since[32], tmo[32];
		const char *args[] = { "proc", "wait", "--session", s->session_id,
				       "--since", since, "--timeout-ms", tmo, NULL };
		struct sg_errinfo err = { 0 };
		json_t *reply = NULL, *rec;
		size_t i;

		snprintf(since, sizeof(since), "%lld", stamp);
		snprintf(tmo, sizeof(tmo), "%d", WATCH_POLL_MS);
		if (sg_envcall(s, SG_CALL_CTL, args, NULL, 0, &reply, &p->stop, &err)) {
			if (sg_cancel_check(&p->stop))
				break;
			sg_log_warn("watching processes failed: %s", err.msg);
			/* Do not spin on a broken environment. */
			sg_cancel_sleep(&p->stop, 1000);
			continue;
		}
		stamp = json_integer_value(json_object_get(reply, "stamp"));
		json_array_foreach(json_object_get(reply, "changed"), i, rec) {
			json_t *ev;

			pthread_mutex_lock(&p->lock);
			ev = observe(p, rec);
			pthread_mutex_unlock(&p->lock);
			if (ev)
				sg_wire_send(s->wire, ev);
		}
		json_decref(reply);
	}
	return NULL;
}

sg_err sg_procs_new(struct sg_session *s)
{
	struct sg_procs *p = calloc(1, sizeof(*p));

	if (!p || !(p->known = json_object()) || sg_cancel_init(&p->stop)) {
		if (p)
			json_decref(p->known);
		free(p);
		return SG_E_INTERNAL;
	}
	pthread_mutex_init(&p->lock, NULL);
	p->s = s;
	s->procs = p;
	if (pthread_create(&p->watcher, NULL, watch_main, p) == 0)
		p->watching = true;
	else
		sg_log_warn("no process watcher thread: events will not be sent");
	return SG_OK;
}

static void stop_watcher(struct sg_procs *p)
{
	sg_cancel_fire(&p->stop, SG_E_CANCELLED);
	if (p->watching)
		pthread_join(p->watcher, NULL);
	p->watching = false;
}

void sg_procs_free(struct sg_session *s)
{
	struct sg_procs *p = s->procs;

	if (!p)
		return;
	stop_watcher(p);
	json_decref(p->known);
	sg_cancel_release(&p->stop);
	pthread_mutex_destroy(&p->lock);
	free(p);
	s->procs = NULL;
}

/* After process/start's reply: send the started event, then anything
 * parked for the id. */
static void start_sent(struct sg_op *op)
{
	struct sg_procs *p = op->s->procs;
	json_t *k, *parked = NULL;

	pthread_mutex_lock(&p->lock);
	k = json_object_get(p->known, op->after_id);
	if (k) {
		json_object_del(k, "starting");
		parked = json_incref(json_object_get(k, "parked"));
		json_object_del(k, "parked");
		/* Ended already: nothing more to follow. */
		if (is_final(json_string_value(json_object_get(k, "status"))))
			json_object_del(p->known, op->after_id);
	}
	pthread_mutex_unlock(&p->lock);
	if (parked)
		sg_wire_send(op->s->wire, parked);
}

/*
 * Stop process id after a spawn that did not end in a record (why: its
 * error, or SG_OK for a cancel that came meanwhile).  Without an answer
 * (none in time, one that cannot be read) the outcome is unknown: the
 * supervisor may be running the command while the host is told the start
 * failed, and a retry would run it twice.  The stop is bounded by
 * SG_PROC_SPAWN_MS, as the spawn was, since no host's cancel ends it; an
 * id that never started is "not found", which is what was hoped for.
 */
static void stop_unanswered(struct sg_session *s, const char *id, sg_err why)
{
	const char *stop[] = { "proc", "stop", "--id", id, "--grace-ms", "0", NULL };
	struct sg_errinfo err = { 0 };
	json_t *final = NULL;
	sg_err rc = sg_envcall_within(s, SG_CALL_CTL, stop, SG_PROC_SPAWN_MS, &final, NULL, &err);

	if (rc && rc != SG_E_NOT_FOUND)
		sg_log_warn("process %s (its start %s) may still run: stopping it failed: %s", id,
			    why ? "failed" : "was cancelled", err.msg);
	json_decref(final);
}

static sg_err proc_start(struct sg_op *op, json_t **out)
{
	struct sg_session *s = op->s;
	struct sg_procs *p = s->procs;
	const char *command = NULL, *cwd_arg = NULL, *opid = NULL, *mode = NULL, *status;
	enum sg_confine confine;
	json_t *argv = NULL, *env = NULL, *reply = NULL, *rec, *e;
	struct sg_strv av = SG_STRV_INIT, envp = SG_STRV_INIT;
	int64_t timeout;
	unsigned char rnd[8];
	char id[32], *cwd = NULL;
	size_t i;
	sg_err rc;

	*out = NULL;
	rc = sg_arg_str(op->data, "command", false, &command, &op->err);
	if (!rc)
		rc = sg_arg_str(op->data, "cwd", false, &cwd_arg, &op->err);
	if (!rc)
		rc = sg_arg_str(op->data, "operation_id", false, &opid, &op->err);
	if (!rc)
		rc = sg_arg_strings(op->data, "argv", &argv, &op->err);
	if (!rc)
		rc = sg_arg_env(op->data, "env", &env, &op->err);
	if (!rc)
		rc = sg_arg_int(op->data, "timeout_ms", 0, 0, INT64_C(31536000000),
				&timeout, &op->err);
	if (!rc)
		rc = sg_arg_mode(op->data, &confine, &op->err);
	if (!rc)
		rc = sg_envcall_can_confine(s, confine, &op->err);
	if (!rc && confine != SG_CONFINE_NONE)
		mode = sg_confine_word(confine);
	if (rc)
		goto out;
	if (!command == !argv || (argv && json_array_size(argv) == 0)) {
		rc = sg_err_set(&op->err, SG_E_INVALID_ARGUMENT,
				"give either `command` (a shell string) or `argv` (a non-empty array)");
		goto out;
	}
	rc = sg_envcall_resolve(s, cwd_arg ? cwd_arg : ".", false, &cwd,
				&op->cancel, &op->err);
	if (!rc)
		rc = sg_envcall_command_env(s, env, &envp, &op->err);
	if (rc)
		goto out;
	if (RAND_bytes(rnd, sizeof(rnd)) != 1) {
		rc = sg_err_set(&op->err, SG_E_INTERNAL, "no randomness for an id");
		goto out;
	}
	memcpy(id, "p-", 2);
	sg_hex(rnd, 8, id + 2);
	if (sg_strv_addv(&av, (const char *[]){ "proc", "spawn", "--id", id,
						 "--session", s->session_id,
						 "--cwd", cwd, "--root", s->root, NULL }) ||
	    (opid && sg_strv_addv(&av, (const char *[]){ "--op", opid, NULL })) ||
	    (timeout && (sg_strv_add(&av, "--timeout-ms") ||
			 sg_strv_addf(&av, "%lld", (long long)timeout))) ||
	    (mode && sg_strv_addv(&av, (const char *[]){ "--confine", mode, NULL })) ||
	    (mode && (sg_strv_add(&av, "--allow-write") ||
		      sg_strv_addf(&av, "%s/tmp", s->env->ctl_dir) ||
		      sg_strv_add(&av, "--allow-write") ||
		      sg_strv_addf(&av, "%s/home", s->env->ctl_dir))) ||
	    (command && sg_strv_addv(&av, (const char *[]){ "--command", command, NULL })) ||
	    (argv && sg_strv_add(&av, "--"))) {
		rc = sg_err_set(&op->err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	json_array_foreach(argv, i, e) {
		if (sg_strv_add(&av, json_string_value(e))) {
			rc = sg_err_set(&op->err, SG_E_INTERNAL, "out of memory");
			goto out;
		}
	}
	/* The id is "starting" before the spawn so the watcher parks its end. */
	pthread_mutex_lock(&p->lock);
	json_object_set_new(p->known, id, json_pack("{s:s, s:b}", "status",
						      "running", "starting", 1));
	pthread_mutex_unlock(&p->lock);
	/*
	 * The spawn itself is not cancelled midway: killing it could leave a
	 * supervisor nobody knows about.  It returns within moments; a cancel
	 * that arrived meanwhile stops the child it made (section 10).
	 */
	rc = sg_envcall_spawn(s, sg_strv_get(&av), sg_strv_get(&envp), &reply,
			      NULL, &op->err);
	/* The reply comes from inside the environment: a record without a
	 * status is no record. */
	rec = json_object_get(reply, "process");
	status = json_string_value(json_object_get(rec, "status"));
	if (!rc && !status)
		rc = sg_err_set(&op->err, SG_E_INTERNAL,
				"the environment helper's spawn reply has no record");
	if (rc != SG_E_WORKSPACE_LOST && (rc || sg_cancel_check(&op->cancel))) {
		stop_unanswered(s, id, rc);
		if (!rc)
			rc = sg_err_set(&op->err, SG_E_CANCELLED,
					"process/start was cancelled; process %s was stopped", id);
	}
	if (rc) {
		pthread_mutex_lock(&p->lock);
		json_object_del(p->known, id);
		pthread_mutex_unlock(&p->lock);
		goto out;
	}
	*out = json_incref(rec);
	if (strcmp(status, "failed") != 0) {
		sg_op_after(op, event("started", "the process was started", rec));
	} else {
		pthread_mutex_lock(&p->lock);
		json_object_set_new(json_object_get(p->known, id), "status",
				    json_string("failed"));
		pthread_mutex_unlock(&p->lock);
	}
	op->after_id = strdup(id);
	op->after_sent = start_sent;
out:
	json_decref(reply);
	free(cwd);
	sg_strv_release(&av);
	sg_strv_release(&envp);
	return rc;
}

static sg_err proc_list(struct sg_op *op, json_t **out)
{
	const char *args[] = { "proc", "list", "--session", op->s->session_id, NULL };
	json_t *reply = NULL;
	sg_err rc = sg_envcall(op->s, SG_CALL_CTL, args, NULL, 0, &reply,
			       &op->cancel, &op->err);

	*out = NULL;
	if (rc)
		return rc;
	*out = json_pack("{s:O}", "processes", json_object_get(reply, "processes"));
	json_decref(reply);
	return *out ? SG_OK : sg_err_set(&op->err, SG_E_INTERNAL,
					 "the helper's list reply has no processes");
}

/* A record of this session, fetched by id; others' processes are not found. */
static sg_err get_own(struct sg_op *op, const char *id, json_t **out)
{
	const char *args[] = { "proc", "get", "--id", id, NULL };
	json_t *reply = NULL, *rec;
	sg_err rc = sg_envcall(op->s, SG_CALL_CTL, args, NULL, 0, &reply,
			       &op->cancel, &op->err);

	*out = NULL;
	if (rc)
		return rc;
	rec = json_object_get(reply, "process");
	if (!owned(op->s, rec))
		rc = sg_err_set(&op->err, SG_E_NOT_FOUND,
				"no process %s in this session", id);
	else
		*out = json_incref(rec);
	json_decref(reply);
	return rc;
}

static sg_err proc_get(struct sg_op *op, json_t **out)
{
	const char *id = NULL;
	sg_err rc = sg_arg_str(op->data, "id", true, &id, &op->err);

	return rc ? rc : get_own(op, id, out);
}

static sg_err proc_read(struct sg_op *op, json_t **out)
{
	const char *id = NULL;
	int64_t max, offset, wait, dwell, start = sg_now_ns();
	char smax[24], soff[24], swait[24], sdwell[24];
	json_t *reply = NULL, *rec;
	sg_err rc;

	*out = NULL;
	rc = sg_arg_str(op->data, "id", true, &id, &op->err);
	if (!rc)
		rc = sg_arg_int(op->data, "MaxBytes", 0, 0, INT64_MAX, &max, &op->err);
	if (!rc)
		rc = sg_arg_int(op->data, "OffsetBytes", 0, 0, INT64_MAX, &offset, &op->err);
	if (!rc)
		rc = sg_arg_int(op->data, "Wait", 0, 0, INT64_MAX, &wait, &op->err);
	if (!rc)
		rc = sg_arg_int(op->data, "MinDwell", 0, 0, INT64_MAX, &dwell, &op->err);
	if (rc)
		return rc;
	if (max == 0)
		max = SG_READ_DEFAULT;
	if (max > (int64_t)SG_READ_CAP)
		max = SG_READ_CAP;
	snprintf(smax, sizeof(smax), "%lld", (long long)max);
	snprintf(soff, sizeof(soff), "%lld", (long long)offset);
	snprintf(swait, sizeof(swait), "%lld", (long long)wait);
	snprintf(sdwell, sizeof(sdwell), "%lld", (long long)dwell);
	{
		const char *args[] = { "proc", "read", "--id", id, "--offset", soff,
				       "--max", smax, "--wait-ns", swait,
				       "--min-dwell-ns", sdwell, NULL };

		rc = sg_envcall(op->s, SG_CALL_CTL, args, NULL, 0, &reply,
				&op->cancel, &op->err);
	}
	if (rc)
		return rc;
	rec = json_object_get(reply, "Process");
	if (!owned(op->s, rec)) {
		json_decref(reply);
		return sg_err_set(&op->err, SG_E_NOT_FOUND,
				  "no process %s in this session", id);
	}
	json_object_del(reply, "ok");
	json_object_set_new(reply, "Duration", json_integer(sg_now_ns() - start));
	*out = reply;
	return SG_OK;
}

static sg_err proc_stop(struct sg_op *op, json_t **out)
{
	const char *id = NULL;
	int64_t grace;
	char sgrace[24];
	json_t *rec = NULL, *reply = NULL;
	sg_err rc;

	*out = NULL;
	rc = sg_arg_str(op->data, "id", true, &id, &op->err);
	if (!rc)
		rc = sg_arg_int(op->data, "grace_ms", SG_PROC_GRACE_MS, 0,
				INT64_C(3600000), &grace, &op->err);
	if (!rc)
		rc = get_own(op, id, &rec);
	json_decref(rec);
	if (rc)
		return rc;
	snprintf(sgrace, sizeof(sgrace), "%lld", (long long)grace);
	{
		const char *args[] = { "proc", "stop", "--id", id, "--grace-ms",
				       sgrace, NULL };

		rc = sg_envcall(op->s, SG_CALL_CTL, args, NULL, 0, &reply,
				&op->cancel, &op->err);
	}
	if (rc)
		return rc;
	*out = json_incref(json_object_get(reply, "process"));
	json_decref(reply);
	return *out ? SG_OK : sg_err_set(&op->err, SG_E_INTERNAL,
					 "the helper's stop reply has no record");
}

/*
 * The shutdown's stops: a queue of distinct ids that at most
 * SG_PROC_STOP_THREADS threads take from.  The ids come from `proc list`,
 * which the environment can fill with forged or repeated records; one
 * thread per record would let it start thousands.
 */
struct stop_queue {
	struct sg_session *s;
	struct sg_cancel *cancel;
	char grace[24];
	pthread_mutex_t lock;
	const char **ids; /* borrowed from the reply */
	size_t n, next;
};

static void *stop_worker(void *arg)
{
	struct stop_queue *q = arg;

	for (;;) {
		const char *id = NULL;
		struct sg_errinfo err = { 0 };
		json_t *reply = NULL;

		pthread_mutex_lock(&q->lock);
		if (q->next < q->n)
			id = q->ids[q->next++];
		pthread_mutex_unlock(&q->lock);
		if (!id || sg_cancel_check(q->cancel))
			break;
		{
			const char *args[] = { "proc", "stop", "--id", id, "--grace-ms",
					       q->grace, NULL };

			if (sg_envcall(q->s, SG_CALL_CTL, args, NULL, 0, &reply, q->cancel, &err))
				sg_log_warn("stopping process %s failed: %s", id, err.msg);
		}
		json_decref(reply);
	}
	return NULL;
}

sg_err sg_procs_shutdown(struct sg_session *s, int64_t grace_ms, struct sg_cancel *cancel,
			 int *stopped, struct sg_errinfo *err)
{
	const char *args[] = { "proc", "list", "--session", s->session_id, NULL };
	struct stop_queue q = { .s = s, .cancel = cancel };
	pthread_t threads[SG_PROC_STOP_THREADS];
	bool started[SG_PROC_STOP_THREADS] = { false };
	json_t *reply = NULL, *seen = NULL, *rec;
	size_t i, nthreads;
	sg_err rc;

	if (stopped)
		*stopped = 0;
	if (s->procs)
		stop_watcher(s->procs);
	rc = sg_envcall(s, SG_CALL_CTL, args, NULL, 0, &reply, cancel, err);
	/*
	 * The environment is gone (a sandbox stopped or deleted under the
	 * session), and its processes with it: nothing is left to stop here,
	 * and the teardown after this still removes what remains (the local
	 * backend's cgroups kill any survivor on this host).
	 */
	if (rc == SG_E_WORKSPACE_LOST) {
		sg_log_info("the environment is gone, so are its processes: %s", err->msg);
		sg_err_clear(err);
		return SG_OK;
	}
	if (rc)
		return rc;
	q.ids = calloc(json_array_size(json_object_get(reply, "processes")) + 1, sizeof(*q.ids));
	seen = json_object();
	if (!q.ids || !seen) {
		free(q.ids);
		json_decref(seen);
		json_decref(reply);
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	/* Each running process of this session once, whatever the reply repeats. */
	json_array_foreach(json_object_get(reply, "processes"), i, rec) {
		const char *st = json_string_value(json_object_get(rec, "status"));
		const char *id = json_string_value(json_object_get(rec, "id"));

		if (!st || strcmp(st, "running") != 0 || !id || strlen(id) > SG_PROC_ID_MAX ||
		    !owned(s, rec) || json_object_get(seen, id))
			continue;
		json_object_set_new(seen, id, json_true());
		q.ids[q.n++] = id;
	}
	snprintf(q.grace, sizeof(q.grace), "%lld", (long long)grace_ms);
	pthread_mutex_init(&q.lock, NULL);
	/* Stop them at once, so a few stubborn processes cost one grace. */
	nthreads = q.n < SG_PROC_STOP_THREADS ? q.n : SG_PROC_STOP_THREADS;
	for (i = 0; i < nthreads; i++)
		started[i] = pthread_create(&threads[i], NULL, stop_worker, &q) == 0;
	/* Without any thread, this one does the work. */
	if (nthreads && !started[0])
		stop_worker(&q);
	for (i = 0; i < nthreads; i++)
		if (started[i])
			pthread_join(threads[i], NULL);
	pthread_mutex_destroy(&q.lock);
	if (stopped)
		*stopped = (int)q.n;
	free(q.ids);
	json_decref(seen);
	json_decref(reply);
	return sg_cancel_check(cancel) ? sg_err_set(err, SG_E_TIMEOUT,
			"stopping processes did not finish inside the shutdown budget") : SG_OK;
}

/* Interim: the old five, until the host's thirteen replace them. */
sg_err sg_proc_method(struct sg_op *op, json_t **out)
{
	static const struct {
		const char *name;
		sg_err (*run)(struct sg_op *op, json_t **out);
	} ops[] = { { "process/start", proc_start }, { "process/list", proc_list },
		    { "process/get", proc_get }, { "process/read", proc_read },
		    { "process/stop", proc_stop } };

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (strcmp(ops[i].name, op->method) == 0)
			return ops[i].run(op, out);
	*out = NULL;
	return sg_err_set(&op->err, SG_E_UNKNOWN_METHOD, "unknown remote process operation");
}
