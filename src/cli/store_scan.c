/*
 * store_scan: what the checkpoints and clean commands both ask of what they find under
 * the artifacts directory: whether a path is a directory itself (a link to one is not
 * walked into), and whether the process a leftover names still runs.
 */
#include "store_scan.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

int store_real_dir(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int store_pid_running(long pid)
{
	if (pid <= 0 || pid > INT_MAX || pid == (long)getpid())
		return 0; /* this process writes nothing there: a leftover of an earlier one that
			   * had the same pid (a container's first process, say) */
	return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}
