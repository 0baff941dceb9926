/*
 * cmd_bench: `bench`, the throughput of training windows and of the BLAS under it.
 */
#ifndef DDPTOK_CMD_BENCH_H
#define DDPTOK_CMD_BENCH_H

#include "app.h"

int cmd_bench(struct app *a, struct err *e);

#endif
