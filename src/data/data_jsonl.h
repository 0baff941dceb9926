/*
 * data_jsonl: the reader of JSON Lines, one object per sequence; the format is described in data_jsonl.c.
 * Its row in the table of sources.h makes it a choice of [data] source.
 */
#ifndef DDPTOK_DATA_JSONL_H
#define DDPTOK_DATA_JSONL_H

#include "data.h"
#include "err.h"

/* Adds to d every sequence of every line of the file at path (data_add). */
int data_read_jsonl(struct data_set *d, const char *path, struct err *e);

#endif
