/*
 * reaper.h - a removal that outlives its gateway.
 *
 * A version-3 host kills its command backend SG_BUDGET_V3_HOST_GRACE_MS
 * after it closed the backend's stdin, whatever the profile says, and a
 * cloud delete can take longer than that.  The gateway then hands the
 * removal to a reaper and exits inside the host's grace; the reaper
 * removes the environment by the id in its registry record, bounded by
 * the profile's shutdown budget.
 *
 * Invariants:
 *  - The reaper is this sandgate executed anew (`sandgate __reap`, an
 *    internal command) in a session of its own, never a fork that goes on
 *    running the gateway's code: the gateway's other threads may hold
 *    locks (curl's, the allocator's) a forked child would never see
 *    released.
 *  - Its job is in the state registry before it starts: the gateway marks
 *    the record cleanup-pending with a "reaper" entry, and the reaper
 *    claims the record (sg_registry_claim) before the gateway exits, so
 *    no session attaches to what it removes and `envs gc` leaves it alone
 *    while it lives.  A reaper that dies or runs out of time leaves the
 *    record cleanup-pending for `sandgate envs gc`.
 *  - It holds none of the host's descriptors: its stdin is /dev/null, its
 *    stdout the handshake pipe until it claimed and /dev/null after, its
 *    stderr <state>/reaper.log; so the host sees its backend's pipes close
 *    when the gateway exits.
 *  - It ends by its deadline (an absolute time, the gateway's EOF plus the
 *    shutdown budget).
 */
#ifndef SG_REAPER_H
#define SG_REAPER_H

#include <stdint.h>

#include "gateway/registry.h"
#include "gateway/session.h"

/*
 * Allow reapers: this process is the sandgate program, which the reaper
 * runs anew.  Called by sandgate's main() alone; a gateway linked into
 * another program (a unit test) starts no reaper, since running "itself"
 * there would run that program.
 */
void sg_reaper_enable(void);

/*
 * Start the reaper for key's environment (the session has detached and
 * the record says cleanup-pending) and wait at most wait_ms for it to
 * claim the record.  until_ms, on sg_now_ms's clock (monotonic, the same
 * in every process of this host), is when it must give up.  SG_OK once it
 * claimed; otherwise the record stays for `envs gc` and err says why.
 */
sg_err sg_reaper_start(const struct sg_session *s, const struct sg_reg_key *key,
		       int64_t until_ms, int64_t wait_ms, struct sg_errinfo *err) SG_MUST_CHECK;

/* `sandgate __reap STATE CONFIG BACKEND IDENTITY UNTIL`: the reaper's main. */
int sg_reaper_main(int argc, char **argv);

#endif
