/*
 * test_shquote.c - core/shquote.c: exact outputs, then round trips
 * through real shells (/bin/sh, and bash when installed) run with
 * sg_exec_run: every quoted word must come back byte for byte.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/exec.h"
#include "core/shquote.h"
#include "base/limits.h"

static const char *const shell_env[] = { "PATH=/usr/bin:/bin", "LC_ALL=C",
					 NULL };

static void expect_word(const char *in, const char *want)
{
	struct sg_buf b = SG_BUF_INIT(SG_KiB);

	assert_int_equal(sg_shquote(&b, in), SG_OK);
	assert_string_equal(b.p, want);
	sg_buf_release(&b);
}

static void test_words(void **state)
{
	(void)state;
	expect_word("abc", "abc");
	expect_word("a-b_c.d/e:f@g%h+i,j", "a-b_c.d/e:f@g%h+i,j");
	expect_word("/usr/bin/env", "/usr/bin/env");
	expect_word("-n", "-n");
	expect_word("", "''");
	expect_word("a b", "'a b'");
	expect_word("it's", "'it'\\''s'");
	expect_word("'", "''\\'''");
	expect_word("''", "''\\'''\\'''");
	expect_word("A=b", "'A=b'");
	expect_word("=cmd", "'=cmd'");
	expect_word("~", "'~'");
	expect_word("~root/x", "'~root/x'");
	expect_word("$HOME", "'$HOME'");
	expect_word("`id`", "'`id`'");
	expect_word("$(id)", "'$(id)'");
	expect_word("a*b", "'a*b'");
	expect_word("a?b", "'a?b'");
	expect_word("[ab]", "'[ab]'");
	expect_word("{a,b}", "'{a,b}'");
	expect_word("!x", "'!x'");
	expect_word("#c", "'#c'");
	expect_word("a;b", "'a;b'");
	expect_word("a&b", "'a&b'");
	expect_word("a|b", "'a|b'");
	expect_word("a<b>c", "'a<b>c'");
	expect_word("(x)", "'(x)'");
	expect_word("a\\b", "'a\\b'");
	expect_word("a\"b", "'a\"b'");
	expect_word("line\nbreak", "'line\nbreak'");
	expect_word("tab\there", "'tab\there'");
	expect_word("caf\xc3\xa9", "'caf\xc3\xa9'");
	expect_word("\xff", "'\xff'");
}

static void test_argv(void **state)
{
	struct sg_buf b = SG_BUF_INIT(SG_KiB);
	const char *argv[] = { "ls", "-la", "my dir", "", "x'y", NULL };
	const char *reserved[] = { "if", NULL };
	const char *none[] = { NULL };

	(void)state;
	assert_int_equal(sg_shquote_argv(&b, argv), SG_OK);
	/* The command word is quoted even when it is safe. */
	assert_string_equal(b.p, "'ls' -la 'my dir' '' 'x'\\''y'");
	sg_buf_reset(&b);
	assert_int_equal(sg_shquote_argv(&b, reserved), SG_OK);
	assert_string_equal(b.p, "'if'");
	sg_buf_reset(&b);
	assert_int_equal(sg_shquote_argv(&b, none), SG_OK);
	assert_string_equal(b.p, "");
	assert_int_equal(sg_shquote_argv(&b, NULL), SG_OK);
	assert_string_equal(b.p, "");
	sg_buf_release(&b);
}

static void test_too_large(void **state)
{
	struct sg_buf b = SG_BUF_INIT(8);
	const char *argv[] = { "abc", "defgh", NULL };

	(void)state;
	assert_int_equal(sg_shquote(&b, "abcdefgh"), SG_OK);
	sg_buf_reset(&b);
	/* Quotes make it 10 bytes. */
	assert_int_equal(sg_shquote(&b, "abcd efg"), SG_E_TOO_LARGE);
	sg_buf_reset(&b);
	/* 'it'\''s' is 9 bytes. */
	assert_int_equal(sg_shquote(&b, "it's"), SG_E_TOO_LARGE);
	sg_buf_reset(&b);
	assert_int_equal(sg_shquote_argv(&b, argv), SG_E_TOO_LARGE);
	sg_buf_release(&b);
}

/*
 * Run `shell -c "printf '%s\0' <words>"` and check that the NUL-separated
 * output is exactly the words.
 */
static void round_trip(const char *shell, char **words, size_t n)
{
	struct sg_buf script = SG_BUF_INIT(4 * SG_MiB);
	struct sg_exec_result r;
	struct sg_errinfo err = { 0 };
	const char *argv[] = { shell, "-c", NULL, NULL };
	struct sg_child c = { .argv = argv, .envp = shell_env };
	const char *p, *end;

	assert_int_equal(sg_buf_adds(&script, "printf '%s\\0'"), SG_OK);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(sg_buf_addc(&script, ' '), SG_OK);
		assert_int_equal(sg_shquote(&script, words[i]), SG_OK);
	}
	argv[2] = script.p;
	sg_exec_result_init(&r, 4 * SG_MiB);
	assert_int_equal(sg_exec_run(&c, &r, NULL, &err), SG_OK);
	if (r.exit_code != 0)
		fail_msg("%s failed (%d): %s", shell, r.exit_code, r.err.p);
	p = r.out.p;
	end = r.out.p + r.out.len;
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(words[i]);

		if ((size_t)(end - p) < len + 1 || memcmp(p, words[i], len) != 0 ||
		    p[len] != '\0')
			fail_msg("%s: word %zu did not survive: '%s' in '%s'",
				 shell, i, words[i], script.p);
		p += len + 1;
	}
	assert_true(p == end);
	sg_exec_result_release(&r);
	sg_buf_release(&script);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* A random string without NUL; biased towards the bytes shells care about. */
static char *random_word(void)
{
	static const char nasty[] = "'\"\\$`!*?[]{}()<>|&;#~= \t\n%@:,+-./";
	size_t len = rng() % 24;
	char *w = malloc(len + 1);

	assert_non_null(w);
	for (size_t i = 0; i < len; i++) {
		uint64_t x = rng();

		if (x % 3 == 0)
			w[i] = nasty[(x >> 8) % (sizeof(nasty) - 1)];
		else
			w[i] = (char)(1 + (x >> 8) % 255);
	}
	w[len] = '\0';
	return w;
}

static void shells_round_trip(char **words, size_t n)
{
	round_trip("/bin/sh", words, n);
	if (access("/bin/bash", X_OK) == 0)
		round_trip("/bin/bash", words, n);
	if (access("/usr/bin/zsh", X_OK) == 0)
		round_trip("/usr/bin/zsh", words, n);
}

static void test_round_trip_fixed(void **state)
{
	char all[256];
	char *words[] = {
		"", "'", "''", "\"", "\\", "\\'", "$", "$HOME", "${x:-y}",
		"`echo hi`", "$(echo hi)", "*", "?", "[a]", "~", "~/x", "=x",
		"A=b", "-", "--", "-n", "-e", "%s", "%%", "\\n", "!", "!!",
		"#", "a #b", "\n", "\n\n", " ", "\t", "a\rb", "if", "then",
		"{", "}", "caf\xc3\xa9", "\xff\xfe", "\xe2\x82", all, NULL,
	};
	size_t n = sizeof(words) / sizeof(words[0]) - 1;

	(void)state;
	for (int i = 1; i < 256; i++)
		all[i - 1] = (char)i;
	all[255] = '\0';
	shells_round_trip(words, n);
}

static void test_round_trip_random(void **state)
{
	enum { BATCH = 300, ROUNDS = 4 };
	char *words[BATCH];

	(void)state;
	for (int round = 0; round < ROUNDS; round++) {
		for (int i = 0; i < BATCH; i++)
			words[i] = random_word();
		shells_round_trip(words, BATCH);
		for (int i = 0; i < BATCH; i++)
			free(words[i]);
	}
}

/* A whole argv as ssh would hand it over: the shell runs it as argv. */
static void test_round_trip_argv(void **state)
{
	const char *cmd[] = { "printf", "[%s]", "a b", "", "it's", "$x",
			      "\n", NULL };
	struct sg_buf script = SG_BUF_INIT(SG_KiB);
	struct sg_exec_result r;
	struct sg_errinfo err = { 0 };
	const char *argv[] = { "/bin/sh", "-c", NULL, NULL };
	struct sg_child c = { .argv = argv, .envp = shell_env };

	(void)state;
	assert_int_equal(sg_shquote_argv(&script, cmd), SG_OK);
	argv[2] = script.p;
	sg_exec_result_init(&r, SG_KiB);
	assert_int_equal(sg_exec_run(&c, &r, NULL, &err), SG_OK);
	assert_int_equal(r.exit_code, 0);
	assert_string_equal(r.out.p, "[a b][][it's][$x][\n]");
	sg_exec_result_release(&r);
	sg_buf_release(&script);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_words),
		cmocka_unit_test(test_argv),
		cmocka_unit_test(test_too_large),
		cmocka_unit_test(test_round_trip_fixed),
		cmocka_unit_test(test_round_trip_random),
		cmocka_unit_test(test_round_trip_argv),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
