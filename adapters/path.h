/*
 * path.h - path containment: does a path stay under the workspace root?
 *
 * Invariants: the answer is computed the way the environment would see the
 * path.  `root` is binding.root inside the environment; `host_root` is where
 * that directory is on the machine running this code (equal to root inside
 * an environment).  Components are walked one by one with openat(O_PATH |
 * O_NOFOLLOW) and readlinkat() under host_root, so absolute symlink targets
 * are taken as environment paths (a link to "<root>/x" stays inside, a link
 * to /etc escapes) and at most SG_SYMLINK_MAX links are followed.  Nothing
 * here trusts realpath(3) of a host path.
 */
#ifndef SG_PATH_H
#define SG_PATH_H

#include <stdbool.h>
#include <stddef.h>

#include "../gateway/base/buf.h"
#include "../gateway/base/err.h"

enum sg_path_mode {
	SG_PATH_EXISTING, /* the whole path must exist */
	SG_PATH_CREATE,   /* the parent must exist; the last part may not */
	SG_PATH_NOFOLLOW, /* as EXISTING, but a final symlink is not followed */
	SG_PATH_PARENTS,  /* missing directories may follow the existing part */
};

/*
 * Make `path` (relative to root, or absolute inside the environment)
 * canonical: "." and ".." folded, symlinks resolved as mode says.  On
 * success out holds the path relative to root ("" for root itself, no
 * leading or trailing slash).  Errors: SG_E_PATH_ESCAPE (with the offending
 * path in err), SG_E_NOT_FOUND, SG_E_INVALID_ARGUMENT (empty, NUL, too
 * long), SG_E_PERMISSION.
 */
sg_err sg_path_resolve(const char *root, const char *host_root,
		       const char *path, enum sg_path_mode mode,
		       struct sg_buf *out, struct sg_errinfo *err) SG_MUST_CHECK;

/* Purely lexical: fold "." and "..", refusing to climb above "/". */
sg_err sg_path_normalize(const char *path, struct sg_buf *out) SG_MUST_CHECK;

/* Is `path` equal to `dir` or below it (both normalised, absolute)? */
bool sg_path_under(const char *path, const char *dir);

#endif
