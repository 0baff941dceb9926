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
	const char *backend;
	if (a->s.backend == BACKEND_CPU)
		backend = "cpu (requested by devices.backend)";
	else if (gpus > 0)
		backend = "cuda (GPUs visible)";
	else if (a->s.backend == BACKEND_CUDA)
		backend = "cuda requested but unusable";
	else
		backend = "cpu (auto: no GPU)";
	printf("configuration %s: backend %s", a->cfg.path, backend);
	if (gpus == 0 && a->s.backend != BACKEND_CPU)
		printf(" - %s", why);
	printf("\n");
	const char *coll = (gpus > 0 && a->s.backend != BACKEND_CPU &&
			    a->s.collective != COLLECTIVE_HOST)
				   ? "nccl"
				   : "host (deterministic shared-memory allreduce)";
	printf("collective: %s, reduce %s, W = %d\n", coll, a->s.reduce == COLL_AVG ? "avg" : "sum",
	       a->s.world);
	return ERR_OK;
}
