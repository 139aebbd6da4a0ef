/*
 * cgexec.c - `sg-helper cgroup-exec FILE... -- ARGV`: move this process
 * into the cgroups whose cgroup.procs files are given, then exec ARGV.
 *
 * The local backend prefixes every command with it (before bubblewrap), so
 * that the command is inside its limits and its session's containment
 * before its first instruction: moving it after the spawn would race with
 * the children it forks.  It is this small static program rather than the
 * gateway's own executable because it runs once per command, and loading
 * sandgate's forty shared libraries cost more than the rest of a local
 * `run_command` on a slow host (docs/benchmarks.md, benchmark 2).
 */
#define _GNU_SOURCE /* O_CLOEXEC */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int sg_helper_cgroup_exec(int argc, char *const *argv)
{
	int i;

	/* argv[0] is the command word "cgroup-exec". */
	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
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
	execvp(argv[i + 1], argv + i + 1);
	dprintf(2, "sg-helper: %s: %s\n", argv[i + 1], strerror(errno));
	return 127;
}
