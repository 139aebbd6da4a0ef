/*
 * process.c - the host's model-facing process tool: read, write, stop,
 * list and update this session's background processes.
 *
 * Each action goes through the same handlers as the host's process
 * methods (proc.c's sg_proc_run), so the tool and the host's panel see
 * and change the same records, with the same refusals and events; this
 * file only maps the model's arguments and shapes the host's views.
 */
#include "gateway/tools/tool.h"

#include <string.h>

#include "base/limits.h"

#define PROCESS_WAIT_MAX_MS 300000         /* wait_ms is capped here */
#define PROCESS_MIN_DWELL_NS INT64_C(5000000000) /* a bounded wait's min-dwell */
#define PROCESS_READ_DEFAULT 32768         /* max_bytes absent */

/* Run a process method with data (stolen) for the tool; *out new. */
static sg_err run(struct sg_tool_call *t, const char *method, json_t *data, json_t **out)
{
	sg_err rc;

	*out = NULL;
	if (!data)
		return sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
	rc = sg_proc_run(t->op, method, data, out);
	json_decref(data);
	return rc;
}

static sg_err act_list(struct sg_tool_call *t, json_t **view)
{
	json_t *list = NULL;
	sg_err rc = run(t, "process/list", json_object(), &list);

	*view = rc ? NULL : json_pack("{s:s, s:o}", "action", "list", "processes", list);
	return rc;
}

static sg_err act_read(struct sg_tool_call *t, const char *id, json_t **view)
{
	json_t *offset = json_object_get(t->a, "offset_bytes"), *snap = NULL, *rec, *next;
	const char *status;
	int64_t wait_ms, max;
	sg_err rc;

	*view = NULL;
	rc = sg_arg_int(t->a, "wait_ms", 0, 0, INT64_MAX, &wait_ms, &t->op->err);
	if (!rc)
		rc = sg_arg_int(t->a, "max_bytes", PROCESS_READ_DEFAULT, 0, INT64_MAX, &max,
				&t->op->err);
	if (!rc && offset && !json_is_null(offset) &&
	    (!json_is_integer(offset) || json_integer_value(offset) < 0))
		rc = sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				"offset_bytes must be a non-negative integer");
	if (rc)
		return rc;
	if (wait_ms > PROCESS_WAIT_MAX_MS)
		wait_ms = PROCESS_WAIT_MAX_MS;
	{
		int64_t wait_ns = wait_ms * 1000000;
		int64_t dwell = wait_ns < PROCESS_MIN_DWELL_NS ? wait_ns : PROCESS_MIN_DWELL_NS;

		rc = run(t, "process/read",
			 json_pack("{s:s, s:{s:I, s:O, s:I, s:I}}", "id", id, "options",
				   "MaxBytes", (json_int_t)max, "OffsetBytes",
				   offset ? offset : json_null(), "Wait", (json_int_t)wait_ns,
				   "MinDwell", (json_int_t)dwell),
			 &snap);
	}
	if (rc)
		return rc;
	sg_tool_mask(snap, "Output");
	rec = json_object_get(snap, "Process");
	/* The record comes from the environment's helper: its status may be anything. */
	status = json_string_value(json_object_get(rec, "status"));
	next = status && strcmp(status, "running") == 0 &&
			       json_is_true(json_object_get(snap, "Truncated")) && offset
		       ? json_pack("[s]", "more output follows: read again from end_offset")
		       : json_null();
	*view = json_pack("{s:s, s:s, s:O, s:O, s:O, s:O, s:O, s:O, s:I, s:O, s:O, s:O, s:o}",
			  "action", "read", "process_id", id,
			  "output", json_object_get(snap, "Output"),
			  "truncated", json_object_get(snap, "Truncated"),
			  "start_offset", json_object_get(snap, "StartOffset"),
			  "end_offset", json_object_get(snap, "EndOffset"),
			  "total_bytes", json_object_get(snap, "TotalBytes"),
			  "timed_out", json_object_get(snap, "TimedOut"),
			  "duration_ms",
			  (json_int_t)(json_integer_value(json_object_get(snap, "Duration")) / 1000000),
			  "status", json_object_get(rec, "status"),
			  "exit_code", json_object_get(rec, "exit_code"), "process", rec,
			  "next_suggestions", next);
	json_decref(snap);
	return SG_OK;
}

static sg_err act_write(struct sg_tool_call *t, const char *id, json_t **view)
{
	const char *input = NULL;
	json_t *rec = NULL;
	sg_err rc = sg_arg_str(t->a, "input", true, &input, &t->op->err);

	*view = NULL;
	if (!rc)
		rc = run(t, "process/write", json_pack("{s:s, s:O}", "id", id, "input",
						       json_object_get(t->a, "input")), &rec);
	if (!rc)
		*view = json_pack("{s:s, s:s, s:I, s:o}", "action", "write", "process_id", id,
				  "bytes_written",
				  (json_int_t)json_string_length(json_object_get(t->a, "input")),
				  "process", rec);
	return rc;
}

static sg_err act_stop(struct sg_tool_call *t, const char *id, json_t **view)
{
	json_t *rec = NULL;
	sg_err rc = run(t, "process/stop", json_pack("{s:s}", "id", id), &rec);

	*view = NULL;
	if (rc)
		return rc;
	*view = json_pack("{s:s}", "action", "stop");
	if (*view)
		json_object_update(*view, rec);
	json_decref(rec);
	return SG_OK;
}

static sg_err act_update(struct sg_tool_call *t, const char *id, json_t **view)
{
	const char *mode = NULL;
	json_t *minutes = json_object_get(t->a, "recheck_minutes"), *rec = NULL;
	sg_err rc = sg_arg_str(t->a, "completion_mode", false, &mode, &t->op->err);

	*view = NULL;
	if (rc)
		return rc;
	if (!mode && !minutes)
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "update needs completion_mode or recheck_minutes");
	if (minutes && (!json_is_integer(minutes) || json_integer_value(minutes) < 0 ||
			json_integer_value(minutes) > 1440))
		return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
				  "recheck_minutes must be an integer from 0 to 1440");
	if (mode)
		rc = run(t, "process/completion_mode", json_pack("{s:s, s:s}", "id", id, "mode", mode),
			 &rec);
	if (!rc && minutes) {
		json_decref(rec);
		rc = run(t, "process/recheck", json_pack("{s:s, s:O}", "id", id, "minutes", minutes),
			 &rec);
	}
	if (rc) {
		json_decref(rec);
		return rc;
	}
	*view = json_pack("{s:s, s:s, s:O, s:O, s:s, s:o}", "action", "update", "process_id", id,
			  "completion_mode", json_object_get(rec, "completion_mode"),
			  "recheck_minutes", json_object_get(rec, "recheck_minutes"),
			  "next_recheck_at",
			  json_string_value(json_object_get(rec, "next_recheck_at"))
				  ? json_string_value(json_object_get(rec, "next_recheck_at"))
				  : "",
			  "process", rec);
	return SG_OK;
}

sg_err sg_tool_process(struct sg_tool_call *t, json_t **result)
{
	static const struct {
		const char *name;
		sg_err (*run)(struct sg_tool_call *t, const char *id, json_t **view);
	} actions[] = { { "read", act_read }, { "write", act_write },
			{ "stop", act_stop }, { "update", act_update } };
	const char *action = NULL, *id = NULL;
	json_t *view = NULL;
	sg_err rc;

	*result = NULL;
	rc = sg_arg_str(t->a, "action", true, &action, &t->op->err);
	if (!rc && strcmp(action, "list") == 0) {
		rc = act_list(t, &view);
		goto out;
	}
	if (!rc)
		rc = sg_arg_str(t->a, "process_id", true, &id, &t->op->err);
	if (rc)
		return rc;
	for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
		if (strcmp(actions[i].name, action) == 0) {
			rc = actions[i].run(t, id, &view);
			goto out;
		}
	return sg_err_set(&t->op->err, SG_E_INVALID_ARGUMENT,
			  "unknown process action \"%.32s\": read, write, stop, list or update",
			  action);
out:
	if (!rc && !view)
		rc = sg_err_set(&t->op->err, SG_E_INTERNAL, "out of memory");
	if (!rc)
		*result = sg_tool_result(view, NULL);
	return rc;
}
