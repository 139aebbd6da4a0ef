/*
 * cloud.c - the cloud set (modal, vercel; daytona with --only cloud)
 * against the backend's fake: the mixed calls (C1), requests and round trips
 * per call (C2), sandgate's own share of a call (C3), tasks per call in the
 * sandbox (C4), and time to ready (C6).
 */
#include "bench/sgbench.h"

/*
 * One log entry in the shapes the fakes write: daytona's and vercel's
 * {seq, ts (ISO, the start), durationMs (whole ms; vercel's to the µs),
 * route}, modal's {seq, t_ms (the end, ms since the fake started),
 * serving_ms, method}.  False for an
 * entry of neither shape.
 */
static bool cl_req_of(const struct cl_src *s, json_t *e, struct cl_req *r)
{
	const char *ts = json_string_value(json_object_get(e, "ts"));
	const char *name = json_string_value(json_object_get(e, "route"));
	json_t *serving = json_object_get(e, "serving_ms");

	memset(r, 0, sizeof(*r));
	r->seq = (long long)json_integer_value(json_object_get(e, "seq"));
	if (!name)
		name = json_string_value(json_object_get(e, "method"));
	snprintf(r->name, sizeof(r->name), "%s", name ? name : "?");
	if (json_is_number(serving))
		r->served_us = (int64_t)(json_number_value(serving) * 1000.0);
	else
		r->served_us = (int64_t)(json_number_value(json_object_get(e, "durationMs")) * 1000.0);
	if (ts) {
		r->start_us = iso_ms(ts) * 1000;
		if (r->start_us < 0)
			return false;
		r->end_us = r->start_us + r->served_us;
		return true;
	}
	if (!json_is_number(json_object_get(e, "t_ms")))
		return false;
	r->rel = true;
	r->end_us = (int64_t)(json_number_value(json_object_get(e, "t_ms")) * 1000.0) +
		    s->clock_us;
	r->start_us = r->end_us - r->served_us;
	return true;
}

/* The log's requests after sequence number `since`, in *n (new array). */
static struct cl_req *cl_fetch(const struct cl_src *s, long long since, size_t *n)
{
	char *target = xasprintf("%s?since=%lld", s->path, since);
	json_t *j = fake_get(&s->f, target), *a = json_is_array(j) ? j : json_object_get(j, "requests");
	struct cl_req *v = calloc(json_array_size(a) + 1, sizeof(*v));
	size_t i, m = 0;
	json_t *e;

	if (!json_is_array(a) || !v)
		die("GET %s: not a request log", target);
	json_array_foreach(a, i, e) {
		if (!cl_req_of(s, e, &v[m]))
			die("GET %s: an entry of no known shape", target);
		if (v[m].seq > since)
			m++;
	}
	json_decref(j);
	free(target);
	*n = m;
	return v;
}

long long cl_last_seq(const struct cl_src *s)
{
	size_t n;
	struct cl_req *v = cl_fetch(s, 0, &n);
	long long seq = 0;

	for (size_t i = 0; i < n; i++)
		if (v[i].seq > seq)
			seq = v[i].seq;
	free(v);
	return seq;
}

/* --fake-log http://127.0.0.1:PORT/PATH (loopback only, as everywhere here). */
void cl_src_parse(struct cl_src *s, const char *url)
{
	const char *p;
	char *end;

	memset(s, 0, sizeof(*s));
	if (strncmp(url, "http://127.0.0.1:", 17) != 0)
		die("--fake-log must be http://127.0.0.1:PORT/PATH, not %s", url);
	p = url + 17;
	errno = 0;
	s->f.port = strtol(p, &end, 10);
	if (errno || end == p || s->f.port < 1 || s->f.port > 65535 || *end != '/')
		die("--fake-log: no port and path in %s", url);
	s->path = xasprintf("%s", end);
	s->f.url = xasprintf("%s", url);
}

const char *const ck_names[CK_KINDS] = {
	"write_file", "read_file", "list_files", "bash", "process/read",
	"edit_file", "process/start", "initialize", "mixed calls", "other calls",
};
const char *const ck_keys[CK_KINDS] = {
	"write_file", "read_file", "list_files", "bash", "process_read",
	"edit_file", "process_start", "initialize", "mix", "other",
};

struct cl_call *cl_add(struct cl_calls *l, int kind, int64_t t0_us, int64_t t0_ns)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 256;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		if (!l->v)
			die("out of memory");
	}
	l->v[l->n] = (struct cl_call){ .t0_us = t0_us, .t1_us = wall_us(),
				       .wall_ns = now_ns() - t0_ns, .kind = kind };
	return &l->v[l->n++];
}

/* execute(tool, args) (steals args), logged as `kind`; its frame (new). */
static json_t *cl_execute(struct gw *g, struct cl_calls *l, int kind, const char *tool,
			  json_t *args)
{
	char *data = execute_data(tool, args);
	int64_t t0 = wall_us(), t0n = now_ns();
	json_t *f = gw_reply(g, gw_send(g, "execute", data), NULL);

	cl_add(l, kind, t0, t0n);
	check_tool(f, tool);
	free(data);
	return f;
}

static void cl_call_method(struct gw *g, struct cl_calls *l, int kind, const char *method,
			   json_t *data)
{
	int64_t t0 = wall_us(), t0n = now_ns();
	json_t *f = gw_call(g, method, data);

	cl_add(l, kind, t0, t0n);
	reply_data(f, method);
	json_decref(f);
}

/*
 * A log on a relative clock (modal's t_ms) is pinned to the wall clock
 * with CL_CALIB_N list_files calls, the log read after each: a request
 * ended before its call's reply and began after its request, so the
 * fake's start lies in [t0 - start, t1 - end] for each; the narrowest
 * such interval over all of them holds it.
 * On an absolute clock the same bounds check the two clocks agree.  The
 * bounds' width goes to *err_us (negative: they contradict each other).
 */
static void cl_calibrate(struct gw *g, struct cl_src *s, struct cl_calls *l, long long *since,
			 int64_t *err_us)
{
	int64_t lo = INT64_MIN, hi = INT64_MAX;
	bool rel = false;

	for (int i = 0; i < CL_CALIB_N; i++) {
		struct cl_call *c;
		struct cl_req *v;
		size_t n;

		json_decref(cl_execute(g, l, CK_OTHER, "list_files", json_pack("{s:s}", "path", ".")));
		c = &l->v[l->n - 1];
		v = cl_fetch(s, *since, &n);
		for (size_t k = 0; k < n; k++) {
			if (v[k].seq > *since)
				*since = v[k].seq;
			/* Longer than the call: a background request, not this call's. */
			if (v[k].served_us > c->wall_ns / 1000)
				continue;
			rel = rel || v[k].rel;
			if (c->t1_us - v[k].end_us < hi)
				hi = c->t1_us - v[k].end_us;
			if (c->t0_us - v[k].start_us > lo)
				lo = c->t0_us - v[k].start_us;
		}
		free(v);
	}
	if (hi == INT64_MAX)
		die("the fake logged no request for %d list_files calls", CL_CALIB_N);
	*err_us = hi - lo;
	/*
	 * Both bounds carry a delivery delay (request to handler, log to
	 * reply), which a loaded machine stretches alike: the middle is
	 * nearer than either end.
	 */
	if (rel)
		s->clock_us = lo <= hi ? lo + (hi - lo) / 2 : hi;
	else if (hi < -CL_SLACK_ABS_US || lo > CL_SLACK_ABS_US)
		fprintf(stderr, "sgbench: cloud: the fake's clock and ours differ (%.1f to %.1f ms)\n",
			lo / 1e3, hi / 1e3);
}

static int cmp_life(const void *a, const void *b)
{
	return cmp_i64(a, b);
}

/*
 * The round trips a call waited for: its requests in order of start, a
 * new round trip for each that began after all before it had ended (less
 * the log's slack); requests side by side (HTTP/2 streams sent together)
 * count once.
 */
static long cl_round_trips(struct cl_call *c)
{
	int64_t end = INT64_MIN;
	long n = 0;

	qsort(c->life, (size_t)c->nlife, sizeof(c->life[0]), cmp_life);
	for (int i = 0; i < c->nlife; i++) {
		if (i == 0 || c->life[i][0] >= end - CL_SLACK_US)
			n++;
		if (c->life[i][1] > end)
			end = c->life[i][1];
	}
	return n + (c->reqs - c->nlife);
}

/*
 * The call a request belongs to: the one its life overlaps most, if it
 * began no earlier than that call's request and ended by its reply (with
 * the log's slack); NULL for none.
 */
static struct cl_call *cl_owner(struct cl_calls *l, const struct cl_req *q)
{
	int64_t slack = q->rel ? CL_SLACK_US : CL_SLACK_ABS_US, best = -1;
	size_t lo = 0, hi = l->n;
	struct cl_call *c = NULL;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (l->v[mid].t0_us <= q->start_us + slack)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* lo - 1 is the last call begun by the request's start (+ slack). */
	for (size_t k = lo > 2 ? lo - 2 : 0; k < lo && k < l->n; k++) {
		struct cl_call *cc = &l->v[k];
		int64_t a = q->start_us > cc->t0_us ? q->start_us : cc->t0_us;
		int64_t b = q->end_us < cc->t1_us ? q->end_us : cc->t1_us;

		if (q->start_us + slack < cc->t0_us ||
		    q->end_us > cc->t1_us + slack + DTN_LATE_MS * 1000)
			continue;
		if (b - a > best) {
			best = b - a;
			c = cc;
		}
	}
	return c;
}

/* "a, b": name added to a comma-separated list in out[n] unless it is there. */
static void cl_list_add(char *out, size_t n, const char *name)
{
	size_t used = strlen(out);

	if (!strstr(out, name))
		snprintf(out + used, n - used, "%s%s", used ? ", " : "", name);
}

/* Request q counted for call c. */
static void cl_give(struct cl_call *c, const struct cl_req *q, struct cl_result *r)
{
	if (!c->reqs || q->start_us < c->first_us)
		c->first_us = q->start_us;
	if (!c->reqs || q->end_us > c->last_us)
		c->last_us = q->end_us;
	c->reqs++;
	c->served_us += q->served_us;
	if (c->nlife < CL_LIVES_MAX) {
		c->life[c->nlife][0] = q->start_us;
		c->life[c->nlife++][1] = q->end_us;
	}
	dtn_route(&r->cnt[c->kind], q->name);
	/*
	 * initialize is one sample: where its time went (which request, how
	 * long after the call began) makes an outlier readable.
	 */
	if (c->kind == CK_INIT) {
		size_t used = strlen(r->init_reqs);

		snprintf(r->init_reqs + used, sizeof(r->init_reqs) - used,
			 "%s%s at +%.0f for %.0f ms", used ? ", " : "", q->name,
			 (q->start_us - c->t0_us) / 1e3, q->served_us / 1e3);
	}
}

/* One more call's value v in the count cn (its min, max and sum). */
static void cl_tally(struct dtn_count *cn, long v)
{
	if (cn->calls == 0 || v < cn->min)
		cn->min = v;
	if (cn->calls == 0 || v > cn->max)
		cn->max = v;
	cn->calls++;
	cn->reqs += v;
}

/* Requests and round trips per call, own share and wall time, by kind. */
static void cl_by_kind(struct cl_calls *l, struct cl_result *r)
{
	for (int k = 0; k < CK_KINDS; k++) {
		int64_t *own = calloc(l->n + 1, sizeof(*own)), *wall = calloc(l->n + 1, sizeof(*wall));
		size_t m = 0;

		if (!own || !wall)
			die("out of memory");
		for (size_t i = 0; i < l->n; i++) {
			struct cl_call *c = &l->v[i];

			if (c->kind != k)
				continue;
			cl_tally(&r->rtt[k], cl_round_trips(c));
			cl_tally(&r->cnt[k], c->reqs);
			own[m] = c->wall_ns - c->served_us * 1000;
			wall[m++] = c->wall_ns;
		}
		r->own[k] = dist_of(own, m);
		r->wall[k] = dist_of(wall, m);
		free(own);
		free(wall);
	}
}

/*
 * Each request goes to the call that owns it (cl_owner); the rest are
 * background (a process watcher's long polls).
 */
static void cl_attribute(struct cl_calls *l, const struct cl_req *v, size_t n,
			 struct cl_result *r)
{
	for (size_t i = 0; i < n; i++) {
		struct cl_call *c = cl_owner(l, &v[i]);

		if (c) {
			cl_give(c, &v[i], r);
			continue;
		}
		r->background++;
		cl_list_add(r->bg_routes, sizeof(r->bg_routes), v[i].name);
	}
	/*
	 * Requests of one call that ran side by side would count twice in
	 * the sum: then the span from the first start to the last end is
	 * the time the fake served the call (to the log's millisecond).
	 */
	for (size_t i = 0; i < l->n; i++) {
		struct cl_call *c = &l->v[i];

		if (c->reqs > 1 && c->served_us > c->last_us - c->first_us + 1000) {
			c->served_us = c->last_us - c->first_us;
			r->overlapped++;
		}
	}
	cl_by_kind(l, r);
}

/*
 * The pid of a `cat /proc/self/stat` run by bash: in a sandbox
 * with a pid namespace of its own, successive pids count the tasks started
 * in between.  bash runs the command's one simple command by exec, so the
 * login shell and the command are one task.
 */
static long cl_pid(struct gw *g, struct cl_calls *l)
{
	json_t *f = cl_execute(g, l, CK_OTHER, "bash",
			       json_pack("{s:s}", "command", "cat /proc/self/stat"));
	const char *c = json_string_value(json_object_get(
		json_object_get(reply_data(f, "bash"), "structured_content"), "stdout"));
	char *end;
	long pid = c ? strtol(c, &end, 10) : 0;

	if (!c || end == c || strncmp(end, " (cat)", 6) != 0)
		die("cat /proc/self/stat printed %.80s", c ? c : "nothing");
	json_decref(f);
	return pid;
}

/*
 * Tasks started in the sandbox per call: per bash call from the pid
 * steps between successive probes (the command itself is one), per file
 * tool from n calls between two probes, less one probe's step.
 */
static void cl_pids(struct gw *g, struct cl_calls *l, long n, struct cl_result *r)
{
	static const char *const tools[] = { "write_file", "read_file", "list_files" };
	int64_t *d = calloc((size_t)n + 1, sizeof(*d));
	long prev = cl_pid(g, l), step;

	if (!d)
		die("out of memory");
	for (long i = 0; i < n; i++) {
		long p = cl_pid(g, l);

		d[i] = p - prev;
		prev = p;
	}
	qsort(d, (size_t)n, sizeof(*d), cmp_i64);
	r->pid_run_min = (long)d[0];
	r->pid_run_max = (long)d[n - 1];
	step = (long)d[n / 2];
	r->pid_calls = n;
	/* Host pids (no namespace) jump by thousands between calls. */
	r->pid_ok = r->pid_run_min >= 1 && r->pid_run_max < 100;
	for (int t = 0; t < 3; t++) {
		long a = cl_pid(g, l), b;

		for (long i = 0; i < n; i++) {
			json_t *args = t == 0 ? json_pack("{s:s, s:s}", "path", CL_PID_FILE, "content", "x\n") :
				       t == 1 ? read_args(CL_PID_FILE) :
						json_pack("{s:s}", "path", ".");

			json_decref(cl_execute(g, l, CK_OTHER, tools[t], args));
		}
		b = cl_pid(g, l);
		r->pid_per[t == 0 ? CK_WRITE : t == 1 ? CK_READ : CK_STAT] =
			(double)(b - a - step) / (double)n;
	}
	free(d);
}

/* The CPU time the process has used (user + system), in ms, or -1. */
static double cpu_ms(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut, st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* After the command name's closing parenthesis: state, then fields 4-13. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
			 &st) != 2)
		return -1;
	return (double)(ut + st) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
}

/* n calls of each simple tool, one at a time, each window logged. */
static void cl_counted(struct gw *g, struct cl_calls *l, long n)
{
	for (long i = 0; i < n; i++)
		json_decref(cl_execute(g, l, CK_WRITE, "write_file",
				       json_pack("{s:s, s:s}", "path", RT_FILE, "content",
						 "sgbench a\n")));
	for (long i = 0; i < n; i++)
		json_decref(cl_execute(g, l, CK_READ, "read_file", read_args(RT_FILE)));
	for (long i = 0; i < n; i++)
		json_decref(cl_execute(g, l, CK_STAT, "list_files", json_pack("{s:s}", "path", ".")));
	for (long i = 0; i < n; i++)
		json_decref(cl_execute(g, l, CK_RUN, "bash", json_pack("{s:s}", "command", "true")));
	for (long i = 0; i < n; i++)
		json_decref(cl_execute(g, l, CK_EDIT, "edit_file", edit_args(RT_FILE, i)));
}

/*
 * The execute data of a mixed op (new): its tool and arguments as the file
 * has them, a read_file given a range of its own (read_args).
 */
static char *mix_data(json_t *op)
{
	const char *tool = json_string_value(json_object_get(op, "tool"));
	json_t *args = json_deep_copy(json_object_get(op, "args"));

	if (!tool || !json_is_object(args))
		die("a mixed op without a tool or arguments");
	if (strcmp(tool, "read_file") == 0 && !json_object_get(args, "limit")) {
		json_t *r = read_args(json_string_value(json_object_get(args, "path")));

		json_object_update(args, r);
		json_decref(r);
	}
	return execute_data(tool, args);
}

/*
 * The mixed sequence, `runs` times: `expect`, when given, must be in the
 * answer's text (the tool's JSON view).
 */
static void cl_mix(struct gw *g, struct cl_calls *l, json_t *ops, int runs, struct cl_result *r)
{
	size_t nops = json_array_size(ops);
	char **data = calloc(nops + 1, sizeof(*data));

	if (!data)
		die("out of memory");
	for (int run = 0; run < runs; run++) {
		int64_t t_run;

		/* Built before the run's clock starts, as the requests always were. */
		for (size_t i = 0; i < nops; i++)
			data[i] = mix_data(json_array_get(ops, i));
		t_run = now_ns();
		for (size_t i = 0; i < nops; i++) {
			json_t *op = json_array_get(ops, i);
			const char *tool = json_string_value(json_object_get(op, "tool"));
			const char *expect = json_string_value(json_object_get(op, "expect"));
			int64_t t0 = wall_us(), t0n = now_ns();
			json_t *f = gw_reply(g, gw_send(g, "execute", data[i]), NULL), *d;
			const char *text;

			cl_add(l, CK_MIX, t0, t0n);
			d = check_tool(f, tool);
			text = tool_text(d);
			if (expect && !strstr(text, expect))
				die("mixed call %zu (%s): the answer lacks \"%s\": %.200s", i, tool,
				    expect, text);
			json_decref(f);
		}
		r->mix_ns[run] = now_ns() - t_run;
		for (size_t i = 0; i < nops; i++)
			free(data[i]);
	}
	r->mix_runs = runs;
	r->mix_ops = (int)nops;
	{
		int64_t v[CL_RUNS_MAX];

		memcpy(v, r->mix_ns, sizeof(v));
		r->mix_med_ns = dist_of(v, (size_t)runs).p50;
	}
	free(data);
}

/* process/read of a running process and process/start, as the daytona set does. */
static void cl_processes(struct gw *g, struct cl_calls *l, long n)
{
	char pid_id[64];
	int64_t t0, t0n;
	json_t *pread;

	t0 = wall_us();
	t0n = now_ns();
	start_process(g, "echo sgbench; exec sleep 120", pid_id);
	cl_add(l, CK_OTHER, t0, t0n);
	sleep_ms(500);
	pread = pread_data(pid_id);
	for (long i = 0; i < n; i++)
		cl_call_method(g, l, CK_PREAD, "process/read", json_incref(pread));
	json_decref(pread);
	cl_call_method(g, l, CK_OTHER, "process/stop", json_pack("{s:s}", "id", pid_id));
	sleep_ms(DTN_PSTART_GAP_MS);
	for (long i = 0; i < n; i++) {
		t0 = wall_us();
		t0n = now_ns();
		start_process(g, "sleep 0.2", pid_id);
		cl_add(l, CK_PSTART, t0, t0n);
		sleep_ms(DTN_PSTART_GAP_MS);
	}
}

/*
 * The cloud set on a gateway already initialized (its initialize window
 * is l's first entry); `since` is the log's last sequence number before
 * that initialize.
 */
void bench_cloud(struct gw *g, struct cl_src *s, struct cl_calls *l, long long since,
			const struct opts *o, struct cl_result *r)
{
	long long mark = since;
	json_error_t je;
	json_t *mix = json_load_file(o->mix, 0, &je), *ops;
	struct cl_req *v;
	size_t n;
	long rss;

	if (!mix)
		die("%s: %s (line %d)", o->mix, je.text, je.line);
	ops = json_object_get(mix, "ops");
	if (!json_is_array(ops) || json_array_size(ops) == 0 || json_array_size(ops) > CL_MIX_MAX)
		die("%s: no ops, or more than %d", o->mix, CL_MIX_MAX);
	fprintf(stderr, "sgbench: cloud: pinning the fake's clock (%d list_files calls)\n", CL_CALIB_N);
	/* Past the initialize's requests: they belong to no calibration call. */
	mark = cl_last_seq(s);
	cl_calibrate(g, s, l, &mark, &r->clock_err_us);
	fprintf(stderr, "sgbench: cloud: tasks started in the sandbox per call x %ld\n", o->rt_n);
	cl_pids(g, l, o->rt_n, r);
	fprintf(stderr, "sgbench: cloud: provider requests per call x %ld\n", o->cloud_n);
	r->cpu_ms = cpu_ms(g->pid);
	cl_counted(g, l, o->cloud_n);
	/* The gateway's own CPU, which the machine's load does not inflate as it does wall time. */
	r->cpu_ms = (cpu_ms(g->pid) - r->cpu_ms) / (5.0 * (double)o->cloud_n);
	fprintf(stderr, "sgbench: cloud: %zu mixed calls x %ld runs\n", json_array_size(ops),
		o->mix_runs);
	cl_mix(g, l, ops, (int)o->mix_runs, r);
	fprintf(stderr, "sgbench: cloud: process/read and process/start x %ld\n", o->cloud_n);
	cl_processes(g, l, o->cloud_n);
	if (!read_rss(g->pid, &rss, &r->hwm_kib))
		die("cannot read the gateway's /proc status");
	r->rss_kib = rss;
	sleep_ms(DTN_SETTLE_MS);
	v = cl_fetch(s, since, &n);
	cl_attribute(l, v, n, r);
	free(v);
	/* One round trip: the fake's median serving time of list_files's requests. */
	{
		int64_t *per = calloc(l->n + 1, sizeof(*per));
		size_t m = 0;

		if (!per)
			die("out of memory");
		for (size_t i = 0; i < l->n; i++)
			if (l->v[i].kind == CK_STAT && l->v[i].reqs > 0)
				per[m++] = l->v[i].served_us / l->v[i].reqs;
		r->rt_ms = m ? (double)dist_of(per, m).p50 / 1e3 : 0;
		free(per);
	}
	if (o->sdk_json) {
		r->sdk = json_load_file(o->sdk_json, 0, &je);
		if (!r->sdk)
			die("%s: %s", o->sdk_json, je.text);
	}
	json_decref(mix);
}
