/*
 * tok_batch: many documents encoded on several threads, each with its own tok_worker,
 * for a corpus prepared from text and for the encoding bench.
 *
 * Threads take the next document from a shared counter, so that long and short ones even
 * out; every document's ids land in its own array, so the result does not depend on the
 * number of threads. The calling thread is one of them and the one that reports progress.
 */
#ifndef DDPTOK_TOK_BATCH_H
#define DDPTOK_TOK_BATCH_H

#include <stddef.h>

#include "err.h"
#include "tok_ids.h"
#include "tokenizer.h"

struct tok_doc {
	const char *text;
	size_t len;
	struct tok_ids ids; /* filled (appended to) by tok_batch_encode */
};

/* called now and then by the calling thread: bytes of text encoded so far, of total */
typedef void (*tok_progress_fn)(void *arg, size_t done, size_t total);

/* Encodes docs[0..n) on `threads` threads (0: the CPUs of this host). On an error the
 * message is the one of the first failing document, prefixed by its index ("document
 * K: ..."), and *failed (when not NULL) gets K. */
int tok_batch_encode(struct tokenizer *t, struct tok_doc *docs, size_t n, int threads,
		     tok_progress_fn on_done, void *arg, size_t *failed, struct err *e);

/* The threads tok_batch_encode uses for `threads` (0: the CPUs of this host). */
int tok_batch_threads(int threads);

#endif
