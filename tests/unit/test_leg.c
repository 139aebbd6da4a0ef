/*
 * test_leg.c - work on a thread beside the caller's (core/leg.h): a
 * leg is stopped only through its token and says it ended through its
 * descriptor; ending a leg waits for it, or stops it first.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <poll.h>
#include <string.h>

#include "core/leg.h"

/* What a leg's run saw and did. */
struct probe {
	int64_t sleep_ms;  /* how long run waits on its stop token */
	sg_err slept;      /* what that wait returned */
	const char *why;   /* the stop token's words when run returned */
};

static sg_err probe_run(void *arg, struct sg_cancel *stop)
{
	struct probe *p = arg;

	p->slept = sg_cancel_sleep(stop, p->sleep_ms);
	p->why = sg_cancel_reason(stop);
	return p->slept ? p->slept : SG_E_NOT_FOUND;
}

/* The caller's wait: poll the leg's descriptor, as adapters do. */
static bool wait_ended(struct sg_leg *l, int ms)
{
	struct pollfd p = { .fd = sg_leg_fd(l), .events = POLLIN };

	if (p.fd >= 0)
		(void)poll(&p, 1, ms);
	return sg_leg_ended(l);
}

static void test_stopped_through_its_token(void **state)
{
	struct probe p = { .sleep_ms = 60000 };
	struct sg_leg l = { .run = probe_run, .arg = &p };
	struct sg_errinfo err = { 0 };
	int64_t t0 = sg_now_ms();

	(void)state;
	assert_int_equal(sg_leg_start(&l, &err), SG_OK);
	/* Still in its minute-long wait: not ended, its descriptor silent. */
	assert_false(wait_ended(&l, 50));
	assert_true(sg_leg_fd(&l) >= 0);
	sg_leg_stop(&l, SG_E_TIMEOUT, "the caller gave up");
	assert_true(wait_ended(&l, 5000));
	assert_int_equal(sg_leg_fd(&l), -1);
	/* What run stored is readable once it has ended, before the join. */
	assert_int_equal(l.rc, SG_E_TIMEOUT);
	assert_string_equal(p.why, "the caller gave up");
	sg_leg_end(&l, SG_E_CANCELLED);
	assert_int_equal(l.rc, SG_E_TIMEOUT);
	assert_true(sg_now_ms() - t0 < 5000);
}

static void test_end_waits_or_stops(void **state)
{
	struct probe by_itself = { .sleep_ms = 100 }, stopped = { .sleep_ms = 60000 };
	struct sg_leg a = { .run = probe_run, .arg = &by_itself };
	struct sg_leg b = { .run = probe_run, .arg = &stopped };
	struct sg_errinfo err = { 0 };
	int64_t t0;

	(void)state;
	/* SG_OK: run returns by itself, its stop token never fired. */
	assert_int_equal(sg_leg_start(&a, &err), SG_OK);
	sg_leg_end(&a, SG_OK);
	assert_int_equal(by_itself.slept, SG_OK);
	assert_null(by_itself.why);
	assert_int_equal(a.rc, SG_E_NOT_FOUND);
	assert_true(a.ms >= 100);
	/* A code: the leg is stopped with it, and ending is prompt. */
	assert_int_equal(sg_leg_start(&b, &err), SG_OK);
	t0 = sg_now_ms();
	sg_leg_end(&b, SG_E_CANCELLED);
	assert_int_equal(stopped.slept, SG_E_CANCELLED);
	assert_int_equal(b.rc, SG_E_CANCELLED);
	assert_true(sg_now_ms() - t0 < 5000);
	/* Ending again, or stopping an ended leg, does nothing. */
	sg_leg_end(&b, SG_E_CANCELLED);
	sg_leg_stop(&b, SG_E_CANCELLED, NULL);
	assert_true(sg_leg_ended(&b));
}

static void test_never_started(void **state)
{
	struct sg_leg l = { .run = probe_run };

	(void)state;
	assert_true(sg_leg_ended(&l));
	assert_int_equal(sg_leg_fd(&l), -1);
	sg_leg_stop(&l, SG_E_CANCELLED, NULL);
	sg_leg_end(&l, SG_E_CANCELLED);
	sg_leg_end(&l, SG_OK);
	assert_int_equal(l.rc, SG_OK);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stopped_through_its_token),
		cmocka_unit_test(test_end_waits_or_stops),
		cmocka_unit_test(test_never_started),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
