/*
 * checks: the protocol's checks besides parity (parity.h): the 12/36 counterexample
 * (check-loss), the exercise on the model, and the comparison of a resumed run with a
 * continuous one. Each returns its result as a value with its verdict decided here once;
 * nothing here prints or writes a file.
 */
#ifndef DDPTOK_CHECKS_H
#define DDPTOK_CHECKS_H

#include <stddef.h>
#include <stdint.h>

#include "corpus.h"
#include "engine_keep.h"
#include "err.h"
#include "settings.h"

/* ---- check-loss: local sums 12 and 108 over 12 and 36 tokens ---- */

struct check_loss_result {
	double sums[2];
	int64_t counts[2];
	double mean_of_means, global_mean;         /* reduce avg: must be 2 and 2.5 */
	double mean_of_means_sum, global_mean_sum; /* reduce sum: likewise */
	/* The weighted form (weighted = 1, with train.class_weights): rank 0's tokens of a
	 * class weighing 2, rank 1's of one weighing 0.5, so its weighted loss sums are 24
	 * and 54 over weight sums 24 and 18 (docs/adaptations.md works it out) */
	int weighted;
	double w_sums[2], w_weights[2];
	double weighted_mean, weighted_mean_sum; /* 78 / 42 = 13 / 7 under avg and sum */
	double weighted_by_count;                /* 78 / 48 = 1.625: divided by N */
	int ok;
};

/* Through the trainer's normalization function (norm_window_loss), under both reduce ops. */
void check_loss_run(struct check_loss_result *res);
/* Adds the weighted form (through norm_factor's weight sums), and its part of ok. */
void check_loss_weighted(struct check_loss_result *res);

/* ---- the exercise: rank 0 keeps its tokens, rank 1 grows ---- */

/*
 * Rank 0 keeps `short` supervised tokens; rank 1 goes from `long_before` to `long_after`.
 * The sequences are cut from the corpus (rank 0: the first training sequence; rank 1: a
 * prefix of the longest one, so the second case extends the first). For both cases the
 * two ranks run one window on W = 2 device threads, once with global_token and once with
 * mean_of_means: the mean of local means, the global token mean, and how far apart the two
 * gradients are.
 */
struct exercise_case {
	int long_len;
	int64_t tokens[2];
	double sums[2];
	double mean_of_means, global_mean;
	double grad_diff_l2, grad_diff_max, grad_l2;
};

enum exercise_problem {
	EXERCISE_OK,
	EXERCISE_EQUAL_DIFFER, /* equal token counts, yet the two gradients differ */
	EXERCISE_UNEQUAL_SAME, /* unequal token counts, yet identical gradients */
};

struct exercise_result {
	int short_len;
	struct exercise_case cases[2]; /* rank 1 at long_before, then at long_after */
	enum exercise_problem problem;
	int ok;
};

/* The two cases of the exercise, each on an engine of two ranks (keep's when not NULL:
 * engine_keep.h). ERR_CONFIG (message without the configuration's path) when the [exercise] lengths exceed
 * the corpus's sequences. */
int exercise_run(const struct settings *s, const struct corpus *full, struct engine_keep *keep,
		 struct exercise_result *res, struct err *e);

/* ---- resume: a run stopped and resumed against one that never stopped ---- */

struct resume_check {
	int64_t step;             /* where the resumed run ended */
	size_t n;                 /* parameters compared */
	double max_abs_diff;      /* largest |resumed - continuous| over the parameters */
	size_t params_differing;  /* parameters that differ in any bit */
	size_t momentum_differing; /* elements of the optimizer's state that differ */
	int same_step;
	int ok;                   /* bit-identical parameters and momentum, at the same step */
};

void resume_compare(const float *params, const float *momentum, int64_t step,
		    const float *cont_params, const float *cont_momentum, int64_t cont_step,
		    size_t n, size_t state_n, struct resume_check *res);

#endif
