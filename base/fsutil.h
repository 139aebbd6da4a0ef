/*
 * fsutil.h - small file-system steps several modules need.
 *
 * Both are safe to call from any thread and set errno on failure.
 */
#ifndef SG_FSUTIL_H
#define SG_FSUTIL_H

#include <stddef.h>
#include <sys/types.h>

#include "base/buf.h"

/*
 * mkdir -p: create path and its missing parents.  Parents are made 0700
 * (they are sandgate's own), the last directory with mode.  0 or -1.
 */
int sg_mkdir_p(const char *path, mode_t mode);

/* Read fd to its end into b, bounded by b's max (SG_E_TOO_LARGE beyond);
 * SG_E_INTERNAL on a read error. */
sg_err sg_read_all(int fd, struct sg_buf *b) SG_MUST_CHECK;

/*
 * In a child between fork and exec: close every descriptor from `from` on
 * but keep (-1: none), with close_range(2), else one by one up to
 * SG_CLOSE_FDS_MAX.  Async-signal-safe.
 */
void sg_close_from(int from, int keep);

/* Write all n bytes, retrying short writes and EINTR.  0 or -1. */
int sg_write_all(int fd, const void *p, size_t n);

/*
 * Whether path names a program exec would run: 0, or the errno exec
 * would give (EACCES for a directory or a file without the x bit).
 */
int sg_program_check(const char *path);

/*
 * The first program called name in the PATH value path, into out[n]: 0,
 * or the errno exec would give (EACCES when only non-programs were found,
 * ENAMETOOLONG).  Relative and empty entries are skipped: they would be
 * resolved against a working directory nobody chose.
 */
int sg_program_find(const char *name, const char *path, char *out, size_t n);

#endif
