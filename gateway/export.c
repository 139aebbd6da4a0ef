/*
 * export.c - exports: immutable snapshots of files, read in chunks.
 *
 * present_artifact copies the file, as it is at that moment, into a
 * private snapshot file under the state directory, so later reads return
 * the snapshot's bytes whatever happens to the source; the host then reads
 * it with export/read {token, offset} and releases it with export/close,
 * as from its own worker (internal/executionworker/artifacts.go).  There
 * is no export/open.  Snapshots are streamed through a fixed buffer: a
 * 256 MiB export never sits in memory.  Unclosed exports are removed at
 * shutdown.
 *
 * A session holds at most SG_EXPORTS_OPEN_MAX exports and
 * SG_EXPORTS_HELD_MAX bytes of snapshots at once.  present_artifact opens
 * an export, in read_only mode too, and a host need never close it: an
 * agent that presents a large file again and again would otherwise fill
 * the disk of the state directory, a copy at a time, and hold a
 * descriptor for each.
 */
#define _GNU_SOURCE /* O_NOFOLLOW, O_PATH are Linux/GNU under strict POSIX */
#include "gateway/session.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/exec.h"
#include "core/path.h"
#include "base/hex.h"
#include "base/limits.h"
#include "base/log.h"

#define COPY_CHUNK (1 * SG_MiB)
/*
 * The bytes one export/read returns: the host's worker sends 256 KiB, and
 * a host reads whatever comes until eof (any size up to SG_EXPORT_CHUNK
 * would do).
 */
#define EXPORT_READ_CHUNK (256 * SG_KiB)
/* The host worker's sentences, which its client passes on. */
#define UNKNOWN_EXPORT "unknown artifact export"
#define NOT_AN_ARTIFACT "artifact must be a regular file of at most 256 MiB"

struct export {
	struct export *next;
	char token[33];
	char *file; /* the snapshot on this host */
	int fd;
	int64_t size;
};

struct sg_exports {
	pthread_mutex_t lock;
	struct export *head;
	char *dir;
	unsigned long serial;
	int count;      /* exports open or being made */
	int64_t held;   /* their bytes: snapshots, and sizes reserved by opens */
};

sg_err sg_exports_new(struct sg_session *s)
{
	struct sg_exports *x = calloc(1, sizeof(*x));

	if (!x)
		return SG_E_INTERNAL;
	pthread_mutex_init(&x->lock, NULL);
	if (asprintf(&x->dir, "%s/exports-%ld", s->state_dir, (long)getpid()) < 0) {
		free(x);
		return SG_E_INTERNAL;
	}
	s->exports = x;
	return SG_OK;
}

static void export_free(struct export *e)
{
	if (e->fd >= 0)
		close(e->fd);
	if (e->file)
		unlink(e->file);
	free(e->file);
	free(e);
}

void sg_exports_free(struct sg_session *s)
{
	struct sg_exports *x = s->exports;

	if (!x)
		return;
	while (x->head) {
		struct export *e = x->head;

		x->head = e->next;
		export_free(e);
	}
	rmdir(x->dir);
	free(x->dir);
	pthread_mutex_destroy(&x->lock);
	free(x);
	s->exports = NULL;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/*
 * Take a place for an export of size bytes (as the helper saw it) among
 * the session's: SG_E_TOO_LARGE when it holds SG_EXPORTS_OPEN_MAX already,
 * or when size does not fit in what SG_EXPORTS_HELD_MAX leaves.  *room is
 * the most the copy may then hold, so a file that grows while it is
 * copied is stopped at the session's bound as well.
 */
static sg_err exports_reserve(struct sg_exports *x, int64_t size, int64_t *room,
			      struct sg_errinfo *err)
{
	sg_err rc = SG_OK;

	pthread_mutex_lock(&x->lock);
	*room = (int64_t)SG_EXPORTS_HELD_MAX - x->held;
	if (*room > (int64_t)SG_EXPORT_MAX)
		*room = (int64_t)SG_EXPORT_MAX;
	if (x->count >= SG_EXPORTS_OPEN_MAX)
		rc = sg_err_set(err, SG_E_TOO_LARGE,
				"this session already holds %d open exports, the most it may; "
				"close some with export/close", SG_EXPORTS_OPEN_MAX);
	else if (size > *room)
		rc = sg_err_set(err, SG_E_TOO_LARGE,
				"the session's open exports already hold %lld MiB of the %zu "
				"MiB they may, and this file is %lld bytes; close some with "
				"export/close", (long long)(x->held / SG_MiB),
				SG_EXPORTS_HELD_MAX / SG_MiB, (long long)size);
	if (!rc) {
		x->count++;
		x->held += size;
	}
	pthread_mutex_unlock(&x->lock);
	return rc;
}

/* Give back what exports_reserve() took: an export closed or not made. */
static void exports_release(struct sg_exports *x, int64_t size)
{
	pthread_mutex_lock(&x->lock);
	x->count--;
	x->held -= size;
	pthread_mutex_unlock(&x->lock);
}

/*
 * Copy src into dst (dst -1: only count), honouring the cancel token
 * between chunks.  SG_E_TOO_LARGE past max bytes: the file grew meanwhile
 * past the export limit, or past what the session's bound leaves.
 */
static sg_err copy_file(int src, int dst, int64_t max, int64_t *size,
			struct sg_cancel *cancel, struct sg_errinfo *err)
{
	char *buf = malloc(COPY_CHUNK);
	int64_t total = 0;
	sg_err rc = SG_OK;

	if (!buf) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	for (;;) {
		ssize_t n = read(src, buf, COPY_CHUNK);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = sg_err_set(err, SG_E_INTERNAL, "reading the file failed: %s",
					strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		total += n;
		if (total > max && max == (int64_t)SG_EXPORT_MAX) {
			rc = sg_err_set(err, SG_E_TOO_LARGE,
					"artifact grew beyond %zu MiB", SG_EXPORT_MAX / SG_MiB);
			goto out;
		}
		if (total > max) {
			rc = sg_err_set(err, SG_E_TOO_LARGE,
					"the file grew past the %zu MiB the session's open "
					"exports may hold; close some with export/close",
					SG_EXPORTS_HELD_MAX / SG_MiB);
			goto out;
		}
		for (ssize_t off = 0; dst >= 0 && off < n;) {
			ssize_t w = write(dst, buf + off, (size_t)(n - off));

			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0) {
				rc = sg_err_set(err, SG_E_INTERNAL,
						"writing the snapshot failed: %s",
						strerror(errno));
				goto out;
			}
			off += w;
		}
		rc = sg_cancel_check(cancel);
		if (rc) {
			sg_err_set(err, rc, "the export was cancelled");
			goto out;
		}
	}
	*size = total;
out:
	free(buf);
	return rc;
}

/*
 * Open the source on this host (SG_CAP_HOST_FS) after checking its kind.
 * rel is the helper's resolved path; it is opened beneath host_root with
 * no link followed (sg_path_openat), so a directory of it swapped for a
 * link since the check fails the export instead of leading out of root.
 */
static sg_err open_host_source(struct sg_session *s, const char *rel, int *fd,
			       struct sg_errinfo *err)
{
	int rootfd = open(s->env->host_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	sg_err rc = SG_OK;

	*fd = rootfd < 0 ? -1 : sg_path_openat(rootfd, rel, O_RDONLY | O_NONBLOCK);
	if (*fd < 0)
		rc = sg_err_set(err, errno == ENOENT ? SG_E_NOT_FOUND : SG_E_INVALID_ARGUMENT,
				"%s cannot be opened: %s", rel, strerror(errno));
	else if (fstat(*fd, &st) || !S_ISREG(st.st_mode))
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT, "%s: %s", NOT_AN_ARTIFACT, rel);
	else if (st.st_size > (off_t)SG_EXPORT_MAX)
		rc = sg_err_set(err, SG_E_TOO_LARGE, "%s: %s is %lld bytes", NOT_AN_ARTIFACT, rel,
				(long long)st.st_size);
	if (rc && *fd >= 0) {
		close(*fd);
		*fd = -1;
	}
	if (rootfd >= 0)
		close(rootfd);
	return rc;
}

/*
 * Fill the snapshot from a remote environment: the adapter's native file
 * download when it has one, else `cat` through exec (bounded).
 */
static sg_err fetch_remote(struct sg_session *s, const char *abs, int dst, int64_t max,
			   struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const struct sg_adapter *ad = s->env->ad;
	struct sg_exec_result r;
	sg_err rc;

	if (ad->get_file)
		return ad->get_file(s->env, abs, dst, (size_t)max, cancel, err);
	sg_exec_result_init(&r, (size_t)max);
	{
		struct sg_exec x = {
			.argv = (const char *const[]){ "cat", "--", abs, NULL },
			.envp = sg_strv_get(&s->base_env),
			.max_output = (size_t)max,
		};

		rc = ad->exec(s->env, &x, &r, cancel, err);
	}
	if (!rc && (r.exit_code != 0 || r.truncated))
		rc = sg_err_set(err, r.truncated ? SG_E_TOO_LARGE : SG_E_NOT_FOUND,
				"%s cannot be exported: %.160s", abs,
				r.truncated ? "it is larger than the export limit" : r.err.p);
	if (!rc && write(dst, r.out.p, r.out.len) != (ssize_t)r.out.len)
		rc = sg_err_set(err, SG_E_INTERNAL, "writing the snapshot failed");
	sg_exec_result_release(&r);
	return rc;
}

/*
 * The path as the environment names it, absolute (new): confined beneath
 * root, or anywhere in the environment when unconfined (sg-helper refuses
 * a path outside root where it runs on this host).
 */
static sg_err resolve(struct sg_session *s, const char *path, bool unconfined, char **abs,
		      struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const char *args[] = { "fs", "resolve", "--unconfined", "--", path, NULL };
	const char *p;
	json_t *r = NULL;
	sg_err rc;

	*abs = NULL;
	if (!unconfined)
		return sg_envcall_resolve(s, path, false, abs, cancel, err);
	rc = sg_envcall(s, SG_CALL_ROOTED, args, NULL, 0, &r, cancel, err);
	p = rc ? NULL : json_string_value(json_object_get(r, "path"));
	if (!rc && !p)
		rc = sg_err_set(err, SG_E_NOT_FOUND, "%s",
				json_string_value(json_object_get(r, "tool_error"))
					? json_string_value(json_object_get(r, "tool_error"))
					: "no such file");
	if (!rc && !(*abs = strdup(p)))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	json_decref(r);
	return rc;
}

/*
 * What the environment says the resolved path is: a regular file within
 * the export limit.  *rel (borrowed from *st) names it for sentences and
 * the host's copy; *seen is its size there (a negative one is 0).
 */
static sg_err stat_artifact(struct sg_session *s, const char *abs, bool unconfined,
			    json_t **st, const char **rel, int64_t *seen,
			    struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const char *args[] = { "fs", "stat", "--", NULL, NULL, NULL };
	const char *type;
	sg_err rc;

	if (unconfined)
		args[2] = "--unconfined", args[3] = "--";
	args[unconfined ? 4 : 3] = abs;
	rc = sg_envcall(s, SG_CALL_ROOTED, args, NULL, 0, st, cancel, err);
	if (rc)
		goto out;
	type = json_string_value(json_object_get(*st, "type"));
	*rel = json_string_value(json_object_get(*st, "path"));
	if (!type || !*rel) {
		const char *te = json_string_value(json_object_get(*st, "tool_error"));

		rc = sg_err_set(err, SG_E_NOT_FOUND, "%s", te ? te : "no such file");
		goto out;
	}
	if (strcmp(type, "file") != 0) {
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT, "%s: %s is a %s", NOT_AN_ARTIFACT,
				*rel, type);
		goto out;
	}
	if (json_integer_value(json_object_get(*st, "size")) > 0)
		*seen = (int64_t)json_integer_value(json_object_get(*st, "size"));
	if (*seen > (int64_t)SG_EXPORT_MAX)
		rc = sg_err_set(err, SG_E_TOO_LARGE, "%s: %s is %lld bytes", NOT_AN_ARTIFACT,
				*rel, (long long)*seen);
out:
	return rc;
}

/* The snapshot's token, and its file under the exports' directory, empty. */
static sg_err snapshot_create(struct sg_exports *x, struct export *e, struct sg_errinfo *err)
{
	unsigned char rnd[16];
	sg_err rc = SG_OK;

	if (RAND_bytes(rnd, sizeof(rnd)) != 1) {
		rc = sg_err_set(err, SG_E_INTERNAL, "no randomness for a token");
		goto out;
	}
	sg_hex(rnd, 16, e->token);
	if (mkdir(x->dir, 0700) && errno != EEXIST) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot create %s: %s", x->dir,
				strerror(errno));
		goto out;
	}
	if (asprintf(&e->file, "%s/%s", x->dir, e->token) < 0) {
		e->file = NULL;
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	e->fd = open(e->file, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (e->fd < 0)
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot create a snapshot: %s",
				strerror(errno));
out:
	return rc;
}

/*
 * The snapshot's bytes, at most room: copied from this host's file beneath
 * root, or fetched from a remote environment and then counted (and bounded)
 * by a second pass over the snapshot.
 */
static sg_err snapshot_fill(struct sg_session *s, struct export *e, const char *rel,
			    const char *abs, int64_t room, struct sg_cancel *cancel,
			    struct sg_errinfo *err)
{
	int src = -1;
	sg_err rc;

	if (s->env->ad->caps & SG_CAP_HOST_FS) {
		rc = open_host_source(s, rel, &src, err);
		if (!rc)
			rc = copy_file(src, e->fd, room, &e->size, cancel, err);
	} else {
		rc = fetch_remote(s, abs, e->fd, room, cancel, err);
		if (!rc) {
			int tmp = open(e->file, O_RDONLY | O_CLOEXEC);

			rc = tmp < 0 ? SG_E_INTERNAL : SG_OK;
			if (!rc) {
				rc = copy_file(tmp, -1, room, &e->size, cancel, err);
				close(tmp);
			}
		}
	}
	if (src >= 0)
		close(src);
	return rc;
}

sg_err sg_export_path(struct sg_session *s, const char *path, bool unconfined, json_t **out,
		      struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_exports *x = s->exports;
	struct export *e = calloc(1, sizeof(*e));
	char *abs = NULL;
	json_t *st = NULL;
	const char *rel = NULL;
	int64_t seen = 0, room = 0;
	bool reserved = false;
	sg_err rc;

	*out = NULL;
	if (!e)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	e->fd = -1;
	/* Resolve first, so a link to a file inside root exports the file. */
	rc = resolve(s, path, unconfined, &abs, cancel, err);
	if (!rc)
		rc = stat_artifact(s, abs, unconfined, &st, &rel, &seen, cancel, err);
	if (!rc)
		rc = exports_reserve(x, seen, &room, err);
	if (rc)
		goto out;
	reserved = true;
	rc = snapshot_create(x, e, err);
	if (!rc)
		rc = snapshot_fill(s, e, rel, abs, room, cancel, err);
	if (rc)
		goto out;
	*out = json_pack("{s:s, s:s, s:I}", "execution_export", e->token, "name",
			 base_name(rel), "size", (json_int_t)e->size);
	pthread_mutex_lock(&x->lock);
	/* The reservation becomes the snapshot's real size. */
	x->held += e->size - seen;
	e->next = x->head;
	x->head = e;
	pthread_mutex_unlock(&x->lock);
	e = NULL;
out:
	if (e && reserved)
		exports_release(x, seen);
	if (e)
		export_free(e);
	free(abs);
	json_decref(st);
	return rc;
}

/* Find an export by token and hold a dup of its fd, so a concurrent close
 * cannot pull the file from under a read. */
static sg_err find_dup(struct sg_op *op, const char *token, int *fd,
		       int64_t *size)
{
	struct sg_exports *x = op->s->exports;
	sg_err rc = SG_OK;

	pthread_mutex_lock(&x->lock);
	for (struct export *e = x->head; e; e = e->next) {
		if (strcmp(e->token, token) == 0) {
			*fd = dup(e->fd);
			*size = e->size;
			break;
		}
	}
	if (*fd < 0)
		rc = sg_err_set(&op->err, SG_E_NOT_FOUND, UNKNOWN_EXPORT);
	pthread_mutex_unlock(&x->lock);
	return rc;
}

sg_err sg_export_read(struct sg_op *op, json_t **out)
{
	const char *token = NULL;
	int64_t offset, length = EXPORT_READ_CHUNK, size = 0;
	unsigned char *raw = NULL;
	char *b64 = NULL, *idtext = NULL;
	int fd = -1;
	ssize_t got = 0;
	sg_err rc;

	*out = NULL;
	rc = sg_arg_str(op->data, "token", true, &token, &op->err);
	if (!rc)
		rc = sg_arg_int(op->data, "offset", 0, INT64_MIN, INT64_MAX, &offset, &op->err);
	if (!rc)
		rc = find_dup(op, token, &fd, &size);
	if (rc)
		goto out;
	if (offset < 0 || offset > size) {
		rc = sg_err_set(&op->err, SG_E_INVALID_ARGUMENT,
				"invalid artifact offset: %lld is outside 0 to %lld",
				(long long)offset, (long long)size);
		goto out;
	}
	if (length > size - offset)
		length = size - offset;
	/*
	 * The whole reply, {"id":ID,"data":{"data":"<base64>","eof":B}}, is
	 * built as text in one buffer: a 5.6 MB string through jansson costs
	 * a copy, a UTF-8 check and an escape pass for bytes that need none.
	 */
	idtext = json_dumps(op->id, JSON_COMPACT | JSON_ENCODE_ANY);
	raw = malloc((size_t)length + 1);
	b64 = idtext ? malloc(strlen(idtext) + 4 * (((size_t)length + 2) / 3) + 64) : NULL;
	if (!raw || !b64) {
		rc = sg_err_set(&op->err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	while (got < length) {
		ssize_t n = pread(fd, raw + got, (size_t)(length - got), offset + got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = sg_err_set(&op->err, SG_E_INTERNAL, "reading the snapshot failed");
			goto out;
		}
		got += n;
	}
	{
		int n = snprintf(b64, strlen(idtext) + 32, "{\"id\":%s,\"data\":{\"data\":\"", idtext);

		n += EVP_EncodeBlock((unsigned char *)b64 + n, raw, (int)length);
		n += snprintf(b64 + n, 32, "\",\"eof\":%s}}",
			      offset + length >= size ? "true" : "false");
		op->raw_reply = b64;
		op->raw_len = (size_t)n;
		b64 = NULL;
	}
out:
	if (fd >= 0)
		close(fd);
	free(idtext);
	free(raw);
	free(b64);
	return rc;
}

sg_err sg_export_close(struct sg_op *op, json_t **out)
{
	struct sg_exports *x = op->s->exports;
	struct export *found = NULL;
	const char *token = NULL;
	sg_err rc = sg_arg_str(op->data, "token", true, &token, &op->err);

	*out = NULL;
	if (rc)
		return rc;
	pthread_mutex_lock(&x->lock);
	for (struct export **p = &x->head; *p; p = &(*p)->next) {
		if (strcmp((*p)->token, token) == 0) {
			found = *p;
			*p = found->next;
			break;
		}
	}
	pthread_mutex_unlock(&x->lock);
	if (!found)
		return sg_err_set(&op->err, SG_E_NOT_FOUND, UNKNOWN_EXPORT);
	exports_release(x, found->size);
	export_free(found);
	*out = json_object();
	return SG_OK;
}
