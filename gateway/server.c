/*
 * server.c - dispatch, the worker pool, initialize, cancel and shutdown.
 *
 * Invariants: the reader (main) thread parses and routes frames and never
 * blocks on the environment; a request's terminal reply is queued by the
 * worker that ran it, after the handler returned, exactly once; an op is in
 * the in-flight list from dispatch until that reply is queued, which is
 * what cancel looks at and what shutdown waits for.
 */
#define _GNU_SOURCE /* asprintf */
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/crash.h"
#include "base/limits.h"
#include "base/log.h"
#include "cli.h"
#include "registry.h"
#include "session.h"
#include "wire.h"

typedef sg_err (*handler_fn)(struct sg_op *op, json_t **out);

struct method {
	const char *name;
	handler_fn run;
	bool before_init; /* allowed before initialize succeeded */
};

struct server {
	struct sg_session s;
	const struct sg_server_opts *o;

	pthread_mutex_t lock;
	pthread_cond_t work, idle;
	struct sg_op *inflight;   /* every op between dispatch and reply */
	struct job *jobs, **jobs_tail;
	int replying;             /* ops out of the list whose reply is going out */
	int threads, idle_threads;
	int queued;               /* jobs waiting for a worker */
	bool quit;

	FILE *audit;
	pthread_mutex_t audit_lock;
};

static sg_err run_initialize(struct sg_op *op, json_t **out);

static const struct method methods[] = {
	{ "initialize", run_initialize, true },
	{ "execute", sg_tools_execute, false },
	{ "process/start", sg_proc_start, false },
	{ "process/list", sg_proc_list, false },
	{ "process/get", sg_proc_get, false },
	{ "process/read", sg_proc_read, false },
	{ "process/stop", sg_proc_stop, false },
	{ "export/open", sg_export_open, false },
	{ "export/read", sg_export_read, false },
	{ "export/close", sg_export_close, false },
	/* Answered on the reader thread; allowed while initialize runs, so an
	 * initialize can be cancelled. */
	{ "cancel", NULL, true },
};

void sg_op_after(struct sg_op *op, json_t *ev)
{
	if (!op->after)
		op->after = json_array();
	json_array_append_new(op->after, ev);
}

static void op_free(struct sg_op *op)
{
	json_decref(op->id);
	json_decref(op->req);
	json_decref(op->after);
	free(op->after_id);
	free(op->raw_reply);
	sg_cancel_release(&op->cancel);
	free(op);
}

/* ---- replies and the audit log ---- */

static void send_error(struct sg_session *s, json_t *id, const struct sg_errinfo *e)
{
	char text[SG_ERR_MSG + 64];

	sg_err_format(e, text, sizeof(text));
	sg_wire_send(s->wire, json_pack("{s:O, s:s}", "id", id, "error", text));
}

static void send_error_code(struct sg_session *s, json_t *id, sg_err code,
			    const char *fmt, ...) SG_PRINTF(4, 5);
static void send_error_code(struct sg_session *s, json_t *id, sg_err code,
			    const char *fmt, ...)
{
	struct sg_errinfo e = { 0 };
	va_list ap;

	va_start(ap, fmt);
	sg_err_vset(&e, code, fmt, ap);
	va_end(ap);
	send_error(s, id, &e);
}

/*
 * One line per request: what ran and how it ended, never its arguments
 * (they may hold file contents or secrets).
 */
static void audit(struct server *sv, const struct sg_op *op, sg_err rc)
{
	char ts[32];
	time_t now = time(NULL);
	struct tm tm;
	json_t *line;
	char *text;

	if (!sv->audit)
		return;
	gmtime_r(&now, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	line = json_pack("{s:s, s:s, s:s?, s:s, s:I}", "ts", ts, "method",
			 op->method, "tool", op->tool, "outcome",
			 rc ? sg_err_word(rc) : op->tool_failed ? "is_error" : "ok",
			 "duration_ms", (json_int_t)((sg_now_ns() - op->start_ns) / 1000000));
	text = json_dumps(line, JSON_COMPACT);
	json_decref(line);
	if (!text)
		return;
	pthread_mutex_lock(&sv->audit_lock);
	fprintf(sv->audit, "%s\n", text);
	fflush(sv->audit);
	pthread_mutex_unlock(&sv->audit_lock);
	free(text);
}

/* ---- the worker pool ---- */

/*
 * The terminal reply.  The op leaves the in-flight list first: once the
 * host can read the reply, a cancel of that id must answer false and the
 * id may be used again.
 */
static void finish(struct server *sv, struct sg_op *op, sg_err rc, json_t *data)
{
	struct sg_op **p;

	pthread_mutex_lock(&sv->lock);
	for (p = &sv->inflight; *p; p = &(*p)->next) {
		if (*p == op) {
			*p = op->next;
			break;
		}
	}
	sv->replying++;
	pthread_mutex_unlock(&sv->lock);
	/* Before the reply: the log then lists calls in the order the host
	 * saw them end. */
	audit(sv, op, rc);
	if (!rc && op->raw_reply) {
		sg_wire_send_text(sv->s.wire, op->raw_reply, op->raw_len);
		op->raw_reply = NULL;
	} else if (!rc) {
		sg_wire_send(sv->s.wire, json_pack("{s:O, s:o}", "id", op->id, "data",
						   data ? data : json_object()));
	} else {
		send_error(&sv->s, op->id, &op->err);
	}
	if (!rc && op->after) {
		json_t *ev;
		size_t i;

		json_array_foreach(op->after, i, ev)
			sg_wire_send(sv->s.wire, json_incref(ev));
	}
	if (!rc && op->after_sent)
		op->after_sent(op);
	op_free(op);
	pthread_mutex_lock(&sv->lock);
	sv->replying--;
	pthread_cond_broadcast(&sv->idle);
	pthread_mutex_unlock(&sv->lock);
}

/* A queued request: ops chain through `next` in the in-flight list, so the
 * queue has links of its own. */
struct job {
	struct job *next;
	struct sg_op *op;
	handler_fn run;
};

static void *worker_main(void *arg)
{
	struct server *sv = arg;

	pthread_mutex_lock(&sv->lock);
	for (;;) {
		struct job *j;
		json_t *data = NULL;
		sg_err rc;

		while (!sv->jobs && !sv->quit) {
			sv->idle_threads++;
			pthread_cond_wait(&sv->work, &sv->lock);
			sv->idle_threads--;
		}
		if (!sv->jobs)
			break;
		j = sv->jobs;
		sv->jobs = j->next;
		sv->queued--;
		if (!sv->jobs)
			sv->jobs_tail = &sv->jobs;
		pthread_mutex_unlock(&sv->lock);

		/*
		 * A host's cancel sets err before it fires, so a fired token with
		 * err set means "cancelled by the host": answer that without
		 * running.  A token fired by shutdown alone (drain() leaves err
		 * empty) still runs the handler: a request received before EOF
		 * gets its own answer when it needs no provider work (a
		 * validation error, a process/list), while anything that would
		 * reach the provider sees the fired token first (exec and http
		 * check it before they start) and ends `cancelled`.
		 */
		rc = sg_cancel_check(&j->op->cancel);
		if (rc && j->op->err.code)
			sg_err_set(&j->op->err, rc, "the request was cancelled before it ran");
		else
			rc = j->run(j->op, &data);
		if (rc == SG_E_CANCELLED && !j->op->err.code)
			sg_err_set(&j->op->err, rc, "the gateway is shutting down");
		else if (rc && !j->op->err.code)
			sg_err_set(&j->op->err, rc, "%s failed", j->op->method);
		if (rc)
			json_decref(data), data = NULL;
		finish(sv, j->op, rc, data);
		free(j);
		pthread_mutex_lock(&sv->lock);
	}
	sv->threads--;
	pthread_cond_broadcast(&sv->idle);
	pthread_mutex_unlock(&sv->lock);
	return NULL;
}

/* Queue a job, growing the pool when no worker is idle (up to the cap;
 * past it the job waits for a free worker). */
static sg_err enqueue(struct server *sv, struct sg_op *op, handler_fn run)
{
	struct job *j = calloc(1, sizeof(*j));
	pthread_t t;

	if (!j)
		return SG_E_INTERNAL;
	j->op = op;
	j->run = run;
	pthread_mutex_lock(&sv->lock);
	*sv->jobs_tail = j;
	sv->jobs_tail = &j->next;
	sv->queued++;
	/*
	 * An idle worker already signalled counts as idle until it wakes, so
	 * compare with the queue, not with zero: every job of a burst finds a worker.
	 */
	if (sv->queued > sv->idle_threads && sv->threads < SG_WORKERS_MAX) {
		if (pthread_create(&t, NULL, worker_main, sv) == 0) {
			pthread_detach(t);
			sv->threads++;
		}
	}
	pthread_cond_signal(&sv->work);
	pthread_mutex_unlock(&sv->lock);
	return SG_OK;
}

/* ---- initialize ---- */

/*
 * The binding in canonical form: every field present, absent ones as
 * null/false (protocol section 10), so a repeated initialize compares with
 * json_equal.
 */
sg_err sg_binding_canonical(json_t *d, json_t **out, struct sg_errinfo *e)
{
	json_t *v = json_object_get(d, "version");
	json_t *root = json_object_get(d, "root");
	json_t *session = json_object_get(d, "session");
	json_t *identity = json_object_get(d, "identity");
	json_t *env = json_object_get(d, "environment");
	bool req = false, rm = false;
	sg_err rc;

	*out = NULL;
	if (!json_is_integer(v) || json_integer_value(v) != 4) {
		if (json_is_integer(v))
			return sg_err_set(e, SG_E_UNSUPPORTED,
					  "protocol version %lld (this backend speaks 4)",
					  (long long)json_integer_value(v));
		return sg_err_set(e, SG_E_UNSUPPORTED,
				  "protocol version missing or not an integer (this backend speaks 4)");
	}
	if (!json_is_string(root) || json_string_value(root)[0] != '/' ||
	    strlen(json_string_value(root)) != json_string_length(root) ||
	    json_string_length(root) >= SG_PATH_MAX)
		return sg_err_set(e, SG_E_INVALID_ARGUMENT,
				  "`root` must be an absolute path");
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
	if (env && !json_is_null(env) && !json_is_object(env))
		return sg_err_set(e, SG_E_INVALID_ARGUMENT,
				  "`environment` must be an object");
	rc = sg_arg_bool(d, "require_existing_workspace", false, &req, e);
	if (!rc)
		rc = sg_arg_bool(d, "remove_workspace_on_exit", false, &rm, e);
	if (rc)
		return rc;
	*out = json_pack("{s:i, s:O, s:O, s:O, s:O, s:b, s:b}", "version", 4,
			 "root", root, "session", session, "identity",
			 identity ? identity : json_null(), "environment",
			 env ? env : json_null(), "require_existing_workspace", req,
			 "remove_workspace_on_exit", rm);
	return *out ? SG_OK : sg_err_set(e, SG_E_INTERNAL, "out of memory");
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
static json_t *facts_of(json_t *probe, json_t *adapter)
{
	json_t *f = json_object();

	json_object_set_new(f, "isolation",
			    merge_objects(json_object_get(probe, "isolation"),
					  json_object_get(adapter, "isolation")));
	json_object_set_new(f, "toolchains",
			    merge_objects(json_object_get(probe, "toolchains"), NULL));
	json_object_set(f, "landlock_abi", json_object_get(probe, "landlock_abi"));
	json_object_set_new(f, "observed",
			    merge_objects(json_object_get(probe, "observed"), NULL));
	if (json_is_object(adapter)) {
		const char *k;
		json_t *v;

		json_object_foreach(adapter, k, v)
			if (strcmp(k, "isolation") != 0)
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

static json_t *method_names(void)
{
	json_t *a = json_array();

	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		json_array_append_new(a, json_string(methods[i].name));
	return a;
}

/*
 * Record the intent in the state registry before anything is created, so a
 * crash from here on leaves a record `sandgate envs gc` acts on.  A
 * non-shared identity already attached to a live session is refused.
 */
static sg_err attach(struct sg_session *s, const struct sg_adapter *ad,
		     json_t *binding, struct sg_errinfo *err)
{
	struct sg_reg_key key = { ad->name, s->identity };
	json_t *fields = json_pack("{s:s, s:b, s:b, s:I}", "profile", s->profile->name,
				   "persistent", s->profile->persistent, "shared",
				   s->profile->shared, "expires",
				   (json_int_t)(time(NULL) + s->profile->lifetime_seconds));
	const char *session = json_string_value(json_object_get(binding, "session"));
	int others = 0, left = 0;
	sg_err rc;

	rc = sg_registry_attach(s->state_dir, &key, session, fields, &others, err);
	json_decref(fields);
	if (!rc && others > 0 && !s->profile->shared) {
		struct sg_errinfo ignore = { 0 };

		if (sg_registry_detach(s->state_dir, &key, session, &left, &ignore))
			sg_log_warn("cannot detach from the registry: %s", ignore.msg);
		rc = sg_err_set(err, SG_E_UNAVAILABLE,
				"identity \"%s\" is in use by another live session and profile \"%s\" is not shared",
				s->identity, s->profile->name);
	}
	return rc;
}

/*
 * A provisioning that failed after the registry knew of it: remove what
 * was made (a resumed environment is only let go), then the record, unless
 * another session still uses the environment.  The cleanup runs even when
 * the request itself was cancelled.
 */
static void undo(struct sg_session *s, bool provisioned)
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
	if (provisioned && sg_cancel_init(&none) == SG_OK) {
		enum sg_fate fate = s->env->resumed || others ? SG_FATE_DETACH : SG_FATE_REMOVE;

		sg_err_clear(&err);
		rc = s->env->ad->teardown(s->env, fate, &none, &err);
		if (rc)
			sg_log_err("cleanup after a failed initialize: %s", err.msg);
		sg_cancel_release(&none);
	}
	sg_err_clear(&err);
	if (!rc && !others && !s->env->resumed && sg_registry_remove(s->state_dir, &key, &err))
		sg_log_warn("%s", err.msg);
}

/*
 * Bring up one profile's environment for the binding: build and validate
 * the profile, record the intent, provision, and observe the facts inside
 * (*probe, new).  Errors before anything was created leave *fatal false;
 * a failure after that removes what was made (undo) and sets it.
 */
static sg_err bring_up(struct sg_op *op, json_t *binding, const char *name,
		       json_t **probe, bool *fatal)
{
	struct sg_session *s = op->s;
	json_t *envobj = json_object_get(binding, "environment");
	const struct sg_adapter *ad;
	struct sg_env *env = NULL;
	bool provisioned = false;
	sg_err rc;

	*fatal = false;
	*probe = NULL;
	rc = sg_config_profile(s->cfg, name, json_is_object(envobj) ? envobj : NULL,
			       &s->profile, &op->err);
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
	rc = attach(s, ad, binding, &op->err);
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
	env->remove_on_exit = json_is_true(json_object_get(binding, "remove_workspace_on_exit"));
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
	{
		const char *args[] = { "probe", NULL };

		/* Facts are observed inside the environment, so always exec. */
		rc = sg_envcall(s, SG_CALL_EXEC, args, NULL, 0, probe, &op->cancel,
				&op->err);
	}
	if (!rc)
		s->landlock_abi = (int)json_integer_value(json_object_get(*probe, "landlock_abi"));
out:
	if (rc && *fatal)
		undo(s, provisioned);
	return rc;
}

/*
 * Free the session's environment fields: for a candidate that was not
 * chosen, and at the end.  Remote state is not touched (the environment
 * was already removed or let go).
 */
static void reset_env(struct sg_session *s)
{
	if (s->env) {
		if (s->env->ad->release)
			s->env->ad->release(s->env);
		json_decref(s->env->facts);
		free(s->env->helper);
		free(s->env->ctl_dir);
		free(s->env->host_root);
		free(s->env->host_ctl);
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
}

/* "3.11.2" >= "3.10"?  Dotted numbers, missing parts are 0. */
static bool version_at_least(const char *have, const char *want)
{
	while (*want) {
		long h = strtol(have, (char **)&have, 10);
		long w = strtol(want, (char **)&want, 10);

		if (h != w)
			return h > w;
		if (*have == '.')
			have++;
		if (*want == '.')
			want++;
		else if (*want)
			return false;
	}
	return true;
}

/*
 * Does an environment's facts meet a candidate's requirements?  When not,
 * why goes into why.  Isolation is judged from observed facts only, so
 * the local backend without bubblewrap never passes "required".
 */
static bool meets(json_t *require, json_t *facts, char *why, size_t n)
{
	json_t *iso = json_object_get(facts, "isolation"), *v;
	const char *k;

	json_object_foreach(require, k, v) {
		if (strcmp(k, "isolation") == 0) {
			const char *cls = json_string_value(json_object_get(facts, "safety_class"));

			if (!json_is_string(v) || strcmp(json_string_value(v), "required") != 0)
				continue;
			if (!json_is_true(json_object_get(iso, "process_contained")) ||
			    !json_is_true(json_object_get(iso, "host_filesystem_restricted")) ||
			    !cls || strcmp(cls, "trusted_local") == 0) {
				snprintf(why, n, "isolation is required and was not observed (safety_class %s)",
					 cls ? cls : "unknown");
				return false;
			}
		} else if (strcmp(k, "network_isolated") == 0) {
			if (json_is_true(v) && !json_is_true(json_object_get(iso, "network_isolated"))) {
				snprintf(why, n, "the network is not isolated");
				return false;
			}
		} else if (strcmp(k, "toolchains") == 0) {
			json_t *have = json_object_get(facts, "toolchains"), *want;
			const char *tool;

			json_object_foreach(v, tool, want) {
				const char *hv = json_string_value(json_object_get(have, tool));
				const char *wv = json_string_value(want);

				if (!hv) {
					snprintf(why, n, "toolchain %s was not found", tool);
					return false;
				}
				if (wv && strncmp(wv, ">=", 2) == 0 && !version_at_least(hv, wv + 2)) {
					snprintf(why, n, "toolchain %s is %s, %s is required", tool, hv, wv);
					return false;
				}
			}
		} else {
			snprintf(why, n, "unknown requirement \"%s\"", k);
			return false;
		}
	}
	return true;
}

static bool candidate_fits(json_t *candidate, json_t *probe, json_t *adapter_facts,
			   char *why, size_t n)
{
	json_t *facts = facts_of(probe, adapter_facts);
	bool ok = meets(json_object_get(candidate, "require"), facts, why, n);

	json_decref(facts);
	return ok;
}

/*
 * A `select` profile: bring up its candidates in order and keep the first
 * whose observed facts meet its requirements; each one skipped is removed
 * and recorded with the reason in *selection (new).
 */
static sg_err select_candidate(struct sg_op *op, json_t *binding, json_t *candidates,
			       json_t **probe, json_t **selection, bool *fatal)
{
	struct sg_session *s = op->s;
	json_t *c;
	size_t i;
	sg_err rc = SG_E_UNAVAILABLE;

	*selection = json_array();
	*fatal = false;
	json_array_foreach(candidates, i, c) {
		const char *name = json_string_value(json_object_get(c, "profile"));
		char why[SG_ERR_MSG] = "";
		bool made = false;

		if (!name) {
			rc = sg_err_set(&op->err, SG_E_INVALID_ARGUMENT,
					"candidate %zu of profile \"%s\" names no profile", i,
					s->profile_name ? s->profile_name : "(default)");
			break;
		}
		sg_err_clear(&op->err);
		rc = bring_up(op, binding, name, probe, &made);
		*fatal = *fatal || made;
		if (rc) {
			snprintf(why, sizeof(why), "%s: %.200s", sg_err_word(rc), op->err.msg);
		} else if (!candidate_fits(c, *probe, s->env->facts, why, sizeof(why))) {
			struct sg_errinfo ignore = { 0 };
			struct sg_reg_key key = { s->env->ad->name, s->identity };
			int others = 0;

			rc = SG_E_UNAVAILABLE;
			if (sg_registry_detach(s->state_dir, &key, s->session_id, &others, &ignore))
				sg_log_warn("%s", ignore.msg);
			if (s->env->ad->teardown(s->env, s->env->resumed || others ? SG_FATE_DETACH
										   : SG_FATE_REMOVE,
						 &op->cancel, &ignore))
				sg_log_warn("removing skipped candidate %s: %s", name, ignore.msg);
			else if (!s->env->resumed && !others &&
				 sg_registry_remove(s->state_dir, &key, &ignore))
				sg_log_warn("%s", ignore.msg);
		}
		if (!rc) {
			json_array_append_new(*selection, json_pack("{s:s, s:b}", "profile", name,
								     "chosen", 1));
			sg_err_clear(&op->err);
			return SG_OK;
		}
		json_array_append_new(*selection, json_pack("{s:s, s:b, s:s}", "profile", name,
							     "chosen", 0, "reason", why));
		json_decref(*probe);
		*probe = NULL;
		reset_env(s);
		if (sg_cancel_check(&op->cancel))
			break;
	}
	sg_err_clear(&op->err);
	{
		char *list = json_dumps(*selection, JSON_COMPACT);

		rc = sg_err_set(&op->err, sg_cancel_check(&op->cancel) ? SG_E_CANCELLED : SG_E_UNAVAILABLE,
				"no candidate profile was usable: %.200s", list ? list : "");
		free(list);
	}
	return rc;
}

/*
 * Provision the environment for the binding (or, for a `select` profile,
 * the first candidate that meets its requirements) and build the reply.
 */
static sg_err provision(struct sg_op *op, json_t *binding, bool *fatal)
{
	struct sg_session *s = op->s;
	json_t *probe = NULL, *selection = NULL, *facts, *raw;
	struct sg_profile *chosen = NULL;
	sg_err rc;

	*fatal = false;
	rc = sg_config_profile(s->cfg, s->profile_name, NULL, &chosen, &op->err);
	if (rc)
		return rc;
	raw = chosen->raw;
	if (strcmp(chosen->backend, "select") == 0) {
		if (!json_is_array(json_object_get(raw, "candidates")))
			rc = sg_err_set(&op->err, SG_E_INVALID_ARGUMENT,
					"profile \"%s\": a select profile needs `candidates`",
					chosen->name);
		else
			rc = select_candidate(op, binding, json_object_get(raw, "candidates"),
					      &probe, &selection, fatal);
	} else {
		rc = bring_up(op, binding, s->profile_name, &probe, fatal);
	}
	sg_profile_free(chosen);
	if (rc)
		goto out;
	rc = sg_exports_new(s);
	if (!rc)
		rc = sg_procs_new(s);
	if (rc) {
		sg_err_set(&op->err, rc, "out of memory");
		goto fail;
	}
	{
		struct sg_reg_key key = { s->env->ad->name, s->identity };
		json_t *done = json_pack("{s:s, s:s, s:O}", "id", s->env->id, "status",
					 SG_REG_ACTIVE, "resources",
					 json_object_get(s->env->facts, "resources")
						 ? json_object_get(s->env->facts, "resources")
						 : json_null());

		rc = sg_registry_update(s->state_dir, &key, done, &op->err);
		json_decref(done);
		if (rc)
			goto fail;
	}
	facts = facts_of(probe, s->env->facts);
	if (selection)
		json_object_set(facts, "selection", selection);
	s->init_reply = json_pack(
		"{s:i, s:[s], s:o, s:o, s:{s:s, s:s, s:s, s:b, s:o}}", "version", 4,
		"capabilities", "process.start.v1", "methods", method_names(),
		"tools", sg_tools_names(), "environment", "backend", s->env->ad->name,
		"profile", s->profile->name, "id", s->env->id, "resumed", s->env->resumed,
		"facts", facts);
	goto out;
fail:
	*fatal = true;
	undo(s, true);
out:
	json_decref(probe);
	json_decref(selection);
	return rc;
}

static sg_err run_initialize(struct sg_op *op, json_t **out)
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
	if (rc)
		return rc;
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
	}
	pthread_mutex_unlock(&s->lock);
	if (rc || *out) {
		json_decref(binding);
		return rc;
	}

	rc = provision(op, binding, &fatal);
	/* A cancelled initialize is final too (protocol section 2). */
	if (rc && sg_cancel_check(&op->cancel))
		fatal = true;

	pthread_mutex_lock(&s->lock);
	if (!rc) {
		sg_crashpoint("ready");
		s->binding = binding;
		s->token = strdup(token);
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

/* ---- dispatch (reader thread) ---- */

static struct sg_op *find_inflight(struct server *sv, json_t *id)
{
	for (struct sg_op *op = sv->inflight; op; op = op->next)
		if (json_equal(op->id, id))
			return op;
	return NULL;
}

/* cancel: answered at once; the target replies `cancelled:` when its
 * handler has actually stopped. */
static void do_cancel(struct server *sv, json_t *id, json_t *data)
{
	json_t *target = json_object_get(data, "id");
	struct sg_op *op;
	bool found = false;

	if (!json_is_string(target) && !json_is_integer(target)) {
		send_error_code(&sv->s, id, SG_E_INVALID_ARGUMENT,
				"`id` must be the string or integer id of a request");
		return;
	}
	pthread_mutex_lock(&sv->lock);
	op = find_inflight(sv, target);
	if (op) {
		sg_err_set(&op->err, SG_E_CANCELLED, "request cancelled by the host");
		sg_cancel_fire(&op->cancel, SG_E_CANCELLED);
		found = true;
	}
	pthread_mutex_unlock(&sv->lock);
	sg_wire_send(sv->s.wire, json_pack("{s:O, s:{s:b}}", "id", id, "data",
					   "cancelled", found));
}

static void dispatch(struct server *sv, json_t *frame)
{
	struct sg_session *s = &sv->s;
	json_t *id = json_object_get(frame, "id");
	json_t *m = json_object_get(frame, "method");
	json_t *data = json_object_get(frame, "data");
	const struct method *meth = NULL;
	const char *token;
	struct sg_op *op;
	int state;

	if (!json_is_string(m)) {
		send_error_code(s, id, SG_E_INVALID_REQUEST, "`method` must be a string");
		return;
	}
	if (data && !json_is_null(data) && !json_is_object(data)) {
		send_error_code(s, id, SG_E_INVALID_REQUEST, "`data` must be an object");
		return;
	}
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (strcmp(methods[i].name, json_string_value(m)) == 0)
			meth = &methods[i];
	if (!meth) {
		send_error_code(s, id, SG_E_UNKNOWN_METHOD, "no method \"%.64s\"",
				json_string_value(m));
		return;
	}
	pthread_mutex_lock(&s->lock);
	state = s->state;
	pthread_mutex_unlock(&s->lock);
	if (!meth->before_init) {
		if (state == SG_S_FAILED) {
			send_error_code(s, id, SG_E_INIT_FAILED, "reconnect with a new connection");
			return;
		}
		if (state != SG_S_READY) {
			send_error_code(s, id, SG_E_NOT_INITIALIZED,
					"call initialize before %s", meth->name);
			return;
		}
		token = json_string_value(json_object_get(frame, "token"));
		if (!token || strcmp(token, s->token) != 0) {
			send_error_code(s, id, SG_E_BAD_TOKEN,
					"the request's token does not match the connection's");
			return;
		}
	}
	if (!data || json_is_null(data)) {
		json_object_set_new(frame, "data", json_object());
		data = json_object_get(frame, "data");
	}
	if (!meth->run && state == SG_S_READY) {
		token = json_string_value(json_object_get(frame, "token"));
		if (!token || strcmp(token, s->token) != 0) {
			send_error_code(s, id, SG_E_BAD_TOKEN,
					"the request's token does not match the connection's");
			return;
		}
	}
	if (!meth->run) {
		do_cancel(sv, id, data);
		return;
	}
	op = calloc(1, sizeof(*op));
	if (!op || sg_cancel_init(&op->cancel)) {
		free(op);
		send_error_code(s, id, SG_E_INTERNAL, "out of memory");
		return;
	}
	op->id = json_incref(id);
	op->req = json_incref(frame);
	op->method = meth->name;
	op->data = data;
	op->s = s;
	op->start_ns = sg_now_ns();
	pthread_mutex_lock(&sv->lock);
	if (find_inflight(sv, id)) {
		pthread_mutex_unlock(&sv->lock);
		op_free(op);
		send_error_code(s, id, SG_E_INVALID_REQUEST,
				"a request with this id is still in flight");
		return;
	}
	op->next = sv->inflight;
	sv->inflight = op;
	pthread_mutex_unlock(&sv->lock);
	if (enqueue(sv, op, meth->run)) {
		sg_err_set(&op->err, SG_E_INTERNAL, "out of memory");
		finish(sv, op, SG_E_INTERNAL, NULL);
	}
}

/* ---- shutdown ---- */

/*
 * Keep, remove or let go of the environment, as the binding and the other
 * sessions attached to it say, and record the outcome.  Returns non-zero
 * when the environment may remain against the binding's wish.
 */
static int teardown(struct sg_session *s, struct sg_cancel *deadline)
{
	struct sg_reg_key key = { s->env->ad->name, s->identity };
	struct sg_errinfo err = { 0 };
	enum sg_fate fate;
	json_t *fields;
	int others = 0;
	sg_err rc;

	if (sg_registry_detach(s->state_dir, &key, s->session_id, &others, &err))
		sg_log_warn("%s", err.msg);
	sg_crashpoint("teardown:detached");
	fate = others ? SG_FATE_DETACH
		      : s->env->remove_on_exit ? SG_FATE_REMOVE : SG_FATE_KEEP;
	sg_err_clear(&err);
	rc = s->env->ad->teardown(s->env, fate, deadline, &err);
	if (rc) {
		fprintf(stderr,
			"sandgate: cleanup of environment %s (%s, profile %s) did not finish: %s: %s; it may remain: run `sandgate envs gc`\n",
			s->env->id, s->env->ad->name, s->profile->name, sg_err_word(rc),
			err.msg);
		fields = json_pack("{s:s, s:s}", "status", SG_REG_CLEANUP, "error", err.msg);
	} else if (fate == SG_FATE_REMOVE) {
		fields = NULL;
		sg_err_clear(&err);
		if (sg_registry_remove(s->state_dir, &key, &err))
			sg_log_warn("%s", err.msg);
	} else {
		/* The idle clock starts now: gc removes a kept non-persistent
		 * environment once lifetime_seconds have passed unattached. */
		fields = others ? NULL
				: json_pack("{s:s, s:I}", "status", SG_REG_KEPT, "expires",
					    (json_int_t)(time(NULL) + s->profile->lifetime_seconds));
	}
	if (fields) {
		sg_err_clear(&err);
		if (sg_registry_update(s->state_dir, &key, fields, &err))
			sg_log_warn("%s", err.msg);
		json_decref(fields);
	}
	return rc ? 1 : 0;
}

static struct sg_wire *signal_wire;

static void on_signal(int sig)
{
	(void)sig;
	if (signal_wire)
		sg_wire_stop(signal_wire);
}

static void on_dead(void *payload)
{
	sg_wire_stop(payload ? ((struct server *)payload)->s.wire : NULL);
}

struct deadline {
	struct sg_cancel token, done;
	int64_t ms;
	pthread_t thread;
};

static void *deadline_main(void *arg)
{
	struct deadline *d = arg;

	if (sg_cancel_sleep(&d->done, d->ms) == SG_OK)
		sg_cancel_fire(&d->token, SG_E_TIMEOUT);
	return NULL;
}

/* Wait for every in-flight request to reply, or the budget to run out. */
static bool drain(struct server *sv, struct deadline *d)
{
	bool empty;

	pthread_mutex_lock(&sv->lock);
	/*
	 * Fire without writing op->err: the handler may already hold its own
	 * answer (a validation error found before EOF), which must not turn
	 * into `cancelled`; the worker names the shutdown when the handler
	 * ends cancelled without a sentence of its own.
	 */
	for (struct sg_op *op = sv->inflight; op; op = op->next)
		sg_cancel_fire(&op->cancel, SG_E_CANCELLED);
	while ((sv->inflight || sv->replying) && !sg_cancel_check(&d->token)) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 20 * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&sv->idle, &sv->lock, &ts);
	}
	empty = !sv->inflight && !sv->replying;
	pthread_mutex_unlock(&sv->lock);
	return empty;
}

/* --shutdown-budget-ms, else the profile's, else the role's default. */
static int64_t budget_ms(const struct server *sv)
{
	if (sv->o->budget_ms > 0)
		return sv->o->budget_ms;
	if (sv->s.profile && sv->s.profile->shutdown_timeout_ms > 0)
		return sv->s.profile->shutdown_timeout_ms;
	return sv->o->peer ? SG_PEER_SHUTDOWN_MS : SG_SHUTDOWN_BUDGET_MS;
}

/*
 * Section 9: cancel and await requests, stop processes, release exports,
 * keep or remove the environment.  Returns the exit status.
 */
static int shutdown_session(struct server *sv, const char *why)
{
	struct sg_session *s = &sv->s;
	struct deadline d = { .ms = budget_ms(sv) };
	struct sg_errinfo err = { 0 };
	int status = 0;
	sg_err rc = SG_OK;

	sg_log_info("shutting down: %s", why);
	if (sg_cancel_init(&d.token) || sg_cancel_init(&d.done))
		return 70;
	if (pthread_create(&d.thread, NULL, deadline_main, &d) != 0)
		d.thread = pthread_self();
	if (!drain(sv, &d)) {
		fprintf(stderr, "sandgate: requests still running when the shutdown budget ran out\n");
		status = SG_EXIT_UNAVAILABLE;
	}
	if (s->state == SG_S_READY) {
		rc = sg_procs_shutdown(s, &d.token, &err);
		if (rc)
			fprintf(stderr, "sandgate: %s\n", err.msg);
		sg_procs_free(s);
		sg_exports_free(s);
		sg_err_clear(&err);
		if (teardown(s, &d.token) || rc)
			status = SG_EXIT_UNAVAILABLE;
	}
	if (!sg_wire_flush(s->wire, sg_now_ms() + 1000) && !sg_wire_dead(s->wire))
		sg_log_warn("replies could not all be written before exit");
	sg_cancel_fire(&d.done, SG_E_CANCELLED);
	if (!pthread_equal(d.thread, pthread_self()))
		pthread_join(d.thread, NULL);
	sg_cancel_release(&d.token);
	sg_cancel_release(&d.done);
	return status;
}

static void session_release(struct server *sv)
{
	struct sg_session *s = &sv->s;

	reset_env(s);
	json_decref(s->binding);
	json_decref(s->init_reply);
	free(s->token);
}

int sg_server_run(const struct sg_server_opts *o)
{
	struct server *sv = calloc(1, sizeof(*sv));
	struct sigaction sa = { 0 };
	const char *why = "end of input";
	struct sg_errinfo err = { 0 };
	bool stuck = false;
	int status;

	if (!sv)
		return 70;
	sv->o = o;
	sv->jobs_tail = &sv->jobs;
	pthread_mutex_init(&sv->lock, NULL);
	pthread_cond_init(&sv->work, NULL);
	pthread_cond_init(&sv->idle, NULL);
	pthread_mutex_init(&sv->audit_lock, NULL);
	pthread_mutex_init(&sv->s.lock, NULL);
	pthread_cond_init(&sv->s.init_done, NULL);
	sv->s.cfg = o->cfg;
	sv->s.profile_name = o->profile;
	sv->s.state_dir = o->state_dir;
	sv->s.helper_path = o->helper_path;
	sv->s.budget_ms = o->budget_ms;
	sv->s.tool_output = o->tool_output ? o->tool_output : SG_TOOL_OUTPUT;
	if (o->audit_log && !(sv->audit = fopen(o->audit_log, "ae"))) {
		fprintf(stderr, "sandgate: cannot open the audit log %s: %s\n",
			o->audit_log, strerror(errno));
		free(sv);
		return SG_EXIT_CANTCREAT;
	}
	/* A dead host must show up as EPIPE on write, not kill us mid-cleanup. */
	signal(SIGPIPE, SIG_IGN);
	/*
	 * A larger pipe to the host means a multi-megabyte reply (an export
	 * chunk) crosses in a few writes instead of a hundred 64 KiB ones.
	 * Best effort: stdout may not be a pipe, or the kernel may refuse.
	 */
	(void)fcntl(1, F_SETPIPE_SZ, (int)SG_PIPE_SIZE);
	if (sg_wire_new(0, 1, on_dead, sv, &sv->s.wire)) {
		fprintf(stderr, "sandgate: cannot start the protocol writer\n");
		free(sv);
		return 70;
	}
	signal_wire = sv->s.wire;
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	for (;;) {
		json_t *frame = NULL;
		sg_err rc = sg_wire_read(sv->s.wire, &frame, &err);

		if (rc) {
			if (rc != SG_E_NOT_FOUND) {
				why = rc == SG_E_CANCELLED ? "stopped (signal or dead output)"
							   : err.msg;
				if (rc != SG_E_CANCELLED)
					fprintf(stderr, "sandgate: %s; shutting down\n", err.msg);
			}
			break;
		}
		dispatch(sv, frame);
		json_decref(frame);
	}
	status = shutdown_session(sv, why);

	pthread_mutex_lock(&sv->lock);
	sv->quit = true;
	pthread_cond_broadcast(&sv->work);
	while (sv->threads > 0 && !stuck) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 2;
		/* A handler that ignores its cancel token must not hang exit. */
		stuck = pthread_cond_timedwait(&sv->idle, &sv->lock, &ts) == ETIMEDOUT;
	}
	pthread_mutex_unlock(&sv->lock);
	signal_wire = NULL;
	if (stuck) {
		sg_log_err("a request handler did not stop; exiting without it");
		return status ? status : SG_EXIT_SOFTWARE;
	}
	sg_wire_free(sv->s.wire);
	session_release(sv);
	if (sv->audit)
		fclose(sv->audit);
	free(sv);
	return status;
}
