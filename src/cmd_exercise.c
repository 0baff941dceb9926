/*
 * cmd_exercise: the 12-vs-36-token exercise, computed by the real runtime on the model.
 *
 * Rank 0 keeps `short` supervised tokens; rank 1 goes from `long_before` to
 * `long_after`. The sequences are cut from the corpus (rank 0: the first training
 * sequence; rank 1: a prefix of the longest one, so the 36-token case extends the
 * 12-token one). For both cases the two ranks run one window on W = 2 device threads,
 * once with the correct global_token normalization and once with mean_of_means; we
 * print the mean of local means, the global token mean, and how far apart the two
 * gradients are.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "engine.h"
#include "norm.h"

struct exercise_case {
	int long_len;
	double mean_of_means, global_mean;
	double grad_diff_l2, grad_diff_max, grad_l2;
	int64_t tokens[2];
	double sums[2];
};

static int run_case(struct app *a, const struct corpus *full, int long_id, int long_len,
		    struct exercise_case *out, struct err *e)
{
	struct settings s = a->s;
	struct corpus c;
	struct engine *eng = NULL;
	struct window w;
	float *params = NULL, *g_glob = NULL;
	int rc;
	int short_len = a->s.ex_short;
	int32_t lengths[2] = {short_len, long_len}, prefix[2] = {0, 0};
	int32_t *tok = malloc(sizeof(int32_t) * (size_t)(short_len + long_len));
	if (!tok)
		return ERR(e, ERR_DEVICE, "out of memory");
	memcpy(tok, full->tokens + full->offset[0], sizeof(int32_t) * short_len);
	memcpy(tok + short_len, full->tokens + full->offset[long_id], sizeof(int32_t) * long_len);
	memset(&c, 0, sizeof c);
	memset(&w, 0, sizeof w);
	rc = corpus_from_arrays(2, lengths, prefix, tok, full->vocab, &c, e);
	free(tok);
	if (rc != ERR_OK)
		return rc;
	s.world = 2;
	s.accumulation = 1;
	s.batch_size = 1;
	s.max_len = long_len > short_len ? long_len : short_len;
	if ((rc = engine_create(&s, &c, NULL, &eng, e)) != ERR_OK)
		goto out;
	if ((rc = window_init(&w, 2, 1, 1, e)) != ERR_OK)
		goto out;
	int ids[2] = {0, 1}, counts[2] = {1, 1};
	if ((rc = window_assign(&w, &c, ids, counts, e)) != ERR_OK)
		goto out;
	size_t n = eng->shape.n_params;
	params = malloc(n * sizeof(float));
	g_glob = malloc(n * sizeof(float));
	if (!params || !g_glob) {
		rc = ERR(e, ERR_DEVICE, "out of memory");
		goto out;
	}
	model_init_params(&eng->shape, a->s.seed, params);
	struct window_result res;
	for (int pass = 0; pass < 2; pass++) {
		int mode = pass == 0 ? NORM_GLOBAL_TOKEN : NORM_MEAN_OF_MEANS;
		if ((rc = engine_set_state(eng, params, NULL, 0, e)) != ERR_OK ||
		    (rc = engine_window(eng, &w, mode, ENGINE_CAPTURE_REDUCED, &res, e)) != ERR_OK)
			goto out;
		if (pass == 0) {
			memcpy(g_glob, eng->host_reduced, n * sizeof(float));
			continue;
		}
		double d2 = 0.0, dmax = 0.0, g2 = 0.0;
		for (size_t i = 0; i < n; i++) {
			double d = (double)g_glob[i] - eng->host_reduced[i];
			d2 += d * d;
			g2 += (double)g_glob[i] * g_glob[i];
			dmax = fabs(d) > dmax ? fabs(d) : dmax;
		}
		out->grad_diff_l2 = sqrt(d2);
		out->grad_diff_max = dmax;
		out->grad_l2 = sqrt(g2);
	}
	out->long_len = long_len;
	for (int r = 0; r < 2; r++) {
		out->tokens[r] = res.rank_tokens[r];
		out->sums[r] = res.rank_loss_sum[r];
	}
	/* the two scalar summaries, through the trainer's normalization function */
	out->mean_of_means = norm_window_loss(NORM_MEAN_OF_MEANS, 1, 2, out->sums, out->tokens);
	out->global_mean = norm_window_loss(NORM_GLOBAL_TOKEN, 1, 2, out->sums, out->tokens);
out:
	free(params);
	free(g_glob);
	window_free(&w);
	engine_destroy(eng);
	corpus_free(&c);
	return rc;
}

int cmd_exercise(struct app *a, struct err *e)
{
	struct corpus full;
	struct exercise_case cases[2];
	int rc;
	if ((rc = env_outputs_ready(&a->env, e)) != ERR_OK)
		return rc;
	if ((rc = corpus_build(&a->s, &full, e)) != ERR_OK)
		return rc;
	int longest = 0;
	for (int i = 0; i < full.split_count[SPLIT_TRAIN]; i++)
		if (corpus_len(&full, i) > corpus_len(&full, longest))
			longest = i;
	int need = a->s.ex_long_before > a->s.ex_long_after ? a->s.ex_long_before : a->s.ex_long_after;
	if (corpus_len(&full, 0) < a->s.ex_short || corpus_len(&full, longest) < need) {
		rc = ERR(e, ERR_CONFIG, "%s: [exercise] lengths (%d, %d, %d) exceed the corpus's "
			 "sequences (%d and %d tokens)", a->cfg.path, a->s.ex_short,
			 a->s.ex_long_before, a->s.ex_long_after, corpus_len(&full, 0),
			 corpus_len(&full, longest));
		goto out;
	}
	int lens[2] = {a->s.ex_long_before, a->s.ex_long_after};
	memset(cases, 0, sizeof cases);
	for (int k = 0; k < 2; k++)
		if ((rc = run_case(a, &full, longest, lens[k], &cases[k], e)) != ERR_OK)
			goto out;
	env_info(&a->env, "exercise: prediction with 1 loss per token on rank 0 and 3 on rank 1: "
		 "%d/%d tokens give 2 and 2; %d/%d tokens give 2 (mean of means) and %.4g (global)",
		 a->s.ex_short, lens[0], a->s.ex_short, lens[1],
		 (a->s.ex_short * 1.0 + lens[1] * 3.0) / (a->s.ex_short + lens[1]));
	env_info(&a->env, "exercise: %-14s %9s %9s %14s %12s %16s %16s", "case", "tokens r0", "tokens r1",
		 "mean of means", "global mean", "|dgrad| L2", "|dgrad| max");
	json_t *arr = json_array();
	for (int k = 0; k < 2; k++) {
		struct exercise_case *x = &cases[k];
		char name[32];
		snprintf(name, sizeof name, "rank1 = %d", lens[k]);
		env_info(&a->env, "exercise: %-14s %9lld %9lld %14.6f %12.6f %16.6e %16.6e", name,
			 (long long)x->tokens[0], (long long)x->tokens[1], x->mean_of_means,
			 x->global_mean, x->grad_diff_l2, x->grad_diff_max);
		json_array_append_new(arr, json_pack("{s:[I,I], s:[f,f], s:f, s:f, s:f, s:f, s:f}",
			"tokens", (json_int_t)x->tokens[0], (json_int_t)x->tokens[1], "loss_sums",
			x->sums[0], x->sums[1], "mean_of_means", x->mean_of_means, "global_mean",
			x->global_mean, "grad_diff_l2", x->grad_diff_l2, "grad_diff_max",
			x->grad_diff_max, "grad_l2_global_token", x->grad_l2));
	}
	env_info(&a->env, "exercise: W stays 2; only N changes. The gap between the two normalizations "
		 "grows with the token imbalance (zero only when the counts are equal).");
	json_t *j = json_pack("{s:o}", "cases", arr);
	rc = env_write_json(&a->env, "exercise.json", j, e);
	json_decref(j);
	if (rc == ERR_OK && cases[0].tokens[0] == cases[0].tokens[1] &&
	    cases[0].grad_diff_max != 0.0)
		rc = ERR(e, ERR_CHECK, "exercise: with equal token counts both normalizations must give "
			 "the same gradient (max difference %g)", cases[0].grad_diff_max);
	if (rc == ERR_OK && cases[1].tokens[0] != cases[1].tokens[1] && cases[1].grad_diff_max == 0.0)
		rc = ERR(e, ERR_CHECK, "exercise: unequal counts but identical gradients");
out:
	corpus_free(&full);
	return rc;
}
