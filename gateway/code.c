/*
 * code.c - run_code (code.h): starts sg-jsrun for one program, relays its
 * nested calls to the host as `tool` frames, and answers with the host's
 * RunResult {"Logs","Value","Error","Media","CallSummary","ResultView"}.
 *
 * Invariants:
 * - One struct code_run per request, on its worker thread's stack; the
 *   reader thread touches it only through a nested call's deliver, which
 *   records a copy of the answer under run->lock and wakes the worker by
 *   eventfd.  No JSON value is shared between the two threads: jansson
 *   releases a reference without acquire order, so the thread that frees
 *   a shared value is not ordered after the other's last read of it.
 *   run->lock is never held while a callback is added or removed (deliver
 *   runs under the session's callback lock and then takes run->lock).
 * - Every line from sg-jsrun is untrusted: checked before it is acted on;
 *   anything malformed ends the program with an Error.
 * - Writes to sg-jsrun never block the worker: they are queued and
 *   flushed when the pipe is writable, so a busy program cannot stop a
 *   cancel from being noticed.
 * - The state table is this process's (one session per process) and is
 *   changed only by commit_state, under scopes_lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cancel.h"
#include "gateway/code.h"
#include "gateway/session.h"
#include "gateway/wire.h"

/* The host's limits (protocol section 7), each named once. */
#define CODE_PENDING_MAX 128
#define CODE_OUTPUT_MAX ((size_t)1 << 20)
#define CODE_RESULT_MAX ((size_t)3 << 20)
#define CODE_STATE_KEYS_MAX 256
#define CODE_STATE_BYTES_MAX ((size_t)1 << 20)
#define CODE_SCOPES_MAX 64
#define CODE_STATE_TOTAL_MAX ((size_t)16 << 20)
#define CODE_SUMMARY_MAX 8192
#define CODE_SUMMARY_RECENT 16
/* How long a new program waits for a cancelled one to leave its scope. */
#define CODE_RETIRE_WAIT_MS 5000
/*
 * How long it waits for a running one whose cancel may still be on its
 * way: through a relay, the host's next program can reach this gateway
 * before the cancel of the one before it.
 */
#define CODE_CANCEL_IN_FLIGHT_MS 1000
/* One line from sg-jsrun, as the host's control frame. */
#define CODE_LINE_MAX ((size_t)64 << 20)
/* The longest timeout_ms: the host's int64 nanoseconds. */
#define CODE_TIMEOUT_MAX_MS (INT64_MAX / 1000000)

static const char code_program[] = "sg-jsrun";
static const char deadline_text[] = "context deadline exceeded";
static const char busy_text[] = "PTC state scope already running";

/* ---- per-actor state ---- */

struct code_scope {
	char *key;     /* JSON [session, actor, root] */
	json_t *state; /* {key: value}, committed */
	size_t bytes;
	bool busy;     /* a program of this scope is running */
	/* That program's token: a fired one means its end is imminent. */
	const struct sg_cancel *holder;
	struct code_scope *next;
};

static pthread_mutex_t scopes_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t scopes_free = PTHREAD_COND_INITIALIZER;
static struct code_scope *scopes;
static size_t scopes_bytes;

/* ---- one program ---- */

struct code_run;

struct code_call {
	struct sg_callback cb;
	struct code_run *run;
	char id[32];    /* the tool frame's id, fresh */
	int64_t guest;  /* the program's call number */
	char *name;
	json_t *answer; /* the host's callback data, under run->lock */
	struct code_call *next;
};

struct code_outcome {
	int64_t guest;
	char *name;
	const char *status;
};

struct code_run {
	struct sg_op *op;
	struct sg_session *s;
	const char *view;
	json_t *tools; /* program.tools (borrowed): the only names a call may use */
	pid_t pid;
	int to_child, from_child, wake;
	struct sg_buf in, out; /* from and to sg-jsrun */
	pthread_mutex_t lock;
	struct code_call *calls;
	int pending;
	size_t printed;
	json_t *logs, *media, *value, *state;
	char *error;
	bool done, closed;
	/* The state scope: its key, and whether this run holds it. */
	char *scope;
	bool entered;
	/* The call summary: totals and the most recent calls (calls.go). */
	int total, succeeded, failed, interrupted;
	struct code_outcome recent[CODE_SUMMARY_RECENT];
	int nrecent;
};

static void run_fail(struct code_run *r, const char *text)
{
	if (r->done)
		return;
	r->done = true;
	free(r->error);
	r->error = strdup(text);
}

/* A fresh id for a tool frame: 26 base32 characters, as rand.Text(). */
static void fresh_id(char out[32])
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
	unsigned char raw[26];

	if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
		static _Atomic unsigned long counter;
		snprintf(out, 32, "SG%024lu", ++counter);
		return;
	}
	for (size_t i = 0; i < sizeof raw; i++)
		out[i] = abc[raw[i] & 31];
	out[sizeof raw] = '\0';
}

static void record(struct code_run *r, struct code_call *c, const char *status)
{
	struct code_outcome *o;

	if (r->nrecent == CODE_SUMMARY_RECENT) {
		free(r->recent[0].name);
		memmove(r->recent, r->recent + 1, sizeof r->recent[0] * (CODE_SUMMARY_RECENT - 1));
		r->nrecent--;
	}
	o = &r->recent[r->nrecent++];
	o->guest = c->guest;
	o->name = c->name;
	c->name = NULL;
	o->status = status;
	if (strcmp(status, "succeeded") == 0)
		r->succeeded++;
	else if (strcmp(status, "failed") == 0)
		r->failed++;
	else
		r->interrupted++;
}

/*
 * The reader thread's half: record the answer and wake the worker.  The
 * answer is copied here, on the thread that owns the frame, so the worker
 * owns its copy alone (see the invariants); a copy that fails is an empty
 * answer, which the program sees as a failed call.
 */
static void call_deliver(struct sg_callback *cb, json_t *answer)
{
	struct code_call *c = (struct code_call *)cb;
	json_t *mine = json_deep_copy(answer);
	uint64_t one = 1;

	if (!mine)
		mine = json_object();
	pthread_mutex_lock(&c->run->lock);
	if (!c->answer) {
		c->answer = mine;
		mine = NULL;
	}
	pthread_mutex_unlock(&c->run->lock);
	json_decref(mine);
	(void)!write(c->run->wake, &one, sizeof one);
}

static void call_free(struct code_call *c)
{
	json_decref(c->answer);
	free(c->name);
	free(c);
}

static sg_err queue_line(struct code_run *r, json_t *msg)
{
	char *text = json_dumps(msg, JSON_COMPACT | JSON_ENSURE_ASCII);
	sg_err rc = SG_E_INTERNAL;

	json_decref(msg);
	if (text && !sg_buf_adds(&r->out, text) && !sg_buf_addc(&r->out, '\n'))
		rc = SG_OK;
	free(text);
	return rc;
}

/* Whether program.tools offers name: a broken engine cannot widen them. */
static bool offered(const struct code_run *r, const char *name)
{
	json_t *t;
	size_t i;

	json_array_foreach(r->tools, i, t) {
		const char *n = json_string_value(json_object_get(t, "name"));

		if (n && strcmp(n, name) == 0)
			return true;
	}
	return false;
}

/*
 * Whether a call's arguments are JSON text, as JSON.stringify writes it:
 * the host parses them, and a program cannot send anything else.  Any
 * value, NUL in strings and integers past int64 included.
 */
static bool json_text(json_t *args)
{
	json_t *v = json_loadb(json_string_value(args), json_string_length(args),
			       JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL |
				       JSON_DECODE_INT_AS_REAL,
			       NULL);
	bool ok = v != NULL;

	json_decref(v);
	return ok;
}

/* A `call` line: a nested call goes to the host. */
static void start_call(struct code_run *r, json_t *msg)
{
	json_t *id = json_object_get(msg, "id"), *name = json_object_get(msg, "name");
	json_t *args = json_object_get(msg, "arguments"), *frame;
	struct code_call *c;
	char guest[24];

	if (!json_is_integer(id) || json_integer_value(id) < 1 || !json_is_string(name) ||
	    !json_is_string(args) || r->pending >= CODE_PENDING_MAX ||
	    !offered(r, json_string_value(name)) || !json_text(args)) {
		run_fail(r, "PTC runtime sent an invalid call");
		return;
	}
	c = calloc(1, sizeof *c);
	if (!c || !(c->name = strdup(json_string_value(name)))) {
		free(c);
		run_fail(r, "out of memory");
		return;
	}
	c->run = r;
	c->guest = json_integer_value(id);
	fresh_id(c->id);
	c->cb.id = c->id;
	c->cb.deliver = call_deliver;
	c->next = r->calls;
	r->calls = c;
	r->pending++;
	r->total++;
	snprintf(guest, sizeof guest, "%lld", (long long)c->guest);
	frame = json_pack("{s:s, s:O, s:s, s:{s:s, s:O, s:O, s:s}}", "method", "tool",
			  "parent_id", r->op->id, "id", c->id, "data", "id", guest, "name", name,
			  "arguments", args, "kind", "function");
	sg_callback_add(r->s, &c->cb);
	if (!frame || !sg_wire_send(r->s->wire, frame))
		run_fail(r, "the host's connection is closed");
}

/* The model_text view: the text parts of a result's content, joined. */
static void add_model_text(json_t *result)
{
	json_t *content = json_object_get(result, "content"), *part;
	struct sg_buf b = SG_BUF_INIT(CODE_RESULT_MAX);
	size_t i;

	if (!json_is_object(result))
		return;
	json_array_foreach(content, i, part) {
		const char *text = json_string_value(json_object_get(part, "text"));

		const char *type = json_string_value(json_object_get(part, "type"));

		if (!text || !type || strcmp(type, "text") != 0)
			continue;
		if ((b.len && sg_buf_addc(&b, '\n')) || sg_buf_adds(&b, text))
			break;
	}
	json_object_set_new(result, "model_text", json_stringn(b.p, b.len));
	sg_buf_release(&b);
}

/* Images and audio of a nested result travel in Media, as on the host. */
static void keep_media(struct code_run *r, json_t *result)
{
	json_t *part;
	size_t i;

	json_array_foreach(json_object_get(result, "content"), i, part) {
		const char *type = json_string_value(json_object_get(part, "type"));

		if (type && (strcmp(type, "image") == 0 || strcmp(type, "audio") == 0))
			json_array_append(r->media, part);
	}
}

/* One answered call: its result goes to the program. */
static void settle_call(struct code_run *r, struct code_call *c, json_t *answer)
{
	json_t *data = json_object_get(answer, "data"), *err = json_object_get(answer, "error");
	json_t *msg;
	bool failed;

	if (err || !data) {
		msg = json_pack("{s:I, s:s}", "id", (json_int_t)c->guest, "error",
				json_is_string(err) ? json_string_value(err) : "tool call failed");
		failed = true;
	} else {
		/* The answer is this worker's own copy (call_deliver). */
		json_t *result = json_incref(data);

		failed = json_is_true(json_object_get(result, "is_error"));
		keep_media(r, result);
		if (strcmp(r->view, "model_text") == 0)
			add_model_text(result);
		msg = json_pack("{s:I, s:o}", "id", (json_int_t)c->guest, "value", result);
	}
	record(r, c, failed ? "failed" : "succeeded");
	if (!msg || queue_line(r, msg))
		run_fail(r, "out of memory");
}

/* Takes every answered call off the list, then settles each. */
static void drain_answers(struct code_run *r)
{
	struct code_call *ready = NULL, **link = &r->calls;
	uint64_t n;

	(void)!read(r->wake, &n, sizeof n);
	pthread_mutex_lock(&r->lock);
	while (*link) {
		struct code_call *c = *link;

		if (c->answer) {
			*link = c->next;
			c->next = ready;
			ready = c;
		} else {
			link = &c->next;
		}
	}
	pthread_mutex_unlock(&r->lock);
	while (ready) {
		struct code_call *c = ready;

		ready = c->next;
		sg_callback_remove(r->s, &c->cb);
		r->pending--;
		if (!r->done)
			settle_call(r, c, c->answer);
		else
			record(r, c, "interrupted (effects unknown)");
		call_free(c);
	}
}

/* The program's last word: its value or error, and its state. */
static void finish_line(struct code_run *r, json_t *msg)
{
	json_t *error = json_object_get(msg, "error"), *state = json_object_get(msg, "state");

	if (error) {
		run_fail(r, json_is_string(error) ? json_string_value(error) : "program failed");
		return;
	}
	if (state && !json_is_object(state)) {
		run_fail(r, "PTC runtime sent an invalid result");
		return;
	}
	r->value = json_incref(json_object_get(msg, "value"));
	if (r->value) {
		size_t n = json_dumpb(r->value, NULL, 0, JSON_COMPACT);

		if (r->printed + n > CODE_OUTPUT_MAX) {
			run_fail(r, "PTC output exceeded the byte limit");
			return;
		}
	}
	r->state = json_incref(state);
	r->done = true;
}

static void log_line(struct code_run *r, json_t *msg)
{
	json_t *text = json_object_get(msg, "text");

	if (!json_is_string(text)) {
		run_fail(r, "PTC runtime sent an invalid log");
		return;
	}
	r->printed += json_dumpb(text, NULL, 0, JSON_ENCODE_ANY) + 1;
	if (r->printed > CODE_OUTPUT_MAX) {
		run_fail(r, "PTC output exceeded the byte limit");
		return;
	}
	json_array_append(r->logs, text);
}

static void child_line(struct code_run *r, const char *p, size_t n)
{
	json_t *msg = json_loadb(p, n, JSON_REJECT_DUPLICATES, NULL);
	const char *t = json_string_value(json_object_get(msg, "t"));

	if (!t)
		run_fail(r, "PTC runtime sent an invalid message");
	else if (strcmp(t, "log") == 0)
		log_line(r, msg);
	else if (strcmp(t, "call") == 0)
		start_call(r, msg);
	else if (strcmp(t, "done") == 0)
		finish_line(r, msg);
	else
		run_fail(r, "PTC runtime sent an invalid message");
	json_decref(msg);
}

/* Reads what sg-jsrun wrote and acts on each whole line. */
static void read_child(struct code_run *r)
{
	char *dst;
	ssize_t got;
	char *nl;

	if (sg_buf_reserve(&r->in, 65536, &dst)) {
		run_fail(r, "PTC control message exceeds the byte limit");
		return;
	}
	got = read(r->from_child, dst, 65536);
	if (got < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (got <= 0) {
		run_fail(r, "PTC runtime exited before the program finished");
		return;
	}
	sg_buf_commit(&r->in, (size_t)got);
	while (!r->done && (nl = memchr(r->in.p, '\n', r->in.len))) {
		size_t n = (size_t)(nl - r->in.p);

		child_line(r, r->in.p, n);
		sg_buf_consume(&r->in, n + 1);
	}
}

static void write_child(struct code_run *r)
{
	ssize_t w = write(r->to_child, r->out.p, r->out.len);

	if (w > 0)
		sg_buf_consume(&r->out, (size_t)w);
	else if (w < 0 && errno != EAGAIN && errno != EINTR)
		run_fail(r, "PTC runtime exited before the program finished");
}

/* The poll loop: until done, cancelled or past the deadline. */
static sg_err run_loop(struct code_run *r, int64_t deadline_ms)
{
	while (!r->done) {
		struct pollfd pf[4] = {
			{ .fd = r->from_child, .events = POLLIN },
			{ .fd = r->wake, .events = POLLIN },
			{ .fd = sg_cancel_fd(&r->op->cancel), .events = POLLIN },
			{ .fd = r->out.len ? r->to_child : -1, .events = POLLOUT },
		};
		int wait = -1;

		if (deadline_ms) {
			int64_t left = deadline_ms - sg_now_ms();

			if (left <= 0) {
				run_fail(r, deadline_text);
				break;
			}
			wait = left > INT_MAX ? INT_MAX : (int)left;
		}
		if (poll(pf, 4, wait) < 0 && errno != EINTR)
			return sg_err_set(&r->op->err, SG_E_INTERNAL, "poll: %s", strerror(errno));
		if (sg_cancel_check(&r->op->cancel))
			return sg_cancel_check(&r->op->cancel);
		if (pf[1].revents)
			drain_answers(r);
		if (pf[3].revents && !r->done)
			write_child(r);
		if (pf[0].revents && !r->done)
			read_child(r);
	}
	return SG_OK;
}

/* sg-jsrun beside sg-helper: the build directory, or libexec/sandgate. */
static char *program_path(const struct sg_session *s)
{
	const char *slash = s->helper_path ? strrchr(s->helper_path, '/') : NULL;
	char *path = NULL;

	if (!slash)
		return NULL;
	if (asprintf(&path, "%.*s/%s", (int)(slash - s->helper_path), s->helper_path,
		     code_program) < 0)
		return NULL;
	return path;
}

static sg_err spawn_child(struct code_run *r)
{
	int in[2] = { -1, -1 }, out[2] = { -1, -1 };
	char *path = program_path(r->s);
	char *argv[] = { (char *)code_program, NULL }, *envp[] = { NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, dfl;
	sg_err rc = SG_OK;

	if (!path || pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC)) {
		rc = sg_err_set(&r->op->err, SG_E_INTERNAL, "run_code: cannot start %s", code_program);
		goto out;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	posix_spawnattr_init(&at);
	sigemptyset(&none);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGPIPE);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &dfl);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	if (posix_spawn(&r->pid, path, &fa, &at, argv, envp) != 0) {
		r->pid = 0;
		rc = sg_err_set(&r->op->err, SG_E_UNAVAILABLE, "run_code: cannot start %s", path);
	}
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (!rc) {
		r->to_child = in[1], in[1] = -1;
		r->from_child = out[0], out[0] = -1;
		fcntl(r->to_child, F_SETFL, O_NONBLOCK);
		fcntl(r->from_child, F_SETFL, O_NONBLOCK);
	}
out:
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (out[i] >= 0)
			close(out[i]);
	}
	free(path);
	return rc;
}

/* ---- the state table ---- */

static struct code_scope *scope_find(const char *key)
{
	for (struct code_scope *sc = scopes; sc; sc = sc->next)
		if (strcmp(sc->key, key) == 0)
			return sc;
	return NULL;
}

/*
 * Marks the scope busy; its committed state (new ref), or NULL if busy.
 * A scope held by a program whose token already fired (the host cancelled
 * it and went on) is waited for, up to CODE_RETIRE_WAIT_MS, so the host's
 * next program does not race the cancelled one's clean-up; one held by a
 * running program, up to CODE_CANCEL_IN_FLIGHT_MS, for a cancel that may
 * still be crossing a relay.
 */
static json_t *scope_enter(const char *key, const struct sg_cancel *mine, bool *busy)
{
	int64_t start = sg_now_ms();
	struct code_scope *sc;
	json_t *state = NULL;

	pthread_mutex_lock(&scopes_lock);
	while ((sc = scope_find(key)) && sc->busy && !sg_cancel_check(mine) &&
	       sg_now_ms() < start + (sg_cancel_check(sc->holder) ? CODE_RETIRE_WAIT_MS
								   : CODE_CANCEL_IN_FLIGHT_MS)) {
		struct timespec ts = sg_time_after(CLOCK_REALTIME, 20);

		pthread_cond_timedwait(&scopes_free, &scopes_lock, &ts);
	}
	*busy = sc && sc->busy;
	if (!*busy) {
		if (!sc && (sc = calloc(1, sizeof *sc)) && !(sc->key = strdup(key)))
			free(sc), sc = NULL;
		if (sc && !sc->state) {
			sc->next = scopes;
			scopes = sc;
			sc->state = json_object();
		}
		if (sc) {
			sc->busy = true;
			sc->holder = mine;
			state = json_deep_copy(sc->state);
		}
	}
	pthread_mutex_unlock(&scopes_lock);
	return state;
}

/* An idle scope with nothing stored is forgotten: actors come and go. */
static void scope_drop(struct code_scope *sc)
{
	for (struct code_scope **link = &scopes; *link; link = &(*link)->next) {
		if (*link == sc) {
			*link = sc->next;
			break;
		}
	}
	scopes_bytes -= sc->bytes;
	json_decref(sc->state);
	free(sc->key);
	free(sc);
}

static size_t state_bytes(json_t *state, size_t *keys)
{
	const char *k;
	json_t *v;
	size_t n = 0;

	*keys = 0;
	json_object_foreach(state, k, v) {
		n += strlen(k) + json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
		(*keys)++;
	}
	return n;
}

/*
 * Leaves the scope; with a state (a program that succeeded), commits it
 * first when every quota holds.  NULL, or the quota it broke.
 */
static const char *scope_leave(const char *key, json_t *state)
{
	struct code_scope *sc;
	const char *broke = NULL;
	size_t keys, bytes = state ? state_bytes(state, &keys) : 0;

	pthread_mutex_lock(&scopes_lock);
	sc = scope_find(key);
	if (sc && state) {
		size_t used = 0;

		for (struct code_scope *o = scopes; o; o = o->next)
			used += json_object_size(o->state) ? 1 : 0;
		if (keys > CODE_STATE_KEYS_MAX)
			broke = "PTC state exceeds its key limit";
		else if (bytes > CODE_STATE_BYTES_MAX)
			broke = "PTC state exceeds its byte limit";
		else if (scopes_bytes - sc->bytes + bytes > CODE_STATE_TOTAL_MAX)
			broke = "PTC state exceeds the worker's byte limit";
		else if (keys && !json_object_size(sc->state) && used >= CODE_SCOPES_MAX)
			broke = "PTC state exceeds the scope limit";
		if (!broke) {
			json_decref(sc->state);
			sc->state = json_incref(state);
			scopes_bytes = scopes_bytes - sc->bytes + bytes;
			sc->bytes = bytes;
		}
	}
	if (sc) {
		sc->busy = false;
		sc->holder = NULL;
		if (json_object_size(sc->state) == 0)
			scope_drop(sc);
	}
	pthread_cond_broadcast(&scopes_free);
	pthread_mutex_unlock(&scopes_lock);
	return broke;
}

/* ---- the summary and the reply ---- */

static char *call_summary(const struct code_run *r)
{
	struct sg_buf head = SG_BUF_INIT(CODE_SUMMARY_MAX), lines = SG_BUF_INIT(CODE_SUMMARY_MAX);
	static const char footer[] = "Tool effects are not rolled back; failed or interrupted "
				     "calls may have partial effects. Check before retrying.";
	char *out = NULL;
	int shown = 0;

	if (r->total == 0)
		return strdup("");
	if (sg_buf_addf(&head, "Nested tool calls: %d succeeded, %d failed, %d interrupted.\n",
			r->succeeded, r->failed, r->interrupted))
		goto out;
	for (int i = r->nrecent - 1; i >= 0; i--) {
		char line[512];
		int n = snprintf(line, sizeof line, "#%lld \"%s\": %s\n",
				 (long long)r->recent[i].guest,
				 r->recent[i].name ? r->recent[i].name : "", r->recent[i].status);

		if (n < 0 || head.len + (size_t)n + lines.len + sizeof footer + 128 > CODE_SUMMARY_MAX)
			break;
		{
			struct sg_buf next = SG_BUF_INIT(CODE_SUMMARY_MAX);

			if (sg_buf_adds(&next, line) || sg_buf_add(&next, lines.p, lines.len)) {
				sg_buf_release(&next);
				break;
			}
			sg_buf_release(&lines);
			lines = next;
		}
		shown++;
	}
	if (shown < r->total &&
	    sg_buf_addf(&head, "Showing last %d calls; %d earlier calls omitted.\n", shown,
			r->total - shown))
		goto out;
	if (!sg_buf_add(&head, lines.p, lines.len) && !sg_buf_adds(&head, footer))
		out = sg_buf_take(&head, NULL);
out:
	sg_buf_release(&head);
	sg_buf_release(&lines);
	return out ? out : strdup("");
}

static json_t *build_result(struct code_run *r)
{
	char *summary = call_summary(r);
	json_t *res = json_pack("{s:O, s:O?, s:s, s:O, s:s, s:s}", "Logs", r->logs, "Value",
				r->value, "Error", r->error ? r->error : "", "Media", r->media,
				"CallSummary", summary ? summary : "", "ResultView", r->view);

	free(summary);
	if (res && json_dumpb(res, NULL, 0, JSON_COMPACT) > CODE_RESULT_MAX) {
		json_object_set_new(res, "Media", json_array());
		json_object_set_new(res, "Value", json_null());
		json_object_set_new(res, "Error", json_string("PTC result exceeds the byte limit"));
	}
	return res;
}

/* ---- the method ---- */

static sg_err read_request(struct sg_op *op, const char **code, json_t **tools,
			   const char **view, int64_t *timeout_ms, const char **actor)
{
	json_t *program = json_object_get(op->data, "program");
	sg_err rc;

	*view = "canonical";
	if (!json_is_object(program))
		return sg_err_set(&op->err, SG_E_INVALID_ARGUMENT, "program must be an object");
	if ((rc = sg_arg_str(program, "code", true, code, &op->err)) ||
	    (rc = sg_arg_str(program, "result_view", false, view, &op->err)) ||
	    (rc = sg_arg_int(op->data, "timeout_ms", 0, 0, CODE_TIMEOUT_MAX_MS, timeout_ms,
			     &op->err)) ||
	    (rc = sg_arg_str(op->data, "actor", false, actor, &op->err)))
		return rc;
	if (strcmp(*view, "canonical") != 0 && strcmp(*view, "model_text") != 0)
		return sg_err_set(&op->err, SG_E_INVALID_ARGUMENT,
				  "result_view %s is not one this backend can honour", *view);
	*tools = json_object_get(program, "tools");
	if (*tools && !json_is_array(*tools))
		return sg_err_set(&op->err, SG_E_INVALID_ARGUMENT, "program.tools must be an array");
	return SG_OK;
}

static sg_err boot_child(struct code_run *r, const char *code, json_t *tools, json_t *state)
{
	json_t *boot = json_pack("{s:s, s:O, s:O, s:I, s:i, s:i, s:I}", "code", code, "tools",
				 tools ? tools : json_null(), "state", state, "max_output_bytes",
				 (json_int_t)CODE_OUTPUT_MAX, "max_pending", CODE_PENDING_MAX,
				 "state_keys_max", CODE_STATE_KEYS_MAX, "state_bytes_max",
				 (json_int_t)CODE_STATE_BYTES_MAX);

	if (!boot || queue_line(r, boot))
		return sg_err_set(&r->op->err, SG_E_INTERNAL, "run_code: out of memory");
	return SG_OK;
}

/* Ends the child and every call still waiting (interrupted). */
static void run_close(struct code_run *r)
{
	if (r->closed)
		return;
	r->closed = true;
	if (r->pid > 0) {
		kill(r->pid, SIGKILL);
		while (waitpid(r->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	while (r->calls) {
		struct code_call *c = r->calls;

		r->calls = c->next;
		sg_callback_remove(r->s, &c->cb);
		record(r, c, "interrupted (effects unknown)");
		call_free(c);
	}
	if (r->to_child >= 0)
		close(r->to_child);
	if (r->from_child >= 0)
		close(r->from_child);
	if (r->wake >= 0)
		close(r->wake);
	sg_buf_release(&r->in);
	sg_buf_release(&r->out);
	pthread_mutex_destroy(&r->lock);
}

/* A run before its child starts: the request read, the scope held. */
static void run_init(struct code_run *r, struct sg_op *op)
{
	*r = (struct code_run){ .op = op, .s = op->s, .to_child = -1, .from_child = -1,
				.wake = -1, .in = SG_BUF_INIT(CODE_LINE_MAX),
				.out = SG_BUF_INIT(CODE_LINE_MAX) };
	pthread_mutex_init(&r->lock, NULL);
}

/*
 * Reads the request, enters its state scope and queues the boot line;
 * *deadline is 0 for none.
 */
static sg_err run_open(struct code_run *r, int64_t *deadline)
{
	struct sg_op *op = r->op;
	const char *code, *view, *actor = "";
	json_t *tools = NULL, *state = NULL, *key;
	int64_t timeout_ms = 0;
	bool busy = false;
	sg_err rc;

	rc = read_request(op, &code, &tools, &view, &timeout_ms, &actor);
	if (rc)
		goto out;
	r->view = view;
	r->tools = tools;
	key = json_pack("[s, s, s]", op->s->session_id ? op->s->session_id : "", actor,
			op->s->root ? op->s->root : "");
	r->scope = key ? json_dumps(key, JSON_COMPACT) : NULL;
	json_decref(key);
	if (!r->scope || !(state = scope_enter(r->scope, &op->cancel, &busy))) {
		rc = sg_err_set(&op->err, busy ? SG_E_UNAVAILABLE : SG_E_INTERNAL, "%s",
				busy ? busy_text : "run_code: out of memory");
		goto out;
	}
	r->entered = true;
	*deadline = timeout_ms ? sg_now_ms() + timeout_ms : 0;
	r->logs = json_array();
	r->media = json_array();
	r->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->wake < 0 || !r->logs || !r->media) {
		rc = sg_err_set(&op->err, SG_E_INTERNAL, "run_code: out of resources");
		goto out;
	}
	rc = boot_child(r, code, tools, state);
out:
	json_decref(state);
	return rc;
}

/* The program is over: its state committed if it succeeded, the reply. */
static sg_err run_end(struct code_run *r, json_t **out)
{
	const char *broke;

	run_close(r);
	broke = scope_leave(r->scope, r->error ? NULL : r->state);
	r->entered = false;
	if (broke) {
		free(r->error);
		r->error = strdup(broke);
	}
	*out = build_result(r);
	if (!*out)
		return sg_err_set(&r->op->err, SG_E_INTERNAL, "run_code: out of memory");
	return SG_OK;
}

/* Whatever the run still holds, on every path. */
static void run_release(struct code_run *r)
{
	run_close(r);
	if (r->entered)
		(void)scope_leave(r->scope, NULL);
	json_decref(r->logs);
	json_decref(r->media);
	json_decref(r->value);
	json_decref(r->state);
	for (int i = 0; i < r->nrecent; i++)
		free(r->recent[i].name);
	free(r->error);
	free(r->scope);
}

sg_err sg_code_run(struct sg_op *op, json_t **out)
{
	struct code_run r;
	int64_t deadline = 0;
	sg_err rc;

	*out = NULL;
	run_init(&r, op);
	if (!(rc = run_open(&r, &deadline)) && !(rc = spawn_child(&r)) &&
	    !(rc = run_loop(&r, deadline)))
		rc = run_end(&r, out);
	run_release(&r);
	return rc;
}

/* ---- the line seam (code.h), for the fuzz target ---- */

struct sg_code_seam {
	struct code_run r;
};

sg_err sg_code_seam_open(struct sg_op *op, struct sg_code_seam **out)
{
	struct sg_code_seam *seam = malloc(sizeof *seam);
	int64_t deadline;
	sg_err rc;

	*out = NULL;
	if (!seam)
		return sg_err_set(&op->err, SG_E_INTERNAL, "run_code: out of memory");
	run_init(&seam->r, op);
	rc = run_open(&seam->r, &deadline);
	if (rc) {
		run_release(&seam->r);
		free(seam);
		return rc;
	}
	*out = seam;
	return SG_OK;
}

bool sg_code_seam_line(struct sg_code_seam *seam, const char *line, size_t n)
{
	struct code_run *r = &seam->r;

	/* As run_loop does on a wake, then as read_child does with a line. */
	drain_answers(r);
	if (!r->done)
		child_line(r, line, n);
	return !r->done;
}

sg_err sg_code_seam_close(struct sg_code_seam *seam, json_t **out)
{
	sg_err rc;

	*out = NULL;
	rc = run_end(&seam->r, out);
	run_release(&seam->r);
	free(seam);
	return rc;
}
