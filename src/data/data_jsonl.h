/*
 * data_jsonl: the reader of JSON Lines, one object per sequence; the format is described in data_jsonl.c.
 * Its row in DATA_SOURCES (config/settings.h) makes it a choice of [data] source, its
 * entry in source_readers (sources.c) the reader of that choice.
 */
#ifndef DDPTOK_DATA_JSONL_H
#define DDPTOK_DATA_JSONL_H

#include "data.h"
#include "err.h"

/* Adds to d every sequence of every line of the file at path (data_add). */
int data_read_jsonl(struct data_set *d, const char *path, struct err *e);

#endif
