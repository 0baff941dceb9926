/*
 * memstat: this process's resident memory as the kernel counts it (/proc/self/status), so
 * that what a run holds can be told apart from what it merely maps: anonymous pages (the
 * heap: model, optimizer state, batches) against pages of mapped files (the prepared
 * corpus, libraries), which the kernel reads on demand and may drop again.
 */
#ifndef DDPTOK_MEMSTAT_H
#define DDPTOK_MEMSTAT_H
#include <stddef.h>
#include <stdint.h>

struct mem_usage {
	int64_t resident; /* bytes: VmRSS */
	int64_t anonymous; /* RssAnon */
	int64_t file;      /* RssFile (and RssShmem) */
	int64_t peak;      /* VmHWM: the most resident at any time */
	int known;         /* 0 where /proc/self/status is not there to read */
};

/* Reads the counts now; known = 0 (and all zero) where the kernel does not give them. */
void mem_usage_read(struct mem_usage *m);

/* "resident 22.1 MiB (anonymous 12.6 MiB, file pages 9.5 MiB; peak 30.0 MiB)" into out,
 * or "resident memory unknown (no /proc/self/status)". */
void mem_usage_format(const struct mem_usage *m, char *out, size_t cap);
#endif
