/*
 * hex.h - bytes as lowercase hexadecimal.
 *
 * Invariant: out receives exactly 2n digits and a terminating NUL, so it
 * must hold 2n + 1 bytes; nothing is allocated.
 */
#ifndef SG_HEX_H
#define SG_HEX_H

#include <stddef.h>

/* The n bytes at b as 2n lowercase hex digits into out[2n + 1]. */
void sg_hex(const void *b, size_t n, char *out);

#endif
