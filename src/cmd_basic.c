/*
 * cmd_basic: the first steps of the protocol: prepare, check-loss, reference.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "fsx.h"
#include "norm.h"
#include "npy.h"
#include "parity.h"
#include "run.h"

int cmd_prepare(struct app *a, struct err *e)
{
	struct corpus c;
	char dir[2048];
	int rc;
	if ((rc = env_outputs_ready(&a->env, e)) != ERR_OK)
		return rc;
	if ((rc = fsx_join(dir, sizeof dir, a->s.outputs, "corpus", e)) != ERR_OK)
		return rc;
	if ((rc = corpus_build(&a->s, &c, e)) != ERR_OK)
		return rc;
	/* a corpus the sampler cannot plan windows from (a band holding fewer sequences than
	 * a window takes) would only be refused by every later command: refuse it here */
	struct sampler sp;
	if ((rc = sampler_init(&sp, &c, &a->s, e)) != ERR_OK) {
		if (rc == ERR_CONFIG)
			err_prefix(e, "%s", a->cfg.path);
		corpus_free(&c);
		return rc;
	}
	sampler_free(&sp);
	if ((rc = corpus_save(&c, &a->s, dir, e)) == ERR_OK) {
		int64_t sup[3] = {0, 0, 0};
		for (int i = 0; i < c.n; i++)
			sup[c.split[i]] += corpus_supervised(&c, i);
		env_info(&a->env, "prepare: %d train, %d validation, %d test sequences; supervised tokens "
			 "%lld / %lld / %lld", c.split_count[0], c.split_count[1], c.split_count[2],
			 (long long)sup[0], (long long)sup[1], (long long)sup[2]);
		env_info(&a->env, "prepare: data lock %s", c.lock);
		env_info(&a->env, "prepare: wrote %s/corpus.bin and %s/data.lock", dir, dir);
	}
	corpus_free(&c);
	return rc;
}

int cmd_check_loss(struct app *a, struct err *e)
{
	const double sums[2] = {12.0, 108.0};
	const int64_t counts[2] = {12, 36};
	int rc;
	if ((rc = env_outputs_ready(&a->env, e)) != ERR_OK)
		return rc;
	/* the same normalization function the trainer uses, under both reduce ops */
	double mom_avg = norm_window_loss(NORM_MEAN_OF_MEANS, 1, 2, sums, counts);
	double glob_avg = norm_window_loss(NORM_GLOBAL_TOKEN, 1, 2, sums, counts);
	double mom_sum = norm_window_loss(NORM_MEAN_OF_MEANS, 0, 2, sums, counts);
	double glob_sum = norm_window_loss(NORM_GLOBAL_TOKEN, 0, 2, sums, counts);
	int ok = mom_avg == 2.0 && glob_avg == 2.5 && mom_sum == 2.0 && glob_sum == 2.5;
	env_info(&a->env, "check-loss: rank 0: loss sum 12 over 12 tokens; rank 1: 108 over 36");
	env_info(&a->env, "check-loss: mean of means %g (expected 2), global token mean %g (expected 2.5) "
		 "[reduce avg]", mom_avg, glob_avg);
	env_info(&a->env, "check-loss: mean of means %g, global token mean %g [reduce sum]", mom_sum,
		 glob_sum);
	json_t *j = json_pack("{s:[i,i], s:[f,f], s:f, s:f, s:f, s:f, s:b}", "local_tokens", 12, 36,
			      "local_loss_sums", 12.0, 108.0, "mean_of_means", mom_avg, "global_mean",
			      glob_avg, "mean_of_means_reduce_sum", mom_sum, "global_mean_reduce_sum",
			      glob_sum, "ok", ok);
	rc = env_write_json(&a->env, "check-loss.json", j, e);
	json_decref(j);
	if (rc != ERR_OK)
		return rc;
	if (!ok)
		return ERR(e, ERR_CHECK, "check-loss: expected 2 and 2.5, got %g and %g (avg), %g and "
			   "%g (sum)", mom_avg, glob_avg, mom_sum, glob_sum);
	env_info(&a->env, "check-loss: ok (written %s/check-loss.json)", a->s.outputs);
	return ERR_OK;
}

static double l2(const float *x, size_t n)
{
	double s = 0.0;
	for (size_t i = 0; i < n; i++)
		s += (double)x[i] * x[i];
	return sqrt(s);
}

int cmd_reference(struct app *a, struct err *e)
{
	struct run r;
	char dir[2048], path[2200];
	float *grad = NULL;
	double loss = 0.0;
	int rc;
	if ((rc = env_outputs_ready(&a->env, e)) != ERR_OK)
		return rc;
	if ((rc = fsx_join(dir, sizeof dir, a->s.outputs, "reference", e)) != ERR_OK ||
	    (rc = fsx_mkdirs(dir, e)) != ERR_OK)
		return rc;
	if ((rc = run_open(&a->env, &r, e)) != ERR_OK)
		return rc;
	size_t n = r.eng->shape.n_params;
	if (!(grad = malloc(n * sizeof(float)))) {
		rc = ERR(e, ERR_DEVICE, "out of memory");
		goto out;
	}
	if ((rc = sampler_next(&r.sampler, &r.w, e)) != ERR_OK)
		goto out;
	if ((rc = engine_reference(r.eng, &r.w, grad, &loss, e)) != ERR_OK)
		goto out;
	snprintf(path, sizeof path, "%s/reference.npy", dir);
	size_t shape[1] = {n};
	if ((rc = npy_write(path, NPY_F32, shape, 1, grad, e)) != ERR_OK)
		goto out;
	double norm = l2(grad, n);
	json_t *j = json_pack("{s:s, s:I, s:f, s:f, s:I, s:s, s:s, s:o, s:o}", "what",
			      "gradient of (sum of token losses of window 1) / N on one device", "N",
			      (json_int_t)r.w.N, "loss", loss, "grad_l2_norm", norm, "components",
			      (json_int_t)n, "file", "reference.npy", "backend",
			      engine_backend_name(r.eng), "layout", run_layout_json(&r.eng->shape),
			      "window", (json_t *)parity_window_json(&r.w));
	rc = env_write_json(&a->env, "reference/reference.json", j, e);
	json_decref(j);
	if (rc != ERR_OK)
		goto out;
	env_info(&a->env, "reference: window 1, N = %lld supervised tokens, loss %.6f, gradient L2 norm "
		 "%.6e over %zu components (%s backend)", (long long)r.w.N, loss, norm, n,
		 engine_backend_name(r.eng));
	env_info(&a->env, "reference: wrote %s/reference.npy and reference.json", dir);
out:
	free(grad);
	run_close(&r);
	return rc;
}
