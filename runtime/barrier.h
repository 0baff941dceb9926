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

#include "err.h"

struct barrier; /* opaque */

/* A barrier for `parties` ranks; timeout_s <= 0 waits forever. */
int barrier_create(int parties, double timeout_s, struct barrier **out, struct err *e);
void barrier_destroy(struct barrier *b); /* NULL: nothing */
/* Waits for all parties; ERR_ABORTED if aborted (before or during), ERR_DEVICE on
 * timeout (and then aborts the barrier itself so that the others leave too). */
int barrier_wait(struct barrier *b, int rank, struct err *e);
/* Marks the barrier aborted by `rank` and wakes every waiter. Idempotent. */
void barrier_abort(struct barrier *b, int rank);
int barrier_is_aborted(struct barrier *b);
/* The first rank that aborted the barrier (or timed out in it); -1 if none. */
int barrier_abort_rank(struct barrier *b);
/* Seconds a wait gives up after (<= 0: forever). */
double barrier_timeout(const struct barrier *b);
/* Re-arms an aborted barrier (only while no thread waits on it). */
void barrier_reset(struct barrier *b);
/* Tests: another timeout, or another number of spin iterations before a waiter sleeps
 * (only while no thread waits on it). */
void barrier_set_timeout(struct barrier *b, double timeout_s);
void barrier_set_spin(struct barrier *b, int spin);

#endif
