/*
 * envs.c - `sandgate envs`: what sandgate created, and cleaning it up.
 *
 *   sandgate envs list [--profile P] [--json]
 *   sandgate envs show ID [--json]
 *   sandgate envs rm ID... [--force] [--json]
 *   sandgate envs gc [--older-than DUR] [--dry-run] [--force] [--json]
 *
 * The view is the state registry merged with what each backend reports
 * for sandgate's own tags, so an environment the registry lacks (an
 * orphan) shows up, and a record whose resource vanished is marked.  An
 * environment attached to a live session is never removed without
 * --force.
 *
 * The command line is parsed in main.c from the table in cli.c; the exit
 * statuses are cli.h's: 69 something could not be removed or listed (what
 * and why on stderr), 66 an ID named on the command line does not exist.
 */
#include "gateway/envs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adapters/adapter.h"
#include "base/cancel.h"
#include "base/limits.h"
#include "gateway/budget.h"
#include "gateway/cli.h"
#include "gateway/registry.h"
#include "gateway/wire.h"

/* One environment in the merged view (a JSON object):
 *   id, backend, profile, identity, state, created, expires, persistent,
 *   live_sessions, record (bool), reported (bool), status (registry's). */

struct scan {
	json_t *envs;         /* the merged view */
	json_t *unreachable;  /* backends whose listing failed: name -> reason */
	const char *backend;  /* of the listing in progress */
	const char *profile;
};

/* A string field of e, or def. */
static const char *str(json_t *e, const char *key, const char *def)
{
	const char *v = json_string_value(json_object_get(e, key));

	return v ? v : def;
}

static json_t *find_env(json_t *envs, const char *backend, const char *id,
			const char *identity)
{
	json_t *e;
	size_t i;

	json_array_foreach(envs, i, e) {
		const char *b = json_string_value(json_object_get(e, "backend"));
		const char *eid = json_string_value(json_object_get(e, "id"));
		const char *ident = json_string_value(json_object_get(e, "identity"));

		if (!b || strcmp(b, backend) != 0)
			continue;
		if (id && eid && strcmp(eid, id) == 0)
			return e;
		/* A record written before the create knows no id yet. */
		if (!eid && identity && ident && strcmp(ident, identity) == 0)
			return e;
	}
	return NULL;
}

static int on_listed(const struct sg_env_info *info, void *payload)
{
	struct scan *sc = payload;
	json_t *e = find_env(sc->envs, sc->backend, info->id, info->identity);

	if (!e) {
		e = json_pack("{s:s, s:s, s:s, s:s, s:I, s:b, s:i, s:b, s:b}", "id",
			      info->id, "backend", sc->backend, "profile",
			      info->profile[0] ? info->profile : sc->profile, "identity",
			      info->identity, "created", (json_int_t)info->created,
			      "persistent", info->persistent, "live_sessions", 0,
			      "record", 0, "reported", 1);
		json_array_append_new(sc->envs, e);
	}
	json_object_set_new(e, "id", json_string(info->id));
	json_object_set_new(e, "state", json_string(info->state));
	json_object_set_new(e, "reported", json_true());
	if (info->expires)
		json_object_set_new(e, "expires", json_integer(info->expires));
	return 0;
}

/*
 * The merged view: registry records first, then every profile's backend
 * listing (each backend, place and profile listed once).
 */
static sg_err scan(const struct sg_config *cfg, const char *state_dir,
		   const char *only_profile, struct scan *sc, struct sg_errinfo *err)
{
	json_t *records = NULL, *corrupt = NULL, *r, *listed = json_object();
	size_t i;
	sg_err rc;

	sc->envs = json_array();
	sc->unreachable = json_object();
	rc = sg_registry_list(state_dir, &records, &corrupt, err);
	if (rc)
		goto out;
	json_array_foreach(corrupt, i, r)
		fprintf(stderr, "sandgate: %s\n", json_string_value(r));
	json_array_foreach(records, i, r) {
		const char *profile = json_string_value(json_object_get(r, "profile"));
		json_t *e;

		if (only_profile && (!profile || strcmp(profile, only_profile) != 0))
			continue;
		e = json_deep_copy(r);
		json_object_set_new(e, "record", json_true());
		json_object_set_new(e, "reported", json_false());
		json_array_append_new(sc->envs, e);
	}
	for (const char *const *n = sg_config_names(cfg); *n; n++) {
		struct sg_errinfo e = { 0 };
		struct sg_profile *p = NULL;
		const struct sg_adapter *ad;
		char key[512];

		if (only_profile && strcmp(*n, only_profile) != 0)
			continue;
		if (sg_config_profile(cfg, *n, NULL, &p, &e) != SG_OK) {
			json_object_set_new(sc->unreachable, *n, json_string(e.msg));
			continue;
		}
		ad = sg_adapter_find(p->backend);
		/*
		 * One listing per backend, place (host, API, directory) and
		 * profile: the cloud adapters list by the profile's tag (and
		 * each profile may name another API, team or project), so a
		 * profile left out would call its environments vanished, and
		 * rm and gc would drop their records and leave them running.
		 */
		snprintf(key, sizeof(key), "%s|%s|%s|%s", p->backend,
			 p->host ? p->host : "", p->workspace ? p->workspace : "", p->name);
		if (ad && ad->list && !json_object_get(listed, key)) {
			json_object_set_new(listed, key, json_true());
			sc->backend = ad->name;
			sc->profile = *n;
			if (ad->list(p, state_dir, on_listed, sc, NULL, &e) != SG_OK)
				json_object_set_new(sc->unreachable, *n, json_string(e.msg));
		}
		sg_profile_free(p);
	}
	/* What was never reported by a backend that answered has vanished. */
	json_array_foreach(sc->envs, i, r) {
		const char *profile = json_string_value(json_object_get(r, "profile"));

		if (json_is_true(json_object_get(r, "reported")))
			continue;
		if (!json_string_value(json_object_get(r, "id")))
			json_object_set_new(r, "state", json_string("provisioning"));
		else if (profile && json_object_get(sc->unreachable, profile))
			json_object_set_new(r, "state", json_string("unknown"));
		else
			json_object_set_new(r, "state", json_string("vanished"));
	}
out:
	json_decref(records);
	json_decref(corrupt);
	json_decref(listed);
	return rc;
}

static void age(char *buf, size_t n, int64_t seconds)
{
	if (seconds < 0)
		snprintf(buf, n, "-");
	else if (seconds < 120)
		snprintf(buf, n, "%llds", (long long)seconds);
	else if (seconds < 7200)
		snprintf(buf, n, "%lldm", (long long)seconds / 60);
	else if (seconds < 172800)
		snprintf(buf, n, "%lldh", (long long)seconds / 3600);
	else
		snprintf(buf, n, "%lldd", (long long)seconds / 86400);
}

/* The word for the STATE column: the backend's state, plus what only the
 * merge knows. */
static const char *state_of(json_t *e)
{
	if (!json_is_true(json_object_get(e, "record")))
		return "orphan";
	if (strcmp(str(e, "status", ""), SG_REG_CLEANUP) == 0)
		return SG_REG_CLEANUP;
	/*
	 * keep-pending says the environment was left as it was; once its
	 * backend answered without it, nothing was left, and the listing says
	 * what was observed (and gc drops the record, as for any vanished one).
	 */
	if (strcmp(str(e, "status", ""), SG_REG_KEEP_FAILED) == 0 &&
	    strcmp(str(e, "state", ""), "vanished") != 0)
		return SG_REG_KEEP_FAILED;
	return str(e, "state", "unknown");
}

static void print_table(json_t *envs)
{
	time_t now = time(NULL);
	json_t *e;
	size_t i;

	sg_cli_printf("%-28s %-8s %-12s %-16s %-6s %-8s %-14s %s\n", "ID", "BACKEND",
		"PROFILE", "STATE", "AGE", "EXPIRY", "RESOURCES", "SESSIONS");
	json_array_foreach(envs, i, e) {
		char a[24], x[24], res[48] = "-";
		json_int_t created = json_integer_value(json_object_get(e, "created"));
		json_int_t expires = json_integer_value(json_object_get(e, "expires"));
		json_t *applied = json_object_get(json_object_get(e, "resources"), "applied");

		age(a, sizeof(a), created ? (int64_t)(now - created) : -1);
		if (json_is_true(json_object_get(e, "persistent")))
			snprintf(x, sizeof(x), "persistent");
		else
			age(x, sizeof(x), expires ? (int64_t)(expires - now) : -1);
		if (json_object_size(applied))
			snprintf(res, sizeof(res), "%gcpu/%lldMiB",
				 json_number_value(json_object_get(applied, "cpus")),
				 (long long)json_integer_value(json_object_get(applied, "memory_mb")));
		sg_cli_printf("%-28s %-8s %-12s %-16s %-6s %-8s %-14s %lld\n",
			str(e, "id", "(not created yet)"), str(e, "backend", "?"),
			str(e, "profile", "?"), state_of(e), a,
			x, res, (long long)json_integer_value(json_object_get(e, "live_sessions")));
	}
}

static void print_json(json_t *j)
{
	char *text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);

	if (text)
		sg_cli_printf("%s\n", text);
	free(text);
}

static void annotate(json_t *envs)
{
	json_t *e;
	size_t i;

	json_array_foreach(envs, i, e)
		json_object_set_new(e, "state", json_string(state_of(e)));
}

/*
 * Remove one environment: the backend's resource (when it still exists),
 * then its registry record.  The listing that chose it is a snapshot, so
 * the environment is first claimed in the registry (sg_registry_claim):
 * a session that attached since keeps it (SG_E_UNAVAILABLE, unless
 * force), and none can attach while it goes.
 */
static sg_err remove_env(const struct sg_config *cfg, const char *state_dir,
			 json_t *e, bool force, struct sg_errinfo *err)
{
	const char *backend = json_string_value(json_object_get(e, "backend"));
	const char *profile = json_string_value(json_object_get(e, "profile"));
	const char *id = json_string_value(json_object_get(e, "id"));
	const char *identity = json_string_value(json_object_get(e, "identity"));
	const char *state = state_of(e);
	const struct sg_adapter *ad = backend ? sg_adapter_find(backend) : NULL;
	struct sg_reg_key key = { backend, identity };
	struct sg_profile *p = NULL;
	bool claimed = false, made = false;
	sg_err rc = SG_OK;
	int64_t t0;

	if (!ad)
		return sg_err_set(err, SG_E_UNSUPPORTED, "backend %s is not built into this sandgate",
				  backend ? backend : "?");
	if (id && strcmp(state, "vanished") != 0) {
		if (!ad->destroy)
			return sg_err_set(err, SG_E_UNSUPPORTED,
					  "backend %s cannot remove environments", backend);
		rc = sg_config_profile(cfg, profile, NULL, &p, err);
		if (rc)
			return sg_err_set(err, rc, "profile \"%s\" is needed to reach %s and is not in the config",
					  profile ? profile : "?", id);
		/* An unmarked orphan names no identity, and no gateway can attach to it. */
		if (identity && identity[0]) {
			rc = sg_registry_claim(state_dir, &key, force, &made, err);
			if (rc) {
				sg_profile_free(p);
				return rc;
			}
			claimed = true;
		}
		fprintf(stderr, "sandgate: removing %s (%s)...\n", id, backend);
		t0 = sg_now_ms();
		rc = ad->destroy(p, state_dir, id, NULL, err);
		/* A real delete: the next shutdown plans with its time. */
		if (!rc)
			sg_budget_record(state_dir, ad->name, SG_BUDGET_REMOVE, sg_now_ms() - t0);
		if (rc == SG_E_NOT_FOUND) {
			sg_err_clear(err);
			rc = SG_OK;
		}
		sg_profile_free(p);
	}
	if (rc && claimed)
		sg_registry_unclaim(state_dir, &key, made);
	if (!rc && identity && (made || json_is_true(json_object_get(e, "record"))))
		rc = sg_registry_remove(state_dir, &key, err);
	return rc;
}

int sg_envs_duration(const char *s, int64_t *out)
{
	char *end;
	long long v = strtoll(s, &end, 10);
	int64_t unit = 1;

	if (end == s || v < 0)
		return -1;
	switch (*end) {
	case '\0': case 's': unit = 1; break;
	case 'm': unit = 60; break;
	case 'h': unit = 3600; break;
	case 'd': unit = 86400; break;
	default: return -1;
	}
	if ((*end && end[1]) || v > INT64_MAX / unit)
		return -1;
	*out = v * unit;
	return 0;
}

/* Why gc removes e, or NULL to keep it. */
static const char *gc_reason(json_t *e, int64_t older_than, time_t now)
{
	const char *state = state_of(e);
	json_int_t created = json_integer_value(json_object_get(e, "created"));
	json_int_t expires = json_integer_value(json_object_get(e, "expires"));
	bool persistent = json_is_true(json_object_get(e, "persistent"));

	if (strcmp(state, SG_REG_CLEANUP) == 0 && !json_string_value(json_object_get(e, "id")) &&
	    !json_is_true(json_object_get(e, "reported"))) {
		/*
		 * A create whose outcome is unknown that has not shown up: it
		 * may still land, so the record is what remembers to look.
		 * Once the provider's own lifetime has passed twice (auto-stop,
		 * then auto-delete), whatever landed is gone too.
		 */
		if (!expires || now < expires + (expires - created))
			return NULL;
		return "its create never showed and its lifetime has passed";
	}
	if (strcmp(state, SG_REG_CLEANUP) == 0)
		return "its cleanup did not finish";
	if (strcmp(state, "vanished") == 0)
		return "its resource is gone; only the record remains";
	if (strcmp(state, "provisioning") == 0 ||
	    (json_string_value(json_object_get(e, "status")) &&
	     strcmp(json_string_value(json_object_get(e, "status")), SG_REG_PROVISIONING) == 0))
		return "its gateway died while creating it";
	if (older_than >= 0 && created && now - created >= older_than)
		return "it is older than --older-than";
	/* Nothing below removes a persistent one, so neither a keep-pending
	 * one, which may hold the only copy of its workspace. */
	if (!persistent && expires && expires <= now)
		return strcmp(state, "orphan") == 0 ? "an orphan past its expiry"
						    : "not persistent and past its expiry";
	if (strcmp(state, "orphan") == 0 && !persistent && !expires)
		return "an orphan the registry does not know";
	return NULL;
}


/*
 * Whether e is an orphan that names no identity (a local directory
 * without its marker) while a live gateway is creating an environment of
 * its backend: it may be that gateway's, between its mkdir and its
 * marker, and no claim can be made on a nameless one.
 */
static bool maybe_being_made(json_t *envs, json_t *e)
{
	const char *backend = str(e, "backend", "");
	json_t *r;
	size_t i;

	if (strcmp(state_of(e), "orphan") != 0 || str(e, "identity", "")[0])
		return false;
	json_array_foreach(envs, i, r)
		if (json_is_true(json_object_get(r, "record")) &&
		    strcmp(str(r, "backend", ""), backend) == 0 &&
		    strcmp(str(r, "status", ""), SG_REG_PROVISIONING) == 0 &&
		    json_integer_value(json_object_get(r, "live_sessions")) > 0)
			return true;
	return false;
}

/* The merged view, or SG_EXIT_UNAVAILABLE with the reason on stderr. */
static int scan_or_fail(const struct sg_config *cfg, const char *state_dir,
			const char *profile, struct scan *sc)
{
	struct sg_errinfo err = { 0 };

	if (scan(cfg, state_dir, profile, sc, &err) == SG_OK)
		return SG_EXIT_OK;
	fprintf(stderr, "sandgate: %s\n", err.msg);
	return SG_EXIT_UNAVAILABLE;
}

static void scan_release(struct scan *sc)
{
	json_decref(sc->envs);
	json_decref(sc->unreachable);
}

static void append_pair(json_t *list, const char *k1, const char *v1, const char *k2,
			const char *v2)
{
	json_array_append_new(list, json_pack("{s:s?, s:s?}", k1, v1, k2, v2));
}

static int cmd_gc(const struct sg_config *cfg, const char *state_dir,
		  const struct sg_envs_args *a)
{
	struct sg_errinfo err = { 0 };
	struct scan sc = { 0 };
	time_t now = time(NULL);
	json_t *report = json_pack("{s:b, s:[], s:[], s:[]}", "dry_run", a->dry_run,
				   a->dry_run ? "would_remove" : "removed", "kept", "failed");
	json_t *done = json_object_get(report, a->dry_run ? "would_remove" : "removed");
	int status = scan_or_fail(cfg, state_dir, NULL, &sc);
	json_t *e;
	size_t i;

	if (status)
		goto out;
	json_array_foreach(sc.envs, i, e) {
		const char *why = gc_reason(e, a->older_than, now);
		const char *id = json_string_value(json_object_get(e, "id"));
		const char *name = id ? id : json_string_value(json_object_get(e, "identity"));
		sg_err rc;

		if (!why) {
			if (strcmp(state_of(e), SG_REG_CLEANUP) == 0) {
				/* Still waiting for a create that may land. */
				fprintf(stderr, "sandgate: keeping the record of %s (%s): its create's outcome is unknown and nothing has shown yet; run gc again later\n",
					json_string_value(json_object_get(e, "identity")),
					json_string_value(json_object_get(e, "backend")));
				append_pair(json_object_get(report, "kept"), "id", name, "reason",
					    "its create's outcome is unknown and nothing has shown yet");
				status = SG_EXIT_UNAVAILABLE;
			} else if (strcmp(state_of(e), SG_REG_KEEP_FAILED) == 0) {
				fprintf(stderr, "sandgate: keeping %s: its keep did not finish, so it may hold the only copy of its workspace; a session of identity \"%s\" resumes it, `sandgate envs rm` removes it\n",
					name, json_string_value(json_object_get(e, "identity")));
				append_pair(json_object_get(report, "kept"), "id", name, "reason",
					    "its keep did not finish; it may hold the only copy of its workspace");
			}
			continue;
		}
		if (maybe_being_made(sc.envs, e) && !a->force) {
			fprintf(stderr, "sandgate: keeping %s: a gateway is creating an environment and it may be this one (use --force)\n",
				name);
			append_pair(json_object_get(report, "kept"), "id", name, "reason",
				    "a gateway is creating an environment and it may be this one");
			continue;
		}
		/* A live session in the registry, or one the backend itself
		 * reports (an ssh lease held by another machine's gateway). */
		if ((json_integer_value(json_object_get(e, "live_sessions")) > 0 ||
		     strcmp(state_of(e), "attached") == 0) && !a->force) {
			fprintf(stderr, "sandgate: keeping %s: a live session is attached (use --force)\n",
				id ? id : "(not created)");
			append_pair(json_object_get(report, "kept"), "id", name, "reason",
				    "a live session is attached");
			continue;
		}
		if (!a->json)
			sg_cli_printf("%s %s: %s\n", a->dry_run ? "would remove" : "removing",
				name, why);
		if (a->dry_run) {
			append_pair(done, "id", name, "reason", why);
			continue;
		}
		sg_err_clear(&err);
		rc = remove_env(cfg, state_dir, e, a->force, &err);
		if (rc == SG_E_UNAVAILABLE) {
			fprintf(stderr, "sandgate: keeping %s: %s\n", name, err.msg);
			append_pair(json_object_get(report, "kept"), "id", name, "reason", err.msg);
		} else if (rc) {
			fprintf(stderr, "sandgate: %s: %s\n", id ? id : "?", err.msg);
			append_pair(json_object_get(report, "failed"), "id", name, "error", err.msg);
			status = SG_EXIT_UNAVAILABLE;
		} else {
			append_pair(done, "id", name, "reason", why);
		}
	}
	if (a->json)
		print_json(report);
out:
	json_decref(report);
	scan_release(&sc);
	return status;
}

static int cmd_rm(const struct sg_config *cfg, const char *state_dir,
		  const struct sg_envs_args *a)
{
	struct sg_errinfo err = { 0 };
	struct scan sc = { 0 };
	json_t *report = json_pack("{s:[], s:[], s:[], s:[]}", "removed", "kept", "missing",
				   "failed");
	int status = scan_or_fail(cfg, state_dir, NULL, &sc);

	if (status)
		goto out;
	for (int n = 0; n < a->nids; n++) {
		const char *want = a->ids[n];
		json_t *e = NULL, *x;
		size_t i;

		json_array_foreach(sc.envs, i, x)
			if (json_string_value(json_object_get(x, "id")) &&
			    strcmp(json_string_value(json_object_get(x, "id")), want) == 0)
				e = x;
		if (!e) {
			fprintf(stderr, "sandgate: no environment %s\n", want);
			json_array_append_new(json_object_get(report, "missing"), json_string(want));
			status = status ? status : SG_EXIT_NOINPUT;
			continue;
		}
		if (json_integer_value(json_object_get(e, "live_sessions")) > 0 && !a->force) {
			fprintf(stderr, "sandgate: %s is attached to a live session (use --force)\n",
				want);
			append_pair(json_object_get(report, "kept"), "id", want, "reason",
				    "a live session is attached");
			status = SG_EXIT_UNAVAILABLE;
			continue;
		}
		sg_err_clear(&err);
		if (remove_env(cfg, state_dir, e, a->force, &err)) {
			fprintf(stderr, "sandgate: %s: %s\n", want, err.msg);
			append_pair(json_object_get(report, "failed"), "id", want, "error", err.msg);
			status = SG_EXIT_UNAVAILABLE;
		} else {
			json_array_append_new(json_object_get(report, "removed"), json_string(want));
			if (!a->json)
				sg_cli_printf("removed %s\n", want);
		}
	}
	if (a->json)
		print_json(report);
out:
	json_decref(report);
	scan_release(&sc);
	return status;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* `envs show` without --json: one "key value" line per field. */
static void print_fields(json_t *e)
{
	const char **keys = calloc(json_object_size(e) + 1, sizeof(char *));
	const char *k;
	size_t n = 0;
	json_t *v;

	if (!keys)
		return;
	json_object_foreach(e, k, v)
		keys[n++] = k;
	qsort(keys, n, sizeof(*keys), cmp_str);
	for (size_t i = 0; i < n; i++) {
		char *text;

		v = json_object_get(e, keys[i]);
		text = json_is_string(v) ? NULL : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		sg_cli_printf("%-14s %s\n", keys[i], text ? text : json_string_value(v));
		free(text);
	}
	free(keys);
}

static int cmd_list(const struct sg_config *cfg, const char *state_dir,
		    const struct sg_envs_args *a, bool show)
{
	struct scan sc = { 0 };
	int status = scan_or_fail(cfg, state_dir, a->profile, &sc);
	const char *key;
	json_t *v;

	if (status)
		goto out;
	annotate(sc.envs);
	json_object_foreach(sc.unreachable, key, v) {
		fprintf(stderr, "sandgate: profile %s could not be listed: %s\n", key,
			json_string_value(v));
		status = SG_EXIT_UNAVAILABLE;
	}
	if (show) {
		json_t *e, *found = NULL;
		size_t i;

		json_array_foreach(sc.envs, i, e)
			if (json_string_value(json_object_get(e, "id")) &&
			    strcmp(json_string_value(json_object_get(e, "id")), a->ids[0]) == 0)
				found = e;
		if (!found) {
			/* Not found where sandgate could look: with a backend
			 * unreachable, it may be there (69 stays). */
			fprintf(stderr, "sandgate: no environment %s\n", a->ids[0]);
			status = status ? status : SG_EXIT_NOINPUT;
		} else if (a->json) {
			print_json(found);
		} else {
			print_fields(found);
		}
	} else if (a->json) {
		print_json(sc.envs);
	} else {
		print_table(sc.envs);
	}
out:
	scan_release(&sc);
	return status;
}

/* What sg_envs_settle looks for in a listing. */
struct settle {
	const char *identity, *session;
	char id[128];
	bool found;
};

static int settle_match(const struct sg_env_info *info, void *payload)
{
	struct settle *st = payload;

	/* The session label decides: an older environment of the same
	 * identity (a kept one, another session's) is never touched. */
	if (strcmp(info->identity, st->identity) != 0 ||
	    strncmp(info->session, st->session, sizeof(info->session) - 1) != 0)
		return 0;
	snprintf(st->id, sizeof(st->id), "%s", info->id);
	st->found = true;
	return 1;
}

sg_err sg_envs_settle(const struct sg_config *cfg, const char *state_dir,
		      json_t *rec, struct sg_cancel *deadline,
		      struct sg_errinfo *err)
{
	const char *backend = str(rec, "backend", ""), *profile = str(rec, "profile", NULL);
	struct settle st = { str(rec, "identity", ""), str(rec, "session", ""), "", false };
	const struct sg_adapter *ad = sg_adapter_find(backend);
	struct sg_reg_key key = { backend, st.identity };
	struct sg_errinfo last = { 0 };
	struct sg_profile *p = NULL;
	json_t *fields;
	sg_err rc;

	if (!ad || !ad->list) {
		rc = sg_err_set(err, SG_E_UNSUPPORTED, "backend %s cannot look for it", backend);
		goto out;
	}
	rc = sg_config_profile(cfg, profile, NULL, &p, err);
	if (rc)
		goto out;
	for (;;) {
		sg_err_clear(&last);
		rc = ad->list(p, state_dir, settle_match, &st, deadline, &last);
		if (!rc && st.found) {
			rc = ad->destroy(p, state_dir, st.id, deadline, &last);
			if (rc == SG_E_NOT_FOUND)
				rc = SG_OK;
			break;
		}
		rc = sg_cancel_sleep(deadline, SG_SETTLE_POLL_MS);
		if (rc)
			break;
	}
	if (rc)
		sg_err_set(err, rc, "%s%s", st.found ? "" : "it did not show in time: ",
			   last.msg[0] ? last.msg : "nothing was found");
out:
	sg_profile_free(p);
	if (!rc) {
		rc = sg_registry_remove(state_dir, &key, err);
	} else {
		struct sg_errinfo e2 = { 0 };

		fields = st.found ? json_pack("{s:s, s:s, s:s}", "status", SG_REG_CLEANUP,
					       "error", err->msg, "id", st.id)
				  : json_pack("{s:s, s:s}", "status", SG_REG_CLEANUP, "error",
					      err->msg);
		if (sg_registry_update(state_dir, &key, fields, &e2))
			fprintf(stderr, "sandgate: %s\n", e2.msg);
		json_decref(fields);
	}
	return rc;
}

int sg_envs_run(const char *sub, const struct sg_envs_args *a, const struct sg_config *cfg,
		const char *state_dir)
{
	if (strcmp(sub, "list") == 0)
		return cmd_list(cfg, state_dir, a, false);
	if (strcmp(sub, "show") == 0)
		return cmd_list(cfg, state_dir, a, true);
	if (strcmp(sub, "rm") == 0)
		return cmd_rm(cfg, state_dir, a);
	return cmd_gc(cfg, state_dir, a);
}
