/*
 * cmd_train: the train command: a run stopped at [train] stop_at, a continuous one
 * (--continuous) or one resumed from a checkpoint (--resume DIR).
 *
 * It is thin: the loop, the checkpoint format and the checks live in the core (train.c,
 * checkpoint.c) so that the protocol command can run the same code; this file chooses the
 * run from the command line, prints what happened and writes the JSON beside it.
 */
#include "cmd_train.h"

#include <inttypes.h>

#include "ckpt.h"
#include "outputs.h"
#include "report.h"
#include "signals.h"
#include "train_loop.h"
#include "world.h"

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
