/*
 * api.c - credentials, JSON calls, the command stream and the vCPU rule
 * for the vercel adapter (api.h).
 *
 * The requests copy what the official @vercel/sandbox SDK sends:
 * Authorization: Bearer, content-type: application/json on every call
 * (GETs included), and ?teamId= on every path.
 */
#define _GNU_SOURCE /* asprintf */
#include "vercel/api.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adapters/cloud.h"
#include "adapters/jobreply.h"
#include "core/json.h"
#include "base/limits.h"
#include "base/log.h"
#include "sg_config.h"

const char *vcl_str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

sg_err vcl_claims_decode(const char *jwt, struct vcl_claims *out)
{
	const char *a = strchr(jwt, '.'), *b = a ? strchr(a + 1, '.') : NULL;
	size_t n = a && b ? (size_t)(b - a - 1) : 0, m;
	unsigned char *dec = NULL;
	char *std = NULL;
	json_t *j = NULL;
	int k;
	sg_err rc = SG_E_INVALID_ARGUMENT;

	memset(out, 0, sizeof(*out));
	if (n == 0 || n > 64 * 1024)
		return rc;
	/* base64url to base64, padded, for OpenSSL's decoder. */
	m = (n + 3) / 4 * 4;
	std = malloc(m + 1);
	dec = malloc(m);
	if (!std || !dec)
		goto out;
	for (size_t i = 0; i < m; i++) {
		char c = i < n ? a[1 + i] : '=';

		std[i] = c == '-' ? '+' : c == '_' ? '/' : c;
	}
	std[m] = '\0';
	k = EVP_DecodeBlock(dec, (unsigned char *)std, (int)m);
	if (k < 0)
		goto out;
	/* EVP_DecodeBlock counts the padding as zero bytes: drop them. */
	while (k > 0 && dec[k - 1] == '\0')
		k--;
	if (sg_json_parse((const char *)dec, (size_t)k, 0, &j, NULL) || !json_is_object(j))
		goto out;
	snprintf(out->owner_id, sizeof(out->owner_id), "%s",
		 vcl_str(j, "owner_id") ? vcl_str(j, "owner_id") : "");
	snprintf(out->project_id, sizeof(out->project_id), "%s",
		 vcl_str(j, "project_id") ? vcl_str(j, "project_id") : "");
	out->exp = json_is_integer(json_object_get(j, "exp"))
			   ? (int64_t)json_integer_value(json_object_get(j, "exp"))
			   : 0;
	rc = SG_OK;
out:
	json_decref(j);
	free(std);
	free(dec);
	return rc;
}

sg_err vcl_client_init(struct vcl_client *c, const struct sg_profile *p,
		       struct sg_errinfo *err)
{
	const char *token_var, *token = sg_profile_env(p, VCL_ENV_TOKEN, &token_var);
	const char *oidc = sg_profile_env(p, VCL_ENV_OIDC, NULL);
	const char *team = sg_profile_str(p, "team"), *project = sg_profile_str(p, "project");
	const char *url = sg_profile_str(p, "api_url");
	struct vcl_claims cl;
	sg_err rc = SG_OK;

	memset(c, 0, sizeof(*c));
	if (!url)
		url = sg_profile_env(p, VCL_ENV_URL, NULL);
	if (!url)
		url = VCL_API_DEFAULT;
	if (!team)
		team = sg_profile_env(p, VCL_ENV_TEAM, NULL);
	if (!project)
		project = sg_profile_env(p, VCL_ENV_PROJECT, NULL);
	if (!token && oidc) {
		if (vcl_claims_decode(oidc, &cl))
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "$%s (profile \"%s\") is not a Vercel OIDC token (a JWT)",
					  VCL_ENV_OIDC, p->name);
		if (cl.exp && cl.exp <= (int64_t)time(NULL))
			return sg_err_set(err, SG_E_PERMISSION,
					  "$%s (profile \"%s\") expired %lld s ago; refresh it (vercel env pull) or set $%s",
					  VCL_ENV_OIDC, p->name,
					  (long long)((int64_t)time(NULL) - cl.exp), token_var);
		if (!team && cl.owner_id[0])
			team = cl.owner_id;
		if (!project && cl.project_id[0])
			project = cl.project_id;
		token = oidc;
		c->oidc = true;
	}
	if (!token)
		return sg_err_set(err, SG_E_PERMISSION,
				  "the vercel backend (profile \"%s\") needs $%s (with $%s and $%s) or $%s, and none is set",
				  p->name, token_var, VCL_ENV_TEAM, VCL_ENV_PROJECT, VCL_ENV_OIDC);
	if (!team || !project)
		return sg_err_set(err, SG_E_PERMISSION,
				  "the vercel backend (profile \"%s\") needs the team and the project: set $%s and $%s (or the profile's team and project)",
				  p->name, VCL_ENV_TEAM, VCL_ENV_PROJECT);
	if (strncmp(url, "https://", 8) != 0 && strncmp(url, "http://", 7) != 0)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "the Vercel API URL (profile \"%s\") must be an http:// or https:// URL",
				  p->name);
	/* A token that could end a header line would smuggle headers in. */
	if (strpbrk(token, "\r\n") || strpbrk(team, "\r\n&#") || strpbrk(project, "\r\n&#"))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "the Vercel token, team or project (profile \"%s\") holds a character it cannot hold",
				  p->name);
	rc = sg_rest_init(&c->rest, url, token,
			  (const char *[]){ "Accept: */*", "User-Agent: sandgate/" SG_VERSION, NULL },
			  err);
	if (rc)
		return rc;
	c->team = strdup(team);
	c->project = strdup(project);
	if (!c->team || !c->project) {
		vcl_client_release(c);
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	return SG_OK;
}

void vcl_client_release(struct vcl_client *c)
{
	sg_rest_release(&c->rest);
	free(c->team);
	free(c->project);
	memset(c, 0, sizeof(*c));
}

/* An HTTP date (IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT") in unix ms; 0 if it is none. */
static int64_t vcl_http_date_ms(const char *v)
{
	struct tm tm;
	const char *end;
	time_t t;

	if (!v)
		return 0;
	memset(&tm, 0, sizeof(tm));
	end = strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (!end || *end)
		return 0;
	t = timegm(&tm);
	return t > 0 ? (int64_t)t * 1000 : 0;
}

void vcl_reply_release(struct vcl_reply *r)
{
	json_decref(r->json);
	memset(r, 0, sizeof(*r));
}

/* The call's URL: the API, its path, the team, and its own query. */
static bool vcl_url(const struct vcl_client *c, const struct vcl_call *call, struct sg_buf *url)
{
	return sg_buf_adds(url, c->rest.api) || sg_buf_adds(url, call->path) ||
	       sg_buf_adds(url, "?teamId=") || sg_cloud_urlenc(url, c->team) ||
	       (call->query && (sg_buf_addc(url, '&') || sg_buf_adds(url, call->query)));
}

/* What a reply says besides its body: status, Retry-After, Date, the error's code. */
static void vcl_reply_take(const struct sg_http_response *resp, struct vcl_reply *out)
{
	const char *code;

	out->status = resp->status;
	out->retry_after_ms = sg_http_retry_after_ms(resp);
	out->date_ms = vcl_http_date_ms(sg_http_header(resp, "Date"));
	/* A body that is not JSON leaves json NULL: callers report the status. */
	if (resp->body.len > 0 &&
	    sg_json_parse(resp->body.p, resp->body.len, SG_JSON_ALLOW_NUL, &out->json, NULL))
		out->json = NULL;
	code = vcl_str(json_object_get(out->json, "error"), "code");
	snprintf(out->code, sizeof(out->code), "%s", code ? code : "");
}

sg_err vcl_do(struct vcl_client *c, const struct vcl_call *call, struct vcl_reply *out,
	      struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_strv hdrs = SG_STRV_INIT;
	struct sg_http_response resp;
	struct sg_http_retry policy = { .attempts = call->idempotent ? 3 : 1,
					.base_ms = 400, .max_delay_ms = 20000 };
	struct sg_errinfo inner = { 0 };
	struct sg_buf text = SG_BUF_INIT(SG_MAX_FRAME * 4), url = SG_BUF_INIT(SG_PATH_MAX * 4);
	const char *body = NULL, *type = "application/json";
	size_t body_len = 0;
	uint64_t nth;
	sg_err rc;

	memset(out, 0, sizeof(*out));
	out->retry_after_ms = -1;
	out->sent_ms = sg_now_ms();
	sg_http_response_init(&resp, call->sink ? SG_HTTP_ERROR_BODY
			      : call->max_body ? (size_t)call->max_body : SG_VERCEL_REPLY_MAX);
	rc = sg_strv_addv(&hdrs, sg_strv_get(&c->rest.headers));
	if (!rc && call->extra_headers)
		rc = sg_strv_addv(&hdrs, call->extra_headers);
	if (!rc && call->body) {
		rc = sg_json_dump(call->body, &text);
		body = text.p;
		body_len = text.len;
	} else if (!rc && call->raw) {
		body = call->raw;
		body_len = call->raw_len;
		type = call->raw_type;
	}
	if (!rc && vcl_url(c, call, &url))
		rc = SG_E_INTERNAL;
	if (rc) {
		rc = sg_rest_failed(rc, "Vercel", NULL, NULL, NULL, err);
		goto out;
	}
	{
		struct sg_http_request req = {
			.method = call->method ? call->method : "GET",
			.url = url.p,
			.headers = sg_strv_get(&hdrs),
			/* As the SDK: a content type on every call. */
			.content_type = type,
			.body = body,
			.body_len = body_len,
			.timeout_ms = call->timeout_ms ? call->timeout_ms : SG_VERCEL_CALL_MS,
			.idempotent = call->idempotent,
			.resend_safe = call->resend_safe,
			.sink = call->sink,
			.sink_payload = call->sink_payload,
		};

		rc = sg_http_do_retry(&req, &resp, &policy, cancel, &inner);
		out->attempts = resp.attempts;
		nth = atomic_fetch_add(&c->requests, (uint64_t)(resp.attempts > 0 ? resp.attempts : 1));
		/* One line per request: what the benchmarks count. */
		sg_log_debug("vercel request %llu: %s %s (%s) -> %ld",
			     (unsigned long long)nth + 1, req.method, call->path,
			     call->what ? call->what : "", resp.status);
	}
	if (rc) {
		/* inner names the method and host; say what it was for. */
		rc = sg_rest_failed(rc, "Vercel", call->what, "a Vercel call", &inner, err);
		goto out;
	}
	vcl_reply_take(&resp, out);
out:
	sg_buf_release(&text);
	sg_buf_release(&url);
	sg_strv_release(&hdrs);
	sg_http_response_release(&resp);
	return rc;
}

sg_err vcl_fail(const struct vcl_client *c, const char *what, const struct vcl_reply *r,
		sg_err code, struct sg_errinfo *err)
{
	const char *m = vcl_str(json_object_get(r->json, "error"), "message");
	char msg[SG_VERCEL_MSG_SHOWN + 4];

	if (!code)
		code = sg_http_status_err(r->status);
	if (!code)
		code = SG_E_PROVIDER;
	snprintf(msg, sizeof(msg), "%s", m ? m : "");
	sg_cloud_scrub(msg, c ? c->rest.secret : NULL);
	if (strlen(msg) >= SG_VERCEL_MSG_SHOWN)
		memcpy(msg + SG_VERCEL_MSG_SHOWN - 3, "...", 4);
	/* One line: a message with line breaks would break logs apart. */
	for (char *p = msg; *p; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
	return sg_err_set(err, code, "%s failed: Vercel answered HTTP %ld%s%s%s%s", what,
			  r->status, r->code[0] ? " " : "", r->code, msg[0] ? ": " : "", msg);
}

/* ---- The command stream ---------------------------------------------------- */

static sg_err vcl_stream_line(const char *line, size_t len, void *payload)
{
	struct vcl_stream *s = payload;
	json_t *j = NULL, *cmd;
	const char *st;

	if (sg_json_parse(line, len, SG_JSON_ALLOW_NUL, &j, NULL) || !json_is_object(j)) {
		json_decref(j);
		snprintf(s->bad, sizeof(s->bad), "a line of %zu bytes is not a JSON object", len);
		return SG_E_PROVIDER;
	}
	if ((cmd = json_object_get(j, "command")) && json_is_object(cmd)) {
		const json_t *x = json_object_get(cmd, "exitCode");

		s->started = true;
		if (json_is_integer(x)) {
			s->finished = true;
			s->exit_code = (int)json_integer_value(x);
		}
	} else if ((st = vcl_str(j, "stream"))) {
		const json_t *d = json_object_get(j, "data");

		if (strcmp(st, "stdout") == 0 && json_is_string(d)) {
			size_t n = json_string_length(d);

			s->out_total += n;
			(void)sg_buf_add_clipped(&s->out, json_string_value(d), n);
			s->stopped = s->stop_mark && sg_job_ended(s->out.p, s->out.len, s->stop_mark);
		} else if (strcmp(st, "stderr") == 0 && json_is_string(d)) {
			s->err_total += json_string_length(d);
		} else if (strcmp(st, "error") == 0) {
			const char *code = vcl_str(d, "code"), *msg = vcl_str(d, "message");

			snprintf(s->error, sizeof(s->error), "%s%s%.100s", code ? code : "error",
				 msg ? ": " : "", msg ? msg : "");
		}
	}
	json_decref(j);
	return SG_OK;
}

void vcl_stream_init(struct vcl_stream *s, size_t max_out)
{
	memset(s, 0, sizeof(*s));
	sg_ndjson_init(&s->nd, SG_VERCEL_LINE_MAX, vcl_stream_line, s);
	s->out = (struct sg_buf)SG_BUF_INIT(max_out);
	s->exit_code = -1;
}

void vcl_stream_release(struct vcl_stream *s)
{
	sg_ndjson_release(&s->nd);
	sg_buf_release(&s->out);
}

sg_err vcl_stream_feed(const char *data, size_t len, void *payload)
{
	struct vcl_stream *s = payload;
	sg_err rc = s->stopped ? SG_OK : sg_ndjson_feed(&s->nd, data, len);

	/* The job's process lives on: nothing more to wait for (api.h). */
	if (s->stopped)
		return SG_E_CANCELLED;
	if (rc == SG_E_TOO_LARGE)
		snprintf(s->bad, sizeof(s->bad), "a line passed %zu bytes", (size_t)SG_VERCEL_LINE_MAX);
	return rc ? SG_E_PROVIDER : SG_OK;
}

sg_err vcl_stream_end(const struct vcl_stream *s, struct sg_errinfo *err)
{
	if (s->stopped)
		return SG_OK;
	if (s->bad[0])
		return sg_err_set(err, SG_E_PROVIDER,
				  "Vercel's command stream could not be read: %s", s->bad);
	if (s->error[0])
		return sg_err_set(err, SG_E_PROVIDER, "Vercel's command stream ended with an error: %s",
				  s->error);
	if (sg_ndjson_partial(&s->nd))
		return sg_err_set(err, SG_E_PROVIDER,
				  "Vercel's command stream was cut mid-line after %llu bytes",
				  (unsigned long long)s->nd.bytes);
	if (!s->finished)
		return sg_err_set(err, SG_E_PROVIDER,
				  "Vercel's command stream ended after %llu bytes without the command's exit code",
				  (unsigned long long)s->nd.bytes);
	return SG_OK;
}

/* ---- Resources ------------------------------------------------------------ */

int64_t vcl_vcpus(double cpus, int64_t memory_mb, bool *memory_exact)
{
	int64_t by_cpu = 0, by_mem = 0, n;

	if (cpus > 0) {
		by_cpu = (int64_t)cpus;
		if ((double)by_cpu + 1e-9 < cpus)
			by_cpu++;
	}
	if (memory_mb > 0)
		by_mem = (memory_mb + 2047) / 2048;
	n = by_cpu > by_mem ? by_cpu : by_mem;
	/* Vercel takes 1 or an even number. */
	if (n > 1 && n % 2)
		n++;
	*memory_exact = memory_mb <= 0 || memory_mb == n * 2048;
	return n;
}
