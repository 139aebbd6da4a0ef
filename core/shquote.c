/*
 * shquote.c - POSIX shell quoting (see shquote.h for the rules).
 */
#include "core/shquote.h"

#include <stdbool.h>
#include <string.h>

/* Bytes no shell treats specially anywhere in a word. */
static bool is_safe(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch >= '0' && ch <= '9') || strchr("_./:@%+,-", ch) != NULL;
}

static bool all_safe(const char *s)
{
	if (*s == '\0')
		return false;
	for (; *s; s++)
		if (!is_safe((unsigned char)*s))
			return false;
	return true;
}

static sg_err quote(struct sg_buf *out, const char *s, bool force)
{
	const char *run;
	sg_err rc;

	if (!force && all_safe(s))
		return sg_buf_adds(out, s);
	rc = sg_buf_addc(out, '\'');
	/* Copy runs between quotes whole; each ' closes, escapes, reopens. */
	for (run = s; !rc && *s; s++) {
		if (*s != '\'')
			continue;
		rc = sg_buf_add(out, run, (size_t)(s - run));
		if (!rc)
			rc = sg_buf_adds(out, "'\\''");
		run = s + 1;
	}
	if (!rc)
		rc = sg_buf_add(out, run, (size_t)(s - run));
	if (!rc)
		rc = sg_buf_addc(out, '\'');
	return rc;
}

sg_err sg_shquote(struct sg_buf *out, const char *s)
{
	return quote(out, s, false);
}

sg_err sg_shquote_argv(struct sg_buf *out, const char *const *argv)
{
	sg_err rc = SG_OK;

	for (size_t i = 0; !rc && argv && argv[i]; i++) {
		if (i > 0)
			rc = sg_buf_addc(out, ' ');
		if (!rc)
			rc = quote(out, argv[i], i == 0);
	}
	return rc;
}
