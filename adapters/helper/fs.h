/*
 * fs.h - what sg-helper's file commands share (fs.c, patch.c, search.c).
 *
 * Invariants: a command's paths are resolved once with sg_fs_resolve()
 * (beneath --root, as the environment sees it) and opened beneath rootfd
 * with sg_fs_open_rel()/sg_fs_open_parent(); nothing reopens a user's
 * path by name.  Inside these files SG_E_NOT_FOUND carries every tool
 * failure (sg_fs_fail), which the dispatcher answers as a tool_error; any
 * other code is an {"error":...} reply.  A reply is written to c->out
 * after sg_reply_ok() with the sg_fs_kv_* writers.
 */
#ifndef SG_HELPER_FS_H
#define SG_HELPER_FS_H

#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "internal.h"
#include "base/limits.h"
#include "../path.h"

struct fs {
	struct sg_args a;
	const char *cmd;        /* the sub-command, for messages */
	const char *pos[SG_ARGS_MAX];
	int npos;               /* positionals, those after `--` included */
	char root[SG_PATH_MAX + 1]; /* --root, normalised */
	const char *host_root;
	bool on_host;           /* --host-root: in-process, on this host */
	/*
	 * --unconfined: the request's permission mode lifts path
	 * confinement inside the environment (protocol section 3).
	 */
	bool unconfined;
	int rootfd;             /* O_PATH of host_root, -1 until opened */
	const void *in;
	size_t inlen;
	struct sg_buf *out;
	const struct sg_cancel *cancel;
	struct sg_errinfo err;
};

/* errno as a sentence fragment (strerror() is not thread-safe). */
const char *sg_fs_errstr(int e);
/* Record a tool failure: SG_E_NOT_FOUND with the sentence. */
sg_err sg_fs_fail(struct fs *c, const char *fmt, ...) SG_PRINTF(2, 3);
/* The cancel token's reason, as an error naming what was cancelled. */
sg_err sg_fs_cancelled(struct fs *c, const char *what);
/* Close *fd if open and set it to -1. */
void sg_fs_close(int *fd);
/* Split rel into its directory (into parent, "." for root) and last name. */
const char *sg_fs_split_rel(const char *rel, char *parent, size_t cap);

/* ,"key":value after sg_reply_ok(). */
sg_err sg_fs_kv_strn(struct sg_buf *o, const char *k, const char *s, size_t n);
sg_err sg_fs_kv_str(struct sg_buf *o, const char *k, const char *s);
sg_err sg_fs_kv_int(struct sg_buf *o, const char *k, long long v);
sg_err sg_fs_kv_bool(struct sg_buf *o, const char *k, bool v);

/* Every option used and min..max positionals; then open host_root. */
sg_err sg_fs_args_done(struct fs *c, int min, int max);
/* path resolved beneath root into rel (relative to root, "" is root). */
sg_err sg_fs_resolve(struct fs *c, const char *path, enum sg_path_mode m,
		     struct sg_buf *rel);
/* A resolved path opened beneath root (sg_path_openat). */
int sg_fs_open_rel(struct fs *c, const struct sg_buf *rel, int flags);
/* The directory holding a resolved path's last component, and its name. */
int sg_fs_open_parent(struct fs *c, const struct sg_buf *rel, const char **name);
/* Make rel's missing directories; *fdp an O_PATH of the last (owned). */
sg_err sg_fs_make_dirs(struct fs *c, const char *rel, int *fdp, bool *created);
/* Open a resolved path for reading; a tool failure unless a regular file. */
sg_err sg_fs_open_file(struct fs *c, const struct sg_buf *rel, const char *shown, int *fdp,
		       struct stat *st);
/*
 * Replace the file at rel with data through a temporary file renamed over
 * it (parents made); an existing file keeps its mode and owner unless
 * has_mode.  *created (may be NULL): the file was new.
 */
sg_err sg_fs_put_file(struct fs *c, const char *rel, const char *shown, const char *data,
		      size_t n, bool has_mode, mode_t mode, bool *created);

/* patch.c: `fs patch` (apply_patch). */
sg_err sg_fs_patch(struct fs *c);

#endif
