/*
 * test_path.c - the containment resolver against real trees.
 *
 * Each test builds a temporary directory that plays the part of the
 * environment's "/workspace" (host_root is the temp dir, root is
 * "/workspace"), so absolute symlinks are written as environment paths
 * exactly as an agent inside the environment would write them.
 */
/* nftw() is an XSI interface; O_PATH is GNU. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/path.h"
#include "base/limits.h"

#define ROOT "/workspace"

struct tree {
	char dir[64];
};

static void mk(struct tree *t, const char *rel)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", t->dir, rel);
	assert_int_equal(mkdir(p, 0755), 0);
}

static void put(struct tree *t, const char *rel, const char *text)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", t->dir, rel);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void ln(struct tree *t, const char *target, const char *rel)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", t->dir, rel);
	assert_int_equal(symlink(target, p), 0);
}

static int setup(void **state)
{
	struct tree *t = calloc(1, sizeof(*t));
	char name[16], target[16];

	assert_non_null(t);
	snprintf(t->dir, sizeof(t->dir), "/tmp/sg-path-XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	put(t, "file.txt", "hello\n");
	mk(t, "dir");
	mk(t, "dir/sub");
	put(t, "dir/sub/deep.txt", "deep\n");
	mk(t, "other");
	mk(t, "other/x");
	ln(t, "../file.txt", "dir/up");
	ln(t, ROOT "/dir/sub", "dir/abs_in");
	ln(t, ROOT, "abs_root");
	ln(t, ROOT "/", "abs_root_slash");
	ln(t, "/etc", "etc_link");
	ln(t, "../..", "esc");
	ln(t, "dir/../../x", "esc_deep");
	ln(t, "loop2", "loop1");
	ln(t, "loop1", "loop2");
	ln(t, "newfile", "dangling");
	ln(t, "/tmp/sg-path-nowhere", "dangling_out");
	ln(t, ROOT "/newabs", "dangling_abs");
	ln(t, "../other/x", "dir/lnk");
	ln(t, ".", "self");
	ln(t, "file.txt", "filelink");
	ln(t, ROOT "x/file.txt", "lookalike");
	/* c0 -> c1 -> ... -> c40 -> file.txt: c0 needs 41 follows. */
	for (int i = 0; i <= SG_SYMLINK_MAX; i++) {
		snprintf(name, sizeof(name), "c%d", i);
		if (i == SG_SYMLINK_MAX)
			snprintf(target, sizeof(target), "file.txt");
		else
			snprintf(target, sizeof(target), "c%d", i + 1);
		ln(t, target, name);
	}
	*state = t;
	return 0;
}

static int rm_one(const char *p, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static int teardown(void **state)
{
	struct tree *t = *state;

	nftw(t->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(t);
	return 0;
}

static void ok_as(struct tree *t, const char *root, const char *path,
		  enum sg_path_mode mode, const char *want)
{
	struct sg_buf out = SG_BUF_INIT(SG_PATH_MAX);
	struct sg_errinfo err = { 0 };
	sg_err rc = sg_path_resolve(root, t->dir, path, mode, &out, &err);

	if (rc != SG_OK)
		fail_msg("%s (mode %d): %s: %s", path, (int)mode,
			 sg_err_word(rc), err.msg);
	if (strcmp(out.p, want) != 0)
		fail_msg("%s (mode %d): got \"%s\", want \"%s\"", path,
			 (int)mode, out.p, want);
	sg_buf_release(&out);
}

static void ok(struct tree *t, const char *path, enum sg_path_mode mode,
	       const char *want)
{
	ok_as(t, ROOT, path, mode, want);
}

static void bad(struct tree *t, const char *path, enum sg_path_mode mode,
		sg_err want, const char *msg_part)
{
	struct sg_buf out = SG_BUF_INIT(SG_PATH_MAX);
	struct sg_errinfo err = { 0 };
	sg_err rc = sg_path_resolve(ROOT, t->dir, path, mode, &out, &err);

	if (rc != want)
		fail_msg("%.80s (mode %d): got %s (%s \"%s\"), want %s", path,
			 (int)mode, sg_err_word(rc), err.msg, out.p,
			 sg_err_word(want));
	assert_int_equal(err.code, want);
	if (msg_part && !strstr(err.msg, msg_part))
		fail_msg("message \"%s\" lacks \"%s\"", err.msg, msg_part);
	sg_buf_release(&out);
}

static void test_plain(void **state)
{
	struct tree *t = *state;

	ok(t, "file.txt", SG_PATH_EXISTING, "file.txt");
	ok(t, "./file.txt", SG_PATH_EXISTING, "file.txt");
	ok(t, "dir//sub/./deep.txt", SG_PATH_EXISTING, "dir/sub/deep.txt");
	ok(t, "dir/sub/", SG_PATH_EXISTING, "dir/sub");
	ok(t, ".", SG_PATH_EXISTING, "");
	ok(t, "./", SG_PATH_EXISTING, "");
	ok(t, "dir/..", SG_PATH_EXISTING, "");
	ok(t, "dir/sub/../../file.txt", SG_PATH_EXISTING, "file.txt");
	ok(t, "", SG_PATH_EXISTING, ""); /* results name root "" */
	bad(t, NULL, SG_PATH_EXISTING, SG_E_INVALID_ARGUMENT, NULL);
}

static void test_escape_lexical(void **state)
{
	struct tree *t = *state;

	bad(t, "../etc/passwd", SG_PATH_EXISTING, SG_E_PATH_ESCAPE,
	    "../etc/passwd resolves outside the workspace root");
	bad(t, "dir/../../x", SG_PATH_CREATE, SG_E_PATH_ESCAPE, "dir/../../x");
	bad(t, "..", SG_PATH_EXISTING, SG_E_PATH_ESCAPE, NULL);
	/* Leaving root and coming back is refused: outside is not ours. */
	bad(t, "../workspace/file.txt", SG_PATH_EXISTING, SG_E_PATH_ESCAPE,
	    NULL);
	bad(t, "nope/../../x", SG_PATH_PARENTS, SG_E_PATH_ESCAPE, NULL);
}

static void test_absolute_input(void **state)
{
	struct tree *t = *state;

	ok(t, ROOT "/file.txt", SG_PATH_EXISTING, "file.txt");
	ok(t, ROOT, SG_PATH_EXISTING, "");
	ok(t, ROOT "/", SG_PATH_EXISTING, "");
	ok(t, "//workspace/./dir/sub", SG_PATH_EXISTING, "dir/sub");
	ok(t, ROOT "/new.txt", SG_PATH_CREATE, "new.txt");
	bad(t, "/etc/passwd", SG_PATH_EXISTING, SG_E_PATH_ESCAPE,
	    "/etc/passwd resolves outside");
	bad(t, "/workspacex/file.txt", SG_PATH_EXISTING, SG_E_PATH_ESCAPE,
	    NULL);
	bad(t, "/", SG_PATH_EXISTING, SG_E_PATH_ESCAPE, NULL);
	bad(t, ROOT "/../etc", SG_PATH_EXISTING, SG_E_PATH_ESCAPE, NULL);
	/* A root given with a trailing slash is the same root. */
	ok_as(t, ROOT "/", ROOT "/dir", SG_PATH_EXISTING, "dir");
}

static void test_symlinks_inside(void **state)
{
	struct tree *t = *state;

	ok(t, "dir/up", SG_PATH_EXISTING, "file.txt");
	ok(t, "dir/abs_in/deep.txt", SG_PATH_EXISTING, "dir/sub/deep.txt");
	ok(t, "abs_root/dir", SG_PATH_EXISTING, "dir");
	ok(t, "abs_root", SG_PATH_EXISTING, "");
	ok(t, "abs_root_slash/file.txt", SG_PATH_EXISTING, "file.txt");
	ok(t, "self/self/self/file.txt", SG_PATH_EXISTING, "file.txt");
	/* ".." applies to where the link led, not to the link's name. */
	ok(t, "dir/lnk/..", SG_PATH_EXISTING, "other");
	ok(t, "dir/lnk/../x", SG_PATH_EXISTING, "other/x");
	ok(t, "filelink", SG_PATH_EXISTING, "file.txt");
	ok(t, "filelink", SG_PATH_CREATE, "file.txt");
}

static void test_symlinks_escaping(void **state)
{
	struct tree *t = *state;

	bad(t, "etc_link", SG_PATH_EXISTING, SG_E_PATH_ESCAPE,
	    "etc_link resolves outside the workspace root");
	bad(t, "etc_link/passwd", SG_PATH_EXISTING, SG_E_PATH_ESCAPE, NULL);
	bad(t, "etc_link/new", SG_PATH_CREATE, SG_E_PATH_ESCAPE, NULL);
	bad(t, "etc_link", SG_PATH_CREATE, SG_E_PATH_ESCAPE, NULL);
	bad(t, "esc", SG_PATH_EXISTING, SG_E_PATH_ESCAPE, NULL);
	bad(t, "esc_deep", SG_PATH_CREATE, SG_E_PATH_ESCAPE, NULL);
	bad(t, "dangling_out", SG_PATH_CREATE, SG_E_PATH_ESCAPE, NULL);
	bad(t, "lookalike", SG_PATH_EXISTING, SG_E_PATH_ESCAPE, NULL);
	bad(t, ROOT "/etc_link/passwd", SG_PATH_EXISTING, SG_E_PATH_ESCAPE,
	    NULL);
	/* The link itself is inside and can be looked at or removed. */
	ok(t, "etc_link", SG_PATH_NOFOLLOW, "etc_link");
	ok(t, "esc", SG_PATH_NOFOLLOW, "esc");
	/* Only the final component is left alone. */
	bad(t, "etc_link/passwd", SG_PATH_NOFOLLOW, SG_E_PATH_ESCAPE, NULL);
}

static void test_link_limits(void **state)
{
	struct tree *t = *state;

	bad(t, "loop1", SG_PATH_EXISTING, SG_E_INVALID_ARGUMENT,
	    "too many levels of symbolic links");
	bad(t, "loop1/x", SG_PATH_CREATE, SG_E_INVALID_ARGUMENT,
	    "too many levels");
	ok(t, "loop1", SG_PATH_NOFOLLOW, "loop1");
	ok(t, "c1", SG_PATH_EXISTING, "file.txt");
	bad(t, "c0", SG_PATH_EXISTING, SG_E_INVALID_ARGUMENT,
	    "too many levels");
}

static void test_modes(void **state)
{
	struct tree *t = *state;

	bad(t, "nope", SG_PATH_EXISTING, SG_E_NOT_FOUND,
	    "nope: no such file or directory");
	bad(t, "nope", SG_PATH_NOFOLLOW, SG_E_NOT_FOUND, NULL);
	ok(t, "nope", SG_PATH_CREATE, "nope");
	ok(t, "dir/sub/nope.txt", SG_PATH_CREATE, "dir/sub/nope.txt");
	bad(t, "nope/x", SG_PATH_CREATE, SG_E_NOT_FOUND, NULL);
	ok(t, "nope/x/y", SG_PATH_PARENTS, "nope/x/y");
	ok(t, "dir/new/deeper", SG_PATH_PARENTS, "dir/new/deeper");
	ok(t, "nope/../dir/sub", SG_PATH_PARENTS, "dir/sub");
	ok(t, "dir/sub", SG_PATH_PARENTS, "dir/sub");
	/* A dangling link inside root is where a create lands. */
	bad(t, "dangling", SG_PATH_EXISTING, SG_E_NOT_FOUND, NULL);
	ok(t, "dangling", SG_PATH_CREATE, "newfile");
	ok(t, "dangling_abs", SG_PATH_CREATE, "newabs");
	ok(t, "dangling", SG_PATH_NOFOLLOW, "dangling");
	/* A file cannot be a directory on the way. */
	bad(t, "file.txt/x", SG_PATH_EXISTING, SG_E_NOT_FOUND, NULL);
	bad(t, "file.txt/x", SG_PATH_CREATE, SG_E_NOT_FOUND, NULL);
	bad(t, "file.txt/x", SG_PATH_PARENTS, SG_E_NOT_FOUND, NULL);
}

static void test_long_paths(void **state)
{
	struct tree *t = *state;
	char *p = malloc(SG_PATH_MAX + 100);
	size_t n = 0;

	assert_non_null(p);
	/* Longer than SG_PATH_MAX: refused before any lookup. */
	memset(p, 'a', SG_PATH_MAX + 10);
	for (size_t i = 1; i < SG_PATH_MAX + 10; i += 2)
		p[i] = '/';
	p[SG_PATH_MAX + 10] = '\0';
	bad(t, p, SG_PATH_PARENTS, SG_E_INVALID_ARGUMENT, "longer");
	/* Just under it: a long missing path is simply missing. */
	n = 0;
	while (n + 2 < SG_PATH_MAX - 10) {
		p[n++] = 'b';
		p[n++] = '/';
	}
	p[n] = '\0';
	bad(t, p, SG_PATH_EXISTING, SG_E_NOT_FOUND, NULL);
	/* One component longer than NAME_MAX. */
	memset(p, 'c', NAME_MAX + 5);
	p[NAME_MAX + 5] = '\0';
	bad(t, p, SG_PATH_CREATE, SG_E_INVALID_ARGUMENT, "too long");
	free(p);
}

static void test_roots(void **state)
{
	struct tree *t = *state;
	struct sg_buf out = SG_BUF_INIT(SG_PATH_MAX);
	struct sg_errinfo err = { 0 };

	/* A root of "/": ".." above it stays at "/", as in the kernel. */
	ok_as(t, "/", "/file.txt", SG_PATH_EXISTING, "file.txt");
	ok_as(t, "/", "../file.txt", SG_PATH_EXISTING, "file.txt");
	assert_int_equal(sg_path_resolve("workspace", t->dir, "file.txt",
					 SG_PATH_EXISTING, &out, &err),
			 SG_E_INVALID_ARGUMENT);
	sg_err_clear(&err);
	assert_int_equal(sg_path_resolve(ROOT, "/tmp/sg-path-missing-root",
					 "file.txt", SG_PATH_EXISTING, &out,
					 &err),
			 SG_E_NOT_FOUND);
	assert_non_null(strstr(err.msg, "workspace root"));
	sg_buf_release(&out);
}

static void test_out_too_small(void **state)
{
	struct tree *t = *state;
	struct sg_buf out = SG_BUF_INIT(4);
	struct sg_errinfo err = { 0 };

	assert_int_equal(sg_path_resolve(ROOT, t->dir, "dir/sub/deep.txt",
					 SG_PATH_EXISTING, &out, &err),
			 SG_E_TOO_LARGE);
	sg_buf_release(&out);
}

struct race {
	struct tree *t;
	int failures;
};

static void *resolve_many(void *arg)
{
	struct race *r = arg;
	struct sg_buf out = SG_BUF_INIT(SG_PATH_MAX);

	for (int i = 0; i < 300; i++) {
		struct sg_errinfo err = { 0 };

		if (sg_path_resolve(ROOT, r->t->dir, "dir/abs_in/../up",
				    SG_PATH_EXISTING, &out, &err) != SG_OK ||
		    strcmp(out.p, "file.txt") != 0)
			r->failures++;
		sg_err_clear(&err);
		if (sg_path_resolve(ROOT, r->t->dir, "etc_link",
				    SG_PATH_EXISTING, &out,
				    &err) != SG_E_PATH_ESCAPE)
			r->failures++;
	}
	sg_buf_release(&out);
	return NULL;
}

static void test_threads(void **state)
{
	struct race r[4];
	pthread_t th[4];

	for (int i = 0; i < 4; i++) {
		r[i] = (struct race){ .t = *state };
		assert_int_equal(pthread_create(&th[i], NULL, resolve_many,
						&r[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(r[i].failures, 0);
	}
}

static void norm_ok(const char *in, const char *want)
{
	struct sg_buf out = SG_BUF_INIT(SG_PATH_MAX);

	assert_int_equal(sg_path_normalize(in, &out), SG_OK);
	assert_string_equal(out.p, want);
	sg_buf_release(&out);
}

static void test_normalize(void **state)
{
	struct sg_buf out = SG_BUF_INIT(SG_PATH_MAX);

	(void)state;
	norm_ok("/a/./b/../c", "/a/c");
	norm_ok("a//b/", "a/b");
	norm_ok("/", "/");
	norm_ok("//", "/");
	norm_ok("a/..", "");
	norm_ok("/workspace/", "/workspace");
	assert_int_equal(sg_path_normalize("/..", &out), SG_E_PATH_ESCAPE);
	assert_int_equal(sg_path_normalize("../a", &out), SG_E_PATH_ESCAPE);
	assert_int_equal(sg_path_normalize("a/../..", &out), SG_E_PATH_ESCAPE);
	assert_int_equal(sg_path_normalize("", &out), SG_E_INVALID_ARGUMENT);
	sg_buf_release(&out);
}

static void test_under(void **state)
{
	(void)state;
	assert_true(sg_path_under("/workspace/x", "/workspace"));
	assert_true(sg_path_under("/workspace", "/workspace"));
	assert_false(sg_path_under("/workspacex", "/workspace"));
	assert_false(sg_path_under("/work", "/workspace"));
	assert_false(sg_path_under("/etc", "/workspace"));
	assert_true(sg_path_under("/anything", "/"));
	assert_true(sg_path_under("/", "/"));
}

/*
 * sg_path_openat: a resolved path opens; any link on the way (one swapped
 * in after resolution), a magic link, ".." or an absolute path does not.
 */
static void test_openat(void **state)
{
	struct tree *t = *state;
	const char *name = NULL;
	char buf[16] = "";
	int root = open(t->dir, O_PATH | O_DIRECTORY | O_CLOEXEC), fd;

	assert_true(root >= 0);
	fd = sg_path_openat(root, "dir/sub/deep.txt", O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, sizeof(buf) - 1), 5);
	assert_string_equal(buf, "deep\n");
	close(fd);
	fd = sg_path_openat(root, "", O_PATH | O_DIRECTORY);
	assert_true(fd >= 0);
	close(fd);
	/* A link in the middle or at the end is refused, inside or not. */
	assert_int_equal(sg_path_openat(root, "dir/lnk", O_PATH), -1);
	assert_int_equal(sg_path_openat(root, "self/file.txt", O_RDONLY), -1);
	assert_int_equal(sg_path_openat(root, "filelink", O_RDONLY), -1);
	assert_int_equal(sg_path_openat(root, "etc_link/passwd", O_RDONLY), -1);
	assert_int_equal(errno == ELOOP || errno == ENOTDIR, 1);
	/* Nothing above the directory, nothing absolute. */
	assert_int_equal(sg_path_openat(root, "dir/../../etc/passwd", O_RDONLY),
			 -1);
	assert_int_equal(sg_path_openat(root, "/etc/passwd", O_RDONLY), -1);
	assert_int_equal(sg_path_openat(root, "x", O_RDONLY | O_CREAT), -1);
	/* The parent: a descriptor of dir/sub and the literal last name. */
	fd = sg_path_openat_parent(root, "dir/sub/deep.txt", &name);
	assert_true(fd >= 0);
	assert_string_equal(name, "deep.txt");
	assert_int_equal(faccessat(fd, name, R_OK, AT_SYMLINK_NOFOLLOW), 0);
	close(fd);
	fd = sg_path_openat_parent(root, "", &name);
	assert_true(fd >= 0);
	assert_string_equal(name, ".");
	close(fd);
	close(root);
}

/* sg_path_chdir_beneath enters a resolved directory, never through a link. */
static void test_chdir_beneath(void **state)
{
	struct tree *t = *state;
	char here[SG_PATH_MAX], want[SG_PATH_MAX], path[SG_PATH_MAX];
	int saved = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);

	assert_true(saved >= 0);
	snprintf(path, sizeof(path), "%s/dir/sub", t->dir);
	assert_int_equal(sg_path_chdir_beneath(t->dir, path), 0);
	assert_non_null(getcwd(here, sizeof(here)));
	assert_non_null(realpath(path, want));
	assert_string_equal(here, want);
	snprintf(path, sizeof(path), "%s/dir/lnk", t->dir);
	assert_int_equal(sg_path_chdir_beneath(t->dir, path), -1);
	snprintf(path, sizeof(path), "%s/etc_link", t->dir);
	assert_int_equal(sg_path_chdir_beneath(t->dir, path), -1);
	assert_int_equal(sg_path_chdir_beneath(t->dir, "/etc"), -1);
	assert_int_equal(errno, EXDEV);
	assert_int_equal(fchdir(saved), 0);
	close(saved);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_plain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_escape_lexical, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_absolute_input, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_symlinks_inside, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_symlinks_escaping, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_link_limits, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_modes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_long_paths, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_roots, setup, teardown),
		cmocka_unit_test_setup_teardown(test_out_too_small, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_openat, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chdir_beneath, setup,
						teardown),
		cmocka_unit_test(test_normalize),
		cmocka_unit_test(test_under),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
