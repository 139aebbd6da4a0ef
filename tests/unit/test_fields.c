/*
 * test_fields.c - fail closed by construction: a field added to the config
 * layer's table that no adapter declares is refused by every backend.
 *
 * config.c is compiled here again with SG_CONFIG_TEST_FIELD, one more
 * entry in its field table (its own definitions take the place of
 * sg_core's).  Nothing else changes: if an adapter had to list what it
 * refuses, this new field would pass it silently.
 */
/* First: config.c sets its feature macros before any other header. */
#define SG_CONFIG_TEST_FIELD \
	{ "gpu_count", CK_MEMORY, CN_LOWER, NO_MEMBER, CF_ADAPTER }
#include "config/config.c"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <unistd.h>

static char *write_config(const char *json)
{
	static char path[] = "/tmp/sg-test-fields-XXXXXX";
	int fd;

	memcpy(path + strlen(path) - 6, "XXXXXX", 6);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, json, strlen(json)), (ssize_t)strlen(json));
	close(fd);
	return path;
}

static void test_every_backend_refuses_a_new_field(void **state)
{
	const struct sg_adapter *const *all = sg_adapter_all();
	size_t n = 0;

	(void)state;
	for (size_t i = 0; all[i]; i++, n++) {
		char json[512], want[256];
		struct sg_errinfo err = { 0 };
		struct sg_config *cfg = NULL;
		struct sg_profile *p = NULL;
		char *path;

		snprintf(json, sizeof(json),
			 "{\"profiles\": {\"p\": {\"backend\": \"%s\", "
			 "\"gpu_count\": 2}}}", all[i]->name);
		path = write_config(json);
		/* The type is checked at load, as for every known field. */
		assert_int_equal(sg_config_load(path, &cfg, &err), SG_OK);
		assert_int_equal(sg_config_profile(cfg, "p", NULL, &p, &err),
				 SG_E_UNSUPPORTED);
		assert_null(p);
		snprintf(want, sizeof(want),
			 "%s: profile \"p\": field \"gpu_count\": the %s backend "
			 "cannot enforce it (list it in best_effort to accept it "
			 "unenforced)", path, all[i]->name);
		assert_string_equal(err.msg, want);
		sg_config_free(cfg);
		unlink(path);
	}
	/* local, ssh, daytona as built, and the tests' fake. */
	assert_true(n >= 2);
}

/* Every generic field an adapter declares is one config.c knows. */
static void test_declared_fields_are_known(void **state)
{
	const struct sg_adapter *const *all = sg_adapter_all();

	(void)state;
	for (size_t i = 0; all[i]; i++) {
		assert_non_null(all[i]->fields);
		for (const struct sg_field *f = all[i]->fields; f->name; f++) {
			const struct cfg_field *cf = field_find(f->name);

			if (f->type == SG_FIELD_GENERIC) {
				if (!cf)
					fail_msg("%s declares %s, unknown to config.c",
						 all[i]->name, f->name);
				/* The gateway's own fields are never declared. */
				assert_int_equal(cf->owner, CF_ADAPTER);
			} else {
				assert_null(cf);
			}
		}
	}
}

/* A config with one fake profile whose own fields are extra (JSON text). */
static struct sg_config *fake_config(const char *extra, char **path)
{
	char json[512];
	struct sg_errinfo err = { 0 };
	struct sg_config *cfg = NULL;

	snprintf(json, sizeof(json),
		 "{\"profiles\": {\"p\": {\"backend\": \"fake\"%s%s}, "
		 "\"q\": {\"backend\": \"local\", \"forward_env\": [\"SG_FAKE_URL\"]}}, "
		 "\"default\": \"p\"}", *extra ? ", " : "", extra);
	*path = write_config(json);
	if (sg_config_load(*path, &cfg, &err))
		cfg = NULL;
	return cfg;
}

/*
 * The fake's table declares $SG_FAKE_TOKEN (renamed by fake_token_env)
 * and $SG_FAKE_URL: the accessors read those, under the profile's name
 * for them, and the variables are the ones forward_env refuses.
 */
static void test_credentials_from_the_table(void **state)
{
	const struct sg_adapter *ad = sg_adapter_find("fake");
	const char *names[SG_CREDENTIAL_ENV_MAX], *name = NULL;
	struct sg_errinfo err = { 0 };
	struct sg_profile *p = NULL;
	struct sg_config *cfg;
	json_t *raw = json_pack("{s:s}", "fake_token_env", "MY_TOKEN"), *out;
	char *path;

	(void)state;
	assert_int_equal(sg_adapter_credential_env(ad, NULL, names, SG_CREDENTIAL_ENV_MAX), 2);
	assert_string_equal(names[0], "SG_FAKE_TOKEN");
	assert_string_equal(names[1], "SG_FAKE_URL");
	assert_int_equal(sg_adapter_credential_env(ad, raw, names, 1), 1);
	assert_string_equal(names[0], "MY_TOKEN");
	json_decref(raw);

	cfg = fake_config("\"fake_token_env\": \"MY_TOKEN\"", &path);
	assert_non_null(cfg);
	assert_int_equal(sg_config_profile(cfg, "p", NULL, &p, &err), SG_OK);
	setenv("SG_FAKE_TOKEN", "default-name-value", 1);
	unsetenv("MY_TOKEN");
	assert_null(sg_profile_env(p, "SG_FAKE_TOKEN", &name));
	assert_string_equal(name, "MY_TOKEN");
	setenv("MY_TOKEN", "", 1);
	assert_null(sg_profile_env(p, "SG_FAKE_TOKEN", NULL));
	setenv("MY_TOKEN", "tok-123", 1);
	assert_string_equal(sg_profile_env(p, "SG_FAKE_TOKEN", NULL), "tok-123");
	/* probe: the renamed variable, found, never its value. */
	out = json_object();
	sg_profile_credentials(p, out);
	assert_int_equal(json_object_size(out), 1);
	assert_string_equal(json_string_value(json_object_get(out, "MY_TOKEN")), "found");
	json_decref(out);
#ifdef NDEBUG
	/* An undeclared variable is never read (with assertions, a failed one). */
	setenv("SG_FAKE_UNDECLARED", "x", 1);
	assert_null(sg_profile_env(p, "SG_FAKE_UNDECLARED", NULL));
	unsetenv("SG_FAKE_UNDECLARED");
#endif
	sg_profile_free(p);
	unsetenv("MY_TOKEN");
	unsetenv("SG_FAKE_TOKEN");

	/* Another profile's forward_env may not take the fake's URL variable. */
	setenv("SG_FAKE_URL", "https://x", 1);
	p = NULL;
	assert_int_equal(sg_config_profile(cfg, "q", NULL, &p, &err), SG_E_PERMISSION);
	assert_non_null(strstr(err.msg, "SG_FAKE_URL holds a backend's credential"));
	assert_null(strstr(err.msg, "https://x"));
	unsetenv("SG_FAKE_URL");
	sg_config_free(cfg);
	unlink(path);
}

/*
 * A variable entry is not a profile field: a profile that sets one by
 * that name is refused as unknown, and no typo is answered with it.
 */
static void test_variable_is_not_a_field(void **state)
{
	struct sg_errinfo err = { 0 };
	struct sg_profile *p = NULL;
	struct sg_config *cfg;
	char *path;

	(void)state;
	cfg = fake_config("\"SG_FAKE_URL\": \"https://evil\"", &path);
	if (cfg) {
		assert_int_equal(sg_config_profile(cfg, "p", NULL, &p, &err),
				 SG_E_INVALID_ARGUMENT);
		sg_config_free(cfg);
	}
	assert_non_null(strstr(err.msg, "field \"SG_FAKE_URL\": unknown field"));
	unlink(path);
	cfg = fake_config("\"SG_FAKE_URX\": \"x\"", &path);
	if (cfg) {
		assert_int_not_equal(sg_config_profile(cfg, "p", NULL, &p, &err), SG_OK);
		sg_config_free(cfg);
	}
	assert_null(strstr(err.msg, "did you mean"));
	unlink(path);
}

/* The variables each built-in backend reads, as they were before the table. */
static void test_backend_credential_lists(void **state)
{
	static const char *const want[][8] = {
		{ "daytona", "DAYTONA_API_KEY", "DAYTONA_API_URL", "DAYTONA_TARGET" },
		{ "vercel", "VERCEL_TOKEN", "VERCEL_TEAM_ID", "VERCEL_PROJECT_ID",
		  "VERCEL_OIDC_TOKEN", "VERCEL_API_URL" },
		{ "modal", "MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "MODAL_PROFILE",
		  "MODAL_CONFIG_PATH", "MODAL_ENVIRONMENT", "MODAL_SERVER_URL", "MODAL_SANDBOX_V2" },
		{ "ssh", "SSH_AUTH_SOCK", "KRB5CCNAME" },
		{ "local" },
	};
	const char *names[SG_CREDENTIAL_ENV_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct sg_adapter *ad = sg_adapter_find(want[i][0]);
		size_t n, k = 0;

		if (!ad)
			continue; /* not built here */
		n = sg_adapter_credential_env(ad, NULL, names, SG_CREDENTIAL_ENV_MAX);
		for (; k + 1 < 8 && want[i][k + 1]; k++) {
			assert_true(k < n);
			assert_string_equal(names[k], want[i][k + 1]);
		}
		assert_int_equal(n, k);
	}
}

/* The keys a profile's probe reports (ad->credentials, else the table's). */
static json_t *probe_keys(const char *backend, const char *extra)
{
	char json[256];
	struct sg_errinfo err = { 0 };
	struct sg_config *cfg;
	struct sg_profile *p = NULL;
	const struct sg_adapter *ad = sg_adapter_find(backend);
	json_t *out = json_object();
	char *path;

	snprintf(json, sizeof(json), "{\"profiles\": {\"p\": {\"backend\": \"%s\"%s}}}",
		 backend, extra);
	path = write_config(json);
	assert_int_equal(sg_config_load(path, &cfg, &err), SG_OK);
	assert_int_equal(sg_config_profile(cfg, "p", NULL, &p, &err), SG_OK);
	if (ad->credentials)
		ad->credentials(p, out);
	else
		sg_profile_credentials(p, out);
	sg_profile_free(p);
	sg_config_free(cfg);
	unlink(path);
	return out;
}

/*
 * `sandgate probe` reports the variables it did before the table: vercel
 * the token, team, project and OIDC token (the URL has a default), daytona
 * the key, the URL and the region unless the profile sets target.
 */
static void test_probe_credentials(void **state)
{
	char *text;
	json_t *o;

	(void)state;
	if (sg_adapter_find("vercel")) {
		setenv("VERCEL_TOKEN", "secret-vercel", 1);
		o = probe_keys("vercel", "");
		assert_int_equal(json_object_size(o), 4);
		assert_string_equal(json_string_value(json_object_get(o, "VERCEL_TOKEN")), "found");
		assert_non_null(json_object_get(o, "VERCEL_TEAM_ID"));
		assert_non_null(json_object_get(o, "VERCEL_PROJECT_ID"));
		assert_non_null(json_object_get(o, "VERCEL_OIDC_TOKEN"));
		text = json_dumps(o, 0);
		assert_null(strstr(text, "secret-vercel"));
		free(text);
		json_decref(o);
		unsetenv("VERCEL_TOKEN");
	}
	if (sg_adapter_find("daytona")) {
		o = probe_keys("daytona", ", \"api_key_env\": \"MY_KEY\"");
		assert_int_equal(json_object_size(o), 3);
		assert_string_equal(json_string_value(json_object_get(o, "MY_KEY")), "missing");
		assert_non_null(json_object_get(o, "DAYTONA_API_URL"));
		assert_non_null(json_object_get(o, "DAYTONA_TARGET"));
		json_decref(o);
		o = probe_keys("daytona", ", \"target\": \"eu\", \"target_env\": \"MY_T\"");
		assert_int_equal(json_object_size(o), 2);
		assert_null(json_object_get(o, "MY_T"));
		assert_non_null(json_object_get(o, "DAYTONA_API_KEY"));
		json_decref(o);
	}
	o = probe_keys("local", "");
	assert_int_equal(json_object_size(o), 0);
	json_decref(o);
}

/* Network allow entries, by kind: the one parser config.c and the backends share. */
static void test_allow_kind(void **state)
{
	(void)state;
	assert_int_equal(sg_allow_kind("10.0.0.0/8"), SG_ALLOW_IPV4);
	assert_int_equal(sg_allow_kind("1.2.3.4/32"), SG_ALLOW_IPV4);
	assert_int_equal(sg_allow_kind("1.2.3.4/0"), SG_ALLOW_IPV4);
	assert_int_equal(sg_allow_kind("1.2.3.4/33"), SG_ALLOW_BAD);
	assert_int_equal(sg_allow_kind("1.2.3.4/08"), SG_ALLOW_BAD);
	assert_int_equal(sg_allow_kind("1.2.3.4/"), SG_ALLOW_BAD);
	assert_int_equal(sg_allow_kind("1.2.3.4"), SG_ALLOW_BAD);
	assert_int_equal(sg_allow_kind("example.com/8"), SG_ALLOW_BAD);
	assert_int_equal(sg_allow_kind("::1/128"), SG_ALLOW_IPV6);
	assert_int_equal(sg_allow_kind("2001:db8::/129"), SG_ALLOW_BAD);
	assert_int_equal(sg_allow_kind("example.com"), SG_ALLOW_DOMAIN);
	assert_int_equal(sg_allow_kind("*.example.com"), SG_ALLOW_DOMAIN);
	assert_int_equal(sg_allow_kind("10.0.0.1"), SG_ALLOW_BAD);
	assert_int_equal(sg_allow_kind("-x.com"), SG_ALLOW_BAD);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_backend_refuses_a_new_field),
		cmocka_unit_test(test_declared_fields_are_known),
		cmocka_unit_test(test_credentials_from_the_table),
		cmocka_unit_test(test_variable_is_not_a_field),
		cmocka_unit_test(test_backend_credential_lists),
		cmocka_unit_test(test_probe_credentials),
		cmocka_unit_test(test_allow_kind),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
