/*
 * envs.h - `sandgate envs`, the operators' view of environments.
 *
 * Invariants: the command line is parsed by main.c from cli.c's table;
 * these functions get the parsed values (borrowed) and return a cli.h exit
 * status, with every failure named on stderr.
 */
#ifndef SG_ENVS_H
#define SG_ENVS_H

#include <stdbool.h>
#include <stdint.h>

#include "../config/config.h"

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
