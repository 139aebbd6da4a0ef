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
 * then_run is the host's apply-then-run fusion (tool_apply_patch_fusion.go),
 * done the way the host's worker does it: the patch and then the command
 * are nested tool calls sent back to the host (`tool` frames whose
 * parent_id is this request), each answered by a `callback`, so both
 * leaves keep the host's policy and records; the parent result is the
 * patch's with the command's outcome added.  A host that gives the
 * request no handler for nested calls (its Execute has none) answers
 * "parent execution scope is closed", and the result says the patch's
 * outcome is unavailable, as its own worker's would.
 */
#define _GNU_SOURCE /* getrandom */
#include "gateway/tools/tool.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include "gateway/wire.h"
#include "base/limits.h"

/* The host's accepted spellings, in the order it tries them. */
static const char *const patch_keys[] = { "patchText", "patch_text", "patch", NULL };

/* then_run's keys (applyPatchThenRun) and the JSON type each must have. */
static const struct {
	const char *key;
	json_type type;
	const char *go;
} then_keys[] = {
	{ "command", JSON_STRING, "string" },  { "cwd", JSON_STRING, "string" },
	{ "timeout_seconds", JSON_INTEGER, "int" }, { "purpose", JSON_STRING, "string" },
	{ "scope", JSON_STRING, "string" },
};

/* A nested call's wait for its callback (the reader thread delivers). */
struct host_call {
	struct sg_callback cb; /* first: deliver gets this back */
	char id[32];
	pthread_mutex_t lock;
	json_t *answer; /* the callback's data, this thread's own copy */
	int wake;       /* eventfd */
};

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

/* Go's word for a JSON value's kind, as its decoder names it in errors. */
static const char *go_kind(json_t *v)
{
	if (!v)
		return "null";
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "object";
	case JSON_ARRAY:
		return "array";
	case JSON_STRING:
		return "string";
	case JSON_INTEGER:
	case JSON_REAL:
		return "number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "bool";
	default:
		return "null";
	}
}

/* then_run decoded as the host decodes it (unknown keys refused): its object. */
static sg_err then_decode(struct sg_tool_call *t, json_t *then)
{
	const char *key;
	json_t *v;

	if (!json_is_object(then))
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "invalid then_run: json: cannot unmarshal %s into Go value of "
				  "type tools.applyPatchThenRun", go_kind(then));
	json_object_foreach(then, key, v) {
		size_t i = 0;

		while (i < sizeof(then_keys) / sizeof(then_keys[0]) && strcmp(then_keys[i].key, key))
			i++;
		if (i == sizeof(then_keys) / sizeof(then_keys[0]))
			return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
					  "invalid then_run: json: unknown field \"%.100s\"", key);
		if (!json_is_null(v) && json_typeof(v) != then_keys[i].type)
			return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
					  "invalid then_run: json: cannot unmarshal %s into Go struct "
					  "field applyPatchThenRun.%s of type %s", go_kind(v), key,
					  then_keys[i].go);
	}
	return SG_OK;
}

/*
 * The host's followUp(): then_run checked, and the bash arguments it
 * becomes (new, its keys those set, as the host marshals them), or NULL
 * with *next when there is no follow-up.
 */
static sg_err then_args(struct sg_tool_call *t, bool dry, json_t **next)
{
	json_t *then = json_object_get(t->a, "then_run"), *command, *timeout, *scope;
	const char *s;
	sg_err rc;

	*next = NULL;
	if (!then || json_is_null(then))
		return SG_OK;
	rc = then_decode(t, then);
	if (rc)
		return rc;
	command = json_object_get(then, "command");
	timeout = json_object_get(then, "timeout_seconds");
	scope = json_object_get(then, "scope");
	s = json_string_value(command);
	if (dry)
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "then_run cannot be combined with dry_run");
	if (!s || !s[strspn(s, " \t\r\n\v\f")])
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT, "then_run requires command");
	if (json_is_integer(timeout) && (json_integer_value(timeout) < 1 ||
					 json_integer_value(timeout) > SG_TOOL_BASH_TIMEOUT_MAX_S))
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "then_run timeout_seconds must be between 1 and %d",
				  SG_TOOL_BASH_TIMEOUT_MAX_S);
	s = json_string_value(scope);
	if (s && *s && strcmp(s, "targeted") && strcmp(s, "affected") && strcmp(s, "full"))
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "then_run scope must be targeted, affected, or full");
	*next = json_object();
	for (size_t i = 0; *next && i < sizeof(then_keys) / sizeof(then_keys[0]); i++) {
		json_t *v = json_object_get(then, then_keys[i].key);
		bool empty = !v || json_is_null(v) || (json_is_string(v) && !json_string_length(v));

		/* command always; the others are omitempty (timeout a pointer). */
		if (i == 0 || !empty)
			json_object_set_new(*next, then_keys[i].key, v ? json_incref(v) : json_string(""));
	}
	return *next ? SG_OK : sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
}

/* A fresh callback id: 26 base32 characters, as the host's rand.Text(). */
static void call_id(char out[32])
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
	unsigned char raw[26];

	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		memset(raw, 0, sizeof(raw));
	for (size_t i = 0; i < sizeof(raw); i++)
		out[i] = abc[raw[i] & 31];
	out[sizeof(raw)] = '\0';
}

/* The reader thread's half: keep a copy of the answer, wake the waiter. */
static void call_deliver(struct sg_callback *cb, json_t *answer)
{
	struct host_call *c = (struct host_call *)cb;
	json_t *mine = json_deep_copy(answer);
	uint64_t one = 1;

	pthread_mutex_lock(&c->lock);
	if (!c->answer) {
		c->answer = mine ? mine : json_object();
		mine = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	json_decref(mine);
	(void)!write(c->wake, &one, sizeof(one));
}

/*
 * One nested call to the host (the worker's callbackExecutor): a `tool`
 * frame {"method":"tool","parent_id":<this request>,"id":<fresh>,"data":
 * <ToolCall>}, then the wait for its callback or this request's cancel.
 * *answer: the callback's data ({"id", "data"|"error"}, new).
 */
static sg_err host_invoke(struct sg_tool_call *t, const char *call_name, const char *name,
			  json_t *args, json_t **answer)
{
	struct host_call c = { .cb.deliver = call_deliver, .wake = eventfd(0, EFD_CLOEXEC) };
	char *text = json_dumps(args, JSON_COMPACT);
	json_t *frame = NULL;
	sg_err rc = SG_OK;

	*answer = NULL;
	pthread_mutex_init(&c.lock, NULL);
	call_id(c.id);
	c.cb.id = c.id;
	if (text)
		frame = json_pack("{s:s, s:O, s:s, s:{s:s, s:s, s:s}}", "method", "tool",
				  "parent_id", t->op->id, "id", c.id, "data", "id", call_name,
				  "name", name, "arguments", text);
	if (c.wake < 0 || !frame) {
		json_decref(frame);
		rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "cannot call the host back");
		goto out;
	}
	sg_callback_add(t->s, &c.cb);
	if (!sg_wire_send(t->s->wire, frame))
		rc = sg_err_set(&t->op->err, SG_E_UNAVAILABLE, "the host's connection is closed");
	while (!rc) {
		struct pollfd p[2] = { { .fd = c.wake, .events = POLLIN },
				       { .fd = sg_cancel_fd(&t->op->cancel), .events = POLLIN } };

		pthread_mutex_lock(&c.lock);
		*answer = c.answer;
		c.answer = NULL;
		pthread_mutex_unlock(&c.lock);
		if (*answer)
			break;
		rc = sg_cancel_check(&t->op->cancel);
		if (!rc && poll(p, 2, -1) < 0 && errno != EINTR)
			rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "cannot wait for the host");
		else if (rc)
			sg_err_set(&t->op->err, rc, "cancelled while the host ran %s", name);
	}
	sg_callback_remove(t->s, &c.cb);
	json_decref(c.answer);
out:
	free(text);
	if (c.wake >= 0)
		close(c.wake);
	pthread_mutex_destroy(&c.lock);
	return rc;
}

/* A part's label: its name, else its type (firstNonEmpty). */
static const char *part_label(json_t *part, const char *dflt)
{
	const char *name = json_string_value(json_object_get(part, "name"));

	return name && *name ? name : dflt;
}

/*
 * A result as text (toolresult.TextProjection): a lone text part's text,
 * else every part's projection joined by newlines, and the structured
 * content itself only when there is no content at all.
 */
static sg_err projection(json_t *r, struct sg_buf *b)
{
	json_t *content = json_object_get(r, "content"), *sc = json_object_get(r, "structured_content");
	json_t *part;
	size_t i;
	int fail = 0;

	json_array_foreach(content, i, part) {
		const char *type = json_string_value(json_object_get(part, "type"));
		const char *s = json_string_value(json_object_get(part, "text"));
		const char *mime = json_string_value(json_object_get(part, "mime_type"));
		const char *uri = json_string_value(json_object_get(part, "uri"));

		if (!type)
			continue;
		if (b->len)
			fail |= sg_buf_addc(b, '\n');
		if (!strcmp(type, "text"))
			fail |= sg_buf_adds(b, s ? s : "");
		else if (!strcmp(type, "image") || !strcmp(type, "audio") || !strcmp(type, "file"))
			fail |= sg_buf_addf(b, "[%s: %s (%s%s%s)]", type, part_label(part, type),
					    mime ? mime : "", uri && *uri ? "; " : "",
					    uri && *uri ? uri : "");
		else if (!strcmp(type, "resource_link"))
			fail |= sg_buf_addf(b, "[resource_link: %s (%s)]",
					    part_label(part, "resource"), uri ? uri : "");
	}
	if (!json_array_size(content) && sc && !json_is_null(sc)) {
		char *text = json_dumps(sc, JSON_COMPACT | JSON_SORT_KEYS);

		fail |= !text || sg_buf_adds(b, text);
		free(text);
	}
	return fail ? SG_E_INTERNAL : SG_OK;
}

/*
 * The command's outcome word (fusedCommandStatus): "running" for a run
 * promoted past its timeout, "completed" for exit 0, "failed" for
 * anything else, a failed call or a first text part that is not the
 * bash view included.
 */
static const char *fused_status(json_t *command)
{
	json_t *parts = json_object_get(command, "content"), *view = NULL, *code, *timed, *prom;
	json_t *ver;
	const char *status = "failed";
	size_t i;

	if (json_is_true(json_object_get(command, "is_error")))
		return status;
	for (i = 0; i < json_array_size(parts) && !view; i++) {
		json_t *p = json_array_get(parts, i);
		const char *text = json_string_value(json_object_get(p, "text"));

		const char *type = json_string_value(json_object_get(p, "type"));

		if (text && type && !strcmp(type, "text"))
			view = json_loads(text, 0, NULL);
	}
	code = json_object_get(view, "exit_code");
	timed = json_object_get(view, "timed_out");
	prom = json_object_get(view, "promoted_process_id");
	ver = json_object_get(view, "verification");
	if (!json_is_object(view) || (code && !json_is_null(code) && !json_is_integer(code)) ||
	    (timed && !json_is_boolean(timed) && !json_is_null(timed)) ||
	    (prom && !json_is_string(prom) && !json_is_null(prom)))
		goto out;
	if (json_is_true(timed) && json_string_length(prom))
		status = "running";
	else if (json_is_integer(code) && json_integer_value(code) == 0 && !json_is_true(timed) &&
		 !(json_is_object(ver) &&
		   (!json_is_true(json_object_get(ver, "passed")) ||
		    json_is_true(json_object_get(json_object_get(ver, "failure_summary"), "failed")))))
		status = "completed";
out:
	json_decref(view);
	return status;
}

/* toolresult.FromErrorText: one text part, is_error. */
static json_t *error_text(const char *head, const char *detail, const char *tail)
{
	char text[SG_ERR_MSG * 2];

	snprintf(text, sizeof(text), "%s%s%s", head, detail, tail);
	return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", text,
			 "is_error", 1);
}

/* The nested call's Result, or why it has none (Invoke's error). */
static json_t *answer_result(json_t *answer, char *why, size_t n)
{
	json_t *err = json_object_get(answer, "error"), *data = json_object_get(answer, "data");

	if (json_string_length(err))
		snprintf(why, n, "%s", json_string_value(err));
	else if (!data)
		snprintf(why, n, "unexpected end of JSON input");
	else if (!json_is_object(data))
		snprintf(why, n, "json: cannot unmarshal %s into Go value of type toolresult.Result",
			 go_kind(data));
	else
		return json_incref(data);
	return NULL;
}

/* Append one text part to a result's content. */
static bool add_text(json_t *r, const char *text, size_t n)
{
	json_t *content = json_object_get(r, "content");

	if (!json_is_array(content)) {
		content = json_array();
		if (json_object_set_new(r, "content", content))
			return false;
	}
	return !json_array_append_new(content, json_pack("{s:s, s:s#}", "type", "text", "text",
							  text, n));
}

/*
 * The command's outcome added to the patch's result (executeFusedPatch):
 * a text part "[then_run:<status>] Patch applied and retained.\n<the
 * command's text>", is_error when it failed, and structured_content's
 * then_run {status, result}.  Steals command.
 */
static json_t *fused(json_t *patch, json_t *command)
{
	struct sg_buf b = SG_BUF_INIT(SG_MAX_FRAME);
	const char *status = fused_status(command);
	json_t *sc = json_object_get(patch, "structured_content");
	bool ok = command && !sg_buf_addf(&b, "[then_run:%s] Patch applied and retained.\n", status) &&
		  !projection(command, &b) && add_text(patch, b.p, b.len);

	if (ok && !json_is_object(sc))
		ok = !json_object_set_new(patch, "structured_content", sc = json_object());
	ok = ok && !json_object_set_new(sc, "then_run", json_pack("{s:s, s:O}", "status", status,
								  "result", command));
	if (ok && !strcmp(status, "failed"))
		ok = !json_object_set_new(patch, "is_error", json_true());
	else if (ok)
		json_object_del(patch, "is_error");
	sg_buf_release(&b);
	json_decref(command);
	if (!ok) {
		json_decref(patch);
		return NULL;
	}
	return patch;
}

/*
 * apply_patch with then_run: the patch, then (if it applied) the command,
 * each a nested call through the host.  A cancel while either runs ends
 * the request; everything else is a result, as the host's worker gives.
 */
static sg_err fuse(struct sg_tool_call *t, json_t *bash_args, json_t **result)
{
	json_t *patch_args = json_object(), *answer = NULL, *patch, *command;
	char why[SG_ERR_MSG];
	sg_err rc = patch_args ? SG_OK : SG_E_INTERNAL;

	/* applyPatchArgs marshalled without then_run: every key, in its order. */
	for (int i = 0; !rc && i < 3; i++) {
		static const char *const order[] = { "patchText", "patch", "patch_text" };
		const char *v = json_string_value(json_object_get(t->a, order[i]));

		rc = json_object_set_new(patch_args, order[i], json_string(v ? v : ""))
			     ? SG_E_INTERNAL : SG_OK;
	}
	if (!rc && (json_object_set_new(patch_args, "dry_run", json_false()) ||
		    json_object_set_new(patch_args, "dryRun", json_false())))
		rc = SG_E_INTERNAL;
	if (rc)
		rc = sg_err_set(&t->op->err, rc, "out of memory");
	if (!rc)
		rc = host_invoke(t, "patch", "apply_patch", patch_args, &answer);
	json_decref(patch_args);
	if (rc)
		return rc;
	patch = answer_result(answer, why, sizeof(why));
	json_decref(answer);
	if (!patch) {
		*result = error_text("Patch outcome unavailable: ", why,
				     ". then_run was not started. Recover the tool records and "
				     "inspect files before retrying the patch.");
	} else if (json_is_true(json_object_get(patch, "is_error"))) {
		static const char skipped[] = "[then_run:skipped] The patch failed; the command "
					      "was not run.";

		*result = add_text(patch, skipped, sizeof(skipped) - 1) ? patch : NULL;
		if (!*result)
			json_decref(patch);
	} else {
		rc = host_invoke(t, "then_run", "bash", bash_args, &answer);
		if (rc) {
			json_decref(patch);
			return rc;
		}
		command = answer_result(answer, why, sizeof(why));
		json_decref(answer);
		if (!command)
			command = error_text("Follow-up outcome unavailable: ", why,
					     ". Inspect process and tool records before retrying "
					     "the command.");
		*result = fused(patch, command);
	}
	return *result ? SG_OK : sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
}

sg_err sg_tool_apply_patch(struct sg_tool_call *t, json_t **result)
{
	const char *text = NULL;
	size_t n = 0;
	bool dry = false, dry2 = false;
	json_t *reply = NULL, *next = NULL;
	sg_err rc;

	*result = NULL;
	rc = patch_text(t, &text, &n);
	if (!rc)
		rc = sg_arg_bool(t->a, "dry_run", false, &dry, &t->op->err);
	if (!rc)
		rc = sg_arg_bool(t->a, "dryRun", false, &dry2, &t->op->err);
	if (!rc)
		rc = then_args(t, dry || dry2, &next);
	if (!rc && next) {
		rc = fuse(t, next, result);
		json_decref(next);
		return rc;
	}
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
