/*
 * test_wire.c - framing: the frame reader's rules and the single writer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cancel.h"
#include "base/limits.h"
#include "gateway/wire.h"

/* A wire reading `input` from a pipe (written by a thread, so inputs
 * larger than the pipe buffer work) and writing into out[1]. */
struct rig {
	int in[2], out[2];
	struct sg_wire *w;
	const char *data;
	size_t len;
	pthread_t feeder;
};

static void *feed(void *arg)
{
	struct rig *r = arg;
	size_t off = 0;

	while (off < r->len) {
		ssize_t n = write(r->in[1], r->data + off, r->len - off);

		if (n <= 0)
			break;
		off += (size_t)n;
	}
	close(r->in[1]);
	return NULL;
}

static void rig_start(struct rig *r, const char *data, size_t len)
{
	memset(r, 0, sizeof(*r));
	assert_int_equal(pipe(r->in), 0);
	assert_int_equal(pipe(r->out), 0);
	r->data = data;
	r->len = len;
	assert_int_equal(sg_wire_new(r->in[0], r->out[1], NULL, NULL, &r->w), SG_OK);
	assert_int_equal(pthread_create(&r->feeder, NULL, feed, r), 0);
}

static void rig_stop(struct rig *r)
{
	sg_wire_free(r->w);
	pthread_join(r->feeder, NULL);
	close(r->in[0]);
	close(r->out[0]);
	close(r->out[1]);
}

static sg_err next(struct rig *r, json_t **frame)
{
	struct sg_errinfo e = { 0 };

	return sg_wire_read(r->w, frame, &e);
}

static void test_frames_and_eof(void **state)
{
	static const char input[] =
		"{\"id\":1,\"method\":\"a\"}\n{\"id\":\"x\",\"method\":\"b\"}\n{\"id\":3";
	struct rig r;
	json_t *f = NULL;

	(void)state;
	rig_start(&r, input, sizeof(input) - 1);
	assert_int_equal(next(&r, &f), SG_OK);
	assert_int_equal(json_integer_value(json_object_get(f, "id")), 1);
	json_decref(f);
	assert_int_equal(next(&r, &f), SG_OK);
	assert_string_equal(json_string_value(json_object_get(f, "id")), "x");
	json_decref(f);
	/* The unterminated last line is ignored: plain end of input. */
	assert_int_equal(next(&r, &f), SG_E_NOT_FOUND);
	rig_stop(&r);
}

static void test_malformed(void **state)
{
	static const char *const bad[] = {
		"not json\n", "[1,2]\n", "{\"id\":1.5}\n", "{\"id\":true}\n",
		"{\"id\":{}}\n", "{\"id\":[\"7\"]}\n", "\n", "{\"id\":1,\"id\":2}\n",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct rig r;
		json_t *f = NULL;

		rig_start(&r, bad[i], strlen(bad[i]));
		assert_int_equal(next(&r, &f), SG_E_INVALID_REQUEST);
		assert_null(f);
		rig_stop(&r);
	}
}

/*
 * A frame without an id (absent, null) or with the empty one is a frame:
 * the server answers it under the empty id, as the host's worker does,
 * and the connection goes on (protocol section 1).
 */
static void test_missing_id_is_a_frame(void **state)
{
	static const char *const ok[] = {
		"{\"method\":\"a\"}\n", "{\"id\":null,\"method\":\"a\"}\n",
		"{\"id\":\"\",\"method\":\"a\"}\n", "{\"id\":\"7\",\"method\":\"cancel\"}\n",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct rig r;
		json_t *f = NULL;

		rig_start(&r, ok[i], strlen(ok[i]));
		assert_int_equal(next(&r, &f), SG_OK);
		assert_non_null(f);
		json_decref(f);
		rig_stop(&r);
	}
}

/* A frame of exactly `total` bytes, newline included. */
static char *frame_of(size_t total)
{
	static const char head[] = "{\"id\":1,\"method\":\"m\",\"data\":\"";
	char *p = malloc(total + 1);

	memcpy(p, head, sizeof(head) - 1);
	memset(p + sizeof(head) - 1, 'a', total - (sizeof(head) - 1) - 3);
	memcpy(p + total - 3, "\"}\n", 3);
	p[total] = '\0';
	return p;
}

static void test_frame_cap(void **state)
{
	char *at_cap = frame_of(SG_MAX_FRAME), *over = frame_of(SG_MAX_FRAME + 1);
	struct rig r;
	json_t *f = NULL;

	(void)state;
	rig_start(&r, at_cap, SG_MAX_FRAME);
	assert_int_equal(next(&r, &f), SG_OK);
	assert_true(json_string_length(json_object_get(f, "data")) > SG_MAX_FRAME - 64);
	json_decref(f);
	rig_stop(&r);

	rig_start(&r, over, SG_MAX_FRAME + 1);
	assert_int_equal(next(&r, &f), SG_E_TOO_LARGE);
	rig_stop(&r);
	free(at_cap);
	free(over);
}

static void test_no_newline_over_cap(void **state)
{
	size_t n = SG_MAX_FRAME + 100;
	char *p = malloc(n);
	struct rig r;
	json_t *f = NULL;

	(void)state;
	memset(p, 'x', n);
	rig_start(&r, p, n);
	assert_int_equal(next(&r, &f), SG_E_TOO_LARGE);
	rig_stop(&r);
	free(p);
}

static void test_writer_order_and_cap(void **state)
{
	struct rig r;
	char buf[4096];
	ssize_t n;
	size_t got = 0;
	json_t *big;
	char *huge = malloc(SG_MAX_FRAME);

	(void)state;
	rig_start(&r, "", 0);
	for (int i = 0; i < 3; i++)
		assert_true(sg_wire_send(r.w, json_pack("{s:i}", "id", i)));
	/* A reply over the frame cap goes out as a too_large error instead. */
	memset(huge, 'b', SG_MAX_FRAME - 1);
	huge[SG_MAX_FRAME - 1] = '\0';
	big = json_pack("{s:i, s:s}", "id", 9, "data", huge);
	assert_true(sg_wire_send(r.w, big));
	assert_true(sg_wire_flush(r.w, 10000000000LL));
	fcntl(r.out[0], F_SETFL, O_NONBLOCK);
	while ((n = read(r.out[0], buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	assert_string_equal(buf,
			    "{\"id\":0}\n{\"id\":1}\n{\"id\":2}\n"
			    "{\"id\":9,\"error\":\"too_large: the reply would exceed the 16 MiB frame limit\"}\n");
	rig_stop(&r);
	free(huge);
}

static void dead(void *payload)
{
	atomic_store((atomic_int *)payload, 1);
}

static void test_dead_output(void **state)
{
	int in[2], out[2];
	atomic_int called = 0; /* written by the writer thread */
	struct sg_wire *w;

	(void)state;
	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(out), 0);
	close(out[0]); /* the host is gone */
	signal(SIGPIPE, SIG_IGN);
	assert_int_equal(sg_wire_new(in[0], out[1], dead, &called, &w), SG_OK);
	sg_wire_send(w, json_pack("{s:i}", "id", 1));
	sg_wire_flush(w, 10000000000LL);
	assert_true(sg_wire_dead(w));
	/* The owner is told from the writer thread, once. */
	for (int i = 0; i < 200 && !atomic_load(&called); i++)
		sg_cancel_sleep(NULL, 5);
	assert_int_equal(atomic_load(&called), 1);
	assert_false(sg_wire_send(w, json_pack("{s:i}", "id", 2)));
	sg_wire_free(w);
	close(in[0]);
	close(in[1]);
	close(out[1]);
}

/*
 * A reply is written by the thread that sends it only when the host's end
 * has room: a host that stops reading must never hold a sender (a worker),
 * and what was queued behind it still leaves in order once it reads.
 */
static void test_full_host_never_holds_sender(void **state)
{
	struct rig r;
	static char junk[4096], got[1 << 20];
	int fl;
	size_t have = 0;
	static const char tail[] = "{\"id\":1}\n{\"id\":2}\n";

	(void)state;
	rig_start(&r, "", 0);
	memset(junk, 'x', sizeof(junk));
	fl = fcntl(r.out[1], F_GETFL);
	assert_int_equal(fcntl(r.out[1], F_SETFL, fl | O_NONBLOCK), 0);
	while (write(r.out[1], junk, sizeof(junk)) > 0)
		;
	while (write(r.out[1], junk, 1) > 0)
		;
	assert_int_equal(fcntl(r.out[1], F_SETFL, fl), 0);
	/* With the pipe full, both return at once: queued, not written here. */
	assert_true(sg_wire_send(r.w, json_pack("{s:i}", "id", 1)));
	assert_true(sg_wire_send(r.w, json_pack("{s:i}", "id", 2)));
	while (have < sizeof(tail) - 1 ||
	       memcmp(got + have - (sizeof(tail) - 1), tail, sizeof(tail) - 1) != 0) {
		ssize_t n = read(r.out[0], got + have, sizeof(got) - have);

		assert_true(n > 0);
		have += (size_t)n;
	}
	assert_true(sg_wire_flush(r.w, 10000000000LL));
	rig_stop(&r);
}

static void *drain(void *arg)
{
	static char sink[1 << 16];
	int fd = *(int *)arg;

	while (read(fd, sink, sizeof(sink)) > 0)
		;
	return NULL;
}

/*
 * A host that never reads its stdout while replies keep coming: the queue
 * stops at SG_WIRE_QUEUE_MAX, where the wire dies and tells its owner
 * once, instead of holding every reply in memory for ever.
 */
static void test_unread_output_is_bounded(void **state)
{
	int in[2], out[2];
	atomic_int called = 0;
	struct sg_wire *w;
	size_t piece = 4 * SG_MiB, sent = 0;
	char *text = malloc(piece + 1);
	bool refused = false;
	pthread_t t;

	(void)state;
	assert_non_null(text);
	memset(text, 'q', piece);
	text[piece] = '\0';
	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(out), 0);
	assert_int_equal(sg_wire_new(in[0], out[1], dead, &called, &w), SG_OK);
	while (sent <= SG_WIRE_QUEUE_MAX + 2 * piece) {
		if (!sg_wire_send(w, json_pack("{s:i, s:s}", "id", 1, "data", text))) {
			refused = true;
			break;
		}
		sent += piece;
	}
	assert_true(refused);
	/* The writer holds one message besides the queue. */
	assert_true(sent <= SG_WIRE_QUEUE_MAX + piece);
	assert_true(sg_wire_dead(w));
	assert_int_equal(atomic_load(&called), 1);
	assert_false(sg_wire_send(w, json_pack("{s:i}", "id", 2)));
	assert_int_equal(atomic_load(&called), 1);
	/* Let the writer finish the message it holds, so it can be joined. */
	assert_int_equal(pthread_create(&t, NULL, drain, &out[0]), 0);
	sg_cancel_sleep(NULL, 300);
	sg_wire_free(w);
	close(out[1]);
	pthread_join(t, NULL);
	close(out[0]);
	close(in[0]);
	close(in[1]);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frames_and_eof),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_missing_id_is_a_frame),
		cmocka_unit_test(test_frame_cap),
		cmocka_unit_test(test_no_newline_over_cap),
		cmocka_unit_test(test_writer_order_and_cap),
		cmocka_unit_test(test_dead_output),
		cmocka_unit_test(test_full_host_never_holds_sender),
		cmocka_unit_test(test_unread_output_is_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
