/*
 * kmath: the element math shared by the host backend and the CUDA kernels.
 *
 * Every formula that a kernel applies to one element (or one row) lives here once, as
 * a static inline function that compiles as C and as CUDA device code, so that the CPU
 * tests exercise exactly the formulas the GPU runs. exp and tanh are our own: plain
 * float arithmetic and bit manipulation, no libm calls, so that compilers vectorize the
 * host loops without -ffast-math (which would also drop the NaN/Inf checks the runtime
 * relies on) and both backends evaluate the same polynomial.
 *
 *   km_exp   Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2, degree-6 polynomial,
 *            2^k built in the exponent bits; relative error about 2e-7; 0 below -87.3,
 *            saturates at e^88; NaN propagates.
 *   km_tanh  odd Taylor polynomial (through x^9) for |x| < 0.25, 1 - 2/(e^{2|x|}+1)
 *            elsewhere, sign restored; absolute error below 3e-7.
 *   km_fingerprint_term  the term of one float in a vector's fingerprint (the replica
 *            check): its bits and its index, mixed.
 */
#ifndef DDPTOK_KMATH_H
#define DDPTOK_KMATH_H

#include <math.h>
#include <stdint.h>

#include "mix64.h"

#ifdef __CUDACC__
#define KM_FN static __host__ __device__ __forceinline__
#else
#define KM_FN static inline
#endif

KM_FN float km_from_bits(uint32_t u)
{
#ifdef __CUDA_ARCH__
	return __uint_as_float(u);
#else
	union { uint32_t u; float f; } v;
	v.u = u;
	return v.f;
#endif
}

KM_FN uint32_t km_to_bits(float f)
{
#ifdef __CUDA_ARCH__
	return __float_as_uint(f);
#else
	union { float f; uint32_t u; } v;
	v.f = f;
	return v.u;
#endif
}

/*
 * Selections are written as bit blends: cond ? a : b is (a & mask) | (b & ~mask) with
 * mask all ones when cond holds. A C conditional between floats lets the compiler sink
 * each arm (a division among them) under a branch, which it will not turn back into a
 * vector select unless floating-point traps are declared irrelevant; integer masks
 * leave no branch to convert, so the loops vectorize under the default math flags. The
 * value chosen is the one the conditional would give, bit for bit.
 */
KM_FN uint32_t km_mask(int cond)
{
	return 0u - (uint32_t)(cond != 0);
}

KM_FN float km_select(uint32_t mask, float a, float b)
{
	return km_from_bits((km_to_bits(a) & mask) | (km_to_bits(b) & ~mask));
}

KM_FN float km_exp(float x)
{
	const float hi = 88.0f, lo = -87.3f;
	/* no clamp at lo: below it the value computed is replaced by 0 at the end, whatever
	 * it is (integer arithmetic on its bits is unsigned, floats have no traps) */
	float xc = km_select(km_mask(x > hi), hi, x);
	/* k = round(x / ln2) with the 1.5 * 2^23 trick (exact under round-to-nearest) */
	const float shifter = 12582912.0f;
	float shifted = xc * 1.44269504088896341f + shifter;
	float kf = shifted - shifter;
	float r = xc - kf * 0.693145751953125f;   /* ln2 high part (exact product) */
	r = r - kf * 1.42860682030941723e-06f;    /* ln2 low part */
	float p = 1.0f / 720.0f;
	p = p * r + 1.0f / 120.0f;
	p = p * r + 1.0f / 24.0f;
	p = p * r + 1.0f / 6.0f;
	p = p * r + 0.5f;
	p = p * r + 1.0f;
	p = p * r + 1.0f;
	/* 2^k: k is read from the low mantissa bits of `shifted` (exact, since |k| <= 127
	 * for lo <= x <= hi) instead of converting kf to an integer, which for a NaN x would
	 * be undefined; the NaN product below decides that result anyway */
	uint32_t k = km_to_bits(shifted) - km_to_bits(shifter);
	float scale = km_from_bits((k + 127u) << 23);
	float y = p * scale;
	return km_select(km_mask(x < lo), 0.0f, y);
}

KM_FN float km_tanh(float x)
{
	/* the sign is restored for x < 0 only: tanh(-0) gives +0, as it always has */
	const uint32_t flip = km_mask(x < 0.0f) & 0x80000000u;
	float ax = km_from_bits(km_to_bits(x) & 0x7fffffffu);
	/* small |x|: x - x^3/3 + 2x^5/15 - 17x^7/315 + 62x^9/2835 */
	float x2 = ax * ax;
	float s = 62.0f / 2835.0f;
	s = s * x2 - 17.0f / 315.0f;
	s = s * x2 + 2.0f / 15.0f;
	s = s * x2 - 1.0f / 3.0f;
	s = s * x2 * ax + ax;
	float big = 1.0f - 2.0f / (km_exp(2.0f * ax) + 1.0f);
	float t = km_select(km_mask(ax < 0.25f), s, big);
	/* tanh is odd; a NaN comes back as it came */
	float y = km_from_bits(km_to_bits(t) ^ flip);
	return km_select(km_mask(x != x), x, y);
}

/* derivative of tanh through its output h */
KM_FN float km_tanh_backward(float h, float dh)
{
	return dh * (1.0f - h * h);
}

/* PyTorch SGD: g' = g + wd*p; buf = first ? g' : mu*buf + g'; p -= lr*buf */
KM_FN void km_sgd(float *p, float g, float *buf, float lr, float momentum, float weight_decay,
		  int first)
{
	float gd = weight_decay != 0.0f ? g + weight_decay * *p : g;
	float b = first ? gd : momentum * *buf + gd;
	*buf = b;
	*p = *p - lr * b;
}

/* AdamW with decoupled weight decay, one element (the update rule of docs: optimizers):
 *   p' = p - lr * wd * p                     (decay first, on the old parameter)
 *   m' = beta1 * m + (1 - beta1) * g
 *   v' = beta2 * v + (1 - beta2) * g * g
 *   p'' = p' - (lr / bc1) * m' / (sqrt(v' / bc2) + eps)
 * bc1 = 1 - beta1^t and bc2 = 1 - beta2^t (t = 1 for the first update) are computed once
 * per step in double by the caller and rounded to float; every operation here is one
 * correctly rounded float operation (sqrtf and division included), so both backends give
 * the same bits. wd = 0 for tensors that take no decay. */
KM_FN void km_adamw(float *p, float g, float *m, float *v, float lr, float beta1, float beta2,
		    float eps, float wd, float bc1, float bc2)
{
	float pd = *p - (lr * wd) * *p;
	float m1 = beta1 * *m + (1.0f - beta1) * g;
	float v1 = beta2 * *v + (1.0f - beta2) * (g * g);
	float denom = sqrtf(v1 / bc2) + eps;
	*m = m1;
	*v = v1;
	*p = pd - (lr / bc1) * (m1 / denom);
}

/* loss of one row from its max, sum of km_exp(z - max) and target logit z_t, with the
 * z-loss coefficient zc and the target's class weight: weight * (lse - z_t + zc * lse^2)
 * where lse = max + log(sum) (log Z), all in double, rounded once. The z term is added only when zc != 0, so zc = 0 gives the bits
 * of the plain cross-entropy whatever lse is (0 * inf would be a NaN). */
KM_FN float km_xent_loss(float mx, float sum, float zt, float zc, float weight)
{
	double lse = (double)mx + log((double)sum);
	double loss = lse - (double)zt;
	if (zc != 0.0f)
		loss += (double)zc * lse * lse;
	if (weight != 1.0f) /* the class weight of the target; 1 leaves the bits alone */
		loss *= (double)weight;
	return (float)loss;
}

/* What the row's 1 / sum becomes with the z-loss: d(zc lse^2)/dz_j = 2 zc lse softmax_j,
 * so the softmax part of the gradient is (1 + 2 zc lse) softmax_j, folded into the
 * reciprocal km_xent_grad multiplies by (the factor in double, rounded once; zc = 0
 * returns inv_sum itself, bit for bit). */
KM_FN float km_xent_inv_z(float inv_sum, float mx, float sum, float zc)
{
	if (zc == 0.0f)
		return inv_sum;
	double lse = (double)mx + log((double)sum);
	return (float)((double)inv_sum * (1.0 + 2.0 * (double)zc * lse));
}

/* gradient of scale * loss for one logit: scale * (softmax_j - [j == target]) */
KM_FN float km_xent_grad(float ex, float inv_sum, float scale, int is_target)
{
	return scale * (ex * inv_sum - km_select(km_mask(is_target), 1.0f, 0.0f));
}

KM_FN int km_isfinite(float x)
{
	return x - x == 0.0f; /* false for NaN and +-Inf */
}

/* The fingerprint of a float vector x is the sum modulo 2^64 of this term over its
 * elements, index i < 2^32 and word = the bits of x[i]. The mix is a bijection of
 * (i, word), so a changed bit changes its term; a term depends on where its word sits,
 * so two swapped words change the sum; integer addition modulo 2^64 is associative and
 * commutative, so any split of the vector and any order of adding (host loop, GPU grid)
 * gives the same 64 bits. */
KM_FN uint64_t km_fingerprint_term(uint32_t index, uint32_t word)
{
	return mix64(((uint64_t)index << 32) | word);
}

/* Row maximum (the first maximum wins ties for argmax) */
KM_FN float km_row_max(const float *row, const float *bias, int n, int *arg)
{
	float m = row[0] + bias[0];
	int a = 0;
	for (int j = 1; j < n; j++) {
		float v = row[j] + bias[j];
		if (v > m) {
			m = v;
			a = j;
		}
	}
	if (arg)
		*arg = a;
	return m;
}

/* ---- the GPT model's element math (docs/gpt.md) ---- */

/* GELU, the tanh approximation of GPT-2:
 *   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3) */
#define KM_GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */
#define KM_GELU_CUBIC 0.044715f

KM_FN float km_gelu(float x)
{
	float u = KM_GELU_SCALE * (x + KM_GELU_CUBIC * x * x * x);
	return 0.5f * x * (1.0f + km_tanh(u));
}

/* d gelu(x) / dx times dout:
 *   0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2),  t = tanh(u) */
KM_FN float km_gelu_backward(float x, float dout)
{
	float u = KM_GELU_SCALE * (x + KM_GELU_CUBIC * x * x * x);
	float t = km_tanh(u);
	float du = KM_GELU_SCALE * (1.0f + 3.0f * KM_GELU_CUBIC * x * x);
	return dout * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
}

/* LayerNorm's epsilon, added to the biased variance */
#define KM_LN_EPS 1e-5f

/* 1 / sqrt(variance + eps) from the sum of n squared deviations */
KM_FN float km_ln_rstd(float squares, int n)
{
	return 1.0f / sqrtf(squares / (float)n + KM_LN_EPS);
}

/* mean and 1 / sqrt(variance + eps) of one row of n floats: the sum of x, then the sum
 * of (x - mean)^2, each j = 0..n-1 in order, in float */
KM_FN void km_ln_stats(const float *x, int n, float *mean, float *rstd)
{
	float s = 0.0f;
	for (int j = 0; j < n; j++)
		s += x[j];
	float m = s / (float)n;
	float v = 0.0f;
	for (int j = 0; j < n; j++) {
		float c = x[j] - m;
		v += c * c;
	}
	*mean = m;
	*rstd = km_ln_rstd(v, n);
}

/* one normalized element */
KM_FN float km_ln_hat(float x, float mean, float rstd)
{
	return (x - mean) * rstd;
}

/* The two row means LayerNorm's backward needs, j in order:
 *   a = mean_j (w_j dout_j),  b = mean_j (w_j dout_j xhat_j) */
KM_FN void km_ln_back_means(const float *x, const float *w, const float *dout, int n,
			    float mean, float rstd, float *a, float *b)
{
	float sa = 0.0f, sb = 0.0f;
	for (int j = 0; j < n; j++) {
		float dn = w[j] * dout[j];
		sa += dn;
		sb += dn * km_ln_hat(x[j], mean, rstd);
	}
	*a = sa / (float)n;
	*b = sb / (float)n;
}

/* d x_j: (w_j dout_j - a - xhat_j b) rstd */
KM_FN float km_ln_back_dx(float x, float w, float dout, float mean, float rstd, float a,
			  float b)
{
	return (w * dout - a - km_ln_hat(x, mean, rstd) * b) * rstd;
}

/* Row i of the causal softmax of an n x n score matrix s (ld n), in place:
 *   p_ij = exp(scale s_ij - max_k<=i scale s_ik) / sum_k<=i exp(...)  for j <= i, 0 after;
 * the maximum and the sum run k = 0..i in order, exp is km_exp. */
KM_FN void km_causal_softmax_row(float *row, int i, int n, float scale)
{
	float mx = scale * row[0];
	for (int j = 1; j <= i; j++) {
		float v = scale * row[j];
		mx = km_select(km_mask(v > mx), v, mx);
	}
	float sum = 0.0f;
	for (int j = 0; j <= i; j++) {
		float ex = km_exp(scale * row[j] - mx);
		row[j] = ex;
		sum += ex;
	}
	float inv = 1.0f / sum;
	for (int j = 0; j <= i; j++)
		row[j] = row[j] * inv;
	for (int j = i + 1; j < n; j++)
		row[j] = 0.0f;
}

/* Row i of its backward, in place on dp (the gradient of the probabilities), given the
 * probabilities p: ds_ij = scale p_ij (dp_ij - sum_k<=i p_ik dp_ik) for j <= i, 0 after;
 * the sum runs k in order. ds is the gradient of the raw scores s. */
KM_FN void km_causal_softmax_back_row(const float *p, float *dp, int i, int n, float scale)
{
	float dot = 0.0f;
	for (int j = 0; j <= i; j++)
		dot += p[j] * dp[j];
	for (int j = 0; j <= i; j++)
		dp[j] = scale * (p[j] * (dp[j] - dot));
	for (int j = i + 1; j < n; j++)
		dp[j] = 0.0f;
}

#endif
