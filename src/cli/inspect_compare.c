/*
 * inspect_compare: the arithmetic behind inspect's `compare`: a rank's share of a window
 * (and so of its reference gradient), the rank's contribution to the reduced gradient,
 * and the report of one comparison: the counts under the tolerance rule of parity.h and
 * the components furthest outside it, each named by its tensor, row and column.
 */
#include "inspect_compare.h"

#include <stdio.h>

#include "coll.h"
#include "norm.h"
#include "parity.h"

#define INSPECT_WORST 5

void inspect_rank_share(const struct window *w, int rank, struct window *share)
{
	*share = *w;
	share->world = 1;
	for (int m = 0; m < w->micro; m++)
		share->mb[0][m] = w->mb[rank][m];
	share->rank_micro[0] = w->rank_micro[rank];
	share->rank_tokens[0] = w->rank_tokens[rank];
}

void inspect_rank_contribution(const float *local, size_t n, const struct settings *s,
			       int world, float *out)
{
	/* the collective's divisor k (norm.h): reduce avg divides the sum of the ranks'
	 * gradients by W, exact mode's tree by its K shards */
	float k = (float)norm_divisor(s->reduce == COLL_AVG, world, s->shards);
	for (size_t i = 0; i < n; i++)
		out[i] = local[i] / k;
}

struct worst {
	size_t i;
	struct parity_gap gap;
};

/* The components with the largest parity_gap ratio, largest first (ties: the lowest
 * index). */
static void worst_components(const float *g, const float *ref, size_t n, double atol,
			     double rtol, struct worst *w, int *nw)
{
	int k = 0;
	for (size_t i = 0; i < n; i++) {
		struct parity_gap gp = parity_gap(g[i], ref[i], atol, rtol);
		if (k == INSPECT_WORST && !(gp.ratio > w[k - 1].gap.ratio))
			continue;
		int j = k < INSPECT_WORST ? k++ : k - 1;
		while (j > 0 && gp.ratio > w[j - 1].gap.ratio) {
			w[j] = w[j - 1];
			j--;
		}
		w[j] = (struct worst){i, gp};
	}
	*nw = k;
}

/* What is set against what. */
static void compare_heading(const struct settings *s, const struct inspect_comparison *c)
{
	const struct window *w = c->w;
	if (c->rank < 0) {
		printf("compare: mode %s (reduce %s, W = %d, N = %lld) against the single-device "
		       "reference\n", norm_mode_name(c->mode), coll_op_name(s->reduce), w->world,
		       (long long)w->N);
		printf("compare: loss %.6f (global token mean; reference %.6f)\n", c->loss,
		       c->ref_loss);
		return;
	}
	printf("compare: rank %d's contribution under mode %s (its local gradient%s) against "
	       "its share of the single-device reference (the gradient of its %lld tokens' "
	       "losses / N, N = %lld)\n", c->rank, norm_mode_name(c->mode),
	       s->reduce != COLL_AVG ? "" : s->shards > 0 ? " / K, as exact mode's tree divides"
	       : " / W, as reduce avg divides", (long long)w->rank_tokens[c->rank],
	       (long long)w->N);
	printf("compare: rank %d's share of the reference loss: %.6f\n", c->rank, c->ref_loss);
}

/* The components furthest from the reference, in tolerances. */
static void compare_worst(const struct settings *s, const struct model_shape *m,
			  const struct inspect_comparison *c)
{
	struct worst wv[INSPECT_WORST];
	int nw = 0;
	worst_components(c->g, c->ref, c->n, s->atol, s->rtol, wv, &nw);
	printf("compare: the %d worst components (largest |g - ref| / (atol + rtol |ref|)):\n",
	       nw);
	for (int i = 0; i < nw; i++) {
		const struct parity_gap *gp = &wv[i].gap;
		char label[96];
		tensor_label(m, wv[i].i, label, sizeof label);
		printf("compare:   %-16s index %-7zu g %+.6e  ref %+.6e  |g - ref| %.3e  "
		       "tolerance %.3e (%.3g x)%s\n", label, wv[i].i, c->g[wv[i].i],
		       c->ref[wv[i].i], gp->diff, gp->tol, gp->ratio, gp->within ? "" : "  outside");
	}
}

void inspect_compare_print(const struct settings *s, const struct model_shape *m,
			   const struct inspect_comparison *c)
{
	struct parity_stats st;
	char who[64] = "";
	parity_compare(c->g, c->ref, c->n, s->atol, s->rtol, &st);
	compare_heading(s, c);
	if (c->rank >= 0)
		snprintf(who, sizeof who, ", rank %d", c->rank);
	/* the relative error is largest where the reference is near zero; the verdict weighs
	 * each component by atol + rtol |ref| instead */
	printf("compare: max abs error %.3e, max rel error %.3e (relative errors are largest "
	       "where the reference is near 0; the verdict below uses atol + rtol |ref|)\n",
	       st.max_abs, st.max_rel);
	printf("compare: mode %s%s: %zu of %zu components outside tolerance (atol %g, rtol %g): "
	       "%s\n", norm_mode_name(c->mode), who, st.outside, st.components, s->atol, s->rtol,
	       st.pass ? "pass" : "FAIL");
	if (c->mode != NORM_GLOBAL_TOKEN &&
	    !parity_distinguishable(c->mode, s->unit, c->w, s->reduce == COLL_AVG))
		printf("compare: note: on this window %s gives every microbatch the same factor as "
		       "global_token\n", norm_mode_name(c->mode));
	compare_worst(s, m, c);
}
