/*
 * world: processes through MPI (see world.h).
 *
 * A launcher is recognised by the variables it sets for its processes: Open MPI's mpirun
 * (OMPI_COMM_WORLD_SIZE), PMIx and PMI launchers such as srun --mpi=pmix (PMIX_RANK,
 * PMI_SIZE). Without one MPI_Init is not called at all: a singleton MPI_Init would work,
 * but it costs Open MPI's runtime start-up on every run and may fail where that runtime
 * cannot start (no shared memory, no network), for no benefit in a world of one.
 *
 * Exchanges use non-blocking collectives polled against a deadline (MPI's blocking ones
 * have no timeout).
 */
#include "world.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "ddptok_config.h"

#if DDPTOK_HAVE_MPI
#include <mpi.h>
#endif

static struct world the_world = {.procs = 1, .proc = 0, .library = "none"};
static int failed_together;

void world_failed_together(void)
{
	failed_together = 1;
}

const struct world *world_get(void)
{
	return &the_world;
}

/* The number of processes the launcher started (1: none, or a world of one). */
static int launched_procs(void)
{
	static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
		const char *v = getenv(vars[i]);
		if (v && atoi(v) > 0)
			return atoi(v);
	}
	return getenv("PMIX_RANK") ? 2 : 1; /* PMIx without a size variable: ask MPI */
}

/* "process p (host)" of every process, filled once the hosts are known */
static char proc_names[WORLD_MAX_PROCS][96];

static void name_processes(void)
{
	for (int p = 0; p < the_world.procs; p++)
		snprintf(proc_names[p], sizeof proc_names[p], "process %d (%.64s)", p,
			 the_world.hosts[p]);
}

const char *world_proc_name(int proc)
{
	if (proc < 0 || proc >= the_world.procs || !proc_names[proc][0])
		return "an unknown process";
	return proc_names[proc];
}

#if DDPTOK_HAVE_MPI

/* Waits for *req until the deadline, then gives up (the caller aborts the run: an MPI
 * request cannot be withdrawn). */
static int wait_request(MPI_Request *req, double timeout_s, const char *what, struct err *e)
{
	double until = clock_now_s() + timeout_s;
	struct timespec nap = {0, 50000}; /* 50 us: the latency a poll adds at most */
	for (;;) {
		int done = 0;
		if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
			return ERR(e, ERR_DEVICE, "%s: %s across processes failed (MPI error)",
				   world_proc_name(the_world.proc), what);
		if (done)
			return ERR_OK;
		if (timeout_s > 0 && clock_now_s() > until)
			return ERR(e, ERR_DEVICE, "%s: %s across processes timed out after %g s "
				   "(devices.timeout): another process is stuck or gone",
				   world_proc_name(the_world.proc), what, timeout_s);
		nanosleep(&nap, NULL);
	}
}

int world_allgather(const void *send, size_t bytes, void *recv, double timeout_s,
		    const char *what, struct err *e)
{
	MPI_Request req;
	if (!the_world.mpi) {
		memmove(recv, send, bytes);
		return ERR_OK;
	}
	if (bytes > (size_t)1 << 30)
		return ERR(e, ERR_DEVICE, "%s: %zu bytes exceed one exchange", what, bytes);
	if (MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE,
			   MPI_COMM_WORLD, &req) != MPI_SUCCESS)
		return ERR(e, ERR_DEVICE, "%s: cannot start %s across processes",
			   world_proc_name(the_world.proc), what);
	return wait_request(&req, timeout_s, what, e);
}

int world_bcast(void *buf, size_t bytes, int root, double timeout_s, const char *what,
		struct err *e)
{
	MPI_Request req;
	if (!the_world.mpi)
		return ERR_OK;
	if (bytes > (size_t)1 << 30)
		return ERR(e, ERR_DEVICE, "%s: %zu bytes exceed one exchange", what, bytes);
	if (MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD, &req) != MPI_SUCCESS)
		return ERR(e, ERR_DEVICE, "%s: cannot start %s across processes",
			   world_proc_name(the_world.proc), what);
	return wait_request(&req, timeout_s, what, e);
}

int world_max_int(int *v, double timeout_s, const char *what, struct err *e)
{
	MPI_Request req;
	int mine = *v;
	if (!the_world.mpi)
		return ERR_OK;
	if (MPI_Iallreduce(&mine, v, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req) != MPI_SUCCESS)
		return ERR(e, ERR_DEVICE, "%s: cannot start %s across processes",
			   world_proc_name(the_world.proc), what);
	return wait_request(&req, timeout_s, what, e);
}

/* Every process's host name, by process. */
static int gather_hosts(struct err *e)
{
	char all[WORLD_MAX_PROCS][64];
	ERR_TRY(world_allgather(the_world.host, sizeof the_world.host, all, 0,
				"the exchange of host names", e));
	memcpy(the_world.hosts, all, sizeof(all[0]) * (size_t)the_world.procs);
	name_processes();
	return ERR_OK;
}

static int join_mpi(int *argc, char ***argv, struct err *e)
{
	int provided = 0, len = 0, size = 1, rank = 0;
	if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
		return ERR(e, ERR_CONFIG, "cannot initialise MPI");
	the_world.mpi = 1;
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	the_world.procs = size;
	the_world.proc = rank;
	if (provided < MPI_THREAD_SERIALIZED)
		return ERR(e, ERR_CONFIG, "the MPI library offers no MPI_THREAD_SERIALIZED (a "
			   "device thread makes the exchanges of the collective)");
	if (size > WORLD_MAX_PROCS)
		return ERR(e, ERR_CONFIG, "%d processes: at most %d are supported", size,
			   WORLD_MAX_PROCS);
	MPI_Get_library_version(the_world.library, &len);
	the_world.library[strcspn(the_world.library, ",\n")] = '\0';
	return gather_hosts(e);
}

void world_finalize(void)
{
	if (the_world.mpi)
		MPI_Finalize();
	the_world.mpi = 0;
}

void world_abort(int code)
{
	if (the_world.mpi && the_world.procs > 1 && !failed_together) {
		fflush(stdout);
		fflush(stderr);
		MPI_Abort(MPI_COMM_WORLD, code);
	}
}

#else /* no MPI in this build: a world of one */

int world_allgather(const void *send, size_t bytes, void *recv, double timeout_s,
		    const char *what, struct err *e)
{
	(void)timeout_s, (void)what, (void)e;
	memmove(recv, send, bytes);
	return ERR_OK;
}

int world_bcast(void *buf, size_t bytes, int root, double timeout_s, const char *what,
		struct err *e)
{
	(void)buf, (void)bytes, (void)root, (void)timeout_s, (void)what, (void)e;
	return ERR_OK;
}

int world_max_int(int *v, double timeout_s, const char *what, struct err *e)
{
	(void)v, (void)timeout_s, (void)what, (void)e;
	return ERR_OK;
}

static int join_mpi(int *argc, char ***argv, struct err *e)
{
	(void)argc, (void)argv;
	return ERR(e, ERR_CONFIG, "started as one of %d processes, but this build has no MPI "
		   "(configure with -Dmpi=enabled)", launched_procs());
}

void world_finalize(void)
{
}

void world_abort(int code)
{
	(void)code;
}

#endif

int world_init(int *argc, char ***argv, struct err *e)
{
	if (gethostname(the_world.host, sizeof the_world.host) != 0)
		snprintf(the_world.host, sizeof the_world.host, "unknown");
	the_world.host[sizeof the_world.host - 1] = '\0';
	memcpy(the_world.hosts[0], the_world.host, sizeof the_world.host);
	name_processes();
	if (launched_procs() <= 1)
		return ERR_OK;
	return join_mpi(argc, argv, e);
}
