/*
 * gpt_batch: the GPT's microbatch on the host (see gpt_batch.h).
 */
#include "gpt_batch.h"

#include <stdlib.h>

#include "gpt_shape.h"

int gpt_max_rows(const struct model_shape *m, int n, int max_len)
{
	(void)m;
	return n * max_len;
}

void gpt_batch_free(struct model_batch *head)
{
	struct gpt_batch *b = (struct gpt_batch *)head;
	free(b->input);
	free(b->target);
	free(b->pos);
	free(b->seg);
	free(b);
}

int gpt_batch_alloc(const struct model_shape *m, int cap_rows, struct model_batch **out,
		    struct err *e)
{
	struct gpt_batch *b = calloc(1, sizeof *b);
	size_t rows = (size_t)(cap_rows > 0 ? cap_rows : 1);
	if (!b)
		return ERR(e, ERR_NOMEM, "out of memory for a batch of %d rows", cap_rows);
	b->head.ops = m->ops;
	b->cap = cap_rows;
	b->context = GPT_T(m);
	b->input = malloc(sizeof(int32_t) * rows);
	b->target = malloc(sizeof(int32_t) * rows);
	b->pos = malloc(sizeof(int32_t) * rows);
	/* a segment has a row at least */
	b->seg = malloc(sizeof(int32_t) * 2 * rows);
	if (!b->input || !b->target || !b->pos || !b->seg) {
		gpt_batch_free(&b->head);
		return ERR(e, ERR_NOMEM, "out of memory for a batch of %d rows", cap_rows);
	}
	*out = &b->head;
	return ERR_OK;
}

/* Sequence id as `span` rows from row r on (its length, or the longest when padded), one
 * segment; returns the next row. */
static int lay_out_sequence(struct gpt_batch *b, const struct corpus *c, int id, int span,
			    int r)
{
	const int32_t *tok = c->tokens + c->offset[id];
	int len = corpus_len(c, id);
	b->seg[2 * b->n_seg] = r;
	b->seg[2 * b->n_seg + 1] = span;
	b->n_seg++;
	for (int t = 0; t < span; t++, r++) {
		b->pos[r] = t;
		if (t < len) {
			b->input[r] = t > 0 ? tok[t - 1] : DATA_BOS;
			b->target[r] = corpus_is_target(c, id, t) ? tok[t] : -1;
		} else {
			b->input[r] = DATA_PAD;
			b->target[r] = -1;
		}
	}
	return r;
}

int gpt_batch_build(struct model_batch *head, const struct corpus *c, const int *ids, int n,
		    int layout, struct err *e)
{
	struct gpt_batch *b = (struct gpt_batch *)head;
	int rows = 0, longest = 0;
	int64_t sup = 0;
	for (int i = 0; i < n; i++) {
		if (ids[i] < 0 || ids[i] >= c->n)
			return ERR(e, ERR_DATA, "sequence id %d outside the corpus (0..%d)", ids[i],
				   c->n - 1);
		int len = corpus_len(c, ids[i]);
		if (len > b->context)
			return ERR(e, ERR_DATA, "sequence %d has %d tokens, more than the %d positions "
				   "of model.context", ids[i], len, b->context);
		longest = len > longest ? len : longest;
		rows += len;
		sup += corpus_supervised(c, ids[i]);
	}
	if (layout == LAYOUT_PADDED)
		rows = n * longest;
	if (rows > b->cap)
		return ERR(e, ERR_DEVICE, "batch of %d positions exceeds its capacity of %d", rows,
			   b->cap);
	int r = 0;
	b->n_seg = 0;
	for (int i = 0; i < n; i++)
		r = lay_out_sequence(b, c, ids[i],
				     layout == LAYOUT_PADDED ? longest : corpus_len(c, ids[i]), r);
	b->head.rows = rows;
	b->head.supervised = sup;
	return ERR_OK;
}

int gpt_batch_arrays(const struct model_batch *head, struct model_array *out)
{
	const struct gpt_batch *b = (const struct gpt_batch *)head;
	size_t rows = (size_t)head->rows;
	out[0] = (struct model_array){"inputs", b->input, 1, {rows, 0}};
	out[1] = (struct model_array){"targets", b->target, 1, {rows, 0}};
	out[2] = (struct model_array){"positions", b->pos, 1, {rows, 0}};
	out[3] = (struct model_array){"segments", b->seg, 2, {(size_t)b->n_seg, 2}};
	return 4;
}

size_t gpt_upload_bytes(const struct model_shape *m, int rows)
{
	(void)m;
	/* inputs, targets, positions */
	return 3 * (size_t)rows * sizeof(int32_t);
}
