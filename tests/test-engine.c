/*
 * test-engine: the heart of the mission on the CPU backend.
 *
 * The W-device gradient of a window equals the single-device reference component by
 * component (atol 1e-6, rtol 1e-4) for W = 1..4, accumulation 1 and 3, reduce sum and
 * avg, packed and padded layouts, with masked prompts; the wrong normalizations are
 * caught on imbalanced windows (and mean_of_means is shown to slip through a window
 * whose ranks hold equal counts); both plans give the same gradient; a globally empty
 * window is declined by every rank together; a locally empty rank still matches; an
 * injected failure on one rank releases the others; replicas stay identical.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check-run.h"
#include "clock.h"
#include "checks.h"
#include "class_weights.h"
#include "corpus_arrays.h"
#include "engine.h"
#include "engine_keep.h"
#include "norm.h"
#include "npy.h"
#include "parity.h"
#include "testutil.h"
#include "window_mlp.h"

struct env {
	struct settings s;
	struct corpus c;
	struct sampler sp;
	struct window w;
	struct engine *eng;
	float *params, *ref;
};

/* more settings for the next env_open (e.g. "train.unit=sequence") */
static const char *env_extra = "";

/* Builds the corpus, sampler, window and engine (opts: NULL for the defaults) of v->s. */
static void env_start(struct env *v, const struct engine_opts *opts)
{
	struct err e;
	err_clear(&e);
	ck_assert_int_eq(corpus_build(&v->s, &v->c, &e), ERR_OK);
	ck_assert_msg(class_weights_attach(&v->s, &v->c, &e) == ERR_OK, "%s", e.msg);
	ck_assert_msg(sampler_init(&v->sp, &v->c, &v->s, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(window_init(&v->w, v->s.world, v->s.accumulation, v->s.batch_size, &e),
			 ERR_OK);
	ck_assert_msg(engine_create(&v->s, &v->c, opts, &v->eng, &e) == ERR_OK, "%s", e.msg);
	v->params = malloc(v->eng->shape.n_params * sizeof(float));
	v->ref = malloc(v->eng->shape.n_params * sizeof(float));
	model_init_params(&v->eng->shape, v->s.seed, v->params);
	ck_assert_int_eq(engine_set_state(v->eng, v->params, NULL, 0, &e), ERR_OK);
}

static void env_open(struct env *v, int world, int micro, int reduce_avg, int layout, int prefix)
{
	testutil_settings(&v->s, "devices.world=%d train.accumulation=%d devices.reduce=%s "
			  "model.layout=%s data.prefix_max=%d data.train=256 %s", world, micro,
			  reduce_avg ? "avg" : "sum", layout == LAYOUT_PADDED ? "padded" : "packed",
			  prefix, env_extra);
	env_start(v, NULL);
}

static void env_close(struct env *v)
{
	engine_destroy(v->eng);
	free(v->params);
	free(v->ref);
	window_free(&v->w);
	sampler_free(&v->sp);
	corpus_free(&v->c);
}

/* reduced gradient of the current window under `mode`, compared with the reference */
static struct parity_stats env_parity(struct env *v, int mode)
{
	struct err e;
	struct window_result res;
	struct parity_stats st;
	double loss;
	err_clear(&e);
	ck_assert_msg(engine_reference(v->eng, &v->w, v->ref, &loss, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(engine_set_state(v->eng, v->params, NULL, 0, &e), ERR_OK);
	ck_assert_msg(engine_window(v->eng, &v->w, mode, ENGINE_CAPTURE_REDUCED, &res, &e) == ERR_OK,
		      "%s", e.msg);
	ck_assert(!res.rejected);
	ck_assert_double_eq_tol(res.loss, loss, 1e-9 * fabs(loss) + 1e-12);
	parity_compare(v->eng->host_reduced, v->ref, v->eng->shape.n_params, 1e-6, 1e-4, &st);
	return st;
}

static int imbalanced(const struct window *w)
{
	for (int r = 1; r < w->world; r++)
		if (w->rank_tokens[r] != w->rank_tokens[0])
			return 1;
	return 0;
}

START_TEST(parity_over_worlds_accumulations_reduces_layouts)
{
	static const int worlds[] = {1, 2, 3, 4};
	static const int micros[] = {1, 3};
	int cases = 0;
	for (size_t wi = 0; wi < 4; wi++)
		for (size_t mi = 0; mi < 2; mi++)
			for (int avg = 0; avg < 2; avg++)
				for (int layout = 0; layout < 2; layout++) {
					struct env v;
					struct err e;
					err_clear(&e);
					env_open(&v, worlds[wi], micros[mi], avg, layout, 3);
					ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
					struct parity_stats st = env_parity(&v, NORM_GLOBAL_TOKEN);
					ck_assert_msg(st.pass,
						      "W=%d M=%d avg=%d layout=%d: %zu outside, max abs %g",
						      worlds[wi], micros[mi], avg, layout, st.outside,
						      st.max_abs);
					/* every negative control that differs on this window is caught */
					for (int mode = 1; mode < NORM_COUNT; mode++) {
						if (!parity_distinguishable(mode, UNIT_TOKEN, &v.w, avg))
							continue;
						struct parity_stats bad = env_parity(&v, mode);
						ck_assert_msg(!bad.pass, "W=%d M=%d: %s not caught",
							      worlds[wi], micros[mi], norm_mode_name(mode));
					}
					if (worlds[wi] > 1 && imbalanced(&v.w))
						ck_assert(parity_distinguishable(NORM_MEAN_OF_MEANS, UNIT_TOKEN, &v.w, avg));
					if (micros[mi] > 1)
						ck_assert(parity_distinguishable(NORM_DOUBLE_ACCUM, UNIT_TOKEN, &v.w, avg));
					env_close(&v);
					cases++;
				}
	ck_assert_int_eq(cases, 32);
}
END_TEST

START_TEST(sum_and_avg_give_the_same_gradient)
{
	struct env a, b;
	struct err e;
	err_clear(&e);
	env_open(&a, 3, 2, 0, LAYOUT_PACKED, 0);
	env_open(&b, 3, 2, 1, LAYOUT_PACKED, 0);
	ck_assert_int_eq(sampler_next(&a.sp, &a.w, &e), ERR_OK);
	ck_assert_int_eq(sampler_next(&b.sp, &b.w, &e), ERR_OK);
	struct window_result ra, rb;
	ck_assert_int_eq(engine_window(a.eng, &a.w, NORM_GLOBAL_TOKEN, ENGINE_CAPTURE_REDUCED, &ra, &e),
			 ERR_OK);
	ck_assert_int_eq(engine_window(b.eng, &b.w, NORM_GLOBAL_TOKEN, ENGINE_CAPTURE_REDUCED, &rb, &e),
			 ERR_OK);
	struct parity_stats st;
	parity_compare(a.eng->host_reduced, b.eng->host_reduced, a.eng->shape.n_params, 1e-6, 1e-4, &st);
	ck_assert(st.pass);
	env_close(&a);
	env_close(&b);
}
END_TEST

START_TEST(negative_controls_fail_on_the_seed_imbalance)
{
	struct env v;
	struct err e;
	err_clear(&e);
	env_open(&v, 2, 2, 1, LAYOUT_PACKED, 0);
	ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
	/* length bands: rank 1 holds the long sequences */
	ck_assert_int_gt(v.w.rank_tokens[1], v.w.rank_tokens[0]);
	ck_assert(env_parity(&v, NORM_GLOBAL_TOKEN).pass);
	for (int mode = 1; mode < NORM_COUNT; mode++) {
		ck_assert(parity_distinguishable(mode, UNIT_TOKEN, &v.w, 1));
		struct parity_stats st = env_parity(&v, mode);
		ck_assert_msg(!st.pass, "%s passed", norm_mode_name(mode));
		ck_assert_uint_gt(st.outside, 0);
	}
	env_close(&v);
}
END_TEST

START_TEST(balanced_counts_hide_mean_of_means)
{
	/* two ranks with exactly the same number of supervised tokens: mean_of_means then
	 * coincides with the global mean, which is why a balanced test alone proves nothing */
	struct env v;
	struct err e;
	err_clear(&e);
	env_open(&v, 2, 1, 1, LAYOUT_PACKED, 0);
	int a = -1, b = -1;
	for (int i = 0; i < v.c.split_count[SPLIT_TRAIN] && b < 0; i++)
		for (int j = i + 1; j < v.c.split_count[SPLIT_TRAIN]; j++)
			if (corpus_supervised(&v.c, i) == corpus_supervised(&v.c, j)) {
				a = i;
				b = j;
				break;
			}
	ck_assert_int_ge(b, 0);
	int ids[2] = {a, b}, counts[2] = {1, 1};
	ck_assert_int_eq(window_assign(&v.w, &v.c, ids, counts, &e), ERR_OK);
	ck_assert(!parity_distinguishable(NORM_MEAN_OF_MEANS, UNIT_TOKEN, &v.w, 1));
	ck_assert(env_parity(&v, NORM_MEAN_OF_MEANS).pass);
	env_close(&v);
}
END_TEST

START_TEST(controls_near_global_token_are_not_required)
{
	/* hand-made windows; whether a control is required follows from its factors alone */
	struct window w;
	struct err e;
	double gap = -1.0;
	err_clear(&e);
	ck_assert_int_eq(window_init(&w, 2, 1, 1, &e), ERR_OK);
	/* 1600 and 1601 tokens (a balanced plan's near tie): mean_of_means factors are
	 * 3201/3200 and 3201/3202 of global_token's, 3.1e-4 apart: not required */
	w.mb[0][0].tokens = w.rank_tokens[0] = 1600;
	w.mb[1][0].tokens = w.rank_tokens[1] = 1601;
	w.N = 3201;
	ck_assert_int_eq(parity_control_of(NORM_MEAN_OF_MEANS, UNIT_TOKEN, &w, 1, &gap),
			 PARITY_MARGINAL);
	ck_assert(fabs(gap - 1.0 / 3200.0) < 1e-12);
	/* 1000 vs 1003: 1.5e-3 apart, past the fixed 0.1% margin: required */
	w.mb[0][0].tokens = w.rank_tokens[0] = 1000;
	w.mb[1][0].tokens = w.rank_tokens[1] = 1003;
	w.N = 2003;
	ck_assert_int_eq(parity_control_of(NORM_MEAN_OF_MEANS, UNIT_TOKEN, &w, 1, NULL), PARITY_DISTINCT);
	/* minimum.ini's first window, 640 vs 1548: required, factors 2188/1280 - 1 = 0.709 apart */
	w.mb[0][0].tokens = w.rank_tokens[0] = 640;
	w.mb[1][0].tokens = w.rank_tokens[1] = 1548;
	w.N = 2188;
	ck_assert_int_eq(parity_control_of(NORM_MEAN_OF_MEANS, UNIT_TOKEN, &w, 1, &gap),
			 PARITY_DISTINCT);
	ck_assert(fabs(gap - (2188.0 / 1280.0 - 1.0)) < 1e-9);
	/* double_accumulation with accumulation 1 has global_token's factors */
	ck_assert_int_eq(parity_control_of(NORM_DOUBLE_ACCUM, UNIT_TOKEN, &w, 1, &gap), PARITY_SAME);
	ck_assert(gap == 0.0);
	window_free(&w);
}
END_TEST

START_TEST(effect_is_measured_in_tolerances)
{
	float global[4] = {1.0f, -2.0f, 0.0f, 3e-3f}, mode[4];
	const double atol = 1e-6, rtol = 1e-4;
	memcpy(mode, global, sizeof mode);
	ck_assert(parity_effect(mode, global, 4, atol, rtol) == 0.0);
	mode[1] = (float)(-2.0 - 1.5 * (atol + rtol * 2.0));
	double effect = parity_effect(mode, global, 4, atol, rtol);
	ck_assert(effect > 1.4 && effect < 1.6);
	mode[2] = (float)(3.0 * atol);
	effect = parity_effect(mode, global, 4, atol, rtol);
	ck_assert(effect > 2.9 && effect < 3.1);
	mode[2] = NAN; /* a NaN is the largest effect there is */
	ck_assert(isinf(parity_effect(mode, global, 4, atol, rtol)));
}
END_TEST

START_TEST(the_tolerance_rule_refuses_nan_on_either_side)
{
	const double atol = 1e-6, rtol = 1e-4;
	/* |g - ref| <= atol + rtol |ref|, its boundary included (numbers exact in binary) */
	struct parity_gap gp = parity_gap(3.25, 2.0, 0.25, 0.5);
	ck_assert(gp.diff == 1.25 && gp.tol == 1.25 && gp.within && gp.ratio == 1.0);
	gp = parity_gap(3.375, 2.0, 0.25, 0.5);
	ck_assert(!gp.within && gp.ratio == 1.1);
	gp = parity_gap(-2.0 - 2.0 * (atol + rtol * 2.0), -2.0, atol, rtol);
	ck_assert(!gp.within && gp.ratio > 1.9 && gp.ratio < 2.1);
	/* a zero tolerance: equal is within (0 tolerances), any difference infinitely outside */
	gp = parity_gap(0.0, 0.0, 0.0, rtol);
	ck_assert(gp.within && gp.ratio == 0.0);
	gp = parity_gap(1e-30, 0.0, 0.0, rtol);
	ck_assert(!gp.within && isinf(gp.ratio));
	/* a NaN on either side is never within, with a tolerance that would take anything */
	const double sides[3][2] = {{NAN, 1.0}, {1.0, NAN}, {NAN, NAN}};
	for (int k = 0; k < 3; k++) {
		gp = parity_gap(sides[k][0], sides[k][1], INFINITY, rtol);
		ck_assert_msg(!gp.within && isinf(gp.ratio), "case %d", k);
		gp = parity_gap(sides[k][0], sides[k][1], 0.0, 0.0);
		ck_assert_msg(!gp.within && isinf(gp.ratio), "case %d (zero tolerance)", k);
	}
	/* the comparison over a vector and the controls' effect follow it */
	float g[3] = {1.0f, NAN, 0.0f}, ref[3] = {1.0f, 1.0f, NAN};
	struct parity_stats st;
	parity_compare(g, ref, 3, atol, rtol, &st);
	ck_assert(st.outside == 2 && !st.pass);
	ck_assert(isinf(parity_effect(g + 2, ref + 2, 1, 0.0, 0.0))); /* a NaN reference */
	ck_assert(parity_effect(g, ref, 1, 0.0, 0.0) == 0.0);
}
END_TEST

START_TEST(plans_give_the_same_gradient)
{
	struct env v;
	struct err e;
	err_clear(&e);
	env_open(&v, 2, 2, 1, LAYOUT_PACKED, 2);
	ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
	ck_assert(env_parity(&v, NORM_GLOBAL_TOKEN).pass);
	float *bands = malloc(v.eng->shape.n_params * sizeof(float));
	memcpy(bands, v.eng->host_reduced, v.eng->shape.n_params * sizeof(float));
	int64_t spread_bands = llabs(v.w.rank_tokens[1] - v.w.rank_tokens[0]);
	ck_assert_int_eq(window_resplit(&v.w, &v.c, RANK_SPLIT_BALANCED, &e), ERR_OK);
	ck_assert_int_le(llabs(v.w.rank_tokens[1] - v.w.rank_tokens[0]), spread_bands);
	ck_assert(env_parity(&v, NORM_GLOBAL_TOKEN).pass);
	struct parity_stats st;
	parity_compare(v.eng->host_reduced, bands, v.eng->shape.n_params, 1e-6, 1e-4, &st);
	ck_assert(st.pass);
	free(bands);
	env_close(&v);
}
END_TEST

START_TEST(globally_empty_window_is_declined_by_every_rank)
{
	struct env v;
	struct err e;
	err_clear(&e);
	env_open(&v, 3, 2, 1, LAYOUT_PACKED, 0);
	int counts[6] = {0, 0, 0, 0, 0, 0};
	ck_assert_int_eq(window_assign(&v.w, &v.c, NULL, counts, &e), ERR_OK);
	ck_assert_int_eq(v.w.N, 0);
	struct window_result res;
	ck_assert_int_eq(engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN, ENGINE_UPDATE, &res, &e), ERR_OK);
	ck_assert(res.rejected);
	ck_assert_int_eq(v.eng->updates_done, 0);
	/* and the engine is still usable afterwards: no rank was left inside a collective */
	ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
	ck_assert_int_eq(engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN, ENGINE_UPDATE, &res, &e), ERR_OK);
	ck_assert(!res.rejected);
	env_close(&v);
}
END_TEST

START_TEST(locally_empty_rank_still_matches)
{
	struct env v;
	struct err e;
	err_clear(&e);
	env_open(&v, 3, 2, 1, LAYOUT_PACKED, 0);
	/* rank 1 has no sequence at all; ranks 0 and 2 have uneven work */
	int ids[] = {0, 1, 2, 10, 11};
	int counts[6] = {1, 2, 0, 0, 2, 0};
	ck_assert_int_eq(window_assign(&v.w, &v.c, ids, counts, &e), ERR_OK);
	ck_assert_int_eq(v.w.rank_tokens[1], 0);
	ck_assert_int_gt(v.w.N, 0);
	struct parity_stats st = env_parity(&v, NORM_GLOBAL_TOKEN);
	ck_assert_msg(st.pass, "%zu outside, max abs %g", st.outside, st.max_abs);
	env_close(&v);
}
END_TEST

/* Token batching on the length-band plan: each rank cuts its share by a token budget, so
 * the rank of the long sequences runs more microbatches; the gradient still matches the
 * reference and every control whose factors differ (M is each rank's own) is caught. */
START_TEST(token_batching_parity_and_controls)
{
	int cases = 0;
	env_extra = "train.batching=tokens train.micro_tokens=14 train.batch_size=4";
	for (int world = 2; world <= 3; world++)
		for (int avg = 0; avg < 2; avg++)
			for (int layout = 0; layout < 2; layout++) {
				struct env v;
				struct err e;
				err_clear(&e);
				env_open(&v, world, 2, avg, layout, 3);
				ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
				ck_assert_int_gt(v.w.rank_micro[world - 1], v.w.rank_micro[0]);
				struct parity_stats st = env_parity(&v, NORM_GLOBAL_TOKEN);
				ck_assert_msg(st.pass, "W=%d avg=%d layout=%d: %zu outside", world, avg,
					      layout, st.outside);
				for (int mode = 1; mode < NORM_COUNT; mode++) {
					ck_assert(parity_distinguishable(mode, UNIT_TOKEN, &v.w, avg));
					ck_assert_msg(!env_parity(&v, mode).pass, "W=%d: %s not caught",
						      world, norm_mode_name(mode));
				}
				env_close(&v);
				cases++;
			}
	env_extra = "";
	ck_assert_int_eq(cases, 8);
}
END_TEST

/* A rank whose share is empty runs no microbatch at all, yet joins both collectives: the
 * window matches the reference; a globally empty packed window is declined by every rank
 * and the next window runs (no rank was left in a collective). */
START_TEST(token_batching_rank_with_no_microbatch)
{
	struct env v;
	struct err e;
	struct window_result res;
	err_clear(&e);
	env_extra = "train.batching=tokens train.micro_tokens=40";
	env_open(&v, 3, 2, 1, LAYOUT_PACKED, 0);
	env_extra = "";
	int ids[] = {0, 1, 2, 10, 11};
	int counts[6] = {1, 2, 0, 0, 2, 0};
	ck_assert_int_eq(window_assign(&v.w, &v.c, ids, counts, &e), ERR_OK);
	ck_assert_int_eq(window_pack_tokens(&v.w, &v.c, 40, &e), ERR_OK);
	ck_assert_int_eq(v.w.rank_micro[1], 0);
	ck_assert_int_gt(v.w.rank_micro[0], 0);
	ck_assert_int_gt(v.w.rank_micro[2], 0);
	struct parity_stats st = env_parity(&v, NORM_GLOBAL_TOKEN);
	ck_assert_msg(st.pass, "%zu outside, max abs %g", st.outside, st.max_abs);
	v.w.micro = 2;
	memset(counts, 0, sizeof counts);
	ck_assert_int_eq(window_assign(&v.w, &v.c, NULL, counts, &e), ERR_OK);
	ck_assert_int_eq(window_pack_tokens(&v.w, &v.c, 40, &e), ERR_OK);
	for (int r = 0; r < 3; r++)
		ck_assert_int_eq(v.w.rank_micro[r], 0);
	ck_assert_int_eq(engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN, ENGINE_UPDATE, &res, &e), ERR_OK);
	ck_assert(res.rejected);
	ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
	ck_assert_int_eq(engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN, ENGINE_UPDATE, &res, &e), ERR_OK);
	ck_assert(!res.rejected);
	env_close(&v);
}
END_TEST

/* train.l2: its gradient reaches the reduced gradient once under avg and sum (parity
 * against the reference, which adds it once), the window's loss holds lambda / 2
 * ||theta||^2, and the control adding it on every rank is caught under sum (W times too
 * much) while it coincides with the correct term under avg. */
START_TEST(l2_term_once_per_window)
{
	const double lambda = 0.01;
	env_extra = "train.l2=0.01";
	for (int world = 2; world <= 3; world++)
		for (int avg = 0; avg < 2; avg++) {
			struct env v;
			struct err e;
			struct window_result res;
			struct settings s;
			err_clear(&e);
			env_open(&v, world, 2, avg, LAYOUT_PACKED, 0);
			ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
			ck_assert(env_parity(&v, NORM_GLOBAL_TOKEN).pass);
			double norm2 = 0.0;
			for (size_t i = 0; i < v.eng->shape.n_params; i++)
				norm2 += (double)v.params[i] * v.params[i];
			ck_assert_int_eq(engine_set_state(v.eng, v.params, NULL, 0, &e), ERR_OK);
			ck_assert_int_eq(engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN, 0, &res, &e), ERR_OK);
			ck_assert_double_eq_tol(res.loss_l2, 0.5 * lambda * norm2, 1e-6 * norm2);
			s = v.s;
			struct parity_stats bad = env_parity(&v, NORM_L2_EVERY_RANK);
			double gap;
			enum parity_control want = parity_adapt_control_of(NORM_L2_EVERY_RANK, &s, &v.w,
									   &gap);
			ck_assert_int_eq(want, avg ? PARITY_SAME : PARITY_DISTINCT);
			ck_assert_msg(bad.pass == avg, "W=%d avg=%d: l2_every_rank %s", world, avg,
				      bad.pass ? "passed" : "failed");
			env_close(&v);
		}
	env_extra = "";
}
END_TEST

/* train.z_loss: the term rides in every token's loss, so global_token passes parity
 * against the one-device reference at W = 2 and 3 under avg and sum, the loss grows by
 * the term, and the control dividing the z term by the rank's count is caught. */
START_TEST(z_loss_normalized_like_the_tokens)
{
	env_extra = "train.z_loss=0.05";
	for (int world = 2; world <= 3; world++)
		for (int avg = 0; avg < 2; avg++) {
			struct env v;
			struct err e;
			struct window_result res;
			double plain, with;
			err_clear(&e);
			env_open(&v, world, 2, avg, LAYOUT_PACKED, 0);
			ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
			ck_assert(env_parity(&v, NORM_GLOBAL_TOKEN).pass);
			float *g = malloc(v.eng->shape.n_params * sizeof(float));
			ck_assert_int_eq(engine_set_state(v.eng, v.params, NULL, 0, &e), ERR_OK);
			ck_assert_int_eq(engine_reference_z(v.eng, &v.w, 0.0, g, &plain, &e), ERR_OK);
			ck_assert_int_eq(engine_reference(v.eng, &v.w, g, &with, &e), ERR_OK);
			ck_assert_int_eq(engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN, 0, &res, &e),
					 ERR_OK);
			ck_assert_msg(with > plain + 0.01, "z-loss adds %g", with - plain);
			ck_assert_double_eq_tol(res.loss, with, 1e-5 * with);
			free(g);
			double gap;
			enum parity_control want = parity_adapt_control_of(NORM_Z_LOSS_LOCAL, &v.s,
									   &v.w, &gap);
			ck_assert_int_eq(want, PARITY_DISTINCT);
			/* the control's own loss holds its scaled z terms: compare the gradient only */
			struct parity_stats bad;
			ck_assert_int_eq(engine_set_state(v.eng, v.params, NULL, 0, &e), ERR_OK);
			ck_assert_int_eq(engine_window(v.eng, &v.w, NORM_Z_LOSS_LOCAL,
						       ENGINE_CAPTURE_REDUCED, &res, &e), ERR_OK);
			ck_assert(res.loss > with);
			parity_compare(v.eng->host_reduced, v.ref, v.eng->shape.n_params, 1e-6, 1e-4,
				       &bad);
			ck_assert_msg(!bad.pass, "W=%d avg=%d: z_loss_local passed", world, avg);
			env_close(&v);
		}
	env_extra = "";
}
END_TEST

/* A weight below 0 or not finite is refused, the message naming the file, the id and the
 * weight as read: id 0's value sits where the freed array's allocator bookkeeping goes, so
 * a message printed from the freed array shows another number (AddressSanitizer: a
 * use after free). */
START_TEST(class_weights_refuse_a_bad_weight_by_its_value)
{
	const char *path = "class-weights-bad.npy";
	static const struct {
		int id;
		float weight;
		const char *shown;
	} cases[] = {{0, -2.5f, "the weight of id 0 is -2.5;"}, {9, NAN, "the weight of id 9 is nan;"}};
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		float weights[16];
		size_t shape[1] = {16};
		struct settings s;
		struct corpus c;
		struct err e;
		err_clear(&e);
		for (int i = 0; i < 16; i++)
			weights[i] = 1.0f;
		weights[cases[k].id] = cases[k].weight;
		ck_assert_int_eq(npy_write(path, NPY_F32, shape, 1, weights, &e), ERR_OK);
		testutil_settings(&s, "train.class_weights=%s", path);
		ck_assert_int_eq(corpus_build(&s, &c, &e), ERR_OK);
		ck_assert_int_eq(class_weights_attach(&s, &c, &e), ERR_CONFIG);
		ck_assert_msg(strstr(e.msg, "class_weights = class-weights-bad.npy: ") &&
			      strstr(e.msg, cases[k].shown), "message: %s", e.msg);
		ck_assert_ptr_null(c.class_weight); /* nothing attached */
		corpus_free(&c);
	}
	remove(path);
}
END_TEST

/* train.class_weights: the reference divides the weighted loss sum by W = sum w[y]; the
 * W-rank gradient matches it at W = 2 and 3 under avg and sum (the count collective
 * carries the weight sums), the loss is another than without weights, and the control
 * dividing by the token count N is caught. check-loss's weighted form gives 13 / 7. */
START_TEST(class_weights_divide_by_their_sum)
{
	const char *path = "class-weights-test.npy";
	float weights[16];
	size_t shape[1] = {16};
	struct err e;
	err_clear(&e);
	for (int i = 0; i < 16; i++)
		weights[i] = 0.5f + 0.5f * (float)(i % 4);
	ck_assert_int_eq(npy_write(path, NPY_F32, shape, 1, weights, &e), ERR_OK);
	for (int world = 2; world <= 3; world++)
		for (int avg = 0; avg < 2; avg++) {
			struct env v;
			double plain, weighted;
			env_extra = "";
			env_open(&v, world, 2, avg, LAYOUT_PACKED, 0);
			ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
			ck_assert_int_eq(engine_reference(v.eng, &v.w, v.ref, &plain, &e), ERR_OK);
			env_close(&v);
			env_extra = "train.class_weights=class-weights-test.npy";
			env_open(&v, world, 2, avg, LAYOUT_PACKED, 0);
			ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
			ck_assert(v.w.weighted && v.w.W > 0 && v.w.W != (double)v.w.N);
			ck_assert(env_parity(&v, NORM_GLOBAL_TOKEN).pass);
			ck_assert_int_eq(engine_reference(v.eng, &v.w, v.ref, &weighted, &e), ERR_OK);
			ck_assert_msg(fabs(weighted - plain) > 1e-3, "%g against %g", weighted, plain);
			double gap;
			ck_assert_int_eq(parity_adapt_control_of(NORM_WEIGHTS_BY_COUNT, &v.s, &v.w, &gap),
					 PARITY_DISTINCT);
			struct parity_stats bad;
			struct window_result res;
			ck_assert_int_eq(engine_set_state(v.eng, v.params, NULL, 0, &e), ERR_OK);
			ck_assert_int_eq(engine_window(v.eng, &v.w, NORM_WEIGHTS_BY_COUNT,
						       ENGINE_CAPTURE_REDUCED, &res, &e), ERR_OK);
			parity_compare(v.eng->host_reduced, v.ref, v.eng->shape.n_params, 1e-6, 1e-4,
				       &bad);
			ck_assert_msg(!bad.pass, "W=%d avg=%d: weights_by_count passed", world, avg);
			env_close(&v);
		}
	/* a kept engine reset for the corpus without weights drops the device table: its
	 * reference is the unweighted one again, and back with weights the weighted one */
	struct env v;
	struct window u;
	double with, without, plain;
	env_open(&v, 2, 2, 1, LAYOUT_PACKED, 0);
	ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
	ck_assert_int_eq(engine_reference(v.eng, &v.w, v.ref, &with, &e), ERR_OK);
	float *table = v.c.class_weight;
	double *sums = v.c.seq_weight;
	v.c.class_weight = NULL;
	v.c.seq_weight = NULL;
	ck_assert_int_eq(window_copy(&u, &v.w, &v.c, &e), ERR_OK); /* recounted: unweighted */
	ck_assert(!u.weighted);
	ck_assert_int_eq(engine_reset(v.eng, &v.s, &v.c, NULL, &e), ERR_OK);
	ck_assert_int_eq(engine_set_state(v.eng, v.params, NULL, 0, &e), ERR_OK);
	ck_assert_int_eq(engine_reference(v.eng, &u, v.ref, &without, &e), ERR_OK);
	window_free(&u);
	env_close(&v);
	free(table);
	free(sums);
	env_extra = "";
	env_open(&v, 2, 2, 1, LAYOUT_PACKED, 0);
	ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
	ck_assert_int_eq(engine_reference(v.eng, &v.w, v.ref, &plain, &e), ERR_OK);
	env_close(&v);
	ck_assert_msg(without == plain && with != plain, "%g %g %g", with, without, plain);
	remove(path);
	struct check_loss_result cl;
	check_loss_run(&cl);
	check_loss_weighted(&cl);
	ck_assert(cl.ok);
	ck_assert_double_eq_tol(cl.weighted_mean, 13.0 / 7.0, 1e-15);
	ck_assert_double_eq(cl.weighted_by_count, 1.625);
}
END_TEST

START_TEST(injected_failure_releases_every_rank)
{
	struct env v;
	struct err e;
	err_clear(&e);
	env_open(&v, 4, 2, 1, LAYOUT_PACKED, 0);
	v.eng->fault.inject_rank = 2;
	v.eng->fault.inject_window = 1;
	struct window_result res;
	ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
	ck_assert_int_eq(engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN, ENGINE_UPDATE, &res, &e), ERR_OK);
	ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
	double t0 = clock_now_s();
	int rc = engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN, ENGINE_UPDATE, &res, &e);
	ck_assert_int_eq(rc, ERR_DEVICE);
	/* released by the abort, not by the 30 s barrier timeout (a generous bound: it takes
	 * milliseconds) */
	ck_assert_msg(clock_now_s() - t0 < 10.0, "the peers waited %.1f s", clock_now_s() - t0);
	/* windows are numbered from 1 for the user: index 1 is window 2 */
	ck_assert_msg(strstr(e.msg, "window 2: rank 2: injected failure at window 2"), "message: %s",
		      e.msg);
	/* the pool is usable again once the failure is gone */
	v.eng->fault.inject_rank = -1;
	err_clear(&e);
	ck_assert_int_eq(engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN, ENGINE_UPDATE, &res, &e), ERR_OK);
	env_close(&v);
}
END_TEST

/* A rank that hangs inside a microbatch (for good, or for three timeouts): the window
 * fails after the timeout, not after the hang, naming the late rank and its microbatch;
 * the engine is left allocated for its abandoned thread (the test process ends). */
static void check_hang(int world, int rank, double seconds)
{
	/* static: what the abandoned thread may still use stays reachable, so the leak
	 * checker does not count it (the test process ends soon after) */
	static struct env v;
	struct err e;
	struct window_result res;
	err_clear(&e);
	struct engine_opts opts;
	engine_opts_init(&opts);
	opts.fault.hang_rank = rank;
	opts.fault.hang_window = 1;
	opts.fault.hang_seconds = seconds;
	testutil_settings(&v.s, "devices.world=%d devices.timeout=0.5", world);
	env_start(&v, &opts);
	ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
	ck_assert_msg(engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN, ENGINE_UPDATE, &res, &e) == ERR_OK,
		      "%s", e.msg);
	ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
	double t0 = clock_now_s();
	int rc = engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN, ENGINE_UPDATE, &res, &e);
	double dt = clock_now_s() - t0;
	ck_assert_int_eq(rc, ERR_DEVICE);
	ck_assert_msg(dt >= 0.45 && dt < 3.0, "the window ended after %.2f s", dt);
	char want[160];
	snprintf(want, sizeof want, "window 2: rank %d did not arrive within 0.5 s (devices.timeout): "
		 "last in forward/backward of microbatch 1, for ", rank);
	ck_assert_msg(strstr(e.msg, want), "message: %s", e.msg);
	ck_assert_int_eq(pool_abandoned(v.eng->pool), 1);
	err_clear(&e);
	ck_assert_int_eq(engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN, ENGINE_UPDATE, &res, &e),
			 ERR_DEVICE);
	engine_destroy(v.eng); /* frees nothing the abandoned thread may use */
	/* as main() does with an abandoned thread: exit() would run the libraries' clean-up
	 * beneath it (OpenBLAS's, where the slow rank returns to: a SEGV in its sgemm), so the
	 * test's process (Check forks one per test) ends here, its output flushed */
	fflush(NULL);
	_exit(EXIT_SUCCESS);
}

START_TEST(a_hung_rank_fails_the_window_after_the_timeout)
{
	check_hang(2, 1, -1.0);
}
END_TEST

START_TEST(a_slow_rank_fails_the_window_after_the_timeout)
{
	check_hang(3, 2, 1.5);
}
END_TEST

START_TEST(a_hung_single_rank_fails_the_window_after_the_timeout)
{
	check_hang(1, 0, -1.0);
}
END_TEST

START_TEST(a_count_unlike_the_schedulers_stops_every_rank)
{
	/* the window's N as the scheduler planned it, off by one: every rank sees the same
	 * counted total, so every rank refuses it before the gradient collective */
	struct env v;
	struct err e;
	struct window_result res;
	err_clear(&e);
	env_open(&v, 3, 2, 1, LAYOUT_PACKED, 0);
	ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
	v.w.N += 1;
	double t0 = clock_now_s();
	ck_assert_int_eq(engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN, ENGINE_UPDATE, &res, &e),
			 ERR_DEVICE);
	ck_assert_msg(clock_now_s() - t0 < 10.0, "the ranks waited %.1f s", clock_now_s() - t0);
	ck_assert_msg(strstr(e.msg, "window 1: rank 0: the collective counted"), "%s", e.msg);
	ck_assert_int_eq(v.eng->updates_done, 0);
	/* the scheduler's own count is accepted again */
	v.w.N -= 1;
	err_clear(&e);
	ck_assert_int_eq(engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN, ENGINE_UPDATE, &res, &e),
			 ERR_OK);
	env_close(&v);
}
END_TEST

START_TEST(replicas_stay_identical)
{
	struct env v;
	struct err e;
	err_clear(&e);
	env_open(&v, 3, 2, 0, LAYOUT_PACKED, 1);
	for (int i = 0; i < 5; i++) {
		struct window_result res;
		ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
		ck_assert_msg(engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN,
					    ENGINE_UPDATE | ENGINE_CHECK_REPLICAS, &res, &e) == ERR_OK,
			      "%s", e.msg);
		ck_assert(isfinite(res.loss));
	}
	ck_assert_int_eq(v.eng->updates_done, 5);
	env_close(&v);
}
END_TEST

START_TEST(a_diverged_replica_is_detected)
{
	/* alone, and with the local gradients captured in the same window */
	const int flags[] = {ENGINE_UPDATE | ENGINE_CHECK_REPLICAS,
			     ENGINE_UPDATE | ENGINE_CHECK_REPLICAS | ENGINE_CAPTURE_LOCAL};
	for (int k = 0; k < 2; k++) {
		struct env v;
		struct err e;
		err_clear(&e);
		env_open(&v, 3, 1, 1, LAYOUT_PACKED, 0);
		/* rank 2's copy of one weight drifts (host backend: device memory is host
		 * memory); the replica fingerprint must notice after the update */
		v.eng->rep[2].params[v.eng->shape.p[WINDOW_MLP_W1].offset + 5] += 0.5f;
		struct window_result res;
		ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
		int rc = engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN, flags[k], &res, &e);
		ck_assert_int_eq(rc, ERR_CHECK);
		ck_assert_msg(strstr(e.msg, "window 1: replica 2's parameters differ from rank 0's"),
			      "message: %s", e.msg);
		env_close(&v);
	}
}
END_TEST

/* The replica check reads back a fingerprint, not the parameters: it runs beside the
 * capture of the local gradients, which come out as they do without it. */
START_TEST(replicas_are_checked_while_local_gradients_are_captured)
{
	struct env v;
	struct err e;
	struct window_result res;
	err_clear(&e);
	env_open(&v, 3, 2, 0, LAYOUT_PACKED, 0);
	size_t n = v.eng->shape.n_params;
	float *alone = malloc(sizeof(float) * n * 3);
	ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
	ck_assert_msg(engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN, ENGINE_CAPTURE_LOCAL, &res,
				    &e) == ERR_OK, "%s", e.msg);
	for (int r = 0; r < 3; r++)
		memcpy(alone + n * r, v.eng->host_local[r], sizeof(float) * n);
	ck_assert_msg(engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN,
				    ENGINE_CAPTURE_LOCAL | ENGINE_CHECK_REPLICAS, &res, &e) == ERR_OK,
		      "%s", e.msg);
	for (int r = 0; r < 3; r++)
		ck_assert_msg(memcmp(alone + n * r, v.eng->host_local[r], sizeof(float) * n) == 0,
			      "rank %d's local gradient changed under the replica check", r);
	free(alone);
	env_close(&v);
}
END_TEST

/* 1 when no rank waited for its device more than `limit` times in the window */
static int syncs_at_most(const struct window_result *res, int world, uint64_t limit)
{
	for (int r = 0; r < world; r++)
		if (res->rank_counts[r].syncs > limit)
			return 0;
	return 1;
}

/* A training window makes each rank wait for its device once (its loss sum read back),
 * whatever the accumulation, the unit or exact mode; the same check catches a window with
 * one wait more (the replica check's fingerprint read back). */
START_TEST(a_training_window_waits_for_the_device_once)
{
	const char *setups[] = {"", "train.unit=sequence", "train.shards=8"};
	for (int i = 0; i < 3; i++) {
		struct env v;
		struct err e;
		struct window_result res, checked;
		err_clear(&e);
		env_extra = setups[i];
		env_open(&v, 2, 4, 1, LAYOUT_PACKED, 0);
		env_extra = "";
		for (int k = 0; k < 2; k++) {
			ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
			ck_assert_msg(engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN, ENGINE_UPDATE, &res,
						    &e) == ERR_OK, "%s", e.msg);
			ck_assert_msg(syncs_at_most(&res, 2, 1), "'%s': rank 0 waited %llu times, "
				      "rank 1 %llu", setups[i],
				      (unsigned long long)res.rank_counts[0].syncs,
				      (unsigned long long)res.rank_counts[1].syncs);
			ck_assert_uint_eq(res.rank_counts[0].syncs, 1);
		}
		ck_assert_msg(engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN,
					    ENGINE_UPDATE | ENGINE_CHECK_REPLICAS, &checked, &e) ==
			      ERR_OK, "%s", e.msg);
		ck_assert(!syncs_at_most(&checked, 2, 1));
		env_close(&v);
	}
}
END_TEST

/* Each rank's device counts of a window come back with it: the replica check is one
 * operation more and one more host wait on every rank (its fingerprint read back), and no
 * copy (the parameters stay on the device). */
START_TEST(windows_report_their_device_counts)
{
	struct env v;
	struct err e;
	struct window_result plain, checked;
	err_clear(&e);
	env_open(&v, 2, 2, 0, LAYOUT_PACKED, 0);
	ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
	ck_assert_msg(engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN, ENGINE_UPDATE, &plain, &e) ==
		      ERR_OK, "%s", e.msg);
	ck_assert_msg(engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN,
				    ENGINE_UPDATE | ENGINE_CHECK_REPLICAS, &checked, &e) == ERR_OK,
		      "%s", e.msg);
	for (int r = 0; r < 2; r++) {
		/* six GEMMs and six element operations per non-empty microbatch at least */
		ck_assert_uint_ge(plain.rank_counts[r].launches, 12);
		ck_assert_uint_ge(plain.rank_counts[r].syncs, 1);
		ck_assert_uint_eq(checked.rank_counts[r].syncs, plain.rank_counts[r].syncs + 1);
		ck_assert_uint_eq(checked.rank_counts[r].launches, plain.rank_counts[r].launches + 1);
		ck_assert_uint_eq(checked.rank_counts[r].copies, plain.rank_counts[r].copies);
	}
	env_close(&v);
}
END_TEST

/* The GEMM arithmetic each rank's device counts in a window, against 6 (C D H + H V) FLOP
 * per supervised token (bench's training math): equal in the packed layout, where every
 * GEMM row is a supervised token, and more in the padded one (the padding's rows), so
 * the count follows the rows the GEMMs really had. The CPU backend also times them. */
static double window_gemm_flop(int layout, double *math, double *seconds)
{
	struct env v;
	struct err e;
	struct window_result res;
	err_clear(&e);
	env_open(&v, 2, 2, 1, layout, 0);
	ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
	ck_assert_msg(engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN, ENGINE_UPDATE, &res, &e) ==
		      ERR_OK, "%s", e.msg);
	const struct model_shape *m = &v.eng->shape;
	const int *dim = m->dim; /* the window MLP's sizes */
	double per_token = 6.0 * ((double)dim[WINDOW_MLP_CONTEXT] * dim[WINDOW_MLP_EMBED_DIM] *
				  dim[WINDOW_MLP_HIDDEN] + (double)dim[WINDOW_MLP_HIDDEN] * m->vocab);
	double flop = 0.0;
	*math = 0.0;
	*seconds = 0.0;
	for (int r = 0; r < 2; r++) {
		ck_assert_double_ge(res.rank_counts[r].gemm_flop, per_token * res.rank_tokens[r]);
		flop += res.rank_counts[r].gemm_flop;
		*math += per_token * res.rank_tokens[r];
		*seconds += res.rank_counts[r].gemm_seconds;
	}
	env_close(&v);
	return flop;
}

START_TEST(a_window_counts_its_gemm_arithmetic)
{
	double math, seconds;
	double packed = window_gemm_flop(LAYOUT_PACKED, &math, &seconds);
	ck_assert_double_eq(packed, math);
	ck_assert_double_gt(seconds, 0.0);
	double padded = window_gemm_flop(LAYOUT_PADDED, &math, &seconds);
	ck_assert_double_gt(padded, math);
}
END_TEST

START_TEST(runs_are_reproducible_bit_for_bit)
{
	float *first = NULL;
	for (int run = 0; run < 2; run++) {
		struct env v;
		struct err e;
		err_clear(&e);
		env_open(&v, 2, 2, 1, LAYOUT_PACKED, 0);
		for (int i = 0; i < 4; i++) {
			struct window_result res;
			ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
			ck_assert_int_eq(engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN, ENGINE_UPDATE, &res,
						       &e), ERR_OK);
		}
		size_t n = v.eng->shape.n_params;
		float *p = malloc(n * sizeof(float));
		ck_assert_int_eq(engine_get_state(v.eng, p, NULL, &e), ERR_OK);
		if (run == 0)
			first = p;
		else {
			ck_assert(memcmp(first, p, n * sizeof(float)) == 0);
			free(p);
		}
		env_close(&v);
	}
	free(first);
}
END_TEST

START_TEST(check_loss_counterexample)
{
	const double sums[2] = {12.0, 108.0};
	const int64_t counts[2] = {12, 36};
	for (int avg = 0; avg < 2; avg++) {
		ck_assert(norm_window_loss(NORM_MEAN_OF_MEANS, avg, 2, sums, counts) == 2.0);
		ck_assert(norm_window_loss(NORM_GLOBAL_TOKEN, avg, 2, sums, counts) == 2.5);
	}
	/* the W / N factor of the 12/36 example: 2 / 48 */
	ck_assert(norm_factor(NORM_GLOBAL_TOKEN, 1, 2, 1, 48, 12, 12) == 2.0 / 48.0);
	ck_assert(norm_factor(NORM_GLOBAL_TOKEN, 0, 2, 1, 48, 12, 12) == 1.0 / 48.0);
	ck_assert(norm_factor(NORM_DOUBLE_ACCUM, 1, 2, 2, 48, 12, 6) == 2.0 / 96.0);
	ck_assert(norm_factor(NORM_MEAN_OF_MEANS, 1, 2, 1, 48, 0, 0) == 0.0);
}
END_TEST

/* ---- the weighting unit ---- */

/* The sequence unit: the W-device gradient equals the reference (1 / (S n_s) per token)
 * for W = 1..3, accumulation 1 and 3, sum and avg, both layouts, with prompts; every
 * control whose factors differ on the window is caught. */
START_TEST(sequence_unit_parity_and_controls)
{
	int cases = 0;
	env_extra = "train.unit=sequence";
	for (int world = 1; world <= 3; world++)
		for (int micro = 1; micro <= 3; micro += 2)
			for (int avg = 0; avg < 2; avg++)
				for (int layout = 0; layout < 2; layout++) {
					struct env v;
					struct err e;
					err_clear(&e);
					env_open(&v, world, micro, avg, layout, 3);
					ck_assert_int_eq(v.eng->s.unit, UNIT_SEQUENCE);
					ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
					struct parity_stats st = env_parity(&v, NORM_GLOBAL_TOKEN);
					ck_assert_msg(st.pass, "W=%d M=%d avg=%d layout=%d: %zu outside",
						      world, micro, avg, layout, st.outside);
					for (int mode = 1; mode < NORM_COUNT; mode++) {
						if (!parity_distinguishable(mode, UNIT_SEQUENCE, &v.w, avg))
							continue;
						ck_assert_msg(!env_parity(&v, mode).pass, "W=%d M=%d: %s "
							      "(sequence unit) not caught", world, micro,
							      norm_mode_name(mode));
					}
					if (micro > 1) /* M divides the sequence factors too */
						ck_assert(parity_distinguishable(NORM_DOUBLE_ACCUM,
										 UNIT_SEQUENCE, &v.w, avg));
					env_close(&v);
					cases++;
				}
	env_extra = "";
	ck_assert_int_eq(cases, 24);
}
END_TEST

/* The reduced gradient of the first window of a corpus of n sequences of the given lengths
 * and prompts (NULL: none) under a unit, on `world` ranks (malloc'd, *n_params floats). */
static float *unit_gradient(const int32_t *len, const int32_t *prefix, int n, int unit,
			    int world, size_t *n_params)
{
	struct settings s;
	struct corpus c;
	struct sampler sp;
	struct window w;
	struct engine *eng;
	struct window_result res;
	struct err e;
	int32_t tok[64 * 16];
	int total = 0;
	err_clear(&e);
	testutil_settings(&s, "train.unit=%s devices.world=%d", unit ? "sequence" : "token", world);
	for (int i = 0; i < n; i++)
		for (int t = 0; t < len[i]; t++, total++)
			tok[total] = DATA_RESERVED + (i * 7 + t * 3) % (s.vocab - DATA_RESERVED);
	ck_assert_int_eq(corpus_from_arrays(n, len, prefix, tok, s.vocab, &c, &e), ERR_OK);
	ck_assert_msg(sampler_init(&sp, &c, &s, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(window_init(&w, s.world, s.accumulation, s.batch_size, &e), ERR_OK);
	ck_assert_int_eq(engine_create(&s, &c, NULL, &eng, &e), ERR_OK);
	float *params = malloc(eng->shape.n_params * sizeof(float));
	float *grad = malloc(eng->shape.n_params * sizeof(float));
	model_init_params(&eng->shape, s.seed, params);
	ck_assert_int_eq(engine_set_state(eng, params, NULL, 0, &e), ERR_OK);
	ck_assert_int_eq(sampler_next(&sp, &w, &e), ERR_OK);
	ck_assert_int_eq(engine_window(eng, &w, NORM_GLOBAL_TOKEN, ENGINE_CAPTURE_REDUCED, &res, &e),
			 ERR_OK);
	memcpy(grad, eng->host_reduced, eng->shape.n_params * sizeof(float));
	*n_params = eng->shape.n_params;
	engine_destroy(eng);
	free(params);
	window_free(&w);
	sampler_free(&sp);
	corpus_free(&c);
	return grad;
}

/* Equal lengths: every sequence has n tokens, 1 / (S n) = 1 / N, the units agree. Unequal
 * lengths: the short sequences weigh more per token under the sequence unit, and the
 * gradients differ by far more than the parity tolerance (the figure is printed). */
START_TEST(units_agree_on_equal_lengths_only)
{
	int32_t equal[48], unequal[48];
	size_t n;
	struct parity_stats st;
	for (int i = 0; i < 48; i++) {
		equal[i] = 8;
		unequal[i] = 4 + (i * 5) % 13;
	}
	float *tok = unit_gradient(equal, NULL, 48, UNIT_TOKEN, 1, &n);
	float *seq = unit_gradient(equal, NULL, 48, UNIT_SEQUENCE, 1, &n);
	parity_compare(seq, tok, n, 1e-6, 1e-4, &st);
	ck_assert_msg(st.pass, "equal lengths: %zu components differ, max abs %g", st.outside,
		      st.max_abs);
	free(tok);
	free(seq);
	tok = unit_gradient(unequal, NULL, 48, UNIT_TOKEN, 1, &n);
	seq = unit_gradient(unequal, NULL, 48, UNIT_SEQUENCE, 1, &n);
	parity_compare(seq, tok, n, 1e-6, 1e-4, &st);
	double d2 = 0, t2 = 0;
	for (size_t i = 0; i < n; i++) {
		d2 += ((double)seq[i] - tok[i]) * ((double)seq[i] - tok[i]);
		t2 += (double)tok[i] * tok[i];
	}
	printf("units: lengths 4..16, sequence vs token gradient: |d| / |g_token| = %.3f, "
	       "%zu of %zu components outside the parity tolerance\n", sqrt(d2 / t2), st.outside, n);
	ck_assert(!st.pass);
	ck_assert_double_gt(sqrt(d2 / t2), 1e-3);
	free(tok);
	free(seq);
}
END_TEST

/* The rank-local version of the sequence unit (mean_of_means: each rank's mean over its own
 * sequences, then averaged) is caught as soon as the ranks hold different numbers of
 * sequences with a target: here every third sequence is all prompt, so the ranks' counts
 * S_r differ on some window while their sequence counts are equal. */
START_TEST(rank_local_sequence_mean_is_caught)
{
	int32_t len[96], pre[96], tok[96 * 16];
	struct settings s;
	struct corpus c;
	struct sampler sp;
	struct window w;
	struct engine *eng;
	struct err e;
	int total = 0, found = 0;
	err_clear(&e);
	testutil_settings(&s, "train.unit=sequence train.plan=balanced");
	for (int i = 0; i < 96; i++) {
		len[i] = 4 + (i * 5) % 12;
		pre[i] = i % 3 == 0 ? len[i] : 1;
		for (int t = 0; t < len[i]; t++, total++)
			tok[total] = DATA_RESERVED + (i * 7 + t * 3) % (s.vocab - DATA_RESERVED);
	}
	ck_assert_int_eq(corpus_from_arrays(96, len, pre, tok, s.vocab, &c, &e), ERR_OK);
	ck_assert_msg(sampler_init(&sp, &c, &s, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(window_init(&w, s.world, s.accumulation, s.batch_size, &e), ERR_OK);
	ck_assert_int_eq(engine_create(&s, &c, NULL, &eng, &e), ERR_OK);
	float *params = malloc(eng->shape.n_params * sizeof(float));
	float *ref = malloc(eng->shape.n_params * sizeof(float));
	model_init_params(&eng->shape, s.seed, params);
	for (int k = 0; k < 20 && !found; k++) {
		struct window_result res;
		struct parity_stats st;
		double loss;
		ck_assert_int_eq(sampler_next(&sp, &w, &e), ERR_OK);
		if (w.rank_sequences[0] == w.rank_sequences[1] || w.S == 0)
			continue;
		found = 1;
		ck_assert_int_eq(w.rank_sequences[0] + w.rank_sequences[1], w.S);
		ck_assert(parity_distinguishable(NORM_MEAN_OF_MEANS, UNIT_SEQUENCE, &w, 1));
		ck_assert_int_eq(engine_set_state(eng, params, NULL, 0, &e), ERR_OK);
		ck_assert_int_eq(engine_reference(eng, &w, ref, &loss, &e), ERR_OK);
		for (int mode = NORM_GLOBAL_TOKEN; mode <= NORM_MEAN_OF_MEANS; mode++) {
			ck_assert_int_eq(engine_set_state(eng, params, NULL, 0, &e), ERR_OK);
			ck_assert_int_eq(engine_window(eng, &w, mode, ENGINE_CAPTURE_REDUCED, &res, &e),
					 ERR_OK);
			parity_compare(eng->host_reduced, ref, eng->shape.n_params, 1e-6, 1e-4, &st);
			ck_assert_msg(st.pass == (mode == NORM_GLOBAL_TOKEN), "%s: pass = %d",
				      norm_mode_name(mode), st.pass);
		}
	}
	ck_assert_msg(found, "no window with unequal sequence counts in 20");
	engine_destroy(eng);
	free(params);
	free(ref);
	window_free(&w);
	sampler_free(&sp);
	corpus_free(&c);
}
END_TEST

/* The memory env reports grows with the vocabulary as the model says: the embedding
 * (V x D), the output layer (V x H + V) three times over, and the logits (rows x V). */
START_TEST(memory_per_rank_follows_the_vocabulary)
{
	struct settings a, b;
	struct engine_memory ma, mb;
	testutil_settings(&a, "data.vocab=100");
	testutil_settings(&b, "data.vocab=1100");
	engine_memory_per_rank(&a, &ma);
	engine_memory_per_rank(&b, &mb);
	size_t dv = 1000, per_id = (size_t)a.embed + a.hidden + 1;
	ck_assert_uint_eq(mb.n_params - ma.n_params, dv * per_id);
	ck_assert_uint_eq(mb.state_bytes - ma.state_bytes, 3 * 4 * dv * per_id);
	ck_assert_uint_eq(mb.logits_bytes - ma.logits_bytes, 4 * dv * (size_t)ma.rows);
	ck_assert_uint_eq(mb.total - ma.total, 3 * 4 * dv * per_id + 4 * dv * (size_t)ma.rows);
	ck_assert_int_eq(ma.rows, a.batch_size * a.max_len);
	ck_assert_uint_eq(ma.tree_bytes, 0);
}
END_TEST

/* The sequence unit against its definition, summed in double outside the engine's sequence
 * path: (1/S) sum_s grad(mean token loss of s), each term the token-unit reference of a
 * window holding s alone. W = 2, accumulation 3, with prompts. */
START_TEST(sequence_unit_is_the_mean_of_sequence_means)
{
	struct env v, one;
	struct err e;
	struct window w1;
	struct window_result res;
	struct parity_stats st;
	err_clear(&e);
	env_extra = "train.unit=sequence";
	env_open(&v, 2, 3, 1, LAYOUT_PACKED, 3);
	env_extra = "";
	env_open(&one, 1, 1, 1, LAYOUT_PACKED, 3); /* same corpus, same initial parameters */
	ck_assert_int_eq(sampler_next(&v.sp, &v.w, &e), ERR_OK);
	ck_assert_int_eq(engine_window(v.eng, &v.w, NORM_GLOBAL_TOKEN, ENGINE_CAPTURE_REDUCED, &res,
				       &e), ERR_OK);
	size_t n = v.eng->shape.n_params;
	double *sum = calloc(n, sizeof *sum);
	float *g = malloc(n * sizeof *g), *got = malloc(n * sizeof *got);
	memcpy(got, v.eng->host_reduced, n * sizeof *got);
	ck_assert_int_eq(window_init(&w1, 1, 1, 1, &e), ERR_OK);
	int64_t S = 0;
	for (int r = 0; r < v.w.world; r++)
		for (int m = 0; m < v.w.micro; m++)
			for (int k = 0; k < v.w.mb[r][m].n; k++) {
				int id = v.w.mb[r][m].ids[k], count = 1;
				double loss;
				if (corpus_supervised(&v.c, id) == 0)
					continue;
				S++;
				ck_assert_int_eq(window_assign(&w1, &one.c, &id, &count, &e), ERR_OK);
				ck_assert_int_eq(engine_reference(one.eng, &w1, g, &loss, &e), ERR_OK);
				for (size_t i = 0; i < n; i++)
					sum[i] += g[i];
			}
	ck_assert_int_eq(S, v.w.S);
	for (size_t i = 0; i < n; i++)
		g[i] = (float)(sum[i] / (double)S);
	parity_compare(got, g, n, 1e-6, 1e-4, &st);
	ck_assert_msg(st.pass, "%zu components differ from (1/S) sum of sequence means, max abs %g",
		      st.outside, st.max_abs);
	free(sum);
	free(g);
	free(got);
	window_free(&w1);
	env_close(&v);
	env_close(&one);
}
END_TEST

/* ---- reset: a reused engine is a new one in every bit ---- */

enum reset_diff { DIFF_SETTINGS = 1, DIFF_STATE = 2, DIFF_COUNTERS = 4, DIFF_RUN = 8 };

/* What differs between engines a and b now (enum reset_diff): their settings and
 * injections, every rank's parameters and momentum (the others are not readable from
 * outside), updates_done and the devices' counts. */
static unsigned engines_differ(struct engine *a, struct engine *b)
{
	struct err e;
	size_t n = a->shape.n_params;
	float *pa = malloc(2 * n * sizeof(float)), *pb = malloc(2 * n * sizeof(float));
	unsigned diff = 0;
	err_clear(&e);
	ck_assert_int_eq(engine_get_state(a, pa, pa + n, &e), ERR_OK);
	ck_assert_int_eq(engine_get_state(b, pb, pb + n, &e), ERR_OK);
	if (memcmp(pa, pb, 2 * n * sizeof(float)) != 0)
		diff |= DIFF_STATE;
	if (memcmp(&a->s, &b->s, sizeof a->s) != 0 ||
	    a->fault.inject_rank != b->fault.inject_rank ||
	    a->fault.inject_window != b->fault.inject_window || a->corpus != b->corpus)
		diff |= DIFF_SETTINGS;
	if (a->updates_done != b->updates_done)
		diff |= DIFF_COUNTERS;
	for (int l = 0; l < a->local; l++) {
		/* what was issued; the seconds spent in GEMMs are a measurement */
		struct dev_counts ca = a->rep[l].dev->counts, cb = b->rep[l].dev->counts;
		ca.gemm_seconds = cb.gemm_seconds = 0.0;
		if (memcmp(&ca, &cb, sizeof ca) != 0)
			diff |= DIFF_COUNTERS;
	}
	free(pa);
	free(pb);
	return diff;
}

/* Three training windows from the seeded parameters on eng, drawn by a fresh sampler of
 * s: the final parameters and momentum (2 n floats, malloc'd) and the losses. */
static float *train_three(struct engine *eng, const struct settings *s, const struct corpus *c,
			  double loss[3])
{
	struct err e;
	struct sampler sp;
	struct window w;
	size_t n = eng->shape.n_params;
	float *out = malloc(2 * n * sizeof(float));
	err_clear(&e);
	ck_assert_int_eq(sampler_init(&sp, c, s, &e), ERR_OK);
	ck_assert_int_eq(window_init(&w, s->world, s->accumulation, s->batch_size, &e), ERR_OK);
	model_init_params(&eng->shape, s->seed, out);
	ck_assert_int_eq(engine_set_state(eng, out, NULL, 0, &e), ERR_OK);
	for (int i = 0; i < 3; i++) {
		struct window_result res;
		ck_assert_int_eq(sampler_next(&sp, &w, &e), ERR_OK);
		ck_assert_msg(engine_window(eng, &w, NORM_GLOBAL_TOKEN, ENGINE_UPDATE, &res, &e) ==
			      ERR_OK, "%s", e.msg);
		loss[i] = res.loss;
	}
	ck_assert_int_eq(engine_get_state(eng, out, out + n, &e), ERR_OK);
	window_free(&w);
	sampler_free(&sp);
	return out;
}

/* An engine that trained under other settings (another learning rate, a larger batch
 * room), then reset to s, against a new engine of s: the same state right after, and the
 * same bits after three windows; a reset that leaves out one of its parts is caught. */
START_TEST(a_reset_engine_is_a_new_one_in_every_bit)
{
	struct settings s, other;
	struct corpus c;
	struct err e;
	double loss_new[3], loss_reset[3];
	err_clear(&e);
	testutil_settings(&s, "devices.world=2 train.accumulation=2 data.train=256");
	testutil_settings(&other, "devices.world=2 train.accumulation=3 train.lr=0.05 "
			  "data.train=256 train.batch_size=6");
	ck_assert_int_eq(corpus_build(&s, &c, &e), ERR_OK);
	const unsigned parts[4] = {ENGINE_RESET_ALL, ENGINE_RESET_ALL & ~ENGINE_RESET_SETTINGS,
				   ENGINE_RESET_ALL & ~ENGINE_RESET_STATE,
				   ENGINE_RESET_ALL & ~ENGINE_RESET_COUNTERS};
	const unsigned caught[4] = {0, DIFF_SETTINGS, DIFF_STATE, DIFF_COUNTERS};
	for (int k = 0; k < 4; k++) {
		struct engine *fresh, *used;
		ck_assert_int_eq(engine_create(&other, &c, NULL, &used, &e), ERR_OK);
		free(train_three(used, &other, &c, loss_reset));
		ck_assert(engine_fits(used, &s));
		ck_assert_msg(engine_reset_parts(used, &s, &c, NULL, parts[k], &e) == ERR_OK, "%s",
			      e.msg);
		ck_assert_int_eq(engine_create(&s, &c, NULL, &fresh, &e), ERR_OK);
		unsigned diff = engines_differ(fresh, used);
		ck_assert_msg((diff & caught[k]) == caught[k] && (k > 0 || diff == 0),
			      "reset parts %#x: differences %#x", parts[k], diff);
		if (k == 0) { /* and so on through three windows */
			float *a = train_three(fresh, &s, &c, loss_new);
			float *b = train_three(used, &s, &c, loss_reset);
			ck_assert(memcmp(a, b, 2 * fresh->shape.n_params * sizeof(float)) == 0);
			ck_assert(memcmp(loss_new, loss_reset, sizeof loss_new) == 0);
			ck_assert_int_eq(engines_differ(fresh, used), 0);
			free(a);
			free(b);
		}
		engine_destroy(fresh);
		engine_destroy(used);
	}
	corpus_free(&c);
}
END_TEST

/* What an engine cannot run after a reset: other ranks, another model, more batch room
 * than it allocated, exact mode's tree of another size. */
START_TEST(an_engine_fits_only_what_it_was_made_for)
{
	struct settings s, t;
	struct corpus c;
	struct engine *eng;
	struct err e;
	err_clear(&e);
	testutil_settings(&s, "devices.world=2 train.shards=4 train.accumulation=2");
	ck_assert_int_eq(corpus_build(&s, &c, &e), ERR_OK);
	ck_assert_int_eq(engine_create(&s, &c, NULL, &eng, &e), ERR_OK);
	const char *misfits[] = {"devices.world=4 train.shards=4 train.accumulation=1",
				 "devices.world=2 train.shards=8 train.accumulation=4",
				 "devices.world=2 train.shards=4 train.accumulation=2 model.hidden=16",
				 "devices.world=2 train.shards=4 train.accumulation=2 train.batch_size=64",
				 "devices.world=2 train.shards=4 train.accumulation=2 devices.timeout=7"};
	for (size_t i = 0; i < sizeof misfits / sizeof *misfits; i++) {
		testutil_settings(&t, "%s", misfits[i]);
		ck_assert_msg(!engine_fits(eng, &t), "fits %s", misfits[i]);
		ck_assert_int_eq(engine_reset(eng, &t, &c, NULL, &e), ERR_CONFIG);
	}
	/* the default mode on fewer rows fits (the tree buffers stay unused) */
	testutil_settings(&t, "devices.world=2 train.shards=0 train.accumulation=1 train.batch_size=1");
	ck_assert(engine_fits(eng, &t));
	engine_destroy(eng);
	corpus_free(&c);
}
END_TEST

/* The keep hands the same engine out again while it fits, makes one per shape, and
 * replaces an engine poisoned by a failed window instead of reusing it. */
START_TEST(the_keep_reuses_fitting_engines_and_replaces_poisoned_ones)
{
	struct settings s, one;
	struct corpus c;
	struct engine_keep k;
	struct engine *a, *b, *x;
	struct engine_opts fail;
	struct err e;
	err_clear(&e);
	testutil_settings(&s, "devices.world=2 train.accumulation=2 data.train=256");
	testutil_settings(&one, "devices.world=1 train.accumulation=2 data.train=256");
	ck_assert_int_eq(corpus_build(&s, &c, &e), ERR_OK);
	engine_keep_init(&k);
	long before = engine_creations();
	ck_assert_int_eq(engine_keep_take(&k, &s, &c, NULL, &a, &e), ERR_OK);
	ck_assert_int_eq(engine_keep_take(&k, &one, &c, NULL, &x, &e), ERR_OK);
	engine_keep_give(&k, x);
	/* lent: a second engine of the same shape meanwhile */
	ck_assert_int_eq(engine_keep_take(&k, &s, &c, NULL, &b, &e), ERR_OK);
	ck_assert_ptr_ne(a, b);
	engine_keep_give(&k, a);
	engine_keep_give(&k, b);
	ck_assert_int_eq(engine_keep_take(&k, &s, &c, NULL, &b, &e), ERR_OK);
	ck_assert_ptr_eq(a, b);
	ck_assert_int_eq(engine_creations() - before, 3);
	ck_assert_int_eq(k.created, 3);
	ck_assert_int_eq(k.reused, 1);
	/* a failed window poisons it: never reset, never handed out again */
	engine_opts_init(&fail);
	fail.fault.inject_rank = 1;
	fail.fault.inject_window = 0;
	engine_keep_give(&k, b);
	ck_assert_int_eq(engine_keep_take(&k, &s, &c, &fail, &b, &e), ERR_OK);
	double loss[3];
	struct sampler sp;
	struct window w;
	struct window_result res;
	ck_assert_int_eq(sampler_init(&sp, &c, &s, &e), ERR_OK);
	ck_assert_int_eq(window_init(&w, 2, 2, s.batch_size, &e), ERR_OK);
	ck_assert_int_eq(sampler_next(&sp, &w, &e), ERR_OK);
	ck_assert_int_eq(engine_window(b, &w, NORM_GLOBAL_TOKEN, ENGINE_UPDATE, &res, &e), ERR_DEVICE);
	ck_assert(b->poisoned);
	ck_assert_int_eq(engine_reset(b, &s, &c, NULL, &e), ERR_DEVICE);
	engine_keep_give(&k, b);
	ck_assert_int_eq(engine_keep_take(&k, &s, &c, NULL, &x, &e), ERR_OK);
	ck_assert_int_eq(k.replaced, 1);
	ck_assert_int_eq(engine_creations() - before, 4);
	ck_assert(!x->poisoned);
	free(train_three(x, &s, &c, loss));
	engine_keep_give(&k, x);
	engine_keep_close(&k);
	ck_assert_int_eq(k.n, 0);
	window_free(&w);
	sampler_free(&sp);
	corpus_free(&c);
}
END_TEST

/* The exercise on the engines of a keep (one, reset between its cases) gives the results
 * of its own new engines, in every bit. */
START_TEST(the_exercise_on_a_kept_engine_matches_new_ones)
{
	struct settings s;
	struct corpus c;
	struct engine_keep k;
	struct exercise_result own, kept;
	struct err e;
	err_clear(&e);
	testutil_settings(&s, "devices.world=2 train.accumulation=2");
	ck_assert_int_eq(corpus_build(&s, &c, &e), ERR_OK);
	engine_keep_init(&k);
	long before = engine_creations();
	ck_assert_int_eq(exercise_run(&s, &c, NULL, &own, &e), ERR_OK);
	ck_assert_int_eq(engine_creations() - before, 2);
	struct engine *eng;
	ck_assert_int_eq(engine_keep_take(&k, &s, &c, NULL, &eng, &e), ERR_OK);
	engine_keep_give(&k, eng);
	ck_assert_msg(exercise_run(&s, &c, &k, &kept, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(engine_creations() - before, 3);
	ck_assert_int_eq(k.reused, 2);
	ck_assert(memcmp(&own, &kept, sizeof own) == 0);
	engine_keep_close(&k);
	corpus_free(&c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("engine");
	TCase *tc = tcase_create("engine");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, check_loss_counterexample);
	tcase_add_test(tc, parity_over_worlds_accumulations_reduces_layouts);
	tcase_add_test(tc, sum_and_avg_give_the_same_gradient);
	tcase_add_test(tc, token_batching_parity_and_controls);
	tcase_add_test(tc, token_batching_rank_with_no_microbatch);
	tcase_add_test(tc, l2_term_once_per_window);
	tcase_add_test(tc, z_loss_normalized_like_the_tokens);
	tcase_add_test(tc, class_weights_divide_by_their_sum);
	tcase_add_test(tc, class_weights_refuse_a_bad_weight_by_its_value);
	tcase_add_test(tc, negative_controls_fail_on_the_seed_imbalance);
	tcase_add_test(tc, balanced_counts_hide_mean_of_means);
	tcase_add_test(tc, controls_near_global_token_are_not_required);
	tcase_add_test(tc, effect_is_measured_in_tolerances);
	tcase_add_test(tc, the_tolerance_rule_refuses_nan_on_either_side);
	tcase_add_test(tc, plans_give_the_same_gradient);
	tcase_add_test(tc, globally_empty_window_is_declined_by_every_rank);
	tcase_add_test(tc, locally_empty_rank_still_matches);
	tcase_add_test(tc, injected_failure_releases_every_rank);
	tcase_add_test(tc, a_hung_rank_fails_the_window_after_the_timeout);
	tcase_add_test(tc, a_slow_rank_fails_the_window_after_the_timeout);
	tcase_add_test(tc, a_hung_single_rank_fails_the_window_after_the_timeout);
	tcase_add_test(tc, a_count_unlike_the_schedulers_stops_every_rank);
	tcase_add_test(tc, replicas_stay_identical);
	tcase_add_test(tc, runs_are_reproducible_bit_for_bit);
	tcase_add_test(tc, windows_report_their_device_counts);
	tcase_add_test(tc, a_window_counts_its_gemm_arithmetic);
	tcase_add_test(tc, a_training_window_waits_for_the_device_once);
	tcase_add_test(tc, a_diverged_replica_is_detected);
	tcase_add_test(tc, replicas_are_checked_while_local_gradients_are_captured);
	tcase_add_test(tc, sequence_unit_parity_and_controls);
	tcase_add_test(tc, units_agree_on_equal_lengths_only);
	tcase_add_test(tc, rank_local_sequence_mean_is_caught);
	tcase_add_test(tc, memory_per_rank_follows_the_vocabulary);
	tcase_add_test(tc, sequence_unit_is_the_mean_of_sequence_means);
	tcase_add_test(tc, a_reset_engine_is_a_new_one_in_every_bit);
	tcase_add_test(tc, an_engine_fits_only_what_it_was_made_for);
	tcase_add_test(tc, the_keep_reuses_fitting_engines_and_replaces_poisoned_ones);
	tcase_add_test(tc, the_exercise_on_a_kept_engine_matches_new_ones);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
