/*
 * run: what a computing command opens: the corpus, the sampler, the engine with the
 * seeded initial parameters, and a window buffer. Shared by reference, parity,
 * exercise, train, inspect and bench so they all start from the same state. The engine
 * is the env's keep's when it has one (engine_keep.h), reset, else a new one.
 */
#ifndef DDPTOK_RUN_H
#define DDPTOK_RUN_H

#include "engine.h"
#include "env.h"
#include "sampler.h"

struct run {
	struct corpus corpus;
	struct sampler sampler;
	struct engine *eng;
	struct engine_keep *keep; /* where eng came from (NULL: its own) */
	struct window w;
	float *init_params; /* host, the seeded initial parameters */
	int have_corpus, have_sampler, have_window;
};

int run_open(const struct env *v, struct run *r, struct err *e);
/* Same, on a corpus the caller already has (e.g. loaded from disk): *c is moved into the
 * run (and zeroed), which frees it in run_close, also when opening fails. */
int run_open_corpus(const struct env *v, struct run *r, struct corpus *c, struct err *e);
void run_close(struct run *r);
/* The JSON layout (a json_t * array) of the tensors of a flat parameter-shaped vector:
 * name, shape, offset and count of each, in the model's tensor order, for summaries. */
void *run_layout_json(const struct model_shape *m);

#endif
