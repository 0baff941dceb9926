/*
 * parity: component-wise comparison of a gradient with the reference.
 */
#ifndef DDPTOK_PARITY_H
#define DDPTOK_PARITY_H

#include <stddef.h>

#include "plan.h"

struct parity_stats {
	size_t components;
	double max_abs, max_rel;
	size_t outside; /* components with |g - ref| > atol + rtol |ref| */
	size_t worst;   /* index exceeding its tolerance the most (or closest to it) */
	int pass;
};

void parity_compare(const float *g, const float *ref, size_t n, double atol, double rtol,
		    struct parity_stats *st);
/* Non-zero when `mode` gives some microbatch of w a factor other than global_token's. */
int parity_distinguishable(int mode, const struct window *w, int reduce_avg);
/* The window as JSON (a json_t *): ranks, microbatches, ids, token counts. */
void *parity_window_json(const struct window *w);

#endif
