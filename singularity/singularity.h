/*
 * singularity.h - the pure parts of the singularity backend, for its unit
 * tests: reading the runtime's version, the environment the CLI runs with,
 * and the argv of `instance start` and `exec`.
 *
 * Every instance runs in a user namespace of its own and every process in
 * it without a capability (SG_SING_PRIV_FLAGS on `instance start` and on
 * each `exec`: the runtime recomputes a joining root's capabilities from
 * its own flags), with /proc's host-wide files bound read-only over it,
 * since uid 0 writes a sysctl by its uid, not by a capability.
 *
 * Invariants: nothing here runs a program or touches a file; every builder
 * appends to a struct sg_strv the caller owns (and releases, also on
 * error), and returns SG_OK or SG_E_NO_MEMORY-like codes from base/err.h.
 */
#ifndef SG_SINGULARITY_H
#define SG_SINGULARITY_H

#include <stdbool.h>

#include "adapters/adapter.h"
#include "base/strv.h"
#include "singularity/registry.h"

enum sg_sing_flavour {
	SG_SING_UNKNOWN = 0,
	SG_SING_APPTAINER,      /* "apptainer version 1.3.4" */
	SG_SING_SINGULARITY_CE, /* "singularity-ce version 4.1.0" */
	SG_SING_LEGACY,         /* "singularity version 3.7.4" */
};

struct sg_sing_version {
	enum sg_sing_flavour flavour;
	int major, minor, patch;
};

/*
 * Parse `RUNTIME --version` output: "<name> version X.Y.Z[suffix]".
 * False when the text is not one.
 */
bool sg_sing_parse_version(const char *text, struct sg_sing_version *v);

/*
 * Whether this version has --cpus/--memory and --no-eval (Apptainer 1.1,
 * SingularityCE 3.10; legacy Singularity never).
 */
bool sg_sing_has_limits(const struct sg_sing_version *v);

/* The prefix the runtime reads container variables from ("APPTAINERENV_"). */
const char *sg_sing_env_prefix(const struct sg_sing_version *v);

/*
 * The runtime's flags that take every privilege from what it runs: a user
 * namespace, no capability (and no_new_privs), no sysfs.  The same on
 * `instance start` and `exec`.
 */
#define SG_SING_PRIV_FLAGS "--userns", "--no-privs", "--drop-caps", "ALL", "--no-mount", "sys"

/*
 * When a docker:// or oras:// reference by tag asks its registry (profile
 * field image_pull_policy, after Kubernetes' imagePullPolicy).  A
 * reference pinned by digest never needs to: its cache entry is found by
 * key.  Under either policy a cache entry is started only while its
 * conversion's record names the same reference and the file is still the
 * one converted.
 */
enum sg_sing_pull {
	SG_SING_PULL_ALWAYS = 0,     /* "always" (default): the tag's digest at every start */
	SG_SING_PULL_IF_NOT_PRESENT, /* "if_not_present": the newest recorded conversion, else the registry */
};

/* text ("always", "if_not_present", or NULL for the default) into *out; false otherwise. */
bool sg_sing_pull_parse(const char *text, enum sg_sing_pull *out);

/*
 * Whether name is a complete image cache entry of the reference keyed key:
 * "KEY.HEX.sif" with HEX 64 lower-case hex digits, never a ".sif.part", a
 * record (".sif.json") or a lock; its digest ("sha256:HEX") into digest.  The length pins KEY, so
 * another reference's entries never match.
 */
bool sg_sing_cache_entry(const char *key, const char *name, char digest[SG_SING_DIGEST_LEN + 1]);

/*
 * Copy into out the variables of envp the CLI needs and nothing else
 * (borrowed pointers): PATH, HOME, USER, LOGNAME, TMPDIR, XDG_RUNTIME_DIR
 * and DBUS_SESSION_BUS_ADDRESS; with pull, for `build` alone, also the
 * proxy and CA variables.  `exec --cleanenv` hands TERM and every proxy
 * variable of its own environment to the command, so those never reach
 * the CLI otherwise; nor does any APPTAINER_* or SINGULARITY_* variable,
 * which would steer the runtime.
 */
sg_err sg_sing_cli_env(const char *const *envp, bool pull, struct sg_strv *out) SG_MUST_CHECK;

/*
 * Whether path can be one side of a `--bind SRC:DST[:OPTS]` spec as it is.
 * The runtime splits every spec at ',' and ':' (and '^', which its
 * pattern also excludes), honours backslash escapes and trims white space
 * around each part, so a path with any of those would name other binds
 * or options: such a path is refused, never quoted.
 */
bool sg_sing_bind_path_ok(const char *path);

/* What `instance start` is asked for. */
struct sg_sing_start {
	const char *runtime, *image, *name;
	const char *workspace, *root;   /* bind workspace at root */
	bool workspace_ro;
	const char *helper_host, *helper; /* bound read-only */
	const char *ctl_host, *ctl;
	const char *const *proc_ro;     /* /proc paths bound read-only over themselves */
	const char *overlay;            /* persistent: a directory; NULL: --writable-tmpfs */
	bool network_none;
	double cpus;                    /* 0: none */
	long long memory_mb;            /* 0: none */
};

/*
 * The argv of `instance start`; SG_E_INVALID_ARGUMENT when a bound path
 * fails sg_sing_bind_path_ok().
 */
sg_err sg_sing_start_argv(const struct sg_sing_start *s, struct sg_strv *av) SG_MUST_CHECK;

/*
 * `RUNTIME exec --cleanenv --no-eval SG_SING_PRIV_FLAGS --pwd CWD
 * instance://NAME [HELPER confine --mode scope --] [env HOME=..] ARGV`.  home is the
 * command's HOME (the runtime refuses to take it from the environment),
 * or NULL.  helper, where not NULL, starts the command in its scope (no
 * setuid bit, no signal or abstract socket past it); NULL is for
 * sandgate's own control steps, which must reach what earlier commands
 * started.
 */
sg_err sg_sing_exec_argv(const char *runtime, const char *name, const char *cwd,
			 const char *home, const char *helper, const char *const *argv,
			 struct sg_strv *av) SG_MUST_CHECK;

/*
 * The runtime's environment for one exec: the scrubbed base plus each of
 * the command's variables (but HOME) as PREFIX+NAME=value.
 */
sg_err sg_sing_exec_env(const char *const *base, const char *prefix,
			const char *const *cmd_env, struct sg_strv *out) SG_MUST_CHECK;

#endif
