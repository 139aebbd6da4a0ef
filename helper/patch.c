/*
 * patch.c - `fs patch [--dry-run]`: apply_patch's parse, plan, commit and
 * rollback, in one helper step (the patch text on stdin).
 *
 * The format is the host's (Codex style): "*** Begin Patch", then Add,
 * Delete and Update File sections ("*** Move to:" may follow an Update;
 * its chunks start with "@@", hold context " ", removed "-" and added "+"
 * lines, and may end with "*** End of File"), then "*** End Patch".
 *
 * Every section is planned against the files as they are before the
 * patch: paths resolved beneath the root (sg_fs_resolve) and guarded
 * (sg_fs_refuse_write), contents read, chunks located, the new contents
 * built, each resolved path owned by one section only.  Only then, and
 * not for a dry run, is anything written: each section through
 * sg_fs_put_file() (atomic rename) or an unlink beneath the root, and on
 * the first failure every section done so far, the failing one
 * included, is put back from what the plan read.
 *
 * Bounded: at most PATCH_LINES_MAX lines and PATCH_FILES_MAX sections;
 * the files a patch reads and writes hold PATCH_HOLD_MAX bytes together;
 * locating chunks stops after PATCH_MATCH_WORK line comparisons; the
 * diffs share one PATCH_DIFF_BUDGET.
 *
 * The reply: {"ok":true,"text":"<the host's summary>","files":[{"path",
 * "move_path"?,"action","diff"}]}.  Failures are tool failures whose text
 * starts "apply_patch verification failed: " (parse and plan) or
 * "apply_patch apply failed: " (commit), as the host's do.
 */
#define _GNU_SOURCE /* asprintf */
#include "helper/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/jw.h"
#include "helper/diff.h"

/* Lines of a patch, and its file sections. */
#define PATCH_LINES_MAX ((size_t)1024 * 1024)
#define PATCH_FILES_MAX ((size_t)1024)
/* Lines of one file a patch updates (each held as 16 bytes while it applies). */
#define PATCH_FILE_LINES_MAX ((size_t)1024 * 1024)
/* Bytes of the files one patch reads and builds, all together. */
#define PATCH_HOLD_MAX (64 * SG_MiB)
/* Line comparisons (and moves) spent locating and applying chunks. */
#define PATCH_MATCH_WORK ((size_t)64 * 1000 * 1000)
/* The diffs of all the files together. */
#define PATCH_DIFF_BUDGET SG_TOOL_OUTPUT
/* A chunk's diagnostic text. */
#define PATCH_DIAG_MAX (256 * SG_KiB)
/* Candidates shown: closest for a miss, exact for an ambiguity. */
#define PATCH_NEAR_MAX 3
#define PATCH_EXACT_MAX 5
/* A patch line quoted in a parse error. */
#define PATCH_QUOTE_MAX 120

#define PATCH_VERIFY "apply_patch verification failed: "
#define PATCH_APPLY "apply_patch apply failed: "
#define PATCH_SAFE_RETRY                                                        \
	"safe_retry: read_file the target range and regenerate the patch "      \
	"against the current file_sha"

enum kind { P_ADD, P_DELETE, P_UPDATE };

/* A chunk: the patch lines [first, end) after its "@@" line. */
struct chunk {
	size_t first, end;
	bool eof;
};

struct section {
	enum kind kind;
	char *path, *move;          /* as written in the patch */
	size_t first, end;          /* Add: its "+" lines */
	struct chunk *chunks;
	size_t nchunks;
	/* The plan. */
	struct sg_buf src, dst;     /* resolved, relative to root */
	struct sg_buf shown, move_shown;
	struct sg_buf old, new;     /* contents before and after */
	mode_t mode;                /* the source's */
	bool done;                  /* committed (or partly) */
};

struct patch {
	struct fs *c;
	char *text;                 /* the normalised patch */
	struct sg_lines lines;
	struct section *s;
	size_t ns;
	size_t held, work;          /* PATCH_HOLD_MAX, PATCH_MATCH_WORK spent */
};

/* ---- parsing ---- */

static bool has_prefix(const struct sg_line *l, const char *p)
{
	size_t n = strlen(p);

	return l->n >= n && memcmp(l->p, p, n) == 0;
}

static bool is_blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strchr(" \t\r\n\v\f", s[i]) || !s[i])
			return false;
	return true;
}

/* l without surrounding white space equals s. */
static bool trimmed_is(const struct sg_line *l, const char *s)
{
	const char *p = l->p;
	size_t n = l->n;

	while (n && strchr(" \t\r\v\f", *p) && *p)
		p++, n--;
	while (n && strchr(" \t\r\v\f", p[n - 1]) && p[n - 1])
		n--;
	return n == strlen(s) && memcmp(p, s, n) == 0;
}

/* A parse failure: what (ending as the host's sentence does), the line quoted and clipped. */
static sg_err bad_line(struct patch *pt, const char *what, const struct sg_line *l)
{
	struct sg_buf q = SG_BUF_INIT(4 * PATCH_QUOTE_MAX);
	size_t n = l->n > PATCH_QUOTE_MAX ? PATCH_QUOTE_MAX : l->n;
	sg_err rc;

	if (sg_diag_quote(&q, l->p, n))
		sg_buf_reset(&q);
	rc = sg_fs_fail(pt->c, "%s%s%s%s", PATCH_VERIFY, what, q.p, n < l->n ? "…" : "");
	sg_buf_release(&q);
	return rc;
}

/* The path after a "*** X:" marker, trimmed and copied. */
static sg_err marker_path(struct patch *pt, const struct sg_line *l, const char *marker,
			  const char *name, char **out)
{
	const char *p = l->p + strlen(marker);
	size_t n = l->n - strlen(marker);

	while (n && strchr(" \t\r\v\f", *p) && *p)
		p++, n--;
	while (n && strchr(" \t\r\v\f", p[n - 1]) && p[n - 1])
		n--;
	if (!n)
		return sg_fs_fail(pt->c, "%s%s path is required", PATCH_VERIFY, name);
	if (memchr(p, '\0', n))
		return sg_fs_fail(pt->c, "%s%s path holds a NUL byte", PATCH_VERIFY, name);
	*out = strndup(p, n);
	return *out ? SG_OK : SG_E_INTERNAL;
}

static sg_err section_add(struct patch *pt, enum kind k, struct section **out)
{
	struct section *s;

	if (pt->ns == PATCH_FILES_MAX)
		return sg_fs_fail(pt->c, "%sthe patch changes more than %zu files", PATCH_VERIFY,
				  PATCH_FILES_MAX);
	s = realloc(pt->s, (pt->ns + 1) * sizeof(*s));
	if (!s)
		return SG_E_INTERNAL;
	pt->s = s;
	s = &pt->s[pt->ns++];
	*s = (struct section){ .kind = k,
			       .src = SG_BUF_INIT(SG_PATH_MAX),
			       .dst = SG_BUF_INIT(SG_PATH_MAX),
			       .shown = SG_BUF_INIT(2 * SG_PATH_MAX + 2),
			       .move_shown = SG_BUF_INIT(2 * SG_PATH_MAX + 2),
			       .old = SG_BUF_INIT(0),
			       .new = SG_BUF_INIT(0) };
	*out = s;
	return SG_OK;
}

/* An Add section's "+" lines from i; *next is the first line after them. */
static sg_err parse_add(struct patch *pt, struct section *s, size_t i, size_t end, size_t *next)
{
	s->first = i;
	for (; i < end && !has_prefix(&pt->lines.v[i], "*** "); i++)
		if (!has_prefix(&pt->lines.v[i], "+"))
			return bad_line(pt, "Add File lines must start with +: ", &pt->lines.v[i]);
	s->end = i;
	*next = i;
	return SG_OK;
}

/* One chunk's body from i (after its "@@"); *next is where it stops. */
static sg_err parse_chunk(struct patch *pt, struct chunk *ch, size_t i, size_t end, size_t *next)
{
	bool any = false;

	ch->first = i;
	for (; i < end; i++) {
		const struct sg_line *l = &pt->lines.v[i];
		bool eof = l->n == 15 && memcmp(l->p, "*** End of File", 15) == 0;

		if (has_prefix(l, "@@") || (has_prefix(l, "*** ") && !eof))
			break;
		if (eof)
			ch->eof = true;
		else if (has_prefix(l, " ") || has_prefix(l, "-") || has_prefix(l, "+"))
			any = true;
		else
			return bad_line(pt, "Update File change lines must start with space, -, or +: ",
					l);
	}
	ch->end = i;
	*next = i;
	if (!any)
		return sg_fs_fail(pt->c, "%sUpdate File chunk is empty", PATCH_VERIFY);
	return SG_OK;
}

/* An Update section's chunks from i. */
static sg_err parse_update(struct patch *pt, struct section *s, size_t i, size_t end,
			   size_t *next)
{
	sg_err rc = SG_OK;

	if (i < end && has_prefix(&pt->lines.v[i], "*** Move to:"))
		rc = marker_path(pt, &pt->lines.v[i++], "*** Move to:", "Move to", &s->move);
	while (!rc && i < end && !has_prefix(&pt->lines.v[i], "*** ")) {
		const struct sg_line *l = &pt->lines.v[i];
		struct chunk *ch;

		if (is_blank(l->p, l->n)) {
			i++;
			continue;
		}
		if (!has_prefix(l, "@@"))
			return bad_line(pt, "Update File chunk must start with @@: ", l);
		ch = realloc(s->chunks, (s->nchunks + 1) * sizeof(*ch));
		if (!ch)
			return SG_E_INTERNAL;
		s->chunks = ch;
		ch = &s->chunks[s->nchunks++];
		*ch = (struct chunk){ 0 };
		rc = parse_chunk(pt, ch, i + 1, end, &i);
	}
	if (!rc && !s->nchunks && !s->move)
		rc = sg_fs_fail(pt->c, "%sUpdate File %s has no chunks", PATCH_VERIFY, s->path);
	*next = i;
	return rc;
}

/* The Begin and End markers: *begin, *end (the last End). */
static sg_err find_markers(struct patch *pt, size_t *begin, size_t *end)
{
	bool got_begin = false, got_end = false;

	for (size_t i = 0; i < pt->lines.n; i++) {
		if (trimmed_is(&pt->lines.v[i], "*** Begin Patch")) {
			if (got_begin)
				return sg_fs_fail(pt->c, "%sduplicate Begin Patch marker",
						  PATCH_VERIFY);
			got_begin = true;
			*begin = i;
		} else if (trimmed_is(&pt->lines.v[i], "*** End Patch")) {
			got_end = true;
			*end = i;
		}
	}
	if (!got_begin || !got_end || *begin >= *end)
		return sg_fs_fail(pt->c, "%smissing Begin/End Patch markers", PATCH_VERIFY);
	return SG_OK;
}

/* The patch text trimmed, with "\r\n" and lone "\r" made "\n". */
static sg_err normalise(struct patch *pt, const char *in, size_t n)
{
	size_t j = 0;

	while (n && is_blank(in, 1))
		in++, n--;
	while (n && is_blank(in + n - 1, 1))
		n--;
	pt->text = malloc(n + 1);
	if (!pt->text)
		return SG_E_INTERNAL;
	for (size_t i = 0; i < n; i++) {
		if (in[i] == '\r' && i + 1 < n && in[i + 1] == '\n')
			continue;
		pt->text[j++] = in[i] == '\r' ? '\n' : in[i];
	}
	pt->text[j] = '\0';
	if (sg_text_lines(pt->text, j) > PATCH_LINES_MAX)
		return sg_fs_fail(pt->c, "%sthe patch has more than %zu lines", PATCH_VERIFY,
				  PATCH_LINES_MAX);
	return sg_lines_split(&pt->lines, pt->text, j, false, PATCH_LINES_MAX);
}

static sg_err parse(struct patch *pt, const char *in, size_t n)
{
	size_t begin = 0, end = 0, i;
	sg_err rc = normalise(pt, in, n);

	if (!rc)
		rc = find_markers(pt, &begin, &end);
	for (i = begin + 1; !rc && i < end;) {
		const struct sg_line *l = &pt->lines.v[i];
		struct section *s;

		if (has_prefix(l, "*** Add File:")) {
			rc = section_add(pt, P_ADD, &s);
			if (!rc)
				rc = marker_path(pt, l, "*** Add File:", "Add File", &s->path);
			if (!rc)
				rc = parse_add(pt, s, i + 1, end, &i);
		} else if (has_prefix(l, "*** Delete File:")) {
			rc = section_add(pt, P_DELETE, &s);
			if (!rc)
				rc = marker_path(pt, l, "*** Delete File:", "Delete File", &s->path);
			i++;
		} else if (has_prefix(l, "*** Update File:")) {
			rc = section_add(pt, P_UPDATE, &s);
			if (!rc)
				rc = marker_path(pt, l, "*** Update File:", "Update File", &s->path);
			if (!rc)
				rc = parse_update(pt, s, i + 1, end, &i);
		} else if (is_blank(l->p, l->n)) {
			i++;
		} else {
			rc = bad_line(pt, "unexpected patch line ", l);
		}
	}
	if (!rc && !pt->ns)
		rc = sg_fs_fail(pt->c, "%sno hunks found", PATCH_VERIFY);
	return rc;
}

/* ---- planning ---- */

/* Count bytes against PATCH_HOLD_MAX; the buffer's max is what is left. */
static sg_err hold(struct patch *pt, struct sg_buf *b, size_t want)
{
	if (want > PATCH_HOLD_MAX - pt->held)
		return sg_fs_fail(pt->c, "%sthe files this patch changes hold more than %zu bytes "
				  "together", PATCH_VERIFY, (size_t)PATCH_HOLD_MAX);
	pt->held += want;
	sg_buf_init(b, want);
	return SG_OK;
}

/* Read the regular file at rel whole (held), and its mode. */
static sg_err read_old(struct patch *pt, struct section *s, const char *verb)
{
	struct fs *c = pt->c;
	struct stat st;
	int fd = sg_fs_open_rel(c, &s->src, O_RDONLY | O_NONBLOCK);
	sg_err rc = SG_OK;

	if (fd < 0)
		return sg_fs_fail(c, "%sread file to %s %s: %s", PATCH_VERIFY, verb, s->path,
				  sg_fs_errstr(errno));
	if (fstat(fd, &st) != 0)
		rc = sg_fs_fail(c, "%sread file to %s %s: %s", PATCH_VERIFY, verb, s->path,
				sg_fs_errstr(errno));
	else if (S_ISDIR(st.st_mode))
		rc = sg_fs_fail(c, "%spath is a directory: %s", PATCH_VERIFY, s->path);
	else if (!S_ISREG(st.st_mode))
		rc = sg_fs_fail(c, "%s%s is not a regular file", PATCH_VERIFY, s->path);
	if (!rc)
		rc = hold(pt, &s->old, st.st_size < 0 ? 0 : (size_t)st.st_size);
	if (!rc)
		rc = sg_read_all(fd, &s->old);
	if (rc == SG_E_TOO_LARGE)
		rc = sg_fs_fail(c, "%s%s changed while it was read", PATCH_VERIFY, s->path);
	s->mode = st.st_mode & 07777;
	close(fd);
	return rc;
}

/* Whether a resolved path exists (not following a final link). */
static bool exists(struct fs *c, const struct sg_buf *rel)
{
	int fd = sg_fs_open_rel(c, rel, O_PATH);

	if (fd < 0)
		return errno != ENOENT;
	close(fd);
	return true;
}

static sg_err plan_add(struct patch *pt, struct section *s)
{
	sg_err rc = sg_fs_resolve(pt->c, s->path, SG_PATH_PARENTS, &s->dst);
	size_t n = 0;

	if (!rc)
		rc = sg_fs_refuse_write(pt->c, "apply_patch", "add", &s->dst, &s->shown);
	if (!rc && exists(pt->c, &s->dst))
		rc = sg_fs_fail(pt->c, "%sfile already exists: %s", PATCH_VERIFY, s->path);
	for (size_t i = s->first; i < s->end; i++)
		n += pt->lines.v[i].n;
	if (!rc)
		rc = hold(pt, &s->new, n);
	for (size_t i = s->first; !rc && i < s->end; i++) {
		rc = sg_buf_add(&s->new, pt->lines.v[i].p + 1, pt->lines.v[i].n - 1);
		if (!rc)
			rc = sg_buf_addc(&s->new, '\n');
	}
	return rc;
}

static sg_err plan_delete(struct patch *pt, struct section *s)
{
	sg_err rc = sg_fs_resolve(pt->c, s->path, SG_PATH_NOFOLLOW, &s->src);

	if (!rc)
		rc = sg_fs_refuse_write(pt->c, "apply_patch", "delete", &s->src, &s->shown);
	if (!rc)
		rc = read_old(pt, s, "delete");
	return rc;
}

/* A chunk's old (or new) side as lines. */
static sg_err chunk_side(struct patch *pt, const struct chunk *ch, bool old, struct sg_lines *out)
{
	size_t n = 0;

	out->n = 0;
	out->v = calloc(ch->end - ch->first + 1, sizeof(*out->v));
	if (!out->v)
		return SG_E_INTERNAL;
	for (size_t i = ch->first; i < ch->end; i++) {
		const struct sg_line *l = &pt->lines.v[i];

		if (!l->n || l->p[0] == '*' || (l->p[0] != ' ' && l->p[0] != (old ? '-' : '+')))
			continue;
		out->v[n++] = (struct sg_line){ l->p + 1, l->n - 1, true };
	}
	out->n = n;
	return SG_OK;
}

static bool line_same(const struct sg_line *a, const struct sg_line *b)
{
	return a->n == b->n && memcmp(a->p, b->p, a->n) == 0;
}

/* Every place from start where needle's lines follow one another in lines. */
static sg_err find_seq(struct patch *pt, const struct sg_lines *lines,
		       const struct sg_lines *needle, size_t start, size_t *at, size_t *count)
{
	*count = 0;
	if (!needle->n || needle->n > lines->n)
		return SG_OK;
	for (size_t i = start; i + needle->n <= lines->n; i++) {
		size_t j = 0;

		while (j < needle->n && line_same(&lines->v[i + j], &needle->v[j]))
			j++;
		pt->work += j + 1;
		if (pt->work > PATCH_MATCH_WORK)
			return sg_fs_fail(pt->c, "%slocating the chunks of %s takes more than %zu "
					  "line comparisons; give chunks more distinctive context",
					  PATCH_VERIFY, "this patch", PATCH_MATCH_WORK);
		if (j == needle->n && (*count)++ == 0)
			*at = i;
	}
	return SG_OK;
}

/* The host's anchor_not_found / ambiguous_anchor diagnostic for a chunk. */
static sg_err chunk_diag(struct patch *pt, const struct section *s, const struct sg_lines *lines,
			 const struct sg_lines *want, size_t start, size_t count)
{
	struct sg_buf t = SG_BUF_INIT(PATCH_DIAG_MAX);
	struct sg_cand cands[PATCH_EXACT_MAX];
	size_t nc = 0;
	sg_err rc = sg_buf_addf(&t, "%s%s: ", PATCH_VERIFY, s->path);

	if (!rc && count == 0) {
		sg_cand_closest(lines, want, cands, PATCH_NEAR_MAX, &nc);
		rc = sg_buf_adds(&t, "anchor_not_found: failed to find expected lines");
	} else if (!rc) {
		for (size_t i = start; nc < PATCH_EXACT_MAX && i + want->n <= lines->n; i++) {
			size_t j = 0;

			while (j < want->n && line_same(&lines->v[i + j], &want->v[j]))
				j++;
			if (j == want->n)
				cands[nc++] = (struct sg_cand){ i + 1, i + want->n,
								(int)(2 * want->n) };
		}
		rc = sg_buf_addf(&t, "ambiguous_anchor: expected lines matched %zu locations; "
				 "add more context", count);
	}
	if (!rc)
		rc = sg_diag_expected(&t, want);
	if (!rc && nc)
		rc = sg_buf_adds(&t, "\ncandidates:\n");
	for (size_t i = 0; !rc && i < nc; i++)
		rc = sg_diag_cand(&t, lines, &cands[i]);
	if (!rc)
		rc = sg_buf_adds(&t, "\n" PATCH_SAFE_RETRY);
	if (rc) {
		sg_buf_release(&t);
		return rc;
	}
	return sg_fs_fail_text(pt->c, NULL, sg_buf_take(&t, NULL),
			       count ? PATCH_VERIFY "ambiguous_anchor: expected lines matched "
				       "more than once"
				     : PATCH_VERIFY "anchor_not_found: failed to find expected lines");
}

/* Replace lines[at, at + nold) with repl (grown as needed). */
static sg_err lines_splice(struct patch *pt, struct sg_lines *lines, size_t *cap, size_t at, size_t nold,
		     const struct sg_lines *repl)
{
	size_t n = lines->n - nold + repl->n, tail = lines->n - at - nold;

	pt->work += tail + repl->n;
	if (pt->work > PATCH_MATCH_WORK)
		return sg_fs_fail(pt->c, "%sapplying the chunks of %s moves more than %zu lines",
				  PATCH_VERIFY, "this patch", PATCH_MATCH_WORK);
	if (n > PATCH_FILE_LINES_MAX)
		return sg_fs_fail(pt->c, "%sthe patched file would have more than %zu lines",
				  PATCH_VERIFY, PATCH_FILE_LINES_MAX);
	if (n > *cap) {
		size_t nc = n * 2;
		struct sg_line *v = realloc(lines->v, nc * sizeof(*v));

		if (!v)
			return SG_E_INTERNAL;
		lines->v = v;
		*cap = nc;
	}
	memmove(lines->v + at + repl->n, lines->v + at + nold, tail * sizeof(*lines->v));
	memcpy(lines->v + at, repl->v, repl->n * sizeof(*repl->v));
	lines->n = n;
	return SG_OK;
}

/* Locate one chunk (the host's findPatchChunk) and apply it. */
static sg_err apply_chunk(struct patch *pt, const struct section *s, const struct chunk *ch,
			  struct sg_lines *lines, size_t *cap, size_t *cursor)
{
	struct sg_lines oldl = { 0 }, newl = { 0 };
	size_t at = 0, count = 0;
	sg_err rc = chunk_side(pt, ch, true, &oldl);

	if (!rc)
		rc = chunk_side(pt, ch, false, &newl);
	if (!rc && !oldl.n) {
		at = ch->eof ? lines->n : *cursor;
	} else if (!rc) {
		if (*cursor > lines->n)
			*cursor = 0;
		rc = find_seq(pt, lines, &oldl, *cursor, &at, &count);
		if (!rc && !count && *cursor > 0) {
			*cursor = 0;
			rc = find_seq(pt, lines, &oldl, 0, &at, &count);
		}
		if (!rc && count != 1)
			rc = chunk_diag(pt, s, lines, &oldl, *cursor, count);
	}
	if (!rc)
		rc = lines_splice(pt, lines, cap, at, oldl.n, &newl);
	if (!rc)
		*cursor = at + newl.n;
	sg_lines_release(&oldl);
	sg_lines_release(&newl);
	return rc;
}

/* The section's new contents: its chunks applied to the old ones. */
static sg_err apply_chunks(struct patch *pt, struct section *s)
{
	const char *p = s->old.p;
	size_t n = s->old.len, crlf = 0, lf = 0, cap, cursor = 0, need = 0;
	struct sg_lines lines = { 0 };
	bool trailing, use_crlf;
	sg_err rc;

	for (size_t i = 0; i < n; i++)
		if (p[i] == '\n')
			lf++, crlf += i && p[i - 1] == '\r';
	use_crlf = crlf && crlf == lf;
	trailing = n && p[n - 1] == '\n';
	/* A file that is one line end has no lines, as the host splits it. */
	rc = n == (use_crlf ? 2u : 1u) && trailing
		     ? SG_OK
		     : sg_lines_split(&lines, p, n, use_crlf, PATCH_FILE_LINES_MAX);
	if (rc == SG_E_TOO_LARGE)
		rc = sg_fs_fail(pt->c, "%s%s has more than %zu lines", PATCH_VERIFY, s->path,
				PATCH_FILE_LINES_MAX);
	cap = lines.n;
	for (size_t i = 0; !rc && i < s->nchunks; i++)
		rc = apply_chunk(pt, s, &s->chunks[i], &lines, &cap, &cursor);
	for (size_t i = 0; !rc && i < lines.n; i++)
		need += lines.v[i].n + 2;
	if (!rc)
		rc = hold(pt, &s->new, need);
	for (size_t i = 0; !rc && i < lines.n; i++) {
		rc = sg_buf_add(&s->new, lines.v[i].p, lines.v[i].n);
		if (!rc && (i + 1 < lines.n || trailing))
			rc = sg_buf_adds(&s->new, use_crlf ? "\r\n" : "\n");
	}
	if (!rc && !lines.n && trailing)
		rc = sg_buf_adds(&s->new, use_crlf ? "\r\n" : "\n");
	sg_lines_release(&lines);
	return rc;
}

static sg_err plan_update(struct patch *pt, struct section *s)
{
	sg_err rc = sg_fs_resolve(pt->c, s->path, SG_PATH_PARENTS, &s->src);

	if (!rc)
		rc = sg_fs_refuse_write(pt->c, "apply_patch", "update", &s->src, &s->shown);
	if (!rc)
		rc = read_old(pt, s, "update");
	if (!rc)
		rc = apply_chunks(pt, s);
	if (!rc && !s->move && s->new.len == s->old.len &&
	    memcmp(s->new.p, s->old.p, s->old.len) == 0)
		rc = sg_fs_fail(pt->c, "%sno changes for %s", PATCH_VERIFY, s->path);
	if (rc || !s->move)
		return rc;
	rc = sg_fs_resolve(pt->c, s->move, SG_PATH_PARENTS, &s->dst);
	if (!rc)
		rc = sg_fs_refuse_write(pt->c, "apply_patch", "move to", &s->dst, &s->move_shown);
	if (!rc && exists(pt->c, &s->dst))
		rc = sg_fs_fail(pt->c, "%smove target already exists: %s", PATCH_VERIFY, s->move);
	return rc;
}

/* Section i's resolved paths in no earlier section (an in-place update owns its one). */
static sg_err check_owners(struct patch *pt, size_t i)
{
	for (size_t j = 0; j < i; j++) {
			const struct sg_buf *a[2] = { &pt->s[i].src, &pt->s[i].dst };
			const struct sg_buf *b[2] = { &pt->s[j].src, &pt->s[j].dst };

			for (int x = 0; x < 2; x++)
				for (int y = 0; y < 2; y++)
					if (a[x]->len && b[y]->len && a[x]->len == b[y]->len &&
					    memcmp(a[x]->p, b[y]->p, a[x]->len) == 0)
						return sg_fs_fail(pt->c, "%smultiple operations "
								  "target \"%s\"; use one file "
								  "section per path", PATCH_VERIFY,
								  a[x]->p);
	}
	return SG_OK;
}

/*
 * Plan every section against the files as they are.  The one-section rule
 * is checked as each section is planned, so a later section never reads
 * past a conflict.
 */
static sg_err plan(struct patch *pt)
{
	sg_err rc = SG_OK;

	for (size_t i = 0; !rc && i < pt->ns; i++) {
		struct section *s = &pt->s[i];

		if (sg_cancel_check(pt->c->cancel))
			return sg_fs_cancelled(pt->c, "apply_patch");
		rc = s->kind == P_ADD	   ? plan_add(pt, s)
		     : s->kind == P_DELETE ? plan_delete(pt, s)
					   : plan_update(pt, s);
		if (!rc)
			rc = check_owners(pt, i);
	}
	return rc;
}

/* ---- commit and rollback ---- */

static int unlink_rel(struct fs *c, const struct sg_buf *rel)
{
	const char *name;
	int fd = sg_fs_open_parent(c, rel, &name), r;

	if (fd < 0)
		return -1;
	r = unlinkat(fd, name, 0);
	if (r != 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	close(fd);
	return 0;
}

/* Write or unlink one section's files; a tool failure names what failed. */
static sg_err commit_one(struct patch *pt, struct section *s)
{
	struct fs *c = pt->c;
	bool created;
	sg_err rc = SG_OK;

	s->done = true;
	if (s->kind == P_ADD)
		rc = sg_fs_put_file(c, s->dst.p, s->path, s->new.p, s->new.len, false, 0, &created);
	else if (s->kind == P_UPDATE && !s->move)
		rc = sg_fs_put_file(c, s->src.p, s->path, s->new.p, s->new.len, false, 0, &created);
	else if (s->kind == P_UPDATE)
		rc = sg_fs_put_file(c, s->dst.p, s->move, s->new.p, s->new.len, true, s->mode,
				    &created);
	if (!rc && (s->kind == P_DELETE || s->move) && unlink_rel(c, &s->src) != 0)
		rc = sg_fs_fail(c, "%s %s: %s", s->kind == P_DELETE ? "delete file"
								    : "remove moved source",
				s->path, sg_fs_errstr(errno));
	return rc;
}

/*
 * Put back every section done, last first, from what the plan read: a
 * file that did not exist is removed, one that did is written back.
 * Best effort: a rollback step that fails does not stop the others.
 */
static void rollback(struct patch *pt)
{
	struct fs *c = pt->c;
	struct sg_errinfo keep = c->err;
	bool created;

	for (size_t i = pt->ns; i-- > 0;) {
		struct section *s = &pt->s[i];

		if (!s->done)
			continue;
		if (s->dst.len)
			(void)unlink_rel(c, &s->dst);
		if (s->kind != P_ADD)
			(void)sg_fs_put_file(c, s->src.p, s->path, s->old.p, s->old.len, true,
					     s->mode, &created);
		c->err = keep;
	}
}

static sg_err commit(struct patch *pt)
{
	sg_err rc = SG_OK;

	if (sg_cancel_check(pt->c->cancel))
		return sg_fs_cancelled(pt->c, "apply_patch");
	for (size_t i = 0; !rc && i < pt->ns; i++)
		rc = commit_one(pt, &pt->s[i]);
	if (rc)
		rollback(pt);
	return rc;
}

/* ---- the reply ---- */

/* The host's summary: a header, then "A|M|D path[ -> move]" per file. */
static sg_err summary(struct patch *pt, bool dry, struct sg_buf *t)
{
	sg_err rc = sg_buf_adds(t, dry ? "Patch validation succeeded. The following files would "
					 "be updated:"
				       : "Success. Updated the following files:");

	for (size_t i = 0; !rc && i < pt->ns; i++) {
		const struct section *s = &pt->s[i];

		rc = sg_buf_addf(t, "\n%c %s", s->kind == P_ADD ? 'A' : s->kind == P_DELETE ? 'D' : 'M',
				 s->shown.p);
		if (!rc && s->move)
			rc = sg_buf_addf(t, " -> %s", s->move_shown.p);
	}
	return rc;
}

static sg_err file_json(struct patch *pt, const struct section *s, size_t *budget, bool first)
{
	struct sg_buf *o = pt->c->out;
	size_t before;
	const char *action = s->kind == P_ADD ? "add" : s->kind == P_DELETE ? "delete"
				: s->move ? "move" : "update";
	sg_err rc = sg_buf_adds(o, first ? "{\"path\":" : ",{\"path\":");

	if (!rc)
		rc = sg_jw_str(o, s->shown.p, s->shown.len);
	if (!rc && s->move)
		rc = sg_fs_kv_strn(o, "move_path", s->move_shown.p, s->move_shown.len);
	if (!rc)
		rc = sg_fs_kv_str(o, "action", action);
	if (!rc)
		rc = sg_jw_key(o, "diff", 0);
	before = o->len;
	if (!rc && s->kind == P_ADD)
		rc = sg_diff_json_new(o, sg_text_lines(s->new.p, s->new.len));
	else if (!rc)
		rc = sg_diff_json(o, s->old.p, s->old.len, s->kind == P_DELETE ? "" : s->new.p,
				  s->kind == P_DELETE ? 0 : s->new.len, *budget);
	*budget -= o->len - before < *budget ? o->len - before : *budget;
	return rc ? rc : sg_buf_addc(o, '}');
}

static sg_err reply(struct patch *pt, bool dry)
{
	struct sg_buf t = SG_BUF_INIT(SG_TOOL_OUTPUT);
	size_t budget = PATCH_DIFF_BUDGET;
	sg_err rc = summary(pt, dry, &t);

	if (!rc)
		rc = sg_reply_ok(pt->c->out);
	if (!rc)
		rc = sg_fs_kv_strn(pt->c->out, "text", t.p, t.len);
	if (!rc)
		rc = sg_buf_adds(pt->c->out, ",\"files\":[");
	for (size_t i = 0; !rc && i < pt->ns; i++)
		rc = file_json(pt, &pt->s[i], &budget, i == 0);
	if (!rc)
		rc = sg_buf_addc(pt->c->out, ']');
	if (!rc)
		rc = sg_reply_end(pt->c->out);
	sg_buf_release(&t);
	return rc;
}

/*
 * Put prefix before a failure's text unless it has one: the path checks'
 * own errors (path_escape ...) carry the host's prefix too.  A patch that
 * does not fit the files (verify) is the caller's to fix, and its code
 * says so, except where a file it names is missing.
 */
static void prefix_failure(struct fs *c, const char *prefix, bool verify)
{
	char msg[sizeof(c->err.msg)];

	if (!c->err.code)
		return;
	if (verify && c->err.code == SG_E_NOT_FOUND && !c->tool_code &&
	    !strstr(c->err.msg, sg_fs_errstr(ENOENT)))
		c->tool_code = "invalid_argument";
	if (strncmp(c->err.msg, "apply_patch ", 12) == 0)
		return;
	snprintf(msg, sizeof(msg), "%s%s", prefix, c->err.msg);
	memcpy(c->err.msg, msg, sizeof(msg));
	if (c->tool_error && strncmp(c->tool_error, "apply_patch ", 12) != 0) {
		char *t = NULL;

		if (asprintf(&t, "%s%s", prefix, c->tool_error) >= 0) {
			free(c->tool_error);
			c->tool_error = t;
		}
	}
}

static void patch_free(struct patch *pt)
{
	for (size_t i = 0; i < pt->ns; i++) {
		struct section *s = &pt->s[i];

		free(s->path);
		free(s->move);
		free(s->chunks);
		sg_buf_release(&s->src);
		sg_buf_release(&s->dst);
		sg_buf_release(&s->shown);
		sg_buf_release(&s->move_shown);
		sg_buf_release(&s->old);
		sg_buf_release(&s->new);
	}
	free(pt->s);
	sg_lines_release(&pt->lines);
	free(pt->text);
}

sg_err sg_fs_patch(struct fs *c)
{
	struct patch pt = { .c = c };
	bool dry = sg_args_flag(&c->a, "dry-run");
	sg_err rc = sg_fs_args_done(c, 0, 0);

	if (!rc)
		rc = parse(&pt, c->in ? c->in : "", c->inlen);
	if (!rc)
		rc = plan(&pt);
	if (rc)
		prefix_failure(c, PATCH_VERIFY, true);
	if (!rc && !dry) {
		rc = commit(&pt);
		if (rc)
			prefix_failure(c, PATCH_APPLY, false);
	}
	if (!rc)
		rc = reply(&pt, dry);
	patch_free(&pt);
	return rc;
}
