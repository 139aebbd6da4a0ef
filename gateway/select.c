/*
 * select.c - a `select` profile: its candidates brought up in order, the
 * first whose observed facts meet its requirements kept.
 *
 * Invariants: requirements are judged from facts observed inside the
 * environment, never inferred from a backend's name; every candidate
 * skipped is removed (or let go, when resumed or shared) before the next
 * one is tried, and the reason it was skipped is reported.
 */
#include "gateway/select.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/limits.h"
#include "base/log.h"
#include "gateway/initialize.h"
#include "gateway/registry.h"

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
	json_t *facts = sg_init_facts(probe, adapter_facts);
	bool ok = meets(json_object_get(candidate, "require"), facts, why, n);

	json_decref(facts);
	return ok;
}

/*
 * A `select` profile: bring up its candidates in order and keep the first
 * whose observed facts meet its requirements; each one skipped is removed
 * and recorded with the reason in *selection (new).
 */
sg_err sg_select_candidate(struct sg_op *op, json_t *binding, json_t *candidates,
			   json_t **probe, json_t **selection, bool *fatal)
{
	struct sg_session *s = op->s;
	json_t *c;
	size_t i;
	sg_err rc = SG_E_UNAVAILABLE;

	*selection = json_array();
	*fatal = false;
	/* Requirements are judged from facts observed inside: never skip the probe. */
	s->must_observe = true;
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
		rc = sg_init_bring_up(op, binding, name,
				      s->toolchains ||
					      json_object_get(json_object_get(c, "require"), "toolchains"),
				      probe, &made);
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
		sg_init_reset(s);
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

