/*
 * bpe_vocab: the tables of a byte-level BPE, as loaded from GPT-2's vocab.json and
 * merges.txt or from a tokenizer.json: each id's bytes, the id of each single byte, and
 * the merges, a hash of (left id, right id) -> (rank, merged id).
 *
 * The files spell each byte with GPT-2's printable stand-in (bytes_to_unicode: the
 * printable Latin-1 bytes as themselves, the others as U+0100 on); a token is stored as
 * the bytes it stands for. A vocabulary string holding a character that stands for no
 * byte (an added token of a tokenizer.json) is kept as its UTF-8.
 */
#ifndef DDPTOK_BPE_VOCAB_H
#define DDPTOK_BPE_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define BPE_NO_RANK INT32_MAX

struct bpe_merge {
	uint64_t pair; /* left << 32 | right; 0 with rank BPE_NO_RANK: empty */
	int32_t rank, id;
};

struct bpe_vocab {
	int32_t n;             /* ids 0 .. n-1 */
	uint32_t *off, *len;   /* each id's bytes in blob; off UINT32_MAX: no such id */
	char *blob;
	size_t blob_len, blob_cap;
	int32_t byte_id[256];  /* the token of each single byte */
	int32_t *by_bytes;     /* open-addressed: ids by their bytes (-1: empty) */
	uint32_t by_bytes_mask;
	struct bpe_merge *merges;
	uint32_t merges_mask;
	int32_t n_merges;
	int32_t eot;           /* <|endoftext|>, or -1 */
};

int bpe_vocab_from_files(struct bpe_vocab *v, const char *vocab_json, const char *merges_txt,
			 struct err *e);
int bpe_vocab_from_json(struct bpe_vocab *v, const char *tokenizer_json, struct err *e);
void bpe_vocab_free(struct bpe_vocab *v);

/* the bytes of id (NULL, *len 0: no such id) */
const char *bpe_vocab_bytes(const struct bpe_vocab *v, int32_t id, size_t *len);
/* The rank of merging left and right and the id it makes (*merged), or BPE_NO_RANK. */
static inline int32_t bpe_vocab_merge(const struct bpe_vocab *v, int32_t left, int32_t right,
				      int32_t *merged)
{
	uint64_t pair = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
	uint64_t h = pair * 0x9E3779B97F4A7C15ull;
	for (uint32_t i = (uint32_t)(h >> 32) & v->merges_mask;; i = (i + 1) & v->merges_mask) {
		const struct bpe_merge *m = &v->merges[i];
		if (m->rank == BPE_NO_RANK)
			return BPE_NO_RANK;
		if (m->pair == pair) {
			*merged = m->id;
			return m->rank;
		}
	}
}

#endif
