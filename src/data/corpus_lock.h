/*
 * corpus_lock: the data lock of a corpus (the SHA-256 of its parameters and content, see
 * corpus_lock.c for the serialization) and corpus_finish, which every constructor calls
 * once the arrays are filled.
 */
#ifndef DDPTOK_CORPUS_LOCK_H
#define DDPTOK_CORPUS_LOCK_H

#include <stdint.h>

#include "corpus_core.h"
#include "err.h"

/* Computes the data lock of c from c->params and its arrays into lock[65]. */
int corpus_compute_lock(const struct corpus *c, char lock[65], struct err *e);
/* Checks the arrays of c (corpus_check, ERR_DATA naming `what`) and computes its lock. */
int corpus_finish(struct corpus *c, const char *what, struct err *e);

/* The parameters as the lock and corpus.bin serialize them: the eight i32 from
 * train_count to branching in declaration order, and the source, eot and split rule as
 * five little-endian u32 followed by the 64 bytes of the files digest (zero when none). */
#define CORPUS_FILES_WORDS (5 * 4 + 64)
void corpus_params_words(const struct corpus_params *p, int32_t w[8]);
void corpus_files_words(const struct corpus_params *p, uint8_t out[CORPUS_FILES_WORDS]);

#endif
