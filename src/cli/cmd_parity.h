/*
 * cmd_parity: `parity`, the W-device gradient under every normalization against the
 * single-device reference.
 */
#ifndef DDPTOK_CMD_PARITY_H
#define DDPTOK_CMD_PARITY_H

#include "app.h"

int cmd_parity(struct app *a, struct err *e);

#endif
