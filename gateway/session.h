/*
 * session.h - one connection's binding, environment and requests.
 *
 * The gateway serves one host connection (stdin/stdout) per process, so
 * there is exactly one struct sg_session.  Its binding is fixed by the
 * first successful initialize and immutable afterwards; everything the
 * request handlers share (the environment, the observed facts, the export
 * table, the process bookkeeping) hangs off it, each table behind its own
 * lock, never held across a call into the environment.
 *
 * A request is a struct sg_op.  It owns what it allocates; its terminal
 * reply is written by the worker only after its handler returned, and the
 * handler may queue events to follow that reply (op->after), which is how
 * process/start's reply precedes its `started` event.
 *
 * What the connection is, the session's mode (struct sg_mode below), is
 * chosen once from the served profile before the first frame and never
 * changes: the built-in mode (mode.h) runs the tools in an environment
 * this gateway provisions, the relay mode (relay.h) hands each request to
 * a `command` profile's peer.  Where the two differ is a slot of the mode;
 * no handler asks which mode it runs in.
 */
#ifndef SG_SESSION_H
#define SG_SESSION_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "adapters/adapter.h"
#include "config/config.h"
#include "base/buf.h"
#include "base/cancel.h"
#include "base/err.h"
#include "base/strv.h"
#include "gateway/wire.h"

struct sg_callback;
struct sg_exports;
struct sg_mode;
struct sg_op;
struct sg_pool;
struct sg_procs;
struct sg_relay;

struct sg_session {
	/* Fixed at start (main.c). */
	const struct sg_config *cfg; /* borrowed */
	const char *profile_name;    /* --profile, or NULL for the default */
	const char *state_dir;
	const char *helper_path;     /* sg-helper on this host */
	int64_t budget_ms;           /* --shutdown-budget-ms, 0: profile/default */
	bool toolchains;             /* --toolchains: probe them at initialize */
	bool must_observe;           /* a select candidate: its facts decide (select.c) */
	bool peer;                   /* --peer: a delegated peer (shutdown.c) */
	size_t tool_output;          /* bytes kept per tool call */
	struct sg_wire *wire;
	const struct sg_mode *mode;  /* static; chosen by server.c */

	/* The binding: set once by the first initialize that succeeds. */
	pthread_mutex_t lock;
	pthread_cond_t init_done;
	enum { SG_S_NEW, SG_S_INITIALIZING, SG_S_READY, SG_S_FAILED } state;
	json_t *binding;    /* the canonical binding object (own ref) */
	char *token;
	json_t *init_reply; /* the reply data a repeated initialize returns */
	int version;        /* the binding's protocol version, 3 or 4 */

	/* Valid once READY; read without the lock afterwards. */
	char *root, *session_id, *identity;
	struct sg_profile *profile;
	struct sg_env *env;
	int landlock_abi;            /* observed inside the environment, or: */
#define SG_LANDLOCK_UNSEEN (-1)      /* not yet: sg-helper confine decides there */
	/* Without Landlock, a read-only / confines standard (helper/confine.c). */
	bool standard_by_mounts;
	struct sg_strv base_env;     /* a command's minimal environment */
	json_t *forwarded;           /* binding.environment: {NAME: value}, checked */
	char *tmp_dir;               /* inside the environment: TMPDIR */

	struct sg_exports *exports;
	struct sg_procs *procs;

	/*
	 * The relay mode's peer (relay.c): set by the first initialize and
	 * never replaced; NULL in the built-in mode, and env is NULL in the
	 * relay mode.
	 */
	struct sg_relay *relay;

	/*
	 * What failed provisionings may have left behind (env->may_remain),
	 * as registry keys with the profile and session to look for:
	 * [{backend, profile, identity, session}].  Settled at shutdown
	 * within the budget (sg_envs_settle).  Under lock.
	 */
	json_t *pending;

	/* run_code's nested calls awaiting the host's `callback` (pool.c). */
	pthread_mutex_t callback_lock;
	struct sg_callback *callbacks;
};

/* A method a mode serves: the handler a worker runs for it. */
struct sg_method {
	const char *name;
	sg_err (*run)(struct sg_op *op, json_t **out);
	bool before_init; /* served before a binding (initialize only) */
};

/*
 * A connection's mode: a static table, one per mode, whose every slot is
 * set.  The reader thread calls route and callback, a worker initialize,
 * the shutdown shutdown and release.
 */
struct sg_mode {
	const char *name;
	/*
	 * The method a request named name runs, NULL when the mode knows
	 * none of that name (unknown_method).  bound: the session is bound
	 * (READY); before that the server runs only a method marked
	 * before_init and answers the others not_initialized.  Never blocks.
	 */
	const struct sg_method *(*route)(struct sg_session *s, const char *name, bool bound);
	/*
	 * initialize's own part (initialize.c checked the binding and
	 * holds the session INITIALIZING): bring the connection up and fill
	 * s->init_reply, profile, identity, root and session_id.  *fatal is
	 * set once a failure may have left something behind, which makes it
	 * final for the connection.
	 */
	sg_err (*initialize)(struct sg_op *op, json_t *binding, bool *fatal);
	/*
	 * A bound session's `callback` frame (protocol section 7; borrowed):
	 * the answer to a nested tool call.  It has no reply.  Never blocks.
	 */
	void (*callback)(struct sg_session *s, json_t *frame);
	/*
	 * The first step of the shutdown, before the requests in flight are
	 * drained, within deadline (grace at most max_grace_ms); non-zero
	 * when what it ended may remain (said on stderr and in the state
	 * registry).  What an environment of the session's own needs is
	 * shutdown.c's, after the drain.
	 */
	int (*shutdown)(struct sg_session *s, struct sg_pool *pool, struct sg_cancel *deadline,
			int64_t max_grace_ms);
	/* Free the mode's state, once no worker runs and before the wire is freed. */
	void (*release)(struct sg_session *s);
};

/*
 * A nested tool call waiting for the host's `callback` frame (protocol
 * section 7).  Its owner (run_code) embeds it, sets id (the id of the
 * `tool` frame it sent) and deliver, adds it before that frame goes out and
 * removes it when the call is settled or the program ends.  deliver runs
 * on the reader thread with the callback's data, {"id", "data"|"error"}
 * (borrowed), under the session's callback lock: it must only record the
 * answer and wake its waiter.  After sg_callback_remove returns, deliver
 * is not running and will not run again.
 */
struct sg_callback {
	const char *id;
	void (*deliver)(struct sg_callback *cb, json_t *answer);
	struct sg_callback *next; /* the session's list */
};
void sg_callback_add(struct sg_session *s, struct sg_callback *cb);
void sg_callback_remove(struct sg_session *s, struct sg_callback *cb);
/* Hand answer to the waiter of id; false when nobody waits for it. */
bool sg_callback_deliver(struct sg_session *s, const char *id, json_t *answer);

struct sg_op {
	json_t *id;           /* the request's id (own ref) */
	const char *method;   /* borrowed from req */
	json_t *req;          /* the whole frame (own ref) */
	json_t *data;         /* borrowed from req; {} when absent */
	struct sg_session *s; /* borrowed */
	struct sg_cancel cancel;
	struct sg_errinfo err;
	json_t *after;        /* events sent after the reply (own ref) or NULL */
	/* Called by the worker once the reply and `after` are queued. */
	void (*after_sent)(struct sg_op *op);
	char *after_id;       /* for after_sent's use (malloc) */
	/*
	 * The whole reply frame already as JSON text (malloc, no newline), for
	 * large payloads that would be slow to build and serialise as a json_t:
	 * when the handler sets it, *out stays NULL and this is sent as is.
	 */
	char *raw_reply;
	size_t raw_len;
	/*
	 * A failure's sentence when it is longer than err.msg holds (a tool's
	 * diagnostic with candidates, malloc): the error reply is then
	 * "<err's word>: <fail_text>".
	 */
	char *fail_text;
	/*
	 * Called by the worker once the reply is queued, whatever it was
	 * (relay.c: a peer's reply is out before its next message).
	 */
	void (*replied)(struct sg_op *op);
	/* The handler's error stands even when the token fired (relay.c:
	 * a peer closed for ignoring a cancel answers `unavailable`). */
	bool keep_err;
	const char *tool;     /* execute: the tool's name, for the audit log */
	bool tool_failed;     /* execute: the ToolResult has is_error */
	int64_t start_ns;
	struct sg_op *next;   /* the in-flight list */
};

/*
 * The binding of an initialize request's data in canonical form (every
 * field present, absent ones null or false), after checking each field;
 * *out is new.  Errors: SG_E_UNSUPPORTED (version), SG_E_INVALID_ARGUMENT.
 */
sg_err sg_binding_canonical(json_t *data, json_t **out, struct sg_errinfo *e)
	SG_MUST_CHECK;

/* Queue an event to be sent right after op's reply (steals ev). */
void sg_op_after(struct sg_op *op, json_t *ev);

/* ---- envcall.c: sg-helper steps in the environment ---- */

/*
 * Run `sg-helper ARGS...` for this session and parse its JSON reply (*out
 * new).  Steps that read or change files and spools run in-process when
 * the environment's files are on this host, else through the adapter's
 * exec.  `args` must not contain --root/--host-root/--ctl: `rooted` adds
 * the root options (fs commands) and `ctl` the spool directory (proc
 * commands).  A reply {"error":...} becomes that error on err; a
 * tool_error reply is returned as it is (the caller makes an is_error
 * ToolResult).
 */
enum { SG_CALL_ROOTED = 1, SG_CALL_CTL = 2, SG_CALL_EXEC = 4 };
/* Read one sg-helper JSON reply (as sg_envcall does) into *out (new). */
sg_err sg_envcall_reply(const char *p, size_t n, json_t **out, struct sg_errinfo *err);
sg_err sg_envcall(struct sg_session *s, unsigned how,
		  const char *const *args, const void *in, size_t inlen,
		  json_t **out, struct sg_cancel *cancel,
		  struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * As sg_envcall without input, an exec step given at most timeout_ms
 * (SG_E_TIMEOUT beyond): for a step the gateway makes on its own behalf,
 * which no host's cancel would end if the environment never answered.
 */
sg_err sg_envcall_within(struct sg_session *s, unsigned how, const char *const *args,
			 int64_t timeout_ms, json_t **out, struct sg_cancel *cancel,
			 struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * As sg_envcall, for a step whose reply is raw bytes followed by a JSON
 * line (`fs read --raw`): *out is the JSON (new), the last line, and the
 * bytes before its newline are appended to tail.
 */
sg_err sg_envcall_tail(struct sg_session *s, unsigned how, const char *const *args,
		       json_t **out, struct sg_buf *tail, struct sg_cancel *cancel,
		       struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * Run `sg-helper proc spawn ARGS...` in the environment through exec, with
 * the command's environment envp: the helper daemonizes a supervisor that
 * outlives the call.  *out as sg_envcall's.
 */
sg_err sg_envcall_spawn(struct sg_session *s, const char *const *args,
			const char *const *envp, json_t **out,
			struct sg_cancel *cancel, struct sg_errinfo *err)
	SG_MUST_CHECK;
/*
 * As sg_envcall_spawn for a step that itself waits up to wait_ms (a
 * foreground bash run, `proc spawn --wait-ms`): the exec is given that
 * much longer, and cancel ends it (the supervisor it left runs on).
 */
sg_err sg_envcall_spawn_for(struct sg_session *s, const char *const *args,
			    const char *const *envp, int64_t wait_ms, json_t **out,
			    struct sg_cancel *cancel, struct sg_errinfo *err)
	SG_MUST_CHECK;

/* Resolve a user path to an absolute path inside the environment (new). */
sg_err sg_envcall_resolve(struct sg_session *s, const char *path,
			  bool for_write, char **out, struct sg_cancel *cancel,
			  struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * The environment for a command, later sources winning: binding.environment
 * (the variables the host forwards), then the session's minimal set and the
 * operator's forward_env, which the host may not override, then `extra` (the
 * request's or the tool's own, a JSON object of strings, may be NULL).
 */
sg_err sg_envcall_command_env(struct sg_session *s, json_t *extra,
			      struct sg_strv *out, struct sg_errinfo *err)
	SG_MUST_CHECK;

/*
 * SG_OK when commands of this mode can run here: `unconfined` always, standard
 * and read_only only where the environment can confine them (Landlock ABI
 * 3 or newer); SG_E_PERMISSION otherwise, never a silently weaker mode.
 */
sg_err sg_envcall_can_confine(struct sg_session *s, enum sg_confine mode,
			      struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * Wrap argv for the permission mode: standard and read_only commands run
 * under `sg-helper confine` (Landlock), and are refused with
 * SG_E_PERMISSION when the environment cannot confine them.
 */
sg_err sg_envcall_confine(struct sg_session *s, enum sg_confine mode,
			  const char *const *argv, struct sg_strv *out,
			  struct sg_errinfo *err) SG_MUST_CHECK;

/* ---- tools/: the execute method ---- */
sg_err sg_tools_execute(struct sg_op *op, json_t **out) SG_MUST_CHECK;
/*
 * What sandgate checks of an execute before relaying it to a peer
 * (relay.c): the arguments' shape and the permission mode's refusals, the
 * same sentences as a local execute.  Sets op->tool for the audit log.
 */
sg_err sg_tools_precheck(struct sg_op *op) SG_MUST_CHECK;
/* The catalogue's names as a JSON array (new). */
json_t *sg_tools_names(void);

/* ---- proc.c: the host's processes, their methods and events ---- */
sg_err sg_procs_new(struct sg_session *s) SG_MUST_CHECK;
/*
 * The process methods (protocol section 4), one handler for all:
 * op->method names the operation.
 */
sg_err sg_proc_method(struct sg_op *op, json_t **out) SG_MUST_CHECK;
/*
 * As sg_proc_method for `method` with `data` (the process tool's way to
 * the same handlers); *out new.
 */
sg_err sg_proc_run(struct sg_op *op, const char *method, json_t *data, json_t **out)
	SG_MUST_CHECK;

/* What one start runs, and how (bash and process/start). */
struct sg_proc_start {
	const char *command;      /* a shell string, or NULL with argv */
	json_t *argv;             /* an array of strings, or NULL (borrowed) */
	const char *cwd;          /* a user path; NULL or "": root */
	json_t *env;              /* extra variables, or NULL (borrowed) */
	const char *operation_id; /* version 4's, or NULL */
	const char *actor;        /* the agent; NULL: the main agent */
	const char *lifecycle;    /* "managed" (NULL) or "session" */
	enum sg_confine mode;     /* the request's permission mode */
	int64_t timeout_ms;       /* the process is stopped after it; 0: never */
	/*
	 * >= 0: a foreground run, waited for that long; one that ends in
	 * time leaves no record, one that does not is promoted to a managed
	 * process.  -1: a background start.
	 */
	int64_t wait_ms;
	bool tty;                 /* on a terminal of its own (implies input) */
	bool input;               /* process/write reaches its stdin */
	bool login;               /* the command in a login shell (bash -l) */
	bool git_attribution;     /* its commits get the host's co-author trailer */
};

/*
 * Start st in the environment; *reply is sg-helper's (new): "process" the
 * record, and for a foreground run "ended", "output", "stdout", "stderr"
 * with their _bytes and _truncated.  A process that runs on is announced
 * `started` after op's reply.  A cancelled foreground run is stopped.
 */
sg_err sg_proc_spawn(struct sg_op *op, const struct sg_proc_start *st, json_t **reply)
	SG_MUST_CHECK;
/*
 * Stop every process this session still controls (managed ones too), all
 * at once, each with grace_ms before SIGKILL, within the cancel token's
 * time, each announced `cleaned_up`; *stopped (optional) is how many were
 * running.
 */
sg_err sg_procs_shutdown(struct sg_session *s, int64_t grace_ms, struct sg_cancel *cancel,
			 int *stopped, struct sg_errinfo *err);
void sg_procs_free(struct sg_session *s);

/* ---- export.c: immutable file snapshots ---- */
sg_err sg_exports_new(struct sg_session *s) SG_MUST_CHECK;
sg_err sg_export_read(struct sg_op *op, json_t **out) SG_MUST_CHECK;
sg_err sg_export_close(struct sg_op *op, json_t **out) SG_MUST_CHECK;
/*
 * Snapshot path for present_artifact: *out is {"execution_export":TOKEN,
 * "name","size"} (new).
 */
sg_err sg_export_path(struct sg_session *s, const char *path, bool unconfined, json_t **out,
		      struct sg_cancel *cancel, struct sg_errinfo *err)
	SG_MUST_CHECK;
void sg_exports_free(struct sg_session *s);

/* ---- argument helpers (args.c): typed reads of a request's data ---- */
/*
 * Each returns SG_E_INVALID_ARGUMENT naming `key` when the value has the
 * wrong type; absent values leave *out at def.  Strings are borrowed.
 */
sg_err sg_arg_str(json_t *obj, const char *key, bool required,
		  const char **out, struct sg_errinfo *err) SG_MUST_CHECK;
sg_err sg_arg_int(json_t *obj, const char *key, int64_t def, int64_t min,
		  int64_t max, int64_t *out, struct sg_errinfo *err)
	SG_MUST_CHECK;
sg_err sg_arg_bool(json_t *obj, const char *key, bool def, bool *out,
		   struct sg_errinfo *err) SG_MUST_CHECK;
/* An array of strings, NULL when absent; borrowed. */
sg_err sg_arg_strings(json_t *obj, const char *key, json_t **out,
		      struct sg_errinfo *err) SG_MUST_CHECK;
/* An object whose values are all strings, NULL when absent; borrowed. */
sg_err sg_arg_env(json_t *obj, const char *key, json_t **out,
		  struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * `permission_mode` as a confinement mode: "standard" (or "" or absent),
 * "read_only", "unconfined"; anything else is invalid_argument.
 */
sg_err sg_arg_mode(json_t *obj, enum sg_confine *out, struct sg_errinfo *err)
	SG_MUST_CHECK;
/* "read_only", "standard" or "unconfined"; static. */
const char *sg_confine_word(enum sg_confine mode);

/* Text as a JSON string with invalid UTF-8 replaced by U+FFFD (new). */
json_t *sg_json_text(const char *p, size_t n);

#endif
