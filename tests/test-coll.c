/*
 * test-coll: the host collective's tree mode (exact mode's allreduce).
 *
 * Eight leaves with magnitudes that make float addition order-dependent are spread over
 * W = 1, 2, 4, 8 ranks as aligned subtrees (each rank adds its own leaves in the tree's
 * order, written out by hand here); the tree allreduce must then give every rank the bits
 * of the one pairwise tree over the eight leaves, the same for every W, in float32 and
 * float64. The expected values are the tree written out explicitly, not the
 * implementation's recursion; the rank-order sum is checked to differ from them, so a
 * collective that added in rank order would fail. A world that is not a power of two is
 * refused.
 *
 * Reduce-scatter and all-gather, ZeRO's halves of the allreduce: each rank's slice
 * (coll_shard_range) of a reduce-scatter holds the allreduce's bits for those elements
 * (rank order, sum and avg, W not a power of two included; and the tree), and an
 * all-gather hands every rank every slice, uneven slices and empty ones included.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check-run.h"
#include "coll.h"
#include "pool.h"

#define LEAVES 8
#define N 4099

struct tree_arg {
	struct coll *c;
	float *f32[MAX_WORLD];
	double *f64[MAX_WORLD];
};

static int tree_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct tree_arg *a = arg;
	ERR_TRY(a->c->ops->allreduce_tree(a->c, rank, NULL, a->f32[rank], N, COLL_F32, 1, e));
	return a->c->ops->allreduce_tree(a->c, rank, NULL, a->f64[rank], N, COLL_F64, 1, e);
}

static float leaf32(int leaf, size_t i)
{
	static const float scale[LEAVES] = {1e-3f, 1e7f, 3.0f, 1e-7f, 7e5f, 1.0f, 1e3f, 11.0f};
	return scale[(leaf + i) % LEAVES] * (float)((i * 31 + (size_t)leaf * 17) % 97 + 1) *
	       ((i + (size_t)leaf) % 3 ? 1.0f : -1.0f);
}

static double leaf64(int leaf, size_t i)
{
	return (double)leaf32(leaf, i) / 3.0;
}

/* The subtree over leaves [lo, lo + n), written out for the sizes that occur. */
static float subtree32(int lo, int n, size_t i)
{
	float x[LEAVES];
	for (int k = 0; k < n; k++)
		x[k] = leaf32(lo + k, i);
	switch (n) {
	case 1: return x[0];
	case 2: return x[0] + x[1];
	case 4: return (x[0] + x[1]) + (x[2] + x[3]);
	default: return ((x[0] + x[1]) + (x[2] + x[3])) + ((x[4] + x[5]) + (x[6] + x[7]));
	}
}

static double subtree64(int lo, int n, size_t i)
{
	double x[LEAVES];
	for (int k = 0; k < n; k++)
		x[k] = leaf64(lo + k, i);
	switch (n) {
	case 1: return x[0];
	case 2: return x[0] + x[1];
	case 4: return (x[0] + x[1]) + (x[2] + x[3]);
	default: return ((x[0] + x[1]) + (x[2] + x[3])) + ((x[4] + x[5]) + (x[6] + x[7]));
	}
}

START_TEST(tree_allreduce_gives_the_same_bits_for_every_world)
{
	float *want32 = malloc(N * sizeof(float));
	double *want64 = malloc(N * sizeof(double));
	size_t order_differs = 0;
	ck_assert(want32 && want64);
	for (size_t i = 0; i < N; i++) {
		want32[i] = subtree32(0, LEAVES, i);
		want64[i] = subtree64(0, LEAVES, i);
		float seq = leaf32(0, i);
		for (int k = 1; k < LEAVES; k++)
			seq += leaf32(k, i);
		order_differs += memcmp(&seq, &want32[i], sizeof seq) != 0;
	}
	ck_assert_msg(order_differs > N / 10, "the leaves do not tell orders apart (%zu)",
		      order_differs);
	for (int world = 1; world <= LEAVES; world *= 2) {
		struct pool *p;
		struct err e;
		struct tree_arg a;
		int per = LEAVES / world;
		err_clear(&e);
		memset(&a, 0, sizeof a);
		ck_assert_int_eq(pool_create(world, 30.0, &p, &e), ERR_OK);
		ck_assert_int_eq(coll_host_create(world, pool_barrier(p), N, &a.c, &e), ERR_OK);
		for (int r = 0; r < world; r++) {
			a.f32[r] = malloc(N * sizeof(float));
			a.f64[r] = malloc(N * sizeof(double));
			ck_assert(a.f32[r] && a.f64[r]);
			for (size_t i = 0; i < N; i++) {
				a.f32[r][i] = subtree32(r * per, per, i);
				a.f64[r][i] = subtree64(r * per, per, i);
			}
		}
		ck_assert_int_eq(pool_run(p, tree_fn, &a, &e), ERR_OK);
		for (int r = 0; r < world; r++) {
			ck_assert_msg(memcmp(a.f32[r], want32, N * sizeof(float)) == 0,
				      "W = %d rank %d: float32 bits differ from the tree", world, r);
			ck_assert_msg(memcmp(a.f64[r], want64, N * sizeof(double)) == 0,
				      "W = %d rank %d: float64 bits differ from the tree", world, r);
			free(a.f32[r]);
			free(a.f64[r]);
		}
		coll_destroy(a.c);
		pool_destroy(p);
	}
	free(want32);
	free(want64);
}
END_TEST

START_TEST(tree_allreduce_refuses_a_world_that_is_not_a_power_of_two)
{
	struct pool *p;
	struct err e;
	struct tree_arg a;
	err_clear(&e);
	memset(&a, 0, sizeof a);
	ck_assert_int_eq(coll_tree_levels(1), 0);
	ck_assert_int_eq(coll_tree_levels(8), 3);
	ck_assert_int_eq(coll_tree_levels(6), -1);
	ck_assert_int_eq(coll_tree_levels(0), -1);
	ck_assert_int_eq(pool_create(3, 30.0, &p, &e), ERR_OK);
	ck_assert_int_eq(coll_host_create(3, pool_barrier(p), N, &a.c, &e), ERR_OK);
	for (int r = 0; r < 3; r++) {
		a.f32[r] = calloc(N, sizeof(float));
		a.f64[r] = calloc(N, sizeof(double));
	}
	ck_assert_int_eq(pool_run(p, tree_fn, &a, &e), ERR_CONFIG);
	ck_assert_msg(strstr(e.msg, "power-of-two world, not 3"), "message: %s", e.msg);
	for (int r = 0; r < 3; r++) {
		free(a.f32[r]);
		free(a.f64[r]);
	}
	coll_destroy(a.c);
	pool_destroy(p);
}
END_TEST

/* Spanning processes, the host collective may add up to COLL_MAX_RANKS ranks, more than
 * the tree's blocks hold rows for: a power-of-two world of 16 (one rank in each of 16
 * processes) is refused before any exchange. */
START_TEST(tree_allreduce_refuses_more_ranks_than_it_adds)
{
	struct pool *p;
	struct err e;
	struct tree_arg a;
	err_clear(&e);
	memset(&a, 0, sizeof a);
	ck_assert_int_eq(pool_create(1, 30.0, &p, &e), ERR_OK);
	ck_assert_int_eq(coll_host_create(1, pool_barrier(p), N, &a.c, &e), ERR_OK);
	ck_assert_int_eq(coll_host_span_processes(a.c, 16, 0, 30.0, &e), ERR_OK);
	a.f32[0] = calloc(N, sizeof(float));
	a.f64[0] = calloc(N, sizeof(double));
	ck_assert_int_eq(pool_run(p, tree_fn, &a, &e), ERR_CONFIG);
	ck_assert_msg(strstr(e.msg, "at most 8 ranks, not 16"), "message: %s", e.msg);
	free(a.f32[0]);
	free(a.f64[0]);
	coll_destroy(a.c);
	pool_destroy(p);
}
END_TEST

/* ---- reduce-scatter and all-gather ---- */

struct zero_arg {
	struct coll *c;
	size_t count;
	enum coll_op op;
	int tree;
	float *whole[MAX_WORLD], *slice[MAX_WORLD]; /* the allreduce's, the reduce-scatter's */
};

static int zero_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct zero_arg *a = arg;
	if (a->tree)
		ERR_TRY(a->c->ops->allreduce_tree(a->c, rank, NULL, a->whole[rank], a->count,
						  COLL_F32, 1, e));
	else
		ERR_TRY(a->c->ops->allreduce(a->c, rank, NULL, a->whole[rank], a->count, COLL_F32,
					     a->op, 1, e));
	return a->c->ops->reduce_scatter(a->c, rank, NULL, a->slice[rank], a->count, a->op,
					 a->tree, e);
}

/* W ranks of order-sensitive values: every rank's reduce-scatter slice has the bits of
 * its allreduce there. */
static void check_reduce_scatter(int world, size_t count, enum coll_op op, int tree)
{
	struct pool *p;
	struct err e;
	struct zero_arg a = {.count = count, .op = op, .tree = tree};
	err_clear(&e);
	ck_assert_int_eq(pool_create(world, 30.0, &p, &e), ERR_OK);
	ck_assert_int_eq(coll_host_create(world, pool_barrier(p), N, &a.c, &e), ERR_OK);
	for (int r = 0; r < world; r++) {
		a.whole[r] = malloc(count * sizeof(float));
		a.slice[r] = malloc(count * sizeof(float));
		for (size_t i = 0; i < count; i++)
			a.whole[r][i] = a.slice[r][i] = leaf32(r, i);
	}
	ck_assert_msg(pool_run(p, zero_fn, &a, &e) == ERR_OK, "%s", e.msg);
	size_t covered = 0;
	for (int r = 0; r < world; r++) {
		size_t lo, hi;
		coll_shard_range(count, world, r, &lo, &hi);
		covered += hi - lo;
		ck_assert_msg(memcmp(a.slice[r] + lo, a.whole[r] + lo, (hi - lo) * sizeof(float)) == 0,
			      "W = %d %s%s rank %d: the slice [%zu, %zu) differs from the allreduce",
			      world, coll_op_name(op), tree ? " tree" : "", r, lo, hi);
		free(a.whole[r]);
		free(a.slice[r]);
	}
	ck_assert_uint_eq(covered, count);
	coll_destroy(a.c);
	pool_destroy(p);
}

START_TEST(reduce_scatter_gives_each_rank_its_slice_of_the_allreduce)
{
	for (int world = 2; world <= 4; world++)
		for (int op = COLL_SUM; op <= COLL_AVG; op++)
			check_reduce_scatter(world, N, (enum coll_op)op, 0);
	check_reduce_scatter(2, N, COLL_SUM, 1);
	check_reduce_scatter(4, N, COLL_SUM, 1);
	check_reduce_scatter(3, 2, COLL_SUM, 0); /* rank 2's slice is empty */
}
END_TEST

/* The avg of three ranks rounds differently from their rank-order sum scaled: a
 * reduce-scatter that summed without dividing, or divided another way, is caught, as
 * is one that left a slice unreduced. */
START_TEST(reduce_scatter_slices_are_reduced)
{
	struct pool *p;
	struct err e;
	struct zero_arg a = {.count = N, .op = COLL_AVG};
	err_clear(&e);
	ck_assert_int_eq(pool_create(3, 30.0, &p, &e), ERR_OK);
	ck_assert_int_eq(coll_host_create(3, pool_barrier(p), N, &a.c, &e), ERR_OK);
	for (int r = 0; r < 3; r++) {
		a.whole[r] = malloc(N * sizeof(float));
		a.slice[r] = malloc(N * sizeof(float));
		for (size_t i = 0; i < N; i++)
			a.whole[r][i] = a.slice[r][i] = leaf32(r, i);
	}
	ck_assert_int_eq(pool_run(p, zero_fn, &a, &e), ERR_OK);
	for (int r = 0; r < 3; r++) {
		size_t lo, hi, same = 0;
		coll_shard_range(N, 3, r, &lo, &hi);
		for (size_t i = lo; i < hi; i++) {
			float want = ((leaf32(0, i) + leaf32(1, i)) + leaf32(2, i)) / 3.0f;
			ck_assert_msg(memcmp(&a.slice[r][i], &want, sizeof want) == 0,
				      "rank %d element %zu: %g, not the mean %g", r, i,
				      (double)a.slice[r][i], (double)want);
			same += a.slice[r][i] == leaf32(r, i);
		}
		ck_assert_uint_lt(same, (hi - lo) / 10);
		free(a.whole[r]);
		free(a.slice[r]);
	}
	coll_destroy(a.c);
	pool_destroy(p);
}
END_TEST

static int gather_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct zero_arg *a = arg;
	return a->c->ops->all_gather(a->c, rank, NULL, a->slice[rank], a->count, e);
}

/* Each rank holds its slice of leaf32(0, .) and junk elsewhere; after the all-gather
 * every rank holds all of it. */
static void check_all_gather(int world, size_t count)
{
	struct pool *p;
	struct err e;
	struct zero_arg a = {.count = count};
	err_clear(&e);
	ck_assert_int_eq(pool_create(world, 30.0, &p, &e), ERR_OK);
	ck_assert_int_eq(coll_host_create(world, pool_barrier(p), N, &a.c, &e), ERR_OK);
	float *want = malloc(count * sizeof(float));
	for (size_t i = 0; i < count; i++)
		want[i] = leaf32(0, i);
	for (int r = 0; r < world; r++) {
		size_t lo, hi;
		coll_shard_range(count, world, r, &lo, &hi);
		a.slice[r] = malloc(count * sizeof(float));
		for (size_t i = 0; i < count; i++)
			a.slice[r][i] = i >= lo && i < hi ? want[i] : -1.0f - (float)r;
	}
	ck_assert_msg(pool_run(p, gather_fn, &a, &e) == ERR_OK, "%s", e.msg);
	for (int r = 0; r < world; r++) {
		ck_assert_msg(memcmp(a.slice[r], want, count * sizeof(float)) == 0,
			      "W = %d, %zu elements: rank %d did not receive every slice", world,
			      count, r);
		free(a.slice[r]);
	}
	free(want);
	coll_destroy(a.c);
	pool_destroy(p);
}

START_TEST(all_gather_hands_every_rank_every_slice)
{
	for (int world = 2; world <= 4; world++)
		check_all_gather(world, N);
	check_all_gather(3, 2);
	check_all_gather(4, 5); /* slices of 2, 2, 1 and none */
}
END_TEST

START_TEST(shard_ranges_tile_the_vector)
{
	size_t lo, hi;
	coll_shard_range(10, 4, 0, &lo, &hi);
	ck_assert(lo == 0 && hi == 3);
	coll_shard_range(10, 4, 3, &lo, &hi);
	ck_assert(lo == 9 && hi == 10);
	coll_shard_range(5, 4, 3, &lo, &hi);
	ck_assert(lo == 5 && hi == 5);
	coll_shard_range(7, 1, 0, &lo, &hi);
	ck_assert(lo == 0 && hi == 7);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("coll");
	TCase *tc = tcase_create("tree");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, tree_allreduce_gives_the_same_bits_for_every_world);
	tcase_add_test(tc, tree_allreduce_refuses_a_world_that_is_not_a_power_of_two);
	tcase_add_test(tc, tree_allreduce_refuses_more_ranks_than_it_adds);
	suite_add_tcase(s, tc);
	TCase *zero = tcase_create("zero");
	tcase_set_timeout(zero, 120);
	tcase_add_test(zero, reduce_scatter_gives_each_rank_its_slice_of_the_allreduce);
	tcase_add_test(zero, reduce_scatter_slices_are_reduced);
	tcase_add_test(zero, all_gather_hands_every_rank_every_slice);
	tcase_add_test(zero, shard_ranges_tile_the_vector);
	suite_add_tcase(s, zero);
	return check_run(s, 0);
}
