/*
 * api.h - the daytona adapter's client for Daytona's control plane and
 * toolbox: credentials, JSON calls over core/http.h, and sentences
 * for the failures the provider reports.
 *
 * Invariants:
 *  - The API key lives in one place, the client's Authorization header,
 *    and goes nowhere else: not into a URL, a command, a log line or an
 *    error sentence.  Text that comes back from Daytona (its "message")
 *    is clipped and scrubbed of the key before a sentence quotes it,
 *    because providers echo request fields in their errors.
 *  - Every call is one sg_http request bounded by a timeout and by the
 *    caller's cancel token.  Idempotent calls are retried on 5xx, 429
 *    (honouring Daytona's Retry-After-<throttler> headers) and dropped
 *    connections; the one call that is not (creating a sandbox) is retried
 *    only when the connection was never made, and the adapter then finds
 *    out by name what the first try did.
 *  - A client is read-only after dtn_client_init, so several threads may
 *    use one at once.
 *
 * These are the adapter's internal helpers (prefix dtn_), shared by the
 * files of daytona/; nothing outside daytona/ includes this header.
 */
#ifndef SG_DAYTONA_API_H
#define SG_DAYTONA_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "adapters/adapter.h"
#include "adapters/cloud.h"
#include "core/http.h"
#include "base/strv.h"

/* The variables Daytona's own tools read (cloud-apis.md 1.1). */
#define DTN_ENV_KEY "DAYTONA_API_KEY"
#define DTN_ENV_URL "DAYTONA_API_URL"
#define DTN_ENV_TARGET "DAYTONA_TARGET"
#define DTN_API_DEFAULT "https://app.daytona.io/api"

struct dtn_client {
	/* The URL, the API key (secret) and the X-Daytona-* headers. */
	struct sg_rest rest;
	char *target;  /* the region for new sandboxes, or NULL */
	/* The event stream while provisioning waits (events.h), or NULL. */
	struct dtn_events *events;
};

/*
 * Fill c from the profile: the key, the URL and the region from the
 * variables the profile names (api_key_env, api_url_env, target_env) or
 * from DAYTONA_API_KEY, DAYTONA_API_URL, DAYTONA_TARGET; a literal
 * `target` wins over the variable.  SG_E_PERMISSION when there is no key
 * (the sentence names the variable, never a value); SG_E_INVALID_ARGUMENT
 * for a URL that is not http(s).  On failure c holds nothing.
 */
sg_err dtn_client_init(struct dtn_client *c, const struct sg_profile *p,
		       struct sg_errinfo *err) SG_MUST_CHECK;
void dtn_client_release(struct dtn_client *c);

/* One call's outcome: the status and the body parsed as JSON (or NULL). */
struct dtn_reply {
	long status;
	json_t *json; /* new reference, or NULL when the body was not JSON */
	char *text;   /* the raw body (new), NUL-terminated */
	size_t len;
	int64_t retry_after_ms; /* what the reply asked to wait, or -1 */
	/*
	 * The request was handed to the transport: whatever failed after
	 * this, the server may have received and carried it out.
	 */
	bool sent;
};
void dtn_reply_release(struct dtn_reply *r);

/* How one call is made; zero fields take defaults. */
struct dtn_call {
	const char *method;   /* "GET" when NULL */
	const char *url;      /* absolute */
	json_t *body;         /* borrowed; sent as application/json */
	const struct sg_http_part *parts; /* or a multipart body */
	size_t nparts;
	bool idempotent;      /* a POST that may be sent twice */
	bool no_retry;        /* one try only (the caller retries itself) */
	bool skip_activity;   /* X-Daytona-Skip-Last-Activity-Update */
	int64_t timeout_ms;   /* 0: SG_DAYTONA_CALL_MS */
	size_t max_body;      /* 0: SG_DAYTONA_REPLY_MAX */
	const char *what;     /* for sentences: "creating the sandbox" */
};

/*
 * Make the call.  SG_OK when a response arrived, whatever its status (the
 * caller decides; dtn_fail writes the sentence); otherwise the transport's
 * code with a sentence naming what was being done and the host.
 * out is reset on entry and must be released by the caller.
 */
sg_err dtn_do(const struct dtn_client *c, const struct dtn_call *call,
	      struct dtn_reply *out, struct sg_cancel *cancel,
	      struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * Record on err the failure a non-2xx reply means: "<what> failed: Daytona
 * answered HTTP <status>: <its message>", the message clipped and with the
 * API key removed; returns the code (404 SG_E_NOT_FOUND, 401/403
 * SG_E_PERMISSION, 408/429/502-504 SG_E_UNAVAILABLE, others
 * SG_E_PROVIDER, or code when it is not SG_OK).
 */
sg_err dtn_fail(const struct dtn_client *c, const char *what,
		const struct dtn_reply *r, sg_err code, struct sg_errinfo *err);

/* The provider's message of a reply, scrubbed and clipped, into out. */
void dtn_message(const struct dtn_client *c, const struct dtn_reply *r,
		 char *out, size_t n);

/* "<api>/sandbox/<idOrName><suffix>" (new), or NULL. */
char *dtn_sandbox_url(const struct dtn_client *c, const char *id,
		      const char *suffix);

/* A string member of a JSON object, or NULL. */
const char *dtn_str(const json_t *o, const char *key);

/*
 * When a sandbox DTO (may be NULL) was last changed: its updatedAt (ISO
 * 8601, as Daytona writes it: 2026-11-29T08:24:52.905Z) in milliseconds
 * since the epoch, or -1 when it has none that reads as such a time.
 */
int64_t dtn_updated_ms(const json_t *dto);

/*
 * Was sandbox DTO a last changed before b (either may be NULL)?  Only when
 * both say when: a DTO without a readable time is never judged older.
 */
bool dtn_older(const json_t *a, const json_t *b);

#endif
