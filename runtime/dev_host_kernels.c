/*
 * dev_host_kernels: the host backend's loops (see dev_host_kernels.h), compiled once per
 * instruction set with HOST_KERNELS_VARIANT naming the build.
 *
 * The loops marked "vectorized: NAME" are the ones the vectorizer must take; a test
 * compiles this file with -fopt-info-vec and fails when one of them is left scalar.
 * They stay vectorizable under the default floating-point flags because kmath.h has no
 * branches (its selects are integer bit blends). Reductions are not reassociated: the
 * row sum of xent adds j = 0..cols-1 one after the other in every build, col_sum_acc
 * and tanh_backward_col_sum add rows in order into each column (columns are independent
 * lanes), and the double sum stays a scalar loop. xent's row sums and LayerNorm's
 * row statistics and backward means run several rows side by side, each in its order,
 * and xent's row maximum compares columns in lanes, which finds the same maximum. The
 * fingerprint's sum is of integers modulo 2^64, one value in any order: its lanes may
 * split it.
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

/* columns compared at once by row_max_value, rows summed at once by host_xent */
#define XENT_LANES 16
#define XENT_ROWS 8
/* XENT_LANES floats, and as many lane masks, in GCC's vector extension: the compiler
 * splits them into the build's vector registers */
typedef float xent_lanes __attribute__((vector_size(4 * XENT_LANES)));
typedef int32_t xent_masks __attribute__((vector_size(4 * XENT_LANES)));

/* The largest row[j] + bias[j] with the bits km_row_max gives (which keeps the first of
 * equal maxima, NaNs after the first column never win): XENT_LANES running maxima over
 * interleaved columns, each replaced only by a larger value as in the scan, then merged
 * in lane order and the tail scanned. Equal floats differ in bits only as +0 and -0, so
 * the order matters only for a zero maximum, which goes back to the plain scan. */
static float row_max_value(const float *row, const float *bias, int n)
{
	float m0 = row[0] + bias[0], lane[XENT_LANES];
	int j = 1;
	xent_lanes most = {0};
	most += m0;
	for (; j + XENT_LANES <= n; j += XENT_LANES) {
		xent_lanes v, b;
		memcpy(&v, row + j, sizeof v);
		memcpy(&b, bias + j, sizeof b);
		v += b;
		xent_masks larger = v > most;
		most = (xent_lanes)(((xent_masks)v & larger) | ((xent_masks)most & ~larger));
	}
	memcpy(lane, &most, sizeof lane);
	float m = m0;
	for (int l = 0; l < XENT_LANES; l++)
		m = km_select(km_mask(lane[l] > m), lane[l], m);
	for (; j < n; j++) {
		float v = row[j] + bias[j];
		m = km_select(km_mask(v > m), v, m);
	}
	return m == 0.0f ? km_row_max(row, bias, n, NULL) : m;
}

/* s[r] = the sum of row r's cols values, j = 0..cols-1 in order, for `rows` rows: a full
 * block of XENT_ROWS rows is summed side by side (each sum keeps its order; the rows only
 * give the CPU independent additions), a smaller one row after row */
static void row_sums_in_order(int rows, int cols, const float *x, float *s)
{
	float acc[XENT_ROWS] = {0};
	if (rows == XENT_ROWS) {
		for (int j = 0; j < cols; j++)
			for (int r = 0; r < XENT_ROWS; r++)
				acc[r] += x[(size_t)r * cols + j];
	} else {
		for (int r = 0; r < rows; r++)
			for (int j = 0; j < cols; j++)
				acc[r] += x[(size_t)r * cols + j];
	}
	for (int r = 0; r < rows; r++)
		s[r] = acc[r];
}

/* Rows p0..p0+rows-1 (rows <= XENT_ROWS) of host_xent: per row, the softmax numerators
 * in place of the logits, then their sums, then the loss and the gradient. */
static void xent_rows(int p0, int rows, int cols, const float *bias, const int32_t *target,
		      float scale, float zc, const float *class_w, float *logits, float *loss)
{
	float mx[XENT_ROWS], zt[XENT_ROWS], sum[XENT_ROWS];
	float *block = logits + (size_t)p0 * cols;
	for (int r = 0; r < rows; r++) {
		float *row = block + (size_t)r * cols;
		int t = target[p0 + r];
		if (t < 0) {
			memset(row, 0, sizeof(float) * cols);
			continue;
		}
		mx[r] = row_max_value(row, bias, cols);
		zt[r] = row[t] + bias[t];
		float m = mx[r];
		for (int j = 0; j < cols; j++) /* vectorized: xent_exp */
			row[j] = km_exp(row[j] + bias[j] - m);
	}
	row_sums_in_order(rows, cols, block, sum);
	for (int r = 0; r < rows; r++) {
		float *row = block + (size_t)r * cols;
		int t = target[p0 + r];
		if (t < 0) {
			loss[p0 + r] = 0.0f;
			continue;
		}
		float weight = class_w ? class_w[t] : 1.0f, weighted = scale * weight;
		loss[p0 + r] = km_xent_loss(mx[r], sum[r], zt[r], zc, weight);
		float inv = km_xent_inv_z(1.0f / sum[r], mx[r], sum[r], zc);
		for (int j = 0; j < cols; j++) /* vectorized: xent_grad */
			row[j] = km_xent_grad(row[j], inv, weighted, j == t);
	}
}

static int host_xent(struct dev *d, int rows, int cols, const float *bias, const int32_t *target,
		  float scale, float zc, const float *class_w, float *logits, float *loss,
		  struct err *e)
{
	dev_count(d, 1, 0, 0);
	for (int p = 0; p < rows; p += XENT_ROWS)
		xent_rows(p, rows - p < XENT_ROWS ? rows - p : XENT_ROWS, cols, bias, target, scale,
			  zc, class_w, logits, loss);
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

/* sum_squares' lanes (dev_host_kernels.h) in the widest double vectors of the build: 16
 * / SQUARES_VEC accumulators, each independent, so that the additions do not wait on one
 * another as a single chain does (a block ran 2-3 times faster); which vector holds a
 * lane changes with the build, the lane's additions do not. */
#if defined(__AVX512F__)
#define SQUARES_VEC 8
#elif defined(__AVX__)
#define SQUARES_VEC 4
#else
#define SQUARES_VEC 2
#endif
typedef double squares_dvec __attribute__((vector_size(SQUARES_VEC * sizeof(double))));
typedef float squares_fvec __attribute__((vector_size(SQUARES_VEC * sizeof(float))));

/* the squares of one block (at most HOST_SQUARES_BLOCK elements) in sum_squares' lanes:
 * element i into lane i mod HOST_SQUARES_LANES, in index order; then the lanes folded in
 * halves */
static double block_squares(int n, const float *x)
{
	squares_dvec acc[HOST_SQUARES_LANES / SQUARES_VEC] = {{0}};
	double lane[HOST_SQUARES_LANES];
	int i = 0;
	for (; i + HOST_SQUARES_LANES <= n; i += HOST_SQUARES_LANES)
		for (int k = 0; k < HOST_SQUARES_LANES / SQUARES_VEC; k++) {
			squares_fvec f;
			memcpy(&f, x + i + k * SQUARES_VEC, sizeof f);
			squares_dvec d = __builtin_convertvector(f, squares_dvec);
			acc[k] += d * d;
		}
	memcpy(lane, acc, sizeof lane);
	for (; i < n; i++)
		lane[i % HOST_SQUARES_LANES] += (double)x[i] * (double)x[i];
	for (int half = HOST_SQUARES_LANES / 2; half > 0; half /= 2)
		for (int j = 0; j < half; j++)
			lane[j] += lane[j + half];
	return lane[0];
}

/* block b of sum_squares' order over x[0..n) (n > b HOST_SQUARES_BLOCK) */
static double square_block(int n, const float *x, int b)
{
	size_t first = (size_t)b * HOST_SQUARES_BLOCK, len = (size_t)n - first;
	return block_squares(len < HOST_SQUARES_BLOCK ? (int)len : HOST_SQUARES_BLOCK, x + first);
}

/* the blocks' sums added in block order: the host's order of sum_squares */
static int host_sum_squares(struct dev *d, int n, const float *x, double *host_out,
			    struct err *e)
{
	double s = 0.0;
	dev_count(d, 1, 0, 1);
	for (int b = 0; (size_t)b * HOST_SQUARES_BLOCK < (size_t)(n > 0 ? n : 0); b++)
		s += square_block(n, x, b);
	*host_out = s;
	return ERR_OK;
}

static int host_sum_squares_blocks(struct dev *d, int n, const float *x, int b_lo, int b_hi,
				   double *host_out, struct err *e)
{
	dev_count(d, 1, 0, 1);
	for (int b = b_lo; b < b_hi; b++)
		host_out[b - b_lo] = square_block(n, x, b);
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

/* dz = km_tanh_backward(h, dh) in place on dh, and out[j] += dz in row order: the column
 * sums of host_col_sum_acc over the new dh, in the same pass */
static int host_tanh_backward_col_sum(struct dev *d, int rows, int cols, const float *h,
				       float *dh, float *out, struct err *e)
{
	dev_count(d, 1, 0, 0);
	for (int p = 0; p < rows; p++) {
		const float *hrow = h + (size_t)p * cols;
		float *row = dh + (size_t)p * cols;
		for (int j = 0; j < cols; j++) { /* vectorized: tanh_backward_col_sum */
			float z = km_tanh_backward(hrow[j], row[j]);
			row[j] = z;
			out[j] += z;
		}
	}
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

/* AdamW on n elements that all decay by wd (0 for none) */
static void adamw_piece(int n, const struct dev_adamw *a, float wd, float *p, const float *g,
			float *m, float *v)
{
	for (int i = 0; i < n; i++) /* vectorized: adamw */
		km_adamw(&p[i], g[i], &m[i], &v[i], a->lr, a->beta1, a->beta2, a->eps, wd, a->bc1,
			 a->bc2);
}

/* The elements [first, first + n) of the whole vector, piece by piece: the gaps between
 * the decay ranges without decay, the ranges with it. */
static int host_adamw(struct dev *d, int n, int first, const struct dev_adamw *a, float *p,
		      const float *g, float *m, float *v, struct err *e)
{
	dev_count(d, 1, 0, 0);
	int k = 0, end = first + n;
	while (k < a->n_decay && a->decay[2 * k + 1] <= first) /* ranges that end before */
		k++;
	for (int at = first; at < end;) {
		int decays = k < a->n_decay && a->decay[2 * k] <= at;
		int stop = decays ? a->decay[2 * k + 1] : k < a->n_decay ? a->decay[2 * k] : end;
		stop = stop < end ? stop : end;
		size_t i = (size_t)(at - first);
		adamw_piece(stop - at, a, decays ? a->wd : 0.0f, p + i, g + i, m + i, v + i);
		k += decays;
		at = stop;
	}
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

static int host_fingerprint(struct dev *d, int n, const float *x, int first,
			    uint64_t *host_out, struct err *e)
{
	dev_count(d, 1, 0, 1);
	uint64_t h = 0;
	/* not marked for the vectorizer test: the AVX2 and AVX-512 builds vectorize it, the
	 * baseline's cost model keeps its 64-bit multiplies scalar */
	for (int i = 0; i < n; i++)
		h += km_fingerprint_term((uint32_t)first + (uint32_t)i, km_to_bits(x[i]));
	*host_out = h;
	return ERR_OK;
}

/* ---- the GPT model's operations ---- */

static int host_embed_pos(struct dev *d, int rows, int dim, const int32_t *ids,
			  const int32_t *pos, const float *wte, const float *wpe, float *x,
			  struct err *e)
{
	dev_count(d, 1, 0, 0);
	for (int p = 0; p < rows; p++) {
		const float *t = wte + (size_t)ids[p] * dim, *q = wpe + (size_t)pos[p] * dim;
		float *row = x + (size_t)p * dim;
		for (int j = 0; j < dim; j++) /* vectorized: embed_pos */
			row[j] = t[j] + q[j];
	}
	return ERR_OK;
}

static int host_bias_add(struct dev *d, int rows, int cols, const float *bias, float *x,
			 struct err *e)
{
	dev_count(d, 1, 0, 0);
	for (int p = 0; p < rows; p++) {
		float *row = x + (size_t)p * cols;
		for (int j = 0; j < cols; j++) /* vectorized: bias_add */
			row[j] += bias[j];
	}
	return ERR_OK;
}

/* km_ln_stats of `rows` rows (rows <= XENT_ROWS) from row p0 into mean and rstd: a full
 * block of XENT_ROWS rows side by side, each row's two sums j = 0..cols-1 in order, a
 * smaller one row after row */
static void ln_stats_rows(int p0, int rows, int cols, const float *x, float *mean, float *rstd)
{
	const float *xb = x + (size_t)p0 * cols;
	float s[XENT_ROWS] = {0}, v[XENT_ROWS] = {0}, m[XENT_ROWS];
	if (rows < XENT_ROWS) {
		for (int k = 0; k < rows; k++)
			km_ln_stats(xb + (size_t)k * cols, cols, &mean[p0 + k], &rstd[p0 + k]);
		return;
	}
	for (int j = 0; j < cols; j++)
		for (int k = 0; k < XENT_ROWS; k++)
			s[k] += xb[(size_t)k * cols + j];
	for (int k = 0; k < XENT_ROWS; k++)
		m[k] = s[k] / (float)cols;
	for (int j = 0; j < cols; j++)
		for (int k = 0; k < XENT_ROWS; k++) {
			float c = xb[(size_t)k * cols + j] - m[k];
			v[k] += c * c;
		}
	for (int k = 0; k < XENT_ROWS; k++) {
		mean[p0 + k] = m[k];
		rstd[p0 + k] = km_ln_rstd(v[k], cols);
	}
}

/* each block's statistics (ln_stats_rows), then its rows normalized */
static int host_layernorm(struct dev *d, int rows, int cols, const float *x, const float *w,
			  const float *b, float *out, float *mean, float *rstd, struct err *e)
{
	dev_count(d, 1, 0, 0);
	for (int p0 = 0; p0 < rows; p0 += XENT_ROWS) {
		int block = rows - p0 < XENT_ROWS ? rows - p0 : XENT_ROWS;
		ln_stats_rows(p0, block, cols, x, mean, rstd);
		for (int p = p0; p < p0 + block; p++) {
			const float *xr = x + (size_t)p * cols;
			float *o = out + (size_t)p * cols, m = mean[p], r = rstd[p];
			for (int j = 0; j < cols; j++) /* vectorized: layernorm */
				o[j] = km_ln_hat(xr[j], m, r) * w[j] + b[j];
		}
	}
	return ERR_OK;
}

/* km_ln_back_means of `rows` rows (rows <= XENT_ROWS) from row p0: a full block of
 * XENT_ROWS rows side by side, each row's two sums j = 0..cols-1 in order (the rows
 * only give the CPU independent additions), a smaller one row after row */
static void ln_back_means_rows(int p0, int rows, int cols, const float *x, const float *w,
			       const float *mean, const float *rstd, const float *dout, float *a,
			       float *b)
{
	const float *xb = x + (size_t)p0 * cols, *gb = dout + (size_t)p0 * cols;
	float sa[XENT_ROWS] = {0}, sb[XENT_ROWS] = {0}, m[XENT_ROWS], r[XENT_ROWS];
	if (rows < XENT_ROWS) {
		for (int k = 0; k < rows; k++)
			km_ln_back_means(xb + (size_t)k * cols, w, gb + (size_t)k * cols, cols,
					 mean[p0 + k], rstd[p0 + k], &a[k], &b[k]);
		return;
	}
	memcpy(m, mean + p0, sizeof m);
	memcpy(r, rstd + p0, sizeof r);
	for (int j = 0; j < cols; j++)
		for (int k = 0; k < XENT_ROWS; k++) {
			size_t at = (size_t)k * cols + j;
			float dn = w[j] * gb[at];
			sa[k] += dn;
			sb[k] += dn * km_ln_hat(xb[at], m[k], r[k]);
		}
	for (int k = 0; k < XENT_ROWS; k++) {
		a[k] = sa[k] / (float)cols;
		b[k] = sb[k] / (float)cols;
	}
}

/* dx rows, then dw and db: each column's sums over the rows in order. The rows' means
 * come XENT_ROWS rows at a time (ln_back_means_rows), then each row's dx and its share
 * of dw and db. */
static int host_layernorm_backward(struct dev *d, int rows, int cols, const float *x,
				   const float *w, const float *mean, const float *rstd,
				   const float *dout, float *dx, float *dw, float *db,
				   struct err *e)
{
	dev_count(d, 1, 0, 0);
	for (int p0 = 0; p0 < rows; p0 += XENT_ROWS) {
		int block = rows - p0 < XENT_ROWS ? rows - p0 : XENT_ROWS;
		float a[XENT_ROWS], b[XENT_ROWS];
		ln_back_means_rows(p0, block, cols, x, w, mean, rstd, dout, a, b);
		for (int k = 0; k < block; k++) {
			size_t at = (size_t)(p0 + k) * cols;
			const float *xr = x + at, *g = dout + at;
			float *dxr = dx + at, m = mean[p0 + k], r = rstd[p0 + k], ak = a[k], bk = b[k];
			for (int j = 0; j < cols; j++) /* vectorized: layernorm_backward_dx */
				dxr[j] += km_ln_back_dx(xr[j], w[j], g[j], m, r, ak, bk);
			for (int j = 0; j < cols; j++) { /* vectorized: layernorm_backward_dw */
				dw[j] += g[j] * km_ln_hat(xr[j], m, r);
				db[j] += g[j];
			}
		}
	}
	return ERR_OK;
}

static int host_gelu(struct dev *d, int n, const float *x, float *out, struct err *e)
{
	dev_count(d, 1, 0, 0);
	for (int i = 0; i < n; i++) /* vectorized: gelu */
		out[i] = km_gelu(x[i]);
	return ERR_OK;
}

static int host_gelu_backward(struct dev *d, int n, const float *x, float *dout, struct err *e)
{
	dev_count(d, 1, 0, 0);
	for (int i = 0; i < n; i++) /* vectorized: gelu_backward */
		dout[i] = km_gelu_backward(x[i], dout[i]);
	return ERR_OK;
}

/* head after head, rows in order within each: the rows are independent, so any order
 * of heads gives the bits of one head at a time */
static int host_causal_softmax(struct dev *d, int heads, int n, size_t stride, float scale,
			       float *s, struct err *e)
{
	dev_count(d, 1, 0, 0);
	for (int h = 0; h < heads; h++)
		for (int i = 0; i < n; i++)
			km_causal_softmax_row(s + h * stride + (size_t)i * n, i, n, scale);
	return ERR_OK;
}

static int host_causal_softmax_backward(struct dev *d, int heads, int n, size_t stride,
					float scale, const float *p, float *dp, struct err *e)
{
	dev_count(d, 1, 0, 0);
	for (int h = 0; h < heads; h++)
		for (int i = 0; i < n; i++) {
			size_t row = h * stride + (size_t)i * n;
			km_causal_softmax_back_row(p + row, dp + row, i, n, scale);
		}
	return ERR_OK;
}

void HK_JOIN(host_kernels_fill, HOST_KERNELS_VARIANT)(struct dev_ops *o)
{
	o->embed_gather = host_embed_gather;
	o->bias_tanh = host_bias_tanh;
	o->xent = host_xent;
	o->sum = host_sum;
	o->sum_acc = host_sum_acc;
	o->sum_squares = host_sum_squares;
	o->sum_squares_blocks = host_sum_squares_blocks;
	o->squares_block = HOST_SQUARES_BLOCK;
	o->col_sum_acc = host_col_sum_acc;
	o->tanh_backward_col_sum = host_tanh_backward_col_sum;
	o->embed_backward = host_embed_backward;
	o->scale = host_scale;
	o->sgd = host_sgd;
	o->adamw = host_adamw;
	o->argmax_hits = host_argmax_hits;
	o->count_nonfinite = host_count_nonfinite;
	o->fingerprint = host_fingerprint;
	o->embed_pos = host_embed_pos;
	o->bias_add = host_bias_add;
	o->layernorm = host_layernorm;
	o->layernorm_backward = host_layernorm_backward;
	o->gelu = host_gelu;
	o->gelu_backward = host_gelu_backward;
	o->causal_softmax = host_causal_softmax;
	o->causal_softmax_backward = host_causal_softmax_backward;
}
