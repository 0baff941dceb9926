/*
 * cli_signals: the handler that turns a signal into the core's stop flag (see
 * cli_signals.h).
 */
#include "signals.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t received; /* 0, or the first signal received */
/* The output closed (a SIGPIPE), whatever came before or after it: writes after a hold
 * must not kill the process that honoured the stop, also when Ctrl-C reached it first
 * (`train | tee log`: the terminal sends SIGINT to both, then the pipe closes). */
static volatile sig_atomic_t output_closed;
static struct sigaction dfl_action;    /* SIG_DFL, prepared before installing */
static int wake[2] = {-1, -1};         /* the wake pipe (read end, write end) */

static void on_signal(int sig)
{
	int saved_errno = errno;
	if (!received)
		received = sig;
	if (wake[1] >= 0) { /* non-blocking: a full pipe already wakes its reader */
		ssize_t n = write(wake[1], "", 1);
		(void)n;
	}
	errno = saved_errno;
	/* the next SIGINT or SIGTERM kills at once (sigaction is async-signal-safe) */
	sigaction(SIGINT, &dfl_action, NULL);
	sigaction(SIGTERM, &dfl_action, NULL);
}

/* The output closed (`train | tee log` ended by Ctrl-C, `| head`): a stop request like
 * SIGINT's unless one came first, so that the run still writes its checkpoint and summary;
 * the writes after it fail with EPIPE instead, which the log ignores. */
static void on_pipe(int sig)
{
	int saved_errno = errno;
	output_closed = 1;
	if (!received) {
		received = sig;
		if (wake[1] >= 0) {
			ssize_t n = write(wake[1], "", 1);
			(void)n;
		}
	}
	errno = saved_errno;
	signal(SIGPIPE, SIG_IGN);
}

struct saved_signals {
	struct sigaction old_int, old_term, old_pipe;
	int installed;
};

static struct saved_signals saved; /* what the outermost hold replaced */
static struct sigaction hold_action; /* on_signal, as installed by the outermost hold */
static int depth;                  /* nesting of cli_signals_hold() */

void cli_signals_hold(void)
{
	struct sigaction sa;
	if (depth++ > 0)
		return; /* an outer caller (the protocol) holds them: keep its first signal */
	memset(&dfl_action, 0, sizeof dfl_action);
	dfl_action.sa_handler = SIG_DFL;
	sigemptyset(&dfl_action.sa_mask);
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGINT);
	sigaddset(&sa.sa_mask, SIGTERM);
	sa.sa_flags = SA_RESTART; /* no EINTR in the middle of a checkpoint write */
	received = 0;
	output_closed = 0;
	if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0)
		wake[0] = wake[1] = -1;
	hold_action = sa;
	saved.installed = sigaction(SIGINT, &sa, &saved.old_int) == 0;
	if (saved.installed && sigaction(SIGTERM, &sa, &saved.old_term) != 0) {
		sigaction(SIGINT, &saved.old_int, NULL);
		saved.installed = 0;
	}
	sa.sa_handler = on_pipe;
	if (saved.installed && sigaction(SIGPIPE, &sa, &saved.old_pipe) != 0) {
		sigaction(SIGINT, &saved.old_int, NULL);
		sigaction(SIGTERM, &saved.old_term, NULL);
		saved.installed = 0;
	}
	/* a mask inherited blocked (from the launcher) would keep the stop request pending
	 * until the end of the run; one already pending is taken now, like a later one */
	sigset_t stop_signals;
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGINT);
	sigaddset(&stop_signals, SIGTERM);
	if (saved.installed)
		sigprocmask(SIG_UNBLOCK, &stop_signals, NULL);
}

void cli_signals_release(void)
{
	if (depth == 0 || --depth > 0)
		return;
	if (saved.installed) {
		sigaction(SIGINT, &saved.old_int, NULL);
		sigaction(SIGTERM, &saved.old_term, NULL);
		/* once the output closed, a later write (the command's last lines) must not
		 * kill the process that honoured it */
		if (output_closed)
			signal(SIGPIPE, SIG_IGN);
		else
			sigaction(SIGPIPE, &saved.old_pipe, NULL);
		saved.installed = 0;
	}
	/* the handler reads wake[1]: it sees -1 before the descriptor is closed (and reused) */
	int fds[2] = {wake[0], wake[1]};
	wake[0] = wake[1] = -1;
	for (int i = 0; i < 2; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* Empties the wake pipe (non-blocking). */
static void drain_wake(void)
{
	char buf[64];
	while (wake[0] >= 0 && read(wake[0], buf, sizeof buf) > 0)
		;
}

void cli_signals_rearm(void)
{
	if (depth == 0 || !saved.installed)
		return;
	if (output_closed)
		return; /* the output stays closed: a session cannot go on */
	received = 0;
	drain_wake();
	sigaction(SIGINT, &hold_action, NULL);
	sigaction(SIGTERM, &hold_action, NULL);
}

int cli_signal_received(void)
{
	return received;
}

int cli_signal_wake_fd(void)
{
	return wake[0];
}

const volatile sig_atomic_t *cli_signal_flag(void)
{
	return &received;
}
