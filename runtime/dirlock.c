/*
 * dirlock: exclusive flock() of a directory's lock file (see dirlock.h).
 */
#include "dirlock.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsx.h"

void dirlock_init(struct dirlock *l)
{
	memset(l, 0, sizeof *l);
}

/* The holder's line as it wrote it ("pid 123 on host: train"), or a note when the file
 * is still empty (the holder has just locked it). */
static void read_holder(int fd, char *out, size_t outlen)
{
	ssize_t n = pread(fd, out, outlen - 1, 0);
	if (n <= 0) {
		snprintf(out, outlen, "a process that has not written its name yet");
		return;
	}
	out[n] = '\0';
	out[strcspn(out, "\n")] = '\0';
}

/* Writes "pid N on HOST: holder" over the old content (the file is never empty, so
 * that a refused writer always finds a name). */
static int write_holder(int fd, const char *path, const char *holder, struct err *e)
{
	char host[256] = "unknown host", line[1024];
	if (gethostname(host, sizeof host - 1) != 0)
		snprintf(host, sizeof host, "unknown host");
	host[sizeof host - 1] = '\0';
	int n = snprintf(line, sizeof line, "pid %ld on %s: %s\n", (long)getpid(), host, holder);
	if (n < 0 || (size_t)n >= sizeof line)
		n = (int)sizeof line - 1;
	if (pwrite(fd, line, (size_t)n, 0) != n || ftruncate(fd, n) != 0)
		return ERR_ERRNO(e, "%s: cannot record this process in the lock file", path);
	return ERR_OK;
}

/* Opens and locks the lock file at path into *fd: ERR_OK, or ERR_IO naming the holder
 * (or the failure). A file removed by its holder between our open and flock is not the
 * lock any more: then the next one is taken. */
static int lock_file(const char *path, const char *dir, const char *key, int *fd,
		     struct err *e)
{
	for (int attempt = 0; attempt < 100; attempt++) {
		struct stat held, named;
		char other[512];
		*fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
		if (*fd < 0)
			return ERR_ERRNO(e, "cannot create the lock file %s (%s)", path, key);
		if (flock(*fd, LOCK_EX | LOCK_NB) != 0) {
			int errnum = errno;
			if (errnum != EWOULDBLOCK) {
				close(*fd);
				return err_errno(e, errnum, __FILE__, __LINE__, "cannot lock %s (%s)",
						 path, key);
			}
			read_holder(*fd, other, sizeof other);
			close(*fd);
			return ERR(e, ERR_IO, "directory %s (%s) is being written by another "
				   "ddptok-run (%s); wait for it to end, or give this run other "
				   "directories", dir, key, other);
		}
		if (fstat(*fd, &held) == 0 && stat(path, &named) == 0 &&
		    held.st_dev == named.st_dev && held.st_ino == named.st_ino)
			return ERR_OK;
		close(*fd); /* removed (or replaced) meanwhile */
	}
	return ERR(e, ERR_IO, "cannot lock %s (%s): the lock file keeps being replaced", path, key);
}

/* The outermost directory of `dir` that does not exist (dir itself, or one of its
 * parents) into made, or "" when dir exists. */
static void outermost_missing(const char *dir, char *made, size_t cap)
{
	char probe[FSX_PATH_MAX];
	struct stat st;
	made[0] = '\0';
	snprintf(probe, sizeof probe, "%s", dir);
	while (probe[0] && stat(probe, &st) != 0 && errno == ENOENT) {
		snprintf(made, cap, "%s", probe);
		char *slash = strrchr(probe, '/');
		while (slash && slash > probe && slash[-1] == '/')
			slash--; /* "a//b": the parent is "a" */
		if (!slash || slash == probe)
			break;
		*slash = '\0';
	}
}

/* Removes dir and its parents up to `made` (made by this process), as long as they are
 * empty. */
static void remove_made(const char *dir, const char *made)
{
	char at[FSX_PATH_MAX];
	size_t top = strlen(made);
	snprintf(at, sizeof at, "%s", dir);
	while (strlen(at) >= top && rmdir(at) == 0) {
		char *slash = strrchr(at, '/');
		if (!slash || (size_t)(slash - at) < top)
			break;
		*slash = '\0';
	}
}

int dirlock_take(struct dirlock *l, const char *dir, const char *key, const char *holder,
		 struct err *e)
{
	char path[FSX_PATH_MAX], made[FSX_PATH_MAX];
	struct stat st;
	int fd, rc;
	ERR_TRY(fsx_join(path, sizeof path, dir, DIRLOCK_NAME, e));
	outermost_missing(dir, made, sizeof made);
	if ((rc = fsx_mkdirs(dir, e)) != ERR_OK) {
		err_prefix(e, "directory %s (%s)", dir, key);
		return rc;
	}
	if (stat(dir, &st) != 0)
		return ERR_ERRNO(e, "directory %s (%s)", dir, key);
	for (int i = 0; i < l->n; i++)
		if (l->dev[i] == st.st_dev && l->ino[i] == st.st_ino)
			return ERR_OK; /* already ours */
	if (l->n == DIRLOCK_MAX)
		return ERR(e, ERR_IO, "directory %s (%s): too many directories locked", dir, key);
	rc = lock_file(path, dir, key, &fd, e);
	if (rc == ERR_OK && (rc = write_holder(fd, path, holder, e)) != ERR_OK)
		close(fd); /* closing drops the lock */
	if (rc != ERR_OK) {
		if (made[0])
			remove_made(dir, made);
		return rc;
	}
	l->fd[l->n] = fd;
	l->dev[l->n] = st.st_dev;
	l->ino[l->n] = st.st_ino;
	snprintf(l->path[l->n], sizeof l->path[l->n], "%s", path);
	snprintf(l->dir[l->n], sizeof l->dir[l->n], "%s", dir);
	snprintf(l->made[l->n], sizeof l->made[l->n], "%s", made);
	l->n++;
	return ERR_OK;
}

void dirlock_release(struct dirlock *l)
{
	for (int i = 0; i < l->n; i++) {
		unlink(l->path[i]); /* while still held: nobody else has it yet */
		if (l->made[i][0])
			remove_made(l->dir[i], l->made[i]);
		close(l->fd[i]);
	}
	l->n = 0;
}
