/*
 * gemmutil: what the GEMM suites share: random operands, and running a test under one
 * GEMM implementation (runtime/gemm.h) while saying which.
 */
#ifndef DDPTOK_GEMMUTIL_H
#define DDPTOK_GEMMUTIL_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gemm.h"
#include "prng.h"

/* n floats in [-0.5, 0.5) from `seed` (the caller frees them) */
static inline float *gemmutil_floats(size_t n, uint64_t seed)
{
	float *x = malloc(n * sizeof *x);
	ck_assert_ptr_nonnull(x);
	uint64_t st = seed;
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(prng_splitmix64(&st) >> 40) / (float)(1 << 24) - 0.5f;
	return x;
}

/* Whether implementation `impl` (GEMM_ONEDNN or GEMM_OPENBLAS) is built in, said on the
 * test's output as `suite`'s; with `select`, it becomes this process's GEMM. 0: skip. */
static inline int gemmutil_under(int impl, const char *suite, int select)
{
	struct err e;
	char what[256];
	err_clear(&e);
	if (impl == GEMM_ONEDNN && !gemm_have_onednn()) {
		printf("%s: onednn not built in, skipped\n", suite);
		return 0;
	}
	if (select)
		ck_assert_int_eq(gemm_select(impl, NULL, 0, &e), ERR_OK);
	gemm_describe(impl, what, sizeof what);
	printf("%s: GEMMs under %s\n", suite, what);
	return 1;
}

#endif
