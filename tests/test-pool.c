/*
 * test-pool: the device pool, the window barrier and the host collective.
 *
 * A rank failing at a chosen step releases every peer (no deadlock), the pool reports the
 * root cause with its rank, a rank that never arrives is a timeout error rather than a
 * hang, and the host allreduce gives every rank identical bits equal to the rank-ordered
 * sum, for float32, float64 and int64, sum and avg. A rank stuck in a call that nothing
 * interrupts does not hold pool_run: the watchdog reports it within the timeout after
 * the abort, and the pool refuses to run again.
 */
#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check-run.h"
#include "clock.h"
#include "coll.h"
#include "pool.h"

struct fail_arg {
	struct pool *pool;
	int fail_rank, fail_step, steps;
	int reached[POOL_MAX_WORLD];
};

static int stepping_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct fail_arg *a = arg;
	for (int s = 0; s < a->steps; s++) {
		if (rank == a->fail_rank && s == a->fail_step)
			return ERR(e, ERR_DEVICE, "rank %d failed on purpose at step %d", rank, s);
		int rc = barrier_wait(pool_barrier(a->pool), rank, e);
		if (rc != ERR_OK)
			return rc;
		a->reached[rank] = s + 1;
	}
	return ERR_OK;
}

START_TEST(failure_at_a_chosen_step_releases_every_rank)
{
	for (int world = 2; world <= 6; world++) {
		struct pool *p;
		struct err e;
		err_clear(&e);
		ck_assert_int_eq(pool_create(world, 30.0, &p, &e), ERR_OK);
		struct fail_arg a = {p, world - 1, 7, 20, {0}};
		double t0 = clock_now_s();
		int rc = pool_run(p, stepping_fn, &a, &e);
		ck_assert_int_eq(rc, ERR_DEVICE);
		ck_assert_double_lt(clock_now_s() - t0, 5.0); /* released, not timed out */
		char want[64];
		/* the failing rank's own message already names it: not prefixed a second time */
		snprintf(want, sizeof want, "rank %d failed on purpose at step 7", world - 1);
		ck_assert_msg(strncmp(e.msg, want, strlen(want)) == 0, "message: %s", e.msg);
		for (int r = 0; r < world - 1; r++)
			ck_assert_int_eq(a.reached[r], 7);
		/* the pool is usable again */
		struct fail_arg ok = {p, -1, 0, 5, {0}};
		err_clear(&e);
		ck_assert_int_eq(pool_run(p, stepping_fn, &ok, &e), ERR_OK);
		for (int r = 0; r < world; r++)
			ck_assert_int_eq(ok.reached[r], 5);
		pool_destroy(p);
	}
}
END_TEST

static int absent_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct pool *p = arg;
	if (rank == 0)
		return ERR_OK; /* never reaches the barrier */
	return barrier_wait(pool_barrier(p), rank, e);
}

START_TEST(a_missing_rank_is_a_timeout_not_a_hang)
{
	struct pool *p;
	struct err e;
	err_clear(&e);
	ck_assert_int_eq(pool_create(3, 0.3, &p, &e), ERR_OK);
	double t0 = clock_now_s();
	int rc = pool_run(p, absent_fn, p, &e);
	double dt = clock_now_s() - t0;
	ck_assert_int_eq(rc, ERR_DEVICE);
	ck_assert_msg(strstr(e.msg, "timed out"), "message: %s", e.msg);
	ck_assert_double_lt(dt, 5.0);
	ck_assert_double_ge(dt, 0.25);
	pool_destroy(p);
}
END_TEST

/* Many rounds of publish-then-meet: before the first barrier of a round each rank writes
 * the round number into its slot; after it every rank must see every slot at that round
 * (the barrier publishes plain writes); a second barrier keeps the next round's writes
 * out of this round's reads. */
struct rounds_arg {
	struct pool *pool;
	int rounds;
	volatile int slot[POOL_MAX_WORLD];
	int bad[POOL_MAX_WORLD];
};

static int rounds_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct rounds_arg *a = arg;
	struct barrier *b = pool_barrier(a->pool);
	int world = pool_world(a->pool), rc;
	for (int k = 1; k <= a->rounds; k++) {
		a->slot[rank] = k;
		if ((rc = barrier_wait(b, rank, e)))
			return rc;
		for (int q = 0; q < world; q++)
			a->bad[rank] += a->slot[q] != k;
		if ((rc = barrier_wait(b, rank, e)))
			return rc;
	}
	return ERR_OK;
}

struct stuck_arg {
	atomic_int release; /* lets the stuck rank go (test cleanup) */
};

/* rank 0 fails at once; rank 1 blocks without looking at the barrier, as a thread inside
 * cudaStreamSynchronize behind a kernel that never ends would, until released (at most
 * 20 s, so that a missing watchdog fails the test instead of hanging it) */
static int stuck_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct stuck_arg *a = arg;
	if (rank == 0)
		return ERR(e, ERR_DEVICE, "rank 0 failed on purpose");
	double t0 = clock_now_s();
	while (!atomic_load(&a->release) && clock_now_s() - t0 < 20.0) {
		struct timespec ts = {0, 5L * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return ERR_OK;
}

static int nothing_fn(int rank, void *ctx, void *arg, struct err *e)
{
	return ERR_OK;
}

START_TEST(a_rank_stuck_in_a_blocking_call_does_not_hold_the_pool)
{
	struct pool *p = NULL;
	struct err e;
	struct stuck_arg a;
	atomic_init(&a.release, 0);
	err_clear(&e);
	ck_assert_int_eq(pool_create(2, 0.5, &p, &e), ERR_OK);
	double t0 = clock_now_s();
	int rc = pool_run(p, stuck_fn, &a, &e);
	double took = clock_now_s() - t0;
	ck_assert_int_eq(rc, ERR_DEVICE);
	ck_assert_msg(strstr(e.msg, "rank 1 still running") && strstr(e.msg, "devices.timeout"),
		      "%s", e.msg);
	ck_assert_msg(took < 5.0, "pool_run returned after %.1f s (the stuck rank held it)", took);
	err_clear(&e);
	ck_assert_int_eq(pool_run(p, nothing_fn, NULL, &e), ERR_DEVICE);
	ck_assert_msg(strstr(e.msg, "unusable"), "%s", e.msg);
	atomic_store(&a.release, 1);
	pool_destroy(p); /* the released rank returns within its grace: all is freed */
}
END_TEST

START_TEST(barrier_publishes_writes_spinning_or_sleeping)
{
	/* spin = 0: sleep at once; huge: the waiters are still spinning when the last arrives */
	static const int spins[] = {0, 1 << 30};
	for (size_t si = 0; si < 2; si++)
		for (int world = 2; world <= (spins[si] ? 2 : 4); world++) {
			struct pool *p;
			struct err e;
			err_clear(&e);
			ck_assert_int_eq(pool_create(world, 30.0, &p, &e), ERR_OK);
			/* (unbounded spinning only with as few ranks as a machine has cores) */
			barrier_set_spin(pool_barrier(p), spins[si]);
			struct rounds_arg a;
			memset(&a, 0, sizeof a);
			a.pool = p;
			/* fewer rounds when spinning: a loaded machine may deschedule a spinner
			 * for a whole time slice per round */
			a.rounds = spins[si] ? 200 : 2000;
			ck_assert_msg(pool_run(p, rounds_fn, &a, &e) == ERR_OK, "%s", e.msg);
			for (int r = 0; r < world; r++) {
				ck_assert_int_eq(a.slot[r], a.rounds);
				ck_assert_int_eq(a.bad[r], 0);
			}
			pool_destroy(p);
		}
}
END_TEST

START_TEST(an_abort_reaches_spinning_waiters)
{
	/* with an unbounded spin phase the waiters only leave it through the abort flag (two
	 * ranks: no more spinners than a CI machine has cores) */
	for (int world = 2; world <= 2; world++) {
		struct pool *p;
		struct err e;
		err_clear(&e);
		ck_assert_int_eq(pool_create(world, 30.0, &p, &e), ERR_OK);
		barrier_set_spin(pool_barrier(p), 1 << 30);
		struct fail_arg a = {p, 0, 3, 10, {0}};
		double t0 = clock_now_s();
		ck_assert_int_eq(pool_run(p, stepping_fn, &a, &e), ERR_DEVICE);
		ck_assert_double_lt(clock_now_s() - t0, 5.0);
		ck_assert_msg(strncmp(e.msg, "rank 0 failed on purpose at step 3", 34) == 0, "%s", e.msg);
		for (int r = 1; r < world; r++)
			ck_assert_int_eq(a.reached[r], 3);
		pool_destroy(p);
	}
}
END_TEST

struct coll_arg {
	struct coll *c;
	size_t n;
	float *f32[POOL_MAX_WORLD];
	double *f64[POOL_MAX_WORLD];
	int64_t *i64[POOL_MAX_WORLD];
	int op;
};

static int allreduce_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct coll_arg *a = arg;
	int rc;
	if ((rc = a->c->ops->allreduce(a->c, rank, NULL, a->f32[rank], a->n, COLL_F32, a->op, 1, e)) ||
	    (rc = a->c->ops->allreduce(a->c, rank, NULL, a->f64[rank], a->n, COLL_F64, a->op, 1, e)) ||
	    (rc = a->c->ops->allreduce(a->c, rank, NULL, a->i64[rank], a->n, COLL_I64, a->op, 1, e)))
		return rc;
	return ERR_OK;
}

START_TEST(host_allreduce_is_rank_ordered_and_identical)
{
	const size_t n = 1001;
	for (int world = 1; world <= 5; world++)
		for (int op = 0; op < 2; op++) {
			struct pool *p;
			struct coll *c;
			struct err e;
			struct coll_arg a;
			err_clear(&e);
			memset(&a, 0, sizeof a);
			ck_assert_int_eq(pool_create(world, 30.0, &p, &e), ERR_OK);
			ck_assert_int_eq(coll_host_create(world, pool_barrier(p), n, &c, &e), ERR_OK);
			a.c = c;
			a.n = n;
			a.op = op;
			float *want32 = calloc(n, sizeof(float));
			double *want64 = calloc(n, sizeof(double));
			int64_t *wanti = calloc(n, sizeof(int64_t));
			for (int r = 0; r < world; r++) {
				a.f32[r] = malloc(n * sizeof(float));
				a.f64[r] = malloc(n * sizeof(double));
				a.i64[r] = malloc(n * sizeof(int64_t));
				for (size_t i = 0; i < n; i++) {
					/* magnitudes that make float addition order-dependent */
					a.f32[r][i] = (r % 2 ? 1e7f : 1e-3f) * (float)((i * 7 + r * 13) % 101);
					a.f64[r][i] = 1.0 / (double)(1 + i + 3 * r);
					a.i64[r][i] = (int64_t)(i * 1000003) - r * 77;
				}
			}
			for (size_t i = 0; i < n; i++) {
				float s = a.f32[0][i];
				double d = a.f64[0][i];
				int64_t k = a.i64[0][i];
				for (int r = 1; r < world; r++) {
					s += a.f32[r][i];
					d += a.f64[r][i];
					k += a.i64[r][i];
				}
				want32[i] = op == COLL_AVG ? s / (float)world : s;
				want64[i] = op == COLL_AVG ? d / world : d;
				wanti[i] = op == COLL_AVG ? k / world : k;
			}
			ck_assert_int_eq(pool_run(p, allreduce_fn, &a, &e), ERR_OK);
			for (int r = 0; r < world; r++) {
				ck_assert(memcmp(a.f32[r], want32, n * sizeof(float)) == 0);
				ck_assert(memcmp(a.f64[r], want64, n * sizeof(double)) == 0);
				ck_assert(memcmp(a.i64[r], wanti, n * sizeof(int64_t)) == 0);
				free(a.f32[r]);
				free(a.f64[r]);
				free(a.i64[r]);
			}
			free(want32);
			free(want64);
			free(wanti);
			coll_destroy(c);
			pool_destroy(p);
		}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pool");
	TCase *tc = tcase_create("pool");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, failure_at_a_chosen_step_releases_every_rank);
	tcase_add_test(tc, a_missing_rank_is_a_timeout_not_a_hang);
	tcase_add_test(tc, host_allreduce_is_rank_ordered_and_identical);
	tcase_add_test(tc, barrier_publishes_writes_spinning_or_sleeping);
	tcase_add_test(tc, an_abort_reaches_spinning_waiters);
	tcase_add_test(tc, a_rank_stuck_in_a_blocking_call_does_not_hold_the_pool);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
