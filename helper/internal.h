/*
 * internal.h - what sg-helper's command modules share.
 *
 * Each module (fs.c, proc.c, confine.c, probe.c) exports one entry point of
 * the shape sg_helper_<module>(argc, argv, in, inlen, out, cancel), where
 * argv[0] is the module's sub-command ("read", "spawn" ...) or, for the
 * single-command modules, the command word itself.  Replies are built with
 * the functions below so that every module answers in the three shapes
 * helper.h promises.
 */
#ifndef SG_HELPER_INTERNAL_H
#define SG_HELPER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "helper/helper.h"

/* Module entry points; each returns the program's exit status. */
int sg_helper_fs(int argc, char *const *argv, const void *in, size_t inlen,
		 struct sg_buf *out, const struct sg_cancel *cancel);
int sg_helper_proc(int argc, char *const *argv, const void *in, size_t inlen,
		   struct sg_buf *out, const struct sg_cancel *cancel);
int sg_helper_confine(int argc, char *const *argv);
int sg_helper_cgroup_exec(int argc, char *const *argv);
/*
 * Become uid:gid for good, with no supplementary group, each id checked
 * afterwards: a process that stayed root because one step failed is what
 * its callers are there to prevent.  0, or -1.  Raw system calls, so it
 * also serves between fork and exec, and changes only the calling thread
 * (the child's only one) without libc's broadcast to others.
 */
int sg_helper_become(uid_t uid, gid_t gid);
int sg_helper_probe(int argc, char *const *argv, struct sg_buf *out);
int sg_helper_status(int argc, char *const *argv);
int sg_helper_job(int argc, char *const *argv);
/* `git-wrap LAUNCHER REAL_GIT ARGS...`: exec git, a commit attributed. */
int sg_helper_gitwrap(int argc, char *const *argv);
/*
 * *text (new): command, run in a login shell, with the git launcher first
 * on its PATH; the launcher is (re)written under ctl (gitwrap.c).
 */
sg_err sg_gitwrap_command(const char *ctl, const char *command, char **text,
			  struct sg_errinfo *err);
/*
 * The program's own main, set by main.c before it dispatches (NULL in the
 * gateway's library): a job whose command is this very program (sg-helper
 * confine, fs ...) runs it in the forked child instead of exec'ing the same
 * file again.
 */
extern int (*sg_helper_self)(int argc, char **argv);
/*
 * Set only by `job` while it runs `proc spawn` in its own process (job.c):
 * from sg_helper_due on (sg_now_ns()), the spawn's wait for its command's
 * end calls sg_helper_overdue(), which either does not return or returns
 * with sg_helper_due moved on (0: never again).  Both stay 0 and NULL in
 * the gateway's library, so its in-process steps never see them.
 */
extern int64_t sg_helper_due;
extern void (*sg_helper_overdue)(void);
/*
 * Set only by `job --linger` while it runs `proc spawn` in its own process
 * (job.c): its request may end before this process does, so the spawn
 * supervises its command here, with no supervisor forked, and hands its
 * reply (n bytes, without the final newline) to sg_helper_answer, which
 * answers the request and returns.  on: the process goes on supervising
 * (the command still runs), so the request must end without its exit.
 * NULL in the gateway's library.
 */
extern void (*sg_helper_answer)(const char *reply, size_t n, bool on);
int sg_confine_apply(const char *mode, const char *root, const char *const *allow_write, char *msg, size_t msglen);
/*
 * How a mode (standard, else read_only) is confined where Landlock has ABI
 * abi (sg_landlock_abi): "landlock", "read_only_root" (standard on a
 * read-only /, see confine.c), or "refused".  For the probe's facts.
 */
const char *sg_confine_mechanism(bool standard, int abi);
/*
 * Keep this process and what it runs inside its environment, whatever its
 * permission mode: no setuid or setgid bit set on any file
 * (sg_nosuid_apply), and from Landlock ABI 6 a domain that handles no
 * filesystem right but keeps signals and abstract unix socket connections
 * inside it.  -1 with the reason in msg when the kernel refuses either.
 */
int sg_confine_scope(char *msg, size_t msglen);
/*
 * The Landlock part of sg_confine_scope alone: from ABI 6 a new domain,
 * nested in the caller's, that keeps signals and abstract unix socket
 * connections inside it; nothing before ABI 6.  Syscalls and stack
 * buffers only, so a child may call it between fork() and exec().  -1
 * with the reason in msg when the kernel refuses it.
 */
int sg_confine_scope_domain(char *msg, size_t msglen);
/* nosuid.c: the seccomp filter that fails every call setting S_ISUID or S_ISGID. */
int sg_nosuid_apply(char *msg, size_t msglen);
/*
 * sg_confine_apply, and when exec_only is not NULL the command may execute
 * only the files (and the files beneath the directories) it lists, plus the
 * usual ELF interpreters: EXECUTE, the right execve() is checked for, is
 * granted nowhere else.  Syscalls and stack buffers only, like
 * sg_confine_apply; the paths are resolved by the caller beforehand.
 */
int sg_confine_apply_exec(const char *mode, const char *root,
			  const char *const *allow_write,
			  const char *const *exec_only, char *msg,
			  size_t msglen);
/*
 * Start prog (an absolute path) with argv av, in directory dirfd
 * (borrowed), stdin /dev/null, stdout outfd and stderr errfd, signals at
 * their defaults, as the calling thread's file system user (an in-process
 * step's environment user), under its own limits (SG_GREP_ENGINE_MEM of memory,
 * SG_GREP_ENGINE_CPU_S of CPU, no core file), so that no pattern makes
 * it cost more however it is compiled, and under a Landlock ruleset that
 * lets it read files and list directories only beneath dirfd (and load
 * itself and the system's shared libraries): a search that is led out of
 * the tree by a link swapped in during its walk finds nothing there.
 * Where the kernel has no Landlock (sg_confine_reader_ok() false) it runs
 * with its limits alone; the caller then chose an engine whose own walk
 * refuses links.  Returns the child's pid, or -1 with errno.
 */
/* Whether sg_confine_spawn_reader() can confine here (Landlock exists). */
bool sg_confine_reader_ok(void);
pid_t sg_confine_spawn_reader(const char *prog, char *const *av, int dirfd,
			      int outfd, int errfd);

/*
 * A command line, parsed without getopt (which keeps global state).
 * Options are "--name value" or "--flag"; `--` ends them.  Everything else
 * is positional, in order.  Strings are borrowed from argv.
 */
#define SG_ARGS_MAX 32
struct sg_args {
	int npos;
	const char *pos[SG_ARGS_MAX];
	int nopt;
	struct {
		const char *name; /* without the dashes */
		const char *value; /* NULL for a flag */
		bool used;
	} opt[SG_ARGS_MAX];
	int nrest;               /* after `--` */
	char *const *rest;
};

/*
 * Parse argv[0..argc) into a.  `flags` is a space-separated list of option
 * names that take no value ("base64 all hidden").  Returns SG_OK or
 * SG_E_INVALID_ARGUMENT with a sentence in err.
 */
sg_err sg_args_parse(struct sg_args *a, int argc, char *const *argv,
		     const char *flags, struct sg_errinfo *err) SG_MUST_CHECK;

/* The value of --name, or def when absent (the last one wins). */
const char *sg_args_str(struct sg_args *a, const char *name, const char *def);
/* Whether the flag --name was given. */
bool sg_args_flag(struct sg_args *a, const char *name);
/*
 * --name as a non-negative integer within [0, max], def when absent;
 * SG_E_INVALID_ARGUMENT naming the option otherwise.
 */
sg_err sg_args_int(struct sg_args *a, const char *name, int64_t def,
		   int64_t max, int64_t *out, struct sg_errinfo *err)
	SG_MUST_CHECK;
/* SG_E_INVALID_ARGUMENT naming the first option that no lookup used. */
sg_err sg_args_unused(const struct sg_args *a, struct sg_errinfo *err)
	SG_MUST_CHECK;

/* Replies. Each resets out first, so the last reply written is the one sent. */
/* {"error":"<word>","message":"<err's sentence>"} */
void sg_reply_error(struct sg_buf *out, const struct sg_errinfo *err);
/* {"ok":false,"tool_error":"<sentence>"} */
void sg_reply_tool_error(struct sg_buf *out, const char *fmt, ...)
	SG_PRINTF(2, 3);
/*
 * Start {"ok":true and leave the object open: the caller appends
 * ,"key":value pairs (sg_jw_key with first=0) and then sg_reply_end().
 */
sg_err sg_reply_ok(struct sg_buf *out) SG_MUST_CHECK;
sg_err sg_reply_end(struct sg_buf *out) SG_MUST_CHECK;

#endif
