/*
 * cgroup.c - the local backend's cgroups (cgroup.h).
 *
 * Which hierarchies exist is observed, never assumed: the unified (v2)
 * hierarchy at /sys/fs/cgroup holds everything; a hybrid or v1 host has
 * the v1 pids, memory and cpu controllers for limits, and for killing
 * either the unified hierarchy mounted at /sys/fs/cgroup/unified (whose
 * cgroup.kill needs no controller) or v1's freezer.  Killing never relies
 * on process groups: cgroup.kill, else freeze (so nothing forks while the
 * pids are read), SIGKILL every member, thaw; and a final loop over every
 * cgroup of the session until it is empty.
 */
#define _GNU_SOURCE /* asprintf */
#include "adapters/local/cgroup.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/limits.h"
#include "base/log.h"

#define CG_ROOT "/sys/fs/cgroup"
#define CG_V2_MAGIC 0x63677270 /* CGROUP2_SUPER_MAGIC */
#define CG_PERIOD 100000       /* CPU quota period, microseconds */

/* What each cgroup of a session is for. */
enum cg_role { ROLE_KILL, ROLE_PIDS, ROLE_MEM, ROLE_CPU, ROLE_N };

/* The hierarchy each role uses on this host ("" none) and whether its
 * files have the unified names. */
struct cg_layout {
	char mnt[ROLE_N][64];
	bool v2[ROLE_N];
};

static bool is_cgroup2(const char *path)
{
	struct statfs s;

	return statfs(path, &s) == 0 && (unsigned long)s.f_type == CG_V2_MAGIC;
}

static bool exists(const char *dir, const char *file)
{
	char p[SG_PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	return access(p, F_OK) == 0;
}

static void layout_get(struct cg_layout *l)
{
	static const char *const v1[ROLE_N] = { CG_ROOT "/freezer", CG_ROOT "/pids",
						CG_ROOT "/memory", CG_ROOT "/cpu" };

	memset(l, 0, sizeof(*l));
	if (is_cgroup2(CG_ROOT)) {
		for (int r = 0; r < ROLE_N; r++) {
			snprintf(l->mnt[r], sizeof(l->mnt[r]), "%s", CG_ROOT);
			l->v2[r] = true;
		}
		return;
	}
	for (int r = 0; r < ROLE_N; r++)
		if (exists(v1[r], "cgroup.procs"))
			snprintf(l->mnt[r], sizeof(l->mnt[r]), "%s", v1[r]);
	/* A hybrid host: the unified hierarchy kills without a controller. */
	if (is_cgroup2(CG_ROOT "/unified")) {
		snprintf(l->mnt[ROLE_KILL], sizeof(l->mnt[ROLE_KILL]), "%s", CG_ROOT "/unified");
		l->v2[ROLE_KILL] = true;
	}
}

bool sg_cgroup_writable(void)
{
	struct cg_layout l;

	layout_get(&l);
	for (int r = 0; r < ROLE_N; r++)
		if (l.mnt[r][0] && access(l.mnt[r], W_OK) == 0)
			return true;
	return false;
}

static FILE *open_at(const char *dir, const char *file, const char *mode)
{
	char p[SG_PATH_MAX];

	if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir, file) >= sizeof(p)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	return fopen(p, mode);
}

static int put(const char *dir, const char *file, const char *value)
{
	FILE *f = open_at(dir, file, "we");
	int ok;

	if (!f)
		return -1;
	ok = fputs(value, f) != EOF;
	return fclose(f) == 0 && ok ? 0 : -1;
}

static bool get(const char *dir, const char *file, char *dst, size_t n)
{
	FILE *f = open_at(dir, file, "re");
	bool ok;

	if (!f)
		return false;
	ok = fgets(dst, (int)n, f) != NULL;
	fclose(f);
	if (ok)
		dst[strcspn(dst, "\n")] = '\0';
	return ok;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap(void)
{
	struct timespec ts = { 0, 20 * 1000 * 1000 };

	nanosleep(&ts, NULL);
}

/* SIGKILL every member of dir; how many there were (-1: unreadable). */
static int kill_members(const char *dir)
{
	FILE *f = open_at(dir, "cgroup.procs", "re");
	long pid;
	int n = 0;

	if (!f)
		return errno == ENOENT ? 0 : -1;
	while (fscanf(f, "%ld", &pid) == 1) {
		if (pid > 0 && pid != (long)getpid())
			kill((pid_t)pid, SIGKILL);
		n++;
	}
	fclose(f);
	return n;
}

/*
 * Stop everything in one cgroup and remove it, within deadline: the
 * kernel's cgroup.kill where there is one, else frozen members killed
 * (nothing can fork in between), then SIGKILL until it is empty.
 */
static bool kill_dir(const char *dir, int64_t deadline)
{
	char state[32];

	if (access(dir, F_OK) != 0)
		return true;
	if (put(dir, "cgroup.kill", "1") != 0) {
		if (exists(dir, "cgroup.freeze") && put(dir, "cgroup.freeze", "1") == 0) {
			kill_members(dir);
			put(dir, "cgroup.freeze", "0");
		} else if (put(dir, "freezer.state", "FROZEN") == 0) {
			while (get(dir, "freezer.state", state, sizeof(state)) &&
			       strcmp(state, "FROZEN") != 0 && now_ms() < deadline)
				nap();
			kill_members(dir);
			put(dir, "freezer.state", "THAWED");
		}
	}
	for (;;) {
		int n = kill_members(dir);

		if (n <= 0 && (rmdir(dir) == 0 || errno == ENOENT))
			return true;
		if (now_ms() >= deadline) {
			sg_log_warn("the cgroup %s still has processes or cannot be removed: %s",
				    dir, n > 0 ? "members left" : strerror(errno));
			return false;
		}
		nap();
	}
}

bool sg_cgroup_kill(struct sg_cgroup *cg)
{
	int64_t deadline = now_ms() + SG_CGROUP_KILL_MS;
	bool ok = true;

	/* Containment first: the others are empty once it is. */
	for (size_t i = 0; i < cg->dirs.n; i++)
		ok = kill_dir(cg->dirs.v[i], deadline) && ok;
	sg_strv_release(&cg->dirs);
	sg_strv_release(&cg->procs);
	return ok;
}

/* Is name "<slug, at most 150 bytes>-<digits>"?  The pid when it is. */
static long session_pid(const char *name, const char *slug)
{
	size_t n = strnlen(slug, 150);
	const char *p = name + n + 1;
	char *end;
	long pid;

	if (strncmp(name, slug, n) != 0 || name[n] != '-' || !isdigit((unsigned char)*p))
		return 0;
	pid = strtol(p, &end, 10);
	return *end ? 0 : pid;
}

static bool pid_runs(long pid)
{
	return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

/*
 * Every session cgroup of slug (NULL: of any environment) in every
 * hierarchy, skipping this gateway's own and (only_dead) those whose
 * gateway runs: killed and removed, or (sweep) only removed if empty.
 * How many went.
 */
static int each_session(const char *slug, bool only_dead, bool sweep)
{
	/*
	 * Every hierarchy any gateway may have used, killing ones first: the
	 * gateway that made them may have seen another layout (the freezer
	 * where this one sees the unified hierarchy).
	 */
	static const char *const mounts[] = { CG_ROOT, CG_ROOT "/unified", CG_ROOT "/freezer",
					      CG_ROOT "/pids", CG_ROOT "/memory", CG_ROOT "/cpu",
					      NULL };
	int64_t deadline = now_ms() + SG_CGROUP_KILL_MS;
	int gone = 0;

	for (size_t m = 0; mounts[m]; m++) {
		char base[SG_PATH_MAX];
		struct dirent *de;
		DIR *d;

		snprintf(base, sizeof(base), "%s/sandgate", mounts[m]);
		d = opendir(base);
		while (d && (de = readdir(d))) {
			const char *dash = strrchr(de->d_name, '-');
			long pid = slug ? session_pid(de->d_name, slug)
					: dash ? session_pid(dash, "") : 0;
			char dir[SG_PATH_MAX];

			if (pid <= 0 || pid == (long)getpid() || (only_dead && pid_runs(pid)))
				continue;
			if ((size_t)snprintf(dir, sizeof(dir), "%s/%s", base, de->d_name) >=
			    sizeof(dir))
				continue;
			if (sweep ? rmdir(dir) == 0 : kill_dir(dir, deadline))
				gone++;
		}
		if (d)
			closedir(d);
	}
	return gone;
}

int sg_cgroup_kill_env(const char *slug)
{
	return each_session(slug, false, false);
}

void sg_cgroup_sweep(void)
{
	each_session(NULL, true, true);
}

/* Turn on the controllers a v2 child needs; a missing one shows later,
 * when its limit file cannot be written. */
static void enable_controllers(const char *dir)
{
	static const char *const on[] = { "+pids", "+memory", "+cpu", NULL };

	for (size_t i = 0; on[i]; i++)
		put(dir, "cgroup.subtree_control", on[i]);
}

/* The session's cgroup in role's hierarchy, made once; NULL when the
 * hierarchy is missing or not writable (errno says why). */
static const char *cg_dir(struct sg_cgroup *cg, const struct cg_layout *l, int role,
			  const char *name)
{
	char dir[SG_PATH_MAX], parent[SG_PATH_MAX];

	if (!l->mnt[role][0]) {
		errno = ENOENT;
		return NULL;
	}
	snprintf(parent, sizeof(parent), "%s/sandgate", l->mnt[role]);
	if ((size_t)snprintf(dir, sizeof(dir), "%s/%s", parent, name) >= sizeof(dir)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	for (size_t i = 0; i < cg->dirs.n; i++)
		if (strcmp(cg->dirs.v[i], dir) == 0)
			return cg->dirs.v[i];
	if (l->v2[role]) {
		enable_controllers(l->mnt[role]);
		if (mkdir(parent, 0755) && errno != EEXIST)
			return NULL;
		enable_controllers(parent);
	}
	if (sg_mkdir_p(dir, 0755))
		return NULL;
	if (sg_strv_add(&cg->dirs, dir) || sg_strv_addf(&cg->procs, "%s/cgroup.procs", dir)) {
		rmdir(dir);
		errno = ENOMEM;
		return NULL;
	}
	return cg->dirs.v[cg->dirs.n - 1];
}

static sg_err cant(struct sg_errinfo *err, const char *field, const char *what,
		   const char *dir)
{
	return sg_err_set(err, SG_E_UNSUPPORTED,
			  "field \"%s\" needs a writable cgroup: cannot %s %s: %s", field, what,
			  dir ? dir : "(no hierarchy for it on this host)", strerror(errno));
}

/* Read back what a limit file holds: observed, not assumed. */
static void observe(const struct cg_layout *l, int role, const char *dir, json_t *observed)
{
	char v[64], w[64];
	char *end;

	if (role == ROLE_MEM &&
	    get(dir, l->v2[role] ? "memory.max" : "memory.limit_in_bytes", v, sizeof(v)) &&
	    isdigit((unsigned char)v[0]))
		json_object_set_new(observed, "memory_limit_bytes",
				    json_integer((json_int_t)strtoll(v, NULL, 10)));
	if (role == ROLE_PIDS && get(dir, "pids.max", v, sizeof(v)) &&
	    isdigit((unsigned char)v[0]))
		json_object_set_new(observed, "pids_limit",
				    json_integer((json_int_t)strtoll(v, NULL, 10)));
	if (role == ROLE_CPU && l->v2[role] && get(dir, "cpu.max", v, sizeof(v)) &&
	    isdigit((unsigned char)v[0])) {
		long long q = strtoll(v, &end, 10), per = strtoll(end, NULL, 10);

		if (per > 0)
			json_object_set_new(observed, "cpu_limit", json_real((double)q / (double)per));
	}
	if (role == ROLE_CPU && !l->v2[role] && get(dir, "cpu.cfs_quota_us", v, sizeof(v)) &&
	    get(dir, "cpu.cfs_period_us", w, sizeof(w)) && isdigit((unsigned char)v[0])) {
		long long q = strtoll(v, NULL, 10), per = strtoll(w, NULL, 10);

		if (per > 0)
			json_object_set_new(observed, "cpu_limit", json_real((double)q / (double)per));
	}
}

/*
 * cant() for a limit tried after another may have failed: err keeps the
 * first failure's sentence, and the verdict stays a failure.  Every limit
 * is tried even after one fails, so that applied names exactly the limits
 * the kernel took, and a caller that drops a best-effort limit knows which
 * one failed and keeps the others.
 */
static sg_err cant_also(sg_err rc, struct sg_errinfo *err, const char *field,
			const char *what, const char *dir)
{
	struct sg_errinfo later;
	sg_err now = cant(rc ? &later : err, field, what, dir);

	return rc ? rc : now;
}

sg_err sg_cgroup_make(struct sg_cgroup *cg, const char *name,
		      const struct sg_cgroup_want *want, json_t *applied,
		      json_t *observed, struct sg_errinfo *err)
{
	struct cg_layout l;
	const char *dir;
	char val[64];
	sg_err rc = SG_OK;

	/*
	 * The config layer refuses values outside these bounds; checked
	 * again here because past them the byte count and the quota below
	 * would overflow their integers.
	 */
	if (want->memory_mb > SG_MEMORY_MB_MAX)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "field \"memory_mb\": must be an integer from 1 to %lld",
				  SG_MEMORY_MB_MAX);
	if (want->cpus > 0 && !(want->cpus >= SG_CPUS_MIN && want->cpus <= SG_CPUS_MAX))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "field \"cpus\": must be a number from %g to %d",
				  SG_CPUS_MIN, SG_CPUS_MAX);
	layout_get(&l);
	/* Containment is made wherever the host allows; without it the
	 * limits' own cgroups are killed member by member. */
	cg_dir(cg, &l, ROLE_KILL, name);
	if (want->pids_max > 0) {
		dir = cg_dir(cg, &l, ROLE_PIDS, name);
		snprintf(val, sizeof(val), "%lld", (long long)want->pids_max);
		if (!dir || put(dir, "pids.max", val)) {
			if (want->pids_max_explicit)
				rc = cant(err, "pids_max", dir ? "set pids.max in" : "create a cgroup in",
					  dir ? dir : l.mnt[ROLE_PIDS][0] ? l.mnt[ROLE_PIDS] : NULL);
		} else {
			json_object_set_new(applied, "pids_max", json_integer(want->pids_max));
			observe(&l, ROLE_PIDS, dir, observed);
		}
	}
	if (want->memory_mb > 0) {
		dir = cg_dir(cg, &l, ROLE_MEM, name);
		snprintf(val, sizeof(val), "%lld", (long long)want->memory_mb * (long long)SG_MiB);
		if (!dir || put(dir, l.v2[ROLE_MEM] ? "memory.max" : "memory.limit_in_bytes", val) ||
		    (l.v2[ROLE_MEM] && put(dir, "memory.swap.max", "0") && errno != ENOENT))
			rc = cant_also(rc, err, "memory_mb",
				       dir ? "set the memory limit in" : "create a cgroup in",
				       dir ? dir : l.mnt[ROLE_MEM][0] ? l.mnt[ROLE_MEM] : NULL);
		else {
			json_object_set_new(applied, "memory_mb", json_integer(want->memory_mb));
			observe(&l, ROLE_MEM, dir, observed);
		}
	}
	if (want->cpus > 0) {
		/* In range (checked above), so the quota fits its integer. */
		long long quota = (long long)(want->cpus * CG_PERIOD + 0.5);

		dir = cg_dir(cg, &l, ROLE_CPU, name);
		if (l.v2[ROLE_CPU]) {
			snprintf(val, sizeof(val), "%lld %d", quota, CG_PERIOD);
			if (!dir || put(dir, "cpu.max", val))
				dir = NULL;
		} else {
			snprintf(val, sizeof(val), "%lld", quota);
			if (!dir || put(dir, "cpu.cfs_period_us", "100000") ||
			    put(dir, "cpu.cfs_quota_us", val))
				dir = NULL;
		}
		if (!dir)
			rc = cant_also(rc, err, "cpus", "set the CPU quota in",
				       l.mnt[ROLE_CPU][0] ? l.mnt[ROLE_CPU] : NULL);
		else {
			json_object_set_new(applied, "cpus", json_real((double)quota / CG_PERIOD));
			observe(&l, ROLE_CPU, dir, observed);
		}
	}
	if (rc)
		sg_cgroup_kill(cg);
	return rc;
}

void sg_cgroup_release(struct sg_cgroup *cg)
{
	sg_strv_release(&cg->dirs);
	sg_strv_release(&cg->procs);
}
