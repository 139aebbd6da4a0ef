/*
 * local.c - the local backend's sets: list_files round trips (stat),
 * bash against a plain exec of the same login shell (cmd), process/read's
 * wake-up (wake), and the export of a large file with the gateway's RSS
 * sampled during it (export; the ssh set reuses export_measure).
 */
#include "bench/sgbench.h"

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

struct stat_result bench_stat(struct gw *g, long n)
{
	/*
	 * list_files of the (nearly empty) root: the host has no stat, and a
	 * listing is its cheapest call that answers in-process here.
	 */
	char *data = execute_data("list_files", json_pack("{s:s}", "path", "."));
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
			check_tool(f, "list_files");
		else if (!json_object_get(f, "data"))
			reply_data(f, "list_files");
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

void free_strv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/*
 * Spawn argv as the gateway spawns a command: its own process group,
 * stdin from /dev/null, stdout and stderr into one pipe drained to EOF,
 * then reaped.  Returns the wall time in nanoseconds; *out_bytes (when
 * not NULL) gets the number of bytes drained.  A non-zero exit is fatal.
 */
int64_t spawn_timed(char *const *argv, char *const *envp, int fd3, size_t *out_bytes,
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
	if (fd3 >= 0)
		posix_spawn_file_actions_adddup2(&fa, fd3, 3);
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

const char *const cmd_names[CMD_KINDS] = {
	"bash \"true\" through the gateway",
	"direct: bash -l -c true, plain exec",
};
const char *const cmd_keys[CMD_KINDS] = { "gateway_bash", "direct_bash" };

/*
 * The bash tool's `true` against the same login shell spawned here.  Since
 * the sandbox's options travel on a descriptor (its pid 1 shows only `bwrap
 * --args 3`) the gateway's confined command line cannot be replayed, so the
 * reference is a plain exec: the ratio holds the whole of what a command
 * costs through sandgate (the sandbox, the helper's process supervisor, its
 * log), not just the gateway's share.
 */
struct cmd_result bench_cmd(struct gw *g, const char *state, long n)
{
	static char *const direct[] = { "/bin/bash", "-l", "-c", "true", NULL };
	/*
	 * The login shell's environment as the sandbox gives it: an empty
	 * home (this machine's own ~/.profile would be timed otherwise),
	 * the system PATH and the host's TERM.
	 */
	char *home = xasprintf("%s/cmd-home", state);
	char *home_var = xasprintf("HOME=%s", home);
	char *const envp[] = { home_var, "PATH=/usr/local/bin:/usr/bin:/bin", "TERM=dumb", NULL };
	char *data = execute_data("bash", json_pack("{s:s}", "command", "true"));
	struct cmd_result r = { 0 };
	int64_t *v[CMD_KINDS];
	long warm = 20;
	json_t *a = json_array();

	if (mkdir(home, 0700) && errno != EEXIST)
		die("%s: %s", home, strerror(errno));
	for (int k = 0; k < CMD_KINDS; k++) {
		v[k] = calloc((size_t)n + 1, sizeof(int64_t));
		if (!v[k])
			die("out of memory");
	}
	/*
	 * Interleaved, with the order alternating each round, so drift in the
	 * machine's load falls on both alike.
	 */
	for (long i = -warm; i < n; i++) {
		for (int j = 0; j < CMD_KINDS; j++) {
			int k = (int)(((i + warm) + j) % CMD_KINDS);
			int64_t t = k == CMD_GW ? gateway_cmd(g, data) :
						  spawn_timed(direct, envp, -1, NULL, "bash -l -c true");

			if (i >= 0)
				v[k][i] = t;
		}
	}
	for (int k = 0; k < CMD_KINDS; k++) {
		r.d[k] = dist_of(v[k], (size_t)n);
		free(v[k]);
	}
	for (size_t i = 0; direct[i]; i++)
		json_array_append_new(a, json_string(direct[i]));
	r.argv_text = json_dumps(a, JSON_COMPACT);
	json_decref(a);
	free(data);
	free(home_var);
	free(home);
	return r;
}

/*
 * One wake-up: a process/read from offset (the host's Go options, nested
 * under "options") left to block, then a line written into the FIFO (fd);
 * the time from the write to the reply, the read's own Duration in *dur
 * and the next offset in *offset.
 */
static int64_t wake_once(struct gw *g, const char *pid_id, int fd, long i, int64_t *offset,
			 int64_t *dur)
{
	char data[256], line[32];
	struct pollfd pfd = { g->from, POLLIN, 0 };
	int64_t id, t0, t1;
	json_t *f, *d;
	int len;

	snprintf(data, sizeof(data),
		 "{\"id\":\"%s\",\"options\":{\"OffsetBytes\":%" PRId64
		 ",\"Wait\":10000000000,\"MinDwell\":0,\"MaxBytes\":0}}",
		 pid_id, *offset);
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
	*offset = json_integer_value(json_object_get(d, "EndOffset"));
	*dur = json_integer_value(json_object_get(d, "Duration"));
	json_decref(f);
	return t1 - t0;
}

/* `cat` of the FIFO started; its process id into pid_id[64], the FIFO's write end returned. */
static int wake_start(struct gw *g, const char *fifo, char *pid_id)
{
	int64_t deadline;
	json_t *f;
	int fd;

	unlink(fifo);
	/*
	 * The command runs as the environment's own user, not as this
	 * program's: the FIFO must be readable by anyone (umask aside).
	 */
	if (mkfifo(fifo, 0644) || chmod(fifo, 0644))
		die("mkfifo %s: %s", fifo, strerror(errno));
	f = gw_call(g, "process/start", json_pack("{s:s}", "command", "cat " WAKE_FIFO));
	snprintf(pid_id, 64, "%s",
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
	return fd;
}

struct wake_result bench_wake(struct gw *g, const char *workspace, long n)
{
	char *fifo = xasprintf("%s/%s", workspace, WAKE_FIFO);
	int64_t *v = calloc((size_t)n + 1, sizeof(*v));
	int64_t offset = 0, dur;
	struct wake_result r = { 0 };
	long warm = 10;
	char pid_id[64], data[256];
	int fd;

	if (!v)
		die("out of memory");
	fd = wake_start(g, fifo, pid_id);
	for (long i = -warm; i < n; i++) {
		int64_t ns = wake_once(g, pid_id, fd, i, &offset, &dur);

		if (i >= 0) {
			v[i] = ns;
			r.unarmed += dur < WAKE_ARMED_NS;
			r.slow += v[i] > WAKE_SLOW_NS;
		}
	}
	close(fd);
	snprintf(data, sizeof(data), "{\"id\":\"%s\",\"grace_ms\":1000}", pid_id);
	json_decref(gw_reply(g, gw_send(g, "process/stop", data), NULL));
	unlink(fifo);
	r.d = dist_of(v, (size_t)n);
	free(v);
	free(fifo);
	return r;
}

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
		if (json_is_string(jid) && id_is(json_string_value(jid), id)) {
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

	/* The host sends no length: the gateway picks the chunk (256 KiB). */
	snprintf(data, sizeof(data), "{\"token\":\"%s\",\"offset\":%" PRId64 "}", token,
		 offset);
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
	/* The digest is checked on the bytes read back (the host gets none). */
	if (present_artifact(g, EXPORT_FILE, token, sizeof(token)) != (int64_t)bytes)
		die("present_artifact: the size differs from the file written");
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
struct export_result export_measure(struct gw *g, const char *sha_hex,
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

struct export_result bench_export(struct gw *g, const char *workspace,
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
