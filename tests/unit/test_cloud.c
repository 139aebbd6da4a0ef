/*
 * test_cloud.c - the cloud adapters' one set-up script (adapters/cloud.h,
 * sg_cloud_setup_sh) run by this host's sh in a temporary directory, with
 * every program it may start replaced by a wrapper that logs its name and
 * arguments before it runs the real one.  So the order is checked, not
 * guessed: what precedes sg-helper's final rename is what a first command
 * sent beside a set-up left under way waits for (adapters/remote.h); and
 * an upload whose checksum does not match never becomes sg-helper.
 */
#define _GNU_SOURCE /* asprintf, mkdtemp */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "adapters/cloud.h"
#include "core/digest.h"

/* The programs the script may start (each gets a logging wrapper). */
static const char *const tools[] = { "mkdir", "mv", "sha256sum", "chmod", "rm", "find",
				     "id", "sleep", "cat", "sudo", "chown", NULL };

/* A sandbox of files: the temporary directory and the paths in it. */
struct box {
	char dir[64];
	char *bin, *log, *home, *root, *base, *up, *mark, *fail, *helper;
	char sha[65];
};

static char *cat2(const char *a, const char *b)
{
	char *s = NULL;

	assert_true(asprintf(&s, "%s%s", a, b) >= 0);
	return s;
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

/* The real program name lives in /usr/bin or /bin on every host this runs on. */
static void wrap(const struct box *b, const char *name)
{
	char *w = NULL, *text = NULL;
	char real[64];

	snprintf(real, sizeof(real), "/usr/bin/%s", name);
	if (access(real, X_OK) != 0)
		snprintf(real, sizeof(real), "/bin/%s", name);
	assert_true(asprintf(&w, "%s/%s", b->bin, name) >= 0);
	assert_true(asprintf(&text, "#!/bin/sh\nprintf '%%s\\n' \"%s $*\" >>'%s'\nexec %s \"$@\"\n",
			     name, b->log, real) >= 0);
	write_file(w, text, 0755);
	free(w);
	free(text);
}

/* A fresh box: home, bin with the wrappers; base and root not made. */
static struct box *box_new(void)
{
	struct box *b = calloc(1, sizeof(*b));
	const char *program = "#!/bin/sh\necho the program\n";

	assert_non_null(b);
	snprintf(b->dir, sizeof(b->dir), "/tmp/sg-test-cloud-XXXXXX");
	assert_non_null(mkdtemp(b->dir));
	b->bin = cat2(b->dir, "/bin");
	b->log = cat2(b->dir, "/log");
	b->home = cat2(b->dir, "/home");
	b->root = cat2(b->dir, "/root");
	b->base = cat2(b->dir, "/base");
	b->fail = cat2(b->dir, "/base.failed");
	assert_int_equal(mkdir(b->bin, 0700), 0);
	assert_int_equal(mkdir(b->home, 0700), 0);
	for (size_t i = 0; tools[i]; i++)
		wrap(b, tools[i]);
	assert_true(sg_sha256_hex(program, strlen(program), b->sha));
	assert_true(asprintf(&b->up, "%s/.sg-helper-%s.up-n1", b->base, b->sha) >= 0);
	b->mark = cat2(b->up, ".ok");
	assert_true(asprintf(&b->helper, "%s/sg-helper-%s", b->base, b->sha) >= 0);
	return b;
}

static void box_free(struct box *b)
{
	char *rm = NULL;
	pid_t pid;
	int st;

	assert_true(asprintf(&rm, "%s", b->dir) >= 0);
	pid = fork();
	if (pid == 0) {
		execl("/bin/rm", "rm", "-rf", "--", rm, (char *)NULL);
		_exit(127);
	}
	waitpid(pid, &st, 0);
	free(rm);
	free(b->bin), free(b->log), free(b->home), free(b->root), free(b->base);
	free(b->up), free(b->mark), free(b->fail), free(b->helper);
	free(b);
}

/*
 * What an upload beside the set-up leaves before the script runs: with
 * dirs, sandgate's directories (Vercel's archive carries them); the
 * program (text, executable or not) and its marker.
 */
static void box_upload(struct box *b, bool dirs, const char *text, mode_t mode)
{
	static const char *const sub[] = { "", "/ctl", "/ctl/proc", "/ctl/home", "/ctl/tmp",
					   "/run", NULL };

	for (size_t i = 0; sub[i]; i++) {
		char *d = cat2(b->base, sub[i]);

		if (dirs || i == 0)
			assert_int_equal(mkdir(d, 0755), 0);
		free(d);
	}
	write_file(b->up, text, mode);
	write_file(b->mark, "", 0600);
}

/* Run the set-up as a set-up left under way: its stdout (new). */
static char *box_run(struct box *b)
{
	char *env[16], *out = cat2(b->dir, "/out"), *text = NULL;
	size_t n = 0;
	int fd, st;
	pid_t pid;
	FILE *f;
	long len;

	assert_true(asprintf(&env[n++], "PATH=%s", b->bin) >= 0);
	assert_true(asprintf(&env[n++], "HOME=%s", b->home) >= 0);
	assert_true(asprintf(&env[n++], "SG_ROOT=%s", b->root) >= 0);
	assert_true(asprintf(&env[n++], "SG_BASE=%s", b->base) >= 0);
	assert_true(asprintf(&env[n++], "SG_SHA=%s", b->sha) >= 0);
	assert_true(asprintf(&env[n++], "SG_UP=%s", b->up) >= 0);
	assert_true(asprintf(&env[n++], "SG_UPW=%s", b->mark) >= 0);
	assert_true(asprintf(&env[n++], "SG_HFAIL=%s", b->fail) >= 0);
	env[n++] = strdup("SG_UPWAIT=2000");
	env[n++] = strdup("SG_SWEEP=1440");
	env[n] = NULL;
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	pid = fork();
	if (pid == 0) {
		dup2(fd, 1);
		execle("/bin/sh", "sh", "-c", sg_cloud_setup_sh, (char *)NULL, env);
		_exit(127);
	}
	close(fd);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	for (size_t i = 0; i < n; i++)
		free(env[i]);
	f = fopen(out, "r");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	text = calloc(1, (size_t)len + 1);
	assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	free(out);
	return text;
}

/*
 * The programs the script started, one per line, up to the one that put
 * sg-helper in place (its final mv), into before (new); the count.  -1:
 * no such mv.
 */
static int box_before_install(const struct box *b, char **before)
{
	FILE *f = fopen(b->log, "r");
	char line[4096], *final = cat2(" ", b->helper);
	size_t used = 0;
	int n = 0;

	*before = calloc(1, 4096);
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		size_t k = strcspn(line, " ");

		if (strncmp(line, "mv ", 3) == 0 && strstr(line, final)) {
			fclose(f);
			free(final);
			return n;
		}
		used += (size_t)snprintf(*before + used, 4096 - used, "%.*s ", (int)k, line);
		n++;
	}
	fclose(f);
	free(final);
	return -1;
}

/* The programs the script started after the final mv, as " "-ended names (static). */
static const char *box_after_install(const struct box *b)
{
	static char after[4096];
	FILE *f = fopen(b->log, "r");
	char line[4096], *final = cat2(" ", b->helper);
	size_t used = 0;
	bool past = false;

	after[0] = '\0';
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (past)
			used += (size_t)snprintf(after + used, sizeof(after) - used, "%.*s ",
						 (int)strcspn(line, " "), line);
		if (strncmp(line, "mv ", 3) == 0 && strstr(line, final))
			past = true;
	}
	fclose(f);
	free(final);
	return after;
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/*
 * Vercel's case: the archive carried the directories and an executable
 * program.  Only root's mkdir and the checksum precede the rename; the
 * chmod that makes the directories private follows it, and nothing else.
 */
static void test_install_first_from_an_archive(void **state)
{
	struct box *b = box_new();
	char *out, *before = NULL;
	struct stat st;

	(void)state;
	box_upload(b, true, "#!/bin/sh\necho the program\n", 0700);
	out = box_run(b);
	assert_non_null(strstr(out, "installed=1\n"));
	assert_non_null(strstr(out, "ok=1\n"));
	assert_null(strstr(out, "error"));
	assert_int_equal(box_before_install(b, &before), 2);
	assert_string_equal(before, "mkdir sha256sum ");
	assert_int_equal(stat(b->helper, &st), 0);
	assert_true(st.st_mode & S_IXUSR);
	assert_false(exists(b->up));
	assert_false(exists(b->fail));
	assert_string_equal(box_after_install(b), "chmod ");
	/* Private once the set-up ended, whatever modes the upload made. */
	assert_int_equal(stat(b->base, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	free(out);
	free(before);
	box_free(b);
}

/*
 * Daytona's case: the upload made sandgate's directory only, and the
 * program is not executable.  One mkdir for root and the directories,
 * the checksum, the chmod: nothing else comes first.
 */
static void test_install_first_from_a_plain_upload(void **state)
{
	struct box *b = box_new();
	char *out, *before = NULL;
	struct stat st;

	(void)state;
	box_upload(b, false, "#!/bin/sh\necho the program\n", 0644);
	out = box_run(b);
	assert_non_null(strstr(out, "installed=1\n"));
	assert_int_equal(box_before_install(b, &before), 3);
	assert_string_equal(before, "mkdir sha256sum chmod ");
	assert_int_equal(stat(b->helper, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_equal(stat(b->base, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_true(exists(b->root));
	free(out);
	free(before);
	box_free(b);
}

/*
 * Never fail open: a copy whose checksum is not the one sent never becomes
 * sg-helper, is removed, and the set-up leaves the file that tells the
 * commands waiting for sg-helper to give up.
 */
static void test_a_corrupted_upload_never_runs(void **state)
{
	struct box *b = box_new();
	char *out, *before = NULL;

	(void)state;
	box_upload(b, true, "#!/bin/sh\necho another program\n", 0700);
	out = box_run(b);
	assert_non_null(strstr(out, "install_error=the copy sent has the sha256"));
	assert_null(strstr(out, "installed=1"));
	assert_int_equal(box_before_install(b, &before), -1);
	assert_false(exists(b->helper));
	assert_false(exists(b->up));
	assert_true(exists(b->fail));
	free(out);
	free(before);
	box_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_install_first_from_an_archive),
		cmocka_unit_test(test_install_first_from_a_plain_upload),
		cmocka_unit_test(test_a_corrupted_upload_never_runs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
