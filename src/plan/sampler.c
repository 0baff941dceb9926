/*
 * sampler: the window's draws (without replacement, per window), split into
 * mb[rank][microbatch] by the configured plan (window.h), or exact mode's shards
 * (shard.h) when [train] shards asks for them.
 *
 * Draws: each window, for each pool r in order, a partial Fisher-Yates over a fresh copy
 * of pool r (under length_bands the training ids of band r, ascending, accumulation x
 * batch_size of them drawn; under balanced one pool of every training id, W times as many
 * drawn), in draw order, from the sampler's prng (stream SAMPLER_STREAM). Copying the
 * pool each time makes a window depend only on the prng state, which is what the
 * checkpoint stores. With [train] sampling = epochs the window's ids are instead the next
 * ones of the epochs (epoch.h), split by the plan or cut into shards the same way.
 * docs/random-draws.md states it all for a reimplementation.
 */
#include "sampler.h"

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

/* ---- sampler ---------------------------------------------------------------------- */

void sampler_free(struct sampler *sp)
{
	if (!sp)
		return;
	for (int r = 0; r < MAX_WORLD; r++)
		free(sp->pool[r]);
	free(sp->scratch);
	shard_pool_free(&sp->exact);
	epoch_free(&sp->epochs);
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

/* train.sampling = epochs: the epochs of c's training split, `need` ids per window. */
static int epochs_init(struct sampler *sp, const struct corpus *c, const struct settings *s,
		       int64_t need, struct err *e)
{
	if (s->sampling != SAMPLING_EPOCHS)
		return ERR_OK;
	ERR_TRY(settings_sampling_fits(s, e));
	return epoch_init(&sp->epochs, c->split_first[SPLIT_TRAIN], c->split_count[SPLIT_TRAIN],
			  (int)need, s->seed, e);
}

/* Exact mode: one pool of every training id, cut into shards each window (shard.h). */
static int exact_init(struct sampler *sp, const struct corpus *c, const struct settings *s,
		      struct err *e)
{
	int rc;
	ERR_TRY(shard_pool_init(&sp->exact, &sp->rng, c, s, e));
	sp->world = s->world;
	sp->micro = s->shards / s->world;
	sp->batch = s->batch_size;
	sp->rank_split = s->rank_split;
	sp->corpus = c;
	if ((rc = epochs_init(sp, c, s, (int64_t)s->shards * s->batch_size, e)))
		sampler_free(sp);
	return rc;
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
		return exact_init(sp, c, s, e);
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
	sp->micro_tokens = s->batching == BATCHING_TOKENS ? s->micro_tokens : 0;
	sp->corpus = c;
	rc = fill_pools(sp, c, s, max_len, sp->per_pool, e);
	if (!rc)
		rc = epochs_init(sp, c, s, sp->per_pool, e);
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

/* The window's ids of the independent draws: from each pool, a partial Fisher-Yates over
 * a fresh copy of it, pool after pool, into the scratch. */
static const int *draw_pools(struct sampler *sp)
{
	int need = sp->per_pool, max_pool = 0;
	int *copy, *ids;

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
	return ids;
}

/* Exact mode's window: drawn by shard_draw, or the next of the epochs cut by shard_cut. */
static int next_exact(struct sampler *sp, struct window *w, struct err *e)
{
	/* the shape first: a refused window must not move the epoch stream (a retry of the
	 * same window would then find it past that window) */
	ERR_TRY(shard_fits(&sp->exact, w, e));
	if (sp->epochs.n > 0)
		return shard_cut(&sp->exact, epoch_take(&sp->epochs, sp->window_index), w, e);
	return shard_draw(&sp->exact, &sp->rng, w, e);
}

int sampler_next(struct sampler *sp, struct window *w, struct err *e)
{
	int counts[MAX_WORLD * WINDOW_MAX_MICRO];
	const int *ids;
	int rc;

	if (sp->exact.shards > 0) {
		if ((rc = next_exact(sp, w, e)))
			return rc;
		w->index = sp->window_index++;
		return ERR_OK;
	}
	if (w->world != sp->world || window_draw_micro(w) != sp->micro || w->batch < sp->batch)
		return ERR(e, ERR_CHECK, "sampler_next: window shaped %dx%dx%d, sampler %dx%dx%d",
			   w->world, window_draw_micro(w), w->batch, sp->world, sp->micro, sp->batch);
	ids = sp->epochs.n > 0 ? epoch_take(&sp->epochs, sp->window_index) : draw_pools(sp);
	for (int i = 0; i < sp->world * sp->micro; i++)
		counts[i] = sp->batch;
	rc = window_assign(w, sp->corpus, ids, counts, e);
	if (!rc && sp->rank_split == RANK_SPLIT_BALANCED)
		rc = window_resplit(w, sp->corpus, RANK_SPLIT_BALANCED, e);
	if (!rc && sp->micro_tokens)
		rc = window_pack_tokens(w, sp->corpus, sp->micro_tokens, e);
	if (rc)
		return rc;
	w->index = sp->window_index++;
	return ERR_OK;
}

/* The generator the state names: with epochs, the one the current epoch started from. */
static const struct prng *state_rng(const struct sampler *sp)
{
	return sp->epochs.n > 0 ? &sp->epochs.start : &sp->rng;
}

void sampler_get_state(const struct sampler *sp, struct sampler_state *st)
{
	memcpy(st->rng, state_rng(sp)->s, sizeof st->rng);
	st->window_index = sp->window_index;
}

void sampler_set_state(struct sampler *sp, const struct sampler_state *st)
{
	if (sp->epochs.n > 0) {
		struct prng start;
		memcpy(start.s, st->rng, sizeof start.s);
		epoch_restore(&sp->epochs, &start, st->window_index);
	} else {
		memcpy(sp->rng.s, st->rng, sizeof sp->rng.s);
	}
	sp->window_index = st->window_index;
}
