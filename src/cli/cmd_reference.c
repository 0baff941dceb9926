/*
 * cmd_reference: the reference command: window 1's single-device gradient (parity.c
 * computes it), written as reference/reference.npy with reference.json describing it.
 */
#include "cmd_reference.h"

#include <jansson.h>
#include <string.h>

#include "fsx.h"
#include "npy.h"
#include "outputs.h"
#include "parity.h"
#include "report.h"
#include "run.h"

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
