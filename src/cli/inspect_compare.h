/*
 * inspect_compare: the arithmetic of inspect's `compare`: a rank's share of a window, its
 * contribution to the reduced gradient, and the report of a gradient set against its
 * reference.
 */
#ifndef DDPTOK_INSPECT_COMPARE_H
#define DDPTOK_INSPECT_COMPARE_H

#include <stddef.h>

#include "model.h"
#include "sampler.h"
#include "settings.h"


/* The part of window w that rank `rank` computes, as a one-rank window that keeps w's N:
 * its reference gradient (engine_reference weighs every token 1 / N; in exact mode it adds
 * the rank's own shards in their subtree) is that rank's share of the reference gradient
 * of w's token mean. */
void inspect_rank_share(const struct window *w, int rank, struct window *share);
/* out = what a rank's local gradient (n components) becomes in the reduced one under s
 * (on `world` ranks): local divided by the collective's divisor (norm_divisor). */
void inspect_rank_contribution(const float *local, size_t n, const struct settings *s,
			       int world, float *out);

/* What `compare` set side by side: g against ref (n components each) on window w under
 * mode; rank -1: the reduced gradient against the window's reference, else that rank's
 * contribution against its share of it. */
struct inspect_comparison {
	const struct window *w;
	int mode, rank;
	const float *g, *ref;
	size_t n;
	double loss, ref_loss; /* the window's global token mean, the reference's loss */
};
/* Prints the comparison under s's tolerances: the errors, the count outside tolerance,
 * and the worst components named by their tensors in m. */
void inspect_compare_print(const struct settings *s, const struct model_shape *m,
			   const struct inspect_comparison *c);

#endif
