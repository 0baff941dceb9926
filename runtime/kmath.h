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

/* loss of one row from its max, sum of km_exp(z - max) and target logit z_t:
 * logsumexp - z_t = max + log(sum) - z_t, evaluated in double, rounded once */
KM_FN float km_xent_loss(float mx, float sum, float zt)
{
	return (float)((double)mx + log((double)sum) - (double)zt);
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

#endif
