/*
 * tools.c - the execute method: the host's tool catalogue, written once.
 *
 * Every tool is a row of one table: its name, whether it writes (refused
 * in read_only mode, with the host's own sentence), and the function that
 * runs it (tool.h).  This file reads the request the way the host's worker
 * does (`call.name`, `call.arguments` as a JSON string, `actor`,
 * `permission_mode`, `git_attribution_enabled`) and builds what every tool
 * shares: ToolResults, helper steps, commands.
 */
#define _GNU_SOURCE /* asprintf, vasprintf, memmem */
#include "gateway/tools/tool.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/exec.h"
#include "helper/fs.h"
#include "core/json.h"
#include "base/limits.h"

struct tool {
	const char *name;
	bool writes;
	sg_err (*run)(struct sg_tool_call *t, json_t **result);
};

static const struct tool catalogue[] = {
	{ "read_file", false, sg_tool_read_file },
	{ "write_file", true, sg_tool_write_file },
	{ "edit_file", true, sg_tool_edit_file },
	{ "apply_patch", true, sg_tool_apply_patch },
	{ "list_files", false, sg_tool_list_files },
	{ "grep", false, sg_tool_grep },
	{ "glob", false, sg_tool_glob },
	{ "bash", false, sg_tool_bash },
	{ "process", false, sg_tool_process },
	{ "git", false, sg_tool_git },
	{ "present_artifact", false, sg_tool_present_artifact },
};

/*
 * Whether this call changes anything: a writing tool does, except
 * apply_patch's dry run, which the host's worker lets a read-only agent
 * make (it validates the patch and writes nothing); the process tool's
 * write, stop and update do, as on the host.
 */
static bool call_writes(const struct tool *tool, json_t *a)
{
	const char *action = json_string_value(json_object_get(a, "action"));

	if (tool->run == sg_tool_apply_patch)
		return !json_is_true(json_object_get(a, "dry_run")) &&
		       !json_is_true(json_object_get(a, "dryRun"));
	/* The process tool changes state but for reading and listing. */
	if (tool->run == sg_tool_process)
		return !action || (strcmp(action, "read") != 0 && strcmp(action, "list") != 0);
	return tool->writes;
}

/* The host worker's refusal of a mutating tool, word for word in meaning. */
#define READ_ONLY_REFUSAL "this agent is read-only; it may observe but not modify"

json_t *sg_tools_names(void)
{
	json_t *names = json_array();

	for (size_t i = 0; i < sizeof(catalogue) / sizeof(catalogue[0]); i++)
		json_array_append_new(names, json_string(catalogue[i].name));
	return names;
}

/* ---- paging ---- */

char *sg_tool_page_revision(const char *tree, const char *result)
{
	char *r;

	if (asprintf(&r, "%s%sresult:%s", tree ? tree : "", tree && *tree ? ";" : "",
		     result) < 0)
		return NULL;
	return r;
}

/*
 * Where a revision's "result:" part starts, NULL when it has none; *tree:
 * a tree's part precedes it.  Neither tree form ("fs:worktree:<hex>",
 * "git:<HEAD>:worktree:<digest>") holds ";result:", so the first one
 * ends the tree's part.
 */
static const char *page_result(const char *s, size_t n, bool *tree)
{
	const char *sep;

	*tree = !(n >= 7 && memcmp(s, "result:", 7) == 0);
	if (!*tree)
		return s;
	sep = memmem(s, n, ";result:", 8);
	return sep ? sep + 1 : NULL;
}

bool sg_tool_page_current(const char *expected, const char *revision)
{
	size_t n, rn = strlen(revision), lead = strspn(expected, " \t\r\n");
	const char *e, *c;
	bool etree, ctree;

	expected += lead;
	n = strlen(expected);
	while (n && strchr(" \t\r\n", expected[n - 1]))
		n--;
	if (n == rn && memcmp(expected, revision, n) == 0)
		return true;
	e = page_result(expected, n, &etree);
	c = page_result(revision, rn, &ctree);
	if (!e || !c || (size_t)(expected + n - e) != (size_t)(revision + rn - c) ||
	    memcmp(e, c, (size_t)(revision + rn - c)) != 0)
		return false;
	/* Equal results: only two trees both read can still differ. */
	return !etree || !ctree;
}

json_t *sg_tool_page(int64_t offset, int64_t returned, bool more, const char *revision)
{
	json_t *page = json_pack("{s:I, s:I, s:b, s:s}", "offset", (json_int_t)offset,
				 "returned", (json_int_t)returned, "has_more", more,
				 "snapshot_token", revision);

	if (page && more && returned > 0)
		json_object_set_new(page, "next",
				    json_pack("{s:I, s:s}", "offset",
					      (json_int_t)(offset + returned),
					      "expected_revision", revision));
	return page;
}

/* ---- results ---- */

json_t *sg_tool_result_text(const char *text, json_t *structured)
{
	json_t *r = json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", text);

	if (r && structured)
		json_object_set_new(r, "structured_content", structured);
	else
		json_decref(structured);
	return r;
}

json_t *sg_tool_result(json_t *view, json_t *structured)
{
	char *text = view ? json_dumps(view, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_t *r = text ? sg_tool_result_text(text, structured) : NULL;

	if (!text)
		json_decref(structured);
	free(text);
	json_decref(view);
	return r;
}

void sg_tool_mask(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	struct sg_buf b = SG_BUF_INIT(SG_MAX_FRAME);

	if (json_is_string(v) && !sg_fs_redact(json_string_value(v), json_string_length(v), &b) &&
	    (b.len != json_string_length(v) || memcmp(b.p, json_string_value(v), b.len) != 0))
		json_object_set_new(obj, key, json_stringn(b.p, b.len));
	sg_buf_release(&b);
}

sg_err sg_tool_fail(struct sg_tool_call *t, sg_err code, const char *fmt, ...)
{
	va_list ap;
	char *text = NULL;

	va_start(ap, fmt);
	if (vasprintf(&text, fmt, ap) < 0)
		text = NULL;
	va_end(ap);
	free(t->op->fail_text);
	t->op->fail_text = text;
	/* The short form stands when the long one could not be made. */
	return sg_err_set(&t->op->err, code, "%s", text ? text : "the tool failed");
}

/* ---- steps and commands ---- */

sg_err sg_tool_fs(struct sg_tool_call *t, const char *const *argv, const void *in,
		  size_t inlen, json_t **reply)
{
	struct sg_strv full = SG_STRV_INIT;
	const char *te;
	sg_err rc = SG_OK;

	*reply = NULL;
	if (sg_strv_add(&full, "fs") || sg_strv_add(&full, argv[0]) ||
	    (t->mode == SG_CONFINE_NONE && sg_strv_add(&full, "--unconfined")) ||
	    sg_strv_addv(&full, argv + 1))
		rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
	if (!rc)
		rc = sg_envcall(t->s, SG_CALL_ROOTED, sg_strv_get(&full), in, inlen, reply,
				&t->op->cancel, &t->op->err);
	if (!rc)
		sg_tool_revision(t, *reply);
	te = rc ? NULL : json_string_value(json_object_get(*reply, "tool_error"));
	if (te) {
		const char *word = json_string_value(json_object_get(*reply, "code"));
		sg_err code = word ? sg_err_from_word(word) : SG_E_NOT_FOUND;

		rc = sg_tool_fail(t, code == SG_E_INTERNAL ? SG_E_NOT_FOUND : code, "%s", te);
		json_decref(*reply);
		*reply = NULL;
	}
	sg_strv_release(&full);
	return rc;
}

sg_err sg_tool_exec(struct sg_tool_call *t, const char *const *argv, const char *cwd_arg,
		    json_t *env_extra, const char *stdin_data, size_t stdin_len,
		    int64_t timeout_ms, bool merge, struct sg_exec_result *r)
{
	struct sg_session *s = t->s;
	struct sg_strv cmd = SG_STRV_INIT, envp = SG_STRV_INIT;
	char *cwd = NULL;
	sg_err rc;

	rc = sg_envcall_confine(s, t->mode, argv, &cmd, &t->op->err);
	if (!rc)
		rc = sg_envcall_command_env(s, env_extra, &envp, &t->op->err);
	if (!rc && cwd_arg)
		rc = sg_envcall_resolve(s, cwd_arg, false, &cwd, &t->op->cancel,
					&t->op->err);
	if (!rc) {
		struct sg_exec x = {
			.argv = sg_strv_get(&cmd),
			.cwd = cwd ? cwd : s->root,
			.envp = sg_strv_get(&envp),
			.stdin_data = stdin_data,
			.stdin_len = stdin_len,
			.timeout_ms = timeout_ms,
			.max_output = r->out.max,
			.confine = t->mode,
			.flags = merge ? SG_EXEC_MERGE : 0,
		};

		rc = s->env->ad->exec(s->env, &x, r, &t->op->cancel, &t->op->err);
	}
	free(cwd);
	sg_strv_release(&cmd);
	sg_strv_release(&envp);
	return rc;
}

/* ---- reading the request ---- */

/* A key of `call` in either spelling: the host's JSON tags, or an older
 * host's Go field names (`Name`, `Arguments`). */
static json_t *call_key(json_t *call, const char *lower, const char *upper)
{
	json_t *v = json_object_get(call, lower);

	return v ? v : json_object_get(call, upper);
}

/* The tool's arguments: a JSON string holding an object ("" is {}). */
static sg_err parse_arguments(struct sg_tool_call *t, json_t *args)
{
	struct sg_errinfo why = { 0 };
	sg_err rc;

	if (!args || json_is_null(args) || (json_is_string(args) && !json_string_length(args))) {
		t->a = json_object();
		return SG_OK;
	}
	if (!json_is_string(args))
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "`call.arguments` must be a string holding a JSON object");
	rc = sg_json_parse(json_string_value(args), json_string_length(args),
			   SG_JSON_REJECT_DUPLICATES, &t->a, &why);
	if (!rc && json_is_object(t->a))
		return SG_OK;
	json_decref(t->a);
	t->a = NULL;
	if (rc == SG_E_INTERNAL)
		return sg_err_set(&t->op->err, rc, "out of memory");
	return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
			  "invalid tool arguments: not a JSON object%s%s", rc ? ": " : "",
			  rc ? why.msg : "");
}

/*
 * The checks every execute passes before anything runs, here or at a
 * peer: the tool's name, the actor, the permission mode, the arguments
 * (t->a, new), and what read_only refuses.
 */
static sg_err precheck(struct sg_tool_call *t, const struct tool **tool)
{
	struct sg_op *op = t->op;
	json_t *call = json_object_get(op->data, "call");
	const char *name = json_string_value(call_key(call, "name", "Name"));
	sg_err rc;

	*tool = NULL;
	if (!json_is_object(call) || !name || !*name)
		return sg_err_set(&op->err, SG_E_INVALID_ARGUMENT,
				  "`call.name` must name a tool");
	for (size_t i = 0; i < sizeof(catalogue) / sizeof(catalogue[0]); i++)
		if (strcmp(catalogue[i].name, name) == 0)
			*tool = &catalogue[i];
	if (!*tool)
		return sg_err_set(&op->err, SG_E_INVALID_ARGUMENT,
				  "tool \"%.64s\" is not an execution environment tool", name);
	op->tool = (*tool)->name;
	rc = sg_arg_str(op->data, "actor", false, &t->actor, &op->err);
	if (!rc && (!t->actor || !*t->actor))
		rc = sg_err_set(&op->err, SG_E_INVALID_ARGUMENT, "execution actor is required");
	if (!rc)
		rc = sg_arg_mode(op->data, &t->mode, &op->err);
	if (!rc)
		rc = sg_arg_bool(op->data, "git_attribution_enabled", false, &t->git_attribution,
				 &op->err);
	if (!rc)
		rc = parse_arguments(t, call_key(call, "arguments", "Arguments"));
	if (rc)
		return rc;
	t->main_agent = t->s->session_id && strcmp(t->actor, t->s->session_id) == 0;
	if (t->mode != SG_CONFINE_READ_ONLY)
		return SG_OK;
	if (call_writes(*tool, t->a))
		return sg_err_set(&op->err, SG_E_PERMISSION, READ_ONLY_REFUSAL);
	if ((*tool)->run == sg_tool_git)
		return sg_tool_git_read_only(t);
	return SG_OK;
}

sg_err sg_tools_precheck(struct sg_op *op)
{
	struct sg_tool_call t = { .op = op, .s = op->s };
	const struct tool *tool;
	sg_err rc = precheck(&t, &tool);

	json_decref(t.a);
	return rc;
}

sg_err sg_tools_execute(struct sg_op *op, json_t **out)
{
	struct sg_tool_call t = { .op = op, .s = op->s };
	const struct tool *tool = NULL;
	sg_err rc;

	*out = NULL;
	rc = precheck(&t, &tool);
	if (rc)
		goto out;
	if (tool->writes && call_writes(tool, t.a) && t.s->profile->mount_read_only)
		rc = sg_err_set(&op->err, SG_E_PERMISSION,
				"%s writes, and the workspace is mounted read-only "
				"(mount_read_only)", tool->name);
	else
		rc = tool->run(&t, out);
	if (!rc && !*out && !op->raw_reply)
		rc = sg_err_set(&op->err, SG_E_INTERNAL, "out of memory");
	if (!rc && *out)
		op->tool_failed = json_is_true(json_object_get(*out, "is_error"));
out:
	json_decref(t.a);
	return rc;
}
