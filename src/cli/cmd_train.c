/*
 * cmd_train: the train command: a new run to [train] updates (or to its planned stop,
 * [train] stop_at), --continuous (to updates whatever stop_at says) or --resume latest|DIR
 * (the newest valid checkpoint of the latest run or of a directory, or a checkpoint).
 * Every run has its own run directory (train_runs.h): checkpoints, metrics.jsonl and
 * train.json, the summary.
 *
 * It is thin: the loop, the checkpoint format, the run directories and the checks live in
 * the core (train_loop.c, train_runs.c, checkpoint.c) so that the protocol command can run
 * the same code; this file chooses the run from the command line, prints what happened and
 * writes the summary beside it.
 */
#include "cmd_train.h"

#include <inttypes.h>
#include <jansson.h>
#include <string.h>

#include "checkpoint.h"
#include "optim.h"
#include "outputs.h"
#include "procs.h"
#include "report.h"
#include "signals.h"
#include "train_loop.h"
#include "train_runs.h"
#include "world.h"

/* The checkpoint to resume from and the run directory, chosen by process 0 (which reads
 * the artifacts for all) and shared with the others; no run directory when the resumed
 * checkpoint already finished the run. */
static int make_plan(struct app *a, struct train_plan *plan, struct err *e)
{
	int rc = ERR_OK;
	memset(plan, 0, sizeof *plan);
	if (world_get()->proc == 0) {
		if (a->o.resume_dir)
			rc = train_plan_resume(&a->env, a->o.resume_dir, plan, e);
		/* another model's checkpoint is refused as such, before its step (already
		 * past updates?) or its data (the corpus) are compared */
		if (rc == ERR_OK && plan->resume[0])
			rc = checkpoint_check_model(&a->env, plan->resume, e);
		/* before the new run becomes `latest`, never taking what is resumed */
		if (rc == ERR_OK)
			train_runs_prune_latest(&a->env, plan->resume);
		if (rc == ERR_OK && !(plan->resume[0] && plan->resume_step >= a->s.updates))
			rc = train_plan_run(&a->env, plan, e);
	}
	return procs_from_process0(rc, plan, sizeof *plan, "the run directory",
				   a->s.timeout_s, e);
}

/* "sgd momentum 0.9" or "adamw beta1 0.9, beta2 0.95": the optimizer and the settings
 * of its state, into buf. */
static void optimizer_phrase(const struct settings *s, char *buf, size_t cap)
{
	if (s->optimizer == OPTIM_ADAMW)
		snprintf(buf, cap, "adamw beta1 %g, beta2 %g", s->beta1, s->beta2);
	else
		snprintf(buf, cap, "sgd momentum %g", s->momentum);
}

/* What the run is about to do, and where. */
static void announce(struct app *a, enum train_kind kind, const struct train_plan *plan,
		     const struct train_opts *o)
{
	int64_t planned = train_planned_stop(&a->s);
	char optimizer[96];
	if (plan->from_dir)
		env_info(&a->env, "train: resuming from %s (step %" PRId64 "), the newest valid "
			 "checkpoint of %s", plan->resume, plan->resume_step,
			 strcmp(a->o.resume_dir, "latest") ? a->o.resume_dir : "the latest run");
	const char *what = kind == TRAIN_RESUME ? "resumed run to step"
			   : kind == TRAIN_STOP && planned ? "new run to its planned stop, step"
			   : "new run to step";
	optimizer_phrase(&a->s, optimizer, sizeof optimizer);
	env_info(&a->env, "train: %s %" PRId64 " (W = %d, accumulation %d, batch %d, lr %g, %s, "
		 "normalization %s)%s%s", what, o->stop_at, a->s.world, a->s.accumulation,
		 a->s.batch_size, a->s.lr, optimizer, norm_mode_name(o->mode),
		 kind == TRAIN_RESUME ? " from " : "", kind == TRAIN_RESUME ? plan->resume : "");
	env_info(&a->env, "train: run directory %s (%s)", plan->run_dir,
		 plan->continues ? "this run continued" : "a new run");
	if (kind == TRAIN_STOP && planned)
		env_info(&a->env, "train: planned stop at step %" PRId64 " of %d ([train] stop_at = "
			 "%" PRId64 "): `train --resume latest` then continues this run to step %d, "
			 "`train --continuous` trains all %d steps in one go", planned, a->s.updates,
			 planned, a->s.updates, a->s.updates);
}

/* The resumed checkpoint already reached train.updates: nothing to train, nothing
 * written. */
static int already_done(struct app *a, const struct train_plan *plan)
{
	if (plan->resume_step == a->s.updates)
		env_info(&a->env, "train: %s is already at updates = %d; raise train.updates to "
			 "continue (e.g. --set train.updates=%d)", plan->resume, a->s.updates,
			 a->s.updates * 2);
	else
		env_info(&a->env, "train: %s is at step %" PRId64 ", already past updates = %d; "
			 "raise train.updates to continue", plan->resume, plan->resume_step,
			 a->s.updates);
	return ERR_OK;
}

/* A new run that failed or was interrupted before its first checkpoint gives `latest`
 * back and leaves no empty run directory (process 0 made it); rc is returned. */
static int failed(struct app *a, const struct train_plan *plan, int rc)
{
	if (world_get()->proc == 0)
		train_runs_give_back(&a->env, plan);
	return rc;
}

/* <run>/train.json: the summary of this session of the run, with the settings changed
 * along the run (process 0 writes it). */
static int write_summary(struct app *a, enum train_kind kind, const struct train_plan *plan,
			 const struct train_result *res, struct err *e)
{
	char path[FSX_PATH_MAX];
	if (world_get()->proc > 0)
		return ERR_OK;
	json_t *j = train_summary_json(kind, res, a->s.world);
	json_t *ch = train_changes_json(&res->changes);
	json_object_set_new(j, "run_dir", json_string(plan->run_dir));
	json_object_set_new(j, "changes", ch ? ch : json_array());
	json_object_set_new(j, "original_settings", json_boolean(res->changes.n == 0));
	int rc = fsx_join(path, sizeof path, plan->run_dir, OUTPUT_RUN_SUMMARY, e);
	if (rc == ERR_OK)
		rc = report_json_file(path, j, e);
	json_decref(j);
	return rc;
}

/* Which rank spent the most time in collectives, i.e. waited most for the others. */
static void show_waits(const struct app *a, const struct train_result *res)
{
	int most = 0;
	double mean = 0.0;
	for (int r = 0; r < a->s.world; r++) {
		mean += res->rank_seconds_coll[r] / a->s.world;
		if (res->rank_seconds_coll[r] > res->rank_seconds_coll[most])
			most = r;
	}
	env_info(&a->env, "train: collectives: rank %d waited most (%.3f s in collectives; "
		 "mean over ranks %.3f s)", most, res->rank_seconds_coll[most], mean);
}

int cmd_train(struct app *a, struct err *e)
{
	struct train_opts o;
	struct train_result res;
	struct train_plan plan;
	enum train_kind kind;
	int rc;

	if (a->o.resume_dir && a->o.continuous)
		return ERR(e, ERR_USAGE, "train: --continuous and --resume exclude each other");
	kind = a->o.resume_dir ? TRAIN_RESUME : a->o.continuous ? TRAIN_CONTINUOUS : TRAIN_STOP;
	if ((rc = env_outputs_ready(&a->env, e)) || (rc = make_plan(a, &plan, e)))
		return rc;
	if (plan.resume[0] && plan.resume_step >= a->s.updates)
		return already_done(a, &plan);
	if ((rc = train_opts_in_run(&a->env, kind, &plan, &o, e)))
		return failed(a, &plan, rc);
	app_train_hooks(a, &o);
	o.no_final_state = 1; /* nothing here compares it: no host copy of the model */
	announce(a, kind, &plan, &o);
	/* held from the start: a signal while the corpus is loaded or the engine starts
	 * stops the run before its first window, as one during a window does after it */
	cli_signals_hold();
	rc = train_run(&a->env, &o, &res, e);
	cli_signals_release();
	if (rc != ERR_OK && rc != ERR_INTERRUPTED)
		return failed(a, &plan, rc);
	env_info(&a->env, "train: steps %" PRId64 " -> %" PRId64 " (%" PRId64 " updates in total, %" PRId64
		 " empty windows skipped), loss %.6f -> %.6f, %" PRId64 " tokens in %.2f s "
		 "(%.0f tokens/s, %s)", res.start_step, res.step, res.updates_done, res.skipped,
		 res.first_loss, res.last_loss, res.tokens, res.seconds, res.tokens_per_s,
		 res.backend);
	if (res.step > res.start_step) {
		show_waits(a, &res);
		env_show_memory(&a->env, "train", &res.mem, res.corpus_bytes);
	}
	if (res.checkpoint[0])
		env_info(&a->env, "train: checkpoint %s", res.checkpoint);
	if (o.metrics_path[0] && res.step > res.start_step)
		env_info(&a->env, "train: metrics %s", o.metrics_path);
	if (rc == ERR_OK && res.step < a->s.updates)
		env_info(&a->env, "train: stopped as planned at step %" PRId64 " of %d: continue "
			 "with `train --resume latest`", res.step, a->s.updates);
	struct err we;
	err_clear(&we);
	int wrc = write_summary(a, kind, &plan, &res, &we);
	train_result_free(&res);
	if (rc == ERR_INTERRUPTED)
		return failed(a, &plan, rc); /* e holds the message naming the checkpoint */
	if (wrc)
		*e = we;
	return wrc;
}
