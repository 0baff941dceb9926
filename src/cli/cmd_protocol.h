/*
 * cmd_protocol: the whole protocol behind `ddptok-run CONFIG`, and its report.
 */
#ifndef DDPTOK_CMD_PROTOCOL_H
#define DDPTOK_CMD_PROTOCOL_H

#include "app.h"

int cmd_protocol(struct app *a, struct err *e);

#endif
