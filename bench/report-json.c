/*
 * report-json.c - the results as JSON (--json), the numbers the tables
 * are made of.
 */
#include "bench/sgbench.h"

static json_t *dtn_json(const struct dtn_result *r)
{
	json_t *j = json_object(), *cnt = json_object();

	for (int k = 0; k < DK_TIMED; k++) {
		json_t *d = dist_json(&r->d[k]);

		json_object_set_new(d, "served", dist_json(&r->served[k]));
		json_object_set_new(j, dk_keys[k], d);
	}
	for (int k = 0; k < DK_KINDS; k++) {
		const struct dtn_count *c = &r->cnt[k];
		json_t *routes = json_object();

		for (int i = 0; i < c->nroutes; i++)
			json_object_set_new(routes, c->route[i], json_integer(c->route_n[i]));
		json_object_set_new(cnt, dk_keys[k],
				    json_pack("{s:I, s:I, s:I, s:I, s:o, s:b}", "calls",
					      (json_int_t)c->calls, "requests", (json_int_t)c->reqs,
					      "min", (json_int_t)c->min, "max", (json_int_t)c->max,
					      "routes", routes, "target",
					      k >= DK_C_WRITE && k < DK_C_TARGETS));
	}
	json_object_set_new(j, "requests", cnt);
	json_object_set_new(j, "background",
			    json_pack("{s:I, s:I, s:I, s:I}", "requests", (json_int_t)r->background,
				      "min_ms", (json_int_t)r->bg_min_ms, "max_ms",
				      (json_int_t)r->bg_max_ms, "keepalive_checks",
				      (json_int_t)r->bg_skip_activity));
	json_object_set_new(j, "read_file_longer_than_file", json_integer(r->read_bad));
	json_object_set_new(j, "hwm_kib", json_integer(r->hwm_kib));
	json_object_set_new(j, "rss_kib", json_integer(r->rss_kib));
	json_object_set_new(j, "initialize_ms", json_real(r->init_ms));
	if (r->sdk)
		json_object_set_new(j, "sdk", json_incref(r->sdk));
	return j;
}

static json_t *cloud_json(const struct cl_result *r)
{
	json_t *j = json_object(), *cnt = json_object(), *runs = json_array();

	for (int k = 0; k < CK_KINDS; k++) {
		const struct dtn_count *c = &r->cnt[k];
		json_t *routes = json_object();

		for (int i = 0; i < c->nroutes; i++)
			json_object_set_new(routes, c->route[i], json_integer(c->route_n[i]));
		json_object_set_new(cnt, ck_keys[k],
				    json_pack("{s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:o}", "calls",
					      (json_int_t)c->calls, "requests", (json_int_t)c->reqs,
					      "min", (json_int_t)c->min, "max", (json_int_t)c->max,
					      "round_trips", (json_int_t)r->rtt[k].reqs, "routes", routes,
					      "wall", dist_json(&r->wall[k]), "own",
					      dist_json(&r->own[k])));
	}
	for (int i = 0; i < r->mix_runs; i++)
		json_array_append_new(runs, json_real(r->mix_ns[i] / 1e6));
	json_object_set_new(j, "calls", cnt);
	json_object_set_new(j, "mix", json_pack("{s:i, s:f, s:o}", "ops", r->mix_ops, "median_ms",
						 r->mix_med_ns / 1e6, "runs_ms", runs));
	json_object_set_new(j, "tasks", json_pack("{s:b, s:I, s:I, s:f, s:f, s:f}", "pid_namespace",
						   r->pid_ok, "bash_min",
						   (json_int_t)r->pid_run_min, "bash_max",
						   (json_int_t)r->pid_run_max, "write_file",
						   r->pid_per[CK_WRITE], "read_file",
						   r->pid_per[CK_READ], "list_files",
						   r->pid_per[CK_STAT]));
	json_object_set_new(j, "background", json_integer(r->background));
	json_object_set_new(j, "hwm_kib", json_integer(r->hwm_kib));
	json_object_set_new(j, "rss_kib", json_integer(r->rss_kib));
	json_object_set_new(j, "initialize_ms", json_real(r->init_ms));
	json_object_set_new(j, "round_trip_ms", json_real(r->rt_ms));
	if (r->delay_ms >= 0)
		json_object_set_new(j, "fake_delay_ms", json_integer(r->delay_ms));
	json_object_set_new(j, "gateway_cpu_ms_per_call", json_real(r->cpu_ms));
	json_object_set_new(j, "clock_err_ms", json_real(r->clock_err_us / 1e3));
	if (r->sdk)
		json_object_set_new(j, "sdk", json_incref(r->sdk));
	return j;
}

static json_t *run_json(const struct export_run *x, size_t bytes)
{
	return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "total_s", x->total_s,
			 "mb_per_s", mbps(bytes, x->total_s), "open_s", x->open_s,
			 "read_s", x->read_s, "client_s", x->client_s, "close_s",
			 x->close_s);
}

static json_t *cmd_json(const struct cmd_result *c)
{
	json_t *j = json_object();

	for (int k = 0; k < CMD_KINDS; k++)
		json_object_set_new(j, cmd_keys[k], dist_json(&c->d[k]));
	json_object_set_new(j, "ratio",
			    json_real((double)c->d[CMD_GW].p50 / (double)c->d[CMD_DIRECT].p50));
	json_object_set_new(j, "direct_command_line", json_string(c->argv_text));
	return j;
}

static json_t *export_json(const struct export_result *x)
{
	json_t *runs = json_array(), *ahead = json_array();

	for (int i = 0; i < x->runs; i++) {
		json_array_append_new(runs, run_json(&x->run[i], x->bytes));
		json_array_append_new(ahead, run_json(&x->ahead[i], x->bytes));
	}
	return json_pack("{s:I, s:f, s:f, s:f, s:o, s:o, s:I, s:I, s:I}", "bytes",
			 (json_int_t)x->bytes, "median_mb_per_s", mbps(x->bytes, x->med.total_s),
			 "median_gateway_mb_per_s",
			 mbps(x->bytes, x->med.total_s - x->med.client_s),
			 "median_ahead_mb_per_s", mbps(x->bytes, x->med_ahead.total_s), "runs",
			 runs, "runs_ahead", ahead, "rss_max_kib", (json_int_t)x->rss_max_kib,
			 "rss_samples", (json_int_t)x->rss_samples, "hwm_after_kib",
			 (json_int_t)x->hwm_after_kib);
}

/* The ssh client runs per tool call (S4), one object per row. */
static json_t *rt_json(const struct ssh_result *s)
{
	json_t *rt = json_array();

	for (int i = 0; i < s->nrt; i++) {
		const struct rt_row *row = &s->rt[i];
		json_t *steps = json_object();

		for (int k = 0; k < row->nsteps; k++)
			json_object_set_new(steps, row->step[k], json_integer(row->step_n[k]));
		json_array_append_new(
			rt, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:b, s:o}", "call", row->name,
				      "calls", (json_int_t)row->calls, "sessions",
				      (json_int_t)row->sessions, "controls",
				      (json_int_t)row->controls, "masters", (json_int_t)row->masters,
				      "watcher", (json_int_t)row->watcher, "target", row->target,
				      "steps", steps));
	}
	return rt;
}

static json_t *ssh_json(const struct ssh_result *s)
{
	json_t *sj = json_object();

	for (int k = 0; k < SSH_KINDS; k++)
		json_object_set_new(sj, ssh_keys[k], dist_json(&s->d[k]));
	/* S1's ratio, against the login shell the host's bash tool runs. */
	json_object_set_new(sj, "ratio_true",
			    json_real((double)s->d[SSH_GW_TRUE].p50 / (double)s->d[SSH_RAW_LOGIN].p50));
	json_object_set_new(sj, "ratio_bare_true",
			    json_real((double)s->d[SSH_GW_TRUE].p50 / (double)s->d[SSH_RAW_TRUE].p50));
	json_object_set_new(sj, "ratio_read",
			    json_real((double)s->d[SSH_GW_READ].p50 / (double)s->d[SSH_RAW_CAT].p50));
	/* Not "raw_login_true": that key holds the timings (ssh_keys). */
	json_object_set_new(sj, "raw_login_command", json_string(s->raw_login));
	json_object_set_new(sj, "raw_true", json_string(s->raw_true));
	json_object_set_new(sj, "raw_cat", json_string(s->raw_cat));
	if (s->export)
		json_object_set_new(
			sj, "export",
			json_pack("{s:I, s:f, s:f, s:f, s:I}", "bytes", (json_int_t)s->ex.bytes,
				  "median_mb_per_s", mbps(s->ex.bytes, s->ex.med.total_s),
				  "median_ahead_mb_per_s", mbps(s->ex.bytes, s->ex.med_ahead.total_s),
				  "raw_cat_mb_per_s", mbps(s->ex.bytes, s->raw_export_s),
				  "rss_max_kib", (json_int_t)s->ex.rss_max_kib));
	json_object_set_new(sj, "round_trips", rt_json(s));
	return sj;
}

/* Time to the first result: each session's and the medians, in ms. */
static json_t *ttfr_json(const struct ttfr_result *t)
{
	json_t *first = json_array(), *init = json_array();

	for (int i = 0; i < t->n; i++) {
		json_array_append_new(first, json_real(t->first_ns[i] / 1e6));
		json_array_append_new(init, json_real(t->init_ns[i] / 1e6));
	}
	return json_pack("{s:i, s:o, s:o, s:f, s:f, s:I}", "n", t->n, "runs_ms", first,
			 "initialize_ms", init, "median_ms", t->med_ns / 1e6,
			 "initialize_median_ms", t->init_med_ns / 1e6, "fake_delay_ms",
			 (json_int_t)t->delay_ms);
}

void write_json(const char *path, const struct results *r)
{
	json_t *j = json_object();

	if (r->stat)
		/* "stat_path": the key bench/relay-bench.sh reads. */
		json_object_set_new(j, "stat_path", dist_json(&r->st.d));
	if (r->cmd)
		json_object_set_new(j, "bash", cmd_json(&r->cmd_r));
	if (r->wake) {
		json_t *w = dist_json(&r->wk.d);

		json_object_set_new(w, "unarmed", json_integer(r->wk.unarmed));
		json_object_set_new(w, "over_5ms", json_integer(r->wk.slow));
		json_object_set_new(j, "wake", w);
	}
	if (r->export)
		json_object_set_new(j, "export", export_json(&r->ex));
	if (r->ssh)
		json_object_set_new(j, "ssh", ssh_json(&r->sh));
	if (r->dtn)
		json_object_set_new(j, "daytona", dtn_json(&r->dt));
	if (r->cloud)
		json_object_set_new(j, "cloud", cloud_json(&r->cl));
	if (r->ttfr)
		json_object_set_new(j, "ttfr", ttfr_json(&r->tf));
	json_object_set_new(j, "idle_rss_kib", json_integer(r->idle_rss_kib));
	json_object_set_new(j, "idle_hwm_kib", json_integer(r->idle_hwm_kib));
	json_object_set_new(j, "gateway_status", json_integer(r->gateway_status));
	if (json_dump_file(j, path, JSON_INDENT(2)))
		die("cannot write %s", path);
	json_decref(j);
}
