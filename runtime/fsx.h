/*
 * fsx: file-system helpers with the durability rules ddptok relies on.
 *
 * Everything the program leaves on disk (reports, tensors, checkpoints) must either be
 * there completely or not at all, even if the process is killed or the machine loses
 * power half way. The rule used throughout: write to a temporary name in the same
 * directory, fsync the file, rename() it over the final name, fsync the directory. This
 * module implements that rule once (fsx_write_atomic for a buffer, struct fsx_writer for
 * a stream) together with the small helpers around it: mkdir -p, whole-file reads,
 * sorted directory listings, recursive removal and bounded path joins.
 *
 * All failures are ERR_IO and name the path involved. Paths are limited to FSX_PATH_MAX
 * bytes (including the terminating NUL).
 */
#ifndef DDPTOK_FSX_H
#define DDPTOK_FSX_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

#define FSX_PATH_MAX 4096

/* mkdir -p: creates `path` and its missing parents (mode 0777 & ~umask). An existing
 * directory is fine; an existing non-directory is an error. The parent of every newly
 * created component is fsynced, so that the new directory survives a crash. */
int fsx_mkdirs(const char *path, struct err *e);

/* fsyncs a directory (to make renames and creations inside it durable). File systems
 * that cannot fsync a directory (EINVAL) are accepted silently. */
int fsx_fsync_dir(const char *dir, struct err *e);

/* Writes exactly len bytes to an open descriptor, retrying short writes and EINTR.
 * `what` names the file in the error message. */
int fsx_write_fd(int fd, const void *data, size_t len, const char *what, struct err *e);

/* Replaces `path` atomically by `data`: writes "path.tmp.<pid>" in the same directory,
 * fsyncs it, renames it over `path` and fsyncs the directory. On a failure before the
 * rename the temporary is removed and `path` is untouched (old content or absent). A
 * failure to fsync the directory after the rename is still reported. Two threads of one
 * process must not write the same path at the same time (they share the temp name). */
int fsx_write_atomic(const char *path, const void *data, size_t len, struct err *e);

/* One piece of a file written by fsx_write_durable_parts. */
struct fsx_part {
	const void *data;
	size_t len;
};

/* Creates or truncates `path`, writes data and fsyncs it (no rename: used inside a
 * directory that is itself published atomically). On failure the file is removed. */
int fsx_write_durable(const char *path, const void *data, size_t len, struct err *e);
/* The same with the file's content given as n pieces written one after the other, so a
 * header and a large array need not be joined in memory first. */
int fsx_write_durable_parts(const char *path, const struct fsx_part *parts, int n,
			    struct err *e);

/* Reads a whole file into a malloc'd buffer with one extra NUL byte after the data (so
 * that text can be used as a C string); *len excludes that byte. Free with free(). */
int fsx_read_all(const char *path, char **buf, size_t *len, struct err *e);
/* Maps the regular file `path` read-only (private: a later rewrite, which replaces the
 * file by a rename, does not change what is mapped) into *data, *len bytes; an empty file
 * maps to NULL, 0. Its pages are the file's: they are read when touched and the kernel
 * may drop them again, so a mapped file adds to resident memory only what is in use.
 * fsx_unmap undoes it; fsx_map_release drops its pages from this process's resident set
 * (they stay in the page cache and come back when touched). */
int fsx_map_read(const char *path, void **data, size_t *len, struct err *e);
void fsx_unmap(void *data, size_t len);
void fsx_map_release(void *data, size_t len);

/* Whether something exists at path (lstat: a dangling symlink exists). */
bool fsx_exists(const char *path);
/* Whether path is a directory (following symlinks). */
bool fsx_is_dir(const char *path);

/* rm -rf: removes path and, for a directory, everything below it. Symlinks are removed,
 * never followed. A path that does not exist is not an error. Refuses "" and any path
 * made only of '/' and '.' characters ("/", ".", "..", "/./", ...) with ERR_IO. */
int fsx_remove_tree(const char *path, struct err *e);

/* The entries of a directory except "." and "..", sorted by strcmp. *names is a
 * malloc'd array of *count malloc'd strings; free with fsx_free_names(). */
int fsx_list_dir(const char *path, char ***names, size_t *count, struct err *e);
void fsx_free_names(char **names, size_t count);

/* out = a + "/" + b (no doubled '/' when a ends with one; a == "" gives b). A result
 * that does not fit in cap bytes is ERR_IO ("path too long") and out is set to "". */
int fsx_join(char *out, size_t cap, const char *a, const char *b, struct err *e);

/* out = the directory part of path ("a/b" -> "a", "b" -> ".", "/b" -> "/"). */
int fsx_dirname(char *out, size_t cap, const char *path, struct err *e);

/* Streaming variant of fsx_write_atomic for large outputs:
 *     struct fsx_writer w;
 *     fsx_writer_open(&w, path, e);  fsx_writer_write(&w, ...)*;  fsx_writer_commit(&w, e);
 * and fsx_writer_abort(&w) on any error path (safe to call after a failed open, a failed
 * write, a commit or another abort: it only removes what is still pending). A failed
 * write or commit has already removed the temporary. */
struct fsx_writer {
	int fd;                      /* -1 when nothing is pending */
	char path[FSX_PATH_MAX];     /* final name */
	char tmp[FSX_PATH_MAX];      /* "path.tmp.<pid>" */
};

int fsx_writer_open(struct fsx_writer *w, const char *path, struct err *e);
int fsx_writer_write(struct fsx_writer *w, const void *data, size_t len, struct err *e);
int fsx_writer_commit(struct fsx_writer *w, struct err *e);
void fsx_writer_abort(struct fsx_writer *w);

#endif
