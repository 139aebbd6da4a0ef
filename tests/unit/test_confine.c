/*
 * test_confine.c - Landlock confinement of commands
 * (helper/confine.c): what a confined process can and cannot
 * write, and the `confine` command of the real sg-helper program.
 *
 * Confinement cannot be undone, so every confined attempt runs in a forked
 * child that reports what it managed to do through a pipe.
 */
/* _GNU_SOURCE: syscall() behind the Landlock version query (landlock.h). */
#define _GNU_SOURCE

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helper/internal.h"
#include "helper/landlock.h"

/* What the confined child managed to do. */
enum {
	DID_WRITE_ROOT = 1 << 0,    /* create a file beneath root */
	DID_WRITE_OUTSIDE = 1 << 1, /* create a file in the other dir */
	DID_WRITE_DEVNULL = 1 << 2, /* open /dev/null for writing */
	DID_READ = 1 << 3,          /* read a file outside root */
	DID_RENAME_OUT = 1 << 4,    /* move a file from root to the other dir */
	DID_RENAME_IN = 1 << 5,     /* rename a file within root */
	DID_TRUNCATE = 1 << 6,      /* truncate(2) a file beneath root */
	DID_WRITE_ALLOWED = 1 << 7, /* create a file in an --allow-write dir */
	DID_SIGNAL_OUT = 1 << 8,    /* signal the parent, outside the domain */
	DID_SIGNAL_OWN = 1 << 9,    /* kill a child it forked */
	DID_CHMOD = 1 << 10,        /* chmod 0755 a file of its own */
	DID_SETUID = 1 << 11,       /* chmod 04755 */
	DID_SETGID_NEW = 1 << 12,   /* create a file with 02755 */
	DID_OPENAT2 = 1 << 13,      /* call openat2 (its mode is out of sight) */
	DID_URING = 1 << 14,        /* call io_uring_setup (it bypasses seccomp) */
};

struct report {
	int rc;        /* sg_confine_apply's result */
	unsigned did;  /* DID_* */
	char msg[256]; /* its message */
};

struct dirs {
	char root[64], outside[64], allowed[64];
};

static int setup(void **state)
{
	struct dirs *d = calloc(1, sizeof(*d));
	char path[128];
	int fd;

	assert_non_null(d);
	snprintf(d->root, sizeof(d->root), "/tmp/sg-confine-root-XXXXXX");
	snprintf(d->outside, sizeof(d->outside), "/tmp/sg-confine-out-XXXXXX");
	snprintf(d->allowed, sizeof(d->allowed), "/tmp/sg-confine-al-XXXXXX");
	assert_non_null(mkdtemp(d->root));
	assert_non_null(mkdtemp(d->outside));
	assert_non_null(mkdtemp(d->allowed));
	/* Files for the rename and truncate attempts. */
	snprintf(path, sizeof(path), "%s/existing", d->root);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "data\n", 5), 5);
	close(fd);
	snprintf(path, sizeof(path), "%s/movable", d->root);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	close(fd);
	*state = d;
	return 0;
}

static void remove_tree(const char *dir)
{
	static const char *const names[] = { "f",       "existing", "movable",
					     "renamed", "g",        "h" };
	char path[128];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

static int teardown(void **state)
{
	struct dirs *d = *state;

	remove_tree(d->root);
	remove_tree(d->outside);
	remove_tree(d->allowed);
	free(d);
	return 0;
}

static bool can_create(const char *dir, const char *name)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* Run body(r, arg) in a forked child, since confinement cannot be undone. */
static struct report in_child(void (*body)(struct report *, const void *), const void *arg)
{
	struct report r;
	int p[2], st;
	pid_t pid;

	memset(&r, 0, sizeof(r));
	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		body(&r, arg);
		if (write(p[1], &r, sizeof(r)) != (ssize_t)sizeof(r))
			_exit(2);
		_exit(0);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &r, sizeof(r)), (ssize_t)sizeof(r));
	close(p[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return r;
}

struct attempt_args {
	const char *mode;
	const struct dirs *d;
	const char *const *allow;
};

/* The child of attempt(): confine, then try each write. */
static void attempt_body(struct report *r, const void *arg)
{
	const struct attempt_args *a = arg;
	const struct dirs *d = a->d;
	char path[128], path2[128], buf[16];
	int fd;

	r->rc = sg_confine_apply(a->mode, d->root, a->allow, r->msg, sizeof(r->msg));
	if (r->rc != 0)
		return;
	if (can_create(d->root, "f"))
		r->did |= DID_WRITE_ROOT;
	if (can_create(d->outside, "f"))
		r->did |= DID_WRITE_OUTSIDE;
	if (can_create(d->allowed, "f"))
		r->did |= DID_WRITE_ALLOWED;
	fd = open("/dev/null", O_WRONLY | O_TRUNC);
	if (fd >= 0 && write(fd, "x", 1) == 1)
		r->did |= DID_WRITE_DEVNULL;
	if (fd >= 0)
		close(fd);
	fd = open("/etc/passwd", O_RDONLY);
	if (fd >= 0 && read(fd, buf, sizeof(buf)) > 0)
		r->did |= DID_READ;
	if (fd >= 0)
		close(fd);
	snprintf(path, sizeof(path), "%s/movable", d->root);
	snprintf(path2, sizeof(path2), "%s/g", d->outside);
	if (rename(path, path2) == 0)
		r->did |= DID_RENAME_OUT;
	snprintf(path2, sizeof(path2), "%s/renamed", d->root);
	if (rename(path, path2) == 0)
		r->did |= DID_RENAME_IN;
	snprintf(path, sizeof(path), "%s/existing", d->root);
	if (truncate(path, 1) == 0)
		r->did |= DID_TRUNCATE;
}

/* Confine a child with mode and the dirs, and report what it could do. */
static struct report attempt(const char *mode, const struct dirs *d,
			     const char *const *allow)
{
	struct attempt_args a = { mode, d, allow };

	return in_child(attempt_body, &a);
}

static bool have_abi3(void)
{
	return sg_landlock_abi() >= 3;
}

static void test_standard(void **state)
{
	const struct dirs *d = *state;
	struct report r;

	if (!have_abi3())
		skip();
	r = attempt("standard", d, NULL);
	assert_int_equal(r.rc, 0);
	assert_string_equal(r.msg, "");
	assert_int_equal(r.did, DID_WRITE_ROOT | DID_WRITE_DEVNULL | DID_READ |
					DID_RENAME_IN | DID_TRUNCATE);
}

static void test_read_only(void **state)
{
	const struct dirs *d = *state;
	struct report r;
	struct stat st;
	char path[128];

	if (!have_abi3())
		skip();
	r = attempt("read_only", d, NULL);
	assert_int_equal(r.rc, 0);
	assert_int_equal(r.did, DID_WRITE_DEVNULL | DID_READ);
	/* Nothing changed on disk either. */
	snprintf(path, sizeof(path), "%s/existing", d->root);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 5);
	snprintf(path, sizeof(path), "%s/f", d->root);
	assert_int_equal(stat(path, &st), -1);
}

static void test_allow_write(void **state)
{
	const struct dirs *d = *state;
	const char *allow[] = { "/nonexistent/sg-confine", d->allowed, NULL };
	struct report r;

	if (!have_abi3())
		skip();
	r = attempt("standard", d, allow);
	assert_int_equal(r.rc, 0);
	assert_true(r.did & DID_WRITE_ALLOWED);
	assert_true(r.did & DID_WRITE_ROOT);
	assert_false(r.did & DID_WRITE_OUTSIDE);

	/* read_only ignores --allow-write: nothing is writable. */
	r = attempt("read_only", d, allow);
	assert_int_equal(r.rc, 0);
	assert_false(r.did & (DID_WRITE_ALLOWED | DID_WRITE_ROOT));
}

static void test_refusals(void **state)
{
	struct dirs missing;
	struct report r;
	char msg[256];

	(void)state;
	/* These fail before anything is enforced, so they run in-process. */
	assert_int_equal(sg_confine_apply("full", "/tmp", NULL, msg,
					  sizeof(msg)),
			 -1);
	assert_non_null(strstr(msg, "standard or read_only"));
	assert_int_equal(sg_confine_apply(NULL, "/tmp", NULL, msg, sizeof(msg)),
			 -1);
	assert_int_equal(sg_confine_apply("standard", NULL, NULL, msg,
					  sizeof(msg)),
			 -1);
	assert_non_null(strstr(msg, "root"));

	memset(&missing, 0, sizeof(missing));
	snprintf(missing.root, sizeof(missing.root), "/nonexistent/sg-root");
	snprintf(missing.outside, sizeof(missing.outside), "/nonexistent/a");
	snprintf(missing.allowed, sizeof(missing.allowed), "/nonexistent/b");
	r = attempt("standard", &missing, NULL);
	assert_int_equal(r.rc, -1);
	if (have_abi3())
		assert_non_null(strstr(r.msg, "/nonexistent/sg-root"));
	else
		assert_non_null(strstr(r.msg, "Landlock"));
	assert_int_equal(r.did, 0);
}

/* Run argv (an absolute program) and return its wait status. */
static int run(char *const *argv)
{
	int st;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);

		if (fd >= 0)
			dup2(fd, 2);
		execv(argv[0], argv);
		_exit(99);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return st;
}

static void test_program(void **state)
{
	const struct dirs *d = *state;
	const char *helper = getenv("SG_HELPER");
	char script[256], file[128];
	struct stat st;
	int status;

	if (!helper || !*helper || !have_abi3())
		skip();
	snprintf(file, sizeof(file), "%s/h", d->root);
	snprintf(script, sizeof(script), "echo x > %s", file);
	{
		char *argv[] = { (char *)helper, "confine", "--mode",
				 "read_only", "--root", (char *)d->root,
				 "--", "/bin/sh", "-c", script, NULL };

		status = run(argv);
		assert_true(WIFEXITED(status));
		assert_int_not_equal(WEXITSTATUS(status), 0);
		assert_int_not_equal(WEXITSTATUS(status), 99);
		assert_int_equal(stat(file, &st), -1);
		assert_int_equal(errno, ENOENT);
	}
	{
		/* The same write is allowed in standard mode. */
		char *argv[] = { (char *)helper, "confine", "--mode",
				 "standard", "--root", (char *)d->root,
				 "--", "/bin/sh", "-c", script, NULL };

		status = run(argv);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
		assert_int_equal(stat(file, &st), 0);
	}
	{
		/* No command after `--`: refused, never run unconfined. */
		char *argv[] = { (char *)helper, "confine", "--mode",
				 "standard", "--root", (char *)d->root,
				 NULL };

		status = run(argv);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 126);
	}
	{
		char *argv[] = { (char *)helper, "confine", "--mode",
				 "standard", "--root", (char *)d->root,
				 "--",    NULL };

		status = run(argv);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 126);
	}
	{
		/* A mode it does not know is refused the same way. */
		char *argv[] = { (char *)helper, "confine", "--mode", "full",
				 "--root", (char *)d->root, "--", "/bin/true",
				 NULL };

		status = run(argv);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 126);
	}
	{
		char *argv[] = { (char *)helper, "confine", "--mode",
				 "standard", "--root", (char *)d->root,
				 "--", "/nonexistent/sg-cmd", NULL };

		status = run(argv);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 127);
	}
}

/* The child of test_scope: enter the scope, then try what it allows and not. */
static void scope_body(struct report *r, const void *arg)
{
	const struct dirs *d = arg;
	char f[128], g[128];
	pid_t own;
	int fd, st;

	snprintf(f, sizeof(f), "%s/f", d->outside);
	snprintf(g, sizeof(g), "%s/g", d->outside);
	r->rc = sg_confine_scope(r->msg, sizeof(r->msg));
	if (r->rc != 0)
		return;
	if (can_create(d->outside, "f"))
		r->did |= DID_WRITE_OUTSIDE;
	if (chmod(f, 0755) == 0)
		r->did |= DID_CHMOD;
	if (chmod(f, 04755) == 0 || errno != EPERM)
		r->did |= DID_SETUID;
	if ((fd = open(g, O_WRONLY | O_CREAT, 02755)) >= 0 || errno != EPERM)
		r->did |= DID_SETGID_NEW;
	if (fd >= 0)
		close(fd);
	if (syscall(437 /* openat2 */, AT_FDCWD, f, NULL, 0) != -1 || errno != ENOSYS)
		r->did |= DID_OPENAT2;
	if (syscall(425 /* io_uring_setup */, 1, NULL) != -1 || errno != ENOSYS)
		r->did |= DID_URING;
	if (kill(getppid(), 0) == 0)
		r->did |= DID_SIGNAL_OUT;
	if ((own = fork()) == 0) {
		pause();
		_exit(0);
	}
	if (own > 0 && kill(own, SIGKILL) == 0 && waitpid(own, &st, 0) == own)
		r->did |= DID_SIGNAL_OWN;
}

/*
 * The scope (confine --mode scope, status --scope): a process in it writes
 * where it likes and signals what it started, but sets no setuid or setgid
 * bit and, from ABI 6, signals no process outside its domain (its parent,
 * this test).
 */
static void test_scope(void **state)
{
	const struct dirs *d = *state;
	const char *helper = getenv("SG_HELPER");
	struct report r = in_child(scope_body, d);
	unsigned want = DID_WRITE_OUTSIDE | DID_CHMOD | DID_SIGNAL_OWN;
	int st;

	assert_int_equal(r.rc, 0);
	/* Before ABI 6 there is no scope for signals (docs/security.md). */
	if (sg_landlock_abi() < 6)
		want |= DID_SIGNAL_OUT;
	assert_int_equal(r.did, want);
	if (!helper || !*helper)
		skip();
	{
		/* The program: the parent of sh is this test, outside. */
		char *argv[] = { (char *)helper, "confine", "--mode", "scope", "--",
				 "/bin/sh", "-c", "kill -0 $PPID", NULL };

		st = run(argv);
		assert_true(WIFEXITED(st));
		if (sg_landlock_abi() >= 6)
			assert_int_not_equal(WEXITSTATUS(st), 0);
		argv[5] = "true";
		argv[6] = NULL;
		st = run(argv);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	{
		/* The scope takes no rule: --root is refused, not ignored. */
		char *argv[] = { (char *)helper, "confine", "--mode", "scope", "--root",
				 (char *)d->root, "--", "/bin/true", NULL };

		st = run(argv);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 126);
	}
}

/*
 * With exec_only, the confined child may execute what the list names and
 * nothing else; reading stays allowed everywhere.
 */
static void test_exec_only(void **state)
{
	const struct dirs *d = *state;
	const char *only[] = { "/bin/true", NULL };
	char *const t[] = { "true", NULL }, *const sh[] = { "sh", "-c", ":", NULL };
	int st, p[2];
	pid_t pid;

	if (!have_abi3() || access("/bin/true", X_OK) != 0 ||
	    access("/bin/sh", X_OK) != 0)
		skip();
	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char msg[256], res[3] = "??";
		int fd;

		close(p[0]);
		if (sg_confine_apply_exec("read_only", d->root, NULL, only, msg,
					  sizeof(msg)) != 0)
			_exit(3);
		/* 't': /bin/true ran; 'x': /bin/sh was refused with EACCES. */
		if (fork() == 0) {
			execv("/bin/true", t);
			_exit(1);
		}
		if (wait(&st) > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0)
			res[0] = 't';
		execv("/bin/sh", sh);
		if (errno == EACCES)
			res[1] = 'x';
		fd = open("/etc/passwd", O_RDONLY);
		if (write(p[1], res, 2) != 2 || fd < 0)
			_exit(2);
		_exit(0);
	}
	close(p[1]);
	{
		char res[3] = { 0 };

		assert_int_equal(read(p[0], res, 2), 2);
		assert_string_equal(res, "tx");
	}
	close(p[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* `confine --exec-only` and `--git` of the real program. */
static void test_program_exec_only(void **state)
{
	const struct dirs *d = *state;
	const char *helper = getenv("SG_HELPER");
	int status;

	if (!helper || !*helper || !have_abi3() || access("/bin/sh", X_OK) != 0)
		skip();
	{
		/* The command itself runs; what it starts does not. */
		char *argv[] = { (char *)helper, "confine", "--mode",
				 "read_only", "--root", (char *)d->root,
				 "--exec-only", "/nonexistent/sg-only", "--",
				 "/bin/sh", "-c", "/bin/true", NULL };

		status = run(argv);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 126);
	}
	{
		char *argv[] = { (char *)helper, "confine", "--mode",
				 "read_only", "--root", (char *)d->root,
				 "--exec-only", "/bin", "--",
				 "/bin/sh", "-c", "/bin/true", NULL };

		status = run(argv);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	if (system("git --version >/dev/null 2>&1") == 0) {
		/* git and its own helpers run; a shell it is told to run does not. */
		char *ok[] = { (char *)helper, "confine", "--mode",
			       "read_only", "--root", (char *)d->root, "--git",
			       "--", "git", "--version", NULL };
		char *alias[] = { (char *)helper, "confine", "--mode",
				  "read_only", "--root", (char *)d->root,
				  "--git", "--", "git", "-c", "alias.x=!true",
				  "x", NULL };

		status = run(ok);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
		status = run(alias);
		assert_true(WIFEXITED(status));
		assert_int_not_equal(WEXITSTATUS(status), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_standard, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_only, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_allow_write, setup,
						teardown),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test_setup_teardown(test_program, setup, teardown),
		cmocka_unit_test_setup_teardown(test_scope, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_program_exec_only, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
