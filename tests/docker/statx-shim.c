/*
 * statx-shim.c - preloaded (/etc/ld.so.preload) in the gVisor test image
 * only: Debian 12's runsc (release 20221219) refuses statx(2) with
 * AT_NO_AUTOMOUNT (EINVAL), which coreutils 9 passes on every ls, stat,
 * cp and mv.  The flag only keeps a lookup from triggering an automount,
 * and gVisor has none, so dropping it changes nothing else; newer gVisor
 * releases accept it.  sg-helper is static and never loads this.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf)
{
	return (int)syscall(SYS_statx, dirfd, path, flags & ~AT_NO_AUTOMOUNT, mask, buf);
}
