/*
 * window_mlp: the window MLP language model, written against the device interface only.
 *
 * For each position t of a sequence, the ids of the C previous tokens (DATA_BOS before
 * the start) are embedded (V x D table), concatenated (C*D), h = tanh(W1 x + b1) with H
 * hidden units, logits = W2 h + b2 over V ids; loss_t = logsumexp(logits) -
 * logits[target]. Its tensors, in parameter order:
 *   embed [V x D], w1 [H x C*D], b1 [H], w2 [V x H], b2 [V]
 * V = data.vocab (resolved), C = model.context, D = model.embed, H = model.hidden.
 *
 * A batch is built on the host from sequence ids: `packed` keeps only supervised
 * positions (no padding compute); `padded` lays out every position of a rectangle
 * (batch x longest sequence) and marks padding and prompt positions with target -1,
 * which the loss ignores. Both give the same sums.
 */
#ifndef DDPTOK_WINDOW_MLP_H
#define DDPTOK_WINDOW_MLP_H

#include "model_shape.h"

/* its tensors, by index in model_shape.p[] */
enum { WINDOW_MLP_EMBED = 0, WINDOW_MLP_W1, WINDOW_MLP_B1, WINDOW_MLP_W2, WINDOW_MLP_B2,
       WINDOW_MLP_NTENSORS };
/* its sizes, by index in model_shape.dim[] */
enum { WINDOW_MLP_CONTEXT = 0, WINDOW_MLP_EMBED_DIM, WINDOW_MLP_HIDDEN };

extern const struct model_ops window_mlp_ops;

/* The shape of the given sizes (the settings' shape is window_mlp_ops.shape). */
void window_mlp_shape(struct model_shape *m, int vocab, int context, int embed, int hidden);

/* Its batch: the context ids and target of each position laid out. */
struct window_mlp_batch {
	struct model_batch head;
	int cap;         /* allocated rows */
	int context;
	int32_t *ctx;    /* rows x context ids */
	int32_t *target; /* rows; -1 = not supervised */
};

/* b as the window MLP's batch (b must be one: made by its batch_alloc). */
struct window_mlp_batch *window_mlp_batch_of(struct model_batch *b);

#endif
