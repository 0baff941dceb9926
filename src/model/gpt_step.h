/*
 * gpt_step: the GPT's forward, backward and evaluation through the device interface
 * (docs/gpt.md has the formulas).
 */
#ifndef DDPTOK_GPT_STEP_H
#define DDPTOK_GPT_STEP_H

#include "model_shape.h"

/* the model interface's step and eval (model_shape.h) */
int gpt_step(struct model_ws *ws, const float *params, float *grads,
	     const struct model_batch *b, float scale, double loss_divisor, double *loss_acc,
	     struct err *e);
int gpt_eval(struct model_ws *ws, const float *params, const struct model_batch *b,
	     double *loss_sum, int64_t *hits, struct err *e);
/* The forward's logits of every row of b (rows x vocabulary) into host_logits. */
int gpt_logits(struct model_ws *ws, const float *params, const struct model_batch *b,
	       float *host_logits, struct err *e);

#endif
