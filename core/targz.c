/*
 * targz.c - a gzip'd ustar archive in memory (targz.h), with zlib.
 */
#include "core/targz.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#define SG_TAR_BLOCK 512

/* Octal, zero-padded, NUL-ended, into a field of n bytes. */
static void sg_tar_octal(char *field, size_t n, unsigned long long v)
{
	snprintf(field, n, "%0*llo", (int)(n - 1), v);
}

/* The 512-byte ustar header of e into h. */
static sg_err sg_tar_header(const struct sg_targz_entry *e, unsigned char h[SG_TAR_BLOCK])
{
	size_t len = strlen(e->name), split = 0;
	unsigned sum = 0;

	memset(h, 0, SG_TAR_BLOCK);
	if (len == 0)
		return SG_E_INVALID_ARGUMENT;
	if (len > 100) {
		/* ustar's prefix: the part before a slash, the name after it. */
		for (size_t i = len - 1; i > 0; i--)
			if (e->name[i] == '/' && i <= 155 && len - i - 1 <= 100 && len - i - 1 > 0) {
				split = i;
				break;
			}
		if (!split)
			return SG_E_INVALID_ARGUMENT;
		memcpy(h + 345, e->name, split);
		memcpy(h, e->name + split + 1, len - split - 1);
	} else {
		memcpy(h, e->name, len);
	}
	sg_tar_octal((char *)h + 100, 8, e->mode & 07777);
	/* Seven octal digits: a larger id is refused, never cut. */
	if (e->uid > 07777777 || e->gid > 07777777)
		return SG_E_INVALID_ARGUMENT;
	sg_tar_octal((char *)h + 108, 8, e->uid & 07777777);
	sg_tar_octal((char *)h + 116, 8, e->gid & 07777777);
	sg_tar_octal((char *)h + 124, 12, e->len);
	sg_tar_octal((char *)h + 136, 12, (unsigned long long)time(NULL));
	h[156] = e->dir ? '5' : '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	for (size_t i = 0; i < SG_TAR_BLOCK; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	return SG_OK;
}

/* Deflate len bytes (flush at the end) into out. */
static sg_err sg_gz_put(z_stream *z, const void *data, size_t len, int flush,
			struct sg_buf *out)
{
	z->next_in = (Bytef *)(uintptr_t)data;
	z->avail_in = (uInt)len;
	for (;;) {
		char *at;
		sg_err rc = sg_buf_reserve(out, 64 * 1024, &at);
		int zr;

		if (rc)
			return rc;
		z->next_out = (Bytef *)at;
		z->avail_out = 64 * 1024;
		zr = deflate(z, flush);
		if (zr == Z_STREAM_ERROR)
			return SG_E_INTERNAL;
		sg_buf_commit(out, 64 * 1024 - z->avail_out);
		if (flush == Z_FINISH ? zr == Z_STREAM_END : z->avail_out != 0)
			return SG_OK;
	}
}

sg_err sg_targz(const struct sg_targz_entry *e, size_t n, struct sg_buf *out)
{
	static const unsigned char zero[SG_TAR_BLOCK * 2];
	unsigned char h[SG_TAR_BLOCK];
	z_stream z;
	sg_err rc = SG_OK;

	memset(&z, 0, sizeof(z));
	/*
	 * 15 + 16: a gzip wrapper, as the receiving side's gunzip expects.
	 * Level 1: sg-helper packs in a third of level 6's time for 7% more
	 * bytes, and the packing is on the way to a sandbox's first command.
	 */
	if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return SG_E_INTERNAL;
	for (size_t i = 0; !rc && i < n; i++) {
		size_t pad = (SG_TAR_BLOCK - e[i].len % SG_TAR_BLOCK) % SG_TAR_BLOCK;

		rc = sg_tar_header(&e[i], h);
		/* zlib takes uInt lengths: feed large files in pieces. */
		if (!rc)
			rc = sg_gz_put(&z, h, sizeof(h), Z_NO_FLUSH, out);
		for (size_t at = 0; !rc && at < e[i].len;) {
			size_t k = e[i].len - at > (1u << 30) ? (1u << 30) : e[i].len - at;

			rc = sg_gz_put(&z, (const char *)e[i].data + at, k, Z_NO_FLUSH, out);
			at += k;
		}
		if (!rc && pad)
			rc = sg_gz_put(&z, zero, pad, Z_NO_FLUSH, out);
	}
	if (!rc)
		rc = sg_gz_put(&z, zero, sizeof(zero), Z_FINISH, out);
	deflateEnd(&z);
	return rc;
}
