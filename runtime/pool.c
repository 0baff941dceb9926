/*
 * pool: one pthread per device, created once, running caller-supplied functions.
 *
 * The threads sleep on a condition variable between runs. pool_run() publishes the
 * function and a run number, wakes them, and waits until every thread has reported.
 * A failing rank aborts the barrier (and the collective, when one is attached) at once,
 * so peers blocked in a barrier or a collective return ERR_ABORTED; the root cause
 * reported is the error of a rank whose code is not ERR_ABORTED (lowest such rank).
 *
 * The watchdog: a rank stuck in a call that neither the barrier nor the collective can
 * interrupt (a blocking CUDA synchronization behind a kernel that never ends, a hung
 * driver) would keep pool_run waiting for ever after its peers left. Once the barrier
 * is aborted (a rank failed, or a barrier or collective wait timed out), pool_run waits
 * at most the barrier timeout more for the remaining ranks; past that it reports the
 * ranks still running, and the pool is broken: it runs nothing more, and pool_destroy
 * leaves it (its stuck threads still use it) for the process's exit to reclaim.
 */
#include "pool.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "coll.h"

struct pool_slot {
	struct pool *pool;
	int rank;
	pthread_t thread;
	int started;
	int running; /* inside the current run's function (guarded by pool.mu) */
	void *ctx;
	struct err err;
	int rc;
};

struct pool {
	int world;
	pthread_mutex_t mu;
	pthread_cond_t cv_start, cv_done;
	unsigned long run_id;
	int done;
	int quit;
	int broken;       /* the watchdog gave up on a stuck rank: nothing runs any more */
	pool_fn fn;
	void *arg;
	struct barrier *barrier;
	struct coll *coll;
	struct pool_slot slot[POOL_MAX_WORLD];
};

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
		s->running = 1;
		pthread_mutex_unlock(&pl->mu);

		err_clear(&s->err);
		s->rc = fn(s->rank, s->ctx, arg, &s->err);
		if (s->rc != ERR_OK) {
			if (s->err.code == ERR_OK)
				ERR(&s->err, s->rc, "rank %d failed", s->rank);
			barrier_abort(pl->barrier, s->rank);
			if (pl->coll && pl->coll->ops->abort)
				pl->coll->ops->abort(pl->coll, s->rank);
		}
		pthread_mutex_lock(&pl->mu);
		s->running = 0;
		if (++pl->done == pl->world)
			pthread_cond_signal(&pl->cv_done);
		pthread_mutex_unlock(&pl->mu);
	}
}

int pool_create(int world, double barrier_timeout_s, struct pool **out, struct err *e)
{
	if (world < 1 || world > POOL_MAX_WORLD)
		return ERR(e, ERR_CONFIG, "world size %d outside 1..%d", world, POOL_MAX_WORLD);
	struct pool *p = calloc(1, sizeof *p);
	if (!p)
		return ERR(e, ERR_DEVICE, "out of memory");
	p->world = world;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv_start, NULL);
	pthread_cond_init(&p->cv_done, NULL);
	if (barrier_create(world, barrier_timeout_s, &p->barrier, e) != ERR_OK)
		goto fail_sync;
	for (int r = 0; r < world; r++) {
		p->slot[r].pool = p;
		p->slot[r].rank = r;
		int rc = pthread_create(&p->slot[r].thread, NULL, pool_main, &p->slot[r]);
		if (rc != 0) {
			ERR(e, ERR_DEVICE, "cannot start the thread of rank %d: %s", r, strerror(rc));
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

/* Whether a rank of a broken pool is still inside its function after a last second of
 * grace (it may have been released meanwhile). */
static int still_stuck(struct pool *p)
{
	for (int tries = 0; tries < 100; tries++) {
		int running = 0;
		pthread_mutex_lock(&p->mu);
		for (int r = 0; r < p->world; r++)
			running |= p->slot[r].running;
		pthread_mutex_unlock(&p->mu);
		if (!running)
			return 0;
		struct timespec ts = {0, 10L * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return 1;
}

void pool_destroy(struct pool *p)
{
	if (!p)
		return;
	if (p->broken && still_stuck(p))
		return; /* its stuck threads still use it: left to the process exit */
	pthread_mutex_lock(&p->mu);
	p->quit = 1;
	pthread_cond_broadcast(&p->cv_start);
	pthread_mutex_unlock(&p->mu);
	for (int r = 0; r < p->world; r++)
		if (p->slot[r].started)
			pthread_join(p->slot[r].thread, NULL);
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

void pool_set_coll(struct pool *p, struct coll *c)
{
	p->coll = c;
}

void pool_set_ctx(struct pool *p, int rank, void *ctx)
{
	p->slot[rank].ctx = ctx;
}

/* Waits (p->mu held) until every rank has finished the run, or until the watchdog gives
 * up: the barrier aborted and timeout_s more elapsed with ranks still running. 0 when
 * all finished; otherwise the pool is broken and `e` names the stuck ranks. */
static int wait_run(struct pool *p, struct err *e)
{
	double aborted_at = -1.0;
	while (p->done < p->world) {
		double timeout_s = barrier_timeout(p->barrier); /* also the watchdog's grace */
		if (timeout_s <= 0) {
			pthread_cond_wait(&p->cv_done, &p->mu);
			continue;
		}
		/* the abort does not signal cv_done: look at it every 50 ms */
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 50L * 1000 * 1000;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		int w = pthread_cond_timedwait(&p->cv_done, &p->mu, &until);
		if (w != 0 && w != ETIMEDOUT)
			return ERR(e, ERR_DEVICE, "pool: waiting for the ranks: %s", strerror(w));
		if (aborted_at < 0 && barrier_is_aborted(p->barrier))
			aborted_at = clock_now_s();
		if (aborted_at >= 0 && p->done < p->world &&
		    clock_now_s() - aborted_at > timeout_s) {
			char stuck[64] = "";
			size_t n = 0;
			for (int r = 0; r < p->world; r++)
				if (p->slot[r].running && n < sizeof stuck)
					n += (size_t)snprintf(stuck + n, sizeof stuck - n, "%s%d",
							      n ? "," : "", r);
			p->broken = 1;
			return ERR(e, ERR_DEVICE, "rank%s %s still running %g s after the run was "
				   "aborted (devices.timeout): stuck in a call that cannot be "
				   "interrupted (a GPU kernel or driver call that never returns?); "
				   "the device pool is unusable", strchr(stuck, ',') ? "s" : "", stuck,
				   timeout_s);
		}
	}
	return 0;
}

int pool_run(struct pool *p, pool_fn fn, void *arg, struct err *e)
{
	pthread_mutex_lock(&p->mu);
	if (p->broken) {
		pthread_mutex_unlock(&p->mu);
		return ERR(e, ERR_DEVICE, "the device pool is unusable: a rank never returned from "
			   "an earlier run");
	}
	p->fn = fn;
	p->arg = arg;
	p->done = 0;
	p->run_id++;
	pthread_cond_broadcast(&p->cv_start);
	int stuck = wait_run(p, e);
	pthread_mutex_unlock(&p->mu);
	if (stuck)
		return stuck;

	int root = -1, echo = -1;
	for (int r = 0; r < p->world; r++) {
		if (p->slot[r].rc == ERR_OK)
			continue;
		if (p->slot[r].rc != ERR_ABORTED && root < 0)
			root = r;
		if (echo < 0)
			echo = r;
	}
	if (root < 0)
		root = echo;
	if (barrier_is_aborted(p->barrier))
		barrier_reset(p->barrier);
	if (root < 0)
		return ERR_OK;
	struct err *re = &p->slot[root].err;
	char own[32];
	int len = snprintf(own, sizeof own, "rank %d", root);
	if (strncmp(re->msg, own, (size_t)len) == 0 &&
	    (re->msg[len] == ':' || re->msg[len] == ' ')) /* already names its rank */
		return ERR(e, re->code, "%s", re->msg);
	return ERR(e, re->code, "rank %d: %s", root, re->msg);
}
