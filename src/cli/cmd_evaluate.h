/*
 * cmd_evaluate: `evaluate`, a checkpoint's loss and accuracy on the held-out splits.
 */
#ifndef DDPTOK_CMD_EVALUATE_H
#define DDPTOK_CMD_EVALUATE_H

#include "app.h"
#include "evaluate.h"
#include "train_runs.h"

int cmd_evaluate(struct app *a, struct err *e);
/* The checkpoint a command reads, chosen on process 0 (the others take process 0's): the
 * one --checkpoint names or the newest valid one of the directory it names, else the
 * latest run's newest valid one; NULL (*dir) when there is no run: evaluate.c's own
 * choice. plan holds the strings *dir points to. */
int cmd_evaluate_choose(struct app *a, const char **dir, struct train_plan *plan,
			struct err *e);
/* What cmd_evaluate prints and writes (evaluate.json), for an evaluation already made. */
int cmd_evaluate_write(struct app *a, const struct train_eval *ev, struct err *e);

#endif
