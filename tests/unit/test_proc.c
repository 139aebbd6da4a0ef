/*
 * test_proc.c - sg-helper's process spooling, end to end.
 *
 * Processes are started by the real program (`sg-helper proc spawn`, found
 * through $SG_HELPER) into a temporary ctl directory, exactly as the
 * gateway starts them; everything else (read, get, list, stop, wait) goes
 * through sg_helper_run() in-process, as the gateway calls it for
 * environments on this host.  Children are /bin/sh scripts.
 */
#define _GNU_SOURCE /* mkdtemp, nftw's FTW_DEPTH|FTW_PHYS, pthread */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <ftw.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helper/helper.h"
#include "base/cancel.h"
#include "base/limits.h"

#define MS (INT64_C(1000000))

struct fixture {
	char dir[64];
	char ctl[128];
};

static char helper_path[4096];

static const char *helper(void)
{
	const char *env = getenv("SG_HELPER");
	char self[4096];
	ssize_t n;

	if (env && *env)
		return env;
	if (helper_path[0])
		return helper_path;
	/* Run by hand: the helper sits beside sandgate, one level up. */
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		*strrchr(self, '/') = '\0';
		snprintf(helper_path, sizeof(helper_path), "%.4000s/../sg-helper",
			 self);
	}
	return helper_path;
}

/* ---- plumbing ------------------------------------------------------------ */

static json_t *parse(const char *p, size_t n)
{
	json_error_t e;
	json_t *j = json_loadb(p, n, 0, &e);

	if (!j)
		fail_msg("not JSON (%s): %.*s", e.text, (int)n, p);
	return j;
}

/* Run sg-helper for real with argv (NULL-terminated) and parse its reply. */
static json_t *program(char *const *argv)
{
	char buf[65536];
	size_t len = 0;
	int pfd[2], status;
	pid_t pid;

	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(null, 0);
		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		execv(argv[0], argv);
		_exit(126);
	}
	close(pfd[1]);
	for (;;) {
		ssize_t k = read(pfd[0], buf + len, sizeof(buf) - 1 - len);

		if (k <= 0)
			break;
		len += (size_t)k;
	}
	close(pfd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	return parse(buf, len);
}

/*
 * `sg-helper proc spawn --ctl C --id ID --session S <extra...>`; extra
 * ends with NULL.  Returns the reply.
 */
static json_t *spawn(struct fixture *f, const char *id, const char *session,
		     ...)
{
	char *argv[64];
	int n = 0;
	va_list ap;
	const char *s;

	argv[n++] = (char *)helper();
	argv[n++] = "proc";
	argv[n++] = "spawn";
	argv[n++] = "--ctl";
	argv[n++] = f->ctl;
	argv[n++] = "--id";
	argv[n++] = (char *)id;
	argv[n++] = "--session";
	argv[n++] = (char *)session;
	va_start(ap, session);
	while ((s = va_arg(ap, const char *)) && n < 63)
		argv[n++] = (char *)s;
	va_end(ap);
	argv[n] = NULL;
	return program(argv);
}

/* A shell command in session s1; returns the record (new reference). */
static json_t *spawn_sh(struct fixture *f, const char *id, const char *cmd)
{
	json_t *reply = spawn(f, id, "s1", "--command", cmd, NULL);
	json_t *rec = json_incref(json_object_get(reply, "process"));

	assert_non_null(rec);
	json_decref(reply);
	return rec;
}

/* sg_helper_run in-process with a NULL-terminated argv. */
static json_t *run_c(const struct sg_cancel *cancel, const char *first, ...)
{
	char *argv[64];
	int n = 0;
	va_list ap;
	const char *s = first;
	struct sg_buf out = SG_BUF_INIT(SG_ENVTOOL_REPLY);
	json_t *j;

	va_start(ap, first);
	while (s && n < 63) {
		argv[n++] = (char *)s;
		s = va_arg(ap, const char *);
	}
	va_end(ap);
	argv[n] = NULL;
	assert_int_equal(sg_helper_run(n, argv, NULL, 0, &out, cancel), 0);
	j = parse(out.p, out.len);
	sg_buf_release(&out);
	return j;
}

#define run(...) run_c(NULL, __VA_ARGS__)

static json_t *get(struct fixture *f, const char *id)
{
	return run("proc", "get", "--ctl", f->ctl, "--id", id, NULL);
}

static const char *str(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

static json_int_t num(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_integer(v))
		fail_msg("%s is not an integer", key);
	return json_integer_value(v);
}

static bool is_true(json_t *o, const char *key)
{
	return json_is_true(json_object_get(o, key));
}

/* Poll get until the process is no longer running; returns the record. */
static json_t *await_end(struct fixture *f, const char *id, int64_t ms)
{
	int64_t end = sg_now_ms() + ms;

	for (;;) {
		json_t *r = get(f, id);
		json_t *rec = json_incref(json_object_get(r, "process"));

		json_decref(r);
		assert_non_null(rec);
		if (strcmp(str(rec, "status"), "running") != 0)
			return rec;
		json_decref(rec);
		if (sg_now_ms() > end)
			fail_msg("%s still runs after %lld ms", id, (long long)ms);
		usleep(20000);
	}
}

/* proc read with the usual options as strings (NULL: not given). */
static json_t *rd(struct fixture *f, const char *id, const char *offset,
		  const char *max, const char *wait_ns, const char *dwell_ns)
{
	char *argv[16];
	int n = 0;
	struct sg_buf out = SG_BUF_INIT(SG_ENVTOOL_REPLY);
	json_t *j;

	argv[n++] = "proc";
	argv[n++] = "read";
	argv[n++] = "--ctl";
	argv[n++] = f->ctl;
	argv[n++] = "--id";
	argv[n++] = (char *)id;
	if (offset) {
		argv[n++] = "--offset";
		argv[n++] = (char *)offset;
	}
	if (max) {
		argv[n++] = "--max";
		argv[n++] = (char *)max;
	}
	if (wait_ns) {
		argv[n++] = "--wait-ns";
		argv[n++] = (char *)wait_ns;
	}
	if (dwell_ns) {
		argv[n++] = "--min-dwell-ns";
		argv[n++] = (char *)dwell_ns;
	}
	argv[n] = NULL;
	assert_int_equal(sg_helper_run(n, argv, NULL, 0, &out, NULL), 0);
	j = parse(out.p, out.len);
	sg_buf_release(&out);
	if (!json_is_true(json_object_get(j, "ok")))
		fail_msg("read failed: %s", json_dumps(j, 0));
	return j;
}

static void assert_output(json_t *r, const char *want)
{
	const char *got = str(r, "Output");

	assert_non_null(got);
	assert_string_equal(got, want);
}

/* The internal fields of a record, read from the file (no reply has them). */
static json_int_t internal_field(struct fixture *f, const char *id,
				 const char *key)
{
	char path[256];
	json_error_t e;
	json_t *j;
	json_int_t v;

	snprintf(path, sizeof(path), "%s/%s/record.json", f->ctl, id);
	j = json_load_file(path, 0, &e);
	assert_non_null(j);
	v = num(j, key);
	json_decref(j);
	return v;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	/* mkdtemp's template: the name ends in six 'X' it replaces. */
	snprintf(f->dir, sizeof(f->dir), "/tmp/sg-proc-");
	memset(f->dir + strlen(f->dir), 'X', 6);
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->ctl, sizeof(f->ctl), "%s/ctl", f->dir);
	*state = f;
	return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Kill whatever a test left running, then remove the directory. */
static int teardown(void **state)
{
	struct fixture *f = *state;
	char path[512];
	struct dirent *de;
	struct stat st;
	DIR *d = opendir(f->ctl);

	while (d && (de = readdir(d))) {
		json_error_t e;
		json_t *j;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/record.json", f->ctl,
			 de->d_name);
		/* A test may leave a FIFO there, which would wait for a writer. */
		if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
			continue;
		j = json_load_file(path, 0, &e);
		if (!j)
			continue;
		if (json_integer_value(json_object_get(j, "pgid")) > 0)
			kill(-(pid_t)json_integer_value(json_object_get(j, "pgid")),
			     SIGKILL);
		if (json_integer_value(json_object_get(j, "supervisor_pid")) > 0 &&
		    strcmp(json_string_value(json_object_get(j, "status")),
			   "running") == 0)
			kill((pid_t)json_integer_value(
				     json_object_get(j, "supervisor_pid")),
			     SIGKILL);
		json_decref(j);
	}
	if (d)
		closedir(d);
	nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

/* ---- tests ------------------------------------------------------------------ */

static void test_exit_code_and_offsets(void **state)
{
	struct fixture *f = *state;
	json_t *rec = spawn_sh(f, "p1", "printf 'hello\\n'; exit 7");
	json_t *r;

	assert_string_equal(str(rec, "id"), "p1");
	assert_string_equal(str(rec, "root_thread_id"), "s1");
	/* The host's process.Process: no key of the supervisor's own. */
	assert_null(json_object_get(rec, "operation_id"));
	assert_null(json_object_get(rec, "argv"));
	assert_string_equal(str(rec, "lifecycle"), "managed");
	assert_string_equal(str(rec, "owner_kind"), "main_agent");
	assert_string_equal(str(rec, "completion_mode"), "resume");
	assert_string_equal(str(rec, "status"), "running");
	assert_string_equal(str(rec, "stopped_at"), "0001-01-01T00:00:00Z");
	assert_int_equal(num(rec, "exit_code"), -1);
	assert_false(is_true(rec, "tty"));
	assert_null(json_object_get(rec, "supervisor_pid"));
	assert_null(json_object_get(rec, "stamp"));
	json_decref(rec);

	rec = await_end(f, "p1", 5000);
	/* A non-zero natural exit ends `failed`, saying so as Go would. */
	assert_string_equal(str(rec, "status"), "failed");
	assert_int_equal(num(rec, "exit_code"), 7);
	assert_string_equal(str(rec, "last_error"), "exit status 7");
	assert_string_equal(str(rec, "terminal_cause"), "natural_exit");
	assert_null(json_object_get(rec, "signal"));
	assert_string_not_equal(str(rec, "stopped_at"), "0001-01-01T00:00:00Z");
	json_decref(rec);

	r = rd(f, "p1", NULL, NULL, NULL, NULL);
	assert_output(r, "hello\n");
	assert_int_equal(num(r, "StartOffset"), 0);
	assert_int_equal(num(r, "EndOffset"), 6);
	assert_int_equal(num(r, "TotalBytes"), 6);
	assert_false(is_true(r, "Truncated"));
	assert_false(is_true(r, "TimedOut"));
	assert_string_equal(str(json_object_get(r, "Process"), "status"),
			    "failed");
	json_decref(r);

	r = rd(f, "p1", "2", "2", NULL, NULL);
	assert_output(r, "ll");
	assert_int_equal(num(r, "StartOffset"), 2);
	assert_int_equal(num(r, "EndOffset"), 4);
	json_decref(r);

	/* Past the end: an empty window at TotalBytes, answered at once. */
	r = rd(f, "p1", "100", NULL, "5000000000", NULL);
	assert_output(r, "");
	assert_int_equal(num(r, "StartOffset"), 6);
	assert_int_equal(num(r, "EndOffset"), 6);
	assert_false(is_true(r, "TimedOut"));
	json_decref(r);
}

static void test_argv_and_op(void **state)
{
	struct fixture *f = *state;
	json_t *reply = spawn(f, "p1", "s1", "--op", "op-9", "--cwd", f->dir,
			      "--", "/bin/sh", "-c", "pwd; echo \"$0\" \"$1\"",
			      "x y", "z", NULL);
	json_t *rec = json_object_get(reply, "process");
	json_t *r;
	char want[256];

	/* An argv start shows its program as the command. */
	assert_string_equal(str(rec, "command"), "/bin/sh");
	assert_null(json_object_get(rec, "argv"));
	assert_string_equal(str(rec, "operation_id"), "op-9");
	assert_string_equal(str(rec, "cwd"), f->dir);
	assert_true(num(rec, "pid") > 0);
	json_decref(reply);

	json_decref(await_end(f, "p1", 5000));
	r = rd(f, "p1", NULL, NULL, NULL, NULL);
	snprintf(want, sizeof(want), "%s\nx y z\n", f->dir);
	assert_output(r, want);
	json_decref(r);
}

static void test_exec_failure(void **state)
{
	struct fixture *f = *state;
	json_t *reply = spawn(f, "p1", "s1", "--", "/nonexistent/program",
			      NULL);
	json_t *rec = json_object_get(reply, "process");
	json_t *r;

	assert_true(is_true(reply, "ok"));
	assert_string_equal(str(rec, "status"), "failed");
	assert_int_equal(num(rec, "exit_code"), -1);
	assert_non_null(strstr(str(reply, "message"), "/nonexistent/program"));
	assert_non_null(strstr(str(rec, "last_error"), "/nonexistent/program"));
	json_decref(reply);

	/* The record stays failed and reads as empty, not timed out. */
	r = rd(f, "p1", NULL, NULL, "1000000000", NULL);
	assert_output(r, "");
	assert_false(is_true(r, "TimedOut"));
	assert_string_equal(str(json_object_get(r, "Process"), "status"),
			    "failed");
	json_decref(r);

	reply = spawn(f, "p2", "s1", "--cwd", "/nonexistent/dir", "--command",
		      "true", NULL);
	rec = json_object_get(reply, "process");
	assert_string_equal(str(rec, "status"), "failed");
	assert_non_null(strstr(str(reply, "message"), "/nonexistent/dir"));
	json_decref(reply);
}

static void test_long_poll_wakes(void **state)
{
	struct fixture *f = *state;
	int64_t t0;
	json_t *r;

	json_decref(spawn_sh(f, "p1", "sleep 0.3; printf x; sleep 10"));
	t0 = sg_now_ns();
	r = rd(f, "p1", "0", NULL, "5000000000", NULL);
	/* Woken by the write, not by the 5 s Wait. */
	assert_true(sg_now_ns() - t0 < 2000 * MS);
	assert_true(sg_now_ns() - t0 >= 200 * MS);
	assert_output(r, "x");
	assert_false(is_true(r, "TimedOut"));
	assert_string_equal(str(json_object_get(r, "Process"), "status"),
			    "running");
	json_decref(r);
}

static void test_timed_out(void **state)
{
	struct fixture *f = *state;
	int64_t t0;
	json_t *r;

	json_decref(spawn_sh(f, "p1", "sleep 10"));
	/* Without a wait nothing times out. */
	r = rd(f, "p1", "0", NULL, "0", NULL);
	assert_output(r, "");
	assert_false(is_true(r, "TimedOut"));
	json_decref(r);

	t0 = sg_now_ns();
	r = rd(f, "p1", "0", NULL, "150000000", NULL);
	assert_true(sg_now_ns() - t0 >= 150 * MS);
	assert_true(sg_now_ns() - t0 < 1500 * MS);
	assert_true(is_true(r, "TimedOut"));
	assert_int_equal(num(r, "TotalBytes"), 0);
	json_decref(r);
}

static void test_min_dwell(void **state)
{
	struct fixture *f = *state;
	int64_t t0;
	json_t *r;

	json_decref(spawn_sh(f, "p1", "printf a; sleep 0.2; printf b; "
				      "sleep 0.2; printf c; sleep 10"));
	/* Without MinDwell the first byte is answered at once. */
	r = rd(f, "p1", "0", NULL, "2000000000", NULL);
	assert_output(r, "a");
	json_decref(r);

	/* With it, output is collected for 1 s from the first byte. */
	t0 = sg_now_ns();
	r = rd(f, "p1", "0", NULL, "2000000000", "1000000000");
	assert_true(sg_now_ns() - t0 >= 900 * MS);
	assert_output(r, "abc");
	json_decref(r);

	/* MaxBytes ends the dwell early. */
	t0 = sg_now_ns();
	r = rd(f, "p1", "0", "2", "2000000000", "5000000000");
	assert_true(sg_now_ns() - t0 < 2000 * MS);
	assert_output(r, "ab");
	json_decref(r);
}

static void test_dwell_ends_at_exit(void **state)
{
	struct fixture *f = *state;
	int64_t t0;
	json_t *r;

	json_decref(spawn_sh(f, "p1", "printf a; sleep 0.2; printf b"));
	t0 = sg_now_ns();
	r = rd(f, "p1", "0", NULL, "2000000000", "5000000000");
	assert_true(sg_now_ns() - t0 < 2500 * MS);
	assert_output(r, "ab");
	assert_string_equal(str(json_object_get(r, "Process"), "status"),
			    "stopped");
	json_decref(r);
}

static void test_retention(void **state)
{
	struct fixture *f = *state;
	json_t *r;

	json_decref(spawn(f, "p1", "s1", "--retain", "16", "--command",
			  "for i in 0 1 2 3 4 5 6 7 8 9; do printf 0123456789; "
			  "sleep 0.01; done",
			  NULL));
	json_decref(await_end(f, "p1", 5000));

	/* From an offset the spool no longer holds: what it holds, and
	 * nothing follows the window. */
	r = rd(f, "p1", "0", NULL, NULL, NULL);
	assert_int_equal(num(r, "TotalBytes"), 100);
	assert_int_equal(num(r, "StartOffset"), 84);
	assert_int_equal(num(r, "EndOffset"), 100);
	assert_false(is_true(r, "Truncated"));
	assert_output(r, "4567890123456789");
	json_decref(r);

	/* A window with bytes after it is Truncated (more follows). */
	r = rd(f, "p1", "90", "5", NULL, NULL);
	assert_true(is_true(r, "Truncated"));
	assert_output(r, "01234");
	json_decref(r);

	/* The final record says where the spool begins. */
	r = get(f, "p1");
	assert_int_equal(num(json_object_get(r, "process"), "log_base_offset"), 84);
	json_decref(r);

	/* Wrapped: offsets 94..100 sit at the file's end and start. */
	r = rd(f, "p1", "93", NULL, NULL, NULL);
	assert_output(r, "3456789");
	json_decref(r);
}

/* The byte at offset o of the stream `printf '%08d\n' i` for i = 0, 1 ... */
static char counter_byte(uint64_t o)
{
	char line[24];

	if (o % 9 == 8)
		return '\n';
	snprintf(line, sizeof(line), "%08llu", (unsigned long long)(o / 9));
	return line[o % 9];
}

static void test_reads_race_the_writer(void **state)
{
	struct fixture *f = *state;
	int64_t end = sg_now_ns() + 500 * MS;
	int reads = 0, truncated = 0;

	/* 100 bytes kept of a fast stream: every read races overwrites. */
	json_decref(spawn(f, "p1", "s1", "--retain", "100", "--command",
			  "i=0; while [ $i -lt 100000 ]; do "
			  "printf '%08d\\n' $i; i=$((i+1)); done",
			  NULL));
	while (sg_now_ns() < end) {
		json_t *r = rd(f, "p1", "0", "60", NULL, NULL);
		const char *out = str(r, "Output");
		json_int_t start = num(r, "StartOffset");
		size_t n = strlen(out);

		assert_int_equal(num(r, "EndOffset"), start + (json_int_t)n);
		assert_true(num(r, "TotalBytes") - start <= 100);
		for (size_t i = 0; i < n; i++)
			if (out[i] != counter_byte((uint64_t)start + i))
				fail_msg("byte %llu is %c",
					 (unsigned long long)start + i, out[i]);
		if (start > 0)
			truncated++;
		/* More always follows a window of a stream this long. */
		if (num(r, "TotalBytes") > num(r, "EndOffset"))
			assert_true(is_true(r, "Truncated"));
		reads++;
		json_decref(r);
	}
	assert_true(reads > 10);
	assert_true(truncated > 0);
}

static void test_confined(void **state)
{
	struct fixture *f = *state;
	char cmd[512];
	json_t *reply, *rec, *r;

	snprintf(cmd, sizeof(cmd),
		 "touch file 2>/dev/null && echo wrote || echo denied; "
		 "touch %s/.tmp/t 2>/dev/null && echo tmp || echo no-tmp",
		 f->ctl);
	reply = spawn(f, "p1", "s1", "--confine", "read_only", "--root",
		      f->dir, "--cwd", f->dir, "--command", cmd, NULL);
	rec = json_object_get(reply, "process");
	if (strcmp(str(rec, "status"), "failed") == 0 &&
	    strstr(str(reply, "message"), "andlock")) {
		json_decref(reply);
		skip();
	}
	json_decref(reply);
	json_decref(await_end(f, "p1", 5000));
	/* read_only writes nowhere, not even in the ctl's tmp directory. */
	r = rd(f, "p1", NULL, NULL, NULL, NULL);
	assert_output(r, "denied\nno-tmp\n");
	json_decref(r);

	/* standard writes under the root and in the ctl's tmp directory. */
	json_decref(spawn(f, "p2", "s1", "--confine", "standard", "--root",
			  f->dir, "--cwd", f->dir, "--command", cmd, NULL));
	json_decref(await_end(f, "p2", 5000));
	r = rd(f, "p2", NULL, NULL, NULL, NULL);
	assert_output(r, "wrote\ntmp\n");
	json_decref(r);
}

static void test_invalid_utf8(void **state)
{
	struct fixture *f = *state;
	json_t *r;

	json_decref(spawn_sh(f, "p1", "printf '\\377ab\\342\\202\\254'"));
	json_decref(await_end(f, "p1", 5000));
	r = rd(f, "p1", NULL, NULL, NULL, NULL);
	assert_output(r, "\xef\xbf\xbd" "ab" "\xe2\x82\xac");
	assert_int_equal(num(r, "EndOffset"), 6);
	assert_int_equal(num(r, "TotalBytes"), 6);
	json_decref(r);
}

static void test_utf8_edge(void **state)
{
	struct fixture *f = *state;
	json_t *r;

	json_decref(spawn_sh(f, "p1", "printf 'ab\\342\\202\\254cd'"));
	json_decref(await_end(f, "p1", 5000));

	/* The euro sign would straddle MaxBytes 3: it is left for later. */
	r = rd(f, "p1", "0", "3", NULL, NULL);
	assert_output(r, "ab");
	assert_int_equal(num(r, "EndOffset"), 2);
	json_decref(r);

	/* A MaxBytes smaller than the first character returns it whole. */
	r = rd(f, "p1", "2", "1", NULL, NULL);
	assert_output(r, "\xe2\x82\xac");
	assert_int_equal(num(r, "StartOffset"), 2);
	assert_int_equal(num(r, "EndOffset"), 5);
	json_decref(r);

	r = rd(f, "p1", "2", "4", NULL, NULL);
	assert_output(r, "\xe2\x82\xac" "c");
	json_decref(r);
}

static void test_unfinished_char_held_back(void **state)
{
	struct fixture *f = *state;
	json_t *r;

	json_decref(spawn_sh(f, "p1", "printf 'a\\342\\202'; sleep 0.4; "
				      "printf '\\254'; sleep 10"));
	/* While the process runs, the half character waits for its end. */
	r = rd(f, "p1", "0", NULL, "100000000", NULL);
	assert_output(r, "a");
	assert_int_equal(num(r, "EndOffset"), 1);
	json_decref(r);

	r = rd(f, "p1", "1", NULL, "3000000000", NULL);
	assert_output(r, "\xe2\x82\xac");
	assert_int_equal(num(r, "StartOffset"), 1);
	assert_int_equal(num(r, "EndOffset"), 4);
	json_decref(r);
}

static void test_stop(void **state)
{
	struct fixture *f = *state;
	json_t *r, *rec, *again;
	char *a, *b;
	int64_t t0;

	json_decref(spawn_sh(f, "p1", "sleep 10"));
	t0 = sg_now_ns();
	r = run("proc", "stop", "--ctl", f->ctl, "--id", "p1", NULL);
	assert_true(sg_now_ns() - t0 < 1500 * MS);
	rec = json_object_get(r, "process");
	assert_string_equal(str(rec, "status"), "stopped");
	assert_string_equal(str(rec, "terminal_cause"), "requested_stop");
	assert_int_equal(num(rec, "exit_code"), -1);
	assert_null(json_object_get(rec, "last_error"));

	/* Stopping an ended process returns its record unchanged. */
	again = run("proc", "stop", "--ctl", f->ctl, "--id", "p1", NULL);
	a = json_dumps(rec, JSON_SORT_KEYS);
	b = json_dumps(json_object_get(again, "process"), JSON_SORT_KEYS);
	assert_string_equal(a, b);
	free(a);
	free(b);
	json_decref(again);
	json_decref(r);
}

static void test_stop_grace_then_kill(void **state)
{
	struct fixture *f = *state;
	json_t *r, *rec;
	int64_t t0;

	json_decref(spawn_sh(f, "p1", "trap '' TERM; printf ready; "
				      "while :; do sleep 0.05; done"));
	r = rd(f, "p1", "0", NULL, "5000000000", NULL);
	assert_output(r, "ready");
	json_decref(r);

	t0 = sg_now_ns();
	r = run("proc", "stop", "--ctl", f->ctl, "--id", "p1", "--grace-ms",
		"300", NULL);
	assert_true(sg_now_ns() - t0 >= 300 * MS);
	assert_true(sg_now_ns() - t0 < 3000 * MS);
	rec = json_object_get(r, "process");
	assert_string_equal(str(rec, "status"), "stopped");
	assert_string_equal(str(rec, "terminal_cause"), "requested_stop");
	/* Killed after the grace: the SIGKILL is in the file's record. */
	assert_int_equal(num(rec, "exit_code"), -1);
	json_decref(r);
}

static void test_timeout(void **state)
{
	struct fixture *f = *state;
	json_t *rec;

	json_decref(spawn(f, "p1", "s1", "--timeout-ms", "200", "--command",
			  "sleep 10", NULL));
	rec = await_end(f, "p1", 5000);
	assert_string_equal(str(rec, "status"), "stopped");
	assert_string_equal(str(rec, "last_error"), "the process reached its timeout");
	json_decref(rec);
}

static void test_group_killed_and_pipe_given_up(void **state)
{
	struct fixture *f = *state;
	json_t *r, *rec;
	int64_t t0 = sg_now_ns();
	char path[64], st = 0;
	long pid;

	/* A background job in the group dies with the command; a daemon in
	 * a session of its own keeps the pipe, and is given up on. */
	json_decref(spawn_sh(f, "p1", "sleep 30 & echo $!; "
				      "setsid sleep 3 & printf done"));
	rec = await_end(f, "p1", 5000);
	assert_true(sg_now_ns() - t0 < 2000 * MS);
	assert_string_equal(str(rec, "status"), "stopped");
	assert_string_equal(str(rec, "terminal_cause"), "natural_exit");
	assert_int_equal(num(rec, "exit_code"), 0);
	json_decref(rec);

	r = rd(f, "p1", NULL, NULL, NULL, NULL);
	assert_non_null(strstr(str(r, "Output"), "done"));
	pid = strtol(str(r, "Output"), NULL, 10);
	json_decref(r);
	assert_true(pid > 0);
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	for (int i = 0; i < 100; i++) {
		FILE *fp = fopen(path, "r");

		st = 0;
		if (fp) {
			if (fscanf(fp, "%*d (%*[^)]) %c", &st) != 1)
				st = 0;
			fclose(fp);
		}
		if (!fp || st == 'Z')
			break;
		usleep(10000);
	}
	assert_true(st == 0 || st == 'Z');
}

static void test_lost(void **state)
{
	/* Odd characters survive the record's rewrite (parse, then write). */
	static const char cmd[] = "sleep 10 # \"q\" \\ \t \x01 \xc3\xa9 "
				  "\xe2\x98\x83 \xf0\x9f\x99\x82";
	struct fixture *f = *state;
	json_t *r, *rec;
	pid_t sup;

	json_decref(spawn_sh(f, "p1", cmd));
	sup = (pid_t)internal_field(f, "p1", "supervisor_pid");
	assert_true(sup > 0);
	assert_int_equal(kill(sup, SIGKILL), 0);
	usleep(50000);
	r = get(f, "p1");
	rec = json_object_get(r, "process");
	/* The host has no `lost`: a failure that says what is unknown. */
	assert_string_equal(str(rec, "status"), "failed");
	assert_non_null(strstr(str(rec, "last_error"), "supervisor is gone"));
	assert_string_not_equal(str(rec, "stopped_at"), "0001-01-01T00:00:00Z");
	assert_string_equal(str(rec, "command"), cmd);
	json_decref(r);
	/* Rewritten, not only reported. */
	r = run("proc", "list", "--ctl", f->ctl, "--session", "s1", NULL);
	assert_string_equal(
		str(json_array_get(json_object_get(r, "processes"), 0),
		    "status"),
		"failed");
	json_decref(r);
}

static void test_lost_ends_a_waiting_read(void **state)
{
	struct fixture *f = *state;
	pid_t sup;
	int64_t t0;
	json_t *r;

	json_decref(spawn_sh(f, "p1", "sleep 10"));
	sup = (pid_t)internal_field(f, "p1", "supervisor_pid");
	if (fork() == 0) {
		usleep(200000);
		kill(sup, SIGKILL);
		_exit(0);
	}
	t0 = sg_now_ns();
	r = rd(f, "p1", "0", NULL, "5000000000", NULL);
	assert_true(sg_now_ns() - t0 < 2500 * MS);
	assert_string_equal(str(json_object_get(r, "Process"), "status"),
			    "failed");
	assert_false(is_true(r, "TimedOut"));
	json_decref(r);
	wait(NULL);
}

static void test_list_per_session(void **state)
{
	struct fixture *f = *state;
	json_t *r, *v;

	json_decref(spawn(f, "a1", "s1", "--command", "true", NULL));
	json_decref(spawn(f, "b1", "s2", "--command", "true", NULL));
	json_decref(spawn(f, "a0", "s1", "--command", "true", NULL));

	r = run("proc", "list", "--ctl", f->ctl, "--session", "s1", NULL);
	v = json_object_get(r, "processes");
	assert_int_equal(json_array_size(v), 2);
	/* Oldest first, whatever the names. */
	assert_string_equal(str(json_array_get(v, 0), "id"), "a1");
	assert_string_equal(str(json_array_get(v, 1), "id"), "a0");
	json_decref(r);

	r = run("proc", "list", "--ctl", f->ctl, "--session", "s2", NULL);
	v = json_object_get(r, "processes");
	assert_int_equal(json_array_size(v), 1);
	assert_string_equal(str(json_array_get(v, 0), "id"), "b1");
	json_decref(r);

	r = run("proc", "list", "--ctl", f->ctl, "--session", "none", NULL);
	assert_int_equal(json_array_size(json_object_get(r, "processes")), 0);
	json_decref(r);
}

static void test_wait_changes(void **state)
{
	struct fixture *f = *state;
	char since[32];
	json_t *r, *v;
	int64_t t0;
	json_int_t s0, s1;

	json_decref(spawn(f, "other", "s2", "--command", "true", NULL));
	/* Nothing of s1 yet: the timeout ends the wait. */
	t0 = sg_now_ns();
	r = run("proc", "wait", "--ctl", f->ctl, "--session", "s1", "--since",
		"0", "--timeout-ms", "150", NULL);
	assert_true(sg_now_ns() - t0 >= 150 * MS);
	assert_int_equal(json_array_size(json_object_get(r, "changed")), 0);
	s0 = num(r, "stamp");
	json_decref(r);

	json_decref(spawn_sh(f, "p1", "sleep 0.4"));
	snprintf(since, sizeof(since), "%lld", (long long)s0);
	r = run("proc", "wait", "--ctl", f->ctl, "--session", "s1", "--since",
		since, "--timeout-ms", "5000", NULL);
	v = json_object_get(r, "changed");
	assert_int_equal(json_array_size(v), 1);
	assert_string_equal(str(json_array_get(v, 0), "status"), "running");
	s1 = num(r, "stamp");
	assert_true(s1 > s0);
	json_decref(r);

	/* The exit wakes the next wait. */
	snprintf(since, sizeof(since), "%lld", (long long)s1);
	t0 = sg_now_ns();
	r = run("proc", "wait", "--ctl", f->ctl, "--session", "s1", "--since",
		since, "--timeout-ms", "5000", NULL);
	assert_true(sg_now_ns() - t0 < 3000 * MS);
	v = json_object_get(r, "changed");
	assert_int_equal(json_array_size(v), 1);
	assert_string_equal(str(json_array_get(v, 0), "status"), "stopped");
	assert_true(num(r, "stamp") > s1);
	json_decref(r);
}

struct reader {
	struct fixture *f;
	struct sg_cancel *cancel;
	json_t *reply;
};

static void *read_thread(void *p)
{
	struct reader *rd_ = p;

	rd_->reply = run_c(rd_->cancel, "proc", "read", "--ctl", rd_->f->ctl,
			   "--id", "p1", "--wait-ns", "10000000000", NULL);
	return NULL;
}

static void test_cancel_read(void **state)
{
	struct fixture *f = *state;
	struct sg_cancel cancel;
	struct reader r = { .f = f, .cancel = &cancel };
	pthread_t t;
	int64_t t0;

	assert_int_equal(sg_cancel_init(&cancel), SG_OK);
	json_decref(spawn_sh(f, "p1", "sleep 10"));
	t0 = sg_now_ns();
	assert_int_equal(pthread_create(&t, NULL, read_thread, &r), 0);
	usleep(150000);
	sg_cancel_fire(&cancel, SG_E_CANCELLED);
	pthread_join(t, NULL);
	assert_true(sg_now_ns() - t0 < 2000 * MS);
	assert_string_equal(str(r.reply, "error"), "cancelled");
	json_decref(r.reply);
	sg_cancel_release(&cancel);
}

static void test_errors(void **state)
{
	struct fixture *f = *state;
	json_t *r;

	r = get(f, "nope");
	assert_string_equal(str(r, "error"), "not_found");
	json_decref(r);
	r = get(f, "../etc");
	assert_string_equal(str(r, "error"), "invalid_argument");
	json_decref(r);
	r = run("proc", "read", "--ctl", f->ctl, "--id", "nope", NULL);
	assert_string_equal(str(r, "error"), "not_found");
	json_decref(r);
	r = run("proc", "get", "--ctl", f->ctl, "--id", "x", "--bogus", "1",
		NULL);
	assert_string_equal(str(r, "error"), "invalid_argument");
	json_decref(r);
	r = run("proc", "frobnicate", NULL);
	assert_string_equal(str(r, "error"), "invalid_argument");
	json_decref(r);

	/* What must run inside the environment is refused in-process. */
	r = run("proc", "spawn", "--ctl", f->ctl, "--id", "p1", "--session",
		"s1", "--command", "true", NULL);
	assert_string_equal(str(r, "error"), "invalid_argument");
	json_decref(r);
	assert_int_equal(access(f->ctl, F_OK), -1);
	r = run("confine", "--mode", "read_only", "--root", "/", "--", "true",
		NULL);
	assert_string_equal(str(r, "error"), "invalid_argument");
	json_decref(r);
	r = run("bogus", NULL);
	assert_string_equal(str(r, "error"), "invalid_argument");
	json_decref(r);

	/* The program: an id is used once; one of --command and argv. */
	json_decref(spawn(f, "p1", "s1", "--command", "true", NULL));
	r = spawn(f, "p1", "s1", "--command", "true", NULL);
	assert_string_equal(str(r, "error"), "invalid_argument");
	json_decref(r);
	r = spawn(f, "p2", "s1", "--command", "true", "--", "true", NULL);
	assert_string_equal(str(r, "error"), "invalid_argument");
	json_decref(r);
	r = spawn(f, "p3", "s1", NULL);
	assert_string_equal(str(r, "error"), "invalid_argument");
	json_decref(r);
}

/* ---- a hostile environment ------------------------------------------------ */

/* Write data to path (a new file), for the tests below. */
static void put_file(const char *path, const void *data, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, n), (ssize_t)n);
	close(fd);
}

/*
 * A command replaces its process directory ctl/p1 with a link to a
 * directory outside (the host's, on the local backend) that holds files
 * with the spool's names.  Nothing may be read from or written there:
 * the id is no process any more.
 */
static void test_linked_process_dir_is_no_process(void **state)
{
	struct fixture *f = *state;
	char outside[128], path[256], real[256], link[256], text[4096];
	uint64_t prog[3] = { 7, 7, UINT64_C(7) ^ 7 ^ UINT64_C(0x73672d70726f6373) };
	json_t *r;
	ssize_t n;
	int fd;
	DIR *d;
	struct dirent *de;
	char *dump;
	int files = 0;

	json_decref(spawn_sh(f, "p1", "sleep 10"));
	snprintf(outside, sizeof(outside), "%s/outside", f->dir);
	assert_int_equal(mkdir(outside, 0700), 0);
	/* The outside holds a live record of this very session and a spool. */
	snprintf(path, sizeof(path), "%s/p1/record.json", f->ctl);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	n = read(fd, text, sizeof(text));
	close(fd);
	assert_true(n > 0);
	snprintf(path, sizeof(path), "%s/record.json", outside);
	put_file(path, text, (size_t)n);
	snprintf(path, sizeof(path), "%s/out", outside);
	put_file(path, "SECRET\n", 7);
	snprintf(path, sizeof(path), "%s/progress", outside);
	put_file(path, prog, sizeof(prog));
	snprintf(real, sizeof(real), "%s/p1.real", f->ctl);
	snprintf(link, sizeof(link), "%s/p1", f->ctl);
	assert_int_equal(rename(link, real), 0);
	assert_int_equal(symlink(outside, link), 0);

	r = get(f, "p1");
	assert_false(is_true(r, "ok"));
	assert_string_equal(str(r, "error"), "not_found");
	json_decref(r);
	r = run("proc", "read", "--ctl", f->ctl, "--id", "p1", NULL);
	dump = json_dumps(r, 0);
	assert_false(is_true(r, "ok"));
	assert_null(strstr(dump, "SECRET"));
	free(dump);
	json_decref(r);
	r = run("proc", "stop", "--ctl", f->ctl, "--id", "p1", "--grace-ms", "0", NULL);
	assert_false(is_true(r, "ok"));
	json_decref(r);
	/* The real process was not signalled through the link, and the
	 * directory outside is as it was: no stop marker, no record rewritten. */
	usleep(300000);
	d = opendir(outside);
	assert_non_null(d);
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		files++;
		assert_true(strcmp(de->d_name, "record.json") == 0 ||
			    strcmp(de->d_name, "out") == 0 ||
			    strcmp(de->d_name, "progress") == 0);
	}
	closedir(d);
	assert_int_equal(files, 3);
	snprintf(path, sizeof(path), "%s/record.json", outside);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, text + n, sizeof(text) - (size_t)n), n);
	close(fd);
	assert_memory_equal(text, text + n, (size_t)n);
	r = get(f, "p1.real");
	assert_string_equal(str(json_object_get(r, "process"), "status"), "running");
	json_decref(r);
}

/*
 * A command puts a FIFO where the helper opens a file of its process
 * (name), with the supervisor killed first when lost (the record is then
 * rewritten).  The step run must answer at once, not wait in open(2) for
 * a writer: a child opens the FIFO after 3 s, which would release it.
 */
static void fifo_case(struct fixture *f, const char *name, bool lost, const char *cmd)
{
	char path[256];
	int64_t t0, took;
	pid_t opener;
	json_t *r;

	json_decref(spawn_sh(f, "p1", "sleep 10"));
	snprintf(path, sizeof(path), "%s/p1/%s", f->ctl, name);
	unlink(path);
	assert_int_equal(mkfifo(path, 0600), 0);
	if (lost) {
		pid_t sup = (pid_t)internal_field(f, "p1", "supervisor_pid");

		assert_int_equal(kill(sup, SIGKILL), 0);
		usleep(100000);
	}
	opener = fork();
	assert_true(opener >= 0);
	if (opener == 0) {
		int fd;

		sleep(3);
		/* O_RDWR never waits, and releases an open on either side. */
		fd = open(path, O_RDWR | O_NONBLOCK);
		usleep(200000);
		if (fd >= 0)
			close(fd);
		_exit(0);
	}
	t0 = sg_now_ms();
	if (strcmp(cmd, "read") == 0)
		r = run("proc", "read", "--ctl", f->ctl, "--id", "p1", NULL);
	else if (strcmp(cmd, "stop") == 0)
		r = run("proc", "stop", "--ctl", f->ctl, "--id", "p1", "--grace-ms", "0", NULL);
	else
		r = get(f, "p1");
	took = sg_now_ms() - t0;
	kill(opener, SIGKILL);
	waitpid(opener, NULL, 0);
	if (took >= 2000)
		fail_msg("proc %s waited %lld ms on a FIFO at %s", cmd, (long long)took, name);
	json_decref(r);
}

static void test_fifo_out_does_not_block_a_read(void **state)
{
	fifo_case(*state, "out", false, "read");
}

static void test_fifo_progress_does_not_block_a_read(void **state)
{
	fifo_case(*state, "progress", false, "read");
}

static void test_fifo_record_tmp_does_not_block_the_lost_rewrite(void **state)
{
	fifo_case(*state, "record.tmp", true, "get");
}

static void test_fifo_stop_marker_does_not_block_a_stop(void **state)
{
	fifo_case(*state, "stop", false, "stop");
}

/* ---- the host's additions: tail, update, input, terminal, foreground ---- */

static void test_tail_read(void **state)
{
	struct fixture *f = *state;
	json_t *r;

	json_decref(spawn_sh(f, "p1", "printf 0123456789"));
	json_decref(await_end(f, "p1", 5000));
	/* No offset: the last MaxBytes, Truncated when older bytes exist. */
	r = run("proc", "read", "--ctl", f->ctl, "--id", "p1", "--tail", "--max", "4", NULL);
	assert_output(r, "6789");
	assert_int_equal(num(r, "StartOffset"), 6);
	assert_true(is_true(r, "Truncated"));
	json_decref(r);
	r = run("proc", "read", "--ctl", f->ctl, "--id", "p1", "--tail", "--max", "40", NULL);
	assert_output(r, "0123456789");
	assert_false(is_true(r, "Truncated"));
	json_decref(r);
}

static void test_update(void **state)
{
	struct fixture *f = *state;
	json_t *r, *rec;

	json_decref(spawn_sh(f, "p1", "sleep 10"));
	r = run("proc", "update", "--ctl", f->ctl, "--id", "p1", "--mode", "detached", NULL);
	assert_string_equal(str(json_object_get(r, "process"), "completion_mode"), "detached");
	json_decref(r);
	r = run("proc", "update", "--ctl", f->ctl, "--id", "p1", "--recheck-minutes", "15", NULL);
	rec = json_object_get(r, "process");
	assert_int_equal(num(rec, "recheck_minutes"), 15);
	assert_non_null(str(rec, "next_recheck_at"));
	json_decref(r);
	/* A live process has no completion to deliver. */
	r = run("proc", "update", "--ctl", f->ctl, "--id", "p1", "--deliver", "host", NULL);
	assert_string_equal(str(r, "error"), "invalid_argument");
	json_decref(r);
	/* What the host set survives the supervisor's final record. */
	json_decref(run("proc", "stop", "--ctl", f->ctl, "--id", "p1", NULL));
	rec = await_end(f, "p1", 5000);
	assert_string_equal(str(rec, "completion_mode"), "detached");
	assert_null(json_object_get(rec, "next_recheck_at"));
	json_decref(rec);

	json_decref(spawn_sh(f, "p2", "true"));
	json_decref(await_end(f, "p2", 5000));
	r = run("proc", "update", "--ctl", f->ctl, "--id", "p2", "--deliver", "thread-7", NULL);
	rec = json_object_get(r, "process");
	assert_string_equal(str(rec, "completion_consumed_by"), "thread-7");
	assert_non_null(str(rec, "completion_delivered_at"));
	json_decref(r);
	/* A recheck needs a live process. */
	r = run("proc", "update", "--ctl", f->ctl, "--id", "p2", "--recheck-minutes", "5", NULL);
	assert_string_equal(str(r, "error"), "invalid_argument");
	json_decref(r);
}

/* proc write with input; the reply. */
static json_t *wr(struct fixture *f, const char *id, const char *input)
{
	char *argv[] = { "proc", "write", "--ctl", f->ctl, "--id", (char *)id, NULL };
	struct sg_buf out = SG_BUF_INIT(SG_ENVTOOL_REPLY);
	json_t *j;

	assert_int_equal(sg_helper_run(6, argv, input, strlen(input), &out, NULL), 0);
	j = parse(out.p, out.len);
	sg_buf_release(&out);
	return j;
}

static void test_write_reaches_stdin(void **state)
{
	struct fixture *f = *state;
	json_t *r;

	json_decref(spawn(f, "p1", "s1", "--input", "--command", "read x; echo got $x", NULL));
	r = get(f, "p1");
	assert_true(is_true(r, "input_available"));
	json_decref(r);
	r = wr(f, "p1", "ping\n");
	assert_true(is_true(r, "ok"));
	json_decref(r);
	json_decref(await_end(f, "p1", 5000));
	r = rd(f, "p1", "0", NULL, NULL, NULL);
	assert_output(r, "got ping\n");
	json_decref(r);
	/* No input once it ended, nor for a process started without it. */
	r = wr(f, "p1", "late\n");
	assert_string_equal(str(r, "error"), "invalid_argument");
	json_decref(r);
	json_decref(spawn_sh(f, "p2", "sleep 10"));
	r = wr(f, "p2", "x");
	assert_string_equal(str(r, "error"), "invalid_argument");
	json_decref(r);
}

static void test_tty(void **state)
{
	struct fixture *f = *state;
	json_t *r, *rec = NULL;

	r = spawn(f, "p1", "s1", "--tty", "--command",
		  "stty size; test -t 0 && echo term; read x; echo got $x", NULL);
	assert_true(is_true(json_object_get(r, "process"), "tty"));
	json_decref(r);
	r = rd(f, "p1", "0", NULL, "3000000000", "300000000");
	assert_non_null(strstr(str(r, "Output"), "24 80"));
	assert_non_null(strstr(str(r, "Output"), "term"));
	json_decref(r);
	r = run("proc", "resize", "--ctl", f->ctl, "--id", "p1", "--cols", "100", "--rows",
		"30", NULL);
	assert_true(is_true(r, "ok"));
	json_decref(r);
	json_decref(wr(f, "p1", "pong\r"));
	rec = await_end(f, "p1", 5000);
	json_decref(rec);
	r = run("proc", "read", "--ctl", f->ctl, "--id", "p1", "--tail", NULL);
	assert_non_null(strstr(str(r, "Output"), "got pong"));
	json_decref(r);
	/* No terminal, nothing to resize. */
	json_decref(spawn_sh(f, "p2", "sleep 10"));
	r = run("proc", "resize", "--ctl", f->ctl, "--id", "p2", "--cols", "100", "--rows",
		"30", NULL);
	assert_string_equal(str(r, "error"), "invalid_argument");
	json_decref(r);
}

static void test_foreground(void **state)
{
	struct fixture *f = *state;
	json_t *r, *rec;

	/* Ended in time: its output, kept apart, and no process left to list. */
	r = spawn(f, "p1", "s1", "--wait-ms", "5000", "--command",
		  "echo out; echo err >&2; exit 3", NULL);
	assert_true(is_true(r, "ended"));
	assert_string_equal(str(r, "stdout"), "out\n");
	assert_string_equal(str(r, "stderr"), "err\n");
	assert_int_equal(num(r, "stdout_bytes"), 4);
	assert_int_equal(num(json_object_get(r, "process"), "exit_code"), 3);
	assert_int_equal(num(r, "full_log_bytes"), 8);
	{
		/* The full log is kept apart, and nothing of the run stays in the table. */
		char path[512], buf[64] = { 0 };
		FILE *fp;

		snprintf(path, sizeof(path), "%s/.logs/p1.log", f->ctl);
		assert_string_equal(str(r, "full_log_ref"), path);
		fp = fopen(path, "r");
		assert_non_null(fp);
		assert_int_equal(fread(buf, 1, sizeof(buf) - 1, fp), 8);
		fclose(fp);
		assert_string_equal(buf, "out\nerr\n");
		snprintf(path, sizeof(path), "%s/p1", f->ctl);
		assert_int_equal(access(path, F_OK), -1);
	}
	json_decref(r);
	r = run("proc", "list", "--ctl", f->ctl, "--session", "s1", NULL);
	assert_int_equal(json_array_size(json_object_get(r, "processes")), 0);
	json_decref(r);
	r = get(f, "p1");
	assert_string_equal(str(r, "error"), "not_found");
	json_decref(r);

	/* Past its wait: promoted, not killed, and listed from now on. */
	r = spawn(f, "p2", "s1", "--wait-ms", "300", "--command", "echo early; sleep 10", NULL);
	assert_false(is_true(r, "ended"));
	rec = json_object_get(r, "process");
	assert_string_equal(str(rec, "status"), "running");
	assert_int_equal(num(rec, "recheck_minutes"), 30);
	assert_string_equal(str(r, "stdout"), "early\n");
	json_decref(r);
	r = run("proc", "list", "--ctl", f->ctl, "--session", "s1", NULL);
	assert_int_equal(json_array_size(json_object_get(r, "processes")), 1);
	json_decref(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_exit_code_and_offsets),
		T(test_argv_and_op),
		T(test_exec_failure),
		T(test_long_poll_wakes),
		T(test_timed_out),
		T(test_min_dwell),
		T(test_dwell_ends_at_exit),
		T(test_retention),
		T(test_reads_race_the_writer),
		T(test_confined),
		T(test_invalid_utf8),
		T(test_utf8_edge),
		T(test_unfinished_char_held_back),
		T(test_stop),
		T(test_stop_grace_then_kill),
		T(test_timeout),
		T(test_group_killed_and_pipe_given_up),
		T(test_lost),
		T(test_lost_ends_a_waiting_read),
		T(test_list_per_session),
		T(test_wait_changes),
		T(test_cancel_read),
		T(test_errors),
		T(test_linked_process_dir_is_no_process),
		T(test_fifo_out_does_not_block_a_read),
		T(test_fifo_progress_does_not_block_a_read),
		T(test_fifo_record_tmp_does_not_block_the_lost_rewrite),
		T(test_fifo_stop_marker_does_not_block_a_stop),
		T(test_tail_read),
		T(test_update),
		T(test_write_reaches_stdin),
		T(test_tty),
		T(test_foreground),
#undef T
	};

	if (access(helper(), X_OK) != 0) {
		fprintf(stderr, "sg-helper not found at %s (set SG_HELPER)\n",
			helper());
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
