/*
 * test_cloudkit.c - what the cloud adapters share (adapters/cloudkit.h):
 * names per identity, the tags and the listing read back from them, the
 * set-up replies; and the modal backend's refusals of what Modal cannot
 * enforce (its validate()).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "adapters/adapter.h"
#include "adapters/cloudkit.h"

static void test_names(void **state)
{
	char *a = sg_cloud_name("Alice's Project/ONE"), *b = sg_cloud_name("alice-s-project-one"),
	     *c = sg_cloud_name("Alice's Project/ONE"), *d = sg_cloud_name("///");
	char *longer = sg_cloud_name("a-very-long-identity-name-that-goes-on-and-on-and-on");

	(void)state;
	/* Readable, deterministic, and distinct for distinct identities. */
	assert_int_equal(strncmp(a, "sg-alice-s-project-one-", 23), 0);
	assert_string_equal(a, c);
	assert_string_not_equal(a, b);
	assert_int_equal(strlen(a), strlen("sg-alice-s-project-one-") + 12);
	assert_int_equal(strncmp(d, "sg-", 3), 0);
	assert_int_equal(strlen(d), 3 + 12);
	assert_true(strlen(longer) <= SG_CLOUD_NAME_MAX);
	for (const char *p = longer; *p; p++)
		assert_non_null(strchr("abcdefghijklmnopqrstuvwxyz0123456789-", *p));
	free(a);
	free(b);
	free(c);
	free(d);
	free(longer);
}

static void test_replies(void **state)
{
	const char *r = "base=/root/.sandgate\nroot=1\nhelper=0\nempty=\nprobe<<\nx=1\n";
	char *v = sg_cloud_kv(r, "base"), *e = sg_cloud_kv(r, "empty");
	char hex[33];

	(void)state;
	assert_string_equal(v, "/root/.sandgate");
	assert_string_equal(e, "");
	assert_null(sg_cloud_kv(r, "bas"));
	assert_true(sg_cloud_flag(r, "root"));
	assert_false(sg_cloud_flag(r, "helper"));
	assert_false(sg_cloud_flag(r, "missing"));
	free(v);
	free(e);
	sg_cloud_random_hex(hex, 16);
	assert_int_equal(strlen(hex), 32);
}

static const char *get_pair(const void *src, const char *key)
{
	const struct sg_cloud_tags *t = src;

	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->key[i], key) == 0)
			return t->value[i];
	return NULL;
}

static void test_tags(void **state)
{
	struct sg_profile p = { .name = "cloud", .persistent = true, .lifetime_seconds = 600 };
	struct sg_env env = { .profile = &p, .identity = "me", .session = "s-1" };
	struct sg_cloud_tags t;
	struct sg_env_info info;

	(void)state;
	sg_cloud_tags_fill(&env, "c0ffee", &t);
	assert_int_equal(t.n, SG_CLOUD_TAGS);
	assert_string_equal(get_pair(&t, SG_CLOUD_TAG_MANAGED), "sandgate");
	assert_string_equal(get_pair(&t, SG_CLOUD_TAG_CREATE), "c0ffee");
	/* What a listing reads back is what was written. */
	sg_cloud_info("sb-1", "running", get_pair, &t, &info);
	assert_string_equal(info.id, "sb-1");
	assert_string_equal(info.identity, "me");
	assert_string_equal(info.session, "s-1");
	assert_string_equal(info.profile, "cloud");
	assert_true(info.persistent);
	assert_true(info.created > 0);
	assert_int_equal(info.expires - info.created, 600);
}

/* Modal enforces IPv4 CIDR allow lists only: the rest is refused. */
static void test_modal_validate(void **state)
{
	const struct sg_adapter *ad = sg_adapter_find("modal");
	const char *cidrs[] = { "10.0.0.0/8", NULL }, *mixed[] = { "10.0.0.0/8", "example.com", NULL },
		   *v6[] = { "2001:db8::/32", NULL }, *be[] = { "network", NULL };
	struct sg_profile p = { .name = "m", .backend = "modal", .network = SG_NET_ALLOW };
	struct sg_errinfo err = { 0 };

	(void)state;
	if (!ad)
		skip();
	p.network_allow = cidrs;
	assert_int_equal(ad->validate(&p, &err), SG_OK);
	p.network_allow = mixed;
	assert_int_equal(ad->validate(&p, &err), SG_E_UNSUPPORTED);
	assert_non_null(strstr(err.msg, "example.com"));
	sg_err_clear(&err);
	p.network_allow = v6;
	assert_int_equal(ad->validate(&p, &err), SG_E_UNSUPPORTED);
	sg_err_clear(&err);
	/* Best-effort leaves them blocked, which is stricter. */
	p.best_effort = be;
	p.network_allow = mixed;
	assert_int_equal(ad->validate(&p, &err), SG_OK);
	p.best_effort = NULL;
	p.network = SG_NET_NONE;
	p.image = "two words";
	assert_int_equal(ad->validate(&p, &err), SG_E_INVALID_ARGUMENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_replies),
		cmocka_unit_test(test_tags),
		cmocka_unit_test(test_modal_validate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
