/*
 * world: the processes of one run (MPI), as seen from one of them.
 *
 *   mpirun -np P ddptok-run CONFIG      P processes x L device threads = W ranks
 *
 * A process started by a launcher (mpirun, srun) joins MPI; a process started on its own
 * stays a world of one and never touches MPI, so a single-process run needs neither a
 * launcher nor MPI at run time. Every exchange between processes is made by one thread at
 * a time (the main thread between windows, or one device thread inside a collective:
 * MPI_THREAD_SERIALIZED) and waits at most a timeout, so that a stuck or dead peer ends
 * the run instead of hanging it.
 */
#ifndef DDPTOK_WORLD_H
#define DDPTOK_WORLD_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define WORLD_MAX_PROCS 8

struct world {
	int procs;            /* P (1 without a launcher) */
	int proc;             /* this process, 0..P-1 */
	int mpi;              /* MPI is initialised */
	char host[64];        /* this host's name */
	char hosts[WORLD_MAX_PROCS][64]; /* every process's host (index: process) */
	char library[160];    /* MPI library and version ("none" without MPI) */
};

/* Joins MPI when a launcher started this process (and the build has MPI); otherwise a
 * world of one. ERR_CONFIG when launched as one of several processes by a build without
 * MPI, or more than WORLD_MAX_PROCS processes. Call once, before any thread starts. */
int world_init(int *argc, char ***argv, struct err *e);
/* The world (a world of one before world_init). */
const struct world *world_get(void);
/* Leaves MPI (when joined) after a run that ended together. */
void world_finalize(void);
/* Ends every process of the run with exit status `code` (MPI_Abort) when there are
 * several, unless world_failed_together() said that every process met the failure;
 * returns (doing nothing) in a world of one. */
void world_abort(int code);
/* Every process has met the same failure (found by an exchange: differing data, a failed
 * checkpoint commit): each ends by itself, none needs to end the others. */
void world_failed_together(void);
/* "process p (host)" for messages. */
const char *world_proc_name(int proc);

/* recv[p * bytes ..] = process p's `send` (bytes each), on every process, waiting at most
 * timeout_s (<= 0: forever). ERR_DEVICE naming the operation on timeout or MPI error. */
int world_allgather(const void *send, size_t bytes, void *recv, double timeout_s,
		    const char *what, struct err *e);
/* Process `root`'s buf[0..bytes) on every process. */
int world_bcast(void *buf, size_t bytes, int root, double timeout_s, const char *what,
		struct err *e);
/* The largest of every process's *v, on every process. */
int world_max_int(int *v, double timeout_s, const char *what, struct err *e);

#endif
