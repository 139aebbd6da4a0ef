/*
 * sgbench.c - sandgate's benchmarks, measured the way a host sees them.
 *
 * The program spawns `sandgate serve` with two pipes (on the profile that
 * --config and --profile name, else the default one), initializes a
 * session and then measures, over those pipes, on the local backend:
 *
 *   stat    round trips of execute(stat_path);
 *   cmd     execute(run_command "true"), from argv and from a shell string,
 *           against the same confined command (bubblewrap + `sg-helper
 *           confine` + true) spawned directly by this program;
 *   wake    how long a long-polling process/read takes to answer after the
 *           process wrote a byte (the process `cat`s a FIFO this program
 *           writes into);
 *   export  export/open + export/read of a large file in 4 MiB chunks +
 *           export/close, base64-decoded and checked against the sha256
 *           the open reply gave;
 *   rss     the gateway's resident set, idle after initialize and sampled
 *           every few milliseconds during the export;
 *
 * and on the ssh backend (the `ssh` set; `stat` runs on any backend):
 *
 *   ssh     execute(run_command "true") against a raw `ssh -S <socket> host
 *           true` over a ControlMaster of this program's own (same sshd,
 *           key and known_hosts), execute(read_file) of 1 MiB against a raw
 *           `ssh -S <socket> host cat <file>`, interleaved; the export of a
 *           64 MiB file made on the host; and the ssh client invocations
 *           per tool call, counted by a second gateway whose PATH starts
 *           with a counting `ssh` script (it logs one line per invocation,
 *           then runs the real client with the same arguments and stdin).
 *
 * The confined command line of the direct spawn is not rebuilt here: it is
 * read back from the sandbox itself (/proc/1/cmdline and /proc/1/environ
 * are bubblewrap's own argv and environment), so the comparison stays
 * exact whatever the adapter's sandbox arguments become.  The environment
 * is the command's own less PWD, which the sandbox adds (/proc/1/environ,
 * bubblewrap's, is not readable from inside).
 *
 * Invariants: one request is in flight at a time, so a reply is matched to
 * its request by id and anything else read meanwhile is a process/event;
 * every wait on the gateway has a deadline, so a hung gateway fails the run
 * instead of hanging it.  The table goes to stdout (this program's job),
 * diagnostics to stderr.
 */
/*
 * _GNU_SOURCE: pipe2 and posix_spawn_file_actions_addclosefrom_np are
 * GNU/Linux APIs; nftw's FTW_PHYS/FTW_DEPTH need the XSI part of it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define KiB ((size_t)1024)
#define MiB (KiB * 1024)

/* A reply frame is at most 16 MiB (protocol section 1); leave headroom. */
#define LINE_MAX_BYTES (17 * MiB)
/* Any single reply this program waits for must come within this. */
#define REPLY_DEADLINE_MS 120000
/* export/read's chunk: the protocol's default and cap. */
#define EXPORT_CHUNK (4 * MiB)
/* Before each wake-up, how long the read is left to block. */
#define WAKE_ARM_MS 20
/* A read that took less than this did not block before the write. */
#define WAKE_ARMED_NS (15 * 1000000LL)
/* Wake-ups slower than this are counted apart (a bimodal distribution). */
#define WAKE_SLOW_NS (5 * 1000000LL)
/* The RSS sampler's period. */
#define RSS_PERIOD_US 2000

#define TOKEN "sgbench"
#define SESSION "bench"
#define ROOT "/workspace"
#define WAKE_FIFO "sgbench-wake.fifo"
#define EXPORT_FILE "sgbench-export.bin"

struct opts {
	const char *sandgate;
	const char *config;    /* NULL: sandgate's own default */
	const char *profile;   /* NULL: the config's default */
	const char *state_dir; /* NULL: a fresh temporary one */
	const char *json_out;
	const char *md_out;
	long stat_n, cmd_n, wake_n, export_mib, export_runs;
	long ssh_n, ssh_export_mib, ssh_export_runs, rt_n, dtn_n;
	const char *sdk_json; /* the SDK benchmark's results, for the daytona table */
	bool do_stat, do_cmd, do_wake, do_export, do_ssh, do_dtn;
	bool only; /* --only was given: the sets are not the backend's defaults */
	bool keep;
};

/* ---- time and statistics ---- */

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

struct dist {
	size_t n;
	int64_t min, p50, p90, p99, max; /* nanoseconds */
	double mean;
};

/* Nearest-rank percentiles of v (sorted in place). */
static struct dist dist_of(int64_t *v, size_t n)
{
	struct dist d = { 0 };
	double sum = 0;

	if (n == 0)
		return d;
	qsort(v, n, sizeof(*v), cmp_i64);
	for (size_t i = 0; i < n; i++)
		sum += (double)v[i];
	d.n = n;
	d.min = v[0];
	d.max = v[n - 1];
	d.mean = sum / (double)n;
	d.p50 = v[(n * 50 + 99) / 100 - 1];
	d.p90 = v[(n * 90 + 99) / 100 - 1];
	d.p99 = v[(n * 99 + 99) / 100 - 1];
	return d;
}

static json_t *dist_json(const struct dist *d)
{
	return json_pack("{s:I, s:f, s:f, s:f, s:f, s:f, s:f}", "n", (json_int_t)d->n,
			 "min_us", d->min / 1e3, "p50_us", d->p50 / 1e3, "p90_us",
			 d->p90 / 1e3, "p99_us", d->p99 / 1e3, "max_us", d->max / 1e3,
			 "mean_us", d->mean / 1e3);
}

/* ---- small helpers ---- */

/* The state directory, named when a run dies so its gateway.log can be read. */
static const char *state_for_errors;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("sgbench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (state_for_errors)
		fprintf(stderr, "sgbench: the state directory %s is kept\n",
			state_for_errors);
	exit(1);
}

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *p = NULL;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&p, fmt, ap);
	va_end(ap);
	if (n < 0)
		die("out of memory");
	return p;
}

static void write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			die("write: %s", strerror(errno));
		c += w;
		n -= (size_t)w;
	}
}

static long parse_count(const char *s, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 0)
		die("%s: not a count: %s", what, s);
	return v;
}

/* ---- the gateway over its pipes ---- */

struct gw {
	pid_t pid;
	int to, from;       /* its stdin, its stdout */
	char *buf;          /* bytes read from its stdout */
	size_t len, cap, scanned;
	size_t line_len;    /* the line last returned, newline excluded */
	bool held;          /* that line is still at the front of buf */
	int64_t next_id;
	long events;        /* process/event lines seen */
	char *req;          /* the request being formatted */
	size_t req_cap;
};

/*
 * Start `sandgate serve` on the profile o names, its stderr into
 * <state_dir>/<log_name>, with the environment envp.
 */
static void gw_start(struct gw *g, const struct opts *o, const char *sandgate,
		     const char *state_dir, const char *log_name, char *const *envp)
{
	int in_p[2], out_p[2], errfd;
	posix_spawn_file_actions_t fa;
	char *log = xasprintf("%s/%s", state_dir, log_name);
	char *argv[12] = { (char *)sandgate, "serve", "--state-dir", (char *)state_dir,
			   "--log-level", "info", NULL };
	int e, k = 6;

	if (o->config) {
		argv[k++] = "--config";
		argv[k++] = (char *)o->config;
	}
	if (o->profile) {
		argv[k++] = "--profile";
		argv[k++] = (char *)o->profile;
	}

	memset(g, 0, sizeof(*g));
	if (pipe2(in_p, O_CLOEXEC) || pipe2(out_p, O_CLOEXEC))
		die("pipe: %s", strerror(errno));
	errfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (errfd < 0)
		die("%s: %s", log, strerror(errno));
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in_p[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out_p[1], 1);
	posix_spawn_file_actions_adddup2(&fa, errfd, 2);
	e = posix_spawn(&g->pid, sandgate, &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	if (e)
		die("cannot start %s: %s", sandgate, strerror(e));
	close(in_p[0]);
	close(out_p[1]);
	close(errfd);
	g->to = in_p[1];
	g->from = out_p[0];
	g->cap = 1 * MiB;
	g->buf = malloc(g->cap);
	g->req_cap = 4 * KiB;
	g->req = malloc(g->req_cap);
	if (!g->buf || !g->req)
		die("out of memory");
	g->next_id = 1;
	free(log);
}

/*
 * The line gw_line returned last, dropped from the buffer.  gw_line does
 * this itself first; callers that keep no pointer into the line may do it
 * earlier, so the buffer is compacted before the next read.
 */
static void gw_line_done(struct gw *g)
{
	size_t used;

	if (!g->held)
		return;
	used = g->line_len + 1;
	memmove(g->buf, g->buf + used, g->len - used);
	g->len -= used;
	g->held = false;
	g->line_len = 0;
	g->scanned = 0;
}

/*
 * The next line from the gateway, newline excluded and NUL-terminated,
 * valid until the next call; its length in g->line_len.  Dies at EOF or
 * past the deadline.
 */
static char *gw_line(struct gw *g, int64_t deadline_ns)
{
	gw_line_done(g);
	for (;;) {
		char *nl = memchr(g->buf + g->scanned, '\n', g->len - g->scanned);
		struct pollfd pfd = { g->from, POLLIN, 0 };
		int64_t left;
		ssize_t n;

		if (nl) {
			g->line_len = (size_t)(nl - g->buf);
			g->held = true;
			*nl = '\0';
			return g->buf;
		}
		g->scanned = g->len;
		if (g->len == g->cap) {
			if (g->cap >= LINE_MAX_BYTES)
				die("a reply line exceeds %zu bytes", LINE_MAX_BYTES);
			g->cap *= 2;
			g->buf = realloc(g->buf, g->cap);
			if (!g->buf)
				die("out of memory");
		}
		left = (deadline_ns - now_ns()) / 1000000;
		if (left <= 0)
			die("no reply from the gateway within the deadline");
		if (poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int)left) < 0) {
			if (errno == EINTR)
				continue;
			die("poll: %s", strerror(errno));
		}
		if (!pfd.revents)
			continue;
		n = read(g->from, g->buf + g->len, g->cap - g->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("the gateway closed its stdout (its stderr is gateway.log)");
		g->len += (size_t)n;
	}
}

/* Send {"id":N,"method":M,"token":T,"data":DATA}; returns N. */
static int64_t gw_send(struct gw *g, const char *method, const char *data)
{
	int64_t id = g->next_id++;
	size_t need = strlen(method) + strlen(data) + 128;
	int n;

	if (need > g->req_cap) {
		free(g->req);
		g->req_cap = need;
		g->req = malloc(need);
		if (!g->req)
			die("out of memory");
	}
	n = snprintf(g->req, g->req_cap,
		     "{\"id\":%" PRId64 ",\"method\":\"%s\",\"token\":\"" TOKEN
		     "\",\"data\":%s}\n",
		     id, method, data);
	if (n < 0 || (size_t)n >= g->req_cap)
		die("request too long");
	write_all(g->to, g->req, (size_t)n);
	return id;
}

static json_t *parse_line(const char *p, size_t n)
{
	json_error_t je;
	json_t *j = json_loadb(p, n, JSON_ALLOW_NUL, &je);

	if (!j)
		die("unreadable line from the gateway: %s: %.200s", je.text, p);
	return j;
}

/*
 * Wait for the reply to `id`; returns its frame (new) and, in *at, when
 * its line was complete.  Events read meanwhile are counted and dropped.
 */
static json_t *gw_reply(struct gw *g, int64_t id, int64_t *at)
{
	int64_t deadline = now_ns() + REPLY_DEADLINE_MS * 1000000LL;

	for (;;) {
		char *line = gw_line(g, deadline);
		int64_t t = now_ns();
		json_t *j = parse_line(line, g->line_len);
		json_t *jid = json_object_get(j, "id");

		gw_line_done(g);
		if (json_is_integer(jid) && json_integer_value(jid) == id) {
			if (at)
				*at = t;
			return j;
		}
		if (json_object_get(j, "method"))
			g->events++;
		else
			die("a reply to an unknown id arrived");
		json_decref(j);
	}
}

/* The reply's data (borrowed from frame), or death with its error. */
static json_t *reply_data(json_t *frame, const char *what)
{
	json_t *d = json_object_get(frame, "data");

	if (!d)
		die("%s failed: %s", what,
		    json_string_value(json_object_get(frame, "error")) ?
			    json_string_value(json_object_get(frame, "error")) :
			    "no data");
	return d;
}

static json_t *gw_call(struct gw *g, const char *method, json_t *data)
{
	char *text = json_dumps(data, JSON_COMPACT);
	int64_t id;
	json_t *r;

	if (!text)
		die("out of memory");
	json_decref(data);
	id = gw_send(g, method, text);
	free(text);
	r = gw_reply(g, id, NULL);
	return r;
}

/* An execute data object for `tool` with the arguments object (steals). */
static char *execute_data(const char *tool, json_t *args)
{
	char *a = json_dumps(args, JSON_COMPACT);
	json_t *d;
	char *text;

	if (!a)
		die("out of memory");
	json_decref(args);
	d = json_pack("{s:s, s:{s:s, s:s}}", "tool", tool, "call", "id", "c",
		      "arguments", a);
	free(a);
	text = json_dumps(d, JSON_COMPACT);
	json_decref(d);
	if (!text)
		die("out of memory");
	return text;
}

/* A ToolResult that ran, or death. */
static json_t *check_tool(json_t *frame, const char *what)
{
	json_t *d = reply_data(frame, what);

	if (json_is_true(json_object_get(d, "is_error")))
		die("%s: the tool failed: %.300s", what,
		    json_string_value(json_object_get(d, "content")));
	return d;
}

static int gw_stop(struct gw *g)
{
	int status = 0;
	int64_t deadline = now_ns() + 30000000000LL;

	close(g->to);
	for (;;) {
		pid_t r = waitpid(g->pid, &status, WNOHANG);

		if (r == g->pid)
			break;
		if (r < 0 && errno != EINTR)
			die("waitpid: %s", strerror(errno));
		if (now_ns() > deadline) {
			fprintf(stderr, "sgbench: the gateway did not exit in 30 s; killing it\n");
			kill(g->pid, SIGKILL);
			waitpid(g->pid, &status, 0);
			break;
		}
		sleep_ms(5);
	}
	close(g->from);
	free(g->buf);
	free(g->req);
	return status;
}

/* ---- /proc/<pid>/status ---- */

/* VmRSS and VmHWM in KiB; false if the process is gone. */
static bool read_rss(pid_t pid, long *rss_kib, long *hwm_kib)
{
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	*rss_kib = *hwm_kib = -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "VmRSS:", 6) == 0)
			*rss_kib = strtol(line + 6, NULL, 10);
		else if (strncmp(line, "VmHWM:", 6) == 0)
			*hwm_kib = strtol(line + 6, NULL, 10);
	}
	fclose(f);
	return *rss_kib >= 0;
}

struct sampler {
	pid_t pid;
	pthread_t thread;
	volatile bool stop;
	pthread_mutex_t lock;
	long max_kib;
	long samples;
};

static void *sampler_main(void *arg)
{
	struct sampler *s = arg;
	struct timespec ts = { 0, RSS_PERIOD_US * 1000L };

	while (!s->stop) {
		long rss, hwm;

		if (read_rss(s->pid, &rss, &hwm)) {
			pthread_mutex_lock(&s->lock);
			if (rss > s->max_kib)
				s->max_kib = rss;
			s->samples++;
			pthread_mutex_unlock(&s->lock);
		}
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* ---- 1. stat_path round trips ---- */

struct stat_result {
	struct dist d;
	double wall_s;
};

static struct stat_result bench_stat(struct gw *g, long n)
{
	char *data = execute_data("stat_path", json_pack("{s:s}", "path", "."));
	int64_t *v = calloc((size_t)n, sizeof(*v));
	long warm = n / 10 < 100 ? 100 : n / 10;
	struct stat_result r;
	int64_t t_start = 0;

	if (!v)
		die("out of memory");
	for (long i = -warm; i < n; i++) {
		int64_t t0, t1, id;
		json_t *f;

		if (i == 0)
			t_start = now_ns();
		t0 = now_ns();
		id = gw_send(g, "execute", data);
		f = gw_reply(g, id, &t1);
		if (i == -warm)
			check_tool(f, "stat_path");
		else if (!json_object_get(f, "data"))
			reply_data(f, "stat_path");
		json_decref(f);
		if (i >= 0)
			v[i] = t1 - t0;
	}
	r.wall_s = (double)(now_ns() - t_start) / 1e9;
	r.d = dist_of(v, (size_t)n);
	free(v);
	free(data);
	return r;
}

/* ---- 2. run_command against the direct confined spawn ---- */

/* The NUL-separated strings of a tool's content (new, NULL-terminated). */
static char **split_nul(json_t *content, size_t *count)
{
	const char *s = json_string_value(content);
	size_t len = json_string_length(content), n = 0, k = 0;
	char **v;

	if (!s)
		die("no content to split");
	for (size_t i = 0; i < len; i++)
		n += s[i] == '\0';
	if (len && s[len - 1] != '\0')
		n++;
	v = calloc(n + 1, sizeof(*v));
	if (!v)
		die("out of memory");
	for (size_t i = 0; i < len && k < n; k++) {
		size_t l = strnlen(s + i, len - i);

		v[k] = strndup(s + i, l);
		if (!v[k])
			die("out of memory");
		i += l + 1;
	}
	*count = k;
	return v;
}

static void free_strv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* What a run_command of argv printed (new), checked to have exited 0. */
static json_t *run_argv(struct gw *g, const char *const *argv)
{
	json_t *a = json_array(), *f, *content;
	char *data;
	int64_t id;

	for (size_t i = 0; argv[i]; i++)
		json_array_append_new(a, json_string(argv[i]));
	data = execute_data("run_command", json_pack("{s:o}", "argv", a));
	id = gw_send(g, "execute", data);
	free(data);
	f = gw_reply(g, id, NULL);
	check_tool(f, argv[0]);
	content = json_incref(json_object_get(json_object_get(f, "data"), "content"));
	json_decref(f);
	return content;
}

struct confined {
	char **argv;      /* bubblewrap ... sg-helper confine ... -- (prefix) */
	size_t argc;
	char **envp;
};

/*
 * The gateway's own confined command line for run_command, read back from
 * inside: bubblewrap is pid 1 of the sandbox's pid namespace.
 */
static struct confined capture_confined(struct gw *g)
{
	static const char *const cmdline[] = { "cat", "/proc/1/cmdline", NULL };
	static const char *const environ_[] = { "cat", "/proc/self/environ", NULL };
	struct confined c = { 0 };
	json_t *out = run_argv(g, cmdline);
	size_t n, ne;

	c.argv = split_nul(out, &n);
	json_decref(out);
	if (n < 4 || strcmp(c.argv[n - 2], "cat") != 0 ||
	    strcmp(c.argv[n - 1], "/proc/1/cmdline") != 0 || c.argv[0][0] != '/')
		die("the sandbox's pid 1 is not the confined command line "
		    "(is the gateway using bubblewrap with --unshare-pid?)");
	free(c.argv[n - 1]);
	free(c.argv[n - 2]);
	c.argv[n - 2] = c.argv[n - 1] = NULL;
	c.argc = n - 2;
	out = run_argv(g, environ_);
	c.envp = split_nul(out, &ne);
	json_decref(out);
	for (size_t i = 0, k = 0; i <= ne; i++) {
		if (c.envp[i] && strncmp(c.envp[i], "PWD=", 4) == 0)
			free(c.envp[i]);
		else
			c.envp[k++] = c.envp[i];
	}
	return c;
}

/* The prefix plus a command (new vector; the strings are borrowed). */
static char **with_command(const struct confined *c, const char *const *cmd)
{
	size_t k = 0, m = 0;
	char **v;

	while (cmd[m])
		m++;
	v = calloc(c->argc + m + 1, sizeof(*v));
	if (!v)
		die("out of memory");
	for (size_t i = 0; i < c->argc; i++)
		v[k++] = c->argv[i];
	for (size_t i = 0; i < m; i++)
		v[k++] = (char *)cmd[i];
	return v;
}

/*
 * Spawn argv as the gateway spawns a command: its own process group,
 * stdin from /dev/null, stdout and stderr into one pipe drained to EOF,
 * then reaped.  Returns the wall time in nanoseconds; *out_bytes (when
 * not NULL) gets the number of bytes drained.  A non-zero exit is fatal.
 */
static int64_t spawn_timed(char *const *argv, char *const *envp, size_t *out_bytes,
			   const char *what)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t sa;
	int p[2], status, e;
	char sink[4096];
	int64_t t0 = now_ns();
	size_t got = 0;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC))
		die("pipe: %s", strerror(errno));
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_adddup2(&fa, p[1], 2);
	posix_spawnattr_init(&sa);
	posix_spawnattr_setpgroup(&sa, 0);
	posix_spawnattr_setflags(&sa, POSIX_SPAWN_SETPGROUP);
	e = posix_spawn(&pid, argv[0], &fa, &sa, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&sa);
	if (e)
		die("cannot spawn %s: %s", argv[0], strerror(e));
	close(p[1]);
	for (;;) {
		ssize_t n = read(p[0], sink, sizeof(sink));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		die("%s failed (status %d)", what, status);
	if (out_bytes)
		*out_bytes = got;
	return now_ns() - t0;
}

static int64_t spawn_direct(char *const *argv, char *const *envp)
{
	return spawn_timed(argv, envp, NULL, "the direct confined command");
}

static int64_t gateway_cmd(struct gw *g, const char *data)
{
	int64_t t0 = now_ns(), t1, id;
	json_t *f, *d;

	id = gw_send(g, "execute", data);
	f = gw_reply(g, id, &t1);
	d = check_tool(f, "run_command");
	if (json_integer_value(json_object_get(json_object_get(d, "metadata"),
					       "exit_code")) != 0)
		die("run_command true did not exit 0");
	json_decref(f);
	return t1 - t0;
}

enum { CMD_GW_ARGV, CMD_GW_SHELL, CMD_DIRECT_ARGV, CMD_DIRECT_SHELL, CMD_KINDS };

static const char *const cmd_names[CMD_KINDS] = {
	"run_command argv [\"true\"]",
	"run_command command \"true\"",
	"direct: bwrap + confine + true",
	"direct: bwrap + confine + sh -c true",
};
static const char *const cmd_keys[CMD_KINDS] = { "gateway_argv", "gateway_command",
						  "direct_argv", "direct_command" };

struct cmd_result {
	struct dist d[CMD_KINDS];
	char *argv_text; /* the direct command line, for the report */
};

static struct cmd_result bench_cmd(struct gw *g, long n)
{
	static const char *const t_argv[] = { "true", NULL };
	static const char *const t_shell[] = { "/bin/sh", "-c", "true", NULL };
	struct confined c = capture_confined(g);
	char **direct_argv = with_command(&c, t_argv);
	char **direct_shell = with_command(&c, t_shell);
	char *d_argv = execute_data("run_command",
				    json_pack("{s:[s]}", "argv", "true"));
	char *d_shell = execute_data("run_command", json_pack("{s:s}", "command", "true"));
	int64_t *v[CMD_KINDS];
	long warm = 20;
	struct cmd_result r = { 0 };
	json_t *a = json_array();

	for (int k = 0; k < CMD_KINDS; k++) {
		v[k] = calloc((size_t)n + 1, sizeof(int64_t));
		if (!v[k])
			die("out of memory");
	}
	/*
	 * Interleaved, with the order rotating each round, so drift in the
	 * machine's load falls on all four alike.
	 */
	for (long i = -warm; i < n; i++) {
		for (int j = 0; j < CMD_KINDS; j++) {
			int k = (int)(((i + warm) + j) % CMD_KINDS);
			int64_t t;

			switch (k) {
			case CMD_GW_ARGV: t = gateway_cmd(g, d_argv); break;
			case CMD_GW_SHELL: t = gateway_cmd(g, d_shell); break;
			case CMD_DIRECT_ARGV: t = spawn_direct(direct_argv, c.envp); break;
			default: t = spawn_direct(direct_shell, c.envp); break;
			}
			if (i >= 0)
				v[k][i] = t;
		}
	}
	for (int k = 0; k < CMD_KINDS; k++) {
		r.d[k] = dist_of(v[k], (size_t)n);
		free(v[k]);
	}
	for (size_t i = 0; direct_argv[i]; i++)
		json_array_append_new(a, json_string(direct_argv[i]));
	r.argv_text = json_dumps(a, JSON_COMPACT);
	json_decref(a);
	free(direct_argv);
	free(direct_shell);
	free(d_argv);
	free(d_shell);
	free_strv(c.argv);
	free_strv(c.envp);
	return r;
}

/* ---- 3. process/read wake-up ---- */

struct wake_result {
	struct dist d;
	long unarmed; /* reads that had not blocked before the write */
	long slow;    /* wake-ups over WAKE_SLOW_NS */
};

static struct wake_result bench_wake(struct gw *g, const char *workspace, long n)
{
	char *fifo = xasprintf("%s/%s", workspace, WAKE_FIFO);
	int64_t *v = calloc((size_t)n + 1, sizeof(*v));
	int64_t deadline, offset = 0;
	struct wake_result r = { 0 };
	long warm = 10;
	char pid_id[128];
	json_t *f;
	int fd = -1;

	if (!v)
		die("out of memory");
	unlink(fifo);
	if (mkfifo(fifo, 0600))
		die("mkfifo %s: %s", fifo, strerror(errno));
	f = gw_call(g, "process/start", json_pack("{s:[s,s]}", "argv", "cat", WAKE_FIFO));
	snprintf(pid_id, sizeof(pid_id), "%s",
		 json_string_value(json_object_get(reply_data(f, "process/start"), "id")));
	json_decref(f);
	/* Opening for writing succeeds once cat has the FIFO open for reading. */
	deadline = now_ns() + 10000000000LL;
	while ((fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
		if (errno != ENXIO || now_ns() > deadline)
			die("open %s: %s", fifo, strerror(errno));
		sleep_ms(1);
	}
	fcntl(fd, F_SETFL, 0);

	for (long i = -warm; i < n; i++) {
		char data[256], line[32];
		struct pollfd pfd = { g->from, POLLIN, 0 };
		int64_t id, t0, t1, dur;
		json_t *d;
		int len;

		snprintf(data, sizeof(data),
			 "{\"id\":\"%s\",\"OffsetBytes\":%" PRId64
			 ",\"Wait\":10000000000,\"MinDwell\":0,\"MaxBytes\":0}",
			 pid_id, offset);
		id = gw_send(g, "process/read", data);
		/* Let the read block; a reply now would be a premature answer. */
		if (g->len == 0 && poll(&pfd, 1, WAKE_ARM_MS) > 0)
			fprintf(stderr, "sgbench: wake: output arrived before the write\n");
		len = snprintf(line, sizeof(line), "w%ld\n", i);
		t0 = now_ns();
		write_all(fd, line, (size_t)len);
		f = gw_reply(g, id, &t1);
		d = reply_data(f, "process/read");
		if (json_is_true(json_object_get(d, "TimedOut")) ||
		    !strstr(json_string_value(json_object_get(d, "Output")) ?
				    json_string_value(json_object_get(d, "Output")) : "",
			    line))
			die("wake: the read did not return the line written");
		offset = json_integer_value(json_object_get(d, "EndOffset"));
		dur = json_integer_value(json_object_get(d, "Duration"));
		json_decref(f);
		if (i >= 0) {
			v[i] = t1 - t0;
			r.unarmed += dur < WAKE_ARMED_NS;
			r.slow += v[i] > WAKE_SLOW_NS;
		}
	}
	close(fd);
	{
		char data[256];

		snprintf(data, sizeof(data), "{\"id\":\"%s\",\"grace_ms\":1000}", pid_id);
		json_decref(gw_reply(g, gw_send(g, "process/stop", data), NULL));
	}
	unlink(fifo);
	r.d = dist_of(v, (size_t)n);
	free(v);
	free(fifo);
	return r;
}

/* ---- 4. export throughput, 5. RSS during it ---- */

static int8_t b64_val[256];

static void b64_init(void)
{
	static const char a[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

	memset(b64_val, -1, sizeof(b64_val));
	for (int i = 0; i < 64; i++)
		b64_val[(unsigned char)a[i]] = (int8_t)i;
}

/*
 * Decode standard base64 (with padding); returns the byte count or -1.
 * Whole quads go through a branch-free loop (an invalid character turns
 * `bad` negative), so the client's share of the export stays small.
 */
static ssize_t b64_decode(const char *s, size_t n, unsigned char *out)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t o = 0, full = n;
	int bad = 0;

	if (n % 4)
		return -1;
	if (n && u[n - 1] == '=')
		full -= 4;
	for (size_t i = 0; i < full; i += 4) {
		int a = b64_val[u[i]], b = b64_val[u[i + 1]];
		int c = b64_val[u[i + 2]], d = b64_val[u[i + 3]];
		uint32_t w = (uint32_t)a << 18 | (uint32_t)b << 12 |
			     (uint32_t)c << 6 | (uint32_t)d;

		bad |= a | b | c | d;
		out[o] = (unsigned char)(w >> 16);
		out[o + 1] = (unsigned char)(w >> 8);
		out[o + 2] = (unsigned char)w;
		o += 3;
	}
	if (bad < 0)
		return -1;
	if (full < n) {
		/* The last quad: "xy==" or "xyz=". */
		int a = b64_val[u[full]], b = b64_val[u[full + 1]];
		int c = u[full + 2] == '=' ? 0 : b64_val[u[full + 2]];

		if ((a | b | c) < 0)
			return -1;
		out[o++] = (unsigned char)(a << 2 | b >> 4);
		if (u[full + 2] != '=')
			out[o++] = (unsigned char)((b & 15) << 4 | c >> 2);
	}
	return (ssize_t)o;
}

static void hex(const unsigned char *d, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/*
 * Write `bytes` of pseudo-random data (xorshift64*, so the file does not
 * compress and costs no entropy) to path; returns its sha256 in hex.
 */
static void make_file(const char *path, size_t bytes, char *sha_hex)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	uint64_t *blk = malloc(1 * MiB), x = 0x9E3779B97F4A7C15ULL;
	unsigned char dg[32];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0 || !md || !blk || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
		die("cannot create %s: %s", path, strerror(errno));
	for (size_t done = 0; done < bytes;) {
		size_t take = bytes - done < MiB ? bytes - done : MiB;

		for (size_t i = 0; i < MiB / 8; i++) {
			x ^= x >> 12;
			x ^= x << 25;
			x ^= x >> 27;
			blk[i] = x * 0x2545F4914F6CDD1DULL;
		}
		EVP_DigestUpdate(md, blk, take);
		write_all(fd, blk, take);
		done += take;
	}
	EVP_DigestFinal_ex(md, dg, NULL);
	hex(dg, 32, sha_hex);
	close(fd);
	EVP_MD_CTX_free(md);
	free(blk);
}

/*
 * The base64 text of an export/read reply, found in the line without
 * handing megabytes of it to a JSON parser: the payload is the string
 * after the last `"data":"` (base64 needs no escapes).  The rest of the
 * line, payload removed, is parsed properly for id, error and eof.
 */
static json_t *export_reply(struct gw *g, int64_t id, const char **b64,
			    size_t *b64_len, int64_t *at)
{
	int64_t deadline = now_ns() + REPLY_DEADLINE_MS * 1000000LL;
	static const char key[] = "\"data\":\"";

	for (;;) {
		char *line = gw_line(g, deadline);
		size_t len = g->line_len;
		char *k = NULL, *end;
		json_t *j, *jid;

		*at = now_ns();
		/* Base64 holds no quote, so the first such key is the payload's. */
		if (len > 64 * KiB)
			k = memmem(line, len, key, sizeof(key) - 1);
		if (k) {
			char *start = k + sizeof(key) - 1;

			end = memchr(start, '"', len - (size_t)(start - line));
			if (!end)
				die("export/read: unterminated data string");
			*b64 = start;
			*b64_len = (size_t)(end - start);
			/* Parse the frame around the payload: prefix + "" + suffix. */
			{
				size_t pre = (size_t)(start - line), post = len - (size_t)(end - line);
				char *small = malloc(pre + post + 1);

				if (!small)
					die("out of memory");
				memcpy(small, line, pre);
				memcpy(small + pre, end, post);
				j = parse_line(small, pre + post);
				free(small);
			}
		} else {
			j = parse_line(line, len);
			*b64 = NULL;
			*b64_len = 0;
		}
		jid = json_object_get(j, "id");
		if (json_is_integer(jid) && json_integer_value(jid) == id) {
			if (!*b64) {
				/* A small chunk went through the parser whole. */
				json_t *d = json_object_get(reply_data(j, "export/read"), "data");

				if (!json_is_string(d))
					die("export/read: no data");
				*b64 = json_string_value(d);
				*b64_len = json_string_length(d);
			}
			/* *b64 may point into the line: the caller drops it. */
			return j;
		}
		if (json_object_get(j, "method"))
			g->events++;
		else
			die("a reply to an unknown id arrived");
		json_decref(j);
		gw_line_done(g);
	}
}

struct export_run {
	double total_s, open_s, read_s, client_s, close_s;
	long chunks;
};

#define EXPORT_RUNS_MAX 16

struct export_result {
	size_t bytes;
	int runs;
	struct export_run run[EXPORT_RUNS_MAX];   /* one read at a time */
	struct export_run ahead[EXPORT_RUNS_MAX]; /* one read ahead */
	struct export_run med, med_ahead;         /* the medians by total time */
	long rss_max_kib, rss_samples, hwm_after_kib;
};

static int cmp_run_total(const void *a, const void *b)
{
	double x = ((const struct export_run *)a)->total_s;
	double y = ((const struct export_run *)b)->total_s;

	return (x > y) - (x < y);
}

static struct export_run median_run(const struct export_run *v, int n)
{
	struct export_run sorted[EXPORT_RUNS_MAX];

	memcpy(sorted, v, (size_t)n * sizeof(*v));
	qsort(sorted, (size_t)n, sizeof(sorted[0]), cmp_run_total);
	return sorted[n / 2];
}

static int64_t send_read(struct gw *g, const char *token, int64_t offset)
{
	char data[512];

	snprintf(data, sizeof(data),
		 "{\"token\":\"%s\",\"offset\":%" PRId64 ",\"length\":%zu}", token,
		 offset, EXPORT_CHUNK);
	return gw_send(g, "export/read", data);
}

static struct export_run export_once(struct gw *g, const char *sha_hex, size_t bytes,
				     unsigned char *raw, bool ahead)
{
	struct export_run r = { 0 };
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char dg[32];
	char got_hex[65], token[128];
	int64_t t0 = now_ns(), t1, t_open, offset = 0, id, ts;
	json_t *f, *d;
	bool eof = false;

	if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
		die("out of memory");
	f = gw_call(g, "export/open", json_pack("{s:s}", "path", EXPORT_FILE));
	d = reply_data(f, "export/open");
	if (json_integer_value(json_object_get(d, "size")) != (json_int_t)bytes ||
	    !json_is_string(json_object_get(d, "sha256")) ||
	    strcmp(json_string_value(json_object_get(d, "sha256")), sha_hex) != 0)
		die("export/open: size or sha256 differs from the file written");
	snprintf(token, sizeof(token), "%s",
		 json_string_value(json_object_get(d, "token")));
	json_decref(f);
	t_open = now_ns();
	r.open_s = (double)(t_open - t0) / 1e9;

	/*
	 * With `ahead`, the next read is sent as soon as a reply is in, before
	 * the client decodes it, so the gateway's work overlaps the client's.
	 */
	ts = now_ns();
	id = send_read(g, token, 0);
	while (!eof) {
		const char *b64;
		size_t b64_len, expect;
		int64_t ta, tc;
		ssize_t n;

		f = export_reply(g, id, &b64, &b64_len, &ta);
		d = reply_data(f, "export/read");
		r.read_s += (double)(ta - ts) / 1e9;
		eof = json_is_true(json_object_get(d, "eof"));
		expect = b64_len / 4 * 3 - (b64_len && b64[b64_len - 1] == '=') -
			 (b64_len > 1 && b64[b64_len - 2] == '=');
		if (!eof && ahead) {
			ts = now_ns();
			id = send_read(g, token, offset + (int64_t)expect);
		}
		n = b64_decode(b64, b64_len, raw);
		if (n < 0 || (size_t)n != expect)
			die("export/read: invalid base64 at offset %" PRId64, offset);
		EVP_DigestUpdate(md, raw, (size_t)n);
		json_decref(f);
		gw_line_done(g);
		tc = now_ns();
		r.client_s += (double)(tc - ta) / 1e9;
		offset += n;
		r.chunks++;
		if (n == 0 && !eof)
			die("export/read: an empty chunk before eof");
		if (!eof && !ahead) {
			ts = now_ns();
			id = send_read(g, token, offset);
		}
	}
	EVP_DigestFinal_ex(md, dg, NULL);
	EVP_MD_CTX_free(md);
	hex(dg, 32, got_hex);
	if ((size_t)offset != bytes || strcmp(got_hex, sha_hex) != 0)
		die("export: the bytes read back do not match the file (%" PRId64 " bytes)",
		    offset);
	t1 = now_ns();
	f = gw_call(g, "export/close", json_pack("{s:s}", "token", token));
	reply_data(f, "export/close");
	json_decref(f);
	r.close_s = (double)(now_ns() - t1) / 1e9;
	r.total_s = (double)(now_ns() - t0) / 1e9;
	return r;
}

/*
 * `runs` exports of EXPORT_FILE (which holds `bytes` with the sha256
 * sha_hex) of each kind, alternating, with the gateway's RSS sampled.
 */
static struct export_result export_measure(struct gw *g, const char *sha_hex,
					   size_t bytes, int runs)
{
	unsigned char *raw = malloc(EXPORT_CHUNK + 16);
	struct export_result r = { 0 };
	struct sampler s = { .pid = g->pid, .lock = PTHREAD_MUTEX_INITIALIZER };
	long rss;

	if (!raw)
		die("out of memory");
	if (runs > EXPORT_RUNS_MAX)
		runs = EXPORT_RUNS_MAX;
	b64_init();
	r.bytes = bytes;
	r.runs = runs;
	if (pthread_create(&s.thread, NULL, sampler_main, &s))
		die("cannot start the RSS sampler");
	/* Alternated, so drift in the machine's state falls on both alike. */
	for (int i = 0; i < runs; i++) {
		r.run[i] = export_once(g, sha_hex, bytes, raw, false);
		r.ahead[i] = export_once(g, sha_hex, bytes, raw, true);
	}
	s.stop = true;
	r.med = median_run(r.run, runs);
	r.med_ahead = median_run(r.ahead, runs);
	pthread_join(s.thread, NULL);
	r.rss_max_kib = s.max_kib;
	r.rss_samples = s.samples;
	read_rss(g->pid, &rss, &r.hwm_after_kib);
	free(raw);
	return r;
}

static struct export_result bench_export(struct gw *g, const char *workspace,
					 size_t bytes, int runs)
{
	char *path = xasprintf("%s/%s", workspace, EXPORT_FILE);
	struct export_result r;
	char sha_hex[65];

	make_file(path, bytes, sha_hex);
	r = export_measure(g, sha_hex, bytes, runs);
	unlink(path);
	free(path);
	return r;
}

/* ---- 6. the ssh set ---- */

#define SSH_READ_FILE "sgbench-1m.txt"
#define SSH_READ_BYTES MiB
#define SSH_WARM 10
#define RT_FILE "sgbench-rt.txt"
#define RT_STEPS_MAX 8 /* distinct steps named per tool */

/* Where the profile's host is, as a raw ssh client reaches it. */
struct ssh_target {
	char *ssh;         /* the client, found on PATH */
	char *host, *user; /* from the profile */
	char *key, *known_hosts;
	long port;         /* 0: ssh's default */
	char *dest;        /* user@host, or host */
	char *sock;        /* this program's own ControlMaster */
	char *directory;   /* the workspace's real path on the host */
};

/* The first executable `name` on PATH (new), or NULL. */
static char *find_on_path(const char *name)
{
	const char *path = getenv("PATH"), *p, *end;

	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (p = path; *p; p = *end ? end + 1 : end) {
		char *cand;

		end = strchr(p, ':');
		if (!end)
			end = p + strlen(p);
		if (end == p || *p != '/')
			continue;
		cand = xasprintf("%.*s/%s", (int)(end - p), p, name);
		if (access(cand, X_OK) == 0)
			return cand;
		free(cand);
	}
	return NULL;
}

/* A profile's path field with "~/" expanded (new), or NULL when absent. */
static char *profile_path(json_t *prof, const char *key)
{
	const char *v = json_string_value(json_object_get(prof, key));
	const char *home = getenv("HOME");

	if (!v)
		return NULL;
	if (strncmp(v, "~/", 2) == 0 && home)
		return xasprintf("%s/%s", home, v + 2);
	return xasprintf("%s", v);
}

/*
 * The host, port, user, key and known hosts of the ssh profile, read from
 * the same config file the gateway reads, so the raw client reaches the
 * same sshd the same way.
 */
static void ssh_target_load(struct ssh_target *t, const struct opts *o)
{
	json_error_t je;
	json_t *cfg, *prof;
	const char *name = o->profile, *v;
	const char *path = o->config ? o->config : getenv("SANDGATE_CONFIG");

	memset(t, 0, sizeof(*t));
	if (!path || !*path)
		die("the ssh set needs --config FILE (to reach the host without sandgate)");
	cfg = json_load_file(path, 0, &je);
	if (!cfg)
		die("%s: %s (line %d)", path, je.text, je.line);
	if (!name)
		name = json_string_value(json_object_get(cfg, "default"));
	prof = json_object_get(json_object_get(cfg, "profiles"), name ? name : "");
	if (!json_is_object(prof))
		die("%s has no profile %s", path, name ? name : "(no default)");
	v = json_string_value(json_object_get(prof, "backend"));
	if (!v || strcmp(v, "ssh") != 0)
		die("profile %s is not on the ssh backend", name);
	v = json_string_value(json_object_get(prof, "host"));
	if (!v)
		die("profile %s has no host", name);
	t->host = xasprintf("%s", v);
	v = json_string_value(json_object_get(prof, "user"));
	t->user = v ? xasprintf("%s", v) : NULL;
	t->port = (long)json_integer_value(json_object_get(prof, "port"));
	t->key = profile_path(prof, "identity_file");
	t->known_hosts = profile_path(prof, "known_hosts_file");
	t->dest = t->user ? xasprintf("%s@%s", t->user, t->host) : xasprintf("%s", t->host);
	t->ssh = find_on_path("ssh");
	if (!t->ssh)
		die("no ssh client on PATH");
	json_decref(cfg);
}

static void ssh_target_free(struct ssh_target *t)
{
	free(t->ssh);
	free(t->host);
	free(t->user);
	free(t->key);
	free(t->known_hosts);
	free(t->dest);
	free(t->sock);
	free(t->directory);
}

/* Run argv with stdio on /dev/null and stderr into log; its exit status. */
static int run_quiet(char *const *argv, const char *log)
{
	posix_spawn_file_actions_t fa;
	int status = -1, e;
	pid_t pid;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_APPEND, 0600);
	e = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (e)
		die("cannot spawn %s: %s", argv[0], strerror(e));
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/*
 * This program's own ControlMaster to the profile's host, with the same
 * key and known hosts as the gateway and strict host key checking, so the
 * raw clients below pay only what a multiplexed session costs.
 */
static void ssh_master_open(struct ssh_target *t, const char *state)
{
	char *argv[32], *log = xasprintf("%s/raw-ssh.log", state);
	char *kh = NULL, *ctl, *port = NULL;
	int k = 0;

	t->sock = xasprintf("%s/raw.sock", state);
	if (strchr(t->sock, '%') || strlen(t->sock) > 90)
		die("the state directory %s cannot hold an ssh control socket", state);
	ctl = xasprintf("ControlPath=%s", t->sock);
	argv[k++] = t->ssh;
	argv[k++] = "-o";
	argv[k++] = "ControlMaster=yes";
	argv[k++] = "-o";
	argv[k++] = ctl;
	argv[k++] = "-o";
	argv[k++] = "ControlPersist=60";
	argv[k++] = "-o";
	argv[k++] = "BatchMode=yes";
	argv[k++] = "-o";
	argv[k++] = "StrictHostKeyChecking=yes";
	if (t->known_hosts) {
		kh = xasprintf("UserKnownHostsFile=%s", t->known_hosts);
		argv[k++] = "-o";
		argv[k++] = kh;
		argv[k++] = "-o";
		argv[k++] = "GlobalKnownHostsFile=none";
	}
	if (t->key) {
		argv[k++] = "-o";
		argv[k++] = "IdentitiesOnly=yes";
		argv[k++] = "-i";
		argv[k++] = t->key;
	}
	if (t->port) {
		port = xasprintf("%ld", t->port);
		argv[k++] = "-p";
		argv[k++] = port;
	}
	argv[k++] = "-N";
	argv[k++] = "-f";
	argv[k++] = "--";
	argv[k++] = t->dest;
	argv[k] = NULL;
	if (run_quiet(argv, log) != 0)
		die("cannot open a ControlMaster to %s (see %s)", t->dest, log);
	free(log);
	free(kh);
	free(ctl);
	free(port);
}

static void ssh_master_close(const struct ssh_target *t, const char *state)
{
	char *log = xasprintf("%s/raw-ssh.log", state);
	char *argv[] = { t->ssh, "-S", t->sock, "-O", "exit", "--", t->dest, NULL };

	if (run_quiet(argv, log) != 0)
		fprintf(stderr, "sgbench: the raw ControlMaster did not exit cleanly (see %s)\n",
			log);
	free(log);
}

/* The raw client: `ssh -S <socket> [-p PORT] user@host <words...>` (new). */
static char **ssh_raw_argv(const struct ssh_target *t, const char *const *words)
{
	char **v = calloc(16, sizeof(*v));
	size_t k = 0;

	if (!v)
		die("out of memory");
	v[k++] = xasprintf("%s", t->ssh);
	v[k++] = xasprintf("-S");
	v[k++] = xasprintf("%s", t->sock);
	if (t->port) {
		v[k++] = xasprintf("-p");
		v[k++] = xasprintf("%ld", t->port);
	}
	v[k++] = xasprintf("%s", t->dest);
	for (size_t i = 0; words[i] && k < 15; i++)
		v[k++] = xasprintf("%s", words[i]);
	return v;
}

static char *argv_text(char *const *v)
{
	json_t *a = json_array();
	char *s;

	for (size_t i = 0; v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	s = json_dumps(a, JSON_COMPACT);
	json_decref(a);
	if (!s)
		die("out of memory");
	return s;
}

/* A ToolResult of run_command `command` that exited 0; its content (new). */
static char *run_shell(struct gw *g, const char *command)
{
	char *data = execute_data("run_command", json_pack("{s:s, s:i}", "command", command,
							    "timeout_ms", 120000));
	json_t *f, *d;
	char *out;

	f = gw_reply(g, gw_send(g, "execute", data), NULL);
	free(data);
	d = check_tool(f, command);
	if (json_integer_value(json_object_get(json_object_get(d, "metadata"),
					       "exit_code")) != 0)
		die("run_command %s: exit %lld: %.300s", command,
		    (long long)json_integer_value(
			    json_object_get(json_object_get(d, "metadata"), "exit_code")),
		    json_string_value(json_object_get(d, "content")));
	out = xasprintf("%s", json_string_value(json_object_get(d, "content")));
	json_decref(f);
	return out;
}

/*
 * The 1 MiB text file read_file and the raw cat read: printable lines of
 * 100 bytes (pseudo-random letters), so the JSON reply carries it with few
 * escapes, like source code.  New, SSH_READ_BYTES long, NUL-terminated.
 */
static char *text_mib(void)
{
	char *t = malloc(SSH_READ_BYTES + 1);
	uint64_t x = 0x2545F4914F6CDD1DULL;

	if (!t)
		die("out of memory");
	for (size_t i = 0; i < SSH_READ_BYTES; i++) {
		if (i % 100 == 99) {
			t[i] = '\n';
			continue;
		}
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		t[i] = (char)('a' + (x * 0x2545F4914F6CDD1DULL >> 59) % 26);
	}
	t[SSH_READ_BYTES] = '\0';
	return t;
}

enum { SSH_GW_TRUE, SSH_RAW_TRUE, SSH_GW_READ, SSH_RAW_CAT, SSH_KINDS };

static const char *const ssh_names[SSH_KINDS] = {
	"sandgate run_command argv [\"true\"]",
	"raw ssh -S <socket> host true",
	"sandgate read_file (1 MiB)",
	"raw ssh -S <socket> host cat (1 MiB)",
};
static const char *const ssh_keys[SSH_KINDS] = { "gateway_true", "raw_true",
						  "gateway_read", "raw_cat" };

/* One ssh session count: what a kind of call made the gateway run. */
struct rt_row {
	const char *name;
	long calls;
	long sessions, controls, masters, watcher;
	bool target; /* exactly one session per call is the target */
	int nsteps;
	char step[RT_STEPS_MAX][48];
	long step_n[RT_STEPS_MAX];
};

#define RT_ROWS_MAX 12

struct ssh_result {
	struct dist d[SSH_KINDS];
	char *raw_true, *raw_cat; /* the raw command lines */
	char *view;               /* facts.ssh.view */
	struct export_result ex;
	bool export;
	double raw_export_s;      /* median of raw ssh cat of the export file */
	int nrt;
	struct rt_row rt[RT_ROWS_MAX];
};

static int64_t gateway_read(struct gw *g, const char *data, const char *expect)
{
	int64_t t0 = now_ns(), t1, id;
	json_t *f, *d, *content, *md;

	id = gw_send(g, "execute", data);
	f = gw_reply(g, id, &t1);
	d = check_tool(f, "read_file");
	content = json_object_get(d, "content");
	md = json_object_get(d, "metadata");
	if (json_string_length(content) != SSH_READ_BYTES ||
	    json_is_true(json_object_get(md, "truncated")) ||
	    (expect && memcmp(json_string_value(content), expect, SSH_READ_BYTES) != 0))
		die("read_file did not return the 1 MiB written");
	json_decref(f);
	return t1 - t0;
}

/*
 * S1 and S2: the gateway's run_command and read_file against the raw
 * multiplexed client, the four kinds interleaved in rotating order.
 */
static void ssh_compare(struct gw *g, const struct ssh_target *t, long n,
			struct ssh_result *r)
{
	static const char *const w_true[] = { "true", NULL };
	char *text = text_mib(), *path = xasprintf("%s/%s", t->directory, SSH_READ_FILE);
	const char *w_cat[] = { "cat", path, NULL };
	char **raw_true = ssh_raw_argv(t, w_true), **raw_cat = ssh_raw_argv(t, w_cat);
	char *d_true = execute_data("run_command", json_pack("{s:[s]}", "argv", "true"));
	char *d_read = execute_data("read_file", json_pack("{s:s}", "path", SSH_READ_FILE));
	char *d_write = execute_data("write_file", json_pack("{s:s, s:s}", "path",
							     SSH_READ_FILE, "content", text));
	int64_t *v[SSH_KINDS];
	json_t *f, *d;

	f = gw_reply(g, gw_send(g, "execute", d_write), NULL);
	d = check_tool(f, "write_file");
	if (json_integer_value(json_object_get(json_object_get(d, "metadata"),
					       "bytes_written")) != (json_int_t)SSH_READ_BYTES)
		die("write_file did not write 1 MiB");
	json_decref(f);
	for (int k = 0; k < SSH_KINDS; k++) {
		v[k] = calloc((size_t)n + 1, sizeof(int64_t));
		if (!v[k])
			die("out of memory");
	}
	for (long i = -SSH_WARM; i < n; i++) {
		for (int j = 0; j < SSH_KINDS; j++) {
			int k = (int)(((i + SSH_WARM) + j) % SSH_KINDS);
			size_t got = 0;
			int64_t ns;

			switch (k) {
			case SSH_GW_TRUE: ns = gateway_cmd(g, d_true); break;
			case SSH_RAW_TRUE:
				ns = spawn_timed(raw_true, environ, NULL, "raw ssh true");
				break;
			case SSH_GW_READ:
				ns = gateway_read(g, d_read, i == -SSH_WARM ? text : NULL);
				break;
			default:
				ns = spawn_timed(raw_cat, environ, &got, "raw ssh cat");
				if (got != SSH_READ_BYTES)
					die("raw ssh cat gave %zu bytes, not 1 MiB", got);
				break;
			}
			if (i >= 0)
				v[k][i] = ns;
		}
	}
	for (int k = 0; k < SSH_KINDS; k++) {
		r->d[k] = dist_of(v[k], (size_t)n);
		free(v[k]);
	}
	r->raw_true = argv_text(raw_true);
	r->raw_cat = argv_text(raw_cat);
	free_strv(raw_true);
	free_strv(raw_cat);
	free(d_true);
	free(d_read);
	free(d_write);
	free(path);
	free(text);
}

/*
 * S3: a pseudo-random file made on the host by run_command, exported
 * like the local set's file; then the same file through the raw client,
 * for the transport's own rate.
 */
static void ssh_export(struct gw *g, const struct ssh_target *t, size_t bytes, int runs,
		       struct ssh_result *r)
{
	char *cmd = xasprintf("head -c %zu /dev/urandom >" EXPORT_FILE
			      " && sha256sum " EXPORT_FILE, bytes);
	char *out = run_shell(g, cmd), *path = xasprintf("%s/" EXPORT_FILE, t->directory);
	const char *w_cat[] = { "cat", path, NULL };
	char **raw = ssh_raw_argv(t, w_cat), sha_hex[65];
	int64_t v[3];

	if (strspn(out, "0123456789abcdef") != 64)
		die("sha256sum on the host gave no digest: %.200s", out);
	memcpy(sha_hex, out, 64);
	sha_hex[64] = '\0';
	r->ex = export_measure(g, sha_hex, bytes, runs);
	r->export = true;
	for (int i = 0; i < 3; i++) {
		size_t got = 0;

		v[i] = spawn_timed(raw, environ, &got, "raw ssh cat of the export file");
		if (got != bytes)
			die("raw ssh cat gave %zu bytes, not %zu", got, bytes);
	}
	r->raw_export_s = (double)dist_of(v, 3).p50 / 1e9;
	free_strv(raw);
	free(path);
	free(out);
	free(cmd);
}

/*
 * The counting client (bench/README.md): one line per invocation into log,
 * "<kind> <step>", kind session, control (-O) or master; then the real
 * client with the same arguments.  A session that runs ssh/ssh.c's
 * wrapper (sg-run) carries the command's header first on stdin ("<n>\n"
 * and n bytes of quoted words, `env -i -- NAME=value... argv`): the script
 * reads it to name the step (the sg-helper subcommand, "command" for a
 * confined one, else the program) and hands it on unchanged ahead of the
 * rest of stdin.  sg-helper's `proc wait` is the gateway's event watcher,
 * counted apart.
 */
static const char rt_script[] =
	"#!/bin/sh\n"
	"# sgbench's counting ssh client (bench/README.md).\n"
	"log=%s\n"
	"real=%s\n"
	"kind=session what=script prev=\n"
	"for a in \"$@\"; do\n"
	"\tcase $a in\n"
	"\tControlMaster=yes) kind=master what=- ;;\n"
	"\tesac\n"
	"\t[ \"$prev\" = -O ] && kind=control what=$a\n"
	"\tprev=$a\n"
	"done\n"
	"eval \"last=\\${$#}\"\n"
	"step() {\n"
	"\teval \"set -- $(cat \"$1\")\"\n"
	"\tshift 3\n"
	"\twhile [ $# -gt 0 ]; do case $1 in *=*) shift ;; *) break ;; esac; done\n"
	"\tcase $1:$2 in\n"
	"\t*/sg-helper-*:confine) echo command ;;\n"
	"\t*/sg-helper-*:probe) echo helper probe ;;\n"
	"\t*/sg-helper-*) echo \"$2 $3\" ;;\n"
	"\t*) echo \"${1##*/}\" ;;\n"
	"\tesac\n"
	"}\n"
	"if [ $kind = session ]; then\n"
	"\tcase $last in\n"
	"\t*sg-run*)\n"
	"\t\tIFS= read -r n || n=0\n"
	"\t\th=$(mktemp \"${log%%/*}/hdr.XXXXXX\") || exit 255\n"
	"\t\thead -c \"$n\" >\"$h\"\n"
	"\t\tprintf 'session %%s\\n' \"$(step \"$h\")\" >>\"$log\"\n"
	"\t\t{ printf '%%s\\n' \"$n\"; cat \"$h\"; rm -f \"$h\"; exec cat; } | \"$real\" \"$@\"\n"
	"\t\texit $?\n"
	"\t\t;;\n"
	"\t*has_%%s*) what='host probe' ;;\n"
	"\t*env.json.tmp*) what=setup ;;\n"
	"\t*.sg-helper-*) what=upload ;;\n"
	"\t*subtree_control*) what=cgroup ;;\n"
	"\t*.cancel*) what=kill ;;\n"
	"\t*'leases/$l'*) what=teardown ;;\n"
	"\tesac\n"
	"fi\n"
	"printf '%%s %%s\\n' \"$kind\" \"$what\" >>\"$log\"\n"
	"exec \"$real\" \"$@\"\n";

/* 'text' for sh, or death when it holds a single quote. */
static char *sh_word(const char *text)
{
	if (strchr(text, '\''))
		die("a path with a single quote cannot go into the counting script: %s", text);
	return xasprintf("'%s'", text);
}

static long file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) ? 0 : (long)st.st_size;
}

/* Tally the log's lines from offset `from` into row (calls already set). */
static void rt_collect(const char *log, long from, struct rt_row *row)
{
	FILE *f = fopen(log, "re");
	char line[256];

	if (!f)
		die("%s: %s", log, strerror(errno));
	if (fseek(f, from, SEEK_SET))
		die("%s: %s", log, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		char *sp = strchr(line, ' '), *nl = strchr(line, '\n');
		const char *what;
		int i;

		if (!sp || !nl)
			die("%s: an unreadable line", log);
		*sp = *nl = '\0';
		what = sp + 1;
		if (strcmp(line, "master") == 0) {
			row->masters++;
			continue;
		}
		if (strcmp(line, "control") == 0) {
			row->controls++;
			continue;
		}
		if (strcmp(what, "proc wait") == 0) {
			row->watcher++;
			continue;
		}
		row->sessions++;
		for (i = 0; i < row->nsteps && strcmp(row->step[i], what) != 0; i++)
			;
		if (i == row->nsteps && i < RT_STEPS_MAX) {
			snprintf(row->step[i], sizeof(row->step[i]), "%s", what);
			row->nsteps++;
		}
		if (i < RT_STEPS_MAX)
			row->step_n[i]++;
	}
	fclose(f);
}

static struct rt_row *rt_begin(struct ssh_result *r, const char *name, bool target,
			       long *mark, const char *log)
{
	struct rt_row *row = &r->rt[r->nrt++];

	memset(row, 0, sizeof(*row));
	row->name = name;
	row->target = target;
	*mark = file_size(log);
	return row;
}

static void execute_ok(struct gw *g, const char *tool, json_t *args)
{
	char *data = execute_data(tool, args);
	json_t *f = gw_reply(g, gw_send(g, "execute", data), NULL);

	check_tool(f, tool);
	json_decref(f);
	free(data);
}

/* process/start of argv (steals); the process id into id[64]. */
static void start_process(struct gw *g, json_t *argv, char id[64])
{
	json_t *f = gw_call(g, "process/start", json_pack("{s:o}", "argv", argv));
	json_t *d = reply_data(f, "process/start");

	if (!json_is_string(json_object_get(d, "id")) ||
	    strcmp(json_string_value(json_object_get(d, "status")), "running") != 0)
		die("process/start did not start a process");
	snprintf(id, 64, "%s", json_string_value(json_object_get(d, "id")));
	json_decref(f);
}

/*
 * S4: a second gateway, on the same profile, whose PATH starts with the
 * counting client; n calls of each kind, the log read between them.
 */
static void ssh_round_trips(const struct opts *o, const char *sandgate, const char *state,
			    long n, struct ssh_result *r)
{
	char *dir = xasprintf("%s/rt", state), *script, *log, *real, *qlog, *qreal;
	char *path_var, **envp, pid_id[64], data[256];
	size_t ne = 0;
	struct gw g;
	struct rt_row *row;
	long mark;
	json_t *f;
	FILE *sf;

	if (mkdir(dir, 0700) && errno != EEXIST)
		die("%s: %s", dir, strerror(errno));
	script = xasprintf("%s/ssh", dir);
	log = xasprintf("%s/ssh.log", dir);
	real = find_on_path("ssh");
	if (!real)
		die("no ssh client on PATH");
	qlog = sh_word(log);
	qreal = sh_word(real);
	sf = fopen(script, "we");
	if (!sf || fprintf(sf, rt_script, qlog, qreal) < 0 || fclose(sf) ||
	    chmod(script, 0700))
		die("cannot write %s", script);
	close(open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
	path_var = xasprintf("PATH=%s:%s", dir, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	while (environ[ne])
		ne++;
	envp = calloc(ne + 2, sizeof(*envp));
	if (!envp)
		die("out of memory");
	envp[0] = path_var;
	for (size_t i = 0, k = 1; i < ne; i++)
		if (strncmp(environ[i], "PATH=", 5) != 0)
			envp[k++] = environ[i];

	row = rt_begin(r, "initialize", false, &mark, log);
	gw_start(&g, o, sandgate, state, "gateway-rt.log", envp);
	f = gw_call(&g, "initialize",
		    json_pack("{s:i, s:s, s:s, s:b}", "version", 4, "root", ROOT,
			      "session", SESSION "-rt", "remove_workspace_on_exit", true));
	reply_data(f, "initialize");
	json_decref(f);
	row->calls = 1;
	rt_collect(log, mark, row);

	row = rt_begin(r, "write_file", true, &mark, log);
	for (long i = 0; i < n; i++)
		execute_ok(&g, "write_file", json_pack("{s:s, s:s}", "path", RT_FILE,
						       "content", "sgbench a\n"));
	row->calls = n;
	rt_collect(log, mark, row);

	row = rt_begin(r, "read_file", true, &mark, log);
	for (long i = 0; i < n; i++)
		execute_ok(&g, "read_file", json_pack("{s:s}", "path", RT_FILE));
	row->calls = n;
	rt_collect(log, mark, row);

	row = rt_begin(r, "stat_path", true, &mark, log);
	for (long i = 0; i < n; i++)
		execute_ok(&g, "stat_path", json_pack("{s:s}", "path", RT_FILE));
	row->calls = n;
	rt_collect(log, mark, row);

	row = rt_begin(r, "run_command", true, &mark, log);
	for (long i = 0; i < n; i++)
		execute_ok(&g, "run_command", json_pack("{s:[s]}", "argv", "true"));
	row->calls = n;
	rt_collect(log, mark, row);

	/* process/read at offset 0 of a process that runs throughout. */
	start_process(&g, json_pack("[s,s,s]", "sh", "-c", "echo sgbench; exec sleep 120"),
		      pid_id);
	snprintf(data, sizeof(data),
		 "{\"id\":\"%s\",\"OffsetBytes\":0,\"Wait\":0,\"MinDwell\":0,\"MaxBytes\":0}",
		 pid_id);
	row = rt_begin(r, "process/read", true, &mark, log);
	for (long i = 0; i < n; i++) {
		f = gw_reply(&g, gw_send(&g, "process/read", data), NULL);
		reply_data(f, "process/read");
		json_decref(f);
	}
	row->calls = n;
	rt_collect(log, mark, row);
	snprintf(data, sizeof(data), "{\"id\":\"%s\",\"grace_ms\":1000}", pid_id);
	json_decref(gw_reply(&g, gw_send(&g, "process/stop", data), NULL));

	row = rt_begin(r, "edit_file", false, &mark, log);
	for (long i = 0; i < n; i++)
		execute_ok(&g, "edit_file",
			   json_pack("{s:s, s:s, s:s}", "path", RT_FILE, "old_string",
				     i % 2 ? "sgbench b" : "sgbench a", "new_string",
				     i % 2 ? "sgbench a" : "sgbench b"));
	row->calls = n;
	rt_collect(log, mark, row);

	row = rt_begin(r, "process/start", false, &mark, log);
	for (long i = 0; i < n; i++)
		start_process(&g, json_pack("[s,s]", "sleep", "0.2"), pid_id);
	row->calls = n;
	rt_collect(log, mark, row);

	{
		struct rt_row *rd;
		long mark_rd;
		char token[128];

		row = rt_begin(r, "export/open", false, &mark, log);
		rd = rt_begin(r, "export/read + export/close", false, &mark_rd, log);
		for (long i = 0; i < n; i++) {
			long before = file_size(log), after;

			f = gw_call(&g, "export/open", json_pack("{s:s}", "path", RT_FILE));
			snprintf(token, sizeof(token), "%s",
				 json_string_value(json_object_get(reply_data(f, "export/open"),
								   "token")));
			json_decref(f);
			after = file_size(log);
			rt_collect(log, before, row);
			f = gw_call(&g, "export/read",
				    json_pack("{s:s, s:i}", "token", token, "offset", 0));
			reply_data(f, "export/read");
			json_decref(f);
			f = gw_call(&g, "export/close", json_pack("{s:s}", "token", token));
			reply_data(f, "export/close");
			json_decref(f);
			rt_collect(log, after, rd);
		}
		row->calls = rd->calls = n;
	}

	row = rt_begin(r, "shutdown (stdin closed)", false, &mark, log);
	if (gw_stop(&g) != 0)
		die("the counting gateway did not exit cleanly (see %s/gateway-rt.log)", state);
	row->calls = 1;
	rt_collect(log, mark, row);

	free(envp);
	free(path_var);
	free(qlog);
	free(qreal);
	free(real);
	free(log);
	free(script);
	free(dir);
}

/* ---- the report ---- */

static double mbps(size_t bytes, double s)
{
	return s > 0 ? (double)bytes / s / 1e6 : 0;
}

struct results {
	bool local; /* the gateway's profile is on the local backend */
	bool stat, cmd, wake, export, ssh;
	struct stat_result st;
	struct ssh_result sh;
	struct cmd_result cmd_r;
	struct wake_result wk;
	struct export_result ex;
	long idle_rss_kib, idle_hwm_kib;
	long events;
	int gateway_status;
};

static const char *verdict(bool ok)
{
	return ok ? "PASS" : "FAIL";
}

/* "fs resolve + proc spawn": the steps of a row, per call. */
static void rt_steps(const struct rt_row *row, char *out, size_t n)
{
	size_t used = 0;

	out[0] = '\0';
	for (int i = 0; i < row->nsteps && used < n; i++) {
		double per = (double)row->step_n[i] / (double)row->calls;
		int w;

		if (per > 0.999 && per < 1.001)
			w = snprintf(out + used, n - used, "%s%s", i ? " + " : "", row->step[i]);
		else
			w = snprintf(out + used, n - used, "%s%s ×%.2g", i ? " + " : "",
				     row->step[i], per);
		if (w < 0)
			break;
		used += (size_t)w;
	}
}

static bool rt_pass(const struct rt_row *row)
{
	return row->sessions == row->calls && row->controls == 0 && row->masters == 0;
}

static double rt_per(const struct rt_row *row)
{
	return (double)row->sessions / (double)row->calls;
}

static void report_ssh_markdown(FILE *o, const struct ssh_result *s)
{
	const struct dist *d = s->d;
	double rt = (double)d[SSH_GW_TRUE].p50 / (double)d[SSH_RAW_TRUE].p50;
	double rr = (double)d[SSH_GW_READ].p50 / (double)d[SSH_RAW_CAT].p50;
	bool all = true;
	char steps[256];

	fprintf(o, "| S1 | run_command argv [\"true\"] vs raw `ssh -S <socket> host true`, %zu runs each | p50 %.2f ms vs %.2f ms: **%.2f×** (p90 %.2f vs %.2f ms) | ≤ 1.3× | %s |\n",
		d[SSH_GW_TRUE].n, d[SSH_GW_TRUE].p50 / 1e6, d[SSH_RAW_TRUE].p50 / 1e6, rt,
		d[SSH_GW_TRUE].p90 / 1e6, d[SSH_RAW_TRUE].p90 / 1e6, verdict(rt <= 1.3));
	fprintf(o, "| S2 | read_file of 1 MiB vs raw `ssh -S <socket> host cat FILE`, %zu runs each | p50 %.2f ms vs %.2f ms: **%.2f×** (p90 %.2f vs %.2f ms) | ≤ 1.3× | %s |\n",
		d[SSH_GW_READ].n, d[SSH_GW_READ].p50 / 1e6, d[SSH_RAW_CAT].p50 / 1e6, rr,
		d[SSH_GW_READ].p90 / 1e6, d[SSH_RAW_CAT].p90 / 1e6, verdict(rr <= 1.3));
	if (s->export) {
		const struct export_run *m = &s->ex.med, *ma = &s->ex.med_ahead;

		fprintf(o, "| S3 | export of %zu MiB made on the host: open + 4 MiB reads, each base64-decoded and hashed + close; sha256 checked; median of %d | **%.0f MB/s** end to end (%.2f s: open %.2f s, reads %.2f s, client %.2f s); one read ahead %.0f MB/s; raw `ssh -S` cat of the file %.0f MB/s | none set | info |\n",
			s->ex.bytes / MiB, s->ex.runs, mbps(s->ex.bytes, m->total_s), m->total_s,
			m->open_s, m->read_s, m->client_s, mbps(s->ex.bytes, ma->total_s),
			mbps(s->ex.bytes, s->raw_export_s));
	}
	for (int i = 0; i < s->nrt; i++)
		if (s->rt[i].target)
			all = all && rt_pass(&s->rt[i]);
	fputs("| S4 | ssh client runs per tool call (counting `ssh` first on the gateway's PATH) | ", o);
	for (int i = 0, first = 1; i < s->nrt; i++) {
		if (!s->rt[i].target)
			continue;
		fprintf(o, "%s%s %.2g", first ? "" : ", ", s->rt[i].name, rt_per(&s->rt[i]));
		if (s->rt[i].controls || s->rt[i].masters)
			fprintf(o, " (+%ld control, %ld master)", s->rt[i].controls,
				s->rt[i].masters);
		first = 0;
	}
	fprintf(o, " | exactly 1 each | %s |\n", verdict(all));
	fputs("| S4i | the same, for information | ", o);
	for (int i = 0, first = 1; i < s->nrt; i++) {
		const struct rt_row *row = &s->rt[i];

		if (row->target)
			continue;
		rt_steps(row, steps, sizeof(steps));
		fprintf(o, "%s%s %.2g%s%s%s", first ? "" : "; ", row->name, rt_per(row),
			row->nsteps ? " (" : "", steps, row->nsteps ? ")" : "");
		if (row->masters)
			fprintf(o, " + %ld master", row->masters);
		if (row->controls)
			fprintf(o, " + %ld control", row->controls);
		first = 0;
	}
	fputs(" | none | info |\n", o);
}

/* The results as a Markdown table with targets and verdicts. */
static void report_markdown(FILE *o, const struct results *r)
{
	fputs("| # | measurement | result | target | verdict |\n", o);
	fputs("|---|---|---|---|---|\n", o);
	if (r->stat) {
		const struct dist *d = &r->st.d;

		/* The target is the local backend's; elsewhere the number is information. */
		fprintf(o, "| 1 | execute(stat_path) round trip, %zu calls | p50 %.0f µs, p90 %.0f µs, p99 %.0f µs (min %.0f, max %.0f) | %s | %s |\n",
			d->n, d->p50 / 1e3, d->p90 / 1e3, d->p99 / 1e3, d->min / 1e3,
			d->max / 1e3, r->local ? "p50 ≤ 200 µs" : "none (local backend only)",
			r->local ? verdict(d->p50 <= 200000) : "info");
	}
	if (r->cmd) {
		const struct dist *d = r->cmd_r.d;
		double ra = (double)d[CMD_GW_ARGV].p50 / (double)d[CMD_DIRECT_ARGV].p50;
		double rs = (double)d[CMD_GW_SHELL].p50 / (double)d[CMD_DIRECT_SHELL].p50;

		fprintf(o, "| 2a | run_command argv [\"true\"] vs direct bwrap+confine+true, %zu runs each | p50 %.2f ms vs %.2f ms: **%.2f×** (p90 %.2f vs %.2f ms) | ≤ 1.3× | %s |\n",
			d[CMD_GW_ARGV].n, d[CMD_GW_ARGV].p50 / 1e6, d[CMD_DIRECT_ARGV].p50 / 1e6,
			ra, d[CMD_GW_ARGV].p90 / 1e6, d[CMD_DIRECT_ARGV].p90 / 1e6,
			verdict(ra <= 1.3));
		fprintf(o, "| 2b | run_command command \"true\" vs direct bwrap+confine+sh -c true, %zu runs each | p50 %.2f ms vs %.2f ms: **%.2f×** (p90 %.2f vs %.2f ms) | ≤ 1.3× | %s |\n",
			d[CMD_GW_SHELL].n, d[CMD_GW_SHELL].p50 / 1e6,
			d[CMD_DIRECT_SHELL].p50 / 1e6, rs, d[CMD_GW_SHELL].p90 / 1e6,
			d[CMD_DIRECT_SHELL].p90 / 1e6, verdict(rs <= 1.3));
	}
	if (r->wake) {
		const struct dist *d = &r->wk.d;

		fprintf(o, "| 3 | process/read wake-up after a write, %zu wake-ups | p50 %.2f ms, p90 %.2f ms, p99 %.2f ms (max %.2f) | p50 ≤ 10 ms | %s |\n",
			d->n, d->p50 / 1e6, d->p90 / 1e6, d->p99 / 1e6, d->max / 1e6,
			verdict(d->p50 <= 10000000));
	}
	if (r->export) {
		const struct export_run *m = &r->ex.med, *ma = &r->ex.med_ahead;
		double t = mbps(r->ex.bytes, m->total_s);

		fprintf(o, "| 4a | export of %zu MiB: open + 4 MiB reads, one at a time, each base64-decoded and hashed + close; sha256 checked; median of %d | **%.0f MB/s** end to end (%.2f s: open %.2f s, reads %.2f s, client decode+hash %.2f s); gateway share alone %.0f MB/s | ≥ 200 MB/s | %s |\n",
			r->ex.bytes / MiB, r->ex.runs, t, m->total_s, m->open_s, m->read_s,
			m->client_s, mbps(r->ex.bytes, m->total_s - m->client_s),
			verdict(t >= 200));
		fprintf(o, "| 4b | the same with one read ahead (the next read sent before decoding), median of %d | **%.0f MB/s** end to end (%.2f s: open %.2f s) | ≥ 200 MB/s | %s |\n",
			r->ex.runs, mbps(r->ex.bytes, ma->total_s), ma->total_s, ma->open_s,
			verdict(mbps(r->ex.bytes, ma->total_s) >= 200));
	}
	if (r->local)
		fprintf(o, "| 5a | gateway RSS idle after initialize | VmRSS %.1f MiB (VmHWM %.1f MiB) | ≤ 16 MiB | %s |\n",
			r->idle_rss_kib / 1024.0, r->idle_hwm_kib / 1024.0,
			verdict(r->idle_rss_kib <= 16 * 1024));
	if (r->ssh)
		report_ssh_markdown(o, &r->sh);
	if (r->export)
		fprintf(o, "| 5b | gateway RSS during the export | max VmRSS %.1f MiB over %ld samples (VmHWM after: %.1f MiB) | ≤ 64 MiB | %s |\n",
			r->ex.rss_max_kib / 1024.0, r->ex.rss_samples,
			r->ex.hwm_after_kib / 1024.0,
			verdict(r->ex.rss_max_kib <= 64 * 1024 && r->ex.hwm_after_kib <= 64 * 1024));
}

static void report_details(FILE *o, const struct results *r)
{
	if (r->stat)
		fprintf(o, "stat_path: %zu calls in %.2f s (%.0f calls/s), mean %.0f µs\n",
			r->st.d.n, r->st.wall_s, (double)r->st.d.n / r->st.wall_s,
			r->st.d.mean / 1e3);
	if (r->cmd) {
		for (int k = 0; k < CMD_KINDS; k++) {
			const struct dist *d = &r->cmd_r.d[k];

			fprintf(o, "%-38s p50 %7.2f ms  p90 %7.2f ms  p99 %7.2f ms  min %6.2f ms\n",
				cmd_names[k], d->p50 / 1e6, d->p90 / 1e6, d->p99 / 1e6,
				d->min / 1e6);
		}
		fprintf(o, "direct command line: %s\n", r->cmd_r.argv_text);
	}
	if (r->wake)
		fprintf(o, "wake: %ld of %zu took over %lld ms; %ld had not blocked before the write\n",
			r->wk.slow, r->wk.d.n, WAKE_SLOW_NS / 1000000, r->wk.unarmed);
	for (int i = 0; r->export && i < r->ex.runs; i++) {
		const struct export_run *x = &r->ex.run[i], *y = &r->ex.ahead[i];

		fprintf(o, "export run %d: %.2f s = %.0f MB/s (open %.3f s, reads %.3f s in %ld chunks, client %.3f s, close %.4f s); read ahead: %.2f s = %.0f MB/s (open %.3f s)\n",
			i + 1, x->total_s, mbps(r->ex.bytes, x->total_s), x->open_s,
			x->read_s, x->chunks, x->client_s, x->close_s, y->total_s,
			mbps(r->ex.bytes, y->total_s), y->open_s);
	}
	if (r->ssh) {
		const struct ssh_result *s = &r->sh;
		char steps[256];

		for (int k = 0; k < SSH_KINDS; k++) {
			const struct dist *d = &s->d[k];

			fprintf(o, "%-38s p50 %7.2f ms  p90 %7.2f ms  p99 %7.2f ms  min %6.2f ms\n",
				ssh_names[k], d->p50 / 1e6, d->p90 / 1e6, d->p99 / 1e6,
				d->min / 1e6);
		}
		fprintf(o, "raw command lines: %s and %s\n", s->raw_true, s->raw_cat);
		fprintf(o, "workspace view on the host: %s\n", s->view ? s->view : "?");
		for (int i = 0; s->export && i < s->ex.runs; i++) {
			const struct export_run *x = &s->ex.run[i], *y = &s->ex.ahead[i];

			fprintf(o, "ssh export run %d: %.2f s = %.0f MB/s (open %.3f s, reads %.3f s in %ld chunks, client %.3f s, close %.4f s); read ahead: %.2f s = %.0f MB/s (open %.3f s)\n",
				i + 1, x->total_s, mbps(s->ex.bytes, x->total_s), x->open_s,
				x->read_s, x->chunks, x->client_s, x->close_s, y->total_s,
				mbps(s->ex.bytes, y->total_s), y->open_s);
		}
		if (s->export)
			fprintf(o, "ssh export: gateway max VmRSS %.1f MiB; raw cat of the file %.3f s\n",
				s->ex.rss_max_kib / 1024.0, s->raw_export_s);
		for (int i = 0; i < s->nrt; i++) {
			const struct rt_row *row = &s->rt[i];

			rt_steps(row, steps, sizeof(steps));
			fprintf(o, "ssh runs: %-28s %3ld calls: %3ld sessions (%s), %ld control, %ld master, %ld watcher re-arms\n",
				row->name, row->calls, row->sessions, row->nsteps ? steps : "none",
				row->controls, row->masters, row->watcher);
		}
	}
	fprintf(o, "process/event lines seen: %ld; gateway exit status: %d\n", r->events,
		r->gateway_status);
}

static json_t *run_json(const struct export_run *x, size_t bytes)
{
	return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "total_s", x->total_s,
			 "mb_per_s", mbps(bytes, x->total_s), "open_s", x->open_s,
			 "read_s", x->read_s, "client_s", x->client_s, "close_s",
			 x->close_s);
}

static void write_json(const char *path, const struct results *r)
{
	json_t *j = json_object();

	if (r->stat)
		json_object_set_new(j, "stat_path", dist_json(&r->st.d));
	if (r->cmd) {
		json_t *c = json_object();

		for (int k = 0; k < CMD_KINDS; k++)
			json_object_set_new(c, cmd_keys[k], dist_json(&r->cmd_r.d[k]));
		json_object_set_new(c, "ratio_argv",
				    json_real((double)r->cmd_r.d[CMD_GW_ARGV].p50 /
					      (double)r->cmd_r.d[CMD_DIRECT_ARGV].p50));
		json_object_set_new(c, "ratio_command",
				    json_real((double)r->cmd_r.d[CMD_GW_SHELL].p50 /
					      (double)r->cmd_r.d[CMD_DIRECT_SHELL].p50));
		json_object_set_new(c, "direct_command_line",
				    json_string(r->cmd_r.argv_text));
		json_object_set_new(j, "run_command", c);
	}
	if (r->wake) {
		json_t *w = dist_json(&r->wk.d);

		json_object_set_new(w, "unarmed", json_integer(r->wk.unarmed));
		json_object_set_new(w, "over_5ms", json_integer(r->wk.slow));
		json_object_set_new(j, "wake", w);
	}
	if (r->export) {
		json_t *runs = json_array(), *ahead = json_array();

		for (int i = 0; i < r->ex.runs; i++) {
			json_array_append_new(runs, run_json(&r->ex.run[i], r->ex.bytes));
			json_array_append_new(ahead, run_json(&r->ex.ahead[i], r->ex.bytes));
		}
		json_object_set_new(
			j, "export",
			json_pack("{s:I, s:f, s:f, s:f, s:o, s:o, s:I, s:I, s:I}", "bytes",
				  (json_int_t)r->ex.bytes, "median_mb_per_s",
				  mbps(r->ex.bytes, r->ex.med.total_s),
				  "median_gateway_mb_per_s",
				  mbps(r->ex.bytes, r->ex.med.total_s - r->ex.med.client_s),
				  "median_ahead_mb_per_s",
				  mbps(r->ex.bytes, r->ex.med_ahead.total_s), "runs", runs,
				  "runs_ahead", ahead, "rss_max_kib",
				  (json_int_t)r->ex.rss_max_kib, "rss_samples",
				  (json_int_t)r->ex.rss_samples, "hwm_after_kib",
				  (json_int_t)r->ex.hwm_after_kib));
	}
	if (r->ssh) {
		const struct ssh_result *s = &r->sh;
		json_t *sj = json_object(), *rt = json_array();

		for (int k = 0; k < SSH_KINDS; k++)
			json_object_set_new(sj, ssh_keys[k], dist_json(&s->d[k]));
		json_object_set_new(sj, "ratio_true",
				    json_real((double)s->d[SSH_GW_TRUE].p50 /
					      (double)s->d[SSH_RAW_TRUE].p50));
		json_object_set_new(sj, "ratio_read",
				    json_real((double)s->d[SSH_GW_READ].p50 /
					      (double)s->d[SSH_RAW_CAT].p50));
		json_object_set_new(sj, "raw_true", json_string(s->raw_true));
		json_object_set_new(sj, "raw_cat", json_string(s->raw_cat));
		if (s->export)
			json_object_set_new(
				sj, "export",
				json_pack("{s:I, s:f, s:f, s:f, s:I}", "bytes",
					  (json_int_t)s->ex.bytes, "median_mb_per_s",
					  mbps(s->ex.bytes, s->ex.med.total_s),
					  "median_ahead_mb_per_s",
					  mbps(s->ex.bytes, s->ex.med_ahead.total_s),
					  "raw_cat_mb_per_s",
					  mbps(s->ex.bytes, s->raw_export_s), "rss_max_kib",
					  (json_int_t)s->ex.rss_max_kib));
		for (int i = 0; i < s->nrt; i++) {
			const struct rt_row *row = &s->rt[i];
			json_t *steps = json_object();

			for (int k = 0; k < row->nsteps; k++)
				json_object_set_new(steps, row->step[k],
						    json_integer(row->step_n[k]));
			json_array_append_new(
				rt, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:b, s:o}", "call",
					      row->name, "calls", (json_int_t)row->calls, "sessions",
					      (json_int_t)row->sessions, "controls",
					      (json_int_t)row->controls, "masters",
					      (json_int_t)row->masters, "watcher",
					      (json_int_t)row->watcher, "target", row->target,
					      "steps", steps));
		}
		json_object_set_new(sj, "round_trips", rt);
		json_object_set_new(j, "ssh", sj);
	}
	json_object_set_new(j, "idle_rss_kib", json_integer(r->idle_rss_kib));
	json_object_set_new(j, "idle_hwm_kib", json_integer(r->idle_hwm_kib));
	json_object_set_new(j, "gateway_status", json_integer(r->gateway_status));
	if (json_dump_file(j, path, JSON_INDENT(2)))
		die("cannot write %s", path);
	json_decref(j);
}

/* ---- main ---- */

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p) && errno != ENOENT ? -1 : 0;
}

static const char usage[] =
	"usage: sgbench [--sandgate PATH] [--config FILE] [--profile NAME]\n"
	"               [--state-dir DIR] [--json FILE] [--markdown FILE]\n"
	"               [--only stat,cmd,wake,export,ssh]\n"
	"               [--stat-n N] [--cmd-n N] [--wake-n N]\n"
	"               [--export-mib N] [--export-runs N]\n"
	"               [--ssh-n N] [--ssh-export-mib N] [--ssh-export-runs N]\n"
	"               [--rt-n N] [--keep]\n"
	"\n"
	"Runs sandgate's benchmarks over pipes, on the profile --config and\n"
	"--profile name (else sandgate's default), and prints a table.  The\n"
	"sets default to stat,cmd,wake,export on the local backend and to ssh on\n"
	"the ssh backend (stat runs on any).  Defaults: sandgate from $SANDGATE,\n"
	"else next to this program or one directory up (a build tree); 2000 stat\n"
	"calls, 300 command runs of each kind, 200 wake-ups, 3 exports of 256 MiB\n"
	"of each kind; for ssh, 150 runs of each of the 4 kinds, 3 exports of\n"
	"64 MiB of each kind and 10 calls per tool counted.\n";

static void parse_opts(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .stat_n = 2000, .cmd_n = 300, .wake_n = 200,
			    .export_mib = 256, .export_runs = 3, .ssh_n = 150,
			    .ssh_export_mib = 64, .ssh_export_runs = 3, .rt_n = 10 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--keep") == 0) {
			o->keep = true;
			continue;
		}
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			fputs(usage, stdout);
			exit(0);
		}
		if (strcmp(a, "--sandgate") && strcmp(a, "--state-dir") &&
		    strcmp(a, "--json") && strcmp(a, "--markdown") &&
		    strcmp(a, "--stat-n") && strcmp(a, "--cmd-n") &&
		    strcmp(a, "--wake-n") && strcmp(a, "--export-mib") &&
		    strcmp(a, "--export-runs") && strcmp(a, "--only") &&
		    strcmp(a, "--config") && strcmp(a, "--profile") &&
		    strcmp(a, "--ssh-n") && strcmp(a, "--ssh-export-mib") &&
		    strcmp(a, "--ssh-export-runs") && strcmp(a, "--rt-n"))
			die("unknown option %s\n%s", a, usage);
		if (!v)
			die("%s needs a value\n%s", a, usage);
		i++;
		if (strcmp(a, "--sandgate") == 0) {
			o->sandgate = v;
		} else if (strcmp(a, "--state-dir") == 0) {
			o->state_dir = v;
		} else if (strcmp(a, "--json") == 0) {
			o->json_out = v;
		} else if (strcmp(a, "--markdown") == 0) {
			o->md_out = v;
		} else if (strcmp(a, "--stat-n") == 0) {
			o->stat_n = parse_count(v, a);
		} else if (strcmp(a, "--cmd-n") == 0) {
			o->cmd_n = parse_count(v, a);
		} else if (strcmp(a, "--wake-n") == 0) {
			o->wake_n = parse_count(v, a);
		} else if (strcmp(a, "--export-mib") == 0) {
			o->export_mib = parse_count(v, a);
		} else if (strcmp(a, "--export-runs") == 0) {
			o->export_runs = parse_count(v, a);
		} else if (strcmp(a, "--config") == 0) {
			o->config = v;
		} else if (strcmp(a, "--profile") == 0) {
			o->profile = v;
		} else if (strcmp(a, "--ssh-n") == 0) {
			o->ssh_n = parse_count(v, a);
		} else if (strcmp(a, "--ssh-export-mib") == 0) {
			o->ssh_export_mib = parse_count(v, a);
		} else if (strcmp(a, "--ssh-export-runs") == 0) {
			o->ssh_export_runs = parse_count(v, a);
		} else if (strcmp(a, "--rt-n") == 0) {
			o->rt_n = parse_count(v, a);
		} else {
			o->only = true;
			o->do_stat = strstr(v, "stat") != NULL;
			o->do_cmd = strstr(v, "cmd") != NULL;
			o->do_wake = strstr(v, "wake") != NULL;
			o->do_export = strstr(v, "export") != NULL;
			o->do_ssh = strstr(v, "ssh") != NULL;
		}
	}
	if (o->stat_n < 1 || o->cmd_n < 1 || o->wake_n < 1 || o->export_runs < 1 ||
	    o->export_mib < 1 || o->export_mib > 256 || o->ssh_n < 1 ||
	    o->ssh_export_runs < 1 || o->rt_n < 1 || o->ssh_export_mib > 256)
		die("counts must be at least 1 and export sizes at most 256 MiB");
}

/* $SANDGATE, else sandgate next to this program or one directory up. */
static char *find_sandgate(void)
{
	const char *env = getenv("SANDGATE");
	char self[PATH_MAX], *slash;
	ssize_t n;

	if (env && *env)
		return strdup(env);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return NULL;
	self[n] = '\0';
	for (int up = 0; up < 2; up++) {
		char *p;

		slash = strrchr(self, '/');
		if (!slash)
			return NULL;
		*slash = '\0';
		p = xasprintf("%s/sandgate", self);
		if (access(p, X_OK) == 0)
			return p;
		free(p);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct results r = { 0 };
	struct ssh_target t = { 0 };
	char tmpl[] = "/tmp/sgbench-XXXXXX";
	char *sandgate, *state, *workspace = NULL;
	const char *backend;
	struct stat st;
	struct gw g;
	json_t *f, *env;

	parse_opts(argc, argv, &o);
	signal(SIGPIPE, SIG_IGN);
	sandgate = o.sandgate ? strdup(o.sandgate) : find_sandgate();
	if (!sandgate || access(sandgate, X_OK))
		die("sandgate not found: pass --sandgate PATH");
	if (o.state_dir) {
		if (mkdir(o.state_dir, 0700) && errno != EEXIST)
			die("%s: %s", o.state_dir, strerror(errno));
		state = strdup(o.state_dir);
	} else {
		if (!mkdtemp(tmpl))
			die("mkdtemp: %s", strerror(errno));
		state = strdup(tmpl);
	}
	if (!state)
		die("out of memory");

	state_for_errors = state;
	gw_start(&g, &o, sandgate, state, "gateway.log", environ);
	f = gw_call(&g, "initialize",
		    json_pack("{s:i, s:s, s:s, s:b}", "version", 4, "root", ROOT,
			      "session", SESSION, "remove_workspace_on_exit", true));
	env = json_object_get(reply_data(f, "initialize"), "environment");
	backend = json_string_value(json_object_get(env, "backend"));
	if (!backend)
		die("the initialize reply names no backend");
	r.local = strcmp(backend, "local") == 0;
	if (!o.only) {
		/* The sets that fit the backend; stat alone fits any. */
		o.do_stat = o.do_cmd = o.do_wake = o.do_export = r.local;
		o.do_ssh = strcmp(backend, "ssh") == 0;
		if (!r.local && !o.do_ssh)
			o.do_stat = true;
	}
	if (!r.local && (o.do_cmd || o.do_wake || o.do_export))
		die("cmd, wake and export measure the local backend; the profile is on %s",
		    backend);
	if (o.do_ssh && strcmp(backend, "ssh") != 0)
		die("the ssh set needs a profile on the ssh backend, not %s", backend);
	if (o.do_ssh) {
		json_t *facts = json_object_get(json_object_get(env, "facts"), "ssh");
		const char *dir = json_string_value(json_object_get(facts, "directory"));

		if (!dir)
			die("the initialize reply has no facts.ssh.directory");
		ssh_target_load(&t, &o);
		t.directory = xasprintf("%s", dir);
		if (json_is_string(json_object_get(facts, "view")))
			r.sh.view = xasprintf("%s", json_string_value(json_object_get(facts, "view")));
	}
	json_decref(f);
	if (r.local) {
		workspace = xasprintf("%s/local/%s/workspace", state, SESSION);
		if (stat(workspace, &st) || !S_ISDIR(st.st_mode))
			die("the local workspace is not at %s", workspace);
	}

	/* 5a: idle, once the initialize's threads have settled. */
	sleep_ms(300);
	if (!read_rss(g.pid, &r.idle_rss_kib, &r.idle_hwm_kib))
		die("cannot read the gateway's /proc status");

	if (o.do_stat) {
		fprintf(stderr, "sgbench: stat_path x %ld\n", o.stat_n);
		r.st = bench_stat(&g, o.stat_n);
		r.stat = true;
	}
	if (o.do_cmd) {
		fprintf(stderr, "sgbench: run_command x %ld x 4 kinds\n", o.cmd_n);
		r.cmd_r = bench_cmd(&g, o.cmd_n);
		r.cmd = true;
	}
	if (o.do_wake) {
		fprintf(stderr, "sgbench: process/read wake-ups x %ld\n", o.wake_n);
		r.wk = bench_wake(&g, workspace, o.wake_n);
		r.wake = true;
	}
	if (o.do_export) {
		fprintf(stderr, "sgbench: export of %ld MiB x %ld x 2 kinds\n",
			o.export_mib, o.export_runs);
		r.ex = bench_export(&g, workspace, (size_t)o.export_mib * MiB,
				    (int)o.export_runs);
		r.export = true;
	}
	if (o.do_ssh) {
		ssh_master_open(&t, state);
		fprintf(stderr, "sgbench: ssh: run_command, read_file and their raw clients x %ld\n",
			o.ssh_n);
		ssh_compare(&g, &t, o.ssh_n, &r.sh);
		if (o.ssh_export_mib > 0) {
			fprintf(stderr, "sgbench: ssh: export of %ld MiB x %ld x 2 kinds\n",
				o.ssh_export_mib, o.ssh_export_runs);
			ssh_export(&g, &t, (size_t)o.ssh_export_mib * MiB,
				   (int)o.ssh_export_runs, &r.sh);
		}
		ssh_master_close(&t, state);
	}
	r.events = g.events;
	r.gateway_status = gw_stop(&g);
	if (o.do_ssh) {
		/* After the timed session: the counting client slows every call. */
		fprintf(stderr, "sgbench: ssh: client runs per tool call x %ld\n", o.rt_n);
		ssh_round_trips(&o, sandgate, state, o.rt_n, &r.sh);
		r.ssh = true;
	}

	report_markdown(stdout, &r);
	fputc('\n', stdout);
	report_details(stdout, &r);
	if (o.md_out) {
		FILE *m = fopen(o.md_out, "we");

		if (!m)
			die("%s: %s", o.md_out, strerror(errno));
		report_markdown(m, &r);
		fputc('\n', m);
		fputs("```\n", m);
		report_details(m, &r);
		fputs("```\n", m);
		fclose(m);
	}
	if (o.json_out)
		write_json(o.json_out, &r);
	if (!o.keep)
		nftw(state, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	else
		fprintf(stderr, "sgbench: state kept in %s\n", state);
	ssh_target_free(&t);
	free(r.sh.raw_true);
	free(r.sh.raw_cat);
	free(r.sh.view);
	free(workspace);
	free(state);
	free(sandgate);
	free(r.cmd_r.argv_text);
	return 0;
}
