/*
 * corpus_synth: the synthetic corpus ([data] source = synthetic), drawn from a seed.
 *
 * The source is a sparse first-order Markov chain over the usable ids
 * [DATA_RESERVED, vocab): the state is the previous token (DATA_BOS before the start
 * shares the state of the first usable id); each state has `branching` distinct successors
 * with fixed, Zipf-skewed probabilities (successor k has weight 1/(k + 1), quantized to
 * integer thresholds out of 2^16), and with probability CORPUS_NOISE / 2^16 the next
 * token is uniform instead. A model
 * that sees the previous token can therefore learn most of the chain, and no id is
 * impossible. (A state hashed from the two previous tokens was tried first: with
 * 124^2 contexts the chain was too large to learn from the protocol's 100 windows.)
 * All draws are integers from prng.h (stream CORPUS_STREAM), so a seed gives
 * the same corpus everywhere.
 *
 * Draw order (part of the format): one word left unused (the salt of the hashed state
 * tried first), then the successor table state by
 * state, then length and prefix of every sequence (ids in order: train, validation,
 * test), then the tokens of every sequence in id order.
 */
#include "corpus_synth.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "corpus_lock.h"
#include "prng.h"

#define CORPUS_STREAM 0x636f72707573ULL /* "corpus" */
#define CORPUS_NOISE 3277u              /* ~5% of 2^16: next token uniform */
#define CORPUS_MAX_TABLE (1 << 26)      /* successor table entries */

static int check_data_settings(const struct settings *s, int *n_out, struct err *e)
{
	int64_t n64 = (int64_t)s->train_count + s->validation_count + s->test_count;
	int b = s->branching;
	if (s->train_count < 0 || s->validation_count < 0 || s->test_count < 0)
		return ERR(e, ERR_CONFIG, "data.train, data.validation and data.test must not "
			   "be negative");
	if (n64 > (1 << 24))
		return ERR(e, ERR_CONFIG, "data: %" PRId64 " sequences are too many (at most %d)",
			   n64, 1 << 24);
	if (s->min_len < 1 || s->max_len < s->min_len)
		return ERR(e, ERR_CONFIG, "data.min_len = %d, data.max_len = %d: need "
			   "1 <= min_len <= max_len", s->min_len, s->max_len);
	if (s->vocab <= DATA_RESERVED)
		return ERR(e, ERR_CONFIG, "data.vocab = %d: must exceed the %d reserved ids",
			   s->vocab, DATA_RESERVED);
	if (s->prefix_max < 0)
		return ERR(e, ERR_CONFIG, "data.prefix_max = %d must not be negative",
			   s->prefix_max);
	uint32_t usable = (uint32_t)(s->vocab - DATA_RESERVED);
	if (b < 1 || (uint32_t)b > usable || b > CORPUS_MAX_BRANCHING)
		return ERR(e, ERR_CONFIG, "data.branching = %d: must be in [1, min(%d, vocab - "
			   "%d = %u)]", b, CORPUS_MAX_BRANCHING, DATA_RESERVED, usable);
	if ((int64_t)usable * b > CORPUS_MAX_TABLE)
		return ERR(e, ERR_CONFIG, "data.vocab = %d with data.branching = %d: transition "
			   "table too large", s->vocab, b);
	if (n64 * s->max_len > INT32_MAX)
		return ERR(e, ERR_CONFIG, "data: up to %" PRId64 " tokens exceed the corpus "
			   "limit of %d", n64 * s->max_len, INT32_MAX);
	*n_out = (int)n64;
	return ERR_OK;
}

/* The Markov source: `usable` states (the previous token, reserved ids excluded), each
 * with b distinct successors in random order (succ[state * b + k]), successor k drawn
 * with weight 1/(k + 1) through the cumulative thresholds cum[] out of 2^16. */
struct markov {
	uint32_t usable, cum[CORPUS_MAX_BRANCHING];
	int b;
	int32_t *succ;
};

static int markov_build(struct prng *r, uint32_t usable, int b, struct markov *m, struct err *e)
{
	uint64_t wsum = 0, acc = 0;
	int32_t *perm = malloc((size_t)usable * sizeof *perm);
	m->usable = usable;
	m->b = b;
	m->succ = malloc((size_t)usable * b * sizeof *m->succ);
	if (!m->succ || !perm) {
		free(perm);
		return ERR(e, ERR_NOMEM, "corpus: out of memory for the transition table");
	}
	/* every threshold step is at least 200 wide for b <= 64: each successor stays
	 * reachable */
	for (int k = 0; k < b; k++)
		wsum += (1u << 24) / (uint32_t)(k + 1);
	for (int k = 0; k < b; k++) {
		acc += (1u << 24) / (uint32_t)(k + 1);
		m->cum[k] = k == b - 1 ? 65536u : (uint32_t)((acc << 16) / wsum);
	}
	for (uint32_t i = 0; i < usable; i++)
		perm[i] = DATA_RESERVED + (int32_t)i;
	/* a partial Fisher-Yates per state: b distinct successors in random order */
	for (uint32_t st = 0; st < usable; st++)
		for (int k = 0; k < b; k++) {
			uint32_t j = (uint32_t)k + prng_below(r, usable - (uint32_t)k);
			int32_t t = perm[k];
			perm[k] = perm[j];
			perm[j] = t;
			m->succ[(size_t)st * b + k] = perm[k];
		}
	free(perm);
	return ERR_OK;
}

/* Draws each sequence's length and prompt length, allocates c and lays out the splits. */
static int draw_layout(struct prng *r, const struct settings *s, int n, struct corpus *c,
		       struct err *e)
{
	int32_t *len = malloc(((size_t)n + 1) * sizeof *len);
	int32_t *pre = malloc(((size_t)n + 1) * sizeof *pre);
	int64_t total = 0;
	int rc = ERR_OK;
	if (!len || !pre)
		rc = ERR(e, ERR_NOMEM, "corpus: out of memory");
	for (int i = 0; i < n && rc == ERR_OK; i++) {
		len[i] = prng_range(r, s->min_len, s->max_len);
		pre[i] = prng_range(r, 0, s->prefix_max < len[i] - 1 ? s->prefix_max : len[i] - 1);
		total += len[i];
	}
	if (rc == ERR_OK)
		rc = corpus_alloc(c, n, total, e);
	for (int i = 0; i < n && rc == ERR_OK; i++) {
		c->offset[i + 1] = c->offset[i] + len[i];
		c->prefix[i] = pre[i];
		c->split[i] = i < s->train_count ? SPLIT_TRAIN
			    : i < s->train_count + s->validation_count ? SPLIT_VALIDATION
			    : SPLIT_TEST;
	}
	free(len);
	free(pre);
	return rc;
}

/* Every token: uniform noise with probability CORPUS_NOISE / 2^16, else a successor of the
 * previous token's state. */
static void draw_tokens(struct prng *r, const struct markov *m, struct corpus *c)
{
	for (int i = 0; i < c->n; i++) {
		int32_t prev = DATA_BOS;
		for (int32_t t = c->offset[i]; t < c->offset[i + 1]; t++) {
			uint64_t x = prng_next(r);
			uint32_t u_noise = (uint32_t)(x >> 48);
			uint32_t u_succ = (uint32_t)(x >> 32) & 0xffffu;
			int32_t tok;
			if (u_noise < CORPUS_NOISE) {
				tok = DATA_RESERVED + (int32_t)prng_below(r, m->usable);
			} else {
				uint32_t st = prev >= DATA_RESERVED ?
					(uint32_t)(prev - DATA_RESERVED) % m->usable : 0u;
				int k = 0;
				while (u_succ >= m->cum[k])
					k++;
				tok = m->succ[(size_t)st * m->b + k];
			}
			c->tokens[t] = tok;
			prev = tok;
		}
	}
}

int corpus_synth_build(const struct settings *s, struct corpus *c, struct err *e)
{
	struct prng r;
	struct markov m = {0};
	int n = 0, rc;

	memset(c, 0, sizeof *c);
	ERR_TRY(check_data_settings(s, &n, e));
	prng_seed(&r, s->seed, CORPUS_STREAM);
	/* the first word of the stream is not used (see "Draw order" above) */
	(void)prng_next(&r);
	if ((rc = markov_build(&r, (uint32_t)(s->vocab - DATA_RESERVED), s->branching, &m, e)) ||
	    (rc = draw_layout(&r, s, n, c, e)))
		goto out;
	draw_tokens(&r, &m, c);

	c->vocab = s->vocab;
	c->params = (struct corpus_params){
		.seed = s->seed, .train_count = s->train_count,
		.validation_count = s->validation_count, .test_count = s->test_count,
		.min_len = s->min_len, .max_len = s->max_len, .vocab = s->vocab,
		.prefix_max = s->prefix_max, .branching = s->branching,
	};
	rc = corpus_finish(c, "generated corpus", e);
out:
	free(m.succ);
	if (rc)
		corpus_free(c);
	return rc;
}
