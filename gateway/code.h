/*
 * code.h - run_code: a model's program whose only reach is the host's tools
 * (protocol section 7).
 *
 * Invariants:
 * - The program runs in sg-jsrun (jsrun/), one process per
 *   program beside the gateway, never inside the environment; the gateway
 *   owns its time: a cancel or the deadline kills it.
 * - Every tools.x(...) the program makes is a `tool` frame to the host
 *   with parent_id = the run_code request's id, answered by a `callback`
 *   frame; nothing waits for a callback after the run_code reply is out.
 * - A program's failure (a throw, the deadline, an output or state limit)
 *   is a successful reply with Error set; an error reply only means the
 *   program could not run.
 * - Per-actor state lives in this process only, scoped [session, actor,
 *   root], changed only by a program that succeeded, one program per scope
 *   at a time.
 */
#ifndef SG_CODE_H
#define SG_CODE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

struct sg_op;

/* The run_code method (a pool handler). */
sg_err sg_code_run(struct sg_op *op, json_t **out);

/*
 * The line seam, for the fuzz target (tests/fuzz/fuzz_code.c): op's run
 * as sg_code_run makes it (request read, state scope entered), but with no
 * sg-jsrun: the caller supplies the lines sg-jsrun would write.
 * sg_code_seam_line acts on one line (without its newline) exactly as on
 * one read from sg-jsrun, after settling the nested calls the host
 * answered since (sg_callback_deliver); false once the program is over.
 * sg_code_seam_close ends the run as sg_code_run does (the state committed
 * only on success), frees the seam and sets *out to the reply's data
 * (new).  Both open and close leave op->err set on failure.
 */
struct sg_code_seam;
sg_err sg_code_seam_open(struct sg_op *op, struct sg_code_seam **out);
bool sg_code_seam_line(struct sg_code_seam *seam, const char *line, size_t n);
sg_err sg_code_seam_close(struct sg_code_seam *seam, json_t **out);

#endif
