/*
 * gpt_llmc: the GPT's weights in llm.c's GPT-2 model file (train_gpt2.c reads it), written
 * by `export --llmc` and read by `model.init = llmc:FILE`.
 *
 * The file: a header of 256 int32 (magic 20240326, version 3 = float32, maxT, V, L, NH,
 * C, Vp = V rounded up to a multiple of 128, the rest 0), then the float32 tensors in the
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
#define GPT_LLMC_VERSION 3
#define GPT_LLMC_HEADER 256
#define GPT_LLMC_VOCAB_ROUND 128

/* A file's header fields. */
struct gpt_llmc_header {
	int max_t, vocab, layers, heads, width, padded_vocab;
};

/* The model rows a source keeps before the user's ids (DATA_RESERVED for a file source,
 * 0 for the synthetic one). */
int gpt_llmc_reserved(int source);
/* Writes m's parameters (a gpt) to `path` atomically (a temporary renamed once complete):
 * model rows reserved .. vocab - 1 become llm.c's rows 0 ... ERR_IO naming the file. */
int gpt_llmc_write(const char *path, const struct model_shape *m, int reserved,
		   const float *params, struct err *e);
/* Reads and checks the header of `path` and its size against it: ERR_DATA naming the
 * file and the field (magic, version, a size, truncated or longer than the header says). */
int gpt_llmc_read_header(const char *path, struct gpt_llmc_header *h, struct err *e);
/* Overwrites params (already seeded) with the file's weights: llm.c row u into model row
 * u + reserved for the user's ids, the first model.context rows of wpe, every other
 * tensor whole; the reserved rows keep their seeded values. ERR_CONFIG naming the file,
 * the header field and the configuration key when the file does not fit m. */
int gpt_llmc_load(const char *path, const struct model_shape *m, int reserved, float *params,
		  struct err *e);
/* The file `model.init` names ("llmc:FILE": FILE; "": *path = NULL), read nothing from;
 * anything else, or a model other than the gpt, ERR_CONFIG. */
int gpt_llmc_init_path(const struct settings *s, const struct model_shape *m,
		       const char **path, struct err *e);
/* `model.init` of the settings applied to seeded params: "" leaves them, "llmc:FILE"
 * loads FILE (gpt_llmc_load); anything else, or a model other than the gpt, ERR_CONFIG. */
int gpt_llmc_init(const struct settings *s, const struct model_shape *m, float *params,
		  struct err *e);

#endif
