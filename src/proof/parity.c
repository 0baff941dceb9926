/*
 * parity: the reference, the parity check and the empty-window checks (see parity.h).
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
#include "parity.h"

#include "run.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct parity_gap parity_gap(double g, double ref, double atol, double rtol)
{
	struct parity_gap gp;
	gp.diff = fabs(g - ref);
	gp.tol = atol + rtol * fabs(ref);
	/* the rule stated, not left to how a comparison with a NaN happens to come out */
	gp.within = !isnan(g) && !isnan(ref) && gp.diff <= gp.tol;
	if (!gp.within) /* the quotient is NaN for a NaN, or inf / inf */
		gp.ratio = gp.tol > 0 && gp.diff / gp.tol >= 1.0 ? gp.diff / gp.tol : INFINITY;
	else if (gp.tol == 0 || gp.diff == gp.tol) /* 0 / 0, and inf / inf within */
		gp.ratio = gp.diff == 0 ? 0.0 : 1.0;
	else
		gp.ratio = gp.diff / gp.tol;
	return gp;
}

void parity_compare(const float *g, const float *ref, size_t n, double atol, double rtol,
		    struct parity_stats *st)
{
	memset(st, 0, sizeof *st);
	st->components = n;
	st->worst = 0;
	double worst_excess = -INFINITY;
	for (size_t i = 0; i < n; i++) {
		struct parity_gap gp = parity_gap(g[i], ref[i], atol, rtol);
		double d = gp.diff, lim = gp.tol;
		if (!gp.within)
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
static double factor_gap_of(int mode, int unit, const struct window *w, int reduce_avg,
			    int *differ)
{
	double gap = 0.0;
	*differ = 0;
	for (int r = 0; r < w->world; r++)
		for (int m = 0; m < w->micro; m++) {
			if (w->mb[r][m].tokens == 0)
				continue;
			/* a sequence's 1 / n_s is the same in both: compare per unit */
			double c = norm_unit_factor(unit, mode, reduce_avg, w, r, m, 1);
			double g = norm_unit_factor(unit, NORM_GLOBAL_TOKEN, reduce_avg, w, r, m, 1);
			double d = fabs(c / g - 1.0);
			*differ |= c != g;
			if (!(d <= gap))
				gap = isnan(d) ? INFINITY : d;
		}
	return gap;
}

int parity_distinguishable(int mode, int unit, const struct window *w, int reduce_avg)
{
	int differ;
	factor_gap_of(mode, unit, w, reduce_avg, &differ);
	return differ;
}

enum parity_control parity_control_of(int mode, int unit, const struct window *w, int reduce_avg,
				      double *factor_gap)
{
	int differ;
	double gap = factor_gap_of(mode, unit, w, reduce_avg, &differ);
	if (factor_gap)
		*factor_gap = gap;
	if (!differ)
		return PARITY_SAME;
	return gap > PARITY_FACTOR_MIN_GAP ? PARITY_DISTINCT : PARITY_MARGINAL;
}

int parity_mode_present(int mode, const struct settings *s)
{
	if (mode == NORM_L2_EVERY_RANK)
		return s->l2 > 0.0;
	if (mode == NORM_Z_LOSS_LOCAL)
		return s->z_loss > 0.0;
	if (mode == NORM_WEIGHTS_BY_COUNT)
		return s->class_weights[0] != '\0';
	return mode >= 0 && mode < NORM_COUNT;
}

enum parity_control parity_adapt_control_of(int mode, const struct settings *s,
					    const struct window *w, double *gap)
{
	*gap = 0.0;
	if (mode == NORM_L2_EVERY_RANK && s->reduce == COLL_SUM && s->world > 1) {
		*gap = s->world - 1.0;
		return PARITY_DISTINCT;
	}
	if (mode == NORM_Z_LOSS_LOCAL) { /* the z coefficient's ratio on the ranks with tokens */
		for (int r = 0; r < w->world; r++)
			*gap = fmax(*gap, norm_z_scale(s->unit, mode, w, r) - 1.0);
		if (*gap > PARITY_FACTOR_MIN_GAP)
			return PARITY_DISTINCT;
		return *gap > 0.0 ? PARITY_MARGINAL : PARITY_SAME;
	}
	if (mode == NORM_WEIGHTS_BY_COUNT && w->weighted && w->W > 0) { /* k / N against k / W */
		*gap = fabs(w->W / (double)w->N - 1.0);
		if (*gap > PARITY_FACTOR_MIN_GAP)
			return PARITY_DISTINCT;
		return *gap > 0.0 ? PARITY_MARGINAL : PARITY_SAME;
	}
	return PARITY_SAME;
}

double parity_effect(const float *g_mode, const float *g_global, size_t n, double atol,
		     double rtol)
{
	double worst = 0.0;
	for (size_t i = 0; i < n; i++) {
		double ratio = parity_gap(g_mode[i], g_global[i], atol, rtol).ratio;
		if (ratio > worst)
			worst = ratio;
	}
	return worst;
}

/* ---- the reference ---------------------------------------------------------------- */

static double l2(const float *x, size_t n)
{
	double s = 0.0;
	for (size_t i = 0; i < n; i++)
		s += (double)x[i] * x[i];
	return sqrt(s);
}

/* The z-loss's share of the reference: its loss and gradient less those of the same
 * window without the term (train.z_loss = 0). */
static int z_loss_share(struct run *r, struct reference_result *res, struct err *e)
{
	double plain;
	float *g = malloc(res->n * sizeof(float));
	if (!g)
		return ERR(e, ERR_NOMEM, "out of memory");
	int rc = engine_reference_z(r->eng, &res->w, 0.0, g, &plain, e);
	if (rc == ERR_OK) {
		double d2 = 0.0;
		for (size_t i = 0; i < res->n; i++)
			d2 += ((double)res->grad[i] - g[i]) * ((double)res->grad[i] - g[i]);
		res->loss_z = res->loss - plain;
		res->z_grad_l2 = sqrt(d2);
	}
	free(g);
	return rc;
}

int reference_run(struct run *r, struct reference_result *res, struct err *e)
{
	int rc;
	memset(res, 0, sizeof *res);
	res->n = r->eng->shape.n_params;
	snprintf(res->backend, sizeof res->backend, "%s", engine_backend_name(r->eng));
	/* made here, before parity's hooks (the dump of --dump) and modes read them */
	const float *first = run_init_params(r, e);
	if (!first)
		return e->code;
	if (!(res->grad = malloc(res->n * sizeof(float))))
		return ERR(e, ERR_NOMEM, "out of memory");
	if ((rc = sampler_next(&r->sampler, &r->w, e)) != ERR_OK ||
	    (rc = engine_reference(r->eng, &r->w, res->grad, &res->loss, e)) != ERR_OK ||
	    (rc = window_copy(&res->w, &r->w, &r->corpus, e)) != ERR_OK)
		return rc;
	res->grad_l2 = l2(res->grad, res->n);
	if (r->eng->s.z_loss > 0 && (rc = z_loss_share(r, res, e)) != ERR_OK)
		return rc;
	/* the l2 term at the window's parameters, the initial ones, computed on the host */
	double norm = r->eng->s.l2 > 0 ? l2(first, res->n) : 0.0;
	res->l2_grad_l2 = r->eng->s.l2 * norm;
	res->loss_l2 = 0.5 * res->l2_grad_l2 * norm;
	return ERR_OK;
}

void reference_result_free(struct reference_result *res)
{
	free(res->grad);
	res->grad = NULL;
	window_free(&res->w);
}

/* ---- parity ----------------------------------------------------------------------- */

const char *parity_verdict_text(enum parity_verdict v)
{
	switch (v) {
	case PARITY_EXPECTED_PASS:
		return "pass (expected)";
	case PARITY_MUST_PASS:
		return "FAIL (must pass)";
	case PARITY_SAME_PASS:
		return "pass: same as global_token on this window";
	case PARITY_SAME_FAIL:
		return "FAIL: should coincide with global_token here";
	case PARITY_MARGINAL_PASS:
		return "pass: factors within 0.1% of global_token's here, not required";
	case PARITY_MARGINAL_CAUGHT:
		return "fail (caught, though its factors are near global_token's)";
	case PARITY_NOT_CAUGHT:
		return "PASSED: negative control NOT caught (its factors differ but the "
		       "comparison did not see it)";
	case PARITY_CAUGHT:
		return "fail (caught)";
	}
	return "?";
}

/* The verdict on one mode, from its comparison with the reference and what its factors
 * demand; sets m->required and m->verdict, returns whether the mode behaved as required
 * (always 1 for one that is not required). */
static int parity_judge(struct parity_mode_result *m)
{
	int pass = m->st.pass;
	m->required = m->mode == NORM_GLOBAL_TOKEN || m->control != PARITY_MARGINAL;
	if (m->mode == NORM_GLOBAL_TOKEN)
		m->verdict = pass ? PARITY_EXPECTED_PASS : PARITY_MUST_PASS;
	else if (m->control == PARITY_SAME)
		m->verdict = pass ? PARITY_SAME_PASS : PARITY_SAME_FAIL;
	else if (m->control == PARITY_MARGINAL)
		m->verdict = pass ? PARITY_MARGINAL_PASS : PARITY_MARGINAL_CAUGHT;
	else
		m->verdict = pass ? PARITY_NOT_CAUGHT : PARITY_CAUGHT;
	if (!m->required)
		return 1;
	return m->control == PARITY_DISTINCT ? !pass : pass;
}

/* One normalization on the window of the reference, from the initial parameters; global
 * (global_token's gradient, measured first) is what the controls are measured against. */
static int parity_mode(struct run *r, const struct settings *s, int mode, const float *ref,
		       float *global, struct parity_mode_result *m, struct err *e)
{
	const struct window *w = &r->w;
	size_t n = r->eng->shape.n_params;
	int avg = s->reduce == COLL_AVG;
	struct window_result res;
	int rc;
	memset(m, 0, sizeof *m);
	m->mode = mode;
	m->present = 1;
	const float *first = run_init_params(r, e);
	if (!first)
		return e->code;
	if ((rc = engine_set_state(r->eng, first, NULL, 0, e)) != ERR_OK ||
	    (rc = engine_window(r->eng, w, mode, ENGINE_CAPTURE_LOCAL | ENGINE_CAPTURE_REDUCED,
				&res, e)) != ERR_OK)
		return rc;
	m->loss = res.loss;
	parity_compare(r->eng->host_reduced, ref, n, s->atol, s->rtol, &m->st);
	if (mode == NORM_GLOBAL_TOKEN) {
		memcpy(global, r->eng->host_reduced, n * sizeof(float));
	} else if (mode >= NORM_COUNT) {
		m->control = parity_adapt_control_of(mode, s, w, &m->factor_gap);
		m->effect = parity_effect(r->eng->host_reduced, global, n, s->atol, s->rtol);
	} else {
		m->control = parity_control_of(mode, s->unit, w, avg, &m->factor_gap);
		m->effect = parity_effect(r->eng->host_reduced, global, n, s->atol, s->rtol);
	}
	return ERR_OK;
}

size_t parity_bits_differ(const float *a, const float *b, size_t n)
{
	size_t differ = 0;
	for (size_t i = 0; i < n; i++)
		differ += memcmp(&a[i], &b[i], sizeof a[i]) != 0;
	return differ;
}

void parity_bitwise_line(const struct parity_result *r, char *out, size_t cap)
{
	if (r->shards <= 0) {
		snprintf(out, cap, "%s", "");
		return;
	}
	snprintf(out, cap, "bitwise: %zu of %zu components differ from the 1-device reference "
		 "(the same %d shards on one device); the loss %s", r->bits_differ, r->ref.n,
		 r->shards, r->loss_bits_differ ? "DIFFERS" : "has the same bits");
}

/* Exact mode: global_token's gradient (global) and loss against the reference, bit by
 * bit; the check fails on any difference. */
static void parity_bitwise(struct parity_result *res, const float *global)
{
	res->bits_differ = parity_bits_differ(global, res->ref.grad, res->ref.n);
	res->loss_bits_differ = memcmp(&res->modes[NORM_GLOBAL_TOKEN].loss, &res->ref.loss,
				       sizeof res->ref.loss) != 0;
	res->ok &= res->bits_differ == 0 && !res->loss_bits_differ;
}

int parity_run(struct run *r, const struct settings *s, const struct parity_hooks *h,
	       struct parity_result *res, struct err *e)
{
	float *global = NULL;
	int rc;
	memset(res, 0, sizeof *res);
	res->world = s->world;
	res->accumulation = s->accumulation;
	res->reduce_avg = s->reduce == COLL_AVG;
	res->unit = s->unit;
	res->rank_split = s->rank_split;
	res->atol = s->atol;
	res->rtol = s->rtol;
	res->shards = s->shards;
	res->shard_order = s->shard_order;
	if ((rc = reference_run(r, &res->ref, e)) != ERR_OK)
		return rc;
	if (h && h->reference && (rc = h->reference(h->arg, r, res->ref.grad, e)) != ERR_OK)
		return rc;
	if (!(global = malloc(res->ref.n * sizeof(float))))
		return ERR(e, ERR_NOMEM, "out of memory");
	res->ok = 1;
	/* global_token first: the controls are measured against it */
	_Static_assert(NORM_GLOBAL_TOKEN == 0, "global_token comes first");
	for (int mode = 0; mode < NORM_MODES && rc == ERR_OK; mode++) {
		struct parity_mode_result *m = &res->modes[mode];
		if (!parity_mode_present(mode, s))
			continue;
		if ((rc = parity_mode(r, s, mode, res->ref.grad, global, m, e)) == ERR_OK &&
		    h && h->mode)
			rc = h->mode(h->arg, r, mode, e);
		res->ok &= parity_judge(m);
	}
	if (rc == ERR_OK && s->shards > 0)
		parity_bitwise(res, global);
	free(global);
	return rc;
}

void parity_result_free(struct parity_result *res)
{
	reference_result_free(&res->ref);
}

/* ---- empty windows ---------------------------------------------------------------- */

/* Rank 0 without tokens, the others one sequence per microbatch, against the reference. */
static int empty_rank(struct run *r, const struct settings *s, struct empty_window_result *res,
		      struct err *e)
{
	int W = s->world, M = s->accumulation;
	int counts[MAX_WORLD * WINDOW_MAX_MICRO], ids[MAX_WORLD * WINDOW_MAX_MICRO], k = 0;
	size_t n = r->eng->shape.n_params;
	struct window_result wr;
	double loss;
	for (int q = 0; q < W; q++)
		for (int m = 0; m < M; m++) {
			counts[q * M + m] = q == 0 ? 0 : 1;
			if (q)
				ids[k] = k, k++;
		}
	int rc = window_assign(&r->w, &r->corpus, ids, counts, e);
	if (rc == ERR_OK && s->batching == BATCHING_TOKENS) /* rank 0 runs no microbatch */
		rc = window_pack_tokens(&r->w, &r->corpus, s->micro_tokens, e);
	if (rc != ERR_OK)
		return rc;
	const float *first = run_init_params(r, e);
	if (!first)
		return e->code;
	float *ref = malloc(n * sizeof(float));
	if (!ref)
		return ERR(e, ERR_NOMEM, "out of memory");
	if ((rc = engine_set_state(r->eng, first, NULL, 0, e)) == ERR_OK &&
	    (rc = engine_reference(r->eng, &r->w, ref, &loss, e)) == ERR_OK &&
	    (rc = engine_window(r->eng, &r->w, NORM_GLOBAL_TOKEN, ENGINE_CAPTURE_REDUCED, &wr,
				e)) == ERR_OK) {
		parity_compare(r->eng->host_reduced, ref, n, s->atol, s->rtol, &res->local);
		res->local_N = r->w.N;
		res->local_checked = 1;
	}
	free(ref);
	return rc;
}

int empty_window_run(struct run *r, const struct settings *s, struct empty_window_result *res,
		     struct err *e)
{
	int counts[MAX_WORLD * WINDOW_MAX_MICRO];
	struct window_result wr;
	int rc;
	memset(res, 0, sizeof *res);
	memset(counts, 0, sizeof counts);
	res->ranks = s->world;
	if ((rc = window_assign(&r->w, &r->corpus, NULL, counts, e)) != ERR_OK ||
	    (rc = engine_window(r->eng, &r->w, NORM_GLOBAL_TOKEN, ENGINE_UPDATE, &wr, e)) != ERR_OK)
		return rc;
	res->declined = wr.rejected;
	res->updated = r->eng->updates_done != 0;
	res->declined_by_all = res->declined && !res->updated;
	if (s->world > 1 && (rc = empty_rank(r, s, res, e)) != ERR_OK)
		return rc;
	res->local_matches = !res->local_checked || res->local.pass;
	res->ok = res->declined_by_all && res->local_matches;
	return ERR_OK;
}

/* ---- as JSON ---------------------------------------------------------------------- */

void *parity_json_number(double x)
{
	/* JSON has no NaN or infinity: such an error is written as null rather than lost */
	return isfinite(x) ? json_real(x) : json_null();
}

void *parity_window_json(const struct window *w)
{
	json_t *ranks = json_array();
	for (int r = 0; r < w->world; r++) {
		json_t *micro = json_array();
		for (int m = 0; m < w->rank_micro[r]; m++) {
			json_t *ids = json_array();
			for (int k = 0; k < w->mb[r][m].n; k++)
				json_array_append_new(ids, json_integer(w->mb[r][m].ids[k]));
			json_array_append_new(micro, json_pack("{s:o, s:I}", "ids", ids, "tokens",
							       (json_int_t)w->mb[r][m].tokens));
		}
		json_array_append_new(ranks, json_pack("{s:i, s:I, s:I, s:o}", "rank", r, "tokens",
						       (json_int_t)w->rank_tokens[r], "sequences",
						       (json_int_t)w->rank_sequences[r], "microbatches",
						       micro));
	}
	return json_pack("{s:I, s:I, s:I, s:o}", "index", (json_int_t)w->index, "N",
			 (json_int_t)w->N, "S", (json_int_t)w->S, "ranks", ranks);
}
