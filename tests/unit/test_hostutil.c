/*
 * test_hostutil.c - sg_host_rm_tree, which removes an environment's
 * directory on this host (local and singularity backends: `envs rm`, `gc`,
 * a removing teardown) while something of the environment may still run
 * (`envs rm --force` on a live session, a host without cgroups).
 *
 * The attacker is a child process that swaps a directory of the tree with
 * a symbolic link to a directory outside it, in a loop.  A removal that
 * walks by path opens the link where it had seen the directory, and
 * deletes the outside directory's files through it.  Nothing outside may
 * be deleted, and once the attacker stops the tree must go whole.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <setjmp.h>

#include <cmocka.h>

#include "adapters/hostutil.h"

#define OUTSIDE_FILES 64
#define ROUNDS 40

struct fixture {
	char base[64];
	char outside[96];
};

static char *path_of(const char *fmt, ...)
{
	va_list ap;
	char *p = NULL;

	va_start(ap, fmt);
	assert_true(vasprintf(&p, fmt, ap) >= 0);
	va_end(ap);
	return p;
}

static void write_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "x\n", 2), 2);
	close(fd);
}

static int count_outside(const struct fixture *f)
{
	int n = 0;

	for (int i = 0; i < OUTSIDE_FILES; i++) {
		char *p = path_of("%s/f%02d", f->outside, i);

		n += access(p, F_OK) == 0;
		free(p);
	}
	return n;
}

static int rm_one(const char *p, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return type == FTW_DP ? rmdir(p) : unlink(p);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	snprintf(f->base, sizeof(f->base), "/tmp/sg-hostutil-XXXXXX");
	assert_non_null(mkdtemp(f->base));
	snprintf(f->outside, sizeof(f->outside), "%s/outside", f->base);
	assert_int_equal(mkdir(f->outside, 0700), 0);
	for (int i = 0; i < OUTSIDE_FILES; i++) {
		char *p = path_of("%s/f%02d", f->outside, i);

		write_file(p);
		free(p);
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	nftw(f->base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

/*
 * An environment's tree: env/ws/d<k>/ with files, and the directory the
 * attacker swaps, env/ws/a/ with OUTSIDE_FILES files of the outside's
 * names (so a removal that follows the link finds them there).
 */
static char *make_tree(const struct fixture *f, int round)
{
	char *env = path_of("%s/env%d", f->base, round);
	char *ws = path_of("%s/ws", env), *a = path_of("%s/a", ws);

	assert_int_equal(mkdir(env, 0700), 0);
	assert_int_equal(mkdir(ws, 0700), 0);
	for (int k = 0; k < 8; k++) {
		char *d = path_of("%s/d%d", ws, k);

		assert_int_equal(mkdir(d, 0700), 0);
		for (int i = 0; i < 32; i++) {
			char *p = path_of("%s/g%02d", d, i);

			write_file(p);
			free(p);
		}
		free(d);
	}
	assert_int_equal(mkdir(a, 0700), 0);
	for (int i = 0; i < OUTSIDE_FILES; i++) {
		char *p = path_of("%s/f%02d", a, i);

		write_file(p);
		free(p);
	}
	free(a);
	free(ws);
	return env;
}

/* The attacker: a becomes a link to outside and back, as fast as it can. */
static pid_t start_swapper(const char *env, const char *outside)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		char *a = path_of("%s/ws/a", env), *real = path_of("%s/ws/a.real", env);

		for (;;) {
			if (rename(a, real) == 0) {
				if (symlink(outside, a) == 0) {
					sched_yield();
					unlink(a);
				}
				rename(real, a);
			}
			sched_yield();
		}
	}
	return pid;
}

static void test_rm_tree_never_follows_a_swapped_link(void **state)
{
	struct fixture *f = *state;
	int lost = 0;

	for (int round = 0; round < ROUNDS && !lost; round++) {
		char *env = make_tree(f, round);
		pid_t pid = start_swapper(env, f->outside);

		/* Give the attacker a head start into its loop. */
		usleep(2000);
		sg_host_rm_tree(env);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		lost = OUTSIDE_FILES - count_outside(f);
		if (lost)
			fprintf(stderr, "round %d: %d files outside the tree were deleted\n", round,
				lost);
		/* Whatever the race left, a second removal takes it all. */
		assert_int_equal(sg_host_rm_tree(env), 0);
		assert_int_equal(access(env, F_OK), -1);
		free(env);
	}
	assert_int_equal(lost, 0);
}

/*
 * A tree far deeper than a process may hold descriptors open (an
 * environment can make one): removed whole, and what it links to is not.
 */
static void test_rm_tree_removes_a_very_deep_tree(void **state)
{
	struct fixture *f = *state;
	char *env = path_of("%s/deep", f->base);
	int fd, depth = 3000;

	assert_int_equal(mkdir(env, 0700), 0);
	fd = open(env, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	for (int i = 0; i < depth; i++) {
		int next;

		assert_int_equal(mkdirat(fd, "d", 0700), 0);
		if (i % 500 == 0)
			assert_int_equal(symlinkat(f->outside, fd, "out"), 0);
		next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		assert_true(next >= 0);
		close(fd);
		fd = next;
	}
	close(fd);
	assert_int_equal(sg_host_rm_tree(env), 0);
	assert_int_equal(access(env, F_OK), -1);
	assert_int_equal(count_outside(f), OUTSIDE_FILES);
	free(env);
}

/* A missing tree is no error; a plain file or link at the top goes too. */
static void test_rm_tree_edges(void **state)
{
	struct fixture *f = *state;
	char *missing = path_of("%s/missing", f->base), *file = path_of("%s/file", f->base);
	char *link = path_of("%s/link", f->base);

	assert_int_equal(sg_host_rm_tree(missing), 0);
	write_file(file);
	assert_int_equal(sg_host_rm_tree(file), 0);
	assert_int_equal(access(file, F_OK), -1);
	assert_int_equal(symlink(f->outside, link), 0);
	assert_int_equal(sg_host_rm_tree(link), 0);
	assert_int_equal(access(link, F_OK), -1);
	assert_int_equal(count_outside(f), OUTSIDE_FILES);
	free(missing);
	free(file);
	free(link);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_rm_tree_never_follows_a_swapped_link, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rm_tree_removes_a_very_deep_tree, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rm_tree_edges, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
