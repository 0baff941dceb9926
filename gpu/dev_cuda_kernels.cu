/*
 * dev_cuda_kernels: the kernels of the CUDA backend (declared in dev_cuda_kernels.cuh),
 * apart from the stream, cuBLAS and memory handling of gpu/dev_cuda.cu that queues them.
 *
 * Each kernel mirrors the host function of the same name in runtime/dev_host_kernels.c,
 * with the element math of runtime/kmath.h; the module is compiled with --fmad=false so
 * that the shared formulas round exactly as they do on the host. Reductions run in an
 * order fixed by the sizes alone, never by timing, so results repeat bit for bit:
 *   xent         one block per row; the row maximum from km_row_max on per-thread
 *                chunks (a maximum does not depend on order); the sum of exponentials
 *                in the host's order j = 0..cols-1, so losses and gradients equal the
 *                host's bit for bit up to the last ulp of log()
 *   sum          two passes in double with a fixed grid and fixed trees
 *   sum_squares  the same two passes over the squares (each in double)
 *   fingerprint  the same two passes over the 64-bit terms of kmath.h, added modulo 2^64
 *                (one value in any order); 8 bytes come back to the host
 *   col_sum_acc  up to COLSUM_MIN_CHUNK rows: one thread per column adding rows in order
 *                into out[j], as the host (bit for bit; the exact-mode tree's element
 *                add is this case); more rows: two levels, each of up to COLSUM_GROUPS
 *                threads of a column adds a contiguous chunk of rows in order (the
 *                first chunk starting from out[j]), then the chunks' sums are added in
 *                chunk order: the same bits every run, not the host's
 *   tanh_backward_col_sum  k_tanh_backward, then col_sum_acc over its result (two
 *                launches, col_sum_acc's bits; the host does both in one pass)
 *   embed_backward  a stable radix sort (CUB) of the context slots by token id, over
 *                the ceil(log2 V) bits that ids below the table's V rows use; then each
 *                id's slots are added in the order gpu/gpu_rules.h fixes from their
 *                number n alone: below 128 slots one thread per (id, t) adds them in
 *                ascending slot order, i.e. positions ascending then j ascending,
 *                exactly the host's additions (bit for bit); more slots: col_sum_acc's
 *                two levels, about sqrt(n) chunks of about sqrt(n) slots each added in
 *                order by one thread per (chunk, t) into a scratch row (the first onto
 *                the gradient's value), then the chunks' sums in chunk order: the same
 *                bits every run and on every GPU, not the host's. Three kernels: the
 *                plan (per sorted slot: which chunk it starts, where the chunk's sum
 *                goes), the chunks, the fold.
 * No float atomics anywhere (integer counters only in argmax_hits).
 */
#include <stddef.h>
#include <stdint.h>

#include "dev_cuda_kernels.cuh"
#include "gpu_rules.h"
#include "kmath.h"

#define GRID_STRIDE(i, n)                                                                    \
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);              \
	     i += (size_t)gridDim.x * blockDim.x)

/* C = beta * C for k == 0 (what the host does instead of calling BLAS) */
__global__ void k_gemm_beta(int m, int n, float beta, float *c, int ldc)
{
	GRID_STRIDE(i, (size_t)m * n) {
		size_t r = i / (size_t)n, col = i % (size_t)n;
		float *p = c + r * (size_t)ldc + col;
		*p = beta == 0.0f ? 0.0f : beta * *p;
	}
}

__global__ void k_embed_gather(int rows, int width, int dim, const int32_t *ctx,
			       const float *table, float *x)
{
	size_t total = (size_t)rows * width * dim;
	GRID_STRIDE(i, total) {
		size_t slot = i / (size_t)dim, t = i % (size_t)dim;
		x[i] = table[(size_t)ctx[slot] * dim + t];
	}
}

__global__ void k_bias_tanh(int rows, int cols, const float *bias, float *z)
{
	GRID_STRIDE(i, (size_t)rows * cols) {
		z[i] = km_tanh(z[i] + bias[i % (size_t)cols]);
	}
}

/* Softmax cross-entropy of one row per block (see host_xent, line for line). */
__global__ void k_xent(int cols, const float *bias, const int32_t *target, float scale,
		       float zc, const float *class_w, float *logits, float *loss)
{
	__shared__ float s_max[ROW_THREADS];
	__shared__ float s_zt, s_inv, s_scale;
	const int p = blockIdx.x, tid = threadIdx.x;
	float *row = logits + (size_t)p * cols;
	const int t = target[p];
	if (t < 0) {
		for (int j = tid; j < cols; j += ROW_THREADS)
			row[j] = 0.0f;
		if (tid == 0)
			loss[p] = 0.0f;
		return;
	}
	/* row maximum: km_row_max over a contiguous chunk per thread, then a fixed tree */
	const int chunk = (cols + ROW_THREADS - 1) / ROW_THREADS;
	const int lo = tid * chunk, hi = min(cols, lo + chunk);
	s_max[tid] = lo < hi ? km_row_max(row + lo, bias + lo, hi - lo, NULL) : -INFINITY;
	if (tid == 0)
		s_zt = row[t] + bias[t]; /* read before the row is overwritten */
	__syncthreads();
	for (int s = ROW_THREADS / 2; s > 0; s >>= 1) {
		if (tid < s && s_max[tid + s] > s_max[tid])
			s_max[tid] = s_max[tid + s];
		__syncthreads();
	}
	const float mx = s_max[0];
	for (int j = tid; j < cols; j += ROW_THREADS)
		row[j] = km_exp(row[j] + bias[j] - mx);
	__syncthreads();
	if (tid == 0) {
		/* the host's order, j ascending, in float */
		float s = 0.0f;
#pragma unroll 8
		for (int j = 0; j < cols; j++)
			s += row[j];
		const float weight = class_w ? class_w[t] : 1.0f;
		loss[p] = km_xent_loss(mx, s, s_zt, zc, weight);
		s_inv = km_xent_inv_z(1.0f / s, mx, s, zc);
		s_scale = scale * weight;
	}
	__syncthreads();
	const float inv = s_inv, weighted = s_scale;
	for (int j = tid; j < cols; j += ROW_THREADS)
		row[j] = km_xent_grad(row[j], inv, weighted, j == t);
}

/* Fixed-shape tree over RED_THREADS values in shared memory; result in sh[0]. */
template <typename T> __device__ void block_tree_sum(T *sh)
{
	for (int s = RED_THREADS / 2; s > 0; s >>= 1) {
		__syncthreads();
		if ((int)threadIdx.x < s)
			sh[threadIdx.x] += sh[threadIdx.x + s];
	}
	__syncthreads();
}

/* what a reduction adds for x[i]; only the fingerprint reads the index */
__device__ double red_sum::of(float v, uint32_t) { return (double)v; }

/* the square in double, as the host's sum_squares takes it */
__device__ double red_sum_squares::of(float v, uint32_t) { return (double)v * (double)v; }

__device__ long long red_nonfinite::of(float v, uint32_t) { return km_isfinite(v) ? 0 : 1; }

/* unsigned: the additions wrap modulo 2^64, as the host's */
__device__ unsigned long long red_fingerprint::of(float v, uint32_t index)
{
	return km_fingerprint_term(index, km_to_bits(v));
}

/* pass 1: block b accumulates x[i] for i = b*T + tid + k*G*T (k ascending), then a tree */
template <class R>
__global__ void k_reduce_partial(size_t n, const float *x, uint32_t first, typename R::acc *part)
{
	__shared__ typename R::acc sh[RED_THREADS];
	typename R::acc acc = 0;
	GRID_STRIDE(i, n) {
		acc += R::of(x[i], first + (uint32_t)i);
	}
	sh[threadIdx.x] = acc;
	block_tree_sum(sh);
	if (threadIdx.x == 0)
		part[blockIdx.x] = sh[0];
}

/* pass 2: one block folds the partials the same way; result in out[0], or with `divisor`
 * non-zero out[0] += result / divisor (sum_acc, in the host's operation order) */
template <typename T> __global__ void k_reduce_final(int parts, const T *part, T *out, T divisor)
{
	__shared__ T sh[RED_THREADS];
	T acc = 0;
	for (int i = threadIdx.x; i < parts; i += RED_THREADS)
		acc += part[i];
	sh[threadIdx.x] = acc;
	block_tree_sum(sh);
	if (threadIdx.x == 0)
		out[0] = divisor != 0 ? out[0] + sh[0] / divisor : sh[0];
}

/* The fixed orders of every column sum here (col_sum_acc, embed_backward), one
 * implementation each. `Rows` yields the value of row p of one column. */
struct dense_rows { /* x[p * stride], x already at the column */
	const float *x;
	size_t stride;
	__device__ float operator()(int p) const { return x[(size_t)p * stride]; }
};

struct gathered_rows { /* x[idx[p] * stride]: the rows listed by idx */
	const float *x;
	const int32_t *idx;
	size_t stride;
	__device__ float operator()(int p) const { return x[(size_t)idx[p] * stride]; }
};

/* One chain: acc + rows(lo) + rows(lo + 1) + ... + rows(hi - 1), in that order. */
template <class Rows> __device__ float sum_rows_in_order(float acc, int lo, int hi, const Rows &rows)
{
	for (int p = lo; p < hi; p++)
		acc += rows(p);
	return acc;
}

/* The first level of a two-level sum into *acc_into: the first chunk adds its rows onto
 * *acc_into's value, the others start from zero. */
template <class Rows>
__device__ float chunk_sum(bool first_chunk, const float *acc_into, int lo, int hi, const Rows &rows)
{
	return sum_rows_in_order(first_chunk ? *acc_into : 0.0f, lo, hi, rows);
}

/* The second level: the chunks' sums part[0], part[stride], ... added in chunk order. */
__device__ float fold_chunks(const float *part, int chunks, size_t stride)
{
	float s = part[0];
	for (int q = 1; q < chunks; q++)
		s += part[(size_t)q * stride];
	return s;
}

/* out[j] += x[p*cols + j] for p ascending, accumulated in out's float like the host */
__global__ void k_col_sum_acc(int rows, int cols, const float *x, float *out)
{
	GRID_STRIDE(j, (size_t)cols) {
		out[j] = sum_rows_in_order(out[j], 0, rows, dense_rows{x + j, (size_t)cols});
	}
}

/* The two-level column sum: block (COLSUM_COLS x COLSUM_GROUPS) threads; thread (c, g)
 * adds rows [g*chunk, (g+1)*chunk) of column j in order (group 0 from out[j]), then
 * group 0 adds the groups' sums in group order. The order depends on rows alone. */
__global__ void k_col_sum_acc_chunks(int rows, int cols, int chunk, const float *x, float *out)
{
	__shared__ float part[COLSUM_GROUPS][COLSUM_COLS];
	const int c = threadIdx.x, g = threadIdx.y;
	const size_t j = (size_t)blockIdx.x * COLSUM_COLS + c;
	const int lo = g * chunk, hi = min(rows, lo + chunk);
	float acc = 0.0f;
	if (j < (size_t)cols)
		acc = chunk_sum(g == 0, out + j, lo, hi, dense_rows{x + j, (size_t)cols});
	part[g][c] = acc;
	__syncthreads();
	if (g == 0 && j < (size_t)cols)
		out[j] = fold_chunks(&part[0][c], (rows + chunk - 1) / chunk, COLSUM_COLS);
}

__global__ void k_tanh_backward(size_t n, const float *h, float *dh)
{
	GRID_STRIDE(i, n) {
		dh[i] = km_tanh_backward(h[i], dh[i]);
	}
}

__global__ void k_iota(int n, int32_t *v)
{
	GRID_STRIDE(i, (size_t)n) {
		v[i] = (int32_t)i;
	}
}

/* The plan of embed_backward, one thread per sorted position i (keys[0..slots) are the
 * slots' ids sorted stably): what position i does for its id (gpu_embed_plan_at,
 * gpu/gpu_rules.h: its id's run by binary search, then gpu_embed_position). */
__global__ void k_embed_plan(int slots, const int32_t *keys, int32_t *chunk_end,
			     int32_t *dest_row, int32_t *fold)
{
	GRID_STRIDE(w, (size_t)slots) {
		const int i = (int)w;
		struct gpu_embed_pos p = gpu_embed_plan_at(keys, slots, i);
		chunk_end[i] = p.chunk_end;
		dest_row[i] = p.dest_row;
		fold[i] = p.fold;
	}
}

/* The first level, one thread per (position i, column t): a position that starts a chunk
 * adds the dx rows of the chunk's slots in ascending slot order, the id's first chunk
 * onto table_grad[id, t]; an id's only chunk is stored into table_grad (the CPU backend's
 * order), the others into their row of `part`. */
__global__ void k_embed_chunks(int slots, int dim, const int32_t *keys, const int32_t *idx,
			       const int32_t *chunk_end, const int32_t *dest_row, const float *dx,
			       float *table_grad, float *part)
{
	GRID_STRIDE(w, (size_t)slots * dim) {
		const int i = (int)(w / (size_t)dim), t = (int)(w % (size_t)dim);
		const int end = chunk_end[i];
		if (!end)
			continue;
		const int32_t id = keys[i];
		const bool first = i == 0 || keys[i - 1] != id;
		float *g = table_grad + (size_t)id * dim + t;
		float s = chunk_sum(first, g, i, end, gathered_rows{dx + t, idx, (size_t)dim});
		const int row = dest_row[i];
		if (row < 0)
			*g = s;
		else
			part[(size_t)row * dim + t] = s;
	}
}

/* The second level, one thread per (position i, column t): at the first position of an
 * id added in fold[i] >= 2 chunks, their sums in chunk order into table_grad[id, t]. */
__global__ void k_embed_fold(int slots, int dim, const int32_t *keys, const int32_t *dest_row,
			     const int32_t *fold, const float *part, float *table_grad)
{
	GRID_STRIDE(w, (size_t)slots * dim) {
		const int i = (int)(w / (size_t)dim), t = (int)(w % (size_t)dim);
		const int chunks = fold[i];
		if (!chunks)
			continue;
		table_grad[(size_t)keys[i] * dim + t] =
			fold_chunks(part + (size_t)dest_row[i] * dim + t, chunks, (size_t)dim);
	}
}

__global__ void k_scale(size_t n, float alpha, float *x)
{
	GRID_STRIDE(i, n) {
		x[i] *= alpha;
	}
}

__global__ void k_sgd(size_t n, float lr, float momentum, float weight_decay, int first, float *p,
		      const float *g, float *buf)
{
	GRID_STRIDE(i, n) {
		km_sgd(&p[i], g[i], &buf[i], lr, momentum, weight_decay, first);
	}
}

/* Whether element `at` of the whole vector lies in one of a's decay ranges: a binary
 * search for the first range that ends after it (a table of a few ranges, in cache). */
__device__ static int adamw_decays(const struct dev_adamw *a, int at)
{
	int lo = 0, hi = a->n_decay;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		if (a->decay[2 * mid + 1] <= at)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < a->n_decay && a->decay[2 * lo] <= at;
}

__global__ void k_adamw(size_t n, int first, struct dev_adamw a, float *p, const float *g,
			float *m, float *v)
{
	GRID_STRIDE(i, n) {
		float wd = adamw_decays(&a, first + (int)i) ? a.wd : 0.0f;
		km_adamw(&p[i], g[i], &m[i], &v[i], a.lr, a.beta1, a.beta2, a.eps, wd, a.bc1, a.bc2);
	}
}

/* one block per row: (max, lowest index of the max) over the row, as km_row_max gives it
 * for rows without NaN; counts rows whose argmax equals the target (integer atomics
 * only: the count does not depend on their order) */
__global__ void k_argmax_hits(int cols, const float *bias, const float *logits,
			      const int32_t *target, unsigned long long *hits)
{
	__shared__ float s_m[ROW_THREADS];
	__shared__ int s_i[ROW_THREADS];
	const int p = blockIdx.x, tid = threadIdx.x;
	const int t = target[p];
	if (t < 0)
		return;
	const float *row = logits + (size_t)p * cols;
	const int chunk = (cols + ROW_THREADS - 1) / ROW_THREADS;
	const int lo = tid * chunk, hi = min(cols, lo + chunk);
	int arg = -1; /* -1: empty chunk */
	float m = 0.0f;
	if (lo < hi) {
		m = km_row_max(row + lo, bias + lo, hi - lo, &arg);
		arg += lo;
	}
	s_m[tid] = m;
	s_i[tid] = arg;
	__syncthreads();
	for (int s = ROW_THREADS / 2; s > 0; s >>= 1) {
		if (tid < s) {
			float om = s_m[tid + s];
			int oi = s_i[tid + s];
			int ci = s_i[tid];
			if (oi >= 0 && (ci < 0 || om > s_m[tid] || (om == s_m[tid] && oi < ci))) {
				s_m[tid] = om;
				s_i[tid] = oi;
			}
		}
		__syncthreads();
	}
	if (tid == 0 && s_i[0] == t)
		atomicAdd(hits, 1ULL);
}

/* x[i] / divisor, as C divides T */
template <typename T> __global__ void k_divide(size_t n, T divisor, T *x)
{
	GRID_STRIDE(i, n) {
		x[i] = x[i] / divisor;
	}
}

template <class R>
void launch_reduce_partial(unsigned int blocks, cudaStream_t stream, size_t n, const float *x,
			   uint32_t first, typename R::acc *part)
{
	CUDA_LAUNCH(k_reduce_partial<R>, blocks, RED_THREADS, 0, stream, n, x, first, part);
}

template <typename T>
void launch_reduce_final(cudaStream_t stream, int parts, const T *part, T *out, T divisor)
{
	CUDA_LAUNCH(k_reduce_final<T>, 1, RED_THREADS, 0, stream, parts, part, out, divisor);
}

template <typename T>
void launch_divide(unsigned int blocks, unsigned int threads, cudaStream_t stream, size_t n,
		   T divisor, T *x)
{
	CUDA_LAUNCH(k_divide<T>, blocks, threads, 0, stream, n, divisor, x);
}

/* the instances the backend launches (declared extern in the header) */
template void launch_reduce_partial<red_sum>(unsigned int, cudaStream_t, size_t, const float *,
					     uint32_t, double *);
template void launch_reduce_partial<red_sum_squares>(unsigned int, cudaStream_t, size_t,
						     const float *, uint32_t, double *);
template void launch_reduce_partial<red_nonfinite>(unsigned int, cudaStream_t, size_t,
						   const float *, uint32_t, long long *);
template void launch_reduce_partial<red_fingerprint>(unsigned int, cudaStream_t, size_t,
						     const float *, uint32_t, unsigned long long *);
template void launch_reduce_final<double>(cudaStream_t, int, const double *, double *, double);
template void launch_reduce_final<long long>(cudaStream_t, int, const long long *, long long *,
					     long long);
template void launch_reduce_final<unsigned long long>(cudaStream_t, int,
						      const unsigned long long *,
						      unsigned long long *, unsigned long long);
template void launch_divide<float>(unsigned int, unsigned int, cudaStream_t, size_t, float,
				   float *);
template void launch_divide<double>(unsigned int, unsigned int, cudaStream_t, size_t, double,
				    double *);
template void launch_divide<long long>(unsigned int, unsigned int, cudaStream_t, size_t,
				       long long, long long *);
