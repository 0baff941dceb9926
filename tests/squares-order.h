/*
 * squares-order: the CPU backend's documented order of sum_squares (docs/optimizers.md,
 * step 2), written out element by element for the tests to hold the kernels to.
 */
#ifndef DDPTOK_TEST_SQUARES_ORDER_H
#define DDPTOK_TEST_SQUARES_ORDER_H

#include <stddef.h>

/* Blocks of 65,536 elements; in a block, element i (from the block's start) is squared in
 * double and added into lane i mod 16, lanes in index order; the lanes fold in halves
 * (j += j + 8, then + 4, + 2, + 1) into the block's sum; the block sums add in block
 * order. Returns the whole; block_sums (when not NULL) receives each block's sum. */
static inline double squares_in_order(size_t n, const float *x, double *block_sums)
{
	const size_t block = 65536;
	double whole = 0.0;
	for (size_t lo = 0, b = 0; lo < n; lo += block, b++) {
		double lane[16] = {0};
		for (size_t i = lo; i < n && i < lo + block; i++)
			lane[(i - lo) % 16] += (double)x[i] * (double)x[i];
		for (int half = 8; half > 0; half /= 2)
			for (int j = 0; j < half; j++)
				lane[j] += lane[j + half];
		if (block_sums)
			block_sums[b] = lane[0];
		whole += lane[0];
	}
	return whole;
}

#endif
