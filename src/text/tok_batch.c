/*
 * tok_batch: documents encoded on several threads (see tok_batch.h).
 */
#include "tok_batch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_THREADS 256

struct batch {
	struct tokenizer *t;
	struct tok_doc *docs;
	size_t n, total;
	atomic_size_t next, done;
	pthread_mutex_t lock;
	size_t first_bad; /* the lowest failing document (n: none), its error */
	struct err bad;
	struct err setup; /* a worker that could not be made */
};

struct runner {
	struct batch *b;
	int reports; /* the calling thread */
	tok_progress_fn on_done;
	void *arg;
	pthread_t th;
};

static void note_failure(struct batch *b, size_t i, const struct err *e)
{
	pthread_mutex_lock(&b->lock);
	if (i < b->first_bad) {
		b->first_bad = i;
		b->bad = *e;
	}
	pthread_mutex_unlock(&b->lock);
}

static void *encode_share(void *p)
{
	struct runner *r = p;
	struct batch *b = r->b;
	struct tok_worker *w = NULL;
	struct err e = {0};
	if (tokenizer_worker_new(b->t, &w, &e)) {
		pthread_mutex_lock(&b->lock);
		b->setup = e;
		pthread_mutex_unlock(&b->lock);
		return NULL;
	}
	for (size_t i; (i = atomic_fetch_add(&b->next, 1)) < b->n;) {
		struct tok_doc *d = &b->docs[i];
		err_clear(&e);
		if (tokenizer_encode(w, d->text, d->len, &d->ids, &e))
			note_failure(b, i, &e);
		size_t done = atomic_fetch_add(&b->done, d->len) + d->len;
		if (r->reports && r->on_done && (i & 63) == 0)
			r->on_done(r->arg, done, b->total);
	}
	tokenizer_worker_free(w);
	return NULL;
}

int tok_batch_threads(int threads)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int n = threads > 0 ? threads : cpus > 0 ? (int)cpus : 1;
	return n > MAX_THREADS ? MAX_THREADS : n;
}

int tok_batch_encode(struct tokenizer *t, struct tok_doc *docs, size_t n, int threads,
		     tok_progress_fn on_done, void *arg, size_t *failed, struct err *e)
{
	struct batch b = { .t = t, .docs = docs, .n = n, .first_bad = n };
	struct runner r[MAX_THREADS];
	int k = tok_batch_threads(threads), joined[MAX_THREADS] = {0};
	for (size_t i = 0; i < n; i++)
		b.total += docs[i].len;
	atomic_init(&b.next, 0);
	atomic_init(&b.done, 0);
	pthread_mutex_init(&b.lock, NULL);
	for (int i = 0; i < k; i++)
		r[i] = (struct runner){ &b, i == 0, on_done, arg, 0 };
	/* a thread that cannot start leaves its share to the others */
	for (int i = 1; i < k && (size_t)i < n; i++)
		joined[i] = pthread_create(&r[i].th, NULL, encode_share, &r[i]) == 0;
	encode_share(&r[0]);
	for (int i = 1; i < k && (size_t)i < n; i++)
		if (joined[i])
			pthread_join(r[i].th, NULL);
	pthread_mutex_destroy(&b.lock);
	if (on_done)
		on_done(arg, b.total, b.total);
	/* documents left over: no thread could make its worker */
	if (b.first_bad == n && atomic_load(&b.next) < n) {
		if (e)
			*e = b.setup;
		return b.setup.code;
	}
	if (b.first_bad == n)
		return ERR_OK;
	if (failed)
		*failed = b.first_bad;
	if (e)
		*e = b.bad;
	err_prefix(e, "document %zu", b.first_bad + 1);
	return b.bad.code;
}
