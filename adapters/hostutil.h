/*
 * hostutil.h - small pieces the adapters whose environments live on this
 * host (local, singularity) share: making the control directory, removing
 * an environment's directory tree, and copying a string field of its
 * marker.
 *
 * Invariants: no function here runs a program; sg_host_rm_tree never
 * follows a symlink or crosses a mount point.
 */
#ifndef SG_HOSTUTIL_H
#define SG_HOSTUTIL_H

#include <jansson.h>
#include <stddef.h>

#include "base/err.h"


/*
 * rm -rf path: 0, or -1 with errno set.  A missing path is 0.  The walk
 * goes by descriptors (openat with O_NOFOLLOW, unlinkat): something of
 * the environment still running may swap a directory for a link to
 * anywhere meanwhile, and the link is removed, never entered.  Any depth
 * is removed with a bounded number of descriptors.
 */
int sg_host_rm_tree(const char *path);

/*
 * The control directory's subdirectories proc/, home/ and tmp/ (mode
 * 0700) under ctl, made with their parents (adapter.h, ctl_dir).
 */
sg_err sg_host_make_ctl(const char *ctl, struct sg_errinfo *err) SG_MUST_CHECK;

/* The string m[key] into dst (n bytes, always terminated), "" if absent. */
void sg_host_copy_field(char *dst, size_t n, json_t *m, const char *key);

#endif
