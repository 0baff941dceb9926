/*
 * parity: the single-device reference gradient, the component-wise comparison of the
 * W-device gradient with it under every normalization, and the empty-window checks.
 *
 * Each check returns its result as a value, its verdict decided here once; the commands
 * print and write those values, the protocol's report renders them. Nothing here prints or
 * writes a file (parity's --dump receives the tensors through hooks).
 */
#ifndef DDPTOK_PARITY_H
#define DDPTOK_PARITY_H

#include <stddef.h>

#include "norm.h"
#include "sampler.h"

struct run; /* run.h */

/* One component g against its reference ref under the tolerance atol + rtol |ref|: the
 * rule every comparison of this program applies (parity, its controls' effect, inspect). */
struct parity_gap {
	double diff;  /* |g - ref| */
	double tol;   /* atol + rtol |ref| */
	int within;   /* diff <= tol; a NaN on either side never is */
	double ratio; /* diff / tol, how many tolerances apart: at most 1 when within, at
			 least 1 when not; infinity outside a zero tolerance and for a NaN */
};
struct parity_gap parity_gap(double g, double ref, double atol, double rtol);

struct parity_stats {
	size_t components;
	double max_abs, max_rel;
	size_t outside; /* components not within tolerance (parity_gap) */
	size_t worst;   /* index exceeding its tolerance the most (or closest to it) */
	int pass;
};

void parity_compare(const float *g, const float *ref, size_t n, double atol, double rtol,
		    struct parity_stats *st);
/* Non-zero when `mode` gives some microbatch of w a factor other than global_token's. */
int parity_distinguishable(int mode, int unit, const struct window *w, int reduce_avg);

/* What the parity check demands of a negative control on window w, decided from the
 * window alone: the factors norm_unit_factor() gives each microbatch under the control and
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
enum parity_control parity_control_of(int mode, int unit, const struct window *w, int reduce_avg,
				      double *factor_gap);
/* Whether parity runs `mode` under settings s: the four normalizations always, an
 * adaptation's control only where its term is configured (l2_every_rank: train.l2 > 0,
 * z_loss_local: train.z_loss > 0, weights_by_count: train.class_weights). */
int parity_mode_present(int mode, const struct settings *s);
/* What an adaptation's control demands on settings s and window w: l2_every_rank adds the
 * l2 gradient W times under sum (*gap = W - 1, distinct when W > 1) and coincides with
 * the correct term under avg (every rank adds it there); z_loss_local multiplies each
 * rank's z term by N / N_rank (*gap: the largest, less 1; the same where one rank holds
 * every token); weights_by_count divides the class-weighted losses by N instead of
 * W = sum_i w[y_i] (*gap = |W / N - 1|: the same when the weights average 1). */
enum parity_control parity_adapt_control_of(int mode, const struct settings *s,
					    const struct window *w, double *gap);
/* The largest parity_gap ratio of g_mode against g_global over n components: how far a
 * control moved the gradient, in tolerances. */
double parity_effect(const float *g_mode, const float *g_global, size_t n, double atol,
		     double rtol);

/* ---- the reference ---- */

struct reference_result {
	struct window w;  /* window 1, the one every check compares on */
	double loss;      /* its global token mean */
	double grad_l2;
	double loss_l2;   /* of loss, the l2 term lambda / 2 ||theta||^2 (train.l2; else 0) */
	double l2_grad_l2; /* the L2 norm of its gradient lambda theta */
	double loss_z;    /* of loss, the z-loss's part (train.z_loss; else 0) */
	double z_grad_l2; /* the L2 norm of the z-loss's part of the gradient */
	size_t n;         /* components */
	float *grad;      /* the gradient of (sum of its token losses) / N on one device */
	char backend[16];
};

/* Draws window 1 of run r (opened at its start) and computes its single-device gradient. */
int reference_run(struct run *r, struct reference_result *res, struct err *e);
void reference_result_free(struct reference_result *res);

/* ---- parity ---- */

/* How one normalization fared; the text of each is parity_verdict_text(). */
enum parity_verdict {
	PARITY_EXPECTED_PASS,  /* global_token within tolerance */
	PARITY_MUST_PASS,      /* global_token outside it: a failure */
	PARITY_SAME_PASS,      /* a control whose factors equal global_token's here, passing */
	PARITY_SAME_FAIL,      /* ... not passing: a failure */
	PARITY_MARGINAL_PASS,  /* factors within PARITY_FACTOR_MIN_GAP: not required */
	PARITY_MARGINAL_CAUGHT,
	PARITY_NOT_CAUGHT,     /* a control whose factors differ, passing: a failure */
	PARITY_CAUGHT,
};
const char *parity_verdict_text(enum parity_verdict v);

struct parity_mode_result {
	int mode;                    /* enum norm_mode */
	int present;                 /* run on this configuration (an adaptation's control
					exists only where its term is configured) */
	struct parity_stats st;      /* its reduced gradient against the reference */
	enum parity_control control; /* PARITY_SAME for global_token itself */
	double effect;               /* parity_effect against global_token's gradient (0 for it) */
	double factor_gap;           /* see parity_control_of (0 for global_token) */
	double loss;
	int required;                /* whether its verdict counts */
	enum parity_verdict verdict;
};

struct parity_result {
	struct reference_result ref;
	int world, accumulation, reduce_avg, rank_split; /* of the settings compared under */
	int unit;                     /* enum norm_unit: what weighs the same */
	double atol, rtol;
	struct parity_mode_result modes[NORM_MODES]; /* by enum norm_mode; see present */
	/* exact mode ([train] shards > 0): global_token's gradient and loss must be the
	 * 1-device reference's bit for bit (the same K shards on one device, engine.h) */
	int shards, shard_order;  /* 0: default mode */
	size_t bits_differ;       /* components whose bits differ from the reference's */
	int loss_bits_differ;     /* whether the window loss differs in any bit */
	int ok; /* global_token passed and every required control behaved as required (and,
		   in exact mode, no bit differs) */
};
/* Exact mode's line: "bitwise: D of N components differ from the 1-device reference"
 * and whether the loss does ("" outside exact mode). */
void parity_bitwise_line(const struct parity_result *r, char *out, size_t cap);
/* The number of components of a and b (n each) whose bits differ. */
size_t parity_bits_differ(const float *a, const float *b, size_t n);

/* What parity --dump receives (arg: the hooks' own); both may be NULL. */
struct parity_hooks {
	void *arg;
	/* after the reference: r at the window's start, the reference gradient */
	int (*reference)(void *arg, const struct run *r, const float *ref, struct err *e);
	/* after each normalization: r->eng->host_reduced and host_local[] hold its gradients */
	int (*mode)(void *arg, const struct run *r, int mode, struct err *e);
};

/* Window 1 of run r (opened at its start) under every normalization against its
 * reference, with the tolerances of s; h may be NULL. res is filled also when a check
 * fails (res->ok = 0); free it with parity_result_free whatever the return. */
int parity_run(struct run *r, const struct settings *s, const struct parity_hooks *h,
	       struct parity_result *res, struct err *e);
void parity_result_free(struct parity_result *res);

/* ---- empty windows ---- */

struct empty_window_result {
	int ranks;
	int declined, updated;  /* a window without tokens: the engine declined it; an update
				   was applied all the same */
	int declined_by_all;    /* declined and not updated */
	int local_checked;      /* W > 1: a rank without tokens while N > 0 was compared */
	int64_t local_N;
	struct parity_stats local; /* that window's gradient against its reference */
	int local_matches;      /* it matched (or W = 1: nothing to compare) */
	int ok;
};

/* A globally empty window must be declined by every rank together (no hang, no rank
 * inside a collective the others skip); a rank without tokens while N > 0 must still
 * take part and the gradient must match the reference (rank 0 gets nothing, the others
 * one sequence per microbatch). */
int empty_window_run(struct run *r, const struct settings *s, struct empty_window_result *res,
		     struct err *e);

/* The window as JSON (a json_t *): ranks, microbatches, ids, token counts. */
void *parity_window_json(const struct window *w);
/* json_real(x), or null when x is NaN or infinite (JSON has neither). */
void *parity_json_number(double x);

#endif
