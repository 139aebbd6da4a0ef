/* budget.c - what a shutdown costs (budget.h). */
#define _GNU_SOURCE /* asprintf */
#include "gateway/budget.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "base/limits.h"
#include "base/log.h"

static const char *const op_names[SG_BUDGET_NOPS] = { "stop", "remove", "keep" };
static const char *const op_words[SG_BUDGET_NOPS] = { "stop processes", "delete", "keep" };

/*
 * What each operation costs before it was ever measured: generous, since
 * a plan that is too short leaves resources behind while one that is too
 * long only asks for a longer budget.  Stopping processes is their 2 s
 * grace plus a call or two; a local removal waits up to 3 s for its
 * cgroups; a cloud delete or stop waits for the provider's state change,
 * a Modal keep takes a snapshot, a Docker stop gives the container 2 s
 * before its SIGKILL.  Any other backend (a new adapter, a
 * delegated peer) falls to the last row until it is measured.
 */
static const struct costs {
	const char *backend;
	bool cloud; /* the host's own default budget for its entry is 90 s */
	int64_t ms[SG_BUDGET_NOPS];
} costs[] = {
	{ "local", false, { 3000, 4000, 4000 } },
	{ "ssh", false, { 4000, 6000, 4000 } },
	{ "singularity", false, { 3000, 15000, 15000 } },
	{ "daytona", true, { 4000, 30000, 30000 } },
	{ "vercel", true, { 4000, 30000, 30000 } },
	{ "modal", true, { 4000, 30000, 60000 } },
	{ "docker", false, { 3000, 10000, 10000 } },
	{ NULL, false, { 5000, 60000, 60000 } },
};

static const struct costs *costs_of(const char *backend)
{
	const struct costs *c = costs;

	while (c->backend && (!backend || strcmp(c->backend, backend) != 0))
		c++;
	return c;
}

const char *sg_budget_op_name(enum sg_budget_op op)
{
	return op < SG_BUDGET_NOPS ? op_names[op] : "none";
}

const char *sg_budget_op_words(enum sg_budget_op op)
{
	return op < SG_BUDGET_NOPS ? op_words[op] : "nothing";
}

void sg_budget_sample(struct sg_budget_stat *st, int64_t ms)
{
	double x = ms < 0 ? 0 : (double)ms;
	double off;

	if (st->samples <= 0) {
		st->mean_ms = x;
		st->dev_ms = x / 2;
		st->samples = 1;
		return;
	}
	/* RFC 6298: the deviation first, against the old mean. */
	off = st->mean_ms > x ? st->mean_ms - x : x - st->mean_ms;
	st->dev_ms = 0.75 * st->dev_ms + 0.25 * off;
	st->mean_ms = 0.875 * st->mean_ms + 0.125 * x;
	st->samples++;
}

int64_t sg_budget_estimate(const char *backend, enum sg_budget_op op,
			   const struct sg_budget_stat *st)
{
	double ms;

	if (op >= SG_BUDGET_NOPS)
		return 0;
	if (!st || st->samples <= 0)
		return costs_of(backend)->ms[op];
	ms = st->mean_ms + 4 * st->dev_ms;
	if (ms < 1)
		return 1;
	if (ms > (double)INT32_MAX)
		return INT32_MAX;
	/* Rounded up: a plan never undercounts by the fraction. */
	return (int64_t)ms + ((double)(int64_t)ms < ms);
}

/* The record of op in stats ({"stop": {...}, ...}), or an empty one. */
static struct sg_budget_stat stat_of(json_t *stats, enum sg_budget_op op)
{
	json_t *o = json_object_get(stats, sg_budget_op_name(op));
	struct sg_budget_stat st = { 0 };

	if (json_is_object(o) && json_integer_value(json_object_get(o, "samples")) > 0) {
		st.mean_ms = json_number_value(json_object_get(o, "mean_ms"));
		st.dev_ms = json_number_value(json_object_get(o, "dev_ms"));
		st.samples = json_integer_value(json_object_get(o, "samples"));
	}
	return st;
}

static struct sg_budget_step step_of(const char *backend, json_t *stats, enum sg_budget_op op)
{
	struct sg_budget_stat st = stat_of(stats, op);

	return (struct sg_budget_step){ op, sg_budget_estimate(backend, op, &st), st.samples };
}

void sg_budget_plan(const char *backend, const enum sg_fate *fate, json_t *stats,
		    struct sg_budget_plan *out)
{
	struct sg_budget_step remove = step_of(backend, stats, SG_BUDGET_REMOVE);
	struct sg_budget_step keep = step_of(backend, stats, SG_BUDGET_KEEP);

	out->stop = step_of(backend, stats, SG_BUDGET_STOP);
	if (!fate)
		out->env = remove.ms >= keep.ms ? remove : keep;
	else if (*fate == SG_FATE_REMOVE)
		out->env = remove;
	else if (*fate == SG_FATE_KEEP)
		out->env = keep;
	else
		out->env = (struct sg_budget_step){ SG_BUDGET_NOPS, 0, 0 };
	out->slack_ms = SG_BUDGET_SLACK_MS;
	out->total_ms = out->stop.ms + out->env.ms + out->slack_ms;
}

bool sg_budget_split(const struct sg_budget_plan *plan, int64_t budget_ms,
		     int64_t *optional_ms)
{
	int64_t left = budget_ms - plan->stop.ms - plan->env.ms;

	*optional_ms = left > 0 ? left : 0;
	return budget_ms >= plan->total_ms;
}

int64_t sg_budget_chain_need(int64_t inner_ms)
{
	return inner_ms + SG_BUDGET_CANCEL_DRAIN_MS;
}

/* ---- the records in the state directory ---- */

static char *state_file(const char *state_dir, const char *name)
{
	char *p = NULL;

	return state_dir && asprintf(&p, "%s/%s", state_dir, name) >= 0 ? p : NULL;
}

/* The whole file, or NULL. */
static json_t *load_all(const char *path)
{
	json_t *j = path ? json_load_file(path, 0, NULL) : NULL;

	if (j && !json_is_object(j)) {
		json_decref(j);
		j = NULL;
	}
	return j;
}

json_t *sg_budget_load(const char *state_dir, const char *backend)
{
	char *path = state_file(state_dir, "budget.json");
	json_t *all = load_all(path);
	json_t *mine = json_object_get(json_object_get(all, "backends"), backend ? backend : "");
	json_t *out = json_is_object(mine) ? json_deep_copy(mine) : NULL;

	json_decref(all);
	free(path);
	return out;
}

void sg_budget_record(const char *state_dir, const char *backend, enum sg_budget_op op,
		      int64_t ms)
{
	char *path = state_file(state_dir, "budget.json");
	char *lock_path = state_file(state_dir, "budget.lock"), *tmp = NULL;
	json_t *all = NULL, *backends, *mine;
	struct sg_budget_stat st;
	int lock = -1;

	if (!path || !lock_path || !backend || op >= SG_BUDGET_NOPS)
		goto out;
	lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lock < 0 || flock(lock, LOCK_EX) != 0)
		goto fail;
	all = load_all(path);
	if (!all)
		all = json_pack("{s:i, s:{}}", "version", 1, "backends");
	backends = json_object_get(all, "backends");
	if (!json_is_object(backends)) {
		backends = json_object();
		json_object_set_new(all, "backends", backends);
	}
	mine = json_object_get(backends, backend);
	if (!json_is_object(mine)) {
		mine = json_object();
		json_object_set_new(backends, backend, mine);
	}
	st = stat_of(mine, op);
	sg_budget_sample(&st, ms);
	json_object_set_new(mine, sg_budget_op_name(op),
			    json_pack("{s:f, s:f, s:I, s:I}", "mean_ms", st.mean_ms, "dev_ms",
				      st.dev_ms, "samples", (json_int_t)st.samples, "last_ms",
				      (json_int_t)ms));
	/* Readers see the old file or the new one, never half of one. */
	if (asprintf(&tmp, "%s.tmp.%ld", path, (long)getpid()) < 0) {
		tmp = NULL;
		goto fail;
	}
	if (json_dump_file(all, tmp, JSON_INDENT(1) | JSON_SORT_KEYS) != 0 ||
	    rename(tmp, path) != 0) {
		unlink(tmp);
		goto fail;
	}
	goto out;
fail:
	sg_log_warn("the measured %s time of %s could not be kept in %s: %s",
		    sg_budget_op_name(op), backend, path ? path : "?", strerror(errno));
out:
	if (lock >= 0)
		close(lock);
	json_decref(all);
	free(tmp);
	free(lock_path);
	free(path);
}

/* ---- the report for config check and probe ---- */

static json_t *step_json(const char *name, const struct sg_budget_step *s)
{
	return json_pack("{s:s, s:I, s:b, s:I}", "step", name, "ms", (json_int_t)s->ms,
			 "measured", s->samples > 0, "samples", (json_int_t)s->samples);
}

static void add_budget(json_t *report, const char *role, int64_t ms, const char *from,
		       int64_t needs)
{
	json_array_append_new(json_object_get(report, "budgets"),
			      json_pack("{s:s, s:I, s:s, s:I, s:b}", "role", role, "ms",
					(json_int_t)ms, "from", from, "needs_ms",
					(json_int_t)needs, "enough", ms >= needs));
}

static void warn(json_t *report, const char *fmt, ...) SG_PRINTF(2, 3);
static void warn(json_t *report, const char *fmt, ...)
{
	char text[SG_ERR_MSG * 2];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	json_array_append_new(json_object_get(report, "warnings"), json_string(text));
}

json_t *sg_budget_report(const struct sg_profile *p, const char *state_dir)
{
	json_t *stats, *report, *graceval;
	struct sg_budget_plan plan;
	int64_t own, peer, grace, host, need;

	/* A command profile's chain is checked whole by sg_profile_check (check.c). */
	if (strcmp(p->backend, "select") == 0 || strcmp(p->backend, "command") == 0)
		return NULL;
	stats = sg_budget_load(state_dir, p->backend);
	sg_budget_plan(p->backend, NULL, stats, &plan);
	json_decref(stats);
	report = json_pack("{s:I, s:[o, o, {s:s, s:I}], s:[], s:[]}", "needs_ms",
			   (json_int_t)plan.total_ms, "steps",
			   step_json(sg_budget_op_words(SG_BUDGET_STOP), &plan.stop),
			   step_json(sg_budget_op_words(plan.env.op), &plan.env), "step",
			   "slack", "ms", (json_int_t)plan.slack_ms, "budgets", "warnings");
	if (!report)
		return NULL;

	/* sandgate as the host's command backend: its own budget, which the
	 * host's (60 s by default) must cover. */
	own = p->shutdown_timeout_ms > 0 ? p->shutdown_timeout_ms : SG_SHUTDOWN_BUDGET_MS;
	add_budget(report, "command backend", own,
		   p->shutdown_timeout_ms > 0 ? "shutdown_timeout_ms" : "the default", plan.total_ms);
	if (own < plan.total_ms)
		warn(report,
		     "as a command backend the shutdown budget is %lld ms (%s), shorter than the %lld ms its cleanup needs: set shutdown_timeout_ms to at least %lld",
		     (long long)own, p->shutdown_timeout_ms > 0 ? "shutdown_timeout_ms" : "the default",
		     (long long)plan.total_ms, (long long)plan.total_ms);
	else if (own > SG_HOST_COMMAND_MS)
		warn(report,
		     "the host gives a command backend %lld ms by default, shorter than this profile's %lld ms budget: set the host entry's shutdown_timeout_ms to at least %lld",
		     (long long)SG_HOST_COMMAND_MS, (long long)own, (long long)own);

	/* sandgate as a delegated peer: killed when the outer's grace ends,
	 * whatever its own budget says. */
	graceval = json_object_get(p->raw, "shutdown_grace_ms");
	grace = json_integer_value(graceval) > 0 ? json_integer_value(graceval) : SG_OUTER_GRACE_MS;
	peer = p->shutdown_timeout_ms > 0 ? p->shutdown_timeout_ms : SG_PEER_SHUTDOWN_MS;
	add_budget(report, "delegated peer", peer < grace ? peer : grace,
		   peer < grace ? (p->shutdown_timeout_ms > 0 ? "shutdown_timeout_ms"
							     : "the peer's default")
				: (json_integer_value(graceval) > 0 ? "shutdown_grace_ms"
								    : "the outer's default grace"),
		   plan.total_ms);
	if (grace < plan.total_ms)
		warn(report,
		     "as a delegated peer the outer's grace is %lld ms (%s), shorter than the %lld ms its cleanup needs: set shutdown_grace_ms to at least %lld",
		     (long long)grace,
		     json_integer_value(graceval) > 0 ? "shutdown_grace_ms" : "the default",
		     (long long)plan.total_ms, (long long)plan.total_ms);
	if (peer < plan.total_ms)
		warn(report,
		     "as a delegated peer the shutdown budget is %lld ms (%s), shorter than the %lld ms its cleanup needs: set shutdown_timeout_ms to at least %lld",
		     (long long)peer,
		     p->shutdown_timeout_ms > 0 ? "shutdown_timeout_ms" : "the default with --peer",
		     (long long)plan.total_ms, (long long)plan.total_ms);
	if (peer > grace)
		warn(report,
		     "as a delegated peer the shutdown budget (%lld ms) is longer than the outer's grace (%lld ms): the outer kills sandgate before it is done; keep shutdown_timeout_ms at most shutdown_grace_ms",
		     (long long)peer, (long long)grace);

	/* The host over the outer adapter: the grace and the cancel drain. */
	host = costs_of(p->backend)->cloud ? SG_HOST_CLOUD_MS : SG_HOST_COMMAND_MS;
	need = sg_budget_chain_need(grace);
	add_budget(report, "host (over the outer adapter)", host,
		   costs_of(p->backend)->cloud ? "the host's default for a cloud backend"
					       : "the host's default for a command backend",
		   need);
	if (host < need)
		warn(report,
		     "the host's default budget for the outer adapter's entry is %lld ms, shorter than the outer's grace plus the %d ms cancel drain (%lld ms): set that entry's shutdown_timeout_ms to at least %lld",
		     (long long)host, SG_BUDGET_CANCEL_DRAIN_MS, (long long)need, (long long)need);
	return report;
}
