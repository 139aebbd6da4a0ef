/*
 * fuzz_reply.c - the readers of what an environment answers, under
 * libFuzzer.
 *
 * Everything that comes back from inside an environment is hostile: a
 * command there can print any bytes, and a sandbox can replace the shell or
 * sg-helper that answers.  Two readers take such text: sg_job_parse() and
 * sg_job_result() (`sg-helper job`'s reply, on every remote exec) and
 * sg_cloud_setup_read() (the cloud set-up script's key=value lines and the
 * probe after them).  Each input is run through both, with the first byte
 * choosing the options and the second the output limit; the bounds their
 * headers promise are checked, and ASan and UBSan watch the rest.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/cloud.h"
#include "core/exec.h"
#include "adapters/jobreply.h"
#include "base/limits.h"

/* A mark as sg_job_mark() makes them; the seed corpus uses this one. */
#define MARK "sgmk-0123456789abcdef"

static void job_reply(const char *text, size_t len, uint8_t opts, size_t max)
{
	struct sg_exec_result out;
	struct sg_job_reply r;

	sg_job_parse(text, len, MARK, &r);
	if (r.head_len > len || r.err_at > len)
		abort();
	if (r.state != SG_JOB_IS_DONE)
		return;
	sg_exec_result_init(&out, max);
	out.keep_tail = opts & 1;
	if (opts & 2) {
		/* The ssh adapter's way: the reply stays in place. */
		size_t keep = sg_job_tail(&r, text, max, &out);

		if (keep > r.head_len)
			abort();
		sg_job_status(&r, max, &out);
	} else {
		sg_job_result(&r, text, len, max, &out);
	}
	if (out.out.len > max || out.err.len > SG_HELPER_STDERR)
		abort();
	(void)sg_exec_signame(out.signal);
	sg_exec_result_release(&out);
}

static void setup_reply(const char *text, size_t len, uint8_t opts)
{
	struct sg_env env = { .root = "/workspace" };
	struct sg_cloud_setup got;
	struct sg_errinfo err = { 0 };
	char *reply = malloc(len + 1);

	if (!reply)
		abort();
	memcpy(reply, text, len);
	reply[len] = '\0';
	(void)!sg_cloud_setup_read(&env, reply, "0123", opts & 4, "fuzz", &got, &err);
	free(got.base_dir);
	free(env.probe);
	free(env.ctl_dir);
	free(env.helper);
	free(reply);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	/* From 1 byte to a few KiB: small limits cut inside every field. */
	size_t max = 1 + (size_t)data[1] * 17;

	job_reply((const char *)data + 2, size - 2, data[0], max);
	setup_reply((const char *)data + 2, size - 2, data[0]);
	return 0;
}
