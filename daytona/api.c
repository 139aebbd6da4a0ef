/*
 * api.c - credentials, JSON calls and provider sentences for the daytona
 * adapter (api.h).
 *
 * The headers copy what the official SDK sends (sdk-traffic/daytona.*):
 * Authorization: Bearer, X-Daytona-Source and X-Daytona-SDK-Version.  The
 * version header is not decoration: the toolbox picks its reply formats by
 * it, and ours are the ones SDK 0.218.0 was captured with.  The source
 * names sandgate, so Daytona's side can tell our traffic from the SDK's.
 */
#define _GNU_SOURCE /* asprintf */
#include "daytona/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/json.h"
#include "base/limits.h"
#include "sg_config.h"

#define DTN_SDK_VERSION "0.218.0"
/* How much of a provider's message a sentence quotes. */
#define DTN_MSG_SHOWN 160

const char *dtn_str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

int64_t dtn_updated_ms(const json_t *dto)
{
	const char *v = dtn_str(dto, "updatedAt"), *p;
	int64_t ms = 0, scale = 100;
	struct tm tm;
	time_t t;

	if (!v)
		return -1;
	memset(&tm, 0, sizeof(tm));
	p = strptime(v, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return -1;
	/* A fraction of a second, of any length; what is below 1 ms is dropped. */
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++, scale /= 10)
			ms += (*p - '0') * scale;
	}
	t = timegm(&tm);
	if (t == (time_t)-1 || p[0] != 'Z' || p[1] != '\0')
		return -1;
	return (int64_t)t * 1000 + ms;
}

bool dtn_older(const json_t *a, const json_t *b)
{
	int64_t ta = dtn_updated_ms(a), tb = dtn_updated_ms(b);

	return ta >= 0 && tb >= 0 && ta < tb;
}

sg_err dtn_client_init(struct dtn_client *c, const struct sg_profile *p,
		       struct sg_errinfo *err)
{
	const char *key_var, *url_var;
	const char *key = sg_profile_env(p, DTN_ENV_KEY, &key_var);
	const char *url = sg_profile_env(p, DTN_ENV_URL, &url_var);
	const char *target = sg_profile_str(p, "target");
	sg_err rc = SG_OK;

	memset(c, 0, sizeof(*c));
	if (!target)
		target = sg_profile_env(p, DTN_ENV_TARGET, NULL);
	if (!url)
		url = DTN_API_DEFAULT;
	if (!key)
		return sg_err_set(err, SG_E_PERMISSION,
				  "the daytona backend (profile \"%s\") needs an API key in $%s, which is not set",
				  p->name, key_var);
	if (strncmp(url, "https://", 8) != 0 && strncmp(url, "http://", 7) != 0)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "$%s (profile \"%s\") must be an http:// or https:// URL",
				  url_var, p->name);
	/* A key that could end a header line would smuggle headers in. */
	if (strpbrk(key, "\r\n"))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "$%s (profile \"%s\") holds a line break", key_var,
				  p->name);
	rc = sg_rest_init(&c->rest, url, key,
			  (const char *[]){ "Accept: application/json", "X-Daytona-Source: sandgate",
					    "X-Daytona-SDK-Version: " DTN_SDK_VERSION,
					    "User-Agent: sandgate/" SG_VERSION, NULL },
			  err);
	if (!rc && target && !(c->target = strdup(target))) {
		dtn_client_release(c);
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	return rc;
}

void dtn_client_release(struct dtn_client *c)
{
	sg_rest_release(&c->rest);
	free(c->target);
	memset(c, 0, sizeof(*c));
}

void dtn_reply_release(struct dtn_reply *r)
{
	json_decref(r->json);
	free(r->text);
	memset(r, 0, sizeof(*r));
}

char *dtn_sandbox_url(const struct dtn_client *c, const char *id,
		      const char *suffix)
{
	struct sg_buf b = SG_BUF_INIT(SG_PATH_MAX);

	if (sg_buf_adds(&b, c->rest.api) || sg_buf_adds(&b, "/sandbox")) {
		sg_buf_release(&b);
		return NULL;
	}
	if (id && (sg_buf_addc(&b, '/') || sg_cloud_urlenc(&b, id))) {
		sg_buf_release(&b);
		return NULL;
	}
	if (suffix && sg_buf_adds(&b, suffix)) {
		sg_buf_release(&b);
		return NULL;
	}
	return sg_buf_take(&b, NULL);
}

sg_err dtn_do(const struct dtn_client *c, const struct dtn_call *call,
	      struct dtn_reply *out, struct sg_cancel *cancel,
	      struct sg_errinfo *err)
{
	struct sg_strv hdrs = SG_STRV_INIT;
	struct sg_http_response resp;
	struct sg_http_retry policy = { .attempts = 4 };
	struct sg_errinfo inner = { 0 };
	struct sg_buf text = SG_BUF_INIT(SG_MAX_FRAME * 4);
	char *body = NULL;
	sg_err rc;

	memset(out, 0, sizeof(*out));
	sg_http_response_init(&resp, call->max_body ? call->max_body : SG_DAYTONA_REPLY_MAX);
	rc = sg_strv_addv(&hdrs, sg_strv_get(&c->rest.headers));
	if (!rc && call->skip_activity)
		rc = sg_strv_add(&hdrs, "X-Daytona-Skip-Last-Activity-Update: true");
	if (!rc && call->body) {
		rc = sg_json_dump(call->body, &text);
		body = text.p;
	}
	if (rc) {
		rc = sg_rest_failed(rc, "Daytona", NULL, NULL, NULL, err);
		goto out;
	}
	{
		struct sg_http_request req = {
			.method = call->method ? call->method : "GET",
			.url = call->url,
			.headers = sg_strv_get(&hdrs),
			.content_type = body ? "application/json" : NULL,
			.body = body,
			.body_len = body ? text.len : 0,
			.parts = call->parts,
			.nparts = call->nparts,
			.timeout_ms = call->timeout_ms ? call->timeout_ms : SG_DAYTONA_CALL_MS,
			.idempotent = call->idempotent,
		};

		if (call->no_retry)
			policy.attempts = 1;
		out->sent = true;
		rc = sg_http_do_retry(&req, &resp, &policy, cancel, &inner);
	}
	if (rc) {
		/* inner names the method and host; say what it was for. */
		rc = sg_rest_failed(rc, "Daytona", call->what, "a Daytona call", &inner, err);
		goto out;
	}
	out->status = resp.status;
	out->retry_after_ms = sg_http_retry_after_ms(&resp);
	out->len = resp.body.len;
	out->text = sg_buf_take(&resp.body, NULL);
	/* A body that is not JSON leaves json NULL: callers report the status. */
	if (out->len > 0 && sg_json_parse(out->text, out->len, SG_JSON_ALLOW_NUL, &out->json, NULL))
		out->json = NULL;
out:
	sg_buf_release(&text);
	sg_strv_release(&hdrs);
	sg_http_response_release(&resp);
	return rc;
}

void dtn_message(const struct dtn_client *c, const struct dtn_reply *r,
		 char *out, size_t n)
{
	const json_t *m = json_object_get(r->json, "message");
	size_t len;

	out[0] = '\0';
	if (json_is_string(m)) {
		snprintf(out, n, "%s", json_string_value(m));
	} else if (json_is_array(m)) {
		/* NestJS validation errors: a list of sentences, joined. */
		size_t i, used = 0;
		const json_t *v;

		json_array_foreach(m, i, v) {
			int k;

			if (!json_is_string(v) || used + 1 >= n)
				continue;
			k = snprintf(out + used, n - used, "%s%s", used ? ", " : "",
				     json_string_value(v));
			if (k < 0)
				break;
			used += (size_t)k < n - used ? (size_t)k : n - used - 1;
		}
	}
	sg_cloud_scrub(out, c ? c->rest.secret : NULL);
	len = strlen(out);
	if (len > DTN_MSG_SHOWN && n > DTN_MSG_SHOWN + 4)
		memcpy(out + DTN_MSG_SHOWN, "...", 4);
	/* One line: a message with line breaks would break logs apart. */
	for (char *p = out; *p; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
}

sg_err dtn_fail(const struct dtn_client *c, const char *what,
		const struct dtn_reply *r, sg_err code, struct sg_errinfo *err)
{
	char msg[SG_ERR_MSG];

	if (!code)
		code = sg_http_status_err(r->status);
	if (!code)
		code = SG_E_PROVIDER;
	dtn_message(c, r, msg, sizeof(msg));
	if (msg[0])
		return sg_err_set(err, code, "%s failed: Daytona answered HTTP %ld: %s",
				  what, r->status, msg);
	return sg_err_set(err, code, "%s failed: Daytona answered HTTP %ld", what,
			  r->status);
}
