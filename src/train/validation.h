/*
 * validation: the validation loss while training ([train] eval_every).
 *
 * The global token mean over the whole validation split, computed with the replicas'
 * current parameters by the same engine pass as the evaluate command (engine_evaluate).
 * The replicas are identical on every rank and process, so each process computes it
 * alone and every one gets the same bits, with no exchange. It reads the parameters
 * only: a run that validates trains the same bits as one that does not. Its mean per
 * target is the evaluate command's too (evaluate.c), so the two report one arithmetic.
 */
#ifndef DDPTOK_VALIDATION_H
#define DDPTOK_VALIDATION_H

#include <stdint.h>

#include "engine.h"
#include "err.h"
#include "settings.h"

struct train_val {
	int64_t step;       /* the step it was taken after (0: none yet) */
	double loss;        /* global token mean (NaN: the split holds no target) */
	double accuracy;    /* share of targets predicted by the argmax (NaN: likewise) */
};

/* total / targets: a split's mean per supervised target (its global token mean of a loss
 * sum, its accuracy of a count of hits), NaN when the split holds no target. */
double per_target(double total, int64_t targets);
/* Whether [train] eval_every asks for the validation loss after `step`. */
int train_val_due(const struct settings *s, int64_t step);
/* Evaluates the validation split with eng's current parameters into *val, recorded as
 * taken after `step`. */
int train_validate(struct engine *eng, int64_t step, struct train_val *val, struct err *e);

#endif
