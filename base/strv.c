#include "base/strv.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sg_err push(struct sg_strv *sv, char *s)
{
	if (!s)
		return SG_E_INTERNAL;
	if (sv->n + 2 > sv->cap) {
		size_t cap = sv->cap ? sv->cap * 2 : 16;
		char **v = realloc(sv->v, cap * sizeof(*v));

		if (!v) {
			free(s);
			return SG_E_INTERNAL;
		}
		sv->v = v;
		sv->cap = cap;
	}
	sv->v[sv->n++] = s;
	sv->v[sv->n] = NULL;
	return SG_OK;
}

sg_err sg_strv_add(struct sg_strv *sv, const char *s)
{
	return push(sv, strdup(s));
}

sg_err sg_strv_addf(struct sg_strv *sv, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !(s = malloc((size_t)n + 1)))
		return SG_E_INTERNAL;
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return push(sv, s);
}

sg_err sg_strv_addv(struct sg_strv *sv, const char *const *list)
{
	size_t n0 = sv->n;

	for (size_t i = 0; list && list[i]; i++) {
		if (sg_strv_add(sv, list[i])) {
			while (sv->n > n0)
				free(sv->v[--sv->n]);
			if (sv->v)
				sv->v[sv->n] = NULL;
			return SG_E_INTERNAL;
		}
	}
	return SG_OK;
}

const char *const *sg_strv_get(const struct sg_strv *sv)
{
	static const char *const empty[] = { NULL };

	return sv->v ? (const char *const *)sv->v : empty;
}

void sg_strv_release(struct sg_strv *sv)
{
	for (size_t i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	sv->v = NULL;
	sv->n = sv->cap = 0;
}
