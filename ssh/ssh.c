/*
 * ssh.c - the ssh backend: environments in a directory on a host that the
 * user can already reach with OpenSSH.
 *
 * Transport.  The OpenSSH `ssh` client installed on this host, argv only, never a local shell.
 * provision() opens one multiplexed master connection per environment
 * (`ssh -M -N -f`, its socket under the state dir) and every later call
 * rides on it; teardown() closes it.  Host keys are always checked
 * strictly (StrictHostKeyChecking=yes, BatchMode=yes) against the
 * profile's known_hosts_file or the user's own files; an unknown or
 * changed key fails with a sentence naming the file to fix.  Every
 * transport failure is SG_E_UNAVAILABLE; nothing ever falls back to
 * running here.  The master is started with ControlPersist set to the
 * profile's lifetime, so a gateway that dies without teardown leaves a
 * master that exits once idle; an exec that finds the master gone opens
 * a new one, with the same strict checks, before it starts anything.
 *
 * Remote layout (README.md has the picture).  The environment is
 * <workspace>/<identity slug>/ on the host (per identity, so shared
 * sessions meet in it): workspace/ holds the files, ctl/ is env->ctl_dir
 * (proc/, home/, tmp/), run/ holds the per-exec pid files below, leases/
 * one file per attached session, env.json the marker `sandgate envs`
 * lists, and `expires` the idle deadline a kept, non-persistent
 * environment is given when its last session detaches.  sg-helper is
 * installed once per user and version (adapters/install.h: one session,
 * the program on stdin) to ~/.cache/sandgate/sg-helper-<sha256>, verified
 * with sha256 on the host before it is renamed into place, and found there
 * by the next provision.
 *
 * Where commands see the files.  Commands must see the workspace at
 * binding.root.  When root is the workspace directory itself nothing more
 * is needed.  Otherwise each command runs in a private mount namespace in
 * which workspace/ is bind-mounted on root (uid 0: a mount namespace;
 * other users: an unprivileged user namespace, nested once more so the
 * command keeps its own uid; sg-helper job makes them), and ctl/tmp is
 * mounted on /tmp unless the environment is itself under /tmp.  network
 * "none" adds a network namespace;
 * cpus and memory_mb become cgroup limits where the login user can write
 * a cgroup hierarchy.  Each of these is observed on the host at provision
 * and refused, naming the field, when the host does not allow it.
 *
 * One exec, one ssh session: `exec <sg-helper> job --tie --spec-stdin
 * --dir <run>/<token> --mark <random> [--bind files --bind-to root]
 * [--netns] [--cgroups ...]` (helper/job.c), the remote supervisor
 * the daytona backend uses too.  The command (its environment and argv, as
 * NUL-terminated words) travels on stdin ahead of its own stdin, so secrets
 * in forward_env never sit on a command line on the host.  The job makes
 * the namespaces and joins the cgroups itself (no unshare, setsid or mount
 * programs), forks the command (--rm: no runner, no output files; its
 * stdout's head relayed through a pipe as it comes), waits for its real
 * status, kills what it left in its group, and prints one reply on stdout
 * (adapters/jobreply.h): stdout's head, a trailer with the random mark,
 * stderr's head.  A reply with the trailer is the command's result,
 * exit 255 and 128+n included; without it, ssh failed, and `ssh -O check`
 * tells a lost connection from a refused session.  --tie: when the
 * connection drops, the job's parent (sshd) dies, its parent-death signal
 * fires, and it kills the command's group.  After a timeout or cancel only
 * the local client died, so a second ssh over the master runs
 * `sg-helper job --kill` for the token.
 *
 * Exports stream: get_file runs a small reader over the master (a regular
 * file checked in the same command, then `dd iflag=nonblock` where the
 * host has it, else `cat`) with its stdout written straight into the
 * snapshot (exec.c's stream_out), the path mapped from root to the files
 * directory when a mount namespace shows them there; a read whose output
 * stays silent for SSHB_EXPORT_IDLE_MS is killed (exec.c's idle_ms).
 *
 * Local paths (identity_file, known_hosts_file) reach ssh already
 * `~`-expanded and quoted, and what ssh would expand further is refused,
 * so the file sandgate checks is the file ssh reads.
 *
 * The login shell on the host must be a POSIX shell (sh, bash, dash, zsh,
 * ksh): the one string is quoted for them.  The host needs /bin/sh, cat,
 * mkdir, and sha256sum (or shasum, or openssl) to verify sg-helper.
 */
#define _GNU_SOURCE /* vasprintf, getentropy */
#include "adapters/adapter.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "base/crash.h"
#include "base/hex.h"
#include "base/limits.h"
#include "base/log.h"
#include "base/progress.h"
#include "base/strv.h"
#include "core/digest.h"
#include "core/exec.h"
#include "adapters/install.h"
#include "adapters/jobreply.h"
#include "core/shquote.h"

/* The login credentials ssh reads from sandgate's environment. */
#define SSH_ENV_AGENT "SSH_AUTH_SOCK"
#define SSH_ENV_KRB5 "KRB5CCNAME"

/*
 * An export that writes no byte into its snapshot for this long is stopped:
 * a host that keeps the connection alive but sends nothing, or a reader
 * held by something that is no longer a regular file.  Twice ssh's
 * keep-alive interval, so a merely slow link is not cut.  Tests may make
 * it shorter (never longer) with SANDGATE_TEST_SSH_EXPORT_IDLE_MS.
 */
#define SSHB_EXPORT_IDLE_MS (2 * SG_SSH_ALIVE_INTERVAL_S * 1000)

struct ssh_env {
	struct sg_env base;
	struct sg_strv ssh;  /* "ssh" and the options every call shares */
	struct sg_strv cenv; /* the local ssh client's environment */
	char *sock;          /* the master's ControlPath on this host */
	char *envdir;        /* <workspace>/<slug> on the host */
	char *files;         /* envdir/workspace: the files */
	char *rundir;        /* envdir/run: the wrapper's pid files */
	char *lease;         /* this session's file name under envdir/leases */
	char *bind_src;      /* files when bind-mounted on root, else NULL */
	char *tmp_src;       /* ctl/tmp, shown on /tmp with bind_src, or NULL */
	bool netns;          /* commands get a network namespace of their own */
	bool dd_nonblock;    /* the host's dd opens with iflag=nonblock */
	char *cgprocs;       /* cgroup.procs files to join, a line each */
	struct sg_strv cgroups; /* cgroup directories made on the host */
	bool master;         /* provision started the master */
	pid_t master_pid;    /* the master's (its -O check), 0 when unknown */
	bool lock_ready;
	pthread_mutex_t lock; /* (re)connecting the master */
	atomic_uint seq;      /* per-exec tokens */
	char nonce[17];
};

/* ---- Remote scripts ------------------------------------------------------
 *
 * Each runs as `/bin/sh -c SCRIPT sg ARGS...` on the host; data reaches it
 * only as quoted positional parameters or on stdin, never spliced into the
 * script text.  Replies are key=value lines on stdout.
 */

/* $1: the profile's workspace ("" for the default ~/sandgate). Sets h, w. */
#define SSHB_PROLOGUE                                                        \
	"h=${HOME:-}\n"                                                      \
	"case $h in /*) ;; *) printf 'error=the account has no absolute "    \
	"HOME\\n'; exit 0 ;; esac\n"                                         \
	"case $1 in\n"                                                       \
	"'') w=$h/sandgate ;;\n"                                             \
	"'~') w=$h ;;\n"                                                     \
	"'~/'*) w=$h/${1#??} ;;\n"                                           \
	"*) w=$1 ;;\n"                                                       \
	"esac\n"

/* $2 slug, $3 sg-helper's sha256, $4 binding.root. */
static const char sshb_probe_sh[] =
	SSHB_PROLOGUE
	"printf 'home=%s\\nuid=%s\\ngid=%s\\narch=%s\\nos=%s\\nworkspace=%s\\n' "
	"\"$h\" \"$(id -u)\" \"$(id -g)\" \"$(uname -m)\" \"$(uname -s)\" \"$w\"\n"
	"e=$w/$2\n"
	"[ -d \"$e\" ] && printf 'envdir=1\\n'\n"
	"[ -d \"$e/workspace\" ] && printf 'files=1\\n'\n"
	"[ -f \"$e/env.json\" ] && printf 'marker=1\\n'\n"
	"d=$h/.cache/sandgate s=$3\n"
	SG_INSTALL_CHECK_SH
	"for t in cat mkdir; do\n"
	"  command -v \"$t\" >/dev/null 2>&1 && printf 'has_%s=1\\n' \"$t\"\n"
	"done\n"
	"dd if=/dev/null of=/dev/null iflag=nonblock status=none count=0 "
	"2>/dev/null && printf 'dd_nonblock=1\\n'\n"
	"[ -d \"$4\" ] && printf 'root=1\\n'\n"
	"if [ -f /sys/fs/cgroup/cgroup.controllers ] && "
	"[ -w /sys/fs/cgroup/cgroup.procs ]; then\n"
	"  c=\" $(cat /sys/fs/cgroup/cgroup.controllers) \"\n"
	"  case $c in *' memory '*) case $c in *' cpu '*) "
	"printf 'cgroup=v2\\n' ;; esac ;; esac\n"
	"elif [ -w /sys/fs/cgroup/memory/cgroup.procs ] && "
	"[ -w /sys/fs/cgroup/cpu/cgroup.procs ]; then\n"
	"  printf 'cgroup=v1\\n'\n"
	"fi\n"
	"exit 0\n";

/* $1 envdir, $2 the marker ("" to keep), $3 lease name, $4 lease text,
 * $5 a mount point to create ("" for none), $6 sg-helper's path (linked as
 * run/helper, so an operator's removal can stop the processes first). */
static const char sshb_setup_sh[] =
	"umask 077\n"
	"e=$1\n"
	"mkdir -p \"$e/workspace\" \"$e/ctl/proc\" \"$e/ctl/home\" \"$e/ctl/tmp\" "
	"\"$e/run\" \"$e/leases\" || exit 1\n"
	"chmod 700 \"$e\" \"$e/ctl\" \"$e/run\" || exit 1\n"
	"if [ -n \"$2\" ]; then\n"
	"  printf '%s\\n' \"$2\" >\"$e/env.json.tmp\" && "
	"mv -f \"$e/env.json.tmp\" \"$e/env.json\" || exit 1\n"
	"fi\n"
	"rm -f \"$e/expires\"\n"
	"printf '%s\\n' \"$4\" >\"$e/leases/$3\" || exit 1\n"
	"if [ -n \"$5\" ] && [ ! -d \"$5\" ]; then\n"
	"  (umask 022; mkdir -p \"$5\") 2>/dev/null || printf 'nomount=1\\n'\n"
	"fi\n"
	"ln -sfn \"$6\" \"$e/run/helper\" || exit 1\n"
	"exit 0\n";

/* $1 v1|v2, $2 the cgroup's name, $3 memory bytes, $4 CPU quota per
 * 100000 us (0: no limit). */
static const char sshb_cgroup_sh[] =
	"made=\n"
	"fail() { printf 'error=%s\\n' \"$1\"; for d in $made; do "
	"rmdir \"$d\" 2>/dev/null; done; exit 0; }\n"
	"mk() { mkdir -p \"$1\" 2>/dev/null || fail \"cannot create the cgroup $1\"; "
	"made=\"$1 $made\"; }\n"
	"put() { printf '%s\\n' \"$2\" 2>/dev/null >\"$1\" || "
	"fail \"cannot write $2 to $1\"; }\n"
	"if [ \"$1\" = v2 ]; then\n"
	"  b=/sys/fs/cgroup\n"
	"  put $b/cgroup.subtree_control '+memory +cpu'\n"
	"  mkdir -p $b/sandgate 2>/dev/null || fail \"cannot create $b/sandgate\"\n"
	"  put $b/sandgate/cgroup.subtree_control '+memory +cpu'\n"
	"  d=$b/sandgate/$2; mk \"$d\"\n"
	"  if [ \"$3\" != 0 ]; then put \"$d/memory.max\" \"$3\"; "
	"[ -f \"$d/memory.swap.max\" ] && put \"$d/memory.swap.max\" 0; fi\n"
	"  [ \"$4\" = 0 ] || put \"$d/cpu.max\" \"$4 100000\"\n"
	"  printf 'dir=%s\\nprocs=%s\\n' \"$d\" \"$d/cgroup.procs\"\n"
	"else\n"
	"  if [ \"$3\" != 0 ]; then\n"
	"    d=/sys/fs/cgroup/memory/sandgate/$2; mk \"$d\"\n"
	"    put \"$d/memory.limit_in_bytes\" \"$3\"\n"
	"    printf 'dir=%s\\nprocs=%s\\n' \"$d\" \"$d/cgroup.procs\"\n"
	"  fi\n"
	"  if [ \"$4\" != 0 ]; then\n"
	"    d=/sys/fs/cgroup/cpu/sandgate/$2; mk \"$d\"\n"
	"    put \"$d/cpu.cfs_period_us\" 100000\n"
	"    put \"$d/cpu.cfs_quota_us\" \"$4\"\n"
	"    printf 'dir=%s\\nprocs=%s\\n' \"$d\" \"$d/cgroup.procs\"\n"
	"  fi\n"
	"fi\n"
	"exit 0\n";

/*
 * rm -rf, tried again for up to 2 s: a job of a crashed gateway notices its
 * connection is gone, kills its command and removes its own files in the
 * run/ directory while the tree is being removed ("Directory not empty").
 */
#define SSHB_RM_TREE(dir)                                                       \
	"i=0; until rm -rf -- \"" dir "\" 2>/dev/null; do i=$((i + 1)); "      \
	"[ $i -ge 20 ] && { rm -rf -- \"" dir "\"; exit 1; }; sleep 0.1; done"

/*
 * Remove the cgroup directory $c, killing what is still in it (cgroup.kill
 * in v2, else SIGKILL to each member), tried again for up to 2 s: a process
 * that left its command's group (setsid) is still in its cgroup.
 */
#define SSHB_CG_EMPTY                                                           \
	"i=0\n"                                                                 \
	"while ! rmdir \"$c\" 2>/dev/null && [ -d \"$c\" ] && [ $i -lt 20 ]; do\n"  \
	"  if [ -f \"$c/cgroup.kill\" ]; then echo 1 >\"$c/cgroup.kill\"\n"          \
	"  else for q in $(cat \"$c/cgroup.procs\"); do kill -9 \"$q\"; done; fi\n"  \
	"  sleep 0.1; i=$((i + 1))\n"                                           \
	"done 2>/dev/null\n"

/* $1 envdir, $2 lease name, $3 remove|keep|detach, $4 the idle deadline
 * (0: none), then the session's cgroup directories, emptied and removed. */
static const char sshb_teardown_sh[] =
	"e=$1 l=$2 m=$3 x=$4\n"
	"shift 4\n"
	"for c in \"$@\"; do\n"
	SSHB_CG_EMPTY
	"  [ -d \"$c\" ] && printf 'busy=%s\\n' \"$c\"\n"
	"done\n"
	"[ -d \"$e\" ] || exit 0\n"
	"rm -f \"$e/leases/$l\"\n"
	"o=$(ls -A \"$e/leases\" 2>/dev/null)\n"
	"if [ \"$m\" = remove ]; then\n"
	"  if [ -n \"$o\" ]; then printf 'shared=1\\n'; exit 0; fi\n"
	"  [ -f \"$e/env.json\" ] || { printf 'nomarker=1\\n'; exit 0; }\n"
	"  " SSHB_RM_TREE("$e") "\n"
	"  exit 0\n"
	"fi\n"
	"if [ \"$m\" = keep ] && [ -z \"$o\" ] && [ \"$x\" != 0 ]; then\n"
	"  printf '%s\\n' \"$x\" >\"$e/expires\" || exit 1\n"
	"fi\n"
	"exit 0\n";

/*
 * The environments under the workspace: "env=<expires> <marker>", then one
 * "lease=<host> <pid> <since>" line per attached session.
 */
static const char sshb_list_sh[] =
	SSHB_PROLOGUE
	"for m in \"$w\"/*/env.json; do\n"
	"  [ -f \"$m\" ] || continue\n"
	"  d=${m%/env.json}\n"
	"  x=$(cat \"$d/expires\" 2>/dev/null)\n"
	"  printf 'env=%s %s\\n' \"${x:-0}\" \"$(cat \"$m\")\"\n"
	"  for l in \"$d/leases\"/*; do\n"
	"    [ -f \"$l\" ] && printf 'lease=%s\\n' \"$(head -c 300 \"$l\")\"\n"
	"  done\n"
	"done\n"
	"exit 0\n";

/*
 * $2 the slug of the environment to remove.  What runs in it is stopped
 * first (a crashed gateway leaves it running), so nothing outlives it: by
 * the host's records, each exec's job (run/<token>.pid, `job --kill`) and
 * the process/start processes (`proc stop-all`); by containment, every
 * process in the environment's cgroups (<slug>-<nonce>, when cpus or
 * memory_mb made some), which are then removed.
 */
static const char sshb_destroy_sh[] =
	SSHB_PROLOGUE
	"d=$w/$2\n"
	"[ -f \"$d/env.json\" ] || { printf 'missing=1\\n'; exit 0; }\n"
	"if [ -x \"$d/run/helper\" ]; then\n"
	"  for p in \"$d\"/run/*.pid; do\n"
	"    [ -f \"$p\" ] && \"$d/run/helper\" job --dir \"${p%.pid}\" --kill >/dev/null 2>&1\n"
	"  done\n"
	"  \"$d/run/helper\" proc stop-all --ctl \"$d/ctl/proc\" --grace-ms 0 >/dev/null 2>&1\n"
	"fi\n"
	"n=????????????????\n"
	"for c in /sys/fs/cgroup/sandgate/\"$2\"-$n /sys/fs/cgroup/memory/sandgate/\"$2\"-$n "
	"/sys/fs/cgroup/cpu/sandgate/\"$2\"-$n; do\n"
	"  [ -d \"$c\" ] || continue\n"
	SSHB_CG_EMPTY
	"done\n"
	SSHB_RM_TREE("$d") "\n"
	"exit 0\n";


/* ---- Small helpers --------------------------------------------------- */

/* A formatted string (new), or NULL when memory ran out. */
static char *sshb_fmt(const char *fmt, ...) SG_PRINTF(1, 2);
static char *sshb_fmt(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	return n < 0 ? NULL : s;
}

/* Is path equal to dir or below it?  Both absolute and normalised. */
static bool sshb_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (n == 1 && dir[0] == '/')
		return true;
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* A path with no "." or ".." component, no "//" and no trailing '/'. */
static bool sshb_clean_path(const char *p)
{
	if (p[0] != '/')
		return false;
	if (strchr(p, '\n'))
		return false;
	for (const char *c = p; *c; c++) {
		if (*c != '/')
			continue;
		if (c[1] == '/' || (c[1] == '\0' && c != p))
			return false;
		if (c[1] == '.' && (c[2] == '/' || c[2] == '\0'))
			return false;
		if (c[1] == '.' && c[2] == '.' && (c[3] == '/' || c[3] == '\0'))
			return false;
	}
	return true;
}

/*
 * Why ssh would read another file than `path` names, or NULL when it
 * reads that very file.  ssh (8.4 and later) expands `${VAR}` of its own
 * environment in IdentityFile and UserKnownHostsFile, and there is no
 * escape for it; its config parser takes a backslash as an escape (8.7
 * and later) but not before, and ends a value at a double quote; control
 * characters never belong in a path.  A '%' is doubled for IdentityFile,
 * which every ssh percent-expands, but UserKnownHostsFile is expanded only
 * from 8.4 on, so there no spelling means the same file to every client.
 */
static const char *sshb_path_refusal(const char *path, bool percent_ok)
{
	if (strstr(path, "${"))
		return "\"${\" (ssh replaces ${NAME} with a variable of its environment)";
	if (!percent_ok && strchr(path, '%'))
		return "'%' (ssh replaces %-tokens in it from OpenSSH 8.4 on, and not before)";
	if (strpbrk(path, "\"\\"))
		return "a double quote or a backslash (ssh's config parser reads them as quoting)";
	for (const unsigned char *c = (const unsigned char *)path; *c; c++)
		if (*c < ' ' || *c == 0x7f)
			return "control characters";
	return NULL;
}

/*
 * `path` with a leading `~` or `~user` replaced by that account's home
 * from the password database, as ssh itself does (never $HOME), into out:
 * the file sandgate checks is then the one ssh is given, already
 * expanded.  False when the account is unknown or the result too long.
 */
static bool sshb_local_path(const char *path, char *out, size_t n)
{
	struct passwd pw, *found = NULL;
	char name[256], *buf = NULL;
	const char *rest;
	size_t len, blen = 16 * SG_KiB;
	bool ok = false;
	int w;

	if (path[0] != '~') {
		w = snprintf(out, n, "%s", path);
		return w >= 0 && (size_t)w < n;
	}
	rest = path + 1 + strcspn(path + 1, "/");
	len = (size_t)(rest - path) - 1;
	if (len >= sizeof(name) || !(buf = malloc(blen)))
		goto out;
	memcpy(name, path + 1, len);
	name[len] = '\0';
	if (len == 0)
		(void)getpwuid_r(getuid(), &pw, buf, blen, &found);
	else
		(void)getpwnam_r(name, &pw, buf, blen, &found);
	if (!found || !found->pw_dir)
		goto out;
	rest += strspn(rest, "/");
	len = strlen(found->pw_dir);
	w = snprintf(out, n, "%s%s%s", found->pw_dir,
		     len == 0 || found->pw_dir[len - 1] != '/' ? "/" : "", rest);
	ok = w >= 0 && (size_t)w < n;
out:
	free(buf);
	return ok;
}

/*
 * `-o Key="path"` for an option ssh percent-expands: '%' doubled, the
 * whole value in double quotes, so blanks, a `'` or a leading '#' stay
 * part of the name for every version of ssh's config parser.  The path
 * has passed sshb_path_refusal(): no double quote, no backslash.
 */
static sg_err sshb_path_opt(struct sg_strv *av, const char *key, const char *path)
{
	struct sg_buf b = SG_BUF_INIT(2 * SG_PATH_MAX + 64);
	sg_err rc = sg_buf_addf(&b, "%s=\"", key);

	for (const char *c = path; !rc && *c; c++)
		rc = *c == '%' ? sg_buf_adds(&b, "%%") : sg_buf_addc(&b, *c);
	if (!rc)
		rc = sg_buf_addc(&b, '"');
	if (!rc)
		rc = sg_strv_add(av, "-o");
	if (!rc)
		rc = sg_strv_add(av, b.p);
	sg_buf_release(&b);
	return rc;
}

/*
 * The value of `key` in key=value lines (new string), or NULL.  The last
 * line with the key wins.
 */
static char *sshb_kv(const char *text, const char *key)
{
	size_t kn = strlen(key);
	const char *found = NULL, *line = text;

	while (line && *line) {
		if (strncmp(line, key, kn) == 0 && line[kn] == '=')
			found = line + kn + 1;
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	if (!found)
		return NULL;
	return strndup(found, strcspn(found, "\n"));
}

static bool sshb_flag(const char *text, const char *key)
{
	char *v = sshb_kv(text, key);
	bool on = v && strcmp(v, "1") == 0;

	free(v);
	return on;
}

/*
 * The last line of ssh's stderr worth quoting into a sentence, into out:
 * warnings and the remote side's banners are skipped.
 */
static bool sshb_last_line(const char *text, char *out, size_t n)
{
	const char *best = NULL, *line = text;
	size_t blen = 0;

	while (line && *line) {
		size_t len = strcspn(line, "\n");

		if (len > 0 && strncmp(line, "Warning:", 8) != 0 && line[0] != '@')
			best = line, blen = len;
		line += len;
		if (*line)
			line++;
	}
	if (!best) {
		snprintf(out, n, "ssh gave no message");
		return false;
	}
	while (blen > 0 && (best[blen - 1] == '\r' || best[blen - 1] == '.'))
		blen--;
	snprintf(out, n, "%.*s", (int)blen, best);
	return true;
}

/* ---- The ssh command lines ------------------------------------------ */

/* "host", "[host]:port" or "user@host": how messages name the host. */
static void sshb_where(const struct sg_profile *p, char *out, size_t n)
{
	if (p->port && p->port != 22)
		snprintf(out, n, "%s%s[%s]:%d", p->user ? p->user : "",
			 p->user ? "@" : "", p->host, p->port);
	else
		snprintf(out, n, "%s%s%s", p->user ? p->user : "", p->user ? "@" : "",
			 p->host);
}

/*
 * Build "ssh" and the options every call shares: strict host keys, no
 * prompts, no forwarding of anything, the profile's port, user, identity
 * and known hosts, and the ControlPath (sock NULL: none, one connection
 * per call, for the operator commands).
 */
static sg_err sshb_base_argv(const struct sg_profile *p, const char *sock,
			     struct sg_strv *av, struct sg_errinfo *err)
{
	static const char *const fixed[] = {
		"ssh", "-T", "-x", "-a",
		"-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=yes",
		"-o", "UpdateHostKeys=no",
		"-o", "VerifyHostKeyDNS=no",
		"-o", "CheckHostIP=no",
		"-o", "ClearAllForwardings=yes",
		"-o", "PermitLocalCommand=no",
		"-o", "ForwardAgent=no",
		/*
		 * A `NoHostAuthenticationForLocalhost yes` in the user's or
		 * the system's ssh config would accept any key from a
		 * loopback address (a tunnel, a VM's forwarded port), even
		 * with StrictHostKeyChecking=yes: the first value given wins,
		 * so the command line turns it off.
		 */
		"-o", "NoHostAuthenticationForLocalhost=no",
		"-o", "LogLevel=ERROR",
		NULL
	};
	char kh[SG_PATH_MAX], id[SG_PATH_MAX];
	sg_err rc;

	/* validate() checked these: an account gone since then is refused. */
	if ((p->known_hosts_file && !sshb_local_path(p->known_hosts_file, kh, sizeof(kh))) ||
	    (p->identity_file && !sshb_local_path(p->identity_file, id, sizeof(id))))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "the home directory in identity_file or known_hosts_file (profile \"%s\") cannot be found",
				  p->name);
	rc = sg_strv_addv(av, fixed);
	if (!rc)
		rc = sg_strv_add(av, "-o");
	if (!rc)
		rc = sg_strv_addf(av, "ConnectTimeout=%d", SG_SSH_CONNECT_TIMEOUT_S);
	if (!rc)
		rc = sg_strv_add(av, "-o");
	if (!rc)
		rc = sg_strv_addf(av, "ServerAliveInterval=%d", SG_SSH_ALIVE_INTERVAL_S);
	if (!rc)
		rc = sg_strv_addv(av, (const char *[]){ "-o", "ServerAliveCountMax=3", NULL });
	if (!rc && p->known_hosts_file) {
		rc = sshb_path_opt(av, "UserKnownHostsFile", kh);
		/*
		 * Only the configured file: the check is against it alone, so
		 * neither the system's file nor a KnownHostsCommand of the
		 * user's config may add keys to it.
		 */
		if (!rc)
			rc = sg_strv_addv(av, (const char *[]){ "-o",
								 "GlobalKnownHostsFile=none", "-o",
								 "KnownHostsCommand=none", NULL });
	}
	if (!rc && p->identity_file) {
		rc = sg_strv_addv(av, (const char *[]){ "-o", "IdentitiesOnly=yes", NULL });
		if (!rc)
			rc = sshb_path_opt(av, "IdentityFile", id);
	}
	if (!rc && p->port) {
		rc = sg_strv_add(av, "-p");
		if (!rc)
			rc = sg_strv_addf(av, "%d", p->port);
	}
	if (!rc && p->user)
		rc = sg_strv_addv(av, (const char *[]){ "-l", p->user, NULL });
	if (!rc && sock)
		rc = sshb_path_opt(av, "ControlPath", sock);
	else if (!rc)
		rc = sg_strv_addv(av, (const char *[]){ "-o", "ControlPath=none", NULL });
	return rc ? sg_err_set(err, rc, "out of memory") : SG_OK;
}

/*
 * The local ssh client's environment: what it needs to find the user's
 * config, keys and agent, and a fixed locale so its messages can be read.
 * Nothing else of sandgate's environment.
 */
static sg_err sshb_client_env(struct sg_strv *env)
{
	static const char *const pass[] = { "PATH", "HOME", "USER", "LOGNAME",
					    SSH_ENV_AGENT, SSH_ENV_KRB5, NULL };
	sg_err rc = SG_OK;

	for (size_t i = 0; !rc && pass[i]; i++) {
		const char *v = getenv(pass[i]);

		if (v)
			rc = sg_strv_addf(env, "%s=%s", pass[i], v);
	}
	if (!rc && !getenv("PATH"))
		rc = sg_strv_add(env, "PATH=/usr/local/bin:/usr/bin:/bin");
	if (!rc)
		rc = sg_strv_add(env, "LC_ALL=C");
	return rc;
}

/*
 * Turn a failed connection (ssh exited 255 before running anything) into
 * one sentence: which file to fix for a host key, what to check for a
 * refused login, ssh's own words otherwise.  Always SG_E_UNAVAILABLE.
 */
static sg_err sshb_connect_error(const struct sg_profile *p, const char *text,
				 struct sg_errinfo *err)
{
	const char *kh = p->known_hosts_file ? p->known_hosts_file : "~/.ssh/known_hosts";
	char where[300], key[300], last[200], port[32] = "", login[300];

	sshb_where(p, where, sizeof(where));
	if (p->port && p->port != 22) {
		snprintf(key, sizeof(key), "[%s]:%d", p->host, p->port);
		snprintf(port, sizeof(port), " -p %d", p->port);
	} else {
		snprintf(key, sizeof(key), "%s", p->host);
	}
	snprintf(login, sizeof(login), "%s%s%s", p->user ? p->user : "", p->user ? "@" : "",
		 p->host);
	sshb_last_line(text, last, sizeof(last));
	if (strstr(text, "REMOTE HOST IDENTIFICATION HAS CHANGED") ||
	    strstr(text, "has changed and you have requested strict checking"))
		return sg_err_set(err, SG_E_UNAVAILABLE,
				  "the host key of %s does not match %s (checked strictly); if it changed on purpose, run ssh-keygen -R '%s' -f %s and connect once with plain ssh",
				  key, kh, key, kh);
	if (strstr(text, "Host key verification failed") ||
	    strstr(text, "host key is known for"))
		return sg_err_set(err, SG_E_UNAVAILABLE,
				  "the host key of %s is not in %s (checked strictly); verify and record it by connecting once with plain ssh: ssh%s -o UserKnownHostsFile=%s %s",
				  key, kh, port, kh, login);
	if (strstr(text, "Permission denied") || strstr(text, "Too many authentication failures"))
		return sg_err_set(err, SG_E_UNAVAILABLE,
				  "%s refused the ssh login (%s): check identity_file%s%s and the host's authorized_keys",
				  where, last, p->identity_file ? " " : "",
				  p->identity_file ? p->identity_file : "");
	return sg_err_set(err, SG_E_UNAVAILABLE, "cannot reach %s over ssh: %s",
			  where, last);
}

/* The idle limit: SSHB_EXPORT_IDLE_MS, or a test's shorter one. */
static int64_t sshb_export_idle_ms(void)
{
	const char *t = getenv("SANDGATE_TEST_SSH_EXPORT_IDLE_MS");
	long long ms = t ? strtoll(t, NULL, 10) : 0;

	return ms > 0 && ms < SSHB_EXPORT_IDLE_MS ? ms : SSHB_EXPORT_IDLE_MS;
}

/* Run one ssh client process: argv as built, the client's environment. */
static sg_err sshb_spawn(const struct sg_strv *av, const struct sg_strv *cenv,
			 const void *in, size_t inlen, int64_t timeout_ms,
			 bool detaches, int out_fd, struct sg_exec_result *r,
			 struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_child c = {
		.argv = sg_strv_get(av),
		.envp = sg_strv_get(cenv),
		.stdin_data = in,
		.stdin_len = inlen,
		.timeout_ms = timeout_ms,
		.detaches = detaches,
		.stream_out = out_fd >= 0,
		.out_fd = out_fd,
		/* Only an export streams; a host can stall it for ever. */
		.idle_ms = out_fd >= 0 ? sshb_export_idle_ms() : 0,
	};
	sg_err rc = sg_exec_run(&c, r, cancel, err);

	if (!rc && r->exit_code == 127 && !r->signal && strstr(r->err.p, "ssh"))
		rc = sg_err_set(err, SG_E_UNAVAILABLE,
				"the OpenSSH client could not be started: %.160s", r->err.p);
	return rc;
}

/* ---- The master connection ------------------------------------------ */

/* Does a master answer on the control socket?  A local connect() only. */
static bool sshb_master_alive(const char *sock)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;
	bool alive;

	if (strlen(sock) >= sizeof(sa.sun_path))
		return false;
	memcpy(sa.sun_path, sock, strlen(sock) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	alive = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return alive;
}

/*
 * One `ssh -O <cmd>` to the master at the ControlPath in ssh (the
 * options every call shares); true when it exited 0, with the master's
 * pid in *pid when asked for (`check` says "Master running (pid=N)").
 * Local only, yet bounded by the shutdown's deadline (cancel.h): past it,
 * false at once.
 */
static bool sshb_mux_ctl(const struct sg_strv *ssh, const struct sg_strv *cenv,
			 const char *host, const char *cmd, pid_t *pid)
{
	struct sg_strv av = SG_STRV_INIT;
	struct sg_exec_result r;
	struct sg_errinfo ignore = { 0 };
	int64_t ms = sg_cancel_quit_clip(SG_SSH_CHECK_MS);
	const char *at;
	bool ok = false;

	sg_exec_result_init(&r, SG_KiB);
	if (ms > 0 && !sg_strv_addv(&av, sg_strv_get(ssh)) &&
	    !sg_strv_addv(&av, (const char *[]){ "-O", cmd, "--", host, NULL }) &&
	    !sshb_spawn(&av, cenv, NULL, 0, ms, false, -1, &r, NULL, &ignore))
		ok = r.exit_code == 0 && !r.timed_out;
	if (ok && pid && (at = strstr(r.err.p, "(pid=")))
		*pid = (pid_t)strtol(at + 5, NULL, 10);
	sg_exec_result_release(&r);
	sg_strv_release(&av);
	return ok;
}

static bool sshb_master_ctl(struct ssh_env *se, const char *cmd)
{
	return sshb_mux_ctl(&se->ssh, &se->cenv, se->base.profile->host, cmd, NULL);
}

/*
 * Is pid still an ssh process whose command line names the control
 * socket?  A pid read from a file may have been reused since.
 */
static bool sshb_is_master(pid_t pid, const char *sock)
{
	char path[64], line[SG_PATH_MAX * 2];
	const char *base;
	ssize_t n;
	int fd;

	if (pid <= 1)
		return false;
	snprintf(path, sizeof(path), "/proc/%ld/cmdline", (long)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, line, sizeof(line) - 1);
	close(fd);
	if (n <= 0)
		return false;
	line[n] = '\0';
	base = strrchr(line, '/') ? strrchr(line, '/') + 1 : line;
	if (strcmp(base, "ssh") != 0)
		return false;
	/* The arguments, NUL-separated, as one string. */
	for (ssize_t i = 0; i < n; i++)
		if (!line[i])
			line[i] = ' ';
	return strstr(line, sock) != NULL;
}

/*
 * End the master at sock: `-O exit`, and when that cannot run (no time
 * left, a master that does not answer), SIGTERM to its pid, which must
 * still be that master.  Its clients end with it, and with them their
 * sessions on the host, whose jobs then stop their commands (--tie).
 */
static void sshb_master_end(const struct sg_strv *ssh, const struct sg_strv *cenv,
			    const char *host, const char *sock, pid_t pid)
{
	if (sshb_master_alive(sock) && !sshb_mux_ctl(ssh, cenv, host, "exit", NULL) &&
	    sshb_is_master(pid, sock))
		kill(pid, SIGTERM);
}

/* "<dir>/<digest>.owner" beside "<dir>/<digest>.sock" (new string). */
static char *sshb_owner_path(const char *sock)
{
	size_t n = strlen(sock);

	if (n < 5 || strcmp(sock + n - 5, ".sock") != 0)
		return NULL;
	return sshb_fmt("%.*s.owner", (int)(n - 5), sock);
}

/*
 * Beside the socket, which environment the master serves and its pid
 * ("<id>\n<pid>\n"): `sandgate envs rm` and `gc` find there the master
 * of a gateway that was killed (sshb_close_masters).
 */
static void sshb_owner_write(struct ssh_env *se)
{
	char *path = sshb_owner_path(se->sock);
	int fd = path ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600)
		      : -1;

	if (fd < 0 || dprintf(fd, "%s\n%ld\n", se->base.id, (long)se->master_pid) < 0)
		sg_log_warn("cannot record the ssh master of %s; `sandgate envs rm` will not find it",
			    se->base.id);
	if (fd >= 0)
		close(fd);
	free(path);
}

/*
 * Start the master: authenticate, then go to the background (-f), where
 * it serves every later call until `-O exit` or ControlPersist seconds
 * without a client.  Its stdio is /dev/null once it forks, and it leads
 * its own session, so it neither holds our pipes nor dies with our group.
 */
static sg_err sshb_master_start(struct ssh_env *se, struct sg_cancel *cancel,
				struct sg_errinfo *err)
{
	const struct sg_profile *p = se->base.profile;
	int64_t persist = p->lifetime_seconds > SG_SSH_MIN_PERSIST_S
				  ? p->lifetime_seconds : SG_SSH_MIN_PERSIST_S;
	struct sg_strv av = SG_STRV_INIT;
	struct sg_exec_result r;
	sg_err rc;

	sg_exec_result_init(&r, SG_KiB);
	rc = sg_strv_addv(&av, sg_strv_get(&se->ssh));
	if (!rc)
		rc = sg_strv_addv(&av, (const char *[]){ "-o", "ControlMaster=yes", "-o", NULL });
	if (!rc)
		rc = sg_strv_addf(&av, "ControlPersist=%lld", (long long)persist);
	if (!rc)
		rc = sg_strv_addv(&av, (const char *[]){ "-N", "-f", "--", p->host, NULL });
	if (rc) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	unlink(se->sock); /* a stale socket of a master that died */
	rc = sshb_spawn(&av, &se->cenv, NULL, 0, SG_SSH_MASTER_MS, true, -1, &r, cancel, err);
	if (rc)
		goto out;
	if (r.timed_out) {
		char where[300];

		sshb_where(p, where, sizeof(where));
		rc = sg_err_set(err, SG_E_UNAVAILABLE,
				"ssh to %s did not finish logging in within %d s",
				where, SG_SSH_MASTER_MS / 1000);
		goto out;
	}
	if (r.exit_code != 0) {
		rc = sshb_connect_error(p, r.err.p, err);
		goto out;
	}
	if (!sshb_master_alive(se->sock)) {
		rc = sg_err_set(err, SG_E_UNAVAILABLE,
				"ssh logged in but left no master connection at %s", se->sock);
		goto out;
	}
	se->master_pid = 0;
	(void)sshb_mux_ctl(&se->ssh, &se->cenv, p->host, "check", &se->master_pid);
	sshb_owner_write(se);
	rc = SG_OK;
out:
	sg_exec_result_release(&r);
	sg_strv_release(&av);
	return rc;
}

/* The master, started again if it went away (serialised per env). */
static sg_err sshb_master_ensure(struct ssh_env *se, struct sg_cancel *cancel,
				 struct sg_errinfo *err)
{
	sg_err rc = SG_OK;

	pthread_mutex_lock(&se->lock);
	if (!sshb_master_alive(se->sock)) {
		if (se->master)
			sg_log_info("the ssh master for %s is gone; connecting again",
				    se->base.id);
		rc = sshb_master_start(se, cancel, err);
		if (!rc)
			se->master = true;
	}
	pthread_mutex_unlock(&se->lock);
	return rc;
}

static void sshb_master_stop(struct ssh_env *se)
{
	char *owner = se->sock ? sshb_owner_path(se->sock) : NULL;

	if (se->sock) {
		sshb_master_end(&se->ssh, &se->cenv, se->base.profile->host, se->sock,
				se->master_pid);
		unlink(se->sock);
	}
	if (owner)
		unlink(owner);
	free(owner);
	se->master = false;
	se->master_pid = 0;
}

/*
 * Run `cmd` on the host over the master (started again first if it went
 * away, unless `reconnect` is false).  Returns SG_OK when ssh ran; r has
 * what it gave.
 */
static sg_err sshb_run(struct ssh_env *se, const char *cmd, const void *in,
		       size_t inlen, int64_t timeout_ms, bool reconnect, int out_fd,
		       struct sg_exec_result *r, struct sg_cancel *cancel,
		       struct sg_errinfo *err)
{
	struct sg_strv av = SG_STRV_INIT;
	sg_err rc = reconnect ? sshb_master_ensure(se, cancel, err) : SG_OK;

	if (rc)
		return rc;
	if (sg_strv_addv(&av, sg_strv_get(&se->ssh)) ||
	    sg_strv_addv(&av, (const char *[]){ "-o", "ControlMaster=no", "--",
						 se->base.profile->host, cmd, NULL })) {
		sg_strv_release(&av);
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	}
	rc = sshb_spawn(&av, &se->cenv, in, inlen, timeout_ms, false, out_fd, r, cancel, err);
	sg_strv_release(&av);
	return rc;
}

/* "exec /bin/sh -c <script> <name> <args...>", every word quoted. */
static sg_err sshb_script_line(const char *script, const char *name,
			       const char *const *args, struct sg_buf *line)
{
	sg_err rc = sg_buf_adds(line, "exec /bin/sh -c ");

	if (!rc)
		rc = sg_shquote(line, script);
	if (!rc)
		rc = sg_buf_addc(line, ' ');
	if (!rc)
		rc = sg_shquote(line, name);
	for (size_t i = 0; !rc && args && args[i]; i++) {
		rc = sg_buf_addc(line, ' ');
		if (!rc)
			rc = sg_shquote(line, args[i]);
	}
	return rc;
}

/*
 * Run one of our scripts on the host.  SG_OK when it ran (its exit status
 * is in r); a transport failure (ssh's 255) is SG_E_UNAVAILABLE, with the
 * master checked to say which: a lost connection or a refused session.
 */
static sg_err sshb_script(struct ssh_env *se, const char *script,
			  const char *const *args, const void *in, size_t inlen,
			  int64_t timeout_ms, struct sg_exec_result *r,
			  struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_buf line = SG_BUF_INIT(SG_SSH_LINE_MAX);
	char where[300], last[200];
	sg_err rc = sshb_script_line(script, "sg", args, &line);

	if (rc) {
		rc = sg_err_set(err, rc, "a remote step's arguments are too long");
		goto out;
	}
	rc = sshb_run(se, line.p, in, inlen, timeout_ms, true, -1, r, cancel, err);
	if (rc)
		goto out;
	sshb_where(se->base.profile, where, sizeof(where));
	if (r->timed_out) {
		rc = sg_err_set(err, SG_E_UNAVAILABLE,
				"a step on %s did not finish within %lld s",
				where, (long long)(timeout_ms / 1000));
		goto out;
	}
	if (r->exit_code == 255 || r->signal) {
		sshb_last_line(r->err.p, last, sizeof(last));
		if (!sshb_master_ctl(se, "check"))
			rc = sg_err_set(err, SG_E_UNAVAILABLE,
					"the ssh connection to %s was lost", where);
		else
			rc = sg_err_set(err, SG_E_UNAVAILABLE,
					"ssh could not run a step on %s: %s", where, last);
	}
out:
	sg_buf_release(&line);
	return rc;
}

/* ---- validate ------------------------------------------------------- */

/*
 * The profile fields the ssh backend honours (adapter.h); the config layer
 * refuses every other one.  network "none", cpus and memory_mb depend on
 * what the host allows, which provision() observes and refuses.
 */
static const struct sg_field ssh_fields[] = {
	SG_FIELD("host"), SG_FIELD("port"), SG_FIELD("user"),
	SG_FIELD("identity_file"), SG_FIELD("known_hosts_file"),
	SG_FIELD("workspace"), SG_FIELD("persistent"), SG_FIELD("shared"),
	SG_FIELD_BEST_EFFORT("network"), SG_FIELD_BEST_EFFORT("cpus"),
	SG_FIELD_BEST_EFFORT("memory_mb"),
	/* What leads to a login: the agent's socket and the Kerberos ticket cache. */
	SG_FIELD_ENV(SSH_ENV_AGENT, 0), SG_FIELD_ENV(SSH_ENV_KRB5, 0), SG_FIELDS_END,
};

/*
 * A host or login name that is safe on ssh's command line and in the
 * user's ssh config: not empty, no leading '-' (an option), and none of
 * the blanks, control characters and shell metacharacters that a
 * ProxyCommand, Match exec or LocalCommand with %h or %r would hand to a
 * local shell.  OpenSSH 9.6 refuses these itself; older clients run them.
 */
static bool sshb_plain_word(const char *s, const char *also)
{
	if (!*s || *s == '-')
		return false;
	for (const unsigned char *c = (const unsigned char *)s; *c; c++)
		if (*c <= ' ' || *c == 0x7f || strchr("'`\"$\\;&<>|(){}", *c) ||
		    strchr(also, *c))
			return false;
	return true;
}

static sg_err ssh_validate(const struct sg_profile *p, struct sg_errinfo *err)
{
	char *ssh;

	if (!p->host || !*p->host)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "field \"host\" (profile \"%s\") is required by the ssh backend",
				  p->name);
	if (!sshb_plain_word(p->host, ""))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "field \"host\" (profile \"%s\") must be a host name or an ssh alias",
				  p->name);
	if (p->user && !sshb_plain_word(p->user, "@"))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "field \"user\" (profile \"%s\") must be a login name",
				  p->name);
	if (p->network == SG_NET_ALLOW && !sg_profile_best_effort(p, "network"))
		return sg_err_set(err, SG_E_UNSUPPORTED,
				  "network allow lists (profile \"%s\") cannot be enforced by the ssh backend; use \"none\" (a network namespace on the host) or \"default\"",
				  p->name);
	if (p->workspace) {
		/* "~" and "~/x" are the login's home and below it. */
		const char *abs = strncmp(p->workspace, "~/", 2) == 0 ? p->workspace + 1
				  : p->workspace;

		if (strcmp(p->workspace, "~") != 0 &&
		    (strlen(abs) >= SG_PATH_MAX / 2 || !sshb_clean_path(abs)))
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "field \"workspace\" (profile \"%s\") must be an absolute path on the host, or ~/path, without . or .. parts",
					  p->name);
	}
	{
		/*
		 * The file checked here (and by `sandgate probe`) must be the
		 * one ssh reads: what ssh would expand or unquote is refused,
		 * and `~` is expanded here, as ssh does, both for the check
		 * and for ssh's command line.
		 */
		const char *files[] = { p->identity_file, p->known_hosts_file };
		const char *names[] = { "identity_file", "known_hosts_file" };
		char local[SG_PATH_MAX];

		for (size_t i = 0; i < 2; i++) {
			const char *why;

			if (!files[i])
				continue;
			if (!sshb_local_path(files[i], local, sizeof(local)))
				return sg_err_set(err, SG_E_INVALID_ARGUMENT,
						  "field \"%s\" (profile \"%s\") names a home directory (~) that this host's accounts do not have, or is too long",
						  names[i], p->name);
			why = sshb_path_refusal(local, i == 0);
			if (why)
				return sg_err_set(err, SG_E_INVALID_ARGUMENT,
						  "field \"%s\" (profile \"%s\") must not hold %s: ssh would read another file than the one sandgate checks",
						  names[i], p->name, why);
			if (i == 0 && access(local, R_OK) != 0)
				return sg_err_set(err, SG_E_INVALID_ARGUMENT,
						  "identity_file %s (profile \"%s\") cannot be read: %s",
						  p->identity_file, p->name, strerror(errno));
		}
	}
	ssh = sg_exec_which("ssh");
	if (!ssh)
		return sg_err_set(err, SG_E_UNSUPPORTED,
				  "the ssh backend needs the OpenSSH client (ssh) on this host's PATH (apt-get install openssh-client)");
	free(ssh);
	/*
	 * cpus, memory_mb and network "none" depend on what the host allows,
	 * which only provision() can observe; it refuses them there.
	 */
	return SG_OK;
}

/* ---- provision ------------------------------------------------------ */

/*
 * The master's socket on this host: <state>/ssh/<digest>.sock, or under a
 * private directory in /tmp when the state dir's path is too long for a
 * unix socket.  The digest covers the session and a random nonce, so each
 * environment (even two sessions of one identity) has its own master.
 */
static sg_err sshb_sock_path(struct ssh_env *se, struct sg_errinfo *err)
{
	const struct sg_env *env = &se->base;
	struct sg_buf seed = SG_BUF_INIT(SG_PATH_MAX);
	char sum[65], *dir = NULL;
	struct stat st;
	sg_err rc;

	rc = sg_buf_addf(&seed, "%s\n%s\n%ld\n%s", env->identity, env->session,
			 (long)getpid(), se->nonce);
	if (rc || !sg_sha256_hex(seed.p, seed.len, sum)) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot name the ssh control socket");
		goto out;
	}
	sum[16] = '\0';
	if (strlen(env->state_dir) + strlen("/ssh/.sock") + 16 <= SG_SSH_SOCK_MAX)
		dir = sshb_fmt("%s/ssh", env->state_dir);
	else
		dir = sshb_fmt("/tmp/sandgate-ssh-%ld", (long)getuid());
	if (!dir) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot create %s: %s", dir,
				strerror(errno));
		goto out;
	}
	/* Only a private directory of ours may hold the socket. */
	if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
	    (st.st_mode & 077)) {
		rc = sg_err_set(err, SG_E_INTERNAL,
				"%s must be a directory of this user with mode 0700", dir);
		goto out;
	}
	if (!(se->sock = sshb_fmt("%s/%s.sock", dir, sum))) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	rc = SG_OK;
out:
	sg_buf_release(&seed);
	free(dir);
	return rc;
}

/*
 * A root the mount namespace may put the workspace on: not an OS
 * directory (bind-mounting over it would break every command), and not a
 * directory that holds sandgate's own parts on the host.
 */
static bool sshb_root_allowed(const char *root, const char *envdir,
			      const char *helper)
{
	static const char *const below[] = { "/proc", "/sys", "/dev", NULL };
	static const char *const exact[] = { "/usr", "/etc", "/bin", "/sbin", "/lib",
					     "/lib32", "/lib64", "/libx32", "/tmp",
					     "/var", "/boot", "/opt", "/home", "/root",
					     "/run", "/srv", "/mnt", "/media", NULL };

	if (!sshb_clean_path(root) || strcmp(root, "/") == 0)
		return false;
	for (size_t i = 0; below[i]; i++)
		if (sshb_under(root, below[i]))
			return false;
	for (size_t i = 0; exact[i]; i++)
		if (strcmp(root, exact[i]) == 0)
			return false;
	return !sshb_under(envdir, root) && !sshb_under(helper, root) &&
	       !sshb_under(root, envdir);
}

/*
 * How commands see root and the network (the top comment): sets
 * bind_src and netns, and *mount / *netns.  sg-helper job makes the
 * namespaces itself (unshare(2), mount(2)); what the host does not allow
 * is found by the trial run at the end of provision().
 */
static sg_err sshb_namespaces(struct ssh_env *se, const char *where, bool *mount,
			      bool *netns, struct sg_errinfo *err)
{
	const struct sg_env *env = &se->base;
	const struct sg_profile *p = env->profile;

	*mount = strcmp(env->root, se->files) != 0;
	*netns = p->network == SG_NET_NONE;
	if (*mount && !sshb_root_allowed(env->root, se->envdir, env->helper))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "root %s cannot show the workspace on %s: it is an OS directory or holds sandgate's own files there",
				  env->root, where);
	se->netns = *netns;
	if (*mount && !(se->bind_src = strdup(se->files)))
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	/*
	 * In that namespace ctl/tmp is shown on /tmp too (sg-helper job
	 * --tmp), unless the environment itself lives under /tmp, which the
	 * mount would hide from its own commands: /tmp then stays the host's,
	 * and read-only in standard mode.
	 */
	se->base.own_tmp = *mount && !sshb_under(se->envdir, "/tmp");
	if (se->base.own_tmp && !(se->tmp_src = sshb_fmt("%s/tmp", env->ctl_dir)))
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	return SG_OK;
}

/* The environment's marker, env.json on the host (new string). */
static char *sshb_marker(struct ssh_env *se)
{
	const struct sg_env *env = &se->base;
	const struct sg_profile *p = env->profile;
	json_t *m = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:b, s:b, s:I, s:s, s:s}",
			      "backend", "ssh", "id", env->id, "identity",
			      env->identity, "session", env->session, "profile",
			      p->name, "created", (json_int_t)time(NULL),
			      "persistent", p->persistent, "shared", p->shared,
			      "lifetime_seconds", (json_int_t)p->lifetime_seconds,
			      "root", env->root, "directory", se->files);
	char *s = m ? json_dumps(m, JSON_COMPACT) : NULL;

	json_decref(m);
	return s;
}

/* Make the cgroup limits on the host; applied receives what was set. */
static sg_err sshb_limits(struct ssh_env *se, const char *kind, json_t *applied,
			  struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const struct sg_profile *p = se->base.profile;
	struct sg_exec_result r;
	char name[128], mem[32], cpu[32], *e = NULL;
	long quota = p->cpus > 0 ? (long)(p->cpus * 100000.0 + 0.5) : 0;
	struct sg_buf procs = SG_BUF_INIT(SG_PATH_MAX * 4);
	sg_err rc;

	sg_exec_result_init(&r, SG_SSH_REPLY_MAX);
	snprintf(name, sizeof(name), "%.80s-%s", se->base.id + 4, se->nonce);
	snprintf(mem, sizeof(mem), "%lld",
		 p->memory_mb > 0 ? (long long)p->memory_mb * 1024 * 1024 : 0LL);
	snprintf(cpu, sizeof(cpu), "%ld", quota);
	rc = sshb_script(se, sshb_cgroup_sh, (const char *[]){ kind, name, mem, cpu, NULL },
			 NULL, 0, SG_SSH_STEP_MS, &r, cancel, err);
	if (rc)
		goto out;
	e = sshb_kv(r.out.p, "error");
	if (e || r.exit_code != 0) {
		rc = sg_err_set(err, SG_E_UNSUPPORTED,
				"cpus and memory_mb cannot be applied on the host: %s",
				e ? e : "the cgroup step failed");
		goto out;
	}
	for (const char *line = r.out.p; line && *line;) {
		size_t len = strcspn(line, "\n");

		if (strncmp(line, "dir=", 4) == 0 &&
		    sg_strv_addf(&se->cgroups, "%.*s", (int)len - 4, line + 4))
			rc = SG_E_INTERNAL;
		if (strncmp(line, "procs=", 6) == 0 &&
		    ((procs.len && sg_buf_addc(&procs, '\n')) ||
		     sg_buf_add(&procs, line + 6, len - 6)))
			rc = SG_E_INTERNAL;
		line += len;
		if (*line)
			line++;
	}
	if (rc || !(se->cgprocs = strdup(procs.p))) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (p->memory_mb > 0)
		json_object_set_new(applied, "memory_mb", json_integer(p->memory_mb));
	if (quota > 0)
		json_object_set_new(applied, "cpus", json_real((double)quota / 100000.0));
	rc = SG_OK;
out:
	free(e);
	sg_buf_release(&procs);
	sg_exec_result_release(&r);
	return rc;
}

static sg_err ssh_exec(struct sg_env *env, const struct sg_exec *x,
		       struct sg_exec_result *out, struct sg_cancel *cancel,
		       struct sg_errinfo *err);

/*
 * Run `true` through the wrapper with the namespaces and cgroups in place,
 * so what the host does not allow is refused now, not at the first tool.
 */
static sg_err sshb_trial(struct ssh_env *se, const char *what,
			 struct sg_cancel *cancel, struct sg_errinfo *err)
{
	static const char *const argv[] = { "true", NULL };
	static const char *const envp[] = { "PATH=/usr/local/bin:/usr/bin:/bin", NULL };
	struct sg_exec x = { .argv = argv, .envp = envp, .max_output = SG_KiB,
			     .timeout_ms = SG_SSH_STEP_MS };
	struct sg_exec_result r;
	char where[300], last[200];
	sg_err rc;

	sg_exec_result_init(&r, SG_KiB);
	rc = ssh_exec(&se->base, &x, &r, cancel, err);
	if (!rc && (r.exit_code != 0 || r.timed_out)) {
		sshb_where(se->base.profile, where, sizeof(where));
		sshb_last_line(r.err.p, last, sizeof(last));
		rc = sg_err_set(err, SG_E_UNSUPPORTED,
				"%s cannot be honoured on %s: a trial command failed (%s)",
				what, where, last);
	}
	sg_exec_result_release(&r);
	return rc;
}

/* The installer's step (adapters/install.h): d, s, u as $1, $2, $3. */
static sg_err sshb_install_run(void *ctx, const char *script, const char *dir,
			       const char *sha, const char *upload, const void *in, size_t inlen,
			       char **reply, struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct ssh_env *se = ctx;
	struct sg_buf text = SG_BUF_INIT(SG_SSH_LINE_MAX);
	struct sg_exec_result r;
	sg_err rc = sg_buf_addf(&text, "d=$1 s=$2 u=$3\n%s", script);

	*reply = NULL;
	sg_exec_result_init(&r, SG_SSH_REPLY_MAX);
	if (rc) {
		rc = sg_err_set(err, rc, "out of memory");
		goto out;
	}
	rc = sshb_script(se, text.p, (const char *[]){ dir, sha, upload, NULL }, in, inlen,
			 SG_SSH_UPLOAD_MS, &r, cancel, err);
	if (!rc && !(*reply = sg_buf_take(&r.out, NULL)))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
out:
	sg_exec_result_release(&r);
	sg_buf_release(&text);
	return rc;
}

/*
 * What one provision carries from step to step: the probe's reply, the
 * host's home, the cgroup kind, the trial's text and what has been made on
 * the host so far (so a failure undoes exactly that).
 */
struct sshb_prov {
	struct ssh_env *se;
	struct sg_exec_result r;
	char where[300];
	char *slug, *probe, *home, *cgkind;
	struct sg_buf trial; /* what the trial run tests */
	struct sg_helper_bin bin;
	struct sg_install_cost cost;
	json_t *applied, *requested;
	bool fresh, made, leased, uploaded, netns, mount;
};

/* The lock, the nonce, the id and the local ssh client, before any login. */
static sg_err sshb_prov_open(struct sshb_prov *pv, struct sg_errinfo *err)
{
	struct ssh_env *se = pv->se;
	struct sg_env *env = &se->base;
	unsigned char rnd[8];
	sg_err rc;

	if (pthread_mutex_init(&se->lock, NULL) != 0) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot create a lock");
		goto out;
	}
	se->lock_ready = true;
	if (getentropy(rnd, sizeof(rnd)) != 0) {
		rc = sg_err_set(err, SG_E_INTERNAL, "no randomness: %s", strerror(errno));
		goto out;
	}
	sg_hex(rnd, sizeof(rnd), se->nonce);
	pv->slug = sg_slug_digest(env->identity, SG_SSH_SLUG_MAX);
	if (!pv->slug) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	snprintf(env->id, sizeof(env->id), "ssh-%s", pv->slug);
	rc = sshb_sock_path(se, err);
	if (rc)
		goto out;
	if (sshb_client_env(&se->cenv)) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	rc = sshb_base_argv(env->profile, se->sock, &se->ssh, err);
	if (!rc)
		rc = sg_helper_bin_open(env->helper_host, &pv->bin, err);
out:
	return rc;
}

/* The host must be Linux on this machine's architecture, with cat and mkdir. */
static sg_err sshb_prov_platform(struct sshb_prov *pv, const char *os,
				  struct sg_errinfo *err)
{
	static const char *const need[] = { "has_cat", "has_mkdir", NULL };
	struct utsname un;
	char *v = NULL;
	sg_err rc = SG_OK;

	if (strcmp(os, "Linux") != 0) {
		rc = sg_err_set(err, SG_E_UNSUPPORTED,
				"%s runs %s; the ssh backend needs Linux there (sg-helper is a Linux program)",
				pv->where, os);
		goto out;
	}
	v = sshb_kv(pv->probe, "arch");
	if (uname(&un) != 0 || !v || strcmp(v, un.machine) != 0) {
		rc = sg_err_set(err, SG_E_UNSUPPORTED,
				"%s is %s and sg-helper was built for %s", pv->where,
				v ? v : "of an unknown architecture", un.machine);
		goto out;
	}
	for (size_t i = 0; need[i]; i++)
		if (!sshb_flag(pv->probe, need[i])) {
			rc = sg_err_set(err, SG_E_UNSUPPORTED,
					"%s lacks the %s program the ssh backend needs",
					pv->where, need[i] + 4);
			goto out;
		}
out:
	free(v);
	return rc;
}

/*
 * The environment's paths on the host, and whether it is resumed: a
 * directory sandgate did not make (no marker) is never adopted, since it
 * would later be removed.
 */
static sg_err sshb_prov_places(struct sshb_prov *pv, const char *ws, struct sg_errinfo *err)
{
	struct ssh_env *se = pv->se;
	struct sg_env *env = &se->base;
	sg_err rc = SG_OK;

	se->dd_nonblock = sshb_flag(pv->probe, "dd_nonblock");
	if (!(se->envdir = sshb_fmt("%s/%s", ws, pv->slug)) ||
	    !(se->files = sshb_fmt("%s/workspace", se->envdir)) ||
	    !(se->rundir = sshb_fmt("%s/run", se->envdir)) ||
	    !(env->ctl_dir = sshb_fmt("%s/ctl", se->envdir)) ||
	    !(env->helper = sshb_fmt("%s/.cache/sandgate/sg-helper-%s", pv->home,
				     pv->bin.sha))) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (strlen(se->envdir) >= SG_PATH_MAX - 64) {
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT,
				"the workspace directory %s is too long", se->envdir);
		goto out;
	}
	if (sshb_flag(pv->probe, "envdir") && !sshb_flag(pv->probe, "marker")) {
		rc = sg_err_set(err, SG_E_PERMISSION,
				"%s on %s exists and is not a sandgate environment (it has no env.json); move it away or use another workspace",
				se->envdir, pv->where);
		goto out;
	}
	env->resumed = sshb_flag(pv->probe, "envdir") && sshb_flag(pv->probe, "marker");
	if (env->require_existing &&
	    !(env->resumed && sshb_flag(pv->probe, "files"))) {
		rc = sg_err_set(err, SG_E_WORKSPACE_LOST,
				"the workspace of identity \"%s\" is gone (%s on %s does not exist)",
				env->identity, se->files, pv->where);
		goto out;
	}
	pv->fresh = !env->resumed;
out:
	return rc;
}

/* Step 2: what the host is and has, and where the environment lives there. */
static sg_err sshb_prov_probe(struct sshb_prov *pv, struct sg_cancel *cancel,
			      struct sg_errinfo *err)
{
	struct sg_env *env = &pv->se->base;
	const struct sg_profile *p = env->profile;
	char *v = NULL, *ws = NULL, *os = NULL;
	sg_err rc;

	rc = sshb_script(pv->se, sshb_probe_sh,
			 (const char *[]){ p->workspace ? p->workspace : "", pv->slug,
					   pv->bin.sha, env->root, NULL },
			 NULL, 0, SG_SSH_STEP_MS, &pv->r, cancel, err);
	if (rc)
		goto out;
	pv->probe = sg_buf_take(&pv->r.out, NULL);
	if ((v = sshb_kv(pv->probe, "error")) || pv->r.exit_code != 0) {
		rc = sg_err_set(err, SG_E_UNAVAILABLE, "cannot prepare %s: %s", pv->where,
				v ? v : "the probe step failed");
		goto out;
	}
	pv->home = sshb_kv(pv->probe, "home");
	ws = sshb_kv(pv->probe, "workspace");
	os = sshb_kv(pv->probe, "os");
	if (!pv->home || !ws || !os || !sshb_clean_path(pv->home) || !sshb_clean_path(ws)) {
		rc = sg_err_set(err, SG_E_UNAVAILABLE,
				"%s gave no usable home or workspace directory", pv->where);
		goto out;
	}
	rc = sshb_prov_platform(pv, os, err);
	if (!rc)
		rc = sshb_prov_places(pv, ws, err);
out:
	free(v);
	free(ws);
	free(os);
	return rc;
}

/*
 * Steps 3 and 4: the namespaces that move the files and the network, and
 * the cgroup hierarchy a CPU or memory limit needs unless the profile lets
 * it be best effort.
 */
static sg_err sshb_prov_isolation(struct sshb_prov *pv, struct sg_errinfo *err)
{
	struct sg_env *env = &pv->se->base;
	const struct sg_profile *p = env->profile;
	sg_err rc;

	rc = sshb_namespaces(pv->se, pv->where, &pv->mount, &pv->netns, err);
	if (rc)
		goto out;
	if ((pv->mount && sg_buf_addf(&pv->trial, "root %s", env->root)) ||
	    (pv->netns && sg_buf_addf(&pv->trial, "%snetwork \"none\"",
				      pv->trial.len ? ", " : ""))) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (p->cpus > 0)
		json_object_set_new(pv->requested, "cpus", json_real(p->cpus));
	if (p->memory_mb > 0)
		json_object_set_new(pv->requested, "memory_mb", json_integer(p->memory_mb));
	if ((p->cpus > 0 && !sg_profile_best_effort(p, "cpus")) ||
	    (p->memory_mb > 0 && !sg_profile_best_effort(p, "memory_mb"))) {
		pv->cgkind = sshb_kv(pv->probe, "cgroup");
		if (!pv->cgkind)
			rc = sg_err_set(err, SG_E_UNSUPPORTED,
					"field \"%s\" (profile \"%s\") needs a cgroup hierarchy the login user can write on %s, and there is none",
					p->cpus > 0 ? "cpus" : "memory_mb", p->name, pv->where);
	}
out:
	return rc;
}

/* Step 5: sg-helper, once per user and version. */
static sg_err sshb_prov_helper(struct sshb_prov *pv, struct sg_cancel *cancel,
			       struct sg_errinfo *err)
{
	char *cache;
	struct sg_install in = { .ctx = pv->se, .nonce = pv->se->nonce,
				 .run = sshb_install_run };
	sg_err rc = SG_OK;

	if (sshb_flag(pv->probe, "helper"))
		goto out;
	cache = sshb_fmt("%s/.cache/sandgate", pv->home);
	in.dir = cache;
	/* One session: the program on its stdin, verified there. */
	sg_progress_begin("helper", "uploading sg-helper to %s", pv->where);
	rc = cache ? sg_install_helper(&in, &pv->bin, &pv->cost, cancel, err)
		   : sg_err_set(err, SG_E_INTERNAL, "out of memory");
	sg_progress_end(rc);
	free(cache);
	if (!rc)
		pv->uploaded = true;
out:
	return rc;
}

/* Step 6: the environment's directories, marker and lease. */
static sg_err sshb_prov_setup(struct sshb_prov *pv, struct sg_cancel *cancel,
			      struct sg_errinfo *err)
{
	struct ssh_env *se = pv->se;
	struct sg_env *env = &se->base;
	char *marker = NULL, *lease_text = NULL;
	char host[256] = "";
	sg_err rc;

	if (pv->fresh && !(marker = sshb_marker(se))) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	if (gethostname(host, sizeof(host) - 1) != 0)
		snprintf(host, sizeof(host), "unknown");
	free(se->lease);
	se->lease = sg_slug_digest(env->session, SG_SSH_SLUG_MAX);
	if (!se->lease || !(lease_text = sshb_fmt("%s %ld %lld", host, (long)getpid(),
						  (long long)time(NULL)))) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	pv->made = pv->fresh;
	pv->leased = true;
	rc = sshb_script(se, sshb_setup_sh,
			 (const char *[]){ se->envdir, marker ? marker : "", se->lease,
					   lease_text, se->bind_src ? env->root : "",
					   env->helper, NULL },
			 NULL, 0, SG_SSH_STEP_MS, &pv->r, cancel, err);
	if (!rc && pv->r.exit_code != 0)
		rc = sg_err_set(err, SG_E_PERMISSION,
				"cannot create the environment's directory %s on %s: %.160s",
				se->envdir, pv->where, pv->r.err.p);
	if (!rc)
		sg_crashpoint("adapter:created");
	if (!rc && sshb_flag(pv->r.out.p, "nomount"))
		rc = sg_err_set(err, SG_E_UNSUPPORTED,
				"root %s does not exist on %s and cannot be created there (create it once, e.g. as root: mkdir %s)",
				env->root, pv->where, env->root);
out:
	free(marker);
	free(lease_text);
	return rc;
}

/* Step 7: limits, then one trial run of everything a command goes through. */
static sg_err sshb_prov_trial(struct sshb_prov *pv, struct sg_cancel *cancel,
			      struct sg_errinfo *err)
{
	const struct sg_profile *p = pv->se->base.profile;
	sg_err rc = SG_OK;

	if (pv->cgkind) {
		rc = sshb_limits(pv->se, pv->cgkind, pv->applied, cancel, err);
		if (rc)
			goto out;
		if (sg_buf_addf(&pv->trial, "%s%s", pv->trial.len ? ", " : "",
				p->memory_mb > 0 && p->cpus > 0 ? "cpus and memory_mb"
				: p->memory_mb > 0 ? "memory_mb" : "cpus")) {
			rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
			goto out;
		}
	}
	if (pv->trial.len)
		rc = sshb_trial(pv->se, pv->trial.p, cancel, err);
out:
	return rc;
}

/*
 * Commands see the host's whole filesystem (a mount namespace only moves
 * the workspace); the rest of isolation is what sg-helper observes from
 * inside.
 */
static sg_err sshb_prov_facts(struct sshb_prov *pv, struct sg_errinfo *err)
{
	struct ssh_env *se = pv->se;

	se->base.facts = json_pack(
		"{s:{s:b}, s:s, s:s, s:{s:O, s:O}, s:{s:s, s:s, s:s, s:s, s:s, s:b},"
		" s:{s:I, s:i, s:I}}",
		"isolation", "host_filesystem_restricted", 0,
		"safety_class", "remote_host", "mechanism",
		pv->mount || pv->netns ? "ssh+namespaces" : "ssh", "resources",
		"requested", pv->requested, "applied", pv->applied, "ssh", "host",
		pv->where, "directory", se->files, "view",
		pv->mount ? "mount namespace" : "direct", "network",
		pv->netns ? "network namespace" : "host", "cgroup",
		pv->cgkind ? pv->cgkind : "none", "helper_uploaded", pv->uploaded,
		"helper_install", "bytes", (json_int_t)pv->cost.bytes, "requests",
		pv->cost.requests, "ms", (json_int_t)pv->cost.ms);
	return se->base.facts ? SG_OK : sg_err_set(err, SG_E_INTERNAL, "out of memory");
}

/*
 * A failed create leaves nothing behind: directory, cgroups, master; a
 * failed attach leaves no lease of this session.
 */
static void sshb_prov_undo(struct sshb_prov *pv)
{
	struct ssh_env *se = pv->se;

	if (pv->made || pv->leased || se->cgroups.n) {
		struct sg_strv args = SG_STRV_INIT;
		struct sg_errinfo ignore = { 0 };
		/* Often after a cancel: the shutdown's deadline bounds it. */
		int64_t ms = sg_cancel_quit_clip(SG_SSH_CLEANUP_MS);

		if (ms <= 0 ||
		    sg_strv_addv(&args, (const char *[]){ se->envdir,
							   se->lease ? se->lease : "-",
							   pv->made ? "remove" : "detach",
							   "0", NULL }) ||
		    sg_strv_addv(&args, sg_strv_get(&se->cgroups)) ||
		    sshb_script(se, sshb_teardown_sh, sg_strv_get(&args), NULL, 0, ms,
				&pv->r, NULL, &ignore) ||
		    pv->r.exit_code != 0)
			se->base.may_remain = pv->made; /* for envs gc, by its marker */
		sg_strv_release(&args);
	}
	sshb_master_stop(se);
}

static sg_err ssh_provision(struct sg_env *env, struct sg_cancel *cancel,
			    struct sg_errinfo *err)
{
	struct sshb_prov pv = { .se = (struct ssh_env *)env,
				.trial = SG_BUF_INIT(SG_ERR_MSG),
				.bin = { .fd = -1 },
				.applied = json_object(), .requested = json_object() };
	sg_err rc;

	sg_exec_result_init(&pv.r, SG_SSH_REPLY_MAX);
	sshb_where(env->profile, pv.where, sizeof(pv.where));
	rc = sshb_prov_open(&pv, err);
	if (rc)
		goto out;

	/* 1. The master connection: host key, login. */
	sg_progress_begin("connect", "logging in to %s", pv.where);
	rc = sshb_master_ensure(pv.se, cancel, err);
	sg_progress_end(rc);
	if (!rc)
		rc = sshb_prov_probe(&pv, cancel, err);
	if (!rc)
		rc = sshb_prov_isolation(&pv, err);
	if (!rc)
		rc = sshb_prov_helper(&pv, cancel, err);
	if (!rc)
		rc = sshb_prov_setup(&pv, cancel, err);
	if (!rc)
		rc = sshb_prov_trial(&pv, cancel, err);
	if (!rc)
		rc = sshb_prov_facts(&pv, err);
out:
	if (rc && pv.se->master)
		sshb_prov_undo(&pv);
	json_decref(pv.applied);
	json_decref(pv.requested);
	sg_exec_result_release(&pv.r);
	sg_buf_release(&pv.trial);
	free(pv.slug);
	sg_helper_bin_close(&pv.bin);
	free(pv.probe);
	free(pv.home);
	free(pv.cgkind);
	return rc;
}

/* ---- exec ----------------------------------------------------------- */

/*
 * `exec <sg-helper> job --dir <run>/<token> ... args` for the login shell:
 * the job's options only; the environment and argv travel on stdin.
 */
static sg_err sshb_job_line(const char *helper, const char *dir, const char *args,
			    struct sg_buf *line)
{
	sg_err rc = sg_buf_adds(line, "exec ");

	if (!rc)
		rc = sg_shquote(line, helper);
	if (!rc)
		rc = sg_buf_adds(line, " job --dir ");
	if (!rc)
		rc = sg_shquote(line, dir);
	if (!rc)
		rc = sg_buf_addf(line, " %s", args);
	return rc;
}

/*
 * After a timeout or a cancel: only the local client died, so kill the
 * command's group on the host through the master (not a new connection:
 * when the master is gone, the tied job has killed it already).  The
 * caller's token has fired, so the kill's own limit is clipped to the
 * shutdown's deadline (cancel.h); with no time left it is not tried, and
 * the master's end at teardown ends the job's session, whose tie kills
 * the command.
 */
static void sshb_kill(struct ssh_env *se, const char *dir)
{
	struct sg_exec_result r;
	struct sg_errinfo e = { 0 };
	struct sg_buf line = SG_BUF_INIT(SG_SSH_LINE_MAX);
	int64_t ms = sg_cancel_quit_clip(SG_SSH_KILL_MS);

	if (!sshb_master_alive(se->sock))
		return;
	if (ms <= 0) {
		sg_log_warn("no time is left in the shutdown budget to stop a command on %s; the end of its connection stops it",
			    se->base.id);
		return;
	}
	sg_exec_result_init(&r, SG_KiB);
	if (!sshb_job_line(se->base.helper, dir, "--kill", &line) &&
	    (sshb_run(se, line.p, NULL, 0, ms, false, -1, &r, NULL, &e) ||
	     r.exit_code != 0 || r.timed_out))
		sg_log_warn("could not stop a command on %s after its timeout or cancel: %s",
			    se->base.id, e.msg[0] ? e.msg : r.err.p);
	sg_exec_result_release(&r);
	sg_buf_release(&line);
}

/*
 * The login shell's line (`exec sg-helper job ...`) and the job's spec for
 * its stdin; the error names what cannot be sent.
 */
static sg_err sshb_exec_request(const struct sg_job_line *l, const struct sg_exec *x,
				const char *root, struct sg_buf *line, struct sg_buf *in,
				struct sg_errinfo *err)
{
	struct sg_buf words = SG_BUF_INIT(SG_SSH_LINE_MAX);
	sg_err rc = sg_job_words(l, x, root, &words, NULL);

	if (!rc) {
		/* sg_job_words begins with the helper and "job"; the line says exec. */
		rc = sg_buf_adds(line, "exec ");
		if (!rc)
			rc = sg_buf_add(line, words.p, words.len);
	}
	if (!rc)
		rc = sg_job_spec(x, in);
	if (rc)
		rc = sg_err_set(err, rc, rc == SG_E_INVALID_ARGUMENT ? "an empty command"
					 : rc == SG_E_TOO_LARGE
						 ? "the command and its environment are too large to send over ssh"
						 : "out of memory");
	sg_buf_release(&words);
	return rc;
}

/*
 * The job's reply came whole: stdout's head stays where it is, stderr's
 * head replaces ssh's, and the job's status becomes the command's.
 */
static void sshb_exec_done(const struct sg_job_reply *jr, size_t max,
			   struct sg_exec_result *out)
{
	struct sg_buf e = SG_BUF_INIT(SG_HELPER_STDERR);

	sg_buf_add_clipped(&e, out->out.p + jr->err_at, out->out.len - jr->err_at);
	/* The capture counted the whole reply: stdout's own count, or none. */
	out->total = out->lines = 0;
	sg_buf_reset(&out->tail);
	out->truncated = false;
	sg_buf_truncate(&out->out, sg_job_tail(jr, out->out.p, max, out));
	out->out.max = max;
	sg_buf_reset(&out->err);
	if (sg_buf_add(&out->err, e.p, e.len))
		sg_buf_reset(&out->err);
	sg_job_status(jr, max, out);
	sg_buf_release(&e);
}

/*
 * No reply from the job: ssh's exit 255 or a signal is the transport's
 * (the master's check tells a lost connection from a refused start); any
 * other exit is the helper's failure.
 */
static sg_err sshb_exec_lost(struct ssh_env *se, struct sg_exec_result *out,
			     struct sg_errinfo *err)
{
	char where[300], last[200];
	sg_err rc;

	sshb_where(se->base.profile, where, sizeof(where));
	sshb_last_line(out->err.p, last, sizeof(last));
	if (out->exit_code == 255 || out->signal) {
		if (!sshb_master_ctl(se, "check"))
			rc = sg_err_set(err, SG_E_UNAVAILABLE,
					"the ssh connection to %s was lost%s", where,
					out->out.len ? " while the command ran; its outcome is unknown"
						     : "; the command's outcome is unknown");
		else
			rc = sg_err_set(err, SG_E_UNAVAILABLE,
					"ssh could not start the command on %s: %s", where, last);
	} else {
		rc = sg_err_set(err, SG_E_PROVIDER,
				"sg-helper job gave no result on %s (exit %d): %s", where,
				out->exit_code, last);
	}
	sg_buf_reset(&out->out);
	return rc;
}

/*
 * A file step (`sg-helper fs ...`) needs no mount namespace to see the
 * workspace at root: the helper opens every path beneath --host-root, the
 * files' own directory, as the local backend's steps do.  Making and
 * ending a mount namespace costs a read_file a kernel grace period or
 * two, so such a step runs without one (nor a network namespace: the
 * helper never uses the network); *argv (new) is its argv with
 * --host-root, or NULL for every other command (and an unconfined step),
 * which keeps the view.
 */
static sg_err sshb_file_step(const struct ssh_env *se, const struct sg_exec *x,
			     const char ***argv, struct sg_errinfo *err)
{
	const char *const *a = x->argv;
	size_t n = 0;

	*argv = NULL;
	if (!se->bind_src || !a[0] || strcmp(a[0], se->base.helper) != 0 || !a[1] ||
	    strcmp(a[1], "fs") != 0 || !a[2])
		return SG_OK;
	/*
	 * Unconfined, a step reaches the environment's files outside root,
	 * which --host-root would take for this host's and refuse (fs.c).
	 */
	for (; a[n]; n++)
		if (strcmp(a[n], "--unconfined") == 0)
			return SG_OK;
	*argv = calloc(n + 3, sizeof(**argv));
	if (!*argv)
		return sg_err_set(err, SG_E_INTERNAL, "out of memory");
	memcpy(*argv, a, 3 * sizeof(*a));
	(*argv)[3] = "--host-root";
	(*argv)[4] = se->files;
	memcpy(*argv + 5, a + 3, (n - 3) * sizeof(*a));
	return SG_OK;
}

/*
 * One exec is one ssh session running `sg-helper job --tie --spec-stdin`
 * (helper/job.c): the job supervises the command on the host and
 * prints its reply (adapters/jobreply.h) on stdout, so ssh's own exit
 * status and stderr speak only of the transport.
 */
static sg_err ssh_exec(struct sg_env *env, const struct sg_exec *x,
		       struct sg_exec_result *out, struct sg_cancel *cancel,
		       struct sg_errinfo *err)
{
	struct ssh_env *se = (struct ssh_env *)env;
	struct sg_buf line = SG_BUF_INIT(SG_SSH_LINE_MAX);
	struct sg_buf in = SG_BUF_INIT(SG_JOB_SPEC_MAX + SG_MAX_FRAME);
	struct sg_job_reply jr;
	char dir[SG_PATH_MAX], mark[SG_JOB_MARK_SIZE], where[300];
	size_t max = x->max_output;
	/*
	 * The job waits as long as the command may run, and a little more; a
	 * step without a timeout of its own (file tools, process/list) gets
	 * SG_SSH_UNTIMED_MS, so a helper that hangs on the host ends there
	 * even when no kill can reach it.  Here the cancel token bounds it.
	 */
	int64_t limit_ms = x->timeout_ms > 0 ? x->timeout_ms : SG_SSH_UNTIMED_MS;
	struct sg_job_line l = {
		.helper = env->helper, .dir = dir, .mark = mark,
		.wait_ms = limit_ms + SG_SSH_KILL_MS,
		.spec_stdin = true, .tie = true, .rm = true,
		.bind = se->bind_src, .bind_to = se->bind_src ? env->root : NULL,
		.tmp = se->tmp_src,
		.netns = se->netns, .cgroups = se->cgprocs, .keep_tail = out->keep_tail,
	};
	struct sg_exec fx;
	const char **fargv = NULL;
	sg_err rc = sshb_file_step(se, x, &fargv, err);

	snprintf(dir, sizeof(dir), "%s/%s-%u", se->rundir, se->nonce,
		 atomic_fetch_add(&se->seq, 1u));
	sg_job_mark(mark);
	if (fargv) {
		fx = *x;
		fx.argv = fargv;
		fx.cwd = NULL;
		x = &fx;
		l.bind = l.bind_to = l.tmp = NULL;
		l.netns = false;
	}
	if (!rc)
		rc = sshb_exec_request(&l, x, fargv ? se->files : env->root, &line, &in, err);
	if (rc)
		goto out;
	/*
	 * Room for the job's trailer and stderr head after stdout's head: the
	 * capture's bound is raised for this one run and put back below.
	 */
	out->out.max = max + SG_HELPER_STDERR + SG_KiB;
	rc = sshb_run(se, line.p, in.p, in.len, limit_ms + 2 * SG_SSH_KILL_MS, true, -1, out,
		      cancel, err);
	sg_job_parse(out->out.p, out->out.len, mark, &jr);
	if (sg_cancel_check(cancel) || out->timed_out) {
		/* Only the local client was killed; now the command. */
		sshb_kill(se, dir);
		if (out->timed_out) {
			out->exit_code = -1;
			out->signal = SIGKILL;
		}
		sg_buf_reset(&out->out);
		goto out;
	}
	if (!x->timeout_ms && jr.state == SG_JOB_IS_DONE && jr.timed_out) {
		sshb_where(env->profile, where, sizeof(where));
		rc = sg_err_set(err, SG_E_TIMEOUT,
				"a step on %s did not finish within %d s, the most the ssh backend waits for one without a timeout",
				where, SG_SSH_UNTIMED_MS / 1000);
		sg_buf_reset(&out->out);
		goto out;
	}
	if (rc)
		goto out;
	if (jr.state == SG_JOB_IS_DONE)
		sshb_exec_done(&jr, max, out);
	else
		rc = sshb_exec_lost(se, out, err);
out:
	out->out.max = max;
	free(fargv);
	sg_buf_release(&line);
	sg_buf_release(&in);
	return rc;
}

/* ---- files ------------------------------------------------------------ */

/*
 * Exports: the file's bytes over the master (sg_exec_read_file_sh), written to
 * fd as they arrive, so the gateway's memory stays flat whatever the size.
 * No job around it (the bytes are the whole reply), so the path is the
 * host's: under a mount namespace, root is the files directory there.
 * The read is killed once its output stays silent for the idle limit.
 */
static sg_err ssh_get_file(struct sg_env *env, const char *path, int fd, size_t max,
			   struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct ssh_env *se = (struct ssh_env *)env;
	struct sg_buf line = SG_BUF_INIT(SG_SSH_LINE_MAX), host = SG_BUF_INIT(SG_PATH_MAX);
	struct sg_exec_result r;
	size_t rn = strlen(env->root);
	char where[300], last[200];
	sg_err rc;

	sg_exec_result_init(&r, max);
	if (se->bind_src && strncmp(path, env->root, rn) == 0 &&
	    (path[rn] == '/' || path[rn] == '\0'))
		rc = sg_buf_addf(&host, "%s%s", se->bind_src, path + rn);
	else
		rc = sg_buf_adds(&host, path);
	if (!rc)
		rc = sshb_script_line(sg_exec_read_file_sh, "sg",
				      (const char *[]){ host.p, se->dd_nonblock ? "1" : "0", NULL },
				      &line);
	if (rc) {
		rc = sg_err_set(err, rc, "the path %s is too long", path);
		goto out;
	}
	/* Connecting again has its own time limit; the idle one is the read's. */
	rc = sshb_master_ensure(se, cancel, err);
	if (rc)
		goto out;
	rc = sshb_run(se, line.p, NULL, 0, 0, false, fd, &r, cancel, err);
	if (rc)
		goto out;
	sshb_where(env->profile, where, sizeof(where));
	sshb_last_line(r.err.p, last, sizeof(last));
	if (r.stalled)
		rc = sg_err_set(err, SG_E_TIMEOUT,
				"no byte of %s came from %s for %lld s, so the export was stopped (the host stalled, or the file is no longer a regular one)",
				path, where, (long long)(sshb_export_idle_ms() / 1000));
	else if (r.exit_code == 255 || r.signal)
		rc = sg_err_set(err, SG_E_UNAVAILABLE, "ssh could not read %s on %s: %s",
				path, where, last);
	else if (r.exit_code == 3)
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT,
				"%s on %s is not a regular file (it changed after it was checked)",
				path, where);
	else if (r.exit_code == 4)
		rc = sg_err_set(err, SG_E_NOT_FOUND, "%s does not exist on %s", path, where);
	else if (r.exit_code != 0)
		rc = sg_err_set(err, SG_E_NOT_FOUND, "%s cannot be read on %s: %s", path,
				where, last);
	else if (r.truncated)
		rc = sg_err_set(err, SG_E_TOO_LARGE, "%s is larger than %zu bytes", path, max);
out:
	sg_exec_result_release(&r);
	sg_buf_release(&line);
	sg_buf_release(&host);
	return rc;
}

/* ---- teardown and release ------------------------------------------- */

static sg_err ssh_teardown(struct sg_env *env, enum sg_fate fate,
			   struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct ssh_env *se = (struct ssh_env *)env;
	const struct sg_profile *p = env->profile;
	struct sg_strv args = SG_STRV_INIT;
	struct sg_exec_result r;
	const char *mode = fate == SG_FATE_REMOVE ? "remove"
			   : fate == SG_FATE_KEEP ? "keep" : "detach";
	char deadline[32], *busy = NULL;
	sg_err rc = SG_OK;

	sg_exec_result_init(&r, SG_SSH_REPLY_MAX);
	if (!se->envdir || !se->sock)
		goto out;
	/*
	 * A kept environment that is not persistent is removed once it has
	 * been idle for lifetime_seconds: the deadline is left in the
	 * directory for `sandgate envs gc` (README.md).
	 */
	snprintf(deadline, sizeof(deadline), "%lld",
		 fate == SG_FATE_KEEP && !p->persistent
			 ? (long long)time(NULL) + (long long)p->lifetime_seconds : 0LL);
	if (sg_strv_addv(&args, (const char *[]){ se->envdir, se->lease ? se->lease : "-",
						   mode, deadline, NULL }) ||
	    sg_strv_addv(&args, sg_strv_get(&se->cgroups))) {
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
		goto out;
	}
	rc = sshb_script(se, sshb_teardown_sh, sg_strv_get(&args), NULL, 0,
			 SG_SSH_STEP_MS, &r, cancel, err);
	if (!rc && r.exit_code != 0)
		rc = sg_err_set(err, SG_E_PROVIDER, "cannot %s %s on the host: %.160s",
				fate == SG_FATE_REMOVE ? "remove" : "update", se->envdir,
				r.err.p);
	if (rc)
		goto out;
	if ((busy = sshb_kv(r.out.p, "busy")))
		sg_log_warn("the cgroup %s on the host still has processes; it was left", busy);
	if (sshb_flag(r.out.p, "shared"))
		sg_log_info("%s is still used by another session; it was kept", se->envdir);
	if (sshb_flag(r.out.p, "nomarker"))
		sg_log_warn("%s has no env.json; it was not removed", se->envdir);
	sg_strv_release(&se->cgroups);
out:
	sshb_master_stop(se);
	free(busy);
	sg_strv_release(&args);
	sg_exec_result_release(&r);
	return rc;
}

static void ssh_release(struct sg_env *env)
{
	struct ssh_env *se = (struct ssh_env *)env;

	sg_env_release_base(env);
	sg_strv_release(&se->ssh);
	sg_strv_release(&se->cenv);
	sg_strv_release(&se->cgroups);
	free(se->sock);
	free(se->envdir);
	free(se->files);
	free(se->rundir);
	free(se->lease);
	free(se->bind_src);
	free(se->tmp_src);
	free(se->cgprocs);
	if (se->lock_ready)
		pthread_mutex_destroy(&se->lock);
	se->lock_ready = false;
}

/* ---- list and destroy (operators) ----------------------------------- */

/*
 * One script over a connection of its own (no master: operator commands
 * are one-shot).  SG_OK when it ran; *out receives its stdout (new).
 */
static sg_err sshb_oneshot(const struct sg_profile *p, const char *script,
			   const char *const *args, char **out,
			   struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct sg_strv av = SG_STRV_INIT, cenv = SG_STRV_INIT;
	struct sg_buf line = SG_BUF_INIT(SG_SSH_LINE_MAX);
	struct sg_exec_result r;
	char where[300];
	sg_err rc;

	*out = NULL;
	sg_exec_result_init(&r, SG_SSH_REPLY_MAX);
	rc = sshb_script_line(script, "sg", args, &line);
	if (!rc && sshb_client_env(&cenv))
		rc = SG_E_INTERNAL;
	if (rc) {
		rc = sg_err_set(err, rc, "out of memory");
		goto out;
	}
	rc = sshb_base_argv(p, NULL, &av, err);
	if (!rc && sg_strv_addv(&av, (const char *[]){ "--", p->host, line.p, NULL }))
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
	if (rc)
		goto out;
	rc = sshb_spawn(&av, &cenv, NULL, 0, SG_SSH_MASTER_MS, false, -1, &r, cancel, err);
	if (rc)
		goto out;
	if (r.exit_code == 255 || r.signal || r.timed_out) {
		rc = sshb_connect_error(p, r.err.p, err);
		goto out;
	}
	if (r.exit_code != 0) {
		sshb_where(p, where, sizeof(where));
		rc = sg_err_set(err, SG_E_PROVIDER, "a step on %s failed: %.160s", where,
				r.err.p);
		goto out;
	}
	*out = sg_buf_take(&r.out, NULL);
	if (!*out)
		rc = sg_err_set(err, SG_E_INTERNAL, "out of memory");
out:
	sg_exec_result_release(&r);
	sg_buf_release(&line);
	sg_strv_release(&av);
	sg_strv_release(&cenv);
	return rc;
}

static void sshb_copy(char *dst, size_t n, json_t *m, const char *key)
{
	const char *s = json_string_value(json_object_get(m, key));

	snprintf(dst, n, "%s", s ? s : "");
}

/*
 * Whether a lease ("<host> <pid> <since>") still has a live gateway.  A
 * lease from this machine whose pid is gone is a crashed gateway's; one
 * from another machine cannot be judged here and counts as live.
 */
static bool sshb_lease_live(const char *text, size_t len)
{
	char host[256] = "", mine[256] = "", buf[320];
	long pid = 0;

	if (len >= sizeof(buf))
		return true;
	memcpy(buf, text, len);
	buf[len] = '\0';
	if (sscanf(buf, "%255s %ld", host, &pid) != 2 || gethostname(mine, sizeof(mine) - 1))
		return true;
	if (strcmp(host, mine) != 0)
		return true;
	return !(kill((pid_t)pid, 0) != 0 && errno == ESRCH);
}

static sg_err ssh_list(const struct sg_profile *p, const char *state_dir,
		       sg_env_list_cb cb, void *payload, struct sg_cancel *cancel,
		       struct sg_errinfo *err)
{
	const char *args[] = { p->workspace ? p->workspace : "", NULL };
	char *text = NULL, *e = NULL;
	sg_err rc;

	(void)state_dir; /* the host's own directories are the registry */
	rc = sshb_oneshot(p, sshb_list_sh, args, &text, cancel, err);
	if (rc)
		goto out;
	if ((e = sshb_kv(text, "error"))) {
		rc = sg_err_set(err, SG_E_PROVIDER, "cannot list environments: %s", e);
		goto out;
	}
	{
		struct sg_env_info info = { 0 };
		long live = 0;
		bool have = false;

		for (const char *line = text;; ) {
			size_t len = strcspn(line, "\n");
			long long expires = 0;
			int used = 0;

			/* An environment is complete when the next starts. */
			if (have && (!*line || strncmp(line, "env=", 4) == 0)) {
				snprintf(info.state, sizeof(info.state), "%s",
					 live > 0 ? "attached"
					 : info.expires > 0 && info.expires <= (long long)time(NULL)
						 ? "expired" : "detached");
				have = false;
				if (cb(&info, payload))
					break;
			}
			if (!*line)
				break;
			if (strncmp(line, "env=", 4) == 0 &&
			    sscanf(line + 4, "%lld %n", &expires, &used) == 1 && used > 0 &&
			    (size_t)used + 4 <= len) {
				json_t *m = json_loadb(line + 4 + used, len - 4 - (size_t)used,
						       0, NULL);

				memset(&info, 0, sizeof(info));
				info.expires = expires;
				live = 0;
				if (json_is_object(m)) {
					sshb_copy(info.id, sizeof(info.id), m, "id");
					sshb_copy(info.identity, sizeof(info.identity), m, "identity");
					sshb_copy(info.session, sizeof(info.session), m, "session");
					/* The profile that reaches it, for `envs rm` here. */
					snprintf(info.profile, sizeof(info.profile), "%s", p->name);
					info.created = json_integer_value(json_object_get(m, "created"));
					info.persistent = json_is_true(json_object_get(m, "persistent"));
					have = info.id[0] != '\0';
				}
				json_decref(m);
			} else if (strncmp(line, "lease=", 6) == 0 && have &&
				   sshb_lease_live(line + 6, len - 6)) {
				live++;
			}
			line += len;
			if (*line)
				line++;
		}
	}
	rc = SG_OK;
out:
	free(text);
	free(e);
	return rc;
}

/*
 * The master a gateway of this machine started for environment id, from
 * its owner file (dir/name, "<id>\n<pid>\n"), ended, and its files removed.
 */
static void sshb_close_master(const struct sg_profile *p, const struct sg_strv *cenv,
			      const char *dir, const char *name, const char *id)
{
	char *owner = sshb_fmt("%s/%s", dir, name), *sock = NULL, text[256] = "";
	struct sg_strv ssh = SG_STRV_INIT;
	struct sg_errinfo ignore = { 0 };
	size_t idn = strlen(id);
	ssize_t n = 0;
	int fd = owner ? open(owner, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;

	if (fd >= 0) {
		n = read(fd, text, sizeof(text) - 1);
		close(fd);
	}
	if (n <= 0 || strncmp(text, id, idn) != 0 || text[idn] != '\n')
		goto out;
	sock = sshb_fmt("%s/%.*s.sock", dir, (int)(strlen(name) - 6), name);
	if (!sock || sshb_base_argv(p, sock, &ssh, &ignore))
		goto out;
	sshb_master_end(&ssh, cenv, p->host, sock, (pid_t)strtol(text + idn + 1, NULL, 10));
	unlink(sock);
	unlink(owner);
out:
	sg_strv_release(&ssh);
	free(sock);
	free(owner);
}

/*
 * End every master this machine's gateways started for environment id:
 * one that was killed leaves its master behind (ControlPersist), and the
 * master keeps its dead clients' sessions open on the host, so their
 * jobs never learn that nobody waits for them.  The masters' sockets are
 * under the state directory, or in the private /tmp fallback
 * (sshb_sock_path), each with its owner file.
 */
static void sshb_close_masters(const struct sg_profile *p, const char *state_dir,
			       const char *id)
{
	char *dirs[2] = { state_dir ? sshb_fmt("%s/ssh", state_dir) : NULL,
			  sshb_fmt("/tmp/sandgate-ssh-%ld", (long)getuid()) };
	struct sg_strv cenv = SG_STRV_INIT;

	if (sshb_client_env(&cenv))
		goto out;
	for (size_t i = 0; i < 2; i++) {
		struct dirent *e;
		struct stat st;
		DIR *d;

		/* Only a private directory of ours, as where the sockets go. */
		if (!dirs[i] || lstat(dirs[i], &st) != 0 || !S_ISDIR(st.st_mode) ||
		    st.st_uid != getuid() || (st.st_mode & 077) || !(d = opendir(dirs[i])))
			continue;
		while ((e = readdir(d))) {
			size_t n = strlen(e->d_name);

			if (n > 6 && strcmp(e->d_name + n - 6, ".owner") == 0)
				sshb_close_master(p, &cenv, dirs[i], e->d_name, id);
		}
		closedir(d);
	}
out:
	sg_strv_release(&cenv);
	free(dirs[0]);
	free(dirs[1]);
}

static sg_err ssh_destroy(const struct sg_profile *p, const char *state_dir,
			  const char *id, struct sg_cancel *cancel,
			  struct sg_errinfo *err)
{
	const char *slug = strncmp(id, "ssh-", 4) == 0 ? id + 4 : NULL;
	char *text = NULL;
	sg_err rc;

	if (!slug || !*slug || strchr(slug, '/') || strcmp(slug, ".") == 0 ||
	    strcmp(slug, "..") == 0)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "%s is not an ssh environment id", id);
	/* First here, so the commands' sessions on the host end too. */
	sshb_close_masters(p, state_dir, id);
	rc = sshb_oneshot(p, sshb_destroy_sh,
			  (const char *[]){ p->workspace ? p->workspace : "", slug, NULL },
			  &text, cancel, err);
	if (!rc && sshb_flag(text, "missing"))
		rc = sg_err_set(err, SG_E_NOT_FOUND, "no environment %s on %s", id, p->host);
	free(text);
	return rc;
}

/* "found" when path, ~ expanded as ssh does, is a file this user can read. */
static const char *sshb_found(const char *path)
{
	char local[SG_PATH_MAX];

	return sshb_local_path(path, local, sizeof(local)) && access(local, R_OK) == 0
		       ? "found" : "missing";
}

/*
 * Where the login comes from, for `sandgate probe`: the identity file (or
 * the agent when there is none) and the known hosts file the host key is
 * checked against.  Presence only, never a value.
 */
static void ssh_credentials(const struct sg_profile *p, json_t *out)
{
	const char *agent = sg_profile_env(p, SSH_ENV_AGENT, NULL);

	if (p->identity_file)
		json_object_set_new(out, "identity_file", json_string(sshb_found(p->identity_file)));
	else
		json_object_set_new(out, SSH_ENV_AGENT,
				    json_string(agent ? "found" : "missing"));
	/* Without the field, ssh's own default: ~ is the account's home. */
	json_object_set_new(out, "known_hosts_file",
			    json_string(sshb_found(p->known_hosts_file ? p->known_hosts_file
							 : "~/.ssh/known_hosts")));
}

const struct sg_adapter sg_adapter_ssh = {
	.name = "ssh",
	.caps = SG_CAP_LIST | SG_CAP_FILES,
	.env_size = sizeof(struct ssh_env),
	.fields = ssh_fields,
	.validate = ssh_validate,
	.provision = ssh_provision,
	.exec = ssh_exec,
	.get_file = ssh_get_file,
	.teardown = ssh_teardown,
	.list = ssh_list,
	.destroy = ssh_destroy,
	.release = ssh_release,
	.credentials = ssh_credentials,
};
