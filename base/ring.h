/*
 * ring.h - absolute byte offsets over a bounded, circular store.
 *
 * A process's output is one stream addressed by absolute byte offset from
 * the process start (docs/protocol.md section 8).  Its spool keeps only the
 * newest `retain` bytes: the byte at absolute offset o lives at position
 * o % retain of a file of at most `retain` bytes, so when `total` bytes
 * have been produced the retained range is [max(0, total - retain), total).
 * Everything here is pure arithmetic on those numbers, which is what lets
 * process/read be computed, tested and re-checked without touching a file.
 *
 * Invariants: every offset is a raw byte count (uint64_t); a window never
 * reaches past `total` nor before the oldest retained byte; a window maps
 * to at most two contiguous segments of the circular file.  A retain of 0
 * means nothing is kept.
 */
#ifndef SG_RING_H
#define SG_RING_H

#include <stdbool.h>
#include <stdint.h>

/* The bytes [start, end) a read returns, and whether older ones were lost. */
struct sg_ring_window {
	uint64_t start;
	uint64_t end;
	bool truncated; /* start > the offset asked for: it was dropped */
};

/* One contiguous run of the circular file: len bytes at position pos. */
struct sg_ring_seg {
	uint64_t pos;
	uint64_t len;
};

/* The oldest retained offset: max(0, total - retain). */
uint64_t sg_ring_oldest(uint64_t total, uint64_t retain);

/*
 * process/read's MaxBytes as it is applied: 0 means SG_READ_DEFAULT, and
 * anything above SG_READ_CAP is SG_READ_CAP.
 */
uint64_t sg_ring_max(uint64_t max);

/*
 * The window a read of at most `max` bytes (0: the default, see
 * sg_ring_max) from `offset` gets when `total` bytes were produced and the
 * newest `retain` are kept.  An offset older than the oldest retained byte
 * starts at that byte with truncated set; an offset at or past total gives
 * the empty window [total, total).  Fills *out; never fails.
 */
void sg_ring_window(uint64_t total, uint64_t retain, uint64_t offset,
		    uint64_t max, struct sg_ring_window *out);

/*
 * Map the stream bytes [start, end) onto the circular file of `retain`
 * bytes.  When the range is longer than retain, only its newest retain
 * bytes are mapped (that is what a writer keeps of a long chunk, so the
 * caller skips the first end - start - retain bytes of its data).  Fills
 * out[0] and, when the range wraps around the end of the file, out[1];
 * returns how many segments it filled (0 for an empty range or retain 0).
 */
int sg_ring_segments(uint64_t start, uint64_t end, uint64_t retain,
		     struct sg_ring_seg out[2]);

#endif
