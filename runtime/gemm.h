/*
 * gemm: the one sgemm entry of the host backend, and which implementation it runs.
 *
 * Two implementations can sit behind it: oneDNN's dnnl_sgemm (where the build found
 * libdnnl; its JIT kernels are chosen for the CPU's instruction set when the library
 * loads) and OpenBLAS's cblas_sgemm (its kernel is chosen from the CPU model it knows,
 * see blas_core.h). A process runs one of them, chosen once before its first GEMM:
 * devices.gemm = auto picks oneDNN where it is built in and passes the determinism check
 * below, OpenBLAS otherwise; onednn and openblas ask for one. The two round differently,
 * so the implementation is part of what a result's bits depend on (checkpoints record it,
 * a resume under another one is refused).
 *
 * Every call runs on the calling thread alone (the host backend's ranks and teams are
 * the parallelism): both libraries are kept at one thread.
 *
 * The determinism check: the host backend splits a GEMM by whole blocks of rows of C
 * (gemm_row_block) over a rank's threads (devices.threads), and promises the same bits
 * for any thread count and any run. An implementation qualifies only if, on this CPU, a
 * GEMM cut into those blocks gives the bits of the whole one and a second call the bits
 * of the first, in every transposition the backend uses.
 */
#ifndef DDPTOK_GEMM_H
#define DDPTOK_GEMM_H

#include <stddef.h>

#include "err.h"

enum gemm_impl {
	GEMM_AUTO = 0,     /* the fastest correct one here (see above) */
	GEMM_ONEDNN = 1,   /* dnnl_sgemm */
	GEMM_OPENBLAS = 2, /* cblas_sgemm */
};
#define GEMM_CHOICES "auto|onednn|openblas" /* in enum order */

/* The rows of C in a block of `impl` (GEMM_ONEDNN or GEMM_OPENBLAS): a GEMM cut into
 * parts of whole blocks gives the bits of the whole one. */
int gemm_row_block(enum gemm_impl impl);
/* "auto", "onednn" or "openblas" */
const char *gemm_impl_name(enum gemm_impl impl);
/* Whether this build links oneDNN. */
int gemm_have_onednn(void);
/* Chooses the process's implementation (want: enum gemm_impl). ERR_CONFIG when onednn is
 * asked for and not built in, or fails the determinism check; ERR_CONFIG when another
 * implementation was already chosen in this process (one per process). why (may be NULL)
 * says how auto decided. */
int gemm_select(int want, char *why, size_t cap, struct err *e);
/* The process's implementation (GEMM_ONEDNN or GEMM_OPENBLAS): the chosen one, or auto's
 * choice, made on the first call, when gemm_select was never called. */
enum gemm_impl gemm_chosen(void);
/* Whether `impl` gives the same bits in row blocks as whole and from call to call on
 * this CPU (1) or not (0; also for oneDNN where it is not built in). */
int gemm_deterministic(enum gemm_impl impl);
/* The implementation and its kernel in words, e.g. "onednn 2.6.3 (JIT kernels for
 * avx512_core_amx)" or "openblas (OpenBLAS 0.3.21 ..., kernel SkylakeX)". */
void gemm_describe(enum gemm_impl impl, char *out, size_t cap);

/* C[m x n] = alpha op(A) op(B) + beta C, row-major, op transposing when trans_* is
 * nonzero (BLAS's conventions, m, n, k > 0), by the process's implementation. */
void gemm_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
		int lda, const float *b, int ldb, float beta, float *c, int ldc);
/* The same by a named implementation (GEMM_ONEDNN or GEMM_OPENBLAS; oneDNN falls back to
 * OpenBLAS where it is not built in): for measurements and checks, never for results. */
void gemm_sgemm_by(enum gemm_impl impl, int trans_a, int trans_b, int m, int n, int k,
		   float alpha, const float *a, int lda, const float *b, int ldb, float beta,
		   float *c, int ldc);
/* GFLOP/s of the one-thread GEMM C[m x n] = A[m x k] B[n x k]^T by `impl` over about
 * `seconds` (after one untimed call); 0 when the operands cannot be allocated. */
double gemm_rate(enum gemm_impl impl, int m, int n, int k, double seconds);

#endif
