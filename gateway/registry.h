/*
 * registry.h - the local state registry: what sandgate created, and who
 * is attached to it.
 *
 * One record per environment, keyed by backend and identity, kept as a JSON
 * file under <state>/registry/.  It exists so that nothing leaks: a record
 * is written *before* the adapter creates anything (status "provisioning"),
 * completed once the environment exists ("active"), and removed only when
 * the environment is gone, so a gateway killed at any step leaves a record
 * that `sandgate envs gc` can act on.
 *
 * Invariants:
 *  - Every change is a read-modify-write under an exclusive flock on
 *    <state>/registry/.lock, written to a temporary file, fsync'd and
 *    renamed into place: readers see the old record or the new one.
 *  - Several gateways may share an identity; each attached session is
 *    listed with its gateway's pid and that process's start time, so a
 *    dead gateway is told apart from a live one whose pid was reused.
 *  - A record that cannot be parsed is moved aside to <name>.corrupt and
 *    reported, never silently dropped.
 */
#ifndef SG_REGISTRY_H
#define SG_REGISTRY_H

#include <jansson.h>
#include <stdbool.h>

#include "base/err.h"

/* What a record says about the environment's life. */
#define SG_REG_PROVISIONING "provisioning" /* create sent, outcome unknown */
#define SG_REG_ACTIVE "active"             /* exists, sessions may attach */
#define SG_REG_KEPT "kept"                 /* persisted, nobody attached */
/* Removal failed or timed out, or a create's outcome is unknown (no id
 * yet; the record then names the session whose tags to look for). */
#define SG_REG_CLEANUP "cleanup-pending"
/* A keep (snapshot, stop) failed or timed out: the environment still
 * runs and, when persistent, holds the only copy of the workspace, so gc
 * leaves it to the next session or to an operator's `envs rm`. */
#define SG_REG_KEEP_FAILED "keep-pending"

struct sg_reg_key {
	const char *backend;
	const char *identity;
};

/*
 * Attach a session to the record of key, creating the record (status
 * provisioning) when there is none.  `fields` (borrowed) are merged in:
 * profile, persistent, shared, expires...  *others_out is the number of
 * *live* sessions other than this one already attached.  *known_out (may
 * be NULL) is false only when there was no record before: nothing was
 * ever created for key from this state directory, or it was removed.
 * SG_E_UNAVAILABLE while a live `sandgate envs` removes the environment
 * (sg_registry_claim).
 */
sg_err sg_registry_attach(const char *state_dir, const struct sg_reg_key *key,
			  const char *session, json_t *fields, int *others_out, bool *known_out,
			  struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * Attach a session that initialize brings up, as sg_registry_attach, with
 * sharing decided under the same lock that counts the live sessions.
 * *persisted_out: the record, as it was, names a persistent environment
 * that was made and handed to sessions (active, kept or keep-pending),
 * whose loss is then a lost workspace (sg_env.persisted).
 * When another live session is attached, the newcomer joins only if both
 * `fields` and the record say "shared": true, and it leaves the record's
 * "shared" as it was: only a session that finds nobody live attached sets
 * it, so a binding asking to share (protocol 4.3) cannot turn a session
 * that is not shared into one that is.  Otherwise nothing is written and
 * SG_E_UNAVAILABLE is returned (this function's only use of that code).
 */
sg_err sg_registry_join(const char *state_dir, const struct sg_reg_key *key,
			const char *session, json_t *fields, int *others_out, bool *known_out,
			bool *persisted_out, struct sg_errinfo *err) SG_MUST_CHECK;

/* Merge fields (borrowed) into the record: id, status, expires ... */
sg_err sg_registry_update(const char *state_dir, const struct sg_reg_key *key,
			  json_t *fields, struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * Detach a session.  *others_out is the number of live sessions still
 * attached (dead ones are pruned on the way), which decides whether the
 * environment may be removed.
 */
sg_err sg_registry_detach(const char *state_dir, const struct sg_reg_key *key,
			  const char *session, int *others_out,
			  struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * Merge fields (borrowed) into the record only when no live session but
 * `session` is attached, under the same lock that counts them;
 * *others_out is that number.  Shutdown marks the record this way before
 * the last session removes the environment, so a gateway killed
 * mid-removal leaves a record that `sandgate envs gc` acts on.
 */
sg_err sg_registry_update_if_last(const char *state_dir, const struct sg_reg_key *key,
				  const char *session, json_t *fields, int *others_out,
				  struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * Claim key's environment for removal by this process (`envs rm`, `gc`),
 * under the lock, after their listing decided to remove it: refused
 * (SG_E_UNAVAILABLE) when a live session has attached since, unless
 * force, or when another live `envs` holds the claim.  The record (made
 * for an orphan, *made true, status cleanup-pending) then carries
 * "removing" with this process, and sg_registry_attach/join refuse while
 * it lives, so no gateway attaches to what is being removed.
 */
sg_err sg_registry_claim(const char *state_dir, const struct sg_reg_key *key, bool force,
			 bool *made, struct sg_errinfo *err) SG_MUST_CHECK;

/* As sg_registry_claim; *rec (new, on success) is the claimed record. */
sg_err sg_registry_claim_copy(const char *state_dir, const struct sg_reg_key *key, bool force,
			      bool *made, json_t **rec, struct sg_errinfo *err) SG_MUST_CHECK;

/* Give a claim back after a removal that failed (a record it made goes). */
void sg_registry_unclaim(const char *state_dir, const struct sg_reg_key *key, bool made);

/* Delete the record (the environment is gone). */
sg_err sg_registry_remove(const char *state_dir, const struct sg_reg_key *key,
			  struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * Every record, as a JSON array of objects (new), each with "file" and a
 * "live_sessions" count added; corrupt records (not a regular file, too
 * large, not a JSON object, or naming another backend or identity than
 * their file name) are moved aside, and *corrupt_out (new array) holds one
 * sentence per record that could not be used, naming it and why.
 */
sg_err sg_registry_list(const char *state_dir, json_t **out,
			json_t **corrupt_out, struct sg_errinfo *err)
	SG_MUST_CHECK;

/* Whether the process pid, started at start_time (clock ticks since boot,
 * field 22 of /proc/pid/stat), is still alive. */
bool sg_registry_alive(long pid, unsigned long long start_time);

/* This process's start time in the same unit. */
unsigned long long sg_registry_self_start(void);

#endif
