/*
 * targz.h - a gzip'd ustar archive in memory: how Vercel's fs/write takes
 * files (one .tar.gz body, entries named relative to the x-cwd header).
 *
 * Invariants: the archive is built whole in the caller's buffer (its max
 * bounds it: SG_E_TOO_LARGE beyond); names are at most 100 bytes or split
 * at a slash into ustar's prefix (155) and name (100), and a name that
 * fits neither way is SG_E_INVALID_ARGUMENT, never a long-name extension
 * the receiver may not read.  Pure: no I/O.
 */
#ifndef SG_TARGZ_H
#define SG_TARGZ_H

#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"
#include "base/err.h"

struct sg_targz_entry {
	const char *name;  /* relative: "tmp/x/y" */
	unsigned mode;     /* 0644, 0700 ... */
	const void *data;  /* borrowed */
	size_t len;
	bool dir;          /* a directory (len 0): Docker's archive PUT makes it */
	unsigned uid, gid; /* the owner a receiver that keeps owners gives it (Docker) */
};

/* The n entries as one gzip'd tar into out (appended). */
sg_err sg_targz(const struct sg_targz_entry *e, size_t n, struct sg_buf *out) SG_MUST_CHECK;

#endif
