/*
 * cmd_sample: `sample`, ids generated from a gpt checkpoint after a prompt (sample.h),
 * printed and written to sample.json, so that a trained model can be looked at.
 */
#ifndef DDPTOK_CMD_SAMPLE_H
#define DDPTOK_CMD_SAMPLE_H

#include "app.h"

int cmd_sample(struct app *a, struct err *e);

#endif
