/*
 * cmd_env: `env`, the backends, devices and versions, and with --check a device check.
 */
#ifndef DDPTOK_CMD_ENV_H
#define DDPTOK_CMD_ENV_H

#include "app.h"

int cmd_env(struct app *a, struct err *e);

#endif
