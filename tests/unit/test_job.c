/*
 * test_job.c - `sg-helper job` (helper/job.c), end to end.
 *
 * The real program ($SG_HELPER; without it every test is skipped) runs
 * real commands (/bin/sh scripts, sleep, env, cat) with its files in a
 * fresh temporary directory per test.  Its stdout is split the way the
 * adapter splits it: the head, the trailer line after the mark, and the
 * stderr head after that.
 *
 * The test process makes itself a child subreaper: the runner and what
 * the command leaves behind are reparented here once sg-helper exits, so
 * "gone" is checked exactly (reaped, or kill(pid, 0) fails with ESRCH)
 * instead of depending on what pid 1 does with zombies, and the teardown
 * kills every process whose parent is this one until none is left, which
 * covers everything a test started and nothing else.
 *
 * Timing bounds are generous (two loaded cores, sanitizers): each one
 * compares against a command that would take far longer.
 */
#define _GNU_SOURCE /* mkdtemp, memmem, pipe2, prctl, nftw's FTW_* */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "adapters/jobreply.h"

#define MARK "SGMARK7f3a"
#define PATH_ENV "PATH=/usr/bin:/bin"
#define CAPTURE (1024 * 1024) /* stdout kept per run; more fails the test */
#define NAMES 24

/* Every file a job may leave (job.c's job_suffixes). */
static const char *const suffixes[] = {
	".s", ".in", ".o", ".e", ".pid", ".st", ".to", ".x", ".cancel", ".up",
};

struct fixture {
	char root[64]; /* mkdtemp'd: run/ for jobs, work/ for commands */
	char names[NAMES][512]; /* what pfx(), jfile() and at() return */
	unsigned nnames;
	const char *helper_env[4]; /* NAME=VALUE for sg-helper's environment */
	/* The last run of sg-helper. */
	char *out; /* stdout, NUL-terminated */
	size_t len;
	char err[8192]; /* stderr, NUL-terminated, cut */
	int code;       /* its exit status */
	int64_t ms;     /* from the start to EOF on both pipes */
	/* out split by split(): each part NUL-terminated in place. */
	const char *head;
	size_t head_len;
	const char *trailer; /* what follows "<mark> " */
	const char *tail;
	size_t tail_len;
};

static int64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static const char *helper(void)
{
	const char *env = getenv("SG_HELPER");

	return env && *env ? env : NULL;
}

/* A formatted string living as long as the fixture (a ring of NAMES). */
static const char *name(struct fixture *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static const char *name(struct fixture *f, const char *fmt, ...)
{
	char *s = f->names[f->nnames++ % NAMES];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(s, sizeof(f->names[0]), fmt, ap);
	va_end(ap);
	assert_true(n > 0 && (size_t)n < sizeof(f->names[0]));
	return s;
}

/* A job's prefix, one of its files, a file of the commands. */
static const char *pfx(struct fixture *f, const char *id)
{
	return name(f, "%s/run/%s", f->root, id);
}

static const char *jfile(struct fixture *f, const char *id, const char *suffix)
{
	return name(f, "%s/run/%s%s", f->root, id, suffix);
}

static const char *at(struct fixture *f, const char *file)
{
	return name(f, "%s/work/%s", f->root, file);
}

static bool exists(const char *path)
{
	return access(path, F_OK) == 0;
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(close(fd), 0);
}

/* The file (at most n - 1 bytes) into buf, NUL-terminated; "" if missing. */
static const char *read_file(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t len = 0;
	ssize_t k;

	buf[0] = '\0';
	if (fd < 0)
		return buf;
	while (len < n - 1 && (k = read(fd, buf + len, n - 1 - len)) > 0)
		len += (size_t)k;
	close(fd);
	buf[len] = '\0';
	return buf;
}

/* A pid written as one line to path, waiting up to ms for the line. */
static pid_t read_pid(const char *path, int ms)
{
	char buf[64];

	for (int64_t end = now_ms() + ms;;) {
		read_file(path, buf, sizeof(buf));
		if (strchr(buf, '\n')) {
			long v = strtol(buf, NULL, 10);

			assert_true(v > 0);
			return (pid_t)v;
		}
		if (now_ms() > end)
			fail_msg("no pid in %s after %d ms", path, ms);
		usleep(10000);
	}
}

/* The parent and the state letter of pid from /proc; false when it is gone. */
static bool proc_stat(pid_t pid, pid_t *ppid, char *state)
{
	char path[64], buf[1024];
	const char *p;
	int parent;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	read_file(path, buf, sizeof(buf));
	/* "pid (comm) S ppid ...": comm may hold anything; the last ')'. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %c %d", state, &parent) != 2)
		return false;
	*ppid = (pid_t)parent;
	return true;
}

/* Running, not a zombie waiting to be reaped. */
static bool alive(pid_t pid)
{
	pid_t ppid;
	char state;

	return proc_stat(pid, &ppid, &state) && state != 'Z' && state != 'X';
}

/* Wait up to ms for pid to die (reaped if ours); true when it is gone. */
static bool wait_gone(pid_t pid, int ms)
{
	for (int64_t end = now_ms() + ms; now_ms() <= end; usleep(10000)) {
		int st;

		if (waitpid(pid, &st, WNOHANG) == pid ||
		    (kill(pid, 0) < 0 && errno == ESRCH))
			return kill(pid, 0) < 0 && errno == ESRCH;
	}
	return false;
}

/*
 * Wait up to ms until this process has no child left, reaping zombies:
 * since orphans come here, that means nothing a test started runs on.
 */
static bool none_left(int ms)
{
	for (int64_t end = now_ms() + ms;; usleep(10000)) {
		pid_t got;
		int st;

		while ((got = waitpid(-1, &st, WNOHANG)) > 0)
			;
		if (got < 0 && errno == ECHILD)
			return true;
		if (now_ms() > end)
			return false;
	}
}

/*
 * Kill every process whose parent is this one and reap it, until this
 * process has no child left: sg-helper's runners and what the commands
 * left behind are reparented here (subreaper), a level at a time.
 */
static void kill_ours(void)
{
	int64_t end = now_ms() + 10000;

	for (;;) {
		DIR *d = opendir("/proc");
		struct dirent *de;
		pid_t got;
		int st;

		while (d && (de = readdir(d))) {
			long v = strtol(de->d_name, NULL, 10);
			pid_t ppid;
			char state;

			if (v > 0 && proc_stat((pid_t)v, &ppid, &state) &&
			    ppid == getpid())
				kill((pid_t)v, SIGKILL);
		}
		if (d)
			closedir(d);
		while ((got = waitpid(-1, &st, WNOHANG)) > 0)
			;
		if (got < 0 && errno == ECHILD)
			return;
		if (now_ms() > end) {
			fprintf(stderr, "test_job: children left after 10 s\n");
			return;
		}
		usleep(10000);
	}
}

/*
 * Run sg-helper with argv: stdin a pipe holding a line (so a command that
 * read the caller's stdin would show it), stdout and stderr captured until
 * EOF on both, nothing else open.
 */
static void run(struct fixture *f, char *const *argv)
{
	struct pollfd p[2];
	int in[2], out[2], err[2], st;
	size_t errlen = 0;
	int64_t t0;
	pid_t pid;

	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	assert_int_equal(pipe2(err, O_CLOEXEC), 0);
	assert_int_equal(write(in[1], "caller-stdin\n", 13), 13);
	close(in[1]);
	f->len = 0;
	f->err[0] = '\0';
	t0 = now_ms();
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 ||
		    dup2(err[1], 2) < 0)
			_exit(125);
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
		for (size_t i = 0; i < 4 && f->helper_env[i]; i++)
			putenv((char *)f->helper_env[i]);
		execv(argv[0], argv);
		_exit(125);
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	p[0] = (struct pollfd){ .fd = out[0], .events = POLLIN };
	p[1] = (struct pollfd){ .fd = err[0], .events = POLLIN };
	while (p[0].fd >= 0 || p[1].fd >= 0) {
		char scrap[4096];

		if (now_ms() - t0 > 60000)
			fail_msg("sg-helper still holds its pipes after 60 s");
		if (poll(p, 2, 1000) < 0) {
			assert_int_equal(errno, EINTR);
			continue;
		}
		for (int i = 0; i < 2; i++) {
			char *buf = i ? f->err + errlen : f->out + f->len;
			size_t room = i ? sizeof(f->err) - 1 - errlen
					: CAPTURE - f->len;
			ssize_t k;

			if (p[i].fd < 0 || !p[i].revents)
				continue;
			k = read(p[i].fd, room ? buf : scrap,
				 room ? room : sizeof(scrap));
			if (k <= 0) {
				close(p[i].fd);
				p[i].fd = -1;
			} else if (!room && i == 0) {
				fail_msg("sg-helper printed more than %d bytes",
					 CAPTURE);
			} else if (room) {
				*(i ? &errlen : &f->len) += (size_t)k;
			}
		}
	}
	f->ms = now_ms() - t0;
	f->out[f->len] = '\0';
	f->err[errlen] = '\0';
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (!WIFEXITED(st))
		fail_msg("sg-helper died of signal %d: %s", WTERMSIG(st),
			 f->err);
	f->code = WEXITSTATUS(st);
}

/* Split the reply at the trailer; the mark must be there. */
static void split(struct fixture *f)
{
	const char *key = "\n" MARK " ";
	char *t = memmem(f->out, f->len, key, strlen(key)), *nl;

	if (!t)
		fail_msg("no trailer in the reply (%zu bytes): %.*s", f->len,
			 (int)f->len, f->out);
	*t = '\0';
	f->head = f->out;
	f->head_len = (size_t)(t - f->out);
	f->trailer = t + strlen(key);
	nl = memchr(f->trailer, '\n', (size_t)(f->out + f->len - f->trailer));
	if (!nl)
		fail_msg("the trailer has no newline: %s", f->trailer);
	*nl = '\0';
	f->tail = nl + 1;
	f->tail_len = (size_t)(f->out + f->len - f->tail);
}

static void vjob(struct fixture *f, va_list ap)
{
	char *argv[64];
	const char *a;
	int n = 0;

	argv[n++] = (char *)helper();
	argv[n++] = (char *)"job";
	while ((a = va_arg(ap, const char *)) != NULL) {
		assert_true(n < 63);
		argv[n++] = (char *)a;
	}
	argv[n] = NULL;
	run(f, argv);
}

/* `sg-helper job ARGS... NULL` that must answer: exit 0 and a trailer. */
static void job(struct fixture *f, ...)
{
	va_list ap;

	va_start(ap, f);
	vjob(f, ap);
	va_end(ap);
	if (f->code != 0)
		fail_msg("sg-helper job exited %d: %s", f->code, f->err);
	split(f);
}

/* `sg-helper job ARGS...` that must be refused: 126, nothing on stdout. */
static void refused(struct fixture *f, ...)
{
	va_list ap;

	va_start(ap, f);
	vjob(f, ap);
	va_end(ap);
	assert_int_equal(f->code, 126);
	assert_int_equal(f->len, 0);
	assert_non_null(strstr(f->err, "usage: job"));
}

/* The options most calls share: the job's prefix, the mark, a roomy head. */
#define COMMON(f, id) "--dir", pfx(f, id), "--mark", MARK, "--max-out", "65536"
#define SH(script) "/bin/sh", "-c", (script)

static struct fixture *fixture(void **state)
{
	if (!helper())
		skip(); /* run by hand, without the build's helper */
	return *state;
}

static int rm_one(const char *path, const struct stat *sb, int flag,
		  struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char path[128];

	if (!f)
		return -1;
	f->out = malloc(CAPTURE + 1);
	snprintf(f->root, sizeof(f->root), "/tmp/sg-job-XXXXXX");
	if (!f->out || !mkdtemp(f->root)) {
		free(f->out);
		free(f);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/run", f->root);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/work", f->root);
	mkdir(path, 0700);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	kill_ours();
	unsetenv("SG_TEST_LEAK");
	nftw(f->root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f->out);
	free(f);
	return 0;
}

/* ---- the result ---------------------------------------------------------- */

static void test_result_streams(void **state)
{
	struct fixture *f = fixture(state);
	char buf[64];

	job(f, COMMON(f, "a"), "--wait-ms", "20000", "--", PATH_ENV, "--",
	    SH("echo hi; echo err >&2; exit 3"), NULL);
	assert_string_equal(f->head, "hi\n");
	assert_string_equal(f->trailer, "done 3|exit 3||3");
	assert_string_equal(f->tail, "err\n");
	assert_string_equal(read_file(jfile(f, "a", ".o"), buf, sizeof(buf)),
			    "hi\n");
	assert_string_equal(read_file(jfile(f, "a", ".e"), buf, sizeof(buf)),
			    "err\n");
	assert_string_equal(read_file(jfile(f, "a", ".st"), buf, sizeof(buf)),
			    "exit 3\n");
	assert_string_equal(read_file(jfile(f, "a", ".x"), buf, sizeof(buf)),
			    "3\n");
	assert_false(exists(jfile(f, "a", ".to")));

	/* --merge: one file, one offset, so the order is the command's own. */
	job(f, COMMON(f, "b"), "--wait-ms", "20000", "--merge", "--", PATH_ENV,
	    "--", SH("echo hi; echo err >&2; echo more; exit 3"), NULL);
	assert_string_equal(f->head, "hi\nerr\nmore\n");
	assert_string_equal(f->trailer, "done 3|exit 3||12");
	assert_int_equal(f->tail_len, 0);
	assert_false(exists(jfile(f, "b", ".e")));

	/* Success, and nothing printed at all. */
	job(f, COMMON(f, "c"), "--wait-ms", "20000", "--", PATH_ENV, "--",
	    "true", NULL);
	assert_int_equal(f->head_len, 0);
	assert_string_equal(f->trailer, "done 0|exit 0||0");
	assert_int_equal(f->tail_len, 0);
}

static void test_raw_bytes(void **state)
{
	struct fixture *f = fixture(state);

	/* NUL, a byte that is not UTF-8 and a newline pass untouched. */
	job(f, COMMON(f, "a"), "--wait-ms", "20000", "--", PATH_ENV, "--",
	    SH("printf '\\000\\377ab\\n\\000'; printf '\\000x' >&2"), NULL);
	assert_int_equal(f->head_len, 6);
	assert_memory_equal(f->head, "\0\377ab\n\0", 6);
	assert_string_equal(f->trailer, "done 0|exit 0||6");
	assert_int_equal(f->tail_len, 2);
	assert_memory_equal(f->tail, "\0x", 2);
}

static void test_signal(void **state)
{
	struct fixture *f = fixture(state);

	job(f, COMMON(f, "a"), "--wait-ms", "20000", "--", PATH_ENV, "--",
	    SH("echo before; kill -TERM $$"), NULL);
	assert_string_equal(f->head, "before\n");
	assert_string_equal(f->trailer, "done 143|signal 15||7");

	/* A SIGKILL of its own is not a timeout: no timed-out flag. */
	job(f, COMMON(f, "b"), "--wait-ms", "20000", "--timeout-ms", "20000",
	    "--", PATH_ENV, "--", SH("kill -KILL $$"), NULL);
	assert_string_equal(f->trailer, "done 137|signal 9||0");
	assert_false(exists(jfile(f, "b", ".to")));
}

/* ---- the environment, the program, the directory ------------------------- */

static void test_env_exact(void **state)
{
	struct fixture *f = fixture(state);

	/* In sg-helper's environment (inherited from here), not in the list. */
	assert_int_equal(setenv("SG_TEST_LEAK", "1", 1), 0);
	job(f, COMMON(f, "a"), "--wait-ms", "20000", "--", PATH_ENV,
	    "SG_A=one two", "SG_EMPTY=", "--", "/usr/bin/env", NULL);
	unsetenv("SG_TEST_LEAK");
	assert_null(strstr(f->head, "SG_TEST_LEAK"));
	assert_string_equal(f->head, PATH_ENV "\nSG_A=one two\nSG_EMPTY=\n");
	assert_string_equal(f->trailer, "done 0|exit 0||42");

	/* An empty list is an empty environment. */
	job(f, COMMON(f, "b"), "--wait-ms", "20000", "--", "--", "/usr/bin/env",
	    NULL);
	assert_int_equal(f->head_len, 0);
	assert_string_equal(f->trailer, "done 0|exit 0||0");
}

static void test_path_lookup(void **state)
{
	struct fixture *f = fixture(state);
	const char *bin = at(f, "bin");
	const char *list_path = name(f, "PATH=%s/work/bin", f->root);
	const char *both = name(f, "PATH=%s/work/bin:/usr/bin:/bin", f->root);

	assert_int_equal(mkdir(bin, 0700), 0);
	write_file(at(f, "bin/sg-job-tool"), "#!/bin/sh\necho tool ran\n",
		   0755);

	/* Found only through the list's PATH. */
	job(f, COMMON(f, "a"), "--wait-ms", "20000", "--", list_path, "--",
	    "sg-job-tool", NULL);
	assert_string_equal(f->head, "tool ran\n");
	assert_string_equal(f->trailer, "done 0|exit 0||9");

	/* sg-helper's own PATH finds it; the list's does not: not found. */
	f->helper_env[0] = both;
	job(f, COMMON(f, "b"), "--wait-ms", "20000", "--", PATH_ENV, "--",
	    "sg-job-tool", NULL);
	assert_string_equal(f->trailer, "done 127|exit 127||0");
	assert_string_equal(
		f->tail, "sg-helper: sg-job-tool: No such file or directory\n");
}

static void test_exec_failures(void **state)
{
	struct fixture *f = fixture(state);
	const char *script = name(f, "echo ran > %s/work/ran", f->root);

	job(f, COMMON(f, "a"), "--wait-ms", "20000", "--", PATH_ENV, "--",
	    "sg-no-such-command", "x", NULL);
	assert_int_equal(f->head_len, 0);
	assert_string_equal(f->trailer, "done 127|exit 127||0");
	assert_string_equal(
		f->tail,
		"sg-helper: sg-no-such-command: No such file or directory\n");

	/* Found but not executable: the shell's 126. */
	write_file(at(f, "plain"), "echo no\n", 0644);
	job(f, COMMON(f, "b"), "--wait-ms", "20000", "--", PATH_ENV, "--",
	    at(f, "plain"), NULL);
	assert_string_equal(f->trailer, "done 126|exit 126||0");
	assert_non_null(strstr(f->tail, "Permission denied"));

	/* A working directory that does not exist: 127, the command not run. */
	job(f, COMMON(f, "c"), "--wait-ms", "20000", "--cwd", at(f, "nope"),
	    "--", PATH_ENV, "--", SH(script), NULL);
	assert_int_equal(strncmp(f->trailer, "done 127|", 9), 0);
	assert_non_null(strstr(f->tail, "cannot enter the directory"));
	assert_non_null(strstr(f->tail, at(f, "nope")));
	assert_false(exists(at(f, "ran")));
	assert_false(exists(jfile(f, "c", ".pid")));

	/* One that exists: the command runs there. */
	job(f, COMMON(f, "d"), "--wait-ms", "20000", "--cwd", at(f, ""), "--",
	    PATH_ENV, "--", SH("pwd; echo here > file"), NULL);
	assert_string_equal(f->head, name(f, "%s/work\n", f->root));
	assert_true(exists(at(f, "file")));
}

/* ---- stdin --------------------------------------------------------------- */

static void test_stdin(void **state)
{
	struct fixture *f = fixture(state);
	char buf[256];
	char *big = malloc(100000 + 16), *big2 = malloc(100000 + 16);

	/* From a variable of sg-helper's environment (not the command's). */
	f->helper_env[0] = "SG_JOB_IN=line one\nline two\n";
	job(f, COMMON(f, "a"), "--wait-ms", "20000", "--stdin-env", "SG_JOB_IN",
	    "--", PATH_ENV, "--", SH("cat; echo ${SG_JOB_IN-unset}"), NULL);
	assert_string_equal(f->head, "line one\nline two\nunset\n");
	assert_string_equal(f->trailer, "done 0|exit 0||24");
	assert_string_equal(read_file(jfile(f, "a", ".in"), buf, sizeof(buf)),
			    "line one\nline two\n");

	/* Several variables, comma-separated: their values in order. */
	f->helper_env[0] = "SG_JOB_A=first,";
	f->helper_env[1] = "SG_JOB_B=";
	f->helper_env[2] = "SG_JOB_C=third\n";
	job(f, COMMON(f, "b"), "--wait-ms", "20000", "--stdin-env",
	    "SG_JOB_A,SG_JOB_B,SG_JOB_C", "--", PATH_ENV, "--", "cat", NULL);
	assert_string_equal(f->head, "first,third\n");
	assert_string_equal(f->trailer, "done 0|exit 0||12");

	/* An empty variable: empty stdin. */
	job(f, COMMON(f, "c"), "--wait-ms", "20000", "--stdin-env", "SG_JOB_B",
	    "--", PATH_ENV, "--", SH("cat; echo cat=$?"), NULL);
	assert_string_equal(f->head, "cat=0\n");

	/* A variable that is not set cannot be staged: 127, nothing runs. */
	job(f, COMMON(f, "u"), "--wait-ms", "20000", "--stdin-env",
	    "SG_JOB_A,SG_JOB_UNSET", "--", PATH_ENV, "--", SH("echo ran"),
	    NULL);
	assert_int_equal(f->head_len, 0);
	assert_int_equal(strncmp(f->trailer, "done 127|", 9), 0);
	assert_non_null(strstr(f->tail, "cannot stage the command's stdin"));
	f->helper_env[1] = NULL;
	f->helper_env[2] = NULL;

	/* 2 x 100 kB, beyond a pipe's buffer (a variable holds <= 128 KiB). */
	assert_non_null(big);
	assert_non_null(big2);
	memcpy(big, "SG_JOB_A=", 9);
	memcpy(big2, "SG_JOB_B=", 9);
	for (size_t i = 0; i < 100000; i++) {
		big[9 + i] = (char)('a' + i % 26);
		big2[9 + i] = (char)('A' + i % 26);
	}
	big[9 + 100000] = '\0';
	big2[9 + 100000] = '\0';
	f->helper_env[0] = big;
	f->helper_env[1] = big2;
	job(f, "--dir", pfx(f, "h"), "--mark", MARK, "--max-out", "300000",
	    "--wait-ms", "20000", "--stdin-env", "SG_JOB_A,SG_JOB_B", "--",
	    PATH_ENV, "--", "cat", NULL);
	f->helper_env[0] = NULL;
	f->helper_env[1] = NULL;
	assert_int_equal(f->head_len, 200000);
	assert_memory_equal(f->head, big + 9, 100000);
	assert_memory_equal(f->head + 100000, big2 + 9, 100000);
	assert_string_equal(f->trailer, "done 0|exit 0||200000");
	free(big);
	free(big2);

	/* From a file. */
	write_file(at(f, "input"), "from a file\n", 0600);
	job(f, COMMON(f, "d"), "--wait-ms", "20000", "--stdin-file",
	    at(f, "input"), "--", PATH_ENV, "--", "cat", NULL);
	assert_string_equal(f->head, "from a file\n");
	assert_false(exists(jfile(f, "d", ".in")));

	/* Neither: /dev/null, never the caller's stdin (which holds a line). */
	job(f, COMMON(f, "e"), "--wait-ms", "20000", "--", PATH_ENV, "--",
	    SH("cat; echo cat=$?; readlink /proc/$$/fd/0"), NULL);
	assert_string_equal(f->head, "cat=0\n/dev/null\n");

	/* A file that cannot be opened: 127, the command never runs. */
	job(f, COMMON(f, "g"), "--wait-ms", "20000", "--stdin-file",
	    at(f, "missing"), "--", PATH_ENV, "--", SH("echo ran"), NULL);
	assert_int_equal(f->head_len, 0);
	assert_int_equal(strncmp(f->trailer, "done 127|", 9), 0);
	assert_non_null(strstr(f->tail, "cannot open the command's stdin"));
}

static void test_no_fd_leaks(void **state)
{
	struct fixture *f = fixture(state);
	char link[64], target[256];
	pid_t runner;

	/* The command holds its stdio and nothing else of sg-helper's. */
	f->helper_env[0] = "SG_JOB_IN=x";
	job(f, COMMON(f, "a"), "--wait-ms", "20000", "--stdin-env", "SG_JOB_IN",
	    "--", PATH_ENV, "--", SH("ls /proc/$$/fd"), NULL);
	assert_string_equal(f->head, "0\n1\n2\n");
	job(f, COMMON(f, "b"), "--wait-ms", "20000", "--merge", "--", PATH_ENV, "--",
	    SH("ls /proc/$$/fd"), NULL);
	assert_string_equal(f->head, "0\n1\n2\n");
	/* The runner holds /dev/null three times and nothing else. */
	job(f, COMMON(f, "c"), "--wait-ms", "100", "--", PATH_ENV, "--",
	    "sleep", "30", NULL);
	assert_string_equal(f->trailer, "pending");
	runner = read_pid(jfile(f, "c", ".pid"), 5000);
	for (int fd = 0; fd < 3; fd++) {
		ssize_t n;

		snprintf(link, sizeof(link), "/proc/%d/fd/%d", (int)runner, fd);
		n = readlink(link, target, sizeof(target) - 1);
		assert_true(n > 0);
		target[n] = '\0';
		assert_string_equal(target, "/dev/null");
	}
	snprintf(link, sizeof(link), "/proc/%d/fd/3", (int)runner);
	assert_false(exists(link));
}

/* ---- the head's bounds --------------------------------------------------- */

static void test_max_out(void **state)
{
	struct fixture *f = fixture(state);
	static const char line[] = "abcdefghi\n";

	/* The head is cut at --max-out; the size is the whole stdout's. */
	job(f, "--dir", pfx(f, "a"), "--mark", MARK, "--max-out", "100",
	    "--wait-ms", "20000", "--", PATH_ENV, "--",
	    SH("yes abcdefghi | head -c 10000"), NULL);
	assert_int_equal(f->head_len, 100);
	for (size_t i = 0; i < 100; i++)
		assert_int_equal(f->head[i], line[i % 10]);
	assert_string_equal(f->trailer, "done 0|exit 0||10000");

	/* Beyond one 64 KiB read. */
	job(f, "--dir", pfx(f, "b"), "--mark", MARK, "--max-out", "150000",
	    "--wait-ms", "20000", "--", PATH_ENV, "--",
	    SH("yes abcdefghi | head -c 200000"), NULL);
	assert_int_equal(f->head_len, 150000);
	for (size_t i = 0; i < 150000; i++)
		if (f->head[i] != line[i % 10])
			fail_msg("byte %zu is %d", i, f->head[i]);
	assert_string_equal(f->trailer, "done 0|exit 0||200000");

	/*
	 * --keep-tail: past --max-out, its first half from the head and its
	 * last half from the end, so a long log keeps its last line; the
	 * trailer adds the line count.
	 */
	job(f, "--dir", pfx(f, "t"), "--mark", MARK, "--max-out", "20", "--keep-tail",
	    "--wait-ms", "20000", "--", PATH_ENV, "--", SH("seq 1 1000"), NULL);
	assert_int_equal(f->head_len, 20);
	assert_memory_equal(f->head, "1\n2\n3\n4\n5\n\n999\n1000\n", 20);
	assert_string_equal(f->trailer, "done 0|exit 0||3893|1000");

	/* --max-out 0: no head, the size counted; --max-err cuts stderr. */
	job(f, "--dir", pfx(f, "c"), "--mark", MARK, "--max-out", "0",
	    "--max-err", "5", "--wait-ms", "20000", "--", PATH_ENV, "--",
	    SH("echo 0123456789; echo 0123456789 >&2"), NULL);
	assert_int_equal(f->head_len, 0);
	assert_string_equal(f->trailer, "done 0|exit 0||11");
	assert_string_equal(f->tail, "01234");
}

/* ---- waiting, attaching, starting once ----------------------------------- */

static void test_pending_then_attach(void **state)
{
	struct fixture *f = fixture(state);

	job(f, COMMON(f, "p"), "--wait-ms", "100", "--", PATH_ENV, "--",
	    SH("sleep 4; echo late"), NULL);
	assert_int_equal(f->head_len, 0);
	assert_string_equal(f->trailer, "pending");
	assert_int_equal(f->tail_len, 0);
	assert_true(f->ms < 2000);

	/* A short attach while the command runs: pending, after its wait. */
	job(f, "--attach", COMMON(f, "p"), "--wait-ms", "300", NULL);
	assert_string_equal(f->trailer, "pending");
	assert_true(f->ms >= 250);
	assert_true(f->ms < 2500);

	job(f, "--attach", COMMON(f, "p"), "--wait-ms", "30000", NULL);
	assert_string_equal(f->head, "late\n");
	assert_string_equal(f->trailer, "done 0|exit 0||5");
	assert_int_equal(f->tail_len, 0);
	assert_true(f->ms < 15000);

	/* Attaching again is the same answer, at once. */
	job(f, "--attach", COMMON(f, "p"), "--wait-ms", "0", NULL);
	assert_string_equal(f->head, "late\n");
	assert_string_equal(f->trailer, "done 0|exit 0||5");

	/* A prefix no start created. */
	job(f, "--attach", COMMON(f, "never"), "--wait-ms", "5000", NULL);
	assert_int_equal(f->head_len, 0);
	assert_string_equal(f->trailer, "missing");
	assert_int_equal(f->tail_len, 0);
	assert_true(f->ms < 2500);
	assert_false(exists(jfile(f, "never", ".s")));
}

static void test_start_once(void **state)
{
	struct fixture *f = fixture(state);
	const char *script = name(
		f, "echo run >> %s/work/count; sleep 2; echo out", f->root);
	char buf[64];

	job(f, COMMON(f, "a"), "--wait-ms", "100", "--", PATH_ENV, "--",
	    SH(script), NULL);
	assert_string_equal(f->trailer, "pending");

	/* The same start again (a resent request) attaches to the first. */
	job(f, COMMON(f, "a"), "--wait-ms", "30000", "--", PATH_ENV, "--",
	    SH(script), NULL);
	assert_string_equal(f->head, "out\n");
	assert_string_equal(f->trailer, "done 0|exit 0||4");
	assert_string_equal(read_file(at(f, "count"), buf, sizeof(buf)),
			    "run\n");

	/* And once more after the end. */
	job(f, COMMON(f, "a"), "--wait-ms", "30000", "--", PATH_ENV, "--",
	    SH(script), NULL);
	assert_string_equal(f->trailer, "done 0|exit 0||4");
	usleep(200000);
	assert_string_equal(read_file(at(f, "count"), buf, sizeof(buf)),
			    "run\n");
}

/* ---- timeouts, leftovers, cancel ----------------------------------------- */

static void test_timeout(void **state)
{
	struct fixture *f = fixture(state);
	const char *script =
		name(f, "echo $$ > %s/work/pid; echo started; exec sleep 30",
		     f->root);
	pid_t cmd, runner;

	job(f, COMMON(f, "t"), "--wait-ms", "30000", "--timeout-ms", "1000",
	    "--", PATH_ENV, "--", SH(script), NULL);
	assert_string_equal(f->head, "started\n");
	assert_string_equal(f->trailer, "done 137|signal 9|1|8");
	assert_true(f->ms >= 900);
	assert_true(f->ms < 8000);
	assert_true(exists(jfile(f, "t", ".to")));
	/* The whole group went: the command and its runner. */
	cmd = read_pid(at(f, "pid"), 1000);
	runner = read_pid(jfile(f, "t", ".pid"), 1000);
	assert_true(wait_gone(cmd, 5000));
	assert_true(wait_gone(runner, 5000));
	assert_true(none_left(5000));

	/* A command that ends in time is not flagged. */
	job(f, COMMON(f, "u"), "--wait-ms", "30000", "--timeout-ms", "20000",
	    "--", PATH_ENV, "--", SH("echo quick"), NULL);
	assert_string_equal(f->trailer, "done 0|exit 0||6");
	assert_false(exists(jfile(f, "u", ".to")));
}

static void test_leftovers(void **state)
{
	struct fixture *f = fixture(state);
	const char *bg1 = name(f, "sleep 30 & echo $! > %s/work/bg1", f->root);
	const char *bg2 = name(f, "sleep 30 & echo $! > %s/work/bg2", f->root);
	pid_t pid;

	/* Without --detach, what the command left in its group is killed. */
	job(f, COMMON(f, "a"), "--wait-ms", "30000", "--", PATH_ENV, "--",
	    SH(bg1), NULL);
	assert_string_equal(f->trailer, "done 0|exit 0||0");
	pid = read_pid(at(f, "bg1"), 1000);
	assert_true(wait_gone(pid, 5000));
	assert_true(none_left(5000));

	/* With --detach it lives on. */
	job(f, COMMON(f, "b"), "--wait-ms", "30000", "--detach", "--", PATH_ENV,
	    "--", SH(bg2), NULL);
	assert_string_equal(f->trailer, "done 0|exit 0||0");
	pid = read_pid(at(f, "bg2"), 1000);
	usleep(300000);
	assert_true(alive(pid));
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_true(wait_gone(pid, 5000));
}

/* The adapter's kill script on a running job: .cancel, the group, .x. */
static void test_cancel_running(void **state)
{
	struct fixture *f = fixture(state);
	const char *script =
		name(f, "echo $$ > %s/work/pid; exec sleep 30", f->root);
	pid_t runner, cmd;

	job(f, COMMON(f, "c"), "--wait-ms", "100", "--", PATH_ENV, "--",
	    SH(script), NULL);
	assert_string_equal(f->trailer, "pending");
	runner = read_pid(jfile(f, "c", ".pid"), 5000);
	cmd = read_pid(at(f, "pid"), 5000);
	write_file(jfile(f, "c", ".cancel"), "", 0600);
	assert_int_equal(kill(-runner, SIGKILL), 0);
	write_file(jfile(f, "c", ".x"), "137\n", 0600);

	job(f, "--attach", COMMON(f, "c"), "--wait-ms", "30000", NULL);
	assert_string_equal(f->trailer, "done 137|||0");
	assert_true(f->ms < 3000);
	assert_true(wait_gone(cmd, 5000));
	assert_true(wait_gone(runner, 5000));
	assert_true(none_left(5000));
}

/* A runner killed from outside, no .x: attach reports, never waits. */
static void test_runner_killed(void **state)
{
	struct fixture *f = fixture(state);
	pid_t runner;

	job(f, COMMON(f, "k"), "--wait-ms", "100", "--", PATH_ENV, "--",
	    "sleep", "30", NULL);
	assert_string_equal(f->trailer, "pending");
	runner = read_pid(jfile(f, "k", ".pid"), 5000);
	assert_int_equal(kill(-runner, SIGKILL), 0);
	assert_true(wait_gone(runner, 5000));

	job(f, "--attach", COMMON(f, "k"), "--wait-ms", "30000", NULL);
	assert_string_equal(f->trailer, "done |||0");
	assert_true(f->ms < 3000);
	assert_true(none_left(5000));
}

/* The kill script ran before the start arrived: .s, .cancel, .x. */
static void test_cancel_before_start(void **state)
{
	struct fixture *f = fixture(state);
	const char *script = name(f, "echo ran > %s/work/ran", f->root);

	write_file(jfile(f, "a", ".s"), "", 0600);
	write_file(jfile(f, "a", ".cancel"), "", 0600);
	write_file(jfile(f, "a", ".x"), "137\n", 0600);
	job(f, COMMON(f, "a"), "--wait-ms", "30000", "--", PATH_ENV, "--",
	    SH(script), NULL);
	assert_string_equal(f->trailer, "done 137|||0");
	assert_true(f->ms < 3000);
	usleep(300000);
	assert_false(exists(at(f, "ran")));
	assert_false(exists(jfile(f, "a", ".pid")));

	/*
	 * Only .cancel (the start had created .s but not yet written .pid
	 * when the kill script looked): the start kills its own runner.
	 */
	write_file(jfile(f, "b", ".cancel"), "", 0600);
	job(f, COMMON(f, "b"), "--wait-ms", "30000", "--", PATH_ENV, "--",
	    SH(name(f, "sleep 30; echo ran > %s/work/ran", f->root)), NULL);
	assert_string_equal(f->trailer, "done |||0");
	assert_true(f->ms < 5000);
	assert_true(wait_gone(read_pid(jfile(f, "b", ".pid"), 1000), 5000));
	assert_true(none_left(5000));
}

/* ---- --gc ---------------------------------------------------------------- */

static void test_gc(void **state)
{
	struct fixture *f = fixture(state);
	const size_t n = sizeof(suffixes) / sizeof(*suffixes);
	const char *gc;

	/* An earlier job with every file a job can have. */
	f->helper_env[0] = "SG_JOB_IN=x";
	job(f, COMMON(f, "old1"), "--wait-ms", "20000", "--stdin-env",
	    "SG_JOB_IN", "--", PATH_ENV, "--", SH("cat; echo e >&2"), NULL);
	assert_string_equal(f->trailer, "done 0|exit 0||1");
	write_file(jfile(f, "old1", ".to"), "", 0600);
	write_file(jfile(f, "old1", ".cancel"), "", 0600);
	write_file(jfile(f, "old1", ".up"), "", 0600);
	write_file(jfile(f, "old1", ".keep"), "", 0600);
	for (size_t i = 0; i < n; i++)
		assert_true(exists(jfile(f, "old1", suffixes[i])));
	job(f, COMMON(f, "old2"), "--wait-ms", "20000", "--merge", "--",
	    PATH_ENV, "--", "true", NULL);
	assert_true(exists(jfile(f, "old2", ".x")));

	gc = name(f, "%s/run/old1\n%s/run/old2", f->root, f->root);
	job(f, COMMON(f, "new"), "--wait-ms", "20000", "--gc", gc, "--",
	    PATH_ENV, "--", SH("echo new; echo e >&2"), NULL);
	assert_string_equal(f->head, "new\n");
	assert_string_equal(f->trailer, "done 0|exit 0||4");
	for (size_t i = 0; i < n; i++) {
		if (exists(jfile(f, "old1", suffixes[i])) ||
		    exists(jfile(f, "old2", suffixes[i])))
			fail_msg("%s of an old job is still there",
				 suffixes[i]);
	}
	/* Only a job's own files go; the new job's stay. */
	assert_true(exists(jfile(f, "old1", ".keep")));
	assert_true(exists(jfile(f, "new", ".s")));
	assert_true(exists(jfile(f, "new", ".o")));
	assert_true(exists(jfile(f, "new", ".e")));
	assert_true(exists(jfile(f, "new", ".pid")));
	assert_true(exists(jfile(f, "new", ".st")));
	assert_true(exists(jfile(f, "new", ".x")));
}

/* ---- the caller ---------------------------------------------------------- */

/* sg-helper's stdout and stderr close when it exits; the command runs on. */
static void test_caller_pipes_released(void **state)
{
	struct fixture *f = fixture(state);

	job(f, COMMON(f, "a"), "--wait-ms", "100", "--", PATH_ENV, "--",
	    "sleep", "10", NULL);
	assert_string_equal(f->trailer, "pending");
	assert_true(f->ms < 3000);
	assert_true(alive(read_pid(jfile(f, "a", ".pid"), 1000)));
}

static bool run_dir_empty(struct fixture *f)
{
	DIR *d = opendir(name(f, "%s/run", f->root));
	struct dirent *de;
	bool empty = true;

	assert_non_null(d);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 &&
		    strcmp(de->d_name, "..") != 0)
			empty = false;
	closedir(d);
	return empty;
}

static void test_usage(void **state)
{
	struct fixture *f = fixture(state);
	const char *p = pfx(f, "u");

	refused(f, "--mark", MARK, "--wait-ms", "10", "--", "--", "true", NULL);
	refused(f, "--dir", p, "--wait-ms", "10", "--", "--", "true", NULL);
	refused(f, "--dir", p, "--mark", MARK, "--wait-ms", "10", "true", NULL);
	refused(f, "--dir", p, "--mark", MARK, "--", PATH_ENV, "true", NULL);
	refused(f, "--dir", p, "--mark", MARK, "--", PATH_ENV, "--", NULL);
	refused(f, "--dir", p, "--mark", MARK, "--bogus", "1", "--", "--",
		"true", NULL);
	refused(f, "--dir", p, "--mark", MARK, "--wait-ms", "soon", "--", "--",
		"true", NULL);
	refused(f, "--dir", p, "--mark", MARK, "--max-out", "-1", "--", "--",
		"true", NULL);
	refused(f, "--dir", p, "--mark", MARK, "--wait-ms", NULL);
	refused(f, "--attach", "--dir", p, "--mark", MARK, "--cwd", "/", NULL);
	refused(f, "--attach", "--dir", p, "--wait-ms", "10", NULL);
	refused(f, "--dir", "relative/u", "--mark", MARK, "--wait-ms", "10", "--", "--",
		"true", NULL);
	refused(f, "--dir", p, "--mark", MARK, "--stdin-env", "A", "--stdin-file", "/dev/null",
		"--", "--", "true", NULL);
	assert_true(run_dir_empty(f));
	/* A refused call removes nothing, not even what --gc names. */
	write_file(jfile(f, "old", ".o"), "", 0600);
	refused(f, "--dir", p, "--mark", MARK, "--gc", pfx(f, "old"), "--bogus", "1", "--",
		"--", "true", NULL);
	assert_true(exists(jfile(f, "old", ".o")));
}

/*
 * --tmp: in the mount namespace of --bind, DIR is the command's /tmp (a
 * /tmp of the environment's own); the host's /tmp does not see its files.
 * The directories are made outside /tmp (here, in the test's working
 * directory), which the mount would hide.
 */
static void test_bind_tmp(void **state)
{
	struct fixture *f = fixture(state);
	char base[] = "sg-job-tmp-XXXXXX", *abs = NULL, probe[64], script[256];
	const char *src, *dst, *tmp;

	snprintf(probe, sizeof(probe), "sg-job-tmp-%ld", (long)getpid());
	refused(f, COMMON(f, "n"), "--tmp", "/", "--", PATH_ENV, "--", "true", NULL);
	assert_non_null(mkdtemp(base));
	assert_non_null(abs = realpath(base, NULL));
	if (strncmp(abs, "/tmp/", 5) == 0) {
		print_message("skipped: the working directory is under /tmp\n");
		goto out;
	}
	src = name(f, "%s/src", abs);
	dst = name(f, "%s/dst", abs);
	tmp = name(f, "%s/tmp", abs);
	assert_int_equal(mkdir(src, 0700), 0);
	assert_int_equal(mkdir(dst, 0700), 0);
	assert_int_equal(mkdir(tmp, 0700), 0);
	refused(f, COMMON(f, "n"), "--bind", src, "--bind-to", dst, "--tmp", "rel", "--",
		PATH_ENV, "--", "true", NULL);
	snprintf(script, sizeof(script), "echo x > /tmp/%s && cat /tmp/%s && pwd", probe, probe);
	job(f, COMMON(f, "t"), "--wait-ms", "20000", "--cwd", dst, "--bind", src, "--bind-to",
	    dst, "--tmp", tmp, "--", PATH_ENV, "--", SH(script), NULL);
	if (strstr(f->tail, "namespace")) {
		print_message("skipped: no mount namespace here: %s\n", f->tail);
		goto out;
	}
	assert_string_equal(f->head, name(f, "x\n%s\n", dst));
	assert_true(strncmp(f->trailer, "done 0|exit 0||", 15) == 0);
	assert_true(exists(name(f, "%s/%s", tmp, probe)));
	assert_false(exists(name(f, "/tmp/%s", probe)));
out:
	nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(abs);
}

/* An empty or relative line of --gc names nothing (not "./.s"). */
static void test_gc_relative_lines(void **state)
{
	struct fixture *f = fixture(state);
	char *argv[32];
	int n = 0;

	write_file(at(f, ".s"), "", 0600);
	write_file(at(f, ".o"), "", 0600);
	write_file(at(f, "x.o"), "", 0600);
	argv[n++] = (char *)"/bin/sh";
	argv[n++] = (char *)"-c";
	argv[n++] = (char *)"cd \"$1\" && shift && exec \"$@\"";
	argv[n++] = (char *)"sh";
	argv[n++] = (char *)at(f, "");
	argv[n++] = (char *)helper();
	argv[n++] = (char *)"job";
	argv[n++] = (char *)"--dir";
	argv[n++] = (char *)pfx(f, "a");
	argv[n++] = (char *)"--mark";
	argv[n++] = (char *)MARK;
	argv[n++] = (char *)"--wait-ms";
	argv[n++] = (char *)"20000";
	argv[n++] = (char *)"--max-out";
	argv[n++] = (char *)"100";
	argv[n++] = (char *)"--gc";
	argv[n++] = (char *)"\nx\n";
	argv[n++] = (char *)"--";
	argv[n++] = (char *)"--";
	argv[n++] = (char *)"/bin/true";
	argv[n] = NULL;
	run(f, argv);
	assert_int_equal(f->code, 0);
	split(f);
	assert_string_equal(f->trailer, "done 0|exit 0||0");
	assert_true(exists(at(f, ".s")));
	assert_true(exists(at(f, ".o")));
	assert_true(exists(at(f, "x.o")));
}

/* A caller that ignores SIGCHLD must not make every command a timeout. */
static void test_sigchld_ignored(void **state)
{
	struct fixture *f = fixture(state);
	char *argv[] = { (char *)"/bin/sh", (char *)"-c",
			 (char *)"trap '' CHLD; exec \"$0\" job \"$@\"", (char *)helper(),
			 (char *)"--dir", (char *)pfx(f, "a"), (char *)"--mark", (char *)MARK,
			 (char *)"--wait-ms", (char *)"20000", (char *)"--max-out",
			 (char *)"100", (char *)"--timeout-ms", (char *)"10000", (char *)"--",
			 (char *)"--", (char *)"/bin/echo", (char *)"hi", NULL };

	run(f, argv);
	assert_int_equal(f->code, 0);
	split(f);
	assert_string_equal(f->head, "hi\n");
	assert_string_equal(f->trailer, "done 0|exit 0||3");
	assert_true(f->ms < 5000);
}

/* A start that fails with --merge says so once, in the head. */
static void test_merge_failure_once(void **state)
{
	struct fixture *f = fixture(state);

	job(f, COMMON(f, "a"), "--wait-ms", "20000", "--merge", "--cwd", "/nonexistent-dir",
	    "--", PATH_ENV, "--", "true", NULL);
	assert_string_equal(f->trailer, "done 127|exit 127||54");
	assert_non_null(strstr(f->head, "cannot enter the directory"));
	assert_int_equal(f->tail_len, 0);
}

/* ---- --rm: the output relayed through pipes ------------------------------ */

/* Nothing of a --rm job is left in run/ once it has answered. */
static void assert_no_files(struct fixture *f, const char *id)
{
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(*suffixes); i++)
		if (exists(jfile(f, id, suffixes[i])))
			fail_msg("%s%s is still there", id, suffixes[i]);
}

/* The same replies as from the files: streams, status, bounds, the tail. */
static void test_rm_relay(void **state)
{
	struct fixture *f = fixture(state);
	static const char line[] = "abcdefghi\n";
	size_t want_len;
	char *want;

	job(f, COMMON(f, "a"), "--rm", "--wait-ms", "20000", "--", PATH_ENV, "--",
	    SH("echo hi; echo err >&2; exit 3"), NULL);
	assert_string_equal(f->head, "hi\n");
	assert_string_equal(f->trailer, "done 3|exit 3||3");
	assert_string_equal(f->tail, "err\n");
	assert_no_files(f, "a");

	job(f, COMMON(f, "b"), "--rm", "--wait-ms", "20000", "--merge", "--", PATH_ENV,
	    "--", SH("echo hi; echo err >&2; echo more; exit 3"), NULL);
	assert_string_equal(f->head, "hi\nerr\nmore\n");
	assert_string_equal(f->trailer, "done 3|exit 3||12");
	assert_int_equal(f->tail_len, 0);

	job(f, COMMON(f, "c"), "--rm", "--wait-ms", "20000", "--", PATH_ENV, "--",
	    SH("printf '\\000\\377ab\\n\\000'; kill -TERM $$"), NULL);
	assert_int_equal(f->head_len, 6);
	assert_memory_equal(f->head, "\0\377ab\n\0", 6);
	assert_string_equal(f->trailer, "done 143|signal 15||6");

	/* The head cut at --max-out, beyond a pipe's buffer (spliced). */
	job(f, "--dir", pfx(f, "d"), "--mark", MARK, "--max-out", "150000", "--rm",
	    "--wait-ms", "20000", "--", PATH_ENV, "--",
	    SH("yes abcdefghi | head -c 200000; echo e >&2"), NULL);
	assert_int_equal(f->head_len, 150000);
	for (size_t i = 0; i < 150000; i++)
		if (f->head[i] != line[i % 10])
			fail_msg("byte %zu is %d", i, f->head[i]);
	assert_string_equal(f->trailer, "done 0|exit 0||200000");
	assert_string_equal(f->tail, "e\n");

	/* --keep-tail: head, tail and the line count, as from the file. */
	job(f, "--dir", pfx(f, "t"), "--mark", MARK, "--max-out", "20", "--keep-tail",
	    "--rm", "--wait-ms", "20000", "--", PATH_ENV, "--", SH("seq 1 1000"), NULL);
	assert_int_equal(f->head_len, 20);
	assert_memory_equal(f->head, "1\n2\n3\n4\n5\n\n999\n1000\n", 20);
	assert_string_equal(f->trailer, "done 0|exit 0||3893|1000");
	/*
	 * A tail that wraps the ring many times, written in odd pieces: the
	 * same bytes as the files give.
	 */
	job(f, "--dir", pfx(f, "w"), "--mark", MARK, "--max-out", "200000", "--keep-tail",
	    "--wait-ms", "20000", "--", PATH_ENV, "--",
	    SH("seq 1 300000 | tr -d '\\n' | fold -w 7777; echo"), NULL);
	assert_int_equal(f->head_len, 200000);
	assert_non_null(want = malloc(f->len));
	memcpy(want, f->out, f->len);
	want_len = f->len;
	job(f, "--dir", pfx(f, "w2"), "--mark", MARK, "--max-out", "200000", "--keep-tail",
	    "--rm", "--wait-ms", "20000", "--", PATH_ENV, "--",
	    SH("seq 1 300000 | tr -d '\\n' | fold -w 7777; echo"), NULL);
	assert_int_equal(f->len, want_len);
	assert_memory_equal(f->out, want, want_len);
	assert_memory_equal(f->head, "123456789101112", 15);
	assert_memory_equal(f->head + 200000 - 7, "300000\n", 7);
	free(want);
	/* Up to --max-out, all of it and no line count. */
	job(f, "--dir", pfx(f, "s"), "--mark", MARK, "--max-out", "20", "--keep-tail",
	    "--rm", "--wait-ms", "20000", "--", PATH_ENV, "--", SH("seq 1 9"), NULL);
	assert_string_equal(f->head, "1\n2\n3\n4\n5\n6\n7\n8\n9\n");
	assert_string_equal(f->trailer, "done 0|exit 0||18");

	/* --max-err cuts stderr; a start that fails still answers once. */
	job(f, COMMON(f, "e"), "--rm", "--max-err", "5", "--wait-ms", "20000", "--", PATH_ENV,
	    "--", SH("echo 0123456789 >&2"), NULL);
	assert_string_equal(f->tail, "01234");
	job(f, COMMON(f, "n"), "--rm", "--wait-ms", "20000", "--", PATH_ENV, "--",
	    "sg-no-such-command", NULL);
	assert_string_equal(f->trailer, "done 127|exit 127||0");
	assert_string_equal(f->tail,
			    "sg-helper: sg-no-such-command: No such file or directory\n");
	assert_no_files(f, "n");
	assert_true(none_left(5000));
}

/* Timeouts and leftovers: the command's group dies, the reply comes. */
static void test_rm_group(void **state)
{
	struct fixture *f = fixture(state);
	const char *script =
		name(f, "echo $$ > %s/work/pid; echo started; exec sleep 30", f->root);
	const char *bg = name(f, "sleep 30 & echo $! > %s/work/bg", f->root);
	/* It has left the group once its pid is written. */
	const char *away = name(f, "setsid sh -c 'echo $$ > %s/work/away; exec sleep 30' & "
				"while [ ! -s %s/work/away ]; do sleep 0.05; done; echo left",
				f->root, f->root);
	pid_t pid;

	job(f, COMMON(f, "t"), "--rm", "--wait-ms", "30000", "--timeout-ms", "1000", "--",
	    PATH_ENV, "--", SH(script), NULL);
	assert_string_equal(f->head, "started\n");
	assert_string_equal(f->trailer, "done 137|signal 9|1|8");
	assert_true(f->ms >= 900);
	assert_true(f->ms < 8000);
	assert_true(wait_gone(read_pid(at(f, "pid"), 1000), 5000));
	assert_true(none_left(5000));

	job(f, COMMON(f, "l"), "--rm", "--wait-ms", "30000", "--", PATH_ENV, "--", SH(bg),
	    NULL);
	assert_string_equal(f->trailer, "done 0|exit 0||0");
	assert_true(wait_gone(read_pid(at(f, "bg"), 1000), 5000));
	assert_true(none_left(5000));

	/*
	 * A process that left the group holds stdout: the reply still comes
	 * (after the drain's 200 ms, not its 30 s), and writing on does not
	 * kill it with SIGPIPE.
	 */
	job(f, COMMON(f, "a"), "--rm", "--wait-ms", "30000", "--", PATH_ENV, "--",
	    SH(away), NULL);
	assert_string_equal(f->head, "left\n");
	assert_string_equal(f->trailer, "done 0|exit 0||5");
	assert_true(f->ms < 10000);
	pid = read_pid(at(f, "away"), 1000);
	usleep(300000);
	assert_true(alive(pid));
}

/*
 * The command is sg-helper itself (confine, as the gateway sends it): run
 * in the forked child without a second exec, it must still confine.
 */
static void test_rm_self(void **state)
{
	struct fixture *f = fixture(state);
	const char *root = at(f, "");
	const char *script = name(f, "echo in > %s/work/in; echo out > %s/run/out; echo done",
				  f->root, f->root);

	job(f, COMMON(f, "c"), "--rm", "--wait-ms", "20000", "--", PATH_ENV, "--", helper(),
	    "confine", "--mode", "standard", "--root", root, "--", SH(script), NULL);
	if (strstr(f->tail, "Landlock")) {
		print_message("skipped: no Landlock here: %s\n", f->tail);
		return;
	}
	assert_true(exists(at(f, "in")));
	assert_false(exists(name(f, "%s/run/out", f->root)));
	assert_string_equal(f->head, "done\n");
	assert_non_null(strstr(f->tail, "ermission denied"));

	/* A usage error of the command is its own status, as after an exec. */
	job(f, COMMON(f, "u"), "--rm", "--wait-ms", "20000", "--", PATH_ENV, "--", helper(),
	    "confine", "--mode", "sideways", "--root", root, "--", "true", NULL);
	assert_string_equal(f->trailer, "done 126|exit 126||0");
	assert_non_null(strstr(f->tail, "sg-helper: "));
}

/* `proc spawn`'s words after the job's, for a foreground run of script. */
#define SPAWN(f, id, script)                                                             \
	helper(), "proc", "spawn", "--ctl", name(f, "%s/ctl", (f)->root), "--id", (id),      \
		"--session", "s", "--cwd", at(f, ""), "--root", at(f, ""), "--wait-ms",     \
		"20000", "--command", (script)

/*
 * A detaching --rm job runs `proc spawn` in its own process (job_inline):
 * the result comes from memory, no file but .s and .pid is made, and a
 * spawn that outlasts --wait-ms answers pending, a child of the job's
 * waiting on.  An attach right after pending gets the result: the child
 * is named in .pid before the answer (before, the parent's pid was there
 * for a moment, and an attach then reported an empty, statusless result).
 */
static void test_inline_spawn(void **state)
{
	struct fixture *f = fixture(state);

	job(f, COMMON(f, "a"), "--rm", "--detach", "--wait-ms", "20000", "--", PATH_ENV, "--",
	    SPAWN(f, "p-a", "echo fast"), NULL);
	assert_non_null(strstr(f->head, "\"ended\":true"));
	assert_non_null(strstr(f->head, "\"stdout\":\"fast\\n\""));
	assert_int_equal(strncmp(f->trailer, "done 0|exit 0||", 15), 0);
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(*suffixes); i++)
		assert_false(exists(jfile(f, "a", suffixes[i])));

	job(f, COMMON(f, "b"), "--rm", "--detach", "--wait-ms", "200", "--", PATH_ENV, "--",
	    SPAWN(f, "p-b", "sleep 2; echo late"), NULL);
	assert_string_equal(f->trailer, "pending");
	job(f, "--attach", COMMON(f, "b"), "--wait-ms", "30000", NULL);
	assert_non_null(strstr(f->head, "\"stdout\":\"late\\n\""));
	assert_int_equal(strncmp(f->trailer, "done 0|exit 0||", 15), 0);

	/* --timeout-ms after the answer: recorded as a runner's timer would. */
	job(f, COMMON(f, "c"), "--rm", "--detach", "--wait-ms", "200", "--timeout-ms", "1000",
	    "--", PATH_ENV, "--", SPAWN(f, "p-c", "sleep 5"), NULL);
	assert_string_equal(f->trailer, "pending");
	job(f, "--attach", COMMON(f, "c"), "--wait-ms", "30000", NULL);
	assert_string_equal(f->trailer, "done 137|signal 9|1|0");
}

/*
 * --linger: the job supervises its spawn's command itself, and a reply
 * after which it lives on ends with "<mark> end".  A spawn that outlasts
 * --wait-ms answers pending and closes the request's pipes at once while
 * the job supervises on, and an attach reads the result the job leaves at
 * the command's end.
 */
static void test_linger_spawn(void **state)
{
	struct fixture *f = fixture(state);

	job(f, COMMON(f, "a"), "--rm", "--detach", "--linger", "--wait-ms", "20000", "--",
	    PATH_ENV, "--", SPAWN(f, "p-a", "echo fast"), NULL);
	assert_non_null(strstr(f->head, "\"stdout\":\"fast\\n\""));
	assert_int_equal(strncmp(f->trailer, "done 0|exit 0||", 15), 0);
	/* It ended with its command: the request ends by its exit, no end line. */
	assert_false(sg_job_ended(f->tail, f->tail_len, MARK));

	job(f, COMMON(f, "b"), "--rm", "--detach", "--linger", "--wait-ms", "200", "--",
	    PATH_ENV, "--", SPAWN(f, "p-b", "sleep 4; echo late"), NULL);
	assert_string_equal(f->trailer, "pending");
	assert_true(sg_job_ended(f->tail, f->tail_len, MARK));
	assert_in_range(f->ms, 0, 3000); /* the pipes closed before the command ended */
	job(f, "--attach", COMMON(f, "b"), "--wait-ms", "30000", NULL);
	assert_non_null(strstr(f->head, "\"stdout\":\"late\\n\""));
	assert_int_equal(strncmp(f->trailer, "done 0|exit 0||", 15), 0);
}

/*
 * The caller left (its end of stdout closed): the job kills the command's
 * group instead of dying of SIGPIPE and leaving the command running.
 */
static void test_rm_reader_gone(void **state)
{
	struct fixture *f = fixture(state);
	const char *script = name(f, "echo $$ > %s/work/pid; echo one; sleep 1; echo two; exec sleep 30",
				  f->root);
	int out[2], st;
	pid_t pid, cmd;

	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		if (null < 0 || dup2(null, 0) < 0 || dup2(out[1], 1) < 0 || dup2(null, 2) < 0)
			_exit(125);
		execl(helper(), helper(), "job", "--dir", pfx(f, "g"), "--mark", MARK,
		      "--max-out", "100", "--rm", "--wait-ms", "60000", "--", PATH_ENV, "--",
		      "/bin/sh", "-c", script, (char *)NULL);
		_exit(125);
	}
	close(out[1]);
	cmd = read_pid(at(f, "pid"), 10000);
	close(out[0]);
	assert_true(wait_gone(cmd, 10000));
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_true(exists(jfile(f, "g", ".cancel")));
	assert_true(none_left(5000));
}

/* ---- the reply read back, from a hostile environment -------------------- */

static struct sg_job_reply parsed(const char *text)
{
	struct sg_job_reply r;

	sg_job_parse(text, strlen(text), MARK, &r);
	return r;
}

/*
 * sg_job_parse() reads text that anything inside the environment can
 * print: only the last mark after a newline is the trailer, numbers out of
 * range are not statuses, and a trailer that ends the text has no stderr.
 */
static void test_reply_parse(void **state)
{
	struct sg_job_reply r;

	(void)state;
	r = parsed("out\n" MARK " done 0|exit 3|0|4\nerr");
	assert_int_equal(r.state, SG_JOB_IS_DONE);
	assert_int_equal(r.exit_code, 3);
	assert_int_equal(r.head_len, 3);
	assert_int_equal(r.err_at, strlen("out\n" MARK " done 0|exit 3|0|4\n"));
	assert_int_equal(r.out_size, 4);

	/* A trailer the command printed is not the job's. */
	r = parsed("\n" MARK " done 0|exit 0|0|0\n\n" MARK " done 1|signal 15|0|0\n");
	assert_int_equal(r.signal, 15);
	assert_int_equal(r.exit_code, -1);
	r = parsed("x" MARK " done 0|exit 0|0|0\n");
	assert_int_equal(r.state, SG_JOB_NONE);

	/* Out of int's range: not an exit status; the runner's word stands. */
	r = parsed("\n" MARK " done 0|exit 99999999999|0|0\n");
	assert_int_equal(r.exit_code, 0);
	assert_false(r.lost);
	r = parsed("\n" MARK " done 99999999999|exit 99999999999|0|0\n");
	assert_int_equal(r.exit_code, -1);
	assert_true(r.lost);

	/* The trailer is the last line: nothing after it is stderr. */
	r = parsed("\n" MARK " done 0|exit 0|0|0");
	assert_int_equal(r.state, SG_JOB_IS_DONE);
	assert_int_equal(r.err_at, strlen("\n" MARK " done 0|exit 0|0|0"));
	assert_int_equal(parsed("\n" MARK " pending\n").state, SG_JOB_IS_PENDING);
	assert_int_equal(parsed("\n" MARK " lies\n").state, SG_JOB_BAD);

	/* A --linger job's last line says the reply is whole, and is no part of it. */
	assert_true(sg_job_ended("\n" MARK " end\n", strlen("\n" MARK " end\n"), MARK));
	assert_false(sg_job_ended("x" MARK " end\n", strlen("x" MARK " end\n"), MARK));
	assert_false(sg_job_ended("\n" MARK " end\nx", strlen("\n" MARK " end\nx"), MARK));
	assert_false(sg_job_ended("\n" MARK " end", strlen("\n" MARK " end"), MARK));
	assert_int_equal(parsed("\n" MARK " pending\n\n" MARK " end\n").state, SG_JOB_IS_PENDING);
	r = parsed("out\n" MARK " done 0|exit 3|0|4\nerr\n" MARK " end\n");
	assert_int_equal(r.state, SG_JOB_IS_DONE);
	assert_int_equal(r.exit_code, 3);
	assert_int_equal(strlen("out\n" MARK " done 0|exit 3|0|4\nerr\n" MARK " end\n") -
			 strlen("\n" MARK " end\n") - r.err_at, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reply_parse),
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_result_streams),
		T(test_raw_bytes),
		T(test_signal),
		T(test_env_exact),
		T(test_path_lookup),
		T(test_exec_failures),
		T(test_stdin),
		T(test_no_fd_leaks),
		T(test_max_out),
		T(test_pending_then_attach),
		T(test_start_once),
		T(test_timeout),
		T(test_leftovers),
		T(test_cancel_running),
		T(test_runner_killed),
		T(test_cancel_before_start),
		T(test_gc),
		T(test_caller_pipes_released),
		T(test_usage),
		T(test_gc_relative_lines),
		T(test_bind_tmp),
		T(test_sigchld_ignored),
		T(test_merge_failure_once),
		T(test_rm_relay),
		T(test_rm_group),
		T(test_rm_self),
		T(test_rm_reader_gone),
		T(test_inline_spawn),
		T(test_linger_spawn),
#undef T
	};

	/* Orphans come here, not to pid 1: "gone" and the cleanup are exact. */
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
