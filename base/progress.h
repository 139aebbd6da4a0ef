/*
 * progress.h - long waits on a provider, reported on stderr.
 *
 * An adapter opens a step where it starts waiting on the provider (creating
 * a sandbox, waiting for it to start, uploading sg-helper), may say what the
 * wait is at now, and closes it; the step's duration is reported when it
 * closes.  Where the output goes is chosen once, from $SANDGATE_PROGRESS:
 *   auto (default)  `line` when stderr is a terminal, else `log`
 *   line            one line rewritten in place, finished with its duration
 *   log             a plain line when a step opens, changes and closes
 *   json            one JSON object per line ({"progress":STEP,"event":
 *                   "begin"|"update"|"end","ms":N,"ok":B,"text":S}), which
 *                   `sandgate probe` reads from its serve child
 *   off             nothing
 *
 * Invariants: output goes to fd 2 only (fd 1 carries the protocol), one
 * write(2) per line; the open step is per thread, so concurrent
 * provisionings never mix their steps; a step name and its text never hold
 * a credential (the callers pass fixed words, ids and provider states).
 * Opening a step while one is open closes the first.
 */
#ifndef SG_PROGRESS_H
#define SG_PROGRESS_H

#include "base/err.h"

/* Open `step` ("create", "ready", "helper", "connect") on this thread. */
void sg_progress_begin(const char *step, const char *fmt, ...) SG_PRINTF(2, 3);

/* What the open step waits for now; nothing without an open step. */
void sg_progress_update(const char *fmt, ...) SG_PRINTF(1, 2);

/* Close the open step (rc SG_OK: done; else failed); nothing without one. */
void sg_progress_end(sg_err rc);

#endif
