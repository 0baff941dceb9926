/*
 * cli_signals: SIGINT / SIGTERM for the commands that train.
 *
 * While held, the first SIGINT or SIGTERM is recorded in a flag (and the next one kills at
 * once, the default action); the core polls that flag through env.stop and stops at the
 * next window boundary with a checkpoint. Holds nest: an outer holder (the protocol) keeps
 * the first signal across several runs and checks it between its steps. Released, the
 * caller's own handlers are back.
 */
#ifndef DDPTOK_CLI_SIGNALS_H
#define DDPTOK_CLI_SIGNALS_H

#include <signal.h>

void cli_signals_hold(void);
void cli_signals_release(void);
/* Forgets the signal received, and makes the next one a first one again (a session
 * that goes on after honouring it). */
void cli_signals_rearm(void);
/* The first signal received while held (SIGINT or SIGTERM), or 0. */
int cli_signal_received(void);
/* The flag itself, for env.stop. */
const volatile sig_atomic_t *cli_signal_flag(void);

#endif
