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
#include "optim.h"
#include "outputs.h"
#include "placement.h"
#include "procs.h"
#if DDPTOK_HAVE_CUDA
#include "gpu.h"
#endif

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

/* What one rank holds: the vocabulary's share shows (output layer and logits). A file
 * source without model.vocab has the vocabulary its prepared corpus records; the files
 * themselves are not read for it. */
static void print_memory(const struct settings *config)
{
	struct engine_memory m;
	struct settings with_vocab = *config, *s = &with_vocab;
	char dir[FSX_PATH_MAX];
	struct err ignore = {0};
	const double mib = 1024.0 * 1024.0;
	if (!s->vocab && fsx_join(dir, sizeof dir, s->outputs, output_name(OUT_CORPUS),
				  &ignore) == ERR_OK)
		s->vocab = corpus_store_vocab(dir, config);
	if (!s->vocab) {
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
