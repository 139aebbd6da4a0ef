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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_backend_refuses_a_new_field),
		cmocka_unit_test(test_declared_fields_are_known),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
