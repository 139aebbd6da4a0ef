/*
 * digest.h - SHA-256 for adapters: of bytes, of a file on this host, and
 * the bounded slugs that carry one.
 *
 * Invariants: digests are 64 lowercase hex digits and a NUL (out[65]);
 * nothing here keeps state, so every function is thread-safe.
 */
#ifndef SG_DIGEST_H
#define SG_DIGEST_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

/* SHA-256 of n bytes at data into out[65]; false only if OpenSSL fails. */
bool sg_sha256_hex(const void *data, size_t n, char out[65]);

/*
 * SHA-256 of the whole file fd (read with pread from offset 0, so fd's
 * position is untouched) into out[65].  SG_E_INTERNAL with a sentence
 * naming what on failure.
 */
sg_err sg_sha256_fd_hex(int fd, const char *what, char out[65],
			struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * A file-name-safe form of id (base/slug.h) of at most about max bytes: a
 * long id keeps a readable head and gets '-' and 16 hex digits of the
 * whole id's SHA-256, as does an empty one, so distinct ids never share a
 * name.  New string, or NULL.
 */
char *sg_slug_digest(const char *id, size_t max);

#endif
