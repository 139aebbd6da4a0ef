/*
 * singularity.c - the singularity backend: an Apptainer (or SingularityCE)
 * instance per identity, driven through the CLI, argv only.
 *
 * An environment is a directory under the state dir
 * (<state>/singularity/<slug>/) holding the workspace (or the profile's
 * host_workspace is used), the control directory, the persistent overlay
 * and a marker, plus a running instance `sg-<slug>` started with
 * `--containall --no-home --cleanenv` and without privileges
 * (SG_SING_PRIV_FLAGS: a user namespace, no capability, /proc's host-wide
 * files read-only), the workspace bound at binding.root, sg-helper bound
 * read-only and the control directory bound beside it.  Commands join the
 * instance with `exec --cleanenv --no-eval SG_SING_PRIV_FLAGS
 * instance://NAME`; the command's variables reach it as
 * APPTAINERENV_NAME=value in the CLI's environment (never on a command
 * line), and the CLI is given nothing else of the gateway's environment
 * but what it needs (sg_sing_cli_env): --cleanenv would hand a command
 * TERM and every proxy variable, and APPTAINER_* variables steer it.  A
 * new instance is checked from inside before any command runs: a process
 * joining it must be in a user namespace, hold no capability and be unable
 * to open a host-wide /proc file for writing, or the start is refused.
 *
 * Enforcement is the runtime's, and refused where it cannot happen:
 * cpus/memory_mb are `--cpus/--memory` (missing before Apptainer 1.1 /
 * SingularityCE 3.10: refused by validate; a FATAL about cgroups from the
 * runtime: refused by provision naming the field), `network: "none"` is
 * `--net --network none` (a FATAL about the network: refused naming it).
 *
 * Files are directories on this host, so the adapter sets SG_CAP_HOST_FS
 * and the gateway runs file tools in-process; the instance has its own
 * pid namespace, so process steps go through exec (SG_CAP_PID_NS).
 */
#define _GNU_SOURCE /* asprintf */
#include "singularity/singularity.h"
#include "singularity/registry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/digest.h"
#include "core/exec.h"
#include "adapters/hostutil.h"
#include "base/crash.h"
#include "base/fsutil.h"
#include "base/limits.h"
#include "base/progress.h"
#include "base/log.h"
#include "base/slug.h"

extern char **environ;

/* Where the instance shows sandgate's own parts. */
#define SING_HELPER "/run/sandgate/sg-helper"
#define SING_CTL "/run/sandgate/ctl"
/* The longest plain environment name (env_name()). */
#define SING_NAME_MAX 100
/* The most of the privilege check's answer kept for an error sentence. */
#define SING_CHECK_MAX 4096
/* How many /proc paths are bound read-only (proc_host_wide). */
#define SING_PROC_RO_MAX 4
/* The largest conversion record read (a few hundred bytes: record_new()). */
#define SING_RECORD_MAX 4096

/*
 * /proc's files that change the whole host and that bubblewrap also covers:
 * sysctls and the sysrq trigger check the writer's uid, not a capability,
 * and the instance's uid 0 is this host's uid 0 when sandgate runs as
 * root, so each is bound read-only over itself (where this host has it).
 */
static const char *const proc_host_wide[SING_PROC_RO_MAX + 1] = {
	"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", NULL,
};

/*
 * Run in the instance before any command: it prints a line for each
 * privilege a joining process has, then "end".  A sysctl and the sysrq
 * trigger are opened for appending, which writes nothing.
 */
static const char sing_check_script[] =
	"read a b c < /proc/self/uid_map\n"
	"[ \"$a $b $c\" = '0 0 4294967295' ] && echo \"runs in this host's user namespace\"\n"
	"while read k v; do case $k in CapPrm:|CapEff:|CapBnd:|CapAmb:)\n"
	"  [ \"$v\" = 0000000000000000 ] || echo \"holds capabilities ($k $v)\";; esac\n"
	"done < /proc/self/status\n"
	"for f in /proc/sys/kernel/core_pattern /proc/sysrq-trigger; do\n"
	"  [ -e \"$f\" ] && (: >> \"$f\") 2>/dev/null && echo \"can open $f for writing\"\n"
	"done\n"
	"echo end\n";

/*
 * The profile fields this backend honours (adapter.h); the config layer
 * refuses every other one.  cpus, memory_mb and network "none" depend on
 * the runtime's version and the site: validate() and provision() refuse
 * them where they cannot be enforced, unless best_effort lists them.
 * `runtime` is this backend's own: the apptainer or singularity program;
 * so is `image_pull_policy` (sg_sing_pull_parse()).
 */
static const struct sg_field sing_fields[] = {
	SG_FIELD("image"), SG_FIELD("workspace"), SG_FIELD("host_workspace"),
	SG_FIELD("mount_read_only"), SG_FIELD("persistent"), SG_FIELD("shared"),
	SG_FIELD_BEST_EFFORT("network"), SG_FIELD_BEST_EFFORT("cpus"),
	SG_FIELD_BEST_EFFORT("memory_mb"), SG_FIELD_OWN_STRING("runtime"),
	SG_FIELD_OWN_STRING("image_pull_policy"), SG_FIELDS_END,
};

struct sing_env {
	struct sg_host_env h; /* first; h.dir is <base>/singularity/<slug> */
	char *runtime;   /* the CLI's path */
	struct sg_sing_version ver;
	char *name;      /* the instance: sg-<slug> */
	struct sg_strv cli_env; /* the CLI's environment (borrowed strings) */
	const char *proc_ro[SING_PROC_RO_MAX + 1]; /* proc_host_wide's on this host */
	bool started;    /* this session started the instance */
	char digest[SG_SING_DIGEST_LEN + 1]; /* a docker:// or oras:// image's, or "" */
	enum sg_sing_pull pull; /* the profile's image_pull_policy */
	long long cache_age_s;  /* the cached SIF's age when taken without the registry, else -1 */
};

/* ---- the pure parts (singularity.h) ------------------------------------ */

bool sg_sing_parse_version(const char *text, struct sg_sing_version *v)
{
	char name[32];
	int n = 0;

	memset(v, 0, sizeof(*v));
	if (!text || sscanf(text, "%31s version %d.%d.%d%n", name, &v->major, &v->minor,
			    &v->patch, &n) != 4 || n == 0)
		return false;
	if (strcmp(name, "apptainer") == 0)
		v->flavour = SG_SING_APPTAINER;
	else if (strcmp(name, "singularity-ce") == 0)
		v->flavour = SG_SING_SINGULARITY_CE;
	else if (strcmp(name, "singularity") == 0)
		v->flavour = SG_SING_LEGACY;
	else
		return false;
	return true;
}

static bool version_at_least(const struct sg_sing_version *v, int major, int minor)
{
	return v->major > major || (v->major == major && v->minor >= minor);
}

bool sg_sing_has_limits(const struct sg_sing_version *v)
{
	switch (v->flavour) {
	case SG_SING_APPTAINER:
		return version_at_least(v, 1, 1);
	case SG_SING_SINGULARITY_CE:
		return version_at_least(v, 3, 10);
	default:
		return false;
	}
}

const char *sg_sing_env_prefix(const struct sg_sing_version *v)
{
	return v->flavour == SG_SING_APPTAINER ? "APPTAINERENV_" : "SINGULARITYENV_";
}

bool sg_sing_pull_parse(const char *text, enum sg_sing_pull *out)
{
	if (!text || strcmp(text, "always") == 0)
		*out = SG_SING_PULL_ALWAYS;
	else if (strcmp(text, "if_not_present") == 0)
		*out = SG_SING_PULL_IF_NOT_PRESENT;
	else
		return false;
	return true;
}

bool sg_sing_cache_entry(const char *key, const char *name, char digest[SG_SING_DIGEST_LEN + 1])
{
	size_t k = strlen(key), hex = SG_SING_DIGEST_LEN - 7;

	if (strlen(name) != k + 1 + hex + 4 || strncmp(name, key, k) != 0 || name[k] != '.' ||
	    strcmp(name + k + 1 + hex, ".sif") != 0)
		return false;
	snprintf(digest, SG_SING_DIGEST_LEN + 1, "sha256:%.*s", (int)hex, name + k + 1);
	return sg_sing_digest_valid(digest);
}

/* Whether var ("NAME=value") is named in names. */
static bool named_in(const char *var, const char *const *names)
{
	for (size_t i = 0; names[i]; i++) {
		size_t n = strlen(names[i]);

		if (strncmp(var, names[i], n) == 0 && var[n] == '=')
			return true;
	}
	return false;
}

sg_err sg_sing_cli_env(const char *const *envp, bool pull, struct sg_strv *out)
{
	/* What the runtime reads to find its programs, its state and the user's session. */
	static const char *const cli[] = { "PATH", "HOME", "USER", "LOGNAME", "TMPDIR",
					   "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", NULL };
	/* What an image pull may need to reach its registry. */
	static const char *const pulls[] = { "http_proxy", "HTTP_PROXY", "https_proxy",
					     "HTTPS_PROXY", "no_proxy", "NO_PROXY", "all_proxy",
					     "ALL_PROXY", "ftp_proxy", "FTP_PROXY", "SSL_CERT_FILE",
					     "SSL_CERT_DIR", NULL };
	sg_err rc = SG_OK;

	for (size_t i = 0; !rc && envp && envp[i]; i++)
		if (named_in(envp[i], cli) || (pull && named_in(envp[i], pulls)))
			rc = sg_strv_add(out, envp[i]);
	return rc;
}

sg_err sg_sing_exec_env(const char *const *base, const char *prefix,
			const char *const *cmd_env, struct sg_strv *out)
{
	sg_err rc = sg_strv_addv(out, base);

	for (size_t i = 0; !rc && cmd_env && cmd_env[i]; i++) {
		if (strncmp(cmd_env[i], "HOME=", 5) == 0 || !strchr(cmd_env[i], '='))
			continue;
		rc = sg_strv_addf(out, "%s%s", prefix, cmd_env[i]);
	}
	return rc;
}

/* A white-space character Go's strings.TrimSpace removes, ending at end. */
static bool ends_in_space(const char *p, size_t n)
{
	static const char *const wide[] = {
		"\xc2\x85", "\xc2\xa0", "\xe1\x9a\x80", "\xe2\x80\xa8", "\xe2\x80\xa9",
		"\xe2\x80\xaf", "\xe2\x81\x9f", "\xe3\x80\x80", NULL,
	};

	if (n && strchr(" \t\n\v\f\r", p[n - 1]))
		return true;
	/* U+2000 to U+200A. */
	if (n >= 3 && (unsigned char)p[n - 3] == 0xe2 && (unsigned char)p[n - 2] == 0x80 &&
	    (unsigned char)p[n - 1] >= 0x80 && (unsigned char)p[n - 1] <= 0x8a)
		return true;
	for (size_t i = 0; wide[i]; i++) {
		size_t w = strlen(wide[i]);

		if (n >= w && memcmp(p + n - w, wide[i], w) == 0)
			return true;
	}
	return false;
}

bool sg_sing_bind_path_ok(const char *path)
{
	size_t n = path ? strlen(path) : 0;

	/*
	 * The runtime's parser (ParseBindPath) matches `[^,^:]+` and trims
	 * each match: a leading or trailing space moves the path, anything
	 * in ",:^\\" starts another bind or an option such as image-src.
	 */
	if (!n || strpbrk(path, ",:^\\"))
		return false;
	if (strchr(" \t\n\v\f\r", path[0]) || (unsigned char)path[0] >= 0x80)
		return false;
	return !ends_in_space(path, n);
}

sg_err sg_sing_start_argv(const struct sg_sing_start *s, struct sg_strv *av)
{
	sg_err rc;

	if (!sg_sing_bind_path_ok(s->workspace) || !sg_sing_bind_path_ok(s->root) ||
	    !sg_sing_bind_path_ok(s->helper_host) || !sg_sing_bind_path_ok(s->helper) ||
	    !sg_sing_bind_path_ok(s->ctl_host) || !sg_sing_bind_path_ok(s->ctl))
		return SG_E_INVALID_ARGUMENT;
	for (size_t i = 0; s->proc_ro && s->proc_ro[i]; i++)
		if (!sg_sing_bind_path_ok(s->proc_ro[i]))
			return SG_E_INVALID_ARGUMENT;
	rc = sg_strv_addv(av, (const char *[]){ s->runtime, "instance", "start",
						       "--containall", "--no-home",
						       "--cleanenv", SG_SING_PRIV_FLAGS, NULL });

	if (!rc && s->network_none)
		rc = sg_strv_addv(av, (const char *[]){ "--net", "--network", "none", NULL });
	if (!rc && s->cpus > 0)
		rc = sg_strv_addf(av, "--cpus=%.2f", s->cpus);
	if (!rc && s->memory_mb > 0)
		rc = sg_strv_addf(av, "--memory=%lldM", s->memory_mb);
	if (!rc && s->overlay)
		rc = sg_strv_addv(av, (const char *[]){ "--overlay", s->overlay, NULL });
	else if (!rc)
		rc = sg_strv_add(av, "--writable-tmpfs");
	/*
	 * One bind per flag, each path checked above: the runtime splits
	 * even a single --bind value at ',' and ':'.
	 */
	if (!rc)
		rc = sg_strv_add(av, "--bind") ||
		     sg_strv_addf(av, "%s:%s%s", s->workspace, s->root,
				  s->workspace_ro ? ":ro" : "");
	if (!rc)
		rc = sg_strv_add(av, "--bind") ||
		     sg_strv_addf(av, "%s:%s:ro", s->helper_host, s->helper);
	if (!rc)
		rc = sg_strv_add(av, "--bind") || sg_strv_addf(av, "%s:%s", s->ctl_host, s->ctl);
	for (size_t i = 0; !rc && s->proc_ro && s->proc_ro[i]; i++)
		rc = sg_strv_add(av, "--bind") ||
		     sg_strv_addf(av, "%s:%s:ro", s->proc_ro[i], s->proc_ro[i]);
	if (!rc)
		rc = sg_strv_addv(av, (const char *[]){ s->image, s->name, NULL });
	return rc ? SG_E_INTERNAL : SG_OK;
}

sg_err sg_sing_exec_argv(const char *runtime, const char *name, const char *cwd,
			 const char *home, const char *helper, const char *const *argv,
			 struct sg_strv *av)
{
	sg_err rc = sg_strv_addv(av, (const char *[]){ runtime, "exec", "--cleanenv", "--no-eval",
						       SG_SING_PRIV_FLAGS, "--pwd", cwd, NULL });

	if (!rc)
		rc = sg_strv_addf(av, "instance://%s", name);
	if (!rc && helper)
		rc = sg_strv_addv(av, (const char *[]){ helper, "confine", "--mode", "scope", "--",
							 NULL });
	/*
	 * The runtime refuses HOME from APPTAINERENV_HOME; env(1) sets it.
	 * env takes every operand holding '=' for an assignment (a "--"
	 * would be run as the command), so a program whose name holds one is
	 * started by a shell's exec, which expansion never turns into an
	 * assignment.  A name starting with '-' is safe: env reads no option
	 * after its first operand.
	 */
	if (!rc && home)
		rc = sg_strv_addv(av, (const char *[]){ "env", NULL }) ||
		     sg_strv_addf(av, "HOME=%s", home);
	if (!rc && home && argv[0] && strchr(argv[0], '='))
		rc = sg_strv_addv(av, (const char *[]){ "/bin/sh", "-c", /* in the environment */
							 "exec \"$@\"", "sh", NULL });
	if (!rc)
		rc = sg_strv_addv(av, argv);
	return rc ? SG_E_INTERNAL : SG_OK;
}

/* ---- this host ---------------------------------------------------------- */

/* The profile's runtime (field `runtime`), else apptainer, else singularity (new). */
static char *runtime_of(const struct sg_profile *p)
{
	const char *want = sg_profile_str(p, "runtime");
	char *found;

	if (want && strchr(want, '/')) {
		found = sg_profile_path(p, want);
		if (found && access(found, X_OK) != 0) {
			free(found);
			found = NULL;
		}
		return found;
	}
	if (want)
		return sg_exec_which(want);
	found = sg_exec_which("apptainer");
	return found ? found : sg_exec_which("singularity");
}

/* Run the CLI with the scrubbed environment. */
static sg_err run_cli(const char *const *argv, const char *const *envp, int64_t timeout_ms,
		      struct sg_exec_result *r, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_child c = {
		.argv = argv,
		.envp = envp,
		.timeout_ms = timeout_ms,
		.term_signal = SIGTERM,
		.term_grace_ms = 2000,
	};

	return sg_exec_run(&c, r, cancel, err);
}

/* The runtime's version, probed (`RUNTIME --version`). */
static sg_err probe_version(const char *runtime, const char *const *envp,
			    struct sg_sing_version *v, struct sg_errinfo *err)
{
	struct sg_exec_result r;
	sg_err rc;

	sg_exec_result_init(&r, 4096);
	rc = run_cli((const char *[]){ runtime, "--version", NULL }, envp, SG_SING_VERSION_MS,
		     &r, NULL, err);
	if (!rc && (r.exit_code != 0 || !sg_sing_parse_version(r.out.p, v)))
		rc = sg_err_set(err, SG_E_UNSUPPORTED,
				"%s --version did not say which version it is (exit %d): %.120s",
				runtime, r.exit_code, r.out.len ? r.out.p : r.err.p ? r.err.p : "");
	sg_exec_result_release(&r);
	return rc;
}

/* The CLI's environment from the gateway's (sg_sing_cli_env). */
static sg_err cli_env(struct sg_strv *out, bool pull)
{
	return sg_sing_cli_env((const char *const *)environ, pull, out);
}

static sg_err sing_validate(const struct sg_profile *p, struct sg_errinfo *err)
{
	struct sg_strv envs = SG_STRV_INIT;
	struct sg_sing_version v;
	enum sg_sing_pull pull;
	char *runtime = NULL;
	sg_err rc = SG_OK;

	if (!sg_sing_pull_parse(sg_profile_str(p, "image_pull_policy"),
				&pull))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "field \"image_pull_policy\" (profile \"%s\") is \"always\" (the default) or \"if_not_present\"",
				  p->name);
	if (p->network == SG_NET_ALLOW && !sg_profile_best_effort(p, "network"))
		return sg_err_set(err, SG_E_UNSUPPORTED,
				  "network allow lists (profile \"%s\") cannot be enforced by the singularity backend; use \"none\" or \"default\"",
				  p->name);
	if (!p->image)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "profile \"%s\" (singularity) needs an \"image\": a SIF file, a sandbox directory, docker://... or oras://...",
				  p->name);
	runtime = runtime_of(p);
	if (!runtime) {
		rc = sg_err_set(err, SG_E_UNSUPPORTED,
				"profile \"%s\" needs apptainer or singularity: %s was not found",
				p->name,
				sg_profile_str(p, "runtime") ? sg_profile_str(p, "runtime")
							     : "neither is on PATH");
		goto out;
	}
	rc = cli_env(&envs, false);
	if (!rc)
		rc = probe_version(runtime, sg_strv_get(&envs), &v, err);
	if (rc)
		goto out;
	if (!sg_sing_has_limits(&v)) {
		const char *field = p->cpus > 0 && !sg_profile_best_effort(p, "cpus") ? "cpus"
				    : p->memory_mb > 0 && !sg_profile_best_effort(p, "memory_mb") ? "memory_mb"
				    : NULL;

		if (field)
			rc = sg_err_set(err, SG_E_UNSUPPORTED,
					"field \"%s\" (profile \"%s\") needs Apptainer 1.1 or SingularityCE 3.10 (--cpus/--memory); %s is version %d.%d.%d",
					field, p->name, runtime, v.major, v.minor, v.patch);
		else
			rc = sg_err_set(err, SG_E_UNSUPPORTED,
					"profile \"%s\": %s is version %d.%d.%d; the singularity backend needs Apptainer 1.1 or SingularityCE 3.10 (--no-eval, so variables reach commands literally)",
					p->name, runtime, v.major, v.minor, v.patch);
	}
out:
	sg_strv_release(&envs);
	free(runtime);
	return rc;
}

/*
 * <state>/singularity (new).  The profile's `workspace` is accepted and
 * changes nothing: commands see the workspace at binding.root.
 */
static char *envs_dir(const struct sg_profile *p, const char *state_dir)
{
	char *d = NULL;

	(void)p;
	return asprintf(&d, "%s/singularity", state_dir) < 0 ? NULL : d;
}

/*
 * Whether name is a plain environment name: an identity's slug that
 * Apptainer accepts in an instance name ([a-zA-Z0-9._-]+, so no "%XX"),
 * at most SING_NAME_MAX bytes, and not the image cache's "images".
 */
static bool plain_name(const char *name)
{
	size_t n = strlen(name);

	if (!n || n > SING_NAME_MAX || name[0] == '.' || strcmp(name, "images") == 0)
		return false;
	return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
	       n;
}

/*
 * Whether name is one env_name() gives: plain, or '.' and 32 hex digits.
 * Nothing else is ever a directory to remove or an instance to stop (the
 * runtime's `instance stop` reads a glob).
 */
static bool env_name_ok(const char *name)
{
	return plain_name(name) || (name[0] == '.' && strlen(name) == 33 &&
				    strspn(name + 1, "0123456789abcdef") == 32);
}

/*
 * The environment's name: its directory under <state>/singularity, its id
 * after "singularity-" and its instance after "sg-" (new string, or NULL).
 * The identity's slug when plain_name() holds, else '.' and the first 32
 * hex digits of the identity's SHA-256 (short, since the instance's name
 * is also its host name, at most 64 bytes): a slug keeps "%XX", which
 * Apptainer refuses in an instance name, one over 100 bytes was never
 * listed, and "images" was the image cache.  A slug never starts with
 * '.', so no plain name is a hashed one.
 */
static char *env_name(const char *identity)
{
	char *s = sg_slug(identity), sum[65], *name = NULL;

	if (!s || plain_name(s))
		return s;
	free(s);
	if (!sg_sha256_hex(identity, strlen(identity), sum) ||
	    asprintf(&name, ".%.32s", sum) < 0)
		return NULL;
	return name;
}

/* The runtime's last FATAL line (or its whole stderr) for a sentence. */
static const char *fatal_text(const struct sg_exec_result *r)
{
	const char *p = r->err.p ? r->err.p : "", *f = strstr(p, "FATAL:");
	const char *last = f;

	while (f && (f = strstr(f + 1, "FATAL:")))
		last = f;
	return last ? last : p;
}

/*
 * A conversion's record, SIF.json beside each cached SIF, written once the
 * SIF is in place (under the conversion's lock): the reference it was
 * converted from (scheme, registry, repository, tag), the manifest digest,
 * the SIF's own SHA-256 and the file's identity when it was hashed (inode,
 * size, mtime, ctime).  A cache entry is started only when its record
 * names the same reference and digest and the file is still the one
 * hashed, so a conversion cut short, a file copied in by hand or another
 * tag's conversion under this one's name is never started.  Any write to
 * the file moves its ctime, which no program can set back, so an
 * unchanged identity spares hashing a large SIF at every start; a changed
 * one (a copy from a login node, say) is hashed.  st_dev is left out: a
 * shared file system's differs between nodes.
 */
static json_t *record_new(const struct sg_sing_ref *r, const char *digest, const char *sha,
			  const struct stat *st)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "scheme",
			 r->oras ? "oras" : "docker", "registry", r->host, "repository", r->repo,
			 "tag", r->tag, "manifest_digest", digest, "sif_sha256", sha, "ino",
			 (json_int_t)st->st_ino, "size", (json_int_t)st->st_size, "mtime_s",
			 (json_int_t)st->st_mtim.tv_sec, "mtime_ns", (json_int_t)st->st_mtim.tv_nsec,
			 "ctime_s", (json_int_t)st->st_ctim.tv_sec, "ctime_ns",
			 (json_int_t)st->st_ctim.tv_nsec);
}

/* A string member of a record, or "" when it has none. */
static const char *record_str(const json_t *rec, const char *key)
{
	const char *v = json_string_value(json_object_get(rec, key));

	return v ? v : "";
}

/* Whether rec is a record of a conversion of r at digest. */
static bool record_names(const json_t *rec, const struct sg_sing_ref *r, const char *digest)
{
	return strcmp(record_str(rec, "scheme"), r->oras ? "oras" : "docker") == 0 &&
	       strcmp(record_str(rec, "registry"), r->host) == 0 &&
	       strcmp(record_str(rec, "repository"), r->repo) == 0 &&
	       strcmp(record_str(rec, "tag"), r->tag) == 0 &&
	       strcmp(record_str(rec, "manifest_digest"), digest) == 0 &&
	       strlen(record_str(rec, "sif_sha256")) == 64;
}

/* Whether st is the file's identity rec recorded when it was hashed. */
static bool record_same_file(const json_t *rec, const struct stat *st)
{
	json_t *same = record_new(&(struct sg_sing_ref){ 0 }, "", "", st);
	const char *const keys[] = { "ino", "size", "mtime_s", "mtime_ns", "ctime_s", "ctime_ns" };
	bool eq = same != NULL;

	for (size_t i = 0; eq && i < sizeof(keys) / sizeof(keys[0]); i++)
		eq = json_is_integer(json_object_get(rec, keys[i])) &&
		     json_equal(json_object_get(rec, keys[i]), json_object_get(same, keys[i]));
	json_decref(same);
	return eq;
}

/* The record of sif (new), or NULL when it has none that can be read. */
static json_t *record_load(const char *sif)
{
	char *path = NULL;
	json_t *rec = NULL;
	struct stat st;
	int fd = -1;

	if (asprintf(&path, "%s.json", sif) < 0)
		return NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= SING_RECORD_MAX)
		rec = json_loadfd(fd, JSON_REJECT_DUPLICATES, NULL);
	if (rec && !json_is_object(rec)) {
		json_decref(rec);
		rec = NULL;
	}
	if (fd >= 0)
		close(fd);
	free(path);
	return rec;
}

/*
 * Whether the cache entry sif (of r at digest) may be started: SG_OK, or
 * SG_E_NOT_FOUND when no conversion of r at digest is recorded for it, or
 * SG_E_UNAVAILABLE when the file is no longer the one converted; err says
 * which (the log names the file).
 */
static sg_err entry_check(const char *sif, const struct sg_sing_ref *r, const char *digest,
			  struct sg_errinfo *err)
{
	json_t *rec = record_load(sif);
	struct stat st;
	char sha[65];
	int fd = -1;
	sg_err rc = SG_OK;

	if (!rec || !record_names(rec, r, digest)) {
		rc = sg_err_set(err, SG_E_NOT_FOUND, "no conversion of %.19s... is recorded", digest);
		goto out;
	}
	fd = open(sif, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		rc = sg_err_set(err, SG_E_NOT_FOUND, "its conversion %.19s... cannot be read", digest);
		goto out;
	}
	if (record_same_file(rec, &st))
		goto out;
	rc = sg_sha256_fd_hex(fd, "a cached SIF", sha, err);
	if (!rc && strcmp(sha, record_str(rec, "sif_sha256")) != 0) {
		sg_log_warn("image cache: %s is no longer the file converted (SHA-256 %s, recorded %s)",
			    sif, sha, record_str(rec, "sif_sha256"));
		rc = sg_err_set(err, SG_E_UNAVAILABLE,
				"its cached conversion %.19s... is no longer the file converted (its SHA-256 is not the one recorded): delete it from the image cache",
				digest);
	}
out:
	if (fd >= 0)
		close(fd);
	json_decref(rec);
	return rc;
}

/*
 * Store the conversion tmp (of r at digest) as sif, then its record: the
 * record last, so an entry cut short between the two is never started.
 */
static sg_err entry_store(const char *tmp, const char *sif, const struct sg_sing_ref *r,
			  const char *digest, struct sg_errinfo *err)
{
	char sha[65], *rec_path = NULL, *rec_tmp = NULL;
	int fd = open(tmp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	json_t *rec = NULL;
	struct stat st;
	sg_err rc = SG_OK;

	if (fd < 0) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot open %s: %s", tmp, strerror(errno));
		goto out;
	}
	rc = sg_sha256_fd_hex(fd, "the converted SIF", sha, err);
	if (rc)
		goto out;
	/* The identity recorded is the one after the rename, which moves ctime. */
	if (rename(tmp, sif) || fstat(fd, &st)) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot store %s: %s", sif, strerror(errno));
		goto out;
	}
	if (asprintf(&rec_path, "%s.json", sif) < 0 || asprintf(&rec_tmp, "%s.json.part", sif) < 0 ||
	    !(rec = record_new(r, digest, sha, &st))) {
		rec_path = rec_tmp = NULL;
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (json_dump_file(rec, rec_tmp, JSON_COMPACT) || rename(rec_tmp, rec_path)) {
		unlink(rec_tmp);
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot store the record of %s", sif);
	}
out:
	if (fd >= 0)
		close(fd);
	json_decref(rec);
	free(rec_path);
	free(rec_tmp);
	return rc;
}

/*
 * The newest cached SIF of the reference r keyed key in images (new, into
 * *out) among those recorded as its conversions, its digest into
 * se->digest and its age into se->cache_age_s; SG_E_NOT_FOUND when there
 * is none.  The newest must still be the file converted: when it is not,
 * the session is refused (SG_E_UNAVAILABLE), never quietly started from
 * an older one.
 */
static sg_err newest_cached(struct sing_env *se, const char *images, const char *key,
			    const struct sg_sing_ref *r, char **out, struct sg_errinfo *err)
{
	char digest[SG_SING_DIGEST_LEN + 1], *path = NULL, *best = NULL;
	struct timespec best_at = { 0, 0 };
	DIR *d = opendir(images);
	struct dirent *de;
	struct stat st;
	sg_err rc = SG_E_NOT_FOUND;

	if (!d && errno != ENOENT)
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot read the image cache %s: %s", images,
				strerror(errno));
	while (d && (de = readdir(d))) {
		json_t *rec;

		if (!sg_sing_cache_entry(key, de->d_name, digest) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode) ||
		    (best && (st.st_mtim.tv_sec < best_at.tv_sec ||
			      (st.st_mtim.tv_sec == best_at.tv_sec &&
			       st.st_mtim.tv_nsec <= best_at.tv_nsec))))
			continue;
		free(path);
		if (asprintf(&path, "%s/%s", images, de->d_name) < 0) {
			path = NULL;
			rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
			goto out;
		}
		rec = record_load(path);
		if (!rec || !record_names(rec, r, digest)) {
			sg_log_warn("image cache: %s is not a recorded conversion of this reference; not taken",
				    path);
			json_decref(rec);
			continue;
		}
		json_decref(rec);
		free(best);
		best = path;
		path = NULL;
		best_at = st.st_mtim;
		memcpy(se->digest, digest, sizeof(digest));
		rc = SG_OK;
	}
	if (!rc)
		rc = entry_check(best, r, se->digest, err);
	if (rc == SG_E_NOT_FOUND && best) /* removed or replaced while it was chosen */
		rc = sg_err_set(err, SG_E_UNAVAILABLE,
				"its cached conversion %.19s... changed while it was chosen", se->digest);
	if (!rc) {
		time_t now = time(NULL);

		se->cache_age_s = now > best_at.tv_sec ? (long long)(now - best_at.tv_sec) : 0;
		*out = best;
		best = NULL;
	}
out:
	if (rc)
		se->digest[0] = '\0';
	if (d)
		closedir(d);
	free(path);
	free(best);
	return rc;
}

/*
 * The digest the registry gives for parsed now (parsed's own when pinned,
 * without asking), into se->digest; err names the reference and, where
 * the policy would have taken the cache, that nothing of it was there.
 */
static sg_err ask_digest(struct sing_env *se, const struct sg_sing_ref *parsed, const char *ref,
			 struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_errinfo why = { 0 };
	sg_err rc;

	if (!parsed->digest[0])
		sg_progress_begin("image", "asking %s for the digest of %s", parsed->host, ref);
	rc = sg_sing_ref_resolve(parsed, se->digest, cancel, &why);
	if (!parsed->digest[0])
		sg_progress_end(rc);
	/* Under "always", never the cached SIF of a tag that may have moved. */
	if (rc && se->pull == SG_SING_PULL_IF_NOT_PRESENT)
		rc = sg_err_set(err, rc,
				"image %.150s: nothing of it is in the image cache, and field \"image_pull_policy\" is \"if_not_present\", which asks the registry then: %s",
				ref, why.msg);
	else if (rc)
		rc = sg_err_set(err, rc,
				"image %.200s: %s; a reference pinned by digest (...@sha256:HEX), or image_pull_policy \"if_not_present\" with the image cached, needs no registry",
				ref, why.msg);
	return rc;
}

/*
 * Convert parsed (ref) pinned to se->digest into tmp with the runtime's
 * `build`, then store it as sif with its record (entry_store()); tmp is
 * gone either way.  The caller holds the conversion's lock.
 */
static sg_err convert(struct sing_env *se, const struct sg_sing_ref *parsed, const char *ref,
		      const char *tmp, const char *sif, struct sg_cancel *cancel,
		      struct sg_errinfo *err)
{
	char *pinned = sg_sing_ref_pinned(parsed, se->digest);
	struct sg_strv pull = SG_STRV_INIT;
	struct sg_exec_result r;
	sg_err rc;

	sg_exec_result_init(&r, 4096);
	/* The pull alone is given the operator's proxy (sg_sing_cli_env). */
	if (!pinned || cli_env(&pull, true)) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	sg_log_info("converting %s (%s) into %s (once; later sessions reuse it)", ref, se->digest,
		    sif);
	unlink(tmp);
	sg_progress_begin("image", "converting %s into a SIF", pinned);
	/* A loopback registry is plain http (registry.h), and the runtime must be told. */
	rc = run_cli(parsed->plain_http
			     ? (const char *[]){ se->runtime, "build", "--no-https", tmp, pinned, NULL }
			     : (const char *[]){ se->runtime, "build", tmp, pinned, NULL },
		     sg_strv_get(&pull), SG_SING_BUILD_MS, &r, cancel, err);
	sg_progress_end(rc ? rc : r.exit_code ? SG_E_PROVIDER : SG_OK);
	if (r.err.len)
		sg_log_info("%s build: %s", se->runtime, r.err.p);
	if (!rc && r.exit_code != 0)
		rc = sg_err_set(err, SG_E_PROVIDER, "cannot convert %s into a SIF: %.300s", ref,
				fatal_text(&r));
	if (!rc)
		rc = entry_store(tmp, sif, parsed, se->digest, err);
	if (rc)
		unlink(tmp);
out:
	sg_strv_release(&pull);
	sg_exec_result_release(&r);
	free(pinned);
	return rc;
}

/*
 * A docker:// or oras:// image, converted once into a SIF in the state
 * dir: keyed by the reference and the digest the registry gives for it
 * now (registry.h), so a tag that moved is converted again and a reference
 * pinned by digest is found without asking the registry; built from the
 * reference pinned to that digest, so the SIF is the one keyed; under a
 * lock so that concurrent sessions wait for one conversion; renamed into
 * place when complete, with its record (entry_store()); started again
 * only while it is still the file converted (entry_check()), else
 * converted again.  Under image_pull_policy "if_not_present" a tag's
 * newest recorded conversion is taken without asking (an offline compute
 * node), whatever the tag names now.
 */
static sg_err cached_sif(struct sing_env *se, const char *ref, char **out,
			 struct sg_cancel *cancel, struct sg_errinfo *err)
{
	char *dir = NULL, *images = NULL, *key = NULL, *sif = NULL, *tmp = NULL, *lock = NULL;
	char *name = sg_slug_digest(ref, SG_SING_KEY_MAX);
	struct sg_errinfo why = { 0 };
	struct sg_sing_ref parsed;
	int fd = -1;
	sg_err rc = SG_OK;

	if (!name || !(dir = envs_dir(se->h.base.profile, se->h.base.state_dir)) ||
	    asprintf(&images, "%s/images", dir) < 0) {
		images = NULL;
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (!sg_sing_ref_parse(ref, &parsed)) {
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT,
				"image %.300s is not a reference sandgate can read: docker://[HOST/]NAME[:TAG][@sha256:HEX] or oras://HOST/NAME[:TAG][@sha256:HEX]",
				ref);
		goto out;
	}
	if (se->pull == SG_SING_PULL_IF_NOT_PRESENT && !parsed.digest[0]) {
		rc = newest_cached(se, images, name, &parsed, &sif, &why);
		if (rc == SG_E_UNAVAILABLE)
			sg_err_set(err, rc, "image %.120s: %s", ref, why.msg);
		else if (rc && rc != SG_E_NOT_FOUND)
			*err = why;
		if (rc != SG_E_NOT_FOUND)
			goto out; /* taken from the cache, or refused */
		rc = SG_OK;
	}
	rc = ask_digest(se, &parsed, ref, cancel, err);
	if (rc)
		goto out;
	if (asprintf(&key, "%s.%s", name, se->digest + 7) < 0 ||
	    asprintf(&sif, "%s/%s.sif", images, key) < 0 ||
	    asprintf(&tmp, "%s/%s.sif.part", images, key) < 0 ||
	    asprintf(&lock, "%s/%s.lock", images, key) < 0) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (sg_mkdir_p(images, 0700)) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot create the image cache in %s", dir);
		goto out;
	}
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot open %s: %s", lock, strerror(errno));
		goto out;
	}
	while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		rc = sg_cancel_sleep(cancel, 100);
		if (rc) {
			sg_err_set(err, rc, "cancelled while another session converts %s", ref);
			goto out;
		}
	}
	/* Converted earlier, or by the session we waited for, and still that file. */
	if (access(sif, F_OK) == 0) {
		if (!entry_check(sif, &parsed, se->digest, &why))
			goto out;
		sg_log_warn("image %s: %s; converting it again", ref, why.msg);
	}
	rc = convert(se, &parsed, ref, tmp, sif, cancel, err);
out:
	if (!rc) {
		*out = sif;
		sif = NULL;
	}
	if (fd >= 0)
		close(fd); /* releases the lock */
	free(dir);
	free(images);
	free(key);
	free(name);
	free(sif);
	free(tmp);
	free(lock);
	return rc;
}

/* The image to start: a SIF file or sandbox directory as given, or the cache (new). */
static sg_err resolve_image(struct sing_env *se, char **out, struct sg_cancel *cancel,
			    struct sg_errinfo *err)
{
	const char *img = se->h.base.profile->image;
	char *path = NULL;
	sg_err rc = SG_OK;
	struct stat st;

	if (strncmp(img, "docker://", 9) == 0 || strncmp(img, "oras://", 7) == 0)
		return cached_sif(se, img, out, cancel, err);
	path = sg_profile_path(se->h.base.profile, img);
	if (!path) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (stat(path, &st) != 0) {
		rc = sg_err_set(err, SG_E_NOT_FOUND, "image %s: %s", path, strerror(errno));
		goto out;
	}
	*out = realpath(path, NULL);
	if (!*out)
		rc = sg_err_set(err, SG_E_INTERNAL, "image %s: %s", path, strerror(errno));
out:
	free(path);
	return rc;
}

/* Stop instance name; "no instance found" counts as stopped. */
static sg_err stop_instance(const char *runtime, const char *const *envp, const char *name,
			    struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_exec_result r;
	char secs[16];
	sg_err rc;

	snprintf(secs, sizeof(secs), "%d", SG_SING_STOP_S);
	sg_exec_result_init(&r, 4096);
	rc = run_cli((const char *[]){ runtime, "instance", "stop", "-t", secs, name, NULL },
		     envp, SG_SING_STEP_MS, &r, cancel, err);
	if (!rc && r.exit_code != 0 && !(r.err.p && strstr(r.err.p, "no instance found")))
		rc = sg_err_set(err, SG_E_PROVIDER, "cannot stop instance %s: %.300s", name,
				fatal_text(&r));
	sg_exec_result_release(&r);
	return rc;
}

/* `instance list --json` (new reference in *out: the "instances" array). */
static sg_err list_instances(const char *runtime, const char *const *envp, json_t **out,
			     struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_exec_result r;
	json_t *j = NULL;
	sg_err rc;

	*out = NULL;
	sg_exec_result_init(&r, SG_SSH_REPLY_MAX);
	rc = run_cli((const char *[]){ runtime, "instance", "list", "--json", NULL }, envp,
		     SG_SING_STEP_MS, &r, cancel, err);
	if (!rc && r.exit_code == 0)
		j = json_loadb(r.out.p ? r.out.p : "", r.out.len, 0, NULL);
	if (!rc && !json_is_array(json_object_get(j, "instances")))
		rc = sg_err_set(err, SG_E_PROVIDER, "%s instance list --json gave no list: %.200s",
				runtime, fatal_text(&r));
	if (!rc)
		*out = json_incref(json_object_get(j, "instances"));
	json_decref(j);
	sg_exec_result_release(&r);
	return rc;
}

static bool instance_listed(json_t *list, const char *name)
{
	size_t i;
	json_t *it;

	json_array_foreach(list, i, it) {
		const char *n = json_string_value(json_object_get(it, "instance"));

		if (n && strcmp(n, name) == 0)
			return true;
	}
	return false;
}

static bool is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* An overlay directory the runtime can resume: upper/ and work/ present. */
static bool overlay_intact(const char *overlay)
{
	char *u = NULL, *w = NULL;
	bool ok = asprintf(&u, "%s/upper", overlay) >= 0 && asprintf(&w, "%s/work", overlay) >= 0 &&
		  is_dir(u) && is_dir(w);

	free(u);
	free(w);
	return ok;
}

/*
 * The limit field a refusal of cgroups names: the first one set that is
 * not best-effort, since --cpus and --memory are dropped together and a
 * best-effort cpus must never take a required memory_mb with it.
 */
static const char *limit_field(const struct sg_profile *p)
{
	if (p->cpus > 0 && !sg_profile_best_effort(p, "cpus"))
		return "cpus";
	if (p->memory_mb > 0 && !sg_profile_best_effort(p, "memory_mb"))
		return "memory_mb";
	return p->cpus > 0 ? "cpus" : "memory_mb";
}

/* Which profile field a failed `instance start` could not enforce, or NULL. */
static const char *refused_field(const struct sg_profile *p, const char *text)
{
	if (strstr(text, "cgroup"))
		return limit_field(p);
	if (p->network == SG_NET_NONE && strstr(text, "network"))
		return "network";
	return NULL;
}

/* What `instance start` is asked for first, from the profile and binding. */
static struct sg_sing_start start_spec(const struct sing_env *se, const char *image,
				       const char *overlay, const char *ctl)
{
	const struct sg_env *env = &se->h.base;
	const struct sg_profile *p = env->profile;
	struct sg_sing_start s = {
		.runtime = se->runtime,
		.image = image,
		.name = se->name,
		.workspace = se->h.workspace,
		.root = env->root,
		.workspace_ro = p->mount_read_only,
		.helper_host = env->helper_host,
		.helper = SING_HELPER,
		.ctl_host = ctl,
		.ctl = SING_CTL,
		.proc_ro = se->proc_ro,
		.overlay = overlay,
		.network_none = p->network == SG_NET_NONE,
		.cpus = p->cpus,
		.memory_mb = p->memory_mb,
	};

	return s;
}

/*
 * <dir>/instance.json: the profile and the first `instance start` argv of
 * the running instance, and what of it was applied (new string, or NULL).
 * The container cannot write there: only the workspace and ctl are bound.
 */
static char *instance_record(const struct sing_env *se)
{
	char *path = NULL;

	return asprintf(&path, "%s/instance.json", se->h.dir) < 0 ? NULL : path;
}

static sg_err record_instance(const struct sing_env *se, const struct sg_strv *av, bool limits,
			      bool net, struct sg_errinfo *err)
{
	char *path = instance_record(se), *tmp = NULL;
	json_t *argv = json_array(), *m = NULL;
	sg_err rc = SG_OK;

	for (size_t i = 0; argv && i < av->n; i++)
		json_array_append_new(argv, json_string(av->v[i]));
	m = argv ? json_pack("{s:s, s:O, s:b, s:b}", "profile", se->h.base.profile->name, "argv",
			     argv, "limits", limits, "network_namespace", net)
		 : NULL;
	if (!m || !path || asprintf(&tmp, "%s.tmp", path) < 0 ||
	    json_dump_file(m, tmp, JSON_COMPACT) || rename(tmp, path))
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot record instance %s in %s: %s",
				se->name, se->h.dir, strerror(errno));
	json_decref(argv);
	json_decref(m);
	free(path);
	free(tmp);
	return rc;
}

/*
 * Whether a shared session may join the running instance: only one
 * started for the same `instance start` argv (so the same profile's
 * image, binds, network and limits), never one another profile started,
 * whose commands would run without this profile's limits or network
 * namespace while the facts claimed them.  *limits and *net: what the
 * starting session applied.
 */
static sg_err may_attach(const struct sing_env *se, const struct sg_sing_start *s, bool *limits,
			 bool *net, struct sg_errinfo *err)
{
	char *path = instance_record(se);
	json_t *m = path ? json_load_file(path, 0, NULL) : NULL, *want = json_array();
	struct sg_strv av = SG_STRV_INIT;
	const char *by = json_string_value(json_object_get(m, "profile"));
	sg_err rc = sg_sing_start_argv(s, &av);

	for (size_t i = 0; !rc && want && i < av.n; i++)
		json_array_append_new(want, json_string(av.v[i]));
	if (!rc && (!m || !json_equal(want, json_object_get(m, "argv"))))
		rc = sg_err_set(err, SG_E_UNAVAILABLE,
				"instance %s of identity \"%s\" runs with other settings (started by profile \"%.100s\"); profile \"%s\" can join it only when it was started the same way",
				se->name, se->h.base.identity, by ? by : "unknown",
				se->h.base.profile->name);
	else if (rc)
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot compare instance %s's settings",
				se->name);
	*limits = json_is_true(json_object_get(m, "limits"));
	*net = json_is_true(json_object_get(m, "network_namespace"));
	json_decref(m);
	json_decref(want);
	sg_strv_release(&av);
	free(path);
	return rc;
}

/* Stop the instance after a failed start, naming only in the log why that failed too. */
static void stop_quietly(struct sing_env *se)
{
	struct sg_errinfo ignore = { 0 };

	if (stop_instance(se->runtime, sg_strv_get(&se->cli_env), se->name, NULL, &ignore))
		sg_log_warn("%s", ignore.msg);
}

/*
 * The argv of one try at `instance start`, into *av; also into *first when
 * that is not NULL (the first try's is the one the record keeps).
 */
static sg_err start_try_argv(const struct sing_env *se, const struct sg_sing_start *s,
			     struct sg_strv *av, struct sg_strv *first, struct sg_errinfo *err)
{
	sg_err rc;

	sg_strv_release(av);
	rc = sg_sing_start_argv(s, av);
	if (rc == SG_E_INVALID_ARGUMENT)
		rc = sg_err_set(err, rc,
				"a path to bind into instance %s contains ',', ':', '^', a backslash or edge white space, which apptainer reads as more binds",
				se->name);
	else if (rc || (first && sg_strv_addv(first, sg_strv_get(av))))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	return rc;
}

/*
 * SingularityCE starts without limits after a WARNING where Apptainer
 * stops: never accept that silently.  Such a start is stopped again and
 * counted as refused (exit 255), naming the limit field in *field.
 */
static void refuse_unlimited(struct sing_env *se, const struct sg_sing_start *s,
			     struct sg_exec_result *r, const char **field)
{
	if (r->exit_code != 0 || !(s->cpus > 0 || s->memory_mb > 0) || !r->err.p ||
	    !strstr(r->err.p, "does not support cgroup management"))
		return;
	*field = limit_field(se->h.base.profile);
	stop_quietly(se);
	r->exit_code = 255;
}

/*
 * Drop the refused field from the next try when the profile lists it as
 * best-effort and it is still asked for: false when there is nothing to
 * drop, and the refusal stands.
 */
static bool drop_best_effort(const struct sg_profile *p, struct sg_sing_start *s,
			     const char *field, const struct sg_exec_result *r)
{
	bool net = strcmp(field, "network") == 0;

	if (!sg_profile_best_effort(p, field) ||
	    (net ? !s->network_none : !(s->cpus > 0 || s->memory_mb > 0)))
		return false;
	sg_log_warn("%s cannot be enforced on this host (best-effort): %s", field, fatal_text(r));
	if (net)
		s->network_none = false;
	else
		s->cpus = 0, s->memory_mb = 0;
	return true;
}

/* Why `instance start` failed for good, as the error a session sees. */
static sg_err start_refused(const struct sing_env *se, const char *field,
			    const struct sg_exec_result *r, struct sg_errinfo *err)
{
	if (r->err.p && strstr(r->err.p, "user namespace"))
		return sg_err_set(err, SG_E_UNSUPPORTED,
				  "%s cannot start instance %s in a user namespace, and the singularity backend runs no command with this host's privileges: %.300s",
				  se->runtime, se->name, fatal_text(r));
	if (field)
		return sg_err_set(err, SG_E_UNSUPPORTED,
				  "field \"%s\" (profile \"%s\") cannot be enforced on this host: %.300s",
				  field, se->h.base.profile->name, fatal_text(r));
	return sg_err_set(err, SG_E_PROVIDER, "%s instance start failed (exit %d): %.300s",
			  se->runtime, r->exit_code, fatal_text(r));
}

/*
 * Start the instance.  *limits and *net say whether --cpus/--memory and
 * --network none were applied: a best-effort field the site refuses is
 * dropped and the start tried again without it.
 */
static sg_err start_instance(struct sing_env *se, const char *image, const char *overlay,
			     const char *ctl, bool *limits, bool *net, struct sg_cancel *cancel,
			     struct sg_errinfo *err)
{
	const struct sg_profile *p = se->h.base.profile;
	struct sg_sing_start s = start_spec(se, image, overlay, ctl);
	struct sg_strv av = SG_STRV_INIT, first = SG_STRV_INIT;
	struct sg_exec_result r;
	const char *field = NULL;
	sg_err rc = SG_OK;

	sg_exec_result_init(&r, 4096);
	/* At most three tries: as asked, without limits, without the network. */
	for (int tries = 0; tries < 3; tries++) {
		rc = start_try_argv(se, &s, &av, tries == 0 ? &first : NULL, err);
		if (rc)
			break;
		rc = run_cli(sg_strv_get(&av), sg_strv_get(&se->cli_env), SG_SING_START_MS, &r,
			     cancel, err);
		field = rc || r.exit_code == 0 ? NULL : refused_field(p, r.err.p ? r.err.p : "");
		if (!rc)
			refuse_unlimited(se, &s, &r, &field);
		if (rc || r.exit_code == 0 || !field || !drop_best_effort(p, &s, field, &r))
			break;
	}
	*limits = s.cpus > 0 || s.memory_mb > 0;
	*net = s.network_none;
	if (!rc && r.exit_code == 0) {
		rc = record_instance(se, &first, *limits, *net, err);
		/* Never left running unrecorded: no session could join it. */
		if (rc)
			stop_quietly(se);
	} else if (!rc) {
		rc = start_refused(se, field, &r, err);
	}
	sg_exec_result_release(&r);
	sg_strv_release(&av);
	sg_strv_release(&first);
	return rc;
}

/*
 * Whether a process joining the instance (with the flags every command
 * gets) is in a user namespace of its own, holds no capability and cannot
 * open a host-wide /proc file for writing: checked once the instance is
 * up, before any command runs, whatever the runtime made of the flags.
 */
static sg_err check_unprivileged(struct sing_env *se, struct sg_cancel *cancel,
				 struct sg_errinfo *err)
{
	struct sg_strv av = SG_STRV_INIT;
	struct sg_exec_result r;
	sg_err rc;

	sg_exec_result_init(&r, SING_CHECK_MAX);
	rc = sg_sing_exec_argv(se->runtime, se->name, "/", NULL, NULL,
			       (const char *[]){ "/bin/sh", "-c", /* in the environment */
						 sing_check_script, NULL },
			       &av);
	if (rc) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	rc = run_cli(sg_strv_get(&av), sg_strv_get(&se->cli_env), SG_SING_STEP_MS, &r, cancel,
		     err);
	if (!rc && r.exit_code != 0)
		rc = sg_err_set(err, SG_E_UNSUPPORTED,
				"instance %s could not be checked for privileges (/bin/sh in it exited %d: %.300s); the singularity backend runs no command there unchecked",
				se->name, r.exit_code, fatal_text(&r));
	else if (!rc && (!r.out.p || strcmp(r.out.p, "end\n") != 0))
		rc = sg_err_set(err, SG_E_UNSUPPORTED,
				"%s started instance %s with privileges on this host, which the singularity backend never gives a command (it asks for --userns --no-privs): a process in it %.300s",
				se->runtime, se->name, r.out.p ? r.out.p : "printed nothing");
out:
	sg_strv_release(&av);
	sg_exec_result_release(&r);
	return rc;
}

/* The proc_host_wide entries this host has, into se->proc_ro. */
static void find_proc_ro(struct sing_env *se)
{
	size_t n = 0;

	for (size_t i = 0; proc_host_wide[i]; i++)
		if (access(proc_host_wide[i], F_OK) == 0)
			se->proc_ro[n++] = proc_host_wide[i];
	se->proc_ro[n] = NULL;
}

/* The environment's directory, instance name, ctl and (when persistent) overlay. */
static sg_err name_paths(struct sing_env *se, const char *slug, const char *base, char **ctl,
			 char **overlay, struct sg_errinfo *err)
{
	if (!slug || !base || asprintf(&se->h.dir, "%s/%s", base, slug) < 0 ||
	    asprintf(&se->name, "sg-%s", slug) < 0 || asprintf(ctl, "%s/ctl", se->h.dir) < 0 ||
	    (se->h.base.profile->persistent && asprintf(overlay, "%s/overlay", se->h.dir) < 0))
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	return SG_OK;
}

/*
 * The runtime and how this session drives it: the image pull policy, the
 * program, the /proc paths bound read-only, the CLI's environment and the
 * runtime's version.
 */
static sg_err find_runtime(struct sing_env *se, struct sg_errinfo *err)
{
	const struct sg_profile *p = se->h.base.profile;
	sg_err rc;

	se->cache_age_s = -1;
	if (!sg_sing_pull_parse(sg_profile_str(p, "image_pull_policy"), &se->pull))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "field \"image_pull_policy\" is not valid");
	se->runtime = runtime_of(p);
	if (!se->runtime)
		return sg_err_set(err, SG_E_UNSUPPORTED, "apptainer or singularity is not installed");
	find_proc_ro(se);
	rc = cli_env(&se->cli_env, false);
	if (!rc)
		rc = probe_version(se->runtime, sg_strv_get(&se->cli_env), &se->ver, err);
	return rc;
}

/*
 * Apptainer splits a --bind value at ',' and ':': a root such as
 * "/work,/etc:/x" would bind the host's /etc into the container.  So
 * every path bound into the instance is refused when it reads as more.
 */
static sg_err check_binds(const struct sing_env *se, struct sg_errinfo *err)
{
	const struct sg_env *env = &se->h.base;

	if (!sg_sing_bind_path_ok(env->root))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "binding root %.200s cannot be bound by apptainer: it contains ',', ':', '^', a backslash or edge white space, which the runtime reads as more binds",
				  env->root);
	if (!sg_sing_bind_path_ok(se->h.workspace) || !sg_sing_bind_path_ok(se->h.dir) ||
	    !sg_sing_bind_path_ok(env->helper_host))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "the workspace %.200s, the state directory %.200s or sg-helper %.200s contains ',', ':', '^', a backslash or edge white space, which apptainer reads as more binds",
				  se->h.workspace, se->h.dir,
				  env->helper_host ? env->helper_host : "(none)");
	return SG_OK;
}

/*
 * Find the environment's directory and workspace, and refuse one that
 * cannot be provisioned: lost (its overlay or workspace gone), or not
 * bindable.  Nothing is created yet.
 */
static sg_err find_paths(struct sing_env *se, const char *overlay, struct sg_errinfo *err)
{
	const struct sg_env *env = &se->h.base;
	sg_err rc = sg_host_find_env(&se->h, err);

	if (rc)
		return rc;
	/* A persistent environment whose overlay is gone or broken is lost, never fresh. */
	if (env->resumed && overlay && !overlay_intact(overlay))
		return sg_err_set(err, SG_E_WORKSPACE_LOST,
				  "the overlay of identity \"%s\" (%s) is missing or corrupt",
				  env->identity, overlay);
	rc = sg_host_workspace(&se->h, err);
	if (!rc)
		rc = check_binds(se, err);
	if (!rc && env->resumed && env->require_existing && !env->profile->host_workspace &&
	    !is_dir(se->h.workspace))
		rc = sg_err_set(err, SG_E_WORKSPACE_LOST, "the workspace %s is gone",
				se->h.workspace);
	return rc;
}

/* The environment's directory, workspace and overlay, made when missing. */
static sg_err make_dirs(const struct sing_env *se, const char *overlay, struct sg_errinfo *err)
{
	if (sg_mkdir_p(se->h.dir, 0700) || sg_mkdir_p(se->h.workspace, 0755) ||
	    (overlay && sg_mkdir_p(overlay, 0700)))
		return sg_err_set(err, SG_E_INTERNAL, "cannot create %s: %s", se->h.dir,
				  strerror(errno));
	return SG_OK;
}

/*
 * An instance of this identity still running: a shared environment
 * another session uses (*attach: join it), or else a crashed gateway's
 * ghost, since the gateway refuses a second session of an unshared
 * identity (stop it and start afresh).
 */
static sg_err find_running(struct sing_env *se, bool *attach, struct sg_cancel *cancel,
			   struct sg_errinfo *err)
{
	const struct sg_env *env = &se->h.base;
	json_t *live = NULL;
	sg_err rc = list_instances(se->runtime, sg_strv_get(&se->cli_env), &live, cancel, err);

	*attach = !rc && env->profile->shared && env->resumed && instance_listed(live, se->name);
	if (!rc && !*attach && instance_listed(live, se->name)) {
		sg_log_warn("instance %s was left running by an earlier session; restarting it",
			    se->name);
		rc = stop_instance(se->runtime, sg_strv_get(&se->cli_env), se->name, cancel, err);
	}
	json_decref(live);
	return rc;
}

/* A new environment's marker, naming its instance (for `envs list` and gc). */
static sg_err write_instance_marker(const struct sing_env *se, struct sg_errinfo *err)
{
	json_t *instance = json_pack("{s:s}", "instance", se->name);
	sg_err rc = instance ? sg_host_write_marker(&se->h, instance, err)
			     : sg_err_set(err, SG_E_INTERNAL, "out of memory");

	json_decref(instance);
	return rc;
}

/* The facts' resources: what the profile asks for, and what the instance applies. */
static void add_resources(const struct sg_profile *p, bool limits, json_t *requested,
			  json_t *applied)
{
	if (p->cpus > 0) {
		json_object_set_new(requested, "cpus", json_real(p->cpus));
		if (limits)
			json_object_set_new(applied, "cpus", json_real(p->cpus));
	}
	if (p->memory_mb > 0) {
		json_object_set_new(requested, "memory_mb", json_integer(p->memory_mb));
		if (limits)
			json_object_set_new(applied, "memory_mb", json_integer(p->memory_mb));
	}
}

/* The facts' runtime beyond its program and flavour, into rt (borrowed). */
static void add_runtime_facts(const struct sing_env *se, json_t *rt, bool net)
{
	json_object_set_new(rt, "network_namespace", json_boolean(net));
	/* Checked by check_unprivileged() (or by the session that started it). */
	json_object_set_new(rt, "user_namespace", json_true());
	json_object_set_new(rt, "version",
			    json_sprintf("%d.%d.%d", se->ver.major, se->ver.minor, se->ver.patch));
	/* Which image a docker:// or oras:// reference named this time. */
	if (se->digest[0]) {
		json_object_set_new(rt, "image_digest", json_string(se->digest));
		json_object_set_new(rt, "image_pull_policy",
				    json_string(se->pull == SG_SING_PULL_IF_NOT_PRESENT
							? "if_not_present"
							: "always"));
	}
	/* Taken from the cache without the registry: how stale it may be. */
	if (se->cache_age_s >= 0)
		json_object_set_new(rt, "image_cache_age_s", json_integer(se->cache_age_s));
}

/* The environment's facts (new reference, or NULL when out of memory). */
static json_t *env_facts(const struct sing_env *se, const char *image, bool limits, bool net)
{
	json_t *requested = json_object(), *applied = json_object(), *facts;

	add_resources(se->h.base.profile, limits, requested, applied);
	facts = json_pack("{s:{s:b, s:b}, s:{s:O, s:O}, s:s, s:s, s:{s:s, s:s, s:s}}",
			  "isolation", "host_filesystem_restricted", true,
			  "processes_die_with_session", true, "resources", "requested", requested,
			  "applied", applied, "safety_class", "container", "mechanism",
			  "apptainer-instance", "runtime", "program", se->runtime, "flavour",
			  se->ver.flavour == SG_SING_APPTAINER ? "apptainer"
			  : se->ver.flavour == SG_SING_SINGULARITY_CE ? "singularity-ce"
								      : "singularity",
			  "image", image);
	if (facts)
		add_runtime_facts(se, json_object_get(facts, "runtime"), net);
	json_decref(requested);
	json_decref(applied);
	return facts;
}

/*
 * Hand the running environment to the gateway: where sg-helper and ctl
 * are inside the instance and on this host (taking *ctl), and its facts.
 */
static sg_err publish_env(struct sing_env *se, const char *image, char **ctl, bool limits,
			  bool net, struct sg_errinfo *err)
{
	struct sg_env *env = &se->h.base;

	env->helper = strdup(SING_HELPER);
	env->ctl_dir = strdup(SING_CTL);
	/* --containall gives the instance a /tmp of its own. */
	env->own_tmp = true;
	env->host_root = strdup(se->h.workspace);
	env->host_ctl = *ctl;
	*ctl = NULL;
	env->facts = env_facts(se, image, limits, net);
	if (!env->helper || !env->ctl_dir || !env->host_root || !env->facts)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	return SG_OK;
}

/*
 * After a failed provision: stop the instance this session started, and
 * remove a new environment's directory, so a failed create leaves nothing
 * behind.
 */
static void undo_provision(struct sing_env *se, bool fresh)
{
	if (se->started) {
		stop_quietly(se);
		se->started = false;
	}
	if (fresh && se->h.dir)
		sg_host_rm_tree(se->h.dir);
}

/*
 * Find or make the environment's directories, then join its running
 * instance (a shared one) or start a new one.  Only a new environment's
 * directory is removed again on failure (fresh is set once the checks
 * that create nothing have passed).
 */
static sg_err sing_provision(struct sg_env *env, struct sg_cancel *cancel,
			     struct sg_errinfo *err)
{
	struct sing_env *se = (struct sing_env *)env;
	const struct sg_profile *p = env->profile;
	char *slug = env_name(env->identity), *base = envs_dir(p, env->state_dir);
	char *ctl = NULL, *overlay = NULL, *image = NULL;
	bool fresh = false, limits = false, net = false, attach = false;
	sg_err rc;

	rc = name_paths(se, slug, base, &ctl, &overlay, err);
	if (!rc)
		rc = find_runtime(se, err);
	if (!rc)
		rc = find_paths(se, overlay, err);
	if (rc)
		goto out;
	fresh = !env->resumed;
	rc = make_dirs(se, overlay, err);
	if (rc)
		goto out;
	rc = sg_host_make_ctl(ctl, err);
	if (!rc)
		rc = resolve_image(se, &image, cancel, err);
	if (!rc)
		rc = find_running(se, &attach, cancel, err);
	snprintf(env->id, sizeof(env->id), "singularity-%.100s", slug);
	if (!rc && fresh)
		rc = write_instance_marker(se, err);
	if (!rc && attach) {
		struct sg_sing_start s = start_spec(se, image, overlay, ctl);

		rc = may_attach(se, &s, &limits, &net, err);
	} else if (!rc) {
		sg_progress_begin("create", "starting instance %s", se->name);
		rc = start_instance(se, image, overlay, ctl, &limits, &net, cancel, err);
		se->started = !rc;
		if (!rc)
			rc = check_unprivileged(se, cancel, err);
		sg_progress_end(rc);
	}
	if (rc)
		goto out;
	se->started = !attach;
	sg_crashpoint("adapter:created");
	rc = publish_env(se, image, &ctl, limits, net, err);
out:
	if (rc)
		undo_provision(se, fresh);
	free(slug);
	free(base);
	free(ctl);
	free(overlay);
	free(image);
	return rc;
}

/*
 * A runtime FATAL (exit 255 and a FATAL line) that means the command could
 * not be started: not found, or its working directory missing.
 */
static bool not_started(const struct sg_exec_result *r)
{
	const char *t = r->err.p ? r->err.p : "";

	return r->exit_code == 255 && strncmp(t, "FATAL:", 6) == 0 &&
	       (strstr(t, "executable file not found") ||
		strstr(t, "failed to set working directory"));
}

static sg_err sing_exec(struct sg_env *env, const struct sg_exec *x,
			struct sg_exec_result *out, struct sg_cancel *cancel,
			struct sg_errinfo *err)
{
	struct sing_env *se = (struct sing_env *)env;
	struct sg_strv av = SG_STRV_INIT, ev = SG_STRV_INIT;
	const char *home = NULL;
	sg_err rc;

	for (size_t i = 0; x->envp && x->envp[i]; i++)
		if (strncmp(x->envp[i], "HOME=", 5) == 0)
			home = x->envp[i] + 5;
	/*
	 * The instance's pid namespace keeps a command from the host's
	 * processes, but with network it shares the host's abstract unix
	 * sockets, and run as root it could leave a setuid-root file in the
	 * workspace, a directory of this host.  So every command, `full` ones
	 * included, starts in the helper's scope (docs/security.md); only a
	 * control step, which stops what earlier commands (each in a scope of
	 * its own) started, runs without one.
	 */
	rc = sg_sing_exec_argv(se->runtime, se->name, x->cwd ? x->cwd : env->root, home,
			       (x->flags & SG_EXEC_CONTROL) ? NULL : env->helper, x->argv, &av);
	if (!rc)
		rc = sg_sing_exec_env(sg_strv_get(&se->cli_env), sg_sing_env_prefix(&se->ver), x->envp,
				      &ev);
	if (rc) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	{
		struct sg_child c;

		sg_host_child(&c, x);
		c.argv = sg_strv_get(&av);
		c.envp = sg_strv_get(&ev);
		rc = sg_exec_run(&c, out, cancel, err);
	}
	if (rc)
		goto out;
	if (out->exit_code == 255 && out->err.p && strstr(out->err.p, "no instance found"))
		rc = sg_err_set(err, SG_E_UNAVAILABLE, "the instance %s is gone", se->name);
	else if (not_started(out))
		out->exit_code = 127;
out:
	sg_strv_release(&av);
	sg_strv_release(&ev);
	return rc;
}

static sg_err sing_teardown(struct sg_env *env, enum sg_fate fate, struct sg_cancel *cancel,
			    struct sg_errinfo *err)
{
	struct sing_env *se = (struct sing_env *)env;
	sg_err rc = SG_OK;

	if (fate == SG_FATE_DETACH || !se->runtime)
		return SG_OK;
	/* Stopping the instance kills everything the session started in it. */
	if (se->name)
		rc = stop_instance(se->runtime, sg_strv_get(&se->cli_env), se->name, cancel, err);
	se->started = false;
	if (!rc && fate == SG_FATE_REMOVE && se->h.dir)
		rc = sg_host_remove(se->h.dir, err);
	return rc;
}

/*
 * Every environment directory with sandgate's marker, and every `sg-*`
 * instance without one (a ghost): the directories and the runtime's own
 * list are the truth, not the registry.
 */
static sg_err sing_list(const struct sg_profile *p, const char *state_dir, sg_env_list_cb cb,
			void *payload, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	char *base = envs_dir(p, state_dir), *runtime = runtime_of(p);
	struct sg_strv envs = SG_STRV_INIT;
	json_t *live = NULL, *seen = json_object(), *it;
	DIR *d;
	struct dirent *de;
	size_t i;
	sg_err rc = SG_OK;

	if (runtime && !cli_env(&envs, false))
		rc = list_instances(runtime, sg_strv_get(&envs), &live, cancel, err);
	if (rc)
		goto out;
	d = base ? opendir(base) : NULL;
	while (d && (de = readdir(d))) {
		struct sg_env_info info = { 0 };
		char *marker = NULL, *name = NULL;
		json_t *m;

		if (!env_name_ok(de->d_name) ||
		    asprintf(&marker, "%s/%s/env.json", base, de->d_name) < 0)
			continue;
		m = json_load_file(marker, 0, NULL);
		free(marker);
		if (asprintf(&name, "sg-%s", de->d_name) < 0) {
			json_decref(m);
			continue;
		}
		snprintf(info.id, sizeof(info.id), "singularity-%.100s", de->d_name);
		snprintf(info.state, sizeof(info.state), "%s",
			 instance_listed(live, name) ? "running" : m ? "stopped" : "unmarked");
		json_object_set_new(seen, name, json_true());
		sg_host_copy_field(info.identity, sizeof(info.identity), m, "identity");
		sg_host_copy_field(info.session, sizeof(info.session), m, "session");
		sg_host_copy_field(info.profile, sizeof(info.profile), m, "profile");
		info.created = json_integer_value(json_object_get(m, "created"));
		info.persistent = json_is_true(json_object_get(m, "persistent"));
		json_decref(m);
		free(name);
		if (cb(&info, payload)) {
			closedir(d);
			goto out;
		}
	}
	if (d)
		closedir(d);
	json_array_foreach(live, i, it) {
		const char *n = json_string_value(json_object_get(it, "instance"));
		struct sg_env_info info = { 0 };

		if (!n || strncmp(n, "sg-", 3) != 0 || json_object_get(seen, n) ||
		    !env_name_ok(n + 3))
			continue;
		snprintf(info.id, sizeof(info.id), "singularity-%s", n + 3);
		snprintf(info.state, sizeof(info.state), "ghost");
		if (cb(&info, payload))
			break;
	}
out:
	json_decref(live);
	json_decref(seen);
	sg_strv_release(&envs);
	free(runtime);
	free(base);
	return rc;
}

static sg_err sing_destroy(const struct sg_profile *p, const char *state_dir, const char *id,
			   struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const char *slug = id + 12;
	char *base = envs_dir(p, state_dir), *dir = NULL, *name = NULL,
	     *runtime = runtime_of(p);
	struct sg_strv envs = SG_STRV_INIT;
	json_t *live = NULL;
	sg_err rc = SG_OK;

	if (strncmp(id, "singularity-", 12) != 0 || !env_name_ok(slug)) {
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT, "%s is not a singularity environment id",
				id);
		goto out;
	}
	if (!base || asprintf(&dir, "%s/%s", base, slug) < 0 ||
	    asprintf(&name, "sg-%s", slug) < 0) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (runtime && !cli_env(&envs, false))
		rc = list_instances(runtime, sg_strv_get(&envs), &live, cancel, err);
	if (rc)
		goto out;
	if (!instance_listed(live, name) && access(dir, F_OK) != 0) {
		rc = sg_err_set(err, SG_E_NOT_FOUND, "no singularity environment %s", id);
		goto out;
	}
	if (instance_listed(live, name))
		rc = stop_instance(runtime, sg_strv_get(&envs), name, cancel, err);
	if (!rc)
		rc = sg_host_remove(dir, err);
out:
	json_decref(live);
	sg_strv_release(&envs);
	free(runtime);
	free(base);
	free(dir);
	free(name);
	return rc;
}

static void sing_release(struct sg_env *env)
{
	struct sing_env *se = (struct sing_env *)env;

	sg_strv_release(&se->cli_env);
	free(se->name);
	free(se->runtime);
	sg_host_release(&se->h);
}

const struct sg_adapter sg_adapter_singularity = {
	.name = "singularity",
	.caps = SG_CAP_HOST_FS | SG_CAP_LIST | SG_CAP_PID_NS,
	SG_HOST_METHODS(sing),
};
