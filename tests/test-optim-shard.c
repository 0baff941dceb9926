/*
 * test-optim-shard: train.shard_optimizer (ZeRO stage 1) changes where the optimizer's
 * state lives, never the bits.
 *
 * The same windows run on an engine with the state sharded and on one without it (CPU
 * backend, host collective): the parameters and the optimizer's state after every update
 * are identical (memcmp), for SGD and AdamW with weight decay and clipping, in windows
 * that reduce-scatter the gradient (an update alone) and in windows that need the whole
 * gradient for its norm (training's), at W = 2 and W = 3 (uneven slices), in the default
 * mode and in exact mode at W = 2 and 4, where the sharded W = 4 run is also the unsharded
 * single device's bit for bit. Each replica holds only its slice of the state, and the
 * memory per rank says so. The comparison can fail: the sharded run with one rank adding
 * two of its exact-mode shards in each other's place (the order of one addition) is
 * caught.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check-run.h"
#include "engine.h"
#include "testutil.h"

#define UPDATES 4
/* a model whose parameters are not a multiple of 2 or 3, with matrices and biases */
#define SHARD_SETS "data.vocab=32 model.embed=8 model.hidden=21 train.weight_decay=0.1"
#define ADAMW_SETS SHARD_SETS " train.optimizer=adamw train.lr=0.01 train.clip=0.05"
#define SGD_SETS SHARD_SETS " train.clip=0.05"

/* One run's end state: the parameters and the optimizer's state (the checkpoint's
 * layout), how many updates were clipped and the replicas' parameter fingerprints
 * agreed. */
struct shard_run {
	size_t n, ns;
	float *params, *state;
	int clipped;
	struct engine_memory mem;
	size_t slice[MAX_WORLD]; /* each replica's slice of the state */
};

static void run_free(struct shard_run *r)
{
	free(r->params);
	free(r->state);
}

/* UPDATES windows under `sets` with `flags` (ENGINE_UPDATE and more), on a fresh engine
 * started from the seeded parameters; exact mode's rank `swap_rank` adds two shards in
 * each other's place (-1: none). */
static void shard_train_swap(struct shard_run *out, const char *sets, int shard, int flags,
			     int swap_rank)
{
	struct engine_opts o;
	struct settings s;
	struct corpus c;
	struct sampler sp;
	struct window w;
	struct engine *eng;
	struct err e;
	err_clear(&e);
	memset(out, 0, sizeof *out);
	testutil_settings(&s, "%s train.shard_optimizer=%s", sets, shard ? "true" : "false");
	ck_assert_int_eq(corpus_build(&s, &c, &e), ERR_OK);
	ck_assert_msg(sampler_init(&sp, &c, &s, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(window_init(&w, s.world, s.accumulation, s.batch_size, &e), ERR_OK);
	engine_opts_init(&o);
	o.fault.inject_swap_rank = swap_rank;
	ck_assert_msg(engine_create(&s, &c, &o, &eng, &e) == ERR_OK, "%s", e.msg);
	out->n = eng->shape.n_params;
	out->ns = engine_state_floats(eng);
	out->params = malloc(out->n * sizeof(float));
	out->state = malloc(out->ns * sizeof(float));
	model_init_params(&eng->shape, s.seed, out->params);
	ck_assert_int_eq(engine_set_state(eng, out->params, NULL, 0, &e), ERR_OK);
	for (int t = 0; t < UPDATES; t++) {
		struct window_result res;
		ck_assert_int_eq(sampler_next(&sp, &w, &e), ERR_OK);
		ck_assert_msg(engine_window(eng, &w, NORM_GLOBAL_TOKEN,
					    flags | ENGINE_CHECK_REPLICAS, &res, &e) == ERR_OK,
			      "%s: %s", sets, e.msg);
		out->clipped += res.clip_factor < 1.0;
	}
	ck_assert_int_eq(engine_get_state(eng, out->params, out->state, &e), ERR_OK);
	for (int r = 0; r < s.world; r++)
		out->slice[r] = eng->rep[r].state_hi - eng->rep[r].state_lo;
	engine_memory_per_rank(&s, &out->mem);
	engine_destroy(eng);
	window_free(&w);
	sampler_free(&sp);
	corpus_free(&c);
}

static void shard_train(struct shard_run *out, const char *sets, int shard, int flags)
{
	shard_train_swap(out, sets, shard, flags, -1);
}

/* The sharded run equals the unsharded one in every bit; its replicas hold slices. */
static void check_same_bits(const char *sets, int flags)
{
	struct shard_run whole, sharded;
	shard_train(&whole, sets, 0, flags);
	shard_train(&sharded, sets, 1, flags);
	ck_assert_msg(memcmp(whole.params, sharded.params, whole.n * sizeof(float)) == 0,
		      "%s (flags %d): the sharded run's parameters differ", sets, flags);
	ck_assert_msg(memcmp(whole.state, sharded.state, whole.ns * sizeof(float)) == 0,
		      "%s (flags %d): the sharded run's optimizer state differs", sets, flags);
	ck_assert_int_eq(whole.clipped, sharded.clipped);
	/* the state did move: zero moments would compare equal whatever the update did */
	size_t moved = 0;
	for (size_t i = 0; i < whole.ns; i++)
		moved += whole.state[i] != 0.0f;
	ck_assert_uint_gt(moved, whole.ns / 2);
	int world = 0;
	size_t held = 0;
	while (world < MAX_WORLD && sharded.slice[world])
		held += sharded.slice[world++];
	ck_assert_int_ge(world, 2);
	ck_assert_uint_eq(held, whole.n);
	ck_assert_uint_eq(whole.slice[0], whole.n);
	ck_assert_uint_eq(sharded.mem.optim_bytes * whole.n,
			  sharded.slice[0] * whole.mem.optim_full_bytes);
	ck_assert_uint_eq(whole.mem.optim_bytes, whole.mem.optim_full_bytes);
	run_free(&whole);
	run_free(&sharded);
}

START_TEST(sgd_sharded_is_sgd_in_every_bit)
{
	check_same_bits(SGD_SETS, ENGINE_UPDATE);
	check_same_bits(SGD_SETS, ENGINE_UPDATE | ENGINE_GRAD_NORM);
	check_same_bits(SGD_SETS " devices.world=3 devices.reduce=sum", ENGINE_UPDATE);
}
END_TEST

START_TEST(adamw_sharded_is_adamw_in_every_bit)
{
	struct shard_run probe;
	shard_train(&probe, ADAMW_SETS, 1, ENGINE_UPDATE | ENGINE_GRAD_NORM);
	ck_assert_msg(probe.clipped >= 2, "clipping did not act (%d): the test would miss it",
		      probe.clipped);
	run_free(&probe);
	check_same_bits(ADAMW_SETS, ENGINE_UPDATE);
	check_same_bits(ADAMW_SETS, ENGINE_UPDATE | ENGINE_GRAD_NORM);
	check_same_bits(ADAMW_SETS " devices.world=3", ENGINE_UPDATE | ENGINE_GRAD_NORM);
	check_same_bits(ADAMW_SETS " devices.world=3", ENGINE_UPDATE);
}
END_TEST

START_TEST(exact_mode_sharded_is_the_one_tree)
{
	static const char *const worlds[] = {
		ADAMW_SETS " train.shards=4 devices.world=2 train.accumulation=2",
		ADAMW_SETS " train.shards=4 devices.world=4 train.accumulation=1",
		SGD_SETS " train.shards=4 devices.world=4 train.accumulation=1 devices.reduce=sum",
	};
	for (int i = 0; i < 3; i++) {
		check_same_bits(worlds[i], ENGINE_UPDATE);
		check_same_bits(worlds[i], ENGINE_UPDATE | ENGINE_GRAD_NORM);
	}
	/* elastic: W = 4 sharded is the single device unsharded */
	struct shard_run one, four;
	shard_train(&one, ADAMW_SETS " train.shards=4 devices.world=1 train.accumulation=4", 0,
		    ENGINE_UPDATE | ENGINE_GRAD_NORM);
	shard_train(&four, worlds[1], 1, ENGINE_UPDATE | ENGINE_GRAD_NORM);
	ck_assert(memcmp(one.params, four.params, one.n * sizeof(float)) == 0);
	ck_assert(memcmp(one.state, four.state, one.ns * sizeof(float)) == 0);
	run_free(&one);
	run_free(&four);
}
END_TEST

/* A sharded run whose rank 1 adds two of its shards in each other's place differs from
 * the unsharded run: the comparison sees the order of one addition. */
START_TEST(an_addition_out_of_order_is_caught)
{
	static const char sets[] = ADAMW_SETS " train.shards=8 devices.world=2 "
				   "train.accumulation=4";
	struct shard_run whole, swapped;
	shard_train(&whole, sets, 0, ENGINE_UPDATE);
	shard_train_swap(&swapped, sets, 1, ENGINE_UPDATE, 1);
	ck_assert_msg(memcmp(whole.params, swapped.params, whole.n * sizeof(float)) != 0,
		      "a shard added out of order went unnoticed");
	run_free(&whole);
	run_free(&swapped);
}
END_TEST

/* The full state a caller sets is the one it gets back, each replica keeping its slice. */
START_TEST(state_round_trips_through_the_slices)
{
	struct settings s;
	struct corpus c;
	struct engine *eng;
	struct err e;
	err_clear(&e);
	testutil_settings(&s, "%s devices.world=3 train.shard_optimizer=true", ADAMW_SETS);
	ck_assert_int_eq(corpus_build(&s, &c, &e), ERR_OK);
	ck_assert_msg(engine_create(&s, &c, NULL, &eng, &e) == ERR_OK, "%s", e.msg);
	size_t n = eng->shape.n_params, ns = engine_state_floats(eng);
	float *p = malloc(n * sizeof(float)), *st = malloc(ns * sizeof(float));
	float *back = malloc(ns * sizeof(float));
	for (size_t i = 0; i < n; i++)
		p[i] = (float)i;
	for (size_t i = 0; i < ns; i++)
		st[i] = 0.5f + (float)i;
	ck_assert_int_eq(engine_set_state(eng, p, st, 0, &e), ERR_OK);
	memset(back, 0, ns * sizeof(float));
	ck_assert_int_eq(engine_get_state(eng, NULL, back, &e), ERR_OK);
	ck_assert(memcmp(st, back, ns * sizeof(float)) == 0);
	ck_assert_uint_lt(eng->rep[1].state_hi - eng->rep[1].state_lo, n);
	free(p);
	free(st);
	free(back);
	engine_destroy(eng);
	corpus_free(&c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("optim-shard");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, sgd_sharded_is_sgd_in_every_bit);
	tcase_add_test(tc, adamw_sharded_is_adamw_in_every_bit);
	tcase_add_test(tc, exact_mode_sharded_is_the_one_tree);
	tcase_add_test(tc, state_round_trips_through_the_slices);
	tcase_add_test(tc, an_addition_out_of_order_is_caught);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
