/*
 * http.h - cancellable HTTP for adapters, on libcurl.
 *
 * One request is one blocking call on the caller's thread: its own curl
 * easy handle on its own multi handle, waited on with curl_multi_poll
 * together with the cancel token's eventfd, so sg_cancel_fire() from any
 * thread ends the wait at once.  Requests that may travel on a kept
 * connection (idempotent ones, and those marked resend_safe) share one
 * pool of connections, so consecutive calls to a provider pay no TCP or
 * TLS set-up; every other request opens and closes its own.
 *
 * Invariants:
 *  - TLS peers are always verified.  There is no switch to turn that off;
 *    tests point ca_file at their own CA instead.
 *  - Only http and https; redirects are never followed (a redirect would
 *    carry the request's headers, credentials included, elsewhere): a 3xx
 *    is returned as a status like any other.
 *  - A sentence this module writes names the method and the host (with
 *    its port), never the path, the query, a header or the body, because
 *    credentials travel in headers and sometimes in URLs.
 *  - HTTP statuses are results, not errors: sg_http_do returns SG_OK for a
 *    404 and the adapter decides (sg_http_status_err helps).  Errors are
 *    for the transport, the limits and the cancel token.
 *  - Memory is bounded: a response body is kept in the response's sg_buf
 *    (its max: SG_E_TOO_LARGE beyond) unless the request streams it to a
 *    sink; response headers are kept up to SG_HTTP_HEADERS_MAX bytes.
 *  - A request can be sent again byte for byte (bodies from memory, or
 *    from seekable files read with pread at fixed offsets), which is what
 *    lets sg_http_do_retry repeat it.
 *  - Thread-safe: curl is initialised once (pthread_once); requests share
 *    only the pool of kept connections (and DNS answers, TLS sessions),
 *    which curl locks.
 */
#ifndef SG_HTTP_H
#define SG_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/cancel.h"
#include "base/err.h"
#include "base/limits.h"

/*
 * Bytes from a file: len bytes from offset, read with pread so the request
 * can be repeated.  len < 0 means "to the end of the file", which must then
 * be a regular file.  The fd is borrowed and must stay open (and the file
 * unchanged) for the whole call; a pipe is refused with
 * SG_E_INVALID_ARGUMENT.
 */
struct sg_http_source {
	int fd;
	int64_t offset;
	int64_t len;
};

/*
 * One part of a multipart/form-data body (Daytona's uploads).  The data
 * comes from memory (data, len) or, when file is set, from a file.
 * filename and content_type may be NULL (a plain form field).  Everything
 * is borrowed for the call.
 */
struct sg_http_part {
	const char *name;
	const char *filename;
	const char *content_type;
	const void *data;
	size_t len;
	const struct sg_http_source *file;
};

/*
 * Where a streamed 2xx body goes, as it arrives (NDJSON logs, downloads),
 * in pieces of any size (a line may be split).  Return SG_OK to go on, or
 * an error code to abort the request, which then returns that code; a
 * sentence the sink records on the same struct sg_errinfo the caller gave
 * sg_http_do (through payload) is kept, since the first failure wins.
 * Called only from inside sg_http_do, on its thread.
 */
typedef sg_err (*sg_http_sink_cb)(const char *data, size_t len,
				  void *payload);

enum sg_http_version {
	SG_HTTP_DEFAULT = 0,    /* curl's choice: h2 by ALPN for https */
	SG_HTTP_1_1,            /* HTTP/1.1 only */
	SG_HTTP_2,              /* h2 by ALPN over TLS; 1.1 for http:// */
	SG_HTTP_2_PRIOR,        /* h2 without negotiation (h2c, gRPC fakes) */
};

/*
 * A request.  Everything is borrowed for the duration of the call.  Zero
 * means "default" for every field, so designated initialisers are enough:
 *
 *	struct sg_http_request req = { .method = "GET", .url = url,
 *				       .headers = hdrs };
 */
struct sg_http_request {
	const char *method;  /* "GET" (NULL), "POST", "PUT", "DELETE" ... */
	const char *url;     /* http:// or https:// */
	/* NULL-terminated "Name: value" lines; "Name:" removes curl's own. */
	const char *const *headers;
	const char *content_type; /* shorthand for a Content-Type header */

	/*
	 * The body: at most one of body (len bytes, may be empty), body_file
	 * and parts.  POST, PUT and PATCH always send one (empty when none
	 * is given), with a Content-Length.
	 */
	const void *body;
	size_t body_len;
	const struct sg_http_source *body_file;
	const struct sg_http_part *parts;
	size_t nparts;

	int64_t timeout_ms;         /* whole request; 0: none (cancel bounds it) */
	int64_t connect_timeout_ms; /* 0: SG_HTTP_CONNECT_TIMEOUT_MS */
	enum sg_http_version version;
	const char *ca_file;        /* PEM CA bundle instead of the system's */
	/*
	 * Connect to this unix socket instead of the URL's host (the Docker
	 * Engine API): the URL still gives the path, and its host the Host
	 * header.  NULL: TCP.
	 */
	const char *unix_socket;

	/*
	 * Stream 2xx bodies to sink instead of the response's buffer; other
	 * statuses' bodies still go to the buffer, clipped (they are error
	 * messages).  Init the response with SG_HTTP_ERROR_BODY then.
	 */
	sg_http_sink_cb sink;
	void *sink_payload;

	/*
	 * POST or PATCH that is safe to send twice (a unique name, an
	 * idempotency key): sg_http_do_retry may repeat it.
	 */
	bool idempotent;
	/*
	 * A request that is not idempotent but whose copy the server treats
	 * as the first (an sg-helper job's start, which an exclusive file
	 * turns into an attach): it may travel on a kept connection.  curl
	 * sends a request again, on a fresh connection, when a kept one ends
	 * before any byte of the reply came back; nothing else is repeated
	 * (sg_http_do_retry still treats it as not idempotent).
	 */
	bool resend_safe;
};

/*
 * A response: the last one received (a 100 Continue is forgotten).
 * Use the functions to read headers; status, version, body and the rest
 * may be read directly.
 */
struct sg_http_response {
	long status;        /* 0 when no status line arrived */
	int version;        /* 1 or 2: the HTTP version used; 0 if none */
	struct sg_buf body; /* the body, or the non-2xx body with a sink */
	bool body_clipped;  /* a non-2xx body did not fit */
	uint64_t sunk;      /* bytes handed to the request's sink */
	int attempts;       /* requests sent, retries included */
	char primary_ip[64]; /* the address connected to, "" if none */
	struct sg_buf headers; /* private: "name\0value\0" pairs */
};

/* Prepare r with a body bound; release with sg_http_response_release. */
void sg_http_response_init(struct sg_http_response *r, size_t max_body);
void sg_http_response_release(struct sg_http_response *r);

/*
 * The value of the response header called name (any case), or NULL.  When
 * a header comes more than once the last wins (HTTP/2 trailers, such as
 * grpc-status, arrive after the headers and are found the same way).
 * Borrowed from r: valid until r is reused or released.
 */
const char *sg_http_header(const struct sg_http_response *r,
			   const char *name);

/*
 * Walk the response headers in order: start with *pos = 0; returns false
 * after the last.  name and value are borrowed from r.
 */
bool sg_http_header_next(const struct sg_http_response *r, size_t *pos,
			 const char **name, const char **value);

/*
 * Send req and wait for the whole response (or for the sink to have seen
 * the whole body).  r is reset on entry and must have been initialised.
 *
 * Returns SG_OK when a response arrived, whatever its status; otherwise:
 *   SG_E_INVALID_ARGUMENT  a malformed request (bad URL, unseekable file)
 *   SG_E_UNAVAILABLE       could not resolve, connect, send or receive;
 *                          the connection dropped; TLS handshake failed
 *   SG_E_TIMEOUT           timeout_ms passed
 *   SG_E_TOO_LARGE         the body passed r->body's max
 *   SG_E_PROVIDER          any other failure of the exchange (a bad
 *                          certificate, a malformed response)
 *   the sink's code, or the cancel token's reason.
 * The sentence on err names the method and host only.
 */
sg_err sg_http_do(const struct sg_http_request *req,
		  struct sg_http_response *r, struct sg_cancel *cancel,
		  struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * How sg_http_do_retry retries.  Zero fields take the defaults above.
 * The wait before try n+1 is min(max_delay_ms, base_ms * 2^(n-1)), with
 * "equal jitter" (between half and all of it), unless the response said
 * Retry-After: then exactly that, and a Retry-After longer than
 * max_delay_ms ends the retries (the last response is returned).
 */
struct sg_http_retry {
	int attempts;         /* tries in all (1: no retry) */
	int64_t base_ms;
	int64_t max_delay_ms;
	int64_t max_total_ms; /* no new try would start after this; 0: none */
};

/*
 * sg_http_do, repeated on 5xx, 429 and SG_E_UNAVAILABLE, waiting with
 * sg_cancel_sleep between tries.  A request that is not idempotent (POST
 * and PATCH unless req->idempotent) is repeated only when the connection
 * was never made (resolve or connect failed), because then the server
 * cannot have seen it.  Nothing is repeated once bytes reached the sink.
 * 408 is not retried: providers use it for "your command timed out".
 * policy NULL: the defaults.  Returns what the last try returned;
 * r->attempts counts the tries.
 */
sg_err sg_http_do_retry(const struct sg_http_request *req,
			struct sg_http_response *r,
			const struct sg_http_retry *policy,
			struct sg_cancel *cancel, struct sg_errinfo *err)
	SG_MUST_CHECK;

/*
 * Free the calling thread's kept curl handles (and so its kept
 * connections) now rather than when the thread ends.  A thread whose end
 * nobody waits for (a detached worker) calls it before it reports itself
 * gone, so the process never exits while they are half freed.  The next
 * request on this thread simply makes new ones.
 */
void sg_http_thread_end(void);

/*
 * How long the response asks the client to wait, in milliseconds, from
 * Retry-After (delta-seconds or an HTTP date) or Daytona's
 * Retry-After-<throttler> headers (the longest); -1 when none says.
 */
int64_t sg_http_retry_after_ms(const struct sg_http_response *r);

/*
 * The error code a status means, for adapters that turn statuses into
 * failures: 2xx SG_OK; 404 SG_E_NOT_FOUND; 401, 403 SG_E_PERMISSION; 408,
 * 429, 502, 503, 504 SG_E_UNAVAILABLE; anything else SG_E_PROVIDER.
 */
sg_err sg_http_status_err(long status);

/*
 * Record on err the failure a response's status means, as
 * "<METHOD> <host> answered HTTP <status>", and return its code
 * (sg_http_status_err).  The body is not quoted: providers echo request
 * fields in error bodies, and those may be secrets.  Adapters that know
 * their provider's error shape write their own sentence instead.
 */
sg_err sg_http_status_fail(const struct sg_http_request *req,
			   const struct sg_http_response *r,
			   struct sg_errinfo *err);

/*
 * A ready-made sink writing to a file descriptor, at most max bytes
 * (SG_E_TOO_LARGE beyond); payload is a struct sg_http_fd_sink.
 */
struct sg_http_fd_sink {
	int fd;
	uint64_t max;
	uint64_t written;
};
sg_err sg_http_sink_fd(const char *data, size_t len, void *payload);

/*
 * For the toolkit's other libcurl users (grpc.c), so that there is one
 * initialisation and one connection pool per process.
 * sg_http_curl_init: curl initialised (once); SG_OK or SG_E_INTERNAL.
 * sg_http_curl_share: the pool of connections, DNS answers and TLS
 * sessions (a CURLSH, which curl.h makes a void), or NULL when curl could not make one; valid after
 * a successful sg_http_curl_init, for the life of the process.
 * sg_http_url_host: "host" or "host:port" of an http(s) URL into out, and
 * whether it is one (the rest of a URL may carry secrets).
 */
sg_err sg_http_curl_init(void) SG_MUST_CHECK;

/*
 * The options every libcurl transfer of the toolkit sets alike (http.c,
 * grpc.c), on the easy handle `easy` (a CURL *): the URL, http and https
 * only, no redirects, no signals, the error buffer (CURL_ERROR_SIZE
 * bytes), the user agent, the header and body callbacks with their
 * payload, the connect timeout, TCP keep-alive, the CA file when given,
 * and the header list (a struct curl_slist *).  SG_E_INTERNAL when
 * libcurl refuses one: a silently ignored option (say, the CA file) would
 * change what the request means.
 */
struct sg_http_curl_opts {
	const char *url;
	char *errbuf;
	const char *agent;
	size_t (*on_header)(char *data, size_t size, size_t nitems, void *payload);
	size_t (*on_body)(char *data, size_t size, size_t nitems, void *payload);
	void *payload;
	int64_t connect_timeout_ms;
	const char *ca_file; /* NULL: the system's */
	void *headers;
	const char *unix_socket; /* NULL: TCP */
};
sg_err sg_http_curl_common(void *easy, const struct sg_http_curl_opts *o) SG_MUST_CHECK;
void *sg_http_curl_share(void);

/*
 * The calling thread's kept pair of curl handles for one transfer: an
 * easy handle (on the pool when shared) and a multi handle to run it in,
 * made once per thread and kind, so that a request pays for neither
 * handle's set-up (a multi handle is a socket pair and four fcntl calls,
 * an easy one a few kilobytes to fill).  When the thread cannot keep any
 * (no key, or out of memory for it), new ones; kept says which.  false:
 * out of memory, *h is empty.  A thread runs one transfer at a time on
 * them: no callback of a transfer may start another on the same thread.
 * sg_http_curl_put gives them back once the easy handle is out of the
 * multi handle: a kept easy handle forgets every option (curl_easy_reset,
 * which keeps its share), new ones are freed.
 */
struct sg_http_curl_pair {
	void *easy;  /* CURL * */
	void *multi; /* CURLM * */
	bool kept;
};
bool sg_http_curl_get(struct sg_http_curl_pair *h, bool shared) SG_MUST_CHECK;
void sg_http_curl_put(struct sg_http_curl_pair *h);
bool sg_http_url_host(const char *url, char *out, size_t n);

/*
 * One line from curl's header callback (CR LF and all): a status line
 * ("HTTP/2 200 ", status set), a field (name and value, borrowed from
 * data, without the spaces around them), the blank line that ends the
 * headers, or anything else (a folded continuation).  libcurl 7.88.1
 * hands HTTP/2 trailers over as fields after the blank line.
 */
enum sg_http_line {
	SG_HTTP_LINE_BLANK,
	SG_HTTP_LINE_STATUS,
	SG_HTTP_LINE_FIELD,
	SG_HTTP_LINE_OTHER,
};
struct sg_http_hline {
	long status;
	const char *name, *value;
	size_t nlen, vlen;
};
enum sg_http_line sg_http_parse_line(const char *data, size_t len,
				     struct sg_http_hline *out);

#endif
