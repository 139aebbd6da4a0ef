/*
 * sgbench.h - sandgate's benchmarks, measured the way a host sees them.
 *
 * The program spawns `sandgate serve` with two pipes (on the profile that
 * --config and --profile name, else the default one), initializes a
 * session and then measures, over those pipes, on the local backend:
 *
 *   stat    round trips of execute(list_files ".");
 *   cmd     execute(bash "true") against a plain exec of the same login
 *           shell (`bash -l -c true`) by this program;
 *   wake    how long a long-polling process/read takes to answer after the
 *           process wrote a byte (the process `cat`s a FIFO this program
 *           writes into);
 *   export  present_artifact + export/read of a large file in the
 *           gateway's chunks + export/close, base64-decoded and checked
 *           against the sha256 of the file this program wrote;
 *   rss     the gateway's resident set, idle after initialize and sampled
 *           every few milliseconds during the export;
 *
 * and on the ssh backend (the `ssh` set; `stat` runs on any backend):
 *
 *   ssh     execute(bash "true") against a raw `ssh -S <socket> host
 *           true` over a ControlMaster of this program's own (same sshd,
 *           key and known_hosts), execute(read_file) of 1 MiB against a raw
 *           `ssh -S <socket> host cat <file>`, interleaved; the export of a
 *           64 MiB file made on the host; and the ssh client invocations
 *           per tool call, counted by a second gateway whose PATH starts
 *           with a counting `ssh` script (it logs one line per invocation,
 *           then runs the real client with the same arguments and stdin).
 *
 * and on the daytona backend, against the fake Daytona on 127.0.0.1
 * (tests/fakes/daytona), the `daytona` set:
 *
 *   daytona execute(bash "true"), write_file and read_file of 1 MiB,
 *           interleaved, for comparison with the official SDK's results
 *           (bench/daytona-sdk-bench.mjs, read from --sdk-json); the
 *           gateway's peak RSS; and the provider requests per call,
 *           counted from the fake's request log by each call's window.
 *
 * Every request is on the host's wire (protocol version 4): string ids,
 * the tool in call.name with its arguments as a JSON string, the main
 * agent as actor, results as ToolResult parts, a failed tool an error
 * reply.
 *
 * Invariants: one request is in flight at a time, so a reply is matched to
 * its request by id and anything else read meanwhile is a process event;
 * every wait on the gateway has a deadline, so a hung gateway fails the run
 * instead of hanging it.  The table goes to stdout (this program's job),
 * diagnostics to stderr.
 *
 * The program is split by what it measures: stats.c (clocks, percentiles,
 * dying with a message), gw.c (the gateway over its pipes: the only file
 * that writes requests or reads replies), local.c (stat, cmd, wake,
 * export), ssh.c, fake.c (the fakes' request logs over HTTP), daytona.c,
 * cloud.c, ttfr.c (time to the first result in fresh sessions), report.c,
 * report-cloud.c and report-json.c (the tables and the JSON), main.c
 * (options, the run's order).
 *
 * Ownership: a function that returns a pointer says "(new)" when the
 * caller frees it, "(borrowed)" when it lives in an argument; the result
 * structs own their strings and JSON until main frees them at exit.  Every
 * failure is fatal (die), with the state directory kept for its logs.
 */
#ifndef SGBENCH_H
#define SGBENCH_H

/*
 * _GNU_SOURCE: pipe2 and posix_spawn_file_actions_addclosefrom_np are
 * GNU/Linux APIs; nftw's FTW_PHYS/FTW_DEPTH need the XSI part of it;
 * memmem and timegm (the fake Daytona's UTC timestamps) are GNU/BSD.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define KiB ((size_t)1024)
#define MiB (KiB * 1024)

/* A reply frame is at most 16 MiB (protocol section 1); leave headroom. */
#define LINE_MAX_BYTES (17 * MiB)
/* Any single reply this program waits for must come within this. */
#define REPLY_DEADLINE_MS 120000
/* export/read's chunk: the protocol's default and cap. */
#define EXPORT_CHUNK (4 * MiB)
/* Before each wake-up, how long the read is left to block. */
#define WAKE_ARM_MS 20
/* A read that took less than this did not block before the write. */
#define WAKE_ARMED_NS (15 * 1000000LL)
/* Wake-ups slower than this are counted apart (a bimodal distribution). */
#define WAKE_SLOW_NS (5 * 1000000LL)
/* The RSS sampler's period. */
#define RSS_PERIOD_US 2000

#define TOKEN "sgbench"
#define SESSION "bench"
#define ROOT "/workspace"
#define WAKE_FIFO "sgbench-wake.fifo"
#define EXPORT_FILE "sgbench-export.bin"

struct opts {
	const char *sandgate;
	const char *config;    /* NULL: sandgate's own default */
	const char *profile;   /* NULL: the config's default */
	const char *state_dir; /* NULL: a fresh temporary one */
	const char *json_out;
	const char *md_out;
	long stat_n, cmd_n, wake_n, export_mib, export_runs;
	long ssh_n, ssh_export_mib, ssh_export_runs, rt_n, dtn_n;
	const char *sdk_json; /* the SDK benchmark's results, for the daytona table */
	const char *fake_log; /* the cloud set: http://127.0.0.1:PORT/PATH of the fake's log */
	const char *mix;      /* the cloud set's mixed calls (bench/cloud-mix.json) */
	long cloud_n, mix_runs;
	long fake_delay_ms; /* the delay the fake adds to every request; -1: not said */
	long ttfr_n;        /* fresh sessions timed to their first result; 0: none */
	bool do_stat, do_cmd, do_wake, do_export, do_ssh, do_dtn, do_cloud;
	bool only; /* --only was given: the sets are not the backend's defaults */
	bool keep;
};

struct dist {
	size_t n;
	int64_t min, p50, p90, p99, max; /* nanoseconds */
	double mean;
};

struct gw {
	pid_t pid;
	int to, from;       /* its stdin, its stdout */
	char *buf;          /* bytes read from its stdout */
	size_t len, cap, scanned;
	size_t line_len;    /* the line last returned, newline excluded */
	bool held;          /* that line is still at the front of buf */
	int64_t next_id;
	long events;        /* process event lines seen */
	char *req;          /* the request being formatted */
	size_t req_cap;
};

struct stat_result {
	struct dist d;
	double wall_s;
};

enum { CMD_GW, CMD_DIRECT, CMD_KINDS };

struct cmd_result {
	struct dist d[CMD_KINDS];
	char *argv_text; /* the direct command line, for the report */
};

struct wake_result {
	struct dist d;
	long unarmed; /* reads that had not blocked before the write */
	long slow;    /* wake-ups over WAKE_SLOW_NS */
};

struct export_run {
	double total_s, open_s, read_s, client_s, close_s;
	long chunks;
};

#define EXPORT_RUNS_MAX 16

struct export_result {
	size_t bytes;
	int runs;
	struct export_run run[EXPORT_RUNS_MAX];   /* one read at a time */
	struct export_run ahead[EXPORT_RUNS_MAX]; /* one read ahead */
	struct export_run med, med_ahead;         /* the medians by total time */
	long rss_max_kib, rss_samples, hwm_after_kib;
};

#define SSH_READ_FILE "sgbench-1m.txt"
/* S1: the raw login shell's empty home, in the workspace on the host. */
#define SSH_HOME_DIR "sgbench-home"
#define SSH_READ_BYTES MiB
#define SSH_WARM 10
#define RT_FILE "sgbench-rt.txt"
#define RT_STEPS_MAX 8 /* distinct steps named per tool */

/* Where the profile's host is, as a raw ssh client reaches it. */
struct ssh_target {
	char *ssh;         /* the client, found on PATH */
	char *host, *user; /* from the profile */
	char *key, *known_hosts;
	long port;         /* 0: ssh's default */
	char *dest;        /* user@host, or host */
	char *sock;        /* this program's own ControlMaster */
	char *directory;   /* the workspace's real path on the host */
};

/*
 * S1 and S2's kinds: S1's reference is the raw login shell (the host's bash
 * tool runs `bash -l -c`); the raw bare `true` is for information.
 */
enum { SSH_GW_TRUE, SSH_RAW_LOGIN, SSH_RAW_TRUE, SSH_GW_READ, SSH_RAW_CAT, SSH_KINDS };

/* One ssh session count: what a kind of call made the gateway run. */
struct rt_row {
	const char *name;
	long calls;
	long sessions, controls, masters, watcher;
	bool target; /* exactly one session per call is the target */
	int nsteps;
	char step[RT_STEPS_MAX][48];
	long step_n[RT_STEPS_MAX];
};

#define RT_ROWS_MAX 12

struct ssh_result {
	struct dist d[SSH_KINDS];
	char *raw_login, *raw_true, *raw_cat; /* the raw command lines */
	char *view;               /* facts.ssh.view */
	struct export_result ex;
	bool export;
	double raw_export_s;      /* median of raw ssh cat of the export file */
	int nrt;
	struct rt_row rt[RT_ROWS_MAX];
};

#define DTN_UP_FILE "sgbench-up.txt"
#define DTN_WARM 10
/*
 * The fake logs a request when its connection closes, a little after the
 * reply reached the gateway; a request that ends later than this after
 * the call's reply was not waited for by the call (the process watcher).
 */
#define DTN_LATE_MS 50
/* Before the log is read: the last request's close has to land. */
#define DTN_SETTLE_MS 100
#define DTN_ROUTES_MAX 12
/* Between process/start calls: the started `sleep 0.2` has ended. */
#define DTN_PSTART_GAP_MS 400

/* The fake Daytona's loopback port, from the profile's API URL. */
struct fake {
	long port;
	char *url; /* the API URL the gateway is given, for the report */
};

/*
 * What the gateway is asked, timed (DK_EXEC..DK_READ, against the SDK) or
 * counted only; DK_C_WRITE..DK_C_PREAD have the one-request target.
 */
enum {
	DK_EXEC, DK_WRITE, DK_READ, DK_TIMED,
	DK_C_WRITE = DK_TIMED, DK_C_READ, DK_C_STAT, DK_C_RUN, DK_C_PREAD, DK_C_TARGETS,
	DK_C_EDIT = DK_C_TARGETS, DK_C_PSTART, DK_C_EXPORT, DK_C_INIT, DK_REPORTED,
	DK_OTHER = DK_REPORTED, DK_KINDS
};

/* One call: its window on the fake's clock, and what the log gave it. */
struct dtn_call {
	int64_t t0, t1;    /* ms: before the request was written, after the reply */
	int kind;
	long reqs;
	int64_t served_us; /* the sum of its requests' durations */
};

struct dtn_count {
	long calls, reqs, min, max;
	int nroutes;
	char route[DTN_ROUTES_MAX][32];
	long route_n[DTN_ROUTES_MAX];
};

struct dtn_result {
	struct dist d[DK_TIMED];      /* round trips through the protocol */
	struct dist served[DK_TIMED]; /* the fake's time serving those calls */
	struct dtn_count cnt[DK_KINDS];
	long background;              /* requests of no call: the watcher's */
	int64_t bg_min_ms, bg_max_ms; /* their durations */
	long bg_skip_activity;        /* of them, keep-alive checks */
	char bg_routes[128];
	long hwm_kib, rss_kib;        /* the gateway at the end of the set */
	double init_ms;
	long read_bad;                /* read_file replies longer than the file */
	size_t read_len;              /* the length such a reply had */
	char *url;
	json_t *sdk;                  /* daytona-sdk-bench.mjs's results, or NULL */
};

struct dtn_log {
	struct dtn_call *v;
	size_t n, cap;
};

/*
 * The set the vercel and modal backends default to (and that runs on
 * daytona too, with --only cloud): the 50 mixed tool calls of
 * bench/cloud-mix.json against the official SDK doing the same
 * (bench/<backend>-sdk-bench.mjs, read from --sdk-json), provider requests
 * and sandgate's own share per call from the fake's request log, the tasks
 * a call starts in the sandbox (from its pid namespace), peak RSS and time
 * to ready.  Every fake logs each request with its serving time; the
 * shapes differ and are read by cl_req_of.
 */
#define CL_CALIB_N 20
/* A request logged on a clock known only to about this (modal's t_ms). */
#define CL_SLACK_US 3000
/* Absolute timestamps in whole milliseconds (daytona's ts). */
#define CL_SLACK_ABS_US 1000
#define CL_MIX_MAX 200
#define CL_RUNS_MAX 16
#define CL_PID_FILE "sgbench-pid.txt"
/* Requests of one call whose lives are kept, to count its round trips. */
#define CL_LIVES_MAX 16
/* C3: sandgate's own share of a call, p50, at most this (Vercel; Modal's calls the SDK has not). */
#define CL_OWN_MAX_NS 1000000
/* C3 on Modal: at most this times the SDK's own share, p50 (issue 39). */
#define CL_OWN_SDK_RATIO 0.5

/* A request of the fake's log, its life on the wall clock in µs. */
struct cl_req {
	long long seq;
	int64_t start_us, end_us, served_us;
	bool rel; /* its times are relative to the fake's start (plus clock_us) */
	char name[48];
};

/* Where the fake's log is, and how its clock maps to ours. */
struct cl_src {
	struct fake f;     /* the port the log is served on */
	char *path;        /* e.g. /__fake/log */
	int64_t clock_us;  /* the fake's start on the wall clock, for relative times */
};

enum {
	CK_WRITE, CK_READ, CK_STAT, CK_RUN, CK_PREAD, CK_TARGETS,
	CK_EDIT = CK_TARGETS, CK_PSTART, CK_INIT, CK_MIX, CK_REPORTED,
	CK_OTHER = CK_REPORTED, CK_KINDS
};

struct cl_call {
	int64_t t0_us, t1_us; /* wall clock: before the request, after the reply */
	int64_t wall_ns;      /* the same on the monotonic clock */
	int kind;
	long reqs;
	int64_t served_us;    /* the sum of its requests' serving times */
	int64_t first_us, last_us; /* the first request's start, the last one's end */
	int nlife;
	int64_t life[CL_LIVES_MAX][2]; /* its first requests' starts and ends */
};

struct cl_calls {
	struct cl_call *v;
	size_t n, cap;
};

struct cl_result {
	struct dtn_count cnt[CK_KINDS];
	struct dtn_count rtt[CK_KINDS]; /* round trips (in reqs) per call */
	struct dist own[CK_KINDS];      /* wall - served, per call */
	struct dist wall[CK_KINDS];
	int64_t mix_ns[CL_RUNS_MAX];    /* each run's whole sequence */
	int mix_runs, mix_ops;
	int64_t mix_med_ns;
	long background;                /* requests of no call */
	long overlapped;                /* calls whose requests ran side by side */
	double cpu_ms;                  /* the gateway's CPU per counted call */
	char bg_routes[128];
	char init_reqs[512]; /* initialize's requests: when each began, how long it was served */
	long pid_run_min, pid_run_max;  /* tasks per bash call, command included */
	double pid_per[CK_TARGETS];     /* tasks per call of the file tools */
	bool pid_ok;                    /* the probe ran in a pid namespace */
	long pid_calls;
	long hwm_kib, rss_kib;
	double init_ms;
	long delay_ms; /* the fake's added delay; -1: not said */
	bool own_vs_sdk; /* C3's target is a ratio to the SDK's own share (Modal) */
	double rt_ms;                   /* one round trip: list_files's served p50 per request */
	int64_t clock_err_us;           /* how well the log's clock was pinned */
	json_t *sdk;
};

/*
 * Time to the first tool result (issue 39), beside the daytona and cloud
 * sets: --ttfr-n fresh sessions after the main one, each a new gateway on
 * the same profile and state directory and so a new sandbox, timed from
 * right after `sandgate serve` is spawned (as initialize is, D6 and C6)
 * to the reply of its first bash "true"; against the SDK's create() and
 * its first exec of `bash -l -c true` to completion (`ttfr` in
 * --sdk-json), the median of each side's sessions.
 */
#define TTFR_RUNS_MAX 16

struct ttfr_result {
	int n;
	int64_t first_ns[TTFR_RUNS_MAX]; /* the spawn to the bash reply, in session order */
	int64_t init_ns[TTFR_RUNS_MAX];  /* of that, the spawn to the initialize reply */
	int64_t med_ns, init_med_ns;
	long delay_ms; /* the fake's added delay; -1: not said */
};

struct results {
	bool local; /* the gateway's profile is on the local backend */
	bool stat, cmd, wake, export, ssh, dtn, cloud, ttfr;
	struct ttfr_result tf;
	struct stat_result st;
	struct cl_result cl;
	struct ssh_result sh;
	struct dtn_result dt;
	struct cmd_result cmd_r;
	struct wake_result wk;
	struct export_result ex;
	long idle_rss_kib, idle_hwm_kib;
	long events;
	int gateway_status;
};

extern const char *const cmd_names[CMD_KINDS];
extern const char *const cmd_keys[CMD_KINDS];
extern const char *const ssh_names[SSH_KINDS];
extern const char *const ssh_keys[SSH_KINDS];
extern const char *const dk_names[DK_KINDS];
extern const char *const dk_keys[DK_KINDS];
extern const char *const ck_names[CK_KINDS];
extern const char *const ck_keys[CK_KINDS];

/* stats.c */
int64_t now_ns(void);
void sleep_ms(long ms);
int cmp_i64(const void *a, const void *b);
struct dist dist_of(int64_t *v, size_t n);
json_t *dist_json(const struct dist *d);
extern const char *state_for_errors;
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void write_all(int fd, const void *p, size_t n);
long parse_count(const char *s, const char *what);
bool read_rss(pid_t pid, long *rss_kib, long *hwm_kib);
char *text_mib(void);
int64_t wall_ms(bool up);
int64_t wall_us(void);

/* gw.c */
void gw_start(struct gw *g, const struct opts *o, const char *sandgate,
		     const char *state_dir, const char *log_name, char *const *envp);
void gw_line_done(struct gw *g);
char *gw_line(struct gw *g, int64_t deadline_ns);
int64_t gw_send(struct gw *g, const char *method, const char *data);
json_t *parse_line(const char *p, size_t n);
/*
 * The profile a set reads from the gateway's own config file (--config,
 * else $SANDGATE_CONFIG; --profile, else the file's default), borrowed
 * from *cfg (new; the caller frees it); *name is its name.  Without a
 * config file the run dies with `refusal`.
 */
json_t *bench_profile(const struct opts *o, const char *refusal, json_t **cfg,
		      const char **name);
bool id_is(const char *s, int64_t n);
json_t *gw_reply(struct gw *g, int64_t id, int64_t *at);
json_t *reply_data(json_t *frame, const char *what);
json_t *gw_call(struct gw *g, const char *method, json_t *data);
json_t *gw_initialize(struct gw *g);
char *execute_data(const char *tool, json_t *args);
json_t *check_tool(json_t *frame, const char *what);
const char *tool_text(json_t *d);
json_int_t view_int(json_t *d, const char *key, const char *what);
json_t *read_args(const char *path);
json_t *edit_args(const char *path, long i);
json_t *pread_data(const char *id);
int gw_stop(struct gw *g);
int64_t gateway_cmd(struct gw *g, const char *data);
int64_t present_artifact(struct gw *g, const char *path, char *token, size_t cap);
void execute_ok(struct gw *g, const char *tool, json_t *args);
void start_process(struct gw *g, const char *command, char id[64]);
void export_whole(struct gw *g, const char *path);

/* local.c */
struct stat_result bench_stat(struct gw *g, long n);
void free_strv(char **v);
int64_t spawn_timed(char *const *argv, char *const *envp, int fd3, size_t *out_bytes,
			   const char *what);
struct cmd_result bench_cmd(struct gw *g, const char *state, long n);
struct wake_result bench_wake(struct gw *g, const char *workspace, long n);
struct export_result export_measure(struct gw *g, const char *sha_hex,
					   size_t bytes, int runs);
struct export_result bench_export(struct gw *g, const char *workspace,
					 size_t bytes, int runs);

/* ssh.c */
void ssh_target_load(struct ssh_target *t, const struct opts *o);
void ssh_target_free(struct ssh_target *t);
void ssh_master_open(struct ssh_target *t, const char *state);
void ssh_master_close(const struct ssh_target *t, const char *state);
void ssh_compare(struct gw *g, const struct ssh_target *t, long n, struct ssh_result *r);
void ssh_export(struct gw *g, const struct ssh_target *t, size_t bytes, int runs,
		       struct ssh_result *r);
void ssh_round_trips(const struct opts *o, const char *sandgate, const char *state,
			    long n, struct ssh_result *r);

/* fake.c */
json_t *fake_get(const struct fake *f, const char *target);
json_t *fake_requests(const struct fake *f, long long since);
long long fake_last_seq(const struct fake *f);
int64_t iso_ms(const char *s);

/* daytona.c */
void fake_load(struct fake *f, const struct opts *o);
void dtn_add(struct dtn_log *l, int kind, int64_t t0, int64_t t1);
void dtn_route(struct dtn_count *c, const char *route);
void bench_daytona(struct gw *g, const struct fake *fk, struct dtn_log *l,
			  long long since, const struct opts *o, struct dtn_result *r);

/* cloud.c */
long long cl_last_seq(const struct cl_src *s);
void cl_src_parse(struct cl_src *s, const char *url);
struct cl_call *cl_add(struct cl_calls *l, int kind, int64_t t0_us, int64_t t0_ns);
void bench_cloud(struct gw *g, struct cl_src *s, struct cl_calls *l, long long since,
			const struct opts *o, struct cl_result *r);

/* ttfr.c */
void bench_ttfr(const struct opts *o, const char *sandgate, const char *state,
		struct ttfr_result *r);

/* report.c */
double mbps(size_t bytes, double s);
const char *verdict(bool ok);
void report_markdown(FILE *o, const struct results *r);
void report_details(FILE *o, const struct results *r);

/* report-cloud.c */
void report_dtn_markdown(FILE *o, const struct dtn_result *r);
void report_dtn_details(FILE *o, const struct dtn_result *r, long idle_hwm_kib);
void report_cloud_markdown(FILE *o, const struct cl_result *r);
void report_cloud_details(FILE *o, const struct cl_result *r, long idle_hwm_kib);
void report_ttfr_markdown(FILE *o, const struct ttfr_result *r, const json_t *sdk,
			  const char *row);
void report_ttfr_details(FILE *o, const struct ttfr_result *r, const json_t *sdk);

/* report-json.c */
void write_json(const char *path, const struct results *r);

#endif
