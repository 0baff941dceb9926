/*
 * train: the training loop, its checkpoints and the resume that continues bit for bit.
 *
 * A step is one accumulation window: the sampler draws it, the engine runs it on every
 * rank and applies one SGD-with-momentum update to every replica. A window the engine
 * rejects because it holds no supervised token still consumes its window index and counts
 * as a step, with no update (train.empty_window = skip); with empty_window = error the
 * run stops with ERR_EMPTY naming the window.
 *
 * A step is taken in one place, trainer_step() (a trainer is one run held open: see
 * struct trainer below and trainer.c); train_run() is a loop over it, and inspect steps
 * the same trainer by hand.
 *
 * train_run() runs from step 0 (or from a checkpoint) up to opts.stop_at and writes a
 * checkpoint there, plus one every [train] checkpoint_every steps, plus one when the env's
 * stop flag is raised (the driver's signal handler raises it; the current window is
 * finished first; the run then returns ERR_INTERRUPTED). Checkpoints are taken
 * between windows, while no device thread runs, through the runtime's atomic store
 * (runtime/ckpt.h). A checkpoint step-NNNN holds:
 *
 *   params.npy, momentum.npy   flat float32 vectors (layout in state.json)
 *   config.ini                 the full resolved configuration
 *   data.lock                  the data lock of the corpus it was trained on (JSON)
 *   state.json                 step, updates_done, sampler rng (4 x 64-bit hex) and window
 *                              index, normalization, backend, machine (BLAS build and
 *                              core, or GPU model and library versions), world, parameter
 *                              layout; in exact mode "exact": shards, shard order and a
 *                              history per shard (elastic.h)
 *   rank-R.json                one per rank: rank, device, backend, rng (null: the ranks
 *                              draw no random numbers in this model), history (windows,
 *                              sequences and supervised tokens that rank processed, and
 *                              the windows declined for want of a token: updates_done is
 *                              step minus those)
 *
 * Nothing in a checkpoint depends on the time or the machine beyond the backend and the
 * machine record, so the final checkpoints of a continuous and of a stopped-and-resumed
 * run are byte-identical (in exact mode also when the resumed run has another world).
 *
 * Loading a checkpoint (resume, evaluate, inspect) refuses, each with its own ERR_DATA
 * message: a checkpoint that fails verification (missing manifest, missing, truncated or
 * altered file), a configuration whose math keys differ from the stored config.ini, a
 * corpus whose data lock differs from the stored one, another normalization, or content
 * that does not fit the model (wrong parameter count, missing rank file). devices.world
 * (and with it train.accumulation) may differ in exact mode only; there an exact-mode
 * checkpoint of another backend is refused too (elastic.h).
 *
 * The corpus used for training is the prepared one in <outputs>/corpus (corpus_save /
 * corpus_load); train_corpus() builds and saves it first when it is missing (see there).
 */
#ifndef DDPTOK_TRAIN_H
#define DDPTOK_TRAIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engine.h"
#include "env.h"
#include "fsx.h"
#include "sampler.h"
#include "run.h"
#include "shard.h"

#define TRAIN_STATE_FORMAT "ddptok-train-state-2"
/* Bounds a checkpoint's numbers must respect (the configuration's own limits: train.updates,
 * train.accumulation x train.batch_size, data.max_len; the largest model): anything past them
 * is damage, refused before it can overflow a count. */
#define TRAIN_MAX_STEP 1000000
#define TRAIN_MAX_WINDOW_SEQUENCES (64 * 4096)
#define TRAIN_MAX_WINDOW_TOKENS (64LL * 4096 * 4096)
#define TRAIN_MAX_PARAMS (1LL << 31)

/* The three runs of the protocol. */
enum train_kind {
	TRAIN_STOP,       /* 0 -> [train] stop_at into <artifacts>/checkpoints */
	TRAIN_CONTINUOUS, /* 0 -> [train] updates into <artifacts>/continuous */
	TRAIN_RESUME,     /* checkpoint -> [train] updates into <artifacts>/checkpoints */
};

struct checkpoint;

#define TRAIN_MODE_ANY (-1)

struct train_opts {
	int64_t stop_at;            /* stop (and checkpoint) after this many steps in total (a
				       trainer stepped by hand, as inspect does: 0, no end) */
	const char *resume_dir;     /* NULL: start from the seeded initial parameters */
	char ckpt_root[FSX_PATH_MAX];    /* "" : write no checkpoint at all */
	char metrics_path[FSX_PATH_MAX]; /* "" : no metrics file (JSONL, one line per window) */
	int checkpoint_every;       /* extra checkpoints every n steps (0: none) */
	int mode;                   /* normalization (enum norm_mode); TRAIN_MODE_ANY: that of
				       the resumed checkpoint (else the configured one) */
	/* called after every window (may be NULL); a non-zero return stops the run with that
	 * code after checkpointing, like a signal would (tests use it) */
	int (*on_window)(void *arg, int64_t step, const struct window_result *wr);
	void *on_window_arg;
	/* called on the state loaded from resume_dir before the run starts from it (may be
	 * NULL; a testing aid alters it there) */
	void (*on_resume)(void *arg, struct checkpoint *ck);
	void *on_resume_arg;
};

/* Fills o for one of the three runs from the settings: stop_at, checkpoint root, metrics
 * file (<outputs>/train-stop.jsonl, train-continuous.jsonl, train-resume.jsonl),
 * checkpoint_every, mode. */
int train_opts_for(const struct env *v, enum train_kind kind, const char *resume_dir,
		   struct train_opts *o, struct err *e);

struct train_history {
	int64_t windows;   /* windows this rank took part in (rejected ones included) */
	int64_t sequences; /* sequences it computed */
	int64_t tokens;    /* supervised tokens it computed */
	int64_t declined;  /* of those windows, the ones without a token on any rank, declined
			    * by every rank together (no update): the same count on every rank */
};

/* Adds one window to the per-rank histories (hist[0..w->world-1]): the trainer counts
 * every window that is a step, rejected (empty) ones included (declined: it was one). */
void train_history_add(struct train_history *hist, const struct window *w, int declined);

/* A history as a checkpoint stores it (a JSON object: windows, sequences, tokens,
 * declined) into out; -1 if a count is missing, negative, or declined > windows. */
int train_history_parse(const void *json_obj, struct train_history *out);

/* Whether a history fits a checkpoint of `step` steps: every rank (and shard) takes part
 * in every window, and what a window holds is bounded. */
int train_history_fits(const struct train_history *h, int64_t step);

struct train_result {
	int64_t start_step;   /* 0, or the step of the checkpoint resumed from */
	int64_t step;         /* steps done at the end */
	int64_t updates_done; /* optimizer steps (step minus skipped windows) */
	int64_t skipped;      /* empty windows skipped during this run */
	size_t n;             /* parameters */
	float *params;        /* host copies at the end, n each */
	float *momentum;
	char checkpoint[FSX_PATH_MAX]; /* the last checkpoint written (or resumed from), or "" */
	int checkpoints_written;
	double seconds;       /* wall time of the windows */
	int64_t tokens;       /* supervised tokens processed in this run */
	double tokens_per_s;
	double first_loss, last_loss; /* global token means of the first and last window */
	int interrupted;      /* stopped early by the stop flag (or on_window) */
	char backend[16];
	struct train_history hist[MAX_WORLD];
	double rank_seconds_coll[MAX_WORLD]; /* each rank's time inside collectives in this
						run's windows (waits included) */
};

/* Runs the training described by o. On ERR_INTERRUPTED res is filled as for a normal end
 * (res->checkpoint names the checkpoint just written). On other errors res holds nothing
 * to free beyond what train_result_free releases. */
int train_run(const struct env *v, const struct train_opts *o, struct train_result *res,
	      struct err *e);
void train_result_free(struct train_result *r);

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
int train_corpus(const struct env *v, enum corpus_use use, struct corpus *c, struct err *e);

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
	float *params, *momentum;
	struct train_history hist[MAX_WORLD];
	char machine[512];   /* what the bits depended on (elastic.h), or "unrecorded" */
	int shards;          /* exact mode's K, 0 outside it */
	struct train_history shard_hist[SHARD_MAX]; /* exact mode: per shard (elastic.h) */
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
};

/* Verifies and reads checkpoint `dir`. Always verifies the store (manifest, sizes,
 * digests) and the content (state.json, params/momentum shaped like a->s's model, one
 * rank file per rank); `checks` adds the comparisons above (c may be NULL without
 * CHECKPOINT_CHECK_DATA). Every refusal is ERR_DATA with a message naming the checkpoint and
 * what differs. Free with checkpoint_free (also after a failure). */
int checkpoint_load(const struct env *v, const char *dir, const struct corpus *c,
		    unsigned checks, struct checkpoint *ck, struct err *e);
void checkpoint_free(struct checkpoint *ck);

/* Opens a run on the prepared corpus and, when ck is not NULL, loads its state (params,
 * momentum, updates_done, sampler). */
int train_open(const struct env *v, struct run *r, struct corpus *c, const struct checkpoint *ck,
	       struct err *e);

/* ---- the trainer: one run held open, stepped by train_run's loop or by inspect ---- */

struct trainer {
	const struct env *v;
	struct train_opts o;       /* what it was opened with */
	struct run r;              /* corpus, sampler, engine; r.w: train_run's window buffer */
	int have_run;
	int mode;                  /* the normalization of the next windows */
	int run_mode;              /* the one every window so far used, the resumed checkpoint's
				      included (a checkpoint records it); -1: none yet; -2: several */
	int resume_mode;           /* the resumed checkpoint's normalization, or -1 */
	int64_t step;              /* steps done, rejected windows included */
	int64_t start_step;        /* 0, or the step of the checkpoint resumed from */
	int64_t last_ckpt_step;    /* step of the last checkpoint written or resumed from; -1 */
	char checkpoint[FSX_PATH_MAX]; /* that checkpoint, or "" */
	int checkpoints_written;
	int stop_agreed;           /* several processes: the stop reason they agreed on before
				      the current window (0: none) */
	double last_loss;          /* global token mean of the last accepted window (NaN: none) */
	struct train_history hist[MAX_WORLD];
	struct train_history shard_hist[SHARD_MAX]; /* exact mode: per shard (elastic.h) */
	/* since it was opened */
	int64_t skipped;           /* empty windows skipped */
	double rank_seconds_coll[MAX_WORLD]; /* each rank's time inside collectives */
	int64_t tokens;            /* supervised tokens */
	double seconds;            /* wall time inside the windows */
	double first_loss;         /* loss of the first accepted window (NaN: none) */
	double opened_at;          /* clock_now_s() when it was opened */
	float *params, *momentum;  /* host scratch for checkpoints, n_params each */
	FILE *metrics;             /* o.metrics_path, while steps remain before o.stop_at */
};

/* Opens the trainer: the prepared corpus (built when missing; when starting afresh also
 * rebuilt when it was prepared for other [data] settings), the checkpoint o->resume_dir
 * verified against this configuration and corpus (CHECKPOINT_CHECK_ALL; its normalization must
 * be o->mode unless that is TRAIN_MODE_ANY; its step not past a non-zero o->stop_at) and
 * handed to o->on_resume, the engine with that state (or the seeded one), the checkpoint
 * root made ready and the metrics file created. Close it with trainer_close, also after
 * a failure. */
int trainer_open(struct trainer *t, const struct env *v, const struct train_opts *o,
		 struct err *e);
/* One step: draws the next window into w, runs it on every rank under t->mode with the
 * update (flags may add ENGINE_CAPTURE_LOCAL), and records it: step counter, per-rank
 * histories, last loss, normalization in force, totals and a metrics line. A window with
 * no supervised token is a step without update under train.empty_window = skip; under
 * error it is ERR_EMPTY and nothing is consumed (the sampler is back where it was). Any
 * other error comes from the engine or the metrics file. */
int trainer_step(struct trainer *t, struct window *w, int flags, struct window_result *wr,
		 struct err *e);
/* Agrees with the other processes, between windows, on whether to stop (any process's
 * SIGINT/SIGTERM stops all); nothing to do in a world of one. */
int trainer_agree_stop(struct trainer *t, struct err *e);
/* The reason to stop (0: none): the stop flag, or with several processes the reason they
 * last agreed on, so that every process stops at the same window boundary. */
int trainer_stop_reason(const struct trainer *t);
/* Writes checkpoint <root>/step-NNNN of the current step (its directory also goes to out,
 * when cap > 0) and remembers it in t->checkpoint. Call it between steps only. Windows of
 * several normalizations cannot be checkpointed (ERR_USAGE): a checkpoint records one.
 * With several processes process 0 writes it and the others share its result. */
int trainer_checkpoint(struct trainer *t, const char *root, char *out, size_t cap,
		       struct err *e);
/* Whether a run with options o checkpoints after `step`: at o->stop_at and every
 * o->checkpoint_every steps, when it has a checkpoint root. */
int train_ckpt_due(const struct train_opts *o, int64_t step);
/* Releases everything; ERR_IO (in e, when not NULL) when the metrics file could not be
 * completed. */
int trainer_close(struct trainer *t, struct err *e);

/* Writes checkpoint <root>/step-NNNN (NNNN = t->step) of t, whose t->params and
 * t->momentum hold the engine's state, through the atomic store; its directory goes to
 * out. This is the only writer of the format, so equal states give byte-identical files. */
int checkpoint_write(const struct trainer *t, const char *root, char *out, size_t cap,
			   struct err *e);

/* ---- evaluation ---- */

struct train_split_eval {
	int64_t sequences, tokens, hits;
	double loss_sum;
	double loss;        /* loss_sum / tokens: the global token mean */
	double accuracy;    /* hits / tokens */
	int64_t const_hits; /* positions whose target is the best constant guess */
	double const_accuracy;
};

struct train_eval {
	char checkpoint[FSX_PATH_MAX];
	int64_t step;
	int const_id;       /* most frequent target id of the training split */
	char backend[8];    /* the backend the evaluation ran on */
	struct train_split_eval test, validation;
	struct {            /* when the newest checkpoint was looked for: the newer ones of
			       each root that failed verification and were passed over */
		int count;
		char root[FSX_PATH_MAX];
	} skipped[2];
};

/* Evaluates checkpoint dir (NULL: the newest valid one of <artifacts>/checkpoints and
 * continuous), after checking its model shape and data lock against this configuration.
 * Logs nothing: what the caller shows is in ev. */
int train_evaluate(const struct env *v, const char *dir, struct train_eval *ev, struct err *e);
/* The most frequent supervised target id of a split (ties: the smallest id) and how many
 * supervised positions of `split2` have it as target. */
int train_const_guess(const struct corpus *c, int split, int split2, int64_t *hits2);

/* Largest |a[i] - b[i]| and the count of elements whose bits differ. */
double train_max_abs_diff(const float *a, const float *b, size_t n, size_t *n_differ);

/* The checkpoint roots: <artifacts>/checkpoints and <artifacts>/continuous. */
int train_ckpt_root(const struct env *v, int continuous, char *out, size_t cap, struct err *e);

#endif
