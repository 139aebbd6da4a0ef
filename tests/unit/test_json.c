/*
 * test_json.c - core/json.c against jansson 2.14's own json_loadb.
 *
 * Every input goes through both parsers with every combination of the two
 * flags: both must accept or both reject, and accepted values must be
 * json_equal and also equal under a stricter comparison (same key order,
 * same string lengths and bytes, reals bit for bit, so -0.0 is not 0.0).
 * Every rejection's sentence must be one of the parser's known reasons
 * followed by " at byte N", which is also how the tests prove that no
 * input byte is ever echoed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "base/buf.h"
#include "base/limits.h"

/* The sentences sg_json_parse may give for a rejected input. */
static const char *const reasons[] = {
	"',' or ']' expected",
	"',' or '}' expected",
	"':' expected after an object key",
	"\\u0000 in a string",
	"\\u0000 in an object key",
	"control character in a string",
	"duplicate object key",
	"integer too big",
	"invalid UTF-8 in a string",
	"invalid \\u escape in a string",
	"invalid escape in a string",
	"invalid literal",
	"invalid number",
	"invalid number (leading zero)",
	"invalid value",
	"nesting deeper than 2048 levels",
	"no JSON value before the end of input",
	"object key expected",
	"real number overflow",
	"the top level is not an object or array",
	"unexpected data after the document",
	"unexpected end of input",
	"unexpected end of input in a string",
	"unpaired surrogate escape in a string",
};

static const unsigned all_flags[] = {
	0,
	SG_JSON_REJECT_DUPLICATES,
	SG_JSON_ALLOW_NUL,
	SG_JSON_REJECT_DUPLICATES | SG_JSON_ALLOW_NUL,
};

static size_t jansson_flags(unsigned flags)
{
	return ((flags & SG_JSON_REJECT_DUPLICATES) ? JSON_REJECT_DUPLICATES
						    : 0) |
	       ((flags & SG_JSON_ALLOW_NUL) ? JSON_ALLOW_NUL : 0);
}

/* Equal in everything jansson can tell apart, order included. */
static bool same(const json_t *a, const json_t *b)
{
	if (json_typeof(a) != json_typeof(b))
		return false;
	switch (json_typeof(a)) {
	case JSON_OBJECT: {
		json_t *oa = (json_t *)a, *ob = (json_t *)b;
		void *ia = json_object_iter(oa), *ib = json_object_iter(ob);

		if (json_object_size(a) != json_object_size(b))
			return false;
		for (; ia && ib; ia = json_object_iter_next(oa, ia),
				 ib = json_object_iter_next(ob, ib)) {
			size_t la = json_object_iter_key_len(ia);

			if (la != json_object_iter_key_len(ib) ||
			    memcmp(json_object_iter_key(ia),
				   json_object_iter_key(ib), la) != 0 ||
			    !same(json_object_iter_value(ia),
				  json_object_iter_value(ib)))
				return false;
		}
		return !ia && !ib;
	}
	case JSON_ARRAY:
		if (json_array_size(a) != json_array_size(b))
			return false;
		for (size_t i = 0; i < json_array_size(a); i++)
			if (!same(json_array_get(a, i), json_array_get(b, i)))
				return false;
		return true;
	case JSON_STRING:
		return json_string_length(a) == json_string_length(b) &&
		       memcmp(json_string_value(a), json_string_value(b),
			      json_string_length(a)) == 0;
	case JSON_INTEGER:
		return json_integer_value(a) == json_integer_value(b);
	case JSON_REAL: {
		double x = json_real_value(a), y = json_real_value(b);

		return memcmp(&x, &y, sizeof(x)) == 0;
	}
	default:
		return true; /* true, false, null: the type is the value */
	}
}

/* The input, printably, for a failure report. */
static void show(const char *what, const char *p, size_t n, unsigned flags)
{
	char out[400];
	size_t k = 0;

	for (size_t i = 0; i < n && k + 8 < sizeof(out); i++) {
		unsigned char c = (unsigned char)p[i];

		if (c >= 0x20 && c < 0x7f && c != '\\')
			out[k++] = (char)c;
		else
			k += (size_t)snprintf(out + k, sizeof(out) - k,
					      "\\x%02x", c);
	}
	out[k] = '\0';
	print_message("%s (flags %u, %zu bytes): %s%s\n", what, flags, n, out,
		      k + 8 >= sizeof(out) ? "..." : "");
}

/* The rejection sentence is "<known reason> at byte <offset <= n>". */
static bool good_sentence(const char *msg, size_t n)
{
	const char *at = strstr(msg, " at byte ");
	char *end;
	unsigned long long off;

	if (!at)
		return false;
	off = strtoull(at + 9, &end, 10);
	if (end == at + 9 || *end != '\0' || off > n)
		return false;
	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
		if (strlen(reasons[i]) == (size_t)(at - msg) &&
		    memcmp(msg, reasons[i], (size_t)(at - msg)) == 0)
			return true;
	return false;
}

/*
 * Both parsers on one input and one flag set; fails the test on any
 * disagreement.  Returns whether the input was accepted.
 */
static bool check_one(const char *p, size_t n, unsigned flags)
{
	struct sg_errinfo err = { 0 };
	json_error_t je;
	json_t *want = json_loadb(p, n, jansson_flags(flags), &je);
	json_t *got = json_true(); /* must be overwritten */
	sg_err rc = sg_json_parse(p, n, flags, &got, &err);
	bool ok = true;

	if (!want != !got) {
		show(want ? "jansson accepts, sg_json_parse rejects"
			  : "jansson rejects, sg_json_parse accepts",
		     p, n, flags);
		print_message("  jansson: %s / ours: %s\n",
			      want ? "ok" : je.text, got ? "ok" : err.msg);
		ok = false;
	} else if (want) {
		if (rc != SG_OK || !json_equal(want, got) ||
		    !same(want, got) || got->refcount != 1) {
			show("values differ", p, n, flags);
			ok = false;
		}
	} else if (rc != SG_E_INVALID_ARGUMENT || err.code != rc ||
		   !good_sentence(err.msg, n)) {
		show("bad rejection", p, n, flags);
		print_message("  rc %d, sentence: %s\n", (int)rc, err.msg);
		ok = false;
	}
	json_decref(want);
	json_decref(got);
	if (!ok)
		fail();
	return want != NULL;
}

/* check_one for every flag set; returns acceptance with no flags. */
static bool check_all(const char *p, size_t n)
{
	bool accepted = false;

	for (size_t f = 0; f < sizeof(all_flags) / sizeof(all_flags[0]); f++) {
		bool a = check_one(p, n, all_flags[f]);

		if (all_flags[f] == 0)
			accepted = a;
	}
	return accepted;
}

static void add(struct sg_buf *b, const void *p, size_t n)
{
	assert_int_equal(sg_buf_add(b, p, n), SG_OK);
}

static void adds(struct sg_buf *b, const char *s)
{
	add(b, s, strlen(s));
}

static void addc(struct sg_buf *b, char c, size_t times)
{
	while (times--)
		assert_int_equal(sg_buf_addc(b, c), SG_OK);
}

/* The parser under test alone: the decoded value, or NULL. */
static json_t *parse(const char *p, size_t n, unsigned flags)
{
	json_t *j = NULL;

	if (sg_json_parse(p, n, flags, &j, NULL) != SG_OK)
		assert_null(j);
	return j;
}

/*
 * The corpus.  expect is the outcome with no flags, written down from the
 * JSON grammar and jansson's documentation, so that the corpus also checks
 * jansson itself has not changed under the differential.
 */
struct sample {
	const char *p;
	size_t n;
	char expect; /* 'A'ccept or 'R'eject with flags 0 */
};
#define S(lit, e) { lit, sizeof(lit) - 1, e }

static const struct sample corpus[] = {
	/* Containers and whitespace. */
	S("[]", 'A'),
	S("{}", 'A'),
	S(" \t\r\n[ ] \n", 'A'),
	S("[1,2,3]", 'A'),
	S("{\"a\":1,\"b\":[true,false,null],\"c\":{}}", 'A'),
	S("[[],[[]],{\"x\":[{}]}]", 'A'),
	S("\n\r\t[\n\r\t1\n\r\t,\n\r\t2\n\r\t]\n\r\t", 'A'),
	S("{ \"a\" : 1 , \"b\" : 2 }", 'A'),
	/* Strings and every escape. */
	S("[\"\"]", 'A'),
	S("{\"\":\"\"}", 'A'),
	S("[\"\\\"\"]", 'A'),
	S("[\"\\\\\"]", 'A'),
	S("[\"\\/\"]", 'A'),
	S("[\"\\b\\f\\n\\r\\t\"]", 'A'),
	S("[\"a\\\"b\\\\c\\/d\\be\\ff\\ng\\rh\\ti\"]", 'A'),
	S("[\"\\u0041\\u00e9\\u20AC\\uFFFF\\u007f\\u001F\"]", 'A'),
	S("[\"\\ud83d\\ude00\"]", 'A'),
	S("[\"\\uD83D\\uDE00x\\uD800\\uDC00\"]", 'A'),
	S("[\"\\udbff\\udfff\"]", 'A'),
	S("{\"k\\n\\\"\\u00e9\":\"v\\t\"}", 'A'),
	S("[\"\\x\"]", 'R'),
	S("[\"\\U0041\"]", 'R'),
	S("[\"\\u004\"]", 'R'),
	S("[\"\\u00G1\"]", 'R'),
	S("[\"\\'\"]", 'R'),
	S("[\"\\0\"]", 'R'),
	S("[\"\\\"]", 'R'),
	S("[\"\\", 'R'),
	S("[\"\\u12", 'R'),
	S("[\"abc", 'R'),
	/* Lone and mismatched surrogate escapes. */
	S("[\"\\ud800\"]", 'R'),
	S("[\"\\udc00\"]", 'R'),
	S("[\"\\udfff\\ud800\"]", 'R'),
	S("[\"\\ud800x\"]", 'R'),
	S("[\"\\ud800\\u0041\"]", 'R'),
	S("[\"\\ud800\\ud800\"]", 'R'),
	S("[\"\\ud800\\n\"]", 'R'),
	S("[\"\\ud800\\u12\"]", 'R'),
	S("[\"\\ud800\\", 'R'),
	S("{\"\\udc00\":1}", 'R'),
	/* \u0000: values only with ALLOW_NUL, keys never. */
	S("[\"a\\u0000b\"]", 'R'),
	S("[\"\\u0000\"]", 'R'),
	S("{\"k\":\"\\u0000\\u0000x\"}", 'R'),
	S("{\"\\u0000\":1}", 'R'),
	S("{\"a\\u0000b\":\"c\"}", 'R'),
	/* Raw bytes inside strings. */
	S("[\"a\x01\"]", 'R'),
	S("[\"\x1f\"]", 'R'),
	S("[\"\n\"]", 'R'),
	S("[\"\t\"]", 'R'),
	S("[\"a\0b\"]", 'R'),
	S("[\"\x7f\"]", 'A'),
	S("[\" ~!#$%&'()*+,-./:;<=>?@[]^_`{|}\"]", 'A'),
	/* UTF-8: valid, overlong, surrogates, too big, broken. */
	S("[\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"]", 'A'),
	S("[\"\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf\"]", 'A'),
	S("[\"\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\"]", 'A'),
	S("[\"\xed\x9f\xbf\xee\x80\x80\"]", 'A'),
	S("{\"\xc3\xa9\":\"\xe6\x97\xa5\"}", 'A'),
	S("[\"\xc0\x80\"]", 'R'),
	S("[\"\xc1\xbf\"]", 'R'),
	S("[\"\xe0\x80\x80\"]", 'R'),
	S("[\"\xe0\x9f\xbf\"]", 'R'),
	S("[\"\xf0\x80\x80\x80\"]", 'R'),
	S("[\"\xf0\x8f\xbf\xbf\"]", 'R'),
	S("[\"\xed\xa0\x80\"]", 'R'),
	S("[\"\xed\xbf\xbf\"]", 'R'),
	S("[\"\xf4\x90\x80\x80\"]", 'R'),
	S("[\"\xf5\x80\x80\x80\"]", 'R'),
	S("[\"\xff\"]", 'R'),
	S("[\"\x80\"]", 'R'),
	S("[\"\xbf\"]", 'R'),
	S("[\"\xc3\"]", 'R'),
	S("[\"\xe2\x82\"]", 'R'),
	S("[\"\xc3\x28\"]", 'R'),
	S("[\"\xc3", 'R'),
	S("{\"\xc3\":1}", 'R'),
	S("[1,\xc3\xa9]", 'R'),
	S("\xef\xbb\xbf[]", 'R'),
	/* Numbers. */
	S("[0,-0,1,-1,10,123456789012345678]", 'A'),
	S("[0.0,-0.0,0.5,-0.5,1.5e3,1E3,1e+3,1e-3,-1.25E-2,0e0,0E-0]", 'A'),
	S("[9223372036854775807,-9223372036854775808]", 'A'),
	S("[9223372036854775808]", 'R'),
	S("[-9223372036854775809]", 'R'),
	S("[99999999999999999999999]", 'R'),
	S("[1e400]", 'R'),
	S("[-1e400]", 'R'),
	S("[1e-400,-1e-400,4.9e-324]", 'A'),
	S("[1.7976931348623157e308,-1.7976931348623157e308]", 'A'),
	S("[1.8e308]", 'R'),
	S("[123456789012345678901234567890123456789012345678901234567890"
	  "12345678901234567890.5e-10]", 'A'),
	S("[0.1,0.2,0.30000000000000004,2.2250738585072014e-308]", 'A'),
	S("[01]", 'R'),
	S("[-01]", 'R'),
	S("[00]", 'R'),
	S("[+1]", 'R'),
	S("[.5]", 'R'),
	S("[1.]", 'R'),
	S("[1.e5]", 'R'),
	S("[1e]", 'R'),
	S("[1e+]", 'R'),
	S("[-]", 'R'),
	S("[--1]", 'R'),
	S("[- 1]", 'R'),
	S("[0x10]", 'R'),
	S("[1.5.2]", 'R'),
	S("[1 2]", 'R'),
	S("[Infinity]", 'R'),
	S("[-Infinity]", 'R'),
	S("[NaN]", 'R'),
	S("[1", 'R'),
	S("[-", 'R'),
	S("[1.", 'R'),
	S("[1e", 'R'),
	/* Literals. */
	S("[true,false,null]", 'A'),
	S("{\"t\":true,\"f\":false,\"n\":null}", 'A'),
	S("[True]", 'R'),
	S("[nul]", 'R'),
	S("[nulls]", 'R'),
	S("[truefalse]", 'R'),
	S("[true1]", 'R'),
	S("[t]", 'R'),
	S("[tru", 'R'),
	S("[undefined]", 'R'),
	/* jansson drops one NUL right after a number or a literal. */
	S("[1\0]", 'A'),
	S("[true\0]", 'A'),
	S("[false\0,null\0]", 'A'),
	S("{\"a\":null\0}", 'A'),
	S("[1.5\0,2]", 'A'),
	S("[1e5\0]", 'A'),
	S("[-0\0]", 'A'),
	S("[1\0\0]", 'R'),
	S("[1\0 ]", 'A'),
	S("[1 \0]", 'R'),
	S("[\"a\"\0]", 'R'),
	S("[\0]", 'R'),
	S("[]\0", 'R'),
	S("\0[]", 'R'),
	S("[-\0]", 'R'),
	S("[[]\0]", 'R'),
	S("{\"a\"\0:1}", 'R'),
	/* Structure. */
	S("[1,]", 'R'),
	S("[,1]", 'R'),
	S("[1,,2]", 'R'),
	S("{\"a\":1,}", 'R'),
	S("{,}", 'R'),
	S("{\"a\" 1}", 'R'),
	S("{\"a\":}", 'R'),
	S("{\"a\"}", 'R'),
	S("{1:2}", 'R'),
	S("{a:1}", 'R'),
	S("{'a':1}", 'R'),
	S("{\"a\":1 \"b\":2}", 'R'),
	S("[1}", 'R'),
	S("{\"a\":1]", 'R'),
	S("[\"a\":1]", 'R'),
	S("[", 'R'),
	S("{", 'R'),
	S("]", 'R'),
	S("}", 'R'),
	S("[]]", 'R'),
	S("[][]", 'R'),
	S("[] x", 'R'),
	S("[]\f", 'R'),
	S("[]\v", 'R'),
	S("[]/**/", 'R'),
	/* The top level. */
	S("", 'R'),
	S("   \n", 'R'),
	S("1", 'R'),
	S("-1", 'R'),
	S("\"a\"", 'R'),
	S("true", 'R'),
	S("null", 'R'),
	/* Duplicate keys: an error with the flag, else the last one wins. */
	S("{\"a\":1,\"a\":2}", 'A'),
	S("{\"a\":1,\"b\":2,\"a\":3}", 'A'),
	S("{\"a\":{\"x\":1},\"a\":[2]}", 'A'),
	S("{\"a\":[1],\"a\":{\"y\":2}}", 'A'),
	S("{\"a\":1,\"A\":2}", 'A'),
	S("{\"\\u0061\":1,\"a\":2}", 'A'),
	S("{\"a\":{\"a\":1,\"a\":2}}", 'A'),
	S("[{\"a\":1},{\"a\":2}]", 'A'),
};

static void test_corpus(void **state)
{
	size_t accepted = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(corpus) / sizeof(corpus[0]); i++) {
		const struct sample *s = &corpus[i];
		bool a = check_all(s->p, s->n);

		if (a != (s->expect == 'A')) {
			show(a ? "accepted, expected a rejection"
			       : "rejected, expected acceptance",
			     s->p, s->n, 0);
			fail();
		}
		accepted += a;
	}
	assert_true(sizeof(corpus) / sizeof(corpus[0]) >= 150);
	assert_true(accepted >= 40);
}

/* What the flags change, spelled out rather than only compared. */
static void test_flags(void **state)
{
	static const char dup[] = "{\"a\":1,\"b\":2,\"a\":3}";
	static const char nul[] = "[\"a\\u0000b\",\"\\u0000\"]";
	static const char nul_key[] = "{\"a\\u0000\":1}";
	json_t *j;
	void *it;

	(void)state;
	/* The last duplicate wins, in the place of the first. */
	j = parse(dup, sizeof(dup) - 1, 0);
	assert_non_null(j);
	assert_int_equal(json_object_size(j), 2);
	it = json_object_iter(j);
	assert_string_equal(json_object_iter_key(it), "a");
	assert_int_equal(json_integer_value(json_object_iter_value(it)), 3);
	json_decref(j);
	assert_null(parse(dup, sizeof(dup) - 1, SG_JSON_REJECT_DUPLICATES));

	assert_null(parse(nul, sizeof(nul) - 1, 0));
	j = parse(nul, sizeof(nul) - 1, SG_JSON_ALLOW_NUL);
	assert_non_null(j);
	assert_int_equal(json_string_length(json_array_get(j, 0)), 3);
	assert_memory_equal(json_string_value(json_array_get(j, 0)), "a\0b", 3);
	assert_int_equal(json_string_length(json_array_get(j, 1)), 1);
	assert_int_equal(json_string_value(json_array_get(j, 1))[0], '\0');
	json_decref(j);

	assert_null(parse(nul_key, sizeof(nul_key) - 1, SG_JSON_ALLOW_NUL));
}

/* A few values checked against known answers, not only against jansson. */
static void test_values(void **state)
{
	static const char doc[] =
		"[-0,-0.0,9223372036854775807,-9223372036854775808,1e-400,"
		"\"\\ud83d\\ude00\",\"\\/\",2.5]";
	json_t *j;
	double d;

	(void)state;
	j = parse(doc, sizeof(doc) - 1, 0);
	assert_non_null(j);
	assert_true(json_is_integer(json_array_get(j, 0)));
	assert_int_equal(json_integer_value(json_array_get(j, 0)), 0);
	assert_true(json_is_real(json_array_get(j, 1)));
	d = json_real_value(json_array_get(j, 1));
	assert_true(d == 0.0 && 1 / d < 0);
	assert_true(json_integer_value(json_array_get(j, 2)) == INT64_MAX);
	assert_true(json_integer_value(json_array_get(j, 3)) == INT64_MIN);
	assert_true(json_real_value(json_array_get(j, 4)) == 0.0);
	assert_string_equal(json_string_value(json_array_get(j, 5)),
			    "\xf0\x9f\x98\x80");
	assert_string_equal(json_string_value(json_array_get(j, 6)), "/");
	assert_true(json_real_value(json_array_get(j, 7)) == 2.5);
	json_decref(j);
}

/* The comparison the differential relies on can tell values apart. */
static void test_comparison(void **state)
{
	static const char *const pairs[][2] = {
		{ "[0.0]", "[-0.0]" },
		{ "[1]", "[1.0]" },
		{ "{\"a\":1,\"b\":2}", "{\"b\":2,\"a\":1}" },
		{ "[\"a\\u0000\"]", "[\"a\\u0000\\u0000\"]" },
		{ "[\"a\\u0000b\"]", "[\"a\\u0000c\"]" },
		{ "[true]", "[false]" },
		{ "[[]]", "[{}]" },
		{ "[1,2]", "[1]" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		json_t *a = json_loadb(pairs[i][0], strlen(pairs[i][0]),
				       JSON_ALLOW_NUL, NULL);
		json_t *b = json_loadb(pairs[i][1], strlen(pairs[i][1]),
				       JSON_ALLOW_NUL, NULL);

		assert_non_null(a);
		assert_non_null(b);
		assert_true(same(a, a));
		assert_false(same(a, b));
		json_decref(a);
		json_decref(b);
	}
}

/* Every prefix of a few documents: truncation anywhere. */
static void test_prefixes(void **state)
{
	/* Parenthesised: one literal each, written over several lines. */
	static const char *const docs[] = {
		("{\"a\":[1,-2.5e3,true,false,null,\"x\\u00e9\\ud83d\\ude00\\n\"],"
		 "\"b\":{\"c\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"},\"d\":0,"
		 "\"e\":-0.0,\"f\":[[{}]],\"g\":\"\\\"\\\\\\/\\b\\f\\r\\t\"}"),
		" [ 1 , { \"k\" : \"v\" } , [ ] , 12345678901234 , 1E+2 ] ",
		("{\"long\":\"0123456789abcdefghijklmnopqrstuvwxyz0123456789\","
		 "\"nul\":\"a\\u0000b\",\"dup\":1,\"dup\":2}"),
	};
	size_t accepted = 0, total = 0;

	(void)state;
	for (size_t d = 0; d < sizeof(docs) / sizeof(docs[0]); d++) {
		size_t n = strlen(docs[d]);

		for (size_t k = 0; k <= n; k++, total++)
			accepted += check_all(docs[d], k);
	}
	/* The first two whole, and the second without its last space; the
	 * third holds \u0000, refused without SG_JSON_ALLOW_NUL. */
	assert_int_equal(accepted, 3);
	assert_true(total > 250);
}

/* Nesting at and past jansson's limit of 2048 levels. */
static void nest(struct sg_buf *b, size_t levels, bool objects,
		 const char *inner)
{
	sg_buf_reset(b);
	for (size_t i = 0; i < levels; i++)
		adds(b, objects ? "{\"k\":" : "[");
	adds(b, inner);
	for (size_t i = 0; i < levels; i++)
		adds(b, objects ? "}" : "]");
}

static void test_depth(void **state)
{
	struct sg_buf b = SG_BUF_INIT(SG_MiB);

	(void)state;
	nest(&b, 2048, false, "");
	assert_true(check_all(b.p, b.len));
	nest(&b, 2049, false, "");
	assert_false(check_all(b.p, b.len));
	/* Every value counts a level, a scalar too. */
	nest(&b, 2047, false, "1");
	assert_true(check_all(b.p, b.len));
	nest(&b, 2048, false, "1");
	assert_false(check_all(b.p, b.len));
	nest(&b, 2047, false, "\"s\"");
	assert_true(check_all(b.p, b.len));
	nest(&b, 2048, false, "\"s\"");
	assert_false(check_all(b.p, b.len));
	/* Objects nest the same way (the innermost value is null). */
	nest(&b, 2047, true, "null");
	assert_true(check_all(b.p, b.len));
	nest(&b, 2048, true, "null");
	assert_false(check_all(b.p, b.len));
	nest(&b, 2047, true, "{}");
	assert_true(check_all(b.p, b.len));
	nest(&b, 2048, true, "{}");
	assert_false(check_all(b.p, b.len));
	/* Far past the limit: an error, not a stack overflow. */
	sg_buf_reset(&b);
	addc(&b, '[', 200000);
	assert_false(check_all(b.p, b.len));
	addc(&b, ']', 200000);
	assert_false(check_all(b.p, b.len));
	sg_buf_release(&b);
}

/* Every byte value at every position of a word, in a value and a key. */
static void test_every_byte(void **state)
{
	char doc[64];
	size_t accepted = 0;

	(void)state;
	for (unsigned c = 0; c < 256; c++) {
		for (size_t pos = 0; pos < 18; pos++) {
			size_t n = 0;

			memcpy(doc, "[\"", 2);
			n = 2;
			memset(doc + n, 'a', 18);
			doc[n + pos] = (char)c;
			n += 18;
			memcpy(doc + n, "\"]", 2);
			n += 2;
			accepted += check_one(doc, n, SG_JSON_ALLOW_NUL);

			doc[0] = '{';
			doc[n - 1] = ':';
			memcpy(doc + n, "1}", 2);
			accepted += check_one(doc, n + 2, 0);
		}
	}
	/* 0x20..0x7f but '"' and '\\' in both places. */
	assert_int_equal(accepted, (96 - 2) * 18 * 2);
}

/* UTF-8 sequences far beyond the corpus: every pair of bytes after a
 * high lead byte, and for the leads of three and four bytes every second
 * byte from 0x80 with boundary values for the third and fourth. */
static void test_utf8_sequences(void **state)
{
	static const unsigned char edges[] = { 0x00, 0x41, 0x7f, 0x80,
					       0x8f, 0x90, 0x9f, 0xa0,
					       0xbf, 0xc0, 0xff };
	static const unsigned char lasts[] = { 0x41, 0x80, 0xbf, 0xc0 };
	char doc[16];
	size_t accepted = 0;

	(void)state;
	memcpy(doc, "[\"", 2);
	for (unsigned a = 0x80; a < 0x100; a++) {
		for (unsigned b = 0; b < 0x100; b++) {
			doc[2] = (char)a;
			doc[3] = (char)b;
			memcpy(doc + 4, "\"]", 2);
			accepted += check_one(doc, 6, 0);
		}
	}
	for (unsigned a = 0xe0; a < 0x100; a++) {
		for (unsigned b = 0; b < 0x100; b++) {
			if (b < 0x80 && b != 0x41)
				continue;
			for (size_t c = 0; c < sizeof(edges); c++) {
				for (size_t d = 0; d < sizeof(lasts); d++) {
					doc[2] = (char)a;
					doc[3] = (char)b;
					doc[4] = (char)edges[c];
					doc[5] = (char)lasts[d];
					memcpy(doc + 6, "\"]", 2);
					accepted += check_one(doc, 8, 0);
				}
			}
		}
	}
	assert_true(accepted > 1000);
}

/*
 * Pieces of string: how each is written in JSON and what it decodes to.
 * Escapes and raw multi-byte characters, for the long-string tests.
 */
static const struct piece {
	const char *enc, *dec;
	size_t dec_len;
} pieces[] = {
	{ "\\\"", "\"", 1 },
	{ "\\\\", "\\", 1 },
	{ "\\/", "/", 1 },
	{ "\\b", "\b", 1 },
	{ "\\f", "\f", 1 },
	{ "\\n", "\n", 1 },
	{ "\\r", "\r", 1 },
	{ "\\t", "\t", 1 },
	{ "\\u0041", "A", 1 },
	{ "\\u001f", "\x1f", 1 },
	{ "\\u007F", "\x7f", 1 },
	{ "\\u00e9", "\xc3\xa9", 2 },
	{ "\\u07FF", "\xdf\xbf", 2 },
	{ "\\u0800", "\xe0\xa0\x80", 3 },
	{ "\\u20ac", "\xe2\x82\xac", 3 },
	{ "\\uFFFF", "\xef\xbf\xbf", 3 },
	{ "\\ud83d\\ude00", "\xf0\x9f\x98\x80", 4 },
	{ "\\uD800\\uDC00", "\xf0\x90\x80\x80", 4 },
	{ "\\udbff\\udfff", "\xf4\x8f\xbf\xbf", 4 },
	{ "\\u0000", "\0", 1 },
	{ "\xc2\x80", "\xc2\x80", 2 },
	{ "\xc3\xa9", "\xc3\xa9", 2 },
	{ "\xe2\x82\xac", "\xe2\x82\xac", 3 },
	{ "\xed\x9f\xbf", "\xed\x9f\xbf", 3 },
	{ "\xef\xbf\xbf", "\xef\xbf\xbf", 3 },
	{ "\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80", 4 },
	{ "\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf", 4 },
	{ "\x7f", "\x7f", 1 },
};
#define NPIECES (sizeof(pieces) / sizeof(pieces[0]))

/* Every piece after 0..17 plain bytes and before 0..9: all alignments. */
static void test_alignment(void **state)
{
	struct sg_buf doc = SG_BUF_INIT(SG_KiB), want = SG_BUF_INIT(SG_KiB);

	(void)state;
	for (size_t k = 0; k < NPIECES; k++) {
		for (size_t lead = 0; lead < 18; lead++) {
			for (size_t tail = 0; tail < 10; tail++) {
				json_t *j;

				sg_buf_reset(&doc);
				sg_buf_reset(&want);
				adds(&doc, "[\"");
				addc(&doc, 'x', lead);
				addc(&want, 'x', lead);
				/* Twice, so the second one follows a decode. */
				for (int twice = 0; twice < 2; twice++) {
					adds(&doc, pieces[k].enc);
					add(&want, pieces[k].dec,
					    pieces[k].dec_len);
				}
				addc(&doc, 'y', tail);
				addc(&want, 'y', tail);
				adds(&doc, "\"]");

				assert_true(check_one(doc.p, doc.len,
						      SG_JSON_ALLOW_NUL));
				j = parse(doc.p, doc.len, SG_JSON_ALLOW_NUL);
				assert_non_null(j);
				assert_int_equal(
					json_string_length(json_array_get(j, 0)),
					want.len);
				assert_memory_equal(
					json_string_value(json_array_get(j, 0)),
					want.p, want.len);
				json_decref(j);
			}
		}
	}
	sg_buf_release(&doc);
	sg_buf_release(&want);
}

/* A small deterministic generator (xorshift64*), so failures replay. */
static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1du;
}

static size_t below(size_t n)
{
	return (size_t)(rnd() % n);
}

/* Plain printable bytes, no '"' and no '\\'. */
static void add_plain(struct sg_buf *doc, struct sg_buf *want, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = (char)(0x20 + below(0x5f));

		if (c == '"' || c == '\\')
			c = '.';
		assert_int_equal(sg_buf_addc(doc, c), SG_OK);
		if (want)
			assert_int_equal(sg_buf_addc(want, c), SG_OK);
	}
}

/* A string's body: plain runs of very different lengths and pieces. */
static void add_body(struct sg_buf *doc, struct sg_buf *want, size_t len,
		     bool allow_nul)
{
	size_t start = doc->len;

	while (doc->len - start < len) {
		size_t r = below(100), k;

		if (r < 60)
			add_plain(doc, want, below(r < 5 ? 4000 : 24));
		k = below(NPIECES);
		if (!allow_nul && pieces[k].dec[0] == '\0' &&
		    pieces[k].dec_len == 1)
			continue;
		adds(doc, pieces[k].enc);
		if (want)
			add(want, pieces[k].dec, pieces[k].dec_len);
	}
}

/*
 * A 4 MiB document of long strings under escaped keys; every string is
 * checked against what the generator meant, and the whole against
 * jansson.
 */
static void test_big_document(void **state)
{
	struct sg_buf doc = SG_BUF_INIT(8 * SG_MiB);
	struct sg_buf keys = SG_BUF_INIT(8 * SG_MiB);
	struct sg_buf vals = SG_BUF_INIT(8 * SG_MiB);
	struct sg_buf ends = SG_BUF_INIT(SG_MiB); /* key, value end offsets */
	json_t *j, *ref;
	size_t count = 0, kpos = 0, vpos = 0;
	void *it;

	(void)state;
	rng = 42;
	adds(&doc, "{");
	while (doc.len < 4 * SG_MiB) {
		size_t e[2];
		char key[32];

		if (count)
			adds(&doc, ",");
		/* Unique keys: a counter, then escapes. */
		snprintf(key, sizeof(key), "k%zu|", count);
		adds(&doc, "\"");
		adds(&doc, key);
		adds(&keys, key);
		add_body(&doc, &keys, below(30), false);
		adds(&doc, "\":\"");
		add_body(&doc, &vals, below(4) ? below(300) : below(200000),
			 true);
		adds(&doc, "\"");
		e[0] = keys.len;
		e[1] = vals.len;
		add(&ends, e, sizeof(e));
		count++;
	}
	adds(&doc, "}");

	j = parse(doc.p, doc.len, SG_JSON_ALLOW_NUL);
	assert_non_null(j);
	assert_int_equal(json_object_size(j), count);
	it = json_object_iter(j);
	for (size_t i = 0; i < count; i++, it = json_object_iter_next(j, it)) {
		size_t e[2];
		json_t *v;

		memcpy(e, ends.p + i * sizeof(e), sizeof(e));
		assert_non_null(it);
		assert_int_equal(json_object_iter_key_len(it), e[0] - kpos);
		assert_memory_equal(json_object_iter_key(it), keys.p + kpos,
				    e[0] - kpos);
		v = json_object_iter_value(it);
		assert_int_equal(json_string_length(v), e[1] - vpos);
		assert_memory_equal(json_string_value(v), vals.p + vpos,
				    e[1] - vpos);
		kpos = e[0];
		vpos = e[1];
	}
	ref = json_loadb(doc.p, doc.len, JSON_ALLOW_NUL, NULL);
	assert_non_null(ref);
	assert_true(same(j, ref));
	json_decref(ref);
	json_decref(j);
	/* It holds \u0000 in values, so without the flag it is refused. */
	assert_null(parse(doc.p, doc.len, 0));
	/* One bad byte at the very end of the last long string. */
	doc.p[doc.len - 3] = '\x01';
	assert_false(check_one(doc.p, doc.len, SG_JSON_ALLOW_NUL));

	sg_buf_release(&doc);
	sg_buf_release(&keys);
	sg_buf_release(&vals);
	sg_buf_release(&ends);
}

/* Sentences name the reason and the offset, and never quote the input. */
static void test_error_sentences(void **state)
{
	static const struct {
		const char *doc, *msg;
	} cases[] = {
		{ "{\"token\":\"SECRET\\qSECRET\"}",
		  "invalid escape in a string at byte 16" },
		{ "{\"token\":\"SECRET\x01SECRET\"}",
		  "control character in a string at byte 16" },
		{ "{\"token\":\"SECRET\xc0\xafSECRET\"}",
		  "invalid UTF-8 in a string at byte 16" },
		{ "{\"token\":\"SECRET\\ud800SECRET\"}",
		  "unpaired surrogate escape in a string at byte 16" },
		{ "{\"token\":\"SECRET\\u00zzSECRET\"}",
		  "invalid \\u escape in a string at byte 16" },
		{ "{\"token\":\"SECRET\\u0000SECRET\"}",
		  "\\u0000 in a string at byte 16" },
		{ "{\"token\":\"SECRETSECRET",
		  "unexpected end of input in a string at byte 22" },
		{ "{\"token\":SECRET}", "invalid value at byte 9" },
		{ "{\"token\":trueSECRET}", "invalid literal at byte 9" },
		{ "{\"token\":0123}",
		  "invalid number (leading zero) at byte 9" },
		{ "{\"token\":1e999}", "real number overflow at byte 9" },
		{ "{\"token\":99999999999999999999}",
		  "integer too big at byte 9" },
		{ "{\"token\":1 SECRET}", "',' or '}' expected at byte 11" },
		{ "[1 SECRET]", "',' or ']' expected at byte 3" },
		{ "{\"token\" SECRET}",
		  "':' expected after an object key at byte 9" },
		{ "{SECRET:1}", "object key expected at byte 1" },
		{ "{\"SECRET\":1,\"SECRET\":2}",
		  "duplicate object key at byte 12" },
		{ "{\"SECRET\\u0000\":1}", "\\u0000 in an object key at byte 8" },
		{ "[] SECRET", "unexpected data after the document at byte 3" },
		{ "SECRET", "the top level is not an object or array at byte 0" },
		{ "  ", "no JSON value before the end of input at byte 2" },
		{ "[1,", "unexpected end of input at byte 3" },
		{ "{\"token\":\"SECRET\\", "unexpected end of input in a string "
					  "at byte 17" },
	};
	struct sg_buf deep = SG_BUF_INIT(SG_MiB);

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sg_errinfo err = { 0 };
		json_t *j = json_true();

		assert_int_equal(sg_json_parse(cases[i].doc,
					       strlen(cases[i].doc),
					       SG_JSON_REJECT_DUPLICATES, &j,
					       &err),
				 SG_E_INVALID_ARGUMENT);
		assert_null(j);
		assert_int_equal(err.code, SG_E_INVALID_ARGUMENT);
		assert_string_equal(err.msg, cases[i].msg);
		assert_null(strstr(err.msg, "SECRET"));
		assert_null(strstr(err.msg, "token"));
	}
	nest(&deep, 3000, false, "");
	{
		struct sg_errinfo err = { 0 };
		json_t *j;

		assert_int_equal(sg_json_parse(deep.p, deep.len, 0, &j, &err),
				 SG_E_INVALID_ARGUMENT);
		assert_string_equal(err.msg,
				    "nesting deeper than 2048 levels at byte "
				    "2048");
	}
	/* err is optional. */
	{
		json_t *j;

		assert_int_equal(sg_json_parse("[", 1, 0, &j, NULL),
				 SG_E_INVALID_ARGUMENT);
		assert_null(j);
		assert_int_equal(sg_json_parse(NULL, 0, 0, &j, NULL),
				 SG_E_INVALID_ARGUMENT);
	}
	sg_buf_release(&deep);
}

/* jansson's allocator, failing on the k-th call from now. */
static long alloc_countdown = -1;

static void *failing_malloc(size_t n)
{
	if (alloc_countdown == 0)
		return NULL;
	if (alloc_countdown > 0)
		alloc_countdown--;
	return malloc(n);
}

/* Every allocation jansson makes for the result fails once, in turn. */
static void test_out_of_memory(void **state)
{
	static const char doc[] =
		"{\"a\":[1,2.5,\"x\\ny\",{\"b\":null,\"c\":[true]}],"
		"\"d\\u00e9\":\"0123456789012345678901234567890123456789\","
		"\"e\":{},\"f\":[],\"g\":\"\\ud83d\\ude00\"}";
	json_t *ref = json_loadb(doc, sizeof(doc) - 1, 0, NULL);
	long k;

	(void)state;
	assert_non_null(ref);
	json_set_alloc_funcs(failing_malloc, free);
	for (k = 0; k < 1000; k++) {
		struct sg_errinfo err = { 0 };
		json_t *j = json_true();
		sg_err rc;

		alloc_countdown = k;
		rc = sg_json_parse(doc, sizeof(doc) - 1, 0, &j, &err);
		alloc_countdown = -1;
		if (rc == SG_OK) {
			assert_true(same(j, ref));
			json_decref(j);
			break;
		}
		assert_int_equal(rc, SG_E_INTERNAL);
		assert_null(j);
		assert_string_equal(err.msg, "out of memory while parsing JSON");
	}
	json_set_alloc_funcs(malloc, free);
	/* The document needs a good number of allocations, each seen. */
	assert_true(k > 15 && k < 1000);
	json_decref(ref);
}

/* A random document: every construct, some duplicate keys. */
static void gen_value(struct sg_buf *b, int depth)
{
	static const char *const scalars[] = {
		"0", "-0", "1", "-17", "3.25", "-0.0", "1e10", "2E-3",
		"9223372036854775807", "-9223372036854775808", "true",
		"false", "null", "1.5e300",
	};
	size_t r = below(depth > 4 ? 6 : 10);

	if (r < 3) {
		adds(b, scalars[below(sizeof(scalars) / sizeof(scalars[0]))]);
	} else if (r < 6) {
		adds(b, "\"");
		add_body(b, NULL, below(3) ? below(12) : below(80), true);
		adds(b, "\"");
	} else if (r < 8) {
		size_t n = below(5);

		adds(b, below(2) ? "[" : "[ ");
		for (size_t i = 0; i < n; i++) {
			if (i)
				adds(b, below(4) ? "," : " ,\n");
			gen_value(b, depth + 1);
		}
		adds(b, "]");
	} else {
		size_t n = below(5);

		adds(b, "{");
		for (size_t i = 0; i < n; i++) {
			if (i)
				adds(b, ",");
			adds(b, "\"");
			if (below(3))
				addc(b, "abc"[below(3)], 1);
			else
				add_body(b, NULL, below(6), false);
			adds(b, below(4) ? "\":" : "\" : ");
			gen_value(b, depth + 1);
		}
		adds(b, "}");
	}
}

/* Bytes and fragments that make interesting mutations. */
static const char *const fragments[] = {
	"\"", "\\", "\\u", "\\ud800", "\\udc00", "\\u0000", "\\ud83d\\ude00",
	"1e400", "-0", "01", "true", "nul", "[", "]", "{", "}", ",", ":",
	"\xc3\xa9", "\xed\xa0\x80", "\xc0\x80", "\xf4\x90\x80\x80", " ",
	"\n", "0", ".", "e", "-", "+",
};

static void mutate(struct sg_buf *b)
{
	static const char bytes[] = "\"\\/bfnrtu0123456789abcdefABCDEF-+.eE"
				    "[]{}:, \t\n\r\x01\x1f\x7f\x80\xbf\xc0"
				    "\xc3\xe2\xed\xf0\xf4\xf5\xff";
	size_t pos = b->len ? below(b->len + 1) : 0;

	switch (below(6)) {
	case 0: /* replace a byte */
		if (pos < b->len)
			b->p[pos] = below(4) ? bytes[below(sizeof(bytes))]
					     : (char)below(256);
		break;
	case 1: { /* insert a fragment */
		const char *f = fragments[below(sizeof(fragments) /
						sizeof(fragments[0]))];
		struct sg_buf t = SG_BUF_INIT(SG_MiB);

		add(&t, b->p, pos);
		adds(&t, f);
		add(&t, b->p + pos, b->len - pos);
		sg_buf_reset(b);
		add(b, t.p, t.len);
		sg_buf_release(&t);
		break;
	}
	case 2: /* delete a few bytes */
		if (pos < b->len) {
			size_t k = 1 + below(3);

			if (k > b->len - pos)
				k = b->len - pos;
			memmove(b->p + pos, b->p + pos + k,
				b->len - pos - k);
			b->len -= k;
			b->p[b->len] = '\0';
		}
		break;
	case 3: /* truncate */
		b->len = pos;
		b->p[b->len] = '\0';
		break;
	case 4: /* insert a NUL byte (jansson skips some of them) */
		if (pos < b->len)
			b->p[pos] = '\0';
		break;
	default: /* leave it valid */
		break;
	}
}

/* Thousands of generated documents, most of them then damaged. */
static void test_random_differential(void **state)
{
	struct sg_buf b = SG_BUF_INIT(SG_MiB);
	size_t accepted = 0, rejected = 0;

	(void)state;
	rng = 20240607;
	for (int round = 0; round < 4000; round++) {
		sg_buf_reset(&b);
		if (below(2))
			adds(&b, "[");
		else
			adds(&b, "{\"k\":");
		gen_value(&b, 0);
		adds(&b, b.p[0] == '[' ? "]" : "}");
		for (size_t m = below(4); m > 0; m--)
			mutate(&b);
		if (check_all(b.p, b.len))
			accepted++;
		else
			rejected++;
	}
	/* Both outcomes are common, so both sides really are compared. */
	assert_true(accepted > 1000);
	assert_true(rejected > 1000);
	sg_buf_release(&b);
}

/*
 * sg_json_dump writes what json_dumps writes, byte for byte, and what it
 * writes parses back to the same value; a buffer one byte short refuses.
 */
static void test_dump(void **state)
{
	struct sg_buf doc = SG_BUF_INIT(SG_MiB);
	size_t exact = 0;

	(void)state;
	rng = 77;
	for (int round = 0; round < 4000; round++) {
		struct sg_buf out = SG_BUF_INIT(SG_MiB);
		json_t *v, *back;
		char *ref;

		sg_buf_reset(&doc);
		adds(&doc, "[");
		gen_value(&doc, 0);
		adds(&doc, "]");
		v = json_loadb(doc.p, doc.len, JSON_ALLOW_NUL, NULL);
		if (!v)
			continue; /* a duplicate key or a huge real: not this test's business */
		assert_int_equal(sg_json_dump(v, &out), SG_OK);
		back = json_loadb(out.p, out.len, JSON_ALLOW_NUL, NULL);
		assert_non_null(back);
		assert_true(same(v, back));
		ref = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		assert_non_null(ref);
		assert_int_equal(out.len, strlen(ref));
		assert_memory_equal(out.p, ref, out.len);
		exact++;
		{
			struct sg_buf fits = SG_BUF_INIT(out.len), short1 = SG_BUF_INIT(out.len - 1);

			assert_int_equal(sg_json_dump(v, &fits), SG_OK);
			assert_int_equal(sg_json_dump(v, &short1), SG_E_TOO_LARGE);
			sg_buf_release(&fits);
			sg_buf_release(&short1);
		}
		free(ref);
		json_decref(back);
		json_decref(v);
		sg_buf_release(&out);
	}
	assert_true(exact > 3000);
	sg_buf_release(&doc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_comparison),
		cmocka_unit_test(test_corpus),
		cmocka_unit_test(test_flags),
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_prefixes),
		cmocka_unit_test(test_depth),
		cmocka_unit_test(test_every_byte),
		cmocka_unit_test(test_utf8_sequences),
		cmocka_unit_test(test_alignment),
		cmocka_unit_test(test_big_document),
		cmocka_unit_test(test_error_sentences),
		cmocka_unit_test(test_out_of_memory),
		cmocka_unit_test(test_random_differential),
		cmocka_unit_test(test_dump),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
