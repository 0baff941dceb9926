/*
 * shard: exact mode's sampler, one W-independent list per window cut into K shards (see
 * shard.h). It uses the sampler's own fields: pool[0] holds every training id, scratch a
 * copy of it plus three window-sized areas (the drawn list, its sorted copy, each
 * sequence's shard), so a window never allocates.
 */
#include "shard.h"

#include <stdlib.h>
#include <string.h>

#define SHARD_STREAM 0x736861726473ULL /* "shards" */

int shard_sampler_init(struct sampler *sp, const struct corpus *c, const struct settings *s,
		       struct err *e)
{
	int first = c->split_first[SPLIT_TRAIN], n_train = c->split_count[SPLIT_TRAIN];
	int64_t need = (int64_t)s->shards * s->batch_size;

	memset(sp, 0, sizeof *sp);
	if (s->shards > SHARD_MAX || s->world < 1 || s->shards % s->world != 0)
		return ERR(e, ERR_CONFIG, "train.shards = %d on devices.world = %d: exact mode needs "
			   "at most %d shards and a world that divides them", s->shards, s->world,
			   SHARD_MAX);
	if (need > n_train)
		return ERR(e, ERR_CONFIG, "train.shards = %d x train.batch_size = %d = %lld "
			   "sequences per window, but the training split holds only %d", s->shards,
			   s->batch_size, (long long)need, n_train);
	sp->world = s->world;
	sp->micro = s->shards / s->world;
	sp->batch = s->batch_size;
	sp->rank_split = s->rank_split;
	sp->shards = s->shards;
	sp->shard_order = s->shard_order;
	sp->corpus = c;
	sp->pool[0] = malloc((size_t)n_train * sizeof *sp->pool[0]);
	sp->scratch = malloc(((size_t)n_train + 3 * (size_t)need) * sizeof *sp->scratch);
	if (!sp->pool[0] || !sp->scratch) {
		sampler_free(sp);
		return ERR(e, ERR_NOMEM, "sampler: out of memory");
	}
	for (int i = 0; i < n_train; i++)
		sp->pool[0][i] = first + i;
	sp->pool_n[0] = n_train;
	prng_seed(&sp->rng, s->seed, SHARD_STREAM);
	return ERR_OK;
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
static void cut_balanced(const struct sampler *sp, const int *sorted, int n, int *tag,
			 int *out)
{
	int64_t load[SHARD_MAX] = {0};
	int fill[SHARD_MAX] = {0};
	int start[SHARD_MAX];
	for (int i = n - 1; i >= 0; i--) {
		int s = plan_least_loaded(load, fill, sp->shards, sp->batch);
		tag[i] = s;
		fill[s]++;
		load[s] += corpus_supervised(sp->corpus, sorted[i]);
	}
	for (int s = 0; s < sp->shards; s++)
		start[s] = s * sp->batch;
	for (int i = n - 1; i >= 0; i--)
		out[start[tag[i]]++] = sorted[i];
}

int shard_sampler_next(struct sampler *sp, struct window *w, struct err *e)
{
	int counts[MAX_WORLD * WINDOW_MAX_MICRO];
	int n = sp->pool_n[0], need = sp->shards * sp->batch, rc;
	int *copy = sp->scratch, *drawn = copy + n, *sorted = drawn + need, *tag = sorted + need;

	if (w->world * w->micro != sp->shards || w->batch < sp->batch)
		return ERR(e, ERR_CHECK, "shard_sampler_next: window shaped %dx%dx%d for %d shards "
			   "of %d", w->world, w->micro, w->batch, sp->shards, sp->batch);
	memcpy(copy, sp->pool[0], (size_t)n * sizeof *copy);
	for (int k = 0; k < need; k++) { /* partial Fisher-Yates: the first `need` draws */
		int j = k + (int)prng_below(&sp->rng, (uint32_t)(n - k));
		int t = copy[k];
		copy[k] = copy[j];
		copy[j] = t;
	}
	memcpy(sorted, copy, (size_t)need * sizeof *sorted);
	qsort_r(sorted, (size_t)need, sizeof *sorted, cmp_supervised_asc, (void *)sp->corpus);
	if (sp->shard_order == SHARD_ORDER_BALANCED)
		cut_balanced(sp, sorted, need, tag, drawn);
	else
		memcpy(drawn, sorted, (size_t)need * sizeof *drawn);
	for (int i = 0; i < w->world * w->micro; i++)
		counts[i] = sp->batch;
	if ((rc = window_assign(w, sp->corpus, drawn, counts, e)))
		return rc;
	w->index = sp->window_index++;
	return ERR_OK;
}
