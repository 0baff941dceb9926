/*
 * train_history: the per-rank and per-shard counts of what a run processed, counted,
 * stored and read back, and the optimizer settings its resumes changed (see
 * train_history.h).
 */
#include "train_history.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

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

int train_changes_add(struct train_changes *ch, int64_t step, const char *key,
		      const char *from, const char *to)
{
	if (ch->n >= TRAIN_MAX_CHANGES)
		return -1;
	struct train_change *c = &ch->v[ch->n++];
	c->step = step;
	snprintf(c->key, sizeof c->key, "%s", key);
	snprintf(c->from, sizeof c->from, "%s", from);
	snprintf(c->to, sizeof c->to, "%s", to);
	return 0;
}

void *train_changes_json(const struct train_changes *ch)
{
	if (ch->n == 0)
		return NULL;
	json_t *a = json_array();
	for (int i = 0; i < ch->n; i++)
		json_array_append_new(a, json_pack("{s:I, s:s, s:s, s:s}", "step",
						   (json_int_t)ch->v[i].step, "key", ch->v[i].key,
						   "from", ch->v[i].from, "to", ch->v[i].to));
	return a;
}

/* obj[key] as a string that fits `cap` bytes, or NULL. */
static const char *text_of(json_t *obj, const char *key, size_t cap)
{
	const char *t = json_string_value(json_object_get(obj, key));
	return t && strlen(t) < cap ? t : NULL;
}

int train_changes_parse(const void *json_obj, int64_t step, struct train_changes *out)
{
	json_t *a = (json_t *)json_obj;
	memset(out, 0, sizeof *out);
	if (!a)
		return 0;
	if (!json_is_array(a) || json_array_size(a) > TRAIN_MAX_CHANGES)
		return -1;
	for (size_t i = 0; i < json_array_size(a); i++) {
		json_t *c = json_array_get(a, i);
		int64_t at;
		const char *key = text_of(c, "key", sizeof out->v[0].key);
		const char *from = text_of(c, "from", sizeof out->v[0].from);
		const char *to = text_of(c, "to", sizeof out->v[0].to);
		if (count_of(c, "step", &at) || at > step || !key || !from || !to ||
		    (i > 0 && at < out->v[i - 1].step))
			return -1;
		train_changes_add(out, at, key, from, to);
	}
	return 0;
}
