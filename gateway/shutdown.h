/*
 * shutdown.h - the end of a connection (protocol section 9).
 *
 * Invariants: runs once, on the reader thread, after the last frame was
 * dispatched; it returns within the budget (plus one second to flush the
 * replies), whatever the handlers and the provider do.  For a version-3
 * host, which kills its command backend SG_BUDGET_V3_HOST_GRACE_MS after
 * EOF, it returns within the shorter window budget.h names, and hands a
 * removal (or a create's settling) that does not fit to a reaper bounded
 * by the budget (reaper.h), on record before it starts.
 */
#ifndef SG_SHUTDOWN_H
#define SG_SHUTDOWN_H

#include <stdint.h>

#include "gateway/pool.h"
#include "gateway/session.h"

/*
 * Cancel and await the requests in flight, stop the session's processes,
 * release its exports, and keep or remove its environment as the binding
 * says, all within budget_ms (a version-3 host's window, when shorter:
 * what does not fit goes to a reaper).  Returns the exit status: 0, or 69
 * (SG_EXIT_UNAVAILABLE, cli.h) when
 * anything may remain against the binding's wish (said on stderr and in
 * the state registry).
 */
int sg_shutdown_run(struct sg_session *s, struct sg_pool *pool, int64_t budget_ms,
		    const char *why);

#endif
