/*
 * check-run: the one way every Check suite of this project is run from its main():
 * all test cases, normal output, the process's status saying whether any failed; and the
 * one way a device test asserts a call that reports through a struct err.
 */
#ifndef DDPTOK_CHECK_RUN_H
#define DDPTOK_CHECK_RUN_H

#include <check.h>
#include <stdlib.h>

/* Runs suite s (takes it) and returns EXIT_SUCCESS or EXIT_FAILURE. no_fork: run the tests
 * in this process (for code that does not survive fork(), such as CUDA). */
static inline int check_run(Suite *s, int no_fork)
{
	SRunner *sr = srunner_create(s);
	if (no_fork)
		srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* OK(expr): expr, a call that fills the including file's `struct err E` (err.h), returns
 * ERR_OK; otherwise the test fails naming the call, its code and E's message. */
#define OK(expr)                                                                             \
	do {                                                                                 \
		err_clear(&E);                                                               \
		int rc_ = (expr);                                                            \
		ck_assert_msg(rc_ == ERR_OK, "%s -> %d: %s", #expr, rc_, E.msg);             \
	} while (0)

#endif
