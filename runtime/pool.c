/*
 * pool: one pthread per device, created once, running caller-supplied functions.
 *
 * The threads sleep on a condition variable between runs. pool_run() publishes the
 * function and a run number, wakes them, and waits until every thread has reported.
 * A failing rank aborts the barrier (and the collective, when one is attached) at once,
 * so peers blocked in a barrier or a collective return ERR_ABORTED; the root cause
 * reported is the error of a rank whose code is not ERR_ABORTED (lowest such rank).
 *
 * The watchdog (pool.h) is the waiting caller itself: with a timeout it waits in ticks
 * of POOL_TICK_S and looks at the ranks after each one. Each rank publishes what it is
 * doing through atomics (its last marked operation and when it began), and the barrier
 * tells which ranks wait in it and which were missing when a wait timed out.
 */
#include "pool.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "coll.h"

struct pool_slot {
	struct pool *pool;
	int rank;
	pthread_t thread;
	int started;
	void *ctx;
	struct err err;
	int rc;
	int running;                 /* inside fn in the current run (under pool.mu) */
	atomic_int abandoned;        /* left behind by the watchdog: parks when back */
	_Atomic(const char *) op;    /* last operation marked in this run, NULL if none */
	atomic_int op_index;
	atomic_int op_waits;         /* the operation waits for the peers (pool_mark_wait) */
	_Atomic double op_since;     /* clock_now_s() when it was marked */
};

struct pool {
	int world;
	int first_rank; /* the global rank of thread 0 (several processes), for messages */
	pthread_mutex_t mu;
	pthread_cond_t cv_start, cv_done;
	unsigned long run_id;
	int done;
	int quit;
	int abandoned;               /* threads abandoned (the pool refuses to run) */
	pool_fn fn;
	void *arg;
	struct barrier *barrier;
	struct coll *coll;
	struct pool_slot slot[MAX_WORLD];
};

static atomic_int abandoned_in_process;

/* Where an abandoned thread ends up: it may still be inside the caller's code, whose
 * memory the caller frees once pool_run() has returned, so it never leaves. */
static void park_for_good(void)
{
	for (;;)
		pause();
}

static void *pool_main(void *p)
{
	struct pool_slot *s = p;
	struct pool *pl = s->pool;
	unsigned long seen = 0;
	for (;;) {
		pthread_mutex_lock(&pl->mu);
		while (!pl->quit && pl->run_id == seen)
			pthread_cond_wait(&pl->cv_start, &pl->mu);
		if (pl->quit) {
			pthread_mutex_unlock(&pl->mu);
			return NULL;
		}
		seen = pl->run_id;
		pool_fn fn = pl->fn;
		void *arg = pl->arg;
		pthread_mutex_unlock(&pl->mu);

		struct err err;
		err_clear(&err);
		int rc = fn(s->rank, s->ctx, arg, &err);
		if (rc != ERR_OK) {
			if (err.code == ERR_OK)
				ERR(&err, rc, "rank %d failed", pl->first_rank + s->rank);
			barrier_abort(pl->barrier, s->rank);
			if (pl->coll && pl->coll->ops->abort)
				pl->coll->ops->abort(pl->coll, s->rank);
		}
		pthread_mutex_lock(&pl->mu);
		if (atomic_load(&s->abandoned)) {
			pthread_mutex_unlock(&pl->mu);
			park_for_good();
		}
		s->rc = rc;
		s->err = err;
		s->running = 0;
		if (++pl->done == pl->world)
			pthread_cond_signal(&pl->cv_done);
		pthread_mutex_unlock(&pl->mu);
	}
}

int pool_create(int world, double barrier_timeout_s, struct pool **out, struct err *e)
{
	if (world < 1 || world > MAX_WORLD)
		return ERR(e, ERR_CONFIG, "world size %d outside 1..%d", world, MAX_WORLD);
	struct pool *p = calloc(1, sizeof *p);
	if (!p)
		return ERR(e, ERR_NOMEM, "out of memory");
	p->world = world;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv_start, NULL);
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cv_done, &attr);
	pthread_condattr_destroy(&attr);
	if (barrier_create(world, barrier_timeout_s, &p->barrier, e) != ERR_OK)
		goto fail_sync;
	for (int r = 0; r < world; r++) {
		p->slot[r].pool = p;
		p->slot[r].rank = r;
		int rc = pthread_create(&p->slot[r].thread, NULL, pool_main, &p->slot[r]);
		if (rc != 0) {
			ERR(e, ERR_DEVICE, "cannot start device thread %d of %d: %s", r, world,
			    strerror(rc));
			goto fail_threads;
		}
		p->slot[r].started = 1;
	}
	*out = p;
	return ERR_OK;
fail_threads:
	pthread_mutex_lock(&p->mu);
	p->quit = 1;
	pthread_cond_broadcast(&p->cv_start);
	pthread_mutex_unlock(&p->mu);
	for (int r = 0; r < world; r++)
		if (p->slot[r].started)
			pthread_join(p->slot[r].thread, NULL);
	barrier_destroy(p->barrier);
fail_sync:
	pthread_cond_destroy(&p->cv_done);
	pthread_cond_destroy(&p->cv_start);
	pthread_mutex_destroy(&p->mu);
	free(p);
	return e ? e->code : ERR_DEVICE;
}

void pool_destroy(struct pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->quit = 1;
	pthread_cond_broadcast(&p->cv_start);
	pthread_mutex_unlock(&p->mu);
	for (int r = 0; r < p->world; r++) {
		if (!p->slot[r].started)
			continue;
		if (atomic_load(&p->slot[r].abandoned))
			pthread_detach(p->slot[r].thread);
		else
			pthread_join(p->slot[r].thread, NULL);
	}
	if (p->abandoned)
		return; /* an abandoned thread still holds the pool's mutex or barrier */
	barrier_destroy(p->barrier);
	pthread_cond_destroy(&p->cv_done);
	pthread_cond_destroy(&p->cv_start);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

int pool_world(const struct pool *p)
{
	return p->world;
}

struct barrier *pool_barrier(struct pool *p)
{
	return p->barrier;
}

void pool_set_first_rank(struct pool *p, int first_rank)
{
	p->first_rank = first_rank;
	barrier_set_first_rank(p->barrier, first_rank);
}

void pool_set_coll(struct pool *p, struct coll *c)
{
	p->coll = c;
}

void pool_set_ctx(struct pool *p, int rank, void *ctx)
{
	p->slot[rank].ctx = ctx;
}

/* What pool_mark and pool_mark_wait publish. */
static int mark(struct pool *p, int rank, const char *op, int index, int waits, struct err *e)
{
	struct pool_slot *s = &p->slot[rank];
	if (atomic_load(&s->abandoned))
		park_for_good();
	atomic_store(&s->op_waits, waits);
	atomic_store(&s->op_index, index);
	atomic_store(&s->op, op);
	atomic_store(&s->op_since, clock_now_s());
	return barrier_check(p->barrier, rank, e);
}

int pool_mark(struct pool *p, int rank, const char *op, int index, struct err *e)
{
	return mark(p, rank, op, index, 0, e);
}

int pool_mark_wait(struct pool *p, int rank, const char *op, struct err *e)
{
	return mark(p, rank, op, 0, 1, e);
}

int pool_abandoned(const struct pool *p)
{
	return p->abandoned;
}

int pool_abandoned_threads(void)
{
	return atomic_load(&abandoned_in_process);
}

/* ---- the watchdog ---- */

/* What the watchdog saw when it raised the alarm. */
struct watch {
	double alarm_at;   /* 0: no alarm yet */
	unsigned late;     /* ranks late at the alarm */
	char what[MAX_WORLD][96]; /* the operation each late rank was last in */
};

static unsigned running_ranks(const struct pool *p)
{
	unsigned m = 0;
	for (int r = 0; r < p->world; r++)
		if (p->slot[r].running)
			m |= 1u << r;
	return m;
}

/* Ranks (pool.mu held) that are late: absent when a barrier wait timed out, or longer
 * than the timeout in one marked operation outside the barrier. Every rank was at the
 * barrier when its parties last met, so an operation counts from then at the earliest;
 * once the barrier is aborted, ranks leave it without meeting, and only its record of
 * who was missing counts. *aborted: whether it is. */
static unsigned late_ranks(struct pool *p, double now, int *aborted)
{
	unsigned present, missing;
	double met, timeout = barrier_timeout(p->barrier);
	*aborted = barrier_arrivals(p->barrier, &present, &missing, &met);
	if (*aborted)
		return missing;
	unsigned late = 0;
	for (int r = 0; r < p->world; r++) {
		struct pool_slot *s = &p->slot[r];
		if (!s->running || (present & (1u << r)) || !atomic_load(&s->op) ||
		    atomic_load(&s->op_waits))
			continue;
		double since = atomic_load(&s->op_since);
		if (now - (since > met ? since : met) > timeout)
			late |= 1u << r;
	}
	return late;
}

/* "last in microbatch 2, for 2.1 s": what the rank was doing when found late */
static void describe_op(struct pool_slot *s, double now, char *out, size_t outlen)
{
	const char *op = atomic_load(&s->op);
	int index = atomic_load(&s->op_index);
	double for_s = now - atomic_load(&s->op_since);
	if (!op)
		snprintf(out, outlen, "no operation marked");
	else if (index > 0)
		snprintf(out, outlen, "last in %s %d, for %.1f s", op, index, for_s);
	else
		snprintf(out, outlen, "last in %s, for %.1f s", op, for_s);
}

/* Looks at the ranks once (pool.mu held). Raises the alarm when a rank is late or the
 * run was aborted; then releases everybody (a late rank may not have failed yet).
 * Returns the ranks to abandon once the alarm has run its course, else 0. */
static unsigned watch_tick(struct pool *p, struct watch *w)
{
	double now = clock_now_s();
	unsigned running = running_ranks(p);
	if (w->alarm_at == 0) {
		int aborted;
		unsigned late = late_ranks(p, now, &aborted) & running;
		if (!late && !aborted)
			return 0;
		w->alarm_at = now;
		w->late = late;
		for (int r = 0; r < p->world; r++)
			if (late & (1u << r))
				describe_op(&p->slot[r], now, w->what[r], sizeof w->what[r]);
		if (late) {
			int first = __builtin_ctz(late);
			pthread_mutex_unlock(&p->mu);
			barrier_abort(p->barrier, first);
			if (p->coll && p->coll->ops->abort)
				p->coll->ops->abort(p->coll, first);
			pthread_mutex_lock(&p->mu);
		}
		return 0;
	}
	/* the late ranks are given up on as soon as the others have left */
	if ((running & ~w->late) == 0 || now - w->alarm_at > POOL_GRACE_S)
		return running;
	return 0;
}

/* Waits (pool.mu held) until every rank is done, or the watchdog gives up on some:
 * returns those, marked abandoned. */
static unsigned wait_ranks(struct pool *p, struct watch *w)
{
	double timeout = barrier_timeout(p->barrier);
	while (p->done < p->world) {
		if (timeout <= 0) {
			pthread_cond_wait(&p->cv_done, &p->mu);
			continue;
		}
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += (long)(POOL_TICK_S * 1e9);
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&p->cv_done, &p->mu, &until);
		if (p->done == p->world)
			break;
		unsigned give_up = watch_tick(p, w);
		if (give_up) {
			for (int r = 0; r < p->world; r++)
				if (give_up & (1u << r))
					atomic_store(&p->slot[r].abandoned, 1);
			return give_up;
		}
	}
	return 0;
}

/* The error of the late ranks: each with the operation it was last in. */
static int late_error(struct pool *p, const struct watch *w, unsigned left, struct err *e)
{
	char ranks[128], ops[MAX_WORLD * 112];
	size_t len = 0;
	int n = barrier_rank_list(w->late, p->first_rank, ranks, sizeof ranks);
	ops[0] = '\0';
	for (int r = 0; r < p->world; r++) {
		if (!(w->late & (1u << r)))
			continue;
		int k = n == 1 ? snprintf(ops, sizeof ops, "%s", w->what[r])
			       : snprintf(ops + len, sizeof ops - len, "%srank %d %s", len ? "; " : "",
					  p->first_rank + r, w->what[r]);
		if (k > 0 && (size_t)k < sizeof ops - len)
			len += (size_t)k;
	}
	int nleft = __builtin_popcount(left);
	return ERR(e, ERR_DEVICE, "%s %s did not arrive within %g s (devices.timeout): %s%s",
		   n == 1 ? "rank" : "ranks", ranks, barrier_timeout(p->barrier), ops,
		   !nleft ? "" : nleft == 1 ? "; its thread is left behind"
					    : "; their threads are left behind");
}

/* The root cause among the ranks that returned: a rank whose code is not ERR_ABORTED
 * (lowest such rank), else the first echo; -1 when every one succeeded. */
static int root_rank(const struct pool *p, unsigned left)
{
	int root = -1, echo = -1;
	for (int r = 0; r < p->world; r++) {
		if ((left & (1u << r)) || p->slot[r].rc == ERR_OK)
			continue;
		if (p->slot[r].rc != ERR_ABORTED && root < 0)
			root = r;
		if (echo < 0)
			echo = r;
	}
	return root >= 0 ? root : echo;
}

static int root_error(struct pool *p, int root, struct err *e)
{
	struct err *re = &p->slot[root].err;
	char own[32];
	int len = snprintf(own, sizeof own, "rank %d", p->first_rank + root);
	if (strncmp(re->msg, own, (size_t)len) == 0 &&
	    (re->msg[len] == ':' || re->msg[len] == ' ')) /* already names its rank */
		return ERR(e, re->code, "%s", re->msg);
	return ERR(e, re->code, "%s: %s", own, re->msg);
}

int pool_usable(const struct pool *p, struct err *e)
{
	if (p->abandoned)
		return ERR(e, ERR_DEVICE, "the device pool cannot run again: %d of its threads "
			   "did not come back from an earlier run", p->abandoned);
	return ERR_OK;
}

int pool_run(struct pool *p, pool_fn fn, void *arg, struct err *e)
{
	ERR_TRY(pool_usable(p, e));
	struct watch w;
	memset(&w, 0, sizeof w);
	pthread_mutex_lock(&p->mu);
	p->fn = fn;
	p->arg = arg;
	p->done = 0;
	p->run_id++;
	for (int r = 0; r < p->world; r++) {
		p->slot[r].running = 1;
		atomic_store(&p->slot[r].op, NULL);
	}
	pthread_cond_broadcast(&p->cv_start);
	unsigned left = wait_ranks(p, &w);
	pthread_mutex_unlock(&p->mu);

	int nleft = __builtin_popcount(left);
	p->abandoned = nleft;
	atomic_fetch_add(&abandoned_in_process, nleft);
	if (!left && barrier_is_aborted(p->barrier))
		barrier_reset(p->barrier); /* (an abandoned thread could still meet it) */
	if (w.late)
		return late_error(p, &w, left, e);
	int root = root_rank(p, left);
	if (root < 0 && !left)
		return ERR_OK;
	if (root >= 0)
		root_error(p, root, e);
	else
		ERR(e, ERR_DEVICE, "the run was aborted");
	if (left) {
		char ranks[128];
		int n = barrier_rank_list(left, p->first_rank, ranks, sizeof ranks);
		size_t len = strlen(e->msg);
		snprintf(e->msg + len, sizeof e->msg - len, "; %s %s did not return within %g s "
			 "after the failure: %s left behind", n == 1 ? "rank" : "ranks", ranks,
			 POOL_GRACE_S, n == 1 ? "its thread is" : "their threads are");
	}
	return e->code;
}
