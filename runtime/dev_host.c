/*
 * dev_host: the host (CPU) backend of the device interface.
 *
 * Device memory is host memory, "asynchronous" operations complete before returning,
 * GEMMs go to OpenBLAS's cblas_sgemm with one BLAS thread per device thread (the pool
 * supplies the parallelism, one thread per simulated device), and the element-wise
 * parts are plain loops over the formulas of kmath.h, written so that the compiler
 * vectorizes them. Every reduction runs in a fixed order, so results are identical
 * run to run and across ranks.
 */
#include "dev.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "kmath.h"

static void host_destroy(struct dev *d)
{
	free(d);
}

static int host_alloc(struct dev *d, size_t bytes, void **out, struct err *e)
{
	/* 64-byte alignment for vector loads; round up as aligned_alloc requires */
	size_t n = (bytes + 63) / 64 * 64;
	void *p = aligned_alloc(64, n ? n : 64);
	if (!p)
		return ERR(e, ERR_DEVICE, "rank %d: cannot allocate %zu bytes of host memory", d->rank,
			   bytes);
	memset(p, 0, n ? n : 64);
	*out = p;
	return ERR_OK;
}

static void host_release(struct dev *d, void *p)
{
	free(p);
}

static int host_copy(struct dev *d, void *dst, const void *src, size_t bytes, struct err *e)
{
	if (bytes)
		memmove(dst, src, bytes);
	return ERR_OK;
}

static int host_zero(struct dev *d, void *p, size_t bytes, struct err *e)
{
	memset(p, 0, bytes);
	return ERR_OK;
}

static int host_sync(struct dev *d, struct err *e)
{
	return ERR_OK;
}

static int host_gemm(struct dev *d, int trans_a, int trans_b, int m, int n, int k, float alpha,
		     const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc,
		     struct err *e)
{
	if (m <= 0 || n <= 0)
		return ERR_OK;
	if (k <= 0) {
		/* C = beta * C: BLAS implementations disagree on k == 0, do it here */
		for (int i = 0; i < m; i++)
			for (int j = 0; j < n; j++)
				c[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[(size_t)i * ldc + j];
		return ERR_OK;
	}
	cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
		    trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
	return ERR_OK;
}

static int host_embed_gather(struct dev *d, int rows, int width, int dim, const int32_t *ctx,
			     const float *table, float *x, struct err *e)
{
	for (int p = 0; p < rows; p++)
		for (int j = 0; j < width; j++)
			memcpy(x + ((size_t)p * width + j) * dim,
			       table + (size_t)ctx[(size_t)p * width + j] * dim, sizeof(float) * dim);
	return ERR_OK;
}

static int host_bias_tanh(struct dev *d, int rows, int cols, const float *bias, float *z,
			  struct err *e)
{
	for (int p = 0; p < rows; p++) {
		float *row = z + (size_t)p * cols;
		for (int j = 0; j < cols; j++)
			row[j] = km_tanh(row[j] + bias[j]);
	}
	return ERR_OK;
}

static int host_xent(struct dev *d, int rows, int cols, const float *bias, const int32_t *target,
		     float scale, float *logits, float *loss, struct err *e)
{
	for (int p = 0; p < rows; p++) {
		float *row = logits + (size_t)p * cols;
		int t = target[p];
		if (t < 0) {
			memset(row, 0, sizeof(float) * cols);
			loss[p] = 0.0f;
			continue;
		}
		float mx = km_row_max(row, bias, cols, NULL);
		float zt = row[t] + bias[t];
		for (int j = 0; j < cols; j++) /* vectorized */
			row[j] = km_exp(row[j] + bias[j] - mx);
		float s = 0.0f;
		for (int j = 0; j < cols; j++) /* fixed order */
			s += row[j];
		loss[p] = km_xent_loss(mx, s, zt);
		float inv = 1.0f / s;
		for (int j = 0; j < cols; j++)
			row[j] = km_xent_grad(row[j], inv, scale, j == t);
	}
	return ERR_OK;
}

static int host_sum(struct dev *d, int n, const float *x, double *host_out, struct err *e)
{
	double s = 0.0;
	for (int i = 0; i < n; i++)
		s += x[i];
	*host_out = s;
	return ERR_OK;
}

static int host_col_sum_acc(struct dev *d, int rows, int cols, const float *x, float *out,
			    struct err *e)
{
	for (int p = 0; p < rows; p++) {
		const float *row = x + (size_t)p * cols;
		for (int j = 0; j < cols; j++)
			out[j] += row[j];
	}
	return ERR_OK;
}

static int host_tanh_backward(struct dev *d, int n, const float *h, float *dh, struct err *e)
{
	for (int i = 0; i < n; i++)
		dh[i] = km_tanh_backward(h[i], dh[i]);
	return ERR_OK;
}

static int host_embed_backward(struct dev *d, int rows, int width, int dim, const int32_t *ctx,
			       const float *dx, float *table_grad, struct err *e)
{
	/* positions ascending, then context slots ascending: for any table row the additions
	 * happen in that order, which is the order the CUDA kernel follows too */
	for (int p = 0; p < rows; p++)
		for (int j = 0; j < width; j++) {
			float *g = table_grad + (size_t)ctx[(size_t)p * width + j] * dim;
			const float *src = dx + ((size_t)p * width + j) * dim;
			for (int t = 0; t < dim; t++)
				g[t] += src[t];
		}
	return ERR_OK;
}

static int host_scale(struct dev *d, int n, float alpha, float *x, struct err *e)
{
	for (int i = 0; i < n; i++)
		x[i] *= alpha;
	return ERR_OK;
}

static int host_sgd(struct dev *d, int n, float lr, float momentum, float weight_decay, int first,
		    float *p, const float *g, float *buf, struct err *e)
{
	for (int i = 0; i < n; i++)
		km_sgd(&p[i], g[i], &buf[i], lr, momentum, weight_decay, first);
	return ERR_OK;
}

static int host_argmax_hits(struct dev *d, int rows, int cols, const float *bias,
			    const float *logits, const int32_t *target, int64_t *host_hits,
			    struct err *e)
{
	int64_t hits = 0;
	for (int p = 0; p < rows; p++) {
		int arg;
		if (target[p] < 0)
			continue;
		km_row_max(logits + (size_t)p * cols, bias, cols, &arg);
		hits += arg == target[p];
	}
	*host_hits = hits;
	return ERR_OK;
}

static int host_count_nonfinite(struct dev *d, int n, const float *x, int64_t *bad, struct err *e)
{
	int64_t b = 0;
	for (int i = 0; i < n; i++)
		b += !km_isfinite(x[i]);
	*bad = b;
	return ERR_OK;
}

static const struct dev_ops host_ops = {
	.name = "cpu",
	.destroy = host_destroy,
	.alloc = host_alloc,
	.release = host_release,
	.upload = host_copy,
	.download = host_copy,
	.copy = host_copy,
	.zero = host_zero,
	.sync = host_sync,
	.gemm = host_gemm,
	.embed_gather = host_embed_gather,
	.bias_tanh = host_bias_tanh,
	.xent = host_xent,
	.sum = host_sum,
	.col_sum_acc = host_col_sum_acc,
	.tanh_backward = host_tanh_backward,
	.embed_backward = host_embed_backward,
	.scale = host_scale,
	.sgd = host_sgd,
	.argmax_hits = host_argmax_hits,
	.count_nonfinite = host_count_nonfinite,
};

int dev_host_create(int rank, struct dev **out, struct err *e)
{
	struct dev *d = calloc(1, sizeof *d);
	if (!d)
		return ERR(e, ERR_DEVICE, "rank %d: out of memory", rank);
	d->ops = &host_ops;
	d->backend = DEV_BACKEND_CPU;
	d->rank = rank;
	d->device_id = rank;
	/* the pool provides one thread per device: BLAS must not add its own */
	openblas_set_num_threads(1);
	*out = d;
	return ERR_OK;
}

void dev_destroy(struct dev *d)
{
	if (d && d->ops)
		d->ops->destroy(d);
}
