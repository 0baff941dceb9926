/*
 * test-exact: exact mode ([train] shards = K) gives the same bits whatever the world.
 *
 * For K = 8 and W = 1, 2, 4, 8 (CPU backend, host collective): the reduced gradient and
 * the loss sum of every window, and the parameters after 5 updates, are identical bit for
 * bit (memcmp), for both shard orders, both layouts and both reduce ops, windows drawn
 * independently or in epochs, on the window MLP and on a small GPT (AdamW with clipping); the single-device
 * reference is the W-device gradient exactly. The check can fail: one rank adding two of
 * its shards in each other's place changes the bits. The window is one list whatever W
 * (same ids in the same order), the length order sorts it, the balanced order evens the
 * shards' token counts. Invalid configurations are refused with clear messages; an
 * accumulation left out follows the world (shards / world).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check-run.h"
#include "engine.h"
#include "shard.h"
#include "testutil.h"

#define K 8
#define UPDATES 5

/* A model large enough for float addition order to show in its gradient. */
#define EXACT_SETS "data.train=256 data.vocab=32 model.embed=8 model.hidden=64 " \
		   "train.batch_size=3 data.prefix_max=2"

struct exact_run {
	struct settings s;
	struct corpus c;
	struct sampler sp;
	struct window w;
	struct engine *eng;
	size_t n;
	float *grads[UPDATES];  /* reduced gradient of each window */
	double loss[UPDATES];   /* global loss sum of each window */
	float *params;          /* after the updates */
};

static void exact_open(struct exact_run *x, int world, const char *more, int swap_rank)
{
	struct err e;
	struct engine_opts o;
	err_clear(&e);
	memset(x, 0, sizeof *x);
	testutil_settings(&x->s, "%s train.shards=%d devices.world=%d train.accumulation=%d %s",
			  EXACT_SETS, K, world, K / world, more);
	ck_assert_int_eq(corpus_build(&x->s, &x->c, &e), ERR_OK);
	ck_assert_msg(sampler_init(&x->sp, &x->c, &x->s, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(window_init(&x->w, world, K / world, x->s.batch_size, &e), ERR_OK);
	engine_opts_init(&o);
	o.fault.inject_swap_rank = swap_rank;
	ck_assert_msg(engine_create(&x->s, &x->c, &o, &x->eng, &e) == ERR_OK, "%s", e.msg);
	x->n = x->eng->shape.n_params;
	x->params = malloc(x->n * sizeof(float));
	model_init_params(&x->eng->shape, x->s.seed, x->params);
	ck_assert_int_eq(engine_set_state(x->eng, x->params, NULL, 0, &e), ERR_OK);
}

static void exact_close(struct exact_run *x)
{
	engine_destroy(x->eng);
	for (int i = 0; i < UPDATES; i++)
		free(x->grads[i]);
	free(x->params);
	window_free(&x->w);
	sampler_free(&x->sp);
	corpus_free(&x->c);
}

/* UPDATES windows with updates, keeping each reduced gradient and loss sum. */
static void exact_train(struct exact_run *x)
{
	struct err e;
	err_clear(&e);
	for (int i = 0; i < UPDATES; i++) {
		struct window_result res;
		ck_assert_int_eq(sampler_next(&x->sp, &x->w, &e), ERR_OK);
		ck_assert_msg(engine_window(x->eng, &x->w, NORM_GLOBAL_TOKEN,
					    ENGINE_UPDATE | ENGINE_CAPTURE_REDUCED |
						    ENGINE_CHECK_REPLICAS, &res, &e) == ERR_OK,
			      "%s", e.msg);
		ck_assert(!res.rejected);
		x->grads[i] = malloc(x->n * sizeof(float));
		memcpy(x->grads[i], x->eng->host_reduced, x->n * sizeof(float));
		x->loss[i] = res.loss_sum;
	}
	ck_assert_int_eq(engine_get_state(x->eng, x->params, NULL, &e), ERR_OK);
}

static void assert_same_bits(const struct exact_run *a, const struct exact_run *b,
			     const char *what)
{
	for (int i = 0; i < UPDATES; i++) {
		ck_assert_msg(memcmp(a->grads[i], b->grads[i], a->n * sizeof(float)) == 0,
			      "%s: W = %d: the reduced gradient of window %d differs from W = %d's",
			      what, b->s.world, i + 1, a->s.world);
		ck_assert_msg(memcmp(&a->loss[i], &b->loss[i], sizeof(double)) == 0,
			      "%s: W = %d: the loss sum of window %d differs", what, b->s.world, i + 1);
	}
	ck_assert_msg(memcmp(a->params, b->params, a->n * sizeof(float)) == 0,
		      "%s: W = %d: the parameters after %d updates differ", what, b->s.world,
		      UPDATES);
}

/* W = 2, 4 .. K train the same bits as W = 1 under the settings `more`. */
static void assert_every_world_same(const char *more)
{
	struct exact_run one;
	exact_open(&one, 1, more, -1);
	exact_train(&one);
	for (int world = 2; world <= K; world *= 2) {
		struct exact_run many;
		exact_open(&many, world, more, -1);
		exact_train(&many);
		assert_same_bits(&one, &many, more);
		exact_close(&many);
	}
	exact_close(&one);
}

START_TEST(every_world_gives_the_same_bits)
{
	static const char *const variants[] = {
		"train.shard_order=length model.layout=packed devices.reduce=avg",
		"train.shard_order=balanced model.layout=packed devices.reduce=sum",
		"train.shard_order=length model.layout=padded devices.reduce=sum",
		"train.shard_order=balanced model.layout=padded devices.reduce=avg",
		/* epochs of 40 sequences, 24 per window: windows span the ends of epochs */
		"train.sampling=epochs data.train=40 train.shard_order=balanced "
		"model.layout=packed devices.reduce=avg",
	};
	for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++)
		assert_every_world_same(variants[v]);
}
END_TEST

/* The GPT (document-isolated attention, LayerNorm, AdamW with clipping): the same bits
 * on W = 1, 2, 4 and 8, gradients, losses and parameters. */
#define EXACT_GPT "model.kind=gpt model.layers=1 model.heads=2 model.width=32 " \
		  "model.context=24 data.max_len=24 train.optimizer=adamw train.lr=0.01 " \
		  "train.clip=0.5 "

START_TEST(every_world_gives_the_same_bits_on_the_gpt)
{
	static const char *const variants[] = {
		EXACT_GPT "train.shard_order=length model.layout=packed devices.reduce=avg",
		EXACT_GPT "train.shard_order=balanced model.layout=padded devices.reduce=sum",
	};
	struct settings s;
	testutil_settings(&s, "%s", EXACT_GPT);
	ck_assert_str_eq(s.model_kind, "gpt");
	for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++)
		assert_every_world_same(variants[v]);
}
END_TEST

START_TEST(the_reference_is_the_many_device_gradient_exactly)
{
	struct exact_run x;
	struct err e;
	struct window_result res;
	double loss;
	err_clear(&e);
	exact_open(&x, 4, "devices.reduce=avg", -1);
	float *ref = malloc(x.n * sizeof(float));
	ck_assert_int_eq(sampler_next(&x.sp, &x.w, &e), ERR_OK);
	ck_assert_msg(engine_reference(x.eng, &x.w, ref, &loss, &e) == ERR_OK, "%s", e.msg);
	ck_assert_msg(engine_window(x.eng, &x.w, NORM_GLOBAL_TOKEN, ENGINE_CAPTURE_REDUCED, &res,
				    &e) == ERR_OK, "%s", e.msg);
	ck_assert(memcmp(ref, x.eng->host_reduced, x.n * sizeof(float)) == 0);
	ck_assert(memcmp(&loss, &res.loss, sizeof loss) == 0);
	free(ref);
	exact_close(&x);
}
END_TEST

/* The check can fail, on either model: one rank adding two of its shards in each
 * other's place changes the bits. */
START_TEST(a_swapped_shard_changes_the_bits)
{
	static const char *const models[] = {"", EXACT_GPT};
	for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
		struct exact_run plain, swapped;
		exact_open(&plain, 2, models[m], -1);
		exact_train(&plain);
		exact_open(&swapped, 2, models[m], 1);
		exact_train(&swapped);
		ck_assert_msg(memcmp(plain.grads[0], swapped.grads[0],
				     plain.n * sizeof(float)) != 0,
			      "%s: adding two shards in each other's place left every bit as it was",
			      models[m]);
		exact_close(&swapped);
		exact_close(&plain);
	}
}
END_TEST

START_TEST(the_window_is_one_list_whatever_the_world)
{
	const char *orders[] = {"length", "balanced"};
	for (int o = 0; o < 2; o++) {
		int first[K * 3 * 2];
		for (int world = 1; world <= K; world *= 2) {
			struct exact_run x;
			struct err e;
			char more[64];
			err_clear(&e);
			snprintf(more, sizeof more, "train.shard_order=%s", orders[o]);
			exact_open(&x, world, more, -1);
			for (int win = 0; win < 2; win++) {
				ck_assert_int_eq(sampler_next(&x.sp, &x.w, &e), ERR_OK);
				ck_assert_int_eq(x.w.n_ids, K * x.s.batch_size);
				if (world == 1)
					memcpy(first + win * K * 3, x.w.storage, sizeof(int) * K * 3);
				else
					ck_assert(memcmp(first + win * K * 3, x.w.storage,
							 sizeof(int) * K * 3) == 0);
				int64_t lo = INT64_MAX, hi = 0, longest = 0;
				for (int s = 0; s < K; s++) {
					const struct microbatch *mb = shard_of(&x.w, s);
					ck_assert_int_eq(mb->n, x.s.batch_size);
					lo = mb->tokens < lo ? mb->tokens : lo;
					hi = mb->tokens > hi ? mb->tokens : hi;
				}
				for (int i = 0; i < x.w.n_ids; i++) {
					int sup = corpus_supervised(&x.c, x.w.storage[i]);
					longest = sup > longest ? sup : longest;
					if (o == 0 && i > 0)
						ck_assert_int_le(corpus_supervised(&x.c, x.w.storage[i - 1]),
								 sup);
				}
				if (o == 1) /* greedy with equal room: within one sequence */
					ck_assert_int_le(hi - lo, longest);
				else
					ck_assert_int_lt(shard_of(&x.w, 0)->tokens,
							 shard_of(&x.w, K - 1)->tokens);
			}
			exact_close(&x);
		}
	}
}
END_TEST

/* settings_from_cfg on the tiny configuration with `sets`: must be refused with a message
 * holding `want`. */
static void expect_refused(const char *sets, const char *want)
{
	struct cfg c;
	struct settings s;
	struct err e;
	char copy[256];
	err_clear(&e);
	snprintf(copy, sizeof copy, "%s", sets);
	ck_assert_int_eq(cfg_init(&c, settings_keys, &e), ERR_OK);
	ck_assert_int_eq(cfg_load_text(&c, testutil_tiny_ini, "tiny.ini", &e), ERR_OK);
	for (char *save = NULL, *a = strtok_r(copy, " ", &save); a; a = strtok_r(NULL, " ", &save))
		ck_assert_msg(cfg_set(&c, a, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(settings_from_cfg(&c, &s, &e), ERR_CONFIG);
	ck_assert_msg(strstr(e.msg, want), "%s: message \"%s\" lacks \"%s\"", sets, e.msg, want);
	cfg_free(&c);
}

START_TEST(invalid_configurations_are_refused)
{
	/* the origin is said once, beside the value */
	expect_refused("train.shards=6",
		       "tiny.ini: [train] shards = 6 (from --set): must be a power of two");
	expect_refused("train.shards=4 train.batching=tokens",
		       "tiny.ini: [train] batching = tokens (from --set): exact mode");
	expect_refused("train.shards=8 devices.world=3",
		       "valid devices.world: 1, 2, 4, 8");
	expect_refused("train.shards=2 devices.world=4", "valid devices.world: 1, 2");
	expect_refused("train.shards=8 devices.world=2 train.accumulation=2",
		       "tiny.ini: [train] accumulation = 2 (from --set) disagrees");
	expect_refused("train.shards=8 devices.world=2 train.accumulation=2",
		       "gives each rank 4 shards as its microbatches");
	/* an accumulation that agrees is accepted */
	struct settings s;
	testutil_settings(&s, "train.shards=8 devices.world=2 train.accumulation=4");
	ck_assert_int_eq(s.accumulation, 4);
	/* one not given follows the world: shards / world */
	char text[sizeof testutil_tiny_ini];
	const char *line = strstr(testutil_tiny_ini, "accumulation = 2\n");
	ck_assert_ptr_nonnull(line);
	snprintf(text, sizeof text, "%.*s%s", (int)(line - testutil_tiny_ini), testutil_tiny_ini,
		 line + strlen("accumulation = 2\n"));
	for (int world = 1; world <= 8; world *= 2) {
		struct cfg c;
		struct err e;
		char set[32];
		err_clear(&e);
		ck_assert_int_eq(cfg_init(&c, settings_keys, &e), ERR_OK);
		ck_assert_msg(cfg_load_text(&c, text, "tiny.ini", &e) == ERR_OK, "%s", e.msg);
		ck_assert_int_eq(cfg_set(&c, "train.shards=8", &e), ERR_OK);
		snprintf(set, sizeof set, "devices.world=%d", world);
		ck_assert_int_eq(cfg_set(&c, set, &e), ERR_OK);
		ck_assert_msg(settings_from_cfg(&c, &s, &e) == ERR_OK, "%s", e.msg);
		ck_assert_int_eq(s.accumulation, 8 / world);
		cfg_free(&c);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("exact");
	TCase *tc = tcase_create("exact");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, every_world_gives_the_same_bits);
	tcase_add_test(tc, every_world_gives_the_same_bits_on_the_gpt);
	tcase_add_test(tc, the_reference_is_the_many_device_gradient_exactly);
	tcase_add_test(tc, a_swapped_shard_changes_the_bits);
	tcase_add_test(tc, the_window_is_one_list_whatever_the_world);
	tcase_add_test(tc, invalid_configurations_are_refused);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
