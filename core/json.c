/*
 * json.c - the JSON parser (see json.h for what it accepts and why).
 *
 * One pass, no recursion.  An explicit stack holds the open containers as
 * borrowed pointers: each container is attached to its parent the moment it
 * is opened, so the root owns everything built so far and an error needs
 * only one json_decref.  That also frees the object key as soon as the
 * value is attached, so one key buffer serves the whole parse.
 *
 * Strings are the hot path.  plain_end() finds the next byte that needs a
 * decision ('"', '\\', a control byte or a non-ASCII byte) eight bytes at a
 * time, and a string without escapes is handed to jansson straight from the
 * input (json_stringn_nocheck copies it once).  From a string's first
 * escape on, decode_rest() copies eight bytes at a time into one of two
 * scratch buffers (keys, values); decoded strings are never longer than
 * their source, and the buffers grow by doubling and serve the whole parse.
 */
#include "core/json.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/jw.h"
#include "base/utf8.h"

/* jansson's limit; every value counts a level, scalars included. */
#define JS_MAX_DEPTH JSON_PARSER_MAX_DEPTH

#if JSON_INTEGER_IS_LONG_LONG
#define JS_INT_MAX LLONG_MAX
#else
#define JS_INT_MAX LONG_MAX
#endif

/* A decode buffer: small strings never reach the heap. */
struct scratch {
	char *p; /* small, or a heap block of cap bytes */
	size_t len, cap;
	char small[128];
};

struct parser {
	const unsigned char *p;
	size_t n, i; /* input, its length, the current offset */
	unsigned flags;
	struct sg_errinfo *err;
	json_t **stack; /* open containers, borrowed; small or heap */
	size_t depth, cap;
	json_t *small[32];
	struct scratch key, val;
};

static sg_err fail(struct parser *ps, size_t at, const char *what)
{
	return sg_err_set(ps->err, SG_E_INVALID_ARGUMENT, "%s at byte %zu", what,
			  at);
}

static sg_err oom(struct parser *ps)
{
	return sg_err_set(ps->err, SG_E_INTERNAL,
			  "out of memory while parsing JSON");
}

static void scratch_init(struct scratch *s)
{
	s->p = s->small;
	s->len = 0;
	s->cap = sizeof(s->small);
}

static void scratch_release(struct scratch *s)
{
	if (s->p != s->small)
		free(s->p);
}

/* Room for more bytes after len, growing by doubling. */
static bool scratch_reserve(struct scratch *s, size_t more)
{
	size_t need = s->len + more, cap;
	char *np;

	if (need <= s->cap)
		return true;
	cap = s->cap <= SIZE_MAX / 2 && s->cap * 2 > need ? s->cap * 2 : need;
	if (s->p == s->small) {
		np = malloc(cap);
		if (np)
			memcpy(np, s->small, s->len);
	} else {
		np = realloc(s->p, cap);
	}
	if (!np)
		return false;
	s->p = np;
	s->cap = cap;
	return true;
}

/*
 * The bytes a string run stops at, as a word test: the high bit of each
 * byte of the result is set for '"', '\\', bytes below 0x20 and bytes from
 * 0x80.  A subtraction can borrow into the byte above a match and flag it
 * too, so only the lowest flagged byte is exact; that is the one used.
 */
#define ONES UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)

static inline uint64_t stop_mask(uint64_t v)
{
	uint64_t q = v ^ (ONES * '"'), b = v ^ (ONES * '\\');

	return ((q - ONES) | (b - ONES) | (v - ONES * 0x20) | v) & HIGHS;
}

static inline bool is_stop(unsigned char c)
{
	return c == '"' || c == '\\' || c < 0x20 || c >= 0x80;
}

/* The offset of the first stop byte at or after i, or n. */
static size_t plain_end(const unsigned char *p, size_t i, size_t n)
{
	for (; n - i >= 8; i += 8) {
		uint64_t v, m;

		memcpy(&v, p + i, 8);
		m = stop_mask(v);
		if (!m)
			continue;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		/* Memory order is significance order: the lowest is first. */
		return i + (size_t)__builtin_ctzll(m) / 8;
#else
		break;
#endif
	}
	while (i < n && !is_stop(p[i]))
		i++;
	return i;
}

static inline bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static inline bool is_ws(unsigned char c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static void skip_ws(struct parser *ps)
{
	while (ps->i < ps->n && is_ws(ps->p[ps->i]))
		ps->i++;
}

/* The value of 4 hex digits at s, or -1. */
static long hex4(const unsigned char *s)
{
	long v = 0;

	for (int k = 0; k < 4; k++) {
		unsigned char c = s[k];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

/* What each one-letter escape stands for; 0 for the rest. */
static const unsigned char simple_escape[256] = {
	['"'] = '"', ['\\'] = '\\', ['/'] = '/', ['b'] = '\b',
	['f'] = '\f', ['n'] = '\n', ['r'] = '\r', ['t'] = '\t',
};

/*
 * Decode the \u escape (or surrogate pair) whose backslash is at *ip to *op
 * (room for 4 bytes) and move both past it.  *nul_at records where a
 * \u0000 was seen.
 */
static sg_err unescape_u(struct parser *ps, size_t *ip, char **op,
			 size_t *nul_at)
{
	const unsigned char *p = ps->p;
	size_t i = *ip, n = ps->n;
	long cp, lo;

	if (n - i < 6 || (cp = hex4(p + i + 2)) < 0)
		return fail(ps, i, "invalid \\u escape in a string");
	if (cp >= 0xdc00 && cp <= 0xdfff)
		return fail(ps, i, "unpaired surrogate escape in a string");
	if (cp >= 0xd800 && cp <= 0xdbff) {
		/* Only a low surrogate escape may follow a high one. */
		if (n - i < 12 || p[i + 6] != '\\' || p[i + 7] != 'u' ||
		    (lo = hex4(p + i + 8)) < 0xdc00 || lo > 0xdfff)
			return fail(ps, i, "unpaired surrogate escape in a string");
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		i += 6;
	}
	if (cp == 0 && *nul_at == SIZE_MAX)
		*nul_at = i;
	*op += sg_utf8_put(*op, (unsigned long)cp);
	*ip = i + 6;
	return SG_OK;
}

/*
 * Decode the rest of a string from the escape at i into sc, which holds
 * the part before it, up to and past the closing quote.  Each round makes
 * room for 16 bytes first, so a word can be stored before it is known how
 * much of it belongs to the run, and an escape (at most 4 bytes out) or a
 * character needs no check of its own.  The output position lives in
 * locals: through sc it would be reloaded after every byte stored.
 */
static sg_err decode_rest(struct parser *ps, struct scratch *sc, size_t i,
			  size_t *nul_at)
{
	const unsigned char *p = ps->p;
	size_t n = ps->n;
	char *o = sc->p + sc->len, *oend = sc->p + sc->cap;
	sg_err rc = SG_OK;

	for (;;) {
		unsigned char c;

		if (oend - o < 16) {
			sc->len = (size_t)(o - sc->p);
			if (!scratch_reserve(sc, 16))
				return oom(ps);
			o = sc->p + sc->len;
			oend = sc->p + sc->cap;
		}
		if (n - i >= 8) {
			uint64_t v, m;

			memcpy(&v, p + i, 8);
			memcpy(o, &v, 8);
			m = stop_mask(v);
			if (!m) {
				i += 8;
				o += 8;
				continue;
			}
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
			i += (size_t)__builtin_ctzll(m) / 8;
			o += (size_t)__builtin_ctzll(m) / 8;
#endif
		}
		/* Fewer than 8 bytes left, or another byte order. */
		for (int k = 0; k < 8 && i < n && !is_stop(p[i]); k++)
			*o++ = (char)p[i++];
		if (i >= n) {
			rc = fail(ps, n, "unexpected end of input in a string");
			break;
		}
		c = p[i];
		if (c == '\\') {
			unsigned char e = i + 1 < n ? simple_escape[p[i + 1]] : 0;

			if (e) {
				*o++ = (char)e;
				i += 2;
				continue;
			}
			if (i + 1 < n && p[i + 1] == 'u') {
				rc = unescape_u(ps, &i, &o, nul_at);
				if (rc)
					break;
				continue;
			}
			if (i + 1 >= n)
				rc = fail(ps, n,
					  "unexpected end of input in a string");
			else
				rc = fail(ps, i, "invalid escape in a string");
			break;
		}
		if (c == '"')
			break;
		if (c >= 0x80) {
			size_t k = sg_utf8_seq(p + i, n - i);

			if (!k) {
				rc = fail(ps, i, "invalid UTF-8 in a string");
				break;
			}
			memcpy(o, p + i, k);
			o += k;
			i += k;
			continue;
		}
		if (c < 0x20) {
			rc = fail(ps, i, "control character in a string");
			break;
		}
		/* Else 8 plain bytes were copied by the loop: go on. */
	}
	sc->len = (size_t)(o - sc->p);
	ps->i = i + 1;
	return rc;
}

/*
 * Parse the string whose opening quote is at ps->i and move past its
 * closing quote.  *s and *len are the decoded bytes: the input itself when
 * there is no escape, else sc's buffer (valid until sc is used again).
 * *nul_at is where the first \u0000 is, or SIZE_MAX.
 */
static sg_err parse_string(struct parser *ps, struct scratch *sc,
			   const char **s, size_t *len, size_t *nul_at)
{
	const unsigned char *p = ps->p;
	size_t n = ps->n, start = ps->i + 1, i = start;
	sg_err rc;

	*nul_at = SIZE_MAX;
	for (;;) {
		unsigned char c;

		i = plain_end(p, i, n);
		if (i >= n)
			return fail(ps, n, "unexpected end of input in a string");
		c = p[i];
		if (c == '"') {
			*s = (const char *)p + start;
			*len = i - start;
			ps->i = i + 1;
			return SG_OK;
		}
		if (c < 0x80)
			break;
		/* Escapes decode to whole characters, so checking the raw
		 * bytes checks the whole string. */
		do {
			size_t k = sg_utf8_seq(p + i, n - i);

			if (!k)
				return fail(ps, i, "invalid UTF-8 in a string");
			i += k;
		} while (i < n && p[i] >= 0x80);
	}
	if (p[i] != '\\')
		return fail(ps, i, "control character in a string");
	sc->len = 0;
	if (!scratch_reserve(sc, i - start))
		return oom(ps);
	memcpy(sc->p, p + start, i - start);
	sc->len = i - start;
	rc = decode_rest(ps, sc, i, nul_at);
	*s = sc->p;
	*len = sc->len;
	return rc;
}

/*
 * strtod on a copy of the token.  The token is JSON grammar, which strtod
 * reads whole in the C locale; when it stops early the locale uses another
 * decimal point, which goes in place of '.' as jansson does it.
 */
static sg_err make_real(struct parser *ps, size_t start, size_t end,
			json_t **v)
{
	char small[64], *buf = small, *stop;
	size_t len = end - start;
	double d;
	sg_err rc = SG_OK;

	if (len >= sizeof(small)) {
		buf = malloc(len + 1);
		if (!buf)
			return oom(ps);
	}
	memcpy(buf, ps->p + start, len);
	buf[len] = '\0';
	errno = 0;
	d = strtod(buf, &stop);
	if (stop != buf + len) {
		char *dot = strchr(buf, '.');
		const char *point = localeconv()->decimal_point;

		if (dot && point[0])
			*dot = point[0];
		errno = 0;
		d = strtod(buf, &stop);
	}
	if ((d == HUGE_VAL || d == -HUGE_VAL) && errno == ERANGE) {
		rc = fail(ps, start, "real number overflow");
		goto out;
	}
	*v = json_real(d);
	if (!*v)
		rc = oom(ps);
out:
	if (buf != small)
		free(buf);
	return rc;
}

/* A number at ps->i: an integer unless it has a fraction or an exponent. */
static sg_err parse_number(struct parser *ps, json_t **v)
{
	const unsigned char *p = ps->p;
	size_t n = ps->n, start = ps->i, i = start, digits;
	bool neg = p[i] == '-', real = false;
	unsigned long long acc = 0, lim;

	if (neg)
		i++;
	digits = i;
	if (i < n && p[i] == '0') {
		i++;
		if (i < n && is_digit(p[i]))
			return fail(ps, start, "invalid number (leading zero)");
	} else if (i < n && is_digit(p[i])) {
		while (i < n && is_digit(p[i]))
			i++;
	} else {
		return fail(ps, start, "invalid number");
	}
	if (i < n && p[i] == '.') {
		if (++i >= n || !is_digit(p[i]))
			return fail(ps, start, "invalid number");
		while (i < n && is_digit(p[i]))
			i++;
		real = true;
	}
	if (i < n && (p[i] == 'e' || p[i] == 'E')) {
		if (++i < n && (p[i] == '+' || p[i] == '-'))
			i++;
		if (i >= n || !is_digit(p[i]))
			return fail(ps, start, "invalid number");
		while (i < n && is_digit(p[i]))
			i++;
		real = true;
	}
	ps->i = i;
	if (real)
		return make_real(ps, start, i, v);

	/* strtoll's range: one more below zero than above. */
	lim = (unsigned long long)JS_INT_MAX + neg;
	for (size_t k = digits; k < i; k++) {
		unsigned d = p[k] - '0';

		if (acc > (lim - d) / 10)
			return fail(ps, start, "integer too big");
		acc = acc * 10 + d;
	}
	if (!neg)
		*v = json_integer((json_int_t)acc);
	else if (acc > (unsigned long long)JS_INT_MAX)
		*v = json_integer(-JS_INT_MAX - 1);
	else
		*v = json_integer(-(json_int_t)acc);
	return *v ? SG_OK : oom(ps);
}

static sg_err parse_literal(struct parser *ps, json_t **v)
{
	static const struct {
		const char *word;
		size_t len;
	} words[] = { { "true", 4 }, { "false", 5 }, { "null", 4 } };
	const unsigned char *p = ps->p;
	size_t n = ps->n, i = ps->i;

	for (size_t k = 0; k < sizeof(words) / sizeof(words[0]); k++) {
		size_t len = words[k].len;
		unsigned char next;

		if (n - i < len || memcmp(p + i, words[k].word, len) != 0)
			continue;
		/* jansson reads a whole run of letters as one word. */
		next = i + len < n ? p[i + len] : 0;
		if ((next >= 'a' && next <= 'z') || (next >= 'A' && next <= 'Z'))
			break;
		*v = k == 0 ? json_true() : k == 1 ? json_false() : json_null();
		ps->i = i + len;
		return SG_OK;
	}
	return fail(ps, i, "invalid literal");
}

static sg_err push(struct parser *ps, json_t *container)
{
	if (ps->depth == ps->cap) {
		size_t cap = ps->cap * 2;
		json_t **st;

		if (ps->stack == ps->small) {
			st = malloc(cap * sizeof(*st));
			if (st)
				memcpy(st, ps->small, sizeof(ps->small));
		} else {
			st = realloc(ps->stack, cap * sizeof(*st));
		}
		if (!st)
			return oom(ps);
		ps->stack = st;
		ps->cap = cap;
	}
	ps->stack[ps->depth++] = container;
	return SG_OK;
}

/* Add v (stolen) to the open container top, under key in an object. */
static sg_err attach(struct parser *ps, json_t *top, bool obj,
		     const char *key, size_t klen, json_t *v)
{
	int r = obj ? json_object_setn_new_nocheck(top, key, klen, v)
		    : json_array_append_new(top, v);

	return r ? oom(ps) : SG_OK;
}

/*
 * The next value, after the key when top is an object.  Scalars are
 * attached here; a new container is attached and pushed, and *opened says
 * so.
 */
static sg_err parse_value(struct parser *ps, json_t *top, bool obj,
			  const char *key, size_t klen, bool *opened)
{
	const unsigned char *p = ps->p;
	size_t at = ps->i;
	json_t *v = NULL;
	sg_err rc;

	*opened = false;
	if (at >= ps->n)
		return fail(ps, at, "unexpected end of input");
	if (ps->depth >= JS_MAX_DEPTH)
		return fail(ps, at, "nesting deeper than 2048 levels");
	switch (p[at]) {
	case '[':
	case '{':
		v = p[at] == '[' ? json_array() : json_object();
		if (!v)
			return oom(ps);
		rc = attach(ps, top, obj, key, klen, v);
		if (!rc)
			rc = push(ps, v);
		ps->i++;
		*opened = true;
		return rc;
	case '"': {
		const char *s;
		size_t len, nul_at;

		rc = parse_string(ps, &ps->val, &s, &len, &nul_at);
		if (rc)
			return rc;
		if (nul_at != SIZE_MAX && !(ps->flags & SG_JSON_ALLOW_NUL))
			return fail(ps, nul_at, "\\u0000 in a string");
		v = json_stringn_nocheck(s, len);
		if (!v)
			return oom(ps);
		return attach(ps, top, obj, key, klen, v);
	}
	case '-':
	case '0': case '1': case '2': case '3': case '4':
	case '5': case '6': case '7': case '8': case '9':
		rc = parse_number(ps, &v);
		break;
	case 't':
	case 'f':
	case 'n':
		rc = parse_literal(ps, &v);
		break;
	default:
		return fail(ps, at, "invalid value");
	}
	if (rc)
		return rc;
	/* jansson's quirk (json.h): its lookahead drops one NUL here. */
	if (ps->i < ps->n && p[ps->i] == '\0')
		ps->i++;
	return attach(ps, top, obj, key, klen, v);
}

/* The whole document into *root (set as soon as it exists). */
static sg_err parse_document(struct parser *ps, json_t **root)
{
	const unsigned char *p = ps->p;
	bool after_value = false;
	sg_err rc;

	skip_ws(ps);
	if (ps->i >= ps->n)
		return fail(ps, ps->i, "no JSON value before the end of input");
	if (p[ps->i] != '[' && p[ps->i] != '{')
		return fail(ps, ps->i, "the top level is not an object or array");
	*root = p[ps->i] == '[' ? json_array() : json_object();
	if (!*root)
		return oom(ps);
	ps->i++;
	rc = push(ps, *root);
	while (!rc && ps->depth > 0) {
		json_t *top = ps->stack[ps->depth - 1];
		bool obj = json_is_object(top), opened;
		unsigned char close = obj ? '}' : ']';
		const char *key = NULL;
		size_t klen = 0;

		skip_ws(ps);
		if (after_value) {
			if (ps->i >= ps->n)
				return fail(ps, ps->i, "unexpected end of input");
			if (p[ps->i] == close) {
				ps->i++;
				ps->depth--;
				continue;
			}
			if (p[ps->i] != ',')
				return fail(ps, ps->i,
					    obj ? "',' or '}' expected"
						: "',' or ']' expected");
			ps->i++;
			skip_ws(ps);
		} else if (ps->i < ps->n && p[ps->i] == close) {
			/* An empty container. */
			ps->i++;
			ps->depth--;
			after_value = true;
			continue;
		}
		if (obj) {
			size_t at = ps->i, nul_at;

			if (at >= ps->n || p[at] != '"')
				return fail(ps, at, "object key expected");
			rc = parse_string(ps, &ps->key, &key, &klen, &nul_at);
			if (rc)
				return rc;
			if (nul_at != SIZE_MAX)
				return fail(ps, nul_at, "\\u0000 in an object key");
			if ((ps->flags & SG_JSON_REJECT_DUPLICATES) &&
			    json_object_getn(top, key, klen))
				return fail(ps, at, "duplicate object key");
			skip_ws(ps);
			if (ps->i >= ps->n || p[ps->i] != ':')
				return fail(ps, ps->i,
					    "':' expected after an object key");
			ps->i++;
			skip_ws(ps);
		}
		rc = parse_value(ps, top, obj, key, klen, &opened);
		after_value = !opened;
	}
	if (rc)
		return rc;
	skip_ws(ps);
	if (ps->i < ps->n)
		return fail(ps, ps->i, "unexpected data after the document");
	return SG_OK;
}

sg_err sg_json_parse(const char *p, size_t n, unsigned flags, json_t **out,
		     struct sg_errinfo *err)
{
	struct parser ps;
	json_t *root = NULL;
	sg_err rc;

	assert(out);
	assert(p || n == 0);
	assert(!(flags & ~(unsigned)(SG_JSON_REJECT_DUPLICATES |
				     SG_JSON_ALLOW_NUL)));
	*out = NULL;
	/* Field by field: zeroing the inline arrays would cost more than
	 * parsing a small frame. */
	ps.p = (const unsigned char *)p;
	ps.n = n;
	ps.i = 0;
	ps.flags = flags;
	ps.err = err;
	ps.stack = ps.small;
	ps.depth = 0;
	ps.cap = sizeof(ps.small) / sizeof(ps.small[0]);
	scratch_init(&ps.key);
	scratch_init(&ps.val);

	rc = parse_document(&ps, &root);
	if (rc)
		json_decref(root);
	else
		*out = root;

	if (ps.stack != ps.small)
		free(ps.stack);
	scratch_release(&ps.key);
	scratch_release(&ps.val);
	return rc;
}

/* ---- Writing --------------------------------------------------------------- */

/* A real as jansson writes it: %.17g, with ".0" when it looks integral
 * and a bare exponent. */
static sg_err dump_real(struct sg_buf *out, double d)
{
	char text[64];
	int n = snprintf(text, sizeof(text), "%.17g", d);

	if (n <= 0 || (size_t)n >= sizeof(text) - 2)
		return SG_E_INTERNAL;
	for (char *p = text; *p; p++)
		if (*p == ',')
			*p = '.'; /* a locale's decimal comma */
	if (!strpbrk(text, ".eE")) {
		text[n++] = '.';
		text[n++] = '0';
		text[n] = '\0';
	}
	/* jansson's exponent: no '+', no leading zeros ("1e300", "1e-5"). */
	{
		char *e = strchr(text, 'e'), *digits, *first;

		if (e) {
			digits = e + 1 + (e[1] == '-' || e[1] == '+');
			first = digits;
			while (first[0] == '0' && first[1])
				first++;
			if (e[1] == '+')
				digits = e + 1;
			memmove(digits, first, strlen(first) + 1);
			n = (int)strlen(text);
		}
	}
	return sg_buf_add(out, text, (size_t)n);
}

sg_err sg_json_dump(const json_t *v, struct sg_buf *out)
{
	sg_err rc = SG_OK;

	switch (json_typeof(v)) {
	case JSON_OBJECT: {
		void *it = json_object_iter((json_t *)v);
		bool first = true;

		rc = sg_buf_addc(out, '{');
		for (; !rc && it; it = json_object_iter_next((json_t *)v, it), first = false) {
			if (!first)
				rc = sg_buf_addc(out, ',');
			if (!rc)
				rc = sg_jw_str(out, json_object_iter_key(it),
					       json_object_iter_key_len(it));
			if (!rc)
				rc = sg_buf_addc(out, ':');
			if (!rc)
				rc = sg_json_dump(json_object_iter_value(it), out);
		}
		return rc ? rc : sg_buf_addc(out, '}');
	}
	case JSON_ARRAY:
		rc = sg_buf_addc(out, '[');
		for (size_t i = 0; !rc && i < json_array_size(v); i++) {
			if (i)
				rc = sg_buf_addc(out, ',');
			if (!rc)
				rc = sg_json_dump(json_array_get(v, i), out);
		}
		return rc ? rc : sg_buf_addc(out, ']');
	case JSON_STRING:
		return sg_jw_str(out, json_string_value(v), json_string_length(v));
	case JSON_INTEGER:
		return sg_buf_addf(out, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	case JSON_REAL:
		return dump_real(out, json_real_value(v));
	case JSON_TRUE:
		return sg_buf_adds(out, "true");
	case JSON_FALSE:
		return sg_buf_adds(out, "false");
	case JSON_NULL:
		return sg_buf_adds(out, "null");
	}
	return SG_E_INTERNAL;
}
