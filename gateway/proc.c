/*
 * proc.c - the host's processes: the process methods, their events, and
 * the starts the bash tool and process/start make (protocol section 4).
 *
 * Processes live in the environment: sg-helper's supervisor keeps each
 * one's record (the host's process.Process) and its merged output there,
 * so a reconnecting session finds them and this file holds no process
 * state beyond what events need.  Every method acts on this session's
 * records only: one whose root_thread_id is another session's is refused
 * with the host's sentence.
 *
 * Events: {"method":"process","id":"","data":{"Type","Cause","Process"}}.
 * `started` follows the reply that started the process (op->after); a
 * watcher thread long-polls `proc wait` for this session's records and
 * turns an end it sees into `stopped` or `failed` with the record's
 * terminal_cause; the methods that change a record send `updated`; a
 * stop at cleanup or shutdown sends `cleaned_up`; a recheck whose time
 * has come, `recheck_due` (the watcher's wait marks and answers those).
 * Until a start's reply is out its id is "starting", and an end the
 * watcher sees meanwhile is parked and sent by the after_sent hook, so
 * no event of a process precedes its start.
 */
#include "gateway/session.h"

#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hex.h"
#include "base/limits.h"
#include "base/log.h"

#define WATCH_POLL_MS 30000
#define PROC_READ_DEFAULT (32 * SG_KiB) /* process/read's MaxBytes <= 0 */
#define PROC_RECHECK_MAX_MIN 1440       /* process/recheck's minutes */
#define PROC_OTHER_SESSION "process belongs to another execution session"

struct sg_procs {
	pthread_mutex_t lock;
	/*
	 * id -> {"status": last status seen, "starting": bool, "parked":
	 * [events]} for the processes of this session this connection
	 * follows: those it started, and up to SG_PROC_KNOWN_MAX others seen
	 * running.  An ended one leaves (observe).
	 */
	json_t *known;
	struct sg_cancel stop;
	pthread_t watcher;
	bool watching;
	struct sg_session *s;
	/* host_generation_id: this connection's, on the records it starts. */
	char generation[40];
};

static json_t *event(const char *type, const char *cause, json_t *record)
{
	return json_pack("{s:s, s:s, s:{s:s, s:s, s:O}}", "method", "process", "id", "",
			 "data", "Type", type, "Cause", cause, "Process", record);
}

static const char *rec_str(json_t *rec, const char *key)
{
	const char *v = json_string_value(json_object_get(rec, key));

	return v ? v : "";
}

static bool is_final(const char *st)
{
	return strcmp(st, "stopped") == 0 || strcmp(st, "failed") == 0;
}

/* "proc-" and 8 lowercase hex digits: the only ids this gateway makes. */
static bool id_ours(const char *id)
{
	if (strncmp(id, "proc-", 5) != 0 || strlen(id) != 13)
		return false;
	for (size_t i = 5; i < 13; i++)
		if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
			return false;
	return true;
}

/*
 * A record of this session with an id of the gateway's making; anything
 * else in the environment's table (which its commands can write) is no
 * process of this session.
 */
static bool owned(const struct sg_session *s, json_t *rec)
{
	return json_is_object(rec) && strcmp(rec_str(rec, "root_thread_id"), s->session_id) == 0 &&
	       id_ours(rec_str(rec, "id"));
}

/*
 * Note a record; returns the event its transition calls for (new) or NULL.
 * Called with the lock held.
 *
 * The records come from the environment, which may forge them (and, on a
 * remote backend, the helper that reads them): a record of another
 * session is ignored, and the table follows at most SG_PROC_KNOWN_MAX
 * processes it did not start itself.  An ended process leaves the table:
 * it has no further transition to report.
 */
static json_t *observe(struct sg_procs *p, json_t *rec)
{
	const char *id = json_string_value(json_object_get(rec, "id"));
	const char *st = rec_str(rec, "status");
	json_t *k = id ? json_object_get(p->known, id) : NULL;
	const char *prev = json_string_value(json_object_get(k, "status"));
	json_t *ev = NULL;
	bool starting;

	if (!id || !st[0] || !owned(p->s, rec))
		return NULL;
	if (!k) {
		if (is_final(st) || json_object_size(p->known) >= SG_PROC_KNOWN_MAX)
			return NULL;
		k = json_object();
		json_object_set_new(p->known, id, k);
	}
	if (prev && !is_final(prev) && is_final(st))
		ev = event(st, rec_str(rec, "terminal_cause"), rec);
	json_object_set_new(k, "status", json_string(st));
	starting = json_is_true(json_object_get(k, "starting"));
	if (ev && starting) {
		json_object_set_new(k, "parked", ev);
		ev = NULL;
	}
	if (is_final(st) && !starting)
		json_object_del(p->known, id);
	return ev;
}

/* Each record of reply[key] through observe: the events their transitions call for. */
static void observe_all(struct sg_procs *p, json_t *reply, const char *key)
{
	json_t *rec;
	size_t i;

	json_array_foreach(json_object_get(reply, key), i, rec) {
		json_t *ev;

		pthread_mutex_lock(&p->lock);
		ev = observe(p, rec);
		pthread_mutex_unlock(&p->lock);
		if (ev)
			sg_wire_send(p->s->wire, ev);
	}
}

/*
 * The watcher: `proc wait` long-polls this session's records for changes
 * and, with --recheck-due, marks and answers the live ones whose recheck
 * has come (sg-helper's `proc wait` in helper.h).  So one call in the
 * environment per wake serves both, and no `proc list` is needed to find
 * a recheck that fell due: a due record is seen at the wait after its
 * time, within WATCH_POLL_MS.
 */
static void *watch_main(void *arg)
{
	struct sg_procs *p = arg;
	struct sg_session *s = p->s;
	long long stamp = 0;

	while (!sg_cancel_check(&p->stop)) {
		char since[32], tmo[32];
		const char *args[] = { "proc", "wait", "--session", s->session_id,
				       "--since", since, "--timeout-ms", tmo, "--recheck-due",
				       NULL };
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
		observe_all(p, reply, "changed");
		/* The environment writes the records: only this session's are announced. */
		json_array_foreach(json_object_get(reply, "due"), i, rec) {
			json_t *ev = owned(s, rec) && strcmp(rec_str(rec, "status"), "running") == 0
					     ? event("recheck_due", "", rec) : NULL;

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
	unsigned char rnd[8];

	if (!p || !(p->known = json_object()) || sg_cancel_init(&p->stop) ||
	    RAND_bytes(rnd, sizeof(rnd)) != 1) {
		if (p)
			json_decref(p->known);
		free(p);
		return SG_E_INTERNAL;
	}
	memcpy(p->generation, "host-", 5);
	sg_hex(rnd, sizeof(rnd), p->generation + 5);
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

/* After a start's reply: anything parked for the id follows its `started`. */
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
		if (is_final(rec_str(k, "status")))
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
 * During a shutdown it is also clipped to the shutdown's deadline
 * (cancel.h): a remote that never answers must not keep the stop's ssh
 * client alive past the gateway.  With no time left it is not tried; the
 * shutdown's own stop of every process, or the end of the environment's
 * connection (which ends a tied supervisor), is all that is left then.
 */
static void stop_unanswered(struct sg_session *s, const char *id, sg_err why)
{
	const char *stop[] = { "proc", "stop", "--id", id, "--grace-ms", "0", NULL };
	struct sg_errinfo err = { 0 };
	json_t *final = NULL;
	int64_t ms = sg_cancel_quit_clip(SG_PROC_SPAWN_MS);
	sg_err rc = ms > 0 ? sg_envcall_within(s, SG_CALL_CTL, stop, ms, &final, NULL, &err)
			   : sg_err_set(&err, SG_E_TIMEOUT, "the shutdown's deadline has passed");

	if (rc && rc != SG_E_NOT_FOUND)
		sg_log_warn("process %s (its start %s) may still run: stopping it failed: %s", id,
			    why ? "failed" : "was cancelled", err.msg);
	json_decref(final);
}

static sg_err oom(struct sg_op *op)
{
	return sg_err_set(&op->err, SG_E_INTERNAL, "out of memory");
}

/* The `proc spawn` command line for st, with id and the resolved cwd. */
static sg_err spawn_args(struct sg_op *op, const struct sg_proc_start *st, const char *id,
			 const char *cwd, struct sg_strv *av)
{
	struct sg_session *s = op->s;
	const char *actor = st->actor && st->actor[0] ? st->actor : s->session_id;
	bool main_agent = strcmp(actor, s->session_id) == 0;
	json_t *e;
	size_t i;

	if (sg_strv_addv(av, (const char *[]){ "proc", "spawn", "--id", id,
						"--session", s->session_id,
						"--cwd", cwd, "--root", s->root,
						"--owner-kind", main_agent ? "main_agent" : "subagent",
						"--owner-id", actor,
						"--generation", s->procs->generation,
						"--lifecycle", st->lifecycle ? st->lifecycle : "managed",
						NULL }) ||
	    (st->operation_id && sg_strv_addv(av, (const char *[]){ "--op", st->operation_id,
								    NULL })) ||
	    (st->timeout_ms > 0 && (sg_strv_add(av, "--timeout-ms") ||
				    sg_strv_addf(av, "%lld", (long long)st->timeout_ms))) ||
	    (st->wait_ms >= 0 && (sg_strv_add(av, "--wait-ms") ||
				  sg_strv_addf(av, "%lld", (long long)st->wait_ms) ||
				  sg_strv_add(av, "--revision"))) ||
	    (st->tty && sg_strv_add(av, "--tty")) || (st->input && sg_strv_add(av, "--input")) ||
	    (st->login && sg_strv_add(av, "--login")) ||
	    (st->git_attribution && sg_strv_add(av, "--git-attribution")))
		return oom(op);
	if (st->mode != SG_CONFINE_NONE &&
	    (sg_strv_addv(av, (const char *[]){ "--confine", sg_confine_word(st->mode), NULL }) ||
	     sg_strv_add(av, "--allow-write") || sg_strv_addf(av, "%s/tmp", s->env->ctl_dir) ||
	     sg_strv_add(av, "--allow-write") || sg_strv_addf(av, "%s/home", s->env->ctl_dir)))
		return oom(op);
	/*
	 * Tools that hard-code /tmp may write it in standard mode where it is
	 * the environment's own (sg_env.own_tmp), as every confined step may
	 * (sg_envcall_confine); where it is the host's, they may not.
	 */
	if (st->mode == SG_CONFINE_STANDARD && s->env->own_tmp &&
	    sg_strv_addv(av, (const char *[]){ "--allow-write", "/tmp", NULL }))
		return oom(op);
	if (st->command)
		return sg_strv_addv(av, (const char *[]){ "--command", st->command, NULL })
			       ? oom(op) : SG_OK;
	if (sg_strv_add(av, "--"))
		return oom(op);
	json_array_foreach(st->argv, i, e)
		if (sg_strv_add(av, json_string_value(e)))
			return oom(op);
	return SG_OK;
}

/*
 * Where and with what a start runs, and its name: the working directory
 * (*cwd, new), the command's environment (envp) and a new id ("proc-"
 * and 8 hex digits, into id of 16 bytes).  The mode must be one the
 * environment can confine.
 */
static sg_err spawn_place(struct sg_op *op, const struct sg_proc_start *st, char **cwd,
			  struct sg_strv *envp, char *id)
{
	struct sg_session *s = op->s;
	unsigned char rnd[4];
	sg_err rc = sg_envcall_can_confine(s, st->mode, &op->err);

	/*
	 * Without a cwd the root is the cwd: no round trip to resolve it.
	 * Unconfined, a cwd is taken as it is (relative to root), as the
	 * host's unconfined boundary takes any path.
	 */
	if (!rc && st->cwd && st->cwd[0] && st->mode != SG_CONFINE_NONE)
		rc = sg_envcall_resolve(s, st->cwd, false, cwd, &op->cancel, &op->err);
	else if (!rc && !(*cwd = strdup(st->cwd && st->cwd[0] ? st->cwd : s->root)))
		rc = oom(op);
	if (!rc)
		rc = sg_envcall_command_env(s, st->env, envp, &op->err);
	if (rc)
		return rc;
	if (RAND_bytes(rnd, sizeof(rnd)) != 1)
		return sg_err_set(&op->err, SG_E_INTERNAL, "no randomness for an id");
	memcpy(id, "proc-", 5);
	sg_hex(rnd, sizeof(rnd), id + 5);
	return SG_OK;
}

sg_err sg_proc_spawn(struct sg_op *op, const struct sg_proc_start *st, json_t **reply)
{
	struct sg_session *s = op->s;
	struct sg_procs *p = s->procs;
	struct sg_strv av = SG_STRV_INIT, envp = SG_STRV_INIT;
	bool fg = st->wait_ms >= 0;
	char id[16], *cwd = NULL;
	const char *status;
	json_t *rec;
	sg_err rc;

	*reply = NULL;
	rc = spawn_place(op, st, &cwd, &envp, id);
	if (!rc)
		rc = spawn_args(op, st, id, cwd, &av);
	if (rc)
		goto out;
	/* The id is "starting" before the spawn so the watcher parks its end. */
	pthread_mutex_lock(&p->lock);
	json_object_set_new(p->known, id, json_pack("{s:s, s:b}", "status", "running",
						      "starting", 1));
	pthread_mutex_unlock(&p->lock);
	/*
	 * A background spawn is not cancelled midway: killing it could leave
	 * a supervisor nobody knows about.  It returns within moments; a
	 * cancel that arrived meanwhile stops the child it made.  A
	 * foreground run is cancelled (it may wait an hour), and its
	 * supervisor stopped the same way.
	 */
	rc = sg_envcall_spawn_for(s, sg_strv_get(&av), sg_strv_get(&envp),
				  fg ? st->wait_ms : 0, reply, fg ? &op->cancel : NULL,
				  &op->err);
	/* The reply comes from inside the environment: a record without a
	 * status is no record. */
	rec = json_object_get(*reply, "process");
	status = json_string_value(json_object_get(rec, "status"));
	if (!rc && (!status || !owned(s, rec)))
		rc = sg_err_set(&op->err, SG_E_INTERNAL,
				"the environment helper's spawn reply has no record of this session");
	if (rc != SG_E_WORKSPACE_LOST && (rc || sg_cancel_check(&op->cancel))) {
		stop_unanswered(s, id, rc);
		if (!rc)
			rc = sg_err_set(&op->err, SG_E_CANCELLED,
					"the command was cancelled; process %s was stopped", id);
	}
	if (rc || (fg && json_is_true(json_object_get(*reply, "ended")))) {
		pthread_mutex_lock(&p->lock);
		json_object_del(p->known, id);
		pthread_mutex_unlock(&p->lock);
		goto out;
	}
	/* A start that failed is announced as the host's manager does: failed. */
	if (is_final(status))
		sg_op_after(op, event(status, rec_str(rec, "terminal_cause"), rec));
	else
		sg_op_after(op, event("started", "", rec));
	pthread_mutex_lock(&p->lock);
	json_object_set_new(json_object_get(p->known, id), "status", json_string(status));
	pthread_mutex_unlock(&p->lock);
	op->after_id = strdup(id);
	op->after_sent = start_sent;
out:
	if (rc) {
		json_decref(*reply);
		*reply = NULL;
	}
	free(cwd);
	sg_strv_release(&av);
	sg_strv_release(&envp);
	return rc;
}

/* ---- the methods ------------------------------------------------------- */

/* Run `sg-helper proc ...` for op; *reply new. */
static sg_err helper(struct sg_op *op, const char *const *args, const void *in, size_t inlen,
		     json_t **reply)
{
	return sg_envcall(op->s, SG_CALL_CTL, args, in, inlen, reply, &op->cancel, &op->err);
}

/* `id` of the request's data, required. */
static sg_err arg_id(struct sg_op *op, json_t *d, const char **id)
{
	sg_err rc = sg_arg_str(d, "id", true, id, &op->err);

	if (!rc && !(*id)[0])
		rc = sg_err_set(&op->err, SG_E_INVALID_ARGUMENT, "process id is required");
	return rc;
}

/* The helper reply's record, when it is this session's (*rec new). */
static sg_err own_record(struct sg_op *op, json_t *reply, const char *key, json_t **rec)
{
	json_t *r = json_object_get(reply, key);

	*rec = NULL;
	if (!json_is_object(r))
		return sg_err_set(&op->err, SG_E_INTERNAL, "the helper's reply has no record");
	if (!owned(op->s, r))
		return sg_err_set(&op->err, SG_E_PERMISSION, PROC_OTHER_SESSION);
	*rec = json_incref(r);
	return SG_OK;
}

/* The record of id, refused unless it is this session's; *reply: the helper's. */
static sg_err get_own(struct sg_op *op, const char *id, json_t **rec, json_t **reply)
{
	const char *args[] = { "proc", "get", "--id", id, NULL };
	json_t *r = NULL;
	sg_err rc = helper(op, args, NULL, 0, &r);

	*rec = NULL;
	if (!rc)
		rc = own_record(op, r, "process", rec);
	if (reply && !rc)
		*reply = json_incref(r);
	json_decref(r);
	return rc;
}

static sg_err m_get(struct sg_op *op, json_t *d, json_t **out)
{
	const char *id = NULL;
	sg_err rc = arg_id(op, d, &id);

	return rc ? rc : get_own(op, id, out, NULL);
}

static sg_err m_list(struct sg_op *op, json_t *d, json_t **out)
{
	const char *args[] = { "proc", "list", "--session", op->s->session_id, NULL };
	json_t *reply = NULL, *rec;
	size_t i;
	sg_err rc = helper(op, args, NULL, 0, &reply);

	(void)d;
	*out = NULL;
	if (rc)
		return rc;
	*out = json_array();
	json_array_foreach(json_object_get(reply, "processes"), i, rec)
		if (owned(op->s, rec))
			json_array_append(*out, rec);
	json_decref(reply);
	return *out ? SG_OK : oom(op);
}

/* An integer of the options object, Go-cased; absent or null: def. */
static sg_err opt_int(struct sg_op *op, json_t *o, const char *key, int64_t def, int64_t *v)
{
	json_t *x = json_object_get(o, key);

	*v = def;
	if (!x || json_is_null(x))
		return SG_OK;
	if (!json_is_integer(x) && !json_is_real(x))
		return sg_err_set(&op->err, SG_E_INVALID_ARGUMENT, "options.%s must be a number", key);
	*v = json_is_integer(x) ? json_integer_value(x) : (int64_t)json_real_value(x);
	return SG_OK;
}

static sg_err m_read(struct sg_op *op, json_t *d, json_t **out)
{
	json_t *o = json_object_get(d, "options"), *reply = NULL, *rec = NULL;
	const char *id = NULL;
	int64_t max, offset, wait, dwell, start = sg_now_ns();
	bool tail;
	char smax[24], soff[24], swait[24], sdwell[24];
	sg_err rc;

	*out = NULL;
	if (o && !json_is_object(o) && !json_is_null(o))
		return sg_err_set(&op->err, SG_E_INVALID_ARGUMENT, "options must be an object");
	tail = !json_object_get(o, "OffsetBytes") || json_is_null(json_object_get(o, "OffsetBytes"));
	rc = arg_id(op, d, &id);
	if (!rc)
		rc = opt_int(op, o, "MaxBytes", 0, &max);
	if (!rc)
		rc = opt_int(op, o, "OffsetBytes", 0, &offset);
	if (!rc)
		rc = opt_int(op, o, "Wait", 0, &wait);
	if (!rc)
		rc = opt_int(op, o, "MinDwell", 0, &dwell);
	if (rc)
		return rc;
	if (max <= 0)
		max = PROC_READ_DEFAULT;
	if (max > (int64_t)SG_READ_CAP)
		max = (int64_t)SG_READ_CAP;
	snprintf(smax, sizeof(smax), "%lld", (long long)max);
	snprintf(soff, sizeof(soff), "%lld", (long long)(offset > 0 ? offset : 0));
	snprintf(swait, sizeof(swait), "%lld", (long long)(wait > 0 ? wait : 0));
	snprintf(sdwell, sizeof(sdwell), "%lld", (long long)(dwell > 0 ? dwell : 0));
	{
		const char *args[16] = { "proc", "read", "--id", id, "--max", smax,
					 "--wait-ns", swait, "--min-dwell-ns", sdwell };
		size_t n = 10;

		if (tail) {
			args[n++] = "--tail";
		} else {
			args[n++] = "--offset";
			args[n++] = soff;
		}
		args[n] = NULL;
		rc = helper(op, args, NULL, 0, &reply);
	}
	if (!rc)
		rc = own_record(op, reply, "Process", &rec);
	json_decref(rec);
	if (rc) {
		json_decref(reply);
		return rc;
	}
	json_object_del(reply, "ok");
	json_object_set_new(reply, "Duration", json_integer(sg_now_ns() - start));
	*out = reply;
	return SG_OK;
}

static sg_err m_write(struct sg_op *op, json_t *d, json_t **out)
{
	const char *id = NULL, *input = NULL;
	json_t *rec = NULL, *reply = NULL;
	sg_err rc = arg_id(op, d, &id);

	*out = NULL;
	if (!rc)
		rc = sg_arg_str(d, "input", false, &input, &op->err);
	if (!rc)
		rc = get_own(op, id, &rec, NULL);
	json_decref(rec);
	if (!rc) {
		const char *args[] = { "proc", "write", "--id", id, NULL };
		json_t *in = json_object_get(d, "input");

		rc = helper(op, args, input, input ? json_string_length(in) : 0, &reply);
	}
	if (!rc)
		rc = own_record(op, reply, "process", out);
	json_decref(reply);
	return rc;
}

static sg_err m_resize(struct sg_op *op, json_t *d, json_t **out)
{
	const char *id = NULL;
	int64_t cols, rows;
	char scols[24], srows[24];
	json_t *rec = NULL, *reply = NULL;
	sg_err rc = arg_id(op, d, &id);

	*out = NULL;
	if (!rc)
		rc = sg_arg_int(d, "cols", 0, 0, UINT16_MAX, &cols, &op->err);
	if (!rc)
		rc = sg_arg_int(d, "rows", 0, 0, UINT16_MAX, &rows, &op->err);
	if (!rc)
		rc = get_own(op, id, &rec, NULL);
	json_decref(rec);
	if (rc)
		return rc;
	snprintf(scols, sizeof(scols), "%lld", (long long)cols);
	snprintf(srows, sizeof(srows), "%lld", (long long)rows);
	{
		const char *args[] = { "proc", "resize", "--id", id, "--cols", scols,
				       "--rows", srows, NULL };

		rc = helper(op, args, NULL, 0, &reply);
	}
	if (!rc)
		rc = own_record(op, reply, "process", out);
	json_decref(reply);
	return rc;
}

/* Stop id (this session's): TERM to its group, grace, KILL; *out the final record. */
static sg_err stop_own(struct sg_op *op, const char *id, json_t **out)
{
	char grace[24];
	const char *args[] = { "proc", "stop", "--id", id, "--grace-ms", grace, NULL };
	json_t *rec = NULL, *reply = NULL;
	sg_err rc = get_own(op, id, &rec, NULL);

	*out = NULL;
	json_decref(rec);
	if (rc)
		return rc;
	snprintf(grace, sizeof(grace), "%d", SG_PROC_GRACE_MS);
	rc = helper(op, args, NULL, 0, &reply);
	if (!rc)
		rc = own_record(op, reply, "process", out);
	json_decref(reply);
	return rc;
}

static sg_err m_stop(struct sg_op *op, json_t *d, json_t **out)
{
	const char *id = NULL;
	sg_err rc = arg_id(op, d, &id);

	*out = NULL;
	return rc ? rc : stop_own(op, id, out);
}

static sg_err m_input_available(struct sg_op *op, json_t *d, json_t **out)
{
	const char *id = NULL;
	json_t *rec = NULL, *reply = NULL;
	sg_err rc = arg_id(op, d, &id);

	*out = NULL;
	if (!rc)
		rc = get_own(op, id, &rec, &reply);
	if (!rc)
		*out = json_boolean(json_is_true(json_object_get(reply, "input_available")));
	json_decref(rec);
	json_decref(reply);
	return rc;
}

/* A natural end in resume mode that no consumer has taken yet. */
static bool completion_pending(json_t *rec)
{
	return is_final(rec_str(rec, "status")) &&
	       strcmp(rec_str(rec, "terminal_cause"), "natural_exit") == 0 &&
	       strcmp(rec_str(rec, "completion_mode"), "resume") == 0 &&
	       !rec_str(rec, "completion_delivered_at")[0];
}

static sg_err m_completion_pending(struct sg_op *op, json_t *d, json_t **out)
{
	const char *id = NULL;
	json_t *rec = NULL;
	sg_err rc = arg_id(op, d, &id);

	*out = NULL;
	if (!rc)
		rc = get_own(op, id, &rec, NULL);
	if (!rc)
		*out = json_boolean(completion_pending(rec));
	json_decref(rec);
	return rc;
}

/*
 * `proc update --id ID` with opts (after the id) for this session's
 * record; *out the changed record, and an `updated` event follows the
 * reply.
 */
static sg_err update_own(struct sg_op *op, const char *id, const char *const *opts,
			 json_t **out)
{
	const char *args[12] = { "proc", "update", "--id", id };
	json_t *rec = NULL, *reply = NULL;
	size_t n = 4;
	sg_err rc = get_own(op, id, &rec, NULL);

	*out = NULL;
	json_decref(rec);
	if (rc)
		return rc;
	for (size_t i = 0; opts[i] && n + 1 < sizeof(args) / sizeof(args[0]); i++)
		args[n++] = opts[i];
	args[n] = NULL;
	rc = helper(op, args, NULL, 0, &reply);
	if (!rc)
		rc = own_record(op, reply, "process", out);
	if (!rc)
		sg_op_after(op, event("updated", "", *out));
	json_decref(reply);
	return rc;
}

static sg_err m_completion_delivered(struct sg_op *op, json_t *d, json_t **out)
{
	const char *id = NULL, *consumer = NULL;
	sg_err rc = arg_id(op, d, &id);

	*out = NULL;
	if (!rc)
		rc = sg_arg_str(d, "consumer", true, &consumer, &op->err);
	if (!rc && !consumer[0])
		rc = sg_err_set(&op->err, SG_E_INVALID_ARGUMENT, "consumer is required");
	return rc ? rc : update_own(op, id, (const char *[]){ "--deliver", consumer, NULL }, out);
}

static sg_err m_recheck(struct sg_op *op, json_t *d, json_t **out)
{
	const char *id = NULL;
	int64_t minutes;
	char sm[24];
	sg_err rc = arg_id(op, d, &id);

	*out = NULL;
	if (!rc)
		rc = sg_arg_int(d, "minutes", 0, 0, PROC_RECHECK_MAX_MIN, &minutes, &op->err);
	if (rc)
		return rc;
	snprintf(sm, sizeof(sm), "%lld", (long long)minutes);
	return update_own(op, id, (const char *[]){ "--recheck-minutes", sm, NULL }, out);
}

static sg_err m_completion_mode(struct sg_op *op, json_t *d, json_t **out)
{
	const char *id = NULL, *mode = NULL;
	sg_err rc = arg_id(op, d, &id);

	*out = NULL;
	if (!rc)
		rc = sg_arg_str(d, "mode", true, &mode, &op->err);
	if (!rc && strcmp(mode, "resume") != 0 && strcmp(mode, "detached") != 0)
		rc = sg_err_set(&op->err, SG_E_INVALID_ARGUMENT,
				"completion mode must be resume or detached");
	return rc ? rc : update_own(op, id, (const char *[]){ "--mode", mode, NULL }, out);
}

static sg_err m_recheck_delivered(struct sg_op *op, json_t *d, json_t **out)
{
	const char *id = NULL;
	sg_err rc = arg_id(op, d, &id);

	*out = NULL;
	return rc ? rc : update_own(op, id, (const char *[]){ "--recheck-delivered", NULL }, out);
}

/*
 * process/cleanup: as the host's worker, stop this session's running
 * processes of lifecycle `session` (process/start's); the managed ones
 * (bash's) outlive it.  Each stopped one is announced `cleaned_up`.
 */
static sg_err m_cleanup(struct sg_op *op, json_t *d, json_t **out)
{
	json_t *list = NULL, *cleaned = json_array(), *rec;
	size_t i;
	sg_err rc = m_list(op, d, &list);

	*out = NULL;
	if (!rc && !cleaned)
		rc = oom(op);
	json_array_foreach(list, i, rec) {
		json_t *final = NULL;

		if (rc)
			break;
		if (is_final(rec_str(rec, "status")) ||
		    strcmp(rec_str(rec, "lifecycle"), "session") != 0)
			continue;
		rc = stop_own(op, rec_str(rec, "id"), &final);
		if (!rc) {
			json_array_append(cleaned, final);
			sg_op_after(op, event("cleaned_up", "", final));
		}
		json_decref(final);
	}
	if (!rc)
		*out = json_pack("{s:O}", "Cleaned", cleaned);
	json_decref(cleaned);
	json_decref(list);
	return rc || *out ? rc : oom(op);
}

/* process/start (version 4): a managed start of the host's own. */
static sg_err m_start(struct sg_op *op, json_t *d, json_t **out)
{
	struct sg_proc_start st = { .wait_ms = -1, .lifecycle = "session", .input = true };
	json_t *reply = NULL;
	sg_err rc;

	*out = NULL;
	rc = sg_arg_str(d, "command", false, &st.command, &op->err);
	if (!rc)
		rc = sg_arg_str(d, "cwd", false, &st.cwd, &op->err);
	if (!rc)
		rc = sg_arg_str(d, "operation_id", false, &st.operation_id, &op->err);
	if (!rc)
		rc = sg_arg_str(d, "actor", false, &st.actor, &op->err);
	if (!rc)
		rc = sg_arg_strings(d, "argv", &st.argv, &op->err);
	if (!rc)
		rc = sg_arg_env(d, "env", &st.env, &op->err);
	if (!rc)
		rc = sg_arg_int(d, "timeout_ms", 0, 0, INT64_C(31536000000), &st.timeout_ms,
				&op->err);
	if (!rc)
		rc = sg_arg_mode(d, &st.mode, &op->err);
	if (rc)
		return rc;
	if (!st.command == !st.argv || (st.argv && json_array_size(st.argv) == 0) ||
	    (st.command && !st.command[0]))
		return sg_err_set(&op->err, SG_E_INVALID_ARGUMENT,
				  "give either `command` (a shell string) or `argv` (a non-empty array)");
	st.login = st.command != NULL;
	rc = sg_proc_spawn(op, &st, &reply);
	if (!rc)
		*out = json_incref(json_object_get(reply, "process"));
	json_decref(reply);
	return rc;
}

static const struct {
	const char *name;
	sg_err (*run)(struct sg_op *op, json_t *d, json_t **out);
} methods[] = {
	{ "process/start", m_start },
	{ "process/list", m_list },
	{ "process/get", m_get },
	{ "process/read", m_read },
	{ "process/write", m_write },
	{ "process/resize", m_resize },
	{ "process/stop", m_stop },
	{ "process/input_available", m_input_available },
	{ "process/completion_pending", m_completion_pending },
	{ "process/completion_delivered", m_completion_delivered },
	{ "process/recheck", m_recheck },
	{ "process/completion_mode", m_completion_mode },
	{ "process/recheck_delivered", m_recheck_delivered },
	{ "process/cleanup", m_cleanup },
};

sg_err sg_proc_run(struct sg_op *op, const char *method, json_t *data, json_t **out)
{
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (strcmp(methods[i].name, method) == 0)
			return methods[i].run(op, data, out);
	*out = NULL;
	return sg_err_set(&op->err, SG_E_UNKNOWN_METHOD, "unknown remote process operation");
}

sg_err sg_proc_method(struct sg_op *op, json_t **out)
{
	return sg_proc_run(op, op->method, op->data, out);
}

/* ---- shutdown -------------------------------------------------------------- */

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
		json_t *reply = NULL, *rec;

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
		rec = json_object_get(reply, "process");
		if (owned(q->s, rec))
			sg_wire_send(q->s->wire, event("cleaned_up", "", rec));
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
	/* Never prepared (adapter.h): sg-helper, which starts them all, is not there. */
	if (rc && atomic_load(&s->env->setup_failed)) {
		sg_log_info("the environment was never prepared, so it runs no process: %s",
			    err->msg);
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
	/*
	 * Each live process of this session once, whatever the reply
	 * repeats: managed ones too (version 4: the session stops every
	 * process it still controls).
	 */
	json_array_foreach(json_object_get(reply, "processes"), i, rec) {
		const char *id = json_string_value(json_object_get(rec, "id"));

		if (is_final(rec_str(rec, "status")) || !id || strlen(id) > SG_PROC_ID_MAX ||
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
