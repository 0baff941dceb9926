/*
 * keys: the one table of configuration keys, and its typed view (struct settings).
 *
 * Every key the program reads is declared here once: section, name, type, default,
 * range or choices, flags (MATH: it changes the computation, so a resumed run refuses to
 * change it; SHAPE: it also sets the model's shape; OPTIM: a setting of the optimizer, which
 * a resume may change and records), the field of struct settings its value
 * lands in, and one doc line. runtime/config.c validates each value against this table
 * and stores it (cfg_store); settings_from_cfg() then checks the relations between keys
 * that a per-key range cannot express. A new key is one line here and a field there.
 */
#include "settings.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "coll.h"
#include "gemm.h"

/* Enum choices, in the order of the C enums they map to (index = enum value). */
#define CHOICES_LOG "quiet|info|debug"
#define CHOICES_LAYOUT "packed|padded"
#define CHOICES_NORM "global_token|mean_of_means|microbatch_mean|double_accumulation"
#define CHOICES_RANK_SPLIT "length_bands|balanced"
#define CHOICES_SAMPLING "independent|epochs"
#define CHOICES_EMPTY "skip|error"
#define CHOICES_BACKEND "auto|cpu|cuda"
#define CHOICES_REDUCE "sum|avg"
#define CHOICES_COLLECTIVE "auto|host|nccl"
#define CHOICES_GEMM GEMM_CHOICES
#define CHOICES_SHARD_ORDER "length|balanced"
#define CHOICES_SOURCE DATA_SOURCE_CHOICES /* settings.h's DATA_SOURCES */
#define CHOICES_UNIT "token|sequence"
#define CHOICES_OPTIMIZER "sgd|adamw"
#define CHOICES_SCHEDULE "constant|cosine|linear"
#define CHOICES_BATCHING "sequences|tokens"
#define CHOICES_BOOL "false|true"
#define CHOICES_TOKENIZER "bytes|gpt2|sentencepiece"
#define CHOICES_TRAIN_TYPE "bpe|unigram"
#define CHOICES_SPECIAL "text|token"
#define CHOICES_INVALID_UTF8 "refuse|replace"

/* Where a key's value lands in struct settings (NO_FIELD: read by settings_from_cfg). */
#define AT(member) CFG_AT(struct settings, member)
#define NO_FIELD .field = CFG_FIELD_NONE
/* flags of a key: MATH changes the computation; SHAPE also sets the model's shape */
#define MATH CFG_MATH
#define SHAPE (CFG_MATH | KEY_SHAPE)
/* OPTIM: a setting of the optimizer, which a resume may change (printed, recorded in the
 * checkpoint's history of changes) */
#define OPTIM (CFG_MATH | KEY_OPTIM)

#define INT_KEY(sec, key, dflt, lo, hi, fl, at, text) \
	{ .section = sec, .name = key, .type = CFG_INT, .def = dflt, .min = lo, .max = hi, \
	  .flags = fl, .doc = text, at }
#define FLOAT_KEY(sec, key, dflt, lo, hi, opn, fl, at, text) \
	{ .section = sec, .name = key, .type = CFG_FLOAT, .def = dflt, .min = lo, .max = hi, \
	  .open = opn, .flags = fl, .doc = text, at }
#define ENUM_KEY(sec, key, dflt, ch, fl, at, text) \
	{ .section = sec, .name = key, .type = CFG_ENUM, .def = dflt, .choices = ch, \
	  .flags = fl, .doc = text, at }
#define STRING_KEY(sec, key, dflt, fl, at, text) \
	{ .section = sec, .name = key, .type = CFG_STRING, .def = dflt, .flags = fl, .doc = text, \
	  at }

/* [devices] reduce is stored as its choice index, which is the enum coll_op value */
_Static_assert(COLL_SUM == 0 && COLL_AVG == 1, "CHOICES_REDUCE follows enum coll_op");
_Static_assert(TOKENIZER_BYTES == 0 && TOKENIZER_GPT2 == 1 && TOKENIZER_SENTENCEPIECE == 2,
	       "CHOICES_TOKENIZER follows enum tokenizer_kind");
_Static_assert(INVALID_UTF8_REFUSE == 0 && INVALID_UTF8_REPLACE == 1,
	       "CHOICES_INVALID_UTF8 follows enum invalid_utf8");
_Static_assert(OPTIM_SGD == 0 && OPTIM_ADAMW == 1, "CHOICES_OPTIMIZER follows enum optim_kind");
_Static_assert(SCHEDULE_CONSTANT == 0 && SCHEDULE_COSINE == 1 && SCHEDULE_LINEAR == 2,
	       "CHOICES_SCHEDULE follows enum optim_schedule");

const struct cfg_key settings_keys[] = {
	/* [run] */
	INT_KEY("run", "seed", "1234", 0, 2147483647.0, MATH, AT(seed),
		"seed of every random draw: corpus, initial weights, sampler"),
	STRING_KEY("run", "outputs", "outputs/" SETTINGS_CONFIG_NAME, 0, AT(outputs),
		   "directory for the prepared corpus and its data lock, reports, metrics "
		   "(JSON/JSONL) and .npy tensors; " SETTINGS_CONFIG_NAME " stands for the "
		   "configuration file's name without .ini, so that configurations never share one"),
	STRING_KEY("run", "artifacts", "artifacts/" SETTINGS_CONFIG_NAME, 0, AT(artifacts),
		   "directory for checkpoints: runs/ (train's run directories, runs/latest the "
		   "latest), checkpoints/ and continuous/ (the protocol's runs) and inspect/ "
		   "(inspect's save); " SETTINGS_CONFIG_NAME " as in [run] outputs"),
	ENUM_KEY("run", "log_level", "info", CHOICES_LOG, 0, AT(log_level),
		 "terminal verbosity: quiet, info or debug (debug: a progress line per step)"),
	INT_KEY("run", "log_every", "0", 0, 1000000, 0, AT(log_every),
		"off a terminal (a pipe, a log file), a training run prints a progress line every "
		"this many steps (0: about 20 per run, and at least one every 30 s)"),

	/* [data] */
	INT_KEY("data", "train", "1024", 1, 100000, MATH, AT(train_count), "number of training sequences"),
	INT_KEY("data", "validation", "128", 1, 100000, MATH, AT(validation_count),
		"number of validation sequences"),
	INT_KEY("data", "test", "256", 1, 100000, MATH, AT(test_count), "number of test sequences"),
	INT_KEY("data", "min_len", "16", 2, 4096, MATH, AT(min_len),
		"shortest sequence length, in tokens"),
	INT_KEY("data", "max_len", "128", 2, 4096, MATH, AT(max_len),
		"longest sequence length, in tokens"),
	INT_KEY("data", "vocab", "128", 8, 262144, SHAPE, AT(vocab),
		"synthetic source: vocabulary size, reserved ids included (file sources: see "
		"model.vocab)"),
	INT_KEY("data", "prefix_max", "0", 0, 4095, MATH, AT(prefix_max),
		"longest unsupervised prompt; each sequence draws its prompt length uniformly "
		"in [0, prefix_max] (must be < min_len)"),
	INT_KEY("data", "branching", "4", 1, 64, MATH, AT(branching),
		"successors per state of the Markov source that generates the corpus"),
	ENUM_KEY("data", "source", "synthetic", CHOICES_SOURCE, MATH, AT(source),
		 "where the sequences come from: the synthetic Markov source, or your own token "
		 "files in one of the formats npy, jsonl, megatron, llmc, or text (.txt and jsonl "
		 "of text, tokenized by [tokenizer]; README \"Your own data\")"),
	STRING_KEY("data", "path", "", 0, AT(data_path),
		   "file source: a directory (npy), a file (jsonl), a path without .bin/.idx "
		   "(megatron), a shard or a directory of shards (llmc), a .txt or .jsonl file or a "
		   "directory of them (text); relative to the "
		   "configuration file's directory (given with --set: to the working directory). "
		   "The data lock holds the files' SHA-256, so a changed file is noticed"),
	STRING_KEY("data", "split", "90,5,5", MATH, NO_FIELD,
		   "file source: relative weights of train, validation and test for the documents "
		   "whose files name no split, given to consecutive blocks in file order"),
	INT_KEY("data", "eot", "50256", 0, 1073741823.0, MATH, AT(eot),
		"llmc source: the end-of-text id that opens each document (50256 for GPT-2 "
		"shards, 128000 for Llama 3)"),

	STRING_KEY("data", "delimiter", "", MATH, AT(delimiter),
		   "text source: the text that separates documents in a .txt file (\\n, \\t and "
		   "\\\\ read as escapes, e.g. \\n\\n for blank lines); empty: one document per file"),
	ENUM_KEY("data", "invalid_utf8", "refuse", CHOICES_INVALID_UTF8, MATH, AT(invalid_utf8),
		 "text source: bytes that are not UTF-8 are refused (naming the file and byte "
		 "offset) or replaced by U+FFFD"),

	/* [tokenizer] */
	ENUM_KEY("tokenizer", "kind", "bytes", CHOICES_TOKENIZER, MATH, AT(tokenizer),
		 "how text becomes ids: bytes (the 256 byte values, end-of-text 256), gpt2 "
		 "(byte-level BPE from vocab + merges, or a tokenizer.json as file) or "
		 "sentencepiece (a .model as file)"),
	STRING_KEY("tokenizer", "vocab", "", 0, AT(tokenizer_vocab),
		   "gpt2: vocab.json (GPT-2's encoder.json); relative as [data] path"),
	STRING_KEY("tokenizer", "merges", "", 0, AT(tokenizer_merges),
		   "gpt2: merges.txt (GPT-2's vocab.bpe); relative as [data] path"),
	STRING_KEY("tokenizer", "file", "", 0, AT(tokenizer_file),
		   "gpt2: a byte-level BPE tokenizer.json (instead of vocab and merges); "
		   "sentencepiece: the .model; relative as [data] path"),
	ENUM_KEY("tokenizer", "special", "text", CHOICES_SPECIAL, MATH, AT(tokenizer_special),
		 "what <|endoftext|> written in a text is: text (encoded as its characters, "
		 "tiktoken's encode_ordinary) or token (the end-of-text id, encode with it "
		 "allowed)"),
	INT_KEY("tokenizer", "train_vocab", "1000", 16, 262140, 0, AT(tokenizer_train_vocab),
		"tokenizer-train: the ids of the SentencePiece model it makes"),
	ENUM_KEY("tokenizer", "train_type", "bpe", CHOICES_TRAIN_TYPE, 0,
		 AT(tokenizer_train_type), "tokenizer-train: bpe or unigram"),

	/* [model] */
	STRING_KEY("model", "kind", "window_mlp", SHAPE, AT(model_kind),
		   "the model: window_mlp (embeddings of the model.context previous tokens, one "
		   "tanh hidden layer, logits over the vocabulary) or gpt (a GPT-2-style decoder, "
		   "docs/gpt.md)"),
	INT_KEY("model", "context", "8", 1, 4096, SHAPE, AT(context),
		"window_mlp: tokens of left context seen by the model; gpt: positions, at least "
		"data.max_len"),
	INT_KEY("model", "embed", "32", 1, 1024, SHAPE, AT(embed),
		"window_mlp: embedding width per token"),
	INT_KEY("model", "hidden", "512", 1, 8192, SHAPE, AT(hidden),
		"window_mlp: hidden layer width"),
	INT_KEY("model", "layers", "4", 1, 128, SHAPE, AT(layers), "gpt: transformer blocks"),
	INT_KEY("model", "heads", "4", 1, 128, SHAPE, AT(heads),
		"gpt: attention heads per block (must divide model.width)"),
	INT_KEY("model", "width", "128", 1, 16384, SHAPE, AT(width),
		"gpt: residual stream width (the MLP is 4 times as wide)"),
	ENUM_KEY("model", "layout", "packed", CHOICES_LAYOUT, MATH, AT(layout),
		 "microbatch layout: packed (window_mlp: supervised positions only; gpt: whole "
		 "sequences one after the other) or padded to max_len"),
	INT_KEY("model", "vocab", "0", 0, 262140, SHAPE, AT(model_vocab),
		"file source: the tokenizer's number of ids (GPT-2 50257, Llama 3 128256); every "
		"id must be below it; 0: the largest id in the files + 1. The model adds its "
		"reserved ids (synthetic source: must be 0, data.vocab rules)"),
	STRING_KEY("model", "init", "", MATH, AT(model_init),
		   "gpt: the initial weights: empty for the seeded initialization, llmc:FILE "
		   "to start from an llm.c GPT-2 model file (float32 or bfloat16; export --llmc "
		   "writes one) or hf:DIR from a Hugging Face GPT-2 directory (export --hf "
		   "writes one); relative to the working directory; docs/gpt.md"),

	/* [train] */
	/* updates and stop_at say where a run ends: the sampler and the model never read
	 * them, so a resume may continue a run to another length; a cosine or linear
	 * schedule takes updates as its horizon, so there a resume with another updates
	 * follows another learning-rate curve from then on (docs/optimizers.md) */
	INT_KEY("train", "updates", "100", 1, 1000000, 0, AT(updates),
		"optimizer steps (accumulation windows) of a full run"),
	INT_KEY("train", "stop_at", "0", 0, 1000000, 0, AT(stop_at),
		"planned stop: train stops (and checkpoints) at this step when it is below "
		"updates, to be continued with --resume latest (0: none; the protocol stops its "
		"first run here, at updates / 2 when 0)"),
	INT_KEY("train", "keep", "0", 0, 1000000, 0, AT(keep),
		"checkpoints train keeps in its run directory: the newest this many (0: all)"),
	INT_KEY("train", "accumulation", "2", 1, SETTINGS_MAX_ACCUMULATION, MATH | KEY_ELASTIC,
		AT(accumulation),
		"microbatches per rank per accumulation window"),
	INT_KEY("train", "batch_size", "8", 1, 4096, MATH, AT(batch_size),
		"sequences per rank per microbatch"),
	INT_KEY("train", "tokens_per_update", "0", 0, 16777216, MATH, AT(tokens_per_update),
		"given alone (without batch_size and accumulation): the tokens one update should "
		"see, from which the microbatch shape is chosen (docs/performance.md, the "
		"microbatch shape); 0: batch_size and accumulation as given"),
	/* the optimizer and its schedule (docs/optimizers.md has the formulas); all but the
	 * optimizer itself (whose state a checkpoint holds) may change on resume (OPTIM) */
	ENUM_KEY("train", "optimizer", "sgd", CHOICES_OPTIMIZER, MATH, AT(optimizer),
		 "sgd (with momentum, PyTorch's) or adamw (decoupled weight decay on matrices)"),
	/* the same bits either way (docs/optimizers.md): a resume may switch it */
	ENUM_KEY("train", "shard_optimizer", "false", CHOICES_BOOL, 0, AT(shard_optimizer),
		 "true: each rank keeps and updates only its slice of the optimizer's state (ZeRO "
		 "stage 1: the gradient reduce-scattered, the parameters all-gathered), 1 / "
		 "devices.world of its memory, the same bits as false"),
	FLOAT_KEY("train", "lr", "0.2", 0, 10, CFG_OPEN_MIN, OPTIM, AT(lr),
		  "learning rate: the schedule's peak, reached at the end of the warmup"),
	ENUM_KEY("train", "schedule", "constant", CHOICES_SCHEDULE, OPTIM, AT(schedule),
		 "learning rate after the warmup: constant, cosine or linear from lr down to "
		 "lr_min at update train.updates"),
	INT_KEY("train", "warmup", "0", 0, 1000000, OPTIM, AT(warmup),
		"updates of linear warmup: update t <= warmup takes lr * t / warmup"),
	FLOAT_KEY("train", "lr_min", "0", 0, 10, 0, OPTIM, AT(lr_min),
		  "cosine and linear schedules: the learning rate they end at (<= lr)"),
	FLOAT_KEY("train", "clip", "0", 0, 1e6, 0, OPTIM, AT(clip),
		  "global gradient-norm clipping: the reduced gradient is scaled to this L2 norm "
		  "when above it (0: off)"),
	FLOAT_KEY("train", "momentum", "0.9", 0, 1, CFG_OPEN_MAX, OPTIM, AT(momentum), "SGD momentum"),
	FLOAT_KEY("train", "beta1", "0.9", 0, 1, CFG_OPEN_MAX, OPTIM, AT(beta1),
		  "adamw: decay of the first moment (the gradient's running mean)"),
	FLOAT_KEY("train", "beta2", "0.95", 0, 1, CFG_OPEN_MAX, OPTIM, AT(beta2),
		  "adamw: decay of the second moment (the squared gradient's running mean); "
		  "0.95 as GPT trainers use, PyTorch's default is 0.999"),
	FLOAT_KEY("train", "eps", "1e-8", 0, 1, CFG_OPEN_MIN, OPTIM, AT(eps),
		  "adamw: added to the second moment's root in the denominator"),
	FLOAT_KEY("train", "weight_decay", "0", 0, 1, 0, OPTIM, AT(weight_decay),
		  "sgd: weight_decay * p added to every tensor's gradient; adamw: decoupled, p "
		  "shrinks by lr * weight_decay * p on the matrices only"),
	ENUM_KEY("train", "normalization", "global_token", CHOICES_NORM, MATH | KEY_MODE, AT(normalization),
		 "loss normalization; only global_token is correct, the others are kept as "
		 "negative controls"),
	ENUM_KEY("train", "unit", "token", CHOICES_UNIT, MATH, AT(unit),
		 "what weighs the same in the window objective: token (the mean over every "
		 "supervised token) or sequence (each sequence holding one weighs the same, its "
		 "tokens 1 / (S n_s) each)"),
	/* plan and sampling: a file source left without them takes balanced and epochs
	 * (settings_for_source), so that no document is drawn more often than another */
	ENUM_KEY("train", "plan", "length_bands", CHOICES_RANK_SPLIT, MATH, AT(rank_split),
		 "how a window is drawn and split over ranks: length_bands (each rank draws the "
		 "same number of sequences from its own length band, so a band of few sequences "
		 "is drawn more often) or balanced (from every length, split by token count); "
		 "left out with a file source: balanced"),
	ENUM_KEY("train", "sampling", "independent", CHOICES_SAMPLING, MATH, AT(sampling),
		 "independent (each window drawn without replacement, independently of the "
		 "others, so some sequences come back before others are seen) or epochs (every "
		 "training sequence once per epoch, in an order shuffled by run.seed; the "
		 "balanced plan or exact mode); left out with a file source: epochs"),
	ENUM_KEY("train", "empty_window", "error", CHOICES_EMPTY, MATH, AT(empty_window),
		 "what a window without supervised tokens does: skip it or stop with an error"),
	INT_KEY("train", "checkpoint_every", "0", 0, 1000000, 0, AT(checkpoint_every),
		"checkpoint every this many steps (0: only at stop_at, the end or a signal)"),
	INT_KEY("train", "eval_every", "0", 0, 1000000, 0, AT(eval_every),
		"validation loss and accuracy (global token mean) every this many steps, in the "
		"metrics and the progress line (0: never); training itself does not change"),
	INT_KEY("train", "shards", "0", 0, 64, MATH, AT(shards),
		"exact mode: a window is one list of sequences cut into this many shards of "
		"batch_size (a power of two; 0: off), added in one fixed tree, so that every "
		"devices.world dividing it gives the same bits"),
	ENUM_KEY("train", "shard_order", "length", CHOICES_SHARD_ORDER, MATH, AT(shard_order),
		 "exact mode: how the window's sequences are cut into shards: length (sorted by "
		 "supervised tokens, shortest first) or balanced (even token counts)"),
	ENUM_KEY("train", "batching", "sequences", CHOICES_BATCHING, MATH, AT(batching),
		 "how a rank cuts its share of a window into microbatches: sequences "
		 "(accumulation of batch_size each) or tokens (at most train.micro_tokens "
		 "supervised positions and batch_size sequences each, so ranks may run different "
		 "numbers of microbatches)"),
	INT_KEY("train", "micro_tokens", "256", 1, 16777216, MATH, AT(micro_tokens),
		"batching = tokens: most supervised positions in one microbatch (a longer "
		"sequence gets a microbatch of its own)"),
	FLOAT_KEY("train", "l2", "0", 0, 1, 0, MATH, AT(l2),
		  "lambda of an l2 term lambda / 2 ||theta||^2 added once to the window objective "
		  "(its gradient enters before the gradient collective; 0: none)"),
	FLOAT_KEY("train", "z_loss", "0", 0, 1, 0, MATH, AT(z_loss),
		  "c of a z-loss c * log(Z)^2 added to each supervised token's loss (Z: the sum "
		  "of exp(logits) over the vocabulary), normalized with the token's loss; 0: none"),
	STRING_KEY("train", "class_weights", "", MATH, AT(class_weights),
		   "a .npy of float32 weights, one per vocabulary id as the data files spell "
		   "them: the objective becomes sum w[y] loss / sum w[y] (relative to the "
		   "working directory; empty: none)"),

	/* [devices] */
	INT_KEY("devices", "world", "2", 1, MAX_WORLD, MATH | KEY_ELASTIC, AT(world),
		"number of data-parallel ranks (devices)"),
	INT_KEY("devices", "local", "0", 0, 8, 0, AT(local),
		"ranks (device threads) of each process under mpirun or srun: devices.world = "
		"processes x local (0: world / processes)"),
	INT_KEY("devices", "threads", "0", 0, 256, 0, AT(threads),
		"cpu backend: threads of each rank for its GEMMs and larger loops, the same bits "
		"for any count (0: the CPUs of this host / its ranks, at least 1)"),
	ENUM_KEY("devices", "backend", "auto", CHOICES_BACKEND, 0, AT(backend),
		 "device backend: auto (cuda when a GPU is visible), cpu or cuda"),
	ENUM_KEY("devices", "reduce", "avg", CHOICES_REDUCE, MATH, AT(reduce),
		 "gradient collective: sum or avg (the loss scale follows it)"),
	ENUM_KEY("devices", "collective", "auto", CHOICES_COLLECTIVE, 0, AT(collective),
		 "collective implementation: auto, host or nccl"),
	ENUM_KEY("devices", "gemm", "auto", CHOICES_GEMM, 0, AT(gemm),
		 "cpu backend: the sgemm of every GEMM, one per run: auto (oneDNN where built in "
		 "and deterministic on this CPU, else OpenBLAS), onednn or openblas; a resume "
		 "under another one than its checkpoint's is refused"),
	STRING_KEY("devices", "ids", "", 0, NO_FIELD,
		   "comma-separated GPU ordinals, one per rank (empty: the first `world`)"),
	FLOAT_KEY("devices", "timeout", "120", 0, 86400, 0, 0, AT(timeout_s),
		  "seconds a rank waits for its peers, or spends in one step of a window, before "
		  "the run fails (0: forever)"),

	/* [parity] */
	FLOAT_KEY("parity", "atol", "1e-6", 0, 1, 0, 0, AT(atol),
		  "absolute tolerance of the gradient parity comparisons (resume equality is exact)"),
	FLOAT_KEY("parity", "rtol", "1e-4", 0, 1, 0, 0, AT(rtol),
		  "relative tolerance of the gradient parity comparisons"),

	/* [exercise] */
	INT_KEY("exercise", "short", "12", 1, 4096, 0, AT(ex_short),
		"exercise: supervised tokens of rank 0 (the short rank) in both windows"),
	INT_KEY("exercise", "long_before", "12", 1, 4096, 0, AT(ex_long_before),
		"exercise: supervised tokens of rank 1 in the first (balanced) window"),
	INT_KEY("exercise", "long_after", "36", 1, 4096, 0, AT(ex_long_after),
		"exercise: supervised tokens of rank 1 in the second (imbalanced) window"),

	{ NULL },
};

static const char *const norm_names[NORM_MODES] = {
	[NORM_GLOBAL_TOKEN] = "global_token",
	[NORM_MEAN_OF_MEANS] = "mean_of_means",
	[NORM_MICROBATCH_MEAN] = "microbatch_mean",
	[NORM_DOUBLE_ACCUM] = "double_accumulation",
	[NORM_L2_EVERY_RANK] = "l2_every_rank",
	[NORM_Z_LOSS_LOCAL] = "z_loss_local",
	[NORM_WEIGHTS_BY_COUNT] = "weights_by_count",
};

const char *norm_mode_name(int mode)
{
	if (mode < 0 || mode >= NORM_MODES)
		return "invalid";
	return norm_names[mode];
}

const char *rank_split_name(int rank_split)
{
	return rank_split == RANK_SPLIT_BALANCED ? "balanced" : "length_bands";
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
	const struct cfg_value *v = cfg_value_of(c, sec, name);
	if (!v || !v->origin[0] || !strncmp(v->origin, cfg_where(c), sizeof v->origin - 1))
		return cfg_where(c);
	snprintf(buf, sizeof buf, "%s (value from %s)", cfg_where(c), v->origin);
	return buf;
}

/* "[sec] name = value" plus " (from ORIGIN)" when the value did not come from the
 * file named at the front of the message. */
static void describe(const struct cfg *c, const char *sec, const char *name, char *out,
		     size_t outlen)
{
	const struct cfg_value *v = cfg_value_of(c, sec, name);
	if (!v) {
		snprintf(out, outlen, "[%s] %s", sec, name);
		return;
	}
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

/* Whether the user gave [sec] name (in the file or with --set), not its default. */
static int key_given(const struct cfg *c, const char *sec, const char *name)
{
	const struct cfg_value *v = cfg_value_of(c, sec, name);
	return v && strcmp(v->origin, "default") != 0;
}

/* Exact mode ([train] shards = K > 0): K a power of two, the world a power of two dividing
 * it, and the accumulation K / W (derived when not given, an error when it disagrees). */
static int exact_mode_relations(const struct cfg *c, struct settings *s, struct err *e)
{
	const int k = s->shards;
	char dk[400], dw[400], valid[64] = "";
	if (k == 0)
		return ERR_OK;
	describe(c, "train", "shards", dk, sizeof dk);
	if (k & (k - 1))
		return ERR(e, ERR_CONFIG, "%s: %s: must be a power of two (1, 2, 4, ..., 64), or 0 "
			   "for the default mode", cfg_where(c), dk);
	for (int w = 1; w <= k && w <= 8; w *= 2)
		snprintf(valid + strlen(valid), sizeof valid - strlen(valid), "%s%d",
			 w > 1 ? ", " : "", w);
	describe(c, "devices", "world", dw, sizeof dw);
	if ((s->world & (s->world - 1)) || k % s->world != 0)
		return ERR(e, ERR_CONFIG, "%s: %s: exact mode (%s) runs on a power-of-two number "
			   "of devices that divides the shards; valid devices.world: %s", cfg_where(c),
			   dw, dk, valid);
	if (key_given(c, "train", "accumulation") && s->accumulation != k / s->world) {
		char da[400];
		describe(c, "train", "accumulation", da, sizeof da);
		return ERR(e, ERR_CONFIG, "%s: %s disagrees with exact mode: %s on %s gives each "
			   "rank %d shard%s as its microbatches (leave train.accumulation out, or set "
			   "it to %d)", cfg_where(c), da, dk, dw,
			   k / s->world, k / s->world == 1 ? "" : "s", k / s->world);
	}
	s->accumulation = k / s->world;
	return ERR_OK;
}

/* The l2 term and token batching: not in exact mode (its shards are cut independently of the world, a
 * rank's token budget is not), and each microbatch holds at least one sequence, so a
 * rank's accumulation x batch_size sequences must fit the window's microbatch slots. */
static int adaptation_relations(const struct cfg *c, const struct settings *s, struct err *e)
{
	char db[400];
	if (s->l2 > 0 && s->shards > 0)
		return ERR(e, ERR_CONFIG, "%s: [train] l2 = %g: exact mode ([train] shards = %d) adds "
			   "only the shards' loss gradients in its tree; use train.l2 = 0 or "
			   "train.shards = 0", key_where(c, "train", "l2"), s->l2, s->shards);
	if (s->class_weights[0] && s->unit == UNIT_SEQUENCE)
		return ERR(e, ERR_CONFIG, "%s: [train] class_weights = %s with [train] unit = "
			   "sequence: a class weight weighs a token, the sequence unit weighs every "
			   "sequence 1 / S whatever its tokens; use train.unit = token or no "
			   "train.class_weights", key_where(c, "train", "class_weights"),
			   s->class_weights);
	if (s->class_weights[0] && s->shards > 0)
		return ERR(e, ERR_CONFIG, "%s: [train] class_weights = %s: exact mode ([train] "
			   "shards = %d) divides by a count its tree does not weigh; use "
			   "train.shards = 0 or no train.class_weights",
			   key_where(c, "train", "class_weights"), s->class_weights, s->shards);
	if (s->batching != BATCHING_TOKENS)
		return ERR_OK;
	describe(c, "train", "batching", db, sizeof db);
	if (s->shards > 0)
		return ERR(e, ERR_CONFIG, "%s: %s: exact mode ([train] shards = %d) cuts the window "
			   "into fixed shards whatever devices.world, which a per-rank token budget "
			   "would not keep; use train.batching = sequences or train.shards = 0",
			   cfg_where(c), db, s->shards);
	if ((int64_t)s->accumulation * s->batch_size > SETTINGS_MAX_MICRO)
		return ERR(e, ERR_CONFIG, "%s: %s: a rank's share of train.accumulation = %d x "
			   "train.batch_size = %d sequences may need as many microbatches, more than "
			   "the %d a window holds; lower one of them", cfg_where(c),
			   db, s->accumulation, s->batch_size, SETTINGS_MAX_MICRO);
	return ERR_OK;
}

/* "90,5,5" -> three weights in [0, 1000000] (base 10, no sign), not all zero */
static int parse_split(const struct cfg *c, const char *text, int w[3], struct err *e)
{
	const char *p = text;
	int k;
	for (k = 0; k < 3; k++) {
		long v = 0;
		const char *start;
		while (*p == ' ')
			p++;
		start = p;
		while (*p >= '0' && *p <= '9' && v <= 1000000)
			v = v * 10 + (*p++ - '0');
		while (*p == ' ')
			p++;
		if (p == start || v > 1000000 || *p != (k < 2 ? ',' : '\0'))
			break;
		w[k] = (int)v;
		p += k < 2;
	}
	if (k < 3 || w[0] + w[1] + w[2] == 0)
		return ERR(e, ERR_CONFIG, "%s: [data] split = %s: expected three weights (train, "
			   "validation, test) such as 90,5,5, each in [0, 1000000], not all zero",
			   key_where(c, "data", "split"), text);
	return ERR_OK;
}

/* A path key [sec] name written in the configuration file c was loaded from, and relative:
 * it is taken relative to that file's directory, which becomes part of path (cap bytes);
 * *base (when not NULL) gets what it was relative to. [data] path and the [tokenizer]
 * files follow this rule. */
static int resolve_path(const struct cfg *c, const char *sec, const char *name, char *path,
			size_t cap, int *base, struct err *e)
{
	const struct cfg_value *given = cfg_value_of(c, sec, name);
	const char *origin = given ? given->origin : "default";
	int b;
	if (!base)
		base = &b;
	if (!path[0] || path[0] == '/') {
		*base = DATA_PATH_ABSOLUTE;
		return ERR_OK;
	}
	*base = DATA_PATH_CWD;
	if (!strcmp(origin, "--set") || !strcmp(origin, "default") || !c->path[0])
		return ERR_OK;
	*base = DATA_PATH_CONFIG_DIR;
	const char *slash = strrchr(c->path, '/');
	if (!slash)
		return ERR_OK; /* the file is in the working directory */
	char joined[1024];
	int n = snprintf(joined, sizeof joined, "%.*s/%s", (int)(slash - c->path), c->path, path);
	if (n < 0 || (size_t)n >= cap)
		return ERR(e, ERR_CONFIG, "%s: [%s] %s = %s: too long once joined to the "
			   "configuration file's directory", key_where(c, sec, name), sec, name, path);
	memcpy(path, joined, (size_t)n + 1);
	return ERR_OK;
}

/* the [tokenizer] files, relative as [data] path */
static int resolve_tokenizer_paths(const struct cfg *c, struct settings *s, struct err *e)
{
	ERR_TRY(resolve_path(c, "tokenizer", "vocab", s->tokenizer_vocab,
			     sizeof s->tokenizer_vocab, NULL, e));
	ERR_TRY(resolve_path(c, "tokenizer", "merges", s->tokenizer_merges,
			     sizeof s->tokenizer_merges, NULL, e));
	return resolve_path(c, "tokenizer", "file", s->tokenizer_file, sizeof s->tokenizer_file,
			    NULL, e);
}

/* The keys only the synthetic source reads, and what decides instead for a file source */
static const struct {
	const char *name, *instead;
} synthetic_only[] = {
	{"train", "the files' own split or [data] split decides the splits"},
	{"validation", "the files' own split or [data] split decides the splits"},
	{"test", "the files' own split or [data] split decides the splits"},
	{"vocab", "[model] vocab gives the vocabulary"},
	{"prefix_max", "the files' masks give the prompts"},
	{"branching", "the files give the tokens"},
};

int settings_for_source(struct cfg *c, struct err *e)
{
	int source = cfg_enum(c, "data", "source");
	char d[400];
	if (source == DATA_SYNTHETIC)
		return ERR_OK;
	/* a value other than the default: the default is what every written configuration
	 * holds (a checkpoint's config.ini too), which then serves as a configuration */
	for (size_t k = 0; k < sizeof synthetic_only / sizeof synthetic_only[0]; k++) {
		if (cfg_holds_default(c, "data", synthetic_only[k].name))
			continue;
		describe(c, "data", synthetic_only[k].name, d, sizeof d);
		return ERR(e, ERR_CONFIG, "%s: %s: only the synthetic source reads it; with [data] "
			   "source = %s %s: remove the key", cfg_where(c), d,
			   cfg_str(c, "data", "source"), synthetic_only[k].instead);
	}
	if (!key_given(c, "train", "plan"))
		ERR_TRY(cfg_put(c, "train", "plan", "balanced", SETTINGS_FILE_DEFAULT, e));
	/* the length bands draw by band, which epochs cannot (exact mode draws no bands) */
	if (!key_given(c, "train", "sampling") &&
	    (cfg_enum(c, "train", "plan") != RANK_SPLIT_LENGTH_BANDS ||
	     cfg_int(c, "train", "shards") > 0))
		ERR_TRY(cfg_put(c, "train", "sampling", "epochs", SETTINGS_FILE_DEFAULT, e));
	return ERR_OK;
}

/* The largest divisor of n that is at most cap (at least 1). */
static int divisor_at_most(int n, int cap)
{
	for (int b = cap < n ? cap : n; b > 1; b--)
		if (n % b == 0)
			return b;
	return 1;
}

int settings_microbatch_rule(int tokens, int world, int mean_len, int max_len, int *batch,
			     int *accumulation)
{
	int per_rank = (tokens / (mean_len > 0 ? mean_len : 1) + world - 1) / world;
	int rows = SETTINGS_MICROBATCH_POSITIONS / (max_len > 0 ? max_len : 1);
	per_rank = per_rank < 1 ? 1 : per_rank;
	*batch = divisor_at_most(per_rank, rows < 1 ? 1 : rows);
	*accumulation = per_rank / *batch;
	return *accumulation <= SETTINGS_MAX_ACCUMULATION;
}

int settings_microbatch_shape(struct cfg *c, struct err *e)
{
	char d[400], text[32];
	int tokens = (int)cfg_int(c, "train", "tokens_per_update"), batch, acc;
	if (tokens <= 0)
		return ERR_OK;
	describe(c, "train", "tokens_per_update", d, sizeof d);
	if (key_given(c, "train", "batch_size") || key_given(c, "train", "accumulation") ||
	    cfg_int(c, "train", "shards") > 0)
		return ERR(e, ERR_CONFIG, "%s: %s chooses train.batch_size and train.accumulation "
			   "itself: give it alone, or those two without it (exact mode, "
			   "train.shards, sets the accumulation too)", cfg_where(c), d);
	int min_len = (int)cfg_int(c, "data", "min_len"), max_len = (int)cfg_int(c, "data", "max_len");
	int world = (int)cfg_int(c, "devices", "world");
	if (!settings_microbatch_rule(tokens, world, (min_len + max_len) / 2, max_len, &batch,
				      &acc))
		return ERR(e, ERR_CONFIG, "%s: %d microbatches of %d sequences per rank on W = %d, "
			   "more than train.accumulation allows (%d): lower it, or give "
			   "train.batch_size and train.accumulation", cfg_where(c), acc, batch, world,
			   SETTINGS_MAX_ACCUMULATION);
	snprintf(text, sizeof text, "%d", batch);
	ERR_TRY(cfg_put(c, "train", "batch_size", text, SETTINGS_SHAPE_RULE, e));
	snprintf(text, sizeof text, "%d", acc);
	return cfg_put(c, "train", "accumulation", text, SETTINGS_SHAPE_RULE, e);
}

int settings_sampling_fits(const struct settings *s, struct err *e)
{
	if (s->sampling != SAMPLING_EPOCHS || s->rank_split != RANK_SPLIT_LENGTH_BANDS ||
	    s->shards > 0)
		return ERR_OK;
	return ERR(e, ERR_CONFIG, "[train] sampling = epochs draws every training sequence once "
		   "per epoch, [train] plan = length_bands the same number from each length band: "
		   "use train.plan = balanced or train.sampling = independent");
}

int settings_file_default(const struct cfg *c, const char *sec, const char *name)
{
	const struct cfg_value *v = cfg_value_of(c, sec, name);
	return v && !strcmp(v->origin, SETTINGS_FILE_DEFAULT);
}

void settings_config_name(const struct cfg *c, char *out, size_t cap)
{
	const char *slash = strrchr(c->path, '/');
	const char *base = slash ? slash + 1 : c->path;
	size_t len = strlen(base);
	if (len > 4 && !strcmp(base + len - 4, ".ini"))
		len -= 4;
	if (!len) {
		base = "defaults";
		len = strlen(base);
	}
	snprintf(out, cap, "%.*s", (int)len, base);
}

/* Replaces every SETTINGS_CONFIG_NAME in the value of [run] key (dir, cap bytes) with the
 * configuration's name. */
static int expand_config_name(const struct cfg *c, const char *key, char *dir, size_t cap,
			      struct err *e)
{
	static const char mark[] = SETTINGS_CONFIG_NAME;
	char name[256], out[1024] = "";
	size_t used = 0;
	settings_config_name(c, name, sizeof name);
	for (const char *p = dir; *p && used < sizeof out;) {
		const char *hit = strstr(p, mark);
		size_t keep = hit ? (size_t)(hit - p) : strlen(p);
		used += (size_t)snprintf(out + used, sizeof out - used, "%.*s%s", (int)keep, p,
					 hit ? name : "");
		p += keep + (hit ? sizeof mark - 1 : 0);
	}
	if (used >= sizeof out || used >= cap)
		return ERR(e, ERR_CONFIG, "%s: [run] %s = %s: too long once %s is replaced by "
			   "\"%s\"", key_where(c, "run", key), key, dir, mark, name);
	memcpy(dir, out, used + 1);
	return ERR_OK;
}

int settings_from_cfg(const struct cfg *c, struct settings *s, struct err *e)
{
	memset(s, 0, sizeof *s);
	cfg_store(c, s);
	ERR_TRY(expand_config_name(c, "outputs", s->outputs, sizeof s->outputs, e));
	ERR_TRY(expand_config_name(c, "artifacts", s->artifacts, sizeof s->artifacts, e));

	/* relations between keys, and [devices] ids (a list) */
	if (!s->outputs[0])
		return ERR(e, ERR_CONFIG, "%s: [run] outputs: must not be empty", cfg_where(c));
	if (!s->artifacts[0])
		return ERR(e, ERR_CONFIG, "%s: [run] artifacts: must not be empty", cfg_where(c));
	if (s->min_len > s->max_len)
		return relation_error(c, e, "data", "min_len", "<=", "data", "max_len");
	if (s->prefix_max >= s->min_len)
		return relation_error(c, e, "data", "prefix_max", "less than", "data", "min_len");
	if (s->lr_min > s->lr)
		return relation_error(c, e, "train", "lr_min", "<=", "train", "lr");
	ERR_TRY(exact_mode_relations(c, s, e));
	if (s->unit == UNIT_SEQUENCE && s->shards > 0)
		return ERR(e, ERR_CONFIG, "%s: [train] unit = sequence: exact mode ([train] shards "
			   "= %d) weighs tokens only; use shards = 0", key_where(c, "train", "unit"),
			   s->shards);
	ERR_TRY(adaptation_relations(c, s, e));
	if (settings_sampling_fits(s, e)) {
		err_prefix(e, "%s", key_where(c, "train", "sampling"));
		return ERR_CONFIG;
	}
	if (parse_split(c, cfg_str(c, "data", "split"), s->split_rule, e))
		return e ? e->code : ERR_CONFIG;
	if (s->source == DATA_SYNTHETIC && s->model_vocab != 0)
		return ERR(e, ERR_CONFIG, "%s: [model] vocab = %d applies to file sources; the "
			   "synthetic source takes [data] vocab", key_where(c, "model", "vocab"),
			   s->model_vocab);
	if (s->source != DATA_SYNTHETIC && !s->data_path[0])
		return ERR(e, ERR_CONFIG, "%s: [data] source = %s needs [data] path",
			   key_where(c, "data", "source"), cfg_str(c, "data", "source"));
	ERR_TRY(resolve_path(c, "data", "path", s->data_path, sizeof s->data_path,
			     &s->data_path_base, e));
	ERR_TRY(resolve_tokenizer_paths(c, s, e));
	/* a file source's vocabulary: model.vocab's ids and the reserved ones, or 0: the
	 * files', which only their corpus knows (no data file is read here) */
	if (s->source != DATA_SYNTHETIC)
		s->vocab = s->model_vocab ? s->model_vocab + DATA_RESERVED : 0;

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

int settings_check_stop_at(struct cfg *c, struct settings *s, struct err *e)
{
	char assign[64];
	if (s->stop_at == 0 && s->updates < 2)
		return ERR(e, ERR_CONFIG, "%s: the protocol stops its first run halfway and "
			   "resumes it: it needs [train] updates >= 2 (or a [train] stop_at below "
			   "updates)", key_where(c, "train", "updates"));
	if (s->stop_at == 0) { /* no planned stop: halfway, written where checkpoints see it */
		snprintf(assign, sizeof assign, "train.stop_at=%d", s->updates / 2);
		ERR_TRY(cfg_set(c, assign, e));
		s->stop_at = s->updates / 2;
	}
	if (s->stop_at >= s->updates)
		return relation_error(c, e, "train", "stop_at", "less than", "train", "updates");
	return ERR_OK;
}
