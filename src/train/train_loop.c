/*
 * train_loop: the training run, a loop over the trainer of trainer.c, and its options (see
 * train_loop.h).
 */
#include "train_loop.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "outputs.h"
#include "progress.h"
#include "world.h"

/* ---- small helpers --------------------------------------------------------------- */

int train_ckpt_root(const struct env *v, int continuous, char *out, size_t cap, struct err *e)
{
	return fsx_join(out, cap, v->s->artifacts,
			artifacts_table[continuous ? ART_CONTINUOUS : ART_CHECKPOINTS], e);
}

int train_opts_for(const struct env *v, enum train_kind kind, const char *resume_dir,
		   struct train_opts *o, struct err *e)
{
	int rc;
	memset(o, 0, sizeof *o);
	if (kind == TRAIN_RESUME && !resume_dir)
		return ERR(e, ERR_USAGE, "a resumed run needs a checkpoint directory");
	o->stop_at = kind == TRAIN_STOP ? v->s->stop_at : v->s->updates;
	o->resume_dir = kind == TRAIN_RESUME ? resume_dir : NULL;
	o->checkpoint_every = v->s->checkpoint_every;
	o->mode = v->s->normalization;
	if ((rc = train_ckpt_root(v, kind == TRAIN_CONTINUOUS, o->ckpt_root, sizeof o->ckpt_root,
				  e)))
		return rc;
	return fsx_join(o->metrics_path, sizeof o->metrics_path, v->s->outputs,
			output_name(OUT_METRICS_STOP + kind), e);
}

int64_t train_planned_stop(const struct settings *s)
{
	return s->stop_at > 0 && s->stop_at < s->updates ? s->stop_at : 0;
}

int train_opts_in_run(const struct env *v, enum train_kind kind, const struct train_plan *plan,
		      struct train_opts *o, struct err *e)
{
	int64_t planned = train_planned_stop(v->s);
	ERR_TRY(train_opts_for(v, kind, plan->resume[0] ? plan->resume : NULL, o, e));
	o->stop_at = kind == TRAIN_STOP && planned ? planned : v->s->updates;
	snprintf(o->ckpt_root, sizeof o->ckpt_root, "%s", plan->run_dir);
	o->run_dir = 1;
	o->keep = v->s->keep;
	o->metrics_append = plan->continues;
	o->metrics_path[0] = '\0';
	/* one metrics file per run, process 0's: every process computes the same global
	 * numbers, and the artifacts are process 0's alone */
	if (world_get()->proc == 0)
		ERR_TRY(fsx_join(o->metrics_path, sizeof o->metrics_path, plan->run_dir,
				 OUTPUT_RUN_METRICS, e));
	if (plan->continues && world_get()->proc == 0)
		ERR_TRY(train_runs_trim_metrics(o->metrics_path, plan->resume_step, e));
	return ERR_OK;
}

double train_max_abs_diff(const float *a, const float *b, size_t n, size_t *n_differ)
{
	double mx = 0.0;
	size_t nd = 0;
	for (size_t i = 0; i < n; i++) {
		if (memcmp(&a[i], &b[i], sizeof(float)) != 0)
			nd++;
		double d = fabs((double)a[i] - (double)b[i]);
		if (d > mx || isnan(d))
			mx = isnan(d) ? INFINITY : d;
	}
	if (n_differ)
		*n_differ = nd;
	return mx;
}

/* Where the run stands after step wr, for its progress line (progress.h): the rate is
 * the one that step's update took (the schedule's, not the configured peak). */
static void show_progress(const struct trainer *t, const struct window_result *wr,
			  struct progress *pg)
{
	double now = clock_now_s(), spent = now - t->opened_at;
	int64_t done = t->step - t->start_step, left = t->o.stop_at - t->step;
	struct progress_point pt = {
		.step = t->step, .stop_at = t->o.stop_at, .loss = t->last_loss,
		.val_loss = t->val.step > 0 ? t->val.loss : NAN, .lr = wr->lr,
		.tokens_per_s = t->seconds > 0 ? (double)t->tokens / t->seconds : 0.0,
		.elapsed_s = spent, .eta_s = done > 0 ? spent / (double)done * (double)left : 0.0,
	};
	progress_show(pg, t->v, &pt, now);
}

/* Steps up to o.stop_at, with the periodic checkpoints, until the stop flag or on_window
 * ends it early. */
static int train_loop(struct trainer *t, struct err *e)
{
	const struct train_opts *o = &t->o;
	int rc = ERR_OK;
	struct progress pg;
	progress_start(&pg, t->v, t->start_step, o->stop_at, clock_now_s());
	while ((rc = trainer_agree_stop(t, e)) == ERR_OK && t->step < o->stop_at &&
	       !trainer_stop_reason(t)) {
		struct window_result wr;
		if ((rc = trainer_step(t, &t->r.w, 0, &wr, e)))
			break;
		show_progress(t, &wr, &pg);
		if (o->on_window && o->on_window(o->on_window_arg, t->step, &wr))
			break;
		if (t->step < o->stop_at && train_ckpt_due(o, t->step) && !trainer_stop_reason(t) &&
		    (rc = trainer_checkpoint(t, o->ckpt_root, NULL, 0, e)))
			break;
	}
	progress_end(&pg, t->v);
	return rc;
}

/* ERR_INTERRUPTED with what was saved, for a run that ended early or saw a stop request. */
static int interrupted(const struct trainer *t, struct err *e)
{
	const struct train_opts *o = &t->o;
	const char *why = env_stop_name(trainer_stop_reason(t));
	if (t->checkpoints_written == 0 && o->resume_dir)
		return ERR(e, ERR_INTERRUPTED, "interrupted by %s before any step: the state is "
			   "still that of checkpoint %s (continue with --resume %s)", why,
			   o->resume_dir, o->resume_dir);
	if (t->checkpoints_written == 0 && t->step == 0)
		return ERR(e, ERR_INTERRUPTED, "interrupted by %s before the first step: "
			   "nothing to save", why);
	if (t->checkpoint[0] && t->step >= o->stop_at)
		return ERR(e, ERR_INTERRUPTED, "interrupted by %s in the last window: the run "
			   "completed its %" PRId64 " steps, checkpoint %s written", why, t->step,
			   t->checkpoint);
	if (t->checkpoint[0])
		return ERR(e, ERR_INTERRUPTED, "interrupted by %s after step %" PRId64 " of %" PRId64
			   ": checkpoint %s written (continue with --resume %s)", why, t->step,
			   o->stop_at, t->checkpoint, t->checkpoint);
	return ERR(e, ERR_INTERRUPTED, "interrupted by %s after step %" PRId64 " of %" PRId64
		   " (no checkpoint root configured)", why, t->step, o->stop_at);
}

/* The result, with a host copy of the final state unless o.no_final_state. */
static int fill_result(struct trainer *t, struct train_result *res, struct err *e)
{
	res->start_step = t->start_step;
	res->step = t->step;
	res->updates_done = t->r.eng->updates_done;
	res->skipped = t->skipped;
	res->n = t->r.eng->shape.n_params;
	snprintf(res->checkpoint, sizeof res->checkpoint, "%s", t->checkpoint);
	res->checkpoints_written = t->checkpoints_written;
	res->seconds = t->seconds;
	res->tokens = t->tokens;
	res->tokens_per_s = res->seconds > 0 ? (double)res->tokens / res->seconds : 0.0;
	res->first_loss = t->first_loss;
	res->last_loss = isnan(t->first_loss) ? NAN : t->last_loss;
	memcpy(res->hist, t->hist, sizeof t->hist);
	res->changes = t->changes;
	memcpy(res->rank_seconds_coll, t->rank_seconds_coll, sizeof t->rank_seconds_coll);
	snprintf(res->backend, sizeof res->backend, "%s", engine_backend_name(t->r.eng));
	res->state_n = engine_state_floats(t->r.eng);
	if (t->o.no_final_state)
		return ERR_OK;
	res->params = malloc(res->n * sizeof(float));
	res->momentum = malloc(res->state_n * sizeof(float));
	if (!res->params || !res->momentum)
		return ERR(e, ERR_NOMEM, "out of memory for the final state (%zu floats)",
			   res->n + res->state_n);
	return engine_get_state(t->r.eng, res->params, res->momentum, e);
}

/* The final (or interrupting) checkpoint, unless this step is already on disk, and the
 * result. */
static int train_finish(struct trainer *t, struct train_result *res, struct err *e)
{
	int rc;
	/* what the windows held resident, before the result's host copies add to it */
	mem_usage_read(&res->mem);
	res->corpus_bytes = (int64_t)t->r.corpus.map_len;
	if (t->o.ckpt_root[0] && t->step != t->last_ckpt_step && t->step > 0 &&
	    (rc = trainer_checkpoint(t, t->o.ckpt_root, NULL, 0, e)))
		return rc;
	if ((rc = fill_result(t, res, e)))
		return rc;
	/* a stop request counts even when it arrived in the last window or while the final
	 * checkpoint was written: the run is then complete, but the caller (the protocol)
	 * must stop rather than go on to its next step */
	if (t->step < t->o.stop_at || trainer_stop_reason(t)) {
		res->interrupted = 1;
		return interrupted(t, e);
	}
	return ERR_OK;
}

void train_result_free(struct train_result *r)
{
	if (!r)
		return;
	free(r->params);
	free(r->momentum);
	r->params = r->momentum = NULL;
}

/* Adds the consistent state a failed run can be resumed from to its error message (in a
 * run directory, runs/latest still points to it). */
static void name_newest_checkpoint(const struct trainer *t, struct err *e)
{
	size_t len = strlen(e->msg);
	snprintf(e->msg + len, sizeof e->msg - len, " (newest checkpoint: %s, step %" PRId64
		 "%s; continue with --resume %s)", t->checkpoint, t->last_ckpt_step,
		 t->o.run_dir && t->checkpoints_written > 0 ? ", still runs/latest" : "", t->checkpoint);
}

int train_run(const struct env *v, const struct train_opts *o, struct train_result *res,
	      struct err *e)
{
	struct trainer t;
	memset(res, 0, sizeof *res);
	res->first_loss = res->last_loss = NAN;
	if (o->stop_at < 1)
		return ERR(e, ERR_USAGE, "train: nothing to run up to step %" PRId64, o->stop_at);
	int rc = trainer_open(&t, v, o, e);
	if (rc == ERR_OK && (rc = train_loop(&t, e)) == ERR_OK)
		rc = train_finish(&t, res, e);
	/* the final checkpoint's failure (the publication gate's too) names it as well */
	if (rc != ERR_OK && rc != ERR_INTERRUPTED && t.checkpoint[0])
		name_newest_checkpoint(&t, e);
	int crc = trainer_close(&t, rc == ERR_OK ? e : NULL);
	if (rc == ERR_OK)
		rc = crc;
	if (rc && rc != ERR_INTERRUPTED)
		train_result_free(res);
	return rc;
}
