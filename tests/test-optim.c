/*
 * test-optim: the learning-rate schedules, the clipping factor and AdamW's element update
 * (optim.h, kmath.h) against values worked out independently in double; and the engine's
 * first updates (clipping, schedule, SGD or AdamW with decay on the matrices only)
 * recomputed in double from the parameters and reduced gradients it starts from, with the
 * formulas of docs/optimizers.md, as anyone can from the parity and checkpoint dumps.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check-run.h"
#include "corpus.h"
#include "engine.h"
#include "engine_replica.h"
#include "kmath.h"
#include "model.h"
#include "optim.h"
#include "sampler.h"
#include "squares-order.h"
#include "testutil.h"

START_TEST(test_warmup_then_schedules)
{
	struct lr_plan p = {SCHEDULE_CONSTANT, 0.1, 0.01, 10, 110};

	/* warmup: t / w of the base rate, reaching it at t = w */
	ck_assert_double_eq_tol(optim_lr(&p, 1), 0.01, 1e-15);
	ck_assert_double_eq_tol(optim_lr(&p, 5), 0.05, 1e-15);
	ck_assert_double_eq(optim_lr(&p, 10), 0.1);
	ck_assert_double_eq(optim_lr(&p, 60), 0.1);
	p.schedule = SCHEDULE_COSINE;
	ck_assert_double_eq(optim_lr(&p, 10), 0.1);            /* q = 0 */
	ck_assert_double_eq_tol(optim_lr(&p, 60), 0.055, 1e-15); /* q = 1/2: the middle */
	ck_assert_double_eq_tol(optim_lr(&p, 110), 0.01, 1e-15); /* q = 1: the floor */
	ck_assert_double_eq_tol(optim_lr(&p, 500), 0.01, 1e-15); /* past the horizon */
	p.schedule = SCHEDULE_LINEAR;
	ck_assert_double_eq_tol(optim_lr(&p, 35), 0.0775, 1e-15); /* q = 1/4 */
	ck_assert_double_eq_tol(optim_lr(&p, 110), 0.01, 1e-15);
	/* no warmup: the first update already decays */
	p.warmup = 0;
	p.horizon = 100;
	ck_assert_double_lt(optim_lr(&p, 1), 0.1);
	ck_assert_double_gt(optim_lr(&p, 1), optim_lr(&p, 2));
}
END_TEST

START_TEST(test_clip_factor)
{
	ck_assert_double_eq(optim_clip_factor(5.0, 0.0), 1.0);  /* off */
	ck_assert_double_eq(optim_clip_factor(0.5, 1.0), 1.0);  /* under the threshold */
	ck_assert_double_eq(optim_clip_factor(1.0, 1.0), 1.0);
	ck_assert_double_eq_tol(optim_clip_factor(4.0, 1.0), 1.0 / (4.0 + 1e-6), 1e-17);
	ck_assert_double_eq_tol(optim_bias_correction(0.9, 1), 0.1, 1e-16);
	ck_assert_double_eq_tol(optim_bias_correction(0.999, 2), 1.0 - 0.998001, 1e-16);
}
END_TEST

/* AdamW's first step moves each parameter by about lr against the sign of its gradient
 * (m/bc1 = g, sqrt(v/bc2) = |g|), after the decoupled decay. */
START_TEST(test_adamw_first_step)
{
	const float lr = 0.01f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.1f;
	const float g[3] = {0.5f, -2.0f, 1e-3f};
	float bc1 = (float)optim_bias_correction(b1, 1), bc2 = (float)optim_bias_correction(b2, 1);

	for (int i = 0; i < 3; i++) {
		float p = 1.0f, m = 0.0f, v = 0.0f;
		double want = 1.0 - 0.01 * 0.1 - 0.01 * (g[i] > 0 ? 1.0 : -1.0);
		km_adamw(&p, g[i], &m, &v, lr, b1, b2, eps, wd, bc1, bc2);
		ck_assert_double_eq_tol(p, want, 1e-5);
		ck_assert_float_eq_tol(m, 0.1f * g[i], 1e-7f);
	}
}
END_TEST

/* Twenty steps of km_adamw against the same rule in double: float rounding only. */
START_TEST(test_adamw_against_double)
{
	const double lr = 3e-3, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.01;
	float p = 0.7f, m = 0.0f, v = 0.0f;
	double pd = 0.7, md = 0.0, vd = 0.0;

	for (int t = 1; t <= 20; t++) {
		double g = sin(0.7 * t) * 0.3, bc1 = optim_bias_correction(b1, t),
		       bc2 = optim_bias_correction(b2, t);
		km_adamw(&p, (float)g, &m, &v, (float)lr, (float)b1, (float)b2, (float)eps,
			 (float)wd, (float)bc1, (float)bc2);
		pd -= lr * wd * pd;
		md = b1 * md + (1 - b1) * g;
		vd = b2 * vd + (1 - b2) * g * g;
		pd -= lr / bc1 * md / (sqrt(vd / bc2) + eps);
		ck_assert_double_eq_tol(p, pd, 1e-6);
	}
}
END_TEST

/* ---- the engine's updates against float64 ---- */

/* The rate of update t by docs/optimizers.md, written out again here. */
static double doc_lr(const struct settings *s, int64_t t)
{
	if (s->warmup > 0 && t <= s->warmup)
		return s->lr * (double)t / s->warmup;
	double q = (double)(t - s->warmup) / (double)(s->updates - s->warmup);
	q = q > 1.0 ? 1.0 : q;
	if (s->schedule == SCHEDULE_COSINE)
		return s->lr_min + (s->lr - s->lr_min) * 0.5 * (1.0 + cos(M_PI * q));
	if (s->schedule == SCHEDULE_LINEAR)
		return s->lr + (s->lr_min - s->lr) * q;
	return s->lr;
}

/* What a recomputation may get wrong on purpose: the negative controls. */
enum doc_slip { SLIP_NONE, SLIP_DECAY_ALL, SLIP_NO_CLIP };

/* Update t of parameters p and state st (double; AdamW: first moments, then second) from
 * the reduced gradient g (float, as dumped) in double; returns the gradient's norm. */
static double doc_step(const struct settings *s, const struct model_shape *m, int64_t t,
		       const float *g, double *p, double *st, enum doc_slip slip)
{
	size_t n = m->n_params;
	double norm = sqrt(squares_in_order(n, g, NULL)), lr = doc_lr(s, t), f = 1.0;
	if (s->clip > 0 && norm > s->clip && slip != SLIP_NO_CLIP)
		f = s->clip / (norm + 1e-6);
	double bc1 = 1.0 - pow(s->beta1, (double)t), bc2 = 1.0 - pow(s->beta2, (double)t);
	for (int k = 0; k < m->n_tensors; k++) {
		int decay = m->p[k].decay || slip == SLIP_DECAY_ALL;
		for (size_t i = m->p[k].offset; i < m->p[k].offset + m->p[k].count; i++) {
			double gi = f * g[i];
			if (s->optimizer == OPTIM_SGD) {
				gi += s->weight_decay * p[i];
				st[i] = t == 1 ? gi : s->momentum * st[i] + gi;
				p[i] -= lr * st[i];
				continue;
			}
			double *m1 = &st[i], *m2 = &st[n + i];
			if (decay)
				p[i] -= lr * s->weight_decay * p[i];
			*m1 = s->beta1 * *m1 + (1.0 - s->beta1) * gi;
			*m2 = s->beta2 * *m2 + (1.0 - s->beta2) * gi * gi;
			p[i] -= lr / bc1 * *m1 / (sqrt(*m2 / bc2) + s->eps);
		}
	}
	return norm;
}

/* Largest |float - double| over n values. */
static double max_gap(const float *x, const double *y, size_t n)
{
	double worst = 0.0;
	for (size_t i = 0; i < n; i++)
		worst = fmax(worst, fabs((double)x[i] - y[i]));
	return worst;
}

/* An engine on the tiny configuration with overrides, its corpus, sampler and window. */
struct rig {
	struct settings s;
	struct corpus c;
	struct sampler sp;
	struct window w;
	struct engine *eng;
};

static void rig_up(struct rig *g, const char *sets)
{
	struct err e;
	err_clear(&e);
	testutil_settings(&g->s, "%s", sets);
	ck_assert_int_eq(corpus_build(&g->s, &g->c, &e), ERR_OK);
	ck_assert_msg(sampler_init(&g->sp, &g->c, &g->s, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(window_init(&g->w, g->s.world, g->s.accumulation, g->s.batch_size, &e),
			 ERR_OK);
	ck_assert_msg(engine_create(&g->s, &g->c, NULL, &g->eng, &e) == ERR_OK, "%s", e.msg);
}

static void rig_down(struct rig *g)
{
	engine_destroy(g->eng);
	window_free(&g->w);
	sampler_free(&g->sp);
	corpus_free(&g->c);
}

/* Three updates of a W = 2 engine under `sets`, each recomputed in double from the
 * engine's own reduced gradient: the parameters and state agree within float rounding
 * (1e-6), the slip does not (by more than 1e-5) unless it is SLIP_NONE. *clipped: the
 * updates whose gradient was clipped. */
static void engine_against_double(const char *sets, enum doc_slip slip, int *clipped)
{
	struct rig g;
	struct err e;
	err_clear(&e);
	rig_up(&g, sets);
	const struct settings s = g.s;
	struct engine *eng = g.eng;
	size_t n = eng->shape.n_params, ns = engine_state_floats(eng);
	float *p = malloc(n * sizeof(float)), *st = malloc(ns * sizeof(float));
	double *pd = malloc(n * sizeof(double)), *sd = calloc(ns, sizeof(double));
	model_init_params(&eng->shape, s.seed, p);
	for (size_t i = 0; i < n; i++)
		pd[i] = p[i];
	ck_assert_int_eq(engine_set_state(eng, p, NULL, 0, &e), ERR_OK);
	double worst = 0.0;
	*clipped = 0;
	for (int64_t t = 1; t <= 3; t++) {
		struct window_result res;
		ck_assert_int_eq(sampler_next(&g.sp, &g.w, &e), ERR_OK);
		ck_assert_msg(engine_window(eng, &g.w, NORM_GLOBAL_TOKEN,
					    ENGINE_UPDATE | ENGINE_CAPTURE_REDUCED | ENGINE_GRAD_NORM, &res, &e) == ERR_OK,
			      "%s", e.msg);
		double norm = doc_step(&s, &eng->shape, t, eng->host_reduced, pd, sd, slip);
		/* the norm the engine reports is the one clipped by, the host's sum exactly */
		ck_assert_double_eq(res.grad_norm, norm);
		ck_assert_double_eq(res.lr, optim_lr(&(struct lr_plan){s.schedule, s.lr, s.lr_min,
								      s.warmup, s.updates}, t));
		*clipped += res.clip_factor < 1.0;
		ck_assert_int_eq(engine_get_state(eng, p, st, &e), ERR_OK);
		worst = fmax(worst, fmax(max_gap(p, pd, n), max_gap(st, sd, ns)));
	}
	if (slip == SLIP_NONE)
		ck_assert_msg(worst < 1e-6, "%s: the engine is %g from the float64 steps", sets,
			      worst);
	else
		ck_assert_msg(worst > 1e-5, "%s: slip %d went unnoticed (%g)", sets, slip, worst);
	free(p);
	free(st);
	free(pd);
	free(sd);
	rig_down(&g);
}

static const char adamw_sets[] = "train.optimizer=adamw train.lr=0.01 train.schedule=cosine "
				 "train.warmup=2 train.lr_min=0.001 train.clip=0.3 "
				 "train.weight_decay=0.5";

START_TEST(adamw_steps_are_the_documented_ones)
{
	int clipped;
	engine_against_double(adamw_sets, SLIP_NONE, &clipped);
	ck_assert_msg(clipped >= 1, "no update was clipped: the test would miss clipping");
	engine_against_double(adamw_sets, SLIP_DECAY_ALL, &clipped);
	engine_against_double(adamw_sets, SLIP_NO_CLIP, &clipped);
}
END_TEST

START_TEST(sgd_steps_are_the_documented_ones)
{
	static const char sets[] = "train.schedule=linear train.warmup=1 train.lr_min=0.01 "
				   "train.clip=0.3 train.weight_decay=0.01";
	int clipped;
	engine_against_double(sets, SLIP_NONE, &clipped);
	ck_assert_int_ge(clipped, 1);
	engine_against_double(sets, SLIP_NO_CLIP, &clipped);
	/* the defaults: no clipping, the constant rate */
	engine_against_double("", SLIP_NONE, &clipped);
	ck_assert_int_eq(clipped, 0);
}
END_TEST

/* The ranks share the gradient norm's blocks (engine.c reduced_grad_norm): the norm they
 * report is still the device's one sum over the reduced gradient, bit for bit, at W = 2,
 * 3 (a rank with no block) and 4, on a model of four sum_squares blocks. */
START_TEST(shared_norm_is_the_one_rank_sum)
{
	for (int world = 2; world <= 4; world++) {
		struct rig g;
		struct window_result res;
		struct err e;
		err_clear(&e);
		char sets[64];
		snprintf(sets, sizeof sets, "devices.world=%d model.hidden=8192", world);
		rig_up(&g, sets);
		struct dev *d = g.eng->rep[0].dev;
		size_t n = g.eng->shape.n_params;
		ck_assert_uint_gt(n, 3 * (size_t)d->ops->squares_block);
		ck_assert_ptr_nonnull(g.eng->rep[0].norm_parts);
		ck_assert_int_eq(sampler_next(&g.sp, &g.w, &e), ERR_OK);
		ck_assert_msg(engine_window(g.eng, &g.w, NORM_GLOBAL_TOKEN,
					    ENGINE_UPDATE | ENGINE_CAPTURE_REDUCED |
						    ENGINE_GRAD_NORM,
					    &res, &e) == ERR_OK,
			      "%s", e.msg);
		double squares, want;
		ck_assert_int_eq(d->ops->sum_squares(d, (int)n, g.eng->host_reduced, &squares, &e),
				 ERR_OK);
		want = sqrt(squares);
		ck_assert_msg(memcmp(&want, &res.grad_norm, sizeof want) == 0,
			      "W = %d: the shared norm %.17g, one rank's sum %.17g", world,
			      res.grad_norm, want);
		rig_down(&g);
	}
}
END_TEST

static Suite *optim_suite(void)
{
	Suite *s = suite_create("optim");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_warmup_then_schedules);
	tcase_add_test(tc, test_clip_factor);
	tcase_add_test(tc, test_adamw_first_step);
	tcase_add_test(tc, test_adamw_against_double);
	tcase_add_test(tc, adamw_steps_are_the_documented_ones);
	tcase_add_test(tc, sgd_steps_are_the_documented_ones);
	tcase_add_test(tc, shared_norm_is_the_one_rank_sum);
	suite_add_tcase(s, tc);
	return s;
}


int main(void)
{
	return check_run(optim_suite(), 0);
}
