/*
 * sample: token generation from a gpt (see sample.h). The sequence grows by one token a
 * step and is laid out whole each time (no cache of keys and values: a model that can
 * be looked at is small); a placeholder id at its end makes the last row's input the
 * last real token, so that row's logits predict the next one.
 */
#include "sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "corpus_arrays.h"
#include "gpt_shape.h"
#include "gpt_step.h"
#include "model.h"
#include "prng.h"

#define SAMPLE_STREAM 0x73616d706c65ULL /* "sample" */

struct scored {
	float logit;
	int32_t id;
};

/* The generation's CPU device, its workspace and batch for sequences of up to `rows`. */
struct gen {
	struct dev *dev;
	struct model_ws *ws;
	struct model_batch *b;
	float *logits; /* rows x vocab */
	int32_t *seq;  /* rows */
	struct scored *order; /* vocab: the ids by logit */
};

static void gen_close(struct gen *g)
{
	model_batch_free(g->b);
	model_ws_destroy(g->ws);
	if (g->dev)
		dev_destroy(g->dev);
	free(g->logits);
	free(g->seq);
	free(g->order);
}

static int gen_open(struct gen *g, const struct model_shape *m, int rows, struct err *e)
{
	int rc;
	memset(g, 0, sizeof *g);
	if ((rc = dev_host_create(0, &g->dev, e)) ||
	    (rc = model_ws_create(g->dev, m, rows, &g->ws, e)) ||
	    (rc = model_batch_alloc(m, rows, &g->b, e)))
		return rc;
	g->logits = malloc(sizeof(float) * (size_t)rows * (size_t)m->vocab);
	g->seq = malloc(sizeof(int32_t) * (size_t)rows);
	g->order = malloc(sizeof *g->order * (size_t)m->vocab);
	if (!g->logits || !g->seq || !g->order)
		return ERR(e, ERR_NOMEM, "out of memory");
	return ERR_OK;
}

/* the logits of row len - 1 of sequence g->seq[0..len) */
static int last_logits(struct gen *g, const struct model_shape *m, const float *params, int len,
		       const float **row, struct err *e)
{
	struct corpus c;
	int32_t lengths[1] = {len}, id = 0;
	int rc;
	if ((rc = corpus_from_arrays(1, lengths, NULL, g->seq, m->vocab, &c, e)))
		return rc;
	if (!(rc = model_batch_build(g->b, &c, &id, 1, LAYOUT_PACKED, e)))
		rc = gpt_logits(g->ws, params, g->b, g->logits, e);
	corpus_free(&c);
	*row = g->logits + (size_t)(len - 1) * (size_t)m->vocab;
	return rc;
}

static int by_logit(const void *pa, const void *pb)
{
	const struct scored *a = pa, *b = pb;
	if (a->logit != b->logit)
		return a->logit > b->logit ? -1 : 1;
	return a->id - b->id; /* equal logits: the smaller id first */
}

/* one id of [DATA_RESERVED, vocab) from the row's logits */
static int32_t draw(struct gen *g, int vocab, const float *row, const struct sample_opts *o,
		    struct prng *r)
{
	int n = vocab - DATA_RESERVED;
	for (int i = 0; i < n; i++)
		g->order[i] = (struct scored){row[DATA_RESERVED + i], DATA_RESERVED + i};
	qsort(g->order, (size_t)n, sizeof *g->order, by_logit);
	if (o->temperature == 0.0)
		return g->order[0].id;
	int k = o->top_k > 0 && o->top_k < n ? o->top_k : n;
	double total = 0.0, top = g->order[0].logit;
	for (int i = 0; i < k; i++)
		total += exp((g->order[i].logit - top) / o->temperature);
	double u = (double)(prng_next(r) >> 11) * 0x1.0p-53 * total, acc = 0.0;
	for (int i = 0; i < k; i++) {
		acc += exp((g->order[i].logit - top) / o->temperature);
		if (u < acc)
			return g->order[i].id;
	}
	return g->order[k - 1].id;
}

int sample_generate(const struct model_shape *m, const float *params, const int32_t *prompt,
		    int n, const struct sample_opts *o, int32_t *out, struct err *e)
{
	struct gen g;
	struct prng r;
	if (strcmp(m->ops->name, "gpt"))
		return ERR(e, ERR_CONFIG, "sample: model.kind = %s; only a gpt generates text",
			   m->ops->name);
	int rows = n + o->tokens, context = GPT_T(m);
	if (rows > context)
		return ERR(e, ERR_CONFIG, "sample: a prompt of %d ids and %d tokens need %d "
			   "positions; model.context = %d", n, o->tokens, rows, context);
	if (o->tokens < 1)
		return ERR_OK;
	int rc = gen_open(&g, m, rows, e);
	prng_seed(&r, o->seed, SAMPLE_STREAM);
	if (!rc)
		memcpy(g.seq, prompt, sizeof(int32_t) * (size_t)n);
	for (int t = 0; !rc && t < o->tokens; t++) {
		const float *row;
		g.seq[n + t] = DATA_RESERVED; /* the placeholder: only its input is read */
		if (!(rc = last_logits(&g, m, params, n + t + 1, &row, e)))
			out[t] = g.seq[n + t] = draw(&g, m->vocab, row, o, &r);
	}
	gen_close(&g);
	return rc;
}
