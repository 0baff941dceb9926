/*
 * data_npy: the reader of a directory of NumPy arrays (tokens, offsets, and optionally loss_mask and split); the format is described in data_npy.c.
 * Its row in DATA_SOURCES (config/settings.h) makes it a choice of [data] source, its
 * entry in source_readers (sources.c) the reader of that choice.
 */
#ifndef DDPTOK_DATA_NPY_H
#define DDPTOK_DATA_NPY_H

#include "data.h"
#include "err.h"

/* Adds to d every sequence of the arrays of the directory dir (data_add). */
int data_read_npy(struct data_set *d, const char *dir, struct err *e);

#endif
