/*
 * trainer: one training run held open (see trainer.h): what a step does and what a
 * checkpoint records. train_run's loop and inspect's `step` both go through
 * trainer_step, so a window is trained, counted and logged one way only.
 *
 * Bit-exact resume rests on three things: the checkpoint holds everything the next window
 * depends on (parameters, the optimizer's state, the count of updates already taken,
 * which decides the first momentum step, AdamW's bias corrections and the learning rate,
 * and the sampler's generator state and window index);
 * the engine's arithmetic is deterministic (fixed reduction orders); and a checkpoint is
 * only taken between windows, after engine_window() returned, so no device thread is
 * running while its state is copied out.
 */
#include "trainer.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "clock.h"
#include "elastic.h"
#include "jsonx.h"
#include "procs.h"
#include "train_runs.h"
#include "world.h"

/* Debug builds also compare the replicas every REPLICA_CHECK_STRIDE steps between
 * checkpoints: the comparison downloads and hashes every rank's parameters, a full pass
 * over them that would otherwise cost every window a few percent. */
#ifdef NDEBUG
#define REPLICA_CHECK_STRIDE 0
#else
#define REPLICA_CHECK_STRIDE 16
#endif

/* Loads and checks the checkpoint to resume from (c: the corpus it must have been trained
 * on). */
static int load_resume(struct trainer *t, const struct corpus *c, struct checkpoint *ck,
		       struct err *e)
{
	const struct train_opts *o = &t->o;
	unsigned checks = CHECKPOINT_CHECK_ALL | CHECKPOINT_CHECK_OPTIM_MAY_CHANGE;
	if (o->mode == TRAIN_MODE_ANY)
		checks |= CHECKPOINT_CHECK_ANY_NORMALIZATION;
	/* read by process 0 and handed to the others: no shared file system needed */
	char dir[FSX_PATH_MAX];
	int rc = procs_share_checkpoint(o->resume_dir, t->v->s->outputs, "resume", dir,
					sizeof dir, t->v->s->timeout_s, e);
	if (rc || (rc = checkpoint_load(t->v, dir, c, checks, ck, e)))
		return rc;
	if (o->mode != TRAIN_MODE_ANY && ck->normalization != o->mode)
		return ERR(e, ERR_DATA, "checkpoint %s was trained with normalization %s, this run "
			   "uses %s", o->resume_dir, norm_mode_name(ck->normalization),
			   norm_mode_name(o->mode));
	/* [train] updates is not a math key: a resume may lengthen a run, but not end it
	 * before the step it already reached */
	if (o->stop_at > 0 && ck->step > o->stop_at)
		return ERR(e, ERR_CONFIG, "checkpoint %s is at step %" PRId64 ", past step %" PRId64
			   " where this run ends (raise [train] updates to continue it)",
			   o->resume_dir, ck->step, o->stop_at);
	return ERR_OK;
}

/* The checkpoint's history of changed settings, and the changes this resume makes. */
static void adopt_changes(struct trainer *t, const struct checkpoint *ck)
{
	t->changes = ck->changes;
	for (int i = 0; i < ck->changed.n; i++) {
		const struct train_change *c = &ck->changed.v[i];
		env_info(t->v, "%s: %s: %s -> %s from step %" PRId64, t->v->command, c->key,
			 c->from, c->to, c->step);
		if (train_changes_add(&t->changes, c->step, c->key, c->from, c->to))
			env_info(t->v, "%s: note: the history holds %d changes, this one is not "
				 "recorded", t->v->command, TRAIN_MAX_CHANGES);
	}
	if (!ck->changed.n)
		return;
	env_info(t->v, "%s: learning rate of update %" PRId64 ": %g with the checkpoint's "
		 "settings -> %g with these (docs/optimizers.md)", t->v->command, t->r.eng->updates_done + 1,
		 ck->stored_next_lr, engine_next_lr(t->r.eng));
	env_info(t->v, "%s: the optimizer settings changed on resume (recorded in the "
		 "checkpoints' history): the run no longer follows the trajectory of its "
		 "original settings bit for bit", t->v->command);
}

/* Takes over what the checkpoint recorded besides the engine's state. */
static void adopt_resume(struct trainer *t, const struct checkpoint *ck)
{
	if (strcmp(ck->backend, engine_backend_name(t->r.eng)) != 0)
		env_info(t->v, "%s: note: checkpoint written by the %s backend, continuing on %s "
			 "(bit-exact equality holds only on one backend)", t->v->command,
			 ck->backend, engine_backend_name(t->r.eng));
	t->step = t->start_step = t->last_ckpt_step = ck->step;
	t->mode = t->run_mode = t->resume_mode = ck->normalization;
	t->last_loss = ck->last_loss;
	memcpy(t->hist, ck->hist, sizeof t->hist);
	if (ck->elastic.shards > 0) { /* exact mode: the rank histories of this run's world */
		memcpy(t->shard_hist, ck->elastic.shard_hist, sizeof t->shard_hist);
		memset(t->hist, 0, sizeof t->hist);
		elastic_rank_history(t->shard_hist, ck->elastic.shards, t->r.eng->world, ck->step,
				     t->hist);
	}
	snprintf(t->checkpoint, sizeof t->checkpoint, "%s", t->o.resume_dir);
	adopt_changes(t, ck);
}

/* A resume allowed to go on under another GEMM implementation: recorded in the history of
 * changes, as a changed setting would be. */
static void adopt_gemm_change(struct trainer *t, const struct checkpoint *ck)
{
	const char *now = elastic_gemm(t->r.eng);
	env_info(t->v, "train: devices.gemm: %s -> %s from step %" PRId64 " (--allow-gemm-change; "
		 "recorded in the checkpoints' history): the run no longer follows its first "
		 "GEMM's bits", ck->elastic.gemm, now, ck->step);
	if (train_changes_add(&t->changes, ck->step, "devices.gemm", ck->elastic.gemm, now))
		env_info(t->v, "train: note: the history holds %d changes, this one is not "
			 "recorded", TRAIN_MAX_CHANGES);
}

/* The engine with the seeded or resumed state. */
static int open_run(struct trainer *t, struct err *e)
{
	struct checkpoint ck;
	struct corpus c;
	const char *resume = t->o.resume_dir;
	memset(&ck, 0, sizeof ck);
	int rc = run_corpus(t->v, resume ? CORPUS_RESUME : CORPUS_TRAIN, &c, e);
	if (rc)
		return rc;
	if ((rc = procs_check_data_lock(c.lock, t->v->s->timeout_s, e))) {
		corpus_free(&c);
		return rc;
	}
	if (resume && (rc = load_resume(t, &c, &ck, e))) {
		corpus_free(&c);
		checkpoint_free(&ck);
		return rc;
	}
	/* both take c */
	rc = resume ? checkpoint_open_run(t->v, &ck, &t->r, &c, e)
		    : run_open_corpus(t->v, &t->r, &c, e);
	if (rc == ERR_OK) {
		t->have_run = 1;
		int gemm_changed = 0;
		if (resume && t->o.on_resume)
			t->o.on_resume(t->o.on_resume_arg, &ck, t->r.eng);
		if (resume && (rc = elastic_check_machine(t->v, ck.dir, ck.backend, ck.elastic.machine,
							  t->r.eng, e)) == ERR_OK &&
		    (rc = elastic_check_gemm(ck.dir, ck.elastic.gemm, t->r.eng,
					     t->o.allow_gemm_change, &gemm_changed, e)) == ERR_OK) {
			adopt_resume(t, &ck);
			if (gemm_changed)
				adopt_gemm_change(t, &ck);
		}
	}
	checkpoint_free(&ck);
	return rc;
}

int trainer_open(struct trainer *t, const struct env *v, const struct train_opts *o,
		 struct err *e)
{
	int rc;
	memset(t, 0, sizeof *t);
	t->v = v;
	t->o = *o;
	t->mode = o->mode == TRAIN_MODE_ANY ? v->s->normalization : o->mode;
	t->run_mode = t->resume_mode = -1;
	t->last_ckpt_step = -1;
	t->last_loss = t->first_loss = NAN;
	if ((rc = open_run(t, e)))
		return rc;
	/* the checkpoint root must be usable before any window is spent: a bad
	 * run.artifacts found at the first checkpoint would lose the work done so far */
	if (o->ckpt_root[0] && (rc = env_dir_ready(o->ckpt_root, "[run] artifacts", e)))
		return rc;
	if (o->metrics_path[0] && t->step < o->stop_at && !(t->metrics = fopen(o->metrics_path, o->metrics_append ? "a" : "w")))
		return ERR_ERRNO(e, "cannot create %s", o->metrics_path);
	t->opened_at = clock_now_s();
	return ERR_OK;
}

int trainer_close(struct trainer *t, struct err *e)
{
	int rc = ERR_OK;
	if (t->metrics && fclose(t->metrics) != 0 && e)
		rc = ERR_ERRNO(e, "cannot write %s", t->o.metrics_path);
	t->metrics = NULL;
	if (t->have_run)
		run_close(&t->r);
	t->have_run = 0;
	return rc;
}

/* The wall-clock time now, UTC, as 2026-01-31T12:34:56.789Z. */
static void utc_now(char *out, size_t cap)
{
	struct timeval tv;
	struct tm tm;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, cap - n, ".%03dZ", (int)(tv.tv_usec / 1000));
}

/* A real of the metrics line: JSON has no NaN or infinity, so those are null (the line's
 * "nonfinite" flag then says why). */
static json_t *real_or_null(double x)
{
	return isfinite(x) ? json_real(x) : json_null();
}

/* Whether an accepted window's loss or gradient went NaN or infinite: the run stops. */
static int window_nonfinite(const struct window_result *wr)
{
	return !wr->rejected && (!isfinite(wr->loss) || !isfinite(wr->grad_norm));
}

/* The line's optional fields: the per-rank numbers, clipping, l2, validation and the
 * non-finite flag. */
static void metrics_extras(const struct trainer *t, const struct window *w,
			   const struct window_result *wr, json_t *line)
{
	json_t *sums = json_array(), *waits = json_array();
	/* per rank (global rank order): its loss sum and its time inside collectives,
	 * barrier waits for slower ranks included */
	for (int r = 0; r < w->world; r++) {
		json_array_append_new(sums, real_or_null(wr->rank_loss_sum[r]));
		json_array_append_new(waits, json_real(wr->rank_seconds_coll[r]));
	}
	json_object_set_new(line, "rank_loss_sum", sums);
	json_object_set_new(line, "rank_seconds_coll", waits);
	/* with clipping on: what the reduced gradient (whose norm is grad_norm) was scaled by */
	if (t->v->s->clip > 0 && !wr->rejected)
		json_object_set_new(line, "clip_factor", real_or_null(wr->clip_factor));
	if (t->v->s->l2 > 0 && !wr->rejected) /* the l2 term's part of "loss" */
		json_object_set_new(line, "loss_l2", real_or_null(wr->loss_l2));
	/* the validation loss, on the steps [train] eval_every evaluates */
	if (t->val.step == t->step && t->step > 0) {
		json_object_set_new(line, "val_loss", real_or_null(t->val.loss));
		json_object_set_new(line, "val_accuracy", real_or_null(t->val.accuracy));
	}
	if (window_nonfinite(wr))
		json_object_set_new(line, "nonfinite", json_true());
}

static json_t *metrics_line(const struct trainer *t, const struct window *w,
			    const struct window_result *wr)
{
	char now[40];
	json_t *toks = json_array();
	for (int r = 0; r < w->world; r++)
		json_array_append_new(toks, json_integer(wr->rank_tokens[r]));
	utc_now(now, sizeof now);
	json_t *line = json_pack("{s:I, s:I, s:I, s:o, s:I, s:b, s:o, s:o, s:f, s:f, s:f, s:s, s:f, s:s, "
			 "s:f}",
			 "step", (json_int_t)t->step, "window", (json_int_t)window_number(w),
			 "updates_done", (json_int_t)t->r.eng->updates_done, "rank_tokens", toks,
			 "N", (json_int_t)wr->N, "rejected", wr->rejected, "loss",
			 wr->rejected ? json_null() : real_or_null(wr->loss), "grad_norm",
			 wr->rejected ? json_null() : real_or_null(wr->grad_norm), "seconds",
			 wr->seconds, "tokens_per_s",
			 wr->seconds > 0 ? (double)wr->N / wr->seconds : 0.0, "seconds_coll",
			 wr->seconds_coll, "backend", engine_backend_name(t->r.eng), "lr",
			 wr->lr, "time", now, "elapsed",
			 clock_now_s() - t->opened_at);
	if (line)
		metrics_extras(t, w, wr, line);
	return line;
}

static int write_metrics(struct trainer *t, const struct window *w,
			 const struct window_result *wr, struct err *e)
{
	json_t *j = metrics_line(t, w, wr);
	char *text = j ? jsonx_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!text)
		return ERR(e, ERR_IO, "%s: cannot serialize a metrics line", t->o.metrics_path);
	int bad = fprintf(t->metrics, "%s\n", text) < 0 || fflush(t->metrics) != 0;
	free(text);
	if (bad)
		return ERR_ERRNO(e, "%s: cannot write metrics", t->o.metrics_path);
	return ERR_OK;
}

int train_ckpt_due(const struct train_opts *o, int64_t step)
{
	return o->ckpt_root[0] &&
	       (step == o->stop_at || (o->checkpoint_every > 0 && step % o->checkpoint_every == 0));
}

/* Records an accepted or rejected window as a step. */
static void count_step(struct trainer *t, const struct window *w,
		       const struct window_result *wr)
{
	t->step++;
	train_history_add(t->hist, w, wr->rejected);
	if (t->v->s->shards > 0)
		elastic_history_add(t->shard_hist, w, wr->rejected);
	t->seconds += wr->seconds;
	for (int r = 0; r < w->world; r++)
		t->rank_seconds_coll[r] += wr->rank_seconds_coll[r];
	t->tokens += wr->N;
	if (wr->rejected)
		t->skipped++;
	else {
		t->last_loss = wr->loss;
		if (isnan(t->first_loss))
			t->first_loss = wr->loss;
	}
	if (t->run_mode == -1)
		t->run_mode = t->mode;
	else if (t->run_mode != t->mode)
		t->run_mode = -2;
}

/* A window that went non-finite (engine_window's ERR_NONFINITE in e) is a step whose
 * metrics line is written, so that plots show where the run diverged; the run then
 * stops, and no checkpoint holds its update. */
static int nonfinite_step(struct trainer *t, const struct window *w,
			  const struct window_result *wr, struct err *e)
{
	struct err line;
	err_clear(&line);
	count_step(t, w, wr);
	if (t->metrics && write_metrics(t, w, wr, &line))
		env_info(t->v, "train: %s", line.msg);
	size_t len = strlen(e->msg);
	snprintf(e->msg + len, sizeof e->msg - len, "; the run stops at step %" PRId64 " without "
		 "checkpointing it", t->step);
	return ERR_NONFINITE;
}

int trainer_step(struct trainer *t, struct window *w, int flags, struct window_result *wr,
		 struct err *e)
{
	struct sampler_state before;
	int rc;
	flags |= ENGINE_UPDATE | ENGINE_GRAD_NORM;
	/* the replicas are compared before every checkpoint (and on a stride in debug
	 * builds) */
	int64_t next = t->step + 1;
	int stride_due = REPLICA_CHECK_STRIDE > 0 && next % REPLICA_CHECK_STRIDE == 0;
	if (stride_due || train_ckpt_due(&t->o, next))
		flags |= ENGINE_CHECK_REPLICAS;
	sampler_get_state(&t->r.sampler, &before);
	if ((rc = sampler_next(&t->r.sampler, w, e)))
		return rc;
	if ((rc = engine_window(t->r.eng, w, t->mode, flags, wr, e)) == ERR_NONFINITE)
		return nonfinite_step(t, w, wr, e);
	if (rc)
		return rc;
	if (wr->rejected && t->v->s->empty_window == EMPTY_ERROR) {
		/* not a step: the window stays the next one */
		sampler_set_state(&t->r.sampler, &before);
		return ERR(e, ERR_EMPTY, "window %lld (step %" PRId64 ") has no supervised "
			   "token on any rank; train.empty_window = error (set it to skip to step "
			   "over such windows)", window_number(w), t->step + 1);
	}
	count_step(t, w, wr);
	if (train_val_due(t->v->s, t->step) && (rc = train_validate(t->r.eng, t->step, &t->val, e)))
		return rc;
	if (t->metrics)
		return write_metrics(t, w, wr, e);
	return ERR_OK;
}

int trainer_stop_reason(const struct trainer *t)
{
	return world_get()->procs > 1 ? t->stop_agreed : env_stop_requested(t->v);
}

int trainer_agree_stop(struct trainer *t, struct err *e)
{
	if (world_get()->procs == 1)
		return ERR_OK;
	int reason = env_stop_requested(t->v);
	ERR_TRY(procs_agree_stop(&reason, t->v->s->timeout_s, e));
	t->stop_agreed = reason;
	return ERR_OK;
}

/* A run directory's upkeep once its newest checkpoint is safely written: the older ones
 * past train.keep go, and runs/latest names the run. */
static int run_dir_after_checkpoint(struct trainer *t, const char *root, struct err *e)
{
	if (!t->o.run_dir || strcmp(root, t->o.ckpt_root) != 0)
		return ERR_OK;
	ERR_TRY(train_runs_prune(t->v, root, t->o.keep, t->step, NULL, e));
	return train_runs_mark_latest(t->v, root, e);
}

int trainer_checkpoint(struct trainer *t, const char *root, char *out, size_t cap,
		       struct err *e)
{
	int rc;
	if (t->run_mode < 0)
		return ERR(e, ERR_USAGE, "%s: a checkpoint records one normalization",
			   t->run_mode == -1 ? "no window was run" : "the windows used several");
	/* process 0 writes the one checkpoint (the replicas are identical); the others take
	 * part in gathering the sharded state, then take its result, so that a failed write
	 * fails every process */
	struct checkpoint_source src = {
		.v = t->v, .r = &t->r, .step = t->step, .run_mode = t->run_mode,
		.last_loss = t->last_loss, .hist = t->hist, .shard_hist = t->shard_hist,
		.changes = &t->changes,
	};
	rc = checkpoint_write(&src, root, t->checkpoint, sizeof t->checkpoint, e);
	/* the run directory's upkeep (keep, latest) is process 0's too, and its failure must
	 * reach the others with the write's: they would wait for process 0 in the next window */
	if (rc == ERR_OK && world_get()->proc == 0)
		rc = run_dir_after_checkpoint(t, root, e);
	if ((rc = procs_checkpoint_result(rc, t->checkpoint, sizeof t->checkpoint,
					  t->v->s->timeout_s, e)))
		return rc;
	if (out && cap)
		snprintf(out, cap, "%s", t->checkpoint);
	t->last_ckpt_step = t->step;
	t->checkpoints_written++;
	return ERR_OK;
}
