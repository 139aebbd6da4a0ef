/*
 * mode.h - the built-in mode: this gateway serves the methods itself, in
 * an environment it provisions through an adapter (adapters/adapter.h).
 *
 * Invariants: the mode's table of methods is what its initialize reply
 * offers (`methods`) and what a bound session serves, so the two cannot
 * differ; the environment, its processes and its exports exist from the
 * mode's initialize on and are the shutdown's to stop (shutdown.c).  The
 * other mode, the relay to a peer, is relay.h's; server.c chooses between
 * them once (struct sg_mode, session.h).
 */
#ifndef SG_MODE_H
#define SG_MODE_H

#include "gateway/session.h"

extern const struct sg_mode sg_mode_builtin;

#endif
