/*
 * run: what a computing command opens: the corpus, the sampler, the engine with the
 * seeded initial parameters, and a window buffer. Shared by reference, parity,
 * exercise, train, inspect and bench so they all start from the same state. The engine
 * is the env's keep's when it has one (engine_keep.h), reset, else a new one.
 *
 * The commands that train or read checkpoints (train, inspect, evaluate) work on the
 * prepared corpus in <outputs>/corpus (corpus_save / corpus_load): run_corpus() builds
 * and saves it first when it is missing (see there).
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
	float *init_params; /* host, the seeded initial parameters: NULL until
			       run_init_params makes them */
	const char *init_converted; /* the dtype model.init's weights were converted to
				       float32 from ("BF16", "F16"), or NULL */
	int have_corpus, have_sampler, have_window;
};

int run_open(const struct env *v, struct run *r, struct err *e);
/* Same, on a corpus the caller already has (e.g. loaded from disk): *c is moved into the
 * run (and zeroed), which frees it in run_close, also when opening fails. */
int run_open_corpus(const struct env *v, struct run *r, struct corpus *c, struct err *e);
void run_close(struct run *r);
/* The run's first parameters (seeded, and model.init's), made on the first call and kept
 * until run_close; NULL with e set when they cannot be made. */
const float *run_init_params(struct run *r, struct err *e);
/* What a command needs of the prepared corpus, and what it may write. */
enum corpus_use {
	CORPUS_TRAIN,  /* a new run: built and saved when missing, rebuilt when it was built
			* with other [data] parameters */
	CORPUS_RESUME, /* a resume: the checkpoint's corpus, never rebuilt for other
			* parameters; a missing synthetic one drawn again and saved */
	CORPUS_READ,   /* evaluate, which may run beside a writer: nothing written; a missing
			* synthetic corpus is drawn in memory */
};

/* The corpus for training: <outputs>/corpus loaded (and checked against its lock), its
 * data.lock written again when missing or not describing corpus.bin (CORPUS_READ: only
 * said). When corpus.bin is missing it is built from the configuration (saved unless
 * CORPUS_READ), except, for a resume or evaluate, from the user's files (ERR_DATA: they
 * may have changed). When its [data] parameters are not those of the configuration:
 * rebuilt and saved for CORPUS_TRAIN, otherwise refused (a checkpoint needs the corpus it
 * was trained on). */
int run_corpus(const struct env *v, enum corpus_use use, struct corpus *c, struct err *e);

/* The JSON layout (a json_t * array) of the tensors of a flat parameter-shaped vector:
 * name, shape, offset and count of each, in the model's tensor order, for summaries. */
void *run_layout_json(const struct model_shape *m);

#endif
