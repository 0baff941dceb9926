/*
 * gpt_shape: the GPT's tensor list, initialization and arithmetic (see gpt_shape.h).
 *
 * The initial values must be the same on every platform: the normal draws use the
 * project's integer generator (prng.h) and the polar method with a logarithm of our own
 * (double additions, multiplications and divisions, and sqrt, all correctly rounded), no
 * libm function whose last bit may differ between C libraries.
 */
#include "gpt_shape.h"

#include <math.h>
#include <stdio.h>

#define GPT_INIT_STD 0.02

void gpt_shape_fill(struct model_shape *m, const struct model_ops *ops, int vocab, int layers,
		    int heads, int width, int context)
{
	int L = layers, C = width;
	model_shape_begin(m, ops, vocab);
	m->dim[GPT_LAYERS] = layers;
	m->dim[GPT_HEADS] = heads;
	m->dim[GPT_WIDTH] = width;
	m->dim[GPT_CONTEXT] = context;
	/* llm.c's order; per-layer tensors stacked over the layers */
	model_shape_add(m, "wte", vocab, C, 1);
	model_shape_add(m, "wpe", context, C, 1);
	model_shape_add(m, "ln1w", L, C, 0);
	model_shape_add(m, "ln1b", L, C, 0);
	model_shape_add(m, "qkvw", L * 3 * C, C, 1);
	model_shape_add(m, "qkvb", L, 3 * C, 0);
	model_shape_add(m, "attprojw", L * C, C, 1);
	model_shape_add(m, "attprojb", L, C, 0);
	model_shape_add(m, "ln2w", L, C, 0);
	model_shape_add(m, "ln2b", L, C, 0);
	model_shape_add(m, "fcw", L * 4 * C, C, 1);
	model_shape_add(m, "fcb", L, 4 * C, 0);
	model_shape_add(m, "fcprojw", L * C, 4 * C, 1);
	model_shape_add(m, "fcprojb", L, C, 0);
	model_shape_add(m, "lnfw", C, 1, 0);
	model_shape_add(m, "lnfb", C, 1, 0);
}

int gpt_shape_check(const struct model_shape *m, struct err *e)
{
	if (GPT_C(m) % GPT_H(m) != 0)
		return ERR(e, ERR_CONFIG, "model.heads = %d does not divide model.width = %d",
			   GPT_H(m), GPT_C(m));
	return ERR_OK;
}

/* log(x) for a finite x > 0: x = f 2^k with f in [sqrt(1/2), sqrt(2)) (frexp is exact),
 * log f = 2 atanh(s), s = (f - 1) / (f + 1), |s| < 0.172, by its series to s^27 (the next
 * term is below 1e-22) */
static double log_own(double x)
{
	int k;
	double f = frexp(x, &k);
	if (f < 0.70710678118654752) {
		f *= 2.0;
		k--;
	}
	double s = (f - 1.0) / (f + 1.0), s2 = s * s, term = s, sum = 0.0;
	for (int n = 1; n <= 27; n += 2) {
		sum += term / n;
		term *= s2;
	}
	return 2.0 * sum + k * 0.69314718055994530942;
}

/* uniform in (-1, 1) with 53 random bits */
static double uniform_pm1(struct prng *r)
{
	return 2.0 * ((double)(prng_next(r) >> 11) * (1.0 / 9007199254740992.0)) - 1.0;
}

/* Marsaglia's polar method; the second value of each pair is not used, so that a draw
 * depends on nothing but the generator's state */
double gpt_normal(struct prng *r)
{
	for (;;) {
		double u = uniform_pm1(r), v = uniform_pm1(r), s = u * u + v * v;
		if (s > 0.0 && s < 1.0)
			return u * sqrt(-2.0 * log_own(s) / s);
	}
}

void gpt_init_values(const struct model_shape *m, int t, struct prng *r, float *out,
		     size_t count)
{
	double resid = GPT_INIT_STD / sqrt(2.0 * GPT_L(m));
	int ln_weight = t == GPT_LN1W || t == GPT_LN2W || t == GPT_LNFW;
	double std = t == GPT_ATTPROJW || t == GPT_FCPROJW ? resid : GPT_INIT_STD;
	for (size_t k = 0; k < count; k++)
		/* the tensors without decay are the biases and LayerNorms */
		out[k] = ln_weight ? 1.0f : !m->p[t].decay ? 0.0f : (float)(std * gpt_normal(r));
}

void gpt_init_params(const struct model_shape *m, uint64_t seed, float *host_params)
{
	struct prng r;
	prng_seed(&r, seed, GPT_INIT_STREAM);
	for (int t = 0; t < GPT_NTENSORS; t++)
		gpt_init_values(m, t, &r, host_params + m->p[t].offset, m->p[t].count);
}

void gpt_describe(const struct model_shape *m, char *out, size_t cap)
{
	snprintf(out, cap, "vocab %d, layers %d, heads %d, width %d, context %d", m->vocab,
		 GPT_L(m), GPT_H(m), GPT_C(m), GPT_T(m));
}

/* Arithmetic per token, 2 FLOP per multiply-add: 6 N for the GEMMs of the weights (N
 * counts the matrices, wpe excepted: a table read). The attention's is per sequence
 * (gpt_sequence_flop). */
double gpt_flop_per_token(const struct model_shape *m)
{
	double C = GPT_C(m), L = GPT_L(m), V = m->vocab;
	return 6.0 * (V * C + L * (3 * C * C + C * C + 4 * C * C + 4 * C * C));
}

/* The attention's arithmetic over a document of len positions, counting only the pairs
 * that attend: position i sees positions 0..i of its own document, len (len + 1) / 2
 * pairs. Per pair and layer C multiply-adds in each of QK^T and PV forward and of dP, dV,
 * dQ and dK backward: 12 C FLOP. The work the implementation adds (the masked half of
 * each product, P recomputed in the backward) is not training math. */
double gpt_sequence_flop(const struct model_shape *m, int len)
{
	double C = GPT_C(m), L = GPT_L(m), pairs = 0.5 * len * (len + 1.0);
	return L * 12.0 * C * pairs;
}

struct model_gemm gpt_largest_gemm(const struct model_shape *m, int rows)
{
	int C = GPT_C(m), V = m->vocab;
	/* the LM head (rows x V x C) or an MLP matrix (rows x 4C x C) */
	if (V > 4 * C)
		return (struct model_gemm){rows, V, C};
	return (struct model_gemm){rows, 4 * C, C};
}
