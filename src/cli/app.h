/*
 * app: what every command shares: the loaded configuration, the parsed command-line
 * options, and the environment (env.h) the commands hand to the core.
 *
 * Commands are functions `int cmd_NAME(struct app *a, struct err *e)` (cmd_NAME.c, each
 * declared in its cmd_NAME.h) that return an err code; main() turns it into the exit status. They print human-readable
 * progress to stdout (a terminal gets live progress lines) and write machine-readable
 * JSON/JSONL/.npy beside it in the outputs directory.
 */
#ifndef DDPTOK_APP_H
#define DDPTOK_APP_H

#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "env.h"
#include "err.h"
#include "evaluate.h"
#include "fault.h"
#include "settings.h"
#include "train_loop.h"

struct app_opts {
	const char *dump_dir;   /* parity --dump DIR */
	const char *resume_dir; /* train/inspect --resume DIR */
	const char *checkpoint; /* evaluate, export, sample --checkpoint DIR */
	const char *llmc;       /* export --llmc FILE */
	const char *hf;         /* export --hf DIR */
	const char *dtype;      /* export --dtype f32|bf16 */
	/* sample's options as given (cmd_sample.c parses them); NULL: not given */
	const char *prompt, *prompt_file, *tokens, *temperature, *top_k, *sample_seed;
	const char *top_p, *repetition_penalty, *stop_id;
	int no_cache;
	const char *scope;      /* clean --scope generated|checkpoints|partial|all */
	const char *operand;    /* the FILE after the command (tokenize) */
	int decode, bench;      /* tokenize --decode, --bench */
	int ids;                /* sample --ids: ids in and out, not text */
	int continuous;         /* train --continuous */
	int allow_gemm_change;  /* train --resume --allow-gemm-change */
	int dry_run;            /* clean --dry-run */
	long windows;           /* bench --windows N (0: default) */
	int sweep;              /* bench --sweep: also the size sweep (minutes: opt-in) */
	/* tests: --inject-failure R:W, --inject-shard-swap R (exact mode) and
	 * --inject-hang R:W[:S], handed to the engine as they are; off: -1 */
	struct fault_injection fault;
	int inject_drift;       /* --inject-drift (tests): a resume flips one parameter bit */
	int check;              /* env --check */
};

struct app {
	struct cfg cfg;
	struct settings s;
	struct env env;        /* what the core gets: points to cfg and s (app_env_init) */
	const char *config_path;
	const char *command;
	struct app_opts o;
	int progress_open;     /* a progress line is on the terminal, without its newline */
};

/* Points a->env to a's configuration and settings; its log prints to stdout ([run]
 * log_level), with live progress lines when stdout is a terminal (tty), else whole
 * progress lines now and then when `lines` (progress.h); its stop flag is the one of
 * cli_signals.h; its engines get the --inject-failure, --inject-shard-swap and
 * --inject-hang options; the shared code's messages name `command`. */
void app_env_init(struct app *a, int tty, int lines, const char *command);
/* Ends a progress line left open on the terminal (before anything else is printed). */
void app_progress_close(struct app *a);
/* The name nearest to a mistyped `word` for a "did you mean" hint, among name_of(0),
 * name_of(1), ... up to the first NULL (cfg_near_distance; ties: the first), or NULL when
 * none is near. */
const char *app_nearest(const char *word, const char *(*name_of)(int i));
/* The next whitespace-separated word of the text at *p, a whole integer in [lo, hi]
 * ("5,6" and "5x" are not one): 1 with *v set and *p past it; 0 at the end of the text;
 * -1 for a word that is not one (*p at it, *len its length, for the message). Ids typed
 * or read from a file (sample, tokenize --decode) are read so. */
int app_next_id(const char **p, long long lo, long long hi, long long *v, int *len);
/* The command line's hooks on a training run (--inject-drift's on a resume). */
void app_train_hooks(struct app *a, struct train_opts *o);
/* train_opts_for(), with --inject-drift applied to a resumed state. */
int app_train_opts(struct app *a, enum train_kind kind, const char *resume_dir,
		   struct train_opts *o, struct err *e);

#endif
