/*
 * hostutil.c - see hostutil.h.
 */
#define _GNU_SOURCE /* asprintf */
#include "hostutil.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool sg_host_best_effort(const struct sg_profile *p, const char *field)
{
	for (size_t i = 0; p->best_effort && p->best_effort[i]; i++)
		if (strcmp(p->best_effort[i], field) == 0)
			return true;
	return false;
}

char *sg_host_find_program(const char *name)
{
	const char *path = getenv("PATH");
	char *copy, *dir, *save = NULL, *found = NULL;

	if (strchr(name, '/'))
		return access(name, X_OK) == 0 ? strdup(name) : NULL;
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	copy = strdup(path);
	for (dir = copy ? strtok_r(copy, ":", &save) : NULL; dir && !found;
	     dir = strtok_r(NULL, ":", &save)) {
		char *p = NULL;

		if (dir[0] == '/' && asprintf(&p, "%s/%s", dir, name) >= 0 &&
		    access(p, X_OK) == 0)
			found = p;
		else
			free(p);
	}
	free(copy);
	return found;
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (type == FTW_DP)
		return rmdir(path) && errno != ENOENT ? -1 : 0;
	return unlink(path) && errno != ENOENT ? -1 : 0;
}

int sg_host_rm_tree(const char *path)
{
	if (access(path, F_OK) != 0)
		return 0;
	return nftw(path, rm_entry, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

void sg_host_copy_field(char *dst, size_t n, json_t *m, const char *key)
{
	const char *v = json_string_value(json_object_get(m, key));

	snprintf(dst, n, "%s", v ? v : "");
}
