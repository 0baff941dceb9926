/*
 * model-bigram: a second model, kept in the test tree, that plugs into the program through
 * the model interface alone (model.h): logits = table[previous token] + bias, a V x V
 * table and a V bias, trained by the same engine, checkpoints and parity as the window
 * MLP. The test registers it with model_register(); nothing in src/ names it.
 */
#ifndef DDPTOK_TEST_MODEL_BIGRAM_H
#define DDPTOK_TEST_MODEL_BIGRAM_H

#include "model.h"

enum { BIGRAM_TABLE = 0, BIGRAM_BIAS };

extern const struct model_ops bigram_ops;

/* Its batch: the previous token and the target of each position laid out. */
struct bigram_batch {
	struct model_batch head;
	int cap;
	int32_t *prev;   /* rows; DATA_BOS before a sequence's start, DATA_PAD for padding */
	int32_t *target; /* rows; -1 = not supervised */
};

#endif
