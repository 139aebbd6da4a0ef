/*
 * test_base.c - the base modules: buffers, UTF-8, error strings, JSON
 * writing, string vectors, slugs, cancel tokens and progress lines.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cancel.h"
#include "base/err.h"
#include "base/fsutil.h"
#include "base/gitattr.h"
#include "base/jw.h"
#include "base/hex.h"
#include "base/slug.h"
#include "core/digest.h"
#include "base/strv.h"
#include "base/limits.h"
#include "base/progress.h"
#include "base/utf8.h"

static void test_buf_invariants(void **state)
{
	struct sg_buf b = SG_BUF_INIT(8);
	char *taken;
	size_t n;

	(void)state;
	assert_non_null(b.p);
	assert_string_equal(b.p, "");
	assert_int_equal(sg_buf_adds(&b, "abc"), SG_OK);
	assert_int_equal(sg_buf_addf(&b, "%d", 42), SG_OK);
	assert_string_equal(b.p, "abc42");
	/* Past max: refused, and the buffer is unchanged. */
	assert_int_equal(sg_buf_adds(&b, "defg"), SG_E_TOO_LARGE);
	assert_string_equal(b.p, "abc42");
	assert_int_equal(sg_buf_adds(&b, "xyz"), SG_OK);
	assert_int_equal(b.len, 8);
	assert_int_equal(sg_buf_addc(&b, '!'), SG_E_TOO_LARGE);
	sg_buf_consume(&b, 3);
	assert_string_equal(b.p, "42xyz");
	taken = sg_buf_take(&b, &n);
	assert_string_equal(taken, "42xyz");
	assert_int_equal(n, 5);
	assert_int_equal(b.len, 0);
	assert_string_equal(b.p, "");
	free(taken);
	taken = sg_buf_take(&b, &n);
	assert_non_null(taken);
	assert_int_equal(n, 0);
	free(taken);
	sg_buf_release(&b);
}

static void test_buf_clipped(void **state)
{
	struct sg_buf b = SG_BUF_INIT(5);

	(void)state;
	assert_false(sg_buf_add_clipped(&b, "abc", 3));
	assert_true(sg_buf_add_clipped(&b, "defg", 4));
	assert_string_equal(b.p, "abcde");
	assert_true(sg_buf_add_clipped(&b, "h", 1));
	sg_buf_release(&b);
}

static void test_utf8_seq_and_valid(void **state)
{
	(void)state;
	assert_int_equal(sg_utf8_seq((const unsigned char *)"a", 1), 1);
	assert_int_equal(sg_utf8_seq((const unsigned char *)"\xc3\xa9", 2), 2);
	assert_int_equal(sg_utf8_seq((const unsigned char *)"\xe2\x82\xac", 3), 3);
	assert_int_equal(sg_utf8_seq((const unsigned char *)"\xf0\x9f\x98\x80", 4), 4);
	assert_int_equal(sg_utf8_seq((const unsigned char *)"\xc0\xaf", 2), 0);     /* overlong */
	assert_int_equal(sg_utf8_seq((const unsigned char *)"\xed\xa0\x80", 3), 0); /* surrogate */
	assert_int_equal(sg_utf8_seq((const unsigned char *)"\xf4\x90\x80\x80", 4), 0);
	assert_int_equal(sg_utf8_seq((const unsigned char *)"\xe2\x82", 2), 0);     /* cut */
	assert_true(sg_utf8_valid("h\xc3\xa9llo", 6));
	assert_false(sg_utf8_valid("\xff", 1));
	/* Eight ASCII bytes at a time: a bad byte anywhere after them is seen. */
	assert_true(sg_utf8_valid("abcdefghijklmnop\xc3\xa9q", 19));
	assert_false(sg_utf8_valid("abcdefghijklmnop\xffq", 18));
	assert_false(sg_utf8_valid("abcdefgh\xe2\x82", 10));
	assert_false(sg_utf8_valid("abcdefg\xc3", 8));
}

/* The host's attribution rewrite of a git command line (gitattribution). */
static void test_gitattr(void **state)
{
	char *simple[] = { "commit", "-m", "x" };
	char *global[] = { "-C", "commit", "commit", "-qm", "y", "--", "a.txt" };
	char *amend[] = { "commit", "--ame", "-m", "z" };
	char *abbrev[] = { "commit", "--mess", "--amend" };
	char *missing[] = { "commit", "-m" };
	char *other[] = { "-c", "commit", "status" };
	char *out[16];
	int n;

	(void)state;
	n = sg_gitattr_commit_args(3, simple, out);
	assert_int_equal(n, 7);
	assert_string_equal(out[0], "-c");
	assert_string_equal(out[1], SG_GIT_TRAILER_RULE);
	assert_string_equal(out[2], "commit");
	assert_string_equal(out[5], "--trailer");
	assert_string_equal(out[6], SG_GIT_TRAILER);
	/* -C's value is not the subcommand; the trailer goes before "--". */
	n = sg_gitattr_commit_args(7, global, out);
	assert_int_equal(n, 11);
	assert_string_equal(out[0], "-C");
	assert_string_equal(out[1], "commit");
	assert_string_equal(out[2], "-c");
	assert_string_equal(out[4], "commit");
	assert_string_equal(out[7], "--trailer");
	assert_string_equal(out[9], "--");
	assert_string_equal(out[10], "a.txt");
	/* An amend (abbreviated too) and a line git would refuse stay as they are. */
	assert_int_equal(sg_gitattr_commit_args(4, amend, out), -1);
	/* --mess takes "--amend" as its message: not an amend. */
	assert_int_equal(sg_gitattr_commit_args(3, abbrev, out), 7);
	assert_int_equal(sg_gitattr_commit_args(2, missing, out), -1);
	assert_int_equal(sg_gitattr_commit_args(3, other, out), -1);
}

static void test_utf8_clip(void **state)
{
	const char *s = "ab\xe2\x82\xac" "c"; /* a b EUR c: 6 bytes */

	(void)state;
	assert_int_equal(sg_utf8_clip(s, 6, 10), 6);
	assert_int_equal(sg_utf8_clip(s, 6, 4), 2); /* never splits the euro sign */
	assert_int_equal(sg_utf8_clip(s, 6, 5), 5);
	/* A first character longer than max comes back whole. */
	assert_int_equal(sg_utf8_clip("\xe2\x82\xac" "x", 4, 1), 3);
	/* Invalid bytes count as single characters. */
	assert_int_equal(sg_utf8_clip("\xff\xfe\xfd", 3, 2), 2);
	/* A sequence cut off by the end of the data is one unit too. */
	assert_int_equal(sg_utf8_clip("a\xe2\x82", 3, 2), 1);
}

static void test_utf8_sanitize(void **state)
{
	struct sg_buf b = SG_BUF_INIT(64);

	(void)state;
	assert_int_equal(sg_utf8_sanitize(&b, "a\xff" "b\xe2\x82", 5), SG_OK);
	assert_string_equal(b.p, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd");
	assert_true(sg_utf8_valid(b.p, b.len));
	sg_buf_release(&b);
}

static void test_err_strings(void **state)
{
	struct sg_errinfo e = { 0 };
	char out[300];

	(void)state;
	assert_string_equal(sg_err_word(SG_E_PATH_ESCAPE), "path_escape");
	assert_string_equal(sg_err_word(SG_E_PERMISSION), "permission_denied");
	assert_string_equal(sg_err_word(SG_E_PROVIDER), "provider_error");
	assert_string_equal(sg_err_word((sg_err)999), "internal");
	assert_string_equal(sg_err_word(SG_OK), "internal");
	for (int i = 1; i < SG_E__COUNT; i++)
		assert_int_equal(sg_err_from_word(sg_err_word((sg_err)i)), i);
	assert_int_equal(sg_err_from_word("nonsense"), SG_E_INTERNAL);
	assert_int_equal(sg_err_set(&e, SG_E_NOT_FOUND, "%s is gone", "x"), SG_E_NOT_FOUND);
	/* The first failure wins: an outer layer cannot overwrite it. */
	/* The code passed comes back; the first failure stays recorded. */
	assert_int_equal(sg_err_set(&e, SG_E_INTERNAL, "outer"), SG_E_INTERNAL);
	sg_err_format(&e, out, sizeof(out));
	assert_string_equal(out, "not_found: x is gone");
	sg_err_clear(&e);
	sg_err_format(&(struct sg_errinfo){ .code = SG_E_TIMEOUT }, out, sizeof(out));
	assert_string_equal(out, "timeout: the operation failed");
}

static void test_jw(void **state)
{
	struct sg_buf b = SG_BUF_INIT(256);
	json_t *j;

	(void)state;
	assert_int_equal(sg_buf_addc(&b, '{'), SG_OK);
	assert_int_equal(sg_jw_key(&b, "k", 1), SG_OK);
	assert_int_equal(sg_jw_str(&b, "q\"\\\n\t\x01\xff", 7), SG_OK);
	assert_int_equal(sg_buf_addc(&b, '}'), SG_OK);
	j = json_loadb(b.p, b.len, JSON_ALLOW_NUL, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "k")),
			    "q\"\\\n\t\x01\xef\xbf\xbd");
	json_decref(j);
	sg_buf_release(&b);
}

/*
 * Runs of plain bytes are scanned sixteen (or eight) at a time: every
 * ASCII byte and a two-byte character, at every place in and around two
 * vectors, comes out byte for byte as jansson writes it, and the plain
 * run (sg_jw_plain) ends exactly before the first byte to escape.
 */
static void jw_one(const char *text, size_t n, size_t plain)
{
	struct sg_buf b = SG_BUF_INIT(512);
	json_t *v = json_stringn(text, n);
	char *want = json_dumps(v, JSON_ENCODE_ANY);

	assert_non_null(want);
	assert_int_equal(sg_jw_str(&b, text, n), SG_OK);
	assert_string_equal(b.p, want);
	assert_int_equal(sg_jw_plain(text, n), plain);
	free(want);
	json_decref(v);
	sg_buf_release(&b);
}

static void test_jw_words(void **state)
{
	char text[40];

	(void)state;
	for (size_t at = 0; at + 1 < sizeof(text); at++) {
		for (int c = 1; c < 0x80; c++) {
			bool plain = c >= 0x20 && c != '"' && c != '\\';

			memset(text, 'a', sizeof(text));
			text[at] = (char)c;
			jw_one(text, sizeof(text), plain ? sizeof(text) : at);
		}
		memset(text, 'a', sizeof(text));
		memcpy(text + at, "\xc3\xa9", 2);
		jw_one(text, sizeof(text), at);
	}
}

/*
 * Long strings cross the writer's 4 KiB chunks at every kind of byte: the
 * round trip through jansson must give back the input (invalid bytes as
 * U+FFFD), and a buffer too small by one byte must refuse, not cut.
 */
static void test_jw_long(void **state)
{
	static const char *const pieces[] = { "plain text ", "\"", "\\", "\n", "\x01",
					      "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80" };
	struct sg_buf in = SG_BUF_INIT(SG_MiB), want = SG_BUF_INIT(SG_MiB);
	unsigned seed = 7;

	(void)state;
	while (in.len < 300 * 1000) {
		const char *piece = pieces[(seed = seed * 1103515245 + 12345) >> 16 & 7];

		assert_int_equal(sg_buf_adds(&in, piece), SG_OK);
	}
	for (size_t cut = 0; cut < 3; cut++) {
		struct sg_buf b = SG_BUF_INIT(8 * SG_MiB);
		size_t n = in.len - cut;
		json_t *j;
		size_t exact;

		assert_int_equal(sg_jw_str(&b, in.p, n), SG_OK);
		j = json_loadb(b.p, b.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
		assert_non_null(j);
		sg_buf_reset(&want);
		assert_int_equal(sg_utf8_sanitize(&want, in.p, n), SG_OK);
		assert_int_equal(json_string_length(j), want.len);
		assert_memory_equal(json_string_value(j), want.p, want.len);
		json_decref(j);
		exact = b.len;
		sg_buf_release(&b);
		b = (struct sg_buf)SG_BUF_INIT(exact);
		assert_int_equal(sg_jw_str(&b, in.p, n), SG_OK);
		sg_buf_release(&b);
		b = (struct sg_buf)SG_BUF_INIT(exact - 1);
		assert_int_equal(sg_jw_str(&b, in.p, n), SG_E_TOO_LARGE);
		sg_buf_release(&b);
	}
	sg_buf_release(&in);
	sg_buf_release(&want);
}

static void test_strv(void **state)
{
	struct sg_strv v = SG_STRV_INIT;
	const char *const more[] = { "b", "c", NULL };

	(void)state;
	assert_null(sg_strv_get(&v)[0]);
	assert_int_equal(sg_strv_add(&v, "a"), SG_OK);
	assert_int_equal(sg_strv_addv(&v, more), SG_OK);
	assert_int_equal(sg_strv_addf(&v, "%s=%d", "n", 3), SG_OK);
	assert_int_equal(v.n, 4);
	assert_string_equal(sg_strv_get(&v)[3], "n=3");
	assert_null(sg_strv_get(&v)[4]);
	sg_strv_release(&v);
	assert_int_equal(v.n, 0);
}

static void test_slug(void **state)
{
	char *s;

	(void)state;
	s = sg_slug("env-alice_1.2");
	assert_string_equal(s, "env-alice_1.2");
	free(s);
	s = sg_slug("../a b/c");
	assert_string_equal(s, "%2E.%2Fa%20b%2Fc");
	free(s);
	s = sg_slug(".hidden");
	assert_string_equal(s, "%2Ehidden");
	free(s);
}

/*
 * The bounded slug ssh names remote directories with: the same bytes as
 * before it was shared (a resumed workspace must be found again).
 */
static void test_slug_digest(void **state)
{
	char *s, a60[61], want[80];
	bool cut;

	(void)state;
	memset(a60, 'a', 60);
	a60[60] = '\0';
	s = sg_slug_digest("ident-1", SG_SSH_SLUG_MAX);
	assert_string_equal(s, "ident-1");
	free(s);
	s = sg_slug_digest("", SG_SSH_SLUG_MAX);
	assert_string_equal(s, "-e3b0c44298fc1c14");
	free(s);
	s = sg_slug_digest(a60, 48);
	snprintf(want, sizeof(want), "%.48s-11ee391211c62564", a60);
	assert_string_equal(s, want);
	free(s);
	/* An escape started just below the bound is kept whole. */
	s = sg_slug_n("////////////////////", 10, &cut);
	assert_string_equal(s, "%2F%2F%2F%2F");
	assert_true(cut);
	free(s);
	s = sg_slug_n("ab", 10, &cut);
	assert_string_equal(s, "ab");
	assert_false(cut);
	free(s);
	sg_hex("\x00\xff\x10", 3, want);
	assert_string_equal(want, "00ff10");
}

static void *fire_later(void *arg)
{
	sg_cancel_sleep(NULL, 50);
	sg_cancel_fire(arg, SG_E_TIMEOUT);
	return NULL;
}

static void test_cancel(void **state)
{
	struct sg_cancel c;
	pthread_t t;
	int64_t t0;

	(void)state;
	assert_int_equal(sg_cancel_init(&c), SG_OK);
	assert_int_equal(sg_cancel_check(&c), SG_OK);
	assert_int_equal(sg_cancel_check(NULL), SG_OK);
	assert_int_equal(sg_cancel_fd(NULL), -1);
	t0 = sg_now_ms();
	assert_int_equal(pthread_create(&t, NULL, fire_later, &c), 0);
	assert_int_equal(sg_cancel_sleep(&c, 5000), SG_E_TIMEOUT);
	assert_true(sg_now_ms() - t0 < 2000);
	pthread_join(t, NULL);
	/* Fired once, for good: later fires do not change the reason. */
	sg_cancel_fire(&c, SG_E_CANCELLED);
	assert_int_equal(sg_cancel_check(&c), SG_E_TIMEOUT);
	assert_int_equal(sg_cancel_sleep(&c, 1000), SG_E_TIMEOUT);
	sg_cancel_release(&c);
}

static void test_read_all(void **state)
{
	int fds[2];
	struct sg_buf b = SG_BUF_INIT(8);

	(void)state;
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(write(fds[1], "12345678", 8), 8);
	close(fds[1]);
	assert_int_equal(sg_read_all(fds[0], &b), SG_OK);
	assert_string_equal(b.p, "12345678");
	close(fds[0]);
	sg_buf_reset(&b);
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(write(fds[1], "123456789", 9), 9);
	close(fds[1]);
	assert_int_equal(sg_read_all(fds[0], &b), SG_E_TOO_LARGE);
	close(fds[0]);
	sg_buf_release(&b);
}

/*
 * Progress in json mode (what probe reads): each event is one JSON line on
 * fd 2 with the step, its duration and outcome; text that could break the
 * line is made plain; nothing is written without an open step.
 */
static void test_progress_json(void **state)
{
	char out[4096];
	int fds[2], saved;
	ssize_t n;
	json_t *lines[4];
	char *p, *nl;
	size_t i = 0;

	(void)state;
	assert_int_equal(setenv("SANDGATE_PROGRESS", "json", 1), 0);
	assert_int_equal(pipe(fds), 0);
	saved = dup(2);
	dup2(fds[1], 2);
	sg_progress_update("before any step");
	sg_progress_begin("create", "creating sandbox %s", "a\"b\nc");
	sg_progress_update("sandbox %s is %s", "x", "pending");
	sg_progress_update("sandbox %s is %s", "x", "pending"); /* unchanged: no line */
	sg_progress_end(SG_E_TIMEOUT);
	sg_progress_end(SG_OK); /* nothing open */
	dup2(saved, 2);
	close(saved);
	close(fds[1]);
	n = read(fds[0], out, sizeof(out) - 1);
	close(fds[0]);
	assert_true(n > 0);
	out[n] = '\0';
	for (p = out; (nl = strchr(p, '\n')) && i < 4; p = nl + 1) {
		*nl = '\0';
		lines[i] = json_loads(p, 0, NULL);
		assert_non_null(lines[i]);
		i++;
	}
	assert_int_equal(i, 3);
	assert_string_equal(json_string_value(json_object_get(lines[0], "event")), "begin");
	assert_string_equal(json_string_value(json_object_get(lines[0], "progress")), "create");
	assert_string_equal(json_string_value(json_object_get(lines[0], "text")),
			    "creating sandbox a b c");
	assert_string_equal(json_string_value(json_object_get(lines[1], "text")),
			    "sandbox x is pending");
	assert_string_equal(json_string_value(json_object_get(lines[2], "event")), "end");
	assert_true(json_is_false(json_object_get(lines[2], "ok")));
	assert_true(json_integer_value(json_object_get(lines[2], "ms")) >= 0);
	for (size_t j = 0; j < i; j++)
		json_decref(lines[j]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buf_invariants),
		cmocka_unit_test(test_slug_digest),
		cmocka_unit_test(test_buf_clipped),
		cmocka_unit_test(test_utf8_seq_and_valid),
		cmocka_unit_test(test_utf8_clip),
		cmocka_unit_test(test_utf8_sanitize),
		cmocka_unit_test(test_err_strings),
		cmocka_unit_test(test_jw),
		cmocka_unit_test(test_jw_words),
		cmocka_unit_test(test_jw_long),
		cmocka_unit_test(test_strv),
		cmocka_unit_test(test_gitattr),
		cmocka_unit_test(test_slug),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_read_all),
		cmocka_unit_test(test_progress_json),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
