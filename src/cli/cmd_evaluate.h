/*
 * cmd_evaluate: `evaluate`, a checkpoint's loss and accuracy on the held-out splits.
 */
#ifndef DDPTOK_CMD_EVALUATE_H
#define DDPTOK_CMD_EVALUATE_H

#include "app.h"
#include "evaluate.h"

int cmd_evaluate(struct app *a, struct err *e);
/* What cmd_evaluate prints and writes (evaluate.json), for an evaluation already made. */
int cmd_evaluate_write(struct app *a, const struct train_eval *ev, struct err *e);

#endif
