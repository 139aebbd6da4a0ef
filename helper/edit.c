/*
 * edit.c - `fs write` and `fs edit`: the host's write_file and edit_file,
 * done beneath the root like every fs command (fs.h).
 *
 * Both answer {"ok":true,"view":{...}} where the view is the host's
 * result, key for key, so the gateway passes it on as it is; and both
 * replace a file only through sg_fs_put_file(): a temporary file renamed
 * over the target (readers see the old or the new file, never half), the
 * mode and owner of an existing file kept, no set-id bits created.
 *
 * Bounded: write holds an existing file only when it is small enough to
 * diff (WRITE_SMALL_MAX); a larger one is hashed and compared as it
 * streams past.  edit holds a file of at most FS_EDIT_MAX twice and knows
 * the size of its result before it builds it; its diagnostics show at
 * most a few clipped lines (diff.h).
 */
#define _GNU_SOURCE /* memmem */
#include "helper/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/jw.h"
#include "base/sha256.h"
#include "helper/diff.h"

/*
 * The host's maxImplicitWriteFileOverwriteBytes: an existing file larger
 * than this is replaced with different content only under an explicit
 * overwrite_policy, and its diff is the summary form.
 */
#define WRITE_SMALL_MAX (32 * SG_KiB)
/* edit holds the file and its result: at most one frame each. */
#define FS_EDIT_MAX SG_MAX_FRAME
/* A diff in a view: at most what a tool's output may be. */
#define VIEW_DIFF_BUDGET SG_TOOL_OUTPUT
/* A diagnostic's text (its lines are clipped, so it never comes near). */
#define DIAG_MAX (256 * SG_KiB)
/* Candidates the host shows: closest for a miss, exact for an ambiguity. */
#define EDIT_NEAR_MAX 3
#define EDIT_EXACT_MAX 5
/*
 * Lines of the file (and of old_text) a diagnostic splits to look for
 * candidates: past them it names no candidates (16 bytes a line held).
 */
#define DIAG_LINES_MAX ((size_t)256 * 1024)

#define EDIT_SAFE_RETRY                                                        \
	"safe_retry: read_file the target range and retry edit_file with "     \
	"exact current old_text and enough surrounding context"
#define EDIT_NEXT                                                              \
	"run targeted validation with command execution if that capability "   \
	"is exposed, otherwise inspect the resulting diff before finishing"

/* ,"view":{"action":"<action>" after sg_reply_ok(). */
static sg_err view_open(struct sg_buf *o, const char *action)
{
	sg_err rc = sg_buf_adds(o, ",\"view\":{\"action\":");

	return rc ? rc : sg_jw_str(o, action, strlen(action));
}

#define CONTRACT_NEXT "address the contract_warning before anything else"
/* The warning's text: a few names and one sentence. */
#define CONTRACT_MAX (64 * SG_KiB)

/*
 * ,"contract_warning":... when the change removes tests from a test file
 * (*warned), as the host adds it.
 */
static sg_err view_contract(struct sg_buf *o, const char *path, const char *old, size_t on,
			    const char *new, size_t nn, bool *warned)
{
	struct sg_buf w = SG_BUF_INIT(CONTRACT_MAX);
	sg_err rc = sg_contract_warning(&w, path, old, on, new, nn, warned);

	/* Too many names to list is no reason to fail the edit: no warning. */
	if (rc == SG_E_TOO_LARGE) {
		*warned = false;
		rc = SG_OK;
	}
	if (!rc && *warned)
		rc = sg_fs_kv_strn(o, "contract_warning", w.p, w.len);
	sg_buf_release(&w);
	return rc;
}

/* ,"diff": then the DiffResult of old -> new. */
static sg_err view_diff(struct sg_buf *o, const char *old, size_t on, const char *new,
			size_t nn)
{
	sg_err rc = sg_jw_key(o, "diff", 0);

	return rc ? rc : sg_diff_json(o, old, on, new, nn, VIEW_DIFF_BUDGET);
}

/*
 * The host's guard for a path a tool would change: the app's own
 * credential files and the sensitive paths (keys, .env, credential
 * stores) are refused in every permission mode, unconfined included.
 * *shown is the path as the host shows it.
 */
sg_err sg_fs_refuse_write(struct fs *c, const char *tool, const char *action,
			  const struct sg_buf *rel, struct sg_buf *shown)
{
	char parent[SG_PATH_MAX + 1];
	const char *name = sg_fs_split_rel(rel->p, parent, sizeof(parent)), *why;
	char *text = NULL;
	int n;

	sg_fs_display(c, rel, shown);
	if (!strcmp(parent, "."))
		snprintf(parent, sizeof(parent), "%s", c->root);
	if (rel->len && sg_fs_app_credential(parent, name))
		n = asprintf(&text, "%s refuses to %s wuu credential file \"%s\": it stores the "
			     "app's own login credentials and is never accessible to the agent "
			     "in any permission mode", tool, action, shown->p);
	else if (rel->len && (why = sg_fs_sensitive(shown->p)))
		n = asprintf(&text, "%s refuses to %s sensitive path \"%s\" (%s). This guard "
			     "applies in every permission mode, including unconfined, and chat "
			     "approval does not lift it. Edit the file outside the session",
			     tool, action, shown->p, why);
	else
		return SG_OK;
	if (n < 0)
		text = NULL;
	return sg_fs_fail_text(c, "permission_denied", text, "the path is sensitive");
}

sg_err sg_fs_fail_code(struct fs *c, const char *code, const char *fmt, ...)
{
	char *text = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&text, fmt, ap) < 0)
		text = NULL;
	va_end(ap);
	return sg_fs_fail_text(c, code, text, text ? text : "the tool failed");
}

/* ---- write ---- */

/* What write learns of the file it replaces, in one streaming pass. */
struct old_file {
	bool exists;
	size_t size, lines;
	bool same;              /* byte for byte the new content */
	char sha[7 + 2 * SG_SHA256_LEN + 1];
	struct sg_buf small;    /* its bytes, when at most WRITE_SMALL_MAX */
};

static sg_err old_scan(struct fs *c, int fd, const char *data, size_t n, struct old_file *of)
{
	struct sg_sha256 h;
	char chunk[FS_CHUNK];
	bool keep = true;
	char last = '\n';
	ssize_t got;

	sg_sha256_init(&h);
	of->same = true;
	while ((got = read(fd, chunk, sizeof(chunk))) != 0) {
		size_t g = (size_t)got;

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return sg_fs_fail(c, "cannot read %s: %s", c->pos[0], sg_fs_errstr(errno));
		sg_sha256_update(&h, chunk, g);
		of->lines += sg_text_lines(chunk, g) - (chunk[g - 1] != '\n');
		last = chunk[g - 1];
		of->same = of->same && of->size + g <= n &&
			   memcmp(data + of->size, chunk, g) == 0;
		of->size += g;
		keep = keep && of->size <= WRITE_SMALL_MAX;
		if (keep && sg_buf_add(&of->small, chunk, g))
			return SG_E_INTERNAL;
		if (!keep)
			sg_buf_release(&of->small);
		if (of->size % (16 * FS_CHUNK) == 0 && sg_cancel_check(c->cancel))
			return sg_fs_cancelled(c, "write_file");
	}
	of->same = of->same && of->size == n;
	of->lines += last != '\n';
	memcpy(of->sha, "sha256:", 7);
	sg_sha256_final_hex(&h, of->sha + 7);
	return SG_OK;
}

/*
 * The existing file at rel, if any: exists, its size, line count, digest,
 * and whether it already holds data.  A directory or a special file is a
 * tool failure.
 */
static sg_err old_read(struct fs *c, const struct sg_buf *rel, const char *data, size_t n,
		       struct old_file *of)
{
	int fd = sg_fs_open_rel(c, rel, O_RDONLY | O_NONBLOCK | O_NOFOLLOW);
	struct stat st;
	sg_err rc;

	if (fd < 0 && errno == ENOENT)
		return SG_OK;
	if (fd < 0)
		return sg_fs_fail(c, "%s: %s", c->pos[0], sg_fs_errstr(errno));
	if (fstat(fd, &st) != 0)
		rc = sg_fs_fail(c, "%s: %s", c->pos[0], sg_fs_errstr(errno));
	else if (S_ISDIR(st.st_mode))
		rc = sg_fs_fail(c, "path is a directory: %s", c->pos[0]);
	else if (!S_ISREG(st.st_mode))
		rc = sg_fs_fail(c, "write_file requires a regular file: %s", c->pos[0]);
	else
		rc = old_scan(c, fd, data, n, of);
	of->exists = !rc;
	close(fd);
	return rc;
}

/* The host's writeFilePathLooksGenerated, on the path below root. */
static bool looks_generated(const char *rel)
{
	static const char *const dirs[] = { "generated", "gen", "dist", "build", "out", "coverage" };
	const char *p = rel, *base = rel;

	while (*p) {
		size_t n = strcspn(p, "/");

		for (size_t i = 0; i < sizeof(dirs) / sizeof(*dirs); i++)
			if (strlen(dirs[i]) == n && strncasecmp(p, dirs[i], n) == 0)
				return true;
		base = p;
		p += n;
		while (*p == '/')
			p++;
	}
	return strcasestr(base, ".generated.") || strcasestr(base, ".gen.") ||
	       (strlen(base) > 6 && strcasecmp(base + strlen(base) - 6, ".pb.go") == 0) ||
	       (strlen(base) > 7 && strcasecmp(base + strlen(base) - 7, ".min.js") == 0);
}

/* The host's refusal of a broad overwrite, as one long tool failure. */
static sg_err broad_overwrite(struct fs *c, const char *rel, size_t size, const char *policy,
			      const char *reason)
{
	char *text = NULL;

	if (asprintf(&text,
		     "write_file refuses broad existing-file overwrite: "
		     "error_kind=broad_overwrite path=%s current_size_bytes=%zu "
		     "max_implicit_overwrite_bytes=%zu overwrite_policy=\"%s\" "
		     "reason=\"%s\" safe_retry=\"Use the scoped file editing tool "
		     "exposed in this session, or retry write_file with "
		     "overwrite_policy=explicit_user_requested only if the user "
		     "explicitly requested a full rewrite.\" model_next_action=\""
		     "prefer a scoped edit tool; if a full rewrite is truly required, "
		     "explain the reason and use an explicit overwrite policy\"",
		     rel, size, (size_t)WRITE_SMALL_MAX, policy, reason) < 0)
		text = NULL;
	return sg_fs_fail_text(c, "permission_denied", text,
			       "write_file refuses broad existing-file overwrite: "
			       "error_kind=broad_overwrite");
}

/* The host's overwrite rules for an existing file (policy validated). */
static sg_err overwrite_allowed(struct fs *c, const char *rel, const struct old_file *of,
				const char *policy)
{
	if (of->same || of->size <= WRITE_SMALL_MAX || strcmp(policy, "explicit_user_requested") == 0)
		return SG_OK;
	if (strcmp(policy, "generated") == 0)
		return looks_generated(rel)
			       ? SG_OK
			       : broad_overwrite(c, rel, of->size, policy,
						 "generated policy only applies to "
						 "generated/build artifact paths");
	if (strcmp(policy, "small_file") == 0)
		return broad_overwrite(c, rel, of->size, policy,
				       "small_file policy cannot overwrite files larger "
				       "than the implicit small-file limit");
	return broad_overwrite(c, rel, of->size, policy,
			       "large existing file overwrite requires explicit policy");
}

static sg_err write_view(struct fs *c, const struct sg_buf *shown, const char *data, size_t n,
			 const struct old_file *of)
{
	struct sg_buf *o = c->out;
	bool warned = false;
	sg_err rc = sg_reply_ok(o);

	if (!rc)
		rc = view_open(o, of->exists ? "overwrite" : "create");
	if (!rc)
		rc = sg_fs_kv_strn(o, "path", shown->p, shown->len);
	if (!rc)
		rc = sg_fs_kv_int(o, "written_bytes", (long long)n);
	if (!rc)
		rc = sg_fs_kv_sha(o, "new_file_sha", data, n);
	if (!rc && of->exists)
		rc = sg_fs_kv_str(o, "old_file_sha", of->sha);
	if (!rc)
		rc = sg_fs_kv_revision(c);
	if (!rc)
		rc = sg_jw_key(o, "diff", 0);
	if (!rc && !of->exists)
		rc = sg_diff_json_new(o, sg_text_lines(data, n));
	else if (!rc && (of->size > WRITE_SMALL_MAX || n > WRITE_SMALL_MAX))
		rc = sg_diff_json_summary(o, of->lines, sg_text_lines(data, n),
					  "large full-file rewrite; inline diff omitted "
					  "from tool result");
	else if (!rc)
		rc = sg_diff_json(o, of->small.p, of->small.len, data, n, VIEW_DIFF_BUDGET);
	/* The old text is held only when small: a larger one is not checked. */
	if (!rc && of->exists && of->small.len == of->size)
		rc = view_contract(o, shown->p, of->small.p, of->small.len, data, n, &warned);
	if (!rc && warned)
		rc = sg_buf_adds(o, ",\"next_suggestions\":[\"" CONTRACT_NEXT "\"]");
	if (!rc)
		rc = sg_buf_addc(o, '}');
	return rc ? rc : sg_reply_end(o);
}

/*
 * fs write PATH [--create-only] [--overwrite-policy P], the content on
 * stdin.
 */
sg_err sg_fs_write(struct fs *c)
{
	struct sg_buf rel = SG_BUF_INIT(SG_PATH_MAX), shown = SG_BUF_INIT(2 * SG_PATH_MAX + 2);
	struct old_file of = { .small = SG_BUF_INIT(WRITE_SMALL_MAX) };
	const char *policy = sg_args_str(&c->a, "overwrite-policy", "");
	bool create_only = sg_args_flag(&c->a, "create-only"), created = false;
	const char *data = c->in ? c->in : "";
	size_t n = c->inlen;
	sg_err rc;

	rc = sg_fs_args_done(c, 1, 1);
	if (!rc && *policy && strcmp(policy, "small_file") && strcmp(policy, "generated") &&
	    strcmp(policy, "explicit_user_requested"))
		rc = sg_fs_fail_code(c, "invalid_argument", "write_file invalid overwrite_policy "
				     "\"%.64s\": use small_file, generated, or "
				     "explicit_user_requested", policy);
	if (!rc)
		rc = sg_fs_resolve(c, c->pos[0], SG_PATH_PARENTS, &rel);
	if (!rc)
		rc = sg_fs_refuse_write(c, "write_file", "write", &rel, &shown);
	if (!rc)
		rc = old_read(c, &rel, data, n, &of);
	if (!rc && create_only && of.exists)
		rc = sg_fs_fail_code(c, "invalid_argument", "file already exists: %s", c->pos[0]);
	if (!rc && of.exists)
		rc = overwrite_allowed(c, shown.p, &of, policy);
	if (!rc)
		rc = sg_fs_put_file(c, rel.p, c->pos[0], data, n, false, 0, &created);
	if (!rc)
		rc = write_view(c, &shown, data, n, &of);
	sg_buf_release(&of.small);
	sg_buf_release(&shown);
	sg_buf_release(&rel);
	return rc;
}

/* ---- edit ---- */

/* stdin of edit: "<decimal length of old_text>\n" old_text new_text. */
static sg_err parse_edit(struct fs *c, const char **old, size_t *oldn, const char **repl,
			 size_t *repln)
{
	const char *s = c->in ? c->in : "";
	size_t i = 0, len = 0;

	while (i < c->inlen && i < 20 && s[i] >= '0' && s[i] <= '9')
		len = len * 10 + (size_t)(s[i++] - '0');
	if (i == 0 || i >= c->inlen || s[i] != '\n' || len > c->inlen - i - 1)
		return sg_err_set(&c->err, SG_E_INVALID_ARGUMENT,
				  "edit input must be the byte length of old_text, a "
				  "newline, old_text and new_text");
	*old = s + i + 1;
	*oldn = len;
	*repl = *old + len;
	*repln = c->inlen - i - 1 - len;
	return SG_OK;
}

/* The whole of a regular file at rel, at most FS_EDIT_MAX bytes. */
static sg_err edit_read(struct fs *c, const struct sg_buf *rel, struct sg_buf *data)
{
	struct stat st;
	int fd = sg_fs_open_rel(c, rel, O_RDONLY | O_NONBLOCK);
	sg_err rc = SG_OK;

	if (fd < 0 || fstat(fd, &st) != 0)
		rc = sg_fs_fail(c, "%s: %s", c->pos[0], sg_fs_errstr(errno));
	else if (S_ISDIR(st.st_mode))
		rc = sg_fs_fail(c, "path is a directory: %s", c->pos[0]);
	else if (!S_ISREG(st.st_mode))
		rc = sg_fs_fail(c, "edit_file requires a regular file: %s", c->pos[0]);
	if (!rc)
		rc = sg_read_all(fd, data);
	if (rc == SG_E_TOO_LARGE)
		rc = sg_err_set(&c->err, SG_E_TOO_LARGE, "%s is larger than the %zu bytes "
				"edit_file handles", c->pos[0], (size_t)FS_EDIT_MAX);
	else if (rc && rc != SG_E_NOT_FOUND)
		rc = sg_fs_fail(c, "cannot read %s: %s", c->pos[0], sg_fs_errstr(errno));
	sg_fs_close(&fd);
	return rc;
}

static size_t count_str(const char *s, size_t n, const char *what, size_t wn)
{
	size_t count = 0;
	const char *end = s + n, *q;

	for (const char *p = s; (q = sg_text_find(p, end, what, wn)); p = q + wn)
		count++;
	return count;
}

/* s with every line end made "\r\n" (a lone "\n" or an existing "\r\n"). */
static sg_err to_crlf(const char *s, size_t n, struct sg_buf *out)
{
	sg_err rc = SG_OK;

	for (size_t i = 0; !rc && i < n; i++) {
		if (s[i] == '\r' && i + 1 < n && s[i + 1] == '\n')
			continue;
		rc = s[i] == '\n' ? sg_buf_adds(out, "\r\n") : sg_buf_addc(out, s[i]);
	}
	return rc;
}

/* The host's hint when a candidate differs from old_text only in indentation. */
static sg_err indent_hint(struct sg_buf *o, const struct sg_lines *want,
			  const struct sg_lines *hay, const struct sg_cand *cd)
{
	size_t w = cd->end - cd->start + 1, first = (size_t)-1;

	if (w != want->n)
		return SG_OK;
	for (size_t i = 0; i < w; i++) {
		const struct sg_line *x = &want->v[i], *y = &hay->v[cd->start - 1 + i];
		size_t xi = strspn(x->p, " \t"), yi = strspn(y->p, " \t");

		xi = xi > x->n ? x->n : xi;
		yi = yi > y->n ? y->n : yi;
		if (x->n - xi != y->n - yi || memcmp(x->p + xi, y->p + yi, x->n - xi))
			return SG_OK;
		if (first == (size_t)-1 && (x->n != y->n || memcmp(x->p, y->p, x->n)))
			first = i;
	}
	if (first == (size_t)-1)
		return SG_OK;
	{
		const struct sg_line *x = &want->v[first], *y = &hay->v[cd->start - 1 + first];
		size_t xi = strspn(x->p, " \t"), yi = strspn(y->p, " \t");
		sg_err rc = sg_buf_addf(o, "  indentation_mismatch: old_text line %zu starts with ",
					first + 1);

		if (!rc)
			rc = sg_diag_quote(o, x->p, xi > x->n ? x->n : xi);
		if (!rc)
			rc = sg_buf_addf(o, "; candidate file line %zu starts with ",
					 cd->start + first);
		if (!rc)
			rc = sg_diag_quote(o, y->p, yi > y->n ? y->n : yi);
		return rc ? rc : sg_buf_adds(o, ". Re-read and copy the file indentation exactly.\n");
	}
}

/* The candidates where old_text occurs, up to EDIT_EXACT_MAX. */
static size_t exact_cands(const char *s, size_t n, const char *old, size_t oldn,
			  size_t nlines, struct sg_cand *out)
{
	size_t count = 0, line = 1;
	const char *at = s, *end = s + n, *q;

	for (const char *p = s; count < EDIT_EXACT_MAX &&
				(q = sg_text_find(p, end, old, oldn)); p = q + oldn) {
		size_t first, last;

		line += count_str(at, (size_t)(q - at), "\n", 1);
		at = q;
		first = line;
		last = first + count_str(q, oldn - 1, "\n", 1);
		first = first > nlines ? nlines : first;
		last = last > nlines ? nlines : last;
		out[count++] = (struct sg_cand){ first, last, 0 };
	}
	return count;
}

/*
 * The host's diagnostic for a miss (count 0) or an ambiguity (count > 1):
 * its kind and sentence, old_text as expected, the candidates, a hint for
 * indentation, and the safe retry.
 */
static sg_err edit_diag(struct fs *c, const char *file, size_t fn, const char *old,
			size_t oldn, size_t count)
{
	struct sg_buf t = SG_BUF_INIT(DIAG_MAX);
	struct sg_lines hay = { 0 }, want = { 0 };
	struct sg_cand cands[EDIT_EXACT_MAX];
	size_t nc = 0;
	sg_err rc;

	rc = sg_lines_split(&hay, file, fn, true, DIAG_LINES_MAX);
	if (!rc)
		rc = sg_lines_split(&want, old, oldn, true, DIAG_LINES_MAX);
	if (rc == SG_E_TOO_LARGE) {
		sg_lines_release(&hay);
		rc = SG_OK;
	}
	if (!rc && count == 0) {
		sg_cand_closest(&hay, &want, cands, EDIT_NEAR_MAX, &nc);
		rc = sg_buf_adds(&t, "old_text_not_found: failed to find old_text in file");
	} else if (!rc) {
		nc = hay.n ? exact_cands(file, fn, old, oldn, hay.n, cands) : 0;
		rc = sg_buf_addf(&t, "ambiguous_old_text: old_text matched %zu locations; add "
				 "more surrounding context or set replace_all=true only if "
				 "every occurrence should change", count);
	}
	if (!rc)
		rc = sg_diag_expected(&t, &want);
	if (!rc && nc)
		rc = sg_buf_adds(&t, "\ncandidates:\n");
	for (size_t i = 0; !rc && i < nc; i++) {
		rc = sg_diag_cand(&t, &hay, &cands[i]);
		if (!rc && count == 0)
			rc = indent_hint(&t, &want, &hay, &cands[i]);
	}
	if (!rc)
		rc = sg_buf_adds(&t, "\n" EDIT_SAFE_RETRY);
	sg_lines_release(&hay);
	sg_lines_release(&want);
	if (rc) {
		sg_buf_release(&t);
		return rc;
	}
	return sg_fs_fail_text(c, count ? "invalid_argument" : NULL, sg_buf_take(&t, NULL),
			       count ? "ambiguous_old_text: old_text matched more than once"
				     : "old_text_not_found: failed to find old_text in file");
}

/* data with each occurrence of old (or only the first) replaced by repl. */
static sg_err edit_build(struct fs *c, const struct sg_buf *data, const char *old, size_t oldn,
			 const char *repl, size_t repln, size_t count, struct sg_buf *res)
{
	const char *p = data->p, *end = data->p + data->len, *q;
	sg_err rc = SG_OK;

	/*
	 * The size is known before anything is built: an edit that would
	 * multiply the file past the limit (a one-byte old_text, a long
	 * new_text, replace_all) is refused without allocating for it.
	 */
	if (repln > oldn && count > (FS_EDIT_MAX - data->len) / (repln - oldn))
		rc = SG_E_TOO_LARGE;
	for (size_t done = 0; !rc && done < count &&
			      (q = sg_text_find(p, end, old, oldn)); done++) {
		rc = sg_buf_add(res, p, (size_t)(q - p));
		if (!rc)
			rc = sg_buf_add(res, repl, repln);
		p = q + oldn;
	}
	if (!rc)
		rc = sg_buf_add(res, p, (size_t)(end - p));
	if (rc == SG_E_TOO_LARGE)
		rc = sg_err_set(&c->err, SG_E_TOO_LARGE, "the edited %s would be larger than "
				"%zu bytes", c->pos[0], (size_t)FS_EDIT_MAX);
	return rc;
}

static sg_err edit_view(struct fs *c, const struct sg_buf *shown, const struct sg_buf *data,
			const struct sg_buf *res)
{
	struct sg_buf *o = c->out;
	bool warned = false;
	sg_err rc = sg_reply_ok(o);

	if (!rc)
		rc = view_open(o, "edit");
	if (!rc)
		rc = sg_fs_kv_strn(o, "path", shown->p, shown->len);
	if (!rc)
		rc = sg_fs_kv_sha(o, "old_file_sha", data->p, data->len);
	if (!rc)
		rc = sg_fs_kv_sha(o, "new_file_sha", res->p, res->len);
	if (!rc)
		rc = sg_fs_kv_revision(c);
	if (!rc)
		rc = view_diff(o, data->p, data->len, res->p, res->len);
	if (!rc)
		rc = view_contract(o, shown->p, data->p, data->len, res->p, res->len, &warned);
	if (!rc)
		rc = sg_buf_adds(o, warned ? ",\"next_suggestions\":[\"" CONTRACT_NEXT "\",\"" EDIT_NEXT "\"]}"
				    : ",\"next_suggestions\":[\"" EDIT_NEXT "\"]}");
	return rc ? rc : sg_reply_end(o);
}

/*
 * A file whose every line ends in CRLF gets old_text and new_text with
 * their line ends made CRLF too, as the host does for LF excerpts.
 */
static sg_err edit_crlf(const struct sg_buf *data, const char **old, size_t *oldn,
			const char **repl, size_t *repln, struct sg_buf *o2, struct sg_buf *r2)
{
	size_t crlf = count_str(data->p, data->len, "\r\n", 2);
	sg_err rc;

	if (!crlf || crlf != count_str(data->p, data->len, "\n", 1) ||
	    crlf != count_str(data->p, data->len, "\r", 1))
		return SG_OK;
	rc = to_crlf(*old, *oldn, o2);
	if (!rc)
		rc = to_crlf(*repl, *repln, r2);
	if (rc)
		return rc;
	*old = o2->p;
	*oldn = o2->len;
	*repl = r2->p;
	*repln = r2->len;
	return SG_OK;
}

/* fs edit PATH [--all], stdin as parse_edit() reads it. */
sg_err sg_fs_edit(struct fs *c)
{
	struct sg_buf rel = SG_BUF_INIT(SG_PATH_MAX), shown = SG_BUF_INIT(2 * SG_PATH_MAX + 2),
		      data = SG_BUF_INIT(FS_EDIT_MAX),
		      res = SG_BUF_INIT(FS_EDIT_MAX), o2 = SG_BUF_INIT(2 * FS_EDIT_MAX),
		      r2 = SG_BUF_INIT(2 * FS_EDIT_MAX);
	bool all = sg_args_flag(&c->a, "all"), created;
	const char *old = NULL, *repl = NULL;
	size_t oldn = 0, repln = 0, count = 0;
	sg_err rc;

	rc = sg_fs_args_done(c, 1, 1);
	if (!rc)
		rc = parse_edit(c, &old, &oldn, &repl, &repln);
	if (!rc && oldn == 0)
		rc = sg_fs_fail_code(c, "invalid_argument", "edit_file requires old_text");
	if (!rc && oldn == repln && memcmp(old, repl, oldn) == 0)
		rc = sg_fs_fail_code(c, "invalid_argument",
				     "old_text and new_text are identical, no changes needed");
	if (!rc)
		rc = sg_fs_resolve(c, c->pos[0], SG_PATH_PARENTS, &rel);
	if (!rc)
		rc = sg_fs_refuse_write(c, "edit_file", "edit", &rel, &shown);
	if (!rc)
		rc = edit_read(c, &rel, &data);
	if (!rc)
		rc = edit_crlf(&data, &old, &oldn, &repl, &repln, &o2, &r2);
	if (!rc && oldn == repln && memcmp(old, repl, oldn) == 0)
		rc = sg_fs_fail_code(c, "invalid_argument",
				     "old_text and new_text are identical, no changes needed");
	if (!rc)
		count = count_str(data.p, data.len, old, oldn);
	if (!rc && (count == 0 || (count > 1 && !all)))
		rc = edit_diag(c, data.p, data.len, old, oldn, count);
	if (!rc)
		rc = edit_build(c, &data, old, oldn, repl, repln, all ? count : 1, &res);
	if (!rc)
		rc = sg_fs_put_file(c, rel.p, c->pos[0], res.p, res.len, false, 0, &created);
	if (!rc)
		rc = edit_view(c, &shown, &data, &res);
	sg_buf_release(&shown);
	sg_buf_release(&o2);
	sg_buf_release(&r2);
	sg_buf_release(&res);
	sg_buf_release(&data);
	sg_buf_release(&rel);
	return rc;
}
