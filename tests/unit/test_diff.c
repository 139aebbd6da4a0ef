/*
 * test_diff.c - sg-helper's line diff, digests and candidate search
 * (helper/diff.h): the host's DiffResult shape, its hunk
 * grouping (3 lines of context, changes closer than 6 lines in one hunk),
 * the summary form past a budget, and random edits whose hunks must
 * rebuild the new text from the old.
 */
#define _GNU_SOURCE /* memmem */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "helper/diff.h"
#include "base/limits.h"

static json_t *diff(const char *a, const char *b, size_t budget)
{
	struct sg_buf o = SG_BUF_INIT(SG_MAX_FRAME);
	json_t *j;

	assert_int_equal(sg_diff_json(&o, a, strlen(a), b, strlen(b), budget), SG_OK);
	j = json_loadb(o.p, o.len, 0, NULL);
	if (!j)
		fail_msg("not JSON: %s", o.p);
	sg_buf_release(&o);
	return j;
}

static void test_lines(void **state)
{
	struct sg_lines l;

	(void)state;
	assert_int_equal(sg_text_lines("", 0), 0);
	assert_int_equal(sg_text_lines("a", 1), 1);
	assert_int_equal(sg_text_lines("a\n", 2), 1);
	assert_int_equal(sg_text_lines("a\nb", 3), 2);
	assert_int_equal(sg_text_lines("\n\n", 2), 2);
	assert_int_equal(sg_lines_split(&l, "a\r\nb\r\nc", 8, true, 3), SG_OK);
	assert_int_equal(l.n, 3);
	assert_int_equal(l.v[0].n, 1);
	assert_true(l.v[1].nl);
	assert_false(l.v[2].nl);
	sg_lines_release(&l);
	assert_int_equal(sg_lines_split(&l, "a\nb\nc", 5, false, 2), SG_E_TOO_LARGE);
	assert_null(l.v);
}

static void test_shape(void **state)
{
	json_t *j;
	char *s;

	(void)state;
	j = diff("same\n", "same\n", SG_TOOL_OUTPUT);
	assert_int_equal(json_object_size(j), 0);
	json_decref(j);

	j = diff("one\ntwo\nthree\n", "one\nTWO\nthree\n", SG_TOOL_OUTPUT);
	s = json_dumps(j, JSON_COMPACT);
	assert_string_equal(s, "{\"hunks\":[{\"old_start\":1,\"new_start\":1,\"lines\":["
			       "{\"op\":\"equal\",\"content\":\"one\"},"
			       "{\"op\":\"delete\",\"content\":\"two\"},"
			       "{\"op\":\"insert\",\"content\":\"TWO\"},"
			       "{\"op\":\"equal\",\"content\":\"three\"}]}]}");
	free(s);
	json_decref(j);
}

/* Lines "l1\n".."lN\n" with the given ones replaced by "X". */
static char *text(int n, const int *changed, int nchanged)
{
	size_t cap = (size_t)n * 8 + 1, len = 0;
	char *t = malloc(cap);

	t[0] = '\0';
	for (int i = 1; i <= n; i++) {
		bool x = false;

		for (int k = 0; k < nchanged; k++)
			x |= changed[k] == i;
		len += (size_t)snprintf(t + len, cap - len, x ? "X\n" : "l%d\n", i);
	}
	return t;
}

static void test_grouping(void **state)
{
	const int near[] = { 10, 16 }, far[] = { 10, 17 };
	char *a = text(30, NULL, 0), *b;
	json_t *j, *h;

	(void)state;
	/* Five equal lines between two changes: one hunk, 3 lines each side. */
	b = text(30, near, 2);
	j = diff(a, b, SG_TOOL_OUTPUT);
	h = json_object_get(j, "hunks");
	assert_int_equal(json_array_size(h), 1);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(h, 0), "old_start")), 7);
	assert_int_equal(json_array_size(json_object_get(json_array_get(h, 0), "lines")),
			 3 + 2 + 5 + 2 + 3);
	json_decref(j);
	free(b);
	/* Six: two hunks. */
	b = text(30, far, 2);
	j = diff(a, b, SG_TOOL_OUTPUT);
	h = json_object_get(j, "hunks");
	assert_int_equal(json_array_size(h), 2);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(h, 1), "new_start")), 14);
	json_decref(j);
	free(b);
	/* Past the budget: the summary form. */
	b = text(30, far, 2);
	j = diff(a, b, 40);
	assert_true(json_is_true(json_object_get(j, "truncated")));
	assert_int_equal(json_integer_value(json_object_get(j, "old_lines")), 30);
	assert_int_equal(json_integer_value(json_object_get(j, "new_lines")), 30);
	assert_non_null(json_object_get(j, "summary"));
	assert_null(json_object_get(j, "hunks"));
	json_decref(j);
	free(b);
	free(a);
}

/* Apply the hunks to a's lines: b's lines must come out. */
static void check_rebuild(const char *a, const char *b)
{
	struct sg_lines A, B;
	json_t *j = diff(a, b, SG_MAX_FRAME), *h, *hunk;
	size_t at = 0, out = 0, k;
	const char **got;

	assert_int_equal(sg_lines_split(&A, a, strlen(a), false, 1 << 20), SG_OK);
	assert_int_equal(sg_lines_split(&B, b, strlen(b), false, 1 << 20), SG_OK);
	got = calloc(A.n + B.n + 1, sizeof(*got));
	h = json_object_get(j, "hunks");
	json_array_foreach(h, k, hunk) {
		size_t start = (size_t)json_integer_value(json_object_get(hunk, "old_start")) - 1, i;
		json_t *line;

		assert_true(start >= at);
		for (; at < start; at++)
			got[out++] = A.v[at].p;
		json_array_foreach(json_object_get(hunk, "lines"), i, line) {
			const char *op = json_string_value(json_object_get(line, "op"));
			const char *c = json_string_value(json_object_get(line, "content"));

			if (strcmp(op, "insert") != 0) {
				assert_true(at < A.n);
				assert_int_equal(strlen(c), A.v[at].n);
				assert_memory_equal(c, A.v[at].p, A.v[at].n);
				if (!strcmp(op, "equal"))
					got[out++] = A.v[at].p;
				at++;
			} else {
				got[out++] = c;
			}
		}
	}
	for (; at < A.n; at++)
		got[out++] = A.v[at].p;
	assert_int_equal(out, B.n);
	for (size_t i = 0; i < B.n; i++)
		assert_memory_equal(got[i], B.v[i].p, B.v[i].n);
	free(got);
	sg_lines_release(&A);
	sg_lines_release(&B);
	json_decref(j);
}

/* Append w and a newline to s (cap bytes). */
static void add_line(char *s, size_t cap, const char *w)
{
	size_t n = strlen(s);

	snprintf(s + n, cap - n, "%s\n", w);
}

static void test_random_edits(void **state)
{
	static const char *const words[] = { "a", "b", "c", "", "d" };

	(void)state;
	srand(35);
	for (int round = 0; round < 500; round++) {
		char a[2048] = "", b[2048] = "";
		int n = rand() % 40;

		for (int i = 0; i < n; i++) {
			const char *w = words[rand() % 5];

			add_line(a, sizeof(a), w);
			if (rand() % 5 == 0)
				w = words[rand() % 5];
			if (rand() % 9)
				add_line(b, sizeof(b), w);
			if (rand() % 11 == 0)
				add_line(b, sizeof(b), "zz");
		}
		check_rebuild(a, b);
	}
}

/*
 * A change deep in a large text: only the lines around it are compared,
 * and the hunk's line numbers count the lines skipped.  A text of four
 * million line ends doubled is the summary form, without splitting it.
 */
static void test_large_texts(void **state)
{
	const int at[] = { 150000 };
	char *a = text(200000, NULL, 0), *b = text(200000, at, 1);
	size_t n = 4 << 20;
	char *nl = malloc(2 * n + 1);
	json_t *j, *h;

	(void)state;
	j = diff(a, b, SG_TOOL_OUTPUT);
	h = json_array_get(json_object_get(j, "hunks"), 0);
	assert_int_equal(json_array_size(json_object_get(j, "hunks")), 1);
	assert_int_equal(json_integer_value(json_object_get(h, "old_start")), 149997);
	assert_int_equal(json_integer_value(json_object_get(h, "new_start")), 149997);
	assert_int_equal(json_array_size(json_object_get(h, "lines")), 3 + 2 + 3);
	json_decref(j);
	check_rebuild(a, b);
	memset(nl, '\n', 2 * n);
	nl[2 * n] = '\0';
	nl[n] = '\0';
	{
		struct sg_buf o = SG_BUF_INIT(SG_MAX_FRAME);

		assert_int_equal(sg_diff_json(&o, nl, n, nl + n + 1, n - 1, SG_TOOL_OUTPUT), SG_OK);
		nl[n] = '\n';
		sg_buf_reset(&o);
		assert_int_equal(sg_diff_json(&o, nl, n, nl, 2 * n, SG_TOOL_OUTPUT), SG_OK);
		j = json_loadb(o.p, o.len, 0, NULL);
		assert_true(json_is_true(json_object_get(j, "truncated")));
		assert_int_equal(json_integer_value(json_object_get(j, "new_lines")), 2 * n);
		json_decref(j);
		sg_buf_release(&o);
	}
	free(nl);
	free(a);
	free(b);
}

/*
 * Sides whose line counts are further apart than the search follows are
 * answered in the summary form, with each text's own line count (the
 * window's lines and those before and after it, an unended last line
 * included); a gap it follows is still diffed.
 */
static void test_counts_decide(void **state)
{
	const char *a = "p\np\np\np\np\nx\ns\ns\ns\ns\ns";
	size_t cap = 4 * 2000 + 64, k;
	char *b = malloc(cap);
	json_t *j;

	(void)state;
	assert_non_null(b);
	for (int inserted = 1100; inserted >= 1000; inserted -= 100) {
		k = (size_t)snprintf(b, cap, "p\np\np\np\np\n");
		for (int i = 0; i < inserted; i++)
			k += (size_t)snprintf(b + k, cap - k, "y\n");
		snprintf(b + k, cap - k, "s\ns\ns\ns\ns");
		j = diff(a, b, SG_TOOL_OUTPUT);
		if (inserted > 1024) {
			assert_true(json_is_true(json_object_get(j, "truncated")));
			assert_int_equal(json_integer_value(json_object_get(j, "old_lines")), 11);
			assert_int_equal(json_integer_value(json_object_get(j, "new_lines")),
					 10 + inserted);
		} else {
			assert_int_equal(json_array_size(json_object_get(j, "hunks")), 1);
			assert_null(json_object_get(j, "truncated"));
		}
		json_decref(j);
	}
	free(b);
}

/* Every occurrence sg_text_find finds from each one before is memmem's. */
static void check_find(const char *s, size_t n, const char *w, size_t wn)
{
	const char *end = s + n, *p = s, *q;

	do {
		q = sg_text_find(p, end, w, wn);
		assert_ptr_equal(q, memmem(p, (size_t)(end - p), w, wn));
		p = q ? q + 1 : p;
	} while (q);
}

/*
 * sg_text_find searches windows that double: a match is found wherever
 * it lies against their edges (one at every position of the first few
 * windows), and in a text where matches are dense or far apart.
 */
static void test_find(void **state)
{
	size_t n = 20000;
	char *s = malloc(n);
	unsigned seed = 7;

	(void)state;
	assert_non_null(s);
	for (size_t at = 0; at < 2100; at++) {
		memset(s, 'a', n);
		memcpy(s + at, "bcd", 3);
		for (size_t wn = 1; wn <= 3; wn++)
			assert_ptr_equal(sg_text_find(s, s + n, "bcd" + 3 - wn, wn), s + at + 3 - wn);
		assert_null(sg_text_find(s, s + n, "bcx", 3));
	}
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		s[i] = "ab\n"[(seed >> 16) % 3];
	}
	for (size_t wn = 1; wn < 1000; wn = 2 * wn + 1)
		check_find(s, n, s + 9000, wn);
	check_find(s, n, "\n\n\n\n\n\n\n\n\n\n\n\n", 12);
	assert_ptr_equal(sg_text_find(s, s + n, "x", 0), s);
	assert_null(sg_text_find(s, s + 2, "ab\n", 3));
	free(s);
}

static void test_candidates(void **state)
{
	struct sg_lines hay, want;
	struct sg_cand c[3];
	size_t n;
	const char *file = "x\n  if (a) {\n    b();\n  }\ny\n  if (a) {\n    c();\n";

	(void)state;
	assert_int_equal(sg_lines_split(&hay, file, strlen(file), true, 100), SG_OK);
	assert_int_equal(sg_lines_split(&want, "if (a) {\nb();", 13, true, 100), SG_OK);
	sg_cand_closest(&hay, &want, c, 3, &n);
	assert_int_equal(n, 3);
	/* Lines 2-3 match both lines once trimmed; 6-7 only the first. */
	assert_int_equal(c[0].start, 2);
	assert_int_equal(c[0].end, 3);
	assert_int_equal(c[0].score, 4);
	assert_int_equal(c[1].start, 6);
	assert_int_equal(c[1].score, 2);
	sg_lines_release(&hay);
	sg_lines_release(&want);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_shape),
		cmocka_unit_test(test_grouping),
		cmocka_unit_test(test_random_edits),
		cmocka_unit_test(test_large_texts),
		cmocka_unit_test(test_counts_decide),
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_candidates),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
