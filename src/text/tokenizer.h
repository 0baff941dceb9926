/*
 * tokenizer: text to ids and back, for the kinds of [tokenizer] kind:
 *   bytes          the 256 byte values, ids 0..255, and end-of-text 256: no file;
 *   gpt2           GPT-2's byte-level BPE (bpe.h), encoded as OpenAI's tiktoken does;
 *   sentencepiece  a SentencePiece .model through the library (spm.h).
 *
 * A tokenizer is opened once and shared read-only; each thread encodes through its own
 * tok_worker. Encoding takes valid UTF-8 only (utf8.h repairs or locates what is not; the
 * bytes kind takes any bytes). The identity of a tokenizer (its kind and the SHA-256 of
 * its files) is what a corpus tokenized with it depends on.
 */
#ifndef DDPTOK_TOKENIZER_H
#define DDPTOK_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "digest.h"
#include "err.h"
#include "settings.h"
#include "tok_ids.h"

/* the end-of-text token as GPT-2 (and the bytes kind) writes it in text */
#define TOKENIZER_EOT_TEXT "<|endoftext|>"

struct tok_spec {
	int kind;          /* enum tokenizer_kind */
	const char *vocab, *merges; /* gpt2: vocab.json and merges.txt */
	const char *file;  /* gpt2: a tokenizer.json; sentencepiece: the .model */
	int special;       /* 1: TOKENIZER_EOT_TEXT in a text is the end-of-text id */
};

struct tokenizer;
struct tok_worker;

int tokenizer_open(struct tokenizer **out, const struct tok_spec *spec, struct err *e);
/* The tokenizer [tokenizer] of s names (ERR_CONFIG naming the key a kind misses). */
int tokenizer_from_settings(struct tokenizer **out, const struct settings *s, struct err *e);
void tokenizer_close(struct tokenizer *t);

const char *tokenizer_kind_name(int kind);
int tokenizer_kind(const struct tokenizer *t);
/* the number of ids (bytes: 257; gpt2: 50257) */
int32_t tokenizer_vocab(const struct tokenizer *t);
/* the end-of-text id put between documents (sentencepiece: </s>), or -1 when it has none */
int32_t tokenizer_eot(const struct tokenizer *t);
/* "KIND SHA-256" of the kind, the special setting and the files' bytes */
const char *tokenizer_identity(const struct tokenizer *t);

/* The bytes of text id stands for (0 for the end-of-text id and other control ids), as
 * bits per byte counts them. */
size_t tokenizer_token_bytes(const struct tokenizer *t, int32_t id);

int tokenizer_worker_new(struct tokenizer *t, struct tok_worker **out, struct err *e);
void tokenizer_worker_free(struct tok_worker *w);
/* Appends the ids of text[0..n) to out. ERR_DATA naming the byte offset when the text is
 * not valid UTF-8 (not for bytes). */
int tokenizer_encode(struct tok_worker *w, const char *text, size_t n, struct tok_ids *out,
		     struct err *e);
/* The text of ids[0..n) into a new NUL-terminated buffer (*text, *len; free() it); an id
 * outside the vocabulary is ERR_DATA naming it and its position. The bytes kind and gpt2
 * give back exactly the bytes encoded (the end-of-text id as TOKENIZER_EOT_TEXT). */
int tokenizer_decode(const struct tokenizer *t, const int32_t *ids, size_t n, char **text,
		     size_t *len, struct err *e);

#endif
