/*
 * test_probe.c - the environment probe (helper/probe.c): each
 * fact it reports is checked against an observation made here by other
 * means (the kernel, the tools themselves, a fresh network namespace, a
 * cgroup with limits).
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
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helper/internal.h"
#include "helper/landlock.h"

/* The probe as `sandgate probe` asks it: the toolchains included. */
static json_t *probe_json(void)
{
	struct sg_buf out = SG_BUF_INIT(1024 * 1024);
	char *argv[] = { "probe", "--toolchains", NULL };
	json_error_t e;
	json_t *j;

	assert_int_equal(sg_helper_probe(2, argv, &out), 0);
	j = json_loadb(out.p, out.len, JSON_REJECT_DUPLICATES, &e);
	if (!j)
		fail_msg("unparsable probe reply: %s (%s)", out.p, e.text);
	sg_buf_release(&out);
	assert_true(json_is_true(json_object_get(j, "ok")));
	return j;
}

/*
 * Run argv (searched in PATH) with stdout and stderr captured into out;
 * returns the wait status, or -1 when it could not be started.
 */
static int capture(char *const *argv, char *out, size_t size)
{
	size_t len = 0;
	int p[2], st, ready[2];
	pid_t pid;

	out[0] = '\0';
	assert_int_equal(pipe(p), 0);
	assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int e;

		close(p[0]);
		close(ready[0]);
		dup2(p[1], 1);
		dup2(p[1], 2);
		execvp(argv[0], argv);
		e = errno;
		if (write(ready[1], &e, sizeof(e)) < 0)
			_exit(98);
		_exit(99);
	}
	close(p[1]);
	close(ready[1]);
	for (;;) {
		ssize_t n = read(p[0], out + len, size - 1 - len);

		if (n <= 0)
			break;
		len += (size_t)n;
		if (len + 1 >= size)
			break;
	}
	out[len] = '\0';
	close(p[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	{
		int e;
		ssize_t n = read(ready[0], &e, sizeof(e));

		close(ready[0]);
		if (n == (ssize_t)sizeof(e))
			return -1; /* exec failed: the tool is absent */
	}
	return st;
}

static void test_landlock_and_kernel(void **state)
{
	json_t *j = probe_json(), *obs;
	struct utsname u;
	int abi = sg_landlock_abi();

	(void)state;
	assert_int_equal(json_integer_value(json_object_get(j, "landlock_abi")),
			 abi > 0 ? abi : 0);
	assert_true(json_is_integer(json_object_get(j, "landlock_abi")));
	obs = json_object_get(j, "observed");
	assert_true(json_is_object(obs));
	assert_int_equal(uname(&u), 0);
	assert_string_equal(json_string_value(json_object_get(obs, "kernel")),
			    u.release);
	assert_int_equal(json_integer_value(json_object_get(obs, "uid")),
			 getuid());
	/* The adapter adds this one; from inside it cannot be observed. */
	assert_null(json_object_get(json_object_get(j, "isolation"),
				    "host_filesystem_restricted"));
	json_decref(j);
}

static void test_toolchains(void **state)
{
	static const struct {
		const char *id;
		char *argv[3];
	} tools[] = {
		{ "python", { "python3", "--version", NULL } },
		{ "node", { "node", "--version", NULL } },
		{ "go", { "go", "version", NULL } },
		{ "c++", { "c++", "--version", NULL } },
		{ "git", { "git", "--version", NULL } },
		{ "rg", { "rg", "--version", NULL } },
	};
	json_t *j = probe_json(), *tc;
	char out[4096];

	(void)state;
	tc = json_object_get(j, "toolchains");
	assert_true(json_is_object(tc));
	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++) {
		const char *v = json_string_value(json_object_get(tc,
								  tools[i].id));
		int st = capture(tools[i].argv, out, sizeof(out));
		char *nl = strchr(out, '\n');

		if (nl)
			*nl = '\0';
		if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			/* Absent (or broken) tools are left out. */
			assert_null(v);
			continue;
		}
		assert_non_null(v);
		/* The version is a token of the tool's own first line. */
		assert_non_null(strstr(out, v));
		assert_true(v[0] >= '0' && v[0] <= '9');
	}
	/* git says "git version X.Y.Z": exactly X.Y.Z. */
	{
		char *argv[] = { "git", "--version", NULL };
		int st = capture(argv, out, sizeof(out));

		if (st != -1) {
			char *nl = strchr(out, '\n');

			if (nl)
				*nl = '\0';
			assert_int_equal(strncmp(out, "git version ", 12), 0);
			assert_string_equal(json_string_value(json_object_get(
						    tc, "git")),
					    out + 12);
		}
	}
	json_decref(j);
}

/*
 * What /proc/net/dev says: isolated unless an interface other than lo is
 * administratively up (IFF_UP in /sys/class/net/NAME/flags; in this test
 * process sysfs and /proc agree on the namespace).
 */
static bool expect_isolated(void)
{
	char buf[65536], path[256], flags[32];
	size_t len = 0;
	int fd = open("/proc/net/dev", O_RDONLY);
	bool isolated = true;
	char *line, *next;

	assert_true(fd >= 0);
	for (;;) {
		ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);

		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	line = strchr(buf, '\n');
	line = line ? strchr(line + 1, '\n') : NULL;
	for (; line && *++line; line = next) {
		char *colon = strchr(line, ':');
		unsigned long f;
		int ffd;
		ssize_t n;

		next = strchr(line, '\n');
		if (!colon)
			break;
		while (*line == ' ')
			line++;
		*colon = '\0';
		if (strcmp(line, "lo") == 0)
			continue;
		snprintf(path, sizeof(path), "/sys/class/net/%s/flags", line);
		ffd = open(path, O_RDONLY);
		assert_true(ffd >= 0);
		n = read(ffd, flags, sizeof(flags) - 1);
		close(ffd);
		assert_true(n > 0);
		flags[n] = '\0';
		f = strtoul(flags, NULL, 16);
		if (f & 1)
			isolated = false;
	}
	return isolated;
}

static void test_isolation(void **state)
{
	json_t *j = probe_json(), *iso;
	char buf[4096];
	struct stat st;
	FILE *f;
	int nnp = -1, seccomp = -1;

	(void)state;
	iso = json_object_get(j, "isolation");
	assert_true(json_is_object(iso));
	assert_true(json_is_boolean(json_object_get(iso, "network_isolated")));
	assert_int_equal(json_is_true(json_object_get(iso, "network_isolated")),
			 expect_isolated());

	f = fopen("/proc/self/status", "r");
	assert_non_null(f);
	while (fgets(buf, sizeof(buf), f)) {
		if (strncmp(buf, "NoNewPrivs:", 11) == 0)
			nnp = (int)strtol(buf + 11, NULL, 10);
		if (strncmp(buf, "Seccomp:", 8) == 0)
			seccomp = (int)strtol(buf + 8, NULL, 10);
	}
	fclose(f);
	assert_int_equal(json_is_true(json_object_get(
				 iso, "privilege_escalation_blocked")),
			 nnp == 1);
	assert_int_equal(json_is_true(json_object_get(iso,
						      "syscalls_restricted")),
			 seccomp > 0);
	assert_int_equal(stat("/proc/self/ns/pid", &st), 0);
	assert_int_equal(json_is_true(json_object_get(iso,
						      "process_contained")),
			 st.st_ino != 0xEFFFFFFCU);
	json_decref(j);
}

/* The real program in a fresh network namespace sees only lo. */
static void test_unshare_net(void **state)
{
	const char *helper = getenv("SG_HELPER");
	char out[8192];
	json_t *j;
	int st;

	(void)state;
	if (!helper || !*helper)
		skip();
	{
		char *argv[] = { "unshare", "-n", "true", NULL };

		/* unshare missing, or not allowed here (not root). */
		st = capture(argv, out, sizeof(out));
		if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			skip();
	}
	{
		char *argv[] = { "unshare", "-n", (char *)helper, "probe",
				 NULL };

		st = capture(argv, out, sizeof(out));
	}
	assert_true(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	j = json_loads(out, 0, NULL);
	if (!j)
		fail_msg("unparsable probe reply: %s", out);
	assert_true(json_is_true(json_object_get(
		json_object_get(j, "isolation"), "network_isolated")));
	json_decref(j);
}

static bool write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY);
	bool ok;

	if (fd < 0)
		return false;
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	return ok;
}

/* This process's cgroup directory in the v1 hierarchy of controller. */
static bool v1_dir(const char *controller, char *dir, size_t size)
{
	char line[1024], want[64];
	FILE *f = fopen("/proc/self/cgroup", "r");
	bool found = false;

	if (!f)
		return false;
	snprintf(want, sizeof(want), ":%s:", controller);
	while (!found && fgets(line, sizeof(line), f)) {
		char *p = strstr(line, want), *nl = strchr(line, '\n');

		if (!p)
			continue;
		if (nl)
			*nl = '\0';
		snprintf(dir, size, "/sys/fs/cgroup/%s%s", controller,
			 p + strlen(want));
		found = true;
	}
	fclose(f);
	return found;
}

/*
 * A child moved into fresh v1 memory and cpu cgroups (256 MiB, half a
 * core) must report those limits.  Needs cgroup v1 and root; skipped
 * elsewhere.
 */
static void test_cgroup_limits(void **state)
{
	char mbase[512], cbase[512], mem[600], cpu[600], tmp[700];
	json_t *j, *obs;
	int p[2], st;
	pid_t pid;

	(void)state;
	if (!v1_dir("memory", mbase, sizeof(mbase)) ||
	    !v1_dir("cpu", cbase, sizeof(cbase)))
		skip();
	snprintf(mem, sizeof(mem), "%s/sg-probe-%ld", mbase, (long)getpid());
	snprintf(cpu, sizeof(cpu), "%s/sg-probe-%ld", cbase, (long)getpid());
	if (mkdir(mem, 0755) != 0)
		skip();
	if (mkdir(cpu, 0755) != 0) {
		rmdir(mem);
		skip();
	}
	snprintf(tmp, sizeof(tmp), "%s/memory.limit_in_bytes", mem);
	assert_true(write_file(tmp, "268435456"));
	snprintf(tmp, sizeof(tmp), "%s/cpu.cfs_period_us", cpu);
	assert_true(write_file(tmp, "100000"));
	snprintf(tmp, sizeof(tmp), "%s/cpu.cfs_quota_us", cpu);
	assert_true(write_file(tmp, "50000"));

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sg_buf out = SG_BUF_INIT(1024 * 1024);
		char *argv[] = { "probe", NULL }, self[32];
		bool moved;

		close(p[0]);
		snprintf(self, sizeof(self), "%ld", (long)getpid());
		snprintf(tmp, sizeof(tmp), "%s/cgroup.procs", mem);
		moved = write_file(tmp, self);
		snprintf(tmp, sizeof(tmp), "%s/cgroup.procs", cpu);
		moved = moved && write_file(tmp, self);
		if (moved && sg_helper_probe(1, argv, &out) == 0 &&
		    write(p[1], out.p, out.len) == (ssize_t)out.len)
			_exit(0);
		_exit(1);
	}
	close(p[1]);
	{
		char buf[8192];
		size_t len = 0;
		ssize_t n;

		for (;;) {
			n = read(p[0], buf + len, sizeof(buf) - 1 - len);
			if (n <= 0)
				break;
			len += (size_t)n;
		}
		buf[len] = '\0';
		close(p[0]);
		assert_int_equal(waitpid(pid, &st, 0), pid);
		rmdir(mem);
		rmdir(cpu);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		j = json_loads(buf, 0, NULL);
	}
	assert_non_null(j);
	obs = json_object_get(j, "observed");
	assert_int_equal(json_integer_value(json_object_get(
				 obs, "memory_limit_bytes")),
			 268435456);
	assert_true(json_is_number(json_object_get(obs, "cpu_limit")));
	assert_true(json_number_value(json_object_get(obs, "cpu_limit")) ==
		    0.5);
	json_decref(j);
}

/* The whole probe, toolchains included, at initialize: well under 2 s. */
static void test_duration(void **state)
{
	struct timespec a, b;
	long ms;

	(void)state;
	json_decref(probe_json()); /* warm the page cache */
	clock_gettime(CLOCK_MONOTONIC, &a);
	json_decref(probe_json());
	clock_gettime(CLOCK_MONOTONIC, &b);
	ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
	print_message("probe took %ld ms\n", ms);
	assert_true(ms < 1000);
}

static void write_script(const char *dir, const char *name, const char *body)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, body, strlen(body)), (ssize_t)strlen(body));
	close(fd);
}

/*
 * Whether pid has died: gone, or a zombie (orphans wait for init, which
 * may take its time to reap them).
 */
static bool process_gone(pid_t pid)
{
	char path[64], stat[512];
	ssize_t n;
	int fd;
	char *paren;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return errno == ENOENT;
	n = read(fd, stat, sizeof(stat) - 1);
	close(fd);
	if (n <= 0)
		return true;
	stat[n] = '\0';
	paren = strrchr(stat, ')');
	return paren && (paren[2] == 'Z' || paren[2] == 'X');
}

/*
 * Tools that hang are killed at the 2 s deadline, with what they started,
 * and left out; a tool that fails is left out; versions are read from the
 * first line only.  Fake tools come first in PATH.
 */
static void test_deadline(void **state)
{
	char dir[] = "/tmp/sg-probe-bin-XXXXXX", pidfile[64], script[256];
	char path[8192], pidtext[32] = "";
	const char *old = getenv("PATH");
	struct timespec a, b;
	json_t *j, *tc;
	long ms, hung;
	int fd;
	ssize_t n;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(pidfile, sizeof(pidfile), "%s/pid", dir);
	snprintf(script, sizeof(script),
		 "#!/bin/sh\nsleep 30 &\necho $! > %s\nwait\n", pidfile);
	write_script(dir, "node", script);
	write_script(dir, "go",
		     "#!/bin/sh\necho 'go version go1.22.1 linux/amd64'\n"
		     "echo 'second line 9.9.9'\n");
	write_script(dir, "c++", "#!/bin/sh\necho 'g++-12 (GCC) 12.2.0'\n");
	write_script(dir, "python3",
		     "#!/bin/sh\necho 'Python 3.99.1'\nexit 3\n");
	snprintf(path, sizeof(path), "%s:%s", dir, old ? old : "/usr/bin:/bin");
	assert_int_equal(setenv("PATH", path, 1), 0);

	clock_gettime(CLOCK_MONOTONIC, &a);
	j = probe_json();
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (old)
		setenv("PATH", old, 1);
	else
		unsetenv("PATH");
	ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
	assert_true(ms >= 1900 && ms < 3000);

	tc = json_object_get(j, "toolchains");
	assert_null(json_object_get(tc, "node"));
	assert_null(json_object_get(tc, "python"));
	assert_string_equal(json_string_value(json_object_get(tc, "go")),
			    "1.22.1");
	assert_string_equal(json_string_value(json_object_get(tc, "c++")),
			    "12.2.0");
	json_decref(j);

	/* The hung tool's own child was killed with it. */
	fd = open(pidfile, O_RDONLY);
	assert_true(fd >= 0);
	n = read(fd, pidtext, sizeof(pidtext) - 1);
	close(fd);
	assert_true(n > 0);
	pidtext[n] = '\0';
	hung = strtol(pidtext, NULL, 10);
	assert_true(hung > 0);
	/* SIGKILL is delivered asynchronously: allow the kernel a moment. */
	for (int i = 0; i < 200 && !process_gone((pid_t)hung); i++)
		usleep(10000);
	assert_true(process_gone((pid_t)hung));

	unlink(pidfile);
	for (size_t i = 0; i < 4; i++) {
		static const char *const names[] = { "node", "go", "c++",
						     "python3" };

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

/*
 * At initialize the toolchains are not asked: no key (not an empty one,
 * which would say none was found) and no --version run, so the probe is
 * quick even with a toolchain that hangs (test_deadline's takes 2 s).
 */
static void test_no_toolchains_unasked(void **state)
{
	struct sg_buf out = SG_BUF_INIT(1024 * 1024);
	char *argv[] = { "probe", "--hidden", "/nonexistent", NULL };
	struct timespec a, b;
	json_t *j;
	long ms;

	(void)state;
	clock_gettime(CLOCK_MONOTONIC, &a);
	assert_int_equal(sg_helper_probe(3, argv, &out), 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
	j = json_loadb(out.p, out.len, JSON_REJECT_DUPLICATES, NULL);
	assert_non_null(j);
	assert_true(json_is_true(json_object_get(j, "ok")));
	assert_null(json_object_get(j, "toolchains"));
	assert_true(json_is_true(json_object_get(json_object_get(j, "isolation"),
						 "host_filesystem_restricted")));
	print_message("probe without toolchains took %ld ms\n", ms);
	assert_true(ms < 500);
	json_decref(j);
	sg_buf_release(&out);
}

static void test_arguments(void **state)
{
	struct sg_buf out = SG_BUF_INIT(4096);
	char *argv[] = { "probe", "--deep", NULL };
	json_t *j;

	(void)state;
	assert_int_equal(sg_helper_probe(2, argv, &out), 0);
	j = json_loadb(out.p, out.len, 0, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "error")),
			    "invalid_argument");
	json_decref(j);
	sg_buf_release(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_landlock_and_kernel),
		cmocka_unit_test(test_toolchains),
		cmocka_unit_test(test_no_toolchains_unasked),
		cmocka_unit_test(test_isolation),
		cmocka_unit_test(test_unshare_net),
		cmocka_unit_test(test_cgroup_limits),
		cmocka_unit_test(test_duration),
		cmocka_unit_test(test_deadline),
		cmocka_unit_test(test_arguments),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
