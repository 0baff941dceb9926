/*
 * app: what every command shares: the loaded configuration, the parsed command-line
 * options, the output locations, and helpers to get the corpus and an engine.
 *
 * Commands are functions `int cmd_NAME(struct app *a, struct err *e)` (cmd_*.c) that
 * return an err code; main() turns it into the exit status. They print human-readable
 * progress to stdout (a terminal gets live progress lines) and write machine-readable
 * JSON/JSONL/.npy beside it in the outputs directory.
 */
#ifndef DDPTOK_APP_H
#define DDPTOK_APP_H

#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "corpus.h"
#include "err.h"
#include "settings.h"

struct app_opts {
	const char *dump_dir;   /* parity --dump DIR */
	const char *resume_dir; /* train/inspect --resume DIR */
	const char *checkpoint; /* evaluate --checkpoint DIR */
	const char *scope;      /* clean --scope generated|checkpoints|partial|all */
	int continuous;         /* train --continuous */
	int dry_run;            /* clean --dry-run */
	long windows;           /* bench --windows N (0: default) */
	int inject_rank;        /* --inject-failure R:W (tests); -1 off */
	long inject_window;
	int inject_drift;       /* --inject-drift (tests): a resume flips one parameter bit */
};

struct app {
	struct cfg cfg;
	struct settings s;
	const char *config_path;
	const char *command;
	struct app_opts o;
	int tty;               /* stdout is a terminal: live progress lines */
	char outputs[1024];    /* resolved [run] outputs */
	char artifacts[1024];  /* resolved [run] artifacts */
};

/* path = dir/name (ERR_IO if too long) */
int app_path(char *out, size_t outlen, const char *dir, const char *name, struct err *e);
/* Creates the outputs directory (ERR_IO naming it when it cannot be created/written). */
int app_outputs_ready(struct app *a, struct err *e);
/* Creates dir (and its parents) if needed and checks that it is writable; `key` names the
 * setting it comes from in messages. ERR_IO otherwise. */
int app_dir_ready(const char *dir, const char *key, struct err *e);
/* Builds the corpus from the settings (deterministic; cheap) into c. */
int app_corpus(struct app *a, struct corpus *c, struct err *e);
/* A jansson value (json_t *) as indented text with a final newline (malloc'd, *len bytes);
 * sort_keys gives a canonical key order. `what` names it in errors. */
int app_json_text(const void *json, int sort_keys, char **out, size_t *len, const char *what,
		  struct err *e);
/* Writes a jansson object as pretty JSON to outputs/name atomically. */
struct json_t;
int app_write_json(struct app *a, const char *name, void *json, struct err *e);
/* Logging to stdout according to [run] log_level. */
void app_info(const struct app *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void app_debug(const struct app *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int cmd_prepare(struct app *a, struct err *e);
int cmd_check_loss(struct app *a, struct err *e);
int cmd_reference(struct app *a, struct err *e);
int cmd_parity(struct app *a, struct err *e);
int cmd_exercise(struct app *a, struct err *e);
int cmd_train(struct app *a, struct err *e);
int cmd_evaluate(struct app *a, struct err *e);
struct train_eval;
/* What cmd_evaluate prints and writes (evaluate.json), for an evaluation already made. */
int cmd_evaluate_write(struct app *a, const struct train_eval *ev, struct err *e);
int cmd_checkpoints(struct app *a, struct err *e);
int cmd_clean(struct app *a, struct err *e);
int cmd_inspect(struct app *a, struct err *e);
int cmd_bench(struct app *a, struct err *e);
int cmd_env(struct app *a, struct err *e);
int cmd_protocol(struct app *a, struct err *e);

#endif
