/*
 * test-gpt-run: the GPT through the program's core, as a configuration selects it
 * ([model] kind = gpt): parity of W = 2 and 3 against the single-device reference in
 * both layouts with every wrong normalization caught, exact mode's bits equal to the
 * reference's on W = 2 and 4, and a stopped and resumed training equal to the
 * continuous one in every bit.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check-run.h"
#include "gpt.h"
#include "gpt_shape.h"
#include "model.h"
#include "parity.h"
#include "run.h"
#include "testutil.h"
#include "trainutil.h"
#include "tmpdir.h"

/* the tiny configuration's GPT: 2 blocks of width 16, 2 heads, 16 positions */
#define GPT_SETS "model.kind=gpt model.layers=2 model.heads=2 model.width=16 model.context=16 "

struct conf {
	struct cfg cfg;
	struct settings s;
	struct env env;
};

/* the tiny configuration, GPT_SETS and `sets`, writing under dir */
static void conf_open(struct conf *c, const char *dir, const char *sets)
{
	char all[1200];
	struct err e;
	err_clear(&e);
	snprintf(all, sizeof all, GPT_SETS "%s run.outputs=%s/outputs run.artifacts=%s/artifacts",
		 sets, dir, dir);
	memset(c, 0, sizeof *c);
	ck_assert_int_eq(cfg_init(&c->cfg, settings_keys, &e), ERR_OK);
	ck_assert_int_eq(cfg_load_text(&c->cfg, testutil_tiny_ini, "tiny.ini", &e), ERR_OK);
	for (char *save = NULL, *a = strtok_r(all, " ", &save); a; a = strtok_r(NULL, " ", &save))
		ck_assert_msg(cfg_set(&c->cfg, a, &e) == ERR_OK, "%s", e.msg);
	ck_assert_msg(settings_from_cfg(&c->cfg, &c->s, &e) == ERR_OK, "%s", e.msg);
	env_init(&c->env, &c->cfg, &c->s);
}

/* parity on window 1 under `sets`: it passes, and each wrong normalization that moves
 * the gradient is caught; returns how many were, *bits: the components whose bits
 * differ from the reference's */
static int parity_of(const char *sets, size_t *bits)
{
	struct conf c;
	struct run r;
	struct parity_result res;
	struct err e;
	int caught = 0;
	char *dir = tmpdir_make("ddptok-gpt");
	err_clear(&e);
	conf_open(&c, dir, sets);
	ck_assert_msg(run_open(&c.env, &r, &e) == ERR_OK, "%s", e.msg);
	ck_assert_ptr_eq(r.eng->shape.ops, &gpt_ops);
	ck_assert_msg(parity_run(&r, &c.s, NULL, &res, &e) == ERR_OK && res.ok, "%s: %s", sets,
		      e.msg);
	ck_assert_int_eq(res.modes[NORM_GLOBAL_TOKEN].verdict, PARITY_EXPECTED_PASS);
	for (int mode = 1; mode < NORM_COUNT; mode++)
		if (res.modes[mode].required && res.modes[mode].control == PARITY_DISTINCT) {
			ck_assert_int_eq(res.modes[mode].verdict, PARITY_CAUGHT);
			caught++;
		}
	*bits = res.bits_differ;
	parity_result_free(&res);
	run_close(&r);
	cfg_free(&c.cfg);
	tmpdir_drop(dir);
	return caught;
}

START_TEST(parity_catches_every_wrong_normalization)
{
	static const char *const cases[] = {
		"devices.world=2 train.accumulation=2",
		"devices.world=2 train.accumulation=3 model.layout=padded data.prefix_max=3",
		"devices.world=3 train.accumulation=2 devices.reduce=sum",
	};
	size_t bits;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		ck_assert_msg(parity_of(cases[i], &bits) == NORM_COUNT - 1, "%s", cases[i]);
	/* the sequence unit (each sequence's token mean weighs the same): with equal
	 * sequence counts per rank and microbatch the two means of means are the global one
	 * (parity says so), double accumulation is still caught */
	ck_assert_int_eq(parity_of("devices.world=2 train.accumulation=2 train.unit=sequence",
				   &bits), 1);
}
END_TEST

START_TEST(exact_mode_gives_the_reference_bits)
{
	static const char *const cases[] = {
		"devices.world=2 train.accumulation=2 train.shards=4",
		"devices.world=4 train.accumulation=1 train.shards=4 model.layout=padded",
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		size_t bits = 1;
		parity_of(cases[i], &bits);
		ck_assert_msg(bits == 0, "%s: %zu components differ", cases[i], bits);
	}
}
END_TEST

START_TEST(resume_equals_continuous)
{
	struct conf c;
	struct train_result cont, stop, res;
	char root[3][600], ck[FSX_PATH_MAX];
	char *dir = tmpdir_make("ddptok-gpt");
	conf_open(&c, dir, "train.updates=6 train.stop_at=3 train.lr=0.05 model.layout=padded");
	for (int i = 0; i < 3; i++)
		snprintf(root[i], sizeof root[i], "%s/run%d", dir, i);
	trainutil_run_to(&c.env, 6, NULL, root[0], &cont);
	ck_assert_msg(cont.last_loss < cont.first_loss, "loss %g -> %g", cont.first_loss,
		      cont.last_loss);
	trainutil_run_to(&c.env, 3, NULL, root[1], &stop);
	snprintf(ck, sizeof ck, "%s", stop.checkpoint);
	trainutil_run_to(&c.env, 6, ck, root[2], &res);
	ck_assert_int_eq(res.start_step, 3);
	ck_assert_uint_eq(res.n, cont.n);
	ck_assert(memcmp(res.params, cont.params, cont.n * sizeof(float)) == 0);
	ck_assert(memcmp(res.momentum, cont.momentum, cont.n * sizeof(float)) == 0);
	train_result_free(&cont);
	train_result_free(&stop);
	train_result_free(&res);
	cfg_free(&c.cfg);
	tmpdir_drop(dir);
}
END_TEST

/* bench's training math for the GPT (model_flop_per_token per supervised token, plus
 * model_sequence_flop per sequence) counts attention over the pairs that attend, within
 * each document: the GEMMs of a packed window compute exactly the weights' 6 N FLOP per
 * position plus 7 n x n products per head and layer of a document of n positions (the
 * full square, and P recomputed), so the math is below that and its attention term is
 * 12 C per attending pair and layer. */
START_TEST(the_math_counts_attention_over_the_pairs_that_attend)
{
	struct conf c;
	struct run r;
	struct window_result res;
	struct err e;
	char *dir = tmpdir_make("ddptok-gpt");
	err_clear(&e);
	conf_open(&c, dir, "train.plan=balanced");
	ck_assert_msg(run_open(&c.env, &r, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(sampler_next(&r.sampler, &r.w, &e), ERR_OK);
	ck_assert_msg(engine_window(r.eng, &r.w, NORM_GLOBAL_TOKEN, ENGINE_UPDATE, &res, &e) ==
		      ERR_OK, "%s", e.msg);
	const struct model_shape *m = &r.eng->shape;
	double C = GPT_C(m), L = GPT_L(m), per_token = model_flop_per_token(m);
	double gemm = 0.0, computed = 0.0, math = per_token * (double)res.N;
	for (int q = 0; q < r.w.world; q++) {
		gemm += res.rank_counts[q].gemm_flop;
		for (int k = 0; k < r.w.rank_micro[q]; k++)
			for (int i = 0; i < r.w.mb[q][k].n; i++) {
				double n = corpus_len(&r.corpus, r.w.mb[q][k].ids[i]);
				ck_assert_double_eq(model_sequence_flop(m, (int)n),
						    L * 12.0 * C * n * (n + 1.0) / 2.0);
				computed += per_token * n + L * 14.0 * C * n * n;
				math += model_sequence_flop(m, (int)n);
			}
	}
	ck_assert_double_eq_tol(gemm, computed, 1e-9 * computed);
	ck_assert_double_lt(math, gemm);
	run_close(&r);
	cfg_free(&c.cfg);
	tmpdir_drop(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gpt-run");
	TCase *tc = tcase_create("gpt-run");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, parity_catches_every_wrong_normalization);
	tcase_add_test(tc, exact_mode_gives_the_reference_bits);
	tcase_add_test(tc, resume_equals_continuous);
	tcase_add_test(tc, the_math_counts_attention_over_the_pairs_that_attend);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
