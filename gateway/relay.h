/*
 * relay.h - the `command` backend: sandgate delegating a connection to an
 * external protocol-v4 peer (docs/delegation.md).
 *
 * It is not an adapter: adapters offer primitives the gateway builds tools
 * on, while a peer already speaks the whole protocol.  So the relay is a
 * mode of the session (struct sg_mode, session.h), chosen by the profile's
 * backend.  The gateway's own layers stay in front of it: requests still
 * pass the reader's checks, the worker pool (ids in flight, cancel, the
 * audit log) and the permission checks of execute (sg_tools_precheck);
 * only what would have run here runs at the peer instead.  A `command`
 * profile's config check is check.h's.
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
 * Ownership: the session owns its relay (session->relay), which the mode's
 * initialize makes and its release frees, once no worker runs.
 */
#ifndef SG_RELAY_H
#define SG_RELAY_H

#include "gateway/session.h"

extern const struct sg_mode sg_mode_relay;

#endif
