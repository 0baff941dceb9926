/*
 * barrier: the window barrier shared by the device threads of one process.
 *
 * A reusable (generation-counted) barrier with an abort flag: a rank that fails calls
 * barrier_abort() and every rank waiting now or later returns ERR_ABORTED instead of
 * waiting for a peer that will never come. A wait also gives up after a timeout (a
 * lost rank is an error, not a hang). A waiter first spins briefly on the generation
 * counter (a window step meets its peers several times, usually within microseconds)
 * before sleeping on the condition variable. Used for accumulation windows, the host
 * collective and checkpoint snapshots.
 */
#ifndef DDPTOK_BARRIER_H
#define DDPTOK_BARRIER_H

#include <pthread.h>
#include <stdatomic.h>

#include "err.h"

struct barrier {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int parties;
	int waiting;
	atomic_ulong generation;
	atomic_int aborted;      /* non-zero once any rank aborted */
	int abort_rank;          /* first rank that aborted, -1 if none */
	double timeout_s;        /* <= 0: wait forever */
	int spin;                /* spin iterations before sleeping (0 when the parties
				    outnumber the cores: spinning would steal their time) */
};

int barrier_init(struct barrier *b, int parties, double timeout_s, struct err *e);
void barrier_destroy(struct barrier *b);
/* Waits for all parties; ERR_ABORTED if aborted (before or during), ERR_DEVICE on
 * timeout (and then aborts the barrier itself so that the others leave too). */
int barrier_wait(struct barrier *b, int rank, struct err *e);
/* Marks the barrier aborted by `rank` and wakes every waiter. Idempotent. */
void barrier_abort(struct barrier *b, int rank);
int barrier_is_aborted(struct barrier *b);
/* Re-arms an aborted barrier (only while no thread waits on it). */
void barrier_reset(struct barrier *b);

#endif
