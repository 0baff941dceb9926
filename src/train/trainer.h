/*
 * trainer: one training run held open, stepped by train_run's loop (train_loop.h) or by
 * inspect's `step` by hand, so that a window is trained, counted and logged one way
 * only. A step is one accumulation window: the sampler draws it, the engine runs it on
 * every rank and applies one SGD-with-momentum update to every replica. A window the
 * engine rejects because it holds no supervised token still consumes its window index
 * and counts as a step, with no update (train.empty_window = skip); with empty_window =
 * error the run stops with ERR_EMPTY naming the window. Checkpoints (checkpoint.h) are
 * taken between windows, while no device thread runs.
 */
#ifndef DDPTOK_TRAINER_H
#define DDPTOK_TRAINER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "checkpoint.h"
#include "engine.h"
#include "env.h"
#include "fsx.h"
#include "ranks.h"
#include "run.h"
#include "shard.h"
#include "train_history.h"
#include "validation.h"

/* What a trainer is opened with (train_opts_for fills it for the protocol's runs,
 * train_loop.h). mode = TRAIN_MODE_ANY: the resumed checkpoint's normalization. */
#define TRAIN_MODE_ANY (-1)

struct train_opts {
	int64_t stop_at;            /* stop (and checkpoint) after this many steps in total (a
				       trainer stepped by hand, as inspect does: 0, no end) */
	const char *resume_dir;     /* NULL: start from the seeded initial parameters */
	char ckpt_root[FSX_PATH_MAX];    /* "" : write no checkpoint at all */
	char metrics_path[FSX_PATH_MAX]; /* "" : no metrics file (JSONL, one line per window) */
	int checkpoint_every;       /* extra checkpoints every n steps (0: none) */
	int keep;                   /* keep the newest this many checkpoints of ckpt_root (0:
				       all; train_runs.h) */
	int run_dir;                /* ckpt_root is a run directory of train_runs.h: each
				       checkpoint also points runs/latest to it */
	int metrics_append;         /* append to metrics_path (a continued run) */
	int allow_gemm_change;      /* a resume may go on under another GEMM implementation
				       than its checkpoint's (recorded as a change) */
	int mode;                   /* normalization (enum norm_mode); TRAIN_MODE_ANY: that of
				       the resumed checkpoint (else the configured one) */
	/* called after every window (may be NULL); a non-zero return stops the run with that
	 * code after checkpointing, like a signal would (tests use it) */
	int (*on_window)(void *arg, int64_t step, const struct window_result *wr);
	void *on_window_arg;
	/* called with the checkpoint loaded from resume_dir and the engine that holds its
	 * state, before the run checks its machine and starts from it (may be NULL; a
	 * testing aid alters them there) */
	void (*on_resume)(void *arg, struct checkpoint *ck, struct engine *eng);
	void *on_resume_arg;
	/* train_run's result leaves params and momentum NULL: no host copy of the final
	 * state, which only the comparisons of resumed runs read (train sets it) */
	int no_final_state;
};

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
	struct train_val val;      /* the newest validation loss ([train] eval_every) */
	struct train_history hist[MAX_WORLD];
	struct train_history shard_hist[SHARD_MAX]; /* exact mode: per shard (elastic.h) */
	struct train_changes changes; /* the optimizer settings changed since step 0, the
					 resume's own changes included */
	/* since it was opened */
	int64_t skipped;           /* empty windows skipped */
	double rank_seconds_coll[MAX_WORLD]; /* each rank's time inside collectives */
	int64_t tokens;            /* supervised tokens */
	double seconds;            /* wall time inside the windows */
	double first_loss;         /* loss of the first accepted window (NaN: none) */
	double opened_at;          /* clock_now_s() when it was opened */
	FILE *metrics;             /* o.metrics_path, while steps remain before o.stop_at */
};

/* Opens the trainer: the prepared corpus (built when missing; when starting afresh also
 * rebuilt when it was prepared for other [data] settings), the checkpoint o->resume_dir
 * verified against this configuration and corpus (CHECKPOINT_CHECK_ALL; its normalization must
 * be o->mode unless that is TRAIN_MODE_ANY; its step not past a non-zero o->stop_at), the
 * engine with that state (or the seeded one), both handed to o->on_resume, the checkpoint
 * root made ready and the metrics file created (or appended to). The optimizer's keys
 * (KEY_OPTIM) may differ from the checkpoint's: each change is printed and added to
 * t->changes, which every later checkpoint records. Close it with trainer_close, also
 * after a failure. */
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
 * when cap > 0) and remembers it in t->checkpoint; then, in a run directory, removes the
 * checkpoints past o.keep and points runs/latest to it. Call it between steps only. Windows of
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

#endif
