/*
 * hostutil.h - small pieces the adapters whose environments live on this
 * host (local, singularity) share: best-effort fields, finding a program,
 * removing a directory tree, copying a marker's string field.
 *
 * Invariants: no function here runs a program; strings returned are new
 * (the caller frees them); sg_host_rm_tree never follows a symlink or
 * crosses a mount point.
 */
#ifndef SG_HOSTUTIL_H
#define SG_HOSTUTIL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "adapter.h"

/* Whether the profile lists field in best_effort. */
bool sg_host_best_effort(const struct sg_profile *p, const char *field);

/*
 * name itself when it holds a slash and is executable, else the first
 * executable `name` on this process's PATH (absolute entries only); new,
 * or NULL.
 */
char *sg_host_find_program(const char *name);

/* rm -rf path: 0, or -1 with errno set.  A missing path is 0. */
int sg_host_rm_tree(const char *path);

/* The string m[key] into dst (n bytes, always terminated), "" if absent. */
void sg_host_copy_field(char *dst, size_t n, json_t *m, const char *key);

#endif
