/*
 * step_parity: the parity step: the check of parity.c, printed, written to parity.json,
 * and with a dump directory every tensor it compared (the protocol's step dumps into
 * outputs/parity, the parity command where --dump DIR says).
 */
#include "step_parity.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "fsx.h"
#include "norm.h"
#include "npy.h"
#include "outputs.h"
#include "parity.h"
#include "report.h"
#include "run.h"

/* ---- --dump DIR ----------------------------------------------------------------------- */

struct dump {
	const char *dir;
	const struct settings *s;
};

static int dump_vec(const char *dir, const char *name, const float *x, size_t n, struct err *e)
{
	char path[FSX_PATH_MAX];
	size_t shape[1] = {n};
	int rc = fsx_join(path, sizeof path, dir, name, e);
	return rc ? rc : npy_write(path, NPY_F32, shape, 1, x, e);
}

/* Every microbatch's model inputs and targets, as the model sees them. */
static int dump_batches(const struct dump *d, const struct run *r, struct err *e)
{
	const struct model_shape *m = &r->eng->shape;
	struct model_batch *b;
	int rc = model_batch_alloc(m, model_max_rows(m, d->s->batch_size, d->s->max_len), &b, e);
	if (rc != ERR_OK)
		return rc;
	for (int q = 0; q < r->w.world && rc == ERR_OK; q++)
		for (int mi = 0; mi < r->w.micro && rc == ERR_OK; mi++) {
			const struct microbatch *mb = &r->w.mb[q][mi];
			struct model_array arr[MODEL_MAX_ARRAYS];
			if ((rc = model_batch_build(b, &r->corpus, mb->ids, mb->n, d->s->layout, e)))
				break;
			int n = model_batch_arrays(b, arr);
			for (int i = 0; i < n && rc == ERR_OK; i++) {
				char path[FSX_PATH_MAX + 64];
				snprintf(path, sizeof path, "%s/" OUTPUT_DUMP_ARRAY, d->dir, q, mi,
					 arr[i].name);
				rc = npy_write(path, NPY_I32, arr[i].dim, arr[i].ndim, arr[i].data, e);
			}
		}
	model_batch_free(b);
	return rc;
}

/* The window (layout.json), its starting parameters, the reference and the batches. */
static int dump_reference(void *arg, const struct run *r, const float *ref, struct err *e)
{
	const struct dump *d = arg;
	size_t n = r->eng->shape.n_params;
	char path[FSX_PATH_MAX];
	json_t *lay = json_pack("{s:o, s:o}", "layout", run_layout_json(&r->eng->shape), "window",
				parity_window_json(&r->w));
	int rc = fsx_join(path, sizeof path, d->dir, OUTPUT_DUMP_LAYOUT, e);
	if (rc == ERR_OK)
		rc = report_json_file(path, lay, e);
	json_decref(lay);
	/* the first parameters: reference_run made them before this hook */
	if (rc == ERR_OK && (rc = dump_vec(d->dir, OUTPUT_DUMP_PARAMS, r->init_params, n, e)) == ERR_OK &&
	    (rc = dump_vec(d->dir, OUTPUT_DUMP_REFERENCE, ref, n, e)) == ERR_OK)
		rc = dump_batches(d, r, e);
	return rc;
}

/* One normalization's reduced gradient and every rank's local one. */
static int dump_mode(void *arg, const struct run *r, int mode, struct err *e)
{
	const struct dump *d = arg;
	size_t n = r->eng->shape.n_params;
	char name[128];
	snprintf(name, sizeof name, OUTPUT_DUMP_REDUCED, norm_mode_name(mode));
	int rc = dump_vec(d->dir, name, r->eng->host_reduced, n, e);
	for (int q = 0; q < r->eng->world && rc == ERR_OK; q++) {
		snprintf(name, sizeof name, OUTPUT_DUMP_LOCAL, q, norm_mode_name(mode));
		rc = dump_vec(d->dir, name, r->eng->host_local[q], n, e);
	}
	return rc;
}

/* ---- the step ------------------------------------------------------------------------- */

/* ", M microbatches" under token batching, where ranks run different numbers of them */
static const char *micro_text(const struct app *a, const struct window *w, int rank)
{
	static _Thread_local char text[48];
	text[0] = '\0';
	if (a->s.batching == BATCHING_TOKENS)
		snprintf(text, sizeof text, ", %d microbatch%s", w->rank_micro[rank],
			 w->rank_micro[rank] == 1 ? "" : "es");
	return text;
}

static void parity_print(const struct app *a, const struct parity_result *p)
{
	const struct window *w = &p->ref.w;
	char split[64], bitwise[256];
	if (p->shards > 0)
		snprintf(split, sizeof split, "exact mode, %d shards by %s", p->shards,
			 p->shard_order == SHARD_ORDER_BALANCED ? "balance" : "length");
	else
		snprintf(split, sizeof split, "plan %s",
			 rank_split_name(p->rank_split));
	env_info(&a->env, "parity: window 1, W = %d, accumulation %d, reduce %s, %s, unit %s, "
		 "N = %lld, S = %lld", p->world, p->accumulation, p->reduce_avg ? "avg" : "sum", split,
		 p->unit == UNIT_SEQUENCE ? "sequence" : "token", (long long)w->N, (long long)w->S);
	for (int q = 0; q < p->world; q++)
		env_info(&a->env, "parity:   rank %d: %lld supervised tokens in %lld sequences%s", q,
			 (long long)w->rank_tokens[q], (long long)w->rank_sequences[q],
			 micro_text(a, w, q));
	env_info(&a->env, "parity: %-20s %10s %12s %12s %9s  %s", "normalization", "components",
		 "max abs err", "max rel err", "outside", "result");
	for (int mode = 0; mode < NORM_MODES; mode++) {
		const struct parity_mode_result *m = &p->modes[mode];
		if (!m->present)
			continue;
		env_info(&a->env, "parity: %-20s %10zu %12.3e %12.3e %9zu  %s", norm_mode_name(mode),
			 m->st.components, m->st.max_abs, m->st.max_rel, m->st.outside,
			 parity_verdict_text(m->verdict));
	}
	parity_bitwise_line(p, bitwise, sizeof bitwise);
	if (bitwise[0])
		env_info(&a->env, "parity: %s", bitwise);
}

int parity_step(struct app *a, const char *dump_dir, struct parity_result *res, struct err *e)
{
	struct run r;
	struct dump d = {dump_dir, &a->s};
	const struct parity_hooks hooks = {&d, dump_reference, dump_mode};
	int rc;
	memset(res, 0, sizeof *res);
	if ((rc = env_outputs_ready(&a->env, e)) != ERR_OK ||
	    (dump_dir && (rc = fsx_mkdirs(dump_dir, e)) != ERR_OK) ||
	    (rc = run_open(&a->env, &r, e)) != ERR_OK)
		return rc;
	rc = parity_run(&r, &a->s, dump_dir ? &hooks : NULL, res, e);
	run_close(&r);
	if (rc != ERR_OK)
		return rc;
	parity_print(a, res);
	if ((rc = report_write_json(a, OUT_PARITY, parity_json(res), e)) != ERR_OK)
		return rc;
	if (dump_dir)
		env_info(&a->env, "parity: dump written to %s (" OUTPUT_DUMP_LAYOUT " describes it)", dump_dir);
	if (!res->ok)
		return ERR(e, ERR_CHECK, "parity: the correct normalization must pass%s and every "
			   "negative control whose factors differ from it must fail (see %s/%s)",
			   res->shards > 0 ? ", equal to the 1-device reference in every bit," : "",
			   a->s.outputs, output_name(OUT_PARITY));
	env_info(&a->env, "parity: ok (written %s/%s)", a->s.outputs, output_name(OUT_PARITY));
	return ERR_OK;
}
