/*
 * edit.c - write_file and edit_file: the host's arguments, one sg-helper
 * step each (`fs write`, `fs edit`), the helper's view passed on as the
 * result.
 *
 * The helper does the work beneath the root (resolving, the sensitive-
 * path guard, the overwrite policy, the atomic replace, the digests and
 * the diff) and answers {"ok":true,"view":{...}} with the host's view,
 * so this file only reads arguments and frames the result.  A failure
 * comes back as a helper tool_error and leaves here as an error reply
 * whose text is the host's (sg_tool_fs).
 */
#include "gateway/tools/tool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/limits.h"

/* A string argument with its length (content may hold NUL); NULL if absent. */
static sg_err text_arg(struct sg_tool_call *t, const char *tool, const char *key,
		       const char **s, size_t *n)
{
	json_t *v = json_object_get(t->a, key);

	*s = NULL;
	*n = 0;
	if (!v || json_is_null(v))
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT, "%s requires %s", tool, key);
	if (!json_is_string(v))
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT, "%s: `%s` must be a string",
				  tool, key);
	*s = json_string_value(v);
	*n = json_string_length(v);
	return SG_OK;
}

/* `path`: required, not blank, as the host's ValidateInput has it. */
static sg_err path_arg(struct sg_tool_call *t, const char *tool, const char **path)
{
	sg_err rc = sg_arg_str(t->a, "path", false, path, &t->op->err);

	if (!rc && (!*path || !(*path)[strspn(*path, " \t\r\n")]))
		rc = sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT, "%s requires path", tool);
	return rc;
}

/* The result whose one text part is the helper's view. */
static sg_err view_result(struct sg_tool_call *t, json_t *reply, json_t **result)
{
	json_t *view = json_object_get(reply, "view");

	if (!json_is_object(view))
		return sg_err_set(&t->op->err, SG_E_INTERNAL, "sg-helper gave %s no view",
				  t->op->tool);
	*result = sg_tool_result(json_incref(view), NULL);
	return SG_OK;
}

/*
 * The host's overwrite_policy, trimmed and lower-cased as it reads it;
 * an unknown word is left for the helper to refuse in the host's words
 * (the host refuses it only when the file exists).
 */
static void policy_word(const char *in, char *out, size_t cap)
{
	size_t n = 0;

	in += strspn(in, " \t\r\n");
	for (; *in && n + 1 < cap; in++)
		out[n++] = (char)(*in >= 'A' && *in <= 'Z' ? *in + 32 : *in);
	while (n && strchr(" \t\r\n", out[n - 1]))
		n--;
	out[n] = '\0';
}

sg_err sg_tool_write_file(struct sg_tool_call *t, json_t **result)
{
	const char *path = NULL, *content = NULL, *policy = NULL;
	char word[64] = "";
	size_t n = 0;
	bool create_only = false;
	json_t *reply = NULL;
	sg_err rc;

	*result = NULL;
	rc = path_arg(t, "write_file", &path);
	if (!rc)
		rc = text_arg(t, "write_file", "content", &content, &n);
	if (!rc)
		rc = sg_arg_bool(t->a, "create_only", false, &create_only, &t->op->err);
	if (!rc)
		rc = sg_arg_str(t->a, "overwrite_policy", false, &policy, &t->op->err);
	if (rc)
		return rc;
	if (policy)
		policy_word(policy, word, sizeof(word));
	{
		const char *argv[8] = { "write" };
		int k = 1;

		if (*word) {
			argv[k++] = "--overwrite-policy";
			argv[k++] = word;
		}
		if (create_only)
			argv[k++] = "--create-only";
		argv[k++] = "--";
		argv[k] = path;
		rc = sg_tool_fs(t, argv, content, n, &reply);
	}
	if (!rc)
		rc = view_result(t, reply, result);
	json_decref(reply);
	return rc;
}

sg_err sg_tool_edit_file(struct sg_tool_call *t, json_t **result)
{
	const char *path = NULL, *old = NULL, *repl = NULL;
	size_t oldn = 0, repln = 0;
	bool all = false;
	struct sg_buf in = SG_BUF_INIT(2 * SG_MAX_FRAME);
	json_t *reply = NULL;
	sg_err rc;

	*result = NULL;
	rc = path_arg(t, "edit_file", &path);
	if (!rc)
		rc = text_arg(t, "edit_file", "old_text", &old, &oldn);
	if (!rc)
		rc = text_arg(t, "edit_file", "new_text", &repl, &repln);
	if (!rc)
		rc = sg_arg_bool(t->a, "replace_all", false, &all, &t->op->err);
	if (!rc && !oldn)
		rc = sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT, "edit_file requires old_text");
	if (!rc && oldn == repln && memcmp(old, repl, oldn) == 0)
		rc = sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				"old_text and new_text are identical, no changes needed");
	/* The helper's stdin: old_text's length, a newline, both texts. */
	if (!rc && (sg_buf_addf(&in, "%zu\n", oldn) || sg_buf_add(&in, old, oldn) ||
		    sg_buf_add(&in, repl, repln)))
		rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
	if (!rc) {
		const char *argv[] = { "edit", all ? "--all" : "--", all ? "--" : path,
				       all ? path : NULL, NULL };

		rc = sg_tool_fs(t, argv, in.p, in.len, &reply);
	}
	if (!rc)
		rc = view_result(t, reply, result);
	json_decref(reply);
	sg_buf_release(&in);
	return rc;
}
