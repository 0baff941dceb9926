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

/* What the parity check demands of a negative control on window w, decided from the
 * window alone: the factors norm_factor() gives each microbatch under the control and
 * under global_token (the same function the engine applies). The control's own gradient
 * plays no part in the decision, so an engine that ignored the normalization, or a
 * tolerance too loose to see it, shows as a control that was required and not caught. */
enum parity_control {
	PARITY_SAME = 0,     /* every factor equals global_token's: must pass */
	PARITY_MARGINAL = 1, /* factors differ by at most PARITY_FACTOR_MIN_GAP (relative;
				e.g. mean_of_means on 1,600 vs 1,601 tokens, 3e-4): the default
				tolerance may not see it; reported, required neither way */
	PARITY_DISTINCT = 2, /* factors differ by more: must be caught */
};
/* Fixed, not scaled by the tolerance under test: a looser parity.rtol must make the
 * controls go uncaught (and parity fail), never make them optional. */
#define PARITY_FACTOR_MIN_GAP 1e-3
/* Classifies `mode` on w; *factor_gap (may be NULL) receives the largest |c / g - 1| over
 * the microbatches holding tokens (c: the control's factor, g: global_token's). */
enum parity_control parity_control_of(int mode, const struct window *w, int reduce_avg,
				      double *factor_gap);
/* The largest |g_mode - g_global| / (atol + rtol |g_global|) over n components (NaN and
 * an unbounded ratio give infinity): how far a control moved the gradient, in tolerances. */
double parity_effect(const float *g_mode, const float *g_global, size_t n, double atol,
		     double rtol);
/* The window as JSON (a json_t *): ranks, microbatches, ids, token counts. */
void *parity_window_json(const struct window *w);

/* json_real(x), or null when x is NaN or infinite (JSON has neither). */
void *parity_json_number(double x);

#endif
