/*
 * api.h - the vercel adapter's client for Vercel's Sandbox REST API:
 * credentials (an access token, or a Vercel OIDC token whose claims name
 * the team and the project), JSON calls on core/http.h with teamId on
 * every one, the provider's error words, and a count of requests made.
 *
 * Invariants:
 *  - The token lives in one place, the client's Authorization header,
 *    and goes nowhere else: not into a URL, a command, a log line or an
 *    error sentence; text that comes back from Vercel is clipped and
 *    scrubbed of it before a sentence quotes it.
 *  - Every call is one request bounded by a timeout and the caller's
 *    cancel token.  Only calls the caller marks idempotent (GETs, DELETEs,
 *    a create protected by its name) are retried on 429 (Retry-After
 *    honoured) and 5xx; everything else is sent once.
 *  - A client is read-only after vcl_client_init, except for the request
 *    counter, which is atomic: several threads may use one at once.
 *
 * Internal to vercel/ (prefix vcl_); tests include it to check the OIDC
 * claims and the stream reader.
 */
#ifndef SG_VERCEL_API_H
#define SG_VERCEL_API_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "adapters/adapter.h"
#include "adapters/cloud.h"
#include "core/http.h"
#include "core/ndjson.h"
#include "base/strv.h"

/* The variables Vercel's own tools read. */
#define VCL_ENV_TOKEN "VERCEL_TOKEN"
#define VCL_ENV_TEAM "VERCEL_TEAM_ID"
#define VCL_ENV_PROJECT "VERCEL_PROJECT_ID"
#define VCL_ENV_OIDC "VERCEL_OIDC_TOKEN"
#define VCL_ENV_URL "VERCEL_API_URL"
#define VCL_API_DEFAULT "https://api.vercel.com"

struct vcl_client {
	struct sg_rest rest; /* the URL, the token (secret) and the headers */
	char *team;    /* teamId, on every call */
	char *project; /* projectId */
	bool oidc;     /* the token is an OIDC token */
	atomic_uint_fast64_t requests; /* requests sent, retries included */
};

/*
 * Fill c from the profile and this process's environment: the token from
 * $VERCEL_TOKEN (or the variable the profile's token_env names) with team
 * and project from the profile (team, project) or $VERCEL_TEAM_ID and
 * $VERCEL_PROJECT_ID; or else $VERCEL_OIDC_TOKEN, whose claims owner_id
 * and project_id give them and whose exp must be in the future.  The URL
 * from the profile's api_url, else $VERCEL_API_URL, else Vercel's.
 * SG_E_PERMISSION for missing or expired credentials (the sentence names
 * the variables, never a value); SG_E_INVALID_ARGUMENT for a malformed
 * token or URL.  On failure c holds nothing.
 */
sg_err vcl_client_init(struct vcl_client *c, const struct sg_profile *p,
		       struct sg_errinfo *err) SG_MUST_CHECK;
void vcl_client_release(struct vcl_client *c);

/* The claims of an OIDC token that matter here. */
struct vcl_claims {
	char owner_id[128];   /* the team */
	char project_id[128];
	int64_t exp;          /* unix seconds, 0 when absent */
};

/*
 * Decode the payload of a JWT (base64url JSON) into out.  No signature
 * check: Vercel checks it; this only reads where the token points.
 * SG_E_INVALID_ARGUMENT when it is not a JWT with a JSON payload.
 */
sg_err vcl_claims_decode(const char *jwt, struct vcl_claims *out) SG_MUST_CHECK;

/* One call's outcome. */
struct vcl_reply {
	long status;
	json_t *json;   /* new reference, or NULL when the body was not JSON */
	char code[64];  /* error.code of an error body, or "" */
	int64_t retry_after_ms;
	int attempts;   /* times the request was sent (retries included), also on failure */
	int64_t sent_ms; /* sg_now_ms() when the call began (its first try), also on failure */
	/*
	 * Vercel's clock when it answered: the reply's Date header in unix
	 * milliseconds (to the second), or 0 without one.  It dates Vercel's
	 * own timestamps against this host's monotonic clock, whatever this
	 * host's wall clock says.
	 */
	int64_t date_ms;
};
void vcl_reply_release(struct vcl_reply *r);

/* How one call is made; zero fields take defaults. */
struct vcl_call {
	const char *method;   /* "GET" when NULL */
	const char *path;     /* "/v2/sandboxes/..." (already encoded) */
	const char *query;    /* extra "a=b&c=d", or NULL (teamId is added) */
	json_t *body;         /* borrowed; sent as application/json */
	const void *raw;      /* or a raw body ... */
	size_t raw_len;
	const char *raw_type; /* ... of this content type */
	const char *const *extra_headers; /* NULL-terminated, or NULL */
	bool idempotent;      /* may be sent again on 429/5xx/dropped */
	bool resend_safe;     /* a copy is harmless: it may use a kept connection */
	int64_t timeout_ms;   /* 0: SG_VERCEL_CALL_MS */
	/* Stream a 2xx body here instead of keeping it. */
	sg_http_sink_cb sink;
	void *sink_payload;
	int64_t max_body;     /* 0: SG_VERCEL_REPLY_MAX */
	const char *what;     /* for sentences: "creating the sandbox" */
};

/*
 * Make the call.  SG_OK when a response arrived, whatever its status (the
 * caller decides; vcl_fail writes the sentence); otherwise the transport's
 * code with a sentence naming what was being done and the host.  out is
 * reset on entry and must be released by the caller.
 */
sg_err vcl_do(struct vcl_client *c, const struct vcl_call *call, struct vcl_reply *out,
	      struct sg_cancel *cancel, struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * Record on err the failure a non-2xx reply means: "<what> failed: Vercel
 * answered HTTP <status> <code>: <its message>", the message clipped and
 * scrubbed; returns code, or the status's code when code is SG_OK.
 */
sg_err vcl_fail(const struct vcl_client *c, const char *what, const struct vcl_reply *r,
		sg_err code, struct sg_errinfo *err);

/* A string member of a JSON object, or NULL. */
const char *vcl_str(const json_t *o, const char *key);

/*
 * What one `cmd` request with wait:true streams back, read incrementally
 * (vcl_stream_feed as an HTTP sink): the command's stdout kept up to max
 * bytes (the rest counted), stderr counted, its final exit code, and the
 * stream's own error line.  The stream is whole only when it ended with
 * the final command line (exitCode set) and no partial line.
 */
struct vcl_stream {
	struct sg_ndjson nd;
	struct sg_buf out;     /* stdout's head */
	uint64_t out_total, err_total;
	bool started;          /* the first {command} line arrived */
	bool finished;         /* a {command} line with an exit code arrived */
	int exit_code;
	char error[160];       /* a {stream:"error"} line's code and message */
	char bad[96];          /* why a line could not be read, or "" */
	/*
	 * A --linger job's mark, or NULL: once stdout ends with its "end"
	 * line (sg_job_ended) the stream is whole (stopped) and the feed
	 * aborts the request, whose command may run on.
	 */
	const char *stop_mark;
	bool stopped;
};
void vcl_stream_init(struct vcl_stream *s, size_t max_out);
void vcl_stream_release(struct vcl_stream *s);
sg_err vcl_stream_feed(const char *data, size_t len, void *payload);
/*
 * After the request ended: SG_OK for a whole stream (or one stopped); SG_E_PROVIDER with a
 * sentence (cut mid-line, no exit code, an error line) otherwise.
 */
sg_err vcl_stream_end(const struct vcl_stream *s, struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * vCPUs for a profile's cpus and memory_mb: 1 or an even number, enough
 * for both (memory is 2048 MB per vCPU; cpus is rounded up).
 * *memory_exact is false when memory_mb is set and is not what those
 * vCPUs give: the caller refuses that unless the profile allows rounding
 * up.  0 when neither is set (Vercel's default).
 */
int64_t vcl_vcpus(double cpus, int64_t memory_mb, bool *memory_exact);

#endif
