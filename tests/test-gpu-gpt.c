/*
 * test-gpu-gpt: the GPT on the CUDA backend against the host backend (suite gpu).
 *
 * test-gpt-ops compares each GPT operation on small inputs that fit one block of
 * threads. This file runs them where the model runs them: every GPT operation at the
 * shapes of the shipped configurations and of GPT-2 small (LayerNorm over 1,100 rows of
 * width 768, so that the per-row kernels use several blocks; the causal softmax of two
 * heads of a 1,024-position segment in one call; GELU, embed_pos and bias_add past one
 * launch's grid of 16.7 M elements, with GPT-2's 50,257 ids), bit for bit as docs/gpt.md promises. Then a whole
 * training step and the logits of the model, packed and padded, with 4 and with 12 heads,
 * on the GPU and on the host from the same parameters: the loss, the logits and every
 * tensor's gradient within float rounding of the host's (their GEMMs add in other
 * orders), and a second GPU step giving the same bits. The comparison catches a wrong
 * attention: the GPU step with two documents in one segment is refused by it.
 *
 * Without a usable GPU it exits 77 (skipped). Check runs without fork: CUDA does not
 * survive a fork after initialization.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check-run.h"
#include "corpus.h"
#include "dev.h"
#include "gpt_batch.h"
#include "gpt_step.h"
#include "gpu.h"
#include "model.h"
#include "prng.h"
#include "testutil.h"

static struct err E;

/* ---- buffers ---- */

static float *frand(uint64_t seed, size_t n, float amp)
{
	struct prng r;
	float *x = malloc(sizeof(float) * (n ? n : 1));
	ck_assert_ptr_nonnull(x);
	prng_seed(&r, seed, 0x6e7ULL);
	for (size_t i = 0; i < n; i++)
		x[i] = amp * (2.0f * prng_unit(&r) - 1.0f);
	return x;
}

static void *dput(struct dev *d, const void *host, size_t bytes)
{
	void *p = NULL;
	OK(d->ops->alloc(d, bytes, &p, &E));
	OK(d->ops->upload(d, p, host, bytes, &E));
	OK(d->ops->sync(d, &E));
	return p;
}

/* n floats of d's memory at p in a new host array */
static float *dget(struct dev *d, const float *p, size_t n)
{
	float *h = malloc(sizeof(float) * (n ? n : 1));
	ck_assert_ptr_nonnull(h);
	OK(d->ops->download(d, h, p, sizeof(float) * n, &E));
	return h;
}

/* The same inputs on the GPU (g) and on the host (h). */
struct pair {
	float *g, *h;
	size_t n;
};

static struct pair both(struct dev *G, struct dev *H, const float *host, size_t n)
{
	return (struct pair){dput(G, host, n * 4), dput(H, host, n * 4), n};
}

/* the two results hold the same bits; the pair is released */
static void same_bits(struct dev *G, struct dev *H, struct pair p, const char *what)
{
	float *g = dget(G, p.g, p.n), *h = dget(H, p.h, p.n);
	for (size_t i = 0; i < p.n; i++)
		ck_assert_msg(memcmp(&g[i], &h[i], 4) == 0, "%s[%zu]: gpu %.9g host %.9g: not the "
			      "same bits", what, i, g[i], h[i]);
	printf("  %-24s n=%-9zu bit-identical\n", what, p.n);
	free(g);
	free(h);
	G->ops->release(G, p.g);
	H->ops->release(H, p.h);
}

static struct dev *G, *H;

static void ops_setup(void)
{
	struct cuda_dev_sizes sizes = {1 << 20, 0, 0, 0};
	OK(cuda_dev_create(0, 0, &sizes, &G, &E));
	OK(dev_host_create(0, &H, &E));
}

static void ops_teardown(void)
{
	dev_destroy(G);
	dev_destroy(H);
	G = H = NULL;
}

/* ---- the operations at the model's shapes ---- */

START_TEST(layernorm_width_768_over_many_blocks)
{
	int rows = 1100, cols = 768; /* > 256 rows: several blocks of per-row threads */
	size_t n = (size_t)rows * cols;
	float *x = frand(1, n, 3), *w = frand(2, cols, 1.5f), *b = frand(3, cols, 1);
	float *g = frand(4, n, 1), *dx = frand(5, n, 1), *dw = frand(6, cols, 1);
	float *db = frand(7, cols, 1), *zero = calloc(n, 4);
	struct pair X = both(G, H, x, n), W = both(G, H, w, cols), B = both(G, H, b, cols);
	struct pair O = both(G, H, zero, n), M = both(G, H, zero, rows), R = both(G, H, zero, rows);
	struct pair D = both(G, H, g, n), DX = both(G, H, dx, n), DW = both(G, H, dw, cols);
	struct pair DB = both(G, H, db, cols);
	OK(G->ops->layernorm(G, rows, cols, X.g, W.g, B.g, O.g, M.g, R.g, &E));
	OK(H->ops->layernorm(H, rows, cols, X.h, W.h, B.h, O.h, M.h, R.h, &E));
	OK(G->ops->layernorm_backward(G, rows, cols, X.g, W.g, M.g, R.g, D.g, DX.g, DW.g, DB.g,
				      &E));
	OK(H->ops->layernorm_backward(H, rows, cols, X.h, W.h, M.h, R.h, D.h, DX.h, DW.h, DB.h,
				      &E));
	same_bits(G, H, O, "layernorm out");
	same_bits(G, H, M, "layernorm mean");
	same_bits(G, H, R, "layernorm rstd");
	same_bits(G, H, DX, "layernorm_backward dx");
	same_bits(G, H, DW, "layernorm_backward dw");
	same_bits(G, H, DB, "layernorm_backward db");
	same_bits(G, H, X, "layernorm x (input)");
	same_bits(G, H, D, "layernorm dout (input)");
	same_bits(G, H, W, "layernorm w (input)");
	same_bits(G, H, B, "layernorm b (input)");
	free(x), free(w), free(b), free(g), free(dx), free(dw), free(db), free(zero);
}
END_TEST

/* one position over 3 heads, and 2 heads of 1,024 positions in one call */
START_TEST(causal_softmax_of_1024_positions)
{
	const int sizes[] = {1, 1024}, heads[] = {3, 2};
	for (int k = 0; k < 2; k++) {
		int n = sizes[k];
		size_t nn = (size_t)n * n, len = nn * heads[k];
		float *s = frand(10 + k, len, 6), *dp = frand(20 + k, len, 1);
		struct pair S = both(G, H, s, len), DP = both(G, H, dp, len);
		float scale = 1.0f / sqrtf(64.0f);
		OK(G->ops->causal_softmax(G, heads[k], n, nn, scale, S.g, &E));
		OK(H->ops->causal_softmax(H, heads[k], n, nn, scale, S.h, &E));
		OK(G->ops->causal_softmax_backward(G, heads[k], n, nn, scale, S.g, DP.g, &E));
		OK(H->ops->causal_softmax_backward(H, heads[k], n, nn, scale, S.h, DP.h, &E));
		same_bits(G, H, S, n == 1 ? "causal_softmax n=1" : "causal_softmax n=1024");
		same_bits(G, H, DP, n == 1 ? "causal_softmax_back n=1" : "causal_softmax_back n=1024");
		free(s), free(dp);
	}
}
END_TEST

/* 16.8 M elements: more than one launch's 65,536 blocks of 256 threads */
START_TEST(gelu_past_one_grid)
{
	size_t n = (size_t)65536 * 256 + 4099;
	float *x = frand(30, n, 8), *g = frand(31, n, 1);
	struct pair X = both(G, H, x, n), Y = both(G, H, g, n), D = both(G, H, g, n);
	OK(G->ops->gelu(G, (int)n, X.g, Y.g, &E));
	OK(H->ops->gelu(H, (int)n, X.h, Y.h, &E));
	OK(G->ops->gelu_backward(G, (int)n, X.g, D.g, &E));
	OK(H->ops->gelu_backward(H, (int)n, X.h, D.h, &E));
	float *last = dget(G, Y.g + n - 1, 1);
	ck_assert_msg(memcmp(last, &g[n - 1], 4) != 0, "gelu did not reach the last element");
	free(last);
	same_bits(G, H, Y, "gelu 16.8M");
	same_bits(G, H, D, "gelu_backward 16.8M");
	same_bits(G, H, X, "gelu x (input)");
	free(x), free(g);
}
END_TEST

/* GPT-2 small's tables (50,257 ids, 1,024 positions, width 768), over more rows than
 * one grid covers */
START_TEST(embed_pos_and_bias_add_gpt2_shapes)
{
	int V = 50257, T = 1024, C = 768, rows = 21900; /* 16.8 M elements */
	size_t n = (size_t)rows * C;
	int32_t *ids = malloc(sizeof(int32_t) * rows), *pos = malloc(sizeof(int32_t) * rows);
	struct prng r;
	prng_seed(&r, 40, 40);
	for (int p = 0; p < rows; p++) {
		ids[p] = p == rows - 1 ? V - 1 : (int32_t)prng_below(&r, (uint32_t)V);
		pos[p] = p % T;
	}
	float *wte = frand(41, (size_t)V * C, 1), *wpe = frand(42, (size_t)T * C, 1);
	float *bias = frand(43, C, 1), *zero = calloc(n, 4);
	struct pair WT = both(G, H, wte, (size_t)V * C), WP = both(G, H, wpe, (size_t)T * C);
	struct pair B = both(G, H, bias, C), X = both(G, H, zero, n);
	int32_t *ig = dput(G, ids, sizeof(int32_t) * rows), *ih = dput(H, ids, sizeof(int32_t) * rows);
	int32_t *pg = dput(G, pos, sizeof(int32_t) * rows), *ph = dput(H, pos, sizeof(int32_t) * rows);
	OK(G->ops->embed_pos(G, rows, C, ig, pg, WT.g, WP.g, X.g, &E));
	OK(H->ops->embed_pos(H, rows, C, ih, ph, WT.h, WP.h, X.h, &E));
	OK(G->ops->bias_add(G, rows, C, B.g, X.g, &E));
	OK(H->ops->bias_add(H, rows, C, B.h, X.h, &E));
	float *last = dget(G, X.g + n - 1, 1);
	ck_assert(*last == (wte[(size_t)(V - 1) * C + C - 1] +
			    wpe[(size_t)((rows - 1) % T) * C + C - 1]) + bias[C - 1]);
	free(last);
	same_bits(G, H, X, "embed_pos + bias_add");
	same_bits(G, H, WT, "wte (input)");
	same_bits(G, H, WP, "wpe (input)");
	same_bits(G, H, B, "bias (input)");
	G->ops->release(G, ig), G->ops->release(G, pg);
	H->ops->release(H, ih), H->ops->release(H, ph);
	free(ids), free(pos), free(wte), free(wpe), free(bias), free(zero);
}
END_TEST

/* ---- the whole model ---- */

/* One model on one device: its workspace, batch, parameters and gradient there. */
struct side {
	struct dev *d;
	struct model_ws *ws;
	float *params, *grads;
	double *loss_acc; /* in d's memory */
};

struct rig {
	struct settings s;
	struct corpus c;
	struct model_shape m;
	struct model_batch *b;
	int max_rows;
	float *host_params;
	struct side gpu, host;
};

static void side_open(struct rig *r, struct side *sd, struct dev *d)
{
	sd->d = d;
	OK(model_ws_create(d, &r->m, r->max_rows, &sd->ws, &E));
	sd->params = dput(d, r->host_params, sizeof(float) * r->m.n_params);
	OK(d->ops->alloc(d, sizeof(float) * r->m.n_params, (void **)&sd->grads, &E));
	OK(d->ops->alloc(d, sizeof(double), (void **)&sd->loss_acc, &E));
}

static void side_close(struct side *sd)
{
	model_ws_destroy(sd->ws);
	sd->d->ops->release(sd->d, sd->params);
	sd->d->ops->release(sd->d, sd->grads);
	sd->d->ops->release(sd->d, sd->loss_acc);
	dev_destroy(sd->d);
}

static void rig_open(struct rig *r, const char *sets)
{
	struct dev *g, *h;
	struct model_dev_needs needs;
	testutil_settings(&r->s, "model.kind=gpt %s", sets);
	OK(corpus_build(&r->s, &r->c, &E));
	OK(model_shape_init(&r->m, &r->s, &E));
	r->max_rows = model_max_rows(&r->m, 6, r->s.max_len);
	OK(model_batch_alloc(&r->m, r->max_rows, &r->b, &E));
	model_dev_needs(&r->m, r->max_rows, &needs);
	struct cuda_dev_sizes sizes = {model_upload_bytes(&r->m, r->max_rows), needs.embed_slots,
				       needs.embed_ids, needs.embed_dim};
	OK(cuda_dev_create(0, 0, &sizes, &g, &E));
	OK(dev_host_create(0, &h, &E));
	r->host_params = malloc(sizeof(float) * r->m.n_params);
	model_init_params(&r->m, 5, r->host_params);
	/* a fresh model's LayerNorm weights and biases are 1 and 0: move them */
	for (size_t i = 0; i < r->m.n_params; i++)
		r->host_params[i] += 0.05f * sinf((float)i * 0.7f);
	side_open(r, &r->gpu, g);
	side_open(r, &r->host, h);
}

static void rig_close(struct rig *r)
{
	side_close(&r->gpu);
	side_close(&r->host);
	free(r->host_params);
	model_batch_free(r->b);
	corpus_free(&r->c);
}

/* One step on sd from zeroed gradients: the loss sum, the gradient in a new host array */
static float *step_on(struct rig *r, struct side *sd, double *loss)
{
	struct dev *d = sd->d;
	OK(d->ops->zero(d, sd->grads, sizeof(float) * r->m.n_params, &E));
	OK(d->ops->zero(d, sd->loss_acc, sizeof(double), &E));
	OK(model_step(sd->ws, sd->params, sd->grads, r->b, 0.25f, 1.0, sd->loss_acc, &E));
	OK(d->ops->download(d, loss, sd->loss_acc, sizeof(double), &E));
	return dget(d, sd->grads, r->m.n_params);
}

/* the largest difference of GPU and host over tensor t's gradient, relative to the
 * tensor's largest host component (which must not be 0) */
static double tensor_error(const struct model_shape *m, int t, const float *g, const float *h)
{
	const struct param_info *pi = &m->p[t];
	double worst = 0.0, norm = 0.0;
	for (size_t k = pi->offset; k < pi->offset + pi->count; k++) {
		ck_assert_msg(isfinite(g[k]), "%s[%zu]: gpu %g", pi->name, k - pi->offset, g[k]);
		worst = fmax(worst, fabs((double)g[k] - h[k]));
		norm = fmax(norm, fabs((double)h[k]));
	}
	ck_assert_msg(norm > 0.0, "%s: no gradient on the host", pi->name);
	return worst / norm;
}

/* the worst relative error over the tensors (each printed with `label`) */
static double gradient_error(const struct rig *r, const float *g, const float *h,
			     const char *label)
{
	double worst = 0.0;
	for (int t = 0; t < r->m.n_tensors; t++) {
		double err = tensor_error(&r->m, t, g, h);
		if (label)
			printf("  %s %-9s max |gpu - host| / max |host| = %.3g\n", label,
			       r->m.p[t].name, err);
		worst = fmax(worst, err);
	}
	return worst;
}

/* GEMMs in other orders than OpenBLAS's: float rounding, about 1e-6 of the largest
 * component; an attention or index error is of the order of the gradient itself */
#define STEP_TOL 1e-4

static void model_matches_host(const char *sets, int layout)
{
	struct rig r;
	int ids[6] = {0, 3, 5, 8, 13, 21};
	const char *name = layout == LAYOUT_PACKED ? "packed" : "padded";
	rig_open(&r, sets);
	OK(model_batch_build(r.b, &r.c, ids, 6, layout, &E));
	ck_assert_int_gt(r.b->supervised, 0);
	double lg = 0.0, lh = 0.0, lg2 = 0.0;
	float *gg = step_on(&r, &r.gpu, &lg), *gh = step_on(&r, &r.host, &lh);
	printf("  %s, %d rows: loss gpu %.9g host %.9g\n", name, r.b->rows, lg, lh);
	ck_assert_msg(fabs(lg - lh) <= 1e-5 * fabs(lh), "loss: gpu %.9g host %.9g", lg, lh);
	ck_assert_msg(gradient_error(&r, gg, gh, name) <= STEP_TOL, "gradient beyond %g", STEP_TOL);
	/* the GPU repeats itself bit for bit */
	float *gg2 = step_on(&r, &r.gpu, &lg2);
	ck_assert_msg(memcmp(&lg, &lg2, sizeof lg) == 0, "gpu loss %.17g then %.17g", lg, lg2);
	ck_assert_msg(memcmp(gg, gg2, sizeof(float) * r.m.n_params) == 0,
		      "a second gpu step gave other gradient bits");
	/* the logits */
	size_t nl = (size_t)r.b->rows * r.m.vocab;
	float *xg = malloc(sizeof(float) * nl), *xh = malloc(sizeof(float) * nl);
	OK(gpt_logits(r.gpu.ws, r.gpu.params, r.b, xg, &E));
	OK(gpt_logits(r.host.ws, r.host.params, r.b, xh, &E));
	double worst = 0.0, norm = 0.0;
	for (size_t i = 0; i < nl; i++) {
		worst = fmax(worst, fabs((double)xg[i] - xh[i]));
		norm = fmax(norm, fabs((double)xh[i]));
	}
	printf("  %s logits max |gpu - host| = %.3g (largest %.3g)\n", name, worst, norm);
	ck_assert_msg(worst <= 1e-5 * norm, "logits: gpu differs by %g (largest %g)", worst, norm);
	free(xg), free(xh), free(gg), free(gg2), free(gh);
	rig_close(&r);
}

/* 4 heads of width 16; 12 heads of width 16 (GPT-2's head count) */
#define GPT_H4 "model.layers=2 model.heads=4 model.width=64 model.context=48 data.vocab=300 " \
	       "data.min_len=5 data.max_len=48 data.prefix_max=2"
#define GPT_H12 "model.layers=1 model.heads=12 model.width=192 model.context=64 " \
		"data.vocab=600 data.min_len=5 data.max_len=64 data.prefix_max=2"

START_TEST(step_matches_host_4_heads)
{
	model_matches_host(GPT_H4, LAYOUT_PACKED);
	model_matches_host(GPT_H4, LAYOUT_PADDED);
}
END_TEST

START_TEST(step_matches_host_12_heads)
{
	model_matches_host(GPT_H12, LAYOUT_PACKED);
	model_matches_host(GPT_H12, LAYOUT_PADDED);
}
END_TEST

/* Two neighbouring segments of b made one, the first pair that fits the context (the
 * workspace holds one context x context score matrix); 0 when no pair fits. */
static int merge_two_segments(struct gpt_batch *b, int context)
{
	for (int i = 0; i + 1 < b->n_seg; i++) {
		if (b->seg[2 * i + 1] + b->seg[2 * i + 3] > context)
			continue;
		b->seg[2 * i + 1] += b->seg[2 * i + 3];
		for (int k = i + 1; k + 1 < b->n_seg; k++) {
			b->seg[2 * k] = b->seg[2 * k + 2];
			b->seg[2 * k + 1] = b->seg[2 * k + 3];
		}
		b->n_seg--;
		return 1;
	}
	return 0;
}

/* The comparison can fail: the GPU step with two documents in one segment (the second
 * attending to the first) is far from the host's with one segment per document. */
START_TEST(comparison_catches_a_shared_segment)
{
	struct rig r;
	int ids[6] = {0, 3, 5, 8, 13, 21};
	rig_open(&r, GPT_H4);
	OK(model_batch_build(r.b, &r.c, ids, 6, LAYOUT_PACKED, &E));
	double lg = 0.0, lh = 0.0;
	float *gh = step_on(&r, &r.host, &lh);
	ck_assert_msg(merge_two_segments((struct gpt_batch *)r.b, r.s.context),
		      "no two neighbouring documents fit one context");
	float *gg = step_on(&r, &r.gpu, &lg);
	double err = gradient_error(&r, gg, gh, NULL);
	printf("  one shared segment: worst relative gradient error %.3g\n", err);
	ck_assert_msg(err > 100 * STEP_TOL, "a shared segment passed the comparison (%g)", err);
	free(gg), free(gh);
	rig_close(&r);
}
END_TEST

int main(void)
{
	int n_gpus = 0;
	char why[256] = "";
	struct err e;
	err_clear(&e);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (gpu_device_count(&n_gpus, why, sizeof why, &e) != ERR_OK || n_gpus == 0) {
		printf("test-gpu-gpt: no GPU, skipping: %s\n", why[0] ? why : e.msg);
		return 77;
	}
	Suite *s = suite_create("gpu-gpt");
	TCase *ops = tcase_create("ops");
	tcase_add_checked_fixture(ops, ops_setup, ops_teardown);
	tcase_add_test(ops, layernorm_width_768_over_many_blocks);
	tcase_add_test(ops, causal_softmax_of_1024_positions);
	tcase_add_test(ops, gelu_past_one_grid);
	tcase_add_test(ops, embed_pos_and_bias_add_gpt2_shapes);
	suite_add_tcase(s, ops);
	TCase *model = tcase_create("model");
	tcase_add_test(model, step_matches_host_4_heads);
	tcase_add_test(model, step_matches_host_12_heads);
	tcase_add_test(model, comparison_catches_a_shared_segment);
	suite_add_tcase(s, model);
	return check_run(s, 1);
}
