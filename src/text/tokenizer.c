/*
 * tokenizer: the kinds of tokenizer behind one interface (see tokenizer.h).
 */
#include "tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "spm.h"
#include "utf8.h"

#define BYTES_EOT 256

struct tokenizer {
	int kind, special;
	struct bpe *bpe;
	struct spm *spm;
	char identity[32 + DIGEST_HEX_SIZE];
	char byte_text[256]; /* the bytes kind's tokens: byte_text[id] is id's byte */
};

struct tok_worker {
	struct tokenizer *t;
	struct bpe_worker *bpe;
};

const char *tokenizer_kind_name(int kind)
{
	static const char *const names[] = { "bytes", "gpt2", "sentencepiece" };
	return kind >= 0 && kind <= TOKENIZER_SENTENCEPIECE ? names[kind] : "invalid";
}

/* the identity: the kind, the special setting and each file's name-free bytes */
static int identify(struct tokenizer *t, const struct tok_spec *spec, struct err *e)
{
	const char *files[3] = { spec->vocab, spec->merges, spec->file };
	struct digest *d;
	char hex[DIGEST_HEX_SIZE], head[64];
	ERR_TRY(digest_init(&d, e));
	int n = snprintf(head, sizeof head, "%s special=%d\n", tokenizer_kind_name(t->kind),
			 t->special);
	int rc = digest_update(d, head, (size_t)n, e);
	for (int i = 0; i < 3 && !rc; i++)
		if (t->kind != TOKENIZER_BYTES && files[i] && files[i][0] &&
		    !(rc = digest_file(files[i], hex, NULL, e)))
			rc = digest_update(d, hex, 64, e);
	if (rc) {
		digest_free(d);
		return rc;
	}
	ERR_TRY(digest_final(d, hex, e));
	snprintf(t->identity, sizeof t->identity, "%s %s", tokenizer_kind_name(t->kind), hex);
	return ERR_OK;
}

static int open_kind(struct tokenizer *t, const struct tok_spec *spec, struct err *e)
{
	int has_file = spec->file && spec->file[0];
	switch (spec->kind) {
	case TOKENIZER_BYTES:
		return ERR_OK;
	case TOKENIZER_GPT2:
		if (has_file)
			return bpe_load(&t->bpe, spec->file, NULL, e);
		if (!spec->vocab || !spec->vocab[0] || !spec->merges || !spec->merges[0])
			return ERR(e, ERR_CONFIG, "[tokenizer] kind = gpt2 needs vocab and merges "
				   "(vocab.json, merges.txt) or file (a tokenizer.json)");
		return bpe_load(&t->bpe, spec->vocab, spec->merges, e);
	case TOKENIZER_SENTENCEPIECE:
		if (!has_file)
			return ERR(e, ERR_CONFIG, "[tokenizer] kind = sentencepiece needs file (a "
				   ".model)");
		return spm_load(&t->spm, spec->file, e);
	}
	return ERR(e, ERR_CONFIG, "[tokenizer] kind %d is not a tokenizer", spec->kind);
}

int tokenizer_open(struct tokenizer **out, const struct tok_spec *spec, struct err *e)
{
	struct tokenizer *t = calloc(1, sizeof *t);
	int rc;
	*out = NULL;
	if (!t)
		return ERR(e, ERR_NOMEM, "tokenizer: out of memory");
	t->kind = spec->kind;
	t->special = spec->special;
	for (int b = 0; b < 256; b++)
		t->byte_text[b] = (char)b;
	if ((rc = open_kind(t, spec, e)) || (rc = identify(t, spec, e))) {
		tokenizer_close(t);
		return rc;
	}
	*out = t;
	return ERR_OK;
}

int tokenizer_from_settings(struct tokenizer **out, const struct settings *s, struct err *e)
{
	struct tok_spec spec = { s->tokenizer, s->tokenizer_vocab, s->tokenizer_merges,
				 s->tokenizer_file, s->tokenizer_special };
	return tokenizer_open(out, &spec, e);
}

void tokenizer_close(struct tokenizer *t)
{
	if (!t)
		return;
	bpe_free(t->bpe);
	spm_free(t->spm);
	free(t);
}

int tokenizer_kind(const struct tokenizer *t)
{
	return t->kind;
}

int32_t tokenizer_vocab(const struct tokenizer *t)
{
	return t->bpe ? bpe_vocab(t->bpe) : t->spm ? spm_vocab(t->spm) : BYTES_EOT + 1;
}

int32_t tokenizer_eot(const struct tokenizer *t)
{
	return t->bpe ? bpe_eot(t->bpe) : t->spm ? spm_eos(t->spm) : BYTES_EOT;
}

const char *tokenizer_identity(const struct tokenizer *t)
{
	return t->identity;
}

size_t tokenizer_token_bytes(const struct tokenizer *t, int32_t id)
{
	size_t n = 0;
	if (id == tokenizer_eot(t))
		return 0;
	if (t->spm)
		return spm_piece_bytes(t->spm, id);
	if (t->bpe)
		return bpe_token(t->bpe, id, &n) ? n : 0;
	return id >= 0 && id < BYTES_EOT;
}

int tokenizer_worker_new(struct tokenizer *t, struct tok_worker **out, struct err *e)
{
	struct tok_worker *w = calloc(1, sizeof *w);
	*out = NULL;
	if (!w)
		return ERR(e, ERR_NOMEM, "tokenizer: out of memory");
	w->t = t;
	int rc = t->bpe ? bpe_worker_new(t->bpe, &w->bpe, e) : ERR_OK;
	if (rc) {
		free(w);
		return rc;
	}
	*out = w;
	return ERR_OK;
}

void tokenizer_worker_free(struct tok_worker *w)
{
	if (!w)
		return;
	bpe_worker_free(w->bpe);
	free(w);
}

/* text without special tokens */
static int encode_plain(struct tok_worker *w, const char *text, size_t n, struct tok_ids *out,
			struct err *e)
{
	if (w->bpe)
		return bpe_encode(w->bpe, text, n, out, e);
	if (w->t->spm)
		return spm_encode(w->t->spm, text, n, out, e);
	if (tok_ids_reserve(out, n))
		return ERR(e, ERR_NOMEM, "tokenizer: out of memory for %zu ids", n);
	for (size_t i = 0; i < n; i++)
		out->v[out->n++] = (unsigned char)text[i];
	return ERR_OK;
}

int tokenizer_encode(struct tok_worker *w, const char *text, size_t n, struct tok_ids *out,
		     struct err *e)
{
	const struct tokenizer *t = w->t;
	size_t bad = t->kind == TOKENIZER_BYTES ? n : utf8_invalid_at(text, n);
	if (bad < n)
		return ERR(e, ERR_DATA, "byte %zu: not UTF-8 (0x%02x)", bad,
			   (unsigned)(unsigned char)text[bad]);
	int32_t eot = tokenizer_eot(t);
	const size_t mark = sizeof TOKENIZER_EOT_TEXT - 1;
	/* special text is cut out first, and the parts between are encoded on their own, as
	 * tiktoken does with allowed special tokens */
	while (t->special && eot >= 0 && t->kind != TOKENIZER_SENTENCEPIECE) {
		const char *at = memmem(text, n, TOKENIZER_EOT_TEXT, mark);
		if (!at)
			break;
		ERR_TRY(encode_plain(w, text, (size_t)(at - text), out, e));
		if (tok_ids_push(out, eot))
			return ERR(e, ERR_NOMEM, "tokenizer: out of memory");
		n -= (size_t)(at - text) + mark;
		text = at + mark;
	}
	return encode_plain(w, text, n, out, e);
}

/* The bytes id stands for with the bytes kind and gpt2 (NULL: not an id of t) */
static const char *token_text(const struct tokenizer *t, int32_t id, size_t *len)
{
	if (id == tokenizer_eot(t) && id >= 0) {
		*len = sizeof TOKENIZER_EOT_TEXT - 1;
		return TOKENIZER_EOT_TEXT;
	}
	if (t->bpe)
		return bpe_token(t->bpe, id, len);
	*len = 1;
	return id >= 0 && id < BYTES_EOT ? t->byte_text + id : NULL;
}

int tokenizer_decode(const struct tokenizer *t, const int32_t *ids, size_t n, char **text,
		     size_t *len, struct err *e)
{
	size_t total = 0, tl, w = 0;
	if (t->spm)
		return spm_decode(t->spm, ids, n, text, len, e);
	for (size_t i = 0; i < n; i++) {
		if (!token_text(t, ids[i], &tl))
			return ERR(e, ERR_DATA, "id %d at %zu is not in the %s tokenizer's %d ids",
				   ids[i], i, tokenizer_kind_name(t->kind), tokenizer_vocab(t));
		total += tl;
	}
	char *o = malloc(total + 1);
	if (!o)
		return ERR(e, ERR_NOMEM, "tokenizer: out of memory for %zu bytes", total);
	for (size_t i = 0; i < n; i++) {
		const char *p = token_text(t, ids[i], &tl);
		memcpy(o + w, p, tl);
		w += tl;
	}
	o[w] = '\0';
	*text = o;
	*len = w;
	return ERR_OK;
}
