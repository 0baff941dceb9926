/*
 * cmd_reference: `reference`, the single-device gradient every parity check compares with.
 */
#ifndef DDPTOK_CMD_REFERENCE_H
#define DDPTOK_CMD_REFERENCE_H

#include "app.h"

int cmd_reference(struct app *a, struct err *e);

#endif
