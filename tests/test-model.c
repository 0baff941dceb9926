/*
 * test-model: the model's loss and gradient against an independent double-precision
 * reference (itself checked by central differences), the gradient against float
 * finite differences of model_eval, packed and padded layouts, unsupervised prefixes,
 * and the shared element math (kmath.h).
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "check-run.h"
#include "corpus.h"
#include "dev.h"
#include "kmath.h"
#include "model.h"
#include "window_mlp.h"
#include "testutil.h"

/* model_step with its loss sum on the host: the host backend's device memory is the
 * host's, so the accumulator can be a local double */
static int step_loss(struct model_ws *ws, const float *params, float *grads, const struct model_batch *b,
		     float scale, double *loss, struct err *e)
{
	*loss = 0.0;
	return model_step(ws, params, grads, b, scale, 1.0, loss, e);
}

struct fixture {
	struct settings s;
	struct corpus c;
	struct model_shape m;
	struct dev *d;
	struct model_ws *ws;
	struct model_batch *b;
	float *params, *grads;
};

static void fixture_open(struct fixture *f, int prefix_max, int hidden)
{
	struct err e;
	err_clear(&e);
	testutil_settings(&f->s, "data.prefix_max=%d model.hidden=%d", prefix_max, hidden);
	ck_assert_int_eq(corpus_build(&f->s, &f->c, &e), ERR_OK);
	window_mlp_shape(&f->m, f->s.vocab, f->s.context, f->s.embed, f->s.hidden);
	ck_assert_int_eq(dev_host_create(0, &f->d, &e), ERR_OK);
	ck_assert_int_eq(model_ws_create(f->d, &f->m, model_max_rows(&f->m, 4, f->s.max_len), &f->ws, &e),
			 ERR_OK);
	ck_assert_int_eq(model_batch_alloc(&f->m, model_max_rows(&f->m, 4, f->s.max_len), &f->b, &e),
			 ERR_OK);
	f->params = calloc(f->m.n_params, sizeof(float));
	f->grads = calloc(f->m.n_params, sizeof(float));
	model_init_params(&f->m, 11, f->params);
	/* non-zero biases so that their gradients are exercised away from the origin */
	for (size_t i = 0; i < f->m.p[WINDOW_MLP_B1].count; i++)
		f->params[f->m.p[WINDOW_MLP_B1].offset + i] = 0.05f * (float)((int)(i % 5) - 2);
	for (size_t i = 0; i < f->m.p[WINDOW_MLP_B2].count; i++)
		f->params[f->m.p[WINDOW_MLP_B2].offset + i] = 0.03f * (float)((int)(i % 7) - 3);
}

static void fixture_close(struct fixture *f)
{
	free(f->params);
	free(f->grads);
	model_batch_free(f->b);
	model_ws_destroy(f->ws);
	dev_destroy(f->d);
	corpus_free(&f->c);
}

static double loss_at(struct fixture *f)
{
	struct err e;
	double loss;
	int64_t hits;
	err_clear(&e);
	ck_assert_int_eq(model_eval(f->ws, f->params, f->b, &loss, &hits, &e), ERR_OK);
	return loss;
}

/*
 * An independent reference for the gradient: the model of model.h written again here in
 * double precision, straight from its documented formulas, calling no model or device
 * code. Parameter layout (model.h): embed [V x D], w1 [H x C*D], b1 [H], w2 [V x H],
 * b2 [V], row-major, in that order. For each row p with target y >= 0:
 *   x = concat(embed[ctx[p][0]], ..., embed[ctx[p][C-1]])     (C*D)
 *   h = tanh(w1 x + b1), l = w2 h + b2, loss_p = logsumexp(l) - l[y]
 * model_step adds sum_p loss_p to its accumulator and adds the gradient of scale * sum_p loss_p.
 */
struct ref_net {
	int V, C, D, H;
	size_t off[WINDOW_MLP_NTENSORS];
	size_t count[WINDOW_MLP_NTENSORS];
	size_t n;
};

static void ref_net_init(struct ref_net *r, int vocab, int context, int embed, int hidden)
{
	size_t cnt[WINDOW_MLP_NTENSORS] = {
		(size_t)vocab * embed, (size_t)hidden * context * embed, (size_t)hidden,
		(size_t)vocab * hidden, (size_t)vocab,
	};
	r->V = vocab;
	r->C = context;
	r->D = embed;
	r->H = hidden;
	r->n = 0;
	for (int t = 0; t < WINDOW_MLP_NTENSORS; t++) {
		r->off[t] = r->n;
		r->count[t] = cnt[t];
		r->n += cnt[t];
	}
}

enum { REF_MAX = 64 }; /* bound on C*D, H and V of the reference's shapes */

/* Loss sum over the supervised rows; when `grad` is not NULL, the gradient of
 * scale * loss sum is ADDED to it. */
static double ref_loss_grad(const struct ref_net *r, const double *th, int rows,
			    const int32_t *ctx, const int32_t *target, double scale, double *grad)
{
	const int V = r->V, C = r->C, D = r->D, H = r->H, CD = C * D;
	const double *E = th + r->off[WINDOW_MLP_EMBED], *W1 = th + r->off[WINDOW_MLP_W1],
		     *B1 = th + r->off[WINDOW_MLP_B1], *W2 = th + r->off[WINDOW_MLP_W2],
		     *B2 = th + r->off[WINDOW_MLP_B2];
	double x[REF_MAX], h[REF_MAX], l[REF_MAX], dl[REF_MAX], dz[REF_MAX], dx[REF_MAX];
	double total = 0.0;
	ck_assert(CD <= REF_MAX && H <= REF_MAX && V <= REF_MAX);
	for (int p = 0; p < rows; p++) {
		const int32_t *c = ctx + (size_t)p * C;
		int y = target[p];
		if (y < 0)
			continue; /* not supervised: no loss, no gradient */
		for (int j = 0; j < C; j++)
			for (int t = 0; t < D; t++)
				x[j * D + t] = E[(size_t)c[j] * D + t];
		for (int i = 0; i < H; i++) {
			double z = B1[i];
			for (int k = 0; k < CD; k++)
				z += W1[(size_t)i * CD + k] * x[k];
			h[i] = tanh(z);
		}
		double mx = -HUGE_VAL;
		for (int v = 0; v < V; v++) {
			double s = B2[v];
			for (int i = 0; i < H; i++)
				s += W2[(size_t)v * H + i] * h[i];
			l[v] = s;
			mx = s > mx ? s : mx;
		}
		double se = 0.0;
		for (int v = 0; v < V; v++)
			se += exp(l[v] - mx);
		total += mx + log(se) - l[y];
		if (!grad)
			continue;
		double *gE = grad + r->off[WINDOW_MLP_EMBED], *gW1 = grad + r->off[WINDOW_MLP_W1],
		       *gB1 = grad + r->off[WINDOW_MLP_B1], *gW2 = grad + r->off[WINDOW_MLP_W2],
		       *gB2 = grad + r->off[WINDOW_MLP_B2];
		for (int v = 0; v < V; v++)
			dl[v] = scale * (exp(l[v] - mx) / se - (v == y ? 1.0 : 0.0));
		for (int v = 0; v < V; v++) {
			gB2[v] += dl[v];
			for (int i = 0; i < H; i++)
				gW2[(size_t)v * H + i] += dl[v] * h[i];
		}
		for (int i = 0; i < H; i++) {
			double dh = 0.0;
			for (int v = 0; v < V; v++)
				dh += dl[v] * W2[(size_t)v * H + i];
			dz[i] = dh * (1.0 - h[i] * h[i]);
			gB1[i] += dz[i];
			for (int k = 0; k < CD; k++)
				gW1[(size_t)i * CD + k] += dz[i] * x[k];
		}
		for (int k = 0; k < CD; k++) {
			double s = 0.0;
			for (int i = 0; i < H; i++)
				s += dz[i] * W1[(size_t)i * CD + k];
			dx[k] = s;
		}
		for (int j = 0; j < C; j++)
			for (int t = 0; t < D; t++)
				gE[(size_t)c[j] * D + t] += dx[j * D + t];
	}
	return total;
}

/* splitmix64: the test's own deterministic draws, independent of prng.h */
static uint64_t ref_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static double ref_unit(uint64_t *s) /* uniform in [0, 1) */
{
	return (double)(ref_next(s) >> 11) * 0x1.0p-53;
}

/* The test shape and batch: V = 9 ids, C = 3, D = 2, H = 6, eight rows drawn at random,
 * then edited so that the batch has an unsupervised row, an id repeated inside one
 * context and across rows (the embedding gradient accumulates), and an id that appears
 * in no context (its embedding gradient is exactly zero). */
enum { REF_V = 9, REF_C = 3, REF_D = 2, REF_H = 6, REF_ROWS = 8, REF_UNUSED = REF_V - 1 };

static void ref_batch(int32_t *ctx, int32_t *target)
{
	uint64_t s = 2024;
	for (int p = 0; p < REF_ROWS; p++) {
		for (int j = 0; j < REF_C; j++)
			ctx[p * REF_C + j] = (int32_t)(ref_next(&s) % (REF_V - 1));
		target[p] = (int32_t)(ref_next(&s) % REF_V);
	}
	ctx[0] = ctx[1] = ctx[2] = DATA_BOS; /* the start of a sequence */
	ctx[3 * REF_C + 0] = ctx[3 * REF_C + 2] = 5; /* repeated inside one context */
	target[4] = -1; /* a prompt or padding position */
	target[6] = REF_UNUSED;
}

/* Parameters drawn once in double and rounded to float, so that the model and the
 * reference see exactly the same values. */
static void ref_params(const struct ref_net *r, float *pf, double *pd)
{
	static const double bound[WINDOW_MLP_NTENSORS] = {1.0, 0.6, 0.3, 0.6, 0.3};
	uint64_t s = 99;
	for (int t = 0; t < WINDOW_MLP_NTENSORS; t++)
		for (size_t k = 0; k < r->count[t]; k++) {
			size_t i = r->off[t] + k;
			pf[i] = (float)(bound[t] * (2.0 * ref_unit(&s) - 1.0));
			pd[i] = pf[i];
		}
}

START_TEST(reference_gradient_matches_its_finite_differences)
{
	/* The double reference against central differences of its own loss, h = 1e-5: the
	 * truncation error is about h^2 |f'''| / 6 ~ 1e-11 and the rounding error about
	 * eps |loss| / h ~ 2e-16 * 15 / 1e-5 ~ 3e-10, so 1e-6 relative (plus 1e-8 for
	 * components near zero) leaves a wide margin and still pins each component. */
	struct ref_net r;
	int32_t ctx[REF_ROWS * REF_C], target[REF_ROWS];
	ref_net_init(&r, REF_V, REF_C, REF_D, REF_H);
	ref_batch(ctx, target);
	float *pf = calloc(r.n, sizeof(float));
	double *th = calloc(r.n, sizeof(double)), *g = calloc(r.n, sizeof(double));
	ref_params(&r, pf, th);
	const double scale = 0.375, h = 1e-5;
	ref_loss_grad(&r, th, REF_ROWS, ctx, target, scale, g);
	for (size_t i = 0; i < r.n; i++) {
		double keep = th[i];
		th[i] = keep + h;
		double up = scale * ref_loss_grad(&r, th, REF_ROWS, ctx, target, scale, NULL);
		th[i] = keep - h;
		double down = scale * ref_loss_grad(&r, th, REF_ROWS, ctx, target, scale, NULL);
		th[i] = keep;
		double fd = (up - down) / (2.0 * h);
		ck_assert_msg(fabs(fd - g[i]) <= 1e-8 + 1e-6 * fabs(fd),
			      "reference component %zu: analytic %.12g, differences %.12g", i, g[i],
			      fd);
	}
	/* the edits of ref_batch() took effect: an untouched embedding row, live others */
	for (int t = 0; t < REF_D; t++)
		ck_assert(g[r.off[WINDOW_MLP_EMBED] + (size_t)REF_UNUSED * REF_D + t] == 0.0);
	ck_assert(g[r.off[WINDOW_MLP_EMBED] + 5 * REF_D] != 0.0);
	free(pf);
	free(th);
	free(g);
}
END_TEST

/*
 * Tolerance of the float gradient against the double reference: |g - ref| <= 1e-6 +
 * 1e-5 |ref|. Each component is a short sum (at most rows * C = 24 terms) of products of
 * float values below 1; float rounding is 6e-8 per operation and the element functions
 * of kmath.h add at most 5e-7 relative (exp) and 3e-7 absolute (tanh), which bounds the
 * error near 1e-6 for these magnitudes. Observed: at most 6e-8 absolute with gradients
 * up to 0.46, so the bound holds with a margin of about 15. A tensor whose gradient is
 * off by a factor 1.001 moves its largest components (0.2 to 0.46) by 2e-4 or more,
 * over sixty times the tolerance; the test checks that this sensitivity holds.
 */
#define GRAD_ATOL 1e-6
#define GRAD_RTOL 1e-5
START_TEST(gradient_matches_double_reference)
{
	struct ref_net r;
	struct model_shape m;
	struct dev *d;
	struct model_ws *ws;
	struct model_batch *b;
	struct window_mlp_batch *wb;
	struct err e;
	err_clear(&e);
	ref_net_init(&r, REF_V, REF_C, REF_D, REF_H);
	window_mlp_shape(&m, REF_V, REF_C, REF_D, REF_H);
	/* the layout model.h documents is the one the reference assumes */
	ck_assert_uint_eq(m.n_params, r.n);
	for (int t = 0; t < WINDOW_MLP_NTENSORS; t++) {
		ck_assert_uint_eq(m.p[t].offset, r.off[t]);
		ck_assert_uint_eq(m.p[t].count, r.count[t]);
	}
	ck_assert_int_eq(model_batch_alloc(&m, REF_ROWS, &b, &e), ERR_OK);
	wb = window_mlp_batch_of(b);
	ref_batch(wb->ctx, wb->target);
	b->rows = REF_ROWS;
	b->supervised = 0;
	for (int p = 0; p < REF_ROWS; p++)
		b->supervised += wb->target[p] >= 0;
	ck_assert_int_eq(b->supervised, REF_ROWS - 1);
	float *pf = calloc(r.n, sizeof(float)), *gf = calloc(r.n, sizeof(float));
	double *th = calloc(r.n, sizeof(double)), *g = calloc(r.n, sizeof(double));
	ref_params(&r, pf, th);
	const float scale = 0.375f; /* exact in float: the reference uses the same value */
	double ref_loss = ref_loss_grad(&r, th, REF_ROWS, wb->ctx, wb->target, scale, g);

	ck_assert_int_eq(dev_host_create(0, &d, &e), ERR_OK);
	ck_assert_int_eq(model_ws_create(d, &m, REF_ROWS, &ws, &e), ERR_OK);
	double loss, eval_loss;
	int64_t hits;
	ck_assert_int_eq(step_loss(ws, pf, gf, b, scale, &loss, &e), ERR_OK);
	ck_assert_int_eq(model_eval(ws, pf, b, &eval_loss, &hits, &e), ERR_OK);
	/* per-row losses are float, rounded once from double (kmath.h) after float logits
	 * that carry a few 1e-7 of error: at most about 3e-6 over seven rows of about
	 * log(V) ~ 2 each, under 1e-6 of the sum (observed: 2.5e-7 of 14.7) */
	ck_assert_msg(fabs(loss - ref_loss) <= 1e-6 * ref_loss, "loss %.9g, reference %.9g", loss,
		      ref_loss);
	ck_assert_msg(fabs(eval_loss - ref_loss) <= 1e-6 * ref_loss,
		      "eval loss %.9g, reference %.9g", eval_loss, ref_loss);
	/* every component of every tensor, against the double reference */
	for (int t = 0; t < WINDOW_MLP_NTENSORS; t++) {
		double worst = 0.0, largest = 0.0;
		size_t at = 0;
		for (size_t k = 0; k < r.count[t]; k++) {
			size_t i = r.off[t] + k;
			largest = fabs(g[i]) > largest ? fabs(g[i]) : largest;
			double q = fabs((double)gf[i] - g[i]) / (GRAD_ATOL + GRAD_RTOL * fabs(g[i]));
			if (q > worst) {
				worst = q;
				at = k;
			}
		}
		ck_assert_msg(worst <= 1.0,
			      "tensor %s component %zu: model %.9g, reference %.9g"
			      " (%.3g of the tolerance)",
			      m.p[t].name, at, gf[r.off[t] + at], g[r.off[t] + at], worst);
		/* sensitivity: scaling this tensor's gradient by 1.001 would break the bound */
		ck_assert_msg(1e-3 * largest > 10.0 * (GRAD_ATOL + GRAD_RTOL * largest),
			      "tensor %s: gradients too small (%g) to detect a 0.1%% error",
			      m.p[t].name, largest);
	}
	model_ws_destroy(ws);
	dev_destroy(d);
	model_batch_free(b);
	free(pf);
	free(gf);
	free(th);
	free(g);
}
END_TEST

START_TEST(gradient_matches_finite_differences)
{
	struct fixture f;
	struct err e;
	err_clear(&e);
	fixture_open(&f, 2, 6);
	int ids[3] = {0, 5, 9};
	ck_assert_int_eq(model_batch_build(f.b, &f.c, ids, 3, LAYOUT_PACKED, &e), ERR_OK);
	double loss;
	ck_assert_int_eq(step_loss(f.ws, f.params, f.grads, f.b, 1.0f, &loss, &e), ERR_OK);
	/* every component of every tensor, central differences in float with h = 1e-2: a
	 * coarse check that model_step and model_eval agree on a corpus batch (float
	 * differences cannot resolve small errors; gradient_matches_double_reference does);
	 * the loss is a sum over few positions so its float rounding stays small */
	const float h = 1e-2f;
	int checked = 0;
	for (int t = 0; t < WINDOW_MLP_NTENSORS; t++) {
		double worst = 0.0;
		for (size_t k = 0; k < f.m.p[t].count; k++) {
			size_t i = f.m.p[t].offset + k;
			float keep = f.params[i];
			f.params[i] = keep + h;
			double up = loss_at(&f);
			f.params[i] = keep - h;
			double down = loss_at(&f);
			f.params[i] = keep;
			double fd = (up - down) / (2.0 * h);
			double err = fabs(fd - f.grads[i]) / (1e-2 + fabs(fd));
			worst = err > worst ? err : worst;
			checked++;
		}
		ck_assert_msg(worst < 2e-2, "tensor %s: worst relative difference %g", f.m.p[t].name,
			      worst);
	}
	ck_assert_int_eq(checked, (int)f.m.n_params);
	fixture_close(&f);
}
END_TEST

START_TEST(gradient_is_linear_in_scale)
{
	struct fixture f;
	struct err e;
	err_clear(&e);
	fixture_open(&f, 0, 8);
	int ids[2] = {1, 2};
	double l1, l2;
	ck_assert_int_eq(model_batch_build(f.b, &f.c, ids, 2, LAYOUT_PACKED, &e), ERR_OK);
	ck_assert_int_eq(step_loss(f.ws, f.params, f.grads, f.b, 1.0f, &l1, &e), ERR_OK);
	float *g2 = calloc(f.m.n_params, sizeof(float));
	ck_assert_int_eq(step_loss(f.ws, f.params, g2, f.b, 0.5f, &l2, &e), ERR_OK);
	ck_assert(l1 == l2);
	for (size_t i = 0; i < f.m.n_params; i++)
		ck_assert_float_eq_tol(g2[i], 0.5f * f.grads[i], 1e-6f + 1e-5f * fabsf(f.grads[i]));
	free(g2);
	fixture_close(&f);
}
END_TEST

START_TEST(packed_and_padded_agree)
{
	struct fixture f;
	struct err e;
	err_clear(&e);
	fixture_open(&f, 3, 8);
	int ids[4] = {0, 3, 7, 12};
	double lp, lq;
	ck_assert_int_eq(model_batch_build(f.b, &f.c, ids, 4, LAYOUT_PACKED, &e), ERR_OK);
	int packed_rows = f.b->rows;
	int64_t sup = f.b->supervised;
	ck_assert_int_eq(step_loss(f.ws, f.params, f.grads, f.b, 0.25f, &lp, &e), ERR_OK);
	ck_assert_int_eq(model_batch_build(f.b, &f.c, ids, 4, LAYOUT_PADDED, &e), ERR_OK);
	ck_assert_int_gt(f.b->rows, packed_rows); /* padding and prompts laid out */
	ck_assert_int_eq(f.b->supervised, sup);
	float *g2 = calloc(f.m.n_params, sizeof(float));
	ck_assert_int_eq(step_loss(f.ws, f.params, g2, f.b, 0.25f, &lq, &e), ERR_OK);
	ck_assert_msg(fabs(lp - lq) <= 1e-6 * fabs(lp), "lp %.17g lq %.17g", lp, lq);
	for (size_t i = 0; i < f.m.n_params; i++)
		ck_assert_float_eq_tol(g2[i], f.grads[i], 1e-6f + 1e-5f * fabsf(f.grads[i]));
	free(g2);
	fixture_close(&f);
}
END_TEST

START_TEST(prefix_positions_are_not_targets)
{
	struct fixture f;
	struct err e;
	err_clear(&e);
	fixture_open(&f, 3, 8);
	int id = -1;
	for (int i = 0; i < f.c.n && id < 0; i++)
		if (f.c.prefix[i] > 0)
			id = i;
	ck_assert_int_ge(id, 0);
	ck_assert_int_eq(model_batch_build(f.b, &f.c, &id, 1, LAYOUT_PACKED, &e), ERR_OK);
	ck_assert_int_eq(f.b->rows, corpus_supervised(&f.c, id));
	ck_assert_int_eq(f.b->supervised, corpus_len(&f.c, id) - f.c.prefix[id]);
	double packed_loss;
	ck_assert_int_eq(step_loss(f.ws, f.params, f.grads, f.b, 1.0f, &packed_loss, &e), ERR_OK);
	/* the same sequence with the prompt removed from the targets by hand: building the
	 * supervised part alone gives the same loss only if prompts were not targets */
	ck_assert_int_eq(model_batch_build(f.b, &f.c, &id, 1, LAYOUT_PADDED, &e), ERR_OK);
	int masked = 0;
	for (int r = 0; r < f.c.prefix[id]; r++)
		masked += window_mlp_batch_of(f.b)->target[r] == -1;
	ck_assert_int_eq(masked, f.c.prefix[id]);
	double padded_loss;
	int64_t hits;
	ck_assert_int_eq(model_eval(f.ws, f.params, f.b, &padded_loss, &hits, &e), ERR_OK);
	/* float rounding only: a GEMM of other rows may round a row's products otherwise
	 * (oneDNN's blocking depends on the row count); a prompt counted as a target would
	 * add whole loss terms */
	ck_assert_double_eq_tol(packed_loss, padded_loss, 1e-6 * fabs(packed_loss));
	fixture_close(&f);
}
END_TEST

START_TEST(kmath_matches_libm)
{
	double worst_exp = 0.0, worst_tanh = 0.0;
	for (float x = -80.0f; x < 80.0f; x += 0.0173f) {
		double ref = exp((double)x);
		double rel = fabs(km_exp(x) - ref) / ref;
		worst_exp = rel > worst_exp ? rel : worst_exp;
	}
	for (float x = -9.0f; x < 9.0f; x += 0.00037f) {
		double d = fabs(km_tanh(x) - tanh((double)x));
		worst_tanh = d > worst_tanh ? d : worst_tanh;
	}
	ck_assert_double_lt(worst_exp, 5e-7);
	ck_assert_double_lt(worst_tanh, 3e-7);
	ck_assert(km_exp(-100.0f) == 0.0f);
	/* below -87.3 exactly +0, whatever the reduction computes there (km_exp does not clamp
	 * at -87.3 first): at -infinity that is a NaN, which only the final selection removes */
	const float below[] = {nextafterf(-87.3f, -INFINITY), -88.0f, -1e30f, -FLT_MAX, -INFINITY};
	for (size_t i = 0; i < sizeof below / sizeof below[0]; i++)
		ck_assert_msg(km_to_bits(km_exp(below[i])) == 0u, "km_exp(%g) = %g, not +0",
			      (double)below[i], (double)km_exp(below[i]));
	ck_assert(km_exp(-87.3f) > 0.0f);
	ck_assert(isnan(km_tanh(NAN)));
	ck_assert(isnan(km_exp(NAN)));
	ck_assert(!km_isfinite(INFINITY) && !km_isfinite(NAN) && km_isfinite(1.0f));
}
END_TEST

START_TEST(sgd_follows_pytorch_semantics)
{
	float p = 1.0f, buf = 123.0f;
	km_sgd(&p, 0.5f, &buf, 0.1f, 0.9f, 0.0f, 1); /* first step: buf = g */
	ck_assert_float_eq(buf, 0.5f);
	ck_assert_float_eq(p, 1.0f - 0.1f * 0.5f);
	km_sgd(&p, 0.25f, &buf, 0.1f, 0.9f, 0.0f, 0); /* buf = 0.9 * 0.5 + 0.25 */
	ck_assert_float_eq_tol(buf, 0.7f, 1e-7f);
	float q = 2.0f, b2 = 0.0f;
	km_sgd(&q, 1.0f, &b2, 0.5f, 0.0f, 0.1f, 1); /* weight decay: g' = 1 + 0.1 * 2 */
	ck_assert_float_eq_tol(b2, 1.2f, 1e-7f);
	ck_assert_float_eq_tol(q, 2.0f - 0.6f, 1e-7f);
}
END_TEST

/* rows x vocab at the int boundary: 32767 x 65536 = 2^31 - 65536 runs, 32768 x 65536 =
 * 2^31 would wrap negative in the ops' int count (the op would do nothing and succeed,
 * on both backends): refused before anything is allocated, naming the product */
START_TEST(counts_past_int_are_refused_before_allocation)
{
	struct model_shape m;
	struct err e;
	window_mlp_shape(&m, 65536, 2, 2, 4);
	err_clear(&e);
	ck_assert_int_eq(model_ws_check_size(&m, 32767, &e), ERR_OK);
	ck_assert_int_eq(model_ws_check_size(&m, 32768, &e), ERR_CONFIG);
	ck_assert_msg(strstr(e.msg, "rows x data.vocab = 2147483648") && strstr(e.msg, "train.batch_size"),
		      "%s", e.msg);
	/* model_ws_create refuses it too, without allocating 8 GiB of logits first */
	struct dev *d = NULL;
	struct model_ws *ws = NULL;
	err_clear(&e);
	ck_assert_int_eq(dev_host_create(0, &d, &e), ERR_OK);
	ck_assert_int_eq(model_ws_create(d, &m, 32768, &ws, &e), ERR_CONFIG);
	ck_assert_ptr_null(ws);
	dev_destroy(d);
	/* rows x hidden: the count tanh_backward gets */
	window_mlp_shape(&m, 8, 2, 2, 1 << 20);
	err_clear(&e);
	ck_assert_int_eq(model_ws_check_size(&m, 2048, &e), ERR_CONFIG);
	ck_assert_msg(strstr(e.msg, "rows x model.hidden"), "%s", e.msg);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("model");
	TCase *tc = tcase_create("model");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, reference_gradient_matches_its_finite_differences);
	tcase_add_test(tc, gradient_matches_double_reference);
	tcase_add_test(tc, gradient_matches_finite_differences);
	tcase_add_test(tc, gradient_is_linear_in_scale);
	tcase_add_test(tc, packed_and_padded_agree);
	tcase_add_test(tc, prefix_positions_are_not_targets);
	tcase_add_test(tc, kmath_matches_libm);
	tcase_add_test(tc, sgd_follows_pytorch_semantics);
	tcase_add_test(tc, counts_past_int_are_refused_before_allocation);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
