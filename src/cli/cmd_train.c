/*
 * cmd_train: the commands around training: train and evaluate.
 *
 * They are thin: the loop, the checkpoint format and the checks live in the core (train.c,
 * checkpoint.c, evaluate.c) so that the protocol command can run the same code; these
 * functions choose the run from the command line, print what happened and write the JSON
 * beside it.
 */
#include <errno.h>
#include <fnmatch.h>
#include <ftw.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app.h"
#include "signals.h"
#include "ckpt.h"
#include "fsx.h"
#include "outputs.h"
#include "report.h"
#include "evaluate.h"
#include "train_loop.h"
#include "world.h"

/* ---- train ---------------------------------------------------------------------------- */

/* The checkpoint to resume from passes the store's verification (a directory of
 * checkpoints given instead of one is named as such), before any run is announced. */
static int resume_verified(const char *dir, struct err *e)
{
	struct ckpt_report rep;
	int rc = ckpt_verify(dir, &rep, e);
	ckpt_report_free(&rep);
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
	enum train_kind kind;
	int rc;

	if (a->o.resume_dir && a->o.continuous)
		return ERR(e, ERR_USAGE, "train: --continuous and --resume exclude each other");
	kind = a->o.resume_dir ? TRAIN_RESUME : a->o.continuous ? TRAIN_CONTINUOUS : TRAIN_STOP;
	if ((rc = app_train_opts(a, kind, a->o.resume_dir, &o, e)) || (rc = env_outputs_ready(&a->env, e)) ||
	    (kind == TRAIN_RESUME && world_get()->proc == 0 &&
	     (rc = resume_verified(a->o.resume_dir, e)))) /* process 0 reads it for all */
		return rc;
	env_info(&a->env, "train: %s run to step %" PRId64 " (W = %d, accumulation %d, batch %d, lr %g, "
		 "momentum %g, normalization %s)%s%s", output_run_name(kind), o.stop_at, a->s.world,
		 a->s.accumulation, a->s.batch_size, a->s.lr, a->s.momentum,
		 norm_mode_name(o.mode), kind == TRAIN_RESUME ? " from " : "",
		 kind == TRAIN_RESUME ? a->o.resume_dir : "");
	/* held from the start: a signal while the corpus is loaded or the engine starts
	 * stops the run before its first window, as one during a window does after it */
	cli_signals_hold();
	rc = train_run(&a->env, &o, &res, e);
	cli_signals_release();
	if (rc != ERR_OK && rc != ERR_INTERRUPTED)
		return rc;
	env_info(&a->env, "train: steps %" PRId64 " -> %" PRId64 " (%" PRId64 " updates in total, %" PRId64
		 " empty windows skipped), loss %.6f -> %.6f, %" PRId64 " tokens in %.2f s "
		 "(%.0f tokens/s, %s)", res.start_step, res.step, res.updates_done, res.skipped,
		 res.first_loss, res.last_loss, res.tokens, res.seconds, res.tokens_per_s,
		 res.backend);
	if (res.step > res.start_step)
		show_waits(a, &res);
	if (res.checkpoint[0])
		env_info(&a->env, "train: checkpoint %s", res.checkpoint);
	if (o.metrics_path[0] && res.step > res.start_step)
		env_info(&a->env, "train: metrics %s", o.metrics_path);
	struct err we;
	err_clear(&we);
	int wrc = report_write_json(a, OUT_TRAIN_STOP + kind,
				    train_summary_json(kind, &res, a->s.world), &we);
	train_result_free(&res);
	if (rc == ERR_INTERRUPTED)
		return rc; /* e holds the message naming the checkpoint */
	if (wrc)
		*e = we;
	return wrc;
}

/* ---- evaluate ------------------------------------------------------------------------- */

int cmd_evaluate(struct app *a, struct err *e)
{
	struct train_eval ev;
	int rc;
	if ((rc = env_outputs_ready(&a->env, e)) || (rc = train_evaluate(&a->env, a->o.checkpoint, &ev, e)))
		return rc;
	if (world_get()->proc > 0)
		return ERR_OK; /* it evaluated process 0's checkpoint as process 0 did: one report */
	return cmd_evaluate_write(a, &ev, e);
}

int cmd_evaluate_write(struct app *a, const struct train_eval *ev, struct err *e)
{
	int rc;
	const struct train_split_eval *sp[2] = {&ev->test, &ev->validation};
	const char *names[2] = {"test", "validation"};
	for (int i = 0; i < 2; i++)
		if (ev->skipped[i].count)
			env_info(&a->env, "evaluate: %d newer checkpoint%s under %s failed verification "
				 "and %s skipped (see the checkpoints command)", ev->skipped[i].count,
				 ev->skipped[i].count == 1 ? "" : "s", ev->skipped[i].root,
				 ev->skipped[i].count == 1 ? "was" : "were");
	env_info(&a->env, "evaluate: checkpoint %s (step %" PRId64 ")", ev->checkpoint, ev->step);
	env_info(&a->env, "evaluate: %-10s %9s %9s %10s %9s %9s %14s", "split", "sequences", "tokens",
		 "loss", "hits", "accuracy", "const. guess");
	for (int i = 0; i < 2; i++)
		env_info(&a->env, "evaluate: %-10s %9" PRId64 " %9" PRId64 " %10.6f %9" PRId64 " %9.4f %14.4f",
			 names[i], sp[i]->sequences, sp[i]->tokens, sp[i]->loss, sp[i]->hits,
			 sp[i]->accuracy, sp[i]->const_accuracy);
	env_info(&a->env, "evaluate: loss = global token mean (sum of token losses / supervised tokens); "
		 "accuracy = argmax == target; the constant guess always predicts id %d, the most "
		 "frequent training target", ev->const_id);
	rc = report_write_json(a, OUT_EVALUATE, evaluate_json(ev), e);
	if (!rc)
		env_info(&a->env, "evaluate: written %s/%s", a->s.outputs, output_name(OUT_EVALUATE));
	return rc;
}
