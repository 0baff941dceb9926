/*
 * corpus_arrays: a corpus made of sequences given as arrays (tests, the exercise's
 * two-sequence windows), without parameters: it is not one [data] settings describe.
 */
#include "corpus_arrays.h"

#include <string.h>

#include "corpus_lock.h"

int corpus_from_arrays(int n, const int32_t *lengths, const int32_t *prefix,
		       const int32_t *tokens, int vocab, struct corpus *c, struct err *e)
{
	int64_t total = 0;
	int rc;

	memset(c, 0, sizeof *c);
	if (n < 0)
		return ERR(e, ERR_DATA, "corpus: negative sequence count %d", n);
	for (int i = 0; i < n; i++) {
		if (lengths[i] < 1)
			return ERR(e, ERR_DATA, "corpus: sequence %d has length %d (at least 1)", i,
				   lengths[i]);
		total += lengths[i];
		if (total > INT32_MAX)
			return ERR(e, ERR_DATA, "corpus: more than %d tokens", INT32_MAX);
	}
	rc = corpus_alloc(c, n, total, e);
	if (rc)
		return rc;
	c->vocab = vocab;
	for (int i = 0; i < n; i++) {
		c->offset[i + 1] = c->offset[i] + lengths[i];
		c->prefix[i] = prefix ? prefix[i] : 0;
		c->split[i] = SPLIT_TRAIN;
	}
	if (total)
		memcpy(c->tokens, tokens, (size_t)total * sizeof *tokens);
	rc = corpus_finish(c, "corpus", e);
	if (rc)
		corpus_free(c);
	return rc;
}
