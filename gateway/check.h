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

#include "../config/config.h"

/*
 * Profile `name` (NULL: the config's default) exists, its fields pass the
 * config's checks, its backend is built in and that adapter's validate()
 * accepts it.  A `select` profile needs a non-empty `candidates` array whose
 * entries each name a profile that passes (and is not itself a select) and
 * whose `require` keys are ones serve can judge.  *backend (optional) is
 * set to the profile's backend word, borrowed from a static table or "?".
 * Errors as sg_config_profile() and the adapter's validate() give them.
 */
sg_err sg_profile_check(const struct sg_config *cfg, const char *name,
			const char **backend, struct sg_errinfo *err) SG_MUST_CHECK;

#endif
