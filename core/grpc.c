/*
 * grpc.c - gRPC over libcurl's HTTP/2 (see grpc.h for the contract).
 *
 * A request is a POST of one length-prefixed message (a flag byte, four
 * bytes of big-endian length, the bytes) to /package.Service/Method.  The
 * reply is the same framing in DATA frames, then the status in trailers;
 * or, for an error before any message, one HEADERS frame that carries the
 * status itself ("trailers-only").  libcurl 7.88.1 hands trailers to the
 * header callback like headers, so a name arriving after the blank line is
 * a trailer; grpc-status and grpc-message are taken wherever they come,
 * the last one winning.  The workarounds for that libcurl's HTTP/2 bugs
 * are explained where they are applied.
 */
#include "core/grpc.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

#include "core/http.h"
#include "sg_config.h"

/* How long one curl_multi_poll may sleep; curl shortens it to its timers. */
#define GRPC_POLL_MS 1000

struct sg_grpc_channel {
	char base[SG_GRPC_URL_MAX]; /* scheme://host[:port], no path */
	char host[SG_GRPC_URL_MAX]; /* host[:port], for sentences */
	bool h2c;
	/*
	 * h2c on a libcurl before 8.0.0 with the toolkit's pool: such a
	 * libcurl fails every call on a reused connection that was asked for
	 * with prior knowledge (curl issue 10634), but reuses a live h2c
	 * connection for a call that asks for plain HTTP/2.  h2c_idle counts
	 * the connections this channel opened that are believed idle in the
	 * pool: a call takes one if there is one and asks for plain HTTP/2,
	 * else it opens a fresh one with prior knowledge (conn_mode), and a
	 * call that leaves its connection healthy gives one back.  A count,
	 * not a flag, because libcurl does not share a connection between the
	 * multi handles of two threads: a call that found the only connection
	 * busy would open one of its own.  Wrong either way it costs a
	 * connection, never a call: no prior-knowledge call meets a reused
	 * connection, and a plain HTTP/2 call that finds none (the server or
	 * the pool closed it) fails before the server runs anything and is
	 * made again with prior knowledge.
	 */
	bool h2c_legacy;
	atomic_int h2c_idle;
	char *ca_file;
	atomic_uint_fast64_t calls;
	atomic_uint_fast64_t connections;
};

static const char *const code_names[] = {
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
	"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED",
	"RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
	"UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
	"UNAUTHENTICATED",
};

const char *sg_grpc_code_name(int code)
{
	if (code >= 0 && (size_t)code < sizeof(code_names) / sizeof(code_names[0]))
		return code_names[code];
	return "CODE_UNKNOWN";
}

/*
 * libmodal retries these codes three times, 100 ms apart and doubling up
 * to a second (cloud-apis notes; modal-js's retry interceptor).
 */
const struct sg_grpc_retry sg_grpc_retry_modal = {
	.retries = 3,
	.base_ms = 100,
	.max_delay_ms = 1000,
	.codes = SG_GRPC_BIT(SG_GRPC_DEADLINE_EXCEEDED) |
		 SG_GRPC_BIT(SG_GRPC_UNAVAILABLE) |
		 SG_GRPC_BIT(SG_GRPC_CANCELLED) |
		 SG_GRPC_BIT(SG_GRPC_INTERNAL) | SG_GRPC_BIT(SG_GRPC_UNKNOWN),
};

/* ---- Channels ----------------------------------------------------------- */

sg_err sg_grpc_channel_new(const char *url, const char *ca_file,
			   struct sg_grpc_channel **out,
			   struct sg_errinfo *err)
{
	struct sg_grpc_channel *ch = NULL;
	CURLU *u = NULL;
	char *path = NULL, *query = NULL, *user = NULL;
	bool h2c;
	sg_err rc = SG_OK;

	*out = NULL;
	if (sg_http_curl_init() != SG_OK)
		return sg_err_set(err, SG_E_INTERNAL, "libcurl did not initialise");
	if (!url || (strncmp(url, "http://", 7) != 0 &&
		     strncmp(url, "https://", 8) != 0))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "a gRPC server URL must start with http:// or "
				  "https://");
	h2c = url[4] == ':';
	ch = calloc(1, sizeof(*ch));
	u = curl_url();
	if (!ch || !u) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (!sg_http_url_host(url, ch->host, sizeof(ch->host)) ||
	    curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK) {
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT,
				"the gRPC server URL is malformed");
		goto out;
	}
	/* Credentials in a URL would be sent to wherever it points; refuse. */
	curl_url_get(u, CURLUPART_PATH, &path, 0);
	curl_url_get(u, CURLUPART_QUERY, &query, 0);
	curl_url_get(u, CURLUPART_USER, &user, 0);
	if ((path && strcmp(path, "/") != 0) || query || user) {
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT,
				"a gRPC server URL is a scheme, a host and a "
				"port, without a path, a query or a user");
		goto out;
	}
	if (snprintf(ch->base, sizeof(ch->base), "%s://%s",
		     h2c ? "http" : "https", ch->host) >= (int)sizeof(ch->base)) {
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT,
				"the gRPC server URL is too long");
		goto out;
	}
	ch->h2c = h2c;
	ch->h2c_legacy = h2c && sg_http_curl_share() &&
			 curl_version_info(CURLVERSION_NOW)->version_num < 0x080000;
	atomic_init(&ch->h2c_idle, 0);
	if (ca_file) {
		ch->ca_file = strdup(ca_file);
		if (!ch->ca_file) {
			rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
			goto out;
		}
	}
	atomic_init(&ch->calls, 0);
	atomic_init(&ch->connections, 0);
	*out = ch;
	ch = NULL;
out:
	curl_free(path);
	curl_free(query);
	curl_free(user);
	curl_url_cleanup(u);
	sg_grpc_channel_free(ch);
	return rc;
}

void sg_grpc_channel_free(struct sg_grpc_channel *ch)
{
	if (!ch)
		return;
	free(ch->ca_file);
	free(ch);
}

void sg_grpc_channel_stats(const struct sg_grpc_channel *ch,
			   struct sg_grpc_stats *out)
{
	out->calls = atomic_load(&ch->calls);
	out->connections = atomic_load(&ch->connections);
}


static void result_reset(struct sg_grpc_result *res, size_t max_msg)
{
	res->status = SG_GRPC_UNKNOWN;
	res->from_server = false;
	res->responded = false;
	res->http_status = 0;
	res->messages = 0;
	res->message[0] = '\0';
	sg_buf_reset(&res->msg);
	res->msg.max = max_msg;
}

void sg_grpc_result_init(struct sg_grpc_result *res)
{
	sg_buf_init(&res->msg, SG_GRPC_MSG_MAX);
	result_reset(res, SG_GRPC_MSG_MAX);
	res->attempts = 0;
}

void sg_grpc_result_release(struct sg_grpc_result *res)
{
	sg_buf_release(&res->msg);
}


/* ---- One transfer ------------------------------------------------------- */

/* The state of one call, shared with curl's callbacks. */
struct xfer {
	const struct sg_grpc_call *call;
	struct sg_grpc_result *res;
	CURL *easy;
	size_t max_msg;
	bool past_headers; /* the blank line came: what follows is trailers */
	bool grpc_body;    /* a 200 with an application/grpc content type */
	bool ctype_seen;   /* the reply's content-type has been seen */
	int status;        /* grpc-status, -1 until one arrives */
	uint8_t prefix[5]; /* the frame prefix being read */
	size_t prefix_len;
	uint64_t want;     /* bytes of the current message still to come */
	bool in_msg;
	struct sg_buf frame; /* a stream message being assembled */
	bool closing;        /* the connection is closed after this call */
	sg_err abort_rc;     /* why a callback stopped the transfer */
	int abort_status;    /* the gRPC status that stop means */
	char abort_why[128];
	char errbuf[CURL_ERROR_SIZE];
};

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* grpc-message is percent-encoded (gRPC's HTTP/2 spec); decode, clip. */
static void decode_message(const char *v, size_t n, char *out, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < n && o + 1 < cap; i++) {
		unsigned char c = (unsigned char)v[i];
		int hi, lo;

		if (c == '%' && i + 2 < n &&
		    (hi = hexval(v[i + 1])) >= 0 &&
		    (lo = hexval(v[i + 2])) >= 0) {
			c = (unsigned char)(hi * 16 + lo);
			i += 2;
		}
		/* A sentence is one line: no control characters from afar. */
		out[o++] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
	}
	out[o] = '\0';
}

static bool name_is(const char *data, size_t nlen, const char *name)
{
	return strlen(name) == nlen && strncasecmp(data, name, nlen) == 0;
}

/* The transfer's connection is closed once it ends, never pooled again. */
static void close_behind(struct xfer *x)
{
	x->closing = true;
	curl_easy_setopt(x->easy, CURLOPT_FORBID_REUSE, 1L);
}

static size_t on_header(char *data, size_t size, size_t nitems, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * nitems;
	struct sg_http_hline h;

	switch (sg_http_parse_line(data, len, &h)) {
	case SG_HTTP_LINE_STATUS:
		x->res->http_status = h.status;
		x->res->responded = true;
		x->past_headers = false;
		x->grpc_body = false;
		x->ctype_seen = false;
		return len;
	case SG_HTTP_LINE_BLANK:
		/*
		 * A trailers-only reply (grpc-status in the first header
		 * block) ends the call.  It can come between the request's
		 * HEADERS and its DATA, and libcurl 7.88.1 then sends the DATA
		 * on the closed stream and waits for the call's deadline (a
		 * minute; seen under load on every injected error).  So the
		 * transfer ends here, its connection closed behind it, and the
		 * server's status stands (final_status).
		 */
		if (!x->past_headers && x->status >= 0) {
			x->past_headers = true;
			close_behind(x);
			return 0;
		}
		x->past_headers = true;
		return len;
	case SG_HTTP_LINE_FIELD:
		break;
	default:
		return len;
	}
	if (name_is(h.name, h.nlen, "grpc-status")) {
		int st = 0;
		const char *p = h.value, *end = h.value + h.vlen;

		for (; p < end && *p >= '0' && *p <= '9' && st < 1000; p++)
			st = st * 10 + (*p - '0');
		/* A malformed status is no status: the call did not end well. */
		x->status = (p == h.value || p != end) ? SG_GRPC_UNKNOWN : st;
	} else if (name_is(h.name, h.nlen, "grpc-message")) {
		decode_message(h.value, h.vlen, x->res->message,
			       sizeof(x->res->message));
	} else if (!x->past_headers && name_is(h.name, h.nlen, "content-type")) {
		x->ctype_seen = true;
		x->grpc_body = x->res->http_status == 200 && h.vlen >= 16 &&
			       strncasecmp(h.value, "application/grpc", 16) == 0;
	}
	return len;
}

/* Stop the transfer from a callback, closing its connection. */
static size_t stop(struct xfer *x, sg_err rc, int status, const char *why)
{
	x->abort_rc = rc;
	x->abort_status = status;
	snprintf(x->abort_why, sizeof(x->abort_why), "%s", why);
	close_behind(x);
	return 0;
}

/* One whole message: the unary reply, or the next of a stream. */
static size_t deliver(struct xfer *x)
{
	sg_err rc;

	x->res->messages++;
	if (!x->call->on_msg) {
		if (x->res->messages > 1)
			return stop(x, SG_E_PROVIDER, SG_GRPC_INTERNAL,
				    "a unary reply carried more than one message");
		return 1;
	}
	rc = x->call->on_msg((const uint8_t *)x->frame.p, x->frame.len,
			     x->call->payload);
	sg_buf_reset(&x->frame);
	if (rc)
		return stop(x, rc, SG_GRPC_CANCELLED, "");
	return 1;
}

static size_t on_body(char *data, size_t size, size_t nitems, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * nitems, i = 0;
	struct sg_buf *dst = x->call->on_msg ? &x->frame : &x->res->msg;

	/*
	 * Bodies of non-gRPC replies (a proxy's error page) are not ours.
	 * libcurl 7.88.1 has been seen (one call in a few dozen, with reply
	 * and trailers in one read) to hand over DATA before the status line
	 * and the content type: a reply not known yet to be other is read.
	 */
	if ((x->ctype_seen && !x->grpc_body) ||
	    (x->res->http_status != 0 && x->res->http_status != 200))
		return len;
	while (i < len) {
		if (!x->in_msg) {
			size_t take = 5 - x->prefix_len;

			if (take > len - i)
				take = len - i;
			memcpy(x->prefix + x->prefix_len, data + i, take);
			x->prefix_len += take;
			i += take;
			if (x->prefix_len < 5)
				break;
			if (x->prefix[0] != 0)
				return stop(x, SG_E_PROVIDER, SG_GRPC_INTERNAL,
					    "the server sent a compressed message, "
					    "which was not offered");
			x->want = (uint64_t)x->prefix[1] << 24 |
				  (uint64_t)x->prefix[2] << 16 |
				  (uint64_t)x->prefix[3] << 8 | x->prefix[4];
			if (x->want > x->max_msg)
				return stop(x, SG_E_TOO_LARGE,
					    SG_GRPC_RESOURCE_EXHAUSTED,
					    "a reply message is over the size limit");
			x->in_msg = true;
			x->prefix_len = 0;
			if (x->call->on_msg)
				sg_buf_reset(dst);
		}
		if (x->want > 0) {
			size_t take = len - i;

			if (take > x->want)
				take = (size_t)x->want;
			if (sg_buf_add(dst, data + i, take))
				return stop(x, SG_E_TOO_LARGE,
					    SG_GRPC_RESOURCE_EXHAUSTED,
					    "a reply message is over the size limit");
			x->want -= take;
			i += take;
		}
		if (x->want == 0) {
			x->in_msg = false;
			if (deliver(x) == 0)
				return 0;
		}
	}
	return len;
}

/* The gRPC status an HTTP status means when no grpc-status came. */
static int http_to_grpc(long status)
{
	switch (status) {
	case 400:
		return SG_GRPC_INTERNAL;
	case 401:
		return SG_GRPC_UNAUTHENTICATED;
	case 403:
		return SG_GRPC_PERMISSION_DENIED;
	case 404:
		return SG_GRPC_UNIMPLEMENTED;
	case 429:
	case 502:
	case 503:
	case 504:
		return SG_GRPC_UNAVAILABLE;
	default:
		return SG_GRPC_UNKNOWN;
	}
}

/* Our code for a status that is not OK. */
static sg_err status_err(int status)
{
	switch (status) {
	case SG_GRPC_NOT_FOUND:
		return SG_E_NOT_FOUND;
	case SG_GRPC_PERMISSION_DENIED:
	case SG_GRPC_UNAUTHENTICATED:
		return SG_E_PERMISSION;
	case SG_GRPC_DEADLINE_EXCEEDED:
		return SG_E_TIMEOUT;
	case SG_GRPC_UNAVAILABLE:
	case SG_GRPC_RESOURCE_EXHAUSTED:
		return SG_E_UNAVAILABLE;
	default:
		return SG_E_PROVIDER;
	}
}

/* "123m": at most eight digits (gRPC's HTTP/2 spec), coarser units beyond. */
static void grpc_timeout(int64_t ms, char *out, size_t n)
{
	if (ms < 100000000)
		snprintf(out, n, "grpc-timeout: %lldm", (long long)ms);
	else if (ms / 1000 < 100000000)
		snprintf(out, n, "grpc-timeout: %lldS", (long long)(ms / 1000));
	else
		snprintf(out, n, "grpc-timeout: %lldH",
			 (long long)(ms / 3600000 > 99999999 ? 99999999
							     : ms / 3600000));
}

static sg_err add_line(struct curl_slist **list, const char *line)
{
	struct curl_slist *l = curl_slist_append(*list, line);

	if (!l)
		return SG_E_INTERNAL;
	*list = l;
	return SG_OK;
}

/* Metadata is "name: value", a lower-case token name, one line. */
static bool metadata_ok(const char *m)
{
	const char *p = m;

	for (; *p && *p != ':'; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		      *p == '-' || *p == '_' || *p == '.'))
			return false;
	return p != m && *p == ':' && strpbrk(m, "\r\n") == NULL;
}

static sg_err build_headers(const struct sg_grpc_call *call,
			    struct curl_slist **out)
{
	char tmo[64];
	sg_err rc;

	/*
	 * "Expect:" and "Accept:" remove curl's own: a 100-continue wait
	 * would cost a round trip, and gRPC has no use for Accept.
	 */
	rc = add_line(out, "content-type: application/grpc");
	if (!rc)
		rc = add_line(out, "te: trailers");
	if (!rc)
		rc = add_line(out, "Expect:");
	if (!rc)
		rc = add_line(out, "Accept:");
	if (!rc && call->timeout_ms > 0 && call->send_timeout) {
		grpc_timeout(call->timeout_ms, tmo, sizeof(tmo));
		rc = add_line(out, tmo);
	}
	for (size_t i = 0; !rc && call->metadata && call->metadata[i]; i++) {
		if (!metadata_ok(call->metadata[i]))
			return SG_E_INVALID_ARGUMENT;
		rc = add_line(out, call->metadata[i]);
	}
	return rc;
}

/*
 * Which connection a call travels on.  POOL: the toolkit's pool (TLS, or
 * h2c on a libcurl from 8.0.0 on); OWN: one of its own, closed after it
 * (no pool); on an older libcurl h2c calls use the pool too, H2C_OPEN
 * opening a fresh connection with prior knowledge and H2C_REUSE asking
 * for plain HTTP/2, which only a live h2c connection of the pool serves
 * (taking one of the channel's h2c_idle).
 */
enum conn_mode { CONN_POOL, CONN_OWN, CONN_H2C_OPEN, CONN_H2C_REUSE };

static enum conn_mode conn_mode(struct sg_grpc_channel *ch, bool reopen)
{
	if (ch->h2c_legacy) {
		int n = atomic_load(&ch->h2c_idle);

		while (!reopen && n > 0)
			if (atomic_compare_exchange_weak(&ch->h2c_idle, &n, n - 1))
				return CONN_H2C_REUSE;
		return CONN_H2C_OPEN;
	}
	/* An h2c channel on an older libcurl with the pool is h2c_legacy. */
	return sg_http_curl_share() ? CONN_POOL : CONN_OWN;
}

static sg_err set_options(struct sg_grpc_channel *ch, CURL *e,
			  struct xfer *x, const char *url,
			  struct curl_slist *hdrs, const uint8_t *body,
			  size_t body_len, uint64_t nth, enum conn_mode mode)
{
	CURLcode cc;
	long version = ch->h2c ? (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE
			       : (long)CURL_HTTP_VERSION_2TLS;

	{
		struct sg_http_curl_opts o = {
			.url = url, .errbuf = x->errbuf,
			.agent = "sandgate/" SG_VERSION " grpc-c", .on_header = on_header,
			.on_body = on_body, .payload = x,
			.connect_timeout_ms = SG_HTTP_CONNECT_TIMEOUT_MS,
			.ca_file = ch->ca_file, .headers = hdrs,
		};

		if (sg_http_curl_common(e, &o))
			return SG_E_INTERNAL;
	}
	if (mode == CONN_H2C_REUSE)
		version = (long)CURL_HTTP_VERSION_2_0;
	cc = curl_easy_setopt(e, CURLOPT_HTTP_VERSION, version);
	if (!cc)
		cc = curl_easy_setopt(e, CURLOPT_POST, 1L);
	if (!cc)
		cc = curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
				      (curl_off_t)body_len);
	if (!cc)
		cc = curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	/*
	 * Calls on the pool share connections, and every
	 * SG_GRPC_RECYCLE_CALLS-th call closes its connection behind it.
	 * PIPEWAIT is not set: each thread's call has its own multi handle,
	 * and a call waiting for a connection another thread's multi handle
	 * is setting up would never be woken.  The easy handle is on the pool
	 * (the share) unless mode is CONN_OWN (sg_http_curl_get).
	 */
	if (!cc && (mode == CONN_OWN || mode == CONN_H2C_OPEN))
		cc = curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
	if (mode == CONN_OWN || nth % SG_GRPC_RECYCLE_CALLS == 0)
		x->closing = true;
	if (!cc && x->closing)
		cc = curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
	return cc ? SG_E_INTERNAL : SG_OK;
}

/* The final status of a finished transfer (grpc.h's invariants). */
static int final_status(const struct xfer *x, CURLcode cc, long version,
			const char **why)
{
	*why = "";
	if (x->status >= 0) {
		/* A stream cut inside a message did not end well. */
		if (x->status == SG_GRPC_OK && (x->in_msg || x->prefix_len)) {
			*why = "the reply ended inside a message";
			return SG_GRPC_INTERNAL;
		}
		/* A unary call answers with exactly one message. */
		if (x->status == SG_GRPC_OK && !x->call->on_msg &&
		    x->res->messages != 1) {
			*why = "a unary reply carried no message";
			return SG_GRPC_INTERNAL;
		}
		return x->status;
	}
	if (cc != CURLE_OK) {
		*why = x->errbuf[0] ? x->errbuf : curl_easy_strerror(cc);
		return cc == CURLE_OPERATION_TIMEDOUT ? SG_GRPC_DEADLINE_EXCEEDED
						      : SG_GRPC_UNAVAILABLE;
	}
	if (x->res->http_status != 200) {
		*why = "the reply was not gRPC";
		return http_to_grpc(x->res->http_status);
	}
	if (version != CURL_HTTP_VERSION_2_0) {
		*why = "the server did not speak HTTP/2";
		return SG_GRPC_UNAVAILABLE;
	}
	*why = "the reply ended without a status";
	return SG_GRPC_UNAVAILABLE;
}

/*
 * A call that cannot be sent: a method that is not /package.Service/Method
 * (or would not fit the URL), a request over the limit, or a cancel.  url
 * gets the call's address.
 */
static sg_err check_call(const struct sg_grpc_channel *ch,
			 const struct sg_grpc_call *call, struct sg_grpc_result *res,
			 char *url, size_t url_size, struct sg_cancel *cancel,
			 struct sg_errinfo *err)
{
	const char *method = call->method ? call->method : "";
	sg_err rc;

	if (method[0] != '/' || strpbrk(method, " \r\n?#") ||
	    snprintf(url, url_size, "%s%s", ch->base, method) >= (int)url_size) {
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT,
				"a gRPC method is /package.Service/Method");
		goto out;
	}
	if (call->req_len > SG_GRPC_MSG_MAX) {
		rc = sg_err_set(err, SG_E_TOO_LARGE,
				"%s to %s: the request is over %zu bytes", method,
				ch->host, (size_t)SG_GRPC_MSG_MAX);
		goto out;
	}
	rc = sg_cancel_check(cancel);
	if (rc) {
		res->status = SG_GRPC_CANCELLED;
		sg_err_set(err, rc, "%s to %s was cancelled before it was sent",
			   method, ch->host);
	}
out:
	return rc;
}

/* The request as one uncompressed message: a zero flag, its length big-endian. */
static void frame_request(uint8_t *body, const struct sg_grpc_call *call)
{
	body[0] = 0;
	body[1] = (uint8_t)(call->req_len >> 24);
	body[2] = (uint8_t)(call->req_len >> 16);
	body[3] = (uint8_t)(call->req_len >> 8);
	body[4] = (uint8_t)call->req_len;
	if (call->req_len)
		memcpy(body + 5, call->req, call->req_len);
}

/*
 * Drive the transfer until it ends, the deadline (0: none) passes or the
 * call is cancelled.  A call given up on closes its connection with the
 * stream: libcurl 7.88.1 would keep the RST_STREAM until the connection's
 * next use, and the server would go on working for nobody.
 */
static sg_err wait_reply(const struct sg_grpc_channel *ch, struct xfer *x, CURLM *m,
			 int64_t deadline, struct sg_cancel *cancel,
			 struct sg_errinfo *err)
{
	const struct sg_grpc_call *call = x->call;
	const char *method = call->method ? call->method : "";
	int cfd = sg_cancel_fd(cancel);
	struct curl_waitfd wfd = { .fd = cfd, .events = CURL_WAIT_POLLIN };
	CURLMcode mc = CURLM_OK;
	int running = 1;
	sg_err rc = SG_OK;

	for (;;) {
		int64_t wait = GRPC_POLL_MS;

		mc = curl_multi_perform(m, &running);
		if (mc != CURLM_OK || !running)
			break;
		if (deadline) {
			int64_t now = sg_now_ms();

			if (now >= deadline) {
				x->res->status = SG_GRPC_DEADLINE_EXCEEDED;
				rc = sg_err_set(err, SG_E_TIMEOUT,
						"%s to %s: no reply within %lld ms",
						method, ch->host,
						(long long)call->timeout_ms);
				close_behind(x);
				goto out;
			}
			if (deadline - now < wait)
				wait = deadline - now;
		}
		mc = curl_multi_poll(m, cfd >= 0 ? &wfd : NULL, cfd >= 0 ? 1 : 0,
				     (int)wait, NULL);
		if (mc != CURLM_OK)
			break;
		rc = sg_cancel_check(cancel);
		if (rc) {
			x->res->status = SG_GRPC_CANCELLED;
			sg_err_set(err, rc, "%s to %s was cancelled", method,
				   ch->host);
			close_behind(x);
			goto out;
		}
	}
	if (mc != CURLM_OK) {
		x->res->status = SG_GRPC_INTERNAL;
		rc = sg_err_set(err, SG_E_INTERNAL, "%s: curl failed: %s", method,
				curl_multi_strerror(mc));
	}
out:
	return rc;
}

/*
 * What the finished transfer means: the connections it opened, whether its
 * connection stays healthy for reuse, a failed h2c upgrade (see
 * invoke_once), a callback's stop, or the call's final status.
 */
static sg_err conclude(struct sg_grpc_channel *ch, struct xfer *x, CURLM *m,
		       enum conn_mode mode, bool *healthy, bool *upgrade_failed,
		       struct sg_errinfo *err)
{
	struct sg_grpc_result *res = x->res;
	const char *method = x->call->method ? x->call->method : "";
	const char *why = "";
	long version = 0, conns = 0;
	CURLcode cc = CURLE_OK;
	CURLMsg *msg;
	int left;
	sg_err rc = SG_OK;

	while ((msg = curl_multi_info_read(m, &left)) != NULL)
		if (msg->msg == CURLMSG_DONE && msg->easy_handle == x->easy)
			cc = msg->data.result;
	curl_easy_getinfo(x->easy, CURLINFO_HTTP_VERSION, &version);
	if (curl_easy_getinfo(x->easy, CURLINFO_NUM_CONNECTS, &conns) == CURLE_OK &&
	    conns > 0)
		atomic_fetch_add(&ch->connections, (uint64_t)conns);
	*healthy = cc == CURLE_OK && !x->abort_rc;
	if (mode == CONN_H2C_REUSE && cc == CURLE_UNSUPPORTED_PROTOCOL &&
	    !res->responded && x->status < 0 && conns > 0) {
		/* Not an HTTP/2 request: the try is not counted as a call. */
		atomic_fetch_sub(&ch->calls, 1);
		*upgrade_failed = true;
		res->status = SG_GRPC_UNAVAILABLE;
		rc = sg_err_set(err, SG_E_UNAVAILABLE,
				"%s on %s: UNAVAILABLE: no h2c connection to reuse",
				method, ch->host);
		goto out;
	}
	if (x->abort_rc) {
		res->status = x->abort_status;
		if (x->abort_why[0])
			rc = sg_err_set(err, x->abort_rc, "%s from %s: %s", method,
					ch->host, x->abort_why);
		else
			rc = sg_err_set(err, x->abort_rc,
					"%s from %s: the stream's reader stopped "
					"(%s)",
					method, ch->host, sg_err_word(x->abort_rc));
		goto out;
	}
	res->status = final_status(x, cc, version, &why);
	res->from_server = x->status >= 0 && !why[0];
	if (res->status == SG_GRPC_OK)
		goto out;
	rc = status_err(res->status);
	sg_err_set(err, rc, "%s on %s: %s: %s", method, ch->host,
		   sg_grpc_code_name(res->status),
		   !res->from_server ? why
		   : res->message[0] ? res->message : "(no message)");
out:
	return rc;
}

/*
 * One try of a call.  *upgrade_failed: a plain HTTP/2 call on h2c found
 * no live connection in the pool, so libcurl opened one with an HTTP/1.1
 * upgrade, which a gRPC server refuses before running anything (curl
 * reports CURLE_UNSUPPORTED_PROTOCOL); the call is to be made again with
 * prior knowledge.
 */
static sg_err invoke_once(struct sg_grpc_channel *ch,
			  const struct sg_grpc_call *call,
			  struct sg_grpc_result *res, struct sg_cancel *cancel,
			  struct sg_errinfo *err, bool reopen,
			  bool *upgrade_failed)
{
	struct xfer x = { .call = call, .res = res, .status = -1 };
	enum conn_mode mode = conn_mode(ch, reopen);
	bool healthy = false, added = false;
	struct curl_slist *hdrs = NULL;
	char url[SG_GRPC_URL_MAX * 2];
	uint8_t *body = NULL;
	struct sg_http_curl_pair pair = { 0 };
	int64_t deadline = call->timeout_ms > 0 ? sg_now_ms() + call->timeout_ms
						: 0;
	const char *method = call->method ? call->method : "";
	uint64_t nth;
	sg_err rc;

	*upgrade_failed = false;
	x.max_msg = call->max_msg ? call->max_msg : SG_GRPC_MSG_MAX;
	result_reset(res, x.max_msg);
	res->attempts = 1;
	res->status = SG_GRPC_INTERNAL;
	sg_buf_init(&x.frame, x.max_msg);
	rc = check_call(ch, call, res, url, sizeof(url), cancel, err);
	if (rc)
		goto out;
	body = malloc(call->req_len + 5);
	if (!body || !sg_http_curl_get(&pair, mode != CONN_OWN)) {
		rc = sg_err_set(err, SG_E_INTERNAL, "%s: out of memory", method);
		goto out;
	}
	frame_request(body, call);
	x.easy = pair.easy;
	rc = build_headers(call, &hdrs);
	if (rc) {
		sg_err_set(err, rc, "%s: %s", method,
			   rc == SG_E_INVALID_ARGUMENT
				   ? "a metadata line is malformed"
				   : "out of memory");
		goto out;
	}
	nth = atomic_fetch_add(&ch->calls, 1) + 1;
	if (set_options(ch, x.easy, &x, url, hdrs, body, call->req_len + 5, nth,
			mode) ||
	    curl_multi_add_handle(pair.multi, x.easy) != CURLM_OK) {
		rc = sg_err_set(err, SG_E_INTERNAL, "%s: curl refused an option",
				method);
		goto out;
	}
	added = true;
	rc = wait_reply(ch, &x, pair.multi, deadline, cancel, err);
	if (!rc)
		rc = conclude(ch, &x, pair.multi, mode, &healthy, upgrade_failed, err);
out:
	/* The pool keeps the connection: one more to take (see h2c_idle). */
	if (added && mode != CONN_POOL && mode != CONN_OWN && healthy &&
	    !x.closing && atomic_fetch_add(&ch->h2c_idle, 1) >= SG_CURL_POOL_MAX)
		atomic_fetch_sub(&ch->h2c_idle, 1);
	if (added)
		curl_multi_remove_handle(pair.multi, x.easy);
	sg_http_curl_put(&pair);
	curl_slist_free_all(hdrs);
	free(body);
	sg_buf_release(&x.frame);
	return rc;
}

sg_err sg_grpc_invoke(struct sg_grpc_channel *ch,
		      const struct sg_grpc_call *call,
		      struct sg_grpc_result *res, struct sg_cancel *cancel,
		      struct sg_errinfo *err)
{
	bool again = false;
	sg_err rc = invoke_once(ch, call, res, cancel, err, false, &again);

	if (again)
		rc = invoke_once(ch, call, res, cancel, err, true, &again);
	return rc;
}

/* ---- Retries ------------------------------------------------------------ */

sg_err sg_grpc_invoke_retry(struct sg_grpc_channel *ch,
			    const struct sg_grpc_call *call,
			    const struct sg_grpc_retry *policy,
			    struct sg_grpc_result *res,
			    struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_grpc_call once = *call;
	const char **md = NULL;
	char key[SG_GRPC_KEY_MAX + 32], attempt[48], delay_line[48];
	size_t n = 0;
	int64_t delay = 0;
	sg_err rc = SG_OK;

	while (call->metadata && call->metadata[n])
		n++;
	md = calloc(n + 4, sizeof(*md));
	if (!md)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	memcpy(md, call->metadata ? call->metadata : md, n * sizeof(*md));
	if (policy->idempotency_key) {
		if (snprintf(key, sizeof(key), "x-idempotency-key: %s",
			     policy->idempotency_key) >= (int)sizeof(key)) {
			rc = sg_err_set(err, SG_E_INVALID_ARGUMENT,
					"an idempotency key is too long");
			goto out;
		}
		md[n] = key;
		md[n + 1] = attempt;
	}
	once.metadata = md;

	for (int i = 0;; i++) {
		struct sg_errinfo e1 = { 0 };

		if (policy->idempotency_key) {
			snprintf(attempt, sizeof(attempt), "x-retry-attempt: %d", i);
			if (i > 0) {
				snprintf(delay_line, sizeof(delay_line),
					 "x-retry-delay: %.3f",
					 (double)delay / 1000.0);
				md[n + 2] = delay_line;
			}
		}
		rc = sg_grpc_invoke(ch, &once, res, cancel, &e1);
		res->attempts = i + 1;
		if (rc == SG_OK)
			break;
		/* Not again: a code not on the list, a cancel, a delivered stream. */
		if (i >= policy->retries ||
		    !(policy->codes & SG_GRPC_BIT(res->status)) ||
		    sg_cancel_check(cancel) != SG_OK ||
		    (res->status == SG_GRPC_CANCELLED && !res->from_server) ||
		    (call->on_msg && res->messages > 0) ||
		    rc == SG_E_TOO_LARGE) {
			sg_err_set(err, rc, "%s", e1.msg);
			break;
		}
		delay = i == 0 ? policy->base_ms : delay * 2;
		if (delay > policy->max_delay_ms)
			delay = policy->max_delay_ms;
		rc = sg_cancel_sleep(cancel, delay);
		if (rc) {
			res->status = SG_GRPC_CANCELLED;
			res->from_server = false;
			sg_err_set(err, rc, "%s to %s was cancelled while waiting "
				   "to retry", call->method, ch->host);
			break;
		}
	}
out:
	free(md);
	return rc;
}

/* ---- Identifiers -------------------------------------------------------- */

void sg_grpc_uuid(char out[37])
{
	static const char hex[] = "0123456789abcdef";
	static atomic_uint_fast64_t counter;
	uint8_t b[16];
	size_t o = 0;

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
		/* Unique is what matters here, not unpredictable. */
		uint64_t a = (uint64_t)sg_now_ns(),
			 c = atomic_fetch_add(&counter, 1) ^ (uint64_t)getpid();

		memcpy(b, &a, 8);
		memcpy(b + 8, &c, 8);
	}
	b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
	b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[b[i] >> 4];
		out[o++] = hex[b[i] & 15];
	}
	out[o] = '\0';
}
