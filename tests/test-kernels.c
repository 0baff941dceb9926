/*
 * test-kernels: every vectorized build of the host backend's loops (the baseline one and,
 * on a CPU with AVX2 or AVX-512, the 256-bit and 512-bit ones) gives the same bits as the same source compiled
 * without any vectorization, for every operation, on shapes whose widths are no multiple
 * of a vector (so remainders are covered) and on inputs that include NaN, infinities,
 * signed zeros, subnormals and the clamp and branch boundaries of kmath.h.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check-run.h"
#include "dev.h"
#include "dev_host_kernels.h"
#include "kmath.h"
#include "prng.h"
#include "squares-order.h"

struct variant {
	const char *name;
	struct dev_ops ops;
};

/* the vectorized builds this CPU can run, and the scalar reference */
static struct variant variants[3];
static int n_variants;
static struct dev_ops scalar;

static void variants_init(void)
{
	memset(variants, 0, sizeof variants);
	memset(&scalar, 0, sizeof scalar);
	host_kernels_fill_scalar(&scalar);
	n_variants = 0;
	variants[n_variants].name = "generic";
	host_kernels_fill_generic(&variants[n_variants++].ops);
#if DDPTOK_HAVE_AVX2_KERNELS
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2")) {
		variants[n_variants].name = "avx2";
		host_kernels_fill_avx2(&variants[n_variants++].ops);
	}
#endif
#if DDPTOK_HAVE_AVX512_KERNELS
	if (host_cpu_has_avx512()) {
		variants[n_variants].name = "avx512";
		host_kernels_fill_avx512(&variants[n_variants++].ops);
	}
#endif
}

static const float specials[] = {
	NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -1e-40f, 0.25f, -0.25f,
	0.2499999f, 44.0f, -43.65f, 88.0f, -87.3f, 88.1f, -87.4f, 1e30f, -1e30f, 0.125f,
};

/* a deterministic mixture: wide and narrow uniform values, the specials, values near
 * the exp clamps (2|x| around 88) */
static void fill_inputs(float *x, size_t n, uint64_t seed, int with_specials)
{
	struct prng r;
	prng_seed(&r, seed, 7);
	for (size_t i = 0; i < n; i++) {
		float u = 2.0f * prng_unit(&r) - 1.0f;
		switch (i % 5) {
		case 0: x[i] = 30.0f * u; break;
		case 1: x[i] = 0.3f * u; break;
		case 2: x[i] = 44.0f + 0.5f * u; break;
		default: x[i] = 6.0f * u; break;
		}
		if (with_specials && i % 7 == 3)
			x[i] = specials[(i / 7) % (sizeof specials / sizeof specials[0])];
	}
}

/* bitwise equality of two float arrays; the index of the first difference or -1 */
static long first_difference(const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (memcmp(a + i, b + i, sizeof(float)) != 0)
			return (long)i;
	return -1;
}

static void assert_same_bits(const char *op, const char *variant, const float *want,
			     const float *got, size_t n)
{
	long i = first_difference(want, got, n);
	if (i >= 0) {
		uint32_t w, g;
		memcpy(&w, want + i, 4);
		memcpy(&g, got + i, 4);
		ck_abort_msg("%s, %s build: element %ld is %08x, the scalar build gives %08x", op,
			     variant, i, g, w);
	}
}

/* assert_same_bits, except that where both are NaN any NaN will do: when two NaNs meet in
 * an addition, which one the sum keeps depends on the operand order the compiler chose,
 * which C leaves to it (a + b and b + a are the same float for every other value) */
static void assert_same_bits_or_nans(const char *op, const char *variant, const float *want,
				     const float *got, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t w, g;
		memcpy(&w, want + i, 4);
		memcpy(&g, got + i, 4);
		if (w != g && !(isnan(want[i]) && isnan(got[i])))
			ck_abort_msg("%s, %s build: element %zu is %08x, expected %08x", op, variant,
				     i, g, w);
	}
}

/* runs `op` on a copy of `init` with the scalar and each vectorized build, compares */
#define COMPARE_INPLACE(opname, n, init, call)                                            \
	do {                                                                              \
		float *buf = malloc(sizeof(float) * (n)), *want = malloc(sizeof(float) * (n)); \
		struct err e;                                                             \
		memcpy(want, init, sizeof(float) * (n));                                  \
		{                                                                         \
			const struct dev_ops *o = &scalar;                                \
			float *x = want;                                                  \
			ck_assert_int_eq(call, ERR_OK);                                   \
		}                                                                         \
		for (int v = 0; v < n_variants; v++) {                                    \
			const struct dev_ops *o = &variants[v].ops;                       \
			float *x = buf;                                                   \
			memcpy(buf, init, sizeof(float) * (n));                           \
			ck_assert_int_eq(call, ERR_OK);                                   \
			assert_same_bits(opname, variants[v].name, want, buf, n);         \
		}                                                                         \
		free(buf);                                                                \
		free(want);                                                               \
	} while (0)

START_TEST(bias_tanh_bits)
{
	const int shapes[][2] = {{5, 37}, {3, 512}, {1, 7}};
	for (size_t s = 0; s < 3; s++) {
		int rows = shapes[s][0], cols = shapes[s][1];
		size_t n = (size_t)rows * cols;
		float *z = malloc(sizeof(float) * n), *bias = malloc(sizeof(float) * cols);
		fill_inputs(z, n, 1 + s, 1);
		fill_inputs(bias, cols, 100 + s, 0);
		for (int j = 0; j < cols; j++)
			bias[j] *= 0.01f;
		COMPARE_INPLACE("bias_tanh", n, z, o->bias_tanh(NULL, rows, cols, bias, x, &e));
		free(z);
		free(bias);
	}
}
END_TEST

START_TEST(xent_bits)
{
	const int rows = 6;
	const int widths[] = {37, 128};
	float weights[128];
	for (int j = 0; j < 128; j++)
		weights[j] = 0.25f + (float)(j % 7);
	for (int s = 0; s < 6; s++) { /* each width plain, with the z-loss, with both weights */
		int cols = widths[s % 2];
		float zc = s < 2 ? 0.0f : 0.013f;
		const float *cw = s < 4 ? NULL : weights;
		size_t n = (size_t)rows * cols;
		float *logits = malloc(sizeof(float) * n), *bias = malloc(sizeof(float) * cols);
		float loss_want[6], loss_got[6];
		int32_t target[6] = {0, cols - 1, -1, 5, cols / 2, 3};
		fill_inputs(logits, n, 10 + s, 0);
		fill_inputs(bias, cols, 20 + s, 0);
		logits[3 * cols + 2] = INFINITY; /* a row whose loss is NaN */
		logits[4 * cols + 1] = -INFINITY;
		float *want = malloc(sizeof(float) * n), *got = malloc(sizeof(float) * n);
		struct err e;
		memcpy(want, logits, sizeof(float) * n);
		ck_assert_int_eq(scalar.xent(NULL, rows, cols, bias, target, 0.37f, zc, cw, want,
					     loss_want, &e), ERR_OK);
		for (int v = 0; v < n_variants; v++) {
			memcpy(got, logits, sizeof(float) * n);
			ck_assert_int_eq(variants[v].ops.xent(NULL, rows, cols, bias, target, 0.37f,
							      zc, cw, got, loss_got, &e), ERR_OK);
			assert_same_bits("xent gradient", variants[v].name, want, got, n);
			assert_same_bits("xent loss", variants[v].name, loss_want, loss_got, rows);
		}
		free(want);
		free(got);
		free(logits);
		free(bias);
	}
}
END_TEST

START_TEST(elementwise_bits)
{
	const size_t n = 1003;
	float *a = malloc(sizeof(float) * n), *h = malloc(sizeof(float) * n);
	fill_inputs(a, n, 31, 1);
	fill_inputs(h, n, 32, 1);
	for (size_t i = 0; i < n; i++)
		h[i] = tanhf(h[i]);
	COMPARE_INPLACE("scale", n, a, o->scale(NULL, (int)n, 0.3f, x, &e));
	COMPARE_INPLACE("col_sum_acc", 37, a, o->col_sum_acc(NULL, 27, 37, h, x, &e));
	free(a);
	free(h);
}
END_TEST

START_TEST(sgd_bits)
{
	const size_t n = 1001;
	float *p0 = malloc(sizeof(float) * n), *g = malloc(sizeof(float) * n);
	float *buf0 = malloc(sizeof(float) * n);
	float *p[2] = {malloc(sizeof(float) * n), malloc(sizeof(float) * n)};
	float *buf[2] = {malloc(sizeof(float) * n), malloc(sizeof(float) * n)};
	struct err e;
	fill_inputs(p0, n, 41, 1);
	fill_inputs(g, n, 42, 1);
	fill_inputs(buf0, n, 43, 0);
	for (int first = 0; first <= 1; first++)
		for (int wd = 0; wd <= 1; wd++)
			for (int v = 0; v < n_variants; v++) {
				/* [0]: the scalar build, [1]: the vectorized one */
				const struct dev_ops *ops[2] = {&scalar, &variants[v].ops};
				for (int k = 0; k < 2; k++) {
					memcpy(p[k], p0, sizeof(float) * n);
					memcpy(buf[k], buf0, sizeof(float) * n);
					ck_assert_int_eq(ops[k]->sgd(NULL, (int)n, 0.1f, 0.9f,
								     wd ? 0.01f : 0.0f, first, p[k], g,
								     buf[k], &e), ERR_OK);
				}
				assert_same_bits("sgd parameters", variants[v].name, p[0], p[1], n);
				assert_same_bits("sgd momentum", variants[v].name, buf[0], buf[1], n);
			}
	for (int k = 0; k < 2; k++) {
		free(p[k]);
		free(buf[k]);
	}
	free(p0);
	free(g);
	free(buf0);
}
END_TEST

/* AdamW's decay table in these tests: ranges of a vector of ADAMW_N elements where a
 * model's matrices could lie: one at the start, two adjacent ones, one at the end. */
#define ADAMW_N 1001
static const int32_t adamw_decay[] = {0, 37, 100, 350, 350, 420, 613, 640, 900, ADAMW_N};
#define ADAMW_N_DECAY 5

/* The update as one call per run of elements that share their decay would make it (the
 * runs between the table's boundaries, each cut to the slice [lo, hi), p[0] being
 * element lo): km_adamw on each element, wd in a range, 0 between them. */
static void adamw_per_run(const struct dev_adamw *a, int lo, int hi, float *p, const float *g,
			  float *m, float *v)
{
	for (int b = -1; b < 2 * a->n_decay; b++) { /* the run after boundary b */
		int from = b < 0 ? 0 : a->decay[b];
		int to = b + 1 < 2 * a->n_decay ? a->decay[b + 1] : hi;
		float wd = b % 2 == 0 ? a->wd : 0.0f; /* after a range's start: in the range */
		from = from > lo ? from : lo;
		to = to < hi ? to : hi;
		for (int i = from; i < to; i++)
			km_adamw(&p[i - lo], g[i - lo], &m[i - lo], &v[i - lo], a->lr, a->beta1,
				 a->beta2, a->eps, wd, a->bc1, a->bc2);
	}
}

/* out[0..3) = p, m, v of elements [lo, hi) of in's after one update of them by `ops`
 * (fused: one call with the table) or by adamw_per_run */
static void adamw_slice(const struct dev_ops *ops, const struct dev_adamw *a, int lo, int hi,
			float *const in[4], float *out[3])
{
	size_t n = (size_t)(hi - lo);
	struct err e;
	for (int k = 0; k < 3; k++)
		memcpy(out[k], in[k == 0 ? 0 : k + 1] + lo, sizeof(float) * n);
	if (!ops) {
		adamw_per_run(a, lo, hi, out[0], in[1] + lo, out[1], out[2]);
		return;
	}
	ck_assert_int_eq(ops->adamw(NULL, (int)n, lo, a, out[0], in[1] + lo, out[1], out[2], &e),
			 ERR_OK);
}

/* AdamW's one call over the decay table gives, in every build (the scalar one included),
 * the bits of one call per run: every decay boundary where it belongs, also in slices
 * (a shard) that start and end inside a range or a gap, from zero and from non-zero
 * moments; sqrtf and the divisions are correctly rounded in every build. */
START_TEST(adamw_fused_is_per_run)
{
	static const int slices[][2] = {{0, ADAMW_N}, {20, 701}, {363, 905}, {37, 100}};
	static const char *const what[3] = {"parameters", "first moment", "second moment"};
	float *in[4], *want[3], *got[3];
	for (int k = 0; k < 4; k++)
		in[k] = malloc(sizeof(float) * ADAMW_N);
	for (int k = 0; k < 3; k++) {
		want[k] = malloc(sizeof(float) * ADAMW_N);
		got[k] = malloc(sizeof(float) * ADAMW_N);
	}
	fill_inputs(in[0], ADAMW_N, 71, 0);
	fill_inputs(in[1], ADAMW_N, 72, 0);
	for (int fresh = 0; fresh <= 1; fresh++) {
		fill_inputs(in[2], ADAMW_N, 73, 0);
		for (size_t i = 0; i < ADAMW_N; i++) {
			if (fresh)
				in[2][i] = 0.0f;
			in[3][i] = in[2][i] * in[2][i]; /* a second moment is never negative */
		}
		struct dev_adamw a = {3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, fresh ? 0.1f : 0.271f,
				      fresh ? 0.05f : 0.142625f, ADAMW_N_DECAY, adamw_decay};
		for (size_t sl = 0; sl < sizeof slices / sizeof slices[0]; sl++) {
			int lo = slices[sl][0], hi = slices[sl][1];
			adamw_slice(NULL, &a, lo, hi, in, want);
			for (int vi = -1; vi < n_variants; vi++) {
				adamw_slice(vi < 0 ? &scalar : &variants[vi].ops, &a, lo, hi, in, got);
				for (int k = 0; k < 3; k++) {
					long i = first_difference(want[k], got[k], (size_t)(hi - lo));
					ck_assert_msg(i < 0, "adamw %s, %s build, slice [%d, %d): "
						      "element %ld differs from the per-run update's",
						      what[k], vi < 0 ? "scalar" : variants[vi].name,
						      lo, hi, lo + i);
				}
			}
		}
	}
	for (int k = 0; k < 4; k++)
		free(in[k]);
	for (int k = 0; k < 3; k++) {
		free(want[k]);
		free(got[k]);
	}
}
END_TEST

/* LayerNorm's backward by its documented order, row after row (kmath.h): the row's two
 * means j in order, its dx, then dw and db each adding the rows in order */
static void ln_backward_by_formula(int rows, int cols, const float *x, const float *w,
				   const float *mean, const float *rstd, const float *dout,
				   float *dx, float *dw, float *db)
{
	for (int p = 0; p < rows; p++) {
		size_t at = (size_t)p * cols;
		float a, b;
		km_ln_back_means(x + at, w, dout + at, cols, mean[p], rstd[p], &a, &b);
		for (int j = 0; j < cols; j++) {
			dx[at + j] += km_ln_back_dx(x[at + j], w[j], dout[at + j], mean[p], rstd[p], a,
						    b);
			dw[j] += dout[at + j] * km_ln_hat(x[at + j], mean[p], rstd[p]);
			db[j] += dout[at + j];
		}
	}
}

/* Every build's layernorm forward (its statistics from km_ln_stats, the output from
 * km_ln_hat) on rows whose statistics are summed side by side in blocks gives the bits of
 * the row-after-row order; the forward's inputs in stats (mean then rstd) for the
 * backward's. */
static void layernorm_forward_is_the_row_formula(int rows, int cols, const float *x,
						 const float *w, float *stats)
{
	size_t n = (size_t)rows * cols;
	float *want = malloc(sizeof(float) * n), *got = malloc(sizeof(float) * n);
	float *got_stats = malloc(sizeof(float) * 2 * rows);
	struct err e;
	for (int p = 0; p < rows; p++) {
		km_ln_stats(x + (size_t)p * cols, cols, &stats[p], &stats[rows + p]);
		for (int j = 0; j < cols; j++) /* the bias: w reversed */
			want[(size_t)p * cols + j] = km_ln_hat(x[(size_t)p * cols + j], stats[p],
							       stats[rows + p]) * w[j] + w[cols - 1 - j];
	}
	float *b = malloc(sizeof(float) * cols);
	for (int j = 0; j < cols; j++)
		b[j] = w[cols - 1 - j];
	for (int v = -1; v < n_variants; v++) {
		const struct dev_ops *o = v < 0 ? &scalar : &variants[v].ops;
		const char *name = v < 0 ? "scalar" : variants[v].name;
		ck_assert_int_eq(o->layernorm(NULL, rows, cols, x, w, b, got, got_stats,
					      got_stats + rows, &e), ERR_OK);
		assert_same_bits("layernorm out by the rows' order", name, want, got, n);
		assert_same_bits("layernorm mean and rstd by the rows' order", name, stats,
				 got_stats, 2 * (size_t)rows);
	}
	free(want), free(got), free(got_stats), free(b);
}

/* Every build's layernorm and layernorm_backward (rows summed side by side in blocks)
 * give the bits of the row-after-row order, for row counts below, at and past a block
 * and widths that are no multiple of a vector. */
START_TEST(layernorm_is_the_row_formula)
{
	const int shapes[][2] = {{5, 17}, {8, 33}, {19, 129}, {37, 80}};
	for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
		int rows = shapes[sh][0], cols = shapes[sh][1];
		size_t n = (size_t)rows * cols;
		float *x = malloc(sizeof(float) * n), *g = malloc(sizeof(float) * n);
		float *w = malloc(sizeof(float) * cols), *stats = malloc(sizeof(float) * 2 * rows);
		float *want[3], *got[3], *init[3];
		size_t lens[3] = {n, (size_t)cols, (size_t)cols};
		static const char *const what[3] = {"layernorm dx by the rows' order",
						   "layernorm dw by the rows' order",
						   "layernorm db by the rows' order"};
		struct err e;
		fill_inputs(x, n, 80 + sh, 0);
		fill_inputs(g, n, 90 + sh, 0);
		fill_inputs(w, (size_t)cols, 100 + sh, 0);
		layernorm_forward_is_the_row_formula(rows, cols, x, w, stats);
		for (int k = 0; k < 3; k++) {
			init[k] = malloc(sizeof(float) * lens[k]);
			want[k] = malloc(sizeof(float) * lens[k]);
			got[k] = malloc(sizeof(float) * lens[k]);
			fill_inputs(init[k], lens[k], 110 + k, 0);
			memcpy(want[k], init[k], sizeof(float) * lens[k]);
		}
		ln_backward_by_formula(rows, cols, x, w, stats, stats + rows, g, want[0], want[1],
				       want[2]);
		for (int v = -1; v < n_variants; v++) {
			const struct dev_ops *o = v < 0 ? &scalar : &variants[v].ops;
			for (int k = 0; k < 3; k++)
				memcpy(got[k], init[k], sizeof(float) * lens[k]);
			ck_assert_int_eq(o->layernorm_backward(NULL, rows, cols, x, w, stats,
							       stats + rows, g, got[0], got[1],
							       got[2], &e), ERR_OK);
			for (int k = 0; k < 3; k++)
				assert_same_bits(what[k], v < 0 ? "scalar" : variants[v].name, want[k],
						 got[k], lens[k]);
		}
		for (int k = 0; k < 3; k++) {
			free(init[k]);
			free(want[k]);
			free(got[k]);
		}
		free(x), free(g), free(w), free(stats);
	}
}
END_TEST

START_TEST(embedding_bits)
{
	const int rows = 9, width = 3, dim = 13, vocab = 5;
	int32_t ctx[27];
	size_t nx = (size_t)rows * width * dim;
	float *table = malloc(sizeof(float) * vocab * dim), *dx = malloc(sizeof(float) * nx);
	float *want = malloc(sizeof(float) * nx), *got = malloc(sizeof(float) * nx);
	struct err e;
	for (int i = 0; i < rows * width; i++)
		ctx[i] = (i * 7 + 1) % vocab; /* every row of the table is hit several times */
	fill_inputs(table, (size_t)vocab * dim, 51, 0);
	fill_inputs(dx, nx, 52, 1);
	ck_assert_int_eq(scalar.embed_gather(NULL, rows, width, dim, ctx, table, want, &e), ERR_OK);
	for (int v = 0; v < n_variants; v++) {
		ck_assert_int_eq(variants[v].ops.embed_gather(NULL, rows, width, dim, ctx, table, got,
							      &e), ERR_OK);
		assert_same_bits("embed_gather", variants[v].name, want, got, nx);
	}
	COMPARE_INPLACE("embed_backward", (size_t)vocab * dim, table,
			o->embed_backward(NULL, rows, width, dim, ctx, dx, x, &e));
	free(table);
	free(dx);
	free(want);
	free(got);
}
END_TEST

START_TEST(reductions_agree)
{
	const int rows = 7, cols = 37;
	size_t n = (size_t)rows * cols;
	float *x = malloc(sizeof(float) * n), *bias = malloc(sizeof(float) * cols);
	int32_t target[7] = {0, 36, -1, 4, 4, 20, 11};
	struct err e;
	fill_inputs(x, n, 61, 0);
	fill_inputs(bias, cols, 62, 0);
	double s_want, s_got;
	int64_t bad_want, bad_got, hits_want, hits_got;
	ck_assert_int_eq(scalar.sum(NULL, (int)n, x, &s_want, &e), ERR_OK);
	/* sum_squares: each square in double, in its lanes (one block here) */
	double squares_want = squares_in_order(n, x, NULL), squares_scalar;
	ck_assert_int_eq(scalar.sum_squares(NULL, (int)n, x, &squares_scalar, &e), ERR_OK);
	ck_assert(memcmp(&squares_scalar, &squares_want, sizeof squares_want) == 0);
	ck_assert_int_eq(scalar.argmax_hits(NULL, rows, cols, bias, x, target, &hits_want, &e),
			 ERR_OK);
	float *y = malloc(sizeof(float) * n); /* x with two non-finite entries */
	memcpy(y, x, sizeof(float) * n);
	y[5] = NAN;
	y[100] = -INFINITY;
	ck_assert_int_eq(scalar.count_nonfinite(NULL, (int)n, y, &bad_want, &e), ERR_OK);
	ck_assert_int_eq(bad_want, 2);
	for (int v = 0; v < n_variants; v++) {
		const struct dev_ops *o = &variants[v].ops;
		ck_assert_int_eq(o->sum(NULL, (int)n, x, &s_got, &e), ERR_OK);
		ck_assert_msg(memcmp(&s_got, &s_want, sizeof s_got) == 0, "sum, %s build",
			      variants[v].name);
		ck_assert_int_eq(o->sum_squares(NULL, (int)n, x, &s_got, &e), ERR_OK);
		ck_assert_msg(memcmp(&s_got, &squares_want, sizeof s_got) == 0,
			      "sum_squares, %s build", variants[v].name);
		ck_assert_int_eq(o->argmax_hits(NULL, rows, cols, bias, x, target, &hits_got, &e),
				 ERR_OK);
		ck_assert_int_eq(hits_got, hits_want);
		ck_assert_int_eq(o->count_nonfinite(NULL, (int)n, y, &bad_got, &e), ERR_OK);
		ck_assert_int_eq(bad_got, bad_want);
	}
	free(x);
	free(y);
	free(bias);
}
END_TEST

/* The fingerprint of x[0..n) with element indices from `first`, by one build; the same
 * value from every build (checked here), so any of them speaks for the backend. */
static uint64_t fingerprint_of(const float *x, int n, int first)
{
	struct err e;
	uint64_t want = 0, got = 0;
	ck_assert_int_eq(scalar.fingerprint(NULL, n, x, first, &want, &e), ERR_OK);
	for (int v = 0; v < n_variants; v++) {
		ck_assert_int_eq(variants[v].ops.fingerprint(NULL, n, x, first, &got, &e), ERR_OK);
		ck_assert_msg(got == want, "fingerprint of %d floats from %d, %s build: %016llx, "
			      "the scalar build gives %016llx", n, first, variants[v].name,
			      (unsigned long long)got, (unsigned long long)want);
	}
	return want;
}

/* The replica check's fingerprint: the sum of kmath.h's terms; a flipped bit anywhere
 * changes it (also one that leaves the value equal: -0 for +0), so do two swapped words,
 * and pieces fingerprinted from their offsets add up to the whole's. */
START_TEST(fingerprint_sees_bits_and_places)
{
	const int n = 1001; /* odd: no multiple of a vector */
	float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
	fill_inputs(x, n, 71, 1);
	x[400] = 0.0f;
	const uint64_t whole = fingerprint_of(x, n, 0);
	uint64_t by_formula = 0;
	for (int i = 0; i < n; i++)
		by_formula += km_fingerprint_term((uint32_t)i, km_to_bits(x[i]));
	ck_assert_uint_eq(whole, by_formula);
	ck_assert_uint_eq(fingerprint_of(x, n, 0), whole); /* repeatable */
	/* the lowest mantissa bit, the exponent's ends, the sign (word 400: +0 becomes -0) */
	const int at[] = {0, 1, 400, 517, n - 1}, bits[] = {0, 1, 22, 23, 30, 31};
	for (size_t k = 0; k < sizeof at / sizeof at[0]; k++)
		for (size_t b = 0; b < sizeof bits / sizeof bits[0]; b++) {
			memcpy(y, x, sizeof(float) * n);
			y[at[k]] = km_from_bits(km_to_bits(y[at[k]]) ^ (1u << bits[b]));
			ck_assert_msg(fingerprint_of(y, n, 0) != whole,
				      "bit %d of word %d flipped: the same fingerprint", bits[b],
				      at[k]);
		}
	/* NaNs that differ only in sign, payload or quiet bit (a signalling one among them)
	 * are different words: a path that read them as floats and made one NaN of them
	 * would miss a replica whose NaNs differ */
	const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7fc00001u, 0x7fe5a5a5u, 0x7f800001u};
	uint64_t with_nan[sizeof nans / sizeof nans[0]];
	for (size_t k = 0; k < sizeof nans / sizeof nans[0]; k++) {
		memcpy(y, x, sizeof(float) * n);
		memcpy(&y[517], &nans[k], sizeof nans[k]); /* bits stored as such */
		with_nan[k] = fingerprint_of(y, n, 0);
		for (size_t j = 0; j < k; j++)
			ck_assert_msg(with_nan[k] != with_nan[j], "NaN words %08x and %08x: the same "
				      "fingerprint", nans[j], nans[k]);
	}
	/* two different words trade places: the multiset of words is the same */
	const int swaps[][2] = {{0, 1}, {3, 998}, {500, 1000}};
	for (int k = 0; k < 3; k++) {
		int i = swaps[k][0], j = swaps[k][1];
		ck_assert(km_to_bits(x[i]) != km_to_bits(x[j]));
		memcpy(y, x, sizeof(float) * n);
		y[i] = x[j];
		y[j] = x[i];
		ck_assert_msg(fingerprint_of(y, n, 0) != whole, "words %d and %d swapped: the same "
			      "fingerprint", i, j);
	}
	/* pieces: two halves, an empty piece at either end, three uneven pieces */
	const int cuts[] = {0, 1, 500, 501, 999, n};
	for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
		int c = cuts[k];
		uint64_t sum = fingerprint_of(x, c, 0) + fingerprint_of(x + c, n - c, c);
		ck_assert_msg(sum == whole, "pieces cut at %d: %016llx, the whole %016llx", c,
			      (unsigned long long)sum, (unsigned long long)whole);
	}
	ck_assert_uint_eq(fingerprint_of(x, 7, 0) + fingerprint_of(x + 7, 600, 7) +
				  fingerprint_of(x + 607, n - 607, 607),
			  whole);
	/* the offset matters: a piece is not the vector that starts with it */
	ck_assert_uint_ne(fingerprint_of(x + 500, n - 500, 500), fingerprint_of(x + 500, n - 500, 0));
	free(x);
	free(y);
}
END_TEST

/* xent row by row as kmath.h states it (km_row_max's scan, the sum in column order): the
 * formula the backend's blocked rows and lane maximum must reproduce bit for bit */
static void xent_by_formula(int rows, int cols, const float *bias, const int32_t *target,
			    float scale, float zc, const float *cw, float *logits, float *loss)
{
	for (int p = 0; p < rows; p++) {
		float *row = logits + (size_t)p * cols;
		int t = target[p];
		if (t < 0) {
			memset(row, 0, sizeof(float) * cols);
			loss[p] = 0.0f;
			continue;
		}
		float mx = km_row_max(row, bias, cols, NULL), zt = row[t] + bias[t], s = 0.0f;
		for (int j = 0; j < cols; j++) {
			row[j] = km_exp(row[j] + bias[j] - mx);
			s += row[j];
		}
		float weight = cw ? cw[t] : 1.0f;
		loss[p] = km_xent_loss(mx, s, zt, zc, weight);
		float inv = km_xent_inv_z(1.0f / s, mx, s, zc);
		for (int j = 0; j < cols; j++)
			row[j] = km_xent_grad(row[j], inv, scale * weight, j == t);
	}
}

/* float64 objective of one row with the z-loss: lse - z_t + zc lse^2 */
static double zloss_row(const double *z, int cols, int t, double zc)
{
	double mx = z[0], s = 0.0;
	for (int j = 1; j < cols; j++)
		mx = z[j] > mx ? z[j] : mx;
	for (int j = 0; j < cols; j++)
		s += exp(z[j] - mx);
	double lse = mx + log(s);
	return lse - z[t] + zc * lse * lse;
}

/* The z-loss's loss and gradient against float64: the loss against the formula, the
 * gradient against central finite differences of it (scale = 0.5 multiplies both). The
 * same rows without the z term must differ by more than the tolerance, so the check
 * would see a missing or misplaced term. */
START_TEST(xent_z_loss_against_float64)
{
	enum { rows = 3, cols = 7 };
	const float zc = 0.05f, scale = 0.5f;
	float logits[rows * cols], got[rows * cols], plain[rows * cols], bias[cols] = {0};
	float loss[rows], loss_plain[rows];
	int32_t target[rows] = {2, 0, 6};
	struct err e;
	fill_inputs(logits, rows * cols, 77, 0);
	for (int i = 0; i < rows * cols; i++)
		logits[i] = 3.0f * logits[i] + 1.5f; /* log Z well away from 0 */
	memcpy(got, logits, sizeof got);
	memcpy(plain, logits, sizeof plain);
	ck_assert_int_eq(scalar.xent(NULL, rows, cols, bias, target, scale, zc, NULL, got, loss,
				     &e), ERR_OK);
	ck_assert_int_eq(scalar.xent(NULL, rows, cols, bias, target, scale, 0.0f, NULL, plain,
				     loss_plain, &e), ERR_OK);
	for (int p = 0; p < rows; p++) {
		double z[cols], h = 1e-5, far = 0.0;
		for (int j = 0; j < cols; j++)
			z[j] = logits[p * cols + j];
		double want = zloss_row(z, cols, target[p], zc);
		ck_assert_double_eq_tol(loss[p], want, 1e-5 * fabs(want));
		ck_assert(fabs(loss_plain[p] - want) > 1e-3);
		for (int j = 0; j < cols; j++) {
			double zj = z[j];
			z[j] = zj + h;
			double up = zloss_row(z, cols, target[p], zc);
			z[j] = zj - h;
			double down = zloss_row(z, cols, target[p], zc);
			z[j] = zj;
			double fd = scale * (up - down) / (2 * h);
			ck_assert_double_eq_tol(got[p * cols + j], fd, 1e-5);
			far = fmax(far, fabs(plain[p * cols + j] - fd));
		}
		ck_assert(far > 1e-3); /* the plain gradient would not pass */
	}
}
END_TEST

/* Class weights: each supervised row's loss and gradient are its target's weight times
 * the unweighted ones (within a rounding), a weight of 1 leaves the row's bits, and a
 * weight of 0 silences the row. */
START_TEST(xent_class_weights_scale_rows)
{
	enum { rows = 4, cols = 9 };
	float logits[rows * cols], got[rows * cols], plain[rows * cols], bias[cols] = {0};
	float cw[cols], loss[rows], loss_plain[rows];
	int32_t target[rows] = {1, 4, 8, -1};
	struct err e;
	for (int j = 0; j < cols; j++)
		cw[j] = j == 4 ? 1.0f : j == 8 ? 0.0f : 2.5f;
	fill_inputs(logits, rows * cols, 91, 0);
	memcpy(got, logits, sizeof got);
	memcpy(plain, logits, sizeof plain);
	ck_assert_int_eq(scalar.xent(NULL, rows, cols, bias, target, 0.3f, 0.02f, cw, got, loss,
				     &e), ERR_OK);
	ck_assert_int_eq(scalar.xent(NULL, rows, cols, bias, target, 0.3f, 0.02f, NULL, plain,
				     loss_plain, &e), ERR_OK);
	for (int p = 0; p < rows; p++) {
		float w = target[p] < 0 ? 0.0f : cw[target[p]];
		ck_assert_float_eq_tol(loss[p], w * loss_plain[p], 1e-6f * (1.0f + loss_plain[p]));
		for (int j = 0; j < cols; j++)
			ck_assert_float_eq_tol(got[p * cols + j], w * plain[p * cols + j],
					       1e-6f * (1.0f + fabsf(plain[p * cols + j])));
	}
	ck_assert(memcmp(got + 1 * cols, plain + 1 * cols, sizeof(float) * cols) == 0);
	ck_assert(memcmp(&loss[1], &loss_plain[1], sizeof(float)) == 0);
	ck_assert(loss[0] > 2.0f * loss_plain[0]);
}
END_TEST

/* rows in blocks with a remainder, widths around the lane count, maxima that are zeros
 * of both signs in either order, NaN in the first column and later, infinities */
START_TEST(xent_is_the_row_formula)
{
	enum { rows = 19 };
	const int widths[] = {5, 17, 37, 128, 129};
	float weights[129];
	for (int j = 0; j < 129; j++)
		weights[j] = 0.5f + (float)(j % 3);
	for (int w = 0; w < 15; w++) { /* each width plain, with the z-loss, with both weights */
		int cols = widths[w % 5];
		float zc = w < 5 ? 0.0f : 0.013f;
		const float *cw = w < 10 ? NULL : weights;
		size_t n = (size_t)rows * cols;
		float *logits = malloc(sizeof(float) * n), *bias = calloc(cols, sizeof(float));
		float *want = malloc(sizeof(float) * n), *got = malloc(sizeof(float) * n);
		float loss_want[rows], loss_got[rows];
		int32_t target[rows];
		struct err e;
		fill_inputs(logits, n, 30 + w, 0);
		for (int p = 0; p < rows; p++)
			target[p] = p % 6 == 5 ? -1 : (p * 7) % cols;
		for (int p = 0; p < 5; p++) /* rows 0-4: nothing above zero (4: all below) */
			for (int j = 0; j < cols; j++)
				logits[(size_t)p * cols + j] = -1.0f - fabsf(logits[(size_t)p * cols + j]);
		logits[(size_t)0 * cols + cols / 2] = -0.0f;
		logits[(size_t)0 * cols + cols - 1] = 0.0f;
		logits[(size_t)1 * cols + cols / 3] = 0.0f;
		logits[(size_t)1 * cols + cols - 1] = -0.0f;
		logits[(size_t)2 * cols] = -0.0f;
		logits[(size_t)3 * cols] = NAN;
		logits[(size_t)6 * cols + cols - 1] = NAN;
		logits[(size_t)7 * cols + cols / 2] = INFINITY;
		memcpy(want, logits, sizeof(float) * n);
		xent_by_formula(rows, cols, bias, target, 0.37f, zc, cw, want, loss_want);
		for (int v = -1; v < n_variants; v++) {
			const struct dev_ops *o = v < 0 ? &scalar : &variants[v].ops;
			const char *name = v < 0 ? "scalar" : variants[v].name;
			memcpy(got, logits, sizeof(float) * n);
			ck_assert_int_eq(o->xent(NULL, rows, cols, bias, target, 0.37f, zc, cw, got, loss_got, &e),
					 ERR_OK);
			assert_same_bits("xent gradient against the formula", name, want, got, n);
			assert_same_bits("xent loss against the formula", name, loss_want, loss_got, rows);
		}
		free(logits);
		free(bias);
		free(want);
		free(got);
	}
}
END_TEST

/* every build against what it replaced in the model, bit for bit: dz in place by
 * kmath.h's formula, and the column sums that the build's col_sum_acc adds over that dz
 * (rows in order, from out[j]; a NaN sum may be another NaN); widths around the vector
 * lengths, inputs with specials and magnitudes for which the order of a column's
 * additions shows in its bits */
START_TEST(tanh_backward_col_sum_is_the_two_passes)
{
	const int shapes[][2] = {{1, 5}, {7, 37}, {33, 512}, {64, 129}};
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		int rows = shapes[s][0], cols = shapes[s][1];
		size_t n = (size_t)rows * cols;
		float *h = malloc(sizeof(float) * n), *dh = malloc(sizeof(float) * n);
		float *dz_want = malloc(sizeof(float) * n), *dz_got = malloc(sizeof(float) * n);
		float *out0 = malloc(sizeof(float) * cols), *sum_want = malloc(sizeof(float) * cols);
		float *sum_got = malloc(sizeof(float) * cols);
		struct err e;
		fill_inputs(h, n, 70 + s, 1);
		for (size_t i = 0; i < n; i++)
			h[i] = i % 11 == 4 ? h[i] : tanhf(h[i]);
		fill_inputs(dh, n, 80 + s, 1);
		fill_inputs(out0, cols, 90 + s, 0);
		for (size_t i = 0; i < n; i++)
			dz_want[i] = km_tanh_backward(h[i], dh[i]);
		for (int v = -1; v < n_variants; v++) {
			const struct dev_ops *o = v < 0 ? &scalar : &variants[v].ops;
			const char *name = v < 0 ? "scalar" : variants[v].name;
			memcpy(sum_want, out0, sizeof(float) * cols);
			ck_assert_int_eq(o->col_sum_acc(NULL, rows, cols, dz_want, sum_want, &e), ERR_OK);
			memcpy(dz_got, dh, sizeof(float) * n);
			memcpy(sum_got, out0, sizeof(float) * cols);
			ck_assert_int_eq(o->tanh_backward_col_sum(NULL, rows, cols, h, dz_got, sum_got,
								  &e), ERR_OK);
			assert_same_bits("tanh_backward_col_sum dz", name, dz_want, dz_got, n);
			assert_same_bits_or_nans("tanh_backward_col_sum sums", name, sum_want,
						 sum_got, (size_t)cols);
		}
		free(h);
		free(dh);
		free(dz_want);
		free(dz_got);
		free(out0);
		free(sum_want);
		free(sum_got);
	}
}
END_TEST

/* the comparison itself sees a one-ulp difference and a NaN with another payload */
START_TEST(comparison_sees_one_ulp)
{
	float a[4] = {1.0f, 2.0f, NAN, 4.0f}, b[4];
	memcpy(b, a, sizeof a);
	ck_assert_int_eq(first_difference(a, b, 4), -1);
	b[1] = nextafterf(b[1], 3.0f);
	ck_assert_int_eq(first_difference(a, b, 4), 1);
	memcpy(b, a, sizeof a);
	uint32_t u;
	memcpy(&u, &b[2], 4);
	u ^= 1;
	memcpy(&b[2], &u, 4);
	ck_assert_int_eq(first_difference(a, b, 4), 2);
}
END_TEST

/* the backend runs the widest build this CPU has */
START_TEST(backend_picks_the_widest_build)
{
	struct dev *d;
	struct err e;
	ck_assert_int_eq(dev_host_create(0, &d, &e), ERR_OK);
	const char *widest = variants[n_variants - 1].name;
	ck_assert_str_eq(dev_host_kernels_name(), widest);
	ck_assert_ptr_eq((void *)d->ops->bias_tanh, (void *)variants[n_variants - 1].ops.bias_tanh);
	dev_destroy(d);
}
END_TEST

/* The host backend counts what the interface makes a GPU do: a wait for each operation
 * that returns a result to the host, none for what is only queued. */
START_TEST(host_backend_counts_waits_launches_and_copies)
{
	struct dev *d;
	struct err e;
	float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8];
	double s;
	int64_t bad;
	uint64_t fp;
	ck_assert_int_eq(dev_host_create(0, &d, &e), ERR_OK);
	const struct dev_ops *o = d->ops;
	ck_assert_uint_eq(d->counts.syncs + d->counts.launches + d->counts.copies, 0);
	/* queued only: copies and launches, no wait */
	ck_assert_int_eq(o->upload(d, y, x, sizeof x, &e), ERR_OK);
	ck_assert_int_eq(o->zero(d, y, sizeof y, &e), ERR_OK);
	ck_assert_int_eq(o->scale(d, 8, 2.0f, x, &e), ERR_OK);
	ck_assert_int_eq(o->gemm(d, 0, 0, 2, 2, 2, 1.0f, x, 2, x, 2, 0.0f, y, 2, &e), ERR_OK);
	ck_assert_uint_eq(d->counts.syncs, 0);
	ck_assert_uint_eq(d->counts.copies, 2);
	ck_assert_uint_eq(d->counts.launches, 2);
	/* each of these makes the host wait */
	ck_assert_int_eq(o->sum(d, 8, x, &s, &e), ERR_OK);
	ck_assert_int_eq(o->count_nonfinite(d, 8, x, &bad, &e), ERR_OK);
	ck_assert_int_eq(o->fingerprint(d, 8, x, 0, &fp, &e), ERR_OK); /* no copy of x */
	ck_assert_int_eq(o->sum_squares(d, 8, x, &s, &e), ERR_OK);
	ck_assert_int_eq(o->download(d, y, x, sizeof x, &e), ERR_OK);
	ck_assert_int_eq(o->sync(d, &e), ERR_OK);
	ck_assert_uint_eq(d->counts.syncs, 6);
	ck_assert_uint_eq(d->counts.launches, 6);
	ck_assert_uint_eq(d->counts.copies, 3);
	dev_destroy(d);
}
END_TEST

int main(void)
{
	variants_init();
	Suite *s = suite_create("kernels");
	TCase *tc = tcase_create("kernels");
	tcase_add_test(tc, bias_tanh_bits);
	tcase_add_test(tc, xent_bits);
	tcase_add_test(tc, xent_is_the_row_formula);
	tcase_add_test(tc, xent_z_loss_against_float64);
	tcase_add_test(tc, xent_class_weights_scale_rows);
	tcase_add_test(tc, elementwise_bits);
	tcase_add_test(tc, tanh_backward_col_sum_is_the_two_passes);
	tcase_add_test(tc, sgd_bits);
	tcase_add_test(tc, adamw_fused_is_per_run);
	tcase_add_test(tc, layernorm_is_the_row_formula);
	tcase_add_test(tc, embedding_bits);
	tcase_add_test(tc, reductions_agree);
	tcase_add_test(tc, fingerprint_sees_bits_and_places);
	tcase_add_test(tc, comparison_sees_one_ulp);
	tcase_add_test(tc, backend_picks_the_widest_build);
	tcase_add_test(tc, host_backend_counts_waits_launches_and_copies);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
