/*
 * check.h - the verdict on a profile, before anything is provisioned.
 *
 * Invariants: one function decides whether a profile can be served, and
 * `config check`, `serve` (at startup, before the first frame) and `probe`
 * all call it, so they cannot disagree.  It reads the config only; it
 * never reaches a backend.
 */
#ifndef SG_CHECK_H
#define SG_CHECK_H

#include "config/config.h"

/*
 * Profile `name` (NULL: the config's default) exists, its fields pass the
 * config's checks, its backend is built in and that adapter's validate()
 * accepts it.  A `select` profile needs a non-empty `candidates` array whose
 * entries each name a profile that passes (and is not itself a select) and
 * whose `require` keys are ones serve can judge.  A `command` profile's
 * fields pass sg_check_peer_fields, and the budget its gateway has
 * (shutdown_timeout_ms, else SG_SHUTDOWN_BUDGET_MS) covers the chain below
 * it: the peer's grace or, when the peer is sandgate with a config it can
 * read, that gateway's own budget after the whole check of its profile,
 * whichever is longer, plus a cancel's drain (budget.h).  *backend
 * (optional) is set to the profile's backend word, borrowed from a static
 * table or "?".  Errors as sg_config_profile() and the adapter's
 * validate() give them.
 */
sg_err sg_profile_check(const struct sg_config *cfg, const char *name,
			const char **backend, struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * A `command` profile's own fields (docs/delegation.md) by their types:
 * `command` a non-empty list of non-empty strings, `env` an object of
 * strings, `shutdown_grace_ms` 1 to INT32_MAX, `capabilities` a list of
 * strings.  SG_E_INVALID_ARGUMENT naming the field.
 */
sg_err sg_check_peer_fields(const struct sg_profile *p, struct sg_errinfo *err)
	SG_MUST_CHECK;

#endif
