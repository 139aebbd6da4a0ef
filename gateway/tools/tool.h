/*
 * tool.h - what every tool of the host's catalogue is given, and how it
 * answers (protocol section 3).
 *
 * Invariants:
 * - The catalogue is the host's eleven tools, one row each in tools.c's
 *   table; each tool lives in the file named for what it holds (files.c:
 *   reading and listing, edit.c: writing and editing, patch.c, search.c,
 *   bash.c, process.c, git.c) and exports one function sg_tool_<name>.
 * - A tool runs on a worker thread, blocking, and honours op->cancel in
 *   every wait (sg_envcall and the adapter's exec do).
 * - A tool that fails returns the error code with op->err set (or a long
 *   sentence through sg_tool_fail): the host gets an error reply, as from
 *   its own worker.  A command that ran and exited non-zero is a result.
 * - A result is the host's ToolResult: `content` an array of parts, most
 *   often one text part whose text is the tool's JSON view, plus
 *   `structured_content` for the tools whose host counterpart fills it.
 * - Path containment is sg-helper's, inside the environment; a tool never
 *   opens a user's path itself.
 */
#ifndef SG_TOOLS_TOOL_H
#define SG_TOOLS_TOOL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "gateway/session.h"

struct sg_exec_result;

/* bash's timeout_seconds ceiling (the host's maxShellTimeoutSeconds), which
 * apply_patch's then_run is held to as well. */
#define SG_TOOL_BASH_TIMEOUT_MAX_S 3600

struct sg_tool_call {
	struct sg_op *op;        /* borrowed */
	struct sg_session *s;    /* borrowed */
	enum sg_confine mode;    /* the request's permission_mode */
	json_t *a;               /* the arguments object (owned by the call) */
	const char *actor;       /* `actor`, borrowed from the request */
	bool main_agent;         /* actor == binding.session */
	bool git_attribution;    /* git_attribution_enabled */
};

/* ---- the tools (one file each group) ---- */
sg_err sg_tool_read_file(struct sg_tool_call *t, json_t **result);
sg_err sg_tool_write_file(struct sg_tool_call *t, json_t **result);
sg_err sg_tool_edit_file(struct sg_tool_call *t, json_t **result);
sg_err sg_tool_list_files(struct sg_tool_call *t, json_t **result);
sg_err sg_tool_present_artifact(struct sg_tool_call *t, json_t **result);
sg_err sg_tool_apply_patch(struct sg_tool_call *t, json_t **result);
sg_err sg_tool_grep(struct sg_tool_call *t, json_t **result);
sg_err sg_tool_glob(struct sg_tool_call *t, json_t **result);
sg_err sg_tool_bash(struct sg_tool_call *t, json_t **result);
sg_err sg_tool_process(struct sg_tool_call *t, json_t **result);
sg_err sg_tool_git(struct sg_tool_call *t, json_t **result);
/*
 * git's check for read_only (what a peer is asked to run is checked here
 * before it is relayed, too): SG_E_PERMISSION naming the subcommand when
 * it would write.
 */
sg_err sg_tool_git_read_only(struct sg_tool_call *t) SG_MUST_CHECK;
/*
 * A helper reply's workspace_revision in the host's git form when the
 * helper says root is a git repository (`workspace_git`, fs.h): one
 * `git status` run read-only, where git may execute nothing but itself.
 * The reply keeps the helper's own form when git cannot answer; the
 * marker key is removed either way, and op->err is left as it was.
 */
void sg_tool_revision(struct sg_tool_call *t, json_t *reply);

/* ---- paging (tools.c): list_files, grep and glob ---- */

/*
 * A page is bound to its result by a revision: the tree's workspace
 * revision, ";", and "result:<digest of the whole result>" (the host's
 * continuationSnapshotRevision); the tree's part is absent when the tree
 * could not be read in time.  New string, NULL when out of memory.
 */
char *sg_tool_page_revision(const char *tree, const char *result);

/*
 * Whether a continuation's expected_revision (surrounding blanks ignored)
 * still holds for the page's current revision.  The results must be the
 * same; the trees must be the same where both were read.  A tree left
 * unread (the helper's walk gave up on a loaded machine) is unknown, not
 * changed: the result digest already covers every entry the pages serve,
 * so it is what a continuation is refused for.
 */
bool sg_tool_page_current(const char *expected, const char *revision);

/*
 * The host's continuationPage: {offset, returned, has_more,
 * snapshot_token} and, when more follows, next = {offset,
 * expected_revision}.  New, NULL when out of memory.
 */
json_t *sg_tool_page(int64_t offset, int64_t returned, bool more, const char *revision);

/* ---- building results (tools.c) ---- */

/*
 * Mask the credentials (bearer tokens, key = value secrets, sk- keys,
 * private keys, JWTs) in the string obj[key] in place, as the host masks
 * what a command printed before the model sees it, in every mode.  A
 * missing or non-string value is left alone.
 */
void sg_tool_mask(json_t *obj, const char *key);

/*
 * The ToolResult {"content":[{"type":"text","text":<view as compact
 * JSON>}], "structured_content":structured}; steals both, structured may
 * be NULL.  NULL when out of memory.
 */
json_t *sg_tool_result(json_t *view, json_t *structured);

/* The ToolResult of one text part holding text as it is (new). */
json_t *sg_tool_result_text(const char *text, json_t *structured);

/*
 * Fail the tool with a sentence longer than op->err can hold (a
 * diagnostic with candidates): the reply's error is "<word>: <text>".
 * Returns code, so a tool can `return sg_tool_fail(...)`.
 */
sg_err sg_tool_fail(struct sg_tool_call *t, sg_err code, const char *fmt, ...)
	SG_PRINTF(3, 4);

/*
 * Run `sg-helper fs SUB` rooted at the session's root with argv (after
 * SUB) and optional stdin; *reply is the helper's JSON reply (new).  A
 * helper `tool_error` becomes a failed tool (SG_E_NOT_FOUND with its
 * text, or the code its `code` field names), so *reply is only ever a
 * success.  In `unconfined` mode the helper is told so (--unconfined).
 */
sg_err sg_tool_fs(struct sg_tool_call *t, const char *const *argv, const void *in,
		  size_t inlen, json_t **reply) SG_MUST_CHECK;

/*
 * Run argv in the environment for a tool: confined for the permission
 * mode, with the command environment (binding.environment and
 * forward_env, then env_extra), in cwd (a user path, resolved; NULL:
 * root), output bounded by r (initialised by the caller), stderr merged
 * into stdout when merge is set.
 */
sg_err sg_tool_exec(struct sg_tool_call *t, const char *const *argv, const char *cwd,
		    json_t *env_extra, const char *stdin_data, size_t stdin_len,
		    int64_t timeout_ms, bool merge, struct sg_exec_result *r) SG_MUST_CHECK;

#endif
