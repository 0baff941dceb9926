/*
 * progress: when a training run says where it is, and the line it says it with.
 *
 * On a terminal the line is live: redrawn after every step (env_progress). Anywhere else
 * (a pipe, nohup, a batch system's log) a redrawn line would be lost, so the run prints
 * whole lines instead: one every [run] log_every steps, every step at log_level = debug;
 * log_every = 0 spreads about PROGRESS_LINES lines over the run and never lets more than
 * PROGRESS_MAX_GAP_S seconds pass without one. The first and the last step of a run are
 * always shown. The policy is a pure function of the step and the clock (progress_due), so
 * that a test can pin it down.
 */
#ifndef DDPTOK_PROGRESS_H
#define DDPTOK_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

#include "env.h"

#define PROGRESS_LINES 20        /* lines per run when [run] log_every = 0 */
#define PROGRESS_MAX_GAP_S 30.0  /* longest silence between lines with log_every = 0 */

/* Where a run stands after a step: what its progress line shows. */
struct progress_point {
	int64_t step, stop_at;
	double loss;           /* the last accepted window's global token mean (NaN: none) */
	double val_loss;       /* the newest validation loss (NaN: not evaluated yet) */
	double lr;
	double tokens_per_s;   /* supervised tokens per second inside the windows so far */
	double elapsed_s;      /* since the run was opened */
	double eta_s;          /* the steps left at the pace so far */
};

struct progress {
	int live;              /* redraw one line (a terminal) */
	int lines;             /* print whole lines (not a terminal); neither: silent */
	int every_step;        /* log_level = debug: a line per step */
	int64_t start_step;    /* the step the run started from */
	int64_t stride;        /* a line every this many steps */
	int auto_gap;          /* the PROGRESS_MAX_GAP_S rule applies (log_every = 0) */
	double last_shown_s;   /* clock of the last line */
	int shown;             /* a live line is open */
};

/* The stride of log_every for a run of `steps` steps: log_every itself, or for 0 about
 * PROGRESS_LINES lines per run (at least 1). */
int64_t progress_stride(int log_every, int64_t steps);
/* Prepares the lines of a run from start_step to stop_at, opened at clock now_s. */
void progress_start(struct progress *p, const struct env *v, int64_t start_step,
		    int64_t stop_at, double now_s);
/* Whether step (of a run ending at stop_at) gets a whole line at clock now_s. */
int progress_due(const struct progress *p, int64_t step, int64_t stop_at, double now_s);
/* The line of pt, as "train: step 20/100  loss 3.1416  val 3.2000  lr 0.2  ...". */
void progress_text(const struct progress_point *pt, char *out, size_t cap);
/* A duration as 1h02m03s, 2m05s or 7s. */
void progress_duration(double s, char *out, size_t cap);
/* Shows pt as the run's mode wants it: the live line, or a whole line when due. */
void progress_show(struct progress *p, const struct env *v, const struct progress_point *pt,
		   double now_s);
/* Closes the live line, if one is open. */
void progress_end(struct progress *p, const struct env *v);

#endif
