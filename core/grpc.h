/*
 * grpc.h - gRPC calls (unary and server streaming) over libcurl's HTTP/2.
 *
 * A channel is one target (scheme, host, port); a call is one blocking
 * request on the caller's thread, on the thread's kept curl easy and multi
 * handle (sg_http_curl_get, shared with http.c's requests on that
 * thread), waited on with curl_multi_poll together with the cancel
 * token's eventfd, exactly as http.c does.  Messages are opaque bytes
 * here: encoding them (protobuf-c) is the caller's business.
 *
 * Invariants:
 *  - TLS peers are always verified (a test passes its own CA file).
 *    http:// means cleartext HTTP/2 with prior knowledge (h2c), which only
 *    loopback fakes speak; https:// must negotiate h2 by ALPN, and a server
 *    that falls back to HTTP/1.1 fails the call.
 *  - After a call, res->status always holds a gRPC status code: the one
 *    the server sent (res->from_server), or one made up for what happened
 *    locally, following the gRPC HTTP/2 mapping: a transport failure is
 *    UNAVAILABLE, the call's own deadline DEADLINE_EXCEEDED, the cancel
 *    token CANCELLED, a non-200 HTTP status its mapped code, and a 200
 *    without a grpc-status trailer (libcurl 7.88.1 can lose trailers that
 *    arrive with a GOAWAY) UNAVAILABLE: never OK.
 *  - grpc-status wins over a curl error: a trailers-only reply that races
 *    the request body (curl error 92 in 7.88.1) keeps the server's code.
 *    A trailers-only reply ends the transfer as soon as its header block
 *    is in, and closes its connection: 7.88.1 would otherwise send the
 *    request's DATA on the closed stream and wait for the call's
 *    deadline.
 *  - Memory is bounded: one response message is at most call->max_msg
 *    bytes (RESOURCE_EXHAUSTED beyond); a unary reply is kept in res->msg,
 *    a stream's messages are handed to the callback one at a time as they
 *    arrive and never accumulated.
 *  - A sentence this module writes names the method and the host, never
 *    metadata (tokens travel there) or message bytes.  The server's
 *    grpc-message is kept, percent-decoded and clipped, on the result.
 *  - Connections: calls share the toolkit's connection pool (one h2c or
 *    TLS connection serves one call at a time per thread; libcurl does not
 *    multiplex across threads' multi handles).  libcurl before 8.0.0 fails
 *    a call on a reused h2c connection opened with prior knowledge (curl
 *    issue 10634): there a call asks for plain HTTP/2 when the channel
 *    knows an idle h2c connection of its own is pooled, and with prior
 *    knowledge on a fresh connection otherwise; a plain HTTP/2 call that
 *    finds none sends an HTTP/1.1 upgrade, which a gRPC server (h2c is
 *    only for loopback fakes) refuses before running anything, and is made
 *    again with prior knowledge.  A channel closes its connection after
 *    every SG_GRPC_RECYCLE_CALLS calls, because 7.88.1 sends an RST_STREAM
 *    after each call and HTTP/2 servers with a rapid-reset limit (nghttp2,
 *    Node) send GOAWAY after about a thousand.  A cancelled or timed-out
 *    call closes its connection, so the server learns of it at once.
 *  - Thread-safe: a channel may be used by any number of threads at once.
 */
#ifndef SG_GRPC_H
#define SG_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/cancel.h"
#include "base/err.h"
#include "base/limits.h"

/* The gRPC status codes (grpc/doc/statuscodes.md). */
enum sg_grpc_code {
	SG_GRPC_OK = 0,
	SG_GRPC_CANCELLED = 1,
	SG_GRPC_UNKNOWN = 2,
	SG_GRPC_INVALID_ARGUMENT = 3,
	SG_GRPC_DEADLINE_EXCEEDED = 4,
	SG_GRPC_NOT_FOUND = 5,
	SG_GRPC_ALREADY_EXISTS = 6,
	SG_GRPC_PERMISSION_DENIED = 7,
	SG_GRPC_RESOURCE_EXHAUSTED = 8,
	SG_GRPC_FAILED_PRECONDITION = 9,
	SG_GRPC_ABORTED = 10,
	SG_GRPC_OUT_OF_RANGE = 11,
	SG_GRPC_UNIMPLEMENTED = 12,
	SG_GRPC_INTERNAL = 13,
	SG_GRPC_UNAVAILABLE = 14,
	SG_GRPC_DATA_LOSS = 15,
	SG_GRPC_UNAUTHENTICATED = 16,
};

/* The canonical name of a code ("UNAVAILABLE"), "CODE_<n>" past the table. */
const char *sg_grpc_code_name(int code);

/* An opaque channel; new with sg_grpc_channel_new, freed by its owner. */
struct sg_grpc_channel;

/*
 * A channel to url, "http://host:port" (h2c) or "https://host[:port]"; a
 * path is refused.  ca_file (PEM, may be NULL: the system's store) is
 * copied.  *out is new, freed with sg_grpc_channel_free.
 */
sg_err sg_grpc_channel_new(const char *url, const char *ca_file,
			   struct sg_grpc_channel **out,
			   struct sg_errinfo *err) SG_MUST_CHECK;
void sg_grpc_channel_free(struct sg_grpc_channel *ch);

/* What a channel has done so far (benchmarks count requests with it). */
struct sg_grpc_stats {
	uint64_t calls;       /* HTTP/2 requests sent, retries included */
	uint64_t connections; /* TCP connections opened for them */
};
void sg_grpc_channel_stats(const struct sg_grpc_channel *ch,
			   struct sg_grpc_stats *out);

/*
 * One message of a server stream, as soon as it has arrived whole.  data
 * is borrowed for the callback only.  Return SG_OK to go on, or an error
 * code to end the call, which then returns that code (with the stream
 * closed, so the server sees the cancel).  Called on the caller's thread.
 */
typedef sg_err (*sg_grpc_msg_cb)(const uint8_t *data, size_t len,
				 void *payload);

/*
 * A call.  Everything is borrowed for its duration; zero is the default
 * for every field.
 */
struct sg_grpc_call {
	const char *method; /* "/package.Service/Method" */
	/* NULL-terminated "name: value" lines, names in lower case. */
	const char *const *metadata;
	const void *req; /* the one request message, serialised */
	size_t req_len;
	/*
	 * The deadline, relative to the start of the call (0: none; the cancel
	 * token still bounds it).  Enforced here; also sent to the server as
	 * grpc-timeout when send_timeout is set (Modal's clients never send
	 * it, and a server that honours it ends the call itself).
	 */
	int64_t timeout_ms;
	bool send_timeout;
	size_t max_msg; /* one response message, at most; 0: SG_GRPC_MSG_MAX */
	/* A server stream: each message to on_msg.  NULL: a unary call. */
	sg_grpc_msg_cb on_msg;
	void *payload;
};

/* What came back.  Init once; every call resets it. */
struct sg_grpc_result {
	int status;        /* a gRPC code, always set by a call */
	bool from_server;  /* status came in grpc-status, not made up here */
	bool responded;    /* response headers arrived: the server saw the call */
	long http_status;  /* 0 when no status line arrived */
	uint64_t messages; /* response messages received */
	int attempts;      /* requests sent, retries included */
	char message[SG_ERR_MSG]; /* grpc-message, percent-decoded, clipped */
	struct sg_buf msg; /* a unary call's reply message */
};
void sg_grpc_result_init(struct sg_grpc_result *res);
void sg_grpc_result_release(struct sg_grpc_result *res);

/*
 * Make the call and wait for its status.  Returns SG_OK when the status is
 * OK, else the code it means, with a sentence naming the method, the host,
 * the status and the server's message:
 *   NOT_FOUND                          SG_E_NOT_FOUND
 *   PERMISSION_DENIED, UNAUTHENTICATED SG_E_PERMISSION
 *   DEADLINE_EXCEEDED                  SG_E_TIMEOUT
 *   UNAVAILABLE, RESOURCE_EXHAUSTED    SG_E_UNAVAILABLE
 *   CANCELLED by the token             the token's reason
 *   a message over max_msg             SG_E_TOO_LARGE
 *   the callback's error               that error
 *   a malformed call or URL            SG_E_INVALID_ARGUMENT
 *   anything else                      SG_E_PROVIDER
 * res->status tells the codes apart (ALREADY_EXISTS ...).
 */
sg_err sg_grpc_invoke(struct sg_grpc_channel *ch,
		      const struct sg_grpc_call *call,
		      struct sg_grpc_result *res, struct sg_cancel *cancel,
		      struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * How sg_grpc_invoke_retry retries: at most `retries` more tries after the
 * first, waiting base_ms, then twice that each time, up to max_delay_ms,
 * and only on the codes in `codes` (a bit per code, SG_GRPC_BIT).  A
 * stream is never retried once a message reached the callback.  With
 * idempotency_key set, every try carries the metadata Modal's clients
 * send so that the server can tell a retry from a new call:
 * "x-idempotency-key" (the same value on every try), "x-retry-attempt"
 * (0 on the first) and "x-retry-delay" (seconds waited before this try).
 */
#define SG_GRPC_BIT(code) (1u << (code))
struct sg_grpc_retry {
	int retries;
	int64_t base_ms;
	int64_t max_delay_ms;
	uint32_t codes;
	const char *idempotency_key; /* NULL: no retry metadata */
};

/* The codes and backoff Modal's own clients retry with (libmodal). */
extern const struct sg_grpc_retry sg_grpc_retry_modal;

sg_err sg_grpc_invoke_retry(struct sg_grpc_channel *ch,
			    const struct sg_grpc_call *call,
			    const struct sg_grpc_retry *policy,
			    struct sg_grpc_result *res,
			    struct sg_cancel *cancel,
			    struct sg_errinfo *err) SG_MUST_CHECK;

/* A random UUID (version 4) into out, 37 bytes with the terminator. */
void sg_grpc_uuid(char out[37]);

#endif
