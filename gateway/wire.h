/*
 * wire.h - newline-delimited JSON on stdin and stdout (protocol section 1).
 *
 * Invariants: one thread reads frames (sg_wire_read); exactly one thread,
 * the wire's own writer, ever writes the output fd, one whole message and
 * its newline at a time, in the order sg_wire_send was called.  A frame,
 * newline included, is at most SG_MAX_FRAME bytes; nothing resynchronises
 * after a bad frame.  A blocked or failed output never blocks a sender: the
 * queue is in memory, and a failed write marks the wire dead, drops what is
 * queued and tells the owner once through the on_dead callback.  The queue
 * holds at most SG_WIRE_QUEUE_MAX bytes: a send past that is a host that
 * stopped reading, and kills the wire the same way.
 */
#ifndef SG_WIRE_H
#define SG_WIRE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

struct sg_wire;

/* in_fd and out_fd stay owned by the caller.  *out is new. */
sg_err sg_wire_new(int in_fd, int out_fd, void (*on_dead)(void *payload),
		   void *payload, struct sg_wire **out) SG_MUST_CHECK;

/*
 * Free the wire.  The writer thread is joined only if it is not stuck in a
 * write; a stuck one is abandoned (the process is about to exit).
 */
void sg_wire_free(struct sg_wire *w);

/*
 * The next request frame as a JSON object (new reference) whose `id` is a
 * string, an integer, null or absent (the server answers the last two).  Errors: SG_E_NOT_FOUND at end of input (an
 * unterminated last line is ignored), SG_E_TOO_LARGE for a frame over the
 * cap, SG_E_INVALID_REQUEST for a malformed frame, SG_E_CANCELLED after
 * sg_wire_stop().  Every error ends reading for good.
 */
sg_err sg_wire_read(struct sg_wire *w, json_t **frame, struct sg_errinfo *err)
	SG_MUST_CHECK;

/*
 * As sg_wire_read, for the other end of a delegation (gateway/relay.c):
 * any JSON object is a message, since a peer's events carry no `id`.
 */
sg_err sg_wire_read_msg(struct sg_wire *w, json_t **msg, struct sg_errinfo *err)
	SG_MUST_CHECK;

/*
 * The length of the last frame sg_wire_read or sg_wire_read_msg returned
 * (or refused), its newline included; reader thread only.
 */
size_t sg_wire_frame_len(const struct sg_wire *w);

/*
 * Make a blocked sg_wire_read return SG_E_CANCELLED (any thread, and
 * async-signal-safe).  Frames already buffered are still returned first.
 */
void sg_wire_stop(struct sg_wire *w);

/* Whether sg_wire_stop was called: frames read since are not to be run. */
bool sg_wire_stopped(struct sg_wire *w);

/*
 * Parse one frame's text (without its newline): the reader's rules, shared
 * with the fuzz target.  *frame is new on success.
 */
sg_err sg_wire_parse(const char *p, size_t n, json_t **frame,
		     struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * Queue msg for output; steals the reference.  False if the wire is dead,
 * or died of this message: the queue would exceed SG_WIRE_QUEUE_MAX.
 */
bool sg_wire_send(struct sg_wire *w, json_t *msg);

/*
 * Queue a message that is JSON text already (len bytes, no newline; text
 * is stolen).  Over the frame cap it is dropped and false returned, like a
 * dead wire.
 */
bool sg_wire_send_text(struct sg_wire *w, char *text, size_t len);

/* Queue the error reply {"id": id, "error": "word: detail"} for request id. */
bool sg_wire_send_error(struct sg_wire *w, json_t *id, const struct sg_errinfo *e);
/* The same with a sentence of any length: {"id", "error": "<word>: text"}. */
bool sg_wire_send_error_text(struct sg_wire *w, json_t *id, sg_err code, const char *text);

/* Wait until everything queued is written, the wire died, or deadline_ms
 * (sg_now_ms clock) passed.  True when all was written. */
bool sg_wire_flush(struct sg_wire *w, int64_t deadline_ms);

bool sg_wire_dead(struct sg_wire *w);

/*
 * The command line's own reports on stdout (`probe`, `envs`, `--version`,
 * `--help`), printf-style; what vprintf returns.  The one way anything
 * but the wire writes stdout, kept here so that the style check can hold
 * every stdout write to this file: never called by `serve`, where stdout
 * is the wire's alone.
 */
int sg_cli_printf(const char *fmt, ...) SG_PRINTF(1, 2);

#endif
