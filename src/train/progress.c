/*
 * progress: the progress lines of a training run (see progress.h).
 */
#include "progress.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

int64_t progress_stride(int log_every, int64_t steps)
{
	if (log_every > 0)
		return log_every;
	int64_t stride = (steps + PROGRESS_LINES - 1) / PROGRESS_LINES;
	return stride > 0 ? stride : 1;
}

void progress_start(struct progress *p, const struct env *v, int64_t start_step,
		    int64_t stop_at, double now_s)
{
	p->live = v->progress;
	p->lines = !v->progress && v->progress_lines;
	p->every_step = v->s->log_level >= ENV_DEBUG;
	p->start_step = start_step;
	p->stride = progress_stride(v->s->log_every, stop_at - start_step);
	p->auto_gap = v->s->log_every == 0;
	p->last_shown_s = now_s;
	p->shown = 0;
}

int progress_due(const struct progress *p, int64_t step, int64_t stop_at, double now_s)
{
	int64_t done = step - p->start_step;
	return p->every_step || done == 1 || step >= stop_at || done % p->stride == 0 ||
	       (p->auto_gap && now_s - p->last_shown_s >= PROGRESS_MAX_GAP_S);
}

void progress_duration(double s, char *out, size_t cap)
{
	long t = s > 0 && s < 1e9 ? (long)(s + 0.5) : 0;
	if (t >= 3600)
		snprintf(out, cap, "%ldh%02ldm%02lds", t / 3600, t / 60 % 60, t % 60);
	else if (t >= 60)
		snprintf(out, cap, "%ldm%02lds", t / 60, t % 60);
	else
		snprintf(out, cap, "%lds", t);
}

void progress_text(const struct progress_point *pt, char *out, size_t cap)
{
	char elapsed[32], eta[32], val[32] = "";
	progress_duration(pt->elapsed_s, elapsed, sizeof elapsed);
	progress_duration(pt->eta_s, eta, sizeof eta);
	if (!isnan(pt->val_loss))
		snprintf(val, sizeof val, "  val %.4f", pt->val_loss);
	snprintf(out, cap, "train: step %" PRId64 "/%" PRId64 "  loss %.4f%s  lr %g  %.0f tokens/s"
		 "  elapsed %s  ETA %s", pt->step, pt->stop_at, pt->loss, val, pt->lr,
		 pt->tokens_per_s, elapsed, eta);
}

void progress_show(struct progress *p, const struct env *v, const struct progress_point *pt,
		   double now_s)
{
	char line[512];
	if (!p->live && !(p->lines && progress_due(p, pt->step, pt->stop_at, now_s)))
		return;
	progress_text(pt, line, sizeof line);
	if (p->live) {
		env_progress(v, "%s", line);
		p->shown = 1;
		return;
	}
	env_info(v, "%s", line);
	p->last_shown_s = now_s;
}

void progress_end(struct progress *p, const struct env *v)
{
	if (p->shown)
		env_progress_end(v);
	p->shown = 0;
}
