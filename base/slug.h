/*
 * slug.h - names made safe for file names, cgroups and provider labels.
 *
 * Invariant: the mapping is injective and readable: [A-Za-z0-9_-] and
 * non-leading dots are kept, every other byte becomes %XX, so two
 * identities never share a directory and "a/b" cannot climb one.
 */
#ifndef SG_SLUG_H
#define SG_SLUG_H

/* The slug of s (new; free it), or NULL when out of memory. */
char *sg_slug(const char *s);

#endif
