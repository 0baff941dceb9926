/*
 * ddptok-run: the command-line entry point.
 *
 *   ddptok-run CONFIG [COMMAND] [OPTIONS]
 *   ddptok-run help [COMMAND]           (also: CONFIG COMMAND --help)
 *
 * Parses the command line, loads and validates the configuration (with --set
 * overrides), runs the command, prints the error of a failed command on stderr and exits
 * with the code of that error (README "Exit codes"). Only this file exits. Every command
 * is one row of `commands` (its function, the options it accepts, its help); every option
 * one row of `options`.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app.h"
#include "cmd_bench.h"
#include "cmd_check_loss.h"
#include "cmd_checkpoints.h"
#include "cmd_clean.h"
#include "cmd_env.h"
#include "cmd_evaluate.h"
#include "cmd_exercise.h"
#include "cmd_export.h"
#include "cmd_inspect.h"
#include "cmd_parity.h"
#include "cmd_prepare.h"
#include "cmd_protocol.h"
#include "cmd_reference.h"
#include "cmd_sample.h"
#include "cmd_tokenize.h"
#include "cmd_train.h"
#include "gpt_init.h"
#include "layout.h"
#include "model.h"
#include "signals.h"
#include "ddptok_config.h"
#include "dirlock.h"
#include "fsx.h"
#include "gemm.h"
#include "pool.h"
#include "world.h"

/* Command-specific options: the bit a command's `opts` accepts them by. */
enum {
	OPT_DUMP = 1 << 0,
	OPT_RESUME = 1 << 1,
	OPT_CONTINUOUS = 1 << 2,
	OPT_CHECKPOINT = 1 << 3,
	OPT_SCOPE = 1 << 4,
	OPT_DRY_RUN = 1 << 5,
	OPT_WINDOWS = 1 << 6,
	OPT_INJECT = 1 << 7,
	OPT_DRIFT = 1 << 8,
	OPT_CHECK = 1 << 9,
	OPT_SWAP = 1 << 10,
	OPT_HANG = 1 << 11,
	OPT_LLMC = 1 << 12,
	OPT_SAMPLE = 1 << 13,
	OPT_SWEEP = 1 << 14,
	OPT_TOKENIZE = 1 << 15,
	OPT_OPERAND = 1 << 16, /* a FILE after the command */
	OPT_GEMM_CHANGE = 1 << 17,
};

struct option_row {
	const char *name; /* long name, without "--" */
	int has_arg;      /* no_argument / required_argument */
	int val;          /* getopt's value */
	unsigned bit;     /* OPT_* bit; 0: valid with every command */
	const char *shown; /* as the help writes it */
	const char *help;
};

static const struct option_row options[] = {
	{"set", required_argument, 's', 0, "--set SECTION.KEY=VALUE",
	 "override a configuration key (repeatable)"},
	{"dump", required_argument, 'd', OPT_DUMP, "--dump DIR",
	 "parity: write parameters, batches and gradients as .npy into DIR"},
	{"resume", required_argument, 'r', OPT_RESUME, "--resume DIR",
	 "train: continue `latest` (the latest run), a run or other\n"
	 "directory of checkpoints (its newest valid one) or a checkpoint;\n"
	 "inspect: continue from a checkpoint"},
	{"allow-gemm-change", no_argument, 'G', OPT_GEMM_CHANGE, "--allow-gemm-change",
	 "train --resume: go on under another GEMM implementation than the\n"
	 "checkpoint's (refused without it; recorded as a change)"},
	{"continuous", no_argument, 'c', OPT_CONTINUOUS, "--continuous",
	 "train: run 0 -> updates, past a planned stop ([train] stop_at)"},
	{"checkpoint", required_argument, 'k', OPT_CHECKPOINT, "--checkpoint DIR",
	 "evaluate, export, sample: a checkpoint, or `latest` or a directory\n"
	 "of checkpoints (its newest valid one; default: the latest run's,\n"
	 "else, for evaluate, the newest of checkpoints/ and continuous/)"},
	{"llmc", required_argument, 'L', OPT_LLMC, "--llmc FILE",
	 "export: the llm.c GPT-2 model file to write"},
	{"hf", required_argument, 1005, OPT_LLMC, "--hf DIR",
	 "export: the Hugging Face GPT-2 directory to write (config.json,\n"
	 "model.safetensors)"},
	{"dtype", required_argument, 1006, OPT_LLMC, "--dtype f32|bf16",
	 "export --llmc: float32 (version 3, default) or bfloat16 (version 5)"},
	{"prompt", required_argument, 'p', OPT_SAMPLE, "--prompt TEXT",
	 "sample: the prompt: text for a model trained on text, else (and\n"
	 "with --ids) user ids separated by spaces"},
	{"prompt-file", required_argument, 'f', OPT_SAMPLE, "--prompt-file FILE",
	 "sample: the prompt read from FILE (text, or whitespace-separated ids)"},
	{"tokens", required_argument, 't', OPT_SAMPLE, "--tokens N",
	 "sample: ids to generate (default 16)"},
	{"temperature", required_argument, 'T', OPT_SAMPLE, "--temperature T",
	 "sample: softmax temperature, 0 = greedy (default 1)"},
	{"top-k", required_argument, 'j', OPT_SAMPLE, "--top-k K",
	 "sample: draw among the K most likely ids (default 0: all)"},
	{"seed", required_argument, 'g', OPT_SAMPLE, "--seed S",
	 "sample: the draws' seed (default [run] seed)"},
	{"ids", no_argument, 'I', OPT_SAMPLE, "--ids",
	 "sample: the prompt and the output as ids, not text"},
	{"decode", no_argument, 'E', OPT_TOKENIZE, "--decode",
	 "tokenize: FILE holds ids; print their text"},
	{"bench", no_argument, 'B', OPT_TOKENIZE, "--bench",
	 "tokenize: encoding speed on FILE, one thread and every core"},
	{"top-p", required_argument, 1001, OPT_SAMPLE, "--top-p P",
	 "sample: draw among the most likely ids holding P of the weight\n"
	 "(after --top-k; default 1: all)"},
	{"repetition-penalty", required_argument, 1002, OPT_SAMPLE, "--repetition-penalty R",
	 "sample: divide (multiply, when negative) the logits of ids already\n"
	 "in the text by R (default 1: none)"},
	{"stop-id", required_argument, 1003, OPT_SAMPLE, "--stop-id ID",
	 "sample: the user id that ends the text (end-of-text; default none)"},
	{"no-cache", no_argument, 1004, OPT_SAMPLE, "--no-cache",
	 "sample: rerun the whole window for every token (no cache of keys\n"
	 "and values: the reference the cache must agree with, and slower)"},
	{"scope", required_argument, 'S', OPT_SCOPE, "--scope S",
	 "clean: generated, checkpoints, partial or all (default generated)"},
	{"dry-run", no_argument, 'n', OPT_DRY_RUN, "--dry-run", "clean: list what would be removed"},
	{"windows", required_argument, 'w', OPT_WINDOWS, "--windows N",
	 "bench: number of windows to time"},
	{"sweep", no_argument, 'W', OPT_SWEEP, "--sweep",
	 "bench: also time the sizes the model declares (minutes)"},
	{"check", no_argument, 'C', OPT_CHECK, "--check",
	 "env: create each rank's device, run a kernel, a GEMM and an\n"
	 "allreduce on it and compare them with the CPU (exit 10 if one fails)"},
	{"inject-failure", required_argument, 'i', OPT_INJECT, "--inject-failure R:W",
	 "testing aid: rank R (from 0) fails at window W (from 1);\n"
	 "env --check: rank R's allreduce result is made wrong"},
	{"inject-drift", no_argument, 'D', OPT_DRIFT, "--inject-drift",
	 "testing aid: a resumed run starts with the last bit of\n"
	 "parameter 0 flipped (the resume check must catch it)"},
	{"inject-shard-swap", required_argument, 'X', OPT_SWAP, "--inject-shard-swap R",
	 "testing aid (exact mode): rank R adds its second and third\n"
	 "shards in each other's place (parity's bitwise check must fail)"},
	{"inject-hang", required_argument, 'H', OPT_HANG, "--inject-hang R:W[:S]",
	 "testing aid: rank R stops in window W for S seconds (for good\n"
	 "without S), deaf to aborts; the watchdog must end the run"},
	{"help", no_argument, 'h', 0, "-h, --help", "this help (with a command: that command's)"},
	{"version", no_argument, 'V', 0, "--version", "print the version"},
	{"keys", no_argument, 'K', 0, "--keys", "print the configuration reference (markdown)"},
	{NULL, 0, 0, 0, NULL, NULL},
};

/* The directories a command writes: it holds their locks while it runs (dirlock.h). */
enum {
	WRITES_OUTPUTS = 1,
	WRITES_ARTIFACTS = 2,
};

/* why prepare, check-loss, reference and exercise run in one process only */
#define ONE_RESULT "it does not span processes: each would compute and write the same result"

struct command {
	const char *name;
	int (*fn)(struct app *a, struct err *e);
	unsigned opts;       /* the OPT_* bits it accepts */
	unsigned writes;     /* WRITES_* bits: the roots it locks. Not the readers: env;
				checkpoints and evaluate, whose only writes are one summary file
				each, replaced atomically (they may run beside a training) */
	const char *summary; /* one line of the global help */
	const char *about;   /* what it does, for its own help */
	const char *example; /* arguments after CONFIG */
	int stoppable;       /* a signal stops it at a boundary: handled from the start */
	const char *one_process; /* why it runs in one process only (refused under mpirun
				    or srun with P > 1); NULL: it runs over every process */
};

static const struct command commands[] = {
	{"protocol", cmd_protocol, OPT_INJECT | OPT_DRIFT | OPT_SWAP | OPT_HANG,
	 WRITES_OUTPUTS | WRITES_ARTIFACTS,
	 "the whole protocol (default): prepare, check-loss, reference, parity, exercise, "
	 "empty-window, train stop/continuous/resume, elastic (exact mode), evaluate, figure, "
	 "report",
	 "Runs every step in order and writes report.md and report.json into [run] outputs;\n"
	 "exits 1 when a check fails. A signal stops it after the current step (exit 8).",
	 "protocol", 1, NULL},
	{"prepare", cmd_prepare, 0, WRITES_OUTPUTS,
	 "build the corpus and write it with its data lock",
	 "Builds the corpus from [data] and [run] seed and writes it, with its data lock,\n"
	 "under [run] outputs (corpus/).",
	 "prepare", 0, ONE_RESULT},
	{"check-loss", cmd_check_loss, 0, WRITES_OUTPUTS,
	 "the 12/36 counterexample: mean of means 2, global mean 2.5",
	 "Two ranks with 12 and 36 supervised tokens: the mean of the rank means is 2, the\n"
	 "global token mean 2.5; exits 1 if the program computes other values.",
	 "check-loss", 0, ONE_RESULT},
	{"reference", cmd_reference, 0, WRITES_OUTPUTS,
	 "single-device gradient of window 1 (.npy + JSON summary)",
	 "The gradient of window 1's global token mean computed by one device over every\n"
	 "sequence of the window; writes it as .npy with a JSON summary (N, loss, L2 norm).",
	 "reference", 0, ONE_RESULT},
	{"parity", cmd_parity, OPT_DUMP | OPT_INJECT | OPT_SWAP | OPT_HANG, WRITES_OUTPUTS,
	 "W-device gradient per normalization against the reference [--dump DIR]",
	 "The W-device gradient of window 1 under each normalization against the\n"
	 "single-device reference, within [parity] atol and rtol: global_token must agree,\n"
	 "the negative controls must not; in exact mode ([train] shards) global_token must\n"
	 "also equal the reference in every bit; exits 1 otherwise.",
	 "parity --dump parity-dump", 0, NULL},
	{"exercise", cmd_exercise, 0, WRITES_OUTPUTS,
	 "rank 1 goes from 12 to 36 tokens: both means and gradients",
	 "Rank 0 keeps [exercise] short supervised tokens while rank 1 goes from long_before\n"
	 "to long_after: both means and both gradients on the model.",
	 "exercise", 0, ONE_RESULT},
	{"train", cmd_train, OPT_RESUME | OPT_CONTINUOUS | OPT_INJECT | OPT_DRIFT | OPT_HANG |
	 OPT_GEMM_CHANGE,
	 WRITES_OUTPUTS | WRITES_ARTIFACTS,
	 "train to updates in a run directory [--continuous | --resume latest|DIR]",
	 "Trains from step 0 to [train] updates (or to a planned stop, [train] stop_at) in\n"
	 "a new run directory, <[run] artifacts>/runs/<id>/ (artifacts/NAME/runs/<id>/ by\n"
	 "default, NAME the configuration's): checkpoints, metrics.jsonl, train.json;\n"
	 "runs/latest names the latest run. --continuous ignores the planned\n"
	 "stop; --resume latest (or DIR) continues the newest valid checkpoint to updates\n"
	 "(raise train.updates to go further; optimizer keys may change, and are recorded).\n"
	 "[train] keep = K keeps a run's K newest checkpoints. SIGINT/SIGTERM checkpoint\n"
	 "and exit 8.",
	 "train --resume latest --set train.updates=200", 1, NULL},
	{"evaluate", cmd_evaluate, OPT_CHECKPOINT, 0,
	 "test and validation loss/accuracy of a checkpoint [--checkpoint DIR]",
	 "Test and validation loss (global token mean) and token accuracy of a checkpoint\n"
	 "(default: the newest valid one of the latest run), naming its run and step;\n"
	 "printed and written to evaluate.json.",
	 "evaluate --checkpoint artifacts/minimum/runs/latest", 0, NULL},
	{"export", cmd_export, OPT_CHECKPOINT | OPT_LLMC, 0,
	 "a gpt checkpoint as an llm.c GPT-2 model file --llmc FILE [--dtype bf16] or a Hugging "
	 "Face GPT-2 directory --hf DIR [--checkpoint DIR]",
	 "Writes a gpt checkpoint's weights (default: the newest valid one of the latest run)\n"
	 "in llm.c's GPT-2 model file format (float32, version 3; --dtype bf16: bfloat16,\n"
	 "version 5), which llm.c's trainer and [model] init = llmc:FILE start from, or as a\n"
	 "Hugging Face GPT-2 directory (--hf DIR: config.json and model.safetensors, float32),\n"
	 "which [model] init = hf:DIR starts from; files are replaced atomically (docs/gpt.md).",
	 "export --llmc gpt.bin", 0, "the checkpoint is process 0's, on its host"},
	{"sample", cmd_sample, OPT_CHECKPOINT | OPT_SAMPLE, 0,
	 "generate from a gpt checkpoint [--prompt TEXT] [--tokens N] [--temperature T] [--ids]",
	 "Generates --tokens tokens after a prompt (--prompt or --prompt-file) from a gpt\n"
	 "checkpoint (default: the newest valid one of the latest run), forward only on the\n"
	 "CPU: greedy with --temperature 0, else drawn among the --top-k most likely with\n"
	 "--seed (same seed, same tokens), after --top-p and --repetition-penalty, with a\n"
	 "cache of keys and values (--no-cache: the whole window per token); past\n"
	 "model.context the window slides; --stop-id ends the text. A model trained on text\n"
	 "(data.source = text) takes the prompt as text, encoded by [tokenizer], and prints\n"
	 "the prompt and what follows up to the first end-of-text; otherwise, or with --ids,\n"
	 "prompt and output are user ids. Printed with tokens/s, written to sample.json.",
	 "sample --prompt \"5 6 7\" --tokens 20 --temperature 0.8 --seed 1", 0,
	 "the checkpoint is process 0's, on its host"},
	{"tokenize", cmd_tokenize, OPT_TOKENIZE | OPT_OPERAND, 0,
	 "the ids of a text with [tokenizer] FILE [--decode | --bench]",
	 "Prints the ids of the text in FILE (- for standard input), whitespace-separated,\n"
	 "with the configuration's [tokenizer] alone (no corpus, no model). --decode reads\n"
	 "ids from FILE and prints their text; --bench times encoding FILE on one thread\n"
	 "and on every core (MB/s). Text that is not UTF-8 is refused naming the byte\n"
	 "(exit 5), or replaced with [data] invalid_utf8 = replace.",
	 "tokenize notes.txt", 0, "every process would print the same ids"},
	{"tokenizer-train", cmd_tokenizer_train, 0, 0,
	 "train a SentencePiece model on the text of [data] path",
	 "Trains a SentencePiece model ([tokenizer] train_type bpe or unigram, train_vocab\n"
	 "ids, byte fallback, no normalization) with the library's trainer on the documents\n"
	 "of [data] path (source = text) and writes it to [tokenizer] file (NAME.model,\n"
	 "with NAME.vocab beside it), replacing what was there.",
	 "tokenizer-train --set tokenizer.train_vocab=2000", 0,
	 "copies of it would write the same model"},
	{"checkpoints", cmd_checkpoints, 0, 0,
	 "verify every checkpoint under the artifacts directory",
	 "Verifies every checkpoint under [run] artifacts (manifest, sizes, digests, then its\n"
	 "content as a resume reads it); exits 1 if one is corrupt or unusable.",
	 "checkpoints", 0,
	 "the checkpoints are process 0's alone, on its host"},
	{"clean", cmd_clean, OPT_SCOPE | OPT_DRY_RUN, WRITES_OUTPUTS | WRITES_ARTIFACTS,
	 "remove what the program wrote [--scope generated|checkpoints|partial|all] [--dry-run]",
	 "Removes what the program wrote, and nothing else: generated outputs (default),\n"
	 "checkpoints, partial (interrupted writes) or all.",
	 "clean --scope all --dry-run", 0,
	 "processes that share a file system would remove the same files"},
	{"inspect", cmd_inspect, OPT_RESUME, WRITES_OUTPUTS | WRITES_ARTIFACTS,
	 "interactive step-by-step gradient inspection [--resume DIR]",
	 "Opens a ddptok> prompt to step through windows and look at the gradients (type\n"
	 "help there); reads commands from stdin when it is not a terminal, and such a\n"
	 "script that met a mistake exits with the first one's status (2 for usage).\n"
	 "SIGINT (Ctrl-C) stops a running step at the next window and, at the prompt,\n"
	 "drops the line typed so far; the session goes on. A second SIGINT within a\n"
	 "second, or SIGTERM, ends the session with exit status 8 (a further signal\n"
	 "while a step is stopping ends the process at once, as in train).",
	 "inspect --resume artifacts/checkpoints/step-0050", 1, "it is interactive"},
	{"bench", cmd_bench, OPT_WINDOWS | OPT_SWEEP, WRITES_OUTPUTS,
	 "training throughput, sgemm rate [--windows N] [--sweep]",
	 "Times training windows: throughput and FLOP rate against the machine's one-thread\n"
	 "sgemm rate (median of trials before and after the windows, with their range, and\n"
	 "W sgemms at once beside it), per wall-clock second and per CPU-second; names the\n"
	 "BLAS kernel and warns when it is narrower than the CPU; with --sweep, then the\n"
	 "same over the sizes the model declares (window_mlp: hidden = 512, 1024, 2048 by\n"
	 "vocab = 128, 4096; gpt: width = 256, 512, 768 by its vocab and 4096), at most N\n"
	 "windows, about 2 s each (minutes in all); last, exact mode against the default\n"
	 "mode, and batching by sequences against batching by tokens, on the same window.",
	 "bench --windows 20", 0,
	 "copies of it would share the cores they time"},
	{"env", cmd_env, OPT_CHECK | OPT_INJECT, 0, "backends, devices, versions [--check]",
	 "The build (the BLAS kernel, with a warning when it is narrower than the CPU), the\n"
	 "backends and devices visible, and what the configuration would use\n"
	 "(exit 0 even when it cannot run here). --check runs the configuration's device\n"
	 "plan: every rank's device, a kernel and a GEMM compared with the CPU, an allreduce\n"
	 "over the plan's collective; exit 10 naming the rank and the step that failed.",
	 "env --check", 0, NULL},
	{NULL, NULL, 0, 0, NULL, NULL, NULL, 0, NULL},
};

static const struct command *find_command(const char *name)
{
	for (const struct command *c = commands; c->name; c++)
		if (!strcmp(c->name, name))
			return c;
	return NULL;
}

static const char *command_name(int i)
{
	return commands[i].name;
}

static const char *option_name(int i)
{
	return options[i].name;
}

/* "ddptok-run: unknown command 'x'" with the nearest command, on stderr. */
static int unknown_command(const char *name)
{
	const char *best = app_nearest(name, command_name);
	if (strchr(name, '=') && strchr(name, '.')) /* SECTION.KEY=VALUE: a --set without it */
		fprintf(stderr, "ddptok-run: unknown command '%s' (a key is set with --set %s)\n",
			name, name);
	else if (best)
		fprintf(stderr, "ddptok-run: unknown command '%s' (did you mean '%s'?)\n", name, best);
	else
		fprintf(stderr, "ddptok-run: unknown command '%s' (see ddptok-run help)\n", name);
	return ERR_USAGE;
}

/* One option of the help: its spelling, then its text (continuation lines indented). */
static void print_option(FILE *f, const struct option_row *o)
{
	const char *t = o->help;
	fprintf(f, "  %-24s ", o->shown);
	for (const char *nl; (nl = strchr(t, '\n')); t = nl + 1)
		fprintf(f, "%.*s\n  %-24s ", (int)(nl - t), t, "");
	fprintf(f, "%s\n", t);
}

static void list_commands(FILE *f)
{
	for (const struct command *c = commands; c->name; c++)
		fprintf(f, "  %-12s %s\n", c->name, c->summary);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ddptok-run CONFIG [COMMAND] [OPTIONS]\n"
		"       ddptok-run help [COMMAND]\n"
		"\n"
		"Data-parallel training of a small token model on W devices with the exact\n"
		"mean loss over every supervised token of the accumulation window.\n"
		"\n"
		"commands:\n");
	list_commands(f);
	fprintf(f, "\noptions:\n");
	for (const struct option_row *o = options; o->name; o++)
		print_option(f, o);
	fprintf(f,
		"\n"
		"exit codes: 0 ok, 1 check failed, 2 usage, 3 configuration, 4 i/o, 5 data or\n"
		"checkpoint refused, 6 device/runtime, 7 empty window, 8 interrupted (a training\n"
		"run checkpoints first), 9 released because another rank failed, 10 env --check\n"
		"found a device that does not work, 11 out of memory, 12 non-finite (a loss,\n"
		"gradient or state went NaN or infinite; the last good checkpoint stays latest)\n"
		"\n"
		"ddptok-run help COMMAND (or CONFIG COMMAND --help) describes one command.\n");
}

/* The help of one command: usage, what it does, its options, an example. */
static void command_help(FILE *f, const struct command *c)
{
	fprintf(f, "usage: ddptok-run CONFIG %s%s", c->name, c->opts & OPT_OPERAND ? " FILE" : "");
	for (const struct option_row *o = options; o->name; o++)
		if (o->bit & c->opts)
			fprintf(f, " [%s]", o->shown);
	fprintf(f, " [--set SECTION.KEY=VALUE ...]\n\n%s\n\noptions:\n", c->about);
	for (const struct option_row *o = options; o->name; o++)
		if ((o->bit & c->opts) || o->val == 's' || o->val == 'h')
			print_option(f, o);
	fprintf(f, "\nexample:\n  ddptok-run configs/minimum.ini %s\n", c->example);
	if (c->one_process)
		fprintf(f, "\nOne process only: refused under mpirun or srun with more (exit 2),\n"
			"since %s.\n", c->one_process);
}

/* The configuration reference as a markdown table, generated from the key table; the
 * docs/configuration.md embeds this output and a test fails when the two drift apart. */
static void print_keys(void)
{
	printf("| key | type | default | allowed | math | meaning |\n");
	printf("|---|---|---|---|---|---|\n");
	for (const struct cfg_key *k = settings_keys; k->section; k++) {
		static const char *types[] = {"int", "float", "string", "enum", "bool"};
		char allowed[160] = "";
		if (k->type == CFG_INT)
			snprintf(allowed, sizeof allowed, "%.0f .. %.0f", k->min, k->max);
		else if (k->type == CFG_FLOAT)
			snprintf(allowed, sizeof allowed, "%s%g, %g%s", k->open & CFG_OPEN_MIN ? "(" : "[",
				 k->min, k->max, k->open & CFG_OPEN_MAX ? ")" : "]");
		else if (k->type == CFG_ENUM)
			snprintf(allowed, sizeof allowed, "%s", k->choices);
		else if (k->type == CFG_BOOL)
			snprintf(allowed, sizeof allowed, "true|false");
		for (char *c = allowed; *c; c++)
			if (*c == '|')
				*c = '/';
		printf("| `%s.%s` | %s | %s%s%s | %s | %s | %s |\n", k->section, k->name,
		       types[k->type], *k->def ? "`" : "", *k->def ? k->def : "(empty)",
		       *k->def ? "`" : "", allowed, k->flags & CFG_MATH ? "yes" : "no", k->doc);
	}
}

/* A plain base-10 integer: digits only (an optional '-'), no leading zero, no blanks,
 * no sign '+', within the range of long. */
static int parse_long(const char *s, long *out)
{
	char *end;
	const char *digits = s[0] == '-' ? s + 1 : s;
	if (*digits < '0' || *digits > '9' || (digits[0] == '0' && digits[1]))
		return -1;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (*end || errno == ERANGE)
		return -1;
	*out = v;
	return 0;
}

/* What the command line asks for. */
struct cli {
	struct app a;
	const char *sets[64];
	int nsets;
	unsigned used; /* OPT_* bits given */
	int help;      /* -h / --help, or the help command */
};

enum { CLI_RUN = -1 }; /* parse result: go on (else the exit status) */

/* --inject-hang R:W[:S] into o; CLI_RUN or ERR_USAGE. */
static int parse_hang(struct app_opts *o, char *arg)
{
	char *w_text = strchr(arg, ':'), *s_text = NULL, *end = NULL;
	long r, w;
	double seconds = -1.0;
	if (w_text)
		*w_text++ = '\0';
	if (w_text && (s_text = strchr(w_text, ':')))
		*s_text++ = '\0';
	if (s_text) {
		errno = 0;
		seconds = strtod(s_text, &end);
		if (end == s_text || *end || errno || !(seconds > 0 && seconds <= 86400))
			seconds = 0; /* refused below */
	}
	if (!w_text || parse_long(arg, &r) || parse_long(w_text, &w) || r < 0 || w < 1 ||
	    seconds == 0) {
		fprintf(stderr, "ddptok-run: --inject-hang needs RANK:WINDOW or RANK:WINDOW:SECONDS "
			"(rank from 0, window from 1, seconds in (0, 86400])\n");
		return ERR_USAGE;
	}
	o->fault.hang_rank = (int)r;
	o->fault.hang_window = w - 1; /* the engine counts windows from 0 */
	o->fault.hang_seconds = seconds;
	return CLI_RUN;
}

/* The value of a command-specific option into cli->a.o; CLI_RUN or ERR_USAGE. */
static int take_option(struct cli *cli, int val, char *arg)
{
	struct app_opts *o = &cli->a.o;
	switch (val) {
	case 'd': o->dump_dir = arg; break;
	case 'r': o->resume_dir = arg; break;
	case 'c': o->continuous = 1; break;
	case 'G': o->allow_gemm_change = 1; break;
	case 'k': o->checkpoint = arg; break;
	case 'L': o->llmc = arg; break;
	case 'p': o->prompt = arg; break;
	case 'f': o->prompt_file = arg; break;
	case 't': o->tokens = arg; break;
	case 'T': o->temperature = arg; break;
	case 'j': o->top_k = arg; break;
	case 'g': o->sample_seed = arg; break;
	case 1001: o->top_p = arg; break;
	case 1002: o->repetition_penalty = arg; break;
	case 1003: o->stop_id = arg; break;
	case 1004: o->no_cache = 1; break;
	case 1005: o->hf = arg; break;
	case 1006: o->dtype = arg; break;
	case 'S': o->scope = arg; break;
	case 'n': o->dry_run = 1; break;
	case 'I': o->ids = 1; break;
	case 'E': o->decode = 1; break;
	case 'B': o->bench = 1; break;
	case 'D': o->inject_drift = 1; break;
	case 'C': o->check = 1; break;
	case 'W': o->sweep = 1; break;
	case 'w':
		if (parse_long(arg, &o->windows) || o->windows < 1) {
			fprintf(stderr, "ddptok-run: --windows needs a positive integer, got '%s'\n",
				arg);
			return ERR_USAGE;
		}
		break;
	case 'X': {
		long r;
		if (parse_long(arg, &r) || r < 0) {
			fprintf(stderr, "ddptok-run: --inject-shard-swap needs a rank (from 0), got "
				"'%s'\n", arg);
			return ERR_USAGE;
		}
		o->fault.inject_swap_rank = (int)r;
		break;
	}
	case 'i': {
		char *colon = strchr(arg, ':');
		long r, w;
		if (!colon || (*colon = '\0', parse_long(arg, &r)) || parse_long(colon + 1, &w) ||
		    r < 0 || w < 1) {
			fprintf(stderr, "ddptok-run: --inject-failure needs RANK:WINDOW (rank from "
				"0, window from 1 as the commands number them)\n");
			return ERR_USAGE;
		}
		o->fault.inject_rank = (int)r;
		o->fault.inject_window = w - 1; /* the engine counts windows from 0 */
		break;
	}
	case 'H':
		return parse_hang(o, arg);
	}
	return CLI_RUN;
}

/* "unknown option '--contiuous' (did you mean '--continuous'?)" on stderr: the nearest
 * option name to what came before any '='. */
static void unknown_long_option(const char *arg)
{
	char name[64];
	snprintf(name, sizeof name, "%.*s", (int)strcspn(arg + 2, "="), arg + 2);
	const char *best = app_nearest(name, option_name);
	if (best)
		fprintf(stderr, "ddptok-run: unknown option '%s' (did you mean '--%s'?)\n", arg, best);
	else
		fprintf(stderr, "ddptok-run: unknown option '%s' (see --help)\n", arg);
}

/* An option that needs a value, given another option in its place ("--llmc --set K=V":
 * getopt takes "--set" as the file name): ERR_USAGE after saying so; else CLI_RUN. */
static int value_is_option(const struct option_row *o, const char *value)
{
	if (o->has_arg != required_argument || strncmp(value, "--", 2) != 0 || !value[2])
		return CLI_RUN;
	fprintf(stderr, "ddptok-run: option --%s needs a value, and '%s' is an option (give %s)\n",
		o->name, value, o->shown);
	return ERR_USAGE;
}

/* One option getopt returned (argv[at] holds it); CLI_RUN or the exit status. */
static int take(struct cli *cli, int c, char **argv, int at)
{
	for (const struct option_row *o = options; o->name; o++)
		if (o->val == c && optarg && value_is_option(o, optarg) != CLI_RUN)
			return ERR_USAGE;
	for (const struct option_row *o = options; o->name; o++)
		if (o->val == c && o->bit) {
			cli->used |= o->bit;
			return take_option(cli, c, optarg);
		}
	switch (c) {
	case 's':
		if (cli->nsets == (int)(sizeof cli->sets / sizeof cli->sets[0])) {
			fprintf(stderr, "ddptok-run: too many --set options\n");
			return ERR_USAGE;
		}
		cli->sets[cli->nsets++] = optarg;
		return CLI_RUN;
	case 'h':
		cli->help = 1;
		return CLI_RUN;
	case 'V':
		printf("ddptok-run %s (CUDA backend %s)\n", DDPTOK_VERSION,
		       DDPTOK_HAVE_CUDA ? "built" : "not built");
		return 0;
	case 'K':
		print_keys();
		return 0;
	case ':':
		fprintf(stderr, "ddptok-run: option '%s' needs a value\n", argv[at]);
		return ERR_USAGE;
	default:
		/* a long option is the whole element; a short one is a character of it */
		if (strncmp(argv[at], "--", 2) != 0 && optopt)
			fprintf(stderr, "ddptok-run: unknown option '-%c' (see --help)\n", optopt);
		else
			unknown_long_option(argv[at]);
		return ERR_USAGE;
	}
}

/* A positional argument: CONFIG, then COMMAND; "help" in either place asks for help (of
 * the COMMAND that follows, if any). */
static int positional(struct cli *cli, const char *arg)
{
	if (!cli->a.command && cli->help != 2 && !strcmp(arg, "help"))
		cli->help = 2; /* the next argument is the command */
	else if (!cli->a.config_path && cli->help != 2)
		cli->a.config_path = arg;
	else if (!cli->a.command)
		cli->a.command = arg;
	else if (!cli->a.o.operand)
		cli->a.o.operand = arg; /* refused below unless the command takes a FILE */
	else {
		fprintf(stderr, "ddptok-run: unexpected argument '%s'\n", arg);
		return ERR_USAGE;
	}
	return CLI_RUN;
}

static int parse_args(struct cli *cli, int argc, char **argv)
{
	struct option long_opts[sizeof options / sizeof options[0]];
	int n = 0, rc, only_positional = 0;
	for (const struct option_row *o = options; o->name; o++, n++)
		long_opts[n] = (struct option){o->name, o->has_arg, NULL, o->val};
	long_opts[n] = (struct option){NULL, 0, NULL, 0};
	opterr = 0;
	for (;;) {
		/* "--" ends the options: what follows is positional (getopt would skip past it
		 * and lose track of the positional arguments interleaved with options) */
		if (!only_positional && optind < argc && strcmp(argv[optind], "--") == 0) {
			only_positional = 1;
			optind++;
		}
		int at = optind; /* the element getopt examines (a short cluster keeps optind) */
		int c = only_positional ? -1 : getopt_long(argc, argv, "+:h", long_opts, NULL);
		if (c == -1 && optind >= argc)
			return CLI_RUN;
		rc = c == -1 ? positional(cli, argv[optind++]) : take(cli, c, argv, at);
		if (rc != CLI_RUN)
			return rc;
	}
}

/* Help asked for: the command's, or the global one. "ddptok-run train --help" (no
 * CONFIG) means the command too. */
static int print_help(const struct cli *cli)
{
	const char *name = cli->a.command;
	if (!name && cli->help == 1 && cli->a.config_path && find_command(cli->a.config_path))
		name = cli->a.config_path;
	if (!name || !strcmp(name, "help")) {
		usage(stdout);
		return 0;
	}
	const struct command *c = find_command(name);
	if (!c) {
		unknown_command(name);
		fprintf(stderr, "\ncommands:\n");
		list_commands(stderr);
		return ERR_USAGE;
	}
	command_help(stdout, c);
	return 0;
}

/* "ddptok-run train CONFIG": a command where the configuration goes, and no file of that
 * name. Says which order works; 1 if it did. */
static int words_swapped(const struct cli *cli)
{
	const char *first = cli->a.config_path, *second = cli->a.command;
	if (!find_command(first) || fsx_exists(first) || (second && find_command(second)))
		return 0;
	fprintf(stderr, "ddptok-run: '%s' is a command; the configuration comes first: "
		"ddptok-run %s %s\n", first, second ? second : "CONFIG", first);
	return 1;
}

/* The command named on the command line, with options it accepts; NULL after saying why. */
static const struct command *chosen_command(const struct cli *cli)
{
	if (words_swapped(cli))
		return NULL;
	const struct command *cmd = find_command(cli->a.command ? cli->a.command : "protocol");
	if (!cmd) {
		unknown_command(cli->a.command);
		return NULL;
	}
	if (cli->a.o.operand && !(cmd->opts & OPT_OPERAND)) {
		fprintf(stderr, "ddptok-run: unexpected argument '%s'\n", cli->a.o.operand);
		return NULL;
	}
	unsigned bad = cli->used & ~cmd->opts;
	for (const struct option_row *o = options; bad && o->name; o++)
		if (o->bit & bad) {
			fprintf(stderr, "ddptok-run: option --%s does not apply to '%s' (see "
				"ddptok-run help %s)\n", o->name, cmd->name, cmd->name);
			return NULL;
		}
	if ((cli->used & OPT_DRIFT) && !strcmp(cmd->name, "train") && !(cli->used & OPT_RESUME)) {
		fprintf(stderr, "ddptok-run: option --inject-drift applies to a resumed run: give "
			"train --resume DIR (or run the protocol)\n");
		return NULL;
	}
	if ((cli->used & OPT_INJECT) && !strcmp(cmd->name, "env") && !(cli->used & OPT_CHECK)) {
		fprintf(stderr, "ddptok-run: option --inject-failure applies to env --check only\n");
		return NULL;
	}
	return cmd;
}

/* Whether --set gave a key the model's checks read ([model], data.max_len): the origin
 * the configuration records for each value. */
static int sets_model_key(const struct cfg *c)
{
	for (int i = 0; i < c->n; i++)
		if (!strcmp(c->vals[i].origin, "--set") &&
		    (!strcmp(c->keys[i].section, "model") ||
		     (!strcmp(c->keys[i].section, "data") && !strcmp(c->keys[i].name, "max_len"))))
			return 1;
	return 0;
}

/* Whether cmd builds the configuration's model: clean and checkpoints read only its
 * [run] paths (a checkpoint is checked against its own config.ini), so a model key
 * that disagrees must not stop them. */
static int builds_model(const struct command *cmd)
{
	return cmd->fn != cmd_clean && cmd->fn != cmd_checkpoints && cmd->fn != cmd_tokenize &&
	       cmd->fn != cmd_tokenizer_train;
}

/* The configuration file, its --set overrides and the settings, checked: the model's
 * keys too, for a command that builds the model. */
static int load_configuration(struct cli *cli, const struct command *cmd, struct err *e)
{
	struct app *a = &cli->a;
	ERR_TRY(cfg_init(&a->cfg, settings_keys, e));
	ERR_TRY(cfg_load_file(&a->cfg, a->config_path, e));
	for (int i = 0; i < cli->nsets; i++)
		ERR_TRY(cfg_set(&a->cfg, cli->sets[i], e));
	/* what depends on the data source, so that config.ini records what ran */
	ERR_TRY(settings_for_source(&a->cfg, e));
	ERR_TRY(settings_microbatch_shape(&a->cfg, e));
	ERR_TRY(settings_from_cfg(&a->cfg, &a->s, e));
	/* the process's one GEMM implementation, before any device computes (the steps that
	 * make their own devices included) */
	ERR_TRY(gemm_select(a->s.gemm, NULL, 0, e));
	/* [model] kind names a known model and its keys agree (the gpt's heads divide its
	 * width, its context holds data.max_len; model.init's form fits the model): the
	 * registry sits above the settings, and a refusal here comes before any command has
	 * written anything */
	struct model_shape shape;
	struct gpt_init_source init;
	int rc = ERR_OK;
	if (builds_model(cmd) && (rc = model_shape_init(&shape, &a->s, e)) == ERR_OK)
		rc = gpt_init_source(&a->s, &shape, &init, e);
	if (rc == ERR_CONFIG) /* the keys come from this file, or from --set */
		err_prefix(e, "%s%s", a->cfg.path,
			   sets_model_key(&a->cfg) ? " (with --set values)" : "");
	if (rc)
		return rc;
	const struct fault_injection *f = &a->o.fault;
	if (f->inject_rank >= a->s.world)
		return ERR(e, ERR_USAGE, "--inject-failure %d:%lld: rank %d does not exist "
			   "(devices.world = %d)", f->inject_rank, (long long)f->inject_window + 1,
			   f->inject_rank, a->s.world);
	if (f->inject_swap_rank >= 0 &&
	    (a->s.shards <= 0 || f->inject_swap_rank >= a->s.world ||
	     a->s.shards / a->s.world < 4))
		return ERR(e, ERR_USAGE, "--inject-shard-swap %d: needs exact mode (train.shards), "
			   "a rank below devices.world = %d and at least 4 shards per rank (here "
			   "train.shards = %d)", f->inject_swap_rank, a->s.world, a->s.shards);
	if (f->hang_rank >= a->s.world)
		return ERR(e, ERR_USAGE, "--inject-hang %d:%lld: rank %d does not exist "
			   "(devices.world = %d)", f->hang_rank, (long long)f->hang_window + 1,
			   f->hang_rank, a->s.world);
	return ERR_OK;
}

/* "ddptok-run ARGS...": what a refused second writer is told holds the directory. */
static void command_line(int argc, char **argv, char *out, size_t outlen)
{
	size_t len = 0;
	out[0] = '\0';
	for (int i = 0; i < argc; i++) {
		int n = snprintf(out + len, outlen - len, "%s%s", i ? " " : "",
				 i ? argv[i] : "ddptok-run");
		if (n < 0 || (size_t)n >= outlen - len)
			break;
		len += (size_t)n;
	}
}

/* Locks the directories the command writes (created if need be, and removed again at the
 * end if they stay empty), for as long as this process runs (the kernel releases them when
 * it ends, even killed). A dry run writes nothing. */
static int lock_roots(const struct command *cmd, struct cli *cli, int argc, char **argv,
		      struct dirlock *locks, struct err *e)
{
	const struct settings *s = &cli->a.s;
	const struct {
		unsigned bit;
		const char *dir, *key;
	} roots[] = {
		{WRITES_OUTPUTS, s->outputs, "[run] outputs"},
		{WRITES_ARTIFACTS, s->artifacts, "[run] artifacts"},
	};
	char holder[512];
	if (cli->a.o.dry_run)
		return ERR_OK;
	command_line(argc, argv, holder, sizeof holder);
	for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
		if (!(cmd->writes & roots[i].bit))
			continue;
		if (roots[i].bit == WRITES_ARTIFACTS && world_get()->proc > 0)
			continue; /* process 0 writes the artifacts of a run, and holds their lock */
		ERR_TRY(dirlock_take(locks, roots[i].dir, roots[i].key, holder, e));
	}
	return ERR_OK;
}

/* A command that writes moves an earlier version's single-directory layout into this
 * configuration's directories when it is this configuration's (layout.h), and says so.
 * Process 0 alone, before any process writes there. */
static int adopt_old_layout(const struct command *cmd, struct app *a, struct err *e)
{
	struct layout_moved m;
	if (!(cmd->writes & (WRITES_OUTPUTS | WRITES_ARTIFACTS)) || a->o.dry_run ||
	    world_get()->proc > 0)
		return ERR_OK;
	ERR_TRY(layout_adopt_old(&a->cfg, &a->s, &m, e));
	if (m.moved)
		printf("layout: moved %s from %s and %s into %s and %s (one directory per "
		       "configuration)\n", m.names, m.old_outputs, m.old_artifacts, a->s.outputs,
		       a->s.artifacts);
	return ERR_OK;
}

/* Under mpirun, processes other than 0 write their outputs (reports, metrics) into
 * <outputs>/process-<p>; checkpoints are process 0's alone (train.c). */
static int process_outputs(struct app *a, struct err *e)
{
	const struct world *wd = world_get();
	char dir[sizeof a->s.outputs];
	if (wd->proc == 0)
		return ERR_OK;
	if (snprintf(dir, sizeof dir, "%s/process-%d", a->s.outputs, wd->proc) >= (int)sizeof dir)
		return ERR(e, ERR_CONFIG, "[run] outputs: %s is too long", a->s.outputs);
	memcpy(a->s.outputs, dir, sizeof dir);
	return ERR_OK;
}

/* Under mpirun only process 0 prints: the others write what they would print into
 * <outputs>/process-<p>/log.txt, which process 0 names first. Commands that write no
 * outputs keep their stdout (env shows each process's view; evaluate prints on process 0
 * only). Errors still go to every process's stderr. */
static int process_log(const struct command *cmd, struct app *a, struct err *e)
{
	const struct world *wd = world_get();
	char path[FSX_PATH_MAX];
	if (wd->procs == 1 || !(cmd->writes & WRITES_OUTPUTS))
		return ERR_OK;
	if (wd->proc == 0) {
		if (a->s.log_level >= ENV_INFO && wd->procs == 2)
			printf("log: process 1 writes its log to %s/process-1/log.txt\n", a->s.outputs);
		else if (a->s.log_level >= ENV_INFO)
			printf("log: processes 1..%d write their logs to %s/process-<p>/log.txt\n",
			       wd->procs - 1, a->s.outputs);
		return ERR_OK;
	}
	ERR_TRY(env_dir_ready(a->s.outputs, "[run] outputs", e));
	ERR_TRY(fsx_join(path, sizeof path, a->s.outputs, "log.txt", e));
	/* the launcher's stdout channel of this process stays open (a copy of the descriptor
	 * is kept for the life of the process): Open MPI's mpirun crashed relaying the
	 * abort of a process whose channel had been closed by the redirection */
	if (dup(STDOUT_FILENO) < 0)
		return ERR_ERRNO(e, "cannot keep this process's stdout channel");
	if (!freopen(path, "w", stdout))
		return ERR_ERRNO(e, "%s: cannot write this process's log", path);
	return ERR_OK;
}

/* A command that runs in one process only (its one_process says why) is refused by every
 * process alike when several were started, before it reads or writes anything. */
static int runs_in_these_processes(const struct command *cmd, struct err *e)
{
	int procs = world_get()->procs;
	if (!cmd->one_process || procs == 1)
		return ERR_OK;
	world_failed_together(); /* every process refuses alike, none ends the others */
	return ERR(e, ERR_USAGE, "%s runs in one process (here one of %d), since %s: run it "
		   "without mpirun or srun", cmd->name, procs, cmd->one_process);
}

/* Prints the error of a failed command; with several processes it names this one and,
 * unless all of them stopped together (an agreed interruption), ends the others: they
 * would wait for it in their next exchange. */
static void report_failure(const struct app *a, struct err *e)
{
	const struct world *wd = world_get();
	const char *kind = err_code_name(e->code);
	/* "interrupted by SIGINT ..." already says what kind of failure it is */
	int says_kind = strncmp(e->msg, kind, strlen(kind)) == 0;
	fprintf(stderr, "ddptok-run: %s%s%s%s%s\n", wd->procs > 1 ? world_proc_name(wd->proc) : "",
		wd->procs > 1 ? ": " : "", says_kind ? "" : kind, says_kind ? "" : ": ", e->msg);
	if (a->s.log_level >= 2 && e->file)
		fprintf(stderr, "  (at %s:%d)\n", e->file, e->line);
	if (e->code != ERR_INTERRUPTED)
		world_abort(e->code);
}

int main(int argc, char **argv)
{
	static struct cli cli;
	struct app *a = &cli.a;
	struct err e;
	const struct command *cmd;
	struct dirlock locks;
	int rc;

	err_clear(&e);
	dirlock_init(&locks);
	fault_injection_off(&a->o.fault);
	if ((rc = parse_args(&cli, argc, argv)) != CLI_RUN)
		return rc;
	if (cli.help)
		return print_help(&cli);
	if (!a->config_path) {
		usage(stderr);
		return ERR_USAGE;
	}
	if (!(cmd = chosen_command(&cli)))
		return ERR_USAGE;
	/* before any work: a signal while the configuration is read, the locks taken or a
	 * checkpoint verified stops the command as one during its run does */
	if (cmd->stoppable)
		cli_signals_hold();
	if ((rc = world_init(&argc, &argv, &e)) == ERR_OK &&
	    (rc = runs_in_these_processes(cmd, &e)) == ERR_OK &&
	    (rc = load_configuration(&cli, cmd, &e)) == ERR_OK &&
	    (rc = adopt_old_layout(cmd, a, &e)) == ERR_OK &&
	    (rc = process_outputs(a, &e)) == ERR_OK &&
	    (rc = lock_roots(cmd, &cli, argc, argv, &locks, &e)) == ERR_OK &&
	    (rc = process_log(cmd, a, &e)) == ERR_OK) {
		/* the protocol's steps print their own summaries: no progress lines in its log.
		 * mpirun hands its processes a pseudo-terminal whatever its own output is: a
		 * live line only in a process of one. What the shared code prints is prefixed
		 * by the command's name; in the protocol, by that of its training steps */
		int protocol = strcmp(cmd->name, "protocol") == 0;
		app_env_init(a, isatty(STDOUT_FILENO) && world_get()->procs == 1, !protocol,
			     protocol ? "train" : cmd->name);
		rc = cmd->fn(a, &e);
		app_progress_close(a);
	}
	fflush(stdout);
	if (rc != ERR_OK) {
		if (e.code == ERR_OK)
			ERR(&e, rc, "%s", err_code_name(rc));
		report_failure(a, &e);
	}
	world_finalize();
	if (cmd->stoppable)
		cli_signals_release();
	cfg_free(&a->cfg);
	dirlock_release(&locks);
	int status = rc == ERR_OK ? 0 : e.code;
	if (pool_abandoned_threads()) {
		/* The watchdog gave up on a device thread (stuck in a call that does not return):
		 * it cannot be joined and may still be inside BLAS or CUDA. exit() would run the
		 * libraries' destructors and atexit handlers beneath it, which can crash or wait
		 * for it, so the process ends here at once, with what it printed flushed. */
		fflush(NULL);
		_exit(status);
	}
	return status;
}
