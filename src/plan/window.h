/*
 * window: the sequences of one accumulation window and their split into
 * mb[rank][microbatch], as the sampler draws them (sampler.h, shard.h) and the engine runs
 * them. Each microbatch carries its counts of supervised tokens and sequences, each rank
 * its sums, and the window the global N and S the normalization divides by.
 */
#ifndef DDPTOK_WINDOW_H
#define DDPTOK_WINDOW_H

#include <stdint.h>

#include "corpus.h"
#include "err.h"
#include "ranks.h"
#include "settings.h"

#define WINDOW_MAX_MICRO SETTINGS_MAX_MICRO

struct microbatch {
	int n;            /* sequences in this microbatch */
	const int *ids;   /* points into window.storage */
	int64_t tokens;   /* supervised positions */
	int64_t sequences; /* sequences with at least one supervised position */
	double weight;    /* train.class_weights: the sum of its targets' weights (else 0) */
};

struct window {
	int64_t index;    /* 0-based window number in the run */
	int world;
	int micro;        /* microbatch slots of every rank: the accumulation, or after
			     window_pack_tokens the most microbatches a rank runs (a rank
			     with fewer has empty slots after its own) */
	int batch;        /* most sequences one microbatch may hold */
	int packed_from;  /* window_pack_tokens: the micro it replaced (0: not packed), which
			     the next window_assign lays out again */
	struct microbatch mb[MAX_WORLD][WINDOW_MAX_MICRO];
	int rank_micro[MAX_WORLD]; /* M_r: the microbatches rank r runs, mb[r][0, M_r): micro
				      for a window cut by sequences (empty ones included) */
	size_t cap;       /* ids the storage holds (world x micro x batch at window_init) */
	int64_t rank_tokens[MAX_WORLD];
	int64_t N;        /* sum of rank_tokens */
	int64_t rank_sequences[MAX_WORLD]; /* sequences holding a supervised token */
	int64_t S;        /* sum of rank_sequences */
	/* train.class_weights (weighted = 1): each rank's sum of its targets' weights, each
	 * the sum of its microbatches', and W the sum of those in rank order (every rank and
	 * the reference compute the same double from the same window) */
	int weighted;
	double rank_weight[MAX_WORLD];
	double W;
	int n_ids;
	int *storage;     /* all ids of the window, rank-major then microbatch (packed) */
};

/* The window's number as messages, metrics and reports give it: counted from 1 (the
 * index counts from 0). */
static inline long long window_number(const struct window *w)
{
	return (long long)w->index + 1;
}

/* Index of the least loaded bin among n that still has room (fill < room; ties: lowest
 * index), -1 when none has: the greedy step of the balanced splits. */
int window_least_loaded(const int64_t *load, const int *fill, int n, int room);

int window_init(struct window *w, int world, int micro, int batch, struct err *e);
void window_free(struct window *w);
/* The microbatch slots per rank a window is drawn and assigned with: micro, or for a
 * token-packed window the micro it had before packing. */
int window_draw_micro(const struct window *w);
/* Assigns explicit sequence ids (rank-major: ids[r][m][k]) to w and counts tokens.
 * counts[r * w->micro + m] (0..w->batch) ids for microbatch m of rank r, taken in order
 * from the packed list ids. */
int window_assign(struct window *w, const struct corpus *c, const int *ids, const int *counts,
		  struct err *e);
/* Re-splits the window's sequences with the given rank split (same sequences).
 * RANK_SPLIT_BALANCED: n ids -> at most ceil(n / world) per rank, then at most
 * ceil(k_r / micro) per microbatch, greedily: largest supervised count first, to the least
 * loaded rank (then microbatch) with room left. RANK_SPLIT_LENGTH_BANDS: a window holds
 * no band information, so the assignment is kept as it is and only the token counts are
 * recomputed. */
int window_resplit(struct window *w, const struct corpus *c, int rank_split, struct err *e);
/* Token batching: re-cuts each rank's sequences (the same ones) into microbatches of at
 * most `budget` supervised positions and w->batch sequences, longest sequences first
 * (similar lengths together: less padding in the padded layout), each filled until the
 * next would not fit; a sequence holding more than `budget` gets a microbatch of its own.
 * Sets rank_micro[] (0 for a rank without sequences) and micro to their largest (at
 * least 1); ERR_CONFIG when a rank would need more than WINDOW_MAX_MICRO. */
int window_pack_tokens(struct window *w, const struct corpus *c, int64_t budget,
		       struct err *e);
/* dst = a window of src's shape holding the same microbatches (counts recomputed from c:
 * the same numbers), for a copy that outlives the run it was drawn in. */
int window_copy(struct window *dst, const struct window *src, const struct corpus *c,
		struct err *e);

#endif
