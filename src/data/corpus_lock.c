/*
 * corpus_lock: the data lock of a corpus, and the sealing of a corpus once built (its
 * checks, then its lock).
 *
 * The data lock is the hex SHA-256 of this little-endian serialization:
 *     "ddptok-corpus" (13 bytes), u32 CORPUS_FORMAT,
 *     u64 seed, i32 train_count, validation_count, test_count, min_len, max_len, vocab,
 *         prefix_max, branching, source, eot, split_rule[3], 64 bytes files digest (hex,
 *         zero bytes when none)                       (struct corpus_params; zero for
 *                                                      corpus_from_arrays)
 *     i32 n, i32 vocab, i32 offset[n + 1], i32 tokens[offset[n]], i32 prefix[n], u8 split[n],
 *     u8 has_mask, then (has_mask) u8 mask[offset[n]]
 */
#include "corpus_lock.h"

#include <stdlib.h>
#include <string.h>

#include "corpus_le.h"
#include "digest.h"

#define CORPUS_LOCK_TAG "ddptok-corpus"

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
	corpus_put_u32(b, v);
	lh_bytes(h, b, 4);
}

static void lh_u64(struct lock_hash *h, uint64_t v)
{
	uint8_t b[8];
	corpus_put_u64(b, v);
	lh_bytes(h, b, 8);
}

static void lh_i32s(struct lock_hash *h, const int32_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		lh_u32(h, (uint32_t)v[i]);
}

void corpus_params_words(const struct corpus_params *p, int32_t w[8])
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

/* source, eot, split rule and the files digest (64 bytes, zero when there is none) */
void corpus_files_words(const struct corpus_params *p, uint8_t out[CORPUS_FILES_WORDS])
{
	const int32_t w[5] = { p->source, p->eot, p->split_rule[0], p->split_rule[1],
			       p->split_rule[2] };
	for (int k = 0; k < 5; k++)
		corpus_put_u32(out + 4 * k, (uint32_t)w[k]);
	memset(out + 20, 0, 64);
	memcpy(out + 20, p->files, strnlen(p->files, 64));
}

static void lh_file_params(struct lock_hash *h, const struct corpus_params *p)
{
	uint8_t b[CORPUS_FILES_WORDS];
	corpus_files_words(p, b);
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
	corpus_params_words(&c->params, w);
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


int corpus_finish(struct corpus *c, const char *what, struct err *e)
{
	int rc = corpus_check(c, what, e);
	if (!rc)
		rc = corpus_compute_lock(c, c->lock, e);
	return rc;
}

/* The [data] settings a corpus can be built from; *n_out: the number of sequences. */
