/*
 * test-pool: the device pool, the window barrier and the host collective.
 *
 * A rank failing at a chosen step releases every peer (no deadlock), the pool reports the
 * root cause with its rank, a rank that never arrives is a timeout error rather than a
 * hang, and the host allreduce gives every rank identical bits equal to the rank-ordered
 * sum, for float32, float64 and int64, sum and avg (avg's float division, by a power of
 * two done as a multiplication, keeps the division's bits on zeros, subnormals, infinities
 * and NaN).
 *
 * The watchdog: a parked or slow rank (in a marked operation, or absent while a peer waits
 * at the barrier) makes pool_run() return within the timeout plus a small margin, naming
 * the late rank and its operation, the late thread abandoned and parked when it comes
 * back; a rank that marks its progress is never late however long the run, nor one
 * waiting for a late peer in a collective of its own; a rank that does not leave after a
 * peer's failure is abandoned after the grace period.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check-run.h"
#include "clock.h"
#include "coll.h"
#include "pool.h"

struct fail_arg {
	struct pool *pool;
	int fail_rank, fail_step, steps;
	int reached[MAX_WORLD];
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
	/* the message names the rank that never came, not only the one that waited */
	ck_assert_msg(strstr(e.msg, "timed out") && strstr(e.msg, "waiting for rank 0 "),
		      "message: %s", e.msg);
	ck_assert_int_eq(pool_abandoned(p), 0); /* rank 0 had returned: nobody is late */
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
	volatile int slot[MAX_WORLD];
	int bad[MAX_WORLD];
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

/* ---- the watchdog ---- */

#define WATCH_TIMEOUT_S 0.5

static void sleep_s(double seconds)
{
	struct timespec ts = {(time_t)seconds, (long)((seconds - (long)seconds) * 1e9)};
	while (nanosleep(&ts, &ts) != 0)
		;
}

struct late_arg {
	struct pool *pool;
	int late_rank;
	double late_s;          /* < 0: parked for good */
	int marks;              /* the late rank marks its operation (else it only is absent) */
	atomic_int came_back;   /* the late rank went past its next mark */
};

/* Every rank marks two operations and meets the others at the barrier; the late rank,
 * inside its second operation, sleeps (as in a call that ignores the abort) first. */
static int late_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct late_arg *a = arg;
	int marks = rank != a->late_rank || a->marks;
	if (marks)
		ERR_TRY(pool_mark(a->pool, rank, "microbatch", 1, e));
	if (marks)
		ERR_TRY(pool_mark(a->pool, rank, "microbatch", 2, e));
	if (rank == a->late_rank) {
		if (a->late_s < 0)
			for (;;)
				sleep_s(1.0);
		sleep_s(a->late_s);
		ERR_TRY(pool_mark(a->pool, rank, "the allreduce", 0, e));
		atomic_store(&a->came_back, 1);
	}
	return barrier_wait(pool_barrier(a->pool), rank, e);
}

/* Runs late_fn on `world` ranks and checks the watchdog's verdict on rank late_rank. */
static void check_late_rank(int world, int late_rank, double late_s, int marks)
{
	struct pool *p;
	struct err e;
	err_clear(&e);
	ck_assert_int_eq(pool_create(world, WATCH_TIMEOUT_S, &p, &e), ERR_OK);
	struct late_arg *a = calloc(1, sizeof *a); /* left allocated: the late thread holds it */
	a->pool = p;
	a->late_rank = late_rank;
	a->late_s = late_s;
	a->marks = marks;
	double t0 = clock_now_s();
	int rc = pool_run(p, late_fn, a, &e);
	double dt = clock_now_s() - t0;
	ck_assert_int_eq(rc, ERR_DEVICE);
	/* bounded by the timeout, not by the late rank; generous for a loaded machine */
	ck_assert_double_ge(dt, WATCH_TIMEOUT_S * 0.9);
	ck_assert_double_lt(dt, WATCH_TIMEOUT_S + 2.5);
	char want[96];
	snprintf(want, sizeof want, "rank %d did not arrive within 0.5 s (devices.timeout)", late_rank);
	ck_assert_msg(strstr(e.msg, want), "message: %s", e.msg);
	if (marks)
		ck_assert_msg(strstr(e.msg, "(devices.timeout): last in microbatch 2, for "), "message: %s", e.msg);
	else
		ck_assert_msg(strstr(e.msg, "(devices.timeout): no operation marked"), "message: %s",
			      e.msg);
	ck_assert_msg(strstr(e.msg, "; its thread is left behind"), "message: %s", e.msg);
	ck_assert_int_eq(pool_abandoned(p), 1);
	ck_assert_int_ge(pool_abandoned_threads(), 1);
	/* the pool refuses to run again at once */
	struct fail_arg ok = {p, -1, 0, 1, {0}};
	err_clear(&e);
	ck_assert_int_eq(pool_run(p, stepping_fn, &ok, &e), ERR_DEVICE);
	ck_assert_msg(strstr(e.msg, "cannot run again"), "message: %s", e.msg);
	if (late_s > 0) {
		/* when it wakes up, the abandoned thread parks at its next mark */
		sleep_s(late_s + 0.5 - (clock_now_s() - t0) > 0 ? late_s + 0.5 - (clock_now_s() - t0) : 0);
		ck_assert_int_eq(atomic_load(&a->came_back), 0);
	}
	pool_destroy(p); /* the idle threads quit; the parked one is detached */
}

START_TEST(a_parked_rank_is_reported_and_left_behind)
{
	check_late_rank(2, 1, -1.0, 1);
}
END_TEST

START_TEST(a_parked_single_rank_is_reported)
{
	/* no peer waits at a barrier: only its overdue operation tells */
	check_late_rank(1, 0, -1.0, 1);
}
END_TEST

START_TEST(a_slow_rank_is_named_not_the_one_that_waited)
{
	/* three times the timeout late: the run ends after the timeout, naming rank 1 */
	check_late_rank(3, 1, 3 * WATCH_TIMEOUT_S, 1);
}
END_TEST

START_TEST(an_absent_rank_is_late_without_marks)
{
	/* the late rank marks nothing: the peers' barrier timeout names it */
	check_late_rank(2, 0, -1.0, 0);
}
END_TEST

/* Rank 0 waits for its peer in a collective of its own (as in NCCL: no pool barrier),
 * leaving when the run is aborted; rank 1 is parked in its microbatch. */
static int waits_for_parked_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct pool *p = arg;
	if (rank == 1) {
		ERR_TRY(pool_mark(p, rank, "microbatch", 1, e));
		for (;;)
			sleep_s(1.0);
	}
	ERR_TRY(pool_mark_wait(p, rank, "the allreduce", e));
	double t0 = clock_now_s();
	while (!barrier_is_aborted(pool_barrier(p)) && clock_now_s() - t0 < 6 * WATCH_TIMEOUT_S)
		sleep_s(0.01);
	return ERR(e, ERR_ABORTED, "rank 0 released");
}

START_TEST(a_late_rank_is_named_by_its_global_rank)
{
	/* the threads of a process whose first rank is 4 (several processes) */
	struct pool *p;
	struct err e;
	err_clear(&e);
	ck_assert_int_eq(pool_create(2, WATCH_TIMEOUT_S, &p, &e), ERR_OK);
	pool_set_first_rank(p, 4);
	struct late_arg *a = calloc(1, sizeof *a); /* left allocated: the late thread holds it */
	a->pool = p;
	a->late_rank = 1;
	a->late_s = -1.0;
	a->marks = 1;
	ck_assert_int_eq(pool_run(p, late_fn, a, &e), ERR_DEVICE);
	ck_assert_msg(strncmp(e.msg, "rank 5 did not arrive within 0.5 s", 34) == 0, "message: %s",
		      e.msg);
	pool_destroy(p);
}
END_TEST

struct released_arg {
	struct pool *pool;
	struct err released; /* what rank 0's barrier wait said */
};

/* rank 1 fails without a message of its own; rank 0 is released from the barrier */
static int silent_failure_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct released_arg *a = arg;
	(void)ctx;
	if (rank == 1)
		return ERR_DEVICE;
	int rc = barrier_wait(pool_barrier(a->pool), rank, &a->released);
	*e = a->released;
	return rc;
}

START_TEST(messages_name_global_ranks)
{
	/* the threads of a process whose first rank is 4: ranks 4 and 5 */
	struct released_arg a;
	struct err e;
	err_clear(&e);
	err_clear(&a.released);
	ck_assert_int_eq(pool_create(2, 30.0, &a.pool, &e), ERR_OK);
	pool_set_first_rank(a.pool, 4);
	ck_assert_int_eq(pool_run(a.pool, silent_failure_fn, &a, &e), ERR_DEVICE);
	ck_assert_str_eq(e.msg, "rank 5 failed");
	ck_assert_str_eq(a.released.msg, "rank 4 released: rank 5 failed");
	pool_destroy(a.pool);
	/* a barrier wait that times out names the waiter and the absent rank globally */
	struct barrier *b;
	ck_assert_int_eq(barrier_create(2, 0.05, &b, &e), ERR_OK);
	barrier_set_first_rank(b, 4);
	err_clear(&e);
	ck_assert_int_eq(barrier_wait(b, 1, &e), ERR_DEVICE);
	ck_assert_msg(strncmp(e.msg, "rank 5: barrier timed out after 0.05 s waiting for rank 4 ",
			      58) == 0, "message: %s", e.msg);
	barrier_destroy(b);
}
END_TEST

START_TEST(a_rank_waiting_for_a_late_peer_is_not_late)
{
	struct pool *p;
	struct err e;
	err_clear(&e);
	ck_assert_int_eq(pool_create(2, WATCH_TIMEOUT_S, &p, &e), ERR_OK);
	double t0 = clock_now_s();
	ck_assert_int_eq(pool_run(p, waits_for_parked_fn, p, &e), ERR_DEVICE);
	ck_assert_double_lt(clock_now_s() - t0, WATCH_TIMEOUT_S + 2.5);
	/* only the parked rank is named: the one waiting for it was in a wait */
	ck_assert_msg(strncmp(e.msg, "rank 1 did not arrive within 0.5 s (devices.timeout): last "
			      "in microbatch 1, for ", 76) == 0 && !strstr(e.msg, "rank 0"),
		      "message: %s", e.msg);
	ck_assert_int_eq(pool_abandoned(p), 1);
	pool_destroy(p);
}
END_TEST

struct progress_arg {
	struct pool *pool;
	int ops;
};

static int progress_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct progress_arg *a = arg;
	for (int k = 1; k <= a->ops; k++) {
		ERR_TRY(pool_mark(a->pool, rank, "step", k, e));
		sleep_s(WATCH_TIMEOUT_S / 5);
		if (rank == 0)
			sleep_s(WATCH_TIMEOUT_S / 5); /* the others wait for it at the barrier */
		ERR_TRY(barrier_wait(pool_barrier(a->pool), rank, e));
	}
	return ERR_OK;
}

START_TEST(a_rank_that_marks_progress_is_never_late)
{
	/* runs last three timeouts; no single operation or barrier wait lasts one */
	for (int world = 1; world <= 2; world++) {
		struct pool *p;
		struct err e;
		err_clear(&e);
		ck_assert_int_eq(pool_create(world, WATCH_TIMEOUT_S, &p, &e), ERR_OK);
		struct progress_arg a = {p, 4};
		ck_assert_msg(pool_run(p, progress_fn, &a, &e) == ERR_OK, "%s", e.msg);
		ck_assert_int_eq(pool_abandoned(p), 0);
		pool_destroy(p);
	}
}
END_TEST

static int busy_after_failure_fn(int rank, void *ctx, void *arg, struct err *e)
{
	if (rank == 0)
		return ERR(e, ERR_DEVICE, "rank 0 failed on purpose");
	for (;;)
		sleep_s(1.0); /* computing without a mark: it never sees the abort */
}

START_TEST(a_rank_that_does_not_leave_after_a_failure_is_left_behind)
{
	struct pool *p;
	struct err e;
	err_clear(&e);
	ck_assert_int_eq(pool_create(2, 30.0, &p, &e), ERR_OK);
	double t0 = clock_now_s();
	ck_assert_int_eq(pool_run(p, busy_after_failure_fn, NULL, &e), ERR_DEVICE);
	double dt = clock_now_s() - t0;
	ck_assert_double_ge(dt, POOL_GRACE_S * 0.9);
	ck_assert_double_lt(dt, POOL_GRACE_S + 2.5);
	ck_assert_msg(strstr(e.msg, "rank 0 failed on purpose; rank 1 did not return within 1 s"),
		      "message: %s", e.msg);
	ck_assert_int_eq(pool_abandoned(p), 1);
	pool_destroy(p);
}
END_TEST

struct coll_arg {
	struct pool *p;
	struct coll *c;
	size_t n;
	float *f32[MAX_WORLD];
	double *f64[MAX_WORLD];
	int64_t *i64[MAX_WORLD];
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

/* a->p: a pool of `world` ranks, a->c: its host collective for a->n = n elements */
static void collective_of(int world, size_t n, struct coll_arg *a)
{
	struct err e;
	err_clear(&e);
	memset(a, 0, sizeof *a);
	ck_assert_int_eq(pool_create(world, 30.0, &a->p, &e), ERR_OK);
	ck_assert_int_eq(coll_host_create(world, pool_barrier(a->p), n, &a->c, &e), ERR_OK);
	a->n = n;
}

START_TEST(host_allreduce_is_rank_ordered_and_identical)
{
	const size_t n = 1001;
	for (int world = 1; world <= 5; world++)
		for (int op = 0; op < 2; op++) {
			struct err e;
			struct coll_arg a;
			collective_of(world, n, &a);
			err_clear(&e);
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
			ck_assert_int_eq(pool_run(a.p, allreduce_fn, &a, &e), ERR_OK);
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
			coll_destroy(a.c);
			pool_destroy(a.p);
		}
}
END_TEST

static int allreduce_avg_f32_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct coll_arg *a = arg;
	return a->c->ops->allreduce(a->c, rank, NULL, a->f32[rank], a->n, COLL_F32, COLL_AVG, 1, e);
}

/* The value of element i on rank r: sums that land on zeros of both signs, subnormals,
 * the largest floats, infinities, NaN and ordinary values of every exponent. */
static float avg_edge_value(size_t i, int r)
{
	const float edges[] = {-0.0f, 0.0f, FLT_TRUE_MIN, -3 * FLT_TRUE_MIN, 1.5f * FLT_MIN,
			       FLT_MAX, -FLT_MAX, INFINITY, -INFINITY, NAN};
	const size_t k = sizeof edges / sizeof edges[0];
	if (i < k * k) /* every pair of edges on ranks 0 and 1, zeros on the others */
		return r == 0 ? edges[i % k] : r == 1 ? edges[i / k] : -0.0f;
	uint32_t u = (uint32_t)(i * 2654435761u) ^ (uint32_t)(r * 40503u);
	return ldexpf((float)(u % 1000003u) - 500001.0f, (int)(u % 200u) - 150);
}

/* avg divides each sum by W; by a power of two the reduction multiplies by 1/W, which must
 * give the division's bits for every value (a rounded or flushing reciprocal, or one used
 * for W = 3, fails); a lone rank, which exchanges nothing, keeps its values' bits */
START_TEST(host_avg_has_the_division_bits)
{
	const size_t n = 4096;
	for (int world = 1; world <= 4; world++) {
		struct err e;
		struct coll_arg a;
		collective_of(world, n, &a);
		err_clear(&e);
		float *want = malloc(n * sizeof(float));
		for (int r = 0; r < world; r++) {
			a.f32[r] = malloc(n * sizeof(float));
			for (size_t i = 0; i < n; i++)
				a.f32[r][i] = avg_edge_value(i, r);
		}
		for (size_t i = 0; i < n; i++) {
			float s = a.f32[0][i];
			for (int r = 1; r < world; r++)
				s += a.f32[r][i];
			want[i] = s / (float)world;
		}
		ck_assert_int_eq(pool_run(a.p, allreduce_avg_f32_fn, &a, &e), ERR_OK);
		for (int r = 0; r < world; r++) {
			ck_assert_msg(memcmp(a.f32[r], want, n * sizeof(float)) == 0,
				      "W = %d: rank %d's average differs from the division", world, r);
			free(a.f32[r]);
		}
		free(want);
		coll_destroy(a.c);
		pool_destroy(a.p);
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
	tcase_add_test(tc, host_avg_has_the_division_bits);
	tcase_add_test(tc, barrier_publishes_writes_spinning_or_sleeping);
	tcase_add_test(tc, an_abort_reaches_spinning_waiters);
	tcase_add_test(tc, a_parked_rank_is_reported_and_left_behind);
	tcase_add_test(tc, a_parked_single_rank_is_reported);
	tcase_add_test(tc, a_slow_rank_is_named_not_the_one_that_waited);
	tcase_add_test(tc, an_absent_rank_is_late_without_marks);
	tcase_add_test(tc, a_rank_that_marks_progress_is_never_late);
	tcase_add_test(tc, a_rank_waiting_for_a_late_peer_is_not_late);
	tcase_add_test(tc, a_late_rank_is_named_by_its_global_rank);
	tcase_add_test(tc, messages_name_global_ranks);
	tcase_add_test(tc, a_rank_that_does_not_leave_after_a_failure_is_left_behind);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
