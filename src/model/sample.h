/*
 * sample: generating tokens from a gpt's parameters, so that a trained model can be
 * looked at (the sample command).
 *
 * Each new token is drawn from the logits of the last position of the sequence so far
 * (prompt, then the tokens drawn), laid out as one document as training lays it out
 * (DATA_BOS before its first token, positions from 0), forward only on a CPU device.
 * Only the user's ids (not the reserved ones) are drawn. temperature 0 takes the largest
 * logit (ties: the smaller id); otherwise the k largest (top_k; 0: all) are weighed by
 * exp((logit - largest) / temperature) and one is drawn with the project's generator,
 * seeded with `seed`, so equal inputs give equal tokens.
 */
#ifndef DDPTOK_SAMPLE_H
#define DDPTOK_SAMPLE_H

#include <stdint.h>

#include "model_shape.h"

struct sample_opts {
	int tokens;         /* how many to generate */
	double temperature; /* 0: greedy */
	int top_k;          /* 0: every id */
	uint64_t seed;
};

/* Generates o->tokens model ids into out after the n model ids of prompt (each in
 * [DATA_RESERVED, vocab)), with m's parameters (host memory). ERR_CONFIG when m is not a
 * gpt or prompt and tokens need more positions than the model has (model.context). */
int sample_generate(const struct model_shape *m, const float *params, const int32_t *prompt,
		    int n, const struct sample_opts *o, int32_t *out, struct err *e);

#endif
