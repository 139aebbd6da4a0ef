/*
 * daytona.c - the daytona set against the fake Daytona: exec, upload and
 * download of 1 MiB beside the official SDK's numbers (D1-D3), and the
 * provider requests per call, given to calls by their time windows (D5).
 */
#include "bench/sgbench.h"

/*
 * The daytona set counts requests in the fake's log, so the profile must
 * point at a fake on 127.0.0.1: its API URL comes from the variable the
 * profile's api_url_env names (Daytona's own default name otherwise).
 */
void fake_load(struct fake *f, const struct opts *o)
{
	json_t *cfg, *prof;
	const char *name, *var, *url, *p;
	char *end;

	memset(f, 0, sizeof(*f));
	prof = bench_profile(o, "the daytona set needs --config FILE (to find the fake's address)",
			     &cfg, &name);
	var = json_string_value(json_object_get(prof, "api_url_env"));
	if (!var)
		var = "DAYTONA_API_URL";
	url = getenv(var);
	if (!url || strncmp(url, "http://127.0.0.1:", 17) != 0)
		die("the daytona set runs against the fake Daytona on 127.0.0.1 only; "
		    "$%s is %s", var, url ? url : "not set");
	p = url + 17;
	errno = 0;
	f->port = strtol(p, &end, 10);
	if (errno || end == p || f->port < 1 || f->port > 65535 || (*end && *end != '/'))
		die("$%s: no port in %s", var, url);
	f->url = xasprintf("%s", url);
	json_decref(cfg);
}

/*
 * DK_OTHER: set-up, warm-up and clean-up calls.  They are not reported,
 * but they have windows like the others, so their requests are not taken
 * for a neighbour's or for the watcher's.
 */
const char *const dk_names[DK_KINDS] = {
	"bash \"true\"", "write_file 1 MiB", "read_file 1 MiB",
	"write_file", "read_file", "list_files", "bash", "process/read",
	"edit_file", "process/start", "present_artifact + export/read + export/close",
	"initialize", "other calls",
};
const char *const dk_keys[DK_KINDS] = {
	"exec", "upload", "download", "write_file", "read_file", "list_files", "bash",
	"process_read", "edit_file", "process_start", "export", "initialize", "other",
};

void dtn_add(struct dtn_log *l, int kind, int64_t t0, int64_t t1)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 256;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		if (!l->v)
			die("out of memory");
	}
	l->v[l->n++] = (struct dtn_call){ .t0 = t0, .t1 = t1, .kind = kind };
}

void dtn_route(struct dtn_count *c, const char *route)
{
	int i;

	for (i = 0; i < c->nroutes && strcmp(c->route[i], route) != 0; i++)
		;
	if (i == c->nroutes && i < DTN_ROUTES_MAX) {
		snprintf(c->route[i], sizeof(c->route[i]), "%s", route);
		c->nroutes++;
	}
	if (i < DTN_ROUTES_MAX)
		c->route_n[i]++;
}

/*
 * Give each logged request to the call whose window holds its whole life:
 * the latest call that began before it, if the request also ended by that
 * call's reply (DTN_LATE_MS for the log's lag).  The log names no command
 * (it never holds a body, and every exec's command text is the same
 * `eval "$SG_S"`), so the process watcher's requests are told apart this
 * way: each waits in the sandbox for seconds, beyond any call's reply.
 */
static void dtn_attribute(struct dtn_log *l, json_t *reqs, struct dtn_result *r)
{
	size_t i;
	json_t *e;

	r->bg_min_ms = INT64_MAX;
	json_array_foreach(reqs, i, e) {
		int64_t start = iso_ms(json_string_value(json_object_get(e, "ts")));
		/* Milliseconds with a fraction: the fake logs to the microsecond. */
		int64_t dur_us = (int64_t)(json_number_value(json_object_get(e, "durationMs")) * 1000.0);
		int64_t dur = dur_us / 1000;
		const char *route = json_string_value(json_object_get(e, "route"));
		size_t lo = 0, hi = l->n;
		struct dtn_call *c = NULL;

		if (start < 0)
			die("the fake's log has an unreadable ts");
		/* The last call with t0 <= start (the windows are in time order). */
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;

			if (l->v[mid].t0 <= start)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo > 0 && start <= l->v[lo - 1].t1 &&
		    start + dur <= l->v[lo - 1].t1 + DTN_LATE_MS)
			c = &l->v[lo - 1];
		if (c) {
			c->reqs++;
			c->served_us += dur_us;
			dtn_route(&r->cnt[c->kind], route ? route : "?");
			continue;
		}
		r->background++;
		if (dur < r->bg_min_ms)
			r->bg_min_ms = dur;
		if (dur > r->bg_max_ms)
			r->bg_max_ms = dur;
		if (json_is_string(json_object_get(json_object_get(e, "headers"),
						   "x-daytona-skip-last-activity-update")))
			r->bg_skip_activity++;
		if (route && !strstr(r->bg_routes, route)) {
			size_t used = strlen(r->bg_routes);

			snprintf(r->bg_routes + used, sizeof(r->bg_routes) - used, "%s%s",
				 used ? ", " : "", route);
		}
	}
	if (!r->background)
		r->bg_min_ms = 0;
	for (size_t k = 0; k < l->n; k++) {
		struct dtn_count *c = &r->cnt[l->v[k].kind];

		if (c->calls == 0 || l->v[k].reqs < c->min)
			c->min = l->v[k].reqs;
		if (c->calls == 0 || l->v[k].reqs > c->max)
			c->max = l->v[k].reqs;
		c->calls++;
		c->reqs += l->v[k].reqs;
	}
}

/* execute(tool, args) (steals args), its window logged as `kind`. */
static json_t *dtn_execute(struct gw *g, struct dtn_log *l, int kind, const char *tool,
			   json_t *args)
{
	char *data = execute_data(tool, args);
	int64_t t0 = wall_ms(false);
	json_t *f = gw_reply(g, gw_send(g, "execute", data), NULL);

	dtn_add(l, kind, t0, wall_ms(true));
	check_tool(f, tool);
	free(data);
	return f;
}

/* A protocol method call (steals data) that must succeed, its window logged. */
static void dtn_call(struct gw *g, struct dtn_log *l, int kind, const char *method,
		     json_t *data)
{
	int64_t t0 = wall_ms(false);
	json_t *f = gw_call(g, method, data);

	dtn_add(l, kind, t0, wall_ms(true));
	reply_data(f, method);
	json_decref(f);
}

static int64_t dtn_write(struct gw *g, const char *data)
{
	int64_t t0 = now_ns(), t1;
	json_t *f = gw_reply(g, gw_send(g, "execute", data), &t1), *d;

	d = check_tool(f, "write_file");
	if (view_int(d, "written_bytes", "write_file") != (json_int_t)SSH_READ_BYTES)
		die("write_file did not write 1 MiB");
	json_decref(f);
	return t1 - t0;
}

/*
 * read_file of the 1 MiB file.  The reply must start with the file's bytes
 * (all compared on the first call); a reply longer than the file is
 * counted and named in the report rather than fatal, so a defect in the
 * content does not hide the timing.  A shorter or truncated one is fatal.
 */
static int64_t dtn_read(struct gw *g, const char *path, const char *expect,
			struct dtn_result *r)
{
	char *data = execute_data("read_file", read_args(path));
	int64_t t0 = now_ns(), t1;
	json_t *f = gw_reply(g, gw_send(g, "execute", data), &t1), *d, *sc, *text;
	size_t len;

	free(data);
	d = check_tool(f, "read_file");
	sc = json_object_get(d, "structured_content");
	text = json_object_get(sc, "text");
	len = json_string_length(text);
	if (len < SSH_READ_BYTES ||
	    json_integer_value(json_object_get(sc, "num_lines")) !=
		    json_integer_value(json_object_get(sc, "total_lines")) ||
	    (expect && memcmp(json_string_value(text), expect, SSH_READ_BYTES) != 0))
		die("read_file did not return the 1 MiB written");
	if (len != SSH_READ_BYTES) {
		r->read_bad++;
		r->read_len = len;
	}
	json_decref(f);
	return t1 - t0;
}

/*
 * D1-D3: exec, upload and download of 1 MiB, interleaved in rotating
 * order after DTN_WARM rounds, each window logged for the request count.
 */
static void dtn_timed(struct gw *g, struct dtn_log *l, long n, struct dtn_result *r)
{
	char *text = text_mib();
	char *d_true = execute_data("bash", json_pack("{s:s}", "command", "true"));
	/* Replacing a file over 32 KiB takes a policy on the host's wire. */
	char *d_up = execute_data("write_file", json_pack("{s:s, s:s, s:s}", "path", DTN_UP_FILE,
							  "content", text, "overwrite_policy",
							  "explicit_user_requested"));
	int64_t *v[DK_TIMED];

	json_decref(dtn_execute(g, l, DK_OTHER, "write_file",
				json_pack("{s:s, s:s}", "path", SSH_READ_FILE, "content", text)));
	for (int k = 0; k < DK_TIMED; k++) {
		v[k] = calloc((size_t)n + 1, sizeof(int64_t));
		if (!v[k])
			die("out of memory");
	}
	for (long i = -DTN_WARM; i < n; i++) {
		for (int j = 0; j < DK_TIMED; j++) {
			int k = (int)(((i + DTN_WARM) + j) % DK_TIMED);
			int64_t t0 = wall_ms(false), ns;

			switch (k) {
			case DK_EXEC: ns = gateway_cmd(g, d_true); break;
			case DK_WRITE: ns = dtn_write(g, d_up); break;
			default:
				ns = dtn_read(g, SSH_READ_FILE, i == -DTN_WARM ? text : NULL, r);
				break;
			}
			dtn_add(l, i >= 0 ? k : DK_OTHER, t0, wall_ms(true));
			if (i >= 0)
				v[k][i] = ns;
		}
	}
	/* The fake's serving times come once its log is read (dtn_served). */
	for (int k = 0; k < DK_TIMED; k++) {
		r->d[k] = dist_of(v[k], (size_t)n);
		free(v[k]);
	}
	free(d_true);
	free(d_up);
	free(text);
}

/* The fake's serving time of the timed calls, by kind (after dtn_attribute). */
static void dtn_served(const struct dtn_log *l, long n, struct dtn_result *r)
{
	for (int k = 0; k < DK_TIMED; k++) {
		int64_t *v = calloc((size_t)n + 1, sizeof(*v));
		size_t m = 0;

		if (!v)
			die("out of memory");
		for (size_t i = 0; i < l->n; i++)
			if (l->v[i].kind == k && m < (size_t)n)
				v[m++] = l->v[i].served_us * 1000LL;
		r->served[k] = dist_of(v, m);
		free(v);
	}
}

/* D5: `n` calls of each tool and method, one at a time, each window logged. */
static void dtn_counted(struct gw *g, struct dtn_log *l, long n)
{
	char pid_id[64];
	json_t *pread;
	int64_t t0;

	for (long i = 0; i < n; i++)
		json_decref(dtn_execute(g, l, DK_C_WRITE, "write_file",
					json_pack("{s:s, s:s}", "path", RT_FILE, "content",
						  "sgbench a\n")));
	for (long i = 0; i < n; i++)
		json_decref(dtn_execute(g, l, DK_C_READ, "read_file", read_args(RT_FILE)));
	for (long i = 0; i < n; i++)
		json_decref(dtn_execute(g, l, DK_C_STAT, "list_files",
					json_pack("{s:s}", "path", ".")));
	for (long i = 0; i < n; i++)
		json_decref(dtn_execute(g, l, DK_C_RUN, "bash",
					json_pack("{s:s}", "command", "true")));
	for (long i = 0; i < n; i++)
		json_decref(dtn_execute(g, l, DK_C_EDIT, "edit_file", edit_args(RT_FILE, i)));

	/*
	 * process/read at offset 0 of a process that runs throughout; the
	 * watcher's answer to its start is let past first.
	 */
	t0 = wall_ms(false);
	start_process(g, "echo sgbench; exec sleep 120", pid_id);
	dtn_add(l, DK_OTHER, t0, wall_ms(true));
	sleep_ms(500);
	pread = pread_data(pid_id);
	for (long i = 0; i < n; i++)
		dtn_call(g, l, DK_C_PREAD, "process/read", json_incref(pread));
	json_decref(pread);
	dtn_call(g, l, DK_OTHER, "process/stop", json_pack("{s:s}", "id", pid_id));

	/*
	 * Each started process has ended before the next start, so the
	 * watcher re-arms between the calls, not inside them.
	 */
	sleep_ms(DTN_PSTART_GAP_MS);
	for (long i = 0; i < n; i++) {
		t0 = wall_ms(false);
		start_process(g, "sleep 0.2", pid_id);
		dtn_add(l, DK_C_PSTART, t0, wall_ms(true));
		sleep_ms(DTN_PSTART_GAP_MS);
	}
	/*
	 * One window for a whole export: the snapshot's download may still be
	 * running when present_artifact has answered.
	 */
	for (long i = 0; i < n; i++) {
		t0 = wall_ms(false);
		export_whole(g, RT_FILE);
		dtn_add(l, DK_C_EXPORT, t0, wall_ms(true));
	}
}

/*
 * The daytona set on a gateway already initialized (its initialize window
 * is l's first entry); `since` is the fake's last sequence number before
 * that initialize.
 */
void bench_daytona(struct gw *g, const struct fake *fk, struct dtn_log *l,
			  long long since, const struct opts *o, struct dtn_result *r)
{
	json_t *reqs;
	long rss;

	fprintf(stderr, "sgbench: daytona: bash, write_file and read_file of 1 MiB x %ld\n",
		o->dtn_n);
	dtn_timed(g, l, o->dtn_n, r);
	fprintf(stderr, "sgbench: daytona: provider requests per call x %ld\n", o->rt_n);
	dtn_counted(g, l, o->rt_n);
	if (!read_rss(g->pid, &rss, &r->hwm_kib))
		die("cannot read the gateway's /proc status");
	r->rss_kib = rss;
	sleep_ms(DTN_SETTLE_MS);
	reqs = fake_requests(fk, since);
	dtn_attribute(l, reqs, r);
	dtn_served(l, o->dtn_n, r);
	json_decref(reqs);
	r->url = xasprintf("%s", fk->url);
	if (o->sdk_json) {
		json_error_t je;

		r->sdk = json_load_file(o->sdk_json, 0, &je);
		if (!r->sdk)
			die("%s: %s", o->sdk_json, je.text);
	}
}
