/*
 * dev_host_kernels: the host backend's loops (see dev_host_kernels.h), compiled once per
 * instruction set with HOST_KERNELS_VARIANT naming the build.
 *
 * The loops marked "vectorized: NAME" are the ones the vectorizer must take; a test
 * compiles this file with -fopt-info-vec and fails when one of them is left scalar.
 * They stay vectorizable under the default floating-point flags because kmath.h has no
 * branches (its selects are integer bit blends). Reductions are not reassociated: the
 * row sum of xent adds j = 0..cols-1 one after the other in every build, col_sum_acc
 * adds rows in order into each column (columns are independent lanes), and the double
 * sum stays a scalar loop.
 */
#include <string.h>

#include "dev_host_kernels.h"
#include "kmath.h"

#ifndef HOST_KERNELS_VARIANT
#error "HOST_KERNELS_VARIANT names the build (generic, avx2, avx512, scalar)"
#endif
#define HK_JOIN2(a, b) a##_##b
#define HK_JOIN(a, b) HK_JOIN2(a, b)

static int host_embed_gather(struct dev *d, int rows, int width, int dim, const int32_t *ctx,
			  const float *table, float *x, struct err *e)
{
	dev_count(d, 1, 0, 0);
	for (int p = 0; p < rows; p++)
		for (int j = 0; j < width; j++)
			memcpy(x + ((size_t)p * width + j) * dim,
			       table + (size_t)ctx[(size_t)p * width + j] * dim, sizeof(float) * dim);
	return ERR_OK;
}

static int host_bias_tanh(struct dev *d, int rows, int cols, const float *bias, float *z,
		       struct err *e)
{
	dev_count(d, 1, 0, 0);
	for (int p = 0; p < rows; p++) {
		float *row = z + (size_t)p * cols;
		for (int j = 0; j < cols; j++) /* vectorized: bias_tanh */
			row[j] = km_tanh(row[j] + bias[j]);
	}
	return ERR_OK;
}

static int host_xent(struct dev *d, int rows, int cols, const float *bias, const int32_t *target,
		  float scale, float *logits, float *loss, struct err *e)
{
	dev_count(d, 1, 0, 0);
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
		for (int j = 0; j < cols; j++) /* vectorized: xent_exp */
			row[j] = km_exp(row[j] + bias[j] - mx);
		float s = 0.0f;
		for (int j = 0; j < cols; j++) /* in order, whatever the vector width */
			s += row[j];
		loss[p] = km_xent_loss(mx, s, zt);
		float inv = 1.0f / s;
		for (int j = 0; j < cols; j++) /* vectorized: xent_grad */
			row[j] = km_xent_grad(row[j], inv, scale, j == t);
	}
	return ERR_OK;
}

/* the double sum of sum and sum_acc, i ascending */
static double sum_in_order(int n, const float *x)
{
	double s = 0.0;
	for (int i = 0; i < n; i++)
		s += x[i];
	return s;
}

static int host_sum(struct dev *d, int n, const float *x, double *host_out, struct err *e)
{
	dev_count(d, 1, 0, 1);
	*host_out = sum_in_order(n, x);
	return ERR_OK;
}

static int host_sum_acc(struct dev *d, int n, const float *x, double divisor, double *acc,
			struct err *e)
{
	if (n <= 0)
		return ERR_OK; /* as on a GPU: nothing queued */
	dev_count(d, 1, 0, 0);
	*acc += sum_in_order(n, x) / divisor;
	return ERR_OK;
}

static int host_col_sum_acc(struct dev *d, int rows, int cols, const float *x, float *out,
			 struct err *e)
{
	dev_count(d, 1, 0, 0);
	for (int p = 0; p < rows; p++) {
		const float *row = x + (size_t)p * cols;
		for (int j = 0; j < cols; j++) /* vectorized: col_sum_acc */
			out[j] += row[j];
	}
	return ERR_OK;
}

static int host_tanh_backward(struct dev *d, int n, const float *h, float *dh, struct err *e)
{
	dev_count(d, 1, 0, 0);
	for (int i = 0; i < n; i++) /* vectorized: tanh_backward */
		dh[i] = km_tanh_backward(h[i], dh[i]);
	return ERR_OK;
}

static int host_embed_backward(struct dev *d, int rows, int width, int dim, const int32_t *ctx,
			    const float *dx, float *table_grad, struct err *e)
{
	dev_count(d, 1, 0, 0);
	/* positions ascending, then context slots ascending: for any table row the additions
	 * happen in that order, which is the order the CUDA kernel follows too */
	for (int p = 0; p < rows; p++)
		for (int j = 0; j < width; j++) {
			float *g = table_grad + (size_t)ctx[(size_t)p * width + j] * dim;
			const float *src = dx + ((size_t)p * width + j) * dim;
			for (int t = 0; t < dim; t++) /* vectorized: embed_backward */
				g[t] += src[t];
		}
	return ERR_OK;
}

static int host_scale(struct dev *d, int n, float alpha, float *x, struct err *e)
{
	dev_count(d, 1, 0, 0);
	for (int i = 0; i < n; i++) /* vectorized: scale */
		x[i] *= alpha;
	return ERR_OK;
}

static int host_sgd(struct dev *d, int n, float lr, float momentum, float weight_decay, int first,
		 float *p, const float *g, float *buf, struct err *e)
{
	dev_count(d, 1, 0, 0);
	for (int i = 0; i < n; i++) /* vectorized: sgd */
		km_sgd(&p[i], g[i], &buf[i], lr, momentum, weight_decay, first);
	return ERR_OK;
}

static int host_argmax_hits(struct dev *d, int rows, int cols, const float *bias,
			 const float *logits, const int32_t *target, int64_t *host_hits,
			 struct err *e)
{
	dev_count(d, 1, 0, 1);
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
	dev_count(d, 1, 0, 1);
	int64_t b = 0;
	for (int i = 0; i < n; i++) /* vectorized: count_nonfinite */
		b += !km_isfinite(x[i]);
	*bad = b;
	return ERR_OK;
}

void HK_JOIN(host_kernels_fill, HOST_KERNELS_VARIANT)(struct dev_ops *o)
{
	o->embed_gather = host_embed_gather;
	o->bias_tanh = host_bias_tanh;
	o->xent = host_xent;
	o->sum = host_sum;
	o->sum_acc = host_sum_acc;
	o->col_sum_acc = host_col_sum_acc;
	o->tanh_backward = host_tanh_backward;
	o->embed_backward = host_embed_backward;
	o->scale = host_scale;
	o->sgd = host_sgd;
	o->argmax_hits = host_argmax_hits;
	o->count_nonfinite = host_count_nonfinite;
}
