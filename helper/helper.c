/*
 * helper.c - sg_helper_run: one sg-helper command, in-process.
 *
 * The same dispatch serves the program (main.c) and the gateway, which
 * calls it directly for environments whose files live on this host.  The
 * two commands that must run inside the environment, because they fork
 * something that outlives the call or confine the caller itself, are
 * refused here; main.c calls their entry points directly.
 */
#include "helper/internal.h"

#include <string.h>

int sg_helper_run(int argc, char *const *argv, const void *in, size_t inlen,
		  struct sg_buf *out, const struct sg_cancel *cancel)
{
	struct sg_errinfo err = { 0 };
	const char *cmd = argc > 0 ? argv[0] : NULL;

	if (!cmd) {
		sg_err_set(&err, SG_E_INVALID_ARGUMENT,
			   "no command: fs, proc or probe");
	} else if (strcmp(cmd, "fs") == 0) {
		return sg_helper_fs(argc - 1, argv + 1, in, inlen, out, cancel);
	} else if (strcmp(cmd, "proc") == 0) {
		if (argc < 2 || strcmp(argv[1], "spawn") != 0)
			return sg_helper_proc(argc - 1, argv + 1, in, inlen, out,
					      cancel);
		/* The supervisor it forks must not be a child of the gateway. */
		sg_err_set(&err, SG_E_INVALID_ARGUMENT,
			   "proc spawn runs inside the environment, through "
			   "the adapter's exec, never in-process");
	} else if (strcmp(cmd, "probe") == 0) {
		return sg_helper_probe(argc, argv, out);
	} else if (strcmp(cmd, "job") == 0) {
		/* Its runner must outlive the request, not live in the gateway. */
		sg_err_set(&err, SG_E_INVALID_ARGUMENT,
			   "job runs inside the environment, through the "
			   "adapter's exec, never in-process");
	} else if (strcmp(cmd, "confine") == 0) {
		/* It would confine the gateway itself, for good. */
		sg_err_set(&err, SG_E_INVALID_ARGUMENT,
			   "confine runs inside the environment, through the "
			   "adapter's exec, never in-process");
	} else {
		sg_err_set(&err, SG_E_INVALID_ARGUMENT,
			   "unknown command \"%s\": fs, proc or probe (confine, job and "
			   "status run only as the program)",
			   cmd);
	}
	sg_reply_error(out, &err);
	return 0;
}
