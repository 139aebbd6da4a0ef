#include "base/slug.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

char *sg_slug_n(const char *s, size_t max, bool *cut)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = malloc(3 * (n < max ? n : max) + 3 + 1), *o = out;

	*cut = false;
	if (!out)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((size_t)(o - out) >= max) {
			*cut = true;
			break;
		}
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' ||
		    (*p == '.' && p != (const unsigned char *)s)) {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = '\0';
	return out;
}

char *sg_slug(const char *s)
{
	bool cut;

	return sg_slug_n(s, SIZE_MAX, &cut);
}
