/*
 * checkpoint: the content of a training checkpoint, written between two windows and read
 * back by resume, evaluate and inspect. The atomic file store underneath, which knows no
 * content, is runtime/ckpt.h; checkpoint_write is the only writer of this format, so
 * equal states give byte-identical files.
 *
 * A checkpoint step-NNNN holds:
 *
 *   params.npy                 flat float32 vector (layout in state.json)
 *   momentum.npy               train.optimizer = sgd: the momentum buffer, flat float32
 *   exp_avg.npy, exp_avg_sq.npy  adamw: the first and second moments, flat float32
 *                              (which optimizer: train.optimizer of config.ini)
 *   config.ini                 the full resolved configuration
 *   data.lock                  the data lock of the corpus it was trained on (JSON)
 *   state.json                 step, updates_done, sampler rng (4 x 64-bit hex) and window
 *                              index, normalization, backend, machine (the GEMM, its
 *                              build and kernels, or GPU model and library versions), on
 *                              the cpu backend "gemm" (gemm.h's implementation), world,
 *                              parameter layout; in exact mode "exact": shards, shard order and a
 *                              history per shard (elastic.h); "changes" (only when
 *                              there are some): the optimizer settings resumes changed,
 *                              each with its step (train_history.h)
 *   rank-R.json                one per rank: rank, device, backend, rng (null: the ranks
 *                              draw no random numbers in this model), history (windows,
 *                              sequences and supervised tokens that rank processed, and
 *                              the windows declined for want of a token: updates_done is
 *                              step minus those; train_history.h)
 *
 * Nothing in a checkpoint depends on the time or the machine beyond the backend and the
 * machine record, so the final checkpoints of a continuous and of a stopped-and-resumed
 * run are byte-identical (in exact mode also when the resumed run has another world).
 *
 * Loading a checkpoint (resume, evaluate, inspect) refuses, each with its own ERR_DATA
 * message: a checkpoint that fails verification (missing manifest, missing, truncated or
 * altered file), a configuration whose math keys differ from the stored config.ini, a
 * corpus whose data lock differs from the stored one, another normalization, another
 * optimizer (its state cannot become another's), or content that does not fit the model
 * (wrong parameter count, missing rank file) or that no run could train on (a NaN or
 * infinity in any tensor, a negative AdamW second moment, an updates_done its histories
 * contradict), naming the file and the tensor. devices.world
 * (and with it train.accumulation) may differ in exact mode only; there an exact-mode
 * checkpoint of another backend is refused too (elastic.h). The optimizer's keys
 * (KEY_OPTIM) may differ when the caller allows it (a resumed train run): the loaded
 * checkpoint then lists them as changes.
 */
#ifndef DDPTOK_CHECKPOINT_H
#define DDPTOK_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "corpus.h"
#include "elastic.h"
#include "env.h"
#include "fsx.h"
#include "ranks.h"
#include "run.h"
#include "sampler.h"
#include "train_history.h"

#define TRAIN_STATE_FORMAT "ddptok-train-state-2"
/* Bounds a checkpoint's numbers must respect (the configuration's own limits:
 * train.updates; the largest model; a window's, train_history.h): anything past them is
 * damage, refused before it can overflow a count. */
#define TRAIN_MAX_STEP 1000000
#define TRAIN_MAX_PARAMS (1LL << 31)

struct checkpoint_tensors; /* checkpoint_tensors.h */

/* A checkpoint as the trainer reads it back. */
struct checkpoint {
	char dir[FSX_PATH_MAX];
	int64_t step, updates_done;
	struct sampler_state sampler;
	int world;
	int normalization;
	char backend[16];
	char lock[65];
	double last_loss;
	size_t n;
	int optimizer;     /* enum optim_kind: train.optimizer of its config.ini */
	float *params;     /* n, read by checkpoint_load_model only (else NULL): the other
			      loads keep no host copy of the tensors */
	struct checkpoint_tensors *tensors; /* what the tensor files hold, read from them
					       again by checkpoint_open_run and
					       checkpoint_read_vector */
	struct train_history hist[MAX_WORLD];
	struct elastic_record elastic; /* the machine, and exact mode's shards (elastic.h) */
	struct train_changes changes;  /* the optimizer settings its run changed so far */
	struct train_changes changed;  /* with CHECKPOINT_CHECK_OPTIM_MAY_CHANGE: the ones the
					  current configuration changes (at ck->step), and
					  train.updates under a cosine or linear schedule */
	double stored_next_lr;         /* the rate of its next update under its own settings */
	int vocab;                     /* its model's vocabulary (its config.ini's, or what
					  makes its parameter count for a file source's) */
};

enum checkpoint_checks {
	CHECKPOINT_CHECK_CONFIG = 1, /* math keys of a->cfg against the stored config.ini */
	CHECKPOINT_CHECK_DATA = 2,   /* the stored data lock against corpus c */
	CHECKPOINT_CHECK_ALL = 3,
	/* with CHECKPOINT_CHECK_CONFIG: [train] normalization may differ (the interactive mode
	 * continues with the checkpoint's own) */
	CHECKPOINT_CHECK_ANY_NORMALIZATION = 4,
	/* the model's shape (vocab, context, embed, hidden, parameter count) against a->cfg;
	 * implied by CHECKPOINT_CHECK_CONFIG */
	CHECKPOINT_CHECK_SHAPE = 8,
	/* with CHECKPOINT_CHECK_CONFIG: the optimizer's keys (KEY_OPTIM) may differ; the
	 * differences go to ck->changed */
	CHECKPOINT_CHECK_OPTIM_MAY_CHANGE = 16,
};

/* Whether checkpoint dir holds a model of the current configuration's model.kind and
 * shape keys (its config.ini against v's): checked first, so that a checkpoint of another
 * model is refused as such (ERR_DATA) before its step, its data or its corpus are. */
int checkpoint_check_model(const struct env *v, const char *dir, struct err *e);

/* Verifies and reads checkpoint dir for a command that needs its parameters only (export,
 * sample), with the settings it was trained with (its config.ini) into *s, their vocab its
 * model's: no corpus, nothing of the current configuration. The parameters are read
 * into ck->params. */
int checkpoint_load_model(const struct env *v, const char *dir, struct checkpoint *ck,
			  struct settings *s, struct err *e);

/* An integer key of the configuration checkpoint dir was trained with (its config.ini). */
int checkpoint_stored_int(const char *dir, const char *section, const char *name,
			  long long *out, struct err *e);

/* Verifies and reads checkpoint `dir`. Always verifies the store (manifest, sizes,
 * digests) and the content (state.json, params and state shaped like a->s's model, one
 * rank file per rank); `checks` adds the comparisons above (c may be NULL without
 * CHECKPOINT_CHECK_DATA). Every refusal is ERR_DATA with a message naming the checkpoint and
 * what differs. The tensors are digested once and scanned on the way, a chunk at a time
 * (checkpoint_tensors.h): the host holds no copy of them. Free with checkpoint_free (also
 * after a failure). */
int checkpoint_load(const struct env *v, const char *dir, const struct corpus *c,
		    unsigned checks, struct checkpoint *ck, struct err *e);
void checkpoint_free(struct checkpoint *ck);

/* Vector vec (ENGINE_VEC_PARAMS, or the optimizer's state vector vec) of loaded checkpoint
 * ck into host (ck->n floats), read again from its verified file (ERR_DATA if that changed
 * since). */
int checkpoint_read_vector(const struct checkpoint *ck, int vec, float *host, struct err *e);

/* Opens a run on the prepared corpus c (taken, as run_open_corpus does) with the state ck
 * holds: params, optimizer state, updates_done and the sampler's (a checkpoint of another
 * optimizer, loaded without CHECKPOINT_CHECK_CONFIG to be evaluated, leaves the engine's
 * state at zero). The tensors go from their files to the ranks a chunk at a time
 * (engine_set_range), read again from the files checkpoint_load verified; a file changed
 * since is ERR_DATA. On failure nothing is left open. */
int checkpoint_open_run(const struct env *v, const struct checkpoint *ck, struct run *r,
			struct corpus *c, struct err *e);

/* What a checkpoint is written from: a run between two windows and what was counted
 * along it. */
struct checkpoint_source {
	const struct env *v;
	const struct run *r;       /* its corpus, sampler and engine */
	int64_t step;              /* steps done, rejected windows included */
	int run_mode;              /* the normalization every window so far used */
	double last_loss;          /* global token mean of the last accepted window (NaN: none) */
	const struct train_history *hist;       /* per rank, the engine's world of them */
	const struct train_history *shard_hist; /* exact mode: per shard */
	const struct train_changes *changes;    /* the run's changed settings (may be NULL) */
};

/* Writes checkpoint <root>/step-NNNN (NNNN = t->step) of t through the atomic store; its
 * directory goes to out. Parameters or optimizer state holding NaN or infinity are
 * refused first (ERR_NONFINITE naming the step, the update, the file and the first bad
 * tensor), with nothing written: a checkpoint is always one a run can train on. The
 * parameters and the optimizer's state are read from the engine a chunk at a time
 * (engine_get_range), once for that scan and once to write them, so the host never holds
 * a copy of them. Every process calls it (the sharded state is gathered from all);
 * process 0 writes, the others return ERR_OK, or the engine's failure. */
int checkpoint_write(const struct checkpoint_source *t, const char *root, char *out,
		     size_t cap, struct err *e);

#endif
