/*
 * step_check_loss: the check-loss step on a result the caller holds: computed, printed,
 * written to check_loss.json; ERR_CHECK (after writing) when the check failed.
 */
#ifndef DDPTOK_STEP_CHECK_LOSS_H
#define DDPTOK_STEP_CHECK_LOSS_H

#include "app.h"
#include "checks.h"

int check_loss_step(struct app *a, struct check_loss_result *res, struct err *e);

#endif
