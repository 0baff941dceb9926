/*
 * test-ckpt: the checkpoint store. A committed checkpoint verifies and reads back; every
 * kind of damage (flipped byte, truncation, missing file, missing or broken manifest) is
 * refused with its own message; unfinished checkpoints are listed but never used; a
 * step-NNNN in the way of a rewrite is deleted only when it is a valid checkpoint holding
 * nothing else, and kept aside (never deleted) otherwise; a replaced copy whose removal
 * does not complete is named as such; a directory of checkpoints given where one was
 * expected is called that; a writer killed with SIGKILL at random moments never leaves
 * a step-NNNN directory that is accepted with content other than what was written for it;
 * and a file a verification scanned reads again only while it is the file verified.
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "check-run.h"
#include "tmpdir.h"
#include "ckpt.h"
#include "digest.h"
#include "err.h"
#include "fsx.h"
#include "prng.h"

/* Test double for unlinkat(2), which the store's removals go through: it fails for entries
 * named fail_unlink_name (as if the process had been killed before removing them) and is
 * the system call otherwise. */
static const char *fail_unlink_name;

int unlinkat(int dirfd, const char *path, int flags)
{
	if (fail_unlink_name && !strcmp(path, fail_unlink_name)) {
		errno = EACCES;
		return -1;
	}
	return (int)syscall(SYS_unlinkat, dirfd, path, flags);
}

static void path2(char *out, const char *a, const char *b)
{
	struct err e;
	err_clear(&e);
	ck_assert_msg(fsx_join(out, FSX_PATH_MAX, a, b, &e) == 0, "%s", e.msg);
}

/* Writes a three-file checkpoint for `step` with a recognizable payload. */
static void write_ckpt(const char *root, uint64_t step, const char *payload, char *dir_out)
{
	struct err e;
	struct ckpt_writer *w;
	char cfg[64];
	err_clear(&e);
	snprintf(cfg, sizeof cfg, "[train]\nstep = %" PRIu64 "\n", step);
	ck_assert_msg(ckpt_begin(root, step, &w, &e) == 0, "%s", e.msg);
	ck_assert_msg(ckpt_add(w, "config.ini", cfg, strlen(cfg), &e) == 0, "%s", e.msg);
	ck_assert_msg(ckpt_add(w, "params.bin", payload, strlen(payload), &e) == 0, "%s", e.msg);
	/* in pieces, one of them empty: the file and its digest are those of "abc" */
	struct fsx_part abc[3] = {{"a", 1}, {"", 0}, {"bc", 2}};
	ck_assert_msg(ckpt_add_parts(w, "abc.txt", abc, 3, &e) == 0, "%s", e.msg);
	ck_assert_msg(ckpt_commit(w, dir_out, FSX_PATH_MAX, &e) == 0, "%s", e.msg);
}

static void expect_problem(const char *dir, enum ckpt_problem want, const char *needle)
{
	struct err e;
	struct ckpt_report r;
	err_clear(&e);
	ck_assert_int_eq(ckpt_verify(dir, &r, &e), ERR_DATA);
	ck_assert_msg(r.problem == want, "problem %s, expected %s (%s)", ckpt_problem_name(r.problem),
		      ckpt_problem_name(want), e.msg);
	ck_assert_msg(strstr(e.msg, needle) != NULL, "expected '%s' in: %s", needle, e.msg);
	ck_assert_msg(strstr(e.msg, dir) != NULL, "message does not name %s: %s", dir, e.msg);
	ckpt_report_free(&r);
}

START_TEST(test_digest)
{
	struct err e;
	char hex[DIGEST_HEX_SIZE];
	err_clear(&e);
	/* FIPS 180-2 test vectors */
	ck_assert_int_eq(digest_sha256("abc", 3, hex, &e), 0);
	ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	ck_assert_int_eq(digest_sha256("", 0, hex, &e), 0);
	ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");

	/* streaming = one shot */
	struct digest *d;
	const char *msg = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	ck_assert_int_eq(digest_init(&d, &e), 0);
	for (size_t i = 0, n = strlen(msg); i < n; i += 5)
		ck_assert_int_eq(digest_update(d, msg + i, n - i < 5 ? n - i : 5, &e), 0);
	ck_assert_int_eq(digest_final(d, hex, &e), 0);
	ck_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	ck_assert(digest_is_hex(hex));
	ck_assert(!digest_is_hex("ABC"));

	char *t = tmpdir_make("test-ckpt"), p[FSX_PATH_MAX];
	uint64_t size;
	path2(p, t, "f");
	ck_assert_int_eq(fsx_write_atomic(p, msg, strlen(msg), &e), 0);
	ck_assert_int_eq(digest_file(p, hex, &size, &e), 0);
	ck_assert_uint_eq(size, strlen(msg));
	ck_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	path2(p, t, "absent");
	ck_assert_int_eq(digest_file(p, hex, &size, &e), ERR_IO);
	ck_assert_ptr_nonnull(strstr(e.msg, p));
	tmpdir_drop(t);
}
END_TEST

START_TEST(test_write_verify_read)
{
	struct err e;
	struct ckpt_report r;
	char *t = tmpdir_make("test-ckpt"), root[FSX_PATH_MAX], dir[FSX_PATH_MAX], p[FSX_PATH_MAX];
	char *buf;
	size_t len;
	err_clear(&e);

	path2(root, t, "artifacts/checkpoints"); /* created by ckpt_begin */
	write_ckpt(root, 50, "parameters-50", dir);
	path2(p, root, "step-0050");
	ck_assert_str_eq(dir, p);

	ck_assert_msg(ckpt_verify(dir, &r, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(r.problem, CKPT_OK);
	ck_assert_uint_eq(r.step, 50);
	ck_assert_uint_eq(r.nfiles, 3);
	ck_assert_str_eq(r.files[0].name, "config.ini");
	ck_assert_str_eq(r.files[1].name, "params.bin");
	ck_assert_uint_eq(r.files[1].size, 13);
	ck_assert_str_eq(r.files[2].name, "abc.txt");
	ck_assert_str_eq(r.files[2].sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	ck_assert_uint_eq(r.nextra, 0);
	ck_assert_str_eq(r.warning, "");
	ckpt_report_free(&r);

	/* the manifest as an outside reader sees it */
	json_error_t jerr;
	path2(p, dir, "MANIFEST.json");
	json_t *m = json_load_file(p, 0, &jerr);
	ck_assert_ptr_nonnull(m);
	ck_assert_str_eq(json_string_value(json_object_get(m, "format")), "ddptok-checkpoint-1");
	ck_assert_int_eq(json_integer_value(json_object_get(m, "step")), 50);
	json_t *files = json_object_get(m, "files");
	ck_assert_uint_eq(json_array_size(files), 3);
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(files, 2), "size")), 3);
	json_decref(m);

	ck_assert_int_eq(ckpt_read(dir, "params.bin", &buf, &len, &e), 0);
	ck_assert_uint_eq(len, 13);
	ck_assert_str_eq(buf, "parameters-50");
	free(buf);
	ck_assert_int_eq(ckpt_read(dir, "config.ini", &buf, &len, &e), 0);
	ck_assert_str_eq(buf, "[train]\nstep = 50\n");
	free(buf);
	ck_assert_int_eq(ckpt_read(dir, "nothere.bin", &buf, &len, &e), ERR_DATA);
	ck_assert_ptr_null(buf);
	ck_assert_ptr_nonnull(strstr(e.msg, "nothere.bin"));
	err_clear(&e);

	/* nothing but the checkpoint in root */
	struct ckpt_listing l;
	ck_assert_int_eq(ckpt_list(root, &l, &e), 0);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_int_eq(l.v[0].kind, CKPT_STEP);
	ck_assert_uint_eq(l.v[0].step, 50);
	ck_assert_str_eq(l.v[0].name, "step-0050");
	ckpt_listing_free(&l);

	/* an extra file is allowed, reported as a warning */
	path2(p, dir, "notes.txt");
	ck_assert_int_eq(fsx_write_atomic(p, "hi", 2, &e), 0);
	ck_assert_int_eq(ckpt_verify(dir, &r, &e), 0);
	ck_assert_uint_eq(r.nextra, 1);
	ck_assert_str_eq(r.extra[0], "notes.txt");
	ck_assert_ptr_nonnull(strstr(r.warning, "notes.txt"));
	ckpt_report_free(&r);
	ck_assert_int_eq(ckpt_verify(dir, NULL, &e), 0);

	/* step numbers beyond four digits */
	write_ckpt(root, 123456, "big", dir);
	path2(p, root, "step-123456");
	ck_assert_str_eq(dir, p);
	ck_assert_int_eq(ckpt_verify(dir, NULL, &e), 0);
	uint64_t step;
	ck_assert_int_eq(ckpt_latest_valid(root, p, sizeof p, &step, NULL, &e), 0);
	ck_assert_uint_eq(step, 123456);
	ck_assert_str_eq(p, dir);

	/* name parsing: canonical only */
	ck_assert(ckpt_parse_step_name("step-0000", &step) && step == 0);
	ck_assert(ckpt_parse_step_name("step-10000", &step) && step == 10000);
	ck_assert(!ckpt_parse_step_name("step-050", &step));
	ck_assert(!ckpt_parse_step_name("step-00050", &step));
	ck_assert(!ckpt_parse_step_name("step-0050x", &step));
	ck_assert(!ckpt_parse_step_name("step-", &step));
	tmpdir_drop(t);
}
END_TEST

START_TEST(test_bad_names)
{
	struct err e;
	struct ckpt_writer *w;
	char *t = tmpdir_make("test-ckpt"), root[FSX_PATH_MAX];
	static const char *const bad[] = { "", "a/b", "../x", ".hidden", "MANIFEST.json", "sp ace",
					   "x\n" };
	path2(root, t, "ck");
	err_clear(&e);
	ck_assert_int_eq(ckpt_begin(root, 3, &w, &e), 0);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err_clear(&e);
		ck_assert_msg(ckpt_add(w, bad[i], "x", 1, &e) == ERR_DATA, "accepted '%s'", bad[i]);
	}
	err_clear(&e);
	ck_assert_int_eq(ckpt_add(w, "ok.bin", "x", 1, &e), 0);
	ck_assert_int_eq(ckpt_add(w, "ok.bin", "y", 1, &e), ERR_DATA);
	ck_assert_ptr_nonnull(strstr(e.msg, "twice"));
	ckpt_abort(w);
	/* abort removed the temporary: root is empty */
	char **names;
	size_t n;
	ck_assert_int_eq(fsx_list_dir(root, &names, &n, &e), 0);
	ck_assert_uint_eq(n, 0);
	fsx_free_names(names, n);

	/* unwritable root: ERR_IO naming it */
	char p[FSX_PATH_MAX];
	path2(p, t, "file");
	ck_assert_int_eq(fsx_write_atomic(p, "x", 1, &e), 0);
	path2(root, p, "checkpoints");
	err_clear(&e);
	ck_assert_int_eq(ckpt_begin(root, 1, &w, &e), ERR_IO);
	ck_assert_ptr_null(w);
	ck_assert_ptr_nonnull(strstr(e.msg, root));
	tmpdir_drop(t);
}
END_TEST

static void flip_byte(const char *path, long at)
{
	FILE *f = fopen(path, "r+b");
	ck_assert_ptr_nonnull(f);
	fseek(f, at, SEEK_SET);
	int c = fgetc(f);
	fseek(f, at, SEEK_SET);
	fputc(c ^ 0x01, f);
	fclose(f);
}

START_TEST(test_damage)
{
	struct err e;
	char *t = tmpdir_make("test-ckpt"), root[FSX_PATH_MAX], dir[FSX_PATH_MAX], p[FSX_PATH_MAX];
	char *buf;
	size_t len;
	path2(root, t, "checkpoints");
	err_clear(&e);

	/* flipped byte: right size, wrong digest */
	write_ckpt(root, 1, "0123456789", dir);
	path2(p, dir, "params.bin");
	flip_byte(p, 4);
	expect_problem(dir, CKPT_DIGEST_MISMATCH, "digest mismatch for params.bin");
	ck_assert_int_eq(ckpt_read(dir, "params.bin", &buf, &len, &e), ERR_DATA);
	ck_assert_ptr_nonnull(strstr(e.msg, "digest mismatch"));
	err_clear(&e);
	ck_assert_int_eq(ckpt_read(dir, "abc.txt", &buf, &len, &e), 0); /* other files still readable */
	free(buf);

	/* truncated */
	write_ckpt(root, 2, "0123456789", dir);
	path2(p, dir, "params.bin");
	ck_assert_int_eq(truncate(p, 6), 0);
	expect_problem(dir, CKPT_SIZE_MISMATCH, "size mismatch for params.bin (truncated)");
	ck_assert_int_eq(ckpt_read(dir, "params.bin", &buf, &len, &e), ERR_DATA);
	ck_assert_ptr_nonnull(strstr(e.msg, "size mismatch"));
	err_clear(&e);

	/* grown */
	write_ckpt(root, 3, "0123456789", dir);
	path2(p, dir, "config.ini");
	FILE *f = fopen(p, "ab");
	fputs("x", f);
	fclose(f);
	expect_problem(dir, CKPT_SIZE_MISMATCH, "size mismatch for config.ini (grown)");

	/* no manifest */
	write_ckpt(root, 4, "0123456789", dir);
	path2(p, dir, "MANIFEST.json");
	ck_assert_int_eq(unlink(p), 0);
	expect_problem(dir, CKPT_NO_MANIFEST, "has no MANIFEST.json: incomplete checkpoint, not used");
	ck_assert_int_eq(ckpt_read(dir, "abc.txt", &buf, &len, &e), ERR_DATA);
	err_clear(&e);

	/* missing file */
	write_ckpt(root, 5, "0123456789", dir);
	path2(p, dir, "abc.txt");
	ck_assert_int_eq(unlink(p), 0);
	expect_problem(dir, CKPT_MISSING_FILE, "missing file abc.txt");

	/* unparsable manifests, each with its reason */
#define ENTRY(name) "{\"name\": \"" name "\", \"size\": 3, \"sha256\": \"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\"}"
	static const char *const broken[][2] = {
		{ "{\"format\": \"ddptok-checkpoint-1\", \"step\": 6, \"files\": [",
		  "invalid JSON at line 1" },
		{ "{\"format\": \"other\", \"step\": 6, \"files\": []}",
		  "\"format\" is not \"ddptok-checkpoint-1\"" },
		{ "{\"format\": \"ddptok-checkpoint-1\", \"step\": -6, \"files\": []}",
		  "\"step\" is not a non-negative integer" },
		{ "{\"format\": \"ddptok-checkpoint-1\", \"step\": 6, \"files\": {}}",
		  "\"files\" is not an array" },
		{ "{\"format\": \"ddptok-checkpoint-1\", \"step\": 6, \"files\": [" ENTRY("../../x") "]}",
		  "entry 0: invalid file name '../../x'" },
		{ "{\"format\": \"ddptok-checkpoint-1\", \"step\": 6, \"files\": [{\"name\": \"abc.txt\", "
		  "\"size\": 3, \"sha256\": \"BA7816\"}]}",
		  "file 'abc.txt': \"sha256\" is not 64 lowercase hex digits" },
		{ "{\"format\": \"ddptok-checkpoint-1\", \"step\": 6, \"files\": [" ENTRY("abc.txt") ", "
		  ENTRY("abc.txt") "]}",
		  "file 'abc.txt' listed twice" },
		{ "{\"format\": \"ddptok-checkpoint-1\", \"step\": 6, \"files\": [" ENTRY("abc.txt") ", "
		  "{\"name\": \"x\", \"size\": -1, \"sha256\": \"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\"}]}",
		  "entry 1 lacks a string \"name\", an integer \"size\" or a string \"sha256\"" },
		{ "[]", "\"format\" is not" },
		{ "", "invalid JSON" },
	};
#undef ENTRY
	for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
		char want[200];
		write_ckpt(root, 6, "0123456789", dir);
		path2(p, dir, "MANIFEST.json");
		ck_assert_int_eq(fsx_write_atomic(p, broken[i][0], strlen(broken[i][0]), &e), 0);
		snprintf(want, sizeof want, "unparsable manifest MANIFEST.json: %s", broken[i][1]);
		expect_problem(dir, CKPT_BAD_MANIFEST, want);
	}

	/* a directory renamed to another step is refused */
	write_ckpt(root, 7, "0123456789", dir);
	path2(p, root, "step-0008");
	ck_assert_int_eq(rename(dir, p), 0);
	expect_problem(p, CKPT_STEP_MISMATCH, "step 7");
	path2(dir, root, "step-0009");
	expect_problem(dir, CKPT_NO_DIR, "does not exist");

	/* the newest valid one is used, damaged newer ones are skipped and counted */
	write_ckpt(root, 10, "ten", dir);
	write_ckpt(root, 11, "eleven", dir);
	path2(p, dir, "abc.txt");
	flip_byte(p, 0);
	uint64_t step = 0;
	int skipped = -1;
	ck_assert_msg(ckpt_latest_valid(root, p, sizeof p, &step, &skipped, &e) == 0, "%s", e.msg);
	ck_assert_uint_eq(step, 10);
	ck_assert_int_eq(skipped, 1);
	ck_assert_int_eq(ckpt_read(p, "params.bin", &buf, &len, &e), 0);
	ck_assert_str_eq(buf, "ten");
	free(buf);
	tmpdir_drop(t);

	/* nothing valid at all */
	t = tmpdir_make("test-ckpt");
	path2(root, t, "checkpoints");
	ck_assert_int_eq(ckpt_latest_valid(root, p, sizeof p, &step, &skipped, &e), ERR_DATA);
	ck_assert_ptr_nonnull(strstr(e.msg, root));
	err_clear(&e);
	write_ckpt(root, 12, "twelve", dir);
	path2(p, dir, "MANIFEST.json");
	unlink(p);
	ck_assert_int_eq(ckpt_latest_valid(root, p, sizeof p, &step, &skipped, &e), ERR_DATA);
	ck_assert_int_eq(skipped, 1);
	ck_assert_ptr_nonnull(strstr(e.msg, "no MANIFEST.json"));
	tmpdir_drop(t);
}
END_TEST

START_TEST(test_partial_never_used)
{
	struct err e;
	char *t = tmpdir_make("test-ckpt"), root[FSX_PATH_MAX], dir[FSX_PATH_MAX], p[FSX_PATH_MAX];
	path2(root, t, "checkpoints");
	err_clear(&e);

	write_ckpt(root, 5, "five", dir);

	/* a writer that dies before committing step 7 */
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct ckpt_writer *w;
		struct err ce;
		err_clear(&ce);
		if (ckpt_begin(root, 7, &w, &ce) || ckpt_add(w, "params.bin", "seven", 5, &ce))
			_exit(3);
		_exit(0); /* no commit, no abort */
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	/* a crash after the manifest but before the rename: complete content, temporary name */
	char tmpname[64];
	snprintf(tmpname, sizeof tmpname, ".step-0009.tmp.%d", 999999);
	path2(p, root, tmpname);
	ck_assert_int_eq(rename(dir, p), 0);
	ck_assert_int_eq(ckpt_verify(p, NULL, &e), 0); /* its content is fine... */
	write_ckpt(root, 5, "five", dir);

	uint64_t step = 0;
	ck_assert_int_eq(ckpt_latest_valid(root, p, sizeof p, &step, NULL, &e), 0);
	ck_assert_uint_eq(step, 5); /* ...but only step-NNNN directories are ever used */
	ck_assert_str_eq(p, dir);

	struct ckpt_listing l;
	ck_assert_int_eq(ckpt_list(root, &l, &e), 0);
	ck_assert_uint_eq(l.n, 3);
	ck_assert_int_eq(l.v[0].kind, CKPT_STEP);
	ck_assert_uint_eq(l.v[0].step, 5);
	ck_assert_int_eq(l.v[1].kind, CKPT_PARTIAL);
	ck_assert_uint_eq(l.v[1].step, 7);
	ck_assert_int_eq(l.v[1].pid, pid);
	ck_assert_int_eq(l.v[2].kind, CKPT_PARTIAL);
	ck_assert_uint_eq(l.v[2].step, 9);
	ck_assert_int_eq(l.v[2].pid, 999999);
	/* the unfinished one has no manifest */
	struct ckpt_report r;
	ck_assert_int_eq(ckpt_verify(l.v[1].path, &r, &e), ERR_DATA);
	ck_assert_int_eq(r.problem, CKPT_NO_MANIFEST);
	ckpt_report_free(&r);
	ckpt_listing_free(&l);
	err_clear(&e);

	/* listing leaves them in place */
	ck_assert_int_eq(ckpt_list(root, &l, &e), 0);
	ck_assert_uint_eq(l.n, 3);
	ckpt_listing_free(&l);

	/* unrelated entries are ignored */
	path2(p, root, "README");
	ck_assert_int_eq(fsx_write_atomic(p, "x", 1, &e), 0);
	path2(p, root, "step-07");
	ck_assert_int_eq(mkdir(p, 0755), 0);
	ck_assert_int_eq(ckpt_list(root, &l, &e), 0);
	ck_assert_uint_eq(l.n, 3);
	ckpt_listing_free(&l);

	/* a missing root is an empty listing */
	path2(p, t, "nothing-here");
	ck_assert_int_eq(ckpt_list(p, &l, &e), 0);
	ck_assert_uint_eq(l.n, 0);
	ckpt_listing_free(&l);
	tmpdir_drop(t);
}
END_TEST

START_TEST(test_overwrite)
{
	struct err e;
	struct ckpt_writer *w;
	char *t = tmpdir_make("test-ckpt"), root[FSX_PATH_MAX], dir[FSX_PATH_MAX];
	char *buf;
	size_t len;
	path2(root, t, "checkpoints");
	err_clear(&e);

	write_ckpt(root, 10, "first", dir);
	write_ckpt(root, 10, "second", dir);
	ck_assert_int_eq(ckpt_verify(dir, NULL, &e), 0);
	ck_assert_int_eq(ckpt_read(dir, "params.bin", &buf, &len, &e), 0);
	ck_assert_str_eq(buf, "second");
	free(buf);

	/* an aborted rewrite leaves the committed one */
	ck_assert_int_eq(ckpt_begin(root, 10, &w, &e), 0);
	ck_assert_int_eq(ckpt_add(w, "params.bin", "third", 5, &e), 0);
	ckpt_abort(w);
	ck_assert_int_eq(ckpt_verify(dir, NULL, &e), 0);
	ck_assert_int_eq(ckpt_read(dir, "params.bin", &buf, &len, &e), 0);
	ck_assert_str_eq(buf, "second");
	free(buf);

	/* a rewrite with fewer files: no file of the old one survives */
	ck_assert_int_eq(ckpt_begin(root, 10, &w, &e), 0);
	ck_assert_int_eq(ckpt_add(w, "only.bin", "4", 1, &e), 0);
	ck_assert_int_eq(ckpt_commit(w, NULL, 0, &e), 0);
	struct ckpt_report r;
	ck_assert_int_eq(ckpt_verify(dir, &r, &e), 0);
	ck_assert_uint_eq(r.nfiles, 1);
	ck_assert_uint_eq(r.nextra, 0);
	ckpt_report_free(&r);

	/* no leftovers beside it */
	struct ckpt_listing l;
	ck_assert_int_eq(ckpt_list(root, &l, &e), 0);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_str_eq(l.v[0].name, "step-0010");
	ckpt_listing_free(&l);
	tmpdir_drop(t);
}
END_TEST

/* Rewrites step `step` of root with payload; returns what ckpt_commit_ex said. */
static void rewrite(const char *root, uint64_t step, const char *payload,
		    struct ckpt_commit_info *info)
{
	struct err e;
	struct ckpt_writer *w;
	err_clear(&e);
	ck_assert_msg(ckpt_begin(root, step, &w, &e) == 0, "%s", e.msg);
	ck_assert_msg(ckpt_add(w, "params.bin", payload, strlen(payload), &e) == 0, "%s", e.msg);
	ck_assert_msg(ckpt_add(w, "abc.txt", "abc", 3, &e) == 0, "%s", e.msg);
	ck_assert_msg(ckpt_commit_ex(w, info, &e) == 0, "%s", e.msg);
}

static void expect_payload(const char *dir, const char *want)
{
	struct err e;
	char *buf;
	size_t len;
	err_clear(&e);
	ck_assert_msg(ckpt_verify(dir, NULL, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(ckpt_read(dir, "params.bin", &buf, &len, &e), 0);
	ck_assert_str_eq(buf, want);
	free(buf);
}

/* Whether dir/name exists and holds text. */
static int holds_text(const char *dir, const char *name, const char *text)
{
	char p[FSX_PATH_MAX], *buf = NULL;
	size_t len;
	struct err e;
	err_clear(&e);
	path2(p, dir, name);
	int ok = fsx_read_all(p, &buf, &len, &e) == 0 && len == strlen(text) &&
		 !memcmp(buf, text, len);
	free(buf);
	return ok;
}

START_TEST(test_rewrite_keeps_invalid)
{
	struct err e;
	struct ckpt_commit_info info;
	char *t = tmpdir_make("test-ckpt"), root[FSX_PATH_MAX], dir[FSX_PATH_MAX], p[FSX_PATH_MAX];
	char want[FSX_PATH_MAX], name[64];
	path2(root, t, "checkpoints");
	err_clear(&e);
	ck_assert_int_eq(fsx_mkdirs(root, &e), 0);

	/* an incomplete step-0004 holding a file of the user's: kept aside, with its file */
	path2(dir, root, "step-0004");
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	path2(p, dir, "notes.txt");
	ck_assert_int_eq(fsx_write_atomic(p, "mine", 4, &e), 0);
	rewrite(root, 4, "four", &info);
	ck_assert_str_eq(info.path, dir);
	snprintf(name, sizeof name, "step-0004.kept.%ld", (long)getpid());
	path2(want, root, name);
	ck_assert_str_eq(info.kept, want);
	ck_assert_msg(strstr(info.kept_why, "no MANIFEST.json"), "why: %s", info.kept_why);
	ck_assert(holds_text(info.kept, "notes.txt", "mine"));
	expect_payload(dir, "four");

	struct ckpt_listing l;
	ck_assert_int_eq(ckpt_list(root, &l, &e), 0);
	ck_assert_uint_eq(l.n, 2);
	ck_assert_int_eq(l.v[0].kind, CKPT_STEP);
	ck_assert_int_eq(l.v[1].kind, CKPT_KEPT);
	ck_assert_uint_eq(l.v[1].step, 4);
	ck_assert_int_eq(l.v[1].pid, getpid());
	ck_assert_str_eq(l.v[1].name, name);
	ckpt_listing_free(&l);

	/* a valid one of ours is replaced, not kept */
	rewrite(root, 4, "four again", &info);
	ck_assert_str_eq(info.kept, "");
	ck_assert_str_eq(info.leftover, "");
	expect_payload(dir, "four again");

	/* again in the way, while the first kept name is taken: a second name */
	ck_assert_int_eq(fsx_remove_tree(dir, &e), 0);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	rewrite(root, 4, "four, third", &info);
	snprintf(name, sizeof name, "step-0004.kept.%ld.1", (long)getpid());
	path2(want, root, name);
	ck_assert_str_eq(info.kept, want);
	ck_assert_int_eq(ckpt_list(root, &l, &e), 0);
	ck_assert_uint_eq(l.n, 3);
	ck_assert_int_eq(l.v[2].kind, CKPT_KEPT);
	ck_assert_str_eq(l.v[2].name, name);
	ckpt_listing_free(&l);

	/* a valid checkpoint with a file its manifest does not list: kept, file and all */
	write_ckpt(root, 5, "five", dir);
	path2(p, dir, "mine.txt");
	ck_assert_int_eq(fsx_write_atomic(p, "keep me", 7, &e), 0);
	rewrite(root, 5, "five again", &info);
	ck_assert_msg(strstr(info.kept_why, "mine.txt"), "why: %s", info.kept_why);
	ck_assert(holds_text(info.kept, "mine.txt", "keep me"));
	expect_payload(dir, "five again");

	/* a damaged one: kept, as found */
	write_ckpt(root, 6, "six", dir);
	path2(p, dir, "params.bin");
	flip_byte(p, 1);
	rewrite(root, 6, "six again", &info);
	ck_assert_msg(strstr(info.kept_why, "digest mismatch"), "why: %s", info.kept_why);
	ck_assert_int_eq(ckpt_verify(info.kept, NULL, &e), ERR_DATA);
	expect_payload(dir, "six again");

	/* not even a directory */
	path2(p, root, "step-0007");
	ck_assert_int_eq(fsx_write_atomic(p, "a file", 6, &e), 0);
	rewrite(root, 7, "seven", &info);
	ck_assert_msg(strstr(info.kept_why, "not a directory"), "why: %s", info.kept_why);
	ck_assert_int_eq(fsx_is_dir(info.kept), 0);
	expect_payload(p, "seven");
	tmpdir_drop(t);
}
END_TEST

START_TEST(test_replaced_copy_named_old)
{
	struct err e;
	struct ckpt_commit_info info;
	struct ckpt_listing l;
	char *t = tmpdir_make("test-ckpt"), root[FSX_PATH_MAX], dir[FSX_PATH_MAX], name[64];
	path2(root, t, "checkpoints");
	err_clear(&e);

	/* the replaced copy cannot be removed (as when the process dies right after the
	 * swap): what stays is named an old copy, never a partial write */
	write_ckpt(root, 10, "first", dir);
	fail_unlink_name = "abc.txt";
	rewrite(root, 10, "second", &info);
	fail_unlink_name = NULL;
	expect_payload(dir, "second");
	snprintf(name, sizeof name, ".step-0010.old.%ld", (long)getpid());
	ck_assert_msg(strstr(info.leftover, name), "leftover: '%s'", info.leftover);
	ck_assert_int_eq(ckpt_list(root, &l, &e), 0);
	ck_assert_uint_eq(l.n, 2);
	ck_assert_int_eq(l.v[0].kind, CKPT_STEP);
	ck_assert_int_eq(l.v[1].kind, CKPT_TRASH);
	ck_assert_str_eq(l.v[1].name, name);
	ck_assert(holds_text(l.v[1].path, "abc.txt", "abc")); /* what the removal left */
	ckpt_listing_free(&l);

	/* the next rewrite by this process reuses (and clears) that name */
	rewrite(root, 10, "third", &info);
	ck_assert_str_eq(info.leftover, "");
	ck_assert_int_eq(ckpt_list(root, &l, &e), 0);
	ck_assert_uint_eq(l.n, 1);
	ckpt_listing_free(&l);
	expect_payload(dir, "third");
	tmpdir_drop(t);
}
END_TEST

START_TEST(test_root_given)
{
	struct err e;
	struct ckpt_report r;
	char *t = tmpdir_make("test-ckpt"), root[FSX_PATH_MAX], dir[FSX_PATH_MAX], p[FSX_PATH_MAX];
	path2(root, t, "checkpoints");
	err_clear(&e);

	/* only a leftover in it */
	path2(p, root, ".step-0002.tmp.999999999");
	ck_assert_int_eq(fsx_mkdirs(p, &e), 0);
	ck_assert_int_eq(ckpt_verify(root, &r, &e), ERR_DATA);
	ck_assert_int_eq(r.problem, CKPT_IS_ROOT);
	ck_assert_msg(strstr(e.msg, "directory of checkpoints") && strstr(e.msg, "no published"),
		      "%s", e.msg);
	ckpt_report_free(&r);

	/* valid ones: the newest valid is named */
	char five[FSX_PATH_MAX];
	write_ckpt(root, 3, "three", dir);
	write_ckpt(root, 5, "five", five);
	path2(p, five, "params.bin");
	flip_byte(p, 0);
	err_clear(&e);
	ck_assert_int_eq(ckpt_verify(root, &r, &e), ERR_DATA);
	ck_assert_int_eq(r.problem, CKPT_IS_ROOT);
	ck_assert_msg(strstr(e.msg, "is a directory of checkpoints, not a checkpoint") &&
		      strstr(e.msg, dir) && strstr(e.msg, "step 3"), "%s", e.msg);
	ck_assert_ptr_null(strstr(e.msg, "incomplete checkpoint"));
	ckpt_report_free(&r);
	char *buf;
	size_t len;
	ck_assert_int_eq(ckpt_read(root, "params.bin", &buf, &len, &e), ERR_DATA);
	ck_assert_ptr_nonnull(strstr(e.msg, "directory of checkpoints"));

	/* none valid */
	path2(p, dir, "params.bin");
	flip_byte(p, 0);
	err_clear(&e);
	ck_assert_int_eq(ckpt_verify(root, &r, &e), ERR_DATA);
	ck_assert_int_eq(r.problem, CKPT_IS_ROOT);
	ck_assert_msg(strstr(e.msg, "none of the 2 in it is valid"), "%s", e.msg);
	ckpt_report_free(&r);

	/* an empty directory stays an incomplete checkpoint */
	path2(p, t, "empty");
	ck_assert_int_eq(mkdir(p, 0755), 0);
	expect_problem(p, CKPT_NO_MANIFEST, "has no MANIFEST.json: incomplete checkpoint, not used");
	tmpdir_drop(t);
}
END_TEST

/* --- crash test --- */

#define KILL_TRIALS 30
#define KILL_STEPS 4
#define KILL_EXTRA 7 /* extra trials when none of the first got a commit through */
static const char *const kill_names[3] = { "meta", "params.bin", "state.bin" };

/* File k of the checkpoint written for (step, generation): recomputable by the checker. */
static size_t kill_content(uint64_t step, uint32_t gen, int k, unsigned char *buf, size_t cap)
{
	if (k == 0)
		return (size_t)snprintf((char *)buf, cap, "step=%" PRIu64 " gen=%u\n", step, gen);
	size_t n = k == 1 ? 20000 + (step * 131 + gen * 17) % 30000 : 100 + gen % 50;
	struct prng r;
	prng_seed(&r, step * 1000003u + gen, (uint64_t)k);
	for (size_t i = 0; i < n && i < cap; i++)
		buf[i] = (unsigned char)(prng_next(&r) >> 56);
	return n;
}

static void kill_writer(const char *root)
{
	static unsigned char buf[64 * 1024];
	struct err e;
	for (uint32_t gen = 0;; gen++) {
		uint64_t step = 1 + gen % KILL_STEPS;
		struct ckpt_writer *w;
		err_clear(&e);
		if (ckpt_begin(root, step, &w, &e))
			_exit(3);
		for (int k = 0; k < 3; k++) {
			size_t n = kill_content(step, gen, k, buf, sizeof buf);
			if (ckpt_add(w, kill_names[k], buf, n, &e))
				_exit(4);
		}
		if (ckpt_commit(w, NULL, 0, &e))
			_exit(5);
	}
}

/* Every published step directory must verify and hold exactly one generation's content. */
static int check_published(const char *root, int *valid_before, int *partials)
{
	static unsigned char want[64 * 1024];
	struct err e;
	struct ckpt_listing l;
	int accepted = 0;
	err_clear(&e);
	ck_assert_msg(ckpt_list(root, &l, &e) == 0, "%s", e.msg);
	for (size_t i = 0; i < l.n; i++) {
		struct ckpt_entry *en = &l.v[i];
		if (en->kind != CKPT_STEP) {
			(*partials)++;
			continue;
		}
		struct ckpt_report r;
		err_clear(&e);
		ck_assert_msg(ckpt_verify(en->path, &r, &e) == 0, "published but invalid: %s", e.msg);
		ck_assert_uint_eq(r.nfiles, 3);
		ck_assert_uint_eq(r.nextra, 0);
		ckpt_report_free(&r);

		char *meta;
		size_t len;
		uint64_t step;
		unsigned gen;
		ck_assert_int_eq(ckpt_read(en->path, "meta", &meta, &len, &e), 0);
		ck_assert_int_eq(sscanf(meta, "step=%" SCNu64 " gen=%u", &step, &gen), 2);
		free(meta);
		ck_assert_uint_eq(step, en->step);
		for (int k = 0; k < 3; k++) {
			char *got;
			size_t n = kill_content(step, gen, k, want, sizeof want);
			ck_assert_int_eq(ckpt_read(en->path, kill_names[k], &got, &len, &e), 0);
			ck_assert_uint_eq(len, n);
			ck_assert_msg(memcmp(got, want, n) == 0, "step %" PRIu64 " gen %u: %s differs",
				      step, gen, kill_names[k]);
			free(got);
		}
		valid_before[step] = 1;
		accepted++;
	}
	/* a step that was valid once stays valid (rewrites swap, never remove first) */
	for (int s = 1; s <= KILL_STEPS; s++) {
		if (!valid_before[s])
			continue;
		char name[32], p[FSX_PATH_MAX];
		ckpt_step_name((uint64_t)s, name, sizeof name);
		path2(p, root, name);
		ck_assert_msg(fsx_is_dir(p), "%s disappeared", name);
	}
	ckpt_listing_free(&l);
	return accepted;
}

START_TEST(test_sigkill_never_invalid)
{
	char *t = tmpdir_make("test-ckpt"), root[FSX_PATH_MAX];
	int valid_before[KILL_STEPS + 1] = { 0 };
	int accepted = 0, partials = 0;
	struct prng r;
	path2(root, t, "checkpoints");
	prng_seed(&r, 20240601, 7);

	/* The kill lands 0..40 ms in: from before the first file to several commits in. On a
	 * loaded machine (or under a sanitizer) no commit may get through that soon, and then
	 * the check below would have nothing to check: extra trials wait twice as long each
	 * time, until one checkpoint was accepted (at most 40 ms << KILL_EXTRA). */
	for (int trial = 0; trial < KILL_TRIALS || (!accepted && trial < KILL_TRIALS + KILL_EXTRA);
	     trial++) {
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0)
			kill_writer(root);
		long max_us = trial < KILL_TRIALS ? 40000L : 40000L << (trial - KILL_TRIALS + 1);
		long wait_us = (long)prng_below(&r, (uint32_t)max_us);
		if (trial >= KILL_TRIALS)
			wait_us = max_us / 2 + wait_us / 2;
		struct timespec ts = { wait_us / 1000000L, (wait_us % 1000000L) * 1000L };
		nanosleep(&ts, NULL);
		ck_assert_int_eq(kill(pid, SIGKILL), 0);
		int status;
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
			      "writer stopped by itself (status 0x%x)", status);
		accepted += check_published(root, valid_before, &partials);
	}
	fprintf(stderr, "test-ckpt: %d trials, %d accepted checkpoint checks, %d partial entries seen\n",
		KILL_TRIALS, accepted, partials);
	ck_assert_int_gt(accepted, 0); /* the writer did get checkpoints through */
	tmpdir_drop(t);
}
END_TEST

/* What a scan of params.bin saw: its first bytes, pulled by the scan, and its entry. */
struct seen {
	char head[8];
	size_t got;
	struct ckpt_file file;
	int files;
};

static int wants_params(void *arg, const char *name)
{
	return !strcmp(name, "params.bin");
}

static int read_head(void *arg, const struct ckpt_file *f, struct ckpt_stream *s, struct err *e)
{
	struct seen *sn = arg;
	sn->files++;
	sn->file = *f;
	return ckpt_stream_read(s, sn->head, 5, &sn->got, e);
}

/* A scan sees a file's bytes as the store digests it (the rest digested after it), and the
 * file it saw reads again without a digest, unless it was replaced or written since. */
START_TEST(test_scan_and_reread)
{
	struct err e;
	struct seen sn = {0};
	struct ckpt_scan scan = {wants_params, read_head, &sn};
	struct ckpt_reread rr;
	char *t = tmpdir_make("test-ckpt"), root[FSX_PATH_MAX], dir[FSX_PATH_MAX], p[FSX_PATH_MAX];
	char buf[16] = {0};
	err_clear(&e);
	path2(root, t, "checkpoints");
	write_ckpt(root, 7, "parameters-7", dir);
	ck_assert_msg(ckpt_verify_scan(dir, NULL, &scan, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(sn.files, 1);
	ck_assert_uint_eq(sn.got, 5);
	ck_assert(memcmp(sn.head, "param", 5) == 0);
	ck_assert_uint_eq(sn.file.size, 12);
	ck_assert_msg(ckpt_reopen(dir, &sn.file, &rr, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(ckpt_reread_at(&rr, buf, 7, 5, &e), ERR_OK);
	ck_assert_str_eq(buf, "eters-7");
	ck_assert_int_eq(ckpt_reread_at(&rr, buf, 8, 5, &e), ERR_DATA); /* past its end */
	err_clear(&e);
	ck_assert_int_eq(ckpt_reread_end(&rr, &e), ERR_OK);

	/* a damaged file fails the scan's verification as it fails ckpt_verify's */
	path2(p, dir, "params.bin");
	ck_assert_int_eq(fsx_write_atomic(p, "parameterz-7", 12, &e), ERR_OK);
	ck_assert_int_eq(ckpt_verify_scan(dir, NULL, &scan, &e), ERR_DATA);
	ck_assert_ptr_nonnull(strstr(e.msg, "digest mismatch for params.bin"));
	err_clear(&e);
	/* the file verified, replaced by another of the same size and content (a rewritten
	 * step): not the file verified */
	ck_assert_int_eq(fsx_write_atomic(p, "parameters-7", 12, &e), ERR_OK);
	ck_assert_int_eq(ckpt_reopen(dir, &sn.file, &rr, &e), ERR_DATA);
	ck_assert_msg(strstr(e.msg, "params.bin changed after it was verified") &&
		      strstr(e.msg, dir), "%s", e.msg);
	err_clear(&e);
	/* verified again, then written in place while it is read */
	ck_assert_int_eq(ckpt_verify_scan(dir, NULL, &scan, &e), ERR_OK);
	ck_assert_int_eq(ckpt_reopen(dir, &sn.file, &rr, &e), ERR_OK);
	struct timespec pause = {0, 20 * 1000 * 1000}; /* past the change time's granularity */
	nanosleep(&pause, NULL);
	FILE *f = fopen(p, "r+");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fputc('P', f), 'P');
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(ckpt_reread_end(&rr, &e), ERR_DATA);
	ck_assert_ptr_nonnull(strstr(e.msg, "params.bin changed after it was verified"));
	tmpdir_drop(t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ckpt");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_digest);
	tcase_add_test(tc, test_write_verify_read);
	tcase_add_test(tc, test_bad_names);
	tcase_add_test(tc, test_damage);
	tcase_add_test(tc, test_partial_never_used);
	tcase_add_test(tc, test_overwrite);
	tcase_add_test(tc, test_rewrite_keeps_invalid);
	tcase_add_test(tc, test_replaced_copy_named_old);
	tcase_add_test(tc, test_root_given);
	tcase_add_test(tc, test_sigkill_never_invalid);
	tcase_add_test(tc, test_scan_and_reread);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
