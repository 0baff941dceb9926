/*
 * test-signals: the CLI's signal handling (src/cli_signals.c), which turns SIGINT /
 * SIGTERM into the stop flag the core polls:
 *   - while held, a SIGTERM is recorded in the flag (not acted on), and the default
 *     disposition is re-armed so that a second signal kills at once;
 *   - released, the caller's own handler is back;
 *   - holds nest: an inner release keeps the handler and the first signal;
 *   - a closed output (SIGPIPE) never kills after the hold, whichever of it and a SIGINT
 *     came first (`train | tee log` and Ctrl-C: both processes get the SIGINT).
 */
#include <check.h>
#include <errno.h>
#include <unistd.h>
#include <poll.h>
#include <signal.h>
#include <string.h>

#include "check-run.h"
#include "signals.h"

static void my_handler(int sig)
{
	(void)sig;
}

static void (*handler_of(int sig))(int)
{
	struct sigaction now;
	ck_assert_int_eq(sigaction(sig, NULL, &now), 0);
	return now.sa_handler;
}

START_TEST(test_signal_raises_the_flag_and_rearms_the_default)
{
	struct sigaction mine;
	memset(&mine, 0, sizeof mine);
	mine.sa_handler = my_handler;
	sigemptyset(&mine.sa_mask);
	ck_assert_int_eq(sigaction(SIGTERM, &mine, NULL), 0);
	ck_assert_int_eq(sigaction(SIGINT, &mine, NULL), 0);

	cli_signals_hold();
	ck_assert_int_eq(cli_signal_received(), 0);
	ck_assert(handler_of(SIGTERM) != my_handler && handler_of(SIGTERM) != SIG_DFL);
	raise(SIGTERM);
	ck_assert_int_eq(cli_signal_received(), SIGTERM);
	ck_assert_int_eq(*cli_signal_flag(), SIGTERM);
	/* a second signal would kill at once */
	ck_assert(handler_of(SIGTERM) == SIG_DFL);
	ck_assert(handler_of(SIGINT) == SIG_DFL);
	cli_signals_release();
	/* the caller's disposition is back */
	ck_assert(handler_of(SIGTERM) == my_handler);
	ck_assert(handler_of(SIGINT) == my_handler);
}
END_TEST

static int readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* A prompt waits in poll(): the signal must wake it through the pipe, once per signal
 * received, and rearming empties it. */
START_TEST(test_signal_wakes_a_poll)
{
	ck_assert_int_eq(cli_signal_wake_fd(), -1);
	cli_signals_hold();
	int fd = cli_signal_wake_fd();
	ck_assert_int_ge(fd, 0);
	ck_assert(!readable(fd));
	raise(SIGINT);
	ck_assert_int_eq(cli_signal_received(), SIGINT);
	ck_assert(readable(fd));
	cli_signals_rearm();
	ck_assert_int_eq(cli_signal_received(), 0);
	ck_assert(!readable(fd));
	raise(SIGTERM);
	ck_assert(readable(fd));
	cli_signals_release();
	ck_assert_int_eq(cli_signal_wake_fd(), -1);
}
END_TEST

START_TEST(test_holds_nest)
{
	void (*before)(int) = handler_of(SIGINT);
	cli_signals_hold();
	ck_assert_int_eq(cli_signal_received(), 0);
	cli_signals_hold();
	raise(SIGINT);
	cli_signals_release(); /* the inner holder (a training run) is done */
	ck_assert_int_eq(cli_signal_received(), SIGINT); /* the outer one still sees it */
	cli_signals_release();
	ck_assert(handler_of(SIGINT) == before);
	/* a new outermost hold starts with no signal */
	cli_signals_hold();
	ck_assert_int_eq(cli_signal_received(), 0);
	cli_signals_release();
}
END_TEST

/* Holds, raises first then second, releases: the first is the stop reason, and a write to
 * a closed pipe afterwards fails with EPIPE instead of killing the process. */
static void closed_output_after(int first, int second)
{
	int fds[2];
	cli_signals_hold();
	raise(first);
	raise(second);
	ck_assert_int_eq(cli_signal_received(), first);
	cli_signals_rearm(); /* a closed output is never forgotten */
	ck_assert_int_eq(cli_signal_received(), first);
	cli_signals_release();
	ck_assert(handler_of(SIGPIPE) == SIG_IGN);
	ck_assert_int_eq(pipe(fds), 0);
	close(fds[0]);
	errno = 0;
	ck_assert_int_eq(write(fds[1], "x", 1), -1);
	ck_assert_int_eq(errno, EPIPE);
	close(fds[1]);
}

START_TEST(test_closed_output_after_sigint)
{
	closed_output_after(SIGINT, SIGPIPE);
}
END_TEST

START_TEST(test_sigint_after_closed_output)
{
	closed_output_after(SIGPIPE, SIGINT);
}
END_TEST

static Suite *signals_suite(void)
{
	Suite *s = suite_create("signals");
	TCase *tc = tcase_create("hold");
	tcase_add_test(tc, test_signal_raises_the_flag_and_rearms_the_default);
	tcase_add_test(tc, test_holds_nest);
	tcase_add_test(tc, test_signal_wakes_a_poll);
	tcase_add_test(tc, test_closed_output_after_sigint);
	tcase_add_test(tc, test_sigint_after_closed_output);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(signals_suite(), 0);
}
