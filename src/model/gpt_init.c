/*
 * gpt_init: model.init's source and its load (see gpt_init.h).
 */
#include "gpt_init.h"

#include <string.h>

#include "gpt_hf.h"
#include "gpt_llmc.h"

int gpt_init_source(const struct settings *s, const struct model_shape *m,
		    struct gpt_init_source *out, struct err *e)
{
	static const struct {
		const char *prefix, *what;
		enum gpt_init_kind kind;
	} forms[] = {
		{"llmc:", "an llm.c model file", GPT_INIT_LLMC},
		{"hf:", "a Hugging Face GPT-2 directory", GPT_INIT_HF},
	};
	*out = (struct gpt_init_source){GPT_INIT_SEED, NULL};
	if (!s->model_init[0])
		return ERR_OK;
	for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
		size_t n = strlen(forms[i].prefix);
		if (strncmp(s->model_init, forms[i].prefix, n) || !s->model_init[n])
			continue;
		if (strcmp(m->ops->name, "gpt"))
			return ERR(e, ERR_CONFIG, "[model] init = %s: %s holds a gpt, and model.kind "
				   "= %s", s->model_init, forms[i].what, m->ops->name);
		*out = (struct gpt_init_source){forms[i].kind, s->model_init + n};
		return ERR_OK;
	}
	return ERR(e, ERR_CONFIG, "[model] init = '%s': expected llmc:FILE (an llm.c GPT-2 model "
		   "file), hf:DIR (a Hugging Face GPT-2 directory) or nothing (the seeded "
		   "initialization)", s->model_init);
}

int gpt_init_load(const struct settings *s, const struct model_shape *m, float *params,
		  const char **converted, struct err *e)
{
	struct gpt_init_source src;
	*converted = NULL;
	ERR_TRY(gpt_init_source(s, m, &src, e));
	int reserved = gpt_llmc_reserved(s->source);
	if (src.kind == GPT_INIT_LLMC)
		return gpt_llmc_load(src.path, m, reserved, params, converted, e);
	if (src.kind == GPT_INIT_HF)
		return gpt_hf_load(src.path, m, reserved, params, converted, e);
	return ERR_OK;
}
