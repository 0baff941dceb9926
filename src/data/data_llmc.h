/*
 * data_llmc: the reader of llm.c's token shards; the format is described in data_llmc.c.
 * Its row in DATA_SOURCES (config/settings.h) makes it a choice of [data] source, its
 * entry in source_readers (sources.c) the reader of that choice.
 */
#ifndef DDPTOK_DATA_LLMC_H
#define DDPTOK_DATA_LLMC_H

#include "data.h"
#include "err.h"

/* Adds to d every sequence of the shard at path, or every shard of the directory path (data_add). */
int data_read_llmc(struct data_set *d, const char *path, struct err *e);

#endif
