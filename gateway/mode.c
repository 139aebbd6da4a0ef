/*
 * mode.c - the built-in mode (mode.h): its methods, its part of
 * initialize (the profile's environment, or a select profile's first
 * fitting candidate, and the reply), and its callbacks.
 */
#include "gateway/mode.h"

#include <string.h>

#include "base/log.h"
#include "gateway/code.h"
#include "gateway/initialize.h"
#include "gateway/registry.h"
#include "gateway/select.h"

static const struct sg_method methods[] = {
	{ "initialize", sg_init_run, true },
	{ "execute", sg_tools_execute, false },
	{ "process/start", sg_proc_method, false },
	{ "process/list", sg_proc_method, false },
	{ "process/get", sg_proc_method, false },
	{ "process/read", sg_proc_method, false },
	{ "process/write", sg_proc_method, false },
	{ "process/resize", sg_proc_method, false },
	{ "process/stop", sg_proc_method, false },
	{ "process/input_available", sg_proc_method, false },
	{ "process/completion_pending", sg_proc_method, false },
	{ "process/completion_delivered", sg_proc_method, false },
	{ "process/recheck", sg_proc_method, false },
	{ "process/completion_mode", sg_proc_method, false },
	{ "process/recheck_delivered", sg_proc_method, false },
	{ "process/cleanup", sg_proc_method, false },
	{ "export/read", sg_export_read, false },
	{ "export/close", sg_export_close, false },
#ifdef SG_HAVE_JSRUN
	/* Offered only where sg-jsrun, its interpreter, was built. */
	{ "run_code", sg_code_run, false },
#endif
};

#define N_METHODS (sizeof(methods) / sizeof(methods[0]))

/* Bound or not, the same table: the server holds back what needs a binding. */
static const struct sg_method *route(struct sg_session *s, const char *name, bool bound)
{
	(void)s;
	(void)bound;
	for (size_t i = 0; i < N_METHODS; i++)
		if (strcmp(methods[i].name, name) == 0)
			return &methods[i];
	return NULL;
}

/* The method names, for initialize's reply (new). */
static json_t *method_names(void)
{
	json_t *a = json_array();

	for (size_t i = 0; i < N_METHODS; i++)
		json_array_append_new(a, json_string(methods[i].name));
	return a;
}

/*
 * The session's environment: the profile's, or a select profile's first
 * candidate that meets its requirements; *probe (new) its observations,
 * *selection (new) a select profile's record of the candidates tried.
 */
static sg_err bring_up(struct sg_op *op, json_t *binding, json_t **probe, json_t **selection,
		       bool *fatal)
{
	struct sg_session *s = op->s;
	struct sg_profile *p = NULL;
	json_t *candidates;
	sg_err rc;

	*fatal = false;
	rc = sg_config_profile(s->cfg, s->profile_name, NULL, &p, &op->err);
	if (rc)
		return rc;
	candidates = json_object_get(p->raw, "candidates");
	if (strcmp(p->backend, "select") != 0)
		rc = sg_init_bring_up(op, binding, s->profile_name, s->toolchains, probe, fatal);
	else if (!json_is_array(candidates))
		rc = sg_err_set(&op->err, SG_E_INVALID_ARGUMENT,
				"profile \"%s\": a select profile needs `candidates`", p->name);
	else
		rc = sg_select_candidate(op, binding, candidates, probe, selection, fatal);
	sg_profile_free(p);
	return rc;
}

/* The environment's record becomes active, with what it was given. */
static sg_err mark_active(struct sg_session *s, struct sg_errinfo *err)
{
	struct sg_reg_key key = { s->env->ad->name, s->identity };
	json_t *res = json_object_get(s->env->facts, "resources");
	json_t *done = json_pack("{s:s, s:s, s:O}", "id", s->env->id, "status", SG_REG_ACTIVE,
				 "resources", res ? res : json_null());
	sg_err rc = sg_registry_update(s->state_dir, &key, done, err);

	json_decref(done);
	return rc;
}

/*
 * The built-in mode's initialize: bring the environment up, make the
 * session's tables, and build the reply.  A failure once the environment
 * is up removes it (sg_init_undo) and is final.
 */
static sg_err initialize(struct sg_op *op, json_t *binding, bool *fatal)
{
	struct sg_session *s = op->s;
	json_t *probe = NULL, *selection = NULL, *facts;
	sg_err rc = bring_up(op, binding, &probe, &selection, fatal);

	if (rc)
		goto out;
	rc = sg_exports_new(s);
	if (!rc)
		rc = sg_procs_new(s);
	if (rc)
		sg_err_set(&op->err, rc, "out of memory");
	else
		rc = mark_active(s, &op->err);
	if (rc) {
		*fatal = true;
		sg_init_undo(s, true);
		goto out;
	}
	facts = sg_init_facts(probe, s->env->facts);
	if (selection)
		json_object_set(facts, "selection", selection);
	s->init_reply = json_pack(
		"{s:O, s:s, s:[s], s:o, s:{s:s, s:s, s:s, s:b, s:o}}", "version",
		json_object_get(binding, "version"), "root", s->root, "capabilities",
		"process.start.v1", "methods", method_names(), "environment",
		"backend", s->env->ad->name, "profile", s->profile->name, "id", s->env->id,
		"resumed", s->env->resumed, "facts", facts);
out:
	json_decref(probe);
	json_decref(selection);
	return rc;
}

/*
 * A callback frame: {"id", "method":"callback", "data":{"id", "data"|"error"}}
 * settles the nested tool call whose id it carries (data's, else the
 * frame's).  One nobody waits for (unknown, settled, or its program gone)
 * is dropped: the host never expects a reply to it.
 */
static void callback(struct sg_session *s, json_t *frame)
{
	json_t *data = json_object_get(frame, "data");
	json_t *id = json_object_get(data, "id");

	if (!json_is_string(id))
		id = json_object_get(frame, "id");
	if (!json_is_object(data) || !json_is_string(id) ||
	    !sg_callback_deliver(s, json_string_value(id), data))
		sg_log_debug("a callback no nested call waits for was dropped");
}

/* The environment's end comes after the drain, in shutdown.c. */
static int shutdown_first(struct sg_session *s, struct sg_pool *pool,
			  struct sg_cancel *deadline, int64_t max_grace_ms)
{
	(void)s;
	(void)pool;
	(void)deadline;
	(void)max_grace_ms;
	return 0;
}

/* The environment's fields are freed with the session's (sg_init_reset). */
static void release(struct sg_session *s)
{
	(void)s;
}

const struct sg_mode sg_mode_builtin = {
	.name = "builtin",
	.route = route,
	.initialize = initialize,
	.callback = callback,
	.shutdown = shutdown_first,
	.release = release,
};
