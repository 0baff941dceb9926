/*
 * window_mlp: forward and backward of the window MLP through the device interface.
 *
 * Shapes (rows = positions of the batch, CD = context * embed):
 *   x      = gather(embed, ctx)          rows x CD
 *   h      = tanh(x w1^T + b1)           rows x H
 *   logits = h w2^T + b2                 rows x V
 * Backward of scale * sum_t loss_t, gradients added into the flat gradient buffer:
 *   dlogits = scale (softmax - onehot)   (the xent op, in place on logits)
 *   g_w2 += dlogits^T h, g_b2 += colsum(dlogits), dh = dlogits w2, dz = dh (1 - h^2)
 *   g_w1 += dz^T x, g_b1 += colsum(dz), dx = dz w1 (into the x buffer), g_embed += scatter(dx)
 * Six GEMMs per microbatch; nothing is allocated after the workspace is created.
 */
#include "window_mlp.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prng.h"

#define PRNG_STREAM_INIT 0x1e17ULL

/* the sizes of shape m */
#define CONTEXT(m) ((m)->dim[WINDOW_MLP_CONTEXT])
#define EMBED(m) ((m)->dim[WINDOW_MLP_EMBED_DIM])
#define HIDDEN(m) ((m)->dim[WINDOW_MLP_HIDDEN])

/* ---- shape and initial parameters ---- */

void window_mlp_shape(struct model_shape *m, int vocab, int context, int embed, int hidden)
{
	model_shape_begin(m, &window_mlp_ops, vocab);
	m->dim[WINDOW_MLP_CONTEXT] = context;
	m->dim[WINDOW_MLP_EMBED_DIM] = embed;
	m->dim[WINDOW_MLP_HIDDEN] = hidden;
	/* the order of the flat vector, which checkpoints and dumps keep */
	model_shape_add(m, "embed", vocab, embed, 1);
	model_shape_add(m, "w1", hidden, context * embed, 1);
	model_shape_add(m, "b1", hidden, 1, 0);
	model_shape_add(m, "w2", vocab, hidden, 1);
	model_shape_add(m, "b2", vocab, 1, 0);
}

static int shape_of_settings(const struct settings *s, struct model_shape *m, struct err *e)
{
	(void)e;
	window_mlp_shape(m, s->vocab, s->context, s->embed, s->hidden);
	return ERR_OK;
}

/* Uniform +-1/sqrt(fan_in) for weights, like PyTorch's Linear default; biases zero;
 * embedding uniform +-1. */
static void init_values(const struct model_shape *m, int t, struct prng *r, float *out,
			size_t count)
{
	float bound[WINDOW_MLP_NTENSORS] = {
		1.0f,
		1.0f / sqrtf((float)(CONTEXT(m) * EMBED(m))),
		0.0f,
		1.0f / sqrtf((float)HIDDEN(m)),
		0.0f,
	};
	for (size_t k = 0; k < count; k++)
		out[k] = bound[t] == 0.0f ? 0.0f : bound[t] * (2.0f * prng_unit(r) - 1.0f);
}

static void describe(const struct model_shape *m, char *out, size_t cap)
{
	snprintf(out, cap, "vocab %d, context %d, embed %d, hidden %d", m->vocab, CONTEXT(m),
		 EMBED(m), HIDDEN(m));
}

/* ---- batches ---- */

struct window_mlp_batch *window_mlp_batch_of(struct model_batch *b)
{
	return (struct window_mlp_batch *)b;
}

static int max_rows(const struct model_shape *m, int n, int max_len)
{
	(void)m;
	return n * max_len;
}

static void batch_free(struct model_batch *head)
{
	struct window_mlp_batch *b = window_mlp_batch_of(head);
	free(b->ctx);
	free(b->target);
	free(b);
}

static int batch_alloc(const struct model_shape *m, int cap_rows, struct model_batch **out,
		       struct err *e)
{
	struct window_mlp_batch *b = calloc(1, sizeof *b);
	size_t rows = (size_t)(cap_rows > 0 ? cap_rows : 1);
	if (!b)
		return ERR(e, ERR_NOMEM, "out of memory for a batch of %d rows", cap_rows);
	b->head.ops = &window_mlp_ops;
	b->cap = cap_rows;
	b->context = CONTEXT(m);
	b->ctx = malloc(sizeof(int32_t) * rows * (size_t)b->context);
	b->target = malloc(sizeof(int32_t) * rows);
	if (!b->ctx || !b->target) {
		batch_free(&b->head);
		return ERR(e, ERR_NOMEM, "out of memory for a batch of %d rows", cap_rows);
	}
	*out = &b->head;
	return ERR_OK;
}

/* context of position t of sequence `tok` (length len): the C previous tokens */
static void fill_context(int32_t *out, const int32_t *tok, int t, int context)
{
	for (int j = 0; j < context; j++) {
		int pos = t - context + j;
		out[j] = pos >= 0 ? tok[pos] : DATA_BOS;
	}
}

/* The rows sequence `id` lays out from row r on (padded: `longest` positions); returns
 * the next row. */
static int lay_out_sequence(struct window_mlp_batch *b, const struct corpus *c, int id,
			    int layout, int longest, int r)
{
	int C = b->context;
	const int32_t *tok = c->tokens + c->offset[id];
	int len = corpus_len(c, id), pre = c->prefix[id];
	int end = layout == LAYOUT_PACKED ? len : longest;
	for (int t = layout == LAYOUT_PACKED ? pre : 0; t < end; t++) {
		int target = t < len && corpus_is_target(c, id, t);
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
	return r;
}

static int batch_build(struct model_batch *head, const struct corpus *c, const int *ids, int n,
		       int layout, struct err *e)
{
	struct window_mlp_batch *b = window_mlp_batch_of(head);
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
	for (int i = 0; i < n; i++)
		r = lay_out_sequence(b, c, ids[i], layout, longest, r);
	b->head.rows = rows;
	b->head.supervised = sup;
	return ERR_OK;
}

static int batch_arrays(const struct model_batch *head, struct model_array *out)
{
	const struct window_mlp_batch *b = (const struct window_mlp_batch *)head;
	size_t rows = (size_t)head->rows;
	out[0] = (struct model_array){"inputs", b->ctx, 2, {rows, (size_t)b->context}};
	out[1] = (struct model_array){"targets", b->target, 1, {rows, 0}};
	return 2;
}

static size_t upload_bytes(const struct model_shape *m, int rows)
{
	/* the context ids and the targets */
	return (size_t)rows * (size_t)CONTEXT(m) * sizeof(int32_t) + (size_t)rows * sizeof(int32_t);
}

/* ---- the workspace ---- */

struct window_mlp_ws {
	struct model_ws head;
	struct dev *dev;
	struct model_shape shape;
	int max_rows;
	int32_t *ctx, *target;
	float *x, *h, *logits, *loss, *dh;
};

static struct window_mlp_ws *ws_of(struct model_ws *ws)
{
	return (struct window_mlp_ws *)ws;
}

static void ws_destroy(struct model_ws *head)
{
	struct window_mlp_ws *ws = ws_of(head);
	void *bufs[] = {ws->ctx, ws->target, ws->x, ws->h, ws->logits, ws->loss, ws->dh};
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		if (bufs[i])
			ws->dev->ops->release(ws->dev, bufs[i]);
	free(ws);
}

static size_t ws_bytes(const struct model_shape *m, int max_rows, size_t *logits)
{
	size_t R = (size_t)(max_rows > 0 ? max_rows : 1);
	size_t cd = (size_t)CONTEXT(m) * EMBED(m);
	*logits = R * (size_t)m->vocab * sizeof(float);
	return R * CONTEXT(m) * sizeof(int32_t) + R * sizeof(int32_t) + R * cd * sizeof(float) +
	       2 * R * (size_t)HIDDEN(m) * sizeof(float) + *logits + R * sizeof(float);
}

/* The device interface counts elements in int: every count an op of a batch of up to
 * max_rows rows gets must stay within INT_MAX, or it would wrap negative and the op
 * would do nothing. */
static int ws_check_size(const struct model_shape *m, int max_rows, struct err *e)
{
	const uint64_t R = (uint64_t)(max_rows > 0 ? max_rows : 1);
	const struct {
		const char *what;
		uint64_t count;
	} counts[] = {
		{"rows x model.context", R * (uint64_t)CONTEXT(m)},
		{"rows x model.context x model.embed", R * (uint64_t)CONTEXT(m) * (uint64_t)EMBED(m)},
		{"rows x model.hidden", R * (uint64_t)HIDDEN(m)},
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

static int ws_create(struct dev *d, const struct model_shape *m, int max_rows,
		     struct model_ws **out, struct err *e)
{
	struct window_mlp_ws *ws = calloc(1, sizeof *ws);
	if (!ws)
		return ERR(e, ERR_NOMEM, "out of memory");
	ws->head.ops = &window_mlp_ops;
	ws->dev = d;
	ws->shape = *m;
	ws->max_rows = max_rows;
	size_t R = (size_t)(max_rows > 0 ? max_rows : 1);
	size_t cd = (size_t)CONTEXT(m) * EMBED(m);
	int rc;
	/* ws_bytes() adds up these allocations: keep the two together */
	if ((rc = d->ops->alloc(d, R * CONTEXT(m) * sizeof(int32_t), (void **)&ws->ctx, e)) ||
	    (rc = d->ops->alloc(d, R * sizeof(int32_t), (void **)&ws->target, e)) ||
	    (rc = d->ops->alloc(d, R * cd * sizeof(float), (void **)&ws->x, e)) ||
	    (rc = d->ops->alloc(d, R * HIDDEN(m) * sizeof(float), (void **)&ws->h, e)) ||
	    (rc = d->ops->alloc(d, R * m->vocab * sizeof(float), (void **)&ws->logits, e)) ||
	    (rc = d->ops->alloc(d, R * sizeof(float), (void **)&ws->loss, e)) ||
	    (rc = d->ops->alloc(d, R * HIDDEN(m) * sizeof(float), (void **)&ws->dh, e))) {
		ws_destroy(&ws->head);
		return rc;
	}
	*out = &ws->head;
	return ERR_OK;
}

/* ---- forward, backward, evaluation ---- */

/* upload + forward up to the logits (bias of the output layer not yet added) */
static int forward(struct window_mlp_ws *ws, const float *params,
		   const struct window_mlp_batch *b, struct err *e)
{
	struct dev *d = ws->dev;
	const struct dev_ops *o = d->ops;
	const struct model_shape *m = &ws->shape;
	const struct param_info *p = m->p;
	int R = b->head.rows, C = CONTEXT(m), H = HIDDEN(m), V = m->vocab, CD = C * EMBED(m);
	if (R > ws->max_rows)
		return ERR(e, ERR_DEVICE, "batch of %d positions exceeds the workspace (%d)", R,
			   ws->max_rows);
	ERR_TRY(o->upload(d, ws->ctx, b->ctx, sizeof(int32_t) * (size_t)R * C, e));
	ERR_TRY(o->upload(d, ws->target, b->target, sizeof(int32_t) * (size_t)R, e));
	ERR_TRY(o->embed_gather(d, R, C, EMBED(m), ws->ctx, params + p[WINDOW_MLP_EMBED].offset,
				ws->x, e));
	ERR_TRY(o->gemm(d, 0, 1, R, H, CD, 1.0f, ws->x, CD, params + p[WINDOW_MLP_W1].offset, CD,
			0.0f, ws->h, H, e));
	ERR_TRY(o->bias_tanh(d, R, H, params + p[WINDOW_MLP_B1].offset, ws->h, e));
	ERR_TRY(o->gemm(d, 0, 1, R, V, H, 1.0f, ws->h, H, params + p[WINDOW_MLP_W2].offset, H,
			0.0f, ws->logits, V, e));
	return ERR_OK;
}

static int step(struct model_ws *head, const float *params, float *grads,
		const struct model_batch *batch, float scale, double loss_divisor,
		double *loss_acc, struct err *e)
{
	struct window_mlp_ws *ws = ws_of(head);
	const struct window_mlp_batch *b = (const struct window_mlp_batch *)batch;
	struct dev *d = ws->dev;
	const struct dev_ops *o = d->ops;
	const struct model_shape *m = &ws->shape;
	const struct param_info *p = m->p;
	int R = b->head.rows, C = CONTEXT(m), H = HIDDEN(m), V = m->vocab, CD = C * EMBED(m);
	if (R == 0)
		return ERR_OK; /* an empty microbatch contributes nothing */
	ERR_TRY(forward(ws, params, b, e));
	ERR_TRY(o->xent(d, R, V, params + p[WINDOW_MLP_B2].offset, ws->target, scale,
			head->z_loss, head->class_weights, ws->logits, ws->loss, e));
	ERR_TRY(o->sum_acc(d, R, ws->loss, loss_divisor, loss_acc, e));
	/* output layer */
	ERR_TRY(o->gemm(d, 1, 0, V, H, R, 1.0f, ws->logits, V, ws->h, H, 1.0f,
			grads + p[WINDOW_MLP_W2].offset, H, e));
	ERR_TRY(o->col_sum_acc(d, R, V, ws->logits, grads + p[WINDOW_MLP_B2].offset, e));
	ERR_TRY(o->gemm(d, 0, 0, R, H, V, 1.0f, ws->logits, V, params + p[WINDOW_MLP_W2].offset, H,
			0.0f, ws->dh, H, e));
	/* hidden layer: dz in place of dh, with g_b1 += colsum(dz) in the same pass */
	ERR_TRY(o->tanh_backward_col_sum(d, R, H, ws->h, ws->dh, grads + p[WINDOW_MLP_B1].offset,
					 e));
	ERR_TRY(o->gemm(d, 1, 0, H, CD, R, 1.0f, ws->dh, H, ws->x, CD, 1.0f,
			grads + p[WINDOW_MLP_W1].offset, CD, e));
	/* embedding: dx overwrites x, which is no longer needed */
	ERR_TRY(o->gemm(d, 0, 0, R, CD, H, 1.0f, ws->dh, H, params + p[WINDOW_MLP_W1].offset, CD,
			0.0f, ws->x, CD, e));
	ERR_TRY(o->embed_backward(d, R, C, EMBED(m), ws->ctx, ws->x,
				  grads + p[WINDOW_MLP_EMBED].offset, e));
	return ERR_OK;
}

static int eval(struct model_ws *head, const float *params, const struct model_batch *batch,
		double *loss_sum, int64_t *hits, struct err *e)
{
	struct window_mlp_ws *ws = ws_of(head);
	const struct window_mlp_batch *b = (const struct window_mlp_batch *)batch;
	struct dev *d = ws->dev;
	const struct dev_ops *o = d->ops;
	const float *b2 = params + ws->shape.p[WINDOW_MLP_B2].offset;
	int R = b->head.rows, V = ws->shape.vocab;
	*loss_sum = 0.0;
	*hits = 0;
	if (R == 0)
		return ERR_OK;
	ERR_TRY(forward(ws, params, b, e));
	ERR_TRY(o->argmax_hits(d, R, V, b2, ws->logits, ws->target, hits, e));
	ERR_TRY(o->xent(d, R, V, b2, ws->target, 0.0f, 0.0f, NULL, ws->logits, ws->loss, e));
	ERR_TRY(o->sum(d, R, ws->loss, loss_sum, e));
	return ERR_OK;
}

/* ---- what the device and bench need to know ---- */

static void dev_needs(const struct model_shape *m, int rows, struct model_dev_needs *n)
{
	/* one embed_backward: the context slots of a batch, ids of the vocabulary */
	n->embed_slots = (size_t)rows * (size_t)CONTEXT(m);
	n->embed_ids = (size_t)m->vocab;
	n->embed_dim = (size_t)EMBED(m);
}

static double flop_per_token(const struct model_shape *m)
{
	/* six GEMMs of 2 FLOP per multiply-add: the two layers forward, twice each backward */
	return 6.0 * ((double)CONTEXT(m) * EMBED(m) * HIDDEN(m) + (double)HIDDEN(m) * m->vocab);
}

static struct model_gemm largest_gemm(const struct model_shape *m, int rows)
{
	int cd = CONTEXT(m) * EMBED(m);
	if ((double)m->vocab * HIDDEN(m) > (double)HIDDEN(m) * cd)
		return (struct model_gemm){rows, m->vocab, HIDDEN(m)};
	return (struct model_gemm){rows, HIDDEN(m), cd};
}

static void sweep_set_hidden(struct settings *s, int hidden)
{
	s->hidden = hidden;
}

/* bench's sweep: the hidden width, by a small vocabulary and a tokenizer-sized one */
static const struct model_sweep sweep = {
	.key = "hidden",
	.n_sizes = 3,
	.sizes = {512, 1024, 2048},
	.n_vocabs = 2,
	.vocabs = {128, MODEL_SWEEP_VOCAB_LARGE},
	.set_size = sweep_set_hidden,
};

const struct model_ops window_mlp_ops = {
	.name = "window_mlp",
	.shape = shape_of_settings,
	.init_stream = PRNG_STREAM_INIT,
	.init_values = init_values,
	.max_rows = max_rows,
	.batch_alloc = batch_alloc,
	.batch_free = batch_free,
	.batch_build = batch_build,
	.batch_arrays = batch_arrays,
	.upload_bytes = upload_bytes,
	.ws_bytes = ws_bytes,
	.ws_check_size = ws_check_size,
	.ws_create = ws_create,
	.ws_destroy = ws_destroy,
	.step = step,
	.eval = eval,
	.dev_needs = dev_needs,
	.flop_per_token = flop_per_token,
	.largest_gemm = largest_gemm,
	.describe = describe,
	.sweep = &sweep,
};
