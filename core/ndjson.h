/*
 * ndjson.h - newline-delimited JSON read incrementally and bounded: the
 * command streams of Vercel (and any provider that streams NDJSON).
 *
 * Bytes arrive in pieces of any size (an HTTP sink's); every complete line
 * is handed to the callback as soon as its newline arrives, never more
 * than max bytes of one line are held, and a stream that ends inside a
 * line is an error the caller can name ("cut mid-line"), never a line.
 *
 * Invariants: the splitter owns its buffer (released with _release); the
 * line handed over is borrowed for the call (len bytes, no NUL); empty
 * lines are skipped.  Not thread-safe: one stream, one reader.
 */
#ifndef SG_NDJSON_H
#define SG_NDJSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

/* One complete line (without its newline); SG_OK to go on. */
typedef sg_err (*sg_ndjson_line_cb)(const char *line, size_t len, void *payload);

struct sg_ndjson {
	struct sg_buf part;     /* the line being gathered */
	sg_ndjson_line_cb on_line;
	void *payload;
	uint64_t lines;         /* complete lines handed over */
	uint64_t bytes;         /* bytes fed */
};

/* Prepare s for lines of at most max bytes. */
void sg_ndjson_init(struct sg_ndjson *s, size_t max, sg_ndjson_line_cb on_line,
		    void *payload);
void sg_ndjson_release(struct sg_ndjson *s);

/*
 * Feed len bytes.  SG_E_TOO_LARGE when a line passes max; otherwise the
 * first error the callback returned (the rest of data is not read).
 */
sg_err sg_ndjson_feed(struct sg_ndjson *s, const char *data, size_t len) SG_MUST_CHECK;

/* Is a line begun and not ended (the stream would be cut mid-line)? */
bool sg_ndjson_partial(const struct sg_ndjson *s);

#endif
