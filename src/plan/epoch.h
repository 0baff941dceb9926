/*
 * epoch: the training sequences in epochs, each one once per epoch ([train] sampling =
 * epochs).
 *
 * Epoch e is a permutation of the training ids (first .. first + n - 1): a Fisher-Yates
 * shuffle of them in ascending order, for i = n-1 down to 1 swapping i with
 * prng_below(i + 1), driven by a generator that starts at the state the previous epoch's
 * shuffle left it in (epoch 0: run.seed, stream EPOCH_STREAM). The epochs laid end to end
 * are one stream; window k takes its `need` ids at positions k x need .. (k+1) x need - 1,
 * so a window that spans the end of an epoch takes the rest of it and the start of the
 * next (a sequence may then appear twice in that window, once per epoch).
 *
 * The state is the generator at the current epoch's start and the window index: the
 * position (window index x need) says which epoch and where in it, so a checkpoint stores
 * the same two things as for independent windows, and a restored stream continues
 * mid-epoch exactly where it stopped. None of it depends on devices.world when `need`
 * does not (exact mode's shards x batch_size).
 */
#ifndef DDPTOK_EPOCH_H
#define DDPTOK_EPOCH_H

#include <stdint.h>

#include "err.h"
#include "prng.h"

struct epoch_stream {
	int first, n;         /* the training ids first .. first + n - 1 */
	int need;             /* ids one window takes */
	int64_t epoch;        /* the epoch `order` holds */
	struct prng start;    /* the generator at that epoch's start (what a checkpoint keeps) */
	struct prng next;     /* where its shuffle left it: the next epoch's start */
	int *order;           /* n: that epoch's permutation */
	int *taken;           /* need: the last window's ids */
};

/* Epoch 0 of the n training ids from `first`, windows of `need` ids (1 <= need <= n),
 * shuffled from seed. ERR_NOMEM; nothing to free then. */
int epoch_init(struct epoch_stream *es, int first, int n, int need, uint64_t seed,
	       struct err *e);
void epoch_free(struct epoch_stream *es);
/* The ids of window `window_index` (es->need of them, in stream order); the stream must
 * stand at that window (epoch_init, the previous window, or epoch_restore). */
const int *epoch_take(struct epoch_stream *es, int64_t window_index);
/* Stands the stream at window `window_index`, whose epoch started at generator `start`. */
void epoch_restore(struct epoch_stream *es, const struct prng *start, int64_t window_index);

#endif
