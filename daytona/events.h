/*
 * events.h - Daytona's event stream: sandbox state changes as they happen,
 * as the official SDK learns them (Socket.IO, Engine.IO v4, over a
 * WebSocket at <api>/socket.io/), instead of polling GET /sandbox/{id}.
 *
 * One watcher per provision: dtn_events_open() starts a thread that
 * connects, authenticates with the API key in the CONNECT packet (as the
 * SDK does), answers pings, and keeps the latest sandbox DTO of every
 * "sandbox.state.updated" event.  dtn_events_wait() sleeps until an event
 * for one sandbox arrives, the watcher's own state changes, or the time is
 * up; the caller then judges the DTO, and polls as before whenever the
 * stream is not (or no longer) there: the stream only makes waits shorter,
 * never decides an outcome on its own.
 *
 * Invariants: the key never appears in a log line or a sentence; nothing is
 * verified less than libcurl would (wss uses the system's CA store and
 * checks the host name).  Thread-safe: the watcher thread owns the
 * connection; waiters only read under the mutex.  Ownership: open makes a
 * new watcher; close stops its thread and frees it.
 */
#ifndef SG_DAYTONA_EVENTS_H
#define SG_DAYTONA_EVENTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/cancel.h"

struct dtn_events;

/* Start watching (new, or NULL when the stream cannot even be tried). */
struct dtn_events *dtn_events_open(const char *api_url, const char *key);
void dtn_events_close(struct dtn_events *ev);

/* Is the stream connected and authorised right now? */
bool dtn_events_live(struct dtn_events *ev);

/* Has the stream failed or closed (polling only from now on)? */
bool dtn_events_gone(struct dtn_events *ev);

/*
 * Wait at most ms for news: an event for sandbox id, or a change of the
 * stream's own state.  Returns the latest DTO seen for id (new reference)
 * or NULL; *gen is the caller's last seen generation (updated).
 */
json_t *dtn_events_wait(struct dtn_events *ev, const char *id, int64_t ms, unsigned *gen,
			struct sg_cancel *cancel);

#endif
