/*
 * cmd_inspect: `inspect`, an interactive prompt that steps through training one window
 * at a time.
 */
#ifndef DDPTOK_CMD_INSPECT_H
#define DDPTOK_CMD_INSPECT_H

#include "app.h"

int cmd_inspect(struct app *a, struct err *e);

#endif
