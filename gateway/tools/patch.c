/*
 * patch.c - apply_patch: the host's arguments, one sg-helper step
 * (`fs patch`, the patch on stdin), its summary and files as the result.
 *
 * The whole patch is parsed, planned against the files as they are,
 * and committed (or rolled back) inside that one step, so a remote
 * environment sees one round trip and no window where half a patch
 * shows.  The result is the host's: one text part "Success. Updated the
 * following files:\nA …" (or the dry run's header) and
 * structured_content {"files":[{path, action, move_path?, diff}]}.
 *
 * then_run (the host's apply-then-run fusion) is refused: its command
 * schema and result shape are the host's own (tool_apply_patch_fusion.go)
 * and are not reproduced here; the model can run the command with bash.
 */
#include "gateway/tools/tool.h"

#include <string.h>

/* The host's accepted spellings, in the order it tries them. */
static const char *const patch_keys[] = { "patchText", "patch_text", "patch", NULL };

/* The first of patch_keys that holds more than white space. */
static sg_err patch_text(struct sg_tool_call *t, const char **s, size_t *n)
{
	*s = NULL;
	*n = 0;
	for (int i = 0; patch_keys[i]; i++) {
		json_t *v = json_object_get(t->a, patch_keys[i]);

		if (v && !json_is_null(v) && !json_is_string(v))
			return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
					  "apply_patch: `%s` must be a string", patch_keys[i]);
		if (v && json_string_value(v)[strspn(json_string_value(v), " \t\r\n")]) {
			*s = json_string_value(v);
			*n = json_string_length(v);
			return SG_OK;
		}
	}
	return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT, "apply_patch requires patchText");
}

sg_err sg_tool_apply_patch(struct sg_tool_call *t, json_t **result)
{
	const char *text = NULL;
	size_t n = 0;
	bool dry = false, dry2 = false;
	json_t *reply = NULL, *then = json_object_get(t->a, "then_run");
	sg_err rc;

	*result = NULL;
	rc = patch_text(t, &text, &n);
	if (!rc)
		rc = sg_arg_bool(t->a, "dry_run", false, &dry, &t->op->err);
	if (!rc)
		rc = sg_arg_bool(t->a, "dryRun", false, &dry2, &t->op->err);
	if (!rc && then && !json_is_null(then))
		rc = sg_err_set(&t->op->err, SG_E_UNSUPPORTED,
				"apply_patch then_run is not available in this environment; "
				"apply the patch without it, then run the command with bash");
	if (!rc) {
		const char *argv[] = { "patch", dry || dry2 ? "--dry-run" : NULL, NULL };

		rc = sg_tool_fs(t, argv, text, n, &reply);
	}
	if (!rc) {
		const char *summary = json_string_value(json_object_get(reply, "text"));
		json_t *files = json_object_get(reply, "files");

		if (!summary || !json_is_array(files))
			rc = sg_err_set(&t->op->err, SG_E_INTERNAL,
					"sg-helper gave apply_patch no summary");
		else
			*result = sg_tool_result_text(summary,
						      json_pack("{s:O}", "files", files));
	}
	json_decref(reply);
	return rc;
}
