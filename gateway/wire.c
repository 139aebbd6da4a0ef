#define _GNU_SOURCE /* eventfd is Linux-only */
#include "gateway/wire.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/json.h"
#include "base/buf.h"
#include "base/cancel.h"
#include "base/limits.h"
#include "base/log.h"

#define READ_CHUNK (256 * SG_KiB)

struct msg {
	struct msg *next;
	char *data; /* json text, without the newline */
	size_t len;
};

struct sg_wire {
	int in_fd, out_fd;
	int stop_fd; /* eventfd: wakes the reader */
	atomic_bool stopped; /* sg_wire_stop was called (from a signal handler too) */
	struct sg_buf in;
	size_t scanned; /* bytes of `in` known to hold no newline */
	size_t frame_len; /* the last frame read, its newline included */
	bool eof;

	pthread_t writer;
	pthread_mutex_t lock;
	pthread_cond_t cond;      /* queue grew, or quitting */
	pthread_cond_t drained;   /* queue emptied, or died */
	struct msg *head, **tail;
	size_t queued;            /* what the queue holds (msg_cost) */
	bool writing;             /* the writer holds a message */
	bool quit, dead, joinable;
	void (*on_dead)(void *);
	void *payload;
};

static bool write_all(int fd, const char *data, size_t len)
{
	struct iovec iov[2] = { { (void *)data, len }, { "\n", 1 } };
	int n = 2;

	while (n > 0) {
		ssize_t w = writev(fd, iov + (2 - n), n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return false;
		}
		for (int i = 2 - n; i < 2 && w > 0; i++) {
			size_t take = (size_t)w < iov[i].iov_len ? (size_t)w : iov[i].iov_len;

			iov[i].iov_base = (char *)iov[i].iov_base + take;
			iov[i].iov_len -= take;
			w -= (ssize_t)take;
		}
		while (n > 0 && iov[2 - n].iov_len == 0)
			n--;
	}
	return true;
}

/* What a queued message costs in memory, its bookkeeping included, so
 * that a flood of tiny replies counts against SG_WIRE_QUEUE_MAX too. */
static size_t msg_cost(const struct msg *m)
{
	return m->len + 1 + sizeof(*m);
}

static void drop_queue(struct sg_wire *w)
{
	while (w->head) {
		struct msg *m = w->head;

		w->head = m->next;
		free(m->data);
		free(m);
	}
	w->tail = &w->head;
	w->queued = 0;
}

/*
 * Mark the wire dead, the lock held: drop what is queued and wake whoever
 * flushes, and the writer if it waits.  True for the call that killed it, which alone tells the owner
 * (on_dead), so the owner hears of it once whatever killed it.
 */
static bool die(struct sg_wire *w)
{
	bool first = !w->dead;

	w->dead = true;
	drop_queue(w);
	pthread_cond_broadcast(&w->drained);
	pthread_cond_broadcast(&w->cond);
	return first;
}

static void *writer_main(void *arg)
{
	struct sg_wire *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct msg *m;
		bool ok, first;
		int why;

		while (!w->head && !w->quit && !w->dead)
			pthread_cond_wait(&w->cond, &w->lock);
		if (!w->head || w->dead)
			break;
		m = w->head;
		w->head = m->next;
		if (!w->head)
			w->tail = &w->head;
		w->queued -= msg_cost(m);
		w->writing = true;
		pthread_mutex_unlock(&w->lock);

		ok = write_all(w->out_fd, m->data, m->len);
		why = errno;
		free(m->data);
		free(m);

		pthread_mutex_lock(&w->lock);
		w->writing = false;
		if (!ok) {
			first = die(w);
			pthread_mutex_unlock(&w->lock);
			if (first) {
				sg_log_warn("writing to stdout failed: %s", strerror(why));
				if (w->on_dead)
					w->on_dead(w->payload);
			}
			pthread_mutex_lock(&w->lock);
			break;
		}
		if (!w->head)
			pthread_cond_broadcast(&w->drained);
	}
	pthread_cond_broadcast(&w->drained);
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

sg_err sg_wire_new(int in_fd, int out_fd, void (*on_dead)(void *),
		   void *payload, struct sg_wire **out)
{
	struct sg_wire *w = calloc(1, sizeof(*w));

	*out = NULL;
	if (!w)
		return SG_E_INTERNAL;
	w->in_fd = in_fd;
	w->out_fd = out_fd;
	w->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	sg_buf_init(&w->in, SG_MAX_FRAME + READ_CHUNK);
	w->tail = &w->head;
	w->on_dead = on_dead;
	w->payload = payload;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	pthread_cond_init(&w->drained, NULL);
	if (w->stop_fd < 0 || pthread_create(&w->writer, NULL, writer_main, w)) {
		if (w->stop_fd >= 0)
			close(w->stop_fd);
		free(w);
		return SG_E_INTERNAL;
	}
	w->joinable = true;
	*out = w;
	return SG_OK;
}

void sg_wire_free(struct sg_wire *w)
{
	bool stuck;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->quit = true;
	stuck = w->writing;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	if (stuck) {
		/* Joining would wait on the host: leave the thread to exit(). */
		pthread_detach(w->writer);
		return;
	}
	pthread_join(w->writer, NULL);
	drop_queue(w);
	sg_buf_release(&w->in);
	close(w->stop_fd);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	pthread_cond_destroy(&w->drained);
	free(w);
}

/*
 * The id types a frame may carry: a string (the host's), an integer (other
 * hosts'), or none at all (absent or null), which the server answers with
 * an error under the empty id as the host's own worker does.  Any other
 * type is a frame the host itself could not have written.
 */
static bool id_valid(const json_t *id)
{
	return !id || json_is_null(id) || json_is_string(id) || json_is_integer(id);
}

sg_err sg_wire_parse(const char *p, size_t n, json_t **frame,
		     struct sg_errinfo *err)
{
	struct sg_errinfo why = { 0 };
	json_t *j;
	sg_err rc;

	*frame = NULL;
	rc = sg_json_parse(p, n, SG_JSON_REJECT_DUPLICATES | SG_JSON_ALLOW_NUL,
			   &j, &why);
	if (rc)
		return sg_err_set(err, rc == SG_E_INTERNAL ? rc : SG_E_INVALID_REQUEST,
				  "malformed frame: %s", why.msg);
	if (!json_is_object(j) || !id_valid(json_object_get(j, "id"))) {
		json_decref(j);
		return sg_err_set(err, SG_E_INVALID_REQUEST,
				  "malformed frame: not an object with a string, integer or no id");
	}
	*frame = j;
	return SG_OK;
}

/* Wait for input or a stop; false when stopped. */
static bool wait_input(struct sg_wire *w)
{
	struct pollfd pfd[2] = { { w->in_fd, POLLIN, 0 }, { w->stop_fd, POLLIN, 0 } };

	for (;;) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return false;
		}
		if (pfd[1].revents)
			return false;
		if (pfd[0].revents)
			return true;
	}
}

/* A message from a peer: any JSON object (events carry no id). */
static sg_err parse_msg(const char *p, size_t n, json_t **msg, struct sg_errinfo *err)
{
	struct sg_errinfo why = { 0 };
	sg_err rc;

	*msg = NULL;
	rc = sg_json_parse(p, n, SG_JSON_REJECT_DUPLICATES | SG_JSON_ALLOW_NUL, msg, &why);
	if (rc)
		return sg_err_set(err, rc == SG_E_INTERNAL ? rc : SG_E_INVALID_REQUEST,
				  "malformed frame: %s", why.msg);
	if (!json_is_object(*msg)) {
		json_decref(*msg);
		*msg = NULL;
		return sg_err_set(err, SG_E_INVALID_REQUEST, "malformed frame: not an object");
	}
	return SG_OK;
}

static sg_err read_frame(struct sg_wire *w, bool any, json_t **frame,
			 struct sg_errinfo *err)
{
	*frame = NULL;
	for (;;) {
		char *nl = memchr(w->in.p + w->scanned, '\n', w->in.len - w->scanned);
		char *dst;
		ssize_t n;
		sg_err rc;

		if (nl) {
			size_t len = (size_t)(nl - w->in.p);

			if (len + 1 > SG_MAX_FRAME)
				return sg_err_set(err, SG_E_TOO_LARGE,
						  "a frame of %zu bytes exceeds the %zu byte limit",
						  len + 1, SG_MAX_FRAME);
			w->frame_len = len + 1;
			rc = any ? parse_msg(w->in.p, len, frame, err)
				 : sg_wire_parse(w->in.p, len, frame, err);
			sg_buf_consume(&w->in, len + 1);
			w->scanned = 0;
			return rc;
		}
		w->scanned = w->in.len;
		if (w->in.len >= SG_MAX_FRAME)
			return sg_err_set(err, SG_E_TOO_LARGE,
					  "a frame exceeds the %zu byte limit", SG_MAX_FRAME);
		if (w->eof)
			return sg_err_set(err, SG_E_NOT_FOUND, "end of input");
		if (!wait_input(w))
			return sg_err_set(err, SG_E_CANCELLED, "reading stopped");
		rc = sg_buf_reserve(&w->in, READ_CHUNK, &dst);
		if (rc)
			return sg_err_set(err, rc, "out of memory reading a frame");
		n = read(w->in_fd, dst, READ_CHUNK);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			/* An unterminated last line is ignored (protocol section 10). */
			w->eof = true;
			continue;
		}
		sg_buf_commit(&w->in, (size_t)n);
	}
}

sg_err sg_wire_read(struct sg_wire *w, json_t **frame, struct sg_errinfo *err)
{
	return read_frame(w, false, frame, err);
}

sg_err sg_wire_read_msg(struct sg_wire *w, json_t **msg, struct sg_errinfo *err)
{
	return read_frame(w, true, msg, err);
}

bool sg_wire_stopped(struct sg_wire *w)
{
	return atomic_load(&w->stopped);
}

size_t sg_wire_frame_len(const struct sg_wire *w)
{
	return w->frame_len;
}

void sg_wire_stop(struct sg_wire *w)
{
	uint64_t one = 1;

	atomic_store(&w->stopped, true);
	if (write(w->stop_fd, &one, sizeof(one)) < 0)
		sg_log_debug("eventfd write failed: %s", strerror(errno));
}

/* Queue text (stolen) as one message. */
static bool enqueue_text(struct sg_wire *w, char *text, size_t len)
{
	struct msg *m = malloc(sizeof(*m));
	bool ok = false, overflow = false;

	if (!m) {
		free(text);
		return false;
	}
	m->data = text;
	m->len = len;
	m->next = NULL;
	pthread_mutex_lock(&w->lock);
	if (!w->dead && !w->quit && w->queued + msg_cost(m) > SG_WIRE_QUEUE_MAX) {
		/*
		 * The host has stopped reading while requests and events keep
		 * coming: holding more would grow without bound, and dropping
		 * a message would break exactly-one-reply.  A host that does
		 * not read is treated like one whose pipe broke (protocol
		 * section 11): the wire dies and the owner shuts down.
		 */
		overflow = die(w);
	} else if (!w->dead && !w->quit) {
		*w->tail = m;
		w->tail = &m->next;
		w->queued += msg_cost(m);
		ok = true;
	}
	pthread_mutex_unlock(&w->lock);
	/* Signalled after the unlock, as the pool's workers are (pool.c). */
	if (ok) {
		pthread_cond_signal(&w->cond);
	} else {
		free(m->data);
		free(m);
	}
	if (overflow) {
		sg_log_err("the host has left %zu MiB of output unread; treating it as gone",
			   (size_t)SG_WIRE_QUEUE_MAX / SG_MiB);
		if (w->on_dead)
			w->on_dead(w->payload);
	}
	return ok;
}

bool sg_wire_send_text(struct sg_wire *w, char *text, size_t len)
{
	if (len + 1 > SG_MAX_FRAME) {
		sg_log_err("a message over the frame limit was not sent");
		free(text);
		return false;
	}
	return enqueue_text(w, text, len);
}

bool sg_wire_send_error(struct sg_wire *w, json_t *id, const struct sg_errinfo *e)
{
	char text[SG_ERR_MSG + 64];

	sg_err_format(e, text, sizeof(text));
	return sg_wire_send(w, json_pack("{s:O, s:s}", "id", id, "error", text));
}

bool sg_wire_send_error_text(struct sg_wire *w, json_t *id, sg_err code, const char *text)
{
	json_t *e = json_sprintf("%s: %s", sg_err_word(code), text);

	return sg_wire_send(w, json_pack("{s:O, s:o}", "id", id, "error",
					 e ? e : json_string(sg_err_word(code))));
}

bool sg_wire_send(struct sg_wire *w, json_t *msg)
{
	/* The newline must fit too. */
	struct sg_buf b = SG_BUF_INIT(SG_MAX_FRAME - 1);
	sg_err rc = sg_json_dump(msg, &b);

	/*
	 * No frame leaves over the cap (section 1): a reply that would is
	 * replaced by a too_large error for its request.
	 */
	if (rc == SG_E_TOO_LARGE) {
		json_t *id = json_object_get(msg, "id");
		json_t *small = id ? json_pack("{s:O, s:s}", "id", id, "error",
					       "too_large: the reply would exceed the 16 MiB frame limit")
				   : NULL;

		sg_buf_reset(&b);
		rc = small ? sg_json_dump(small, &b) : SG_E_INTERNAL;
		json_decref(small);
		sg_log_err("a message over the frame limit was not sent");
	}
	json_decref(msg);
	if (rc) {
		sg_buf_release(&b);
		sg_log_err("cannot serialise a message: out of memory");
		return false;
	}
	{
		size_t len;
		char *text = sg_buf_take(&b, &len);

		return enqueue_text(w, text, len);
	}
}

bool sg_wire_flush(struct sg_wire *w, int64_t deadline_ms)
{
	bool done;

	pthread_mutex_lock(&w->lock);
	while (!w->dead && (w->head || w->writing)) {
		int64_t left = deadline_ms - sg_now_ms();
		struct timespec ts;

		if (left <= 0)
			break;
		ts = sg_time_after(CLOCK_REALTIME, left);
		pthread_cond_timedwait(&w->drained, &w->lock, &ts);
	}
	done = !w->dead && !w->head && !w->writing;
	pthread_mutex_unlock(&w->lock);
	return done;
}

bool sg_wire_dead(struct sg_wire *w)
{
	bool dead;

	pthread_mutex_lock(&w->lock);
	dead = w->dead;
	pthread_mutex_unlock(&w->lock);
	return dead;
}

int sg_cli_printf(const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vprintf(fmt, ap);
	va_end(ap);
	return n;
}
