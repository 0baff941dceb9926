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

#include <stddef.h>

#include "err.h"

struct barrier; /* opaque */

/* A barrier for `parties` ranks; timeout_s <= 0 waits forever. */
int barrier_create(int parties, double timeout_s, struct barrier **out, struct err *e);
void barrier_destroy(struct barrier *b); /* NULL: nothing */
/* Waits for all parties; ERR_ABORTED if aborted (before or during), ERR_DEVICE on
 * timeout, naming the ranks that did not arrive (and then aborts the barrier itself so
 * that the others leave too). Ranks are 0..parties-1, at most 32. */
int barrier_wait(struct barrier *b, int rank, struct err *e);
/* Marks the barrier aborted by `rank` and wakes every waiter. Idempotent. */
void barrier_abort(struct barrier *b, int rank);
int barrier_is_aborted(struct barrier *b);
/* ERR_ABORTED (with the message a released waiter gets) once the barrier is aborted,
 * else ERR_OK: lets a rank leave between two waits. */
int barrier_check(struct barrier *b, int rank, struct err *e);
/* Who is where, for a watchdog, all taken at one moment: the ranks waiting now (bit r),
 * the ranks that were absent when a wait last timed out (0 if none), when every party
 * last met (clock_now_s(); each rank was at the barrier then); returns whether the
 * barrier is aborted (then ranks have left it without meeting). */
int barrier_arrivals(struct barrier *b, unsigned *present, unsigned *missing, double *met_at);
/* Writes the ranks of `mask` (bit r: rank first + r) as "1, 3" into out; returns how
 * many there are. */
int barrier_rank_list(unsigned mask, int first, char *out, size_t outlen);
/* The first rank that aborted the barrier (or timed out in it); -1 if none. */
int barrier_abort_rank(struct barrier *b);
/* Seconds a wait gives up after (<= 0: forever). */
double barrier_timeout(const struct barrier *b);
/* Re-arms an aborted barrier (only while no thread waits on it). */
void barrier_reset(struct barrier *b);
/* The global rank of party 0 (several processes; 0 by default): messages name the ranks
 * first + r, the API keeps the parties' own 0..parties-1. */
void barrier_set_first_rank(struct barrier *b, int first);
/* Tests: another timeout, or another number of spin iterations before a waiter sleeps
 * (only while no thread waits on it). */
void barrier_set_timeout(struct barrier *b, double timeout_s);
void barrier_set_spin(struct barrier *b, int spin);

#endif
