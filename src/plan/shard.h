/*
 * shard: exact mode's window, one list of sequences cut into K shards, whatever W.
 *
 * With [train] shards = K > 0 the sampler no longer draws per rank: each window it draws
 * K x batch_size training sequences without replacement from ONE pool (every training
 * sequence, ascending ids) with its own generator, or with [train] sampling = epochs takes
 * the next K x batch_size of the epochs (epoch.h), so the window depends on the seed and
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

#include "corpus.h"
#include "err.h"
#include "prng.h"
#include "settings.h"
#include "window.h"

#define SHARD_MAX 64 /* [train] shards: at most 64 */

/* Exact mode's part of the sampler (sampler.h holds one): the one pool and the scratch a
 * window is drawn and cut in, so that a window never allocates. */
struct shard_pool {
	const struct corpus *corpus;
	int shards, batch; /* K shards of batch sequences each; shards = 0: not exact mode */
	int order;         /* enum shard_order */
	int *ids, n;       /* every training id, ascending */
	int *scratch;      /* a copy of ids, the drawn list, its sorted copy, each one's shard */
};

/* The pool of c's training split for settings s (s->shards > 0), and the sampler's
 * generator rng seeded with exact mode's own stream. ERR_CONFIG when the shards do not
 * fit the world or the training split holds fewer than shards x batch_size sequences;
 * nothing to free then. */
int shard_pool_init(struct shard_pool *p, struct prng *rng, const struct corpus *c,
		    const struct settings *s, struct err *e);
void shard_pool_free(struct shard_pool *p);
/* Draws the next window's list from rng and cuts it (shard_cut); w->index is the
 * caller's. */
int shard_draw(struct shard_pool *p, struct prng *rng, struct window *w, struct err *e);
/* Cuts `list` (shards x batch_size training ids, drawn by the caller: shard_draw, or the
 * epochs of epoch.h) into the shards and lays them out in w (shard s is microbatch
 * s % micro of rank s / micro). */
int shard_cut(struct shard_pool *p, const int *list, struct window *w, struct err *e);
/* ERR_CHECK unless w has one slot per shard (world x micro) of at least p's batch: what
 * shard_draw and shard_cut check before anything is drawn or taken. */
int shard_fits(const struct shard_pool *p, const struct window *w, struct err *e);

/* Shard s of window w (exact mode). */
static inline const struct microbatch *shard_of(const struct window *w, int s)
{
	return &w->mb[s / w->micro][s % w->micro];
}

#endif
