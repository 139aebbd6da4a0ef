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

#include "helper/internal.h"
#include "base/limits.h"
#include "core/path.h"

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
	/* sg_fs_revision's walk left out part of the tree (fs.h, workspace_git),
	 * and its digest of the dot directories the fs form skips. */
	bool rev_partial;
	char rev_extra[17];
	const void *in;
	size_t inlen;
	struct sg_buf *out;
	const struct sg_cancel *cancel;
	struct sg_errinfo err;
	/*
	 * A tool failure longer than err.msg holds (a diagnostic with
	 * candidates, malloc, set by sg_fs_fail_text): the dispatcher sends
	 * it whole as the tool_error, with tool_code as its "code" (NULL:
	 * the gateway's default).
	 */
	char *tool_error;
	const char *tool_code;
};

/* errno as a sentence fragment (strerror() is not thread-safe). */
const char *sg_fs_errstr(int e);
/* Record a tool failure: SG_E_NOT_FOUND with the sentence. */
sg_err sg_fs_fail(struct fs *c, const char *fmt, ...) SG_PRINTF(2, 3);
/*
 * Record a long tool failure: takes text (malloc'd, may be NULL when out
 * of memory: then err.msg's short form stands), code the wire word the
 * gateway gives it (NULL: not_found).  Returns SG_E_NOT_FOUND.
 */
sg_err sg_fs_fail_text(struct fs *c, const char *code, char *text, const char *shortmsg);
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

/* Where a bash run's full log lies under the process table (proc.c). */
#define SG_FS_FULL_LOG_DIR ".logs"
/* Read size for streaming files and child output. */
#define FS_CHUNK (64 * SG_KiB)
/* A path of SG_PATH_MAX bytes has at most this many components. */
#define FS_DEPTH_MAX (SG_PATH_MAX / 2)

/* ---- directory walks (fs.c), for list, glob and recursive delete ---- */

struct names {
	char **v;
	size_t n, cap;
	bool more; /* sg_fs_names_read with a bound left some out */
};

/*
 * What sg_fs_names_read keeps, decided as each entry is read, so that a
 * walk that needs few of a directory's names never holds the others.
 * keep() is given the directory (borrowed), the name and readdir's
 * d_type, and returns 1 to keep the entry, 0 to drop it, or -1 to end the
 * read (sg_fs_names_read then fails with ECANCELED; the sieve keeps its
 * own reason).
 */
struct names_sieve {
	int (*keep)(void *ctx, int dirfd, const char *name, unsigned char type);
	void *ctx;
};

/* A '/'-joined path under construction, relative to root. */
struct relpath {
	char p[SG_PATH_MAX + 1];
	size_t len;
};

/*
 * The entries of directory dirfd (borrowed), sorted, "." and ".." left
 * out, and dot names too unless hidden; see fs.c.  Returns 0 or an errno.
 */
int sg_fs_names_read(int dirfd, bool hidden, const struct names_sieve *sieve,
		     size_t keep, struct names *ns);
void sg_fs_names_free(struct names *ns);
/* Append /name (false: too long, r unchanged); *saved for the pop. */
bool sg_fs_rp_push(struct relpath *r, const char *name, size_t *saved);
void sg_fs_rp_pop(struct relpath *r, size_t saved);

/* A name as list writes it: one line, C-quoted if it holds controls. */
sg_err sg_fs_name_put(struct sg_buf *b, const char *s, size_t n, const char *suffix);

/*
 * ---- what every command's reply and check share (fs.c) ----
 *
 * The workspace revision the host's tools report as workspace_revision:
 * "fs:worktree:<16 hex>", a digest of the files under root (the host's
 * form for a tree it does not read through git), or "" when it could not
 * be computed within the host's half second.  Each command that reports
 * it appends it with sg_fs_kv_revision() after sg_reply_ok(); `fs
 * revision` answers it alone, for the tools that change the tree through
 * a command.
 */
#define SG_FS_REVISION_SIZE 32
sg_err sg_fs_revision(struct fs *c, char out[SG_FS_REVISION_SIZE]) SG_MUST_CHECK;
sg_err sg_fs_kv_revision(struct fs *c) SG_MUST_CHECK;
/*
 * The host reports a git repository's revision in git's own form
 * ("git:<HEAD>:worktree:<digest of git status>"), which takes running
 * git; the helper runs no program for a revision, so next to its own form
 * it only says when git would answer: `,"workspace_git":true` when root
 * holds a .git (a directory, or a worktree's file), and the gateway runs
 * git, confined, for those alone (gateway/tools/git.c).  A .git above
 * root does not count: the revision then stays this tree's own.  The mark's
 * value is a digest of what git reads beside the tree (HEAD, the index, the
 * refs, its config, the dot directories the fs form skips), "" when it
 * cannot be had or the walk left out a directory git may see (node_modules,
 * vendor, __pycache__, a tree past its bound): with the tree's own digest
 * it tells the gateway when git's answer may have changed.
 */
#define SG_FS_GIT_HEAD_MAX 256 /* the most of .git/HEAD that is read */
bool sg_fs_revision_git(int rootfd);
/* partial: the tree's digest left out part of what git sees (the mark is
 * then "": every call asks git); extra: sg_fs_revision's digest of the dot
 * directories the fs form skips. */
sg_err sg_fs_kv_revision_git(struct sg_buf *o, int rootfd, bool partial,
			     const char *extra) SG_MUST_CHECK;
/*
 * The host's reason a path is sensitive (.env files, keys, credential
 * stores, version-control and wuu state), or NULL.  path is the display
 * form (relative to root, or absolute outside it).  Reads refuse these
 * unless unconfined; writes and list_files' own path in every mode.
 */
const char *sg_fs_sensitive(const char *path);
/* Whether dir/name is one of the host's own credential files (auth.json,
 * credentials.json ... directly in a .wuu directory): hidden and refused
 * in every mode. */
bool sg_fs_app_credential(const char *dir, const char *name);
/* A resolved rel as the host shows it: relative to root, "." for root,
 * absolute when it lies outside (unconfined). */
void sg_fs_display(struct fs *c, const struct sg_buf *rel, struct sg_buf *out);
/*
 * redact.c: p[0..n) into out (reset first) with what looks like a
 * credential masked as the host masks it in an unconfined read of a
 * sensitive file.  SG_E_TOO_LARGE when out cannot hold it.
 */
sg_err sg_fs_redact(const char *p, size_t n, struct sg_buf *out) SG_MUST_CHECK;

/* search.c: `fs glob` and `fs grep`. */
sg_err sg_fs_glob(struct fs *c);
sg_err sg_fs_grep(struct fs *c);

/* patch.c: `fs patch` (apply_patch). */
sg_err sg_fs_patch(struct fs *c);
/* edit.c: `fs write` (write_file) and `fs edit` (edit_file). */
sg_err sg_fs_write(struct fs *c);
sg_err sg_fs_edit(struct fs *c);

#endif
