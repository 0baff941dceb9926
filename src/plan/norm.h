/*
 * norm: the normalization of the window loss, the one place where it is decided.
 *
 * Every rank backpropagates, for each microbatch, factor * (sum of its token losses).
 * The factor depends on the mode, on the reduce op the collective really performs
 * (avg divides by W, sum does not) and on token counts that every rank knows
 * identically (N from the collective, its own counts):
 *
 *   global_token         k / N                  (correct: the window's token mean)
 *   mean_of_means        k / (W * N_rank)       rank-local mean, then averaged over ranks
 *   microbatch_mean      k / (W * M * N_micro)  each microbatch its own mean, / M
 *   double_accumulation  k / (N * M)            global count, divided again by M
 *   l2_every_rank        k / N                  (its error is in the l2 term: engine.c)
 *   z_loss_local         k / N                  (its error is in the z term: norm_z_scale)
 *   weights_by_count     k / N                  (with class weights, where W is right)
 *
 * With train.class_weights each token's loss arrives multiplied by w[y] and the counts
 * of the token unit are weight sums: N becomes W = sum_i w[y_i], N_rank and N_micro
 * their ranks' and microbatches' sums (norm_unit_factor); the control weights_by_count
 * keeps the token count N.
 *
 * with k = W when reduce = avg (it cancels the collective's division) and 1 for sum.
 * M is the rank's own count of microbatches, M_r (window.h's rank_micro): the
 * accumulation when a window is cut by sequences, what its token budget made of the
 * rank's share under train.batching = tokens (the controls then divide each rank by its
 * own M_r, which is how a per-microbatch mean accumulated over M_r passes behaves).
 * A count of zero gives a factor of zero (no token, no contribution). The trainer, the
 * parity check, check-loss and the exercise all go through norm_factor().
 */
#ifndef DDPTOK_NORM_H
#define DDPTOK_NORM_H

#include <stdint.h>

#include "sampler.h"
#include "settings.h"

double norm_factor(int mode, int reduce_avg, int world, int micro, double N, double n_rank,
		   double n_micro);
/* The same table with the collective's divisor k given: norm_factor() is it with
 * k = (reduce_avg ? W : 1); exact mode's tree divides by its K shards, so it passes
 * k = (reduce_avg ? K : 1), the same at every W. */
double norm_factor_k(int mode, double k, int world, int micro, double N, double n_rank,
		     double n_micro);
/* k, the collective's divisor: 1 for sum; for avg W, or in exact mode (shards > 0) the K
 * shards its tree adds. */
double norm_divisor(int reduce_avg, int world, int shards);
/* The factor of one token of sequence s (n_s supervised tokens) in microbatch m of rank
 * `rank`, for weighting unit `unit`: norm_factor over the counts of the unit, which are
 * the window's supervised tokens (token) or its sequences holding one (sequence: S,
 * S_rank, S_micro), divided by n_s for the sequence unit. So the correct sequence factor
 * is k / (S n_s): every sequence weighs 1/S, shared among its tokens; each control keeps
 * its wrong division in the sequence unit too. */
double norm_unit_factor(int unit, int mode, int reduce_avg, const struct window *w, int rank,
			int m, int64_t n_s);
/* What multiplies the z-loss coefficient on rank `rank` under `mode`: 1, except for the
 * control z_loss_local, whose z term is divided by the rank's count instead of the
 * window's (N / N_rank, or S / S_rank in the sequence unit; 1 on a rank without any).
 * The z term rides in each token's loss, so the token's factor k / N already normalizes
 * it; scaling the coefficient by N / N_rank turns that into k / N_rank for the z part. */
double norm_z_scale(int unit, int mode, const struct window *w, int rank);
/* The window's count of the unit (N or S), and a rank's. */
int64_t norm_unit_count(int unit, const struct window *w);
/* What the window's loss sum is divided by: norm_unit_count, or with class weights (the
 * token unit) the window's weight sum W = sum_i w[y_i]. */
double norm_unit_total(int unit, const struct window *w);

/* What an allreduce makes of one scalar per rank (sum, or mean when reduce_avg). */
double norm_collective(int reduce_avg, int world, const double *per_rank);
/* The loss the collective reports for scalar per-rank sums with M = 1 (check-loss). */
double norm_window_loss(int mode, int reduce_avg, int world, const double *sums,
			const int64_t *counts);

#endif
