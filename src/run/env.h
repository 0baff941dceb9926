/*
 * env: what the core (corpus, engine, trainer, checkpoints, evaluation) needs from whoever
 * drives it: the configuration, where outputs go, how to log, when to stop, and the
 * options every engine it opens gets.
 *
 * The core never reads the command line, installs a signal handler or prints on its own:
 * a driver (the CLI, a test) fills an env and passes it down. The core logs through
 * env_info/env_debug/env_progress, which go to the driver's callback, and polls *stop
 * between training windows.
 */
#ifndef DDPTOK_ENV_H
#define DDPTOK_ENV_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "engine.h"
#include "engine_keep.h"
#include "err.h"
#include "settings.h"

enum env_log_level {
	ENV_PROGRESS = 0, /* a transient progress line (replaced by the next one); NULL text:
			     the progress lines are over */
	ENV_INFO = 1,     /* [run] log_level = info */
	ENV_DEBUG = 2,    /* [run] log_level = debug */
};

/* Receives one line (no final newline) at `level`; called only for the levels that
 * [run] log_level lets through (progress lines: only when env.progress is set). */
typedef void (*env_log_fn)(void *arg, int level, const char *line);

struct env {
	const struct cfg *cfg;        /* the loaded configuration (config.ini of checkpoints) */
	const struct settings *s;     /* its typed view; s->outputs and s->artifacts are the
					 output and artifact directories */
	env_log_fn log;               /* NULL: nothing is logged */
	void *log_arg;
	int progress;                 /* live progress lines are wanted (a terminal) */
	int progress_lines;           /* not a terminal: a training run prints whole progress
					 lines now and then instead (progress.h) */
	/* Non-zero: stop at the next window boundary (checkpointing first); the value names
	 * the reason: SIGINT or SIGTERM, any other value a stop request. NULL: never. */
	const volatile sig_atomic_t *stop;
	struct engine_opts engine;    /* given to every engine the core creates */
	/* NULL: every run makes its own engine; else the engines it takes and gives back
	 * (the protocol's, shared by its steps) */
	struct engine_keep *keep;
	/* the command whose work this is ("train", "inspect", "evaluate", ...): the prefix of
	 * what the shared code (corpus, resume, checkpoints) prints for it */
	const char *command;
};

/* Fills v for cfg and its settings: no logging, no progress, no stop flag, default engine
 * options, command "train". */
void env_init(struct env *v, const struct cfg *cfg, const struct settings *s);
/* The reason to stop now (0: none). */
int env_stop_requested(const struct env *v);
/* "SIGINT", "SIGTERM", "a closed output (SIGPIPE)" or "a stop request", for a value of
 * *stop. */
const char *env_stop_name(int reason);

void env_info(const struct env *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void env_debug(const struct env *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A progress line (only when v->progress); env_progress_end(v) closes a series. */
void env_progress(const struct env *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void env_progress_end(const struct env *v);
/* "WHAT: memory: resident ... (anonymous ..., file pages ...; peak ...); corpus N MiB,
 * mapped from its file": what a run held against the size of its corpus (corpus_bytes 0:
 * a corpus in memory). */
struct mem_usage;
void env_show_memory(const struct env *v, const char *what, const struct mem_usage *m,
		     int64_t corpus_bytes);

/* Creates dir (and its parents) if needed and checks that it is writable; `key` names the
 * setting it comes from in messages. ERR_IO otherwise. */
int env_dir_ready(const char *dir, const char *key, struct err *e);
/* The outputs directory, ready (env_dir_ready of [run] outputs). */
int env_outputs_ready(const struct env *v, struct err *e);
/* A jansson value (json_t *) as indented text with a final newline (malloc'd, *len bytes);
 * sort_keys gives a canonical key order. `what` names it in errors. */
int env_json_text(const void *json, int sort_keys, char **out, size_t *len, const char *what,
		  struct err *e);
/* Writes a jansson object as pretty JSON to <outputs>/name atomically. */
int env_write_json(const struct env *v, const char *name, void *json, struct err *e);

#endif
