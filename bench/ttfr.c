/*
 * ttfr.c - time to the first tool result (issue 39): what a user waits for
 * between starting a session and its first answer.  Each session is a new
 * `sandgate serve` on the run's profile and state directory, as a host
 * starts one per agent session, so each provisions a sandbox of its own
 * (the one before removed its workspace when it stopped).  sgbench.h says
 * what is timed; the SDK's side is bench/cloud-sdk-bench.mjs's and
 * bench/daytona-sdk-bench.mjs's `ttfr`.
 */
#include "bench/sgbench.h"

/*
 * Session i: spawn, initialize, bash "true", stop.  The clock starts right
 * after the spawn, as the main session's initialize does, and stops at the
 * bash reply; the request is built before it starts.
 */
static void ttfr_session(const struct opts *o, const char *sandgate, const char *state,
			 int i, struct ttfr_result *r)
{
	char *data = execute_data("bash", json_pack("{s:s}", "command", "true"));
	char log[32];
	struct gw g;
	int64_t t0;
	int status;

	snprintf(log, sizeof(log), "ttfr-%d.log", i + 1);
	gw_start(&g, o, sandgate, state, log, environ);
	t0 = now_ns();
	json_decref(gw_initialize(&g));
	r->init_ns[i] = now_ns() - t0;
	gateway_cmd(&g, data);
	r->first_ns[i] = now_ns() - t0;
	status = gw_stop(&g);
	if (status != 0)
		die("time to first result: session %d's gateway exited with status %d (%s)",
		    i + 1, status, log);
	free(data);
}

/* The median (nearest rank, as the SDK scripts take it) of n values. */
static int64_t ttfr_median(const int64_t *v, int n)
{
	int64_t s[TTFR_RUNS_MAX];

	memcpy(s, v, (size_t)n * sizeof(*v));
	return dist_of(s, (size_t)n).p50;
}

void bench_ttfr(const struct opts *o, const char *sandgate, const char *state,
		struct ttfr_result *r)
{
	fprintf(stderr, "sgbench: time to first result: %ld fresh sessions\n", o->ttfr_n);
	r->n = (int)o->ttfr_n;
	r->delay_ms = o->fake_delay_ms;
	for (int i = 0; i < r->n; i++)
		ttfr_session(o, sandgate, state, i, r);
	r->med_ns = ttfr_median(r->first_ns, r->n);
	r->init_med_ns = ttfr_median(r->init_ns, r->n);
	/* Every session, in order: the spread a median hides, under a machine's load. */
	fprintf(stderr, "sgbench: time to first result, each session (initialize):");
	for (int i = 0; i < r->n; i++)
		fprintf(stderr, " %.0f (%.0f)", (double)r->first_ns[i] / 1e6,
			(double)r->init_ns[i] / 1e6);
	fprintf(stderr, " ms\n");
}
