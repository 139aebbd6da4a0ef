/*
 * report-cloud.c - the daytona and cloud sets' rows and details, each
 * beside the official SDK's numbers when --sdk-json gave them.
 */
#include "bench/sgbench.h"

/* A number of the SDK's results (ops.<op>.<field>), or -1. */
static double sdk_num(const json_t *sdk, const char *op, const char *field)
{
	json_t *v = json_object_get(json_object_get(json_object_get(sdk, "ops"), op), field);

	return json_is_number(v) ? json_number_value(v) : -1;
}

/* "1", or "1.2 (1–2 per call)", then the routes with " (...)" when asked. */
static void dtn_count_text(const struct dtn_count *c, bool routes, char *out, size_t n)
{
	double per = c->calls ? (double)c->reqs / (double)c->calls : 0;
	size_t used;

	if (c->min == c->max)
		snprintf(out, n, "%ld", c->min);
	else
		snprintf(out, n, "%.2g (%ld–%ld per call)", per, c->min, c->max);
	used = strlen(out);
	for (int i = 0; routes && i < c->nroutes && used < n; i++) {
		double rp = (double)c->route_n[i] / (double)c->calls;
		int w = rp > 0.999 && rp < 1.001 ?
				snprintf(out + used, n - used, "%s%s", i ? " + " : " (",
					 c->route[i]) :
				snprintf(out + used, n - used, "%s%s ×%.2g", i ? " + " : " (",
					 c->route[i], rp);

		if (w < 0)
			break;
		used += (size_t)w;
	}
	if (routes && c->nroutes && used + 1 < n)
		snprintf(out + used, n - used, ")");
}

static bool dtn_one_each(const struct dtn_count *c)
{
	return c->calls > 0 && c->min == 1 && c->max == 1;
}

static const char *const dtn_rows[DK_TIMED] = {
	"exec: bash \"true\" (was run_command) vs the SDK's `process.executeCommand('true')`",
	"upload 1 MiB: write_file (content as a string) vs `fs.uploadFile(Buffer)`",
	"download 1 MiB: read_file vs `fs.downloadFile(path)`",
};

/* D1-D3: each timed operation beside the SDK's. */
static void report_dtn_timed(FILE *o, const struct dtn_result *r)
{
	for (int k = 0; k < DK_TIMED; k++) {
		const struct dist *d = &r->d[k];
		double s50 = sdk_num(r->sdk, dk_keys[k], "p50_us");
		double s90 = sdk_num(r->sdk, dk_keys[k], "p90_us");
		double ratio = s50 > 0 ? d->p50 / 1e3 / s50 : 0;
		double sn = sdk_num(r->sdk, dk_keys[k], "n");
		char bad[160] = "", runs[64];

		if (k == DK_READ && r->read_bad)
			snprintf(bad, sizeof(bad),
				 "; **read_file gave %zu characters for the %zu-byte file** in %ld calls (warm-up included)",
				 r->read_len, (size_t)SSH_READ_BYTES, r->read_bad);
		if (sn == (double)d->n)
			snprintf(runs, sizeof(runs), "%zu runs each", d->n);
		else
			snprintf(runs, sizeof(runs), "%zu and %.0f runs", d->n, sn);
		if (s50 > 0)
			fprintf(o, "| D%d | %s, %s | p50 %.2f ms vs %.2f ms: **%.2f×** (p90 %.2f vs %.2f ms)%s | ≤ 0.5× | %s |\n",
				k + 1, dtn_rows[k], runs, d->p50 / 1e6, s50 / 1e3, ratio,
				d->p90 / 1e6, s90 / 1e3, bad, verdict(ratio <= 0.5));
		else
			fprintf(o, "| D%d | %s, %zu runs | p50 %.2f ms (p90 %.2f ms); the SDK was not run%s | ≤ 0.5× | n/a |\n",
				k + 1, dtn_rows[k], d->n, d->p50 / 1e6, d->p90 / 1e6, bad);
	}
}

/* The SDK's requests per timed call and their routes, for D5i. */
static void report_dtn_sdk_routes(FILE *o, const struct dtn_result *r)
{
	for (int k = 0; r->sdk && k < DK_TIMED; k++) {
		json_t *op = json_object_get(json_object_get(r->sdk, "ops"), dk_keys[k]);
		const char *rk;
		json_t *rv;
		int first = 1;

		fprintf(o, "; SDK %s %.3g", dk_keys[k], sdk_num(r->sdk, dk_keys[k], "requests_per_call"));
		json_object_foreach(json_object_get(op, "routes"), rk, rv) {
			fprintf(o, "%s%s", first ? " (" : " + ", rk);
			first = 0;
		}
		if (!first)
			fputc(')', o);
	}
}

/* D5 and D5i: provider requests per call. */
static void report_dtn_requests(FILE *o, const struct dtn_result *r)
{
	char text[512];
	bool all = true;

	fprintf(o, "| D5 | provider requests per tool call, from the fake's request log, %ld calls each | ",
		r->cnt[DK_C_WRITE].calls);
	for (int k = DK_C_WRITE; k < DK_C_TARGETS; k++) {
		dtn_count_text(&r->cnt[k], false, text, sizeof(text));
		fprintf(o, "%s%s %s", k == DK_C_WRITE ? "" : ", ", dk_names[k], text);
		all = all && dtn_one_each(&r->cnt[k]);
	}
	fprintf(o, " | exactly 1 each | %s |\n", verdict(all));
	fputs("| D5i | the same, for information | ", o);
	for (int k = DK_C_TARGETS; k < DK_REPORTED; k++) {
		dtn_count_text(&r->cnt[k], true, text, sizeof(text));
		fprintf(o, "%s%s %s", k == DK_C_TARGETS ? "" : "; ", dk_names[k], text);
	}
	for (int k = 0; k < DK_TIMED; k++) {
		dtn_count_text(&r->cnt[k], true, text, sizeof(text));
		fprintf(o, "; timed %s %s", dk_names[k], text);
	}
	report_dtn_sdk_routes(o, r);
	fprintf(o, "; outside any call (the process watcher): %ld (%s, %.1f–%.1f s each) | none | info |\n",
		r->background, r->background ? r->bg_routes : "none", r->bg_min_ms / 1e3,
		r->bg_max_ms / 1e3);
}

void report_dtn_markdown(FILE *o, const struct dtn_result *r)
{
	double sdk_rss = r->sdk ? (double)json_integer_value(json_object_get(r->sdk, "max_rss_kib")) : 0;

	report_dtn_timed(o, r);
	if (sdk_rss > 0)
		fprintf(o, "| D4 | peak RSS: the gateway's VmHWM vs the SDK's Node process (`maxRSS`) | %.1f MiB vs %.1f MiB: **%.2f×** | ≤ 0.25× | %s |\n",
			r->hwm_kib / 1024.0, sdk_rss / 1024.0, (double)r->hwm_kib / sdk_rss,
			verdict((double)r->hwm_kib <= 0.25 * sdk_rss));
	else
		fprintf(o, "| D4 | peak RSS: the gateway's VmHWM | %.1f MiB; the SDK was not run | ≤ 0.25× the SDK's | n/a |\n",
			r->hwm_kib / 1024.0);
	report_dtn_requests(o, r);
	/* One round trip: the SDK's own exec of `true` (D1), request to answer. */
	if (r->sdk && sdk_num(r->sdk, "exec", "p50_us") > 0) {
		double create = json_number_value(json_object_get(r->sdk, "create_ms"));
		double rt = sdk_num(r->sdk, "exec", "p50_us") / 1e3;

		fprintf(o, "| D6 | time to ready: initialize (from the gateway's spawn) vs the SDK's create() + one round trip (its exec's p50, D1) | %.0f ms vs %.0f + %.1f ms: **%+.0f ms** | ≤ the SDK's create + 1 round trip | %s |\n",
			r->init_ms, create, rt, r->init_ms - create - rt,
			verdict(r->init_ms <= create + rt));
	}
}

void report_dtn_details(FILE *o, const struct dtn_result *r, long idle_hwm_kib)
{
	for (int k = 0; k < DK_TIMED; k++) {
		const struct dist *d = &r->d[k], *s = &r->served[k];

		fprintf(o, "sandgate %-24s p50 %7.2f ms  p90 %7.2f ms  p99 %7.2f ms  min %6.2f ms; in the fake p50 %5.1f ms, p90 %5.1f ms\n",
			dk_names[k], d->p50 / 1e6, d->p90 / 1e6, d->p99 / 1e6, d->min / 1e6,
			s->p50 / 1e6, s->p90 / 1e6);
	}
	for (int k = 0; r->sdk && k < DK_TIMED; k++)
		fprintf(o, "SDK      %-24s p50 %7.2f ms  p90 %7.2f ms  p99 %7.2f ms  min %6.2f ms; in the fake p50 %5.1f ms, p90 %5.1f ms\n",
			dk_keys[k], sdk_num(r->sdk, dk_keys[k], "p50_us") / 1e3,
			sdk_num(r->sdk, dk_keys[k], "p90_us") / 1e3,
			sdk_num(r->sdk, dk_keys[k], "p99_us") / 1e3,
			sdk_num(r->sdk, dk_keys[k], "min_us") / 1e3,
			json_number_value(json_object_get(json_object_get(json_object_get(
				json_object_get(r->sdk, "ops"), dk_keys[k]), "served"), "p50_us")) / 1e3,
			json_number_value(json_object_get(json_object_get(json_object_get(
				json_object_get(r->sdk, "ops"), dk_keys[k]), "served"), "p90_us")) / 1e3);
	fprintf(o, "gateway: VmHWM %.1f MiB after initialize, %.1f MiB at the end (VmRSS %.1f MiB); initialize %.0f ms\n",
		idle_hwm_kib / 1024.0, r->hwm_kib / 1024.0, r->rss_kib / 1024.0, r->init_ms);
	if (r->sdk)
		fprintf(o, "SDK %s %s on Node %s: maxRSS %.1f MiB (RSS %.1f MiB before the SDK was loaded); create %.0f ms in %lld requests\n",
			json_string_value(json_object_get(r->sdk, "sdk")),
			json_string_value(json_object_get(r->sdk, "sdk_version")),
			json_string_value(json_object_get(r->sdk, "node")),
			json_integer_value(json_object_get(r->sdk, "max_rss_kib")) / 1024.0,
			json_integer_value(json_object_get(r->sdk, "rss_start_kib")) / 1024.0,
			json_number_value(json_object_get(r->sdk, "create_ms")),
			(long long)json_integer_value(json_object_get(r->sdk, "create_requests")));
	if (r->read_bad)
		fprintf(o, "read_file of the %zu-byte file returned %zu characters in %ld calls: the file's bytes and more\n",
			(size_t)SSH_READ_BYTES, r->read_len, r->read_bad);
	fprintf(o, "requests outside any call: %ld (%s), %.1f to %.1f s each, %ld keep-alive checks; fake at %s\n",
		r->background, r->background ? r->bg_routes : "none", r->bg_min_ms / 1e3,
		r->bg_max_ms / 1e3, r->bg_skip_activity, r->url);
}

/* A number at a path of the SDK's results ("mix", "median_ms"), or -1. */
static double sdk_at(const json_t *sdk, const char *a, const char *b)
{
	json_t *v = json_object_get(json_object_get(sdk, a), b);

	return json_is_number(v) ? json_number_value(v) : -1;
}

/*
 * The issues set the mixed sequence's and time to ready's targets for a
 * real round trip (the fake delaying each request): without the delay
 * they are measured for information.
 */
static const char *cloud_rtt_only(const struct cl_result *r)
{
	return r->delay_ms == 0 ? " with a real round trip (the delayed block)" : "";
}

/* C1: the mixed calls against the SDK doing the same. */
static void report_cloud_mix(FILE *o, const struct cl_result *r)
{
	double s_mix = sdk_at(r->sdk, "mix", "median_ms"), mix = r->mix_med_ns / 1e6;

	if (s_mix > 0)
		fprintf(o, "| C1 | %d mixed tool calls (bench/cloud-mix.json) vs the SDK doing the same (its bash calls run `bash -l -c`, the login shell the host's worker runs, so both sides pay for it), median of %d runs | %.0f ms vs %.0f ms: **%.2f×** | ≤ 1.1×%s | %s |\n",
			r->mix_ops, r->mix_runs, mix, s_mix, mix / s_mix, cloud_rtt_only(r),
			r->delay_ms == 0 ? "info" : verdict(mix <= 1.1 * s_mix));
	else
		fprintf(o, "| C1 | %d mixed tool calls (bench/cloud-mix.json), median of %d runs | %.0f ms; the SDK was not run | ≤ 1.1× the SDK's | n/a |\n",
			r->mix_ops, r->mix_runs, mix);
}

/* C2, C2r and C2i: provider requests and round trips per call. */
static void report_cloud_requests(FILE *o, const struct cl_result *r)
{
	char text[512];
	bool all = true;

	fprintf(o, "| C2 | provider requests per call, from the fake's request log, %ld calls each | ",
		r->cnt[CK_WRITE].calls);
	for (int k = CK_WRITE; k < CK_TARGETS; k++) {
		dtn_count_text(&r->cnt[k], true, text, sizeof(text));
		fprintf(o, "%s%s %s", k == CK_WRITE ? "" : ", ", ck_names[k], text);
		all = all && dtn_one_each(&r->cnt[k]);
	}
	fprintf(o, " | exactly 1 each | %s |\n", verdict(all));
	all = true;
	fputs("| C2r | round trips per call: requests sent side by side (overlapping in the log) count once | ", o);
	for (int k = CK_WRITE; k < CK_TARGETS; k++) {
		dtn_count_text(&r->rtt[k], false, text, sizeof(text));
		fprintf(o, "%s%s %s", k == CK_WRITE ? "" : ", ", ck_names[k], text);
		all = all && dtn_one_each(&r->rtt[k]);
	}
	fprintf(o, " | 1 each (Modal: the fewest its router allows) | %s |\n", verdict(all));
	fputs("| C2i | the same, for information | ", o);
	for (int k = CK_TARGETS; k < CK_REPORTED; k++) {
		dtn_count_text(&r->cnt[k], true, text, sizeof(text));
		fprintf(o, "%s%s %s", k == CK_TARGETS ? "" : "; ", ck_names[k], text);
	}
	if (r->sdk) {
		const char *key;
		json_t *op;

		json_object_foreach(json_object_get(r->sdk, "ops"), key, op)
			fprintf(o, "; SDK %s %.3g", key,
				json_number_value(json_object_get(op, "requests_per_call")));
		fprintf(o, "; SDK mixed calls %.3g per call",
			sdk_at(r->sdk, "mix", "requests_per_call"));
	}
	fprintf(o, "; outside any call: %ld (%s) | none | info |\n", r->background,
		r->background ? r->bg_routes : "none");
}

/* The SDK's own share of one kind of call (ops.<tool>.own), or NULL. */
static const json_t *sdk_own(const struct cl_result *r, int k)
{
	json_t *own = json_object_get(json_object_get(json_object_get(r->sdk, "ops"),
						      ck_names[k]), "own");

	return json_is_number(json_object_get(own, "p50_us")) ? own : NULL;
}

/* Whether sandgate's own share of kind k meets C3's target. */
static bool cloud_own_ok(const struct cl_result *r, int k)
{
	const json_t *s = sdk_own(r, k);

	if (r->own[k].n == 0)
		return false;
	/* The SDK has no process/read: that call keeps the absolute target. */
	if (!r->own_vs_sdk || !s)
		return r->own[k].p50 <= CL_OWN_MAX_NS;
	return r->own[k].p50 / 1e3 <= CL_OWN_SDK_RATIO * json_number_value(json_object_get(s, "p50_us"));
}

/*
 * C3 on Modal (issue 39): sandgate's own share of each call against the
 * SDK's, measured the same way in the same run (bench/cloud-sdk-bench.mjs
 * fences each call); the SDK's per-call numbers are p50 (p90).
 */
static void report_cloud_own_ratio(FILE *o, const struct cl_result *r)
{
	bool all = r->sdk != NULL;

	fputs("| C3 | sandgate's own share of a call vs the SDK's, each measured the same way in this run: the call's wall time less the fake's serving time of its requests, p50 (p90) | ", o);
	for (int k = CK_WRITE; k < CK_TARGETS; k++) {
		const json_t *s = sdk_own(r, k);

		fprintf(o, "%s%s %.2f (%.2f) ms", k == CK_WRITE ? "" : ", ", ck_names[k],
			r->own[k].p50 / 1e6, r->own[k].p90 / 1e6);
		if (s)
			fprintf(o, " vs %.2f (%.2f) ms: **%.2f×**",
				json_number_value(json_object_get(s, "p50_us")) / 1e3,
				json_number_value(json_object_get(s, "p90_us")) / 1e3,
				r->own[k].p50 / 1e3 / json_number_value(json_object_get(s, "p50_us")));
		else
			fputs(" (the SDK has no such call)", o);
		all = all && cloud_own_ok(r, k);
	}
	fprintf(o, "; the gateway's CPU time %.2f ms per call (user + system, over all of them) | ≤ %.1f× the SDK's each (p50; a call the SDK has not: ≤ %.0f ms) | %s |\n",
		r->cpu_ms, CL_OWN_SDK_RATIO, CL_OWN_MAX_NS / 1e6, r->sdk ? verdict(all) : "n/a");
}

/* C3 and C3s: sandgate's own share of a call. */
static void report_cloud_own(FILE *o, const struct cl_result *r)
{
	bool all = true;

	if (r->own_vs_sdk) {
		report_cloud_own_ratio(o, r);
		return;
	}
	fputs("| C3 | sandgate's own share of a call: its wall time less the fake's serving time of its requests, p50 (p90) | ", o);
	for (int k = CK_WRITE; k < CK_TARGETS; k++) {
		fprintf(o, "%s%s %.2f (%.2f) ms", k == CK_WRITE ? "" : ", ", ck_names[k],
			r->own[k].p50 / 1e6, r->own[k].p90 / 1e6);
		all = all && cloud_own_ok(r, k);
	}
	fprintf(o, "; the gateway's CPU time %.2f ms per call (user + system, over all of them) | ≤ %.0f ms each (p50) | %s |\n",
		r->cpu_ms, CL_OWN_MAX_NS / 1e6, verdict(all));
	if (!r->sdk)
		return;
	/* The official client measured the same way (per call), for scale. */
	fputs("| C3s | the same beside the SDK's, measured the same way in this run, p50 (p90) | ", o);
	for (int k = CK_WRITE; k < CK_TARGETS; k++) {
		const json_t *s = sdk_own(r, k);

		fprintf(o, "%s%s %.2f (%.2f)", k == CK_WRITE ? "" : ", ", ck_names[k],
			r->own[k].p50 / 1e6, r->own[k].p90 / 1e6);
		if (s)
			fprintf(o, " vs %.2f (%.2f) ms",
				json_number_value(json_object_get(s, "p50_us")) / 1e3,
				json_number_value(json_object_get(s, "p90_us")) / 1e3);
		else
			fputs(" ms (the SDK has no such call)", o);
	}
	fputs(" | none | info |\n", o);
}

/*
 * C4: tasks per bash call.  The pid step counts the command too, and
 * what the login shell and the provider start for it: the SDK's exec of
 * the same `bash -l -c` command line shows that; sandgate's share is
 * beyond it.
 */
static void report_cloud_tasks(FILE *o, const struct cl_result *r)
{
	double s_exec = sdk_at(r->sdk, "pid", "tasks_per_exec");
	long base = s_exec > 0 ? (long)s_exec : 1;

	if (!r->pid_ok) {
		fprintf(o, "| C4 | tasks started in the sandbox per bash call | pid steps %ld–%ld: the sandbox has no pid namespace of its own (run the fake in bwrap mode) | ≤ 1 beyond the command | n/a |\n",
			r->pid_run_min, r->pid_run_max);
		return;
	}
	fprintf(o, "| C4 | tasks started in the sandbox per bash call (pid steps in its pid namespace, %ld calls; the command itself counts 1)%s | %ld", r->pid_calls, s_exec > 0 ? " vs the SDK's exec of `bash -l -c` and the same command (the login shell the host's worker runs: both sides pay for it)" : "", r->pid_run_min);
	if (r->pid_run_max != r->pid_run_min)
		fprintf(o, "–%ld", r->pid_run_max);
	if (s_exec > 0)
		fprintf(o, " vs %.3g: **%ld beyond the provider's own**", s_exec, r->pid_run_max - base);
	else
		fprintf(o, ": **%ld beyond the command**", r->pid_run_max - base);
	fprintf(o, "; per write_file %.2g, read_file %.2g, list_files %.2g | ≤ 1 beyond the command | %s |\n",
		r->pid_per[CK_WRITE], r->pid_per[CK_READ], r->pid_per[CK_STAT],
		verdict(r->pid_run_max - base <= 1));
}

void report_cloud_markdown(FILE *o, const struct cl_result *r)
{
	double s_rss = r->sdk ? (double)json_integer_value(json_object_get(r->sdk, "max_rss_kib")) : 0;
	double s_ready = sdk_at(r->sdk, "ready", "ms");

	report_cloud_mix(o, r);
	report_cloud_requests(o, r);
	report_cloud_own(o, r);
	report_cloud_tasks(o, r);
	if (s_rss > 0)
		fprintf(o, "| C5 | peak RSS: the gateway's VmHWM vs the SDK's Node process (`maxRSS`) | %.1f MiB vs %.1f MiB: **%.2f×** | ≤ 0.25× | %s |\n",
			r->hwm_kib / 1024.0, s_rss / 1024.0, (double)r->hwm_kib / s_rss,
			verdict((double)r->hwm_kib <= 0.25 * s_rss));
	else
		fprintf(o, "| C5 | peak RSS: the gateway's VmHWM | %.1f MiB; the SDK was not run | ≤ 0.25× the SDK's | n/a |\n",
			r->hwm_kib / 1024.0);
	if (s_ready > 0)
		fprintf(o, "| C6 | time to ready: initialize vs the SDK's create until its first exec has started, + one round trip (the fake's p50 serving of a list_files request) | %.0f ms vs %.0f + %.0f ms: **%+.0f ms** | ≤ the SDK's + 1 round trip%s | %s |\n",
			r->init_ms, s_ready, r->rt_ms, r->init_ms - s_ready, cloud_rtt_only(r),
			r->delay_ms == 0 ? "info" : verdict(r->init_ms <= s_ready + r->rt_ms));
	else
		fprintf(o, "| C6 | time to ready: initialize | %.0f ms; the SDK was not run | ≤ the SDK's + 1 round trip | n/a |\n",
			r->init_ms);
}

void report_cloud_details(FILE *o, const struct cl_result *r, long idle_hwm_kib)
{
	char text[512];
	const char *key;
	json_t *op;

	for (int k = 0; k < CK_OTHER; k++) {
		if (k == CK_INIT || !r->wall[k].n)
			continue;
		fprintf(o, "sandgate %-13s p50 %7.2f ms  p90 %7.2f ms  max %7.2f ms; own share p50 %5.2f ms, p90 %5.2f ms, max %6.2f ms\n",
			ck_names[k], r->wall[k].p50 / 1e6, r->wall[k].p90 / 1e6,
			r->wall[k].max / 1e6, r->own[k].p50 / 1e6, r->own[k].p90 / 1e6,
			r->own[k].max / 1e6);
	}
	fputs("sandgate mixed runs:", o);
	for (int i = 0; i < r->mix_runs; i++)
		fprintf(o, " %.0f", r->mix_ns[i] / 1e6);
	fputs(" ms\n", o);
	if (r->sdk) {
		json_t *runs = json_object_get(json_object_get(r->sdk, "mix"), "runs_ms");
		size_t i;
		json_t *x;

		fputs("SDK mixed runs:", o);
		json_array_foreach(runs, i, x)
			fprintf(o, " %.0f", json_number_value(x));
		fputs(" ms\n", o);
		json_object_foreach(json_object_get(r->sdk, "ops"), key, op)
			fprintf(o, "SDK      %-13s p50 %7.2f ms  p90 %7.2f ms  requests per call %.3g (%s)\n",
				key, json_number_value(json_object_get(op, "p50_us")) / 1e3,
				json_number_value(json_object_get(op, "p90_us")) / 1e3,
				json_number_value(json_object_get(op, "requests_per_call")),
				json_string_value(json_object_get(op, "routes_text")) ?
					json_string_value(json_object_get(op, "routes_text")) :
					"");
		fprintf(o, "SDK %s %s on Node %s: maxRSS %.1f MiB (RSS %.1f MiB before the SDK was loaded); create %.0f ms, ready %.0f ms (%s); tasks per exec %.3g\n",
			json_string_value(json_object_get(r->sdk, "sdk")),
			json_string_value(json_object_get(r->sdk, "sdk_version")),
			json_string_value(json_object_get(r->sdk, "node")),
			json_integer_value(json_object_get(r->sdk, "max_rss_kib")) / 1024.0,
			json_integer_value(json_object_get(r->sdk, "rss_start_kib")) / 1024.0,
			sdk_at(r->sdk, "ready", "create_ms"), sdk_at(r->sdk, "ready", "ms"),
			json_string_value(json_object_get(json_object_get(r->sdk, "ready"), "routes_text")) ?
				json_string_value(json_object_get(json_object_get(r->sdk, "ready"), "routes_text")) :
				"?",
			sdk_at(r->sdk, "pid", "tasks_per_exec"));
		if (json_is_string(json_object_get(r->sdk, "list_files_via")))
			fprintf(o, "SDK list_files: %s\n",
				json_string_value(json_object_get(r->sdk, "list_files_via")));
	}
	dtn_count_text(&r->cnt[CK_INIT], true, text, sizeof(text));
	fprintf(o, "gateway: VmHWM %.1f MiB after initialize, %.1f MiB at the end (VmRSS %.1f MiB); initialize %.0f ms in %s requests (%s); one round trip %.1f ms\n",
		idle_hwm_kib / 1024.0, r->hwm_kib / 1024.0, r->rss_kib / 1024.0, r->init_ms, text,
		r->init_reqs[0] ? r->init_reqs : "none logged", r->rt_ms);
	fprintf(o, "tasks per bash call (the command included) %ld to %ld; the log's clock pinned within %.1f ms; calls with requests side by side: %ld; requests outside any call: %ld (%s)\n",
		r->pid_run_min, r->pid_run_max, r->clock_err_us / 1e3, r->overlapped,
		r->background, r->background ? r->bg_routes : "none");
}

/* The SDK's time to first result (ttfr in --sdk-json), or NULL. */
static const json_t *sdk_ttfr(const json_t *sdk)
{
	const json_t *t = json_object_get(sdk, "ttfr");

	return json_is_number(json_object_get(t, "median_ms")) ? t : NULL;
}

/* "5 fresh sessions each", or "5 and 3 fresh sessions" when the sides differ. */
static void ttfr_runs_text(const struct ttfr_result *r, const json_t *s, char *out, size_t n)
{
	json_int_t sn = json_integer_value(json_object_get(s, "n"));

	if (!s || sn == r->n)
		snprintf(out, n, "%d fresh sessions%s", r->n, s ? " each" : "");
	else
		snprintf(out, n, "%d and %" JSON_INTEGER_FORMAT " fresh sessions", r->n, sn);
}

/*
 * D7 or C7 (row): time to the first tool result against the SDK's; the
 * target is set for a real round trip, so without the fake's delay the
 * row is information.
 */
void report_ttfr_markdown(FILE *o, const struct ttfr_result *r, const json_t *sdk,
			  const char *row)
{
	const json_t *s = sdk_ttfr(sdk);
	double mine = r->med_ns / 1e6, theirs = json_number_value(json_object_get(s, "median_ms"));
	char runs[64];

	ttfr_runs_text(r, s, runs, sizeof(runs));
	fprintf(o, "| %s | time to first result: initialize + the first bash \"true\", from the gateway's spawn, vs the SDK's create() + its first exec of `bash -l -c true` to completion, on a new client as a new process has; median of %s, each a new sandbox | ",
		row, runs);
	if (!s) {
		fprintf(o, "%.0f ms (initialize %.0f ms); the SDK was not run | sandgate ahead of the SDK | n/a |\n",
			mine, r->init_med_ns / 1e6);
		return;
	}
	fprintf(o, "%.0f ms (initialize %.0f) vs %.0f ms (create %.0f): **%+.0f ms**; the SDK on a client already used: %.0f ms | sandgate ahead of the SDK%s | %s |\n",
		mine, r->init_med_ns / 1e6, theirs,
		json_number_value(json_object_get(s, "create_median_ms")), mine - theirs,
		json_number_value(json_object_get(json_object_get(s, "warm"), "median_ms")),
		r->delay_ms == 0 ? " with a real round trip (the delayed block)" : "",
		r->delay_ms == 0 ? "info" : verdict(mine < theirs));
}

/* " 469 475 ms (create 219 217 ms)": one side's sessions (runs_ms, create_ms). */
static void ttfr_sdk_runs(FILE *o, const json_t *side)
{
	size_t i;
	json_t *x;

	json_array_foreach(json_object_get(side, "runs_ms"), i, x)
		fprintf(o, " %.0f", json_number_value(x));
	fputs(" ms (create", o);
	json_array_foreach(json_object_get(side, "create_ms"), i, x)
		fprintf(o, " %.0f", json_number_value(x));
	fputs(" ms)", o);
}

/* Each session's times, both sides, in the order they ran. */
void report_ttfr_details(FILE *o, const struct ttfr_result *r, const json_t *sdk)
{
	const json_t *s = sdk_ttfr(sdk);

	fputs("time to first result, sandgate:", o);
	for (int k = 0; k < r->n; k++)
		fprintf(o, " %.0f", r->first_ns[k] / 1e6);
	fputs(" ms (initialize", o);
	for (int k = 0; k < r->n; k++)
		fprintf(o, " %.0f", r->init_ns[k] / 1e6);
	fputs(" ms)", o);
	if (s) {
		fputs("; SDK on a new client:", o);
		ttfr_sdk_runs(o, s);
		fputs("; on a client already used:", o);
		ttfr_sdk_runs(o, json_object_get(s, "warm"));
	}
	fputc('\n', o);
}
