/*
 * remote.h - the remote-adapter driver: what every cloud adapter does the
 * same way, written once over a small const table of provider calls
 * (struct sg_remote_ops).  An adapter's env begins with struct sg_remote
 * (which begins with struct sg_env), fills the table with what only its
 * provider does (one request of a job, an upload, a kill, a lookup, a
 * removal, a page of a listing, a keep-alive step) and hands exec, list,
 * destroy, keep-alive and the clean-up of a failed provision to the
 * driver.
 *
 * Invariants:
 *  - Nothing leaks (adapter.h): a provision that fails after it created a
 *    sandbox removes it (sg_remote_failed), or, when it cannot (a cancel,
 *    a removal that failed), sets env->may_remain so that the gateway
 *    settles the record by the sandbox's tags.  The driver never removes
 *    a sandbox whose managed-by tag is not sandgate's (sg_remote_destroy).
 *  - An exec's job files live under run_dir with a name unique to this
 *    process (nonce) and exec (seq); a job that cannot be seen through is
 *    killed (ops->kill) before exec returns an error.
 *  - A set-up left under way (sg_remote_setup_begin) never lets a command
 *    run before sg-helper is in place: until the set-up's leg has ended
 *    well, each job's start first waits in the environment for the
 *    program the set-up installs only once its checksum matched.
 *  - The driver owns nonce, seq, lock, run_dir, base_dir, the keep-alive
 *    leg and the set-up's leg; the adapter owns cl (its REST or gRPC
 *    client) and reads these fields only.  lock guards what the adapter says it guards (a session
 *    id, a garbage list); the driver takes it for nothing of its own.
 */
#ifndef SG_REMOTE_H
#define SG_REMOTE_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "adapters/adapter.h"
#include "adapters/install.h"
#include "adapters/jobreply.h"
#include "core/leg.h"
#include "base/buf.h"

struct sg_remote;

/* One exec's job as the driver prepared it, handed to each trip. */
struct sg_remote_job {
	const struct sg_exec *x;
	const char *dir;     /* the job's files' prefix in the sandbox */
	json_t *start;       /* the start's variables: SG_X, SG_IN<n> */
	json_t *attach;      /* an attach's: SG_X */
	/*
	 * The start's shell text: `eval "exec $SG_X"`, or the words
	 * themselves when they are too long for one variable
	 * (ops->words_in_text).  An attach always runs SG_JOB_EVAL.
	 */
	const char *command;
	char *upload;        /* where stdin was uploaded first, or NULL */
	bool in_vars;        /* stdin travels in SG_IN<n> */
	bool keep_tail;      /* the caller keeps a long output's tail */
	const char *gc;      /* ops->gc's list of earlier jobs' files, or NULL */
	struct sg_buf reply; /* the trip fills it with the request's reply */
	const char *mark;    /* the job's trailer word */
	bool linger;         /* the start asked for --linger (ops->lingers) */
	int quick;           /* the trip's own count across this exec's trips */
};

/* The command that runs a job's words from SG_X (sh -c, in the environment). */
#define SG_JOB_EVAL "eval \"exec $SG_X\""

/* What differs between providers: constants first, then the calls. */
struct sg_remote_ops {
	const char *provider;  /* "Vercel": in sentences */
	size_t inline_max;     /* bytes one variable carries */
	size_t stdin_vars;     /* stdin bytes carried in variables at most */
	bool words_in_text;    /* words over inline_max go as the command text */
	/*
	 * A job relays its output through pipes (sg-helper job --rm) and
	 * waits for its command's end unless it detaches; else every job
	 * answers after rm->wait_ms and keeps its files for an attach.
	 */
	bool relays;
	int64_t relay_wait_ms; /* with relays: a detached job's wait */
	/*
	 * The provider runs a command whoever reads its output, so the trip
	 * can end its request at a --linger job's "end" line while the job's
	 * process lives on: a spawn's supervisor is then that process (no
	 * fork), and the trip stops at sg_job_ended(j->reply, j->mark).
	 */
	bool lingers;
	int fails;             /* sg_job_driver's */
	bool kill_unseen;
	int list_pages;        /* pages of a listing read at most */
	/*
	 * A kept persistent workspace outlives its sandbox in a snapshot that
	 * the adapter records on this host and creates from (Modal): those
	 * records, not env->persisted or require_existing, say whether the
	 * workspace is lost, so sg_remote_create leaves that check to the
	 * adapter, which made it before it asked for the create.
	 */
	bool snapshot_records;

	/* One request of the job (sg_job_driver's trip): fills j->reply. */
	enum sg_job_trip (*trip)(struct sg_remote *rm, struct sg_remote_job *j, bool attach,
				 struct sg_cancel *cancel, struct sg_errinfo *err);
	/* Kill the job of prefix dir, or keep it from starting; its own wait. */
	void (*kill)(struct sg_remote *rm, const char *dir);
	/*
	 * Write data to the absolute path in the sandbox.  NULL: the start's
	 * request carries stdin itself (j->upload names where it goes, and
	 * the start's variables hold it as SG_UP).
	 */
	sg_err (*upload)(struct sg_remote *rm, const char *path, const void *data, size_t len,
			 unsigned mode, struct sg_cancel *cancel, struct sg_errinfo *err);
	/* Optional: earlier jobs' files for this job to remove (new), or NULL. */
	char *(*gc)(struct sg_remote *rm);
	/*
	 * Optional: the job of prefix dir ended well (its files may go with
	 * a later job's gc).
	 */
	void (*done)(struct sg_remote *rm, const struct sg_remote_job *j);
	/* Optional: one keep-alive step (sg_remote_keepalive_start). */
	void (*extend)(struct sg_remote *rm, struct sg_cancel *stop);
	/*
	 * Optional: forget what this host keeps of identity's environment
	 * beyond the state registry (Modal's snapshot records in
	 * env->state_dir), once it is removed for good: teardown's REMOVE
	 * (before the removal) and an operator's destroy (after it).  No
	 * remote call; cannot fail (a record that stays is logged).
	 */
	void (*forget)(struct sg_remote *rm, const char *identity);

	/*
	 * Run script (sh, in the environment) with vars as its variables:
	 * *reply (new) what it printed.
	 */
	sg_err (*script)(struct sg_remote *rm, const char *script, json_t *vars, char **reply,
			 struct sg_cancel *cancel, struct sg_errinfo *err);
	/*
	 * Create the sandbox, tagged (cloudkit.h) and with a provider-side
	 * lifetime; rm->fresh and env->id set once it exists, *got (new) the
	 * provider's view of it.  A create met by an existing one of this
	 * identity may take it instead (fresh false).
	 */
	sg_err (*create)(struct sg_remote *rm, json_t **got, struct sg_cancel *cancel,
			 struct sg_errinfo *err);
	/* Root, sandgate's directories, sg-helper and the probe (cloud.h). */
	sg_err (*setup)(struct sg_remote *rm, struct sg_cancel *cancel, struct sg_errinfo *err);
	/* Teardown's KEEP: stop the sandbox, its files kept. */
	sg_err (*keep)(struct sg_remote *rm, struct sg_cancel *cancel, struct sg_errinfo *err);

	/*
	 * The provider's client in rm for profile p (sg_remote_open), and its
	 * release (sg_remote_release).  An operator's list and destroy use
	 * an env of env_size bytes, zeroed, that holds nothing else but its
	 * profile and state_dir.
	 */
	size_t env_size;
	sg_err (*open)(struct sg_remote *rm, const struct sg_profile *p, struct sg_errinfo *err);
	void (*close)(struct sg_remote *rm);
	/* Look sandbox id up: *got (new) its view.  SG_E_NOT_FOUND when it is gone. */
	sg_err (*lookup)(struct sg_remote *rm, const char *id, json_t **got,
			 struct sg_cancel *cancel, struct sg_errinfo *err);
	/* A tag of a sandbox lookup returned, or NULL. */
	const char *(*tag)(const json_t *got, const char *key);
	/* Optional: its provider id, when the id looked up may be a name. */
	const char *(*id_of)(const json_t *got);
	/* Remove sandbox id and see it gone (cancel NULL: its own wait). */
	sg_err (*remove)(struct sg_remote *rm, const char *id, struct sg_cancel *cancel,
			 struct sg_errinfo *err);
	/*
	 * One page of p's sandboxes after cursor (NULL: the first): *items
	 * (new) a JSON array, *next the next page's cursor (new) or NULL for
	 * the last.
	 */
	sg_err (*list_page)(struct sg_remote *rm, const struct sg_profile *p, const char *cursor,
			    json_t **items, char **next, struct sg_cancel *cancel,
			    struct sg_errinfo *err);
	/* An operator's view of one listed item; false: not one to list. */
	bool (*info)(const json_t *item, struct sg_env_info *info);
};

/* The fields every remote adapter's env holds; first in its env. */
struct sg_remote {
	struct sg_env base;
	const struct sg_remote_ops *ops;
	bool opened;          /* ops->open succeeded: ops->close is owed */
	char *name;           /* the identity's sandbox name (cloudkit.h; malloc) */
	char nonce[17];       /* this process's part of job names */
	atomic_uint seq;      /* this env's jobs so far */
	pthread_mutex_t lock; /* what the adapter says */
	bool lock_ready;
	bool fresh;           /* this provision created the sandbox */
	char *base_dir;       /* sandgate's directory in the sandbox (malloc) */
	char *run_dir;        /* base_dir/run (malloc) */
	int64_t wait_ms;      /* without ops->relays: each request's job wait */
	/* A job pending this long past its timeout is killed (0: never). */
	int64_t pending_slack_ms;
	struct sg_leg ka;     /* keep-alive */
	bool ka_started;      /* under lock: ka runs, or is being ended */
	int64_t ka_ms;
	/* The set-up under way (sg_remote_setup_begin), and what it needs. */
	struct sg_leg later;
	atomic_bool later_ok;  /* it ended well: commands need not wait */
	char *later_fail;      /* the file it leaves when it did not (malloc) */
	struct sg_errinfo later_err; /* why not, once later has ended */
	sg_err (*later_run)(struct sg_remote *rm, const char *fail, struct sg_cancel *stop,
			    struct sg_errinfo *err);
};

/* Start rm's life: its ops, nonce and lock (first in provision()). */
sg_err sg_remote_init(struct sg_remote *rm, const struct sg_remote_ops *ops,
		      struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * The provider's client for p (ops->open), released by sg_remote_release,
 * and, for a session (an identity), the name of its sandbox.
 */
sg_err sg_remote_open(struct sg_remote *rm, const struct sg_profile *p,
		      struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * After the set-up's reply was read with rc: take base_dir (malloc'd, may
 * be NULL) and set run_dir from it.  rc, or the failure to.
 */
sg_err sg_remote_dirs(struct sg_remote *rm, sg_err rc, char *base_dir,
		      struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * The sandbox name of this identity is not at the provider (a lookup said
 * so, its sentence dropped): SG_E_WORKSPACE_LOST, *made false, when the
 * binding requires an existing workspace or the registry knew a
 * persistent one (adapter.h; not with ops->snapshot_records); else
 * ops->create, *made true, and the crash point adapter:created once it
 * exists.
 */
sg_err sg_remote_create(struct sg_remote *rm, const char *name, json_t **got, bool *made,
			struct sg_cancel *cancel, struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * The end of ops->setup: the set-up script's reply (rc: how its request
 * went; uploaded: it installed an upload sent beside it) read for the env
 * (cloud.h), the directories set, and sg-helper installed with in and b
 * when the sandbox had none.  cost is what sg-helper's transfer spent.
 */
sg_err sg_remote_setup_read(struct sg_remote *rm, sg_err rc, char *reply, bool uploaded,
			    struct sg_install *in, struct sg_helper_bin *b,
			    struct sg_install_cost *cost, struct sg_cancel *cancel,
			    struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * Can this provision leave the set-up under way (sg_remote_setup_begin)?
 * Only for a sandbox it created and that goes when the session does (so
 * no later session looks for sandgate's directory where the set-up's
 * rule would put it), with root clear of that directory.
 */
bool sg_remote_can_defer(const struct sg_remote *rm);

/*
 * Leave the set-up to run beside the first commands: sandgate's directory
 * is SG_REMOTE_LATER_BASE-<nonce> (the set-up script's SG_BASE), the env's
 * paths are set from it and sha now, and run(rm, fail, stop, err) is
 * started on a leg of its own: the adapter's upload and set-up, given
 * SG_BASE and SG_HFAIL=fail, returning SG_OK only with sg-helper in place.
 * env->setup_later is set.  An error: nothing was started.
 */
#define SG_REMOTE_LATER_BASE "/tmp/.sandgate-s"
sg_err sg_remote_setup_begin(struct sg_remote *rm, const char *sha,
			     sg_err (*run)(struct sg_remote *rm, const char *fail,
					   struct sg_cancel *stop, struct sg_errinfo *err),
			     struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * For a set-up run: the set-up script's variables (new; NULL when out of
 * memory) with SG_BASE and SG_HFAIL=fail and without the probe, for an
 * upload at up with its marker mark (sg_install_beside_paths); and the
 * reading of its reply: SG_OK only with sg-helper in place, in base_dir.
 */
json_t *sg_remote_later_vars(const struct sg_remote *rm, const char *fail, const char *sha,
			     const char *up, const char *mark, int64_t wait_ms);
sg_err sg_remote_later_read(const struct sg_remote *rm, char *reply, const char *sha,
			    struct sg_errinfo *err) SG_MUST_CHECK;

/* Wait for a set-up under way to end (cancel ends the wait): its outcome. */
sg_err sg_remote_setup_wait(struct sg_remote *rm, struct sg_cancel *cancel,
			    struct sg_errinfo *err) SG_MUST_CHECK;

/* ops->setup under the progress step "helper". */
sg_err sg_remote_setup(struct sg_remote *rm, const char *name, struct sg_cancel *cancel,
		       struct sg_errinfo *err) SG_MUST_CHECK;

/* The installer's run step (install.h; ctx is the sg_remote): ops->script. */
sg_err sg_remote_install_run(void *ctx, const char *script, const char *dir, const char *sha,
			     const char *upload, const void *in, size_t inlen, char **reply,
			     struct sg_cancel *cancel, struct sg_errinfo *err);

/* The adapter's teardown: the keep-alive ended, then remove, keep or let go. */
sg_err sg_remote_teardown(struct sg_env *env, enum sg_fate fate, struct sg_cancel *cancel,
			  struct sg_errinfo *err);

/* The adapter's exec: the job prepared, driven (sg_job_drive), its files kept for gc. */
sg_err sg_remote_exec(struct sg_env *env, const struct sg_exec *x, struct sg_exec_result *out,
		      struct sg_cancel *cancel, struct sg_errinfo *err);

/*
 * From a trip: the provider refused stdin in variables and started
 * nothing; upload it instead (the trip then returns SG_JOB_TRIP_RESTART).
 */
sg_err sg_remote_job_unvars(struct sg_remote_job *j, struct sg_cancel *cancel,
			    struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * Run ops->extend every every_ms on a thread of its own until the env
 * ends; once: a second call does nothing.  Thread-safe.
 */
void sg_remote_keepalive_start(struct sg_remote *rm, int64_t every_ms);
void sg_remote_keepalive_stop(struct sg_remote *rm);

/*
 * After a provision that failed with rc: a sandbox it created (fresh, id
 * set) is removed, or, after a cancel or a removal that failed, left on
 * record (env->may_remain).  True when it handled such a sandbox; false
 * leaves the adapter what is its own (a stopped sandbox it woke).
 */
bool sg_remote_failed(struct sg_remote *rm, sg_err rc, struct sg_cancel *cancel);

/* The adapter's list and destroy: paging, and the managed-by check. */
sg_err sg_remote_list(const struct sg_remote_ops *ops, const struct sg_profile *p,
		      sg_env_list_cb cb, void *payload, struct sg_cancel *cancel,
		      struct sg_errinfo *err);
sg_err sg_remote_destroy(const struct sg_remote_ops *ops, const struct sg_profile *p,
			 const char *state_dir, const char *id, struct sg_cancel *cancel,
			 struct sg_errinfo *err);

/*
 * The adapter's list and destroy (struct sg_adapter's slots), named
 * prefix_list and prefix_destroy, over ops: the contract's slots take no
 * adapter argument, so each adapter needs functions of its own.
 */
#define SG_REMOTE_OPERATOR(prefix, ops)                                                      \
	static sg_err prefix##_list(const struct sg_profile *p, const char *state_dir,       \
				    sg_env_list_cb cb, void *payload, struct sg_cancel *cancel, \
				    struct sg_errinfo *err)                                  \
	{                                                                                    \
		(void)state_dir;                                                             \
		return sg_remote_list(ops, p, cb, payload, cancel, err);                     \
	}                                                                                    \
	static sg_err prefix##_destroy(const struct sg_profile *p, const char *state_dir,    \
				       const char *id, struct sg_cancel *cancel,             \
				       struct sg_errinfo *err)                               \
	{                                                                                    \
		return sg_remote_destroy(ops, p, state_dir, id, cancel, err);                \
	}

/* End rm's own parts: the keep-alive, the lock, the directories, the client. */
void sg_remote_release(struct sg_remote *rm);

#endif
