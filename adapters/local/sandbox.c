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
#include "sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/limits.h"
#include "base/log.h"
#include "../digest.h"
#include "../helper/helper.h"

/*
 * How deep sg_sandbox_own follows a tree: each level holds a directory
 * open.  A workspace deeper than this (made by an older sandgate that ran
 * commands as root) keeps root's files below it, and says so in the log.
 */
#define SANDBOX_OWN_DEPTH 256

/*
 * What programs need of /etc, and nothing else of it: name resolution,
 * certificates, the loader's cache, alternatives, time, locale, shells'
 * profiles and the language runtimes' own settings.  Entries missing on
 * this host are skipped; passwd and group are the sandbox's own, and
 * mtab is a link to the sandbox's mounts, not the host's.
 */
static const char *const etc_names[] = {
	"hosts", "hostname", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf",
	"services", "protocols", "networks", "rpc", "ethertypes",
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"ssl", "ca-certificates", "ca-certificates.conf", "pki", "crypto-policies",
	"alternatives", "localtime", "timezone", "os-release", "lsb-release",
	"debian_version", "locale.alias", "locale.gen", "locale.conf",
	"mime.types", "magic", "magic.mime", "profile", "profile.d", "bash.bashrc",
	"inputrc", "shells", "terminfo", "environment", "gitconfig", "gitattributes",
	"fonts", "papersize", "vim", "nanorc", "wgetrc", "npmrc", "pip.conf",
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

/* Write <dir>/etc/name (mode 0644, atomically) and open it O_PATH. */
static int write_etc(const char *dir, const char *name, const char *text)
{
	char *tmp = NULL, *dst = NULL;
	int fd = -1, out = -1;

	if (asprintf(&tmp, "%s/etc/.%s.tmp", dir, name) < 0) {
		tmp = NULL;
		goto out;
	}
	if (asprintf(&dst, "%s/etc/%s", dir, name) < 0) {
		dst = NULL;
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || sg_write_all(fd, text, strlen(text)) != 0 || fchmod(fd, 0644) != 0 ||
	    rename(tmp, dst) != 0)
		goto out;
	out = open(dst, O_PATH | O_NOFOLLOW | O_CLOEXEC);
out:
	if (fd >= 0)
		close(fd);
	free(tmp);
	free(dst);
	return out;
}

static sg_err write_users(struct sg_sandbox *sb, const char *dir, const char *ctl_at,
			  struct sg_errinfo *err)
{
	char user[64], group[64], *etc = NULL, *passwd = NULL, *groups = NULL;
	sg_err rc = SG_OK;

	user_names(sb, user, sizeof(user), group, sizeof(group));
	if (asprintf(&etc, "%s/etc", dir) < 0)
		etc = NULL;
	if (!etc || (mkdir(etc, 0755) != 0 && errno != EEXIST) ||
	    asprintf(&passwd,
		     "root:x:0:0:root:/root:/bin/sh\n"
		     "%s:x:%lu:%lu:sandgate:%s/home:/bin/sh\n"
		     "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		     sb->uid ? user : "sandbox", (unsigned long)sb->uid, (unsigned long)sb->gid,
		     ctl_at) < 0 ||
	    asprintf(&groups, "root:x:0:\n%s:x:%lu:\nnogroup:x:65534:\n",
		     sb->gid ? group : "sandbox", (unsigned long)sb->gid) < 0) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot write the sandbox's users in %s: %s",
				dir, strerror(errno));
		goto out;
	}
	sb->fds[SG_SANDBOX_FD_PASSWD - SG_SANDBOX_FD_ARGS] = write_etc(dir, "passwd", passwd);
	sb->fds[SG_SANDBOX_FD_GROUP - SG_SANDBOX_FD_ARGS] = write_etc(dir, "group", groups);
	if (sb->fds[SG_SANDBOX_FD_PASSWD - SG_SANDBOX_FD_ARGS] < 0 ||
	    sb->fds[SG_SANDBOX_FD_GROUP - SG_SANDBOX_FD_ARGS] < 0)
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot write the sandbox's users in %s: %s",
				etc, strerror(errno));
out:
	free(etc);
	free(passwd);
	free(groups);
	return rc;
}

sg_err sg_sandbox_open(struct sg_sandbox *sb, const char *dir, const char *workspace,
		       const char *ctl, const char *helper, struct sg_errinfo *err)
{
	int flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	int *fd = sb->fds - SG_SANDBOX_FD_ARGS;
	sg_err rc = write_users(sb, dir, "/run/sandgate/ctl", err);

	if (rc)
		return rc;
	fd[SG_SANDBOX_FD_WORKSPACE] = open(workspace, flags);
	fd[SG_SANDBOX_FD_CTL] = open(ctl, flags);
	if (fd[SG_SANDBOX_FD_CTL] >= 0)
		fd[SG_SANDBOX_FD_TMP] = openat(fd[SG_SANDBOX_FD_CTL], "tmp", flags);
	fd[SG_SANDBOX_FD_HELPER] = open(helper, O_PATH | O_CLOEXEC);
	for (int i = SG_SANDBOX_FD_WORKSPACE; i < SG_SANDBOX_FD_END; i++)
		if (fd[i] < 0)
			return sg_err_set(err, SG_E_INTERNAL,
					  "cannot open the sandbox's %s: %s",
					  i == SG_SANDBOX_FD_WORKSPACE ? workspace
					  : i == SG_SANDBOX_FD_HELPER ? helper : ctl,
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

/*
 * The curated /etc: each wanted entry of the host's bound read-only where
 * it is (a link is bound as what it names, as programs would read it),
 * the sandbox's users and groups, and mtab naming the sandbox's mounts.
 */
static sg_err add_etc(struct sg_strv *av, bool staged)
{
	DIR *d = opendir("/etc");
	struct dirent *de;
	sg_err rc = SG_OK;

	while (d && !rc && (de = readdir(d))) {
		if (de->d_name[0] == '.' || !etc_wanted(de->d_name))
			continue;
		rc = sg_strv_add(av, "--ro-bind-try") || sg_strv_addf(av, "/etc/%s", de->d_name) ||
		     sg_strv_addf(av, "/etc/%s", de->d_name);
	}
	if (d)
		closedir(d);
	if (!rc)
		rc = add_fd_bind(av, staged, true, SG_SANDBOX_FD_PASSWD, "/etc/passwd");
	if (!rc)
		rc = add_fd_bind(av, staged, true, SG_SANDBOX_FD_GROUP, "/etc/group");
	if (!rc)
		rc = sg_strv_addv(av, (const char *[]){ "--symlink", "../proc/self/mounts",
							 "/etc/mtab", NULL });
	return rc;
}

sg_err sg_sandbox_binds(const struct sg_sandbox *sb, struct sg_strv *opts, const char *root,
			bool read_only, const char *helper_at, const char *ctl_at)
{
	sg_err rc = add_system_dirs(opts);

	if (!rc)
		rc = add_etc(opts, sb->drop);
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
