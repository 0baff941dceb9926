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

void parity_compare(const float *g, const float *ref, size_t n, double atol, double rtol,
		    struct parity_stats *st)
{
	memset(st, 0, sizeof *st);
	st->components = n;
	st->worst = 0;
	double worst_excess = -INFINITY;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)g[i] - (double)ref[i]);
		double lim = atol + rtol * fabs((double)ref[i]);
		if (!(d <= lim))
			st->outside++;
		if (d > st->max_abs || d != d)
			st->max_abs = d;
		if (ref[i] != 0.0f) {
			double rel = d / fabs((double)ref[i]);
			if (rel > st->max_rel)
				st->max_rel = rel;
		}
		if (d - lim > worst_excess) {
			worst_excess = d - lim;
			st->worst = i;
		}
	}
	st->pass = st->outside == 0;
}

/* Compares `mode`'s factor with global_token's on every microbatch holding tokens: the
 * largest |c / g - 1| (NaN: infinity), and *differ = 1 when some c != g exactly. */
static double factor_gap_of(int mode, const struct window *w, int reduce_avg, int *differ)
{
	double gap = 0.0;
	*differ = 0;
	for (int r = 0; r < w->world; r++)
		for (int m = 0; m < w->micro; m++) {
			if (w->mb[r][m].tokens == 0)
				continue;
			double c = norm_factor(mode, reduce_avg, w->world, w->micro, w->N,
					       w->rank_tokens[r], w->mb[r][m].tokens);
			double g = norm_factor(NORM_GLOBAL_TOKEN, reduce_avg, w->world, w->micro, w->N,
					       w->rank_tokens[r], w->mb[r][m].tokens);
			double d = fabs(c / g - 1.0);
			*differ |= c != g;
			if (!(d <= gap))
				gap = isnan(d) ? INFINITY : d;
		}
	return gap;
}

int parity_distinguishable(int mode, const struct window *w, int reduce_avg)
{
	int differ;
	factor_gap_of(mode, w, reduce_avg, &differ);
	return differ;
}

enum parity_control parity_control_of(int mode, const struct window *w, int reduce_avg,
				      double *factor_gap)
{
	int differ;
	double gap = factor_gap_of(mode, w, reduce_avg, &differ);
	if (factor_gap)
		*factor_gap = gap;
	if (!differ)
		return PARITY_SAME;
	return gap > PARITY_FACTOR_MIN_GAP ? PARITY_DISTINCT : PARITY_MARGINAL;
}

double parity_effect(const float *g_mode, const float *g_global, size_t n, double atol,
		     double rtol)
{
	double worst = 0.0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)g_mode[i] - (double)g_global[i]);
		double lim = atol + rtol * fabs((double)g_global[i]);
		double ratio = lim > 0 ? d / lim : (d > 0 ? INFINITY : 0.0);
		if (!(ratio <= worst)) /* NaN counts as the largest effect */
			worst = isnan(ratio) ? INFINITY : ratio;
	}
	return worst;
}

void *parity_json_number(double x)
{
	/* JSON has no NaN or infinity: such an error is written as null rather than lost */
	return isfinite(x) ? json_real(x) : json_null();
}

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
	if ((rc = app_outputs_ready(a, e)) != ERR_OK)
		return rc;
	if (a->o.dump_dir && (rc = fsx_mkdirs(a->o.dump_dir, e)) != ERR_OK)
		return rc;
	if ((rc = run_open(a, &r, e)) != ERR_OK)
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
	app_info(a, "parity: window 1, W = %d, accumulation %d, reduce %s, plan %s, N = %lld",
		 a->s.world, a->s.accumulation, avg ? "avg" : "sum",
		 a->s.plan == PLAN_BALANCED ? "balanced" : "length_bands", (long long)r.w.N);
	for (int q = 0; q < a->s.world; q++)
		app_info(a, "parity:   rank %d: %lld supervised tokens", q, (long long)r.w.rank_tokens[q]);
	app_info(a, "parity: %-20s %10s %12s %12s %9s  %s", "normalization", "components",
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
		app_info(a, "parity: %-20s %10zu %12.3e %12.3e %9zu  %s", norm_mode_name(mode),
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
	rc = app_write_json(a, "parity.json", j, e);
	json_decref(j);
	if (rc != ERR_OK)
		goto out;
	if (a->o.dump_dir)
		app_info(a, "parity: dump written to %s (layout.json describes it)", a->o.dump_dir);
	if (!ok)
		rc = ERR(e, ERR_CHECK, "parity: the correct normalization must pass and every "
			 "negative control whose factors differ from it must fail (see "
			 "%s/parity.json)", a->outputs);
	else
		app_info(a, "parity: ok (written %s/parity.json)", a->outputs);
out:
	json_decref(modes);
	free(ref);
	free(global);
	run_close(&r);
	return rc;
}

void *parity_window_json(const struct window *w)
{
	json_t *ranks = json_array();
	for (int r = 0; r < w->world; r++) {
		json_t *micro = json_array();
		for (int m = 0; m < w->micro; m++) {
			json_t *ids = json_array();
			for (int k = 0; k < w->mb[r][m].n; k++)
				json_array_append_new(ids, json_integer(w->mb[r][m].ids[k]));
			json_array_append_new(micro, json_pack("{s:o, s:I}", "ids", ids, "tokens",
							       (json_int_t)w->mb[r][m].tokens));
		}
		json_array_append_new(ranks, json_pack("{s:i, s:I, s:o}", "rank", r, "tokens",
						       (json_int_t)w->rank_tokens[r], "microbatches",
						       micro));
	}
	return json_pack("{s:I, s:I, s:o}", "index", (json_int_t)w->index, "N", (json_int_t)w->N,
			 "ranks", ranks);
}
