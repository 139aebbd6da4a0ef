/*
 * registry.h - which image a docker:// or oras:// reference names now: the
 * reference parsed (pure, unit-tested) and its manifest digest asked of the
 * registry (the OCI distribution API: HEAD /v2/REPO/manifests/TAG, with an
 * anonymous bearer token when the registry asks for one).
 *
 * The singularity backend keys its SIF cache by reference and digest, so a
 * tag that moved is converted again and a reference pinned by digest is
 * found without asking anyone.
 *
 * Invariants: a parsed reference's fields are NUL-terminated and within
 * their arrays; a digest is always "sha256:" and 64 lower-case hex digits.
 * Nothing here keeps a pointer to its arguments.
 */
#ifndef SG_SING_REGISTRY_H
#define SG_SING_REGISTRY_H

#include <stdbool.h>

#include "base/cancel.h"
#include "base/err.h"

#define SG_SING_DIGEST_LEN 71 /* "sha256:" + 64 hex */

struct sg_sing_ref {
	bool oras;              /* oras://, else docker:// */
	char host[256];         /* as written ("docker.io" for Docker Hub) */
	char api_host[256];     /* where the API is ("registry-1.docker.io") */
	char repo[512];         /* "library/debian" */
	char tag[128];          /* "12"; "" when pinned by digest only */
	char digest[SG_SING_DIGEST_LEN + 1]; /* "sha256:..." or "" */
	bool plain_http;        /* a loopback registry: http, as Docker does */
};

/*
 * Parse docker://[HOST/]NAME[:TAG][@sha256:HEX] or
 * oras://HOST/NAME[:TAG][@sha256:HEX].  Docker Hub's short names get
 * "library/" and the tag defaults to "latest" unless a digest is given.
 * False for anything else, a digest that is not sha256, or a field too long.
 */
bool sg_sing_ref_parse(const char *text, struct sg_sing_ref *r);

/* Whether text is "sha256:" and 64 hex digits. */
bool sg_sing_digest_valid(const char *text);

/*
 * The reference pinned: SCHEME://HOST/REPO@DIGEST (new), what the
 * runtime is asked to build so the SIF is exactly the digest keyed.
 */
char *sg_sing_ref_pinned(const struct sg_sing_ref *r, const char *digest);

/*
 * The manifest digest the registry gives for r's tag now (r->digest when
 * pinned, without a request).  SG_E_UNAVAILABLE when the registry cannot
 * be reached, SG_E_NOT_FOUND for an unknown tag, SG_E_PERMISSION when it
 * wants credentials, SG_E_PROVIDER for anything else; err names the
 * reference.
 */
sg_err sg_sing_ref_resolve(const struct sg_sing_ref *r, char digest[SG_SING_DIGEST_LEN + 1],
			   struct sg_cancel *cancel, struct sg_errinfo *err) SG_MUST_CHECK;

#endif
