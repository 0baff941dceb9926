/*
 * train_history: the per-rank and per-shard counts of what a run processed, counted,
 * stored and read back (see train_history.h).
 */
#include "train_history.h"

#include <jansson.h>

void train_history_add(struct train_history *hist, const struct window *w, int declined)
{
	for (int r = 0; r < w->world; r++) {
		hist[r].windows++;
		hist[r].declined += declined != 0;
		hist[r].tokens += w->rank_tokens[r];
		for (int m = 0; m < w->micro; m++)
			hist[r].sequences += w->mb[r][m].n;
	}
}

void *train_history_json(const struct train_history *h)
{
	return json_pack("{s:I, s:I, s:I, s:I}", "windows", (json_int_t)h->windows, "sequences",
			 (json_int_t)h->sequences, "tokens", (json_int_t)h->tokens, "declined",
			 (json_int_t)h->declined);
}

/* obj[key] into *out when it is an integer >= 0. */
static int count_of(json_t *obj, const char *key, int64_t *out)
{
	json_t *v = json_object_get(obj, key);
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -1;
	*out = json_integer_value(v);
	return 0;
}

int train_history_parse(const void *json_obj, struct train_history *out)
{
	json_t *h = (json_t *)json_obj;
	if (!json_is_object(h) || count_of(h, "windows", &out->windows) ||
	    count_of(h, "sequences", &out->sequences) || count_of(h, "tokens", &out->tokens) ||
	    count_of(h, "declined", &out->declined) || out->declined > out->windows)
		return -1;
	return 0;
}

int train_history_fits(const struct train_history *h, int64_t step)
{
	return h->windows == step && h->sequences <= step * (int64_t)TRAIN_MAX_WINDOW_SEQUENCES &&
	       h->tokens <= step * (int64_t)TRAIN_MAX_WINDOW_TOKENS;
}
