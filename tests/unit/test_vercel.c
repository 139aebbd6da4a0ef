/*
 * test_vercel.c - the vercel adapter's pieces that stand alone: the
 * command stream read in pieces cut at every byte (whole streams give the
 * same result, streams cut short are errors, never results), the OIDC
 * claims and the credential rules, the vCPU mapping, the gzip'd tar that
 * fs/write takes (inflated again with zlib and read back) and the shared
 * naming.  The adapter as a whole runs against the fake Vercel in
 * backend/e2e-vercel.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "adapters/cloud.h"
#include "core/ndjson.h"
#include "core/targz.h"
#include "base/limits.h"
#include "vercel/api.h"

/* What Vercel streams for `echo hi` with wait and logs (its SDK's traffic). */
static const char stream_ok[] =
	"{\"command\":{\"id\":\"cmd_1\",\"name\":\"echo\",\"args\":[\"hi\"],\"exitCode\":null}}\n"
	"{\"stream\":\"stdout\",\"data\":\"hi\\n\"}\n"
	"{\"stream\":\"stderr\",\"data\":\"note\\n\"}\n"
	"{\"stream\":\"stdout\",\"data\":\"there \\u00e9\\n\"}\n"
	"{\"command\":{\"id\":\"cmd_1\",\"name\":\"echo\",\"args\":[\"hi\"],\"exitCode\":3,\"durationMs\":60}}\n";

static void feed_in_two(const char *s, size_t len, size_t cut, struct vcl_stream *st)
{
	assert_int_equal(vcl_stream_feed(s, cut, st), SG_OK);
	assert_int_equal(vcl_stream_feed(s + cut, len - cut, st), SG_OK);
}

static void test_stream_every_split(void **state)
{
	size_t len = strlen(stream_ok);

	(void)state;
	for (size_t cut = 0; cut <= len; cut++) {
		struct vcl_stream st;
		struct sg_errinfo err = { 0 };

		vcl_stream_init(&st, SG_KiB);
		feed_in_two(stream_ok, len, cut, &st);
		assert_int_equal(vcl_stream_end(&st, &err), SG_OK);
		assert_true(st.finished);
		assert_int_equal(st.exit_code, 3);
		assert_int_equal(st.out.len, strlen("hi\nthere \xc3\xa9\n"));
		assert_memory_equal(st.out.p, "hi\nthere \xc3\xa9\n", st.out.len);
		assert_int_equal(st.err_total, 5);
		vcl_stream_release(&st);
	}
}

static void test_stream_byte_by_byte(void **state)
{
	struct vcl_stream st;
	struct sg_errinfo err = { 0 };

	(void)state;
	vcl_stream_init(&st, SG_KiB);
	for (size_t i = 0; stream_ok[i]; i++)
		assert_int_equal(vcl_stream_feed(stream_ok + i, 1, &st), SG_OK);
	assert_int_equal(vcl_stream_end(&st, &err), SG_OK);
	assert_int_equal(st.exit_code, 3);
	vcl_stream_release(&st);
}

/* A stream cut anywhere before its end is never a result. */
static void test_stream_cut_anywhere(void **state)
{
	size_t len = strlen(stream_ok);

	(void)state;
	for (size_t cut = 0; cut < len; cut++) {
		struct vcl_stream st;
		struct sg_errinfo err = { 0 };
		sg_err rc;

		vcl_stream_init(&st, SG_KiB);
		assert_int_equal(vcl_stream_feed(stream_ok, cut, &st), SG_OK);
		rc = vcl_stream_end(&st, &err);
		assert_int_equal(rc, SG_E_PROVIDER);
		assert_true(strstr(err.msg, "cut mid-line") || strstr(err.msg, "without the command's exit code"));
		vcl_stream_release(&st);
	}
}

static void test_stream_error_line_and_garbage(void **state)
{
	static const char closed[] =
		"{\"command\":{\"id\":\"c\",\"exitCode\":null}}\n"
		"{\"stream\":\"error\",\"data\":{\"code\":\"sandbox_stream_closed\",\"message\":\"gone\"}}\n";
	struct vcl_stream st;
	struct sg_errinfo err = { 0 };

	(void)state;
	vcl_stream_init(&st, SG_KiB);
	assert_int_equal(vcl_stream_feed(closed, strlen(closed), &st), SG_OK);
	assert_int_equal(vcl_stream_end(&st, &err), SG_E_PROVIDER);
	assert_non_null(strstr(err.msg, "sandbox_stream_closed"));
	vcl_stream_release(&st);

	memset(&err, 0, sizeof(err));
	vcl_stream_init(&st, SG_KiB);
	assert_int_equal(vcl_stream_feed("not json\n", 9, &st), SG_E_PROVIDER);
	assert_int_equal(vcl_stream_end(&st, &err), SG_E_PROVIDER);
	assert_non_null(strstr(err.msg, "could not be read"));
	vcl_stream_release(&st);
}

/* stdout beyond the bound is counted, never kept; a huge line is refused. */
static void test_stream_bounded(void **state)
{
	struct vcl_stream st;
	struct sg_buf line = SG_BUF_INIT(SG_VERCEL_LINE_MAX * 2);
	struct sg_errinfo err = { 0 };

	(void)state;
	vcl_stream_init(&st, 4);
	assert_int_equal(vcl_stream_feed(stream_ok, strlen(stream_ok), &st), SG_OK);
	assert_int_equal(vcl_stream_end(&st, &err), SG_OK);
	assert_int_equal(st.out.len, 4);
	assert_int_equal(st.out_total, strlen("hi\nthere \xc3\xa9\n"));
	vcl_stream_release(&st);

	vcl_stream_init(&st, SG_KiB);
	assert_int_equal(sg_buf_adds(&line, "{\"stream\":\"stdout\",\"data\":\""), SG_OK);
	for (size_t i = 0; i < SG_VERCEL_LINE_MAX / 1024 + 1; i++) {
		char k[1024];

		memset(k, 'a', sizeof(k));
		assert_int_equal(sg_buf_add(&line, k, sizeof(k)), SG_OK);
		/* Fed as it grows: the splitter must refuse before holding it all. */
		if (vcl_stream_feed(k, sizeof(k), &st) != SG_OK)
			break;
		assert_true(i < SG_VERCEL_LINE_MAX / 1024);
	}
	assert_true(st.bad[0] != '\0');
	assert_int_equal(vcl_stream_end(&st, &err), SG_E_PROVIDER);
	vcl_stream_release(&st);
	sg_buf_release(&line);
}

/* The bare splitter: blank lines skipped, CR LF accepted, partial seen. */
static sg_err count_line(const char *line, size_t len, void *payload)
{
	(void)line;
	*(size_t *)payload += len;
	return SG_OK;
}

static void test_ndjson_splitter(void **state)
{
	struct sg_ndjson nd;
	size_t total = 0;

	(void)state;
	sg_ndjson_init(&nd, 16, count_line, &total);
	assert_int_equal(sg_ndjson_feed(&nd, "ab\r\n\n\ncd\nef", 11), SG_OK);
	assert_int_equal(nd.lines, 2);
	assert_int_equal(total, 4);
	assert_true(sg_ndjson_partial(&nd));
	assert_int_equal(sg_ndjson_feed(&nd, "\n", 1), SG_OK);
	assert_false(sg_ndjson_partial(&nd));
	assert_int_equal(total, 6);
	assert_int_equal(sg_ndjson_feed(&nd, "0123456789abcdefg\n", 18), SG_E_TOO_LARGE);
	sg_ndjson_release(&nd);
}

/* A JWT with this payload (the signature part is not read). */
static char *jwt(const char *payload)
{
	unsigned char b64[1024];
	int n = EVP_EncodeBlock(b64, (const unsigned char *)payload, (int)strlen(payload));
	char *out = malloc((size_t)n + 64);

	/* base64url, unpadded, as JWTs carry it. */
	while (n > 0 && b64[n - 1] == '=')
		n--;
	for (int i = 0; i < n; i++)
		b64[i] = b64[i] == '+' ? '-' : b64[i] == '/' ? '_' : b64[i];
	snprintf(out, (size_t)n + 64, "eyJhbGciOiJSUzI1NiJ9.%.*s.c2ln", n, (char *)b64);
	return out;
}

static void test_oidc_claims(void **state)
{
	struct vcl_claims c;
	char *t = jwt("{\"owner_id\":\"team_x\",\"project_id\":\"prj_y\",\"exp\":4102444800,\"sub\":\"owner:x\"}");

	(void)state;
	assert_int_equal(vcl_claims_decode(t, &c), SG_OK);
	assert_string_equal(c.owner_id, "team_x");
	assert_string_equal(c.project_id, "prj_y");
	assert_int_equal(c.exp, 4102444800LL);
	free(t);
	/* Every length modulo 4 of the payload part. */
	for (int pad = 0; pad < 4; pad++) {
		char payload[96];

		snprintf(payload, sizeof(payload), "{\"owner_id\":\"t%.*s\"}", pad, "abc");
		t = jwt(payload);
		assert_int_equal(vcl_claims_decode(t, &c), SG_OK);
		assert_int_equal(strlen(c.owner_id), (size_t)pad + 1);
		free(t);
	}
	assert_int_equal(vcl_claims_decode("not-a-jwt", &c), SG_E_INVALID_ARGUMENT);
	assert_int_equal(vcl_claims_decode("a.!!!!.c", &c), SG_E_INVALID_ARGUMENT);
	t = jwt("[1,2]");
	assert_int_equal(vcl_claims_decode(t, &c), SG_E_INVALID_ARGUMENT);
	free(t);
}

static void clear_env(void)
{
	unsetenv("VERCEL_TOKEN");
	unsetenv("VERCEL_TEAM_ID");
	unsetenv("VERCEL_PROJECT_ID");
	unsetenv("VERCEL_OIDC_TOKEN");
	unsetenv("VERCEL_API_URL");
}

static void test_credentials(void **state)
{
	json_t *raw = json_object();
	struct sg_profile p = { .name = "v", .backend = "vercel", .raw = raw };
	struct vcl_client c;
	struct sg_errinfo err = { 0 };
	char *t;

	(void)state;
	clear_env();
	assert_int_equal(vcl_client_init(&c, &p, &err), SG_E_PERMISSION);
	assert_non_null(strstr(err.msg, "VERCEL_TOKEN"));
	assert_non_null(strstr(err.msg, "VERCEL_OIDC_TOKEN"));

	/* A token without team and project is refused, naming them. */
	setenv("VERCEL_TOKEN", "tok-secret", 1);
	memset(&err, 0, sizeof(err));
	assert_int_equal(vcl_client_init(&c, &p, &err), SG_E_PERMISSION);
	assert_non_null(strstr(err.msg, "VERCEL_TEAM_ID"));
	assert_null(strstr(err.msg, "tok-secret"));
	setenv("VERCEL_TEAM_ID", "team_a", 1);
	setenv("VERCEL_PROJECT_ID", "prj_a", 1);
	setenv("VERCEL_API_URL", "http://127.0.0.1:9/", 1);
	assert_int_equal(vcl_client_init(&c, &p, &err), SG_OK);
	assert_string_equal(c.rest.api, "http://127.0.0.1:9");
	assert_string_equal(c.team, "team_a");
	assert_false(c.oidc);
	vcl_client_release(&c);

	/* OIDC: team and project from the claims. */
	clear_env();
	t = jwt("{\"owner_id\":\"team_o\",\"project_id\":\"prj_o\",\"exp\":4102444800}");
	setenv("VERCEL_OIDC_TOKEN", t, 1);
	free(t);
	assert_int_equal(vcl_client_init(&c, &p, &err), SG_OK);
	assert_string_equal(c.team, "team_o");
	assert_string_equal(c.project, "prj_o");
	assert_string_equal(c.rest.api, VCL_API_DEFAULT);
	assert_true(c.oidc);
	vcl_client_release(&c);

	/* An expired one is refused, clearly. */
	t = jwt("{\"owner_id\":\"team_o\",\"project_id\":\"prj_o\",\"exp\":1000}");
	setenv("VERCEL_OIDC_TOKEN", t, 1);
	free(t);
	memset(&err, 0, sizeof(err));
	assert_int_equal(vcl_client_init(&c, &p, &err), SG_E_PERMISSION);
	assert_non_null(strstr(err.msg, "expired"));
	setenv("VERCEL_OIDC_TOKEN", "garbage", 1);
	memset(&err, 0, sizeof(err));
	assert_int_equal(vcl_client_init(&c, &p, &err), SG_E_INVALID_ARGUMENT);
	clear_env();
	json_decref(raw);
}

static void test_vcpus(void **state)
{
	static const struct {
		double cpus;
		int64_t mem, want;
		bool exact;
	} cases[] = {
		{ 0, 0, 0, true },      { 1, 0, 1, true },      { 0.5, 0, 1, true },
		{ 2, 0, 2, true },      { 3, 0, 4, true },      { 2.5, 0, 4, true },
		{ 2, 4096, 2, true },   { 1, 2048, 1, true },   { 0, 8192, 4, true },
		{ 2, 3000, 2, false },  { 2, 8192, 4, true },   { 0, 6144, 4, false },
		{ 1, 4096, 2, true },   { 4, 1024, 4, false },  { 8, 16384, 8, true },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bool exact;
		int64_t n = vcl_vcpus(cases[i].cpus, cases[i].mem, &exact);

		assert_int_equal(n, cases[i].want);
		assert_int_equal(exact, cases[i].exact);
		assert_true(n <= 1 || n % 2 == 0);
	}
}

/* gunzip all of in into out (at most max). */
static size_t gunzip(const void *in, size_t len, unsigned char *out, size_t max)
{
	z_stream z;

	memset(&z, 0, sizeof(z));
	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = (Bytef *)(uintptr_t)in;
	z.avail_in = (uInt)len;
	z.next_out = out;
	z.avail_out = (uInt)max;
	assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
	inflateEnd(&z);
	return max - z.avail_out;
}

static void test_targz(void **state)
{
	static unsigned char plain[8192];
	char long_name[200];
	struct sg_targz_entry e[2] = {
		{ .name = "tmp/hello.txt", .mode = 0644, .data = "hello\n", .len = 6 },
		{ .name = long_name, .mode = 0700, .data = "x", .len = 1 },
	};
	struct sg_buf out = SG_BUF_INIT(SG_MiB);
	size_t n;
	unsigned sum = 0;

	(void)state;
	snprintf(long_name, sizeof(long_name), "%s/%s", "home/vercel-sandbox/.sandgate/some/deep/dir/with/a/long/path",
		 "and-a-file-name-that-makes-the-whole-name-longer-than-one-hundred-bytes");
	assert_int_equal(sg_targz(e, 2, &out), SG_OK);
	n = gunzip(out.p, out.len, plain, sizeof(plain));
	/* Two headers, two padded bodies, two zero blocks. */
	assert_int_equal(n, 512 * 6);
	assert_string_equal((char *)plain, "tmp/hello.txt");
	assert_memory_equal(plain + 257, "ustar", 6);
	assert_memory_equal(plain + 512, "hello\n", 6);
	assert_string_equal((char *)plain + 100, "0000644");
	/* The checksum counts the header with its own field as spaces. */
	for (int i = 0; i < 512; i++)
		sum += (i >= 148 && i < 156) ? ' ' : plain[i];
	assert_int_equal(strtoul((char *)plain + 148, NULL, 8), sum);
	/* A long name split into ustar's prefix and name. */
	assert_string_equal((char *)plain + 1024 + 345, "home/vercel-sandbox/.sandgate/some/deep/dir/with/a/long/path");
	assert_string_equal((char *)plain + 1024,
			    "and-a-file-name-that-makes-the-whole-name-longer-than-one-hundred-bytes");
	sg_buf_release(&out);
	/* A name that fits no way is refused, not mangled. */
	memset(long_name, 'a', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	assert_int_equal(sg_targz(&e[1], 1, &out), SG_E_INVALID_ARGUMENT);
	sg_buf_release(&out);
	/* Directories and owners, which Docker's archive PUT keeps (docker/). */
	{
		struct sg_targz_entry d[2] = {
			{ .name = "workspace", .mode = 0700, .dir = true, .uid = 65534, .gid = 65534 },
			{ .name = "tmp/x", .mode = 0600, .data = "", .uid = 1000, .gid = 100 },
		};

		assert_int_equal(sg_targz(d, 2, &out), SG_OK);
		n = gunzip(out.p, out.len, plain, sizeof(plain));
		assert_int_equal(n, 512 * 4);
		assert_int_equal(plain[156], '5');
		assert_string_equal((char *)plain + 108, "0177776");
		assert_string_equal((char *)plain + 116, "0177776");
		assert_int_equal(plain[512 + 156], '0');
		assert_string_equal((char *)plain + 512 + 108, "0001750");
		assert_string_equal((char *)plain + 512 + 116, "0000144");
		sg_buf_release(&out);
		/* An id past ustar's seven digits is refused, never cut. */
		d[1].uid = 010000000;
		assert_int_equal(sg_targz(&d[1], 1, &out), SG_E_INVALID_ARGUMENT);
		sg_buf_release(&out);
	}
}

static void test_names(void **state)
{
	char *a = sg_cloud_name("Agent/One two"), *b = sg_cloud_name("Agent/One two"),
	     *c = sg_cloud_name("agent-one-two");

	(void)state;
	assert_string_equal(a, b);
	assert_string_not_equal(a, c);
	assert_true(strncmp(a, "sg-agent-one-two-", 17) == 0);
	assert_true(strlen(a) < SG_CLOUD_NAME_MAX);
	for (const char *p = a; *p; p++)
		assert_true((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-');
	free(a);
	free(b);
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stream_every_split),
		cmocka_unit_test(test_stream_byte_by_byte),
		cmocka_unit_test(test_stream_cut_anywhere),
		cmocka_unit_test(test_stream_error_line_and_garbage),
		cmocka_unit_test(test_stream_bounded),
		cmocka_unit_test(test_ndjson_splitter),
		cmocka_unit_test(test_oidc_claims),
		cmocka_unit_test(test_credentials),
		cmocka_unit_test(test_vcpus),
		cmocka_unit_test(test_targz),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
