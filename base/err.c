#include "base/err.h"

#include <stdio.h>
#include <string.h>

static const char *const words[] = {
	"ok",
#define SG_ERR_WORD(name, word) word,
	SG_ERR_MAP(SG_ERR_WORD)
#undef SG_ERR_WORD
};

const char *sg_err_word(sg_err code)
{
	if ((int)code <= 0 || code >= SG_E__COUNT)
		return "internal";
	return words[code];
}

sg_err sg_err_from_word(const char *word)
{
	for (int i = 1; i < SG_E__COUNT; i++)
		if (strcmp(words[i], word) == 0)
			return (sg_err)i;
	return SG_E_INTERNAL;
}

sg_err sg_err_vset(struct sg_errinfo *e, sg_err code, const char *fmt,
		   va_list ap)
{
	if (!e || e->code != SG_OK)
		return code;
	e->code = code;
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	return code;
}

sg_err sg_err_set(struct sg_errinfo *e, sg_err code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	code = sg_err_vset(e, code, fmt, ap);
	va_end(ap);
	return code;
}

void sg_err_clear(struct sg_errinfo *e)
{
	e->code = SG_OK;
	e->msg[0] = '\0';
}

void sg_err_format(const struct sg_errinfo *e, char *out, size_t n)
{
	sg_err code = e->code ? e->code : SG_E_INTERNAL;
	const char *msg = e->msg[0] ? e->msg : "the operation failed";

	snprintf(out, n, "%s: %s", sg_err_word(code), msg);
}
