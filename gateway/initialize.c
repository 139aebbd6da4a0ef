/*
 * initialize.c - the initialize method: check the binding and hold the
 * session while the mode brings the connection up (its initialize slot);
 * and for the built-in mode, the bring-up of one profile's environment:
 * record the intent, provision, observe its facts.
 *
 * Invariants: the state registry knows of an environment before anything
 * is created for it; a provisioning that fails after that removes what it
 * made (or lets go of what it resumed) before it answers; a binding is set
 * once, by the first initialize that succeeds, and every later one must
 * equal it.
 */
#define _GNU_SOURCE /* asprintf */
#include "gateway/initialize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/crash.h"
#include "base/limits.h"
#include "base/log.h"
#include "core/path.h"
#include "gateway/registry.h"

/* The protocol versions sandgate speaks (protocol section 2). */
#define VERSION_MIN 3
#define VERSION_MAX 4

/* POSIX's portable variable names, the host's rule for forward_env. */
static bool env_name_ok(const char *k)
{
	if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || *k == '_'))
		return false;
	for (k++; *k; k++)
		if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') ||
		      (*k >= '0' && *k <= '9') || *k == '_'))
			return false;
	return true;
}

/*
 * binding.environment: the variables the host forwards to every command
 * (protocol section 2), names and string values.  The sentence names the
 * variable, never its value, which may be a credential.
 */
static sg_err check_forwarded(json_t *env, struct sg_errinfo *e)
{
	const char *k;
	json_t *v;

	if (env && !json_is_null(env) && !json_is_object(env))
		return sg_err_set(e, SG_E_INVALID_ARGUMENT,
				  "`environment` must be an object of variable names to strings");
	json_object_foreach(env, k, v) {
		if (!env_name_ok(k))
			return sg_err_set(e, SG_E_INVALID_ARGUMENT,
					  "`environment`: \"%.64s\" is not a variable name (a letter or '_', then letters, digits and '_')",
					  k);
		if (!json_is_string(v) ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return sg_err_set(e, SG_E_INVALID_ARGUMENT,
					  "`environment.%s` must be a string without NUL characters",
					  k);
	}
	return SG_OK;
}

/*
 * The binding in canonical form: every field present, absent ones as
 * null/false (protocol section 10), so a repeated initialize compares with
 * json_equal.  remove_workspace_on_exit stays null when absent: the
 * profile decides then (section 2).
 */
sg_err sg_binding_canonical(json_t *d, json_t **out, struct sg_errinfo *e)
{
	json_t *v = json_object_get(d, "version");
	json_t *root = json_object_get(d, "root");
	json_t *session = json_object_get(d, "session");
	json_t *identity = json_object_get(d, "identity");
	json_t *env = json_object_get(d, "environment");
	json_t *rm = json_object_get(d, "remove_workspace_on_exit");
	bool req = false;
	sg_err rc;

	*out = NULL;
	if (!json_is_integer(v) || json_integer_value(v) < VERSION_MIN ||
	    json_integer_value(v) > VERSION_MAX) {
		if (json_is_integer(v))
			return sg_err_set(e, SG_E_UNSUPPORTED,
					  "protocol mismatch: the host speaks version %lld, this backend versions %d and %d",
					  (long long)json_integer_value(v), VERSION_MIN, VERSION_MAX);
		return sg_err_set(e, SG_E_UNSUPPORTED,
				  "protocol mismatch: `version` is missing or not an integer (this backend speaks %d and %d)",
				  VERSION_MIN, VERSION_MAX);
	}
	if (!json_is_string(root) || json_string_value(root)[0] != '/' ||
	    strlen(json_string_value(root)) != json_string_length(root) ||
	    json_string_length(root) >= SG_PATH_MAX)
		return sg_err_set(e, SG_E_INVALID_ARGUMENT,
				  "`root` must be an absolute path");
	if (!sg_path_normalised(json_string_value(root)))
		return sg_err_set(e, SG_E_INVALID_ARGUMENT,
				  "`root` must be a normalised absolute path (no '.' or '..' component, no '//', no trailing '/')");
	if (!json_is_string(session) || json_string_length(session) == 0 ||
	    json_string_length(session) > 128 ||
	    strlen(json_string_value(session)) != json_string_length(session))
		return sg_err_set(e, SG_E_INVALID_ARGUMENT,
				  "`session` must be a non-empty string of at most 128 bytes");
	if (identity && !json_is_null(identity) &&
	    (!json_is_string(identity) || json_string_length(identity) == 0 ||
	     json_string_length(identity) > 128 ||
	     strlen(json_string_value(identity)) != json_string_length(identity)))
		return sg_err_set(e, SG_E_INVALID_ARGUMENT,
				  "`identity` must be a non-empty string of at most 128 bytes");
	if (rm && !json_is_null(rm) && !json_is_boolean(rm))
		return sg_err_set(e, SG_E_INVALID_ARGUMENT,
				  "`remove_workspace_on_exit` must be true or false");
	rc = check_forwarded(env, e);
	if (!rc)
		rc = sg_arg_bool(d, "require_existing_workspace", false, &req, e);
	if (rc)
		return rc;
	*out = json_pack("{s:O, s:O, s:O, s:O, s:O, s:b, s:O}", "version", v,
			 "root", root, "session", session, "identity",
			 identity ? identity : json_null(), "environment",
			 env ? env : json_null(), "require_existing_workspace", req,
			 "remove_workspace_on_exit", rm ? rm : json_null());
	return *out ? SG_OK : sg_err_set(e, SG_E_INTERNAL, "out of memory");
}

/*
 * The host names the session and identity it binds in sandgate's own
 * environment too (WUU_EXECUTION_SESSION, WUU_EXECUTION_ID).  The binding
 * must agree with them; a binding without an identity takes the host's.
 * WUU_EXECUTION_STATE, the host's own state directory for the identity, is
 * not read: sandgate keeps its state under --state-dir.
 */
static sg_err host_names(json_t *binding, struct sg_errinfo *e)
{
	const char *sess = getenv("WUU_EXECUTION_SESSION");
	const char *id = getenv("WUU_EXECUTION_ID");
	json_t *bid = json_object_get(binding, "identity");

	if (sess && *sess &&
	    strcmp(sess, json_string_value(json_object_get(binding, "session"))) != 0)
		return sg_err_set(e, SG_E_INVALID_ARGUMENT,
				  "`session` differs from the WUU_EXECUTION_SESSION sandgate was started with");
	if (!id || !*id)
		return SG_OK;
	if (json_is_string(bid) && strcmp(id, json_string_value(bid)) != 0)
		return sg_err_set(e, SG_E_INVALID_ARGUMENT,
				  "`identity` differs from the WUU_EXECUTION_ID sandgate was started with");
	if (strlen(id) > 128)
		return sg_err_set(e, SG_E_INVALID_ARGUMENT,
				  "WUU_EXECUTION_ID must be at most 128 bytes");
	return json_object_set_new(binding, "identity", json_string(id))
		       ? sg_err_set(e, SG_E_INTERNAL, "out of memory") : SG_OK;
}

/*
 * Whether the environment goes at shutdown: as the binding says, else (the
 * host never says so to a command backend) by the profile in force: kept
 * when persistent or shared, removed otherwise.  A kept environment that is
 * not persistent is removed by `envs gc` once its lifetime passed idle.
 */
static bool remove_on_exit(json_t *binding, const struct sg_profile *p)
{
	json_t *rm = json_object_get(binding, "remove_workspace_on_exit");

	if (json_is_boolean(rm))
		return json_is_true(rm);
	return !p->persistent && !p->shared;
}

static json_t *merge_objects(json_t *a, json_t *b)
{
	json_t *m = json_is_object(a) ? json_deep_copy(a) : json_object();

	if (json_is_object(b))
		json_object_update(m, b);
	return m;
}

/*
 * The facts the reply reports: what sg-helper observed inside the
 * environment, merged with what only the adapter can observe.
 */
json_t *sg_init_facts(json_t *probe, json_t *adapter)
{
	json_t *f = json_object();

	json_object_set_new(f, "isolation",
			    merge_objects(json_object_get(probe, "isolation"),
					  json_object_get(adapter, "isolation")));
	/* Asked only by `sandgate probe` and a candidate that requires one. */
	if (json_object_get(probe, "toolchains"))
		json_object_set_new(f, "toolchains",
				    merge_objects(json_object_get(probe, "toolchains"), NULL));
	json_object_set(f, "landlock_abi", json_object_get(probe, "landlock_abi"));
	if (json_object_get(probe, "confinement"))
		json_object_set(f, "confinement", json_object_get(probe, "confinement"));
	/* Nothing was observed inside yet: the set-up runs beside the first command. */
	if (json_is_true(json_object_get(probe, "deferred")))
		json_object_set_new(f, "probe", json_string("deferred"));
	/* What the adapter read on the host (its cgroup's limits) beats
	 * what the probe could not see from inside. */
	json_object_set_new(f, "observed",
			    merge_objects(json_object_get(probe, "observed"),
					  json_object_get(adapter, "observed")));
	if (json_is_object(adapter)) {
		const char *k;
		json_t *v;

		json_object_foreach(adapter, k, v)
			if (strcmp(k, "isolation") != 0 && strcmp(k, "observed") != 0)
				json_object_set(f, k, v);
	}
	return f;
}

/* The minimal environment commands start from (protocol section 10). */
static sg_err base_env(struct sg_session *s)
{
	const char *tz = getenv("TZ");
	sg_err rc = sg_strv_add(&s->base_env,
				"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");

	if (!rc)
		rc = sg_strv_addf(&s->base_env, "HOME=%s/home", s->env->ctl_dir);
	if (!rc)
		rc = sg_strv_addf(&s->base_env, "TMPDIR=%s/tmp", s->env->ctl_dir);
	if (!rc)
		rc = sg_strv_add(&s->base_env, "LANG=C.UTF-8");
	if (!rc && tz)
		rc = sg_strv_addf(&s->base_env, "TZ=%s", tz);
	if (!rc && s->profile->user)
		rc = sg_strv_addf(&s->base_env, "USER=%s", s->profile->user);
	if (!rc && s->profile->user)
		rc = sg_strv_addf(&s->base_env, "LOGNAME=%s", s->profile->user);
	return rc;
}

/*
 * Record the intent in the state registry before anything is created, so a
 * crash from here on leaves a record `sandgate envs gc` acts on.  An
 * identity already attached to a live session is refused unless both
 * sessions share it: the newcomer's profile says only what the newcomer
 * wants (a binding may set `shared`), so the holder's record decides too.
 * *known: the registry had a record of the identity before (sg_env.known);
 * *persisted: of a persistent environment sessions used (sg_env.persisted).
 */
static sg_err attach(struct sg_session *s, const struct sg_adapter *ad,
		     json_t *binding, bool *known, bool *persisted, struct sg_errinfo *err)
{
	struct sg_reg_key key = { ad->name, s->identity };
	json_t *fields = json_pack("{s:s, s:b, s:b, s:I}", "profile", s->profile->name,
				   "persistent", s->profile->persistent, "shared",
				   s->profile->shared, "expires",
				   (json_int_t)(time(NULL) + s->profile->lifetime_seconds));
	const char *session = json_string_value(json_object_get(binding, "session"));
	int others = 0;
	sg_err rc;

	if (!fields)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	rc = sg_registry_join(s->state_dir, &key, session, fields, &others, known, persisted,
			      err);
	json_decref(fields);
	/*
	 * Refused with others attached: the newcomer does not share, or else
	 * the holder does not.  The sentence names the identity and the side
	 * that does not share, in place of the registry's, which knows
	 * neither.  With none attached, `sandgate envs` is removing the
	 * environment, and the registry's sentence says so.
	 */
	if (rc == SG_E_UNAVAILABLE && others > 0)
		sg_err_clear(err);
	if (rc == SG_E_UNAVAILABLE && others > 0 && !s->profile->shared)
		sg_err_set(err, rc,
			   "identity \"%s\" is in use by another live session and profile \"%s\" is not shared",
			   s->identity, s->profile->name);
	else if (rc == SG_E_UNAVAILABLE && others > 0)
		sg_err_set(err, rc,
			   "identity \"%s\" is in use by another live session and that session is not shared",
			   s->identity);
	return rc;
}

/*
 * A failed provisioning whose create may land anyway (env->may_remain):
 * keep the record, marked cleanup-pending with the session to look for,
 * and remember it for shutdown, which settles it within the budget
 * (shutdown.c, sg_envs_settle).
 */
static void keep_pending(struct sg_session *s)
{
	struct sg_reg_key key = { s->env->ad->name, s->identity };
	struct sg_errinfo err = { 0 };
	json_t *fields = json_pack("{s:s, s:s, s:s}", "status", SG_REG_CLEANUP, "error",
				   "a create's outcome is unknown", "session", s->session_id);

	if (s->env->id[0])
		json_object_set_new(fields, "id", json_string(s->env->id));
	if (sg_registry_update(s->state_dir, &key, fields, &err))
		sg_log_warn("%s", err.msg);
	json_decref(fields);
	pthread_mutex_lock(&s->lock);
	if (!s->pending)
		s->pending = json_array();
	json_array_append_new(s->pending,
			      json_pack("{s:s, s:s, s:s, s:s}", "backend", s->env->ad->name,
					"profile", s->profile->name, "identity", s->identity,
					"session", s->session_id));
	pthread_mutex_unlock(&s->lock);
}

/*
 * A failed provisioning that woke a kept environment and could not see it
 * stopped again (env->may_run): on record as keep-pending, never as kept,
 * so that `envs list` shows what may be running and billed.
 */
static void keep_unsettled(struct sg_session *s)
{
	struct sg_reg_key key = { s->env->ad->name, s->identity };
	struct sg_errinfo err = { 0 };
	json_t *fields = json_pack("{s:s, s:s, s:I}", "status", SG_REG_KEEP_FAILED, "error",
				   "a failed initialize woke it and could not see it stopped again",
				   "expires",
				   (json_int_t)(time(NULL) + s->profile->lifetime_seconds));

	fprintf(stderr,
		"sandgate: the %s environment of identity \"%s\" (profile %s) may still be running after the failed initialize; it is on record as keep-pending, for the next session of the identity to resume and stop (`sandgate envs rm` removes it)\n",
		s->env->ad->name, s->identity, s->profile->name);
	if (!fields || sg_registry_update(s->state_dir, &key, fields, &err))
		sg_log_warn("%s", fields ? err.msg : "out of memory");
	json_decref(fields);
}

/*
 * A provisioning that failed after the registry knew of it: remove what
 * was made (a resumed environment is only let go), then the record, unless
 * another session still uses the environment.  The cleanup runs even when
 * the request itself was cancelled (initialize.h).
 */
void sg_init_undo(struct sg_session *s, bool provisioned)
{
	struct sg_reg_key key = { s->env ? s->env->ad->name : "", s->identity };
	struct sg_errinfo err = { 0 };
	struct sg_cancel none;
	int others = 0;
	sg_err rc = SG_OK;

	if (!s->env)
		return;
	if (sg_registry_detach(s->state_dir, &key, s->session_id, &others, &err))
		sg_log_warn("%s", err.msg);
	if (s->env->may_remain && !others) {
		keep_pending(s);
		return;
	}
	if (s->env->may_run && !others) {
		keep_unsettled(s);
		return;
	}
	if (provisioned && sg_cancel_init(&none) == SG_OK) {
		enum sg_fate fate = s->env->resumed || others ? SG_FATE_DETACH : SG_FATE_REMOVE;

		sg_err_clear(&err);
		rc = s->env->ad->teardown(s->env, fate, &none, &err);
		if (rc)
			sg_log_err("cleanup after a failed initialize: %s", err.msg);
		sg_cancel_release(&none);
	}
	sg_err_clear(&err);
	/* A persistent workspace sessions used keeps its record: it was not made here. */
	if (!rc && !others && !s->env->resumed && !s->env->persisted &&
	    sg_registry_remove(s->state_dir, &key, &err))
		sg_log_warn("%s", err.msg);
}

/*
 * The facts, observed inside the environment, into *probe (new): the
 * probe provision() already ran there, else one exec of it.  Where the
 * environment lives on this host, the probe tries files of the host that
 * no command may read (sandgate's state, a root-only file), so that
 * host_filesystem_restricted is seen.  The toolchains' --version runs were
 * most of a probe's time, and nothing in the host reads them: they are
 * asked only when wanted (`sandgate probe`, a select candidate that
 * requires one), with a second exec where provision()'s probe had none.
 */
static sg_err observe(struct sg_op *op, bool toolchains, json_t **probe)
{
	struct sg_session *s = op->s;
	const char *args[8] = { "probe" }, *const again[] = { "probe", "--toolchains", NULL };
	json_t *more = NULL;
	struct stat st;
	size_t n = 1;
	sg_err rc;

	if (toolchains)
		args[n++] = "--toolchains";
	if (s->env->ad->caps & SG_CAP_HOST_FS) {
		args[n++] = "--hidden";
		args[n++] = s->state_dir;
	}
	if ((s->env->ad->caps & SG_CAP_HOST_FS) && stat("/etc/shadow", &st) == 0 &&
	    !(st.st_mode & S_IROTH)) {
		args[n++] = "--hidden";
		args[n++] = "/etc/shadow";
	}
	if (!s->env->probe && s->env->setup_later && !toolchains && !s->must_observe) {
		/*
		 * The set-up is still under way beside the first command: a
		 * probe now would add a round trip to every session's start,
		 * for facts nothing in the host reads.  The reply then has
		 * only what the adapter observed, and says so (facts.probe
		 * "deferred"); `sandgate probe` has all.
		 */
		*probe = json_pack("{s:b}", "deferred", 1);
		return *probe ? SG_OK : sg_err_set(&op->err, SG_E_INTERNAL, "out of memory");
	}
	if (!s->env->probe)
		return sg_envcall(s, SG_CALL_EXEC, args, NULL, 0, probe, &op->cancel, &op->err);
	rc = sg_envcall_reply(s->env->probe, strlen(s->env->probe), probe, &op->err);
	if (rc || !toolchains || json_object_get(*probe, "toolchains"))
		return rc;
	rc = sg_envcall(s, SG_CALL_EXEC, again, NULL, 0, &more, &op->cancel, &op->err);
	if (!rc)
		json_object_set(*probe, "toolchains", json_object_get(more, "toolchains"));
	json_decref(more);
	return rc;
}

/*
 * Bring up one profile's environment for the binding: build and validate
 * the profile, record the intent, provision, and observe the facts inside
 * (*probe, new).  Errors before anything was created leave *fatal false;
 * a failure after that removes what was made (sg_init_undo) and sets it.
 */
sg_err sg_init_bring_up(struct sg_op *op, json_t *binding, const char *name,
			bool toolchains, json_t **probe, bool *fatal)
{
	struct sg_session *s = op->s;
	json_t *narrow = NULL;
	const struct sg_adapter *ad;
	struct sg_env *env = NULL;
	bool provisioned = false, known = true, persisted = false;
	sg_err rc;

	*fatal = false;
	*probe = NULL;
	/* The host's profile may only narrow the operator's (protocol section 2). */
	rc = sg_config_host_profile(getenv("WUU_EXECUTION_PROFILE"), &narrow, &op->err);
	if (!rc)
		rc = sg_config_profile(s->cfg, name, narrow, &s->profile, &op->err);
	json_decref(narrow);
	if (rc)
		goto out;
	ad = sg_adapter_find(s->profile->backend);
	if (!ad) {
		rc = sg_err_set(&op->err, SG_E_UNSUPPORTED,
				"backend \"%s\" (profile \"%s\") is not built into this sandgate",
				s->profile->backend, s->profile->name);
		goto out;
	}
	rc = ad->validate(s->profile, &op->err);
	if (rc)
		goto out;
	s->identity = strdup(json_is_string(json_object_get(binding, "identity"))
				     ? json_string_value(json_object_get(binding, "identity"))
				     : json_string_value(json_object_get(binding, "session")));
	rc = attach(s, ad, binding, &known, &persisted, &op->err);
	if (rc)
		goto out;
	sg_crashpoint("provision:intent");
	*fatal = true;
	env = calloc(1, ad->env_size);
	if (!env) {
		rc = sg_err_set(&op->err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	s->root = strdup(json_string_value(json_object_get(binding, "root")));
	s->session_id = strdup(json_string_value(json_object_get(binding, "session")));
	env->ad = ad;
	env->profile = s->profile;
	env->root = s->root;
	env->session = s->session_id;
	env->identity = s->identity;
	env->state_dir = s->state_dir;
	env->helper_host = s->helper_path;
	env->require_existing = json_is_true(json_object_get(binding, "require_existing_workspace"));
	env->remove_on_exit = remove_on_exit(binding, s->profile);
	env->known = known;
	env->persisted = persisted && s->profile->persistent;
	s->env = env;
	rc = ad->provision(env, &op->cancel, &op->err);
	if (rc)
		goto out;
	provisioned = true;
	sg_crashpoint("provision:created");
	rc = base_env(s);
	if (rc) {
		sg_err_set(&op->err, rc, "out of memory");
		goto out;
	}
	rc = observe(op, toolchains, probe);
	if (!rc) {
		const char *std = json_string_value(
			json_object_get(json_object_get(*probe, "confinement"), "standard"));

		s->landlock_abi = json_is_integer(json_object_get(*probe, "landlock_abi"))
					  ? (int)json_integer_value(json_object_get(*probe, "landlock_abi"))
					  : SG_LANDLOCK_UNSEEN;
		s->standard_by_mounts = std && strcmp(std, "read_only_root") == 0;
	}
out:
	if (rc && *fatal)
		sg_init_undo(s, provisioned);
	return rc;
}

/*
 * Free the session's environment fields: for a candidate that was not
 * chosen, and at the end.  Remote state is not touched (the environment
 * was already removed or let go).
 */
void sg_init_reset(struct sg_session *s)
{
	if (s->env) {
		/* The adapter frees what provision() allocated (adapter.h). */
		s->env->ad->release(s->env);
		free(s->env);
		s->env = NULL;
	}
	sg_profile_free(s->profile);
	s->profile = NULL;
	free(s->identity);
	free(s->root);
	free(s->session_id);
	s->identity = s->root = s->session_id = NULL;
	sg_strv_release(&s->base_env);
	s->landlock_abi = 0;
	s->standard_by_mounts = false;
}

sg_err sg_init_run(struct sg_op *op, json_t **out)
{
	struct sg_session *s = op->s;
	const char *token = NULL;
	json_t *binding = NULL;
	bool fatal;
	sg_err rc;

	*out = NULL;
	rc = sg_arg_str(op->req, "token", true, &token, &op->err);
	if (!rc)
		rc = sg_binding_canonical(op->data, &binding, &op->err);
	if (!rc)
		rc = host_names(binding, &op->err);
	if (rc) {
		json_decref(binding);
		return rc;
	}
	pthread_mutex_lock(&s->lock);
	while (s->state == SG_S_INITIALIZING)
		pthread_cond_wait(&s->init_done, &s->lock);
	if (s->state == SG_S_FAILED) {
		rc = sg_err_set(&op->err, SG_E_INIT_FAILED,
				"reconnect with a new connection");
	} else if (s->state == SG_S_READY) {
		if (!json_equal(binding, s->binding) || strcmp(token, s->token) != 0)
			rc = sg_err_set(&op->err, SG_E_BINDING_CONFLICT,
					"this connection is already bound differently; the first binding stays");
		else
			*out = json_deep_copy(s->init_reply);
	} else {
		s->state = SG_S_INITIALIZING;
		/* Before it is bound: a shutdown meanwhile keeps the host's grace (shutdown.c). */
		s->version = (int)json_integer_value(json_object_get(binding, "version"));
	}
	pthread_mutex_unlock(&s->lock);
	if (rc || *out) {
		json_decref(binding);
		return rc;
	}

	rc = s->mode->initialize(op, binding, &fatal);
	/* A cancelled initialize is final too (protocol section 2). */
	if (rc && sg_cancel_check(&op->cancel))
		fatal = true;

	pthread_mutex_lock(&s->lock);
	if (!rc) {
		sg_crashpoint("ready");
		s->binding = binding;
		s->token = strdup(token);
		s->version = (int)json_integer_value(json_object_get(binding, "version"));
		s->forwarded = json_incref(json_object_get(binding, "environment"));
		s->state = SG_S_READY;
		*out = json_deep_copy(s->init_reply);
	} else {
		json_decref(binding);
		s->state = fatal ? SG_S_FAILED : SG_S_NEW;
		if (!fatal) {
			/* The host may retry: forget this attempt entirely. */
			sg_profile_free(s->profile);
			s->profile = NULL;
			free(s->identity);
			s->identity = NULL;
		}
	}
	pthread_cond_broadcast(&s->init_done);
	pthread_mutex_unlock(&s->lock);
	return rc;
}
