/*
 * json.h - a JSON parser that builds jansson values, and a writer of them,
 * both with fast strings.
 *
 * jansson's own decoder reads its input one byte at a time through a
 * stream and a token buffer, about 60 MB/s on long strings.  Frames that
 * carry file contents or command output are mostly one long string, so this
 * parser scans strings a word at a time and copies whole runs, and hands
 * the result to jansson as ordinary json_t values: callers keep using the
 * jansson API on what it returns.
 *
 * Invariants:
 *  - What is accepted, and the value built, are exactly those of
 *    json_loadb(p, n, flags, &e) in jansson 2.14, with SG_JSON_* mapped to
 *    JSON_REJECT_DUPLICATES and JSON_ALLOW_NUL (tests/unit/test_json.c
 *    checks this against the installed jansson):
 *     - the top level is one object or array, with only space, \t, \n and
 *       \r around it;
 *     - strings are RFC 3629 UTF-8 (no overlong forms, no surrogates,
 *       nothing above U+10FFFF) without raw bytes below 0x20; \u escapes of
 *       surrogate pairs are combined and a lone surrogate is an error;
 *       \u0000 is an error unless SG_JSON_ALLOW_NUL, and always an error
 *       in an object key;
 *     - an integer outside long long is an error, and so is a real that
 *       overflows to infinity (one that underflows becomes 0 or a
 *       denormal);
 *     - without SG_JSON_REJECT_DUPLICATES the last duplicate key wins,
 *       keeping the place of the first; objects keep insertion order;
 *     - every value counts one level of depth, scalars included, and
 *       depth 2048 (JSON_PARSER_MAX_DEPTH) is the most allowed;
 *     - one quirk is kept on purpose: jansson drops a single NUL byte that
 *       directly follows a number or a literal (its lookahead byte is
 *       "ungot" into a buffer where NUL means empty), so `[1\0]` parses
 *       as [1].  Matching it keeps this parser a drop-in replacement.
 *  - The input is never modified, need not be NUL-terminated, and is not
 *    referenced once the call returns.  Nesting is handled with an explicit
 *    stack, so hostile input cannot exhaust the C stack.
 *  - Error sentences name the reason and the byte offset, and never quote
 *    the input (it may hold secrets).
 *  - Reals are converted with strtod after putting the locale's decimal
 *    point in place of '.', as jansson does, so any LC_NUMERIC works.
 */
#ifndef SG_JSON_H
#define SG_JSON_H

#include <stddef.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/err.h"

enum {
	SG_JSON_REJECT_DUPLICATES = 1, /* a repeated object key is an error */
	SG_JSON_ALLOW_NUL = 2,         /* \u0000 allowed in string values */
};

/*
 * Parse the n bytes at p (p may be NULL when n is 0) into *out, a new
 * reference the caller must json_decref.  Unknown flag bits are a
 * programming error.
 *
 * Errors: SG_E_INVALID_ARGUMENT when the bytes are not JSON that
 * json_loadb would accept, with a sentence such as "invalid escape in a
 * string at byte 1234" recorded on err; SG_E_INTERNAL when memory runs
 * out.  On any error *out is NULL and nothing is left allocated.  err may
 * be NULL.
 */
sg_err sg_json_parse(const char *p, size_t n, unsigned flags, json_t **out,
		     struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * Append v to out as compact JSON, as json_dumps(v, JSON_COMPACT |
 * JSON_ENCODE_ANY) writes it (keys in insertion order, reals as %.17g),
 * but with strings escaped a run at a time (sg_jw_str: 1 MiB of text in
 * about 1.5 ms, where json_dumps takes 7-10), byte for byte the same
 * text.  SG_E_TOO_LARGE when out's max
 * would be passed (out then holds a partial text, to be discarded);
 * SG_E_INTERNAL when memory runs out.
 */
sg_err sg_json_dump(const json_t *v, struct sg_buf *out) SG_MUST_CHECK;

#endif
