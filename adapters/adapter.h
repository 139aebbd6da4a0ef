/*
 * adapter.h - THE adapter contract: what a backend must offer sandgate.
 *
 * An adapter turns one provider (a cloud API, an ssh host, a container
 * runtime, this machine) into a handful of *primitives*.  The gateway builds
 * everything the protocol promises on top of them, once: the tool catalogue,
 * path containment, permission modes, the process supervisor, exports.  An
 * adapter therefore never sees a tool name, a permission mode's rules or a
 * process id; it creates environments, runs argv in them, and removes them.
 *
 * Invariants every adapter keeps:
 *  - Methods are straight-line blocking code, called on a gateway worker
 *    thread.  Every wait (HTTP, a child process, a sleep) honours the
 *    struct sg_cancel passed in and returns SG_E_CANCELLED (or the token's
 *    reason) promptly, leaving nothing behind that the state registry does
 *    not know about.
 *  - A failure sets exactly one sentence on the struct sg_errinfo and
 *    returns its code.  The sentence never contains a credential.
 *  - Never fail open.  Each adapter declares, in its `fields` table, every
 *    profile field it honours; the config layer refuses every other field
 *    for that backend, in one place (config.c), before validate() runs.
 *    validate() refuses the *values* a declared field may take that this
 *    backend or host cannot enforce (SG_E_UNSUPPORTED naming the field);
 *    a persistent environment that is gone is SG_E_WORKSPACE_LOST, never a
 *    fresh one.
 *  - Nothing leaks.  Remote resources are tagged with the identity, session,
 *    creation time and expiry, get a provider-side lifetime as a backstop,
 *    and a provision() that fails halfway deletes what it made; when it
 *    cannot (a create whose outcome it does not know), it sets
 *    env->may_remain and the gateway finds the resource by its tags
 *    (list, then destroy) before it exits, or leaves the record to gc.  Right after
 *    the remote resource first exists, provision() calls
 *    sg_crashpoint("adapter:created") (base/crash.h): the crash-
 *    matrix tests kill the gateway there and check `sandgate envs gc`
 *    finds the resource by its tags.
 *  - A NULL method means "not supported"; the matching SG_CAP_* bit says so
 *    to the gateway, and registry.c asserts that the two agree (in builds
 *    with assertions, such as CI's sanitizer build).
 *  - exec() may be called from several threads at once for one environment.
 *
 * How the five remote backends map onto these primitives:
 *
 *   backend      provision             exec                    files      teardown (keep / remove)    list
 *   modal        SandboxCreate, or     TaskExecStart through   a reader   SnapshotFilesystem then     SandboxList
 *                restore a snapshot    the command router      exec       terminate / terminate       by tags
 *   daytona      POST /sandbox with    toolbox /process/       upload,    stop / delete               GET /sandbox
 *                labels, or start      execute; sessions for   download                               ?labels=
 *                a stopped one         long commands
 *   vercel       POST /v3/sandboxes    POST .../cmd wait:true  fs/write,  stop (snapshot) /           GET /v2/
 *                (named, tags), or     streaming NDJSON        fs/read    delete                      sandboxes
 *                resume by name                                                                       ?tags=
 *   ssh          master connection,    ssh -S master -- the    a reader   close master /              marked dirs
 *                mkdir the workspace   shell-quoted argv       over ssh   rm -rf, close master         under workspace
 *   singularity  overlay + instance    apptainer exec          host fs    stop instance, keep dir /   state dirs
 *                start                 instance://...                     stop, rm dir
 *
 * The environment helper (sg-helper, see helper/README.md) is a static
 * program built with sandgate.  provision() makes it available inside the
 * environment and records its path in env->helper; the gateway runs file
 * tools, process spooling and Landlock confinement through it with exec(),
 * so each tool call is one exec (one provider round trip).  An adapter whose
 * environment's files are directories on this host (local, singularity) sets
 * SG_CAP_HOST_FS and env->host_root; the gateway then runs the same helper
 * code in-process and skips the round trip.
 *
 * Writing the next adapter: see adapters/README.md, whose walk-through
 * builds a toy cloud backend on the remote driver (tests/fake/remote.c).
 * In short, one folder with one `const struct sg_adapter
 * sg_adapter_<name>` (its `fields` table included, with every variable of
 * sandgate's environment it reads), its name added to SG_BACKENDS in the
 * top CMakeLists.txt (the registry is generated from that list), and the
 * end-to-end suite run against a profile for it (tests/e2e/README.md).
 */
#ifndef SG_ADAPTER_H
#define SG_ADAPTER_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/buf.h"
#include "base/cancel.h"
#include "base/err.h"
#include "core/exec.h"

/* ---- Profiles: the configuration an adapter is given ------------------ */

enum sg_network {
	SG_NET_DEFAULT = 0, /* whatever the backend gives */
	SG_NET_NONE,        /* no network at all */
	SG_NET_ALLOW,       /* only the allow list */
};

/*
 * One validated profile, merged with the binding's `environment` (which can
 * only narrow it).  Field names are the host's (docs/protocol.md).  Strings
 * are NULL when absent; numbers are 0 when absent.  Owned by the gateway and
 * valid for the environment's whole life; adapters only read it.
 */
struct sg_profile {
	const char *name;    /* the profile's key in the config file */
	const char *backend; /* the adapter's name */
	const char *image, *snapshot, *workspace, *user;
	const char *host_workspace; /* local, singularity: a host directory */
	bool mount_read_only;
	enum sg_network network;
	const char *const *network_allow; /* NULL-terminated CIDRs or domains */
	double cpus;                      /* 0: backend default */
	int64_t memory_mb;                /* 0: backend default */
	bool persistent, shared;
	int64_t lifetime_seconds;    /* already mapped: 0 -> SG_LIFETIME_DEFAULT_S */
	int64_t shutdown_timeout_ms; /* 0: the gateway's default budget */
	const char *const *forward_env; /* NULL-terminated "NAME=value" */
	/* ssh */
	const char *host, *identity_file, *known_hosts_file;
	int port;
	/* Fields this profile marks best-effort: refusing them is not required. */
	const char *const *best_effort;
	/* The whole profile object, for backend-specific fields (borrowed). */
	json_t *raw;
	/*
	 * The config file's directory, absolute; NULL for the embedded
	 * config.  host_workspace, identity_file and known_hosts_file are
	 * already taken from it when relative; an adapter's own path fields
	 * go through sg_profile_path().
	 */
	const char *config_dir;
};

/*
 * Is field listed in p->best_effort?  For validate() and provision(),
 * which may accept a value they cannot enforce only then (adapters/fields.c).
 */
bool sg_profile_best_effort(const struct sg_profile *p, const char *field);

/*
 * A path from the profile as this host reads it (new; NULL when out of
 * memory): a relative one is taken from the config file's directory, not
 * from the working directory, so `config check`, `probe` and the host's
 * `serve` find the same file wherever each runs.  An absolute path, a
 * leading `~` (for the adapter to expand as the program it drives does)
 * and any path of the embedded config are returned as they are.
 */
char *sg_profile_path(const struct sg_profile *p, const char *path);

/* ---- Profile fields: what an adapter honours ----------------------------- */

/*
 * One entry of an adapter's `fields` table.  A field of config.c's table
 * (config/README.md) needs only its name: the config layer checks its type.
 * A field of the backend's own (read from profile->raw) gives its type, so
 * the config layer checks that too, and the adapter reads it without
 * checking again.
 */
enum sg_field_type {
	SG_FIELD_GENERIC = 0, /* one of config.c's fields */
	SG_FIELD_STRING,      /* the backend's own: a non-empty string */
	SG_FIELD_INT,         /* the backend's own: an integer in [min, max] */
	SG_FIELD_ARRAY,       /* the backend's own: a JSON array */
	SG_FIELD_OBJECT,      /* the backend's own: a JSON object */
	/*
	 * Not a profile field: a variable of sandgate's own environment
	 * the backend reads (an API key, a URL, a region) under a fixed
	 * name, `env`.  The config layer refuses a profile field of that
	 * name like any undeclared one.
	 */
	SG_FIELD_ENV,
};

enum {
	/*
	 * The backend enforces this field only where the host or provider
	 * allows (a cgroup, bubblewrap, a provider's limits): validate() or
	 * provision() refuse what they cannot enforce, unless the profile
	 * lists the field in best_effort.  Only such fields, and fields the
	 * backend does not honour at all, may be listed there.
	 */
	SG_FIELD_PARTIAL = 1 << 0,
	/*
	 * A variable entry (env set): `sandgate probe` reports whether it
	 * is set (sg_adapter_credentials), never its value.
	 */
	SG_FIELD_PROBE = 1 << 1,
};

/*
 * Credentials.  Every variable of sandgate's environment a backend reads
 * is declared in its field table, with `env` its default name: either a
 * string field of the backend's own that names the variable instead
 * (SG_FIELD_OWN_ENV, e.g. daytona's api_key_env), or an SG_FIELD_ENV
 * entry when no field renames it.  That declaration is the one list the
 * config refuses to forward into commands (forward_env) and `probe`
 * reports on, and an adapter reads a variable only through
 * sg_profile_env(), which reads nothing undeclared: a secret cannot be
 * read without being refused to forward_env too.  Values are never put
 * into a sentence, a log line or the facts; only names are.
 */
struct sg_field {
	const char *name;     /* the profile field; for SG_FIELD_ENV, env */
	enum sg_field_type type;
	unsigned flags;       /* SG_FIELD_* */
	int64_t min, max;     /* SG_FIELD_INT */
	const char *env;      /* a variable's default name, or NULL */
};

/*
 * A table's entries, e.g.
 *   static const struct sg_field acme_fields[] = {
 *	SG_FIELD("image"), SG_FIELD_BEST_EFFORT("network"),
 *	SG_FIELD_OWN_STRING("region"), SG_FIELD_OWN_INT("poll_ms", 100, 60000),
 *	SG_FIELD_OWN_ENV("token_env", "ACME_TOKEN", SG_FIELD_PROBE),
 *	SG_FIELD_ENV("ACME_URL", 0), SG_FIELDS_END,
 *   };
 */
#define SG_FIELD(n) { (n), SG_FIELD_GENERIC, 0, 0, 0, NULL }
#define SG_FIELD_BEST_EFFORT(n) { (n), SG_FIELD_GENERIC, SG_FIELD_PARTIAL, 0, 0, NULL }
#define SG_FIELD_OWN_STRING(n) { (n), SG_FIELD_STRING, 0, 0, 0, NULL }
#define SG_FIELD_OWN_INT(n, lo, hi) { (n), SG_FIELD_INT, 0, (lo), (hi), NULL }
#define SG_FIELD_OWN_ARRAY(n) { (n), SG_FIELD_ARRAY, 0, 0, 0, NULL }
#define SG_FIELD_OWN_OBJECT(n) { (n), SG_FIELD_OBJECT, 0, 0, 0, NULL }
/* A variable var, renamed by the backend's own string field n. */
#define SG_FIELD_OWN_ENV(n, var, fl) { (n), SG_FIELD_STRING, (fl), 0, 0, (var) }
/* A variable var under its own name. */
#define SG_FIELD_ENV(var, fl) { (var), SG_FIELD_ENV, (fl), 0, 0, (var) }
#define SG_FIELDS_END { NULL, 0, 0, 0, 0, NULL }

/* ---- Environments ------------------------------------------------------ */

/*
 * The base of every environment.  The gateway allocates ad->env_size bytes
 * (zeroed), fills the fields above the line, and hands it to provision();
 * an adapter's own struct begins with `struct sg_env base;`.
 */
struct sg_env {
	const struct sg_adapter *ad;      /* first; never NULL */
	const struct sg_profile *profile; /* borrowed */
	const char *root;      /* binding.root: where commands see the workspace */
	const char *session;   /* binding.session */
	const char *identity;  /* binding.identity, or the session */
	const char *state_dir; /* sandgate's state directory on this host */
	/*
	 * The static sg-helper program on this host; provision() makes it
	 * available inside the environment (bind, upload, checksum-cached).
	 */
	const char *helper_host;
	bool require_existing; /* binding.require_existing_workspace */
	bool remove_on_exit;   /* binding.remove_workspace_on_exit */
	/*
	 * The state registry held a record of this identity before this
	 * session attached, so an environment may exist.  false: none was
	 * ever recorded from this state directory (or it was removed); an
	 * adapter whose create is protected against a second copy may then
	 * create first and look up only when the create meets the existing
	 * one.  A hint for speed, never a proof that nothing exists.
	 */
	bool known;
	/*
	 * That record named a persistent environment of this identity which
	 * was made and handed to sessions.  If the provider no longer has it,
	 * its workspace is lost (SG_E_WORKSPACE_LOST), never replaced by a
	 * fresh, empty one, with or without require_existing.
	 */
	bool persisted;
	/* ---- set by provision() ---- */
	char id[128];    /* the provider's id for the environment */
	bool resumed;    /* an existing environment was attached */
	char *helper;    /* sg-helper's path inside the environment (malloc) */
	/*
	 * A private directory inside the environment, outside root, that
	 * provision() creates (mode 0700) with the subdirectories proc/ (the
	 * process spools), home/ and tmp/ (commands' HOME and TMPDIR).
	 */
	char *ctl_dir;   /* malloc */
	/*
	 * sg-helper probe's reply when provision() ran it inside its own last
	 * request (one round trip less); NULL: the gateway runs the probe.
	 * malloc; freed with the env.
	 */
	char *probe;
	/*
	 * provision() returned with the inside still being prepared: the
	 * first commands wait in the environment for sg-helper to be in
	 * place (adapters/remote.h, sg_remote_setup_begin).  The probe would
	 * then cost a round trip of its own, so the gateway runs it only
	 * when it must observe (`sandgate probe`, a select candidate).
	 */
	bool setup_later;
	/*
	 * That set-up failed, as far as sandgate saw (set by the adapter's
	 * thread): every command fails with its error, and the session's
	 * processes need no stop (none ran through sandgate, and such an
	 * environment goes with the session).
	 */
	atomic_bool setup_failed;
	/*
	 * Commands see a /tmp of the environment's own (never one shared
	 * with the host's other users): standard mode may then write it.
	 */
	bool own_tmp;
	char *host_root; /* SG_CAP_HOST_FS: root's directory on this host */
	char *host_ctl;  /* SG_CAP_HOST_FS: ctl_dir's directory on this host */
	/*
	 * SG_CAP_HOST_FS: the host user the environment's files belong to
	 * and its commands run as, where that is not sandgate's own (sandgate
	 * runs as root, its commands never do).  The gateway's in-process
	 * steps then act as that user (its file system ids), so what they
	 * create is the commands' to change, and what that user may not
	 * open they may not either.
	 */
	bool run_as;
	uid_t run_uid;
	gid_t run_gid;
	/*
	 * Set by a provision() that fails when something it asked the
	 * provider to create may exist anyway and it could not remove it: a
	 * create whose outcome is unknown (no reply, a cancel, lookups that
	 * fail) or a removal that did not finish.  The gateway then keeps the
	 * registry record and settles it by the provider's tags (gateway/
	 * envs.h, sg_envs_settle), the same rule for every adapter.
	 */
	bool may_remain;
	/*
	 * Set by a provision() that fails after it woke a kept environment
	 * (resumed a stopped sandbox, or may have: a resume whose outcome it
	 * does not know) and could not see it stopped again.  The environment
	 * holds a kept workspace, so it is not removed: the gateway marks its
	 * record keep-pending, which `envs list` shows and gc leaves alone;
	 * the next session of the identity resumes it and stops it at its end.
	 */
	bool may_run;
	/*
	 * Facts only the adapter can observe (resources requested vs applied,
	 * mechanism, safety_class); new reference owned by the env, merged by
	 * the gateway with what sg-helper observes inside.
	 */
	json_t *facts;
};

/* How a command is confined, mirroring the request's permission mode. */
enum sg_confine {
	SG_CONFINE_NONE = 0, /* `full`: no gateway restriction */
	SG_CONFINE_STANDARD, /* writes only under root */
	SG_CONFINE_READ_ONLY /* no writes at all */
};

enum {
	SG_EXEC_MERGE = 1 << 0, /* stderr goes into out, interleaved */
	/*
	 * The command leaves a daemon behind (sg-helper spawn) and exits: the
	 * adapter must not run it in anything that dies with the call (a pid
	 * namespace, PDEATHSIG, a killed process group).
	 */
	SG_EXEC_DETACHES = 1 << 1,
	/*
	 * A control step of sandgate's helper (`sg-helper proc ...`), not a
	 * command of the request's: it reads, waits for and stops processes
	 * earlier commands started.  An adapter that starts each command in
	 * a scope of its own (no signal past it) starts this one outside,
	 * or it could not stop them.  Never set for anything the request ran.
	 */
	SG_EXEC_CONTROL = 1 << 2,
};

struct sg_exec {
	const char *const *argv; /* argv[0] looked up in the environment's PATH */
	const char *cwd;         /* inside the environment; NULL means root */
	/*
	 * The command's whole environment, "NAME=value", NULL-terminated.  The
	 * gateway builds it (a minimal set plus forward_env); adapters pass it
	 * as it is and add nothing of sandgate's own.
	 */
	const char *const *envp;
	const void *stdin_data; /* NULL: stdin is empty */
	size_t stdin_len;
	int64_t timeout_ms;       /* 0: no timeout */
	size_t max_output;        /* bytes of out kept; the rest is drained */
	enum sg_confine confine;  /* adapters may add their own layer for it */
	unsigned flags;           /* SG_EXEC_* */
};

/* What teardown() should do with the environment. */
enum sg_fate {
	SG_FATE_KEEP,   /* persistent: snapshot or stop, keep the workspace */
	SG_FATE_REMOVE, /* delete the environment and its workspace */
	SG_FATE_DETACH, /* shared and still in use: just let go */
};

/* One environment as an operator sees it (sandgate envs list). */
struct sg_env_info {
	char id[128];
	char state[32];    /* provider words: running, stopped, archived ... */
	char identity[128];
	char session[128];
	char profile[64];
	int64_t created;   /* unix seconds, 0 if unknown */
	int64_t expires;   /* unix seconds, 0 if none */
	bool persistent;
};
typedef int (*sg_env_list_cb)(const struct sg_env_info *info, void *payload);

/* ---- The adapter ------------------------------------------------------- */

enum {
	SG_CAP_HOST_FS = 1 << 0,   /* env->host_root is valid; files are local */
	SG_CAP_FILES = 1 << 1,     /* get_file */
	SG_CAP_LIST = 1 << 2,      /* list and destroy */
	/*
	 * With SG_CAP_HOST_FS: commands run in a pid namespace of their own
	 * (a container's), so pids in the process spool mean nothing on this
	 * host and process steps (proc ...) go through exec(), not in-process.
	 */
	SG_CAP_PID_NS = 1 << 4,
};

struct sg_adapter {
	const char *name; /* the profile's `backend` value */
	unsigned caps;    /* SG_CAP_* */
	size_t env_size;  /* sizeof the adapter's env struct, >= sizeof(struct sg_env) */

	/*
	 * The profile fields this backend honours, ended by { NULL }.  The
	 * config layer refuses every other field of a profile for this backend
	 * (an unknown name is SG_E_INVALID_ARGUMENT, a known field left out
	 * here SG_E_UNSUPPORTED unless best_effort lists it), so an adapter
	 * never sees a field it did not declare.  Fields the gateway itself
	 * implements (forward_env, shutdown_timeout_ms, best_effort, and the
	 * host's own entries) are never listed.  Mandatory.
	 */
	const struct sg_field *fields;

	/*
	 * Refuse, before anything is created, the values of declared fields
	 * this backend cannot enforce (SG_E_UNSUPPORTED, naming the field and
	 * the backend) or that are malformed for it (SG_E_INVALID_ARGUMENT).
	 * Fields listed in profile->best_effort may be accepted without
	 * enforcement.  Pure: no I/O beyond looking at this host.  Mandatory.
	 */
	sg_err (*validate)(const struct sg_profile *p, struct sg_errinfo *err);

	/*
	 * Create the environment, or attach to the existing one for
	 * env->identity (env->resumed).  With env->require_existing and no
	 * environment, SG_E_WORKSPACE_LOST.  Sets id, helper, ctl_dir (and
	 * host_root, host_ctl with SG_CAP_HOST_FS), and facts.  On failure,
	 * whatever was created is removed before returning.  Mandatory.
	 */
	sg_err (*provision)(struct sg_env *env, struct sg_cancel *cancel,
			    struct sg_errinfo *err);

	/*
	 * Run x->argv in the environment and wait for it, capturing at most
	 * x->max_output bytes.  SG_OK whenever the command ran, whatever its
	 * exit code; a command that could not be found or started reports exit
	 * code 127 and a sentence on err.  On timeout the command's process
	 * group is killed and out->timed_out set.  Errors are for the
	 * transport: SG_E_UNAVAILABLE (host gone), SG_E_PROVIDER, or the cancel
	 * token's reason, after the command has been killed.  out must have
	 * been initialised with sg_exec_result_init().  Mandatory.
	 */
	sg_err (*exec)(struct sg_env *env, const struct sg_exec *x,
		       struct sg_exec_result *out, struct sg_cancel *cancel,
		       struct sg_errinfo *err);

	/*
	 * Optional native file download (SG_CAP_FILES), used by exports: write
	 * at most max bytes of the file at path (inside the environment) to
	 * fd, SG_E_TOO_LARGE beyond.  Without it, exports read through exec()
	 * and sg-helper.  Containment is the gateway's job: paths arrive
	 * already checked.
	 */
	sg_err (*get_file)(struct sg_env *env, const char *path, int fd,
			   size_t max, struct sg_cancel *cancel,
			   struct sg_errinfo *err);

	/*
	 * Keep, remove or let go of the environment as fate says, within the
	 * cancel token's deadline (the shutdown budget).  Mandatory.
	 */
	sg_err (*teardown)(struct sg_env *env, enum sg_fate fate,
			   struct sg_cancel *cancel, struct sg_errinfo *err);

	/*
	 * Optional (SG_CAP_LIST), for operators: every environment sandgate
	 * made for this profile, found through the provider's own tags (so
	 * orphans show too); and removing one by id.  cb returns non-zero to
	 * stop the listing.
	 */
	sg_err (*list)(const struct sg_profile *p, const char *state_dir,
		       sg_env_list_cb cb, void *payload,
		       struct sg_cancel *cancel, struct sg_errinfo *err);
	sg_err (*destroy)(const struct sg_profile *p, const char *state_dir,
			  const char *id, struct sg_cancel *cancel,
			  struct sg_errinfo *err);

	/*
	 * Free everything provision() allocated, the struct sg_env fields it
	 * set included (sg_env_release_base() frees those), but not the env
	 * itself, which the gateway frees.  Never remote calls.  Called once
	 * after teardown(), or after a provision() that failed.  Cannot fail.
	 * Mandatory.
	 */
	void (*release)(struct sg_env *env);

	/*
	 * Optional, for `sandgate probe`: where this profile's credentials
	 * come from and whether they were found, as {"<name>": "found" |
	 * "missing"} into out (e.g. {"DAYTONA_API_KEY": "found"},
	 * {"identity_file": "missing"}).  Never a value.  No I/O beyond
	 * looking at this host's environment and files.  NULL: the field
	 * table's SG_FIELD_PROBE variables (sg_profile_credentials).
	 */
	void (*credentials)(const struct sg_profile *p, json_t *out);

};

/*
 * Free the struct sg_env fields provision() sets (helper, ctl_dir,
 * host_root, host_ctl, facts) and clear them: the common part of every
 * release() (adapters/fields.c).
 */
void sg_env_release_base(struct sg_env *env);

/*
 * The entry for the profile field name in a field table (an adapter's
 * `fields`), or NULL; variable entries (SG_FIELD_ENV) are not fields and
 * never match (adapters/fields.c).
 */
const struct sg_field *sg_field_in(const struct sg_field *table,
				   const char *name);

/* ---- Typed accessors over a profile (adapters/fields.c) ---------------- */

/*
 * The backend's own fields, read from p->raw: the config layer checked
 * their types against the table, so these only pick the value.  A string
 * is borrowed from the profile (NULL when absent); an integer is def
 * when absent.
 */
const char *sg_profile_str(const struct sg_profile *p, const char *field);
int64_t sg_profile_int(const struct sg_profile *p, const char *field, int64_t def);

/*
 * The value of the declared variable var (its default name in p's
 * backend's field table) from sandgate's environment, borrowed, or NULL
 * when it is unset or empty.  *name (when name is not NULL) is set to the
 * variable actually read, the profile's renaming field's value or var,
 * for sentences that must name it.  A variable the table does not
 * declare is a programming error: asserted, and never read.
 */
const char *sg_profile_env(const struct sg_profile *p, const char *var, const char **name);

/*
 * The same for adapter ad and the profile object raw (NULL: the default
 * names), for code that holds no profile, such as a client loading the
 * provider's own credential files.
 */
const char *sg_adapter_env(const struct sg_adapter *ad, const json_t *raw, const char *var,
			   const char **name);

/*
 * Every variable ad reads for the profile object raw (NULL: by default),
 * at most max names into names (borrowed: static strings or strings of
 * raw); returns how many.  The config refuses to forward any of them.
 */
size_t sg_adapter_credential_env(const struct sg_adapter *ad, const json_t *raw,
				 const char **names, size_t max);

/*
 * The default `credentials` of `sandgate probe`: {"<variable>": "found" |
 * "missing"} for each SG_FIELD_PROBE variable of p's backend's table.
 */
void sg_profile_credentials(const struct sg_profile *p, json_t *out);

/*
 * What a network allow entry is, the config having checked it is one of
 * these (config/README.md): an IPv4 or an IPv6 range "address/prefix", or
 * a domain ("*.example.com" included).  SG_ALLOW_BAD for anything else.
 */
enum sg_allow_kind { SG_ALLOW_BAD = 0, SG_ALLOW_IPV4, SG_ALLOW_IPV6, SG_ALLOW_DOMAIN };
enum sg_allow_kind sg_allow_kind(const char *entry);

/*
 * entry as an "address/prefix" range: family AF_INET or AF_INET6, the
 * address in network order, the prefix in range for the family.  false
 * for anything else (a bare address, a leading zero in the prefix).
 */
struct sg_cidr {
	int family;
	unsigned char addr[16];
	unsigned prefix;
};
bool sg_cidr_parse(const char *entry, struct sg_cidr *out);

/* The adapter for a backend name, or NULL (registry.c). */
const struct sg_adapter *sg_adapter_find(const char *name);
/* The NULL-terminated list of compiled-in adapters. */
const struct sg_adapter *const *sg_adapter_all(void);

#endif
