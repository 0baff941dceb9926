/*
 * cmd_parity: the W-device gradient under each normalization against the single-device
 * reference (parity), and the exercise (rank 1 going from 12 to 36 tokens).
 *
 * Parity compares EVERY component with |g - ref| <= atol + rtol * |ref|. The correct
 * normalization must pass; each negative control must fail, unless the window's shape
 * makes it coincide with the correct one (e.g. double_accumulation with accumulation 1,
 * or mean_of_means when every rank holds the same number of tokens), which is reported
 * as such instead of being counted as caught, or its factors differ from global_token's
 * by no more than 0.1% (a balanced plan's nearly equal counts), where a comparison at
 * the default tolerance may not see it: reported, but required neither to pass nor to fail.
 * That decision is made from the window's factors, never from the control's gradient.
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

static int dump_vec(const char *dir, const char *name, const float *x, size_t n, struct err *e)
{
	char path[2300];
	size_t shape[1] = {n};
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return npy_write(path, NPY_F32, shape, 1, x, e);
}

static int dump_batches(struct app *a, struct run *r, const char *dir, struct err *e)
{
	struct batch b;
	int rc = batch_alloc(&b, batch_max_rows(a->s.batch_size, a->s.max_len), a->s.context, e);
	if (rc != ERR_OK)
		return rc;
	for (int q = 0; q < r->w.world && rc == ERR_OK; q++)
		for (int m = 0; m < r->w.micro && rc == ERR_OK; m++) {
			char path[2300];
			const struct plan_micro *mb = &r->w.mb[q][m];
			if ((rc = batch_build(&b, &r->corpus, mb->ids, mb->n, a->s.layout, e)) != ERR_OK)
				break;
			size_t shape[2] = {(size_t)b.rows, (size_t)b.context};
			snprintf(path, sizeof path, "%s/rank%d-micro%d-inputs.npy", dir, q, m);
			if ((rc = npy_write(path, NPY_I32, shape, 2, b.ctx, e)) != ERR_OK)
				break;
			snprintf(path, sizeof path, "%s/rank%d-micro%d-targets.npy", dir, q, m);
			rc = npy_write(path, NPY_I32, shape, 1, b.target, e);
		}
	batch_free(&b);
	return rc;
}

int cmd_parity(struct app *a, struct err *e)
{
	struct run r;
	float *ref = NULL, *global = NULL;
	double ref_loss;
	int rc;
	json_t *modes = NULL;
	if ((rc = env_outputs_ready(&a->env, e)) != ERR_OK)
		return rc;
	if (a->o.dump_dir && (rc = fsx_mkdirs(a->o.dump_dir, e)) != ERR_OK)
		return rc;
	if ((rc = run_open(&a->env, &r, e)) != ERR_OK)
		return rc;
	size_t n = r.eng->shape.n_params;
	int avg = a->s.reduce == COLL_AVG;
	if (!(ref = malloc(n * sizeof(float))) || !(global = malloc(n * sizeof(float)))) {
		rc = ERR(e, ERR_DEVICE, "out of memory");
		goto out;
	}
	if ((rc = sampler_next(&r.sampler, &r.w, e)) != ERR_OK)
		goto out;
	if ((rc = engine_reference(r.eng, &r.w, ref, &ref_loss, e)) != ERR_OK)
		goto out;
	if (a->o.dump_dir) {
		json_t *lay = json_pack("{s:o, s:o}", "layout", run_layout_json(&r.eng->shape),
					"window", parity_window_json(&r.w));
		char *txt = json_dumps(lay, JSON_INDENT(2));
		char path[2300];
		snprintf(path, sizeof path, "%s/layout.json", a->o.dump_dir);
		rc = fsx_write_atomic(path, txt, strlen(txt), e);
		free(txt);
		json_decref(lay);
		if (rc != ERR_OK || (rc = dump_vec(a->o.dump_dir, "params.npy", r.init_params, n, e)) ||
		    (rc = dump_vec(a->o.dump_dir, "reference.npy", ref, n, e)) ||
		    (rc = dump_batches(a, &r, a->o.dump_dir, e)))
			goto out;
	}
	env_info(&a->env, "parity: window 1, W = %d, accumulation %d, reduce %s, plan %s, N = %lld",
		 a->s.world, a->s.accumulation, avg ? "avg" : "sum",
		 a->s.plan == PLAN_BALANCED ? "balanced" : "length_bands", (long long)r.w.N);
	for (int q = 0; q < a->s.world; q++)
		env_info(&a->env, "parity:   rank %d: %lld supervised tokens", q, (long long)r.w.rank_tokens[q]);
	env_info(&a->env, "parity: %-20s %10s %12s %12s %9s  %s", "normalization", "components",
		 "max abs err", "max rel err", "outside", "result");
	modes = json_array();
	int ok = 1;
	for (int mode = 0; mode < NORM_COUNT; mode++) {
		struct window_result res;
		struct parity_stats st;
		if ((rc = engine_set_state(r.eng, r.init_params, NULL, 0, e)) != ERR_OK)
			goto out;
		if ((rc = engine_window(r.eng, &r.w, mode, ENGINE_CAPTURE_LOCAL | ENGINE_CAPTURE_REDUCED,
					&res, e)) != ERR_OK)
			goto out;
		parity_compare(r.eng->host_reduced, ref, n, a->s.atol, a->s.rtol, &st);
		double effect = 0.0, gap = 0.0;
		enum parity_control kind = PARITY_SAME;
		if (mode == NORM_GLOBAL_TOKEN) { /* first: the controls are measured against it */
			memcpy(global, r.eng->host_reduced, n * sizeof(float));
		} else {
			kind = parity_control_of(mode, &r.w, avg, &gap);
			effect = parity_effect(r.eng->host_reduced, global, n, a->s.atol, a->s.rtol);
		}
		const char *verdict;
		if (mode == NORM_GLOBAL_TOKEN) {
			verdict = st.pass ? "pass (expected)" : "FAIL (must pass)";
			ok &= st.pass;
		} else if (kind == PARITY_SAME) {
			verdict = st.pass ? "pass: same as global_token on this window"
					  : "FAIL: should coincide with global_token here";
			ok &= st.pass;
		} else if (kind == PARITY_MARGINAL) {
			/* factors too close to global_token's on this window to be required */
			verdict = st.pass ? "pass: factors within 0.1% of global_token's here, "
					    "not required"
					  : "fail (caught, though its factors are near global_token's)";
		} else {
			verdict = st.pass ? "PASSED: negative control NOT caught (its factors differ "
					    "but the comparison did not see it)"
					  : "fail (caught)";
			ok &= !st.pass;
		}
		env_info(&a->env, "parity: %-20s %10zu %12.3e %12.3e %9zu  %s", norm_mode_name(mode),
			 st.components, st.max_abs, st.max_rel, st.outside, verdict);
		json_array_append_new(modes, json_pack("{s:s, s:I, s:o, s:o, s:I, s:b, s:b, s:b, s:b, "
						       "s:f, s:f, s:s, s:f}",
			"normalization", norm_mode_name(mode), "components", (json_int_t)st.components,
			"max_abs_err", parity_json_number(st.max_abs), "max_rel_err",
			parity_json_number(st.max_rel), "outside",
			(json_int_t)st.outside, "pass", st.pass, "negative_control",
			mode != NORM_GLOBAL_TOKEN, "distinguishable",
			mode == NORM_GLOBAL_TOKEN || kind != PARITY_SAME, "required",
			mode == NORM_GLOBAL_TOKEN || kind != PARITY_MARGINAL, "effect",
			isfinite(effect) ? effect : -1.0, "factor_gap", isfinite(gap) ? gap : -1.0,
			"verdict", verdict, "loss", res.loss));
		if (a->o.dump_dir) {
			char name[128];
			snprintf(name, sizeof name, "reduced-%s.npy", norm_mode_name(mode));
			if ((rc = dump_vec(a->o.dump_dir, name, r.eng->host_reduced, n, e)) != ERR_OK)
				goto out;
			for (int q = 0; q < a->s.world; q++) {
				snprintf(name, sizeof name, "rank%d-local-%s.npy", q, norm_mode_name(mode));
				if ((rc = dump_vec(a->o.dump_dir, name, r.eng->host_local[q], n, e)) != ERR_OK)
					goto out;
			}
		}
	}
	json_t *j = json_pack("{s:I, s:i, s:i, s:s, s:s, s:f, s:f, s:f, s:o, s:o, s:b}", "N",
			      (json_int_t)r.w.N, "world", a->s.world, "accumulation", a->s.accumulation,
			      "reduce", avg ? "avg" : "sum", "backend", engine_backend_name(r.eng),
			      "atol", a->s.atol, "rtol", a->s.rtol, "reference_loss", ref_loss, "window",
			      parity_window_json(&r.w), "modes", modes, "ok", ok);
	modes = NULL;
	rc = env_write_json(&a->env, "parity.json", j, e);
	json_decref(j);
	if (rc != ERR_OK)
		goto out;
	if (a->o.dump_dir)
		env_info(&a->env, "parity: dump written to %s (layout.json describes it)", a->o.dump_dir);
	if (!ok)
		rc = ERR(e, ERR_CHECK, "parity: the correct normalization must pass and every "
			 "negative control whose factors differ from it must fail (see "
			 "%s/parity.json)", a->s.outputs);
	else
		env_info(&a->env, "parity: ok (written %s/parity.json)", a->s.outputs);
out:
	json_decref(modes);
	free(ref);
	free(global);
	run_close(&r);
	return rc;
}
