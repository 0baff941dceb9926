/*
 * step_check_loss: the protocol's check-loss step (computed in checks.c): the two-rank
 * counterexample printed and written to check_loss.json.
 */
#include "step_check_loss.h"

#include "outputs.h"
#include "report.h"

static void check_loss_print(const struct app *a, const struct check_loss_result *r)
{
	env_info(&a->env, "check-loss: rank 0: loss sum %g over %lld tokens; rank 1: %g over %lld",
		 r->sums[0], (long long)r->counts[0], r->sums[1], (long long)r->counts[1]);
	env_info(&a->env, "check-loss: mean of means %g (expected 2), global token mean %g (expected 2.5) "
		 "[reduce avg]", r->mean_of_means, r->global_mean);
	env_info(&a->env, "check-loss: mean of means %g, global token mean %g [reduce sum]",
		 r->mean_of_means_sum, r->global_mean_sum);
	if (!r->weighted)
		return;
	env_info(&a->env, "check-loss: weighted (train.class_weights): rank 0's tokens weigh 2, "
		 "rank 1's 0.5: weighted sums %g and %g over weight sums %g and %g",
		 r->w_sums[0], r->w_sums[1], r->w_weights[0], r->w_weights[1]);
	env_info(&a->env, "check-loss: weighted mean %.9f (expected 78/42 = 13/7 = 1.857142857) "
		 "[avg], %.9f [sum]; divided by N instead: %g (78/48)", r->weighted_mean,
		 r->weighted_mean_sum, r->weighted_by_count);
}

int check_loss_step(struct app *a, struct check_loss_result *res, struct err *e)
{
	int rc;
	if ((rc = env_outputs_ready(&a->env, e)) != ERR_OK)
		return rc;
	check_loss_run(res);
	if (a->s.class_weights[0])
		check_loss_weighted(res);
	check_loss_print(a, res);
	if ((rc = report_write_json(a, OUT_CHECK_LOSS, check_loss_json(res), e)) != ERR_OK)
		return rc;
	if (!res->ok)
		return ERR(e, ERR_CHECK, "check-loss: expected 2 and 2.5, got %g and %g (avg), %g and "
			   "%g (sum)%s", res->mean_of_means, res->global_mean, res->mean_of_means_sum,
			   res->global_mean_sum, res->weighted ? "; weighted: expected 13/7 and 1.625"
			   : "");
	env_info(&a->env, "check-loss: ok (written %s/%s)", a->s.outputs, output_name(OUT_CHECK_LOSS));
	return ERR_OK;
}
