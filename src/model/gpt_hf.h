/*
 * gpt_hf: the GPT's weights as a Hugging Face GPT-2 directory (config.json and
 * model.safetensors, as GPT2LMHeadModel.save_pretrained writes them), written by `export
 * --hf DIR` and read by `model.init = hf:DIR`.
 *
 * model.safetensors: a little-endian u64 N, N bytes of JSON naming each tensor's dtype,
 * shape and [begin, end) byte offsets in the data after it, then the raw little-endian
 * data. Names and layouts (docs/gpt.md has the table): transformer.wte.weight [V, C],
 * transformer.wpe.weight [P, C], per layer l transformer.h.l.ln_1.{weight,bias},
 * attn.c_attn.{weight [C, 3C], bias}, attn.c_proj.{weight [C, C], bias}, ln_2.*,
 * mlp.c_fc.{weight [C, 4C], bias}, mlp.c_proj.{weight [4C, C], bias}, then
 * transformer.ln_f.*. GPT-2's Conv1D layers store their weight as [in, out], the transpose
 * of this model's [out, in] (gpt_shape.h), so those four are transposed both ways. The LM
 * head is tied to wte (no lm_head.weight is written; one read is ignored, as are the
 * attention-mask buffers attn.bias and attn.masked_bias), and names may come without the
 * "transformer." prefix (GPT2Model's). F32, F16 and BF16 are read (converted to float32);
 * F32 is written. Vocabulary rows as in llm.c's file (gpt_llmc.h): HF row u is user id u.
 */
#ifndef DDPTOK_GPT_HF_H
#define DDPTOK_GPT_HF_H

#include "model_shape.h"

/* Writes m's parameters to dir/model.safetensors and dir/config.json (dir created; each
 * file replaced atomically, config.json last). ERR_IO naming the file. */
int gpt_hf_write(const char *dir, const struct model_shape *m, int reserved,
		 const float *params, struct err *e);
/* Overwrites params (already seeded) with dir's weights: HF row u into model row u +
 * reserved, the first model.context rows of wpe, every other tensor whole. ERR_CONFIG
 * naming the file, its key and the configuration key when config.json's shape does not
 * fit m; ERR_DATA naming the file and tensor when model.safetensors is damaged, lacks a
 * tensor or holds one of another shape or dtype. *converted: the dtype read when it was
 * not F32 (its name), else NULL. */
int gpt_hf_load(const char *dir, const struct model_shape *m, int reserved, float *params,
		const char **converted, struct err *e);

#endif
