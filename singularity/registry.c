/*
 * registry.c - a docker:// or oras:// reference parsed, and its manifest
 * digest asked of the registry (registry.h).
 *
 * The question is the one Apptainer itself asks before it pulls (a HEAD of
 * the manifest, its Docker-Content-Digest header; a GET and the body's
 * sha256 when a registry leaves the header out): anonymous, with the
 * bearer token a registry's 401 points at.  A registry that wants
 * credentials for the tag is refused: pin the reference by digest, or
 * build the SIF yourself.
 */
#define _GNU_SOURCE /* asprintf */
#include "singularity/registry.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "core/digest.h"
#include "core/http.h"
#include "base/buf.h"
#include "base/limits.h"

/* What a HEAD of the manifest accepts: indexes first, as the runtime does. */
static const char *const accept_line =
	"Accept: application/vnd.oci.image.index.v1+json, "
	"application/vnd.docker.distribution.manifest.list.v2+json, "
	"application/vnd.oci.image.manifest.v1+json, "
	"application/vnd.docker.distribution.manifest.v2+json";

bool sg_sing_digest_valid(const char *text)
{
	if (!text || strncmp(text, "sha256:", 7) != 0 || strlen(text) != SG_SING_DIGEST_LEN)
		return false;
	for (const char *p = text + 7; *p; p++)
		if (!isxdigit((unsigned char)*p) || isupper((unsigned char)*p))
			return false;
	return true;
}

/* Copy n bytes of s into dst (size cap) or say it does not fit. */
static bool put(char *dst, size_t cap, const char *s, size_t n)
{
	if (n >= cap)
		return false;
	memcpy(dst, s, n);
	dst[n] = '\0';
	return true;
}

static bool loopback(const char *host)
{
	static const char *const names[] = { "localhost", "127.0.0.1", "[::1]", NULL };

	for (size_t i = 0; names[i]; i++) {
		size_t n = strlen(names[i]);

		if (strncmp(host, names[i], n) == 0 && (host[n] == '\0' || host[n] == ':'))
			return true;
	}
	return false;
}

bool sg_sing_ref_parse(const char *text, struct sg_sing_ref *r)
{
	const char *rest, *at, *slash, *colon;
	size_t len;

	memset(r, 0, sizeof(*r));
	if (!text)
		return false;
	if (strncmp(text, "docker://", 9) == 0) {
		rest = text + 9;
	} else if (strncmp(text, "oras://", 7) == 0) {
		r->oras = true;
		rest = text + 7;
	} else {
		return false;
	}
	at = strchr(rest, '@');
	if (at && (!sg_sing_digest_valid(at + 1) ||
		   !put(r->digest, sizeof(r->digest), at + 1, strlen(at + 1))))
		return false;
	len = at ? (size_t)(at - rest) : strlen(rest);
	if (len == 0)
		return false;
	/* A first component with a dot, a port or "localhost" is a registry. */
	slash = memchr(rest, '/', len);
	if (slash && (memchr(rest, '.', (size_t)(slash - rest)) ||
		      memchr(rest, ':', (size_t)(slash - rest)) ||
		      (slash - rest == 9 && strncmp(rest, "localhost", 9) == 0))) {
		if (!put(r->host, sizeof(r->host), rest, (size_t)(slash - rest)))
			return false;
		len -= (size_t)(slash - rest) + 1;
		rest = slash + 1;
	} else if (r->oras) {
		return false; /* oras:// always names its registry */
	} else {
		snprintf(r->host, sizeof(r->host), "docker.io");
	}
	snprintf(r->api_host, sizeof(r->api_host), "%s",
		 strcmp(r->host, "docker.io") == 0 ? "registry-1.docker.io" : r->host);
	/* The tag: after the last ':' that follows the last '/'. */
	slash = NULL;
	for (const char *p = rest; p < rest + len; p++)
		if (*p == '/')
			slash = p;
	colon = memchr(slash ? slash : rest, ':', len - (size_t)((slash ? slash : rest) - rest));
	if (colon) {
		if (!put(r->tag, sizeof(r->tag), colon + 1, (size_t)(rest + len - colon - 1)) ||
		    !r->tag[0])
			return false;
		len = (size_t)(colon - rest);
	} else if (!r->digest[0]) {
		snprintf(r->tag, sizeof(r->tag), "latest");
	}
	if (len == 0)
		return false;
	if (strcmp(r->host, "docker.io") == 0 && !memchr(rest, '/', len)) {
		if (len + 8 >= sizeof(r->repo))
			return false;
		snprintf(r->repo, sizeof(r->repo), "library/%.*s", (int)len, rest);
	} else if (!put(r->repo, sizeof(r->repo), rest, len)) {
		return false;
	}
	for (const char *p = r->repo; *p; p++)
		if (!islower((unsigned char)*p) && !isdigit((unsigned char)*p) && !strchr("._-/", *p))
			return false;
	r->plain_http = loopback(r->host);
	return true;
}

char *sg_sing_ref_pinned(const struct sg_sing_ref *r, const char *digest)
{
	char *out = NULL;

	return asprintf(&out, "%s://%s/%s@%s", r->oras ? "oras" : "docker", r->host, r->repo,
			digest) < 0 ? NULL : out;
}

/*
 * The value of KEY="..." in a WWW-Authenticate: Bearer challenge, into
 * out (percent-encoded for a query), or false.
 */
static bool challenge_param(const char *header, const char *key, struct sg_buf *out)
{
	size_t klen = strlen(key);

	for (const char *p = header; (p = strcasestr(p, key)); p += klen) {
		const char *v = p + klen, *end;

		if ((p != header && isalnum((unsigned char)p[-1])) || v[0] != '=' || v[1] != '"')
			continue;
		v += 2;
		end = strchr(v, '"');
		if (!end)
			return false;
		for (; v < end; v++) {
			sg_err rc = isalnum((unsigned char)*v) || strchr("-._~:/", *v)
					    ? sg_buf_addc(out, *v)
					    : sg_buf_addf(out, "%%%02X", (unsigned char)*v);

			if (rc)
				return false;
		}
		return true;
	}
	return false;
}

/* An anonymous token from the challenge's realm into *token (new). */
static sg_err fetch_token(const struct sg_sing_ref *r, const char *challenge, char **token,
			  struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_buf realm = SG_BUF_INIT(SG_SING_URL_MAX), service = SG_BUF_INIT(SG_SING_URL_MAX),
		      scope = SG_BUF_INIT(SG_SING_URL_MAX), url = SG_BUF_INIT(3 * SG_SING_URL_MAX);
	struct sg_http_response resp;
	json_t *j = NULL;
	const char *t;
	sg_err rc = SG_OK;

	sg_http_response_init(&resp, SG_SING_TOKEN_MAX);
	if (strncasecmp(challenge, "Bearer ", 7) != 0 ||
	    !challenge_param(challenge, "realm", &realm)) {
		rc = sg_err_set(err, SG_E_PERMISSION,
				"registry %s wants credentials for %s (%.40s): pin the image by digest or give a SIF file",
				r->host, r->repo, challenge);
		goto out;
	}
	/* service and scope go in the query encoded; the realm is a URL as it is. */
	if (!challenge_param(challenge, "service", &service))
		sg_buf_reset(&service);
	if (!challenge_param(challenge, "scope", &scope))
		sg_buf_reset(&scope);
	{
		struct sg_buf raw = SG_BUF_INIT(SG_SING_URL_MAX);
		const char *v = strcasestr(challenge, "realm=\"") + 7;

		if (sg_buf_add(&raw, v, strcspn(v, "\"")) ||
		    sg_buf_addf(&url, "%s%sservice=%s&scope=%s", raw.p, strchr(raw.p, '?') ? "&" : "?",
				service.p, scope.p))
			rc = sg_err_set(err, SG_E_PROVIDER, "registry %s: the token realm is too long",
					r->host);
		sg_buf_release(&raw);
		if (rc)
			goto out;
	}
	{
		struct sg_http_request req = { .method = "GET", .url = url.p,
					       .timeout_ms = SG_SING_REGISTRY_MS };

		rc = sg_http_do(&req, &resp, cancel, err);
	}
	if (rc)
		goto out;
	j = resp.status == 200 ? json_loadb(resp.body.p, resp.body.len, 0, NULL) : NULL;
	t = json_string_value(json_object_get(j, "token"));
	if (!t)
		t = json_string_value(json_object_get(j, "access_token"));
	if (!t || !(*token = strdup(t)))
		rc = sg_err_set(err, resp.status == 401 || resp.status == 403 ? SG_E_PERMISSION
										: SG_E_PROVIDER,
				"registry %s gave no anonymous token for %s (HTTP %ld): pin the image by digest or give a SIF file",
				r->host, r->repo, resp.status);
out:
	json_decref(j);
	sg_http_response_release(&resp);
	sg_buf_release(&realm);
	sg_buf_release(&service);
	sg_buf_release(&scope);
	sg_buf_release(&url);
	return rc;
}

/* One manifest request (HEAD or GET) with an optional bearer token. */
static sg_err manifest_request(const struct sg_sing_ref *r, const char *method,
			       const char *token, struct sg_http_response *resp,
			       struct sg_cancel *cancel, struct sg_errinfo *err)
{
	char *url = NULL, *auth = NULL;
	sg_err rc;

	if (asprintf(&url, "%s://%s/v2/%s/manifests/%s", r->plain_http ? "http" : "https",
		     r->api_host, r->repo, r->tag) < 0 ||
	    (token && asprintf(&auth, "Authorization: Bearer %s", token) < 0)) {
		free(url);
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	{
		const char *headers[] = { accept_line, auth, NULL };
		struct sg_http_request req = { .method = method, .url = url, .headers = headers,
					       .timeout_ms = SG_SING_REGISTRY_MS };

		rc = sg_http_do(&req, resp, cancel, err);
	}
	free(url);
	free(auth);
	return rc;
}

sg_err sg_sing_ref_resolve(const struct sg_sing_ref *r, char digest[SG_SING_DIGEST_LEN + 1],
			   struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_http_response resp;
	char *token = NULL, sum[65];
	const char *d;
	sg_err rc;

	if (r->digest[0]) {
		memcpy(digest, r->digest, SG_SING_DIGEST_LEN + 1);
		return SG_OK;
	}
	sg_http_response_init(&resp, SG_SING_MANIFEST_MAX);
	rc = manifest_request(r, "HEAD", NULL, &resp, cancel, err);
	if (!rc && resp.status == 401) {
		const char *ch = sg_http_header(&resp, "WWW-Authenticate");

		rc = fetch_token(r, ch ? ch : "", &token, cancel, err);
		if (!rc)
			rc = manifest_request(r, "HEAD", token, &resp, cancel, err);
	}
	if (rc)
		goto out;
	d = sg_http_header(&resp, "Docker-Content-Digest");
	if (resp.status == 200 && !sg_sing_digest_valid(d)) {
		/* The header is optional in the OCI spec: hash the manifest. */
		rc = manifest_request(r, "GET", token, &resp, cancel, err);
		if (rc)
			goto out;
		if (resp.status == 200 && sg_sha256_hex(resp.body.p, resp.body.len, sum)) {
			snprintf(digest, SG_SING_DIGEST_LEN + 1, "sha256:%s", sum);
			goto out;
		}
	}
	if (resp.status == 200 && sg_sing_digest_valid(d))
		memcpy(digest, d, SG_SING_DIGEST_LEN + 1);
	else
		rc = sg_err_set(err, resp.status == 404 ? SG_E_NOT_FOUND
				     : resp.status == 401 || resp.status == 403 ? SG_E_PERMISSION
										 : SG_E_PROVIDER,
				"registry %s: %s:%s %s (HTTP %ld)", r->host, r->repo, r->tag,
				resp.status == 404 ? "does not exist" : "has no digest", resp.status);
out:
	free(token);
	sg_http_response_release(&resp);
	return rc;
}
