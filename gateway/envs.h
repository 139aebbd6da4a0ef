/*
 * envs.h - `sandgate envs`, the operators' view of environments.
 */
#ifndef SG_ENVS_H
#define SG_ENVS_H

#include "../config/config.h"

/* Run `envs` with argv[0] == "envs"; returns the exit status. */
int sg_envs_main(int argc, char **argv, const struct sg_config *cfg,
		 const char *state_dir);

#endif
