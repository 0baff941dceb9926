/*
 * cmd_tokenize: tokenize, tokenize --decode, tokenize --bench and tokenizer-train (see
 * cmd_tokenize.h). The text read is checked as the text source checks it ([data]
 * invalid_utf8).
 */
#include "cmd_tokenize.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fsx.h"
#include "spm.h"
#include "text_docs.h"
#include "tok_batch.h"
#include "tokenizer.h"
#include "utf8.h"

/* the operand: a file, or "-" for standard input */
static int read_operand(const struct app *a, char **text, size_t *len, struct err *e)
{
	if (!a->o.operand)
		return ERR(e, ERR_USAGE, "tokenize: give the FILE to read (- for standard input)");
	return fsx_read_all(strcmp(a->o.operand, "-") ? a->o.operand : "/dev/stdin", text, len, e);
}

/* text as [data] invalid_utf8 says: refused naming the byte, or repaired in place */
static int valid_text(const struct app *a, char **text, size_t *len, struct err *e)
{
	size_t bad = utf8_invalid_at(*text, *len), replaced;
	char *fixed;
	if (bad == *len || a->s.tokenizer == TOKENIZER_BYTES)
		return ERR_OK;
	if (a->s.invalid_utf8 != INVALID_UTF8_REPLACE)
		return ERR(e, ERR_DATA, "%s: byte %zu: not UTF-8 (0x%02x); [data] invalid_utf8 = "
			   "replace puts U+FFFD in its place", a->o.operand, bad,
			   (unsigned)(unsigned char)(*text)[bad]);
	if (utf8_repair(*text, *len, &fixed, len, &replaced))
		return ERR(e, ERR_NOMEM, "%s: out of memory", a->o.operand);
	free(*text);
	*text = fixed;
	return ERR_OK;
}

static int print_ids(const struct tok_ids *ids, struct err *e)
{
	for (size_t i = 0; i < ids->n; i++)
		printf("%s%d", i ? " " : "", ids->v[i]);
	printf("\n");
	return fflush(stdout) ? ERR(e, ERR_IO, "tokenize: writing the ids: %s", strerror(errno))
			      : ERR_OK;
}

static int encode(struct app *a, struct tokenizer *t, struct err *e)
{
	char *text = NULL;
	size_t len;
	struct tok_worker *w = NULL;
	struct tok_ids ids = {0};
	int rc = read_operand(a, &text, &len, e);
	if (!rc)
		rc = valid_text(a, &text, &len, e);
	if (!rc)
		rc = tokenizer_worker_new(t, &w, e);
	if (!rc && (rc = tokenizer_encode(w, text, len, &ids, e)))
		err_prefix(e, "%s", a->o.operand);
	if (!rc)
		rc = print_ids(&ids, e);
	tok_ids_free(&ids);
	tokenizer_worker_free(w);
	free(text);
	return rc;
}

/* whitespace-separated ids into ids */
static int parse_ids(const char *file, const char *text, struct tok_ids *ids, struct err *e)
{
	const char *p = text;
	long long v;
	int len, got;
	while ((got = app_next_id(&p, 0, INT32_MAX, &v, &len)) > 0)
		if (tok_ids_push(ids, (int32_t)v))
			return ERR(e, ERR_NOMEM, "%s: out of memory", file);
	return got ? ERR(e, ERR_DATA, "%s: '%.*s' is not an id", file, len, p) : ERR_OK;
}

static int decode(struct app *a, struct tokenizer *t, struct err *e)
{
	char *text = NULL, *out = NULL;
	size_t len;
	struct tok_ids ids = {0};
	int rc = read_operand(a, &text, &len, e);
	if (!rc)
		rc = parse_ids(a->o.operand, text, &ids, e);
	if (!rc && (rc = tokenizer_decode(t, ids.v, ids.n, &out, &len, e)))
		err_prefix(e, "%s", a->o.operand);
	if (!rc && (fwrite(out, 1, len, stdout) != len || fflush(stdout)))
		rc = ERR(e, ERR_IO, "tokenize --decode: writing the text: %s", strerror(errno));
	free(out);
	free(text);
	tok_ids_free(&ids);
	return rc;
}

#define BENCH_CHUNK (64u << 10)
#define BENCH_RUNS 5

/* the text cut into documents of about BENCH_CHUNK bytes, at line ends */
static struct tok_doc *bench_docs(const char *text, size_t len, size_t *n)
{
	struct tok_doc *docs = calloc(len / BENCH_CHUNK + 2, sizeof *docs);
	size_t at = 0;
	*n = 0;
	while (docs && at < len) {
		size_t end = at + BENCH_CHUNK < len ? at + BENCH_CHUNK : len;
		const char *nl = end < len ? memchr(text + end, '\n', len - end) : NULL;
		end = nl ? (size_t)(nl - text) + 1 : len;
		docs[(*n)++] = (struct tok_doc){ text + at, end - at, {0} };
		at = end;
	}
	return docs;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return a < b ? -1 : a > b;
}

/* BENCH_RUNS encodings of docs on `threads` threads: MB/s median and range, tokens */
static int bench_runs(struct app *a, struct tokenizer *t, struct tok_doc *docs, size_t n,
		      size_t len, int threads, size_t *tokens, struct err *e)
{
	double rate[BENCH_RUNS];
	for (int r = 0; r < BENCH_RUNS; r++) {
		double t0 = now_s();
		ERR_TRY(tok_batch_encode(t, docs, n, threads, NULL, NULL, NULL, e));
		rate[r] = (double)len / 1e6 / (now_s() - t0);
		*tokens = 0;
		for (size_t i = 0; i < n; i++) {
			*tokens += docs[i].ids.n;
			tok_ids_free(&docs[i].ids);
		}
	}
	qsort(rate, BENCH_RUNS, sizeof rate[0], cmp_double);
	env_info(&a->env, "tokenize --bench: %d thread%s: %.1f MB/s (median of %d, %.1f .. %.1f), "
		 "%.1f MB/s per thread", threads, threads == 1 ? "" : "s", rate[BENCH_RUNS / 2],
		 BENCH_RUNS, rate[0], rate[BENCH_RUNS - 1], rate[BENCH_RUNS / 2] / threads);
	return ERR_OK;
}

static int bench(struct app *a, struct tokenizer *t, struct err *e)
{
	char *text = NULL;
	size_t len, n = 0, tokens = 0;
	struct tok_doc *docs = NULL;
	int rc = read_operand(a, &text, &len, e), all = tok_batch_threads(0);
	if (!rc)
		rc = valid_text(a, &text, &len, e);
	if (!rc && !(docs = bench_docs(text, len, &n)))
		rc = ERR(e, ERR_NOMEM, "tokenize --bench: out of memory");
	if (!rc)
		env_info(&a->env, "tokenize --bench: %s, %.2f MB in %zu pieces, %s tokenizer, "
			 "encoders made afresh each run (their caches cold)", a->o.operand,
			 (double)len / 1e6, n, tokenizer_kind_name(a->s.tokenizer));
	if (!rc)
		rc = bench_runs(a, t, docs, n, len, 1, &tokens, e);
	if (!rc && all > 1)
		rc = bench_runs(a, t, docs, n, len, all, &tokens, e);
	if (!rc)
		env_info(&a->env, "tokenize --bench: %zu tokens, %.2f bytes per token", tokens,
			 tokens ? (double)len / (double)tokens : 0.0);
	free(docs);
	free(text);
	return rc;
}

int cmd_tokenize(struct app *a, struct err *e)
{
	struct tokenizer *t;
	int rc;
	if (a->o.decode && a->o.bench)
		return ERR(e, ERR_USAGE, "tokenize: give --decode or --bench, not both");
	ERR_TRY(tokenizer_from_settings(&t, &a->s, e));
	rc = a->o.decode ? decode(a, t, e) : a->o.bench ? bench(a, t, e) : encode(a, t, e);
	tokenizer_close(t);
	return rc;
}

/* [tokenizer] file, which must end in .model: its prefix for the trainer */
static int model_prefix(const struct settings *s, char *prefix, size_t cap, struct err *e)
{
	size_t n = strlen(s->tokenizer_file);
	if (s->tokenizer != TOKENIZER_SENTENCEPIECE || n < 7 ||
	    strcmp(s->tokenizer_file + n - 6, ".model"))
		return ERR(e, ERR_CONFIG, "tokenizer-train: needs [tokenizer] kind = sentencepiece "
			   "and file = NAME.model (the model to write; here kind = %s, file = %s)",
			   tokenizer_kind_name(s->tokenizer), s->tokenizer_file[0] ?
			   s->tokenizer_file : "(empty)");
	if (n - 6 + 1 > cap)
		return ERR(e, ERR_CONFIG, "tokenizer-train: %s: too long", s->tokenizer_file);
	snprintf(prefix, cap, "%.*s", (int)(n - 6), s->tokenizer_file);
	return ERR_OK;
}

/* the documents of [data] path, one after the other, into the trainer's input file */
static int write_training_text(const struct app *a, const char *path, size_t *docs,
			       size_t *bytes, struct err *e)
{
	struct data_shape shape = { .min_len = 1, .max_len = 1, .split_rule = { 1, 0, 0 } };
	struct data_set d;
	struct text_docs t = {0};
	char delim[256];
	struct fsx_writer w = { .fd = -1 };
	int rc = text_delimiter(a->s.delimiter, delim, sizeof delim, e);
	struct text_read_opts o = { delim, a->s.invalid_utf8 == INVALID_UTF8_REPLACE };
	if (rc || (rc = data_init(&d, &shape, e)))
		return rc;
	if (!(rc = text_docs_read(&t, &d, a->s.data_path, &o, e)))
		rc = fsx_writer_open(&w, path, e);
	*docs = t.n;
	*bytes = 0;
	for (size_t i = 0; !rc && i < t.n; i++) {
		const struct text_doc *doc = &t.doc[i];
		if (doc->prompt && !(rc = fsx_writer_write(&w, doc->prompt, doc->prompt_len, e)))
			rc = fsx_writer_write(&w, "\n", 1, e);
		if (!rc && !(rc = fsx_writer_write(&w, doc->text, doc->len, e)))
			rc = fsx_writer_write(&w, "\n", 1, e);
		*bytes += doc->prompt_len + doc->len;
	}
	if (!rc)
		rc = fsx_writer_commit(&w, e);
	else
		fsx_writer_abort(&w);
	text_docs_free(&t);
	data_free(&d);
	return rc;
}

/* prefix.tmp.model and .vocab, as the trainer wrote them, renamed to prefix.model, .vocab */
static int publish(const char *tmp, const char *prefix, struct err *e)
{
	static const char *const ext[2] = { ".vocab", ".model" };
	char from[FSX_PATH_MAX + 64], to[FSX_PATH_MAX + 64];
	for (int i = 0; i < 2; i++) {
		snprintf(from, sizeof from, "%s%s", tmp, ext[i]);
		snprintf(to, sizeof to, "%s%s", prefix, ext[i]);
		if (rename(from, to))
			return ERR_ERRNO(e, "tokenizer-train: cannot rename %s to %s", from, to);
	}
	return ERR_OK;
}

int cmd_tokenizer_train(struct app *a, struct err *e)
{
	char prefix[FSX_PATH_MAX], tmp[FSX_PATH_MAX + 32], input[FSX_PATH_MAX + 48];
	static const char *const types[2] = { "bpe", "unigram" };
	const char *type = types[a->s.tokenizer_train_type];
	size_t docs, bytes;
	if (a->s.source != DATA_TEXT)
		return ERR(e, ERR_CONFIG, "tokenizer-train: trains on the text source's files: "
			   "needs [data] source = text and path");
	ERR_TRY(model_prefix(&a->s, prefix, sizeof prefix, e));
	snprintf(tmp, sizeof tmp, "%s.tmp-%ld", prefix, (long)getpid());
	snprintf(input, sizeof input, "%s.input.txt", tmp);
	ERR_TRY(write_training_text(a, input, &docs, &bytes, e));
	env_info(&a->env, "tokenizer-train: a SentencePiece %s model of %d ids on %zu documents "
		 "(%.2f MB) of %s", type, a->s.tokenizer_train_vocab, docs, (double)bytes / 1e6,
		 a->s.data_path);
	int rc = spm_train(input, tmp, a->s.tokenizer_train_vocab, type, tok_batch_threads(0), e);
	remove(input);
	if (!rc)
		rc = publish(tmp, prefix, e);
	if (rc) { /* nothing half-written stays */
		char left[FSX_PATH_MAX + 48];
		snprintf(left, sizeof left, "%s.model", tmp);
		remove(left);
		snprintf(left, sizeof left, "%s.vocab", tmp);
		remove(left);
	}
	if (!rc)
		env_info(&a->env, "tokenizer-train: wrote %s", a->s.tokenizer_file);
	return rc;
}
