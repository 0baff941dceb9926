/*
 * dev_cuda_kernels: the CUDA kernels behind the device interface's compute ops.
 *
 * Each kernel k_NAME carries out, on the GPU, what host_NAME in runtime/dev_host_kernels.c
 * does on the CPU, with the same arguments in the same order (the row count of a
 * one-block-per-row kernel is its grid). gpu/dev_cuda.cu queues them on a device's
 * stream; this header tells it the block shapes the kernels are written for and the
 * reductions they can run. CUDA only: the program reaches the backend through gpu.h.
 */
#ifndef DDPTOK_DEV_CUDA_KERNELS_CUH
#define DDPTOK_DEV_CUDA_KERNELS_CUH

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "cuda_launch.cuh"
#include "dev.h" /* struct dev_adamw */

/* Block shapes the kernels' shared arrays and trees are sized for: launch with these. */
#define ROW_THREADS 128       /* k_xent / k_argmax_hits: one block of this many per row */
#define RED_THREADS 256       /* k_reduce_partial / k_reduce_final */
#define COLSUM_COLS 32        /* k_col_sum_acc_chunks: columns of a block (one warp wide) */
#define COLSUM_GROUPS 16      /* and its row chunks, one thread row each */
#define COLSUM_MIN_CHUNK 64   /* the fewest rows a chunk adds (and the one-level limit) */

/* C = beta * C for k == 0 (what the host does instead of calling BLAS) */
__global__ void k_gemm_beta(int m, int n, float beta, float *c, int ldc);
__global__ void k_embed_gather(int rows, int width, int dim, const int32_t *ctx,
			       const float *table, float *x);
__global__ void k_bias_tanh(int rows, int cols, const float *bias, float *z);
/* grid: rows blocks of ROW_THREADS */
__global__ void k_xent(int cols, const float *bias, const int32_t *target, float scale,
		       float zc, const float *class_w, float *logits, float *loss);

/* What a reduction adds for x[i] (`of`) and in which type (`acc`); `index` is first + i. */
struct red_sum {
	typedef double acc;
	static __device__ double of(float v, uint32_t index);
};
struct red_sum_squares {
	typedef double acc;
	static __device__ double of(float v, uint32_t index);
};
struct red_nonfinite {
	typedef long long acc;
	static __device__ long long of(float v, uint32_t index);
};
struct red_fingerprint {
	typedef unsigned long long acc;
	static __device__ unsigned long long of(float v, uint32_t index);
};

/* The two passes of a reduction, for the kinds above (`T` their `acc`): block b of
 * `blocks` (of RED_THREADS) adds into part[b], then one block folds the `parts` partials
 * into out[0] (or out[0] += result / divisor for a non-zero divisor). Kernel templates
 * keep their launch stubs in the file that defines them (nvcc 13), so these launch them
 * on `stream`, as k_reduce_partial<R> and k_reduce_final<T>. */
template <class R>
void launch_reduce_partial(unsigned int blocks, cudaStream_t stream, size_t n, const float *x,
			   uint32_t first, typename R::acc *part);
template <typename T>
void launch_reduce_final(cudaStream_t stream, int parts, const T *part, T *out, T divisor);
extern template void launch_reduce_partial<red_sum>(unsigned int, cudaStream_t, size_t,
						    const float *, uint32_t, double *);
extern template void launch_reduce_partial<red_sum_squares>(unsigned int, cudaStream_t,
							    size_t, const float *, uint32_t,
							    double *);
extern template void launch_reduce_partial<red_nonfinite>(unsigned int, cudaStream_t, size_t,
							  const float *, uint32_t, long long *);
extern template void launch_reduce_partial<red_fingerprint>(unsigned int, cudaStream_t, size_t,
							    const float *, uint32_t,
							    unsigned long long *);
extern template void launch_reduce_final<double>(cudaStream_t, int, const double *, double *,
						 double);
extern template void launch_reduce_final<long long>(cudaStream_t, int, const long long *,
						    long long *, long long);
extern template void launch_reduce_final<unsigned long long>(cudaStream_t, int,
							     const unsigned long long *,
							     unsigned long long *,
							     unsigned long long);

/* col_sum_acc: rows in order, one thread per column (up to COLSUM_MIN_CHUNK rows) ... */
__global__ void k_col_sum_acc(int rows, int cols, const float *x, float *out);
/* ... or two levels, blocks of (COLSUM_COLS x COLSUM_GROUPS) threads */
__global__ void k_col_sum_acc_chunks(int rows, int cols, int chunk, const float *x, float *out);
__global__ void k_tanh_backward(size_t n, const float *h, float *dh);

/* embed_backward: the slot indices 0..n-1 (sorted along with the ids), then the plan, the
 * chunks and the fold over the sorted ids */
__global__ void k_iota(int n, int32_t *v);
__global__ void k_embed_plan(int slots, const int32_t *keys, int32_t *chunk_end,
			     int32_t *dest_row, int32_t *fold);
__global__ void k_embed_chunks(int slots, int dim, const int32_t *keys, const int32_t *idx,
			       const int32_t *chunk_end, const int32_t *dest_row, const float *dx,
			       float *table_grad, float *part);
__global__ void k_embed_fold(int slots, int dim, const int32_t *keys, const int32_t *dest_row,
			     const int32_t *fold, const float *part, float *table_grad);

__global__ void k_scale(size_t n, float alpha, float *x);
__global__ void k_sgd(size_t n, float lr, float momentum, float weight_decay, int first, float *p,
		      const float *g, float *buf);
/* all of dev_ops.adamw's elements in one launch, their decay read from a's table */
__global__ void k_adamw(size_t n, int first, struct dev_adamw a, float *p, const float *g,
			float *m, float *v);
/* grid: rows blocks of ROW_THREADS; *hits (zeroed by the caller) counts the hits */
__global__ void k_argmax_hits(int cols, const float *bias, const float *logits,
			      const int32_t *target, unsigned long long *hits);

/* The NCCL collective's average: x[i] / divisor for float, double and long long, on
 * `stream` in `blocks` blocks of `threads` (k_divide<T>, launched here as above). */
template <typename T>
void launch_divide(unsigned int blocks, unsigned int threads, cudaStream_t stream, size_t n,
		   T divisor, T *x);
extern template void launch_divide<float>(unsigned int, unsigned int, cudaStream_t, size_t,
					  float, float *);
extern template void launch_divide<double>(unsigned int, unsigned int, cudaStream_t, size_t,
					   double, double *);
extern template void launch_divide<long long>(unsigned int, unsigned int, cudaStream_t, size_t,
					      long long, long long *);

#endif
