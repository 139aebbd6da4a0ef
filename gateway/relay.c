/*
 * relay.c - the `command` backend: one external protocol-v4 peer behind
 * this gateway (relay.h).
 *
 * Threads: the worker that runs a relayed request sends it and waits on
 * its own call; the relay's reader thread reads the peer's output, hands
 * each reply to its call and forwards events to the host; a reaper thread
 * waits for the peer's exit.  One lock guards the calls and the peer's
 * state; none is held across a read or a write of a descriptor except the
 * wire's queue, which never blocks.
 */
#define _GNU_SOURCE /* pipe2, dup3 */
#include "gateway/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/json.h"
#include "base/buf.h"
#include "base/fsutil.h"
#include "base/limits.h"
#include "base/log.h"
#include "base/strv.h"
#include "gateway/check.h"
#include "gateway/mode.h"
#include "gateway/pool.h"
#include "gateway/registry.h"
#include "gateway/wire.h"

/* A relayed request waiting for its terminal reply. */
struct call {
	struct call *next;
	json_t *id;       /* the host's id, borrowed from the request */
	json_t *reply;    /* the reply frame once it came (own ref) */
	pthread_cond_t cond;
};

struct sg_relay {
	struct sg_session *s; /* borrowed */
	pid_t pid;
	int to_fd, from_fd;   /* the peer's stdin and stdout, our ends */
	struct sg_wire *wire;
	pthread_t reader, reaper;
	bool have_reader, have_reaper;

	pthread_mutex_t lock;
	pthread_cond_t changed; /* exited, gone or handed moved */
	struct call *calls;
	bool input_closed;      /* the peer has seen EOF */
	bool gone;              /* no reply will come any more */
	bool exited, killed;
	int status;             /* waitpid's, once exited */
	char why[SG_ERR_MSG];   /* why it is gone */
	uint64_t delivered, handed;

	json_t *methods;        /* the peer's, from its initialize reply */
	char *session;          /* the bound session, once the peer accepted it */
	bool dropped_event;     /* a foreign event was said on stderr already */
	bool dropped_other;     /* so was a message of another method (reader's) */
	size_t unread;          /* event bytes the host may not have read (reader's) */
	char *token;
	char *argv0;
	int64_t grace_ms;
	int64_t cancel_ms;      /* SG_RELAY_CANCEL_MS, shorter in tests */
};

/* ---- the peer's process ---------------------------------------------- */

/* The PATH given to a peer when its profile's `env` names none. */
#define PEER_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/*
 * argv[0] as execve needs it: a name without a slash is looked up in the
 * peer's own PATH (not sandgate's), before the fork, since the child of a
 * threaded process may only make async-signal-safe calls.
 */
static char *find_program(const char *name, const char *path)
{
	char buf[PATH_MAX];
	const char *p = path;

	if (strchr(name, '/'))
		return strdup(name);
	while (p && *p) {
		size_t n = strcspn(p, ":");
		int len = snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, p, name);

		if (n && len > 0 && (size_t)len < sizeof(buf) && access(buf, X_OK) == 0)
			return strdup(buf);
		p += n + (p[n] == ':');
	}
	return NULL;
}

/* The peer's environment: exactly the profile's `env`, plus PATH. */
static sg_err peer_env(json_t *env, struct sg_strv *out, const char **path)
{
	const char *k;
	json_t *v;
	sg_err rc = SG_OK;

	*path = PEER_PATH;
	json_object_foreach(env, k, v) {
		if (strcmp(k, "PATH") == 0)
			*path = json_string_value(v);
		if (!rc)
			rc = sg_strv_addf(out, "%s=%s", k, json_string_value(v));
	}
	if (!rc && !json_object_get(env, "PATH"))
		rc = sg_strv_add(out, "PATH=" PEER_PATH);
	return rc;
}

static void *reaper_main(void *arg)
{
	struct sg_relay *r = arg;
	int st = 0;

	while (waitpid(r->pid, &st, 0) < 0 && errno == EINTR)
		;
	pthread_mutex_lock(&r->lock);
	r->exited = true;
	r->status = st;
	pthread_cond_broadcast(&r->changed);
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* In the child: only async-signal-safe calls until execve. */
static void child(int in, int out, int report, const char *prog,
		  char *const *argv, char *const *envp)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigset_t none;
	int e;

	/* Ignored signals survive execve: the peer is given the defaults. */
	sigaction(SIGPIPE, &dfl, NULL);
	sigaction(SIGTERM, &dfl, NULL);
	sigaction(SIGINT, &dfl, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0)
		goto fail;
	/*
	 * Nothing sandgate holds reaches the peer but its stdin, stdout and
	 * stderr: a descriptor sandgate inherited without close-on-exec (a
	 * host's socket, a credential's pipe) is sandgate's own.  Only the
	 * report pipe stays, and it closes at execve.
	 */
	sg_close_from(3, report);
	execve(prog, argv, envp);
fail:
	e = errno;
	if (write(report, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(127);
}

/* Start the peer with pipes on its stdin and stdout; stderr is ours. */
static sg_err spawn(struct sg_relay *r, const struct sg_profile *p, struct sg_errinfo *err)
{
	json_t *cmd = json_object_get(p->raw, "command"), *v;
	struct sg_strv argv = SG_STRV_INIT, envp = SG_STRV_INIT;
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, rep[2] = { -1, -1 };
	const char *path = NULL;
	char *prog = NULL;
	size_t i;
	int e = 0;
	ssize_t n;
	sg_err rc = SG_OK;

	json_array_foreach(cmd, i, v)
		if (!rc)
			rc = sg_strv_add(&argv, json_string_value(v));
	if (!rc)
		rc = peer_env(json_object_get(p->raw, "env"), &envp, &path);
	if (rc) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	r->argv0 = strdup(sg_strv_get(&argv)[0]);
	prog = find_program(sg_strv_get(&argv)[0], path);
	if (!prog) {
		rc = sg_err_set(err, SG_E_UNAVAILABLE,
				"profile \"%s\": the peer %s is not found in its PATH",
				p->name, sg_strv_get(&argv)[0]);
		goto out;
	}
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(rep, O_CLOEXEC)) {
		rc = sg_err_set(err, SG_E_INTERNAL, "pipe: %s", strerror(errno));
		goto out;
	}
	r->pid = fork();
	if (r->pid < 0) {
		rc = sg_err_set(err, SG_E_UNAVAILABLE, "fork: %s", strerror(errno));
		goto out;
	}
	if (r->pid == 0)
		child(in[0], out[1], rep[1], prog, (char *const *)sg_strv_get(&argv),
		      (char *const *)sg_strv_get(&envp));
	close(rep[1]);
	rep[1] = -1;
	/* The report pipe closes at execve (O_CLOEXEC), or carries errno. */
	while ((n = read(rep[0], &e, sizeof(e))) < 0 && errno == EINTR)
		;
	if (pthread_create(&r->reaper, NULL, reaper_main, r) == 0)
		r->have_reaper = true;
	if (n == (ssize_t)sizeof(e)) {
		rc = sg_err_set(err, SG_E_UNAVAILABLE, "profile \"%s\": cannot start the peer %s: %s",
				p->name, prog, strerror(e));
		goto out;
	}
	r->to_fd = in[1];
	r->from_fd = out[0];
	in[1] = out[0] = -1;
	sg_log_info("started the peer %s (pid %d)", prog, (int)r->pid);
out:
	for (int k = 0; k < 2; k++) {
		if (in[k] >= 0)
			close(in[k]);
		if (out[k] >= 0)
			close(out[k]);
		if (rep[k] >= 0)
			close(rep[k]);
	}
	free(prog);
	sg_strv_release(&argv);
	/* The values may be credentials the operator listed. */
	sg_strv_release(&envp);
	return rc;
}

/* ---- the peer's state ------------------------------------------------ */

/* Caller holds the lock.  No reply will come any more: wake every call. */
static void set_gone(struct sg_relay *r, const char *why)
{
	if (r->gone)
		return;
	r->gone = true;
	/* Cut to fit: the sentence ends up in an error reply. */
	snprintf(r->why, sizeof(r->why), "%.*s", (int)sizeof(r->why) - 1, why);
	for (struct call *c = r->calls; c; c = c->next)
		pthread_cond_signal(&c->cond);
	pthread_cond_broadcast(&r->changed);
	/*
	 * Never replaced, so the connection ends with its peer: the calls
	 * still pending answer `unavailable` while shutdown drains them.
	 */
	sg_log_info("%s; ending the connection", r->why);
	sg_wire_stop(r->s->wire);
}

/* Close the peer for good: kill it (unless it was reaped) and fail what waits. */
static void close_peer(struct sg_relay *r, const char *why)
{
	pthread_mutex_lock(&r->lock);
	if (r->pid > 0 && !r->exited) {
		kill(r->pid, SIGKILL);
		r->killed = true;
	}
	set_gone(r, why);
	pthread_mutex_unlock(&r->lock);
}

/* Wait up to ms for the reaper, lock held; true once the peer exited. */
static bool await_exit(struct sg_relay *r, int64_t ms, const struct sg_cancel *stop)
{
	int64_t until = sg_now_ms() + ms;

	while (!r->exited && r->have_reaper && sg_now_ms() < until && !sg_cancel_check(stop)) {
		struct timespec ts = sg_time_after(CLOCK_REALTIME, 20);

		pthread_cond_timedwait(&r->changed, &r->lock, &ts);
	}
	return r->exited;
}

/* How the peer ended, in words, lock held. */
static void describe_exit(const struct sg_relay *r, char *buf, size_t n)
{
	if (!r->exited)
		snprintf(buf, n, "still running");
	else if (WIFSIGNALED(r->status))
		snprintf(buf, n, "killed by signal %d", WTERMSIG(r->status));
	else
		snprintf(buf, n, "exit status %d", WEXITSTATUS(r->status));
}

/* ---- the peer's output (reader thread) ------------------------------- */

/* A peer's reply becomes its call's; the host receives it before the peer's
 * next message (relay.h). */
static void deliver(struct sg_relay *r, json_t *m)
{
	json_t *id = json_object_get(m, "id");
	struct call *c = NULL;
	int64_t until = sg_now_ms() + 5000;
	uint64_t mine;

	pthread_mutex_lock(&r->lock);
	for (c = r->calls; c && !json_equal(c->id, id); c = c->next)
		;
	if (!c || c->reply) {
		/*
		 * A stray reply (no request of that id is in flight), or a
		 * second one: the host would drop it too, so nobody waits.
		 */
		pthread_mutex_unlock(&r->lock);
		json_decref(m);
		return;
	}
	c->reply = m;
	pthread_cond_signal(&c->cond);
	mine = ++r->delivered;
	while (r->handed < mine && !r->gone && sg_now_ms() < until) {
		struct timespec ts = sg_time_after(CLOCK_REALTIME, 20);

		pthread_cond_timedwait(&r->changed, &r->lock, &ts);
	}
	pthread_mutex_unlock(&r->lock);
}

/* op->replied of a relayed request whose reply came from the peer. */
static void handed(struct sg_op *op)
{
	struct sg_relay *r = op->s->relay;

	pthread_mutex_lock(&r->lock);
	r->handed++;
	pthread_cond_broadcast(&r->changed);
	pthread_mutex_unlock(&r->lock);
}

/* Whether the peer is gone, from a thread that holds no lock. */
static bool is_gone(struct sg_relay *r)
{
	bool gone;

	pthread_mutex_lock(&r->lock);
	gone = r->gone;
	pthread_mutex_unlock(&r->lock);
	return gone;
}

/*
 * Wait until wire has written all that is queued on it, it died, or the
 * peer is gone; at most ms (0: no limit).  False when ms ran out.  In
 * slices, so that closing the peer (relay_free) ends the wait.
 */
static bool await_written(struct sg_relay *r, struct sg_wire *wire, int64_t ms)
{
	int64_t until = ms ? sg_now_ms() + ms : INT64_MAX;

	while (sg_now_ms() < until) {
		int64_t slice = sg_now_ms() + 100;

		if (sg_wire_flush(wire, slice < until ? slice : until) || sg_wire_dead(wire) ||
		    is_gone(r))
			return true;
	}
	return false;
}

/*
 * Is m an event of this connection?  The rule of proc.c: a process is
 * the session's whose record's root_thread_id is the session, and there is
 * no session before the peer accepted the binding.
 */
static bool own_event(struct sg_relay *r, json_t *m)
{
	json_t *rec = json_object_get(json_object_get(m, "data"), "Process");
	const char *root = json_string_value(json_object_get(rec, "root_thread_id"));
	bool own, said;

	pthread_mutex_lock(&r->lock);
	own = r->session && root && strcmp(root, r->session) == 0;
	said = r->dropped_event;
	if (!own)
		r->dropped_event = true;
	pthread_mutex_unlock(&r->lock);
	/* Once: a peer must not flood stderr through sandgate either. */
	if (!own && !said)
		sg_log_warn("the peer sent a process event that is not of this connection's session; dropped, as are any later ones");
	return own;
}

/*
 * Is m, a peer's `tool` frame, a callback of a request in flight?  Only a
 * live run_code may call back (protocol section 7); one whose parent_id
 * names nothing the host is waiting for is a stray, dropped like a stray
 * reply.
 */
static bool live_callback(struct sg_relay *r, json_t *m)
{
	json_t *parent = json_object_get(m, "parent_id");
	struct call *c;

	pthread_mutex_lock(&r->lock);
	for (c = r->calls; c && !(json_equal(c->id, parent) && !c->reply); c = c->next)
		;
	pthread_mutex_unlock(&r->lock);
	if (!c)
		sg_log_info("the peer called back for a request not in flight; dropped");
	return c != NULL;
}

/*
 * An event of the peer to the host, as it is (steals m).  The host reads
 * at its own pace and the host's wire queues in memory, so after a
 * frame's worth of events the reader waits until the host has read them:
 * a peer that floods events is then held by its own full stdout instead
 * of growing sandgate's memory.  (Each message costs its queue entry too,
 * hence the 64 bytes.)
 */
static void forward_event(struct sg_relay *r, json_t *m, bool callback)
{
	struct sg_buf b = SG_BUF_INIT(SG_MAX_FRAME - 1);
	char *text;
	size_t len;

	if (callback ? !live_callback(r, m) : !own_event(r, m)) {
		json_decref(m);
		return;
	}
	if (sg_json_dump(m, &b)) {
		sg_log_err("a message of the peer was not forwarded: it would exceed the frame limit, or memory ran out");
		sg_buf_release(&b);
		json_decref(m);
		return;
	}
	json_decref(m);
	text = sg_buf_take(&b, &len);
	sg_wire_send_text(r->s->wire, text, len);
	r->unread += len + 64;
	if (r->unread > SG_MAX_FRAME) {
		(void)await_written(r, r->s->wire, 0);
		r->unread = 0;
	}
}

/* What a peer may write: the host's three kinds of message (protocol section 1). */
enum peer_msg { PEER_REPLY, PEER_EVENT, PEER_CALLBACK, PEER_OTHER, PEER_BROKEN };

/*
 * The host decodes every line as one struct: a reply has an id (string or
 * integer) and at most one of data and error, the error a string; an
 * event is a `process` message; a callback a `tool` message naming its
 * parent and carrying its own id.  A message of another method decodes
 * there too and is dropped, as it is here (PEER_OTHER); anything else
 * would be a transport failure, and closes the peer.
 */
static enum peer_msg classify(json_t *m)
{
	json_t *id = json_object_get(m, "id"), *method = json_object_get(m, "method");
	json_t *error = json_object_get(m, "error");
	const char *name = json_string_value(method);

	if (!method) {
		if ((!json_is_string(id) && !json_is_integer(id)) ||
		    (error && (!json_is_string(error) || json_object_get(m, "data"))))
			return PEER_BROKEN;
		return PEER_REPLY;
	}
	if (!name)
		return PEER_BROKEN;
	if (strcmp(name, "process") == 0 && json_is_object(json_object_get(m, "data")))
		return PEER_EVENT;
	if (strcmp(name, "tool") == 0 && (json_is_string(id) || json_is_integer(id)) &&
	    json_object_get(m, "parent_id") && json_object_get(m, "data"))
		return PEER_CALLBACK;
	if (strcmp(name, "process") == 0 || strcmp(name, "tool") == 0)
		return PEER_BROKEN;
	return PEER_OTHER;
}

static void *reader_main(void *arg)
{
	struct sg_relay *r = arg;
	char why[SG_ERR_MSG + 64], how[64];

	for (;;) {
		struct sg_errinfo err = { 0 };
		enum peer_msg kind;
		json_t *m = NULL;
		sg_err rc = sg_wire_read_msg(r->wire, &m, &err);

		if (rc == SG_E_NOT_FOUND || rc == SG_E_CANCELLED) {
			snprintf(why, sizeof(why), "the peer ended its output");
			break;
		}
		if (rc) {
			/* A transport failure closes the peer at once. */
			snprintf(why, sizeof(why), "the peer broke the protocol (%s) and was closed",
				 err.msg);
			sg_log_err("%s", why);
			close_peer(r, why);
			break;
		}
		kind = classify(m);
		if (kind == PEER_REPLY) {
			deliver(r, m);
		} else if (kind == PEER_EVENT || kind == PEER_CALLBACK) {
			/* The host's, as they are (protocol sections 4 and 7). */
			forward_event(r, m, kind == PEER_CALLBACK);
		} else if (kind == PEER_OTHER) {
			/* Once: a peer must not flood stderr through sandgate. */
			if (!r->dropped_other)
				sg_log_warn("the peer sent a message of a method the host does not read (%.64s); dropped, as are any later ones",
					    json_string_value(json_object_get(m, "method")));
			r->dropped_other = true;
			json_decref(m);
		} else {
			json_decref(m);
			snprintf(why, sizeof(why),
				 "the peer sent a message the host could not decode, and was closed");
			sg_log_err("%s", why);
			close_peer(r, why);
			break;
		}
	}
	pthread_mutex_lock(&r->lock);
	if (!r->gone) {
		/* Say how it ended, if it did so promptly. */
		await_exit(r, 200, NULL);
		describe_exit(r, how, sizeof(how));
		snprintf(why, sizeof(why), "the peer ended its connection (%s)", how);
		set_gone(r, why);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* ---- requests -------------------------------------------------------- */

static void unlink_call(struct sg_relay *r, struct call *c)
{
	for (struct call **l = &r->calls; *l; l = &(*l)->next)
		if (*l == c) {
			*l = c->next;
			break;
		}
}

/* An error reply's "word: sentence" as op's error. */
static sg_err peer_error(struct sg_op *op, json_t *error)
{
	const char *text = json_string_value(error), *colon;
	char word[64];
	size_t n;

	if (!text)
		return sg_err_set(&op->err, SG_E_INTERNAL, "the peer's error is not a string");
	colon = strstr(text, ": ");
	n = colon ? (size_t)(colon - text) : 0;
	if (n == 0 || n >= sizeof(word))
		return sg_err_set(&op->err, SG_E_INTERNAL, "the peer answered: %s", text);
	memcpy(word, text, n);
	word[n] = '\0';
	return sg_err_set(&op->err, sg_err_from_word(word), "%s", colon + 2);
}

/*
 * Forward op's request as the host sent it, its id included, and wait
 * for the peer's terminal reply to it (*out the reply frame, new).  A
 * fired cancel token is forwarded as the host's cancel, the target's id
 * and nothing else; it has no reply of its own, and a peer that leaves
 * the target unanswered for SG_RELAY_CANCEL_MS is closed.
 */
static sg_err call(struct sg_relay *r, struct sg_op *op, json_t **out)
{
	struct call c = { .id = op->id };
	int64_t cancel_at = 0;
	char why[SG_ERR_MSG];

	*out = NULL;
	pthread_cond_init(&c.cond, NULL);
	pthread_mutex_lock(&r->lock);
	if (!r->gone && !r->input_closed) {
		c.next = r->calls;
		r->calls = &c;
		if (!sg_wire_send(r->wire, json_incref(op->req)))
			set_gone(r, "the peer stopped reading its input");
	} else if (!r->gone) {
		set_gone(r, "the peer's input is closed");
	}
	while (!c.reply && !r->gone) {
		struct timespec ts;

		if (!cancel_at && sg_cancel_check(&op->cancel)) {
			cancel_at = sg_now_ms() + r->cancel_ms;
			/* At shutdown the peer's EOF already cancels everything. */
			if (!r->input_closed)
				sg_wire_send(r->wire, json_pack("{s:s, s:O, s:s}", "token", r->token,
								"id", op->id, "method", "cancel"));
			continue;
		}
		if (cancel_at && sg_now_ms() >= cancel_at) {
			pthread_mutex_unlock(&r->lock);
			snprintf(why, sizeof(why),
				 "the peer was closed for not answering a cancelled request within %lld ms",
				 (long long)r->cancel_ms);
			sg_log_err("%s", why);
			close_peer(r, why);
			pthread_mutex_lock(&r->lock);
			continue;
		}
		/* The cancel token is looked at every 20 ms; a reply wakes us at once. */
		ts = sg_time_after(CLOCK_REALTIME, 20);
		pthread_cond_timedwait(&c.cond, &r->lock, &ts);
	}
	unlink_call(r, &c);
	*out = c.reply;
	snprintf(why, sizeof(why), "%s", r->why);
	pthread_mutex_unlock(&r->lock);
	pthread_cond_destroy(&c.cond);
	if (!*out) {
		/* The peer is gone (relay.h): this answer is sandgate's own. */
		op->keep_err = true;
		return sg_err_set(&op->err, SG_E_UNAVAILABLE, "%s", why);
	}
	op->replied = handed;
	return SG_OK;
}

/* A reply frame's outcome for initialize: *out its data (new), or its error. */
static sg_err reply_outcome(struct sg_op *op, json_t *reply, json_t **out)
{
	json_t *data = json_object_get(reply, "data");

	*out = NULL;
	if (json_object_get(reply, "error"))
		return peer_error(op, json_object_get(reply, "error"));
	*out = data ? json_incref(data) : json_null();
	return SG_OK;
}

/* Whether the peer offered method (its initialize reply's `methods`). */
static bool has_method(const struct sg_relay *r, const char *method)
{
	json_t *m;
	size_t i;

	json_array_foreach(r->methods, i, m)
		if (json_is_string(m) && strcmp(json_string_value(m), method) == 0)
			return true;
	return false;
}

/*
 * The handler of every relayed method: forward, await, answer with the
 * peer's reply frame as it is (op->raw_reply).
 */
static sg_err request(struct sg_op *op, json_t **out)
{
	struct sg_relay *r = op->s->relay;
	struct sg_buf b = SG_BUF_INIT(SG_MAX_FRAME - 1);
	json_t *reply = NULL;
	sg_err rc;

	*out = NULL;
	/* sandgate's own permission checks come first (relay.h). */
	if (strcmp(op->method, "execute") == 0) {
		rc = sg_tools_precheck(op);
		if (rc)
			return rc;
	}
	rc = call(r, op, &reply);
	if (rc)
		return rc;
	/*
	 * The peer's reply goes to the host as the peer wrote it, its error
	 * text included: the host shows that text to the model, and its id is
	 * the host's own.
	 */
	if (op->tool)
		op->tool_failed = json_object_get(reply, "error") != NULL;
	if (sg_json_dump(reply, &b)) {
		rc = sg_err_set(&op->err, SG_E_TOO_LARGE,
				"the peer's reply does not fit in a frame");
	} else {
		op->raw_reply = sg_buf_take(&b, &op->raw_len);
		if (!op->raw_reply)
			rc = sg_err_set(&op->err, SG_E_INTERNAL, "out of memory");
	}
	sg_buf_release(&b);
	json_decref(reply);
	return rc;
}

/*
 * A host's `callback` request (protocol section 7; borrowed): the relayed
 * connection's programs run at its peer, so the answer is the peer's, as
 * it is.  Once the peer's input closed nobody can wait for it, and it is
 * dropped.  Never blocks: the wire queues it.
 */
static void callback(struct sg_session *s, json_t *frame)
{
	struct sg_relay *r = s->relay;

	pthread_mutex_lock(&r->lock);
	if (!r->gone && !r->input_closed)
		(void)sg_wire_send(r->wire, json_incref(frame));
	pthread_mutex_unlock(&r->lock);
}

/* ---- initialize ------------------------------------------------------ */

static bool has_string(json_t *arr, const char *s)
{
	json_t *v;
	size_t i;

	json_array_foreach(arr, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), s) == 0)
			return true;
	return false;
}

/*
 * The peer's initialize reply against what the connection needs: the
 * binding's version echoed, its root kept, and the capabilities the
 * profile requires (by default process.start.v1, a version-4 promise).
 */
static sg_err check_reply(struct sg_op *op, const struct sg_profile *p, json_t *binding,
			  json_t *data)
{
	json_t *req = json_object_get(p->raw, "capabilities"), *v, *root;
	json_t *version = json_object_get(binding, "version");
	json_t *deflt = json_integer_value(version) >= 4 ? json_pack("[s]", "process.start.v1")
							  : json_array();
	sg_err rc = SG_OK;
	size_t i;

	if (!json_is_object(data) || !json_equal(json_object_get(data, "version"), version))
		rc = sg_err_set(&op->err, SG_E_UNSUPPORTED,
				"profile \"%s\": the peer does not speak protocol version %lld",
				p->name, (long long)json_integer_value(version));
	json_array_foreach(req ? req : deflt, i, v)
		if (!rc && !has_string(json_object_get(data, "capabilities"), json_string_value(v)))
			rc = sg_err_set(&op->err, SG_E_UNSUPPORTED,
					"profile \"%s\": the peer does not offer the capability %s",
					p->name, json_string_value(v));
	root = json_object_get(data, "root");
	if (!root)
		root = json_object_get(json_object_get(data, "environment"), "root");
	if (!rc && root && !json_equal(root, json_object_get(binding, "root")))
		rc = sg_err_set(&op->err, SG_E_UNSUPPORTED,
				"profile \"%s\": the peer serves root %s, not the binding's %s",
				p->name, json_string_value(root),
				json_string_value(json_object_get(binding, "root")));
	json_decref(deflt);
	return rc;
}

static sg_err relay_new(struct sg_session *s, const struct sg_profile *p,
			struct sg_relay **out, struct sg_errinfo *err)
{
	struct sg_relay *r = calloc(1, sizeof(*r));
	json_t *grace = json_object_get(p->raw, "shutdown_grace_ms");
	sg_err rc;

	*out = r;
	if (!r)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	r->s = s;
	r->to_fd = r->from_fd = -1;
	r->grace_ms = json_is_integer(grace) ? json_integer_value(grace) : SG_OUTER_GRACE_MS;
	r->cancel_ms = SG_RELAY_CANCEL_MS;
	{
		/* Tests only, and only ever shorter: 35 s is long for a test. */
		const char *t = getenv("SANDGATE_TEST_RELAY_CANCEL_MS");
		long long ms = t ? strtoll(t, NULL, 10) : 0;

		if (ms > 0 && ms < SG_RELAY_CANCEL_MS)
			r->cancel_ms = ms;
	}
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->changed, NULL);
	rc = spawn(r, p, err);
	if (!rc && sg_wire_new(r->from_fd, r->to_fd, NULL, NULL, &r->wire))
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot start the peer's writer");
	if (!rc && pthread_create(&r->reader, NULL, reader_main, r) == 0)
		r->have_reader = true;
	else if (!rc)
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot start the peer's reader");
	if (rc) {
		close_peer(r, err->msg);
		r->input_closed = true;
	}
	return rc;
}

/*
 * The host's profile (WUU_EXECUTION_PROFILE), as far as the command
 * profile itself has a say: the fields it sets, which the host may not
 * widen.  The rest is the peer's to honour or refuse in its own profile.
 * *out new or NULL.
 */
static sg_err check_peer_fixed(json_t *env, const struct sg_profile *p,
			       struct sg_errinfo *err);

static sg_err own_narrowing(const struct sg_profile *p, json_t **out, struct sg_errinfo *err)
{
	json_t *host = NULL, *v;
	const char *k;
	sg_err rc = sg_config_host_profile(getenv("WUU_EXECUTION_PROFILE"), &host, err);

	*out = NULL;
	if (!rc)
		rc = check_peer_fixed(host, p, err);
	if (rc || !host) {
		json_decref(host);
		return rc;
	}
	*out = json_object();
	json_object_foreach(host, k, v)
		if (json_object_get(p->raw, k))
			json_object_set(*out, k, v);
	json_decref(host);
	return SG_OK;
}

/*
 * What a command profile says of its peer: its argv, grace, environment,
 * the root it serves and the capabilities it must offer.  The config
 * layer passes over the first few in a binding (elsewhere they describe
 * a host's side of a profile), and the others when the profile leaves
 * them out; here they are the peer itself.
 */
static const char *const peer_fixed[] = { "backend", "command", "shutdown_grace_ms",
					  "workspace", "env", "capabilities", NULL };

/*
 * The host's profile may only repeat what the command profile says of its
 * peer (docs/security.md): anything else is refused before the peer
 * starts, so nothing the host sends reaches the peer's argv or settings.
 * The binding's own `environment` holds forwarded variables, which reach
 * the peer inside its initialize and nowhere else.
 */
static sg_err check_peer_fixed(json_t *env, const struct sg_profile *p,
			       struct sg_errinfo *err)
{
	for (size_t i = 0; json_is_object(env) && peer_fixed[i]; i++) {
		json_t *bv = json_object_get(env, peer_fixed[i]);
		json_t *pv = json_object_get(p->raw, peer_fixed[i]);

		if (!bv || (pv && json_equal(bv, pv)))
			continue;
		return sg_err_set(err, SG_E_PERMISSION,
				  "WUU_EXECUTION_PROFILE: field \"%s\" %s (profile \"%s\"); the host's profile may only repeat what a command profile says of its peer",
				  peer_fixed[i],
				  pv ? "differs from the profile's value" : "is not set by the profile",
				  p->name);
	}
	return SG_OK;
}

/*
 * The command profile as this connection serves it (*out new, also on
 * failure): the config's, narrowed by the host's profile as far as the
 * command profile has a say, its fields checked, its workspace the
 * binding's root.
 */
static sg_err peer_profile(struct sg_op *op, json_t *binding, struct sg_profile **out)
{
	struct sg_session *s = op->s;
	const char *root = json_string_value(json_object_get(binding, "root"));
	struct sg_profile *base = NULL;
	json_t *narrow = NULL;
	sg_err rc;

	*out = NULL;
	rc = sg_config_profile(s->cfg, s->profile_name, NULL, &base, &op->err);
	if (!rc)
		rc = own_narrowing(base, &narrow, &op->err);
	if (!rc)
		rc = sg_config_profile(s->cfg, s->profile_name, narrow, out, &op->err);
	if (!rc)
		rc = sg_check_peer_fields(*out, &op->err);
	if (!rc && (*out)->workspace && strcmp((*out)->workspace, root) != 0)
		rc = sg_err_set(&op->err, SG_E_UNSUPPORTED,
				"profile \"%s\": its peer serves the workspace %s, and the binding's root is %s",
				(*out)->name, (*out)->workspace, root);
	json_decref(narrow);
	sg_profile_free(base);
	return rc;
}

/*
 * The peer, started by the first initialize and never replaced, given
 * this initialize's own token: a retry after a refusal that left the
 * connection usable may bring another one, and the peer must be bound
 * with the token this connection ends up with.  A failure is final.
 */
static sg_err peer_for(struct sg_op *op, const struct sg_profile *p)
{
	struct sg_session *s = op->s;
	const char *token = json_string_value(json_object_get(op->req, "token"));
	sg_err rc = s->relay ? SG_OK : relay_new(s, p, &s->relay, &op->err);

	if (rc)
		return rc;
	pthread_mutex_lock(&s->relay->lock);
	free(s->relay->token);
	s->relay->token = strdup(token);
	pthread_mutex_unlock(&s->relay->lock);
	return s->relay->token ? SG_OK : sg_err_set(&op->err, SG_E_INTERNAL, "out of memory");
}

/*
 * The peer refused the binding with rc: the refusals that leave the
 * peer's connection usable leave ours so too (protocol 4.1), and the host
 * may retry, on the same peer.
 */
static bool refusal_is_final(const struct sg_relay *r, sg_err rc)
{
	return r->gone || !(rc == SG_E_UNSUPPORTED || rc == SG_E_INVALID_ARGUMENT ||
			    rc == SG_E_PERMISSION || rc == SG_E_UNAVAILABLE ||
			    rc == SG_E_BINDING_CONFLICT);
}

/*
 * The peer accepted the binding (its reply's data, stolen, and p, taken):
 * the session is bound to it.  The peer's session is set before the
 * reply is handed on: the peer's next events are checked by it.
 */
static void take_binding(struct sg_session *s, json_t *binding, struct sg_profile *p,
			 json_t *data)
{
	const char *session = json_string_value(json_object_get(binding, "session"));
	json_t *identity = json_object_get(binding, "identity");

	s->relay->methods = json_incref(json_object_get(data, "methods"));
	pthread_mutex_lock(&s->relay->lock);
	s->relay->session = strdup(session);
	pthread_mutex_unlock(&s->relay->lock);
	s->identity = strdup(json_is_string(identity) ? json_string_value(identity) : session);
	s->root = strdup(json_string_value(json_object_get(binding, "root")));
	s->session_id = strdup(session);
	s->init_reply = data;
	s->profile = p;
}

/*
 * The relay mode's initialize: start the peer unless this connection
 * already did, forward the request as the host wrote it, check the reply
 * and fill the session in.  *fatal once the peer may hold an environment.
 */
static sg_err initialize(struct sg_op *op, json_t *binding, bool *fatal)
{
	struct sg_profile *p = NULL;
	json_t *data = NULL, *reply = NULL;
	sg_err rc;

	*fatal = false;
	rc = peer_profile(op, binding, &p);
	if (rc)
		goto out;
	rc = peer_for(op, p);
	if (rc) {
		*fatal = true;
		goto out;
	}
	rc = call(op->s->relay, op, &reply);
	if (!rc)
		rc = reply_outcome(op, reply, &data);
	if (rc) {
		*fatal = refusal_is_final(op->s->relay, rc);
		goto out;
	}
	/* From here the peer is bound: a refusal is final. */
	rc = check_reply(op, p, binding, data);
	if (rc) {
		*fatal = true;
		goto out;
	}
	take_binding(op->s, binding, p, data);
	p = NULL;
	data = NULL;
out:
	json_decref(reply);
	json_decref(data);
	sg_profile_free(p);
	return rc;
}

/* ---- shutdown -------------------------------------------------------- */

/* EOF to the peer: what is queued goes first, then the pipe is closed. */
static void close_input(struct sg_relay *r)
{
	int null;

	pthread_mutex_lock(&r->lock);
	if (r->input_closed || r->to_fd < 0) {
		r->input_closed = true;
		pthread_mutex_unlock(&r->lock);
		return;
	}
	r->input_closed = true;
	pthread_mutex_unlock(&r->lock);
	sg_wire_flush(r->wire, sg_now_ms() + 1000);
	/*
	 * /dev/null over the pipe's end, not close(): the wire's writer may
	 * still hold the descriptor number, which must not name another
	 * file later.
	 */
	null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null < 0 || dup3(null, r->to_fd, O_CLOEXEC) < 0)
		close(r->to_fd), r->to_fd = -1;
	if (null >= 0)
		close(null);
}

/* What was cut short, for `sandgate envs list` (relay.h). */
static void record_failure(struct sg_session *s, const char *error)
{
	struct sg_reg_key key = { "command", s->identity };
	struct sg_errinfo err = { 0 };
	json_t *fields;
	int others = 0;

	if (!s->identity || !s->profile)
		return;
	fields = json_pack("{s:s, s:s, s:s, s:s, s:s}", "profile", s->profile->name, "status",
			   SG_REG_CLEANUP, "error", error, "session", s->session_id, "peer",
			   s->relay->argv0 ? s->relay->argv0 : "?");
	if (sg_registry_attach(s->state_dir, &key, s->session_id, fields, &others, NULL, &err) ||
	    sg_registry_update(s->state_dir, &key, fields, &err) ||
	    sg_registry_detach(s->state_dir, &key, s->session_id, &others, &err))
		sg_log_warn("%s", err.msg);
	json_decref(fields);
}

/*
 * Wait (briefly) until every request in flight has reached the peer: one
 * received before EOF is the peer's to answer, even when EOF came in the
 * same write (protocol section 11).  In flight but not yet a call means a
 * worker is still on its way to sending it.
 */
static void await_forwarded(struct sg_relay *r, struct sg_pool *pool,
			    const struct sg_cancel *deadline)
{
	int64_t until = sg_now_ms() + SG_RELAY_FORWARD_MS;

	while (sg_now_ms() < until && !sg_cancel_check(deadline)) {
		size_t inflight = 0, calls = 0;

		pthread_mutex_lock(&pool->lock);
		for (struct sg_op *op = pool->inflight; op; op = op->next)
			inflight++;
		pthread_mutex_unlock(&pool->lock);
		pthread_mutex_lock(&r->lock);
		for (struct call *c = r->calls; c; c = c->next)
			calls++;
		if (r->gone)
			calls = inflight;
		pthread_mutex_unlock(&r->lock);
		if (calls >= inflight)
			return;
		sg_cancel_sleep(deadline, 5);
	}
}

/*
 * The end of the connection, first of all (the mode's shutdown slot): a
 * peer sees EOF first, once the requests in flight in pool have reached
 * it (SG_RELAY_FORWARD_MS at most), and cancels its own requests, whose
 * replies still reach the host while the gateway drains them.  Its grace
 * is at most max_grace_ms (a version-3 host's short window) and bounded by
 * the deadline token; past it the peer is killed.  Non-zero when its
 * cleanup failed or was cut short (said on stderr and in the registry).
 */
static int end_peer(struct sg_session *s, struct sg_pool *pool, struct sg_cancel *deadline,
		    int64_t max_grace_ms)
{
	struct sg_relay *r = s->relay;
	char how[64], what[SG_ERR_MSG + 128];
	bool exited, killed_before;
	int status = 0;

	if (!r)
		return 0;
	if (r->grace_ms > max_grace_ms)
		r->grace_ms = max_grace_ms > 0 ? max_grace_ms : 0;
	await_forwarded(r, pool, deadline);
	close_input(r);
	pthread_mutex_lock(&r->lock);
	killed_before = r->killed;
	exited = r->pid <= 0 || await_exit(r, r->grace_ms, deadline);
	pthread_mutex_unlock(&r->lock);
	if (!exited) {
		close_peer(r, "the peer was killed at the end of its shutdown grace");
		snprintf(what, sizeof(what),
			 "the peer %s (pid %d) did not finish its cleanup within %lld ms (shutdown_grace_ms) and was killed; what it manages may remain",
			 r->argv0, (int)r->pid, (long long)r->grace_ms);
		pthread_mutex_lock(&r->lock);
		await_exit(r, 2000, NULL);
		pthread_mutex_unlock(&r->lock);
	} else if (r->pid > 0) {
		pthread_mutex_lock(&r->lock);
		describe_exit(r, how, sizeof(how));
		status = r->status;
		pthread_mutex_unlock(&r->lock);
		if (killed_before)
			snprintf(what, sizeof(what), "%s; what the peer %s manages may remain",
				 r->why, r->argv0);
		else if (status != 0)
			snprintf(what, sizeof(what), "the peer %s's cleanup failed (%s)", r->argv0, how);
		else
			return 0;
	} else {
		snprintf(what, sizeof(what), "the peer %s never started", r->argv0 ? r->argv0 : "?");
	}
	fprintf(stderr, "sandgate: %s\n", what);
	record_failure(s, what);
	return 1;
}

/* Before the session's wire is freed: the reader thread writes to it. */
static void relay_free(struct sg_relay *r)
{
	if (!r)
		return;
	close_peer(r, "the connection ended");
	if (r->have_reader) {
		sg_wire_stop(r->wire);
		pthread_join(r->reader, NULL);
	}
	if (r->have_reaper) {
		pthread_mutex_lock(&r->lock);
		await_exit(r, 2000, NULL);
		pthread_mutex_unlock(&r->lock);
		if (r->exited)
			pthread_join(r->reaper, NULL);
		else
			pthread_detach(r->reaper);
	}
	sg_wire_free(r->wire);
	if (r->to_fd >= 0)
		close(r->to_fd);
	if (r->from_fd >= 0)
		close(r->from_fd);
	json_decref(r->methods);
	free(r->session);
	free(r->token);
	free(r->argv0);
	free(r);
}

/* ---- the mode -------------------------------------------------------- */

static const struct sg_method relayed = { "relayed", request, false };

/*
 * Until the peer accepted a binding, the methods sandgate itself knows
 * (a known one is answered not_initialized); after, initialize stays
 * sandgate's and every other method is the peer's, if it offered it.
 */
static const struct sg_method *route(struct sg_session *s, const char *name, bool bound)
{
	const struct sg_method *own = sg_mode_builtin.route(s, name, bound);

	if (!bound || (own && own->before_init))
		return own;
	return has_method(s->relay, name) ? &relayed : NULL;
}

static void release(struct sg_session *s)
{
	relay_free(s->relay);
	s->relay = NULL;
}

const struct sg_mode sg_mode_relay = {
	.name = "relay",
	.route = route,
	.initialize = initialize,
	.callback = callback,
	.shutdown = end_peer,
	.release = release,
};
