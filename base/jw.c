#include "base/jw.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/utf8.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Bytes that go out as they are: printable ASCII but the quote and backslash. */
static bool jw_plain(unsigned char c)
{
	return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

#if defined(__SSE2__)
/*
 * The length of the run of plain bytes at p (at most n), sixteen at a
 * time: a byte below 0x20 or from 0x80 up is below 0x20 as a signed byte,
 * so one signed compare and two equalities find the first byte to escape,
 * and its position ends the run exactly.  Text is mostly such runs, and
 * read_file escapes its megabyte three times (the view twice, the text
 * once), so this scan is most of a large read's reply.
 */
static size_t jw_plain_run(const unsigned char *p, size_t n)
{
	const __m128i low = _mm_set1_epi8(0x20), quote = _mm_set1_epi8('"');
	const __m128i bslash = _mm_set1_epi8('\\');
	size_t r = 0;

	for (; n - r >= sizeof(__m128i); r += sizeof(__m128i)) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + r));
		__m128i hit = _mm_or_si128(_mm_cmplt_epi8(v, low),
					   _mm_or_si128(_mm_cmpeq_epi8(v, quote),
							_mm_cmpeq_epi8(v, bslash)));
		unsigned mask = (unsigned)_mm_movemask_epi8(hit);

		if (mask)
			return r + (size_t)__builtin_ctz(mask);
	}
	while (r < n && jw_plain(p[r]))
		r++;
	return r;
}
#else
/* Bytes of w that are zero exist (the high bit of some byte is then set). */
#define JW_ZERO(w) (((w) - UINT64_C(0x0101010101010101)) & ~(w) & UINT64_C(0x8080808080808080))

/*
 * The length of the run of plain bytes at p (at most n), eight at a time
 * while no byte of a word is a control character, a quote, a backslash
 * or non-ASCII: text is mostly such runs, and a byte at a time the escape
 * was a third of a large read_file's reply.
 */
static size_t jw_plain_run(const unsigned char *p, size_t n)
{
	const uint64_t ones = UINT64_C(0x0101010101010101);
	size_t r = 0;

	for (; n - r >= sizeof(uint64_t); r += sizeof(uint64_t)) {
		uint64_t w;

		memcpy(&w, p + r, sizeof(w));
		if ((w & UINT64_C(0x8080808080808080)) ||
		    ((w - ones * 0x20) & ~w & UINT64_C(0x8080808080808080)) ||
		    JW_ZERO(w ^ (ones * '"')) || JW_ZERO(w ^ (ones * '\\')))
			break;
	}
	while (r < n && jw_plain(p[r]))
		r++;
	return r;
}
#endif

size_t sg_jw_plain(const char *s, size_t n)
{
	return jw_plain_run((const unsigned char *)s, n);
}

/*
 * Input is taken JW_CHUNK bytes at a time into space reserved for the
 * worst case (six output bytes per input byte, \u00XX), so that the common
 * case is a scan and a memcpy per run, with no per-byte calls.
 */
#define JW_CHUNK 4096

sg_err sg_jw_chars(struct sg_buf *b, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;
	sg_err rc = SG_OK;

	while (!rc && i < n) {
		size_t end = n - i > JW_CHUNK ? i + JW_CHUNK : n, o = 0, room;
		char *dst;

		/* A character may run 3 bytes past the chunk: 4 more. */
		room = (end - i) * 6 + 4;
		if (room > b->max - b->len)
			room = b->max - b->len; /* near the maximum: check as we go */
		rc = sg_buf_reserve(b, room, &dst);
		while (!rc && i < end) {
			size_t r = i + jw_plain_run(p + i, end - i), k;
			char esc[6] = { '\\', 0, '0', '0', 0, 0 };
			const char *rep = esc;
			size_t len = 2;

			if (r > i) {
				if (r - i > room - o) {
					rc = SG_E_TOO_LARGE;
					break;
				}
				memcpy(dst + o, p + i, r - i);
				o += r - i;
				i = r;
				continue;
			}
			k = 1;
			if (p[i] >= 0x80) {
				k = sg_utf8_seq(p + i, n - i);
				rep = k ? s + i : "\xef\xbf\xbd";
				len = k ? k : 3;
				k = k ? k : 1;
			} else if (p[i] == '"' || p[i] == '\\') {
				esc[1] = (char)p[i];
			} else if (p[i] == '\n') {
				esc[1] = 'n'; /* a line's end: the common escape, first */
			} else if (p[i] && strchr("\n\t\r\b\f", p[i])) {
				/* The short forms, as jansson writes them. */
				esc[1] = "ntrbf"[strchr("\n\t\r\b\f", p[i]) - "\n\t\r\b\f"];
			} else {
				static const char hex[] = "0123456789ABCDEF";

				esc[1] = 'u';
				esc[4] = hex[p[i] >> 4];
				esc[5] = hex[p[i] & 15];
				len = 6;
			}
			if (len > room - o) {
				rc = SG_E_TOO_LARGE;
				break;
			}
			memcpy(dst + o, rep, len);
			o += len;
			i += k;
		}
		if (o)
			sg_buf_commit(b, o);
	}
	return rc;
}

sg_err sg_jw_str(struct sg_buf *b, const char *s, size_t n)
{
	sg_err rc = sg_buf_addc(b, '"');

	if (!rc)
		rc = sg_jw_chars(b, s, n);
	if (!rc)
		rc = sg_buf_addc(b, '"');
	return rc;
}

sg_err sg_jw_key(struct sg_buf *b, const char *key, int first)
{
	sg_err rc = first ? SG_OK : sg_buf_addc(b, ',');

	if (!rc)
		rc = sg_jw_str(b, key, strlen(key));
	if (!rc)
		rc = sg_buf_addc(b, ':');
	return rc;
}
