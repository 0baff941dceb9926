/*
 * procs: agreement across processes between windows (see procs.h).
 */
#include "procs.h"

#include <stdio.h>
#include <string.h>

#include "ddptok_config.h"
#include "engine.h"
#include "fsx.h"
#include "world.h"

int procs_check_data_lock(const char *lock, double timeout_s, struct err *e)
{
	const struct world *wd = world_get();
	char locks[WORLD_MAX_PROCS][65], mine[65];
	snprintf(mine, sizeof mine, "%s", lock);
	ERR_TRY(world_allgather(mine, sizeof mine, locks, timeout_s,
				"the comparison of data locks", e));
	for (int p = 1; p < wd->procs; p++)
		if (memcmp(locks[p], locks[0], sizeof mine) != 0)
			return ERR(e, ERR_DATA, "the data differ between processes: %s has data "
				   "lock %.12s..., %s has %.12s... (every host must hold the same "
				   "data and [data] settings)", world_proc_name(p), locks[p],
				   world_proc_name(0), locks[0]);
	return ERR_OK;
}

int procs_agree_stop(int *reason, double timeout_s, struct err *e)
{
	return world_max_int(reason, timeout_s, "the agreement on stopping", e);
}

/* what process 0 tells the others after writing a checkpoint */
struct commit_result {
	int rc, code;
	char msg[sizeof(((struct err *)0)->msg)];
	char path[FSX_PATH_MAX];
};

int procs_checkpoint_result(int rc, char *path, size_t cap, double timeout_s, struct err *e)
{
	const struct world *wd = world_get();
	static struct commit_result r; /* one thread (the main one) at a time; large */
	if (wd->procs == 1)
		return rc;
	memset(&r, 0, sizeof r);
	if (wd->proc == 0) {
		r.rc = rc;
		r.code = rc ? e->code : 0;
		snprintf(r.msg, sizeof r.msg, "%s", rc ? e->msg : "");
		snprintf(r.path, sizeof r.path, "%s", path);
	}
	ERR_TRY(world_bcast(&r, sizeof r, 0, timeout_s, "the checkpoint's commit result", e));
	if (wd->proc == 0)
		return rc;
	if (r.rc)
		return ERR(e, r.code ? r.code : r.rc, "%s could not write the checkpoint: %s",
			   world_proc_name(0), r.msg);
	snprintf(path, cap, "%s", r.path);
	return ERR_OK;
}

void procs_report(FILE *out, const struct settings *s)
{
	const struct world *wd = world_get();
	int local, first;
	struct err e;
	err_clear(&e);
	fprintf(out, "mpi: %s\n", DDPTOK_HAVE_MPI ? (wd->mpi ? wd->library :
		"built; not started by mpirun or srun") : "not built");
	if (engine_local_ranks(s, &local, &first, &e) != ERR_OK) {
		fprintf(out, "processes: P = %d: %s\n", wd->procs, e.msg);
		return;
	}
	fprintf(out, "processes: P = %d x L = %d = W = %d ranks; this is process %d, ranks "
		"%d..%d; hosts:", wd->procs, local, s->world, wd->proc, first, first + local - 1);
	for (int p = 0; p < wd->procs; p++)
		fprintf(out, "%s %s", p ? "," : "", wd->hosts[p]);
	fprintf(out, "\n");
}
