/*
 * sandbox.c - who a local command runs as, and what it sees of this host
 * (sandbox.h says what holds).
 *
 * Before, commands ran as root of the host's initial user namespace
 * wherever sandgate did: bubblewrap dropped their capabilities, but a
 * root-owned sysctl (/proc/sys/kernel/core_pattern) still opened for
 * writing, which ran a workspace script as the host's root, and the
 * read-only /etc still showed /etc/shadow.  Root's files stay closed to a
 * user that is not root, and a user namespace of its own gives that user
 * no capability on the host, whatever the permission mode.
 */
#define _GNU_SOURCE /* O_PATH, asprintf */
#include "adapters/local/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/limits.h"
#include "base/log.h"
#include "core/digest.h"
#include "helper/helper.h"
#include "adapters/hostutil.h"

/*
 * How deep sg_sandbox_own follows a tree: each level holds a directory
 * open.  A workspace deeper than this (made by an older sandgate that ran
 * commands as root) keeps root's files below it, and says so in the log.
 */
#define SANDBOX_OWN_DEPTH 256

/*
 * The copy of the host's /etc: how deep, how many entries, how many bytes,
 * its fingerprint's text, and how long a copy no provision uses is kept.
 */
#define SANDBOX_ETC_DEPTH 8
#define SANDBOX_ETC_ENTRIES 20000
#define SANDBOX_ETC_BYTES (64 * 1024 * 1024)
#define SANDBOX_ETC_FP_MAX (8 * 1024 * 1024)
#define SANDBOX_ETC_KEEP_S (7 * 24 * 3600)

/*
 * What programs need of /etc, and nothing else of it: name resolution,
 * certificates, the loader's cache, alternatives, time, locale, shells'
 * profiles and the language runtimes' own settings.  Entries missing on
 * this host are skipped; passwd and group are the sandbox's own, and
 * mtab is a link to the sandbox's mounts, not the host's (open_etc).
 * Left out on purpose, though programs read them: hostname (the host's
 * name; the sandbox has its own), and the files that hold credentials as
 * often as settings (environment's proxies, gitconfig, npmrc, pip.conf,
 * wgetrc), however readable.
 */
static const char *const etc_names[] = {
	"hosts", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf",
	"services", "protocols", "networks", "rpc", "ethertypes",
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"ssl", "ca-certificates", "ca-certificates.conf", "pki", "crypto-policies",
	"alternatives", "localtime", "timezone", "os-release", "lsb-release",
	"debian_version", "locale.alias", "locale.gen", "locale.conf",
	"mime.types", "magic", "magic.mime", "profile", "profile.d", "bash.bashrc",
	"inputrc", "shells", "terminfo", "gitattributes", "fonts", "papersize", "vim",
	"nanorc",
	NULL
};
/* Runtimes keep their settings in versioned directories: /etc/python3.11. */
static const char *const etc_prefixes[] = { "python", "java-", "perl", "ruby", "php",
					    "R", "ImageMagick-", NULL };

static bool etc_wanted(const char *name)
{
	for (size_t i = 0; etc_names[i]; i++)
		if (strcmp(name, etc_names[i]) == 0)
			return true;
	for (size_t i = 0; etc_prefixes[i]; i++)
		if (strncmp(name, etc_prefixes[i], strlen(etc_prefixes[i])) == 0)
			return true;
	return false;
}

/* The slot of descriptor `which` in sb->fds. */
static int *fd_of(struct sg_sandbox *sb, enum sg_sandbox_fd which)
{
	return &sb->fds[which - SG_SANDBOX_FD_ARGS];
}

/* The environment's own id: a stable hash of its name into the range. */
static uid_t derived_id(const char *name)
{
	char sum[65];
	unsigned long v = 0;

	if (sg_sha256_hex(name, strlen(name), sum))
		v = strtoul((char[9]){ sum[0], sum[1], sum[2], sum[3], sum[4], sum[5],
				       sum[6], sum[7], '\0' }, NULL, 16);
	return (uid_t)(SG_SANDBOX_ID_BASE + v % SG_SANDBOX_ID_SPAN);
}

sg_err sg_sandbox_pick(struct sg_sandbox *sb, const char *name, const char *workspace,
		       bool host_workspace, bool read_only, struct sg_errinfo *err)
{
	struct stat st;

	for (size_t i = 0; i < SG_SANDBOX_NFDS; i++)
		sb->fds[i] = -1;
	sb->drop = geteuid() == 0;
	sb->uid = geteuid();
	sb->gid = getegid();
	if (!sb->drop)
		return SG_OK;
	if (!host_workspace) {
		sb->uid = sb->gid = derived_id(name);
		return SG_OK;
	}
	if (stat(workspace, &st) != 0)
		return sg_err_set(err, SG_E_NOT_FOUND, "host_workspace %s: %s", workspace,
				  strerror(errno));
	if (st.st_uid != 0) {
		sb->uid = st.st_uid;
		sb->gid = st.st_gid;
		return SG_OK;
	}
	if (!read_only)
		return sg_err_set(err, SG_E_UNSUPPORTED,
				  "host_workspace %s belongs to root, and local commands never run as root: give it to the user they should run as (chown), or set mount_read_only",
				  workspace);
	sb->uid = sb->gid = derived_id(name);
	return SG_OK;
}

/* Give dirfd's entries to uid:gid, depth levels below the top. */
static void own_under(const struct sg_sandbox *sb, int dirfd, int depth, bool *deep)
{
	DIR *d = fdopendir(dirfd);
	struct dirent *de;

	if (!d) {
		close(dirfd);
		return;
	}
	while ((de = readdir(d))) {
		int sub;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		/* Never through a link: the link itself changes owner. */
		if (fchownat(dirfd, de->d_name, sb->uid, sb->gid, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
			continue;
		sub = openat(dirfd, de->d_name,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			continue;
		if (depth + 1 >= SANDBOX_OWN_DEPTH)
			*deep = true, close(sub);
		else
			own_under(sb, sub, depth + 1, deep);
	}
	closedir(d);
}

sg_err sg_sandbox_own(const struct sg_sandbox *sb, const char *path, struct sg_errinfo *err)
{
	int top;
	struct stat st;
	bool deep = false;

	if (!sb->drop)
		return SG_OK;
	top = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (top < 0 || fstat(top, &st) != 0) {
		int e = errno;

		if (top >= 0)
			close(top);
		return sg_err_set(err, SG_E_INTERNAL, "cannot open %s: %s", path, strerror(e));
	}
	if (st.st_uid == sb->uid && st.st_gid == sb->gid) {
		close(top);
		return SG_OK;
	}
	if (fchown(top, sb->uid, sb->gid) != 0) {
		int e = errno;

		close(top);
		return sg_err_set(err, SG_E_INTERNAL, "cannot give %s to uid %lu: %s", path,
				  (unsigned long)sb->uid, strerror(e));
	}
	own_under(sb, top, 0, &deep);
	if (deep)
		sg_log_warn("%s is deeper than %d levels: what lies below keeps its owner", path,
			    SANDBOX_OWN_DEPTH);
	return SG_OK;
}

/* The name the sandbox's user goes by: the host's, else "sandbox". */
static void user_names(const struct sg_sandbox *sb, char *user, size_t un, char *group,
		       size_t gn)
{
	struct passwd pw, *pwp = NULL;
	struct group gr, *grp = NULL;
	char buf[4096];

	snprintf(user, un, "sandbox");
	snprintf(group, gn, "sandbox");
	if (getpwuid_r(sb->uid, &pw, buf, sizeof(buf), &pwp) == 0 && pwp && sb->uid != 0)
		snprintf(user, un, "%s", pwp->pw_name);
	if (getgrgid_r(sb->gid, &gr, buf, sizeof(buf), &grp) == 0 && grp && sb->gid != 0)
		snprintf(group, gn, "%s", grp->gr_name);
}

/*
 * One walk of the host's wanted /etc entries: it copies them into dst, or
 * with dst -1 only writes what identifies each one (its path, kind, inode,
 * size and times, a link's target) into fp, the copy's fingerprint.  What
 * one copy may hold is bounded: the rest is left out, and logged.
 */
struct etc_walk {
	struct sg_buf *fp;
	int64_t bytes;
	int64_t entries;
	bool over;
};

static void walk_entry(struct etc_walk *w, int src, const char *name, int dst, int depth,
		       const char *path);

/* Copy a regular file's bytes (it is the host's, root's to write). */
static void copy_file(struct etc_walk *w, int src, const char *name, int dst, mode_t mode)
{
	char buf[16384];
	int in = openat(src, name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	int out = in < 0 ? -1
			 : openat(dst, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
				  mode & 0755);
	ssize_t n = 0;

	while (out >= 0 && (n = read(in, buf, sizeof(buf))) > 0 && (w->bytes -= n) >= 0)
		if (sg_write_all(out, buf, (size_t)n) != 0)
			n = -1;
	if (w->bytes < 0)
		w->over = true;
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	/* Half a file is no file: a copy cut short is removed. */
	if (out >= 0 && n != 0)
		unlinkat(dst, name, 0);
}

/* A directory the world may read: its entries, one level deeper. */
static void walk_dir(struct etc_walk *w, int src, const char *name, int dst, int depth,
		     const char *path)
{
	int from = openat(src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), to = -1;
	DIR *d = from >= 0 ? fdopendir(from) : NULL;
	struct dirent *de;

	if (d && dst >= 0 && mkdirat(dst, name, 0755) == 0)
		to = openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	while (d && (dst < 0 || to >= 0) && (de = readdir(d))) {
		char sub[SG_PATH_MAX];

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		walk_entry(w, from, de->d_name, to, depth + 1, sub);
	}
	if (d)
		closedir(d);
	else if (from >= 0)
		close(from);
	if (to >= 0)
		close(to);
}

/*
 * src/name: what the world may read and nothing else (a file, a
 * directory, a link as a link; no FIFO, socket or device).  A link at the
 * top is taken as what it names, which may lie outside /etc (resolv.conf
 * in /run): programs read it that way.
 */
static void walk_entry(struct etc_walk *w, int src, const char *name, int dst, int depth,
		       const char *path)
{
	struct stat st;
	char target[SG_PATH_MAX] = "";
	ssize_t n;

	if (depth > SANDBOX_ETC_DEPTH || --w->entries < 0) {
		w->over = true;
		return;
	}
	if (fstatat(src, name, &st, depth == 0 ? 0 : AT_SYMLINK_NOFOLLOW) != 0)
		return;
	if (S_ISLNK(st.st_mode) && (n = readlinkat(src, name, target, sizeof(target) - 1)) > 0)
		target[n] = '\0';
	if (w->fp && sg_buf_addf(w->fp, "%s\n%o %lu %lld %lld.%ld %lld.%ld %s\n", path,
				 (unsigned)st.st_mode, (unsigned long)st.st_ino,
				 (long long)st.st_size, (long long)st.st_mtim.tv_sec,
				 st.st_mtim.tv_nsec, (long long)st.st_ctim.tv_sec,
				 st.st_ctim.tv_nsec, target))
		w->over = true;
	if (S_ISLNK(st.st_mode) && target[0] && dst >= 0)
		symlinkat(target, dst, name);
	else if (S_ISREG(st.st_mode) && (st.st_mode & S_IROTH) && dst >= 0)
		copy_file(w, src, name, dst, st.st_mode);
	else if (S_ISDIR(st.st_mode) && (st.st_mode & S_IROTH) && (st.st_mode & S_IXOTH))
		walk_dir(w, src, name, dst, depth, path);
}

/* Walk every wanted entry of the host's /etc (see struct etc_walk). */
static int walk_etc(struct etc_walk *w, int dst)
{
	int host = open("/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = host >= 0 ? fdopendir(host) : NULL;
	struct dirent *de;

	if (!d) {
		if (host >= 0)
			close(host);
		return -1;
	}
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && etc_wanted(de->d_name))
			walk_entry(w, host, de->d_name, dst, 0, de->d_name);
	closedir(d);
	if (w->over)
		sg_log_warn("the host's /etc holds more than the sandbox's copy takes: some of it is left out");
	return 0;
}

/* An empty file that each environment's own passwd or group is bound over. */
static int mountpoint(int dir, const char *name)
{
	int fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);

	return fd >= 0 ? close(fd) : -1;
}

/*
 * Build the copy of /etc at base/name, unless it is there already: made
 * under a name of this process's and renamed into place whole, so a
 * copy that exists is complete, and two gateways building it at once
 * keep one.
 */
static sg_err build_etc(int base, const char *name, const char *where, struct sg_errinfo *err)
{
	struct etc_walk w = { NULL, SANDBOX_ETC_BYTES, SANDBOX_ETC_ENTRIES, false };
	char tmp[96], *path = NULL;
	int dst = -1;
	sg_err rc = SG_OK;

	if (faccessat(base, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return SG_OK;
	snprintf(tmp, sizeof(tmp), "%s.%ld", name, (long)getpid());
	if (mkdirat(base, tmp, 0755) != 0 ||
	    (dst = openat(base, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    fchmod(dst, 0755) != 0 || walk_etc(&w, dst) != 0 ||
	    symlinkat("../proc/self/mounts", dst, "mtab") != 0 || mountpoint(dst, "passwd") != 0 ||
	    mountpoint(dst, "group") != 0 ||
	    (renameat(base, tmp, base, name) != 0 && errno != EEXIST && errno != ENOTEMPTY))
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot copy /etc for the sandbox into %s: %s",
				where, strerror(errno));
	if (dst >= 0)
		close(dst);
	if (asprintf(&path, "%s/%s", where, tmp) >= 0)
		sg_host_rm_tree(path);
	free(path);
	return rc;
}

/*
 * Remove the copies of /etc that no provision used for SANDBOX_ETC_KEEP_S
 * (the host's /etc changed since): a session that still binds one from a
 * crashed gateway's background process would find it empty.
 */
static void sweep_etc(int base, const char *where, const char *keep)
{
	DIR *d = fdopendir(dup(base));
	struct dirent *de;
	struct stat st;
	time_t now = time(NULL);

	while (d && (de = readdir(d))) {
		char *path = NULL;

		if (strncmp(de->d_name, ".etc-", 5) != 0 || strcmp(de->d_name, keep) == 0 ||
		    fstatat(base, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    now - st.st_mtime < SANDBOX_ETC_KEEP_S)
			continue;
		if (asprintf(&path, "%s/%s", where, de->d_name) >= 0)
			sg_host_rm_tree(path);
		free(path);
	}
	if (d)
		closedir(d);
}

/*
 * The sandbox's /etc, one copy for every environment of this host's user
 * under the cache directory `where` (.etc-<fingerprint>): made again only
 * when the host's wanted entries change.  A copy rather than a bind per
 * entry, which cost every command 7 ms; shared, because making one cost
 * most of a second on a slow disk.  *fd: an O_PATH descriptor of it.
 */
static sg_err open_etc(const char *where, int *fd, struct sg_errinfo *err)
{
	struct sg_buf fp = SG_BUF_INIT(SANDBOX_ETC_FP_MAX);
	struct etc_walk w = { &fp, SANDBOX_ETC_BYTES, SANDBOX_ETC_ENTRIES, false };
	char sum[65], name[32];
	int base = open(where, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	sg_err rc = SG_OK;

	if (base < 0 || walk_etc(&w, -1) != 0 || !sg_sha256_hex(fp.p, fp.len, sum)) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot read the host's /etc for the sandbox: %s",
				strerror(errno));
		goto out;
	}
	snprintf(name, sizeof(name), ".etc-%.16s", sum);
	rc = build_etc(base, name, where, err);
	if (rc)
		goto out;
	/* Used now: the sweep keeps it. */
	utimensat(base, name, NULL, AT_SYMLINK_NOFOLLOW);
	sweep_etc(base, where, name);
	*fd = openat(base, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*fd < 0)
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot open %s/%s: %s", where, name,
				strerror(errno));
out:
	if (base >= 0)
		close(base);
	sg_buf_release(&fp);
	return rc;
}

/*
 * Where the copies of /etc live, one set for every gateway of this user on
 * this host (new string, or NULL): root's /var/cache/sandgate, else the
 * user's cache directory.  A state directory of its own would copy /etc
 * again for each.
 */
static char *cache_dir(void)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	char *d = NULL;

	if (geteuid() == 0)
		return strdup("/var/cache/sandgate");
	if (xdg && xdg[0] == '/' && asprintf(&d, "%s/sandgate", xdg) >= 0)
		return d;
	if (home && home[0] == '/' && asprintf(&d, "%s/.cache/sandgate", home) >= 0)
		return d;
	return NULL;
}

/* Write dir/name with text (mode 0644) and open it O_PATH; -1 on failure. */
static int write_file(int dir, const char *name, const char *text)
{
	char tmp[64];
	int fd, rc = -1;

	snprintf(tmp, sizeof(tmp), ".%s.%ld", name, (long)getpid());
	fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd >= 0 && sg_write_all(fd, text, strlen(text)) == 0 && fchmod(fd, 0644) == 0 &&
	    renameat(dir, tmp, dir, name) == 0)
		rc = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0)
		close(fd);
	return rc;
}

/*
 * The sandbox's passwd and group, root's, in the environment's directory
 * (dir/users): root, the environment's user, nobody.
 */
static sg_err write_users(struct sg_sandbox *sb, const char *dir, const char *ctl_at,
			  struct sg_errinfo *err)
{
	char user[64], group[64], *passwd = NULL, *groups = NULL, *at = NULL;
	int d = -1;
	sg_err rc = SG_OK;

	user_names(sb, user, sizeof(user), group, sizeof(group));
	if (asprintf(&passwd,
		     "root:x:0:0:root:/root:/bin/sh\n"
		     "%s:x:%lu:%lu:sandgate:%s/home:/bin/sh\n"
		     "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		     user, (unsigned long)sb->uid, (unsigned long)sb->gid, ctl_at) < 0)
		passwd = NULL;
	if (asprintf(&groups, "root:x:0:\n%s:x:%lu:\nnogroup:x:65534:\n", group,
		     (unsigned long)sb->gid) < 0)
		groups = NULL;
	if (asprintf(&at, "%s/users", dir) < 0)
		at = NULL;
	if (passwd && groups && at && (mkdir(at, 0755) == 0 || errno == EEXIST))
		d = open(at, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d >= 0) {
		*fd_of(sb, SG_SANDBOX_FD_PASSWD) = write_file(d, "passwd", passwd);
		*fd_of(sb, SG_SANDBOX_FD_GROUP) = write_file(d, "group", groups);
	}
	if (d < 0 || *fd_of(sb, SG_SANDBOX_FD_PASSWD) < 0 || *fd_of(sb, SG_SANDBOX_FD_GROUP) < 0)
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot write the sandbox's users in %s: %s",
				dir, strerror(errno));
	if (d >= 0)
		close(d);
	free(passwd);
	free(groups);
	free(at);
	return rc;
}

sg_err sg_sandbox_open(struct sg_sandbox *sb, const char *dir, const char *workspace,
		       const char *ctl, const char *helper, const char *ctl_at,
		       struct sg_errinfo *err)
{
	int flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	char *cache = cache_dir();
	sg_err rc = SG_OK;

	if (!cache || sg_mkdir_p(cache, 0755) != 0)
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot make the cache directory %s: %s",
				cache ? cache : "(none)", strerror(errno));
	if (!rc)
		rc = open_etc(cache, fd_of(sb, SG_SANDBOX_FD_ETC), err);
	free(cache);
	if (!rc)
		rc = write_users(sb, dir, ctl_at, err);
	if (rc)
		return rc;
	*fd_of(sb, SG_SANDBOX_FD_WORKSPACE) = open(workspace, flags);
	*fd_of(sb, SG_SANDBOX_FD_CTL) = open(ctl, flags);
	if (*fd_of(sb, SG_SANDBOX_FD_CTL) >= 0)
		*fd_of(sb, SG_SANDBOX_FD_TMP) = openat(*fd_of(sb, SG_SANDBOX_FD_CTL), "tmp", flags);
	*fd_of(sb, SG_SANDBOX_FD_HELPER) = open(helper, O_PATH | O_CLOEXEC);
	for (int i = SG_SANDBOX_FD_WORKSPACE; i < SG_SANDBOX_FD_END; i++)
		if (*fd_of(sb, (enum sg_sandbox_fd)i) < 0)
			return sg_err_set(err, SG_E_INTERNAL,
					  "cannot open the sandbox's %s: %s",
					  i == SG_SANDBOX_FD_WORKSPACE ? workspace
					  : i == SG_SANDBOX_FD_HELPER ? helper
					  : i == SG_SANDBOX_FD_ETC ? "/etc copy" : ctl,
					  strerror(errno));
	return SG_OK;
}

/* The host's OS directories, read-only; merged-/usr links stay links. */
static sg_err add_system_dirs(struct sg_strv *av)
{
	static const char *const dirs[] = { "/usr", "/opt", "/bin", "/sbin", "/lib",
					    "/lib32", "/lib64", "/libx32", NULL };
	sg_err rc = SG_OK;

	for (size_t i = 0; !rc && dirs[i]; i++) {
		struct stat st;
		char target[SG_PATH_MAX];
		ssize_t n;

		if (lstat(dirs[i], &st))
			continue;
		if (S_ISLNK(st.st_mode)) {
			n = readlink(dirs[i], target, sizeof(target) - 1);
			if (n <= 0)
				continue;
			target[n] = '\0';
			rc = sg_strv_addv(av, (const char *[]){ "--symlink", target, dirs[i], NULL });
		} else if (S_ISDIR(st.st_mode)) {
			rc = sg_strv_addv(av, (const char *[]){ "--ro-bind", dirs[i], dirs[i], NULL });
		}
	}
	return rc;
}

/*
 * Bind descriptor fd at dest: by --bind-fd, or where sg-helper cgroup-exec
 * --stage shows it when bubblewrap runs as a user who could not reach its
 * path (sandbox.h).
 */
static sg_err add_fd_bind(struct sg_strv *av, bool staged, bool ro, int fd, const char *dest)
{
	sg_err rc;

	if (staged)
		rc = sg_strv_add(av, ro ? "--ro-bind" : "--bind") ||
		     sg_strv_addf(av, SG_HELPER_STAGE "/%d", fd);
	else
		rc = sg_strv_add(av, ro ? "--ro-bind-fd" : "--bind-fd") || sg_strv_addf(av, "%d", fd);
	if (!rc)
		rc = sg_strv_add(av, dest);
	return rc;
}

sg_err sg_sandbox_binds(const struct sg_sandbox *sb, struct sg_strv *opts, const char *root,
			bool read_only, const char *helper_at, const char *ctl_at)
{
	sg_err rc = add_system_dirs(opts);

	/* The curated /etc, read-only, and the sandbox's own users (open_etc). */
	if (!rc)
		rc = add_fd_bind(opts, sb->drop, true, SG_SANDBOX_FD_ETC, "/etc");
	if (!rc)
		rc = add_fd_bind(opts, sb->drop, true, SG_SANDBOX_FD_PASSWD, "/etc/passwd");
	if (!rc)
		rc = add_fd_bind(opts, sb->drop, true, SG_SANDBOX_FD_GROUP, "/etc/group");
	if (!rc)
		rc = sg_strv_addv(opts, (const char *[]){ "--dev", "/dev", "--proc", "/proc", NULL });
	/*
	 * The environment's own /tmp, kept across its commands and shared
	 * with its background processes: ctl/tmp, which is also TMPDIR.
	 */
	if (!rc)
		rc = add_fd_bind(opts, sb->drop, false, SG_SANDBOX_FD_TMP, "/tmp");
	if (!rc)
		rc = add_fd_bind(opts, sb->drop, read_only, SG_SANDBOX_FD_WORKSPACE, root);
	if (!rc)
		rc = add_fd_bind(opts, sb->drop, true, SG_SANDBOX_FD_HELPER, helper_at);
	if (!rc)
		rc = add_fd_bind(opts, sb->drop, false, SG_SANDBOX_FD_CTL, ctl_at);
	return rc;
}

void sg_sandbox_close(struct sg_sandbox *sb)
{
	for (size_t i = 0; i < SG_SANDBOX_NFDS; i++) {
		if (sb->fds[i] > 2)
			close(sb->fds[i]);
		sb->fds[i] = -1;
	}
}
