/*
 * strv.h - a growable, NULL-terminated vector of owned strings (argv, envp).
 *
 * Invariants: v is NULL or a NULL-terminated array whose strings the vector
 * owns; after any failed add the vector is unchanged.
 */
#ifndef SG_STRV_H
#define SG_STRV_H

#include <stddef.h>

#include "base/err.h"

struct sg_strv {
	char **v;
	size_t n, cap;
};

#define SG_STRV_INIT { NULL, 0, 0 }

/* Append a copy of s. */
sg_err sg_strv_add(struct sg_strv *sv, const char *s) SG_MUST_CHECK;
/* Append a formatted string. */
sg_err sg_strv_addf(struct sg_strv *sv, const char *fmt, ...) SG_MUST_CHECK
	SG_PRINTF(2, 3);
/* Append copies of every string of the NULL-terminated list (may be NULL). */
sg_err sg_strv_addv(struct sg_strv *sv, const char *const *list) SG_MUST_CHECK;
/* The array for exec: never NULL (a static empty list when empty). */
const char *const *sg_strv_get(const struct sg_strv *sv);
void sg_strv_release(struct sg_strv *sv);

#endif
