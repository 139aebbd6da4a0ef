/*
 * api.c - Modal's control plane and command router (see api.h).
 */
#include "modal/api.h"

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "adapters/jobreply.h"
#include "adapters/adapter.h"
#include "core/leg.h"
#include "base/fsutil.h"
#include "base/log.h"
#include "base/limits.h"

/*
 * What every control-plane call says about its client: Modal's own
 * clients send a client type and version; these are libmodal's (the
 * server's list of accepted values is not published).
 */
#define MDL_CLIENT_TYPE "x-modal-client-type: 8"
#define MDL_CLIENT_VERSION "x-modal-client-version: 1.0.0"

/* How long a failed terminate's check waits for the sandbox's end. */
#define MDL_END_WAIT_S 5

/* ---- Credentials ---------------------------------------------------------- */

void mdl_wipe(void *p, size_t n)
{
	volatile unsigned char *v = p;

	while (n--)
		*v++ = 0;
}

static void copy_field(char *dst, const char *src)
{
	snprintf(dst, MDL_FIELD_MAX, "%s", src ? src : "");
}

/*
 * One of Modal's variables, or NULL when unset or empty: read only as
 * the adapter's field table declares it, the list the config refuses to
 * forward into commands.
 */
static const char *env_nonempty(const char *name)
{
	return sg_adapter_env(sg_adapter_find("modal"), NULL, name, NULL);
}

/* A TOML string or boolean value (the subset ~/.modal.toml uses). */
static bool toml_value(char *v, char **out)
{
	size_t n;

	while (*v == ' ' || *v == '\t')
		v++;
	n = strlen(v);
	while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\r'))
		v[--n] = '\0';
	if (n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n - 1] == v[0]) {
		v[n - 1] = '\0';
		*out = v + 1;
		return true;
	}
	if (strcmp(v, "true") == 0 || strcmp(v, "false") == 0) {
		*out = v;
		return true;
	}
	return false;
}

struct toml_profile {
	char name[MDL_FIELD_MAX];
	struct mdl_creds c;
	bool active;
	int sandbox_v2; /* -1: not set */
};

/* A boolean as modal-js reads MODAL_SANDBOX_V2: anything but 0 or false. */
static bool flag_on(const char *v)
{
	return strcmp(v, "0") != 0 && strcasecmp(v, "false") != 0;
}

/* Read the config file's profiles; *n of them into ps (at most max). */
static sg_err read_profiles(const char *file, struct toml_profile *ps,
			    size_t max, size_t *n, struct sg_errinfo *err)
{
	FILE *f = fopen(file, "r");
	char line[2048];
	struct toml_profile *cur = NULL;
	int lineno = 0;
	sg_err rc = SG_OK;

	*n = 0;
	if (!f)
		return errno == ENOENT ? SG_E_NOT_FOUND
				       : sg_err_set(err, SG_E_PERMISSION,
						    "cannot read %s", file);
	while (fgets(line, sizeof(line), f)) {
		char *p = line, *eq, *val;

		lineno++;
		line[strcspn(line, "\n")] = '\0';
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '#' || *p == '\0')
			continue;
		if (*p == '[') {
			char *end = strchr(p, ']');

			if (!end || *n >= max) {
				rc = sg_err_set(err, SG_E_INVALID_ARGUMENT,
						"%s line %d: a malformed or extra "
						"profile header", file, lineno);
				goto out;
			}
			*end = '\0';
			cur = &ps[(*n)++];
			memset(cur, 0, sizeof(*cur));
			cur->sandbox_v2 = -1;
			copy_field(cur->name, p + 1);
			continue;
		}
		eq = strchr(p, '=');
		if (!eq || !cur) {
			rc = sg_err_set(err, SG_E_INVALID_ARGUMENT,
					"%s line %d: not a profile's key = value",
					file, lineno);
			goto out;
		}
		*eq = '\0';
		for (char *e = eq - 1; e >= p && (*e == ' ' || *e == '\t'); e--)
			*e = '\0';
		if (!toml_value(eq + 1, &val))
			continue; /* numbers, arrays: no key we read has them */
		if (strcmp(p, "token_id") == 0)
			copy_field(cur->c.token_id, val);
		else if (strcmp(p, "token_secret") == 0)
			copy_field(cur->c.token_secret, val);
		else if (strcmp(p, "server_url") == 0)
			copy_field(cur->c.server_url, val);
		else if (strcmp(p, "environment") == 0)
			copy_field(cur->c.environment, val);
		else if (strcmp(p, "active") == 0)
			cur->active = strcmp(val, "true") == 0;
		else if (strcmp(p, "sandbox_v2") == 0)
			cur->sandbox_v2 = flag_on(val);
	}
out:
	fclose(f);
	return rc;
}

sg_err mdl_creds_load(struct mdl_creds *out, struct sg_errinfo *err)
{
	const char *id = env_nonempty("MODAL_TOKEN_ID");
	const char *secret = env_nonempty("MODAL_TOKEN_SECRET");
	const char *want = env_nonempty("MODAL_PROFILE");
	const char *home = getenv("HOME");
	char file[SG_PATH_MAX];
	struct toml_profile *ps = calloc(16, sizeof(*ps));
	const struct toml_profile *use = NULL;
	size_t n = 0;
	sg_err rc = SG_OK;

	memset(out, 0, sizeof(*out));
	if (!ps)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (env_nonempty("MODAL_CONFIG_PATH"))
		snprintf(file, sizeof(file), "%s", env_nonempty("MODAL_CONFIG_PATH"));
	else
		snprintf(file, sizeof(file), "%s/.modal.toml", home ? home : "");
	rc = read_profiles(file, ps, 16, &n, err);
	if (rc == SG_E_NOT_FOUND)
		rc = SG_OK;
	if (rc)
		goto out;
	for (size_t i = 0; i < n; i++)
		if (want ? strcmp(ps[i].name, want) == 0 : ps[i].active)
			use = &ps[i];
	if (!use && !want && n == 1)
		use = &ps[0];
	if (want && !use && !(id && secret)) {
		rc = sg_err_set(err, SG_E_PERMISSION,
				"MODAL_PROFILE names a profile that %s does not have",
				file);
		goto out;
	}
	out->sandbox_v2 = true;
	if (use) {
		*out = use->c;
		copy_field(out->profile, use->name);
		out->sandbox_v2 = use->sandbox_v2 != 0;
	}
	if (env_nonempty("MODAL_SANDBOX_V2"))
		out->sandbox_v2 = flag_on(env_nonempty("MODAL_SANDBOX_V2"));
	if (id && secret) {
		copy_field(out->token_id, id);
		copy_field(out->token_secret, secret);
	}
	if (env_nonempty("MODAL_SERVER_URL"))
		copy_field(out->server_url, env_nonempty("MODAL_SERVER_URL"));
	if (env_nonempty("MODAL_ENVIRONMENT"))
		copy_field(out->environment, env_nonempty("MODAL_ENVIRONMENT"));
	if (!out->server_url[0])
		copy_field(out->server_url, MDL_SERVER_DEFAULT);
	if (!out->token_id[0] || !out->token_secret[0])
		rc = sg_err_set(err, SG_E_PERMISSION,
				"no Modal token: set MODAL_TOKEN_ID and "
				"MODAL_TOKEN_SECRET, or run `modal token new` "
				"(which writes %s)", file);
out:
	mdl_wipe(ps, 16 * sizeof(*ps));
	free(ps);
	if (rc)
		mdl_wipe(out, sizeof(*out));
	return rc;
}

/* ---- The client and its auth token ------------------------------------- */

/* Whether url is http:// to a loopback address (a test fake). */
static bool is_loopback_h2c(const char *url)
{
	static const char *const hosts[] = { "http://127.0.0.1:", "http://localhost:",
					     "http://[::1]:" };

	for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++)
		if (strncmp(url, hosts[i], strlen(hosts[i])) == 0)
			return true;
	return false;
}

sg_err mdl_client_init(struct mdl_client *c, const struct mdl_creds *creds,
		       const char *ca_file, struct sg_errinfo *err)
{
	sg_err rc;

	memset(c, 0, sizeof(*c));
	c->creds = *creds;
	/* Cleartext only to loopback: a token must never cross a network bare. */
	if (strncmp(creds->server_url, "http://", 7) == 0 &&
	    !is_loopback_h2c(creds->server_url))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "MODAL_SERVER_URL: http:// is accepted only for "
				  "a server on this host's loopback; use https://");
	c->loopback_h2c = is_loopback_h2c(creds->server_url);
	rc = sg_grpc_channel_new(creds->server_url, ca_file, &c->ctl, err);
	if (rc)
		return rc;
	pthread_mutex_init(&c->mu, NULL);
	atomic_init(&c->auth_fetches, 0);
	return SG_OK;
}

void mdl_client_release(struct mdl_client *c)
{
	if (!c->ctl)
		return;
	sg_grpc_channel_free(c->ctl);
	c->ctl = NULL;
	pthread_mutex_destroy(&c->mu);
	if (c->auth_token) {
		mdl_wipe(c->auth_token, strlen(c->auth_token));
		free(c->auth_token);
	}
	c->auth_token = NULL;
	mdl_wipe(&c->creds, sizeof(c->creds));
}

/* A JWT's "exp" (seconds), or 0 when it has none that can be read. */
static int64_t jwt_exp(const char *jwt)
{
	static const char tbl[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	const char *p = strchr(jwt, '.'), *q;
	unsigned char buf[4096];
	size_t o = 0;
	uint32_t acc = 0;
	int bits = 0;
	json_t *j;
	int64_t exp = 0;

	if (!p || !(q = strchr(p + 1, '.')))
		return 0;
	for (const char *s = p + 1; s < q && o < sizeof(buf); s++) {
		const char *k = memchr(tbl, *s, 64);

		if (!k)
			return 0;
		acc = acc << 6 | (uint32_t)(k - tbl);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			buf[o++] = (unsigned char)(acc >> bits);
		}
	}
	j = json_loadb((const char *)buf, o, 0, NULL);
	if (j && json_is_integer(json_object_get(j, "exp")))
		exp = json_integer_value(json_object_get(j, "exp"));
	json_decref(j);
	return exp;
}

/* The metadata of a control-plane call into md (at least 7 slots). */
static void base_metadata(const struct mdl_client *c, const char *lines[8],
			  char id[], char secret[], size_t cap)
{
	snprintf(id, cap, "x-modal-token-id: %s", c->creds.token_id);
	snprintf(secret, cap, "x-modal-token-secret: %s", c->creds.token_secret);
	lines[0] = id;
	lines[1] = secret;
	lines[2] = MDL_CLIENT_TYPE;
	lines[3] = MDL_CLIENT_VERSION;
	lines[4] = NULL;
}

/* Unpack a reply, or a sentence saying it could not be. */
static sg_err unpack(const ProtobufCMessageDescriptor *d,
		     const struct sg_grpc_result *res, ProtobufCMessage **out,
		     const char *method, struct sg_errinfo *err)
{
	*out = protobuf_c_message_unpack(d, NULL, res->msg.len,
					 (const uint8_t *)res->msg.p);
	if (!*out)
		return sg_err_set(err, SG_E_PROVIDER,
				  "Modal's reply to %s could not be decoded", method);
	return SG_OK;
}

/* One unary call on a channel with the given metadata; the low layer. */
static sg_err call_on(struct sg_grpc_channel *ch, const char *path,
		      const char *const *md, const ProtobufCMessage *req,
		      const ProtobufCMessageDescriptor *resp_desc,
		      ProtobufCMessage **resp, int64_t timeout_ms, int *status,
		      struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_grpc_retry policy = sg_grpc_retry_modal;
	struct sg_grpc_result res;
	size_t len = protobuf_c_message_get_packed_size(req);
	uint8_t *buf = malloc(len ? len : 1);
	char key[37];
	struct sg_grpc_call call = { .method = path, .metadata = md,
				     .timeout_ms = timeout_ms };
	sg_err rc;

	*resp = NULL;
	if (status)
		*status = SG_GRPC_INTERNAL;
	if (!buf)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	protobuf_c_message_pack(req, buf);
	call.req = buf;
	call.req_len = len;
	sg_grpc_uuid(key);
	policy.idempotency_key = key;
	sg_grpc_result_init(&res);
	rc = sg_grpc_invoke_retry(ch, &call, &policy, &res, cancel, err);
	if (status)
		*status = res.status;
	if (!rc)
		rc = unpack(resp_desc, &res, resp, path, err);
	sg_grpc_result_release(&res);
	free(buf);
	return rc;
}

/* The auth token, fetched or refreshed when it is within a minute of exp. */
static sg_err auth_line(struct mdl_client *c, char **line,
			struct sg_cancel *cancel, struct sg_errinfo *err)
{
	char id[MDL_FIELD_MAX + 32], secret[MDL_FIELD_MAX + 32];
	const char *md[8];
	Modal__Client__AuthTokenGetRequest req =
		MODAL__CLIENT__AUTH_TOKEN_GET_REQUEST__INIT;
	Modal__Client__AuthTokenGetResponse *resp = NULL;
	struct sg_buf b = SG_BUF_INIT(16 * SG_KiB);
	sg_err rc = SG_OK;

	pthread_mutex_lock(&c->mu);
	if (!c->auth_token || (c->auth_exp &&
			       (int64_t)time(NULL) + SG_MODAL_REFRESH_S >= c->auth_exp)) {
		base_metadata(c, md, id, secret, sizeof(id));
		rc = call_on(c->ctl, "/modal.client.ModalClient/AuthTokenGet", md,
			     &req.base, &modal__client__auth_token_get_response__descriptor,
			     (ProtobufCMessage **)&resp, SG_MODAL_CALL_MS, NULL, cancel,
			     err);
		mdl_wipe(id, sizeof(id));
		mdl_wipe(secret, sizeof(secret));
		if (!rc && !resp->token[0])
			rc = sg_err_set(err, SG_E_PROVIDER,
					"Modal gave an empty auth token");
		if (!rc) {
			free(c->auth_token);
			c->auth_token = strdup(resp->token);
			c->auth_exp = jwt_exp(resp->token);
			atomic_fetch_add(&c->auth_fetches, 1);
			if (!c->auth_token)
				rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		}
		if (resp)
			protobuf_c_message_free_unpacked(&resp->base, NULL);
	}
	if (!rc)
		rc = sg_buf_addf(&b, "x-modal-auth-token: %s", c->auth_token);
	pthread_mutex_unlock(&c->mu);
	if (!rc)
		*line = b.p;
	else
		sg_buf_release(&b);
	return rc;
}

sg_err mdl_call(struct mdl_client *c, const char *method,
		const ProtobufCMessage *req,
		const ProtobufCMessageDescriptor *resp_desc,
		ProtobufCMessage **resp, int64_t timeout_ms, int *status,
		struct sg_cancel *cancel, struct sg_errinfo *err)
{
	char id[MDL_FIELD_MAX + 32], secret[MDL_FIELD_MAX + 32];
	char path[160];
	const char *md[8];
	char *auth = NULL;
	sg_err rc;

	*resp = NULL;
	snprintf(path, sizeof(path), "/modal.client.ModalClient/%s", method);
	rc = auth_line(c, &auth, cancel, err);
	if (rc)
		return rc;
	base_metadata(c, md, id, secret, sizeof(id));
	md[4] = auth;
	md[5] = NULL;
	rc = call_on(c->ctl, path, md, req, resp_desc, resp,
		     timeout_ms ? timeout_ms : SG_MODAL_CALL_MS, status, cancel, err);
	mdl_wipe(id, sizeof(id));
	mdl_wipe(secret, sizeof(secret));
	mdl_wipe(auth, strlen(auth));
	free(auth);
	return rc;
}

/* ---- Apps and images ---------------------------------------------------- */

static sg_err dup_out(const char *s, char **out, struct sg_errinfo *err)
{
	*out = strdup(s);
	return *out ? SG_OK : sg_err_set(err, SG_E_INTERNAL, "out of memory");
}

sg_err mdl_app(struct mdl_client *c, const char *name, char **app_id,
	       struct sg_cancel *cancel, struct sg_errinfo *err)
{
	Modal__Client__AppGetOrCreateRequest req =
		MODAL__CLIENT__APP_GET_OR_CREATE_REQUEST__INIT;
	Modal__Client__AppGetOrCreateResponse *resp = NULL;
	sg_err rc;

	req.app_name = (char *)name;
	req.environment_name = c->creds.environment;
	req.object_creation_type =
		MODAL__CLIENT__OBJECT_CREATION_TYPE__OBJECT_CREATION_TYPE_CREATE_IF_MISSING;
	rc = mdl_call(c, "AppGetOrCreate", &req.base,
		      &modal__client__app_get_or_create_response__descriptor,
		      (ProtobufCMessage **)&resp, 0, NULL, cancel, err);
	if (!rc)
		rc = dup_out(resp->app_id, app_id, err);
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

/*
 * The image builder version the environment asks for (EnvironmentGetOrCreate),
 * into out; asked once per client, kept in c->builder.
 */
static sg_err builder_version(struct mdl_client *c, char *out, size_t cap,
			      struct sg_cancel *cancel, struct sg_errinfo *err)
{
	Modal__Client__EnvironmentGetOrCreateRequest ereq =
		MODAL__CLIENT__ENVIRONMENT_GET_OR_CREATE_REQUEST__INIT;
	Modal__Client__EnvironmentGetOrCreateResponse *eresp = NULL;
	sg_err rc = SG_OK;

	pthread_mutex_lock(&c->mu);
	snprintf(out, cap, "%s", c->builder);
	pthread_mutex_unlock(&c->mu);
	if (out[0])
		return SG_OK;
	snprintf(out, cap, "2024.10"); /* libmodal's default */
	ereq.deployment_name = c->creds.environment;
	rc = mdl_call(c, "EnvironmentGetOrCreate", &ereq.base,
		      &modal__client__environment_get_or_create_response__descriptor,
		      (ProtobufCMessage **)&eresp, 0, NULL, cancel, err);
	if (rc)
		return rc;
	if (eresp->metadata && eresp->metadata->settings &&
	    eresp->metadata->settings->image_builder_version[0])
		snprintf(out, cap, "%s", eresp->metadata->settings->image_builder_version);
	protobuf_c_message_free_unpacked(&eresp->base, NULL);
	pthread_mutex_lock(&c->mu);
	snprintf(c->builder, sizeof(c->builder), "%s", out);
	pthread_mutex_unlock(&c->mu);
	return SG_OK;
}

struct env_ask {
	struct mdl_client *c;
	struct sg_cancel *cancel; /* the caller's: the ask is not stopped apart */
};

/* A failed ask is asked again by mdl_image, which reports it. */
static sg_err env_ask_run(void *arg, struct sg_cancel *stop)
{
	struct env_ask *a = arg;
	struct sg_errinfo err = { 0 };
	char builder[sizeof(a->c->builder)];

	(void)stop;
	(void)builder_version(a->c, builder, sizeof(builder), a->cancel, &err);
	return SG_OK;
}

sg_err mdl_app_and_env(struct mdl_client *c, const char *name, bool with_env,
		       char **app_id, struct sg_cancel *cancel,
		       struct sg_errinfo *err)
{
	struct env_ask a = { .c = c, .cancel = cancel };
	struct sg_leg ask = { .run = env_ask_run, .arg = &a };
	struct sg_errinfo no_thread = { 0 };
	sg_err rc;

	/* Both ask for the auth token first; the client fetches it once. */
	if (with_env && sg_leg_start(&ask, &no_thread))
		sg_log_debug("%s: the image's builder version is asked later", no_thread.msg);
	rc = mdl_app(c, name, app_id, cancel, err);
	sg_leg_end(&ask, SG_OK);
	return rc;
}

struct join {
	int status;        /* the build's GenericStatus, 0 until known */
	char entry[128];   /* the last entry id, to resume from */
	char why[256];     /* the failure's exception */
	bool eof;
};

static sg_err on_join(const uint8_t *data, size_t len, void *payload)
{
	struct join *j = payload;
	Modal__Client__ImageJoinStreamingResponse *m =
		modal__client__image_join_streaming_response__unpack(NULL, len, data);

	if (!m)
		return SG_E_PROVIDER;
	for (size_t i = 0; i < m->n_task_logs; i++)
		sg_log_info("modal image build: %.*s",
			    (int)strcspn(m->task_logs[i]->data, "\n"),
			    m->task_logs[i]->data);
	if (m->entry_id[0])
		snprintf(j->entry, sizeof(j->entry), "%s", m->entry_id);
	if (m->result && m->result->status) {
		j->status = m->result->status;
		snprintf(j->why, sizeof(j->why), "%s", m->result->exception);
	}
	j->eof = j->eof || m->eof;
	modal__client__image_join_streaming_response__free_unpacked(m, NULL);
	return SG_OK;
}

/*
 * ImageGetOrCreate for the one-line Dockerfile `from`, with the builder
 * version the environment asks for; *resp (new) is Modal's answer.
 */
static sg_err image_get_or_create(struct mdl_client *c, const char *app_id, char *from,
				  Modal__Client__ImageGetOrCreateResponse **resp,
				  struct sg_cancel *cancel, struct sg_errinfo *err)
{
	Modal__Client__ImageGetOrCreateRequest req =
		MODAL__CLIENT__IMAGE_GET_OR_CREATE_REQUEST__INIT;
	Modal__Client__Image img = MODAL__CLIENT__IMAGE__INIT;
	char builder[sizeof(c->builder)];
	char *cmds[1] = { from };
	sg_err rc;

	*resp = NULL;
	rc = builder_version(c, builder, sizeof(builder), cancel, err);
	if (rc)
		return rc;
	img.n_dockerfile_commands = 1;
	img.dockerfile_commands = cmds;
	req.image = &img;
	req.app_id = (char *)app_id;
	req.builder_version = builder;
	return mdl_call(c, "ImageGetOrCreate", &req.base,
			&modal__client__image_get_or_create_response__descriptor,
			(ProtobufCMessage **)resp, 0, NULL, cancel, err);
}

/*
 * One ImageJoinStreaming call: the build's news from the last entry j
 * has seen on, into j.  A join that broke off (unavailable, timed out)
 * is no failure: the caller joins again from the last entry.
 */
static sg_err image_join_once(struct mdl_client *c, const char *image_id, struct join *j,
			      struct sg_cancel *cancel, struct sg_errinfo *err)
{
	Modal__Client__ImageJoinStreamingRequest jr =
		MODAL__CLIENT__IMAGE_JOIN_STREAMING_REQUEST__INIT;
	struct sg_grpc_result res;
	uint8_t *buf = NULL;
	size_t len;
	char *auth = NULL;
	char id[MDL_FIELD_MAX + 32], secret[MDL_FIELD_MAX + 32];
	const char *md[8];
	struct sg_grpc_call call = {
		.method = "/modal.client.ModalClient/ImageJoinStreaming",
		.timeout_ms = (SG_MODAL_JOIN_S + 10) * 1000,
		.on_msg = on_join, .payload = j,
	};
	sg_err rc;

	jr.image_id = (char *)image_id;
	jr.timeout = SG_MODAL_JOIN_S;
	jr.last_entry_id = j->entry;
	/* Sized from the request: the image id is Modal's, of any length. */
	len = protobuf_c_message_get_packed_size(&jr.base);
	buf = malloc(len ? len : 1);
	if (!buf)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	call.req = buf;
	call.req_len = protobuf_c_message_pack(&jr.base, buf);
	rc = auth_line(c, &auth, cancel, err);
	if (rc)
		goto out;
	base_metadata(c, md, id, secret, sizeof(id));
	md[4] = auth;
	md[5] = NULL;
	call.metadata = md;
	sg_grpc_result_init(&res);
	rc = sg_grpc_invoke(c->ctl, &call, &res, cancel, err);
	if (rc == SG_E_UNAVAILABLE || rc == SG_E_TIMEOUT) {
		sg_err_clear(err);
		rc = SG_OK;
	}
	sg_grpc_result_release(&res);
	mdl_wipe(id, sizeof(id));
	mdl_wipe(secret, sizeof(secret));
	mdl_wipe(auth, strlen(auth));
	free(auth);
out:
	free(buf);
	return rc;
}

/*
 * Join the build of image_id until it reports a status, as long as the
 * deadline (timeout_ms from when mdl_image began) has not passed.
 */
static sg_err image_join(struct mdl_client *c, const char *image_id, const char *ref,
			 int64_t timeout_ms, int64_t deadline, struct join *j,
			 struct sg_cancel *cancel, struct sg_errinfo *err)
{
	sg_err rc;

	while (j->status == 0) {
		if (sg_now_ms() > deadline)
			return sg_err_set(err, SG_E_TIMEOUT, "image %s was not built within %lld s",
					  ref, (long long)(timeout_ms / 1000));
		rc = image_join_once(c, image_id, j, cancel, err);
		if (rc)
			return rc;
	}
	return SG_OK;
}

sg_err mdl_image(struct mdl_client *c, const char *app_id, const char *ref,
		 int64_t timeout_ms, char **image_id, struct sg_cancel *cancel,
		 struct sg_errinfo *err)
{
	Modal__Client__ImageGetOrCreateResponse *resp = NULL;
	char from[SG_PATH_MAX];
	struct join j = { 0 };
	int64_t deadline = sg_now_ms() + timeout_ms;
	sg_err rc;

	*image_id = NULL;
	/* One FROM line; a reference with spaces or newlines would be more. */
	if (!ref[0] || strpbrk(ref, " \t\r\n") ||
	    snprintf(from, sizeof(from), "FROM %s", ref) >= (int)sizeof(from))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "image: a registry reference is one word");
	rc = image_get_or_create(c, app_id, from, &resp, cancel, err);
	if (rc)
		goto out;
	if (resp->result)
		j.status = resp->result->status;
	rc = image_join(c, resp->image_id, ref, timeout_ms, deadline, &j, cancel, err);
	if (rc)
		goto out;
	if (j.status != MODAL__CLIENT__GENERIC_RESULT__GENERIC_STATUS__GENERIC_STATUS_SUCCESS) {
		rc = sg_err_set(err, SG_E_PROVIDER, "image %s failed to build: %s",
				ref, j.why[0] ? j.why : "(no reason given)");
		goto out;
	}
	rc = dup_out(resp->image_id, image_id, err);
out:
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

/* ---- The router --------------------------------------------------------- */

void mdl_router_release(struct mdl_router *r)
{
	sg_grpc_channel_free(r->ch);
	r->ch = NULL;
	if (r->auth_line) {
		mdl_wipe(r->auth_line, strlen(r->auth_line));
		free(r->auth_line);
	}
	r->auth_line = NULL;
}

sg_err mdl_router_attach(struct mdl_client *c, const char *task_id, const char *router_url,
			 const char *jwt, struct mdl_router *r, struct sg_errinfo *err)
{
	char url[MDL_FIELD_MAX];
	struct sg_buf line = SG_BUF_INIT(16 * SG_KiB);
	sg_err rc = SG_OK;

	memset(r, 0, sizeof(*r));
	if (!task_id[0] || strlen(task_id) >= sizeof(r->task_id)) {
		rc = sg_err_set(err, SG_E_PROVIDER, "Modal gave no usable task id");
		goto out;
	}
	snprintf(r->task_id, sizeof(r->task_id), "%s", task_id);
	/*
	 * Modal's routers are https; a loopback fake's is dialled without TLS,
	 * as the official SDK does, and only when the control plane is too.
	 */
	if (strncmp(router_url, "https://", 8) != 0) {
		rc = sg_err_set(err, SG_E_PROVIDER,
				"Modal gave a command router URL that is not https");
		goto out;
	}
	if (c->loopback_h2c)
		snprintf(url, sizeof(url), "http://%s", router_url + 8);
	else
		snprintf(url, sizeof(url), "%s", router_url);
	if (c->loopback_h2c && !is_loopback_h2c(url)) {
		rc = sg_err_set(err, SG_E_PROVIDER,
				"a loopback Modal gave a router elsewhere");
		goto out;
	}
	rc = sg_grpc_channel_new(url, NULL, &r->ch, err);
	if (!rc)
		rc = sg_buf_addf(&line, "authorization: Bearer %s", jwt);
	if (!rc)
		r->exp = jwt_exp(jwt);
	if (!rc) {
		r->auth_line = line.p;
		line = (struct sg_buf)SG_BUF_INIT(0);
	}
out:
	sg_buf_release(&line);
	if (rc)
		mdl_router_release(r);
	return rc;
}

sg_err mdl_router_open(struct mdl_client *c, const char *sandbox_id,
		       int64_t timeout_ms, struct mdl_router *r,
		       struct sg_cancel *cancel, struct sg_errinfo *err)
{
	Modal__Client__TaskGetCommandRouterAccessRequest areq =
		MODAL__CLIENT__TASK_GET_COMMAND_ROUTER_ACCESS_REQUEST__INIT;
	Modal__Client__TaskGetCommandRouterAccessResponse *aresp = NULL;
	Modal__Client__SandboxGetCommandRouterAccessRequest vreq =
		MODAL__CLIENT__SANDBOX_GET_COMMAND_ROUTER_ACCESS_REQUEST__INIT;
	Modal__Client__SandboxGetCommandRouterAccessResponse *vresp = NULL;
	int64_t deadline = sg_now_ms() + timeout_ms;
	sg_err rc = SG_OK;

	memset(r, 0, sizeof(*r));
	while (!r->task_id[0]) {
		Modal__Client__SandboxGetTaskIdRequest req =
			MODAL__CLIENT__SANDBOX_GET_TASK_ID_REQUEST__INIT;
		Modal__Client__SandboxGetTaskIdResponse *resp = NULL;

		if (sg_now_ms() > deadline) {
			rc = sg_err_set(err, SG_E_TIMEOUT,
					"sandbox %s was not ready within %lld ms",
					sandbox_id, (long long)timeout_ms);
			goto out;
		}
		req.sandbox_id = (char *)sandbox_id;
		req._timeout_case = MODAL__CLIENT__SANDBOX_GET_TASK_ID_REQUEST___TIMEOUT_TIMEOUT;
		req.timeout = SG_MODAL_TASK_POLL_S;
		req.wait_until_ready = true;
		rc = mdl_call(c, MDL_SANDBOX_RPC(c, "SandboxGetTaskId"), &req.base,
			      &modal__client__sandbox_get_task_id_response__descriptor,
			      (ProtobufCMessage **)&resp,
			      (SG_MODAL_TASK_POLL_S + 30) * 1000, NULL, cancel, err);
		if (rc)
			goto out;
		if (resp->task_result) {
			rc = sg_err_set(err, SG_E_WORKSPACE_LOST,
					"sandbox %s has ended (%s)", sandbox_id,
					resp->task_result->exception[0]
						? resp->task_result->exception
						: "no reason given");
		} else if (resp->_task_id_case ==
				   MODAL__CLIENT__SANDBOX_GET_TASK_ID_RESPONSE___TASK_ID_TASK_ID &&
			   resp->task_id[0]) {
			snprintf(r->task_id, sizeof(r->task_id), "%s", resp->task_id);
		}
		protobuf_c_message_free_unpacked(&resp->base, NULL);
		if (rc)
			goto out;
	}
	/* A v2 sandbox's access is asked for by its id, as modal-js does. */
	areq.task_id = r->task_id;
	vreq.sandbox_id = (char *)sandbox_id;
	vreq.task_id = r->task_id;
	if (c->creds.sandbox_v2)
		rc = mdl_call(c, "SandboxGetCommandRouterAccess", &vreq.base,
			      &modal__client__sandbox_get_command_router_access_response__descriptor,
			      (ProtobufCMessage **)&vresp, 0, NULL, cancel, err);
	else
		rc = mdl_call(c, "TaskGetCommandRouterAccess", &areq.base,
			      &modal__client__task_get_command_router_access_response__descriptor,
			      (ProtobufCMessage **)&aresp, 0, NULL, cancel, err);
	if (!rc) {
		char task[sizeof(r->task_id)];

		snprintf(task, sizeof(task), "%s", r->task_id);
		rc = mdl_router_attach(c, task, aresp ? aresp->url : vresp->url,
				       aresp ? aresp->jwt : vresp->jwt, r, err);
	}
out:
	if (aresp) {
		mdl_wipe(aresp->jwt, strlen(aresp->jwt));
		protobuf_c_message_free_unpacked(&aresp->base, NULL);
	}
	if (vresp) {
		mdl_wipe(vresp->jwt, strlen(vresp->jwt));
		protobuf_c_message_free_unpacked(&vresp->base, NULL);
	}
	if (rc)
		mdl_router_release(r);
	return rc;
}

/* A unary router call, retried as Modal's clients retry. */
static sg_err router_call(struct mdl_router *r, const char *method,
			  const ProtobufCMessage *req,
			  const ProtobufCMessageDescriptor *resp_desc,
			  ProtobufCMessage **resp, int64_t timeout_ms,
			  struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const char *md[2] = { r->auth_line, NULL };
	char path[160];

	snprintf(path, sizeof(path), "/modal.task_command_router.TaskCommandRouter/%s",
		 method);
	return call_on(r->ch, path, md, req, resp_desc, resp,
		       timeout_ms ? timeout_ms : SG_MODAL_CALL_MS, NULL, cancel, err);
}

void mdl_exec_result_init(struct mdl_exec_result *r, size_t max)
{
	sg_buf_init(&r->out, max);
	sg_buf_init(&r->err, max);
	r->out_fd = -1;
	r->out_total = r->err_total = 0;
	r->code = -1;
	r->signal = 0;
	r->router_calls = 0;
	r->stopped = false;
}

void mdl_exec_result_release(struct mdl_exec_result *r)
{
	sg_buf_release(&r->out);
	sg_buf_release(&r->err);
}

struct reader {
	struct sg_buf *buf;
	uint64_t *total;
	int fd; /* -1: into buf */
	const char *stop; /* mdl_exec's stop_mark, or NULL */
	bool *stopped;
};

static sg_err on_output(const uint8_t *data, size_t len, void *payload)
{
	struct reader *rd = payload;
	Modal__TaskCommandRouter__TaskExecStdioReadResponse *m =
		modal__task_command_router__task_exec_stdio_read_response__unpack(
			NULL, len, data);
	sg_err rc = SG_OK;

	if (!m)
		return SG_E_PROVIDER;
	if (rd->fd < 0) {
		/* Past the bound the bytes are counted, not kept. */
		sg_buf_add_clipped(rd->buf, m->data.data, m->data.len);
	} else if (*rd->total + m->data.len > rd->buf->max) {
		rc = SG_E_TOO_LARGE;
	} else if (sg_write_all(rd->fd, m->data.data, m->data.len) != 0) {
		rc = SG_E_INTERNAL;
	}
	*rd->total += m->data.len;
	modal__task_command_router__task_exec_stdio_read_response__free_unpacked(m, NULL);
	/* The job's reply is whole and its process lives on: cancel the read. */
	if (!rc && rd->stop && rd->fd < 0 && sg_job_ended(rd->buf->p, rd->buf->len, rd->stop)) {
		*rd->stopped = true;
		rc = SG_E_CANCELLED;
	}
	return rc;
}

/* The readers of a result's two streams; the stdout one ends at stop (may be NULL). */
static struct reader out_reader(struct mdl_exec_result *res, const char *stop)
{
	return (struct reader){ .buf = &res->out, .total = &res->out_total, .fd = res->out_fd,
				.stop = stop, .stopped = &res->stopped };
}

static struct reader err_reader(struct mdl_exec_result *res)
{
	return (struct reader){ .buf = &res->err, .total = &res->err_total, .fd = -1,
				.stopped = &res->stopped };
}

/* The exec's start, one router call (counted); its answer holds nothing we use. */
static sg_err exec_start(struct mdl_router *r, const ProtobufCMessage *start, int *calls,
			 struct sg_cancel *cancel, struct sg_errinfo *err)
{
	ProtobufCMessage *sresp = NULL;
	sg_err rc = router_call(r, "TaskExecStart", start,
				&modal__task_command_router__task_exec_start_response__descriptor,
				&sresp, 0, cancel, err);

	(*calls)++;
	if (sresp)
		protobuf_c_message_free_unpacked(sresp, NULL);
	return rc;
}

/*
 * Read stream fd (0 stdout, 1 stderr) to its end into rd, reconnecting at
 * the offset reached; deadline 0: none (the cancel token bounds it).  The
 * reconnects are counted since the last byte that came, so a long
 * command's stream may be cut any number of times as long as each piece
 * brings something.  *refused (may be NULL): the read failed with the
 * router's own status, before any message.
 */
static sg_err read_stream(struct mdl_router *r, const char *exec_id, int fd, struct reader *rd,
			  int64_t deadline, int *calls, bool *refused, struct sg_cancel *cancel,
			  struct sg_errinfo *err)
{
	const char *md[2] = { r->auth_line, NULL };
	sg_err rc = SG_OK;

	for (int tries = 0;; tries++) {
		uint64_t at = *rd->total;
		Modal__TaskCommandRouter__TaskExecStdioReadRequest req =
			MODAL__TASK_COMMAND_ROUTER__TASK_EXEC_STDIO_READ_REQUEST__INIT;
		uint8_t msg[512];
		struct sg_grpc_result res;
		struct sg_errinfo e1 = { 0 };
		struct sg_grpc_call call = {
			.method = "/modal.task_command_router.TaskCommandRouter/TaskExecStdioRead",
			.metadata = md, .on_msg = on_output, .payload = rd,
			.timeout_ms = deadline ? deadline - sg_now_ms() : 0,
		};

		if (deadline && call.timeout_ms <= 0)
			return sg_err_set(err, SG_E_TIMEOUT,
					  "the command's output did not end in time");
		req.task_id = r->task_id;
		req.exec_id = (char *)exec_id;
		req.offset = *rd->total;
		req.file_descriptor = fd;
		call.req = msg;
		call.req_len = protobuf_c_message_pack(&req.base, msg);
		sg_grpc_result_init(&res);
		rc = sg_grpc_invoke(r->ch, &call, &res, cancel, &e1);
		(*calls)++;
		if (refused)
			*refused = rc && res.from_server && res.messages == 0;
		sg_grpc_result_release(&res);
		if (rc == SG_OK || *rd->stopped)
			return SG_OK;
		if (*rd->total > at)
			tries = 0;
		if (rc != SG_E_UNAVAILABLE || tries >= SG_MODAL_READ_RETRIES ||
		    sg_cancel_check(cancel)) {
			return sg_err_set(err, rc, "%s", e1.msg);
		}
		rc = sg_cancel_sleep(cancel, 100 << tries);
		if (rc)
			return sg_err_set(err, rc, "the command's output read was "
					  "cancelled");
	}
}

/*
 * The stdin of an exec by offset: a retried write is not written twice.
 * In pieces of SG_MODAL_STDIN_CHUNK: libcurl 7.88.1 sends one large
 * HTTP/2 body slower the larger it is (a 15 MiB write did not finish in a
 * minute; in pieces it takes seconds).
 */
static sg_err write_stdin(struct mdl_router *r, const char *exec_id,
			  const struct mdl_exec *x, int *calls,
			  struct sg_cancel *cancel, struct sg_errinfo *err)
{
	Modal__TaskCommandRouter__TaskExecStdinWriteRequest w =
		MODAL__TASK_COMMAND_ROUTER__TASK_EXEC_STDIN_WRITE_REQUEST__INIT;
	ProtobufCMessage *wr = NULL;
	size_t at = 0;
	sg_err rc;

	w.task_id = r->task_id;
	w.exec_id = (char *)exec_id;
	do {
		size_t n = x->stdin_len - at;

		if (n > SG_MODAL_STDIN_CHUNK)
			n = SG_MODAL_STDIN_CHUNK;
		w.offset = at;
		w.data.data = (uint8_t *)x->stdin_data + at;
		w.data.len = n;
		w.eof = at + n == x->stdin_len;
		rc = router_call(r, "TaskExecStdinWrite", &w.base,
				 &modal__task_command_router__task_exec_stdin_write_response__descriptor,
				 &wr, 0, cancel, err);
		(*calls)++;
		if (wr)
			protobuf_c_message_free_unpacked(wr, NULL);
		wr = NULL;
		at += n;
	} while (!rc && at < x->stdin_len);
	return rc;
}

/*
 * The merged output read on a second thread (a leg), sent beside the
 * start rather than after its answer, and beside the stdin's writes.
 */
struct side_read {
	struct mdl_router *r;
	const char *exec_id;
	struct mdl_exec_result *res;
	const char *stop_mark;
	int64_t deadline;
	struct sg_cancel started; /* fired once the start has answered */
	int calls;
	struct sg_errinfo err;
};

/*
 * stop fires when the start or a write fails, or the caller cancels.  A
 * read that reached the router before the start did finds no exec: the
 * router refuses it with a status of its own before any output (the fake
 * says NOT_FOUND; Modal may say another).  It is sent again once the
 * start has answered, as it would have been without the head start, so
 * the early read fails no command the late one would not.  A reply that
 * came and was wrong (too large, not protobuf) is not such a refusal.
 */
static sg_err side_read_run(void *arg, struct sg_cancel *stop)
{
	struct side_read *s = arg;
	struct mdl_exec_result *res = s->res;
	struct pollfd p[2] = { { .fd = sg_cancel_fd(&s->started), .events = POLLIN },
			       { .fd = sg_cancel_fd(stop), .events = POLLIN } };
	struct reader rd = out_reader(res, s->stop_mark);
	bool refused = false;
	sg_err rc;

	/*
	 * The start leaves first: on its way, it is registered first.  A
	 * start that answers within the lag (a router close by) sends the
	 * read at once: the lag hides in a long round trip, not in a short one.
	 */
	(void)poll(p, 2, SG_MODAL_READ_LAG_MS);
	if (sg_cancel_check(stop))
		return sg_cancel_check(stop);
	rc = read_stream(s->r, s->exec_id, 0, &rd, s->deadline, &s->calls, &refused, stop,
			 &s->err);
	if (!refused || res->out_total > 0 || sg_cancel_check(stop))
		return rc;
	while (!sg_cancel_check(&s->started) && !sg_cancel_check(stop))
		(void)poll(p, 2, 1000);
	if (sg_cancel_check(stop))
		return sg_cancel_check(stop);
	sg_err_clear(&s->err);
	return read_stream(s->r, s->exec_id, 0, &rd, s->deadline, &s->calls, NULL, stop, &s->err);
}

/*
 * The start, the stdin's writes and the read of the merged output side
 * by side: the read leaves with the start, so a command costs one round
 * trip (its writes' with stdin), not the start's and then the read's.  A
 * failed start or write stops the read; the caller's cancel stops all.
 * *side false: no second thread could be had, nothing was sent.
 */
static sg_err start_beside_read(struct mdl_router *r, const ProtobufCMessage *start,
				const char *exec_id, const struct mdl_exec *x,
				struct mdl_exec_result *res, int64_t deadline, bool *side,
				struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct side_read s = { .r = r, .exec_id = exec_id, .res = res, .stop_mark = x->stop_mark,
			       .deadline = deadline };
	struct sg_leg read = { .run = side_read_run, .arg = &s };
	struct pollfd p[2] = { { .fd = -1, .events = POLLIN },
			       { .fd = sg_cancel_fd(cancel), .events = POLLIN } };
	sg_err rc;

	*side = sg_cancel_init(&s.started) == SG_OK;
	if (*side && sg_leg_start(&read, &s.err) != SG_OK) {
		sg_cancel_release(&s.started);
		*side = false;
	}
	if (!*side)
		return SG_OK;
	rc = exec_start(r, start, &res->router_calls, cancel, err);
	if (!rc)
		sg_cancel_fire(&s.started, SG_E_CANCELLED);
	if (!rc && x->stdin_data)
		rc = write_stdin(r, exec_id, x, &res->router_calls, cancel, err);
	p[0].fd = sg_leg_fd(&read);
	while (!rc && !sg_leg_ended(&read) && !sg_cancel_check(cancel))
		(void)poll(p, p[1].fd >= 0 ? 2 : 1, 1000);
	if (rc || sg_cancel_check(cancel))
		sg_leg_stop(&read, rc ? SG_E_CANCELLED : sg_cancel_check(cancel),
			    sg_cancel_reason(cancel));
	sg_leg_end(&read, SG_OK);
	res->router_calls += s.calls;
	sg_cancel_release(&s.started);
	if (!rc && read.rc)
		rc = sg_err_set(err, read.rc, "%s", s.err.msg);
	return rc;
}

/* A start request's environment, made from an exec's "NAME=value" list. */
struct run_env {
	Modal__TaskCommandRouter__TaskExecStartRequest__EnvEntry *entries; /* keys owned */
	Modal__TaskCommandRouter__TaskExecStartRequest__EnvEntry **list;  /* into entries */
	size_t n;
};

/* Split each NAME=value; the values stay the caller's. */
static sg_err run_env_init(struct run_env *e, const char *const *vars, struct sg_errinfo *err)
{
	*e = (struct run_env){ 0 };
	while (vars && vars[e->n])
		e->n++;
	e->entries = calloc(e->n + 1, sizeof(*e->entries));
	e->list = calloc(e->n + 1, sizeof(*e->list));
	if (!e->entries || !e->list)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	for (size_t i = 0; i < e->n; i++) {
		const char *eq = strchr(vars[i], '=');

		if (!eq || eq == vars[i])
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "an environment entry is not NAME=value");
		modal__task_command_router__task_exec_start_request__env_entry__init(&e->entries[i]);
		e->entries[i].key = strndup(vars[i], (size_t)(eq - vars[i]));
		e->entries[i].value = (char *)eq + 1;
		e->list[i] = &e->entries[i];
		if (!e->entries[i].key)
			return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	return SG_OK;
}

static void run_env_release(struct run_env *e)
{
	for (size_t i = 0; e->entries && i < e->n; i++)
		free(e->entries[i].key);
	free(e->entries);
	free(e->list);
}

/* The start request of exec x; it borrows x's strings, exec_id and env. */
static void run_request(Modal__TaskCommandRouter__TaskExecStartRequest *req,
			const struct mdl_router *r, const struct mdl_exec *x, char *exec_id,
			const struct run_env *env)
{
	size_t argc = 0;

	while (x->argv[argc])
		argc++;
	req->task_id = (char *)r->task_id;
	req->exec_id = exec_id;
	req->n_command_args = argc;
	req->command_args = (char **)x->argv;
	req->stdout_config = MODAL__TASK_COMMAND_ROUTER__TASK_EXEC_STDOUT_CONFIG__TASK_EXEC_STDOUT_CONFIG_PIPE;
	req->stderr_config = x->merge
		? MODAL__TASK_COMMAND_ROUTER__TASK_EXEC_STDERR_CONFIG__TASK_EXEC_STDERR_CONFIG_STDOUT
		: MODAL__TASK_COMMAND_ROUTER__TASK_EXEC_STDERR_CONFIG__TASK_EXEC_STDERR_CONFIG_PIPE;
	if (x->timeout_secs) {
		req->_timeout_secs_case =
			MODAL__TASK_COMMAND_ROUTER__TASK_EXEC_START_REQUEST___TIMEOUT_SECS_TIMEOUT_SECS;
		req->timeout_secs = x->timeout_secs;
	}
	if (x->workdir) {
		req->_workdir_case =
			MODAL__TASK_COMMAND_ROUTER__TASK_EXEC_START_REQUEST___WORKDIR_WORKDIR;
		req->workdir = (char *)x->workdir;
	}
	req->n_env = env->n;
	req->env = env->list;
}

/*
 * The start, the stdin's writes and the read of stdout one after the
 * other (start_beside_read sends them side by side when it can).
 */
static sg_err run_start_then_read(struct mdl_router *r, const ProtobufCMessage *start,
				  const char *exec_id, const struct mdl_exec *x,
				  struct mdl_exec_result *res, int64_t deadline,
				  struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct reader out = out_reader(res, x->stop_mark);
	sg_err rc;

	rc = exec_start(r, start, &res->router_calls, cancel, err);
	if (!rc && x->stdin_data)
		rc = write_stdin(r, exec_id, x, &res->router_calls, cancel, err);
	if (!rc)
		rc = read_stream(r, exec_id, 0, &out, deadline, &res->router_calls, NULL, cancel,
				 err);
	return rc;
}

/* TaskExecWait: how the command ended, into res (a code or a signal). */
static sg_err run_wait(struct mdl_router *r, char *exec_id, int64_t deadline,
		       struct mdl_exec_result *res, struct sg_cancel *cancel,
		       struct sg_errinfo *err)
{
	Modal__TaskCommandRouter__TaskExecWaitRequest wq =
		MODAL__TASK_COMMAND_ROUTER__TASK_EXEC_WAIT_REQUEST__INIT;
	Modal__TaskCommandRouter__TaskExecWaitResponse *wresp = NULL;
	sg_err rc;

	wq.task_id = r->task_id;
	wq.exec_id = exec_id;
	rc = router_call(r, "TaskExecWait", &wq.base,
			 &modal__task_command_router__task_exec_wait_response__descriptor,
			 (ProtobufCMessage **)&wresp, deadline ? deadline - sg_now_ms() : 0, cancel,
			 err);
	res->router_calls++;
	if (rc)
		return rc;
	if (wresp->exit_status_case ==
	    MODAL__TASK_COMMAND_ROUTER__TASK_EXEC_WAIT_RESPONSE__EXIT_STATUS_SIGNAL)
		res->signal = wresp->signal;
	else
		res->code = wresp->code;
	protobuf_c_message_free_unpacked(&wresp->base, NULL);
	return SG_OK;
}

sg_err mdl_run(struct mdl_client *c, struct mdl_router *r,
	       const struct mdl_exec *x, struct mdl_exec_result *res,
	       struct sg_cancel *cancel, struct sg_errinfo *err)
{
	Modal__TaskCommandRouter__TaskExecStartRequest req =
		MODAL__TASK_COMMAND_ROUTER__TASK_EXEC_START_REQUEST__INIT;
	int64_t deadline = x->wait_ms > 0 ? sg_now_ms() + x->wait_ms : 0;
	struct reader errs = err_reader(res);
	struct run_env env;
	char exec_id[37];
	bool side = false;
	sg_err rc;

	(void)c;
	rc = run_env_init(&env, x->env, err);
	if (rc)
		goto out;
	sg_grpc_uuid(exec_id);
	run_request(&req, r, x, exec_id, &env);
	/* With stderr apart it is read after stdout, once the start has answered. */
	if (x->merge)
		rc = start_beside_read(r, &req.base, exec_id, x, res, deadline, &side, cancel,
				       err);
	if (!side)
		rc = run_start_then_read(r, &req.base, exec_id, x, res, deadline, cancel, err);
	if (!rc && !x->merge)
		rc = read_stream(r, exec_id, 1, &errs, deadline, &res->router_calls, NULL, cancel,
				 err);
	if (!rc && !x->no_wait)
		rc = run_wait(r, exec_id, deadline, res, cancel, err);
out:
	run_env_release(&env);
	return rc;
}

sg_err mdl_snapshot(struct mdl_router *r, int64_t ttl_s, int64_t timeout_ms,
		    char **image_id, struct sg_cancel *cancel,
		    struct sg_errinfo *err)
{
	Modal__TaskCommandRouter__TaskSnapshotFilesystemRequest req =
		MODAL__TASK_COMMAND_ROUTER__TASK_SNAPSHOT_FILESYSTEM_REQUEST__INIT;
	Modal__TaskCommandRouter__TaskSnapshotFilesystemResponse *resp = NULL;
	char snap[37];
	sg_err rc;

	*image_id = NULL;
	sg_grpc_uuid(snap);
	req.task_id = r->task_id;
	req.snapshot_id = snap;
	/*
	 * Always sent, as the SDK does: a request without a lifetime may be
	 * refused, and the workspace would then be left unsaved.
	 */
	req._ttl_seconds_case =
		MODAL__TASK_COMMAND_ROUTER__TASK_SNAPSHOT_FILESYSTEM_REQUEST___TTL_SECONDS_TTL_SECONDS;
	req.ttl_seconds = ttl_s;
	rc = router_call(r, "TaskSnapshotFilesystem", &req.base,
			 &modal__task_command_router__task_snapshot_filesystem_response__descriptor,
			 (ProtobufCMessage **)&resp, timeout_ms, cancel, err);
	if (!rc && !resp->image_id[0])
		rc = sg_err_set(err, SG_E_PROVIDER, "Modal's snapshot has no image id");
	if (!rc)
		rc = dup_out(resp->image_id, image_id, err);
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

/*
 * Whether the sandbox has ended (or Modal no longer knows it), asked with
 * SandboxWait, which waits at most MDL_END_WAIT_S for the end.  false when
 * it still runs or the answer cannot be had.
 */
static bool sandbox_ended(struct mdl_client *c, const char *sandbox_id,
			  struct sg_cancel *cancel)
{
	Modal__Client__SandboxWaitRequest req = MODAL__CLIENT__SANDBOX_WAIT_REQUEST__INIT;
	Modal__Client__SandboxWaitResponse *resp = NULL;
	struct sg_errinfo e = { 0 };
	int status = 0;
	bool ended;
	sg_err rc;

	req.sandbox_id = (char *)sandbox_id;
	req.timeout = MDL_END_WAIT_S;
	rc = mdl_call(c, MDL_SANDBOX_RPC(c, "SandboxWait"), &req.base,
		      &modal__client__sandbox_wait_response__descriptor,
		      (ProtobufCMessage **)&resp, (MDL_END_WAIT_S + 10) * 1000, &status,
		      cancel, &e);
	ended = rc ? status == SG_GRPC_NOT_FOUND
		   : resp->result && resp->result->status != 0;
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	return ended;
}

sg_err mdl_terminate(struct mdl_client *c, const char *sandbox_id,
		     struct sg_cancel *cancel, struct sg_errinfo *err)
{
	Modal__Client__SandboxTerminateRequest req =
		MODAL__CLIENT__SANDBOX_TERMINATE_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;
	sg_err rc;

	req.sandbox_id = (char *)sandbox_id;
	rc = mdl_call(c, MDL_SANDBOX_RPC(c, "SandboxTerminate"), &req.base,
		      &modal__client__sandbox_terminate_response__descriptor, &resp,
		      0, NULL, cancel, err);
	if (resp)
		protobuf_c_message_free_unpacked(resp, NULL);
	/*
	 * A terminate whose replies were all lost has usually been carried
	 * out: Modal is asked before the sandbox is reported as remaining
	 * (unless the caller's time is up, when it stays on record).
	 */
	if (rc && !sg_cancel_check(cancel) && sandbox_ended(c, sandbox_id, cancel)) {
		sg_err_clear(err);
		rc = SG_OK;
	}
	return rc;
}

/* The filters "name=value" as Modal's tag messages (tv, tp: n + 1 each). */
static sg_err list_tags(const char *const *tags, size_t n, Modal__Client__SandboxTag *tv,
			Modal__Client__SandboxTag **tp, struct sg_errinfo *err)
{
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(tags[i], '=');

		modal__client__sandbox_tag__init(&tv[i]);
		if (!eq)
			return sg_err_set(err, SG_E_INVALID_ARGUMENT, "a tag filter is not name=value");
		tv[i].tag_name = strndup(tags[i], (size_t)(eq - tags[i]));
		tv[i].tag_value = (char *)eq + 1;
		tp[i] = &tv[i];
		if (!tv[i].tag_name)
			return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	return SG_OK;
}

sg_err mdl_list_page(struct mdl_client *c, const char *app_id, const char *const *tags,
		     double before, Modal__Client__SandboxListResponse **out,
		     struct sg_cancel *cancel, struct sg_errinfo *err)
{
	Modal__Client__SandboxListRequest req = MODAL__CLIENT__SANDBOX_LIST_REQUEST__INIT;
	Modal__Client__SandboxTag *tv = NULL, **tp = NULL;
	size_t nt = 0;
	sg_err rc;

	*out = NULL;
	while (tags && tags[nt])
		nt++;
	tv = calloc(nt + 1, sizeof(*tv));
	tp = calloc(nt + 1, sizeof(*tp));
	rc = tv && tp ? list_tags(tags, nt, tv, tp, err)
		      : sg_err_set(err, SG_E_INTERNAL, "out of memory");
	req.app_id = (char *)app_id;
	req.environment_name = c->creds.environment;
	req.before_timestamp = before;
	req.n_tags = nt;
	req.tags = tp;
	if (!rc)
		rc = mdl_call(c, MDL_SANDBOX_RPC(c, "SandboxList"), &req.base,
			      &modal__client__sandbox_list_response__descriptor,
			      (ProtobufCMessage **)out, 0, NULL, cancel, err);
	for (size_t i = 0; tv && i < nt; i++)
		free(tv[i].tag_name);
	free(tv);
	free(tp);
	return rc;
}

sg_err mdl_list(struct mdl_client *c, const char *app_id,
		const char *const *tags, mdl_list_cb cb, void *payload,
		struct sg_cancel *cancel, struct sg_errinfo *err)
{
	double before = 0;
	sg_err rc = SG_OK;
	bool stop = false;

	for (int page = 0; !rc && !stop && page < SG_MODAL_LIST_PAGES; page++) {
		Modal__Client__SandboxListResponse *resp = NULL;

		rc = mdl_list_page(c, app_id, tags, before, &resp, cancel, err);
		for (size_t i = 0; !rc && i < resp->n_sandboxes && !stop; i++) {
			stop = cb(resp->sandboxes[i], payload) != 0;
			before = resp->sandboxes[i]->created_at;
		}
		stop = stop || rc || resp->n_sandboxes == 0;
		if (resp)
			protobuf_c_message_free_unpacked(&resp->base, NULL);
	}
	return rc;
}
