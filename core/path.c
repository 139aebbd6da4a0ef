/*
 * path.c - the containment resolver.
 *
 * The walk keeps three things: the text still to resolve (the user's path,
 * with symlink targets spliced in front of its remainder as links are met),
 * the resolved path so far relative to root, and an O_PATH descriptor of
 * the deepest existing directory of that resolved path.  Each component is
 * looked at with fstatat(AT_SYMLINK_NOFOLLOW) relative to that descriptor,
 * so no host path is ever handed to the kernel for resolution and nothing
 * outside host_root is touched: a ".." that would climb above root is
 * refused before it is taken.
 *
 * _GNU_SOURCE is defined for O_PATH, which glibc hides without it.
 */
#define _GNU_SOURCE
#include "core/path.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/limits.h"

/*
 * openat2(2) (Linux 5.6).  sg-helper is also built with musl-gcc, which
 * has no kernel headers, so the structure and constants are defined here
 * when <linux/openat2.h> is missing.  They are the kernel's ABI and never
 * change; the syscall number is the unified table's, shared by x86_64 and
 * aarch64.
 */
#if defined(__has_include)
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#define SG_OPENAT2_SYSTEM_HEADER 1
#endif
#endif
#ifndef SG_OPENAT2_SYSTEM_HEADER
struct open_how {
	unsigned long long flags;
	unsigned long long mode;
	unsigned long long resolve;
};
#define RESOLVE_NO_MAGICLINKS 0x02
#define RESOLVE_NO_SYMLINKS 0x04
#define RESOLVE_BENEATH 0x08
#endif
#include <stdatomic.h>
#include <sys/syscall.h>
#ifndef SYS_openat2
#if defined(__x86_64__) || defined(__aarch64__)
#define SYS_openat2 437
#else
#error "the openat2 syscall number is unknown for this architecture"
#endif
#endif

/* The state of one resolution; it lives on the caller's stack. */
struct walk {
	const char *root;     /* normalised binding root, e.g. "/workspace" */
	char user[128];       /* the path as given, for error sentences */
	enum sg_path_mode mode;
	int rootfd;           /* O_PATH of host_root, owned */
	int curfd;            /* deepest existing dir: rootfd or owned */
	char res[SG_PATH_MAX + 1];
	size_t reslen;
	size_t missing;       /* trailing components of res that do not exist */
	char pend[2][SG_PATH_MAX + 1];
	int cur;              /* which pend holds the text being walked */
	int links;
};

/* The next component at or after p (slashes skipped), or NULL at the end. */
static const char *next_comp(const char *p, size_t *len)
{
	while (*p == '/')
		p++;
	if (!*p)
		return NULL;
	*len = strcspn(p, "/");
	return p;
}

static bool is_dot(const char *c, size_t n)
{
	return n == 1 && c[0] == '.';
}

static bool is_dotdot(const char *c, size_t n)
{
	return n == 2 && c[0] == '.' && c[1] == '.';
}

/* Append a component to a '/'-joined relative path held in buf. */
static bool push_comp(char *buf, size_t *len, const char *c, size_t n)
{
	size_t need = *len + (*len ? 1 : 0) + n;

	if (need > SG_PATH_MAX)
		return false;
	if (*len)
		buf[(*len)++] = '/';
	memcpy(buf + *len, c, n);
	*len += n;
	buf[*len] = '\0';
	return true;
}

static void pop_comp(char *buf, size_t *len)
{
	while (*len > 0 && buf[*len - 1] != '/')
		(*len)--;
	if (*len > 0)
		(*len)--;
	buf[*len] = '\0';
}

/*
 * Fold "." and ".." of path into dst (cap bytes) as components joined by
 * '/', with no leading slash; *abs tells whether path was absolute.
 */
static sg_err fold(const char *path, char *dst, size_t cap, size_t *len,
		   bool *abs)
{
	const char *c = path;
	size_t n;

	*len = 0;
	dst[0] = '\0';
	*abs = path[0] == '/';
	if (!path[0])
		return SG_E_INVALID_ARGUMENT;
	if (strlen(path) >= cap)
		return SG_E_INVALID_ARGUMENT;
	while ((c = next_comp(c, &n)) != NULL) {
		if (is_dotdot(c, n)) {
			if (*len == 0)
				return SG_E_PATH_ESCAPE;
			pop_comp(dst, len);
		} else if (!is_dot(c, n)) {
			if (*len)
				dst[(*len)++] = '/';
			memcpy(dst + *len, c, n);
			*len += n;
			dst[*len] = '\0';
		}
		c += n;
	}
	return SG_OK;
}

sg_err sg_path_normalize(const char *path, struct sg_buf *out)
{
	char tmp[SG_PATH_MAX + 1];
	size_t len;
	bool abs;
	sg_err rc = fold(path, tmp, sizeof(tmp), &len, &abs);

	if (rc)
		return rc;
	sg_buf_reset(out);
	if (abs) {
		rc = sg_buf_addc(out, '/');
		if (rc)
			return rc;
	}
	return sg_buf_add(out, tmp, len);
}

bool sg_path_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (n == 1 && dir[0] == '/')
		return path[0] == '/';
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/*
 * If the absolute environment path abs starts with root's components
 * (empty and "." components of abs ignored), return what follows them;
 * otherwise NULL.  The comparison is literal on purpose: a path that
 * leaves root and comes back ("/workspace/../workspace/x") would need the
 * environment's view of what lies outside root, which is not ours to read.
 */
static const char *strip_root(const char *root, const char *abs)
{
	const char *r = root, *a = abs;
	size_t rn, an;

	while ((r = next_comp(r, &rn)) != NULL) {
		while ((a = next_comp(a, &an)) != NULL && is_dot(a, an))
			a += an;
		if (!a || an != rn || memcmp(a, r, rn) != 0)
			return NULL;
		a += an;
		r += rn;
	}
	return a;
}

/* Whether the rest of the text holds nothing but "." components. */
static bool only_dots(const char *p)
{
	size_t n;

	while ((p = next_comp(p, &n)) != NULL) {
		if (!is_dot(p, n))
			return false;
		p += n;
	}
	return true;
}

static void set_curfd(struct walk *w, int fd)
{
	if (w->curfd >= 0 && w->curfd != w->rootfd)
		close(w->curfd);
	w->curfd = fd;
}

static sg_err sys_fail(struct walk *w, int e, struct sg_errinfo *err)
{
	switch (e) {
	case EACCES:
	case EPERM:
		return sg_err_set(err, SG_E_PERMISSION, "%s: permission denied",
				  w->user);
	case ENAMETOOLONG:
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "a file name in %s is too long", w->user);
	case ENOENT:
		return sg_err_set(err, SG_E_NOT_FOUND,
				  "%s: no such file or directory", w->user);
	case ENOTDIR:
		return sg_err_set(err, SG_E_NOT_FOUND, "%s: not a directory",
				  w->user);
	default:
		return sg_err_set(err, SG_E_INTERNAL,
				  "%s: cannot be resolved (errno %d)", w->user, e);
	}
}

static sg_err escape(struct walk *w, struct sg_errinfo *err)
{
	return sg_err_set(err, SG_E_PATH_ESCAPE,
			  "%s resolves outside the workspace root", w->user);
}

/*
 * Replace the pending text with target + "/" + rest.  An absolute target
 * is an environment path: it must name root or something under it, and the
 * walk restarts from root.
 */
static sg_err splice_link(struct walk *w, const char *target, const char *rest,
		     struct sg_errinfo *err)
{
	char *dst = w->pend[!w->cur];
	size_t tn, rn = strlen(rest);

	if (target[0] == '/') {
		target = strip_root(w->root, target);
		if (!target)
			return escape(w, err);
		w->reslen = 0;
		w->res[0] = '\0';
		w->missing = 0;
		set_curfd(w, w->rootfd);
	}
	tn = strlen(target);
	if (tn + 1 + rn > SG_PATH_MAX)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "%s is too long once its symbolic links are "
				  "resolved", w->user);
	memmove(dst, target, tn);
	dst[tn] = '/';
	memcpy(dst + tn + 1, rest, rn + 1);
	w->cur = !w->cur;
	return SG_OK;
}

/* One ".." of the resolved path. */
static sg_err up(struct walk *w, struct sg_errinfo *err)
{
	int fd;

	if (w->missing > 0) {
		w->missing--;
		pop_comp(w->res, &w->reslen);
		return SG_OK;
	}
	if (w->reslen == 0) {
		/* Above "/" there is only "/" again, as in the kernel. */
		if (strcmp(w->root, "/") == 0)
			return SG_OK;
		return escape(w, err);
	}
	fd = openat(w->curfd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return sys_fail(w, errno, err);
	set_curfd(w, fd);
	pop_comp(w->res, &w->reslen);
	return SG_OK;
}

/*
 * Look at name, the component just pushed onto res, in curfd: follow it
 * into a directory, splice a link's target, or end the walk.  The
 * environment can rename the name between the look (fstatat) and its use:
 * readlink(2) of what became a directory is EINVAL, the open of what became
 * a link ENOTDIR or ELOOP.  Then *changed is set and nothing else is, so
 * the caller looks again.
 */
static sg_err look(struct walk *w, const char *name, const char *rest,
		   bool *done, bool *changed, struct sg_errinfo *err)
{
	char target[SG_PATH_MAX + 1];
	bool last = only_dots(rest);
	struct stat st;
	ssize_t tl;
	int fd;

	*changed = false;
	if (fstatat(w->curfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		if (errno != ENOENT)
			return sys_fail(w, errno, err);
		if (w->mode == SG_PATH_PARENTS ||
		    (w->mode == SG_PATH_CREATE && last)) {
			w->missing = 1;
			return SG_OK;
		}
		return sys_fail(w, ENOENT, err);
	}
	if (S_ISLNK(st.st_mode)) {
		if (last && w->mode == SG_PATH_NOFOLLOW) {
			*done = true;
			return SG_OK;
		}
		if (w->links >= SG_SYMLINK_MAX)
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "%s: too many levels of symbolic links",
					  w->user);
		tl = readlinkat(w->curfd, name, target, sizeof(target));
		if (tl < 0 && errno == EINVAL) {
			*changed = true;
			return SG_OK;
		}
		if (tl < 0)
			return sys_fail(w, errno, err);
		if ((size_t)tl >= sizeof(target))
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "%s: a symbolic link target is too "
					  "long", w->user);
		if (tl == 0)
			return sys_fail(w, ENOENT, err);
		target[tl] = '\0';
		w->links++;
		/* The link's own name is not part of where it points. */
		pop_comp(w->res, &w->reslen);
		return splice_link(w, target, rest, err);
	}
	if (S_ISDIR(st.st_mode)) {
		fd = openat(w->curfd, name,
			    O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && (errno == ENOTDIR || errno == ELOOP)) {
			*changed = true;
			return SG_OK;
		}
		if (fd < 0)
			return sys_fail(w, errno, err);
		set_curfd(w, fd);
		return SG_OK;
	}
	if (!last)
		return sys_fail(w, ENOTDIR, err);
	*done = true;
	return SG_OK;
}

/*
 * One ordinary component c (n bytes); rest is the text after it.  A name
 * that changes kind at every look (look()) is being swapped by the
 * environment as it is resolved: after SG_PATH_LOOKS looks it is answered
 * as not found, what a walk that had missed it would have said.
 */
static sg_err step(struct walk *w, const char *c, size_t n, const char *rest,
		   bool *done, struct sg_errinfo *err)
{
	char name[SG_PATH_MAX + 1];
	bool changed = true;
	sg_err rc = SG_OK;

	memcpy(name, c, n);
	name[n] = '\0';
	if (!push_comp(w->res, &w->reslen, c, n))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "%s is too long", w->user);
	if (w->missing > 0) {
		/* Below a missing directory: only PARENTS comes this far. */
		w->missing++;
		return SG_OK;
	}
	for (int i = 0; changed && !rc && i < SG_PATH_LOOKS; i++)
		rc = look(w, name, rest, done, &changed, err);
	if (!rc && changed)
		rc = sg_err_set(err, SG_E_NOT_FOUND,
				"%s: it kept changing while it was resolved",
				w->user);
	return rc;
}

/*
 * A walk of path beneath rootn (new; NULL when out of memory), nothing
 * open yet.  Three path buffers are too much for a worker's stack frame.
 */
static struct walk *walk_new(const char *rootn, enum sg_path_mode mode, const char *path)
{
	struct walk *w = calloc(1, sizeof(*w));
	size_t n = strlen(path);

	if (!w)
		return NULL;
	w->root = rootn;
	w->mode = mode;
	w->curfd = -1;
	w->rootfd = -1;
	/* Sentences hold SG_ERR_MSG bytes: a long path is shown by its head. */
	if (n > sizeof(w->user) - 1) {
		n = sizeof(w->user) - 4;
		memcpy(w->user + n, "...", 4);
	} else {
		w->user[n] = '\0';
	}
	memcpy(w->user, path, n);
	return w;
}

/*
 * Take the pending components one at a time from the root: "." stays,
 * ".." goes up (never above the root), anything else steps down, and a
 * symlink met on the way puts its target's components first.
 */
static sg_err walk_all(struct walk *w, struct sg_errinfo *err)
{
	const char *p = w->pend[w->cur];
	bool done = false;
	size_t n;

	while (!done && (p = next_comp(p, &n)) != NULL) {
		int before = w->cur;
		sg_err rc;

		if (is_dot(p, n)) {
			p += n;
			continue;
		}
		if (is_dotdot(p, n))
			rc = up(w, err);
		else
			rc = step(w, p, n, p + n, &done, err);
		if (rc)
			return rc;
		/* A symlink swaps the pending buffer; otherwise move on. */
		p = w->cur != before ? w->pend[w->cur] : p + n;
	}
	return SG_OK;
}

sg_err sg_path_resolve(const char *root, const char *host_root,
		       const char *path, enum sg_path_mode mode,
		       struct sg_buf *out, struct sg_errinfo *err)
{
	char rootn[SG_PATH_MAX + 2];
	struct walk *w = NULL;
	const char *start;
	bool abs;
	size_t rlen;
	sg_err rc;

	/*
	 * Results name root "" (path.h), so "" given back names it too, as
	 * "." does.  A C string cannot hold a NUL, so only length remains.
	 */
	if (!path)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT, "no path was given");
	if (!path[0])
		path = ".";
	if (strlen(path) > SG_PATH_MAX)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "the path is longer than %d bytes",
				  SG_PATH_MAX);
	if (!root || root[0] != '/' ||
	    fold(root, rootn + 1, sizeof(rootn) - 1, &rlen, &abs) != SG_OK)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "the workspace root must be an absolute path");
	rootn[0] = '/';

	w = walk_new(rootn, mode, path);
	if (!w)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	start = path;
	if (path[0] == '/') {
		start = strip_root(rootn, path);
		if (!start) {
			rc = escape(w, err);
			goto out;
		}
	}
	w->rootfd = open(host_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (w->rootfd < 0) {
		int e = errno;

		if (e == ENOENT)
			rc = sg_err_set(err, SG_E_NOT_FOUND,
					"the workspace root %s does not exist",
					root);
		else
			rc = sg_err_set(err, SG_E_INTERNAL,
					"the workspace root %s cannot be "
					"opened (errno %d)", root, e);
		goto out;
	}
	w->curfd = w->rootfd;
	memcpy(w->pend[0], start, strlen(start) + 1);
	rc = walk_all(w, err);
	if (rc)
		goto out;
	sg_buf_reset(out);
	rc = sg_buf_add(out, w->res, w->reslen);
	if (rc)
		rc = sg_err_set(err, rc, "%s: the resolved path is too long",
				w->user);
out:
	if (w) {
		set_curfd(w, -1);
		if (w->rootfd >= 0)
			close(w->rootfd);
		free(w);
	}
	return rc;
}

/* Set once a kernel has answered ENOSYS: the walk is used from then on. */
static atomic_bool no_openat2;

/* The component-by-component open of sg_path_openat(), for old kernels. */
static int walk_open(int dirfd, const char *rel, int flags)
{
	char name[SG_PATH_MAX + 1];
	const char *p = rel, *c;
	int cur = dirfd, fd, e;
	size_t n;

	for (;;) {
		c = next_comp(p, &n);
		if (!c || n > SG_PATH_MAX) {
			errno = c ? ENAMETOOLONG : EINVAL;
			fd = -1;
			break;
		}
		memcpy(name, c, n);
		name[n] = '\0';
		p = c + n;
		if (is_dotdot(c, n)) {
			/* A resolved path has none; RESOLVE_BENEATH's answer. */
			errno = EXDEV;
			fd = -1;
			break;
		}
		if (only_dots(p)) {
			fd = openat(cur, name, flags | O_NOFOLLOW | O_CLOEXEC);
			break;
		}
		fd = openat(cur, name,
			    O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (cur != dirfd) {
			e = errno;
			close(cur);
			errno = e;
		}
		if (fd < 0)
			return -1;
		cur = fd;
	}
	if (cur != dirfd) {
		e = errno;
		close(cur);
		errno = e;
	}
	return fd;
}

/*
 * O_PATH | O_NOFOLLOW opens a final symlink itself instead of failing:
 * refuse it here, so that no link is ever handed back.
 */
static int no_final_link(int fd, int flags)
{
	struct stat st;

	if (fd < 0 || !(flags & O_PATH) || (flags & O_DIRECTORY))
		return fd;
	if (fstat(fd, &st) == 0 && !S_ISLNK(st.st_mode))
		return fd;
	close(fd);
	errno = ELOOP;
	return -1;
}

static int openat_beneath(int dirfd, const char *rel, int flags)
{
	struct open_how how;
	long fd;

	if (flags & O_CREAT) {
		errno = EINVAL;
		return -1;
	}
	if (!rel[0] || only_dots(rel))
		return openat(dirfd, ".", flags | O_CLOEXEC);
	if (!atomic_load_explicit(&no_openat2, memory_order_relaxed)) {
		memset(&how, 0, sizeof(how));
		how.flags = (unsigned long long)(flags | O_NOFOLLOW | O_CLOEXEC);
		how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
			      RESOLVE_NO_MAGICLINKS;
		/*
		 * EAGAIN: a rename elsewhere raced the lookup; the kernel
		 * asks for a retry rather than guess.  Bounded, so a
		 * renaming loop cannot hold a worker.
		 */
		for (int i = 0;; i++) {
			fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
			if (fd >= 0 || (errno != EAGAIN && errno != EINTR) ||
			    i == 64)
				break;
		}
		if (fd >= 0 || errno != ENOSYS)
			return (int)fd;
		atomic_store_explicit(&no_openat2, true, memory_order_relaxed);
	}
	return walk_open(dirfd, rel, flags);
}

int sg_path_openat(int dirfd, const char *rel, int flags)
{
	return no_final_link(openat_beneath(dirfd, rel, flags), flags);
}

int sg_path_openat_parent(int dirfd, const char *rel, const char **name)
{
	char parent[SG_PATH_MAX + 1];
	const char *slash = strrchr(rel, '/');
	size_t n = slash ? (size_t)(slash - rel) : 0;

	*name = slash ? slash + 1 : rel[0] ? rel : ".";
	if (n > SG_PATH_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(parent, rel, n);
	parent[n] = '\0';
	return sg_path_openat(dirfd, parent, O_PATH | O_DIRECTORY);
}

int sg_path_chdir_beneath(const char *root, const char *path)
{
	const char *rel = strip_root(root, path);
	int rootfd, fd, e;

	if (!rel) {
		errno = EXDEV;
		return -1;
	}
	while (*rel == '/')
		rel++;
	rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return -1;
	fd = sg_path_openat(rootfd, rel, O_PATH | O_DIRECTORY);
	e = errno;
	close(rootfd);
	if (fd < 0) {
		errno = e;
		return -1;
	}
	e = fchdir(fd) == 0 ? 0 : errno;
	close(fd);
	errno = e;
	return e ? -1 : 0;
}

bool sg_path_normalised(const char *path)
{
	struct sg_buf norm = SG_BUF_INIT(SG_PATH_MAX + 1);
	bool same = sg_path_normalize(path, &norm) == SG_OK && strcmp(norm.p, path) == 0;

	sg_buf_release(&norm);
	return same;
}
