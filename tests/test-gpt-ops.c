/*
 * test-gpt-ops: the device operations the GPT added (runtime/dev.h: embed_pos, bias_add,
 * layernorm and its backward, gelu and its backward, causal_softmax and its backward).
 *
 * Built twice. On the CPU (suite unit): the build of the loops this CPU runs against the
 * same source built without vectorization, bit for bit, and the host results against
 * float64 formulas within stated tolerances. With -DGPT_OPS_CUDA (suite gpu, built with
 * the CUDA backend, skipped without a GPU): the CUDA operations against the host's, bit
 * for bit (every reduction keeps the host's order, docs/gpt.md).
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check-run.h"
#include "dev.h"
#include "dev_host_kernels.h"
#include "kmath.h"
#include "prng.h"
#ifdef GPT_OPS_CUDA
#include "gpu.h"
#endif

static struct dev *cand, *ref; /* the operations tested, the reference */

static struct err E;

/* n floats uniform in +-amp, from seed */
static float *randoms(size_t n, float amp, uint64_t seed)
{
	struct prng r;
	float *x = malloc(sizeof(float) * (n ? n : 1));
	prng_seed(&r, seed, 0x0b5ULL);
	for (size_t i = 0; i < n; i++)
		x[i] = amp * (2.0f * prng_unit(&r) - 1.0f);
	return x;
}

/* a copy of host[0..bytes) in d's memory */
static void *put(struct dev *d, const void *host, size_t bytes)
{
	void *p;
	OK(d->ops->alloc(d, bytes ? bytes : 4, &p, &E));
	OK(d->ops->upload(d, p, host, bytes, &E));
	OK(d->ops->sync(d, &E));
	return p;
}

/* n floats of d's memory at p, in a new host array; p released */
static float *take(struct dev *d, float *p, size_t n)
{
	float *h = malloc(sizeof(float) * (n ? n : 1));
	OK(d->ops->download(d, h, p, sizeof(float) * n, &E));
	d->ops->release(d, p);
	return h;
}

/* The float arrays a test hands to an operation: the same inputs on cand and ref. */
struct pair {
	float *c, *r;
	size_t n;
};

static struct pair both(const float *host, size_t n)
{
	return (struct pair){put(cand, host, n * 4), put(ref, host, n * 4), n};
}

/* the two results the same bits; the pair released; returns ref's values (caller frees) */
static float *same_bits(struct pair p, const char *what)
{
	float *c = take(cand, p.c, p.n), *r = take(ref, p.r, p.n);
	for (size_t i = 0; i < p.n; i++)
		ck_assert_msg(memcmp(&c[i], &r[i], 4) == 0, "%s[%zu]: %.9g != %.9g", what, i, c[i],
			      r[i]);
	free(c);
	return r;
}

START_TEST(embed_pos_and_bias_add)
{
	int rows = 29, dim = 24, V = 11, T = 7;
	int32_t ids[29], pos[29];
	for (int p = 0; p < rows; p++) {
		ids[p] = (p * 5) % V;
		pos[p] = p % T;
	}
	float *wte = randoms((size_t)V * dim, 1, 1), *wpe = randoms((size_t)T * dim, 1, 2);
	float *bias = randoms(dim, 1, 3), *zero = calloc((size_t)rows * dim, 4);
	struct pair w = both(wte, (size_t)V * dim), q = both(wpe, (size_t)T * dim);
	struct pair b = both(bias, dim), x = both(zero, (size_t)rows * dim);
	int32_t *ic = put(cand, ids, sizeof ids), *ir = put(ref, ids, sizeof ids);
	int32_t *pc = put(cand, pos, sizeof pos), *pr = put(ref, pos, sizeof pos);
	OK(cand->ops->embed_pos(cand, rows, dim, ic, pc, w.c, q.c, x.c, &E));
	OK(ref->ops->embed_pos(ref, rows, dim, ir, pr, w.r, q.r, x.r, &E));
	OK(cand->ops->bias_add(cand, rows, dim, b.c, x.c, &E));
	OK(ref->ops->bias_add(ref, rows, dim, b.r, x.r, &E));
	float *out = same_bits(x, "x");
	for (int p = 0; p < rows; p++)
		for (int j = 0; j < dim; j++)
			ck_assert(out[p * dim + j] ==
				  (wte[ids[p] * dim + j] + wpe[pos[p] * dim + j]) + bias[j]);
	free(out);
	free(same_bits(w, "wte"));
	free(same_bits(q, "wpe"));
	free(same_bits(b, "bias"));
	cand->ops->release(cand, ic);
	cand->ops->release(cand, pc);
	ref->ops->release(ref, ir);
	ref->ops->release(ref, pr);
	free(wte);
	free(wpe);
	free(bias);
	free(zero);
}
END_TEST

/* LayerNorm of row p in float64 */
static double ln_ref(const float *x, const float *w, const float *b, int cols, int j)
{
	double m = 0.0, v = 0.0;
	for (int k = 0; k < cols; k++)
		m += x[k];
	m /= cols;
	for (int k = 0; k < cols; k++)
		v += (x[k] - m) * (x[k] - m);
	return (x[j] - m) / sqrt(v / cols + 1e-5) * w[j] + b[j];
}

START_TEST(layernorm_forward_and_backward)
{
	int rows = 37, cols = 80;
	size_t n = (size_t)rows * cols;
	float *x = randoms(n, 2, 4), *w = randoms(cols, 1.5f, 5), *b = randoms(cols, 1, 6);
	float *g = randoms(n, 1, 7), *dx0 = randoms(n, 1, 8), *dw0 = randoms(cols, 1, 9);
	float *db0 = randoms(cols, 1, 10), *zero = calloc(n, 4);
	struct pair X = both(x, n), W = both(w, cols), B = both(b, cols), O = both(zero, n);
	struct pair M = both(zero, rows), R = both(zero, rows), G = both(g, n), DX = both(dx0, n);
	struct pair DW = both(dw0, cols), DB = both(db0, cols);
	OK(cand->ops->layernorm(cand, rows, cols, X.c, W.c, B.c, O.c, M.c, R.c, &E));
	OK(ref->ops->layernorm(ref, rows, cols, X.r, W.r, B.r, O.r, M.r, R.r, &E));
	OK(cand->ops->layernorm_backward(cand, rows, cols, X.c, W.c, M.c, R.c, G.c, DX.c, DW.c,
					 DB.c, &E));
	OK(ref->ops->layernorm_backward(ref, rows, cols, X.r, W.r, M.r, R.r, G.r, DX.r, DW.r,
					DB.r, &E));
	float *out = same_bits(O, "out");
	for (int p = 0; p < rows; p++)
		for (int j = 0; j < cols; j++)
			ck_assert(fabs(out[p * cols + j] - ln_ref(x + p * cols, w, b, cols, j)) < 2e-5);
	float *db = same_bits(DB, "db");
	for (int j = 0; j < cols; j++) { /* db is the column sums of dout, onto db0 */
		double s = db0[j];
		for (int p = 0; p < rows; p++)
			s += g[p * cols + j];
		ck_assert(fabs(db[j] - s) < 1e-4);
	}
	free(out);
	free(db);
	free(same_bits(M, "mean"));
	free(same_bits(R, "rstd"));
	free(same_bits(DX, "dx"));
	free(same_bits(DW, "dw"));
	struct pair in[] = {X, W, B, G};
	for (int i = 0; i < 4; i++)
		free(same_bits(in[i], "input"));
	free(x), free(w), free(b), free(g), free(dx0), free(dw0), free(db0), free(zero);
}
END_TEST

START_TEST(gelu_forward_and_backward)
{
	int n = 1501;
	float *x = randoms(n, 7, 11), *g = randoms(n, 1, 12);
	struct pair X = both(x, n), Y = both(x, n), G = both(g, n);
	OK(cand->ops->gelu(cand, n, X.c, Y.c, &E));
	OK(ref->ops->gelu(ref, n, X.r, Y.r, &E));
	OK(cand->ops->gelu_backward(cand, n, X.c, G.c, &E));
	OK(ref->ops->gelu_backward(ref, n, X.r, G.r, &E));
	float *y = same_bits(Y, "gelu"), *dg = same_bits(G, "gelu_backward");
	for (int i = 0; i < n; i++) {
		double v = x[i], u = sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v), t = tanh(u);
		double dy = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * sqrt(2.0 / M_PI) *
				(1 + 3 * 0.044715 * v * v);
		ck_assert_msg(fabs(y[i] - 0.5 * v * (1 + t)) < 4e-6, "gelu(%g) = %g", v, y[i]);
		ck_assert_msg(fabs(dg[i] - g[i] * dy) < 4e-6, "gelu'(%g): %g", v, dg[i]);
	}
	free(y), free(dg), free(same_bits(X, "x"));
	free(x), free(g);
}
END_TEST

/* Head h's row i of the causal softmax of s and its backward from g against float64:
 * p and ds (n x n) within 1e-6. */
static void softmax_row_near(const float *s, const float *g, const float *p, const float *ds,
			     int n, int i, float scale)
{
	double mx = -INFINITY, sum = 0.0, dot = 0.0, q[64];
	for (int j = 0; j <= i; j++)
		mx = fmax(mx, (double)scale * s[i * n + j]);
	for (int j = 0; j <= i; j++)
		sum += (q[j] = exp((double)scale * s[i * n + j] - mx));
	for (int j = 0; j <= i; j++)
		dot += (q[j] /= sum) * g[i * n + j];
	for (int j = 0; j < n; j++) {
		double want = j <= i ? q[j] : 0.0;
		double dwant = j <= i ? scale * q[j] * (g[i * n + j] - dot) : 0.0;
		ck_assert_msg(fabs(p[i * n + j] - want) < 1e-6, "p[%d,%d]", i, j);
		ck_assert_msg(fabs(ds[i * n + j] - dwant) < 1e-6, "ds[%d,%d]", i, j);
	}
}

/* three heads in one call each way, n x n + 7 floats apart: the gaps untouched */
START_TEST(causal_softmax_forward_and_backward)
{
	const int n = 45, heads = 3;
	const size_t nn = (size_t)n * n, stride = nn + 7, len = stride * heads;
	float scale = 0.35f, *s = randoms(len, 4, 13), *g = randoms(len, 1, 14);
	struct pair S = both(s, len), G = both(g, len);
	OK(cand->ops->causal_softmax(cand, heads, n, stride, scale, S.c, &E));
	OK(ref->ops->causal_softmax(ref, heads, n, stride, scale, S.r, &E));
	OK(cand->ops->causal_softmax_backward(cand, heads, n, stride, scale, S.c, G.c, &E));
	OK(ref->ops->causal_softmax_backward(ref, heads, n, stride, scale, S.r, G.r, &E));
	float *p = same_bits(S, "p"), *ds = same_bits(G, "ds");
	for (int h = 0; h < heads; h++) {
		size_t at = h * stride;
		for (int i = 0; i < n; i++)
			softmax_row_near(s + at, g + at, p + at, ds + at, n, i, scale);
		for (size_t gap = at + nn; gap < at + stride; gap++)
			ck_assert_msg(p[gap] == s[gap] && ds[gap] == g[gap], "gap [%zu] written",
				      gap);
	}
	free(p), free(ds), free(s), free(g);
}
END_TEST

#ifdef GPT_OPS_CUDA
static void setup(void)
{
	struct cuda_dev_sizes sizes = {1 << 20, 0, 0, 0};
	OK(cuda_dev_create(0, 0, &sizes, &cand, &E));
	OK(dev_host_create(0, &ref, &E));
}

static void teardown(void)
{
	dev_destroy(cand);
	dev_destroy(ref);
}
#else
static struct dev_ops scalar_ops;
static struct dev scalar_dev;

/* the loops this CPU runs, against the same loops built without vectorization */
static void setup(void)
{
	OK(dev_host_create(0, &cand, &E));
	scalar_ops = *cand->ops;
	host_kernels_fill_scalar(&scalar_ops);
	scalar_dev = *cand;
	scalar_dev.ops = &scalar_ops;
	ref = &scalar_dev;
}

static void teardown(void)
{
	dev_destroy(cand);
}
#endif

int main(void)
{
	Suite *s = suite_create("gpt-ops");
	TCase *tc = tcase_create("gpt-ops");
#ifdef GPT_OPS_CUDA
	int n_gpus = 0;
	char why[256] = "";
	struct err e;
	err_clear(&e);
	if (gpu_device_count(&n_gpus, why, sizeof why, &e) != ERR_OK || n_gpus == 0) {
		printf("test-gpt-ops: no GPU, skipping: %s\n", why[0] ? why : e.msg);
		return 77;
	}
#endif
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, embed_pos_and_bias_add);
	tcase_add_test(tc, layernorm_forward_and_backward);
	tcase_add_test(tc, gelu_forward_and_backward);
	tcase_add_test(tc, causal_softmax_forward_and_backward);
	suite_add_tcase(s, tc);
#ifdef GPT_OPS_CUDA
	return check_run(s, 1);
#else
	return check_run(s, 0);
#endif
}
