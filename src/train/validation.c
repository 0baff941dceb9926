/*
 * validation: the validation loss while training (see validation.h).
 */
#include "validation.h"

#include <math.h>

#include "data.h"

double per_target(double total, int64_t targets)
{
	return targets ? total / (double)targets : NAN;
}

int train_val_due(const struct settings *s, int64_t step)
{
	return s->eval_every > 0 && step > 0 && step % s->eval_every == 0;
}

int train_validate(struct engine *eng, int64_t step, struct train_val *val, struct err *e)
{
	double loss_sum;
	int64_t tokens, hits, sequences;
	ERR_TRY(engine_evaluate(eng, SPLIT_VALIDATION, &loss_sum, &tokens, &hits, &sequences, e));
	val->step = step;
	val->loss = per_target(loss_sum, tokens);
	val->accuracy = per_target((double)hits, tokens);
	return ERR_OK;
}
