/*
 * corpus_files: the corpus of a file source, read from the user's token files by the
 * reader of its format (sources.h) and laid out as corpus ids (see corpus_files.c).
 */
#ifndef DDPTOK_CORPUS_FILES_H
#define DDPTOK_CORPUS_FILES_H

#include <stdint.h>

#include "corpus_core.h"
#include "err.h"
#include "settings.h"

/* Reads the files of s's file source into c (see corpus_files.c). */
int corpus_from_files(const struct settings *s, struct corpus *c, struct err *e);
/* The same, calling report(arg, file, done, total) now and then while a file is read. */
typedef void (*corpus_read_report_fn)(void *arg, const char *file, uint64_t done, uint64_t total);
int corpus_from_files_reporting(const struct settings *s, corpus_read_report_fn report,
			       void *arg, struct corpus *c, struct err *e);
/* The vocabulary of the model for settings s trained on corpus c: s->vocab, or when it is
 * 0 (a file source without model.vocab: the files say) the corpus's (0 when c is NULL). */
int corpus_model_vocab(const struct settings *s, const struct corpus *c);
/* For a corpus read from files: reads s's files again and checks that they are the ones
 * c was read from (ERR_DATA naming the path if not). Nothing for a synthetic corpus. */
int corpus_files_unchanged(const struct settings *s, const struct corpus *c, struct err *e);

#endif
