/*
 * limits.h - every size and time limit sandgate enforces, named once.
 *
 * Invariants: the protocol's numbers (docs/protocol.md) appear here and nowhere
 * else; code refers to these names, never to a literal.  Sizes are bytes,
 * times carry their unit in the name.
 */
#ifndef SG_LIMITS_H
#define SG_LIMITS_H

#include <stddef.h>

#define SG_KiB ((size_t)1024)
#define SG_MiB (SG_KiB * 1024)

/* Framing (protocol section 1): one frame, newline included. */
#define SG_MAX_FRAME (16 * SG_MiB)

/* Tool output kept per call before `truncated: true` (section 3). */
#define SG_TOOL_OUTPUT (1 * SG_MiB)
/* The most --max-output may raise it to: JSON can grow text 6 times
 * (control bytes as \u00XX), and a reply must stay under SG_MAX_FRAME. */
#define SG_TOOL_OUTPUT_MAX (2 * SG_MiB)
/*
 * How far read_file reads on past its window only to count total_lines
 * (about 0.25 ms per MiB); beyond it the count is a lower bound and the
 * reply says total_lines_partial.
 */
#define SG_READ_COUNT_MAX (1 * SG_MiB)

/* Processes (section 4). */
#define SG_PROC_RETAIN (8 * SG_MiB)   /* newest output kept per process */
#define SG_READ_DEFAULT (64 * SG_KiB) /* process/read MaxBytes default */
#define SG_READ_CAP (4 * SG_MiB)      /* process/read MaxBytes cap */
#define SG_PROC_GRACE_MS 2000         /* process/stop grace default */

/* Exports (section 6). */
#define SG_EXPORT_MAX (256 * SG_MiB) /* one exported file */
#define SG_EXPORT_CHUNK (4 * SG_MiB) /* export/read length default and cap */
#define SG_EXPORTS_OPEN_MAX 256      /* exports one session holds open at once */
#define SG_EXPORTS_HELD_MAX (4 * SG_EXPORT_MAX) /* their snapshots' bytes, all together */

#define SG_GIT_CONFIG_MAX (1 * SG_MiB) /* read_only git reads the configuration first */

/* Shutdown budgets (section 8.2). */
#define SG_SHUTDOWN_BUDGET_MS 60000   /* as a command backend */
#define SG_PEER_SHUTDOWN_MS 10000     /* as a delegated peer */
#define SG_POOL_QUIT_MS 50            /* idle workers' time to leave after the shutdown, even past the budget */
#define SG_HOST_COMMAND_MS 60000     /* the host's own budget for a command backend */
#define SG_HOST_CLOUD_MS 90000       /* ... and for a cloud backend's entry */
#define SG_OUTER_GRACE_MS 10000      /* an outer adapter's grace for its peer (a command profile's default) */
#define SG_RELAY_CANCEL_MS 35000     /* a command peer's terminal reply after a cancel */
#define SG_RELAY_FORWARD_MS 2000     /* at EOF, for requests already read to reach the peer */
#define SG_BUDGET_SLACK_MS 1000      /* a shutdown plan's room for the rest */
#define SG_SETTLE_POLL_MS 500         /* between looks for a create that may land */
#define SG_LIFETIME_DEFAULT_S 600     /* lifetime_seconds 0 -> 600 */
#define SG_LOCAL_PIDS_DEFAULT 2048    /* local pids_max when the profile sets none */
#define SG_LOCAL_PIDS_CEILING 4194304 /* the kernel's largest pid_max */
#define SG_CGROUP_KILL_MS 3000        /* a session's cgroups emptied and removed */

/*
 * cpus and memory_mb (section 4.3), in a profile or a binding, on every
 * backend.  A hundredth of a CPU is the smallest quota the kernel takes
 * (1 ms of cgroups' 100 ms period).  The maximums are beyond any
 * environment's size, and keep what backends derive from them (a quota in
 * microseconds, a limit in bytes) far inside 64 bits.
 */
#define SG_CPUS_MIN 0.01
#define SG_CPUS_MAX 4096
#define SG_MEMORY_MB_MAX (16LL * 1024 * 1024) /* 16 TiB */

/* Internal bounds that are not protocol numbers. */
#define SG_ERR_MSG 256             /* one error sentence */
#define SG_ENVTOOL_REPLY (24 * SG_MiB) /* an env-tool reply: 16 MiB of base64 at most */
#define SG_HELPER_STDERR (16 * SG_KiB) /* stderr kept for an error message */
#define SG_JOB_SPEC_MAX (8 * SG_MiB) /* a job's environment and argv on stdin */
#define SG_HELPER_BIN_MAX (64 * SG_MiB) /* sg-helper on this host, to install */
#define SG_INSTALL_POLL_MS 500 /* an upload and a set-up side by side: the coordinator's wake-ups */
/* A command sent beside a set-up waits this long for sg-helper (> the set-ups' upload waits). */
#define SG_REMOTE_LATER_WAIT_MS 45000
#define SG_WORKERS_MAX 64          /* worker threads, grown on demand */
#define SG_INFLIGHT_MAX 1024       /* requests in flight at once (protocol section 2) */
#define SG_INFLIGHT_BYTES (256 * SG_MiB) /* their frames' bytes, all together */
#define SG_WIRE_QUEUE_MAX (256 * SG_MiB) /* output queued for a host that does not read it */
#define SG_LIST_MAX 10000          /* entries one listing or glob step holds */
#define SG_GREP_DEFAULT 500        /* grep max_results default */
#define SG_GREP_COUNT_MAX 100000   /* matches counted before "more than" */
#define SG_GREP_LINE_MAX 1024      /* bytes of a matching line shown */
#define SG_GREP_LINE_READ (4 * SG_MiB) /* bytes of one line read from the engine */
#define SG_GREP_DEADLINE_MS 45000  /* a search's wall time (both engine runs), within the host's budget, before it is killed */
#define SG_GREP_ENGINE_MEM (512 * SG_MiB) /* the search program's heap and anonymous maps (RLIMIT_DATA) */
#define SG_GREP_ENGINE_CPU_S 720   /* its CPU, all threads together (RLIMIT_CPU): 16 threads to the deadline */
#define SG_GREP_REGEX_SIZE "10M"   /* rg's --regex-size-limit and --dfa-size-limit */
#define SG_GLOB_ALTS_MAX 1024      /* patterns a glob's braces expand to */
#define SG_BINARY_SNIFF (8 * SG_KiB) /* bytes read_file looks at for binary */
#define SG_SYMLINK_MAX 40          /* symlinks followed while resolving */
#define SG_PATH_LOOKS 4            /* looks at a name the environment keeps swapping */
#define SG_CREDENTIAL_ENV_MAX 16   /* variables one adapter reads per profile */
#define SG_PATH_MAX 4096
#define SG_PIPE_SIZE (1 * SG_MiB)  /* stdout pipe asked for (fs.pipe-max-size) */
#define SG_PROC_DRAIN_MS 200        /* pipe EOF awaited after a child's exit */
#define SG_CLOSE_FDS_MAX 1024       /* closed one by one when close_range(2) is missing */
#define SG_PROC_KILL_MS 2000        /* a supervisor killing what left the group */
#define SG_PROC_KILL_POLL_MS 5      /* its rescan for orphans handed to it */
#define SG_PROC_REAP_MS 5000        /* final record awaited after SIGKILL */
#define SG_PROC_LOCK_MS 5000        /* the records' lock awaited (the environment can hold it) */
#define SG_PROC_SPAWN_MS 60000      /* one `proc spawn` step (or the stop after a failed one) */
#define SG_PROC_LOST_POLL_MS 1000   /* liveness re-check without a pidfd */
#define SG_PROC_ID_MAX 128          /* a process id's length */
#define SG_PROC_CHUNK (64 * SG_KiB) /* one read from a child's pipe */
#define SG_PROC_WATCH_MAX 32        /* supervisors one wait watches by pidfd */
#define SG_PROC_SCAN_MAX (4 * SG_MAX_FRAME) /* record bytes one list or wait holds */
#define SG_PROC_KNOWN_MAX 4096     /* processes a session's watcher follows (the environment writes their records) */
#define SG_PROC_STOP_THREADS 16    /* threads stopping a session's processes at its end */
#define SG_EXEC_DRAIN_MS 100        /* pipe EOF awaited after a child exits */
#define SG_HTTP_HEADERS_MAX (64 * SG_KiB) /* response headers kept */
#define SG_HTTP_ERROR_BODY (64 * SG_KiB)  /* a non-2xx body kept by a sink */
#define SG_HTTP_CONNECT_TIMEOUT_MS 30000  /* connect_timeout_ms 0 */
#define SG_CURL_POOL_MAX 16               /* idle connections curl's pool keeps (all hosts, http.c and grpc.c) */
#define SG_HTTP_RETRY_ATTEMPTS 3          /* tries in all, by default */
#define SG_HTTP_RETRY_BASE_MS 400         /* the first backoff */
#define SG_HTTP_RETRY_MAX_DELAY_MS 20000  /* longest single wait */
#define SG_GRPC_MSG_MAX (100 * SG_MiB) /* one gRPC message (Modal's limit) */
#define SG_GRPC_URL_MAX 512            /* a gRPC server's scheme://host:port */
#define SG_GRPC_KEY_MAX 128            /* an idempotency key */
#define SG_GRPC_RECYCLE_CALLS 900      /* calls on one connection, then a new one */
#define SG_PROBE_TOOL_MS 2000           /* each toolchain's --version */
#define SG_PROBE_CAPTURE (4 * SG_KiB)   /* its output kept */
#define SG_PROBE_FILE_MAX (256 * SG_KiB) /* a /proc or cgroup file read */
#define SG_PROBE_HIDDEN_MAX 8           /* host files a probe tries to open (--hidden) */

/* The ssh backend (ssh/ssh.c). */
#define SG_SSH_CONNECT_TIMEOUT_S 10   /* ssh ConnectTimeout */
#define SG_SSH_ALIVE_INTERVAL_S 15    /* ssh ServerAliveInterval */
#define SG_SSH_MASTER_MS 60000        /* connect, key exchange, login */
#define SG_SSH_STEP_MS 60000          /* one provisioning or teardown step */
#define SG_SSH_UPLOAD_MS 300000       /* sending sg-helper */
#define SG_SSH_KILL_MS 5000           /* the kill after a timeout or cancel */
#define SG_SSH_CLEANUP_MS 10000       /* undoing a failed provision */
#define SG_SSH_UNTIMED_MS 600000      /* a step with no timeout of its own (file tools) */
/* singularity: the apptainer/singularity CLI. */
#define SG_SING_VERSION_MS 60000      /* `RUNTIME --version` (a wrapper script on a loaded host) */
#define SG_SING_START_MS 120000       /* `instance start`, image mounts included */
#define SG_SING_BUILD_MS 1800000      /* docker:// or oras:// converted to a SIF */
#define SG_SING_STOP_S 5              /* `instance stop -t`: SIGINT, then SIGKILL */
#define SG_SING_STEP_MS 30000         /* `instance list`, `instance stop` */
#define SG_SING_REGISTRY_MS 30000     /* one registry request: a tag's digest, a token */
#define SG_SING_KEY_MAX 120           /* the readable head of a cached SIF's name */
#define SG_SING_URL_MAX 2048          /* a registry URL or a token realm */
#define SG_SING_TOKEN_MAX (64 * SG_KiB)    /* a registry's token reply */
#define SG_SING_MANIFEST_MAX (4 * SG_MiB)  /* a manifest hashed when the digest header is missing */
#define SG_SSH_CHECK_MS 5000          /* ssh -O check / -O exit */
#define SG_SSH_REPLY_MAX (256 * SG_KiB) /* what our scripts print */
#define SG_SSH_LINE_MAX (64 * SG_KiB)   /* the one command string */
#define SG_SSH_SOCK_MAX 90 /* sun_path is 108; ssh appends 17 while binding */
#define SG_SSH_SLUG_MAX 48 /* bytes of an identity kept readable in a name */
#define SG_SSH_MIN_PERSIST_S 60 /* ControlPersist floor */

/* The daytona backend (daytona/). */
#define SG_DAYTONA_TRIP_SLACK_MS 30000 /* a trip's HTTP timeout past its wait */
#define SG_DAYTONA_DELETE_MS 120000    /* a delete, until the sandbox is gone */
#define SG_DAYTONA_KILL_MS 15000       /* the kill after a cancel */
#define SG_DAYTONA_VERIFY_MS 3000      /* the one look after a failed delete */
#define SG_DAYTONA_INLINE_MAX (96 * SG_KiB) /* one variable: a part of stdin, argv */
#define SG_DAYTONA_STDIN_VARS (1 * SG_MiB)  /* stdin text sent in variables, at most */
#define SG_DAYTONA_SCRIPT_REPLY (256 * SG_KiB) /* our own scripts' output */
#define SG_DAYTONA_UPLOAD_WAIT_MS 30000 /* the set-up waits for sg-helper sent beside it (< half the request's timeout) */
#define SG_DAYTONA_SWEEP_MIN 1440      /* run/ leftovers older than a day */
#define SG_DAYTONA_TRIP_FAILS 4        /* consecutive failed trips of one exec */
#define SG_DAYTONA_LIST_PAGES 1000     /* pages of GET /sandbox, at most */
#define SG_DAYTONA_CALL_MS 60000       /* one control-plane call */
#define SG_DAYTONA_CREATE_MS 120000    /* POST /sandbox blocks up to 30 s */
#define SG_DAYTONA_START_MS 900000     /* building an image and starting */
#define SG_DAYTONA_POLL_FIRST_MS 100   /* state polls: the first wait ... */
#define SG_DAYTONA_POLL_MAX_MS 1000    /* ... growing by half to this */
#define SG_DAYTONA_EVENT_POLL_MS 1000  /* with the event stream: a poll at least this often */
#define SG_DAYTONA_EVENT_MAX (1 * SG_MiB) /* one event stream message */
#define SG_DAYTONA_EVENT_OUT 4096      /* one message to the event stream */
#define SG_DAYTONA_REPLY_MAX (4 * SG_MiB) /* a control-plane JSON reply */
#define SG_DAYTONA_TOOLBOX_MS 60000    /* toolbox_timeout_ms's default */

/* The modal backend (modal/). */
#define SG_MODAL_CALL_MS 60000     /* one control-plane or router call */
#define SG_MODAL_REFRESH_S 60      /* fetch a token this long before its exp */
#define SG_MODAL_JOIN_S 55         /* one ImageJoinStreaming wait, as the SDK */
#define SG_MODAL_TASK_POLL_S 10    /* one SandboxGetTaskId wait */
#define SG_MODAL_READ_RETRIES 5    /* reconnects of one output stream */
#define SG_MODAL_LIST_PAGES 1000   /* pages of SandboxList, at most */
#define SG_MODAL_INLINE_MAX (96 * SG_KiB) /* one exec variable: a part of stdin, the job's words */
#define SG_MODAL_STDIN_VARS (1 * SG_MiB)  /* stdin text sent in variables, at most */
#define SG_MODAL_JOB_WAIT_MS 50000 /* what one exec of sg-helper job waits in the sandbox */
#define SG_MODAL_TRIP_SLACK_MS 30000 /* beyond it, for the exec's own requests */
#define SG_MODAL_READY_MS 180000   /* create to the first exec's readiness */
#define SG_MODAL_IMAGE_MS 900000   /* an image build */
#define SG_MODAL_KILL_MS 10000     /* killing a cancelled command */
#define SG_MODAL_ROUTER_REFRESH_S 30 /* reopen the router this long before its JWT's exp */
#define SG_MODAL_MIN_TIMEOUT_S 60  /* timeout_secs at least (lifetime_seconds below it) */
#define SG_MODAL_MAX_TIMEOUT_S 86400 /* Modal's maximum timeout and idle timeout */
#define SG_MODAL_IMAGE_CACHE 16    /* image ids remembered per reference */
#define SG_MODAL_SWEEP_MIN 1440    /* run/ leftovers older than a day go at set-up */
#define SG_MODAL_STDIN_CHUNK (512 * SG_KiB) /* one TaskExecStdinWrite */
#define SG_MODAL_READ_LAG_MS 5     /* an exec's output read leaves this long after its start, or at its answer */


/* The vercel backend (vercel/). */
#define SG_VERCEL_CALL_MS 60000        /* one control-plane call */
#define SG_VERCEL_CREATE_MS 180000     /* a create or resume: a VM boots */
#define SG_VERCEL_WAIT_MS 50000        /* what one command request waits in the sandbox */
#define SG_VERCEL_TRIP_SLACK_MS 30000  /* a command request's HTTP timeout past its wait */
#define SG_VERCEL_KILL_MS 15000        /* the kill after a cancel */
#define SG_VERCEL_SETTLE_MS 120000     /* waiting out stopping/snapshotting */
#define SG_VERCEL_RESUME_POLL_MS 20     /* a call waiting for another call's resume */
#define SG_VERCEL_POLL_MS 500          /* state polls, as the SDK's */
#define SG_VERCEL_UPLOAD_WAIT_MS 30000 /* the set-up waits for sg-helper sent beside it (< CALL_MS) */
#define SG_VERCEL_INLINE_MAX (96 * SG_KiB) /* one variable: a part of stdin, the job line */
#define SG_VERCEL_STDIN_VARS (1 * SG_MiB)  /* stdin text sent in variables, at most */
#define SG_VERCEL_SCRIPT_REPLY (256 * SG_KiB) /* our own scripts' output */
#define SG_VERCEL_LINE_MAX (1 * SG_MiB) /* one NDJSON line of a command stream */
#define SG_VERCEL_REPLY_MAX (4 * SG_MiB) /* a control-plane JSON reply */
#define SG_VERCEL_LIST_PAGES 1000      /* pages of GET /v2/sandboxes, at most */
#define SG_VERCEL_MSG_SHOWN 160        /* bytes of a provider message a sentence quotes */
#define SG_VERCEL_MIN_TIMEOUT_MS 60000 /* a sandbox's timeout, at least (lifetime_seconds below it) */

#endif
