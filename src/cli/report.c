/*
 * report: the results as JSON, and the protocol's report.md and report.json (see report.h).
 */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus_core.h"
#include "fsx.h"
#include "gemm.h"
#include "norm.h"

/* ---- writing JSON ------------------------------------------------------------------- */

int report_write_json(struct app *a, enum output_id id, json_t *j, struct err *e)
{
	int rc = env_write_json(&a->env, output_name(id), j, e);
	json_decref(j);
	return rc;
}

int report_json_file(const char *path, const json_t *j, struct err *e)
{
	char *text;
	size_t len;
	int rc = env_json_text(j, 0, &text, &len, path, e);
	if (rc == ERR_OK)
		rc = fsx_write_atomic(path, text, len, e);
	free(text);
	return rc;
}

/* ---- the results as JSON ------------------------------------------------------------ */

json_t *check_loss_json(const struct check_loss_result *r)
{
	json_t *j = json_pack("{s:[I,I], s:[f,f], s:f, s:f, s:f, s:f, s:b}", "local_tokens",
			      (json_int_t)r->counts[0], (json_int_t)r->counts[1], "local_loss_sums",
			      r->sums[0], r->sums[1], "mean_of_means", r->mean_of_means,
			      "global_mean", r->global_mean, "mean_of_means_reduce_sum",
			      r->mean_of_means_sum, "global_mean_reduce_sum", r->global_mean_sum,
			      "ok", r->ok);
	if (j && r->weighted) /* train.class_weights: the weighted form too */
		json_object_set_new(j, "weighted", json_pack(
			"{s:[f,f], s:[f,f], s:f, s:f, s:f}", "weighted_loss_sums", r->w_sums[0],
			r->w_sums[1], "weight_sums", r->w_weights[0], r->w_weights[1],
			"weighted_mean", r->weighted_mean, "weighted_mean_reduce_sum",
			r->weighted_mean_sum, "divided_by_token_count", r->weighted_by_count));
	return j;
}

/* a bounded figure, or -1 for an unbounded one */
static double finite_or_minus_one(double x)
{
	return isfinite(x) ? x : -1.0;
}

static json_t *parity_mode_json(const struct parity_mode_result *m)
{
	int global = m->mode == NORM_GLOBAL_TOKEN;
	return json_pack("{s:s, s:I, s:o, s:o, s:I, s:b, s:b, s:b, s:b, s:f, s:f, s:s, s:f}",
			 "normalization", norm_mode_name(m->mode), "components",
			 (json_int_t)m->st.components, "max_abs_err",
			 parity_json_number(m->st.max_abs), "max_rel_err",
			 parity_json_number(m->st.max_rel), "outside", (json_int_t)m->st.outside,
			 "pass", m->st.pass, "negative_control", !global, "distinguishable",
			 global || m->control != PARITY_SAME, "required", m->required, "effect",
			 finite_or_minus_one(m->effect), "factor_gap",
			 finite_or_minus_one(m->factor_gap), "verdict", parity_verdict_text(m->verdict),
			 "loss", m->loss);
}

json_t *parity_json(const struct parity_result *r)
{
	json_t *modes = json_array();
	for (int mode = 0; mode < NORM_MODES; mode++)
		if (r->modes[mode].present)
			json_array_append_new(modes, parity_mode_json(&r->modes[mode]));
	json_t *bitwise = NULL;
	if (r->shards > 0) /* exact mode: the bit-for-bit comparison */
		bitwise = json_pack("{s:i, s:s, s:I, s:I, s:b}", "shards", r->shards, "shard_order",
				    r->shard_order == SHARD_ORDER_BALANCED ? "balanced" : "length",
				    "components", (json_int_t)r->ref.n, "differ",
				    (json_int_t)r->bits_differ, "loss_differs", r->loss_bits_differ);
	return json_pack("{s:I, s:s, s:i, s:i, s:s, s:s, s:f, s:f, s:f, s:o, s:o, s:o*, s:b}",
			 "N", (json_int_t)r->ref.w.N, "unit",
			 r->unit == UNIT_SEQUENCE ? "sequence" : "token", "world", r->world,
			 "accumulation", r->accumulation,
			 "reduce", r->reduce_avg ? "avg" : "sum", "backend", r->ref.backend, "atol",
			 r->atol, "rtol", r->rtol, "reference_loss", r->ref.loss, "window",
			 parity_window_json(&r->ref.w), "modes", modes, "bitwise", bitwise, "ok", r->ok);
}

json_t *exercise_json(const struct exercise_result *r)
{
	json_t *cases = json_array();
	for (int k = 0; k < 2; k++) {
		const struct exercise_case *x = &r->cases[k];
		json_array_append_new(cases, json_pack("{s:[I,I], s:[f,f], s:f, s:f, s:f, s:f, s:f}",
			"tokens", (json_int_t)x->tokens[0], (json_int_t)x->tokens[1], "loss_sums",
			x->sums[0], x->sums[1], "mean_of_means", x->mean_of_means, "global_mean",
			x->global_mean, "grad_diff_l2", x->grad_diff_l2, "grad_diff_max",
			x->grad_diff_max, "grad_l2_global_token", x->grad_l2));
	}
	return json_pack("{s:o}", "cases", cases);
}

json_t *empty_window_json(const struct empty_window_result *r)
{
	return json_pack("{s:b, s:b, s:I, s:o}", "declined_by_all_ranks", r->declined_by_all,
			 "local_empty_rank_matches", r->local_matches, "local_empty_outside",
			 (json_int_t)r->local.outside, "local_empty_max_abs",
			 parity_json_number(r->local.max_abs));
}

static json_t *split_json(const struct train_split_eval *s)
{
	json_t *j = json_pack("{s:I, s:I, s:I, s:o, s:o, s:o, s:I, s:o}", "sequences",
			 (json_int_t)s->sequences, "tokens", (json_int_t)s->tokens, "hits",
			 (json_int_t)s->hits, "loss_sum", parity_json_number(s->loss_sum), "loss",
			 parity_json_number(s->loss), "accuracy", parity_json_number(s->accuracy),
			 "constant_guess_hits", (json_int_t)s->const_hits, "constant_guess_accuracy",
			 parity_json_number(s->const_accuracy));
	if (j && s->bytes) { /* text: what bits per byte counted */
		json_object_set_new(j, "bytes", json_integer(s->bytes));
		json_object_set_new(j, "bits_per_byte", parity_json_number(s->bits_per_byte));
	}
	return j;
}

json_t *train_summary_json(int kind, const struct train_result *res, int world)
{
	json_t *ranks = json_array();
	for (int r = 0; r < world; r++)
		json_array_append_new(ranks, json_pack("{s:i, s:I, s:I, s:I}", "rank", r, "windows",
						       (json_int_t)res->hist[r].windows, "sequences",
						       (json_int_t)res->hist[r].sequences, "tokens",
						       (json_int_t)res->hist[r].tokens));
	return json_pack("{s:s, s:I, s:I, s:I, s:I, s:s, s:b, s:o, s:o, s:I, s:f, s:f, s:s, s:o}",
			 "run", output_run_name(kind), "start_step", (json_int_t)res->start_step,
			 "step", (json_int_t)res->step, "updates_done", (json_int_t)res->updates_done,
			 "skipped_windows", (json_int_t)res->skipped, "checkpoint", res->checkpoint,
			 "interrupted", res->interrupted, "first_loss",
			 parity_json_number(res->first_loss), "last_loss",
			 parity_json_number(res->last_loss), "tokens", (json_int_t)res->tokens,
			 "seconds", res->seconds, "tokens_per_s", res->tokens_per_s, "backend",
			 res->backend, "ranks", ranks);
}

json_t *evaluate_json(const struct train_eval *ev, int source)
{
	return json_pack("{s:s, s:I, s:s, s:I, s:o, s:o}", "checkpoint", ev->checkpoint, "step",
			 (json_int_t)ev->step, "backend", ev->backend, "constant_guess_id",
			 (json_int_t)corpus_user_id(source, ev->const_id),
			 "test", split_json(&ev->test), "validation", split_json(&ev->validation));
}

/* ---- report.md ---------------------------------------------------------------------- */

/* whether the training runs ran on the cpu backend, whose bits depend on the GEMM */
static int report_on_cpu(const struct report *p)
{
	return strcmp(p->backend, "cpu") == 0;
}

static void md_header(FILE *f, const struct app *a, const struct report *p)
{
	const struct settings *s = &a->s;
	fprintf(f, "# ddptok report\n\n");
	fprintf(f, "Configuration `%s`: W = %d ranks, accumulation %d, batch %d sequences per rank "
		"and microbatch, reduce %s, plan %s%s, layout %s, normalization %s, weighting unit %s, "
		"backend %s%s%s.\n\n",
		a->cfg.path, s->world, s->accumulation, s->batch_size,
		s->reduce == COLL_AVG ? "avg" : "sum",
		rank_split_name(s->rank_split),
		s->sampling == SAMPLING_EPOCHS ? " (windows drawn in epochs)" : "",
		s->layout == LAYOUT_PADDED ? "padded" : "packed", norm_mode_name(s->normalization),
		s->unit == UNIT_SEQUENCE ? "sequence (every sequence weighs 1/S)" :
		"token (every supervised token weighs 1/N)", p->backend[0] ? p->backend : "?",
		report_on_cpu(p) ? ", GEMM " : "", report_on_cpu(p) ? gemm_impl_name(gemm_chosen()) :
		"");
	if (report_on_cpu(p))
		fprintf(f, "Every bitwise comparison below (resume, exact mode) held under that one "
			"GEMM implementation (`devices.gemm`); the other one rounds differently.\n\n");
	fprintf(f, "Overall: **%s** (%d failed check%s).\n\n", p->failed_checks ? "FAIL" : "PASS",
		p->failed_checks, p->failed_checks == 1 ? "" : "s");
}

static void md_parity(FILE *f, const struct parity_result *r)
{
	const struct window *w = &r->ref.w;
	fprintf(f, "Window 1, N = %lld supervised tokens (per rank:", (long long)w->N);
	for (int q = 0; q < w->world; q++)
		fprintf(f, " %lld", (long long)w->rank_tokens[q]);
	fprintf(f, "), S = %lld sequences holding one (per rank:", (long long)w->S);
	for (int q = 0; q < w->world; q++)
		fprintf(f, " %lld", (long long)w->rank_sequences[q]);
	fprintf(f, "); every component compared with |g - ref| <= %g + %g |ref|.\n\n", r->atol,
		r->rtol);
	fprintf(f, "| normalization | components | max abs error | max rel error | outside "
		"tolerance | result |\n|---|---:|---:|---:|---:|---|\n");
	for (int mode = 0; mode < NORM_MODES; mode++) {
		const struct parity_mode_result *m = &r->modes[mode];
		if (!m->present)
			continue;
		fprintf(f, "| %s | %zu | %.3e | %.3e | %zu | %s |\n", norm_mode_name(mode),
			m->st.components, m->st.max_abs, m->st.max_rel, m->st.outside,
			parity_verdict_text(m->verdict));
	}
	char bitwise[256];
	parity_bitwise_line(r, bitwise, sizeof bitwise);
	if (bitwise[0])
		fprintf(f, "\nExact mode: %s.\n", bitwise);
	fprintf(f, "\n");
}

static void md_exercise(FILE *f, const struct exercise_result *r)
{
	fprintf(f, "Exercise (rank 0 keeps its tokens, rank 1 grows):\n\n| tokens r0 / r1 | "
		"mean of means | global mean | gradient difference (L2) |\n|---|---:|---:|---:|\n");
	for (int k = 0; k < 2; k++) {
		const struct exercise_case *c = &r->cases[k];
		fprintf(f, "| %lld / %lld | %.6f | %.6f | %.3e |\n", (long long)c->tokens[0],
			(long long)c->tokens[1], c->mean_of_means, c->global_mean, c->grad_diff_l2);
	}
	fprintf(f, "\n");
}

/* Question 1: check-loss, parity, the empty windows, the exercise. */
static void md_gradient(FILE *f, const struct report *p)
{
	const struct empty_window_result *em = &p->empty;
	fprintf(f, "## 1. Does the W-device gradient match the single-device reference?\n\n");
	if (p->have_check_loss)
		fprintf(f, "Counterexample (check-loss): local sums 12 and 108 over 12 and 36 tokens: "
			"mean of means %g, global token mean %g.\n\n", p->check_loss.mean_of_means,
			p->check_loss.global_mean);
	if (p->have_parity)
		md_parity(f, &p->parity);
	fprintf(f, "Empty windows: a window with N = 0 was %s by all %d ranks together%s. A rank "
		"with no token while N > 0 %s the reference (%zu components outside tolerance, "
		"max abs error %.3e).\n\n", em->declined_by_all ? "declined" : "NOT declined",
		em->ranks, em->declined_by_all ? " (no update, no hang)" : "",
		em->local_matches ? "still matches" : "does NOT match", em->local.outside,
		em->local.max_abs);
	if (p->have_exercise)
		md_exercise(f, &p->exercise);
}

/* The z-loss line of the Adaptations section: its share of window 1's reference loss and
 * gradient (the reference less the same window without the term), and its control. */
static void md_z_loss(FILE *f, const struct settings *s, const struct reference_result *ref,
		      const struct parity_mode_result *m)
{
	fprintf(f, "- z-loss: c = %g, c log(Z)^2 per supervised token is %.6f of window 1's loss "
		"%.6f (%.1f%%); its gradient 2 c log(Z) softmax has norm %.3e, %.1f%% of the "
		"reference gradient's %.3e; normalized by the tokens' factor k / N. Control "
		"z_loss_local: %s.\n", s->z_loss, ref->loss_z, ref->loss,
		100.0 * ref->loss_z / ref->loss, ref->z_grad_l2,
		100.0 * ref->z_grad_l2 / ref->grad_l2, ref->grad_l2,
		parity_verdict_text(m->verdict));
}

/* The adaptations configured (docs/adaptations.md), each with what window 1 made of it;
 * nothing when none is. */
static void md_adaptations(FILE *f, const struct app *a, const struct report *p)
{
	const struct settings *s = &a->s;
	const struct reference_result *ref = &p->parity.ref;
	if (s->batching != BATCHING_TOKENS && s->l2 <= 0 && s->z_loss <= 0 && !s->class_weights[0])
		return;
	fprintf(f, "## Adaptations (docs/adaptations.md)\n\n");
	if (s->batching == BATCHING_TOKENS && p->have_parity) {
		fprintf(f, "- Token batching: microbatches of at most %d supervised positions; on "
			"window 1 the ranks ran", s->micro_tokens);
		for (int q = 0; q < ref->w.world; q++)
			fprintf(f, "%s %d", q ? "," : "", ref->w.rank_micro[q]);
		fprintf(f, " microbatches (N = %lld is unchanged: the factor k / N needs no "
			"microbatch count).\n", (long long)ref->w.N);
	}
	if (s->l2 > 0 && p->have_parity) {
		const struct parity_mode_result *m = &p->parity.modes[NORM_L2_EVERY_RANK];
		fprintf(f, "- l2 term: lambda = %g, lambda / 2 ||theta||^2 = %.6f of window 1's loss "
			"%.6f; its gradient lambda theta has norm %.3e, %.1f%% of the reference "
			"gradient's %.3e; added by %s before the gradient collective. Control "
			"l2_every_rank: %s.\n", s->l2, ref->loss_l2, ref->loss, ref->l2_grad_l2,
			100.0 * ref->l2_grad_l2 / ref->grad_l2, ref->grad_l2,
			s->reduce == COLL_AVG ? "every rank (reduce avg)" : "rank 0 alone (reduce sum)",
			parity_verdict_text(m->verdict));
	}
	if (s->z_loss > 0 && p->have_parity)
		md_z_loss(f, s, ref, &p->parity.modes[NORM_Z_LOSS_LOCAL]);
	if (s->class_weights[0] && p->have_parity)
		fprintf(f, "- Class weights (`%s`): window 1's %lld supervised tokens weigh W_sum = %.6g "
			"in all, so each token's factor is k / W_sum instead of k / N (W_sum / N = %.4f); "
			"the ranks' weight sums go through the count collective. Control "
			"weights_by_count (divided by N): %s.\n", s->class_weights,
			(long long)ref->w.N, ref->w.W, ref->w.W / (double)ref->w.N,
			parity_verdict_text(p->parity.modes[NORM_WEIGHTS_BY_COUNT].verdict));
	fprintf(f, "\n");
}

/* Exact mode: the same checkpoint resumed on other device counts. */
static void md_elastic(FILE *f, const struct elastic_check *el)
{
	fprintf(f, "Exact mode: the same checkpoint resumed on other device counts (the "
		"continuous run used %d):\n\n| devices | parameters differing in any bit | momentum "
		"| result |\n|---:|---:|---|---|\n", el->from_world);
	for (int i = 0; i < el->runs; i++)
		fprintf(f, "| %d -> %d | %zu of %zu | %s | %s |\n", el->from_world, el->worlds[i],
			el->resume[i].params_differing, el->resume[i].n,
			el->resume[i].momentum_differing ? "differs" : "identical",
			el->resume[i].ok ? "bit-identical" : "MISMATCH");
	fprintf(f, "\n");
}

static json_t *elastic_json(const struct elastic_check *el)
{
	json_t *runs = json_array();
	for (int i = 0; i < el->runs; i++)
		json_array_append_new(runs, json_pack("{s:i, s:i, s:I, s:b, s:b}", "from_world",
						      el->from_world, "world", el->worlds[i],
						      "params_differing",
						      (json_int_t)el->resume[i].params_differing,
						      "momentum_differs",
						      el->resume[i].momentum_differing != 0,
						      "bit_identical", el->resume[i].ok));
	return json_pack("{s:o, s:b}", "runs", runs, "ok", el->ok);
}

/* Questions 2 and 3: the resume, the test split. */
static void md_resume_eval(FILE *f, const struct app *a, const struct report *p)
{
	const struct resume_check *rs = &p->resume;
	fprintf(f, "## 2. Does a resumed run end exactly where a continuous run ends?\n\n");
	fprintf(f, "Stopped at step %lld (checkpoint `%s`), resumed to %lld, compared with a "
		"continuous run over %zu parameters: max abs difference **%g**, %zu parameters differ "
		"in any bit: **%s**.\n\n", (long long)a->s.stop_at, p->stop_ckpt,
		(long long)a->s.updates, rs->n, rs->max_abs_diff, rs->params_differing,
		rs->ok ? "bit-identical" : "MISMATCH");
	if (p->have_elastic)
		md_elastic(f, &p->elastic);
	fprintf(f, "## 3. What does the trained model achieve on the test split?\n\n");
	if (!p->have_eval)
		return;
	const struct train_split_eval *sp[2] = {&p->eval.test, &p->eval.validation};
	const char *names[2] = {"test", "validation"};
	fprintf(f, "| split | sequences | supervised tokens | loss (token mean) | token "
		"accuracy | best constant guess |\n|---|---:|---:|---:|---:|---:|\n");
	for (int i = 0; i < 2; i++)
		fprintf(f, "| %s | %lld | %lld | %.5f | %.2f%% | %.2f%% |\n", names[i],
			(long long)sp[i]->sequences, (long long)sp[i]->tokens, sp[i]->loss,
			100 * sp[i]->accuracy, 100 * sp[i]->const_accuracy);
	fprintf(f, "\nAfter %lld updates (checkpoint `%s`). The constant guess always predicts "
		"id %lld, the most frequent training target.\n\n", (long long)p->eval.step,
		p->eval.checkpoint, corpus_user_id(a->s.source, p->eval.const_id));
}

/* The figure files as one phrase: "DIR/figure.png and figure.svg". */
static void md_figures(FILE *f, const struct report *p)
{
	fprintf(f, ".\n\nFigure: ");
	if (p->nfigures == 0 && p->figure_skipped[0])
		fprintf(f, "skipped (%s)", p->figure_skipped);
	else if (p->nfigures == 0)
		fprintf(f, "not drawn");
	for (int i = 0; i < p->nfigures; i++) {
		const char *slash = strrchr(p->figures[i], '/');
		fprintf(f, "%s%s", i ? " and " : "", i && slash ? slash + 1 : p->figures[i]);
	}
	fprintf(f, ".\n\n");
}

static void md_timing(FILE *f, const struct report *p)
{
	fprintf(f, "## Timing\n\n| step | seconds | result |\n|---|---:|---|\n");
	for (int i = 0; i < p->nsteps; i++) {
		const struct report_step *s = &p->steps[i];
		if (s->skipped[0])
			fprintf(f, "| %s | %.2f | skipped (%s) |\n", s->name, s->seconds, s->skipped);
		else
			fprintf(f, "| %s | %.2f | %s |\n", s->name, s->seconds, err_code_name(s->rc));
	}
	fprintf(f, "\nTraining throughput: ");
	for (int k = 0; k < 3; k++)
		fprintf(f, "%s%s %lld windows, %.0f supervised tokens/s", k ? "; " : "", output_run_name(k),
			(long long)p->training[k].windows, p->training[k].tokens_per_s);
	md_figures(f, p);
	fprintf(f, "## What this does not show\n\nOne process on one host; the resume happens at "
		"a window boundary chosen by the protocol, not at an arbitrary instant of a "
		"preempted run; no multi-node rendezvous, no recovery policy. See README, "
		"\"Limits\".\n");
}

static int write_md(struct app *a, const struct report *p, struct err *e)
{
	char *md = NULL, path[FSX_PATH_MAX];
	size_t len = 0;
	FILE *f = open_memstream(&md, &len);
	if (!f)
		return ERR_ERRNO(e, "open_memstream");
	md_header(f, a, p);
	md_gradient(f, p);
	md_adaptations(f, a, p);
	md_resume_eval(f, a, p);
	md_timing(f, p);
	if (fclose(f) != 0) {
		free(md);
		return ERR(e, ERR_NOMEM, "report.md: out of memory");
	}
	int rc = fsx_join(path, sizeof path, a->s.outputs, output_name(OUT_REPORT_MD), e);
	if (rc == ERR_OK)
		rc = fsx_write_atomic(path, md, len, e);
	free(md);
	return rc;
}

/* ---- report.json -------------------------------------------------------------------- */

static json_t *steps_json(const struct report *p)
{
	json_t *steps = json_array();
	for (int i = 0; i < p->nsteps; i++) {
		const struct report_step *s = &p->steps[i];
		json_t *js = json_pack("{s:s, s:f, s:s}", "name", s->name, "seconds", s->seconds,
				       "result", s->skipped[0] ? "skipped" : err_code_name(s->rc));
		if (s->skipped[0])
			json_object_set_new(js, "reason", json_string(s->skipped));
		json_array_append_new(steps, js);
	}
	return steps;
}

static json_t *training_json(const struct report *p)
{
	json_t *tp = json_object();
	for (int k = 0; k < 3; k++)
		json_object_set_new(tp, output_run_name(k), json_pack("{s:I, s:f, s:f}", "windows",
			(json_int_t)p->training[k].windows, "seconds", p->training[k].seconds,
			"tokens_per_s", p->training[k].tokens_per_s));
	return tp;
}

static json_t *report_json(const struct app *a, const struct report *p)
{
	const struct resume_check *rs = &p->resume;
	json_t *figures = json_array();
	for (int i = 0; i < p->nfigures; i++)
		json_array_append_new(figures, json_string(p->figures[i]));
	json_t *j = json_pack("{s:b, s:i, s:o?, s:o?, s:o?, s:o, s:{s:I, s:I, s:o, s:I, s:b}, "
			      "s:o, s:o}",
		"ok", p->failed_checks == 0, "failed_checks", p->failed_checks,
		"check_loss", p->have_check_loss ? check_loss_json(&p->check_loss) : NULL,
		"parity", p->have_parity ? parity_json(&p->parity) : NULL,
		"exercise", p->have_exercise ? exercise_json(&p->exercise) : NULL,
		"empty_window", empty_window_json(&p->empty),
		"resume", "stop_at", (json_int_t)a->s.stop_at, "updates", (json_int_t)a->s.updates,
		"max_abs_diff", parity_json_number(rs->max_abs_diff), "params_differing",
		(json_int_t)rs->params_differing, "bit_identical", rs->ok,
		"steps", steps_json(p), "figure", figures);
	if (p->have_eval) {
		const struct train_split_eval *t = &p->eval.test;
		json_object_set_new(j, "test", json_pack("{s:I, s:I, s:f, s:f, s:f, s:I}", "sequences",
			(json_int_t)t->sequences, "tokens", (json_int_t)t->tokens, "loss", t->loss,
			"accuracy", t->accuracy, "constant_guess_accuracy", t->const_accuracy, "step",
			(json_int_t)p->eval.step));
		json_object_set_new(j, "evaluated_checkpoint", json_string(p->eval.checkpoint));
	}
	if (p->have_elastic)
		json_object_set_new(j, "elastic", elastic_json(&p->elastic));
	json_object_set_new(j, "training", training_json(p));
	json_object_set_new(j, "engines", json_pack("{s:i, s:i, s:i}", "created", p->engines_created,
						    "reused", p->engines_reused, "replaced",
						    p->engines_replaced));
	/* the backend that really ran (auto may have taken the CPU) */
	json_object_set_new(j, "backend", p->backend[0] ? json_string(p->backend) : json_null());
	json_object_set_new(j, "gemm", report_on_cpu(p) ? json_string(gemm_impl_name(
					       gemm_chosen())) : json_null());
	return j;
}

int report_write(struct app *a, const struct report *p, struct err *e)
{
	int rc = write_md(a, p, e);
	if (rc == ERR_OK)
		rc = report_write_json(a, OUT_REPORT_JSON, report_json(a, p), e);
	return rc;
}
