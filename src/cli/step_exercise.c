/*
 * step_exercise: the exercise step: the 12-vs-36-token exercise (computed in checks.c),
 * printed and written to exercise.json.
 */
#include "step_exercise.h"

#include <string.h>

#include "outputs.h"
#include "report.h"

static void exercise_print(const struct app *a, const struct exercise_result *r)
{
	int s = r->short_len, before = r->cases[0].long_len, after = r->cases[1].long_len;
	env_info(&a->env, "exercise: prediction with 1 loss per token on rank 0 and 3 on rank 1: "
		 "%d/%d tokens give 2 and 2; %d/%d tokens give 2 (mean of means) and %.4g (global)",
		 s, before, s, after, (s * 1.0 + after * 3.0) / (s + after));
	env_info(&a->env, "exercise: %-14s %9s %9s %14s %12s %16s %16s", "case", "tokens r0", "tokens r1",
		 "mean of means", "global mean", "|dgrad| L2", "|dgrad| max");
	for (int k = 0; k < 2; k++) {
		const struct exercise_case *x = &r->cases[k];
		char name[32];
		snprintf(name, sizeof name, "rank1 = %d", x->long_len);
		env_info(&a->env, "exercise: %-14s %9lld %9lld %14.6f %12.6f %16.6e %16.6e", name,
			 (long long)x->tokens[0], (long long)x->tokens[1], x->mean_of_means,
			 x->global_mean, x->grad_diff_l2, x->grad_diff_max);
	}
	env_info(&a->env, "exercise: W stays 2; only N changes. The gap between the two normalizations "
		 "grows with the token imbalance (zero only when the counts are equal).");
}

int exercise_step(struct app *a, struct exercise_result *res, struct err *e)
{
	struct corpus full;
	int rc;
	memset(res, 0, sizeof *res);
	if ((rc = env_outputs_ready(&a->env, e)) != ERR_OK || (rc = corpus_build(&a->s, &full, e)) != ERR_OK)
		return rc;
	rc = exercise_run(&a->s, &full, a->env.keep, res, e);
	corpus_free(&full);
	if (rc == ERR_CONFIG)
		err_prefix(e, "%s", a->cfg.path);
	if (rc != ERR_OK)
		return rc;
	exercise_print(a, res);
	if ((rc = report_write_json(a, OUT_EXERCISE, exercise_json(res), e)) != ERR_OK)
		return rc;
	if (res->problem == EXERCISE_EQUAL_DIFFER)
		return ERR(e, ERR_CHECK, "exercise: with equal token counts both normalizations must "
			   "give the same gradient (max difference %g)", res->cases[0].grad_diff_max);
	if (res->problem == EXERCISE_UNEQUAL_SAME)
		return ERR(e, ERR_CHECK, "exercise: unequal counts but identical gradients");
	return ERR_OK;
}
