/*
 * budget.h - what a shutdown costs, planned from measured provider times.
 *
 * A shutdown must do some work whatever happens (remove, or stop and keep,
 * the environment) and may do more when there is time (a grace for the
 * processes, the requests' cancelled replies).  This module says what
 * that work costs for a backend, so that `serve` can do the must-do part
 * first and say at once when its budget is too short, and `config check`
 * and `probe` can tell an operator which budget each profile needs.
 *
 * Invariants:
 *  - Costs are per backend and per operation (stop processes, remove,
 *    keep).  Each is a conservative default until measured; afterwards the
 *    estimate is the smoothed duration plus four smoothed deviations (the
 *    retransmission-timer rule of RFC 6298), so one slow run raises it at
 *    once and it falls back slowly.
 *  - Measurements live in <state>/budget.json, changed only under an
 *    exclusive flock on <state>/budget.lock and written by rename, so
 *    gateways sharing a state directory never lose one another's samples.
 *    A missing or unreadable file means "nothing measured yet"; it never
 *    stops a shutdown.
 *  - The arithmetic (sg_budget_sample, sg_budget_estimate, sg_budget_plan,
 *    sg_budget_split) is pure: no I/O, no clock.
 * Everything returned is owned by the caller unless it says borrowed.
 */
#ifndef SG_BUDGET_H
#define SG_BUDGET_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "adapters/adapter.h"

/* The operations whose durations are measured. */
enum sg_budget_op {
	SG_BUDGET_STOP,   /* stop the session's processes (their grace included) */
	SG_BUDGET_REMOVE, /* delete the environment */
	SG_BUDGET_KEEP,   /* keep it: snapshot, or stop the sandbox */
	SG_BUDGET_NOPS,
};

/* One operation's record: smoothed duration and deviation (ms). */
struct sg_budget_stat {
	double mean_ms, dev_ms;
	int64_t samples;
};

/* One step of a plan. */
struct sg_budget_step {
	enum sg_budget_op op; /* SG_BUDGET_NOPS: nothing to do */
	int64_t ms;
	int64_t samples;      /* 0: the backend's default */
};

struct sg_budget_plan {
	struct sg_budget_step stop; /* the session's processes */
	struct sg_budget_step env;  /* remove or keep the environment */
	int64_t slack_ms;           /* the cancelled requests, the registry */
	int64_t total_ms;
};

/* "stop", "remove", "keep" (the key in budget.json); borrowed. */
const char *sg_budget_op_name(enum sg_budget_op op);
/* "stop processes", "delete", "keep" (for people); borrowed. */
const char *sg_budget_op_words(enum sg_budget_op op);

/* Fold one measured duration into st. */
void sg_budget_sample(struct sg_budget_stat *st, int64_t ms);

/* What to plan for op on backend: the default without samples, else the
 * smoothed duration plus four deviations, rounded up. */
int64_t sg_budget_estimate(const char *backend, enum sg_budget_op op,
			   const struct sg_budget_stat *st);

/*
 * The plan for backend's shutdown.  fate NULL: not known yet (config
 * check, probe), so the environment step is the costlier of remove and
 * keep.  stats (borrowed) is the backend's measured records as
 * sg_budget_load gives them, or NULL.
 */
void sg_budget_plan(const char *backend, const enum sg_fate *fate, json_t *stats,
		    struct sg_budget_plan *out);

/*
 * Split budget_ms for a shutdown that follows plan: *optional_ms is how
 * long the optional work (awaiting the cancelled requests) may take before
 * the processes and the environment must be dealt with, leaving those
 * steps their planned time (0 when the budget does not even cover them).
 * Returns true when the whole plan fits.
 */
bool sg_budget_split(const struct sg_budget_plan *plan, int64_t budget_ms,
		     int64_t *optional_ms);

/*
 * The measured records of backend in state_dir, as a new object
 * {"stop": {"mean_ms", "dev_ms", "samples"}, ...}, or NULL when none
 * (state_dir NULL, no file, unreadable).
 */
json_t *sg_budget_load(const char *state_dir, const char *backend);

/*
 * Fold a measured duration of op on backend into state_dir's records.
 * Best effort: a failure is only logged (a shutdown must not fail for it).
 */
void sg_budget_record(const char *state_dir, const char *backend, enum sg_budget_op op,
		      int64_t ms);

/*
 * A version-3 host kills its command backend this long after it closed
 * the backend's stdin, whatever the profile says (host-wire.md section 8).
 */
#define SG_BUDGET_V3_HOST_GRACE_MS 3000
/*
 * What a gateway serving a version-3 host allows itself from EOF to exit:
 * the host's grace less what the process needs to end and the host to
 * see it.  A delegated peer (--peer) allows itself less, so that the
 * outer gateway, which waits SG_BUDGET_V3_PEER_KILL_MS less than its own
 * window for it, sees it exit instead of killing it.
 */
#define SG_BUDGET_V3_EXIT_MS 2500
#define SG_BUDGET_V3_PEER_EXIT_MS 2000
#define SG_BUDGET_V3_PEER_KILL_MS 300
/*
 * What handing a removal to a reaper may take inside the exit window:
 * starting it and waiting for its claim on the record (reaper.h).
 */
#define SG_BUDGET_HANDOFF_MS 700

/* The time an outer adapter waits for a cancelled request's terminal
 * reply before it closes the peer (docs/delegation.md). */
#define SG_BUDGET_CANCEL_DRAIN_MS SG_RELAY_CANCEL_MS

/*
 * The budget an outer layer needs to cover an inner one that may use
 * inner_ms: inner_ms plus the cancel drain.  For a chain of gateways,
 * apply it once per layer.
 */
int64_t sg_budget_chain_need(int64_t inner_ms);

/*
 * The shutdown report of profile p (borrowed), measured costs read from
 * state_dir (NULL: defaults only), as a new object:
 *   {"needs_ms", "steps": [{"step", "ms", "measured", "samples"}],
 *    "budgets": [{"role", "ms", "from", "enough"}], "warnings": [text]}
 * for `config check` and `probe`.  The roles are sandgate as the host's
 * command backend (shutdown_timeout_ms, else 60 s) and as a delegated
 * peer (the shorter of its own budget, shutdown_timeout_ms else 10 s, and
 * the outer's grace, shutdown_grace_ms else 10 s), whose host needs the
 * grace plus the cancel drain (its default: 90 s for a cloud backend's
 * entry, 60 s otherwise).  A select profile has no report of its own
 * (NULL): each candidate has one; nor has a command profile, whose
 * chain config check refuses when its budget is short (check.h).
 */
json_t *sg_budget_report(const struct sg_profile *p, const char *state_dir);

#endif
