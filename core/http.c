/*
 * http.c - cancellable HTTP on libcurl (see http.h for the contract).
 *
 * Each request sets up an easy handle, adds it to a multi handle, and
 * loops on curl_multi_perform / curl_multi_poll with the cancel token's
 * eventfd as an extra descriptor.  The handles are the calling thread's
 * own, kept between its requests (curl_easy_reset clears every option
 * after each), so a request costs no handle set-up and no wakeup socket
 * pair of a new multi handle.  Callbacks never block and never
 * call back into curl; they record why they stopped a transfer in the
 * per-request struct xfer, which is turned into an sg_err afterwards.
 */
#include "core/http.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sg_config.h"

/* How long one curl_multi_poll may sleep; curl shortens it to its timers. */
#define HTTP_POLL_MS 1000

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static CURLcode init_rc = CURLE_FAILED_INIT;

/*
 * Idempotent requests share connections, DNS answers and TLS sessions, so
 * consecutive calls to one provider reuse a warm connection instead of
 * paying TCP and TLS set-up (a round trip or two against a remote API).
 * Only idempotent ones, and those whose copy the server ignores
 * (resend_safe): curl sends a request again by itself when a reused
 * connection turns out dead before any reply, which a create must never
 * suffer.  curl locks each kind of shared data through these callbacks.
 */
static CURLSH *share;
static pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];

/*
 * A thread's kept handles: an array of two pairs, [0] off the share and
 * [1] on it.  Requests on one thread never overlap (curl's callbacks
 * never start another), so they need no lock; the key's destructor frees
 * them when the thread ends.
 */
static pthread_key_t handles_key;
static bool handles_keyed;

static void handles_free(void *arg)
{
	struct sg_http_curl_pair *h = arg;

	for (int i = 0; i < 2; i++) {
		curl_multi_cleanup(h[i].multi);
		curl_easy_cleanup(h[i].easy);
	}
	free(h);
}

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access a, void *u)
{
	(void)h;
	(void)a;
	(void)u;
	pthread_mutex_lock(&share_locks[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *u)
{
	(void)h;
	(void)u;
	pthread_mutex_unlock(&share_locks[data]);
}

static void global_init(void)
{
	init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
	if (init_rc != CURLE_OK)
		return;
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&share_locks[i], NULL);
	/* Without the key every request makes and frees its own handles. */
	handles_keyed = pthread_key_create(&handles_key, handles_free) == 0;
	share = curl_share_init();
	/* Without a share every request simply opens its own connection. */
	if (share && (curl_share_setopt(share, CURLSHOPT_LOCKFUNC, share_lock) ||
		      curl_share_setopt(share, CURLSHOPT_UNLOCKFUNC, share_unlock) ||
		      curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) ||
		      curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) ||
		      curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION))) {
		curl_share_cleanup(share);
		share = NULL;
	}
}

static bool is_idempotent(const struct sg_http_request *req);

sg_err sg_http_curl_common(void *easy, const struct sg_http_curl_opts *o)
{
	CURL *e = easy;
	CURLcode cc;

	cc = curl_easy_setopt(e, CURLOPT_URL, o->url);
	if (!cc)
		cc = curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	if (!cc)
		cc = curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	if (!cc)
		cc = curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	if (!cc)
		cc = curl_easy_setopt(e, CURLOPT_ERRORBUFFER, o->errbuf);
	if (!cc)
		cc = curl_easy_setopt(e, CURLOPT_USERAGENT, o->agent);
	if (!cc)
		cc = curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, o->on_header);
	if (!cc)
		cc = curl_easy_setopt(e, CURLOPT_HEADERDATA, o->payload);
	if (!cc)
		cc = curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, o->on_body);
	if (!cc)
		cc = curl_easy_setopt(e, CURLOPT_WRITEDATA, o->payload);
	if (!cc)
		cc = curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)o->connect_timeout_ms);
	if (!cc)
		cc = curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	if (!cc && o->ca_file)
		cc = curl_easy_setopt(e, CURLOPT_CAINFO, o->ca_file);
	if (!cc && o->unix_socket)
		cc = curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, o->unix_socket);
	if (!cc)
		cc = curl_easy_setopt(e, CURLOPT_HTTPHEADER, o->headers);
	return cc ? SG_E_INTERNAL : SG_OK;
}

sg_err sg_http_curl_init(void)
{
	pthread_once(&init_once, global_init);
	return init_rc == CURLE_OK ? SG_OK : SG_E_INTERNAL;
}

void sg_http_thread_end(void)
{
	struct sg_http_curl_pair *h = handles_keyed ? pthread_getspecific(handles_key) : NULL;

	if (h) {
		pthread_setspecific(handles_key, NULL);
		handles_free(h);
	}
}

void *sg_http_curl_share(void)
{
	return share;
}

void sg_http_response_init(struct sg_http_response *r, size_t max_body)
{
	r->status = 0;
	r->version = 0;
	sg_buf_init(&r->body, max_body);
	r->body_clipped = false;
	r->sunk = 0;
	r->attempts = 0;
	r->primary_ip[0] = '\0';
	sg_buf_init(&r->headers, SG_HTTP_HEADERS_MAX);
}

void sg_http_response_release(struct sg_http_response *r)
{
	sg_buf_release(&r->body);
	sg_buf_release(&r->headers);
}

static void response_reset(struct sg_http_response *r)
{
	r->status = 0;
	r->version = 0;
	sg_buf_reset(&r->body);
	r->body_clipped = false;
	r->sunk = 0;
	r->primary_ip[0] = '\0';
	sg_buf_reset(&r->headers);
}

bool sg_http_header_next(const struct sg_http_response *r, size_t *pos,
			 const char **name, const char **value)
{
	const char *p;
	size_t nlen;

	if (*pos >= r->headers.len)
		return false;
	p = r->headers.p + *pos;
	nlen = strlen(p);
	*name = p;
	*value = p + nlen + 1;
	*pos += nlen + 1 + strlen(*value) + 1;
	return true;
}

const char *sg_http_header(const struct sg_http_response *r, const char *name)
{
	const char *n, *v, *found = NULL;
	size_t pos = 0;

	while (sg_http_header_next(r, &pos, &n, &v))
		if (strcasecmp(n, name) == 0)
			found = v;
	return found;
}

/* ---- Request bodies ---------------------------------------------------- */

/* One body source (the body, or one multipart part), read from an offset. */
struct reader {
	const char *mem; /* NULL: read from fd */
	int fd;
	int64_t off;     /* where the bytes start in the file */
	int64_t size;
	int64_t pos;     /* bytes given to curl so far */
	int err;         /* errno of a failed read */
};

static size_t on_read(char *buf, size_t size, size_t nitems, void *arg)
{
	struct reader *rd = arg;
	int64_t left = rd->size - rd->pos;
	size_t want = size * nitems;
	ssize_t got;

	if (left <= 0)
		return 0;
	if ((uint64_t)want > (uint64_t)left)
		want = (size_t)left;
	if (rd->mem) {
		memcpy(buf, rd->mem + rd->pos, want);
		rd->pos += (int64_t)want;
		return want;
	}
	do
		got = pread(rd->fd, buf, want, (off_t)(rd->off + rd->pos));
	while (got < 0 && errno == EINTR);
	if (got <= 0) {
		/* A file that shrank under us is as broken as a failed read. */
		rd->err = got < 0 ? errno : EIO;
		return CURL_READFUNC_ABORT;
	}
	rd->pos += got;
	return (size_t)got;
}

/* curl rewinds a body it must send again (HTTP/2 refused streams ...). */
static int on_seek(void *arg, curl_off_t offset, int origin)
{
	struct reader *rd = arg;

	if (origin != SEEK_SET || offset < 0 || offset > rd->size)
		return CURL_SEEKFUNC_FAIL;
	rd->pos = offset;
	return CURL_SEEKFUNC_OK;
}

static sg_err reader_from_file(struct reader *rd,
			       const struct sg_http_source *src,
			       const char *what, struct sg_errinfo *err)
{
	struct stat st;

	rd->mem = NULL;
	rd->fd = src->fd;
	rd->off = src->offset;
	rd->pos = 0;
	rd->err = 0;
	if (src->fd < 0 || fstat(src->fd, &st) < 0 || src->offset < 0)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "%s: the body file is not open", what);
	/* pread needs a seekable file; a retry needs to read it again. */
	if (lseek(src->fd, 0, SEEK_CUR) < 0)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "%s: the body must come from a seekable file",
				  what);
	if (src->len >= 0) {
		rd->size = src->len;
	} else {
		if (!S_ISREG(st.st_mode) || st.st_size < src->offset)
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "%s: a body of unknown length must "
					  "be a regular file",
					  what);
		rd->size = (int64_t)st.st_size - src->offset;
	}
	return SG_OK;
}

static void reader_from_mem(struct reader *rd, const void *data, size_t len)
{
	rd->mem = data ? data : "";
	rd->fd = -1;
	rd->off = 0;
	rd->size = (int64_t)len;
	rd->pos = 0;
	rd->err = 0;
}

/* ---- Responses --------------------------------------------------------- */

/* The state of one transfer, shared with curl's callbacks. */
struct xfer {
	const struct sg_http_request *req;
	struct sg_http_response *r;
	sg_err abort_rc; /* why a callback stopped the transfer */
	char errbuf[CURL_ERROR_SIZE];
};

enum sg_http_line sg_http_parse_line(const char *data, size_t len,
				     struct sg_http_hline *out)
{
	size_t n = len;
	const char *colon, *v;

	memset(out, 0, sizeof(*out));
	while (n > 0 && (data[n - 1] == '\r' || data[n - 1] == '\n'))
		n--;
	if (n == 0)
		return SG_HTTP_LINE_BLANK;
	if (n >= 5 && memcmp(data, "HTTP/", 5) == 0) {
		const char *sp = memchr(data, ' ', n);

		for (const char *p = sp ? sp + 1 : data + n;
		     p < data + n && *p >= '0' && *p <= '9' && out->status < 1000;
		     p++)
			out->status = out->status * 10 + (*p - '0');
		return SG_HTTP_LINE_STATUS;
	}
	colon = memchr(data, ':', n);
	if (!colon || colon == data)
		return SG_HTTP_LINE_OTHER; /* a folded continuation */
	out->name = data;
	out->nlen = (size_t)(colon - data);
	while (out->nlen > 0 &&
	       (data[out->nlen - 1] == ' ' || data[out->nlen - 1] == '\t'))
		out->nlen--;
	v = colon + 1;
	while (v < data + n && (*v == ' ' || *v == '\t'))
		v++;
	out->value = v;
	out->vlen = (size_t)(data + n - v);
	return SG_HTTP_LINE_FIELD;
}

static size_t on_header(char *data, size_t size, size_t nitems, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * nitems;
	struct sg_http_hline h;
	sg_err rc;

	switch (sg_http_parse_line(data, len, &h)) {
	case SG_HTTP_LINE_STATUS:
		/* A new response (after a 100 Continue): start over. */
		x->r->status = h.status;
		sg_buf_reset(&x->r->headers);
		sg_buf_reset(&x->r->body);
		x->r->body_clipped = false;
		return len;
	case SG_HTTP_LINE_FIELD:
		break;
	default:
		return len;
	}
	rc = sg_buf_add(&x->r->headers, h.name, h.nlen);
	if (!rc)
		rc = sg_buf_addc(&x->r->headers, '\0');
	if (!rc)
		rc = sg_buf_add(&x->r->headers, h.value, h.vlen);
	if (!rc)
		rc = sg_buf_addc(&x->r->headers, '\0');
	if (rc) {
		x->abort_rc = rc;
		return 0;
	}
	return len;
}

static size_t on_body(char *data, size_t size, size_t nitems, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * nitems;
	bool ok = x->r->status >= 200 && x->r->status < 300;
	sg_err rc;

	if (ok && x->req->sink) {
		rc = x->req->sink(data, len, x->req->sink_payload);
		if (rc) {
			x->abort_rc = rc;
			return 0;
		}
		x->r->sunk += len;
		return len;
	}
	if (ok) {
		rc = sg_buf_add(&x->r->body, data, len);
		if (rc) {
			x->abort_rc = rc;
			return 0;
		}
		return len;
	}
	if (sg_buf_add_clipped(&x->r->body, data, len))
		x->r->body_clipped = true;
	return len;
}

/* ---- One request -------------------------------------------------------- */

/* What the retry helper needs to know beyond the code. */
struct attempt {
	bool never_connected; /* resolve or connect failed: nothing was sent */
};

/*
 * "host" or "host:port" of url into out, and whether the URL is one we
 * send (http or https, with a host).  The rest of the URL never leaves
 * this function: paths and queries may carry secrets.
 */
bool sg_http_url_host(const char *url, char *out, size_t n)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL, *port = NULL;
	bool ok = false;

	snprintf(out, n, "(invalid URL)");
	if (!u || !url || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK)
		goto out;
	if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !*host)
		goto out;
	if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)
		goto out;
	if (curl_url_get(u, CURLUPART_PORT, &port, 0) == CURLUE_OK)
		snprintf(out, n, "%s:%s", host, port);
	else
		snprintf(out, n, "%s", host);
	ok = true;
out:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
	return ok;
}

static bool method_ok(const char *m)
{
	size_t i;

	for (i = 0; m[i]; i++)
		if (m[i] < 'A' || m[i] > 'Z' || i >= 16)
			return false;
	return i > 0;
}

static bool header_ok(const char *h)
{
	return strpbrk(h, "\r\n") == NULL;
}

static sg_err add_header(struct curl_slist **list, const char *line)
{
	struct curl_slist *l = curl_slist_append(*list, line);

	if (!l)
		return SG_E_INTERNAL;
	*list = l;
	return SG_OK;
}

/* Map a finished transfer's curl code to ours, with the sentence. */
static sg_err map_curl(CURLcode cc, CURL *e, const struct xfer *x,
		       const char *method, const char *host,
		       struct attempt *at, struct sg_errinfo *err)
{
	const char *why = x->errbuf[0] ? x->errbuf : curl_easy_strerror(cc);
	curl_off_t connect_us = 0;

	switch (cc) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_CONNECT:
		at->never_connected = true;
		return sg_err_set(err, SG_E_UNAVAILABLE, "%s %s: %s", method,
				  host, why);
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_SSL_CONNECT_ERROR:
		return sg_err_set(err, SG_E_UNAVAILABLE,
				  "%s %s: the connection failed: %s", method,
				  host, why);
	case CURLE_OPERATION_TIMEDOUT:
		curl_easy_getinfo(e, CURLINFO_CONNECT_TIME_T, &connect_us);
		if (connect_us == 0) {
			at->never_connected = true;
			return sg_err_set(err, SG_E_UNAVAILABLE,
					  "%s %s: could not connect in time: %s",
					  method, host, why);
		}
		return sg_err_set(err, SG_E_TIMEOUT, "%s %s timed out after %lld ms",
				  method, host,
				  (long long)x->req->timeout_ms);
	case CURLE_URL_MALFORMAT:
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "%s: the URL is malformed", method);
	default:
		return sg_err_set(err, SG_E_PROVIDER, "%s %s failed: %s", method,
				  host, why);
	}
}

/*
 * A multipart body: each part's name, file name, type and reader, then the
 * form itself.  *cc: what curl refused; the result: any other failure.
 */
static sg_err set_parts(CURL *e, const struct sg_http_request *req,
			struct reader *readers, curl_mime **mime, const char *what,
			CURLcode *cc, struct sg_errinfo *err)
{
	sg_err rc;

	*cc = CURLE_OK;
	*mime = curl_mime_init(e);
	if (!*mime)
		return sg_err_set(err, SG_E_INTERNAL, "%s: out of memory", what);
	for (size_t i = 0; i < req->nparts; i++) {
		const struct sg_http_part *pt = &req->parts[i];
		curl_mimepart *mp = curl_mime_addpart(*mime);

		if (!pt->name || !mp)
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "%s: part %zu has no name", what, i);
		if (pt->file) {
			rc = reader_from_file(&readers[i], pt->file, what, err);
			if (rc)
				return rc;
		} else {
			reader_from_mem(&readers[i], pt->data, pt->len);
		}
		*cc = curl_mime_name(mp, pt->name);
		if (!*cc && pt->filename)
			*cc = curl_mime_filename(mp, pt->filename);
		if (!*cc && pt->content_type)
			*cc = curl_mime_type(mp, pt->content_type);
		if (!*cc)
			*cc = curl_mime_data_cb(mp, readers[i].size, on_read,
						on_seek, NULL, &readers[i]);
		if (*cc)
			return SG_OK;
	}
	*cc = curl_easy_setopt(e, CURLOPT_MIMEPOST, *mime);
	return SG_OK;
}

/*
 * A plain body: a file read as curl asks (and seeks, for a resend), or
 * req->body, not copied since it outlives the transfer.  *cc: what curl
 * refused; the result: a file that cannot be read.
 */
static sg_err set_plain(CURL *e, const struct sg_http_request *req,
			struct reader *rd, const char *what, CURLcode *cc,
			struct sg_errinfo *err)
{
	sg_err rc;

	if (!req->body_file) {
		*cc = curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
				       (curl_off_t)req->body_len);
		if (!*cc)
			*cc = curl_easy_setopt(e, CURLOPT_POSTFIELDS,
					       req->body ? req->body : "");
		return SG_OK;
	}
	rc = reader_from_file(rd, req->body_file, what, err);
	if (rc)
		return rc;
	*cc = curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
	if (!*cc)
		*cc = curl_easy_setopt(e, CURLOPT_READDATA, rd);
	if (!*cc)
		*cc = curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, on_seek);
	if (!*cc)
		*cc = curl_easy_setopt(e, CURLOPT_SEEKDATA, rd);
	if (!*cc)
		*cc = curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
				       (curl_off_t)rd->size);
	return SG_OK;
}

/*
 * Set the method and body on e.  POST, PUT and PATCH always carry a body
 * (possibly empty) so that a Content-Length goes out; other methods only
 * when given one.
 */
static sg_err set_body(CURL *e, const struct sg_http_request *req,
		       const char *method, struct reader *readers,
		       curl_mime **mime, const char *what,
		       struct sg_errinfo *err)
{
	bool is_post = strcmp(method, "POST") == 0;
	bool wants = is_post || strcmp(method, "PUT") == 0 ||
		     strcmp(method, "PATCH") == 0 || req->body ||
		     req->body_file || req->nparts;
	CURLcode cc = CURLE_OK;
	sg_err rc = SG_OK;

	if ((req->body && (req->body_file || req->nparts)) ||
	    (req->body_file && req->nparts))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "%s: give one kind of body", what);
	if (req->nparts) {
		rc = set_parts(e, req, readers, mime, what, &cc, err);
	} else if (wants) {
		cc = curl_easy_setopt(e, CURLOPT_POST, 1L);
		if (!cc)
			rc = set_plain(e, req, &readers[0], what, &cc, err);
	} else if (strcmp(method, "HEAD") == 0) {
		cc = curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	} else if (strcmp(method, "GET") == 0) {
		cc = curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	} else {
		cc = curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	}
	if (rc)
		return rc;
	if (!cc && wants && !is_post)
		cc = curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	if (cc)
		return sg_err_set(err, SG_E_INTERNAL, "%s: curl refused the body: %s",
				  what, curl_easy_strerror(cc));
	return SG_OK;
}

static sg_err set_options(CURL *e, const struct sg_http_request *req,
			  struct xfer *x, struct curl_slist *hdrs)
{
	long version = CURL_HTTP_VERSION_NONE;
	int64_t ct = req->connect_timeout_ms > 0 ? req->connect_timeout_ms
						 : SG_HTTP_CONNECT_TIMEOUT_MS;
	CURLcode cc;

	switch (req->version) {
	case SG_HTTP_1_1:
		version = CURL_HTTP_VERSION_1_1;
		break;
	case SG_HTTP_2:
		version = CURL_HTTP_VERSION_2TLS;
		break;
	case SG_HTTP_2_PRIOR:
		version = CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE;
		break;
	case SG_HTTP_DEFAULT:
		break;
	}
	{
		struct sg_http_curl_opts o = {
			.url = req->url, .errbuf = x->errbuf,
			.agent = "sandgate/" SG_VERSION, .on_header = on_header,
			.on_body = on_body, .payload = x, .connect_timeout_ms = ct,
			.ca_file = req->ca_file, .headers = hdrs,
			.unix_socket = req->unix_socket,
		};

		if (sg_http_curl_common(e, &o))
			return SG_E_INTERNAL;
	}
	cc = CURLE_OK;
	if (req->timeout_ms > 0)
		cc = curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
				      (long)req->timeout_ms);
	if (!cc && version != CURL_HTTP_VERSION_NONE)
		cc = curl_easy_setopt(e, CURLOPT_HTTP_VERSION, version);
	return cc ? SG_E_INTERNAL : SG_OK;
}

static sg_err build_headers(const struct sg_http_request *req,
			    struct curl_slist **out, const char *what,
			    struct sg_errinfo *err)
{
	struct sg_buf line = SG_BUF_INIT(SG_KiB);
	sg_err rc;

	/*
	 * No "Expect: 100-continue": it costs a round trip (or a second, with
	 * servers that ignore it) and buys nothing for bodies we send anyway.
	 */
	rc = add_header(out, "Expect:");
	if (!rc && req->content_type) {
		rc = sg_buf_addf(&line, "Content-Type: %s", req->content_type);
		if (!rc && !header_ok(line.p))
			rc = SG_E_INVALID_ARGUMENT;
		if (!rc)
			rc = add_header(out, line.p);
	}
	for (size_t i = 0; !rc && req->headers && req->headers[i]; i++) {
		if (!header_ok(req->headers[i]))
			rc = SG_E_INVALID_ARGUMENT;
		else
			rc = add_header(out, req->headers[i]);
	}
	sg_buf_release(&line);
	if (rc == SG_E_INTERNAL)
		return sg_err_set(err, rc, "%s: out of memory", what);
	if (rc)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "%s: a header is malformed", what);
	return SG_OK;
}

/*
 * New handles, the easy one attached to the share when shared.  The multi
 * handle decides how many idle connections the pool keeps when a transfer
 * gives its own back (libcurl's default, four per transfer of the handle,
 * would close one whenever a few threads call at once).
 */
static bool handles_new(struct sg_http_curl_pair *h, bool shared)
{
	h->easy = curl_easy_init();
	h->multi = curl_multi_init();
	h->kept = false;
	if (h->easy && h->multi &&
	    curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, (long)SG_CURL_POOL_MAX) == CURLM_OK &&
	    (!shared || curl_easy_setopt(h->easy, CURLOPT_SHARE, share) == CURLE_OK))
		return true;
	curl_easy_cleanup(h->easy);
	curl_multi_cleanup(h->multi);
	h->easy = NULL;
	h->multi = NULL;
	return false;
}

/*
 * A thread keeps one pair of each kind: an easy handle never changes its
 * share (curl keeps the share through curl_easy_reset, and taking it away
 * again leaked memory in curl 7.88).
 */
bool sg_http_curl_get(struct sg_http_curl_pair *out, bool shared)
{
	struct sg_http_curl_pair *h = handles_keyed ? pthread_getspecific(handles_key) : NULL;

	shared = shared && share;
	if (!h && handles_keyed && (h = calloc(2, sizeof(*h)))) {
		if (pthread_setspecific(handles_key, h) != 0) {
			free(h);
			h = NULL;
		}
	}
	if (h && (h[shared].easy || handles_new(&h[shared], shared))) {
		*out = h[shared];
		out->kept = true;
		return true;
	}
	return handles_new(out, shared);
}

void sg_http_curl_put(struct sg_http_curl_pair *h)
{
	if (!h->easy)
		return;
	if (h->kept) {
		curl_easy_reset(h->easy);
	} else {
		curl_easy_cleanup(h->easy);
		curl_multi_cleanup(h->multi);
	}
	h->easy = h->multi = NULL;
}

/*
 * What must hold before anything is allocated: a method curl will send as
 * given, an http(s) URL with a host, libcurl initialised, no cancel.  host
 * and what (method and host, for every sentence) are filled in.
 */
static sg_err check_request(const struct sg_http_request *req, const char *method,
			    char *host, size_t host_size, char *what, size_t what_size,
			    struct sg_cancel *cancel, struct sg_errinfo *err)
{
	sg_err rc;

	if (!method_ok(method)) {
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT,
				"an HTTP method must be a short upper-case word");
		goto out;
	}
	if (!sg_http_url_host(req->url, host, host_size)) {
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT,
				"%s: the URL must be http:// or https:// with a host",
				method);
		goto out;
	}
	snprintf(what, what_size, "%s %s", method, host);
	if (sg_http_curl_init() != SG_OK) {
		rc = sg_err_set(err, SG_E_INTERNAL, "%s: libcurl did not initialise",
				what);
		goto out;
	}
	rc = sg_cancel_check(cancel);
	if (rc)
		sg_err_set(err, rc, "%s was cancelled before it was sent", what);
out:
	return rc;
}

/*
 * Run the transfer to its end, woken by the cancel token; *cc is curl's
 * result for it.
 */
static sg_err transfer(CURLM *m, CURL *e, const char *what, CURLcode *cc,
		       struct sg_cancel *cancel, struct sg_errinfo *err)
{
	int cfd = sg_cancel_fd(cancel);
	struct curl_waitfd wfd = { .fd = cfd, .events = CURL_WAIT_POLLIN };
	CURLMsg *msg;
	CURLMcode mc;
	int running = 1, left;
	sg_err rc = SG_OK;

	for (;;) {
		mc = curl_multi_perform(m, &running);
		if (mc != CURLM_OK || !running)
			break;
		mc = curl_multi_poll(m, cfd >= 0 ? &wfd : NULL, cfd >= 0 ? 1 : 0,
				     HTTP_POLL_MS, NULL);
		if (mc != CURLM_OK)
			break;
		rc = sg_cancel_check(cancel);
		if (rc) {
			sg_err_set(err, rc, "%s was cancelled", what);
			goto out;
		}
	}
	if (mc != CURLM_OK) {
		rc = sg_err_set(err, SG_E_INTERNAL, "%s: curl failed: %s", what,
				curl_multi_strerror(mc));
		goto out;
	}
	while ((msg = curl_multi_info_read(m, &left)) != NULL)
		if (msg->msg == CURLMSG_DONE && msg->easy_handle == e)
			*cc = msg->data.result;
out:
	return rc;
}

/* The response's status, HTTP version and peer address, as far as curl knows them. */
static void response_info(CURL *e, struct sg_http_response *r)
{
	long status = 0, version = 0;
	char *ip = NULL;

	if (curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK &&
	    status > 0)
		r->status = status;
	if (curl_easy_getinfo(e, CURLINFO_HTTP_VERSION, &version) == CURLE_OK)
		r->version = version == CURL_HTTP_VERSION_2_0 ? 2
			     : version == CURL_HTTP_VERSION_3 ? 3
			     : version ? 1 : 0;
	if (curl_easy_getinfo(e, CURLINFO_PRIMARY_IP, &ip) == CURLE_OK && ip)
		snprintf(r->primary_ip, sizeof(r->primary_ip), "%s", ip);
}

/*
 * A failed transfer's sentence: a body over its limit, a callback's stop, a
 * body file that could not be read (its errno when a reader kept one), or
 * curl's own error (map_curl).
 */
static sg_err transfer_failed(CURLcode cc, CURL *e, const struct xfer *x,
			      const struct reader *readers, const char *method,
			      const char *host, const char *what, struct attempt *at,
			      struct sg_errinfo *err)
{
	const struct sg_http_request *req = x->req;
	char ebuf[128] = "";
	int rerr = 0;

	if (x->abort_rc == SG_E_TOO_LARGE && !req->sink)
		return sg_err_set(err, SG_E_TOO_LARGE,
				  "the response to %s is larger than %zu bytes",
				  what, x->r->body.max);
	if (x->abort_rc == SG_E_TOO_LARGE)
		return sg_err_set(err, SG_E_TOO_LARGE,
				  "the response to %s passed its size limit", what);
	if (x->abort_rc)
		return sg_err_set(err, x->abort_rc,
				  "%s: the response body could not be taken (%s)",
				  what, sg_err_word(x->abort_rc));
	if (cc != CURLE_ABORTED_BY_CALLBACK && cc != CURLE_READ_ERROR)
		return map_curl(cc, e, x, method, host, at, err);
	for (size_t i = 0; i <= req->nparts; i++)
		if (readers[i].err)
			rerr = readers[i].err;
	/* The XSI strerror_r: thread-safe, unlike strerror. */
	if (rerr && strerror_r(rerr, ebuf, sizeof(ebuf)) != 0)
		snprintf(ebuf, sizeof(ebuf), "error %d", rerr);
	return sg_err_set(err, SG_E_INTERNAL,
			  "%s: reading the body file failed: %s", what,
			  rerr ? ebuf : curl_easy_strerror(cc));
}

/*
 * The handle's options: the request's own, then no kept connection for a
 * request that may not travel on one (it neither takes one from this
 * thread's multi handle nor leaves its own there).
 */
static sg_err prepare(CURL *e, const struct sg_http_request *req, struct xfer *x,
		      struct curl_slist *hdrs, bool reuse, const char *what,
		      struct sg_errinfo *err)
{
	sg_err rc = set_options(e, req, x, hdrs);

	if (!rc && !reuse &&
	    (curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L) != CURLE_OK ||
	     curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L) != CURLE_OK))
		rc = SG_E_INTERNAL;
	if (rc)
		sg_err_set(err, rc, "%s: curl refused an option", what);
	return rc;
}

static sg_err do_once(const struct sg_http_request *req,
		      struct sg_http_response *r, struct sg_cancel *cancel,
		      struct sg_errinfo *err, struct attempt *at)
{
	const char *method = req->method ? req->method : "GET";
	char host[300], what[340];
	struct xfer x = { .req = req, .r = r, .abort_rc = SG_OK };
	struct curl_slist *hdrs = NULL;
	struct reader *readers = NULL;
	curl_mime *mime = NULL;
	struct sg_http_curl_pair h = { 0 };
	bool added = false, reuse = false;
	CURLcode cc = CURLE_OK;
	sg_err rc;

	at->never_connected = false;
	response_reset(r);
	rc = check_request(req, method, host, sizeof(host), what, sizeof(what),
			   cancel, err);
	if (rc)
		goto out;
	/* After sg_http_curl_init: the share exists from then on. */
	reuse = share && (is_idempotent(req) || req->resend_safe);
	readers = calloc(req->nparts + 1, sizeof(*readers));
	if (!readers || !sg_http_curl_get(&h, reuse)) {
		rc = sg_err_set(err, SG_E_INTERNAL, "%s: out of memory", what);
		goto out;
	}
	rc = build_headers(req, &hdrs, what, err);
	if (!rc)
		rc = prepare(h.easy, req, &x, hdrs, reuse, what, err);
	if (!rc)
		rc = set_body(h.easy, req, method, readers, &mime, what, err);
	if (rc)
		goto out;
	if (curl_multi_add_handle(h.multi, h.easy) != CURLM_OK) {
		rc = sg_err_set(err, SG_E_INTERNAL, "%s: curl refused the request",
				what);
		goto out;
	}
	added = true;
	rc = transfer(h.multi, h.easy, what, &cc, cancel, err);
	if (rc)
		goto out;
	response_info(h.easy, r);
	if (cc != CURLE_OK)
		rc = transfer_failed(cc, h.easy, &x, readers, method, host, what, at, err);
out:
	if (added)
		curl_multi_remove_handle(h.multi, h.easy);
	sg_http_curl_put(&h);
	curl_mime_free(mime);
	curl_slist_free_all(hdrs);
	free(readers);
	return rc;
}

sg_err sg_http_do(const struct sg_http_request *req,
		  struct sg_http_response *r, struct sg_cancel *cancel,
		  struct sg_errinfo *err)
{
	struct attempt at;

	r->attempts = 1;
	return do_once(req, r, cancel, err, &at);
}

/* ---- Retries ------------------------------------------------------------ */

/* Milliseconds one Retry-After value asks for, or -1. */
static int64_t parse_retry_after(const char *v)
{
	int64_t secs = 0;
	const char *p = v;
	time_t when;

	while (*p == ' ' || *p == '\t')
		p++;
	if (*p >= '0' && *p <= '9') {
		for (; *p >= '0' && *p <= '9'; p++)
			if (secs < 1000000000)
				secs = secs * 10 + (*p - '0');
		while (*p == ' ' || *p == '\t')
			p++;
		return *p ? -1 : secs * 1000;
	}
	when = curl_getdate(v, NULL);
	if (when == (time_t)-1)
		return -1;
	secs = (int64_t)when - (int64_t)time(NULL);
	return secs > 0 ? secs * 1000 : 0;
}

int64_t sg_http_retry_after_ms(const struct sg_http_response *r)
{
	const char *n, *v;
	size_t pos = 0;
	int64_t best = -1, ms;

	while (sg_http_header_next(r, &pos, &n, &v)) {
		if (strcasecmp(n, "retry-after") != 0 &&
		    strncasecmp(n, "retry-after-", 12) != 0)
			continue;
		ms = parse_retry_after(v);
		if (ms > best)
			best = ms;
	}
	return best;
}

static bool is_idempotent(const struct sg_http_request *req)
{
	const char *m = req->method ? req->method : "GET";

	if (req->idempotent)
		return true;
	return strcmp(m, "POST") != 0 && strcmp(m, "PATCH") != 0;
}

/*
 * A number for the jitter.  Quality hardly matters; being thread-safe
 * without a lock does (rand() is neither).
 */
static uint64_t jitter_random(void)
{
	static atomic_uint_least64_t counter;
	uint64_t z = atomic_fetch_add(&counter, 1) * 0x9e3779b97f4a7c15ULL +
		     (uint64_t)sg_now_ns();

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int64_t backoff_ms(const struct sg_http_retry *p, int attempt)
{
	int64_t d = p->base_ms;

	for (int i = 1; i < attempt && d < p->max_delay_ms; i++)
		d *= 2;
	if (d > p->max_delay_ms)
		d = p->max_delay_ms;
	return d / 2 + (int64_t)(jitter_random() % (uint64_t)(d / 2 + 1));
}

sg_err sg_http_do_retry(const struct sg_http_request *req,
			struct sg_http_response *r,
			const struct sg_http_retry *policy,
			struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_http_retry p = { 0 };
	bool idem = is_idempotent(req);
	int64_t start = sg_now_ms();
	sg_err rc;

	if (policy)
		p = *policy;
	if (p.attempts <= 0)
		p.attempts = SG_HTTP_RETRY_ATTEMPTS;
	if (p.base_ms <= 0)
		p.base_ms = SG_HTTP_RETRY_BASE_MS;
	if (p.max_delay_ms <= 0)
		p.max_delay_ms = SG_HTTP_RETRY_MAX_DELAY_MS;

	for (int i = 1;; i++) {
		struct sg_errinfo once = { 0 };
		struct attempt at;
		bool again = false;
		int64_t delay = -1;

		rc = do_once(req, r, cancel, &once, &at);
		r->attempts = i;
		if (rc == SG_OK)
			again = idem && (r->status == 429 ||
					 (r->status >= 500 && r->status <= 599));
		else if (rc == SG_E_UNAVAILABLE)
			again = (idem || at.never_connected) && r->sunk == 0;
		if (again && i < p.attempts) {
			delay = rc == SG_OK ? sg_http_retry_after_ms(r) : -1;
			if (delay > p.max_delay_ms)
				again = false; /* the server says: not soon */
			else if (delay < 0)
				delay = backoff_ms(&p, i);
			if (p.max_total_ms > 0 &&
			    sg_now_ms() + delay - start > p.max_total_ms)
				again = false;
		}
		if (!again || i >= p.attempts) {
			if (rc)
				sg_err_set(err, rc, "%s", once.msg);
			return rc;
		}
		rc = sg_cancel_sleep(cancel, delay);
		if (rc) {
			char host[300];

			sg_http_url_host(req->url, host, sizeof(host));
			return sg_err_set(err, rc,
					  "%s %s was cancelled while waiting to "
					  "retry",
					  req->method ? req->method : "GET", host);
		}
	}
}

/* ---- Statuses and sinks ------------------------------------------------- */

sg_err sg_http_status_err(long status)
{
	if (status >= 200 && status < 300)
		return SG_OK;
	switch (status) {
	case 404:
		return SG_E_NOT_FOUND;
	case 401:
	case 403:
		return SG_E_PERMISSION;
	case 408:
	case 429:
	case 502:
	case 503:
	case 504:
		return SG_E_UNAVAILABLE;
	default:
		return SG_E_PROVIDER;
	}
}

sg_err sg_http_status_fail(const struct sg_http_request *req,
			   const struct sg_http_response *r,
			   struct sg_errinfo *err)
{
	sg_err code = sg_http_status_err(r->status);
	char host[300];

	if (!code)
		return SG_OK;
	sg_http_url_host(req->url, host, sizeof(host));
	return sg_err_set(err, code, "%s %s answered HTTP %ld",
			  req->method ? req->method : "GET", host, r->status);
}

sg_err sg_http_sink_fd(const char *data, size_t len, void *payload)
{
	struct sg_http_fd_sink *s = payload;

	if (len > s->max - s->written)
		return SG_E_TOO_LARGE;
	while (len > 0) {
		ssize_t w = write(s->fd, data, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return SG_E_INTERNAL;
		}
		data += w;
		len -= (size_t)w;
		s->written += (uint64_t)w;
	}
	return SG_OK;
}
