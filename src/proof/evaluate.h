/*
 * evaluate: the held-out loss and accuracy of a checkpoint, and the best constant guess
 * they are compared with.
 */
#ifndef DDPTOK_EVALUATE_H
#define DDPTOK_EVALUATE_H

#include <stdint.h>

#include "corpus.h"
#include "env.h"
#include "fsx.h"

struct train_split_eval {
	int64_t sequences, tokens, hits;
	double loss_sum;
	double loss;        /* loss_sum / tokens: the global token mean */
	double accuracy;    /* hits / tokens */
	int64_t const_hits; /* positions whose target is the best constant guess */
	double const_accuracy;
	int64_t bytes;        /* text source: the bytes of text the targets stand for */
	double bits_per_byte; /* loss_sum / ln 2 / bytes (0 without a tokenizer) */
};

struct train_eval {
	char checkpoint[FSX_PATH_MAX];
	int64_t step;
	int const_id;       /* most frequent target id of the training split */
	char backend[8];    /* the backend the evaluation ran on */
	char tokenizer[16]; /* text source: the tokenizer's kind, which bits per byte took */
	struct train_split_eval test, validation;
	struct {            /* when the newest checkpoint was looked for: the newer ones of
			       each root that failed verification and were passed over */
		int count;
		char root[FSX_PATH_MAX];
	} skipped[2];
};

/* Evaluates checkpoint dir (NULL: the newest valid one of <artifacts>/checkpoints and
 * continuous), after checking its model shape and data lock against this configuration.
 * Logs nothing: what the caller shows is in ev. */
int train_evaluate(const struct env *v, const char *dir, struct train_eval *ev, struct err *e);
/* The most frequent supervised target id of a split (ties: the smallest id) and how many
 * supervised positions of `split2` have it as target. */
int train_const_guess(const struct corpus *c, int split, int split2, int64_t *hits2);

#endif
