/*
 * confine.c - run a command under Landlock so that it can write only where
 * the request's permission mode allows (docs/protocol.md section 6.1).
 *
 * "standard": read and execute everywhere, write beneath the root (and the
 * --allow-write directories); "read_only": write nowhere.  In both modes
 * the character devices ordinary commands open for writing (/dev/null,
 * /dev/tty ...) stay writable as files.  Every filesystem right the kernel
 * knows is handled, so nothing is allowed by omission; a kernel older than
 * ABI 3 cannot handle truncation and is refused rather than used weaker.
 * From ABI 6 the command also cannot signal, or connect to an abstract
 * unix socket of, a process outside its domain.  "scope" is that scoping
 * alone, with no filesystem rule, plus nosuid.c's filter: the local
 * backend starts every command in it whatever its mode, since a background
 * process shares the host's pid namespace, a command with network the
 * host's abstract sockets, and every command the host's files
 * (adapters/local/local.c).
 *
 * With --git (or --exec-only PATH) the command may also execute nothing
 * but the named programs: read_only git gets EXECUTE only on git itself,
 * git's exec-path directory and the ELF interpreter, so a filter, textconv,
 * pager or hook its configuration names fails to start instead of running
 * (docs/security.md, "A read_only git runs no program the repository
 * names").  Reading the configuration first cannot promise that, since the
 * files may change between the check and the run.
 *
 * Where the kernel has no Landlock (gVisor implements none), "standard"
 * still runs when the file system itself keeps its writes in: / mounted
 * read-only, and every other mount the command could write beneath the
 * root or an --allow-write directory (confine_by_mounts; the docker
 * backend makes gVisor's containers so).  That is checked again at every
 * command, and nothing narrower than a mount can be: "read_only", which
 * must keep the writable workspace from the command, and --exec-only are
 * refused there.
 *
 * sg_confine_apply runs between fork() and exec() in the process
 * supervisor of a multi-threaded gateway, where another thread may hold
 * the allocator's lock: it uses only syscalls and stack buffers.
 */
/* _GNU_SOURCE: syscall() for Landlock and O_PATH are GNU/Linux APIs. */
#define _GNU_SOURCE

#include "helper/internal.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/limits.h"
#include "core/path.h"
#include "helper/landlock.h"

/* The oldest ABI that can refuse truncation (LANDLOCK_ACCESS_FS_TRUNCATE). */
#define CONFINE_MIN_ABI 3

/*
 * Devices commands write to as a matter of course; each is given file rights
 * only, so nothing can be created or removed in /dev.  /dev/pts is the
 * directory of terminals that /dev/ptmx hands out.
 */
static const char *const confine_devices[] = {
	"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx",
	"/dev/pts",  NULL,
};

/*
 * The ELF interpreters of the two architectures sg-helper is built for.
 * The kernel opens a dynamically linked program's interpreter with the
 * EXECUTE right checked, so a command that may execute only some programs
 * must be able to execute these too; a missing one is skipped.  The one a
 * program actually names (PT_INTERP: musl's, NixOS's ...) is added by
 * sg_helper_confine.
 */
static const char *const confine_loaders[] = {
	"/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1", NULL,
};

/*
 * Kernel file systems with no files a command stores data in: their
 * writable entries are the kernel's interfaces (/proc/self/..., ptys),
 * and Landlock's standard mode does not govern them either.
 */
static const char *const confine_pseudo_fs[] = {
	"proc", "sysfs", "devpts", "mqueue", "cgroup", "cgroup2", "securityfs",
	"debugfs", "tracefs", "bpf", "pstore", "fusectl", "configfs", "nsfs",
	NULL,
};

/* One line of /proc/self/mountinfo at most (a mount point is a path). */
#define CONFINE_MOUNT_LINE (2 * SG_PATH_MAX)

/* A bounded message under construction; always terminated. */
struct confine_msg {
	char *p;
	size_t cap, len;
};

static void msg_add(struct confine_msg *m, const char *s)
{
	if (m->cap == 0)
		return;
	while (*s && m->len + 1 < m->cap)
		m->p[m->len++] = *s++;
	m->p[m->len] = '\0';
}

static void msg_add_int(struct confine_msg *m, long v)
{
	char digits[24];
	size_t n = sizeof(digits);
	unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;

	digits[--n] = '\0';
	do {
		digits[--n] = (char)('0' + u % 10);
		u /= 10;
	} while (u && n > 1);
	if (v < 0)
		digits[--n] = '-';
	msg_add(m, digits + n);
}

/*
 * strerror() may translate through gettext and allocate, which is not
 * allowed here; the causes worth naming get a fixed text.
 */
static void msg_add_errno(struct confine_msg *m, int e)
{
	switch (e) {
	case ENOENT: msg_add(m, "it does not exist"); break;
	case EACCES: msg_add(m, "permission denied"); break;
	case ENOTDIR: msg_add(m, "a component is not a directory"); break;
	case ELOOP: msg_add(m, "too many symbolic links"); break;
	case ENAMETOOLONG: msg_add(m, "the name is too long"); break;
	case EPERM: msg_add(m, "operation not permitted"); break;
	case EINVAL: msg_add(m, "invalid argument"); break;
	case ENOMEM: msg_add(m, "out of memory"); break;
	case E2BIG: msg_add(m, "too many rules"); break;
	default:
		msg_add(m, "errno ");
		msg_add_int(m, e);
		break;
	}
}

/*
 * Allow `access` beneath path.  A missing path is skipped when optional.
 * On a file (not a directory) only the file rights are kept, since the
 * kernel refuses directory rights there.
 */
static int confine_rule(int ruleset, const char *path, uint64_t access,
			bool optional, struct confine_msg *m)
{
	struct landlock_path_beneath_attr pb;
	struct stat st;
	int fd, rc = -1;

	fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		if (optional && (errno == ENOENT || errno == ENOTDIR))
			return 0;
		msg_add(m, "cannot open ");
		msg_add(m, path);
		msg_add(m, " to confine the command: ");
		msg_add_errno(m, errno);
		return -1;
	}
	if (fstat(fd, &st) != 0) {
		msg_add(m, "cannot inspect ");
		msg_add(m, path);
		msg_add(m, " to confine the command: ");
		msg_add_errno(m, errno);
		goto out;
	}
	if (!S_ISDIR(st.st_mode))
		access &= SG_LANDLOCK_FILE_RIGHTS;
	if (access == 0) {
		rc = 0;
		goto out;
	}
	memset(&pb, 0, sizeof(pb));
	pb.allowed_access = access;
	pb.parent_fd = fd;
	if (sg_landlock_add_path(ruleset, &pb) != 0) {
		msg_add(m, "cannot add the Landlock rule for ");
		msg_add(m, path);
		msg_add(m, ": ");
		msg_add_errno(m, errno);
		goto out;
	}
	rc = 0;
out:
	close(fd);
	return rc;
}

/*
 * no_new_privs: 0, or -1 with m.  Without it an unprivileged process may
 * not restrict itself, and a setuid program could otherwise shed the
 * ruleset (or, confined by the mounts, become a user who may write more).
 */
static int confine_restrict_nnp(struct confine_msg *m)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L) != 0) {
		msg_add(m, "cannot set no_new_privs: ");
		msg_add_errno(m, errno);
		return -1;
	}
	return 0;
}

/* Enforce ruleset on this process, no_new_privs first: 0, or -1 with m. */
static int confine_restrict(int ruleset, struct confine_msg *m)
{
	if (confine_restrict_nnp(m) != 0)
		return -1;
	if (sg_landlock_restrict_self(ruleset) != 0) {
		msg_add(m, "cannot enforce the Landlock ruleset: ");
		msg_add_errno(m, errno);
		return -1;
	}
	return 0;
}

/* mountinfo's octal escapes (\040 for a space ...) undone in place. */
static void confine_unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

/* One mount of mountinfo: its mount point (unescaped), options and type. */
struct confine_mount {
	const char *at, *opts, *fs;
};

/* Split a mountinfo line into mt; false for a line without those fields. */
static bool confine_mount_parse(char *line, struct confine_mount *mt)
{
	char *f[6], *sep = strstr(line, " - "), *end;
	int n = 0;

	if (!sep)
		return false;
	*sep = '\0';
	mt->fs = sep + 3;
	if ((end = strchr(sep + 3, ' ')))
		*end = '\0';
	for (char *p = line; n < 6 && p; n++) {
		f[n] = p;
		if ((p = strchr(p, ' ')))
			*p++ = '\0';
	}
	if (n < 6)
		return false;
	confine_unescape(f[4]);
	mt->at = f[4];
	mt->opts = f[5];
	return true;
}

static bool confine_mount_rw(const struct confine_mount *mt)
{
	return strncmp(mt->opts, "rw", 2) == 0 && (mt->opts[2] == '\0' || mt->opts[2] == ',');
}

/*
 * Call fn on every mount of /proc/self/mountinfo, in order, until it
 * returns nonzero: that, 0 after the last, -1 when the file cannot be
 * read whole.  In pieces into stack buffers, since it runs between fork
 * and exec.
 */
static int confine_mounts_each(int (*fn)(const struct confine_mount *mt, void *ctx), void *ctx)
{
	char buf[1024], line[CONFINE_MOUNT_LINE];
	struct confine_mount mt;
	size_t len = 0;
	ssize_t got = 0;
	int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -1;
	while (rc == 0 && (got = read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; rc == 0 && i < got; i++) {
			if (buf[i] != '\n' && len + 1 < sizeof(line)) {
				line[len++] = buf[i];
				continue;
			}
			/* A line too long for a path is no mount we can judge. */
			line[len] = '\0';
			len = 0;
			if (buf[i] != '\n')
				rc = -1;
			else if (confine_mount_parse(line, &mt))
				rc = fn(&mt, ctx);
		}
	}
	close(fd);
	return rc == 0 && (got < 0 || len > 0) ? -1 : rc;
}

/* What confine_by_mounts looks for, and found. */
struct confine_scan {
	const char *root;
	const char *const *allow;
	bool root_ro;           /* the last mount at / is read-only */
	struct confine_msg *m;
};

/*
 * One mount: 0 when it keeps standard mode's promise (read-only, a kernel
 * file system, beneath root or an allowed directory, or its top not
 * writable to this process: what lies below was made by the runtime, as
 * root), else 1 with m naming it.  / is judged after the last mount at /.
 */
static int confine_mount_judge(const struct confine_mount *mt, void *ctx)
{
	struct confine_scan *sc = ctx;

	if (strcmp(mt->at, "/") == 0) {
		sc->root_ro = !confine_mount_rw(mt);
		return 0;
	}
	if (!sc->m || !confine_mount_rw(mt))
		return 0;
	for (size_t i = 0; confine_pseudo_fs[i]; i++)
		if (strcmp(mt->fs, confine_pseudo_fs[i]) == 0)
			return 0;
	if (sg_path_under(mt->at, sc->root))
		return 0;
	for (size_t i = 0; sc->allow && sc->allow[i]; i++)
		if (sg_path_under(mt->at, sc->allow[i]))
			return 0;
	if (access(mt->at, W_OK) != 0)
		return 0;
	msg_add(sc->m, "Landlock is not available in this kernel and ");
	msg_add(sc->m, mt->at);
	msg_add(sc->m, " is writable outside the workspace, so a standard command cannot be "
		       "confined");
	return 1;
}

/* Is / mounted read-only (mountinfo: gVisor's statvfs does not say)? */
static bool confine_root_read_only(void)
{
	struct confine_scan sc = { 0 };

	return confine_mounts_each(confine_mount_judge, &sc) == 0 && sc.root_ro;
}

const char *sg_confine_mechanism(bool standard, int abi)
{
	if (abi >= CONFINE_MIN_ABI)
		return "landlock";
	if (standard && abi < 0 && confine_root_read_only())
		return "read_only_root";
	return "refused";
}

/*
 * Without Landlock: does the file system confine a standard command
 * (see the top of the file)?  0, or -1 with m.
 */
static int confine_by_mounts(const char *root, const char *const *allow,
			     struct confine_msg *m)
{
	struct confine_scan sc = { .root = root, .allow = allow, .m = m };
	int rc = confine_mounts_each(confine_mount_judge, &sc);

	if (rc < 0)
		msg_add(m, "Landlock is not available in this kernel and the mounts cannot be "
			   "read, so a standard command cannot be confined");
	else if (rc == 0 && !sc.root_ro)
		msg_add(m, "Landlock is not available in this kernel and / is writable, so "
			   "a standard command cannot be confined");
	return rc == 0 && sc.root_ro ? 0 : -1;
}

/*
 * Without Landlock (abi < 0, errno kept) or too old a one: standard mode
 * confined by the mounts, else a refusal naming the mode.
 */
static int confine_without_landlock(bool standard, int abi, int e, const char *root,
				    const char *const *allow_write,
				    const char *const *exec_only, struct confine_msg *m)
{
	if (standard && !exec_only && abi < 0)
		return confine_by_mounts(root, allow_write, m) ||
		       confine_restrict_nnp(m);
	if (!standard)
		msg_add(m, "read_only mode needs Landlock: ");
	if (abi < 0 && e == EOPNOTSUPP) {
		msg_add(m, "Landlock is disabled in this kernel, so commands cannot be confined");
	} else if (abi < 0) {
		msg_add(m, "Landlock is not available in this kernel");
	} else {
		msg_add(m, "Landlock ABI ");
		msg_add_int(m, CONFINE_MIN_ABI);
		msg_add(m, " or newer is required to confine commands; this kernel has ABI ");
		msg_add_int(m, abi);
	}
	return -1;
}

int sg_confine_scope_domain(char *msg, size_t msglen)
{
	struct confine_msg m = { .p = msg, .cap = msglen, .len = 0 };
	struct sg_landlock_attr attr;
	int ruleset = -1, rc = -1;

	/* Before ABI 6 there is no scope (docs/security.md, "Left open"). */
	if (sg_landlock_abi() < 6)
		return 0;
	/* No filesystem right is handled: the domain only scopes. */
	memset(&attr, 0, sizeof(attr));
	attr.scoped = LANDLOCK_SCOPE_SIGNAL | LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET;
	if ((ruleset = sg_landlock_create_ruleset(&attr)) < 0) {
		msg_add(&m, "cannot create a Landlock ruleset: ");
		msg_add_errno(&m, errno);
		goto out;
	}
	if (confine_restrict(ruleset, &m) != 0)
		goto out;
	rc = 0;
out:
	if (ruleset >= 0)
		close(ruleset);
	return rc;
}

int sg_confine_scope(char *msg, size_t msglen)
{
	if (sg_nosuid_apply(msg, msglen) != 0)
		return -1;
	return sg_confine_scope_domain(msg, msglen);
}

int sg_confine_apply(const char *mode, const char *root,
		     const char *const *allow_write, char *msg, size_t msglen)
{
	return sg_confine_apply_exec(mode, root, allow_write, NULL, msg,
				     msglen);
}

/*
 * The rules of a Landlock domain that handles handled: read everywhere,
 * execute everywhere or (exec_only) only the programs named and the
 * loaders, the usual devices as files, and with standard every right
 * beneath root and the allow_write directories.  -1 with m said on a
 * failure.
 */
static int confine_rules(int ruleset, uint64_t handled, bool standard, const char *root,
			 const char *const *allow_write, const char *const *exec_only,
			 struct confine_msg *m)
{
	uint64_t dev_access, run, noexec;

	/*
	 * With exec_only, no rule but the programs' own grants EXECUTE, so
	 * the kernel refuses execve() of anything else, whatever its path.
	 */
	noexec = exec_only ? LANDLOCK_ACCESS_FS_EXECUTE : 0;
	if (confine_rule(ruleset, "/", SG_LANDLOCK_READ & handled & ~noexec,
			 false, m))
		return -1;
	run = SG_LANDLOCK_READ & handled;
	for (size_t i = 0; exec_only && exec_only[i]; i++)
		if (confine_rule(ruleset, exec_only[i], run, true, m))
			return -1;
	for (size_t i = 0; exec_only && confine_loaders[i]; i++)
		if (confine_rule(ruleset, confine_loaders[i], run, true, m))
			return -1;
	dev_access = (LANDLOCK_ACCESS_FS_READ_FILE |
		      LANDLOCK_ACCESS_FS_WRITE_FILE |
		      LANDLOCK_ACCESS_FS_TRUNCATE |
		      LANDLOCK_ACCESS_FS_IOCTL_DEV) & handled;
	for (size_t i = 0; confine_devices[i]; i++)
		if (confine_rule(ruleset, confine_devices[i], dev_access, true,
				 m))
			return -1;
	if (standard) {
		if (confine_rule(ruleset, root, handled & ~noexec, false, m))
			return -1;
		for (size_t i = 0; allow_write && allow_write[i]; i++)
			if (confine_rule(ruleset, allow_write[i],
					 handled & ~noexec, true, m))
				return -1;
	}
	return 0;
}

int sg_confine_apply_exec(const char *mode, const char *root,
			  const char *const *allow_write,
			  const char *const *exec_only, char *msg,
			  size_t msglen)
{
	struct confine_msg m = { .p = msg, .cap = msglen, .len = 0 };
	struct sg_landlock_attr attr;
	uint64_t handled;
	bool standard;
	int abi, ruleset = -1, rc = -1;

	if (msglen)
		msg[0] = '\0';
	if (mode && strcmp(mode, "standard") == 0) {
		standard = true;
	} else if (mode && strcmp(mode, "read_only") == 0) {
		standard = false;
	} else {
		msg_add(&m, "the confinement mode must be standard or "
			    "read_only");
		goto out;
	}
	if (standard && (!root || !root[0])) {
		msg_add(&m, "standard confinement needs the workspace root");
		goto out;
	}

	abi = sg_landlock_abi();
	if (abi < CONFINE_MIN_ABI) {
		rc = confine_without_landlock(standard, abi, errno, root, allow_write,
					      exec_only, &m);
		goto out;
	}

	handled = sg_landlock_fs_rights(abi);
	memset(&attr, 0, sizeof(attr));
	attr.handled_access_fs = handled;
	/*
	 * From ABI 6, signals and abstract unix sockets stay inside the
	 * domain too: a confined command (a background one shares the
	 * host's pid and network namespaces) must not signal or talk to
	 * processes outside its sandbox, sandgate's included.
	 */
	if (abi >= 6)
		attr.scoped = LANDLOCK_SCOPE_SIGNAL | LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET;
	ruleset = sg_landlock_create_ruleset(&attr);
	if (ruleset < 0) {
		msg_add(&m, "cannot create a Landlock ruleset: ");
		msg_add_errno(&m, errno);
		goto out;
	}
	if (confine_rules(ruleset, handled, standard, root, allow_write, exec_only, &m) != 0 ||
	    confine_restrict(ruleset, &m) != 0)
		goto out;
	rc = 0;
out:
	if (ruleset >= 0)
		close(ruleset);
	return rc;
}

/*
 * What a search program needs besides the tree it reads: its own binary
 * and the dynamic loader's files.  Reading and mapping them is harmless;
 * listing them is not allowed, so a walk cannot wander there.
 */
static const char *const reader_system[] = {
	"/lib", "/lib32", "/lib64", "/usr/lib", "/usr/lib32", "/usr/lib64",
	"/usr/local/lib", "/etc/ld.so.cache", NULL,
};

/* Add a rule for fd (borrowed), keeping only the file rights on a file. */
static int reader_rule(int ruleset, int fd, uint64_t access)
{
	struct landlock_path_beneath_attr pb;
	struct stat st;

	if (fstat(fd, &st) != 0)
		return -1;
	if (!S_ISDIR(st.st_mode))
		access &= SG_LANDLOCK_FILE_RIGHTS;
	memset(&pb, 0, sizeof(pb));
	pb.allowed_access = access;
	pb.parent_fd = fd;
	return sg_landlock_add_path(ruleset, &pb);
}

/* The ruleset of sg_confine_spawn_reader(), or -1 with errno. */
static int reader_ruleset(const char *prog, int dirfd)
{
	const uint64_t rd = LANDLOCK_ACCESS_FS_READ_FILE |
			    LANDLOCK_ACCESS_FS_READ_DIR;
	const uint64_t run = LANDLOCK_ACCESS_FS_READ_FILE |
			     LANDLOCK_ACCESS_FS_EXECUTE;
	struct sg_landlock_attr attr;
	int ruleset, fd, e;

	if (sg_landlock_abi() < 1)
		return -1;
	memset(&attr, 0, sizeof(attr));
	attr.handled_access_fs = SG_LANDLOCK_READ;
	ruleset = sg_landlock_create_ruleset(&attr);
	if (ruleset < 0)
		return -1;
	if (reader_rule(ruleset, dirfd, rd) != 0)
		goto fail;
	fd = open(prog, O_PATH | O_CLOEXEC);
	if (fd < 0 || reader_rule(ruleset, fd, run) != 0) {
		if (fd >= 0)
			close(fd);
		goto fail;
	}
	close(fd);
	for (size_t i = 0; reader_system[i]; i++) {
		fd = open(reader_system[i], O_PATH | O_CLOEXEC);
		if (fd < 0)
			continue;
		e = reader_rule(ruleset, fd, run);
		close(fd);
		if (e != 0)
			goto fail;
	}
	return ruleset;
fail:
	e = errno;
	close(ruleset);
	errno = e;
	return -1;
}

bool sg_confine_reader_ok(void)
{
	return sg_landlock_abi() >= 1;
}

/*
 * The search program's own bounds, set between fork and exec: what it may
 * allocate (heap and anonymous maps; the files it maps to read are not
 * counted), the CPU it may use in all its threads, and no core file, which
 * would land in the directory it searches.  The caller's deadline kills it
 * sooner; these hold even for a search nobody waits for any more.
 */
static int reader_limits(void)
{
	const struct rlimit mem = { SG_GREP_ENGINE_MEM, SG_GREP_ENGINE_MEM };
	const struct rlimit cpu = { SG_GREP_ENGINE_CPU_S, SG_GREP_ENGINE_CPU_S + 1 };
	const struct rlimit core = { 0, 0 };

	if (setrlimit(RLIMIT_DATA, &mem) != 0 || setrlimit(RLIMIT_CPU, &cpu) != 0 ||
	    setrlimit(RLIMIT_CORE, &core) != 0)
		return -1;
	return 0;
}

/*
 * The search program runs as the calling thread's file system ids.  An
 * in-process step acts as the environment's user by changing only those
 * (setfsuid(2), per thread), and exec would give the program the process's
 * own ids back (root's, under a root gateway), so that it read what the
 * step may not.  Here it becomes that user wholly (sg_helper_become, safe
 * between fork and exec).
 */
static int reader_become_fs_user(void)
{
	long uid = syscall(SYS_setfsuid, -1L), gid = syscall(SYS_setfsgid, -1L);

	/*
	 * gVisor (20221219) has no setfsuid(2) (ENOSYS): nothing can have
	 * changed the ids there, so they are the effective ones.
	 */
	if (uid == -1 || gid == -1 || ((uid_t)uid == geteuid() && (gid_t)gid == getegid()))
		return 0;
	return sg_helper_become((uid_t)uid, (gid_t)gid);
}

pid_t sg_confine_spawn_reader(const char *prog, char *const *av, int dirfd,
			      int outfd, int errfd)
{
	static const char msg[] = "sg-helper: the search program cannot run "
				  "(confined to the workspace where the "
				  "kernel has Landlock)\n";
	int ruleset = reader_ruleset(prog, dirfd), null = -1, e;
	struct sigaction dfl;
	sigset_t none;
	pid_t pid = -1;

	if (ruleset < 0 && errno != ENOSYS && errno != EOPNOTSUPP)
		return -1;
	null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null < 0)
		goto out;
	sigemptyset(&none);
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	pid = fork();
	if (pid == 0) {
		/*
		 * Between fork() and exec() in a threaded gateway: syscalls
		 * only.  A gateway that ignores SIGPIPE must not pass it on.
		 */
		sigaction(SIGPIPE, &dfl, NULL);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (dup2(null, 0) < 0 || dup2(outfd, 1) < 0 ||
		    dup2(errfd, 2) < 0 || reader_become_fs_user() != 0 ||
		    fchdir(dirfd) != 0 || reader_limits() != 0 ||
		    prctl(PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L) != 0 ||
		    (ruleset >= 0 && sg_landlock_restrict_self(ruleset) != 0))
			_exit(126);
		execve(prog, av, environ);
		(void)!write(2, msg, sizeof(msg) - 1);
		_exit(127);
	}
out:
	e = errno;
	if (null >= 0)
		close(null);
	if (ruleset >= 0)
		close(ruleset);
	errno = e;
	return pid;
}

/* The command could not be confined, so it must not run: status 126. */
static int confine_fail(const char *sentence)
{
	fprintf(stderr, "sg-helper: %s\n", sentence);
	return 126;
}

/*
 * The path execvp() would run for name, into out: name itself when it has
 * a slash, else the first executable regular file of that name in an
 * absolute directory of $PATH.  Empty and relative entries, which mean the
 * working directory (the workspace), are skipped: the program that is
 * allowed to execute must not be one the workspace supplies.  The command
 * is then started from this very path, so the rule and the execve() name
 * the same file.
 */
static int confine_which(const char *name, char *out, size_t len)
{
	const char *path = getenv("PATH");
	int e;

	if (strchr(name, '/')) {
		if (strlen(name) >= len) {
			errno = ENAMETOOLONG;
			return -1;
		}
		memcpy(out, name, strlen(name) + 1);
		return 0;
	}
	e = sg_program_find(name, path && *path ? path : "/usr/local/bin:/bin:/usr/bin", out, len);
	if (e)
		errno = ENOENT;
	return e ? -1 : 0;
}

/*
 * The ELF interpreter prog names (its PT_INTERP), into out: the kernel
 * opens it to start prog, with the EXECUTE right checked.  -1 when prog
 * names none (a static program) or is not a 64-bit ELF file of this
 * machine's byte order, the only kind sg-helper runs on.
 */
static int confine_interp(const char *prog, char *out, size_t len)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	int fd = open(prog, O_RDONLY | O_CLOEXEC), rc = -1;

	if (fd < 0)
		return -1;
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(ph))
		goto out;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		off_t at = (off_t)(eh.e_phoff + (uint64_t)i * sizeof(ph));

		if (pread(fd, &ph, sizeof(ph), at) != (ssize_t)sizeof(ph))
			goto out;
		if (ph.p_type != PT_INTERP)
			continue;
		if (ph.p_filesz < 2 || ph.p_filesz > len ||
		    pread(fd, out, ph.p_filesz, (off_t)ph.p_offset) !=
			    (ssize_t)ph.p_filesz ||
		    out[ph.p_filesz - 1] != '\0' || out[0] != '/')
			goto out;
		rc = 0;
		break;
	}
out:
	close(fd);
	return rc;
}

/*
 * git's exec-path, the directory of its own helper programs, into out:
 * `git --exec-path` prints $GIT_EXEC_PATH or the built-in directory and
 * reads no configuration.  It runs under the rules the command will get,
 * with only git itself executable, so even this step starts nothing else.
 * On failure, a sentence in msg.
 */
static int confine_git_exec_path(const char *git, const char *mode,
				 const char *root, const char *const *allow,
				 const char *const *self, char *out,
				 size_t len, char *msg, size_t msglen)
{
	char *const av[] = { (char *)"git", (char *)"--exec-path", NULL };
	size_t got = 0;
	int p[2], st = 0, rc = -1;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) != 0) {
		snprintf(msg, msglen, "cannot ask git for its exec-path: %s",
			 strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		char why[SG_ERR_MSG];

		if (dup2(p[1], 1) < 0)
			_exit(126);
		if (sg_confine_apply_exec(mode, root, allow, self, why,
					  sizeof(why)) != 0) {
			fprintf(stderr, "sg-helper: %s\n", why);
			_exit(126);
		}
		execv(git, av);
		_exit(127);
	}
	close(p[1]);
	if (pid < 0) {
		snprintf(msg, msglen, "cannot ask git for its exec-path: %s",
			 strerror(errno));
		close(p[0]);
		return -1;
	}
	while (got + 1 < len) {
		ssize_t n = read(p[0], out + got, len - 1 - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(p[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	out[got] = '\0';
	while (got > 0 && out[got - 1] == '\n')
		out[--got] = '\0';
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || out[0] != '/' ||
	    strchr(out, '\n'))
		snprintf(msg, msglen,
			 "cannot learn git's exec-path from `%.80s --exec-path` "
			 "(%s %d), so git cannot be confined to its own programs",
			 git, WIFEXITED(st) ? "exit" : "signal",
			 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	else
		rc = 0;
	return rc;
}

/*
 * Whether directory a contains b or b contains a (or either cannot be
 * resolved, which counts as overlapping: the caller then refuses).
 */
static bool confine_overlaps(const char *a, const char *b)
{
	char ra[PATH_MAX], rb[PATH_MAX];
	size_t na, nb, n;

	if (!realpath(a, ra) || !realpath(b, rb))
		return true;
	na = strlen(ra);
	nb = strlen(rb);
	n = na < nb ? na : nb;
	if (strcmp(ra, "/") == 0 || strcmp(rb, "/") == 0)
		return true;
	return strncmp(ra, rb, n) == 0 &&
	       (na == nb || (na < nb ? rb[n] : ra[n]) == '/');
}

/* What `sg-helper confine` is asked to run, and its scratch space. */
struct confine_cmd {
	const char *mode, *root;
	const char *allow[SG_ARGS_MAX + 1];
	/* --exec-only's, the command, git's exec-path, the interpreter. */
	const char *exec[SG_ARGS_MAX + 4];
	int nallow, nexec;
	bool git;
	bool only; /* the command may execute only the programs in exec */
	char msg[SG_ERR_MSG], prog[PATH_MAX], exec_path[PATH_MAX];
	char interp[PATH_MAX];
};

/* The options into k: --mode, --root, --git and the repeatable ones. */
static void confine_options(struct sg_args *a, struct confine_cmd *k)
{
	k->mode = sg_args_str(a, "mode", NULL);
	k->root = sg_args_str(a, "root", NULL);
	k->git = sg_args_flag(a, "git");
	/*
	 * sg_args keeps every occurrence in opt[] but answers only the last
	 * one, while --allow-write and --exec-only are repeatable: collect
	 * them all here.
	 */
	for (int i = 0; i < a->nopt; i++) {
		if (strcmp(a->opt[i].name, "allow-write") == 0) {
			a->opt[i].used = true;
			k->allow[k->nallow++] = a->opt[i].value;
		} else if (strcmp(a->opt[i].name, "exec-only") == 0) {
			a->opt[i].used = true;
			k->exec[k->nexec++] = a->opt[i].value;
		}
	}
	k->allow[k->nallow] = NULL;
	k->only = k->git || k->nexec > 0;
}

/* --mode scope: the scoping alone, then the command; its status on failure. */
static int confine_scoped(const struct sg_args *a, struct confine_cmd *k)
{
	if (k->root || k->nallow || k->only || a->npos > 0 || !a->rest || a->nrest < 1)
		return confine_fail("confine --mode scope takes only the "
				    "command, after --");
	if (sg_confine_scope(k->msg, sizeof(k->msg)) != 0)
		return confine_fail(k->msg);
	execvp(a->rest[0], a->rest);
	fprintf(stderr, "sg-helper: %s: %s\n", a->rest[0], strerror(errno));
	return 127;
}

/*
 * The standard and read_only modes' arguments: 0 when they are whole,
 * else the failure's status.  Checked before --git asks git anything
 * under the mode's rules.
 */
static int confine_check(const struct sg_args *a, struct confine_cmd *k)
{
	if (strcmp(k->mode, "standard") != 0 && strcmp(k->mode, "read_only") != 0)
		return confine_fail("the confinement mode must be standard or "
				    "read_only");
	if (!k->root)
		return confine_fail("confine needs --root");
	if (a->npos > 0) {
		snprintf(k->msg, sizeof(k->msg),
			 "unexpected argument %s: the command goes after --",
			 a->pos[0]);
		return confine_fail(k->msg);
	}
	if (!a->rest || a->nrest < 1)
		return confine_fail("confine needs the command after --");
	return 0;
}

/*
 * With --git or --exec-only: the command itself must be executable to
 * start at all, and so must the interpreter the kernel loads it with;
 * both join k->exec.  0, or 127 when the command is not found.
 */
static int confine_programs(const struct sg_args *a, struct confine_cmd *k)
{
	if (confine_which(a->rest[0], k->prog, sizeof(k->prog)) != 0) {
		fprintf(stderr, "sg-helper: %s: %s\n", a->rest[0],
			strerror(errno));
		return 127;
	}
	k->exec[k->nexec++] = k->prog;
	if (confine_interp(k->prog, k->interp, sizeof(k->interp)) == 0)
		k->exec[k->nexec++] = k->interp;
	k->exec[k->nexec] = NULL;
	return 0;
}

/* --git: git's exec-path joins k->exec; 0, or the failure's status. */
static int confine_git(struct confine_cmd *k)
{
	if (confine_git_exec_path(k->prog, k->mode, k->root, k->allow, k->exec,
				  k->exec_path, sizeof(k->exec_path), k->msg,
				  sizeof(k->msg)) != 0)
		return confine_fail(k->msg);
	/*
	 * Everything beneath the exec-path becomes executable: a
	 * GIT_EXEC_PATH of / or of the workspace would undo the rule.
	 */
	if (confine_overlaps(k->exec_path, k->root))
		return confine_fail("git's exec-path contains the "
				    "workspace or lies inside it, so "
				    "git cannot be confined to its own "
				    "programs");
	k->exec[k->nexec++] = k->exec_path;
	k->exec[k->nexec] = NULL;
	return 0;
}

int sg_helper_confine(int argc, char *const *argv)
{
	struct sg_errinfo err = { 0 };
	struct confine_cmd k = { 0 };
	struct sg_args a;
	int rc;

	/* argv[0] is the command word "confine". */
	if (argc < 1)
		return confine_fail("confine needs its arguments");
	if (sg_args_parse(&a, argc - 1, argv + 1, "git", &err))
		return confine_fail(err.msg);
	confine_options(&a, &k);
	if (sg_args_unused(&a, &err))
		return confine_fail(err.msg);
	if (!k.mode)
		return confine_fail("confine needs --mode standard, read_only "
				    "or scope");
	if (strcmp(k.mode, "scope") == 0)
		return confine_scoped(&a, &k);
	rc = confine_check(&a, &k);
	if (!rc && k.only)
		rc = confine_programs(&a, &k);
	if (!rc && k.git)
		rc = confine_git(&k);
	if (rc)
		return rc;
	if (sg_confine_apply_exec(k.mode, k.root, k.allow, k.only ? k.exec : NULL, k.msg,
				  sizeof(k.msg)) != 0)
		return confine_fail(k.msg);
	if (k.only)
		execv(k.prog, a.rest);
	else
		execvp(a.rest[0], a.rest);
	fprintf(stderr, "sg-helper: %s: %s\n", a.rest[0], strerror(errno));
	return 127;
}
