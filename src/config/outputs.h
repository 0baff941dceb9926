/*
 * outputs: the names of everything the program writes into [run] outputs, in one table.
 *
 * The writers take their file names from it, and `clean` removes what it lists and nothing
 * else; a name the program writes but this table misses would be left by `clean`, a name
 * the table holds but nothing writes would be removed from a user's directory.
 */
#ifndef DDPTOK_OUTPUTS_H
#define DDPTOK_OUTPUTS_H

enum output_id {
	OUT_CORPUS,           /* dir: prepare, and every command that needs the corpus */
	OUT_REFERENCE,        /* dir: reference */
	OUT_PARITY_DUMP,      /* dir: the protocol's parity step (what parity --dump DIR writes) */
	OUT_CHECK_LOSS,
	OUT_PARITY,
	OUT_EXERCISE,
	OUT_EVALUATE,
	OUT_BENCH,
	OUT_CHECKPOINTS,
	OUT_TRAIN_STOP,       /* train summaries, by enum train_kind */
	OUT_TRAIN_CONTINUOUS,
	OUT_TRAIN_RESUME,
	OUT_METRICS_STOP,     /* per-window metrics (JSONL), by enum train_kind */
	OUT_METRICS_CONTINUOUS,
	OUT_METRICS_RESUME,
	OUT_REPORT_MD,
	OUT_REPORT_JSON,
	OUT_FIGURE_PNG,       /* tools/plot.py, run by the protocol */
	OUT_FIGURE_SVG,
	OUT_SAMPLE,           /* sample */
	OUT_COUNT
};

struct output {
	const char *name;          /* in [run] outputs */
	const char *const *inside; /* a directory: the names written in it (OUTPUT_* below);
				      NULL: a file */
	int verdict;               /* part of the protocol's verdict (report, figure): removed
				      before a protocol starts, so no old verdict outlives it */
};

extern const struct output outputs_table[OUT_COUNT];

/* Shorthands for the names. */
static inline const char *output_name(enum output_id id)
{
	return outputs_table[id].name;
}

/* What is written inside those directories, as printf formats where the name varies (%d a
 * rank or a microbatch, %s a normalization); `clean` reads each conversion as any text. */
#define OUTPUT_CORPUS_BIN "corpus.bin"         /* in OUT_CORPUS */
#define OUTPUT_DATA_LOCK "data.lock"
#define OUTPUT_REFERENCE_NPY "reference.npy"   /* in OUT_REFERENCE */
#define OUTPUT_REFERENCE_JSON "reference.json"
#define OUTPUT_DUMP_PARAMS "params.npy"        /* in OUT_PARITY_DUMP (parity --dump DIR) */
#define OUTPUT_DUMP_REFERENCE "reference.npy"
#define OUTPUT_DUMP_LAYOUT "layout.json"
/* each array of a microbatch's batch, %s its name in the model's batch_arrays (inputs,
 * targets; the gpt's positions and segments too) */
#define OUTPUT_DUMP_ARRAY "rank%d-micro%d-%s.npy"
#define OUTPUT_DUMP_REDUCED "reduced-%s.npy"
#define OUTPUT_DUMP_LOCAL "rank%d-local-%s.npy"

/* The names of the three training runs (enum train_kind), as their files and the reports
 * spell them: "stop", "continuous", "resume". */
const char *output_run_name(int kind);

/* The directories of checkpoints the program writes under [run] artifacts; `checkpoints`
 * verifies them (and any other directory of checkpoints there), `clean` cleans them. */
enum artifact_id {
	ART_CHECKPOINTS, /* train and its resumed runs */
	ART_CONTINUOUS,  /* train --continuous */
	ART_INSPECT,     /* inspect's save */
	ART_RUNS,        /* train's run directories (train_runs.h): each a directory of
			    checkpoints holding also the files of OUTPUT_RUN_FILES; and the
			    link `latest` */
	ART_COUNT
};

/* What a run directory holds besides its checkpoints (train_runs.h). */
#define OUTPUT_RUN_METRICS "metrics.jsonl" /* one line per window */
#define OUTPUT_RUN_SUMMARY "train.json"     /* the summary of the run's last session */
#define OUTPUT_RUN_FILES {OUTPUT_RUN_METRICS, OUTPUT_RUN_SUMMARY, NULL}
#define OUTPUT_RUNS_LATEST "latest"

extern const char *const artifacts_table[ART_COUNT];

#endif
