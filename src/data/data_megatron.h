/*
 * data_megatron: the reader of Megatron-LM's indexed dataset (prefix.bin + prefix.idx); the format is described in data_megatron.c.
 * Its row in DATA_SOURCES (config/settings.h) makes it a choice of [data] source, its
 * entry in source_readers (sources.c) the reader of that choice.
 */
#ifndef DDPTOK_DATA_MEGATRON_H
#define DDPTOK_DATA_MEGATRON_H

#include "data.h"
#include "err.h"

/* Adds to d every sequence of the dataset whose files are prefix.bin and prefix.idx (data_add). */
int data_read_megatron(struct data_set *d, const char *prefix, struct err *e);

#endif
