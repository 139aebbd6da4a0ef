#define _GNU_SOURCE /* SYS_close_range */
#include "base/fsutil.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/limits.h"

int sg_mkdir_p(const char *path, mode_t mode)
{
	char buf[SG_PATH_MAX];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0700) && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(buf, mode) && errno != EEXIST ? -1 : 0;
}

int sg_write_all(int fd, const void *p, size_t n)
{
	const char *s = p;

	while (n > 0) {
		ssize_t k = write(fd, s, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		s += k;
		n -= (size_t)k;
	}
	return 0;
}

sg_err sg_read_all(int fd, struct sg_buf *b)
{
	for (;;) {
		size_t room = b->max - b->len;
		size_t want = room < 65536 ? room : 65536;
		char *dst, probe;
		ssize_t k;
		sg_err rc;

		if (want == 0) {
			/* Full: anything more is too much. */
			k = read(fd, &probe, 1);
			if (k < 0 && errno == EINTR)
				continue;
			return k == 0 ? SG_OK : k > 0 ? SG_E_TOO_LARGE : SG_E_INTERNAL;
		}
		rc = sg_buf_reserve(b, want, &dst);
		if (rc)
			return rc;
		k = read(fd, dst, want);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return SG_E_INTERNAL;
		if (k == 0)
			return SG_OK;
		sg_buf_commit(b, (size_t)k);
	}
}

int sg_program_check(const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return errno;
	if (!S_ISREG(st.st_mode) || access(path, X_OK) < 0)
		return EACCES;
	return 0;
}

int sg_program_find(const char *name, const char *path, char *out, size_t n)
{
	int e = ENOENT, w;

	for (const char *p = path;; p++) {
		const char *end = strchr(p, ':');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len > 0 && p[0] == '/') {
			w = snprintf(out, n, "%.*s/%s", (int)len, p, name);
			if (w < 0 || (size_t)w >= n) {
				e = ENAMETOOLONG;
			} else {
				int ce = sg_program_check(out);

				if (ce == 0)
					return 0;
				if (ce == EACCES)
					e = EACCES;
			}
		}
		if (!end)
			break;
		p = end;
	}
	return e;
}

void sg_close_from(int from, int keep)
{
#ifdef SYS_close_range
	bool split = keep >= from;

	if ((!split || keep == from ||
	     syscall(SYS_close_range, (unsigned)from, (unsigned)keep - 1, 0u) == 0) &&
	    syscall(SYS_close_range, (unsigned)(split ? keep + 1 : from), ~0u, 0u) == 0)
		return;
#endif
	for (int fd = from; fd < SG_CLOSE_FDS_MAX; fd++)
		if (fd != keep)
			close(fd);
}
