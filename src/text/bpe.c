/*
 * bpe: GPT-2's byte-level BPE (see bpe.h): loading the files, and encoding through a
 * per-thread worker.
 */
#include "bpe.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "bpe_vocab.h"

/* Unicode's White_Space, written out for the pattern's \s (see bpe.h) */
#define WS "\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}" \
	   "\\x{202F}\\x{205F}\\x{3000}"
/* GPT-2's pre-tokenization pattern (tiktoken's r50k_base / gpt2) */
static const char gpt2_pattern[] =
	"'(?:[sdmt]|ll|ve|re)| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS
	"])|[" WS "]+";

/* pieces longer than this are merged each time, not cached */
#define CACHE_PIECE_MAX 64
#define CACHE_SLOTS (1u << 16)
/* the JIT's stack: long runs of whitespace backtrack through the lookahead */
#define JIT_STACK_MAX (16u << 20)

struct bpe {
	struct bpe_vocab v;
	pcre2_code *re;
};

struct cache_slot {
	uint64_t hash; /* 0: empty */
	uint32_t key_off, key_len, ids_off, ids_n;
};

struct bpe_worker {
	const struct bpe *b;
	pcre2_match_data *md;
	pcre2_match_context *mc;
	pcre2_jit_stack *stack;
	struct cache_slot *slots;
	uint32_t used;
	char keys[CACHE_SLOTS / 2 * 16];     /* piece bytes of the cached entries */
	size_t keys_len;
	int32_t ids[CACHE_SLOTS / 2 * 8];    /* their ids */
	size_t ids_len;
	int32_t sym[CACHE_PIECE_MAX], rank[CACHE_PIECE_MAX]; /* a short piece's merge state */
	int32_t *big_sym, *big_rank;        /* a long piece's */
	size_t big_cap;
};

static int compile_pattern(struct bpe *b, const char *where, struct err *e)
{
	int code;
	PCRE2_SIZE at;
	b->re = pcre2_compile((PCRE2_SPTR)gpt2_pattern, PCRE2_ZERO_TERMINATED,
			      PCRE2_UTF | PCRE2_UCP, &code, &at, NULL);
	if (!b->re) {
		PCRE2_UCHAR msg[256];
		pcre2_get_error_message(code, msg, sizeof msg);
		return ERR(e, ERR_CONFIG, "%s: the pre-tokenization pattern does not compile at "
			   "%zu: %s", where, (size_t)at, (const char *)msg);
	}
	/* without the JIT (a platform without it) the interpreter gives the same matches */
	pcre2_jit_compile(b->re, PCRE2_JIT_COMPLETE);
	return ERR_OK;
}

int bpe_load(struct bpe **out, const char *vocab, const char *merges, struct err *e)
{
	struct bpe *b = calloc(1, sizeof *b);
	int rc;
	*out = NULL;
	if (!b)
		return ERR(e, ERR_NOMEM, "%s: out of memory", vocab);
	rc = merges ? bpe_vocab_from_files(&b->v, vocab, merges, e)
		    : bpe_vocab_from_json(&b->v, vocab, e);
	if (!rc)
		rc = compile_pattern(b, vocab, e);
	if (rc) {
		bpe_free(b);
		return rc;
	}
	*out = b;
	return ERR_OK;
}

void bpe_free(struct bpe *b)
{
	if (!b)
		return;
	bpe_vocab_free(&b->v);
	pcre2_code_free(b->re);
	free(b);
}

int32_t bpe_vocab(const struct bpe *b)
{
	return b->v.n;
}

int32_t bpe_eot(const struct bpe *b)
{
	return b->v.eot;
}

const char *bpe_token(const struct bpe *b, int32_t id, size_t *len)
{
	return bpe_vocab_bytes(&b->v, id, len);
}

int bpe_worker_new(const struct bpe *b, struct bpe_worker **out, struct err *e)
{
	struct bpe_worker *w = calloc(1, sizeof *w);
	*out = NULL;
	if (w) {
		w->b = b;
		w->md = pcre2_match_data_create_from_pattern(b->re, NULL);
		w->mc = pcre2_match_context_create(NULL);
		w->stack = pcre2_jit_stack_create(32u << 10, JIT_STACK_MAX, NULL);
		w->slots = calloc(CACHE_SLOTS, sizeof *w->slots);
	}
	if (!w || !w->md || !w->mc || !w->stack || !w->slots) {
		bpe_worker_free(w);
		return ERR(e, ERR_NOMEM, "tokenizer: out of memory for an encoder");
	}
	pcre2_jit_stack_assign(w->mc, NULL, w->stack);
	*out = w;
	return ERR_OK;
}

void bpe_worker_free(struct bpe_worker *w)
{
	if (!w)
		return;
	pcre2_match_data_free(w->md);
	pcre2_match_context_free(w->mc);
	pcre2_jit_stack_free(w->stack);
	free(w->slots);
	free(w->big_sym);
	free(w->big_rank);
	free(w);
}

/* ---- merging one piece ------------------------------------------------------------ */

static int32_t pair_rank(const struct bpe_vocab *v, const int32_t *sym, int32_t i,
			 int32_t *merged)
{
	return bpe_vocab_merge(v, sym[i], sym[i + 1], merged);
}

/* Merges sym[0..n) (one token per byte) in place, the lowest rank first and the leftmost
 * of equal ranks, as tiktoken does; returns the count left. */
static int32_t merge_piece(const struct bpe_vocab *v, int32_t *sym, int32_t *rank, int32_t n)
{
	int32_t merged;
	for (int32_t i = 0; i + 1 < n; i++)
		rank[i] = pair_rank(v, sym, i, &merged);
	while (n > 1) {
		int32_t best = -1;
		for (int32_t i = 0; i + 1 < n; i++)
			if (rank[i] != BPE_NO_RANK && (best < 0 || rank[i] < rank[best]))
				best = i;
		if (best < 0)
			break;
		pair_rank(v, sym, best, &merged);
		sym[best] = merged;
		memmove(sym + best + 1, sym + best + 2, sizeof *sym * (size_t)(n - best - 2));
		memmove(rank + best + 1, rank + best + 2, sizeof *rank * (size_t)(n - best - 2));
		n--;
		if (best + 1 < n)
			rank[best] = pair_rank(v, sym, best, &merged);
		if (best > 0)
			rank[best - 1] = pair_rank(v, sym, best - 1, &merged);
	}
	return n;
}

static uint64_t piece_hash(const char *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
	return h | 1; /* never 0, the empty slot's mark */
}

static struct cache_slot *cache_find(struct bpe_worker *w, const char *p, size_t n,
				     uint64_t h)
{
	uint32_t mask = CACHE_SLOTS - 1, i = (uint32_t)h & mask;
	for (;; i = (i + 1) & mask) {
		struct cache_slot *s = &w->slots[i];
		if (!s->hash || (s->hash == h && s->key_len == n &&
				 !memcmp(w->keys + s->key_off, p, n)))
			return s;
	}
}

static void cache_put(struct bpe_worker *w, struct cache_slot *s, uint64_t h, const char *p,
		      size_t n, const int32_t *ids, int32_t k)
{
	if (w->used + 1 > CACHE_SLOTS / 2 || w->keys_len + n > sizeof w->keys ||
	    w->ids_len + (size_t)k > sizeof w->ids / sizeof w->ids[0]) {
		/* full: start again (English text's pieces repeat; the cache refills) */
		memset(w->slots, 0, sizeof *w->slots * CACHE_SLOTS);
		w->used = 0;
		w->keys_len = w->ids_len = 0;
		s = cache_find(w, p, n, h);
	}
	*s = (struct cache_slot){ h, (uint32_t)w->keys_len, (uint32_t)n, (uint32_t)w->ids_len,
				  (uint32_t)k };
	memcpy(w->keys + w->keys_len, p, n);
	memcpy(w->ids + w->ids_len, ids, sizeof *ids * (size_t)k);
	w->keys_len += n;
	w->ids_len += (size_t)k;
	w->used++;
}

static int grow_big(struct bpe_worker *w, size_t n)
{
	if (n <= w->big_cap)
		return 0;
	int32_t *s = realloc(w->big_sym, n * sizeof *s), *r = s ? realloc(w->big_rank, n * sizeof *r) : NULL;
	if (s)
		w->big_sym = s;
	if (!r)
		return -1;
	w->big_rank = r;
	w->big_cap = n;
	return 0;
}

static int encode_piece(struct bpe_worker *w, const char *p, size_t n, struct tok_ids *out,
			struct err *e)
{
	const struct bpe_vocab *v = &w->b->v;
	int32_t *sym = w->sym, *rank = w->rank, k;
	if (n == 1)
		return tok_ids_push(out, v->byte_id[(unsigned char)p[0]])
			       ? ERR(e, ERR_NOMEM, "tokenizer: out of memory") : ERR_OK;
	uint64_t h = n <= CACHE_PIECE_MAX ? piece_hash(p, n) : 0;
	struct cache_slot *s = h ? cache_find(w, p, n, h) : NULL;
	if (s && s->hash) {
		if (tok_ids_reserve(out, s->ids_n))
			return ERR(e, ERR_NOMEM, "tokenizer: out of memory");
		memcpy(out->v + out->n, w->ids + s->ids_off, sizeof(int32_t) * s->ids_n);
		out->n += s->ids_n;
		return ERR_OK;
	}
	if (n > CACHE_PIECE_MAX) {
		if (grow_big(w, n))
			return ERR(e, ERR_NOMEM, "tokenizer: out of memory for a piece of %zu bytes", n);
		sym = w->big_sym;
		rank = w->big_rank;
	}
	for (size_t i = 0; i < n; i++)
		sym[i] = v->byte_id[(unsigned char)p[i]];
	k = merge_piece(v, sym, rank, (int32_t)n);
	if (tok_ids_reserve(out, (size_t)k))
		return ERR(e, ERR_NOMEM, "tokenizer: out of memory");
	memcpy(out->v + out->n, sym, sizeof *sym * (size_t)k);
	out->n += (size_t)k;
	if (s)
		cache_put(w, s, h, p, n, sym, k);
	return ERR_OK;
}

int bpe_encode(struct bpe_worker *w, const char *text, size_t n, struct tok_ids *out,
	       struct err *e)
{
	PCRE2_SIZE at = 0;
	while (at < n) {
		int rc = pcre2_match(w->b->re, (PCRE2_SPTR)text, n, at, PCRE2_NO_UTF_CHECK, w->md,
				     w->mc);
		if (rc < 0) {
			PCRE2_UCHAR msg[256];
			pcre2_get_error_message(rc, msg, sizeof msg);
			return ERR(e, rc == PCRE2_ERROR_NOMATCH ? ERR_DATA : ERR_NOMEM, "tokenizer: "
				   "pre-tokenization at byte %zu: %s", (size_t)at,
				   rc == PCRE2_ERROR_NOMATCH ? "no piece matches" : (const char *)msg);
		}
		PCRE2_SIZE *ov = pcre2_get_ovector_pointer(w->md);
		/* the pattern matches every character, so pieces follow each other */
		if (ov[0] != at || ov[1] <= ov[0])
			return ERR(e, ERR_DATA, "tokenizer: pre-tokenization skipped or matched "
				   "nothing at byte %zu", (size_t)at);
		ERR_TRY(encode_piece(w, text + ov[0], ov[1] - ov[0], out, e));
		at = ov[1];
	}
	return ERR_OK;
}
