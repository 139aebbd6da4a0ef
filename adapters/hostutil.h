/*
 * hostutil.h - small pieces the adapters whose environments live on this
 * host (local, singularity, the tests' fake) share: making the control
 * directory, writing an environment's marker and copying a string field of
 * it, removing an environment's directory tree, and the part of a child
 * process that an exec request gives as it is.
 *
 * Invariants: no function here runs a program; sg_host_rm_tree never
 * follows a symlink or crosses a mount point.
 */
#ifndef SG_HOSTUTIL_H
#define SG_HOSTUTIL_H

#include <jansson.h>
#include <stddef.h>

#include "adapters/adapter.h"
#include "core/exec.h"
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

/*
 * What an environment whose files are directories on this host holds
 * beside the contract's fields: the first member of such an adapter's env.
 */
struct sg_host_env {
	struct sg_env base;
	char *dir;       /* the environment's directory: everything of it (malloc) */
	char *workspace; /* the workspace on this host (malloc) */
};

/* Free dir, workspace and the contract's fields (sg_env_release_base). */
void sg_host_release(struct sg_host_env *h);

/*
 * The slots of such a backend's struct sg_adapter after name and caps:
 * its env struct prefix_env, its field table prefix_fields and its
 * methods prefix_validate ... prefix_release.  Local and singularity fill
 * the same ones (no get_file: the gateway reads their files in-process).
 */
#define SG_HOST_METHODS(prefix)                                                          \
	.env_size = sizeof(struct prefix##_env), .fields = prefix##_fields,              \
	.validate = prefix##_validate, .provision = prefix##_provision,                  \
	.exec = prefix##_exec, .teardown = prefix##_teardown, .list = prefix##_list,     \
	.destroy = prefix##_destroy, .release = prefix##_release

/*
 * Record h in h->dir/env.json (written whole, then renamed into place, so
 * a reader sees the old marker or the new, never half): the backend, id,
 * identity, session, profile, creation time, persistent, shared and
 * workspace, plus the members of extra (may be NULL; borrowed).  The
 * listing (`envs list`) and gc read it back with sg_host_copy_field.
 */
sg_err sg_host_write_marker(const struct sg_host_env *h, const json_t *extra,
			    struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * The environment's directory h->dir: when it is there, h->base.resumed;
 * when it is not and the binding requires an existing workspace,
 * SG_E_WORKSPACE_LOST naming the identity and the directory.
 */
sg_err sg_host_find_env(struct sg_host_env *h, struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * h->workspace (malloc): the profile's host_workspace, resolved, which must
 * be a directory (else SG_E_NOT_FOUND, or SG_E_WORKSPACE_LOST when the
 * binding requires an existing workspace); without it, h->dir/workspace.
 */
sg_err sg_host_workspace(struct sg_host_env *h, struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * rm -rf dir (sg_host_rm_tree), with the sentence an operator reads when
 * it fails (SG_E_INTERNAL, naming dir and the reason).
 */
sg_err sg_host_remove(const char *dir, struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * *c zeroed, then what the request x gives as it is: stdin, the timeout,
 * merge and detaches.  argv, envp and cwd are the adapter's to set.
 */
void sg_host_child(struct sg_child *c, const struct sg_exec *x);

#endif
