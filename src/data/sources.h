/*
 * sources: where the sequences of a corpus come from ([data] source), as one table.
 *
 * The sources and their names are settings.h's DATA_SOURCES, the list the configuration
 * key's choices come from; here each file source gets its reader: the synthetic source
 * is drawn (corpus_synth.c) and has none, every other one is a file format read by its own
 * data_NAME.c. Adding a format is its reader file, its row in DATA_SOURCES and its entry
 * in sources.c's table (test-data checks that every file source has one).
 */
#ifndef DDPTOK_SOURCES_H
#define DDPTOK_SOURCES_H

#include "data.h"
#include "err.h"
#include "settings.h" /* enum data_source */

/* What a reader does: adds every sequence of the files at path (what path names is the
 * format's: a directory, a file, a prefix) to d with data_add(). */
typedef int (*data_reader_fn)(struct data_set *d, const char *path, struct err *e);

/* The name of a source in data.source ("invalid" for a value outside the table). */
const char *data_source_name(int source);

/* Whether source has a reader (every source but the synthetic one). */
int data_source_has_reader(int source);

/* Reads path with the reader of source, then data_finish; a source without files (the
 * synthetic one) is ERR_CONFIG. */
int data_read(struct data_set *d, int source, const char *path, struct err *e);

#endif
