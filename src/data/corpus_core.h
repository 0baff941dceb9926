/*
 * corpus_core: the token corpus as every part of the program sees it, whatever made it:
 * the sequences, their prompts and masks, their splits and the data lock, with the
 * allocation and the checks that every way of making one (corpus.h) shares.
 *
 * Ids below DATA_RESERVED are reserved: DATA_BOS fills the context before the start and
 * is never a target. Each sequence may open with an unsupervised prefix (a prompt) of
 * prefix[i] positions that are never targets. A corpus read from files (corpus_files.c)
 * may also carry a mask: a token whose mask is 0 is context only, never a target,
 * wherever it stands (ignored labels); the prefix then counts the masked tokens that open
 * the sequence.
 *
 * The data lock is the SHA-256 (hex) of the corpus parameters and content (corpus_lock.h);
 * checkpoints store it and resume refuses a corpus whose lock differs. For a corpus read
 * from files the parameters include the SHA-256 of the files, so a changed file changes
 * the lock.
 */
#ifndef DDPTOK_CORPUS_CORE_H
#define DDPTOK_CORPUS_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "data.h"
#include "err.h"
#include "settings.h" /* DATA_BOS, DATA_PAD, DATA_RESERVED */

/* Version of the generator and of the lock serialization: bump it whenever either changes,
 * so that an old checkpoint can never match a corpus drawn differently. */
#define CORPUS_FORMAT 2
/* Most successors per state of the Markov source (data.branching). */
#define CORPUS_MAX_BRANCHING 64

/* The [data] settings that shaped a built corpus; all zero for corpus_from_arrays. They
 * enter the data lock and are stored in corpus.bin and data.lock. For a file source the
 * split counts are the ones found, prefix_max and branching are 0. */
struct corpus_params {
	uint64_t seed;
	int32_t train_count, validation_count, test_count;
	int32_t min_len, max_len;
	int32_t vocab;
	int32_t prefix_max;
	int32_t branching;
	int32_t source;        /* enum data_source */
	int32_t eot;           /* llmc: data.eot; otherwise 0 */
	int32_t split_rule[3]; /* file source: data.split; otherwise 0 */
	char files[65];        /* file source: SHA-256 of the files read (data.h); otherwise "" */
};

struct corpus {
	int n;            /* sequences: train first, then validation, then test */
	int vocab;
	int32_t *offset;  /* n + 1 offsets into tokens */
	int32_t *tokens;
	int32_t *prefix;  /* unsupervised positions at the start of each sequence */
	uint8_t *mask;    /* NULL, or per token: 0 = never a target (files with a mask) */
	int32_t *supervised; /* per sequence: its targets (filled by the constructors) */
	uint8_t *split;   /* enum split per sequence */
	float *class_weight; /* NULL, or train.class_weights per id (class_weights.h) */
	double *seq_weight;  /* NULL, or per sequence the sum of its targets' weights */
	int split_count[3];
	int split_first[3];
	char lock[65];    /* hex SHA-256 data lock */
	struct corpus_params params;
	struct data_stats read; /* file source, as built: what the files held (not saved) */
	/* a prepared corpus read back (corpus_store.h): offset, tokens, prefix, split and mask
	 * point into this read-only mapping of its corpus.bin instead of owning memory, so
	 * that the corpus costs resident memory only for the pages in use; NULL otherwise */
	void *map;
	size_t map_len;
};

void corpus_free(struct corpus *c);
/* For constructors: allocates the arrays of an n-sequence, `total`-token corpus (zeroed,
 * no mask); once they are filled, corpus_finish (corpus_lock.h) checks them and locks. */
int corpus_alloc(struct corpus *c, int n, int64_t total, struct err *e);
/* Checks the arrays of c (offsets, ids, prefixes, masks, split order, and what its
 * parameters say when it has them): ERR_DATA naming `what`. Fills split_count,
 * split_first and supervised. */
int corpus_check(struct corpus *c, const char *what, struct err *e);
static inline int corpus_len(const struct corpus *c, int id)
{
	return c->offset[id + 1] - c->offset[id];
}
static inline int corpus_supervised(const struct corpus *c, int id)
{
	return c->supervised[id];
}
/* An id (or a count of ids) as the user spells it: a file source's ids are its files',
 * shifted by DATA_RESERVED in the corpus (corpus_files.c), so messages take that shift
 * off; the synthetic source's ids are the corpus's own (data.vocab counts the reserved). */
long long corpus_user_id(int source, long long id);
/* Whether position t of sequence id is a target: past the prefix, and not masked. */
static inline int corpus_is_target(const struct corpus *c, int id, int t)
{
	return t >= c->prefix[id] && (!c->mask || c->mask[c->offset[id] + t]);
}
/* What prepare reports about a corpus: tokens and targets per split, and a histogram of
 * the sequence lengths in CORPUS_HIST buckets of equal width over [shortest, longest]. */
#define CORPUS_HIST 8
struct corpus_summary {
	int64_t tokens[3], supervised[3];
	int shortest, longest, width; /* bucket k: lengths shortest + k*width .. + width - 1 */
	int64_t hist[CORPUS_HIST];
};
void corpus_summarize(const struct corpus *c, struct corpus_summary *out);

#endif
