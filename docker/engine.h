/*
 * engine.h - the Docker Engine API over its unix socket, as the docker
 * backend uses it: one JSON call (dk_do), and one command run through
 * POST /containers/{id}/exec and /exec/{id}/start (dk_exec), its output
 * read from the stream Docker multiplexes with 8-byte frame headers.
 *
 * Invariants:
 *  - Only a unix socket: DOCKER_HOST=unix:///path (or the default
 *    /var/run/docker.sock).  A tcp:// or ssh:// daemon is refused, never
 *    reached without the TLS it would need.
 *  - The API version is pinned (DK_API), so replies keep the shape read
 *    here on newer daemons; Podman's compatible socket speaks it too.
 *  - A sentence names the call (what) and the daemon's own message,
 *    clipped; there are no credentials on this path.
 *  - A dk_client is read-only after dk_client_init, so calls may run on
 *    several threads at once; requests counts them.
 */
#ifndef SG_DOCKER_ENGINE_H
#define SG_DOCKER_ENGINE_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "adapters/adapter.h"
#include "core/http.h"
#include "base/buf.h"
#include "base/cancel.h"
#include "base/err.h"

#define DK_API "/v1.41"                /* Docker 20.10's, and Podman's compat API */
#define DK_DEFAULT_SOCKET "/var/run/docker.sock"
#define DK_ENV_HOST "DOCKER_HOST"
#define DK_REPLY_MAX (4 * SG_MiB)     /* a JSON reply (a listing, an inspect) */
#define DK_CALL_MS 60000              /* a control call (create, start, stop...) */
#define DK_PULL_MS (15 * 60 * 1000)   /* an image pull, progress and all */

struct dk_client {
	char *socket;   /* the daemon's unix socket (malloc) */
	atomic_ullong requests;
};

struct dk_call {
	const char *method;   /* NULL: GET */
	const char *path;     /* after DK_API: "/containers/create" */
	const char *query;    /* without '?', or NULL */
	json_t *body;         /* JSON body, or NULL */
	const void *raw;      /* or a raw body (a tar) */
	size_t raw_len;
	const char *raw_type;
	int64_t timeout_ms;   /* 0: DK_CALL_MS; < 0: none (the cancel bounds it) */
	sg_http_sink_cb sink; /* a streamed 2xx body (pull progress, exec output) */
	void *sink_payload;
	const char *what;     /* "creating the container": in sentences */
};

struct dk_reply {
	long status;
	json_t *json;      /* the body parsed, when it was JSON */
	char message[200]; /* the daemon's {"message": ...}, clipped */
};

/* The client for profile p: DOCKER_HOST as its field table declares it. */
sg_err dk_client_init(struct dk_client *cl, const struct sg_profile *p,
		      struct sg_errinfo *err) SG_MUST_CHECK;
void dk_client_release(struct dk_client *cl);

/* One call: SG_OK with r filled for any status; errors are the transport's. */
sg_err dk_do(struct dk_client *cl, const struct dk_call *c, struct dk_reply *r,
	     struct sg_cancel *cancel, struct sg_errinfo *err) SG_MUST_CHECK;
void dk_reply_release(struct dk_reply *r);

/*
 * A call on container id (method, then suffix and query after its path)
 * whose reply is a status alone: SG_OK for one of ok (0-ended), gone for
 * a 404 (SG_OK among them when a missing container is fine), else the
 * daemon's sentence.
 */
sg_err dk_container(struct dk_client *cl, const char *method, const char *id, const char *suffix,
		    const char *query, const long *ok, sg_err gone, const char *what,
		    struct sg_cancel *cancel, struct sg_errinfo *err) SG_MUST_CHECK;

/* A reply that is not what the call wanted: code (0: by status) and the daemon's words. */
sg_err dk_fail(const struct dk_call *c, const struct dk_reply *r, sg_err code,
	       struct sg_errinfo *err);

/* One command run in container id (dk_exec). */
struct dk_exec {
	json_t *cmd;         /* argv, a JSON array of strings (borrowed) */
	json_t *vars;        /* {"NAME": "value"} for its environment, or NULL */
	const char *user;    /* NULL: the container's */
	int64_t timeout_ms;  /* the start's request; < 0: none */
	struct sg_buf *out;  /* its stdout (bounded by out's max); stderr is dropped */
	/*
	 * A --linger job's mark, or NULL: the start's stream ends once stdout
	 * ends with the job's "end" line (sg_job_ended), whose process may
	 * live on; the exec counts as ended well.
	 */
	const char *stop_mark;
};

/*
 * Run e in container id and wait for its end.  SG_E_NOT_FOUND: no such
 * container; SG_E_UNAVAILABLE with *stopped set: the container is not
 * running (409).
 */
sg_err dk_exec(struct dk_client *cl, const char *id, const struct dk_exec *e, bool *stopped,
	       struct sg_cancel *cancel, struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * The regular file at path in container id, streamed to fd (at most max
 * bytes: SG_E_TOO_LARGE beyond) from GET /containers/{id}/archive's tar.
 * SG_E_NOT_FOUND when it is missing; anything but a regular file (a
 * symlink, a directory) is SG_E_INVALID_ARGUMENT.
 */
sg_err dk_get_file_of(struct dk_client *cl, const char *id, const char *path, int fd, size_t max,
		   struct sg_cancel *cancel, struct sg_errinfo *err) SG_MUST_CHECK;

/* "/containers/<id><suffix>" with id percent-encoded (new, NULL when out of memory). */
char *dk_path(const char *kind, const char *id, const char *suffix);

#endif
