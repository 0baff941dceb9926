/*
 * cmd_check_loss: `check-loss`, the loss normalization's counterexample on two ranks.
 */
#ifndef DDPTOK_CMD_CHECK_LOSS_H
#define DDPTOK_CMD_CHECK_LOSS_H

#include "app.h"

int cmd_check_loss(struct app *a, struct err *e);

#endif
