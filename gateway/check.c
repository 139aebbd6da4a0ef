/* check.c - the verdict on a profile (check.h). */
#include "check.h"

#include <string.h>

#include "relay.h"

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

static sg_err check_one(const struct sg_profile *p, struct sg_errinfo *err)
{
	const struct sg_adapter *ad = sg_adapter_find(p->backend);

	if (strcmp(p->backend, "command") == 0)
		return sg_relay_check(p, err);
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
