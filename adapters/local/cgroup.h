/*
 * cgroup.h - the local backend's cgroups: a session's limits, and the
 * containment that kills everything the session started.
 *
 * Invariants: a session's cgroups are <hierarchy>/sandgate/<name>, where
 * name is "<environment slug, at most 150 bytes>-<gateway pid>", one per
 * hierarchy used (the unified one for cgroup.kill, or v1's freezer; pids,
 * memory and cpu for the limits).  Every command of the session joins all
 * of them before its first instruction (`sg-helper cgroup-exec`), and
 * nothing inside can leave: the sandbox shows no /sys and holds no
 * capabilities.  So killing those cgroups kills everything the session
 * started, whatever it did with sessions, process groups or signals.
 * The gateway itself never joins them.
 * Ownership: struct sg_cgroup owns its strings; sg_cgroup_release() frees
 * them (and removes nothing: sg_cgroup_kill() does that).
 */
#ifndef SG_LOCAL_CGROUP_H
#define SG_LOCAL_CGROUP_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "base/strv.h"

struct sg_cgroup {
	struct sg_strv dirs;  /* made for this session, containment first */
	struct sg_strv procs; /* their cgroup.procs files, to join */
};

#define SG_CGROUP_INIT { SG_STRV_INIT, SG_STRV_INIT }

/* What the profile asks for; 0: not asked.  pids_max_explicit: the
 * profile set pids_max itself (else it is the default, applied where
 * cgroups allow and skipped where they do not). */
struct sg_cgroup_want {
	double cpus;
	int64_t memory_mb;
	int64_t pids_max;
	bool pids_max_explicit;
};

/* Whether this process can make cgroups for limits at all (observed). */
bool sg_cgroup_writable(void);

/*
 * Make the session's cgroups under name and set the limits.  applied
 * receives what the kernel was told (cpus, memory_mb, pids_max), observed
 * what the cgroup files hold when read back (memory_limit_bytes,
 * cpu_limit, pids_limit).  Containment and the default pids limit are
 * made where the host allows and silently skipped where it does not (the
 * caller reports it); a limit the profile asked for that cannot be set is
 * SG_E_UNSUPPORTED naming the field.  On failure what was made is removed.
 */
sg_err sg_cgroup_make(struct sg_cgroup *cg, const char *name,
		      const struct sg_cgroup_want *want, json_t *applied,
		      json_t *observed, struct sg_errinfo *err) SG_MUST_CHECK;

/* Kill every process in the session's cgroups and remove them; bounded
 * in time.  False when a cgroup could not be emptied or removed (logged). */
bool sg_cgroup_kill(struct sg_cgroup *cg);

/*
 * Kill and remove the cgroups of every other session of the environment
 * whose slug is given (survivors of crashed gateways), when the
 * environment itself goes.  Returns how many.
 */
int sg_cgroup_kill_env(const char *slug);

/*
 * Remove the empty cgroups of every environment's sessions whose gateway
 * no longer runs (a crashed gateway whose environment was collected
 * leaves them): rmdir only, which the kernel refuses for a cgroup with
 * members, so nothing running is touched.
 */
void sg_cgroup_sweep(void);

void sg_cgroup_release(struct sg_cgroup *cg);

#endif
