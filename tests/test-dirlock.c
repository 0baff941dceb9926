/*
 * test-dirlock: one writer per directory. A second holder is refused at once, naming the
 * first one's pid, host and command; the lock dies with its process (even killed, its file
 * then taken over); one directory reached under two names is locked once; a released
 * lock's file is removed and the lock can be taken again; the directories made to hold a
 * lock are removed with it when nothing was written into them.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check-run.h"
#include "dirlock.h"
#include "fsx.h"
#include "tmpdir.h"

START_TEST(a_second_holder_is_refused_naming_the_first)
{
	char *dir = tmpdir_make("test-dirlock");
	struct dirlock a, b;
	struct err e;
	err_clear(&e);
	dirlock_init(&a);
	dirlock_init(&b);
	ck_assert_msg(dirlock_take(&a, dir, "[run] outputs", "train --continuous", &e) == ERR_OK,
		      "%s", e.msg);
	/* the lock file names the holder */
	char path[FSX_PATH_MAX], *text;
	size_t len;
	snprintf(path, sizeof path, "%s/%s", dir, DIRLOCK_NAME);
	ck_assert_int_eq(fsx_read_all(path, &text, &len, &e), ERR_OK);
	char want[128];
	snprintf(want, sizeof want, "pid %ld on ", (long)getpid());
	ck_assert_msg(strncmp(text, want, strlen(want)) == 0, "lock file: %s", text);
	ck_assert_msg(strstr(text, ": train --continuous\n"), "lock file: %s", text);
	free(text);
	/* another holder (another open file description, as another process has) */
	ck_assert_int_eq(dirlock_take(&b, dir, "[run] artifacts", "train", &e), ERR_IO);
	ck_assert_msg(strstr(e.msg, "is being written by another ddptok-run") &&
		      strstr(e.msg, "[run] artifacts") && strstr(e.msg, want) &&
		      strstr(e.msg, "train --continuous"), "message: %s", e.msg);
	ck_assert_int_eq(b.n, 0);
	/* released: the file is gone, and the next one gets the lock */
	dirlock_release(&a);
	ck_assert(!fsx_exists(path));
	err_clear(&e);
	ck_assert_msg(dirlock_take(&b, dir, "[run] artifacts", "clean", &e) == ERR_OK, "%s", e.msg);
	dirlock_release(&b);
	tmpdir_drop(dir);
}
END_TEST

START_TEST(one_directory_under_two_names_is_locked_once)
{
	char *dir = tmpdir_make("test-dirlock");
	char other[FSX_PATH_MAX], link[FSX_PATH_MAX];
	struct dirlock a;
	struct err e;
	err_clear(&e);
	dirlock_init(&a);
	snprintf(other, sizeof other, "%s/.", dir);
	snprintf(link, sizeof link, "%s-link", dir);
	ck_assert_int_eq(symlink(dir, link), 0);
	ck_assert_int_eq(dirlock_take(&a, dir, "[run] outputs", "train", &e), ERR_OK);
	ck_assert_msg(dirlock_take(&a, other, "[run] artifacts", "train", &e) == ERR_OK, "%s", e.msg);
	ck_assert_msg(dirlock_take(&a, link, "[run] artifacts", "train", &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(a.n, 1);
	dirlock_release(&a);
	unlink(link);
	tmpdir_drop(dir);
}
END_TEST

/* A child takes the lock, says so through a pipe, then waits to be killed. */
static pid_t child_holding(const char *dir, int *ready)
{
	int fds[2];
	ck_assert_int_eq(pipe(fds), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct dirlock l;
		struct err e;
		err_clear(&e);
		dirlock_init(&l);
		char c = dirlock_take(&l, dir, "[run] outputs", "evaluate --checkpoint x", &e) == ERR_OK
				 ? 'y' : 'n';
		if (write(fds[1], &c, 1) != 1)
			_exit(2);
		for (;;)
			pause();
	}
	close(fds[1]);
	char c = 0;
	ck_assert_int_eq(read(fds[0], &c, 1), 1);
	close(fds[0]);
	*ready = c == 'y';
	return pid;
}

START_TEST(the_lock_dies_with_its_process)
{
	char *dir = tmpdir_make("test-dirlock");
	int ready;
	pid_t pid = child_holding(dir, &ready);
	ck_assert(ready);
	struct dirlock l;
	struct err e;
	err_clear(&e);
	dirlock_init(&l);
	ck_assert_int_eq(dirlock_take(&l, dir, "[run] outputs", "train", &e), ERR_IO);
	char want[64];
	snprintf(want, sizeof want, "pid %ld on ", (long)pid);
	ck_assert_msg(strstr(e.msg, want) && strstr(e.msg, "evaluate --checkpoint x"), "message: %s",
		      e.msg);
	/* killed without a chance to clean up: the kernel releases the lock */
	kill(pid, SIGKILL);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	err_clear(&e);
	ck_assert_msg(dirlock_take(&l, dir, "[run] outputs", "train", &e) == ERR_OK, "%s", e.msg);
	dirlock_release(&l);
	tmpdir_drop(dir);
}
END_TEST

START_TEST(a_directory_that_cannot_be_made_is_an_error_naming_it)
{
	char *dir = tmpdir_make("test-dirlock"), blocker[FSX_PATH_MAX], inside[FSX_PATH_MAX + 8];
	struct dirlock l;
	struct err e;
	err_clear(&e);
	dirlock_init(&l);
	snprintf(blocker, sizeof blocker, "%s/blocker", dir);
	snprintf(inside, sizeof inside, "%s/out", blocker);
	FILE *f = fopen(blocker, "w");
	ck_assert(f && fclose(f) == 0);
	ck_assert_int_eq(dirlock_take(&l, inside, "[run] outputs", "train", &e), ERR_IO);
	ck_assert_msg(strstr(e.msg, inside) && strstr(e.msg, "[run] outputs"), "message: %s", e.msg);
	ck_assert_int_eq(l.n, 0);
	tmpdir_drop(dir);
}
END_TEST

START_TEST(directories_made_for_the_lock_go_when_they_stay_empty)
{
	char *dir = tmpdir_make("test-dirlock"), deep[FSX_PATH_MAX], top[FSX_PATH_MAX];
	char file[FSX_PATH_MAX + 32];
	struct dirlock l;
	struct err e;
	err_clear(&e);
	snprintf(top, sizeof top, "%s/a", dir);
	snprintf(deep, sizeof deep, "%s/a/b/c", dir);
	/* nothing written: a, a/b and a/b/c are made and removed again */
	dirlock_init(&l);
	ck_assert_msg(dirlock_take(&l, deep, "[run] outputs", "train", &e) == ERR_OK, "%s", e.msg);
	ck_assert(fsx_is_dir(deep));
	dirlock_release(&l);
	ck_assert(!fsx_exists(top));
	/* a file written in it: the directories stay, the lock file goes */
	dirlock_init(&l);
	ck_assert_msg(dirlock_take(&l, deep, "[run] outputs", "train", &e) == ERR_OK, "%s", e.msg);
	snprintf(file, sizeof file, "%s/metrics.jsonl", deep);
	FILE *f = fopen(file, "w");
	ck_assert(f && fclose(f) == 0);
	dirlock_release(&l);
	ck_assert(fsx_exists(file));
	snprintf(file, sizeof file, "%s/%s", deep, DIRLOCK_NAME);
	ck_assert(!fsx_exists(file));
	/* a directory that was there before is never removed */
	dirlock_init(&l);
	ck_assert_msg(dirlock_take(&l, dir, "[run] outputs", "train", &e) == ERR_OK, "%s", e.msg);
	dirlock_release(&l);
	ck_assert(fsx_is_dir(dir));
	tmpdir_drop(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("dirlock");
	TCase *tc = tcase_create("dirlock");
	tcase_add_test(tc, a_second_holder_is_refused_naming_the_first);
	tcase_add_test(tc, one_directory_under_two_names_is_locked_once);
	tcase_add_test(tc, the_lock_dies_with_its_process);
	tcase_add_test(tc, a_directory_that_cannot_be_made_is_an_error_naming_it);
	tcase_add_test(tc, directories_made_for_the_lock_go_when_they_stay_empty);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
