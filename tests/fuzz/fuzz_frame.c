/*
 * fuzz_frame.c - the frame reader and request validation under libFuzzer.
 *
 * The input is fed to the real reader through a pipe (so the newline
 * search, the caps and the EOF rule are exercised as the gateway runs
 * them); every frame it yields goes through the checks a request meets
 * before any handler: the binding of an initialize, and typed argument
 * reads of the kind every handler does.
 */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "gateway/session.h"
#include "gateway/wire.h"

static void check_request(json_t *frame)
{
	json_t *data = json_object_get(frame, "data"), *canon = NULL, *arr = NULL;
	struct sg_errinfo e = { 0 };
	const char *str = NULL;
	int64_t n;
	bool b;

	if (!json_is_object(data))
		return;
	if (sg_binding_canonical(data, &canon, &e) == SG_OK)
		json_decref(canon);
	sg_err_clear(&e);
	(void)!sg_arg_str(data, "path", false, &str, &e);
	(void)!sg_arg_int(data, "OffsetBytes", 0, 0, INT64_MAX, &n, &e);
	(void)!sg_arg_bool(data, "recursive", false, &b, &e);
	(void)!sg_arg_strings(data, "argv", &arr, &e);
	(void)!sg_arg_env(data, "env", &arr, &e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sg_wire *w = NULL;
	int in[2], out[2];

	if (size > 65536 || pipe(in) || pipe(out))
		return 0;
	if (write(in[1], data, size) != (ssize_t)size)
		abort();
	close(in[1]);
	if (sg_wire_new(in[0], out[1], NULL, NULL, &w) == SG_OK) {
		for (;;) {
			struct sg_errinfo e = { 0 };
			json_t *frame = NULL;

			if (sg_wire_read(w, &frame, &e) != SG_OK)
				break;
			check_request(frame);
			json_decref(frame);
		}
		sg_wire_free(w);
	}
	close(in[0]);
	close(out[0]);
	close(out[1]);
	return 0;
}
