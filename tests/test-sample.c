/*
 * test-sample: generation from a gpt (sample.h). The cache of keys and values gives the
 * logits of the uncached forward (the training forward over the whole window) to within
 * rounding, through slides of the window past model.context too, and so the same greedy
 * ids; the repetition penalty, top-p and the end-of-text id do what sample.h says.
 *
 * Why not bit for bit: the cached forward multiplies one row by each weight matrix, the
 * uncached one all rows of the window at once; OpenBLAS picks its kernel (and with it the
 * order in which a dot product's terms are added) by the shape of the product, so the two
 * round differently in the last bits, which the layers then carry on. Everything else (the
 * LayerNorm, GELU, softmax element math) is the same functions in the same order.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check-run.h"
#include "gpt.h"
#include "gpt_shape.h"
#include "sample.h"

#define V 64
#define T 16
#define STEPS 40 /* past model.context: the window slides */

struct model {
	struct model_shape m;
	float *params;
};

static void model_make(struct model *x)
{
	gpt_shape(&x->m, V, 2, 2, 32, T);
	x->params = malloc(sizeof(float) * x->m.n_params);
	ck_assert_ptr_nonnull(x->params);
	gpt_init_params(&x->m, 11, x->params);
}

/* STEPS ids after the prompt 5 6 7, with opts o; the logits of each into logits */
static struct sample_result run(const struct model *x, struct sample_opts o, int32_t *out,
				float *logits)
{
	const int32_t prompt[3] = {5, 6, 7};
	struct sample_result res;
	struct err e;
	err_clear(&e);
	o.tokens = STEPS;
	o.logits = logits;
	ck_assert_msg(sample_generate(&x->m, x->params, prompt, 3, &o, out, &res, &e) == ERR_OK,
		      "%s", e.msg);
	return res;
}

static struct sample_opts greedy(void)
{
	return (struct sample_opts){.temperature = 0.0, .top_p = 1.0, .repetition_penalty = 1.0,
				    .seed = 1, .eot = -1};
}

START_TEST(cache_agrees_with_the_whole_window)
{
	struct model x;
	int32_t a[STEPS], b[STEPS];
	float *la = malloc(sizeof(float) * STEPS * V), *lb = malloc(sizeof(float) * STEPS * V);
	model_make(&x);
	struct sample_opts o = greedy();
	struct sample_result ra = run(&x, o, a, la);
	o.no_cache = 1;
	struct sample_result rb = run(&x, o, b, lb);
	ck_assert_int_eq(ra.produced, STEPS);
	ck_assert_int_eq(rb.produced, STEPS);
	ck_assert_int_ge(ra.slides, 2);
	ck_assert_int_eq(ra.slides, rb.slides);
	double worst = 0.0, largest = 0.0;
	for (int i = 0; i < STEPS * V; i++) {
		worst = fmax(worst, fabs((double)la[i] - lb[i]));
		largest = fmax(largest, fabs((double)lb[i]));
	}
	fprintf(stderr, "cache vs whole window: max |logit difference| %.3g (largest |logit| "
		"%.3g) over %d tokens\n", worst, largest, STEPS);
	ck_assert_msg(worst <= 1e-5 * (1.0 + largest), "logits differ by %g", worst);
	ck_assert_int_eq(memcmp(a, b, sizeof a), 0);
	free(la);
	free(lb);
	free(x.params);
}
END_TEST

/* each greedy id is the largest logit once the penalty is applied to the ids seen */
START_TEST(repetition_penalty_follows_the_rule)
{
	struct model x;
	int32_t out[STEPS], plain[STEPS];
	float *l = malloc(sizeof(float) * STEPS * V);
	model_make(&x);
	struct sample_opts o = greedy();
	run(&x, o, plain, NULL);
	o.repetition_penalty = 3.0;
	run(&x, o, out, l);
	for (int t = 0; t < STEPS; t++) {
		int best = -1;
		float top = -INFINITY;
		for (int id = DATA_RESERVED; id < V; id++) {
			int seen = id == 5 || id == 6 || id == 7;
			for (int j = 0; j < t; j++)
				seen |= out[j] == id;
			float v = l[t * V + id];
			v = seen ? (v > 0 ? v / 3.0f : v * 3.0f) : v;
			if (v > top)
				top = v, best = id;
		}
		ck_assert_int_eq(out[t], best);
	}
	ck_assert_int_ne(memcmp(out, plain, sizeof out), 0); /* it changed something */
	free(l);
	free(x.params);
}
END_TEST

/* a tiny top-p keeps the likeliest id alone: temperature 1 then draws the greedy ids */
START_TEST(top_p_keeps_the_likeliest)
{
	struct model x;
	int32_t g[STEPS], p[STEPS], all[STEPS];
	model_make(&x);
	struct sample_opts o = greedy();
	run(&x, o, g, NULL);
	o.temperature = 1.0;
	run(&x, o, all, NULL);
	o.top_p = 1e-9;
	run(&x, o, p, NULL);
	ck_assert_int_eq(memcmp(g, p, sizeof g), 0);
	ck_assert_int_ne(memcmp(g, all, sizeof g), 0);
	free(x.params);
}
END_TEST

/* drawing the end-of-text id ends the text there, without it */
START_TEST(end_of_text_stops)
{
	struct model x;
	int32_t g[STEPS], out[STEPS];
	model_make(&x);
	struct sample_opts o = greedy();
	run(&x, o, g, NULL);
	o.eot = g[4];
	int first = 0;
	while (g[first] != o.eot)
		first++;
	struct sample_result r = run(&x, o, out, NULL);
	ck_assert_int_eq(r.produced, first);
	ck_assert_int_eq(r.ended_at_eot, 1);
	ck_assert_int_eq(memcmp(out, g, sizeof(int32_t) * (size_t)first), 0);
	free(x.params);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sample");
	TCase *tc = tcase_create("sample");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, cache_agrees_with_the_whole_window);
	tcase_add_test(tc, repetition_penalty_follows_the_rule);
	tcase_add_test(tc, top_p_keeps_the_likeliest);
	tcase_add_test(tc, end_of_text_stops);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
