#include "jw.h"

#include <string.h>

#include "utf8.h"

sg_err sg_jw_str(struct sg_buf *b, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, run = 0;
	sg_err rc = sg_buf_addc(b, '"');

	while (!rc && i < n) {
		unsigned c = p[i];
		size_t k = c < 0x80 ? 1 : sg_utf8_seq(p + i, n - i);
		char esc[8];
		const char *rep = NULL;

		if (c >= 0x20 && c != '"' && c != '\\' && k) {
			i += k;
			continue;
		}
		if (!k)
			rep = "\xef\xbf\xbd";
		else if (c == '"')
			rep = "\\\"";
		else if (c == '\\')
			rep = "\\\\";
		else if (c == '\n')
			rep = "\\n";
		else if (c == '\t')
			rep = "\\t";
		else if (c == '\r')
			rep = "\\r";
		else {
			static const char hex[] = "0123456789abcdef";

			memcpy(esc, "\\u00", 4);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			esc[6] = '\0';
			rep = esc;
		}
		rc = sg_buf_add(b, s + run, i - run);
		if (!rc)
			rc = sg_buf_adds(b, rep);
		run = ++i;
	}
	if (!rc)
		rc = sg_buf_add(b, s + run, n - run);
	if (!rc)
		rc = sg_buf_addc(b, '"');
	return rc;
}

sg_err sg_jw_key(struct sg_buf *b, const char *key, int first)
{
	sg_err rc = first ? SG_OK : sg_buf_addc(b, ',');

	if (!rc)
		rc = sg_jw_str(b, key, strlen(key));
	if (!rc)
		rc = sg_buf_addc(b, ':');
	return rc;
}
