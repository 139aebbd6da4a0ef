/*
 * config.h - sandgate's config file: named profiles, validated once.
 *
 * The file mirrors the host's `execution_environments` block
 * (docs/protocol.md 4.2):  {"default": NAME, "profiles": {NAME: {...}}}.
 * Field names are the host's (8.1).  Backend-specific fields are kept in
 * profile->raw for the adapter to read and checked by its validate().
 *
 * Invariants: a loaded config has passed every check that needs no backend;
 * every message names the file, the profile and the field, e.g.
 *   /etc/sandgate.json: profile "lab": field "cpus": must be a positive number
 * A profile returned by sg_config_profile() is complete and immutable; its
 * strings live as long as the profile, which owns them and may outlive the
 * config.  Its arrays (network_allow, forward_env, best_effort) are never
 * NULL: an empty one holds just the terminator.  A config is read-only once
 * loaded, so several threads may build profiles from it at once.
 * config/README.md documents every field and the narrowing rules.
 */
#ifndef SG_CONFIG_H_
#define SG_CONFIG_H_

#include <jansson.h>

#include "../adapters/adapter.h"

struct sg_config;

/*
 * Load and validate path (NULL: the embedded default, one profile "local"
 * on the local backend).  *out is new; free with sg_config_free().
 * Errors: SG_E_NOT_FOUND (no such file), SG_E_INVALID_ARGUMENT (bad JSON or
 * field), each with the file named in err.
 */
sg_err sg_config_load(const char *path, struct sg_config **out,
		      struct sg_errinfo *err) SG_MUST_CHECK;
void sg_config_free(struct sg_config *cfg);

/* The path it came from ("<embedded>" for the default); borrowed. */
const char *sg_config_path(const struct sg_config *cfg);
/* The default profile's name; borrowed. */
const char *sg_config_default(const struct sg_config *cfg);
/* The profile names in file order, NULL-terminated; borrowed. */
const char *const *sg_config_names(const struct sg_config *cfg);

/*
 * Build the profile `name` (NULL: the default), narrowed by the binding's
 * `environment` object (NULL: none).  The binding may lower cpus and
 * memory_mb, make the network stricter (default > allow > none, an allow
 * list only a subset), and set lifetime_seconds, shutdown_timeout_ms and
 * forward_env; asking for more than the profile allows is
 * SG_E_PERMISSION naming the field.  `backend`, `command` and
 * `shutdown_grace_ms` describe the host's side of a command backend and
 * are ignored.  forward_env given as a list of names takes the values from
 * this process's environment (a missing one is SG_E_INVALID_ARGUMENT), as
 * an object its values as given; a name in both takes the binding's value.
 * A binding's list may only repeat names the profile's list forwards, and
 * no list forwards a variable an adapter reads (credential_env): both are
 * SG_E_PERMISSION naming the variable.
 * A binding field sandgate does not know must repeat the profile's value.
 * Errors: SG_E_NOT_FOUND (no such profile; the message lists them),
 * SG_E_INVALID_ARGUMENT (a malformed environment value, as
 * "environment.FIELD: ..."), SG_E_PERMISSION (a widening).  No message ever
 * holds a forward_env value.  profile->raw is a private deep copy of the
 * file's profile object as written (not narrowed): adapters read their own
 * fields there and the generic ones from the struct.
 * *out is new; free with sg_profile_free().
 */
sg_err sg_config_profile(const struct sg_config *cfg, const char *name,
			 json_t *environment, struct sg_profile **out,
			 struct sg_errinfo *err) SG_MUST_CHECK;
void sg_profile_free(struct sg_profile *p);

/*
 * The default config file: $SANDGATE_CONFIG, else
 * $XDG_CONFIG_HOME/sandgate/config.json (when absolute), else
 * $HOME/.config/sandgate/config.json; NULL when that file does not exist
 * (then the embedded default applies).  $SANDGATE_CONFIG is returned even
 * when its file is missing, so that sg_config_load() reports the mistake
 * instead of quietly running the embedded default.  New string.
 */
char *sg_config_default_path(void);

#endif
