/*
 * spm: SentencePiece models (.model files, BPE or unigram, with byte fallback) through the
 * library itself (libsentencepiece), behind a C interface; spm.cc is the only C++ file.
 *
 * Encoding and decoding are the library's own (SentencePieceProcessor's Encode and Decode,
 * thread-safe), so ids are those spm_encode gives. Training calls the library's trainer.
 */
#ifndef DDPTOK_SPM_H
#define DDPTOK_SPM_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "tok_ids.h"

#ifdef __cplusplus
extern "C" {
#endif

struct spm;

int spm_load(struct spm **out, const char *path, struct err *e);
void spm_free(struct spm *s);
int32_t spm_vocab(const struct spm *s);
/* the end-of-sequence id (</s>), or -1 when the model has none */
int32_t spm_eos(const struct spm *s);
/* The bytes of text piece id stands for: a byte-fallback piece 1, U+2581 (the piece's
 * space) 1, a control or unknown piece 0. */
size_t spm_piece_bytes(const struct spm *s, int32_t id);
/* Appends the ids of text[0..n) (valid UTF-8) to out. */
int spm_encode(const struct spm *s, const char *text, size_t n, struct tok_ids *out,
	       struct err *e);
/* The text of ids[0..n) into a new NUL-terminated buffer (*text, *len; free() it). */
int spm_decode(const struct spm *s, const int32_t *ids, size_t n, char **text, size_t *len,
	       struct err *e);

/* Trains a model of vocab ids on the text file input (one sentence a line) and writes
 * model_prefix.model and model_prefix.vocab; model_type "bpe" or "unigram". Byte fallback
 * on, no normalization and whitespace kept as it is, so that decoding gives the text back;
 * threads: the trainer's. */
int spm_train(const char *input, const char *model_prefix, int32_t vocab,
	      const char *model_type, int threads, struct err *e);

#ifdef __cplusplus
}
#endif

#endif
