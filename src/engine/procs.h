/*
 * procs: a run over several processes (world.h): how devices.world divides among them,
 * and what they agree on between windows: the data, the stop requests and the
 * checkpoint's commit. In a world of one each of these is the process's own value.
 */
#ifndef DDPTOK_PROCS_H
#define DDPTOK_PROCS_H

#include <stddef.h>

#include <stdio.h>

#include "err.h"
#include "settings.h"

/* This process's share of devices.world: *local ranks from global rank *first (world.h;
 * W = processes x L). ERR_CONFIG naming devices.world and devices.local when they do not
 * divide. */
int procs_local_ranks(const struct settings *s, int *local, int *first, struct err *e);
/* The ranks each of procs processes runs: devices.local (local_key) when it is > 0, else
 * world / procs. ERR_CONFIG naming what does not fit (the process count, devices.local or
 * devices.world) and the settings that would. */
int procs_share(int world, int local_key, int procs, int *local, struct err *e);

/* Every process's data lock equals process 0's; ERR_DATA naming the first process (and
 * its host) that differs otherwise, on every process. */
int procs_check_data_lock(const char *lock, double timeout_s, struct err *e);
/* *reason: the largest stop reason of any process (0: none asked to stop). */
int procs_agree_stop(int *reason, double timeout_s, struct err *e);
/* Process 0's result of writing a checkpoint (rc, and e's message when it failed, path[]
 * the directory written otherwise) on every process. Returns that result. */
int procs_checkpoint_result(int rc, char *path, size_t cap, double timeout_s, struct err *e);
/* Process 0's buf[0..bytes) on every process (exchanged as `what`), or, when making it
 * failed on process 0 (rc != 0 there, its message in e), that failure on every process
 * ("<process 0> failed on <what>: <message>").
 * Returns rc in a world of one. */
int procs_from_process0(int rc, void *buf, size_t bytes, const char *what, double timeout_s,
			struct err *e);
/* The checkpoint directory `dir` as process 0 reads it, on every process, so that no
 * shared file system is needed to resume from it or evaluate it (`purpose`: "resume",
 * "evaluate"): process 0 sends its files, the others write them into
 * <own_root>/<purpose>/<name of dir> (replacing what was there) and get that path in
 * local[]; process 0 (and a world of one) gets dir itself. A failure to read dir on
 * process 0 fails every process with its message. */
int procs_share_checkpoint(const char *dir, const char *own_root, const char *purpose,
			   char *local, size_t cap, double timeout_s, struct err *e);
/* `env`'s lines about the processes: the MPI library, P, L, W and the hosts (or why
 * devices.world does not divide among the processes). */
void procs_report(FILE *out, const struct settings *s);

#endif
