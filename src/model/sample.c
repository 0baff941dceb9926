/*
 * sample: token generation from a gpt (see sample.h). The window of visible tokens lives
 * in g->win; with the cache each new token is one row pushed (sample_cache.c), without it
 * the window is laid out whole each time with a placeholder id at its end, so that the
 * last row's input is the last real token and its logits predict the next one.
 */
#include "sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "corpus_arrays.h"
#include "gpt_shape.h"
#include "gpt_step.h"
#include "model.h"
#include "prng.h"
#include "sample_cache.h"

#define SAMPLE_STREAM 0x73616d706c65ULL /* "sample" */

struct scored {
	float logit;
	int32_t id;
};

/* The generation's CPU device, its forwards (the whole window; the cache) and window. */
struct gen {
	const struct model_shape *m;
	const float *params;
	struct dev *dev;
	int cached;                /* o->no_cache == 0: the window continues row by row */
	struct sample_cache cache;
	struct model_ws *ws;       /* the whole window: every token without the cache, each
				      start and slide with it */
	struct model_batch *b;
	float *logits;             /* rows x vocab */
	int32_t *win;              /* the window's tokens: up to model.context - 1, and the
				      placeholder */
	int wn;
	uint8_t *seen;             /* vocab: ids in the text so far (repetition penalty) */
	struct scored *order;      /* vocab: the ids by logit */
	const float *row;          /* the logits of the window's last row */
};

static void gen_close(struct gen *g)
{
	sample_cache_close(&g->cache);
	model_batch_free(g->b);
	model_ws_destroy(g->ws);
	if (g->dev)
		dev_destroy(g->dev);
	free(g->logits);
	free(g->win);
	free(g->seen);
	free(g->order);
}

static int gen_open(struct gen *g, const struct model_shape *m, const float *params,
		    int no_cache, struct err *e)
{
	int T = GPT_T(m);
	memset(g, 0, sizeof *g);
	g->m = m;
	g->params = params;
	ERR_TRY(dev_host_create(0, &g->dev, e));
	ERR_TRY(model_ws_create(g->dev, m, T, &g->ws, e));
	ERR_TRY(model_batch_alloc(m, T, &g->b, e));
	g->logits = malloc(sizeof(float) * (size_t)T * (size_t)m->vocab);
	if (!g->logits)
		return ERR(e, ERR_NOMEM, "out of memory");
	if ((g->cached = !no_cache))
		ERR_TRY(sample_cache_open(&g->cache, g->dev, m, params, e));
	g->win = malloc(sizeof(int32_t) * (size_t)T);
	g->seen = calloc((size_t)m->vocab, 1);
	g->order = malloc(sizeof *g->order * (size_t)m->vocab);
	if (!g->win || !g->seen || !g->order)
		return ERR(e, ERR_NOMEM, "out of memory");
	return ERR_OK;
}

/* no cache: g->row = the logits of the last row of the window laid out whole */
static int window_logits(struct gen *g, struct err *e)
{
	struct corpus c;
	int32_t lengths[1] = {g->wn + 1}, id = 0;
	int rc;
	g->win[g->wn] = DATA_RESERVED; /* the placeholder: only its input is read */
	if ((rc = corpus_from_arrays(1, lengths, NULL, g->win, g->m->vocab, &c, e)))
		return rc;
	if (!(rc = model_batch_build(g->b, &c, &id, 1, LAYOUT_PACKED, e)))
		rc = gpt_logits(g->ws, g->params, g->b, g->logits, e);
	corpus_free(&c);
	g->row = g->logits + (size_t)g->wn * (size_t)g->m->vocab;
	return rc;
}

/* The window run from position 0 (a start, or a slide): DATA_BOS, then its tokens, whole;
 * the cache takes its rows' keys and values and goes on from there. */
static int window_from_start(struct gen *g, struct err *e)
{
	ERR_TRY(window_logits(g, e));
	if (g->cached)
		sample_cache_adopt(&g->cache, g->ws, g->wn + 1);
	return ERR_OK;
}

/* id joins the window: one row more, or, with model.context full, a slide to the last
 * half of the window */
static int window_append(struct gen *g, int32_t id, struct sample_result *res, struct err *e)
{
	int room = GPT_T(g->m) - 1; /* positions for tokens: row 0 is DATA_BOS's */
	if (g->wn < room) {
		g->win[g->wn++] = id;
		if (!g->cached)
			return window_logits(g, e);
		ERR_TRY(sample_cache_push(&g->cache, id, e));
		g->row = g->cache.logits;
		return ERR_OK;
	}
	int keep = room / 2;
	if (keep > 0) {
		memmove(g->win, g->win + g->wn - (keep - 1), sizeof(int32_t) * (size_t)(keep - 1));
		g->win[keep - 1] = id;
	}
	g->wn = keep;
	res->slides++;
	return window_from_start(g, e);
}

static int by_logit(const void *pa, const void *pb)
{
	const struct scored *a = pa, *b = pb;
	if (a->logit != b->logit)
		return a->logit > b->logit ? -1 : 1;
	return a->id - b->id; /* equal logits: the smaller id first */
}

/* id's logit in the window's last row, the repetition penalty applied */
static float penalized(const struct gen *g, const struct sample_opts *o, int32_t id)
{
	float v = g->row[id], p = (float)o->repetition_penalty;
	if (p != 1.0f && g->seen[id])
		v = v > 0.0f ? v / p : v * p;
	return v;
}

/* g->order: the user's ids by logit, the repetition penalty applied; returns how many */
static int rank_ids(struct gen *g, const struct sample_opts *o)
{
	int n = g->m->vocab - DATA_RESERVED;
	for (int i = 0; i < n; i++)
		g->order[i] = (struct scored){penalized(g, o, DATA_RESERVED + i), DATA_RESERVED + i};
	qsort(g->order, (size_t)n, sizeof *g->order, by_logit);
	return n;
}

/* the largest logit's id (ties: the smaller id), in one pass: greedy needs no order */
static int32_t largest(const struct gen *g, const struct sample_opts *o)
{
	int32_t best = DATA_RESERVED;
	float top = penalized(g, o, best);
	for (int32_t id = DATA_RESERVED + 1; id < g->m->vocab; id++) {
		float v = penalized(g, o, id);
		if (v > top)
			top = v, best = id;
	}
	return best;
}

/* one id of [DATA_RESERVED, vocab) from the window's last logits */
static int32_t draw(struct gen *g, const struct sample_opts *o, struct prng *r)
{
	if (o->temperature == 0.0)
		return largest(g, o);
	int n = rank_ids(g, o);
	int k = o->top_k > 0 && o->top_k < n ? o->top_k : n;
	double total = 0.0, top = g->order[0].logit;
	for (int i = 0; i < k; i++)
		total += exp((g->order[i].logit - top) / o->temperature);
	if (o->top_p < 1.0) { /* the fewest, largest first, holding top_p of the weight */
		double kept = 0.0;
		int i = 0;
		while (i < k && (i == 0 || kept < o->top_p * total))
			kept += exp((g->order[i++].logit - top) / o->temperature);
		k = i;
		total = kept;
	}
	double u = (double)(prng_next(r) >> 11) * 0x1.0p-53 * total, acc = 0.0;
	for (int i = 0; i < k; i++) {
		acc += exp((g->order[i].logit - top) / o->temperature);
		if (u < acc)
			return g->order[i].id;
	}
	return g->order[k - 1].id;
}

/* the prompt's last model.context - 1 ids open the window; every id counts as seen */
static void window_prompt(struct gen *g, const int32_t *prompt, int n)
{
	int room = GPT_T(g->m) - 1, from = n > room ? n - room : 0;
	for (int i = 0; i < n; i++)
		g->seen[prompt[i]] = 1;
	g->wn = n - from;
	memcpy(g->win, prompt + from, sizeof(int32_t) * (size_t)g->wn);
}

static int generate(struct gen *g, const struct sample_opts *o, int32_t *out,
		    struct sample_result *res, struct err *e)
{
	struct prng r;
	size_t V = (size_t)g->m->vocab;
	prng_seed(&r, o->seed, SAMPLE_STREAM);
	ERR_TRY(window_from_start(g, e));
	for (int t = 0; t < o->tokens; t++) {
		int32_t id = draw(g, o, &r);
		if (o->logits)
			memcpy(o->logits + (size_t)t * V, g->row, sizeof(float) * V);
		if (o->on_token)
			o->on_token(o->on_token_arg, id);
		if (id == o->eot) {
			res->ended_at_eot = 1;
			return ERR_OK;
		}
		out[res->produced++] = id;
		g->seen[id] = 1;
		if (t + 1 < o->tokens)
			ERR_TRY(window_append(g, id, res, e));
	}
	return ERR_OK;
}

int sample_generate(const struct model_shape *m, const float *params, const int32_t *prompt,
		    int n, const struct sample_opts *o, int32_t *out, struct sample_result *res,
		    struct err *e)
{
	struct gen g;
	memset(res, 0, sizeof *res);
	if (strcmp(m->ops->name, "gpt"))
		return ERR(e, ERR_CONFIG, "sample: model.kind = %s; only a gpt generates text",
			   m->ops->name);
	if (o->tokens < 1)
		return ERR_OK;
	double start = clock_now_s();
	int rc = gen_open(&g, m, params, o->no_cache, e);
	if (rc == ERR_OK) {
		window_prompt(&g, prompt, n);
		rc = generate(&g, o, out, res, e);
	}
	gen_close(&g);
	res->seconds = clock_now_s() - start;
	res->tokens_per_s = res->seconds > 0 ? res->produced / res->seconds : 0.0;
	return rc;
}
