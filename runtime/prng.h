/*
 * prng: the project's pseudo-random generator, integer arithmetic only.
 *
 * xoshiro256** (Blackman and Vigna) seeded through splitmix64. Everything random in
 * ddptok (corpus, sampler, initial parameters) comes from here, so results are the same
 * on every platform and compiler; no libc rand(), no floating point in the generator.
 * The state is four 64-bit words: checkpoints store it and restore it as is.
 *
 * prng_below(n) is unbiased (Lemire's multiply-and-reject); prng_unit() returns a float
 * in [0,1) with 24 random bits (exactly representable).
 */
#ifndef DDPTOK_PRNG_H
#define DDPTOK_PRNG_H

#include <stdint.h>

#include "mix64.h"

struct prng {
	uint64_t s[4];
};

static inline uint64_t prng_splitmix64(uint64_t *x)
{
	return mix64(*x += 0x9e3779b97f4a7c15ULL);
}

/* `stream` separates independent uses of one seed (corpus, sampler, init, ...). */
static inline void prng_seed(struct prng *r, uint64_t seed, uint64_t stream)
{
	uint64_t x = seed ^ (stream * 0xd1b54a32d192ed03ULL);
	for (int i = 0; i < 4; i++)
		r->s[i] = prng_splitmix64(&x);
}

static inline uint64_t prng_rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static inline uint64_t prng_next(struct prng *r)
{
	uint64_t *s = r->s;
	uint64_t out = prng_rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = prng_rotl(s[3], 45);
	return out;
}

/* Uniform integer in [0, n), n >= 1, without modulo bias. */
static inline uint32_t prng_below(struct prng *r, uint32_t n)
{
	uint64_t m = (uint64_t)(uint32_t)(prng_next(r) >> 32) * n;
	uint32_t low = (uint32_t)m;
	if (low < n) {
		uint32_t threshold = (uint32_t)(-n) % n;
		while (low < threshold) {
			m = (uint64_t)(uint32_t)(prng_next(r) >> 32) * n;
			low = (uint32_t)m;
		}
	}
	return (uint32_t)(m >> 32);
}

/* Uniform integer in [lo, hi]. */
static inline int prng_range(struct prng *r, int lo, int hi)
{
	return lo + (int)prng_below(r, (uint32_t)(hi - lo + 1));
}

static inline float prng_unit(struct prng *r)
{
	return (float)(prng_next(r) >> 40) * (1.0f / 16777216.0f);
}

#endif
