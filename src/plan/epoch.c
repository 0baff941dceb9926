/*
 * epoch: the training sequences in epochs, each one once per epoch (see epoch.h).
 */
#include "epoch.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define EPOCH_STREAM 0x65706f636873ULL /* "epochs" */

/* es->order = the permutation of es->start; es->next = the generator after it. */
static void shuffle(struct epoch_stream *es)
{
	struct prng g = es->start;
	for (int i = 0; i < es->n; i++)
		es->order[i] = es->first + i;
	for (int i = es->n - 1; i > 0; i--) {
		int j = (int)prng_below(&g, (uint32_t)i + 1);
		int t = es->order[i];
		es->order[i] = es->order[j];
		es->order[j] = t;
	}
	es->next = g;
}

/* Moves on to the epoch that holds stream position `pos` (never back). */
static void stand_at(struct epoch_stream *es, int64_t pos)
{
	assert(pos / es->n >= es->epoch && "an epoch stream never goes back by itself");
	while (pos / es->n > es->epoch) {
		es->start = es->next;
		es->epoch++;
		shuffle(es);
	}
}

int epoch_init(struct epoch_stream *es, int first, int n, int need, uint64_t seed,
	       struct err *e)
{
	memset(es, 0, sizeof *es);
	if (n < 1 || need < 1 || need > n)
		return ERR(e, ERR_CHECK, "epoch_init: %d ids per window from %d sequences", need, n);
	es->order = malloc((size_t)n * sizeof *es->order);
	es->taken = malloc((size_t)need * sizeof *es->taken);
	if (!es->order || !es->taken) {
		epoch_free(es);
		return ERR(e, ERR_NOMEM, "sampler: out of memory for an epoch of %d sequences", n);
	}
	es->first = first;
	es->n = n;
	es->need = need;
	prng_seed(&es->start, seed, EPOCH_STREAM);
	shuffle(es);
	return ERR_OK;
}

void epoch_free(struct epoch_stream *es)
{
	free(es->order);
	free(es->taken);
	memset(es, 0, sizeof *es);
}

const int *epoch_take(struct epoch_stream *es, int64_t window_index)
{
	int64_t pos = window_index * es->need;
	for (int t = 0; t < es->need; t++) {
		stand_at(es, pos + t);
		es->taken[t] = es->order[(pos + t) % es->n];
	}
	stand_at(es, pos + es->need); /* the state a checkpoint now stores: the next window's */
	return es->taken;
}

void epoch_restore(struct epoch_stream *es, const struct prng *start, int64_t window_index)
{
	int64_t epoch = window_index * es->need / es->n;
	if (epoch == es->epoch && !memcmp(start, &es->start, sizeof *start))
		return; /* already there: the order stands (inspect peeks a window each time) */
	es->start = *start;
	es->epoch = epoch;
	shuffle(es);
}
