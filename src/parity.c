/*
 * parity: the component-wise comparison with the reference, and what a negative control
 * is required to show on a window (see parity.h).
 */
#include "parity.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

#include "norm.h"

void parity_compare(const float *g, const float *ref, size_t n, double atol, double rtol,
		    struct parity_stats *st)
{
	memset(st, 0, sizeof *st);
	st->components = n;
	st->worst = 0;
	double worst_excess = -INFINITY;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)g[i] - (double)ref[i]);
		double lim = atol + rtol * fabs((double)ref[i]);
		if (!(d <= lim))
			st->outside++;
		if (d > st->max_abs || d != d)
			st->max_abs = d;
		if (ref[i] != 0.0f) {
			double rel = d / fabs((double)ref[i]);
			if (rel > st->max_rel)
				st->max_rel = rel;
		}
		if (d - lim > worst_excess) {
			worst_excess = d - lim;
			st->worst = i;
		}
	}
	st->pass = st->outside == 0;
}

/* Compares `mode`'s factor with global_token's on every microbatch holding tokens: the
 * largest |c / g - 1| (NaN: infinity), and *differ = 1 when some c != g exactly. */
static double factor_gap_of(int mode, const struct window *w, int reduce_avg, int *differ)
{
	double gap = 0.0;
	*differ = 0;
	for (int r = 0; r < w->world; r++)
		for (int m = 0; m < w->micro; m++) {
			if (w->mb[r][m].tokens == 0)
				continue;
			double c = norm_factor(mode, reduce_avg, w->world, w->micro, w->N,
					       w->rank_tokens[r], w->mb[r][m].tokens);
			double g = norm_factor(NORM_GLOBAL_TOKEN, reduce_avg, w->world, w->micro, w->N,
					       w->rank_tokens[r], w->mb[r][m].tokens);
			double d = fabs(c / g - 1.0);
			*differ |= c != g;
			if (!(d <= gap))
				gap = isnan(d) ? INFINITY : d;
		}
	return gap;
}

int parity_distinguishable(int mode, const struct window *w, int reduce_avg)
{
	int differ;
	factor_gap_of(mode, w, reduce_avg, &differ);
	return differ;
}

enum parity_control parity_control_of(int mode, const struct window *w, int reduce_avg,
				      double *factor_gap)
{
	int differ;
	double gap = factor_gap_of(mode, w, reduce_avg, &differ);
	if (factor_gap)
		*factor_gap = gap;
	if (!differ)
		return PARITY_SAME;
	return gap > PARITY_FACTOR_MIN_GAP ? PARITY_DISTINCT : PARITY_MARGINAL;
}

double parity_effect(const float *g_mode, const float *g_global, size_t n, double atol,
		     double rtol)
{
	double worst = 0.0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)g_mode[i] - (double)g_global[i]);
		double lim = atol + rtol * fabs((double)g_global[i]);
		double ratio = lim > 0 ? d / lim : (d > 0 ? INFINITY : 0.0);
		if (!(ratio <= worst)) /* NaN counts as the largest effect */
			worst = isnan(ratio) ? INFINITY : ratio;
	}
	return worst;
}

void *parity_json_number(double x)
{
	/* JSON has no NaN or infinity: such an error is written as null rather than lost */
	return isfinite(x) ? json_real(x) : json_null();
}

void *parity_window_json(const struct window *w)
{
	json_t *ranks = json_array();
	for (int r = 0; r < w->world; r++) {
		json_t *micro = json_array();
		for (int m = 0; m < w->micro; m++) {
			json_t *ids = json_array();
			for (int k = 0; k < w->mb[r][m].n; k++)
				json_array_append_new(ids, json_integer(w->mb[r][m].ids[k]));
			json_array_append_new(micro, json_pack("{s:o, s:I}", "ids", ids, "tokens",
							       (json_int_t)w->mb[r][m].tokens));
		}
		json_array_append_new(ranks, json_pack("{s:i, s:I, s:o}", "rank", r, "tokens",
						       (json_int_t)w->rank_tokens[r], "microbatches",
						       micro));
	}
	return json_pack("{s:I, s:I, s:o}", "index", (json_int_t)w->index, "N", (json_int_t)w->N,
			 "ranks", ranks);
}
