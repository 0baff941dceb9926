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
 * The sampler state is its prng state plus the window index: a checkpoint stores it and a
 * restored sampler continues exactly where it stopped (no replay from the start).
 */
#ifndef DDPTOK_SAMPLER_H
#define DDPTOK_SAMPLER_H

#include <stdint.h>

#include "corpus.h"
#include "err.h"
#include "prng.h"
#include "settings.h"
#include "ranks.h"

#define WINDOW_MAX_MICRO 64

struct microbatch {
	int n;            /* sequences in this microbatch */
	const int *ids;   /* points into window.storage */
	int64_t tokens;   /* supervised positions */
	int64_t sequences; /* sequences with at least one supervised position */
};

struct window {
	int64_t index;    /* 0-based window number in the run */
	int world, micro;
	int batch;        /* most sequences one microbatch may hold */
	struct microbatch mb[MAX_WORLD][WINDOW_MAX_MICRO];
	int64_t rank_tokens[MAX_WORLD];
	int64_t N;        /* sum of rank_tokens */
	int64_t rank_sequences[MAX_WORLD]; /* sequences holding a supervised token */
	int64_t S;        /* sum of rank_sequences */
	int n_ids;
	int *storage;     /* all ids of the window, rank-major then microbatch (packed) */
};

/* The window's number as messages, metrics and reports give it: counted from 1 (the
 * index counts from 0). */
static inline long long window_number(const struct window *w)
{
	return (long long)w->index + 1;
}

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
	int shards, shard_order;  /* exact mode (shard.h): shards > 0 */
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

/* Uses s->world, s->accumulation, s->batch_size, s->rank_split, s->seed and s->max_len (if
 * s->max_len <= 0, the longest training sequence); with s->shards > 0, exact mode's
 * sampler instead (shard.h). ERR_CONFIG when a pool holds fewer sequences than a window
 * draws from it. sp keeps a pointer to c. */
int sampler_init(struct sampler *sp, const struct corpus *c, const struct settings *s,
		 struct err *e);
void sampler_free(struct sampler *sp);
/* Draws the next window and splits it into w (allocated by window_init). */
int sampler_next(struct sampler *sp, struct window *w, struct err *e);
void sampler_get_state(const struct sampler *sp, struct sampler_state *st);
void sampler_set_state(struct sampler *sp, const struct sampler_state *st);

/* Index of the least loaded bin among n that still has room (fill < room; ties: lowest
 * index), -1 when none has: the greedy step of the balanced splits. */
int plan_least_loaded(const int64_t *load, const int *fill, int n, int room);

int window_init(struct window *w, int world, int micro, int batch, struct err *e);
void window_free(struct window *w);
/* Assigns explicit sequence ids (rank-major: ids[r][m][k]) to w and counts tokens.
 * counts[r * w->micro + m] (0..w->batch) ids for microbatch m of rank r, taken in order
 * from the packed list ids. */
int window_assign(struct window *w, const struct corpus *c, const int *ids, const int *counts,
		  struct err *e);
/* Re-splits the window's sequences with the given rank split (same sequences).
 * RANK_SPLIT_BALANCED: n ids -> at most ceil(n / world) per rank, then at most
 * ceil(k_r / micro) per microbatch, greedily as described above. RANK_SPLIT_LENGTH_BANDS: a
 * window holds no band information, so the assignment is kept as it is and only the
 * token counts are recomputed. */
int window_resplit(struct window *w, const struct corpus *c, int rank_split, struct err *e);

#endif
