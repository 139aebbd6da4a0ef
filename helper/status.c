/*
 * status.c - `sg-helper status --file F -- ARGV`: run ARGV and record how
 * it ended.
 *
 * A sandbox runner such as bubblewrap reports a command killed by signal
 * N as exit status 128+N, which a command can also exit with on its own;
 * the protocol reports the two differently (exit_code vs signal).  This
 * wrapper is the command's parent inside the sandbox, so it sees the real
 * wait status and writes "exit N" or "signal N" to F before exiting with
 * the runner's convention.  The adapter reads F afterwards; if F is
 * missing (the wrapper itself was killed) the runner's status stands.
 * With --scope the command starts in the environment's scope
 * (sg_confine_scope): it sets no setuid or setgid bit, and its signals
 * and abstract unix sockets stay inside.
 */
#define _GNU_SOURCE /* O_CLOEXEC */
#include "helper/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/limits.h"

int sg_helper_status(int argc, char *const *argv)
{
	struct sg_errinfo err = { 0 };
	struct sg_args a;
	const char *file = NULL;
	char line[32], msg[SG_ERR_MSG];
	bool scope = false;
	pid_t pid;
	int st, fd, n;

	if (sg_args_parse(&a, argc - 1, argv + 1, "scope", &err) == SG_OK) {
		file = sg_args_str(&a, "file", NULL);
		scope = sg_args_flag(&a, "scope");
	}
	if (!file || a.nrest < 1 || sg_args_unused(&a, &err)) {
		dprintf(2, "sg-helper: usage: status [--scope] --file F -- ARGV\n");
		return 126;
	}
	pid = fork();
	if (pid < 0) {
		dprintf(2, "sg-helper: cannot fork: %s\n", strerror(errno));
		return 126;
	}
	if (pid == 0) {
		if (scope && sg_confine_scope(msg, sizeof(msg)) != 0) {
			dprintf(2, "sg-helper: %s\n", msg);
			_exit(126);
		}
		execvp(a.rest[0], a.rest);
		dprintf(2, "sg-helper: %s: %s\n", a.rest[0], strerror(errno));
		_exit(127);
	}
	/* Signals meant for the command reach it through the process group;
	 * this parent only waits. */
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return 126;
	if (WIFSIGNALED(st))
		n = snprintf(line, sizeof(line), "signal %d\n", WTERMSIG(st));
	else
		n = snprintf(line, sizeof(line), "exit %d\n", WEXITSTATUS(st));
	/*
	 * A new file only: F lies where the command itself may write, and
	 * this wrapper runs before the command's confinement, so a link or
	 * a file the command put there is left alone (the runner's status
	 * then stands).
	 */
	fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0) {
		if (write(fd, line, (size_t)n) != n)
			unlink(file);
		close(fd);
	}
	return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}
