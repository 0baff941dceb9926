/*
 * gpt: the GPT's table of operations (see gpt.h); the work is in gpt_shape.c,
 * gpt_batch.c, gpt_ws.c and gpt_step.c.
 */
#include "gpt.h"

#include "gpt_batch.h"
#include "gpt_shape.h"
#include "gpt_step.h"
#include "gpt_ws.h"

void gpt_shape(struct model_shape *m, int vocab, int layers, int heads, int width, int context)
{
	gpt_shape_fill(m, &gpt_ops, vocab, layers, heads, width, context);
}

static int shape_of_settings(const struct settings *s, struct model_shape *m, struct err *e)
{
	gpt_shape(m, s->vocab, s->layers, s->heads, s->width, s->context);
	ERR_TRY(gpt_shape_check(m, e));
	/* a position for every token of the longest sequence */
	if (s->max_len > s->context)
		return ERR(e, ERR_CONFIG, "[model] context = %d is shorter than [data] max_len = %d: "
			   "the gpt needs a position for every token of a sequence", s->context,
			   s->max_len);
	return ERR_OK;
}

/* the head size bench's sweep keeps as it widens the model (GPT-2's) */
#define SWEEP_HEAD_SIZE 64

static void sweep_set_width(struct settings *s, int width)
{
	s->width = width;
	s->heads = width / SWEEP_HEAD_SIZE;
}

/* bench's sweep: the width (GPT-2 small's at the top), by the configured vocabulary and a
 * tokenizer-sized one; layers and context stay as configured */
static const struct model_sweep sweep = {
	.key = "width",
	.n_sizes = 3,
	.sizes = {256, 512, 768},
	.n_vocabs = 2,
	.vocabs = {MODEL_SWEEP_VOCAB_CONFIGURED, MODEL_SWEEP_VOCAB_LARGE},
	.set_size = sweep_set_width,
};

const struct model_ops gpt_ops = {
	.name = "gpt",
	.shape = shape_of_settings,
	.init_stream = GPT_INIT_STREAM,
	.init_values = gpt_init_values,
	.max_rows = gpt_max_rows,
	.batch_alloc = gpt_batch_alloc,
	.batch_free = gpt_batch_free,
	.batch_build = gpt_batch_build,
	.batch_arrays = gpt_batch_arrays,
	.upload_bytes = gpt_upload_bytes,
	.ws_bytes = gpt_ws_bytes,
	.ws_check_size = gpt_ws_check_size,
	.ws_create = gpt_ws_create,
	.ws_destroy = gpt_ws_destroy,
	.step = gpt_step,
	.eval = gpt_eval,
	.dev_needs = gpt_dev_needs,
	.flop_per_token = gpt_flop_per_token,
	.sequence_flop = gpt_sequence_flop,
	.largest_gemm = gpt_largest_gemm,
	.describe = gpt_describe,
	.sweep = &sweep,
};
