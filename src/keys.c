/*
 * keys: the one table of configuration keys, and its typed view (struct settings).
 *
 * Every key the program reads is declared here once: section, name, type, default,
 * range or choices, whether it changes the computation (a resumed run refuses to change
 * such a key) and one doc line. runtime/config.c validates each value against this
 * table; settings_from_cfg() then copies the values into struct settings and checks the
 * relations between keys that a per-key range cannot express.
 */
#include "settings.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "coll.h"

/* Enum choices, in the order of the C enums they map to (index = enum value). */
#define CHOICES_LOG "quiet|info|debug"
#define CHOICES_LAYOUT "packed|padded"
#define CHOICES_NORM "global_token|mean_of_means|microbatch_mean|double_accumulation"
#define CHOICES_PLAN "length_bands|balanced"
#define CHOICES_EMPTY "skip|error"
#define CHOICES_BACKEND "auto|cpu|cuda"
#define CHOICES_REDUCE "sum|avg"
#define CHOICES_COLLECTIVE "auto|host|nccl"

#define INT_KEY(sec, key, dflt, lo, hi, m, text) \
	{ .section = sec, .name = key, .type = CFG_INT, .def = dflt, .min = lo, .max = hi, \
	  .math = m, .doc = text }
#define FLOAT_KEY(sec, key, dflt, lo, hi, opn, m, text) \
	{ .section = sec, .name = key, .type = CFG_FLOAT, .def = dflt, .min = lo, .max = hi, \
	  .open = opn, .math = m, .doc = text }
#define ENUM_KEY(sec, key, dflt, ch, m, text) \
	{ .section = sec, .name = key, .type = CFG_ENUM, .def = dflt, .choices = ch, \
	  .math = m, .doc = text }
#define STRING_KEY(sec, key, dflt, m, text) \
	{ .section = sec, .name = key, .type = CFG_STRING, .def = dflt, .math = m, .doc = text }

const struct cfg_key settings_keys[] = {
	/* [run] */
	INT_KEY("run", "seed", "1234", 0, 2147483647.0, 1,
		"seed of every random draw: corpus, initial weights, sampler"),
	STRING_KEY("run", "outputs", "outputs", 0,
		   "directory for the prepared corpus and its data lock, reports, metrics (JSON/JSONL) and .npy tensors"),
	STRING_KEY("run", "artifacts", "artifacts", 0,
		   "directory for checkpoints: checkpoints/ (train and its resumed runs), "
		   "continuous/ (train --continuous) and inspect/ (inspect's save)"),
	ENUM_KEY("run", "log_level", "info", CHOICES_LOG, 0,
		 "terminal verbosity: quiet, info or debug"),

	/* [data] */
	INT_KEY("data", "train", "1024", 1, 100000, 1, "number of training sequences"),
	INT_KEY("data", "validation", "128", 1, 100000, 1, "number of validation sequences"),
	INT_KEY("data", "test", "256", 1, 100000, 1, "number of test sequences"),
	INT_KEY("data", "min_len", "16", 2, 4096, 1, "shortest sequence length, in tokens"),
	INT_KEY("data", "max_len", "128", 2, 4096, 1, "longest sequence length, in tokens"),
	INT_KEY("data", "vocab", "128", 8, 4096, 1,
		"vocabulary size, reserved ids included"),
	INT_KEY("data", "prefix_max", "0", 0, 4095, 1,
		"longest unsupervised prompt; each sequence draws its prompt length uniformly "
		"in [0, prefix_max] (must be < min_len)"),
	INT_KEY("data", "branching", "4", 1, 64, 1,
		"successors per state of the Markov source that generates the corpus"),

	/* [model] */
	INT_KEY("model", "context", "8", 1, 64, 1, "tokens of left context seen by the model"),
	INT_KEY("model", "embed", "32", 1, 1024, 1, "embedding width per token"),
	INT_KEY("model", "hidden", "512", 1, 8192, 1, "hidden layer width"),
	ENUM_KEY("model", "layout", "packed", CHOICES_LAYOUT, 1,
		 "microbatch layout: packed (supervised positions only) or padded to max_len"),

	/* [train] */
	/* updates and stop_at only say where a run ends: no window's computation depends
	 * on them (the sampler, the model and the optimizer never read them), so a resume
	 * may continue a run to another length */
	INT_KEY("train", "updates", "100", 1, 1000000, 0,
		"optimizer steps (accumulation windows) of a full run"),
	INT_KEY("train", "stop_at", "50", 1, 1000000, 0,
		"step at which the interrupted run stops and checkpoints (must be < updates)"),
	INT_KEY("train", "accumulation", "2", 1, 64, 1,
		"microbatches per rank per accumulation window"),
	INT_KEY("train", "batch_size", "8", 1, 4096, 1,
		"sequences per rank per microbatch"),
	FLOAT_KEY("train", "lr", "0.2", 0, 10, CFG_OPEN_MIN, 1, "SGD learning rate"),
	FLOAT_KEY("train", "momentum", "0.9", 0, 1, CFG_OPEN_MAX, 1, "SGD momentum"),
	FLOAT_KEY("train", "weight_decay", "0", 0, 1, 0, 1,
		  "L2 weight decay added to the gradient"),
	ENUM_KEY("train", "normalization", "global_token", CHOICES_NORM, 1,
		 "loss normalization; only global_token is correct, the others are kept as "
		 "negative controls"),
	ENUM_KEY("train", "plan", "length_bands", CHOICES_PLAN, 1,
		 "how a window is split over ranks: length_bands (by length) or balanced "
		 "(by token count)"),
	ENUM_KEY("train", "empty_window", "error", CHOICES_EMPTY, 1,
		 "what a window without supervised tokens does: skip it or stop with an error"),
	INT_KEY("train", "checkpoint_every", "0", 0, 1000000, 0,
		"checkpoint every this many steps (0: only at stop_at, the end or a signal)"),

	/* [devices] */
	INT_KEY("devices", "world", "2", 1, 8, 1, "number of data-parallel ranks (devices)"),
	ENUM_KEY("devices", "backend", "auto", CHOICES_BACKEND, 0,
		 "device backend: auto (cuda when a GPU is visible), cpu or cuda"),
	ENUM_KEY("devices", "reduce", "avg", CHOICES_REDUCE, 1,
		 "gradient collective: sum or avg (the loss scale follows it)"),
	ENUM_KEY("devices", "collective", "auto", CHOICES_COLLECTIVE, 0,
		 "collective implementation: auto, host or nccl"),
	STRING_KEY("devices", "ids", "", 0,
		   "comma-separated GPU ordinals, one per rank (empty: the first `world`)"),
	FLOAT_KEY("devices", "timeout", "120", 0, 86400, 0, 0,
		  "seconds a rank waits at a barrier or collective before failing (0: forever)"),

	/* [parity] */
	FLOAT_KEY("parity", "atol", "1e-6", 0, 1, 0, 0,
		  "absolute tolerance of the gradient parity comparisons (resume equality is exact)"),
	FLOAT_KEY("parity", "rtol", "1e-4", 0, 1, 0, 0,
		  "relative tolerance of the gradient parity comparisons"),

	/* [exercise] */
	INT_KEY("exercise", "short", "12", 1, 4096, 0,
		"exercise: supervised tokens of rank 0 (the short rank) in both windows"),
	INT_KEY("exercise", "long_before", "12", 1, 4096, 0,
		"exercise: supervised tokens of rank 1 in the first (balanced) window"),
	INT_KEY("exercise", "long_after", "36", 1, 4096, 0,
		"exercise: supervised tokens of rank 1 in the second (imbalanced) window"),

	{ NULL },
};

static const char *const norm_names[NORM_COUNT] = {
	[NORM_GLOBAL_TOKEN] = "global_token",
	[NORM_MEAN_OF_MEANS] = "mean_of_means",
	[NORM_MICROBATCH_MEAN] = "microbatch_mean",
	[NORM_DOUBLE_ACCUM] = "double_accumulation",
};

const char *norm_mode_name(int mode)
{
	if (mode < 0 || mode >= NORM_COUNT)
		return "invalid";
	return norm_names[mode];
}

int norm_mode_parse(const char *name)
{
	if (!name)
		return -1;
	for (int i = 0; i < NORM_COUNT; i++)
		if (strcmp(name, norm_names[i]) == 0)
			return i;
	return -1;
}

/* ------------------------------------------------------------------ relations */

static const char *cfg_where(const struct cfg *c)
{
	return c->path[0] ? c->path : "configuration defaults";
}

/* Where a key's value came from, for the front of a message: the file, or the file and
 * the other origin (e.g. "--set") when the value was given there. */
static const char *key_where(const struct cfg *c, const char *sec, const char *name)
{
	static _Thread_local char buf[1200];
	for (int i = 0; i < c->n; i++)
		if (!strcmp(c->keys[i].section, sec) && !strcmp(c->keys[i].name, name)) {
			const char *o = c->vals[i].origin;
			if (o[0] && strncmp(o, cfg_where(c), sizeof c->vals[i].origin - 1) != 0) {
				snprintf(buf, sizeof buf, "%s (value from %s)", cfg_where(c), o);
				return buf;
			}
			break;
		}
	return cfg_where(c);
}

/* "[sec] name = value" plus " (from ORIGIN)" when the value did not come from the
 * file named at the front of the message. */
static void describe(const struct cfg *c, const char *sec, const char *name, char *out,
		     size_t outlen)
{
	int i;
	for (i = 0; i < c->n; i++)
		if (strcmp(c->keys[i].section, sec) == 0 && strcmp(c->keys[i].name, name) == 0)
			break;
	if (i == c->n) {
		snprintf(out, outlen, "[%s] %s", sec, name);
		return;
	}
	const struct cfg_value *v = &c->vals[i];
	if (strncmp(v->origin, cfg_where(c), sizeof v->origin - 1) != 0)
		snprintf(out, outlen, "[%s] %s = %s (from %s)", sec, name, v->text, v->origin);
	else
		snprintf(out, outlen, "[%s] %s = %s", sec, name, v->text);
}

static int relation_error(const struct cfg *c, struct err *e, const char *sa, const char *ka,
			  const char *relation, const char *sb, const char *kb)
{
	char da[400], db[400];
	describe(c, sa, ka, da, sizeof da);
	describe(c, sb, kb, db, sizeof db);
	return ERR(e, ERR_CONFIG, "%s: %s must be %s %s", cfg_where(c), da, relation, db);
}

/* "0,1, 3" -> ids[]; strict non-negative base-10 integers, at most `cap` of them. */
static int parse_ids(const struct cfg *c, const char *text, int *ids, int cap, int *n_out,
		     struct err *e)
{
	const char *p = text;
	int n = 0;

	*n_out = 0;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '\0')
		return ERR_OK;
	for (;;) {
		long long v = 0;
		const char *start;
		while (*p == ' ' || *p == '\t')
			p++;
		start = p;
		while (*p >= '0' && *p <= '9') {
			v = v * 10 + (*p - '0');
			if (v > INT_MAX)
				return ERR(e, ERR_CONFIG, "%s: [devices] ids = %s: ordinal too large",
					   key_where(c, "devices", "ids"), text);
			p++;
		}
		if (p == start || (*start == '0' && p - start > 1))
			return ERR(e, ERR_CONFIG, "%s: [devices] ids = %s: expected comma-separated "
				   "non-negative integers (no leading zeros)", key_where(c, "devices", "ids"), text);
		if (n == cap)
			return ERR(e, ERR_CONFIG, "%s: [devices] ids = %s: at most %d ordinals",
				   key_where(c, "devices", "ids"), text, cap);
		ids[n++] = (int)v;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0')
			break;
		if (*p != ',')
			return ERR(e, ERR_CONFIG, "%s: [devices] ids = %s: expected comma-separated "
				   "non-negative integers", key_where(c, "devices", "ids"), text);
		p++;
	}
	*n_out = n;
	return ERR_OK;
}

int settings_from_cfg(const struct cfg *c, struct settings *s, struct err *e)
{
	memset(s, 0, sizeof *s);

	s->seed = (unsigned long long)cfg_int(c, "run", "seed");
	snprintf(s->outputs, sizeof s->outputs, "%s", cfg_str(c, "run", "outputs"));
	snprintf(s->artifacts, sizeof s->artifacts, "%s", cfg_str(c, "run", "artifacts"));
	s->log_level = cfg_enum(c, "run", "log_level");

	s->train_count = (int)cfg_int(c, "data", "train");
	s->validation_count = (int)cfg_int(c, "data", "validation");
	s->test_count = (int)cfg_int(c, "data", "test");
	s->min_len = (int)cfg_int(c, "data", "min_len");
	s->max_len = (int)cfg_int(c, "data", "max_len");
	s->vocab = (int)cfg_int(c, "data", "vocab");
	s->prefix_max = (int)cfg_int(c, "data", "prefix_max");
	s->branching = (int)cfg_int(c, "data", "branching");

	s->context = (int)cfg_int(c, "model", "context");
	s->embed = (int)cfg_int(c, "model", "embed");
	s->hidden = (int)cfg_int(c, "model", "hidden");
	s->layout = cfg_enum(c, "model", "layout");

	s->updates = (int)cfg_int(c, "train", "updates");
	s->stop_at = (int)cfg_int(c, "train", "stop_at");
	s->accumulation = (int)cfg_int(c, "train", "accumulation");
	s->batch_size = (int)cfg_int(c, "train", "batch_size");
	s->lr = cfg_float(c, "train", "lr");
	s->momentum = cfg_float(c, "train", "momentum");
	s->weight_decay = cfg_float(c, "train", "weight_decay");
	s->normalization = cfg_enum(c, "train", "normalization");
	s->plan = cfg_enum(c, "train", "plan");
	s->empty_window = cfg_enum(c, "train", "empty_window");
	s->checkpoint_every = (int)cfg_int(c, "train", "checkpoint_every");

	s->world = (int)cfg_int(c, "devices", "world");
	s->backend = cfg_enum(c, "devices", "backend");
	s->reduce = cfg_enum(c, "devices", "reduce") == 0 ? COLL_SUM : COLL_AVG;
	s->collective = cfg_enum(c, "devices", "collective");
	s->timeout_s = cfg_float(c, "devices", "timeout");

	s->atol = cfg_float(c, "parity", "atol");
	s->rtol = cfg_float(c, "parity", "rtol");

	s->ex_short = (int)cfg_int(c, "exercise", "short");
	s->ex_long_before = (int)cfg_int(c, "exercise", "long_before");
	s->ex_long_after = (int)cfg_int(c, "exercise", "long_after");

	if (!s->outputs[0])
		return ERR(e, ERR_CONFIG, "%s: [run] outputs: must not be empty", cfg_where(c));
	if (!s->artifacts[0])
		return ERR(e, ERR_CONFIG, "%s: [run] artifacts: must not be empty", cfg_where(c));
	if (s->min_len > s->max_len)
		return relation_error(c, e, "data", "min_len", "<=", "data", "max_len");
	if (s->prefix_max >= s->min_len)
		return relation_error(c, e, "data", "prefix_max", "less than", "data", "min_len");
	if (s->stop_at >= s->updates)
		return relation_error(c, e, "train", "stop_at", "less than", "train", "updates");

	int n_ids = 0;
	if (parse_ids(c, cfg_str(c, "devices", "ids"), s->ids,
		      (int)(sizeof s->ids / sizeof s->ids[0]), &n_ids, e))
		return e ? e->code : ERR_CONFIG;
	s->n_ids = n_ids;
	if (n_ids > 0 && n_ids != s->world) {
		char dw[400];
		describe(c, "devices", "world", dw, sizeof dw);
		return ERR(e, ERR_CONFIG, "%s: [devices] ids = %s names %d device%s but %s",
			   key_where(c, "devices", "ids"), cfg_str(c, "devices", "ids"), n_ids, n_ids == 1 ? "" : "s",
			   dw);
	}
	return ERR_OK;
}
