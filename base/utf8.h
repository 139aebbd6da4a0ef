/*
 * utf8.h - UTF-8 validation, clipping and replacement.
 *
 * Invariants: offsets are raw byte counts of the input; nothing here
 * allocates except into a caller's sg_buf.  "Valid" follows RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF.
 */
#ifndef SG_UTF8_H
#define SG_UTF8_H

#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"

/*
 * Length of the valid sequence at s (1..4), or 0 if the bytes at s do not
 * start a valid character (or it is cut off by n).  Inline: the string
 * scanners (JSON in both directions) call it once per non-ASCII character.
 */
static inline size_t sg_utf8_seq(const unsigned char *s, size_t n)
{
	unsigned c = n ? s[0] : 0, cp;

	if (n == 0)
		return 0;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return n >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		if (n < 3 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
			return 0;
		cp = (c & 0x0fu) << 12 | (s[1] & 0x3fu) << 6 | (s[2] & 0x3fu);
		return cp >= 0x800 && (cp < 0xd800 || cp > 0xdfff) ? 3 : 0;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		if (n < 4 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 ||
		    (s[3] & 0xc0) != 0x80)
			return 0;
		cp = (c & 0x07u) << 18 | (s[1] & 0x3fu) << 12 |
		     (s[2] & 0x3fu) << 6 | (s[3] & 0x3fu);
		return cp >= 0x10000 && cp <= 0x10ffff ? 4 : 0;
	}
	return 0;
}

/*
 * Write the code point cp (at most U+10FFFF, not a surrogate) as UTF-8
 * at out, which has room for 4 bytes; returns how many it took.
 */
static inline size_t sg_utf8_put(char *out, unsigned long cp)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

bool sg_utf8_valid(const char *s, size_t n);

/*
 * How many of the n bytes at s to return so that at most max bytes go out
 * and no multi-byte character is split at the edge.  When the first
 * character alone is longer than max, that one character is returned whole
 * (a read never returns nothing because of clipping).  Bytes that are not
 * part of a valid character count as single characters.
 */
size_t sg_utf8_clip(const char *s, size_t n, size_t max);

/*
 * Append s to out with every invalid byte replaced by U+FFFD, so the result
 * is valid UTF-8 (what json_stringn requires).
 */
sg_err sg_utf8_sanitize(struct sg_buf *out, const char *s, size_t n)
	SG_MUST_CHECK;

#endif
