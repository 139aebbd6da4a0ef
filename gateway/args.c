/* args.c - typed reads of request data, with invalid_argument sentences. */
#include "gateway/session.h"

#include <string.h>

#include "base/utf8.h"

sg_err sg_arg_str(json_t *obj, const char *key, bool required,
		  const char **out, struct sg_errinfo *err)
{
	json_t *v = json_object_get(obj, key);

	if (!v || json_is_null(v)) {
		if (required)
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "`%s` is required", key);
		return SG_OK;
	}
	if (!json_is_string(v))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "`%s` must be a string", key);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "`%s` must not contain NUL characters", key);
	*out = json_string_value(v);
	return SG_OK;
}

sg_err sg_arg_int(json_t *obj, const char *key, int64_t def, int64_t min,
		  int64_t max, int64_t *out, struct sg_errinfo *err)
{
	json_t *v = json_object_get(obj, key);

	*out = def;
	if (!v || json_is_null(v))
		return SG_OK;
	if (!json_is_integer(v) || json_integer_value(v) < min ||
	    json_integer_value(v) > max)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "`%s` must be an integer from %lld to %lld",
				  key, (long long)min, (long long)max);
	*out = json_integer_value(v);
	return SG_OK;
}

sg_err sg_arg_bool(json_t *obj, const char *key, bool def, bool *out,
		   struct sg_errinfo *err)
{
	json_t *v = json_object_get(obj, key);

	*out = def;
	if (!v || json_is_null(v))
		return SG_OK;
	if (!json_is_boolean(v))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "`%s` must be true or false", key);
	*out = json_is_true(v);
	return SG_OK;
}

sg_err sg_arg_strings(json_t *obj, const char *key, json_t **out,
		      struct sg_errinfo *err)
{
	json_t *v = json_object_get(obj, key), *e;
	size_t i;

	*out = NULL;
	if (!v || json_is_null(v))
		return SG_OK;
	if (!json_is_array(v))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "`%s` must be an array of strings", key);
	json_array_foreach(v, i, e) {
		if (!json_is_string(e) ||
		    strlen(json_string_value(e)) != json_string_length(e))
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "`%s` must be an array of strings without NUL characters",
					  key);
	}
	*out = v;
	return SG_OK;
}

sg_err sg_arg_env(json_t *obj, const char *key, json_t **out,
		  struct sg_errinfo *err)
{
	json_t *v = json_object_get(obj, key), *e;
	const char *k;

	*out = NULL;
	if (!v || json_is_null(v))
		return SG_OK;
	if (!json_is_object(v))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "`%s` must be an object of strings", key);
	json_object_foreach(v, k, e) {
		if (!json_is_string(e) || !*k || strchr(k, '=') ||
		    strlen(json_string_value(e)) != json_string_length(e))
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "`%s.%s` must be a string, and names must be non-empty without '='",
					  key, k);
	}
	*out = v;
	return SG_OK;
}

json_t *sg_json_text(const char *p, size_t n)
{
	struct sg_buf b = SG_BUF_INIT((size_t)-1 / 2);
	json_t *j;

	if (sg_utf8_valid(p, n))
		return json_stringn_nocheck(p, n);
	if (sg_utf8_sanitize(&b, p, n)) {
		sg_buf_release(&b);
		return NULL;
	}
	j = json_stringn_nocheck(b.p, b.len);
	sg_buf_release(&b);
	return j;
}

sg_err sg_arg_mode(json_t *obj, enum sg_confine *out, struct sg_errinfo *err)
{
	const char *m = "";
	sg_err rc = sg_arg_str(obj, "permission_mode", false, &m, err);

	*out = SG_CONFINE_STANDARD;
	if (rc)
		return rc;
	/* The host's three modes (protocol section 3); "" is its standard. */
	if (!*m || strcmp(m, "standard") == 0)
		*out = SG_CONFINE_STANDARD;
	else if (strcmp(m, "read_only") == 0)
		*out = SG_CONFINE_READ_ONLY;
	else if (strcmp(m, "unconfined") == 0)
		*out = SG_CONFINE_NONE;
	else
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "invalid execution permission mode: `permission_mode` must be standard, read_only or unconfined");
	return SG_OK;
}

const char *sg_confine_word(enum sg_confine mode)
{
	return mode == SG_CONFINE_READ_ONLY ? "read_only"
	       : mode == SG_CONFINE_STANDARD ? "standard" : "unconfined";
}
