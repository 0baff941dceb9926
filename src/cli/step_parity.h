/*
 * step_parity: the parity step on a result the caller holds (and frees with
 * parity_result_free, whatever the return): computed, printed, written to parity.json;
 * ERR_CHECK (after writing) when the check failed.
 */
#ifndef DDPTOK_STEP_PARITY_H
#define DDPTOK_STEP_PARITY_H

#include "app.h"
#include "parity.h"

/* dump_dir: where the compared tensors go (NULL: nowhere) */
int parity_step(struct app *a, const char *dump_dir, struct parity_result *res, struct err *e);

#endif
