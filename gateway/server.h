/*
 * server.h - `sandgate serve`: one host connection on stdin and stdout.
 *
 * The main thread reads frames and dispatches each request to a worker
 * from a pool grown on demand; the wire's writer thread alone writes
 * stdout.  Shutdown (protocol section 9) starts at stdin EOF, a malformed
 * or oversized frame, a failed write, or SIGTERM/SIGINT, and runs inside
 * the shutdown budget: in-flight requests are cancelled and awaited, this
 * session's processes stopped, exports released, then the environment is
 * kept or removed as the binding says.
 */
#ifndef SG_SERVER_H
#define SG_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "config/config.h"

struct sg_server_opts {
	const struct sg_config *cfg; /* borrowed */
	const char *profile;         /* NULL: the config's default */
	const char *state_dir;
	const char *helper_path;     /* sg-helper on this host */
	const char *audit_log;       /* NULL: none */
	int64_t budget_ms;           /* 0: the profile's, else the default */
	size_t tool_output;          /* 0: SG_TOOL_OUTPUT */
	bool peer;                   /* started as a delegated peer (budget 10 s) */
	bool toolchains;             /* probe the toolchains at initialize */
	/*
	 * The connection: frames are read from in_fd and written to out_fd,
	 * both borrowed.  Both 0 (the zeroed default) means stdin and stdout;
	 * tests serve a socketpair in-process.
	 */
	int in_fd, out_fd;
};

/* Serve until shutdown; returns the process's exit status. */
int sg_server_run(const struct sg_server_opts *o);

#endif
