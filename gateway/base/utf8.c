#include "utf8.h"

size_t sg_utf8_seq(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	unsigned cp, min;

	if (n == 0)
		return 0;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, cp = c & 0x1f, min = 0x80;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, cp = c & 0x0f, min = 0x800;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, cp = c & 0x07, min = 0x10000;
	else
		return 0;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

bool sg_utf8_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	while (i < n) {
		size_t k = sg_utf8_seq(p + i, n - i);

		if (!k)
			return false;
		i += k;
	}
	return true;
}

/*
 * The length of the character at s for clipping: a valid sequence counts
 * whole, and so does a sequence that is only cut off by the end of the
 * data, because more bytes may complete it later.
 */
static size_t char_len(const unsigned char *s, size_t n)
{
	size_t k = sg_utf8_seq(s, n);
	size_t want;

	if (k)
		return k;
	want = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 1;
	if (want > n && want > 1) {
		for (size_t i = 1; i < n; i++)
			if ((s[i] & 0xc0) != 0x80)
				return 1;
		return n;
	}
	return 1;
}

size_t sg_utf8_clip(const char *s, size_t n, size_t max)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	if (n <= max)
		return n;
	while (i < n) {
		size_t k = char_len(p + i, n - i);

		if (i + k > max)
			return i ? i : k;
		i += k;
	}
	return i;
}

sg_err sg_utf8_sanitize(struct sg_buf *out, const char *s, size_t n)
{
	static const char fffd[] = "\xef\xbf\xbd";
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, run = 0;
	sg_err rc = SG_OK;

	while (i < n) {
		size_t k = sg_utf8_seq(p + i, n - i);

		if (k) {
			i += k;
			continue;
		}
		rc = sg_buf_add(out, s + run, i - run);
		if (!rc)
			rc = sg_buf_add(out, fffd, 3);
		if (rc)
			return rc;
		run = ++i;
	}
	return sg_buf_add(out, s + run, n - run);
}
