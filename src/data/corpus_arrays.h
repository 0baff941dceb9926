/*
 * corpus_arrays: a corpus built from explicit sequences (see corpus_arrays.c).
 */
#ifndef DDPTOK_CORPUS_ARRAYS_H
#define DDPTOK_CORPUS_ARRAYS_H

#include <stdint.h>

#include "corpus_core.h"
#include "err.h"

/* Builds a corpus of n sequences, all in SPLIT_TRAIN: sequence i holds lengths[i] ids
 * of tokens, one after the other, and opens with prefix[i] unsupervised positions
 * (prefix NULL: none). Ids must lie in [DATA_RESERVED, vocab). */
int corpus_from_arrays(int n, const int32_t *lengths, const int32_t *prefix,
		       const int32_t *tokens, int vocab, struct corpus *c, struct err *e);

#endif
