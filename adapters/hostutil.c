/*
 * hostutil.c - see hostutil.h.
 */
#define _GNU_SOURCE /* asprintf, nftw */
#include "hostutil.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fsutil.h"

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

sg_err sg_host_make_ctl(const char *ctl, struct sg_errinfo *err)
{
	static const char *const subs[] = { "proc", "home", "tmp", NULL };

	for (size_t i = 0; subs[i]; i++) {
		char *d = NULL;

		if (asprintf(&d, "%s/%s", ctl, subs[i]) < 0 || sg_mkdir_p(d, 0700)) {
			free(d);
			return sg_err_set(err, SG_E_INTERNAL, "cannot create %s/%s", ctl, subs[i]);
		}
		free(d);
	}
	return SG_OK;
}
