/*
 * test-optim: the learning-rate schedules, the clipping factor and AdamW's element update
 * (optim.h, kmath.h) against values worked out independently in double.
 */
#include <check.h>
#include <math.h>

#include "check-run.h"
#include "kmath.h"
#include "optim.h"

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

static Suite *optim_suite(void)
{
	Suite *s = suite_create("optim");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_warmup_then_schedules);
	tcase_add_test(tc, test_clip_factor);
	tcase_add_test(tc, test_adamw_first_step);
	tcase_add_test(tc, test_adamw_against_double);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(optim_suite(), 0);
}
