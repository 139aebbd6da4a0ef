#include "base/ring.h"

#include "base/limits.h"

uint64_t sg_ring_oldest(uint64_t total, uint64_t retain)
{
	return total > retain ? total - retain : 0;
}

uint64_t sg_ring_max(uint64_t max)
{
	if (max == 0)
		return SG_READ_DEFAULT;
	return max > SG_READ_CAP ? SG_READ_CAP : max;
}

void sg_ring_window(uint64_t total, uint64_t retain, uint64_t offset,
		    uint64_t max, struct sg_ring_window *out)
{
	uint64_t oldest = sg_ring_oldest(total, retain);
	uint64_t n = sg_ring_max(max);

	out->truncated = false;
	if (offset >= total) {
		/* Nothing past the end: an empty window at the end, not an error. */
		out->start = out->end = total;
		return;
	}
	out->start = offset;
	if (offset < oldest) {
		out->start = oldest;
		out->truncated = true;
	}
	out->end = total - out->start > n ? out->start + n : total;
}

int sg_ring_segments(uint64_t start, uint64_t end, uint64_t retain,
		     struct sg_ring_seg out[2])
{
	uint64_t pos, len, first;

	if (retain == 0 || end <= start)
		return 0;
	if (end - start > retain)
		start = end - retain;
	len = end - start;
	pos = start % retain;
	first = retain - pos;
	out[0].pos = pos;
	if (len <= first) {
		out[0].len = len;
		return 1;
	}
	out[0].len = first;
	out[1].pos = 0;
	out[1].len = len - first;
	return 2;
}
