/*
 * job.c - `sg-helper job`: run one command so that its result outlives the
 * request that started it.
 *
 * Some providers run a command only for as long as one HTTP request lives
 * (Daytona's /process/execute answers 408 and kills the request's process
 * group at its time limit).  A job's command therefore runs in a session of
 * its own, under a runner that records how it ended in files sharing the
 * prefix --dir:
 *
 *   .s       created exclusively by the start: a resent request attaches
 *            instead of starting the command twice
 *   .in      the command's stdin, when it came in variables
 *   .o .e    its stdout and stderr (.o alone with --merge)
 *   .pid     the runner's pid, which is also its process group and session
 *   .st      "exit N" or "signal N", the command's real wait status
 *   .to      exists when the runner's timer killed the command
 *   .x       the runner's status in the shell's convention (128+N for a
 *            signal), written last: a non-empty .x means the result is whole
 *   .cancel  exists when the gateway gave up on the job (the adapter's kill
 *            script writes it, kills the group and fills .x)
 *   .up      the adapter's upload of a large stdin (--stdin-file), removed
 *            with the rest by --gc
 *
 * The caller waits at most --wait-ms for the result in one request, then
 * prints either
 *
 *   <stdout>\n<mark> done <x>|<st>|<to>|<stdout size>[|<its lines>]\n<stderr head>
 *
 * (with --keep-tail, stdout over --max-out is its head and its last
 * max-out/2 bytes, and the line count is given only then; without, it is
 * its first --max-out bytes)
 *
 * or "\n<mark> pending\n" (ask again with --attach), or "\n<mark>
 * missing\n" (no job has this prefix).  The mark is the caller's random
 * word, so the last line holding it is the trailer whatever the command
 * printed.  This reply is plain text, not sg-helper's JSON: the toolbox
 * hands it back as a string and the command's output is copied exactly
 * once into it.
 *
 * The whole job costs one fork for the runner and one fork+exec for the
 * command; the environment is exactly the NAME=VALUE list given (as
 * `env -i` would make it), with PATH taken from that list.
 *
 * For an adapter whose transport is one connection per call (ssh), the
 * job is the whole remote supervisor, with no shell around it:
 *  - --spec-stdin: the environment and argv arrive first on stdin
 *    ("<n>\n" and n bytes of NUL-terminated words), never on a command
 *    line, and the rest of stdin is the command's;
 *  - --tie: the job dies with its parent (the sshd of the connection), and
 *    kills the command's group first, so a dropped connection leaves
 *    nothing running;
 *  - --bind SRC --bind-to DST, --netns: the command runs in a mount
 *    namespace where SRC is shown at DST, and/or a network namespace of
 *    its own; a login that is not root is given a user namespace first and
 *    its own uid and gid mapped back inside (as `unshare --map-root-user`
 *    then `--map-user` would); --tmp DIR (with --bind): DIR is shown on
 *    /tmp as well, a /tmp of the environment's own;
 *  - --cgroups FILES: the command joins these cgroup.procs files (a line
 *    each) before anything else;
 *  - --kill: give up on the job of --dir: it never starts, or its group is
 *    killed, and .x is filled;
 *  - --rm: nothing attaches later, so the job forks the command itself and
 *    relays its output through pipes instead of files (job_relay): one
 *    process and no file copy fewer per call;
 *  - --linger: the request may end before this process (the provider runs
 *    a command whoever reads its output): an inline spawn (below) is then
 *    supervised by this very process, and a reply after which it lives on
 *    ends with "\n<mark> end\n", where the adapter stops reading (one
 *    that exits ends its request by its exit); .pid then says
 *    "<pid> lingers", and --kill asks it to stop its command (SIGTERM)
 *    instead of killing the command's only supervisor.
 * A command that is this program (sg-helper confine, fs ...) runs in the
 * forked child without a second exec (sg_helper_self); a detaching job's
 * `proc spawn` runs in the job's own process, with no runner (job_inline):
 * a bash call is then this process, the spawn's supervisor and the command,
 * and with --linger only this process and the command.
 * The reply's format is shared with the adapters in adapters/jobreply.h.
 */
#define _GNU_SOURCE /* environ, O_CLOEXEC */
#include "helper/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "adapters/jobreply.h"
#include "base/cancel.h"
#include "base/fsutil.h"
#include "base/limits.h"

extern char **environ;

#define JOB_POLL_MS 100 /* an attach's look at a job started elsewhere */
#define JOB_LINE 64     /* .x, .st and .pid hold one short line each */
/*
 * A relayed job's pipes after the command ended and its group was killed:
 * how long they may stay open (something that left the group holds them)
 * before a drainer takes them over.
 */
#define JOB_DRAIN_MS 200
#define JOB_CHUNK (64 * 1024) /* one read of output */
#define JOB_LINGERS "lingers" /* .pid's word after a --linger job's pid */

int (*sg_helper_self)(int argc, char **argv);
int64_t sg_helper_due;
void (*sg_helper_overdue)(void);
void (*sg_helper_answer)(const char *reply, size_t n, bool on);

/* Every file of a job, for --gc. */
static const char *const job_suffixes[] = {
	".s", ".in", ".o", ".e", ".pid", ".st", ".to", ".x", ".cancel", ".up",
};

struct job {
	const char *dir;  /* the files' common prefix */
	const char *mark;
	size_t max_out, max_err;
	int64_t wait_ms, timeout_ms;
	bool merge, detach;
	bool tie;         /* dies with its parent, killing the command first */
	bool rm;          /* no one attaches later: remove the files once reported */
	const char *cwd;
	const char *bind, *bind_to; /* a mount namespace showing bind at bind_to */
	const char *tmp;            /* and tmp on /tmp, or NULL */
	bool netns;
	const char *cgroups; /* cgroup.procs files, a line each */
	bool keep_tail;         /* --keep-tail */
	bool self;              /* argv[0] is this program: run it without an exec */
	/*
	 * The request may end before this process (--linger): an inline
	 * spawn supervises its command here, and a reply after which it
	 * lives on ends with "\n<mark> end\n", where the adapter stops.
	 */
	bool linger;
};

/* Set by job_wait when a tied job's parent went away. */
static bool job_orphaned;

/* dir + suffix into out; false when it does not fit (never silently cut). */
static bool job_path(const struct job *j, const char *suffix, char *out, size_t n)
{
	int len = snprintf(out, n, "%s%s", j->dir, suffix);

	return len > 0 && (size_t)len < n;
}

/*
 * A --rm job that runs its spawn inline (job_inline) keeps its result in
 * memory until it detaches: .o and .e are memfds, .st, .to and .x lines
 * here, which spares every bash call five files made and removed.  A job
 * that detaches writes them out at its end for --attach (job_mem_flush).
 */
static const char *const job_mem_names[] = { ".o", ".e", ".st", ".to", ".x" };
static struct {
	bool on;
	int fd[2];                 /* .o and .e (-1 for .e with --merge) */
	char line[3][JOB_LINE];    /* .st, .to and .x */
} job_mem = { .fd = { -1, -1 } };

/* Which of job_mem_names suffix is, or -1 (also while memory is off). */
static int job_mem_slot(const char *suffix)
{
	for (int k = 0; job_mem.on && k < (int)(sizeof(job_mem_names) / sizeof(*job_mem_names)); k++)
		if (strcmp(suffix, job_mem_names[k]) == 0)
			return k;
	return -1;
}

/* Open a file of the job; -1 when it cannot be (or its path is too long). */
static int job_open(const struct job *j, const char *suffix, int flags)
{
	char path[SG_PATH_MAX];
	int k = job_mem_slot(suffix), fd;

	if (k == 0 || k == 1) {
		/* Read only once the command is done, or written by it. */
		fd = job_mem.fd[k] < 0 ? -1 : fcntl(job_mem.fd[k], F_DUPFD_CLOEXEC, 3);
		if (fd >= 0 && (flags & O_TRUNC) && ftruncate(fd, 0) != 0) {
			close(fd);
			return -1;
		}
		if (fd >= 0)
			lseek(fd, 0, SEEK_SET);
		return fd;
	}
	return job_path(j, suffix, path, sizeof(path))
		       ? open(path, flags | O_CLOEXEC, 0600)
		       : -1;
}

/*
 * Replace a file of the job with n bytes.  A short write leaves a line the
 * reader cannot parse, which reads as a killed command: the truth, as far
 * as anyone can tell.
 */
static void job_write(const struct job *j, const char *suffix, const char *p, size_t n)
{
	int k = job_mem_slot(suffix), fd;

	if (k >= 2) {
		snprintf(job_mem.line[k - 2], JOB_LINE, "%.*s", (int)n, p);
		return;
	}
	fd = job_open(j, suffix, O_WRONLY | O_CREAT | O_TRUNC);
	if (fd < 0)
		return;
	(void)sg_write_all(fd, p, n);
	close(fd);
}

/* Write a one-line file of the job, replacing what it held. */
static void job_put(const struct job *j, const char *suffix, const char *fmt, ...) SG_PRINTF(3, 4);
static void job_put(const struct job *j, const char *suffix, const char *fmt, ...)
{
	char line[JOB_LINE];
	va_list ap;
	int len;

	va_start(ap, fmt);
	len = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (len >= 0 && (size_t)len < sizeof(line))
		job_write(j, suffix, line, (size_t)len);
}

/* The first line of a job file, or "" when it is missing or empty. */
static void job_get(const struct job *j, const char *suffix, char *out, size_t n)
{
	ssize_t got = -1;
	int k = job_mem_slot(suffix), fd;

	out[0] = '\0';
	if (k >= 2) {
		snprintf(out, n, "%.*s", (int)strcspn(job_mem.line[k - 2], "\n"),
			 job_mem.line[k - 2]);
		return;
	}
	fd = job_open(j, suffix, O_RDONLY);
	if (fd < 0)
		return;
	do
		got = read(fd, out, n - 1);
	while (got < 0 && errno == EINTR);
	close(fd);
	out[got > 0 ? got : 0] = '\0';
	out[strcspn(out, "\n")] = '\0';
}

static bool job_exists(const struct job *j, const char *suffix)
{
	char path[SG_PATH_MAX];
	int k = job_mem_slot(suffix);

	if (k >= 0)
		return k < 2 ? job_mem.fd[k] >= 0 : job_mem.line[k - 2][0] != '\0';
	return job_path(j, suffix, path, sizeof(path)) && access(path, F_OK) == 0;
}

/*
 * Copy max bytes of a job file, from offset `from`, to stdout; its size
 * into *size and, with lines, its newlines into *lines.
 */
static void job_copy(const struct job *j, const char *suffix, off_t from, size_t max,
		     long long *size, long long *lines)
{
	char buf[64 * 1024];
	struct stat st;
	int fd = job_open(j, suffix, O_RDONLY);

	if (size)
		*size = 0;
	if (lines)
		*lines = 0;
	if (fd < 0)
		return;
	if (size && fstat(fd, &st) == 0)
		*size = (long long)st.st_size;
	for (ssize_t got; lines && (got = read(fd, buf, sizeof(buf))) != 0;) {
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			break;
		for (char *p = buf, *e = buf + got; (p = memchr(p, '\n', (size_t)(e - p))); p++)
			++*lines;
	}
	if (lseek(fd, from, SEEK_SET) != from)
		max = 0;
	while (max > 0) {
		ssize_t got = read(fd, buf, max < sizeof(buf) ? max : sizeof(buf));

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0 || sg_write_all(1, buf, (size_t)got))
			break;
		max -= (size_t)got;
	}
	close(fd);
}

/*
 * The result: stdout, the trailer, stderr's head.  With --keep-tail,
 * stdout longer than --max-out is its head and its tail (max-out/2
 * bytes), so the last error of a long log reaches the agent; the trailer
 * then also counts its lines for the marker that replaces the middle.
 */
static int job_report(const struct job *j)
{
	char x[JOB_LINE], st[JOB_LINE], line[3 * JOB_LINE + 256];
	long long size = 0, lines = 0;
	size_t tail = j->max_out / 2;
	struct stat sb;
	int len, fd = job_open(j, ".o", O_RDONLY);

	if (fd >= 0 && fstat(fd, &sb) == 0)
		size = (long long)sb.st_size;
	if (fd >= 0)
		close(fd);
	if ((unsigned long long)size <= j->max_out || !j->keep_tail) {
		job_copy(j, ".o", 0, j->max_out, &size, NULL);
	} else {
		job_copy(j, ".o", 0, j->max_out - tail, &size, &lines);
		job_copy(j, ".o", (off_t)(size - (long long)tail), tail, NULL, NULL);
	}
	job_get(j, ".x", x, sizeof(x));
	job_get(j, ".st", st, sizeof(st));
	len = snprintf(line, sizeof(line), "\n%s " SG_JOB_DONE " %s|%s|%s|%lld", j->mark, x, st,
		       job_exists(j, ".to") ? "1" : "", size);
	if (len > 0 && (unsigned long long)size > j->max_out && j->keep_tail)
		len += snprintf(line + len, sizeof(line) - (size_t)len, "|%lld", lines);
	if (len > 0 && (size_t)len + 1 < sizeof(line))
		line[len++] = '\n';
	if (len > 0 && (size_t)len < sizeof(line))
		(void)sg_write_all(1, line, (size_t)len);
	job_copy(j, ".e", 0, j->max_err, NULL, NULL);
	return 0;
}

static int job_say(const struct job *j, const char *word)
{
	dprintf(1, "\n%s %s\n", j->mark, word);
	return 0;
}

/* Remove every file of this job (--rm, after its reply). */
static void job_remove(const struct job *j)
{
	char path[SG_PATH_MAX];

	for (size_t i = 0; i < sizeof(job_suffixes) / sizeof(*job_suffixes); i++)
		if (job_mem_slot(job_suffixes[i]) < 0 &&
		    job_path(j, job_suffixes[i], path, sizeof(path)))
			unlink(path);
}

/* A job that cannot start ends as a command not found would. */
static int job_fail(const struct job *j, const char *fmt, ...) SG_PRINTF(2, 3);
static int job_fail(const struct job *j, const char *fmt, ...)
{
	char msg[SG_PATH_MAX + 128] = "sandgate: ";
	size_t len = strlen(msg);
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg + len, sizeof(msg) - len - 1, fmt, ap);
	va_end(ap);
	if (n > 0)
		len += (size_t)n < sizeof(msg) - len - 1 ? (size_t)n : sizeof(msg) - len - 2;
	msg[len++] = '\n';
	/* Where the command's stderr would have gone. */
	job_write(j, j->merge ? ".o" : ".e", msg, len);
	job_put(j, ".st", "exit 127\n");
	job_put(j, ".x", "127\n");
	job_report(j);
	if (j->rm)
		job_remove(j);
	return 0;
}

/* Remove the files of finished jobs: --gc holds their prefixes, a line each. */
static void job_collect(const char *list)
{
	char path[SG_PATH_MAX];

	while (list && *list) {
		size_t n = strcspn(list, "\n");

		/* Only absolute prefixes: an empty line must not mean ".s". */
		for (size_t i = 0; list[0] == '/' && i < sizeof(job_suffixes) / sizeof(*job_suffixes); i++) {
			int len = snprintf(path, sizeof(path), "%.*s%s", (int)n, list,
					   job_suffixes[i]);

			if (len > 0 && (size_t)len < sizeof(path))
				unlink(path);
		}
		list += n;
		list += *list == '\n';
	}
}

/*
 * Wait for a child with SIGCHLD blocked; at most ms (< 0: for ever).
 * True with its status in *status, false when the time ran out.
 */
static bool job_wait(pid_t pid, int64_t ms, int *status)
{
	struct timespec now, end;
	sigset_t chld;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigaddset(&chld, SIGHUP); /* a tied job's parent died (PDEATHSIG) */
	end = sg_time_after(CLOCK_MONOTONIC, ms);
	for (;;) {
		struct timespec left;
		pid_t got = waitpid(pid, status, ms < 0 ? 0 : WNOHANG);

		if (got == pid)
			return true;
		if (got < 0 && errno != EINTR)
			return false; /* not our child (any more) */
		if (ms < 0)
			continue;
		clock_gettime(CLOCK_MONOTONIC, &now);
		left.tv_sec = end.tv_sec - now.tv_sec;
		left.tv_nsec = end.tv_nsec - now.tv_nsec;
		if (left.tv_nsec < 0) {
			left.tv_sec--;
			left.tv_nsec += 1000000000;
		}
		if (left.tv_sec < 0)
			return false;
		/* Any SIGCHLD (or the time) ends the nap; waitpid then says
		 * whether it was this child's. */
		switch (sigtimedwait(&chld, NULL, &left)) {
		case SIGHUP:
			job_orphaned = true;
			return waitpid(pid, status, WNOHANG) == pid;
		case -1:
			if (errno == EAGAIN)
				return waitpid(pid, status, WNOHANG) == pid;
			break;
		default:
			break;
		}
	}
}

/* Write one short line to a /proc or /sys file; false on failure. */
static bool job_poke(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	bool ok = fd >= 0 && !sg_write_all(fd, text, strlen(text));

	if (fd >= 0)
		close(fd);
	return ok;
}

/* A user namespace's uid and gid maps: inside (one id) to outside. */
static bool job_map(long in_u, long in_g, long out_u, long out_g)
{
	char line[64];

	if (!job_poke("/proc/self/setgroups", "deny"))
		return false;
	snprintf(line, sizeof(line), "%ld %ld 1", in_u, out_u);
	if (!job_poke("/proc/self/uid_map", line))
		return false;
	snprintf(line, sizeof(line), "%ld %ld 1", in_g, out_g);
	return job_poke("/proc/self/gid_map", line);
}

/*
 * In the command's process, before exec (or in the job's own, before it
 * runs a spawn inline): join the cgroups, enter the namespaces, show the
 * workspace, enter cwd.  A failure is a sentence on the command's stderr
 * and false: the command ends as one that could not start (127).
 */
static bool job_confine(const struct job *j, int err)
{
	long uid = (long)getuid(), gid = (long)getgid();
	int flags = (j->bind ? CLONE_NEWNS : 0) | (j->netns ? CLONE_NEWNET : 0);
	char pid[32];
	const char *what = NULL;

	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	for (const char *l = j->cgroups; l && *l;) {
		size_t n = strcspn(l, "\n");
		char path[SG_PATH_MAX];

		if (n > 0 && n < sizeof(path)) {
			memcpy(path, l, n);
			path[n] = '\0';
			if (!job_poke(path, pid)) {
				dprintf(err, "sandgate: cannot join the cgroup %s: %s\n", path,
					strerror(errno));
				return false;
			}
		}
		l += n;
		l += *l == '\n';
	}
	if (flags && uid != 0) {
		/* Root in a user namespace first, so that the rest is allowed. */
		if (unshare(CLONE_NEWUSER | flags) != 0 || !job_map(0, 0, uid, gid))
			what = "an unprivileged user namespace";
	} else if (flags && unshare(flags) != 0) {
		what = j->bind ? "a mount namespace" : "a network namespace";
	}
	if (!what && j->bind &&
	    (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
	     mount(j->bind, j->bind_to, NULL, MS_BIND | MS_REC, NULL) != 0)) {
		dprintf(err, "sandgate: cannot show the workspace at %s (mount --bind failed: %s)\n",
			j->bind_to, strerror(errno));
		return false;
	}
	if (!what && j->tmp && mount(j->tmp, "/tmp", NULL, MS_BIND | MS_REC, NULL) != 0) {
		dprintf(err, "sandgate: cannot give the environment its own /tmp (mount --bind failed: %s)\n",
			strerror(errno));
		return false;
	}
	/* And back to the login's own ids, so files keep their owner. */
	if (!what && flags && uid != 0 &&
	    (unshare(CLONE_NEWUSER) != 0 || !job_map(uid, gid, 0, 0)))
		what = "a user namespace mapping back to the login's uid";
	if (what) {
		dprintf(err, "sandgate: cannot enter %s: %s\n", what, strerror(errno));
		return false;
	}
	if (j->cwd && chdir(j->cwd) != 0) {
		dprintf(err, "sandgate: cannot enter the directory %s\n", j->cwd);
		return false;
	}
	return true;
}

/* In the command's process: stdio, a clean environment, then exec. */
static void job_exec(const struct job *j, int in, int out, int err, char **envp,
		     char *const *argv)
{
	sigset_t none;
	int e;

	if (!job_confine(j, err))
		_exit(127);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGINT, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
		_exit(126);
	/* Nothing the toolbox left open reaches the command. */
	sg_close_from(3, -1);
	environ = envp;
	if (j->self && sg_helper_self) {
		/* This very program (sg-helper confine, fs ...): no second exec. */
		int argc = 0, rc;

		while (argv[argc])
			argc++;
		rc = sg_helper_self(argc, (char **)argv);
		fflush(NULL);
		_exit(rc);
	}
	execvp(argv[0], argv);
	e = errno;
	dprintf(2, "sg-helper: %s: %s\n", argv[0], strerror(e));
	_exit(e == ENOENT ? 127 : 126);
}

/*
 * The runner, leader of its own session so that the request's end cannot
 * take it along.  It never returns: it records the command's end and, for
 * a job that does not detach, kills what the command left in its group.
 */
static void job_runner(const struct job *j, int in, int out, int err, char **envp,
		       char *const *argv)
{
	pid_t cmd;
	int st = 0, null = open("/dev/null", O_RDWR | O_CLOEXEC);

	setsid();
	/* The request's pipes must see their end when the caller exits. */
	if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
		_exit(0);
	close(null);
	cmd = fork();
	if (cmd < 0) {
		job_put(j, ".st", "exit 126\n");
		job_put(j, ".x", "126\n");
		_exit(0);
	}
	if (cmd == 0)
		job_exec(j, in, out, err, envp, argv);
	close(in);
	close(out);
	close(err);
	if (!job_wait(cmd, j->timeout_ms > 0 ? j->timeout_ms : -1, &st)) {
		/* The whole group goes, this runner included: record first. */
		job_put(j, ".to", "1\n");
		job_put(j, ".st", "signal 9\n");
		job_put(j, ".x", "137\n");
		kill(0, SIGKILL);
		_exit(0);
	}
	if (WIFSIGNALED(st)) {
		job_put(j, ".st", "signal %d\n", WTERMSIG(st));
		job_put(j, ".x", "%d\n", 128 + WTERMSIG(st));
	} else {
		job_put(j, ".st", "exit %d\n", WEXITSTATUS(st));
		job_put(j, ".x", "%d\n", WEXITSTATUS(st));
	}
	if (!j->detach)
		kill(0, SIGKILL);
	_exit(0);
}

/*
 * Stage stdin from the variables named in vars (comma-separated, their
 * values concatenated in order): one variable holds at most 128 KiB.
 * The open file, read from its start, or -1.
 */
static int job_stdin_vars(const struct job *j, const char *vars)
{
	int in = job_open(j, ".in", O_RDWR | O_CREAT | O_TRUNC);

	while (in >= 0 && *vars) {
		size_t n = strcspn(vars, ",");
		char name[64];
		const char *v;

		if (n >= sizeof(name))
			goto fail;
		memcpy(name, vars, n);
		name[n] = '\0';
		v = getenv(name);
		if (!v || sg_write_all(in, v, strlen(v)))
			goto fail;
		vars += n;
		vars += *vars == ',';
	}
	if (in >= 0 && lseek(in, 0, SEEK_SET) == 0)
		return in;
fail:
	if (in >= 0)
		close(in);
	return -1;
}

/*
 * A --rm job's output (job_relay): nothing attaches later, so nothing needs
 * the output in files.  stdout's head goes on to this program's stdout as
 * it comes (splice(2) where it can, so a large head is never copied through
 * here); with --keep-tail the newest max-out/2 bytes after the head wait
 * in a ring; stderr's head is kept in memory.  The reply is byte for byte
 * what job_report would print from the files.
 */
struct relay {
	int fd[2];          /* stdout's and stderr's read ends; -1 at EOF */
	size_t head;        /* stdout bytes passed on as they come */
	size_t tail;        /* --keep-tail: the newest bytes kept after them */
	char *ring;         /* the byte at offset o sits at (o - head) % tail */
	long long size;     /* all of stdout */
	long long lines;    /* its newlines (--keep-tail only) */
	bool lines_wanted;
	bool copy;          /* splice failed once: read and write from then on */
	bool broken;        /* our stdout is gone: the caller has left */
	struct sg_buf err;  /* stderr's head */
};

/* Pass n bytes on to stdout; a failure means no one is listening any more. */
static void relay_put(struct relay *r, const char *p, size_t n)
{
	if (!r->broken && n && sg_write_all(1, p, n))
		r->broken = true;
}

/* Bytes of stdout at offset r->size: the head, the ring, or nowhere. */
static void relay_take(struct relay *r, const char *p, size_t n)
{
	size_t k = 0;

	if (r->lines_wanted)
		for (const char *q = p, *e = p + n; (q = memchr(q, '\n', (size_t)(e - q))); q++)
			r->lines++;
	if ((unsigned long long)r->size < r->head) {
		k = r->head - (size_t)r->size < n ? r->head - (size_t)r->size : n;
		relay_put(r, p, k);
	}
	/* Only the last `tail` bytes of what is left can matter. */
	if (r->ring && n - k > r->tail)
		k = n - r->tail;
	for (size_t i = k; r->ring && i < n;) {
		size_t at = (size_t)(((unsigned long long)r->size + i - r->head) % r->tail);
		size_t run = r->tail - at < n - i ? r->tail - at : n - i;

		memcpy(r->ring + at, p + i, run);
		i += run;
	}
	r->size += (long long)n;
}

/* One readable pipe: false at its EOF. */
static bool relay_read(struct relay *r, int which)
{
	char buf[JOB_CHUNK];
	ssize_t n;

	if (which == 0 && !r->copy && !r->broken && !r->lines_wanted &&
	    (unsigned long long)r->size < r->head) {
		/* The head, straight from pipe to stdout. */
		size_t want = r->head - (size_t)r->size;

		n = splice(r->fd[0], NULL, 1, NULL, want < JOB_CHUNK ? want : JOB_CHUNK, 0);
		if (n > 0) {
			r->size += n;
			return true;
		}
		if (n == 0)
			return false;
		if (errno == EINTR || errno == EAGAIN)
			return true;
		if (errno == EPIPE)
			r->broken = true;
		r->copy = true; /* stdout takes no splice: a file in append mode, a tty */
	}
	n = read(r->fd[which], buf, sizeof(buf));
	if (n < 0)
		return errno == EINTR || errno == EAGAIN;
	if (n == 0)
		return false;
	if (which == 0)
		relay_take(r, buf, (size_t)n);
	else
		(void)sg_buf_add_clipped(&r->err, buf, (size_t)n);
	return true;
}

/* Poll the open pipes (and sfd, unless -1) for at most ms; relay what came. */
static void relay_poll(struct relay *r, int sfd, int ms)
{
	struct pollfd p[3];
	nfds_t n = 0;

	for (int i = 0; i < 2; i++)
		if (r->fd[i] >= 0)
			p[n++] = (struct pollfd){ .fd = r->fd[i], .events = POLLIN };
	if (sfd >= 0)
		p[n++] = (struct pollfd){ .fd = sfd, .events = POLLIN };
	if (poll(p, n, ms) <= 0)
		return;
	for (nfds_t k = 0; k < n; k++) {
		int which = p[k].fd == r->fd[0] ? 0 : p[k].fd == r->fd[1] ? 1 : -1;

		if (which < 0 || !p[k].revents)
			continue;
		if (!relay_read(r, which)) {
			close(r->fd[which]);
			r->fd[which] = -1;
		}
	}
}

/* Kill the group pid leads, or pid alone when it has not made it yet. */
static void job_kill_group(pid_t pid)
{
	if (kill(-pid, SIGKILL) != 0)
		kill(pid, SIGKILL);
}

/* Milliseconds from now until t (CLOCK_MONOTONIC), at least 0. */
static int64_t job_ms_until(const struct timespec *t)
{
	struct timespec now;
	int64_t ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (int64_t)(t->tv_sec - now.tv_sec) * 1000 + (t->tv_nsec - now.tv_nsec) / 1000000;
	return ms > 0 ? ms : 0;
}

/*
 * Pipes still open after the group was killed are held by something that
 * left it (setsid): a drainer of its own, in a session of its own, reads
 * them to their end, so the reply need not wait and that process is not
 * killed by SIGPIPE for writing to a closed pipe.  What it writes then
 * would have been written after the result anyway: it is dropped.
 */
static void relay_hand_off(struct relay *r)
{
	pid_t pid;

	if (r->fd[0] < 0 && r->fd[1] < 0)
		return;
	pid = fork();
	if (pid == 0) {
		char buf[JOB_CHUNK];
		struct pollfd p[2];
		nfds_t n = 0;
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		setsid();
		/* Our stdout must see its end (sshd waits for it): only the pipes stay. */
		if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
			_exit(0);
		for (int fd = 3; fd < SG_CLOSE_FDS_MAX; fd++)
			if (fd != r->fd[0] && fd != r->fd[1])
				close(fd);
		for (int i = 0; i < 2; i++)
			if (r->fd[i] >= 0)
				p[n++] = (struct pollfd){ .fd = r->fd[i], .events = POLLIN };
		while (n > 0 && poll(p, n, -1) >= 0) {
			for (nfds_t k = 0; k < n; k++) {
				if (p[k].revents && read(p[k].fd, buf, sizeof(buf)) == 0) {
					p[k] = p[--n];
					break;
				}
			}
		}
		_exit(0);
	}
	for (int i = 0; i < 2; i++) {
		if (r->fd[i] >= 0)
			close(r->fd[i]);
		r->fd[i] = -1;
	}
}

/* The trailer and stderr's head, after stdout's head and tail. */
static void relay_report(const struct job *j, struct relay *r, int st, bool timed_out)
{
	char line[3 * JOB_LINE + 256];
	int len;

	if (r->ring && (unsigned long long)r->size > r->head) {
		size_t kept = (unsigned long long)r->size - r->head < r->tail
				      ? (size_t)((unsigned long long)r->size - r->head) : r->tail;
		size_t at = (size_t)(((unsigned long long)r->size - kept - r->head) % r->tail);
		size_t first = r->tail - at < kept ? r->tail - at : kept;

		relay_put(r, r->ring + at, first);
		relay_put(r, r->ring, kept - first);
	}
	if (timed_out || !WIFEXITED(st)) {
		int sig = timed_out ? SIGKILL : WTERMSIG(st);

		len = snprintf(line, sizeof(line), "\n%s " SG_JOB_DONE " %d|signal %d|%s|%lld",
			       j->mark, 128 + sig, sig, timed_out ? "1" : "", r->size);
	} else {
		len = snprintf(line, sizeof(line), "\n%s " SG_JOB_DONE " %d|exit %d||%lld",
			       j->mark, WEXITSTATUS(st), WEXITSTATUS(st), r->size);
	}
	if (len > 0 && (unsigned long long)r->size > j->max_out && j->keep_tail)
		len += snprintf(line + len, sizeof(line) - (size_t)len, "|%lld", r->lines);
	if (len > 0 && (size_t)len + 1 < sizeof(line))
		line[len++] = '\n';
	if (len > 0 && (size_t)len < sizeof(line))
		relay_put(r, line, (size_t)len);
	relay_put(r, r->err.p, r->err.len);
}

/*
 * The first deadline of a --rm job: --timeout-ms, and a --wait-ms that is
 * not 0 (no one could attach later), whichever comes first.
 */
static int64_t relay_limit(const struct job *j)
{
	int64_t limit = INT64_MAX / 4; /* none */

	if (j->wait_ms > 0 && j->wait_ms < limit)
		limit = j->wait_ms;
	if (j->timeout_ms > 0 && j->timeout_ms < limit)
		limit = j->timeout_ms;
	return limit;
}

/*
 * Make the pipes, the ring and the signalfd, then fork the command in a
 * session of its own.  The command's pid, or -1 with the failure reported
 * into *rc.  in is closed either way; what stays open (r's read ends, or
 * the pipes on a failure, and *sfd) is the caller's to close.
 */
static pid_t relay_spawn(const struct job *j, struct relay *r, int in, char **envp,
			 char *const *argv, int outp[2], int errp[2], int *sfd, int *rc)
{
	sigset_t sigs;
	pid_t cmd;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGCHLD);
	sigaddset(&sigs, SIGHUP);
	if ((r->tail && !(r->ring = malloc(r->tail))) || pipe2(outp, O_CLOEXEC) != 0 ||
	    (!j->merge && pipe2(errp, O_CLOEXEC) != 0) ||
	    (*sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
		close(in);
		*rc = job_fail(j, "cannot make the command's pipes: %s", strerror(errno));
		return -1;
	}
	/* A reader that has left must not kill us before the group is killed. */
	signal(SIGPIPE, SIG_IGN);
	cmd = fork();
	if (cmd == 0) {
		setsid();
		job_exec(j, in, outp[1], j->merge ? outp[1] : errp[1], envp, argv);
	}
	close(in);
	close(outp[1]);
	outp[1] = -1;
	if (errp[1] >= 0)
		close(errp[1]);
	errp[1] = -1;
	if (cmd < 0) {
		*rc = job_fail(j, "cannot fork: %s", strerror(errno));
		return -1;
	}
	r->fd[0] = outp[0];
	r->fd[1] = errp[0];
	outp[0] = errp[0] = -1;
	return cmd;
}

/*
 * Relay the command's output until it ends (not yet reaped), killing its
 * group once at limit.  False when no one is left to hear the result: the
 * group is then killed and reaped and .cancel written, and nothing is
 * reported.
 */
static bool relay_wait(const struct job *j, struct relay *r, int sfd, pid_t cmd,
		       int64_t limit, bool *timed_out)
{
	struct timespec end = sg_time_after(CLOCK_MONOTONIC, limit);
	bool ended = false;
	siginfo_t si;

	while (!ended) {
		struct signalfd_siginfo ssi;
		int64_t left = job_ms_until(&end);

		relay_poll(r, sfd, *timed_out || left > 1000000 ? 1000000 : (int)left);
		while (read(sfd, &ssi, sizeof(ssi)) == (ssize_t)sizeof(ssi))
			if (ssi.ssi_signo == SIGHUP)
				job_orphaned = true;
		if (job_orphaned || r->broken) {
			/* Nobody is left to hear the result: nothing may outlive it. */
			job_put(j, ".cancel", "1\n");
			job_kill_group(cmd);
			waitpid(cmd, NULL, 0);
			return false;
		}
		/* Ended, not yet reaped: its group id cannot be reused meanwhile. */
		si.si_pid = 0;
		ended = waitid(P_PID, (id_t)cmd, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
			si.si_pid == cmd;
		if (!ended && !*timed_out && job_ms_until(&end) == 0) {
			*timed_out = true;
			job_kill_group(cmd);
		}
	}
	return true;
}

/*
 * The ended command: kill what it left in its group, reap it, relay the
 * rest of the output (until EOF or the drain's end), report and remove
 * the job's files.
 */
static void relay_end(const struct job *j, struct relay *r, pid_t cmd, bool timed_out)
{
	struct timespec end;
	int st = 0;

	job_kill_group(cmd);
	waitpid(cmd, &st, 0);
	end = sg_time_after(CLOCK_MONOTONIC, JOB_DRAIN_MS);
	while ((r->fd[0] >= 0 || r->fd[1] >= 0) && job_ms_until(&end) > 0)
		relay_poll(r, -1, (int)job_ms_until(&end));
	relay_hand_off(r);
	relay_report(j, r, st, timed_out);
	job_remove(j);
}

/*
 * Run a --rm job's command under this process, its output through pipes:
 * one fork and the command's exec, nothing in files but .s (taken by the
 * start) and .pid (for `job --kill`).  The command leads a session of its
 * own; when it ends, what it left in its group is killed (no --detach
 * here).  --timeout-ms, and a --wait-ms that is not 0 (no one could attach
 * later), kill the group and report a timeout.
 */
static int job_relay(const struct job *j, int in, char **envp, char *const *argv)
{
	struct relay r = {
		.fd = { -1, -1 },
		.err = SG_BUF_INIT(j->max_err),
		.lines_wanted = j->keep_tail,
		.head = j->keep_tail ? j->max_out - j->max_out / 2 : j->max_out,
		.tail = j->keep_tail ? j->max_out / 2 : 0,
	};
	int outp[2] = { -1, -1 }, errp[2] = { -1, -1 }, sfd = -1, rc = 0;
	bool timed_out = false;
	pid_t cmd;

	cmd = relay_spawn(j, &r, in, envp, argv, outp, errp, &sfd, &rc);
	if (cmd < 0)
		goto out;
	job_put(j, ".pid", "%d\n", (int)cmd);
	if (job_exists(j, ".cancel"))
		job_kill_group(cmd);
	if (relay_wait(j, &r, sfd, cmd, relay_limit(j), &timed_out))
		relay_end(j, &r, cmd, timed_out);
out:
	for (int i = 0; i < 2; i++) {
		if (r.fd[i] >= 0)
			close(r.fd[i]);
		if (outp[i] >= 0)
			close(outp[i]);
		if (errp[i] >= 0)
			close(errp[i]);
	}
	if (sfd >= 0)
		close(sfd);
	free(r.ring);
	sg_buf_release(&r.err);
	return rc;
}

/*
 * A detaching job whose command is this program's `proc spawn` runs it in
 * its own process (job_inline) instead of under a runner: the spawn
 * already leaves its command to a supervisor of its own session, so the
 * runner would only wait.  That saves the runner and the command's fork,
 * two of the tasks every bash call started.  Its state, for the hook the
 * spawn's wait calls (sg_helper_overdue):
 */
static const struct job *job_inline_job;
static int job_inline_reply = -1; /* the request's stdout, -1 once detached */
static int64_t job_inline_end;    /* --timeout-ms's end (sg_now_ns), or 0 */
static bool job_released;         /* --linger: the result went out; supervising on */

/* sg_now_ns() ms from now, saturated far beyond any wait. */
static int64_t job_ns_after(int64_t ms)
{
	return ms < INT64_MAX / 4000000 ? sg_now_ns() + ms * 1000000 : INT64_MAX / 4;
}

/* Whether argv is `<this program> proc spawn`. */
static bool job_inline_ok(const struct job *j, char *const *argv)
{
	return j->self && j->detach && argv[1] && argv[2] && strcmp(argv[1], "proc") == 0 &&
	       strcmp(argv[2], "spawn") == 0;
}

/* Keep the result in memory (a --rm job's inline spawn); off when it cannot. */
static void job_mem_begin(const struct job *j)
{
	job_mem.fd[0] = memfd_create("sg-job.o", MFD_CLOEXEC);
	job_mem.fd[1] = j->merge ? -1 : memfd_create("sg-job.e", MFD_CLOEXEC);
	job_mem.on = job_mem.fd[0] >= 0 && (j->merge || job_mem.fd[1] >= 0);
}

/* Write the result kept in memory to the job's files, .x last. */
static void job_mem_flush(const struct job *j)
{
	char buf[JOB_CHUNK];
	ssize_t got;

	job_mem.on = false;
	for (int k = 0; k < 2; k++) {
		int out = job_mem.fd[k] < 0 ? -1
					    : job_open(j, job_mem_names[k], O_WRONLY | O_CREAT | O_TRUNC);

		for (off_t off = 0; out >= 0 && (got = pread(job_mem.fd[k], buf, sizeof(buf), off)) > 0;
		     off += got)
			if (sg_write_all(out, buf, (size_t)got))
				break;
		if (out >= 0)
			close(out);
	}
	for (int k = 2; k < 5; k++) {
		char line[JOB_LINE];

		/* A copy: job_write never reads what it may write (-Wrestrict). */
		snprintf(line, sizeof(line), "%s", job_mem.line[k - 2]);
		if (line[0])
			job_write(j, job_mem_names[k], line, strlen(line));
	}
}

/*
 * Hand the result on: on the request's stdout, or to the files an attach
 * reads once the request answered "pending".  Nothing goes to either
 * afterwards.  on: this process lives on (--linger), so "<mark> end"
 * tells the adapter to stop reading; one that exits ends the request by
 * its exit, and the provider's connection stays whole for the next.
 */
static void job_release(const struct job *j, bool on)
{
	int null;

	if (job_released)
		return;
	job_released = true;
	if (job_inline_reply < 0 && job_mem.on)
		job_mem_flush(j);
	if (job_inline_reply >= 0 && dup2(job_inline_reply, 1) >= 0) {
		job_report(j);
		if (j->linger && on)
			job_say(j, SG_JOB_END);
		if (j->rm)
			job_remove(j);
	}
	/* The request's pipe closes here, whoever supervises on. */
	null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 1);
		dup2(null, 2);
		close(null);
	}
	if (job_inline_reply >= 0)
		close(job_inline_reply);
	job_inline_reply = -1;
	sg_helper_due = 0;
}

/* Report on the request's stdout (unless detached: an attach will), and end. */
static void job_inline_exit(const struct job *j)
{
	job_release(j, false);
	_exit(0);
}

/*
 * --linger: the spawn's reply, which helper_main would have printed, from
 * the process that goes on supervising its command (proc.c).
 */
static void job_answer(const char *reply, size_t n, bool on)
{
	const struct job *j = job_inline_job;

	if (job_released)
		return;
	(void)(sg_write_all(1, reply, n) || sg_write_all(1, "\n", 1));
	job_put(j, ".st", "exit 0\n");
	job_put(j, ".x", "0\n");
	job_release(j, on);
}

/*
 * The spawn's wait reached sg_helper_due.  At --timeout-ms the command
 * ends as a runner's would at its timeout: recorded as killed (the spawn's
 * own supervisor, in a session of its own, lives on, as it did).  At
 * --wait-ms the request answers "pending" and a child in a session of its
 * own goes on waiting, as the runner would have: the fork is made only
 * for a spawn that outlasts one request.
 */
static void job_overdue(void)
{
	const struct job *j = job_inline_job;
	pid_t pid;

	if (job_inline_end && sg_now_ns() >= job_inline_end) {
		job_put(j, ".to", "1\n");
		job_put(j, ".st", "signal 9\n");
		job_put(j, ".x", "137\n");
		if (!j->linger)
			job_inline_exit(j);
		/* The supervisor is this process: it lives on, as it did. */
		job_release(j, true);
		return;
	}
	sg_helper_due = job_inline_end;
	if (job_inline_reply < 0)
		return;
	if (j->linger) {
		/* The adapter ends the request at "end"; this process goes on. */
		dprintf(job_inline_reply, "\n%s %s\n\n%s %s\n", j->mark, SG_JOB_PENDING, j->mark,
			SG_JOB_END);
		close(job_inline_reply);
		job_inline_reply = -1;
		return;
	}
	pid = fork();
	if (pid > 0) {
		/* Named before the answer: an attach must never find the pid of
		 * a job that ended without writing .x. */
		job_put(j, ".pid", "%d\n", (int)pid);
		dprintf(job_inline_reply, "\n%s %s\n", j->mark, SG_JOB_PENDING);
		_exit(0);
	}
	if (pid < 0)
		return; /* waited here, in the request, until the end */
	/* The request's end must neither wait for us nor take us along. */
	setsid();
	close(job_inline_reply);
	job_inline_reply = -1;
}

/*
 * Run `proc spawn` in this process, its stdin, stdout and stderr those a
 * runner's command would have had (in, the job's .o and .e), the result
 * in .st and .x as a runner writes them.  .pid names this process until
 * it detaches, so `job --kill` ends the spawn here as it ended the runner
 * and the spawn with it.
 */
static int job_inline(const struct job *j, int in, int out, int err, char **envp,
		      char *const *argv)
{
	static const int dfl[] = { SIGINT, SIGQUIT, SIGPIPE };
	int argc = 0, rc;
	sigset_t none;

	job_inline_reply = fcntl(1, F_DUPFD_CLOEXEC, 3);
	if (job_inline_reply < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
		return job_fail(j, "cannot pass on the command's descriptors: %s", strerror(errno));
	close(in);
	close(out);
	close(err);
	/* A lingering job may supervise its command: --kill then asks (job_kill). */
	job_put(j, ".pid", "%d%s\n", (int)getpid(), j->linger ? " " JOB_LINGERS : "");
	if (job_orphaned || job_exists(j, ".cancel")) {
		job_put(j, ".st", "signal 9\n");
		job_put(j, ".x", "137\n");
		job_inline_exit(j);
	}
	/* The namespaces are this process's now, and so the spawn's. */
	if (!job_confine(j, 2)) {
		job_put(j, ".st", "exit 127\n");
		job_put(j, ".x", "127\n");
		job_inline_exit(j);
	}
	job_inline_job = j;
	job_inline_end = j->timeout_ms > 0 ? job_ns_after(j->timeout_ms) : 0;
	sg_helper_due = job_ns_after(j->wait_ms);
	if (job_inline_end && job_inline_end < sg_helper_due)
		sg_helper_due = job_inline_end;
	sg_helper_overdue = job_overdue;
	if (j->linger)
		sg_helper_answer = job_answer;
	/* As job_exec leaves them for a command; the spawn's supervisor inherits them. */
	for (size_t i = 0; i < sizeof(dfl) / sizeof(dfl[0]); i++)
		signal(dfl[i], SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	environ = envp;
	while (argv[argc])
		argc++;
	rc = sg_helper_self(argc, (char **)argv);
	fflush(NULL);
	sg_helper_due = 0;
	job_put(j, ".st", "exit %d\n", rc);
	job_put(j, ".x", "%d\n", rc);
	job_inline_exit(j);
	return 0;
}

/* Whether prog names this very program (see sg_helper_self). */
static bool job_is_self(const char *prog)
{
	struct stat a, b;

	return sg_helper_self && strchr(prog, '/') && stat(prog, &a) == 0 &&
	       stat("/proc/self/exe", &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Start the command; then wait for it as an attach would. */
static int job_start(const struct job *j, const char *cwd, const char *stdin_vars,
		     const char *stdin_file, bool spec_stdin, char **envp, char *const *argv)
{
	int in = -1, out = -1, err = -1, st;
	pid_t runner;

	/* In a mount namespace cwd exists only once the child is inside. */
	if (cwd && !j->bind && chdir(cwd) != 0)
		return job_fail(j, "cannot enter the directory %s", cwd);
	if (spec_stdin && !stdin_vars && !stdin_file) {
		in = fcntl(0, F_DUPFD_CLOEXEC, 3);
		if (in < 0)
			return job_fail(j, "cannot pass on stdin: %s", strerror(errno));
	} else if (stdin_vars) {
		in = job_stdin_vars(j, stdin_vars);
		if (in < 0)
			return job_fail(j, "cannot stage the command's stdin in %s.in", j->dir);
	} else {
		in = open(stdin_file ? stdin_file : "/dev/null", O_RDONLY | O_CLOEXEC);
		if (in < 0)
			return job_fail(j, "cannot open the command's stdin %s",
					stdin_file ? stdin_file : "/dev/null");
	}
	if (j->rm && !j->detach)
		return job_relay(j, in, envp, argv);
	if (j->rm && job_inline_ok(j, argv))
		job_mem_begin(j);
	out = job_open(j, ".o", O_WRONLY | O_CREAT | O_TRUNC);
	err = j->merge ? fcntl(out, F_DUPFD_CLOEXEC, 0) : job_open(j, ".e", O_WRONLY | O_CREAT | O_TRUNC);
	if (out < 0 || err < 0) {
		close(in);
		if (out >= 0)
			close(out);
		if (err >= 0)
			close(err);
		return job_fail(j, "cannot create the command's output files %s.o", j->dir);
	}
	if (job_inline_ok(j, argv))
		return job_inline(j, in, out, err, envp, argv);
	runner = fork();
	if (runner == 0)
		job_runner(j, in, out, err, envp, argv);
	close(in);
	close(out);
	close(err);
	if (runner < 0)
		return job_fail(j, "cannot fork: %s", strerror(errno));
	job_put(j, ".pid", "%d\n", (int)runner);
	if (job_exists(j, ".cancel") && kill(-runner, SIGKILL) != 0)
		kill(runner, SIGKILL);
	if (job_wait(runner, j->wait_ms, &st) || job_exists(j, ".x")) {
		job_report(j);
		if (j->rm)
			job_remove(j);
		return 0;
	}
	if (job_orphaned) {
		/* Nobody is left to hear the result: nothing may outlive it. */
		job_put(j, ".cancel", "1\n");
		if (kill(-runner, SIGKILL) != 0)
			kill(runner, SIGKILL);
		return 0;
	}
	return job_say(j, SG_JOB_PENDING);
}

/*
 * --kill: the job of this prefix never starts (.s taken), or its group is
 * killed; .x is filled for whoever attaches.
 */
static int job_kill(const struct job *j)
{
	char line[JOB_LINE], *word;
	int fd = job_open(j, ".s", O_WRONLY | O_CREAT);
	pid_t runner;

	if (fd >= 0)
		close(fd);
	job_put(j, ".cancel", "1\n");
	job_get(j, ".pid", line, sizeof(line));
	runner = (pid_t)strtol(line, &word, 10);
	/*
	 * A lingering job that supervises its command is asked: it stops the
	 * command's group and whatever escaped it, and records the stop, as
	 * the supervisor it replaced did; before it started one, SIGTERM
	 * kills it as SIGKILL would.
	 */
	if (runner > 1 && strcmp(word, " " JOB_LINGERS) == 0)
		kill(runner, SIGTERM);
	else if (runner > 1 && kill(-runner, SIGKILL) != 0)
		kill(runner, SIGKILL);
	job_get(j, ".x", line, sizeof(line));
	if (!line[0])
		job_put(j, ".x", "137\n");
	return 0;
}

/*
 * --spec-stdin: "<n>\n" and n bytes of NUL-terminated words from fd 0,
 * read exactly (the rest of stdin is the command's).  The words into
 * *words (new array over *text, new), their count into *nwords.
 */
static bool job_read_spec(char **text, char ***words, int *nwords)
{
	char c, num[24];
	size_t n = 0, got = 0, len = 0;
	int count = 0;

	*text = NULL;
	*words = NULL;
	while (len < sizeof(num) - 1) {
		ssize_t r = read(0, &c, 1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r != 1)
			return false;
		if (c == '\n')
			break;
		if (c < '0' || c > '9')
			return false;
		num[len++] = c;
	}
	num[len] = '\0';
	if (len == 0 || len >= sizeof(num) - 1)
		return false;
	n = (size_t)strtoull(num, NULL, 10);
	if (n == 0 || n > SG_JOB_SPEC_MAX || !(*text = malloc(n)))
		return false;
	while (got < n) {
		ssize_t r = read(0, *text + got, n - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		got += (size_t)r;
	}
	if ((*text)[n - 1] != '\0')
		return false;
	for (size_t i = 0; i < n; i++)
		count += (*text)[i] == '\0';
	*words = calloc((size_t)count + 1, sizeof(**words));
	if (!*words)
		return false;
	count = 0;
	for (size_t i = 0; i < n; i += strlen(*text + i) + 1)
		(*words)[count++] = *text + i;
	*nwords = count;
	return true;
}

/* Wait for a job started by an earlier request. */
static int job_attach(const struct job *j)
{
	struct timespec nap = { 0, JOB_POLL_MS * 1000000L };
	char line[JOB_LINE];
	int64_t waited = 0;
	pid_t runner = 0;

	if (!job_exists(j, ".s"))
		return job_say(j, "missing");
	for (;;) {
		job_get(j, ".x", line, sizeof(line));
		if (line[0])
			return job_report(j);
		if (!runner) {
			job_get(j, ".pid", line, sizeof(line));
			runner = (pid_t)strtol(line, NULL, 10);
		}
		/* A runner killed from outside never writes .x. */
		if (runner > 0 && kill(runner, 0) != 0 && errno == ESRCH)
			return job_report(j);
		if (waited >= j->wait_ms)
			return job_say(j, "pending");
		nanosleep(&nap, NULL);
		waited += JOB_POLL_MS;
	}
}

/*
 * The options of a job that starts or attaches, after --dir, into j, and
 * --gc and --spec-stdin into *gc and *spec_stdin; they are asked in the
 * order the usage names them, so the first bad one is the one reported.
 * False when one is missing or wrong (e says why when it can).
 */
static bool job_options(struct sg_args *a, struct job *j, const char **gc, bool *spec_stdin,
			struct sg_errinfo *e)
{
	int64_t max_out, max_err;

	if (!(j->mark = sg_args_str(a, "mark", NULL)) ||
	    sg_args_int(a, "wait-ms", 0, INT64_MAX / 2, &j->wait_ms, e) ||
	    sg_args_int(a, "timeout-ms", 0, INT64_MAX / 2, &j->timeout_ms, e) ||
	    sg_args_int(a, "max-out", 0, INT64_MAX / 2, &max_out, e) ||
	    sg_args_int(a, "max-err", SG_HELPER_STDERR, INT64_MAX / 2, &max_err, e))
		return false;
	*gc = sg_args_str(a, "gc", NULL); /* used only once all is checked */
	j->max_out = (size_t)max_out;
	j->max_err = (size_t)max_err;
	j->merge = sg_args_flag(a, "merge");
	j->detach = sg_args_flag(a, "detach");
	j->keep_tail = sg_args_flag(a, "keep-tail");
	j->tie = sg_args_flag(a, "tie");
	j->rm = sg_args_flag(a, "rm");
	j->linger = sg_args_flag(a, "linger") && !j->tie;
	j->netns = sg_args_flag(a, "netns");
	j->bind = sg_args_str(a, "bind", NULL);
	j->bind_to = sg_args_str(a, "bind-to", NULL);
	j->tmp = sg_args_str(a, "tmp", NULL);
	j->cgroups = sg_args_str(a, "cgroups", NULL);
	*spec_stdin = sg_args_flag(a, "spec-stdin");
	if (!j->bind != !j->bind_to || (j->bind && (j->bind[0] != '/' || j->bind_to[0] != '/'))) {
		sg_err_set(e, SG_E_INVALID_ARGUMENT,
			   "--bind and --bind-to go together, as absolute paths");
		return false;
	}
	if (j->tmp && (!j->bind || j->tmp[0] != '/')) {
		sg_err_set(e, SG_E_INVALID_ARGUMENT, "--tmp goes with --bind, as an absolute path");
		return false;
	}
	return true;
}

/*
 * SIGCHLD at its default (a caller that ignores it would make every
 * child vanish unwaited) and blocked, so that waits can sleep on it
 * (job_wait); SIGHUP blocked too, as a tied job's parent-death signal.
 */
static void job_signals(const struct job *j)
{
	sigset_t chld;

	signal(SIGCHLD, SIG_DFL);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigaddset(&chld, SIGHUP);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	if (j->tie) {
		/* Already orphaned (the connection went before we got here)? */
		if (prctl(PR_SET_PDEATHSIG, SIGHUP) != 0 || getppid() == 1)
			job_orphaned = true;
	}
}

/*
 * The rest: NAME=VALUE... -- ARGV..., on the line or, with spec_stdin, on
 * stdin (its text into *spec and its words into *words, new).  The
 * environment into *envp (a new array of borrowed words), the command
 * into *cmd.  False when the words are not there (e says why when it can).
 */
static bool job_command(const struct sg_args *a, bool spec_stdin, char **spec, char ***words,
			char ***envp, char *const **cmd, struct sg_errinfo *e)
{
	char *const *rest = a->rest;
	int nrest = a->nrest, nenv = 0;

	if (spec_stdin) {
		if (nrest > 0 || !job_read_spec(spec, words, &nrest)) {
			sg_err_set(e, SG_E_INVALID_ARGUMENT,
				   "--spec-stdin needs \"<n>\\n\" and n bytes of NUL-terminated words on stdin, and nothing after the options");
			return false;
		}
		rest = *words;
	}
	while (nenv < nrest && strcmp(rest[nenv], "--") != 0)
		nenv++;
	if (nenv >= nrest - 1)
		return false;
	*cmd = rest + nenv + 1;
	*envp = calloc((size_t)nenv + 1, sizeof(**envp));
	if (!*envp)
		return false;
	for (int i = 0; i < nenv; i++)
		(*envp)[i] = rest[i];
	return true;
}

/*
 * Remove the finished jobs of gc, take the job's .s and start its
 * command; a request resent after an earlier copy took .s attaches to
 * that copy's job instead of starting the command twice.
 */
static int job_begin(struct job *j, const char *gc, const char *cwd, const char *in_vars,
		     const char *in_file, bool spec_stdin, char **envp, char *const *cmd)
{
	int guard;

	if (j->bind)
		j->cwd = cwd;
	job_collect(gc);
	guard = job_open(j, ".s", O_WRONLY | O_CREAT | O_EXCL);
	if (guard < 0)
		return job_attach(j);
	close(guard);
	j->self = job_is_self(cmd[0]);
	return job_start(j, cwd, in_vars, in_file, spec_stdin, envp, cmd);
}

int sg_helper_job(int argc, char *const *argv)
{
	struct sg_errinfo e = { 0 };
	struct sg_args a;
	struct job j = { 0 };
	char **envp = NULL, *spec = NULL, **words = NULL;
	char *const *cmd = NULL;
	const char *gc, *cwd, *in_vars, *in_file;
	int rc = 126;
	bool spec_stdin;

	if (sg_args_parse(&a, argc - 1, argv + 1,
			  "attach merge detach keep-tail tie spec-stdin netns kill rm linger", &e) ||
	    !(j.dir = sg_args_str(&a, "dir", NULL)))
		goto usage;
	if (j.dir[0] != '/') {
		sg_err_set(&e, SG_E_INVALID_ARGUMENT, "--dir must be an absolute prefix");
		goto usage;
	}
	if (sg_args_flag(&a, "kill")) {
		if (sg_args_unused(&a, &e))
			goto usage;
		rc = job_kill(&j);
		goto out;
	}
	if (!job_options(&a, &j, &gc, &spec_stdin, &e))
		goto usage;
	job_signals(&j);
	if (sg_args_flag(&a, "attach")) {
		if (sg_args_unused(&a, &e))
			goto usage;
		job_collect(gc);
		rc = job_attach(&j);
		goto out;
	}
	if (!job_command(&a, spec_stdin, &spec, &words, &envp, &cmd, &e))
		goto usage;
	cwd = sg_args_str(&a, "cwd", NULL);
	in_vars = sg_args_str(&a, "stdin-env", NULL);
	in_file = sg_args_str(&a, "stdin-file", NULL);
	if (sg_args_unused(&a, &e))
		goto usage;
	if (in_vars && in_file) {
		sg_err_set(&e, SG_E_INVALID_ARGUMENT, "--stdin-env and --stdin-file exclude each other");
		goto usage;
	}
	rc = job_begin(&j, gc, cwd, in_vars, in_file, spec_stdin, envp, cmd);
	goto out;
usage:
	dprintf(2, "sg-helper: %s\nusage: job --dir PREFIX --mark WORD --wait-ms N "
		   "--max-out N [--max-err N] [--attach] [--cwd DIR] [--timeout-ms N] "
		   "[--merge] [--keep-tail] [--detach] [--tie] [--rm] [--linger] [--bind SRC --bind-to DST [--tmp DIR]] [--netns] "
		   "[--cgroups FILES] [--stdin-env VAR[,VAR...] | --stdin-file F] [--gc PREFIXES] "
		   "{--spec-stdin | -- NAME=VALUE... -- ARGV...}\n"
		   "       job --dir PREFIX --kill\n",
		e.msg[0] ? e.msg : "bad arguments");
out:
	free(envp);
	free(words);
	free(spec);
	return rc;
}
