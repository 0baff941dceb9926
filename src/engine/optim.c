/*
 * optim: learning-rate schedules, clipping factor and bias corrections (see optim.h).
 */
#include "optim.h"

#include <math.h>

#include "model_shape.h"

double optim_lr(const struct lr_plan *p, int64_t t)
{
	double q;

	if (p->warmup > 0 && t <= p->warmup)
		return p->lr * (double)t / (double)p->warmup;
	if (p->schedule == SCHEDULE_CONSTANT)
		return p->lr;
	/* a horizon at or before the warmup's end leaves nothing to decay over */
	q = p->horizon > p->warmup ? (double)(t - p->warmup) / (double)(p->horizon - p->warmup)
				   : 1.0;
	q = q < 0.0 ? 0.0 : q > 1.0 ? 1.0 : q;
	if (p->schedule == SCHEDULE_COSINE)
		return p->lr_min + (p->lr - p->lr_min) * (1.0 + cos(M_PI * q)) / 2.0;
	return p->lr + (p->lr_min - p->lr) * q;
}

double optim_clip_factor(double norm, double clip)
{
	if (clip <= 0.0 || !(norm > clip))
		return 1.0;
	return clip / (norm + 1e-6);
}

double optim_bias_correction(double beta, int64_t t)
{
	return 1.0 - pow(beta, (double)t);
}

int optim_state_vectors(int kind)
{
	return kind == OPTIM_ADAMW ? 2 : 1;
}

const char *optim_kind_name(int kind)
{
	return kind == OPTIM_ADAMW ? "adamw" : "sgd";
}

int optim_decay_ranges(const struct model_shape *m, int32_t *ranges)
{
	int n = 0;
	for (int i = 0, j; i < m->n_tensors; i = j) {
		for (j = i + 1; j < m->n_tensors && m->p[j].decay == m->p[i].decay; j++)
			;
		if (!m->p[i].decay)
			continue;
		ranges[2 * n] = (int32_t)m->p[i].offset;
		ranges[2 * n + 1] = (int32_t)(m->p[j - 1].offset + m->p[j - 1].count);
		n++;
	}
	return n;
}
