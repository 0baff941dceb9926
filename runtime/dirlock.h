/*
 * dirlock: one writer per directory.
 *
 * Two processes writing the same outputs or artifacts directory would interleave their
 * files: one run's checkpoints replaced by the other's, a metrics file truncated under
 * its writer. A command that writes a directory therefore first takes an exclusive
 * flock() on DIRLOCK_NAME inside it, and keeps it until it ends; a second writer is
 * refused at once, with the first one's pid, host and command line, which the holder
 * writes into the lock file. The kernel drops the lock when the holder's descriptor
 * closes, so a killed process leaves no stale lock (its file stays, harmless, and is
 * taken over by the next writer); a process that ends normally removes the file. Since
 * a file can be removed between another process's open() and flock(), a taker checks
 * that the file it locked is still the one the name points to, and tries again if not.
 * Readers take no lock.
 *
 * A directory that does not exist yet is created (with its missing parents) to hold the
 * lock; what was created is removed again at the release if nothing was written into it,
 * so that a command refused before it wrote anything leaves no empty directories.
 *
 * One struct dirlock holds the locks of several directories; a directory reached twice
 * (the same directory under two names) is locked once, since two flock()s of one
 * process on the same file through two descriptors would refuse each other.
 */
#ifndef DDPTOK_DIRLOCK_H
#define DDPTOK_DIRLOCK_H

#include <sys/types.h>

#include "err.h"
#include "fsx.h"

#define DIRLOCK_NAME ".ddptok-run.lock"
#define DIRLOCK_MAX 4

struct dirlock {
	int n;
	int fd[DIRLOCK_MAX];
	dev_t dev[DIRLOCK_MAX]; /* the directory locked, to recognize it under another name */
	ino_t ino[DIRLOCK_MAX];
	char path[DIRLOCK_MAX][FSX_PATH_MAX]; /* its lock file */
	char dir[DIRLOCK_MAX][FSX_PATH_MAX];  /* the directory as given */
	char made[DIRLOCK_MAX][FSX_PATH_MAX]; /* the outermost directory created for it, or "" */
};

void dirlock_init(struct dirlock *l);
/* Locks directory `dir` for this process (creating it and its parents if needed),
 * recording `holder` (what runs, e.g. the command line) beside the pid and host name.
 * ERR_IO when another process holds it (naming that process and `key`, the setting the
 * directory comes from) or when the directory or the lock file cannot be created. */
int dirlock_take(struct dirlock *l, const char *dir, const char *key, const char *holder,
		 struct err *e);
/* Removes the lock files, the directories created for them that stayed empty, and
 * releases the locks. */
void dirlock_release(struct dirlock *l);

#endif
