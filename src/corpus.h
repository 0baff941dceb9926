/*
 * corpus: the synthetic token corpus and its data lock.
 *
 * Sequences come from a sparse random Markov source (each state has `branching` likely
 * successors), so a context model can learn them and test accuracy means something.
 * Lengths are uniform in [min_len, max_len]; each sequence may open with an unsupervised
 * prefix (a prompt) of prefix[i] positions that are never targets. Ids below
 * DATA_RESERVED are reserved: DATA_BOS fills the context before the start and is never
 * a target. Everything is drawn from prng.h, so the corpus is identical on every
 * platform for a given seed.
 *
 * The data lock is the SHA-256 (hex) of the corpus parameters and content; checkpoints
 * store it and resume refuses a corpus whose lock differs.
 */
#ifndef DDPTOK_CORPUS_H
#define DDPTOK_CORPUS_H

#include <stdint.h>

#include "err.h"
#include "settings.h"

#define DATA_BOS 0
#define DATA_PAD 1
#define DATA_RESERVED 4

enum split { SPLIT_TRAIN = 0, SPLIT_VALIDATION = 1, SPLIT_TEST = 2 };

/* Version of the generator and of the lock serialization: bump it whenever either changes,
 * so that an old checkpoint can never match a corpus drawn differently. */
#define CORPUS_FORMAT 1
/* Most successors per state of the Markov source (data.branching). */
#define CORPUS_MAX_BRANCHING 64

/* The [data] settings that shaped a built corpus; all zero for corpus_from_arrays. They
 * enter the data lock and are stored in corpus.bin and data.lock. */
struct corpus_params {
	uint64_t seed;
	int32_t train_count, validation_count, test_count;
	int32_t min_len, max_len;
	int32_t vocab;
	int32_t prefix_max;
	int32_t branching;
};

struct corpus {
	int n;            /* sequences: train first, then validation, then test */
	int vocab;
	int32_t *offset;  /* n + 1 offsets into tokens */
	int32_t *tokens;
	int32_t *prefix;  /* unsupervised positions at the start of each sequence */
	uint8_t *split;   /* enum split per sequence */
	int split_count[3];
	int split_first[3];
	char lock[65];    /* hex SHA-256 data lock */
	struct corpus_params params;
};

int corpus_build(const struct settings *s, struct corpus *c, struct err *e);
/* Builds a corpus from explicit sequences (tests, the exercise); all in SPLIT_TRAIN. */
int corpus_from_arrays(int n, const int32_t *lengths, const int32_t *prefix,
		       const int32_t *tokens, int vocab, struct corpus *c, struct err *e);
void corpus_free(struct corpus *c);
/* Whether a corpus was built with the [data] settings (and seed) of s. */
int corpus_params_match(const struct corpus_params *p, const struct settings *s);
/* The keys on which p and s differ, as "data.vocab: 64 (corpus) != 128 (configuration); ..."
 * in out (cap bytes; out may be NULL when cap is 0); returns how many. */
int corpus_params_diff(const struct corpus_params *p, const struct settings *s, char *out,
		       size_t cap);
static inline int corpus_len(const struct corpus *c, int id)
{
	return c->offset[id + 1] - c->offset[id];
}
static inline int corpus_supervised(const struct corpus *c, int id)
{
	return corpus_len(c, id) - c->prefix[id];
}
/* Writes dir/corpus.bin and dir/data.lock (JSON: lock, parameters, counts) atomically.
 * dir is created if missing. s may be NULL; otherwise, for a built corpus, its [data]
 * settings must be the ones the corpus was built with (ERR_DATA if not). */
int corpus_save(const struct corpus *c, const struct settings *s, const char *dir,
		struct err *e);
/* Reads the lock stored in dir/data.lock into lock[65] (ERR_DATA / ERR_IO). */
int corpus_read_lock(const char *dir, char lock[65], struct err *e);
/* Reads dir/corpus.bin back into c, checks its structure, recomputes the lock and checks
 * it against the lock stored in corpus.bin and, when present, in dir/data.lock. Any
 * mismatch is ERR_DATA naming the file; an unreadable file is ERR_IO. */
int corpus_load(const char *dir, struct corpus *c, struct err *e);
/* Computes the data lock of c from c->params and its arrays into lock[65]. */
int corpus_compute_lock(const struct corpus *c, char lock[65], struct err *e);

#endif
