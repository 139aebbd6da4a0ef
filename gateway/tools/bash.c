/*
 * bash.c - the host's bash tool: a fresh login shell per call.
 *
 * Every call runs under sg-helper's process supervisor (proc.c's
 * sg_proc_spawn), in one exec round trip: the helper spawns the command,
 * waits up to timeout_seconds, and answers with its output.  A command
 * still running then is not killed: its record simply becomes a managed
 * background process (promoted_process_id), as the host's own worker
 * promotes it.  run_in_background starts a managed process on a terminal
 * of its own and answers with its record.
 *
 * The shell is `bash -l -c` where the environment has /bin/bash or
 * /usr/bin/bash, else `sh -l -c`; the helper decides inside the
 * environment, so no extra round trip asks.  The command sees the host's
 * non-interactive variables (below), TMPDIR in the environment's temp
 * directory, binding.environment and the operator's forward_env; in
 * standard and read_only mode it runs under Landlock, or not at all.
 */
#include "gateway/tools/tool.h"

#include <stdio.h>
#include <string.h>

#include "base/limits.h"

#define BASH_TIMEOUT_DEFAULT_S 300  /* timeout_seconds absent or <= 0 */
#define BASH_TAIL (4 * SG_KiB)      /* stdout_tail and stderr_tail */

/* The host's non-interactive environment for shell commands. */
static const char *const quiet_env[][2] = {
	{ "GIT_PAGER", "cat" },	       { "PAGER", "cat" },   { "GIT_TERMINAL_PROMPT", "0" },
	{ "GIT_EDITOR", "true" },      { "EDITOR", "true" }, { "VISUAL", "true" },
	{ "NO_COLOR", "1" },	       { "TERM", "dumb" },   { "GCM_INTERACTIVE", "never" },
	{ "DEBIAN_FRONTEND", "noninteractive" },
};

static json_t *env_extra(bool tty)
{
	json_t *env = json_object();

	for (size_t i = 0; env && i < sizeof(quiet_env) / sizeof(quiet_env[0]); i++)
		json_object_set_new(env, quiet_env[i][0], json_string(quiet_env[i][1]));
	/* A terminal of its own says what it is. */
	if (env && tty)
		json_object_set_new(env, "TERM", json_string("xterm-256color"));
	return env;
}

/* The last `max` bytes of a string value, cut at a character boundary. */
static json_t *tail_of(json_t *v, size_t max, bool *cut)
{
	const char *p = json_string_value(v);
	size_t n = json_string_length(v), from = n > max ? n - max : 0;

	if (!p)
		p = "";
	/* Step over continuation bytes so the tail starts a character. */
	while (from < n && ((unsigned char)p[from] & 0xc0) == 0x80)
		from++;
	*cut = from > 0;
	return json_stringn(p + from, n - from);
}

static json_t *suggestions(bool ended, int64_t code, const char *promoted)
{
	char text[256];

	if (!ended)
		snprintf(text, sizeof(text),
			 "the command is still running as background process %s: read its output "
			 "with the process tool (action read) or stop it (action stop)", promoted);
	else if (code != 0)
		snprintf(text, sizeof(text),
			 "inspect the output to find why the command exited %lld before retrying",
			 (long long)code);
	else
		snprintf(text, sizeof(text), "use this output as evidence for the next step");
	return json_pack("[s]", text);
}

/* The foreground result: the host's view and structured data. */
static json_t *run_result(struct sg_tool_call *t, const char *command, json_t *reply,
			  int64_t duration_ms)
{
	json_t *rec = json_object_get(reply, "process");
	bool ended = json_is_true(json_object_get(reply, "ended")), out_cut, err_cut;
	int64_t code = ended ? json_integer_value(json_object_get(rec, "exit_code")) : -1;
	const char *promoted = ended ? "" : json_string_value(json_object_get(rec, "id"));
	json_t *out = json_object_get(reply, "stdout"), *err = json_object_get(reply, "stderr");
	json_t *sha = json_object_get(reply, "full_log_sha256");
	json_t *sections = json_object_get(reply, "full_log_sections");
	json_t *sha_v = sha ? json_incref(sha) : json_string("");
	json_t *sections_v = sections ? json_incref(sections) : json_object();
	json_t *view, *data;
	const char *purpose = json_string_value(json_object_get(t->a, "purpose"));
	const char *scope = json_string_value(json_object_get(t->a, "scope"));

	if (!promoted)
		promoted = "";
	sg_tool_revision(t, reply);
	view = json_pack("{s:s, s:s, s:I, s:I, s:b, s:b, s:O, s:o, s:o, s:O, s:O, s:s}",
			 "action", "run", "command", command, "exit_code", (json_int_t)code,
			 "duration_ms", (json_int_t)duration_ms, "timed_out", !ended,
			 "truncated", json_is_true(json_object_get(reply, "output_truncated")),
			 "output", json_object_get(reply, "output"),
			 "stdout_tail", tail_of(out, BASH_TAIL, &out_cut),
			 "stderr_tail", tail_of(err, BASH_TAIL, &err_cut),
			 "stdout_bytes", json_object_get(reply, "stdout_bytes"),
			 "stderr_bytes", json_object_get(reply, "stderr_bytes"),
			 "workspace_revision",
			 json_string_value(json_object_get(reply, "workspace_revision"))
				 ? json_string_value(json_object_get(reply, "workspace_revision"))
				 : "");
	data = json_pack("{s:I, s:b, s:O, s:O, s:b, s:b, s:O, s:o, s:o, s:s}",
			 "exit_code", (json_int_t)code, "timed_out", !ended, "stdout", out, "stderr",
			 err, "stdout_truncated",
			 json_is_true(json_object_get(reply, "stdout_truncated")),
			 "stderr_truncated",
			 json_is_true(json_object_get(reply, "stderr_truncated")),
			 "full_log_ref", json_object_get(reply, "full_log_ref"),
			 "full_log_sha256", sha_v, "full_log_sections", sections_v,
			 "promoted_process_id", promoted);
	if (!view || !data) {
		json_decref(view);
		json_decref(data);
		return NULL;
	}
	json_object_set_new(view, "stdout_tail_truncated",
			    json_boolean(out_cut || json_is_true(json_object_get(reply,
									 "stdout_truncated"))));
	json_object_set_new(view, "stderr_tail_truncated",
			    json_boolean(err_cut || json_is_true(json_object_get(reply,
									 "stderr_truncated"))));
	json_object_set(view, "full_log_ref", json_object_get(data, "full_log_ref"));
	json_object_set(view, "full_log_bytes",
			json_object_get(reply, "full_log_bytes")
				? json_object_get(reply, "full_log_bytes")
				: json_object_get(reply, "stdout_bytes"));
	json_object_set(view, "full_log_sha256", json_object_get(data, "full_log_sha256"));
	json_object_set(view, "full_log_sections", json_object_get(data, "full_log_sections"));
	json_object_set_new(view, "next_suggestions", suggestions(ended, code, promoted));
	if (!ended)
		json_object_set_new(view, "promoted_process_id", json_string(promoted));
	if (purpose)
		json_object_set_new(view, "purpose", json_string(purpose));
	if (scope)
		json_object_set_new(view, "scope", json_string(scope));
	return sg_tool_result(view, data);
}

/* run_in_background: one text part, the record with "action":"start" first. */
static json_t *start_result(json_t *reply)
{
	json_t *view = json_pack("{s:s}", "action", "start");

	if (view && json_object_update(view, json_object_get(reply, "process"))) {
		json_decref(view);
		view = NULL;
	}
	return view ? sg_tool_result(view, NULL) : NULL;
}

/* timeout_seconds as the host takes it: absent or <= 0 is 300, above 3600 is 3600. */
static sg_err timeout_of(struct sg_tool_call *t, int64_t *seconds)
{
	json_t *v = json_object_get(t->a, "timeout_seconds");

	*seconds = BASH_TIMEOUT_DEFAULT_S;
	if (!v || json_is_null(v))
		return SG_OK;
	if (!json_is_integer(v))
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "timeout_seconds must be an integer number of seconds");
	*seconds = json_integer_value(v);
	if (*seconds <= 0)
		*seconds = BASH_TIMEOUT_DEFAULT_S;
	if (*seconds > SG_TOOL_BASH_TIMEOUT_MAX_S)
		*seconds = SG_TOOL_BASH_TIMEOUT_MAX_S;
	return SG_OK;
}

static sg_err check_scope(struct sg_tool_call *t)
{
	const char *scope = NULL, *purpose = NULL;
	sg_err rc = sg_arg_str(t->a, "scope", false, &scope, &t->op->err);

	if (!rc)
		rc = sg_arg_str(t->a, "purpose", false, &purpose, &t->op->err);
	if (!rc && scope && strcmp(scope, "targeted") != 0 && strcmp(scope, "affected") != 0 &&
	    strcmp(scope, "full") != 0)
		rc = sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				"scope must be targeted, affected or full");
	return rc;
}

sg_err sg_tool_bash(struct sg_tool_call *t, json_t **result)
{
	struct sg_proc_start st = { .actor = t->actor, .mode = t->mode, .login = true,
				    .git_attribution = t->git_attribution };
	json_t *reply = NULL, *env = NULL;
	const char *status;
	bool background = false;
	int64_t seconds = 0, start = sg_now_ms();
	sg_err rc;

	*result = NULL;
	if (json_object_get(t->a, "action"))
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "bash takes no `action`: give `command` to run it (with "
				  "run_in_background to start a process), and manage processes "
				  "with the process tool");
	rc = sg_arg_str(t->a, "command", true, &st.command, &t->op->err);
	if (!rc && !st.command[0])
		rc = sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT, "command is required");
	if (!rc)
		rc = sg_arg_str(t->a, "cwd", false, &st.cwd, &t->op->err);
	if (!rc)
		rc = sg_arg_bool(t->a, "run_in_background", false, &background, &t->op->err);
	if (!rc)
		rc = timeout_of(t, &seconds);
	if (!rc)
		rc = check_scope(t);
	if (rc)
		return rc;
	st.tty = st.input = background;
	st.wait_ms = background ? -1 : seconds * 1000;
	env = env_extra(background);
	if (!env)
		return sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
	st.env = env;
	rc = sg_proc_spawn(t->op, &st, &reply);
	/* The reply comes from the environment: its status may be missing. */
	status = rc ? NULL : json_string_value(json_object_get(json_object_get(reply, "process"),
							       "status"));
	if (status && strcmp(status, "failed") == 0 && !json_object_get(reply, "ended")) {
		const char *why = json_string_value(json_object_get(reply, "message"));

		rc = sg_tool_fail(t, SG_E_INVALID_ARGUMENT, "the command could not start: %s",
				  why ? why : "the process failed at its start");
	}
	if (!rc && !background) {
		/* The host masks credentials in what a command printed, in every mode. */
		sg_tool_mask(reply, "output");
		sg_tool_mask(reply, "stdout");
		sg_tool_mask(reply, "stderr");
	}
	if (!rc)
		*result = background ? start_result(reply)
				     : run_result(t, st.command, reply, sg_now_ms() - start);
	if (!rc && !*result)
		rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
	json_decref(reply);
	json_decref(env);
	return rc;
}
