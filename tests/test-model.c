/*
 * test-model: the model's gradient against central finite differences, packed and
 * padded layouts, unsupervised prefixes, and the shared element math (kmath.h).
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "corpus.h"
#include "dev.h"
#include "kmath.h"
#include "model.h"
#include "testutil.h"

struct fixture {
	struct settings s;
	struct corpus c;
	struct model_shape m;
	struct dev *d;
	struct model_ws *ws;
	struct batch b;
	float *params, *grads;
};

static void fixture_open(struct fixture *f, int prefix_max, int hidden)
{
	struct err e;
	err_clear(&e);
	testutil_tiny_settings(&f->s);
	f->s.prefix_max = prefix_max;
	f->s.hidden = hidden;
	ck_assert_int_eq(corpus_build(&f->s, &f->c, &e), ERR_OK);
	model_shape_init(&f->m, f->s.vocab, f->s.context, f->s.embed, f->s.hidden);
	ck_assert_int_eq(dev_host_create(0, &f->d, &e), ERR_OK);
	ck_assert_int_eq(model_ws_create(f->d, &f->m, batch_max_rows(4, f->s.max_len), &f->ws, &e),
			 ERR_OK);
	ck_assert_int_eq(batch_alloc(&f->b, batch_max_rows(4, f->s.max_len), f->s.context, &e), ERR_OK);
	f->params = calloc(f->m.n_params, sizeof(float));
	f->grads = calloc(f->m.n_params, sizeof(float));
	model_init_params(&f->m, 11, f->params);
	/* non-zero biases so that their gradients are exercised away from the origin */
	for (size_t i = 0; i < f->m.p[MODEL_B1].count; i++)
		f->params[f->m.p[MODEL_B1].offset + i] = 0.05f * (float)((int)(i % 5) - 2);
	for (size_t i = 0; i < f->m.p[MODEL_B2].count; i++)
		f->params[f->m.p[MODEL_B2].offset + i] = 0.03f * (float)((int)(i % 7) - 3);
}

static void fixture_close(struct fixture *f)
{
	free(f->params);
	free(f->grads);
	batch_free(&f->b);
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
	ck_assert_int_eq(model_eval(f->ws, f->params, &f->b, &loss, &hits, &e), ERR_OK);
	return loss;
}

START_TEST(gradient_matches_finite_differences)
{
	struct fixture f;
	struct err e;
	err_clear(&e);
	fixture_open(&f, 2, 6);
	int ids[3] = {0, 5, 9};
	ck_assert_int_eq(batch_build(&f.b, &f.c, ids, 3, LAYOUT_PACKED, &e), ERR_OK);
	double loss;
	ck_assert_int_eq(model_step(f.ws, f.params, f.grads, &f.b, 1.0f, &loss, &e), ERR_OK);
	/* every component of every tensor, central differences in float with h = 1e-2:
	 * the loss is a sum over few positions so its float rounding stays small */
	const float h = 1e-2f;
	int checked = 0;
	for (int t = 0; t < MODEL_NPARAM; t++) {
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
	ck_assert_int_eq(batch_build(&f.b, &f.c, ids, 2, LAYOUT_PACKED, &e), ERR_OK);
	ck_assert_int_eq(model_step(f.ws, f.params, f.grads, &f.b, 1.0f, &l1, &e), ERR_OK);
	float *g2 = calloc(f.m.n_params, sizeof(float));
	ck_assert_int_eq(model_step(f.ws, f.params, g2, &f.b, 0.5f, &l2, &e), ERR_OK);
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
	ck_assert_int_eq(batch_build(&f.b, &f.c, ids, 4, LAYOUT_PACKED, &e), ERR_OK);
	int packed_rows = f.b.rows;
	int64_t sup = f.b.supervised;
	ck_assert_int_eq(model_step(f.ws, f.params, f.grads, &f.b, 0.25f, &lp, &e), ERR_OK);
	ck_assert_int_eq(batch_build(&f.b, &f.c, ids, 4, LAYOUT_PADDED, &e), ERR_OK);
	ck_assert_int_gt(f.b.rows, packed_rows); /* padding and prompts laid out */
	ck_assert_int_eq(f.b.supervised, sup);
	float *g2 = calloc(f.m.n_params, sizeof(float));
	ck_assert_int_eq(model_step(f.ws, f.params, g2, &f.b, 0.25f, &lq, &e), ERR_OK);
	ck_assert_double_eq_tol(lp, lq, 1e-9 * fabs(lp));
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
	ck_assert_int_eq(batch_build(&f.b, &f.c, &id, 1, LAYOUT_PACKED, &e), ERR_OK);
	ck_assert_int_eq(f.b.rows, corpus_supervised(&f.c, id));
	ck_assert_int_eq(f.b.supervised, corpus_len(&f.c, id) - f.c.prefix[id]);
	double packed_loss;
	ck_assert_int_eq(model_step(f.ws, f.params, f.grads, &f.b, 1.0f, &packed_loss, &e), ERR_OK);
	/* the same sequence with the prompt removed from the targets by hand: building the
	 * supervised part alone gives the same loss only if prompts were not targets */
	ck_assert_int_eq(batch_build(&f.b, &f.c, &id, 1, LAYOUT_PADDED, &e), ERR_OK);
	int masked = 0;
	for (int r = 0; r < f.c.prefix[id]; r++)
		masked += f.b.target[r] == -1;
	ck_assert_int_eq(masked, f.c.prefix[id]);
	double padded_loss;
	int64_t hits;
	ck_assert_int_eq(model_eval(f.ws, f.params, &f.b, &padded_loss, &hits, &e), ERR_OK);
	ck_assert_double_eq_tol(packed_loss, padded_loss, 1e-9 * fabs(packed_loss));
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

int main(void)
{
	Suite *s = suite_create("model");
	TCase *tc = tcase_create("model");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, gradient_matches_finite_differences);
	tcase_add_test(tc, gradient_is_linear_in_scale);
	tcase_add_test(tc, packed_and_padded_agree);
	tcase_add_test(tc, prefix_positions_are_not_targets);
	tcase_add_test(tc, kmath_matches_libm);
	tcase_add_test(tc, sgd_follows_pytorch_semantics);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
