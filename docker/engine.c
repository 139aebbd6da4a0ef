/*
 * engine.c - the Docker Engine API over its unix socket (engine.h).
 */
#define _GNU_SOURCE /* strndup with a POSIX profile */
#include "docker/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/cloud.h"
#include "adapters/jobreply.h"
#include "core/json.h"
#include "base/limits.h"

/* The URL's host names nothing (the socket does); Docker wants a Host header. */
#define DK_URL "http://docker" DK_API

sg_err dk_client_init(struct dk_client *cl, const struct sg_profile *p, struct sg_errinfo *err)
{
	const char *h = sg_profile_env(p, DK_ENV_HOST, NULL);

	memset(cl, 0, sizeof(*cl));
	if (h && *h && strncmp(h, "unix://", 7) != 0)
		return sg_err_set(err, SG_E_UNSUPPORTED,
				  "DOCKER_HOST is %.40s: the docker backend speaks to a unix socket only (unix:///path)",
				  h);
	cl->socket = strdup(h && *h ? h + 7 : DK_DEFAULT_SOCKET);
	if (!cl->socket)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (cl->socket[0] != '/' || strlen(cl->socket) >= 108) {
		dk_client_release(cl);
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "DOCKER_HOST names no absolute socket path of at most 107 bytes");
	}
	return SG_OK;
}

void dk_client_release(struct dk_client *cl)
{
	free(cl->socket);
	cl->socket = NULL;
}

void dk_reply_release(struct dk_reply *r)
{
	json_decref(r->json);
	memset(r, 0, sizeof(*r));
}

char *dk_path(const char *kind, const char *id, const char *suffix)
{
	struct sg_buf b = SG_BUF_INIT(SG_PATH_MAX);

	if (sg_buf_adds(&b, kind) || sg_cloud_urlenc(&b, id) || (suffix && sg_buf_adds(&b, suffix))) {
		sg_buf_release(&b);
		return NULL;
	}
	return sg_buf_take(&b, NULL);
}

/* The reply's JSON, and the daemon's message when it is an error. */
static void dk_read_body(struct dk_reply *r, const struct sg_buf *body)
{
	const char *m;

	if (!body->len || sg_json_parse(body->p, body->len, 0, &r->json, NULL))
		r->json = NULL;
	m = json_string_value(json_object_get(r->json, "message"));
	if (!m && r->status >= 300 && !r->json)
		snprintf(r->message, sizeof(r->message), "%.*s", (int)(body->len < 190 ? body->len : 190),
			 body->p);
	else if (m)
		snprintf(r->message, sizeof(r->message), "%s", m);
}

sg_err dk_do(struct dk_client *cl, const struct dk_call *c, struct dk_reply *r,
	     struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const char *hdrs[2] = { NULL, NULL };
	struct sg_http_response resp;
	char *text = NULL, *url = NULL;
	sg_err rc;

	memset(r, 0, sizeof(*r));
	sg_http_response_init(&resp, c->sink ? SG_HTTP_ERROR_BODY : DK_REPLY_MAX);
	if (c->body && !(text = json_dumps(c->body, JSON_COMPACT))) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (asprintf(&url, DK_URL "%s%s%s", c->path, c->query ? "?" : "", c->query ? c->query : "") < 0) {
		url = NULL;
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	atomic_fetch_add(&cl->requests, 1);
	rc = sg_http_do(&(struct sg_http_request){
				.method = c->method, .url = url, .unix_socket = cl->socket,
				.headers = hdrs,
				.content_type = text ? "application/json" : c->raw_type,
				.body = text ? (const void *)text : c->raw,
				.body_len = text ? strlen(text) : c->raw_len,
				.timeout_ms = c->timeout_ms < 0 ? 0 : c->timeout_ms ? c->timeout_ms : DK_CALL_MS,
				.connect_timeout_ms = 5000,
				.version = SG_HTTP_1_1, .sink = c->sink, .sink_payload = c->sink_payload },
			&resp, cancel, err);
	if (rc == SG_E_UNAVAILABLE && !resp.status) {
		sg_err_clear(err);
		rc = sg_err_set(err, SG_E_UNAVAILABLE,
				"%s: the Docker daemon does not answer at %s (is it running, and may this user open its socket?)",
				c->what, cl->socket);
		goto out;
	}
	if (rc)
		goto out;
	r->status = resp.status;
	dk_read_body(r, &resp.body);
out:
	sg_http_response_release(&resp);
	free(text);
	free(url);
	return rc;
}

sg_err dk_fail(const struct dk_call *c, const struct dk_reply *r, sg_err code,
	       struct sg_errinfo *err)
{
	if (!code)
		code = r->status == 404 ? SG_E_NOT_FOUND
		       : r->status >= 500 ? SG_E_PROVIDER
		       : r->status == 409 ? SG_E_UNAVAILABLE
					  : SG_E_PROVIDER;
	return sg_err_set(err, code, "%s: Docker answered %ld%s%s", c->what, r->status,
			  r->message[0] ? ": " : "", r->message);
}

sg_err dk_container(struct dk_client *cl, const char *method, const char *id, const char *suffix,
		    const char *query, const long *ok, sg_err gone, const char *what,
		    struct sg_cancel *cancel, struct sg_errinfo *err)
{
	char *path = dk_path("/containers/", id, suffix);
	struct dk_call c = { .method = method, .path = path, .query = query, .what = what };
	struct dk_reply r = { 0 };
	sg_err rc = path ? dk_do(cl, &c, &r, cancel, err)
			 : sg_err_set(err, SG_E_INTERNAL, "out of memory");

	while (!rc && *ok && *ok != r.status)
		ok++;
	if (!rc && !*ok)
		rc = r.status == 404 && !gone ? SG_OK : dk_fail(&c, &r, r.status == 404 ? gone : SG_E_PROVIDER, err);
	dk_reply_release(&r);
	free(path);
	return rc;
}

/*
 * The exec stream without a tty: frames of an 8-byte header (stream: 1
 * stdout, 2 stderr; bytes 4-7 the length, big-endian) and their payload.
 */
struct dk_demux {
	unsigned char hdr[8];
	size_t have;      /* header bytes so far */
	uint32_t left;    /* payload bytes of the current frame still to come */
	int stream;
	struct sg_buf *out;
	const char *stop; /* dk_exec's stop_mark */
	bool stopped;
};

static sg_err dk_demux_feed(const char *data, size_t len, void *payload)
{
	struct dk_demux *d = payload;

	while (len) {
		size_t k;

		if (d->left == 0) {
			k = sizeof(d->hdr) - d->have < len ? sizeof(d->hdr) - d->have : len;
			memcpy(d->hdr + d->have, data, k);
			d->have += k;
			data += k;
			len -= k;
			if (d->have == sizeof(d->hdr)) {
				d->stream = d->hdr[0];
				d->left = (uint32_t)d->hdr[4] << 24 | (uint32_t)d->hdr[5] << 16 |
					  (uint32_t)d->hdr[6] << 8 | d->hdr[7];
				d->have = 0;
			}
			continue;
		}
		k = d->left < len ? d->left : len;
		if (d->stream == 1 && sg_buf_add(d->out, data, k))
			return SG_E_TOO_LARGE;
		d->left -= (uint32_t)k;
		data += k;
		len -= k;
		/* The job's reply is whole and its process lives on. */
		d->stopped = d->stop && d->stream == 1 && d->left == 0 &&
			     sg_job_ended(d->out->p, d->out->len, d->stop);
		if (d->stopped)
			return SG_E_CANCELLED;
	}
	return SG_OK;
}

/* POST /containers/{id}/exec: the exec's id into idbuf. */
static sg_err dk_exec_create(struct dk_client *cl, const char *id, const struct dk_exec *e,
			     char *idbuf, size_t n, bool *stopped, struct sg_cancel *cancel,
			     struct sg_errinfo *err)
{
	char *path = dk_path("/containers/", id, "/exec");
	json_t *env = json_array(), *body, *v;
	struct dk_call c = { .method = "POST", .path = path, .what = "starting a command" };
	struct dk_reply r = { 0 }; /* released on every path, dk_do or not */
	const char *k;
	sg_err rc;

	json_object_foreach(e->vars, k, v) {
		char *kv = NULL;

		if (asprintf(&kv, "%s=%s", k, json_string_value(v)) >= 0)
			json_array_append_new(env, json_string(kv));
		free(kv);
	}
	body = json_pack("{s:b, s:b, s:b, s:O, s:o}", "AttachStdin", 0, "AttachStdout", 1,
			 "AttachStderr", 1, "Cmd", e->cmd, "Env", env);
	if (body && e->user)
		json_object_set_new(body, "User", json_string(e->user));
	c.body = body;
	rc = path && body ? dk_do(cl, &c, &r, cancel, err)
			  : sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (!rc && r.status == 409)
		*stopped = true;
	if (!rc && r.status == 201 && json_is_string(json_object_get(r.json, "Id")))
		snprintf(idbuf, n, "%s", json_string_value(json_object_get(r.json, "Id")));
	else if (!rc)
		rc = dk_fail(&c, &r, 0, err);
	dk_reply_release(&r);
	json_decref(body);
	free(path);
	return rc;
}

sg_err dk_exec(struct dk_client *cl, const char *id, const struct dk_exec *e, bool *stopped,
	       struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct dk_demux d = { .out = e->out, .stop = e->stop_mark };
	char xid[128], *path = NULL;
	json_t *body = NULL;
	struct dk_call c = { .method = "POST", .timeout_ms = e->timeout_ms ? e->timeout_ms : -1,
			     .sink = dk_demux_feed, .sink_payload = &d,
			     .what = "running a command" };
	struct dk_reply r = { 0 };
	sg_err rc;

	*stopped = false;
	rc = dk_exec_create(cl, id, e, xid, sizeof(xid), stopped, cancel, err);
	if (rc)
		return rc;
	path = dk_path("/exec/", xid, "/start");
	body = json_pack("{s:b, s:b}", "Detach", 0, "Tty", 0);
	c.path = path;
	c.body = body;
	rc = path && body ? dk_do(cl, &c, &r, cancel, err)
			  : sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (rc && d.stopped) {
		sg_err_clear(err);
		rc = SG_OK;
		r.status = 200;
	}
	if (rc == SG_E_TOO_LARGE)
		rc = sg_err_set(err, rc, "a command's output passed %zu bytes", e->out->max);
	else if (!rc && r.status != 200)
		rc = dk_fail(&c, &r, 0, err);
	else if (!rc && (d.have || d.left))
		rc = sg_err_set(err, SG_E_PROVIDER, "Docker's output stream ended inside a frame");
	dk_reply_release(&r);
	json_decref(body);
	free(path);
	return rc;
}

/*
 * GET archive's tar, read as it comes: headers (pax ones skipped) until
 * the file's own, whose bytes go to the fd sink; the rest is ignored.
 */
struct dk_untar {
	unsigned char hdr[512];
	size_t have;        /* header bytes so far */
	uint64_t skip;      /* bytes of a pax entry (and padding) still to skip */
	uint64_t left;      /* bytes of the file still to write */
	bool in_file, done, not_regular;
	struct sg_http_fd_sink out;
};

static uint64_t dk_octal(const unsigned char *f, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n && f[i] >= '0' && f[i] <= '7'; i++)
		v = v * 8 + (uint64_t)(f[i] - '0');
	return v;
}

/* A whole header in u->hdr: the file's own, or one to skip. */
static sg_err dk_untar_header(struct dk_untar *u)
{
	uint64_t size = dk_octal(u->hdr + 124, 12);
	char type = (char)u->hdr[156];

	u->have = 0;
	if (type == 'x' || type == 'g') {
		u->skip = (size + 511) / 512 * 512;
		return SG_OK;
	}
	if (type != '0' && type != '\0') {
		u->not_regular = u->done = true;
		return SG_E_INVALID_ARGUMENT;
	}
	if (size > u->out.max)
		return SG_E_TOO_LARGE;
	u->in_file = true;
	u->left = size;
	u->done = size == 0;
	return SG_OK;
}

static sg_err dk_untar_feed(const char *data, size_t len, void *payload)
{
	struct dk_untar *u = payload;
	sg_err rc = SG_OK;

	while (len && !u->done && !rc) {
		size_t k;

		if (u->skip || (u->in_file && u->left)) {
			uint64_t want = u->skip ? u->skip : u->left;

			k = want < len ? (size_t)want : len;
			if (u->skip)
				u->skip -= k;
			else if (!(rc = sg_http_sink_fd(data, k, &u->out)))
				u->done = (u->left -= k) == 0;
		} else {
			k = sizeof(u->hdr) - u->have < len ? sizeof(u->hdr) - u->have : len;
			memcpy(u->hdr + u->have, data, k);
			u->have += k;
			if (u->have == sizeof(u->hdr))
				rc = dk_untar_header(u);
		}
		data += k;
		len -= k;
	}
	return rc;
}

sg_err dk_get_file_of(struct dk_client *cl, const char *id, const char *path, int fd, size_t max,
		   struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct dk_untar u = { .out = { .fd = fd, .max = max } };
	struct sg_buf q = SG_BUF_INIT(SG_PATH_MAX * 3);
	char *p = dk_path("/containers/", id, "/archive");
	struct dk_call c = { .path = p, .timeout_ms = -1, .sink = dk_untar_feed, .sink_payload = &u,
			     .what = "reading a file from the container" };
	struct dk_reply r = { 0 };
	sg_err rc;

	if (!p || sg_buf_adds(&q, "path=") || sg_cloud_urlenc(&q, path)) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	c.query = q.p;
	rc = dk_do(cl, &c, &r, cancel, err);
	/* The sink's own refusals: their sentences are these, not the transfer's. */
	if (rc == SG_E_TOO_LARGE || u.not_regular)
		sg_err_clear(err);
	if (rc == SG_E_TOO_LARGE)
		rc = sg_err_set(err, rc, "%s is larger than %zu bytes", path, max);
	else if (u.not_regular)
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT, "%s is not a regular file", path);
	else if (!rc && r.status == 404)
		rc = sg_err_set(err, SG_E_NOT_FOUND, "%s does not exist in the container", path);
	else if (!rc && r.status != 200)
		rc = dk_fail(&c, &r, SG_E_PROVIDER, err);
	else if (!rc && !u.done)
		rc = sg_err_set(err, SG_E_PROVIDER, "Docker's archive of %s ended early", path);
out:
	dk_reply_release(&r);
	sg_buf_release(&q);
	free(p);
	return rc;
}
