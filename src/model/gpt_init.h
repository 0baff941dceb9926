/*
 * gpt_init: where `model.init` takes a gpt's starting weights from: nothing (the seeded
 * initialization), llmc:FILE (llm.c's model file, gpt_llmc.h) or hf:DIR (a Hugging Face
 * GPT-2 directory, gpt_hf.h). Both replace the seeded values they have rows for.
 */
#ifndef DDPTOK_GPT_INIT_H
#define DDPTOK_GPT_INIT_H

#include "model_shape.h"

enum gpt_init_kind { GPT_INIT_SEED, GPT_INIT_LLMC, GPT_INIT_HF };

struct gpt_init_source {
	enum gpt_init_kind kind;
	const char *path; /* in the settings' model.init; NULL for the seed */
};

/* The source model.init names, read nothing from; another form, or a model other than the
 * gpt, ERR_CONFIG. */
int gpt_init_source(const struct settings *s, const struct model_shape *m,
		    struct gpt_init_source *out, struct err *e);
/* model.init applied to seeded params; *converted: the dtype a file's weights were
 * converted to float32 from ("BF16", "F16"), or NULL when they were float32 or none were
 * read. */
int gpt_init_load(const struct settings *s, const struct model_shape *m, float *params,
		  const char **converted, struct err *e);

#endif
