#include "base/buf.h"

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char sg_buf_empty[1];

void sg_buf_init(struct sg_buf *b, size_t max)
{
	b->p = sg_buf_empty;
	b->len = b->cap = 0;
	b->max = max;
}

static void check(const struct sg_buf *b)
{
	/* A corrupted buffer is a programming error: do not try to recover. */
	assert(b->p && b->len <= b->max && (b->cap == 0 || b->len < b->cap));
	(void)b;
}

sg_err sg_buf_reserve(struct sg_buf *b, size_t n, char **out)
{
	size_t need, cap;
	char *p;

	check(b);
	if (n > b->max - b->len)
		return SG_E_TOO_LARGE;
	need = b->len + n + 1;
	if (need > b->cap) {
		cap = b->cap ? b->cap : 64;
		while (cap < need)
			cap = cap > SIZE_MAX / 2 ? need : cap * 2;
		if (cap > b->max + 1)
			cap = b->max + 1;
		p = realloc(b->cap ? b->p : NULL, cap);
		if (!p)
			return SG_E_INTERNAL;
		if (!b->cap)
			p[0] = '\0';
		b->p = p;
		b->cap = cap;
	}
	*out = b->p + b->len;
	return SG_OK;
}

void sg_buf_commit(struct sg_buf *b, size_t n)
{
	assert(b->cap && b->len + n < b->cap);
	b->len += n;
	b->p[b->len] = '\0';
}

sg_err sg_buf_add(struct sg_buf *b, const void *data, size_t n)
{
	char *dst;
	sg_err rc;

	if (n == 0)
		return SG_OK;
	rc = sg_buf_reserve(b, n, &dst);
	if (rc)
		return rc;
	memcpy(dst, data, n);
	sg_buf_commit(b, n);
	return SG_OK;
}

sg_err sg_buf_adds(struct sg_buf *b, const char *s)
{
	return sg_buf_add(b, s, strlen(s));
}

sg_err sg_buf_addc(struct sg_buf *b, char c)
{
	return sg_buf_add(b, &c, 1);
}

bool sg_buf_add_clipped(struct sg_buf *b, const void *data, size_t n)
{
	size_t room = b->max - b->len;
	size_t take = n < room ? n : room;

	if (take && sg_buf_add(b, data, take) != SG_OK)
		return true;
	return take < n;
}

sg_err sg_buf_vaddf(struct sg_buf *b, const char *fmt, va_list ap)
{
	va_list copy;
	char *dst;
	int n;
	sg_err rc;

	va_copy(copy, ap);
	n = vsnprintf(NULL, 0, fmt, copy);
	va_end(copy);
	if (n < 0)
		return SG_E_INTERNAL;
	rc = sg_buf_reserve(b, (size_t)n, &dst);
	if (rc)
		return rc;
	vsnprintf(dst, (size_t)n + 1, fmt, ap);
	sg_buf_commit(b, (size_t)n);
	return SG_OK;
}

sg_err sg_buf_addf(struct sg_buf *b, const char *fmt, ...)
{
	va_list ap;
	sg_err rc;

	va_start(ap, fmt);
	rc = sg_buf_vaddf(b, fmt, ap);
	va_end(ap);
	return rc;
}

void sg_buf_consume(struct sg_buf *b, size_t n)
{
	check(b);
	if (n >= b->len) {
		sg_buf_reset(b);
		return;
	}
	memmove(b->p, b->p + n, b->len - n);
	b->len -= n;
	b->p[b->len] = '\0';
}

void sg_buf_truncate(struct sg_buf *b, size_t n)
{
	check(b);
	if (n < b->len) {
		b->len = n;
		b->p[n] = '\0';
	}
}

void sg_buf_reset(struct sg_buf *b)
{
	b->len = 0;
	if (b->cap)
		b->p[0] = '\0';
}

void sg_buf_release(struct sg_buf *b)
{
	if (b->cap)
		free(b->p);
	b->p = sg_buf_empty;
	b->len = b->cap = 0;
}

char *sg_buf_take(struct sg_buf *b, size_t *len_out)
{
	char *p = b->cap ? b->p : calloc(1, 1);

	if (len_out)
		*len_out = p ? b->len : 0;
	b->p = sg_buf_empty;
	b->len = b->cap = 0;
	return p;
}
