/*
 * gpt_kernels: the GPT's operations on CUDA (see gpt_kernels.h).
 *
 * Every kernel gives the host's bits (compiled with --fmad=false, as the rest of the
 * backend): the element-wise ones apply the kmath.h formula to each element; the ones
 * that reduce keep the host's order by giving each sum to one thread: a thread per row
 * for LayerNorm's statistics and dx and for the softmax rows (of every head), a thread
 * per column for LayerNorm's dw and db (rows ascending, starting from the value already
 * there). No atomics. Each operation is queued on the device's stream and does not wait.
 */
#include "gpt_kernels.h"

#include <cuda_runtime.h>

extern "C" {
#include "gpu.h"
}
#include "cuda_launch.cuh"
#include "dev_cuda.h"
#include "kmath.h"

#define GPT_THREADS 256
#define GPT_MAX_BLOCKS 65536

static unsigned int blocks_for(size_t n)
{
	size_t b = (n + GPT_THREADS - 1) / GPT_THREADS;
	return (unsigned int)(b < GPT_MAX_BLOCKS ? b : GPT_MAX_BLOCKS);
}

#define GPT_STRIDE(i, n)                                                                     \
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);              \
	     i += (size_t)gridDim.x * blockDim.x)

/* selects d's GPU on this thread and clears a stale launch error (as dev_cuda.cu does) */
static int gpt_enter(struct dev *d, struct err *e)
{
	cudaError_t st = cudaSetDevice(d->device_id);
	if (st != cudaSuccess)
		return gpu_cuda_error(e, __FILE__, __LINE__, (int)st, "cudaSetDevice", d->rank,
				      d->device_id);
	(void)cudaGetLastError();
	return ERR_OK;
}

/* after a launch: a configuration error shows here; counts the launch */
static int gpt_launched(struct dev *d, const char *what, struct err *e)
{
	cudaError_t st = cudaGetLastError();
	if (st != cudaSuccess)
		return gpu_cuda_error(e, __FILE__, __LINE__, (int)st, what, d->rank, d->device_id);
	dev_count(d, 1, 0, 0);
	return ERR_OK;
}

#define GPT_LAUNCH(d, e, kernel, n_threads, ...)                                             \
	do {                                                                                 \
		int rc_ = gpt_enter((d), (e));                                               \
		if (rc_ != ERR_OK)                                                           \
			return rc_;                                                          \
		CUDA_LAUNCH(kernel, blocks_for(n_threads), GPT_THREADS, 0,                   \
			    cuda_dev_of(d)->stream, __VA_ARGS__);                            \
		return gpt_launched((d), "launch of " #kernel, (e));                         \
	} while (0)

/* ---- kernels ---- */

__global__ void k_embed_pos(int rows, int dim, const int32_t *ids, const int32_t *pos,
			    const float *wte, const float *wpe, float *x)
{
	GPT_STRIDE(i, (size_t)rows * dim) {
		size_t p = i / (size_t)dim, j = i % (size_t)dim;
		x[i] = wte[(size_t)ids[p] * dim + j] + wpe[(size_t)pos[p] * dim + j];
	}
}

__global__ void k_bias_add(int rows, int cols, const float *bias, float *x)
{
	GPT_STRIDE(i, (size_t)rows * cols) {
		x[i] += bias[i % (size_t)cols];
	}
}

__global__ void k_layernorm(int rows, int cols, const float *x, const float *w, const float *b,
			    float *out, float *mean, float *rstd)
{
	GPT_STRIDE(p, (size_t)rows) {
		const float *xr = x + p * cols;
		float *o = out + p * cols, m, r;
		km_ln_stats(xr, cols, &m, &r);
		mean[p] = m;
		rstd[p] = r;
		for (int j = 0; j < cols; j++)
			o[j] = km_ln_hat(xr[j], m, r) * w[j] + b[j];
	}
}

__global__ void k_layernorm_back_dx(int rows, int cols, const float *x, const float *w,
				    const float *mean, const float *rstd, const float *dout,
				    float *dx)
{
	GPT_STRIDE(p, (size_t)rows) {
		const float *xr = x + p * cols, *g = dout + p * cols;
		float *dxr = dx + p * cols, a, b;
		km_ln_back_means(xr, w, g, cols, mean[p], rstd[p], &a, &b);
		for (int j = 0; j < cols; j++)
			dxr[j] += km_ln_back_dx(xr[j], w[j], g[j], mean[p], rstd[p], a, b);
	}
}

__global__ void k_layernorm_back_dw(int rows, int cols, const float *x, const float *mean,
				    const float *rstd, const float *dout, float *dw, float *db)
{
	GPT_STRIDE(j, (size_t)cols) {
		float sw = dw[j], sb = db[j];
		for (int p = 0; p < rows; p++) {
			size_t k = (size_t)p * cols + j;
			sw += dout[k] * km_ln_hat(x[k], mean[p], rstd[p]);
			sb += dout[k];
		}
		dw[j] = sw;
		db[j] = sb;
	}
}

__global__ void k_gelu(int n, const float *x, float *out)
{
	GPT_STRIDE(i, (size_t)n) {
		out[i] = km_gelu(x[i]);
	}
}

__global__ void k_gelu_backward(int n, const float *x, float *dout)
{
	GPT_STRIDE(i, (size_t)n) {
		dout[i] = km_gelu_backward(x[i], dout[i]);
	}
}

/* one thread per row of every head: row r is head r / n's row r % n */
__global__ void k_causal_softmax(int heads, int n, size_t stride, float scale, float *s)
{
	GPT_STRIDE(r, (size_t)heads * n) {
		size_t h = r / n, i = r % n;
		km_causal_softmax_row(s + h * stride + i * n, (int)i, n, scale);
	}
}

__global__ void k_causal_softmax_backward(int heads, int n, size_t stride, float scale,
					  const float *p, float *dp)
{
	GPT_STRIDE(r, (size_t)heads * n) {
		size_t h = r / n, i = r % n, row = h * stride + i * n;
		km_causal_softmax_back_row(p + row, dp + row, (int)i, n, scale);
	}
}

/* ---- operations ---- */

int gpt_cu_embed_pos(struct dev *d, int rows, int dim, const int32_t *ids, const int32_t *pos,
		     const float *wte, const float *wpe, float *x, struct err *e)
{
	if (rows <= 0 || dim <= 0)
		return ERR_OK;
	GPT_LAUNCH(d, e, k_embed_pos, (size_t)rows * dim, rows, dim, ids, pos, wte, wpe, x);
}

int gpt_cu_bias_add(struct dev *d, int rows, int cols, const float *bias, float *x,
		    struct err *e)
{
	if (rows <= 0 || cols <= 0)
		return ERR_OK;
	GPT_LAUNCH(d, e, k_bias_add, (size_t)rows * cols, rows, cols, bias, x);
}

int gpt_cu_layernorm(struct dev *d, int rows, int cols, const float *x, const float *w,
		     const float *b, float *out, float *mean, float *rstd, struct err *e)
{
	if (rows <= 0 || cols <= 0)
		return ERR_OK;
	GPT_LAUNCH(d, e, k_layernorm, (size_t)rows, rows, cols, x, w, b, out, mean, rstd);
}

int gpt_cu_layernorm_backward(struct dev *d, int rows, int cols, const float *x,
			      const float *w, const float *mean, const float *rstd,
			      const float *dout, float *dx, float *dw, float *db, struct err *e)
{
	if (rows <= 0 || cols <= 0)
		return ERR_OK;
	int rc = gpt_enter(d, e);
	if (rc != ERR_OK)
		return rc;
	CUDA_LAUNCH(k_layernorm_back_dx, blocks_for((size_t)rows), GPT_THREADS, 0,
		    cuda_dev_of(d)->stream, rows, cols, x, w, mean, rstd, dout, dx);
	if ((rc = gpt_launched(d, "launch of k_layernorm_back_dx", e)) != ERR_OK)
		return rc;
	GPT_LAUNCH(d, e, k_layernorm_back_dw, (size_t)cols, rows, cols, x, mean, rstd, dout, dw,
		   db);
}

int gpt_cu_gelu(struct dev *d, int n, const float *x, float *out, struct err *e)
{
	if (n <= 0)
		return ERR_OK;
	GPT_LAUNCH(d, e, k_gelu, (size_t)n, n, x, out);
}

int gpt_cu_gelu_backward(struct dev *d, int n, const float *x, float *dout, struct err *e)
{
	if (n <= 0)
		return ERR_OK;
	GPT_LAUNCH(d, e, k_gelu_backward, (size_t)n, n, x, dout);
}

int gpt_cu_causal_softmax(struct dev *d, int heads, int n, size_t stride, float scale,
			  float *s, struct err *e)
{
	if (heads <= 0 || n <= 0)
		return ERR_OK;
	GPT_LAUNCH(d, e, k_causal_softmax, (size_t)heads * n, heads, n, stride, scale, s);
}

int gpt_cu_causal_softmax_backward(struct dev *d, int heads, int n, size_t stride,
				   float scale, const float *p, float *dp, struct err *e)
{
	if (heads <= 0 || n <= 0)
		return ERR_OK;
	GPT_LAUNCH(d, e, k_causal_softmax_backward, (size_t)heads * n, heads, n, stride, scale,
		   p, dp);
}
