/*
 * gpt_step: forward and backward of the GPT through the device interface (see
 * gpt_step.h and docs/gpt.md).
 *
 * Per layer l, on the residual stream x (rows x C):
 *   a = LN1(x); qkv = a qkvw^T + qkvb; per segment, its heads batched:
 *   P = causal_softmax(scale q k^T), o = P v; m = x + o attprojw^T + attprojb;
 *   c = LN2(m); h = c fcw^T + fcb; x' = m + gelu(h) fcprojw^T + fcprojb
 * then logits = LNf(x_L) wte^T. The residual additions are GEMMs with beta = 1 onto a
 * copy of the stream. The backward runs the same steps in reverse with the gradients
 * added into the flat gradient buffer; the attention recomputes P one segment at a
 * time, its heads batched (ws->heads_per_call at once), instead of keeping it.
 */
#include "gpt_step.h"

#include <math.h>

#include "gpt_batch.h"
#include "gpt_shape.h"
#include "gpt_ws.h"

/* The tensors of layer l (or of the model for the others), in params or grads. */
struct layer {
	const float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb,
		*fcprojw, *fcprojb;
};
struct layer_grad {
	float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb,
		*fcprojw, *fcprojb;
};

/* offset of layer l's block of tensor t */
static size_t at(const struct model_shape *m, int t, int l)
{
	return m->p[t].offset + (size_t)l * (m->p[t].count / (size_t)GPT_L(m));
}

static struct layer layer_of(const struct model_shape *m, const float *p, int l)
{
	return (struct layer){
		p + at(m, GPT_LN1W, l), p + at(m, GPT_LN1B, l), p + at(m, GPT_QKVW, l),
		p + at(m, GPT_QKVB, l), p + at(m, GPT_ATTPROJW, l), p + at(m, GPT_ATTPROJB, l),
		p + at(m, GPT_LN2W, l), p + at(m, GPT_LN2B, l), p + at(m, GPT_FCW, l),
		p + at(m, GPT_FCB, l), p + at(m, GPT_FCPROJW, l), p + at(m, GPT_FCPROJB, l),
	};
}

static struct layer_grad layer_grad_of(const struct model_shape *m, float *g, int l)
{
	return (struct layer_grad){
		g + at(m, GPT_LN1W, l), g + at(m, GPT_LN1B, l), g + at(m, GPT_QKVW, l),
		g + at(m, GPT_QKVB, l), g + at(m, GPT_ATTPROJW, l), g + at(m, GPT_ATTPROJB, l),
		g + at(m, GPT_LN2W, l), g + at(m, GPT_LN2B, l), g + at(m, GPT_FCW, l),
		g + at(m, GPT_FCB, l), g + at(m, GPT_FCPROJW, l), g + at(m, GPT_FCPROJB, l),
	};
}

/* Layer l's activations in ws for R rows. */
struct acts {
	float *x, *mid, *next, *ln1, *ln1_mean, *ln1_rstd, *qkv, *att, *ln2, *ln2_mean,
		*ln2_rstd, *fch, *fcg;
};

static struct acts acts_of(const struct gpt_ws *ws, int l, size_t R)
{
	size_t C = (size_t)GPT_C(&ws->shape), RC = R * C, lr = (size_t)l * R;
	return (struct acts){
		ws->resid + 2 * l * RC, ws->resid + (2 * l + 1) * RC, ws->resid + (2 * l + 2) * RC,
		ws->ln1 + l * RC, ws->ln1_mean + lr, ws->ln1_rstd + lr, ws->qkv + 3 * l * RC,
		ws->att + l * RC, ws->ln2 + l * RC, ws->ln2_mean + lr, ws->ln2_rstd + lr,
		ws->fch + 4 * l * RC, ws->fcg + 4 * l * RC,
	};
}

/* ---- attention, a group of heads of one segment per call ---- */

/* Heads [h0, h0 + count) of one segment of n rows from row `first`. Head h0 + i's
 * operands are head h0's moved by i strides (hd columns of qkv, n x n scores), so each
 * product of the group is one gemm_batched (docs/gpt.md). */
struct heads {
	int first, n, h0, count;
};

/* ws->sc = the probabilities of the group's heads, n x n each, n x n apart */
static int heads_probs(struct gpt_ws *ws, const float *qkv, struct heads g, struct err *e)
{
	struct dev *d = ws->dev;
	int C = GPT_C(&ws->shape), hd = C / GPT_H(&ws->shape), n = g.n;
	size_t nn = (size_t)n * n;
	const float *q = qkv + (size_t)g.first * 3 * C + (size_t)g.h0 * hd;
	ERR_TRY(d->ops->gemm_batched(d, 0, 1, n, n, hd, 1.0f, q, 3 * C, hd, q + C, 3 * C, hd,
				     0.0f, ws->sc, n, nn, g.count, e));
	return d->ops->causal_softmax(d, g.count, n, nn, 1.0f / sqrtf((float)hd), ws->sc, e);
}

/* The group of heads from h0 of segment s: ws->heads_per_call heads, fewer in a last
 * group */
static struct heads group_of(const struct gpt_ws *ws, const struct gpt_batch *b, int s, int h0)
{
	int H = GPT_H(&ws->shape), G = ws->heads_per_call;
	return (struct heads){b->seg[2 * s], b->seg[2 * s + 1], h0, H - h0 < G ? H - h0 : G};
}

/* att = P v for the group's heads */
static int heads_forward(struct gpt_ws *ws, struct heads g, const float *qkv, float *att,
			 struct err *e)
{
	struct dev *d = ws->dev;
	int C = GPT_C(&ws->shape), hd = C / GPT_H(&ws->shape), n = g.n;
	const float *v = qkv + (size_t)g.first * 3 * C + 2 * C + (size_t)g.h0 * hd;
	ERR_TRY(heads_probs(ws, qkv, g, e));
	return d->ops->gemm_batched(d, 0, 0, n, hd, n, 1.0f, ws->sc, n, (size_t)n * n, v, 3 * C,
				    hd, 0.0f, att + (size_t)g.first * C + (size_t)g.h0 * hd, C,
				    hd, g.count, e);
}

static int attention_forward(struct gpt_ws *ws, const struct gpt_batch *b, const float *qkv,
			     float *att, struct err *e)
{
	for (int s = 0; s < b->n_seg; s++)
		for (int h0 = 0; h0 < GPT_H(&ws->shape); h0 += ws->heads_per_call)
			ERR_TRY(heads_forward(ws, group_of(ws, b, s, h0), qkv, att, e));
	return ERR_OK;
}

/* the group's part of dqkv from datt: P recomputed, then dP, dV, dS, dQ, dK */
static int heads_backward(struct gpt_ws *ws, struct heads g, const float *qkv,
			  const float *datt, float *dqkv, struct err *e)
{
	struct dev *d = ws->dev;
	const struct dev_ops *o = d->ops;
	int C = GPT_C(&ws->shape), hd = C / GPT_H(&ws->shape), C3 = 3 * C, n = g.n, G = g.count;
	size_t nn = (size_t)n * n, off3 = (size_t)g.first * C3 + (size_t)g.h0 * hd;
	const float *q = qkv + off3, *k = q + C, *v = q + 2 * C;
	const float *dout = datt + (size_t)g.first * C + (size_t)g.h0 * hd;
	float *dq = dqkv + off3, *dk = dq + C, *dv = dq + 2 * C;
	ERR_TRY(heads_probs(ws, qkv, g, e));
	ERR_TRY(o->gemm_batched(d, 0, 1, n, n, hd, 1.0f, dout, C, hd, v, C3, hd, 0.0f, ws->dsc,
				n, nn, G, e));
	ERR_TRY(o->gemm_batched(d, 1, 0, n, hd, n, 1.0f, ws->sc, n, nn, dout, C, hd, 0.0f, dv,
				C3, hd, G, e));
	ERR_TRY(o->causal_softmax_backward(d, G, n, nn, 1.0f / sqrtf((float)hd), ws->sc,
					   ws->dsc, e));
	ERR_TRY(o->gemm_batched(d, 0, 0, n, hd, n, 1.0f, ws->dsc, n, nn, k, C3, hd, 0.0f, dq,
				C3, hd, G, e));
	return o->gemm_batched(d, 1, 0, n, hd, n, 1.0f, ws->dsc, n, nn, q, C3, hd, 0.0f, dk, C3,
			       hd, G, e);
}

/* dqkv (rows x 3C, every element written) from the heads' output gradient datt */
static int attention_backward(struct gpt_ws *ws, const struct gpt_batch *b, const float *qkv,
			      const float *datt, float *dqkv, struct err *e)
{
	for (int s = 0; s < b->n_seg; s++)
		for (int h0 = 0; h0 < GPT_H(&ws->shape); h0 += ws->heads_per_call)
			ERR_TRY(heads_backward(ws, group_of(ws, b, s, h0), qkv, datt, dqkv, e));
	return ERR_OK;
}

/* ---- forward ---- */

/* out (R x n) = in (R x k) w^T + bias; or, with `resid`, out = resid + in w^T + bias */
static int linear(struct dev *d, int R, int n, int k, const float *in, const float *w,
		  const float *bias, const float *resid, float *out, struct err *e)
{
	if (resid)
		ERR_TRY(d->ops->copy(d, out, resid, sizeof(float) * (size_t)R * n, e));
	ERR_TRY(d->ops->gemm(d, 0, 1, R, n, k, 1.0f, in, k, w, k, resid ? 1.0f : 0.0f, out, n, e));
	return d->ops->bias_add(d, R, n, bias, out, e);
}

static int layer_forward(struct gpt_ws *ws, const struct gpt_batch *b, const float *params,
			 int l, struct err *e)
{
	struct dev *d = ws->dev;
	const struct model_shape *m = &ws->shape;
	int R = b->head.rows, C = GPT_C(m);
	struct layer w = layer_of(m, params, l);
	struct acts a = acts_of(ws, l, (size_t)R);
	ERR_TRY(d->ops->layernorm(d, R, C, a.x, w.ln1w, w.ln1b, a.ln1, a.ln1_mean, a.ln1_rstd, e));
	ERR_TRY(linear(d, R, 3 * C, C, a.ln1, w.qkvw, w.qkvb, NULL, a.qkv, e));
	ERR_TRY(attention_forward(ws, b, a.qkv, a.att, e));
	ERR_TRY(linear(d, R, C, C, a.att, w.attprojw, w.attprojb, a.x, a.mid, e));
	ERR_TRY(d->ops->layernorm(d, R, C, a.mid, w.ln2w, w.ln2b, a.ln2, a.ln2_mean, a.ln2_rstd,
				  e));
	ERR_TRY(linear(d, R, 4 * C, C, a.ln2, w.fcw, w.fcb, NULL, a.fch, e));
	ERR_TRY(d->ops->gelu(d, R * 4 * C, a.fch, a.fcg, e));
	return linear(d, R, C, 4 * C, a.fcg, w.fcprojw, w.fcprojb, a.mid, a.next, e);
}

/* upload, then every layer up to the logits */
static int forward(struct gpt_ws *ws, const float *params, const struct gpt_batch *b,
		   struct err *e)
{
	struct dev *d = ws->dev;
	const struct dev_ops *o = d->ops;
	const struct model_shape *m = &ws->shape;
	const struct param_info *p = m->p;
	int R = b->head.rows, C = GPT_C(m), L = GPT_L(m);
	size_t ints = sizeof(int32_t) * (size_t)R;
	if (R > ws->max_rows)
		return ERR(e, ERR_DEVICE, "batch of %d positions exceeds the workspace (%d)", R,
			   ws->max_rows);
	ERR_TRY(o->upload(d, ws->input, b->input, ints, e));
	ERR_TRY(o->upload(d, ws->target, b->target, ints, e));
	ERR_TRY(o->upload(d, ws->pos, b->pos, ints, e));
	ERR_TRY(o->embed_pos(d, R, C, ws->input, ws->pos, params + p[GPT_WTE].offset,
			     params + p[GPT_WPE].offset, ws->resid, e));
	for (int l = 0; l < L; l++)
		ERR_TRY(layer_forward(ws, b, params, l, e));
	float *last = ws->resid + (size_t)2 * L * R * C;
	ERR_TRY(o->layernorm(d, R, C, last, params + p[GPT_LNFW].offset,
			     params + p[GPT_LNFB].offset, ws->lnf, ws->lnf_mean, ws->lnf_rstd, e));
	return o->gemm(d, 0, 1, R, m->vocab, C, 1.0f, ws->lnf, C, params + p[GPT_WTE].offset, C,
		       0.0f, ws->logits, m->vocab, e);
}

/* ---- backward ---- */

/* the MLP's backward: ws->dres from the layer's output gradient to its middle's */
static int mlp_backward(struct gpt_ws *ws, const struct layer *w, struct layer_grad *g,
			const struct acts *a, int R, struct err *e)
{
	struct dev *d = ws->dev;
	const struct dev_ops *o = d->ops;
	int C = GPT_C(&ws->shape), C4 = 4 * C;
	ERR_TRY(o->gemm(d, 1, 0, C, C4, R, 1.0f, ws->dres, C, a->fcg, C4, 1.0f, g->fcprojw, C4, e));
	ERR_TRY(o->col_sum_acc(d, R, C, ws->dres, g->fcprojb, e));
	ERR_TRY(o->gemm(d, 0, 0, R, C4, C, 1.0f, ws->dres, C, w->fcprojw, C4, 0.0f, ws->dbig, C4,
			e));
	ERR_TRY(o->gelu_backward(d, R * C4, a->fch, ws->dbig, e));
	ERR_TRY(o->gemm(d, 1, 0, C4, C, R, 1.0f, ws->dbig, C4, a->ln2, C, 1.0f, g->fcw, C, e));
	ERR_TRY(o->col_sum_acc(d, R, C4, ws->dbig, g->fcb, e));
	ERR_TRY(o->gemm(d, 0, 0, R, C, C4, 1.0f, ws->dbig, C4, w->fcw, C, 0.0f, ws->dln, C, e));
	return o->layernorm_backward(d, R, C, a->mid, w->ln2w, a->ln2_mean, a->ln2_rstd, ws->dln,
				     ws->dres, g->ln2w, g->ln2b, e);
}

/* the attention's backward: ws->dres from the layer's middle to its input */
static int attn_backward(struct gpt_ws *ws, const struct gpt_batch *b, const struct layer *w,
			 struct layer_grad *g, const struct acts *a, struct err *e)
{
	struct dev *d = ws->dev;
	const struct dev_ops *o = d->ops;
	int R = b->head.rows, C = GPT_C(&ws->shape), C3 = 3 * C;
	ERR_TRY(o->gemm(d, 1, 0, C, C, R, 1.0f, ws->dres, C, a->att, C, 1.0f, g->attprojw, C, e));
	ERR_TRY(o->col_sum_acc(d, R, C, ws->dres, g->attprojb, e));
	/* the heads' output gradient in dln, the qkv gradient in dbig */
	ERR_TRY(o->gemm(d, 0, 0, R, C, C, 1.0f, ws->dres, C, w->attprojw, C, 0.0f, ws->dln, C, e));
	ERR_TRY(attention_backward(ws, b, a->qkv, ws->dln, ws->dbig, e));
	ERR_TRY(o->gemm(d, 1, 0, C3, C, R, 1.0f, ws->dbig, C3, a->ln1, C, 1.0f, g->qkvw, C, e));
	ERR_TRY(o->col_sum_acc(d, R, C3, ws->dbig, g->qkvb, e));
	ERR_TRY(o->gemm(d, 0, 0, R, C, C3, 1.0f, ws->dbig, C3, w->qkvw, C, 0.0f, ws->dln, C, e));
	return o->layernorm_backward(d, R, C, a->x, w->ln1w, a->ln1_mean, a->ln1_rstd, ws->dln,
				     ws->dres, g->ln1w, g->ln1b, e);
}

/* from the logits' gradient (in place of the logits) to ws->dres of the last stream */
static int head_backward(struct gpt_ws *ws, const float *params, float *grads, int R,
			 struct err *e)
{
	struct dev *d = ws->dev;
	const struct dev_ops *o = d->ops;
	const struct model_shape *m = &ws->shape;
	const struct param_info *p = m->p;
	int C = GPT_C(m), V = m->vocab;
	const float *last = ws->resid + (size_t)2 * GPT_L(m) * R * C;
	ERR_TRY(o->gemm(d, 1, 0, V, C, R, 1.0f, ws->logits, V, ws->lnf, C, 1.0f,
			grads + p[GPT_WTE].offset, C, e));
	ERR_TRY(o->gemm(d, 0, 0, R, C, V, 1.0f, ws->logits, V, params + p[GPT_WTE].offset, C,
			0.0f, ws->dln, C, e));
	ERR_TRY(o->zero(d, ws->dres, sizeof(float) * (size_t)R * C, e));
	return o->layernorm_backward(d, R, C, last, params + p[GPT_LNFW].offset, ws->lnf_mean,
				     ws->lnf_rstd, ws->dln, ws->dres, grads + p[GPT_LNFW].offset,
				     grads + p[GPT_LNFB].offset, e);
}

int gpt_step(struct model_ws *head, const float *params, float *grads,
	     const struct model_batch *batch, float scale, double loss_divisor, double *loss_acc,
	     struct err *e)
{
	struct gpt_ws *ws = (struct gpt_ws *)head;
	const struct gpt_batch *b = (const struct gpt_batch *)batch;
	struct dev *d = ws->dev;
	const struct dev_ops *o = d->ops;
	const struct model_shape *m = &ws->shape;
	int R = b->head.rows, C = GPT_C(m);
	if (R == 0)
		return ERR_OK; /* an empty microbatch contributes nothing */
	ERR_TRY(forward(ws, params, b, e));
	ERR_TRY(o->xent(d, R, m->vocab, ws->zero_bias, ws->target, scale, head->z_loss,
			head->class_weights, ws->logits, ws->loss, e));
	ERR_TRY(o->sum_acc(d, R, ws->loss, loss_divisor, loss_acc, e));
	ERR_TRY(head_backward(ws, params, grads, R, e));
	for (int l = GPT_L(m) - 1; l >= 0; l--) {
		struct layer w = layer_of(m, params, l);
		struct layer_grad g = layer_grad_of(m, grads, l);
		struct acts a = acts_of(ws, l, (size_t)R);
		ERR_TRY(mlp_backward(ws, &w, &g, &a, R, e));
		ERR_TRY(attn_backward(ws, b, &w, &g, &a, e));
	}
	ERR_TRY(o->embed_backward(d, R, 1, C, ws->input, ws->dres,
				  grads + m->p[GPT_WTE].offset, e));
	return o->embed_backward(d, R, 1, C, ws->pos, ws->dres, grads + m->p[GPT_WPE].offset, e);
}

int gpt_eval(struct model_ws *head, const float *params, const struct model_batch *batch,
	     double *loss_sum, int64_t *hits, struct err *e)
{
	struct gpt_ws *ws = (struct gpt_ws *)head;
	const struct gpt_batch *b = (const struct gpt_batch *)batch;
	struct dev *d = ws->dev;
	int R = b->head.rows, V = ws->shape.vocab;
	*loss_sum = 0.0;
	*hits = 0;
	if (R == 0)
		return ERR_OK;
	ERR_TRY(forward(ws, params, b, e));
	ERR_TRY(d->ops->argmax_hits(d, R, V, ws->zero_bias, ws->logits, ws->target, hits, e));
	ERR_TRY(d->ops->xent(d, R, V, ws->zero_bias, ws->target, 0.0f, 0.0f, NULL, ws->logits,
			     ws->loss, e));
	return d->ops->sum(d, R, ws->loss, loss_sum, e);
}

int gpt_logits(struct model_ws *head, const float *params, const struct model_batch *batch,
	       float *host_logits, struct err *e)
{
	struct gpt_ws *ws = (struct gpt_ws *)head;
	const struct gpt_batch *b = (const struct gpt_batch *)batch;
	int R = b->head.rows;
	if (R == 0)
		return ERR_OK;
	ERR_TRY(forward(ws, params, b, e));
	return ws->dev->ops->download(ws->dev, host_logits, ws->logits,
				      sizeof(float) * (size_t)R * ws->shape.vocab, e);
}
