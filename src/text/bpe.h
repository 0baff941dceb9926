/*
 * bpe: GPT-2's byte-level BPE, from vocab.json + merges.txt or a byte-level BPE
 * tokenizer.json, encoded as OpenAI's tiktoken encodes it.
 *
 * A text is cut into pieces by GPT-2's pre-tokenization pattern (contractions, letters,
 * numbers, other symbols, each with at most one leading space, and runs of whitespace),
 * matched by PCRE2 with Unicode properties; each piece's bytes start as one token each
 * and the adjacent pair of lowest merge rank (the line of merges.txt) is merged until none
 * is left. The files spell bytes with GPT-2's printable stand-ins (bytes_to_unicode);
 * they are turned back into bytes when loaded, so decoding is the concatenation of the
 * tokens' bytes.
 *
 * \s is written out as Unicode's White_Space property (Rust's regex, which tiktoken uses,
 * reads it so; PCRE2's \s with UCP leaves out U+0085).
 *
 * The loaded table is read-only and shared; each thread encodes through its own
 * bpe_worker (PCRE2's match data and a cache of pieces already merged).
 */
#ifndef DDPTOK_BPE_H
#define DDPTOK_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "tok_ids.h"

struct bpe;
struct bpe_worker;

/* From vocab.json and merges.txt (the GPT-2 files), or (merges NULL) from a tokenizer.json
 * whose model is BPE. */
int bpe_load(struct bpe **out, const char *vocab, const char *merges, struct err *e);
void bpe_free(struct bpe *b);
int32_t bpe_vocab(const struct bpe *b);
/* the id of <|endoftext|>, or -1 when the vocabulary has none */
int32_t bpe_eot(const struct bpe *b);
/* the bytes of token id (NULL and *len 0 for an id outside the vocabulary) */
const char *bpe_token(const struct bpe *b, int32_t id, size_t *len);

int bpe_worker_new(const struct bpe *b, struct bpe_worker **out, struct err *e);
void bpe_worker_free(struct bpe_worker *w);
/* Appends the ids of text[0..n) (valid UTF-8) to out; the text is plain text throughout
 * (tiktoken's encode_ordinary). */
int bpe_encode(struct bpe_worker *w, const char *text, size_t n, struct tok_ids *out,
	       struct err *e);

#endif
