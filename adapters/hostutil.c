/*
 * hostutil.c - see hostutil.h.
 */
#define _GNU_SOURCE /* asprintf, renameat2 */
#include "adapters/hostutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fsutil.h"

/*
 * How deep the walk holds directories open.  A deeper directory is moved
 * up to the top of the tree and removed from there on a later pass, so
 * any depth is removed with at most this many descriptors (and a path
 * longer than PATH_MAX never has to be spelled).
 */
#define RM_DEPTH 32
/* Passes over the top before giving up (each one removes RM_DEPTH levels). */
#define RM_PASSES 100000

struct rm_walk {
	int top;        /* the tree's top directory */
	dev_t dev;      /* its filesystem: a mount point inside stays */
	unsigned moved; /* directories moved up to the top, and names for them */
	int failed;     /* an errno of something that could not be removed, or 0 */
};

/*
 * Remove what directory dfd (taken) holds.  Every entry is unlinked
 * relative to its directory's descriptor, and a subdirectory is opened
 * with O_NOFOLLOW from there: a directory that the environment swaps for a
 * link meanwhile is never entered, and the link itself is what goes.
 */
static void rm_under(struct rm_walk *w, int dfd, int depth)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;

	if (!d) {
		w->failed = errno;
		close(dfd);
		return;
	}
	while ((de = readdir(d))) {
		const char *name = de->d_name;
		struct stat st;
		int sub;

		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			continue;
		if (unlinkat(dirfd(d), name, 0) == 0 || errno == ENOENT)
			continue;
		if (errno != EISDIR) {
			w->failed = errno;
			continue;
		}
		if (depth >= RM_DEPTH) {
			char up[32];
			int r;

			/* Only into a free name: the top's own entries stay. */
			do {
				snprintf(up, sizeof(up), ".sg-rm-%u", w->moved++);
				r = renameat2(dirfd(d), name, w->top, up, RENAME_NOREPLACE);
			} while (r != 0 && errno == EEXIST);
			if (r != 0 && errno != ENOENT)
				w->failed = errno;
			continue;
		}
		sub = openat(dirfd(d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0) {
			/* Swapped for a link or a file since: remove that instead. */
			if (unlinkat(dirfd(d), name, 0) != 0 && errno != ENOENT)
				w->failed = errno;
			continue;
		}
		if (fstat(sub, &st) != 0 || st.st_dev != w->dev) {
			w->failed = EXDEV;
			close(sub);
			continue;
		}
		rm_under(w, sub, depth + 1);
		if (unlinkat(dirfd(d), name, AT_REMOVEDIR) != 0 && errno != ENOENT)
			w->failed = errno;
	}
	closedir(d);
}

int sg_host_rm_tree(const char *path)
{
	struct rm_walk w = { .top = -1 };
	struct stat st;
	unsigned before;
	int rc = 0;

	w.top = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (w.top < 0) {
		/* Missing is done; a file or a link at the top is removed as such. */
		if (errno == ENOENT)
			return 0;
		if (errno != ENOTDIR && errno != ELOOP)
			return -1;
		return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
	}
	if (fstat(w.top, &st) != 0) {
		close(w.top);
		return -1;
	}
	w.dev = st.st_dev;
	/* Again while the last pass moved deep directories up to the top. */
	for (int pass = 0; pass < RM_PASSES; pass++) {
		/* A new open file, so the pass reads the top from its start. */
		int again = openat(w.top, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		before = w.moved;
		if (again < 0) {
			w.failed = errno;
			break;
		}
		w.failed = 0;
		rm_under(&w, again, 0);
		if (w.moved == before)
			break;
	}
	close(w.top);
	if (w.failed) {
		errno = w.failed;
		rc = -1;
	}
	if (rmdir(path) != 0 && errno != ENOENT)
		rc = -1;
	return rc;
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

void sg_host_release(struct sg_host_env *h)
{
	sg_env_release_base(&h->base);
	free(h->dir);
	free(h->workspace);
	h->dir = h->workspace = NULL;
}

sg_err sg_host_write_marker(const struct sg_host_env *h, const json_t *extra,
			    struct sg_errinfo *err)
{
	const struct sg_env *env = &h->base;
	const struct sg_profile *p = env->profile;
	const char *dir = h->dir;
	json_t *m = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:b, s:b, s:s}", "backend",
			      env->ad->name, "id", env->id, "identity", env->identity, "session",
			      env->session, "profile", p->name, "created", (json_int_t)time(NULL),
			      "persistent", p->persistent, "shared", p->shared, "workspace",
			      h->workspace);
	char *tmp = NULL, *dst = NULL;
	sg_err rc = SG_OK;

	if (!m || (extra && json_object_update(m, (json_t *)extra)) ||
	    asprintf(&tmp, "%s/env.json.tmp", dir) < 0 || asprintf(&dst, "%s/env.json", dir) < 0 ||
	    json_dump_file(m, tmp, JSON_COMPACT) || rename(tmp, dst))
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot record the environment in %s: %s", dir,
				strerror(errno));
	json_decref(m);
	free(tmp);
	free(dst);
	return rc;
}

sg_err sg_host_remove(const char *dir, struct sg_errinfo *err)
{
	if (sg_host_rm_tree(dir))
		return sg_err_set(err, SG_E_INTERNAL, "cannot remove %s: %s", dir, strerror(errno));
	return SG_OK;
}

void sg_host_child(struct sg_child *c, const struct sg_exec *x)
{
	memset(c, 0, sizeof(*c));
	c->stdin_data = x->stdin_data;
	c->stdin_len = x->stdin_len;
	c->timeout_ms = x->timeout_ms;
	c->merge = x->flags & SG_EXEC_MERGE;
	c->detaches = x->flags & SG_EXEC_DETACHES;
}

static bool host_is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

sg_err sg_host_find_env(struct sg_host_env *h, struct sg_errinfo *err)
{
	struct sg_env *env = &h->base;

	if (host_is_dir(h->dir))
		env->resumed = true;
	else if (env->require_existing)
		return sg_err_set(err, SG_E_WORKSPACE_LOST,
				  "the workspace of identity \"%s\" is gone (%s does not exist)",
				  env->identity, h->dir);
	return SG_OK;
}

sg_err sg_host_workspace(struct sg_host_env *h, struct sg_errinfo *err)
{
	const struct sg_env *env = &h->base;
	const char *hw = env->profile->host_workspace;

	free(h->workspace);
	h->workspace = NULL;
	if (hw && !host_is_dir(hw))
		return sg_err_set(err, env->require_existing ? SG_E_WORKSPACE_LOST : SG_E_NOT_FOUND,
				  "host_workspace %s is not a directory", hw);
	if (hw)
		h->workspace = realpath(hw, NULL);
	else if (asprintf(&h->workspace, "%s/workspace", h->dir) < 0)
		h->workspace = NULL;
	return h->workspace ? SG_OK : sg_err_set(err, SG_E_INTERNAL, "out of memory");
}
