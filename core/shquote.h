/*
 * shquote.h - POSIX shell quoting, for commands handed to a remote shell.
 *
 * ssh gives the remote side one string, which the remote user's login shell
 * parses; these functions turn an argv into that string so that the shell
 * hands every element back byte for byte, whatever it contains.
 *
 * Invariants:
 *  - The output means the same to every POSIX shell and to zsh and bash in
 *    their native modes: a word is either bare or wrapped in single quotes,
 *    and inside single quotes no shell interprets anything.  Each ' becomes
 *    '\'' (close, escaped quote, reopen); the empty string becomes ''.
 *  - A word stays bare only when every byte is in [A-Za-z0-9_./:@%+,-]:
 *    nothing there is special to any of those shells.  '=' is left out on
 *    purpose (a bare `A=b` in command position is an assignment, and zsh
 *    expands a leading `=cmd`).
 *  - sg_shquote_argv always quotes the first word, so the command name can
 *    never be taken for a reserved word (`if`) or an alias.
 *  - Bytes are not interpreted: UTF-8 or not, control characters and
 *    newlines included, they travel inside the quotes.  A NUL cannot travel
 *    at all, so the inputs are C strings.
 *
 * Both functions append to out; SG_E_TOO_LARGE when out's max would be
 * passed, after which out holds a partial result and must be discarded.
 */
#ifndef SG_SHQUOTE_H
#define SG_SHQUOTE_H

#include "base/buf.h"

/* Append s to out as one shell word. */
sg_err sg_shquote(struct sg_buf *out, const char *s) SG_MUST_CHECK;

/*
 * Append every element of the NULL-terminated argv as a quoted word, words
 * separated by one space, the first always in quotes.  An empty argv
 * appends nothing.
 */
sg_err sg_shquote_argv(struct sg_buf *out, const char *const *argv)
	SG_MUST_CHECK;

#endif
