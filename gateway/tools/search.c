/*
 * search.c - the host's grep and glob tools: their arguments, their paging
 * and their views, key for key (tool_search.go).
 *
 * Invariants:
 * - The search itself is sg-helper's (`fs grep`, `fs glob`): it runs
 *   beneath root inside the environment, sorts by path (then line), and
 *   returns one page of records with the totals and a fingerprint of the
 *   whole result.  Nothing here opens a user's path.
 * - A page is bound to its result by the revision sg_tool_page_revision()
 *   makes (tool.h), and page.next carries it as expected_revision; a
 *   continuation whose result changed is refused, as the host refuses it,
 *   and offset 0 always searches afresh.
 * - grep's content view never exceeds GREP_RESULT_BUDGET bytes of compact
 *   JSON: the matches that do not fit are counted in omitted_match_count
 *   and left for the next page.
 */
#include "gateway/tools/tool.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/limits.h"

/* The host's page sizes (grepPageSize, globPageSize). */
#define GREP_PAGE 250
#define GLOB_PAGE 500
/* The host's maxGrepOutputBytes: a content view's whole JSON. */
#define GREP_RESULT_BUDGET (20 * 1024)
/* context, before and after: accepted as the host accepts them. */
#define GREP_CONTEXT_MAX 100000

/* A search's arguments once read, for both tools. */
struct search {
	const char *tool;         /* "grep" or "glob" */
	const char *pattern;
	const char *path;
	const char *include;
	const char *mode;         /* grep's output_mode, "content" by default */
	const char *expected;     /* expected_revision, NULL when absent */
	int64_t offset;
	bool icase;
	json_t *reply;            /* the helper's (owned) */
	char *revision;           /* "result:<hash>" (owned) */
};

/* The host's next_suggestions for a search (searchNextSuggestions). */
static json_t *search_suggestions(const char *tool, const char *mode, int64_t total,
				  bool more)
{
	bool glob = strcmp(tool, "glob") == 0;
	const char *s;

	if (more && glob)
		s = "use page.next with the same glob arguments for more files, or narrow the "
		    "path or pattern";
	else if (more && strcmp(mode, "count") == 0)
		s = "use page.next with the same grep arguments for more count records, or "
		    "narrow the search";
	else if (more && strcmp(mode, "files_with_matches") == 0)
		s = "use page.next with the same grep arguments for more files, or narrow the "
		    "search";
	else if (more)
		s = "use page.next with the same grep arguments for more matches, or narrow "
		    "the search";
	else if (total == 0 && glob)
		s = "try a broader glob pattern or inspect the directory with list_files";
	else if (total == 0)
		s = "try a broader or case-insensitive grep pattern, or use glob to find "
		    "candidate files first";
	else if (glob)
		s = "use read_file for specific candidate files or grep within the matched set "
		    "before editing";
	else if (strcmp(mode, "files_with_matches") == 0)
		s = "use grep output_mode=content or read_file on the most relevant matched files";
	else if (strcmp(mode, "count") == 0)
		s = "rerun grep with output_mode=content for the highest-value files before "
		    "editing";
	else
		s = "read_file the relevant match ranges before editing or making a conclusion";
	return json_pack("[s]", s);
}

/* The arguments both tools share, checked the way the host checks them. */
static sg_err search_args(struct sg_tool_call *t, struct search *q)
{
	struct sg_errinfo *err = &t->op->err;
	sg_err rc = sg_arg_str(t->a, "pattern", false, &q->pattern, err);

	if (!rc)
		rc = sg_arg_str(t->a, "path", false, &q->path, err);
	if (!rc)
		rc = sg_arg_str(t->a, "expected_revision", false, &q->expected, err);
	if (!rc)
		rc = sg_arg_int(t->a, "offset", 0, INT64_MIN, INT64_MAX, &q->offset, err);
	if (rc)
		return rc;
	if (!q->pattern || !q->pattern[strspn(q->pattern, " \t\r\n")])
		return sg_err_set(err, SG_E_INVALID_ARGUMENT, "%s requires pattern", q->tool);
	if (q->offset < 0)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT, "%s offset must be non-negative",
				  q->tool);
	if (q->expected && !q->expected[strspn(q->expected, " \t\r\n")])
		q->expected = NULL;
	if (q->path && !q->path[strspn(q->path, " \t\r\n")])
		q->path = NULL;
	if (q->offset > 0 && !q->expected)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "%s expected_revision is required when offset is non-zero",
				  q->tool);
	return SG_OK;
}

/*
 * Run the helper's search (argv after `fs`, the pattern last) and bind
 * the page to its result: q->revision, checked against expected_revision.
 */
static sg_err search_run(struct sg_tool_call *t, struct search *q, struct sg_strv *av)
{
	const char *hash, *ws;
	sg_err rc;

	if (sg_strv_addv(av, (const char *[]){ "--", q->pattern, NULL }))
		return sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
	rc = sg_tool_fs(t, sg_strv_get(av), NULL, 0, &q->reply);
	if (rc)
		return rc;
	hash = json_string_value(json_object_get(q->reply, "result_hash"));
	ws = json_string_value(json_object_get(q->reply, "workspace_revision"));
	if (!hash)
		return sg_err_set(&t->op->err, SG_E_INTERNAL,
				  "the search's reply has no result fingerprint");
	q->revision = sg_tool_page_revision(ws, hash);
	if (!q->revision)
		return sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
	if (q->expected && !sg_tool_page_current(q->expected, q->revision))
		return sg_tool_fail(t, SG_E_INVALID_ARGUMENT,
				    "%s continuation is stale: result revision changed "
				    "from \"%s\" to \"%s\"; restart at offset 0",
				    q->tool, q->expected, q->revision);
	return SG_OK;
}

/* The options of `fs grep`/`fs glob` every search passes. */
static sg_err search_argv(struct search *q, const char *sub, int page, struct sg_strv *av)
{
	char offset[24], size[24];

	snprintf(offset, sizeof(offset), "%" PRId64, q->offset);
	snprintf(size, sizeof(size), "%d", page);
	if (sg_strv_addv(av, (const char *[]){ sub, "--offset", offset, "--page", size, NULL }) ||
	    (q->path && sg_strv_addv(av, (const char *[]){ "--path", q->path, NULL })))
		return SG_E_INTERNAL;
	return SG_OK;
}

/* The view's common head: action, pattern, revision, totals, offset. */
static json_t *search_head(const struct search *q, int64_t total, int64_t record_total)
{
	return json_pack("{s:s, s:s, s:b, s:s, s:I, s:I, s:I}", "action", q->tool, "pattern",
			 q->pattern, "continuation_supported", 1, "workspace_revision",
			 q->revision, "total", (json_int_t)total, "record_total",
			 (json_int_t)record_total, "offset", (json_int_t)q->offset);
}

/*
 * A page of whole records (glob's files, grep's files and counts): the
 * host's pageWindow, with no byte budget.
 */
static json_t *search_list_view(const struct search *q, const char *key, json_t *records,
				int64_t total, int64_t record_total, bool over)
{
	int64_t returned = (int64_t)json_array_size(records);
	bool more = q->offset + returned < record_total;
	json_t *v = search_head(q, total, record_total);

	if (!v)
		return NULL;
	json_object_set_new(v, "returned_count", json_integer(returned));
	json_object_set_new(v, "has_more", json_boolean(more));
	json_object_set_new(v, "page", sg_tool_page(q->offset, returned, more, q->revision));
	json_object_set_new(v, "truncated", json_boolean(more || over));
	json_object_set(v, key, records);
	json_object_set_new(v, "next_suggestions",
			    search_suggestions(q->tool, q->mode ? q->mode : "", total, more));
	return v;
}

/* grep's content view with `shown` of the page's matches (NULL: none yet). */
static json_t *grep_content_view(const struct search *q, int64_t total, int64_t shown,
				 int64_t omitted, json_t *matches, bool cut, bool more)
{
	json_t *v = search_head(q, total, total);

	if (!v)
		return NULL;
	json_object_set_new(v, "has_more", json_boolean(more));
	json_object_set_new(v, "truncated", json_boolean(more || cut));
	json_object_set_new(v, "matches", matches ? json_incref(matches) : json_null());
	json_object_set_new(v, "omitted_match_count", json_integer(omitted));
	json_object_set_new(v, "content_truncated", json_boolean(cut));
	json_object_set_new(v, "next_suggestions",
			    search_suggestions("grep", "content", total, more));
	json_object_set_new(v, "result_budget_bytes", json_integer(GREP_RESULT_BUDGET));
	json_object_set_new(v, "returned_match_count", json_integer(shown));
	json_object_set_new(v, "returned_count", json_integer(shown));
	json_object_set_new(v, "page", sg_tool_page(q->offset, shown, more, q->revision));
	return v;
}

/* The compact JSON length of v, as sg_tool_result writes it. */
static size_t json_bytes(const json_t *v)
{
	return v ? json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_SORT_KEYS) : 0;
}

/*
 * grep's content view: the longest prefix of the page whose view fits
 * GREP_RESULT_BUDGET.  The envelope is measured once, at its widest (both
 * has_more states, every count at the page's length), so that adding a
 * match costs exactly its own bytes and a comma.
 */
static json_t *grep_content(const struct search *q, json_t *page, int64_t total, bool over)
{
	int64_t n = (int64_t)json_array_size(page), kept = 0;
	size_t upper = 0, sum = 0;
	bool cut = false, more;
	json_t *shown, *v;

	for (int64_t i = 0; i < n; i++)
		cut |= json_is_true(json_object_get(json_array_get(page, (size_t)i),
						    "content_truncated"));
	for (int k = 0; k < 2; k++) {
		json_t *env = grep_content_view(q, total, n, n, NULL, cut, k == 0);
		size_t b = json_bytes(env);

		json_decref(env);
		if (b > upper)
			upper = b;
	}
	/* The empty array's 2 bytes become 2 + sum + (kept - 1) commas. */
	for (int64_t i = 0; i < n; i++) {
		sum += json_bytes(json_array_get(page, (size_t)i));
		if (upper + sum + (size_t)i > GREP_RESULT_BUDGET)
			break;
		kept = i + 1;
	}
	shown = json_array();
	for (int64_t i = 0; shown && i < kept; i++)
		json_array_append(shown, json_array_get(page, (size_t)i));
	more = q->offset + kept < total;
	v = grep_content_view(q, total, kept, n - kept, shown ? shown : NULL, cut, more);
	if (v && over)
		json_object_set_new(v, "truncated", json_true());
	json_decref(shown);
	return v;
}

sg_err sg_tool_grep(struct sg_tool_call *t, json_t **result)
{
	struct search q = { .tool = "grep" };
	struct sg_strv av = SG_STRV_INIT;
	int64_t ctx = 0, total, record_total;
	const char *mode;
	bool over;
	json_t *records, *view;
	sg_err rc;

	*result = NULL;
	rc = search_args(t, &q);
	if (!rc)
		rc = sg_arg_str(t->a, "include", false, &q.include, &t->op->err);
	if (!rc)
		rc = sg_arg_str(t->a, "output_mode", false, &q.mode, &t->op->err);
	if (!rc)
		rc = sg_arg_bool(t->a, "ignore_case", false, &q.icase, &t->op->err);
	/* The host drops context lines from its view: they are only checked. */
	for (int i = 0; !rc && i < 3; i++)
		rc = sg_arg_int(t->a, (const char *[]){ "context", "before", "after" }[i], 0, 0,
				GREP_CONTEXT_MAX, &ctx, &t->op->err);
	if (rc)
		goto out;
	/* Like the host, any other output_mode is the default, content. */
	if (!q.mode || (strcmp(q.mode, "files_with_matches") != 0 && strcmp(q.mode, "count") != 0))
		q.mode = "content";
	mode = strcmp(q.mode, "files_with_matches") == 0 ? "files"
	       : strcmp(q.mode, "count") == 0 ? "count" : "content";
	if (search_argv(&q, "grep", GREP_PAGE, &av) ||
	    sg_strv_addv(&av, (const char *[]){ "--mode", mode, NULL }) ||
	    (q.include && q.include[0] &&
	     sg_strv_addv(&av, (const char *[]){ "--glob", q.include, NULL })) ||
	    (q.icase && sg_strv_add(&av, "--ignore-case"))) {
		rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	rc = search_run(t, &q, &av);
	if (rc)
		goto out;
	records = json_object_get(q.reply, "records");
	total = json_integer_value(json_object_get(q.reply, "total"));
	record_total = json_integer_value(json_object_get(q.reply, "record_total"));
	over = json_is_true(json_object_get(q.reply, "over"));
	if (strcmp(mode, "content") == 0)
		view = grep_content(&q, records, total, over);
	else
		view = search_list_view(&q, strcmp(mode, "files") == 0 ? "files" : "counts",
					records, strcmp(mode, "files") == 0 ? record_total : total,
					record_total, over);
	*result = sg_tool_result(view, NULL);
	if (!*result)
		rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
out:
	json_decref(q.reply);
	free(q.revision);
	sg_strv_release(&av);
	return rc;
}

sg_err sg_tool_glob(struct sg_tool_call *t, json_t **result)
{
	struct search q = { .tool = "glob" };
	struct sg_strv av = SG_STRV_INIT;
	json_t *view;
	int64_t total;
	sg_err rc;

	*result = NULL;
	rc = search_args(t, &q);
	if (rc)
		goto out;
	if (search_argv(&q, "glob", GLOB_PAGE, &av)) {
		rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	rc = search_run(t, &q, &av);
	if (rc)
		goto out;
	total = json_integer_value(json_object_get(q.reply, "total"));
	view = search_list_view(&q, "files", json_object_get(q.reply, "files"), total, total,
				false);
	*result = sg_tool_result(view, NULL);
	if (!*result)
		rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
out:
	json_decref(q.reply);
	free(q.revision);
	sg_strv_release(&av);
	return rc;
}
