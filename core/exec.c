/*
 * exec.c - child processes on this host: posix_spawn, a pidfd, one poll loop.
 *
 * One call is one child.  Everything the child needs is prepared before
 * posix_spawn (argv[0] resolved against the PATH in envp, pipes, file
 * actions), so nothing runs between fork and exec but glibc's own spawn
 * code.  The parent then polls, in one loop, the stdin pipe it feeds, the
 * stdout and stderr pipes it drains, a pidfd that becomes readable when the
 * child exits, the cancel token's eventfd and the deadlines (timeout, the
 * SIGKILL that follows term_signal, the drain that follows the exit).
 */

/*
 * _GNU_SOURCE: posix_spawn_file_actions_addchdir_np and _addclosefrom_np,
 * pipe2, the GNU strerror_r and syscall(SYS_pidfd_open) are GNU/Linux APIs.
 */
#define _GNU_SOURCE
#include "core/exec.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/limits.h"
#include "base/utf8.h"

/*
 * How long the pipes are still read after the child exited.  A daemon the
 * child left behind may hold them open for ever; what it writes after this
 * is not the command's output.  (A limit: it belongs in limits.h, and the
 * guard lets it move there.)
 */

/* Without a pidfd (kernels before 5.3) the exit is polled this often. */
#define EXEC_REAP_POLL_MS 10

/* One read from a pipe; the kernel's default pipe holds 64 KiB. */
#define EXEC_CHUNK (32 * SG_KiB)

/* Used when envp has no PATH, as confstr(_CS_PATH) would say. */
#define EXEC_DEFAULT_PATH "/usr/bin:/bin"

void sg_exec_result_init(struct sg_exec_result *r, size_t max_output)
{
	sg_buf_init(&r->out, max_output);
	sg_buf_init(&r->err, SG_HELPER_STDERR);
	sg_buf_init(&r->tail, max_output / 2);
	r->keep_tail = false;
	sg_exec_result_reset(r);
}

void sg_exec_result_reset(struct sg_exec_result *r)
{
	r->exit_code = -1;
	r->signal = 0;
	r->timed_out = false;
	r->stalled = false;
	r->truncated = false;
	r->duration_ms = 0;
	sg_buf_reset(&r->out);
	sg_buf_reset(&r->err);
	sg_buf_reset(&r->tail);
	r->total = r->lines = 0;
	r->ring_pos = 0;
}

void sg_exec_result_release(struct sg_exec_result *r)
{
	sg_buf_release(&r->out);
	sg_buf_release(&r->err);
	sg_buf_release(&r->tail);
}

static uint64_t newlines(const char *p, size_t n)
{
	uint64_t k = 0;

	for (const char *e = p + n; (p = memchr(p, '\n', (size_t)(e - p))) != NULL; p++)
		k++;
	return k;
}

void sg_exec_capture(struct sg_exec_result *r, const char *p, size_t n)
{
	size_t room = r->out.max - r->out.len, head = n < room ? n : room;
	size_t cap = r->tail.max;

	r->total += n;
	r->lines += newlines(p, n);
	if (head && sg_buf_add(&r->out, p, head))
		head = 0;
	p += head;
	n -= head;
	if (!n)
		return;
	r->truncated = true;
	if (!r->keep_tail || cap == 0)
		return;
	/* The ring: tail.len grows to cap, then ring_pos wraps around it. */
	if (n >= cap) {
		p += n - cap;
		n = cap;
	}
	while (n) {
		size_t at = r->tail.len < cap ? r->tail.len : r->ring_pos;
		size_t k = cap - at < n ? cap - at : n;
		char *dst;

		if (r->tail.len < cap) {
			if (sg_buf_reserve(&r->tail, k, &dst))
				return;
			memcpy(dst, p, k);
			sg_buf_commit(&r->tail, k);
		} else {
			memcpy(r->tail.p + at, p, k);
		}
		r->ring_pos = (at + k) % cap;
		p += k;
		n -= k;
	}
}

void sg_exec_capture_end(struct sg_exec_result *r)
{
	size_t pos = r->ring_pos, n = r->tail.len;
	char *tmp;

	r->ring_pos = 0;
	if (n < r->tail.max || pos == 0 || !(tmp = malloc(n)))
		return;
	/* Oldest first: [pos, n) then [0, pos). */
	memcpy(tmp, r->tail.p + pos, n - pos);
	memcpy(tmp + n - pos, r->tail.p, pos);
	memcpy(r->tail.p, tmp, n);
	free(tmp);
}

sg_err sg_exec_text(const struct sg_exec_result *r, struct sg_buf *text)
{
	size_t head, skip = 0, tn = r->tail.len;
	const char *t = r->tail.p, *nl;
	uint64_t gone_bytes, gone_lines;

	if (!r->truncated || !r->keep_tail || !tn)
		return sg_buf_add(text, r->out.p, r->out.len);
	head = sg_utf8_clip(r->out.p, r->out.len, r->tail.max);
	/* End the head at a line end in its last quarter, if there is one. */
	nl = head ? memrchr(r->out.p, '\n', head) : NULL;
	if (nl && (size_t)(nl + 1 - r->out.p) >= head - head / 4)
		head = (size_t)(nl + 1 - r->out.p);
	while (skip < tn && ((unsigned char)t[skip] & 0xC0) == 0x80)
		skip++;
	nl = memchr(t + skip, '\n', tn - skip);
	if (nl && (size_t)(nl - t) < tn / 4)
		skip = (size_t)(nl + 1 - t);
	gone_bytes = r->total - head - (tn - skip);
	gone_lines = r->lines - newlines(r->out.p, head) - newlines(t + skip, tn - skip);
	if (sg_buf_add(text, r->out.p, head) ||
	    sg_buf_addf(text, "%s[... output truncated: %llu bytes (%llu lines) omitted "
			"here; the first %zu and the last %zu bytes of %llu are shown ...]\n",
			head && r->out.p[head - 1] != '\n' ? "\n" : "",
			(unsigned long long)gone_bytes, (unsigned long long)gone_lines,
			head, tn - skip, (unsigned long long)r->total) ||
	    sg_buf_add(text, t + skip, tn - skip))
		return SG_E_TOO_LARGE;
	return SG_OK;
}

const char *sg_exec_signame(int sig)
{
	/*
	 * A fixed table, so the answer is a static string even for the
	 * real-time signals, and the function stays thread-safe.
	 */
	static const char *const names[] = {
		"SIG0", "SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP",
		"SIGABRT", "SIGBUS", "SIGFPE", "SIGKILL", "SIGUSR1", "SIGSEGV",
		"SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTERM", "SIGSTKFLT",
		"SIGCHLD", "SIGCONT", "SIGSTOP", "SIGTSTP", "SIGTTIN", "SIGTTOU",
		"SIGURG", "SIGXCPU", "SIGXFSZ", "SIGVTALRM", "SIGPROF",
		"SIGWINCH", "SIGIO", "SIGPWR", "SIGSYS", "SIG32", "SIG33",
		"SIG34", "SIG35", "SIG36", "SIG37", "SIG38", "SIG39", "SIG40",
		"SIG41", "SIG42", "SIG43", "SIG44", "SIG45", "SIG46", "SIG47",
		"SIG48", "SIG49", "SIG50", "SIG51", "SIG52", "SIG53", "SIG54",
		"SIG55", "SIG56", "SIG57", "SIG58", "SIG59", "SIG60", "SIG61",
		"SIG62", "SIG63", "SIG64",
	};

	if (sig < 0 || (size_t)sig >= sizeof(names) / sizeof(names[0]))
		return "SIG?";
	return names[sig];
}

/* strerror is not guaranteed thread-safe; the GNU strerror_r is. */
static const char *errtext(int e, char *buf, size_t n)
{
	return strerror_r(e, buf, n);
}

/*
 * The command could not be started: exit code 127 and a sentence on the
 * result's stderr, as a shell would report it.
 */
static void not_started(struct sg_exec_result *out, const char *what, int e)
{
	char ebuf[128], line[SG_ERR_MSG];
	int n;

	out->exit_code = 127;
	out->signal = 0;
	n = snprintf(line, sizeof(line), "%s: %s", what,
		     errtext(e, ebuf, sizeof(ebuf)));
	if (n > 0)
		sg_buf_add_clipped(&out->err, line,
				   (size_t)n < sizeof(line) ? (size_t)n
							    : sizeof(line) - 1);
}

/*
 * Resolve name the way execvp would, but against the PATH of the child's
 * environment (posix_spawnp would use ours).  Relative and empty PATH
 * entries are skipped: they would be resolved against a working directory
 * nobody chose.  A name with a slash is checked where the child will look
 * for it (under cwd when relative), so a failure is reported here with its
 * reason rather than as a bare exit status 127.  Returns 0 with the path
 * to spawn in out, or an errno value.
 */
static int find_program(const char *name, const char *const *envp,
			const char *cwd, char *out, size_t n)
{
	const char *path = NULL;
	int e, w;

	if (name[0] == '\0')
		return ENOENT;
	if (strchr(name, '/')) {
		if ((size_t)snprintf(out, n, "%s", name) >= n)
			return ENAMETOOLONG;
		if (name[0] == '/' || !cwd)
			return sg_program_check(name);
		w = snprintf(out, n, "%s/%s", cwd, name);
		if (w < 0 || (size_t)w >= n)
			return ENAMETOOLONG;
		e = sg_program_check(out);
		snprintf(out, n, "%s", name);
		return e;
	}
	for (const char *const *v = envp; v && *v; v++) {
		if (strncmp(*v, "PATH=", 5) == 0) {
			path = *v + 5;
			break;
		}
	}
	if (!path)
		path = EXEC_DEFAULT_PATH;
	return sg_program_find(name, path, out, n);
}

char *sg_exec_which(const char *name)
{
	const char *path = getenv("PATH");
	char out[SG_PATH_MAX];

	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	return sg_program_find(name, path, out, sizeof(out)) == 0 ? strdup(out) : NULL;
}

/*
 * Keep the child's ends of the pipes off 0, 1 and 2, so that the dup2
 * file actions can never overwrite one another (possible only when this
 * process runs with a standard descriptor closed).
 */
static int lift_fd(int fd)
{
	int nfd;

	if (fd < 0 || fd > 2)
		return fd;
	nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	close(fd);
	return nfd;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* A pipe, both ends close-on-exec, both off the standard descriptors. */
static int make_pipe(int fds[2])
{
	if (pipe2(fds, O_CLOEXEC) < 0)
		return errno;
	fds[0] = lift_fd(fds[0]);
	fds[1] = lift_fd(fds[1]);
	if (fds[0] < 0 || fds[1] < 0) {
		close_fd(&fds[0]);
		close_fd(&fds[1]);
		return EMFILE;
	}
	return 0;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return errno;
	return 0;
}

/*
 * write() that never raises SIGPIPE in this process, whatever the process's
 * disposition for it (the gateway ignores it at startup; tests and other
 * embedders may not).  SIGPIPE from write() is delivered to the writing
 * thread, so blocking it here and consuming the one our write raised
 * leaves every other thread's signals alone.
 */
static ssize_t write_nosigpipe(int fd, const void *p, size_t n)
{
	sigset_t pipe_set, old, pending;
	struct timespec zero = { 0, 0 };
	bool was_pending;
	ssize_t w;
	int saved;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	sigemptyset(&pending);
	sigpending(&pending);
	was_pending = sigismember(&pending, SIGPIPE) == 1;
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	w = write(fd, p, n);
	saved = errno;
	if (w < 0 && saved == EPIPE && !was_pending) {
		while (sigtimedwait(&pipe_set, NULL, &zero) < 0 &&
		       errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = saved;
	return w;
}

/* The state of one run, between the spawn and the return. */
struct run {
	const struct sg_child *c;
	struct sg_exec_result *out;
	pid_t pid;
	int pidfd;            /* -1: exit is polled with waitid instead */
	int in_w, out_r, err_r; /* our ends; -1 once closed */
	size_t in_off;        /* bytes of stdin_data written */
	bool exited;          /* reaped; out's status fields are final */
	bool killing;         /* the group was signalled (timeout, cancel) */
	int64_t start_ms;
	int64_t deadline_ms;  /* timeout; 0: none or already fired */
	int64_t idle_at_ms;   /* stdout silent until then: killed; 0: none */
	int64_t kill_at_ms;   /* SIGKILL after term_signal; 0: none */
	int64_t drain_until_ms; /* after the exit: stop reading pipes */
	sg_err why;           /* the cancel token's reason, once fired */
	size_t streamed;      /* stdout bytes written to c->out_fd */
	int stream_errno;     /* the first failed write to c->out_fd */
};

/* Signal the group: term_signal now and SIGKILL after the grace, or SIGKILL. */
static void start_kill(struct run *r, int64_t now)
{
	if (r->killing || r->exited)
		return;
	r->killing = true;
	if (r->c->term_signal > 0 && r->c->term_signal != SIGKILL) {
		kill(-r->pid, r->c->term_signal);
		/* The monotonic clock is far past 0, so 0 still means "none". */
		r->kill_at_ms = now + (r->c->term_grace_ms > 0
					       ? r->c->term_grace_ms : 0);
	} else {
		kill(-r->pid, SIGKILL);
	}
}

/*
 * If the child has exited, finish it.  The group is killed *before* the
 * child is reaped: while the zombie exists its pid (the group's id) cannot
 * be reused, so the signal cannot reach an unrelated group.
 */
static void try_reap(struct run *r, int64_t now)
{
	siginfo_t si;
	int status = 0;
	bool lost = false;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)r->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0) {
		if (errno != ECHILD)
			return;
		/*
		 * Someone reaped our child (SIGCHLD ignored, or a stray
		 * waitpid(-1)): its status is lost, but it is gone, and the
		 * pidfd would stay readable for ever.  Its group is not
		 * signalled: the id may already belong to someone else.
		 */
		lost = true;
	} else if (si.si_pid != r->pid) {
		return;
	} else {
		if (!r->c->detaches || r->killing)
			kill(-r->pid, SIGKILL);
		while (waitpid(r->pid, &status, 0) < 0 && errno == EINTR)
			;
	}
	r->exited = true;
	r->kill_at_ms = 0;
	r->out->duration_ms = now - r->start_ms;
	if (lost) {
		r->out->exit_code = -1;
		r->out->signal = 0;
	} else if (WIFSIGNALED(status)) {
		r->out->exit_code = -1;
		r->out->signal = WTERMSIG(status);
	} else {
		r->out->exit_code = WEXITSTATUS(status);
		r->out->signal = 0;
	}
	r->drain_until_ms = now + SG_EXEC_DRAIN_MS;
	close_fd(&r->pidfd);
	/* Nobody we wait for reads stdin any more. */
	close_fd(&r->in_w);
}

static void feed_stdin(struct run *r)
{
	const char *data = r->c->stdin_data;
	size_t left = r->c->stdin_len - r->in_off;
	ssize_t w;

	w = write_nosigpipe(r->in_w, data + r->in_off, left);
	if (w < 0) {
		/* EPIPE: the child closed stdin early; that is its right. */
		if (errno != EAGAIN && errno != EINTR)
			close_fd(&r->in_w);
		return;
	}
	r->in_off += (size_t)w;
	if (r->in_off >= r->c->stdin_len)
		close_fd(&r->in_w);
}

static void drain_pipe(struct run *r, int *fd, bool is_err)
{
	char chunk[EXEC_CHUNK];
	ssize_t n;

	n = read(*fd, chunk, sizeof(chunk));
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			close_fd(fd);
		return;
	}
	if (n == 0) {
		close_fd(fd);
		return;
	}
	if (!is_err && r->idle_at_ms)
		r->idle_at_ms = sg_now_ms() + r->c->idle_ms;
	if (is_err) {
		sg_buf_add_clipped(&r->out->err, chunk, (size_t)n);
	} else if (r->c->stream_out) {
		/* Straight to the file, up to out's bound: memory stays flat. */
		size_t room = r->out->out.max - r->streamed;
		size_t take = (size_t)n < room ? (size_t)n : room;

		if (take < (size_t)n)
			r->out->truncated = true;
		if (take && !r->stream_errno && sg_write_all(r->c->out_fd, chunk, take) != 0)
			r->stream_errno = errno ? errno : EIO;
		r->streamed += take;
	} else {
		sg_exec_capture(r->out, chunk, (size_t)n);
	}
}

static int64_t earliest(int64_t a, int64_t b)
{
	if (a <= 0)
		return b;
	if (b <= 0)
		return a;
	return a < b ? a : b;
}

/*
 * The deadlines that have passed: the timeout and the idle limit start the
 * kill, the grace's end sends SIGKILL.  Without a pidfd the exit is polled
 * here too.
 */
static void fire_timers(struct run *r, int64_t now)
{
	if (!r->exited && r->deadline_ms && now >= r->deadline_ms) {
		r->deadline_ms = 0;
		r->out->timed_out = true;
		start_kill(r, now);
	}
	if (!r->exited && r->idle_at_ms && now >= r->idle_at_ms) {
		r->idle_at_ms = 0;
		r->out->stalled = true;
		start_kill(r, now);
	}
	if (!r->exited && r->kill_at_ms && now >= r->kill_at_ms) {
		r->kill_at_ms = 0;
		kill(-r->pid, SIGKILL);
	}
	if (!r->exited && r->pidfd < 0)
		try_reap(r, now);
}

/*
 * How long poll() may sleep: until the next deadline (or the next exit
 * poll without a pidfd), after the exit until the drain's end, and never
 * more than a minute; -1 when nothing is due.
 */
static int poll_timeout(const struct run *r, int64_t now)
{
	int64_t wake;

	if (!r->exited) {
		wake = earliest(earliest(r->deadline_ms, r->idle_at_ms), r->kill_at_ms);
		if (r->pidfd < 0)
			wake = earliest(wake, now + EXEC_REAP_POLL_MS);
	} else {
		wake = r->drain_until_ms;
	}
	if (wake <= 0)
		return -1;
	if (wake - now > 60000)
		return 60000;
	return wake > now ? (int)(wake - now) : 0;
}

/*
 * The loop: runs until the child is reaped and both pipes are at EOF (or
 * the drain time after the exit has passed).  Returns 0 or an errno value
 * from poll(), in which case the caller kills and reaps the child.
 */
static int supervise(struct run *r, struct sg_cancel *cancel)
{
	int cfd = sg_cancel_fd(cancel);

	for (;;) {
		struct pollfd pfd[5];
		int idx_in = -1, idx_out = -1, idx_err = -1, idx_pid = -1;
		int idx_cancel = -1, nfds = 0;
		int64_t now = sg_now_ms();

		fire_timers(r, now);
		if (r->exited && r->out_r < 0 && r->err_r < 0)
			return 0;
		if (r->exited && now >= r->drain_until_ms)
			return 0;

		if (r->in_w >= 0) {
			idx_in = nfds;
			pfd[nfds++] = (struct pollfd){ r->in_w, POLLOUT, 0 };
		}
		if (r->out_r >= 0) {
			idx_out = nfds;
			pfd[nfds++] = (struct pollfd){ r->out_r, POLLIN, 0 };
		}
		if (r->err_r >= 0) {
			idx_err = nfds;
			pfd[nfds++] = (struct pollfd){ r->err_r, POLLIN, 0 };
		}
		if (r->pidfd >= 0) {
			idx_pid = nfds;
			pfd[nfds++] = (struct pollfd){ r->pidfd, POLLIN, 0 };
		}
		if (cfd >= 0 && r->why == SG_OK && !r->exited) {
			idx_cancel = nfds;
			pfd[nfds++] = (struct pollfd){ cfd, POLLIN, 0 };
		}

		if (poll(pfd, (nfds_t)nfds, poll_timeout(r, now)) < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		now = sg_now_ms();
		if (idx_in >= 0 && pfd[idx_in].revents)
			feed_stdin(r);
		if (idx_out >= 0 && pfd[idx_out].revents)
			drain_pipe(r, &r->out_r, false);
		if (idx_err >= 0 && pfd[idx_err].revents)
			drain_pipe(r, &r->err_r, true);
		if (idx_pid >= 0 && pfd[idx_pid].revents)
			try_reap(r, now);
		if (idx_cancel >= 0 && pfd[idx_cancel].revents) {
			r->why = sg_cancel_check(cancel);
			if (r->why != SG_OK)
				start_kill(r, now);
		}
	}
}

static int pidfd_open_compat(pid_t pid)
{
#ifdef SYS_pidfd_open
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (fd >= 0) {
		/* pidfd_open sets O_CLOEXEC itself; say so for older kernels. */
		fcntl(fd, F_SETFD, FD_CLOEXEC);
	}
	return fd;
#else
	(void)pid;
	return -1;
#endif
}

/*
 * The descriptors to hand the child, each numbered at or above the last
 * target (3 + npass), so that no dup2 onto 3 + i overwrites a source still
 * to come.  pass[i] is c->pass_fds[i] or a copy that lifted[i] says to
 * close; -1 with errno when a copy cannot be made.
 */
static int lift_fds(const struct sg_child *c, int *pass, bool *lifted)
{
	int floor = 3 + (int)c->npass;

	for (size_t i = 0; i < c->npass; i++) {
		lifted[i] = c->pass_fds[i] < floor;
		pass[i] = lifted[i] ? fcntl(c->pass_fds[i], F_DUPFD_CLOEXEC, floor)
				    : c->pass_fds[i];
		if (pass[i] < 0)
			return -1;
	}
	return 0;
}

/* What the spawn needs, made before it and released after the run. */
struct prep {
	int pass[SG_EXEC_PASS_MAX];     /* the descriptors handed over */
	bool lifted[SG_EXEC_PASS_MAX];  /* pass[i] is our copy, to close */
	char path[SG_PATH_MAX];         /* the program, resolved */
	int in_p[2], out_p[2], err_p[2];
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t sa;
	bool fa_ok, sa_ok;
	bool answered; /* not started: out says why, and the call succeeded */
};

/*
 * Everything that can refuse the command before a pipe is made: no argv,
 * a cancel, a working directory or program that is not there (answered in
 * out, as a shell would), descriptors that cannot be passed.
 */
static sg_err prep_check(const struct sg_child *c, struct prep *p,
			 struct sg_exec_result *out, struct sg_cancel *cancel,
			 struct sg_errinfo *err)
{
	char ebuf[128];
	int e;
	sg_err rc;

	if (!c->argv || !c->argv[0]) {
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT,
				"a command needs at least argv[0]");
		goto out;
	}
	rc = sg_cancel_check(cancel);
	if (rc) {
		sg_err_set(err, rc, "%s was cancelled before it started",
			   c->argv[0]);
		goto out;
	}
	if (c->cwd) {
		struct stat st;

		e = stat(c->cwd, &st) < 0 ? errno
					  : S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
		if (e) {
			not_started(out, c->cwd, e);
			p->answered = true;
			goto out;
		}
	}
	if (c->npass > SG_EXEC_PASS_MAX || lift_fds(c, p->pass, p->lifted) != 0) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot pass descriptors to %s: %s",
				c->argv[0], c->npass > SG_EXEC_PASS_MAX ? "too many"
				: errtext(errno, ebuf, sizeof(ebuf)));
		goto out;
	}
	e = find_program(c->argv[0], c->envp, c->cwd, p->path, sizeof(p->path));
	if (e) {
		not_started(out, c->argv[0], e);
		p->answered = true;
	}
out:
	return rc;
}

/* The pipes, and the spawn's file actions and attributes, still empty. */
static sg_err prep_pipes(const struct sg_child *c, struct prep *p,
			 struct sg_errinfo *err)
{
	char ebuf[128];
	int e;
	sg_err rc = SG_OK;

	if ((c->stdin_len > 0 && (e = make_pipe(p->in_p))) ||
	    (e = make_pipe(p->out_p)) || (!c->merge && (e = make_pipe(p->err_p)))) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot make pipes for %s: %s",
				c->argv[0], errtext(e, ebuf, sizeof(ebuf)));
		goto out;
	}
	if ((e = posix_spawn_file_actions_init(&p->fa))) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot prepare %s: %s",
				c->argv[0], errtext(e, ebuf, sizeof(ebuf)));
		goto out;
	}
	p->fa_ok = true;
	if ((e = posix_spawnattr_init(&p->sa))) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot prepare %s: %s",
				c->argv[0], errtext(e, ebuf, sizeof(ebuf)));
		goto out;
	}
	p->sa_ok = true;
out:
	return rc;
}

/*
 * The file actions run in order: stdio first, then the directory and the
 * descriptors passed, from 3 up (a dup2 onto itself clears its
 * close-on-exec too, as POSIX now asks and glibc does), then every other
 * descriptor is closed.  Our pipes are close-on-exec already; closefrom
 * also catches descriptors another thread (or a library) opened without
 * O_CLOEXEC.  Returns 0 or an errno value.
 */
static int prep_actions(const struct sg_child *c, struct prep *p)
{
	int e;

	if (p->in_p[0] >= 0)
		e = posix_spawn_file_actions_adddup2(&p->fa, p->in_p[0], 0);
	else
		e = posix_spawn_file_actions_addopen(&p->fa, 0, "/dev/null",
						     O_RDONLY, 0);
	if (!e)
		e = posix_spawn_file_actions_adddup2(&p->fa, p->out_p[1], 1);
	if (!e)
		e = posix_spawn_file_actions_adddup2(
			&p->fa, c->merge ? p->out_p[1] : p->err_p[1], 2);
	if (!e && c->cwd)
		e = posix_spawn_file_actions_addchdir_np(&p->fa, c->cwd);
	for (size_t i = 0; !e && i < c->npass; i++)
		e = posix_spawn_file_actions_adddup2(&p->fa, p->pass[i], 3 + (int)i);
	if (!e)
		e = posix_spawn_file_actions_addclosefrom_np(&p->fa, 3 + (int)c->npass);
	return e;
}

/*
 * Its own process group, no blocked signals, and every signal at its
 * default action (we may ignore SIGPIPE; the child must not inherit that).
 * Returns 0 or an errno value.
 */
static int prep_attrs(struct prep *p)
{
	sigset_t mask, def;
	int e;

	sigemptyset(&mask);
	sigfillset(&def);
	e = posix_spawnattr_setpgroup(&p->sa, 0);
	if (!e)
		e = posix_spawnattr_setsigmask(&p->sa, &mask);
	if (!e)
		e = posix_spawnattr_setsigdefault(&p->sa, &def);
	if (!e)
		e = posix_spawnattr_setflags(&p->sa, POSIX_SPAWN_SETPGROUP |
							     POSIX_SPAWN_SETSIGMASK |
							     POSIX_SPAWN_SETSIGDEF);
	return e;
}

static void prep_release(const struct sg_child *c, struct prep *p)
{
	for (size_t i = 0; i < c->npass && i < SG_EXEC_PASS_MAX; i++)
		if (p->lifted[i] && p->pass[i] >= 0)
			close(p->pass[i]);
	if (p->fa_ok)
		posix_spawn_file_actions_destroy(&p->fa);
	if (p->sa_ok)
		posix_spawnattr_destroy(&p->sa);
	close_fd(&p->in_p[0]);
	close_fd(&p->in_p[1]);
	close_fd(&p->out_p[0]);
	close_fd(&p->out_p[1]);
	close_fd(&p->err_p[0]);
	close_fd(&p->err_p[1]);
}

/*
 * The run takes our ends of the pipes; theirs are closed so EOF means
 * "every writer is gone".  Then the pidfd and the deadlines.
 */
static void run_adopt(struct run *r, struct prep *p)
{
	close_fd(&p->in_p[0]);
	close_fd(&p->out_p[1]);
	close_fd(&p->err_p[1]);
	r->in_w = p->in_p[1];
	r->out_r = p->out_p[0];
	r->err_r = p->err_p[0];
	p->in_p[1] = p->out_p[0] = p->err_p[0] = -1;
	if (r->in_w >= 0)
		set_nonblock(r->in_w);
	set_nonblock(r->out_r);
	if (r->err_r >= 0)
		set_nonblock(r->err_r);
	r->pidfd = pidfd_open_compat(r->pid);
	if (r->c->timeout_ms > 0)
		r->deadline_ms = r->start_ms + r->c->timeout_ms;
	if (r->c->idle_ms > 0)
		r->idle_at_ms = r->start_ms + r->c->idle_ms;
}

/*
 * The call's result once the loop returned e: a failed poll() (the child
 * is killed and reaped, not left behind), a cancel, or a failed write of
 * the streamed output.
 */
static sg_err run_outcome(struct run *r, int e, struct sg_errinfo *err)
{
	const char *what = r->c->argv[0];
	char ebuf[128];
	sg_err rc = SG_OK;

	if (e) {
		if (!r->exited) {
			kill(-r->pid, SIGKILL);
			while (waitpid(r->pid, NULL, 0) < 0 && errno == EINTR)
				;
		}
		rc = sg_err_set(err, SG_E_INTERNAL, "waiting for %s failed: %s",
				what, errtext(e, ebuf, sizeof(ebuf)));
	} else if (r->why != SG_OK) {
		rc = sg_err_set(err, r->why, "%s was stopped: the call was cancelled",
				what);
	} else if (r->stream_errno) {
		rc = sg_err_set(err, SG_E_INTERNAL, "writing what %s printed failed: %s",
				what, errtext(r->stream_errno, ebuf, sizeof(ebuf)));
	}
	return rc;
}

sg_err sg_exec_run(const struct sg_child *c, struct sg_exec_result *out,
		   struct sg_cancel *cancel, struct sg_errinfo *err)
{
	static char *const empty_env[] = { NULL };
	struct prep p = { .in_p = { -1, -1 }, .out_p = { -1, -1 }, .err_p = { -1, -1 } };
	char ebuf[128];
	struct run r;
	int e;
	sg_err rc;

	memset(&r, 0, sizeof(r));
	r.c = c;
	r.out = out;
	r.pidfd = r.in_w = r.out_r = r.err_r = -1;
	sg_exec_result_reset(out);

	rc = prep_check(c, &p, out, cancel, err);
	if (rc || p.answered)
		goto out;
	rc = prep_pipes(c, &p, err);
	if (rc)
		goto out;
	e = prep_actions(c, &p);
	if (!e)
		e = prep_attrs(&p);
	if (e) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot prepare %s: %s",
				c->argv[0], errtext(e, ebuf, sizeof(ebuf)));
		goto out;
	}

	r.start_ms = sg_now_ms();
	e = posix_spawn(&r.pid, p.path, &p.fa, &p.sa, (char *const *)c->argv,
			c->envp ? (char *const *)c->envp : empty_env);
	if (e == EAGAIN || e == ENOMEM) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot start %s: %s",
				c->argv[0], errtext(e, ebuf, sizeof(ebuf)));
		goto out;
	}
	if (e) {
		/* glibc reports the exec's failure here (and reaps the child). */
		not_started(out, c->argv[0], e);
		out->duration_ms = sg_now_ms() - r.start_ms;
		rc = SG_OK;
		goto out;
	}
	run_adopt(&r, &p);
	rc = run_outcome(&r, supervise(&r, cancel), err);
out:
	sg_exec_capture_end(out);
	prep_release(c, &p);
	close_fd(&r.in_w);
	close_fd(&r.out_r);
	close_fd(&r.err_r);
	close_fd(&r.pidfd);
	return rc;
}

const char sg_exec_read_file_sh[] =
	"f=$1\n"
	"if [ ! -f \"$f\" ]; then\n"
	"  [ -e \"$f\" ] && exit 3\n"
	"  exit 4\n"
	"fi\n"
	"nb=$2\n"
	"if [ \"$nb\" = auto ]; then\n"
	"  nb=0\n"
	"  dd if=/dev/null of=/dev/null iflag=nonblock status=none count=0 2>/dev/null && nb=1\n"
	"fi\n"
	"if [ \"$nb\" = 1 ]; then\n"
	"  dd if=\"$f\" iflag=nonblock bs=65536 status=none || exit 1\n"
	"else\n"
	"  cat -- \"$f\" || exit 1\n"
	"fi\n"
	"[ -f \"$f\" ] || exit 3\n"
	"wc -c <\"$f\" >&2\n"
	"exit 0\n";
