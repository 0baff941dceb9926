/*
 * cmd_prepare: `prepare`, the corpus and its data lock written into [run] outputs (the
 * protocol runs it as its first step).
 */
#ifndef DDPTOK_CMD_PREPARE_H
#define DDPTOK_CMD_PREPARE_H

#include "app.h"

int cmd_prepare(struct app *a, struct err *e);

#endif
