/*
 * barrier: generation-counted barrier with abort and timeout (see barrier.h).
 */
#include "barrier.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

/* iterations of the spin phase: 0.1-0.2 ms on current cores. Two ranks on cores of
 * unequal speed (a virtual machine's vCPUs differ by 5-12% and the difference moves
 * between them) reach a window's first collective a few tenths of a millisecond apart;
 * a waiter that has gone to sleep by then costs a wake-up (~0.1 ms on such a machine)
 * on the window's critical path at each exchange, so the spin covers that gap. */
#define BARRIER_SPIN 40000

struct barrier {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int parties;
	int waiting;
	atomic_ulong generation;
	atomic_int aborted;      /* non-zero once any rank aborted */
	int abort_rank;          /* first rank that aborted, -1 if none */
	int first;               /* the global rank of party 0, for messages */
	double timeout_s;        /* <= 0: wait forever */
	int spin;                /* spin iterations before sleeping (0 when the parties
				    outnumber the cores: spinning would steal their time) */
	unsigned present;        /* ranks waiting in the current generation (bit r) */
	unsigned missing;        /* ranks absent when a wait last timed out, 0 if none */
	double met_at;           /* clock_now_s() when every party last met */
};

static int barrier_init(struct barrier *b, int parties, double timeout_s, struct err *e)
{
	int rc;
	memset(b, 0, sizeof *b);
	if (parties < 1 || parties > 32) /* the ranks are bits of an unsigned */
		return ERR(e, ERR_DEVICE, "a barrier holds 1..32 ranks, not %d", parties);
	if ((rc = pthread_mutex_init(&b->mu, NULL)) != 0)
		return ERR(e, ERR_DEVICE, "pthread_mutex_init: %s", strerror(rc));
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	rc = pthread_cond_init(&b->cv, &attr);
	pthread_condattr_destroy(&attr);
	if (rc != 0) {
		pthread_mutex_destroy(&b->mu);
		return ERR(e, ERR_DEVICE, "pthread_cond_init: %s", strerror(rc));
	}
	b->parties = parties;
	b->timeout_s = timeout_s;
	b->abort_rank = -1;
	atomic_store(&b->aborted, 0);
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	b->spin = cores >= parties ? BARRIER_SPIN : 0;
	return ERR_OK;
}

int barrier_create(int parties, double timeout_s, struct barrier **out, struct err *e)
{
	struct barrier *b = calloc(1, sizeof *b);
	*out = NULL;
	if (!b)
		return ERR(e, ERR_NOMEM, "barrier: out of memory");
	int rc = barrier_init(b, parties, timeout_s, e);
	if (rc) {
		free(b);
		return rc;
	}
	*out = b;
	return ERR_OK;
}

void barrier_destroy(struct barrier *b)
{
	if (!b)
		return;
	pthread_cond_destroy(&b->cv);
	pthread_mutex_destroy(&b->mu);
	free(b);
}

int barrier_rank_list(unsigned mask, int first, char *out, size_t outlen)
{
	size_t len = 0;
	int n = 0;
	out[0] = '\0';
	for (int r = 0; r < 32; r++) {
		if (!(mask & (1u << r)))
			continue;
		int w = snprintf(out + len, outlen - len, "%s%d", n ? ", " : "", first + r);
		if (w < 0 || (size_t)w >= outlen - len)
			break;
		len += (size_t)w;
		n++;
	}
	return n;
}

static int aborted_error(struct barrier *b, int rank, struct err *e)
{
	return ERR(e, ERR_ABORTED, "rank %d released: rank %d failed", b->first + rank,
		   b->first + b->abort_rank);
}

/* The wait of `rank` timed out (mutex held): the barrier is aborted, and the ranks that
 * were not waiting are recorded and named, since they, not the waiter, are late. */
static int timed_out(struct barrier *b, int rank, struct err *e)
{
	unsigned all = b->parties == 32 ? ~0u : (1u << b->parties) - 1;
	char late[128];
	b->missing = all & ~b->present;
	b->waiting--;
	b->present &= ~(1u << rank);
	atomic_store(&b->aborted, 1);
	b->abort_rank = rank;
	pthread_cond_broadcast(&b->cv);
	int n = barrier_rank_list(b->missing, b->first, late, sizeof late);
	return ERR(e, ERR_DEVICE, "rank %d: barrier timed out after %g s waiting for %s %s "
		   "(devices.timeout)", b->first + rank, b->timeout_s, n == 1 ? "rank" : "ranks",
		   late);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

int barrier_wait(struct barrier *b, int rank, struct err *e)
{
	int rc = ERR_OK;
	pthread_mutex_lock(&b->mu);
	if (atomic_load(&b->aborted)) {
		rc = aborted_error(b, rank, e);
		goto out;
	}
	unsigned long gen = atomic_load(&b->generation);
	b->present |= 1u << rank;
	if (++b->waiting == b->parties) {
		b->waiting = 0;
		b->present = 0;
		b->met_at = clock_now_s();
		atomic_fetch_add(&b->generation, 1);
		pthread_cond_broadcast(&b->cv);
		goto out;
	}
	/* spin without the lock; the last arrival bumps the generation */
	pthread_mutex_unlock(&b->mu);
	for (int i = 0; i < b->spin; i++) {
		if (atomic_load_explicit(&b->generation, memory_order_acquire) != gen ||
		    atomic_load_explicit(&b->aborted, memory_order_relaxed))
			break;
		cpu_relax();
	}
	pthread_mutex_lock(&b->mu);
	struct timespec deadline;
	if (b->timeout_s > 0) {
		clock_gettime(CLOCK_MONOTONIC, &deadline);
		double whole = (double)(long)b->timeout_s;
		deadline.tv_sec += (time_t)whole;
		deadline.tv_nsec += (long)((b->timeout_s - whole) * 1e9);
		if (deadline.tv_nsec >= 1000000000L) {
			deadline.tv_sec++;
			deadline.tv_nsec -= 1000000000L;
		}
	}
	while (gen == b->generation && !atomic_load(&b->aborted)) {
		int w = b->timeout_s > 0 ? pthread_cond_timedwait(&b->cv, &b->mu, &deadline)
					 : pthread_cond_wait(&b->cv, &b->mu);
		if (w == ETIMEDOUT && gen == b->generation && !atomic_load(&b->aborted)) {
			rc = timed_out(b, rank, e);
			goto out;
		}
	}
	if (gen == b->generation) { /* woken by an abort */
		b->waiting--;
		b->present &= ~(1u << rank);
		rc = aborted_error(b, rank, e);
	}
out:
	pthread_mutex_unlock(&b->mu);
	return rc;
}

void barrier_abort(struct barrier *b, int rank)
{
	pthread_mutex_lock(&b->mu);
	if (!atomic_load(&b->aborted)) {
		b->abort_rank = rank;
		atomic_store(&b->aborted, 1);
	}
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
}

int barrier_is_aborted(struct barrier *b)
{
	return atomic_load(&b->aborted);
}

int barrier_check(struct barrier *b, int rank, struct err *e)
{
	if (!atomic_load(&b->aborted))
		return ERR_OK;
	pthread_mutex_lock(&b->mu);
	int rc = aborted_error(b, rank, e);
	pthread_mutex_unlock(&b->mu);
	return rc;
}

int barrier_arrivals(struct barrier *b, unsigned *present, unsigned *missing, double *met_at)
{
	pthread_mutex_lock(&b->mu);
	int aborted = atomic_load(&b->aborted);
	*present = b->present;
	*missing = b->missing;
	*met_at = b->met_at;
	pthread_mutex_unlock(&b->mu);
	return aborted;
}

void barrier_reset(struct barrier *b)
{
	pthread_mutex_lock(&b->mu);
	atomic_store(&b->aborted, 0);
	b->abort_rank = -1;
	b->waiting = 0;
	b->present = 0;
	b->missing = 0;
	atomic_fetch_add(&b->generation, 1);
	pthread_mutex_unlock(&b->mu);
}

int barrier_abort_rank(struct barrier *b)
{
	pthread_mutex_lock(&b->mu);
	int by = b->abort_rank;
	pthread_mutex_unlock(&b->mu);
	return by;
}

double barrier_timeout(const struct barrier *b)
{
	return b->timeout_s;
}

void barrier_set_first_rank(struct barrier *b, int first)
{
	b->first = first;
}

void barrier_set_timeout(struct barrier *b, double timeout_s)
{
	b->timeout_s = timeout_s;
}

void barrier_set_spin(struct barrier *b, int spin)
{
	b->spin = spin;
}
