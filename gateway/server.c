/*
 * server.c - `sandgate serve`: the reader loop, the choice of the
 * session's mode and dispatch.
 *
 * Invariants: the reader (main) thread parses and routes frames and never
 * blocks on the environment; every request that passes the checks here
 * goes to the worker pool (pool.c), whose worker queues its one terminal
 * reply.  The methods a request may name, and where a callback goes, are
 * the session's mode's (session.h), chosen here once before the first
 * frame.  cancel and callback frames get no reply at all: a cancel only
 * fires its target's token (the target answers when its handler stopped),
 * a callback only hands its answer to the nested call waiting for it.
 * Once a binding fixed the token, no frame without it is acted on.
 * initialize is initialize.c's, the end of the connection shutdown.c's,
 * the audit log audit.c's.
 */
#define _GNU_SOURCE /* F_SETPIPE_SZ */
#include "gateway/server.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "gateway/audit.h"
#include "base/limits.h"
#include "base/log.h"
#include "gateway/cli.h"
#include "gateway/initialize.h"
#include "gateway/mode.h"
#include "gateway/pool.h"
#include "gateway/relay.h"
#include "gateway/session.h"
#include "gateway/shutdown.h"
#include "gateway/wire.h"

struct server {
	struct sg_session s;
	const struct sg_server_opts *o;
	struct sg_pool pool;
	struct sg_audit *audit;
	/*
	 * The id an error reply carries when the request had none (""): the
	 * host reads it as an id nobody waits for, as from its own worker.
	 */
	json_t *no_id;
};

/*
 * Frames answered on the reader thread with no reply of their own: cancel
 * (the target's id, protocol section 5) and callback (the answer to one of
 * run_code's nested tool calls, section 7).  Not methods a host calls for
 * a result, so no mode routes them.
 */
static const char cancel_word[] = "cancel";
static const char callback_word[] = "callback";

static void send_error_code(struct sg_session *s, json_t *id, sg_err code,
			    const char *fmt, ...) SG_PRINTF(4, 5);
static void send_error_code(struct sg_session *s, json_t *id, sg_err code,
			    const char *fmt, ...)
{
	struct sg_errinfo e = { 0 };
	va_list ap;

	va_start(ap, fmt);
	sg_err_vset(&e, code, fmt, ap);
	va_end(ap);
	sg_wire_send_error(s->wire, id, &e);
}

/* ---- dispatch (reader thread) ---- */

/*
 * Whether the frame may be acted on: once a binding fixed the token, every
 * frame (cancel, callback and a repeated initialize included) must carry
 * it, compared in constant time.  Before that there is no token to hold a
 * frame to; only initialize and cancel are served then.
 */
static bool authorized(struct sg_session *s, json_t *frame, int state)
{
	json_t *t = json_object_get(frame, "token");
	size_t n;

	if (state != SG_S_READY)
		return true;
	n = strlen(s->token);
	return json_is_string(t) && json_string_length(t) == n &&
	       CRYPTO_memcmp(json_string_value(t), s->token, n) == 0;
}

/* The unknown method's error; a process operation's has the host's meaning. */
static void unknown_method(struct sg_session *s, json_t *id, const char *name)
{
	if (strncmp(name, "process/", 8) == 0)
		send_error_code(s, id, SG_E_UNKNOWN_METHOD,
				"unknown remote process operation \"%.64s\"", name + 8);
	else
		send_error_code(s, id, SG_E_UNKNOWN_METHOD, "no method \"%.64s\"", name);
}

/*
 * cancel and callback, acted on here and never answered (protocol sections
 * 5 and 7); false for any other frame.
 */
static bool without_reply(struct server *sv, json_t *frame, json_t *id, const char *name,
			  int state)
{
	if (strcmp(name, cancel_word) == 0) {
		if (id)
			sg_pool_cancel(&sv->pool, id);
		return true;
	}
	if (strcmp(name, callback_word) == 0) {
		if (state == SG_S_READY)
			sv->s.mode->callback(&sv->s, frame);
		return true;
	}
	return false;
}

/*
 * Check a request and answer what needs no worker; returns the method to
 * run, or NULL once the frame was answered (or, for cancel and callback,
 * acted on) here.  The order is the host worker's: the token first, then
 * the frames that get no reply, then the id, then the method.
 */
static const struct sg_method *route(struct server *sv, json_t *frame)
{
	struct sg_session *s = &sv->s;
	json_t *id = json_object_get(frame, "id");
	json_t *m = json_object_get(frame, "method");
	json_t *data = json_object_get(frame, "data");
	const struct sg_method *meth;
	const char *name;
	int state;

	pthread_mutex_lock(&s->lock);
	state = s->state;
	pthread_mutex_unlock(&s->lock);
	if (!id || json_is_null(id) || (json_is_string(id) && json_string_length(id) == 0))
		id = NULL;
	if (!authorized(s, frame, state)) {
		send_error_code(s, id ? id : sv->no_id, SG_E_BAD_TOKEN,
				"the frame's token does not match the connection's");
		return NULL;
	}
	name = json_is_string(m) ? json_string_value(m) : "";
	if (without_reply(sv, frame, id, name, state))
		return NULL;
	if (!id) {
		send_error_code(s, sv->no_id, SG_E_INVALID_REQUEST,
				"the request has no id (a non-empty string or an integer)");
		return NULL;
	}
	if (!json_is_string(m)) {
		send_error_code(s, id, SG_E_INVALID_REQUEST, "`method` must be a string");
		return NULL;
	}
	if (data && !json_is_null(data) && !json_is_object(data)) {
		send_error_code(s, id, SG_E_INVALID_REQUEST, "`data` must be an object");
		return NULL;
	}
	meth = s->mode->route(s, name, state == SG_S_READY);
	if (!meth) {
		unknown_method(s, id, name);
		return NULL;
	}
	if (!meth->before_init && state == SG_S_FAILED) {
		send_error_code(s, id, SG_E_INIT_FAILED, "reconnect with a new connection");
		return NULL;
	}
	if (!meth->before_init && state != SG_S_READY) {
		send_error_code(s, id, SG_E_NOT_INITIALIZED, "call initialize before %s", name);
		return NULL;
	}
	if (!data || json_is_null(data))
		json_object_set_new(frame, "data", json_object());
	return meth;
}

/*
 * Route one frame (steals it).  A request for a worker becomes an op that
 * owns the frame outright: the reader thread keeps no reference, so the
 * frame is released on one thread only.
 */
static void dispatch(struct server *sv, json_t *frame)
{
	const struct sg_method *meth = route(sv, frame);
	/* The op owns the frame, and so the method's name in it. */
	const char *name = json_string_value(json_object_get(frame, "method"));
	struct sg_errinfo why = { 0 };
	struct sg_op *op = NULL;

	if (!meth)
		goto out;
	/*
	 * After a signal, a dead output or a lost peer stopped the wire, the
	 * frames still in its buffer are answered, not run: no handler may
	 * start once the shutdown has begun.
	 */
	if (sg_wire_stopped(sv->s.wire)) {
		send_error_code(&sv->s, json_object_get(frame, "id"), SG_E_UNAVAILABLE,
				"the gateway is shutting down; %s was not run", name);
		goto out;
	}
	op = sg_op_new(&sv->s, frame, name);
	if (!op) {
		send_error_code(&sv->s, json_object_get(frame, "id"), SG_E_INTERNAL,
				"out of memory");
		goto out;
	}
	frame = NULL;
	if (sg_pool_submit(&sv->pool, op, meth->run, sg_wire_frame_len(sv->s.wire), &why) == SG_OK)
		op = NULL;
	else
		sg_wire_send_error(sv->s.wire, op->id, &why);
out:
	if (op)
		sg_op_free(op);
	json_decref(frame);
}

/* ---- the connection ---- */

static struct sg_wire *signal_wire;

static void on_signal(int sig)
{
	(void)sig;
	if (signal_wire)
		sg_wire_stop(signal_wire);
}

static void on_dead(void *payload)
{
	sg_wire_stop(payload ? ((struct server *)payload)->s.wire : NULL);
}

/*
 * --shutdown-budget-ms, else the served profile's, else the role's default;
 * shortened, never lengthened, by the binding's shutdown_timeout_ms.  The
 * operator's figure is read from the config, not from the session: an
 * initialize may still be filling the session in on a worker when input
 * ends, and the budget must not wait for it.  The binding's counts once
 * the session is bound: it is the host's own deadline, past which the
 * host kills sandgate, so planning for a longer one would only mean being
 * killed mid-cleanup; and a binding is not trusted to stretch what the
 * operator allowed.
 */
static int64_t budget_ms(struct server *sv)
{
	struct sg_session *s = &sv->s;
	struct sg_profile *p = NULL;
	struct sg_errinfo ignore = { 0 };
	int64_t ms = sv->o->budget_ms, bound = 0;

	if (ms <= 0 &&
	    sg_config_profile(sv->o->cfg, sv->o->profile, NULL, &p, &ignore) == SG_OK)
		ms = p->shutdown_timeout_ms;
	sg_profile_free(p);
	if (ms <= 0)
		ms = sv->o->peer ? SG_PEER_SHUTDOWN_MS : SG_SHUTDOWN_BUDGET_MS;
	pthread_mutex_lock(&s->lock);
	if (s->state == SG_S_READY && s->profile)
		bound = s->profile->shutdown_timeout_ms;
	pthread_mutex_unlock(&s->lock);
	return bound > 0 && bound < ms ? bound : ms;
}

/*
 * The connection's mode, from the served profile: a `command` profile's
 * peer serves it, else this gateway does.  A profile that cannot be read
 * is the built-in mode's, whose initialize then says why.
 */
static const struct sg_mode *choose_mode(const struct sg_server_opts *o)
{
	struct sg_profile *p = NULL;
	struct sg_errinfo ignore = { 0 };
	bool relay = sg_config_profile(o->cfg, o->profile, NULL, &p, &ignore) == SG_OK &&
		     strcmp(p->backend, "command") == 0;

	sg_profile_free(p);
	return relay ? &sg_mode_relay : &sg_mode_builtin;
}

static void session_release(struct server *sv)
{
	struct sg_session *s = &sv->s;

	sg_init_reset(s);
	json_decref(s->binding);
	json_decref(s->init_reply);
	json_decref(s->forwarded);
	free(s->token);
	json_decref(sv->no_id);
}

/*
 * A server for o, its session filled in from the options (new).  NULL
 * when it cannot be made; *status is then the exit status that says why.
 */
static struct server *server_new(const struct sg_server_opts *o, int *status)
{
	struct server *sv = calloc(1, sizeof(*sv));
	struct sg_errinfo err = { 0 };

	*status = 70;
	if (!sv)
		return NULL;
	sv->o = o;
	sv->no_id = json_string("");
	pthread_mutex_init(&sv->s.lock, NULL);
	pthread_mutex_init(&sv->s.callback_lock, NULL);
	pthread_cond_init(&sv->s.init_done, NULL);
	sv->s.cfg = o->cfg;
	sv->s.profile_name = o->profile;
	sv->s.state_dir = o->state_dir;
	sv->s.helper_path = o->helper_path;
	sv->s.budget_ms = o->budget_ms;
	sv->s.peer = o->peer;
	sv->s.toolchains = o->toolchains;
	sv->s.mode = choose_mode(o);
	sv->s.tool_output = o->tool_output ? o->tool_output : SG_TOOL_OUTPUT;
	if (o->audit_log && sg_audit_open(o->audit_log, &sv->audit, &err)) {
		fprintf(stderr, "sandgate: %s\n", err.msg);
		json_decref(sv->no_id);
		free(sv);
		*status = SG_EXIT_CANTCREAT;
		return NULL;
	}
	sg_pool_init(&sv->pool, &sv->s, sv->audit);
	return sv;
}

/*
 * Read and dispatch frames until the input ends or fails; returns why
 * the session ends (a sentence in err when the input failed).
 */
static const char *server_serve(struct server *sv, struct sg_errinfo *err)
{
	for (;;) {
		json_t *frame = NULL;
		sg_err rc = sg_wire_read(sv->s.wire, &frame, err);

		if (rc == SG_E_NOT_FOUND)
			return "end of input";
		if (rc == SG_E_CANCELLED)
			return "stopped (signal or dead output)";
		if (rc) {
			fprintf(stderr, "sandgate: %s; shutting down\n", err->msg);
			return err->msg;
		}
		dispatch(sv, frame);
	}
}

int sg_server_run(const struct sg_server_opts *o)
{
	struct sigaction sa = { 0 };
	struct sg_errinfo err = { 0 };
	int out_fd = o->in_fd || o->out_fd ? o->out_fd : 1;
	struct server *sv;
	const char *why;
	int64_t budget, until, left;
	bool stuck;
	int status;

	sv = server_new(o, &status);
	if (!sv)
		return status;
	/* A dead host must show up as EPIPE on write, not kill us mid-cleanup. */
	signal(SIGPIPE, SIG_IGN);
	/*
	 * A larger pipe to the host means a multi-megabyte reply (an export
	 * chunk) crosses in a few writes instead of a hundred 64 KiB ones.
	 * Best effort: stdout may not be a pipe, or the kernel may refuse.
	 */
	(void)fcntl(out_fd, F_SETPIPE_SZ, (int)SG_PIPE_SIZE);
	if (sg_wire_new(o->in_fd, out_fd, on_dead, sv, &sv->s.wire)) {
		fprintf(stderr, "sandgate: cannot start the protocol writer\n");
		json_decref(sv->no_id);
		free(sv);
		return 70;
	}
	signal_wire = sv->s.wire;
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	why = server_serve(sv, &err);
	budget = budget_ms(sv);
	until = sg_now_ms() + budget;
	status = sg_shutdown_run(&sv->s, &sv->pool, budget, why);
	/*
	 * A handler that ignores its cancel token must not hang exit, nor
	 * hold it past the budget by more than the moment idle workers need
	 * to notice the quit.
	 */
	left = until - sg_now_ms();
	stuck = !sg_pool_stop(&sv->pool, left > SG_POOL_QUIT_MS ? left : SG_POOL_QUIT_MS);
	signal_wire = NULL;
	if (stuck) {
		sg_log_err("a request handler did not stop; exiting without it");
		return status ? status : SG_EXIT_SOFTWARE;
	}
	/* The relay's reader forwards events to the wire: gone before the wire is. */
	sv->s.mode->release(&sv->s);
	sg_wire_free(sv->s.wire);
	session_release(sv);
	sg_audit_close(sv->audit);
	free(sv);
	return status;
}
