/*
 * gpt_batch: how the GPT lays out a microbatch (docs/gpt.md).
 *
 * Position t of a sequence predicts its token t from the tokens before it: its input is
 * token t - 1 (DATA_BOS at t = 0), its target token t when that is supervised (-1
 * otherwise), its position index t. Every position of a sequence is laid out, prompts and
 * masked tokens included (they are context), so the supervised positions, and N, are the
 * window MLP's.
 *
 * The rows are split into attention segments: a row attends to the rows of its segment
 * up to itself, never past it. packed: the sequences one after the other, one segment
 * each, so that no document sees another and positions restart at each. padded: each
 * sequence padded to the longest of the microbatch with DATA_PAD inputs, position index
 * continuing, target -1; its segment takes the padding too, which comes after the
 * document's tokens and so is never attended to by them.
 */
#ifndef DDPTOK_GPT_BATCH_H
#define DDPTOK_GPT_BATCH_H

#include "model_shape.h"

struct gpt_batch {
	struct model_batch head;
	int cap;          /* allocated rows */
	int context;      /* positions of the model */
	int32_t *input;   /* rows */
	int32_t *target;  /* rows; -1 = not supervised */
	int32_t *pos;     /* rows: position index in its sequence */
	int n_seg;
	int32_t *seg;     /* n_seg x 2: first row, rows */
};

int gpt_max_rows(const struct model_shape *m, int n, int max_len);
int gpt_batch_alloc(const struct model_shape *m, int max_rows, struct model_batch **out,
		    struct err *e);
void gpt_batch_free(struct model_batch *b);
int gpt_batch_build(struct model_batch *b, const struct corpus *c, const int *ids, int n,
		    int layout, struct err *e);
/* inputs, targets, positions, segments */
int gpt_batch_arrays(const struct model_batch *b, struct model_array *out);
size_t gpt_upload_bytes(const struct model_shape *m, int max_rows);

#endif
