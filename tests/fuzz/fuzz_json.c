/*
 * fuzz_json.c - sg_json_parse against jansson's json_loadb under libFuzzer.
 *
 * The parser promises to accept exactly what json_loadb accepts and to
 * build equal values (core/json.h).  Any input where the two disagree,
 * under any of the four flag combinations, aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned ours[] = { 0, SG_JSON_REJECT_DUPLICATES, SG_JSON_ALLOW_NUL,
					 SG_JSON_REJECT_DUPLICATES | SG_JSON_ALLOW_NUL };
	static const size_t theirs[] = { 0, JSON_REJECT_DUPLICATES, JSON_ALLOW_NUL,
					 JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL };

	for (size_t i = 0; i < sizeof(ours) / sizeof(*ours); i++) {
		json_error_t je;
		json_t *a = NULL, *b = json_loadb((const char *)data, size, theirs[i], &je);
		sg_err rc = sg_json_parse((const char *)data, size, ours[i], &a, NULL);

		if (rc == SG_E_INTERNAL)
			abort(); /* no allocation fails here */
		if ((rc == SG_OK) != (b != NULL) || (a && !json_equal(a, b)))
			abort();
		json_decref(a);
		json_decref(b);
	}
	return 0;
}
