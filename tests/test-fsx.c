/*
 * test-fsx: the file helpers, above all the atomic-write guarantee: after a failure the
 * target is untouched and no temporary is left behind.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check-run.h"
#include "tmpdir.h"
#include "err.h"
#include "fsx.h"

static void put(const char *dir, const char *name, const char *text)
{
	char p[FSX_PATH_MAX];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	ck_assert_msg(f != NULL, "%s: %s", p, strerror(errno));
	fputs(text, f);
	fclose(f);
}

/* Number of entries in dir (excluding . and ..), via fsx_list_dir. */
static size_t count_entries(const char *dir)
{
	struct err e;
	char **names;
	size_t n;
	err_clear(&e);
	ck_assert_msg(fsx_list_dir(dir, &names, &n, &e) == 0, "%s", e.msg);
	fsx_free_names(names, n);
	return n;
}

START_TEST(test_join_dirname)
{
	struct err e;
	char out[16];
	err_clear(&e);
	ck_assert_int_eq(fsx_join(out, sizeof out, "a/b", "c", &e), 0);
	ck_assert_str_eq(out, "a/b/c");
	ck_assert_int_eq(fsx_join(out, sizeof out, "a/", "c", &e), 0);
	ck_assert_str_eq(out, "a/c");
	ck_assert_int_eq(fsx_join(out, sizeof out, "", "c", &e), 0);
	ck_assert_str_eq(out, "c");
	ck_assert_int_eq(fsx_join(out, sizeof out, "/", "c", &e), 0);
	ck_assert_str_eq(out, "/c");
	/* exactly 15 characters fit in 16 bytes, 16 do not */
	ck_assert_int_eq(fsx_join(out, sizeof out, "0123456", "89abcde", &e), 0);
	ck_assert_str_eq(out, "0123456/89abcde");
	ck_assert_int_eq(fsx_join(out, sizeof out, "0123456", "89abcdef", &e), ERR_IO);
	ck_assert_str_eq(out, "");
	ck_assert_ptr_nonnull(strstr(e.msg, "too long"));

	err_clear(&e);
	char d[64];
	ck_assert_int_eq(fsx_dirname(d, sizeof d, "a/b/c", &e), 0);
	ck_assert_str_eq(d, "a/b");
	ck_assert_int_eq(fsx_dirname(d, sizeof d, "a/b/", &e), 0);
	ck_assert_str_eq(d, "a");
	ck_assert_int_eq(fsx_dirname(d, sizeof d, "b", &e), 0);
	ck_assert_str_eq(d, ".");
	ck_assert_int_eq(fsx_dirname(d, sizeof d, "/b", &e), 0);
	ck_assert_str_eq(d, "/");
	ck_assert_int_eq(fsx_dirname(d, sizeof d, "a//b", &e), 0);
	ck_assert_str_eq(d, "a");
}
END_TEST

START_TEST(test_mkdirs)
{
	struct err e;
	char p[FSX_PATH_MAX];
	char *t = tmpdir_make("test-fsx");
	err_clear(&e);

	snprintf(p, sizeof p, "%s/a/b//c/", t);
	ck_assert_msg(fsx_mkdirs(p, &e) == 0, "%s", e.msg);
	snprintf(p, sizeof p, "%s/a/b/c", t);
	ck_assert(fsx_is_dir(p));
	ck_assert_int_eq(fsx_mkdirs(p, &e), 0); /* existing: fine */

	/* a component that is a regular file */
	put(t, "file", "x");
	snprintf(p, sizeof p, "%s/file/sub/dir", t);
	ck_assert_int_eq(fsx_mkdirs(p, &e), ERR_IO);
	ck_assert_int_eq(e.code, ERR_IO);
	ck_assert_msg(strstr(e.msg, p) != NULL, "message does not name the path: %s", e.msg);

	err_clear(&e);
	snprintf(p, sizeof p, "%s/file", t);
	ck_assert_int_eq(fsx_mkdirs(p, &e), ERR_IO);
	ck_assert_ptr_nonnull(strstr(e.msg, "not a directory"));

	err_clear(&e);
	ck_assert_int_eq(fsx_mkdirs("", &e), ERR_IO);

	/* unwritable parent (meaningless for root, who may write anywhere) */
	if (geteuid() != 0) {
		err_clear(&e);
		snprintf(p, sizeof p, "%s/ro", t);
		ck_assert_int_eq(mkdir(p, 0555), 0);
		snprintf(p, sizeof p, "%s/ro/outputs", t);
		ck_assert_int_eq(fsx_mkdirs(p, &e), ERR_IO);
		ck_assert_ptr_nonnull(strstr(e.msg, p));
		snprintf(p, sizeof p, "%s/ro", t);
		chmod(p, 0755);
	}
	tmpdir_drop(t);
}
END_TEST

START_TEST(test_write_atomic_and_read)
{
	struct err e;
	char p[FSX_PATH_MAX], *buf;
	size_t len;
	char *t = tmpdir_make("test-fsx");
	err_clear(&e);

	snprintf(p, sizeof p, "%s/out.json", t);
	ck_assert_msg(fsx_write_atomic(p, "{\"a\":1}", 7, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(fsx_read_all(p, &buf, &len, &e), 0);
	ck_assert_uint_eq(len, 7);
	ck_assert_str_eq(buf, "{\"a\":1}"); /* NUL-terminated */
	free(buf);

	/* replace with shorter content: no stale tail */
	ck_assert_int_eq(fsx_write_atomic(p, "xy", 2, &e), 0);
	ck_assert_int_eq(fsx_read_all(p, &buf, &len, &e), 0);
	ck_assert_uint_eq(len, 2);
	ck_assert_int_eq(memcmp(buf, "xy\0", 3), 0);
	free(buf);
	ck_assert_uint_eq(count_entries(t), 1); /* no temporary left */

	/* empty content */
	ck_assert_int_eq(fsx_write_atomic(p, NULL, 0, &e), 0);
	ck_assert_int_eq(fsx_read_all(p, &buf, &len, &e), 0);
	ck_assert_uint_eq(len, 0);
	ck_assert_int_eq(buf[0], '\0');
	free(buf);

	/* larger content, binary with NULs */
	size_t big = 3u << 20;
	unsigned char *data = malloc(big);
	for (size_t i = 0; i < big; i++)
		data[i] = (unsigned char)(i * 2654435761u >> 13);
	ck_assert_int_eq(fsx_write_atomic(p, data, big, &e), 0);
	ck_assert_int_eq(fsx_read_all(p, &buf, &len, &e), 0);
	ck_assert_uint_eq(len, big);
	ck_assert_int_eq(memcmp(buf, data, big), 0);
	free(buf);
	free(data);

	/* failure after the temporary was written: the target is a directory */
	char d[FSX_PATH_MAX];
	snprintf(d, sizeof d, "%s/adir", t);
	ck_assert_int_eq(mkdir(d, 0755), 0);
	put(d, "keep", "k");
	ck_assert_int_eq(fsx_write_atomic(d, "zz", 2, &e), ERR_IO);
	ck_assert_msg(strstr(e.msg, d) != NULL, "%s", e.msg);
	ck_assert(fsx_is_dir(d));
	ck_assert_uint_eq(count_entries(d), 1);
	ck_assert_uint_eq(count_entries(t), 2); /* out.json and adir: no temporary */

	/* failure before anything is written: missing parent */
	err_clear(&e);
	snprintf(p, sizeof p, "%s/nope/out.json", t);
	ck_assert_int_eq(fsx_write_atomic(p, "a", 1, &e), ERR_IO);
	ck_assert_msg(strstr(e.msg, p) != NULL, "%s", e.msg);
	ck_assert(!fsx_exists(p));

	/* read errors name the path */
	err_clear(&e);
	ck_assert_int_eq(fsx_read_all(p, &buf, &len, &e), ERR_IO);
	ck_assert_ptr_null(buf);
	ck_assert_msg(strstr(e.msg, p) != NULL, "%s", e.msg);
	err_clear(&e);
	ck_assert_int_eq(fsx_read_all(t, &buf, &len, &e), ERR_IO);

	/* durable (non-renaming) write */
	err_clear(&e);
	snprintf(p, sizeof p, "%s/durable", t);
	ck_assert_int_eq(fsx_write_durable(p, "abc", 3, &e), 0);
	ck_assert_int_eq(fsx_read_all(p, &buf, &len, &e), 0);
	ck_assert_str_eq(buf, "abc");
	free(buf);
	tmpdir_drop(t);
}
END_TEST

/* a mapped file reads as its content; a rewrite by rename leaves the mapping the old file;
 * releasing its pages keeps the content; a directory is refused naming it */
START_TEST(test_map_read)
{
	struct err e;
	char p[FSX_PATH_MAX];
	void *map;
	size_t len;
	char *t = tmpdir_make("test-fsx");
	err_clear(&e);
	snprintf(p, sizeof p, "%s/corpus.bin", t);
	ck_assert_int_eq(fsx_write_atomic(p, "tokens", 6, &e), 0);
	ck_assert_msg(fsx_map_read(p, &map, &len, &e) == 0, "%s", e.msg);
	ck_assert_uint_eq(len, 6);
	ck_assert_int_eq(memcmp(map, "tokens", 6), 0);
	ck_assert_int_eq(fsx_write_atomic(p, "other!", 6, &e), 0);
	fsx_map_release(map, len);
	ck_assert_int_eq(memcmp(map, "tokens", 6), 0);
	fsx_unmap(map, len);
	ck_assert_int_eq(fsx_map_read(t, &map, &len, &e), ERR_IO);
	ck_assert_ptr_nonnull(strstr(e.msg, t));
	ck_assert_ptr_null(map);
	tmpdir_drop(t);
}
END_TEST

START_TEST(test_writer)
{
	struct err e;
	struct fsx_writer w;
	char p[FSX_PATH_MAX], *buf;
	size_t len;
	char *t = tmpdir_make("test-fsx");
	err_clear(&e);

	snprintf(p, sizeof p, "%s/stream.bin", t);
	ck_assert_int_eq(fsx_writer_open(&w, p, &e), 0);
	ck_assert_int_eq(fsx_writer_write(&w, "hello ", 6, &e), 0);
	ck_assert_int_eq(fsx_writer_write(&w, "world", 5, &e), 0);
	ck_assert(!fsx_exists(p)); /* nothing visible before the commit */
	ck_assert(fsx_exists(w.tmp));
	ck_assert_ptr_nonnull(strstr(w.tmp, ".tmp."));
	ck_assert_int_eq(fsx_writer_commit(&w, &e), 0);
	fsx_writer_abort(&w); /* harmless after a commit */
	ck_assert_int_eq(fsx_read_all(p, &buf, &len, &e), 0);
	ck_assert_str_eq(buf, "hello world");
	free(buf);

	/* abort leaves the previous content and no temporary */
	ck_assert_int_eq(fsx_writer_open(&w, p, &e), 0);
	ck_assert_int_eq(fsx_writer_write(&w, "XXXX", 4, &e), 0);
	fsx_writer_abort(&w);
	fsx_writer_abort(&w);
	ck_assert_int_eq(fsx_read_all(p, &buf, &len, &e), 0);
	ck_assert_str_eq(buf, "hello world");
	free(buf);
	ck_assert_uint_eq(count_entries(t), 1);

	/* write after abort is an error, not a crash */
	ck_assert_int_eq(fsx_writer_write(&w, "a", 1, &e), ERR_IO);
	tmpdir_drop(t);
}
END_TEST

START_TEST(test_list_and_remove)
{
	struct err e;
	char p[FSX_PATH_MAX], q[FSX_PATH_MAX];
	char **names;
	size_t n;
	char *t = tmpdir_make("test-fsx");
	char *outside = tmpdir_make("test-fsx");
	err_clear(&e);

	put(t, "b", "1");
	put(t, "a", "2");
	put(t, "c.txt", "3");
	snprintf(p, sizeof p, "%s/sub/deeper", t);
	ck_assert_int_eq(fsx_mkdirs(p, &e), 0);
	put(p, "f", "4");
	put(outside, "precious", "must survive");
	/* symlinks to a file and to a directory outside: removed, never followed */
	snprintf(q, sizeof q, "%s/sub/link-dir", t);
	ck_assert_int_eq(symlink(outside, q), 0);
	snprintf(q, sizeof q, "%s/precious", outside);
	snprintf(p, sizeof p, "%s/sub/deeper/link-file", t);
	ck_assert_int_eq(symlink(q, p), 0);

	ck_assert_int_eq(fsx_list_dir(t, &names, &n, &e), 0);
	ck_assert_uint_eq(n, 4);
	ck_assert_str_eq(names[0], "a");
	ck_assert_str_eq(names[1], "b");
	ck_assert_str_eq(names[2], "c.txt");
	ck_assert_str_eq(names[3], "sub");
	fsx_free_names(names, n);

	snprintf(p, sizeof p, "%s/missing", t);
	ck_assert_int_eq(fsx_list_dir(p, &names, &n, &e), ERR_IO);
	ck_assert_ptr_nonnull(strstr(e.msg, p));
	ck_assert_ptr_null(names);

	err_clear(&e);
	ck_assert_int_eq(fsx_remove_tree("", &e), ERR_IO);
	err_clear(&e);
	ck_assert_int_eq(fsx_remove_tree("/", &e), ERR_IO);
	err_clear(&e);
	ck_assert_int_eq(fsx_remove_tree("//", &e), ERR_IO);
	err_clear(&e);
	ck_assert_int_eq(fsx_remove_tree(".", &e), ERR_IO);
	err_clear(&e);
	ck_assert_int_eq(fsx_remove_tree("/./..", &e), ERR_IO);
	err_clear(&e);

	snprintf(p, sizeof p, "%s/sub", t);
	ck_assert_msg(fsx_remove_tree(p, &e) == 0, "%s", e.msg);
	ck_assert(!fsx_exists(p));
	ck_assert(fsx_exists(q)); /* the symlinks' target is intact */
	ck_assert(fsx_is_dir(outside));
	ck_assert_int_eq(fsx_remove_tree(p, &e), 0); /* already gone: fine */
	snprintf(p, sizeof p, "%s/a", t);
	ck_assert_int_eq(fsx_remove_tree(p, &e), 0); /* a plain file */
	ck_assert(!fsx_exists(p));
	ck_assert_uint_eq(count_entries(t), 2);

	ck_assert(fsx_exists(t) && fsx_is_dir(t));
	snprintf(p, sizeof p, "%s/b", t);
	ck_assert(fsx_exists(p) && !fsx_is_dir(p));
	tmpdir_drop(t);
	tmpdir_drop(outside);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fsx");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_join_dirname);
	tcase_add_test(tc, test_mkdirs);
	tcase_add_test(tc, test_write_atomic_and_read);
	tcase_add_test(tc, test_map_read);
	tcase_add_test(tc, test_writer);
	tcase_add_test(tc, test_list_and_remove);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
