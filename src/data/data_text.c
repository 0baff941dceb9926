/*
 * data_text: reading, tokenizing and adding the text source's documents (see data_text.h).
 *
 * Prompt and completion are encoded each on its own (as completion-only fine-tuning
 * does), so the boundary between them is a boundary between tokens.
 */
#include "data_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text_docs.h"
#include "tok_batch.h"
#include "tokenizer.h"

struct progress {
	struct data_set *d;
	char label[1200];
};

static void report(void *arg, size_t done, size_t total)
{
	struct progress *p = arg;
	data_report_read(p->d, p->label, done, total);
}

/* what shaped the ids besides the files: enters the files digest, so the data lock */
static int enter_rules(struct data_set *d, const struct data_text *x, const char *delim,
		       struct err *e)
{
	char rules[1024];
	int n = snprintf(rules, sizeof rules, "text: %s; delimiter %zu:%s; invalid_utf8 %s",
			 tokenizer_identity(x->tok), strlen(delim), delim,
			 x->replace_invalid ? "replace" : "refuse");
	return digest_update(d->files, rules, (size_t)n, e);
}

/* One document's ids, prompt first, then the end-of-text id, added to d. */
static int add_doc(struct data_set *d, const struct text_doc *doc, struct tok_doc *ids,
		   int32_t eot, int32_t **tokens, uint8_t **mask, size_t *cap, struct err *e)
{
	size_t np = ids[0].ids.n, nt = ids[1].ids.n, n = np + nt + (eot >= 0);
	if (n > *cap) {
		int32_t *t = realloc(*tokens, n * sizeof *t);
		if (t)
			*tokens = t;
		uint8_t *m = t ? realloc(*mask, n) : NULL;
		if (!m)
			return ERR(e, ERR_NOMEM, "%s: out of memory for %zu tokens", doc->file, n);
		*mask = m;
		*cap = n;
	}
	if (np)
		memcpy(*tokens, ids[0].ids.v, np * sizeof **tokens);
	if (nt)
		memcpy(*tokens + np, ids[1].ids.v, nt * sizeof **tokens);
	if (eot >= 0)
		(*tokens)[np + nt] = eot;
	memset(*mask, 0, np);
	memset(*mask + np, 1, n - np);
	struct data_ints t = { *tokens, DATA_I32 }, m = { *mask, DATA_U8 };
	struct data_where w = { doc->file, doc->line, 0, NULL };
	return data_add(d, &t, &m, (int64_t)n, doc->split, &w, e);
}

static int encode_and_add(struct data_set *d, const struct text_docs *t,
			  const struct data_text *x, const char *path, struct err *e)
{
	struct tok_doc *ids = calloc(t->n * 2 + 1, sizeof *ids);
	struct progress p = { d, "" };
	int32_t *tokens = NULL;
	uint8_t *mask = NULL;
	size_t cap = 0, failed = 0;
	int rc = ERR_OK;
	if (!ids)
		return ERR(e, ERR_NOMEM, "%s: out of memory for %zu documents", path, t->n);
	for (size_t i = 0; i < t->n; i++) {
		ids[2 * i] = (struct tok_doc){ t->doc[i].prompt, t->doc[i].prompt_len, {0} };
		ids[2 * i + 1] = (struct tok_doc){ t->doc[i].text, t->doc[i].len, {0} };
	}
	snprintf(p.label, sizeof p.label, "%s (tokenizing on %d threads)", path,
		 tok_batch_threads(x->threads));
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = tok_batch_encode(x->tok, ids, t->n * 2, x->threads, report, &p, &failed, e);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	d->stats.text_seconds = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
	d->stats.text_threads = tok_batch_threads(x->threads);
	d->stats.text_replaced = (int64_t)t->replaced;
	for (size_t i = 0; i < t->n; i++)
		d->stats.text_bytes += (int64_t)(t->doc[i].prompt_len + t->doc[i].len);
	if (rc) { /* name the file (and line) of the failing document */
		const struct text_doc *doc = &t->doc[failed / 2];
		err_prefix(e, "%s%s%.0lld", doc->file, doc->line ? ":" : "", (long long)doc->line);
	}
	for (size_t i = 0; !rc && i < t->n; i++) {
		rc = add_doc(d, &t->doc[i], &ids[2 * i], tokenizer_eot(x->tok), &tokens, &mask, &cap,
			     e);
		tok_ids_free(&ids[2 * i].ids);
		tok_ids_free(&ids[2 * i + 1].ids);
	}
	for (size_t i = 0; i < t->n * 2; i++)
		tok_ids_free(&ids[i].ids);
	free(ids);
	free(tokens);
	free(mask);
	return rc;
}

int data_read_text(struct data_set *d, const char *path, struct err *e)
{
	const struct data_text *x = d->shape.text;
	struct text_docs t;
	char delim[256];
	int rc;
	if (!x || !x->tok)
		return ERR(e, ERR_CONFIG, "%s: the text source needs a tokenizer", path);
	ERR_TRY(text_delimiter(x->delimiter ? x->delimiter : "", delim, sizeof delim, e));
	struct text_read_opts o = { delim, x->replace_invalid };
	rc = text_docs_read(&t, d, path, &o, e);
	if (!rc)
		rc = enter_rules(d, x, delim, e);
	if (!rc && !t.n)
		rc = ERR(e, ERR_DATA, "%s: no document (every file empty)", path);
	if (!rc)
		rc = encode_and_add(d, &t, x, path, e);
	text_docs_free(&t);
	return rc;
}
