/*
 * gpt_ws: the GPT's device workspace (see gpt_ws.h). The float buffers are carved out
 * of one allocation by one table (ws_buffers), which ws_bytes sums, so that the size
 * reported and the size allocated cannot drift apart.
 */
#include "gpt_ws.h"

#include <limits.h>
#include <stdlib.h>

#include "gpt_shape.h"

/* each buffer starts on a 64-byte boundary */
#define ALIGN_FLOATS 16

struct buffer {
	float **at;
	size_t count;
};

static size_t rows_of(int max_rows)
{
	return (size_t)(max_rows > 0 ? max_rows : 1);
}

size_t gpt_ws_segment_max(const struct model_shape *m, int max_rows)
{
	size_t T = (size_t)GPT_T(m), R = rows_of(max_rows);
	return T < R ? T : R;
}

int gpt_ws_heads_per_call(const struct model_shape *m, int max_rows)
{
	size_t S = gpt_ws_segment_max(m, max_rows), H = (size_t)GPT_H(m);
	size_t fit = GPT_SCORE_FLOATS / (S * S);
	return (int)(fit < 1 ? 1 : fit < H ? fit : H);
}

/* The float buffers of ws for R rows (into out, at most 32); returns how many. */
static int ws_buffers(struct gpt_ws *ws, const struct model_shape *m, size_t R,
		      struct buffer *out)
{
	size_t L = (size_t)GPT_L(m), C = (size_t)GPT_C(m), V = (size_t)m->vocab;
	size_t S = gpt_ws_segment_max(m, (int)R), G = (size_t)gpt_ws_heads_per_call(m, (int)R);
	const struct buffer b[] = {
		{&ws->resid, (2 * L + 1) * R * C},
		{&ws->ln1, L * R * C}, {&ws->ln1_mean, L * R}, {&ws->ln1_rstd, L * R},
		{&ws->qkv, L * R * 3 * C}, {&ws->att, L * R * C},
		{&ws->ln2, L * R * C}, {&ws->ln2_mean, L * R}, {&ws->ln2_rstd, L * R},
		{&ws->fch, L * R * 4 * C}, {&ws->fcg, L * R * 4 * C},
		{&ws->lnf, R * C}, {&ws->lnf_mean, R}, {&ws->lnf_rstd, R},
		{&ws->logits, R * V}, {&ws->loss, R}, {&ws->zero_bias, V},
		{&ws->dres, R * C}, {&ws->dln, R * C}, {&ws->dbig, R * 4 * C},
		{&ws->sc, G * S * S}, {&ws->dsc, G * S * S},
	};
	int n = (int)(sizeof b / sizeof b[0]);
	for (int i = 0; i < n; i++)
		out[i] = b[i];
	return n;
}

static size_t rounded(size_t count)
{
	return (count + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS;
}

static size_t arena_floats(const struct model_shape *m, size_t R)
{
	struct gpt_ws probe;
	struct buffer b[32] = {{0}}; /* ws_buffers fills n of them; GCC at -O3 cannot tell */
	size_t total = 0;
	int n = ws_buffers(&probe, m, R, b);
	for (int i = 0; i < n; i++)
		total += rounded(b[i].count);
	return total;
}

size_t gpt_ws_bytes(const struct model_shape *m, int max_rows, size_t *dominant)
{
	size_t R = rows_of(max_rows);
	*dominant = R * (size_t)m->vocab * sizeof(float);
	return arena_floats(m, R) * sizeof(float) + 3 * R * sizeof(int32_t);
}

/* The device interface counts elements in int: every count one operation gets must
 * stay within INT_MAX. */
int gpt_ws_check_size(const struct model_shape *m, int max_rows, struct err *e)
{
	const uint64_t R = rows_of(max_rows), C = (uint64_t)GPT_C(m), T = (uint64_t)GPT_T(m);
	const struct {
		const char *what;
		uint64_t count;
	} counts[] = {
		{"rows x data.vocab", R * (uint64_t)m->vocab},
		{"rows x 4 model.width", R * 4 * C},
		{"model.context^2", T * T},
		{"parameters", (uint64_t)m->n_params},
	};
	for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
		if (counts[i].count > (uint64_t)INT_MAX)
			return ERR(e, ERR_CONFIG, "a gpt batch of %llu rows (train.batch_size x "
				   "data.max_len) makes %s = %llu elements, past the device "
				   "interface's limit of %d", (unsigned long long)R, counts[i].what,
				   (unsigned long long)counts[i].count, INT_MAX);
	return ERR_OK;
}

void gpt_ws_destroy(struct model_ws *head)
{
	struct gpt_ws *ws = (struct gpt_ws *)head;
	if (ws->ints)
		ws->dev->ops->release(ws->dev, ws->ints);
	if (ws->arena)
		ws->dev->ops->release(ws->dev, ws->arena);
	free(ws);
}

int gpt_ws_create(struct dev *d, const struct model_shape *m, int max_rows,
		  struct model_ws **out, struct err *e)
{
	struct gpt_ws *ws = calloc(1, sizeof *ws);
	struct buffer b[32] = {{0}}; /* ws_buffers fills n of them; GCC at -O3 cannot tell */
	size_t R = rows_of(max_rows), at = 0;
	int rc;
	if (!ws)
		return ERR(e, ERR_NOMEM, "out of memory");
	ws->head.ops = m->ops;
	ws->dev = d;
	ws->shape = *m;
	ws->max_rows = max_rows;
	ws->heads_per_call = gpt_ws_heads_per_call(m, max_rows);
	if ((rc = d->ops->alloc(d, 3 * R * sizeof(int32_t), (void **)&ws->ints, e)) ||
	    (rc = d->ops->alloc(d, arena_floats(m, R) * sizeof(float), (void **)&ws->arena, e))) {
		gpt_ws_destroy(&ws->head);
		return rc;
	}
	ws->input = ws->ints;
	ws->target = ws->ints + R;
	ws->pos = ws->ints + 2 * R;
	int n = ws_buffers(ws, m, R, b);
	for (int i = 0; i < n; i++) {
		*b[i].at = ws->arena + at;
		at += rounded(b[i].count);
	}
	/* the LM head's bias stays zero (alloc zeroes on the host; not on every backend) */
	if ((rc = d->ops->zero(d, ws->zero_bias, sizeof(float) * (size_t)m->vocab, e))) {
		gpt_ws_destroy(&ws->head);
		return rc;
	}
	*out = &ws->head;
	return ERR_OK;
}

void gpt_dev_needs(const struct model_shape *m, int rows, struct model_dev_needs *n)
{
	/* two embed_backwards of one slot per row: into wte (ids below V) and into wpe
	 * (positions below T) */
	n->embed_slots = (size_t)rows;
	n->embed_ids = (size_t)(m->vocab > GPT_T(m) ? m->vocab : GPT_T(m));
	n->embed_dim = (size_t)GPT_C(m);
}
