/*
 * fields.c - the adapter side of the field table (adapter.h): looking an
 * adapter's declared field up, a profile's best_effort list, and the part
 * of every release() that frees the struct sg_env fields provision() sets.
 */
#include "adapter.h"

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

void sg_env_release_base(struct sg_env *env)
{
	json_decref(env->facts);
	free(env->helper);
	free(env->ctl_dir);
	free(env->host_root);
	free(env->host_ctl);
	env->facts = NULL;
	env->helper = env->ctl_dir = env->host_root = env->host_ctl = NULL;
}
