/*
 * cli_signals: SIGINT / SIGTERM for the commands that train.
 *
 * While held, the first SIGINT or SIGTERM is recorded in a flag (and the next one kills at
 * once, the default action); so is a SIGPIPE, the output closed, unless a signal came
 * first (later writes to it fail quietly, never killing the process); the core polls that flag through env.stop and stops at the
 * next window boundary with a checkpoint. Holds nest: an outer holder (the protocol) keeps
 * the first signal across several runs and checks it between its steps. Released, the
 * caller's own handlers are back.
 *
 * A prompt that waits for input cannot poll a flag: while held, each signal also writes a
 * byte to a pipe whose read end (cli_signal_wake_fd) a poll() can wait on beside the
 * input, whichever thread the signal was delivered to.
 */
#ifndef DDPTOK_CLI_SIGNALS_H
#define DDPTOK_CLI_SIGNALS_H

#include <signal.h>

void cli_signals_hold(void);
void cli_signals_release(void);
/* Forgets the signal received, and makes the next one a first one again (a session
 * that goes on after honouring it); a closed output (SIGPIPE) is never forgotten. */
void cli_signals_rearm(void);
/* The first signal received while held (SIGINT, SIGTERM or SIGPIPE), or 0. */
int cli_signal_received(void);
/* Readable once a signal was received while held (until cli_signals_rearm drains it);
 * -1 when not held or when the pipe could not be made (a wait then ends at its input
 * only). */
int cli_signal_wake_fd(void);
/* The flag itself, for env.stop. */
const volatile sig_atomic_t *cli_signal_flag(void);

#endif
