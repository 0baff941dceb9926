/*
 * coll: collectives with the semantics of NCCL's allreduce, in place.
 *
 * Every rank calls the same collectives in the same order (the caller's contract; the
 * window logic guarantees it by deciding from global counts only). Two implementations:
 * the host one here (CPU backend, or CUDA ranks sharing a GPU: `collective = host`), and
 * NCCL in gpu/. The host reduction is deterministic: element i is always summed in rank
 * order 0..W-1, so every rank receives identical bits, run after run.
 *
 * Exact mode needs more than determinism: the same bits whatever W. Its collective,
 * allreduce_tree, adds in one fixed pairwise tree over the ranks (coll_tree_levels below),
 * which is the upper part of the tree exact mode builds over its shards: a rank's
 * contribution is the root of its aligned subtree, so W = 1, 2, 4, 8 add the same numbers
 * in the same order.
 *
 * COLL_AVG means the same in both: the sum, then each element divided by W (for floats a
 * correctly rounded division, not a product with the rounded 1/W, which differs when W
 * is not a power of two; int64 divides as C does).
 */
#ifndef DDPTOK_COLL_H
#define DDPTOK_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "barrier.h"
#include "dev.h"
#include "err.h"
#include "ranks.h"

/* The most ranks a collective adds (all processes together). */
#define COLL_MAX_RANKS 64

enum coll_dtype { COLL_F32 = 0, COLL_F64 = 1, COLL_I64 = 2 };
enum coll_op { COLL_SUM = 0, COLL_AVG = 1 };

struct coll;

struct coll_ops {
	const char *name; /* "host" or "nccl" */
	/* In-place allreduce of buf[0..count) on every rank. `buf` is in the memory space of
	 * the rank's device (`dev`), or host memory when `host_buf` is non-zero. Peers may
	 * write into a rank's buffer until they leave the call, so after a failed call (a
	 * peer stalled past the timeout may still be writing) the buffer must stay
	 * allocated, as pool.h asks of the memory a left-behind rank may touch: no stack
	 * buffer, no release on the error path. */
	int (*allreduce)(struct coll *c, int rank, struct dev *dev, void *buf, size_t count,
			 enum coll_dtype type, enum coll_op op, int host_buf, struct err *e);
	/* Exact mode's allreduce, a sum (COLL_F32 or COLL_F64) in the pairwise tree over
	 * ranks: level 1 adds (rank 0 + rank 1), (2 + 3), ...; level 2 adds those pairs; up
	 * to the root, which every rank receives (the same bits on every rank). The world
	 * must be a power of two (ERR_CONFIG otherwise). */
	int (*allreduce_tree)(struct coll *c, int rank, struct dev *dev, void *buf, size_t count,
			      enum coll_dtype type, int host_buf, struct err *e);
	/* ZeRO's halves of an allreduce, for float32 device vectors of `count` elements cut
	 * into the ranks' slices by coll_shard_range (every process's ranks, by global
	 * rank). reduce_scatter: rank r's slice of buf receives, in place, what allreduce
	 * (tree = 0: sum or avg) or allreduce_tree (tree = 1) gives those elements, added in
	 * the same order, so the same bits (the host's orders, NCCL's tree; a plain NCCL sum
	 * is ncclReduceScatter's order); the rest of buf holds partial values. all_gather:
	 * every rank's slice of its buf lands in every rank's buf, in place. The buffers stay
	 * allocated after a failed call, as for allreduce. */
	int (*reduce_scatter)(struct coll *c, int rank, struct dev *dev, float *buf, size_t count,
			      enum coll_op op, int tree, struct err *e);
	int (*all_gather)(struct coll *c, int rank, struct dev *dev, float *buf, size_t count,
			  struct err *e);
	/* Called by any rank that fails: releases all peers (abort communicators/barrier). */
	void (*abort)(struct coll *c, int rank);
	void (*destroy)(struct coll *c);
};

struct coll {
	const struct coll_ops *ops;
	int world;
	struct barrier *barrier; /* the pool's barrier, shared */
	void *impl;
	double seconds[MAX_WORLD];       /* per-rank time inside allreduce (statistics) */
};

/* Host collective over `world` ranks synchronized by `barrier` (not owned). Device
 * buffers are staged through host memory with the device's download/upload. */
int coll_host_create(int world, struct barrier *barrier, size_t max_count, struct coll **out,
		     struct err *e);
/* Makes the host collective c (over its c->world local ranks) one over `procs` processes
 * of c->world ranks each, this one being `proc` (global rank = proc * c->world + local
 * rank). Each exchange then gathers every rank's contribution from every process
 * (world_allgather, waiting at most timeout_s) and adds them in global rank order, or in
 * the tree: the bits of one process with all the ranks, independent of the order MPI
 * reduces in (it only moves bytes). */
int coll_host_span_processes(struct coll *c, int procs, int proc, double timeout_s,
			     struct err *e);
void coll_destroy(struct coll *c);
/* log2(world) when world is a power of two (1 -> 0), else -1: the number of levels of
 * the pairwise tree over `world` leaves. */
int coll_tree_levels(int world);
/* out[i] = the pairwise tree over src[0..world)[i] for lo <= i < hi (world a power of
 * two, at most MAX_WORLD; COLL_F32 or COLL_F64): the rule of allreduce_tree, for its
 * implementations. */
void coll_tree_add(const void *const *src, int world, enum coll_dtype type, size_t lo,
		   size_t hi, void *out);
const char *coll_op_name(enum coll_op op);
/* Rank `rank`'s slice [*lo, *hi) of a vector of `count` elements cut for `world` ranks:
 * ceil(count / world) elements each, in rank order (as ncclReduceScatter cuts), the last
 * slices shorter or empty. The one rule of reduce_scatter, all_gather and the optimizer
 * state they shard. */
void coll_shard_range(size_t count, int world, int rank, size_t *lo, size_t *hi);

#endif
