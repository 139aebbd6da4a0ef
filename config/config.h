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

#include "adapters/adapter.h"

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
 * The host's profile, WUU_EXECUTION_PROFILE's JSON text (NULL or "": none),
 * as the narrowing sg_config_profile takes (*out new, NULL for none).
 * Fields at their zero value ("", 0, false, null, []) ask for nothing, as
 * the host's encoder omits them, and are dropped; so are the fields that
 * describe the host's own launch of this backend (backend, command,
 * forward_env, worker, python, workspace, shutdown_grace_ms); network
 * "enabled" is the host's word for "default".  Text that is not a JSON
 * object is SG_E_INVALID_ARGUMENT.
 */
sg_err sg_config_host_profile(const char *text, json_t **out, struct sg_errinfo *err)
	SG_MUST_CHECK;

/*
 * Build the profile `name` (NULL: the default), narrowed by `environment`
 * (NULL: none): the host's profile as sg_config_host_profile made it.  It
 * may lower cpus and memory_mb and lifetime_seconds (0 counts as the
 * default on both sides), make the network stricter (default > allow >
 * none, an allow list only a subset), turn mount_read_only on, shorten
 * shutdown_timeout_ms, drop best_effort names, and ask for persistent or
 * shared only where the profile has them itself; anything else it sets
 * must repeat the profile's value.  A field it adds that the backend
 * cannot enforce is refused as in the file.  Refusals are SG_E_PERMISSION
 * naming the field (`WUU_EXECUTION_PROFILE: field "cpus": ...`), type
 * errors SG_E_INVALID_ARGUMENT; SG_E_NOT_FOUND for no such profile (the
 * message lists them).  profile->raw is a private deep copy of the file's
 * profile object as written (not narrowed): adapters read their own fields
 * there and the generic ones from the struct.  The forwarded variables
 * are the operator's forward_env alone; no message ever holds a value.
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
