/*
 * events.c - Daytona's Socket.IO event stream over libwebsockets (events.h).
 *
 * The protocol, as the SDK speaks it: the server opens with an Engine.IO
 * OPEN packet "0{...}", the client sends the Socket.IO CONNECT "40" with
 * {"token": <API key>}, the server answers "40{sid}" (or "44" when the key
 * is refused); events arrive as "42[name, payload]"; the server's PING "2"
 * is answered with PONG "3".
 */
#define _GNU_SOURCE
#include "daytona/events.h"

#include <libwebsockets.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daytona/api.h"
#include "base/buf.h"
#include "base/limits.h"

enum { EV_CONNECTING = 0, EV_LIVE = 1, EV_GONE = -1 };

/*
 * Sandboxes whose last event is kept.  The stream carries every sandbox of
 * the organization, so a busy (or hostile) one would otherwise grow the
 * map by an event of up to SG_DAYTONA_EVENT_MAX for each sandbox it names.
 * When it is full, every sandbox nobody waits for is forgotten; a waiter
 * that misses an event polls instead (dtn_events_wait's NULL).
 */
#define EV_KEPT 16

struct dtn_events {
	pthread_t thread;
	bool started;
	struct lws_context *ctx;
	struct lws *wsi;
	char *host, *path, *token;
	int port;
	bool tls;
	atomic_bool stop;
	/* Under mu. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int state;
	unsigned gen;     /* bumped on every change a waiter may care about */
	json_t *latest;   /* sandbox id -> its newest DTO, at most EV_KEPT */
	json_t *wanted;   /* sandbox ids a waiter asked for (id -> true) */
	/* The watcher thread's own. */
	struct sg_buf rx;   /* one message, reassembled from fragments */
	char out[SG_DAYTONA_EVENT_OUT]; /* the next message to send */
	size_t out_len;
};

/* The stream's state; EV_GONE for no watcher at all. */
static int ev_state(struct dtn_events *ev)
{
	int st;

	if (!ev)
		return EV_GONE;
	pthread_mutex_lock(&ev->mu);
	st = ev->state;
	pthread_mutex_unlock(&ev->mu);
	return st;
}

static void ev_set_state(struct dtn_events *ev, int state)
{
	pthread_mutex_lock(&ev->mu);
	if (ev->state != EV_GONE)
		ev->state = state;
	ev->gen++;
	pthread_cond_broadcast(&ev->cv);
	pthread_mutex_unlock(&ev->mu);
}

static void ev_send(struct dtn_events *ev, struct lws *wsi, const char *text)
{
	size_t n = strlen(text);

	if (LWS_PRE + n > sizeof(ev->out))
		return;
	memcpy(ev->out + LWS_PRE, text, n);
	ev->out_len = n;
	lws_callback_on_writable(wsi);
}

/* One whole message from the server. */
static void ev_message(struct dtn_events *ev, struct lws *wsi, const char *m, size_t n)
{
	if (n >= 1 && m[0] == '0') {
		/* OPEN: authenticate as the SDK does. */
		json_t *auth = json_pack("{s:s}", "token", ev->token);
		char *a = auth ? json_dumps(auth, JSON_COMPACT) : NULL;
		struct sg_buf b = SG_BUF_INIT(sizeof(ev->out) - LWS_PRE - 1);

		if (a && !sg_buf_adds(&b, "40") && !sg_buf_adds(&b, a))
			ev_send(ev, wsi, b.p);
		sg_buf_release(&b);
		free(a);
		json_decref(auth);
	} else if (n == 1 && m[0] == '2') {
		ev_send(ev, wsi, "3");
	} else if (n >= 2 && m[0] == '4' && m[1] == '0') {
		ev_set_state(ev, EV_LIVE);
	} else if (n >= 2 && m[0] == '4' && m[1] == '4') {
		ev_set_state(ev, EV_GONE); /* refused: polling it is */
	} else if (n >= 2 && m[0] == '4' && m[1] == '2') {
		json_t *a = json_loadb(m + 2, n - 2, 0, NULL);
		json_t *sb = json_object_get(json_array_get(a, 1), "sandbox");
		const char *name = json_string_value(json_array_get(a, 0));
		const char *id = json_string_value(json_object_get(sb, "id"));

		if (name && strcmp(name, "sandbox.state.updated") == 0 && id &&
		    json_is_object(sb)) {
			pthread_mutex_lock(&ev->mu);
			if (!json_object_get(ev->latest, id) &&
			    json_object_size(ev->latest) >= EV_KEPT) {
				const char *k;
				json_t *v;
				void *tmp;

				json_object_foreach_safe(ev->latest, tmp, k, v) {
					if (!json_object_get(ev->wanted, k))
						json_object_del(ev->latest, k);
				}
			}
			/*
			 * Still full: the waiters' own sandboxes fill it, and this
			 * is none.  An event older than the one kept (delivered
			 * late) does not replace it.
			 */
			if ((json_object_get(ev->latest, id) ||
			     json_object_size(ev->latest) < EV_KEPT) &&
			    !dtn_older(sb, json_object_get(ev->latest, id))) {
				json_object_set(ev->latest, id, sb);
				ev->gen++;
				pthread_cond_broadcast(&ev->cv);
			}
			pthread_mutex_unlock(&ev->mu);
		}
		json_decref(a);
	}
}

static int ev_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user,
		       void *in, size_t len)
{
	struct dtn_events *ev = lws_context_user(lws_get_context(wsi));

	(void)user;
	if (!ev)
		return 0;
	switch (reason) {
	case LWS_CALLBACK_CLIENT_RECEIVE:
		if (sg_buf_add(&ev->rx, in, len)) {
			ev_set_state(ev, EV_GONE); /* a message beyond any event's size */
			return -1;
		}
		if (lws_is_final_fragment(wsi)) {
			ev_message(ev, wsi, ev->rx.p, ev->rx.len);
			sg_buf_reset(&ev->rx);
		}
		break;
	case LWS_CALLBACK_CLIENT_WRITEABLE:
		if (ev->out_len) {
			size_t n = ev->out_len;

			ev->out_len = 0;
			if (lws_write(wsi, (unsigned char *)ev->out + LWS_PRE, n, LWS_WRITE_TEXT) <
			    (int)n)
				return -1;
		}
		break;
	case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
	case LWS_CALLBACK_CLIENT_CLOSED:
		ev->wsi = NULL;
		ev_set_state(ev, EV_GONE);
		break;
	default:
		break;
	}
	return 0;
}

static const struct lws_protocols ev_protocols[] = {
	{ "sandgate-daytona-events", ev_callback, 0, SG_DAYTONA_EVENT_MAX, 0, NULL, 0 },
	{ NULL, NULL, 0, 0, 0, NULL, 0 },
};

static void *ev_main(void *arg)
{
	struct dtn_events *ev = arg;
	struct lws_context_creation_info cc;
	struct lws_client_connect_info ci;
	struct lws_context *ctx;

	/*
	 * The context is made here, not in dtn_events_open: its set-up takes
	 * some 10 ms, which the create request sent meanwhile no longer waits
	 * for (docs/benchmarks.md, D6).  Published under mu, so that
	 * dtn_events_close either sees it and cancels its service or has set
	 * stop before this thread reads it below.
	 */
	memset(&cc, 0, sizeof(cc));
	cc.port = CONTEXT_PORT_NO_LISTEN;
	cc.protocols = ev_protocols;
	cc.user = ev;
	cc.options = ev->tls ? LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT : 0;
	cc.gid = -1;
	cc.uid = -1;
	ctx = lws_create_context(&cc);
	pthread_mutex_lock(&ev->mu);
	ev->ctx = ctx;
	pthread_mutex_unlock(&ev->mu);
	if (!ctx) {
		ev_set_state(ev, EV_GONE);
		return NULL;
	}
	memset(&ci, 0, sizeof(ci));
	ci.context = ev->ctx;
	ci.address = ev->host;
	ci.host = ev->host;
	ci.origin = ev->host;
	ci.port = ev->port;
	ci.path = ev->path;
	ci.protocol = NULL;
	ci.ssl_connection = ev->tls ? LCCSCF_USE_SSL : 0;
	ci.pwsi = &ev->wsi;
	if (!lws_client_connect_via_info(&ci))
		ev_set_state(ev, EV_GONE);
	while (!atomic_load(&ev->stop) && ev_state(ev) != EV_GONE)
		lws_service(ev->ctx, 100);
	return NULL;
}

/* Split an http(s) API URL into host, port and the Socket.IO path. */
static bool ev_parse_url(struct dtn_events *ev, const char *url)
{
	const char *h, *slash, *colon;
	size_t hl;

	if (strncmp(url, "https://", 8) == 0) {
		ev->tls = true;
		h = url + 8;
	} else if (strncmp(url, "http://", 7) == 0) {
		h = url + 7;
	} else {
		return false;
	}
	slash = strchr(h, '/');
	hl = slash ? (size_t)(slash - h) : strlen(h);
	colon = memchr(h, ':', hl);
	ev->host = strndup(h, colon ? (size_t)(colon - h) : hl);
	ev->port = colon ? (int)strtol(colon + 1, NULL, 10) : ev->tls ? 443 : 80;
	if (colon)
		for (const char *c = colon + 1; c < h + hl; c++)
			if (*c < '0' || *c > '9')
				return false;
	if (asprintf(&ev->path, "%.*s/socket.io/?source=sandgate&EIO=4&transport=websocket",
		     slash ? (int)strcspn(slash, "?#") : 0, slash ? slash : "") < 0) {
		ev->path = NULL;
		return false;
	}
	return ev->host && ev->port > 0 && ev->port < 65536;
}

struct dtn_events *dtn_events_open(const char *api_url, const char *key)
{
	struct dtn_events *ev = calloc(1, sizeof(*ev));

	if (!ev)
		return NULL;
	pthread_mutex_init(&ev->mu, NULL);
	pthread_cond_init(&ev->cv, NULL);
	sg_buf_init(&ev->rx, SG_DAYTONA_EVENT_MAX);
	ev->latest = json_object();
	ev->wanted = json_object();
	ev->token = strdup(key ? key : "");
	if (!ev->latest || !ev->wanted || !ev->token || !ev_parse_url(ev, api_url))
		goto fail;
	lws_set_log_level(0, NULL);
	if (pthread_create(&ev->thread, NULL, ev_main, ev) != 0)
		goto fail;
	ev->started = true;
	return ev;
fail:
	dtn_events_close(ev);
	return NULL;
}

void dtn_events_close(struct dtn_events *ev)
{
	if (!ev)
		return;
	atomic_store(&ev->stop, true);
	pthread_mutex_lock(&ev->mu);
	if (ev->ctx)
		lws_cancel_service(ev->ctx);
	pthread_mutex_unlock(&ev->mu);
	if (ev->started)
		pthread_join(ev->thread, NULL);
	if (ev->ctx)
		lws_context_destroy(ev->ctx);
	json_decref(ev->latest);
	json_decref(ev->wanted);
	sg_buf_release(&ev->rx);
	free(ev->host);
	free(ev->path);
	free(ev->token);
	pthread_cond_destroy(&ev->cv);
	pthread_mutex_destroy(&ev->mu);
	free(ev);
}

bool dtn_events_live(struct dtn_events *ev)
{
	return ev_state(ev) == EV_LIVE;
}

bool dtn_events_gone(struct dtn_events *ev)
{
	return ev_state(ev) == EV_GONE;
}

json_t *dtn_events_wait(struct dtn_events *ev, const char *id, int64_t ms, unsigned *gen,
			struct sg_cancel *cancel)
{
	int64_t end = sg_now_ms() + ms;
	json_t *dto = NULL;

	pthread_mutex_lock(&ev->mu);
	if (json_object_size(ev->wanted) < EV_KEPT / 2)
		json_object_set_new(ev->wanted, id, json_true());
	/* Short slices, so a cancel is noticed within one of them. */
	while (ev->gen == *gen && !sg_cancel_check(cancel)) {
		int64_t left = end - sg_now_ms();
		struct timespec slice;

		if (left <= 0)
			break;
		slice = sg_time_after(CLOCK_REALTIME, left < 50 ? left : 50);
		pthread_cond_timedwait(&ev->cv, &ev->mu, &slice);
	}
	*gen = ev->gen;
	dto = json_object_get(ev->latest, id);
	json_incref(dto);
	pthread_mutex_unlock(&ev->mu);
	return dto;
}
