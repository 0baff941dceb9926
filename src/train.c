/*
 * train: the training loop, checkpoint writing and reading, resume and evaluation (see
 * train.h for what a step and a checkpoint are).
 *
 * Bit-exact resume rests on three things: the checkpoint holds everything the next window
 * depends on (parameters, momentum buffers, the count of updates already taken, which
 * decides the first momentum step, and the sampler's generator state and window index);
 * the engine's arithmetic is deterministic (fixed reduction orders); and a checkpoint is
 * only taken between windows, after engine_window() returned, so no device thread is
 * running while its state is copied out.
 */
#include "train.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "coll.h"
#include "npy.h"

/* ---- small helpers --------------------------------------------------------------- */

int train_ckpt_root(const struct env *v, int continuous, char *out, size_t cap, struct err *e)
{
	return fsx_join(out, cap, v->s->artifacts, continuous ? "continuous" : "checkpoints", e);
}

int train_opts_for(const struct env *v, enum train_kind kind, const char *resume_dir,
		   struct train_opts *o, struct err *e)
{
	static const char *metrics[] = {"train-stop.jsonl", "train-continuous.jsonl",
					"train-resume.jsonl"};
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
	return fsx_join(o->metrics_path, sizeof o->metrics_path, v->s->outputs, metrics[kind], e);
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

/* ---- the corpus ------------------------------------------------------------------- */

int train_corpus(const struct env *v, int rebuild, struct corpus *c, struct err *e)
{
	char dir[FSX_PATH_MAX], bin[FSX_PATH_MAX];
	int rc;
	memset(c, 0, sizeof *c);
	if ((rc = env_outputs_ready(v, e)) || (rc = fsx_join(dir, sizeof dir, v->s->outputs, "corpus", e)) ||
	    (rc = fsx_join(bin, sizeof bin, dir, "corpus.bin", e)))
		return rc;
	if (fsx_exists(bin)) {
		if ((rc = corpus_load(dir, c, e))) {
			err_prefix(e, "prepared corpus %s (run `prepare` to rebuild it)", dir);
			return rc;
		}
		if (corpus_params_match(&c->params, v->s))
			return ERR_OK;
		if (!rebuild) { /* the corpus a checkpoint was trained on may not be replaced */
			char diff[700];
			corpus_params_diff(&c->params, v->s, diff, sizeof diff);
			rc = ERR(e, ERR_DATA, "prepared corpus %s was built with other settings than "
				 "this run's: %s; run with the configuration it was built from (a "
				 "checkpoint needs the corpus it was trained on), or `prepare` again", dir,
				 diff);
			corpus_free(c);
			return rc;
		}
		env_info(v, "train: %s was prepared with other [data] settings: rebuilding it", dir);
		corpus_free(c);
	}
	if ((rc = corpus_build(v->s, c, e)))
		return rc;
	if ((rc = corpus_save(c, v->s, dir, e))) {
		corpus_free(c);
		return rc;
	}
	env_info(v, "train: corpus prepared in %s (data lock %.16s...)", dir, c->lock);
	return ERR_OK;
}

int train_open(const struct env *v, struct run *r, struct corpus *c, const struct train_ckpt *ck,
	       struct err *e)
{
	int rc = run_open_corpus(v, r, c, e);
	if (rc || !ck)
		return rc;
	if ((rc = engine_set_state(r->eng, ck->params, ck->momentum, ck->updates_done, e))) {
		run_close(r);
		return rc;
	}
	sampler_set_state(&r->sampler, &ck->sampler);
	return ERR_OK;
}

struct trainer {
	const struct env *v;
	const struct train_opts *o;
	struct run r;
	int64_t step;
	int64_t last_ckpt_step;
	double last_loss;
	struct train_history hist[PLAN_MAX_WORLD];
	float *params, *momentum; /* host scratch, n each */
	FILE *metrics;
};

/* Writes checkpoint step-NNNN of the trainer's current step; its directory goes to out. */
static int write_checkpoint(struct trainer *t, char *out, size_t cap, struct err *e)
{
	struct train_snapshot s = {
		.v = t->v, .r = &t->r, .step = t->step, .mode = t->o->mode,
		.last_loss = t->last_loss, .hist = t->hist, .params = t->params,
		.momentum = t->momentum,
	};
	int rc = engine_get_state(t->r.eng, t->params, t->momentum, e);
	if (rc || (rc = train_checkpoint_write(&s, t->o->ckpt_root, out, cap, e)))
		return rc;
	t->last_ckpt_step = t->step;
	return ERR_OK;
}

void train_history_add(struct train_history *hist, const struct window *w)
{
	for (int r = 0; r < w->world; r++) {
		hist[r].windows++;
		hist[r].tokens += w->rank_tokens[r];
		for (int m = 0; m < w->micro; m++)
			hist[r].sequences += w->mb[r][m].n;
	}
}

/* ---- the loop --------------------------------------------------------------------- */

static int write_metrics(struct trainer *t, const struct window *w,
			 const struct window_result *wr, struct err *e)
{
	json_t *toks = json_array();
	for (int r = 0; r < w->world; r++)
		json_array_append_new(toks, json_integer(wr->rank_tokens[r]));
	json_t *j = json_pack("{s:I, s:I, s:I, s:o, s:I, s:b, s:o, s:o, s:f, s:f, s:f, s:s}", "step",
			      (json_int_t)t->step, "window", (json_int_t)w->index + 1, "updates_done",
			      (json_int_t)t->r.eng->updates_done, "rank_tokens", toks, "N",
			      (json_int_t)wr->N, "rejected", wr->rejected, "loss",
			      wr->rejected ? json_null() : json_real(wr->loss), "grad_norm",
			      wr->rejected ? json_null() : json_real(wr->grad_norm), "seconds",
			      wr->seconds, "tokens_per_s",
			      wr->seconds > 0 ? (double)wr->N / wr->seconds : 0.0, "seconds_coll",
			      wr->seconds_coll, "backend", engine_backend_name(t->r.eng));
	char *text = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
	json_decref(j);
	if (!text)
		return ERR(e, ERR_IO, "%s: cannot serialize a metrics line", t->o->metrics_path);
	int bad = fprintf(t->metrics, "%s\n", text) < 0 || fflush(t->metrics) != 0;
	free(text);
	if (bad)
		return ERR_ERRNO(e, "%s: cannot write metrics", t->o->metrics_path);
	return ERR_OK;
}

static int is_ckpt_step(const struct train_opts *o, int64_t step)
{
	return o->ckpt_root[0] &&
	       (step == o->stop_at || (o->checkpoint_every > 0 && step % o->checkpoint_every == 0));
}

static void fill_result(struct trainer *t, struct train_result *res)
{
	res->step = t->step;
	res->updates_done = t->r.eng->updates_done;
	memcpy(res->hist, t->hist, sizeof t->hist);
	snprintf(res->backend, sizeof res->backend, "%s", engine_backend_name(t->r.eng));
	res->tokens_per_s = res->seconds > 0 ? (double)res->tokens / res->seconds : 0.0;
}

void train_result_free(struct train_result *r)
{
	if (!r)
		return;
	free(r->params);
	free(r->momentum);
	r->params = r->momentum = NULL;
}

static int train_run_held(const struct env *v, const struct train_opts *o, struct train_result *res,
			  struct err *e)
{
	struct trainer t;
	struct train_ckpt ck;
	struct corpus c;
	int rc, have_run = 0;
	const char *why = NULL;

	memset(res, 0, sizeof *res);
	memset(&t, 0, sizeof t);
	memset(&ck, 0, sizeof ck);
	res->first_loss = res->last_loss = NAN;
	t.v = v;
	t.o = o;
	t.last_loss = NAN;
	t.last_ckpt_step = -1;
	if (o->stop_at < 1)
		return ERR(e, ERR_USAGE, "train: nothing to run up to step %" PRId64, o->stop_at);
	if ((rc = train_corpus(v, o->resume_dir == NULL, &c, e)))
		return rc;
	if (o->resume_dir) {
		if ((rc = train_ckpt_load(v, o->resume_dir, &c, TRAIN_CHECK_ALL, &ck, e)))
			goto out_corpus;
		if (ck.normalization != o->mode) {
			rc = ERR(e, ERR_DATA, "checkpoint %s was trained with normalization %s, this run "
				 "uses %s", o->resume_dir, norm_mode_name(ck.normalization),
				 norm_mode_name(o->mode));
			goto out_corpus;
		}
		/* [train] updates is not a math key: a resume may lengthen a run, but not end it
		 * before the step it already reached */
		if (ck.step > o->stop_at) {
			rc = ERR(e, ERR_CONFIG, "checkpoint %s is at step %" PRId64 ", past step %" PRId64
				 " where this run ends (raise [train] updates to continue it)",
				 o->resume_dir, ck.step, o->stop_at);
			goto out_corpus;
		}
	}
	if (o->resume_dir && o->on_resume)
		o->on_resume(o->on_resume_arg, &ck);
	if ((rc = train_open(v, &t.r, &c, o->resume_dir ? &ck : NULL, e)))
		goto out;
	have_run = 1;
	if (o->resume_dir) {
		if (strcmp(ck.backend, engine_backend_name(t.r.eng)) != 0)
			env_info(v, "train: note: checkpoint written by the %s backend, continuing on %s "
				 "(bit-exact equality holds only on one backend)", ck.backend,
				 engine_backend_name(t.r.eng));
		t.step = ck.step;
		t.last_ckpt_step = ck.step;
		t.last_loss = ck.last_loss;
		memcpy(t.hist, ck.hist, sizeof t.hist);
		snprintf(res->checkpoint, sizeof res->checkpoint, "%s", o->resume_dir);
	}
	res->start_step = t.step;
	res->n = t.r.eng->shape.n_params;
	t.params = malloc(res->n * sizeof(float));
	t.momentum = malloc(res->n * sizeof(float));
	if (!t.params || !t.momentum) {
		rc = ERR(e, ERR_DEVICE, "out of memory");
		goto out;
	}
	/* the checkpoint root must be usable before any window is spent: a bad
	 * run.artifacts found at the first checkpoint would lose the work done so far */
	if (o->ckpt_root[0] && (rc = env_dir_ready(o->ckpt_root, "[run] artifacts", e)))
		goto out;
	if (o->metrics_path[0] && t.step < o->stop_at) {
		if (!(t.metrics = fopen(o->metrics_path, "w"))) {
			rc = ERR_ERRNO(e, "cannot create %s", o->metrics_path);
			goto out;
		}
	}

	int progress_shown = 0;
	while (t.step < o->stop_at) {
		struct window_result wr;
		int flags = ENGINE_UPDATE | ENGINE_CAPTURE_REDUCED;
#ifndef NDEBUG
		flags |= ENGINE_CHECK_REPLICAS;
#else
		if (is_ckpt_step(o, t.step + 1))
			flags |= ENGINE_CHECK_REPLICAS;
#endif
		if (env_stop_requested(v))
			break;
		if ((rc = sampler_next(&t.r.sampler, &t.r.w, e)))
			goto out;
		if ((rc = engine_window(t.r.eng, &t.r.w, o->mode, flags, &wr, e)))
			goto out;
		if (wr.rejected && v->s->empty_window == EMPTY_ERROR) {
			rc = ERR(e, ERR_EMPTY, "window %" PRId64 " (step %" PRId64 ") has no supervised "
				 "token on any rank; train.empty_window = error (set it to skip to step "
				 "over such windows)", t.r.w.index + 1, t.step + 1);
			goto out;
		}
		t.step++;
		if (wr.rejected)
			res->skipped++;
		train_history_add(t.hist, &t.r.w);
		res->seconds += wr.seconds;
		res->tokens += wr.N;
		if (!wr.rejected) {
			t.last_loss = wr.loss;
			if (isnan(res->first_loss))
				res->first_loss = wr.loss;
			res->last_loss = wr.loss;
		}
		if (t.metrics && (rc = write_metrics(&t, &t.r.w, &wr, e)))
			goto out;
		env_progress(v, "train: step %" PRId64 "/%" PRId64 "  loss %.4f  N %" PRId64
			     "  %.0f tokens/s", t.step, o->stop_at, t.last_loss, wr.N,
			     wr.seconds > 0 ? wr.N / wr.seconds : 0.0);
		progress_shown = 1;
		if (o->on_window && o->on_window(o->on_window_arg, t.step, &wr))
			break;
		if (t.step < o->stop_at && is_ckpt_step(o, t.step) && !env_stop_requested(v)) {
			if ((rc = write_checkpoint(&t, res->checkpoint, sizeof res->checkpoint, e)))
				goto out;
			res->checkpoints_written++;
		}
	}
	if (progress_shown)
		env_progress_end(v);
	/* the final (or interrupting) checkpoint, unless this step is already on disk */
	if (o->ckpt_root[0] && t.step != t.last_ckpt_step && t.step > 0) {
		if ((rc = write_checkpoint(&t, res->checkpoint, sizeof res->checkpoint, e)))
			goto out;
		res->checkpoints_written++;
	}
	/* a signal counts even when it arrived in the last window or while the final
	 * checkpoint was written: the run is then complete, but the caller (the protocol)
	 * must stop rather than go on to its next step */
	if (t.step < o->stop_at || env_stop_requested(v)) {
		res->interrupted = 1;
		why = env_stop_name(env_stop_requested(v));
	}
	res->params = malloc(res->n * sizeof(float));
	res->momentum = malloc(res->n * sizeof(float));
	if (!res->params || !res->momentum) {
		rc = ERR(e, ERR_DEVICE, "out of memory");
		goto out;
	}
	if ((rc = engine_get_state(t.r.eng, res->params, res->momentum, e)))
		goto out;
	fill_result(&t, res);
	if (res->interrupted) {
		if (res->checkpoints_written == 0 && o->resume_dir)
			rc = ERR(e, ERR_INTERRUPTED, "interrupted by %s before any step: the state is "
				 "still that of checkpoint %s (continue with --resume %s)", why,
				 o->resume_dir, o->resume_dir);
		else if (res->checkpoints_written == 0 && t.step == 0)
			rc = ERR(e, ERR_INTERRUPTED, "interrupted by %s before the first step: "
				 "nothing to save", why);
		else if (res->checkpoint[0] && t.step >= o->stop_at)
			rc = ERR(e, ERR_INTERRUPTED, "interrupted by %s in the last window: the run "
				 "completed its %" PRId64 " steps, checkpoint %s written", why, t.step,
				 res->checkpoint);
		else if (res->checkpoint[0])
			rc = ERR(e, ERR_INTERRUPTED, "interrupted by %s after step %" PRId64 " of %" PRId64
				 ": checkpoint %s written (continue with --resume %s)", why, t.step,
				 o->stop_at, res->checkpoint, res->checkpoint);
		else
			rc = ERR(e, ERR_INTERRUPTED, "interrupted by %s after step %" PRId64 " of %" PRId64
				 " (no checkpoint root configured)", why, t.step, o->stop_at);
	}
out:
	if (t.metrics && fclose(t.metrics) != 0 && rc == ERR_OK)
		rc = ERR_ERRNO(e, "cannot write %s", o->metrics_path);
	free(t.params);
	free(t.momentum);
	if (have_run)
		run_close(&t.r);
	train_ckpt_free(&ck);
	if (rc && rc != ERR_INTERRUPTED)
		train_result_free(res);
	return rc;
out_corpus:
	corpus_free(&c);
	train_ckpt_free(&ck);
	return rc;
}

int train_run(const struct env *v, const struct train_opts *o, struct train_result *res,
	      struct err *e)
{
	return train_run_held(v, o, res, e);
}
