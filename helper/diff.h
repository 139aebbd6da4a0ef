/*
 * diff.h - what sg-helper's editing commands (fs write, fs edit, fs patch)
 * share: a file's sha256, the host's DiffResult, and the diagnostics that
 * show a model where its text did not match.
 *
 * Invariants:
 * - Nothing here costs more than a fixed multiple of its input, under a
 *   sanitizer too: the line diff is not tried when the line counts show
 *   it too big and gives up past DIFF_WORK comparisons (the result is
 *   then the host's summary form, truncated:true), the candidate search
 *   stops past CAND_WORK bytes compared, a diff's JSON never exceeds the
 *   budget its caller gives (again the summary form past it), and
 *   sg_text_find never hands memmem a haystack much longer than the
 *   distance it searches.
 * - Lines are views into the caller's text (never copied); a line's
 *   bytes exclude its '\n'.
 * - The JSON written is the host's: DiffResult is
 *   {"hunks":[{"old_start","new_start","lines":[{"op","content"}]}],
 *   "new_file","lines","old_lines","new_lines","truncated","summary"},
 *   every key omitted when empty, false or zero.
 */
#ifndef SG_HELPER_DIFF_H
#define SG_HELPER_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

/*
 * One line of a text: p[0..n), and whether a '\n' ended it.  A text is
 * at most one frame, so n fits 32 bits and a line costs 16 bytes.
 */
struct sg_line {
	const char *p;
	uint32_t n;
	bool nl;
};

/* A text's lines (v owned, malloc; release with sg_lines_release). */
struct sg_lines {
	struct sg_line *v;
	size_t n;
};

/*
 * Split s into lines at '\n'; a final line without '\n' counts, an empty
 * tail does not.  strip_cr drops one '\r' before each '\n' (and at the
 * very end), as the host does when it shows a CRLF file's lines.  More
 * than max lines: SG_E_TOO_LARGE, nothing allocated (a text of newlines
 * would otherwise cost 16 bytes a byte).
 */
sg_err sg_lines_split(struct sg_lines *out, const char *s, size_t n, bool strip_cr,
		      size_t max) SG_MUST_CHECK;
void sg_lines_release(struct sg_lines *l);

/* The host's line count: 0 for "", else the '\n's plus an unended last line. */
size_t sg_text_lines(const char *s, size_t n);

/*
 * The first occurrence of w[0..wn) in [p, end), or NULL; p itself when wn
 * is 0.  Linear in the distance to it plus wn, whoever provides memmem:
 * finding every occurrence of w in a text costs time linear in the text.
 */
const char *sg_text_find(const char *p, const char *end, const char *w, size_t wn);

/* ,"key":"sha256:<hex>" of p[0..n), after sg_reply_ok(). */
sg_err sg_fs_kv_sha(struct sg_buf *o, const char *k, const char *p, size_t n)
	SG_MUST_CHECK;

/*
 * Append the DiffResult of a -> b as a JSON object, with 3 lines of
 * context like the host's.  Only the lines between the common prefix and
 * suffix (and their context) are split and compared; past DIFF_LINES_MAX
 * of them, past budget bytes, or when the line diff is too costly, the
 * summary form {"old_lines","new_lines","truncated":true,"summary"} is
 * written instead.
 */
sg_err sg_diff_json(struct sg_buf *o, const char *a, size_t an, const char *b,
		    size_t bn, size_t budget) SG_MUST_CHECK;

/* The summary form, with the given sentence. */
sg_err sg_diff_json_summary(struct sg_buf *o, size_t old_lines, size_t new_lines,
			    const char *summary) SG_MUST_CHECK;

/* {"new_file":true,"lines":N} for a file that did not exist. */
sg_err sg_diff_json_new(struct sg_buf *o, size_t lines) SG_MUST_CHECK;

/* A place where a text nearly (or exactly) matched: lines start..end, 1-based. */
struct sg_cand {
	size_t start, end;
	int score;
};

/*
 * The limit windows of hay most like needle (the host's scoring: +2 for
 * each line equal once trimmed, +1 when one contains the other), best
 * first, ties by position; *count of them.  Bounded by CAND_WORK.
 */
void sg_cand_closest(const struct sg_lines *hay, const struct sg_lines *needle,
		     struct sg_cand *out, size_t limit, size_t *count);

/*
 * Append lines v[0..n) as the host shows them in a diagnostic: at most
 * limit, each "  N|text\n" (start_line > 0) or "  |text\n", then
 * "  ... K more lines omitted\n".  A line longer than DIAG_LINE_MAX bytes
 * is cut there (at a character boundary) and marked.
 */
sg_err sg_diag_lines(struct sg_buf *o, const struct sg_line *v, size_t n,
		     size_t start_line, size_t limit) SG_MUST_CHECK;

/*
 * The parts of a failed match's diagnostic that edit and patch share, in
 * the host's words.  sg_diag_expected appends "\nexpected:\n" and the
 * first lines of want (nothing when want is empty); sg_diag_cand appends
 * "- lines A-B", " score=S" when S > 0, ":\n", then the first lines of
 * the candidate's window in hay (none when hay was not split).
 */
sg_err sg_diag_expected(struct sg_buf *o, const struct sg_lines *want) SG_MUST_CHECK;
sg_err sg_diag_cand(struct sg_buf *o, const struct sg_lines *hay, const struct sg_cand *c)
	SG_MUST_CHECK;

/* Append s as a Go %q string would show it (quotes, \t, \\, \", \n, \r). */
sg_err sg_diag_quote(struct sg_buf *o, const char *s, size_t n) SG_MUST_CHECK;

/*
 * The host's test-contract warning (contract.c): when path is a test
 * file and new lacks test declarations old has, append the warning's
 * sentence to o and set *warned.
 */
sg_err sg_contract_warning(struct sg_buf *o, const char *path, const char *old, size_t on,
			   const char *new, size_t nn, bool *warned) SG_MUST_CHECK;

/* ---- edit.c ---- */

struct fs;
/* A tool failure whose error reply carries the wire word code (fmt's text whole). */
sg_err sg_fs_fail_code(struct fs *c, const char *code, const char *fmt, ...) SG_PRINTF(3, 4);
/*
 * The host's guard for a path a tool would change (its app credential
 * files, its sensitive paths), in every permission mode: a long tool
 * failure naming tool and action ("write", "add"...).  *shown receives
 * the path as the host shows it (sg_fs_display).
 */
sg_err sg_fs_refuse_write(struct fs *c, const char *tool, const char *action,
			  const struct sg_buf *rel, struct sg_buf *shown) SG_MUST_CHECK;

#endif
