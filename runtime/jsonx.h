/*
 * jsonx: JSON text for every file the program writes.
 *
 * jansson prints every real with one fixed precision (17 significant digits by default),
 * so 1e-6 comes out as 9.9999999999999995e-7. jsonx_dumps prints each real in the
 * shortest form that reads back as the same double (1e-6, 0.0001, 2.7621025274961424),
 * in plain notation for decimal exponents -4..16 as jansson does, and always with a '.'
 * or an exponent so that it reads back as a real.
 */
#ifndef DDPTOK_JSONX_H
#define DDPTOK_JSONX_H

#include <jansson.h>
#include <stddef.h>

/* json_dumps(j, flags) with every real in its shortest round-trip form (any
 * JSON_REAL_PRECISION in flags is ignored). malloc'd; NULL when jansson fails or memory
 * runs out. */
char *jsonx_dumps(const json_t *j, size_t flags);

/* The shortest text of a finite double that strtod reads back as the same value, in the
 * style above; returns its length (buf holds at least 32 bytes). */
int jsonx_real_text(double v, char *buf, size_t cap);

#endif
