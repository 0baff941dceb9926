/*
 * step_exercise: the exercise step on a result the caller holds: computed, printed,
 * written to exercise.json; ERR_CHECK (after writing) when the check failed.
 */
#ifndef DDPTOK_STEP_EXERCISE_H
#define DDPTOK_STEP_EXERCISE_H

#include "app.h"
#include "checks.h"

int exercise_step(struct app *a, struct exercise_result *res, struct err *e);

#endif
