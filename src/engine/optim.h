/*
 * optim: the optimizer's host-side arithmetic: the learning rate of each update (warmup
 * then a constant, cosine or linear schedule), the factor of global gradient-norm
 * clipping, and AdamW's bias corrections. All in double, from values every rank holds
 * identically (the update count, the reduced gradient's norm), so every replica takes the
 * same step without a collective; the element updates themselves are km_sgd and km_adamw
 * (kmath.h), run by the device interface.
 *
 * The formulas, for update number t = 1, 2, ... (t = updates already taken + 1), base
 * rate lr, floor lr_min, warmup w and horizon T (train.updates):
 *   t <= w:     lr * t / w
 *   otherwise:  q = (t - w) / (T - w), clamped to [0, 1]
 *     constant  lr
 *     cosine    lr_min + (lr - lr_min) * (1 + cos(pi * q)) / 2
 *     linear    lr + (lr_min - lr) * q
 * The rate is rounded to float once, where the element update takes it. Clipping: with
 * the reduced gradient's L2 norm n (its squares added in double in the device's fixed
 * order: dev.h sum_squares) and a threshold c > 0, the gradient is multiplied by
 * (float)(c / (n + 1e-6)) when n > c. docs/optimizers.md has the whole step.
 */
#ifndef DDPTOK_OPTIM_H
#define DDPTOK_OPTIM_H

#include <stdint.h>

#include "settings.h" /* enum optim_kind, enum optim_schedule */

struct model_shape;

/* What decides the learning rate of every update. */
struct lr_plan {
	int schedule;     /* enum optim_schedule */
	double lr, lr_min;
	int64_t warmup;   /* updates of linear warmup (0: none) */
	int64_t horizon;  /* the update the schedule ends at (train.updates) */
};

/* The learning rate of update number t (t >= 1). */
double optim_lr(const struct lr_plan *p, int64_t t);
/* The factor the reduced gradient is multiplied by before the update: 1 when clip <= 0
 * (off) or norm <= clip, else clip / (norm + 1e-6). */
double optim_clip_factor(double norm, double clip);
/* AdamW's bias corrections of update number t: 1 - beta^t. */
double optim_bias_correction(double beta, int64_t t);
/* The optimizer's state vectors of n_params floats each, one after the other in one
 * buffer: SGD's momentum (1), AdamW's first then second moment (2). */
int optim_state_vectors(int kind);
/* The ranges of the flat parameter vector that AdamW's weight decay applies to (the
 * model's matrices), as dev_ops.adamw's table: each run of consecutive tensors with
 * decay one [lo, hi) pair in ranges (room for MODEL_MAX_TENSORS pairs); returns the
 * number of pairs. The tensors tile the vector in order, so the pairs ascend. */
int optim_decay_ranges(const struct model_shape *m, int32_t *ranges);
/* "sgd" or "adamw", as train.optimizer spells it. */
const char *optim_kind_name(int kind);

#endif
