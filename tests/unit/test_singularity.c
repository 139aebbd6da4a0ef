/*
 * test_singularity.c - singularity/: version strings as Apptainer,
 * SingularityCE and legacy Singularity print them, which versions have
 * the limit flags, the CLI's allow-listed environment, the argv of `instance start` and
 * `exec`, and validate()'s refusals against the fake apptainer
 * (tests/fakes/apptainer) claiming old and new versions.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adapters/adapter.h"
#include "singularity/registry.h"
#include "singularity/singularity.h"

/* argv joined with spaces, for readable comparisons. */
static void join(const struct sg_strv *sv, char *out, size_t n)
{
	out[0] = '\0';
	for (size_t i = 0; i < sv->n; i++) {
		strncat(out, sv->v[i], n - strlen(out) - 1);
		if (i + 1 < sv->n)
			strncat(out, " ", n - strlen(out) - 1);
	}
}

static void test_versions(void **state)
{
	struct sg_sing_version v;

	(void)state;
	assert_true(sg_sing_parse_version("apptainer version 1.3.4\n", &v));
	assert_int_equal(v.flavour, SG_SING_APPTAINER);
	assert_int_equal(v.major, 1);
	assert_int_equal(v.minor, 3);
	assert_int_equal(v.patch, 4);
	assert_true(sg_sing_has_limits(&v));
	/* Distribution builds add a suffix. */
	assert_true(sg_sing_parse_version("apptainer version 1.1.6-1.el7\n", &v));
	assert_true(sg_sing_has_limits(&v));
	assert_true(sg_sing_parse_version("apptainer version 1.0.3\n", &v));
	assert_false(sg_sing_has_limits(&v));
	assert_true(sg_sing_parse_version("singularity-ce version 4.1.0\n", &v));
	assert_int_equal(v.flavour, SG_SING_SINGULARITY_CE);
	assert_true(sg_sing_has_limits(&v));
	assert_string_equal(sg_sing_env_prefix(&v), "SINGULARITYENV_");
	assert_true(sg_sing_parse_version("singularity-ce version 3.9.9\n", &v));
	assert_false(sg_sing_has_limits(&v));
	assert_true(sg_sing_parse_version("singularity-ce version 3.10.0\n", &v));
	assert_true(sg_sing_has_limits(&v));
	assert_true(sg_sing_parse_version("singularity version 3.7.4\n", &v));
	assert_int_equal(v.flavour, SG_SING_LEGACY);
	assert_false(sg_sing_has_limits(&v));
	/* `apptainer version` prints the bare number: not a --version answer. */
	assert_false(sg_sing_parse_version("1.3.4\n", &v));
	assert_false(sg_sing_parse_version("docker version 1.2.3", &v));
	assert_false(sg_sing_parse_version("apptainer version x", &v));
	assert_false(sg_sing_parse_version(NULL, &v));
}

static void test_cli_env(void **state)
{
	const char *const in[] = { "PATH=/usr/bin", "APPTAINER_BIND=/etc:/x",
				   "SINGULARITY_CONTAINALL=0", "APPTAINERENV_LD_PRELOAD=/evil.so",
				   "SINGULARITYENV_X=1", "APPTAINERX=no", "HOME=/root",
				   "TERM=xterm", "https_proxy=http://u:pw@p:3128", "NO_PROXY=.lan",
				   "PATHX=no", "LD_PRELOAD=/x.so", "SSL_CERT_FILE=/ca.pem",
				   "XDG_RUNTIME_DIR=/run/user/0", "SG_TOKEN=secret", NULL };
	struct sg_strv out = SG_STRV_INIT;
	char s[512];

	(void)state;
	/* What the CLI needs, nothing else: --cleanenv hands TERM and proxies to commands. */
	assert_int_equal(sg_sing_cli_env(in, false, &out), SG_OK);
	join(&out, s, sizeof(s));
	assert_string_equal(s, "PATH=/usr/bin HOME=/root XDG_RUNTIME_DIR=/run/user/0");
	sg_strv_release(&out);
	/* A pull also gets the proxies and the CA, still no TERM. */
	assert_int_equal(sg_sing_cli_env(in, true, &out), SG_OK);
	join(&out, s, sizeof(s));
	assert_string_equal(s, "PATH=/usr/bin HOME=/root https_proxy=http://u:pw@p:3128 "
			       "NO_PROXY=.lan SSL_CERT_FILE=/ca.pem XDG_RUNTIME_DIR=/run/user/0");
	sg_strv_release(&out);
}

static void test_exec_env(void **state)
{
	const char *const base[] = { "PATH=/usr/bin", NULL };
	const char *const cmd[] = { "HOME=/run/sandgate/ctl/home", "PATH=/bin",
				    "SECRET=$(rm -rf /)", NULL };
	struct sg_strv out = SG_STRV_INIT;
	char s[512];

	(void)state;
	assert_int_equal(sg_sing_exec_env(base, "APPTAINERENV_", cmd, &out), SG_OK);
	join(&out, s, sizeof(s));
	/* HOME goes through argv (the runtime refuses it here); values are verbatim. */
	assert_string_equal(s, "PATH=/usr/bin APPTAINERENV_PATH=/bin APPTAINERENV_SECRET=$(rm -rf /)");
	sg_strv_release(&out);
}

static void test_start_argv(void **state)
{
	static const char *const proc_ro[] = { "/proc/sys", "/proc/sysrq-trigger", NULL };
	struct sg_sing_start st = {
		.runtime = "/usr/bin/apptainer",
		.image = "/img/a.sif",
		.name = "sg-id",
		.workspace = "/s/ws",
		.root = "/workspace",
		.workspace_ro = true,
		.helper_host = "/b/sg-helper",
		.helper = "/run/sandgate/sg-helper",
		.ctl_host = "/s/ctl",
		.ctl = "/run/sandgate/ctl",
		.proc_ro = proc_ro,
		.network_none = true,
		.cpus = 1.5,
		.memory_mb = 512,
	};
	struct sg_strv av = SG_STRV_INIT;
	char s[1024];

	(void)state;
	assert_int_equal(sg_sing_start_argv(&st, &av), SG_OK);
	join(&av, s, sizeof(s));
	assert_string_equal(s, "/usr/bin/apptainer instance start --containall --no-home --cleanenv "
			       "--userns --no-privs --drop-caps ALL --no-mount sys "
			       "--net --network none --cpus=1.50 --memory=512M --writable-tmpfs "
			       "--bind /s/ws:/workspace:ro --bind /b/sg-helper:/run/sandgate/sg-helper:ro "
			       "--bind /s/ctl:/run/sandgate/ctl --bind /proc/sys:/proc/sys:ro "
			       "--bind /proc/sysrq-trigger:/proc/sysrq-trigger:ro /img/a.sif sg-id");
	sg_strv_release(&av);
	st.overlay = "/s/overlay";
	st.network_none = false;
	st.cpus = 0;
	st.memory_mb = 0;
	st.workspace_ro = false;
	st.proc_ro = NULL;
	assert_int_equal(sg_sing_start_argv(&st, &av), SG_OK);
	join(&av, s, sizeof(s));
	assert_string_equal(s, "/usr/bin/apptainer instance start --containall --no-home --cleanenv "
			       "--userns --no-privs --drop-caps ALL --no-mount sys "
			       "--overlay /s/overlay --bind /s/ws:/workspace "
			       "--bind /b/sg-helper:/run/sandgate/sg-helper:ro "
			       "--bind /s/ctl:/run/sandgate/ctl /img/a.sif sg-id");
	sg_strv_release(&av);
}

static void test_exec_argv(void **state)
{
	struct sg_strv av = SG_STRV_INIT;
	char s[512];

	(void)state;
	assert_int_equal(sg_sing_exec_argv("apptainer", "sg-x", "/workspace", "/h", "/r/sg-helper",
					   (const char *[]){ "ls", "-l", NULL }, &av),
			 SG_OK);
	join(&av, s, sizeof(s));
	assert_string_equal(s, "apptainer exec --cleanenv --no-eval "
			       "--userns --no-privs --drop-caps ALL --no-mount sys --pwd /workspace "
			       "instance://sg-x /r/sg-helper confine --mode scope -- "
			       "env HOME=/h ls -l");
	sg_strv_release(&av);
	/* A command that looks like an assignment is never taken for one. */
	assert_int_equal(sg_sing_exec_argv("apptainer", "sg-x", "/w", "/h", "/r/sg-helper",
					   (const char *[]){ "A=b", NULL }, &av),
			 SG_OK);
	join(&av, s, sizeof(s));
	assert_string_equal(s, "apptainer exec --cleanenv --no-eval "
			       "--userns --no-privs --drop-caps ALL --no-mount sys --pwd /w instance://sg-x "
			       "/r/sg-helper confine --mode scope -- "
			       "env HOME=/h /bin/sh -c exec \"$@\" sh A=b");
	sg_strv_release(&av);
	/* A control step starts outside the scope, and without HOME. */
	assert_int_equal(sg_sing_exec_argv("apptainer", "sg-x", "/w", NULL, NULL,
					   (const char *[]){ "/r/sg-helper", "proc", NULL }, &av),
			 SG_OK);
	join(&av, s, sizeof(s));
	assert_string_equal(s, "apptainer exec --cleanenv --no-eval "
			       "--userns --no-privs --drop-caps ALL --no-mount sys --pwd /w instance://sg-x "
			       "/r/sg-helper proc");
	sg_strv_release(&av);
}

/* ---- validate() against the fake ---------------------------------------- */

extern const struct sg_adapter sg_adapter_singularity;

static char fake[4096];

static sg_err validate_with(const char *profile_json, const char *version, double cpus,
			    enum sg_network net, struct sg_errinfo *err)
{
	json_t *raw = json_loads(profile_json, 0, NULL);
	struct sg_profile p = {
		.name = "t",
		.backend = "singularity",
		.image = json_string_value(json_object_get(raw, "image")),
		.cpus = cpus,
		.network = net,
		.raw = raw,
	};
	char dir[] = "/tmp/sg-unit-sing-XXXXXX", wrapper[sizeof(dir) + 16];
	FILE *f;
	sg_err rc;

	/*
	 * The runtime gets an allow-listed environment, so the fake's version
	 * comes from a wrapper, as a site's own wrapper script would set it.
	 */
	assert_non_null(mkdtemp(dir));
	snprintf(wrapper, sizeof(wrapper), "%s/apptainer", dir);
	f = fopen(wrapper, "w");
	assert_non_null(f);
	fprintf(f, "#!/bin/sh\nFAKE_APPTAINER_VERSION='%s' exec '%s' \"$@\"\n", version, fake);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(wrapper, 0755), 0);
	json_object_set_new(raw, "runtime", json_string(wrapper));
	memset(err, 0, sizeof(*err));
	rc = sg_adapter_singularity.validate(&p, err);
	if (rc)
		print_message("validate: %s\n", err->msg);
	json_decref(raw);
	unlink(wrapper);
	rmdir(dir);
	return rc;
}

#define D64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* References as the runtime reads them, and what the cache keys on. */
static void test_refs(void **state)
{
	struct sg_sing_ref r;
	char *pinned;

	(void)state;
	assert_true(sg_sing_ref_parse("docker://debian:12", &r));
	assert_false(r.oras);
	assert_string_equal(r.host, "docker.io");
	assert_string_equal(r.api_host, "registry-1.docker.io");
	assert_string_equal(r.repo, "library/debian");
	assert_string_equal(r.tag, "12");
	assert_string_equal(r.digest, "");
	assert_false(r.plain_http);
	assert_true(sg_sing_ref_parse("docker://ghcr.io/org/tool", &r));
	assert_string_equal(r.host, "ghcr.io");
	assert_string_equal(r.repo, "org/tool");
	assert_string_equal(r.tag, "latest");
	assert_true(sg_sing_ref_parse("docker://user/img:v1", &r));
	assert_string_equal(r.repo, "user/img");
	assert_true(sg_sing_ref_parse("docker://127.0.0.1:5000/a/b:t@sha256:" D64, &r));
	assert_string_equal(r.host, "127.0.0.1:5000");
	assert_string_equal(r.repo, "a/b");
	assert_string_equal(r.tag, "t");
	assert_string_equal(r.digest, "sha256:" D64);
	assert_true(r.plain_http);
	assert_true(sg_sing_ref_parse("docker://localhost/x@sha256:" D64, &r));
	assert_string_equal(r.tag, "");
	assert_true(r.plain_http);
	assert_true(sg_sing_ref_parse("oras://reg.example:443/sifs/tool:1.0", &r));
	assert_true(r.oras);
	assert_string_equal(r.host, "reg.example:443");
	assert_string_equal(r.repo, "sifs/tool");
	pinned = sg_sing_ref_pinned(&r, "sha256:" D64);
	assert_string_equal(pinned, "oras://reg.example:443/sifs/tool@sha256:" D64);
	free(pinned);
	/* oras:// names its registry; digests are sha256 of 64 lower-case hex. */
	assert_false(sg_sing_ref_parse("oras://tool:1", &r));
	assert_false(sg_sing_ref_parse("docker://a@sha256:abc", &r));
	assert_false(sg_sing_ref_parse("docker://a@sha512:" D64, &r));
	assert_false(sg_sing_ref_parse("docker://a@sha256:" "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef", &r));
	assert_false(sg_sing_ref_parse("docker://", &r));
	assert_false(sg_sing_ref_parse("docker://a:", &r));
	assert_false(sg_sing_ref_parse("docker://Upper/Case", &r));
	assert_false(sg_sing_ref_parse("library://a/b", &r));
	assert_false(sg_sing_ref_parse("/images/x.sif", &r));
}

/* image_pull_policy's two values, and which cache entries are a reference's. */
static void test_pull_policy(void **state)
{
	char digest[SG_SING_DIGEST_LEN + 1];
	enum sg_sing_pull pull = SG_SING_PULL_IF_NOT_PRESENT;

	(void)state;
	assert_true(sg_sing_pull_parse(NULL, &pull));
	assert_int_equal(pull, SG_SING_PULL_ALWAYS);
	assert_true(sg_sing_pull_parse("if_not_present", &pull));
	assert_int_equal(pull, SG_SING_PULL_IF_NOT_PRESENT);
	assert_true(sg_sing_pull_parse("always", &pull));
	assert_int_equal(pull, SG_SING_PULL_ALWAYS);
	assert_false(sg_sing_pull_parse("never", &pull));
	assert_false(sg_sing_pull_parse("IfNotPresent", &pull));
	assert_false(sg_sing_pull_parse("", &pull));
	assert_true(sg_sing_cache_entry("ref-k", "ref-k." D64 ".sif", digest));
	assert_string_equal(digest, "sha256:" D64);
	/* Half-written conversions, locks, other references, bad digests. */
	assert_false(sg_sing_cache_entry("ref-k", "ref-k." D64 ".sif.part", digest));
	assert_false(sg_sing_cache_entry("ref-k", "ref-k." D64 ".lock", digest));
	assert_false(sg_sing_cache_entry("ref", "ref-k." D64 ".sif", digest));
	assert_false(sg_sing_cache_entry("ref-k", "ref-k.x." D64 ".sif", digest));
	assert_false(sg_sing_cache_entry("ref-k", "ref-k." D64 "0.sif", digest));
	assert_false(sg_sing_cache_entry("ref-k", "ref-k.0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef.sif", digest));
	assert_false(sg_sing_cache_entry("ref-k", "ref-k.sif", digest));
}

static void test_validate(void **state)
{
	struct sg_errinfo err;

	(void)state;
	assert_int_equal(validate_with("{\"image\": \"/x.sif\"}", "1.3.4", 0, SG_NET_DEFAULT, &err),
			 SG_OK);
	assert_int_equal(validate_with("{\"image\": \"/x.sif\"}", "1.3.4", 2, SG_NET_NONE, &err),
			 SG_OK);
	/* Before 1.1 there is no --cpus: the field is refused, by name. */
	assert_int_equal(validate_with("{\"image\": \"/x.sif\"}", "1.0.3", 2, SG_NET_DEFAULT, &err),
			 SG_E_UNSUPPORTED);
	assert_non_null(strstr(err.msg, "\"cpus\""));
	assert_non_null(strstr(err.msg, "1.0.3"));
	/* ... and nothing at all without --no-eval. */
	assert_int_equal(validate_with("{\"image\": \"/x.sif\"}", "1.0.3", 0, SG_NET_DEFAULT, &err),
			 SG_E_UNSUPPORTED);
	assert_non_null(strstr(err.msg, "--no-eval"));
	assert_int_equal(validate_with("{\"image\": \"/x.sif\"}", "1.3.4", 0, SG_NET_ALLOW, &err),
			 SG_E_UNSUPPORTED);
	assert_int_equal(validate_with("{}", "1.3.4", 0, SG_NET_DEFAULT, &err),
			 SG_E_INVALID_ARGUMENT);
	assert_non_null(strstr(err.msg, "image"));
	assert_int_equal(validate_with("{\"image\": \"docker://a:1\", \"image_pull_policy\": \"if_not_present\"}",
				       "1.3.4", 0, SG_NET_DEFAULT, &err),
			 SG_OK);
	/* Only the two values, refused naming the field. */
	assert_int_equal(validate_with("{\"image\": \"docker://a:1\", \"image_pull_policy\": \"never\"}",
				       "1.3.4", 0, SG_NET_DEFAULT, &err),
			 SG_E_INVALID_ARGUMENT);
	assert_non_null(strstr(err.msg, "\"image_pull_policy\""));
	assert_non_null(strstr(err.msg, "if_not_present"));
	{
		json_t *raw = json_pack("{s:s, s:s}", "image", "/x.sif", "runtime",
					"/nonexistent/apptainer");
		struct sg_profile p = { .name = "t", .image = "/x.sif", .raw = raw };

		sg_err rc;

		memset(&err, 0, sizeof(err));
		rc = sg_adapter_singularity.validate(&p, &err);
		assert_int_equal(rc, SG_E_UNSUPPORTED);
		assert_non_null(strstr(err.msg, "/nonexistent/apptainer"));
		json_decref(raw);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_versions),   cmocka_unit_test(test_cli_env),
		cmocka_unit_test(test_exec_env),   cmocka_unit_test(test_start_argv),
		cmocka_unit_test(test_exec_argv),  cmocka_unit_test(test_validate),
		cmocka_unit_test(test_refs),       cmocka_unit_test(test_pull_policy),
	};
	char here[4096];

	snprintf(here, sizeof(here), "%s", __FILE__);
	snprintf(fake, sizeof(fake), "%s/../fakes/apptainer/apptainer", dirname(here));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
