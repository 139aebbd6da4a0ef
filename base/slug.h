/*
 * slug.h - names made safe for file names, cgroups and provider labels.
 *
 * Invariant: the mapping is injective and readable: [A-Za-z0-9_-] and
 * non-leading dots are kept, every other byte becomes %XX, so two
 * identities never share a directory and "a/b" cannot climb one.  A slug
 * cut short by sg_slug_n() is no longer injective on its own: callers add
 * a digest of the whole (core/digest.h, sg_slug_digest()).
 */
#ifndef SG_SLUG_H
#define SG_SLUG_H

#include <stdbool.h>
#include <stddef.h>

/* The slug of s (new; free it), or NULL when out of memory. */
char *sg_slug(const char *s);

/*
 * The slug of s, stopped before the first byte of s that would start at
 * or past max bytes of slug (so at most max + 2 bytes), with *cut telling
 * whether any of s was left out.  New, or NULL when out of memory.
 */
char *sg_slug_n(const char *s, size_t max, bool *cut);

#endif
