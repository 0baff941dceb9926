/*
 * gpt_ws: the GPT's device workspace: the activations a microbatch's backward needs, per
 * layer, and the buffers of the backward, allocated once per device for a batch of up to
 * max_rows positions (docs/gpt.md lists them).
 *
 * The attention keeps no probabilities: its backward recomputes them one segment at a
 * time, for gpt_ws_heads_per_call() heads at once, so the only square buffers are the
 * two (scores and their gradient) of those heads, sized for the longest segment.
 */
#ifndef DDPTOK_GPT_WS_H
#define DDPTOK_GPT_WS_H

#include "model_shape.h"

struct gpt_ws {
	struct model_ws head;
	struct dev *dev;
	struct model_shape shape;
	int max_rows;
	int heads_per_call;       /* G: gpt_ws_heads_per_call(&shape, max_rows) */
	int32_t *ints;            /* the allocation of the three below */
	int32_t *input, *target, *pos;
	float *arena;             /* the allocation of every float buffer below */
	/* forward, kept for the backward; per layer l at l * (rows x width) */
	float *resid;             /* 2L + 1 residual streams: layer l's input at 2l, its
				     middle (after the attention) at 2l + 1, the last at 2L */
	float *ln1, *ln1_mean, *ln1_rstd;
	float *qkv;               /* rows x 3C per layer: q, k, v, each head hd wide */
	float *att;               /* the heads' outputs, rows x C per layer */
	float *ln2, *ln2_mean, *ln2_rstd;
	float *fch, *fcg;         /* rows x 4C per layer: before and after the GELU */
	float *lnf, *lnf_mean, *lnf_rstd;
	float *logits, *loss;
	float *zero_bias;         /* V zeros: the xent's bias (the LM head has none) */
	/* the backward's */
	float *dres;              /* rows x C: the residual stream's gradient */
	float *dln;               /* rows x C: a LayerNorm's output gradient, the heads' */
	float *dbig;              /* rows x 4C: the MLP's, then the qkv gradient */
	float *sc, *dsc;          /* G x S x S (G = heads_per_call, S = gpt_ws_segment_max):
				     the scores of G heads of a segment, n x n each at n x n
				     apart for a segment of n rows, and their gradient */
};

/* The attention's score buffers hold at most this many floats each (64 MiB) when more
 * than one head is batched: as many heads as fit are batched in one call. */
#define GPT_SCORE_FLOATS ((size_t)1 << 24)

/* S, the longest segment a batch of max_rows rows can hold: min(model.context, rows). */
size_t gpt_ws_segment_max(const struct model_shape *m, int max_rows);
/* G, the heads one batched attention call covers for batches of up to max_rows rows:
 * all H where H x S x S fits GPT_SCORE_FLOATS, else as many as fit, at least 1. */
int gpt_ws_heads_per_call(const struct model_shape *m, int max_rows);

size_t gpt_ws_bytes(const struct model_shape *m, int max_rows, size_t *dominant);
int gpt_ws_check_size(const struct model_shape *m, int max_rows, struct err *e);
int gpt_ws_create(struct dev *d, const struct model_shape *m, int max_rows,
		  struct model_ws **out, struct err *e);
void gpt_ws_destroy(struct model_ws *ws);
void gpt_dev_needs(const struct model_shape *m, int max_rows, struct model_dev_needs *n);

#endif
