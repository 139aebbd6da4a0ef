/*
 * api.h - the modal backend's client for Modal's control plane and command
 * router: credentials as Modal's own tools keep them, the auth token, and
 * the calls a sandbox's life needs, over core/grpc.h with the message
 * types generated from modal/modal.proto and modal/router.proto.
 *
 * Invariants:
 *  - The token id and secret live in the client's metadata lines and go
 *    nowhere else: not into a sentence, a log line, a URL or a command.
 *    Sentences quote Modal's grpc-message, which names objects, not
 *    credentials.
 *  - Every call is bounded by a timeout and the caller's cancel token.
 *    Unary calls carry the idempotency metadata Modal's clients send and
 *    are retried on the codes they retry (grpc.h, sg_grpc_retry_modal);
 *    a create is safe to retry because a sandbox has a unique name.
 *  - The auth token (AuthTokenGet) is fetched on first use and again a
 *    minute before its "exp"; a router token likewise.  A client is safe
 *    to use from several threads (the token behind a mutex).
 *  - A router is dialled with TLS, verified, unless the control plane
 *    itself is cleartext on loopback (a test fake), as the official SDK
 *    does.
 *
 * These are the backend's internal helpers (prefix mdl_), shared by the
 * files of modal/; nothing outside modal/ and its tests includes this.
 */
#ifndef SG_MODAL_API_H
#define SG_MODAL_API_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/grpc.h"
#include "base/buf.h"
#include "base/cancel.h"
#include "base/err.h"
#include "modal.pb-c.h"
#include "router.pb-c.h"

#define MDL_SERVER_DEFAULT "https://api.modal.com:443"
#define MDL_FIELD_MAX 512 /* a token, a URL, a profile or environment name */
/*
 * A snapshot's lifetime (TaskSnapshotFilesystem's ttl_seconds), which the
 * SDK always sends: 30 days unless told, -1 for no expiry, never under a
 * second.  The ceiling is sandgate's (the lifetime_seconds field's), not
 * Modal's, which publishes none.
 */
#define MDL_SNAPSHOT_TTL_DEFAULT_S (30 * 24 * 3600)
#define MDL_SNAPSHOT_TTL_NONE (-1)
#define MDL_SNAPSHOT_TTL_MAX_S 2147483647

/* Credentials and where to send them. */
struct mdl_creds {
	char token_id[MDL_FIELD_MAX];
	char token_secret[MDL_FIELD_MAX];
	char server_url[MDL_FIELD_MAX];
	char environment[MDL_FIELD_MAX]; /* "" : the workspace's default */
	char profile[MDL_FIELD_MAX];     /* the ~/.modal.toml profile used, or "" */
	/*
	 * Modal's v2 sandboxes, as modal-js uses them unless told otherwise
	 * (MODAL_SANDBOX_V2, a profile's sandbox_v2): SandboxCreateV2 answers
	 * with the task and the router's access, and a v2 sandbox is found,
	 * tagged, listed and terminated with the calls named ...V2.
	 */
	bool sandbox_v2;
};

/* Forget a secret: a store the compiler may not drop as dead. */
void mdl_wipe(void *p, size_t n);

/* A sandbox call's method name for the client's kind of sandboxes. */
#define MDL_SANDBOX_RPC(c, name) ((c)->creds.sandbox_v2 ? name "V2" : name)

/*
 * Credentials as Modal's tools find them: MODAL_TOKEN_ID and
 * MODAL_TOKEN_SECRET, else the profile of the config file (MODAL_CONFIG_PATH,
 * else ~/.modal.toml) named by MODAL_PROFILE, else the one marked
 * `active = true`, else the only one.  MODAL_SERVER_URL and
 * MODAL_ENVIRONMENT win over the profile's server_url and environment,
 * MODAL_SANDBOX_V2 over its sandbox_v2 (true when neither says).
 * SG_E_PERMISSION when no token is found (the sentence says where it
 * looked, never a value); SG_E_INVALID_ARGUMENT for a malformed file.
 */
sg_err mdl_creds_load(struct mdl_creds *out, struct sg_errinfo *err)
	SG_MUST_CHECK;

struct mdl_client {
	struct mdl_creds creds;
	struct sg_grpc_channel *ctl;
	bool loopback_h2c; /* the control plane is http:// on loopback */
	pthread_mutex_t mu;
	char *auth_token; /* malloc, under mu */
	char builder[64]; /* the environment's image builder version, "" until asked; under mu */
	int64_t auth_exp; /* seconds since the epoch */
	atomic_uint_fast64_t auth_fetches;
};

sg_err mdl_client_init(struct mdl_client *c, const struct mdl_creds *creds,
		       const char *ca_file, struct sg_errinfo *err)
	SG_MUST_CHECK;
void mdl_client_release(struct mdl_client *c);

/*
 * One unary control-plane call, retried as Modal's clients retry.  *resp is
 * new (free with protobuf_c_message_free_unpacked(*resp, NULL)) on SG_OK.
 * *status (may be NULL) gets the final gRPC status, so callers can tell
 * ALREADY_EXISTS or NOT_FOUND from other failures.
 */
sg_err mdl_call(struct mdl_client *c, const char *method,
		const ProtobufCMessage *req,
		const ProtobufCMessageDescriptor *resp_desc,
		ProtobufCMessage **resp, int64_t timeout_ms, int *status,
		struct sg_cancel *cancel, struct sg_errinfo *err) SG_MUST_CHECK;

/* AppGetOrCreate (creating it when missing); app_id is new. */
sg_err mdl_app(struct mdl_client *c, const char *name, char **app_id,
	       struct sg_cancel *cancel, struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * AppGetOrCreate as mdl_app; with with_env, EnvironmentGetOrCreate is sent
 * beside it from a second thread (the two take one round trip), and the
 * builder version it gives is kept for mdl_image.  Its failure is not
 * this call's: mdl_image asks again and reports it.
 */
sg_err mdl_app_and_env(struct mdl_client *c, const char *name, bool with_env,
		       char **app_id, struct sg_cancel *cancel,
		       struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * The image for a registry reference ("python:3.13-slim"): the builder
 * version from EnvironmentGetOrCreate (asked once per client),
 * ImageGetOrCreate, then
 * ImageJoinStreaming until the build has a result (its log lines go to
 * sg_log).  *image_id is new.
 */
sg_err mdl_image(struct mdl_client *c, const char *app_id, const char *ref,
		 int64_t timeout_ms, char **image_id, struct sg_cancel *cancel,
		 struct sg_errinfo *err) SG_MUST_CHECK;

/* A sandbox's task and its command router. */
struct mdl_router {
	struct sg_grpc_channel *ch;
	char task_id[128];
	char *auth_line; /* "authorization: Bearer <jwt>", malloc */
	int64_t exp;     /* the JWT's "exp" (seconds since the epoch), 0: unknown */
};
void mdl_router_release(struct mdl_router *r);

/*
 * A router from the access Modal gave (TaskGetCommandRouterAccess's, or
 * SandboxCreateV2's): an https URL, or http on loopback when the control
 * plane is a loopback fake.  Borrows its arguments; r is filled.
 */
sg_err mdl_router_attach(struct mdl_client *c, const char *task_id, const char *router_url,
			 const char *jwt, struct mdl_router *r, struct sg_errinfo *err)
	SG_MUST_CHECK;

/*
 * SandboxGetTaskId with wait_until_ready until the task runs (within
 * timeout_ms), then TaskGetCommandRouterAccess (for a v2 sandbox,
 * SandboxGetTaskIdV2 and SandboxGetCommandRouterAccess).
 * SG_E_WORKSPACE_LOST when the sandbox has already ended.
 */
sg_err mdl_router_open(struct mdl_client *c, const char *sandbox_id,
		       int64_t timeout_ms, struct mdl_router *r,
		       struct sg_cancel *cancel, struct sg_errinfo *err)
	SG_MUST_CHECK;

/* One command through the router. */
struct mdl_exec {
	const char *const *argv; /* NULL-terminated */
	const char *workdir;     /* NULL: the sandbox's */
	const char *const *env;  /* NULL-terminated "NAME=value", or NULL */
	const void *stdin_data;  /* sent whole, then EOF; NULL: no stdin */
	size_t stdin_len;
	uint32_t timeout_secs;   /* 0: none */
	int64_t wait_ms;         /* the whole exec, client side; 0: only the cancel token */
	size_t max_output;       /* per stream; more is dropped and counted */
	/*
	 * stderr goes into stdout, so one stream is read; and the exit
	 * status is not asked for (no TaskExecWait) because the output says
	 * how the command ended (sg-helper job's trailer): two requests.
	 */
	bool merge, no_wait;
	/*
	 * A --linger job's mark, or NULL: the merged output's read ends once
	 * it ends with the job's "end" line (sg_job_ended), the call
	 * cancelled while the exec runs on (stopped in the result).
	 */
	const char *stop_mark;
};
struct mdl_exec_result {
	struct sg_buf out, err;
	/*
	 * -1 (mdl_exec_result_init), or where stdout goes as it arrives
	 * instead of into out: at most out's max bytes, past which the read
	 * stops with SG_E_TOO_LARGE; a failed write stops it with
	 * SG_E_INTERNAL.  Set by the caller after init.
	 */
	int out_fd;
	uint64_t out_total, err_total; /* bytes the command wrote */
	int code;   /* the exit code, or -1 */
	int signal; /* the signal that ended it, or 0 */
	int router_calls; /* gRPC requests this exec made */
	bool stopped;     /* the read ended at x->stop_mark's line */
};
void mdl_exec_result_init(struct mdl_exec_result *r, size_t max);
void mdl_exec_result_release(struct mdl_exec_result *r);

/*
 * TaskExecStart (a client-made exec id, so a retried start runs nothing
 * twice), TaskExecStdinWrite when there is stdin, TaskExecStdioRead of
 * stdout and of stderr (reconnecting at the last offset when a stream
 * breaks), TaskExecWait; with merge and no_wait only TaskExecStart and
 * one TaskExecStdioRead (and TaskExecStdinWrite when there is stdin).
 */
sg_err mdl_run(struct mdl_client *c, struct mdl_router *r,
	       const struct mdl_exec *x, struct mdl_exec_result *res,
	       struct sg_cancel *cancel, struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * TaskSnapshotFilesystem of an image that lives ttl_s seconds
 * (MDL_SNAPSHOT_TTL_NONE: until deleted); *image_id is new.
 */
sg_err mdl_snapshot(struct mdl_router *r, int64_t ttl_s, int64_t timeout_ms,
		    char **image_id, struct sg_cancel *cancel,
		    struct sg_errinfo *err) SG_MUST_CHECK;

/* SandboxTerminate; terminating an ended sandbox is not an error. */
sg_err mdl_terminate(struct mdl_client *c, const char *sandbox_id,
		     struct sg_cancel *cancel, struct sg_errinfo *err)
	SG_MUST_CHECK;

/*
 * SandboxList of app_id with all of tags ("name=value", NULL-terminated),
 * every page; cb per sandbox (return non-zero to stop).
 */
/*
 * One page of SandboxList of app_id with all of tags, the sandboxes made
 * before before (0: the newest page): *out new (NULL on failure).
 */
sg_err mdl_list_page(struct mdl_client *c, const char *app_id, const char *const *tags,
		     double before, Modal__Client__SandboxListResponse **out,
		     struct sg_cancel *cancel, struct sg_errinfo *err) SG_MUST_CHECK;
typedef int (*mdl_list_cb)(const Modal__Client__SandboxInfo *info,
			   void *payload);
sg_err mdl_list(struct mdl_client *c, const char *app_id,
		const char *const *tags, mdl_list_cb cb, void *payload,
		struct sg_cancel *cancel, struct sg_errinfo *err) SG_MUST_CHECK;

#endif
