/*
 * window: a window's sequences and their split into mb[rank][microbatch], shared by the
 * sampler's two forms (sampler.c's length bands and exact mode's shards, shard.c) and read
 * by everything that runs a window.
 *
 * A window keeps its ids packed in storage[0, cap) with cap = world x micro x batch; the
 * same allocation holds two more cap-sized areas that window_resplit works in (a sorted
 * copy and a destination tag per id), so that re-planning never allocates.
 */
#include "window.h"

#include <stdlib.h>
#include <string.h>

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
	w->cap = cap;
	w->world = world;
	w->micro = micro;
	w->batch = batch;
	for (int r = 0; r < world; r++) {
		w->rank_micro[r] = micro;
		for (int m = 0; m < micro; m++)
			w->mb[r][m].ids = w->storage;
	}
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
	return w->cap;
}

/* Points the microbatches at storage for the given counts and counts the tokens and the
 * sequences holding one (the counts of the two weighting units); every rank runs all
 * w->micro of them. The ids must already be in storage and valid. */
static void window_layout(struct window *w, const struct corpus *c, const int *counts)
{
	int pos = 0;

	w->N = 0;
	w->S = 0;
	w->W = 0.0;
	w->weighted = c->seq_weight != NULL;
	for (int r = 0; r < w->world; r++) {
		w->rank_tokens[r] = 0;
		w->rank_sequences[r] = 0;
		w->rank_weight[r] = 0.0;
		w->rank_micro[r] = w->micro;
		for (int m = 0; m < w->micro; m++) {
			struct microbatch *mb = &w->mb[r][m];
			mb->n = counts[r * w->micro + m];
			mb->ids = w->storage + pos;
			mb->tokens = 0;
			mb->sequences = 0;
			mb->weight = 0.0;
			for (int k = 0; k < mb->n; k++) {
				mb->tokens += corpus_supervised(c, mb->ids[k]);
				mb->sequences += corpus_supervised(c, mb->ids[k]) > 0;
				if (w->weighted)
					mb->weight += c->seq_weight[mb->ids[k]];
			}
			pos += mb->n;
			w->rank_tokens[r] += mb->tokens;
			w->rank_sequences[r] += mb->sequences;
			w->rank_weight[r] += mb->weight;
		}
		w->N += w->rank_tokens[r];
		w->S += w->rank_sequences[r];
		w->W += w->rank_weight[r];
	}
	w->n_ids = pos;
}

int window_draw_micro(const struct window *w)
{
	return w->packed_from ? w->packed_from : w->micro;
}

int window_assign(struct window *w, const struct corpus *c, const int *ids, const int *counts,
		  struct err *e)
{
	int64_t total = 0;

	if (!w->storage)
		return ERR(e, ERR_CHECK, "window_assign: window not initialized");
	w->micro = window_draw_micro(w); /* a packed window is assigned in its drawn shape */
	w->packed_from = 0;
	if ((size_t)w->world * w->micro * w->batch > w->cap)
		return ERR(e, ERR_CHECK, "window_assign: %d x %d x %d ids past the window's %zu",
			   w->world, w->micro, w->batch, w->cap);
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

int window_least_loaded(const int64_t *load, const int *fill, int n, int room)
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
		int r = window_least_loaded(rload, rfill, w->world, room_rank);
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
			m = window_least_loaded(mload, mfill, w->micro, room_mb);
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

/* Longer sequence first; equal lengths by ascending id. */
static int cmp_length_desc(const void *a, const void *b, void *arg)
{
	const struct corpus *c = arg;
	int ia = *(const int *)a, ib = *(const int *)b;
	int la = corpus_len(c, ia), lb = corpus_len(c, ib);

	if (la != lb)
		return la > lb ? -1 : 1;
	return (ia > ib) - (ia < ib);
}

/* Cuts the k ids of one rank (sorted) into microbatches: counts[m] for each, returns how
 * many (-1 past WINDOW_MAX_MICRO). */
static int pack_rank(const struct corpus *c, const int *ids, int k, int64_t budget, int batch,
		     int *counts)
{
	int micro = 0;
	int64_t tokens = 0;

	for (int i = 0; i < k; i++) {
		int64_t s = corpus_supervised(c, ids[i]);
		if (micro == 0 || counts[micro - 1] == batch || tokens + s > budget) {
			if (micro == WINDOW_MAX_MICRO)
				return -1;
			counts[micro++] = 0;
			tokens = 0;
		}
		counts[micro - 1]++;
		tokens += s;
	}
	return micro;
}

int window_pack_tokens(struct window *w, const struct corpus *c, int64_t budget,
		       struct err *e)
{
	int rank_counts[MAX_WORLD][WINDOW_MAX_MICRO], rank_micro[MAX_WORLD];
	int counts[MAX_WORLD * WINDOW_MAX_MICRO] = { 0 };
	int *sorted = w->storage + window_cap(w), start = 0, most = 1;

	if (!w->storage)
		return ERR(e, ERR_CHECK, "window_pack_tokens: window not initialized");
	memcpy(sorted, w->storage, (size_t)w->n_ids * sizeof *sorted);
	for (int r = 0; r < w->world; r++) {
		int k = 0;
		for (int m = 0; m < w->rank_micro[r]; m++)
			k += w->mb[r][m].n;
		qsort_r(sorted + start, (size_t)k, sizeof *sorted, cmp_length_desc, (void *)c);
		rank_micro[r] = pack_rank(c, sorted + start, k, budget, w->batch, rank_counts[r]);
		if (rank_micro[r] < 0)
			return ERR(e, ERR_CONFIG, "train.micro_tokens = %lld cuts rank %d's %d "
				   "sequences into more than %d microbatches; raise it",
				   (long long)budget, r, k, WINDOW_MAX_MICRO);
		most = rank_micro[r] > most ? rank_micro[r] : most;
		start += k;
	}
	memcpy(w->storage, sorted, (size_t)w->n_ids * sizeof *sorted);
	w->packed_from = window_draw_micro(w);
	w->micro = most;
	for (int r = 0; r < w->world; r++)
		for (int m = 0; m < most; m++)
			counts[r * most + m] = m < rank_micro[r] ? rank_counts[r][m] : 0;
	window_layout(w, c, counts);
	for (int r = 0; r < w->world; r++)
		w->rank_micro[r] = rank_micro[r];
	return ERR_OK;
}

int window_copy(struct window *dst, const struct window *src, const struct corpus *c,
		struct err *e)
{
	int counts[MAX_WORLD * WINDOW_MAX_MICRO];
	int rc = window_init(dst, src->world, src->micro, src->batch, e);
	if (rc != ERR_OK)
		return rc;
	for (int q = 0; q < src->world; q++)
		for (int m = 0; m < src->micro; m++)
			counts[q * src->micro + m] = src->mb[q][m].n;
	rc = window_assign(dst, c, src->storage, counts, e);
	for (int q = 0; q < src->world; q++)
		dst->rank_micro[q] = src->rank_micro[q];
	dst->index = src->index;
	return rc;
}
