/*
 * gpt: the GPT-2-style decoder behind the model interface ([model] kind = gpt).
 *
 * Token and learned position embeddings, model.layers pre-LayerNorm blocks (causal
 * multi-head self-attention with model.heads heads, a GELU MLP 4 times model.width wide,
 * residual additions), a final LayerNorm and the LM head tied to the token embedding.
 * Attention never crosses a document: each sequence of a microbatch is its own segment
 * and its positions start at 0 (gpt_batch.h). docs/gpt.md has the formulas, the
 * initialization and the tensor list (gpt_shape.h).
 */
#ifndef DDPTOK_GPT_H
#define DDPTOK_GPT_H

#include "model_shape.h"

extern const struct model_ops gpt_ops;

/* The GPT shape of the given sizes (the settings' is gpt_ops.shape). */
void gpt_shape(struct model_shape *m, int vocab, int layers, int heads, int width,
	       int context);

#endif
