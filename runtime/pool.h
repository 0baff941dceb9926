/*
 * pool: the device pool, one pthread per device, created once.
 *
 * The caller hands the pool a function; pool_run() makes every device thread call it
 * with its rank and waits for all of them. The pool never knows the model: per-device
 * state lives behind the `ctx` pointers the caller registers. A rank that returns an
 * error aborts the shared barrier (and collective) so that its peers return instead of
 * waiting; pool_run() then reports the root cause (the first failing rank, not the
 * ERR_ABORTED echoes of the others), prefixed with its rank.
 *
 * A watchdog bounds every run by the barrier timeout (devices.timeout): a rank is late
 * when it did not arrive while a peer waited at the barrier for the whole timeout, or
 * when it spent longer than the timeout in one operation it marked with pool_mark() (not
 * pool_mark_wait(): a wait for the peers). A
 * rank stuck where nothing can interrupt it (a BLAS or CUDA call) would otherwise hang
 * the process: pool_run() aborts the others, gives them a moment to leave, names the
 * late ranks with the operation each was last in, and returns ERR_DEVICE without
 * waiting for the late threads. Those are left running ("abandoned"): their pool, ctx
 * and argument memory must then stay allocated, the pool refuses further runs, and the
 * process is expected to exit (pool_abandoned_threads() tells main() so). An abandoned
 * thread that comes back parks for good at its next pool_mark() or at the end of its
 * function, so it cannot touch what the caller frees afterwards.
 */
#ifndef DDPTOK_POOL_H
#define DDPTOK_POOL_H

#include <pthread.h>

#include "barrier.h"
#include "err.h"
#include "ranks.h"


/* After an abort, how long the ranks that are not late get to leave before the pool
 * gives up on them too (they leave at their next barrier wait or pool_mark()). */
#define POOL_GRACE_S 1.0
/* How often the waiting caller looks at the ranks (the watchdog's resolution). */
#define POOL_TICK_S 0.1

struct coll;

typedef int (*pool_fn)(int rank, void *ctx, void *arg, struct err *e);

struct pool;

/* Starts `world` threads (1..MAX_WORLD). barrier_timeout_s <= 0 waits forever (and
 * turns the watchdog off). */
int pool_create(int world, double barrier_timeout_s, struct pool **out, struct err *e);
/* Joins the threads and frees the pool; a pool with abandoned threads is only told to
 * quit and is not freed (its late threads may still use it). */
void pool_destroy(struct pool *p);
int pool_world(const struct pool *p);
struct barrier *pool_barrier(struct pool *p);
/* The global rank of the pool's thread 0 when the run has several processes: the
 * messages of the pool and of its barrier then name global ranks (default 0). */
void pool_set_first_rank(struct pool *p, int first_rank);
/* Optional collective aborted alongside the barrier when a rank fails. */
void pool_set_coll(struct pool *p, struct coll *c);
/* Per-rank context handed to fn (e.g. the rank's replica). */
void pool_set_ctx(struct pool *p, int rank, void *ctx);
/* Runs fn(rank, ctx[rank], arg) on every device thread and waits (see the watchdog
 * above). Re-arms the barrier afterwards so that the pool stays usable after a failed
 * run, unless a thread was abandoned: then this and every later run fail (ERR_DEVICE). */
int pool_run(struct pool *p, pool_fn fn, void *arg, struct err *e);
/* Called by rank's thread inside fn when it starts operation `op` (a string that lives
 * for the program, such as a literal), with `index` > 0 appended to it in reports
 * ("microbatch", 2: "microbatch 2"). Returns ERR_ABORTED once the run is aborted, so
 * that a rank busy computing leaves at its next mark instead of its next barrier. */
int pool_mark(struct pool *p, int rank, const char *op, int index, struct err *e);
/* Like pool_mark, for an operation in which the rank waits for its peers (a collective
 * whose waits are not the pool's barrier, such as NCCL's): it never makes the rank late
 * however long it lasts, since the peers it waits for are the late ones (and the wait has
 * its own timeout). */
int pool_mark_wait(struct pool *p, int rank, const char *op, struct err *e);
/* ERR_OK, or the ERR_DEVICE that pool_run() gives once a thread was abandoned: then the
 * memory of the runs (fn's argument) may still be in use and must not be rewritten. */
int pool_usable(const struct pool *p, struct err *e);
/* Threads of this pool that were abandoned. */
int pool_abandoned(const struct pool *p);
/* Threads abandoned by every pool of the process: non-zero means some are still running
 * the caller's code, and the process should end with _exit() instead of exit(), whose
 * clean-up (library destructors, atexit handlers) would run beneath them. */
int pool_abandoned_threads(void);

#endif
