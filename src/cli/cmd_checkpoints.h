/*
 * cmd_checkpoints: `checkpoints`, every checkpoint under the artifacts directory, verified.
 */
#ifndef DDPTOK_CMD_CHECKPOINTS_H
#define DDPTOK_CMD_CHECKPOINTS_H

#include "app.h"

int cmd_checkpoints(struct app *a, struct err *e);

#endif
