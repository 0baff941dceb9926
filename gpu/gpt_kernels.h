/*
 * gpt_kernels: the CUDA backend's operations for the GPT model (runtime/dev.h: embed_pos,
 * bias_add, layernorm and its backward, gelu and its backward, causal_softmax and its
 * backward), each the host function of the same name in runtime/dev_host_kernels.c on
 * the element math of runtime/kmath.h. dev_cuda.cu puts them in its table of operations.
 * C++ (CUDA) callers only.
 */
#ifndef DDPTOK_GPT_KERNELS_H
#define DDPTOK_GPT_KERNELS_H

#include <stdint.h>

extern "C" {
#include "dev.h"
#include "err.h"
}

int gpt_cu_embed_pos(struct dev *d, int rows, int dim, const int32_t *ids, const int32_t *pos,
		     const float *wte, const float *wpe, float *x, struct err *e);
int gpt_cu_bias_add(struct dev *d, int rows, int cols, const float *bias, float *x,
		    struct err *e);
int gpt_cu_layernorm(struct dev *d, int rows, int cols, const float *x, const float *w,
		     const float *b, float *out, float *mean, float *rstd, struct err *e);
int gpt_cu_layernorm_backward(struct dev *d, int rows, int cols, const float *x,
			      const float *w, const float *mean, const float *rstd,
			      const float *dout, float *dx, float *dw, float *db, struct err *e);
int gpt_cu_gelu(struct dev *d, int n, const float *x, float *out, struct err *e);
int gpt_cu_gelu_backward(struct dev *d, int n, const float *x, float *dout, struct err *e);
int gpt_cu_causal_softmax(struct dev *d, int heads, int n, size_t stride, float scale,
			  float *s, struct err *e);
int gpt_cu_causal_softmax_backward(struct dev *d, int heads, int n, size_t stride,
				   float scale, const float *p, float *dp, struct err *e);

#endif
