/*
 * cmd_train: `train`, a training run chosen by --continuous or --resume DIR.
 */
#ifndef DDPTOK_CMD_TRAIN_H
#define DDPTOK_CMD_TRAIN_H

#include "app.h"

int cmd_train(struct app *a, struct err *e);

#endif
