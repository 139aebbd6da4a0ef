/*
 * initialize.h - the initialize method, and the bring-up of one profile's
 * environment that the built-in mode builds on (mode.c, select.c).
 *
 * Invariants: as initialize.c's.  Everything here runs on a worker thread
 * with the op's cancel token, except sg_init_reset, which the server calls
 * once no worker runs.  The mode's own part of initialize is the session
 * mode's slot (session.h); this file never names a mode.
 */
#ifndef SG_INITIALIZE_H
#define SG_INITIALIZE_H

#include <stdbool.h>

#include "gateway/session.h"

/* The initialize handler (protocol section 2); *out new. */
sg_err sg_init_run(struct sg_op *op, json_t **out) SG_MUST_CHECK;

/*
 * Bring up one profile's environment for the binding: build and validate
 * the profile, record the intent, provision, and observe the facts inside
 * (*probe, new).  Errors before anything was created leave *fatal false;
 * a failure after that removes what was made and sets it.
 */
sg_err sg_init_bring_up(struct sg_op *op, json_t *binding, const char *name,
			bool toolchains, json_t **probe, bool *fatal) SG_MUST_CHECK;

/*
 * An environment brought up that fails afterwards: remove what was made
 * (provisioned: the adapter's provision succeeded) or let go of what was
 * resumed or shared, and its record, as a failed sg_init_bring_up does.
 * Runs even when the request was cancelled.
 */
void sg_init_undo(struct sg_session *s, bool provisioned);

/* The facts a reply reports: sg-helper's observations merged with the
 * adapter's own (new). */
json_t *sg_init_facts(json_t *probe, json_t *adapter);

/*
 * Free the session's environment fields (the adapter's release included):
 * for a candidate that was not chosen, and at the end.  Remote state is
 * not touched.
 */
void sg_init_reset(struct sg_session *s);

#endif
