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

#include "buf.h"

/*
 * Length of the valid sequence at s (1..4), or 0 if the bytes at s do not
 * start a valid character (or it is cut off by n).
 */
size_t sg_utf8_seq(const unsigned char *s, size_t n);

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
