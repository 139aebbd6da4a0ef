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
 *
 * ".." is folded on the path as resolved so far (after the links before
 * it), and a ".." that would climb above root is refused on the spot even
 * if later components would come back in: what lies outside root is the
 * environment's, not ours to look at.  For the same reason an absolute
 * path (given, or a link target) must start with root's own components
 * literally ("/workspace/./x" is fine, "/workspace/../workspace/x" is not).
 * A root of "/" has nothing above it: ".." there stays at "/", as in the
 * kernel.  Everything here is reentrant: no chdir, no globals.
 */
#ifndef SG_PATH_H
#define SG_PATH_H

#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"
#include "base/err.h"

enum sg_path_mode {
	SG_PATH_EXISTING, /* the whole path must exist */
	SG_PATH_CREATE,   /* the parent must exist; the last part may not */
	SG_PATH_NOFOLLOW, /* as EXISTING, but a final symlink is not followed */
	SG_PATH_PARENTS,  /* missing directories may follow the existing part */
};

/*
 * Make `path` (relative to root, or absolute inside the environment;
 * "" is root, as ".") canonical: "." and ".." folded, symlinks resolved
 * as mode says.  On success out (reset first; borrowed) holds the path
 * relative to root ("" for root itself, no leading or trailing slash), in
 * which no component is a symlink except a final one under
 * SG_PATH_NOFOLLOW, and only the missing tail allowed by the mode does not
 * exist.  `root` must be absolute; host_root is opened as given.
 *
 * Errors, each with a sentence naming the user's path in err:
 * SG_E_PATH_ESCAPE ("<path> resolves outside the workspace root"),
 * SG_E_NOT_FOUND (a missing component, a file used as a directory, or a
 * missing host_root), SG_E_INVALID_ARGUMENT (NULL, longer than
 * SG_PATH_MAX, a name too long, too many levels of symbolic links; a C
 * string cannot carry a NUL, so callers that take lengths must refuse one
 * themselves), SG_E_PERMISSION (a directory on the way cannot be
 * searched), SG_E_TOO_LARGE (out's max is too small).
 */
sg_err sg_path_resolve(const char *root, const char *host_root,
		       const char *path, enum sg_path_mode mode,
		       struct sg_buf *out, struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * Purely lexical: fold "." and ".." and repeated slashes.  An absolute
 * path stays absolute ("/" at least); a relative one stays relative (""
 * when nothing is left).  SG_E_PATH_ESCAPE for a ".." above the start,
 * SG_E_INVALID_ARGUMENT for "" or a path longer than SG_PATH_MAX.
 */
sg_err sg_path_normalize(const char *path, struct sg_buf *out) SG_MUST_CHECK;

/*
 * Whether path is already in the form sg_path_normalize() gives it: no
 * empty ("//", a trailing '/'), "." or ".." component.  Checks that
 * compare a path literally (a list of directories it may not be) hold
 * only for such a path.
 */
bool sg_path_normalised(const char *path);

/*
 * Open `rel`, a path sg_path_resolve() returned (relative to root, no "."
 * or "..", no symbolic link in it), beneath dirfd (borrowed), so that no
 * component can be swapped after the check: the kernel refuses to follow
 * any symbolic link on the way, the final one included, and to leave
 * dirfd.  openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS does it; on a kernel without openat2 each
 * component is opened with O_PATH | O_NOFOLLOW from the one before.
 * Links inside root were already followed by sg_path_resolve(), the way
 * the environment sees them; a link met here appeared since, so the open
 * fails (ELOOP, ENOTDIR or EXDEV) instead of following it.
 *
 * `flags` are open(2) flags (O_CLOEXEC and O_NOFOLLOW are added; O_CREAT
 * is not allowed).  "" is dirfd's own directory.  Returns a new
 * descriptor, or -1 with errno.  Reentrant; no allocation.
 */
int sg_path_openat(int dirfd, const char *rel, int flags);

/*
 * The directory holding rel's last component, opened as sg_path_openat()
 * does (O_PATH | O_DIRECTORY); *name points at that component inside rel
 * ("." when rel is "", so that *at() calls on it reach dirfd itself).
 * Returns a new descriptor, or -1 with errno.
 */
int sg_path_openat_parent(int dirfd, const char *rel, const char **name);

/*
 * chdir(2) to `path`, an absolute path that sg_path_resolve() made (root
 * followed by a resolved relative path), through sg_path_openat() beneath
 * root, so a component swapped for a link since the check fails the call
 * instead of moving the process out of root.  0, or -1 with errno (EXDEV:
 * path is not under root).  Syscalls only: safe between fork and exec.
 */
int sg_path_chdir_beneath(const char *root, const char *path);

/* Is `path` equal to `dir` or below it (both normalised, absolute)? */
bool sg_path_under(const char *path, const char *dir);

#endif
