/*
 * gpt_shape: the GPT model's sizes, its tensor list and its seeded initialization
 * (docs/gpt.md has the formulas).
 *
 * The tensors follow llm.c's GPT-2 parameter order and names, each per-layer tensor
 * stacked over the L layers (layer l's block first dimension l), so that a file of
 * llm.c's format is these tensors one after the other:
 *   wte [V x C], wpe [T x C], ln1w [L x C], ln1b [L x C], qkvw [L*3C x C], qkvb [L x 3C],
 *   attprojw [L*C x C], attprojb [L x C], ln2w [L x C], ln2b [L x C], fcw [L*4C x C],
 *   fcb [L x 4C], fcprojw [L*C x 4C], fcprojb [L x C], lnfw [C], lnfb [C]
 * V = vocabulary (reserved ids included), T = model.context (positions), C = model.width,
 * L = model.layers. Weight decay applies to the matrices: wte, wpe, qkvw, attprojw, fcw,
 * fcprojw (llm.c's choice), not to biases and LayerNorm parameters.
 */
#ifndef DDPTOK_GPT_SHAPE_H
#define DDPTOK_GPT_SHAPE_H

#include "model_shape.h"
#include "prng.h"

/* its tensors, by index in model_shape.p[] */
enum {
	GPT_WTE = 0, GPT_WPE, GPT_LN1W, GPT_LN1B, GPT_QKVW, GPT_QKVB, GPT_ATTPROJW, GPT_ATTPROJB,
	GPT_LN2W, GPT_LN2B, GPT_FCW, GPT_FCB, GPT_FCPROJW, GPT_FCPROJB, GPT_LNFW, GPT_LNFB,
	GPT_NTENSORS
};
/* its sizes, by index in model_shape.dim[] */
enum { GPT_LAYERS = 0, GPT_HEADS, GPT_WIDTH, GPT_CONTEXT };

#define GPT_L(m) ((m)->dim[GPT_LAYERS])
#define GPT_H(m) ((m)->dim[GPT_HEADS])
#define GPT_C(m) ((m)->dim[GPT_WIDTH])
#define GPT_T(m) ((m)->dim[GPT_CONTEXT])

/* The shape of the given sizes, of kind ops (the GPT's table, gpt.h). */
void gpt_shape_fill(struct model_shape *m, const struct model_ops *ops, int vocab, int layers,
		    int heads, int width, int context);
/* ERR_CONFIG when the sizes make no GPT (heads not dividing the width) */
int gpt_shape_check(const struct model_shape *m, struct err *e);
/* GPT-2's initialization from the seed: weights normal(0, 0.02), the residual
 * projections (attprojw, fcprojw) normal(0, 0.02 / sqrt(2L)), biases 0, LayerNorm
 * weights 1; one generator stream over the tensors in order */
void gpt_init_params(const struct model_shape *m, uint64_t seed, float *host_params);
/* The generator's stream of the first parameters, and the next count values of tensor t
 * (model_ops' init_values). */
#define GPT_INIT_STREAM 0x6e77ULL
void gpt_init_values(const struct model_shape *m, int t, struct prng *r, float *out,
		     size_t count);
/* one normal(0, 1) draw of the generator behind gpt_init_params, for tests */
double gpt_normal(struct prng *r);
void gpt_describe(const struct model_shape *m, char *out, size_t cap);
double gpt_flop_per_token(const struct model_shape *m);
double gpt_sequence_flop(const struct model_shape *m, int len);
struct model_gemm gpt_largest_gemm(const struct model_shape *m, int rows);

#endif
