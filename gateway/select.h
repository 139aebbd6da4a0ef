/*
 * select.h - a `select` profile's candidates, brought up in order until
 * one fits (select.c).
 *
 * Invariants: requirements are judged from facts observed inside the
 * environment; every candidate skipped is removed (or let go, when
 * resumed or shared) before the next one is tried.  Runs on a worker
 * thread with the op's cancel token.
 */
#ifndef SG_SELECT_H
#define SG_SELECT_H

#include <stdbool.h>

#include "gateway/session.h"

/*
 * Bring up the candidates (the select profile's `candidates` array,
 * borrowed) in order and keep the first whose facts meet its
 * requirements: the session's environment is then that one's, *probe its
 * observations (new).  *selection (new) records each one tried and why
 * it was skipped; *fatal as sg_init_bring_up's.
 */
sg_err sg_select_candidate(struct sg_op *op, json_t *binding, json_t *candidates,
			   json_t **probe, json_t **selection, bool *fatal)
	SG_MUST_CHECK;

#endif
