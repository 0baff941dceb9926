/*
 * cmd_env: what this build and machine offer: version, backends, devices, and which
 * backend and collective the configuration would use, and why.
 */
#include <cblas.h>
#include <stdio.h>

#include "app.h"
#include "ddptok_config.h"
#include "engine.h"
#if DDPTOK_HAVE_CUDA
#include "gpu.h"
#endif

int cmd_env(struct app *a, struct err *e)
{
	printf("ddptok-run %s\n", DDPTOK_VERSION);
	printf("cpu backend: OpenBLAS %s (one BLAS thread per device thread)\n",
	       openblas_get_config());
	int gpus = 0;
	char why[256] = "this build has no CUDA backend (meson option cuda)";
#if DDPTOK_HAVE_CUDA
	printf("cuda backend: built\n");
	int rc = gpu_env_report(stdout, e);
	if (rc != ERR_OK)
		return rc;
	if ((rc = gpu_device_count(&gpus, why, sizeof why, e)) != ERR_OK)
		return rc;
#else
	printf("cuda backend: not built\n");
#endif
	struct device_plan plan;
	struct err pe = {0};
	printf("configuration %s: W = %d, reduce %s\n", a->cfg.path, a->s.world,
	       a->s.reduce == COLL_AVG ? "avg" : "sum");
	if (engine_plan_devices(&a->s, gpus, why, &plan, &pe) != ERR_OK) {
		printf("backend: this configuration does not run here: %s\n", pe.msg);
		return ERR_OK;
	}
	printf("backend: %s\n", plan.why);
	if (plan.backend == DEV_BACKEND_CUDA) {
		printf("devices:");
		for (int r = 0; r < a->s.world; r++)
			printf(" rank %d -> GPU %d%s", r, plan.ids[r], r + 1 < a->s.world ? "," : "");
		printf("\n");
	}
	printf("collective: %s\n", plan.coll_why);
	return ERR_OK;
}
