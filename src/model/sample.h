/*
 * sample: generating tokens from a gpt's parameters, so that a trained model can be
 * looked at (the sample command).
 *
 * Each new token is drawn from the logits of the last position of the text so far (prompt,
 * then the tokens drawn), laid out as one document as training lays it out (DATA_BOS before
 * its first token, positions from 0), forward only on a CPU device. The forward keeps the
 * keys and values of the rows it ran (sample_cache.h), so a new token costs one row, not
 * the whole text; with no_cache every token reruns the whole window (the training forward,
 * gpt_logits), which the cache must agree with; the prompt, and a window that restarts,
 * runs whole once that way too, and its keys and values fill the cache. A text longer than
 * the model's context slides: once model.context positions are full, the window restarts
 * from position 0 with the last half of its tokens, then goes on one row a token.
 *
 * Only the user's ids (not the reserved ones) are drawn. A repetition penalty p != 1 first
 * divides the positive logits of every id already in the text by p and multiplies the
 * negative ones by p (CTRL's rule, as Hugging Face applies it). Temperature 0 then takes the
 * largest logit (ties: the smaller id); otherwise the k largest (top_k; 0: all) are weighed
 * by exp((logit - largest) / temperature), top_p < 1 keeps the fewest of them, largest
 * first, whose weights reach that share of their sum, and one is drawn with the project's
 * generator, seeded with `seed`, so equal inputs give equal tokens. Drawing `eot` ends the
 * generation (it is not returned).
 */
#ifndef DDPTOK_SAMPLE_H
#define DDPTOK_SAMPLE_H

#include <stdint.h>

#include "model_shape.h"

struct sample_opts {
	int tokens;         /* at most this many */
	double temperature; /* 0: greedy */
	int top_k;          /* 0: every id */
	double top_p;       /* 1: every id top_k keeps */
	double repetition_penalty; /* 1: none */
	uint64_t seed;
	int32_t eot;        /* the model id that ends the text, or -1: none */
	int no_cache;       /* 1: rerun the whole window for every token */
	/* NULL, or called with each id as it is drawn (eot included) */
	void (*on_token)(void *arg, int32_t id);
	void *on_token_arg;
	float *logits;      /* NULL, or tokens x vocab: the logits each drawn id came from */
};

struct sample_result {
	int produced;       /* ids written to out (eot excluded) */
	int ended_at_eot;
	int slides;         /* times the window slid past model.context */
	double seconds;     /* wall time of the generation, first forward included */
	double tokens_per_s;
};

/* Generates up to o->tokens model ids into out after the n model ids of prompt (each in
 * [DATA_RESERVED, vocab)), with m's parameters (host memory). ERR_CONFIG when m is not a
 * gpt. */
int sample_generate(const struct model_shape *m, const float *params, const int32_t *prompt,
		    int n, const struct sample_opts *o, int32_t *out, struct sample_result *res,
		    struct err *e);

#endif
