/*
 * gpt_llmc: the GPT's weights in llm.c's GPT-2 model file (train_gpt2.c reads it), written
 * by `export --llmc` and read by `model.init = llmc:FILE`.
 *
 * The file: a header of 256 int32 (magic 20240326, version 3 = float32 or 5 = bfloat16, as
 * llm.c's GPU trainer writes it, maxT, V, L, NH, C, Vp = V rounded up to a multiple of 128,
 * the rest 0), then the tensors (float32, or bfloat16: a float32's upper 16 bits) in the
 * GPT's own order (gpt_shape.h), wte with Vp rows (rows V .. Vp - 1 zero), wpe with maxT
 * rows. Little-endian, as llm.c writes and reads it on the machines it runs on.
 *
 * Vocabulary: llm.c's row u is the user's id u. A file source's model ids are the user's
 * shifted by DATA_RESERVED (the reserved rows come first), so its reserved rows are
 * dropped on export and drawn from the seed on import; a synthetic corpus's ids are the
 * model's own (data.vocab counts the reserved ids), so every row is exported as it is.
 * docs/gpt.md says which of llm.c's conventions are matched.
 */
#ifndef DDPTOK_GPT_LLMC_H
#define DDPTOK_GPT_LLMC_H

#include "model_shape.h"

#define GPT_LLMC_MAGIC 20240326
#define GPT_LLMC_VERSION 3      /* float32 */
#define GPT_LLMC_VERSION_BF16 5 /* bfloat16 */
#define GPT_LLMC_HEADER 256
#define GPT_LLMC_VOCAB_ROUND 128

/* A file's header fields. */
struct gpt_llmc_header {
	int max_t, vocab, layers, heads, width, padded_vocab;
	int version; /* GPT_LLMC_VERSION or GPT_LLMC_VERSION_BF16 */
};

/* The model rows a source keeps before the user's ids (DATA_RESERVED for a file source,
 * 0 for the synthetic one). */
int gpt_llmc_reserved(int source);
/* Writes m's parameters (a gpt) to `path` atomically (a temporary renamed once complete)
 * as `version` (float32, or bfloat16 rounded to nearest even): model rows reserved ..
 * vocab - 1 become llm.c's rows 0 ... ERR_IO naming the file. */
int gpt_llmc_write(const char *path, const struct model_shape *m, int reserved,
		   const float *params, int version, struct err *e);
/* Reads and checks the header of `path` and its size against it: ERR_DATA naming the
 * file and the field (magic, version, a size, truncated or longer than the header says). */
int gpt_llmc_read_header(const char *path, struct gpt_llmc_header *h, struct err *e);
/* Overwrites params (already seeded) with the file's weights: llm.c row u into model row
 * u + reserved for the user's ids, the first model.context rows of wpe, every other
 * tensor whole; the reserved rows keep their seeded values. ERR_CONFIG naming the file,
 * the header field and the configuration key when the file does not fit m. *converted:
 * "bfloat16" for a version-5 file (its weights converted to float32), else NULL. */
int gpt_llmc_load(const char *path, const struct model_shape *m, int reserved, float *params,
		  const char **converted, struct err *e);
#endif
