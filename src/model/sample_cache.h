/*
 * sample_cache: the GPT's forward one position at a time with a cache of keys and values,
 * so that generating a token costs the same whatever came before it (up to model.context).
 *
 * The rows are those training lays out for one document (gpt_batch.h): row 0's input is
 * DATA_BOS, row t's the document's token t - 1, at position t. sample_cache_push runs one
 * row: its embedding, then per layer the LayerNorm, the q, k, v of the row (k and v kept in
 * the cache), the attention of its q over the cached keys of rows 0..t, the projections and
 * the MLP, each a one-row product through the device interface; then the final LayerNorm
 * and the row's logits. The arithmetic is the training forward's (gpt_step.c) row by row:
 * the same element functions (kmath.h), the same order within a row; only the BLAS
 * products are one row tall instead of t + 1, and BLAS may sum a dot product in another
 * order for another shape, so the logits agree with the uncached forward to rounding, not
 * bit for bit (sample_test's tolerance).
 */
#ifndef DDPTOK_SAMPLE_CACHE_H
#define DDPTOK_SAMPLE_CACHE_H

#include <stdint.h>

#include "dev.h"
#include "model_shape.h"

struct sample_cache {
	struct dev *dev;
	const struct model_shape *m;
	const float *params;
	int rows;           /* rows in the cache, at most GPT_T(m) */
	float *arena;       /* the allocation of every buffer below */
	float *qkv;         /* L x T x 3C: each layer's q, k, v of every row so far */
	float *x, *mid, *ln, *att, *big, *sc; /* one row's: C, C, C, C, 4C (twice), T */
	float *mean, *rstd; /* the LayerNorm's statistics of the row */
	float *logits;      /* V: the last row's */
};

/* A cache for m's parameters (host memory) on the CPU device d. */
int sample_cache_open(struct sample_cache *c, struct dev *d, const struct model_shape *m,
		      const float *params, struct err *e);
void sample_cache_close(struct sample_cache *c);
/* Empties the cache: the next row pushed is row 0 (a new window, from position 0). */
void sample_cache_reset(struct sample_cache *c);
/* Runs the next row, of input id `input` (DATA_BOS for row 0); c->logits are then its
 * logits. ERR_CONFIG when the cache already holds model.context rows. */
int sample_cache_push(struct sample_cache *c, int32_t input, struct err *e);
/* Fills the cache with the first `rows` rows of the training forward that ws (a gpt's
 * workspace, gpt_ws.h) just ran over a batch of `rows` rows: each layer's q, k and v of
 * them, so that a window is run whole once (one product of `rows` rows per matrix, as
 * fast as BLAS goes) and then continued row by row. c->logits are the caller's. */
void sample_cache_adopt(struct sample_cache *c, const struct model_ws *ws, int rows);

#endif
