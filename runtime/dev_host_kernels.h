/*
 * dev_host_kernels: the element-wise and reduction loops of the host backend, built once
 * per instruction set.
 *
 * runtime/dev_host_kernels.c is compiled several times with different code generation
 * flags, each build exporting one fill function that sets the compute entries of a
 * `struct dev_ops` (everything but memory, sync and gemm). dev_host.c picks the widest
 * build the CPU supports. All builds give the same bits: the element formulas of kmath.h
 * are evaluated with the same float operations in every lane (no contraction into fused
 * multiply-adds, no reassociation), and every reduction adds in the order the source
 * states, whatever the vector width.
 */
#ifndef DDPTOK_DEV_HOST_KERNELS_H
#define DDPTOK_DEV_HOST_KERNELS_H

#include "ddptok_config.h"
#include "dev.h"

/* sum_squares' fixed order, the same in every build and for any thread count: the
 * vector is cut into blocks of HOST_SQUARES_BLOCK elements; in a block, element i (from
 * the block's start) goes to lane i mod HOST_SQUARES_LANES, each lane adding its squares
 * in index order; the lanes fold in halves (lane j += lane j + 8 for j < 8, then + 4,
 * + 2, + 1) into the block's sum; the block sums add in block order. A device with a
 * team sums its blocks on several threads, ranks sharing a norm each sum some of the
 * blocks (sum_squares_blocks), and the sums are added in that order. */
#define HOST_SQUARES_LANES 16
#define HOST_SQUARES_BLOCK 65536

/* SSE2, the x86-64 baseline (or the target's default vectors elsewhere) */
void host_kernels_fill_generic(struct dev_ops *o);
#if DDPTOK_HAVE_AVX2_KERNELS
/* 256-bit vectors; only on a CPU with AVX2 */
void host_kernels_fill_avx2(struct dev_ops *o);
#endif
#if DDPTOK_HAVE_AVX512_KERNELS
/* 512-bit vectors; only on a CPU with AVX-512 F, VL, BW and DQ (host_cpu_has_avx512) */
void host_kernels_fill_avx512(struct dev_ops *o);
int host_cpu_has_avx512(void);
#endif
/* not vectorized at all: the reference the tests compare the others with */
void host_kernels_fill_scalar(struct dev_ops *o);

#endif
