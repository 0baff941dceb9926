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

/* What the parity check may demand of a negative control on window w. A wrong factor
 * only shows where it moves the gradient by more than the tolerance: with the nearly
 * equal counts of a balanced plan, mean_of_means moves it by the factor gap times the
 * difference between the ranks' per-token gradients, which may stay inside atol + rtol
 * |g| everywhere. Whether it does is measured against the W-device global_token gradient
 * of the same window (same reduction order, so only the factors differ): */
enum parity_control {
	PARITY_SAME = 0,     /* every factor equals global_token's: must pass */
	PARITY_MARGINAL = 1, /* moves no component beyond PARITY_EFFECT_MARGIN tolerances:
				reported, required neither to pass nor to fail */
	PARITY_DISTINCT = 2, /* moves some component further: must be caught */
};
/* The effect a control must show, in tolerances, to be required to fail; the margin
 * covers the rounding difference between the reference and the W-device gradient. */
#define PARITY_EFFECT_MARGIN 2.0
/* Classifies `mode` on w from its reduced gradient g_mode and global_token's g_global
 * (n components each); *effect (may be NULL) receives the largest
 * |g_mode - g_global| / (atol + rtol |g_global|). */
enum parity_control parity_control_of(int mode, const struct window *w, int reduce_avg,
				      const float *g_mode, const float *g_global, size_t n,
				      double atol, double rtol, double *effect);
/* The window as JSON (a json_t *): ranks, microbatches, ids, token counts. */
void *parity_window_json(const struct window *w);

/* json_real(x), or null when x is NaN or infinite (JSON has neither). */
void *parity_json_number(double x);

#endif
