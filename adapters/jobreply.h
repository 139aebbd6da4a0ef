/*
 * jobreply.h - `sg-helper job`'s command line and reply, for the adapters
 * that run commands through it (ssh, daytona; vercel and modal next).
 *
 * job.c prints the reply; this file is the one place that builds the job's
 * command line and reads its reply back, so the two cannot drift apart.
 * The reply is plain text:
 *
 *   <stdout head>\n<mark> done <x>|<st>|<to>|<stdout size>[|<lines>]\n<stderr head>
 *
 * or "\n<mark> pending\n" (ask again with --attach) or "\n<mark> missing\n"
 * (no job has this prefix).  The mark is the caller's random word, so its
 * last appearance after a newline is the trailer whatever the command
 * printed.  <x> is the runner's status in the shell's convention, <st>
 * "exit N" or "signal N" (the real wait status), <to> "1" when the runner's
 * timer killed the command.  With --keep-tail and stdout over --max-out,
 * "stdout head" is its head (max-out - max-out/2 bytes) then its tail, and
 * the trailer's fifth field counts stdout's lines.
 *
 * Invariants: the words are quoted for a POSIX shell (sg_shquote) and
 * appended to caller-owned buffers; nothing here allocates what outlives a
 * call.  Parsing never trusts the reply: every field is bounded, and a
 * reply without a trailer is SG_JOB_NONE, never a result.
 */
#ifndef SG_JOBREPLY_H
#define SG_JOBREPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/* Only pointers here, so job.c (built without jansson) can include this. */
struct sg_exec;
struct sg_exec_result;
struct sg_cancel;
struct sg_errinfo;

/* The words after the mark on the trailer line (job.c prints them). */
#define SG_JOB_DONE "done"
#define SG_JOB_PENDING "pending"
#define SG_JOB_MISSING "missing"
/*
 * With --linger, the line after a whole reply when the job's process lives
 * on (it supervises a command that outlasts the request): the adapter
 * stops reading here instead of at the request's end.
 */
#define SG_JOB_END "end"

/* Bytes of a random mark: "sgmk-" and 16 hex digits, and the NUL. */
#define SG_JOB_MARK_SIZE 22

/* How one job is started and attached to (the job line's options). */
struct sg_job_line {
	const char *helper; /* sg-helper's path in the environment */
	const char *dir;    /* the job files' prefix */
	const char *mark;   /* the random trailer word */
	int64_t wait_ms;    /* what one request waits for the result */
	/* stdin: variables (comma-separated names), a file, or neither */
	const char *stdin_vars, *stdin_file;
	const char *gc;     /* finished jobs' prefixes to remove, a line each */
	/*
	 * The environment and argv come first on stdin (sg_job_spec), not in
	 * the words, and the rest of stdin is the command's: nothing secret
	 * sits on a command line, and no shell reads the words.
	 */
	bool spec_stdin;
	/* The job dies with the request's parent (ssh: the connection). */
	bool tie;
	/* Nothing attaches later: the job removes its files after its reply. */
	bool rm;
	/* Shown at bind_to in a mount namespace of its own, or NULL. */
	const char *bind, *bind_to;
	const char *tmp;     /* with bind: shown on /tmp too, or NULL */
	bool netns;          /* a network namespace of its own */
	const char *cgroups; /* cgroup.procs files to join, a line each */
	/* Stdout over max_output keeps its tail too (exec's keep_tail). */
	bool keep_tail;
	/*
	 * The request may end before the job's process (--linger): a `proc
	 * spawn` then supervises its command in that process, and a reply
	 * after which that process lives on ends with "\n<mark> end\n"
	 * (sg_job_ended), where the adapter stops reading without waiting
	 * for its exit.
	 */
	bool linger;
};

/*
 * Append the start line (start) and the attach line (attach, may be NULL)
 * of the exec x to the buffers, words quoted for a shell.  SG_E_TOO_LARGE
 * when they do not fit; SG_E_INVALID_ARGUMENT for an empty argv.
 */
sg_err sg_job_words(const struct sg_job_line *l, const struct sg_exec *x,
		    const char *default_cwd, struct sg_buf *start, struct sg_buf *attach)
	SG_MUST_CHECK;

/*
 * The stdin of a --spec-stdin job: "<n>\n", n bytes of NUL-terminated
 * words (NAME=VALUE..., "--", argv...), then x's own stdin.
 */
sg_err sg_job_spec(const struct sg_exec *x, struct sg_buf *out) SG_MUST_CHECK;

/* A fresh random mark into mark[SG_JOB_MARK_SIZE]. */
void sg_job_mark(char mark[SG_JOB_MARK_SIZE]);

enum sg_job_state {
	SG_JOB_NONE = 0, /* no trailer: the job did not run or the reply was cut */
	SG_JOB_IS_DONE,
	SG_JOB_IS_PENDING,
	SG_JOB_IS_MISSING,
	SG_JOB_BAD,      /* a trailer with an unknown word */
};

/* A reply read back: where its parts are, and the job's end. */
struct sg_job_reply {
	enum sg_job_state state;
	size_t head_len;    /* stdout's head: text[0, head_len) */
	size_t err_at;      /* stderr's head: text[err_at, len) (done only) */
	long long out_size; /* all of stdout, as the job measured it */
	long long out_lines; /* its newlines, when has_lines (--keep-tail) */
	bool has_lines;
	int exit_code;      /* -1 with a signal */
	int signal;
	bool timed_out;
	bool lost;          /* killed from outside before anything was recorded */
};

/*
 * Whether text ends with a --linger job's "\n<mark> end\n": the reply is
 * whole, and the adapter may end its request.  sg_job_parse skips it.
 */
bool sg_job_ended(const char *text, size_t len, const char *mark);

void sg_job_parse(const char *text, size_t len, const char *mark, struct sg_job_reply *r);

/*
 * Only the status fields, truncated (from the job's measure of stdout) and
 * the note for a command killed before it recorded anything; for a caller
 * that keeps the reply's parts in place.
 */
void sg_job_status(const struct sg_job_reply *r, size_t max_output,
		   struct sg_exec_result *out);

/*
 * A --keep-tail job's stdout over max_output (asked by out->keep_tail):
 * its tail, text[head, head_len), appended to out->tail; out->total,
 * out->lines and truncated set.  Returns how much of text is stdout's
 * head: max_output - max_output/2 then, else head_len.
 */
size_t sg_job_tail(const struct sg_job_reply *r, const char *text, size_t max_output,
		   struct sg_exec_result *out);

/*
 * Fill out from a done reply: status fields, stdout's head (clipped to
 * max_output), truncated, stderr's head, and the tail (sg_job_tail).
 * out's buffers are appended to, not reset.
 */
void sg_job_result(const struct sg_job_reply *r, const char *text, size_t len,
		   size_t max_output, struct sg_exec_result *out);

/*
 * One exec of a job driven to its result (sg_job_drive): the start, then
 * attaches while the job answers "pending", with what every remote
 * adapter meets handled once: a request that failed (retried, and the
 * start sent again only while nothing showed it arrived: the job's start
 * is exclusive, so a second copy attaches), a reply without a trailer, a
 * job whose files are gone (started again, three times at most), a
 * cancel (the job is killed).  The adapter sends one request per trip.
 */
enum sg_job_trip {
	SG_JOB_TRIP_REPLY = 0, /* *text holds the request's reply */
	SG_JOB_TRIP_LIVES,     /* no reply, but the job lives on: attach next */
	SG_JOB_TRIP_RESTART,   /* nothing was started: send the start again */
	SG_JOB_TRIP_FAILED,    /* failed (err set); it may have reached the job */
	SG_JOB_TRIP_FATAL,     /* err set; the environment is gone or refuses us */
};

struct sg_job_driver {
	void *ctx;
	const char *mark; /* the job's trailer word */
	/*
	 * Send the start (attach false) or the attach.  On REPLY, *text and
	 * *len hold the reply, the adapter's until its next trip or the end
	 * of the drive.
	 */
	enum sg_job_trip (*trip)(void *ctx, bool attach, const char **text, size_t *len,
				 struct sg_cancel *cancel, struct sg_errinfo *err);
	/* Kill the job, or keep it from starting; with a wait of its own. */
	void (*kill)(void *ctx);
	int fails;          /* failed trips in a row before giving up; 1: the first */
	int64_t backoff_ms; /* the wait before retry n is n times this */
	bool kill_unseen;   /* giving up kills even a job no reply has shown */
	int64_t pending_ms; /* pending this long after the start: killed, a timeout (0: never) */
};

/*
 * Drive the job; out (reset by the caller) gets the result, stdout clipped
 * to max_output.  SG_OK with a result; else the error (the adapter's
 * sentence for a FATAL trip, "...; the command may have run" when no reply
 * came back, the token's reason for a cancel).
 */
sg_err sg_job_drive(const struct sg_job_driver *d, size_t max_output,
		    struct sg_exec_result *out, struct sg_cancel *cancel, struct sg_errinfo *err)
	SG_MUST_CHECK;

#endif
