/*
 * report.c - the Markdown table and the details below it: the local
 * and ssh sets' rows here, the daytona and cloud sets' in report-cloud.c.
 */
#include "bench/sgbench.h"

double mbps(size_t bytes, double s)
{
	return s > 0 ? (double)bytes / s / 1e6 : 0;
}

const char *verdict(bool ok)
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
	double rt = (double)d[SSH_GW_TRUE].p50 / (double)d[SSH_RAW_LOGIN].p50;
	double rr = (double)d[SSH_GW_READ].p50 / (double)d[SSH_RAW_CAT].p50;
	bool all = true;
	char steps[256];

	/* The host's bash tool runs a login shell: the raw reference runs the same. */
	fprintf(o, "| S1 | bash \"true\" (was run_command; the host's bash tool runs `bash -l -c`) vs raw `ssh -S <socket> host env HOME=<empty dir> bash -l -c true` (the gateway's commands get an empty home too), %zu runs each | p50 %.2f ms vs %.2f ms: **%.2f×** (p90 %.2f vs %.2f ms); raw `ssh -S <socket> host true` p50 %.2f ms, for information | ≤ 1.3× | %s |\n",
		d[SSH_GW_TRUE].n, d[SSH_GW_TRUE].p50 / 1e6, d[SSH_RAW_LOGIN].p50 / 1e6, rt,
		d[SSH_GW_TRUE].p90 / 1e6, d[SSH_RAW_LOGIN].p90 / 1e6, d[SSH_RAW_TRUE].p50 / 1e6,
		verdict(rt <= 1.3));
	fprintf(o, "| S2 | read_file of 1 MiB vs raw `ssh -S <socket> host cat FILE`, %zu runs each | p50 %.2f ms vs %.2f ms: **%.2f×** (p90 %.2f vs %.2f ms) | ≤ 1.3× | %s |\n",
		d[SSH_GW_READ].n, d[SSH_GW_READ].p50 / 1e6, d[SSH_RAW_CAT].p50 / 1e6, rr,
		d[SSH_GW_READ].p90 / 1e6, d[SSH_RAW_CAT].p90 / 1e6, verdict(rr <= 1.3));
	if (s->export) {
		const struct export_run *m = &s->ex.med, *ma = &s->ex.med_ahead;

		fprintf(o, "| S3 | export of %zu MiB made on the host: present_artifact + export/read of the gateway's chunks, each base64-decoded and hashed + close; sha256 checked; median of %d | **%.0f MB/s** end to end (%.2f s: present_artifact %.2f s, reads %.2f s, client %.2f s); one read ahead %.0f MB/s; raw `ssh -S` cat of the file %.0f MB/s | none set | info |\n",
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
void report_markdown(FILE *o, const struct results *r)
{
	fputs("| # | measurement | result | target | verdict |\n", o);
	fputs("|---|---|---|---|---|\n", o);
	if (r->stat) {
		const struct dist *d = &r->st.d;

		/* The target is the local backend's; elsewhere the number is information. */
		fprintf(o, "| 1 | execute(list_files \".\") round trip (was stat_path), %zu calls | p50 %.0f µs, p90 %.0f µs, p99 %.0f µs (min %.0f, max %.0f) | %s | %s |\n",
			d->n, d->p50 / 1e3, d->p90 / 1e3, d->p99 / 1e3, d->min / 1e3,
			d->max / 1e3, r->local ? "p50 ≤ 200 µs" : "none (local backend only)",
			r->local ? verdict(d->p50 <= 200000) : "info");
	}
	if (r->cmd) {
		const struct dist *d = r->cmd_r.d;
		double ra = (double)d[CMD_GW].p50 / (double)d[CMD_DIRECT].p50;

		/*
		 * The 1.3x target was set against the same confined command
		 * line, which cannot be replayed any more: information only.
		 */
		fprintf(o, "| 2 | bash \"true\" (was run_command) vs a plain exec of `bash -l -c true`, %zu runs each | p50 %.2f ms vs %.2f ms: **%.2f×** (p90 %.2f vs %.2f ms) | ≤ 1.3× against the same confined command line, which cannot be replayed: none | info |\n",
			d[CMD_GW].n, d[CMD_GW].p50 / 1e6, d[CMD_DIRECT].p50 / 1e6, ra,
			d[CMD_GW].p90 / 1e6, d[CMD_DIRECT].p90 / 1e6);
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

		fprintf(o, "| 4a | export of %zu MiB: present_artifact (was export/open) + export/read of the gateway's 256 KiB chunks, one at a time, each base64-decoded and hashed + close; sha256 checked; median of %d | **%.0f MB/s** end to end (%.2f s: present_artifact %.2f s, reads %.2f s, client decode+hash %.2f s); gateway share alone %.0f MB/s | ≥ 200 MB/s | %s |\n",
			r->ex.bytes / MiB, r->ex.runs, t, m->total_s, m->open_s, m->read_s,
			m->client_s, mbps(r->ex.bytes, m->total_s - m->client_s),
			verdict(t >= 200));
		fprintf(o, "| 4b | the same with one read ahead (the next read sent before decoding), median of %d | **%.0f MB/s** end to end (%.2f s: present_artifact %.2f s) | ≥ 200 MB/s | %s |\n",
			r->ex.runs, mbps(r->ex.bytes, ma->total_s), ma->total_s, ma->open_s,
			verdict(mbps(r->ex.bytes, ma->total_s) >= 200));
	}
	if (r->local)
		fprintf(o, "| 5a | gateway RSS idle after initialize | VmRSS %.1f MiB (VmHWM %.1f MiB) | ≤ 16 MiB | %s |\n",
			r->idle_rss_kib / 1024.0, r->idle_hwm_kib / 1024.0,
			verdict(r->idle_rss_kib <= 16 * 1024));
	if (r->ssh)
		report_ssh_markdown(o, &r->sh);
	if (r->dtn)
		report_dtn_markdown(o, &r->dt);
	if (r->cloud)
		report_cloud_markdown(o, &r->cl);
	if (r->ttfr)
		report_ttfr_markdown(o, &r->tf, r->dtn ? r->dt.sdk : r->cl.sdk, r->dtn ? "D7" : "C7");
	if (r->export)
		fprintf(o, "| 5b | gateway RSS during the export | max VmRSS %.1f MiB over %ld samples (VmHWM after: %.1f MiB) | ≤ 64 MiB | %s |\n",
			r->ex.rss_max_kib / 1024.0, r->ex.rss_samples,
			r->ex.hwm_after_kib / 1024.0,
			verdict(r->ex.rss_max_kib <= 64 * 1024 && r->ex.hwm_after_kib <= 64 * 1024));
}

void report_details(FILE *o, const struct results *r)
{
	if (r->stat)
		fprintf(o, "list_files: %zu calls in %.2f s (%.0f calls/s), mean %.0f µs\n",
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

		fprintf(o, "export run %d: %.2f s = %.0f MB/s (present_artifact %.3f s, reads %.3f s in %ld chunks, client %.3f s, close %.4f s); read ahead: %.2f s = %.0f MB/s (present_artifact %.3f s)\n",
			i + 1, x->total_s, mbps(r->ex.bytes, x->total_s), x->open_s,
			x->read_s, x->chunks, x->client_s, x->close_s, y->total_s,
			mbps(r->ex.bytes, y->total_s), y->open_s);
	}
	if (r->ssh) {
		const struct ssh_result *s = &r->sh;
		char steps[256];

		for (int k = 0; k < SSH_KINDS; k++) {
			const struct dist *d = &s->d[k];

			fprintf(o, "%-52s p50 %7.2f ms  p90 %7.2f ms  p99 %7.2f ms  min %6.2f ms\n",
				ssh_names[k], d->p50 / 1e6, d->p90 / 1e6, d->p99 / 1e6,
				d->min / 1e6);
		}
		fprintf(o, "raw command lines: %s, %s and %s\n", s->raw_login, s->raw_true,
			s->raw_cat);
		fprintf(o, "workspace view on the host: %s\n", s->view ? s->view : "?");
		for (int i = 0; s->export && i < s->ex.runs; i++) {
			const struct export_run *x = &s->ex.run[i], *y = &s->ex.ahead[i];

			fprintf(o, "ssh export run %d: %.2f s = %.0f MB/s (present_artifact %.3f s, reads %.3f s in %ld chunks, client %.3f s, close %.4f s); read ahead: %.2f s = %.0f MB/s (present_artifact %.3f s)\n",
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
	if (r->dtn)
		report_dtn_details(o, &r->dt, r->idle_hwm_kib);
	if (r->cloud)
		report_cloud_details(o, &r->cl, r->idle_hwm_kib);
	if (r->ttfr)
		report_ttfr_details(o, &r->tf, r->dtn ? r->dt.sdk : r->cl.sdk);
	fprintf(o, "process event lines seen: %ld; gateway exit status: %d\n", r->events,
		r->gateway_status);
}
