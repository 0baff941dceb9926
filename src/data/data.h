/*
 * data: the user's own token files, read into sequences ready for the corpus: what every
 * reader shares. The readers (one file each, named by settings.h's DATA_SOURCES and
 * sources.c's source_readers) parse their format and hand each sequence they find to
 * data_add(), which applies the
 * shaping rules once for all of them: every id is checked against the vocabulary (an
 * error names the file and the position), a sequence longer than max_len is cut into
 * windows of at most max_len, one shorter than min_len is skipped, and both are counted. data_finish() assigns the sequences whose files name no split
 * by the split rule and orders the sequences train, validation, test.
 *
 * Files are memory-mapped (data_map), never read whole, and each one's name, size and
 * bytes enter a SHA-256 (files_digest) that the data lock includes, so that a changed
 * file is noticed.
 *
 * Ids are kept as the files hold them; a mask value says whether the token at that
 * position is a target (1) or only context (0), as a prompt is.
 */
#ifndef DDPTOK_DATA_H
#define DDPTOK_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "digest.h"
#include "err.h"

/* The split a sequence belongs to; the corpus orders its sequences so. */
enum split { SPLIT_TRAIN = 0, SPLIT_VALIDATION = 1, SPLIT_TEST = 2 };
/* "train", "validation", "test" ("invalid" for another value) */
const char *data_split_name(int split);
/* The split a name says ("train", "validation", "test"), or -1. */
int data_split_parse(const char *name);

/* the split of a sequence whose file names none: data_finish applies the split rule */
#define DATA_SPLIT_BY_RULE 255
/* the largest id a file may hold (ids must fit the corpus's int32 after its reserved ids) */
#define DATA_MAX_ID ((int64_t)1 << 30)

/* Integer element types found in the files. */
enum data_int { DATA_I8, DATA_U8, DATA_I16, DATA_U16, DATA_I32, DATA_U32, DATA_I64, DATA_U64 };

/* A typed view of integers in a file (possibly unaligned). */
struct data_ints {
	const void *p;
	enum data_int type;
};

struct tokenizer;
/* The text source's reading: the tokenizer, and the rules of text_docs.h. What shapes
 * the ids (the tokenizer's identity, the delimiter, the UTF-8 rule) enters the files
 * digest, so the data lock follows it too. */
struct data_text {
	struct tokenizer *tok;
	const char *delimiter; /* [data] delimiter as written (escapes unread) */
	int replace_invalid;   /* [data] invalid_utf8 = replace */
	int threads;           /* encoding threads (0: every CPU) */
};

/* What shapes the sequences; all of it enters the data lock. */
struct data_shape {
	int min_len, max_len; /* windows of at most max_len tokens; shorter than min_len skipped */
	int64_t vocab;        /* ids must lie in [0, vocab); 0: any id up to DATA_MAX_ID */
	int split_rule[3];    /* relative weights of train, validation, test for the sequences
			       * of files that name no split (consecutive blocks of documents) */
	int64_t eot;          /* llmc: the end-of-text id that opens each document */
	const struct data_text *text; /* text source: how text becomes ids (else NULL) */
};

/* Where the sequence being added comes from, for messages. */
struct data_where {
	const char *file;
	int64_t line;  /* > 0: a JSONL line; positions are then "tokens[k]" on that line */
	int64_t first; /* otherwise: index in the file of the sequence's first token */
	const char *mask_file; /* the file of the mask when it has one of its own (npy's
				  loss_mask.npy); NULL: `file` */
};

struct data_stats {
	int64_t documents;     /* sequences found in the files */
	int64_t cut;           /* documents longer than max_len, cut into windows */
	int64_t short_skipped; /* documents or windows shorter than min_len, skipped */
	int64_t sequences;     /* sequences kept (windows) */
	int64_t tokens, supervised;
	int64_t max_id;        /* -1 while no token was seen */
	/* the text source: the bytes of text tokenized, the seconds it took on how many
	 * threads, the invalid UTF-8 sequences replaced */
	int64_t text_bytes, text_replaced;
	double text_seconds;
	int text_threads;
};

struct data_set {
	struct data_shape shape;
	struct data_stats stats;
	int64_t n;          /* sequences kept */
	int64_t *offset;    /* n + 1 offsets into tokens */
	int32_t *tokens;    /* ids as in the files */
	uint8_t *mask;      /* 1: the token is a target */
	uint8_t *split;     /* enum split, or DATA_SPLIT_BY_RULE until data_finish */
	int64_t *doc;       /* for DATA_SPLIT_BY_RULE: its document's ordinal among such */
	int64_t cap_n, cap_tokens;
	int64_t rule_documents; /* documents without a split of their own */
	char max_where[320];    /* where the largest id was seen */
	struct digest *files;   /* running digest of the files read */
	char files_digest[DIGEST_HEX_SIZE]; /* set by data_finish */
	/* called now and then while a file is read: done of total bytes */
	void (*report_read)(void *arg, const char *file, uint64_t done, uint64_t total);
	void *report_arg;
};

/* A read-only memory mapping of a whole file (p is NULL for an empty file). */
struct data_map {
	const uint8_t *p;
	size_t len;
};

int data_init(struct data_set *d, const struct data_shape *shape, struct err *e);
void data_free(struct data_set *d);

/* Maps path read-only and enters its name (the last path component), size and bytes into
 * the files digest of d. */
int data_map_file(struct data_set *d, const char *path, struct data_map *m, struct err *e);
void data_unmap(struct data_map *m);
/* Hands done of total bytes of file to d->report_read, when the caller gave one. */
void data_report_read(struct data_set *d, const char *file, uint64_t done, uint64_t total);

int64_t data_int_get(const struct data_ints *v, int64_t i);
/* Element i as decimal text, exactly: data_int_get clamps a uint64 above INT64_MAX to it,
 * which a message must not show in place of the file's value. */
void data_int_text(const struct data_ints *v, int64_t i, char *out, size_t cap);
size_t data_int_size(enum data_int type);

/* Adds one document of len tokens: tokens[i], mask[i] (mask.p NULL: every token a target),
 * split (enum split or DATA_SPLIT_BY_RULE). Cuts, skips and checks as described above. */
int data_add(struct data_set *d, const struct data_ints *tokens, const struct data_ints *mask,
	     int64_t len, int split, const struct data_where *w, struct err *e);

/* Applies the split rule, orders the sequences by split (stable) and finishes the files
 * digest. `what` names the source in messages. An empty split is ERR_DATA. */
int data_finish(struct data_set *d, const char *what, struct err *e);

/* Counts per split after data_finish. */
void data_split_counts(const struct data_set *d, int64_t count[3]);

#endif
