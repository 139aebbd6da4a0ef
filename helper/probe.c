/*
 * probe.c - what the environment looks like from inside (docs/protocol.md
 * section 5): isolation as far as a process can see it, resource limits
 * of its cgroup, the kernel, and the toolchains that answer --version.
 *
 * Every fact is observed, never guessed from a name: a fact that cannot be
 * read is left out (or null), not assumed.  host_filesystem_restricted is
 * reported only when the gateway names files of its host (--hidden PATH:
 * its state directory, a root-only file), because no process can tell
 * from inside alone which files are the host's: then it is true only if
 * none of them opens.
 *
 * The gateway runs it at initialize through the adapter's exec; as part
 * of the helper library it stays thread-safe all the same (no globals, no
 * signal handlers, children only through posix_spawn and reaped by pid).
 * The toolchains are asked only with --toolchains (`sandgate probe`, a
 * profile that requires one): their --version runs took most of the
 * probe's time (node's and c++'s tens of milliseconds each), which every
 * initialize paid before the first tool result.  They run concurrently
 * under one deadline.
 */
/*
 * _GNU_SOURCE: syscall() for the Landlock version, pipe2(O_CLOEXEC) so
 * other threads' children never inherit our pipes, and struct ifreq with
 * SIOCGIFFLAGS are GNU/Linux APIs.
 */
#define _GNU_SOURCE

#include "helper/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/jw.h"
#include "base/limits.h"
#include "helper/landlock.h"

/* Each toolchain's --version is given this long before it is killed. */
/* Output kept per --version run; only its first line is used. */
/* The largest /proc file read whole (mountinfo, net/dev, status). */
/* The variables passed to the version commands (probe_env), all told. */
#define PROBE_ENV_MAX (64 * SG_KiB)
/*
 * cgroup v1 says "no limit" with the largest page-aligned long, whose
 * exact value depends on the page size: anything this big is no limit.
 */
#define PROBE_UNLIMITED (UINT64_C(1) << 62)

/* The inode of the initial pid namespace (include/linux/proc_ns.h). */
#define PROBE_PID_INIT_INO 0xEFFFFFFCU

/* A fact that may be unknown. */
enum probe_tri { PROBE_UNKNOWN = -1, PROBE_NO = 0, PROBE_YES = 1 };

static const struct probe_tool {
	const char *id; /* the canonical toolchain id */
	const char *argv[3];
} probe_tools[] = {
	{ "python", { "python3", "--version", NULL } },
	{ "node", { "node", "--version", NULL } },
	{ "go", { "go", "version", NULL } },
	{ "c++", { "c++", "--version", NULL } },
	{ "git", { "git", "--version", NULL } },
	{ "rg", { "rg", "--version", NULL } },
};
#define PROBE_NTOOLS (sizeof(probe_tools) / sizeof(probe_tools[0]))

struct probe_run {
	pid_t pid; /* 0: not started (absent); -1 once reaped */
	int fd;    /* read end of the output pipe; -1 once at EOF */
	int status;
	bool exited;
	size_t len;
	char out[SG_PROBE_CAPTURE];
};

/*
 * Read a whole small file into b (reset first).  SG_E_NOT_FOUND when it
 * cannot be opened, SG_E_TOO_LARGE past b's max.
 */
static sg_err probe_read(const char *path, struct sg_buf *b)
{
	sg_err rc;
	int fd;

	sg_buf_reset(b);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return SG_E_NOT_FOUND;
	for (;;) {
		char *dst;
		ssize_t n;

		rc = sg_buf_reserve(b, 4096, &dst);
		if (rc)
			goto out;
		n = read(fd, dst, 4096);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = SG_E_NOT_FOUND;
			goto out;
		}
		if (n == 0)
			break;
		sg_buf_commit(b, (size_t)n);
	}
	rc = SG_OK;
out:
	close(fd);
	return rc;
}

/* Read a file small enough for a stack buffer; false when unreadable. */
static bool probe_read_small(const char *path, char *buf, size_t size)
{
	size_t len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	while (len + 1 < size) {
		ssize_t n = read(fd, buf + len, size - 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	close(fd);
	return len > 0;
}

/* The value after "Name:" on its line of a /proc status file, or NULL. */
static const char *probe_field(const char *text, const char *name)
{
	size_t n = strlen(name);
	const char *p = text;

	while (p && *p) {
		if (strncmp(p, name, n) == 0 && p[n] == ':') {
			p += n + 1;
			while (*p == ' ' || *p == '\t')
				p++;
			return p;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return NULL;
}

/* How many whitespace-separated words are left on this line. */
static int probe_words(const char *p)
{
	int n = 0;

	while (*p && *p != '\n') {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p || *p == '\n')
			break;
		n++;
		while (*p && *p != ' ' && *p != '\t' && *p != '\n')
			p++;
	}
	return n;
}

/*
 * Whether any interface but loopback is administratively up in this
 * process's network namespace.  /proc/net/dev lists the namespace's
 * interfaces; their state comes from SIOCGIFFLAGS on a socket, which is
 * answered for the socket's (our) namespace.  /sys/class/net would be
 * simpler but describes the namespace of whoever mounted sysfs, so under
 * `unshare -n` or in a container that did not remount it, it tells about
 * someone else's interfaces.  An interface whose state cannot be read
 * counts as up: isolation is claimed only when it was seen.
 */
static enum probe_tri probe_network_isolated(struct sg_buf *scratch)
{
	enum probe_tri r = PROBE_UNKNOWN;
	const char *p;
	int sock = -1;

	if (probe_read("/proc/net/dev", scratch))
		goto out;
	sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	r = PROBE_YES;
	/* Two header lines, then "  name: counters..." per interface. */
	p = strchr(scratch->p, '\n');
	p = p ? strchr(p + 1, '\n') : NULL;
	while (p && *++p) {
		const char *colon = strchr(p, ':'), *eol = strchr(p, '\n');
		struct ifreq ifr;
		size_t n;

		while (*p == ' ')
			p++;
		if (!colon || (eol && colon > eol))
			break;
		n = (size_t)(colon - p);
		if (n == 2 && memcmp(p, "lo", 2) == 0) {
			p = eol;
			continue;
		}
		memset(&ifr, 0, sizeof(ifr));
		if (sock < 0 || n == 0 || n >= sizeof(ifr.ifr_name)) {
			r = PROBE_NO;
			break;
		}
		memcpy(ifr.ifr_name, p, n);
		if (ioctl(sock, SIOCGIFFLAGS, &ifr) != 0 ||
		    (ifr.ifr_flags & IFF_UP)) {
			r = PROBE_NO;
			break;
		}
		p = eol;
	}
out:
	if (sock >= 0)
		close(sock);
	return r;
}

/* Whether the comma-separated list (len bytes) has item as an element. */
static bool probe_in_list(const char *list, size_t len, const char *item)
{
	const char *end = list + len;
	size_t n = strlen(item);

	while (list < end) {
		const char *e = memchr(list, ',', (size_t)(end - list));

		if (!e)
			e = end;
		if ((size_t)(e - list) == n && memcmp(list, item, n) == 0)
			return true;
		list = e + 1;
	}
	return false;
}

/*
 * Where this process's cgroup for one hierarchy is mounted: the v1
 * hierarchy carrying `controller`, or the v2 one when controller is NULL.
 * Fills dir (the cgroup's directory) and mnt (the mount point, the
 * highest directory worth reading).  False when not mounted or not
 * reachable (a cgroup outside the mounted subtree).
 */
static bool probe_cgroup_dir(const char *mountinfo, const char *cgroups,
			     const char *controller, char *dir, char *mnt,
			     size_t size)
{
	const char *cgpath = NULL, *p;
	size_t cglen = 0;

	/* /proc/self/cgroup: "id:controller,controller:/path" per line. */
	for (p = cgroups; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p) {
		const char *c1 = strchr(p, ':'), *c2, *eol;

		if (!c1)
			break;
		c2 = strchr(c1 + 1, ':');
		eol = strchr(p, '\n');
		if (!eol)
			eol = p + strlen(p);
		if (!c2 || c2 > eol)
			continue;
		if (controller ? !probe_in_list(c1 + 1, (size_t)(c2 - c1 - 1),
						controller)
			       : c2 != c1 + 1)
			continue;
		cgpath = c2 + 1;
		cglen = (size_t)(eol - cgpath);
		break;
	}
	if (!cgpath)
		return false;

	/*
	 * /proc/self/mountinfo: "id parent maj:min root mountpoint opts
	 * [optional...] - fstype source superopts".  The cgroup's directory
	 * is the mount point plus the path below the mount's root.
	 */
	for (p = mountinfo; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p) {
		const char *f[5], *dash, *eol = strchr(p, '\n'), *q = p;
		size_t flen[5], rootlen, mntlen;
		char fstype[16], opts[256];
		int nf = 0;

		if (!eol)
			eol = p + strlen(p);
		while (nf < 5 && q < eol) {
			const char *e = memchr(q, ' ', (size_t)(eol - q));

			if (!e)
				e = eol;
			f[nf] = q;
			flen[nf++] = (size_t)(e - q);
			q = e + 1;
		}
		dash = strstr(p, " - ");
		if (nf < 5 || !dash || dash > eol)
			continue;
		if (sscanf(dash, " - %15s %*s %255s", fstype, opts) != 2)
			continue;
		if (controller ? strcmp(fstype, "cgroup") != 0 ||
					 !probe_in_list(opts, strlen(opts),
							controller)
			       : strcmp(fstype, "cgroup2") != 0)
			continue;
		rootlen = flen[3];
		mntlen = flen[4];
		/* Escaped names (\040) are not worth decoding for cgroupfs. */
		if (memchr(f[4], '\\', mntlen) || mntlen + 1 > size)
			continue;
		if (rootlen == 1 && f[3][0] == '/')
			rootlen = 0;
		if (rootlen > cglen || memcmp(cgpath, f[3], rootlen) != 0 ||
		    (rootlen < cglen && cgpath[rootlen] != '/'))
			continue;
		memcpy(mnt, f[4], mntlen);
		mnt[mntlen] = '\0';
		if (snprintf(dir, size, "%s%.*s", mnt, (int)(cglen - rootlen),
			     cgpath + rootlen) >= (int)size)
			continue;
		return true;
	}
	return false;
}

/* Strip dir's last component; false once dir is the mount point. */
static bool probe_parent(char *dir, const char *mnt)
{
	char *slash;

	if (strlen(dir) <= strlen(mnt))
		return false;
	slash = strrchr(dir, '/');
	if (!slash)
		return false;
	*slash = '\0';
	return strlen(dir) >= strlen(mnt);
}

/* Read dir/file into buf (see probe_read_small); false when unreadable. */
static bool probe_read_at(const char *dir, const char *file, char *buf,
			  size_t size)
{
	char path[SG_PATH_MAX];
	int n = snprintf(path, sizeof(path), "%s/%s", dir, file);

	return n > 0 && (size_t)n < sizeof(path) &&
	       probe_read_small(path, buf, size);
}

/* Parse an unsigned decimal at the start of s; false if there is none. */
static bool probe_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return false;
	*out = v;
	return true;
}

/*
 * The smallest memory limit on the way from this process's cgroup up to
 * the mount point (a parent's limit binds its children), in v1 and v2;
 * 0 when there is none or none could be read.
 */
static uint64_t probe_memory_limit(const char *mountinfo, const char *cgroups)
{
	static const struct {
		const char *controller, *file;
	} where[] = { { "memory", "memory.limit_in_bytes" },
		      { NULL, "memory.max" } };
	char dir[SG_PATH_MAX], mnt[SG_PATH_MAX], v[64];
	uint64_t best = 0, n;

	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
		if (!probe_cgroup_dir(mountinfo, cgroups, where[i].controller,
				      dir, mnt, sizeof(dir)))
			continue;
		do {
			if (probe_read_at(dir, where[i].file, v, sizeof(v)) &&
			    probe_u64(v, &n) && n < PROBE_UNLIMITED &&
			    (best == 0 || n < best))
				best = n;
		} while (probe_parent(dir, mnt));
	}
	return best;
}

/* Keep the smaller of two CPU limits, where 0 means none. */
static double probe_cpu_min(double best, uint64_t quota, uint64_t period)
{
	double c;

	if (quota == 0 || period == 0)
		return best;
	c = (double)quota / (double)period;
	return best == 0 || c < best ? c : best;
}

/*
 * The CPU quota in cores (quota / period), smallest along the path up;
 * 0 when unlimited or unknown.  v1: cpu.cfs_quota_us is -1 for none;
 * v2: cpu.max is "max PERIOD" for none.
 */
static double probe_cpu_limit(const char *mountinfo, const char *cgroups)
{
	char dir[SG_PATH_MAX], mnt[SG_PATH_MAX], v[64], w[64];
	double best = 0;
	uint64_t q, per;

	if (probe_cgroup_dir(mountinfo, cgroups, "cpu", dir, mnt,
			     sizeof(dir))) {
		do {
			if (probe_read_at(dir, "cpu.cfs_quota_us", v,
					  sizeof(v)) &&
			    probe_u64(v, &q) &&
			    probe_read_at(dir, "cpu.cfs_period_us", w,
					  sizeof(w)) &&
			    probe_u64(w, &per))
				best = probe_cpu_min(best, q, per);
		} while (probe_parent(dir, mnt));
	}
	if (probe_cgroup_dir(mountinfo, cgroups, NULL, dir, mnt,
			     sizeof(dir))) {
		do {
			const char *sp = NULL;

			if (probe_read_at(dir, "cpu.max", v, sizeof(v)) &&
			    probe_u64(v, &q))
				sp = strchr(v, ' ');
			if (sp && probe_u64(sp + 1, &per))
				best = probe_cpu_min(best, q, per);
		} while (probe_parent(dir, mnt));
	}
	return best;
}

/*
 * Whether uid_map shows a user namespace: anything but the initial
 * namespace's identity map "0 0 4294967295" on a single line.
 */
static enum probe_tri probe_userns(void)
{
	char map[512];
	unsigned long long a, b, c;
	int used = 0;

	if (!probe_read_small("/proc/self/uid_map", map, sizeof(map)))
		return PROBE_UNKNOWN;
	if (sscanf(map, "%llu %llu %llu %n", &a, &b, &c, &used) != 3)
		return PROBE_UNKNOWN;
	return a == 0 && b == 0 && c == 4294967295ULL && map[used] == '\0'
		       ? PROBE_NO
		       : PROBE_YES;
}

/*
 * Whether PR_SET_CHILD_SUBREAPER takes effect here.  The process
 * supervisor relies on it to catch what a command setsid'd or
 * double-forked away; gVisor (release 20221219) refuses it for any process
 * but the container's init, and such escapes then outlive a stop.  The
 * probe is a process of its own that ends at once, so setting the flag on
 * it changes nothing else.
 */
static enum probe_tri probe_subreaper(void)
{
	int on = 0;

	if (prctl(PR_SET_CHILD_SUBREAPER, 1L, 0L, 0L, 0L) != 0)
		return PROBE_NO;
	if (prctl(PR_GET_CHILD_SUBREAPER, (unsigned long)&on, 0L, 0L, 0L) != 0)
		return PROBE_UNKNOWN;
	return on ? PROBE_YES : PROBE_NO;
}

/*
 * The first version-looking token of the first line: a run of digits and
 * dots with at least one dot ("go1.22.1" gives 1.22.1, while the "12" of
 * "g++-12" is passed over), else the first run of digits.  Written to v.
 */
static bool probe_version(const char *text, size_t len, char *v, size_t size)
{
	const char *eol = memchr(text, '\n', len);
	const char *end = eol ? eol : text + len;
	const char *first = NULL;
	size_t firstlen = 0;

	for (const char *p = text; p < end;) {
		const char *q = p;
		bool dotted = false;

		if (*p < '0' || *p > '9') {
			p++;
			continue;
		}
		while (q < end && ((*q >= '0' && *q <= '9') ||
				   (*q == '.' && q + 1 < end && q[1] >= '0' &&
				    q[1] <= '9'))) {
			if (*q == '.')
				dotted = true;
			q++;
		}
		if (dotted || !first) {
			first = p;
			firstlen = (size_t)(q - p);
			if (dotted)
				break;
		}
		p = q;
	}
	if (!first || firstlen + 1 > size)
		return false;
	memcpy(v, first, firstlen);
	v[firstlen] = '\0';
	return true;
}

/*
 * The environment the version commands get: enough to find and start
 * them, and never the caller's own variables (the gateway's may hold
 * credentials).  LC_ALL=C keeps the first line in a parseable language.
 */
static sg_err probe_env(struct sg_buf *store, char **envp)
{
	static const char *const pass[] = { "PATH", "HOME", "USER", "LOGNAME",
					    "TMPDIR" };
	size_t offs[sizeof(pass) / sizeof(pass[0]) + 1];
	size_t n = 0;
	sg_err rc;

	for (size_t i = 0; i < sizeof(pass) / sizeof(pass[0]); i++) {
		const char *v = getenv(pass[i]);

		if (!v && strcmp(pass[i], "PATH") == 0)
			v = "/usr/local/bin:/usr/bin:/bin";
		if (!v)
			continue;
		offs[n++] = store->len;
		rc = sg_buf_addf(store, "%s=%s", pass[i], v);
		if (rc)
			return rc;
		rc = sg_buf_addc(store, '\0');
		if (rc)
			return rc;
	}
	offs[n++] = store->len;
	rc = sg_buf_add(store, "LC_ALL=C", sizeof("LC_ALL=C"));
	if (rc)
		return rc;
	/* Pointers only now: the buffer may have moved while growing. */
	for (size_t i = 0; i < n; i++)
		envp[i] = store->p + offs[i];
	envp[n] = NULL;
	return SG_OK;
}

/*
 * Start one version command with stdout and stderr into a pipe, stdin
 * from /dev/null, in its own process group so that a hung one can be
 * killed with whatever it started.  An absent tool leaves pid 0.
 */
static void probe_spawn(const struct probe_tool *t, struct probe_run *r,
			char *const *envp)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, dfl;
	int p[2];

	r->pid = 0;
	r->fd = -1;
	if (pipe2(p, O_CLOEXEC) != 0)
		return;
	if (posix_spawn_file_actions_init(&fa) != 0)
		goto close_pipe;
	if (posix_spawnattr_init(&attr) != 0)
		goto free_fa;
	sigemptyset(&none);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGPIPE);
	if (posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY,
					     0) == 0 &&
	    posix_spawn_file_actions_adddup2(&fa, p[1], 1) == 0 &&
	    posix_spawn_file_actions_adddup2(&fa, p[1], 2) == 0 &&
	    posix_spawnattr_setpgroup(&attr, 0) == 0 &&
	    posix_spawnattr_setsigmask(&attr, &none) == 0 &&
	    posix_spawnattr_setsigdefault(&attr, &dfl) == 0 &&
	    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP |
						    POSIX_SPAWN_SETSIGMASK |
						    POSIX_SPAWN_SETSIGDEF) ==
		    0 &&
	    posix_spawnp(&r->pid, t->argv[0], &fa, &attr,
			 (char *const *)t->argv, envp) == 0) {
		r->fd = p[0];
		p[0] = -1;
	} else {
		r->pid = 0;
	}
	posix_spawnattr_destroy(&attr);
free_fa:
	posix_spawn_file_actions_destroy(&fa);
close_pipe:
	if (p[0] >= 0)
		close(p[0]);
	close(p[1]);
}

/* Read what is there; keep the head, drop the rest, close at EOF. */
static void probe_drain(struct probe_run *r)
{
	char sink[512];
	ssize_t n;

	if (r->len < sizeof(r->out) - 1)
		n = read(r->fd, r->out + r->len, sizeof(r->out) - 1 - r->len);
	else
		n = read(r->fd, sink, sizeof(sink));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		close(r->fd);
		r->fd = -1;
		return;
	}
	if (r->len < sizeof(r->out) - 1)
		r->len += (size_t)n;
	r->out[r->len] = '\0';
}

static void probe_reap(struct probe_run *r, int flags)
{
	int st;
	pid_t w;

	if (r->pid <= 0)
		return;
	do
		w = waitpid(r->pid, &st, flags);
	while (w < 0 && errno == EINTR);
	if (w == r->pid) {
		r->status = st;
		r->exited = true;
		r->pid = -1;
	} else if (w < 0) {
		r->pid = -1; /* not ours to wait for any more */
	}
}

/*
 * Run every version command at once and wait until each has exited with
 * its output at EOF, or the shared deadline passes; then kill and reap
 * what is left, so nothing outlives the probe.
 */
static void probe_toolchains(struct probe_run *runs, char *const *envp)
{
	int64_t deadline = sg_now_ms() + SG_PROBE_TOOL_MS;

	for (size_t i = 0; i < PROBE_NTOOLS; i++)
		probe_spawn(&probe_tools[i], &runs[i], envp);
	for (;;) {
		struct pollfd pfd[PROBE_NTOOLS];
		size_t map[PROBE_NTOOLS], n = 0;
		bool waiting = false;
		int64_t left = deadline - sg_now_ms();
		int timeout;

		for (size_t i = 0; i < PROBE_NTOOLS; i++) {
			if (runs[i].fd < 0) {
				probe_reap(&runs[i], WNOHANG);
				waiting |= runs[i].pid > 0;
				continue;
			}
			pfd[n].fd = runs[i].fd;
			pfd[n].events = POLLIN;
			map[n++] = i;
		}
		if ((n == 0 && !waiting) || left <= 0)
			break;
		/* Output done but not yet reaped: look again shortly. */
		timeout = (int)left;
		if (waiting && timeout > 2)
			timeout = 2;
		if (poll(pfd, (nfds_t)n, timeout) < 0 && errno != EINTR)
			break;
		for (size_t k = 0; k < n; k++)
			if (pfd[k].revents)
				probe_drain(&runs[map[k]]);
	}
	for (size_t i = 0; i < PROBE_NTOOLS; i++) {
		struct probe_run *r = &runs[i];

		if (r->pid <= 0)
			continue;
		/*
		 * A pipe still open means something in the group holds it.
		 * The leader is not reaped yet (only runs at EOF are), so its
		 * group id cannot have been reused: kill the group.
		 */
		if (r->fd >= 0) {
			close(r->fd);
			r->fd = -1;
			kill(-r->pid, SIGKILL);
		}
		probe_reap(r, WNOHANG);
		if (r->pid > 0) {
			kill(-r->pid, SIGKILL);
			kill(r->pid, SIGKILL);
			probe_reap(r, 0);
			r->exited = false; /* killed: no answer */
		}
	}
}

static sg_err probe_bool(struct sg_buf *out, const char *key, int *first,
			 enum probe_tri v)
{
	sg_err rc;

	if (v == PROBE_UNKNOWN)
		return SG_OK;
	rc = sg_jw_key(out, key, *first);
	*first = 0;
	return rc ? rc : sg_buf_adds(out, v == PROBE_YES ? "true" : "false");
}

/* ,"toolchains":{id:version...}: each run that answered with a version. */
static sg_err probe_write_toolchains(struct sg_buf *out, const struct probe_run *runs)
{
	sg_err rc = sg_buf_adds(out, ",\"toolchains\":{");
	int first = 1;

	for (size_t i = 0; !rc && i < PROBE_NTOOLS; i++) {
		char v[64];

		if (!runs[i].exited || !WIFEXITED(runs[i].status) ||
		    WEXITSTATUS(runs[i].status) != 0 ||
		    !probe_version(runs[i].out, runs[i].len, v, sizeof(v)))
			continue;
		rc = sg_jw_key(out, probe_tools[i].id, first);
		if (!rc)
			rc = sg_jw_str(out, v, strlen(v));
		first = 0;
	}
	return rc ? rc : sg_buf_addc(out, '}');
}

/*
 * Whether none of the host's files named opens from here: a refusal or an
 * absence counts as hidden, any other failure (out of descriptors, say)
 * leaves the fact unknown.  A FIFO among them does not block the open.
 */
static enum probe_tri probe_hidden(char *const *paths, int n)
{
	enum probe_tri r = n > 0 ? PROBE_YES : PROBE_UNKNOWN;

	for (int i = 0; i < n && r == PROBE_YES; i++) {
		int fd = open(paths[i], O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

		if (fd >= 0) {
			close(fd);
			r = PROBE_NO;
		} else if (errno != ENOENT && errno != EACCES && errno != EPERM &&
			   errno != ENOTDIR && errno != ELOOP) {
			r = PROBE_UNKNOWN;
		}
	}
	return r;
}

/* What /proc and the cgroup files say about this process (probe_observe). */
struct probe_facts {
	enum probe_tri contained, nnp, seccomp;
	uint64_t mem;  /* the memory limit in bytes, 0: none found */
	double cpu;    /* the CPU limit in CPUs, 0: none found */
};

/*
 * Observe the isolation facts and the cgroup's limits into f; scratch
 * holds each file read.  Whatever cannot be read stays unknown (or 0).
 */
static void probe_observe(struct sg_buf *scratch, struct probe_facts *f)
{
	struct sg_buf cgroups = SG_BUF_INIT(SG_PROBE_FILE_MAX);
	struct stat st;

	*f = (struct probe_facts){ .contained = PROBE_UNKNOWN, .nnp = PROBE_UNKNOWN,
				   .seccomp = PROBE_UNKNOWN };
	if (probe_read("/proc/self/status", scratch) == SG_OK) {
		const char *v;

		v = probe_field(scratch->p, "NSpid");
		if (v)
			f->contained = probe_words(v) > 1 ? PROBE_YES : PROBE_NO;
		v = probe_field(scratch->p, "NoNewPrivs");
		if (v)
			f->nnp = v[0] == '1' ? PROBE_YES : PROBE_NO;
		v = probe_field(scratch->p, "Seccomp");
		if (v)
			f->seccomp = v[0] != '0' ? PROBE_YES : PROBE_NO;
	}
	/* gVisor's status has no NoNewPrivs line; prctl tells everywhere. */
	if (f->nnp == PROBE_UNKNOWN) {
		int v = prctl(PR_GET_NO_NEW_PRIVS, 0L, 0L, 0L, 0L);

		if (v >= 0)
			f->nnp = v == 1 ? PROBE_YES : PROBE_NO;
	}
	/*
	 * NSpid lists our pid in each namespace from the one /proc was
	 * mounted for down to ours, so a container that mounted its own
	 * /proc shows a single entry.  The namespace's identity tells too:
	 * the initial pid namespace has a fixed inode number (a kernel
	 * constant since 3.8), and any other one is nested.
	 */
	if (stat("/proc/self/ns/pid", &st) == 0 &&
	    st.st_ino != PROBE_PID_INIT_INO)
		f->contained = PROBE_YES;
	if (probe_read("/proc/self/cgroup", &cgroups) == SG_OK &&
	    probe_read("/proc/self/mountinfo", scratch) == SG_OK) {
		f->mem = probe_memory_limit(scratch->p, cgroups.p);
		f->cpu = probe_cpu_limit(scratch->p, cgroups.p);
	}
	sg_buf_release(&cgroups);
}

/*
 * ,"landlock_abi", "confinement" and "isolation":{...}, its brace left
 * open.  The network is looked at only now, in scratch.
 */
static sg_err probe_write_isolation(struct sg_buf *out, struct sg_buf *scratch, int abi,
				    const struct probe_facts *f, enum probe_tri hidden)
{
	int first = 1;
	sg_err rc;

	/*
	 * How each permission mode is confined here (helper/confine.c):
	 * Landlock, or for standard without it a read-only / (each command
	 * checks the mounts again), or not at all: the mode is refused.
	 */
	rc = sg_buf_addf(out, ",\"landlock_abi\":%d,\"confinement\":{\"standard\":\"%s\","
			 "\"read_only\":\"%s\"},\"isolation\":{", abi > 0 ? abi : 0,
			 sg_confine_mechanism(true, abi), sg_confine_mechanism(false, abi));
	if (rc)
		return rc;
	rc = probe_bool(out, "process_contained", &first, f->contained);
	if (!rc)
		rc = probe_bool(out, "privilege_escalation_blocked", &first,
				f->nnp);
	if (!rc)
		rc = probe_bool(out, "syscalls_restricted", &first, f->seccomp);
	if (!rc)
		rc = probe_bool(out, "network_isolated", &first,
				probe_network_isolated(scratch));
	if (!rc)
		rc = probe_bool(out, "host_filesystem_restricted", &first, hidden);
	return rc;
}

/* ,"observed":{...}: what this process sees of itself, its limits and kernel. */
static sg_err probe_write_observed(struct sg_buf *out, const struct probe_facts *f)
{
	struct utsname u;
	int first;
	sg_err rc;

	rc = sg_buf_addf(out, ",\"observed\":{\"uid\":%lu",
			 (unsigned long)getuid());
	if (rc)
		return rc;
	first = 0;
	rc = probe_bool(out, "user_namespace", &first, probe_userns());
	if (!rc)
		rc = probe_bool(out, "child_subreaper", &first, probe_subreaper());
	if (rc)
		return rc;
	rc = f->mem ? sg_buf_addf(out, ",\"memory_limit_bytes\":%llu",
				  (unsigned long long)f->mem)
		    : sg_buf_adds(out, ",\"memory_limit_bytes\":null");
	if (rc)
		return rc;
	rc = f->cpu > 0 ? sg_buf_addf(out, ",\"cpu_limit\":%.4g", f->cpu)
			: sg_buf_adds(out, ",\"cpu_limit\":null");
	if (rc)
		return rc;
	if (uname(&u) == 0) {
		rc = sg_jw_key(out, "kernel", 0);
		if (!rc)
			rc = sg_jw_str(out, u.release, strlen(u.release));
		if (rc)
			return rc;
	}
	return sg_buf_addc(out, '}');
}

static sg_err probe_write(struct sg_buf *out, struct sg_buf *scratch,
			  const struct probe_run *runs, enum probe_tri hidden)
{
	struct probe_facts f;
	int abi;
	sg_err rc;

	probe_observe(scratch, &f);
	abi = sg_landlock_abi();
	rc = sg_reply_ok(out);
	if (!rc)
		rc = probe_write_isolation(out, scratch, abi, &f, hidden);
	/* Without runs the toolchains were not asked: no key, not an empty one. */
	if (!rc)
		rc = sg_buf_addc(out, '}');
	if (!rc && runs)
		rc = probe_write_toolchains(out, runs);
	if (!rc)
		rc = probe_write_observed(out, &f);
	if (!rc)
		rc = sg_reply_end(out);
	return rc;
}

int sg_helper_probe(int argc, char *const *argv, struct sg_buf *out)
{
	struct sg_buf scratch = SG_BUF_INIT(SG_PROBE_FILE_MAX);
	struct sg_buf envstore = SG_BUF_INIT(PROBE_ENV_MAX);
	struct sg_errinfo err = { 0 };
	struct probe_run *runs = NULL;
	char *envp[8], *hidden[SG_PROBE_HIDDEN_MAX];
	int nhidden = 0;
	bool toolchains = false;
	sg_err rc = SG_OK;

	/* argv[0] is the command word "probe"; then --toolchains and --hidden PATH pairs. */
	for (int i = 1; i < argc; i += 2) {
		if (strcmp(argv[i], "--toolchains") == 0) {
			toolchains = true;
			i--;
			continue;
		}
		if (strcmp(argv[i], "--hidden") != 0 || i + 1 >= argc ||
		    nhidden >= SG_PROBE_HIDDEN_MAX) {
			rc = sg_err_set(&err, SG_E_INVALID_ARGUMENT,
					"probe takes --toolchains and at most %d --hidden PATH "
					"(got %s)", SG_PROBE_HIDDEN_MAX, argv[i]);
			goto out;
		}
		hidden[nhidden++] = argv[i + 1];
	}
	runs = toolchains ? calloc(PROBE_NTOOLS, sizeof(*runs)) : NULL;
	if (toolchains && !runs) {
		rc = sg_err_set(&err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	rc = toolchains ? probe_env(&envstore, envp) : SG_OK;
	if (rc) {
		sg_err_set(&err, rc, "the environment is too large to pass on");
		goto out;
	}
	if (toolchains)
		probe_toolchains(runs, envp);
	rc = probe_write(out, &scratch, runs, probe_hidden(hidden, nhidden));
	if (rc)
		sg_err_set(&err, rc, "the probe reply does not fit");
out:
	if (rc)
		sg_reply_error(out, &err);
	free(runs);
	sg_buf_release(&scratch);
	sg_buf_release(&envstore);
	return 0;
}
