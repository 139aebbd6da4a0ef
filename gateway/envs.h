/*
 * envs.h - `sandgate envs`, the operators' view of environments.
 *
 * Invariants: the command line is parsed by main.c from cli.c's table;
 * these functions get the parsed values (borrowed) and return a cli.h exit
 * status, with every failure named on stderr.
 */
#ifndef SG_ENVS_H
#define SG_ENVS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "config/config.h"
#include "base/cancel.h"

/*
 * Settle an environment that a failed provisioning may have left behind
 * (env->may_remain: a create whose outcome is unknown, a removal that did
 * not finish).  `rec` (borrowed) names it: backend, profile, identity and
 * session.  Until the deadline fires, look for it with the adapter's list
 * (the provider's own tags: this identity, created for this session),
 * and once it shows, destroy it and remove its registry record.
 * SG_OK: it is gone.  Otherwise the record stays, marked cleanup-pending
 * (with the id when one was seen), for `sandgate envs gc`, and err says
 * what may remain.  The rule is the gateway's, for every adapter that
 * can list (SG_CAP_LIST); without listing it is SG_E_UNSUPPORTED at once.
 */
sg_err sg_envs_settle(const struct sg_config *cfg, const char *state_dir,
		      json_t *rec, struct sg_cancel *deadline,
		      struct sg_errinfo *err) SG_MUST_CHECK;

struct sg_envs_args {
	const char *profile;  /* list: only this profile's environments */
	bool json, force, dry_run;
	int64_t older_than;   /* gc: seconds, or -1 for none */
	char **ids;           /* show (one), rm (several) */
	int nids;
};

/* Run `envs SUB` (list, show, rm or gc); returns the exit status. */
int sg_envs_run(const char *sub, const struct sg_envs_args *a,
		const struct sg_config *cfg, const char *state_dir);

/* "90", "90s", "15m", "2h", "7d" in seconds; -1 when malformed. */
int sg_envs_duration(const char *s, int64_t *out);

#endif
