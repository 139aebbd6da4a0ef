/*
 * ndjson.c - the incremental NDJSON splitter (ndjson.h).
 */
#include "core/ndjson.h"

#include <string.h>

void sg_ndjson_init(struct sg_ndjson *s, size_t max, sg_ndjson_line_cb on_line,
		    void *payload)
{
	memset(s, 0, sizeof(*s));
	s->part = (struct sg_buf)SG_BUF_INIT(max);
	s->on_line = on_line;
	s->payload = payload;
}

void sg_ndjson_release(struct sg_ndjson *s)
{
	sg_buf_release(&s->part);
}

/* Hand over line, skipping blank ones (a CR before the LF is dropped). */
static sg_err sg_ndjson_emit(struct sg_ndjson *s, const char *line, size_t len)
{
	if (len > 0 && line[len - 1] == '\r')
		len--;
	if (len == 0)
		return SG_OK;
	s->lines++;
	return s->on_line(line, len, s->payload);
}

sg_err sg_ndjson_feed(struct sg_ndjson *s, const char *data, size_t len)
{
	sg_err rc = SG_OK;

	s->bytes += len;
	while (!rc && len > 0) {
		const char *nl = memchr(data, '\n', len);
		size_t n = nl ? (size_t)(nl - data) : len;

		if (nl && s->part.len == 0) {
			/* The common case: a whole line inside this piece. */
			if (n > s->part.max)
				return SG_E_TOO_LARGE;
			rc = sg_ndjson_emit(s, data, n);
		} else if (sg_buf_add(&s->part, data, n)) {
			return SG_E_TOO_LARGE;
		} else if (nl) {
			rc = sg_ndjson_emit(s, s->part.p, s->part.len);
			sg_buf_reset(&s->part);
		}
		data += nl ? n + 1 : n;
		len -= nl ? n + 1 : n;
	}
	return rc;
}

bool sg_ndjson_partial(const struct sg_ndjson *s)
{
	for (size_t i = 0; i < s->part.len; i++)
		if (s->part.p[i] != ' ' && s->part.p[i] != '\r' && s->part.p[i] != '\t')
			return true;
	return false;
}
