/*
 * corpus_store: the prepared corpus in a directory (<outputs>/corpus): corpus.bin, the
 * corpus itself with its parameters, vocabulary and data lock, and data.lock, its
 * description in JSON. `prepare` writes it; the training commands open it.
 */
#ifndef DDPTOK_CORPUS_STORE_H
#define DDPTOK_CORPUS_STORE_H

#include <stddef.h>

#include "corpus_core.h"
#include "err.h"
#include "settings.h"

/* Whether a corpus was built with the [data] settings (and seed) of s. */
int corpus_params_match(const struct corpus_params *p, const struct settings *s);
/* The keys on which p and s differ, as "data.vocab: 64 (corpus) != 128 (configuration); ..."
 * in out (cap bytes; out may be NULL when cap is 0); returns how many. */
int corpus_params_diff(const struct corpus_params *p, const struct settings *s, char *out,
		       size_t cap);
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
/* Maps dir/corpus.bin read-only into c (its arrays point into the mapping, corpus_core.h:
 * the corpus costs resident memory only for the pages in use), checks its structure,
 * recomputes the lock and checks it against the lock stored in corpus.bin (not data.lock:
 * see above), then drops the pages the checks read from the resident set. Any mismatch is
 * ERR_DATA naming the file; an unreadable file is ERR_IO. */
int corpus_load(const char *dir, struct corpus *c, struct err *e);
/* The vocabulary that the corpus prepared in dir records, when its header says it was
 * prepared from the [data] settings of s; 0 when dir holds none that was. Only the header
 * of corpus.bin is read: whether the files changed since is for corpus_files_unchanged,
 * when the corpus is opened. For what reports the model without opening a corpus. */
int corpus_store_vocab(const char *dir, const struct settings *s);

#endif
