/*
 * sample_cache: the GPT's forward one row at a time with cached keys and values (see
 * sample_cache.h; gpt_step.c is the forward of whole batches it follows).
 */
#include "sample_cache.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_shape.h"
#include "gpt_ws.h"
#include "kmath.h"

/* offset of layer l's block of tensor t */
static const float *tensor(const struct sample_cache *c, int t, int l)
{
	const struct param_info *p = &c->m->p[t];
	return c->params + p->offset + (size_t)l * (p->count / (size_t)GPT_L(c->m));
}

int sample_cache_open(struct sample_cache *c, struct dev *d, const struct model_shape *m,
		      const float *params, struct err *e)
{
	size_t C = (size_t)GPT_C(m), T = (size_t)GPT_T(m), L = (size_t)GPT_L(m);
	size_t floats = L * T * 3 * C + 4 * C + 8 * C + T + 2 + (size_t)m->vocab;
	memset(c, 0, sizeof *c);
	c->dev = d;
	c->m = m;
	c->params = params;
	if (!(c->arena = calloc(floats, sizeof(float))))
		return ERR(e, ERR_NOMEM, "sample: out of memory for the cache of keys and values "
			   "(%zu floats)", floats);
	float *p = c->arena;
	c->qkv = p, p += L * T * 3 * C;
	c->x = p, p += C;
	c->mid = p, p += C;
	c->ln = p, p += C;
	c->att = p, p += C;
	c->big = p, p += 8 * C; /* fc before the GELU, and after it */
	c->sc = p, p += T;
	c->mean = p++;
	c->rstd = p++;
	c->logits = p;
	return ERR_OK;
}

void sample_cache_close(struct sample_cache *c)
{
	free(c->arena);
	memset(c, 0, sizeof *c);
}

void sample_cache_reset(struct sample_cache *c)
{
	c->rows = 0;
}

/* out (1 x n) = in (1 x k) w^T + bias, added onto out when `acc` (the residual stream) */
static int row_linear(struct dev *d, int n, int k, const float *in, const float *w,
		      const float *bias, int acc, float *out, struct err *e)
{
	ERR_TRY(d->ops->gemm(d, 0, 1, 1, n, k, 1.0f, in, k, w, k, acc ? 1.0f : 0.0f, out, n, e));
	return d->ops->bias_add(d, 1, n, bias, out, e);
}

/* c->att = the heads' attention of row t's q over the cached rows 0..t of layer l */
static int row_attention(struct sample_cache *c, const float *qkv, int t, struct err *e)
{
	struct dev *d = c->dev;
	int C = GPT_C(c->m), H = GPT_H(c->m), hd = C / H, n = t + 1;
	const float *row = qkv + (size_t)t * 3 * C;
	for (int h = 0; h < H; h++) {
		const float *q = row + (size_t)h * hd, *k = qkv + C + (size_t)h * hd;
		ERR_TRY(d->ops->gemm(d, 0, 1, 1, n, hd, 1.0f, q, 3 * C, k, 3 * C, 0.0f, c->sc, n,
				     e));
		/* the last row of the causal softmax of n rows: every cached row is visible */
		km_causal_softmax_row(c->sc, t, n, 1.0f / sqrtf((float)hd));
		ERR_TRY(d->ops->gemm(d, 0, 0, 1, hd, n, 1.0f, c->sc, n, k + C, 3 * C, 0.0f,
				     c->att + (size_t)h * hd, C, e));
	}
	return ERR_OK;
}

static int row_layer(struct sample_cache *c, int l, int t, struct err *e)
{
	struct dev *d = c->dev;
	int C = GPT_C(c->m);
	float *qkv = c->qkv + (size_t)l * GPT_T(c->m) * 3 * C;
	ERR_TRY(d->ops->layernorm(d, 1, C, c->x, tensor(c, GPT_LN1W, l), tensor(c, GPT_LN1B, l),
				  c->ln, c->mean, c->rstd, e));
	ERR_TRY(row_linear(d, 3 * C, C, c->ln, tensor(c, GPT_QKVW, l), tensor(c, GPT_QKVB, l), 0,
			   qkv + (size_t)t * 3 * C, e));
	ERR_TRY(row_attention(c, qkv, t, e));
	memcpy(c->mid, c->x, sizeof(float) * (size_t)C);
	ERR_TRY(row_linear(d, C, C, c->att, tensor(c, GPT_ATTPROJW, l), tensor(c, GPT_ATTPROJB, l),
			   1, c->mid, e));
	ERR_TRY(d->ops->layernorm(d, 1, C, c->mid, tensor(c, GPT_LN2W, l), tensor(c, GPT_LN2B, l),
				  c->ln, c->mean, c->rstd, e));
	ERR_TRY(row_linear(d, 4 * C, C, c->ln, tensor(c, GPT_FCW, l), tensor(c, GPT_FCB, l), 0,
			   c->big, e));
	ERR_TRY(d->ops->gelu(d, 4 * C, c->big, c->big + 4 * C, e));
	memcpy(c->x, c->mid, sizeof(float) * (size_t)C);
	return row_linear(d, C, 4 * C, c->big + 4 * C, tensor(c, GPT_FCPROJW, l),
			  tensor(c, GPT_FCPROJB, l), 1, c->x, e);
}

int sample_cache_push(struct sample_cache *c, int32_t input, struct err *e)
{
	const struct model_shape *m = c->m;
	const struct param_info *p = m->p;
	struct dev *d = c->dev;
	int t = c->rows, C = GPT_C(m);
	if (t >= GPT_T(m))
		return ERR(e, ERR_CONFIG, "sample: the cache holds model.context = %d rows",
			   GPT_T(m));
	ERR_TRY(d->ops->embed_pos(d, 1, C, &input, &t, c->params + p[GPT_WTE].offset,
				  c->params + p[GPT_WPE].offset, c->x, e));
	for (int l = 0; l < GPT_L(m); l++)
		ERR_TRY(row_layer(c, l, t, e));
	ERR_TRY(d->ops->layernorm(d, 1, C, c->x, c->params + p[GPT_LNFW].offset,
				  c->params + p[GPT_LNFB].offset, c->ln, c->mean, c->rstd, e));
	ERR_TRY(d->ops->gemm(d, 0, 1, 1, m->vocab, C, 1.0f, c->ln, C,
			     c->params + p[GPT_WTE].offset, C, 0.0f, c->logits, m->vocab, e));
	c->rows++;
	return ERR_OK;
}

void sample_cache_adopt(struct sample_cache *c, const struct model_ws *ws, int rows)
{
	const struct gpt_ws *g = (const struct gpt_ws *)ws;
	size_t C3 = 3 * (size_t)GPT_C(c->m), R = (size_t)rows, T = (size_t)GPT_T(c->m);
	for (int l = 0; l < GPT_L(c->m); l++) /* layer l's q, k, v: rows x 3C from l * R x 3C */
		memcpy(c->qkv + (size_t)l * T * C3, g->qkv + (size_t)l * R * C3,
		       sizeof(float) * R * C3);
	c->rows = rows;
}
