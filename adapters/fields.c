/*
 * fields.c - the adapter side of the field table (adapter.h): looking an
 * adapter's declared field up, a profile's best_effort list, the typed
 * accessors (own fields, credential variables, network allow entries),
 * and the part of every release() that frees the struct sg_env fields
 * provision() sets.
 *
 * The credential rule lives here: a variable is read only when the
 * backend's table declares it, so every secret an adapter can read is
 * one sg_adapter_credential_env() names and the config refuses to
 * forward.
 */
#define _GNU_SOURCE /* asprintf */
#include "adapters/adapter.h"

#include <arpa/inet.h>
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct sg_field *sg_field_in(const struct sg_field *table,
				   const char *name)
{
	for (const struct sg_field *f = table; f && f->name; f++)
		if (f->type != SG_FIELD_ENV && strcmp(f->name, name) == 0)
			return f;
	return NULL;
}

const char *sg_profile_str(const struct sg_profile *p, const char *field)
{
	return json_string_value(json_object_get(p->raw, field));
}

int64_t sg_profile_int(const struct sg_profile *p, const char *field, int64_t def)
{
	const json_t *v = json_object_get(p->raw, field);

	return json_is_integer(v) ? (int64_t)json_integer_value(v) : def;
}

/*
 * The name entry f reads its variable under for the profile object raw
 * (NULL: the default): a renaming field's value when raw sets it.
 */
static const char *env_name(const struct sg_field *f, const json_t *raw)
{
	const char *name = f->type == SG_FIELD_STRING && raw
				   ? json_string_value(json_object_get(raw, f->name))
				   : NULL;

	return name ? name : f->env;
}

/* The entry of table that declares the variable var, or NULL. */
static const struct sg_field *env_entry(const struct sg_field *table, const char *var)
{
	for (const struct sg_field *f = table; f && f->name; f++)
		if (f->env && strcmp(f->env, var) == 0)
			return f;
	return NULL;
}

const char *sg_adapter_env(const struct sg_adapter *ad, const json_t *raw, const char *var,
			   const char **name)
{
	const struct sg_field *f = ad ? env_entry(ad->fields, var) : NULL;
	const char *n, *v;

	assert(f && "a variable read must be declared in the field table");
	if (name)
		*name = f ? env_name(f, raw) : var;
	if (!f)
		return NULL;
	n = env_name(f, raw);
	v = getenv(n);
	return v && *v ? v : NULL;
}

const char *sg_profile_env(const struct sg_profile *p, const char *var, const char **name)
{
	return sg_adapter_env(sg_adapter_find(p->backend), p->raw, var, name);
}

size_t sg_adapter_credential_env(const struct sg_adapter *ad, const json_t *raw,
				 const char **names, size_t max)
{
	size_t n = 0;

	for (const struct sg_field *f = ad->fields; f && f->name && n < max; f++)
		if (f->env)
			names[n++] = env_name(f, raw);
	return n;
}

void sg_profile_credentials(const struct sg_profile *p, json_t *out)
{
	const struct sg_adapter *ad = sg_adapter_find(p->backend);

	for (const struct sg_field *f = ad ? ad->fields : NULL; f && f->name; f++) {
		const char *name, *v;

		if (!f->env || !(f->flags & SG_FIELD_PROBE))
			continue;
		name = env_name(f, p->raw);
		v = getenv(name);
		json_object_set_new(out, name, json_string(v && *v ? "found" : "missing"));
	}
}

bool sg_cidr_parse(const char *s, struct sg_cidr *out)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *slash = strchr(s, '/'), *d;
	size_t hlen;
	unsigned prefix = 0;

	if (!slash)
		return false;
	hlen = (size_t)(slash - s);
	if (hlen == 0 || hlen >= sizeof(host))
		return false;
	memcpy(host, s, hlen);
	host[hlen] = '\0';
	d = slash + 1;
	if (!*d || strlen(d) > 3 || (d[0] == '0' && d[1]))
		return false;
	for (; *d; d++) {
		if (*d < '0' || *d > '9')
			return false;
		prefix = prefix * 10 + (unsigned)(*d - '0');
	}
	if (inet_pton(AF_INET, host, out->addr) == 1)
		out->family = AF_INET;
	else if (inet_pton(AF_INET6, host, out->addr) == 1)
		out->family = AF_INET6;
	else
		return false;
	out->prefix = prefix;
	return prefix <= (out->family == AF_INET ? 32u : 128u);
}

/*
 * A host name (RFC 1123 labels), optionally "*." for every subdomain.  The
 * last label may not be all digits, so an address is never taken for a
 * name.
 */
static bool domain_ok(const char *s)
{
	size_t len, label = 0;
	bool digits = true;

	if (strncmp(s, "*.", 2) == 0)
		s += 2;
	len = strlen(s);
	if (len == 0 || len > 253)
		return false;
	for (size_t i = 0; i <= len; i++) {
		char c = s[i];

		if (c == '.' || c == '\0') {
			if (label == 0 || label > 63 || s[i - 1] == '-')
				return false;
			if (c == '\0')
				break;
			label = 0;
			digits = true;
			continue;
		}
		if (c == '-' && label == 0)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '-'))
			return false;
		if (c < '0' || c > '9')
			digits = false;
		label++;
	}
	return !digits;
}

enum sg_allow_kind sg_allow_kind(const char *entry)
{
	struct sg_cidr c;

	if (strchr(entry, '/'))
		return !sg_cidr_parse(entry, &c) ? SG_ALLOW_BAD
		       : c.family == AF_INET	 ? SG_ALLOW_IPV4
						 : SG_ALLOW_IPV6;
	return domain_ok(entry) ? SG_ALLOW_DOMAIN : SG_ALLOW_BAD;
}

bool sg_profile_best_effort(const struct sg_profile *p, const char *field)
{
	for (size_t i = 0; p->best_effort && p->best_effort[i]; i++)
		if (strcmp(p->best_effort[i], field) == 0)
			return true;
	return false;
}

char *sg_profile_path(const struct sg_profile *p, const char *path)
{
	const char *dir = p->config_dir;
	char *out;

	if (!dir || path[0] == '/' || path[0] == '~')
		return strdup(path);
	while (path[0] == '.' && path[1] == '/')
		path += 2;
	if (asprintf(&out, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", path) < 0)
		return NULL;
	return out;
}

void sg_env_release_base(struct sg_env *env)
{
	json_decref(env->facts);
	free(env->helper);
	free(env->probe);
	free(env->ctl_dir);
	free(env->host_root);
	free(env->host_ctl);
	env->facts = NULL;
	env->helper = env->probe = env->ctl_dir = env->host_root = env->host_ctl = NULL;
}
