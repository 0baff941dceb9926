/*
 * corpus_synth: the synthetic corpus, a sparse random Markov source drawn from run.seed
 * and the [data] keys, the same on every platform (see corpus_synth.c).
 */
#ifndef DDPTOK_CORPUS_SYNTH_H
#define DDPTOK_CORPUS_SYNTH_H

#include "corpus_core.h"
#include "err.h"
#include "settings.h"

/* Draws the corpus of s's [data] settings and seed into c (ERR_CONFIG for settings no
 * corpus can be drawn from). */
int corpus_synth_build(const struct settings *s, struct corpus *c, struct err *e);

#endif
