#include "base/utf8.h"

#include <stdint.h>
#include <string.h>

/*
 * Text is mostly ASCII: eight bytes at a time are checked for a high bit
 * before any sequence is decoded (a megabyte read checks in a fraction of
 * the time).  memcpy keeps the wide load aligned-agnostic and legal.
 */
bool sg_utf8_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	while (i < n) {
		size_t k;
		uint64_t w;

		if (n - i >= sizeof(w)) {
			memcpy(&w, p + i, sizeof(w));
			if (!(w & UINT64_C(0x8080808080808080))) {
				i += sizeof(w);
				continue;
			}
		}
		k = sg_utf8_seq(p + i, n - i);

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
