/*
 * sha256.h - SHA-256 (FIPS 180-4) in plain C, for sg-helper.
 *
 * The helper is a static program that travels into remote environments
 * without OpenSSL, yet it must give the digests the host's tools give
 * (read_file's content_sha256, the workspace revision): this is the one
 * implementation it uses.  The gateway keeps using OpenSSL
 * (core/digest.h).
 *
 * Invariants: a context is a plain value, so it needs no release; nothing
 * here keeps global state, so every function is thread-safe.  Use the API,
 * not the fields.
 */
#ifndef SG_SHA256_H
#define SG_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SG_SHA256_LEN 32

struct sg_sha256 {
	uint32_t h[8];
	uint64_t bytes;
	unsigned char block[64];
	size_t used;
};

void sg_sha256_init(struct sg_sha256 *c);
void sg_sha256_update(struct sg_sha256 *c, const void *data, size_t n);
/* The digest into out; c must be initialised again before reuse. */
void sg_sha256_final(struct sg_sha256 *c, unsigned char out[SG_SHA256_LEN]);
/* The digest so far as 64 lowercase hex digits and a NUL (c is spent). */
void sg_sha256_final_hex(struct sg_sha256 *c, char out[2 * SG_SHA256_LEN + 1]);

#endif
