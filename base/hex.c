#include "base/hex.h"

void sg_hex(const void *b, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *p = b;

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
}
