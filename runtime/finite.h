/*
 * finite: the scan of a float vector for NaN and infinity, the check that keeps
 * non-finite values out of checkpoints (written or loaded) and out of the model files a
 * run starts from. A vector of many chunks is scanned by a few threads, each over a fixed
 * range of whole chunks; their reports are combined in range order, so the result is the
 * same whatever the thread count, and a thread that cannot be started is done by the
 * caller instead.
 */
#ifndef DDPTOK_FINITE_H
#define DDPTOK_FINITE_H

#include <stddef.h>

/* Floats per chunk (4 MiB): small enough to share a large model among the threads, large
 * enough that a small one is scanned by the caller alone. */
#define FINITE_CHUNK ((size_t)1 << 20)
/* The most threads a scan uses (it is bound by memory bandwidth, which a few saturate). */
#define FINITE_MAX_THREADS 8

struct finite_report {
	size_t bad;   /* NaN and infinite values */
	size_t first; /* the index of the first of them (when bad > 0) */
};

/* Scans x[0..n). */
void finite_scan(const float *x, size_t n, struct finite_report *out);

#endif
