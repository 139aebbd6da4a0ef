/*
 * exec.h - child processes on this host, for adapters and the gateway.
 *
 * Invariants: argv only, never a shell; the child gets exactly the
 * environment given (nothing of sandgate's own) and never inherits fd 1 or
 * any descriptor but its three stdio pipes; it leads its own process group,
 * so the whole group can be signalled.  A run is finished only when the
 * child has been reaped *and* its output pipes are at EOF (or given up on
 * shortly after the exit, when a daemon it left keeps them open).  Only
 * this child is reaped, by its pidfd, never with waitpid(-1).
 *
 * What the process around it must keep: SIGCHLD is not ignored (that would
 * reap children behind our back) and nobody calls waitpid(-1).  SIGPIPE may
 * be ignored or not: stdin is written with SIGPIPE blocked in the calling
 * thread, so a child that closes its stdin early costs an EPIPE, never a
 * signal.  The child starts with an empty signal mask and every signal at
 * its default action, whatever this process ignores or blocks.
 *
 * Thread-safe: any number of runs may proceed at once on different
 * threads; each owns its pipes, pidfd and child.
 */
#ifndef SG_EXEC_H
#define SG_EXEC_H

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/cancel.h"
#include "base/err.h"

/* What one run of a command gave: the contract's exec() fills one too. */
struct sg_exec_result {
	int exit_code;      /* -1 when killed by a signal */
	int signal;         /* the signal number, or 0 */
	bool timed_out;     /* killed because timeout_ms passed */
	bool stalled;       /* killed because stdout was silent (sg_child.idle_ms) */
	bool truncated;     /* out was clipped at max_output */
	int64_t duration_ms;
	struct sg_buf out;  /* stdout (and stderr with SG_EXEC_MERGE): its head */
	struct sg_buf err;  /* stderr, clipped to SG_HELPER_STDERR */
	/*
	 * Set by the caller after init: keep the newest max_output/2 bytes
	 * too, so a long log's last lines survive (bash, git).  Then,
	 * when truncated, `tail` holds them in order, `total` counts every
	 * byte of output and `lines` every newline in it.  Adapters fill
	 * these through sg_exec_capture() or set them themselves.
	 */
	bool keep_tail;
	struct sg_buf tail;
	uint64_t total, lines;
	size_t ring_pos;    /* sg_exec_capture's write position in tail */
};

/*
 * Prepare r for a run (exec(), sg_exec_run()) with a capture bound of
 * max_output bytes of stdout and SG_HELPER_STDERR of stderr; release it
 * with sg_exec_result_release().  sg_exec_result_reset() clears the fields
 * and empties the buffers (keeping their memory) so one result can serve
 * several runs: what every exec() does on entry.
 */
void sg_exec_result_init(struct sg_exec_result *r, size_t max_output);
void sg_exec_result_reset(struct sg_exec_result *r);
void sg_exec_result_release(struct sg_exec_result *r);

struct sg_child {
	/*
	 * argv[0] without a slash is looked up in the PATH from envp (not
	 * ours; "/usr/bin:/bin" when envp has none), skipping relative PATH
	 * entries.  With a slash it is used as it is (relative to cwd).
	 */
	const char *const *argv;
	const char *const *envp; /* the whole environment; NULL means empty */
	const char *cwd;         /* NULL: inherit */
	const void *stdin_data;  /* NULL: stdin is /dev/null */
	size_t stdin_len;
	int64_t timeout_ms;      /* 0: none; on expiry the group is killed */
	bool merge;              /* stderr into the same capture as stdout */
	/*
	 * The child leaves a daemon behind on purpose (sg-helper proc spawn):
	 * its process group is not killed when it exits.
	 */
	bool detaches;
	/*
	 * stdout goes to out_fd as it arrives instead of into out->out, at
	 * most out->out's max bytes (the rest is drained, out->truncated
	 * set); a failed write makes the run SG_E_INTERNAL.
	 */
	bool stream_out;
	int out_fd;
	/*
	 * 0, or the longest stdout may stay silent: then the group is killed
	 * as on a timeout and out->stalled set.  For a read that a remote
	 * host or a FIFO can stall for ever, with no overall time limit.
	 */
	int64_t idle_ms;
	/* Sent to the group on timeout or cancel before SIGKILL; 0 means
	 * SIGKILL at once. */
	int term_signal;
	int64_t term_grace_ms;
	/*
	 * The child gets pass_fds[i] (borrowed; ours stay open) as its
	 * descriptor 3 + i, e.g. for bubblewrap's `--args 3` and its binds
	 * by descriptor; every other descriptor above 2 is closed either way.
	 */
	const int *pass_fds;
	size_t npass; /* at most SG_EXEC_PASS_MAX */
};

#define SG_EXEC_PASS_MAX 16

/*
 * Run c to completion, capturing stdout into out->out (up to the max it was
 * initialised with; the rest is read and dropped, out->truncated set) and
 * stderr into out->err (clipped).  After the child exits, anything left in
 * its process group is killed (unless c->detaches and neither a timeout
 * nor a cancel signalled the group).  out must have been initialised with
 * sg_exec_result_init(); its fields and buffers are reset on entry, so one
 * result can serve several runs.
 *
 * Returns SG_OK when the child ran, whatever its exit status (127 with a
 * sentence in out->err when argv[0] or cwd could not be used); on cancel,
 * the group is killed, the child reaped, and the token's reason returned
 * (out holds what was captured until then).  SG_E_INTERNAL when pipes or
 * the spawn itself failed (sentence in err).
 */
sg_err sg_exec_run(const struct sg_child *c, struct sg_exec_result *out,
		   struct sg_cancel *cancel, struct sg_errinfo *err)
	SG_MUST_CHECK;

/*
 * Add n bytes of output to r: the head into r->out up to its max, then,
 * with r->keep_tail, the newest bytes into r->tail as a ring (put in
 * order by sg_exec_capture_end()); totals counted either way.
 */
void sg_exec_capture(struct sg_exec_result *r, const char *p, size_t n);
void sg_exec_capture_end(struct sg_exec_result *r);

/*
 * The output as the model reads it (appended to text): all of it, or,
 * when it was truncated and the tail kept, its first half, a marker line
 * saying how many bytes and lines were left out of the middle, and its
 * end.  Cuts fall on character boundaries, on line ends where one is near.
 */
sg_err sg_exec_text(const struct sg_exec_result *r, struct sg_buf *text)
	SG_MUST_CHECK;

/*
 * The first executable `name` on this process's PATH ("/usr/local/bin:
 * /usr/bin:/bin" when it has none; relative entries skipped), for finding
 * the host's own tools (ssh, bwrap).  New string, or NULL.
 */
char *sg_exec_which(const char *name);

/*
 * A POSIX shell script that writes one file's bytes to stdout, for
 * get_file() on backends that read files with a command (ssh, modal,
 * singularity).  Arguments: $1 the file; $2 "1" when dd has
 * iflag=nonblock, "0" when it has not, "auto" to find out here.  The file
 * must be a regular one in this very command, not only when the gateway
 * looked (an agent may swap it for a FIFO in between), and its open must
 * not wait: dd opens it O_NONBLOCK, so a FIFO swapped in after the test
 * gives EOF or EAGAIN at once instead of an open that waits for a writer.
 * Without such a dd it falls back to cat, whose open a FIFO can hold (the
 * caller's cancel, or an idle limit, ends that).  Exit 3: not a regular
 * file; 4: no such file; 1: the read failed.  On success the last line
 * of stderr is the file's size in bytes once read, which a caller whose
 * transport may cut the output short compares with what arrived.
 */
extern const char sg_exec_read_file_sh[];

/* "SIGTERM" for SIGTERM ...; "SIG<n>" for others.  Static string. */
const char *sg_exec_signame(int sig);

#endif
