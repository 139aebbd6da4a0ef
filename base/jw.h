/*
 * jw.h - the few JSON-writing helpers the environment helper needs.
 *
 * The helper (sg-helper) is a static program that travels into remote
 * environments, so it cannot depend on jansson; it only ever writes JSON,
 * and these few functions are all it takes.  The gateway parses what it
 * writes with jansson.
 *
 * Invariant: everything appended is valid UTF-8 JSON; invalid input bytes
 * become U+FFFD.
 */
#ifndef SG_JW_H
#define SG_JW_H

#include <stddef.h>

#include "base/buf.h"

/* Append s (n bytes) as a quoted JSON string. */
sg_err sg_jw_str(struct sg_buf *b, const char *s, size_t n) SG_MUST_CHECK;

/*
 * Append s escaped as the inside of a JSON string, without the quotes: a
 * string built in pieces, or escaped twice (JSON inside a JSON string).
 * Each piece must end on a character boundary.
 */
sg_err sg_jw_chars(struct sg_buf *b, const char *s, size_t n) SG_MUST_CHECK;

/*
 * The length of s's longest prefix (at most n bytes) that escaping leaves
 * as it is: printable ASCII but the quote and backslash.
 */
size_t sg_jw_plain(const char *s, size_t n);

/* Append "key": (quoted key, colon) preceded by a comma unless first. */
sg_err sg_jw_key(struct sg_buf *b, const char *key, int first) SG_MUST_CHECK;

#endif
