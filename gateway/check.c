/*
 * check.c - the verdict on a profile (check.h), a `command` profile's
 * delegation chain included: what each layer's gateway needs for its
 * shutdown is worked out from the config alone, down the chain.
 */
#define _GNU_SOURCE /* realpath */
#include "gateway/check.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/limits.h"
#include "base/log.h"
#include "gateway/budget.h"

/* The requirements serve's select judges (meets() in select.c). */
static const char *const requirements[] = { "isolation", "network_isolated",
					     "toolchains", NULL };

/* A static copy of the backend word, so it outlives the profile. */
static const char *word(const char *backend)
{
	const struct sg_adapter *ad = sg_adapter_find(backend);

	if (ad)
		return ad->name;
	if (strcmp(backend, "command") == 0)
		return "command";
	return strcmp(backend, "select") == 0 ? "select" : "?";
}

sg_err sg_check_peer_fields(const struct sg_profile *p, struct sg_errinfo *err)
{
	json_t *cmd = json_object_get(p->raw, "command");
	json_t *env = json_object_get(p->raw, "env");
	json_t *grace = json_object_get(p->raw, "shutdown_grace_ms");
	json_t *caps = json_object_get(p->raw, "capabilities");
	const char *k;
	json_t *v;
	size_t i;

	if (!json_is_array(cmd) || json_array_size(cmd) == 0)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "profile \"%s\": field \"command\": must be a non-empty list of strings (the peer's argv)",
				  p->name);
	json_array_foreach(cmd, i, v)
		if (!json_is_string(v) || !*json_string_value(v))
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "profile \"%s\": field \"command\": entry %zu must be a non-empty string",
					  p->name, i);
	if (env && !json_is_object(env))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "profile \"%s\": field \"env\": must be an object of strings", p->name);
	json_object_foreach(env, k, v)
		if (!json_is_string(v) || !*k || strchr(k, '=') ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "profile \"%s\": field \"env\": \"%.64s\" must be a name without '=' holding a string",
					  p->name, k);
	if (grace && (!json_is_integer(grace) || json_integer_value(grace) < 1 ||
		      json_integer_value(grace) > INT32_MAX))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "profile \"%s\": field \"shutdown_grace_ms\": must be an integer from 1 to 2147483647",
				  p->name);
	json_array_foreach(caps, i, v)
		if (!json_is_string(v))
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "profile \"%s\": field \"capabilities\": must be a list of strings",
					  p->name);
	return SG_OK;
}

/* The budget a profile's gateway has for its shutdown. */
static int64_t budget_of(const struct sg_profile *p)
{
	return p->shutdown_timeout_ms > 0 ? p->shutdown_timeout_ms : SG_SHUTDOWN_BUDGET_MS;
}

/* Is argv[0] this very sandgate (or one named so)? */
static bool is_sandgate(const char *argv0)
{
	char a[PATH_MAX], b[PATH_MAX];
	const char *base = strrchr(argv0, '/');

	base = base ? base + 1 : argv0;
	if (strcmp(base, "sandgate") == 0)
		return true;
	return realpath(argv0, a) && realpath("/proc/self/exe", b) && strcmp(a, b) == 0;
}

/*
 * When the peer is sandgate serving a config it names, that gateway's
 * budget (*inner_ms), after the whole `config check` of its profile, so a
 * chain is refused at its outer end for what its inner end would refuse
 * (a nested command profile included).  *inner_ms stays 0 when the peer
 * is something else.
 */
static sg_err inner_budget(const struct sg_profile *p, int64_t *inner_ms,
			   struct sg_errinfo *err)
{
	/* A config that names itself as its peer's must not loop forever. */
	static _Thread_local int depth;
	json_t *cmd = json_object_get(p->raw, "command");
	const char *config = NULL, *profile = NULL, *a;
	struct sg_config *cfg = NULL;
	struct sg_profile *ip = NULL;
	int64_t flag_ms = 0;
	bool serve = false, peer = false;
	size_t i, n = json_array_size(cmd);
	sg_err rc = SG_OK;

	*inner_ms = 0;
	if (!is_sandgate(json_string_value(json_array_get(cmd, 0))))
		return SG_OK;
	for (i = 1; i < n; i++) {
		const char *next = json_string_value(json_array_get(cmd, i + 1));

		a = json_string_value(json_array_get(cmd, i));
		if (strcmp(a, "serve") == 0)
			serve = true;
		else if (strcmp(a, "--peer") == 0)
			peer = true;
		else if (strcmp(a, "--config") == 0 && next)
			config = next, i++;
		else if (strcmp(a, "--profile") == 0 && next)
			profile = next, i++;
		else if (strcmp(a, "--shutdown-budget-ms") == 0 && next)
			flag_ms = strtoll(next, NULL, 10), i++;
	}
	if (!serve)
		return SG_OK;
	if (!config)
		config = json_string_value(json_object_get(json_object_get(p->raw, "env"),
							   "SANDGATE_CONFIG"));
	/* The inner gateway's budget, as its server.c works it out. */
	*inner_ms = peer ? SG_PEER_SHUTDOWN_MS : SG_SHUTDOWN_BUDGET_MS;
	if (config) {
		if (depth >= 8)
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "profile \"%s\": the delegation chain is deeper than 8",
					  p->name);
		depth++;
		rc = sg_config_load(config, &cfg, err);
		if (!rc)
			rc = sg_profile_check(cfg, profile, NULL, err);
		if (!rc)
			rc = sg_config_profile(cfg, profile, NULL, &ip, err);
		depth--;
		if (rc) {
			char inner[SG_ERR_MSG];

			snprintf(inner, sizeof(inner), "%s", err->msg);
			sg_err_clear(err);
			sg_err_set(err, rc, "profile \"%s\": its peer's config %s: %s", p->name,
				   config, inner);
			goto out;
		}
		if (ip->shutdown_timeout_ms > 0)
			*inner_ms = ip->shutdown_timeout_ms;
	}
	if (flag_ms > 0)
		*inner_ms = flag_ms;
out:
	sg_profile_free(ip);
	sg_config_free(cfg);
	return rc;
}

/* What p's gateway needs for its shutdown, in ms (check_command). */
static sg_err needs(const struct sg_profile *p, int64_t *need, struct sg_errinfo *err)
{
	json_t *g = json_object_get(p->raw, "shutdown_grace_ms");
	int64_t grace = json_is_integer(g) ? json_integer_value(g) : SG_OUTER_GRACE_MS;
	int64_t inner = 0;
	sg_err rc = inner_budget(p, &inner, err);

	*need = sg_budget_chain_need(grace > inner ? grace : inner);
	return rc;
}

/* A command profile's verdict (check.h): its fields, then its chain's budget. */
static sg_err check_command(const struct sg_profile *p, struct sg_errinfo *err)
{
	int64_t need = 0;
	sg_err rc = sg_check_peer_fields(p, err);

	if (!rc)
		rc = needs(p, &need, err);
	if (!rc && budget_of(p) < need)
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT,
				"profile \"%s\": shutdown_timeout_ms %lld is shorter than the %lld ms the delegation chain needs (the peer's grace or its own budget, whichever is longer, plus %d ms for a cancel's drain)",
				p->name, (long long)budget_of(p), (long long)need,
				SG_BUDGET_CANCEL_DRAIN_MS);
	return rc;
}

static sg_err check_one(const struct sg_profile *p, struct sg_errinfo *err)
{
	const struct sg_adapter *ad = sg_adapter_find(p->backend);

	if (strcmp(p->backend, "command") == 0)
		return check_command(p, err);
	if (!ad)
		return sg_err_set(err, SG_E_UNSUPPORTED,
				  "profile \"%s\": backend \"%s\" is not built into this sandgate",
				  p->name, p->backend);
	return ad->validate(p, err);
}

static sg_err check_select(const struct sg_config *cfg, const struct sg_profile *p,
			   struct sg_errinfo *err)
{
	json_t *list = json_object_get(p->raw, "candidates"), *c;
	size_t i;

	if (!json_is_array(list) || json_array_size(list) == 0)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "profile \"%s\": a select profile needs `candidates`, a non-empty array",
				  p->name);
	json_array_foreach(list, i, c) {
		const char *name = json_string_value(json_object_get(c, "profile"));
		json_t *req = json_object_get(c, "require"), *v;
		struct sg_profile *cand = NULL;
		const char *k;
		sg_err rc;

		if (!json_is_object(c) || !name)
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "profile \"%s\": candidate %zu names no profile", p->name, i);
		if (req && !json_is_object(req))
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "profile \"%s\": candidate \"%s\": `require` must be an object",
					  p->name, name);
		json_object_foreach(req, k, v) {
			size_t j = 0;

			while (requirements[j] && strcmp(requirements[j], k) != 0)
				j++;
			if (!requirements[j])
				return sg_err_set(err, SG_E_INVALID_ARGUMENT,
						  "profile \"%s\": candidate \"%s\": unknown requirement \"%s\" (known: isolation, network_isolated, toolchains)",
						  p->name, name, k);
		}
		rc = sg_config_profile(cfg, name, NULL, &cand, err);
		if (!rc && strcmp(cand->backend, "select") == 0)
			rc = sg_err_set(err, SG_E_INVALID_ARGUMENT,
					"profile \"%s\": candidate \"%s\" is a select profile itself",
					p->name, name);
		if (!rc)
			rc = check_one(cand, err);
		sg_profile_free(cand);
		/*
		 * A candidate that this host cannot serve now (a daemon down, a
		 * runtime it lacks) is what select falls back from: initialize
		 * skips it with the reason.  A candidate that is wrong is not.
		 */
		if (rc == SG_E_UNAVAILABLE) {
			sg_log_info("profile \"%s\": candidate \"%s\" is unavailable now (%s); initialize will skip it",
				    p->name, name, err->msg);
			sg_err_clear(err);
			rc = SG_OK;
		}
		if (rc)
			return rc;
	}
	return SG_OK;
}

sg_err sg_profile_check(const struct sg_config *cfg, const char *name,
			const char **backend, struct sg_errinfo *err)
{
	struct sg_profile *p = NULL;
	sg_err rc;

	if (backend)
		*backend = "?";
	rc = sg_config_profile(cfg, name, NULL, &p, err);
	if (rc)
		return rc;
	if (backend)
		*backend = word(p->backend);
	if (strcmp(p->backend, "select") == 0)
		rc = check_select(cfg, p, err);
	else
		rc = check_one(p, err);
	sg_profile_free(p);
	return rc;
}
