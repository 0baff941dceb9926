/*
 * cmd_clean: `clean`, the program's own files removed, scope by scope.
 */
#ifndef DDPTOK_CMD_CLEAN_H
#define DDPTOK_CMD_CLEAN_H

#include "app.h"

int cmd_clean(struct app *a, struct err *e);

#endif
