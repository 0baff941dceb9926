/*
 * engine_tree: exact mode's part of the window step (the engine's, not a public API).
 *
 * With [train] shards = K, every shard's gradient and loss sum are computed into a buffer
 * of their own, scaled by the same factor at every W, and the K results are added in one
 * fixed pairwise tree: level 1 adds shards (0,1), (2,3), ...; level 2 adds those pairs;
 * up to the root. A rank's shards are an aligned subtree, which it adds locally as the
 * shards come (a stack of log2(K/W) buffers besides its gradient: push a shard, add the
 * top two while they are the same level); the collective's tree allreduce adds the upper
 * levels over the ranks in the same order. With devices.reduce = avg the root is then
 * multiplied by 1/K (a power of two: exact), at every W alike. W = 1 runs the whole tree
 * on one device, which is what engine_reference does in exact mode: the single-device
 * reference is then the W-device result bit for bit.
 */
#ifndef DDPTOK_ENGINE_TREE_H
#define DDPTOK_ENGINE_TREE_H

#include "engine_replica.h"

/* The subtree buffers of replica r: log2(K/W) of them, log2(K) on rank 0 (which also
 * computes the single-device reference). Nothing outside exact mode. */
int tree_replica_alloc(struct engine *eng, struct replica *r, struct err *e);
void tree_replica_release(struct replica *r);

/* Shards first .. first+count-1 of w (count a power of two) into r->grads and *loss: each
 * shard's gradient of factor * (its loss sum), added in the tree's order; the shards'
 * loss sums stay on the device (a slot each) until they are read back at the end and
 * added in the same tree. `mode` picks the
 * factor (norm_factor_k with k = K for avg, 1 for sum; rank tokens of `rank`). `swap`
 * (a testing aid) exchanges the second and third shard, which changes the tree. */
int tree_subtree(struct engine *eng, struct replica *r, const struct window *w, int rank,
		 int first, int count, int mode, int swap, double *loss, struct err *e);
/* The upper levels of the gradient: the tree allreduce of r->grads (in place, the same
 * bits on every rank), then the avg division by K. (The loss sums take the same tree in
 * the window's collective of counts and losses.) */
int tree_reduce(struct engine *eng, struct replica *r, struct err *e);
/* The avg division of a whole tree's root by K (nothing for sum). */
int tree_finish(struct engine *eng, struct replica *r, struct err *e);

#endif
