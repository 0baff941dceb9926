/*
 * cmd_basic: the first steps of the protocol: prepare, check-loss, reference (their
 * computations are in checks.c and parity.c).
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "corpus_files.h"
#include "corpus_store.h"
#include "fsx.h"
#include "norm.h"
#include "npy.h"
#include "outputs.h"
#include "parity.h"
#include "report.h"
#include "run.h"
#include "sources.h"

/* Sequences and targets per split, the masked share, the length histogram and, for a
 * file source, what the files held. */
static void prepare_summary(struct app *a, const struct corpus *c)
{
	struct corpus_summary m;
	char hist[CORPUS_HIST * 32];
	size_t used = 0;
	int64_t tokens, sup;
	corpus_summarize(c, &m);
	tokens = m.tokens[0] + m.tokens[1] + m.tokens[2];
	sup = m.supervised[0] + m.supervised[1] + m.supervised[2];
	if (c->params.source != DATA_SYNTHETIC)
		env_info(&a->env, "prepare: read %lld documents from %s (%s): %lld longer than "
			 "max_len = %d cut into windows, %lld shorter than min_len = %d skipped",
			 (long long)c->read.documents, a->s.data_path,
			 data_source_name(c->params.source), (long long)c->read.cut, a->s.max_len,
			 (long long)c->read.short_skipped, a->s.min_len);
	env_info(&a->env, "prepare: %d train, %d validation, %d test sequences; supervised tokens "
		 "%lld / %lld / %lld", c->split_count[0], c->split_count[1], c->split_count[2],
		 (long long)m.supervised[0], (long long)m.supervised[1], (long long)m.supervised[2]);
	env_info(&a->env, "prepare: %lld tokens, %.1f%% of them masked (prompts and ignored "
		 "positions: context, never targets)", (long long)tokens,
		 tokens ? 100.0 * (double)(tokens - sup) / (double)tokens : 0.0);
	for (int k = 0; k < CORPUS_HIST && m.shortest + k * m.width <= m.longest; k++) {
		int hi = m.shortest + (k + 1) * m.width - 1;
		used += (size_t)snprintf(hist + used, sizeof hist - used, "%s%d-%d: %lld",
					 k ? ", " : "", m.shortest + k * m.width,
					 hi < m.longest ? hi : m.longest, (long long)m.hist[k]);
	}
	env_info(&a->env, "prepare: sequence lengths %s", hist);
}

/* A file source's progress on a terminal: one line per whole percent of each file. */
struct prepare_progress {
	struct app *a;
	const char *file;
	int percent;
};

static void prepare_progress(void *arg, const char *file, uint64_t done, uint64_t total)
{
	struct prepare_progress *p = arg;
	int percent = total ? (int)(100 * done / total) : 100;
	if (file == p->file && percent == p->percent)
		return;
	p->file = file;
	p->percent = percent;
	env_progress(&p->a->env, "prepare: reading %s: %d%%", file, percent);
}

int cmd_prepare(struct app *a, struct err *e)
{
	struct corpus c;
	char dir[2048];
	int rc;
	if ((rc = env_outputs_ready(&a->env, e)) != ERR_OK)
		return rc;
	if ((rc = fsx_join(dir, sizeof dir, a->s.outputs, output_name(OUT_CORPUS), e)) != ERR_OK)
		return rc;
	struct prepare_progress pp = {a, NULL, -1};
	rc = a->s.source == DATA_SYNTHETIC ? corpus_build(&a->s, &c, e)
		: corpus_from_files_progress(&a->s, prepare_progress, &pp, &c, e);
	env_progress_end(&a->env);
	if (rc != ERR_OK)
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
		prepare_summary(a, &c);
		env_info(&a->env, "prepare: data lock %s", c.lock);
		env_info(&a->env, "prepare: wrote %s/" OUTPUT_CORPUS_BIN " and %s/" OUTPUT_DATA_LOCK, dir,
			 dir);
	}
	corpus_free(&c);
	return rc;
}

static void check_loss_print(const struct app *a, const struct check_loss_result *r)
{
	env_info(&a->env, "check-loss: rank 0: loss sum %g over %lld tokens; rank 1: %g over %lld",
		 r->sums[0], (long long)r->counts[0], r->sums[1], (long long)r->counts[1]);
	env_info(&a->env, "check-loss: mean of means %g (expected 2), global token mean %g (expected 2.5) "
		 "[reduce avg]", r->mean_of_means, r->global_mean);
	env_info(&a->env, "check-loss: mean of means %g, global token mean %g [reduce sum]",
		 r->mean_of_means_sum, r->global_mean_sum);
}

int check_loss_step(struct app *a, struct check_loss_result *res, struct err *e)
{
	int rc;
	if ((rc = env_outputs_ready(&a->env, e)) != ERR_OK)
		return rc;
	check_loss_run(res);
	check_loss_print(a, res);
	if ((rc = report_write_json(a, OUT_CHECK_LOSS, check_loss_json(res), e)) != ERR_OK)
		return rc;
	if (!res->ok)
		return ERR(e, ERR_CHECK, "check-loss: expected 2 and 2.5, got %g and %g (avg), %g and "
			   "%g (sum)", res->mean_of_means, res->global_mean, res->mean_of_means_sum,
			   res->global_mean_sum);
	env_info(&a->env, "check-loss: ok (written %s/%s)", a->s.outputs, output_name(OUT_CHECK_LOSS));
	return ERR_OK;
}

int cmd_check_loss(struct app *a, struct err *e)
{
	struct check_loss_result res;
	return check_loss_step(a, &res, e);
}

/* reference/reference.npy and reference.json, for the run r the reference was drawn in. */
static int reference_write(struct app *a, const struct run *r, const struct reference_result *res,
			   const char *dir, struct err *e)
{
	char path[FSX_PATH_MAX];
	size_t shape[1] = {res->n};
	int rc = fsx_join(path, sizeof path, dir, OUTPUT_REFERENCE_NPY, e);
	if (rc != ERR_OK || (rc = npy_write(path, NPY_F32, shape, 1, res->grad, e)) != ERR_OK ||
	    (rc = fsx_join(path, sizeof path, dir, OUTPUT_REFERENCE_JSON, e)) != ERR_OK)
		return rc;
	json_t *j = json_pack("{s:s, s:I, s:f, s:f, s:I, s:s, s:s, s:o, s:o}", "what",
			      "gradient of (sum of token losses of window 1) / N on one device", "N",
			      (json_int_t)res->w.N, "loss", res->loss, "grad_l2_norm", res->grad_l2,
			      "components", (json_int_t)res->n, "file", OUTPUT_REFERENCE_NPY,
			      "backend", res->backend, "layout", run_layout_json(&r->eng->shape),
			      "window", (json_t *)parity_window_json(&res->w));
	rc = report_json_file(path, j, e);
	json_decref(j);
	return rc;
}

int cmd_reference(struct app *a, struct err *e)
{
	struct run r;
	struct reference_result res;
	char dir[FSX_PATH_MAX];
	int rc;
	memset(&res, 0, sizeof res);
	if ((rc = env_outputs_ready(&a->env, e)) != ERR_OK ||
	    (rc = fsx_join(dir, sizeof dir, a->s.outputs, output_name(OUT_REFERENCE), e)) != ERR_OK ||
	    (rc = fsx_mkdirs(dir, e)) != ERR_OK || (rc = run_open(&a->env, &r, e)) != ERR_OK)
		return rc;
	if ((rc = reference_run(&r, &res, e)) == ERR_OK &&
	    (rc = reference_write(a, &r, &res, dir, e)) == ERR_OK) {
		env_info(&a->env, "reference: window 1, N = %lld supervised tokens, loss %.6f, gradient L2 "
			 "norm %.6e over %zu components (%s backend)", (long long)res.w.N, res.loss,
			 res.grad_l2, res.n, res.backend);
		env_info(&a->env, "reference: wrote %s/%s and %s", dir, OUTPUT_REFERENCE_NPY,
			 OUTPUT_REFERENCE_JSON);
	}
	reference_result_free(&res);
	run_close(&r);
	return rc;
}
