/*
 * cgexec.c - `sg-helper cgroup-exec [--user U:G [--stage FROM:TO]] FILE...
 * -- ARGV`: move this process into the cgroups whose cgroup.procs files
 * are given, become U:G with no supplementary group (--user, run as root),
 * then exec ARGV.
 *
 * bubblewrap finds what it binds by path, as the user it runs as (its
 * realpath() of the source), and an environment's files lie in sandgate's
 * state directory, which that user may not pass (root's home is 0700).
 * So --stage first shows each descriptor FROM..TO (O_PATH, opened by the
 * gateway) at SG_HELPER_STAGE/N, in a mount namespace of this process's
 * own, and closes it: the command inherits no descriptor of the host.
 *
 * The local backend prefixes every command with it (before bubblewrap), so
 * that the command is inside its limits and its session's containment
 * before its first instruction: moving it after the spawn would race with
 * the children it forks.  It is this small static program rather than the
 * gateway's own executable because it runs once per command, and loading
 * sandgate's forty shared libraries cost more than the rest of a local
 * `bash` on a slow host (docs/benchmarks.md, benchmark 2).
 */
#define _GNU_SOURCE /* O_CLOEXEC */
#include "helper/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int sg_helper_become(uid_t uid, gid_t gid)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sgid;

	if (syscall(SYS_setgroups, 0, NULL) != 0 || syscall(SYS_setresgid, gid, gid, gid) != 0 ||
	    syscall(SYS_setresuid, uid, uid, uid) != 0 ||
	    syscall(SYS_getresuid, &ru, &eu, &su) != 0 ||
	    syscall(SYS_getresgid, &rg, &eg, &sgid) != 0 || syscall(SYS_getgroups, 0, NULL) != 0)
		return -1;
	if (ru != uid || eu != uid || su != uid || rg != gid || eg != gid || sgid != gid)
		return -1;
	return 0;
}

/* --user U:G: neither may be root, nor past the largest id. */
static int become(const char *spec)
{
	char *end;
	unsigned long uid = strtoul(spec, &end, 10), gid;

	if (end == spec || *end != ':')
		return -1;
	gid = strtoul(end + 1, &end, 10);
	if (*end || uid == 0 || gid == 0 || uid > 0xfffffffeUL || gid > 0xfffffffeUL)
		return -1;
	return sg_helper_become((uid_t)uid, (gid_t)gid);
}

/* The new mount API, by number: musl 1.2.3 has no wrappers for it. */
#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#define CG_OPEN_TREE_CLONE 1
#define CG_AT_RECURSIVE 0x8000
#define CG_MOVE_MOUNT_F_EMPTY_PATH 0x4

/*
 * Show descriptor fd at SG_HELPER_STAGE/fd: a detached copy of its mount,
 * taken before the namespace changed (a bind from the old namespace is
 * refused), attached over a directory or an empty file of the same kind.
 */
static int stage_one(int fd, int tree)
{
	char at[64];
	struct stat st;
	int made;

	snprintf(at, sizeof(at), SG_HELPER_STAGE "/%d", fd);
	if (fstat(fd, &st) != 0)
		return -1;
	if (S_ISDIR(st.st_mode)) {
		made = mkdir(at, 0755);
	} else {
		made = open(at, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (made >= 0)
			made = close(made);
	}
	if (made != 0)
		return -1;
	return (int)syscall(SYS_move_mount, tree, "", AT_FDCWD, at, CG_MOVE_MOUNT_F_EMPTY_PATH);
}

static int stage(const char *range)
{
	int from, to, trees[32], n = 0, rc = 0;

	if (sscanf(range, "%d:%d", &from, &to) != 2 || from < 3 || to < from ||
	    to - from >= (int)(sizeof(trees) / sizeof(trees[0]))) {
		errno = EINVAL;
		return -1;
	}
	for (int fd = from; rc == 0 && fd <= to; fd++, n++) {
		trees[n] = (int)syscall(SYS_open_tree, fd, "",
					CG_OPEN_TREE_CLONE | CG_AT_RECURSIVE | O_CLOEXEC |
						AT_EMPTY_PATH);
		rc = trees[n] < 0 ? -1 : 0;
	}
	if (rc == 0)
		rc = unshare(CLONE_NEWNS);
	if (rc == 0)
		rc = mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
	if (rc == 0)
		rc = mount("tmpfs", SG_HELPER_STAGE, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
			   "mode=0755,size=64k");
	for (int i = 0; rc == 0 && i < n; i++)
		rc = stage_one(from + i, trees[i]);
	for (int i = 0; i < n; i++)
		if (trees[i] >= 0)
			close(trees[i]);
	for (int fd = from; fd <= to; fd++)
		close(fd);
	return rc;
}

int sg_helper_cgroup_exec(int argc, char *const *argv)
{
	const char *user = NULL, *range = NULL;
	int i = 1;

	/* argv[0] is the command word "cgroup-exec". */
	if (argc > 2 && strcmp(argv[1], "--user") == 0) {
		user = argv[2];
		i = 3;
	}
	if (user && argc > 4 && strcmp(argv[3], "--stage") == 0) {
		range = argv[4];
		i = 5;
	}
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		int fd = open(argv[i], O_WRONLY | O_CLOEXEC);

		if (fd < 0 || write(fd, "0\n", 2) != 2) {
			dprintf(2, "sg-helper: cannot join the cgroup %s: %s\n", argv[i],
				strerror(errno));
			return 126;
		}
		close(fd);
	}
	if (i + 1 >= argc) {
		dprintf(2, "sg-helper: cgroup-exec needs -- and a command\n");
		return 126;
	}
	if (range && stage(range) != 0) {
		dprintf(2, "sg-helper: cannot stage the sandbox's files: %s\n", strerror(errno));
		return 126;
	}
	if (user && become(user) != 0) {
		dprintf(2, "sg-helper: cannot become the user %s: %s\n", user, strerror(errno));
		return 126;
	}
	execvp(argv[i + 1], argv + i + 1);
	dprintf(2, "sg-helper: %s: %s\n", argv[i + 1], strerror(errno));
	return 127;
}
