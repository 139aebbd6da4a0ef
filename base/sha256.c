/*
 * sha256.c - SHA-256 as FIPS 180-4 defines it; see sha256.h.
 *
 * read_file hashes every file it reads, whole, as the host does: on an
 * x86-64 processor with the SHA extensions the blocks go through them
 * (about five times the plain code's speed), chosen once at run time;
 * everywhere else, and on older processors, the plain code below runs.
 */
#include "base/sha256.h"

#include <stdbool.h>
#include <string.h>

#include "base/hex.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define SHA_NI 1
#endif

static const uint32_t k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
	0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
	0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
	0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
	0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, unsigned n)
{
	return x >> n | x << (32 - n);
}

static void compress(uint32_t h[8], const unsigned char *p)
{
	uint32_t w[64], a, b, c, d, e, f, g, hh;

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ w[i - 15] >> 3;
		uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ w[i - 2] >> 10;

		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	a = h[0], b = h[1], c = h[2], d = h[3];
	e = h[4], f = h[5], g = h[6], hh = h[7];
	for (int i = 0; i < 64; i++) {
		uint32_t t1 = hh + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) +
			      ((e & f) ^ (~e & g)) + k[i] + w[i];
		uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) +
			      ((a & b) ^ (a & c) ^ (b & c));

		hh = g, g = f, f = e, e = d + t1;
		d = c, c = b, b = a, a = t1 + t2;
	}
	h[0] += a, h[1] += b, h[2] += c, h[3] += d;
	h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

#ifdef SHA_NI
/*
 * Blocks through the SHA extensions: the state kept as ABEF and CDGH, four
 * rounds per step, each step's message words made from the four before.
 */
__attribute__((target("sha,sse4.1,ssse3"))) static void compress_ni(uint32_t h[8],
								     const unsigned char *p,
								     size_t blocks)
{
	const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
	__m128i t = _mm_loadu_si128((const __m128i *)(const void *)&h[0]);
	__m128i s1 = _mm_loadu_si128((const __m128i *)(const void *)&h[4]);
	__m128i s0, w[4], m, abef, cdgh;

	t = _mm_shuffle_epi32(t, 0xB1);
	s1 = _mm_shuffle_epi32(s1, 0x1B);
	s0 = _mm_alignr_epi8(t, s1, 8);
	s1 = _mm_blend_epi16(s1, t, 0xF0);
	for (; blocks; blocks--, p += 64) {
		abef = s0;
		cdgh = s1;
		for (int i = 0; i < 16; i++) {
			if (i < 4) {
				w[i] = _mm_shuffle_epi8(
					_mm_loadu_si128((const __m128i *)(const void *)(p + 16 * i)),
					swap);
			} else {
				m = _mm_sha256msg1_epu32(w[i % 4], w[(i - 3) % 4]);
				m = _mm_add_epi32(m, _mm_alignr_epi8(w[(i - 1) % 4], w[(i - 2) % 4], 4));
				w[i % 4] = _mm_sha256msg2_epu32(m, w[(i - 1) % 4]);
			}
			m = _mm_add_epi32(w[i % 4],
					  _mm_loadu_si128((const __m128i *)(const void *)&k[4 * i]));
			s1 = _mm_sha256rnds2_epu32(s1, s0, m);
			m = _mm_shuffle_epi32(m, 0x0E);
			s0 = _mm_sha256rnds2_epu32(s0, s1, m);
		}
		s0 = _mm_add_epi32(s0, abef);
		s1 = _mm_add_epi32(s1, cdgh);
	}
	t = _mm_shuffle_epi32(s0, 0x1B);
	s1 = _mm_shuffle_epi32(s1, 0xB1);
	s0 = _mm_blend_epi16(t, s1, 0xF0);
	s1 = _mm_alignr_epi8(s1, t, 8);
	_mm_storeu_si128((__m128i *)(void *)&h[0], s0);
	_mm_storeu_si128((__m128i *)(void *)&h[4], s1);
}

/* Whether this processor has the SHA extensions (CPUID 7.0, EBX bit 29). */
static bool have_sha_ni(void)
{
	static int known; /* 0 unknown, 1 no, 2 yes; a race only repeats the probe */
	unsigned a, b, c, d;

	if (!known)
		known = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29)) ? 2 : 1;
	return known == 2;
}
#endif

/* n whole blocks at p, by the fastest code this processor runs. */
static void compress_blocks(uint32_t h[8], const unsigned char *p, size_t blocks)
{
#ifdef SHA_NI
	if (have_sha_ni()) {
		compress_ni(h, p, blocks);
		return;
	}
#endif
	for (; blocks; blocks--, p += 64)
		compress(h, p);
}

void sg_sha256_init(struct sg_sha256 *c)
{
	static const uint32_t iv[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372,
					0xa54ff53a, 0x510e527f, 0x9b05688c,
					0x1f83d9ab, 0x5be0cd19 };

	memcpy(c->h, iv, sizeof(iv));
	c->bytes = 0;
	c->used = 0;
}

void sg_sha256_update(struct sg_sha256 *c, const void *data, size_t n)
{
	const unsigned char *p = data;

	c->bytes += n;
	if (c->used) {
		size_t take = 64 - c->used < n ? 64 - c->used : n;

		memcpy(c->block + c->used, p, take);
		c->used += take;
		p += take;
		n -= take;
		if (c->used < 64)
			return;
		compress_blocks(c->h, c->block, 1);
		c->used = 0;
	}
	/* Whole blocks straight from the input, without a copy. */
	compress_blocks(c->h, p, n / 64);
	p += n / 64 * 64;
	n %= 64;
	memcpy(c->block, p, n);
	c->used = n;
}

void sg_sha256_final(struct sg_sha256 *c, unsigned char out[SG_SHA256_LEN])
{
	uint64_t bits = c->bytes * 8;

	c->block[c->used++] = 0x80;
	if (c->used > 56) {
		memset(c->block + c->used, 0, 64 - c->used);
		compress_blocks(c->h, c->block, 1);
		c->used = 0;
	}
	memset(c->block + c->used, 0, 56 - c->used);
	for (int i = 0; i < 8; i++)
		c->block[56 + i] = (unsigned char)(bits >> (56 - 8 * i));
	compress_blocks(c->h, c->block, 1);
	for (int i = 0; i < 8; i++) {
		out[4 * i] = (unsigned char)(c->h[i] >> 24);
		out[4 * i + 1] = (unsigned char)(c->h[i] >> 16);
		out[4 * i + 2] = (unsigned char)(c->h[i] >> 8);
		out[4 * i + 3] = (unsigned char)c->h[i];
	}
}

void sg_sha256_final_hex(struct sg_sha256 *c, char out[2 * SG_SHA256_LEN + 1])
{
	unsigned char md[SG_SHA256_LEN];

	sg_sha256_final(c, md);
	sg_hex(md, sizeof(md), out);
}
