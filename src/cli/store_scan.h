/*
 * store_scan: the checks on directories and writer processes that the checkpoints and
 * clean commands share.
 */
#ifndef DDPTOK_STORE_SCAN_H
#define DDPTOK_STORE_SCAN_H

/* Whether path is a directory, not a link to one. */
int store_real_dir(const char *path);
/* Whether the process that named a partial write or an old copy still runs (then it may
 * be writing or removing it right now). A pid reused since is taken as running: safe. */
int store_pid_running(long pid);

#endif
