/*
 * corpus: drawing the synthetic corpus, its data lock, and its files on disk.
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
 *
 * The data lock is the hex SHA-256 of this little-endian serialization:
 *     "ddptok-corpus" (13 bytes), u32 CORPUS_FORMAT,
 *     u64 seed, i32 train_count, validation_count, test_count, min_len, max_len, vocab,
 *         prefix_max, branching, source, eot, split_rule[3], 64 bytes files digest (hex,
 *         zero bytes when none)                       (struct corpus_params; zero for
 *                                                      corpus_from_arrays)
 *     i32 n, i32 vocab, i32 offset[n + 1], i32 tokens[offset[n]], i32 prefix[n], u8 split[n],
 *     u8 has_mask, then (has_mask) u8 mask[offset[n]]
 *
 * corpus.bin, little-endian:
 *     0    8 bytes  magic "DDPTOKC1"
 *     8   64 bytes  data lock, hex
 *     72  u32 CORPUS_FORMAT, i32 n, i32 vocab, i32 total tokens
 *     88  u64 seed, then the 8 i32 of struct corpus_params in declaration order
 *     128 i32 source, eot, split_rule[3], has_mask; 152: 64 bytes files digest; zero to 256
 *     256 i32 offset[n + 1], i32 tokens[total], i32 prefix[n], u8 split[n],
 *         u8 mask[total] when has_mask                                     (end of file)
 * data.lock is a JSON object: format, lock, sequences, vocab, source ("generated" or
 * "arrays", or the file format), parameters (named like the [data] keys; seed as a decimal string, since
 * it may exceed 2^63) and, per split, sequences, tokens and supervised tokens.
 */
#include "corpus.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "digest.h"
#include "fsx.h"
#include "jsonx.h"
#include "outputs.h"
#include "prng.h"

#define CORPUS_STREAM 0x636f72707573ULL /* "corpus" */
#define CORPUS_NOISE 3277u              /* ~5% of 2^16: next token uniform */
#define CORPUS_MAX_TABLE (1 << 26)      /* successor table entries */
#define CORPUS_MAGIC "DDPTOKC1"
#define CORPUS_HEADER 256
#define CORPUS_LOCK_TAG "ddptok-corpus"

static const char *split_names[3] = { "train", "validation", "test" };

/* ---- little-endian helpers ------------------------------------------------------ */

static void put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static void put_u64(uint8_t *p, uint64_t v)
{
	put_u32(p, (uint32_t)v);
	put_u32(p + 4, (uint32_t)(v >> 32));
}

static uint32_t get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const uint8_t *p)
{
	return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

/* ---- the lock ------------------------------------------------------------------- */

/* Feeds the hash through a small staging buffer so that arrays are converted to
 * little-endian without a full copy. */
struct lock_hash {
	struct digest *d;
	uint8_t buf[4096];
	size_t n;
	int rc;
	struct err *e;
};

static void lh_flush(struct lock_hash *h)
{
	if (h->n && !h->rc)
		h->rc = digest_update(h->d, h->buf, h->n, h->e);
	h->n = 0;
}

static void lh_bytes(struct lock_hash *h, const void *data, size_t len)
{
	const uint8_t *p = data;
	while (len) {
		size_t k = sizeof h->buf - h->n;
		if (k > len)
			k = len;
		memcpy(h->buf + h->n, p, k);
		h->n += k;
		p += k;
		len -= k;
		if (h->n == sizeof h->buf)
			lh_flush(h);
	}
}

static void lh_u32(struct lock_hash *h, uint32_t v)
{
	uint8_t b[4];
	put_u32(b, v);
	lh_bytes(h, b, 4);
}

static void lh_u64(struct lock_hash *h, uint64_t v)
{
	uint8_t b[8];
	put_u64(b, v);
	lh_bytes(h, b, 8);
}

static void lh_i32s(struct lock_hash *h, const int32_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		lh_u32(h, (uint32_t)v[i]);
}

static void params_words(const struct corpus_params *p, int32_t w[8])
{
	w[0] = p->train_count;
	w[1] = p->validation_count;
	w[2] = p->test_count;
	w[3] = p->min_len;
	w[4] = p->max_len;
	w[5] = p->vocab;
	w[6] = p->prefix_max;
	w[7] = p->branching;
}

static void params_from_words(struct corpus_params *p, const int32_t w[8])
{
	p->train_count = w[0];
	p->validation_count = w[1];
	p->test_count = w[2];
	p->min_len = w[3];
	p->max_len = w[4];
	p->vocab = w[5];
	p->prefix_max = w[6];
	p->branching = w[7];
}

/* source, eot, split rule and the files digest (64 bytes, zero when there is none) */
static void files_words(const struct corpus_params *p, uint8_t out[5 * 4 + 64])
{
	const int32_t w[5] = { p->source, p->eot, p->split_rule[0], p->split_rule[1],
			       p->split_rule[2] };
	for (int k = 0; k < 5; k++)
		put_u32(out + 4 * k, (uint32_t)w[k]);
	memset(out + 20, 0, 64);
	memcpy(out + 20, p->files, strnlen(p->files, 64));
}

static void lh_file_params(struct lock_hash *h, const struct corpus_params *p)
{
	uint8_t b[5 * 4 + 64];
	files_words(p, b);
	lh_bytes(h, b, sizeof b);
}

int corpus_compute_lock(const struct corpus *c, char lock[65], struct err *e)
{
	struct lock_hash *h;
	int32_t w[8];
	int rc;

	lock[0] = '\0';
	h = calloc(1, sizeof *h);
	if (!h)
		return ERR(e, ERR_NOMEM, "data lock: out of memory");
	h->e = e;
	rc = digest_init(&h->d, e);
	if (rc) {
		free(h);
		return rc;
	}
	lh_bytes(h, CORPUS_LOCK_TAG, strlen(CORPUS_LOCK_TAG));
	lh_u32(h, CORPUS_FORMAT);
	lh_u64(h, c->params.seed);
	params_words(&c->params, w);
	lh_i32s(h, w, 8);
	lh_file_params(h, &c->params);
	lh_u32(h, (uint32_t)c->n);
	lh_u32(h, (uint32_t)c->vocab);
	lh_i32s(h, c->offset, (size_t)c->n + 1);
	lh_i32s(h, c->tokens, (size_t)c->offset[c->n]);
	lh_i32s(h, c->prefix, (size_t)c->n);
	lh_bytes(h, c->split, (size_t)c->n);
	lh_bytes(h, c->mask ? "\1" : "\0", 1);
	if (c->mask)
		lh_bytes(h, c->mask, (size_t)c->offset[c->n]);
	lh_flush(h);
	if (h->rc) {
		rc = h->rc;
		digest_free(h->d);
	} else {
		rc = digest_final(h->d, lock, e);
	}
	free(h);
	return rc;
}

/* ---- construction ---------------------------------------------------------------- */

void corpus_free(struct corpus *c)
{
	if (!c)
		return;
	free(c->offset);
	free(c->tokens);
	free(c->prefix);
	free(c->mask);
	free(c->supervised);
	free(c->split);
	memset(c, 0, sizeof *c);
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

/* Checks the arrays of c (offsets, ids, prefixes, masks, split order) and fills
 * split_count, split_first and supervised. `what` names the source in messages. */
static int corpus_validate(struct corpus *c, const char *what, struct err *e)
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
				   split_names[c->split[i]], split_names[last]);
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
					   what, c->split_count[k], split_names[k], want[k]);
		for (int i = 0; i < c->n; i++) {
			int len = c->offset[i + 1] - c->offset[i];
			if (len < q->min_len || len > q->max_len)
				return ERR(e, ERR_DATA, "%s: sequence %d has %d tokens, its parameters "
					   "allow %d..%d", what, i, len, q->min_len, q->max_len);
		}
	}
	return ERR_OK;
}

int corpus_finish(struct corpus *c, const char *what, struct err *e)
{
	int rc = corpus_validate(c, what, e);
	if (!rc)
		rc = corpus_compute_lock(c, c->lock, e);
	return rc;
}

/* The [data] settings a corpus can be built from; *n_out: the number of sequences. */
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

int corpus_build(const struct settings *s, struct corpus *c, struct err *e)
{
	struct prng r;
	struct markov m = {0};
	int n = 0, rc;

	if (s->source != DATA_SYNTHETIC)
		return corpus_from_files(s, c, e);
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
	rc = corpus_validate(c, "generated corpus", e);
	if (!rc)
		rc = corpus_compute_lock(c, c->lock, e);
out:
	free(m.succ);
	if (rc)
		corpus_free(c);
	return rc;
}

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
	rc = corpus_validate(c, "corpus", e);
	if (!rc)
		rc = corpus_compute_lock(c, c->lock, e);
	if (rc)
		corpus_free(c);
	return rc;
}

/* ---- files ----------------------------------------------------------------------- */


/* the eot a corpus of settings s records: only llm.c shards are cut at it */
static int recorded_eot(const struct settings *s)
{
	return s->source == DATA_LLMC ? s->eot : 0;
}

int corpus_params_diff(const struct corpus_params *p, const struct settings *s, char *out,
		       size_t cap)
{
	enum { SYN = 1, FILES = 2, ANY = 3 };
	const int files = p->source != DATA_SYNTHETIC || s->source != DATA_SYNTHETIC;
	const struct {
		const char *key;
		long long corpus, config;
		int applies;
	} f[] = {
		{"data.source", p->source, s->source, ANY},
		{"run.seed", (long long)p->seed, (long long)s->seed, SYN},
		{"data.train", p->train_count, s->train_count, SYN},
		{"data.validation", p->validation_count, s->validation_count, SYN},
		{"data.test", p->test_count, s->test_count, SYN},
		{"data.min_len", p->min_len, s->min_len, ANY},
		{"data.max_len", p->max_len, s->max_len, ANY},
		{files ? "vocabulary (model.vocab or the files)" : "data.vocab", p->vocab, s->vocab,
		 ANY},
		{"data.prefix_max", p->prefix_max, s->prefix_max, SYN},
		{"data.branching", p->branching, s->branching, SYN},
		{"data.eot", p->eot, recorded_eot(s), FILES},
		{"data.split (train)", p->split_rule[0], s->split_rule[0], FILES},
		{"data.split (validation)", p->split_rule[1], s->split_rule[1], FILES},
		{"data.split (test)", p->split_rule[2], s->split_rule[2], FILES},
	};
	size_t used = 0;
	int n = 0;
	if (cap)
		out[0] = '\0';
	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
		if (f[i].corpus == f[i].config || !(f[i].applies & (files ? FILES : SYN)))
			continue;
		n++;
		if (used < cap)
			used += (size_t)snprintf(out + used, cap - used, "%s%s: %lld (corpus) != %lld "
						 "(configuration)", used ? "; " : "", f[i].key,
						 f[i].corpus, f[i].config);
	}
	return n;
}

int corpus_params_match(const struct corpus_params *p, const struct settings *s)
{
	return corpus_params_diff(p, s, NULL, 0) == 0;
}

static int save_bin(const struct corpus *c, const char *path, struct err *e)
{
	size_t total = (size_t)c->offset[c->n];
	size_t size = CORPUS_HEADER + 4 * ((size_t)c->n + 1 + total + (size_t)c->n) + (size_t)c->n +
		      (c->mask ? total : 0);
	uint8_t *buf = malloc(size), *p, fw[5 * 4 + 64];
	int32_t w[8];
	int rc;

	if (!buf)
		return ERR(e, ERR_NOMEM, "%s: out of memory", path);
	memset(buf, 0, CORPUS_HEADER);
	memcpy(buf, CORPUS_MAGIC, 8);
	memcpy(buf + 8, c->lock, 64);
	put_u32(buf + 72, CORPUS_FORMAT);
	put_u32(buf + 76, (uint32_t)c->n);
	put_u32(buf + 80, (uint32_t)c->vocab);
	put_u32(buf + 84, (uint32_t)total);
	put_u64(buf + 88, c->params.seed);
	params_words(&c->params, w);
	for (int k = 0; k < 8; k++)
		put_u32(buf + 96 + 4 * k, (uint32_t)w[k]);
	files_words(&c->params, fw);
	memcpy(buf + 128, fw, 20);
	put_u32(buf + 148, c->mask != NULL);
	memcpy(buf + 152, fw + 20, 64);
	p = buf + CORPUS_HEADER;
	for (int i = 0; i <= c->n; i++, p += 4)
		put_u32(p, (uint32_t)c->offset[i]);
	for (size_t t = 0; t < total; t++, p += 4)
		put_u32(p, (uint32_t)c->tokens[t]);
	for (int i = 0; i < c->n; i++, p += 4)
		put_u32(p, (uint32_t)c->prefix[i]);
	memcpy(p, c->split, (size_t)c->n);
	if (c->mask)
		memcpy(p + c->n, c->mask, total);
	rc = fsx_write_atomic(path, buf, size, e);
	free(buf);
	return rc;
}

static int json_set_new(json_t *obj, const char *key, json_t *v, int *bad)
{
	if (!v || json_object_set_new(obj, key, v))
		*bad = 1;
	return *bad;
}

/* The canonical text of data.lock for c (with its final newline) into *out. */
static int lock_text(const struct corpus *c, const char *path, char **out, struct err *e)
{
	json_t *root = json_object(), *par = json_object(), *spl = json_object();
	char seed[32];
	char *text = NULL;
	int bad = !root || !par || !spl;

	snprintf(seed, sizeof seed, "%llu", (unsigned long long)c->params.seed);
	json_set_new(root, "format", json_integer(CORPUS_FORMAT), &bad);
	json_set_new(root, "lock", json_string(c->lock), &bad);
	json_set_new(root, "sequences", json_integer(c->n), &bad);
	json_set_new(root, "vocab", json_integer(c->vocab), &bad);
	json_set_new(root, "source", json_string(c->params.source ?
						 data_source_name(c->params.source) :
						 c->params.vocab ? "generated" : "arrays"), &bad);
	if (c->params.source) {
		char split[48];
		snprintf(split, sizeof split, "%d,%d,%d", c->params.split_rule[0],
			 c->params.split_rule[1], c->params.split_rule[2]);
		json_set_new(root, "files_sha256", json_string(c->params.files), &bad);
		json_set_new(par, "split", json_string(split), &bad);
		json_set_new(par, "eot", json_integer(c->params.eot), &bad);
	}
	json_set_new(par, "seed", json_string(seed), &bad);
	json_set_new(par, "train", json_integer(c->params.train_count), &bad);
	json_set_new(par, "validation", json_integer(c->params.validation_count), &bad);
	json_set_new(par, "test", json_integer(c->params.test_count), &bad);
	json_set_new(par, "min_len", json_integer(c->params.min_len), &bad);
	json_set_new(par, "max_len", json_integer(c->params.max_len), &bad);
	json_set_new(par, "vocab", json_integer(c->params.vocab), &bad);
	json_set_new(par, "prefix_max", json_integer(c->params.prefix_max), &bad);
	json_set_new(par, "branching", json_integer(c->params.branching), &bad);
	for (int k = 0; k < 3; k++) {
		json_t *o = json_object();
		int64_t tok = 0, sup = 0;
		for (int i = c->split_first[k]; i < c->split_first[k] + c->split_count[k]; i++) {
			tok += corpus_len(c, i);
			sup += corpus_supervised(c, i);
		}
		if (!o) {
			bad = 1;
			break;
		}
		json_set_new(o, "sequences", json_integer(c->split_count[k]), &bad);
		json_set_new(o, "tokens", json_integer(tok), &bad);
		json_set_new(o, "supervised", json_integer(sup), &bad);
		json_set_new(spl, split_names[k], o, &bad);
	}
	json_set_new(root, "parameters", par, &bad);
	par = NULL;
	json_set_new(root, "splits", spl, &bad);
	spl = NULL;
	if (!bad)
		text = jsonx_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(root);
	if (!text)
		return ERR(e, ERR_DEVICE, "%s: cannot serialize the data lock", path);
	size_t len = strlen(text);
	*out = malloc(len + 2);
	if (!*out) {
		free(text);
		return ERR(e, ERR_NOMEM, "%s: out of memory", path);
	}
	memcpy(*out, text, len);
	memcpy(*out + len, "\n", 2);
	free(text);
	return ERR_OK;
}

static int save_lock(const struct corpus *c, const char *path, struct err *e)
{
	char *text = NULL;
	ERR_TRY(lock_text(c, path, &text, e));
	int rc = fsx_write_atomic(path, text, strlen(text), e);
	free(text);
	return rc;
}

int corpus_save_lock(const struct corpus *c, const char *dir, struct err *e)
{
	char path[FSX_PATH_MAX];
	ERR_TRY(fsx_join(path, sizeof path, dir, OUTPUT_DATA_LOCK, e));
	return save_lock(c, path, e);
}

/* The first key (parameters.KEY, splits.KEY) where the JSON `got` differs from `want`. */
static void first_difference(json_t *want, json_t *got, const char *prefix, char *why,
			     size_t cap)
{
	const char *key;
	json_t *w;
	json_object_foreach(want, key, w) {
		json_t *g = json_object_get(got, key);
		if (json_equal(w, g))
			continue;
		if (json_is_object(w) && json_is_object(g) && !prefix[0])
			return first_difference(w, g, key, why, cap);
		snprintf(why, cap, "its %s%s%s differs", prefix, prefix[0] ? "." : "", key);
		return;
	}
	json_object_foreach(got, key, w)
		if (!json_object_get(want, key)) {
			snprintf(why, cap, "it holds %s%s%s, which corpus.bin does not describe", prefix,
				 prefix[0] ? "." : "", key);
			return;
		}
	snprintf(why, cap, "its text is not the canonical one");
}

int corpus_lock_file_check(const char *dir, const struct corpus *c, char *why, size_t cap,
			   struct err *e)
{
	char path[FSX_PATH_MAX], *want = NULL, *got = NULL;
	size_t len;
	why[0] = '\0';
	ERR_TRY(fsx_join(path, sizeof path, dir, OUTPUT_DATA_LOCK, e));
	if (!fsx_exists(path)) {
		snprintf(why, cap, "it is missing");
		return ERR_OK;
	}
	ERR_TRY(lock_text(c, path, &want, e));
	int rc = fsx_read_all(path, &got, &len, e);
	if (rc == ERR_OK && (len != strlen(want) || memcmp(got, want, len) != 0)) {
		json_t *w = json_loads(want, 0, NULL), *g = json_loadb(got, len, 0, NULL);
		if (!json_is_object(g))
			snprintf(why, cap, "it is not a JSON object");
		else
			first_difference(w, g, "", why, cap);
		json_decref(w);
		json_decref(g);
	}
	free(want);
	free(got);
	return rc;
}

int corpus_save(const struct corpus *c, const struct settings *s, const char *dir,
		struct err *e)
{
	char path[FSX_PATH_MAX];
	int rc;

	if (s && c->params.vocab && !corpus_params_match(&c->params, s))
		return ERR(e, ERR_DATA, "corpus_save: the corpus was built with other [data] "
			   "settings than the ones given");
	rc = fsx_mkdirs(dir, e);
	if (!rc)
		rc = fsx_join(path, sizeof path, dir, OUTPUT_CORPUS_BIN, e);
	if (!rc)
		rc = save_bin(c, path, e);
	/* the lock last: a data.lock on disk always describes the corpus.bin beside it */
	if (!rc)
		rc = corpus_save_lock(c, dir, e);
	return rc;
}

/* source, eot, split rule (bytes 128-147) and the files digest (152-215) of a corpus.bin */
static int load_file_params(const uint8_t *p, const char *path, struct corpus_params *q,
			    struct err *e)
{
	q->source = (int32_t)get_u32(p + 128);
	q->eot = (int32_t)get_u32(p + 132);
	for (int k = 0; k < 3; k++)
		q->split_rule[k] = (int32_t)get_u32(p + 136 + 4 * k);
	memcpy(q->files, p + 152, 64);
	q->files[64] = '\0';
	if (q->source < 0 || q->source >= DATA_SOURCE_COUNT)
		return ERR(e, ERR_DATA, "%s: unknown source %d at byte 128", path, q->source);
	if (q->files[0] ? !digest_is_hex(q->files) : q->source != DATA_SYNTHETIC)
		return ERR(e, ERR_DATA, "%s: bytes 152-215 hold no SHA-256 of the files", path);
	return ERR_OK;
}

/* Decodes corpus.bin (buf, size bytes, read from `path`) into c. */
static int decode_corpus(const char *path, const char *buf, size_t size, char stored[65],
			 struct corpus *c, struct err *e)
{
	const uint8_t *p = (const uint8_t *)buf;
	int32_t w[8];
	if (size < CORPUS_HEADER || memcmp(p, CORPUS_MAGIC, 8) != 0)
		return ERR(e, ERR_DATA, "%s: not a ddptok corpus (bad magic or truncated header)",
			   path);
	if (get_u32(p + 72) != CORPUS_FORMAT)
		return ERR(e, ERR_DATA, "%s: corpus format %u, this program reads format %d", path,
			   get_u32(p + 72), CORPUS_FORMAT);
	memcpy(stored, p + 8, 64);
	stored[64] = '\0';
	int64_t n = (int32_t)get_u32(p + 76), total = (int32_t)get_u32(p + 84);
	int vocab = (int32_t)get_u32(p + 80);
	uint32_t has_mask = get_u32(p + 148);
	if (n < 0 || total < 0)
		return ERR(e, ERR_DATA, "%s: negative sizes in the header", path);
	if (has_mask > 1)
		return ERR(e, ERR_DATA, "%s: mask flag %u at byte 148 (0 or 1)", path, has_mask);
	int64_t need = CORPUS_HEADER + 4 * (n + 1 + total + n) + n + (has_mask ? total : 0);
	if ((int64_t)size != need)
		return ERR(e, ERR_DATA, "%s: %zu bytes, the header announces %" PRId64, path, size,
			   need);
	ERR_TRY(corpus_alloc(c, (int)n, total, e));
	c->vocab = vocab;
	c->params.seed = get_u64(p + 88);
	for (int k = 0; k < 8; k++)
		w[k] = (int32_t)get_u32(p + 96 + 4 * k);
	params_from_words(&c->params, w);
	ERR_TRY(load_file_params(p, path, &c->params, e));
	if (has_mask && !(c->mask = malloc(total > 0 ? (size_t)total : 1)))
		return ERR(e, ERR_NOMEM, "%s: out of memory", path);
	p += CORPUS_HEADER;
	for (int64_t i = 0; i <= n; i++, p += 4)
		c->offset[i] = (int32_t)get_u32(p);
	for (int64_t t = 0; t < total; t++, p += 4)
		c->tokens[t] = (int32_t)get_u32(p);
	for (int64_t i = 0; i < n; i++, p += 4)
		c->prefix[i] = (int32_t)get_u32(p);
	memcpy(c->split, p, (size_t)n);
	if (has_mask)
		memcpy(c->mask, p + n, (size_t)total);
	if (c->offset[n] != total)
		return ERR(e, ERR_DATA, "%s: offsets end at %d, the header announces %" PRId64
			   " tokens", path, c->offset[n], total);
	return ERR_OK;
}

/* The content of c against the lock stored in corpus.bin (data.lock only describes it:
 * corpus_lock_file_check). */
static int check_stored_lock(const char *path, const char *stored, const struct corpus *c,
			     struct err *e)
{
	if (strcmp(c->lock, stored) != 0)
		return ERR(e, ERR_DATA, "%s: content does not match its data lock (stored %.12s..., "
			   "computed %.12s...): the file is corrupt", path, stored, c->lock);
	return ERR_OK;
}

int corpus_load(const char *dir, struct corpus *c, struct err *e)
{
	char path[FSX_PATH_MAX], stored[65];
	char *buf = NULL;
	size_t size;
	int rc;

	memset(c, 0, sizeof *c);
	ERR_TRY(fsx_join(path, sizeof path, dir, OUTPUT_CORPUS_BIN, e));
	ERR_TRY(fsx_read_all(path, &buf, &size, e));
	rc = decode_corpus(path, buf, size, stored, c, e);
	free(buf);
	if (rc == ERR_OK)
		rc = corpus_validate(c, path, e);
	if (rc == ERR_OK)
		rc = corpus_compute_lock(c, c->lock, e);
	if (rc == ERR_OK)
		rc = check_stored_lock(path, stored, c, e);
	if (rc)
		corpus_free(c);
	return rc;
}
