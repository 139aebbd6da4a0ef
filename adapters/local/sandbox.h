/*
 * sandbox.h - who a local command runs as, and what it sees of this host.
 *
 * Invariants:
 * - A command under bubblewrap runs in a user namespace of its own, as one
 *   host user that is never root.  Where sandgate runs as root that user
 *   is the environment's (struct sg_sandbox's uid and gid): the owner of a
 *   host_workspace, else an id of sandgate's range derived from the
 *   environment's name.  It owns the workspace sandgate made and the
 *   control directory, and the gateway's own steps in them write as it
 *   (gateway/envcall.c).  Elsewhere it is sandgate's own user.
 * - bubblewrap reaches sandgate's files only through the descriptors held
 *   here (the state directory may be closed to that user), and its options
 *   travel in a memory file: no argv that a command can read names a host
 *   path.
 * - /etc is a copy of a curated list of the host's entries, what the world
 *   may read of them, with users and groups written for the sandbox: no
 *   shadow file, no key, no configuration of sandgate's, whatever their
 *   modes.
 * Ownership: struct sg_sandbox owns its descriptors; sg_sandbox_close()
 * closes them and may be called on a zeroed or half-opened one.
 */
#ifndef SG_LOCAL_SANDBOX_H
#define SG_LOCAL_SANDBOX_H

#include <stdbool.h>
#include <sys/types.h>

#include "base/err.h"
#include "base/strv.h"

/*
 * The ids of environments whose commands run as none of the host's users:
 * a range no distribution hands out (systemd's dynamic users stop at
 * 65519, and subordinate ranges start at 100000 and grow slowly).
 */
#define SG_SANDBOX_ID_BASE 1879048192u /* 0x70000000 */
#define SG_SANDBOX_ID_SPAN 1048576u

/* The descriptors a sandboxed command is started with, from 3 up. */
enum sg_sandbox_fd {
	SG_SANDBOX_FD_ARGS = 3, /* bubblewrap's options (--args) */
	SG_SANDBOX_FD_WORKSPACE,
	SG_SANDBOX_FD_CTL,
	SG_SANDBOX_FD_TMP,
	SG_SANDBOX_FD_HELPER,
	SG_SANDBOX_FD_ETC,
	SG_SANDBOX_FD_PASSWD,
	SG_SANDBOX_FD_GROUP,
	SG_SANDBOX_FD_END
};
#define SG_SANDBOX_NFDS (SG_SANDBOX_FD_END - SG_SANDBOX_FD_ARGS)

struct sg_sandbox {
	bool drop;   /* sandgate is root: commands run as uid and gid */
	uid_t uid;
	gid_t gid;
	/* O_PATH descriptors of this host's files, by enum sg_sandbox_fd;
	 * fds[0] (the options) is made per command. */
	int fds[SG_SANDBOX_NFDS];
};

/*
 * Decide who the commands of the environment `name` run as.  workspace is
 * its real path; host_workspace: the profile named it (else sandgate made
 * it).  A writable host_workspace that belongs to root is refused: its
 * commands would have to be root to write it.
 */
sg_err sg_sandbox_pick(struct sg_sandbox *sb, const char *name, const char *workspace,
		       bool host_workspace, bool read_only,
		       struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * Give the tree at path to the sandbox's user (when sandgate is root and
 * it is not that user's yet), by descriptors, never following a link: a
 * process of the environment may be swapping its directories meanwhile.
 */
sg_err sg_sandbox_own(const struct sg_sandbox *sb, const char *path,
		      struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * Open the descriptors bubblewrap binds: workspace, ctl, ctl/tmp, the
 * helper, the copy of the host's wanted /etc entries that every environment
 * shares (made when the host's change; sandbox.c, cache_dir), and the sandbox's passwd
 * and group in dir/users, whose home for the environment's user is
 * ctl_at/home.  All root's, read-only to the sandbox.
 */
sg_err sg_sandbox_open(struct sg_sandbox *sb, const char *dir, const char *workspace,
		       const char *ctl, const char *helper, const char *ctl_at,
		       struct sg_errinfo *err) SG_MUST_CHECK;

/*
 * bubblewrap's options for the host's directories, the curated /etc,
 * /dev, /proc, and sandgate's binds (/tmp, the workspace at root, the
 * helper and the control directory), by the descriptors above: named by
 * number, or where `sg-helper cgroup-exec --stage` shows them when
 * bubblewrap runs as the environment's user (sb->drop).
 */
sg_err sg_sandbox_binds(const struct sg_sandbox *sb, struct sg_strv *opts, const char *root,
			bool read_only, const char *helper_at, const char *ctl_at) SG_MUST_CHECK;

void sg_sandbox_close(struct sg_sandbox *sb);

#endif
