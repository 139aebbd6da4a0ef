/*
 * relay.h - the `command` backend: sandgate delegating a connection to an
 * external protocol-v4 peer (docs/delegation.md).
 *
 * It is not an adapter: adapters offer primitives the gateway builds tools
 * on, while a peer already speaks the whole protocol.  So the relay is a
 * mode of the gateway, chosen by the profile's backend.  The gateway's own
 * layers stay in front of it: requests still pass the reader's checks, the
 * worker pool (ids in flight, cancel, the audit log) and the permission
 * checks of execute (sg_tools_precheck); only what would have run here
 * runs at the peer instead.
 *
 * Invariants:
 *  - The peer is started once, by the first initialize on a command
 *    profile, with exactly the profile's `env` (and PATH), never sandgate's
 *    own variables, and no descriptor but its stdin, stdout and stderr;
 *    it is never retried or replaced.
 *  - The host's frames reach it unchanged: each request as the host wrote
 *    it (its token, its id, the binding of initialize), the host's cancel
 *    (the target's id, no data) and the host's `callback` requests.  Its
 *    initialize reply must echo the binding's version, keep the binding's
 *    root and offer every capability the profile requires
 *    (`capabilities`; by default process.start.v1 for version 4).
 *  - The peer's messages reach the host unchanged too: a reply to a
 *    request in flight (its error text included), queued to the host
 *    before the peer's next message is, so a reply still precedes the
 *    events the peer wrote after it; `process` events of this
 *    connection's session; `tool` callbacks whose parent is in flight.
 *    Stray replies, foreign events and orphan callbacks are dropped; any
 *    other line closes the peer.  After SG_MAX_FRAME bytes of events and
 *    callbacks the reader waits for the host to read them.
 *  - A cancel has no reply of its own; a peer that leaves the target
 *    unanswered for SG_RELAY_CANCEL_MS after it is closed (killed).  A
 *    peer that is gone (exited, closed, or broke the protocol) answers
 *    `unavailable` to every pending request, and the connection ends
 *    with it.
 *  - At shutdown the peer's stdin is closed and it gets shutdown_grace_ms
 *    (default SG_OUTER_GRACE_MS) to exit, within the gateway's budget and,
 *    for a version-3 host, within its short window (budget.h; a sandgate
 *    peer sees the same binding and keeps a shorter one of its own); past
 *    it, it is killed and the failure said on stderr and in the state
 *    registry.
 *
 * Ownership: the session owns its relay (session->relay); sg_relay_free
 * once no worker runs.
 */
#ifndef SG_RELAY_H
#define SG_RELAY_H

#include <stdbool.h>
#include <stdint.h>

#include "session.h"

/*
 * initialize on a command profile (the profile from the config, not
 * narrowed, borrowed): start the peer unless this connection already did,
 * forward the request, check the reply and fill the session in
 * (s->init_reply, profile, identity, root, session_id).  *fatal as
 * sg_init_bring_up's: set once the peer may hold an environment.
 */
sg_err sg_relay_initialize(struct sg_op *op, json_t *binding, const char *profile,
			   bool *fatal) SG_MUST_CHECK;

/* Whether the peer offered method (its initialize reply's `methods`). */
bool sg_relay_has_method(const struct sg_relay *r, const char *method);

/*
 * The handler of every relayed method: forward, await, answer with the
 * peer's reply frame as it is (op->raw_reply).
 */
sg_err sg_relay_request(struct sg_op *op, json_t **out) SG_MUST_CHECK;

/*
 * A host's `callback` request (protocol section 7), to the peer as it is
 * (steals frame).  It has no reply; after the peer's input closed it is
 * dropped.  From the reader thread; never blocks.
 */
void sg_relay_callback(struct sg_session *s, json_t *frame);

/*
 * The end of the connection: once the requests in flight in pool have
 * reached the peer (SG_RELAY_FORWARD_MS at most), close the peer's stdin
 * and give it its grace, at most max_grace_ms (a version-3 host's short
 * window) and bounded by the deadline token; kill it past that.  Returns
 * non-zero when its cleanup failed or was cut short (said on stderr and
 * in the registry).
 */
struct sg_pool;
int sg_relay_shutdown(struct sg_session *s, struct sg_pool *pool, struct sg_cancel *deadline,
		      int64_t max_grace_ms);

/* Before the session's wire is freed: the reader thread writes to it. */
void sg_relay_free(struct sg_relay *r);

/*
 * `config check` of a command profile p: its own fields, and that the
 * budget the profile's gateway has (shutdown_timeout_ms, else
 * SG_SHUTDOWN_BUDGET_MS) covers the chain below it: the peer's grace, or
 * when the peer is sandgate with a config it can read, that gateway's own
 * budget, whichever is longer, plus SG_RELAY_CANCEL_MS for a cancel's
 * drain.  Nested command profiles are checked the same way.
 */
sg_err sg_relay_check(const struct sg_profile *p, struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * What a command profile's gateway needs for its own shutdown, in ms: the
 * longer of the grace and the inner gateway's budget, plus the cancel
 * drain.  For reports (probe, config check).
 */
int64_t sg_relay_needs_ms(const struct sg_profile *p);

#endif
