/*
 * cmd_env: what this build and machine offer: version, backends, devices, and which
 * backend and collective the configuration would use, and why. `env` only informs (exit
 * 0 even when the configuration cannot run here); `env --check` tries the device plan
 * for real (devcheck.h) and exits ERR_DEVCHECK, naming what failed, when it does not
 * work, the plan itself included.
 */
#include "cmd_env.h"

#include <stdio.h>

#include "blas_core.h"
#include "corpus_store.h"
#include "ddptok_config.h"
#include "devcheck.h"
#include "engine.h"
#include "fsx.h"
#include "gemm.h"
#include "model.h"
#include "optim.h"
#include "outputs.h"
#include "placement.h"
#include "procs.h"
#if DDPTOK_HAVE_CUDA
#include "gpu.h"
#endif

/* seconds of each one-thread GEMM rate env measures */
#define GEMM_ENV_TRIAL_S 0.2

static void print_placement(const struct settings *s, const struct placement *plan)
{
	printf("backend: %s\n", plan->why);
	if (plan->backend == DEV_BACKEND_CUDA) {
		printf("devices:");
		for (int r = 0; r < s->world; r++)
			printf(" rank %d -> GPU %d%s", r, plan->ids[r], r + 1 < s->world ? "," : "");
		printf("\n");
	}
	printf("collective: %s\n", plan->coll_why);
}

/* The settings with the vocabulary a file source's prepared corpus records, when
 * model.vocab leaves it to the files; 0 when it is still unknown (nothing prepared). */
static int with_known_vocab(const struct settings *config, struct settings *s)
{
	char dir[FSX_PATH_MAX];
	struct err ignore = {0};
	*s = *config;
	if (!s->vocab && fsx_join(dir, sizeof dir, s->outputs, output_name(OUT_CORPUS),
				  &ignore) == ERR_OK)
		s->vocab = corpus_store_vocab(dir, config);
	return s->vocab != 0;
}

/* The cpu backend's GEMM: the implementation this configuration gets, its kernels, and
 * one-thread rates at the model's microbatch GEMM, OpenBLAS's as loaded beside it. */
static int print_gemm(const struct settings *config, struct err *e)
{
	char chosen[256], loaded[256], why[160];
	ERR_TRY(gemm_select(config->gemm, why, sizeof why, e));
	enum gemm_impl impl = gemm_chosen();
	gemm_describe(impl, chosen, sizeof chosen);
	gemm_describe(GEMM_OPENBLAS, loaded, sizeof loaded);
	printf("cpu backend: gemm %s (%s)\n", chosen, why);
	struct settings s;
	struct model_shape m;
	struct err ignore = {0};
	if (!with_known_vocab(config, &s) || model_shape_init(&m, &s, &ignore) != ERR_OK) {
		printf("cpu backend: gemm rate not measured: the model's shape is not known yet\n");
		return ERR_OK;
	}
	struct model_gemm g = model_microbatch_gemm(&m, &s);
	printf("cpu backend: gemm one thread at the model's microbatch GEMM %d x %d x %d: %s "
	       "%.1f GFLOP/s", g.m, g.n, g.k, gemm_impl_name(impl),
	       gemm_rate(impl, g.m, g.n, g.k, GEMM_ENV_TRIAL_S));
	if (impl != GEMM_OPENBLAS)
		printf(", OpenBLAS as loaded %.1f GFLOP/s",
		       gemm_rate(GEMM_OPENBLAS, g.m, g.n, g.k, GEMM_ENV_TRIAL_S));
	printf("\n");
	return ERR_OK;
}

/* What one rank holds: the vocabulary's share shows (output layer and logits). A file
 * source without model.vocab has the vocabulary its prepared corpus records; the files
 * themselves are not read for it. */
static void print_memory(const struct settings *config)
{
	struct engine_memory m;
	struct settings with_vocab, *s = &with_vocab;
	const double mib = 1024.0 * 1024.0;
	if (!with_known_vocab(config, s)) {
		printf("memory per rank: the vocabulary is the files' (model.vocab = 0) and no "
		       "corpus is prepared from them yet: run prepare, or set model.vocab\n");
		return;
	}
	engine_memory_per_rank(s, &m);
	const char *state = s->optimizer == OPTIM_ADAMW ? "AdamW's moments" : "momentum";
	char floats[64];
	if (m.optim_bytes == m.optim_full_bytes)
		snprintf(floats, sizeof floats, "%zu x %zu floats",
			 m.state_bytes / sizeof(float) / m.n_params, m.n_params);
	else
		snprintf(floats, sizeof floats, "2 x %zu floats and a slice", m.n_params);
	printf("memory per rank: %.1f MiB = parameters, gradients and %s %.1f MiB (%s, "
	       "vocabulary %d)%s + workspace %.1f MiB for %d positions (logits %.1f MiB)\n",
	       m.total / mib, state, m.state_bytes / mib, floats, s->vocab,
	       m.tree_bytes ? " + exact mode's tree" : "", m.workspace_bytes / mib, m.rows,
	       m.logits_bytes / mib);
	if (s->shard_optimizer)
		printf("memory per rank: %s %.1f MiB, the rank's slice of %.1f MiB sharded over "
		       "%d ranks (train.shard_optimizer)\n", state, m.optim_bytes / mib,
		       m.optim_full_bytes / mib, s->world);
	if (m.tree_bytes)
		printf("memory per rank: exact mode's tree buffers %.1f MiB on rank 0\n",
		       m.tree_bytes / mib);
	/* on the cpu backend a rank's memory is the process's own: the whole figure is what a
	 * training process needs (the BLAS library's buffers aside) */
	int local = s->world, first = 0;
	struct err no_mpi = {0};
	if (procs_local_ranks(s, &local, &first, &no_mpi) != ERR_OK)
		local = s->world;
	/* the first parameters and checkpoints pass through one buffer a piece at a time;
	 * model.init's file is read whole */
	printf("memory per process: host buffer %.1f MiB (%s the checkpoints' parameters and "
	       "%s pass through it a piece at a time); with the cpu backend's %d rank%s %.1f "
	       "MiB in all\n",
	       m.host_bytes / mib, s->model_init[0] ? "the first parameters, read whole from "
	       "model.init's file;" : "the first parameters and", state,
	       local, local == 1 ? "" : "s",
	       (m.host_bytes + (double)local * (m.total - m.tree_bytes) +
		(first == 0 ? (double)m.tree_bytes : 0.0)) / mib); /* rank 0 holds the tree */
}

int cmd_env(struct app *a, struct err *e)
{
	printf("ddptok-run %s\n", DDPTOK_VERSION);
	char blas[256], advice[512];
	int slow = blas_describe(blas, sizeof blas, advice, sizeof advice);
	printf("cpu backend: %s (one-thread BLAS calls; devices.threads splits a rank's GEMMs "
	       "and loops), %s build of the element loops\n", blas, dev_host_kernels_name());
	if (slow)
		printf("cpu backend: warning: %s\n", advice);
	ERR_TRY(print_gemm(&a->s, e));
#if DDPTOK_HAVE_CUDA
	printf("cuda backend: built\n");
	ERR_TRY(gpu_env_report(stdout, e));
#else
	printf("cuda backend: not built\n");
#endif
	int gpus = 0;
	char why[512];
	ERR_TRY(placement_gpus(&a->s, &gpus, why, sizeof why, e));
	struct placement plan;
	struct err pe = {0};
	printf("configuration %s: W = %d, reduce %s\n", a->cfg.path, a->s.world,
	       a->s.reduce == COLL_AVG ? "avg" : "sum");
	print_memory(&a->s);
	procs_report(stdout, &a->s);
	/* --check opens every rank of the world in this process (devcheck_run), so its plan
	 * puts them all on this host; without it, the plan is the run's (this host's ranks) */
	struct rank_hosts hosts;
	if (placement_rank_hosts(&a->s, &hosts, &pe) != ERR_OK ||
	    placement_decide(&a->s, a->o.check ? NULL : &hosts, gpus, why, &plan, &pe) != ERR_OK) {
		printf("backend: this configuration does not run here: %s\n", pe.msg);
		if (!a->o.check)
			return ERR_OK;
		return ERR(e, ERR_DEVCHECK, "env --check: the device plan cannot run here: %s",
			   pe.msg);
	}
	print_placement(&a->s, &plan);
	if (!a->o.check)
		return ERR_OK;
	fflush(stdout);
	ERR_TRY(devcheck_run(&a->s, &plan, a->o.fault.inject_rank, stdout, e));
	printf("env --check: every rank passed\n");
	return ERR_OK;
}
