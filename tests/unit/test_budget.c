/*
 * test_budget.c - shutdown plans (gateway/budget.h): the smoothing of
 * measured times, the plan and its split, the records in a state
 * directory, and the report config check and probe print.
 */
#define _GNU_SOURCE /* asprintf */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/limits.h"
#include "config/config.h"
#include "gateway/budget.h"

static void test_sample_smoothing(void **state)
{
	struct sg_budget_stat st = { 0 };

	(void)state;
	/* The first sample: its own mean, half of it as deviation (RFC 6298). */
	sg_budget_sample(&st, 1000);
	assert_int_equal(st.samples, 1);
	assert_true(st.mean_ms == 1000 && st.dev_ms == 500);
	assert_int_equal(sg_budget_estimate("daytona", SG_BUDGET_REMOVE, &st), 3000);
	/* The same time again: the deviation shrinks, the mean stays. */
	sg_budget_sample(&st, 1000);
	assert_true(st.mean_ms == 1000 && st.dev_ms == 375);
	assert_int_equal(sg_budget_estimate("daytona", SG_BUDGET_REMOVE, &st), 2500);
	/* One slow run raises the estimate at once... */
	sg_budget_sample(&st, 9000);
	/* dev = 0.75 * 375 + 0.25 * 8000 = 2281.25; mean = 875 + 1125 = 2000 */
	assert_true(st.mean_ms == 2000 && st.dev_ms == 2281.25);
	assert_int_equal(sg_budget_estimate("daytona", SG_BUDGET_REMOVE, &st), 11125);
	/* ... and steady fast runs bring it down slowly. */
	for (int i = 0; i < 40; i++)
		sg_budget_sample(&st, 1000);
	assert_true(sg_budget_estimate("daytona", SG_BUDGET_REMOVE, &st) < 1100);
	assert_true(sg_budget_estimate("daytona", SG_BUDGET_REMOVE, &st) >= 1000);
	assert_int_equal(st.samples, 43);
}

static void test_estimate_rounds_up_and_defaults(void **state)
{
	struct sg_budget_stat st = { 0 };

	(void)state;
	/* Nothing measured: the backend's conservative default. */
	assert_int_equal(sg_budget_estimate("daytona", SG_BUDGET_REMOVE, &st), 30000);
	assert_int_equal(sg_budget_estimate("local", SG_BUDGET_STOP, NULL), 3000);
	assert_int_equal(sg_budget_estimate("modal", SG_BUDGET_KEEP, NULL), 60000);
	/* A backend without a row (a new adapter, a delegated peer). */
	assert_int_equal(sg_budget_estimate("command", SG_BUDGET_REMOVE, NULL), 60000);
	assert_int_equal(sg_budget_estimate("local", SG_BUDGET_NOPS, NULL), 0);
	/* A fraction counts as a whole millisecond; never below one. */
	st = (struct sg_budget_stat){ .mean_ms = 10.25, .dev_ms = 0, .samples = 3 };
	assert_int_equal(sg_budget_estimate("local", SG_BUDGET_REMOVE, &st), 11);
	st = (struct sg_budget_stat){ .mean_ms = 0, .dev_ms = 0, .samples = 3 };
	assert_int_equal(sg_budget_estimate("local", SG_BUDGET_REMOVE, &st), 1);
	sg_budget_sample(&st, -5); /* a clock step: counted as 0 */
	assert_true(st.mean_ms == 0);
}

static void test_plan_and_split(void **state)
{
	json_t *stats = json_pack("{s:{s:f, s:f, s:i}}", "remove", "mean_ms", 2000.0, "dev_ms",
				  250.0, "samples", 4);
	enum sg_fate remove = SG_FATE_REMOVE, keep = SG_FATE_KEEP, detach = SG_FATE_DETACH;
	struct sg_budget_plan plan;
	int64_t optional;

	(void)state;
	sg_budget_plan("daytona", &remove, stats, &plan);
	assert_int_equal(plan.stop.ms, 4000);
	assert_int_equal(plan.stop.samples, 0);
	assert_int_equal(plan.env.op, SG_BUDGET_REMOVE);
	assert_int_equal(plan.env.ms, 3000);
	assert_int_equal(plan.env.samples, 4);
	assert_int_equal(plan.total_ms, 4000 + 3000 + SG_BUDGET_SLACK_MS);
	/* Enough: the optional wait gets all but the must-do steps. */
	assert_true(sg_budget_split(&plan, 60000, &optional));
	assert_int_equal(optional, 60000 - 7000);
	assert_true(sg_budget_split(&plan, plan.total_ms, &optional));
	assert_int_equal(optional, SG_BUDGET_SLACK_MS);
	/* Short: said, and the optional wait gets what is left, or nothing. */
	assert_false(sg_budget_split(&plan, plan.total_ms - 1, &optional));
	assert_int_equal(optional, SG_BUDGET_SLACK_MS - 1);
	assert_false(sg_budget_split(&plan, 5000, &optional));
	assert_int_equal(optional, 0);

	/* Keeping a Daytona sandbox (a stop) is not measured yet. */
	sg_budget_plan("daytona", &keep, stats, &plan);
	assert_int_equal(plan.env.op, SG_BUDGET_KEEP);
	assert_int_equal(plan.env.ms, 30000);
	/* Detaching costs nothing but the processes. */
	sg_budget_plan("daytona", &detach, stats, &plan);
	assert_int_equal(plan.env.op, SG_BUDGET_NOPS);
	assert_int_equal(plan.total_ms, 4000 + SG_BUDGET_SLACK_MS);
	/* Fate unknown (config check): the costlier of remove and keep. */
	sg_budget_plan("daytona", NULL, stats, &plan);
	assert_int_equal(plan.env.op, SG_BUDGET_KEEP);
	assert_int_equal(plan.env.ms, 30000);
	json_decref(stats);
	sg_budget_plan("local", NULL, NULL, &plan);
	assert_int_equal(plan.total_ms, 3000 + 4000 + SG_BUDGET_SLACK_MS);

	/* Chains: each outer layer adds the 35 s cancel drain. */
	assert_int_equal(sg_budget_chain_need(90000), 125000);
	assert_int_equal(sg_budget_chain_need(sg_budget_chain_need(10000)), 80000);
}

static char *temp_dir(void)
{
	char *d = strdup("/tmp/sg-test-budget-XXXXXX");

	assert_non_null(d);
	assert_non_null(mkdtemp(d));
	return d;
}

static void remove_dir(char *d)
{
	char *p = NULL;

	assert_true(asprintf(&p, "%s/budget.json", d) > 0);
	unlink(p);
	free(p);
	assert_true(asprintf(&p, "%s/budget.lock", d) > 0);
	unlink(p);
	free(p);
	assert_int_equal(rmdir(d), 0);
	free(d);
}

static void test_records_in_the_state_dir(void **state)
{
	char *dir = temp_dir();
	struct sg_budget_plan plan;
	enum sg_fate remove = SG_FATE_REMOVE;
	json_t *stats;

	(void)state;
	/* Nothing yet: no file, no error, the defaults. */
	assert_null(sg_budget_load(dir, "daytona"));
	assert_null(sg_budget_load(NULL, "daytona"));
	sg_budget_record(dir, "daytona", SG_BUDGET_REMOVE, 1200);
	sg_budget_record(dir, "daytona", SG_BUDGET_REMOVE, 1200);
	sg_budget_record(dir, "local", SG_BUDGET_STOP, 40);
	stats = sg_budget_load(dir, "daytona");
	assert_non_null(stats);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(stats, "remove"),
							     "samples")), 2);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(stats, "remove"),
							     "last_ms")), 1200);
	assert_null(json_object_get(stats, "stop"));
	sg_budget_plan("daytona", &remove, stats, &plan);
	/* mean 1200, dev 450: 1200 + 1800 */
	assert_int_equal(plan.env.ms, 3000);
	assert_int_equal(plan.env.samples, 2);
	json_decref(stats);
	stats = sg_budget_load(dir, "local");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(stats, "stop"),
							     "samples")), 1);
	json_decref(stats);
	remove_dir(dir);
}

struct writer {
	const char *dir;
	const char *backend;
};

static void *write_many(void *arg)
{
	struct writer *w = arg;

	for (int i = 0; i < 25; i++)
		sg_budget_record(w->dir, w->backend, SG_BUDGET_REMOVE, 100);
	return NULL;
}

/* Gateways sharing a state directory lose none of each other's samples. */
static void test_concurrent_records(void **state)
{
	char *dir = temp_dir();
	struct writer w[4] = { { dir, "a" }, { dir, "a" }, { dir, "b" }, { dir, "b" } };
	pthread_t t[4];
	json_t *stats;

	(void)state;
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, write_many, &w[i]), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 2; i++) {
		stats = sg_budget_load(dir, i ? "b" : "a");
		assert_int_equal(json_integer_value(json_object_get(
					 json_object_get(stats, "remove"), "samples")), 50);
		json_decref(stats);
	}
	remove_dir(dir);
}

/* A profile from JSON text, through the config loader. */
static struct sg_profile *profile(const char *json, struct sg_config **cfg)
{
	struct sg_errinfo err = { 0 };
	struct sg_profile *p = NULL;
	char path[] = "/tmp/sg-test-budget-cfg-XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_true(write(fd, json, strlen(json)) == (ssize_t)strlen(json));
	close(fd);
	if (sg_config_load(path, cfg, &err) || sg_config_profile(*cfg, "p", NULL, &p, &err))
		fail_msg("%s", err.msg);
	unlink(path);
	return p;
}

/* The report of profile "p" of config text json (new), measured times
 * from state (or NULL). */
static json_t *report_for(const char *json, const char *state)
{
	struct sg_config *cfg = NULL;
	struct sg_profile *p = profile(json, &cfg);
	json_t *r = sg_budget_report(p, state);

	sg_profile_free(p);
	sg_config_free(cfg);
	return r;
}

static bool warned(json_t *report, const char *words)
{
	json_t *w;
	size_t i;

	json_array_foreach(json_object_get(report, "warnings"), i, w)
		if (strstr(json_string_value(w), words))
			return true;
	return false;
}

static json_t *role(json_t *report, const char *name)
{
	json_t *b;
	size_t i;

	json_array_foreach(json_object_get(report, "budgets"), i, b)
		if (strcmp(json_string_value(json_object_get(b, "role")), name) == 0)
			return b;
	fail_msg("no role %s", name);
	return NULL;
}

static void test_report(void **state)
{
	json_t *r;

	(void)state;
	/* Local with the defaults: 8 s fits everywhere, no warning. */
	r = report_for("{\"profiles\": {\"p\": {\"backend\": \"local\"}}}", NULL);
	assert_int_equal(json_integer_value(json_object_get(r, "needs_ms")), 8000);
	assert_int_equal(json_array_size(json_object_get(r, "warnings")), 0);
	assert_int_equal(json_integer_value(json_object_get(role(r, "command backend"), "ms")),
			 SG_SHUTDOWN_BUDGET_MS);
	assert_int_equal(json_integer_value(json_object_get(role(r, "delegated peer"), "ms")),
			 SG_OUTER_GRACE_MS);
	json_decref(r);

	/* A 2 s budget: too short in both roles. */
	r = report_for("{\"profiles\": {\"p\": {\"backend\": \"local\", \"shutdown_timeout_ms\": 2000}}}",
		       NULL);
	assert_false(json_is_true(json_object_get(role(r, "command backend"), "enough")));
	assert_true(warned(r, "as a command backend the shutdown budget is 2000 ms (shutdown_timeout_ms), shorter than the 8000 ms"));
	assert_true(warned(r, "as a delegated peer the shutdown budget is 2000 ms"));
	json_decref(r);

	/* A peer budget longer than the outer's grace, and a grace whose
	 * chain outgrows the host's default. */
	r = report_for("{\"profiles\": {\"p\": {\"backend\": \"local\", \"shutdown_timeout_ms\": 30000,"
		       " \"shutdown_grace_ms\": 20000}}}", NULL);
	assert_true(warned(r, "longer than the outer's grace (20000 ms)"));
	assert_int_equal(json_integer_value(json_object_get(role(r, "delegated peer"), "ms")),
			 20000);
	assert_false(warned(r, "cancel drain"));
	json_decref(r);
	r = report_for("{\"profiles\": {\"p\": {\"backend\": \"local\", \"shutdown_grace_ms\": 40000}}}",
		       NULL);
	assert_true(warned(r, "plus the 35000 ms cancel drain (75000 ms)"));
	assert_int_equal(json_integer_value(json_object_get(
				 role(r, "host (over the outer adapter)"), "needs_ms")), 75000);
	json_decref(r);

	/* A select profile has none of its own. */
	assert_null(report_for("{\"default\": \"p\", \"profiles\": {\"p\": {\"backend\": \"select\", "
			       "\"candidates\": [{\"profile\": \"q\"}]}, \"q\": {\"backend\": \"local\"}}}",
			       NULL));
}

/* Measured times replace the defaults in the report. */
static void test_report_uses_measurements(void **state)
{
	char *dir = temp_dir();
	json_t *r, *steps;

	(void)state;
	sg_budget_record(dir, "local", SG_BUDGET_STOP, 100);
	sg_budget_record(dir, "local", SG_BUDGET_REMOVE, 100);
	sg_budget_record(dir, "local", SG_BUDGET_KEEP, 100);
	r = report_for("{\"profiles\": {\"p\": {\"backend\": \"local\"}}}", dir);
	steps = json_object_get(r, "steps");
	assert_true(json_is_true(json_object_get(json_array_get(steps, 0), "measured")));
	assert_int_equal(json_integer_value(json_object_get(json_array_get(steps, 0), "ms")), 300);
	assert_int_equal(json_integer_value(json_object_get(r, "needs_ms")),
			 300 + 300 + SG_BUDGET_SLACK_MS);
	json_decref(r);
	remove_dir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sample_smoothing),
		cmocka_unit_test(test_estimate_rounds_up_and_defaults),
		cmocka_unit_test(test_plan_and_split),
		cmocka_unit_test(test_records_in_the_state_dir),
		cmocka_unit_test(test_concurrent_records),
		cmocka_unit_test(test_report),
		cmocka_unit_test(test_report_uses_measurements),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
