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
 * and failed: a missing file, an old_string that is not unique ...).  The
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
#include "fs.h"

#include <dirent.h>
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
#include "base/limits.h"
#include "base/utf8.h"
#include "../path.h"

/*
 * The raw bytes one read may return: their base64 is the 16 MiB an
 * env-tool reply is sized for (SG_ENVTOOL_REPLY).
 */
#define FS_MAX_BYTES (SG_ENVTOOL_REPLY / 2)
/*
 * edit holds a file twice in memory; a file larger than one frame could
 * not have been written through the tools either.
 */
#define FS_EDIT_MAX SG_MAX_FRAME
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

sg_err sg_fs_resolve(struct fs *c, const char *path, enum sg_path_mode m,
		      struct sg_buf *rel)
{
	return sg_path_resolve(c->root, c->host_root, path, m, rel, &c->err);
}

/* A resolved path opened beneath root; see sg_path_openat(). */
int sg_fs_open_rel(struct fs *c, const struct sg_buf *rel, int flags)
{
	return sg_path_openat(c->rootfd, rel->len ? rel->p : "", flags);
}

/* The directory holding a resolved path's last component, and its name. */
int sg_fs_open_parent(struct fs *c, const struct sg_buf *rel,
		       const char **name)
{
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

static int b64_value(unsigned char ch)
{
	const char *p = ch ? strchr(b64_chars, ch) : NULL;

	return p ? (int)(p - b64_chars) : -1;
}

/*
 * Decode base64 text (whitespace ignored, padding optional) into o.
 * SG_E_INVALID_ARGUMENT for anything else.
 */
static sg_err b64_decode(const char *s, size_t n, struct sg_buf *o)
{
	unsigned acc = 0;
	size_t nd = 0, pad = 0;
	sg_err rc;

	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		int v;

		if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t')
			continue;
		if (ch == '=') {
			pad++;
			continue;
		}
		v = b64_value(ch);
		if (v < 0 || pad)
			return SG_E_INVALID_ARGUMENT;
		acc = acc << 6 | (unsigned)v;
		if (++nd % 4 == 0) {
			char bytes[3] = { (char)(acc >> 16), (char)(acc >> 8),
					  (char)acc };

			rc = sg_buf_add(o, bytes, 3);
			if (rc)
				return rc;
			acc = 0;
		}
	}
	if (nd % 4 == 1 || pad > 2 || (pad && (nd + pad) % 4))
		return SG_E_INVALID_ARGUMENT;
	if (nd % 4 == 2) {
		char b = (char)(acc >> 4);

		return sg_buf_add(o, &b, 1);
	}
	if (nd % 4 == 3) {
		char bytes[2] = { (char)(acc >> 10), (char)(acc >> 2) };

		return sg_buf_add(o, bytes, 2);
	}
	return SG_OK;
}

/* ---- read ---- */

static long long count_newlines(const char *s, size_t n)
{
	const char *p = s, *end = s + n;
	long long count = 0;

	while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
		count++;
		p++;
	}
	return count;
}

static sg_err read_base64(struct fs *c, int fd, const struct sg_buf *rel,
			  int64_t max)
{
	struct sg_buf data = SG_BUF_INIT((size_t)max);
	long long lines;
	sg_err rc = slurp(c, fd, c->pos[0], &data);

	if (rc == SG_E_TOO_LARGE)
		rc = sg_err_set(&c->err, SG_E_TOO_LARGE,
				"%s is larger than %lld bytes", c->pos[0],
				(long long)max);
	if (rc)
		goto out;
	lines = count_newlines(data.p, data.len) +
		(data.len && data.p[data.len - 1] != '\n');
	rc = sg_reply_ok(c->out);
	if (!rc)
		rc = sg_jw_key(c->out, "content", 0);
	if (!rc)
		rc = sg_buf_addc(c->out, '"');
	if (!rc)
		rc = b64_encode(c->out, (const unsigned char *)data.p, data.len);
	if (!rc)
		rc = sg_buf_addc(c->out, '"');
	if (!rc)
		rc = sg_fs_kv_int(c->out, "size", (long long)data.len);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "total_lines", lines);
	if (!rc)
		rc = sg_fs_kv_bool(c->out, "truncated", false);
	if (!rc)
		rc = sg_fs_kv_strn(c->out, "path", rel->p, rel->len);
	if (!rc)
		rc = sg_reply_end(c->out);
out:
	sg_buf_release(&data);
	return rc;
}

/*
 * A read's text, as `content`, or with --raw as `content_bytes` in the
 * JSON line (read_raw_after() then appends the bytes themselves).
 */
static sg_err read_content(struct fs *c, const char *p, size_t n, bool raw)
{
	return raw ? sg_fs_kv_int(c->out, "content_bytes", (long long)n)
		   : sg_fs_kv_strn(c->out, "content", p, n);
}

/*
 * --raw: the text follows the JSON line as it is, so the gateway can
 * escape it once into its reply instead of parsing and re-encoding a
 * megabyte of JSON string.
 */
static sg_err read_raw_after(struct fs *c, const char *p, size_t n, bool raw)
{
	if (raw && (sg_buf_addc(c->out, '\n') || sg_buf_add(c->out, p, n)))
		return SG_E_TOO_LARGE;
	return SG_OK;
}

/*
 * Lines before a read's window are only counted, and a hole (a sparse
 * file's unwritten range, which reads as NUL bytes) holds no newline: move
 * *at, the descriptor's offset, past the hole there, so that an offset
 * beyond the end of a terabyte hole behind a text head costs the text
 * alone.  True when a hole was skipped.  Where SEEK_DATA is not
 * supported (EINVAL), the file is simply read.
 */
static bool skip_hole(int fd, long long *at)
{
	off_t data = lseek(fd, (off_t)*at, SEEK_DATA);

	/* ENXIO: no data from *at on, the rest of the file is a hole. */
	if (data < 0 && errno == ENXIO)
		data = lseek(fd, 0, SEEK_END);
	if (data <= (off_t)*at)
		return false;
	*at = (long long)data;
	return true;
}

/*
 * Stream the file once: only the lines of the window [first, end) are
 * kept, up to max bytes (plus a few so that the cut can be moved back to a
 * character boundary), and lines are counted as they pass.  Once the
 * window is complete, reading goes on only to SG_READ_COUNT_MAX bytes in
 * all: a 10-line read of a large file does not scan the whole file.  A
 * count cut short is a lower bound, and the reply says total_lines_partial;
 * size is then the file's size as opened (file_size).
 */
static sg_err read_text(struct fs *c, int fd, const struct sg_buf *rel,
			int64_t first, int64_t limit, int64_t max, bool raw,
			long long file_size)
{
	struct sg_buf text = SG_BUF_INIT((size_t)max + 4);
	int64_t end = limit && limit <= INT64_MAX - first ? first + limit
							  : INT64_MAX;
	long long line = 1, size = 0, lines, next = 0;
	char *chunk = malloc(FS_CHUNK), last = '\n';
	bool full = false, truncated, partial = false;
	size_t keep;
	ssize_t n;
	sg_err rc = SG_OK;

	if (!chunk) {
		rc = SG_E_INTERNAL;
		goto out;
	}
	for (;;) {
		const char *p, *e, *nl;

		if ((full || line >= end) && size >= (long long)SG_READ_COUNT_MAX) {
			partial = size < file_size;
			break;
		}
		if (line < first && skip_hole(fd, &size))
			last = '\0';
		n = read(fd, chunk, FS_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = sg_fs_fail(c, "%s: %s", c->pos[0], sg_fs_errstr(errno));
			goto out;
		}
		if (n == 0)
			break;
		if (sg_cancel_check(c->cancel)) {
			rc = sg_fs_cancelled(c, "the read");
			goto out;
		}
		size += n;
		last = chunk[n - 1];
		for (p = chunk, e = chunk + n; p < e; p = nl ? nl + 1 : e) {
			nl = memchr(p, '\n', (size_t)(e - p));
			if (line >= first && line < end && !full)
				full = sg_buf_add_clipped(
					&text, p, (size_t)((nl ? nl + 1 : e) - p));
			if (nl)
				line++;
		}
	}
	lines = line - 1 + (size && last != '\n');
	keep = text.len > (size_t)max ? sg_utf8_clip(text.p, text.len, (size_t)max)
				      : text.len;
	truncated = keep < text.len || (limit && (lines >= end || partial));
	if (partial)
		size = file_size;
	if (truncated) {
		/*
		 * Said in the content, where the model reads: the lines shown
		 * and the offset that reads on (a line cut by the byte cap is
		 * read again from its start).
		 */
		long long whole = count_newlines(text.p, keep);

		next = first + (whole ? whole : 1);
		text.len = keep;
		text.max += 256;
		if (sg_buf_addf(&text, "%s[truncated: ", keep && text.p[keep - 1] != '\n' ? "\n" : "") ||
		    (whole ? sg_buf_addf(&text, "lines %lld-%lld shown", (long long)first,
					 (long long)next - 1)
			   : sg_buf_addf(&text, "line %lld is longer than %lld bytes, only its "
					 "head shown (encoding base64 reads the whole file)",
					 (long long)first, (long long)max)) ||
		    sg_buf_addf(&text, "; read on with offset=%lld]\n", next))
			rc = SG_E_INTERNAL;
		keep = text.len;
	}
	if (!rc)
		rc = sg_reply_ok(c->out);
	if (!rc)
		rc = read_content(c, text.p, keep, raw);
	if (!rc && truncated)
		rc = sg_fs_kv_int(c->out, "next_offset", next);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "size", size);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "total_lines", lines);
	if (!rc && partial)
		rc = sg_fs_kv_bool(c->out, "total_lines_partial", true);
	if (!rc)
		rc = sg_fs_kv_bool(c->out, "truncated", truncated);
	if (!rc)
		rc = sg_fs_kv_strn(c->out, "path", rel->p, rel->len);
	if (!rc)
		rc = sg_reply_end(c->out);
	if (!rc)
		rc = read_raw_after(c, text.p, keep, raw);
out:
	free(chunk);
	sg_buf_release(&text);
	return rc;
}

/*
 * What a file that is not text probably is, from its first bytes; NULL
 * when nothing known matches.  Only formats an agent meets in a
 * workspace: build outputs, archives, images, databases.
 */
static const char *magic_type(const unsigned char *b, size_t n)
{
	static const struct {
		size_t off;
		const char *sig;
		size_t len;
		const char *type;
	} m[] = {
		{ 0, "\177ELF", 4, "ELF executable or object" },
		{ 0, "\211PNG\r\n\032\n", 8, "PNG image" },
		{ 0, "\377\330\377", 3, "JPEG image" },
		{ 0, "GIF8", 4, "GIF image" },
		{ 0, "RIFF", 4, "RIFF media (WebP, WAV, AVI)" },
		{ 0, "%PDF", 4, "PDF document" },
		{ 0, "PK\003\004", 4, "zip archive (also jar, wheel, docx)" },
		{ 0, "\037\213", 2, "gzip-compressed data" },
		{ 0, "BZh", 3, "bzip2-compressed data" },
		{ 0, "\3757zXZ", 5, "xz-compressed data" },
		{ 0, "\050\265\057\375", 4, "zstd-compressed data" },
		{ 0, "7z\274\257\047\034", 6, "7-zip archive" },
		{ 257, "ustar", 5, "tar archive" },
		{ 0, "SQLite format 3", 16, "SQLite database" },
		{ 0, "\0asm", 4, "WebAssembly module" },
		{ 0, "\312\376\272\276", 4, "Java class file or Mach-O universal binary" },
		{ 0, "\317\372\355\376", 4, "Mach-O executable" },
		{ 0, "MZ", 2, "Windows executable (PE)" },
		{ 0, "!<arch>\n", 8, "ar archive (static library, .deb)" },
		{ 0, "\377\376", 2, "UTF-16 (little-endian) text" },
		{ 0, "\376\377", 2, "UTF-16 (big-endian) text" },
	};

	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		if (n >= m[i].off + m[i].len &&
		    memcmp(b + m[i].off, m[i].sig, m[i].len) == 0)
			return m[i].type;
	return NULL;
}

/*
 * Is this the head of a binary file?  A NUL byte says so, as for git and
 * grep; so does a head where more than one byte in eight (and at least
 * four) is not part of valid UTF-8 (a Latin-1 text file with a few
 * accents stays text).  A
 * character cut by the end of the head is not held against it.
 */
static bool looks_binary(const unsigned char *b, size_t n)
{
	size_t bad = 0;

	if (memchr(b, '\0', n))
		return true;
	for (size_t i = 0; i < n;) {
		size_t k = sg_utf8_seq(b + i, n - i);

		if (k == 0 && n - i < 4)
			break;
		if (k == 0)
			bad++;
		i += k ? k : 1;
	}
	return bad >= 4 && bad * 8 > n;
}

/*
 * A binary file's answer: what it is and how to get its bytes, never the
 * bytes as escaped text.  The reply has the text fields (content or,
 * with raw, content_bytes and the text after the line), plus
 * `binary: true` and `type`.
 */
static sg_err read_binary(struct fs *c, const struct sg_buf *rel, const struct stat *st,
			  const unsigned char *head, size_t n, int64_t max, bool raw)
{
	struct sg_buf text = SG_BUF_INIT(SG_PATH_MAX + 512);
	const char *type = magic_type(head, n);
	const char *shown = rel->len ? rel->p : ".";
	sg_err rc;

	if (!type)
		type = "binary data";
	rc = sg_buf_addf(&text, "[binary file: %s is %lld bytes of %s, not shown as text. ",
			 shown, (long long)st->st_size, type);
	if (!rc && st->st_size <= max)
		rc = sg_buf_addf(&text, "Its bytes: read_file with \"encoding\": \"base64\", "
				 "or present_artifact to export it.]\n");
	else if (!rc)
		rc = sg_buf_addf(&text, "It is larger than the %lld bytes a read may return "
				 "as base64: export it with present_artifact.]\n",
				 (long long)max);
	if (!rc)
		rc = sg_reply_ok(c->out);
	if (!rc)
		rc = read_content(c, text.p, text.len, raw);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "size", (long long)st->st_size);
	if (!rc)
		rc = sg_fs_kv_bool(c->out, "binary", true);
	if (!rc)
		rc = sg_fs_kv_str(c->out, "type", type);
	if (!rc)
		rc = sg_fs_kv_bool(c->out, "truncated", false);
	if (!rc)
		rc = sg_fs_kv_strn(c->out, "path", rel->p, rel->len);
	if (!rc)
		rc = sg_reply_end(c->out);
	if (!rc)
		rc = read_raw_after(c, text.p, text.len, raw);
	sg_buf_release(&text);
	return rc;
}

/*
 * fs read PATH [--offset N] [--limit N] [--base64] [--max BYTES]
 * --offset 0 is taken as 1 and --limit 0 as "no limit"; --base64 returns
 * the whole file, so the window options do not apply to it.
 */
static sg_err fs_read(struct fs *c)
{
	struct sg_buf rel = SG_BUF_INIT(SG_PATH_MAX);
	bool b64 = sg_args_flag(&c->a, "base64");
	bool raw = sg_args_flag(&c->a, "raw");
	int64_t offset, limit, max;
	struct stat st;
	int fd = -1;
	sg_err rc;

	rc = sg_args_int(&c->a, "offset", 1, INT64_MAX, &offset, &c->err);
	if (!rc)
		rc = sg_args_int(&c->a, "limit", 0, INT64_MAX, &limit, &c->err);
	if (!rc)
		rc = sg_args_int(&c->a, "max", (int64_t)SG_TOOL_OUTPUT,
				 (int64_t)FS_MAX_BYTES, &max, &c->err);
	if (!rc)
		rc = sg_fs_args_done(c, 1, 1);
	if (!rc)
		rc = sg_fs_resolve(c, c->pos[0], SG_PATH_EXISTING, &rel);
	if (!rc)
		rc = sg_fs_open_file(c, &rel, c->pos[0], &fd, &st);
	if (rc)
		goto out;
	if (b64 && st.st_size > max) {
		rc = sg_err_set(&c->err, SG_E_TOO_LARGE,
				"%s is %lld bytes, more than the %lld a read "
				"may return", c->pos[0], (long long)st.st_size,
				(long long)max);
		goto out;
	}
	if (b64) {
		rc = read_base64(c, fd, &rel, max);
	} else {
		unsigned char head[SG_BINARY_SNIFF];
		ssize_t n = pread(fd, head, sizeof(head), 0);

		if (n > 0 && looks_binary(head, (size_t)n))
			rc = read_binary(c, &rel, &st, head, (size_t)n, max, raw);
		else
			rc = read_text(c, fd, &rel, offset ? offset : 1, limit, max, raw,
				       (long long)st.st_size);
	}
out:
	sg_fs_close(&fd);
	sg_buf_release(&rel);
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

/* An octal mode string ("644", "0755"); SG_E_INVALID_ARGUMENT otherwise. */
static sg_err parse_mode(struct fs *c, const char *s, mode_t *mode)
{
	unsigned long v = 0;
	size_t n = strlen(s);

	if (n == 0 || n > 5 || strspn(s, "01234567") != n)
		return sg_err_set(&c->err, SG_E_INVALID_ARGUMENT,
				  "--mode must be an octal string like 0644");
	for (size_t i = 0; i < n; i++)
		v = v * 8 + (unsigned long)(s[i] - '0');
	if (v > 07777)
		return sg_err_set(&c->err, SG_E_INVALID_ARGUMENT,
				  "--mode %s is not a file mode", s);
	*mode = (mode_t)v;
	return SG_OK;
}

/* fs write PATH [--mode OCTAL] [--base64], content on stdin. */
static sg_err fs_write(struct fs *c)
{
	struct sg_buf rel = SG_BUF_INIT(SG_PATH_MAX), dec = SG_BUF_INIT(c->inlen);
	const char *mode_s = sg_args_str(&c->a, "mode", NULL);
	bool b64 = sg_args_flag(&c->a, "base64"), created = false;
	const char *data = c->in ? c->in : "";
	size_t n = c->inlen;
	mode_t mode = 0;
	sg_err rc = SG_OK;

	if (mode_s)
		rc = parse_mode(c, mode_s, &mode);
	if (!rc)
		rc = sg_fs_args_done(c, 1, 1);
	if (!rc && b64) {
		rc = b64_decode(data, n, &dec);
		if (rc)
			rc = sg_err_set(&c->err, SG_E_INVALID_ARGUMENT,
					"the content is not valid base64");
		data = dec.p;
		n = dec.len;
	}
	if (!rc)
		rc = sg_fs_resolve(c, c->pos[0], SG_PATH_PARENTS, &rel);
	if (!rc)
		rc = sg_fs_put_file(c, rel.p, c->pos[0], data, n, mode_s != NULL, mode,
			      &created);
	if (!rc)
		rc = sg_reply_ok(c->out);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "bytes_written", (long long)n);
	if (!rc)
		rc = sg_fs_kv_strn(c->out, "path", rel.p, rel.len);
	if (!rc)
		rc = sg_fs_kv_bool(c->out, "created", created);
	if (!rc)
		rc = sg_reply_end(c->out);
	sg_buf_release(&dec);
	sg_buf_release(&rel);
	return rc;
}

/* stdin of edit: "<decimal length of old>\n" old new. */
static sg_err parse_edit(struct fs *c, const char **old, size_t *oldn,
			 const char **repl, size_t *repln)
{
	const char *s = c->in ? c->in : "";
	size_t i = 0, len = 0;

	while (i < c->inlen && i < 20 && s[i] >= '0' && s[i] <= '9')
		len = len * 10 + (size_t)(s[i++] - '0');
	if (i == 0 || i >= c->inlen || s[i] != '\n' || len > c->inlen - i - 1)
		return sg_err_set(&c->err, SG_E_INVALID_ARGUMENT,
				  "edit input must be the byte length of "
				  "old_string, a newline, old_string and "
				  "new_string");
	*old = s + i + 1;
	*oldn = len;
	*repl = *old + len;
	*repln = c->inlen - i - 1 - len;
	return SG_OK;
}

/* fs edit PATH [--all], stdin as parse_edit() reads it. */
static sg_err fs_edit(struct fs *c)
{
	struct sg_buf rel = SG_BUF_INIT(SG_PATH_MAX), data = SG_BUF_INIT(FS_EDIT_MAX),
		      res = SG_BUF_INIT(FS_EDIT_MAX);
	bool all = sg_args_flag(&c->a, "all"), created;
	const char *old = NULL, *repl = NULL, *p, *q, *end;
	size_t oldn = 0, repln = 0;
	long long count = 0;
	struct stat st;
	int fd = -1;
	sg_err rc;

	rc = sg_fs_args_done(c, 1, 1);
	if (!rc)
		rc = parse_edit(c, &old, &oldn, &repl, &repln);
	if (!rc)
		rc = sg_fs_resolve(c, c->pos[0], SG_PATH_EXISTING, &rel);
	if (!rc)
		rc = sg_fs_open_file(c, &rel, c->pos[0], &fd, &st);
	if (!rc)
		rc = slurp(c, fd, c->pos[0], &data);
	if (rc == SG_E_TOO_LARGE)
		rc = sg_err_set(&c->err, SG_E_TOO_LARGE,
				"%s is larger than the %zu bytes edit handles",
				c->pos[0], (size_t)FS_EDIT_MAX);
	if (rc)
		goto out;
	if (oldn == 0) {
		rc = sg_fs_fail(c, "old_string is empty");
		goto out;
	}
	end = data.p + data.len;
	for (p = data.p; (q = memmem(p, (size_t)(end - p), old, oldn)) != NULL;
	     p = q + oldn)
		count++;
	if (count == 0) {
		rc = sg_fs_fail(c, "old_string was not found in %s", c->pos[0]);
		goto out;
	}
	if (count > 1 && !all) {
		rc = sg_fs_fail(c, "old_string occurs %lld times in %s; give "
			       "more context to make it unique, or replace "
			       "all of them", count, c->pos[0]);
		goto out;
	}
	/*
	 * The size is known before anything is built: an edit that would
	 * multiply the file past the limit (a one-byte old_string, a long
	 * new_string, replace_all) is refused without allocating for it.
	 */
	if (repln > oldn && (size_t)count > (FS_EDIT_MAX - data.len) / (repln - oldn))
		rc = SG_E_TOO_LARGE;
	for (p = data.p; !rc && (q = memmem(p, (size_t)(end - p), old, oldn));
	     p = q + oldn) {
		rc = sg_buf_add(&res, p, (size_t)(q - p));
		if (!rc)
			rc = sg_buf_add(&res, repl, repln);
	}
	if (!rc)
		rc = sg_buf_add(&res, p, (size_t)(end - p));
	if (rc == SG_E_TOO_LARGE)
		rc = sg_err_set(&c->err, SG_E_TOO_LARGE,
				"the edited %s would be larger than %zu bytes",
				c->pos[0], (size_t)FS_EDIT_MAX);
	if (!rc)
		rc = sg_fs_put_file(c, rel.p, c->pos[0], res.p, res.len, false, 0,
			      &created);
	if (!rc)
		rc = sg_reply_ok(c->out);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "replacements", count);
	if (!rc)
		rc = sg_fs_kv_strn(c->out, "path", rel.p, rel.len);
	if (!rc)
		rc = sg_reply_end(c->out);
out:
	sg_fs_close(&fd);
	sg_buf_release(&res);
	sg_buf_release(&data);
	sg_buf_release(&rel);
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
		size_t len;
		char *name;

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
		if (keep && ns->n == keep) {
			/* Full: a name after the largest kept one is left out. */
			ns->more = true;
			if (strcmp(d->d_name, ns->v[0]) >= 0)
				continue;
		}
		if (ns->n == ns->cap && (!keep || ns->n < keep)) {
			size_t cap = ns->cap ? ns->cap * 2 : 32;
			char **v;

			if (keep && cap > keep)
				cap = keep;
			v = realloc(ns->v, cap * sizeof(*v));
			if (!v) {
				e = ENOMEM;
				break;
			}
			ns->v = v;
			ns->cap = cap;
		}
		len = strlen(d->d_name);
		name = malloc(len + 1);
		if (!name) {
			e = ENOMEM;
			break;
		}
		memcpy(name, d->d_name, len + 1);
		if (keep && ns->n == keep) {
			free(ns->v[0]);
			ns->v[0] = name;
			heap_down(ns->v, ns->n, 0);
		} else {
			ns->v[ns->n++] = name;
			if (keep)
				heap_up(ns->v, ns->n - 1);
		}
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

static char type_char(mode_t m)
{
	return S_ISDIR(m) ? 'd' : S_ISREG(m) ? 'f' : S_ISLNK(m) ? 'l' : 'o';
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

/* One list entry, "TYPE SIZE PATH\n", whole or not at all. */
static sg_err list_entry(struct sg_buf *b, const struct stat *st, const struct relpath *path)
{
	size_t mark = b->len;
	sg_err rc;

	rc = sg_buf_addf(b, "%c %lld ", type_char(st->st_mode), (long long)st->st_size);
	if (!rc)
		rc = sg_fs_name_put(b, path->p, path->len, S_ISDIR(st->st_mode) ? "/" : "");
	if (!rc)
		rc = sg_buf_addc(b, '\n');
	if (rc)
		sg_buf_truncate(b, mark);
	return rc;
}

struct lister {
	struct fs *c;
	struct sg_buf text;
	struct relpath path;
	int64_t max, depth, entries;
	bool hidden, truncated, stop;
};

/* List directory dirfd (borrowed), which is l->path, at depth level. */
static sg_err list_walk(struct lister *l, int dirfd, int64_t level)
{
	struct names ns;
	sg_err rc = SG_OK;
	int e;

	if (sg_cancel_check(l->c->cancel))
		return sg_fs_cancelled(l->c, "the listing");
	/*
	 * Only the names this listing can still show are kept (one more
	 * tells that the listing is cut): a directory of millions costs
	 * the same memory as one of SG_LIST_MAX.
	 */
	e = sg_fs_names_read(dirfd, l->hidden, NULL, (size_t)(l->max - l->entries) + 1, &ns);
	if (e) {
		/* An unreadable subdirectory is listed without its contents. */
		if (level == 1)
			return sg_fs_fail(l->c, "cannot list %s: %s",
					 l->c->pos[0], sg_fs_errstr(e));
		return SG_OK;
	}
	for (size_t i = 0; i < ns.n && !rc && !l->stop; i++) {
		const char *name = ns.v[i];
		struct stat st;
		size_t saved;
		int sub;

		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (!sg_fs_rp_push(&l->path, name, &saved))
			continue;
		if (l->entries == l->max) {
			l->truncated = l->stop = true;
		} else if (list_entry(&l->text, &st, &l->path)) {
			l->truncated = l->stop = true;
		} else {
			l->entries++;
		}
		if (!l->stop && S_ISDIR(st.st_mode) && level < l->depth) {
			sub = openat(dirfd, name, O_PATH | O_DIRECTORY |
							  O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0) {
				rc = list_walk(l, sub, level + 1);
				close(sub);
			}
		}
		sg_fs_rp_pop(&l->path, saved);
	}
	/* Names past those kept were there: the listing is cut here. */
	if (!rc && !l->stop && ns.more)
		l->truncated = l->stop = true;
	sg_fs_names_free(&ns);
	return rc;
}

/*
 * fs list [PATH] [--depth N] [--hidden] [--max N]
 * Entries come in tree order: each directory's names sorted, a
 * directory's contents right after it.
 */
static sg_err fs_list(struct fs *c)
{
	struct sg_buf rel = SG_BUF_INIT(SG_PATH_MAX);
	struct lister *l = calloc(1, sizeof(*l));
	int dirfd = -1;
	sg_err rc;

	if (!l)
		return SG_E_INTERNAL;
	l->c = c;
	sg_buf_init(&l->text, SG_TOOL_OUTPUT);
	l->hidden = sg_args_flag(&c->a, "hidden");
	rc = sg_args_int(&c->a, "depth", 1, FS_DEPTH_MAX, &l->depth, &c->err);
	if (!rc)
		rc = sg_args_int(&c->a, "max", SG_LIST_MAX, SG_LIST_MAX, &l->max,
				 &c->err);
	if (!rc)
		rc = sg_fs_args_done(c, 0, 1);
	if (!rc)
		rc = sg_fs_resolve(c, c->npos ? c->pos[0] : ".", SG_PATH_EXISTING, &rel);
	if (rc)
		goto out;
	if (!c->npos)
		c->pos[c->npos++] = ".";
	if (l->depth < 1)
		l->depth = 1;
	dirfd = sg_fs_open_rel(c, &rel, O_PATH | O_DIRECTORY);
	if (dirfd < 0 && errno == ENOTDIR) {
		rc = sg_fs_fail(c, "%s is not a directory", c->pos[0]);
		goto out;
	}
	if (dirfd < 0) {
		rc = sg_fs_fail(c, "cannot list %s: %s", c->pos[0],
			       sg_fs_errstr(errno));
		goto out;
	}
	memcpy(l->path.p, rel.p, rel.len + 1);
	l->path.len = rel.len;
	rc = list_walk(l, dirfd, 1);
	/*
	 * A cut listing says so where the agent reads it; when the text is
	 * full, whole entries at its end make room for the marker.
	 */
	while (!rc && l->truncated &&
	       sg_buf_addf(&l->text, "[truncated: the first %lld entries shown; list a "
			   "subdirectory, or a smaller depth, for the rest]\n",
			   (long long)l->entries)) {
		char *nl = l->entries > 0 && l->text.len > 1
				   ? memrchr(l->text.p, '\n', l->text.len - 1) : NULL;

		if (!l->entries) {
			rc = SG_E_INTERNAL;
			break;
		}
		sg_buf_truncate(&l->text, nl ? (size_t)(nl - l->text.p) + 1 : 0);
		l->entries--;
	}
	if (!rc)
		rc = sg_reply_ok(c->out);
	if (!rc)
		rc = sg_fs_kv_strn(c->out, "content", l->text.p, l->text.len);
	if (!rc)
		rc = sg_fs_kv_int(c->out, "entries", l->entries);
	if (!rc)
		rc = sg_fs_kv_bool(c->out, "truncated", l->truncated);
	if (!rc)
		rc = sg_fs_kv_strn(c->out, "path", rel.p, rel.len);
	if (!rc)
		rc = sg_reply_end(c->out);
out:
	sg_fs_close(&dirfd);
	sg_buf_release(&l->text);
	free(l);
	sg_buf_release(&rel);
	return rc;
}

/* ---- stat, delete, move, mkdir, resolve ---- */

/* fs stat PATH: the entry itself, a final symlink not followed. */
static sg_err fs_stat(struct fs *c)
{
	struct sg_buf rel = SG_BUF_INIT(SG_PATH_MAX);
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
	if (!rc)
		rc = sg_buf_adds(&abs, c->root);
	if (!rc && rel.len && strcmp(c->root, "/") != 0)
		rc = sg_buf_addc(&abs, '/');
	if (!rc)
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
	{ "read", "base64 raw", fs_read },
	{ "write", "base64", fs_write },
	{ "edit", "all", fs_edit },
	{ "list", "hidden", fs_list },
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
	sg_err rc;

	if (sg_args_flag(&c->a, "read-only"))
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
		sg_reply_tool_error(out, "%s", c->err.msg);
	else if (rc)
		sg_reply_error(out, &c->err);
	sg_fs_close(&c->rootfd);
	free(c);
	return 0;
}
