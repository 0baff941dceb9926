/*
 * corpus_core: the memory of a corpus, its checks and its summary (see corpus_core.h).
 */
#include "corpus_core.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fsx.h"
#include "sources.h"

void corpus_free(struct corpus *c)
{
	if (!c)
		return;
	if (c->map) {
		fsx_unmap(c->map, c->map_len);
	} else {
		free(c->offset);
		free(c->tokens);
		free(c->prefix);
		free(c->mask);
		free(c->split);
	}
	free(c->supervised);
	free(c->class_weight);
	free(c->seq_weight);
	memset(c, 0, sizeof *c);
}

long long corpus_user_id(int source, long long id)
{
	return source == DATA_SYNTHETIC ? id : id - DATA_RESERVED;
}

int corpus_alloc(struct corpus *c, int n, int64_t total, struct err *e)
{
	memset(c, 0, sizeof *c);
	c->n = n;
	c->offset = calloc((size_t)n + 1, sizeof *c->offset);
	c->tokens = calloc(total > 0 ? (size_t)total : 1, sizeof *c->tokens);
	c->prefix = calloc(n > 0 ? (size_t)n : 1, sizeof *c->prefix);
	c->supervised = calloc(n > 0 ? (size_t)n : 1, sizeof *c->supervised);
	c->split = calloc(n > 0 ? (size_t)n : 1, 1);
	if (!c->offset || !c->tokens || !c->prefix || !c->supervised || !c->split) {
		corpus_free(c);
		return ERR(e, ERR_NOMEM, "corpus: out of memory (%d sequences, %" PRId64
			   " tokens)", n, total);
	}
	return ERR_OK;
}

int corpus_check(struct corpus *c, const char *what, struct err *e)
{
	int last = 0;

	if (c->n < 0)
		return ERR(e, ERR_DATA, "%s: negative sequence count %d", what, c->n);
	if (c->vocab <= DATA_RESERVED)
		return ERR(e, ERR_DATA, "%s: vocab %d leaves no usable id (ids below %d are "
			   "reserved)", what, c->vocab, DATA_RESERVED);
	if (c->offset[0] != 0)
		return ERR(e, ERR_DATA, "%s: first offset is %d, not 0", what, c->offset[0]);
	memset(c->split_count, 0, sizeof c->split_count);
	for (int i = 0; i < c->n; i++) {
		int len = c->offset[i + 1] - c->offset[i];
		if (c->offset[i + 1] <= c->offset[i])
			return ERR(e, ERR_DATA, "%s: sequence %d is empty or has a decreasing "
				   "offset", what, i);
		if (c->prefix[i] < 0 || c->prefix[i] > len)
			return ERR(e, ERR_DATA, "%s: sequence %d has prefix %d outside [0, %d]",
				   what, i, c->prefix[i], len);
		c->supervised[i] = 0;
		for (int t = 0; t < len; t++) {
			if (c->mask && c->mask[c->offset[i] + t] > 1)
				return ERR(e, ERR_DATA, "%s: sequence %d has mask value %d at position "
					   "%d", what, i, c->mask[c->offset[i] + t], t);
			c->supervised[i] += corpus_is_target(c, i, t);
		}
		if (c->split[i] > SPLIT_TEST)
			return ERR(e, ERR_DATA, "%s: sequence %d has unknown split %d", what, i,
				   c->split[i]);
		if (c->split[i] < last)
			return ERR(e, ERR_DATA, "%s: sequence %d (%s) after a %s sequence: splits "
				   "must come in order train, validation, test", what, i,
				   data_split_name(c->split[i]), data_split_name(last));
		last = c->split[i];
		c->split_count[last]++;
	}
	for (int32_t t = 0; t < c->offset[c->n]; t++) {
		int32_t id = c->tokens[t];
		if (id < DATA_RESERVED || id >= c->vocab)
			return ERR(e, ERR_DATA, "%s: token %d has id %d outside [%d, %d)", what, t,
				   id, DATA_RESERVED, c->vocab);
	}
	c->split_first[0] = 0;
	c->split_first[1] = c->split_count[0];
	c->split_first[2] = c->split_count[0] + c->split_count[1];
	/* a corpus that carries its parameters must be what they describe */
	if (c->params.vocab) {
		const struct corpus_params *q = &c->params;
		const int32_t want[3] = {q->train_count, q->validation_count, q->test_count};
		if (c->vocab != q->vocab)
			return ERR(e, ERR_DATA, "%s: vocab %d, its parameters say %d", what, c->vocab,
				   q->vocab);
		for (int k = 0; k < 3; k++)
			if (c->split_count[k] != want[k])
				return ERR(e, ERR_DATA, "%s: %d %s sequences, its parameters say %d",
					   what, c->split_count[k], data_split_name(k), want[k]);
		for (int i = 0; i < c->n; i++) {
			int len = c->offset[i + 1] - c->offset[i];
			if (len < q->min_len || len > q->max_len)
				return ERR(e, ERR_DATA, "%s: sequence %d has %d tokens, its parameters "
					   "allow %d..%d", what, i, len, q->min_len, q->max_len);
		}
	}
	return ERR_OK;
}

void corpus_summarize(const struct corpus *c, struct corpus_summary *out)
{
	memset(out, 0, sizeof *out);
	if (c->n == 0)
		return;
	out->shortest = out->longest = corpus_len(c, 0);
	for (int i = 0; i < c->n; i++) {
		int len = corpus_len(c, i);
		out->tokens[c->split[i]] += len;
		out->supervised[c->split[i]] += corpus_supervised(c, i);
		out->shortest = len < out->shortest ? len : out->shortest;
		out->longest = len > out->longest ? len : out->longest;
	}
	out->width = (out->longest - out->shortest) / CORPUS_HIST + 1;
	for (int i = 0; i < c->n; i++)
		out->hist[(corpus_len(c, i) - out->shortest) / out->width]++;
}
