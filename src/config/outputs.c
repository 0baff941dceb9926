/*
 * outputs: the table of output names (see outputs.h).
 */
#include "outputs.h"

#include <stddef.h>

static const char *const corpus_files[] = {OUTPUT_CORPUS_BIN, OUTPUT_DATA_LOCK, NULL};
static const char *const reference_files[] = {OUTPUT_REFERENCE_NPY, OUTPUT_REFERENCE_JSON, NULL};
static const char *const parity_files[] = {OUTPUT_DUMP_PARAMS, OUTPUT_DUMP_REFERENCE,
					   OUTPUT_DUMP_LAYOUT, OUTPUT_DUMP_ARRAY, OUTPUT_DUMP_REDUCED,
					   OUTPUT_DUMP_LOCAL, NULL};

const struct output outputs_table[OUT_COUNT] = {
	[OUT_CORPUS] = {"corpus", corpus_files, 0},
	[OUT_REFERENCE] = {"reference", reference_files, 0},
	[OUT_PARITY_DUMP] = {"parity", parity_files, 0},
	[OUT_CHECK_LOSS] = {"check-loss.json", NULL, 0},
	[OUT_PARITY] = {"parity.json", NULL, 0},
	[OUT_EXERCISE] = {"exercise.json", NULL, 0},
	[OUT_EVALUATE] = {"evaluate.json", NULL, 0},
	[OUT_SAMPLE] = {"sample.json", NULL, 0},
	[OUT_BENCH] = {"bench.json", NULL, 0},
	[OUT_CHECKPOINTS] = {"checkpoints.json", NULL, 0},
	[OUT_TRAIN_STOP] = {"train-stop.json", NULL, 0},
	[OUT_TRAIN_CONTINUOUS] = {"train-continuous.json", NULL, 0},
	[OUT_TRAIN_RESUME] = {"train-resume.json", NULL, 0},
	[OUT_METRICS_STOP] = {"train-stop.jsonl", NULL, 0},
	[OUT_METRICS_CONTINUOUS] = {"train-continuous.jsonl", NULL, 0},
	[OUT_METRICS_RESUME] = {"train-resume.jsonl", NULL, 0},
	[OUT_REPORT_MD] = {"report.md", NULL, 1},
	[OUT_REPORT_JSON] = {"report.json", NULL, 1},
	[OUT_FIGURE_PNG] = {"figure.png", NULL, 1},
	[OUT_FIGURE_SVG] = {"figure.svg", NULL, 1},
};

const char *output_run_name(int kind)
{
	static const char *const names[3] = {"stop", "continuous", "resume"};
	return kind >= 0 && kind < 3 ? names[kind] : "?";
}

const char *const artifacts_table[ART_COUNT] = {
	[ART_CHECKPOINTS] = "checkpoints",
	[ART_CONTINUOUS] = "continuous",
	[ART_INSPECT] = "inspect",
	[ART_RUNS] = "runs",
};
