/*
 * corpus: the token corpus (synthetic, or read from the user's files) and its data lock.
 *
 * Sequences come from a sparse random Markov source (each state has `branching` likely
 * successors), so a context model can learn them and test accuracy means something.
 * Lengths are uniform in [min_len, max_len]; each sequence may open with an unsupervised
 * prefix (a prompt) of prefix[i] positions that are never targets. Ids below
 * DATA_RESERVED are reserved: DATA_BOS fills the context before the start and is never
 * a target. Everything is drawn from prng.h, so the corpus is identical on every
 * platform for a given seed.
 *
 * A corpus read from files (corpus_files.c) may also carry a mask: a token whose mask is
 * 0 is context only, never a target, wherever it stands (ignored labels); the prefix then
 * counts the masked tokens that open the sequence.
 *
 * The data lock is the SHA-256 (hex) of the corpus parameters and content; checkpoints
 * store it and resume refuses a corpus whose lock differs. For a corpus read from files
 * the parameters include the SHA-256 of the files, so a changed file changes the lock.
 */
#ifndef DDPTOK_CORPUS_H
#define DDPTOK_CORPUS_H

#include <stdint.h>

#include "data.h"
#include "sources.h"
#include "err.h"
#include "settings.h"

#define DATA_BOS 0
#define DATA_PAD 1
#define DATA_RESERVED 4

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
	int split_count[3];
	int split_first[3];
	char lock[65];    /* hex SHA-256 data lock */
	struct corpus_params params;
	struct data_stats read; /* file source, as built: what the files held (not saved) */
};

/* The corpus of s: drawn from the synthetic source, or read from the files of a file
 * source (corpus_from_files). */
int corpus_build(const struct settings *s, struct corpus *c, struct err *e);
/* Reads the files of s's file source into c (see corpus_files.c). */
int corpus_from_files(const struct settings *s, struct corpus *c, struct err *e);
/* The same, calling progress(arg, file, done, total) now and then while a file is read. */
typedef void (*corpus_progress_fn)(void *arg, const char *file, uint64_t done, uint64_t total);
int corpus_from_files_progress(const struct settings *s, corpus_progress_fn progress,
			       void *arg, struct corpus *c, struct err *e);
/* For a file source: sets s->vocab, the model's vocabulary, to model.vocab (or the largest
 * id in the files + 1, which reads them) plus the DATA_RESERVED ids. Nothing for the
 * synthetic source. */
int corpus_resolve_vocab(struct settings *s, struct err *e);
/* For a corpus read from files: reads s's files again and checks that they are the ones
 * c was read from (ERR_DATA naming the path if not). Nothing for a synthetic corpus. */
int corpus_files_unchanged(const struct settings *s, const struct corpus *c, struct err *e);
/* Builds a corpus from explicit sequences (tests, the exercise); all in SPLIT_TRAIN. */
int corpus_from_arrays(int n, const int32_t *lengths, const int32_t *prefix,
		       const int32_t *tokens, int vocab, struct corpus *c, struct err *e);
void corpus_free(struct corpus *c);
/* For constructors: allocates the arrays of an n-sequence, `total`-token corpus (zeroed,
 * no mask), then, once they are filled, corpus_finish checks them (ERR_DATA naming `what`),
 * fills the split counts and supervised counts and computes the lock. */
int corpus_alloc(struct corpus *c, int n, int64_t total, struct err *e);
int corpus_finish(struct corpus *c, const char *what, struct err *e);
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
	return c->supervised[id];
}
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

/* Writes dir/corpus.bin and dir/data.lock (JSON: lock, parameters, counts) atomically.
 * dir is created if missing. s may be NULL; otherwise, for a built corpus, its [data]
 * settings must be the ones the corpus was built with (ERR_DATA if not). */
int corpus_save(const struct corpus *c, const struct settings *s, const char *dir,
		struct err *e);
/* corpus.bin is the authority: its content is checked against the lock stored inside
 * it. dir/data.lock is its description in JSON, derived from it: corpus_lock_file_check
 * reads all of it and, when it is missing or says anything else than c, names what in
 * why[cap] (empty when it describes c); corpus_save_lock writes it again. */
int corpus_lock_file_check(const char *dir, const struct corpus *c, char *why, size_t cap,
			   struct err *e);
int corpus_save_lock(const struct corpus *c, const char *dir, struct err *e);
/* Reads dir/corpus.bin back into c, checks its structure, recomputes the lock and checks
 * it against the lock stored in corpus.bin (not data.lock: see above). Any mismatch is
 * ERR_DATA naming the file; an unreadable file is ERR_IO. */
int corpus_load(const char *dir, struct corpus *c, struct err *e);
/* Computes the data lock of c from c->params and its arrays into lock[65]. */
int corpus_compute_lock(const struct corpus *c, char lock[65], struct err *e);

#endif
