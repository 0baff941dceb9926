/*
 * corpus_files: the corpus of a file source ([data] source = npy | jsonl | megatron |
 * llmc): the files are read and shaped by data.h, then laid out as the corpus.
 *
 * The files' ids are the tokenizer's, from 0; the model reserves its first DATA_RESERVED
 * ids (the context before a sequence's start, padding), so file id u is corpus id
 * u + DATA_RESERVED and the model's vocabulary is the files' plus DATA_RESERVED. The files'
 * vocabulary is model.vocab, or when it is 0 the largest id found + 1: then only the
 * corpus knows it, once the files are read (prepare, or a run that builds its corpus), and
 * corpus.bin records it, so that the configuration never reads the files to learn it. A sequence's prefix
 * is the run of masked tokens that opens it; the whole mask is kept for the masked
 * positions further on.
 */
#include "corpus_files.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "corpus_lock.h"
#include "fsx.h"
#include "sources.h"
#include "tokenizer.h"

/* the largest vocabulary a model takes, reserved ids included (as [model] vocab's range) */
#define CORPUS_MAX_VOCAB 262144

/* After a failed read of a relative [data] path that does not exist: what it was
 * relative to and the absolute path tried, added to the message. */
static void say_where_path_was(const struct settings *s, struct err *e)
{
	char cwd[FSX_PATH_MAX];
	if (s->data_path_base == DATA_PATH_ABSOLUTE || access(s->data_path, F_OK) == 0 ||
	    !getcwd(cwd, sizeof cwd))
		return;
	size_t len = strlen(e->msg);
	snprintf(e->msg + len, sizeof e->msg - len, " ([data] path is relative to %s; tried "
		 "%s/%s)", s->data_path_base == DATA_PATH_CONFIG_DIR ?
		 "the configuration file's directory" : "the working directory (given with --set)",
		 cwd, s->data_path);
}

static int read_files(const struct settings *s, corpus_read_report_fn report, void *arg,
		      struct data_set *d, struct err *e)
{
	struct data_shape shape = { .min_len = s->min_len, .max_len = s->max_len,
				    .vocab = s->model_vocab, .eot = s->eot };
	struct data_text text = { NULL, s->delimiter, s->invalid_utf8 == INVALID_UTF8_REPLACE, 0 };
	int rc = ERR_OK;
	memset(d, 0, sizeof *d);
	memcpy(shape.split_rule, s->split_rule, sizeof shape.split_rule);
	/* the text source: ids are the tokenizer's, all of its vocabulary the model's */
	if (s->source == DATA_TEXT && !(rc = tokenizer_from_settings(&text.tok, s, e))) {
		shape.text = &text;
		if (!shape.vocab)
			shape.vocab = tokenizer_vocab(text.tok);
	}
	if (!rc)
		rc = data_init(d, &shape, e);
	d->report_read = report;
	d->report_arg = arg;
	if (!rc && (rc = data_read(d, s->source, s->data_path, e)))
		say_where_path_was(s, e);
	tokenizer_close(text.tok);
	d->shape.text = NULL;
	if (rc)
		data_free(d);
	return rc;
}

/* the model's vocabulary for what d holds */
static int vocab_of(const struct settings *s, const struct data_set *d, int *vocab,
		    struct err *e)
{
	int64_t ids = d->shape.vocab ? d->shape.vocab : d->stats.max_id + 1;
	if (ids + DATA_RESERVED > CORPUS_MAX_VOCAB)
		return ERR(e, ERR_DATA, "%s: id %" PRId64 ": a vocabulary of %" PRId64 " ids "
			   "exceeds the %d a model takes", d->max_where, d->stats.max_id, ids,
			   CORPUS_MAX_VOCAB - DATA_RESERVED);
	*vocab = (int)ids + DATA_RESERVED;
	return ERR_OK;
}

int corpus_model_vocab(const struct settings *s, const struct corpus *c)
{
	return s->vocab || !c ? s->vocab : c->vocab;
}

static void record_params(const struct settings *s, const struct data_set *d,
			  struct corpus *c)
{
	int64_t count[3];
	struct corpus_params *p = &c->params;
	data_split_counts(d, count);
	p->train_count = (int32_t)count[0];
	p->validation_count = (int32_t)count[1];
	p->test_count = (int32_t)count[2];
	p->min_len = s->min_len;
	p->max_len = s->max_len;
	p->vocab = c->vocab;
	p->source = s->source;
	p->eot = s->source == DATA_LLMC ? s->eot : 0;
	memcpy(p->split_rule, s->split_rule, sizeof p->split_rule);
	memcpy(p->files, d->files_digest, sizeof p->files);
}

static int lay_out(const struct settings *s, const struct data_set *d, struct corpus *c,
		   struct err *e)
{
	int64_t total = d->offset[d->n];
	int vocab = 0, rc;
	if ((rc = vocab_of(s, d, &vocab, e)))
		return rc;
	if (s->vocab && vocab != s->vocab)
		return ERR(e, ERR_DATA, "%s: the files call for a vocabulary of %lld ids, the "
			   "settings hold %lld", s->data_path, corpus_user_id(s->source, vocab),
			   corpus_user_id(s->source, s->vocab));
	if (d->n > (1 << 24))
		return ERR(e, ERR_DATA, "%s: %" PRId64 " sequences are too many (at most %d)",
			   s->data_path, d->n, 1 << 24);
	if ((rc = corpus_alloc(c, (int)d->n, total, e)))
		return rc;
	if (!(c->mask = malloc(total > 0 ? (size_t)total : 1)))
		return ERR(e, ERR_NOMEM, "%s: out of memory", s->data_path);
	c->vocab = vocab;
	memcpy(c->mask, d->mask, (size_t)total);
	for (int64_t t = 0; t < total; t++)
		c->tokens[t] = d->tokens[t] + DATA_RESERVED;
	for (int64_t i = 0; i < d->n; i++) {
		int32_t pre = 0;
		c->offset[i + 1] = (int32_t)d->offset[i + 1];
		c->split[i] = d->split[i];
		while (d->offset[i] + pre < d->offset[i + 1] && !d->mask[d->offset[i] + pre])
			pre++;
		c->prefix[i] = pre;
	}
	record_params(s, d, c);
	c->read = d->stats;
	return corpus_finish(c, s->data_path, e);
}

int corpus_from_files(const struct settings *s, struct corpus *c, struct err *e)
{
	return corpus_from_files_reporting(s, NULL, NULL, c, e);
}

int corpus_from_files_reporting(const struct settings *s, corpus_read_report_fn report,
			       void *arg, struct corpus *c, struct err *e)
{
	struct data_set d;
	int rc;
	memset(c, 0, sizeof *c);
	if ((rc = read_files(s, report, arg, &d, e)))
		return rc;
	rc = lay_out(s, &d, c, e);
	data_free(&d);
	if (rc)
		corpus_free(c);
	return rc;
}

int corpus_files_unchanged(const struct settings *s, const struct corpus *c, struct err *e)
{
	struct data_set d;
	int rc;
	if (c->params.source == DATA_SYNTHETIC)
		return ERR_OK;
	if ((rc = read_files(s, NULL, NULL, &d, e)))
		return rc;
	if (strcmp(d.files_digest, c->params.files) != 0)
		rc = ERR(e, ERR_DATA, "%s: the files %schanged since the corpus was prepared "
			 "(SHA-256 %.12s... then, %.12s... now)", s->data_path,
			 s->source == DATA_TEXT ? "or how they are tokenized ([tokenizer], data."
			 "delimiter, data.invalid_utf8) " : "", c->params.files, d.files_digest);
	data_free(&d);
	return rc;
}
