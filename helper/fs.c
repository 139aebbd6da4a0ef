/*
 * fs.c - sg-helper's file tools: read, write, edit, list, glob, grep, stat,
 * delete, move, mkdir and resolve (glob and grep live in search.c).
 *
 * Every command first resolves its paths with sg_path_resolve(), which
 * walks them the way the environment sees them and refuses anything that
 * leaves root.  The resolved path holds no symlinks, and it is opened once,
 * with sg_path_openat() (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS),
 * relative to an O_PATH descriptor of host_root: a component swapped for a
 * link after the check fails the open instead of being followed.  From
 * then on every call is an *at() call on that descriptor (or on the
 * directory holding the last component) with the last name taken
 * literally, never the path again.
 *
 * Inside this file SG_E_NOT_FOUND carries every tool failure (the tool ran
 * and failed: a missing file, an old_text that is not unique ...).  The
 * dispatcher turns it into {"ok":false,"tool_error":...}; every other code
 * becomes {"error":"<word>",...}.  fs never answers the protocol's
 * not_found, so nothing is lost by the overloading.
 *
 * No argument may cost this process (the gateway itself, on the local
 * backend) more than its size allows: glob matches one component at a
 * time over state sets (glob_step()), edit knows the size of its result
 * before it builds it, and grep's regex is never compiled here but only
 * by the search program, a process with its own limits that a cancel,
 * the shutdown or its deadline kills.
 *
 * _GNU_SOURCE is defined for O_PATH and memmem(), which glibc and musl
 * declare only with it.
 */
#define _GNU_SOURCE
#include "helper/fs.h"

#include <dirent.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/jw.h"
#include "base/hex.h"
#include "base/limits.h"
#include "base/sha256.h"
#include "base/utf8.h"
#include "core/path.h"

/*
 * The raw bytes one read may return: their base64 is the 16 MiB an
 * env-tool reply is sized for (SG_ENVTOOL_REPLY).
 */
#define FS_MAX_BYTES (SG_ENVTOOL_REPLY / 2)
/*
 * Passes a recursive delete makes over one directory that is still not
 * empty after the one before (remove_tree()): a process that keeps
 * filling it makes the delete fail clearly, never run without end.
 */
#define FS_DELETE_PASSES 4

/* One invocation. */


/* errno as a sentence fragment; strerror() is not thread-safe in POSIX. */
const char *sg_fs_errstr(int e)
{
	switch (e) {
	case ENOENT: return "no such file or directory";
	case EACCES:
	case EPERM: return "permission denied";
	case ENOTDIR: return "not a directory";
	case EISDIR: return "is a directory";
	case ENOTEMPTY: return "directory not empty";
	case EEXIST: return "file exists";
	case ENOSPC: return "no space left on device";
	case EDQUOT: return "disk quota exceeded";
	case EROFS: return "read-only filesystem";
	case EXDEV: return "source and destination are on different file "
			   "systems";
	case ELOOP: return "too many levels of symbolic links";
	case ENAMETOOLONG: return "file name too long";
	case EMFILE:
	case ENFILE: return "too many open files";
	case EBUSY: return "device or resource busy";
	case ETXTBSY: return "text file busy";
	case EINVAL: return "invalid argument";
	case EIO: return "input/output error";
	case ENOMEM: return "out of memory";
	case ENXIO: return "no such device or address";
	default: return "an unexpected error from the kernel";
	}
}

/* Record a tool failure (see the top of the file). */
sg_err sg_fs_fail(struct fs *c, const char *fmt, ...)
{
	va_list ap;
	sg_err rc;

	va_start(ap, fmt);
	rc = sg_err_vset(&c->err, SG_E_NOT_FOUND, fmt, ap);
	va_end(ap);
	return rc;
}

sg_err sg_fs_fail_text(struct fs *c, const char *code, char *text, const char *shortmsg)
{
	free(c->tool_error);
	c->tool_error = text;
	c->tool_code = code;
	return sg_fs_fail(c, "%s", shortmsg);
}

sg_err sg_fs_cancelled(struct fs *c, const char *what)
{
	sg_err why = sg_cancel_check(c->cancel);

	return sg_err_set(&c->err, why ? why : SG_E_CANCELLED,
			  "%s was cancelled", what);
}

void sg_fs_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/*
 * Split a resolved relative path into its directory (into parent, "."
 * for root) and last component (a pointer into rel).
 */
const char *sg_fs_split_rel(const char *rel, char *parent, size_t cap)
{
	const char *slash = strrchr(rel, '/');
	size_t n = slash ? (size_t)(slash - rel) : 0;

	if (!slash || n >= cap) {
		snprintf(parent, cap, ".");
		return rel;
	}
	memcpy(parent, rel, n);
	parent[n] = '\0';
	return slash + 1;
}

/* Reply helpers: ,"key":value after sg_reply_ok(). */
sg_err sg_fs_kv_strn(struct sg_buf *o, const char *k, const char *s, size_t n)
{
	sg_err rc = sg_jw_key(o, k, 0);

	return rc ? rc : sg_jw_str(o, s, n);
}

sg_err sg_fs_kv_str(struct sg_buf *o, const char *k, const char *s)
{
	return sg_fs_kv_strn(o, k, s, strlen(s));
}

sg_err sg_fs_kv_int(struct sg_buf *o, const char *k, long long v)
{
	sg_err rc = sg_jw_key(o, k, 0);

	return rc ? rc : sg_buf_addf(o, "%lld", v);
}

sg_err sg_fs_kv_bool(struct sg_buf *o, const char *k, bool v)
{
	sg_err rc = sg_jw_key(o, k, 0);

	return rc ? rc : sg_buf_adds(o, v ? "true" : "false");
}

/*
 * Every option known, the right number of positionals; then open
 * host_root, so a malformed command never touches the disk.
 */
sg_err sg_fs_args_done(struct fs *c, int min, int max)
{
	sg_err rc = sg_args_unused(&c->a, &c->err);
	int e;

	if (rc)
		return rc;
	if (c->npos < min || c->npos > max)
		return sg_err_set(&c->err, SG_E_INVALID_ARGUMENT,
				  "fs %s takes %d to %d arguments, not %d",
				  c->cmd, min, max, c->npos);
	c->rootfd = open(c->host_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (c->rootfd >= 0)
		return SG_OK;
	e = errno;
	if (e == ENOENT)
		return sg_fs_fail(c, "the workspace root %s does not exist",
				 c->root);
	return sg_err_set(&c->err, SG_E_INTERNAL,
			  "the workspace root %s cannot be opened: %s", c->root,
			  sg_fs_errstr(e));
}

/*
 * Unconfined, where the helper runs inside the environment: path is
 * resolved from the environment's "/" as the environment sees it, and
 * rel is then relative to root, with ".." components when it lies
 * outside (sg_fs_open_rel() opens such a path without the beneath rule,
 * which unconfined mode lifts).
 */
static sg_err resolve_anywhere(struct fs *c, const char *path, enum sg_path_mode m,
			       struct sg_buf *rel)
{
	struct sg_buf abs = SG_BUF_INIT(2 * SG_PATH_MAX + 2), got = SG_BUF_INIT(SG_PATH_MAX);
	const char *in = c->root + 1; /* root relative to "/" */
	size_t inlen = strlen(in);
	sg_err rc;

	if (path && path[0] == '/')
		rc = sg_buf_adds(&abs, path);
	else
		rc = sg_buf_addf(&abs, "%s/%s", c->root, path ? path : ".");
	if (rc) {
		rc = sg_err_set(&c->err, SG_E_INVALID_ARGUMENT, "the path is too long");
		goto out;
	}
	rc = sg_path_resolve("/", "/", abs.p, m, &got, &c->err);
	if (rc)
		goto out;
	sg_buf_reset(rel);
	if (!inlen || (got.len >= inlen && !memcmp(got.p, in, inlen) &&
		       (got.len == inlen || got.p[inlen] == '/'))) {
		size_t skip = !inlen ? 0 : got.len == inlen ? inlen : inlen + 1;

		rc = sg_buf_add(rel, got.p + skip, got.len - skip);
		goto out;
	}
	/* One ".." per component of root, then the path from "/". */
	for (const char *p = in; *p && !rc; p += strcspn(p, "/"), p += *p == '/')
		rc = sg_buf_adds(rel, rel->len ? "/.." : "..");
	if (!rc && got.len)
		rc = sg_buf_addf(rel, "/%s", got.p);
	if (rc)
		rc = sg_err_set(&c->err, SG_E_INVALID_ARGUMENT, "%s: the path is too long", path);
out:
	sg_buf_release(&abs);
	sg_buf_release(&got);
	return rc;
}

sg_err sg_fs_resolve(struct fs *c, const char *path, enum sg_path_mode m,
		      struct sg_buf *rel)
{
	sg_err rc;

	if (c->unconfined && !c->on_host)
		return resolve_anywhere(c, path, m, rel);
	rc = sg_path_resolve(c->root, c->host_root, path, m, rel, &c->err);
	/*
	 * In-process on this host, the environment's files outside its root
	 * are this host's: unconfined mode does not reach them.
	 */
	if (rc == SG_E_PATH_ESCAPE && c->unconfined) {
		sg_err_clear(&c->err);
		rc = sg_err_set(&c->err, SG_E_PERMISSION,
				"%s lies outside the workspace root; unconfined mode lifts "
				"confinement inside the environment, but this environment's "
				"files outside its root are the host's, which sandgate never "
				"reaches", path);
	}
	return rc;
}

/* Whether a resolved rel leaves root (unconfined only). */
static bool rel_outside(const struct sg_buf *rel)
{
	return rel->len >= 2 && rel->p[0] == '.' && rel->p[1] == '.' &&
	       (rel->len == 2 || rel->p[2] == '/');
}

/* A resolved path opened beneath root; see sg_path_openat(). */
int sg_fs_open_rel(struct fs *c, const struct sg_buf *rel, int flags)
{
	if (c->unconfined && rel_outside(rel))
		return openat(c->rootfd, rel->p, flags | O_NOFOLLOW | O_CLOEXEC);
	return sg_path_openat(c->rootfd, rel->len ? rel->p : "", flags);
}

/* The directory holding a resolved path's last component, and its name. */
int sg_fs_open_parent(struct fs *c, const struct sg_buf *rel,
		       const char **name)
{
	if (c->unconfined && rel_outside(rel)) {
		char parent[SG_PATH_MAX + 1];

		*name = sg_fs_split_rel(rel->p, parent, sizeof(parent));
		return openat(c->rootfd, parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
	}
	return sg_path_openat_parent(c->rootfd, rel->len ? rel->p : "", name);
}

/*
 * Create the missing directories of rel (resolved, relative to root) and
 * return an O_PATH descriptor of the last one in *fdp (owned).  *created
 * (may be NULL) tells whether that last one was made here.
 */
sg_err sg_fs_make_dirs(struct fs *c, const char *rel, int *fdp, bool *created)
{
	char name[NAME_MAX + 1];
	const char *p = rel, *end;
	int fd, nfd;
	bool made = false;
	size_t n;
	sg_err rc = SG_OK;

	*fdp = -1;
	fd = openat(c->rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return sg_fs_fail(c, "the workspace root cannot be opened: %s",
				 sg_fs_errstr(errno));
	while (*p) {
		while (*p == '/')
			p++;
		n = strcspn(p, "/");
		if (n == 0)
			break;
		end = p + n;
		if (n > NAME_MAX) {
			rc = sg_fs_fail(c, "%.*s: %s", (int)(end - rel), rel,
				       sg_fs_errstr(ENAMETOOLONG));
			goto out;
		}
		memcpy(name, p, n);
		name[n] = '\0';
		made = mkdirat(fd, name, 0755) == 0;
		if (!made && errno != EEXIST) {
			rc = sg_fs_fail(c, "cannot create directory %.*s: %s",
				       (int)(end - rel), rel, sg_fs_errstr(errno));
			goto out;
		}
		nfd = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW |
					       O_CLOEXEC);
		if (nfd < 0 && (errno == ENOTDIR || errno == ELOOP)) {
			rc = sg_fs_fail(c, "%.*s exists and is not a directory",
				       (int)(end - rel), rel);
			goto out;
		}
		if (nfd < 0) {
			rc = sg_fs_fail(c, "%.*s: %s", (int)(end - rel), rel,
				       sg_fs_errstr(errno));
			goto out;
		}
		close(fd);
		fd = nfd;
		p = end;
	}
	*fdp = fd;
	fd = -1;
	if (created)
		*created = made;
out:
	sg_fs_close(&fd);
	return rc;
}

/* Open a resolved path for reading; tool failure unless a regular file. */
sg_err sg_fs_open_file(struct fs *c, const struct sg_buf *rel,
			const char *shown, int *fdp, struct stat *st)
{
	/* O_NONBLOCK: opening a FIFO must not wait for a writer. */
	int fd = sg_fs_open_rel(c, rel, O_RDONLY | O_NONBLOCK);

	*fdp = -1;
	if (fd < 0)
		return sg_fs_fail(c, "%s: %s", shown, sg_fs_errstr(errno));
	if (fstat(fd, st) != 0) {
		close(fd);
		return sg_fs_fail(c, "%s: %s", shown, sg_fs_errstr(errno));
	}
	if (S_ISDIR(st->st_mode)) {
		close(fd);
		return sg_fs_fail(c, "%s is a directory", shown);
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return sg_fs_fail(c, "%s is not a regular file", shown);
	}
	*fdp = fd;
	return SG_OK;
}

/* Read all of fd into b (its max bounds it: SG_E_TOO_LARGE past it). */
static sg_err slurp(struct fs *c, int fd, const char *shown, struct sg_buf *b)
{
	char probe, *dst;
	ssize_t n;
	sg_err rc;

	for (;;) {
		size_t want = b->max - b->len;

		if (sg_cancel_check(c->cancel))
			return sg_fs_cancelled(c, "the read");
		if (want > FS_CHUNK)
			want = FS_CHUNK;
		if (want == 0) {
			/* Full: one more byte means the file is too large. */
			n = read(fd, &probe, 1);
			if (n > 0)
				return SG_E_TOO_LARGE;
		} else {
			rc = sg_buf_reserve(b, want, &dst);
			if (rc)
				return rc;
			n = read(fd, dst, want);
			if (n > 0)
				sg_buf_commit(b, (size_t)n);
		}
		if (n == 0)
			return SG_OK;
		if (n < 0 && errno != EINTR)
			return sg_fs_fail(c, "%s: %s", shown, sg_fs_errstr(errno));
	}
}

static const char b64_chars[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static sg_err b64_encode(struct sg_buf *o, const unsigned char *s, size_t n)
{
	size_t need = (n + 2) / 3 * 4, i, j = 0;
	char *d;
	sg_err rc = sg_buf_reserve(o, need, &d);

	if (rc)
		return rc;
	for (i = 0; i + 2 < n; i += 3) {
		unsigned v = (unsigned)s[i] << 16 | (unsigned)s[i + 1] << 8 |
			     s[i + 2];

		d[j++] = b64_chars[v >> 18 & 63];
		d[j++] = b64_chars[v >> 12 & 63];
		d[j++] = b64_chars[v >> 6 & 63];
		d[j++] = b64_chars[v & 63];
	}
	if (i < n) {
		unsigned v = (unsigned)s[i] << 16 |
			     (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0);

		d[j++] = b64_chars[v >> 18 & 63];
		d[j++] = b64_chars[v >> 12 & 63];
		d[j++] = i + 1 < n ? b64_chars[v >> 6 & 63] : '=';
		d[j++] = '=';
	}
	sg_buf_commit(o, need);
	return SG_OK;
}

/* ---- the workspace revision ---- */

/*
 * The host's workspace revision for a tree that is not read through git:
 * "fs:worktree:" and the first 16 hex digits of a SHA-256 over the tree's
 * entries in walk order (each directory's names sorted): a file as
 * "file\t<path>\t<size>\t<mtime ns>\t<ctime ns>\t<inode>\n", a link as
 * "symlink\t<path>\t<target>\n", anything else as "special\t<path>\n",
 * then a summary line.  The host hashes each file's first MiB; its status
 * from the inode instead (every write moves ctime) keeps a read of a
 * 5,000-file tree at a few milliseconds, where the contents took 400.
 * Skipped: dot directories and the dependency and cache directories the
 * host skips.  The walk stops counting past REV_FILES files (the summary
 * says truncated), and gives up after REV_DEADLINE_MS, when the revision is
 * "" as the host's is after its half second: longer here, since a page's
 * continuation compares revisions, and one that flips to "" on a loaded
 * machine would make the next page stale.  No git runs here: the helper may run in-process on
 * the host, where a repository's configuration must never run a program.
 */
#define REV_FILES 5000
#define REV_DEADLINE_MS 2000
/* Directory levels the walk descends; deeper ones count as truncated. */
#define REV_DEPTH 128

struct rev {
	struct fs *c;
	struct sg_sha256 h;
	struct relpath path;
	long long files;
	int64_t deadline_ms;
	/*
	 * extra: where the dot directories the revision skips are hashed for
	 * workspace_git (itself inside them), NULL when nobody asks; partial:
	 * a directory git may see went unhashed (node_modules, vendor, ...).
	 */
	struct rev *extra;
	bool truncated, late, stop, partial;
};

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool rev_skipped_dir(const char *name)
{
	static const char *const skip[] = { "node_modules", "vendor", "__pycache__", NULL };

	if (name[0] == '.')
		return true;
	for (int i = 0; skip[i]; i++)
		if (strcmp(name, skip[i]) == 0)
			return true;
	return false;
}

static void rev_line(struct rev *r, const char *kind, const char *tail)
{
	sg_sha256_update(&r->h, kind, strlen(kind));
	sg_sha256_update(&r->h, "\t", 1);
	sg_sha256_update(&r->h, r->path.p, r->path.len);
	sg_sha256_update(&r->h, tail, strlen(tail));
}

/* One regular file, by what its inode says of it. */
static void rev_file(struct rev *r, const struct stat *st)
{
	char tail[128];

	r->files++;
	snprintf(tail, sizeof(tail), "\t%lld\t%lld.%09ld\t%lld.%09ld\t%llu\n",
		 (long long)st->st_size, (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec,
		 (long long)st->st_ctim.tv_sec, st->st_ctim.tv_nsec,
		 (unsigned long long)st->st_ino);
	rev_line(r, "file", tail);
}

static void rev_walk(struct rev *r, int dirfd, int level);

/*
 * A directory the revision skips, for workspace_git's sake: root's .git is
 * the mark's own business; another dot directory is walked into r->extra
 * (its path the one r has reached); anything else leaves the tree's digest
 * partial.
 */
static void rev_skipped(struct rev *r, int dirfd, const char *name, int level)
{
	int sub;

	if (r->extra != r && level == 1 && strcmp(name, ".git") == 0)
		return;
	if (name[0] != '.' || !r->extra || r->extra->stop || level >= REV_DEPTH) {
		r->partial = true;
		return;
	}
	sub = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0)
		return;
	r->extra->path = r->path;
	rev_walk(r->extra, sub, level + 1);
	close(sub);
}

static void rev_walk(struct rev *r, int dirfd, int level)
{
	struct names ns;

	if (sg_fs_names_read(dirfd, true, NULL, REV_FILES + 1, &ns))
		return;
	if (ns.more)
		r->truncated = true;
	for (size_t i = 0; i < ns.n && !r->stop; i++) {
		const char *name = ns.v[i];
		struct stat st;
		size_t saved;

		if (sg_cancel_check(r->c->cancel) || mono_ms() > r->deadline_ms) {
			r->late = r->stop = true;
			break;
		}
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !sg_fs_rp_push(&r->path, name, &saved))
			continue;
		if (S_ISDIR(st.st_mode) && rev_skipped_dir(name))
			rev_skipped(r, dirfd, name, level);
		if (S_ISDIR(st.st_mode) && !rev_skipped_dir(name)) {
			int sub = level < REV_DEPTH ? openat(dirfd, name, O_PATH | O_DIRECTORY |
							     O_NOFOLLOW | O_CLOEXEC) : -1;

			if (level >= REV_DEPTH)
				r->truncated = true;
			if (sub >= 0) {
				rev_walk(r, sub, level + 1);
				close(sub);
			}
		} else if (S_ISLNK(st.st_mode)) {
			char target[SG_PATH_MAX + 1];
			ssize_t tl = readlinkat(dirfd, name, target, SG_PATH_MAX);

			target[tl > 0 ? tl : 0] = '\0';
			sg_sha256_update(&r->h, "symlink\t", 8);
			sg_sha256_update(&r->h, r->path.p, r->path.len);
			sg_sha256_update(&r->h, "\t", 1);
			sg_sha256_update(&r->h, target, strlen(target));
			sg_sha256_update(&r->h, "\n", 1);
		} else if (S_ISREG(st.st_mode)) {
			if (r->files >= REV_FILES)
				r->truncated = r->stop = true;
			else
				rev_file(r, &st);
		} else if (!S_ISDIR(st.st_mode)) {
			rev_line(r, "special", "\n");
		}
		sg_fs_rp_pop(&r->path, saved);
	}
	sg_fs_names_free(&ns);
}

sg_err sg_fs_revision(struct fs *c, char out[SG_FS_REVISION_SIZE])
{
	struct rev *r = calloc(2, sizeof(*r)), *x;
	unsigned char md[SG_SHA256_LEN];
	char hex[2 * SG_SHA256_LEN + 1], sum[96];
	int fd;

	out[0] = '\0';
	c->rev_extra[0] = '\0';
	if (!r)
		return SG_E_INTERNAL;
	x = r + 1;
	r->c = x->c = c;
	r->deadline_ms = x->deadline_ms = mono_ms() + REV_DEADLINE_MS;
	sg_sha256_init(&r->h);
	sg_sha256_init(&x->h);
	/* Only a git workspace needs what the fs form skips (fs.h). */
	if (sg_fs_revision_git(c->rootfd))
		r->extra = x->extra = x;
	fd = openat(c->rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		rev_walk(r, fd, 1);
		close(fd);
	}
	c->rev_partial = fd < 0 || r->partial || r->truncated || r->late || x->partial ||
			 x->truncated || x->late;
	sg_sha256_final_hex(&x->h, hex);
	memcpy(c->rev_extra, hex, 16);
	c->rev_extra[16] = '\0';
	if (fd >= 0 && !r->late) {
		snprintf(sum, sizeof(sum), "summary\tfiles=%lld\ttruncated=%s\n", r->files,
			 r->truncated ? "true" : "false");
		sg_sha256_update(&r->h, sum, strlen(sum));
		sg_sha256_final(&r->h, md);
		sg_hex(md, 8, hex);
		memcpy(out, "fs:worktree:", 12);
		memcpy(out + 12, hex, 17);
	}
	free(r);
	return SG_OK;
}

sg_err sg_fs_kv_revision(struct fs *c)
{
	char rev[SG_FS_REVISION_SIZE];
	sg_err rc = sg_fs_revision(c, rev);

	if (!rc)
		rc = sg_fs_kv_str(c->out, "workspace_revision", rev);
	return rc ? rc : sg_fs_kv_revision_git(c->out, c->rootfd, c->rev_partial, c->rev_extra);
}

bool sg_fs_revision_git(int rootfd)
{
	return rootfd >= 0 && faccessat(rootfd, ".git", F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* One line of git_meta: a file's identity under .git, or that it is absent. */
static void git_meta_file(struct sg_sha256 *h, int gitfd, const char *name)
{
	struct stat st;
	char line[SG_PATH_MAX + 128];
	int n;

	if (fstatat(gitfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		n = snprintf(line, sizeof(line), "%s\t%lld\t%lld.%09ld\t%lld.%09ld\t%llu\n", name,
			     (long long)st.st_size, (long long)st.st_mtim.tv_sec,
			     st.st_mtim.tv_nsec, (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec,
			     (unsigned long long)st.st_ino);
	else
		n = snprintf(line, sizeof(line), "%s\t-\n", name);
	if (n > 0)
		sg_sha256_update(h, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

/*
 * What git's status reads beside the tree the revision's own walk covers:
 * the dot directories it skips (extra, their digest), HEAD's text and the
 * identity of the ref it names, the index, packed-refs, config and
 * info/exclude, as 16 hex digits; "" when .git is no directory
 * (a linked worktree's or a submodule's file: its state lies elsewhere).
 * The gateway runs git again only when this or the tree's digest moved.
 */
static void git_meta(int rootfd, const char *extra, char out[17])
{
	static const char *const files[] = { "index", "packed-refs", "config", "info/exclude" };
	char head[SG_FS_GIT_HEAD_MAX + 1], hex[2 * SG_SHA256_LEN + 1];
	int g = openat(rootfd, ".git", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), fd = -1;
	ssize_t n = 0;
	struct sg_sha256 h;

	out[0] = '\0';
	if (g < 0)
		return;
	fd = openat(g, "HEAD", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0)
		n = read(fd, head, SG_FS_GIT_HEAD_MAX);
	sg_fs_close(&fd);
	head[n > 0 ? n : 0] = '\0';
	sg_sha256_init(&h);
	sg_sha256_update(&h, extra, strlen(extra));
	sg_sha256_update(&h, head, strlen(head));
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		git_meta_file(&h, g, files[i]);
	if (strncmp(head, "ref: refs/", 10) == 0 && !strstr(head, "..")) {
		head[strcspn(head, "\r\n")] = '\0';
		git_meta_file(&h, g, head + 5);
	}
	sg_fs_close(&g);
	sg_sha256_final_hex(&h, hex);
	memcpy(out, hex, 16);
	out[16] = '\0';
}

sg_err sg_fs_kv_revision_git(struct sg_buf *o, int rootfd, bool partial, const char *extra)
{
	char meta[17] = "";

	if (!sg_fs_revision_git(rootfd))
		return SG_OK;
	if (!partial)
		git_meta(rootfd, extra, meta);
	return sg_fs_kv_str(o, "workspace_git", meta);
}

/* fs revision: {"ok":true,"workspace_revision":...} for the tools that
 * change the tree through a command (bash, git). */
static sg_err fs_revision(struct fs *c)
{
	sg_err rc = sg_fs_args_done(c, 0, 0);

	if (!rc)
		rc = sg_reply_ok(c->out);
	if (!rc)
		rc = sg_fs_kv_revision(c);
	if (!rc)
		rc = sg_reply_end(c->out);
	return rc;
}

/* ---- the host's sensitive paths ---- */

/* Source files whose names only mention credentials or secrets. */
static bool source_suffix(const char *part)
{
	static const char *const ext[] = { ".c", ".cc", ".cpp", ".cs", ".go", ".h", ".hpp",
		".java", ".js", ".jsx", ".kt", ".m", ".mjs", ".mm", ".php", ".py", ".rb", ".rs",
		".scala", ".svelte", ".swift", ".ts", ".tsx", ".vue", ".cjs", NULL };
	const char *dot = strrchr(part, '.');

	if (!dot || dot == part || !dot[1])
		return false;
	for (int i = 0; ext[i]; i++)
		if (strcmp(dot, ext[i]) == 0)
			return true;
	return false;
}

const char *sg_fs_sensitive(const char *path)
{
	char part[NAME_MAX + 3];
	const char *p = path;

	while (*p) {
		size_t n = strcspn(p, "/"), k = 0;
		bool last = p[n] == '\0';
		const char *s = p, *e = p + n;

		/* The host trims quotes around each component. */
		while (s < e && (*s == '"' || *s == '\''))
			s++;
		while (e > s && (e[-1] == '"' || e[-1] == '\''))
			e--;
		for (; s < e && k < sizeof(part) - 1; s++)
			part[k++] = (char)((*s >= 'A' && *s <= 'Z') ? *s - 'A' + 'a' : *s);
		part[k] = '\0';
		if (!strcmp(part, ".git") || !strcmp(part, ".hg") || !strcmp(part, ".svn"))
			return "version-control metadata";
		if (!strcmp(part, ".wuu") || !strcmp(part, ".wuu-state") || !strcmp(part, ".wuu-home"))
			return "wuu runtime state";
		if (strstr(part, ".env"))
			return ".env file";
		if (!strcmp(part, ".netrc"))
			return ".netrc credentials";
		if (!strcmp(part, ".npmrc") || !strcmp(part, ".pypirc") || !strcmp(part, ".pgpass"))
			return "credential configuration";
		if ((strstr(part, "credential") || strstr(part, "secret")) &&
		    (!last || !source_suffix(part)))
			return "credential or secret path";
		if (!strcmp(part, "id_rsa") || !strcmp(part, "id_ed25519") || !strcmp(part, "id_ecdsa"))
			return "SSH private key";
		if (strstr(part, "private") && strstr(part, "key"))
			return "private key path";
		p += n;
		while (*p == '/')
			p++;
	}
	return NULL;
}

bool sg_fs_app_credential(const char *dir, const char *name)
{
	static const char *const names[] = { "auth.json", "credentials.json", "remote.json",
					     "phone.json", NULL };
	size_t n = strlen(dir);
	bool home = (n >= 5 && strcmp(dir + n - 5, "/.wuu") == 0) || strcmp(dir, ".wuu") == 0;

	for (int i = 0; home && names[i]; i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	return false;
}

void sg_fs_display(struct fs *c, const struct sg_buf *rel, struct sg_buf *out)
{
	sg_buf_reset(out);
	if (rel->len >= 2 && rel->p[0] == '.' && rel->p[1] == '.') {
		/* Outside root (unconfined): the absolute path, as the host shows it. */
		struct sg_buf joined = SG_BUF_INIT(2 * SG_PATH_MAX + 2);

		if (!sg_buf_addf(&joined, "%s/%s", c->root, rel->p) &&
		    sg_path_normalize(joined.p, out) == SG_OK) {
			sg_buf_release(&joined);
			return;
		}
		sg_buf_release(&joined);
		sg_buf_reset(out);
	}
	if (sg_buf_add(out, rel->len ? rel->p : ".", rel->len ? rel->len : 1))
		sg_buf_reset(out);
}

/* ---- read ---- */

/*
 * fs read: the host's read_file, one helper step.  A text file is read
 * once from start to end: every byte is hashed (content_sha256 is the
 * whole file's), lines are counted, and the lines of the window
 * [offset, offset + limit) are kept, each without its newline and one
 * carriage return.  An image (PNG, JPEG, GIF, WebP by their first bytes)
 * comes back whole as base64 with its dimensions.
 */
/* The host's limit on a read without `limit`, and on an image. */
#define READ_MAX_FILE ((long long)(256 * SG_KiB))
#define READ_MAX_IMAGE ((long long)(20 * SG_MiB))
#define READ_MAX_PIXELS 40000000ULL
/* The host's inline attachment limit for an image's bytes. */
#define READ_MAX_INLINE ((long long)(2 * SG_MiB))
/*
 * A file larger than this is neither hashed nor counted to its end
 * (version_digest(), read_lines()): the host would read a terabyte.
 */
#define READ_FULL_MAX ((long long)(256 * SG_MiB))
/* What the host sniffs and what it looks at for a NUL. */
#define READ_SNIFF 512
/*
 * The bytes a window's lines may hold when a limit is given: twice them
 * go into the reply (numbered, and plain for programs), escaped twice.
 */
#define READ_MAX_SELECTED ((long long)SG_TOOL_OUTPUT)

struct image {
	const char *mime;
	unsigned long long w, h;
	bool animated;
};

static unsigned be16(const unsigned char *p) { return (unsigned)p[0] << 8 | p[1]; }
static unsigned le16(const unsigned char *p) { return (unsigned)p[1] << 8 | p[0]; }
static unsigned long be32(const unsigned char *p)
{
	return (unsigned long)p[0] << 24 | (unsigned long)p[1] << 16 | (unsigned long)p[2] << 8 | p[3];
}

/* What the host's content sniffing calls an image, from the first bytes. */
static const char *image_mime(const unsigned char *b, size_t n)
{
	if (n >= 8 && !memcmp(b, "\211PNG\r\n\032\n", 8))
		return "image/png";
	if (n >= 3 && !memcmp(b, "\377\330\377", 3))
		return "image/jpeg";
	if (n >= 6 && (!memcmp(b, "GIF87a", 6) || !memcmp(b, "GIF89a", 6)))
		return "image/gif";
	if (n >= 14 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WEBPVP", 6))
		return "image/webp";
	if (n >= 2 && !memcmp(b, "BM", 2))
		return "image/bmp";
	if (n >= 4 && !memcmp(b, "\0\0\1\0", 4))
		return "image/x-icon";
	return NULL;
}

/* A GIF's frames: more than one image descriptor makes it animated. */
static bool gif_dims(const unsigned char *b, size_t n, struct image *im)
{
	size_t i = 13, frames = 0;

	if (n < 13)
		return false;
	im->w = le16(b + 6), im->h = le16(b + 8);
	if (b[10] & 0x80)
		i += 3u << ((b[10] & 7) + 1);
	while (i < n && b[i] != 0x3b) {
		if (b[i] == 0x2c) {
			if (i + 10 > n)
				return false;
			frames++;
			i += 10 + ((b[i + 9] & 0x80) ? 3u << ((b[i + 9] & 7) + 1) : 0) + 1;
		} else if (b[i] == 0x21) {
			i += 2;
		} else {
			return false;
		}
		while (i < n && b[i])
			i += b[i] + 1u;
		i++;
	}
	im->animated = frames > 1;
	return frames > 0;
}

static bool jpeg_dims(const unsigned char *b, size_t n, struct image *im)
{
	for (size_t i = 2; i + 9 < n;) {
		unsigned marker;

		if (b[i] != 0xff)
			return false;
		marker = b[i + 1];
		if (marker == 0xff) {
			i++;
			continue;
		}
		if (marker >= 0xc0 && marker <= 0xcf && marker != 0xc4 && marker != 0xc8 &&
		    marker != 0xcc) {
			im->h = be16(b + i + 5), im->w = be16(b + i + 7);
			return true;
		}
		i += 2 + be16(b + i + 2);
	}
	return false;
}

static bool webp_dims(const unsigned char *b, size_t n, struct image *im)
{
	if (n >= 30 && !memcmp(b + 12, "VP8 ", 4)) {
		im->w = le16(b + 26) & 0x3fff, im->h = le16(b + 28) & 0x3fff;
		return true;
	}
	if (n >= 25 && !memcmp(b + 12, "VP8L", 4)) {
		unsigned long v = b[21] | (unsigned long)b[22] << 8 | (unsigned long)b[23] << 16 |
				  (unsigned long)b[24] << 24;

		im->w = (v & 0x3fff) + 1, im->h = (v >> 14 & 0x3fff) + 1;
		return true;
	}
	if (n >= 30 && !memcmp(b + 12, "VP8X", 4)) {
		im->w = 1 + (b[24] | (unsigned long)b[25] << 8 | (unsigned long)b[26] << 16);
		im->h = 1 + (b[27] | (unsigned long)b[28] << 8 | (unsigned long)b[29] << 16);
		im->animated = (b[20] & 0x02) != 0;
		return true;
	}
	return false;
}

static bool image_dims(const unsigned char *b, size_t n, struct image *im)
{
	if (!strcmp(im->mime, "image/png"))
		return n >= 24 && !memcmp(b + 12, "IHDR", 4) &&
		       (im->w = be32(b + 16), im->h = be32(b + 20), true);
	if (!strcmp(im->mime, "image/jpeg"))
		return jpeg_dims(b, n, im);
	if (!strcmp(im->mime, "image/gif"))
		return gif_dims(b, n, im);
	if (!strcmp(im->mime, "image/webp"))
		return webp_dims(b, n, im);
	return false;
}

static sg_err read_image(struct fs *c, int fd, const struct stat *st, const char *mime,
			 const struct sg_buf *shown)
{
	struct sg_buf data = SG_BUF_INIT((size_t)READ_MAX_IMAGE);
	struct image im = { .mime = mime };
	sg_err rc;

	if (st->st_size > READ_MAX_IMAGE)
		return sg_fs_fail(c, "image too large (%lld bytes, max %lld); resize or crop it "
				  "before reading", (long long)st->st_size, READ_MAX_IMAGE);
	rc = slurp(c, fd, c->pos[0], &data);
	if (rc == SG_E_TOO_LARGE)
		rc = sg_fs_fail(c, "image exceeds %lld bytes; resize or crop it before reading",
				READ_MAX_IMAGE);
	if (rc)
		goto out;
	if (!image_dims((const unsigned char *)data.p, data.len, &im) || im.animated) {
		rc = sg_fs_fail(c, "cannot decode image: %s; use PNG, JPEG, static GIF, or WebP",
				im.animated ? "animated images are not supported"
					    : "unknown or damaged format");
		goto out;
	}
	if (im.w * im.h > READ_MAX_PIXELS) {
		rc = sg_fs_fail(c, "image dimensions %llux%llu exceed %llu pixels; resize or crop "
				"it before reading", im.w, im.h, READ_MAX_PIXELS);
		goto out;
	}
	if ((long long)data.len > READ_MAX_INLINE) {
		rc = sg_fs_fail(c, "normalized image exceeds the %lld-byte tool attachment limit; "
				"resize or crop it before reading", READ_MAX_INLINE);
		goto out;
	}
	rc = sg_reply_ok(c->out);
	if (!rc)
		rc = sg_fs_kv_str(c->out, "kind", "image");
	if (!rc)
		rc = sg_fs_kv_strn(c->out, "path", shown->p, shown->len);
	if (!rc)
		rc = sg_fs_kv_str(c->out, "media_type", mime);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "width", (long long)im.w);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "height", (long long)im.h);
	if (!rc)
		rc = sg_jw_key(c->out, "data", 0);
	if (!rc)
		rc = sg_buf_addc(c->out, '"');
	if (!rc)
		rc = b64_encode(c->out, (const unsigned char *)data.p, data.len);
	if (!rc)
		rc = sg_buf_addc(c->out, '"');
	if (!rc)
		rc = sg_reply_end(c->out);
out:
	sg_buf_release(&data);
	return rc;
}

/*
 * The window's lines travel as they are, newlines kept: the gateway
 * numbers them for the model's view (gateway/tools/files.c), so a read
 * crosses the transport once and not twice.
 */
struct window {
	int64_t first, limit;     /* limit 0: to the end */
	long long max;            /* bytes the window's lines may hold */
	struct sg_buf text;       /* the lines as they are (those not streamed yet) */
	long long line_no, shown, kept;
	bool in_line;             /* the current line has begun */
	int stream;               /* where the lines stream as they are read, or -1 */
	uint64_t streamed;        /* bytes written to stream */
};

/*
 * Streamed, the window's lines go out in pieces of about this many bytes,
 * each ending at a newline, while the rest of the file is still read and
 * hashed (a transport then carries them meanwhile, as it would `cat`'s).
 */
#define READ_STREAM_CHUNK (64 * SG_KiB)

/*
 * The text with credentials masked (an unconfined read of a sensitive
 * file, as the host's); the line count and the digest stay the file's.
 */
static sg_err window_redact(struct window *w)
{
	struct sg_buf tmp = SG_BUF_INIT(w->text.max);
	sg_err rc = sg_fs_redact(w->text.p, w->text.len, &tmp);

	if (!rc) {
		sg_buf_reset(&w->text);
		rc = sg_buf_add(&w->text, tmp.p, tmp.len);
	}
	sg_buf_release(&tmp);
	return rc;
}

/*
 * The text as valid UTF-8 (each invalid byte U+FFFD, as JSON gives it
 * anyway), before it goes raw after the JSON line: an exec transport
 * (Daytona's, Vercel's) may replace invalid bytes itself, which would
 * change the length the line announces.
 */
static sg_err window_sanitize(struct window *w)
{
	struct sg_buf tmp = SG_BUF_INIT(3 * w->text.max);
	sg_err rc = SG_OK;

	if (sg_utf8_valid(w->text.p, w->text.len))
		return SG_OK;
	rc = sg_utf8_sanitize(&tmp, w->text.p, w->text.len);
	if (!rc) {
		sg_buf_release(&w->text);
		sg_buf_init(&w->text, tmp.max);
		rc = sg_buf_add(&w->text, tmp.p, tmp.len);
	}
	sg_buf_release(&tmp);
	return rc;
}

/*
 * The lines kept so far, as valid UTF-8, written to the stream.  A piece
 * ends at a newline or at the window's end, and no character spans a
 * newline, so piece by piece the text is sanitized exactly as it would
 * be whole.
 */
static sg_err window_flush(struct fs *c, struct window *w)
{
	struct sg_buf tmp = SG_BUF_INIT(3 * w->text.max);
	const char *p = w->text.p;
	size_t n = w->text.len;
	sg_err rc = SG_OK;

	if (n && !sg_utf8_valid(p, n)) {
		rc = sg_utf8_sanitize(&tmp, p, n);
		p = tmp.p;
		n = tmp.len;
	}
	if (!rc && sg_write_all(w->stream, p, n))
		rc = sg_fs_fail(c, "read file: cannot write the lines read: %s",
				sg_fs_errstr(errno));
	if (!rc)
		w->streamed += n;
	sg_buf_reset(&w->text);
	sg_buf_release(&tmp);
	return rc;
}

/* A piece of a line of the window (the host counts the bytes without the
 * newline against its cap). */
static sg_err window_add(struct fs *c, struct window *w, const char *p, size_t n,
			 bool newline)
{
	size_t body = n - (newline ? 1 : 0);

	if (w->kept + (long long)body > w->max || sg_buf_add(&w->text, p, n))
		return sg_fs_fail(c, "selected read range too large (over %lld bytes). Use a "
				  "lower limit or a later offset to read a smaller portion", w->max);
	w->kept += (long long)body;
	return SG_OK;
}

/*
 * Lines before or after a big file's window are only counted, and a hole
 * (a sparse file's unwritten range, which reads as NUL bytes) holds no
 * newline: move *at, the descriptor's offset, past the hole there, so
 * that a terabyte hole behind a text head costs the text alone.  True
 * when a hole was skipped.  Where SEEK_DATA is not supported (EINVAL),
 * the file is simply read.
 */
static bool skip_hole(int fd, long long *at)
{
	off_t data = lseek(fd, (off_t)*at, SEEK_DATA);

	/* ENXIO: no data from *at on, the rest of the file is a hole. */
	if (data < 0 && errno == ENXIO)
		data = lseek(fd, 0, SEEK_END);
	if (data <= (off_t)*at) {
		lseek(fd, (off_t)*at, SEEK_SET);
		return false;
	}
	*at = (long long)data;
	return true;
}

/*
 * A file larger than READ_FULL_MAX is not hashed: its content_sha256 is
 * the digest of its version (device, inode, size, modification and change
 * times), which a change moves as a change of its bytes would.
 */
static void version_digest(const struct stat *st, struct sg_sha256 *h)
{
	char id[192];
	int n = snprintf(id, sizeof(id), "file-version %llu %llu %lld %lld.%09ld %lld.%09ld",
			 (unsigned long long)st->st_dev, (unsigned long long)st->st_ino,
			 (long long)st->st_size, (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec,
			 (long long)st->st_ctim.tv_sec, st->st_ctim.tv_nsec);

	sg_sha256_init(h);
	sg_sha256_update(h, id, n > 0 ? (size_t)n : 0);
}

/*
 * Read the file once: every byte hashed into h (NULL for a big file),
 * lines counted, the window's lines kept.  A big file's holes outside the
 * window are skipped, and its count stops once the window is complete
 * and READ_FULL_MAX bytes were read: total_lines is then a lower bound.
 */
static sg_err read_lines(struct fs *c, int fd, struct window *w, struct sg_sha256 *h,
			 long long *lines)
{
	char *chunk = malloc(FS_CHUNK);
	int64_t end = w->limit && w->limit <= INT64_MAX - w->first ? w->first + w->limit : INT64_MAX;
	long long at = 0;
	sg_err rc = SG_OK;

	w->line_no = 1;
	w->in_line = false;
	if (!chunk)
		return SG_E_INTERNAL;
	for (;;) {
		ssize_t n;
		const char *p, *e, *nl;

		if (!h && w->line_no >= end && at >= READ_FULL_MAX)
			break;
		if (!h && (w->line_no < w->first || w->line_no >= end) && skip_hole(fd, &at))
			w->in_line = true;
		n = read(fd, chunk, FS_CHUNK);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = sg_fs_fail(c, "read file: %s", sg_fs_errstr(errno));
			break;
		}
		if (n == 0)
			break;
		if (sg_cancel_check(c->cancel)) {
			rc = sg_fs_cancelled(c, "the read");
			break;
		}
		at += n;
		if (h)
			sg_sha256_update(h, chunk, (size_t)n);
		for (p = chunk, e = chunk + n; p < e && !rc; p = nl ? nl + 1 : e) {
			bool in = w->line_no >= w->first && w->line_no < end;

			nl = memchr(p, '\n', (size_t)(e - p));
			w->in_line = true;
			if (in)
				rc = window_add(c, w, p, (size_t)((nl ? nl + 1 : e) - p), nl != NULL);
			if (!rc && nl && in)
				w->shown++;
			if (!rc && nl && in && w->stream >= 0 && w->text.len >= READ_STREAM_CHUNK)
				rc = window_flush(c, w);
			if (nl) {
				w->line_no++;
				w->in_line = false;
			}
		}
		if (rc)
			break;
	}
	/* A last line without a newline is a line too. */
	if (!rc && w->in_line && w->line_no >= w->first && w->line_no < end)
		w->shown++;
	*lines = w->line_no - 1 + (w->in_line ? 1 : 0);
	free(chunk);
	return rc;
}

/* The reply's JSON for a text read, into c->out. */
static sg_err read_reply(struct fs *c, const struct stat *st, const struct sg_buf *shown,
			 int64_t first, const struct window *w, long long lines, const char *hex,
			 bool raw)
{
	sg_err rc = sg_reply_ok(c->out);

	if (!rc)
		rc = sg_fs_kv_str(c->out, "kind", "text");
	if (!rc)
		rc = sg_fs_kv_strn(c->out, "path", shown->p, shown->len);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "size", (long long)st->st_size);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "mtime_ns", (long long)st->st_mtim.tv_sec * 1000000000LL +
						       st->st_mtim.tv_nsec);
	if (!rc)
		rc = sg_fs_kv_str(c->out, "content_sha256", hex);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "start_line", (long long)first);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "num_lines", w->shown);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "total_lines", lines);
	if (!rc)
		rc = sg_fs_kv_revision(c);
	if (!rc && raw)
		rc = sg_fs_kv_int(c->out, "text_bytes",
				  (long long)(w->stream >= 0 ? w->streamed : w->text.len));
	else if (!rc)
		rc = sg_fs_kv_strn(c->out, "text", w->text.p, w->text.len);
	return rc ? rc : sg_reply_end(c->out);
}

/*
 * --raw, kept whole (in-process, or masked): the text, a newline, then the
 * reply's JSON line, the same shape a streamed read has on stdout.  The
 * gateway takes the last line as the reply and escapes the text into its
 * frame without parsing a megabyte of JSON string and encoding it again.
 */
static sg_err raw_frame(struct fs *c, const struct window *w)
{
	char *json = strdup(c->out->p);
	sg_err rc = json ? SG_OK : SG_E_INTERNAL;

	sg_buf_reset(c->out);
	if (!rc && (sg_buf_add(c->out, w->text.p, w->text.len) || sg_buf_addc(c->out, '\n') ||
		    sg_buf_adds(c->out, json)))
		rc = SG_E_TOO_LARGE;
	free(json);
	return rc;
}

/*
 * A text read: the window's lines, the whole file hashed.  With --raw and
 * when this is sg-helper's own process (not the gateway's in-process call)
 * and nothing is masked, the lines stream to stdout as they are read and
 * the JSON line follows them (main.c writes it).
 */
static sg_err read_text(struct fs *c, int fd, const struct stat *st,
			const struct sg_buf *shown, int64_t first, int64_t limit, bool raw,
			bool redact)
{
	struct window w = {
		.first = first,
		.limit = limit,
		.max = limit ? READ_MAX_SELECTED : READ_MAX_FILE,
		.stream = raw && !redact && sg_helper_self ? STDOUT_FILENO : -1,
	};
	long long room = st->st_size < w.max ? (long long)st->st_size : w.max;
	char hex[2 * SG_SHA256_LEN + 1];
	struct sg_sha256 h;
	struct stat after;
	long long lines = 0;
	char *unused;
	sg_err rc;

	sg_buf_init(&w.text, (size_t)w.max * 2 + 64);
	/* Room for what is kept at once: no copy per doubling of a megabyte. */
	if (w.stream >= 0 && room > (long long)(2 * READ_STREAM_CHUNK))
		room = (long long)(2 * READ_STREAM_CHUNK);
	if (sg_buf_reserve(&w.text, (size_t)room + 64, &unused))
		return sg_fs_fail(c, "out of memory for the read");
	sg_sha256_init(&h);
	if (st->st_size > READ_FULL_MAX)
		version_digest(st, &h);
	rc = read_lines(c, fd, &w, st->st_size > READ_FULL_MAX ? NULL : &h, &lines);
	if (!rc && redact)
		rc = window_redact(&w);
	if (!rc && w.stream >= 0)
		rc = window_flush(c, &w);
	else if (!rc && raw)
		rc = window_sanitize(&w);
	if (rc)
		goto out;
	/* The host hashes twice to see a file that changed under the read. */
	if (fstat(fd, &after) != 0 || after.st_size != st->st_size ||
	    after.st_mtim.tv_sec != st->st_mtim.tv_sec ||
	    after.st_mtim.tv_nsec != st->st_mtim.tv_nsec) {
		rc = sg_fs_fail(c, "read_file snapshot changed while it was being read; retry the "
				"request");
		goto out;
	}
	sg_sha256_final_hex(&h, hex);
	rc = read_reply(c, st, shown, first, &w, lines, hex, raw);
	if (!rc && raw && w.stream < 0)
		rc = raw_frame(c, &w);
out:
	/* Whatever main.c writes next (the reply, or an error) is a line of its own. */
	if (w.stream >= 0 && sg_write_all(w.stream, "\n", 1) && !rc)
		rc = sg_fs_fail(c, "read file: cannot write the lines read: %s", sg_fs_errstr(errno));
	sg_buf_release(&w.text);
	return rc;
}

/*
 * A byte range's reply: the file's size and digest (hex), the segment's
 * end, where the data starts, and the data (show) in base64.
 */
static sg_err bytes_reply(struct fs *c, const struct sg_buf *shown, const char *hex,
			  int64_t size, int64_t seg, int64_t offset, const struct sg_buf *show)
{
	sg_err rc = sg_reply_ok(c->out);

	if (!rc)
		rc = sg_fs_kv_str(c->out, "kind", "bytes");
	if (!rc)
		rc = sg_fs_kv_strn(c->out, "path", shown->p, shown->len);
	if (!rc)
		rc = sg_fs_kv_str(c->out, "content_sha256", hex);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "total_bytes", (long long)size);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "segment_end_offset", (long long)seg);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "byte_offset", (long long)offset);
	if (!rc)
		rc = sg_fs_kv_revision(c);
	if (!rc)
		rc = sg_jw_key(c->out, "data", 0);
	if (!rc)
		rc = sg_buf_addc(c->out, '"');
	if (!rc)
		rc = b64_encode(c->out, (const unsigned char *)show->p, show->len);
	if (!rc)
		rc = sg_buf_addc(c->out, '"');
	if (!rc)
		rc = sg_reply_end(c->out);
	return rc;
}

/*
 * A byte window [offset, offset + limit) of the segment [offset, end)
 * (end 0: the file's end), the host's byte_range: the whole file is
 * hashed, the window read with a few bytes more so that a character cut
 * at its end can be told from binary bytes and trimmed, and sent as
 * base64 in the JSON line, never raw: the bytes may be anything, and not
 * every exec transport keeps what is not UTF-8 (the gateway decides
 * whether it is text).
 */
static sg_err read_bytes(struct fs *c, int fd, const struct stat *st,
			 const struct sg_buf *shown, int64_t offset, int64_t limit, int64_t end,
			 bool redact)
{
	struct sg_buf win = SG_BUF_INIT((size_t)limit + 4);
	/* [REDACTED] for a one-byte value: a window grows at most elevenfold. */
	struct sg_buf masked = SG_BUF_INIT(11 * ((size_t)limit + 4));
	const struct sg_buf *show = &win;
	int64_t size = (int64_t)st->st_size, seg = end ? end : size, want;
	char hex[2 * SG_SHA256_LEN + 1], *chunk = malloc(FS_CHUNK), *dst;
	struct sg_sha256 h;
	struct stat after;
	ssize_t n;
	sg_err rc = SG_OK;

	if (!chunk)
		return SG_E_INTERNAL;
	if (end && (end <= offset || end > size)) {
		rc = sg_fs_fail(c, "read_file byte_range.end_offset must be greater than offset "
				"and within the file");
		goto out;
	}
	if (offset > size)
		offset = size;
	sg_sha256_init(&h);
	if (size > READ_FULL_MAX)
		version_digest(st, &h);
	while (size <= READ_FULL_MAX && (n = read(fd, chunk, FS_CHUNK)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || sg_cancel_check(c->cancel)) {
			rc = n < 0 ? sg_fs_fail(c, "read file: %s", sg_fs_errstr(errno))
				   : sg_fs_cancelled(c, "the read");
			goto out;
		}
		sg_sha256_update(&h, chunk, (size_t)n);
	}
	want = seg - offset < limit + 3 ? seg - offset : limit + 3;
	rc = sg_buf_reserve(&win, (size_t)want, &dst);
	n = rc ? -1 : pread(fd, dst, (size_t)want, offset);
	if (n < 0 || fstat(fd, &after) != 0 || after.st_size != st->st_size ||
	    after.st_mtim.tv_sec != st->st_mtim.tv_sec ||
	    after.st_mtim.tv_nsec != st->st_mtim.tv_nsec) {
		rc = sg_fs_fail(c, "read_file snapshot changed while it was being read; retry the "
				"request");
		goto out;
	}
	sg_buf_commit(&win, (size_t)n);
	/* A character cut by the window's end is left to the next one. */
	for (int i = 0; i < 3 && win.len && offset + (int64_t)n < seg &&
			!sg_utf8_valid(win.p, win.len); i++)
		sg_buf_truncate(&win, win.len - 1);
	if (redact) {
		rc = sg_fs_redact(win.p, win.len, &masked);
		if (rc)
			goto out;
		show = &masked;
	}
	sg_sha256_final_hex(&h, hex);
	rc = bytes_reply(c, shown, hex, size, seg, offset, show);
out:
	free(chunk);
	sg_buf_release(&masked);
	sg_buf_release(&win);
	return rc;
}

/*
 * A name beside a missing one that was probably meant: the same name in
 * another case, or the same stem with another extension.  Into hint
 * (display form), empty when there is none.
 */
static void similar_name(struct fs *c, const char *path, struct sg_buf *hint)
{
	struct sg_buf rel = SG_BUF_INIT(SG_PATH_MAX), shown = SG_BUF_INIT(SG_PATH_MAX);
	struct sg_errinfo quiet = { 0 };
	struct names ns = { 0 };
	const char *name;
	size_t stem;
	int dirfd = -1;

	sg_buf_reset(hint);
	if (sg_path_resolve(c->root, c->host_root, path, SG_PATH_CREATE, &rel, &quiet))
		goto out;
	dirfd = sg_fs_open_parent(c, &rel, &name);
	if (dirfd < 0 || sg_fs_names_read(dirfd, true, NULL, SG_LIST_MAX, &ns))
		goto out;
	stem = strcspn(name, ".");
	for (size_t i = 0; i < ns.n; i++) {
		const char *cand = ns.v[i];

		if (strcasecmp(cand, name) == 0 ||
		    (stem && strncmp(cand, name, stem) == 0 && cand[stem] == '.')) {
			size_t dir = (size_t)(name - (rel.len ? rel.p : ""));

			if (!sg_buf_add(&shown, rel.p, dir) && !sg_buf_adds(&shown, cand))
				sg_fs_display(c, &shown, hint);
			break;
		}
	}
out:
	sg_fs_names_free(&ns);
	sg_fs_close(&dirfd);
	sg_buf_release(&rel);
	sg_buf_release(&shown);
}

/* The host's sentence for a path that is not there. */
static sg_err read_missing(struct fs *c, const char *path)
{
	struct sg_buf hint = SG_BUF_INIT(SG_PATH_MAX);
	sg_err rc;

	similar_name(c, path, &hint);
	if (hint.len)
		rc = sg_fs_fail(c, "File not found: %s. Did you mean: %s?", path, hint.p);
	else
		rc = sg_fs_fail(c, "File not found: %s", path);
	sg_buf_release(&hint);
	return rc;
}

/*
 * What no tool hands out: the host's own credential files, in every mode,
 * and sensitive paths (keys, .env ...) unless unconfined.  shown is rel's
 * display form; tool and verb word the refusal ("read_file refuses to
 * read ...").
 */
static sg_err guard_read(struct fs *c, const struct sg_buf *rel, const struct sg_buf *shown,
			 const char *tool, const char *verb)
{
	char parent[SG_PATH_MAX + 1];
	const char *name = sg_fs_split_rel(rel->p, parent, sizeof(parent)), *why;

	if (!strcmp(parent, "."))
		snprintf(parent, sizeof(parent), "%s", c->root);
	if (rel->len && sg_fs_app_credential(parent, name))
		return sg_err_set(&c->err, SG_E_PERMISSION, "%s refuses to %s wuu credential "
				  "file \"%s\": it stores the app's own login credentials and is "
				  "never accessible to the agent in any permission mode", tool, verb,
				  shown->p);
	why = c->unconfined ? NULL : sg_fs_sensitive(shown->p);
	if (why)
		return sg_err_set(&c->err, SG_E_PERMISSION, "%s refuses to %s sensitive path "
				  "\"%s\" (%s). Chat approval does not lift this guard. Use a "
				  "metadata-only command, or edit the file outside the session",
				  tool, verb, shown->p, why);
	return SG_OK;
}

/*
 * --full-log: PATH is a bash run's full_log_ref, read as the host's
 * read_file reads its session artifacts (ResolveReadPath).  Only its last
 * two components count, the log directory's name and a log's: the log is
 * opened beneath --ctl (proc.c keeps the logs there) without following a
 * link, and a file with a second name is not taken for one, as the process
 * records are not, since the environment's commands write beside it.  The
 * gateway checks that the rest of PATH is the process table as the
 * environment sees it.  *is_log: PATH named a log (opened, or missing);
 * when false, PATH is read as any other path, under the mode's rules.
 */
static sg_err open_full_log(struct fs *c, const char *ctl, struct sg_buf *shown, int *fdp,
			    bool *is_log)
{
	static const char logdir[] = "/" SG_FS_FULL_LOG_DIR "/";
	const char *path = c->pos[0], *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;
	size_t n = strlen(name), d = sizeof(logdir) - 1;
	int dir = -1, logs = -1, e;
	struct stat st;
	bool ok = ctl && n > 4 && n <= SG_PROC_ID_MAX + 4 && name[0] != '.' &&
		  strcmp(name + n - 4, ".log") == 0 && (size_t)(name - path) >= d &&
		  strncmp(name - d, logdir, d) == 0;

	for (size_t i = 0; ok && i < n; i++)
		ok = isalnum((unsigned char)name[i]) || strchr("-_.", name[i]);
	*is_log = false;
	if (!ok)
		return SG_OK;
	dir = open(ctl, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir >= 0)
		logs = openat(dir, SG_FS_FULL_LOG_DIR, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	*fdp = logs < 0 ? -1 : openat(logs, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	e = errno;
	sg_fs_close(&dir);
	sg_fs_close(&logs);
	if (*fdp < 0 && e == ENOENT) {
		*is_log = true;
		return sg_fs_fail(c, "File not found: %s", path);
	}
	if (*fdp >= 0 && (fstat(*fdp, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink > 1))
		sg_fs_close(fdp);
	/* Anything but the log itself is read by the ordinary rules. */
	if (*fdp < 0)
		return SG_OK;
	*is_log = true;
	return sg_buf_adds(shown, path) ? sg_err_set(&c->err, SG_E_INTERNAL, "out of memory")
					: SG_OK;
}

/*
 * The workspace file PATH names, resolved beneath root, guarded (the
 * host's credential files, sensitive paths) and opened; shown gets its
 * display form.  A missing file fails in the host's words.
 */
static sg_err open_workspace_file(struct fs *c, struct sg_buf *shown, int *fdp)
{
	struct sg_buf rel = SG_BUF_INIT(SG_PATH_MAX);
	sg_err rc = sg_fs_resolve(c, c->pos[0], SG_PATH_EXISTING, &rel);

	if (rc == SG_E_NOT_FOUND) {
		sg_err_clear(&c->err);
		rc = read_missing(c, c->pos[0]);
	}
	if (!rc) {
		sg_fs_display(c, &rel, shown);
		rc = guard_read(c, &rel, shown, "read_file", "read");
	}
	if (!rc) {
		*fdp = sg_fs_open_rel(c, &rel, O_RDONLY | O_NONBLOCK);
		if (*fdp < 0 && errno == ENOENT)
			rc = read_missing(c, c->pos[0]);
	}
	sg_buf_release(&rel);
	return rc;
}

/*
 * fs read PATH [--offset N] [--limit N] [--raw]
 * fs read PATH --byte-limit N [--byte-offset N] [--byte-end N]
 * --offset below 1 is 1; --limit 0 (or none) reads to the end, then of a
 * file no larger than the host's 256 KiB.  --byte-limit reads a byte
 * window instead (read_bytes()).  Tool failures carry the host's
 * sentences.
 */
static sg_err fs_read(struct fs *c)
{
	struct sg_buf shown = SG_BUF_INIT(SG_PATH_MAX);
	bool raw = sg_args_flag(&c->a, "raw");
	unsigned char head[READ_SNIFF];
	const char *mime;
	bool log = sg_args_flag(&c->a, "full-log");
	const char *ctl = sg_args_str(&c->a, "ctl", NULL);
	int64_t offset, limit, boff, blim, bend;
	struct stat st;
	ssize_t n = 0;
	int fd = -1;
	sg_err rc;

	rc = sg_args_int(&c->a, "offset", 1, INT64_MAX, &offset, &c->err);
	if (!rc)
		rc = sg_args_int(&c->a, "limit", 0, INT64_MAX, &limit, &c->err);
	if (!rc)
		rc = sg_args_int(&c->a, "byte-offset", 0, INT64_MAX, &boff, &c->err);
	if (!rc)
		rc = sg_args_int(&c->a, "byte-limit", 0, READ_MAX_FILE, &blim, &c->err);
	if (!rc)
		rc = sg_args_int(&c->a, "byte-end", 0, INT64_MAX, &bend, &c->err);
	if (!rc)
		rc = sg_fs_args_done(c, 1, 1);
	if (!rc && log)
		rc = open_full_log(c, ctl, &shown, &fd, &log);
	if (!rc && !log)
		rc = open_workspace_file(c, &shown, &fd);
	if (rc)
		goto out;
	if (fd < 0 || fstat(fd, &st) != 0) {
		rc = sg_fs_fail(c, "stat file: %s: %s", c->pos[0], sg_fs_errstr(errno));
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		rc = sg_fs_fail(c, "path is a directory: %s. Use list_files to inspect directories "
				"or read_file on a file inside it", c->pos[0]);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = sg_fs_fail(c, "read_file requires a regular file: %s", c->pos[0]);
		goto out;
	}
	n = pread(fd, head, sizeof(head), 0);
	if (n < 0)
		n = 0;
	/* A log is the command's text, never an image, and masked as bash's view is. */
	mime = log ? NULL : image_mime(head, (size_t)n);
	if (mime) {
		rc = read_image(c, fd, &st, mime, &shown);
		goto out;
	}
	if (blim) {
		rc = read_bytes(c, fd, &st, &shown, boff, blim, bend,
				log || (c->unconfined && sg_fs_sensitive(shown.p)));
		goto out;
	}
	if (memchr(head, '\0', (size_t)n)) {
		rc = sg_fs_fail(c, "unsupported binary file; read_file accepts text, PNG, JPEG, "
				"static GIF, and WebP");
		goto out;
	}
	if (!limit && st.st_size > READ_MAX_FILE) {
		rc = sg_fs_fail(c, "file too large (%lld bytes, max %lld). Use offset and limit to "
				"read portions", (long long)st.st_size, READ_MAX_FILE);
		goto out;
	}
	rc = read_text(c, fd, &st, &shown, offset ? offset : 1, limit, raw,
		       log || (c->unconfined && sg_fs_sensitive(shown.p)));
out:
	sg_fs_close(&fd);
	sg_buf_release(&shown);
	return rc;
}

/* ---- write and edit ---- */

/*
 * A fresh temporary name beside the target.  Uniqueness comes from
 * O_EXCL; the clock and the stack address only make collisions between
 * concurrent writers (threads or processes) unlikely.
 */
static int open_temp(int dirfd, const char *name, char *tmp, size_t cap)
{
	unsigned long long seed = (unsigned long long)sg_now_ns() ^
				  (unsigned long long)(uintptr_t)tmp;

	for (int i = 0; i < 100; i++) {
		int fd;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		snprintf(tmp, cap, ".%.64s.sg-%012llx", name, seed >> 16);
		fd = openat(dirfd, tmp,
			    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0600);
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	errno = EEXIST;
	return -1;
}

/*
 * Replace the file at rel (resolved, relative to root) with data: missing
 * parents are made, the new content goes to a temporary file in the same
 * directory and is renamed over the target, so readers see the old or the
 * new file, never half of one.  An existing file keeps its mode and owner
 * unless has_mode.
 */
sg_err sg_fs_put_file(struct fs *c, const char *rel, const char *shown,
		       const char *data, size_t n, bool has_mode, mode_t mode,
		       bool *created)
{
	char parent[SG_PATH_MAX + 1], tmp[NAME_MAX + 1];
	const char *name = sg_fs_split_rel(rel, parent, sizeof(parent));
	bool exists = false, fix_owner = false;
	int dirfd = -1, fd = -1, e = 0;
	struct stat st;
	sg_err rc;

	*created = false;
	if (!rel[0])
		return sg_fs_fail(c, "%s is a directory", shown);
	rc = sg_fs_make_dirs(c, strcmp(parent, ".") ? parent : "", &dirfd, NULL);
	if (rc)
		goto out;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		exists = true;
		if (S_ISDIR(st.st_mode)) {
			rc = sg_fs_fail(c, "%s is a directory", shown);
			goto out;
		}
		if (!S_ISREG(st.st_mode)) {
			rc = sg_fs_fail(c, "%s is not a regular file", shown);
			goto out;
		}
		if (!has_mode)
			mode = st.st_mode & 07777;
		fix_owner = true;
	} else if (errno != ENOENT) {
		rc = sg_fs_fail(c, "%s: %s", shown, sg_fs_errstr(errno));
		goto out;
	} else if (!has_mode) {
		mode = 0644;
	}
	fd = open_temp(dirfd, name, tmp, sizeof(tmp));
	if (fd < 0) {
		rc = sg_fs_fail(c, "cannot write %s: %s", shown, sg_fs_errstr(errno));
		goto out;
	}
	if (sg_write_all(fd, data, n) != 0 || fchmod(fd, mode) != 0) {
		e = errno;
		goto fail;
	}
	/*
	 * Only root can give the file back to its owner; a failure (an id
	 * unmapped in a user namespace) leaves it owned by the writer.
	 */
	if (fix_owner && geteuid() == 0)
		(void)!fchown(fd, st.st_uid, st.st_gid);
	if (close(fd) != 0) {
		fd = -1;
		e = errno;
		goto fail;
	}
	fd = -1;
	if (renameat(dirfd, tmp, dirfd, name) != 0) {
		e = errno;
		goto fail;
	}
	*created = !exists;
	goto out;
fail:
	rc = sg_fs_fail(c, "cannot write %s: %s", shown, sg_fs_errstr(e));
	unlinkat(dirfd, tmp, 0);
out:
	sg_fs_close(&fd);
	sg_fs_close(&dirfd);
	return rc;
}

/* ---- directory walks: list, glob, recursive delete ---- */

void sg_fs_names_free(struct names *ns)
{
	for (size_t i = 0; i < ns->n; i++)
		free(ns->v[i]);
	free(ns->v);
	memset(ns, 0, sizeof(*ns));
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Restore the max-heap (by name) below slot i of v[0..n). */
static void heap_down(char **v, size_t n, size_t i)
{
	for (;;) {
		size_t big = i, l = 2 * i + 1, r = l + 1;
		char *t;

		if (l < n && strcmp(v[l], v[big]) > 0)
			big = l;
		if (r < n && strcmp(v[r], v[big]) > 0)
			big = r;
		if (big == i)
			return;
		t = v[i];
		v[i] = v[big];
		v[big] = t;
		i = big;
	}
}

/* Move slot i of the max-heap v up to its place. */
static void heap_up(char **v, size_t i)
{
	while (i > 0 && strcmp(v[(i - 1) / 2], v[i]) < 0) {
		char *t = v[i];

		v[i] = v[(i - 1) / 2];
		v[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
}

/*
 * Keep the name s in ns, which holds at most keep names (0: no bound).
 * Full, it is a max-heap: a name after the largest kept one is left out,
 * and a smaller one takes the largest one's place.  0, or ENOMEM.
 */
static int names_keep(struct names *ns, size_t keep, const char *s)
{
	size_t len;
	char *name;

	if (keep && ns->n == keep) {
		ns->more = true;
		if (strcmp(s, ns->v[0]) >= 0)
			return 0;
	}
	if (ns->n == ns->cap && (!keep || ns->n < keep)) {
		size_t cap = ns->cap ? ns->cap * 2 : 32;
		char **v;

		if (keep && cap > keep)
			cap = keep;
		v = realloc(ns->v, cap * sizeof(*v));
		if (!v)
			return ENOMEM;
		ns->v = v;
		ns->cap = cap;
	}
	len = strlen(s);
	name = malloc(len + 1);
	if (!name)
		return ENOMEM;
	memcpy(name, s, len + 1);
	if (keep && ns->n == keep) {
		free(ns->v[0]);
		ns->v[0] = name;
		heap_down(ns->v, ns->n, 0);
	} else {
		ns->v[ns->n++] = name;
		if (keep)
			heap_up(ns->v, ns->n - 1);
	}
	return 0;
}

/*
 * The entries of directory dirfd (borrowed), sorted, "." and ".." left
 * out, and dot names too unless hidden.  sieve (borrowed, NULL for none)
 * drops entries as they are read.  keep > 0 holds at most the keep
 * smallest names, in memory proportional to keep however large the
 * directory (a max-heap of them while reading), and sets ns->more when
 * there were others; 0 keeps them all.  Returns 0 or an errno.
 */
int sg_fs_names_read(int dirfd, bool hidden, const struct names_sieve *sieve,
		      size_t keep, struct names *ns)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), e = 0;
	struct dirent *d;
	DIR *dir;

	memset(ns, 0, sizeof(*ns));
	if (fd < 0)
		return errno;
	dir = fdopendir(fd);
	if (!dir) {
		e = errno;
		close(fd);
		return e;
	}
	for (;;) {
		errno = 0;
		d = readdir(dir);
		if (!d) {
			e = errno;
			break;
		}
		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, "..") ||
		    (!hidden && d->d_name[0] == '.'))
			continue;
		if (sieve) {
			int want = sieve->keep(sieve->ctx, dirfd, d->d_name, d->d_type);

			if (want < 0) {
				e = ECANCELED;
				break;
			}
			if (!want)
				continue;
		}
		e = names_keep(ns, keep, d->d_name);
		if (e)
			break;
	}
	closedir(dir);
	if (e) {
		sg_fs_names_free(ns);
		return e;
	}
	if (ns->n)
		qsort(ns->v, ns->n, sizeof(*ns->v), name_cmp);
	return 0;
}

bool sg_fs_rp_push(struct relpath *r, const char *name, size_t *saved)
{
	size_t n = strlen(name), need = r->len + (r->len ? 1 : 0) + n;

	*saved = r->len;
	if (need > SG_PATH_MAX)
		return false;
	if (r->len)
		r->p[r->len++] = '/';
	memcpy(r->p + r->len, name, n + 1);
	r->len += n;
	return true;
}

void sg_fs_rp_pop(struct relpath *r, size_t saved)
{
	r->len = saved;
	r->p[saved] = '\0';
}

/*
 * Whether a name must be quoted in a listing: a control character (bytes
 * below 0x20 and 0x7f), a newline above all, would let one name read as
 * several entries, or as part of the next one.
 */
static bool name_needs_quote(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] == 0x7f)
			return true;
	return false;
}

/*
 * Append path s (n bytes) and then suffix (a directory's "/", or "") to b
 * the way list, glob and grep write names, so that one entry is always one
 * line.  A name without control characters goes in as it is, byte for
 * byte; one with them is quoted C-style, as git's core.quotePath does: in
 * double quotes, with \n, \t, \\, \" and \ooo (octal) for the other
 * control characters.  On failure b is left as it was.
 */
sg_err sg_fs_name_put(struct sg_buf *b, const char *s, size_t n, const char *suffix)
{
	size_t mark = b->len;
	sg_err rc = SG_OK;

	if (!name_needs_quote(s, n)) {
		rc = sg_buf_add(b, s, n);
		if (!rc)
			rc = sg_buf_adds(b, suffix);
		goto out;
	}
	rc = sg_buf_addc(b, '"');
	for (size_t i = 0; i < n && !rc; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '\n')
			rc = sg_buf_adds(b, "\\n");
		else if (ch == '\t')
			rc = sg_buf_adds(b, "\\t");
		else if (ch == '\\' || ch == '"')
			rc = sg_buf_addf(b, "\\%c", ch);
		else if (ch < 0x20 || ch == 0x7f)
			rc = sg_buf_addf(b, "\\%03o", ch);
		else
			rc = sg_buf_addc(b, (char)ch);
	}
	if (!rc)
		rc = sg_buf_adds(b, suffix);
	if (!rc)
		rc = sg_buf_addc(b, '"');
out:
	if (rc)
		sg_buf_truncate(b, mark);
	return rc;
}

/* The host's page of list_files. */
#define LIST_PAGE 1000

/* One entry as the host writes it: {"is_dir","name","path","size"?}. */
static sg_err list_entry(struct sg_buf *b, const char *name, const struct sg_buf *path,
			 const struct stat *st)
{
	bool dir = S_ISDIR(st->st_mode);
	sg_err rc = sg_buf_adds(b, "{\"is_dir\":");

	if (!rc)
		rc = sg_buf_adds(b, dir ? "true" : "false");
	if (!rc)
		rc = sg_fs_kv_str(b, "name", name);
	if (!rc)
		rc = sg_fs_kv_strn(b, "path", path->p, path->len);
	if (!rc && !dir)
		rc = sg_fs_kv_int(b, "size", (long long)st->st_size);
	if (!rc)
		rc = sg_buf_addc(b, '}');
	return rc;
}

/*
 * A listing as it is read: every entry is counted and each visible one
 * enters the listing's digest as it passes (a sum of the entries'
 * digests, so readdir's order does not matter), while only the names the
 * page can show are kept.  A directory of 150,000 names then costs the
 * gateway what a page does.
 */
struct lister {
	struct fs *c;
	const struct sg_buf *rel;  /* the directory, resolved */
	const char *abs_dir;       /* its path for the app credential rule */
	unsigned char sum[SG_SHA256_LEN]; /* the visible entries' digests, added */
	struct sg_buf entry, path, rel_entry;
	long long total, visible, protected_;
	sg_err rc;
};

/* The entry's rel path and display path into l->rel_entry and l->path. */
static bool list_paths(struct lister *l, const char *name)
{
	sg_buf_reset(&l->rel_entry);
	if (sg_buf_addf(&l->rel_entry, "%s%s%s", l->rel->p, l->rel->len ? "/" : "", name))
		return false;
	sg_fs_display(l->c, &l->rel_entry, &l->path);
	return true;
}

/* Add a digest into the 256-bit sum, big-endian, carries upward. */
static void sum_add(unsigned char sum[SG_SHA256_LEN], const unsigned char md[SG_SHA256_LEN])
{
	unsigned carry = 0;

	for (int i = SG_SHA256_LEN - 1; i >= 0; i--) {
		carry += (unsigned)sum[i] + md[i];
		sum[i] = (unsigned char)carry;
		carry >>= 8;
	}
}

/* The sieve: count, hide what the host hides, digest what it shows. */
static int list_sift(void *ctx, int dirfd, const char *name, unsigned char type)
{
	struct lister *l = ctx;
	unsigned char md[SG_SHA256_LEN];
	struct sg_sha256 h;
	struct stat st;

	(void)type;
	l->total++;
	if (l->total % 1024 == 0 && sg_cancel_check(l->c->cancel)) {
		l->rc = sg_fs_cancelled(l->c, "the listing");
		return -1;
	}
	if (!list_paths(l, name))
		return 0;
	/* The app's own credential files are hidden in every mode. */
	if (sg_fs_app_credential(l->abs_dir, name) ||
	    (!l->c->unconfined && sg_fs_sensitive(l->path.p))) {
		l->protected_++;
		return 0;
	}
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		memset(&st, 0, sizeof(st));
	sg_buf_reset(&l->entry);
	if (list_entry(&l->entry, name, &l->path, &st))
		return 0;
	sg_sha256_init(&h);
	sg_sha256_update(&h, l->entry.p, l->entry.len);
	sg_sha256_final(&h, md);
	sum_add(l->sum, md);
	l->visible++;
	return 1;
}

/* The page: the kept names from offset on, as entries. */
static sg_err list_page(struct lister *l, int dirfd, const struct names *ns, int64_t offset,
			struct sg_buf *out, long long *returned)
{
	sg_err rc = SG_OK;

	*returned = 0;
	for (size_t i = (size_t)offset; i < ns->n && *returned < LIST_PAGE && !rc; i++) {
		struct stat st;

		if (fstatat(dirfd, ns->v[i], &st, AT_SYMLINK_NOFOLLOW) != 0)
			memset(&st, 0, sizeof(st));
		if (!list_paths(l, ns->v[i]))
			continue;
		if (*returned)
			rc = sg_buf_addc(out, ',');
		if (!rc)
			rc = list_entry(out, ns->v[i], &l->path, &st);
		(*returned)++;
	}
	return rc;
}

/*
 * list's options (*offset), then its path (*path: PATH or ".") resolved
 * into rel and shown and opened as a directory into *dirfd.  A sensitive
 * path is refused before it is opened.
 */
static sg_err list_open(struct fs *c, int64_t *offset, const char **path, struct sg_buf *rel,
			struct sg_buf *shown, int *dirfd)
{
	const char *why;
	sg_err rc;

	rc = sg_args_int(&c->a, "offset", 0, INT64_MAX - LIST_PAGE, offset, &c->err);
	if (!rc)
		rc = sg_fs_args_done(c, 0, 1);
	*path = c->npos ? c->pos[0] : ".";
	if (!rc)
		rc = sg_fs_resolve(c, *path, SG_PATH_EXISTING, rel);
	if (rc == SG_E_NOT_FOUND) {
		sg_err_clear(&c->err);
		rc = sg_fs_fail(c, "stat path: %s: no such file or directory", *path);
	}
	if (rc)
		return rc;
	sg_fs_display(c, rel, shown);
	why = rel->len ? sg_fs_sensitive(shown->p) : NULL;
	if (why)
		return sg_err_set(&c->err, SG_E_PERMISSION, "list_files refuses to list sensitive "
				  "path \"%s\" (%s). This guard applies in every permission mode, "
				  "including unconfined, and chat approval does not lift it. Edit the "
				  "file outside the session", shown->p, why);
	*dirfd = sg_fs_open_rel(c, rel, O_RDONLY | O_DIRECTORY | O_NONBLOCK);
	if (*dirfd < 0 && errno == ENOTDIR)
		return sg_fs_fail(c, "path is not a directory: %s. Use read_file to inspect files",
				  *path);
	if (*dirfd < 0)
		return sg_fs_fail(c, "list directory: %s: %s", *path, sg_fs_errstr(errno));
	return SG_OK;
}

/*
 * The listing's digest, into hex: the count of visible entries, then the
 * sum of their digests, so it changes when any visible entry does.
 */
static void list_digest(const struct lister *l, char hex[2 * SG_SHA256_LEN + 1])
{
	struct sg_sha256 h;
	char head[64];

	sg_sha256_init(&h);
	snprintf(head, sizeof(head), "list_files%c%lld%c", '\0', l->visible, '\0');
	sg_sha256_update(&h, head, 11 + strlen(head + 11) + 1);
	sg_sha256_update(&h, l->sum, sizeof(l->sum));
	sg_sha256_final_hex(&h, hex);
}

/* list's reply: the path, revision, digest, counts, and the page's entries. */
static sg_err list_reply(struct fs *c, const struct lister *l, const struct sg_buf *shown,
			 const char *hex, int64_t offset, long long returned,
			 const struct sg_buf *page)
{
	sg_err rc = sg_reply_ok(c->out);

	if (!rc)
		rc = sg_fs_kv_strn(c->out, "path", shown->p, shown->len);
	if (!rc)
		rc = sg_fs_kv_revision(c);
	if (!rc)
		rc = sg_fs_kv_str(c->out, "listing", hex);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "total", l->total);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "visible_total", l->visible);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "omitted_protected", l->protected_);
	if (!rc)
		rc = sg_fs_kv_bool(c->out, "has_more", l->visible > offset + returned);
	if (!rc)
		rc = sg_jw_key(c->out, "entries", 0);
	if (!rc)
		rc = sg_buf_addc(c->out, '[');
	if (!rc)
		rc = sg_buf_add(c->out, page->p, page->len);
	if (!rc)
		rc = sg_buf_addc(c->out, ']');
	if (!rc)
		rc = sg_reply_end(c->out);
	return rc;
}

/*
 * fs list [PATH] [--offset N]: one level of a directory, the host's
 * list_files.  The reply has the page's entries, the counts, the
 * workspace revision and `listing`: the digest of every visible entry,
 * which the gateway binds into the page's continuation revision.
 */
static sg_err fs_list(struct fs *c)
{
	struct sg_buf rel = SG_BUF_INIT(SG_PATH_MAX), shown = SG_BUF_INIT(SG_PATH_MAX);
	struct sg_buf abs = SG_BUF_INIT(2 * SG_PATH_MAX + 2), page = SG_BUF_INIT(SG_ENVTOOL_REPLY);
	struct lister l = { .c = c, .rel = &rel };
	struct names_sieve sieve = { .keep = list_sift, .ctx = &l };
	char hex[2 * SG_SHA256_LEN + 1];
	struct names ns = { 0 };
	const char *path;
	long long returned = 0;
	int64_t offset = 0;
	int dirfd = -1, e;
	sg_err rc;

	sg_buf_init(&l.entry, 2 * SG_PATH_MAX + 128);
	sg_buf_init(&l.path, SG_PATH_MAX);
	sg_buf_init(&l.rel_entry, SG_PATH_MAX);
	rc = list_open(c, &offset, &path, &rel, &shown, &dirfd);
	if (rc)
		goto out;
	if (sg_buf_addf(&abs, "%s/%s", c->root, rel.p)) {
		rc = SG_E_TOO_LARGE;
		goto out;
	}
	l.abs_dir = abs.p;
	e = sg_fs_names_read(dirfd, true, &sieve, (size_t)offset + LIST_PAGE, &ns);
	if (e == ECANCELED && l.rc) {
		rc = l.rc;
		goto out;
	}
	if (e) {
		rc = sg_fs_fail(c, "list directory: %s: %s", path, sg_fs_errstr(e));
		goto out;
	}
	rc = list_page(&l, dirfd, &ns, offset, &page, &returned);
	if (rc)
		goto out;
	list_digest(&l, hex);
	rc = list_reply(c, &l, &shown, hex, offset, returned, &page);
out:
	sg_fs_names_free(&ns);
	sg_fs_close(&dirfd);
	sg_buf_release(&l.entry);
	sg_buf_release(&l.path);
	sg_buf_release(&l.rel_entry);
	sg_buf_release(&page);
	sg_buf_release(&rel);
	sg_buf_release(&shown);
	sg_buf_release(&abs);
	return rc;
}

/* ---- stat, delete, move, mkdir, resolve ---- */

/* fs stat PATH: the entry itself, a final symlink not followed. */
static sg_err fs_stat(struct fs *c)
{
	struct sg_buf rel = SG_BUF_INIT(SG_PATH_MAX), shown = SG_BUF_INIT(SG_PATH_MAX);
	char target[SG_PATH_MAX + 1], mode[8], when[32];
	const char *type, *name;
	struct stat st;
	struct tm tm;
	ssize_t tl = -1;
	int pfd = -1;
	sg_err rc;

	rc = sg_fs_args_done(c, 1, 1);
	if (!rc)
		rc = sg_fs_resolve(c, c->pos[0], SG_PATH_NOFOLLOW, &rel);
	if (!rc) {
		/* Only present_artifact asks: it hands the file out as read_file would. */
		sg_fs_display(c, &rel, &shown);
		rc = guard_read(c, &rel, &shown, "present_artifact", "export");
	}
	if (rc)
		goto out;
	pfd = sg_fs_open_parent(c, &rel, &name);
	if (pfd < 0 || fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		rc = sg_fs_fail(c, "%s: %s", c->pos[0], sg_fs_errstr(errno));
		goto out;
	}
	type = S_ISREG(st.st_mode)   ? "file"
	       : S_ISDIR(st.st_mode) ? "dir"
	       : S_ISLNK(st.st_mode) ? "symlink"
				     : "other";
	if (S_ISLNK(st.st_mode)) {
		tl = readlinkat(pfd, name, target, sizeof(target) - 1);
		if (tl >= 0)
			target[tl] = '\0';
	}
	snprintf(mode, sizeof(mode), "%04o", (unsigned)(st.st_mode & 07777));
	if (!gmtime_r(&st.st_mtim.tv_sec, &tm) ||
	    !strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(when, sizeof(when), "1970-01-01T00:00:00Z");
	rc = sg_reply_ok(c->out);
	if (!rc)
		rc = sg_fs_kv_strn(c->out, "path", rel.p, rel.len);
	if (!rc)
		rc = sg_fs_kv_str(c->out, "type", type);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "size", (long long)st.st_size);
	if (!rc)
		rc = sg_fs_kv_str(c->out, "mode", mode);
	if (!rc)
		rc = sg_fs_kv_str(c->out, "mtime", when);
	if (!rc && tl >= 0)
		rc = sg_fs_kv_strn(c->out, "target", target, (size_t)tl);
	if (!rc)
		rc = sg_reply_end(c->out);
out:
	sg_fs_close(&pfd);
	sg_buf_release(&rel);
	sg_buf_release(&shown);
	return rc;
}

/* A directory a recursive delete is emptying. */
struct rm_dir {
	struct fs *c;
	long long removed; /* entries removed by this pass */
	sg_err rc;         /* why the read was ended */
};

/*
 * The recursive delete's sieve (sg_fs_names_read()): anything but a directory
 * is removed as it is read, looked at without following links (a symlink
 * is removed, never what it points at), and only the directories are
 * kept, to be emptied and removed after: memory follows the
 * subdirectories, never the size of one directory.
 */
static int rm_sift(void *ctx, int dirfd, const char *name, unsigned char type)
{
	struct rm_dir *w = ctx;
	struct stat st;

	if (sg_cancel_check(w->c->cancel)) {
		w->rc = sg_fs_cancelled(w->c, "the delete");
		return -1;
	}
	if (type == DT_UNKNOWN) {
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			return 0; /* gone meanwhile */
		type = S_ISDIR(st.st_mode) ? DT_DIR : DT_REG;
	}
	if (type == DT_DIR)
		return 1;
	if (unlinkat(dirfd, name, 0) == 0) {
		w->removed++;
		return 0;
	}
	if (errno == ENOENT)
		return 0;
	if (errno == EISDIR)
		return 1; /* made a directory since readdir saw it */
	w->rc = sg_fs_fail(w->c, "cannot delete %s: %s", name, sg_fs_errstr(errno));
	return -1;
}

/*
 * Remove name (a directory) under dirfd (borrowed) and everything in it.
 * level is name's depth below the directory being deleted: the
 * environment can nest directories without end, and each level holds a
 * frame of this recursion and a descriptor, so past FS_DEPTH_MAX levels
 * (more than any path can name) the delete stops instead of running the
 * stack out (in the gateway itself, on the local backend) or the
 * descriptors.  Whether readdir still returns every entry while others
 * are being removed is not promised, so a directory left not empty is
 * read again, while a pass removes something, FS_DELETE_PASSES times at
 * most.
 */
static sg_err remove_tree(struct fs *c, int dirfd, const char *name, int level)
{
	struct rm_dir w = { .c = c };
	struct names_sieve sieve = { rm_sift, &w };
	struct names ns = { 0 };
	sg_err rc = SG_OK;
	int fd, e, pass;

	if (sg_cancel_check(c->cancel))
		return sg_fs_cancelled(c, "the delete");
	if (level > FS_DEPTH_MAX)
		return sg_fs_fail(c, "cannot delete %s: it holds directories nested more "
				 "than %d deep; remove it with a command (rm -r)",
				 c->pos[0], FS_DEPTH_MAX);
	fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return sg_fs_fail(c, "cannot delete %s: %s", name, sg_fs_errstr(errno));
	for (pass = 1;; pass++) {
		w.removed = 0;
		e = sg_fs_names_read(fd, true, &sieve, 0, &ns);
		if (e) {
			rc = w.rc ? w.rc : sg_fs_fail(c, "cannot delete %s: %s", name, sg_fs_errstr(e));
			break;
		}
		for (size_t i = 0; i < ns.n && !rc; i++) {
			rc = remove_tree(c, fd, ns.v[i], level + 1);
			w.removed++;
		}
		sg_fs_names_free(&ns);
		if (rc)
			break;
		if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0)
			break;
		if ((errno != ENOTEMPTY && errno != EEXIST) || w.removed == 0 ||
		    pass == FS_DELETE_PASSES) {
			rc = sg_fs_fail(c, "cannot delete %s: %s", name, sg_fs_errstr(errno));
			break;
		}
	}
	close(fd);
	return rc;
}

/* fs delete PATH [--recursive] */
static sg_err fs_delete(struct fs *c)
{
	struct sg_buf rel = SG_BUF_INIT(SG_PATH_MAX);
	bool recursive = sg_args_flag(&c->a, "recursive");
	const char *name;
	int dirfd = -1;
	struct stat st;
	sg_err rc;

	rc = sg_fs_args_done(c, 1, 1);
	if (!rc)
		rc = sg_fs_resolve(c, c->pos[0], SG_PATH_NOFOLLOW, &rel);
	if (rc)
		goto out;
	if (rel.len == 0) {
		rc = sg_err_set(&c->err, SG_E_PERMISSION,
				"%s is the workspace root, which cannot be "
				"deleted", c->pos[0]);
		goto out;
	}
	dirfd = sg_fs_open_parent(c, &rel, &name);
	if (dirfd < 0 || fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		rc = sg_fs_fail(c, "%s: %s", c->pos[0], sg_fs_errstr(errno));
		goto out;
	}
	if (S_ISDIR(st.st_mode) && recursive) {
		rc = remove_tree(c, dirfd, name, 0);
	} else if (S_ISDIR(st.st_mode)) {
		if (unlinkat(dirfd, name, AT_REMOVEDIR) != 0)
			rc = errno == ENOTEMPTY || errno == EEXIST
				     ? sg_fs_fail(c, "%s is a directory that is "
						 "not empty; delete it "
						 "recursively", c->pos[0])
				     : sg_fs_fail(c, "cannot delete %s: %s",
						 c->pos[0], sg_fs_errstr(errno));
	} else if (unlinkat(dirfd, name, 0) != 0) {
		rc = sg_fs_fail(c, "cannot delete %s: %s", c->pos[0],
			       sg_fs_errstr(errno));
	}
	if (!rc)
		rc = sg_reply_ok(c->out);
	if (!rc)
		rc = sg_fs_kv_strn(c->out, "deleted", rel.p, rel.len);
	if (!rc)
		rc = sg_reply_end(c->out);
out:
	sg_fs_close(&dirfd);
	sg_buf_release(&rel);
	return rc;
}

/*
 * The destination of a move names an entry that may not exist yet and,
 * if it is a symlink, is replaced rather than followed; so only its
 * directory is resolved (missing parts allowed) and its last component
 * (trailing slashes dropped) is taken literally into name.
 */
static sg_err split_dest(struct fs *c, const char *dst, char *dir, size_t cap,
			 char *name, size_t ncap)
{
	size_t end = strlen(dst), start, n;

	while (end > 1 && dst[end - 1] == '/')
		end--;
	start = end;
	while (start > 0 && dst[start - 1] != '/')
		start--;
	n = end - start;
	if (n == 0 || (n == 1 && dst[start] == '.') ||
	    (n == 2 && dst[start] == '.' && dst[start + 1] == '.') ||
	    n >= ncap || start >= cap)
		return sg_err_set(&c->err, SG_E_INVALID_ARGUMENT,
				  "the destination %s must end in a file name",
				  dst);
	memcpy(name, dst + start, n);
	name[n] = '\0';
	if (start == 0)
		snprintf(dir, cap, ".");
	else if (start == 1)
		snprintf(dir, cap, "/");
	else
		snprintf(dir, cap, "%.*s", (int)(start - 1), dst);
	return SG_OK;
}

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0) /* linux/fs.h; not in every libc's headers */
#endif

/*
 * Rename without replacing an entry that is there, in one step where the
 * kernel and the file system allow it (renameat2 RENAME_NOREPLACE): a
 * check before a plain rename lets an entry the environment makes in
 * between be replaced.  Where they do not (EINVAL, ENOSYS), the check and
 * the rename stay two steps.  -1 with errno EEXIST for an existing entry.
 */
static int rename_noreplace(int sfd, const char *sname, int dfd, const char *dname)
{
	struct stat st;

	if (syscall(SYS_renameat2, sfd, sname, dfd, dname, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
	if (fstatat(dfd, dname, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		errno = EEXIST;
		return -1;
	}
	return renameat(sfd, sname, dfd, dname);
}

/* fs move SRC DST [--overwrite] */
static sg_err fs_move(struct fs *c)
{
	struct sg_buf src = SG_BUF_INIT(SG_PATH_MAX), dst = SG_BUF_INIT(SG_PATH_MAX);
	bool overwrite = sg_args_flag(&c->a, "overwrite");
	char ddir[SG_PATH_MAX + 1], dname[NAME_MAX + 1];
	const char *sname;
	int sfd = -1, dfd = -1, moved;
	sg_err rc;

	rc = sg_fs_args_done(c, 2, 2);
	if (!rc)
		rc = sg_fs_resolve(c, c->pos[0], SG_PATH_NOFOLLOW, &src);
	if (!rc && src.len == 0)
		rc = sg_err_set(&c->err, SG_E_PERMISSION,
				"%s is the workspace root, which cannot be "
				"moved", c->pos[0]);
	if (!rc)
		rc = split_dest(c, c->pos[1], ddir, sizeof(ddir), dname,
				sizeof(dname));
	if (!rc)
		rc = sg_fs_resolve(c, ddir, SG_PATH_PARENTS, &dst);
	if (rc)
		goto out;
	rc = sg_fs_make_dirs(c, dst.p, &dfd, NULL);
	if (rc)
		goto out;
	/* dst becomes the destination's own path, relative to root. */
	if ((dst.len && sg_buf_addc(&dst, '/')) || sg_buf_adds(&dst, dname)) {
		rc = sg_err_set(&c->err, SG_E_INVALID_ARGUMENT,
				"the destination %s is too long", c->pos[1]);
		goto out;
	}
	sfd = sg_fs_open_parent(c, &src, &sname);
	if (sfd < 0) {
		rc = sg_fs_fail(c, "%s: %s", c->pos[0], sg_fs_errstr(errno));
		goto out;
	}
	/* A move onto itself replaces nothing: a plain rename, a no-op. */
	if (overwrite || strcmp(src.p, dst.p) == 0)
		moved = renameat(sfd, sname, dfd, dname);
	else
		moved = rename_noreplace(sfd, sname, dfd, dname);
	if (moved != 0 && errno == EEXIST && !overwrite) {
		rc = sg_fs_fail(c, "%s already exists", c->pos[1]);
		goto out;
	}
	if (moved != 0) {
		rc = sg_fs_fail(c, "cannot move %s to %s: %s", c->pos[0],
			       c->pos[1], sg_fs_errstr(errno));
		goto out;
	}
	rc = sg_reply_ok(c->out);
	if (!rc)
		rc = sg_fs_kv_strn(c->out, "from", src.p, src.len);
	if (!rc)
		rc = sg_fs_kv_strn(c->out, "to", dst.p, dst.len);
	if (!rc)
		rc = sg_reply_end(c->out);
out:
	sg_fs_close(&sfd);
	sg_fs_close(&dfd);
	sg_buf_release(&src);
	sg_buf_release(&dst);
	return rc;
}

/* fs mkdir PATH: parents made; an existing directory is fine. */
static sg_err fs_mkdir(struct fs *c)
{
	struct sg_buf rel = SG_BUF_INIT(SG_PATH_MAX);
	bool created = false;
	int fd = -1;
	sg_err rc;

	rc = sg_fs_args_done(c, 1, 1);
	if (!rc)
		rc = sg_fs_resolve(c, c->pos[0], SG_PATH_PARENTS, &rel);
	if (!rc)
		rc = sg_fs_make_dirs(c, rel.p, &fd, &created);
	if (!rc)
		rc = sg_reply_ok(c->out);
	if (!rc)
		rc = sg_fs_kv_strn(c->out, "path", rel.p, rel.len);
	if (!rc)
		rc = sg_fs_kv_bool(c->out, "created", created);
	if (!rc)
		rc = sg_reply_end(c->out);
	sg_fs_close(&fd);
	sg_buf_release(&rel);
	return rc;
}

/* fs resolve PATH [--for-write]: the path inside the environment. */
static sg_err fs_resolve(struct fs *c)
{
	struct sg_buf rel = SG_BUF_INIT(SG_PATH_MAX), abs = SG_BUF_INIT(2 * SG_PATH_MAX + 1);
	bool for_write = sg_args_flag(&c->a, "for-write");
	sg_err rc;

	rc = sg_fs_args_done(c, 1, 1);
	if (!rc)
		rc = sg_fs_resolve(c, c->pos[0],
			     for_write ? SG_PATH_CREATE : SG_PATH_EXISTING, &rel);
	/* Outside root (unconfined), the absolute path itself, folded. */
	if (!rc && rel_outside(&rel))
		sg_fs_display(c, &rel, &abs);
	if (!rc && !abs.len)
		rc = sg_buf_adds(&abs, c->root);
	if (!rc && !rel_outside(&rel) && rel.len && strcmp(c->root, "/") != 0)
		rc = sg_buf_addc(&abs, '/');
	if (!rc && !rel_outside(&rel))
		rc = sg_buf_add(&abs, rel.p, rel.len);
	if (!rc)
		rc = sg_reply_ok(c->out);
	if (!rc)
		rc = sg_fs_kv_strn(c->out, "path", abs.p, abs.len);
	if (!rc)
		rc = sg_fs_kv_strn(c->out, "rel", rel.p, rel.len);
	if (!rc)
		rc = sg_reply_end(c->out);
	sg_buf_release(&abs);
	sg_buf_release(&rel);
	return rc;
}

/* ---- dispatch ---- */

static const struct fs_cmd {
	const char *name;
	const char *flags; /* the options that take no value */
	sg_err (*run)(struct fs *c);
} fs_cmds[] = {
	{ "read", "raw full-log", fs_read },
	{ "write", "create-only", sg_fs_write },
	{ "edit", "all", sg_fs_edit },
	{ "list", "", fs_list },
	{ "revision", "", fs_revision },
	{ "glob", "", sg_fs_glob },
	{ "grep", "ignore-case", sg_fs_grep },
	{ "stat", "", fs_stat },
	{ "delete", "recursive", fs_delete },
	{ "move", "overwrite", fs_move },
	{ "mkdir", "", fs_mkdir },
	{ "resolve", "for-write", fs_resolve },
	{ "patch", "dry-run", sg_fs_patch },
};

/* The commands that change the tree: refused under --read-only. */
static const char *const fs_writers[] = { "write", "edit", "delete", "move",
					  "mkdir", "patch", NULL };

/*
 * The common options: --root (absolute, normalised), --host-root and
 * --read-only (the workspace is a read-only mount: no command may change
 * it, whatever the caller checked before).
 */
static sg_err common_args(struct fs *c)
{
	struct sg_buf root = SG_BUF_INIT(SG_PATH_MAX);
	const char *r = sg_args_str(&c->a, "root", NULL);
	/* A dry-run patch only plans: it writes nothing, so it may run. */
	bool dry = strcmp(c->cmd, "patch") == 0 && sg_args_flag(&c->a, "dry-run");
	sg_err rc;

	if (sg_args_flag(&c->a, "read-only") && !dry)
		for (int i = 0; fs_writers[i]; i++)
			if (strcmp(c->cmd, fs_writers[i]) == 0)
				return sg_err_set(&c->err, SG_E_PERMISSION,
						  "fs %s writes, and the "
						  "workspace is mounted "
						  "read-only", c->cmd);

	c->unconfined = sg_args_flag(&c->a, "unconfined");
	c->host_root = sg_args_str(&c->a, "host-root", NULL);
	c->on_host = c->host_root != NULL;
	if (!c->host_root)
		c->host_root = r;
	if (!r || r[0] != '/' || !c->host_root || c->host_root[0] != '/')
		return sg_err_set(&c->err, SG_E_INVALID_ARGUMENT,
				  "--root (and --host-root) must be absolute "
				  "paths");
	rc = sg_path_normalize(r, &root);
	if (rc)
		rc = sg_err_set(&c->err, SG_E_INVALID_ARGUMENT,
				"--root %s is not a usable path", r);
	else
		memcpy(c->root, root.p, root.len + 1);
	sg_buf_release(&root);
	for (int i = 0; !rc && i < c->a.npos + c->a.nrest; i++) {
		if (i >= SG_ARGS_MAX)
			return sg_err_set(&c->err, SG_E_INVALID_ARGUMENT,
					  "too many arguments");
		c->pos[c->npos++] = i < c->a.npos ? c->a.pos[i]
						  : c->a.rest[i - c->a.npos];
	}
	return rc;
}

/*
 * {"ok":false,"tool_error":...[,"code":...]}: the long text when a command
 * left one (sg_fs_fail_text), else err.msg.  A reply too large for the
 * buffer falls back to the short form.
 */
static void tool_error_reply(struct fs *c)
{
	const char *text = c->tool_error ? c->tool_error : c->err.msg;

	sg_buf_reset(c->out);
	if (!sg_buf_adds(c->out, "{\"ok\":false,\"tool_error\":") &&
	    !sg_jw_str(c->out, text, strlen(text)) &&
	    (!c->tool_code || (!sg_jw_key(c->out, "code", 0) &&
			       !sg_jw_str(c->out, c->tool_code, strlen(c->tool_code)))) &&
	    !sg_buf_addc(c->out, '}'))
		return;
	sg_reply_tool_error(c->out, "%s", c->err.msg);
}

int sg_helper_fs(int argc, char *const *argv, const void *in, size_t inlen,
		 struct sg_buf *out, const struct sg_cancel *cancel)
{
	const struct fs_cmd *cmd = NULL;
	char flags[128];
	struct fs *c;
	sg_err rc;

	if (!out)
		return 2;
	c = calloc(1, sizeof(*c));
	if (!c) {
		sg_buf_reset(out);
		if (sg_buf_adds(out, "{\"error\":\"internal\",\"message\":"
				     "\"out of memory\"}"))
			return 2;
		return 0;
	}
	c->rootfd = -1;
	c->in = in;
	c->inlen = inlen;
	c->out = out;
	c->cancel = cancel;
	for (size_t i = 0; argc > 0 && i < sizeof(fs_cmds) / sizeof(*fs_cmds);
	     i++)
		if (strcmp(argv[0], fs_cmds[i].name) == 0)
			cmd = &fs_cmds[i];
	if (!cmd) {
		rc = sg_err_set(&c->err, SG_E_INVALID_ARGUMENT,
				"unknown fs command %s (read, write, edit, "
				"list, glob, grep, stat, delete, move, mkdir, "
				"resolve)", argc > 0 ? argv[0] : "(none)");
		goto out;
	}
	c->cmd = cmd->name;
	snprintf(flags, sizeof(flags), "%s read-only unconfined", cmd->flags);
	rc = sg_args_parse(&c->a, argc - 1, argv + 1, flags, &c->err);
	if (!rc)
		rc = common_args(c);
	if (!rc)
		rc = cmd->run(c);
out:
	/* A code without a sentence came from a buffer or an allocation. */
	if (rc == SG_E_TOO_LARGE)
		sg_err_set(&c->err, rc, "the reply would be larger than %zu "
			   "bytes", out->max);
	else if (rc)
		sg_err_set(&c->err, rc, "%s", sg_err_word(rc));
	if (rc && c->err.code == SG_E_NOT_FOUND)
		tool_error_reply(c);
	else if (rc)
		sg_reply_error(out, &c->err);
	sg_fs_close(&c->rootfd);
	free(c->tool_error);
	free(c);
	return 0;
}
