/*
 * cmd_exercise: the exercise command: the protocol's exercise step on its own.
 */
#include "cmd_exercise.h"

#include "step_exercise.h"

int cmd_exercise(struct app *a, struct err *e)
{
	struct exercise_result res;
	return exercise_step(a, &res, e);
}
