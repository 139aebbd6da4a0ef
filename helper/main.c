/*
 * main.c - the sg-helper program (see helper.h for the commands).
 *
 * This is the only place in sandgate where the helper's reply is printed:
 * the reply is built in a buffer by the same code the gateway runs
 * in-process, then written to stdout whole, with a newline.  stdin is read
 * only by the commands that take content from it (fs write, fs edit, fs
 * patch, proc write), so
 * every other command leaves the caller's stdin alone.
 *
 * `confine`, `job` and `proc spawn` are called directly: sg_helper_run refuses
 * them because they must run inside the environment (`cgroup-exec` and
 * `status` likewise wrap a command and exec it).  confine execs the
 * command in this process (stdout is then the command's); job replies in
 * plain text (job.c); proc spawn
 * leaves a detached supervisor behind and replies at once.
 */
#include "helper/internal.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/limits.h"

static bool wants_stdin(int argc, char **argv)
{
	/* proc write: the input for a process's stdin. */
	if (argc >= 3 && strcmp(argv[1], "proc") == 0 && strcmp(argv[2], "write") == 0)
		return true;
	return argc >= 3 && strcmp(argv[1], "fs") == 0 &&
	       (strcmp(argv[2], "write") == 0 || strcmp(argv[2], "edit") == 0 ||
		strcmp(argv[2], "patch") == 0);
}

static int helper_main(int argc, char **argv)
{
	struct sg_buf in = SG_BUF_INIT(SG_MAX_FRAME);
	struct sg_buf out = SG_BUF_INIT(SG_ENVTOOL_REPLY);
	int status = 0;
	sg_err rc;

	if (argc >= 2 && strcmp(argv[1], "confine") == 0)
		return sg_helper_confine(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "status") == 0)
		return sg_helper_status(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "cgroup-exec") == 0)
		return sg_helper_cgroup_exec(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "job") == 0)
		return sg_helper_job(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "git-wrap") == 0)
		return sg_helper_gitwrap(argc - 1, argv + 1);
	if (wants_stdin(argc, argv) && (rc = sg_read_all(0, &in)) != SG_OK) {
		struct sg_errinfo err = { 0 };

		sg_err_set(&err, rc,
			   rc == SG_E_TOO_LARGE
				   ? "the content on stdin is larger than a frame"
				   : "cannot read the content on stdin");
		sg_reply_error(&out, &err);
	} else if (argc >= 3 && strcmp(argv[1], "proc") == 0 &&
		   strcmp(argv[2], "spawn") == 0) {
		status = sg_helper_proc(argc - 2, argv + 2, NULL, 0, &out, NULL);
	} else {
		status = sg_helper_run(argc - 1, argv + 1, in.p, in.len, &out,
				       NULL);
	}
	if (sg_write_all(1, out.p, out.len) || sg_write_all(1, "\n", 1))
		status = status ? status : 1;
	sg_buf_release(&in);
	sg_buf_release(&out);
	return status;
}

int main(int argc, char **argv)
{
	sg_helper_self = helper_main;
	return helper_main(argc, argv);
}
