/*
 * mix64: the 64-bit mixing function of splitmix64 (Steele, Lea and Flood), a bijection
 * of 64-bit words whose every output bit depends on every input bit.
 *
 * It seeds the project's generator (prng.h) and makes the terms of the parameter
 * fingerprint (kmath.h); it compiles as C and as CUDA host and device code, so both
 * backends use this one definition.
 */
#ifndef DDPTOK_MIX64_H
#define DDPTOK_MIX64_H

#include <stdint.h>

#ifdef __CUDACC__
#define MIX64_FN static __host__ __device__ __forceinline__
#else
#define MIX64_FN static inline
#endif

/* xor-shifts and odd multipliers: each step is invertible, so distinct inputs give
 * distinct outputs */
MIX64_FN uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

#endif
