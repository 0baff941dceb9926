/*
 * sources: where the sequences of a corpus come from ([data] source), as one table.
 *
 * Each row names a source, the value it has in enum data_source and its reader: the
 * synthetic source is drawn (corpus_synth.c) and has none, every other one is a file
 * format read by its own data_NAME.c. The enum, the choices of the configuration key
 * (settings.c) and the table that data_read() dispatches through are all expanded from
 * DATA_SOURCES, so they cannot disagree: adding a format is its reader file and one row.
 */
#ifndef DDPTOK_SOURCES_H
#define DDPTOK_SOURCES_H

#include "data.h"
#include "err.h"

/* ROW(enum value, name in data.source, reader or NULL), in the order of the enum; the
 * readers are named here only, and declared where the table is expanded (sources.c). */
#define DATA_SOURCES(ROW)                                  \
	ROW(DATA_SYNTHETIC, "synthetic", NULL)             \
	ROW(DATA_NPY, "npy", data_read_npy)                \
	ROW(DATA_JSONL, "jsonl", data_read_jsonl)          \
	ROW(DATA_MEGATRON, "megatron", data_read_megatron) \
	ROW(DATA_LLMC, "llmc", data_read_llmc)

#define DATA_SOURCE_ENUM(id, name, read) id,
enum data_source { DATA_SOURCES(DATA_SOURCE_ENUM) DATA_SOURCE_COUNT };

/* "synthetic|npy|...": the choices of [data] source (index = enum value), a constant for
 * the key table. Each row gives "|name"; the + 1 skips the first bar. */
#define DATA_SOURCE_CHOICE(id, name, read) "|" name
#define DATA_SOURCE_CHOICES (DATA_SOURCES(DATA_SOURCE_CHOICE) + 1)

/* What a reader does: adds every sequence of the files at path (what path names is the
 * format's: a directory, a file, a prefix) to d with data_add(). */
typedef int (*data_reader_fn)(struct data_set *d, const char *path, struct err *e);

/* The name of a source in data.source ("invalid" for a value outside the table). */
const char *data_source_name(int source);

/* Reads path with the reader of source, then data_finish; a source without files (the
 * synthetic one) is ERR_CONFIG. */
int data_read(struct data_set *d, int source, const char *path, struct err *e);

#endif
