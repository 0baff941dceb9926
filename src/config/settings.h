/*
 * settings: the program's configuration keys and their typed view.
 *
 * keys.c holds the one table that declares every key and the field of this struct it
 * lands in (see runtime/config.h); settings_from_cfg() turns a validated cfg into this
 * struct, checking the relations between keys that a per-key range cannot express (e.g.
 * min_len <= max_len; the protocol's stop_at < updates is checked by the protocol; a window
 * that fits in the smallest sampler pool is checked later by the sampler).
 */
#ifndef DDPTOK_SETTINGS_H
#define DDPTOK_SETTINGS_H

#include "config.h"
#include "err.h"
#include "ranks.h"

/* The most microbatches a rank runs in one window (window.h's slots) */
#define SETTINGS_MAX_MICRO 64

enum norm_mode {
	NORM_GLOBAL_TOKEN = 0, /* correct: c = (avg ? W : 1) / N */
	NORM_MEAN_OF_MEANS,    /* wrong: rank-local mean, then the collective average */
	NORM_MICROBATCH_MEAN,  /* wrong: per-microbatch mean / M, then the collective average */
	NORM_DOUBLE_ACCUM,     /* wrong: global count, then divided again by M */
	NORM_COUNT,
	/* controls of an adaptation of the objective (docs/adaptations.md), which parity runs
	 * only when that term is configured; no train.normalization choice names them */
	NORM_L2_EVERY_RANK = NORM_COUNT, /* wrong: the l2 gradient on every rank under sum */
	NORM_Z_LOSS_LOCAL,     /* wrong: the z-loss divided by the rank's count, not N */
	NORM_WEIGHTS_BY_COUNT, /* wrong: class-weighted losses divided by N, not sum w[y] */
	NORM_MODES
};

/* cfg_key.flags of the program, for the comparison of a checkpoint's configuration with
 * the current one (every CFG_MATH key must match, but):
 *   KEY_SHAPE    sets the shape of the model's parameters: checked even where the other
 *                math keys may differ (an evaluation reads the parameters into its model);
 *   KEY_MODE     an interactive session may switch it (inspect resumes with any);
 *   KEY_ELASTIC  may change between checkpoints of exact mode with the same shards;
 *   KEY_OPTIM    a setting of the optimizer (rate, momentum, decay, ...): a resumed train
 *                run may change it; the change is printed and recorded in the checkpoint's
 *                history (train_history.h), and the run then leaves the original
 *                trajectory. */
enum { KEY_SHAPE = CFG_USER, KEY_MODE = CFG_USER << 1, KEY_ELASTIC = CFG_USER << 2,
       KEY_OPTIM = CFG_USER << 3 };

enum rank_split { RANK_SPLIT_LENGTH_BANDS = 0, RANK_SPLIT_BALANCED = 1 };
/* How windows are drawn from the training split (sampler.h, epoch.h) */
enum sampling_kind { SAMPLING_INDEPENDENT = 0, SAMPLING_EPOCHS = 1 };
enum shard_order { SHARD_ORDER_LENGTH = 0, SHARD_ORDER_BALANCED = 1 };
/* What weighs the same in the window objective (norm.h) */
enum norm_unit { UNIT_TOKEN = 0, UNIT_SEQUENCE = 1 };
enum layout_kind { LAYOUT_PACKED = 0, LAYOUT_PADDED = 1 };
/* How a rank's share of a window is cut into microbatches: accumulation x batch_size
 * sequences, or by a budget of supervised positions (train.micro_tokens) */
enum batching_kind { BATCHING_SEQUENCES = 0, BATCHING_TOKENS = 1 };
enum empty_policy { EMPTY_SKIP = 0, EMPTY_ERROR = 1 };
enum backend_choice { BACKEND_AUTO = 0, BACKEND_CPU = 1, BACKEND_CUDA = 2 };
enum collective_choice { COLLECTIVE_AUTO = 0, COLLECTIVE_HOST = 1, COLLECTIVE_NCCL = 2 };

/* Where the sequences of a corpus come from ([data] source): ROW(enum value, name in
 * data.source), in the order of the enum. The enum and the key's choices are expanded from
 * this one list; data/sources.c gives each file source its reader (the synthetic source
 * is drawn by data/corpus_synth.c and has none). A new format is a row here and its
 * reader there. */
#define DATA_SOURCES(ROW)                 \
	ROW(DATA_SYNTHETIC, "synthetic") \
	ROW(DATA_NPY, "npy")             \
	ROW(DATA_JSONL, "jsonl")         \
	ROW(DATA_MEGATRON, "megatron")   \
	ROW(DATA_LLMC, "llmc")           \
	ROW(DATA_TEXT, "text")

#define DATA_SOURCE_ENUM(id, name) id,
enum data_source { DATA_SOURCES(DATA_SOURCE_ENUM) DATA_SOURCE_COUNT };

/* "synthetic|npy|...": the choices of [data] source (index = enum value). Each row gives
 * "|name"; the + 1 skips the first bar. */
#define DATA_SOURCE_CHOICE(id, name) "|" name
#define DATA_SOURCE_CHOICES (DATA_SOURCES(DATA_SOURCE_CHOICE) + 1)

/* The ids every vocabulary reserves below the data's own (data/corpus_core.h says what
 * they mean): a file source's vocabulary is model.vocab + DATA_RESERVED. */
#define DATA_BOS 0
#define DATA_PAD 1
#define DATA_RESERVED 4

/* [tokenizer] kind (text/tokenizer.h): the 256 byte values, GPT-2's byte-level BPE, or a
 * SentencePiece model */
enum tokenizer_kind { TOKENIZER_BYTES = 0, TOKENIZER_GPT2 = 1, TOKENIZER_SENTENCEPIECE = 2 };
/* [tokenizer] train_type: the model tokenizer-train makes */
enum tokenizer_train_type { TOKENIZER_TRAIN_BPE = 0, TOKENIZER_TRAIN_UNIGRAM = 1 };
/* [data] invalid_utf8: what the text source does with bytes that are not UTF-8 */
enum invalid_utf8 { INVALID_UTF8_REFUSE = 0, INVALID_UTF8_REPLACE = 1 };

/* [train] optimizer and schedule (engine/optim.h computes with them) */
enum optim_kind { OPTIM_SGD = 0, OPTIM_ADAMW = 1 };
enum optim_schedule { SCHEDULE_CONSTANT = 0, SCHEDULE_COSINE = 1, SCHEDULE_LINEAR = 2 };

/* What [data] path is relative to: written in a configuration file, to that file's
 * directory (so a configuration finds its data from any working directory); given with
 * --set, to the working directory, like any path typed on a command line. */
enum data_path_base { DATA_PATH_ABSOLUTE = 0, DATA_PATH_CONFIG_DIR = 1, DATA_PATH_CWD = 2 };

struct settings {
	/* [run] */
	unsigned long long seed;
	char outputs[512];
	char artifacts[512];
	int log_level; /* 0 quiet, 1 info, 2 debug */
	int log_every; /* a progress line every n steps off a terminal (0: auto, progress.h) */

	/* [data] */
	int train_count, validation_count, test_count;
	int min_len, max_len;
	int vocab;       /* total ids, of which DATA_RESERVED are reserved; for a file source
			    model.vocab's, or 0: the files', which the corpus made of them
			    holds (corpus_model_vocab) */
	int prefix_max;  /* unsupervised prompt length drawn uniformly in [0, prefix_max] */
	int branching;   /* successors per state of the Markov source */
	int source;      /* enum data_source: synthetic or a file format */
	char data_path[512]; /* the files of a file source: a relative path from the
				configuration file is made relative to that file's directory */
	int data_path_base;  /* enum data_path_base: what a relative data_path was relative to */
	int split_rule[3];   /* [data] split: weights of train, validation, test */
	int eot;         /* llm.c shards: the end-of-text id that opens each document */
	char delimiter[256]; /* text source: the text between documents of a .txt file, its
				escapes (\\n, \\t, \\\\) read; "": one document per file */
	int invalid_utf8;    /* enum invalid_utf8 */

	/* [tokenizer]: its paths are relative as [data] path is */
	int tokenizer;        /* enum tokenizer_kind */
	char tokenizer_vocab[512], tokenizer_merges[512], tokenizer_file[512];
	int tokenizer_special; /* 1: "<|endoftext|>" in a text is the end-of-text token */
	int tokenizer_train_vocab; /* tokenizer-train: the ids of the model it makes */
	int tokenizer_train_type;  /* enum tokenizer_train_type */

	/* [model] */
	char model_kind[32]; /* the model's name in the registry (model.h) */
	int context, embed, hidden;
	int layers, heads, width; /* gpt */
	int layout;      /* enum layout_kind */
	int model_vocab; /* [model] vocab: the files' ids (0: largest id + 1) */
	char model_init[512]; /* [model] init: "" (seeded) or llmc:FILE (gpt_llmc.h) */

	/* [train] */
	int updates, stop_at, accumulation, batch_size;
	int tokens_per_update; /* 0: batch_size and accumulation as given */
	int keep;          /* train: the newest checkpoints a run directory keeps (0: all) */
	int optimizer;     /* enum optim_kind (optim.h) */
	int shard_optimizer; /* 1: each rank holds and updates its slice of the state (ZeRO 1) */
	int schedule;      /* enum optim_schedule */
	int warmup;        /* updates of linear warmup */
	double lr, lr_min, clip, momentum, beta1, beta2, eps, weight_decay;
	int normalization; /* enum norm_mode */
	int unit;          /* enum norm_unit */
	int rank_split; /* enum rank_split */
	int sampling;      /* enum sampling_kind */
	int empty_window;  /* enum empty_policy */
	int checkpoint_every; /* 0: only at stop_at / end / signal */
	int eval_every;       /* validation loss every n steps (0: never) */
	int shards;        /* exact mode: K shards per window (0: off); see shard.h */
	int shard_order;   /* enum shard_order */
	int batching;      /* enum batching_kind */
	int micro_tokens;  /* tokens batching: most supervised positions per microbatch */
	double l2;         /* lambda of the objective's lambda / 2 ||theta||^2 (0: none) */
	double z_loss;     /* c of the per-token z-loss c * log(Z)^2 (0: none) */
	char class_weights[512]; /* .npy of one weight per vocabulary id ("": none) */

	/* [devices] */
	int world;
	int local;      /* ranks per process (0: world / processes) */
	int threads;    /* cpu backend: threads of each rank (0: auto) */
	int backend;    /* enum backend_choice */
	int reduce;     /* enum coll_op */
	int collective; /* enum collective_choice */
	int gemm;       /* cpu backend: enum gemm_impl (runtime/gemm.h) */
	int ids[MAX_WORLD]; /* GPU ordinals; n_ids == 0: the first `world` */
	int n_ids;
	double timeout_s;

	/* [parity] */
	double atol, rtol;

	/* [exercise] */
	int ex_short, ex_long_before, ex_long_after;
};

extern const struct cfg_key settings_keys[];

/* The origin a value takes when settings_for_source() chose it (cfg_value.origin) */
#define SETTINGS_FILE_DEFAULT "the default for file data"

/* What depends on [data] source, applied to the user's configuration before
 * settings_from_cfg(): for a file source, a key only the synthetic source reads
 * (data.train, validation, test, vocab, prefix_max, branching) holding another value than
 * its default is refused (ERR_CONFIG naming the key and where it came from; at the default
 * it passes, as in every written configuration, a checkpoint's), and train.plan and
 * train.sampling left out take the file defaults, balanced and epochs (independent when
 * train.plan = length_bands is given and exact mode is off), origin SETTINGS_FILE_DEFAULT:
 * every training document weighs what it weighs in the objective. The synthetic source
 * keeps the table's defaults. */
int settings_for_source(struct cfg *c, struct err *e);
/* The microbatch shape for `tokens` per update on `world` ranks with sequences of mean_len
 * positions on average and max_len at most: the sequences per rank (tokens / mean_len over
 * the ranks, rounded up, at least 1) as *accumulation microbatches of *batch sequences,
 * *batch the largest divisor of them that keeps a microbatch within
 * SETTINGS_MICROBATCH_POSITIONS positions of max_len each (at least one sequence):
 * small microbatches keep a GEMM's operands and a layer's activations in the caches, and
 * their number costs little. 0 when *accumulation exceeds SETTINGS_MAX_ACCUMULATION. */
#define SETTINGS_MICROBATCH_POSITIONS 256
#define SETTINGS_MAX_ACCUMULATION 64
int settings_microbatch_rule(int tokens, int world, int mean_len, int max_len, int *batch,
			     int *accumulation);
/* The origin of train.batch_size and train.accumulation when train.tokens_per_update chose
 * them */
#define SETTINGS_SHAPE_RULE "chosen for train.tokens_per_update"
/* train.tokens_per_update given (> 0): train.batch_size and train.accumulation by
 * settings_microbatch_rule, origin SETTINGS_SHAPE_RULE (config.ini records them); ERR_CONFIG
 * when either is given too, in exact mode, or when the rule needs more microbatches than
 * the accumulation's range. */
int settings_microbatch_shape(struct cfg *c, struct err *e);
/* ERR_CONFIG when [train] sampling = epochs meets the length-band plan outside exact mode
 * (an epoch draws from one pool, the bands each from their own). */
int settings_sampling_fits(const struct settings *s, struct err *e);
/* Whether [sec] name holds the value settings_for_source() chose for it. */
int settings_file_default(const struct cfg *c, const char *sec, const char *name);
int settings_from_cfg(const struct cfg *c, struct settings *s, struct err *e);
/* In [run] outputs and artifacts, the configuration's name: its file's name without .ini
 * ("defaults" with no file), so that two configurations run in one directory keep their
 * corpora, checkpoints and reports apart. */
#define SETTINGS_CONFIG_NAME "{config}"
void settings_config_name(const struct cfg *c, char *out, size_t cap);
/* The protocol's planned stop: [train] stop_at, or when it is 0 updates / 2, set in c and
 * s (so that reports and checkpoints show it); it must be below [train] updates:
 * ERR_CONFIG naming both otherwise (and for updates < 2 without a stop_at). */
int settings_check_stop_at(struct cfg *c, struct settings *s, struct err *e);
const char *norm_mode_name(int mode);
int norm_mode_parse(const char *name); /* -1 if unknown */
/* "length_bands" or "balanced", as [train] plan spells it. */
const char *rank_split_name(int rank_split);

#endif
