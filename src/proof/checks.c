/*
 * checks: check-loss, the exercise and the resume comparison (see checks.h).
 */
#include "checks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "corpus_arrays.h"
#include "corpus_files.h"
#include "engine.h"
#include "norm.h"
#include "sampler.h"
#include "train_loop.h"

/* ---- check-loss --------------------------------------------------------------------- */

void check_loss_run(struct check_loss_result *res)
{
	memset(res, 0, sizeof *res);
	res->sums[0] = 12.0;
	res->sums[1] = 108.0;
	res->counts[0] = 12;
	res->counts[1] = 36;
	/* the same normalization function the trainer uses, under both reduce ops */
	res->mean_of_means = norm_window_loss(NORM_MEAN_OF_MEANS, 1, 2, res->sums, res->counts);
	res->global_mean = norm_window_loss(NORM_GLOBAL_TOKEN, 1, 2, res->sums, res->counts);
	res->mean_of_means_sum = norm_window_loss(NORM_MEAN_OF_MEANS, 0, 2, res->sums, res->counts);
	res->global_mean_sum = norm_window_loss(NORM_GLOBAL_TOKEN, 0, 2, res->sums, res->counts);
	res->ok = res->mean_of_means == 2.0 && res->global_mean == 2.5 &&
		  res->mean_of_means_sum == 2.0 && res->global_mean_sum == 2.5;
}

/* What the collective reports when rank r backpropagates norm_factor(mode) times its
 * weighted loss sum, the counts being the weight sums (by_count: the token counts). */
static double weighted_loss(int mode, int reduce_avg, const struct check_loss_result *r)
{
	double scaled[2], W = r->w_weights[0] + r->w_weights[1];
	double N = (double)(r->counts[0] + r->counts[1]);
	for (int q = 0; q < 2; q++)
		scaled[q] = r->w_sums[q] * (mode == NORM_WEIGHTS_BY_COUNT
			? norm_factor(NORM_GLOBAL_TOKEN, reduce_avg, 2, 1, N, 0, 0)
			: norm_factor(mode, reduce_avg, 2, 1, W, r->w_weights[q], r->w_weights[q]));
	return norm_collective(reduce_avg, 2, scaled);
}

void check_loss_weighted(struct check_loss_result *res)
{
	const double w0 = 2.0, w1 = 0.5, want = 13.0 / 7.0;
	res->weighted = 1;
	res->w_sums[0] = w0 * res->sums[0];
	res->w_sums[1] = w1 * res->sums[1];
	res->w_weights[0] = w0 * (double)res->counts[0];
	res->w_weights[1] = w1 * (double)res->counts[1];
	res->weighted_mean = weighted_loss(NORM_GLOBAL_TOKEN, 1, res);
	res->weighted_mean_sum = weighted_loss(NORM_GLOBAL_TOKEN, 0, res);
	res->weighted_by_count = weighted_loss(NORM_WEIGHTS_BY_COUNT, 1, res);
	res->ok = res->ok && fabs(res->weighted_mean - want) <= 1e-15 * want &&
		  fabs(res->weighted_mean_sum - want) <= 1e-15 * want &&
		  res->weighted_by_count == 1.625;
}

/* ---- the exercise ------------------------------------------------------------------- */

/* The two-sequence corpus of one case: rank 0's sequence, then rank 1's prefix. */
static int case_corpus(const struct corpus *full, int short_len, int long_id, int long_len,
		       struct corpus *c, struct err *e)
{
	int32_t lengths[2] = {short_len, long_len}, prefix[2] = {0, 0};
	int32_t *tok = malloc(sizeof(int32_t) * (size_t)(short_len + long_len));
	memset(c, 0, sizeof *c);
	if (!tok)
		return ERR(e, ERR_NOMEM, "out of memory");
	memcpy(tok, full->tokens + full->offset[0], sizeof(int32_t) * short_len);
	memcpy(tok + short_len, full->tokens + full->offset[long_id], sizeof(int32_t) * long_len);
	int rc = corpus_from_arrays(2, lengths, prefix, tok, full->vocab, c, e);
	free(tok);
	return rc;
}

/* The window of the case under global_token, then under mean_of_means: how far apart the
 * two reduced gradients are, and the ranks' token counts and loss sums. */
static int case_gradients(struct engine *eng, const struct window *w, const float *params,
			  struct exercise_case *out, struct err *e)
{
	size_t n = eng->shape.n_params;
	struct window_result res;
	float *g_glob = malloc(n * sizeof(float));
	int rc;
	if (!g_glob)
		return ERR(e, ERR_NOMEM, "out of memory");
	for (int pass = 0; pass < 2; pass++) {
		int mode = pass == 0 ? NORM_GLOBAL_TOKEN : NORM_MEAN_OF_MEANS;
		if ((rc = engine_set_state(eng, params, NULL, 0, e)) != ERR_OK ||
		    (rc = engine_window(eng, w, mode, ENGINE_CAPTURE_REDUCED, &res, e)) != ERR_OK) {
			free(g_glob);
			return rc;
		}
		if (pass == 0)
			memcpy(g_glob, eng->host_reduced, n * sizeof(float));
	}
	double d2 = 0.0, dmax = 0.0, g2 = 0.0;
	for (size_t i = 0; i < n; i++) {
		double d = (double)g_glob[i] - eng->host_reduced[i];
		d2 += d * d;
		g2 += (double)g_glob[i] * g_glob[i];
		dmax = fabs(d) > dmax ? fabs(d) : dmax;
	}
	free(g_glob);
	out->grad_diff_l2 = sqrt(d2);
	out->grad_diff_max = dmax;
	out->grad_l2 = sqrt(g2);
	for (int r = 0; r < 2; r++) {
		out->tokens[r] = res.rank_tokens[r];
		out->sums[r] = res.rank_loss_sum[r];
	}
	return ERR_OK;
}

static int run_case(const struct settings *settings, const struct corpus *full,
		    struct engine_keep *keep, int long_id, int long_len, struct exercise_case *out,
		    struct err *e)
{
	struct settings s = *settings;
	struct corpus c;
	struct engine *eng = NULL;
	struct window w;
	float *params = NULL;
	int short_len = settings->ex_short;
	memset(&w, 0, sizeof w);
	int rc = case_corpus(full, short_len, long_id, long_len, &c, e);
	if (rc != ERR_OK)
		return rc;
	s.vocab = corpus_model_vocab(settings, full);
	s.world = 2;
	s.accumulation = 1;
	s.batch_size = 1;
	s.shards = 0; /* one hand-made window of two ranks: the default mode's step */
	/* the exercise is about tokens: with one sequence per rank the sequence unit would
	 * weigh both ranks alike whatever their lengths */
	s.unit = UNIT_TOKEN;
	s.max_len = long_len > short_len ? long_len : short_len;
	if ((rc = engine_keep_take(keep, &s, &c, NULL, &eng, e)) != ERR_OK ||
	    (rc = window_init(&w, 2, 1, 1, e)) != ERR_OK)
		goto out;
	int ids[2] = {0, 1}, counts[2] = {1, 1};
	ERR_TRY_GOTO(rc, window_assign(&w, &c, ids, counts, e), out);
	if (!(params = malloc(eng->shape.n_params * sizeof(float)))) {
		rc = ERR(e, ERR_NOMEM, "out of memory");
		goto out;
	}
	model_init_params(&eng->shape, settings->seed, params);
	ERR_TRY_GOTO(rc, case_gradients(eng, &w, params, out, e), out);
	out->long_len = long_len;
	/* the two scalar summaries, through the trainer's normalization function */
	out->mean_of_means = norm_window_loss(NORM_MEAN_OF_MEANS, 1, 2, out->sums, out->tokens);
	out->global_mean = norm_window_loss(NORM_GLOBAL_TOKEN, 1, 2, out->sums, out->tokens);
out:
	free(params);
	window_free(&w);
	if (eng)
		engine_keep_give(keep, eng);
	corpus_free(&c);
	return rc;
}

int exercise_run(const struct settings *s, const struct corpus *full, struct engine_keep *keep,
		 struct exercise_result *res, struct err *e)
{
	int longest = 0, rc;
	memset(res, 0, sizeof *res);
	res->short_len = s->ex_short;
	for (int i = 0; i < full->split_count[SPLIT_TRAIN]; i++)
		if (corpus_len(full, i) > corpus_len(full, longest))
			longest = i;
	int need = s->ex_long_before > s->ex_long_after ? s->ex_long_before : s->ex_long_after;
	if (corpus_len(full, 0) < s->ex_short || corpus_len(full, longest) < need)
		return ERR(e, ERR_CONFIG, "[exercise] lengths (%d, %d, %d) exceed the corpus's "
			   "sequences (%d and %d tokens)", s->ex_short, s->ex_long_before,
			   s->ex_long_after, corpus_len(full, 0), corpus_len(full, longest));
	int lens[2] = {s->ex_long_before, s->ex_long_after};
	for (int k = 0; k < 2; k++)
		if ((rc = run_case(s, full, keep, longest, lens[k], &res->cases[k], e)) != ERR_OK)
			return rc;
	const struct exercise_case *equal = &res->cases[0], *unequal = &res->cases[1];
	if (equal->tokens[0] == equal->tokens[1] && equal->grad_diff_max != 0.0)
		res->problem = EXERCISE_EQUAL_DIFFER;
	else if (unequal->tokens[0] != unequal->tokens[1] && unequal->grad_diff_max == 0.0)
		res->problem = EXERCISE_UNEQUAL_SAME;
	res->ok = res->problem == EXERCISE_OK;
	return ERR_OK;
}

/* ---- resume ------------------------------------------------------------------------- */

void resume_compare(const float *params, const float *momentum, int64_t step,
		    const float *cont_params, const float *cont_momentum, int64_t cont_step,
		    size_t n, size_t state_n, struct resume_check *res)
{
	memset(res, 0, sizeof *res);
	res->step = step;
	res->n = n;
	res->max_abs_diff = train_max_abs_diff(params, cont_params, n, &res->params_differing);
	train_max_abs_diff(momentum, cont_momentum, state_n, &res->momentum_differing);
	res->same_step = step == cont_step;
	res->ok = res->params_differing == 0 && res->momentum_differing == 0 && res->same_step;
}
