/*
 * sampler: the sampler and the host-side split of a window into mb[rank][microbatch].
 *
 * The sampler generalizes a two-rank length-band plan to W ranks. The plan decides both
 * what a window draws and who computes what:
 *   length_bands  the training sequences are divided into W length bands (band r holds
 *                 lengths in (max_len*r/W, max_len*(r+1)/W]; W = 2 gives <= 64 and > 64
 *                 for max_len 128); each window draws accumulation x batch_size ids
 *                 without replacement from every band, and rank r takes band r's draw, in
 *                 draw order, batch_size per microbatch. Every band must hold a window's
 *                 share, which data of one length (fixed-length chunks) cannot give;
 *   balanced      each window draws W x accumulation x batch_size ids without replacement
 *                 from all training sequences; they go to ranks (then microbatches)
 *                 greedily, largest supervised count first, to the least loaded rank with
 *                 room left, so the supervised tokens per rank are as even as the
 *                 sequences allow. Any length distribution trains on any W.
 * How the draws follow each other ([train] sampling):
 *   independent   each window draws anew, without replacement within the window only, so
 *                 a sequence may come back before another was seen at all;
 *   epochs        (the balanced plan or exact mode) the window's ids are the next ones of
 *                 the epochs of epoch.h: every training sequence once per epoch.
 * The sampler state is its prng state (with epochs: the current epoch's starting
 * generator) plus the window index: a checkpoint stores it and a restored sampler continues
 * exactly where it stopped (no replay from the start), mid-epoch included.
 */
#ifndef DDPTOK_SAMPLER_H
#define DDPTOK_SAMPLER_H

#include <stdint.h>

#include "corpus.h"
#include "epoch.h"
#include "err.h"
#include "prng.h"
#include "ranks.h"
#include "settings.h"
#include "shard.h"
#include "window.h"

struct sampler_state {
	uint64_t rng[4];
	int64_t window_index;
};

struct sampler {
	struct prng rng;
	int64_t window_index;
	int world, micro, batch;
	int rank_split; /* enum rank_split */
	/* pools the window is drawn from: the W length bands of the length-band plan, or one
	 * pool of every training sequence (any other plan) */
	int bands;
	int per_pool;   /* sequences drawn from each pool per window */
	int64_t micro_tokens; /* token batching's budget (window_pack_tokens); 0: by sequences */
	struct shard_pool exact;  /* exact mode (shard.h): exact.shards > 0 */
	struct epoch_stream epochs; /* train.sampling = epochs (epoch.h): epochs.n > 0 */
	int *pool[MAX_WORLD];
	int pool_n[MAX_WORLD];
	int *scratch;
	const struct corpus *corpus;
};

/* Length band r of W for sequences up to max_len: lengths in (*lo, *hi]. Band 0 also takes
 * every length <= *hi, band W-1 every length > *lo. */
void sampler_band_bounds(int max_len, int world, int r, int *lo, int *hi);
/* The band (0..world-1) a sequence of length len falls into. */
int sampler_band_of(int len, int max_len, int world);

/* Uses s->world, s->accumulation, s->batch_size, s->rank_split, s->sampling, s->seed and
 * s->max_len (if s->max_len <= 0, the longest training sequence); with s->shards > 0,
 * exact mode's sampler instead (shard.h). ERR_CONFIG when a pool holds fewer sequences
 * than a window draws from it, or epochs with the length-band plan. sp keeps a pointer
 * to c. */
int sampler_init(struct sampler *sp, const struct corpus *c, const struct settings *s,
		 struct err *e);
void sampler_free(struct sampler *sp);
/* Draws the next window and splits it into w (allocated by window_init); with
 * train.batching = tokens each rank's share (the same draw) is then re-cut by
 * window_pack_tokens. */
int sampler_next(struct sampler *sp, struct window *w, struct err *e);
void sampler_get_state(const struct sampler *sp, struct sampler_state *st);
void sampler_set_state(struct sampler *sp, const struct sampler_state *st);

#endif
