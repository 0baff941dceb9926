/*
 * train_runs: the run directories of the train command, so that runs never overwrite each
 * other. Each run started by `train` gets <artifacts>/runs/<id>/ (id: the UTC start time,
 * 20260131-123456, with -2, -3, ... when taken), holding its checkpoints step-NNNN, its
 * metrics.jsonl (one line per window) and train.json (the summary of its last session).
 * <artifacts>/runs/latest is a symbolic link to the run started or continued last (set when
 * its directory is made, so before its first checkpoint, and given back to the run before
 * when a new run ends without one), replaced atomically (a new link
 * renamed over it). When it is missing (a crash before the rename), names no run or is not
 * a link, `latest` is the run with the newest valid checkpoint.
 *
 * Resuming the newest valid checkpoint of a run continues that run: its checkpoints go on
 * in the same directory and its metrics are appended (lines past the resumed step, left
 * by a run killed between checkpoints, are dropped first). Resuming any other checkpoint
 * (an older one, the protocol's, inspect's) starts a new run. The protocol's three runs
 * keep their own directories (train_loop.h).
 */
#ifndef DDPTOK_TRAIN_RUNS_H
#define DDPTOK_TRAIN_RUNS_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "env.h"
#include "fsx.h"
#include "outputs.h" /* the names: artifacts_table[ART_RUNS], OUTPUT_RUN_* */


/* What the train command runs, decided by process 0 and shared with the others. */
struct train_plan {
	char resume[FSX_PATH_MAX];  /* the checkpoint to resume from, "" for a new run */
	int64_t resume_step;        /* its step */
	int from_dir;               /* resume was chosen as the newest valid checkpoint of a
				       directory (or of the latest run) */
	char run_dir[FSX_PATH_MAX]; /* the run directory (made by train_plan_run) */
	int continues;              /* run_dir is the resumed checkpoint's own run */
	char latest_before[NAME_MAX + 1]; /* the run runs/latest named before, "" none */
};

/* <artifacts>/runs. */
int train_runs_root(const struct env *v, char *out, size_t cap, struct err *e);

/* Resolves `spec` into plan->resume and plan->resume_step: "latest" (the newest valid
 * checkpoint of the run runs/latest names), a checkpoint, or a directory of checkpoints
 * (its newest valid one; a run directory is one). NULL: "latest" when there is a run,
 * else nothing (plan->resume ""; "latest" without any run is ERR_DATA). Each checkpoint
 * is verified once on the way. On process 0 only. */
int train_plan_resume(const struct env *v, const char *spec, struct train_plan *plan,
		      struct err *e);

/* Chooses plan->run_dir: the resumed checkpoint's run when it is that run's newest valid
 * checkpoint (plan->continues), else a new run directory, created. On process 0 only. */
int train_plan_run(const struct env *v, struct train_plan *plan, struct err *e);

/* A new run that ends (failed, diverged or interrupted) before its first checkpoint:
 * `latest`, which named it from its start, names again the run it named before (gone:
 * the newest complete run; none: no link), so that the last good checkpoint stays
 * latest; its directory goes when still empty (and <artifacts>/runs with it when that
 * leaves it empty): anything holding a file stays. Nothing for a continued run or one
 * that wrote a checkpoint. On process 0 only. */
void train_runs_give_back(const struct env *v, const struct train_plan *plan);

/* Points runs/latest to run_dir's run (a link renamed over the old one). A directory in
 * the link's place is left as it is, with a note. */
int train_runs_mark_latest(const struct env *v, const char *run_dir, struct err *e);

/* The run directory under root whose newest checkpoint was written last and is valid
 * (the store's verification), or "" when no run has one: `latest` when the link is lost.
 * found (may be NULL): that checkpoint, its step and from_dir = 1. */
int train_runs_newest_complete(const char *root, char *out, size_t cap,
			       struct train_plan *found, struct err *e);

/* Removes the checkpoints of run_dir older than the `keep` newest (the newest is step
 * `newest`, never removed; nor is any step directory that holds anything the store did
 * not write). The removed ones go to the debug log, their count to *removed (may be
 * NULL). */
int train_runs_prune(const struct env *v, const char *run_dir, int keep, int64_t newest,
		     int *removed, struct err *e);

/* Finishes the pruning a run killed after publishing a checkpoint did not do: the latest
 * run keeps the train.keep it was trained with, counted from its newest valid checkpoint
 * (verified only when it holds more than that). Never the run of checkpoint `resumed`
 * ("" none): its own pruning follows its next checkpoint. Housekeeping: a failure is a
 * note, never the run's. Run when train has chosen what it resumes, on process 0. */
void train_runs_prune_latest(const struct env *v, const char *resumed);

/* Drops the lines of a metrics file whose step is past `step` (rewritten atomically, only
 * when there are some). A missing file is fine. */
int train_runs_trim_metrics(const char *path, int64_t step, struct err *e);

/* When checkpoint dir lies in a run directory of v's: 1 with the run's id in id[]. */
int train_runs_id_of(const struct env *v, const char *ckpt, char *id, size_t cap);

#endif
