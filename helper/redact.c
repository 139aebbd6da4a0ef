/*
 * redact.c - credential values masked in what read_file shows of a
 * sensitive file, the host's redaction (internal/tools/redaction.go).
 *
 * Only an unconfined read reaches a sensitive path (.env, keys, credential
 * stores); the host then masks what looks like a credential before the
 * model sees it, and so does sandgate, the same five shapes:
 *   - "Bearer <token>" (8 or more token characters): the token;
 *   - "<key> = value" or "<key>: value" for api_key, access_token,
 *     refresh_token, id_token, token, authorization, password, passwd and
 *     secret (any case; "-" or "_" or nothing inside the two-word keys):
 *     the value, with an opening quote;
 *   - "sk-" and 8 or more key characters;
 *   - a PEM private key block, BEGIN to END;
 *   - a JWT: three dot-separated base64url parts whose header names an
 *     "alg".
 * Each becomes [REDACTED].  As the host applies its patterns one after
 * the other to the whole text, one pass per shape runs over the result of
 * the one before, so "Authorization: Bearer <token>" loses both.  No
 * regular expression is compiled: each pass is linear in the text.
 */
#define _GNU_SOURCE /* memmem */
#include "helper/fs.h"

#include <string.h>

#define REDACTED "[REDACTED]"

static bool word_char(unsigned char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       ch == '_';
}

static bool space(unsigned char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
}

static unsigned char lower(unsigned char ch)
{
	return ch >= 'A' && ch <= 'Z' ? (unsigned char)(ch - 'A' + 'a') : ch;
}

/* Whether p[0..n) begins with word, in any case; its length or 0. */
static size_t starts(const char *p, size_t n, const char *word)
{
	size_t k = strlen(word);

	for (size_t i = 0; i < k; i++)
		if (i >= n || lower((unsigned char)p[i]) != (unsigned char)word[i])
			return 0;
	return k;
}

/* A key as the host's alternation takes it, first match first; its length. */
static size_t key_at(const char *p, size_t n)
{
	static const char *const two[][2] = { { "api", "key" },		{ "access", "token" },
					      { "refresh", "token" }, { "id", "token" } };
	static const char *const one[] = { "token", "authorization", "password", "passwd",
					   "secret" };

	for (size_t i = 0; i < sizeof(two) / sizeof(two[0]); i++) {
		size_t a = starts(p, n, two[i][0]), b;

		if (!a)
			continue;
		if (a < n && (p[a] == '_' || p[a] == '-') && (b = starts(p + a + 1, n - a - 1,
								      two[i][1])))
			return a + 1 + b;
		if ((b = starts(p + a, n - a, two[i][1])))
			return a + b;
	}
	for (size_t i = 0; i < sizeof(one) / sizeof(one[0]); i++) {
		size_t k = starts(p, n, one[i]);

		if (k)
			return k;
	}
	return 0;
}

/*
 * key, separator, value at p: *head is the length kept (the key and the
 * separator), the return the whole match's, or 0.
 */
static size_t key_value(const char *p, size_t n, size_t *head)
{
	size_t i = key_at(p, n), v;

	if (!i)
		return 0;
	while (i < n && space((unsigned char)p[i]))
		i++;
	if (i >= n || (p[i] != ':' && p[i] != '='))
		return 0;
	i++;
	while (i < n && space((unsigned char)p[i]))
		i++;
	*head = i;
	if (i < n && (p[i] == '"' || p[i] == '\''))
		i++;
	for (v = i; i < n && p[i] != '"' && p[i] != '\'' && p[i] != ',' && p[i] != ';' &&
		    !space((unsigned char)p[i]); i++)
		;
	return i > v ? i : 0;
}

static bool token_char(unsigned char ch)
{
	return word_char(ch) || ch == '.' || ch == '~' || ch == '+' || ch == '/' || ch == '=' ||
	       ch == '-';
}

/* "bearer", spaces, 8+ token characters: *head keeps "bearer" and spaces. */
static size_t bearer(const char *p, size_t n, size_t *head)
{
	size_t i = starts(p, n, "bearer"), v;

	if (!i || i >= n || !space((unsigned char)p[i]))
		return 0;
	while (i < n && space((unsigned char)p[i]))
		i++;
	*head = i;
	for (v = i; i < n && token_char((unsigned char)p[i]); i++)
		;
	return i - v >= 8 ? i : 0;
}

static bool key_char(unsigned char ch)
{
	return word_char(ch) || ch == '-';
}

/* "sk-" and 8+ key characters ending at a word boundary. */
static size_t sk_key(const char *p, size_t n, size_t *head)
{
	size_t i = 3;

	*head = 0;
	if (n < 3 || memcmp(p, "sk-", 3) != 0)
		return 0;
	while (i < n && key_char((unsigned char)p[i]))
		i++;
	/* The host's \b after the key: a trailing '-' before a non-word. */
	while (i > 3 && !word_char((unsigned char)p[i - 1]) &&
	       (i == n || !word_char((unsigned char)p[i])))
		i--;
	return i - 3 >= 8 ? i : 0;
}

/* A PEM private key block from its BEGIN line to its END line. */
static size_t pem_key(const char *p, size_t n, size_t *head)
{
	static const char begin[] = "-----BEGIN ", tail[] = "PRIVATE KEY-----", end[] = "-----END ";
	const char *q, *e;
	size_t i = sizeof(begin) - 1;

	*head = 0;
	if (n < i || memcmp(p, begin, i) != 0)
		return 0;
	while (i < n && ((p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= '0' && p[i] <= '9') ||
			 p[i] == ' '))
		i++;
	/* [A-Z0-9 ]* takes the spaces too: back up to where the tail begins. */
	for (q = p + sizeof(begin) - 1; q <= p + i; q++)
		if ((size_t)(p + n - q) >= sizeof(tail) - 1 && !memcmp(q, tail, sizeof(tail) - 1))
			break;
	if (q > p + i)
		return 0;
	for (e = q + sizeof(tail) - 1; (e = memmem(e, (size_t)(p + n - e), end,
						    sizeof(end) - 1)) != NULL; e++) {
		const char *t = e + sizeof(end) - 1;

		while (t < p + n && ((*t >= 'A' && *t <= 'Z') || (*t >= '0' && *t <= '9') ||
				     *t == ' '))
			t++;
		for (const char *u = e + sizeof(end) - 1; u <= t; u++)
			if ((size_t)(p + n - u) >= sizeof(tail) - 1 &&
			    !memcmp(u, tail, sizeof(tail) - 1))
				return (size_t)(u + sizeof(tail) - 1 - p);
	}
	return 0;
}

static bool b64url_char(unsigned char ch)
{
	return word_char(ch) || ch == '-';
}

/* A JWT: header.payload.signature, each 10+ base64url characters, the
 * header naming an "alg". */
static size_t jwt(const char *p, size_t n, size_t *head)
{
	size_t seg[3], i = 0;
	char hdr[256];
	size_t hl = 0;
	unsigned acc = 0, bits = 0;

	*head = 0;
	for (int s = 0; s < 3; s++) {
		size_t start = i;

		while (i < n && b64url_char((unsigned char)p[i]))
			i++;
		seg[s] = i - start;
		if (seg[s] < 10 || (s < 2 && (i >= n || p[i] != '.')))
			return 0;
		if (s < 2)
			i++;
	}
	if (i < n && word_char((unsigned char)p[i]))
		return 0;
	for (size_t k = 0; k < seg[0] && hl < sizeof(hdr) - 1; k++) {
		unsigned char ch = (unsigned char)p[k];
		int v = ch >= 'A' && ch <= 'Z' ? ch - 'A' : ch >= 'a' && ch <= 'z' ? ch - 'a' + 26
			: ch >= '0' && ch <= '9' ? ch - '0' + 52 : ch == '-' ? 62 : 63;

		acc = acc << 6 | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			hdr[hl++] = (char)(acc >> bits);
		}
	}
	hdr[hl] = '\0';
	return hdr[0] == '{' && strstr(hdr, "\"alg\"") ? i : 0;
}

/* Where a match may begin: a word start, or any '-' for a PEM block. */
typedef size_t (*redact_fn)(const char *p, size_t n, size_t *head);

static const struct {
	redact_fn match;
	bool at_word;
} passes[] = {
	{ bearer, true }, { key_value, true }, { sk_key, true }, { pem_key, false }, { jwt, true },
};

/* One pattern over in[0..n) into out (reset first). */
static sg_err redact_pass(const struct sg_buf *in, redact_fn match, bool at_word,
			  struct sg_buf *out)
{
	const char *p = in->p;
	size_t i = 0, done = 0, n = in->len;
	sg_err rc = SG_OK;

	sg_buf_reset(out);
	while (i < n && !rc) {
		size_t head = 0, len = 0;

		if (at_word ? (i == 0 || !word_char((unsigned char)p[i - 1])) &&
				      word_char((unsigned char)p[i])
			    : p[i] == '-')
			len = match(p + i, n - i, &head);
		if (!len) {
			i++;
			continue;
		}
		rc = sg_buf_add(out, p + done, i + head - done);
		if (!rc)
			rc = sg_buf_adds(out, REDACTED);
		i += len;
		done = i;
	}
	if (!rc)
		rc = sg_buf_add(out, p + done, n - done);
	return rc;
}

sg_err sg_fs_redact(const char *p, size_t n, struct sg_buf *out)
{
	struct sg_buf a = SG_BUF_INIT(out->max), b = SG_BUF_INIT(out->max);
	struct sg_buf *from = &a, *to = &b, *t;
	sg_err rc = sg_buf_add(&a, p, n);

	for (size_t k = 0; !rc && k < sizeof(passes) / sizeof(passes[0]); k++) {
		rc = redact_pass(from, passes[k].match, passes[k].at_word, to);
		t = from, from = to, to = t;
	}
	sg_buf_reset(out);
	if (!rc)
		rc = sg_buf_add(out, from->p, from->len);
	sg_buf_release(&a);
	sg_buf_release(&b);
	return rc;
}
