/*
 * diff.c - file digests, the host's DiffResult, and match diagnostics for
 * sg-helper's editing commands (see diff.h).
 *
 * The line diff is Myers' greedy algorithm on the lines left between the
 * common prefix and suffix, with each line's hash compared first.  Its
 * cost grows with the number of differing lines (D) times the lines
 * (N+M), so D is capped at DIFF_WORK / (N+M): a rewrite too scattered to
 * diff cheaply is reported in the host's summary form, as the host itself
 * does for large rewrites.  Whether to try at all is decided first, from
 * the line counts of the part that differs (window_too_big): an edit too
 * big to show costs one count of its lines, nothing split or compared.
 */
#define _GNU_SOURCE /* memmem */
#include "helper/diff.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/jw.h"
#include "base/limits.h"
#include "base/sha256.h"
#include "base/utf8.h"

/* Context lines around each change, as the host's computeDiff(…, 3). */
#define DIFF_CONTEXT 3
/* Line comparisons the Myers search may make before giving up. */
#define DIFF_WORK ((size_t)32 * 1000 * 1000)
/* Differing lines the search tracks at most (its trace is D squared ints). */
#define DIFF_D_MAX ((size_t)1024)
/* Lines a diff splits on each side, between the common prefix and suffix. */
#define DIFF_LINES_MAX ((size_t)256 * 1024)
/* Bytes the candidate search may compare before it stops looking. */
#define CAND_WORK ((size_t)64 * 1000 * 1000)
/* The first window sg_text_find gives memmem, beyond the searched text's length. */
#define FIND_WINDOW ((size_t)256)
/* A diagnostic shows at most this much of one line. */
#define DIAG_LINE_MAX ((size_t)512)
/* Lines of the expected text a diagnostic shows, and of each candidate. */
#define DIAG_EXPECTED_LINES 8
#define DIAG_CAND_LINES 6

/* ---- lines ---- */

sg_err sg_lines_split(struct sg_lines *out, const char *s, size_t n, bool strip_cr,
		      size_t max)
{
	size_t count = sg_text_lines(s, n), i = 0;
	const char *p = s, *end = s + n, *q;

	out->v = NULL;
	out->n = 0;
	if (count > max || n > UINT32_MAX)
		return SG_E_TOO_LARGE;
	if (!count)
		return SG_OK;
	out->v = calloc(count, sizeof(*out->v));
	if (!out->v)
		return SG_E_INTERNAL;
	while (p < end) {
		q = memchr(p, '\n', (size_t)(end - p));
		out->v[i].p = p;
		out->v[i].n = (uint32_t)(q ? q - p : end - p);
		out->v[i].nl = q != NULL;
		if (strip_cr && out->v[i].n && p[out->v[i].n - 1] == '\r')
			out->v[i].n--;
		i++;
		p = q ? q + 1 : end;
	}
	out->n = i;
	return SG_OK;
}

void sg_lines_release(struct sg_lines *l)
{
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

size_t sg_text_lines(const char *s, size_t n)
{
	size_t count = 0;

	for (const char *q = s, *end = s + n;
	     q < end && (q = memchr(q, '\n', (size_t)(end - q))); q++)
		count++;
	return count + (n && s[n - 1] != '\n');
}

/*
 * memmem is given a window that doubles from FIND_WINDOW, never all the
 * rest of the text: a sanitizer's memmem checks its whole haystack on
 * every call, so replacing each of a 4 MiB file's four million newlines
 * cost ASan minutes (the text's length times the matches).  A window
 * without a match moves p past every place a match could have started in
 * it.  The windows one find tries add up to at most twice the last one,
 * which is at most twice the distance to the match plus wn.
 */
const char *sg_text_find(const char *p, const char *end, const char *w, size_t wn)
{
	size_t win = FIND_WINDOW + wn;

	if (!wn)
		return p;
	while (win < (size_t)(end - p)) {
		const char *q = memmem(p, win, w, wn);

		if (q)
			return q;
		p += win - wn + 1;
		win *= 2;
	}
	return memmem(p, (size_t)(end - p), w, wn);
}

sg_err sg_fs_kv_sha(struct sg_buf *o, const char *k, const char *p, size_t n)
{
	struct sg_sha256 h;
	char text[7 + 2 * SG_SHA256_LEN + 1] = "sha256:";
	sg_err rc;

	sg_sha256_init(&h);
	sg_sha256_update(&h, p, n);
	sg_sha256_final_hex(&h, text + 7);
	rc = sg_jw_key(o, k, 0);
	return rc ? rc : sg_jw_str(o, text, strlen(text));
}

/* ---- the line diff ---- */

enum { OP_EQ, OP_DEL, OP_INS };

/* A run of count lines with the same operation. */
struct run {
	int op;
	size_t count;
};

struct differ {
	const struct sg_line *a, *b; /* the middle, after prefix and suffix */
	size_t n, m;
	uint64_t *ha, *hb;           /* their hashes */
	struct run *runs;            /* backwards while built */
	size_t nruns, runs_cap;
};

static size_t gap(size_t x, size_t y)
{
	return x > y ? x - y : y - x;
}

static uint64_t line_hash(const struct sg_line *l)
{
	uint64_t h = 1469598103934665603ULL ^ (l->nl ? 1 : 0);

	for (size_t i = 0; i < l->n; i++)
		h = (h ^ (unsigned char)l->p[i]) * 1099511628211ULL;
	return h;
}

static bool line_eq(const struct sg_line *x, const struct sg_line *y)
{
	return x->n == y->n && x->nl == y->nl && memcmp(x->p, y->p, x->n) == 0;
}

static bool mid_eq(const struct differ *d, size_t x, size_t y)
{
	return d->ha[x] == d->hb[y] && line_eq(&d->a[x], &d->b[y]);
}

static sg_err run_add(struct differ *d, int op, size_t count)
{
	if (!count)
		return SG_OK;
	if (d->nruns && d->runs[d->nruns - 1].op == op) {
		d->runs[d->nruns - 1].count += count;
		return SG_OK;
	}
	if (d->nruns == d->runs_cap) {
		size_t cap = d->runs_cap ? 2 * d->runs_cap : 16;
		struct run *r = realloc(d->runs, cap * sizeof(*r));

		if (!r)
			return SG_E_INTERNAL;
		d->runs = r;
		d->runs_cap = cap;
	}
	d->runs[d->nruns].op = op;
	d->runs[d->nruns++].count = count;
	return SG_OK;
}

/*
 * Myers' forward search over the middle; trace holds V after each step d
 * (2d+1 entries, diagonals -d..d), for the walk back.  SG_E_TOO_LARGE
 * when more than dmax differences would be needed.
 */
static sg_err myers(struct differ *d, size_t dmax, int32_t **tracep, size_t *dout)
{
	size_t size = (dmax + 1) * (dmax + 1), off = dmax + 1;
	int32_t *trace = malloc(size * sizeof(*trace));
	int32_t *v = calloc(2 * dmax + 3, sizeof(*v));
	int32_t *row = trace;
	sg_err rc = SG_E_TOO_LARGE;

	*tracep = NULL;
	if (!trace || !v) {
		rc = SG_E_INTERNAL;
		goto out;
	}
	for (size_t dd = 0; dd <= dmax; dd++) {
		long dl = (long)dd;

		for (long k = -dl; k <= dl; k += 2) {
			long x, y;

			if (k == -dl || (k != dl && v[off + k - 1] < v[off + k + 1]))
				x = v[off + k + 1];
			else
				x = v[off + k - 1] + 1;
			y = x - k;
			while ((size_t)x < d->n && (size_t)y < d->m &&
			       mid_eq(d, (size_t)x, (size_t)y)) {
				x++;
				y++;
			}
			v[off + k] = (int32_t)x;
		}
		for (long k = -dl; k <= dl; k++)
			row[k + dl] = v[off + k];
		row += 2 * dd + 1;
		for (long k = -dl; k <= dl; k += 2)
			if ((size_t)v[off + k] >= d->n && (size_t)(v[off + k] - k) >= d->m) {
				*dout = dd;
				*tracep = trace;
				trace = NULL;
				rc = SG_OK;
				goto out;
			}
	}
out:
	free(trace);
	free(v);
	return rc;
}

/* Walk the trace back from (n, m), collecting runs in reverse. */
static sg_err myers_back(struct differ *d, const int32_t *trace, size_t dfound)
{
	long x = (long)d->n, y = (long)d->m;
	sg_err rc = SG_OK;

	for (size_t dd = dfound; dd > 0 && !rc; dd--) {
		long dl = (long)dd, k = x - y, pk, px, py;
		const int32_t *prev = trace + (dd - 1) * (dd - 1);
		long pd = dl - 1;
		bool down;

		down = k == -dl || (k != dl && prev[k - 1 + pd] < prev[k + 1 + pd]);
		pk = down ? k + 1 : k - 1;
		px = prev[pk + pd];
		py = px - pk;
		/* The snake after the move, then the move itself. */
		rc = run_add(d, OP_EQ, (size_t)(x - (down ? px : px + 1)));
		if (!rc)
			rc = run_add(d, down ? OP_INS : OP_DEL, 1);
		x = px;
		y = py;
	}
	if (!rc)
		rc = run_add(d, OP_EQ, (size_t)x);
	return rc;
}

/*
 * Reverse the runs and, inside each block of changes, put the deletions
 * before the insertions as the host's diff shows them.
 */
static void runs_finish(struct differ *d)
{
	size_t i = 0;

	for (size_t l = 0, r = d->nruns; l + 1 < r; l++, r--) {
		struct run t = d->runs[l];

		d->runs[l] = d->runs[r - 1];
		d->runs[r - 1] = t;
	}
	while (i < d->nruns) {
		size_t j = i, del = 0, ins = 0, out = i;

		if (d->runs[i].op == OP_EQ) {
			i++;
			continue;
		}
		for (; j < d->nruns && d->runs[j].op != OP_EQ; j++)
			*(d->runs[j].op == OP_DEL ? &del : &ins) += d->runs[j].count;
		if (del)
			d->runs[out++] = (struct run){ OP_DEL, del };
		if (ins)
			d->runs[out++] = (struct run){ OP_INS, ins };
		memmove(d->runs + out, d->runs + j, (d->nruns - j) * sizeof(*d->runs));
		d->nruns -= j - out;
		i = out;
	}
}

/* The whole diff as runs: prefix, the middle's runs, suffix. */
static sg_err diff_runs(struct differ *d, const struct sg_lines *A,
			const struct sg_lines *B, bool *too_costly)
{
	size_t pre = 0, suf = 0, dmax, dfound = 0;
	int32_t *trace = NULL;
	sg_err rc;

	*too_costly = false;
	while (pre < A->n && pre < B->n && line_eq(&A->v[pre], &B->v[pre]))
		pre++;
	while (suf < A->n - pre && suf < B->n - pre &&
	       line_eq(&A->v[A->n - 1 - suf], &B->v[B->n - 1 - suf]))
		suf++;
	d->a = A->v + pre;
	d->b = B->v + pre;
	d->n = A->n - pre - suf;
	d->m = B->n - pre - suf;
	rc = run_add(d, OP_EQ, suf);
	if (rc || (!d->n && !d->m))
		goto tail;
	dmax = DIFF_WORK / (d->n + d->m + 1);
	if (dmax > DIFF_D_MAX)
		dmax = DIFF_D_MAX;
	if (dmax > d->n + d->m)
		dmax = d->n + d->m;
	/* Each line one side has over the other is a difference. */
	if (gap(d->n, d->m) > dmax) {
		*too_costly = true;
		goto out;
	}
	d->ha = malloc((d->n + 1) * sizeof(*d->ha));
	d->hb = malloc((d->m + 1) * sizeof(*d->hb));
	if (!d->ha || !d->hb) {
		rc = SG_E_INTERNAL;
		goto out;
	}
	for (size_t i = 0; i < d->n; i++)
		d->ha[i] = line_hash(&d->a[i]);
	for (size_t i = 0; i < d->m; i++)
		d->hb[i] = line_hash(&d->b[i]);
	rc = myers(d, dmax, &trace, &dfound);
	if (rc == SG_E_TOO_LARGE) {
		*too_costly = true;
		rc = SG_OK;
		goto out;
	}
	if (!rc)
		rc = myers_back(d, trace, dfound);
tail:
	if (!rc)
		rc = run_add(d, OP_EQ, pre);
	if (!rc)
		runs_finish(d);
out:
	free(trace);
	free(d->ha);
	free(d->hb);
	d->ha = d->hb = NULL;
	return rc;
}

/* One diff line {"op","content"}. */
static sg_err hunk_line(struct sg_buf *o, int op, const struct sg_line *l, bool first)
{
	static const char *const names[] = { "equal", "delete", "insert" };
	sg_err rc = sg_buf_adds(o, first ? "{\"op\":\"" : ",{\"op\":\"");

	if (!rc)
		rc = sg_buf_adds(o, names[op]);
	if (!rc)
		rc = sg_buf_adds(o, "\",\"content\":");
	if (!rc)
		rc = sg_jw_str(o, l->p, l->n);
	return rc ? rc : sg_buf_addc(o, '}');
}

/* Where flat position pos falls: its run, and the a and b lines before it. */
struct cursor {
	size_t run, in, ai, bi, pos;
};

static void cursor_step(const struct differ *d, struct cursor *c)
{
	int op = d->runs[c->run].op;

	c->ai += op != OP_INS;
	c->bi += op != OP_DEL;
	c->pos++;
	if (++c->in == d->runs[c->run].count) {
		c->run++;
		c->in = 0;
	}
}

/*
 * The hunks: each change range (a block of non-equal runs) widened by
 * DIFF_CONTEXT, ranges closer than twice that merged, as the host does.
 */
static sg_err hunks_json(struct sg_buf *o, const struct differ *d,
			 const struct sg_lines *A, const struct sg_lines *B, size_t skipped)
{
	struct cursor c = { 0 };
	size_t total = 0, pos = 0, i = 0;
	bool first_hunk = true;
	sg_err rc = SG_OK;

	for (size_t r = 0; r < d->nruns; r++)
		total += d->runs[r].count;
	while (!rc && i < d->nruns) {
		size_t start, end, hs, he, rpos;

		if (d->runs[i].op == OP_EQ) {
			pos += d->runs[i++].count;
			continue;
		}
		/* This block, then any block within 2 * context of it. */
		start = pos;
		end = pos;
		rpos = pos;
		for (; i < d->nruns; i++) {
			if (d->runs[i].op == OP_EQ) {
				if (i + 1 < d->nruns &&
				    d->runs[i].count < 2 * DIFF_CONTEXT) {
					rpos += d->runs[i].count;
					continue;
				}
				break;
			}
			rpos += d->runs[i].count;
			end = rpos - 1;
		}
		pos = rpos;
		hs = start >= DIFF_CONTEXT ? start - DIFF_CONTEXT : 0;
		he = end + DIFF_CONTEXT < total ? end + DIFF_CONTEXT : total - 1;
		while (c.pos < hs)
			cursor_step(d, &c);
		rc = sg_buf_addf(o, "%s{\"old_start\":%zu,\"new_start\":%zu,\"lines\":[",
				 first_hunk ? "" : ",", skipped + c.ai + 1, skipped + c.bi + 1);
		first_hunk = false;
		for (bool first = true; !rc && c.pos <= he; first = false) {
			int op = d->runs[c.run].op;

			rc = hunk_line(o, op, op == OP_INS ? &B->v[c.bi] : &A->v[c.ai], first);
			cursor_step(d, &c);
		}
		if (!rc)
			rc = sg_buf_adds(o, "]}");
	}
	return rc;
}

sg_err sg_diff_json_summary(struct sg_buf *o, size_t old_lines, size_t new_lines,
			    const char *summary)
{
	sg_err rc = sg_buf_addc(o, '{');
	bool first = true;

	if (!rc && old_lines) {
		rc = sg_buf_addf(o, "\"old_lines\":%zu", old_lines);
		first = false;
	}
	if (!rc && new_lines) {
		rc = sg_buf_addf(o, "%s\"new_lines\":%zu", first ? "" : ",", new_lines);
		first = false;
	}
	if (!rc)
		rc = sg_buf_addf(o, "%s\"truncated\":true,\"summary\":", first ? "" : ",");
	if (!rc)
		rc = sg_jw_str(o, summary, strlen(summary));
	return rc ? rc : sg_buf_addc(o, '}');
}

sg_err sg_diff_json_new(struct sg_buf *o, size_t lines)
{
	if (!lines)
		return sg_buf_adds(o, "{\"new_file\":true}");
	return sg_buf_addf(o, "{\"new_file\":true,\"lines\":%zu}", lines);
}

/* Back from at over up to n line starts of s (at is a line start). */
static size_t lines_back(const char *s, size_t at, int n)
{
	while (n-- > 0 && at > 0) {
		at--;
		while (at > 0 && s[at - 1] != '\n')
			at--;
	}
	return at;
}

/*
 * The part of a and b the line diff looks at: the common prefix and
 * suffix cut at line starts (whole lines, their ends included, are
 * equal), less DIFF_CONTEXT lines each side.  Its edges are line starts,
 * so the line counts of the three parts add up to each text's.
 */
struct window {
	size_t from, a_end, b_end;  /* a[from, a_end) and b[from, b_end) */
	size_t skipped, after;      /* the lines before and after it, alike in both */
	size_t a_lines, b_lines;    /* the lines in it */
};

static void diff_window(const char *a, size_t an, const char *b, size_t bn, struct window *w)
{
	size_t p = 0, s = 0, lim = an < bn ? an : bn;

	while (p < lim && a[p] == b[p])
		p++;
	while (p > 0 && a[p - 1] != '\n')
		p--;
	lim -= p;
	while (s < lim && a[an - 1 - s] == b[bn - 1 - s])
		s++;
	/* The suffix must start a line in both texts. */
	while (s > 0 && !((an - s == 0 || a[an - s - 1] == '\n') &&
			  (bn - s == 0 || b[bn - s - 1] == '\n')))
		s--;
	w->from = lines_back(a, p, DIFF_CONTEXT);
	/* DIFF_CONTEXT lines of the suffix, kept as context. */
	for (int k = 0; k < DIFF_CONTEXT && s > 0; k++) {
		const char *nl = memchr(a + an - s, '\n', s);

		s = nl ? an - (size_t)(nl + 1 - a) : 0;
	}
	w->a_end = an - s;
	w->b_end = bn - s;
	w->skipped = sg_text_lines(a, w->from);
	w->after = sg_text_lines(a + w->a_end, s);
	w->a_lines = sg_text_lines(a + w->from, w->a_end - w->from);
	w->b_lines = sg_text_lines(b + w->from, w->b_end - w->from);
}

/*
 * Whether the line counts alone show the line diff is not worth trying,
 * so that nothing is split, hashed or compared: a side with more lines
 * than DIFF_LINES_MAX, or sides further apart than the DIFF_D_MAX
 * differences the search follows (each line one has over the other is
 * one).  Doubling a file's 4 MiB of newlines is both.
 */
static bool window_too_big(const struct window *w)
{
	return w->a_lines > DIFF_LINES_MAX || w->b_lines > DIFF_LINES_MAX ||
	       gap(w->a_lines, w->b_lines) > DIFF_D_MAX;
}

/*
 * The hunks of the window's lines A and B into o, within budget;
 * *costly when the diff or its JSON is too large (o then unchanged).
 */
static sg_err diff_hunks(struct sg_buf *o, const struct sg_lines *A, const struct sg_lines *B,
			 size_t skipped, size_t budget, bool *costly)
{
	struct differ d = { 0 };
	struct sg_buf h = SG_BUF_INIT(budget);
	bool changed = false;
	sg_err rc = diff_runs(&d, A, B, costly);

	for (size_t i = 0; !rc && !*costly && i < d.nruns; i++)
		changed |= d.runs[i].op != OP_EQ;
	if (!rc && !*costly && changed) {
		rc = sg_buf_adds(&h, "{\"hunks\":[");
		if (!rc)
			rc = hunks_json(&h, &d, A, B, skipped);
		if (!rc)
			rc = sg_buf_adds(&h, "]}");
	}
	if (rc == SG_E_TOO_LARGE) {
		*costly = true;
		rc = SG_OK;
	}
	if (!rc && !*costly)
		rc = changed ? sg_buf_add(o, h.p, h.len) : sg_buf_adds(o, "{}");
	sg_buf_release(&h);
	free(d.runs);
	return rc;
}

sg_err sg_diff_json(struct sg_buf *o, const char *a, size_t an, const char *b,
		    size_t bn, size_t budget)
{
	struct sg_lines A = { 0 }, B = { 0 };
	struct window w;
	bool costly;
	sg_err rc = SG_OK;

	diff_window(a, an, b, bn, &w);
	costly = window_too_big(&w);
	if (!costly)
		rc = sg_lines_split(&A, a + w.from, w.a_end - w.from, false, DIFF_LINES_MAX);
	if (!rc && !costly)
		rc = sg_lines_split(&B, b + w.from, w.b_end - w.from, false, DIFF_LINES_MAX);
	/* A text past 4 GiB, whose lines a struct sg_line cannot hold. */
	if (rc == SG_E_TOO_LARGE) {
		costly = true;
		rc = SG_OK;
	}
	if (!rc && !costly)
		rc = diff_hunks(o, &A, &B, w.skipped, budget, &costly);
	if (!rc && costly)
		rc = sg_diff_json_summary(o, w.skipped + w.a_lines + w.after,
					  w.skipped + w.b_lines + w.after,
					  "diff too large to show; inline diff omitted "
					  "from tool result");
	sg_lines_release(&A);
	sg_lines_release(&B);
	return rc;
}

/* ---- diagnostics ---- */

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* s without leading and trailing ASCII white space (Go's TrimSpace, near enough). */
static void trim(const char **s, size_t *n)
{
	while (*n && is_space((*s)[0]))
		(*s)++, (*n)--;
	while (*n && is_space((*s)[*n - 1]))
		(*n)--;
}

static bool contains(const char *h, size_t hn, const char *nd, size_t nn)
{
	return nn <= hn && memmem(h, hn, nd, nn) != NULL;
}

void sg_cand_closest(const struct sg_lines *hay, const struct sg_lines *needle,
		     struct sg_cand *out, size_t limit, size_t *count)
{
	size_t w = needle->n < hay->n ? needle->n : hay->n, work = 0;

	*count = 0;
	if (!hay->n || !needle->n || !limit)
		return;
	for (size_t s = 0; s + w <= hay->n && work < CAND_WORK; s++) {
		int score = 0;
		size_t at;

		for (size_t i = 0; i < w; i++) {
			const char *x = hay->v[s + i].p, *y = needle->v[i].p;
			size_t xn = hay->v[s + i].n, yn = needle->v[i].n;

			trim(&x, &xn);
			trim(&y, &yn);
			work += xn + yn + 1;
			if (xn == yn && memcmp(x, y, xn) == 0)
				score += 2;
			else if (xn && yn && (contains(x, xn, y, yn) || contains(y, yn, x, xn)))
				score++;
		}
		/* Insert by score, earlier windows first among equals. */
		for (at = *count; at > 0 && out[at - 1].score < score; at--)
			;
		if (at >= limit)
			continue;
		if (*count < limit)
			(*count)++;
		memmove(out + at + 1, out + at, (*count - 1 - at) * sizeof(*out));
		out[at] = (struct sg_cand){ s + 1, s + w, score };
	}
}

sg_err sg_diag_lines(struct sg_buf *o, const struct sg_line *v, size_t n,
		     size_t start_line, size_t limit)
{
	sg_err rc = SG_OK;
	size_t shown = n < limit ? n : limit;

	for (size_t i = 0; !rc && i < shown; i++) {
		size_t keep = sg_utf8_clip(v[i].p, v[i].n, DIAG_LINE_MAX);

		if (start_line)
			rc = sg_buf_addf(o, "  %zu|", start_line + i);
		else
			rc = sg_buf_adds(o, "  |");
		if (!rc)
			rc = sg_utf8_sanitize(o, v[i].p, keep);
		if (!rc && keep < v[i].n)
			rc = sg_buf_addf(o, " [… %zu more bytes]", v[i].n - keep);
		if (!rc)
			rc = sg_buf_addc(o, '\n');
	}
	if (!rc && n > shown)
		rc = sg_buf_addf(o, "  ... %zu more lines omitted\n", n - shown);
	return rc;
}

sg_err sg_diag_expected(struct sg_buf *o, const struct sg_lines *want)
{
	sg_err rc;

	if (!want->n)
		return SG_OK;
	rc = sg_buf_adds(o, "\nexpected:\n");
	return rc ? rc : sg_diag_lines(o, want->v, want->n, 0, DIAG_EXPECTED_LINES);
}

sg_err sg_diag_cand(struct sg_buf *o, const struct sg_lines *hay, const struct sg_cand *c)
{
	sg_err rc = sg_buf_addf(o, "- lines %zu-%zu", c->start, c->end);

	if (!rc && c->score > 0)
		rc = sg_buf_addf(o, " score=%d", c->score);
	if (!rc)
		rc = sg_buf_adds(o, ":\n");
	if (!rc && hay->n)
		rc = sg_diag_lines(o, hay->v + c->start - 1, c->end - c->start + 1, c->start,
				   DIAG_CAND_LINES);
	return rc;
}

sg_err sg_diag_quote(struct sg_buf *o, const char *s, size_t n)
{
	sg_err rc = sg_buf_addc(o, '"');

	for (size_t i = 0; !rc && i < n; i++) {
		switch (s[i]) {
		case '\t': rc = sg_buf_adds(o, "\\t"); break;
		case '\n': rc = sg_buf_adds(o, "\\n"); break;
		case '\r': rc = sg_buf_adds(o, "\\r"); break;
		case '"': rc = sg_buf_adds(o, "\\\""); break;
		case '\\': rc = sg_buf_adds(o, "\\\\"); break;
		default: rc = sg_buf_addc(o, s[i]); break;
		}
	}
	return rc ? rc : sg_buf_addc(o, '"');
}
