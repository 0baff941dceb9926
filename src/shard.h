/*
 * shard: exact mode's window, one list of sequences cut into K shards, whatever W.
 *
 * With [train] shards = K > 0 the sampler no longer draws per rank: each window it draws
 * K x batch_size training sequences without replacement from ONE pool (every training
 * sequence, ascending ids) with its own generator, so the window depends on the seed and
 * the window index only, not on the number of devices. The list is then cut into K
 * shards of batch_size sequences by a rule that does not look at W either
 * ([train] shard_order):
 *   length    sorted by supervised tokens, shortest first (ties: lower id first), shard s
 *             = the s-th run of batch_size; the ranks holding the first shards get the
 *             short sequences, as the length-band plan does (its imbalance, kept);
 *   balanced  largest supervised count first (ties: higher id first) to the shard with
 *             the fewest supervised tokens that has room left (ties: the lowest shard),
 *             so the shards' token counts are as even as the sequences allow.
 * Placement: rank r of W takes shards r*K/W .. (r+1)*K/W - 1, in order, as its K/W
 * microbatches; the window's rank-major layout is the shard order, so shard s is
 * w->mb[s / micro][s % micro]. The sampler state (generator, window index) means the same
 * at every W, which is what lets a checkpoint resume on another device count.
 */
#ifndef DDPTOK_SHARD_H
#define DDPTOK_SHARD_H

#include "sampler.h"

#define SHARD_MAX 64 /* [train] shards: at most 64 */

/* Exact mode's part of sampler_init (s->shards > 0): the one pool and its generator.
 * ERR_CONFIG when the training split holds fewer than shards x batch_size sequences. */
int shard_sampler_init(struct sampler *sp, const struct corpus *c, const struct settings *s,
		       struct err *e);
/* Exact mode's part of sampler_next: draws the list, cuts it, lays it out in w. */
int shard_sampler_next(struct sampler *sp, struct window *w, struct err *e);

/* Shard s of window w (exact mode). */
static inline const struct microbatch *shard_of(const struct window *w, int s)
{
	return &w->mb[s / w->micro][s % w->micro];
}

#endif
