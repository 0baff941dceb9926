/*
 * pool: the device pool, one pthread per device, created once.
 *
 * The caller hands the pool a function; pool_run() makes every device thread call it
 * with its rank and waits for all of them. The pool never knows the model: per-device
 * state lives behind the `ctx` pointers the caller registers. A rank that returns an
 * error aborts the shared barrier (and collective) so that its peers return instead of
 * waiting; pool_run() then reports the root cause (the first failing rank, not the
 * ERR_ABORTED echoes of the others), prefixed with its rank.
 */
#ifndef DDPTOK_POOL_H
#define DDPTOK_POOL_H

#include <pthread.h>

#include "barrier.h"
#include "err.h"

#define POOL_MAX_WORLD 8

struct coll;

typedef int (*pool_fn)(int rank, void *ctx, void *arg, struct err *e);

struct pool;

/* Starts `world` threads (1..POOL_MAX_WORLD). barrier_timeout_s <= 0 waits forever. */
int pool_create(int world, double barrier_timeout_s, struct pool **out, struct err *e);
void pool_destroy(struct pool *p);
int pool_world(const struct pool *p);
struct barrier *pool_barrier(struct pool *p);
/* Optional collective aborted alongside the barrier when a rank fails. */
void pool_set_coll(struct pool *p, struct coll *c);
/* Per-rank context handed to fn (e.g. the rank's replica). */
void pool_set_ctx(struct pool *p, int rank, void *ctx);
/* Runs fn(rank, ctx[rank], arg) on every device thread and waits. Re-arms the barrier
 * afterwards so that the pool stays usable after a failed run. */
int pool_run(struct pool *p, pool_fn fn, void *arg, struct err *e);

#endif
