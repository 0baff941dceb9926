/*
 * model-bigram: the bigram model on the device interface (see model-bigram.h).
 *
 *   logits = gather(table, prev) + bias     rows x V (embed_gather, one slot V wide)
 *   dlogits = scale (softmax - onehot)      (xent, in place)
 *   g_bias += colsum(dlogits), g_table += scatter(dlogits) (embed_backward)
 * No GEMM at all: what it shows is the boundary, not arithmetic.
 */
#include "model-bigram.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prng.h"

#define BIGRAM_STREAM 0xb16aULL

static int bigram_shape(const struct settings *s, struct model_shape *m, struct err *e)
{
	(void)e;
	model_shape_begin(m, &bigram_ops, s->vocab);
	model_shape_add(m, "table", s->vocab, s->vocab, 1);
	model_shape_add(m, "bias", s->vocab, 1, 0);
	return ERR_OK;
}

/* table uniform in +-0.5, bias uniform in +-0.1 */
static void bigram_init_values(const struct model_shape *m, int t, struct prng *r, float *p,
			       size_t count)
{
	for (size_t i = 0; i < count; i++)
		p[i] = (t < BIGRAM_BIAS ? 0.5f : 0.1f) * (2.0f * prng_unit(r) - 1.0f);
}

static void bigram_describe(const struct model_shape *m, char *out, size_t cap)
{
	snprintf(out, cap, "vocab %d", m->vocab);
}

static int bigram_max_rows(const struct model_shape *m, int n, int max_len)
{
	(void)m;
	return n * max_len;
}

static void bigram_batch_free(struct model_batch *head)
{
	struct bigram_batch *b = (struct bigram_batch *)head;
	free(b->prev);
	free(b->target);
	free(b);
}

static int bigram_batch_alloc(const struct model_shape *m, int cap, struct model_batch **out,
		       struct err *e)
{
	struct bigram_batch *b = calloc(1, sizeof *b);
	size_t rows = (size_t)(cap > 0 ? cap : 1);
	(void)m;
	if (!b)
		return ERR(e, ERR_NOMEM, "out of memory");
	b->head.ops = &bigram_ops;
	b->cap = cap;
	b->prev = malloc(rows * sizeof(int32_t));
	b->target = malloc(rows * sizeof(int32_t));
	if (!b->prev || !b->target) {
		bigram_batch_free(&b->head);
		return ERR(e, ERR_NOMEM, "out of memory");
	}
	*out = &b->head;
	return ERR_OK;
}

/* Position t of sequence id (t >= its length: padding) into row r when it is laid out;
 * returns the next row. */
static int bigram_lay_out(struct bigram_batch *b, const struct corpus *c, int id, int t, int layout,
		   int r)
{
	const int32_t *tok = c->tokens + c->offset[id];
	int len = corpus_len(c, id);
	int target = t < len && corpus_is_target(c, id, t);
	if (layout == LAYOUT_PACKED && !target)
		return r;
	b->prev[r] = t >= len ? DATA_PAD : t > 0 ? tok[t - 1] : DATA_BOS;
	b->target[r] = target ? tok[t] : -1;
	return r + 1;
}

static int bigram_batch_build(struct model_batch *head, const struct corpus *c, const int *ids, int n,
		       int layout, struct err *e)
{
	struct bigram_batch *b = (struct bigram_batch *)head;
	int longest = 0, rows = 0;
	int64_t sup = 0;
	for (int i = 0; i < n; i++) {
		if (ids[i] < 0 || ids[i] >= c->n)
			return ERR(e, ERR_DATA, "sequence id %d outside the corpus", ids[i]);
		longest = corpus_len(c, ids[i]) > longest ? corpus_len(c, ids[i]) : longest;
		sup += corpus_supervised(c, ids[i]);
	}
	rows = layout == LAYOUT_PACKED ? (int)sup : n * longest;
	if (rows > b->cap)
		return ERR(e, ERR_DEVICE, "batch of %d positions exceeds its capacity of %d", rows,
			   b->cap);
	int r = 0;
	for (int i = 0; i < n; i++)
		for (int t = 0; t < (layout == LAYOUT_PACKED ? corpus_len(c, ids[i]) : longest); t++)
			r = bigram_lay_out(b, c, ids[i], t, layout, r);
	b->head.rows = r;
	b->head.supervised = sup;
	return ERR_OK;
}

static int bigram_batch_arrays(const struct model_batch *head, struct model_array *out)
{
	const struct bigram_batch *b = (const struct bigram_batch *)head;
	size_t rows = (size_t)head->rows;
	out[0] = (struct model_array){"inputs", b->prev, 1, {rows, 0}};
	out[1] = (struct model_array){"targets", b->target, 1, {rows, 0}};
	return 2;
}

static size_t bigram_upload_bytes(const struct model_shape *m, int rows)
{
	(void)m;
	return 2 * (size_t)rows * sizeof(int32_t);
}

struct bigram_ws {
	struct model_ws head;
	struct dev *dev;
	struct model_shape shape;
	int max_rows;
	int32_t *prev, *target;
	float *logits, *loss;
};

static size_t bigram_ws_bytes(const struct model_shape *m, int max_rows, size_t *logits)
{
	size_t R = (size_t)(max_rows > 0 ? max_rows : 1);
	*logits = R * (size_t)m->vocab * sizeof(float);
	return 2 * R * sizeof(int32_t) + *logits + R * sizeof(float);
}

static int bigram_ws_check_size(const struct model_shape *m, int max_rows, struct err *e)
{
	if ((uint64_t)(max_rows > 0 ? max_rows : 1) * (uint64_t)m->vocab > (uint64_t)INT_MAX ||
	    m->n_params > (size_t)INT_MAX)
		return ERR(e, ERR_CONFIG, "a bigram batch of %d rows over %d ids is too large",
			   max_rows, m->vocab);
	return ERR_OK;
}

static void bigram_ws_destroy(struct model_ws *head)
{
	struct bigram_ws *ws = (struct bigram_ws *)head;
	void *bufs[] = {ws->prev, ws->target, ws->logits, ws->loss};
	for (int i = 0; i < 4; i++)
		if (bufs[i])
			ws->dev->ops->release(ws->dev, bufs[i]);
	free(ws);
}

static int bigram_ws_create(struct dev *d, const struct model_shape *m, int max_rows,
		     struct model_ws **out, struct err *e)
{
	struct bigram_ws *ws = calloc(1, sizeof *ws);
	size_t R = (size_t)(max_rows > 0 ? max_rows : 1);
	int rc;
	if (!ws)
		return ERR(e, ERR_NOMEM, "out of memory");
	ws->head.ops = &bigram_ops;
	ws->dev = d;
	ws->shape = *m;
	ws->max_rows = max_rows;
	if ((rc = d->ops->alloc(d, R * sizeof(int32_t), (void **)&ws->prev, e)) ||
	    (rc = d->ops->alloc(d, R * sizeof(int32_t), (void **)&ws->target, e)) ||
	    (rc = d->ops->alloc(d, R * m->vocab * sizeof(float), (void **)&ws->logits, e)) ||
	    (rc = d->ops->alloc(d, R * sizeof(float), (void **)&ws->loss, e))) {
		bigram_ws_destroy(&ws->head);
		return rc;
	}
	*out = &ws->head;
	return ERR_OK;
}

/* upload, then the logits without their bias */
static int bigram_forward(struct bigram_ws *ws, const float *params, const struct bigram_batch *b,
		   struct err *e)
{
	struct dev *d = ws->dev;
	int R = b->head.rows, V = ws->shape.vocab;
	if (R > ws->max_rows)
		return ERR(e, ERR_DEVICE, "batch of %d rows exceeds the workspace", R);
	ERR_TRY(d->ops->upload(d, ws->prev, b->prev, (size_t)R * sizeof(int32_t), e));
	ERR_TRY(d->ops->upload(d, ws->target, b->target, (size_t)R * sizeof(int32_t), e));
	return d->ops->embed_gather(d, R, 1, V, ws->prev, params + ws->shape.p[BIGRAM_TABLE].offset,
				    ws->logits, e);
}

static int bigram_step(struct model_ws *head, const float *params, float *grads,
		const struct model_batch *batch, float scale, double divisor, double *acc,
		struct err *e)
{
	struct bigram_ws *ws = (struct bigram_ws *)head;
	struct dev *d = ws->dev;
	const struct param_info *p = ws->shape.p;
	int R = batch->rows, V = ws->shape.vocab;
	if (R == 0)
		return ERR_OK;
	ERR_TRY(bigram_forward(ws, params, (const struct bigram_batch *)batch, e));
	ERR_TRY(d->ops->xent(d, R, V, params + p[BIGRAM_BIAS].offset, ws->target, scale,
			     head->z_loss, head->class_weights, ws->logits, ws->loss, e));
	ERR_TRY(d->ops->sum_acc(d, R, ws->loss, divisor, acc, e));
	ERR_TRY(d->ops->col_sum_acc(d, R, V, ws->logits, grads + p[BIGRAM_BIAS].offset, e));
	return d->ops->embed_backward(d, R, 1, V, ws->prev, ws->logits,
				      grads + p[BIGRAM_TABLE].offset, e);
}

static int bigram_eval(struct model_ws *head, const float *params, const struct model_batch *batch,
		double *loss_sum, int64_t *hits, struct err *e)
{
	struct bigram_ws *ws = (struct bigram_ws *)head;
	struct dev *d = ws->dev;
	const float *bias = params + ws->shape.p[BIGRAM_BIAS].offset;
	int R = batch->rows, V = ws->shape.vocab;
	*loss_sum = 0.0;
	*hits = 0;
	if (R == 0)
		return ERR_OK;
	ERR_TRY(bigram_forward(ws, params, (const struct bigram_batch *)batch, e));
	ERR_TRY(d->ops->argmax_hits(d, R, V, bias, ws->logits, ws->target, hits, e));
	ERR_TRY(d->ops->xent(d, R, V, bias, ws->target, 0.0f, 0.0f, NULL, ws->logits, ws->loss, e));
	return d->ops->sum(d, R, ws->loss, loss_sum, e);
}

static void bigram_dev_needs(const struct model_shape *m, int rows, struct model_dev_needs *n)
{
	n->embed_slots = (size_t)rows;
	n->embed_ids = (size_t)m->vocab;
	n->embed_dim = (size_t)m->vocab;
}

static double bigram_flop_per_token(const struct model_shape *m)
{
	return 4.0 * m->vocab; /* the bias, softmax and its gradient: no GEMM */
}

static struct model_gemm bigram_largest_gemm(const struct model_shape *m, int rows)
{
	return (struct model_gemm){rows, m->vocab, 1};
}

const struct model_ops bigram_ops = {
	.name = "bigram",
	.shape = bigram_shape,
	.init_stream = BIGRAM_STREAM,
	.init_values = bigram_init_values,
	.max_rows = bigram_max_rows,
	.batch_alloc = bigram_batch_alloc,
	.batch_free = bigram_batch_free,
	.batch_build = bigram_batch_build,
	.batch_arrays = bigram_batch_arrays,
	.upload_bytes = bigram_upload_bytes,
	.ws_bytes = bigram_ws_bytes,
	.ws_check_size = bigram_ws_check_size,
	.ws_create = bigram_ws_create,
	.ws_destroy = bigram_ws_destroy,
	.step = bigram_step,
	.eval = bigram_eval,
	.dev_needs = bigram_dev_needs,
	.flop_per_token = bigram_flop_per_token,
	.largest_gemm = bigram_largest_gemm,
	.describe = bigram_describe,
};
