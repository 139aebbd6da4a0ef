/*
 * audit.h - the audit log: one JSON line per request.
 *
 * Invariants: a line says what ran and how it ended (method, tool,
 * outcome, duration), never a request's arguments, which may hold file
 * contents or secrets; lines are written whole, one writer at a time, and
 * flushed at once, so a crash loses no line already written.
 */
#ifndef SG_AUDIT_H
#define SG_AUDIT_H

#include "base/err.h"

struct sg_audit;
struct sg_op;

/* Open (append) the log at path; *out is new. */
sg_err sg_audit_open(const char *path, struct sg_audit **out,
		     struct sg_errinfo *err) SG_MUST_CHECK;

/* The line for op, ended with rc.  A NULL log writes nothing. */
void sg_audit_write(struct sg_audit *a, const struct sg_op *op, sg_err rc);

/* Close and free; NULL is fine. */
void sg_audit_close(struct sg_audit *a);

#endif
