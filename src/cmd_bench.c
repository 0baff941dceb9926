/*
 * cmd_bench: throughput of the training window on the configured backend.
 *
 * Runs a few warm-up windows, then `--windows N` timed training windows (forward,
 * backward, allreduce, SGD) and prints supervised tokens per second, the FLOP rate of
 * the training math (6 (C*D*H + H*V) FLOP per supervised token: two GEMMs forward, four
 * backward), and, measured by this same binary on this machine, the rate of a
 * single-thread cblas_sgemm on the model's largest GEMM shape, so the ratio training
 * rate / (W x sgemm rate) says how close the window step gets to the BLAS bound. It also
 * reports the share of window time spent in collectives (which includes waiting for the
 * slowest rank at their barriers). Figures go to outputs/bench.json as well.
 */
#include <cblas.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "app.h"
#include "outputs.h"
#include "run.h"

/* GFLOP/s of one-thread sgemm C[m x n] = A[m x k] B[k x n]^T, run for ~min_s seconds */
static double sgemm_rate(int m, int n, int k, double min_s)
{
	float *a = malloc(sizeof(float) * (size_t)m * k), *b = malloc(sizeof(float) * (size_t)n * k);
	float *c = malloc(sizeof(float) * (size_t)m * n);
	if (!a || !b || !c) {
		free(a);
		free(b);
		free(c);
		return 0.0;
	}
	for (size_t i = 0; i < (size_t)m * k; i++)
		a[i] = (float)(i % 7) * 0.1f;
	for (size_t i = 0; i < (size_t)n * k; i++)
		b[i] = (float)(i % 5) * 0.1f;
	openblas_set_num_threads(1);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);
	long reps = 0;
	double t0 = clock_now_s(), t;
	do {
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k, 0.0f, c,
			    n);
		reps++;
	} while ((t = clock_now_s() - t0) < min_s);
	free(a);
	free(b);
	free(c);
	return 2.0 * m * n * k * reps / t * 1e-9;
}

int cmd_bench(struct app *a, struct err *e)
{
	struct run r;
	int rc;
	long windows = a->o.windows ? a->o.windows : 20;
	const long warmup = 2;
	if ((rc = env_outputs_ready(&a->env, e)) != ERR_OK)
		return rc;
	if ((rc = run_open(&a->env, &r, e)) != ERR_OK)
		return rc;
	const struct model_shape *m = &r.eng->shape;
	double flop_per_token = 6.0 * ((double)m->context * m->embed * m->hidden +
				       (double)m->hidden * m->vocab);
	int64_t tokens = 0;
	double seconds = 0.0, coll = 0.0, coll_mean = 0.0;
	env_info(&a->env, "bench: %s backend, W = %d, plan %s, layout %s, %ld timed windows after %ld "
		 "warm-up", engine_backend_name(r.eng), a->s.world,
		 a->s.plan == PLAN_BALANCED ? "balanced" : "length_bands",
		 a->s.layout == LAYOUT_PADDED ? "padded" : "packed", windows, warmup);
	for (long i = 0; i < warmup + windows; i++) {
		struct window_result res;
		if ((rc = sampler_next(&r.sampler, &r.w, e)) != ERR_OK ||
		    (rc = engine_window(r.eng, &r.w, a->s.normalization, ENGINE_UPDATE, &res, e)) != ERR_OK)
			goto out;
		if (i < warmup)
			continue;
		tokens += res.N;
		seconds += res.seconds;
		coll += res.seconds_coll;
		coll_mean += res.seconds_coll_mean;
	}
	double tps = tokens / seconds;
	double gflops = tps * flop_per_token * 1e-9;
	/* the largest GEMM of a microbatch: rows x H x C*D with rows ~ batch * mean length */
	int rows = a->s.batch_size * (a->s.min_len + a->s.max_len) / 2;
	double sg = r.eng->plan.backend == DEV_BACKEND_CPU ? sgemm_rate(rows, m->hidden,
								   m->context * m->embed, 0.5)
						      : 0.0;
	env_info(&a->env, "bench: %lld supervised tokens in %.3f s: %.0f tokens/s", (long long)tokens,
		 seconds, tps);
	env_info(&a->env, "bench: training math %.1f GFLOP/s (%.2f MFLOP per token)", gflops,
		 flop_per_token * 1e-6);
	if (sg > 0.0)
		env_info(&a->env, "bench: one-thread sgemm %.1f GFLOP/s (%d x %d x %d); training reaches "
			 "%.0f%% of W x sgemm", sg, rows, m->hidden, m->context * m->embed,
			 100.0 * gflops / (a->s.world * sg));
	env_info(&a->env, "bench: time inside collectives (their barriers included, so waiting for the "
		 "slowest rank too): %.1f%% of window time on the rank that waits most, %.1f%% on "
		 "average over ranks", 100.0 * coll / seconds, 100.0 * coll_mean / seconds);
	json_t *j = json_pack("{s:s, s:i, s:s, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "backend",
			      engine_backend_name(r.eng), "world", a->s.world, "plan",
			      a->s.plan == PLAN_BALANCED ? "balanced" : "length_bands", "tokens",
			      (json_int_t)tokens, "seconds", seconds, "tokens_per_s", tps,
			      "train_gflops", gflops, "sgemm_gflops_one_thread", sg,
			      "fraction_of_w_sgemm", sg > 0 ? gflops / (a->s.world * sg) : 0.0,
			      "collective_share", coll / seconds, "collective_share_mean", coll_mean / seconds);
	rc = env_write_json(&a->env, output_name(OUT_BENCH), j, e);
	json_decref(j);
out:
	run_close(&r);
	return rc;
}
