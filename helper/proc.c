/*
 * proc.c - sg-helper's process spooling: `proc spawn|read|get|list|stop|wait`
 * (command lines in helper.h, semantics in docs/protocol.md section 8).
 *
 * Three processes take part in a spawn.  The *spawner* is the sg-helper the
 * gateway runs through the adapter's exec; it forks the *supervisor*, waits
 * for its report, prints it and exits.  Inside `sg-helper job --linger`
 * (sg_helper_answer set: a request that may end before its process) the
 * spawner is the supervisor itself, with no fork: it answers through that
 * hook once the command ended or the wait passed, and supervises on.  The
 * supervisor leaves the caller's session (setsid), keeps none of the
 * caller's descriptors (one that is the spawner only keeps its own from the
 * child), forks the *child* (the command, leader of its own process group)
 * and pumps the child's output into the spool until the child has been
 * reaped *and* its pipe is at EOF; only then does it write the final
 * record, so no output ever follows it.  Every other command only reads
 * these files (and signals the group): the gateway runs them in-process
 * for environments on this host, from several threads at once, so they
 * keep no global state, never fork, and wait only on descriptors they own
 * and the cancel token.
 *
 * Every file under C is opened with O_NOFOLLOW: C is writable from inside
 * the environment, and on the local backend these reads run in the
 * gateway, where a spool replaced by a link to /proc/self/environ would
 * be the gateway's own.  O_NOFOLLOW covers only the last component, so a
 * process directory C/<ID> is opened on its own without following a link
 * (id_dir_open) and its files relative to it: a C/<ID> replaced by a link
 * to a host directory is no process.  Nothing there is opened in a way
 * that waits (O_NONBLOCK, and spools must be regular files): a FIFO put in
 * a file's place would stop the gateway's worker in open(2), which no
 * cancel interrupts.
 *
 * Files under --ctl C (created 0700):
 *
 *   C/.seq           the stamp counter: 8 bytes, a native-endian uint64.
 *                    Every record write holds flock(LOCK_EX) on it while it
 *                    bumps the counter, stores the new value as the record's
 *                    "stamp" and renames the record into place, so records
 *                    change in stamp order; `proc wait` scans under LOCK_SH
 *                    and so never misses a change, which file mtimes (a few
 *                    milliseconds coarse) could not promise.
 *   C/.logs/<ID>.log the full log of an ended foreground run (bash's
 *                    full_log_ref): its stdout, then its stderr.  The run's
 *                    own directory is removed once it answered.
 *   C/.tmp/          the one directory a confined child may write besides
 *                    its root (--confine); the gateway may point TMPDIR at it.
 *   C/<ID>/record.json  one JSON object: ExecutionProcessV4's fields in the
 *                    protocol's order, then internal ones no reply shows:
 *                    supervisor_pid, supervisor_start (field 22 of
 *                    /proc/<pid>/stat, against pid reuse), pid_ns (inode of
 *                    the supervisor's pid namespace), pgid, timeout_ms,
 *                    retain, stamp, birth (the stamp of the first write,
 *                    which orders `proc list`) and message (why a spawn
 *                    failed).  Written as record.tmp and renamed, always
 *                    under the .seq lock.
 *   C/<ID>/out       the spool: the newest `retain` bytes of the output; the
 *                    byte at offset o sits at position o % retain (ring.h).
 *   C/<ID>/progress  24 bytes, three native-endian uint64: total (bytes
 *                    produced and stored), reserve (the end of the chunk
 *                    being stored, equal to total between chunks) and
 *                    total ^ reserve ^ PROGRESS_MAGIC, so a reader racing a
 *                    write sees a mismatch and reads again.  The writer
 *                    publishes reserve before it overwrites old bytes, so a
 *                    reader that copied bytes and then reads reserve knows
 *                    which of them may have been overwritten meanwhile.
 *   C/<ID>/stop      created by `proc stop`: the supervisor then records
 *                    `stopped` rather than `exited`.
 *
 * A record that says `running` whose supervisor is gone (dead, a zombie, or
 * its pid reused: the start time differs) is rewritten as `lost`, under the
 * .seq lock and only after re-reading it there, so a supervisor's final
 * record is never overwritten.
 */
/*
 * _GNU_SOURCE: pipe2, ppoll, signalfd, inotify, flock, syscall() for
 * pidfd_open and the Linux-only signal names are GNU/Linux APIs.
 */
#define _GNU_SOURCE

#include "helper/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/jw.h"
#include "base/fsutil.h"
#include "base/limits.h"
#include "core/path.h"
#include "base/ring.h"
#include "base/sha256.h"
#include "helper/fs.h"
#include "base/utf8.h"

#define PROGRESS_MAGIC UINT64_C(0x73672d70726f6373)

/* What the host's worker fixes about processes (tool_bash.go, process.go). */
#define SG_PROC_PROMOTED_RECHECK_MIN 30   /* a promoted foreground run's recheck */
#define SG_PROC_RECHECK_MAX_MIN 1440      /* process/recheck's minutes */
#define SG_PROC_OUTPUT_MAX (30 * SG_KiB)  /* bash's `output` */
#define SG_PROC_SIDE_MAX (64 * SG_KiB)    /* bash's structured stdout and stderr */
#define SG_PROC_SIDE_RETAIN SG_PROC_RETAIN /* each of those spools (the full log) */
#define SG_PROC_LOG_CHUNK SG_MiB          /* one copy into the full log */
#define SG_PROC_WRITE_POLL_MS 50          /* a full input FIFO re-tried */
#define SG_PROC_INPUT_PIPE 4096         /* the input FIFO's capacity (one page) */
#define SG_PROC_TTY_COLS 80               /* a terminal's first size */
#define SG_PROC_TTY_ROWS 24

/* ---- small tools ------------------------------------------------------ */

static int64_t sat_add(int64_t a, int64_t b)
{
	return b > INT64_MAX - a ? INT64_MAX : a + b;
}

/* Ids name directories: a conservative alphabet, never "." or "..". */
static bool id_valid(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > SG_PROC_ID_MAX || id[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '-' || c == '_' ||
		      c == '.'))
			return false;
	}
	return true;
}

/* dst = a "/" b ["/" c]; SG_E_INVALID_ARGUMENT when it does not fit. */
static sg_err path_join(char *dst, size_t n, const char *a, const char *b,
			const char *c, struct sg_errinfo *err)
{
	int k = c ? snprintf(dst, n, "%s/%s/%s", a, b, c)
		  : snprintf(dst, n, "%s/%s", a, b);

	if (k < 0 || (size_t)k >= n)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "the path under %s is too long", a);
	return SG_OK;
}

/*
 * Open the directory C/<id> without following a link there; -1 with err
 * set (SG_E_NOT_FOUND when there is no such directory, a link included).
 * Every file of a process is opened relative to this descriptor, so that
 * a command that replaces C/<id> with a link to a directory of the host
 * (the gateway's own, on the local backend) never has it read or written.
 */
static int id_dir_open(const char *ctl, const char *id, struct sg_errinfo *err)
{
	char path[SG_PATH_MAX];
	int fd;

	if (path_join(path, sizeof(path), ctl, id, NULL, err))
		return -1;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			sg_err_set(err, SG_E_NOT_FOUND, "no process %s", id);
		else if (errno == ELOOP || errno == ENOTDIR)
			sg_err_set(err, SG_E_NOT_FOUND,
				   "no process %s: %s is not a directory", id, path);
		else
			sg_err_set(err, SG_E_INTERNAL, "cannot open %s: %s", path,
				   strerror(errno));
	}
	return fd;
}

/*
 * Open a file of a process directory (dirfd) for reading, without
 * following a link or waiting for a FIFO's writer, and only when it is a
 * regular file; -1 with errno (EINVAL for anything else).
 */
static int id_file_open(int dirfd, const char *name)
{
	struct stat st;
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		errno = EINVAL;
		fd = -1;
	}
	return fd;
}

/* The path inotify watches for dirfd: the directory it is, wherever that is. */
static void fd_path(char *dst, size_t n, int fd)
{
	snprintf(dst, n, "/proc/self/fd/%d", fd);
}

/* RFC 3339 UTC with milliseconds: 2026-11-29T08:00:00.123Z. */
static void utc_now(char *dst, size_t n)
{
	struct timespec ts;
	struct tm tm;
	char day[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(dst, n, "%s.%03uZ", day,
		 (unsigned)(ts.tv_nsec / 1000000) % 1000u);
}

static void signal_name(int sig, char *dst, size_t n)
{
	static const struct {
		int sig;
		const char *name;
	} names[] = {
		{ SIGHUP, "SIGHUP" },	  { SIGINT, "SIGINT" },
		{ SIGQUIT, "SIGQUIT" },	  { SIGILL, "SIGILL" },
		{ SIGTRAP, "SIGTRAP" },	  { SIGABRT, "SIGABRT" },
		{ SIGBUS, "SIGBUS" },	  { SIGFPE, "SIGFPE" },
		{ SIGKILL, "SIGKILL" },	  { SIGUSR1, "SIGUSR1" },
		{ SIGSEGV, "SIGSEGV" },	  { SIGUSR2, "SIGUSR2" },
		{ SIGPIPE, "SIGPIPE" },	  { SIGALRM, "SIGALRM" },
		{ SIGTERM, "SIGTERM" },	  { SIGCHLD, "SIGCHLD" },
		{ SIGCONT, "SIGCONT" },	  { SIGSTOP, "SIGSTOP" },
		{ SIGTSTP, "SIGTSTP" },	  { SIGTTIN, "SIGTTIN" },
		{ SIGTTOU, "SIGTTOU" },	  { SIGURG, "SIGURG" },
		{ SIGXCPU, "SIGXCPU" },	  { SIGXFSZ, "SIGXFSZ" },
		{ SIGVTALRM, "SIGVTALRM" }, { SIGPROF, "SIGPROF" },
		{ SIGWINCH, "SIGWINCH" }, { SIGIO, "SIGIO" },
		{ SIGPWR, "SIGPWR" },	  { SIGSYS, "SIGSYS" },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (names[i].sig == sig) {
			snprintf(dst, n, "%s", names[i].name);
			return;
		}
	}
	snprintf(dst, n, "SIG%d", sig);
}

/* ---- the record --------------------------------------------------------- */

enum proc_status { PS_RUNNING, PS_EXITED, PS_STOPPED, PS_FAILED, PS_LOST };

static const char *const proc_status_words[] = {
	"running", "exited", "stopped", "failed", "lost",
};

/* A time the record may leave unset, and a consumer's name. */
#define REC_TIME 40
#define REC_NAME 256

/*
 * One process.  The file keeps the supervisor's own words (status
 * exited/stopped/failed/lost, signal, message); what the host is shown is
 * the host's process.Process, derived from them by rec_view.
 */
struct proc_rec {
	char *text;        /* owned: the parsed file, strings unescaped in place */
	const char **argv; /* owned array, NULL-terminated; NULL: a command */
	/* Borrowed from text (parsed) or from the command line (spawn). */
	const char *id, *op, *session, *command, *cwd, *message;
	const char *owner_kind, *owner_id, *generation, *lifecycle, *log_path;
	enum proc_status status;
	int64_t pid, exit_code; /* -1 stands for null */
	char signal[24];        /* "" stands for null */
	char started_at[REC_TIME], ended_at[REC_TIME], updated_at[REC_TIME];
	/* What the host changes after the start (proc update). */
	char mode[16], delivered_at[REC_TIME], consumer[REC_NAME];
	char next_recheck[REC_TIME], pending_recheck[REC_TIME];
	int64_t recheck_minutes;
	int64_t sup_pid, sup_start, pid_ns, pgid, timeout_ms, retain;
	int64_t stamp, birth;
	/*
	 * tty: the command runs on a terminal; input: C/<ID>/in reaches its
	 * stdin; hidden: a foreground run no reply shows until it is
	 * promoted; split: its stdout and stderr are also kept apart;
	 * log_base: the oldest offset the spool still holds, once ended.
	 */
	int64_t tty, input, hidden, split, log_base;
	size_t bytes;           /* the file's size, as read */
	/*
	 * A stop marker lies beside a record still running: the host's
	 * `stopping`, from the stop's start to the supervisor's final
	 * record.  Read with the record, never stored in it.
	 */
	bool stopping;
};

static const struct {
	const char *key;
	size_t off;
} rec_strs[] = {
	{ "id", offsetof(struct proc_rec, id) },
	{ "operation_id", offsetof(struct proc_rec, op) },
	{ "root_thread_id", offsetof(struct proc_rec, session) },
	{ "command", offsetof(struct proc_rec, command) },
	{ "cwd", offsetof(struct proc_rec, cwd) },
	{ "message", offsetof(struct proc_rec, message) },
	{ "owner_kind", offsetof(struct proc_rec, owner_kind) },
	{ "owner_id", offsetof(struct proc_rec, owner_id) },
	{ "host_generation_id", offsetof(struct proc_rec, generation) },
	{ "lifecycle", offsetof(struct proc_rec, lifecycle) },
	{ "log_path", offsetof(struct proc_rec, log_path) },
};

static const struct {
	const char *key;
	size_t off, size;
} rec_smalls[] = {
	{ "signal", offsetof(struct proc_rec, signal), sizeof(((struct proc_rec *)0)->signal) },
	{ "started_at", offsetof(struct proc_rec, started_at), REC_TIME },
	{ "ended_at", offsetof(struct proc_rec, ended_at), REC_TIME },
	{ "updated_at", offsetof(struct proc_rec, updated_at), REC_TIME },
	{ "completion_mode", offsetof(struct proc_rec, mode), sizeof(((struct proc_rec *)0)->mode) },
	{ "completion_delivered_at", offsetof(struct proc_rec, delivered_at), REC_TIME },
	{ "completion_consumed_by", offsetof(struct proc_rec, consumer), REC_NAME },
	{ "next_recheck_at", offsetof(struct proc_rec, next_recheck), REC_TIME },
	{ "pending_recheck_at", offsetof(struct proc_rec, pending_recheck), REC_TIME },
};

static const struct {
	const char *key;
	size_t off;
} rec_ints[] = {
	{ "pid", offsetof(struct proc_rec, pid) },
	{ "exit_code", offsetof(struct proc_rec, exit_code) },
	{ "supervisor_pid", offsetof(struct proc_rec, sup_pid) },
	{ "supervisor_start", offsetof(struct proc_rec, sup_start) },
	{ "pid_ns", offsetof(struct proc_rec, pid_ns) },
	{ "pgid", offsetof(struct proc_rec, pgid) },
	{ "timeout_ms", offsetof(struct proc_rec, timeout_ms) },
	{ "retain", offsetof(struct proc_rec, retain) },
	{ "stamp", offsetof(struct proc_rec, stamp) },
	{ "birth", offsetof(struct proc_rec, birth) },
	{ "recheck_minutes", offsetof(struct proc_rec, recheck_minutes) },
	{ "tty", offsetof(struct proc_rec, tty) },
	{ "input", offsetof(struct proc_rec, input) },
	{ "hidden", offsetof(struct proc_rec, hidden) },
	{ "split", offsetof(struct proc_rec, split) },
	{ "log_base", offsetof(struct proc_rec, log_base) },
};

static void rec_init(struct proc_rec *r)
{
	memset(r, 0, sizeof(*r));
	r->pid = r->exit_code = -1;
}

static void rec_release(struct proc_rec *r)
{
	free(r->text);
	free(r->argv);
	rec_init(r);
}

static int hex4(const char *p, unsigned *out)
{
	unsigned v = 0;

	for (int i = 0; i < 4; i++) {
		char c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

/*
 * Decode the JSON string whose body starts at *pp (just past the quote)
 * in place; an escape is never shorter than what it stands for, so the
 * result fits where it was.  Returns the string, or NULL if malformed.
 */
static char *json_str(char **pp)
{
	char *p = *pp, *w = p, *start = p;
	unsigned cp, lo;

	for (;;) {
		unsigned char c = (unsigned char)*p;

		if (c == '"')
			break;
		if (c < 0x20)
			return NULL;
		if (c != '\\') {
			*w++ = *p++;
			continue;
		}
		p++;
		switch (*p) {
		case '"': case '\\': case '/':
			*w++ = *p;
			break;
		case 'b': *w++ = '\b'; break;
		case 'f': *w++ = '\f'; break;
		case 'n': *w++ = '\n'; break;
		case 'r': *w++ = '\r'; break;
		case 't': *w++ = '\t'; break;
		case 'u':
			if (hex4(p + 1, &cp))
				return NULL;
			p += 4;
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (p[1] != '\\' || p[2] != 'u' ||
				    hex4(p + 3, &lo) || lo < 0xdc00 || lo > 0xdfff)
					return NULL;
				p += 6;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			} else if (cp == 0 || (cp >= 0xdc00 && cp <= 0xdfff)) {
				return NULL;
			}
			w += sg_utf8_put(w, cp);
			break;
		default:
			return NULL;
		}
		p++;
	}
	*w = '\0';
	*pp = p + 1;
	return start;
}

static void json_ws(char **pp)
{
	while (**pp == ' ' || **pp == '\n' || **pp == '\t' || **pp == '\r')
		(*pp)++;
}

static void rec_set_small(char *dst, size_t n, const char *s)
{
	snprintf(dst, n, "%s", s ? s : "");
}

static bool rec_set_str(struct proc_rec *r, const char *key, const char *s)
{
	for (size_t i = 0; i < sizeof(rec_strs) / sizeof(rec_strs[0]); i++) {
		if (strcmp(rec_strs[i].key, key) == 0) {
			*(const char **)((char *)r + rec_strs[i].off) = s;
			return true;
		}
	}
	for (size_t i = 0; i < sizeof(rec_smalls) / sizeof(rec_smalls[0]); i++) {
		if (strcmp(rec_smalls[i].key, key) == 0) {
			rec_set_small((char *)r + rec_smalls[i].off, rec_smalls[i].size, s);
			return true;
		}
	}
	if (strcmp(key, "status") == 0) {
		for (int i = 0; i <= PS_LOST; i++)
			if (s && strcmp(s, proc_status_words[i]) == 0) {
				r->status = (enum proc_status)i;
				return true;
			}
		return false;
	}
	/* Unknown keys are skipped: a newer helper may have written them. */
	return true;
}

static void rec_set_int(struct proc_rec *r, const char *key, int64_t v)
{
	for (size_t i = 0; i < sizeof(rec_ints) / sizeof(rec_ints[0]); i++)
		if (strcmp(rec_ints[i].key, key) == 0)
			*(int64_t *)((char *)r + rec_ints[i].off) = v;
}

static bool rec_parse_argv(struct proc_rec *r, char **pp)
{
	size_t n = 0, cap = 0;
	char *p = *pp + 1;

	free(r->argv);
	r->argv = NULL;
	for (;;) {
		char *s;

		json_ws(&p);
		if (*p == ']' && n == 0)
			break;
		if (*p != '"')
			return false;
		p++;
		s = json_str(&p);
		if (!s)
			return false;
		if (n + 2 > cap) {
			size_t ncap = cap ? cap * 2 : 8;
			const char **v = realloc(r->argv, ncap * sizeof(*v));

			if (!v)
				return false;
			r->argv = v;
			cap = ncap;
		}
		r->argv[n++] = s;
		json_ws(&p);
		if (*p == ',') {
			p++;
			continue;
		}
		if (*p != ']')
			return false;
		break;
	}
	if (!r->argv) {
		r->argv = calloc(1, sizeof(*r->argv));
		if (!r->argv)
			return false;
	}
	r->argv[n] = NULL;
	*pp = p + 1;
	return true;
}

/*
 * Parse the flat object the supervisor writes: string, integer, null,
 * boolean and array-of-string values.  Takes ownership of text (malloc,
 * NUL-terminated) whatever happens.
 */
static bool rec_parse(struct proc_rec *r, char *text)
{
	char *p = text;

	rec_init(r);
	r->text = text;
	r->status = PS_LOST;
	json_ws(&p);
	if (*p++ != '{')
		return false;
	json_ws(&p);
	if (*p == '}')
		return false;
	for (;;) {
		char *key, *s, *end;
		long long v;

		json_ws(&p);
		if (*p++ != '"' || !(key = json_str(&p)))
			return false;
		json_ws(&p);
		if (*p++ != ':')
			return false;
		json_ws(&p);
		if (*p == '"') {
			p++;
			s = json_str(&p);
			if (!s || !rec_set_str(r, key, s))
				return false;
		} else if (*p == '[') {
			if (strcmp(key, "argv") != 0 || !rec_parse_argv(r, &p))
				return false;
		} else if (strncmp(p, "null", 4) == 0) {
			p += 4;
			rec_set_int(r, key, -1);
		} else if (strncmp(p, "true", 4) == 0) {
			p += 4;
		} else if (strncmp(p, "false", 5) == 0) {
			p += 5;
		} else {
			errno = 0;
			v = strtoll(p, &end, 10);
			if (end == p || errno)
				return false;
			p = end;
			rec_set_int(r, key, (int64_t)v);
		}
		json_ws(&p);
		if (*p == ',') {
			p++;
			continue;
		}
		if (*p != '}')
			return false;
		break;
	}
	/* A record names its process and exactly one of command and argv. */
	return r->id && r->session && r->cwd && !r->command != !r->argv;
}

static sg_err put_str(struct sg_buf *b, const char *key, const char *s)
{
	sg_err rc = sg_jw_key(b, key, 0);

	if (!rc)
		rc = s ? sg_jw_str(b, s, strlen(s)) : sg_buf_adds(b, "null");
	return rc;
}

static sg_err put_int(struct sg_buf *b, const char *key, int64_t v)
{
	sg_err rc = sg_jw_key(b, key, 0);

	if (!rc)
		rc = v < 0 ? sg_buf_adds(b, "null")
			   : sg_buf_addf(b, "%lld", (long long)v);
	return rc;
}

/* The record as its file keeps it: every field, by the tables above. */
static sg_err rec_json(struct sg_buf *b, const struct proc_rec *r)
{
	sg_err rc = sg_buf_adds(b, "{");

	if (!rc)
		rc = sg_jw_key(b, "id", 1);
	if (!rc)
		rc = sg_jw_str(b, r->id, strlen(r->id));
	for (size_t i = 1; !rc && i < sizeof(rec_strs) / sizeof(rec_strs[0]); i++) {
		const char *s = *(const char *const *)((const char *)r + rec_strs[i].off);

		if (s)
			rc = put_str(b, rec_strs[i].key, s);
	}
	for (size_t i = 0; !rc && i < sizeof(rec_smalls) / sizeof(rec_smalls[0]); i++) {
		const char *s = (const char *)r + rec_smalls[i].off;

		if (s[0])
			rc = put_str(b, rec_smalls[i].key, s);
	}
	for (size_t i = 0; !rc && i < sizeof(rec_ints) / sizeof(rec_ints[0]); i++)
		rc = put_int(b, rec_ints[i].key,
			     *(const int64_t *)((const char *)r + rec_ints[i].off));
	if (!rc)
		rc = put_str(b, "status", proc_status_words[r->status]);
	if (!rc && r->argv)
		rc = sg_jw_key(b, "argv", 0);
	for (size_t i = 0; !rc && r->argv && r->argv[i]; i++) {
		rc = sg_buf_addc(b, i ? ',' : '[');
		if (!rc)
			rc = sg_jw_str(b, r->argv[i], strlen(r->argv[i]));
	}
	if (!rc && r->argv)
		rc = sg_buf_adds(b, r->argv[0] ? "]" : "[]");
	if (!rc)
		rc = sg_buf_addc(b, '}');
	return rc;
}

/* Go's zero time: what the host's record says of a time not yet reached. */
#define REC_ZERO_TIME "0001-01-01T00:00:00Z"

/* The host's words for how a process ended: status, cause, last_error. */
static void rec_outcome(const struct proc_rec *r, const char **status, const char **cause,
			char *last_error, size_t n)
{
	last_error[0] = '\0';
	*cause = "";
	*status = "failed";
	switch (r->status) {
	case PS_RUNNING:
		*status = r->stopping ? "stopping" : "running";
		return;
	case PS_STOPPED:
		*status = "stopped";
		*cause = "requested_stop";
		if (r->message)
			snprintf(last_error, n, "%s", r->message);
		return;
	case PS_EXITED:
		*cause = "natural_exit";
		if (r->signal[0]) {
			*status = "failed";
			snprintf(last_error, n, "signal: %s", r->signal);
		} else if (r->exit_code != 0) {
			*status = "failed";
			snprintf(last_error, n, "exit status %lld", (long long)r->exit_code);
		} else {
			*status = "stopped";
		}
		return;
	case PS_FAILED:
		*status = "failed";
		snprintf(last_error, n, "%s", r->message ? r->message : "the process did not start");
		return;
	case PS_LOST:
		*status = "failed";
		snprintf(last_error, n, "the process's supervisor is gone; its outcome is unknown");
		return;
	}
}

/* A text key, left out when empty (Go's omitempty). */
static sg_err view_str(struct sg_buf *b, const char *key, const char *s, bool always)
{
	if (!always && (!s || !s[0]))
		return SG_OK;
	return put_str(b, key, s ? s : "");
}

/*
 * The record as the host's process.Process, its keys in the host's order;
 * exit_code is -1 while running and whenever a signal ended the process.
 */
static sg_err rec_view(struct sg_buf *b, const struct proc_rec *r)
{
	const char *status, *cause;
	char last_error[SG_ERR_MSG];
	sg_err rc;

	rec_outcome(r, &status, &cause, last_error, sizeof(last_error));
	rc = sg_buf_adds(b, "{");
	if (!rc)
		rc = sg_jw_key(b, "id", 1);
	if (!rc)
		rc = sg_jw_str(b, r->id, strlen(r->id));
	if (!rc)
		rc = view_str(b, "owner_kind", r->owner_kind ? r->owner_kind : "main_agent", true);
	if (!rc)
		rc = view_str(b, "owner_id", r->owner_id, true);
	if (!rc)
		rc = view_str(b, "root_thread_id", r->session, true);
	if (!rc)
		rc = view_str(b, "host_generation_id", r->generation, true);
	if (!rc)
		rc = view_str(b, "lifecycle", r->lifecycle ? r->lifecycle : "managed", true);
	if (!rc)
		rc = view_str(b, "completion_mode", r->mode[0] ? r->mode : "resume", true);
	if (!rc)
		rc = view_str(b, "status", status, true);
	if (!rc)
		rc = sg_buf_addf(b, ",\"pid\":%lld,\"pgid\":%lld", (long long)(r->pid > 0 ? r->pid : 0),
				 (long long)(r->pgid > 0 ? r->pgid : 0));
	if (!rc)
		rc = view_str(b, "process_start_time", r->started_at[0] ? r->started_at : REC_ZERO_TIME,
			      true);
	if (!rc)
		rc = sg_buf_addf(b, ",\"tty\":%s", r->tty > 0 ? "true" : "false");
	if (!rc)
		rc = view_str(b, "log_path", r->log_path, true);
	if (!rc)
		rc = sg_buf_addf(b, ",\"log_base_offset\":%lld",
				 (long long)(r->log_base > 0 ? r->log_base : 0));
	if (!rc)
		rc = view_str(b, "command", r->command ? r->command : r->argv ? r->argv[0] : "", true);
	if (!rc)
		rc = view_str(b, "cwd", r->cwd, true);
	if (!rc)
		rc = view_str(b, "started_at", r->started_at[0] ? r->started_at : REC_ZERO_TIME, true);
	if (!rc)
		rc = view_str(b, "updated_at",
			      r->updated_at[0] ? r->updated_at
			      : r->ended_at[0] ? r->ended_at
			      : r->started_at[0] ? r->started_at : REC_ZERO_TIME, true);
	if (!rc)
		rc = view_str(b, "stopped_at",
			      r->status != PS_RUNNING && r->ended_at[0] ? r->ended_at : REC_ZERO_TIME,
			      true);
	if (!rc)
		rc = sg_buf_addf(b, ",\"exit_code\":%lld",
				 (long long)(r->status == PS_RUNNING || r->signal[0] ? -1
					     : r->exit_code));
	if (!rc)
		rc = view_str(b, "last_error", last_error, false);
	if (!rc)
		rc = view_str(b, "terminal_cause", cause, false);
	if (!rc)
		rc = view_str(b, "completion_delivered_at", r->delivered_at, false);
	if (!rc)
		rc = view_str(b, "completion_consumed_by", r->consumer, false);
	if (!rc)
		rc = sg_buf_addf(b, ",\"recheck_minutes\":%lld",
				 (long long)(r->recheck_minutes > 0 ? r->recheck_minutes : 0));
	if (!rc)
		rc = view_str(b, "next_recheck_at", r->next_recheck, false);
	if (!rc)
		rc = view_str(b, "pending_recheck_at", r->pending_recheck, false);
	if (!rc)
		rc = view_str(b, "operation_id", r->op, false);
	if (!rc)
		rc = sg_buf_addc(b, '}');
	return rc;
}

/* ---- stamps, storing and loading records -------------------------------- */

/*
 * Open C/.seq and flock it (LOCK_SH or LOCK_EX); returns the fd or -1.
 *
 * The environment's processes can open this file and take the lock too,
 * and hold it for ever.  On the local backend this runs in the gateway,
 * where a blocking flock() would stop a worker, the process watcher and
 * the shutdown that joins it, past every budget.  Our writers hold it for
 * one rename, so a lock still busy after SG_PROC_LOCK_MS is held on
 * purpose: give up then, or as soon as the token fires.
 */
static int seq_lock(const char *ctl, int how, const struct sg_cancel *cancel,
		    struct sg_errinfo *err)
{
	char path[SG_PATH_MAX];
	int64_t deadline = sg_now_ms() + SG_PROC_LOCK_MS, pause = 1;
	sg_err rc = SG_OK;
	int fd;

	if (path_join(path, sizeof(path), ctl, ".seq", NULL, err))
		return -1;
	fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	if (fd < 0) {
		sg_err_set(err, errno == ENOENT ? SG_E_NOT_FOUND : SG_E_INTERNAL,
			   "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	while (!rc && flock(fd, how | LOCK_NB) < 0) {
		sg_err why;

		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK)
			rc = sg_err_set(err, SG_E_INTERNAL, "cannot lock %s: %s",
					path, strerror(errno));
		else if (sg_now_ms() >= deadline)
			rc = sg_err_set(err, SG_E_TIMEOUT,
					"%s has been locked for %d ms: a process of "
					"the environment holds it",
					path, SG_PROC_LOCK_MS);
		else if ((why = sg_cancel_sleep(cancel, pause)) != SG_OK)
			rc = sg_err_set(err, why,
					"waiting for the lock on %s was cancelled", path);
		pause = pause < 50 ? pause * 2 : 50;
	}
	if (rc) {
		close(fd);
		return -1;
	}
	return fd;
}

static uint64_t seq_value(int fd)
{
	uint64_t v = 0;

	if (pread(fd, &v, sizeof(v), 0) != (ssize_t)sizeof(v))
		v = 0;
	return v;
}

/* Write r as C/<id>/record.json; the caller holds the .seq lock (fd). */
static sg_err rec_store_locked(const char *ctl, int seqfd, struct proc_rec *r,
			       struct sg_errinfo *err)
{
	struct sg_buf b = SG_BUF_INIT(SG_MAX_FRAME);
	uint64_t seq = seqfd >= 0 ? seq_value(seqfd) + 1 : 0;
	int fd = -1, dirfd = id_dir_open(ctl, r->id, err);
	const char *tmp = "record.tmp";
	sg_err rc;

	if (dirfd < 0) {
		rc = err->code;
		goto out;
	}
	/* Without the lock (seqfd -1: a hidden record) the stamp stays. */
	if (seqfd >= 0 && pwrite(seqfd, &seq, sizeof(seq), 0) != (ssize_t)sizeof(seq)) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot advance %s/.seq: %s",
				ctl, strerror(errno));
		goto out;
	}
	if (seqfd >= 0)
		r->stamp = (int64_t)seq;
	utc_now(r->updated_at, sizeof(r->updated_at));
	if (!r->birth)
		r->birth = r->stamp;
	rc = rec_json(&b, r);
	if (rc) {
		sg_err_set(err, rc, "the record of %s is too large", r->id);
		goto out;
	}
	/*
	 * Whatever the environment left at record.tmp goes first, and the
	 * file is made new: a FIFO there would have stopped this open(2),
	 * under the exclusive lock, until a writer came.
	 */
	if (unlinkat(dirfd, tmp, 0) < 0 && errno != ENOENT) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot replace %s/%s/%s: %s", ctl,
				r->id, tmp, strerror(errno));
		goto out;
	}
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
		    0600);
	if (fd < 0 || sg_write_all(fd, b.p, b.len)) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot write %s/%s/%s: %s", ctl, r->id,
				tmp, strerror(errno));
		goto out;
	}
	if (close(fd) < 0) {
		fd = -1;
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot write %s/%s/%s: %s", ctl, r->id,
				tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (renameat(dirfd, tmp, dirfd, "record.json") < 0) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot rename %s/%s/%s: %s", ctl, r->id,
				tmp, strerror(errno));
		goto out;
	}
	rc = SG_OK;
out:
	if (fd >= 0)
		close(fd);
	if (dirfd >= 0)
		close(dirfd);
	sg_buf_release(&b);
	return rc;
}

/*
 * The records' lock for a store of r: a hidden record (a foreground run
 * no reply shows, whose stamp nobody waits for) takes it only when it is
 * free at once, so that a process of the environment holding it cannot
 * stop every bash call; -1 then, with err clear, means "store unlocked".
 */
static int store_lock(const char *ctl, const struct proc_rec *r, struct sg_errinfo *err)
{
	char path[SG_PATH_MAX];
	int fd;

	if (r->hidden <= 0)
		return seq_lock(ctl, LOCK_EX, NULL, err);
	if (path_join(path, sizeof(path), ctl, ".seq", NULL, err))
		return -1;
	fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static sg_err rec_store(const char *ctl, struct proc_rec *r,
			struct sg_errinfo *err)
{
	int fd = store_lock(ctl, r, err);
	sg_err rc;

	if (fd < 0 && r->hidden <= 0)
		return err->code;
	rc = rec_store_locked(ctl, fd, r, err);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Read C/<id>/record.json into r; SG_E_NOT_FOUND when there is none. */
static sg_err rec_read(const char *ctl, const char *id, struct proc_rec *r,
		       struct sg_errinfo *err)
{
	char path[SG_PATH_MAX];
	struct sg_buf b = SG_BUF_INIT(SG_MAX_FRAME);
	struct stat st;
	int fd = -1, dirfd = -1;
	sg_err rc;

	rec_init(r);
	rc = path_join(path, sizeof(path), ctl, id, "record.json", err);
	if (rc)
		goto out;
	dirfd = id_dir_open(ctl, id, err);
	if (dirfd < 0) {
		rc = err->code;
		goto out;
	}
	fd = openat(dirfd, "record.json", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			rc = sg_err_set(err, SG_E_NOT_FOUND,
					"no process %s", id);
		else
			rc = sg_err_set(err, SG_E_INTERNAL, "cannot read %s: %s",
					path, strerror(errno));
		goto out;
	}
	/*
	 * The supervisor renames a file of its own into place, never a
	 * second name of one: a record hard-linked under many ids would
	 * cost the gateway its size once per id at no cost to the disk.
	 * (No name at all is fine: a newer record was renamed over the one
	 * just opened.)
	 */
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink > 1) {
		rc = sg_err_set(err, SG_E_INTERNAL, "%s is not a record", path);
		goto out;
	}
	rc = sg_read_all(fd, &b);
	if (rc) {
		sg_err_set(err, rc, "cannot read %s", path);
		goto out;
	}
	r->bytes = b.len;
	if (!rec_parse(r, sg_buf_take(&b, NULL))) {
		rec_release(r);
		rc = sg_err_set(err, SG_E_INTERNAL, "%s is malformed", path);
		goto out;
	}
	r->stopping = r->status == PS_RUNNING &&
		      faccessat(dirfd, "stop", F_OK, AT_SYMLINK_NOFOLLOW) == 0;
	rc = SG_OK;
out:
	if (fd >= 0)
		close(fd);
	if (dirfd >= 0)
		close(dirfd);
	sg_buf_release(&b);
	return rc;
}

/*
 * The inode of a pid namespace ("self" or a pid), 0 when unknown.  It is
 * looked at twice: gVisor (release 20221219) gives the link a new inode at
 * every look, which names no namespace, and an unknown namespace is one
 * rec_foreign() does not hold against a record (every process of a
 * container shares its one pid namespace; group_ours() still bounds what
 * a stop signals).
 */
static int64_t pid_ns_of(const char *who)
{
	char path[64];
	struct stat a, b;

	snprintf(path, sizeof(path), "/proc/%s/ns/pid", who);
	if (stat(path, &a) != 0 || stat(path, &b) != 0 || a.st_dev != b.st_dev ||
	    a.st_ino != b.st_ino)
		return 0;
	return (int64_t)a.st_ino;
}

/*
 * State letter and start time (clock ticks since boot) of a process from
 * /proc/<pid>/stat.  Returns 1 when read, 0 when the process does not
 * exist, -1 when /proc cannot tell.
 */
static int proc_stat(int64_t pid, char *state, int64_t *start)
{
	char path[64], text[1024], *p;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%lld/stat", (long long)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT && access("/proc/self/stat", R_OK) == 0
			       ? 0 : -1;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return n == 0 ? 0 : -1;
	text[n] = '\0';
	/* The command name may hold anything, ')' included: skip to the last. */
	p = strrchr(text, ')');
	if (!p || p[1] != ' ' || !p[2])
		return -1;
	*state = p[2];
	p += 2;
	for (field = 3; field < 22 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (!p)
		return -1;
	*start = strtoll(p, NULL, 10);
	return 1;
}

/* Does this process run in a pid namespace other than the caller's? */
static bool rec_foreign(const struct proc_rec *r)
{
	int64_t self = pid_ns_of("self");

	return r->pid_ns && self && r->pid_ns != self;
}

/* Is the supervisor that wrote r still the same live process? */
static bool sup_alive(const struct proc_rec *r)
{
	char state = '?';
	int64_t start = 0;
	int k;

	if (r->sup_pid <= 0)
		return false;
	/* Pids of another namespace mean nothing here: never call it lost. */
	if (rec_foreign(r))
		return true;
	k = proc_stat(r->sup_pid, &state, &start);
	if (k == 0)
		return false;
	if (k < 0)
		return kill((pid_t)r->sup_pid, 0) == 0 || errno == EPERM;
	if (state == 'Z' || state == 'X')
		return false;
	return r->sup_start == 0 || start == r->sup_start;
}

/*
 * rec_read, and a `running` record whose supervisor is gone becomes
 * `lost` (re-read and rewritten under the .seq lock so that a final
 * record the supervisor wrote meanwhile wins).
 */
static sg_err rec_load(const char *ctl, const char *id, struct proc_rec *r,
		       const struct sg_cancel *cancel, struct sg_errinfo *err)
{
	sg_err rc = rec_read(ctl, id, r, err);
	int fd;

	if (rc || r->status != PS_RUNNING || sup_alive(r))
		return rc;
	/*
	 * A supervisor stores its final record before it exits: one that
	 * ended between the read and the look at it is found out by reading
	 * again, without the lock, which a process of the environment may
	 * hold (only a record still running after that is judged under it).
	 */
	rec_release(r);
	rc = rec_read(ctl, id, r, err);
	if (rc || r->status != PS_RUNNING)
		return rc;
	rec_release(r);
	fd = seq_lock(ctl, LOCK_EX, cancel, err);
	if (fd < 0)
		return err->code;
	rc = rec_read(ctl, id, r, err);
	if (!rc && r->status == PS_RUNNING && !sup_alive(r)) {
		r->status = PS_LOST;
		utc_now(r->ended_at, sizeof(r->ended_at));
		rc = rec_store_locked(ctl, fd, r, err);
		if (rc)
			rec_release(r);
	}
	close(fd);
	return rc;
}

/* A record no reply shows yet (a foreground run) is no process. */
static sg_err rec_load_shown(const char *ctl, const char *id, struct proc_rec *r,
			     const struct sg_cancel *cancel, struct sg_errinfo *err)
{
	sg_err rc = rec_load(ctl, id, r, cancel, err);

	if (!rc && r->hidden > 0) {
		rec_release(r);
		rc = sg_err_set(err, SG_E_NOT_FOUND, "no process %s", id);
	}
	return rc;
}

/* ---- progress and the spool ---------------------------------------------- */

static int progress_put(int fd, uint64_t total, uint64_t reserve)
{
	uint64_t v[3] = { total, reserve, total ^ reserve ^ PROGRESS_MAGIC };

	return pwrite(fd, v, sizeof(v), 0) == (ssize_t)sizeof(v) ? 0 : -1;
}

/* total and reserve; false when the file cannot be read consistently. */
static bool progress_get(int fd, uint64_t *total, uint64_t *reserve)
{
	/* A mismatch only lasts while one 24-byte pwrite is in flight. */
	for (int i = 0; i < 1000; i++) {
		uint64_t v[3];
		ssize_t n = pread(fd, v, sizeof(v), 0);

		if (n == 0) {
			*total = *reserve = 0;
			return true;
		}
		if (n == (ssize_t)sizeof(v) &&
		    (v[0] ^ v[1] ^ PROGRESS_MAGIC) == v[2] && v[1] >= v[0]) {
			*total = v[0];
			*reserve = v[1];
			return true;
		}
		if (n < 0 && errno != EINTR)
			return false;
	}
	return false;
}

/*
 * The supervisor's side: append n bytes (at most half of retain, see
 * sup_chunk) to the spool.  A chunk that cannot be stored is dropped
 * without counting it, so offsets never point at bytes that are not there.
 */
static void spool_add(int outfd, int progfd, uint64_t retain, uint64_t *total,
		      const char *data, size_t n)
{
	uint64_t end = *total + n;
	struct sg_ring_seg seg[2];
	int nseg = sg_ring_segments(*total, end, retain, seg);
	const char *p = data;

	if (progress_put(progfd, *total, end))
		return;
	for (int i = 0; i < nseg; i++) {
		if (pwrite(outfd, p, seg[i].len, (off_t)seg[i].pos) !=
		    (ssize_t)seg[i].len) {
			progress_put(progfd, *total, *total);
			return;
		}
		p += seg[i].len;
	}
	*total = end;
	progress_put(progfd, end, end);
}

/* A copy of part of the spool, consistent with the writer at one moment. */
struct proc_snap {
	uint64_t start; /* absolute offset of data.p[0] */
	uint64_t total; /* bytes produced when the copy was taken */
	struct sg_buf data;
};

/*
 * The spools of a process: the merged output every read sees, then, for a
 * foreground run (split), its stdout alone and its stderr alone.
 */
enum { SPOOL_ALL, SPOOL_OUT, SPOOL_ERR, SPOOL_COUNT };
static const char *const spool_data[SPOOL_COUNT] = { "out", "out1", "out2" };
static const char *const spool_progress[SPOOL_COUNT] = { "progress", "progress1", "progress2" };

/*
 * Copy the spool's bytes [from, to) into data (replaced), from the one or
 * two places they lie in the ring of retain bytes.
 */
static sg_err snap_copy(int outfd, const char *id, uint64_t from, uint64_t to, uint64_t retain,
			struct sg_buf *data, struct sg_errinfo *err)
{
	struct sg_ring_seg seg[2];
	int nseg = sg_ring_segments(from, to, retain, seg);
	char *dst;
	sg_err rc;

	sg_buf_reset(data);
	rc = sg_buf_reserve(data, (size_t)(to - from), &dst);
	if (rc)
		return sg_err_set(err, rc, "a read of %llu bytes is too large",
				  (unsigned long long)(to - from));
	for (int i = 0; i < nseg; i++) {
		if (pread(outfd, dst, seg[i].len, (off_t)seg[i].pos) != (ssize_t)seg[i].len)
			return sg_err_set(err, SG_E_INTERNAL, "the spool of process %s is short",
					  id);
		dst += seg[i].len;
	}
	sg_buf_commit(data, (size_t)(to - from));
	return SG_OK;
}

/*
 * Copy the window a read of n bytes from offset receives, plus up to 3 bytes
 * past it so that a character at the edge can be judged whole.  The copy
 * is checked against the writer afterwards: bytes the writer may have
 * overwritten meanwhile are dropped from the front (start moves forward).
 */
static sg_err snap_take(int dirfd, const char *id, int spool, uint64_t retain, uint64_t offset,
			uint64_t n, struct proc_snap *s, struct sg_errinfo *err)
{
	const char *name = spool_progress[spool];
	int outfd = -1, progfd = -1;
	uint64_t total = 0, reserve;
	sg_err rc = SG_OK;

	sg_buf_reset(&s->data);
	s->start = s->total = 0;
	progfd = id_file_open(dirfd, name);
	if (progfd >= 0) {
		name = spool_data[spool];
		outfd = id_file_open(dirfd, name);
	}
	if (outfd < 0) {
		/* A spawn that failed early may leave no spool: nothing to read. */
		if (errno != ENOENT)
			rc = sg_err_set(err, SG_E_INTERNAL,
					"cannot open the spool file %s of process %s: %s", name,
					id, errno == EINVAL ? "not a regular file" : strerror(errno));
		goto out;
	}
	for (int attempt = 0; attempt < 16; attempt++) {
		struct sg_ring_window w;
		uint64_t ext, safe;

		if (!progress_get(progfd, &total, &reserve))
			break;
		/*
		 * Bytes the chunk in flight is overwriting are gone already:
		 * the window starts after them.  A chunk is at most half the
		 * spool (spool_add), so half of it is always readable.
		 */
		sg_ring_window(total,
			       reserve - total < retain
				       ? retain - (reserve - total)
				       : 0,
			       offset, n, &w);
		ext = total - w.start > n + 3 ? w.start + n + 3 : total;
		rc = snap_copy(outfd, id, w.start, ext, retain, &s->data, err);
		if (rc)
			goto out;
		if (!progress_get(progfd, &reserve, &reserve))
			break;
		/* Bytes below safe may have been overwritten during the copy. */
		safe = sg_ring_oldest(reserve, retain);
		if (safe >= ext && ext > w.start)
			continue;
		s->start = w.start;
		s->total = total;
		if (safe > w.start && ext > w.start) {
			sg_buf_consume(&s->data, (size_t)(safe - w.start));
			s->start = safe;
		}
		goto out;
	}
	/*
	 * The writer kept overtaking the copy (this reader was descheduled
	 * each time): answer with nothing at the end, older bytes dropped.
	 */
	sg_buf_reset(&s->data);
	s->start = s->total = total;
out:
	if (progfd >= 0)
		close(progfd);
	if (outfd >= 0)
		close(outfd);
	return rc;
}

/*
 * Bytes at the end of s[0..n) that start a character the stream has not
 * finished yet (held back while the process runs).
 */
static size_t utf8_unfinished(const unsigned char *s, size_t n)
{
	for (size_t back = 1; back <= 3 && back <= n; back++) {
		unsigned c = s[n - back];
		size_t want;

		if ((c & 0xc0) == 0x80)
			continue;
		want = c >= 0xf0 && c <= 0xf4	? 4
		       : c >= 0xe0 && c <= 0xef ? 3
		       : c >= 0xc2 && c <= 0xdf ? 2
						: 1;
		return want > back ? back : 0;
	}
	return 0;
}

/*
 * How many bytes of the snapshot a read of at most n returns: no
 * character split at n, none left unfinished at the end of the stream
 * while the process still runs.
 */
static size_t snap_keep(const struct proc_snap *s, uint64_t n, bool running)
{
	size_t k = sg_utf8_clip(s->data.p, s->data.len, (size_t)n);

	if (running && s->start + k == s->total)
		k -= utf8_unfinished((const unsigned char *)s->data.p, k);
	return k;
}

/* ---- waiting ------------------------------------------------------------- */

/*
 * What a wait polls: an inotify watch on the files that change, the
 * supervisors' pidfds (so that a killed supervisor ends the wait and its
 * record turns `lost`) and the cancel token.
 */
#define WAITER_WATCHES 8

struct proc_waiter {
	int ino;  /* inotify, -1 until armed */
	int nwd;
	int wd[WAITER_WATCHES];
	int npid;
	int pidfd[SG_PROC_WATCH_MAX];
	bool tick; /* a supervisor without a pidfd: re-check now and then */
};

/*
 * One inotify descriptor per thread, kept for the thread's life: closing
 * one that has had a watch takes the kernel ~10-20 ms (it waits for an RCU
 * grace period), which a long-polling process/read would otherwise pay on
 * every reply.  Watches are removed and events drained between uses.
 */
static pthread_key_t ino_key;
static pthread_once_t ino_once = PTHREAD_ONCE_INIT;

static void ino_close(void *p)
{
	close((int)(intptr_t)p - 1);
}

static void ino_key_make(void)
{
	if (pthread_key_create(&ino_key, ino_close) != 0)
		ino_key = (pthread_key_t)-1;
}

static int ino_get(void)
{
	int fd;

	pthread_once(&ino_once, ino_key_make);
	fd = (int)(intptr_t)pthread_getspecific(ino_key) - 1;
	if (fd < 0) {
		fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		if (fd >= 0 && pthread_setspecific(ino_key, (void *)(intptr_t)(fd + 1)) != 0) {
			close(fd);
			fd = -1;
		}
	}
	return fd;
}

static void waiter_init(struct proc_waiter *w)
{
	w->ino = -1;
	w->nwd = 0;
	w->npid = 0;
	w->tick = false;
}

static void waiter_forget_pids(struct proc_waiter *w)
{
	for (int i = 0; i < w->npid; i++)
		close(w->pidfd[i]);
	w->npid = 0;
	w->tick = false;
}

static void waiter_release(struct proc_waiter *w)
{
	char ev[4096];

	waiter_forget_pids(w);
	if (w->ino >= 0) {
		for (int i = 0; i < w->nwd; i++)
			inotify_rm_watch(w->ino, w->wd[i]);
		/* Leave the shared descriptor empty for the next wait. */
		while (read(w->ino, ev, sizeof(ev)) > 0)
			;
	}
	w->ino = -1;
	w->nwd = 0;
}

static sg_err waiter_arm(struct proc_waiter *w, const char *path,
			 uint32_t mask, struct sg_errinfo *err)
{
	int wd = -1;

	if (w->ino < 0)
		w->ino = ino_get();
	if (w->ino >= 0 && w->nwd < WAITER_WATCHES)
		wd = inotify_add_watch(w->ino, path, mask);
	if (wd < 0)
		return sg_err_set(err, SG_E_INTERNAL, "cannot watch %s: %s",
				  path, strerror(errno));
	w->wd[w->nwd++] = wd;
	return SG_OK;
}

static void waiter_watch_sup(struct proc_waiter *w, const struct proc_rec *r)
{
	int fd = -1;

	if (r->status != PS_RUNNING || rec_foreign(r))
		return;
#ifdef SYS_pidfd_open
	if (w->npid < SG_PROC_WATCH_MAX)
		fd = (int)syscall(SYS_pidfd_open, (pid_t)r->sup_pid, 0);
#endif
	if (fd < 0) {
		w->tick = true;
		return;
	}
	w->pidfd[w->npid++] = fd;
}

/*
 * Sleep until something watched happens, the monotonic time `until` (ns)
 * passes or the token fires; SG_OK or the token's reason.
 */
static sg_err waiter_wait(struct proc_waiter *w, int64_t until,
			  const struct sg_cancel *cancel,
			  struct sg_errinfo *err)
{
	struct pollfd pfd[2 + SG_PROC_WATCH_MAX];
	int64_t left = until - sg_now_ns();
	struct timespec ts;
	nfds_t n = 0;
	sg_err rc;

	if (w->tick && left > (int64_t)SG_PROC_LOST_POLL_MS * 1000000)
		left = (int64_t)SG_PROC_LOST_POLL_MS * 1000000;
	if (left < 0)
		left = 0;
	ts.tv_sec = (time_t)(left / 1000000000);
	ts.tv_nsec = (long)(left % 1000000000);
	pfd[n++] = (struct pollfd){ .fd = w->ino, .events = POLLIN };
	pfd[n++] = (struct pollfd){ .fd = sg_cancel_fd(cancel),
				    .events = POLLIN };
	for (int i = 0; i < w->npid; i++)
		pfd[n++] = (struct pollfd){ .fd = w->pidfd[i],
					    .events = POLLIN };
	if (!sg_cancel_check(cancel) && ppoll(pfd, n, &ts, NULL) > 0 &&
	    (pfd[0].revents & POLLIN)) {
		char ev[4096];

		while (read(w->ino, ev, sizeof(ev)) > 0)
			;
	}
	rc = sg_cancel_check(cancel);
	if (rc)
		return sg_err_set(err, rc, "the wait was cancelled");
	return SG_OK;
}

/* ---- the commands ---------------------------------------------------------- */

/* --ctl and, when want_id, a valid --id. */
static sg_err args_ctl_id(struct sg_args *a, bool want_id, const char **ctl,
			  const char **id, struct sg_errinfo *err)
{
	*ctl = sg_args_str(a, "ctl", NULL);
	*id = want_id ? sg_args_str(a, "id", NULL) : NULL;
	if (!*ctl || !**ctl)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT, "--ctl is required");
	if (want_id && !*id)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT, "--id is required");
	if (want_id && !id_valid(*id))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "--id must be 1 to %d letters, digits, '-', "
				  "'_' or '.', not starting with '.'",
				  SG_PROC_ID_MAX);
	return SG_OK;
}

/* Nothing but options: no positional words, nothing after `--`. */
static sg_err args_done(struct sg_args *a, struct sg_errinfo *err)
{
	if (a->npos > 0)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "unexpected argument %s", a->pos[0]);
	if (a->nrest > 0)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "unexpected arguments after --");
	return sg_args_unused(a, err);
}

/* {"ok":true,"<key>":{record}[,"message":"..."]} */
static sg_err reply_rec(struct sg_buf *reply, const char *key,
			const struct proc_rec *r, const char *message)
{
	sg_err rc = sg_reply_ok(reply);

	if (!rc)
		rc = sg_jw_key(reply, key, 0);
	if (!rc)
		rc = rec_view(reply, r);
	if (!rc)
		rc = sg_buf_addf(reply, ",\"input_available\":%s",
				 r->input > 0 && r->status == PS_RUNNING ? "true" : "false");
	if (!rc && message)
		rc = put_str(reply, "message", message);
	if (!rc)
		rc = sg_reply_end(reply);
	return rc;
}

static sg_err cmd_get(struct sg_args *a, struct sg_buf *reply,
		      const struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct proc_rec r;
	const char *ctl, *id;
	sg_err rc;

	rec_init(&r);
	rc = args_ctl_id(a, true, &ctl, &id, err);
	if (!rc)
		rc = args_done(a, err);
	if (!rc)
		rc = rec_load_shown(ctl, id, &r, cancel, err);
	if (!rc)
		rc = reply_rec(reply, "process", &r, NULL);
	rec_release(&r);
	return rc;
}

static int rec_by_birth(const void *x, const void *y)
{
	const struct proc_rec *a = x, *b = y;

	return a->birth < b->birth ? -1 : a->birth > b->birth;
}

/*
 * This session's records (every session's when session is NULL), oldest
 * first (new array in *out, each record owned).  With `since`, only those whose stamp is above it.  A missing
 * ctl directory holds no records.
 */
static sg_err scan(const char *ctl, const char *session, int64_t since,
		   bool check, struct proc_rec **out, size_t *count,
		   const struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct proc_rec *v = NULL;
	size_t n = 0, cap = 0, bytes = 0;
	struct dirent *de;
	DIR *d;
	sg_err rc = SG_OK;

	*out = NULL;
	*count = 0;
	d = opendir(ctl);
	if (!d)
		return errno == ENOENT ? SG_OK
				       : sg_err_set(err, SG_E_INTERNAL,
						    "cannot list %s: %s", ctl,
						    strerror(errno));
	while ((de = readdir(d))) {
		struct sg_errinfo e2 = { 0 };
		struct proc_rec r;

		if (!id_valid(de->d_name))
			continue;
		/* check: turn dead `running` records into `lost` (takes the
		 * exclusive lock, so never while scanning under the shared one). */
		if (check ? rec_load(ctl, de->d_name, &r, cancel, &e2)
			  : rec_read(ctl, de->d_name, &r, &e2))
			continue; /* mid-spawn (no record yet) or unreadable */
		/* A foreground run is no session's process until it is promoted. */
		if ((session && (strcmp(r.session, session) != 0 || r.hidden > 0)) ||
		    r.stamp <= since) {
			rec_release(&r);
			continue;
		}
		/* The records are the environment's to write: bound what one
		 * scan holds. */
		bytes += r.bytes;
		if (bytes > SG_PROC_SCAN_MAX) {
			rec_release(&r);
			rc = sg_err_set(err, SG_E_TOO_LARGE,
					"the process records in %s hold more than %d MiB",
					ctl, (int)(SG_PROC_SCAN_MAX / SG_MiB));
			break;
		}
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct proc_rec *nv = realloc(v, ncap * sizeof(*nv));

			if (!nv) {
				rec_release(&r);
				rc = sg_err_set(err, SG_E_INTERNAL,
						"out of memory");
				break;
			}
			v = nv;
			cap = ncap;
		}
		v[n++] = r;
	}
	closedir(d);
	if (rc) {
		for (size_t i = 0; i < n; i++)
			rec_release(&v[i]);
		free(v);
		return rc;
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), rec_by_birth);
	*out = v;
	*count = n;
	return SG_OK;
}

static void scan_free(struct proc_rec *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		rec_release(&v[i]);
	free(v);
}

static sg_err reply_recs(struct sg_buf *reply, const char *key,
			 const struct proc_rec *v, size_t n)
{
	sg_err rc = sg_jw_key(reply, key, 0);

	if (!rc)
		rc = sg_buf_addc(reply, '[');
	for (size_t i = 0; !rc && i < n; i++) {
		if (i)
			rc = sg_buf_addc(reply, ',');
		if (!rc)
			rc = rec_view(reply, &v[i]);
	}
	if (!rc)
		rc = sg_buf_addc(reply, ']');
	return rc;
}

static sg_err cmd_list(struct sg_args *a, struct sg_buf *reply,
		       const struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const char *ctl, *id, *session = sg_args_str(a, "session", NULL);
	struct proc_rec *v = NULL;
	size_t n = 0;
	sg_err rc;

	rc = args_ctl_id(a, false, &ctl, &id, err);
	if (!rc && !session)
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT,
				"--session is required");
	if (!rc)
		rc = args_done(a, err);
	if (!rc)
		rc = scan(ctl, session, -1, true, &v, &n, cancel, err);
	if (!rc)
		rc = sg_reply_ok(reply);
	if (!rc)
		rc = reply_recs(reply, "processes", v, n);
	if (!rc)
		rc = sg_reply_end(reply);
	scan_free(v, n);
	return rc;
}

/*
 * Wait until the record of id is no longer `running` or the monotonic
 * deadline passes; r holds the latest record either way.
 */
static sg_err await_end(const char *ctl, const char *id, int64_t deadline,
			struct proc_rec *r, const struct sg_cancel *cancel,
			struct sg_errinfo *err)
{
	struct proc_waiter w;
	char dir[64];
	int dirfd = id_dir_open(ctl, id, err);
	sg_err rc = dirfd < 0 ? err->code : SG_OK;

	waiter_init(&w);
	if (dirfd >= 0)
		fd_path(dir, sizeof(dir), dirfd);
	while (!rc) {
		rec_release(r);
		rc = rec_load(ctl, id, r, cancel, err);
		if (rc || r->status != PS_RUNNING || sg_now_ns() >= deadline)
			break;
		if (sg_helper_due && sg_now_ns() >= sg_helper_due) {
			sg_helper_overdue();
			continue;
		}
		if (w.ino < 0) {
			/* Armed before the next look, so no change is missed. */
			rc = waiter_arm(&w, dir, IN_MOVED_TO | IN_CLOSE_WRITE,
					err);
			waiter_watch_sup(&w, r);
			continue;
		}
		rc = waiter_wait(&w, sg_helper_due && sg_helper_due < deadline ? sg_helper_due
									 : deadline,
				 cancel, err);
	}
	waiter_release(&w);
	if (dirfd >= 0)
		close(dirfd);
	return rc;
}

/*
 * Stop one process: the stop marker, SIGTERM to its group, `grace` ms for
 * it to end, then SIGKILL and a bounded wait for the supervisor's final
 * record; r holds the latest record.  An ended process is left as it is.
 */
/*
 * Whether the process group a record names may be signalled from here.
 * The record lies where the environment writes, so a forged one may name
 * any group: never 0 or 1 (kill(0) and kill(-1) reach every process we
 * may signal), nothing past a pid_t.  With seen (--seen-as: the gateway
 * runs this on the host, outside the environment), the group's leader
 * must also see seen, the control directory as the environment's
 * processes see it, as the very directory ctl is: a process of this
 * environment, not one of the host's or another environment's.
 */
static bool group_ours(const struct proc_rec *r, const char *ctl, const char *seen)
{
	char path[SG_PATH_MAX];
	struct stat a, b;

	if (r->pgid < 2 || r->pgid > INT_MAX)
		return false;
	if (!seen)
		return true;
	if (snprintf(path, sizeof(path), "/proc/%lld/root%s", (long long)r->pgid, seen) >=
	    (int)sizeof(path))
		return false;
	return stat(ctl, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

static sg_err stop_one(const char *ctl, const char *seen, const char *id, int64_t grace,
		       struct proc_rec *r, const struct sg_cancel *cancel,
		       struct sg_errinfo *err)
{
	int fd, dirfd;
	sg_err rc = rec_load(ctl, id, r, cancel, err);

	if (rc || r->status != PS_RUNNING)
		return rc;
	if (rec_foreign(r))
		return sg_err_set(err, SG_E_UNSUPPORTED,
				  "process %s runs in another pid namespace: "
				  "stop it from inside its environment", id);
	if (!group_ours(r, ctl, seen))
		return sg_err_set(err, SG_E_PERMISSION,
				  "process %s: its record names a process group "
				  "outside its environment, which is not signalled", id);
	dirfd = id_dir_open(ctl, id, err);
	if (dirfd < 0)
		return err->code;
	/* O_NONBLOCK: a FIFO put there fails (ENXIO) rather than waits. */
	fd = openat(dirfd, "stop", O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
		    0600);
	close(dirfd);
	if (fd < 0)
		return sg_err_set(err, SG_E_INTERNAL, "cannot write the stop marker of %s: %s",
				  id, strerror(errno));
	close(fd);
	kill(-(pid_t)r->pgid, SIGTERM);
	rc = await_end(ctl, id, sat_add(sg_now_ns(), grace * 1000000), r,
		       cancel, err);
	if (rc || r->status != PS_RUNNING)
		return rc;
	kill(-(pid_t)r->pgid, SIGKILL);
	rc = await_end(ctl, id,
		       sat_add(sg_now_ns(), (int64_t)SG_PROC_REAP_MS * 1000000),
		       r, cancel, err);
	if (!rc && r->status == PS_RUNNING)
		rc = sg_err_set(err, SG_E_TIMEOUT,
				"process %s did not end within %d ms of SIGKILL",
				id, SG_PROC_REAP_MS);
	return rc;
}

static sg_err cmd_stop(struct sg_args *a, struct sg_buf *reply,
		       const struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct proc_rec r;
	const char *ctl, *id, *seen = sg_args_str(a, "seen-as", NULL);
	int64_t grace;
	sg_err rc;

	rec_init(&r);
	rc = args_ctl_id(a, true, &ctl, &id, err);
	if (!rc)
		rc = sg_args_int(a, "grace-ms", SG_PROC_GRACE_MS, INT32_MAX,
				 &grace, err);
	if (!rc)
		rc = args_done(a, err);
	if (!rc)
		rc = stop_one(ctl, seen, id, grace, &r, cancel, err);
	if (!rc)
		rc = reply_rec(reply, "process", &r, NULL);
	rec_release(&r);
	return rc;
}

/*
 * `proc stop-all`: every running process under --ctl, whatever its
 * session: what an operator's removal of a whole environment needs, so
 * that no supervisor outlives its environment's files.
 */
static sg_err cmd_stop_all(struct sg_args *a, struct sg_buf *reply,
			   const struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct proc_rec *v = NULL;
	const char *ctl, *id, *seen = sg_args_str(a, "seen-as", NULL);
	int64_t grace;
	size_t n = 0, stopped = 0;
	sg_err rc;

	rc = args_ctl_id(a, false, &ctl, &id, err);
	if (!rc)
		rc = sg_args_int(a, "grace-ms", SG_PROC_GRACE_MS, INT32_MAX,
				 &grace, err);
	if (!rc)
		rc = args_done(a, err);
	if (!rc)
		rc = scan(ctl, NULL, -1, true, &v, &n, cancel, err);
	for (size_t i = 0; !rc && i < n; i++) {
		struct proc_rec r;

		if (v[i].status != PS_RUNNING)
			continue;
		rec_init(&r);
		rc = stop_one(ctl, seen, v[i].id, grace, &r, cancel, err);
		rec_release(&r);
		/* A forged record stops nothing, and not the others either. */
		if (rc == SG_E_PERMISSION) {
			sg_err_clear(err);
			rc = SG_OK;
			continue;
		}
		stopped++;
	}
	if (!rc)
		rc = sg_reply_ok(reply);
	if (!rc)
		rc = sg_jw_key(reply, "stopped", 0);
	if (!rc)
		rc = sg_buf_addf(reply, "%zu", stopped);
	if (!rc)
		rc = sg_reply_end(reply);
	scan_free(v, n);
	return rc;
}

static sg_err mark_due(const char *ctl, const char *session, struct proc_rec **out,
		       size_t *count, size_t *marked, const struct sg_cancel *cancel,
		       struct sg_errinfo *err);

/*
 * Wait until a record of session changed after *since, or until deadline:
 * *v and *n (new) are the changed records, *stamp the sequence they were
 * read at.  Each turn first turns dead supervisors' records into `lost`
 * and watches the live ones, changed or not, then looks under the shared
 * lock, where stamps are settled.  seq is the sequence file the wait
 * watches.
 */
static sg_err wait_changes(const char *ctl, const char *session, const char *seq,
			   int64_t *since, int64_t deadline, struct proc_rec **v, size_t *n,
			   uint64_t *stamp, const struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct proc_waiter w;
	sg_err rc;

	waiter_init(&w);
	for (;;) {
		int fd;

		scan_free(*v, *n);
		rc = scan(ctl, session, -1, true, v, n, cancel, err);
		if (rc)
			break;
		waiter_forget_pids(&w);
		for (size_t i = 0; i < *n; i++)
			waiter_watch_sup(&w, &(*v)[i]);
		scan_free(*v, *n);
		*v = NULL;
		*n = 0;
		fd = seq_lock(ctl, LOCK_SH, cancel, err);
		if (fd < 0) {
			rc = err->code;
			break;
		}
		*stamp = seq_value(fd);
		/* A stamp from the future means the directory was made anew. */
		if ((uint64_t)*since > *stamp)
			*since = 0;
		rc = scan(ctl, session, *since, false, v, n, cancel, err);
		close(fd);
		if (rc || *n > 0 || sg_now_ns() >= deadline)
			break;
		if (w.ino < 0) {
			rc = waiter_arm(&w, seq, IN_MODIFY, err);
			if (rc)
				break;
			continue;
		}
		rc = waiter_wait(&w, deadline, cancel, err);
		if (rc)
			break;
	}
	waiter_release(&w);
	return rc;
}

static sg_err cmd_wait(struct sg_args *a, struct sg_buf *reply,
		       const struct sg_cancel *cancel, struct sg_errinfo *err)
{
	const char *ctl, *id, *session = sg_args_str(a, "session", NULL);
	char path[SG_PATH_MAX];
	struct proc_rec *v = NULL, *due = NULL;
	size_t n = 0, ndue = 0, marked = 0;
	int64_t since, timeout;
	uint64_t stamp = 0;
	bool want_due = sg_args_flag(a, "recheck-due");
	sg_err rc;

	rc = args_ctl_id(a, false, &ctl, &id, err);
	if (!rc && !session)
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT, "--session is required");
	if (!rc && !sg_args_str(a, "since", NULL))
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT, "--since is required");
	if (!rc)
		rc = sg_args_int(a, "since", 0, INT64_MAX, &since, err);
	if (!rc)
		rc = sg_args_int(a, "timeout-ms", 0, INT64_MAX / 1000000, &timeout, err);
	if (!rc)
		rc = args_done(a, err);
	if (!rc && mkdir(ctl, 0700) < 0 && errno != EEXIST)
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot create %s: %s", ctl, strerror(errno));
	if (!rc)
		rc = path_join(path, sizeof(path), ctl, ".seq", NULL, err);
	/* Marked before the stamp is read, so their marks are among the changes. */
	if (!rc && want_due)
		rc = mark_due(ctl, session, &due, &ndue, &marked, cancel, err);
	if (!rc)
		rc = wait_changes(ctl, session, path, &since,
				  sat_add(sg_now_ns(), timeout * 1000000), &v, &n, &stamp, cancel,
				  err);
	if (!rc)
		rc = sg_reply_ok(reply);
	if (!rc)
		rc = sg_jw_key(reply, "stamp", 0);
	if (!rc)
		rc = sg_buf_addf(reply, "%llu", (unsigned long long)stamp);
	if (!rc)
		rc = reply_recs(reply, "changed", v, n);
	if (!rc && want_due)
		rc = reply_recs(reply, "due", due, marked);
	if (!rc)
		rc = sg_reply_end(reply);
	scan_free(v, n);
	scan_free(due, ndue);
	return rc;
}

/* ---- read ------------------------------------------------------------------ */

/* The host's OutputSnapshot, without Duration (the gateway measures it). */
static sg_err reply_read(struct sg_buf *reply, const struct proc_rec *r,
			 const struct proc_snap *s, size_t k, bool truncated, bool timed_out)
{
	sg_err rc = sg_reply_ok(reply);

	if (!rc)
		rc = sg_jw_key(reply, "Process", 0);
	if (!rc)
		rc = rec_view(reply, r);
	if (!rc)
		rc = sg_jw_key(reply, "Output", 0);
	if (!rc)
		rc = sg_jw_str(reply, s->data.p, k);
	if (!rc)
		rc = sg_buf_addf(reply,
				 ",\"Truncated\":%s,\"StartOffset\":%llu,\"EndOffset\":%llu,"
				 "\"TotalBytes\":%llu,\"TimedOut\":%s}",
				 truncated ? "true" : "false",
				 (unsigned long long)s->start,
				 (unsigned long long)(s->start + k),
				 (unsigned long long)s->total,
				 timed_out ? "true" : "false");
	return rc;
}

/*
 * `proc read`: the window from --offset, or with --tail the last --max
 * bytes.  From an offset, --wait-ns waits until bytes exist past it (and
 * --min-dwell-ns has passed since the call began), the process ends, or
 * the deadline passes (TimedOut).
 */
/* One proc read: its request, and what it has seen of the process. */
struct proc_read {
	const char *ctl, *id;
	int64_t offset, max, wait_ns, dwell_ns;
	bool tail, timed_out;
	uint64_t n;       /* the window: the most bytes the read may return */
	int dirfd;        /* the process directory */
	char dir[64];     /* its /proc/self/fd path, for the watch */
	struct proc_rec r;
	struct proc_snap s;
	struct proc_waiter w;
};

static sg_err read_request(struct sg_args *a, struct proc_read *pr, struct sg_errinfo *err)
{
	sg_err rc = args_ctl_id(a, true, &pr->ctl, &pr->id, err);

	if (!rc)
		rc = sg_args_int(a, "offset", 0, INT64_MAX, &pr->offset, err);
	if (!rc)
		rc = sg_args_int(a, "max", 0, INT64_MAX, &pr->max, err);
	if (!rc)
		rc = sg_args_int(a, "wait-ns", 0, INT64_MAX, &pr->wait_ns, err);
	if (!rc)
		rc = sg_args_int(a, "min-dwell-ns", 0, INT64_MAX, &pr->dwell_ns, err);
	if (!rc)
		pr->tail = sg_args_flag(a, "tail");
	if (!rc)
		rc = args_done(a, err);
	return rc;
}

/*
 * Wait until the read has something to return: a whole character at its
 * offset (and then until the dwell ends or the window is full), the
 * process no longer running, or the wait's deadline (pr->timed_out).  A
 * tail read waits for nothing: its offset becomes where the last n bytes
 * begin.  pr->r is the record as last loaded.
 */
static sg_err read_settle(struct proc_read *pr, const struct sg_cancel *cancel,
			  struct sg_errinfo *err)
{
	int64_t now = sg_now_ns();
	int64_t deadline = sat_add(now, pr->tail ? 0 : pr->wait_ns);
	int64_t dwell_end = sat_add(now, pr->dwell_ns);
	uint64_t probe = pr->n < 4 ? pr->n : 4;
	sg_err rc;

	for (;;) {
		bool ready;

		rec_release(&pr->r);
		rc = rec_load_shown(pr->ctl, pr->id, &pr->r, cancel, err);
		if (rc)
			return rc;
		if (pr->tail) {
			/* The total now tells where the last n bytes begin. */
			rc = snap_take(pr->dirfd, pr->id, SPOOL_ALL, (uint64_t)pr->r.retain, 0, 0,
				       &pr->s, err);
			if (!rc)
				pr->offset = pr->s.total > pr->n ? (int64_t)(pr->s.total - pr->n) : 0;
			return rc;
		}
		if (pr->r.status != PS_RUNNING || pr->wait_ns == 0)
			return SG_OK;
		/* A few bytes tell whether a whole character can be returned yet. */
		rc = snap_take(pr->dirfd, pr->id, SPOOL_ALL, (uint64_t)pr->r.retain,
			       (uint64_t)pr->offset, probe, &pr->s, err);
		if (rc)
			return rc;
		ready = snap_keep(&pr->s, probe, true) > 0;
		now = sg_now_ns();
		/* A full window needs no more dwelling. */
		if (ready && (now >= dwell_end || pr->s.total - pr->s.start >= pr->n))
			return SG_OK;
		if (!ready && now >= deadline) {
			pr->timed_out = true;
			return SG_OK;
		}
		if (pr->w.ino < 0) {
			/* Armed before the next look, so no write is missed. */
			rc = waiter_arm(&pr->w, pr->dir, IN_MODIFY | IN_MOVED_TO | IN_CLOSE_WRITE,
					err);
			if (rc)
				return rc;
			waiter_watch_sup(&pr->w, &pr->r);
			continue;
		}
		rc = waiter_wait(&pr->w, ready ? dwell_end : deadline, cancel, err);
		if (rc)
			return rc;
	}
}

static sg_err cmd_read(struct sg_args *a, struct sg_buf *reply,
		       const struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct proc_read pr = { .s = { .data = SG_BUF_INIT(SG_READ_CAP + 4) }, .dirfd = -1 };
	bool more;
	size_t k;
	sg_err rc;

	rec_init(&pr.r);
	waiter_init(&pr.w);
	rc = read_request(a, &pr, err);
	if (rc)
		goto out;
	/* The spool and the watch go through this one directory, never a link. */
	pr.dirfd = id_dir_open(pr.ctl, pr.id, err);
	if (pr.dirfd < 0) {
		rc = err->code;
		goto out;
	}
	fd_path(pr.dir, sizeof(pr.dir), pr.dirfd);
	pr.n = sg_ring_max((uint64_t)pr.max);
	rc = read_settle(&pr, cancel, err);
	if (!rc)
		rc = snap_take(pr.dirfd, pr.id, SPOOL_ALL, (uint64_t)pr.r.retain,
			       (uint64_t)pr.offset, pr.n, &pr.s, err);
	if (rc)
		goto out;
	k = snap_keep(&pr.s, pr.n, pr.r.status == PS_RUNNING);
	/* Escapes can make Output much larger than its bytes: shrink to fit. */
	for (;;) {
		more = pr.tail ? pr.s.start > 0 : pr.s.start + k < pr.s.total;
		rc = reply_read(reply, &pr.r, &pr.s, k, more, pr.timed_out);
		if (rc != SG_E_TOO_LARGE || k == 0)
			break;
		k = sg_utf8_clip(pr.s.data.p, k, k / 2);
	}
	if (rc)
		sg_err_set(err, rc, "the read of %s does not fit the reply", pr.id);
out:
	sg_buf_release(&pr.s.data);
	waiter_release(&pr.w);
	rec_release(&pr.r);
	if (pr.dirfd >= 0)
		close(pr.dirfd);
	return rc;
}


/* ---- what the host changes: update, write, resize ------------------------- */

/* utc_now, `seconds` from now. */
static void utc_after(char *dst, size_t n, int64_t seconds)
{
	struct timespec ts;
	struct tm tm;
	char day[32];
	time_t t;

	clock_gettime(CLOCK_REALTIME, &ts);
	t = ts.tv_sec + (time_t)seconds;
	gmtime_r(&t, &tm);
	strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(dst, n, "%s.%03uZ", day, (unsigned)(ts.tv_nsec / 1000000) % 1000u);
}

static bool natural_exit(const struct proc_rec *r)
{
	return r->status == PS_EXITED;
}

/* The changes one `proc update` asks for. */
struct proc_change {
	const char *mode, *consumer;
	int64_t recheck;           /* -1: unchanged */
	bool recheck_delivered, recheck_due, show, promote;
};

/* Apply c to r (under the .seq lock); SG_E_INVALID_ARGUMENT when it may not. */
static sg_err rec_change(struct proc_rec *r, const struct proc_change *c, struct sg_errinfo *err)
{
	bool live = r->status == PS_RUNNING;

	if (c->consumer) {
		if (live || !natural_exit(r) || strcmp(r->mode[0] ? r->mode : "resume", "resume") != 0)
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "process %s has no completion to deliver: only a natural "
					  "exit in resume mode has one", r->id);
		if (!r->delivered_at[0]) {
			utc_now(r->delivered_at, sizeof(r->delivered_at));
			rec_set_small(r->consumer, sizeof(r->consumer), c->consumer);
		}
	}
	if (c->recheck >= 0) {
		if (!live)
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "process %s is not running: a recheck needs a live process",
					  r->id);
		r->recheck_minutes = c->recheck;
		r->pending_recheck[0] = '\0';
		if (c->recheck > 0)
			utc_after(r->next_recheck, sizeof(r->next_recheck), c->recheck * 60);
		else
			r->next_recheck[0] = '\0';
	}
	if (c->mode)
		rec_set_small(r->mode, sizeof(r->mode), c->mode);
	if (c->recheck_due && live && r->next_recheck[0] && !r->pending_recheck[0])
		utc_now(r->pending_recheck, sizeof(r->pending_recheck));
	if (c->recheck_delivered) {
		r->pending_recheck[0] = '\0';
		if (live && r->recheck_minutes > 0)
			utc_after(r->next_recheck, sizeof(r->next_recheck), r->recheck_minutes * 60);
	}
	if (c->show)
		r->hidden = 0;
	if (c->promote && live) {
		r->recheck_minutes = SG_PROC_PROMOTED_RECHECK_MIN;
		utc_after(r->next_recheck, sizeof(r->next_recheck),
			  SG_PROC_PROMOTED_RECHECK_MIN * 60);
	}
	utc_now(r->updated_at, sizeof(r->updated_at));
	return SG_OK;
}

/* Read, change and store the record of id under the .seq lock; r: the result. */
static sg_err rec_update(const char *ctl, const char *id, const struct proc_change *c,
			 struct proc_rec *r, const struct sg_cancel *cancel,
			 struct sg_errinfo *err)
{
	int fd = seq_lock(ctl, LOCK_EX, cancel, err);
	sg_err rc;

	if (fd < 0)
		return err->code;
	rc = rec_read(ctl, id, r, err);
	if (!rc && r->hidden > 0 && !c->show)
		rc = sg_err_set(err, SG_E_NOT_FOUND, "no process %s", id);
	if (!rc)
		rc = rec_change(r, c, err);
	if (!rc)
		rc = rec_store_locked(ctl, fd, r, err);
	close(fd);
	return rc;
}

static sg_err cmd_update(struct sg_args *a, struct sg_buf *reply,
			 const struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct proc_change c = { .recheck = -1 };
	struct proc_rec r;
	const char *ctl, *id;
	sg_err rc;

	rec_init(&r);
	rc = args_ctl_id(a, true, &ctl, &id, err);
	c.mode = sg_args_str(a, "mode", NULL);
	c.consumer = sg_args_str(a, "deliver", NULL);
	c.recheck_delivered = sg_args_flag(a, "recheck-delivered");
	c.recheck_due = sg_args_flag(a, "recheck-due");
	if (!rc && sg_args_str(a, "recheck-minutes", NULL))
		rc = sg_args_int(a, "recheck-minutes", 0, SG_PROC_RECHECK_MAX_MIN, &c.recheck, err);
	if (!rc && c.mode && strcmp(c.mode, "resume") != 0 && strcmp(c.mode, "detached") != 0)
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT, "--mode must be resume or detached");
	if (!rc)
		rc = args_done(a, err);
	if (!rc)
		rc = rec_update(ctl, id, &c, &r, cancel, err);
	if (!rc)
		rc = reply_rec(reply, "process", &r, NULL);
	rec_release(&r);
	return rc;
}

/* A live record whose recheck time has come and that has none pending. */
static bool rec_due(const struct proc_rec *r, const char *now)
{
	return r->status == PS_RUNNING && r->next_recheck[0] && !r->pending_recheck[0] &&
	       strcmp(r->next_recheck, now) <= 0;
}

/*
 * Mark the record of id pending a recheck when, read again under the
 * .seq lock, it is still due (*was_due); r: that record.  Under the lock
 * only one of two waits marks it, so it is answered as due once.
 */
static sg_err rec_mark_due(const char *ctl, const char *id, const char *now,
			   struct proc_rec *r, bool *was_due, const struct sg_cancel *cancel,
			   struct sg_errinfo *err)
{
	const struct proc_change due = { .recheck = -1, .recheck_due = true };
	struct sg_errinfo gone = { 0 };
	int fd = seq_lock(ctl, LOCK_EX, cancel, err);
	sg_err rc = SG_OK;

	*was_due = false;
	rec_init(r);
	if (fd < 0)
		return err->code;
	/* A record removed or spoilt meanwhile is not due. */
	*was_due = !rec_read(ctl, id, r, &gone) && r->hidden <= 0 && rec_due(r, now);
	if (*was_due)
		rc = rec_change(r, &due, err);
	if (*was_due && !rc)
		rc = rec_store_locked(ctl, fd, r, err);
	close(fd);
	return rc;
}

/*
 * `proc wait --recheck-due`: session's records whose recheck has come,
 * marked pending as `proc update --recheck-due` marks one.  The first
 * *marked of the *count records in *out (new, each owned) are those.
 * The watcher's wait answers them, so no list of every record is needed
 * to find them.
 */
static sg_err mark_due(const char *ctl, const char *session, struct proc_rec **out,
		       size_t *count, size_t *marked, const struct sg_cancel *cancel,
		       struct sg_errinfo *err)
{
	char now[REC_TIME];
	/* check: a record whose supervisor is dead is lost, not due. */
	sg_err rc = scan(ctl, session, -1, true, out, count, cancel, err);

	*marked = 0;
	utc_now(now, sizeof(now));
	for (size_t i = 0; !rc && i < *count; i++) {
		struct proc_rec *v = *out, r;
		bool was_due = false;

		if (!rec_due(&v[i], now))
			continue;
		rc = rec_mark_due(ctl, v[i].id, now, &r, &was_due, cancel, err);
		if (rc || !was_due) {
			rec_release(&r);
			continue;
		}
		/* The marked record takes the place of the first unmarked one. */
		rec_release(&v[i]);
		v[i] = v[*marked];
		v[(*marked)++] = r;
	}
	return rc;
}

/*
 * Open a FIFO of a live process's directory for writing, without waiting
 * and only when it is a FIFO; -1 with err set.
 */
static int fifo_open(const char *ctl, const char *id, const char *name, struct sg_errinfo *err)
{
	struct stat st;
	int dirfd = id_dir_open(ctl, id, err), fd;

	if (dirfd < 0)
		return -1;
	fd = openat(dirfd, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	close(dirfd);
	if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode))) {
		close(fd);
		fd = -1;
		errno = EINVAL;
	}
	if (fd < 0)
		sg_err_set(err, SG_E_INVALID_ARGUMENT, "process %s does not accept input", id);
	return fd;
}

/* Write all of p to a non-blocking fd, waiting while it is full. */
static sg_err write_waiting(int fd, const char *id, const char *p, size_t n,
			    const struct sg_cancel *cancel, struct sg_errinfo *err)
{
	while (n > 0) {
		ssize_t k = write(fd, p, n);
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		sg_err why;

		if (k > 0) {
			p += k;
			n -= (size_t)k;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno != EAGAIN)
			return sg_err_set(err, SG_E_INVALID_ARGUMENT,
					  "process %s no longer accepts input: %s", id, strerror(errno));
		why = sg_cancel_check(cancel);
		if (why)
			return sg_err_set(err, why, "the write to process %s was cancelled", id);
		poll(&pfd, 1, SG_PROC_WRITE_POLL_MS);
	}
	return SG_OK;
}

static sg_err cmd_write(struct sg_args *a, const void *in, size_t inlen, struct sg_buf *reply,
			const struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct proc_rec r;
	const char *ctl, *id;
	int fd = -1;
	sg_err rc;

	rec_init(&r);
	rc = args_ctl_id(a, true, &ctl, &id, err);
	if (!rc)
		rc = args_done(a, err);
	if (!rc)
		rc = rec_load_shown(ctl, id, &r, cancel, err);
	if (!rc && (r.status != PS_RUNNING || r.input <= 0))
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT, "process %s does not accept input%s",
				id, r.status != PS_RUNNING ? ": it is not running" : "");
	if (!rc && (fd = fifo_open(ctl, id, "in", err)) < 0)
		rc = err->code;
	if (!rc)
		rc = write_waiting(fd, id, in, inlen, cancel, err);
	if (fd >= 0)
		close(fd);
	if (!rc)
		rc = reply_rec(reply, "process", &r, NULL);
	rec_release(&r);
	return rc;
}

static sg_err cmd_resize(struct sg_args *a, struct sg_buf *reply,
			 const struct sg_cancel *cancel, struct sg_errinfo *err)
{
	struct proc_rec r;
	const char *ctl, *id;
	int64_t cols = 0, rows = 0;
	uint16_t size[2];
	int fd = -1;
	sg_err rc;

	rec_init(&r);
	rc = args_ctl_id(a, true, &ctl, &id, err);
	if (!rc)
		rc = sg_args_int(a, "cols", 0, UINT16_MAX, &cols, err);
	if (!rc)
		rc = sg_args_int(a, "rows", 0, UINT16_MAX, &rows, err);
	if (!rc && (cols < 1 || rows < 1))
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT, "cols and rows must be 1 to %d",
				UINT16_MAX);
	if (!rc)
		rc = args_done(a, err);
	if (!rc)
		rc = rec_load_shown(ctl, id, &r, cancel, err);
	if (!rc && (r.status != PS_RUNNING || r.tty <= 0))
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT,
				"process %s has no terminal to resize%s", id,
				r.status != PS_RUNNING ? ": it is not running" : "");
	if (!rc && (fd = fifo_open(ctl, id, "winch", err)) < 0)
		rc = err->code;
	size[0] = (uint16_t)cols;
	size[1] = (uint16_t)rows;
	/* Four bytes, below PIPE_BUF: written whole or not at all. */
	if (!rc && write(fd, size, sizeof(size)) != (ssize_t)sizeof(size))
		rc = sg_err_set(err, SG_E_INVALID_ARGUMENT, "process %s did not take the size: %s",
				id, strerror(errno));
	if (fd >= 0)
		close(fd);
	if (!rc)
		rc = reply_rec(reply, "process", &r, NULL);
	rec_release(&r);
	return rc;
}

/* ---- spawn ------------------------------------------------------------------ */

/* Everything the supervisor and the child need, prepared before fork(). */
struct proc_spawn {
	const char *ctl;   /* absolute */
	char dir[SG_PATH_MAX];
	const char *confine, *root;
	char tmpdir[SG_PATH_MAX];
	char log_path[SG_PATH_MAX];
	/* Writable besides root in standard mode: tmpdir, then --allow-write. */
	const char *allow[SG_ARGS_MAX + 2];
	struct proc_rec rec;
	char *const *argv; /* borrowed; NULL with a command */
	bool login;        /* a command runs in a login shell */
	bool attribute;    /* commits get the host's co-author trailer (gitwrap.c) */
	char *shell;       /* the login shell's text when it differs (new), or NULL */
	int report;        /* the pipe the spawner reads the reply from */
	/*
	 * The spawner is the supervisor (sg_helper_answer is set: a job whose
	 * request may end before this process): no fork, and the spawn's
	 * reply goes to sg_helper_answer once wait_ms passed or the command
	 * ended, as spawn_wait makes it, or at once without a wait.
	 */
	bool here;
	bool answered;
	int64_t wait_ms, out_max;
	const char *revision_root;
};

/* The command's descriptors, as the supervisor hands them to the child. */
struct proc_stdio {
	int in;       /* stdin: a pipe's read end, or -1 for the supervisor's /dev/null */
	int out, err; /* stdout and stderr (the same pipe unless split) */
	int tty;      /* the terminal's slave side, or -1 */
	int fail;     /* close-on-exec: why the exec did not happen */
};

/* The login shell a command runs in: bash where the environment has it. */
static void exec_shell(const char *command)
{
	static const char *const shells[] = { "/bin/bash", "/usr/bin/bash" };

	for (size_t i = 0; i < sizeof(shells) / sizeof(shells[0]); i++)
		if (access(shells[i], X_OK) == 0)
			execl(shells[i], "bash", "-l", "-c", command, (char *)NULL);
	execl("/bin/sh", "sh", "-l", "-c", command, (char *)NULL);
}

/* Put the descriptors in place: a terminal of its own, or the pipes. */
static int child_stdio(const struct proc_stdio *io, char *msg, size_t n)
{
	if (io->tty >= 0) {
		/* A session of its own whose controlling terminal is the slave. */
		if (setsid() < 0 || ioctl(io->tty, TIOCSCTTY, 0) < 0 || dup2(io->tty, 0) < 0 ||
		    dup2(io->tty, 1) < 0 || dup2(io->tty, 2) < 0) {
			snprintf(msg, n, "cannot set up the terminal: %s", strerror(errno));
			return -1;
		}
		return 0;
	}
	setpgid(0, 0);
	if ((io->in >= 0 && dup2(io->in, 0) < 0) || dup2(io->out, 1) < 0 || dup2(io->err, 2) < 0) {
		snprintf(msg, n, "cannot set up the output: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * The child, between fork() and exec(): only syscalls and stack
 * buffers.  A failure is written to io->fail (close-on-exec, so a
 * successful exec reports nothing) and the child exits 127.
 */
static void child_run(const struct proc_spawn *sp, const struct proc_stdio *io)
{
	static const int dfl[] = { SIGPIPE, SIGTERM, SIGINT, SIGQUIT, SIGHUP,
				   SIGCHLD, SIGTSTP, SIGTTIN, SIGTTOU, SIGWINCH };
	char msg[SG_ERR_MSG];
	sigset_t none;
	int e;

	for (size_t i = 0; i < sizeof(dfl) / sizeof(dfl[0]); i++)
		signal(dfl[i], SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (child_stdio(io, msg, sizeof(msg)))
		goto fail;
	/*
	 * The cwd was resolved under root by the gateway: it is entered
	 * beneath root with no link followed, so a directory swapped for a
	 * link since then fails the start instead of leading elsewhere.
	 */
	if ((sp->root && sg_path_under(sp->rec.cwd, sp->root)
		     ? sg_path_chdir_beneath(sp->root, sp->rec.cwd)
		     : chdir(sp->rec.cwd)) < 0) {
		snprintf(msg, sizeof(msg), "cannot change to %s: %s",
			 sp->rec.cwd, strerror(errno));
		goto fail;
	}
	/*
	 * The command starts in a Landlock domain nested in the
	 * supervisor's (a confined one's own, else one that only scopes),
	 * so from ABI 6 it cannot signal or ptrace its supervisor: killed,
	 * the supervisor would leave whatever the command moved out of its
	 * group for nobody to stop (docs/security.md).  The supervisor and
	 * the gateway still signal it.  The terminal was opened before.
	 */
	if (sp->confine
		    ? sg_confine_apply(sp->confine, sp->root, sp->allow, msg, sizeof(msg))
		    : sg_confine_scope_domain(msg, sizeof(msg)))
		goto fail;
	if (sp->rec.command && sp->login)
		exec_shell(sp->shell ? sp->shell : sp->rec.command);
	else if (sp->rec.command)
		execl("/bin/sh", "sh", "-c", sp->rec.command, (char *)NULL);
	else
		execvp(sp->argv[0], sp->argv);
	e = errno;
	snprintf(msg, sizeof(msg), "cannot run %s: %s",
		 sp->rec.command ? "the shell" : sp->argv[0], strerror(e));
fail:
	(void)sg_write_all(io->fail, msg, strlen(msg));
	_exit(127);
}

/*
 * The supervisor sends the spawner the whole reply and lets it go (or,
 * being the spawner, answers with it).
 */
static void sup_report(struct proc_spawn *sp, const char *message)
{
	struct sg_buf b = SG_BUF_INIT(SG_MAX_FRAME);
	bool ok = reply_rec(&b, "process", &sp->rec, message) == SG_OK;

	/* A spawner that is gone no longer needs it: nothing else to do. */
	if (ok && sp->here)
		sg_helper_answer(b.p, b.len, sp->rec.status == PS_RUNNING);
	else if (ok)
		(void)sg_write_all(sp->report, b.p, b.len);
	sp->answered = sp->here;
	if (sp->report >= 0)
		close(sp->report);
	sp->report = -1;
	sg_buf_release(&b);
}

/*
 * Close every descriptor but keep (the supervisor owns nothing else), or
 * with mark, only keep them from the command: the spawner that supervises
 * still holds its job's descriptors, every one of them its own.
 */
static void close_others(int keep, bool mark)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;

	if (!d) {
		long max = sysconf(_SC_OPEN_MAX);

		for (long fd = 3; fd < (max > 0 && max < 65536 ? max : 65536);
		     fd++)
			if (fd != keep && mark)
				fcntl((int)fd, F_SETFD, FD_CLOEXEC);
			else if (fd != keep)
				close((int)fd);
		return;
	}
	while ((de = readdir(d))) {
		int fd = (int)strtol(de->d_name, NULL, 10);

		if (de->d_name[0] >= '0' && de->d_name[0] <= '9' && fd > 2 &&
		    fd != keep && fd != dirfd(d) && mark)
			fcntl(fd, F_SETFD, FD_CLOEXEC);
		else if (de->d_name[0] >= '0' && de->d_name[0] <= '9' && fd > 2 &&
			 fd != keep && fd != dirfd(d))
			close(fd);
	}
	closedir(d);
}

static void sup_fail(struct proc_spawn *sp, const char *message)
{
	struct sg_errinfo err = { 0 };

	sp->rec.status = PS_FAILED;
	sp->rec.pid = sp->rec.exit_code = -1;
	sp->rec.message = message;
	utc_now(sp->rec.ended_at, sizeof(sp->rec.ended_at));
	if (rec_store(sp->ctl, &sp->rec, &err) == SG_OK)
		sup_report(sp, message);
	_exit(0);
}

/*
 * How much the supervisor reads at once: at most half the spool, so that
 * while one chunk overwrites old bytes, readers still find the other half
 * intact (snap_take), however slowly the supervisor is scheduled.
 */
static size_t sup_chunk(uint64_t retain)
{
	uint64_t half = retain / 2 ? retain / 2 : 1;

	return half < SG_PROC_CHUNK ? (size_t)half : SG_PROC_CHUNK;
}

/* A process's parent (field 4 of /proc/<pid>/stat) and its state, or -1. */
static pid_t parent_of(long pid, char *state)
{
	char path[64], text[1024], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	text[n] = '\0';
	/* The command name may hold anything, ')' included: skip to the last. */
	p = strrchr(text, ')');
	if (!p || strlen(p) < 5)
		return -1;
	*state = p[2];
	return (pid_t)strtol(p + 4, NULL, 10);
}

/* Reap every exited child but main (whose status the supervisor keeps). */
static void reap_others(pid_t main)
{
	for (;;) {
		siginfo_t si;

		memset(&si, 0, sizeof(si));
		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0 ||
		    si.si_pid == main)
			return;
		waitpid(si.si_pid, NULL, 0);
	}
}

/* One process seen in /proc: its pid, its parent's, and whether it is ours. */
struct proc_link {
	pid_t pid, ppid;
	bool ours;
};

static int link_by_pid(const void *a, const void *b)
{
	pid_t x = ((const struct proc_link *)a)->pid, y = ((const struct proc_link *)b)->pid;

	return (x > y) - (x < y);
}

/*
 * Every process on the host and its parent, from one pass over /proc,
 * into *v (*n of them, sorted by pid); *cap is the array's room, grown as
 * needed.  Out of memory, the pass stops where it is: the caller scans
 * again.
 */
static void scan_links(struct proc_link **v, size_t *n, size_t *cap)
{
	struct dirent *de;
	DIR *d = opendir("/proc");

	*n = 0;
	if (!d)
		return;
	while ((de = readdir(d))) {
		char *end, state = 0;
		long pid = strtol(de->d_name, &end, 10);
		pid_t ppid;

		if (*end || pid <= 1 || (ppid = parent_of(pid, &state)) < 0)
			continue;
		if (*n == *cap) {
			size_t more = *cap ? 2 * *cap : 256;
			struct proc_link *g = realloc(*v, more * sizeof(**v));

			if (!g)
				break;
			*v = g;
			*cap = more;
		}
		(*v)[(*n)++] = (struct proc_link){ (pid_t)pid, ppid, false };
	}
	closedir(d);
	/* qsort of no array (*v still NULL) is undefined. */
	if (*n > 1)
		qsort(*v, *n, sizeof(**v), link_by_pid);
}

/*
 * Mark every descendant of this process in v (sorted by pid).  A parent
 * usually has the lower pid, so one pass in pid order marks most of a
 * tree; passes repeat until none marks more (pids that wrapped around).
 */
static void mark_ours(struct proc_link *v, size_t n)
{
	pid_t self = getpid();
	bool more = true;

	while (more) {
		more = false;
		for (size_t i = 0; i < n; i++) {
			struct proc_link key = { .pid = v[i].ppid }, *up;

			if (v[i].ours)
				continue;
			up = v[i].ppid == self ? NULL
					       : bsearch(&key, v, n, sizeof(*v), link_by_pid);
			if (v[i].ppid == self || (up && up->ours))
				more = v[i].ours = true;
		}
	}
}

/*
 * Kill whatever left the command's process group, once main is reaped.
 * The supervisor is the command's subreaper (PR_SET_CHILD_SUBREAPER), so
 * every descendant is either its child or below a living child, and a
 * process that dies hands its children to it, never to init.  Each round
 * reads the whole process tree once and kills every descendant at once,
 * however deep: killing only its children, a round per level, took a
 * chain of 150 sessions longer than SG_PROC_KILL_MS on a loaded host.  It
 * then waits for a death and starts again, until it has no child at all
 * (ECHILD), which is exactly "no descendant left".  A child's death
 * raises SIGCHLD on sfd; an orphan handed over raises nothing, so the
 * wait is capped and the tree read again.  A process forked after a
 * read is found by the next (SIGKILL aborts a fork in progress).
 * SG_PROC_KILL_MS bounds it for a process that cannot die (stuck in the
 * kernel); a fork bomb meets the environment's pids limit.
 */
/* The stopper awaits the final record for longer than this can take. */
_Static_assert(SG_PROC_KILL_MS + SG_PROC_DRAIN_MS < SG_PROC_REAP_MS,
	       "a stop would give up on a supervisor still killing");

static void kill_descendants(int sfd)
{
	int64_t deadline = sat_add(sg_now_ns(), (int64_t)SG_PROC_KILL_MS * 1000000);
	struct proc_link *v = NULL;
	size_t n, cap = 0;

	for (;;) {
		struct pollfd pfd = { .fd = sfd, .events = POLLIN };
		struct signalfd_siginfo ssi;
		int64_t left;
		pid_t r;

		while ((r = waitpid(-1, NULL, WNOHANG)) > 0)
			;
		if (r < 0 && errno == ECHILD)
			break;
		scan_links(&v, &n, &cap);
		mark_ours(v, n);
		for (size_t i = 0; i < n; i++)
			if (v[i].ours)
				kill(v[i].pid, SIGKILL);
		left = (deadline - sg_now_ns()) / 1000000;
		if (left <= 0)
			break;
		poll(&pfd, 1, left < SG_PROC_KILL_POLL_MS ? (int)left : SG_PROC_KILL_POLL_MS);
		while (read(sfd, &ssi, sizeof(ssi)) > 0)
			;
	}
	free(v);
}

/* One spool the supervisor appends to (see spool_add). */
struct sup_spool {
	int data, prog;       /* -1 until opened (a foreground run's: at its first byte) */
	uint64_t retain, total;
};

/* The supervisor's descriptors besides the signalfd. */
struct sup_io {
	int src[2];          /* output: stdout (or all, or the terminal), stderr when split */
	bool eof[2];
	int fifo;            /* C/<ID>/in, the input the host writes */
	int to;              /* where input goes: the stdin pipe or the terminal, -1 */
	int winch;           /* C/<ID>/winch, terminal sizes */
	int master;          /* the terminal's master side, -1 */
	char pend[4096];     /* input read from the FIFO, not yet taken */
	size_t pend_len, pend_off;
	struct sup_spool spool[SPOOL_COUNT];
	int dirfd;           /* the process directory, where spools are made */
};

static void sup_io_init(struct sup_io *io)
{
	memset(io, 0, sizeof(*io));
	io->src[0] = io->src[1] = io->fifo = io->to = io->winch = io->master = io->dirfd = -1;
	for (int i = 0; i < SPOOL_COUNT; i++)
		io->spool[i].data = io->spool[i].prog = -1;
}

/*
 * Open a spool, made if it is not there: the data first, so that a reader
 * who finds the progress file finds the data too (an empty progress file
 * reads as nothing written).
 */
static int sup_open_spool(int dirfd, struct sup_spool *sp, int which, uint64_t retain)
{
	const int flags = O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;

	sp->retain = retain;
	sp->data = openat(dirfd, spool_data[which], flags, 0600);
	sp->prog = sp->data >= 0 ? openat(dirfd, spool_progress[which], flags, 0600) : -1;
	return sp->data >= 0 && sp->prog >= 0 ? 0 : -1;
}

/*
 * A terminal: the master side kept here, the slave side handed to the
 * child (*slave), sized SG_PROC_TTY_COLS x SG_PROC_TTY_ROWS.
 */
static int sup_open_tty(struct sup_io *io, int *slave)
{
	struct winsize ws = { .ws_col = SG_PROC_TTY_COLS, .ws_row = SG_PROC_TTY_ROWS };
	char name[64];

	io->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (io->master < 0 || grantpt(io->master) < 0 || unlockpt(io->master) < 0 ||
	    ptsname_r(io->master, name, sizeof(name)) != 0)
		return -1;
	/* Held until the child has it, so the master never reads a hangup first. */
	*slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*slave < 0)
		return -1;
	ioctl(io->master, TIOCSWINSZ, &ws);
	fcntl(io->master, F_SETFL, fcntl(io->master, F_GETFL) | O_NONBLOCK);
	io->src[0] = io->to = io->master;
	return 0;
}

/* Store a chunk the command wrote on source i (0 stdout or all, 1 stderr). */
static void sup_store(struct sup_io *io, int i, bool split, const char *p, size_t n)
{
	struct sup_spool *all = &io->spool[SPOOL_ALL];
	struct sup_spool *side = &io->spool[i ? SPOOL_ERR : SPOOL_OUT];

	/*
	 * A foreground run's spools are made at its first byte: most
	 * commands write one stream or none, and on a slow disk each file
	 * made and removed costs about a millisecond of every call.
	 */
	if (all->prog < 0)
		sup_open_spool(io->dirfd, all, SPOOL_ALL, all->retain);
	if (split && side->prog < 0)
		sup_open_spool(io->dirfd, side, i ? SPOOL_ERR : SPOOL_OUT, side->retain);
	if (all->prog >= 0)
		spool_add(all->data, all->prog, all->retain, &all->total, p, n);
	if (split && side->prog >= 0)
		spool_add(side->data, side->prog, side->retain, &side->total, p, n);
}

/* Move input along: FIFO -> pending -> the command's stdin. */
static void sup_input(struct sup_io *io, short fifo_ev, short to_ev)
{
	ssize_t k;

	if (io->pend_len == 0 && (fifo_ev & POLLIN)) {
		k = read(io->fifo, io->pend, sizeof(io->pend));
		if (k > 0) {
			io->pend_len = (size_t)k;
			io->pend_off = 0;
		}
	}
	if (io->pend_len > io->pend_off && (to_ev & (POLLOUT | POLLERR | POLLHUP))) {
		k = write(io->to, io->pend + io->pend_off, io->pend_len - io->pend_off);
		if (k > 0)
			io->pend_off += (size_t)k;
		else if (k < 0 && errno != EAGAIN && errno != EINTR)
			io->pend_off = io->pend_len; /* nobody reads it any more */
		if (io->pend_off == io->pend_len)
			io->pend_len = io->pend_off = 0;
	}
}

/* Apply the sizes the host sent (proc resize) to the terminal. */
static void sup_winch(struct sup_io *io)
{
	uint16_t size[2];

	while (read(io->winch, size, sizeof(size)) == (ssize_t)sizeof(size)) {
		struct winsize ws = { .ws_col = size[0], .ws_row = size[1] };

		ioctl(io->master, TIOCSWINSZ, &ws);
	}
}

/*
 * The final record keeps what the host changed while the process ran
 * (proc update writes the file, not this supervisor's copy): read it
 * again under the lock and carry those fields over.
 */
static sg_err sup_store_final(struct proc_spawn *sp, struct sg_errinfo *err)
{
	struct proc_rec cur;
	int fd = store_lock(sp->ctl, &sp->rec, err);
	sg_err rc;

	if (fd < 0 && sp->rec.hidden <= 0)
		return err->code;
	if (rec_read(sp->ctl, sp->rec.id, &cur, err) == SG_OK) {
		memcpy(sp->rec.mode, cur.mode, sizeof(cur.mode));
		memcpy(sp->rec.delivered_at, cur.delivered_at, sizeof(cur.delivered_at));
		memcpy(sp->rec.consumer, cur.consumer, sizeof(cur.consumer));
		sp->rec.hidden = cur.hidden;
		sp->rec.recheck_minutes = cur.recheck_minutes;
	}
	rec_release(&cur);
	/* A process that ended has nothing left to recheck. */
	sp->rec.next_recheck[0] = sp->rec.pending_recheck[0] = '\0';
	rc = rec_store_locked(sp->ctl, fd, &sp->rec, err);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Set up the spools, FIFOs and the command's descriptors; -1 on failure. */
static int sup_prepare(struct proc_spawn *sp, int dirfd, struct sup_io *io,
		       struct proc_stdio *cio, int pipes[4][2])
{
	bool split = sp->rec.split > 0;

	/* A foreground run (split) makes its spools at its first byte (sup_store). */
	io->dirfd = dirfd;
	io->spool[SPOOL_ALL].retain = (uint64_t)sp->rec.retain;
	io->spool[SPOOL_OUT].retain = io->spool[SPOOL_ERR].retain = SG_PROC_SIDE_RETAIN;
	if (!split && sup_open_spool(dirfd, &io->spool[SPOOL_ALL], SPOOL_ALL,
				     (uint64_t)sp->rec.retain))
		return -1;
	if (sp->rec.input > 0) {
		/* Read and write, so the FIFO never reads end-of-file. */
		io->fifo = openat(dirfd, "in", O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (io->fifo < 0)
			return -1;
		/*
		 * As small as the kernel allows: a writer should feel the
		 * command's own input buffer filling (the host's worker
		 * writes to the terminal directly), not a relay's 64 KiB.
		 */
		fcntl(io->fifo, F_SETPIPE_SZ, SG_PROC_INPUT_PIPE);
	}
	if (pipe2(pipes[3], O_CLOEXEC) < 0)
		return -1;
	cio->fail = pipes[3][1];
	if (sp->rec.tty > 0) {
		io->winch = openat(dirfd, "winch", O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		return io->winch < 0 || sup_open_tty(io, &cio->tty) ? -1 : 0;
	}
	if (pipe2(pipes[0], O_CLOEXEC) < 0 || (split && pipe2(pipes[1], O_CLOEXEC) < 0) ||
	    (sp->rec.input > 0 && pipe2(pipes[2], O_CLOEXEC | O_NONBLOCK) < 0))
		return -1;
	io->src[0] = pipes[0][0];
	cio->out = cio->err = pipes[0][1];
	if (split) {
		io->src[1] = pipes[1][0];
		cio->err = pipes[1][1];
	}
	if (sp->rec.input > 0) {
		/* The child's end blocks as a stdin should; ours never does. */
		fcntl(pipes[2][0], F_SETFL, fcntl(pipes[2][0], F_GETFL) & ~O_NONBLOCK);
		cio->in = pipes[2][0];
		io->to = pipes[2][1];
	}
	return 0;
}

static sg_err spawn_wait(const char *ctl, const char *id, int64_t wait_ms, int64_t out_max,
			 const char *revision_root, struct sg_buf *reply, struct sg_errinfo *err);

/*
 * A supervisor that is the spawner was asked to stop (job --kill): as
 * `proc stop` would, the stop marker, then SIGTERM to the command's
 * group; SIGKILL follows at the returned time.
 */
static int64_t sup_stop(int dirfd, pid_t pid)
{
	int fd = openat(dirfd, "stop", O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
			0600);

	if (fd >= 0)
		close(fd);
	kill(-pid, SIGTERM);
	return sat_add(sg_now_ns(), (int64_t)SG_PROC_GRACE_MS * 1000000);
}

/*
 * A supervisor that is the spawner answers now with what spawn_wait
 * would have replied: the ended run, or the running one promoted.
 */
static void sup_answer(struct proc_spawn *sp, bool on)
{
	struct sg_buf b = SG_BUF_INIT(SG_ENVTOOL_REPLY);
	struct sg_errinfo err = { 0 };

	sp->answered = true;
	if (spawn_wait(sp->ctl, sp->rec.id, 0, sp->out_max, sp->revision_root, &b, &err)) {
		sg_buf_reset(&b);
		sg_reply_error(&b, &err);
	}
	sg_helper_answer(b.p, b.len, on);
	sg_buf_release(&b);
}

/* The spawner's deadlines, for a supervisor that is the spawner. */
static void sup_due(struct proc_spawn *sp, bool exited, int64_t answer_at)
{
	int64_t now = sg_now_ns();

	if (!exited && !sp->answered && answer_at && now >= answer_at)
		sup_answer(sp, true);
	/* The job's own: its request's wait, its timeout (job.c). */
	if (sp->here && sg_helper_due && now >= sg_helper_due)
		sg_helper_overdue();
}

/* The supervisor's deadlines and what it has seen of its command. */
struct sup_run {
	pid_t pid;          /* the command, the leader of its group */
	int sfd;            /* the signalfd: SIGCHLD, and SIGTERM for a spawner */
	int dirfd;          /* the process directory */
	int status;         /* the command's wait status, once exited */
	bool exited, timed_out;
	int64_t term_at;     /* the timeout: SIGTERM to the group (0: none) */
	int64_t kill_at;     /* SIGKILL to the group after a SIGTERM (0: none due) */
	int64_t drain_until; /* after the exit: how long output is still read */
	int64_t answer_at;   /* a spawner's answer, when the command still runs */
};

/*
 * The supervisor's own session and signals: a new session away from the
 * spawner's terminal, the standard descriptors it does not answer on
 * pointed at /dev/null, SIGCHLD (and a spawner's SIGTERM) through a
 * signalfd, and whatever leaves the command's group still ours to kill
 * (kill_descendants).  Returns the signalfd, -1 on failure.
 */
static int sup_enter(struct proc_spawn *sp)
{
	int devnull, sfd;
	char state;
	int64_t boot_ticks;
	sigset_t chld;

	setsid();
	signal(SIGPIPE, SIG_IGN);
	devnull = open("/dev/null", O_RDWR);
	/* A spawner that supervises keeps its stdout and stderr for its answer. */
	for (int fd = 0; devnull >= 0 && fd < (sp->here ? 1 : 3); fd++)
		dup2(devnull, fd);
	if (devnull > 2)
		close(devnull);
	close_others(sp->report, sp->here);
	sp->rec.sup_pid = getpid();
	sp->rec.pid_ns = pid_ns_of("self");
	if (proc_stat(sp->rec.sup_pid, &state, &boot_ticks) == 1)
		sp->rec.sup_start = boot_ticks;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	/* A spawner that supervises is stopped with SIGTERM (job --kill). */
	if (sp->here)
		sigaddset(&chld, SIGTERM);
	/* Blocked so that the signalfd, not a handler, reports the child. */
	sigprocmask(SIG_BLOCK, &chld, NULL);
	sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	prctl(PR_SET_CHILD_SUBREAPER, 1L, 0L, 0L, 0L);
	return sfd;
}

/*
 * What the child wrote on its failure pipe before it exec'd: nothing
 * (0) once the exec closed the pipe, else the sentence in msg.
 */
static ssize_t sup_exec_report(int fd, char *msg, size_t n)
{
	ssize_t k = 0;

	for (;;) {
		ssize_t r = read(fd, msg + k, n - 1 - (size_t)k);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || (size_t)(k += r) == n - 1)
			break;
	}
	close(fd);
	return k;
}

/*
 * Start the command and record it running: fork, the group made on both
 * sides, the child's ends closed here, its exec confirmed, the record
 * stored.  A failure is reported and ends the supervisor (sup_fail).
 * The spawner is answered at once unless it waits for the command.
 */
static void sup_launch(struct proc_spawn *sp, struct sup_run *run, struct proc_stdio *cio,
		       int pipes[4][2])
{
	char msg[SG_ERR_MSG];
	struct sg_errinfo err = { 0 };
	int64_t start;
	ssize_t k;

	utc_now(sp->rec.started_at, sizeof(sp->rec.started_at));
	start = sg_now_ns();
	run->pid = fork();
	if (run->pid < 0) {
		snprintf(msg, sizeof(msg), "cannot fork: %s", strerror(errno));
		sup_fail(sp, msg);
	}
	if (run->pid == 0)
		child_run(sp, cio);
	/* Both sides set the group, so it exists before anyone signals it
	 * (a terminal's child makes a session of its own instead). */
	if (cio->tty < 0)
		setpgid(run->pid, run->pid);
	for (int i = 0; i < 4; i++) {
		if (i != 2 && pipes[i][1] >= 0)
			close(pipes[i][1]);
	}
	if (pipes[2][0] >= 0)
		close(pipes[2][0]);
	k = sup_exec_report(pipes[3][0], msg, sizeof(msg));
	/* The child has exec'd (or failed): the terminal is its alone now. */
	if (cio->tty >= 0)
		close(cio->tty);
	if (k > 0) {
		msg[k] = '\0';
		while (waitpid(run->pid, &run->status, 0) < 0 && errno == EINTR)
			;
		sup_fail(sp, msg);
	}
	sp->rec.pid = sp->rec.pgid = run->pid;
	sp->rec.status = PS_RUNNING;
	if (rec_store(sp->ctl, &sp->rec, &err)) {
		kill(-run->pid, SIGKILL);
		sup_fail(sp, err.msg);
	}
	if (!sp->here || sp->wait_ms < 0)
		sup_report(sp, NULL);
	else
		run->answer_at = sat_add(start, sp->wait_ms * 1000000);
	if (sp->rec.timeout_ms > 0)
		run->term_at = sat_add(start, sp->rec.timeout_ms * 1000000);
}

/* Until the first of the supervisor's deadlines, in poll's milliseconds. */
static int sup_poll_ms(const struct proc_spawn *sp, const struct sup_run *run)
{
	int64_t now = sg_now_ns(), next = INT64_MAX, ms;

	if (run->term_at && !run->timed_out && run->term_at < next)
		next = run->term_at;
	if (run->kill_at && !run->exited && run->kill_at < next)
		next = run->kill_at;
	if (run->exited && run->drain_until < next)
		next = run->drain_until;
	if (!sp->answered && run->answer_at && run->answer_at < next)
		next = run->answer_at;
	if (sp->here && sg_helper_due && sg_helper_due < next)
		next = sg_helper_due;
	ms = next == INT64_MAX ? -1 : next <= now ? 0 : (next - now + 999999) / 1000000;
	return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/* The signalfd's news: a spawner's stop, and orphans that ended meanwhile. */
static void sup_signals(struct sup_run *run)
{
	struct signalfd_siginfo ssi;

	while (read(run->sfd, &ssi, sizeof(ssi)) > 0)
		if (ssi.ssi_signo == SIGTERM && !run->exited && !run->kill_at)
			run->kill_at = sup_stop(run->dirfd, run->pid);
	/* Orphans reparented to us that ended meanwhile. */
	if (!run->exited)
		reap_others(run->pid);
}

/*
 * Has the command ended?  Then everything it left is killed: its group
 * while the zombie still holds the group id, then whatever left the
 * group (kill_descendants), and its output is drained a little longer.
 */
static void sup_reap(struct sup_run *run)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (run->exited ||
	    waitid(P_PID, (id_t)run->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0 ||
	    si.si_pid != run->pid)
		return;
	kill(-run->pid, SIGKILL);
	while (waitpid(run->pid, &run->status, 0) < 0 && errno == EINTR)
		;
	kill_descendants(run->sfd);
	run->exited = true;
	run->drain_until = sat_add(sg_now_ns(), (int64_t)SG_PROC_DRAIN_MS * 1000000);
}

/* The timeout: SIGTERM to the group, SIGKILL after the grace. */
static void sup_timers(struct sup_run *run)
{
	int64_t now = sg_now_ns();

	if (!run->exited && run->term_at && !run->timed_out && now >= run->term_at) {
		run->timed_out = true;
		kill(-run->pid, SIGTERM);
		run->kill_at = sat_add(now, (int64_t)SG_PROC_GRACE_MS * 1000000);
	}
	if (!run->exited && run->kill_at && now >= run->kill_at) {
		kill(-run->pid, SIGKILL);
		run->kill_at = 0;
	}
}

/*
 * One turn of the supervisor's loop: wait for output, input, a terminal
 * size, a signal or the next deadline, and act on what came.
 */
static void sup_turn(struct proc_spawn *sp, struct sup_run *run, struct sup_io *io, char *buf)
{
	bool want_in = !run->exited && io->to >= 0;
	struct pollfd pfd[6] = {
		{ .fd = io->eof[0] ? -1 : io->src[0], .events = POLLIN },
		{ .fd = io->src[1] < 0 || io->eof[1] ? -1 : io->src[1], .events = POLLIN },
		{ .fd = run->sfd, .events = POLLIN },
		{ .fd = want_in && io->pend_len == 0 ? io->fifo : -1, .events = POLLIN },
		{ .fd = want_in && io->pend_len > 0 ? io->to : -1, .events = POLLOUT },
		{ .fd = run->exited ? -1 : io->winch, .events = POLLIN },
	};

	if (poll(pfd, 6, sup_poll_ms(sp, run)) > 0) {
		for (int i = 0; i < 2; i++) {
			ssize_t k;

			if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			k = read(io->src[i], buf, sup_chunk((uint64_t)sp->rec.retain));
			if (k > 0)
				sup_store(io, i, sp->rec.split > 0, buf, (size_t)k);
			/* A terminal whose slave side is closed reads EIO. */
			else if (k == 0 || (errno != EINTR && errno != EAGAIN))
				io->eof[i] = true;
		}
		if (want_in)
			sup_input(io, pfd[3].revents, pfd[4].revents);
		if (pfd[5].revents & POLLIN)
			sup_winch(io);
	}
	if (pfd[2].revents & POLLIN)
		sup_signals(run);
	sup_reap(run);
	sup_timers(run);
	sup_due(sp, run->exited, run->answer_at);
}

/*
 * The command has ended: its final record (how it ended, and what the
 * host changed meanwhile), the FIFOs gone, a spawner answered.  Never
 * returns.
 */
static void sup_finish(struct proc_spawn *sp, struct sup_run *run, struct sup_io *io)
{
	struct sg_errinfo err = { 0 };
	bool stopped = run->timed_out ||
		       faccessat(run->dirfd, "stop", F_OK, AT_SYMLINK_NOFOLLOW) == 0;
	bool stored;

	sp->rec.status = stopped ? PS_STOPPED : PS_EXITED;
	if (WIFEXITED(run->status)) {
		sp->rec.exit_code = WEXITSTATUS(run->status);
	} else if (WIFSIGNALED(run->status)) {
		sp->rec.exit_code = -1;
		signal_name(WTERMSIG(run->status), sp->rec.signal, sizeof(sp->rec.signal));
	}
	utc_now(sp->rec.ended_at, sizeof(sp->rec.ended_at));
	if (run->timed_out)
		sp->rec.message = "the process reached its timeout";
	sp->rec.log_base = (int64_t)sg_ring_oldest(io->spool[SPOOL_ALL].total,
						   (uint64_t)sp->rec.retain);
	/*
	 * The FIFOs end with the process: nothing reads them any more, and a
	 * snapshot of the environment (a provider's copy may refuse a FIFO)
	 * must not meet them.  A later proc write finds no input to write to.
	 */
	unlinkat(run->dirfd, "in", 0);
	unlinkat(run->dirfd, "winch", 0);
	stored = sup_store_final(sp, &err) == SG_OK;
	if (sp->here && !sp->answered)
		sup_answer(sp, false);
	_exit(stored ? 0 : 1);
}

/*
 * The supervisor: never returns.  It runs until the command has exited
 * and its output is drained (every stream at its end, or the drain's
 * time up).
 */
static void sup_run(struct proc_spawn *sp)
{
	int pipes[4][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 }, { -1, -1 } };
	struct proc_stdio cio = { .in = -1, .out = -1, .err = -1, .tty = -1, .fail = -1 };
	struct sup_run run = { .pid = -1 };
	struct sg_errinfo err = { 0 };
	struct sup_io io;
	char *buf;

	sup_io_init(&io);
	run.sfd = sup_enter(sp);
	buf = malloc(SG_PROC_CHUNK);
	/* The spool's directory, never a link put in its place (id_dir_open). */
	run.dirfd = id_dir_open(sp->ctl, sp->rec.id, &err);
	if (run.sfd < 0 || !buf || run.dirfd < 0 || sup_prepare(sp, run.dirfd, &io, &cio, pipes)) {
		char msg[SG_ERR_MSG];

		snprintf(msg, sizeof(msg), "cannot set up the supervisor: %s", strerror(errno));
		sup_fail(sp, msg);
	}
	sup_launch(sp, &run, &cio, pipes);
	while (!run.exited || ((!io.eof[0] || (io.src[1] >= 0 && !io.eof[1])) &&
			       sg_now_ns() < run.drain_until))
		sup_turn(sp, &run, &io, buf);
	sup_finish(sp, &run, &io);
}

/* Make a path absolute against base (or the current directory). */
static sg_err absolute(char *dst, size_t n, const char *path,
		       const char *base, struct sg_errinfo *err)
{
	char cwd[SG_PATH_MAX];
	int k;

	if (path[0] == '/') {
		k = snprintf(dst, n, "%s", path);
	} else {
		if (!base) {
			if (!getcwd(cwd, sizeof(cwd)))
				return sg_err_set(err, SG_E_INTERNAL,
						  "cannot get the current "
						  "directory: %s",
						  strerror(errno));
			base = cwd;
		}
		k = path[0] ? snprintf(dst, n, "%s/%s", base, path)
			    : snprintf(dst, n, "%s", base);
	}
	if (k < 0 || (size_t)k >= n)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "the path %s is too long", path);
	return SG_OK;
}

/* A new file name in the directory dirfd (dir, for messages). */
static sg_err make_file(int dirfd, const char *dir, const char *name, const void *data,
			size_t len, struct sg_errinfo *err)
{
	char path[SG_PATH_MAX];
	int fd;
	sg_err rc = path_join(path, sizeof(path), dir, name, NULL, err);

	if (rc)
		return rc;
	fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return sg_err_set(err, SG_E_INTERNAL, "cannot create %s: %s",
				  path, strerror(errno));
	if (len && sg_write_all(fd, data, len)) {
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot write %s: %s", path,
				strerror(errno));
		close(fd);
		return rc;
	}
	if (close(fd) < 0)
		return sg_err_set(err, SG_E_INTERNAL, "cannot write %s: %s",
				  path, strerror(errno));
	return SG_OK;
}

/* The files of a process directory: the spools, progress, FIFOs and record. */
static sg_err make_files(int dirfd, const struct proc_spawn *sp, struct sg_errinfo *err)
{
	uint64_t zero[3] = { 0, 0, PROGRESS_MAGIC };
	/* A foreground run's spools come with its output (sup_store). */
	int spools = sp->rec.split > 0 ? 0 : 1;
	sg_err rc = SG_OK;

	for (int i = 0; !rc && i < spools; i++) {
		rc = make_file(dirfd, sp->dir, spool_data[i], NULL, 0, err);
		if (!rc)
			rc = make_file(dirfd, sp->dir, spool_progress[i], zero, sizeof(zero), err);
	}
	if (!rc && ((sp->rec.input > 0 && mkfifoat(dirfd, "in", 0600) < 0) ||
		    (sp->rec.tty > 0 && mkfifoat(dirfd, "winch", 0600) < 0)))
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot make the input of %s: %s", sp->dir,
				strerror(errno));
	return rc;
}

/*
 * An ended foreground run leaves nothing in the table (which every list
 * and wait reads whole): its full log, the host's full_log_ref, is kept
 * apart in C/.logs/<ID>.log, and its directory goes.
 */
static void id_dir_remove(int dirfd, const char *ctl, const char *id)
{
	static const char *const files[] = { "record.json", "record.tmp", "out", "progress",
					      "out1", "progress1", "out2", "progress2", "in",
					      "winch", "stop" };
	struct sg_errinfo err = { 0 };
	char path[SG_PATH_MAX];

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		unlinkat(dirfd, files[i], 0);
	if (path_join(path, sizeof(path), ctl, id, NULL, &err) == SG_OK)
		rmdir(path);
}

/* Create C/.logs/<id>.log (C/.logs made when missing); its path in path. */
static int log_create(const char *ctl, const char *id, char *path, size_t n,
		      struct sg_errinfo *err)
{
	char dir[SG_PATH_MAX], name[SG_PROC_ID_MAX + 8];
	int dirfd, fd;

	if (path_join(dir, sizeof(dir), ctl, ".logs", NULL, err))
		return -1;
	snprintf(name, sizeof(name), "%s.log", id);
	if (path_join(path, n, dir, name, NULL, err))
		return -1;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		sg_err_set(err, SG_E_INTERNAL, "cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0) {
		sg_err_set(err, SG_E_INTERNAL, "cannot open %s: %s", dir, strerror(errno));
		return -1;
	}
	fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	close(dirfd);
	if (fd < 0)
		sg_err_set(err, SG_E_INTERNAL, "cannot create %s: %s", path, strerror(errno));
	return fd;
}

/* Append what a spool still holds to fd, hashing it; *n: the bytes copied. */
static sg_err log_copy(int dirfd, const struct proc_rec *r, int spool, int fd,
		       struct sg_sha256 *h, uint64_t *n, struct sg_errinfo *err)
{
	struct proc_snap s = { .data = SG_BUF_INIT(SG_PROC_LOG_CHUNK + 4) };
	uint64_t at = 0;
	sg_err rc = SG_OK;

	*n = 0;
	for (;;) {
		rc = snap_take(dirfd, r->id, spool, SG_PROC_SIDE_RETAIN, at, SG_PROC_LOG_CHUNK, &s,
			       err);
		if (rc || s.data.len == 0)
			break;
		/* snap_take reads a few bytes past the window: keep the window. */
		if (s.data.len > SG_PROC_LOG_CHUNK)
			s.data.len = SG_PROC_LOG_CHUNK;
		if (sg_write_all(fd, s.data.p, s.data.len)) {
			rc = sg_err_set(err, SG_E_INTERNAL, "cannot write the log of %s: %s", r->id,
					strerror(errno));
			break;
		}
		sg_sha256_update(h, s.data.p, s.data.len);
		*n += s.data.len;
		at = s.start + s.data.len;
	}
	sg_buf_release(&s.data);
	return rc;
}

/*
 * ,"full_log_ref":PATH,"full_log_bytes":N,"full_log_sha256":HEX,
 * "full_log_sections":{...}: the run's stdout, then its stderr, in one file.
 */
static sg_err put_full_log(struct sg_buf *reply, int dirfd, const struct proc_rec *r,
			   const char *ctl, struct sg_errinfo *err)
{
	struct sg_sha256 h;
	char hex[2 * SG_SHA256_LEN + 1], path[SG_PATH_MAX];
	uint64_t nout = 0, nerr = 0;
	int fd = log_create(ctl, r->id, path, sizeof(path), err);
	sg_err rc = SG_OK;

	if (fd < 0)
		return err->code;
	sg_sha256_init(&h);
	rc = log_copy(dirfd, r, SPOOL_OUT, fd, &h, &nout, err);
	if (!rc)
		rc = log_copy(dirfd, r, SPOOL_ERR, fd, &h, &nerr, err);
	if (close(fd) < 0 && !rc)
		rc = sg_err_set(err, SG_E_INTERNAL, "cannot write the log of %s", r->id);
	sg_sha256_final_hex(&h, hex);
	if (!rc)
		rc = put_str(reply, "full_log_ref", path);
	if (!rc)
		rc = sg_buf_addf(reply,
				 ",\"full_log_bytes\":%llu,\"full_log_sha256\":\"%s\","
				 "\"full_log_sections\":{\"stdout_start\":0,\"stdout_end\":%llu,"
				 "\"stderr_start\":%llu,\"stderr_end\":%llu}",
				 (unsigned long long)(nout + nerr), hex, (unsigned long long)nout,
				 (unsigned long long)nout, (unsigned long long)(nout + nerr));
	return rc;
}

/* ,"<key>":"<the last max bytes of a spool>","<key>_bytes":N,"<key>_truncated":B */
static sg_err put_tail(struct sg_buf *reply, int dirfd, const struct proc_rec *r, int spool,
		       const char *key, uint64_t max, struct sg_errinfo *err)
{
	struct proc_snap s = { .data = SG_BUF_INIT(SG_READ_CAP + 4) };
	uint64_t retain = spool == SPOOL_ALL ? (uint64_t)r->retain : SG_PROC_SIDE_RETAIN;
	size_t k = 0;
	sg_err rc = snap_take(dirfd, r->id, spool, retain, 0, 0, &s, err);

	if (!rc)
		rc = snap_take(dirfd, r->id, spool, retain, s.total > max ? s.total - max : 0, max,
			       &s, err);
	if (!rc)
		k = snap_keep(&s, max, false);
	if (!rc)
		rc = sg_jw_key(reply, key, 0);
	if (!rc)
		rc = sg_jw_str(reply, s.data.p, k);
	if (!rc)
		rc = sg_buf_addf(reply, ",\"%s_bytes\":%llu,\"%s_truncated\":%s", key,
				 (unsigned long long)s.total, key, s.start > 0 ? "true" : "false");
	sg_buf_release(&s.data);
	return rc;
}

/*
 * A foreground run (--wait-ms): wait for the end, at most wait_ms; then
 * answer with the record and the tails of its output.  An ended run's
 * directory goes; one still running is promoted to a managed process the
 * host's replies show from now on.
 */
/*
 * ,"workspace_revision":REV: the tree under root after the run, as the
 * host's tools report it ("" when it cannot be read in time).
 */
static sg_err put_revision(struct sg_buf *reply, const char *root)
{
	struct fs c = { .rootfd = root ? open(root, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1 };
	char rev[SG_FS_REVISION_SIZE] = "";
	sg_err rc = SG_OK;

	if (c.rootfd >= 0)
		rc = sg_fs_revision(&c, rev);
	if (!rc)
		rc = put_str(reply, "workspace_revision", rev);
	if (!rc)
		rc = sg_fs_kv_revision_git(reply, c.rootfd, c.rev_partial || c.rootfd < 0,
					   c.rev_extra);
	if (c.rootfd >= 0)
		close(c.rootfd);
	return rc;
}

static sg_err spawn_wait(const char *ctl, const char *id, int64_t wait_ms, int64_t out_max,
			 const char *revision_root, struct sg_buf *reply, struct sg_errinfo *err)
{
	struct proc_change promote = { .recheck = -1, .show = true, .promote = true };
	struct proc_rec r;
	bool ended;
	int dirfd = -1;
	sg_err rc;

	rec_init(&r);
	rc = await_end(ctl, id, sat_add(sg_now_ns(), wait_ms * 1000000), &r, NULL, err);
	if (rc)
		goto out;
	if (r.status == PS_FAILED) {
		rc = reply_rec(reply, "process", &r, r.message);
		goto out;
	}
	ended = r.status != PS_RUNNING;
	if (!ended) {
		rec_release(&r);
		rc = rec_update(ctl, id, &promote, &r, NULL, err);
		if (rc)
			goto out;
	}
	dirfd = id_dir_open(ctl, id, err);
	if (dirfd < 0) {
		rc = err->code;
		goto out;
	}
	sg_buf_reset(reply);
	rc = sg_reply_ok(reply);
	if (!rc)
		rc = sg_jw_key(reply, "process", 0);
	if (!rc)
		rc = rec_view(reply, &r);
	if (!rc)
		rc = sg_buf_addf(reply, ",\"ended\":%s", ended ? "true" : "false");
	if (!rc)
		rc = put_tail(reply, dirfd, &r, SPOOL_ALL, "output", (uint64_t)out_max, err);
	if (!rc)
		rc = put_tail(reply, dirfd, &r, SPOOL_OUT, "stdout", SG_PROC_SIDE_MAX, err);
	if (!rc)
		rc = put_tail(reply, dirfd, &r, SPOOL_ERR, "stderr", SG_PROC_SIDE_MAX, err);
	if (!rc && ended)
		rc = put_full_log(reply, dirfd, &r, ctl, err);
	if (!rc && !ended)
		rc = put_str(reply, "full_log_ref", r.log_path);
	if (!rc && revision_root)
		rc = put_revision(reply, revision_root);
	if (!rc)
		rc = sg_reply_end(reply);
	if (!rc && ended)
		id_dir_remove(dirfd, ctl, id);
out:
	if (dirfd >= 0)
		close(dirfd);
	rec_release(&r);
	return rc;
}

/* The options of `proc spawn` that fill the record. */
static sg_err spawn_options(struct sg_args *a, struct proc_spawn *sp, struct sg_errinfo *err)
{
	int64_t timeout, retain;
	sg_err rc = sg_args_int(a, "timeout-ms", 0, INT64_MAX / 1000000, &timeout, err);

	if (!rc)
		rc = sg_args_int(a, "retain", SG_PROC_RETAIN, INT64_MAX / 2, &retain, err);
	if (rc)
		return rc;
	sp->rec.session = sg_args_str(a, "session", NULL);
	sp->rec.op = sg_args_str(a, "op", NULL);
	sp->rec.command = sg_args_str(a, "command", NULL);
	sp->rec.owner_kind = sg_args_str(a, "owner-kind", "main_agent");
	sp->rec.owner_id = sg_args_str(a, "owner-id", sp->rec.session);
	sp->rec.generation = sg_args_str(a, "generation", "");
	sp->rec.lifecycle = sg_args_str(a, "lifecycle", "managed");
	sp->rec.tty = sg_args_flag(a, "tty");
	sp->rec.input = sg_args_flag(a, "input");
	if (sp->rec.tty)
		sp->rec.input = 1;
	sp->login = sg_args_flag(a, "login");
	sp->attribute = sg_args_flag(a, "git-attribution");
	(void)sg_args_flag(a, "revision"); /* read by cmd_spawn after the run */
	sp->confine = sg_args_str(a, "confine", NULL);
	sp->root = sg_args_str(a, "root", NULL);
	sp->rec.timeout_ms = timeout;
	sp->rec.retain = retain;
	if (!sp->rec.session)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT, "--session is required");
	if (retain < 1)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT, "--retain must be at least 1");
	if (!sp->rec.command == !(a->nrest > 0))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "give exactly one of --command and an argv after --");
	if (sp->confine && strcmp(sp->confine, "standard") != 0 &&
	    strcmp(sp->confine, "read_only") != 0)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT,
				  "--confine must be standard or read_only");
	if (sp->confine && (!sp->root || sp->root[0] != '/'))
		return sg_err_set(err, SG_E_INVALID_ARGUMENT, "--confine needs an absolute --root");
	if (a->npos > 0)
		return sg_err_set(err, SG_E_INVALID_ARGUMENT, "unexpected argument %s", a->pos[0]);
	/* --allow-write repeats (the gateway names the environment's HOME
	 * and TMPDIR); sg_args keeps only the last, so walk all. */
	{
		size_t n = 0;

		sp->allow[n++] = sp->tmpdir;
		for (int i = 0; i < a->nopt; i++) {
			if (strcmp(a->opt[i].name, "allow-write") == 0) {
				a->opt[i].used = true;
				sp->allow[n++] = a->opt[i].value;
			}
		}
		sp->allow[n] = NULL;
	}
	return SG_OK;
}

/*
 * The spawn's request into sp: its options, the wait and output limit a
 * spawner that waits answers with, the control directory and working
 * directory made absolute (into ctl and cwd, SG_PATH_MAX each), the
 * command's words, and the paths of its process directory.
 */
static sg_err spawn_request(struct sg_args *a, struct proc_spawn *sp, char *ctl, char *cwd,
			    struct sg_errinfo *err)
{
	const char *id, *cwd_arg, *raw_ctl;
	sg_err rc;

	sp->wait_ms = -1;
	rc = args_ctl_id(a, true, &raw_ctl, &id, err);
	if (!rc && sg_args_str(a, "wait-ms", NULL))
		rc = sg_args_int(a, "wait-ms", 0, INT64_MAX / 1000000, &sp->wait_ms, err);
	if (!rc)
		rc = sg_args_int(a, "output-max", SG_PROC_OUTPUT_MAX, SG_READ_CAP, &sp->out_max,
				 err);
	if (!rc)
		rc = spawn_options(a, sp, err);
	if (rc)
		return rc;
	sp->rec.id = id;
	/* A foreground run: no reply shows it until it is promoted. */
	sp->rec.hidden = sp->rec.split = sp->wait_ms >= 0;
	sp->revision_root = sg_args_flag(a, "revision") ? sp->root : NULL;
	cwd_arg = sg_args_str(a, "cwd", NULL);
	rc = sg_args_unused(a, err);
	if (!rc)
		rc = absolute(ctl, SG_PATH_MAX, raw_ctl, NULL, err);
	if (!rc)
		rc = absolute(cwd, SG_PATH_MAX, cwd_arg ? cwd_arg : "", sp->root, err);
	if (rc)
		return rc;
	sp->ctl = ctl;
	sp->rec.cwd = cwd;
	/* The record keeps the command as given; only the shell sees the launcher. */
	if (sp->attribute && sp->rec.command && sp->login) {
		rc = sg_gitwrap_command(ctl, sp->rec.command, &sp->shell, err);
		if (rc)
			return rc;
	}
	if (a->nrest > 0) {
		sp->argv = a->rest;
		sp->rec.argv = calloc((size_t)a->nrest + 1, sizeof(char *));
		if (!sp->rec.argv)
			return sg_err_set(err, SG_E_INTERNAL, "out of memory");
		for (int i = 0; i < a->nrest; i++)
			sp->rec.argv[i] = a->rest[i];
	}
	rc = path_join(sp->dir, sizeof(sp->dir), ctl, id, NULL, err);
	if (!rc)
		rc = path_join(sp->tmpdir, sizeof(sp->tmpdir), ctl, ".tmp", NULL, err);
	if (!rc)
		rc = path_join(sp->log_path, sizeof(sp->log_path), sp->dir, "out", NULL, err);
	sp->rec.log_path = sp->log_path;
	return rc;
}

/*
 * The process directory, new (an id already there is refused), and the
 * files the supervisor and the host meet in.
 */
static sg_err spawn_dir(const struct proc_spawn *sp, struct sg_errinfo *err)
{
	int dirfd;
	sg_err rc;

	if ((mkdir(sp->ctl, 0700) < 0 && errno != EEXIST) ||
	    (mkdir(sp->tmpdir, 0700) < 0 && errno != EEXIST))
		return sg_err_set(err, SG_E_INTERNAL, "cannot create %s: %s", sp->ctl,
				  strerror(errno));
	if (mkdir(sp->dir, 0700) < 0)
		return sg_err_set(err, errno == EEXIST ? SG_E_INVALID_ARGUMENT : SG_E_INTERNAL,
				  errno == EEXIST ? "process %s already exists"
						  : "cannot create process %s",
				  sp->rec.id);
	dirfd = id_dir_open(sp->ctl, sp->rec.id, err);
	if (dirfd < 0)
		return err->code;
	rc = make_files(dirfd, sp, err);
	close(dirfd);
	return rc;
}

/*
 * Fork the supervisor and take its report into reply; with a wait, the
 * reply is spawn_wait's.  A supervisor that could not be forked, or died
 * before it reported, is recorded as a failed process and replied as one.
 */
static sg_err spawn_supervisor(struct proc_spawn *sp, struct sg_buf *reply,
			       struct sg_errinfo *err)
{
	int pipefd[2] = { -1, -1 };
	pid_t pid;
	sg_err rc;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return sg_err_set(err, SG_E_INTERNAL, "cannot make a pipe: %s", strerror(errno));
	pid = fork();
	if (pid == 0) {
		close(pipefd[0]);
		sp->report = pipefd[1];
		sup_run(sp);
	}
	close(pipefd[1]);
	sg_buf_reset(reply);
	if (pid > 0 && sg_read_all(pipefd[0], reply) == SG_OK && reply->len > 0) {
		rc = sp->wait_ms >= 0 ? spawn_wait(sp->ctl, sp->rec.id, sp->wait_ms, sp->out_max,
						   sp->revision_root, reply, err)
				      : SG_OK;
		goto out;
	}
	/* No supervisor, or it died before reporting: record the failure. */
	sp->rec.status = PS_FAILED;
	sp->rec.hidden = 0;
	utc_now(sp->rec.started_at, sizeof(sp->rec.started_at));
	utc_now(sp->rec.ended_at, sizeof(sp->rec.ended_at));
	sp->rec.message = pid < 0 ? "cannot fork the supervisor"
				  : "the supervisor ended before reporting";
	rc = rec_store(sp->ctl, &sp->rec, err);
	if (!rc)
		rc = reply_rec(reply, "process", &sp->rec, sp->rec.message);
out:
	close(pipefd[0]);
	return rc;
}

static sg_err cmd_spawn(struct sg_args *a, struct sg_buf *reply,
			struct sg_errinfo *err)
{
	char ctl[SG_PATH_MAX], cwd[SG_PATH_MAX];
	struct proc_spawn sp;
	sg_err rc;

	memset(&sp, 0, sizeof(sp));
	rec_init(&sp.rec);
	sp.report = -1;
	rc = spawn_request(a, &sp, ctl, cwd, err);
	if (!rc)
		rc = spawn_dir(&sp, err);
	if (rc)
		goto out;
	if (sg_helper_answer) {
		/* No supervisor of its own: this process is it (job.c's --linger). */
		sp.here = true;
		sup_run(&sp);
	}
	rc = spawn_supervisor(&sp, reply, err);
out:
	free(sp.rec.argv);
	free(sp.shell);
	return rc;
}

int sg_helper_proc(int argc, char *const *argv, const void *in, size_t inlen,
		   struct sg_buf *out, const struct sg_cancel *cancel)
{
	struct sg_errinfo err = { 0 };
	struct sg_args a;
	const char *cmd = argc > 0 ? argv[0] : "";
	sg_err rc;

	rc = sg_args_parse(&a, argc - (argc > 0), argv + (argc > 0),
			   "tail tty input login revision recheck-delivered recheck-due git-attribution", &err);
	if (rc)
		goto out;
	if (strcmp(cmd, "spawn") == 0)
		rc = cmd_spawn(&a, out, &err);
	else if (strcmp(cmd, "read") == 0)
		rc = cmd_read(&a, out, cancel, &err);
	else if (strcmp(cmd, "get") == 0)
		rc = cmd_get(&a, out, cancel, &err);
	else if (strcmp(cmd, "list") == 0)
		rc = cmd_list(&a, out, cancel, &err);
	else if (strcmp(cmd, "stop") == 0)
		rc = cmd_stop(&a, out, cancel, &err);
	else if (strcmp(cmd, "wait") == 0)
		rc = cmd_wait(&a, out, cancel, &err);
	else if (strcmp(cmd, "stop-all") == 0)
		rc = cmd_stop_all(&a, out, cancel, &err);
	else if (strcmp(cmd, "update") == 0)
		rc = cmd_update(&a, out, cancel, &err);
	else if (strcmp(cmd, "write") == 0)
		rc = cmd_write(&a, in, inlen, out, cancel, &err);
	else if (strcmp(cmd, "resize") == 0)
		rc = cmd_resize(&a, out, cancel, &err);
	else
		rc = sg_err_set(&err, SG_E_INVALID_ARGUMENT,
				"unknown proc command \"%s\": spawn, read, get, list, stop, "
				"wait, stop-all, update, write or resize", cmd);
out:
	if (rc) {
		if (!err.code)
			sg_err_set(&err, rc, "the proc command failed");
		sg_reply_error(out, &err);
	}
	return 0;
}
