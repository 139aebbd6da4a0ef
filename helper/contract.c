/*
 * contract.c - the host's test-contract warning for write_file and
 * edit_file: a change to a test file that removes test declarations is
 * not refused, but its view says so (contract_warning), so that a model
 * owns the removal instead of slipping it into a larger diff.
 *
 * The declarations are the host's three shapes, matched by hand (no
 * regex engine in the helper): Go's `func TestX(` / `BenchmarkX(` /
 * `FuzzX(` at a line start; `test(`, `it(` or `describe(` after a word
 * boundary, then a quoted name; Python's `def test_x(` at a line start.
 * Linear in the texts; the names are views into them.
 */
#include "helper/diff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A test's name: s[0..n), where in the old text it was found first. */
struct decl {
	const char *s;
	size_t n, order;
};

struct decls {
	struct decl *v;
	size_t n, cap;
};

static bool is_word(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_';
}

static sg_err decl_add(struct decls *d, const char *s, size_t n)
{
	if (d->n == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 64;
		struct decl *v = realloc(d->v, cap * sizeof(*v));

		if (!v)
			return SG_E_INTERNAL;
		d->v = v;
		d->cap = cap;
	}
	d->v[d->n] = (struct decl){ s, n, d->n };
	d->n++;
	return SG_OK;
}

/*
 * The word at p (before end) when it is prefix and at least one more word
 * character: its length, or 0.
 */
static size_t word_with(const char *p, const char *end, const char *prefix)
{
	size_t k = strlen(prefix), n = 0;

	if ((size_t)(end - p) < k || memcmp(p, prefix, k) != 0)
		return 0;
	while (p + n < end && is_word(p[n]))
		n++;
	return n > k ? n : 0;
}

/* `func TestX(` (Benchmark, Fuzz) and `def test_x(` at the line at p. */
static sg_err line_decls(struct decls *d, const char *p, const char *end, int shape)
{
	static const char *const go[] = { "Test", "Benchmark", "Fuzz" };
	size_t n = 0;

	if (shape == 0 && end - p > 5 && memcmp(p, "func ", 5) == 0) {
		for (int i = 0; i < 3 && !n; i++)
			n = word_with(p + 5, end, go[i]);
		if (n && p + 5 + n < end && p[5 + n] == '(')
			return decl_add(d, p + 5, n);
	}
	if (shape == 2) {
		while (p < end && (*p == ' ' || *p == '\t' || *p == '\v' || *p == '\f' || *p == '\r'))
			p++;
		if (end - p > 4 && memcmp(p, "def ", 4) == 0 &&
		    (n = word_with(p + 4, end, "test_")) && p + 4 + n < end && p[4 + n] == '(')
			return decl_add(d, p + 4, n);
	}
	return SG_OK;
}

/* `test(`, `it(`, `describe(` after a word boundary, then space and a quoted name. */
static sg_err call_decls(struct decls *d, const char *s, size_t len)
{
	static const char *const fn[] = { "test", "it", "describe" };
	const char *end = s + len;

	for (const char *p = s; p < end; p++) {
		if (p > s && is_word(p[-1]))
			continue;
		for (int i = 0; i < 3; i++) {
			size_t k = strlen(fn[i]);
			const char *q = p + k, *name;

			if ((size_t)(end - p) <= k || memcmp(p, fn[i], k) != 0 || *q != '(')
				continue;
			for (q++; q < end && strchr(" \t\n\r\v\f", *q) && *q; q++)
				;
			if (q >= end || !strchr("\"'`", *q) || !*q)
				continue;
			name = ++q;
			while (q < end && !strchr("\"'`", *q))
				q++;
			if (q > name) {
				sg_err rc = decl_add(d, name, (size_t)(q - name));

				if (rc)
					return rc;
			}
			p = q - 1;
			break;
		}
	}
	return SG_OK;
}

/* Every declaration of text, shape by shape as the host lists them. */
static sg_err decls_of(struct decls *d, const char *s, size_t n)
{
	sg_err rc = SG_OK;

	for (int shape = 0; shape < 3 && !rc; shape++) {
		if (shape == 1) {
			rc = call_decls(d, s, n);
			continue;
		}
		for (const char *p = s, *end = s + n; p < end && !rc;) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));

			rc = line_decls(d, p, nl ? nl : end, shape);
			p = nl ? nl + 1 : end;
		}
	}
	return rc;
}

static int by_name(const void *x, const void *y)
{
	const struct decl *a = x, *b = y;
	int c = memcmp(a->s, b->s, a->n < b->n ? a->n : b->n);

	if (c)
		return c;
	if (a->n != b->n)
		return a->n < b->n ? -1 : 1;
	return a->order < b->order ? -1 : a->order > b->order;
}

static int by_order(const void *x, const void *y)
{
	const struct decl *a = x, *b = y;

	return a->order < b->order ? -1 : a->order > b->order;
}

static bool is_test_path(const char *path)
{
	static const char *const suffix[] = { "_test.go", ".test.ts", ".test.tsx", ".test.js",
		".test.jsx", ".test.mjs", ".spec.ts", ".spec.tsx", ".spec.js", ".spec.jsx",
		"_test.py", NULL };
	size_t n = strlen(path);

	for (int i = 0; suffix[i]; i++)
		if (n >= strlen(suffix[i]) && !strcasecmp(path + n - strlen(suffix[i]), suffix[i]))
			return true;
	return false;
}

sg_err sg_contract_warning(struct sg_buf *o, const char *path, const char *old, size_t on,
			   const char *new, size_t nn, bool *warned)
{
	struct decls was = { 0 }, now = { 0 };
	size_t kept = 0;
	sg_err rc = SG_OK;

	*warned = false;
	if (!is_test_path(path))
		return SG_OK;
	rc = decls_of(&was, old, on);
	if (!rc)
		rc = decls_of(&now, new, nn);
	if (rc || !was.n)
		goto out;
	/* qsort of no array (v NULL) is undefined: a new text may declare nothing. */
	if (now.n)
		qsort(now.v, now.n, sizeof(*now.v), by_name);
	qsort(was.v, was.n, sizeof(*was.v), by_name);
	/* Keep the first of each name that the new text lacks. */
	for (size_t i = 0; i < was.n; i++) {
		/* Sorted by name, then order: a name's first appearance leads. */
		bool dup = i && was.v[i - 1].n == was.v[i].n &&
			   !memcmp(was.v[i - 1].s, was.v[i].s, was.v[i].n);
		struct decl key = was.v[i];

		if (dup)
			continue;
		{
			size_t lo = 0, hi = now.n;

			while (lo < hi) {
				size_t mid = (lo + hi) / 2;
				int c = memcmp(now.v[mid].s, key.s,
					       now.v[mid].n < key.n ? now.v[mid].n : key.n);

				if (!c)
					c = now.v[mid].n < key.n ? -1 : now.v[mid].n > key.n;
				if (c < 0)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (lo < now.n && now.v[lo].n == key.n && !memcmp(now.v[lo].s, key.s, key.n))
				continue;
		}
		was.v[kept++] = was.v[i];
	}
	if (!kept)
		goto out;
	qsort(was.v, kept, sizeof(*was.v), by_order);
	rc = sg_buf_adds(o, "this edit removes existing test(s): ");
	for (size_t i = 0; !rc && i < kept; i++) {
		rc = i ? sg_buf_adds(o, ", ") : SG_OK;
		if (!rc)
			rc = sg_buf_add(o, was.v[i].s, was.v[i].n);
	}
	if (!rc)
		rc = sg_buf_adds(o, ". Existing tests encode behavioral contracts; do not delete, "
				 "rename, or invert a test because it blocks your implementation "
				 "\xe2\x80\x94 scope the implementation to respect it instead. Keep "
				 "this removal only if the user explicitly asked for it, otherwise "
				 "restore the test and rework the change.");
	*warned = !rc;
out:
	free(was.v);
	free(now.v);
	return rc;
}
