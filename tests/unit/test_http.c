/*
 * test_http.c - core/http.c against a tiny HTTP/1.1 server that runs
 * inside this test, on 127.0.0.1 with a port the kernel picks.
 *
 * The server is one thread answering one connection at a time from a
 * table of scripted routes (statuses, retries, slow and dropped replies, a
 * chunked NDJSON stream, a multipart check).  It logs when each request
 * arrived, so retry counts and the delays between tries are measured where
 * they happen.  Every connection's peer is checked to be 127.0.0.1, and
 * the proxy variables are cleared first, so no request can leave the
 * machine.  A second, TLS server with a certificate made at start-up
 * checks that peers are verified and that ca_file is honoured.  SIGPIPE
 * stays at its default action on the client side: libcurl must never
 * raise it (the servers' own writes are kept from raising it).
 */
/* _GNU_SOURCE: memmem, to look for the multipart markers in a body. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "core/http.h"
#include "sg_config.h"

/* ---- The server --------------------------------------------------------- */

#define LOG_MAX 256

struct hit {
	char path[64];
	int64_t ms;
};

static struct {
	int lfd;
	int port;
	pthread_t thread;
	atomic_bool stop;
	atomic_bool foreign_peer; /* a connection not from 127.0.0.1 */
	pthread_mutex_t mu;
	struct hit log[LOG_MAX];
	int nlog;
	char *last_head; /* the last request's line and headers */
	char *last_body;
	size_t last_body_len;
} srv = { .mu = PTHREAD_MUTEX_INITIALIZER };

static char base_url[64];

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static int sendf(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int sendf(int fd, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return write_all(fd, buf, (size_t)n);
}

/* Times path was requested since the last reset. */
static int hits(const char *path)
{
	int n = 0;

	pthread_mutex_lock(&srv.mu);
	for (int i = 0; i < srv.nlog; i++)
		if (strcmp(srv.log[i].path, path) == 0)
			n++;
	pthread_mutex_unlock(&srv.mu);
	return n;
}

/* When the k-th request (from 0) for path arrived, or -1. */
static int64_t hit_ms(const char *path, int k)
{
	int64_t ms = -1;

	pthread_mutex_lock(&srv.mu);
	for (int i = 0; i < srv.nlog; i++)
		if (strcmp(srv.log[i].path, path) == 0 && k-- == 0) {
			ms = srv.log[i].ms;
			break;
		}
	pthread_mutex_unlock(&srv.mu);
	return ms;
}

/* How many earlier requests path had (0 for the first). */
static int log_hit(const char *path)
{
	int before = 0;

	pthread_mutex_lock(&srv.mu);
	for (int i = 0; i < srv.nlog; i++)
		if (strcmp(srv.log[i].path, path) == 0)
			before++;
	if (srv.nlog < LOG_MAX) {
		snprintf(srv.log[srv.nlog].path, sizeof(srv.log[0].path), "%s",
			 path);
		srv.log[srv.nlog].ms = sg_now_ms();
		srv.nlog++;
	}
	pthread_mutex_unlock(&srv.mu);
	return before;
}

static void srv_reset(void)
{
	pthread_mutex_lock(&srv.mu);
	srv.nlog = 0;
	pthread_mutex_unlock(&srv.mu);
}

/*
 * Wait up to ms for the client to go away; true if it did.  The slow
 * routes use it so an aborted client frees the (serial) server at once.
 */
static bool client_gone(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;

	if (poll(&p, 1, ms) <= 0)
		return false;
	return recv(fd, &c, 1, MSG_PEEK) <= 0;
}

static void reply(int fd, int status, const char *extra, const char *body,
		  size_t len)
{
	sendf(fd,
	      "HTTP/1.1 %d X\r\nContent-Length: %zu\r\nConnection: close\r\n"
	      "%s\r\n",
	      status, len, extra ? extra : "");
	write_all(fd, body, len);
}

static void reply_str(int fd, int status, const char *extra, const char *body)
{
	reply(fd, status, extra, body, strlen(body));
}

static const char *find_header(const char *head, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = strstr(head, "\r\n"); p; p = strstr(p, "\r\n")) {
		p += 2;
		if (strncasecmp(p, name, n) == 0 && p[n] == ':')
			return p + n + 1;
	}
	return NULL;
}

static void route(int fd, const char *method, const char *path,
		  const char *query, const char *head, const char *body,
		  size_t blen)
{
	int before = log_hit(path);
	char extra[256];

	if (strcmp(path, "/ok") == 0) {
		reply_str(fd, 200,
			  "X-Test: yes\r\nX-Dup: one\r\nx-dup: two\r\n"
			  "X-RateLimit-Reset-Sandbox: 42\r\n",
			  "hello world");
	} else if (strcmp(path, "/big") == 0) {
		long n = query ? strtol(query + 2, NULL, 10) : 0;
		char *b = malloc((size_t)n + 1);

		for (long i = 0; i < n; i++)
			b[i] = (char)('a' + i % 26);
		reply(fd, 200, NULL, b, (size_t)n);
		free(b);
	} else if (strcmp(path, "/missing") == 0) {
		reply_str(fd, 404, "Content-Type: application/json\r\n",
			  "{\"message\":\"no such thing\"}");
	} else if (strcmp(path, "/flaky") == 0) {
		if (before == 0)
			reply_str(fd, 500, NULL, "boom");
		else
			reply_str(fd, 200, NULL, "recovered");
	} else if (strcmp(path, "/always503") == 0) {
		reply_str(fd, 503, NULL, "down");
	} else if (strcmp(path, "/busy") == 0) {
		if (before == 0)
			reply_str(fd, 429, "Retry-After: 1\r\n", "slow down");
		else
			reply_str(fd, 200, NULL, "welcome");
	} else if (strcmp(path, "/busy-long") == 0) {
		reply_str(fd, 429, "Retry-After: 3600\r\n", "come back later");
	} else if (strcmp(path, "/busy-daytona") == 0) {
		if (before == 0)
			reply_str(fd, 429,
				  "X-RateLimit-Remaining-sandbox-create: 0\r\n"
				  "Retry-After-sandbox-create: 1\r\n",
				  "{\"statusCode\":429}");
		else
			reply_str(fd, 200, NULL, "created");
	} else if (strcmp(path, "/date") == 0) {
		time_t when = time(NULL) + 3;
		struct tm tm;
		char date[64];

		gmtime_r(&when, &tm);
		strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
		snprintf(extra, sizeof(extra), "Retry-After: %s\r\n", date);
		reply_str(fd, 503, extra, "later");
	} else if (strcmp(path, "/slow") == 0) {
		sendf(fd, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n");
		if (!client_gone(fd, 3000))
			write_all(fd, "late", 4);
	} else if (strcmp(path, "/drop") == 0) {
		/* Say nothing at all. */
	} else if (strcmp(path, "/drop-once") == 0) {
		if (before > 0)
			reply_str(fd, 200, NULL, "second time lucky");
	} else if (strcmp(path, "/ndjson") == 0) {
		sendf(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson"
			  "\r\nTransfer-Encoding: chunked\r\n\r\n");
		for (int i = 0; i < 5; i++) {
			char line[64];
			int n = snprintf(line, sizeof(line),
					 "{\"stream\":\"stdout\",\"n\":%d}\n", i);

			sendf(fd, "%x\r\n%s\r\n", n, line);
			if (client_gone(fd, 60))
				return;
		}
		sendf(fd, "0\r\n\r\n");
	} else if (strcmp(path, "/upload") == 0) {
		const char *ppath = memmem(body, blen, "name=\"files[0].path\"", 20);
		const char *pfile = memmem(body, blen,
					   "name=\"files[0].file\"; "
					   "filename=\"a.txt\"", 37);
		const char *pval = memmem(body, blen, "/remote/a.txt", 13);
		const char *ptype = memmem(body, blen,
					   "Content-Type: text/plain", 24);
		const char *pdata = memmem(body, blen, "file contents\n", 14);

		if (strcmp(method, "POST") == 0 && ppath && pfile && pval &&
		    ptype && pdata && ppath < pfile && pval < pfile &&
		    pfile < pdata && find_header(head, "Content-Type") &&
		    strstr(find_header(head, "Content-Type"),
			   "multipart/form-data; boundary="))
			reply_str(fd, 200, NULL, "parts ok");
		else
			reply_str(fd, 400, NULL, "parts missing");
	} else if (strcmp(path, "/echo") == 0) {
		snprintf(extra, sizeof(extra), "X-Got-Method: %s\r\n", method);
		reply(fd, 200, extra, body, blen);
	} else if (strcmp(path, "/headers") == 0) {
		reply_str(fd, 200, NULL, head);
	} else if (strcmp(path, "/redirect") == 0) {
		snprintf(extra, sizeof(extra), "Location: %s/ok\r\n", base_url);
		reply_str(fd, 302, extra, "");
	} else if (strcmp(path, "/error-big") == 0) {
		char *b = malloc(200000);

		memset(b, 'E', 200000);
		reply(fd, 500, NULL, b, 200000);
		free(b);
	} else {
		reply_str(fd, 404, NULL, "no route");
	}
}

/* Read one request (line, headers, Content-Length body) and answer it. */
static void serve(int fd)
{
	size_t cap = 4 << 20, len = 0, hlen, blen = 0;
	char *buf = malloc(cap + 1), *end, *sp, *q;
	char method[16] = "", path[256] = "";
	const char *cl, *query = NULL;

	while (!(end = len ? memmem(buf, len, "\r\n\r\n", 4) : NULL)) {
		ssize_t n = recv(fd, buf + len, cap - len, 0);

		if (n <= 0 || (len += (size_t)n) >= cap)
			goto out;
	}
	hlen = (size_t)(end - buf) + 4;
	buf[hlen - 2] = '\0';
	cl = find_header(buf, "Content-Length");
	if (cl)
		blen = strtoul(cl, NULL, 10);
	if (find_header(buf, "Transfer-Encoding") || hlen + blen > cap) {
		reply_str(fd, 411, NULL, "send a length");
		goto out;
	}
	while (len < hlen + blen) {
		ssize_t n = recv(fd, buf + len, cap - len, 0);

		if (n <= 0)
			goto out;
		len += (size_t)n;
	}
	sp = strchr(buf, ' ');
	if (!sp || sp - buf >= (long)sizeof(method))
		goto out;
	memcpy(method, buf, (size_t)(sp - buf));
	snprintf(path, sizeof(path), "%.*s", (int)strcspn(sp + 1, " "), sp + 1);
	q = strchr(path, '?');
	if (q) {
		*q = '\0';
		query = q + 1;
	}
	pthread_mutex_lock(&srv.mu);
	free(srv.last_head);
	free(srv.last_body);
	srv.last_head = strdup(buf);
	srv.last_body = malloc(blen + 1);
	memcpy(srv.last_body, buf + hlen, blen);
	srv.last_body[blen] = '\0';
	srv.last_body_len = blen;
	pthread_mutex_unlock(&srv.mu);
	route(fd, method, path, query, buf, buf + hlen, blen);
out:
	free(buf);
}

static void *server_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&srv.stop)) {
		struct pollfd p = { .fd = srv.lfd, .events = POLLIN };
		struct sockaddr_in peer;
		socklen_t plen = sizeof(peer);
		int fd;

		if (poll(&p, 1, 50) <= 0)
			continue;
		fd = accept(srv.lfd, (struct sockaddr *)&peer, &plen);
		if (fd < 0)
			continue;
		if (peer.sin_family != AF_INET ||
		    peer.sin_addr.s_addr != htonl(INADDR_LOOPBACK))
			atomic_store(&srv.foreign_peer, true);
		serve(fd);
		close(fd);
	}
	return NULL;
}

/* ---- The TLS server ----------------------------------------------------- */

static struct {
	SSL_CTX *ctx;
	int lfd;
	int port;
	pthread_t thread;
	atomic_bool stop;
	atomic_int handshakes; /* completed TLS handshakes */
	char ca_path[64];      /* the server's certificate, as a CA file */
} tls;

/* A self-signed P-256 certificate for IP 127.0.0.1, valid for an hour. */
static X509 *make_cert(EVP_PKEY *key)
{
	X509 *x = X509_new();
	X509_NAME *name;
	X509V3_CTX v3;
	X509_EXTENSION *ext;
	const char *const exts[][2] = {
		{ "subjectAltName", "IP:127.0.0.1" },
		{ "basicConstraints", "critical,CA:TRUE" },
	};

	if (!x)
		return NULL;
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, key);
	name = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
				   (const unsigned char *)"sandgate test", -1,
				   -1, 0);
	X509_set_issuer_name(x, name);
	X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
	for (size_t i = 0; i < 2; i++) {
		ext = X509V3_EXT_conf(NULL, &v3, exts[i][0], exts[i][1]);
		if (!ext) {
			X509_free(x);
			return NULL;
		}
		X509_add_ext(x, ext, -1);
		X509_EXTENSION_free(ext);
	}
	if (!X509_sign(x, key, EVP_sha256())) {
		X509_free(x);
		return NULL;
	}
	return x;
}

static void *tls_main(void *arg)
{
	static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n"
				     "Connection: close\r\n\r\nsecure";
	sigset_t pipe_set;

	(void)arg;
	/*
	 * OpenSSL writes with write(): a client that already left would
	 * raise SIGPIPE.  Blocked in this thread only, so the client side of
	 * the test still runs with SIGPIPE at its default action and would
	 * die if libcurl ever raised it.
	 */
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
	while (!atomic_load(&tls.stop)) {
		struct pollfd p = { .fd = tls.lfd, .events = POLLIN };
		struct timeval tv = { .tv_sec = 2 };
		char buf[4096];
		size_t len = 0;
		SSL *s;
		int fd, n;

		if (poll(&p, 1, 50) <= 0)
			continue;
		fd = accept(tls.lfd, NULL, NULL);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		s = SSL_new(tls.ctx);
		if (s && SSL_set_fd(s, fd) == 1 && SSL_accept(s) == 1) {
			atomic_fetch_add(&tls.handshakes, 1);
			while (len < sizeof(buf) - 1 &&
			       (n = SSL_read(s, buf + len,
					     (int)(sizeof(buf) - 1 - len))) > 0) {
				len += (size_t)n;
				buf[len] = '\0';
				if (strstr(buf, "\r\n\r\n"))
					break;
			}
			SSL_write(s, answer, (int)sizeof(answer) - 1);
			SSL_shutdown(s);
		}
		SSL_free(s);
		close(fd);
	}
	return NULL;
}

static int tls_start(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	EVP_PKEY *key = EVP_EC_gen("P-256");
	X509 *cert = key ? make_cert(key) : NULL;
	FILE *f;
	int fd, rc = -1;

	snprintf(tls.ca_path, sizeof(tls.ca_path), "/tmp/sg-test-ca-XXXXXX");
	fd = mkstemp(tls.ca_path);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!cert || !f || !PEM_write_X509(f, cert))
		goto out;
	tls.ctx = SSL_CTX_new(TLS_server_method());
	if (!tls.ctx || SSL_CTX_use_certificate(tls.ctx, cert) != 1 ||
	    SSL_CTX_use_PrivateKey(tls.ctx, key) != 1)
		goto out;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	tls.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (tls.lfd < 0 || bind(tls.lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(tls.lfd, 16) < 0 ||
	    getsockname(tls.lfd, (struct sockaddr *)&a, &alen) < 0)
		goto out;
	tls.port = ntohs(a.sin_port);
	rc = pthread_create(&tls.thread, NULL, tls_main, NULL) ? -1 : 0;
out:
	if (f)
		fclose(f);
	else if (fd >= 0)
		close(fd);
	X509_free(cert);
	EVP_PKEY_free(key);
	return rc;
}

static void tls_stop(void)
{
	atomic_store(&tls.stop, true);
	pthread_join(tls.thread, NULL);
	close(tls.lfd);
	SSL_CTX_free(tls.ctx);
	unlink(tls.ca_path);
}

static int srv_start(void **state)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	int one = 1;

	(void)state;
	/* A proxy from the environment would take requests off loopback. */
	unsetenv("http_proxy");
	unsetenv("https_proxy");
	unsetenv("HTTP_PROXY");
	unsetenv("HTTPS_PROXY");
	unsetenv("ALL_PROXY");
	unsetenv("all_proxy");
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	srv.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (srv.lfd < 0)
		return -1;
	setsockopt(srv.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(srv.lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(srv.lfd, 64) < 0 ||
	    getsockname(srv.lfd, (struct sockaddr *)&a, &alen) < 0)
		return -1;
	srv.port = ntohs(a.sin_port);
	snprintf(base_url, sizeof(base_url), "http://127.0.0.1:%d", srv.port);
	if (pthread_create(&srv.thread, NULL, server_main, NULL))
		return -1;
	return tls_start();
}

static int srv_stop(void **state)
{
	(void)state;
	tls_stop();
	atomic_store(&srv.stop, true);
	pthread_join(srv.thread, NULL);
	close(srv.lfd);
	free(srv.last_head);
	free(srv.last_body);
	return 0;
}

/* ---- Client helpers ----------------------------------------------------- */

/* Per thread: the parallel tests build URLs from several threads at once. */
static _Thread_local char url_buf[8][256];
static _Thread_local int url_next;

static const char *url(const char *path)
{
	char *u = url_buf[url_next++ % 8];

	snprintf(u, sizeof(url_buf[0]), "%s%s", base_url, path);
	return u;
}

/* Every response must have come from loopback. */
static void assert_loopback(const struct sg_http_response *r)
{
	assert_string_equal(r->primary_ip, "127.0.0.1");
	assert_false(atomic_load(&srv.foreign_peer));
}

static void setup_each(void)
{
	srv_reset();
}

/* ---- Tests -------------------------------------------------------------- */

static void test_get_ok(void **state)
{
	const char *hdrs[] = { "X-Custom: 1", NULL };
	struct sg_http_request req = { .url = url("/ok"), .headers = hdrs };
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };
	const char *n, *v;
	size_t pos = 0;
	int count = 0;

	(void)state;
	setup_each();
	sg_http_response_init(&r, SG_KiB);
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_OK);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.version, 1);
	assert_int_equal(r.attempts, 1);
	assert_string_equal(r.body.p, "hello world");
	assert_loopback(&r);
	assert_string_equal(sg_http_header(&r, "x-test"), "yes");
	assert_string_equal(sg_http_header(&r, "X-TEST"), "yes");
	assert_string_equal(sg_http_header(&r, "Content-Length"), "11");
	assert_string_equal(sg_http_header(&r, "x-dup"), "two");
	assert_string_equal(sg_http_header(&r, "x-ratelimit-reset-sandbox"),
			    "42");
	assert_null(sg_http_header(&r, "x-absent"));
	while (sg_http_header_next(&r, &pos, &n, &v)) {
		if (strcmp(n, "X-Dup") == 0)
			assert_string_equal(v, "one");
		count++;
	}
	assert_int_equal(count, 6);
	assert_int_equal(sg_http_retry_after_ms(&r), -1);
	assert_int_equal(hits("/ok"), 1);

	/* HEAD: the same headers, no body. */
	req.method = "HEAD";
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_OK);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body.len, 0);
	assert_string_equal(sg_http_header(&r, "x-test"), "yes");
	sg_http_response_release(&r);
}

static void test_statuses_are_results(void **state)
{
	struct sg_http_request req = { .url = url("/missing") };
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };
	char want[128];

	(void)state;
	setup_each();
	sg_http_response_init(&r, SG_KiB);
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_OK);
	assert_int_equal(r.status, 404);
	assert_string_equal(r.body.p, "{\"message\":\"no such thing\"}");
	assert_int_equal(err.code, SG_OK);
	assert_int_equal(sg_http_status_fail(&req, &r, &err), SG_E_NOT_FOUND);
	snprintf(want, sizeof(want), "GET 127.0.0.1:%d answered HTTP 404",
		 srv.port);
	assert_string_equal(err.msg, want);

	/* Redirects are statuses too: never followed. */
	req.url = url("/redirect");
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_OK);
	assert_int_equal(r.status, 302);
	assert_int_equal(hits("/ok"), 0);
	sg_http_response_release(&r);
}

static void test_status_err(void **state)
{
	(void)state;
	assert_int_equal(sg_http_status_err(200), SG_OK);
	assert_int_equal(sg_http_status_err(204), SG_OK);
	assert_int_equal(sg_http_status_err(404), SG_E_NOT_FOUND);
	assert_int_equal(sg_http_status_err(401), SG_E_PERMISSION);
	assert_int_equal(sg_http_status_err(403), SG_E_PERMISSION);
	assert_int_equal(sg_http_status_err(408), SG_E_UNAVAILABLE);
	assert_int_equal(sg_http_status_err(429), SG_E_UNAVAILABLE);
	assert_int_equal(sg_http_status_err(502), SG_E_UNAVAILABLE);
	assert_int_equal(sg_http_status_err(503), SG_E_UNAVAILABLE);
	assert_int_equal(sg_http_status_err(504), SG_E_UNAVAILABLE);
	assert_int_equal(sg_http_status_err(500), SG_E_PROVIDER);
	assert_int_equal(sg_http_status_err(501), SG_E_PROVIDER);
	assert_int_equal(sg_http_status_err(400), SG_E_PROVIDER);
	assert_int_equal(sg_http_status_err(409), SG_E_PROVIDER);
	assert_int_equal(sg_http_status_err(422), SG_E_PROVIDER);
	assert_int_equal(sg_http_status_err(302), SG_E_PROVIDER);
	assert_int_equal(sg_http_status_err(0), SG_E_PROVIDER);
}

static void test_body_cap(void **state)
{
	struct sg_http_request req = { .url = url("/big?n=1001") };
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };

	(void)state;
	setup_each();
	sg_http_response_init(&r, 1000);
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_E_TOO_LARGE);
	assert_int_equal(err.code, SG_E_TOO_LARGE);
	assert_true(r.body.len <= 1000);
	sg_err_clear(&err);
	req.url = url("/big?n=1000");
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_OK);
	assert_int_equal(r.body.len, 1000);
	assert_int_equal(r.body.p[999], 'a' + 999 % 26);

	/* An error body is clipped, never too_large: the status matters. */
	req.url = url("/error-big");
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_OK);
	assert_int_equal(r.status, 500);
	assert_int_equal(r.body.len, 1000);
	assert_true(r.body_clipped);
	sg_http_response_release(&r);
}

static const struct sg_http_retry fast = { .attempts = 3, .base_ms = 40,
					   .max_delay_ms = 2000 };

static void test_retry_5xx(void **state)
{
	struct sg_http_request req = { .url = url("/flaky") };
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };

	(void)state;
	setup_each();
	sg_http_response_init(&r, SG_KiB);
	assert_int_equal(sg_http_do_retry(&req, &r, &fast, NULL, &err), SG_OK);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body.p, "recovered");
	assert_int_equal(r.attempts, 2);
	assert_int_equal(hits("/flaky"), 2);
	assert_loopback(&r);

	/* Exhausted: the last response comes back, with its status. */
	req.url = url("/always503");
	assert_int_equal(sg_http_do_retry(&req, &r, &fast, NULL, &err), SG_OK);
	assert_int_equal(r.status, 503);
	assert_int_equal(r.attempts, 3);
	assert_int_equal(hits("/always503"), 3);
	sg_http_response_release(&r);
}

static void test_backoff_delays(void **state)
{
	const struct sg_http_retry p = { .attempts = 4, .base_ms = 100,
					 .max_delay_ms = 150 };
	struct sg_http_request req = { .url = url("/always503") };
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };
	int64_t gap[3];

	(void)state;
	setup_each();
	sg_http_response_init(&r, SG_KiB);
	assert_int_equal(sg_http_do_retry(&req, &r, &p, NULL, &err), SG_OK);
	assert_int_equal(r.attempts, 4);
	for (int i = 0; i < 3; i++)
		gap[i] = hit_ms("/always503", i + 1) - hit_ms("/always503", i);
	/* 100 ms with jitter: 50..100; then capped at 150: 75..150. */
	assert_true(gap[0] >= 50 && gap[0] < 100 + 80);
	assert_true(gap[1] >= 75 && gap[1] < 150 + 80);
	assert_true(gap[2] >= 75 && gap[2] < 150 + 80);
	sg_http_response_release(&r);
}

static void test_post_not_retried(void **state)
{
	const char body[] = "{\"name\":\"x\"}";
	struct sg_http_request req = { .method = "POST",
				       .url = url("/always503"),
				       .content_type = "application/json",
				       .body = body,
				       .body_len = sizeof(body) - 1 };
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };

	(void)state;
	setup_each();
	sg_http_response_init(&r, SG_KiB);
	assert_int_equal(sg_http_do_retry(&req, &r, &fast, NULL, &err), SG_OK);
	assert_int_equal(r.status, 503);
	assert_int_equal(r.attempts, 1);
	assert_int_equal(hits("/always503"), 1);

	/* A dropped connection after sending: the server may have acted. */
	req.url = url("/drop");
	assert_int_equal(sg_http_do_retry(&req, &r, &fast, NULL, &err),
			 SG_E_UNAVAILABLE);
	assert_int_equal(r.attempts, 1);
	assert_int_equal(hits("/drop"), 1);

	/* Marked idempotent (a unique name, say): repeated. */
	req.url = url("/flaky");
	req.idempotent = true;
	sg_err_clear(&err);
	assert_int_equal(sg_http_do_retry(&req, &r, &fast, NULL, &err), SG_OK);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.attempts, 2);
	sg_http_response_release(&r);
}

static void test_retry_after(void **state)
{
	struct sg_http_request req = { .url = url("/busy") };
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };
	int64_t t0, gap;

	(void)state;
	setup_each();
	sg_http_response_init(&r, SG_KiB);
	assert_int_equal(sg_http_do_retry(&req, &r, &fast, NULL, &err), SG_OK);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.attempts, 2);
	gap = hit_ms("/busy", 1) - hit_ms("/busy", 0);
	assert_true(gap >= 990 && gap < 1500);

	/* Daytona's per-throttler header counts the same. */
	req.url = url("/busy-daytona");
	assert_int_equal(sg_http_do_retry(&req, &r, &fast, NULL, &err), SG_OK);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.attempts, 2);
	gap = hit_ms("/busy-daytona", 1) - hit_ms("/busy-daytona", 0);
	assert_true(gap >= 990 && gap < 1500);

	/* Longer than the policy allows: give up at once with the 429. */
	req.url = url("/busy-long");
	t0 = sg_now_ms();
	assert_int_equal(sg_http_do_retry(&req, &r, &fast, NULL, &err), SG_OK);
	assert_int_equal(r.status, 429);
	assert_int_equal(r.attempts, 1);
	assert_int_equal(sg_http_retry_after_ms(&r), 3600 * 1000);
	/* At once: seconds, not the hour it was asked to wait (the bound
	 * leaves room for a sanitizer build on a busy machine). */
	assert_true(sg_now_ms() - t0 < 3000);
	sg_http_response_release(&r);
}

static void test_retry_after_date(void **state)
{
	struct sg_http_request req = { .url = url("/date") };
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };
	int64_t ms;

	(void)state;
	setup_each();
	sg_http_response_init(&r, SG_KiB);
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_OK);
	assert_int_equal(r.status, 503);
	ms = sg_http_retry_after_ms(&r);
	assert_true(ms >= 1000 && ms <= 4000);
	sg_http_response_release(&r);
}

static void test_dropped_connection(void **state)
{
	const char *hdrs[] = { "Authorization: Bearer SECRET-TOKEN-123", NULL };
	struct sg_http_request req = { .url = url("/drop?key=SECRET-QUERY"),
				       .headers = hdrs };
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };
	char host[64];

	(void)state;
	setup_each();
	sg_http_response_init(&r, SG_KiB);
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_E_UNAVAILABLE);
	snprintf(host, sizeof(host), "GET 127.0.0.1:%d", srv.port);
	assert_non_null(strstr(err.msg, host));
	/* Credentials travel in headers and URLs: never in a sentence. */
	assert_null(strstr(err.msg, "SECRET"));
	assert_null(strstr(err.msg, "/drop"));

	/* Idempotent: retried, and the second try works. */
	req.url = url("/drop-once");
	sg_err_clear(&err);
	assert_int_equal(sg_http_do_retry(&req, &r, &fast, NULL, &err), SG_OK);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.attempts, 2);
	assert_int_equal(err.code, SG_OK);
	sg_http_response_release(&r);
}

static void test_connect_refused(void **state)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	char dead[64];
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sg_http_request req = { .method = "POST", .url = dead };
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };

	(void)state;
	/* A port that was just free: bound, never listened on. */
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	snprintf(dead, sizeof(dead), "http://127.0.0.1:%d/x", ntohs(a.sin_port));
	sg_http_response_init(&r, SG_KiB);
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_E_UNAVAILABLE);
	assert_int_equal(r.status, 0);

	/* Never connected, so nothing was sent: even a POST may go again. */
	sg_err_clear(&err);
	assert_int_equal(sg_http_do_retry(&req, &r, &fast, NULL, &err),
			 SG_E_UNAVAILABLE);
	assert_int_equal(r.attempts, 3);
	sg_http_response_release(&r);
	close(fd);
}

static void test_timeout(void **state)
{
	struct sg_http_request req = { .url = url("/slow"), .timeout_ms = 200 };
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };
	int64_t t0 = sg_now_ms(), took;

	(void)state;
	setup_each();
	sg_http_response_init(&r, SG_KiB);
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_E_TIMEOUT);
	took = sg_now_ms() - t0;
	assert_true(took >= 190 && took < 1000);
	assert_int_equal(r.status, 200); /* the headers had arrived */
	sg_http_response_release(&r);
}

struct firer {
	struct sg_cancel *cancel;
	int delay_ms;
	int64_t fired_ms;
};

static void *fire_later(void *arg)
{
	struct firer *f = arg;

	usleep((useconds_t)f->delay_ms * 1000);
	f->fired_ms = sg_now_ms();
	sg_cancel_fire(f->cancel, SG_E_CANCELLED);
	return NULL;
}

static void test_cancel(void **state)
{
	struct sg_http_request req = { .url = url("/slow") };
	const struct sg_http_retry slow = { .attempts = 3, .base_ms = 5000,
					    .max_delay_ms = 5000 };
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };
	struct sg_cancel cancel;
	/*
	 * Past curl's own early timers (happy eyeballs wakes it at 200 ms),
	 * so only the cancel fd can end this wait in time.
	 */
	struct firer f = { .cancel = &cancel, .delay_ms = 400 };
	pthread_t t;
	int64_t done;

	(void)state;
	setup_each();
	sg_http_response_init(&r, SG_KiB);
	assert_int_equal(sg_cancel_init(&cancel), SG_OK);
	assert_int_equal(pthread_create(&t, NULL, fire_later, &f), 0);
	assert_int_equal(sg_http_do(&req, &r, &cancel, &err), SG_E_CANCELLED);
	done = sg_now_ms();
	pthread_join(t, NULL);
	assert_true(done - f.fired_ms < 200);
	assert_int_equal(err.code, SG_E_CANCELLED);
	sg_cancel_release(&cancel);

	/* Cancelled while sleeping between tries. */
	assert_int_equal(sg_cancel_init(&cancel), SG_OK);
	req.url = url("/always503");
	sg_err_clear(&err);
	assert_int_equal(pthread_create(&t, NULL, fire_later, &f), 0);
	assert_int_equal(sg_http_do_retry(&req, &r, &slow, &cancel, &err),
			 SG_E_CANCELLED);
	done = sg_now_ms();
	pthread_join(t, NULL);
	assert_true(done - f.fired_ms < 200);
	assert_int_equal(r.attempts, 1);

	/* Already fired: nothing is sent. */
	srv_reset();
	assert_int_equal(sg_http_do(&req, &r, &cancel, &err), SG_E_CANCELLED);
	assert_int_equal(hits("/always503"), 0);
	sg_cancel_release(&cancel);
	sg_http_response_release(&r);
}

struct lines {
	char text[1024];
	size_t len;
	int calls;
	int64_t first_ms, last_ms;
	bool fail;
};

static sg_err collect(const char *data, size_t len, void *payload)
{
	struct lines *l = payload;

	if (l->fail)
		return SG_E_PROVIDER;
	if (len > sizeof(l->text) - 1 - l->len)
		return SG_E_TOO_LARGE;
	memcpy(l->text + l->len, data, len);
	l->len += len;
	l->text[l->len] = '\0';
	if (l->calls++ == 0)
		l->first_ms = sg_now_ms();
	l->last_ms = sg_now_ms();
	return SG_OK;
}

static void test_ndjson_stream(void **state)
{
	struct lines l = { .len = 0 };
	struct sg_http_request req = { .url = url("/ndjson"), .sink = collect,
				       .sink_payload = &l };
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };
	char want[512] = "";
	size_t n = 0;

	(void)state;
	setup_each();
	for (int i = 0; i < 5; i++)
		n += (size_t)snprintf(want + n, sizeof(want) - n,
				      "{\"stream\":\"stdout\",\"n\":%d}\n", i);
	sg_http_response_init(&r, SG_HTTP_ERROR_BODY);
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_OK);
	assert_int_equal(r.status, 200);
	assert_string_equal(sg_http_header(&r, "content-type"),
			    "application/x-ndjson");
	assert_string_equal(l.text, want);
	assert_int_equal(r.sunk, n);
	assert_int_equal(r.body.len, 0);
	/* Lines arrived as they were sent (60 ms apart), not all at the end. */
	assert_true(l.calls >= 3);
	assert_true(l.last_ms - l.first_ms >= 150);

	/* The sink can stop the stream with its own code. */
	memset(&l, 0, sizeof(l));
	l.fail = true;
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_E_PROVIDER);

	/* Error statuses do not reach the sink: their body is the message. */
	memset(&l, 0, sizeof(l));
	req.url = url("/missing");
	sg_err_clear(&err);
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_OK);
	assert_int_equal(r.status, 404);
	assert_int_equal(l.calls, 0);
	assert_int_equal(r.sunk, 0);
	assert_string_equal(r.body.p, "{\"message\":\"no such thing\"}");
	sg_http_response_release(&r);
}

static FILE *temp_with(const void *data, size_t len)
{
	FILE *f = tmpfile();

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fflush(f), 0);
	return f;
}

static void test_fd_sink(void **state)
{
	FILE *f = tmpfile();
	struct sg_http_fd_sink sink = { .fd = fileno(f), .max = 200000 };
	struct sg_http_request req = { .url = url("/big?n=100000"),
				       .sink = sg_http_sink_fd,
				       .sink_payload = &sink };
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };
	char *back = malloc(100001);

	(void)state;
	setup_each();
	sg_http_response_init(&r, SG_HTTP_ERROR_BODY);
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_OK);
	assert_int_equal(sink.written, 100000);
	assert_int_equal(pread(fileno(f), back, 100001, 0), 100000);
	for (int i = 0; i < 100000; i++)
		assert_int_equal(back[i], 'a' + i % 26);

	sink.max = 1000;
	sink.written = 0;
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_E_TOO_LARGE);
	sg_http_response_release(&r);
	free(back);
	fclose(f);
}

static void test_multipart(void **state)
{
	FILE *f = temp_with("junk:file contents\n", 19);
	const struct sg_http_source src = { .fd = fileno(f), .offset = 5,
					    .len = -1 };
	const struct sg_http_part parts[] = {
		{ .name = "files[0].path", .data = "/remote/a.txt", .len = 13 },
		{ .name = "files[0].file", .filename = "a.txt",
		  .content_type = "text/plain", .file = &src },
	};
	struct sg_http_request req = { .method = "POST", .url = url("/upload"),
				       .parts = parts, .nparts = 2 };
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };

	(void)state;
	setup_each();
	sg_http_response_init(&r, SG_KiB);
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_OK);
	assert_string_equal(r.body.p, "parts ok");
	assert_int_equal(r.status, 200);

	/* The server really checks: a wrong part name is refused. */
	const struct sg_http_part wrong[] = {
		{ .name = "path", .data = "/remote/a.txt", .len = 13 },
		{ .name = "file", .filename = "a.txt", .file = &src },
	};
	req.parts = wrong;
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_OK);
	assert_int_equal(r.status, 400);
	sg_http_response_release(&r);
	fclose(f);
}

static void test_file_body(void **state)
{
	size_t n = 300000;
	char *data = malloc(n);
	FILE *f;
	int pfd[2];
	struct sg_http_source src = { .offset = 10, .len = -1 };
	struct sg_http_request req = { .method = "PUT", .url = url("/echo"),
				       .body_file = &src,
				       .content_type = "application/octet-stream" };
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };

	(void)state;
	setup_each();
	for (size_t i = 0; i < n; i++)
		data[i] = (char)(i * 13 + 1);
	f = temp_with(data, n);
	src.fd = fileno(f);
	sg_http_response_init(&r, SG_MiB);
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_OK);
	assert_int_equal(r.status, 200);
	assert_string_equal(sg_http_header(&r, "x-got-method"), "PUT");
	assert_int_equal(r.body.len, n - 10);
	assert_memory_equal(r.body.p, data + 10, n - 10);

	/* A fixed length from an offset; the file position is not used. */
	src.offset = 100;
	src.len = 50;
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_OK);
	assert_int_equal(r.body.len, 50);
	assert_memory_equal(r.body.p, data + 100, 50);

	/* Retrying repeats the same bytes. */
	req.url = url("/flaky");
	assert_int_equal(sg_http_do_retry(&req, &r, &fast, NULL, &err), SG_OK);
	assert_int_equal(r.attempts, 2);
	pthread_mutex_lock(&srv.mu);
	assert_int_equal(srv.last_body_len, 50);
	assert_memory_equal(srv.last_body, data + 100, 50);
	pthread_mutex_unlock(&srv.mu);

	/* A pipe cannot be read twice: refused before anything is sent. */
	assert_int_equal(pipe(pfd), 0);
	src.fd = pfd[0];
	srv_reset();
	req.url = url("/echo");
	assert_int_equal(sg_http_do(&req, &r, NULL, &err),
			 SG_E_INVALID_ARGUMENT);
	assert_int_equal(hits("/echo"), 0);
	close(pfd[0]);
	close(pfd[1]);
	sg_http_response_release(&r);
	fclose(f);
	free(data);
}

static void test_request_shape(void **state)
{
	const char *hdrs[] = { "X-Custom: 1", "Accept:", NULL };
	struct sg_http_request req = { .url = url("/headers"), .headers = hdrs,
				       .content_type = "application/json" };
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };

	(void)state;
	setup_each();
	sg_http_response_init(&r, SG_KiB * 8);
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_OK);
	assert_non_null(strstr(r.body.p, "GET /headers HTTP/1.1\r\n"));
	assert_non_null(strstr(r.body.p, "User-Agent: sandgate/" SG_VERSION
					 "\r\n"));
	assert_non_null(strstr(r.body.p, "X-Custom: 1\r\n"));
	assert_null(strstr(r.body.p, "Accept:"));
	assert_null(strstr(r.body.p, "Expect:"));

	/* POST, PUT, PATCH with no body still say Content-Length: 0. */
	const char *methods[] = { "POST", "PUT", "PATCH", "DELETE" };
	for (int i = 0; i < 4; i++) {
		req.method = methods[i];
		assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_OK);
		assert_int_equal(strncmp(r.body.p, methods[i],
					 strlen(methods[i])), 0);
		if (i < 3)
			assert_non_null(strstr(r.body.p,
					       "Content-Length: 0\r\n"));
		else
			assert_null(strstr(r.body.p, "Content-Length"));
	}

	/* A 2 MiB body goes out at once, without Expect: 100-continue. */
	size_t n = 2 * SG_MiB;
	char *big = malloc(n);
	memset(big, 'b', n);
	req.method = "POST";
	req.url = url("/echo");
	req.body = big;
	req.body_len = n;
	sg_http_response_release(&r);
	sg_http_response_init(&r, 4 * SG_MiB);
	int64_t t0 = sg_now_ms();
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_OK);
	assert_true(sg_now_ms() - t0 < 900);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body.len, n);
	assert_string_equal(sg_http_header(&r, "x-got-method"), "POST");
	free(big);
	sg_http_response_release(&r);
}

static void test_invalid_requests(void **state)
{
	const char *bad_hdr[] = { "X-Evil: a\r\nX-Injected: b", NULL };
	struct sg_http_request req = { .url = "ftp://127.0.0.1/x" };
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };

	(void)state;
	setup_each();
	sg_http_response_init(&r, SG_KiB);
	assert_int_equal(sg_http_do(&req, &r, NULL, &err),
			 SG_E_INVALID_ARGUMENT);
	req.url = "not a url";
	assert_int_equal(sg_http_do(&req, &r, NULL, &err),
			 SG_E_INVALID_ARGUMENT);
	req.url = NULL;
	assert_int_equal(sg_http_do(&req, &r, NULL, &err),
			 SG_E_INVALID_ARGUMENT);
	req.url = url("/ok");
	req.method = "get";
	assert_int_equal(sg_http_do(&req, &r, NULL, &err),
			 SG_E_INVALID_ARGUMENT);
	req.method = NULL;
	req.headers = bad_hdr;
	assert_int_equal(sg_http_do(&req, &r, NULL, &err),
			 SG_E_INVALID_ARGUMENT);
	assert_int_equal(hits("/ok"), 0);
	sg_http_response_release(&r);
}

/* Peers are always verified; ca_file is how tests trust their own. */
static void test_tls(void **state)
{
	char u[128], host[64];
	struct sg_http_request req = { .url = u };
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };

	(void)state;
	snprintf(u, sizeof(u), "https://127.0.0.1:%d/ok", tls.port);
	snprintf(host, sizeof(host), "GET 127.0.0.1:%d", tls.port);
	sg_http_response_init(&r, SG_KiB);
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_E_PROVIDER);
	assert_non_null(strstr(err.msg, host));
	assert_int_equal(r.status, 0);
	assert_int_equal(atomic_load(&tls.handshakes), 0);

	req.ca_file = tls.ca_path;
	sg_err_clear(&err);
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_OK);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body.p, "secure");
	assert_loopback(&r);
	assert_int_equal(atomic_load(&tls.handshakes), 1);

	/* h2 is only asked for: a server without it gets HTTP/1.1. */
	req.version = SG_HTTP_2;
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_OK);
	assert_int_equal(r.version, 1);

	/* A CA file that is not there is a failure, never "no checks". */
	req.ca_file = "/nonexistent/ca.pem";
	sg_err_clear(&err);
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_E_PROVIDER);
	assert_int_equal(atomic_load(&tls.handshakes), 2);
	sg_http_response_release(&r);
}

static void *parallel_get(void *arg)
{
	bool *ok = arg;
	struct sg_http_request req = { .url = url("/ok") };
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };

	sg_http_response_init(&r, SG_KiB);
	*ok = true;
	for (int i = 0; i < 10 && *ok; i++)
		*ok = sg_http_do(&req, &r, NULL, &err) == SG_OK &&
		      r.status == 200 && strcmp(r.body.p, "hello world") == 0;
	sg_http_response_release(&r);
	return NULL;
}

static void test_parallel(void **state)
{
	pthread_t t[6];
	bool ok[6];

	(void)state;
	setup_each();
	for (int i = 0; i < 6; i++)
		assert_int_equal(pthread_create(&t[i], NULL, parallel_get, &ok[i]),
				 0);
	for (int i = 0; i < 6; i++) {
		pthread_join(t[i], NULL);
		assert_true(ok[i]);
	}
	assert_int_equal(hits("/ok"), 60);
	assert_false(atomic_load(&srv.foreign_peer));
}

/* ---- Kept connections --------------------------------------------------- */

/*
 * A server that keeps each connection for as many requests as the client
 * sends (HTTP/1.1 with Content-Length), one thread per connection, and
 * counts the connections it accepted.
 */
static struct {
	int lfd;
	int port;
	atomic_int accepted;
} keep;

static void *keep_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	struct timeval tv = { .tv_sec = 5 };
	char buf[8192];
	size_t len = 0;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	for (;;) {
		char *end = NULL, *cl;
		size_t need;
		ssize_t n;

		while (len < sizeof(buf) - 1 && !(end = strstr(buf, "\r\n\r\n"))) {
			n = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
			if (n <= 0)
				goto out;
			len += (size_t)n;
			buf[len] = '\0';
		}
		if (!end)
			goto out;
		cl = strcasestr(buf, "content-length:");
		need = (size_t)(end + 4 - buf) + (cl && cl < end ? strtoul(cl + 15, NULL, 10) : 0);
		while (len < need && len < sizeof(buf) - 1) {
			n = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
			if (n <= 0)
				goto out;
			len += (size_t)n;
			buf[len] = '\0';
		}
		if (send(fd, answer, sizeof(answer) - 1, MSG_NOSIGNAL) < 0 || need > len)
			goto out;
		memmove(buf, buf + need, len - need);
		len -= need;
		buf[len] = '\0';
	}
out:
	close(fd);
	return NULL;
}

static void *keep_main(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept(keep.lfd, NULL, NULL);
		pthread_t t;

		if (fd < 0)
			return NULL;
		atomic_fetch_add(&keep.accepted, 1);
		if (pthread_create(&t, NULL, keep_conn, (void *)(intptr_t)fd) == 0)
			pthread_detach(t);
		else
			close(fd);
	}
}

static void keep_post(bool resend_safe)
{
	char u[128];
	struct sg_http_request req = { .method = "POST", .url = u, .body = "{}",
				       .body_len = 2, .resend_safe = resend_safe };
	struct sg_http_response r;
	struct sg_errinfo err = { 0 };

	snprintf(u, sizeof(u), "http://127.0.0.1:%d/cmd", keep.port);
	sg_http_response_init(&r, SG_KiB);
	assert_int_equal(sg_http_do(&req, &r, NULL, &err), SG_OK);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body.p, "ok");
	sg_http_response_release(&r);
}

/*
 * A resend-safe POST travels on a kept connection; any other POST opens
 * its own and keeps none, even on a thread whose curl handles are kept.
 */
static void test_kept_connection(void **state)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	pthread_t t;

	(void)state;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	keep.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(keep.lfd >= 0);
	assert_int_equal(bind(keep.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(keep.lfd, 16), 0);
	assert_int_equal(getsockname(keep.lfd, (struct sockaddr *)&a, &alen), 0);
	keep.port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&t, NULL, keep_main, NULL), 0);

	for (int i = 0; i < 3; i++)
		keep_post(true);
	assert_int_equal(atomic_load(&keep.accepted), 1);
	for (int i = 0; i < 3; i++)
		keep_post(false);
	assert_int_equal(atomic_load(&keep.accepted), 4);
	/* The kept connection is still there for the next resend-safe one. */
	keep_post(true);
	assert_int_equal(atomic_load(&keep.accepted), 4);

	shutdown(keep.lfd, SHUT_RDWR);
	pthread_join(t, NULL);
	close(keep.lfd);
}

/* Another thread's kept easy handle, for test_kept_pair. */
static void *other_pair(void *arg)
{
	struct sg_http_curl_pair p;

	if (sg_http_curl_get(&p, true)) {
		*(void **)arg = p.easy;
		sg_http_curl_put(&p);
	}
	return NULL;
}

/*
 * A thread's curl handles are kept between transfers (grpc.c's calls and
 * this file's requests take the same pair), one pair per kind, another
 * thread has its own, and a kept easy handle comes back with no option of
 * the transfer before it.
 */
static void test_kept_pair(void **state)
{
	struct sg_http_curl_pair p, q;
	void *easy, *multi, *other = NULL, *priv = &priv;
	pthread_t t;

	(void)state;
	assert_int_equal(sg_http_curl_init(), SG_OK);
	assert_true(sg_http_curl_get(&p, true));
	assert_true(p.kept);
	easy = p.easy;
	multi = p.multi;
	assert_int_equal(curl_easy_setopt(p.easy, CURLOPT_PRIVATE, priv), CURLE_OK);
	sg_http_curl_put(&p);
	assert_null(p.easy);

	assert_true(sg_http_curl_get(&p, true));
	assert_true(p.kept);
	assert_ptr_equal(p.easy, easy);
	assert_ptr_equal(p.multi, multi);
	assert_int_equal(curl_easy_getinfo(p.easy, CURLINFO_PRIVATE, (char **)&priv), CURLE_OK);
	assert_null(priv);
	/* The other kind is a pair of its own, kept too. */
	assert_true(sg_http_curl_get(&q, false));
	assert_true(q.kept);
	assert_ptr_not_equal(q.easy, easy);
	assert_ptr_not_equal(q.multi, multi);
	sg_http_curl_put(&q);
	sg_http_curl_put(&p);

	assert_int_equal(pthread_create(&t, NULL, other_pair, &other), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_non_null(other);
	assert_ptr_not_equal(other, easy);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_get_ok),
		cmocka_unit_test(test_statuses_are_results),
		cmocka_unit_test(test_status_err),
		cmocka_unit_test(test_body_cap),
		cmocka_unit_test(test_retry_5xx),
		cmocka_unit_test(test_backoff_delays),
		cmocka_unit_test(test_post_not_retried),
		cmocka_unit_test(test_retry_after),
		cmocka_unit_test(test_retry_after_date),
		cmocka_unit_test(test_dropped_connection),
		cmocka_unit_test(test_connect_refused),
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_ndjson_stream),
		cmocka_unit_test(test_fd_sink),
		cmocka_unit_test(test_multipart),
		cmocka_unit_test(test_file_body),
		cmocka_unit_test(test_request_shape),
		cmocka_unit_test(test_invalid_requests),
		cmocka_unit_test(test_tls),
		cmocka_unit_test(test_parallel),
		cmocka_unit_test(test_kept_connection),
		cmocka_unit_test(test_kept_pair),
	};

	return cmocka_run_group_tests(tests, srv_start, srv_stop);
}
