/*
 * plan: the sampler (length bands, draws without replacement per window) and the two
 * ways of splitting a drawn window into plan[rank][microbatch].
 *
 * Draws: each window, for r = 0..W-1, a partial Fisher-Yates over a fresh copy of pool r
 * (the training ids of band r, ascending) picks accumulation x batch_size ids, in draw
 * order, from the sampler's prng (stream SAMPLER_STREAM). Copying the pool each time
 * makes a window depend only on the prng state, which is what the checkpoint stores.
 *
 * A window keeps its ids packed in storage[0, cap) with cap = world x micro x batch; the
 * same allocation holds two more cap-sized areas that window_resplit works in (a sorted
 * copy and a destination tag per id), so that re-planning never allocates.
 */
#include "sampler.h"
#include "shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLER_STREAM 0x73616d706c6572ULL /* "sampler" */

void sampler_band_bounds(int max_len, int world, int r, int *lo, int *hi)
{
	*lo = (int)((int64_t)max_len * r / world);
	*hi = (int)((int64_t)max_len * (r + 1) / world);
}

int sampler_band_of(int len, int max_len, int world)
{
	for (int r = 0; r < world - 1; r++) {
		int lo, hi;
		sampler_band_bounds(max_len, world, r, &lo, &hi);
		if (len <= hi)
			return r;
	}
	return world - 1;
}

/* ---- windows ---------------------------------------------------------------------- */

int window_init(struct window *w, int world, int micro, int batch, struct err *e)
{
	size_t cap;

	memset(w, 0, sizeof *w);
	if (world < 1 || world > MAX_WORLD)
		return ERR(e, ERR_CONFIG, "devices.world = %d: must be in [1, %d]", world,
			   MAX_WORLD);
	if (micro < 1 || micro > WINDOW_MAX_MICRO)
		return ERR(e, ERR_CONFIG, "train.accumulation = %d: must be in [1, %d]", micro,
			   WINDOW_MAX_MICRO);
	if (batch < 1 || (int64_t)world * micro * batch > (1 << 24))
		return ERR(e, ERR_CONFIG, "train.batch_size = %d: must be in [1, %d]", batch,
			   (1 << 24) / (world * micro));
	cap = (size_t)world * micro * batch;
	w->storage = calloc(3 * cap, sizeof *w->storage);
	if (!w->storage)
		return ERR(e, ERR_NOMEM, "window: out of memory for %zu ids", cap);
	w->world = world;
	w->micro = micro;
	w->batch = batch;
	for (int r = 0; r < world; r++)
		for (int m = 0; m < micro; m++)
			w->mb[r][m].ids = w->storage;
	return ERR_OK;
}

void window_free(struct window *w)
{
	if (!w)
		return;
	free(w->storage);
	memset(w, 0, sizeof *w);
}

static size_t window_cap(const struct window *w)
{
	return (size_t)w->world * w->micro * w->batch;
}

/* Points the microbatches at storage for the given counts and counts the tokens and the
 * sequences holding one (the counts of the two weighting units). The ids
 * must already be in storage and valid. */
static void window_layout(struct window *w, const struct corpus *c, const int *counts)
{
	int pos = 0;

	w->N = 0;
	w->S = 0;
	for (int r = 0; r < w->world; r++) {
		w->rank_tokens[r] = 0;
		w->rank_sequences[r] = 0;
		for (int m = 0; m < w->micro; m++) {
			struct microbatch *mb = &w->mb[r][m];
			mb->n = counts[r * w->micro + m];
			mb->ids = w->storage + pos;
			mb->tokens = 0;
			mb->sequences = 0;
			for (int k = 0; k < mb->n; k++) {
				mb->tokens += corpus_supervised(c, mb->ids[k]);
				mb->sequences += corpus_supervised(c, mb->ids[k]) > 0;
			}
			pos += mb->n;
			w->rank_tokens[r] += mb->tokens;
			w->rank_sequences[r] += mb->sequences;
		}
		w->N += w->rank_tokens[r];
		w->S += w->rank_sequences[r];
	}
	w->n_ids = pos;
}

int window_assign(struct window *w, const struct corpus *c, const int *ids, const int *counts,
		  struct err *e)
{
	int64_t total = 0;

	if (!w->storage)
		return ERR(e, ERR_CHECK, "window_assign: window not initialized");
	for (int i = 0; i < w->world * w->micro; i++) {
		if (counts[i] < 0 || counts[i] > w->batch)
			return ERR(e, ERR_CHECK, "window_assign: rank %d microbatch %d has %d "
				   "sequences (0..%d allowed)", i / w->micro, i % w->micro, counts[i],
				   w->batch);
		total += counts[i];
	}
	for (int64_t k = 0; k < total; k++)
		if (ids[k] < 0 || ids[k] >= c->n)
			return ERR(e, ERR_CHECK, "window_assign: sequence id %d outside [0, %d)",
				   ids[k], c->n);
	if (total && ids != w->storage)
		memmove(w->storage, ids, (size_t)total * sizeof *ids);
	window_layout(w, c, counts);
	return ERR_OK;
}

/* Larger supervised count first; equal counts by ascending id. */
static int cmp_supervised_desc(const void *a, const void *b, void *arg)
{
	const struct corpus *c = arg;
	int ia = *(const int *)a, ib = *(const int *)b;
	int sa = corpus_supervised(c, ia), sb = corpus_supervised(c, ib);

	if (sa != sb)
		return sa > sb ? -1 : 1;
	return (ia > ib) - (ia < ib);
}

int plan_least_loaded(const int64_t *load, const int *fill, int n, int room)
{
	int best = -1;
	for (int i = 0; i < n; i++)
		if (fill[i] < room && (best < 0 || load[i] < load[best]))
			best = i;
	return best;
}

static void window_balance(struct window *w, const struct corpus *c)
{
	size_t cap = window_cap(w);
	int n = w->n_ids;
	int *sorted = w->storage + cap, *tag = w->storage + 2 * cap;
	int64_t rload[MAX_WORLD] = { 0 }, mload[WINDOW_MAX_MICRO];
	int rfill[MAX_WORLD] = { 0 }, mfill[WINDOW_MAX_MICRO];
	int counts[MAX_WORLD * WINDOW_MAX_MICRO] = { 0 };
	int start[MAX_WORLD * WINDOW_MAX_MICRO];
	int room_rank = (n + w->world - 1) / w->world;

	memcpy(sorted, w->storage, (size_t)n * sizeof *sorted);
	qsort_r(sorted, (size_t)n, sizeof *sorted, cmp_supervised_desc, (void *)c);

	/* ranks: heaviest sequence first to the least loaded rank with room */
	for (int i = 0; i < n; i++) {
		int r = plan_least_loaded(rload, rfill, w->world, room_rank);
		tag[i] = r;
		rfill[r]++;
		rload[r] += corpus_supervised(c, sorted[i]);
	}
	/* microbatches inside each rank, the same way, visiting its ids in sorted order */
	for (int r = 0; r < w->world; r++) {
		int room_mb = (rfill[r] + w->micro - 1) / w->micro;
		memset(mload, 0, sizeof mload);
		memset(mfill, 0, sizeof mfill);
		for (int i = 0; i < n; i++) {
			int m;
			if (tag[i] != r)
				continue;
			m = plan_least_loaded(mload, mfill, w->micro, room_mb);
			mfill[m]++;
			mload[m] += corpus_supervised(c, sorted[i]);
			tag[i] = w->world + r * w->micro + m; /* > world: already placed */
		}
	}
	/* stable counting sort by destination back into storage */
	for (int i = 0; i < n; i++)
		counts[tag[i] - w->world]++;
	for (int k = 0, pos = 0; k < w->world * w->micro; k++) {
		start[k] = pos;
		pos += counts[k];
	}
	for (int i = 0; i < n; i++)
		w->storage[start[tag[i] - w->world]++] = sorted[i];
	window_layout(w, c, counts);
}

int window_resplit(struct window *w, const struct corpus *c, int rank_split, struct err *e)
{
	int counts[MAX_WORLD * WINDOW_MAX_MICRO];

	if (!w->storage)
		return ERR(e, ERR_CHECK, "window_resplit: window not initialized");
	switch (rank_split) {
	case RANK_SPLIT_BALANCED:
		window_balance(w, c);
		return ERR_OK;
	case RANK_SPLIT_LENGTH_BANDS:
		for (int r = 0; r < w->world; r++)
			for (int m = 0; m < w->micro; m++)
				counts[r * w->micro + m] = w->mb[r][m].n;
		window_layout(w, c, counts);
		return ERR_OK;
	default:
		return ERR(e, ERR_CONFIG, "train.plan: unknown plan kind %d", rank_split);
	}
}

/* ---- sampler ---------------------------------------------------------------------- */

void sampler_free(struct sampler *sp)
{
	if (!sp)
		return;
	for (int r = 0; r < MAX_WORLD; r++)
		free(sp->pool[r]);
	free(sp->scratch);
	memset(sp, 0, sizeof *sp);
}

/* The ERR_CONFIG of a pool too small for a window: "band r (range)" for the length-band
 * plan, which names the plan that draws from every length instead. */
static int pool_too_small(const struct sampler *sp, const struct settings *s, int max_len,
			  int r, int64_t need, struct err *e)
{
	int lo, hi;
	char range[64];

	if (sp->bands == 1)
		return ERR(e, ERR_CONFIG, "train.batch_size = %d x train.accumulation = %d x "
			   "devices.world = %d = %lld sequences per window, but the training split "
			   "holds only %d sequences", s->batch_size, s->accumulation, s->world,
			   (long long)need, sp->pool_n[0]);
	sampler_band_bounds(max_len, sp->bands, r, &lo, &hi);
	if (r == 0)
		snprintf(range, sizeof range, "lengths <= %d", hi);
	else if (r == sp->bands - 1)
		snprintf(range, sizeof range, "lengths > %d", lo);
	else
		snprintf(range, sizeof range, "lengths %d..%d", lo + 1, hi);
	return ERR(e, ERR_CONFIG, "train.batch_size = %d x train.accumulation = %d = %lld "
		   "sequences per rank and window, but length band %d (%s) holds only %d "
		   "training sequences: train.plan = length_bands draws each rank's share from "
		   "its own band; train.plan = balanced draws from every length", s->batch_size,
		   s->accumulation, (long long)need, r, range, sp->pool_n[r]);
}

/* The pool a training sequence is drawn from: its length band under the length-band
 * plan, the one whole pool otherwise. */
static int pool_of(const struct sampler *sp, const struct corpus *c, int id, int max_len)
{
	return sp->bands == 1 ? 0 : sampler_band_of(corpus_len(c, id), max_len, sp->bands);
}

/* Fills sp->pool[] with the training ids, each pool needing `need` of them per window. */
static int fill_pools(struct sampler *sp, const struct corpus *c, const struct settings *s,
		      int max_len, int64_t need, struct err *e)
{
	int first = c->split_first[SPLIT_TRAIN], n_train = c->split_count[SPLIT_TRAIN];

	for (int i = first; i < first + n_train; i++)
		sp->pool_n[pool_of(sp, c, i, max_len)]++;
	for (int r = 0; r < sp->bands; r++) {
		if (sp->pool_n[r] < need)
			return pool_too_small(sp, s, max_len, r, need, e);
		sp->pool[r] = malloc((size_t)sp->pool_n[r] * sizeof *sp->pool[r]);
		if (!sp->pool[r])
			return ERR(e, ERR_NOMEM, "sampler: out of memory");
		sp->pool_n[r] = 0;
	}
	for (int i = first; i < first + n_train; i++) {
		int r = pool_of(sp, c, i, max_len);
		sp->pool[r][sp->pool_n[r]++] = i;
	}
	return ERR_OK;
}

int sampler_init(struct sampler *sp, const struct corpus *c, const struct settings *s,
		 struct err *e)
{
	int first = c->split_first[SPLIT_TRAIN], n_train = c->split_count[SPLIT_TRAIN];
	int max_len = s->max_len, max_pool = 0, rc;
	int64_t per_rank;

	memset(sp, 0, sizeof *sp);
	if (s->world < 1 || s->world > MAX_WORLD)
		return ERR(e, ERR_CONFIG, "devices.world = %d: must be in [1, %d]", s->world,
			   MAX_WORLD);
	if (s->accumulation < 1 || s->accumulation > WINDOW_MAX_MICRO)
		return ERR(e, ERR_CONFIG, "train.accumulation = %d: must be in [1, %d]",
			   s->accumulation, WINDOW_MAX_MICRO);
	if (s->batch_size < 1)
		return ERR(e, ERR_CONFIG, "train.batch_size = %d: must be at least 1",
			   s->batch_size);
	if (s->shards > 0)
		return shard_sampler_init(sp, c, s, e);
	if (s->rank_split != RANK_SPLIT_LENGTH_BANDS && s->rank_split != RANK_SPLIT_BALANCED)
		return ERR(e, ERR_CONFIG, "train.plan: unknown plan kind %d", s->rank_split);
	per_rank = (int64_t)s->accumulation * s->batch_size;
	if (max_len <= 0)
		for (int i = first; i < first + n_train; i++)
			if (corpus_len(c, i) > max_len)
				max_len = corpus_len(c, i);

	sp->world = s->world;
	sp->micro = s->accumulation;
	sp->batch = s->batch_size;
	sp->rank_split = s->rank_split;
	/* only the length-band plan needs the bands; any other draws from every length */
	sp->bands = s->rank_split == RANK_SPLIT_LENGTH_BANDS ? s->world : 1;
	sp->per_pool = (int)(per_rank * s->world / sp->bands);
	sp->corpus = c;
	rc = fill_pools(sp, c, s, max_len, per_rank * s->world / sp->bands, e);
	if (rc)
		goto fail;
	for (int r = 0; r < sp->bands; r++)
		if (sp->pool_n[r] > max_pool)
			max_pool = sp->pool_n[r];
	sp->scratch = malloc(((size_t)max_pool + (size_t)s->world * per_rank) *
			     sizeof *sp->scratch);
	if (!sp->scratch) {
		rc = ERR(e, ERR_NOMEM, "sampler: out of memory");
		goto fail;
	}
	prng_seed(&sp->rng, s->seed, SAMPLER_STREAM);
	sp->window_index = 0;
	return ERR_OK;
fail:
	sampler_free(sp);
	return rc;
}

int sampler_next(struct sampler *sp, struct window *w, struct err *e)
{
	int counts[MAX_WORLD * WINDOW_MAX_MICRO];
	int need = sp->per_pool, max_pool = 0, rc;
	int *copy, *ids;

	if (sp->shards > 0)
		return shard_sampler_next(sp, w, e);
	if (w->world != sp->world || w->micro != sp->micro || w->batch < sp->batch)
		return ERR(e, ERR_CHECK, "sampler_next: window shaped %dx%dx%d, sampler %dx%dx%d",
			   w->world, w->micro, w->batch, sp->world, sp->micro, sp->batch);
	for (int r = 0; r < sp->bands; r++)
		if (sp->pool_n[r] > max_pool)
			max_pool = sp->pool_n[r];
	copy = sp->scratch;
	ids = sp->scratch + max_pool;
	for (int r = 0; r < sp->bands; r++) {
		int n = sp->pool_n[r];
		memcpy(copy, sp->pool[r], (size_t)n * sizeof *copy);
		for (int k = 0; k < need; k++) {
			int j = k + (int)prng_below(&sp->rng, (uint32_t)(n - k));
			int t = copy[k];
			copy[k] = copy[j];
			copy[j] = t;
		}
		memcpy(ids + (size_t)r * need, copy, (size_t)need * sizeof *ids);
	}
	for (int i = 0; i < sp->world * sp->micro; i++)
		counts[i] = sp->batch;
	rc = window_assign(w, sp->corpus, ids, counts, e);
	if (!rc && sp->rank_split == RANK_SPLIT_BALANCED)
		rc = window_resplit(w, sp->corpus, RANK_SPLIT_BALANCED, e);
	if (rc)
		return rc;
	w->index = sp->window_index++;
	return ERR_OK;
}

void sampler_get_state(const struct sampler *sp, struct sampler_state *st)
{
	memcpy(st->rng, sp->rng.s, sizeof st->rng);
	st->window_index = sp->window_index;
}

void sampler_set_state(struct sampler *sp, const struct sampler_state *st)
{
	memcpy(sp->rng.s, st->rng, sizeof sp->rng.s);
	sp->window_index = st->window_index;
}
