/*
 * dev_host_team: the helper threads of one host device, for splitting one operation.
 *
 * On the CPU backend a rank is a device thread; with devices.threads = T > 1 it owns T - 1
 * helpers, started with the device and parked between operations. team_run hands each
 * thread one part of the operation's index range and returns when every part is done, so
 * the device thread sees the operation complete, as with one thread. The parts are cut
 * by the caller from the sizes alone (never by timing), and each part writes its own
 * outputs only: what a part computes does not depend on which thread runs it or when.
 *
 * OpenBLAS's own thread pool is process-wide (openblas_set_num_threads) and shared by
 * every caller thread, so it cannot give each rank of a process its own threads; a team
 * per rank can, with OpenBLAS kept at one thread.
 */
#ifndef DDPTOK_DEV_HOST_TEAM_H
#define DDPTOK_DEV_HOST_TEAM_H

#include <pthread.h>

#include "err.h"

#define TEAM_MAX_THREADS 256

/* part `part` of `parts` of one operation; `arg` is the operation's arguments */
typedef void (*team_fn)(void *arg, int part, int parts);

struct team {
	int threads; /* the device thread and threads - 1 helpers */
	pthread_t *helpers;
	pthread_mutex_t lock;
	pthread_cond_t wake;   /* a new operation, or the end */
	pthread_cond_t done;   /* the last helper finished its part */
	unsigned long round;   /* operations handed out so far */
	int pending;           /* helpers still running the current operation */
	int parts;             /* parts of the current operation (helper h runs part h + 1) */
	team_fn fn;
	void *arg;
	int stop;
};

/* Starts threads - 1 helpers (threads 1..TEAM_MAX_THREADS; 1: none). */
int team_init(struct team *t, int threads, struct err *e);
/* Runs fn(arg, p, parts) for p = 0..parts-1 (1 <= parts <= threads): part 0 on the
 * calling thread, the others on helpers; returns when all are done. */
void team_run(struct team *t, team_fn fn, void *arg, int parts);
/* Stops and joins the helpers. */
void team_destroy(struct team *t);

#endif
