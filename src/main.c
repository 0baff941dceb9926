/*
 * ddptok-run: the command-line entry point.
 *
 *   ddptok-run CONFIG [COMMAND] [OPTIONS]
 *
 * Parses the command line, loads and validates the configuration (with --set
 * overrides), dispatches to the command, prints the error of a failed command on stderr
 * and exits with the code of that error (README "Exit codes"). Only this file exits.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app.h"
#include "ddptok_config.h"

struct command {
	const char *name;
	int (*fn)(struct app *a, struct err *e);
	unsigned opts; /* allowed command-specific options (OPT_* bits) */
	const char *help;
};

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
	OPT_COUNT = 9,
};
/* the option of each OPT_* bit, for messages */
static const char *const opt_names[OPT_COUNT] = {
	"--dump",   "--resume",  "--continuous",     "--checkpoint",  "--scope",
	"--dry-run", "--windows", "--inject-failure", "--inject-drift",
};

static const struct command commands[] = {
	{"protocol", cmd_protocol, OPT_INJECT | OPT_DRIFT,
	 "the whole protocol (default): prepare, check-loss, reference, parity, exercise, "
	 "empty-window, train stop/continuous/resume, evaluate, figure, report"},
	{"prepare", cmd_prepare, 0, "build the corpus and write it with its data lock"},
	{"check-loss", cmd_check_loss, 0, "the 12/36 counterexample: mean of means 2, global mean 2.5"},
	{"reference", cmd_reference, 0, "single-device gradient of window 1 (.npy + JSON summary)"},
	{"parity", cmd_parity, OPT_DUMP | OPT_INJECT,
	 "W-device gradient per normalization against the reference [--dump DIR]"},
	{"exercise", cmd_exercise, 0, "rank 1 goes from 12 to 36 tokens: both means and gradients"},
	{"train", cmd_train, OPT_RESUME | OPT_CONTINUOUS | OPT_INJECT | OPT_DRIFT,
	 "train to stop_at and checkpoint [--continuous | --resume DIR]"},
	{"evaluate", cmd_evaluate, OPT_CHECKPOINT,
	 "test and validation loss/accuracy of a checkpoint [--checkpoint DIR]"},
	{"checkpoints", cmd_checkpoints, 0, "verify every checkpoint under the artifacts directory"},
	{"clean", cmd_clean, OPT_SCOPE | OPT_DRY_RUN,
	 "remove what the program wrote [--scope generated|checkpoints|partial|all] [--dry-run]"},
	{"inspect", cmd_inspect, OPT_RESUME, "interactive step-by-step gradient inspection [--resume DIR]"},
	{"bench", cmd_bench, OPT_WINDOWS, "training throughput and sgemm rate [--windows N]"},
	{"env", cmd_env, 0, "backends, devices, versions"},
	{NULL, NULL, 0, NULL},
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ddptok-run CONFIG [COMMAND] [OPTIONS]\n"
		"\n"
		"Data-parallel training of a small token model on W devices with the exact\n"
		"mean loss over every supervised token of the accumulation window.\n"
		"\n"
		"commands:\n");
	for (const struct command *c = commands; c->name; c++)
		fprintf(f, "  %-12s %s\n", c->name, c->help);
	fprintf(f,
		"\n"
		"options:\n"
		"  --set SECTION.KEY=VALUE  override a configuration key (repeatable)\n"
		"  --dump DIR               parity: write parameters, batches and gradients as .npy\n"
		"  --resume DIR             train/inspect: continue from a checkpoint directory\n"
		"  --continuous             train: run 0 -> updates without stopping\n"
		"  --checkpoint DIR         evaluate: the checkpoint to evaluate (default: the newest\n"
		"                           valid one of checkpoints/ and continuous/)\n"
		"  --scope S                clean: generated, checkpoints, partial or all (default generated)\n"
		"  --dry-run                clean: list what would be removed\n"
		"  --windows N              bench: number of windows to time\n"
		"  --inject-failure R:W     testing aid: rank R (from 0) fails at window W (from 1)\n"
		"  --inject-drift           testing aid: a resumed run starts with the last bit of\n"
		"                           parameter 0 flipped (the resume check must catch it)\n"
		"  -h, --help               this help\n"
		"  --version                print the version\n"
		"  --keys                   print the configuration reference (markdown)\n"
		"\n"
		"exit codes: 0 ok, 1 check failed, 2 usage, 3 configuration, 4 i/o, 5 data or\n"
		"checkpoint refused, 6 device/runtime, 7 empty window, 8 interrupted (checkpointed),\n"
		"9 released because another rank failed\n");
}

/* The configuration reference as a markdown table, generated from the key table; the
 * README embeds this output and a test fails when the two drift apart. */
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
		printf("| `%s.%s` | %s | %s%s%s | %s | %s | %s |\n", k->section, k->name, types[k->type],
		       *k->def ? "`" : "", *k->def ? k->def : "(empty)", *k->def ? "`" : "", allowed, k->flags & CFG_MATH ? "yes" : "no", k->doc);
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

int main(int argc, char **argv)
{
	static const struct option long_opts[] = {
		{"set", required_argument, NULL, 's'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{"keys", no_argument, NULL, 'K'},
		{"dump", required_argument, NULL, 'd'},
		{"resume", required_argument, NULL, 'r'},
		{"continuous", no_argument, NULL, 'c'},
		{"checkpoint", required_argument, NULL, 'k'},
		{"scope", required_argument, NULL, 'S'},
		{"dry-run", no_argument, NULL, 'n'},
		{"windows", required_argument, NULL, 'w'},
		{"inject-failure", required_argument, NULL, 'i'},
		{"inject-drift", no_argument, NULL, 'D'},
		{NULL, 0, NULL, 0},
	};
	struct app a;
	struct err e;
	const char *sets[64];
	int nsets = 0;
	unsigned used = 0;
	int rc;

	memset(&a, 0, sizeof a);
	err_clear(&e);
	a.o.inject_rank = -1;
	a.o.inject_window = -1;
	opterr = 0;
	int c, only_positional = 0;
	for (;;) {
		/* "--" ends the options: what follows is positional (getopt would skip past it
		 * and lose track of the positional arguments interleaved with options) */
		if (!only_positional && optind < argc && strcmp(argv[optind], "--") == 0) {
			only_positional = 1;
			optind++;
		}
		int at = optind; /* the element getopt examines (a short cluster keeps optind) */
		c = only_positional ? -1 : getopt_long(argc, argv, "+:h", long_opts, NULL);
		if (c == -1 && optind >= argc)
			break;
		if (c == -1) {
			/* a positional argument: CONFIG, then COMMAND */
			if (!a.config_path)
				a.config_path = argv[optind];
			else if (!a.command)
				a.command = argv[optind];
			else {
				fprintf(stderr, "ddptok-run: unexpected argument '%s'\n", argv[optind]);
				return ERR_USAGE;
			}
			optind++;
			continue;
		}
		switch (c) {
		case 's':
			if (nsets == 64) {
				fprintf(stderr, "ddptok-run: too many --set options\n");
				return ERR_USAGE;
			}
			sets[nsets++] = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("ddptok-run %s (CUDA backend %s)\n", DDPTOK_VERSION,
			       DDPTOK_HAVE_CUDA ? "built" : "not built");
			return 0;
		case 'K':
			print_keys();
			return 0;
		case 'd': a.o.dump_dir = optarg; used |= OPT_DUMP; break;
		case 'r': a.o.resume_dir = optarg; used |= OPT_RESUME; break;
		case 'c': a.o.continuous = 1; used |= OPT_CONTINUOUS; break;
		case 'k': a.o.checkpoint = optarg; used |= OPT_CHECKPOINT; break;
		case 'S': a.o.scope = optarg; used |= OPT_SCOPE; break;
		case 'n': a.o.dry_run = 1; used |= OPT_DRY_RUN; break;
		case 'w':
			if (parse_long(optarg, &a.o.windows) || a.o.windows < 1) {
				fprintf(stderr, "ddptok-run: --windows needs a positive integer, got '%s'\n",
					optarg);
				return ERR_USAGE;
			}
			used |= OPT_WINDOWS;
			break;
		case 'i': {
			char *colon = strchr(optarg, ':');
			long r, w;
			if (!colon || (*colon = '\0', parse_long(optarg, &r)) || parse_long(colon + 1, &w) ||
			    r < 0 || w < 1) {
				fprintf(stderr, "ddptok-run: --inject-failure needs RANK:WINDOW (rank from "
					"0, window from 1 as the commands number them)\n");
				return ERR_USAGE;
			}
			a.o.inject_rank = (int)r;
			a.o.inject_window = w - 1; /* the engine counts windows from 0 */
			used |= OPT_INJECT;
			break;
		}
		case 'D':
			a.o.inject_drift = 1;
			used |= OPT_DRIFT;
			break;
		case ':':
			fprintf(stderr, "ddptok-run: option '%s' needs a value\n", argv[at]);
			return ERR_USAGE;
		default:
			/* a long option is the whole element; a short one is a character of it */
			if (strncmp(argv[at], "--", 2) != 0 && optopt)
				fprintf(stderr, "ddptok-run: unknown option '-%c' (see --help)\n", optopt);
			else
				fprintf(stderr, "ddptok-run: unknown option '%s' (see --help)\n",
					argv[at]);
			return ERR_USAGE;
		}
	}
	if (!a.config_path) {
		usage(stderr);
		return ERR_USAGE;
	}
	if (!a.command)
		a.command = "protocol";
	const struct command *cmd = NULL;
	for (const struct command *k = commands; k->name; k++)
		if (!strcmp(k->name, a.command))
			cmd = k;
	if (!cmd) {
		fprintf(stderr, "ddptok-run: unknown command '%s' (see --help)\n", a.command);
		return ERR_USAGE;
	}
	if (used & ~cmd->opts) {
		unsigned bad = used & ~cmd->opts;
		int k = 0;
		while (!(bad & (1u << k)))
			k++;
		fprintf(stderr, "ddptok-run: option %s does not apply to '%s' (see --help)\n",
			opt_names[k], cmd->name);
		return ERR_USAGE;
	}
	if ((used & OPT_DRIFT) && !strcmp(cmd->name, "train") && !(used & OPT_RESUME)) {
		fprintf(stderr, "ddptok-run: option --inject-drift applies to a resumed run: give "
			"train --resume DIR (or run the protocol)\n");
		return ERR_USAGE;
	}

	if ((rc = cfg_init(&a.cfg, settings_keys, &e)) != ERR_OK)
		goto fail;
	if ((rc = cfg_load_file(&a.cfg, a.config_path, &e)) != ERR_OK)
		goto fail;
	for (int i = 0; i < nsets; i++)
		if ((rc = cfg_set(&a.cfg, sets[i], &e)) != ERR_OK)
			goto fail;
	if ((rc = settings_from_cfg(&a.cfg, &a.s, &e)) != ERR_OK)
		goto fail;
	if (a.o.inject_rank >= a.s.world) {
		rc = ERR(&e, ERR_USAGE, "--inject-failure %d:%ld: rank %d does not exist (devices.world "
			 "= %d)", a.o.inject_rank, a.o.inject_window + 1, a.o.inject_rank, a.s.world);
		goto fail;
	}
	app_env_init(&a, isatty(STDOUT_FILENO));

	rc = cmd->fn(&a, &e);
	app_progress_close(&a);
	if (rc != ERR_OK)
		goto fail;
	cfg_free(&a.cfg);
	return 0;
fail:
	fflush(stdout);
	if (e.code == ERR_OK)
		ERR(&e, rc, "%s", err_code_name(rc));
	fprintf(stderr, "ddptok-run: %s: %s\n", err_code_name(e.code), e.msg);
	if (a.s.log_level >= 2 && e.file)
		fprintf(stderr, "  (at %s:%d)\n", e.file, e.line);
	cfg_free(&a.cfg);
	return e.code;
}
