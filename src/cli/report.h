/*
 * report: the results as the user sees them. Each check's result (parity.h, checks.h,
 * train_loop.h, evaluate.h) is printed by its step (step_*.h) and written as JSON into
 * [run] outputs; the protocol keeps them in memory and report_write() renders report.md
 * and report.json from them.
 *
 * A step is a command's work on a result the caller holds: compute it, print it, write
 * its JSON, and return ERR_CHECK (after writing) when its check failed. The command frees
 * the result; the protocol keeps it for the report.
 */
#ifndef DDPTOK_REPORT_H
#define DDPTOK_REPORT_H

#include <jansson.h>

#include "app.h"
#include "checks.h"
#include "evaluate.h"
#include "outputs.h"
#include "parity.h"
#include "step_elastic.h"
#include "train_loop.h"

/* ---- JSON (report.c) ---- */

/* Writes j (taken) as outputs/<the name of id>. */
int report_write_json(struct app *a, enum output_id id, json_t *j, struct err *e);
/* Writes j (not taken) to path, atomically. */
int report_json_file(const char *path, const json_t *j, struct err *e);

json_t *check_loss_json(const struct check_loss_result *r);
json_t *parity_json(const struct parity_result *r);
json_t *exercise_json(const struct exercise_result *r);
json_t *empty_window_json(const struct empty_window_result *r);
/* evaluate.json; source: the data source, whose id space the constant guess is named in
 * (corpus_user_id: the data files' ids, as on the terminal and in report.md). */
json_t *evaluate_json(const struct train_eval *ev, int source);
/* A training run's summary (train-stop.json, ...); kind: enum train_kind. */
json_t *train_summary_json(int kind, const struct train_result *res, int world);

/* ---- the protocol's report (report.c) ---- */

#define REPORT_MAX_STEPS 16

struct report_step {
	const char *name;
	double seconds;
	int rc;
	char msg[256];
	char skipped[256]; /* non-empty: the step did not run its work, and why */
};

/* What one of the three training runs of the protocol did. */
struct report_training {
	int64_t windows;
	double seconds, tokens_per_s;
};

/* Everything the protocol found; a have_* flag says that step produced its result (the
 * empty-window and resume entries read as failed, all zero, when theirs did not). */
struct report {
	struct report_step steps[REPORT_MAX_STEPS];
	int nsteps;
	int failed_checks;
	int have_check_loss, have_parity, have_exercise, have_eval, have_elastic;
	struct check_loss_result check_loss;
	struct parity_result parity;
	struct exercise_result exercise;
	struct empty_window_result empty;
	struct resume_check resume;
	struct elastic_check elastic;       /* exact mode only (have_elastic) */
	struct train_eval eval;
	struct report_training training[3]; /* by enum train_kind */
	char backend[16];                   /* of the training runs */
	char stop_ckpt[FSX_PATH_MAX];       /* the stopped run's checkpoint, resumed from */
	int nfigures;
	char figures[2][FSX_PATH_MAX];      /* the figure files drawn */
	char figure_skipped[256];           /* or why none was drawn */
	/* the engines the steps ran on (engine_keep.h): made, handed out again reset, and
	 * poisoned ones replaced */
	int engines_created, engines_reused, engines_replaced;
};

/* Writes outputs/report.md and report.json. */
int report_write(struct app *a, const struct report *p, struct err *e);

#endif
