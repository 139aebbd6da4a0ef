/*
 * test_fsrace.c - the symlink-swap attack on sg-helper's file tools,
 * in-process, the way the local backend runs them inside the gateway.
 *
 * The attacker is a child process that swaps a directory `d` of the root
 * with a symbolic link `s` in a loop (renameat2(RENAME_EXCHANGE)), so that
 * between any check and any use `d` may be either.  The link points at
 * /proc/self (this very process: its environment holds a canary), at / or
 * at a directory beside the root.  Meanwhile every fs command runs on
 * paths through `d`, and every answer is checked: a read or a stat that
 * succeeds must show the file inside the root, a grep or a listing may only
 * name what is inside, and nothing outside may be written, moved or
 * deleted.  Each case prints how many answers came from outside; the test
 * fails if any did.
 *
 * A second attacker makes and removes a move's destination in a loop:
 * a move without --overwrite must never replace what it made.
 *
 * With --no-openat2 (ctest unit/test_fsrace-no-openat2) the process first
 * installs a seccomp filter under which openat2(2) fails with ENOSYS, as on
 * a kernel older than 5.6, so the same attack meets the component walk.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "helper/internal.h"
#include "base/cancel.h"
#include "base/limits.h"

#define ROOT "/workspace"
#define CANARY_VAR "SG_FSRACE_CANARY"
#define CANARY "SGRACE-ENVIRON-CANARY"
#define INSIDE "SGRACE-inside\n"
#define OUTSIDE "SGRACE-OUTSIDE-which-must-never-be-seen\n"
/* How long each case hammers the tools while the swap runs. */
#define RACE_MS 2500

struct fx {
	char base[64];      /* /tmp/sg-fsrace-XXXXXX */
	char root[96];      /* base/root: host_root */
	char outside[96];   /* base/outside: beside the root */
	char sub[160];      /* the path below d that leads to "environ" */
	struct sg_buf out;
	json_t *reply;
	pid_t swapper;
	int dirfd;          /* the real directory holding victim, inside */
	/* Answers seen from outside the root, per kind, and attempts. */
	int escapes, ok, tries;
	char first[256];    /* the first escape, for the failure message */
	char kinds[512];    /* "read 3, grep 2, " */
};

static int rm_one(const char *p, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static void put(const char *dir, const char *rel, const char *text)
{
	char p[512];
	FILE *fp;

	assert_true((size_t)snprintf(p, sizeof(p), "%s/%s", dir, rel) < sizeof(p));
	fp = fopen(p, "wb");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
}

/* mkdir -p of dir/rel. */
static void mkdirs(const char *dir, const char *rel)
{
	char p[512];
	size_t n = strlen(dir);

	assert_true((size_t)snprintf(p, sizeof(p), "%s/%s", dir, rel) < sizeof(p));
	for (char *q = p + n + 1; *q; q++) {
		if (*q != '/')
			continue;
		*q = '\0';
		mkdir(p, 0755);
		*q = '/';
	}
	mkdir(p, 0755);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char p[512];

	assert_non_null(f);
	snprintf(f->base, sizeof(f->base), "/tmp/sg-fsrace-XXXXXX");
	assert_non_null(mkdtemp(f->base));
	snprintf(f->root, sizeof(f->root), "%s/root", f->base);
	snprintf(f->outside, sizeof(f->outside), "%s/outside", f->base);
	assert_int_equal(mkdir(f->root, 0755), 0);
	assert_int_equal(mkdir(f->outside, 0755), 0);
	put(f->outside, "environ", OUTSIDE);
	put(f->outside, "victim", OUTSIDE);
	/* d/environ and d/victim for the /proc/self and outside links... */
	mkdirs(f->root, "d");
	put(f->root, "d/environ", INSIDE);
	put(f->root, "d/victim", INSIDE);
	/* ... and the same files at d/<outside without its leading /> for /. */
	snprintf(p, sizeof(p), "d%s", f->outside);
	mkdirs(f->root, p);
	snprintf(p, sizeof(p), "d%s/environ", f->outside);
	put(f->root, p, INSIDE);
	snprintf(p, sizeof(p), "d%s/victim", f->outside);
	put(f->root, p, INSIDE);
	sg_buf_init(&f->out, SG_ENVTOOL_REPLY);
	f->swapper = -1;
	f->dirfd = -1;
	*state = f;
	return 0;
}

static void stop_swapper(struct fx *f)
{
	if (f->swapper > 0) {
		kill(f->swapper, SIGKILL);
		waitpid(f->swapper, NULL, 0);
	}
	f->swapper = -1;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	stop_swapper(f);
	if (f->dirfd >= 0)
		close(f->dirfd);
	nftw(f->base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	json_decref(f->reply);
	sg_buf_release(&f->out);
	free(f);
	return 0;
}

/* The attacker: exchange d and s as fast as the kernel allows. */
static void start_swapper(struct fx *f, const char *target)
{
	char p[512];
	int rootfd;

	snprintf(p, sizeof(p), "%s/s", f->root);
	assert_int_equal(symlink(target, p), 0);
	rootfd = open(f->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(rootfd >= 0);
	f->swapper = fork();
	assert_true(f->swapper >= 0);
	if (f->swapper == 0) {
		for (;;)
			renameat2(rootfd, "d", rootfd, "s", RENAME_EXCHANGE);
	}
	close(rootfd);
}

/* Run one fs command (NULL-terminated words) with a deadline. */
static json_t *fs(struct fx *f, const char *in, ...)
{
	char *argv[32];
	struct sg_cancel c;
	json_error_t jerr;
	va_list ap;
	const char *s;
	int argc = 0;

	assert_int_equal(sg_cancel_init(&c), SG_OK);
	/* The command word, the options this test adds, then the rest. */
	va_start(ap, in);
	argv[argc++] = (char *)va_arg(ap, const char *);
	argv[argc++] = (char *)"--root";
	argv[argc++] = (char *)ROOT;
	argv[argc++] = (char *)"--host-root";
	argv[argc++] = f->root;
	while ((s = va_arg(ap, const char *)) != NULL)
		argv[argc++] = (char *)s;
	va_end(ap);
	argv[argc] = NULL;
	assert_int_equal(sg_helper_fs(argc, argv, in, in ? strlen(in) : 0,
				      &f->out, &c),
			 0);
	sg_cancel_release(&c);
	json_decref(f->reply);
	f->reply = json_loadb(f->out.p, f->out.len, 0, &jerr);
	if (!f->reply)
		fail_msg("unparsable reply %s: %s", f->out.p, jerr.text);
	f->tries++;
	if (json_is_true(json_object_get(f->reply, "ok")))
		f->ok++;
	return f->reply;
}

static void escaped(struct fx *f, const char *what)
{
	size_t n = strlen(f->kinds);

	if (!f->escapes++)
		snprintf(f->first, sizeof(f->first), "%s: %.200s", what,
			 f->out.p);
	if (!strstr(f->kinds, what) && n < sizeof(f->kinds) - 32)
		snprintf(f->kinds + n, sizeof(f->kinds) - n, "%s ", what);
}

static const char *str(json_t *r, const char *key)
{
	const char *s = json_string_value(json_object_get(r, key));

	return s ? s : "";
}

/* Whether the reply text shows anything that lives outside the root. */
static bool foreign(const char *text)
{
	return strstr(text, "OUTSIDE") || strstr(text, CANARY) ||
	       strstr(text, CANARY_VAR);
}

/*
 * Whether every entry of a listing ({name, path, is_dir, size}) names what
 * the tools make inside: the two files (at their inside size), the tree
 * that leads to them for the / case, and the entries the loop creates.
 */
static bool listing_inside(json_t *entries)
{
	const char *made[] = { "new-", "dir-", "moved-", ".new-", "tmp", "added-", ".added-",
			       "patched-", ".patched-" };
	size_t k;
	json_t *e;

	if (!json_is_array(entries))
		return false;
	json_array_foreach(entries, k, e) {
		const char *path = str(e, "path"), *base = str(e, "name");
		json_int_t size = json_integer_value(json_object_get(e, "size"));
		bool known = false;

		if (!strcmp(base, "environ") || !strcmp(base, "victim"))
			known = size == (json_int_t)strlen(INSIDE);
		for (size_t i = 0; i < sizeof(made) / sizeof(*made); i++)
			if (!strncmp(base, made[i], strlen(made[i])) ||
			    !strncmp(path, "d/tmp", 5))
				known = true;
		if (!known)
			return false;
	}
	return true;
}

/* One round of every tool through d. */
static void round_of_tools(struct fx *f, int i, bool with_grep)
{
	char path[512], name[600], victim[512];
	json_t *r;

	snprintf(path, sizeof(path), "d%s/environ", f->sub);
	snprintf(victim, sizeof(victim), "d%s/victim", f->sub);

	r = fs(f, NULL, "read", "--", path, NULL);
	if (json_is_true(json_object_get(r, "ok")) &&
	    (strcmp(str(r, "text"), INSIDE) != 0 || foreign(f->out.p)))
		escaped(f, "read");

	r = fs(f, NULL, "read", "--limit", "1", "--", path, NULL);
	if (json_is_true(json_object_get(r, "ok")) &&
	    json_integer_value(json_object_get(r, "size")) !=
		    (json_int_t)strlen(INSIDE))
		escaped(f, "read --limit");

	r = fs(f, NULL, "stat", "--", path, NULL);
	if (json_is_true(json_object_get(r, "ok")) &&
	    json_integer_value(json_object_get(r, "size")) !=
		    (json_int_t)strlen(INSIDE))
		escaped(f, "stat");

	snprintf(name, sizeof(name), "d%s", f->sub);
	r = fs(f, NULL, "list", "--", name, NULL);
	if (json_is_true(json_object_get(r, "ok")) &&
	    !listing_inside(json_object_get(r, "entries")))
		escaped(f, "list");

	r = fs(f, NULL, "glob", "--", "d/**/environ", NULL);
	if (foreign(f->out.p) || strstr(f->out.p, "/proc"))
		escaped(f, "glob");

	if (with_grep) {
		r = fs(f, NULL, "grep", "--page", "5", "--", "SGRACE", NULL);
		if (foreign(f->out.p))
			escaped(f, "grep");
	}

	snprintf(name, sizeof(name), "d%s/new-%d", f->sub, i);
	r = fs(f, "written", "write", "--", name, NULL);
	snprintf(name, sizeof(name), "d%s/dir-%d", f->sub, i);
	r = fs(f, NULL, "mkdir", "--", name, NULL);
	/* Text only the outside file holds: an edit that got out changes it. */
	r = fs(f, "12\nmust-neverchanged", "edit", "--", path, NULL);
	if (foreign(f->out.p))
		escaped(f, "edit");
	{
		char text[1600];

		snprintf(text, sizeof(text), "*** Begin Patch\n*** Add File: d%s/added-%d\n+x\n"
			 "*** Update File: %s\n*** Move to: d%s/patched-%d\n"
			 "*** Delete File: d%s/new-%d\n*** End Patch", f->sub, i, victim,
			 f->sub, i, f->sub, i);
		r = fs(f, text, "patch", NULL);
		if (foreign(f->out.p))
			escaped(f, "patch");
	}
	snprintf(name, sizeof(name), "d%s/moved-%d", f->sub, i);
	r = fs(f, NULL, "move", "--", victim, name, NULL);
	r = fs(f, NULL, "delete", "--", victim, NULL);
	(void)r;
	/* Put the victim back through the real directory, swapped or not. */
	if (f->dirfd >= 0) {
		int fd = openat(f->dirfd, "victim",
				O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		if (fd >= 0) {
			(void)!write(fd, INSIDE, strlen(INSIDE));
			close(fd);
		}
	}
}

/* The outside directory must hold exactly its two files, unchanged. */
static void check_outside(struct fx *f)
{
	const char *names[] = { "environ", "victim" };
	struct dirent *d;
	char p[512], buf[128];
	int n = 0;
	DIR *dir;

	for (size_t i = 0; i < 2; i++) {
		FILE *fp;
		size_t got;

		snprintf(p, sizeof(p), "%s/%s", f->outside, names[i]);
		fp = fopen(p, "rb");
		if (!fp)
			fail_msg("%s outside the root was removed or moved", p);
		got = fread(buf, 1, sizeof(buf) - 1, fp);
		buf[got] = '\0';
		fclose(fp);
		if (strcmp(buf, OUTSIDE) != 0)
			fail_msg("%s outside the root was changed", p);
	}
	dir = opendir(f->outside);
	assert_non_null(dir);
	while ((d = readdir(dir)) != NULL)
		if (d->d_name[0] != '.')
			n++;
	closedir(dir);
	if (n != 2)
		fail_msg("%d entries outside the root instead of 2: something "
			 "was written there", n);
}

/*
 * Swap d with a link to target for RACE_MS while every tool runs through
 * d; sub is what follows d on the way to "environ".
 */
static void race(struct fx *f, const char *target, const char *sub,
		 bool with_grep)
{
	char p[512];
	int64_t end;
	int i = 0;

	snprintf(f->sub, sizeof(f->sub), "%s", sub);
	snprintf(p, sizeof(p), "%s/d%s", f->root, sub);
	f->dirfd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->dirfd >= 0);
	start_swapper(f, target);
	end = sg_now_ms() + RACE_MS;
	for (; sg_now_ms() < end; i++)
		round_of_tools(f, i, with_grep && i % 4 == 0);
	stop_swapper(f);
	print_message("swap d <-> %s: %d of %d calls answered from outside "
		      "the root (%d succeeded; %d rounds; by %s)\n",
		      target, f->escapes, f->tries, f->ok, i,
		      f->kinds[0] ? f->kinds : "none");
	if (f->escapes)
		fail_msg("%d answers came from outside the root; the first: %s",
			 f->escapes, f->first);
	check_outside(f);
}

static void test_race_proc_self(void **state)
{
	race(*state, "/proc/self", "", true);
}

static void test_race_fs_root(void **state)
{
	struct fx *f = *state;

	race(f, "/", f->outside, true);
}

static void test_race_outside_dir(void **state)
{
	struct fx *f = *state;

	race(f, f->outside, "", true);
}

/*
 * A move without --overwrite must not replace an entry that appears while
 * it runs.  The attacker creates `dst` (O_EXCL) and removes it again in a
 * loop; each time it holds its file it checks that the file still has its
 * link, and reports on a pipe when a move replaced it.  A check before a
 * plain rename leaves that window open; RENAME_NOREPLACE closes it.
 */
static void test_race_move_noreplace(void **state)
{
	struct fx *f = *state;
	int64_t end = sg_now_ms() + RACE_MS;
	int p[2], rootfd, moved = 0, refused = 0, replaced = 0;
	char c;

	rootfd = open(f->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(rootfd >= 0);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	f->swapper = fork();
	assert_true(f->swapper >= 0);
	if (f->swapper == 0) {
		close(p[0]);
		for (;;) {
			struct stat st;
			int fd = openat(rootfd, "dst", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
					0644);

			if (fd < 0)
				continue;
			sched_yield();
			if (fstat(fd, &st) == 0 && st.st_nlink == 0)
				(void)!write(p[1], "R", 1);
			else
				unlinkat(rootfd, "dst", 0);
			close(fd);
			/* Absent for a while too, so that some moves succeed. */
			for (volatile int i = rand() % 20000; i > 0; i--)
				;
		}
	}
	close(p[1]);
	put(f->root, "src", INSIDE);
	while (sg_now_ms() < end) {
		/* json_is_true evaluates its argument twice: one move each. */
		json_t *r = fs(f, NULL, "move", "--", "src", "dst", NULL);

		put(f->root, "src", INSIDE);
		if (json_is_true(json_object_get(r, "ok"))) {
			moved++;
			unlinkat(rootfd, "dst", 0);
		} else if (strstr(str(r, "tool_error"), "already exists")) {
			refused++;
		} else {
			fail_msg("unexpected reply %s", f->out.p);
		}
	}
	stop_swapper(f);
	while (read(p[0], &c, 1) == 1)
		replaced++;
	close(p[0]);
	close(rootfd);
	print_message("move without overwrite beside a creator of its destination: %d moved, "
		      "%d refused, %d replaced the creator's file\n",
		      moved, refused, replaced);
	if (replaced)
		fail_msg("%d moves without overwrite replaced an existing entry", replaced);
	assert_true(moved > 0 && refused > 0);
}

/* Make openat2(2) answer ENOSYS for the rest of this process's life. */
static int hide_openat2(void)
{
	struct sock_filter prog[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog fp = { .len = sizeof(prog) / sizeof(*prog),
				 .filter = prog };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp) != 0)
		return -1;
	/* Proof that the fallback is what runs. */
	if (syscall(SYS_openat2, AT_FDCWD, "/", NULL, (size_t)0) != -1 ||
	    errno != ENOSYS)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_race_proc_self, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_race_fs_root, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_race_outside_dir, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_race_move_noreplace, setup,
						teardown),
	};

	/*
	 * /proc/self/environ shows the environment a process started with,
	 * so the canary must be there from exec: start again with it.
	 */
	if (!getenv(CANARY_VAR) && argc > 0) {
		setenv(CANARY_VAR, CANARY, 1);
		execv("/proc/self/exe", argv);
		return 1;
	}
	if (argc > 1 && strcmp(argv[1], "--no-openat2") == 0) {
		if (hide_openat2() != 0) {
			fprintf(stderr, "cannot hide openat2 with seccomp\n");
			return 1;
		}
		print_message("openat2 hidden: the component walk is tested\n");
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
