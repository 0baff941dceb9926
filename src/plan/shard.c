/*
 * shard: exact mode's sampler, one W-independent list per window cut into K shards (see
 * shard.h).
 */
#include "shard.h"

#include <stdlib.h>
#include <string.h>

#define SHARD_STREAM 0x736861726473ULL /* "shards" */

int shard_pool_init(struct shard_pool *p, struct prng *rng, const struct corpus *c,
		    const struct settings *s, struct err *e)
{
	int first = c->split_first[SPLIT_TRAIN], n_train = c->split_count[SPLIT_TRAIN];
	int64_t need = (int64_t)s->shards * s->batch_size;

	memset(p, 0, sizeof *p);
	if (s->shards > SHARD_MAX || s->world < 1 || s->shards % s->world != 0)
		return ERR(e, ERR_CONFIG, "train.shards = %d on devices.world = %d: exact mode needs "
			   "at most %d shards and a world that divides them", s->shards, s->world,
			   SHARD_MAX);
	if (need > n_train)
		return ERR(e, ERR_CONFIG, "train.shards = %d x train.batch_size = %d = %lld "
			   "sequences per window, but the training split holds only %d", s->shards,
			   s->batch_size, (long long)need, n_train);
	p->corpus = c;
	p->shards = s->shards;
	p->batch = s->batch_size;
	p->order = s->shard_order;
	p->ids = malloc((size_t)n_train * sizeof *p->ids);
	p->scratch = malloc(((size_t)n_train + 3 * (size_t)need) * sizeof *p->scratch);
	if (!p->ids || !p->scratch) {
		shard_pool_free(p);
		return ERR(e, ERR_NOMEM, "sampler: out of memory");
	}
	for (int i = 0; i < n_train; i++)
		p->ids[i] = first + i;
	p->n = n_train;
	prng_seed(rng, s->seed, SHARD_STREAM);
	return ERR_OK;
}

void shard_pool_free(struct shard_pool *p)
{
	free(p->ids);
	free(p->scratch);
	memset(p, 0, sizeof *p);
}

/* Fewer supervised tokens first; equal counts by ascending id. */
static int cmp_supervised_asc(const void *a, const void *b, void *arg)
{
	const struct corpus *c = arg;
	int ia = *(const int *)a, ib = *(const int *)b;
	int sa = corpus_supervised(c, ia), sb = corpus_supervised(c, ib);
	if (sa != sb)
		return sa < sb ? -1 : 1;
	return (ia > ib) - (ia < ib);
}

/* `sorted` (n = shards x batch, ascending) into `out` shard by shard: the largest first
 * to the lightest shard with room, each shard keeping its sequences in the order they
 * came. tag is n ints of scratch. */
static void cut_balanced(const struct shard_pool *p, const int *sorted, int n, int *tag,
			 int *out)
{
	int64_t load[SHARD_MAX] = {0};
	int fill[SHARD_MAX] = {0};
	int start[SHARD_MAX];
	for (int i = n - 1; i >= 0; i--) {
		int s = window_least_loaded(load, fill, p->shards, p->batch);
		tag[i] = s;
		fill[s]++;
		load[s] += corpus_supervised(p->corpus, sorted[i]);
	}
	for (int s = 0; s < p->shards; s++)
		start[s] = s * p->batch;
	for (int i = n - 1; i >= 0; i--)
		out[start[tag[i]]++] = sorted[i];
}

int shard_fits(const struct shard_pool *p, const struct window *w, struct err *e)
{
	if (w->world * w->micro != p->shards || w->batch < p->batch)
		return ERR(e, ERR_CHECK, "shard_cut: window shaped %dx%dx%d for %d shards of %d",
			   w->world, w->micro, w->batch, p->shards, p->batch);
	return ERR_OK;
}

int shard_draw(struct shard_pool *p, struct prng *rng, struct window *w, struct err *e)
{
	int n = p->n, need = p->shards * p->batch;
	int *copy = p->scratch;

	ERR_TRY(shard_fits(p, w, e)); /* before drawing: a refusal leaves rng where it was */
	memcpy(copy, p->ids, (size_t)n * sizeof *copy);
	for (int k = 0; k < need; k++) { /* partial Fisher-Yates: the first `need` draws */
		int j = k + (int)prng_below(rng, (uint32_t)(n - k));
		int t = copy[k];
		copy[k] = copy[j];
		copy[j] = t;
	}
	return shard_cut(p, copy, w, e);
}

int shard_cut(struct shard_pool *p, const int *list, struct window *w, struct err *e)
{
	int counts[MAX_WORLD * WINDOW_MAX_MICRO];
	int need = p->shards * p->batch;
	int *drawn = p->scratch + p->n, *sorted = drawn + need, *tag = sorted + need;

	ERR_TRY(shard_fits(p, w, e));
	memcpy(sorted, list, (size_t)need * sizeof *sorted);
	qsort_r(sorted, (size_t)need, sizeof *sorted, cmp_supervised_asc, (void *)p->corpus);
	if (p->order == SHARD_ORDER_BALANCED)
		cut_balanced(p, sorted, need, tag, drawn);
	else
		memcpy(drawn, sorted, (size_t)need * sizeof *drawn);
	for (int i = 0; i < w->world * w->micro; i++)
		counts[i] = p->batch;
	return window_assign(w, p->corpus, drawn, counts, e);
}
