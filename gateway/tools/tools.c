/*
 * tools.c - the execute method: the workspace tool catalogue, written once.
 *
 * Every tool is a row of one table: its name, whether it writes (refused in
 * read_only mode), and a function that validates the tool's arguments and
 * turns them into one sg-helper step or one command in the environment.
 * Path containment is not done here: sg-helper resolves every path inside
 * the environment, in every permission mode.
 *
 * Two kinds of failure stay apart (protocol section 3): a request that
 * cannot run (bad arguments, permission, path escape) is an error reply; a
 * tool that ran and failed is a ToolResult with is_error.
 */
#include "../session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../adapters/exec.h"
#include "../../adapters/json.h"
#include "base/jw.h"
#include "base/limits.h"

struct tctx {
	struct sg_op *op;
	struct sg_session *s;
	enum sg_confine mode;
	json_t *a; /* the tool's arguments object */
};

struct tool {
	const char *name;
	bool writes;
	sg_err (*run)(struct tctx *t, json_t **result);
};

static json_t *tool_result(json_t *content, bool is_error, json_t *metadata)
{
	return json_pack("{s:o, s:b, s:o}", "content", content ? content : json_string(""),
			 "is_error", is_error, "metadata",
			 metadata ? metadata : json_object());
}

/*
 * A helper reply as a ToolResult: {"ok":false,"tool_error":...} is a failed
 * tool; otherwise `content` (or the summary when there is none) is the text
 * and every other field is metadata.
 */
static json_t *from_reply(json_t *reply, const char *fallback)
{
	json_t *te = json_object_get(reply, "tool_error");
	json_t *content, *meta;

	if (json_is_string(te))
		return tool_result(json_incref(te), true, NULL);
	/* Shallow: the content (up to megabytes) is shared, never copied. */
	meta = json_object();
	{
		const char *k;
		json_t *v;

		json_object_foreach(reply, k, v)
			if (strcmp(k, "ok") != 0 && strcmp(k, "content") != 0)
				json_object_set(meta, k, v);
	}
	content = json_incref(json_object_get(reply, "content"));
	if (!content)
		content = json_string(fallback ? fallback : "done");
	return tool_result(content, false, meta);
}

#define ARG_STR(key, req, var)                                              \
	do {                                                                \
		rc = sg_arg_str(t->a, key, req, &var, &t->op->err);         \
		if (rc)                                                     \
			return rc;                                          \
	} while (0)

static sg_err add_int_opt(struct sg_strv *av, json_t *a, const char *key,
			  const char *opt, int64_t min, int64_t max,
			  struct sg_errinfo *err)
{
	int64_t v;
	sg_err rc = sg_arg_int(a, key, -1, min, max, &v, err);

	if (rc || v < 0 || !json_object_get(a, key) ||
	    json_is_null(json_object_get(a, key)))
		return rc;
	rc = sg_strv_add(av, opt);
	if (!rc)
		rc = sg_strv_addf(av, "%lld", (long long)v);
	return rc;
}

static sg_err add_flag_opt(struct sg_strv *av, json_t *a, const char *key,
			   const char *opt, struct sg_errinfo *err)
{
	bool v;
	sg_err rc = sg_arg_bool(a, key, false, &v, err);

	return rc || !v ? rc : sg_strv_add(av, opt);
}

static sg_err add_str_opt(struct sg_strv *av, json_t *a, const char *key,
			  const char *opt, struct sg_errinfo *err)
{
	const char *v = NULL;
	sg_err rc = sg_arg_str(a, key, false, &v, err);

	if (rc || !v)
		return rc;
	rc = sg_strv_add(av, opt);
	return rc ? rc : sg_strv_add(av, v);
}

static sg_err encoding_is_base64(struct tctx *t, bool *out)
{
	const char *enc = NULL;
	sg_err rc = sg_arg_str(t->a, "encoding", false, &enc, &t->op->err);

	*out = false;
	if (rc || !enc)
		return rc;
	if (strcmp(enc, "base64") == 0)
		*out = true;
	else if (strcmp(enc, "utf8") != 0 && strcmp(enc, "utf-8") != 0)
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "`encoding` must be \"utf8\" or \"base64\"");
	return SG_OK;
}

/*
 * A string of sg-helper's reply, or "?": the reply comes from inside the
 * environment, and %s of NULL is undefined.
 */
static const char *reply_str(json_t *reply, const char *key)
{
	const char *v = json_string_value(json_object_get(reply, key));

	return v ? v : "?";
}

/*
 * The sentence a tool's result carries when sg-helper's reply has no
 * `content` of its own: what happened, for the model to read.
 */
static json_t *summary(const char *sub, json_t *reply)
{
	const char *path = json_string_value(json_object_get(reply, "path"));
	json_int_t n;

	if (!path || !*path)
		path = ".";
	if (strcmp(sub, "write") == 0) {
		n = json_integer_value(json_object_get(reply, "bytes_written"));
		return json_sprintf("wrote %lld bytes to %s", (long long)n, path);
	}
	if (strcmp(sub, "edit") == 0) {
		n = json_integer_value(json_object_get(reply, "replacements"));
		return json_sprintf("made %lld replacement%s in %s", (long long)n,
				    n == 1 ? "" : "s", path);
	}
	if (strcmp(sub, "stat") == 0)
		return json_sprintf("%s: %s, %lld bytes, mode %s, modified %s", path,
				    reply_str(reply, "type"),
				    (long long)json_integer_value(json_object_get(reply, "size")),
				    reply_str(reply, "mode"), reply_str(reply, "mtime"));
	if (strcmp(sub, "delete") == 0)
		return json_sprintf("deleted %s", reply_str(reply, "deleted"));
	if (strcmp(sub, "move") == 0)
		return json_sprintf("moved %s to %s", reply_str(reply, "from"),
				    reply_str(reply, "to"));
	if (strcmp(sub, "mkdir") == 0)
		return json_sprintf(json_is_true(json_object_get(reply, "created"))
					    ? "created %s" : "%s already exists", path);
	return json_string(sub);
}

/*
 * Run one of the simple fs tools: the sub-command, the options the caller
 * put in av, then `--` and the positional arguments named by `keys` (so a
 * path that starts with "--" is never taken for an option).  A key that
 * starts with '?' is optional and defaults to ".".
 */
static sg_err fs_tool(struct tctx *t, const char *sub, const char *const *keys,
		      struct sg_strv *av, const void *in, size_t inlen,
		      json_t **result)
{
	struct sg_strv full = SG_STRV_INIT;
	json_t *reply = NULL;
	sg_err rc = sg_strv_add(&full, "fs");

	if (!rc)
		rc = sg_strv_add(&full, sub);
	if (!rc && av)
		rc = sg_strv_addv(&full, sg_strv_get(av));
	if (!rc)
		rc = sg_strv_add(&full, "--");
	for (size_t i = 0; !rc && keys && keys[i]; i++) {
		bool optional = keys[i][0] == '?';
		const char *v = optional ? "." : NULL;

		rc = sg_arg_str(t->a, keys[i] + optional, !optional, &v, &t->op->err);
		if (!rc)
			rc = sg_strv_add(&full, v);
	}
	if (rc) {
		if (!t->op->err.code)
			sg_err_set(&t->op->err, rc, "out of memory");
		goto out;
	}
	rc = sg_envcall(t->s, SG_CALL_ROOTED, sg_strv_get(&full), in, inlen, &reply,
			&t->op->cancel, &t->op->err);
	if (!rc) {
		*result = from_reply(reply, NULL);
		if (!json_object_get(reply, "content") &&
		    !json_object_get(reply, "tool_error"))
			json_object_set_new(*result, "content", summary(sub, reply));
	}
out:
	json_decref(reply);
	sg_strv_release(&full);
	return rc;
}

/*
 * read_file's text replies skip a parse and a re-encoding of the content:
 * sg-helper sends the text raw after its JSON line (`--raw`), and the
 * reply frame is built here as text, the content escaped once.  A megabyte
 * through jansson twice costs tens of milliseconds; this costs one pass.
 */
static sg_err read_text_raw(struct tctx *t, struct sg_strv *av, json_t **result)
{
	/*
	 * The helper was asked for at most tool_output bytes and adds a
	 * truncation notice; one that sends more is not ours to pass on.
	 * The frame leaves room for its newline, or the writer would drop
	 * it and the request would get no reply at all.
	 */
	struct sg_buf tail = SG_BUF_INIT(t->s->tool_output + SG_KiB);
	struct sg_buf frame = SG_BUF_INIT(SG_MAX_FRAME - 1);
	struct sg_strv full = SG_STRV_INIT;
	const char *path = NULL;
	char *idtext = NULL, *meta = NULL;
	json_t *reply = NULL, *m = NULL, *v;
	const char *k;
	sg_err rc = sg_arg_str(t->a, "path", true, &path, &t->op->err);

	if (!rc && (sg_strv_addv(&full, (const char *[]){ "fs", "read", "--raw", NULL }) ||
		    sg_strv_addv(&full, sg_strv_get(av)) ||
		    sg_strv_addv(&full, (const char *[]){ "--", path, NULL })))
		rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
	if (!rc)
		rc = sg_envcall_tail(t->s, SG_CALL_ROOTED, sg_strv_get(&full), &reply, &tail,
				     &t->op->cancel, &t->op->err);
	if (rc)
		goto out;
	if (json_is_string(json_object_get(reply, "tool_error"))) {
		*result = from_reply(reply, NULL);
		goto out;
	}
	m = json_object();
	json_object_foreach(reply, k, v)
		if (strcmp(k, "ok") != 0 && strcmp(k, "content_bytes") != 0)
			json_object_set(m, k, v);
	idtext = json_dumps(t->op->id, JSON_COMPACT | JSON_ENCODE_ANY);
	meta = json_dumps(m, JSON_COMPACT);
	if (!idtext || !meta || sg_buf_addf(&frame, "{\"id\":%s,\"data\":{\"content\":", idtext) ||
	    sg_jw_str(&frame, tail.p, tail.len) ||
	    sg_buf_addf(&frame, ",\"is_error\":false,\"metadata\":%s}}", meta)) {
		rc = sg_err_set(&t->op->err, SG_E_TOO_LARGE,
				"the file's text does not fit in a reply frame");
		goto out;
	}
	t->op->raw_reply = sg_buf_take(&frame, &t->op->raw_len);
	*result = NULL;
out:
	free(idtext);
	free(meta);
	json_decref(m);
	json_decref(reply);
	sg_buf_release(&tail);
	sg_buf_release(&frame);
	sg_strv_release(&full);
	return rc;
}

static sg_err t_read_file(struct tctx *t, json_t **result)
{
	struct sg_strv av = SG_STRV_INIT;
	bool b64;
	sg_err rc = encoding_is_base64(t, &b64);

	if (!rc)
		rc = add_int_opt(&av, t->a, "offset", "--offset", 1, INT64_MAX / 2, &t->op->err);
	if (!rc)
		rc = add_int_opt(&av, t->a, "limit", "--limit", 1, INT64_MAX / 2, &t->op->err);
	if (!rc && b64)
		rc = sg_strv_add(&av, "--base64");
	if (!rc)
		rc = sg_strv_add(&av, "--max");
	if (!rc)
		rc = sg_strv_addf(&av, "%zu", t->s->tool_output);
	if (!rc && b64)
		rc = fs_tool(t, "read", (const char *[]){ "path", NULL }, &av, NULL, 0, result);
	else if (!rc)
		rc = read_text_raw(t, &av, result);
	sg_strv_release(&av);
	return rc;
}

static sg_err check_mode(struct tctx *t, const char *mode)
{
	size_t n = mode ? strlen(mode) : 0;

	if (!mode)
		return SG_OK;
	if (n < 1 || n > 4 || strspn(mode, "01234567") != n)
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "`mode` must be an octal string such as \"0644\"");
	/*
	 * A setuid or setgid file written where sandgate runs as root is a
	 * root program for whoever reaches the workspace (docs/security.md).
	 */
	if (n == 4 && (mode[0] - '0') & 06)
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "`mode` %s sets the setuid or setgid bit, which write_file never sets",
				  mode);
	return SG_OK;
}

static sg_err t_write_file(struct tctx *t, json_t **result)
{
	struct sg_strv av = SG_STRV_INIT;
	const char *mode = NULL;
	json_t *content = json_object_get(t->a, "content");
	bool b64;
	sg_err rc = encoding_is_base64(t, &b64);

	if (!rc && !json_is_string(content))
		rc = sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				"`content` is required and must be a string");
	if (!rc)
		rc = sg_arg_str(t->a, "mode", false, &mode, &t->op->err);
	if (!rc)
		rc = check_mode(t, mode);
	if (!rc && mode)
		rc = sg_strv_add(&av, "--mode");
	if (!rc && mode)
		rc = sg_strv_add(&av, mode);
	if (!rc && b64)
		rc = sg_strv_add(&av, "--base64");
	if (!rc)
		rc = fs_tool(t, "write", (const char *[]){ "path", NULL }, &av,
			     json_string_value(content), json_string_length(content),
			     result);
	sg_strv_release(&av);
	return rc;
}

static sg_err t_edit_file(struct tctx *t, json_t **result)
{
	struct sg_strv av = SG_STRV_INIT;
	struct sg_buf in = SG_BUF_INIT(SG_MAX_FRAME);
	json_t *old = json_object_get(t->a, "old_string");
	json_t *new = json_object_get(t->a, "new_string");
	sg_err rc = SG_OK;

	if (!json_is_string(old) || !json_is_string(new))
		rc = sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				"`old_string` and `new_string` are required strings");
	if (!rc)
		rc = add_flag_opt(&av, t->a, "replace_all", "--all", &t->op->err);
	if (!rc && (sg_buf_addf(&in, "%zu\n", json_string_length(old)) ||
		    sg_buf_add(&in, json_string_value(old), json_string_length(old)) ||
		    sg_buf_add(&in, json_string_value(new), json_string_length(new))))
		rc = sg_err_set(&t->op->err, SG_E_TOO_LARGE, "the edit is too large");
	if (!rc)
		rc = fs_tool(t, "edit", (const char *[]){ "path", NULL }, &av,
			     in.p, in.len, result);
	sg_buf_release(&in);
	sg_strv_release(&av);
	return rc;
}

static sg_err t_list_dir(struct tctx *t, json_t **result)
{
	struct sg_strv av = SG_STRV_INIT;
	sg_err rc = add_int_opt(&av, t->a, "depth", "--depth", 1, 64, &t->op->err);

	if (!rc)
		rc = add_flag_opt(&av, t->a, "include_hidden", "--hidden", &t->op->err);
	if (!rc)
		rc = fs_tool(t, "list", (const char *[]){ "?path", NULL }, &av, NULL, 0,
			     result);
	sg_strv_release(&av);
	return rc;
}

static sg_err t_glob(struct tctx *t, json_t **result)
{
	struct sg_strv av = SG_STRV_INIT;
	sg_err rc = add_str_opt(&av, t->a, "path", "--path", &t->op->err);

	if (!rc)
		rc = fs_tool(t, "glob", (const char *[]){ "pattern", NULL }, &av,
			     NULL, 0, result);
	sg_strv_release(&av);
	return rc;
}

static sg_err t_grep(struct tctx *t, json_t **result)
{
	struct sg_strv av = SG_STRV_INIT;
	sg_err rc = add_str_opt(&av, t->a, "path", "--path", &t->op->err);

	if (!rc)
		rc = add_str_opt(&av, t->a, "glob", "--glob", &t->op->err);
	if (!rc)
		rc = add_flag_opt(&av, t->a, "ignore_case", "--ignore-case", &t->op->err);
	if (!rc)
		rc = add_int_opt(&av, t->a, "max_results", "--max", 1, SG_LIST_MAX, &t->op->err);
	if (!rc)
		rc = fs_tool(t, "grep", (const char *[]){ "pattern", NULL }, &av,
			     NULL, 0, result);
	sg_strv_release(&av);
	return rc;
}

static sg_err t_stat_path(struct tctx *t, json_t **result)
{
	return fs_tool(t, "stat", (const char *[]){ "path", NULL }, NULL, NULL, 0, result);
}

static sg_err t_delete_path(struct tctx *t, json_t **result)
{
	struct sg_strv av = SG_STRV_INIT;
	sg_err rc = add_flag_opt(&av, t->a, "recursive", "--recursive", &t->op->err);

	if (!rc)
		rc = fs_tool(t, "delete", (const char *[]){ "path", NULL }, &av,
			     NULL, 0, result);
	sg_strv_release(&av);
	return rc;
}

static sg_err t_move_path(struct tctx *t, json_t **result)
{
	struct sg_strv av = SG_STRV_INIT;
	sg_err rc = add_flag_opt(&av, t->a, "overwrite", "--overwrite", &t->op->err);

	if (!rc)
		rc = fs_tool(t, "move", (const char *[]){ "path", "destination", NULL },
			     &av, NULL, 0, result);
	sg_strv_release(&av);
	return rc;
}

static sg_err t_make_dir(struct tctx *t, json_t **result)
{
	return fs_tool(t, "mkdir", (const char *[]){ "path", NULL }, NULL, NULL, 0, result);
}

static sg_err t_present_artifact(struct tctx *t, json_t **result)
{
	const char *path = NULL;
	json_t *exp = NULL;
	sg_err rc = sg_arg_str(t->a, "path", true, &path, &t->op->err);
	char text[512];

	if (!rc)
		rc = sg_export_path(t->s, path, &exp, &t->op->cancel, &t->op->err);
	if (rc)
		return rc;
	snprintf(text, sizeof(text), "%s is ready for the host (%lld bytes)",
		 json_string_value(json_object_get(exp, "name")),
		 (long long)json_integer_value(json_object_get(exp, "size")));
	*result = tool_result(json_string(text), false,
			      json_pack("{s:o}", "export", exp));
	return SG_OK;
}

/* ---- commands ---- */

/*
 * Run argv in the environment as run_command and git do: confined for the
 * permission mode, with the command environment, output bounded (r,
 * initialised by the caller) and stderr merged into it when merge is set.
 */
static sg_err exec_argv(struct tctx *t, const char *const *argv, const char *cwd_arg,
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

/*
 * exec_argv as a ToolResult: exit code, signal, time-out and truncation;
 * a non-zero exit is a failed tool, not an error.
 */
static sg_err run_argv(struct tctx *t, const char *const *argv,
		       const char *cwd_arg, json_t *env_extra,
		       const char *stdin_data, size_t stdin_len,
		       int64_t timeout_ms, json_t **result)
{
	struct sg_session *s = t->s;
	struct sg_exec_result r;
	struct sg_buf text = SG_BUF_INIT(s->tool_output + SG_KiB);
	sg_err rc;

	sg_exec_result_init(&r, s->tool_output);
	r.keep_tail = true;
	rc = exec_argv(t, argv, cwd_arg, env_extra, stdin_data, stdin_len, timeout_ms, true,
		       &r);
	if (!rc) {
		bool failed = r.exit_code != 0 || r.signal || r.timed_out;
		json_t *meta = json_pack(
			"{s:o, s:o, s:b, s:b, s:I, s:I}", "exit_code",
			r.signal ? json_null() : json_integer(r.exit_code), "signal",
			r.signal ? json_string(sg_exec_signame(r.signal)) : json_null(),
			"timed_out", r.timed_out, "truncated", r.truncated,
			"output_bytes", (json_int_t)(r.truncated ? r.total : r.out.len),
			"duration_ms", (json_int_t)r.duration_ms);

		/* Head, a marker for the omitted middle, tail (exec.h). */
		if (sg_exec_text(&r, &text))
			rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
		if (!rc)
			*result = tool_result(sg_json_text(text.p, text.len), failed, meta);
		else
			json_decref(meta);
	}
	sg_buf_release(&text);
	sg_exec_result_release(&r);
	return rc;
}

static sg_err strings_to_strv(json_t *arr, struct sg_strv *out)
{
	json_t *e;
	size_t i;

	json_array_foreach(arr, i, e) {
		if (sg_strv_add(out, json_string_value(e)))
			return SG_E_INTERNAL;
	}
	return SG_OK;
}

static sg_err t_run_command(struct tctx *t, json_t **result)
{
	const char *command = NULL, *cwd = NULL, *in = NULL;
	json_t *argv = NULL, *env = NULL;
	struct sg_strv av = SG_STRV_INIT;
	int64_t timeout;
	sg_err rc;

	ARG_STR("command", false, command);
	ARG_STR("cwd", false, cwd);
	ARG_STR("stdin", false, in);
	rc = sg_arg_strings(t->a, "argv", &argv, &t->op->err);
	if (!rc)
		rc = sg_arg_env(t->a, "env", &env, &t->op->err);
	if (!rc)
		rc = sg_arg_int(t->a, "timeout_ms", SG_COMMAND_TIMEOUT_MS, 1,
				INT64_C(86400000), &timeout, &t->op->err);
	if (rc)
		return rc;
	if (!command == !argv || (argv && json_array_size(argv) == 0))
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "give either `command` (a shell string) or `argv` (a non-empty array)");
	if (command)
		rc = sg_strv_addv(&av, (const char *[]){ "/bin/sh", "-c", command, NULL });
	else
		rc = strings_to_strv(argv, &av);
	if (!rc)
		rc = run_argv(t, sg_strv_get(&av), cwd, env, in, in ? strlen(in) : 0,
			      timeout, result);
	sg_strv_release(&av);
	return rc;
}

/* Whether a is one of list's options; an entry ending in '*' is a prefix. */
static bool git_opt_in(const char *a, const char *const *list)
{
	for (size_t i = 0; list[i]; i++) {
		size_t n = strlen(list[i]);

		if (list[i][n - 1] == '*' ? strncmp(a, list[i], n - 1) == 0
					  : strcmp(a, list[i]) == 0)
			return true;
	}
	return false;
}

/*
 * Whether every option in args[from..] is one of opts.  *words counts the
 * arguments that are not options (names, patterns, values); *lists says
 * whether one of `listing`, the options that put the subcommand in its
 * listing mode, appeared.
 */
static bool git_opts_only(json_t *args, size_t from, const char *const *opts,
			  const char *const *listing, size_t *words, bool *lists)
{
	*words = 0;
	*lists = false;
	for (size_t i = from; i < json_array_size(args); i++) {
		const char *a = json_string_value(json_array_get(args, i));

		if (a[0] != '-' || a[1] == '\0') {
			(*words)++;
			continue;
		}
		if (!git_opt_in(a, opts))
			return false;
		*lists |= git_opt_in(a, listing);
	}
	return true;
}

/*
 * Whether a `git grep` command line has -O / --open-files-in-pager, which
 * hands the matching files to a program the caller names (given the ELF
 * interpreter, it runs a workspace file).  git's option parser takes
 * short options bundled (-nO<prog>), long ones abbreviated (--open=), and
 * the value of -e, -f, -m and -A/-B/-C in the rest of a bundle or the next
 * argument, which is a pattern or a number, never an option.
 */
static bool git_grep_opens_pager(json_t *args, size_t sub)
{
	for (size_t i = sub + 1; i < json_array_size(args); i++) {
		const char *a = json_string_value(json_array_get(args, i));
		size_t n = strcspn(a, "=");

		if (strcmp(a, "--") == 0)
			return false;
		if (a[0] != '-' || a[1] == '\0')
			continue;
		if (a[1] == '-') {
			if (n > 2 && n - 2 <= strlen("open-files-in-pager") &&
			    strncmp(a + 2, "open-files-in-pager", n - 2) == 0)
				return true;
			continue;
		}
		for (const char *c = a + 1; *c; c++) {
			if (*c == 'O')
				return true;
			if (strchr("efmABC", *c)) {
				i += c[1] == '\0';
				break;
			}
		}
	}
	return false;
}

/*
 * NULL when a read_only git may run subcommand args[sub] with the rest of
 * args; otherwise the sentence that says why not.  Most reading
 * subcommands read in every form (their options that hand files to a
 * program are refused in git_read_only).  branch, tag, remote, stash,
 * config and help read only in some forms, and every argument decides:
 * `branch -v -D x` deletes, a bare `stash` stashes, `help log` starts man.
 */
static const char *git_refusal(json_t *args, size_t sub)
{
	static const char *const readers[] = {
		"status", "diff", "log", "show", "blame", "rev-parse", "ls-files",
		"grep", "describe", "shortlog", "cat-file", "ls-tree", "rev-list",
		"whatchanged", "name-rev", "merge-base", "show-ref", "count-objects",
		"annotate", "diff-tree", "diff-files", "diff-index", "for-each-ref",
		"var", "version", NULL
	};
	static const char *const branch_opts[] = {
		"--list", "-l", "-v", "-vv", "--verbose", "-a", "--all", "-r", "--remotes",
		"--show-current", "--contains*", "--no-contains*", "--merged*", "--no-merged*",
		"--points-at*", "--sort=*", "--format=*", "--color", "--color=*", "--no-color",
		"--column", "--column=*", "--no-column", "--abbrev=*", "--no-abbrev", "-i",
		"--ignore-case", "--omit-empty", NULL
	};
	static const char *const branch_listing[] = {
		"--list", "-l", "-v", "-vv", "--verbose", "--contains*", "--no-contains*",
		"--merged*", "--no-merged*", "--points-at*", NULL
	};
	/* Not tag's -v, which verifies: it runs gpg. */
	static const char *const tag_opts[] = {
		"--list", "-l", "-n*", "--contains*", "--no-contains*", "--merged*",
		"--no-merged*", "--points-at*", "--sort=*", "--format=*", "--color",
		"--color=*", "--no-color", "--column", "--column=*", "--no-column", "-i",
		"--ignore-case", "--omit-empty", NULL
	};
	static const char *const tag_listing[] = {
		"--list", "-l", "-n*", "--contains*", "--no-contains*", "--merged*",
		"--no-merged*", "--points-at*", NULL
	};
	static const char *const config_opts[] = {
		"-l", "--list", "--get", "--get-all", "--get-regexp", "-z", "--null",
		"--name-only", "--show-origin", "--show-scope", "--type=*", "--bool", "--int",
		"--bool-or-int", "--path", "--expiry-date", "--default=*", "--local",
		"--global", "--system", "--worktree", "--includes", "--no-includes", NULL
	};
	static const char *const config_listing[] = {
		"-l", "--list", "--get", "--get-all", "--get-regexp", NULL
	};
	static const char *const help_opts[] = {
		"-a", "--all", "-g", "--guides", "-c", "--config", "--no-external-commands",
		"--no-aliases", "--verbose", "--no-verbose", "--user-interfaces",
		"--developer-interfaces", NULL
	};
	static const char *const none[] = { NULL };
	const char *cmd = json_string_value(json_array_get(args, sub));
	const char *next = json_string_value(json_array_get(args, sub + 1));
	size_t words = 0;
	bool lists = false;

	for (size_t i = 0; readers[i]; i++)
		if (strcmp(cmd, readers[i]) == 0)
			return strcmp(cmd, "grep") == 0 && git_grep_opens_pager(args, sub)
				       ? "git grep -O (--open-files-in-pager) hands the matching "
					 "files to a program"
				       : NULL;
	if (strcmp(cmd, "branch") == 0 || strcmp(cmd, "tag") == 0) {
		bool tag = cmd[0] == 't';

		/* A name without a listing option creates. */
		if (git_opts_only(args, sub + 1, tag ? tag_opts : branch_opts,
				  tag ? tag_listing : branch_listing, &words, &lists) &&
		    (words == 0 || lists))
			return NULL;
		return "git branch and tag only list in read_only mode: a name only "
		       "after --list, --contains, --merged or --points-at (or branch's "
		       "-v, tag's -n), and no option that creates, deletes, moves or "
		       "verifies";
	}
	if (strcmp(cmd, "remote") == 0) {
		size_t i = sub + 1;
		const char *word;

		while ((word = json_string_value(json_array_get(args, i))) &&
		       (strcmp(word, "-v") == 0 || strcmp(word, "--verbose") == 0))
			i++;
		if (!word ||
		    (strcmp(word, "show") == 0 &&
		     git_opts_only(args, i + 1, (const char *const[]){ "-n", NULL }, none,
				   &words, &lists)) ||
		    (strcmp(word, "get-url") == 0 &&
		     git_opts_only(args, i + 1, (const char *const[]){ "--push", "--all", NULL },
				   none, &words, &lists)))
			return NULL;
		return "git remote only lists in read_only mode: `remote [-v]`, "
		       "`remote show` and `remote get-url`";
	}
	if (strcmp(cmd, "stash") == 0)
		return next && (strcmp(next, "list") == 0 || strcmp(next, "show") == 0)
			       ? NULL
			       : "git stash only lists in read_only mode: `stash list` and "
				 "`stash show`";
	if (strcmp(cmd, "config") == 0)
		return git_opts_only(args, sub + 1, config_opts, config_listing, &words,
				     &lists) && lists
			       ? NULL
			       : "git config only reads in read_only mode: --get, --get-all, "
				 "--get-regexp or --list, with display options";
	if (strcmp(cmd, "help") == 0)
		return git_opts_only(args, sub + 1, help_opts, none, &words, &lists) &&
				       words == 0
			       ? NULL
			       : "git help only lists in read_only mode (-a, -g, -c): a "
				 "manual page needs a viewer program";
	return "it may write";
}

/*
 * `-c` keys a read_only git may set: display and diff settings that
 * neither write nor run a program.  Everything else stays refused, above
 * all the keys that name a program (core.pager, core.fsmonitor,
 * diff.external, core.sshCommand, core.hooksPath, alias.*, *.textconv,
 * filter.*, credential.*, ...): an allow-list cannot miss one.
 */
static bool git_key_harmless(const char *kv)
{
	static const char *const keys[] = {
		"color.ui", "color.diff", "color.status", "color.branch", "color.grep",
		"core.quotepath", "core.abbrev", "core.safecrlf", "core.autocrlf",
		"diff.noprefix", "diff.renames", "diff.mnemonicprefix", "diff.context",
		"diff.algorithm", "diff.indentheuristic", "diff.relative",
		"diff.interhunkcontext", "diff.suppressblankempty", "diff.statgraphwidth",
		"log.decorate", "log.date", "log.abbrevcommit", "log.follow",
		"log.showroot", "log.mailmap", "grep.linenumber", "grep.extendedregexp",
		"grep.patterntype", "status.short", "status.branch",
		"status.showuntrackedfiles", "blame.date", "i18n.logoutputencoding",
		"format.pretty", "pager.log", "pager.diff", "pager.show", NULL
	};
	size_t n = strcspn(kv, "=");

	for (size_t i = 0; keys[i]; i++)
		if (strlen(keys[i]) == n && strncasecmp(keys[i], kv, n) == 0) {
			/* pager.<cmd> may only turn the pager off. */
			if (strncasecmp(kv, "pager.", 6) == 0)
				return kv[n] == '=' && (strcmp(kv + n + 1, "false") == 0 ||
							strcmp(kv + n + 1, "0") == 0);
			return true;
		}
	return false;
}

/*
 * git's global options, before the subcommand, in read_only mode: the
 * ones that can neither write nor run a program.  `-C DIR` must stay
 * inside root (resolved in the environment, like every path); the rest
 * are refused with the reason.  *sub is the subcommand's index in args.
 */
static sg_err git_globals(struct tctx *t, json_t *args, const char *cwd, size_t *sub)
{
	static const char *const plain[] = {
		"--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs",
		"--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs",
		"--no-replace-objects", "--no-advice", NULL
	};
	size_t i = 0, n = json_array_size(args);
	sg_err rc = SG_OK;

	for (; i < n && !rc; i++) {
		const char *a = json_string_value(json_array_get(args, i));
		bool known = false;

		if (a[0] != '-')
			break;
		for (size_t k = 0; plain[k]; k++)
			known |= strcmp(a, plain[k]) == 0;
		if (known)
			continue;
		if ((strcmp(a, "-C") == 0 || strcmp(a, "-c") == 0) && i + 1 == n)
			return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
					  "git %s needs a value", a);
		if (strcmp(a, "-C") == 0) {
			const char *dir = json_string_value(json_array_get(args, ++i));
			struct sg_buf joined = SG_BUF_INIT(2 * SG_PATH_MAX + 2);
			char *where = NULL;

			/* Relative to cwd, as git reads it; outside root is path_escape. */
			if (sg_buf_addf(&joined, "%s%s%s", cwd && dir[0] != '/' ? cwd : "",
					cwd && dir[0] != '/' ? "/" : "", dir))
				rc = sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
						"git -C: the path is too long");
			/* Relayed (no environment here), the peer resolves it. */
			if (!rc && t->s->env)
				rc = sg_envcall_resolve(t->s, joined.p, false, &where,
							&t->op->cancel, &t->op->err);
			sg_buf_release(&joined);
			free(where);
		} else if (strcmp(a, "-c") == 0) {
			const char *kv = json_string_value(json_array_get(args, ++i));

			if (!git_key_harmless(kv))
				rc = sg_err_set(&t->op->err, SG_E_PERMISSION,
						"git -c %.*s is not allowed in read_only mode: only "
						"display settings (color.*, core.quotepath, diff.*, "
						"log.* and the like) are; a key that can run a program "
						"or write never is",
						(int)strcspn(kv, "="), kv);
		} else {
			rc = sg_err_set(&t->op->err, SG_E_PERMISSION,
					"git option %.64s is not allowed in read_only mode "
					"(allowed before the subcommand: -C DIR inside the "
					"workspace, -c with a display setting, --no-pager, "
					"--no-optional-locks, --literal-pathspecs)", a);
		}
	}
	*sub = i;
	if (!rc && i == n)
		rc = sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				"`args` names no git subcommand after its options");
	return rc;
}

/*
 * Whether a configuration entry (as `git config --list -z` gives it:
 * section[.subsection].name, section and name in lower case) makes a
 * read-only git subcommand run a program: fsmonitor hooks, pagers,
 * external diff and textconv commands, filters (which `status` runs on
 * changed files), merge drivers, editors, ssh and proxy commands, signing
 * programs, hooks.  A deny-list has to be complete, so it errs wide: any
 * key whose last part names a command, a program or a helper.  Values that
 * turn a feature off ("false", a pager.<cmd> boolean) are harmless.
 */
static bool git_entry_runs_program(const char *key, const char *value)
{
	static const char *const sections[] = { "filter", "gpg", "man", "browser",
						"difftool", "mergetool", NULL };
	static const char *const names[] = {
		"fsmonitor", "pager", "sshcommand", "gitproxy", "askpass", "editor",
		"hookspath", "external", "textconv", "command", "cmd", "driver",
		"program", "uploadpack", "receivepack", "process", "clean", "smudge",
		"proxycommand", "viewer", "tool", NULL
	};
	static const char *const off[] = { "false", "no", "off", "0", "", NULL };
	const char *dot = strchr(key, '.'), *last = strrchr(key, '.');
	size_t slen = dot ? (size_t)(dot - key) : strlen(key);
	bool hit = false;

	for (size_t i = 0; sections[i] && !hit; i++)
		hit = strlen(sections[i]) == slen && strncmp(key, sections[i], slen) == 0;
	for (size_t i = 0; names[i] && !hit && last; i++)
		hit = strcmp(last + 1, names[i]) == 0;
	/* pager.<cmd> and core.fsmonitor may be set to false. */
	if (hit && (strncmp(key, "pager.", 6) == 0 || strcmp(key, "core.fsmonitor") == 0) &&
	    value) {
		for (size_t i = 0; off[i]; i++)
			if (strcasecmp(value, off[i]) == 0)
				return false;
		if (strncmp(key, "pager.", 6) == 0 &&
		    (strcasecmp(value, "true") == 0 || strcasecmp(value, "yes") == 0 ||
		     strcasecmp(value, "on") == 0 || strcmp(value, "1") == 0))
			return false;
	}
	return hit;
}

/*
 * The flags that keep a read_only git from handing a file to a program the
 * configuration names (diff.external, a diff driver's command or
 * textconv), and in *at the index in args they go before: right after the
 * subcommand (after `stash show` / `stash list`).  NULL when the
 * subcommand shows no diff.  git_exec_only's rule stops such a program
 * from starting, all but one: the ELF interpreter stays executable because
 * git needs it, and given a workspace file as its argument it would load
 * and run that file.  These flags take the argument away.
 */
static const char *const *git_no_programs(json_t *args, size_t sub, size_t *at)
{
	static const char *const both[] = { "--no-ext-diff", "--no-textconv", NULL };
	static const char *const textconv[] = { "--no-textconv", NULL };
	static const char *const diffs[] = { "diff", "log", "show", "whatchanged",
					     "diff-tree", "diff-files", "diff-index", NULL };
	const char *cmd = json_string_value(json_array_get(args, sub));
	const char *next = json_string_value(json_array_get(args, sub + 1));

	*at = sub + 1;
	for (size_t i = 0; diffs[i]; i++)
		if (strcmp(cmd, diffs[i]) == 0)
			return both;
	if (strcmp(cmd, "blame") == 0 || strcmp(cmd, "annotate") == 0 ||
	    strcmp(cmd, "grep") == 0)
		return textconv;
	if (strcmp(cmd, "stash") == 0 && next &&
	    (strcmp(next, "show") == 0 || strcmp(next, "list") == 0)) {
		*at = sub + 2;
		return both;
	}
	return NULL;
}

/*
 * Start a read_only git's argv in av: `sg-helper confine --git`, inside
 * the confinement exec_argv adds, so that git may execute only itself,
 * its exec-path helpers and the ELF interpreter.  A program the
 * configuration names (a filter, textconv, diff command, pager, hook) then
 * fails to start, even one added after git_config_guard read the files:
 * this, not the guard, is what makes the race between the two harmless.
 */
static sg_err git_exec_only(struct tctx *t, struct sg_strv *av)
{
	if (sg_strv_addv(av, (const char *[]){ t->s->env->helper, "confine", "--mode",
						"read_only", "--root", t->s->root, "--git",
						"--", NULL }))
		return sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
	return SG_OK;
}

/*
 * In read_only mode, refuse a git whose configuration (the repository's
 * own, its includes, the environment's ~/.gitconfig and /etc/gitconfig,
 * all writable by a standard-mode agent before) would make it run a
 * program: `git [GLOBALS] config --list -z` is read first, with the
 * caller's -C and -c, in the same confinement.  This gives the clear
 * sentence when the files stay as they are; when they change between this
 * read and the run (filter and diff drivers have names the repository
 * chooses, so no -c override covers them), git_exec_only's Landlock rule
 * still keeps git from starting the program.
 */
static sg_err git_config_guard(struct tctx *t, json_t *args, size_t sub, const char *cwd,
			       json_t *env)
{
	struct sg_strv av = SG_STRV_INIT;
	struct sg_exec_result r;
	sg_err rc;

	sg_exec_result_init(&r, SG_GIT_CONFIG_MAX);
	rc = git_exec_only(t, &av);
	if (rc)
		goto out;
	rc = sg_strv_add(&av, "git") ? SG_E_INTERNAL : SG_OK;
	for (size_t i = 0; !rc && i < sub; i++)
		rc = sg_strv_add(&av, json_string_value(json_array_get(args, i)))
			     ? SG_E_INTERNAL : SG_OK;
	if (!rc)
		rc = sg_strv_addv(&av, (const char *[]){ "config", "--list", "-z", NULL })
			     ? SG_E_INTERNAL : SG_OK;
	if (rc) {
		rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	rc = exec_argv(t, sg_strv_get(&av), cwd, env, NULL, 0, SG_COMMAND_TIMEOUT_MS, false,
		       &r);
	if (rc)
		goto out;
	if (r.exit_code != 0 || r.signal || r.truncated || r.timed_out) {
		rc = sg_err_set(&t->op->err, SG_E_PERMISSION,
				"read_only git reads the configuration first and could not "
				"(exit %d%s): %.200s", r.exit_code,
				r.truncated ? ", more than the limit" : "",
				r.err.p ? r.err.p : "");
		goto out;
	}
	/* Entries are KEY NUL or KEY LF VALUE NUL. */
	for (size_t at = 0; at < r.out.len && !rc;) {
		/* p[len] is 0 (buf.h), so the last entry ends too. */
		char *e = r.out.p + at, *nl;
		size_t n = strlen(e);

		nl = strchr(e, '\n');
		if (nl)
			*nl = '\0';
		if (git_entry_runs_program(e, nl ? nl + 1 : NULL))
			rc = sg_err_set(&t->op->err, SG_E_PERMISSION,
					"git's configuration sets %.100s, which runs a program; "
					"read_only git refuses to run with it (remove it in "
					"standard mode, or use standard mode)", e);
		at += n + 1;
	}
out:
	sg_exec_result_release(&r);
	sg_strv_release(&av);
	return rc;
}

/*
 * In read_only mode, git runs only reading subcommands after harmless
 * global options (protocol section 10); SG_E_PERMISSION otherwise.
 */
static sg_err git_read_only(struct tctx *t, json_t *args, const char *cwd, size_t *sub)
{
	const char *why;
	sg_err rc;

	*sub = 0;
	rc = git_globals(t, args, cwd, sub);
	if (rc)
		return rc;
	why = git_refusal(args, *sub);
	if (why)
		return sg_err_set(&t->op->err, SG_E_PERMISSION,
				  "git %.64s is not allowed in read_only mode: %s",
				  json_string_value(json_array_get(args, *sub)), why);
	/*
	 * --ext-diff and --textconv (and their abbreviations) would undo
	 * git_no_programs' flags, and --submodule=diff runs a git in each
	 * submodule that has neither; a pathspec that happens to look like
	 * them is refused too, which costs nothing.
	 */
	for (size_t i = *sub + 1; i < json_array_size(args); i++) {
		const char *a = json_string_value(json_array_get(args, i));
		bool sub_diff = strncmp(a, "--sub", 5) == 0 && strcmp(a, "--submodule") != 0 &&
				strcmp(a, "--submodule=log") != 0 &&
				strcmp(a, "--submodule=short") != 0;

		if (strncmp(a, "--ext", 5) == 0 || strncmp(a, "--textc", 7) == 0 || sub_diff)
			return sg_err_set(&t->op->err, SG_E_PERMISSION,
					  "git option %.64s is not allowed in read_only mode: it "
					  "hands files to a program the configuration names", a);
	}
	return SG_OK;
}

/* git's `args` and `cwd`, checked; borrowed from t->a. */
static sg_err git_args(struct tctx *t, json_t **args, const char **cwd)
{
	sg_err rc = sg_arg_str(t->a, "cwd", false, cwd, &t->op->err);

	if (!rc)
		rc = sg_arg_strings(t->a, "args", args, &t->op->err);
	if (!rc && (!*args || json_array_size(*args) == 0))
		rc = sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				"`args` must be a non-empty array (the argv after `git`)");
	return rc;
}

static sg_err t_git(struct tctx *t, json_t **result)
{
	const char *cwd = NULL;
	json_t *args = NULL, *env;
	struct sg_strv av = SG_STRV_INIT;
	size_t sub = 0, at = 0;
	sg_err rc;

	rc = git_args(t, &args, &cwd);
	if (!rc && t->mode == SG_CONFINE_READ_ONLY)
		rc = git_read_only(t, args, cwd, &sub);
	if (rc)
		return rc;
	env = json_pack("{s:s}", "GIT_TERMINAL_PROMPT", "0");
	if (t->mode == SG_CONFINE_READ_ONLY) {
		json_object_set_new(env, "GIT_OPTIONAL_LOCKS", json_string("0"));
		json_object_set_new(env, "GIT_PAGER", json_string("cat"));
		rc = git_config_guard(t, args, sub, cwd, env);
		if (!rc)
			rc = git_exec_only(t, &av);
	}
	if (!rc)
		rc = sg_strv_add(&av, "git");
	/*
	 * The command line outranks every configuration file, so these keys
	 * stay off even if the files change after the guard read them (and
	 * reach the gits started in submodules, through the environment):
	 * diff.submodule=short keeps a diff from starting one.
	 */
	if (!rc && t->mode == SG_CONFINE_READ_ONLY)
		rc = sg_strv_addv(&av, (const char *[]){
			"-c", "core.fsmonitor=false", "-c", "core.pager=cat",
			"-c", "core.hooksPath=/dev/null", "-c", "core.sshCommand=false",
			"-c", "core.askPass=false", "-c", "credential.helper=",
			"-c", "protocol.allow=never", "-c", "gpg.program=false",
			"-c", "log.showSignature=false", "-c", "diff.submodule=short",
			NULL });
	if (!rc && t->mode == SG_CONFINE_READ_ONLY) {
		const char *const *flags = git_no_programs(args, sub, &at);

		for (size_t i = 0; !rc && i < json_array_size(args); i++) {
			if (i == at && flags)
				rc = sg_strv_addv(&av, flags) ? SG_E_INTERNAL : SG_OK;
			if (!rc)
				rc = sg_strv_add(&av, json_string_value(json_array_get(args, i)))
					     ? SG_E_INTERNAL : SG_OK;
		}
		if (!rc && flags && at == json_array_size(args))
			rc = sg_strv_addv(&av, flags) ? SG_E_INTERNAL : SG_OK;
	} else if (!rc) {
		rc = strings_to_strv(args, &av);
	}
	if (!rc)
		rc = run_argv(t, sg_strv_get(&av), cwd, env, NULL, 0,
			      SG_COMMAND_TIMEOUT_MS, result);
	json_decref(env);
	sg_strv_release(&av);
	return rc;
}

static const struct tool catalogue[] = {
	{ "read_file", false, t_read_file },
	{ "write_file", true, t_write_file },
	{ "edit_file", true, t_edit_file },
	{ "list_dir", false, t_list_dir },
	{ "glob", false, t_glob },
	{ "grep", false, t_grep },
	{ "run_command", false, t_run_command },
	{ "git", false, t_git },
	{ "delete_path", true, t_delete_path },
	{ "move_path", true, t_move_path },
	{ "make_dir", true, t_make_dir },
	{ "stat_path", false, t_stat_path },
	{ "present_artifact", false, t_present_artifact },
};

json_t *sg_tools_names(void)
{
	json_t *names = json_array();

	for (size_t i = 0; i < sizeof(catalogue) / sizeof(catalogue[0]); i++)
		json_array_append_new(names, json_string(catalogue[i].name));
	return names;
}

/*
 * The checks every execute passes before anything runs, here or at a
 * peer: the tool's name, the permission mode, `call.arguments` as a JSON
 * object (t->a, new), and what read_only refuses.  *tool is the
 * catalogue's entry, NULL for a tool only a peer knows.
 */
static sg_err precheck(struct tctx *t, const struct tool **tool)
{
	struct sg_op *op = t->op;
	const char *name = NULL;
	json_t *call = json_object_get(op->data, "call");
	json_t *args = json_object_get(call, "arguments");
	struct sg_errinfo why = { 0 };
	sg_err rc;

	*tool = NULL;
	rc = sg_arg_str(op->data, "tool", true, &name, &op->err);
	if (rc)
		return rc;
	for (size_t i = 0; i < sizeof(catalogue) / sizeof(catalogue[0]); i++)
		if (strcmp(catalogue[i].name, name) == 0)
			*tool = &catalogue[i];
	if (!*tool && !t->s->relay)
		return sg_err_set(&op->err, SG_E_INVALID_ARGUMENT,
				  "unknown tool `%.64s`", name);
	/* Borrowed from the request, which the op owns. */
	op->tool = *tool ? (*tool)->name : name;
	rc = sg_arg_mode(op->data, &t->mode, &op->err);
	if (rc)
		return rc;
	if (!json_is_object(call) || !json_is_string(args))
		return sg_err_set(&op->err, SG_E_INVALID_ARGUMENT,
				  "`call.arguments` must be a string holding a JSON object");
	rc = sg_json_parse(json_string_value(args), json_string_length(args),
			   SG_JSON_REJECT_DUPLICATES, &t->a, &why);
	if (rc || !json_is_object(t->a)) {
		json_decref(t->a);
		t->a = NULL;
		if (rc == SG_E_INTERNAL)
			return sg_err_set(&op->err, rc, "out of memory");
		return sg_err_set(&op->err, SG_E_INVALID_ARGUMENT,
				  "`call.arguments` is not a JSON object%s%s",
				  rc ? ": " : "", rc ? why.msg : "");
	}
	if (t->mode != SG_CONFINE_READ_ONLY)
		return SG_OK;
	/* Never fail open: a peer's own tool may write, for all sandgate knows. */
	if (!*tool)
		return sg_err_set(&op->err, SG_E_PERMISSION,
				  "`%.64s` is the peer's own tool, which sandgate cannot tell "
				  "to be read-only, and the permission mode is read_only", name);
	if ((*tool)->writes)
		return sg_err_set(&op->err, SG_E_PERMISSION,
				  "%s writes, and the permission mode is read_only",
				  (*tool)->name);
	if ((*tool)->run == t_git && t->s->relay) {
		const char *cwd = NULL;
		json_t *gargs = NULL;
		size_t sub;

		rc = git_args(t, &gargs, &cwd);
		if (!rc)
			rc = git_read_only(t, gargs, cwd, &sub);
	}
	return rc;
}

sg_err sg_tools_precheck(struct sg_op *op)
{
	struct tctx t = { .op = op, .s = op->s };
	const struct tool *tool;
	sg_err rc = precheck(&t, &tool);

	json_decref(t.a);
	return rc;
}

sg_err sg_tools_execute(struct sg_op *op, json_t **out)
{
	struct tctx t = { .op = op, .s = op->s };
	const struct tool *tool = NULL;
	sg_err rc;

	*out = NULL;
	rc = precheck(&t, &tool);
	if (rc)
		goto out;
	if (tool->writes && t.s->profile->mount_read_only)
		rc = sg_err_set(&op->err, SG_E_PERMISSION,
				"%s writes, and the workspace is mounted read-only "
				"(mount_read_only)", tool->name);
	else
		rc = tool->run(&t, out);
	if (!rc && *out)
		op->tool_failed = json_is_true(json_object_get(*out, "is_error"));
out:
	json_decref(t.a);
	return rc;
}
