/*
 * cmd_exercise: `exercise`, how the two normalizations part as one rank's tokens grow.
 */
#ifndef DDPTOK_CMD_EXERCISE_H
#define DDPTOK_CMD_EXERCISE_H

#include "app.h"

int cmd_exercise(struct app *a, struct err *e);

#endif
