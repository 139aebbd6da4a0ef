/*
 * digest.c - SHA-256 for adapters (digest.h).
 */
#include "core/digest.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/hex.h"
#include "base/slug.h"

bool sg_sha256_hex(const void *data, size_t n, char out[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;

	if (!EVP_Digest(data, n, md, &len, EVP_sha256(), NULL) || len != 32)
		return false;
	sg_hex(md, 32, out);
	return true;
}

sg_err sg_sha256_fd_hex(int fd, const char *what, char out[65],
			struct sg_errinfo *err)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char md[EVP_MAX_MD_SIZE], chunk[65536];
	unsigned int len = 0;
	off_t off = 0;
	sg_err rc = SG_OK;

	if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot start a SHA-256 digest");
		goto out;
	}
	for (;;) {
		ssize_t k = pread(fd, chunk, sizeof(chunk), off);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			rc = sg_err_set(err, SG_E_INTERNAL, "cannot read %s: %s", what,
					strerror(errno));
			goto out;
		}
		if (k == 0)
			break;
		EVP_DigestUpdate(ctx, chunk, (size_t)k);
		off += k;
	}
	if (!EVP_DigestFinal_ex(ctx, md, &len) || len != 32) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot finish a SHA-256 digest");
		goto out;
	}
	sg_hex(md, 32, out);
out:
	EVP_MD_CTX_free(ctx);
	return rc;
}

char *sg_slug_digest(const char *id, size_t max)
{
	bool cut;
	char *s = sg_slug_n(id, max, &cut), *longer, sum[65];
	size_t n;

	if (!s || (!cut && *id))
		return s;
	n = strlen(s);
	longer = realloc(s, n + 1 + 16 + 1);
	if (!longer || !sg_sha256_hex(id, strlen(id), sum)) {
		free(longer ? longer : s);
		return NULL;
	}
	longer[n] = '-';
	memcpy(longer + n + 1, sum, 16);
	longer[n + 17] = '\0';
	return longer;
}
