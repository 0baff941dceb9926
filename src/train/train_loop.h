/*
 * train_loop: the training run, a loop over the trainer (trainer.h) from step 0 (or from a
 * checkpoint) up to opts.stop_at, and the options of the protocol's three runs.
 *
 * train_run() writes a checkpoint at opts.stop_at, plus one every [train]
 * checkpoint_every steps, plus one when the env's stop flag is raised (the driver's
 * signal handler raises it; the current window is finished first; the run then returns
 * ERR_INTERRUPTED). Checkpoints are taken between windows, while no device thread runs,
 * through the runtime's atomic store (checkpoint.h describes what they hold).
 */
#ifndef DDPTOK_TRAIN_LOOP_H
#define DDPTOK_TRAIN_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include "env.h"
#include "fsx.h"
#include "memstat.h"
#include "ranks.h"
#include "train_history.h"
#include "train_runs.h"
#include "trainer.h"

/* The three runs of the protocol (and the kinds of the train command's runs). */
enum train_kind {
	TRAIN_STOP,       /* 0 -> [train] stop_at into <artifacts>/checkpoints */
	TRAIN_CONTINUOUS, /* 0 -> [train] updates into <artifacts>/continuous */
	TRAIN_RESUME,     /* checkpoint -> [train] updates into <artifacts>/checkpoints */
};

/* Fills o for one of the three runs from the settings: stop_at, checkpoint root, metrics
 * file (<outputs>/train-stop.jsonl, train-continuous.jsonl, train-resume.jsonl),
 * checkpoint_every, mode. */
int train_opts_for(const struct env *v, enum train_kind kind, const char *resume_dir,
		   struct train_opts *o, struct err *e);

/* The planned stop of a new train run: [train] stop_at when it is set (> 0) and below
 * [train] updates, else 0 (none: the run trains to updates). */
int64_t train_planned_stop(const struct settings *s);

/* Fills o for a run of the train command in plan->run_dir (train_runs.h): a new run
 * (TRAIN_STOP: to its planned stop, or to updates when there is none; TRAIN_CONTINUOUS:
 * to updates) or a resumed one (to updates); its checkpoints in the run directory, kept
 * per [train] keep; process 0 writes its metrics there (appended to, when the run
 * continues, after dropping the lines past the resumed step). */
int train_opts_in_run(const struct env *v, enum train_kind kind, const struct train_plan *plan,
		      struct train_opts *o, struct err *e);

struct train_result {
	int64_t start_step;   /* 0, or the step of the checkpoint resumed from */
	int64_t step;         /* steps done at the end */
	int64_t updates_done; /* optimizer steps (step minus skipped windows) */
	int64_t skipped;      /* empty windows skipped during this run */
	size_t n;             /* parameters */
	float *params;        /* host copies at the end, n */
	float *momentum;      /* the optimizer's state (AdamW: both moments), state_n */
	size_t state_n;
	char checkpoint[FSX_PATH_MAX]; /* the last checkpoint written (or resumed from), or "" */
	int checkpoints_written;
	double seconds;       /* wall time of the windows */
	int64_t tokens;       /* supervised tokens processed in this run */
	double tokens_per_s;
	double first_loss, last_loss; /* global token means of the first and last window */
	int interrupted;      /* stopped early by the stop flag (or on_window) */
	char backend[16];
	struct train_history hist[MAX_WORLD];
	struct train_changes changes; /* the optimizer settings changed since step 0 */
	double rank_seconds_coll[MAX_WORLD]; /* each rank's time inside collectives in this
						run's windows (waits included) */
	struct mem_usage mem;  /* this process's resident memory after the last window */
	int64_t corpus_bytes;  /* the prepared corpus's file, mapped (0: held in memory) */
};

/* Runs the training described by o. On ERR_INTERRUPTED res is filled as for a normal end
 * (res->checkpoint names the checkpoint just written). On other errors res holds nothing
 * to free beyond what train_result_free releases. */
int train_run(const struct env *v, const struct train_opts *o, struct train_result *res,
	      struct err *e);
void train_result_free(struct train_result *r);

/* Largest |a[i] - b[i]| and the count of elements whose bits differ. */
double train_max_abs_diff(const float *a, const float *b, size_t n, size_t *n_differ);

/* The checkpoint roots: <artifacts>/checkpoints and <artifacts>/continuous. */
int train_ckpt_root(const struct env *v, int continuous, char *out, size_t cap, struct err *e);

#endif
