/*
 * train_history: what each rank (in exact mode also each shard) has processed since step 0:
 * the windows it took part in, its sequences and supervised tokens, and the windows every
 * rank declined for want of a token. The trainer counts it, a checkpoint stores it
 * (rank-R.json; state.json's "exact", elastic.h) and a resume reads it back and checks
 * that it fits the checkpoint's steps.
 *
 * Beside it, the run's changes: the optimizer settings (keys flagged KEY_OPTIM) a resume
 * changed, each with the step it took effect from (state.json's "changes"). A run with a
 * change no longer follows the trajectory of its original settings bit for bit.
 */
#ifndef DDPTOK_TRAIN_HISTORY_H
#define DDPTOK_TRAIN_HISTORY_H

#include <stdint.h>

#include "window.h"

/* What one window holds at most (the configuration's own limits: train.accumulation x
 * train.batch_size sequences, data.max_len tokens each): a stored history past them is
 * damage, refused before it can overflow a count. */
#define TRAIN_MAX_WINDOW_SEQUENCES (64 * 4096)
#define TRAIN_MAX_WINDOW_TOKENS (64LL * 4096 * 4096)

struct train_history {
	int64_t windows;   /* windows this rank took part in (rejected ones included) */
	int64_t sequences; /* sequences it computed */
	int64_t tokens;    /* supervised tokens it computed */
	int64_t declined;  /* of those windows, the ones without a token on any rank, declined
			    * by every rank together (no update): the same count on every rank */
};

/* Adds one window to the per-rank histories (hist[0..w->world-1]): the trainer counts
 * every window that is a step, rejected (empty) ones included (declined: it was one). */
void train_history_add(struct train_history *hist, const struct window *w, int declined);

/* A history as a checkpoint stores it: a JSON object (json_t *) of windows, sequences,
 * tokens and declined, in that order. */
void *train_history_json(const struct train_history *h);

/* A history as a checkpoint stores it (a JSON object: windows, sequences, tokens,
 * declined) into out; -1 if a count is missing, negative, or declined > windows. */
int train_history_parse(const void *json_obj, struct train_history *out);

/* Whether a history fits a checkpoint of `step` steps: every rank (and shard) takes part
 * in every window, and what a window holds is bounded. */
int train_history_fits(const struct train_history *h, int64_t step);

/* At most this many changes are recorded in one run's history. */
#define TRAIN_MAX_CHANGES 64

struct train_change {
	int64_t step;   /* the first window trained with the new value is step + 1 */
	char key[64];   /* section.name */
	char from[64];  /* the values as the configurations spell them */
	char to[64];
};

struct train_changes {
	int n;
	struct train_change v[TRAIN_MAX_CHANGES];
};

/* Appends one change; -1 when the history is full. */
int train_changes_add(struct train_changes *ch, int64_t step, const char *key,
		      const char *from, const char *to);

/* The changes as a checkpoint stores them: a JSON array (json_t *) of {step, key, from,
 * to}, or NULL when there are none (a run without a change stores no "changes"). */
void *train_changes_json(const struct train_changes *ch);

/* The stored changes (json_obj: NULL when absent) into out; -1 when one is malformed, has a
 * step past `step`, or there are too many. */
int train_changes_parse(const void *json_obj, int64_t step, struct train_changes *out);

#endif
