/*
 * corpus: the corpus a configuration describes, made by the source it names: drawn by
 * the synthetic source (corpus_synth.h) or read from the user's files (corpus_files.h).
 *
 * The corpus itself (struct corpus, corpus_core.h) is shared by everything below this
 * file; the prepared corpus on disk is corpus_store.h's.
 */
#ifndef DDPTOK_CORPUS_H
#define DDPTOK_CORPUS_H

#include "corpus_core.h"
#include "err.h"
#include "settings.h"

/* The corpus of s: drawn from the synthetic source, or read from the files of a file
 * source. */
int corpus_build(const struct settings *s, struct corpus *c, struct err *e);

#endif
