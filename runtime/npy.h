/*
 * npy: tensors as NumPy .npy files (format version 1.0), so that anyone can load what
 * ddptok writes with numpy.load() and nothing else.
 *
 * Layout written: the magic "\x93NUMPY", version 1.0, a little-endian uint16 header
 * length, then the header, a Python dict literal such as
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * padded with spaces and ended by '\n' so that the data starts at a multiple of 64 bytes,
 * then the values in C order, little-endian. Shape () is a scalar (one value).
 *
 * The reader is strict: it accepts what this writer produces (and the same dict written
 * by numpy itself, versions 1.0 to 3.0), and anything else (wrong magic, unknown dtype,
 * Fortran order, truncated or over-long data, malformed header) is ERR_DATA naming the
 * file. Only little-endian hosts are supported; both directions check it at runtime.
 */
#ifndef DDPTOK_NPY_H
#define DDPTOK_NPY_H

#include <stddef.h>

#include "err.h"

#define NPY_MAX_DIMS 8
#define NPY_ALIGN 64 /* the data offset is a multiple of this */

enum npy_dtype {
	NPY_F32, /* '<f4' */
	NPY_F64, /* '<f8' */
	NPY_I32, /* '<i4' */
	NPY_I64, /* '<i8' */
	/* read only (token and mask arrays written by others): */
	NPY_I8,   /* '|i1' */
	NPY_U8,   /* '|u1' */
	NPY_BOOL, /* '|b1' */
	NPY_I16,  /* '<i2' */
	NPY_U16,  /* '<u2' */
	NPY_U32,  /* '<u4' */
	NPY_U64,  /* '<u8' */
};

size_t npy_dtype_size(enum npy_dtype dt);
const char *npy_dtype_descr(enum npy_dtype dt); /* "<f4", ... or NULL */

/* The file's preamble (magic, version, the header dict padded to a multiple of 64 bytes)
 * in hdr[0..*hlen), and the byte count of the values that follow it in *nbytes; for
 * storing tensors inside other containers (checkpoints) without copying the values.
 * `name` is used in error messages. */
int npy_header(enum npy_dtype dt, const size_t *shape, int ndim, const char *name, char *hdr,
	       size_t cap, size_t *hlen, size_t *nbytes, struct err *e);

/* Writes the file atomically (fsx_writer: temp + fsync + rename + fsync dir). */
int npy_write(const char *path, enum npy_dtype dt, const size_t *shape, int ndim,
	      const void *data, struct err *e);

/* Parses a file image. `name` is used in error messages. On success *data is a malloc'd
 * copy of the values (at least one byte allocated, free() it), shape[0..*ndim-1] the
 * dimensions. */
int npy_read_from_memory(const void *buf, size_t len, const char *name, enum npy_dtype *dt,
			 size_t shape[NPY_MAX_DIMS], int *ndim, void **data, struct err *e);

/* Checks a file image like npy_read_from_memory but copies nothing: the values start at
 * buf + *data_offset (for arrays read in place from a memory-mapped file). */
int npy_parse(const void *buf, size_t len, const char *name, enum npy_dtype *dt,
	      size_t shape[NPY_MAX_DIMS], int *ndim, size_t *data_offset, struct err *e);

/* npy_parse of a file image of len bytes of which buf holds the first `have`: at least
 * npy_head_size(buf, ...) of them (all of them when it is 0 or past len), so that a file
 * read in pieces is checked from its head and its length. */
int npy_parse_head(const void *buf, size_t have, size_t len, const char *name,
		   enum npy_dtype *dt, size_t shape[NPY_MAX_DIMS], int *ndim,
		   size_t *data_offset, struct err *e);
/* The bytes before the values (preamble and header) as the first `have` bytes of a file
 * say (12 suffice), or 0 when they are no .npy preamble (npy_parse_head says why). */
size_t npy_head_size(const void *buf, size_t have);

int npy_read(const char *path, enum npy_dtype *dt, size_t shape[NPY_MAX_DIMS], int *ndim,
	     void **data, struct err *e);

/* Number of elements of a shape (1 for ndim == 0); 0 and ERR_DATA on overflow. */
int npy_count(const size_t *shape, int ndim, size_t *count, struct err *e);

#endif
