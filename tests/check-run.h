/*
 * check-run: the one way every Check suite of this project is run from its main():
 * all test cases, normal output, the process's status saying whether any failed.
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

#endif
