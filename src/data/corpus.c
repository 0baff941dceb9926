/*
 * corpus: chooses how the corpus of a configuration is made, by its [data] source. It
 * sits above the ways (corpus_synth.c, corpus_files.c), which share corpus_core.c and
 * corpus_lock.c below them and know nothing of this file.
 */
#include "corpus.h"

#include "corpus_files.h"
#include "corpus_synth.h"
#include "sources.h"

int corpus_build(const struct settings *s, struct corpus *c, struct err *e)
{
	if (s->source == DATA_SYNTHETIC)
		return corpus_synth_build(s, c, e);
	return corpus_from_files(s, c, e);
}
