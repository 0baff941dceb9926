/*
 * model: forward and backward of the window MLP through the device interface.
 *
 * Shapes (rows = positions of the batch, CD = context * embed):
 *   x      = gather(embed, ctx)          rows x CD
 *   h      = tanh(x w1^T + b1)           rows x H
 *   logits = h w2^T + b2                 rows x V
 * Backward of scale * sum_t loss_t, gradients added into the flat gradient buffer:
 *   dlogits = scale (softmax - onehot)   (the xent op, in place on logits)
 *   g_w2 += dlogits^T h, g_b2 += colsum(dlogits), dh = dlogits w2, dz = dh (1 - h^2)
 *   g_w1 += dz^T x, g_b1 += colsum(dz), dx = dz w1 (into the x buffer), g_embed += scatter(dx)
 * Six GEMMs per microbatch; nothing is allocated after model_ws_create().
 */
#include "model.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prng.h"

#define PRNG_STREAM_INIT 0x1e17ULL

void model_shape_init(struct model_shape *m, int vocab, int context, int embed, int hidden)
{
	static const char *names[MODEL_NPARAM] = {"embed", "w1", "b1", "w2", "b2"};
	int cd = context * embed;
	int rows[MODEL_NPARAM] = {vocab, hidden, hidden, vocab, vocab};
	int cols[MODEL_NPARAM] = {embed, cd, 1, hidden, 1};
	size_t off = 0;
	memset(m, 0, sizeof *m);
	m->vocab = vocab;
	m->context = context;
	m->embed = embed;
	m->hidden = hidden;
	for (int i = 0; i < MODEL_NPARAM; i++) {
		m->p[i].name = names[i];
		m->p[i].rows = rows[i];
		m->p[i].cols = cols[i];
		m->p[i].offset = off;
		m->p[i].count = (size_t)rows[i] * cols[i];
		off += m->p[i].count;
	}
	m->n_params = off;
}

void model_init_params(const struct model_shape *m, uint64_t seed, float *host_params)
{
	struct prng r;
	prng_seed(&r, seed, PRNG_STREAM_INIT);
	float bound[MODEL_NPARAM] = {
		1.0f,
		1.0f / sqrtf((float)(m->context * m->embed)),
		0.0f,
		1.0f / sqrtf((float)m->hidden),
		0.0f,
	};
	for (int i = 0; i < MODEL_NPARAM; i++) {
		float *p = host_params + m->p[i].offset;
		for (size_t k = 0; k < m->p[i].count; k++)
			p[k] = bound[i] == 0.0f ? 0.0f : bound[i] * (2.0f * prng_unit(&r) - 1.0f);
	}
}

int model_locate(const struct model_shape *m, size_t i, int *row, int *col)
{
	for (int t = 0; t < MODEL_NPARAM; t++) {
		if (i >= m->p[t].offset && i < m->p[t].offset + m->p[t].count) {
			size_t k = i - m->p[t].offset;
			*row = (int)(k / m->p[t].cols);
			*col = (int)(k % m->p[t].cols);
			return t;
		}
	}
	return -1;
}

int batch_alloc(struct batch *b, int cap_rows, int context, struct err *e)
{
	memset(b, 0, sizeof *b);
	b->cap = cap_rows;
	b->context = context;
	b->ctx = malloc(sizeof(int32_t) * (size_t)(cap_rows > 0 ? cap_rows : 1) * context);
	b->target = malloc(sizeof(int32_t) * (size_t)(cap_rows > 0 ? cap_rows : 1));
	if (!b->ctx || !b->target) {
		batch_free(b);
		return ERR(e, ERR_NOMEM, "out of memory for a batch of %d rows", cap_rows);
	}
	return ERR_OK;
}

void batch_free(struct batch *b)
{
	free(b->ctx);
	free(b->target);
	b->ctx = NULL;
	b->target = NULL;
}

int batch_max_rows(int n, int max_len)
{
	return n * max_len;
}

/* context of position t of sequence `tok` (length len): the C previous tokens */
static void fill_context(int32_t *out, const int32_t *tok, int t, int context)
{
	for (int j = 0; j < context; j++) {
		int pos = t - context + j;
		out[j] = pos >= 0 ? tok[pos] : DATA_BOS;
	}
}

int batch_build(struct batch *b, const struct corpus *c, const int *ids, int n, int layout,
		struct err *e)
{
	int C = b->context;
	int rows = 0, longest = 0;
	int64_t sup = 0;
	for (int i = 0; i < n; i++) {
		if (ids[i] < 0 || ids[i] >= c->n)
			return ERR(e, ERR_DATA, "sequence id %d outside the corpus (0..%d)", ids[i], c->n - 1);
		int len = corpus_len(c, ids[i]);
		longest = len > longest ? len : longest;
		rows += layout == LAYOUT_PACKED ? corpus_supervised(c, ids[i]) : 0;
		sup += corpus_supervised(c, ids[i]);
	}
	if (layout == LAYOUT_PADDED)
		rows = n * longest;
	if (rows > b->cap)
		return ERR(e, ERR_DEVICE, "batch of %d positions exceeds its capacity of %d", rows, b->cap);
	int r = 0;
	for (int i = 0; i < n; i++) {
		const int32_t *tok = c->tokens + c->offset[ids[i]];
		int len = corpus_len(c, ids[i]), pre = c->prefix[ids[i]];
		int end = layout == LAYOUT_PACKED ? len : longest;
		for (int t = layout == LAYOUT_PACKED ? pre : 0; t < end; t++) {
			int target = t < len && corpus_is_target(c, ids[i], t);
			if (layout == LAYOUT_PACKED && !target)
				continue; /* packed: target positions only (a mask may skip some) */
			if (t < len) {
				fill_context(b->ctx + (size_t)r * C, tok, t, C);
				b->target[r] = target ? tok[t] : -1;
			} else {
				for (int j = 0; j < C; j++)
					b->ctx[(size_t)r * C + j] = DATA_PAD;
				b->target[r] = -1;
			}
			r++;
		}
	}
	b->rows = rows;
	b->supervised = sup;
	return ERR_OK;
}

struct model_ws {
	struct dev *dev;
	struct model_shape shape;
	int max_rows;
	int32_t *ctx, *target;
	float *x, *h, *logits, *loss, *dh;
};

void model_ws_destroy(struct model_ws *ws)
{
	if (!ws)
		return;
	void *bufs[] = {ws->ctx, ws->target, ws->x, ws->h, ws->logits, ws->loss, ws->dh};
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		if (bufs[i])
			ws->dev->ops->release(ws->dev, bufs[i]);
	free(ws);
}

size_t model_ws_bytes(const struct model_shape *m, int max_rows, size_t *logits)
{
	size_t R = (size_t)(max_rows > 0 ? max_rows : 1);
	size_t cd = (size_t)m->context * m->embed;
	*logits = R * (size_t)m->vocab * sizeof(float);
	return R * m->context * sizeof(int32_t) + R * sizeof(int32_t) + R * cd * sizeof(float) +
	       2 * R * (size_t)m->hidden * sizeof(float) + *logits + R * sizeof(float);
}

int model_ws_check_size(const struct model_shape *m, int max_rows, struct err *e)
{
	const uint64_t R = (uint64_t)(max_rows > 0 ? max_rows : 1);
	const struct {
		const char *what;
		uint64_t count;
	} counts[] = {
		{"rows x model.context", R * (uint64_t)m->context},
		{"rows x model.context x model.embed", R * (uint64_t)m->context * (uint64_t)m->embed},
		{"rows x model.hidden", R * (uint64_t)m->hidden},
		{"rows x data.vocab", R * (uint64_t)m->vocab},
	};
	for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
		if (counts[i].count > (uint64_t)INT_MAX)
			return ERR(e, ERR_CONFIG, "a batch of %llu rows (train.batch_size x data.max_len) "
				   "makes %s = %llu elements, past the device interface's limit of %d; "
				   "lower train.batch_size or data.max_len", (unsigned long long)R,
				   counts[i].what, (unsigned long long)counts[i].count, INT_MAX);
	if (m->n_params > (size_t)INT_MAX)
		return ERR(e, ERR_CONFIG, "the model has %zu parameters, past the device "
			   "interface's limit of %d; lower model.hidden, model.embed or data.vocab",
			   m->n_params, INT_MAX);
	return ERR_OK;
}

int model_ws_create(struct dev *d, const struct model_shape *m, int max_rows,
		    struct model_ws **out, struct err *e)
{
	ERR_TRY(model_ws_check_size(m, max_rows, e));
	struct model_ws *ws = calloc(1, sizeof *ws);
	if (!ws)
		return ERR(e, ERR_NOMEM, "out of memory");
	ws->dev = d;
	ws->shape = *m;
	ws->max_rows = max_rows;
	size_t R = (size_t)(max_rows > 0 ? max_rows : 1);
	size_t cd = (size_t)m->context * m->embed;
	int rc;
	/* model_ws_bytes() adds up these allocations: keep the two together */
	if ((rc = d->ops->alloc(d, R * m->context * sizeof(int32_t), (void **)&ws->ctx, e)) ||
	    (rc = d->ops->alloc(d, R * sizeof(int32_t), (void **)&ws->target, e)) ||
	    (rc = d->ops->alloc(d, R * cd * sizeof(float), (void **)&ws->x, e)) ||
	    (rc = d->ops->alloc(d, R * m->hidden * sizeof(float), (void **)&ws->h, e)) ||
	    (rc = d->ops->alloc(d, R * m->vocab * sizeof(float), (void **)&ws->logits, e)) ||
	    (rc = d->ops->alloc(d, R * sizeof(float), (void **)&ws->loss, e)) ||
	    (rc = d->ops->alloc(d, R * m->hidden * sizeof(float), (void **)&ws->dh, e))) {
		model_ws_destroy(ws);
		return rc;
	}
	*out = ws;
	return ERR_OK;
}

/* upload + forward up to the logits (bias of the output layer not yet added) */
static int forward(struct model_ws *ws, const float *params, const struct batch *b, struct err *e)
{
	struct dev *d = ws->dev;
	const struct dev_ops *o = d->ops;
	const struct model_shape *m = &ws->shape;
	int R = b->rows, C = m->context, H = m->hidden, V = m->vocab, CD = C * m->embed;
	if (R > ws->max_rows)
		return ERR(e, ERR_DEVICE, "batch of %d positions exceeds the workspace (%d)", R,
			   ws->max_rows);
	ERR_TRY(o->upload(d, ws->ctx, b->ctx, sizeof(int32_t) * (size_t)R * C, e));
	ERR_TRY(o->upload(d, ws->target, b->target, sizeof(int32_t) * (size_t)R, e));
	ERR_TRY(o->embed_gather(d, R, C, m->embed, ws->ctx, params + m->p[MODEL_EMBED].offset, ws->x, e));
	ERR_TRY(o->gemm(d, 0, 1, R, H, CD, 1.0f, ws->x, CD, params + m->p[MODEL_W1].offset, CD, 0.0f,
		    ws->h, H, e));
	ERR_TRY(o->bias_tanh(d, R, H, params + m->p[MODEL_B1].offset, ws->h, e));
	ERR_TRY(o->gemm(d, 0, 1, R, V, H, 1.0f, ws->h, H, params + m->p[MODEL_W2].offset, H, 0.0f,
		    ws->logits, V, e));
	return ERR_OK;
}

int model_step(struct model_ws *ws, const float *params, float *grads, const struct batch *b,
	       float scale, double loss_divisor, double *loss_acc, struct err *e)
{
	struct dev *d = ws->dev;
	const struct dev_ops *o = d->ops;
	const struct model_shape *m = &ws->shape;
	int R = b->rows, C = m->context, H = m->hidden, V = m->vocab, CD = C * m->embed;
	if (R == 0)
		return ERR_OK; /* an empty microbatch contributes nothing */
	ERR_TRY(forward(ws, params, b, e));
	ERR_TRY(o->xent(d, R, V, params + m->p[MODEL_B2].offset, ws->target, scale, ws->logits, ws->loss,
		    e));
	ERR_TRY(o->sum_acc(d, R, ws->loss, loss_divisor, loss_acc, e));
	/* output layer */
	ERR_TRY(o->gemm(d, 1, 0, V, H, R, 1.0f, ws->logits, V, ws->h, H, 1.0f,
		    grads + m->p[MODEL_W2].offset, H, e));
	ERR_TRY(o->col_sum_acc(d, R, V, ws->logits, grads + m->p[MODEL_B2].offset, e));
	ERR_TRY(o->gemm(d, 0, 0, R, H, V, 1.0f, ws->logits, V, params + m->p[MODEL_W2].offset, H, 0.0f,
		    ws->dh, H, e));
	/* hidden layer: dz in place of dh, with g_b1 += colsum(dz) in the same pass */
	ERR_TRY(o->tanh_backward_col_sum(d, R, H, ws->h, ws->dh, grads + m->p[MODEL_B1].offset,
					 e));
	ERR_TRY(o->gemm(d, 1, 0, H, CD, R, 1.0f, ws->dh, H, ws->x, CD, 1.0f,
		    grads + m->p[MODEL_W1].offset, CD, e));
	/* embedding: dx overwrites x, which is no longer needed */
	ERR_TRY(o->gemm(d, 0, 0, R, CD, H, 1.0f, ws->dh, H, params + m->p[MODEL_W1].offset, CD, 0.0f,
		    ws->x, CD, e));
	ERR_TRY(o->embed_backward(d, R, C, m->embed, ws->ctx, ws->x, grads + m->p[MODEL_EMBED].offset,
			      e));
	return ERR_OK;
}

int model_eval(struct model_ws *ws, const float *params, const struct batch *b,
	       double *loss_sum, int64_t *hits, struct err *e)
{
	struct dev *d = ws->dev;
	const struct dev_ops *o = d->ops;
	const struct model_shape *m = &ws->shape;
	int R = b->rows, V = m->vocab;
	*loss_sum = 0.0;
	*hits = 0;
	if (R == 0)
		return ERR_OK;
	ERR_TRY(forward(ws, params, b, e));
	ERR_TRY(o->argmax_hits(d, R, V, params + m->p[MODEL_B2].offset, ws->logits, ws->target, hits, e));
	ERR_TRY(o->xent(d, R, V, params + m->p[MODEL_B2].offset, ws->target, 0.0f, ws->logits, ws->loss,
		    e));
	ERR_TRY(o->sum(d, R, ws->loss, loss_sum, e));
	return ERR_OK;
}
