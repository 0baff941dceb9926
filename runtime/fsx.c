/*
 * fsx: atomic writes, durable directories and the small file helpers declared in fsx.h.
 *
 * Only POSIX calls (open/write/fsync/rename/openat/unlinkat), so that each step of the
 * write-temp/fsync/rename/fsync-dir protocol is explicit and every failure can name its
 * path. errno is mapped to ERR_IO through ERR_ERRNO right where it is observed.
 */
#include "fsx.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static int copy_path(char *out, size_t cap, const char *path, struct err *e)
{
	size_t n = strlen(path);
	if (n + 1 > cap) {
		if (cap)
			out[0] = '\0';
		return ERR(e, ERR_IO, "path too long (%zu bytes): %.200s...", n, path);
	}
	memcpy(out, path, n + 1);
	return 0;
}

int fsx_join(char *out, size_t cap, const char *a, const char *b, struct err *e)
{
	size_t la = strlen(a), lb = strlen(b);
	const char *sep = (la > 0 && a[la - 1] != '/') ? "/" : "";
	int n = snprintf(out, cap, "%s%s%s", a, sep, b);
	if (n < 0 || (size_t)n >= cap) {
		if (cap)
			out[0] = '\0';
		return ERR(e, ERR_IO, "path too long (%zu bytes): %.200s/%.200s", la + 1 + lb, a, b);
	}
	return 0;
}

int fsx_dirname(char *out, size_t cap, const char *path, struct err *e)
{
	size_t n = strlen(path);
	/* ignore trailing slashes, then the last component, then the slashes before it */
	while (n > 1 && path[n - 1] == '/')
		n--;
	while (n > 0 && path[n - 1] != '/')
		n--;
	if (n == 0)
		return copy_path(out, cap, ".", e);
	while (n > 1 && path[n - 1] == '/')
		n--;
	if (n + 1 > cap) {
		if (cap)
			out[0] = '\0';
		return ERR(e, ERR_IO, "path too long: %.200s", path);
	}
	memcpy(out, path, n);
	out[n] = '\0';
	return 0;
}

int fsx_fsync_dir(const char *dir, struct err *e)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return ERR_ERRNO(e, "cannot open directory %s", dir);
	if (fsync(fd) != 0 && errno != EINVAL) {
		int saved = errno;
		close(fd);
		return err_errno(e, saved, __FILE__, __LINE__, "cannot fsync directory %s", dir);
	}
	close(fd);
	return 0;
}

int fsx_mkdirs(const char *path, struct err *e)
{
	char buf[FSX_PATH_MAX];
	struct stat st;
	int rc;

	if (!path || !path[0])
		return ERR(e, ERR_IO, "cannot create directory: empty path");
	if ((rc = copy_path(buf, sizeof buf, path, e)))
		return rc;
	for (char *p = buf;; p++) {
		char c = *p;
		if (c != '/' && c != '\0')
			continue;
		if (p == buf) /* leading '/' */
			continue;
		if (p[-1] == '/') { /* "a//b": the prefix is the same directory as before */
			if (c == '\0')
				break;
			continue;
		}
		*p = '\0';
		if (mkdir(buf, 0777) == 0) {
			char parent[FSX_PATH_MAX];
			if ((rc = fsx_dirname(parent, sizeof parent, buf, e)) ||
			    (rc = fsx_fsync_dir(parent, e)))
				return rc;
		} else if (errno == EEXIST) {
			if (stat(buf, &st) != 0)
				return ERR_ERRNO(e, "cannot create directory %s", buf);
			if (!S_ISDIR(st.st_mode))
				return ERR(e, ERR_IO, "cannot create directory %s: %s exists and is not a directory",
					   path, buf);
		} else {
			int saved = errno;
			if (strcmp(buf, path) == 0)
				return err_errno(e, saved, __FILE__, __LINE__, "cannot create directory %s", path);
			return err_errno(e, saved, __FILE__, __LINE__, "cannot create directory %s (at %s)",
					 path, buf);
		}
		if (c == '\0')
			break;
		*p = c;
	}
	return 0;
}

int fsx_write_fd(int fd, const void *data, size_t len, const char *what, struct err *e)
{
	const char *p = data;
	while (len > 0) {
		size_t chunk = len > (1u << 30) ? (1u << 30) : len;
		ssize_t n = write(fd, p, chunk);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return ERR_ERRNO(e, "cannot write %s", what);
		}
		if (n == 0)
			return ERR(e, ERR_IO, "cannot write %s: no progress (short write)", what);
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int fsync_close(int fd, const char *what, struct err *e)
{
	if (fsync(fd) != 0) {
		int saved = errno;
		close(fd);
		return err_errno(e, saved, __FILE__, __LINE__, "cannot fsync %s", what);
	}
	if (close(fd) != 0)
		return ERR_ERRNO(e, "cannot close %s", what);
	return 0;
}

int fsx_write_durable(const char *path, const void *data, size_t len, struct err *e)
{
	struct fsx_part whole = {data, len};
	return fsx_write_durable_parts(path, &whole, 1, e);
}

int fsx_write_durable_parts(const char *path, const struct fsx_part *parts, int n,
			    struct err *e)
{
	int rc = 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0)
		return ERR_ERRNO(e, "cannot create %s", path);
	for (int i = 0; i < n && rc == 0; i++)
		rc = fsx_write_fd(fd, parts[i].data, parts[i].len, path, e);
	if (rc) {
		close(fd);
		unlink(path);
		return rc;
	}
	if ((rc = fsync_close(fd, path, e))) {
		unlink(path);
		return rc;
	}
	return 0;
}

int fsx_writer_open(struct fsx_writer *w, const char *path, struct err *e)
{
	int rc;
	w->fd = -1;
	w->path[0] = w->tmp[0] = '\0';
	if (!path || !path[0])
		return ERR(e, ERR_IO, "cannot write file: empty path");
	if ((rc = copy_path(w->path, sizeof w->path, path, e)))
		return rc;
	int n = snprintf(w->tmp, sizeof w->tmp, "%s.tmp.%ld", path, (long)getpid());
	if (n < 0 || (size_t)n >= sizeof w->tmp) {
		w->tmp[0] = '\0';
		return ERR(e, ERR_IO, "path too long: %.200s", path);
	}
	w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (w->fd < 0)
		return ERR_ERRNO(e, "cannot create %s", w->tmp);
	return 0;
}

int fsx_writer_write(struct fsx_writer *w, const void *data, size_t len, struct err *e)
{
	int rc;
	if (w->fd < 0)
		return ERR(e, ERR_IO, "cannot write %s: writer not open", w->path);
	if ((rc = fsx_write_fd(w->fd, data, len, w->tmp, e)))
		fsx_writer_abort(w);
	return rc;
}

int fsx_writer_commit(struct fsx_writer *w, struct err *e)
{
	char dir[FSX_PATH_MAX];
	int rc, fd = w->fd;

	if (fd < 0)
		return ERR(e, ERR_IO, "cannot commit %s: writer not open", w->path);
	w->fd = -1;
	ERR_TRY_GOTO(rc, fsync_close(fd, w->tmp, e), fail);
	if (rename(w->tmp, w->path) != 0) {
		rc = ERR_ERRNO(e, "cannot rename %s to %s", w->tmp, w->path);
		goto fail;
	}
	w->tmp[0] = '\0'; /* nothing left to clean up */
	if ((rc = fsx_dirname(dir, sizeof dir, w->path, e)))
		return rc;
	return fsx_fsync_dir(dir, e);
fail:
	unlink(w->tmp);
	w->tmp[0] = '\0';
	return rc;
}

void fsx_writer_abort(struct fsx_writer *w)
{
	if (w->fd >= 0) {
		close(w->fd);
		w->fd = -1;
	}
	if (w->tmp[0]) {
		unlink(w->tmp);
		w->tmp[0] = '\0';
	}
}

int fsx_write_atomic(const char *path, const void *data, size_t len, struct err *e)
{
	struct fsx_writer w;
	int rc;
	if ((rc = fsx_writer_open(&w, path, e)) || (rc = fsx_writer_write(&w, data, len, e)))
		goto fail;
	return fsx_writer_commit(&w, e);
fail:
	fsx_writer_abort(&w);
	return rc;
}

int fsx_map_read(const char *path, void **data, size_t *len, struct err *e)
{
	struct stat st;
	int rc = ERR_OK;
	*data = NULL;
	*len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ERR_ERRNO(e, "cannot open %s", path);
	if (fstat(fd, &st) != 0)
		rc = ERR_ERRNO(e, "cannot stat %s", path);
	else if (!S_ISREG(st.st_mode))
		rc = ERR(e, ERR_IO, "cannot map %s: not a regular file", path);
	else if (st.st_size > 0) {
		void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED)
			rc = ERR_ERRNO(e, "cannot map %s (%lld bytes)", path, (long long)st.st_size);
		else {
			*data = p;
			*len = (size_t)st.st_size;
		}
	}
	close(fd); /* the mapping keeps the file */
	return rc;
}

void fsx_unmap(void *data, size_t len)
{
	if (data && len)
		munmap(data, len);
}

void fsx_map_release(void *data, size_t len)
{
	if (data && len)
		madvise(data, len, MADV_DONTNEED);
}

int fsx_read_all(const char *path, char **buf, size_t *len, struct err *e)
{
	struct stat st;
	char *data = NULL;
	size_t cap, n = 0;
	int rc = 0;

	*buf = NULL;
	*len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ERR_ERRNO(e, "cannot open %s", path);
	if (fstat(fd, &st) != 0) {
		rc = ERR_ERRNO(e, "cannot stat %s", path);
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		rc = ERR(e, ERR_IO, "cannot read %s: is a directory", path);
		goto out;
	}
	cap = (S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t)st.st_size : 4096) + 1;
	data = malloc(cap);
	if (!data) {
		rc = ERR(e, ERR_NOMEM, "cannot read %s: out of memory (%zu bytes)", path, cap);
		goto out;
	}
	for (;;) {
		if (n + 1 >= cap) { /* keep room for the NUL; grows when the file grew */
			size_t ncap = cap * 2;
			char *p = realloc(data, ncap);
			if (!p) {
				rc = ERR(e, ERR_NOMEM, "cannot read %s: out of memory (%zu bytes)", path, ncap);
				goto out;
			}
			data = p;
			cap = ncap;
		}
		ssize_t r = read(fd, data + n, cap - 1 - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			rc = ERR_ERRNO(e, "cannot read %s", path);
			goto out;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	data[n] = '\0';
	*buf = data;
	*len = n;
	data = NULL;
out:
	free(data);
	close(fd);
	return rc;
}

bool fsx_exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

bool fsx_is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Removes the entry `name` of directory `parent_fd`; `shown` is its full path, grown in place
 * (cap FSX_PATH_MAX) while descending so that errors can name the exact entry. */
static int remove_at(int parent_fd, const char *name, char *shown, struct err *e)
{
	struct stat st;
	int rc = 0;

	if (fstatat(parent_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		if (errno == ENOENT)
			return 0;
		return ERR_ERRNO(e, "cannot remove %s", shown);
	}
	if (S_ISDIR(st.st_mode)) {
		int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return ERR_ERRNO(e, "cannot open directory %s", shown);
		DIR *d = fdopendir(fd);
		if (!d) {
			close(fd);
			return ERR_ERRNO(e, "cannot open directory %s", shown);
		}
		size_t base = strlen(shown);
		struct dirent *de;
		for (;;) {
			errno = 0;
			de = readdir(d);
			if (!de) {
				if (errno)
					rc = ERR_ERRNO(e, "cannot list directory %s", shown);
				break;
			}
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			size_t ln = strlen(de->d_name);
			if (base + 1 + ln + 1 > FSX_PATH_MAX) {
				rc = ERR(e, ERR_IO, "cannot remove %s: path too long below it", shown);
				break;
			}
			shown[base] = '/';
			memcpy(shown + base + 1, de->d_name, ln + 1);
			rc = remove_at(dirfd(d), de->d_name, shown, e);
			shown[base] = '\0';
			if (rc)
				break;
		}
		closedir(d);
		if (rc)
			return rc;
		if (unlinkat(parent_fd, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
			return ERR_ERRNO(e, "cannot remove directory %s", shown);
		return 0;
	}
	if (unlinkat(parent_fd, name, 0) != 0 && errno != ENOENT)
		return ERR_ERRNO(e, "cannot remove %s", shown);
	return 0;
}

int fsx_remove_tree(const char *path, struct err *e)
{
	char shown[FSX_PATH_MAX];
	int rc;

	if (!path || !path[0])
		return ERR(e, ERR_IO, "refusing to remove an empty path");
	if (strspn(path, "/.") == strlen(path))
		return ERR(e, ERR_IO, "refusing to remove %s", path);
	if ((rc = copy_path(shown, sizeof shown, path, e)))
		return rc;
	return remove_at(AT_FDCWD, path, shown, e);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void fsx_free_names(char **names, size_t count)
{
	if (!names)
		return;
	for (size_t i = 0; i < count; i++)
		free(names[i]);
	free(names);
}

int fsx_list_dir(const char *path, char ***names, size_t *count, struct err *e)
{
	char **v = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	*names = NULL;
	*count = 0;
	DIR *d = opendir(path);
	if (!d)
		return ERR_ERRNO(e, "cannot list directory %s", path);
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (!de) {
			if (errno)
				rc = ERR_ERRNO(e, "cannot list directory %s", path);
			break;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			char **p = realloc(v, ncap * sizeof *v);
			if (!p) {
				rc = ERR(e, ERR_NOMEM, "cannot list directory %s: out of memory", path);
				break;
			}
			v = p;
			cap = ncap;
		}
		if (!(v[n] = strdup(de->d_name))) {
			rc = ERR(e, ERR_NOMEM, "cannot list directory %s: out of memory", path);
			break;
		}
		n++;
	}
	closedir(d);
	if (rc) {
		fsx_free_names(v, n);
		return rc;
	}
	if (n > 1)
		qsort(v, n, sizeof *v, cmp_names);
	*names = v;
	*count = n;
	return 0;
}
