/*
 * test_exec.c - core/exec.c against sg-test-helper (SG_TEST_HELPER).
 *
 * The test process makes itself a child subreaper, so the grandchildren
 * and daemons the helper leaves behind are reparented here: "gone" can
 * then be checked exactly (reaped, then kill(pid, 0) fails with ESRCH)
 * instead of depending on what pid 1 of the machine does with zombies.
 */
/* _GNU_SOURCE: prctl(PR_SET_CHILD_SUBREAPER) is Linux-only. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/exec.h"
#include "base/limits.h"

static char helper[PATH_MAX];
static char helper_dir[PATH_MAX];
static const char *const base_env[] = { "PATH=/usr/bin:/bin", NULL };

static void find_helper(void)
{
	const char *env = getenv("SG_TEST_HELPER");
	char *slash;
	ssize_t n;

	if (env && *env) {
		snprintf(helper, sizeof(helper), "%s", env);
	} else {
		/* Run by hand: the helper is built beside the test programs. */
		n = readlink("/proc/self/exe", helper, sizeof(helper) - 32);
		assert_true(n > 0);
		helper[n] = '\0';
		slash = strrchr(helper, '/');
		assert_non_null(slash);
		snprintf(slash + 1, 32, "sg-test-helper");
	}
	assert_int_equal(access(helper, X_OK), 0);
	snprintf(helper_dir, sizeof(helper_dir), "%s", helper);
	slash = strrchr(helper_dir, '/');
	*slash = '\0';
}

/* Run the helper with mode and args, default settings otherwise. */
static sg_err run_child(struct sg_child *c, struct sg_exec_result *r,
			struct sg_cancel *cancel)
{
	struct sg_errinfo err = { 0 };

	if (!c->envp)
		c->envp = base_env;
	return sg_exec_run(c, r, cancel, &err);
}

static long first_number(const char *s)
{
	return strtol(s, NULL, 10);
}

/* Wait up to ms for pid (reparented to us) to die; true when it is gone. */
static bool wait_gone(pid_t pid, int ms)
{
	for (int i = 0; i < ms / 5; i++) {
		int st;

		if (waitpid(pid, &st, WNOHANG) == pid ||
		    (kill(pid, 0) < 0 && errno == ESRCH)) {
			return kill(pid, 0) < 0 && errno == ESRCH;
		}
		usleep(5000);
	}
	return false;
}

static void kill_and_reap(pid_t pid)
{
	kill(pid, SIGKILL);
	assert_true(wait_gone(pid, 2000));
}

static void test_exit_codes(void **state)
{
	struct sg_exec_result r;
	const int codes[] = { 0, 3, 255 };

	(void)state;
	sg_exec_result_init(&r, SG_KiB);
	for (size_t i = 0; i < 3; i++) {
		char k[8];
		const char *argv[] = { helper, "exit", k, NULL };
		struct sg_child c = { .argv = argv };

		snprintf(k, sizeof(k), "%d", codes[i]);
		assert_int_equal(run_child(&c, &r, NULL), SG_OK);
		assert_int_equal(r.exit_code, codes[i]);
		assert_int_equal(r.signal, 0);
		assert_false(r.timed_out);
		assert_true(r.duration_ms >= 0 && r.duration_ms < 5000);
	}
	sg_exec_result_release(&r);
}

static void test_signals_reported(void **state)
{
	struct sg_exec_result r;
	const char *kill9[] = { helper, "signal", "9", NULL };
	const char *term[] = { helper, "signal", "15", NULL };
	struct sg_child c = { .argv = kill9 };

	(void)state;
	sg_exec_result_init(&r, SG_KiB);
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_int_equal(r.exit_code, -1);
	assert_int_equal(r.signal, SIGKILL);
	c.argv = term;
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_int_equal(r.exit_code, -1);
	assert_int_equal(r.signal, SIGTERM);
	sg_exec_result_release(&r);

	assert_string_equal(sg_exec_signame(SIGKILL), "SIGKILL");
	assert_string_equal(sg_exec_signame(SIGTERM), "SIGTERM");
	assert_string_equal(sg_exec_signame(SIGPIPE), "SIGPIPE");
	assert_string_equal(sg_exec_signame(40), "SIG40");
	assert_string_equal(sg_exec_signame(1000), "SIG?");
	assert_string_equal(sg_exec_signame(-1), "SIG?");
}

static void test_stdin_fed(void **state)
{
	const size_t n = 3 * SG_MiB; /* far beyond a pipe's buffer */
	const char *argv[] = { helper, "echo-stdin", NULL };
	struct sg_exec_result r;
	char *data = malloc(n);

	(void)state;
	assert_non_null(data);
	for (size_t i = 0; i < n; i++)
		data[i] = (char)(i * 7 + i / 251);
	struct sg_child c = { .argv = argv, .stdin_data = data, .stdin_len = n };
	sg_exec_result_init(&r, 4 * SG_MiB);
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_int_equal(r.exit_code, 0);
	assert_int_equal(r.out.len, n);
	assert_memory_equal(r.out.p, data, n);
	assert_false(r.truncated);

	/* No stdin: the child reads EOF at once, not our terminal. */
	c.stdin_data = NULL;
	c.stdin_len = 0;
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_int_equal(r.exit_code, 0);
	assert_int_equal(r.out.len, 0);
	sg_exec_result_release(&r);
	free(data);
}

/*
 * The child exits without reading 1 MiB of stdin.  SIGPIPE is at its
 * default action in this test, so a write that raised it would kill us.
 */
static void test_stdin_not_read(void **state)
{
	const size_t n = SG_MiB;
	const char *argv[] = { helper, "exit", "4", NULL };
	struct sg_exec_result r;
	char *data = calloc(1, n);
	void (*old)(int) = signal(SIGPIPE, SIG_DFL);

	(void)state;
	assert_non_null(data);
	struct sg_child c = { .argv = argv, .stdin_data = data, .stdin_len = n };
	sg_exec_result_init(&r, SG_KiB);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(run_child(&c, &r, NULL), SG_OK);
		assert_int_equal(r.exit_code, 4);
	}
	sg_exec_result_release(&r);
	signal(SIGPIPE, old);
	free(data);
}

static void test_capture_cap(void **state)
{
	const char *argv[] = { helper, "print", "10485760", NULL };
	struct sg_child c = { .argv = argv };
	struct sg_exec_result r;

	(void)state;
	sg_exec_result_init(&r, SG_MiB);
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	/* All 10 MiB were drained: the child was never blocked, and exited. */
	assert_int_equal(r.exit_code, 0);
	assert_false(r.timed_out);
	assert_true(r.truncated);
	assert_int_equal(r.out.len, SG_MiB);
	for (size_t i = 0; i < r.out.len; i++)
		if (r.out.p[i] != (char)('a' + i % 26))
			fail_msg("byte %zu is %d", i, r.out.p[i]);
	assert_true(r.duration_ms < 5000);

	/* Exactly at the cap is not truncation. */
	argv[2] = "1048576";
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_int_equal(r.out.len, SG_MiB);
	assert_false(r.truncated);
	sg_exec_result_release(&r);
}

static void test_merge_and_separate(void **state)
{
	const char *argv[] = { helper, "interleave", "50", NULL };
	struct sg_child c = { .argv = argv, .merge = true };
	struct sg_exec_result r;
	char want_merged[2048] = "", want_out[1024] = "", want_err[1024] = "";
	size_t m = 0, o = 0, e = 0;

	(void)state;
	for (int i = 0; i < 50; i++) {
		m += (size_t)snprintf(want_merged + m, sizeof(want_merged) - m,
				      "out %d\nerr %d\n", i, i);
		o += (size_t)snprintf(want_out + o, sizeof(want_out) - o,
				      "out %d\n", i);
		e += (size_t)snprintf(want_err + e, sizeof(want_err) - e,
				      "err %d\n", i);
	}
	sg_exec_result_init(&r, SG_MiB);
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_string_equal(r.out.p, want_merged);
	assert_int_equal(r.err.len, 0);

	c.merge = false;
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_string_equal(r.out.p, want_out);
	assert_string_equal(r.err.p, want_err);
	sg_exec_result_release(&r);
}

static void test_stderr_clipped(void **state)
{
	char *text = malloc(3 * SG_HELPER_STDERR);
	const char *argv[] = { helper, "stderr", text, NULL };
	struct sg_child c = { .argv = argv };
	struct sg_exec_result r;

	(void)state;
	assert_non_null(text);
	memset(text, 'e', 3 * SG_HELPER_STDERR - 1);
	text[3 * SG_HELPER_STDERR - 1] = '\0';
	sg_exec_result_init(&r, SG_KiB);
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_int_equal(r.exit_code, 0);
	assert_int_equal(r.err.len, SG_HELPER_STDERR);
	assert_false(r.truncated); /* the flag is about stdout */
	sg_exec_result_release(&r);
	free(text);
}

static void test_env_exact(void **state)
{
	const char *argv[] = { helper, "env", NULL };
	const char *envp[] = { "A=1", "B=two words", "PATH=/nowhere", NULL };
	struct sg_child c = { .argv = argv, .envp = envp };
	struct sg_exec_result r;
	struct sg_errinfo err = { 0 };

	(void)state;
	setenv("SG_EXEC_LEAK_CHECK", "must-not-appear", 1);
	sg_exec_result_init(&r, SG_KiB);
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_string_equal(r.out.p, "A=1\nB=two words\nPATH=/nowhere\n");

	/* NULL envp: an empty environment, not ours. */
	c.envp = NULL;
	assert_int_equal(sg_exec_run(&c, &r, NULL, &err), SG_OK);
	assert_int_equal(r.exit_code, 0);
	assert_string_equal(r.out.p, "");
	sg_exec_result_release(&r);
	unsetenv("SG_EXEC_LEAK_CHECK");
}

static void test_program_lookup(void **state)
{
	const char *missing[] = { "sg-no-such-program", "x", NULL };
	const char *by_name[] = { "sg-test-helper", "exit", "7", NULL };
	const char *truecmd[] = { "true", NULL };
	char path_var[PATH_MAX + 32];
	const char *envp[] = { path_var, NULL };
	const char *nopath[] = { "PATH=/nonexistent:relative/dir:", NULL };
	struct sg_child c = { .argv = missing };
	struct sg_exec_result r;

	(void)state;
	sg_exec_result_init(&r, SG_KiB);
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_int_equal(r.exit_code, 127);
	assert_string_equal(r.err.p,
			    "sg-no-such-program: No such file or directory");

	/* Found through the child's PATH, which has the helper's directory. */
	snprintf(path_var, sizeof(path_var), "PATH=/nonexistent:%s", helper_dir);
	c.argv = by_name;
	c.envp = envp;
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_int_equal(r.exit_code, 7);

	/* Our own PATH has /usr/bin; the child's does not. */
	c.argv = truecmd;
	c.envp = nopath;
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_int_equal(r.exit_code, 127);

	/* A path that exists but is not executable. */
	const char *notexec[] = { "/etc/passwd", NULL };
	c.argv = notexec;
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_int_equal(r.exit_code, 127);
	assert_string_equal(r.err.p, "/etc/passwd: Permission denied");

	/* A relative path with a slash is found under the child's cwd. */
	const char *relative[] = { "./sg-test-helper", "exit", "5", NULL };
	const char *rel_missing[] = { "./sg-no-such-program", NULL };
	c.argv = relative;
	c.cwd = helper_dir;
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_int_equal(r.exit_code, 5);
	c.argv = rel_missing;
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_int_equal(r.exit_code, 127);
	assert_string_equal(r.err.p,
			    "./sg-no-such-program: No such file or directory");
	sg_exec_result_release(&r);
}

static void test_cwd(void **state)
{
	const char *argv[] = { helper, "pwd", NULL };
	struct sg_child c = { .argv = argv, .cwd = "/tmp" };
	struct sg_exec_result r;

	(void)state;
	sg_exec_result_init(&r, SG_KiB);
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_string_equal(r.out.p, "/tmp\n");
	c.cwd = "/nonexistent/dir";
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_int_equal(r.exit_code, 127);
	assert_string_equal(r.err.p,
			    "/nonexistent/dir: No such file or directory");
	sg_exec_result_release(&r);
}

static void test_timeout_kills_group(void **state)
{
	const char *argv[] = { helper, "grandchild", "10000", "10000", NULL };
	struct sg_child c = { .argv = argv, .timeout_ms = 200 };
	struct sg_exec_result r;
	pid_t gc;

	(void)state;
	sg_exec_result_init(&r, SG_KiB);
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_true(r.timed_out);
	assert_int_equal(r.exit_code, -1);
	assert_int_equal(r.signal, SIGKILL);
	assert_true(r.duration_ms >= 200 && r.duration_ms < 1500);
	gc = (pid_t)first_number(r.out.p);
	assert_true(gc > 0);
	assert_true(wait_gone(gc, 2000));
	sg_exec_result_release(&r);
}

static void test_timeout_term_then_kill(void **state)
{
	const char *stubborn[] = { helper, "ignore-term", "10000", NULL };
	const char *polite[] = { helper, "sleep", "10000", NULL };
	struct sg_child c = { .argv = stubborn, .timeout_ms = 200,
			      .term_signal = SIGTERM, .term_grace_ms = 300 };
	struct sg_exec_result r;

	(void)state;
	sg_exec_result_init(&r, SG_KiB);
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_true(r.timed_out);
	assert_string_equal(r.out.p, "ready\n");
	assert_int_equal(r.signal, SIGKILL);
	assert_true(r.duration_ms >= 480 && r.duration_ms < 2000);

	c.argv = polite;
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_true(r.timed_out);
	assert_int_equal(r.signal, SIGTERM);
	assert_true(r.duration_ms < 450);
	sg_exec_result_release(&r);
}

static void test_timeout_keeps_output(void **state)
{
	const char *argv[] = { helper, "spin-output", "5000", NULL };
	struct sg_child c = { .argv = argv, .timeout_ms = 150 };
	struct sg_exec_result r;

	(void)state;
	sg_exec_result_init(&r, SG_MiB);
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_true(r.timed_out);
	assert_non_null(strstr(r.out.p, "tick 0\ntick 1\n"));
	sg_exec_result_release(&r);
}

static void test_group_killed_after_exit(void **state)
{
	/* The parent exits at once; the grandchild holds stdout open. */
	const char *argv[] = { helper, "grandchild", "10000", "0", NULL };
	struct sg_child c = { .argv = argv };
	struct sg_exec_result r;
	pid_t gc;

	(void)state;
	sg_exec_result_init(&r, SG_KiB);
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_int_equal(r.exit_code, 0);
	assert_true(r.duration_ms < 1000);
	gc = (pid_t)first_number(r.out.p);
	assert_true(gc > 0);
	assert_true(wait_gone(gc, 2000));
	sg_exec_result_release(&r);
}

struct firer {
	struct sg_cancel *cancel;
	int delay_ms;
	sg_err why;
	int64_t fired_ms;
};

static void *fire_later(void *arg)
{
	struct firer *f = arg;

	usleep((useconds_t)f->delay_ms * 1000);
	f->fired_ms = sg_now_ms();
	sg_cancel_fire(f->cancel, f->why);
	return NULL;
}

static void test_cancel(void **state)
{
	const char *argv[] = { helper, "grandchild", "10000", "10000", NULL };
	struct sg_child c = { .argv = argv };
	struct sg_exec_result r;
	struct sg_errinfo err = { 0 };
	struct sg_cancel cancel;
	struct firer f = { .cancel = &cancel, .delay_ms = 150,
			   .why = SG_E_CANCELLED };
	pthread_t t;
	int64_t done;
	pid_t gc;

	(void)state;
	assert_int_equal(sg_cancel_init(&cancel), SG_OK);
	sg_exec_result_init(&r, SG_KiB);
	c.envp = base_env;
	assert_int_equal(pthread_create(&t, NULL, fire_later, &f), 0);
	assert_int_equal(sg_exec_run(&c, &r, &cancel, &err), SG_E_CANCELLED);
	done = sg_now_ms();
	pthread_join(t, NULL);
	assert_true(done - f.fired_ms < 200);
	assert_int_equal(err.code, SG_E_CANCELLED);
	assert_true(err.msg[0] != '\0');
	assert_int_equal(r.signal, SIGKILL);
	gc = (pid_t)first_number(r.out.p);
	assert_true(gc > 0);
	assert_true(wait_gone(gc, 2000));

	/* Already fired: nothing is started, the reason comes back. */
	sg_err_clear(&err);
	assert_int_equal(sg_exec_run(&c, &r, &cancel, &err), SG_E_CANCELLED);
	assert_int_equal(r.out.len, 0);
	sg_cancel_release(&cancel);

	/* Another reason (a deadline) is passed through as it is. */
	assert_int_equal(sg_cancel_init(&cancel), SG_OK);
	f.why = SG_E_TIMEOUT;
	f.delay_ms = 50;
	sg_err_clear(&err);
	assert_int_equal(pthread_create(&t, NULL, fire_later, &f), 0);
	assert_int_equal(sg_exec_run(&c, &r, &cancel, &err), SG_E_TIMEOUT);
	pthread_join(t, NULL);
	gc = (pid_t)first_number(r.out.p);
	assert_true(wait_gone(gc, 2000));
	sg_cancel_release(&cancel);
	sg_exec_result_release(&r);
}

static void test_detaches(void **state)
{
	const char *gchild[] = { helper, "grandchild", "10000", "0", NULL };
	const char *daemon[] = { helper, "daemon-quiet", "10000", NULL };
	struct sg_child c = { .argv = gchild, .detaches = true };
	struct sg_exec_result r;
	pid_t pid;

	(void)state;
	sg_exec_result_init(&r, SG_KiB);
	/* Same group, holding stdout: alive, and the drain gives up. */
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_int_equal(r.exit_code, 0);
	pid = (pid_t)first_number(r.out.p);
	assert_true(pid > 0);
	usleep(50000);
	assert_int_equal(kill(pid, 0), 0);
	kill_and_reap(pid);

	/* A daemon that let go of stdout: the run ends at once. */
	c.argv = daemon;
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_int_equal(r.exit_code, 0);
	pid = (pid_t)first_number(r.out.p);
	assert_true(pid > 0);
	assert_int_equal(kill(pid, 0), 0);
	kill_and_reap(pid);
	sg_exec_result_release(&r);
}

static void test_daemon_holding_stdout(void **state)
{
	const char *argv[] = { helper, "daemon", "10000", NULL };
	struct sg_child c = { .argv = argv };
	struct sg_exec_result r;
	int64_t t0 = sg_now_ms();
	pid_t pid;

	(void)state;
	sg_exec_result_init(&r, SG_KiB);
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_int_equal(r.exit_code, 0);
	assert_true(sg_now_ms() - t0 < 1000);
	pid = (pid_t)first_number(r.out.p);
	assert_true(pid > 0);
	/* Its own session: not ours to kill, so it lives on. */
	assert_int_equal(kill(pid, 0), 0);
	kill_and_reap(pid);
	sg_exec_result_release(&r);
}

static void test_no_fd_leaks(void **state)
{
	const char *argv[] = { helper, "fds", NULL };
	struct sg_child c = { .argv = argv, .stdin_data = "x", .stdin_len = 1 };
	struct sg_exec_result r;
	/* Inheritable on purpose: closefrom must still keep them out. */
	int leak1 = open("/dev/null", O_RDONLY);
	int leak2 = dup(leak1);

	(void)state;
	assert_true(leak1 >= 3 && leak2 >= 3);
	sg_exec_result_init(&r, SG_KiB);
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_string_equal(r.out.p, "0\n1\n2\n");
	c.stdin_data = NULL;
	c.stdin_len = 0;
	c.merge = true;
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_string_equal(r.out.p, "0\n1\n2\n");
	sg_exec_result_release(&r);
	close(leak1);
	close(leak2);
}

/* The hexadecimal mask after "<name>:\t" in the helper's output. */
static unsigned long long status_mask(const char *text, const char *name)
{
	const char *p = strstr(text, name);

	assert_non_null(p);
	return strtoull(p + strlen(name) + 2, NULL, 16);
}

static void test_signal_state_reset(void **state)
{
	const char *argv[] = { helper, "signals", NULL };
	struct sg_child c = { .argv = argv };
	struct sg_exec_result r;
	sigset_t block, old;
	void (*old_pipe)(int) = signal(SIGPIPE, SIG_IGN);
	void (*old_int)(int) = signal(SIGINT, SIG_IGN);

	(void)state;
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	sg_exec_result_init(&r, SG_KiB);
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_int_equal(status_mask(r.out.p, "SigBlk"), 0);
	/*
	 * Signals 1-31 only: glibc's posix_spawn sets its two internal
	 * real-time signals (32, 33) to SIG_IGN in the child on purpose, and
	 * no attribute can undo that.  Programs that use them install their
	 * own handlers.
	 */
	assert_int_equal(status_mask(r.out.p, "SigIgn") & 0x7fffffffULL, 0);
	sg_exec_result_release(&r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	signal(SIGPIPE, old_pipe);
	signal(SIGINT, old_int);
}

static void test_raw_bytes(void **state)
{
	const char *bad[] = { helper, "invalid-utf8", NULL };
	const char *edge[] = { helper, "utf8-edge", "5", NULL };
	struct sg_child c = { .argv = bad };
	struct sg_exec_result r;

	(void)state;
	sg_exec_result_init(&r, SG_KiB);
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_int_equal(r.out.len, 6);
	assert_memory_equal(r.out.p, "\xff\xfe\xe2\x82\xac\n", 6);
	c.argv = edge;
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_int_equal(r.out.len, 7);
	assert_memory_equal(r.out.p, "xxxx\xe2\x82\xac", 7);
	sg_exec_result_release(&r);
}

struct parallel {
	pthread_t t;
	int id;
	bool ok;
};

static void *run_parallel(void *arg)
{
	struct parallel *p = arg;
	const char *argv[] = { helper, "echo-stdin", NULL };
	char data[100000];
	struct sg_exec_result r;
	struct sg_errinfo err = { 0 };

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)(p->id + i);
	struct sg_child c = { .argv = argv, .envp = base_env,
			      .stdin_data = data, .stdin_len = sizeof(data) };
	sg_exec_result_init(&r, SG_MiB);
	p->ok = true;
	for (int i = 0; i < 10 && p->ok; i++) {
		p->ok = sg_exec_run(&c, &r, NULL, &err) == SG_OK &&
			r.exit_code == 0 && r.out.len == sizeof(data) &&
			memcmp(r.out.p, data, sizeof(data)) == 0;
	}
	sg_exec_result_release(&r);
	return NULL;
}

static void test_parallel_runs(void **state)
{
	struct parallel p[8];

	(void)state;
	for (int i = 0; i < 8; i++) {
		p[i].id = i;
		assert_int_equal(pthread_create(&p[i].t, NULL, run_parallel,
						&p[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(p[i].t, NULL);
		assert_true(p[i].ok);
	}
}

/*
 * A host process that ignores SIGCHLD has its children reaped by the
 * kernel: the run must still end (with the status unknown), not spin.
 */
static void test_sigchld_ignored(void **state)
{
	const char *argv[] = { helper, "print", "100", NULL };
	struct sg_child c = { .argv = argv };
	struct sg_exec_result r;
	void (*old)(int) = signal(SIGCHLD, SIG_IGN);

	(void)state;
	sg_exec_result_init(&r, SG_KiB);
	assert_int_equal(run_child(&c, &r, NULL), SG_OK);
	assert_int_equal(r.exit_code, -1);
	assert_int_equal(r.signal, 0);
	assert_int_equal(r.out.len, 100);
	assert_true(r.duration_ms < 1000);
	sg_exec_result_release(&r);
	signal(SIGCHLD, old);
}

static void test_invalid_arguments(void **state)
{
	const char *none[] = { NULL };
	struct sg_child c = { .argv = none };
	struct sg_exec_result r;
	struct sg_errinfo err = { 0 };

	(void)state;
	sg_exec_result_init(&r, SG_KiB);
	assert_int_equal(sg_exec_run(&c, &r, NULL, &err),
			 SG_E_INVALID_ARGUMENT);
	sg_exec_result_release(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exit_codes),
		cmocka_unit_test(test_signals_reported),
		cmocka_unit_test(test_stdin_fed),
		cmocka_unit_test(test_stdin_not_read),
		cmocka_unit_test(test_capture_cap),
		cmocka_unit_test(test_merge_and_separate),
		cmocka_unit_test(test_stderr_clipped),
		cmocka_unit_test(test_env_exact),
		cmocka_unit_test(test_program_lookup),
		cmocka_unit_test(test_cwd),
		cmocka_unit_test(test_timeout_kills_group),
		cmocka_unit_test(test_timeout_term_then_kill),
		cmocka_unit_test(test_timeout_keeps_output),
		cmocka_unit_test(test_group_killed_after_exit),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_detaches),
		cmocka_unit_test(test_daemon_holding_stdout),
		cmocka_unit_test(test_no_fd_leaks),
		cmocka_unit_test(test_signal_state_reset),
		cmocka_unit_test(test_raw_bytes),
		cmocka_unit_test(test_parallel_runs),
		cmocka_unit_test(test_sigchld_ignored),
		cmocka_unit_test(test_invalid_arguments),
	};

	find_helper();
	/* Orphans the helper leaves are reparented here and can be reaped. */
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
