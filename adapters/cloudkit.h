/*
 * cloudkit.h - what the cloud adapters (daytona, modal) share about the
 * sandboxes they make at a provider: the name an identity gets, the tags
 * every sandbox carries (managed-by, identity, session, profile, created,
 * expires, persistent, and a random create tag), an operator's listing
 * built from those tags, and the key=value replies of set-up scripts.
 *
 * Invariants:
 *  - An identity's name is deterministic, at most SG_CLOUD_NAME_MAX bytes
 *    of [a-z0-9-], and two identities never share one (a SHA-256 prefix).
 *  - The tags are the one vocabulary `sandgate envs` and sg_envs_settle
 *    (gateway/envs.h) look for; managed-by=sandgate marks sandgate's own,
 *    and nothing without it is ever removed.
 *  - Returned strings are new (malloc) where the comment says so;
 *    sg_cloud_tags holds its values in its own arrays and borrows the
 *    env's strings, so it lives no longer than the env.
 */
#ifndef SG_CLOUDKIT_H
#define SG_CLOUDKIT_H

#include <stdbool.h>
#include <stddef.h>

#include "adapters/adapter.h"

/* Tag (label) keys.  managed-by is what listings and reapers filter on. */
#define SG_CLOUD_TAG_MANAGED "managed-by"
#define SG_CLOUD_TAG_IDENTITY "sandgate.identity"
#define SG_CLOUD_TAG_SESSION "sandgate.session"
#define SG_CLOUD_TAG_PROFILE "sandgate.profile"
#define SG_CLOUD_TAG_CREATED "sandgate.created"
#define SG_CLOUD_TAG_EXPIRES "sandgate.expires"
#define SG_CLOUD_TAG_PERSISTENT "sandgate.persistent"
#define SG_CLOUD_TAG_CREATE "sandgate.create"
#define SG_CLOUD_MANAGER "sandgate"

#define SG_CLOUD_NAME_SLUG 24 /* readable bytes of an identity in a name */
#define SG_CLOUD_NAME_MAX 48  /* "sg-" + slug + "-" + 12 hex digits, and more */
#define SG_CLOUD_TAGS 8       /* the tags above */

/*
 * The sandbox name for an identity: "sg-<readable part>-<12 hex digits of
 * its SHA-256>".  New; NULL when out of memory.
 */
char *sg_cloud_name(const char *identity);

/* n random bytes as 2n hex digits into out[2n+1] (n at most 32). */
void sg_cloud_random_hex(char *out, size_t n);

/* The value of key in "key=value" lines (new), or NULL. */
char *sg_cloud_kv(const char *text, const char *key);
/* Is key=1 among the lines? */
bool sg_cloud_flag(const char *text, const char *key);

/* The tags of a sandbox made now for env (create_id: the random tag). */
struct sg_cloud_tags {
	const char *key[SG_CLOUD_TAGS];
	const char *value[SG_CLOUD_TAGS];
	size_t n;
	char created[24], expires[24];
};
void sg_cloud_tags_fill(const struct sg_env *env, const char *create_id,
			struct sg_cloud_tags *t);

/*
 * An operator's view of one sandbox from its tags: get(src, key) returns
 * a tag's value or NULL.  id and state are the provider's.
 */
void sg_cloud_info(const char *id, const char *state,
		   const char *(*get)(const void *src, const char *key),
		   const void *src, struct sg_env_info *info);

#endif
