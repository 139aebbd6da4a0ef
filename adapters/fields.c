/*
 * fields.c - the adapter side of the field table (adapter.h): looking an
 * adapter's declared field up, a profile's best_effort list, and the part
 * of every release() that frees the struct sg_env fields provision() sets.
 */
#define _GNU_SOURCE /* asprintf */
#include "adapters/adapter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct sg_field *sg_field_in(const struct sg_field *table,
				   const char *name)
{
	for (const struct sg_field *f = table; f && f->name; f++)
		if (strcmp(f->name, name) == 0)
			return f;
	return NULL;
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
