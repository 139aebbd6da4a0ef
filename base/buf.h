/*
 * buf.h - growable byte buffers with a mandatory maximum.
 *
 * Invariants: p is never NULL and p[len] is always 0, so a buffer can be used
 * as a C string at any time; a buffer never grows past max, and an add that
 * would pass it fails with SG_E_TOO_LARGE leaving the buffer unchanged.  An
 * initialised buffer owns no memory until the first add, so SG_BUF_INIT
 * buffers need no release if nothing was added.
 *
 * Use the functions, not the fields, except to read p and len.
 */
#ifndef SG_BUF_H
#define SG_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

struct sg_buf {
	char *p;
	size_t len, cap, max;
};

extern char sg_buf_empty[1];

#define SG_BUF_INIT(limit) { .p = sg_buf_empty, .len = 0, .cap = 0, .max = (limit) }

void sg_buf_init(struct sg_buf *b, size_t max);

/* Append n bytes. */
sg_err sg_buf_add(struct sg_buf *b, const void *data, size_t n) SG_MUST_CHECK;
sg_err sg_buf_adds(struct sg_buf *b, const char *s) SG_MUST_CHECK;
sg_err sg_buf_addc(struct sg_buf *b, char c) SG_MUST_CHECK;
sg_err sg_buf_addf(struct sg_buf *b, const char *fmt, ...) SG_MUST_CHECK
	SG_PRINTF(2, 3);
sg_err sg_buf_vaddf(struct sg_buf *b, const char *fmt, va_list ap)
	SG_MUST_CHECK SG_PRINTF(2, 0);

/*
 * Append as much of data as fits under max and report whether anything was
 * cut off.  Used for bounded capture: the head of the output is kept.
 */
bool sg_buf_add_clipped(struct sg_buf *b, const void *data, size_t n);

/* Make room for n more bytes; returns where they go (len is unchanged). */
sg_err sg_buf_reserve(struct sg_buf *b, size_t n, char **out) SG_MUST_CHECK;
/* Account for n bytes written into the reserved space. */
void sg_buf_commit(struct sg_buf *b, size_t n);

/* Drop n bytes from the front. */
void sg_buf_consume(struct sg_buf *b, size_t n);
/* Keep the first n bytes (no-op when there are fewer). */
void sg_buf_truncate(struct sg_buf *b, size_t n);
/* Keep the allocation, forget the contents. */
void sg_buf_reset(struct sg_buf *b);
/* Free the memory; the buffer is back to its initial state (max kept). */
void sg_buf_release(struct sg_buf *b);
/*
 * Hand the contents to the caller (new; free() it).  Never NULL: an empty
 * buffer yields a fresh empty string.  The buffer is reset to empty.
 */
char *sg_buf_take(struct sg_buf *b, size_t *len_out);

#endif
