/*
 * test_config.c - config/config.c: loading, validation messages, default
 * resolution, narrowing by the binding's environment, forward_env, the
 * default path and the example files.
 *
 * Each test writes its config into a private temporary directory, so the
 * exact messages (which name the file) can be compared whole.
 */
#define _DEFAULT_SOURCE /* realpath */
#include <glob.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "config/config.h"
#include "base/limits.h"

static char dir[64];
static int nfiles;

static int setup(void **state)
{
	size_t n;

	(void)state;
	/* mkdtemp's template ends in six 'X's, written out here. */
	n = (size_t)snprintf(dir, sizeof(dir), "/tmp/sg-test-config-");
	memset(dir + n, 'X', 6);
	dir[n + 6] = '\0';
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char path[128];

	(void)state;
	for (int i = 0; i < nfiles; i++) {
		snprintf(path, sizeof(path), "%s/c%d.json", dir, i);
		unlink(path);
	}
	return rmdir(dir);
}

/* Write json to a fresh file; the path stays valid until the next call. */
static const char *cfg_file(const char *json)
{
	static char path[128];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/c%d.json", dir, nfiles++);
	fp = fopen(path, "w");
	assert_non_null(fp);
	assert_true(fputs(json, fp) >= 0);
	assert_int_equal(fclose(fp), 0);
	return path;
}

static struct sg_config *load_ok(const char *json)
{
	struct sg_errinfo err = { 0 };
	struct sg_config *cfg = NULL;
	sg_err rc = sg_config_load(cfg_file(json), &cfg, &err);

	if (rc)
		fail_msg("load failed: %s", err.msg);
	assert_non_null(cfg);
	return cfg;
}

/* Loading json fails with code and the message "<path><tail>". */
static void load_fails(const char *json, sg_err code, const char *tail)
{
	struct sg_errinfo err = { 0 };
	struct sg_config *cfg = (struct sg_config *)&err;
	const char *path = cfg_file(json);
	char want[512];

	snprintf(want, sizeof(want), "%s%s", path, tail);
	assert_int_equal(sg_config_load(path, &cfg, &err), code);
	assert_null(cfg);
	assert_int_equal(err.code, code);
	assert_string_equal(err.msg, want);
}

/* Profile "lab" on ssh with the extra members `members` is refused. */
static void field_fails(const char *members, const char *tail)
{
	char json[1024], want[512];

	snprintf(json, sizeof(json),
		 "{\"profiles\": {\"lab\": {\"backend\": \"ssh\", %s}}}",
		 members);
	snprintf(want, sizeof(want), ": profile \"lab\": field %s", tail);
	load_fails(json, SG_E_INVALID_ARGUMENT, want);
}

static void field_ok(const char *members)
{
	char json[1024];

	snprintf(json, sizeof(json),
		 "{\"profiles\": {\"lab\": {\"backend\": \"ssh\", %s}}}",
		 members);
	sg_config_free(load_ok(json));
}

/* The host's profile as WUU_EXECUTION_PROFILE carries it, made a narrowing. */
static json_t *host(const char *env)
{
	struct sg_errinfo err = { 0 };
	json_t *e = NULL;

	if (sg_config_host_profile(env, &e, &err))
		fail_msg("host profile refused: %s", err.msg);
	return e;
}

static struct sg_profile *build_ok(const struct sg_config *cfg,
				   const char *name, const char *env)
{
	struct sg_errinfo err = { 0 };
	struct sg_profile *p = NULL;
	json_t *e = host(env);
	sg_err rc = sg_config_profile(cfg, name, e, &p, &err);

	json_decref(e);
	if (rc)
		fail_msg("profile failed: %s", err.msg);
	assert_non_null(p);
	return p;
}

static void build_fails(const struct sg_config *cfg, const char *name,
			const char *env, sg_err code, const char *want)
{
	struct sg_errinfo err = { 0 };
	struct sg_profile *p = (struct sg_profile *)&err;
	json_t *e = host(env);

	assert_int_equal(sg_config_profile(cfg, name, e, &p, &err), code);
	json_decref(e);
	assert_null(p);
	assert_int_equal(err.code, code);
	assert_string_equal(err.msg, want);
}

static size_t count(const char *const *v)
{
	size_t n = 0;

	assert_non_null(v);
	while (v[n])
		n++;
	return n;
}

/* ---- Loading ---------------------------------------------------------- */

static void test_embedded_default(void **state)
{
	struct sg_errinfo err = { 0 };
	struct sg_config *cfg = NULL;
	struct sg_profile *p;
	const char *const *names;

	(void)state;
	assert_int_equal(sg_config_load(NULL, &cfg, &err), SG_OK);
	assert_string_equal(sg_config_path(cfg), "<embedded>");
	assert_string_equal(sg_config_default(cfg), "local");
	names = sg_config_names(cfg);
	assert_int_equal(count(names), 1);
	assert_string_equal(names[0], "local");

	p = build_ok(cfg, NULL, NULL);
	assert_string_equal(p->name, "local");
	assert_string_equal(p->backend, "local");
	assert_null(p->image);
	assert_int_equal(p->network, SG_NET_DEFAULT);
	assert_int_equal(count(p->network_allow), 0);
	assert_int_equal(count(p->forward_env), 0);
	assert_int_equal(count(p->best_effort), 0);
	assert_true(p->cpus == 0);
	assert_int_equal(p->memory_mb, 0);
	assert_int_equal(p->lifetime_seconds, SG_LIFETIME_DEFAULT_S);
	assert_int_equal(p->lifetime_seconds, 600);
	assert_int_equal(p->shutdown_timeout_ms, 0);
	assert_false(p->persistent);
	assert_non_null(p->raw);
	sg_profile_free(p);
	sg_config_free(cfg);
}

static void test_file_errors(void **state)
{
	struct sg_errinfo err = { 0 };
	struct sg_config *cfg = NULL;
	char want[256];
	const char *path;

	(void)state;
	snprintf(want, sizeof(want), "%s/missing.json", dir);
	assert_int_equal(sg_config_load(want, &cfg, &err), SG_E_NOT_FOUND);
	assert_null(cfg);
	snprintf(want, sizeof(want), "%s/missing.json: no such file", dir);
	assert_string_equal(err.msg, want);

	sg_err_clear(&err);
	assert_int_equal(sg_config_load(dir, &cfg, &err),
			 SG_E_INVALID_ARGUMENT);
	snprintf(want, sizeof(want), "%s: not a regular file", dir);
	assert_string_equal(err.msg, want);

	/* Bad JSON: FILE:LINE:COL: and jansson's text. */
	sg_err_clear(&err);
	path = cfg_file("{\n  \"profiles\": }\n");
	assert_int_equal(sg_config_load(path, &cfg, &err),
			 SG_E_INVALID_ARGUMENT);
	snprintf(want, sizeof(want), "%s:2:", path);
	assert_memory_equal(err.msg, want, strlen(want));
	assert_non_null(strstr(err.msg, "unexpected token"));
	assert_null(cfg);
}

static void test_duplicate_keys(void **state)
{
	struct sg_errinfo err = { 0 };
	struct sg_config *cfg = NULL;
	const char *path;

	(void)state;
	path = cfg_file("{\"profiles\": {\"a\": {\"backend\": \"local\","
			" \"cpus\": 1, \"cpus\": 2}}}");
	assert_int_equal(sg_config_load(path, &cfg, &err),
			 SG_E_INVALID_ARGUMENT);
	assert_null(cfg);
	assert_memory_equal(err.msg, path, strlen(path));
	assert_non_null(strstr(err.msg, ":1:"));
	assert_non_null(strstr(err.msg, "duplicate object key"));

	sg_err_clear(&err);
	path = cfg_file("{\"profiles\": {\"a\": {\"backend\": \"local\"},"
			"\n \"a\": {\"backend\": \"ssh\"}}}");
	assert_int_equal(sg_config_load(path, &cfg, &err),
			 SG_E_INVALID_ARGUMENT);
	assert_non_null(strstr(err.msg, ":2:"));
	assert_non_null(strstr(err.msg, "duplicate object key"));
}

static void test_top_level(void **state)
{
	(void)state;
	load_fails("[]", SG_E_INVALID_ARGUMENT,
		   ": the top level must be an object");
	load_fails("{\"profile\": {}}", SG_E_INVALID_ARGUMENT,
		   ": unknown top-level key \"profile\" (only \"default\" "
		   "and \"profiles\")");
	load_fails("{}", SG_E_INVALID_ARGUMENT,
		   ": \"profiles\" must be an object of named profiles");
	load_fails("{\"profiles\": [1]}", SG_E_INVALID_ARGUMENT,
		   ": \"profiles\" must be an object of named profiles");
	load_fails("{\"profiles\": {}}", SG_E_INVALID_ARGUMENT,
		   ": \"profiles\" is empty; define at least one profile");
	load_fails("{\"profiles\": {\"a\": 5}}", SG_E_INVALID_ARGUMENT,
		   ": profile \"a\": must be an object");
	load_fails("{\"profiles\": {\"a b\": {\"backend\": \"local\"}}}",
		   SG_E_INVALID_ARGUMENT,
		   ": profile name \"a b\" must be 1 to 63 letters, digits, "
		   "'.', '_' or '-'");
	load_fails("{\"profiles\": {\"\": {\"backend\": \"local\"}}}",
		   SG_E_INVALID_ARGUMENT,
		   ": profile name \"\" must be 1 to 63 letters, digits, "
		   "'.', '_' or '-'");
	/* A quote in a name is not echoed raw. */
	load_fails("{\"profiles\": {\"a\\\"b\": {\"backend\": \"local\"}}}",
		   SG_E_INVALID_ARGUMENT,
		   ": profile name \"a?b\" must be 1 to 63 letters, digits, "
		   "'.', '_' or '-'");
}

static void test_names_in_file_order(void **state)
{
	struct sg_config *cfg;
	const char *const *names;

	(void)state;
	cfg = load_ok("{\"default\": \"b\", \"profiles\": {"
		      "\"zeta\": {\"backend\": \"local\"},"
		      "\"b\": {\"backend\": \"local\"},"
		      "\"alpha.1\": {\"backend\": \"local\"}}}");
	names = sg_config_names(cfg);
	assert_int_equal(count(names), 3);
	assert_string_equal(names[0], "zeta");
	assert_string_equal(names[1], "b");
	assert_string_equal(names[2], "alpha.1");
	sg_config_free(cfg);
}

static void test_default_resolution(void **state)
{
	struct sg_config *cfg;
	struct sg_profile *p;

	(void)state;
	/* The only profile. */
	cfg = load_ok("{\"profiles\": {\"lab\": {\"backend\": \"ssh\"}}}");
	assert_string_equal(sg_config_default(cfg), "lab");
	p = build_ok(cfg, NULL, NULL);
	assert_string_equal(p->name, "lab");
	sg_profile_free(p);
	sg_config_free(cfg);

	/* Several, one of them "local". */
	cfg = load_ok("{\"profiles\": {\"lab\": {\"backend\": \"ssh\"},"
		      " \"local\": {\"backend\": \"local\"}}}");
	assert_string_equal(sg_config_default(cfg), "local");
	sg_config_free(cfg);

	/* Explicit wins over "local". */
	cfg = load_ok("{\"default\": \"lab\", \"profiles\": {"
		      "\"local\": {\"backend\": \"local\"},"
		      " \"lab\": {\"backend\": \"ssh\"}}}");
	assert_string_equal(sg_config_default(cfg), "lab");
	p = build_ok(cfg, NULL, NULL);
	assert_string_equal(p->backend, "ssh");
	sg_profile_free(p);
	p = build_ok(cfg, "local", NULL);
	assert_string_equal(p->backend, "local");
	sg_profile_free(p);
	sg_config_free(cfg);

	load_fails("{\"profiles\": {\"a\": {\"backend\": \"ssh\"},"
		   " \"b\": {\"backend\": \"ssh\"}}}",
		   SG_E_INVALID_ARGUMENT,
		   ": no \"default\" and no profile named \"local\" to fall "
		   "back on; set \"default\" (profiles: a, b)");
	load_fails("{\"default\": \"c\", \"profiles\": {"
		   "\"a\": {\"backend\": \"ssh\"},"
		   " \"b\": {\"backend\": \"ssh\"}}}",
		   SG_E_INVALID_ARGUMENT,
		   ": \"default\" names no profile: \"c\" (profiles: a, b)");
	load_fails("{\"default\": 1, \"profiles\": {"
		   "\"a\": {\"backend\": \"ssh\"}}}",
		   SG_E_INVALID_ARGUMENT,
		   ": \"default\" must be a profile's name");
}

static void test_unknown_profile(void **state)
{
	struct sg_config *cfg;
	char want[256];

	(void)state;
	cfg = load_ok("{\"default\": \"a\", \"profiles\": {"
		      "\"a\": {\"backend\": \"local\"},"
		      " \"b\": {\"backend\": \"ssh\"}}}");
	snprintf(want, sizeof(want), "no profile \"nope\" in %s (profiles: a, b)",
		 sg_config_path(cfg));
	build_fails(cfg, "nope", NULL, SG_E_NOT_FOUND, want);
	sg_config_free(cfg);
}

/* ---- Field types ------------------------------------------------------ */

static void test_backend_required(void **state)
{
	(void)state;
	load_fails("{\"profiles\": {\"lab\": {\"image\": \"x\"}}}",
		   SG_E_INVALID_ARGUMENT,
		   ": profile \"lab\": field \"backend\": is required (the "
		   "adapter's name, e.g. \"local\")");
	load_fails("{\"profiles\": {\"lab\": {\"backend\": 5}}}",
		   SG_E_INVALID_ARGUMENT,
		   ": profile \"lab\": field \"backend\": must be a non-empty "
		   "string");
	load_fails("{\"profiles\": {\"lab\": {\"backend\": \"\"}}}",
		   SG_E_INVALID_ARGUMENT,
		   ": profile \"lab\": field \"backend\": must be a non-empty "
		   "string");
}

static void test_string_fields(void **state)
{
	static const char *const names[] = {
		"image", "snapshot", "workspace", "user", "host_workspace",
		"host", "identity_file", "known_hosts_file", "worker", "python",
	};
	char members[128], tail[128];

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(tail, sizeof(tail),
			 "\"%s\": must be a non-empty string", names[i]);
		snprintf(members, sizeof(members), "\"%s\": 5", names[i]);
		field_fails(members, tail);
		snprintf(members, sizeof(members), "\"%s\": \"\"", names[i]);
		field_fails(members, tail);
		snprintf(members, sizeof(members), "\"%s\": [\"a\"]", names[i]);
		field_fails(members, tail);
		snprintf(members, sizeof(members), "\"%s\": \"ok\"", names[i]);
		field_ok(members);
	}
}

static void test_bool_fields(void **state)
{
	static const char *const names[] = {
		"persistent", "shared", "mount_read_only",
	};
	char members[128], tail[128];

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(tail, sizeof(tail), "\"%s\": must be true or false",
			 names[i]);
		snprintf(members, sizeof(members), "\"%s\": \"yes\"", names[i]);
		field_fails(members, tail);
		snprintf(members, sizeof(members), "\"%s\": 1", names[i]);
		field_fails(members, tail);
		snprintf(members, sizeof(members), "\"%s\": null", names[i]);
		field_fails(members, tail);
		snprintf(members, sizeof(members), "\"%s\": false", names[i]);
		field_ok(members);
	}
}

static void test_number_fields(void **state)
{
	(void)state;
	field_fails("\"cpus\": 0", "\"cpus\": must be a positive number");
	field_fails("\"cpus\": -1.5", "\"cpus\": must be a positive number");
	field_fails("\"cpus\": \"2\"", "\"cpus\": must be a positive number");
	field_fails("\"cpus\": true", "\"cpus\": must be a positive number");
	field_ok("\"cpus\": 0.25");
	field_ok("\"cpus\": 8");
	/* The kernel's smallest quota and a bound the quota's integer holds. */
	field_fails("\"cpus\": 0.001",
		    "\"cpus\": must be a number from 0.01 to 4096");
	field_fails("\"cpus\": 4096.5",
		    "\"cpus\": must be a number from 0.01 to 4096");
	field_fails("\"cpus\": 1e300",
		    "\"cpus\": must be a number from 0.01 to 4096");
	field_ok("\"cpus\": 0.01");
	field_ok("\"cpus\": 4096");

	field_fails("\"memory_mb\": 0",
		    "\"memory_mb\": must be a positive integer");
	field_fails("\"memory_mb\": 1.5",
		    "\"memory_mb\": must be a positive integer");
	field_fails("\"memory_mb\": \"4096\"",
		    "\"memory_mb\": must be a positive integer");
	field_ok("\"memory_mb\": 1");
	/* Its byte count must fit 64 bits: 2^44 MiB would not. */
	field_fails("\"memory_mb\": 16777217",
		    "\"memory_mb\": must be an integer from 1 to 16777216");
	field_fails("\"memory_mb\": 17592186044416",
		    "\"memory_mb\": must be an integer from 1 to 16777216");
	field_ok("\"memory_mb\": 16777216");

	field_fails("\"port\": 0",
		    "\"port\": must be an integer from 1 to 65535");
	field_fails("\"port\": 65536",
		    "\"port\": must be an integer from 1 to 65535");
	field_fails("\"port\": \"22\"",
		    "\"port\": must be an integer from 1 to 65535");
	field_ok("\"port\": 65535");

	field_fails("\"lifetime_seconds\": -1",
		    "\"lifetime_seconds\": must be an integer from 0 to "
		    "2147483647");
	field_fails("\"lifetime_seconds\": 60.5",
		    "\"lifetime_seconds\": must be an integer from 0 to "
		    "2147483647");
	field_fails("\"lifetime_seconds\": 2147483648",
		    "\"lifetime_seconds\": must be an integer from 0 to "
		    "2147483647");
	field_ok("\"lifetime_seconds\": 0");

	field_fails("\"shutdown_timeout_ms\": -1",
		    "\"shutdown_timeout_ms\": must be an integer from 0 to "
		    "2147483647");
	field_fails("\"shutdown_timeout_ms\": 2147483648",
		    "\"shutdown_timeout_ms\": must be an integer from 0 to "
		    "2147483647");
	field_fails("\"shutdown_timeout_ms\": \"60000\"",
		    "\"shutdown_timeout_ms\": must be an integer from 0 to "
		    "2147483647");
	field_ok("\"shutdown_timeout_ms\": 2147483647");
	field_ok("\"shutdown_timeout_ms\": 0");
}

static void test_network_field(void **state)
{
	static const char shape[] =
		"\"network\": must be \"none\", \"default\" (or \"enabled\") or "
		"{\"allow\": [CIDR or domain, ...]}";
	static const char empty[] =
		"\"network\": \"allow\" must list at least one CIDR or "
		"domain (\"none\" allows nothing)";

	(void)state;
	field_fails("\"network\": \"all\"", shape);
	field_fails("\"network\": \"\"", shape);
	field_ok("\"network\": \"enabled\"");
	field_fails("\"network\": true", shape);
	field_fails("\"network\": [\"10.0.0.0/8\"]", shape);
	field_fails("\"network\": {\"allow\": []}", empty);
	field_fails("\"network\": {}", empty);
	field_fails("\"network\": {\"allow\": \"10.0.0.0/8\"}", empty);
	field_fails("\"network\": {\"allow\": [\"a.com\"], \"deny\": []}",
		    "\"network\": unknown key \"deny\" (only \"allow\")");
	field_fails("\"network\": {\"allow\": [\"\"]}",
		    "\"network\": \"allow\" entries must be non-empty strings");
	field_fails("\"network\": {\"allow\": [5]}",
		    "\"network\": \"allow\" entries must be non-empty strings");
	field_fails("\"network\": {\"allow\": [\"10.0.0.1\"]}",
		    "\"network\": \"10.0.0.1\" is an address; write it as a "
		    "CIDR with a prefix (\"10.0.0.1/32\")");
	field_fails("\"network\": {\"allow\": [\"fd00::1\"]}",
		    "\"network\": \"fd00::1\" is an address; write it as a "
		    "CIDR with a prefix (\"fd00::1/128\")");
	static const char *const bad[] = {
		"10.0.0.0/33", "10.0.0.0/", "10.0.0.0/08", "10.0.0/8",
		"10.0.0.0/8x", "2001:db8::/129", "example.com/24",
		"bad_domain.com", "-a.com", "a-.com", "a..com", ".com",
		"com.", "1.2.3", "*.", "a.*.com", "exa mple.com",
	};
	char members[128], tail[160];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(members, sizeof(members),
			 "\"network\": {\"allow\": [\"%s\"]}", bad[i]);
		snprintf(tail, sizeof(tail),
			 "\"network\": \"%s\" is neither a CIDR "
			 "(address/prefix) nor a domain name", bad[i]);
		field_fails(members, tail);
	}
	field_ok("\"network\": \"none\"");
	field_ok("\"network\": \"default\"");
	field_ok("\"network\": {\"allow\": [\"10.0.0.0/8\", \"0.0.0.0/0\","
		 " \"fd00::/8\", \"::1/128\", \"example.com\","
		 " \"*.githubusercontent.com\", \"localhost\", \"x-1.a9.io\"]}");
}

static void test_forward_env_field(void **state)
{
	(void)state;
	field_fails("\"forward_env\": \"HOME\"",
		    "\"forward_env\": must be a list of variable names or an "
		    "object of names to string values");
	field_fails("\"forward_env\": [\"1FOO\"]",
		    "\"forward_env\": \"1FOO\" is not a valid variable name");
	field_fails("\"forward_env\": [\"A-B\"]",
		    "\"forward_env\": \"A-B\" is not a valid variable name");
	field_fails("\"forward_env\": [\"A=B\"]",
		    "\"forward_env\": \"A=B\" is not a valid variable name");
	field_fails("\"forward_env\": [\"OK\", 5]",
		    "\"forward_env\": entry 1 must be a variable name");
	field_fails("\"forward_env\": [\"A\", \"B\", \"A\"]",
		    "\"forward_env\": lists A twice");
	field_fails("\"forward_env\": {\"9X\": \"v\"}",
		    "\"forward_env\": \"9X\" is not a valid variable name");
	/* The value is never repeated in the message. */
	field_fails("\"forward_env\": {\"TOKEN\": 12345}",
		    "\"forward_env\": the value of TOKEN must be a string "
		    "without NUL bytes");
	field_ok("\"forward_env\": [\"_A\", \"b2\"]");
	field_ok("\"forward_env\": {\"A\": \"\", \"B\": \"x=y\"}");
	field_ok("\"forward_env\": []");
}

static void test_best_effort_field(void **state)
{
	(void)state;
	field_fails("\"best_effort\": \"network\"",
		    "\"best_effort\": must be a list of field names");
	field_fails("\"best_effort\": [1]",
		    "\"best_effort\": entry 0 must be a field name");
	field_fails("\"best_effort\": [\"netwrk\"]",
		    "\"best_effort\": \"netwrk\" is not a field of this "
		    "profile");
	field_fails("\"best_effort\": [\"backend\"]",
		    "\"best_effort\": \"backend\" cannot be best-effort");
	field_fails("\"best_effort\": [\"best_effort\"]",
		    "\"best_effort\": \"best_effort\" cannot be best-effort");
	/* A known field, and a backend's own field the profile sets. */
	field_ok("\"best_effort\": [\"network\", \"cpus\", \"target\"],"
		 " \"target\": \"us\"");
}

static void test_first_error_in_file_order(void **state)
{
	(void)state;
	load_fails("{\"profiles\": {"
		   "\"a\": {\"backend\": \"ssh\", \"port\": 0, \"cpus\": 0},"
		   "\"b\": {\"backend\": \"ssh\", \"memory_mb\": 0}}}",
		   SG_E_INVALID_ARGUMENT,
		   ": profile \"a\": field \"port\": must be an integer from "
		   "1 to 65535");
	load_fails("{\"profiles\": {"
		   "\"a\": {\"backend\": \"ssh\"},"
		   "\"b\": {\"backend\": \"ssh\", \"memory_mb\": 0}}}",
		   SG_E_INVALID_ARGUMENT,
		   ": profile \"b\": field \"memory_mb\": must be a positive "
		   "integer");
}

/* ---- Building --------------------------------------------------------- */

static void test_full_profile(void **state)
{
	struct sg_config *cfg;
	struct sg_profile *p;

	(void)state;
	cfg = load_ok("{\"profiles\": {\"all\": {"
		      "\"backend\": \"fake\", \"image\": \"img.sif\","
		      " \"snapshot\": \"snap\", \"workspace\": \"/workspace\","
		      " \"user\": \"agent\", \"host_workspace\": \"/srv/p\","
		      " \"mount_read_only\": true,"
		      " \"network\": {\"allow\": [\"10.0.0.0/8\", \"a.io\"]},"
		      " \"cpus\": 1.5, \"memory_mb\": 3072,"
		      " \"persistent\": true, \"shared\": true,"
		      " \"lifetime_seconds\": 30,"
		      " \"shutdown_timeout_ms\": 90000,"
		      " \"forward_env\": {\"LANG_X\": \"C.UTF-8\"},"
		      " \"host\": \"box\", \"identity_file\": \"/k\","
		      " \"known_hosts_file\": \"/kh\", \"port\": 2222,"
		      " \"worker\": \"w\", \"python\": \"/usr/bin/python3\","
		      " \"best_effort\": [\"cpus\"],"
		      " \"fake_knob\": 7,"
		      " \"command\": [\"ignored\"]}}}");
	p = build_ok(cfg, "all", NULL);
	/* The profile outlives the config it came from. */
	sg_config_free(cfg);
	assert_string_equal(p->name, "all");
	assert_string_equal(p->backend, "fake");
	assert_string_equal(p->image, "img.sif");
	assert_string_equal(p->snapshot, "snap");
	assert_string_equal(p->workspace, "/workspace");
	assert_string_equal(p->user, "agent");
	assert_string_equal(p->host_workspace, "/srv/p");
	assert_true(p->mount_read_only);
	assert_int_equal(p->network, SG_NET_ALLOW);
	assert_int_equal(count(p->network_allow), 2);
	assert_string_equal(p->network_allow[0], "10.0.0.0/8");
	assert_string_equal(p->network_allow[1], "a.io");
	assert_true(p->cpus == 1.5);
	assert_int_equal(p->memory_mb, 3072);
	assert_true(p->persistent);
	assert_true(p->shared);
	assert_int_equal(p->lifetime_seconds, 30);
	assert_int_equal(p->shutdown_timeout_ms, 90000);
	assert_int_equal(count(p->forward_env), 1);
	assert_string_equal(p->forward_env[0], "LANG_X=C.UTF-8");
	assert_string_equal(p->host, "box");
	assert_string_equal(p->identity_file, "/k");
	assert_string_equal(p->known_hosts_file, "/kh");
	assert_int_equal(p->port, 2222);
	assert_int_equal(count(p->best_effort), 1);
	assert_string_equal(p->best_effort[0], "cpus");
	/* Backend fields stay in raw for the adapter. */
	assert_int_equal(json_integer_value(json_object_get(p->raw,
							    "fake_knob")), 7);
	assert_true(json_is_array(json_object_get(p->raw, "command")));
	sg_profile_free(p);
	sg_profile_free(NULL);
}

static void test_lifetime_mapping(void **state)
{
	struct sg_config *cfg;
	struct sg_profile *p;

	(void)state;
	cfg = load_ok("{\"default\": \"zero\", \"profiles\": {"
		      "\"zero\": {\"backend\": \"local\","
		      " \"lifetime_seconds\": 0},"
		      "\"absent\": {\"backend\": \"local\"},"
		      "\"short\": {\"backend\": \"local\","
		      " \"lifetime_seconds\": 30}}}");
	p = build_ok(cfg, "zero", NULL);
	assert_int_equal(p->lifetime_seconds, 600);
	sg_profile_free(p);
	p = build_ok(cfg, "absent", NULL);
	assert_int_equal(p->lifetime_seconds, 600);
	sg_profile_free(p);
	p = build_ok(cfg, "short", NULL);
	assert_int_equal(p->lifetime_seconds, 30);
	sg_profile_free(p);
	/*
	 * The host's profile may shorten it, 0 counting as 600 on the
	 * operator's side and as no request on the host's.
	 */
	p = build_ok(cfg, "short", "{\"lifetime_seconds\": 0}");
	assert_int_equal(p->lifetime_seconds, 30);
	sg_profile_free(p);
	p = build_ok(cfg, "short", "{\"lifetime_seconds\": 10}");
	assert_int_equal(p->lifetime_seconds, 10);
	sg_profile_free(p);
	p = build_ok(cfg, "absent", "{\"lifetime_seconds\": 600}");
	assert_int_equal(p->lifetime_seconds, 600);
	sg_profile_free(p);
	build_fails(cfg, "short", "{\"lifetime_seconds\": 7200}", SG_E_PERMISSION,
		    "WUU_EXECUTION_PROFILE: field \"lifetime_seconds\": 7200 exceeds "
		    "the operator's profile's 30");
	build_fails(cfg, "zero", "{\"lifetime_seconds\": 601}", SG_E_PERMISSION,
		    "WUU_EXECUTION_PROFILE: field \"lifetime_seconds\": 601 exceeds "
		    "the operator's profile's 600");
	sg_config_free(cfg);
}

/* ---- Narrowing -------------------------------------------------------- */

static const char narrow_cfg[] =
	"{\"default\": \"lab\", \"profiles\": {"
	"\"lab\": {\"backend\": \"fake\", \"image\": \"debian:12\","
	" \"cpus\": 2, \"memory_mb\": 4096,"
	" \"network\": {\"allow\": [\"10.0.0.0/8\", \"*.example.com\","
	" \"fd00::/8\", \"pypi.org\"]},"
	" \"mount_read_only\": true, \"persistent\": true, \"shared\": true,"
	" \"lifetime_seconds\": 300,"
	" \"forward_env\": {\"A\": \"1\", \"Z\": \"26\"},"
	" \"best_effort\": [\"cpus\", \"network\"], \"fake_knob\": 2},"
	"\"open\": {\"backend\": \"local\"},"
	"\"sealed\": {\"backend\": \"local\", \"network\": \"none\"}}}";

static void test_narrowing_accepted(void **state)
{
	struct sg_config *cfg;
	struct sg_profile *p;

	(void)state;
	cfg = load_ok(narrow_cfg);
	/* The host's own launch fields (its command entry) ask nothing. */
	p = build_ok(cfg, "lab",
		     "{\"backend\": \"command\", \"command\": [\"sandgate\"],"
		     " \"shutdown_grace_ms\": 90000, \"worker\": \"wuu\","
		     " \"python\": \"python3\", \"workspace\": \"/workspace\","
		     " \"forward_env\": [\"GITHUB_TOKEN\"],"
		     " \"cpus\": 1, \"memory_mb\": 2048,"
		     " \"network\": {\"allow\": [\"10.1.0.0/16\","
		     " \"api.example.com\", \"*.cdn.example.com\","
		     " \"fd00:1::/32\", \"PyPI.org\"]},"
		     " \"persistent\": true, \"shared\": true,"
		     " \"mount_read_only\": true, \"lifetime_seconds\": 60,"
		     " \"shutdown_timeout_ms\": 5000, \"image\": \"debian:12\","
		     " \"fake_knob\": 2, \"best_effort\": [\"cpus\"]}");
	/* The host's copy is ours: nothing points into the caller's JSON. */
	assert_string_equal(p->backend, "fake");
	assert_string_equal(p->image, "debian:12");
	assert_null(p->workspace);
	assert_true(p->cpus == 1);
	assert_int_equal(p->memory_mb, 2048);
	assert_int_equal(p->network, SG_NET_ALLOW);
	assert_int_equal(count(p->network_allow), 5);
	assert_string_equal(p->network_allow[0], "10.1.0.0/16");
	assert_string_equal(p->network_allow[4], "PyPI.org");
	assert_true(p->persistent);
	assert_true(p->shared);
	assert_true(p->mount_read_only);
	assert_int_equal(p->lifetime_seconds, 60);
	assert_int_equal(p->shutdown_timeout_ms, 5000);
	assert_int_equal(count(p->best_effort), 1);
	assert_string_equal(p->best_effort[0], "cpus");
	/* The forwarded variables are the operator's alone. */
	assert_int_equal(count(p->forward_env), 2);
	assert_string_equal(p->forward_env[0], "A=1");
	assert_string_equal(p->forward_env[1], "Z=26");
	sg_profile_free(p);

	/* Equal values are not widening. */
	p = build_ok(cfg, "lab", "{\"cpus\": 2, \"memory_mb\": 4096,"
			       " \"network\": {\"allow\": [\"10.0.0.0/8\"]},"
			       " \"best_effort\": [\"network\", \"cpus\"]}");
	assert_true(p->cpus == 2);
	assert_int_equal(p->memory_mb, 4096);
	sg_profile_free(p);

	/*
	 * Zero values ask for nothing (the host's encoder omits them): the
	 * operator's persistent, shared and mount_read_only stand.
	 */
	p = build_ok(cfg, "lab", "{\"persistent\": false, \"shared\": false,"
			       " \"mount_read_only\": false, \"cpus\": 0,"
			       " \"network\": \"\", \"image\": \"\"}");
	assert_true(p->persistent);
	assert_true(p->shared);
	assert_true(p->mount_read_only);
	assert_true(p->cpus == 2);
	assert_int_equal(count(p->network_allow), 4);
	sg_profile_free(p);

	/* A profile without resources takes the host's. */
	p = build_ok(cfg, "open", "{\"cpus\": 16, \"memory_mb\": 65536}");
	assert_true(p->cpus == 16);
	assert_int_equal(p->memory_mb, 65536);
	assert_false(p->persistent);
	sg_profile_free(p);

	/* An empty or absent host profile changes nothing. */
	p = build_ok(cfg, "lab", "{}");
	assert_true(p->cpus == 2);
	assert_int_equal(count(p->network_allow), 4);
	assert_int_equal(count(p->forward_env), 2);
	sg_profile_free(p);
	p = build_ok(cfg, "lab", "");
	assert_true(p->cpus == 2);
	sg_profile_free(p);
	sg_config_free(cfg);
}

static void test_narrowing_refused(void **state)
{
	struct sg_config *cfg;

	(void)state;
	cfg = load_ok(narrow_cfg);
	build_fails(cfg, "lab", "{\"cpus\": 8}", SG_E_PERMISSION,
		    "WUU_EXECUTION_PROFILE: field \"cpus\": 8 exceeds the operator's profile's 2");
	build_fails(cfg, "lab", "{\"cpus\": 2.5}", SG_E_PERMISSION,
		    "WUU_EXECUTION_PROFILE: field \"cpus\": 2.5 exceeds the operator's profile's 2");
	build_fails(cfg, "lab", "{\"memory_mb\": 8192}", SG_E_PERMISSION,
		    "WUU_EXECUTION_PROFILE: field \"memory_mb\": 8192 exceeds the "
		    "operator's profile's 4096");
	build_fails(cfg, "lab", "{\"image\": \"ubuntu:24.04\"}", SG_E_PERMISSION,
		    "WUU_EXECUTION_PROFILE: field \"image\": differs from the operator's "
		    "profile, which the host's may only narrow");
	build_fails(cfg, "lab", "{\"fake_knob\": 3}", SG_E_PERMISSION,
		    "WUU_EXECUTION_PROFILE: field \"fake_knob\": differs from the "
		    "operator's profile, which the host's may only narrow");
	build_fails(cfg, "lab", "{\"host\": \"elsewhere\"}", SG_E_PERMISSION,
		    "WUU_EXECUTION_PROFILE: field \"host\": the operator's profile does "
		    "not set it, and the host's may not add it");
	build_fails(cfg, "lab", "{\"region\": \"x\"}", SG_E_PERMISSION,
		    "WUU_EXECUTION_PROFILE: field \"region\": the operator's profile "
		    "does not set it, and the host's may not add it");
	build_fails(cfg, "lab", "{\"best_effort\": [\"network\", \"image\"]}",
		    SG_E_PERMISSION,
		    "WUU_EXECUTION_PROFILE: field \"best_effort\": adds \"image\", which "
		    "the operator's profile does not mark best-effort");
	build_fails(cfg, "open", "{\"best_effort\": [\"network\"]}", SG_E_PERMISSION,
		    "WUU_EXECUTION_PROFILE: field \"best_effort\": adds \"network\", "
		    "which the operator's profile does not mark best-effort");
	/* persistent and shared only where the operator's profile has them. */
	build_fails(cfg, "open", "{\"persistent\": true}", SG_E_PERMISSION,
		    "WUU_EXECUTION_PROFILE: field \"persistent\": the operator's profile "
		    "is not persistent, and the host's may not make it so");
	build_fails(cfg, "open", "{\"shared\": true}", SG_E_PERMISSION,
		    "WUU_EXECUTION_PROFILE: field \"shared\": the operator's profile is "
		    "not shared, and the host's may not make it so");
	sg_config_free(cfg);
}

static void test_narrowing_bad_types(void **state)
{
	struct sg_config *cfg;
	struct sg_errinfo err = { 0 };
	struct sg_profile *p = NULL;
	json_t *arr = json_array(), *e = NULL;

	(void)state;
	cfg = load_ok(narrow_cfg);
	build_fails(cfg, "lab", "{\"cpus\": \"1\"}", SG_E_INVALID_ARGUMENT,
		    "WUU_EXECUTION_PROFILE: field \"cpus\": must be a positive number");
	build_fails(cfg, "lab", "{\"memory_mb\": -5}", SG_E_INVALID_ARGUMENT,
		    "WUU_EXECUTION_PROFILE: field \"memory_mb\": must be a positive integer");
	/* A lowering below the bounds is refused, not passed to a backend. */
	build_fails(cfg, "lab", "{\"cpus\": 0.001}", SG_E_INVALID_ARGUMENT,
		    "WUU_EXECUTION_PROFILE: field \"cpus\": must be a number from 0.01 to 4096");
	build_fails(cfg, "lab", "{\"memory_mb\": 17592186044416}", SG_E_INVALID_ARGUMENT,
		    "WUU_EXECUTION_PROFILE: field \"memory_mb\": must be an integer from 1 "
		    "to 16777216");
	build_fails(cfg, "lab", "{\"network\": \"off\"}", SG_E_INVALID_ARGUMENT,
		    "WUU_EXECUTION_PROFILE: field \"network\": must be \"none\", "
		    "\"default\" (or \"enabled\") or {\"allow\": [CIDR or domain, ...]}");
	build_fails(cfg, "lab", "{\"network\": {\"allow\": [\"1.2.3.4/40\"]}}",
		    SG_E_INVALID_ARGUMENT,
		    "WUU_EXECUTION_PROFILE: field \"network\": \"1.2.3.4/40\" is neither "
		    "a CIDR (address/prefix) nor a domain name");
	build_fails(cfg, "lab", "{\"persistent\": \"yes\"}", SG_E_INVALID_ARGUMENT,
		    "WUU_EXECUTION_PROFILE: field \"persistent\": must be true or false");
	build_fails(cfg, "lab", "{\"lifetime_seconds\": -1}", SG_E_INVALID_ARGUMENT,
		    "WUU_EXECUTION_PROFILE: field \"lifetime_seconds\": must be an integer "
		    "from 0 to 2147483647");
	build_fails(cfg, "lab", "{\"shutdown_timeout_ms\": 2147483648}",
		    SG_E_INVALID_ARGUMENT,
		    "WUU_EXECUTION_PROFILE: field \"shutdown_timeout_ms\": must be an "
		    "integer from 0 to 2147483647");
	build_fails(cfg, "lab", "{\"image\": 7}", SG_E_INVALID_ARGUMENT,
		    "WUU_EXECUTION_PROFILE: field \"image\": must be a non-empty string");
	/* The host's own fields are not sandgate's to check. */
	p = build_ok(cfg, "open", "{\"command\": 5, \"shutdown_grace_ms\": \"x\","
				 " \"backend\": 1, \"forward_env\": \"A\","
				 " \"worker\": 3}");
	assert_string_equal(p->backend, "local");
	sg_profile_free(p);
	p = NULL;
	/* Text that is not a JSON object. */
	assert_int_equal(sg_config_host_profile("[1]", &e, &err), SG_E_INVALID_ARGUMENT);
	assert_null(e);
	assert_non_null(strstr(err.msg, "WUU_EXECUTION_PROFILE: not a JSON object"));
	sg_err_clear(&err);
	assert_int_equal(sg_config_host_profile("{\"cpus\":", &e, &err),
			 SG_E_INVALID_ARGUMENT);
	assert_null(e);
	sg_err_clear(&err);
	assert_int_equal(sg_config_profile(cfg, "lab", arr, &p, &err),
			 SG_E_INVALID_ARGUMENT);
	assert_null(p);
	assert_string_equal(err.msg, "WUU_EXECUTION_PROFILE: must be an object");
	json_decref(arr);
	sg_config_free(cfg);
}

static void test_network_narrowing(void **state)
{
	struct sg_config *cfg;
	struct sg_profile *p;

	(void)state;
	cfg = load_ok(narrow_cfg);
	/* none: nothing wider; "enabled" is the host's word for default. */
	build_fails(cfg, "sealed", "{\"network\": \"enabled\"}", SG_E_PERMISSION,
		    "WUU_EXECUTION_PROFILE: field \"network\": \"default\" is wider than "
		    "the operator's profile's \"none\"");
	build_fails(cfg, "sealed", "{\"network\": {\"allow\": [\"a.io\"]}}",
		    SG_E_PERMISSION,
		    "WUU_EXECUTION_PROFILE: field \"network\": \"allow\" is wider than "
		    "the operator's profile's \"none\"");
	p = build_ok(cfg, "sealed", "{\"network\": \"none\"}");
	assert_int_equal(p->network, SG_NET_NONE);
	assert_int_equal(count(p->network_allow), 0);
	sg_profile_free(p);

	/* allow: none, or a subset. */
	build_fails(cfg, "lab", "{\"network\": \"default\"}", SG_E_PERMISSION,
		    "WUU_EXECUTION_PROFILE: field \"network\": \"default\" is wider than "
		    "the operator's profile's \"allow\"");
	p = build_ok(cfg, "lab", "{\"network\": \"none\"}");
	assert_int_equal(p->network, SG_NET_NONE);
	sg_profile_free(p);
	static const char *const wider[] = {
		"11.0.0.0/8", "0.0.0.0/0", "10.0.0.0/7", "fe80::/10",
		"fd00::/7", "example.com", "evil.com", "*.com",
		"example.com.evil.io", "::/0", "pypi.org.evil.io",
	};
	char env[128], want[200];

	for (size_t i = 0; i < sizeof(wider) / sizeof(wider[0]); i++) {
		snprintf(env, sizeof(env), "{\"network\": {\"allow\": "
			 "[\"10.2.0.0/16\", \"%s\"]}}", wider[i]);
		snprintf(want, sizeof(want),
			 "WUU_EXECUTION_PROFILE: field \"network\": allows \"%s\", "
			 "which the operator's allow list does not", wider[i]);
		build_fails(cfg, "lab", env, SG_E_PERMISSION, want);
	}

	/* default: anything. */
	p = build_ok(cfg, "open", "{\"network\": {\"allow\": [\"a.io\"]}}");
	assert_int_equal(p->network, SG_NET_ALLOW);
	assert_int_equal(count(p->network_allow), 1);
	assert_string_equal(p->network_allow[0], "a.io");
	sg_profile_free(p);
	p = build_ok(cfg, "open", "{\"network\": \"none\"}");
	assert_int_equal(p->network, SG_NET_NONE);
	sg_profile_free(p);
	p = build_ok(cfg, "open", "{\"network\": \"enabled\"}");
	assert_int_equal(p->network, SG_NET_DEFAULT);
	sg_profile_free(p);
	sg_config_free(cfg);
}

/* ---- forward_env ------------------------------------------------------ */

static void test_forward_env_names(void **state)
{
	struct sg_config *cfg;
	struct sg_profile *p;
	char want[256];

	(void)state;
	cfg = load_ok("{\"profiles\": {\"fe\": {\"backend\": \"local\","
		      " \"forward_env\": [\"SGT_ALPHA\", \"SGT_BETA\"]}}}");
	assert_int_equal(setenv("SGT_ALPHA", "alpha-secret-1", 1), 0);
	assert_int_equal(setenv("SGT_BETA", "beta=secret=2", 1), 0);
	p = build_ok(cfg, "fe", NULL);
	assert_int_equal(count(p->forward_env), 2);
	assert_string_equal(p->forward_env[0], "SGT_ALPHA=alpha-secret-1");
	assert_string_equal(p->forward_env[1], "SGT_BETA=beta=secret=2");
	sg_profile_free(p);

	/* An empty value is a value; an unset variable blocks startup. */
	assert_int_equal(setenv("SGT_BETA", "", 1), 0);
	p = build_ok(cfg, "fe", NULL);
	assert_string_equal(p->forward_env[1], "SGT_BETA=");
	sg_profile_free(p);
	assert_int_equal(unsetenv("SGT_BETA"), 0);
	snprintf(want, sizeof(want),
		 "%s: profile \"fe\": field \"forward_env\": variable SGT_BETA "
		 "is not set", sg_config_path(cfg));
	build_fails(cfg, "fe", NULL, SG_E_INVALID_ARGUMENT, want);

	/*
	 * The host's forward_env names variables of the host's environment
	 * (their values come in binding.environment): it never takes a value
	 * from sandgate's.
	 */
	assert_int_equal(setenv("SGT_BETA", "b", 1), 0);
	assert_int_equal(setenv("SGT_GAMMA", "gamma-secret-3", 1), 0);
	p = build_ok(cfg, "fe", "{\"forward_env\": [\"SGT_GAMMA\"]}");
	assert_int_equal(count(p->forward_env), 2);
	assert_string_equal(p->forward_env[0], "SGT_ALPHA=alpha-secret-1");
	assert_string_equal(p->forward_env[1], "SGT_BETA=b");
	sg_profile_free(p);
	sg_config_free(cfg);

	/*
	 * A credential an adapter reads is never forwarded, not even by the
	 * operator: the adapter's default names and the names a profile
	 * gives (api_key_env) alike.
	 */
	cfg = load_ok("{\"default\": \"plain\", \"profiles\": {\"fe\": {\"backend\": \"local\","
		      " \"forward_env\": [\"SGT_DT_KEY\"]},"
		      " \"dt\": {\"backend\": \"daytona\", \"api_key_env\": \"SGT_DT_KEY\"},"
		      " \"fd\": {\"backend\": \"local\", \"forward_env\": [\"DAYTONA_API_KEY\"]},"
		      " \"plain\": {\"backend\": \"local\"}}}");
	assert_int_equal(setenv("SGT_DT_KEY", "dt-secret-4", 1), 0);
	snprintf(want, sizeof(want),
		 "%s: profile \"fe\": field \"forward_env\": SGT_DT_KEY holds a "
		 "backend's credential and is never forwarded to commands",
		 sg_config_path(cfg));
	build_fails(cfg, "fe", NULL, SG_E_PERMISSION, want);
	snprintf(want, sizeof(want),
		 "%s: profile \"fd\": field \"forward_env\": DAYTONA_API_KEY holds a "
		 "backend's credential and is never forwarded to commands",
		 sg_config_path(cfg));
	build_fails(cfg, "fd", NULL, SG_E_PERMISSION, want);
	p = build_ok(cfg, "plain", "{\"forward_env\": [\"DAYTONA_API_KEY\"]}");
	assert_int_equal(count(p->forward_env), 0);
	sg_profile_free(p);
	unsetenv("SGT_DT_KEY");
	unsetenv("SGT_ALPHA");
	unsetenv("SGT_BETA");
	unsetenv("SGT_GAMMA");
	sg_config_free(cfg);
}

static void test_values_never_in_messages(void **state)
{
	struct sg_errinfo err = { 0 };
	struct sg_config *cfg;
	struct sg_profile *p = NULL;
	json_t *env;

	(void)state;
	cfg = load_ok("{\"profiles\": {\"fe\": {\"backend\": \"local\","
		      " \"cpus\": 1,"
		      " \"forward_env\": {\"TOKEN\": \"s3cr3t-file\"}}}}");
	/* A refusal after the operator's values are known. */
	env = host("{\"cpus\": 4}");
	assert_int_equal(sg_config_profile(cfg, NULL, env, &p, &err), SG_E_PERMISSION);
	assert_null(strstr(err.msg, "s3cr3t"));
	json_decref(env);
	assert_null(p);

	/* Accepted, the operator's value reaches forward_env only. */
	p = build_ok(cfg, NULL, "{\"cpus\": 0.5}");
	assert_int_equal(count(p->forward_env), 1);
	assert_string_equal(p->forward_env[0], "TOKEN=s3cr3t-file");
	sg_profile_free(p);
	sg_config_free(cfg);
}

/* ---- The default path ------------------------------------------------- */

static void make_file(const char *path)
{
	FILE *fp = fopen(path, "w");

	assert_non_null(fp);
	assert_int_equal(fclose(fp), 0);
}

static void test_default_path(void **state)
{
	char xdg[128], home[128], f1[192], f2[192], d[192];
	char *path;

	(void)state;
	snprintf(xdg, sizeof(xdg), "%s/xdg", dir);
	snprintf(home, sizeof(home), "%s/home", dir);
	assert_int_equal(mkdir(xdg, 0700), 0);
	snprintf(d, sizeof(d), "%s/sandgate", xdg);
	assert_int_equal(mkdir(d, 0700), 0);
	assert_int_equal(mkdir(home, 0700), 0);
	snprintf(d, sizeof(d), "%s/.config", home);
	assert_int_equal(mkdir(d, 0700), 0);
	snprintf(d, sizeof(d), "%s/.config/sandgate", home);
	assert_int_equal(mkdir(d, 0700), 0);
	snprintf(f1, sizeof(f1), "%s/sandgate/config.json", xdg);
	snprintf(f2, sizeof(f2), "%s/.config/sandgate/config.json", home);

	/* $SANDGATE_CONFIG wins, even when missing (the load reports it). */
	assert_int_equal(setenv("SANDGATE_CONFIG", "/nonexistent/x.json", 1), 0);
	path = sg_config_default_path();
	assert_string_equal(path, "/nonexistent/x.json");
	free(path);
	assert_int_equal(unsetenv("SANDGATE_CONFIG"), 0);

	assert_int_equal(setenv("XDG_CONFIG_HOME", xdg, 1), 0);
	assert_int_equal(setenv("HOME", home, 1), 0);
	assert_null(sg_config_default_path());
	make_file(f1);
	path = sg_config_default_path();
	assert_string_equal(path, f1);
	free(path);

	/* A relative XDG_CONFIG_HOME is ignored; HOME's file is used. */
	assert_int_equal(setenv("XDG_CONFIG_HOME", "rel", 1), 0);
	assert_null(sg_config_default_path());
	make_file(f2);
	path = sg_config_default_path();
	assert_string_equal(path, f2);
	free(path);
	assert_int_equal(unsetenv("XDG_CONFIG_HOME"), 0);
	path = sg_config_default_path();
	assert_string_equal(path, f2);
	free(path);
	assert_int_equal(unsetenv("HOME"), 0);
	assert_null(sg_config_default_path());

	unlink(f1);
	unlink(f2);
	rmdir(d);
	snprintf(d, sizeof(d), "%s/.config", home);
	rmdir(d);
	rmdir(home);
	snprintf(d, sizeof(d), "%s/sandgate", xdg);
	rmdir(d);
	rmdir(xdg);
}

/* ---- Fields per backend (adapter.h's field tables) ------------------- */

/* Building profile "p" with members on backend fails with code and tail. */
static void backend_fails(const char *backend, const char *members,
			  sg_err code, const char *tail)
{
	char json[1024];
	struct sg_errinfo err = { 0 };
	struct sg_config *cfg;
	struct sg_profile *p = NULL;
	size_t n, t = strlen(tail);

	snprintf(json, sizeof(json),
		 "{\"profiles\": {\"p\": {\"backend\": \"%s\"%s%s}}}", backend,
		 *members ? ", " : "", members);
	cfg = load_ok(json);
	assert_int_equal(sg_config_profile(cfg, "p", NULL, &p, &err), code);
	assert_null(p);
	n = strlen(err.msg);
	if (n < t || strcmp(err.msg + n - t, tail) != 0)
		fail_msg("got \"%s\", want it to end in \"%s\"", err.msg, tail);
	sg_config_free(cfg);
}

static void backend_ok(const char *backend, const char *members)
{
	char json[1024];
	struct sg_config *cfg;

	snprintf(json, sizeof(json),
		 "{\"profiles\": {\"p\": {\"backend\": \"%s\"%s%s}}}", backend,
		 *members ? ", " : "", members);
	cfg = load_ok(json);
	sg_profile_free(build_ok(cfg, "p", NULL));
	sg_config_free(cfg);
}

static void test_backend_fields(void **state)
{
	(void)state;
	/* The reproduction: a misspelt field is not ignored. */
	backend_fails("local", "\"memroy_mb\": 2048", SG_E_INVALID_ARGUMENT,
		      "profile \"p\": field \"memroy_mb\": unknown field; did "
		      "you mean memory_mb?");
	backend_fails("daytona", "\"taget\": \"us\"", SG_E_INVALID_ARGUMENT,
		      "field \"taget\": unknown field; did you mean target?");
	backend_fails("daytona", "\"frobnicate\": 1", SG_E_INVALID_ARGUMENT,
		      "field \"frobnicate\": unknown field for the daytona "
		      "backend");
	/* Another backend's own field is unknown here. */
	backend_fails("local", "\"target\": \"us\"", SG_E_INVALID_ARGUMENT,
		      "field \"target\": unknown field for the local backend");
	/* A field sandgate knows that this backend does not honour. */
	backend_fails("local", "\"image\": \"debian:12\"", SG_E_UNSUPPORTED,
		      "field \"image\": the local backend cannot enforce it "
		      "(list it in best_effort to accept it unenforced)");
	backend_fails("ssh", "\"host\": \"h\", \"mount_read_only\": true",
		      SG_E_UNSUPPORTED,
		      "field \"mount_read_only\": the ssh backend cannot "
		      "enforce it (list it in best_effort to accept it "
		      "unenforced)");
	backend_fails("daytona", "\"port\": 22", SG_E_UNSUPPORTED,
		      "field \"port\": the daytona backend cannot enforce it "
		      "(list it in best_effort to accept it unenforced)");
	backend_ok("local", "\"image\": \"x\", \"best_effort\": [\"image\"]");
	/* best_effort only for fields a backend may not always enforce. */
	backend_ok("local", "\"cpus\": 1, \"best_effort\": [\"cpus\"]");
	backend_fails("local", "\"persistent\": true, \"best_effort\": "
		      "[\"persistent\"]", SG_E_INVALID_ARGUMENT,
		      "field \"best_effort\": \"persistent\" cannot be "
		      "best-effort: the local backend always enforces it");
	/* A backend's own fields are typed by its table. */
	backend_fails("daytona", "\"toolbox_timeout_ms\": 5",
		      SG_E_INVALID_ARGUMENT,
		      "field \"toolbox_timeout_ms\": must be an integer from "
		      "2000 to 2147483647");
	backend_fails("daytona", "\"target\": 5", SG_E_INVALID_ARGUMENT,
		      "field \"target\": must be a non-empty string");
	backend_ok("daytona", "\"target\": \"us\", \"keepalive_ms\": 5000");
	/* Gateway fields are every backend's. */
	backend_ok("ssh", "\"host\": \"h\", \"shutdown_timeout_ms\": 5,"
		   " \"lifetime_seconds\": 9, \"worker\": \"w\"");
	backend_fails("vercel", "\"vcpus_round_up\": 2", SG_E_INVALID_ARGUMENT,
		      "field \"vcpus_round_up\": must be an integer from 0 to 1");
	backend_ok("select", "\"candidates\": []");
	backend_fails("select", "\"candidate\": []", SG_E_INVALID_ARGUMENT,
		      "field \"candidate\": unknown field; did you mean "
		      "candidates?");
}

/* A binding cannot bring in a field the backend does not honour. */
static void test_backend_fields_binding(void **state)
{
	struct sg_config *cfg;
	struct sg_errinfo err = { 0 };
	struct sg_profile *p = NULL;
	json_t *e = host("{\"mount_read_only\": true}");

	(void)state;
	cfg = load_ok("{\"profiles\": {\"p\": {\"backend\": \"ssh\", "
		      "\"host\": \"h\"}}}");
	assert_int_equal(sg_config_profile(cfg, "p", e, &p, &err),
			 SG_E_UNSUPPORTED);
	assert_string_equal(err.msg, "WUU_EXECUTION_PROFILE: field \"mount_read_only\": the ssh "
			    "backend cannot enforce it (list it in best_effort "
			    "to accept it unenforced)");
	json_decref(e);
	sg_config_free(cfg);
}

/* ---- The example files ------------------------------------------------ */

static void test_examples_load(void **state)
{
	static const char *const backends[] = {
		"local", "ssh", "daytona", "vercel", "modal", "singularity", "docker",
	};
	char root[512], pattern[600], stem[64];
	const char *base, *dot, *key, *const *names;
	struct sg_errinfo err = { 0 };
	struct sg_config *cfg;
	json_t *doc, *v;
	struct sg_profile *p;
	size_t seen = 0;
	glob_t g;

	(void)state;
	/*
	 * The source tree, from this file's own path (CMake compiles it by
	 * its absolute name; a relative one is taken from the current
	 * directory).
	 */
	snprintf(root, sizeof(root), "%s", __FILE__);
	base = strstr(root, "tests/unit/test_config.c");
	assert_non_null(base);
	if (base == root)
		snprintf(root, sizeof(root), ".");
	else
		root[base - root - 1] = '\0';
	snprintf(pattern, sizeof(pattern), "%s/config/examples/*.json", root);
	assert_int_equal(glob(pattern, 0, NULL, &g), 0);
	for (size_t i = 0; i < g.gl_pathc; i++) {
		base = strrchr(g.gl_pathv[i], '/') + 1;
		dot = strrchr(base, '.');
		snprintf(stem, sizeof(stem), "%.*s", (int)(dot - base), base);
		cfg = NULL;
		sg_err_clear(&err);
		if (sg_config_load(g.gl_pathv[i], &cfg, &err))
			fail_msg("%s", err.msg);
		/* Variables the examples forward by name must exist here. */
		doc = json_load_file(g.gl_pathv[i], 0, NULL);
		assert_non_null(doc);
		json_object_foreach(json_object_get(doc, "profiles"), key, v) {
			json_t *x;
			size_t k;

			json_array_foreach(json_object_get(v, "forward_env"),
					   k, x)
				setenv(json_string_value(x), "example", 0);
		}
		json_decref(doc);
		names = sg_config_names(cfg);
		for (size_t j = 0; names[j]; j++) {
			/*
			 * A planned backend's profile loads, and is refused
			 * when built: its adapter is not in this sandgate.
			 */
			/* `command` is the gateway's relay mode, not an adapter. */
			if (!sg_adapter_find(stem) && strcmp(stem, "command") != 0) {
				sg_err_clear(&err);
				assert_int_equal(sg_config_profile(cfg, names[j], NULL,
								   &p, &err),
						 SG_E_UNSUPPORTED);
				assert_non_null(strstr(err.msg, "is not built into this sandgate"));
				continue;
			}
			p = build_ok(cfg, names[j], NULL);
			assert_string_equal(p->backend, stem);
			sg_profile_free(p);
		}
		for (size_t b = 0; b < 7; b++)
			if (strcmp(stem, backends[b]) == 0)
				seen |= (size_t)1 << b;
		sg_config_free(cfg);
	}
	globfree(&g);
	assert_int_equal(seen, 0x7f);
}

/*
 * A relative path field is taken from the config file's directory, not
 * from the working directory: `config check` and the host's `serve` run
 * in different places and must read the same file.
 */
static void test_relative_paths(void **state)
{
	char real[256], want[320], cwd[256], name[32];
	struct sg_errinfo err = { 0 };
	struct sg_config *cfg;
	struct sg_profile *p;
	const char *path;

	(void)state;
	assert_non_null(realpath(dir, real));
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	path = cfg_file("{\"default\": \"lab\", \"profiles\": {"
			"\"lab\": {\"backend\": \"ssh\", \"host\": \"box\","
			" \"identity_file\": \"keys/id\","
			" \"known_hosts_file\": \"~/.ssh/kh\"},"
			"\"here\": {\"backend\": \"local\","
			" \"host_workspace\": \"./ws\"},"
			"\"abs\": {\"backend\": \"ssh\", \"host\": \"box\","
			" \"identity_file\": \"/k\"}}}");
	/* Loaded by a relative name, from the file's own directory. */
	snprintf(name, sizeof(name), "%s", strrchr(path, '/') + 1);
	assert_int_equal(chdir(real), 0);
	if (sg_config_load(name, &cfg, &err))
		fail_msg("load failed: %s", err.msg);
	assert_int_equal(chdir("/"), 0);

	p = build_ok(cfg, "lab", NULL);
	assert_string_equal(p->config_dir, real);
	snprintf(want, sizeof(want), "%s/keys/id", real);
	assert_string_equal(p->identity_file, want);
	/* The adapter and probe read raw: it says the same. */
	assert_string_equal(json_string_value(json_object_get(p->raw,
							      "identity_file")),
			    want);
	/* ~ is ssh's own (the account's home), left to the adapter. */
	assert_string_equal(p->known_hosts_file, "~/.ssh/kh");
	sg_profile_free(p);

	/* A binding may repeat the value as the file spells it. */
	p = build_ok(cfg, "lab", "{\"identity_file\": \"keys/id\"}");
	assert_string_equal(p->identity_file, want);
	sg_profile_free(p);

	p = build_ok(cfg, "here", NULL);
	snprintf(want, sizeof(want), "%s/ws", real);
	assert_string_equal(p->host_workspace, want);
	sg_profile_free(p);

	p = build_ok(cfg, "abs", NULL);
	assert_string_equal(p->identity_file, "/k");
	sg_profile_free(p);
	sg_config_free(cfg);

	/* The embedded config has no file, so no directory either. */
	assert_int_equal(sg_config_load(NULL, &cfg, &err), SG_OK);
	p = build_ok(cfg, NULL, NULL);
	assert_null(p->config_dir);
	sg_profile_free(p);
	sg_config_free(cfg);
	assert_int_equal(chdir(cwd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_embedded_default),
		cmocka_unit_test(test_backend_fields),
		cmocka_unit_test(test_backend_fields_binding),
		cmocka_unit_test(test_file_errors),
		cmocka_unit_test(test_duplicate_keys),
		cmocka_unit_test(test_top_level),
		cmocka_unit_test(test_names_in_file_order),
		cmocka_unit_test(test_default_resolution),
		cmocka_unit_test(test_unknown_profile),
		cmocka_unit_test(test_backend_required),
		cmocka_unit_test(test_string_fields),
		cmocka_unit_test(test_bool_fields),
		cmocka_unit_test(test_number_fields),
		cmocka_unit_test(test_network_field),
		cmocka_unit_test(test_forward_env_field),
		cmocka_unit_test(test_best_effort_field),
		cmocka_unit_test(test_first_error_in_file_order),
		cmocka_unit_test(test_full_profile),
		cmocka_unit_test(test_relative_paths),
		cmocka_unit_test(test_lifetime_mapping),
		cmocka_unit_test(test_narrowing_accepted),
		cmocka_unit_test(test_narrowing_refused),
		cmocka_unit_test(test_narrowing_bad_types),
		cmocka_unit_test(test_network_narrowing),
		cmocka_unit_test(test_forward_env_names),
		cmocka_unit_test(test_values_never_in_messages),
		cmocka_unit_test(test_default_path),
		cmocka_unit_test(test_examples_load),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
