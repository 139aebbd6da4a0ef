/*
 * test_ring.c - the offset arithmetic behind process/read (base/ring.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/limits.h"
#include "base/ring.h"

static void test_oldest(void **state)
{
	(void)state;
	assert_int_equal(sg_ring_oldest(0, 10), 0);
	assert_int_equal(sg_ring_oldest(10, 10), 0);
	assert_int_equal(sg_ring_oldest(11, 10), 1);
	assert_int_equal(sg_ring_oldest(1000, 10), 990);
	assert_int_equal(sg_ring_oldest(5, 0), 5);
}

static void test_max(void **state)
{
	(void)state;
	assert_int_equal(sg_ring_max(0), SG_READ_DEFAULT);
	assert_int_equal(sg_ring_max(1), 1);
	assert_int_equal(sg_ring_max(SG_READ_CAP), SG_READ_CAP);
	assert_int_equal(sg_ring_max(SG_READ_CAP + 1), SG_READ_CAP);
	assert_int_equal(sg_ring_max(UINT64_MAX), SG_READ_CAP);
}

static void test_window_inside(void **state)
{
	struct sg_ring_window w;

	(void)state;
	sg_ring_window(100, 1000, 10, 20, &w);
	assert_int_equal(w.start, 10);
	assert_int_equal(w.end, 30);
	assert_false(w.truncated);

	/* Fewer bytes than max: the window stops at total. */
	sg_ring_window(100, 1000, 90, 20, &w);
	assert_int_equal(w.start, 90);
	assert_int_equal(w.end, 100);
	assert_false(w.truncated);

	/* Exactly at the oldest retained byte: not truncated. */
	sg_ring_window(150, 100, 50, 10, &w);
	assert_int_equal(w.start, 50);
	assert_int_equal(w.end, 60);
	assert_false(w.truncated);
}

static void test_window_truncated(void **state)
{
	struct sg_ring_window w;

	(void)state;
	sg_ring_window(150, 100, 0, 10, &w);
	assert_int_equal(w.start, 50);
	assert_int_equal(w.end, 60);
	assert_true(w.truncated);

	sg_ring_window(150, 100, 49, 1000, &w);
	assert_int_equal(w.start, 50);
	assert_int_equal(w.end, 150);
	assert_true(w.truncated);

	/* Nothing retained at all. */
	sg_ring_window(150, 0, 3, 10, &w);
	assert_int_equal(w.start, 150);
	assert_int_equal(w.end, 150);
	assert_true(w.truncated);
}

static void test_window_past_total(void **state)
{
	struct sg_ring_window w;

	(void)state;
	sg_ring_window(100, 1000, 100, 10, &w);
	assert_int_equal(w.start, 100);
	assert_int_equal(w.end, 100);
	assert_false(w.truncated);

	sg_ring_window(100, 1000, 5000, 10, &w);
	assert_int_equal(w.start, 100);
	assert_int_equal(w.end, 100);
	assert_false(w.truncated);

	sg_ring_window(0, 1000, 0, 0, &w);
	assert_int_equal(w.start, 0);
	assert_int_equal(w.end, 0);
	assert_false(w.truncated);
}

static void test_window_max_default_and_cap(void **state)
{
	struct sg_ring_window w;
	uint64_t big = (uint64_t)64 * SG_MiB;

	(void)state;
	sg_ring_window(big, big, 0, 0, &w);
	assert_int_equal(w.start, 0);
	assert_int_equal(w.end, SG_READ_DEFAULT);

	sg_ring_window(big, big, 7, (uint64_t)1 << 40, &w);
	assert_int_equal(w.start, 7);
	assert_int_equal(w.end, 7 + SG_READ_CAP);

	/* Offsets beyond 4 GiB keep their full width. */
	sg_ring_window(((uint64_t)1 << 33) + 100, 1000, (uint64_t)1 << 32, 5,
		       &w);
	assert_true(w.truncated);
	assert_int_equal(w.start, ((uint64_t)1 << 33) + 100 - 1000);
	assert_int_equal(w.end, w.start + 5);
	sg_ring_window(((uint64_t)1 << 33) + 100, 1000, (uint64_t)1 << 33, 5,
		       &w);
	assert_false(w.truncated);
	assert_int_equal(w.start, (uint64_t)1 << 33);
}

static void test_segments_plain(void **state)
{
	struct sg_ring_seg s[2];

	(void)state;
	assert_int_equal(sg_ring_segments(0, 0, 10, s), 0);
	assert_int_equal(sg_ring_segments(5, 3, 10, s), 0);
	assert_int_equal(sg_ring_segments(0, 5, 0, s), 0);

	assert_int_equal(sg_ring_segments(2, 7, 10, s), 1);
	assert_int_equal(s[0].pos, 2);
	assert_int_equal(s[0].len, 5);

	/* Ends exactly at the end of the file: still one segment. */
	assert_int_equal(sg_ring_segments(13, 20, 10, s), 1);
	assert_int_equal(s[0].pos, 3);
	assert_int_equal(s[0].len, 7);
}

static void test_segments_wrap(void **state)
{
	struct sg_ring_seg s[2];

	(void)state;
	assert_int_equal(sg_ring_segments(8, 13, 10, s), 2);
	assert_int_equal(s[0].pos, 8);
	assert_int_equal(s[0].len, 2);
	assert_int_equal(s[1].pos, 0);
	assert_int_equal(s[1].len, 3);

	/* A whole file's worth starting mid-file. */
	assert_int_equal(sg_ring_segments(24, 34, 10, s), 2);
	assert_int_equal(s[0].pos, 4);
	assert_int_equal(s[0].len, 6);
	assert_int_equal(s[1].pos, 0);
	assert_int_equal(s[1].len, 4);
}

static void test_segments_longer_than_retain(void **state)
{
	struct sg_ring_seg s[2];

	(void)state;
	/* Only the newest 10 of 25 bytes are kept: offsets 15..25. */
	assert_int_equal(sg_ring_segments(0, 25, 10, s), 2);
	assert_int_equal(s[0].pos, 5);
	assert_int_equal(s[0].len, 5);
	assert_int_equal(s[1].pos, 0);
	assert_int_equal(s[1].len, 5);

	assert_int_equal(sg_ring_segments(0, 30, 10, s), 1);
	assert_int_equal(s[0].pos, 0);
	assert_int_equal(s[0].len, 10);
}

/* A read window maps onto the same positions the writer used. */
static void test_window_and_segments_agree(void **state)
{
	unsigned char file[7];
	uint64_t total = 0;

	(void)state;
	/* Write offsets 0..30 one chunk at a time; each byte is its offset. */
	while (total < 30) {
		uint64_t len = total % 4 + 1;
		struct sg_ring_seg s[2];
		int n = sg_ring_segments(total, total + len, sizeof(file), s);
		uint64_t o = total + len -
			     (s[0].len + (n > 1 ? s[1].len : 0));

		for (int i = 0; i < n; i++)
			for (uint64_t k = 0; k < s[i].len; k++)
				file[s[i].pos + k] = (unsigned char)o++;
		total += len;
	}
	for (uint64_t off = 0; off <= total; off++) {
		struct sg_ring_window w;
		struct sg_ring_seg s[2];
		int n;
		uint64_t o;

		sg_ring_window(total, sizeof(file), off, 5, &w);
		assert_true(w.start >= total - sizeof(file));
		assert_true(w.end <= total);
		assert_int_equal(w.truncated, off < total - sizeof(file));
		n = sg_ring_segments(w.start, w.end, sizeof(file), s);
		o = w.start;
		for (int i = 0; i < n; i++)
			for (uint64_t k = 0; k < s[i].len; k++)
				assert_int_equal(file[s[i].pos + k],
						 (unsigned char)o++);
		assert_int_equal(o, w.end);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_oldest),
		cmocka_unit_test(test_max),
		cmocka_unit_test(test_window_inside),
		cmocka_unit_test(test_window_truncated),
		cmocka_unit_test(test_window_past_total),
		cmocka_unit_test(test_window_max_default_and_cap),
		cmocka_unit_test(test_segments_plain),
		cmocka_unit_test(test_segments_wrap),
		cmocka_unit_test(test_segments_longer_than_retain),
		cmocka_unit_test(test_window_and_segments_agree),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
