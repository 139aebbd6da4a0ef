#include "fsutil.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "limits.h"

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
