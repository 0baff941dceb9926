/*
 * norm: normalization factors (see norm.h for the table).
 */
#include "norm.h"

double norm_divisor(int reduce_avg, int world, int shards)
{
	if (!reduce_avg)
		return 1.0;
	return shards > 0 ? (double)shards : (double)world;
}

double norm_factor(int mode, int reduce_avg, int world, int micro, double N, double n_rank,
		   double n_micro)
{
	return norm_factor_k(mode, norm_divisor(reduce_avg, world, 0), world, micro, N, n_rank,
			     n_micro);
}

double norm_factor_k(int mode, double k, int world, int micro, double N, double n_rank,
		     double n_micro)
{
	switch (mode) {
	case NORM_GLOBAL_TOKEN:
	case NORM_L2_EVERY_RANK: /* its error is in the l2 term, not in the factor */
	case NORM_Z_LOSS_LOCAL:  /* its error is in the z coefficient: norm_z_scale */
	case NORM_WEIGHTS_BY_COUNT: /* k / N: norm_unit_factor passes it the token count */
		return N > 0 ? k / (double)N : 0.0;
	case NORM_MEAN_OF_MEANS:
		return n_rank > 0 ? k / ((double)world * (double)n_rank) : 0.0;
	case NORM_MICROBATCH_MEAN:
		return n_micro > 0 ? k / ((double)world * (double)micro * (double)n_micro) : 0.0;
	case NORM_DOUBLE_ACCUM:
		return N > 0 ? k / ((double)N * (double)micro) : 0.0;
	default:
		return 0.0;
	}
}

double norm_collective(int reduce_avg, int world, const double *per_rank)
{
	double s = 0.0;
	for (int r = 0; r < world; r++)
		s += per_rank[r];
	return reduce_avg ? s / world : s;
}

double norm_window_loss(int mode, int reduce_avg, int world, const double *sums,
			const int64_t *counts)
{
	double scaled[8];
	int64_t N = 0;
	for (int r = 0; r < world; r++)
		N += counts[r];
	for (int r = 0; r < world; r++)
		scaled[r] = norm_factor(mode, reduce_avg, world, 1, N, counts[r], counts[r]) * sums[r];
	return norm_collective(reduce_avg, world, scaled);
}

double norm_z_scale(int unit, int mode, const struct window *w, int rank)
{
	const int seq = unit == UNIT_SEQUENCE;
	double all = seq ? (double)w->S : (double)w->N;
	double mine = seq ? (double)w->rank_sequences[rank] : (double)w->rank_tokens[rank];
	if (!seq && w->weighted) { /* the weight sums the tokens' factor divides by */
		all = w->W;
		mine = w->rank_weight[rank];
	}
	if (mode != NORM_Z_LOSS_LOCAL || mine <= 0)
		return 1.0;
	return all / mine;
}

int64_t norm_unit_count(int unit, const struct window *w)
{
	return unit == UNIT_SEQUENCE ? w->S : w->N;
}

double norm_unit_total(int unit, const struct window *w)
{
	if (unit == UNIT_TOKEN && w->weighted)
		return w->W;
	return (double)norm_unit_count(unit, w);
}

double norm_unit_factor(int unit, int mode, int reduce_avg, const struct window *w, int rank,
			int m, int64_t n_s)
{
	const int seq = unit == UNIT_SEQUENCE;
	const struct microbatch *mb = &w->mb[rank][m];
	if (!seq && w->weighted && mode != NORM_WEIGHTS_BY_COUNT) /* weight sums for counts */
		return norm_factor(mode, reduce_avg, w->world, w->rank_micro[rank], w->W,
				   w->rank_weight[rank], mb->weight);
	double f = norm_factor(mode, reduce_avg, w->world, w->rank_micro[rank], seq ? w->S : w->N,
			       seq ? w->rank_sequences[rank] : w->rank_tokens[rank],
			       seq ? mb->sequences : mb->tokens);
	if (!seq)
		return f;
	return n_s > 0 ? f / (double)n_s : 0.0;
}
