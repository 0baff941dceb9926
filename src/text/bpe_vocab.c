/*
 * bpe_vocab: loading a byte-level BPE's vocabulary and merges (see bpe_vocab.h).
 */
#include "bpe_vocab.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "fsx.h"

#define NO_BYTE -1

/* GPT-2's bytes_to_unicode, reversed: the byte each code point below 324 stands for */
static void stand_in_bytes(int16_t byte_of[324])
{
	int next = 256;
	for (int cp = 0; cp < 324; cp++)
		byte_of[cp] = NO_BYTE;
	for (int b = 0; b < 256; b++) {
		int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
		byte_of[printable ? b : next++] = (int16_t)b;
	}
}

/* The bytes a vocabulary string stands for, into out (at most 4 bytes per character); the
 * string's own UTF-8 when a character stands for no byte. */
static size_t string_bytes(const int16_t byte_of[324], const char *s, size_t n, char *out)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t w = 0;
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		if (p[i] < 0x80)
			cp = p[i++];
		else if ((p[i] & 0xE0) == 0xC0 && i + 1 < n)
			cp = (uint32_t)(p[i] & 0x1F) << 6 | (p[i + 1] & 0x3F), i += 2;
		else
			break; /* three bytes or more: no stand-in */
		if (cp >= 324 || byte_of[cp] == NO_BYTE)
			break;
		out[w++] = (char)byte_of[cp];
		if (i == n)
			return w;
	}
	memcpy(out, s, n);
	return n;
}

static uint32_t bytes_hash(const char *p, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 16777619u;
	return h;
}

static uint32_t table_size(size_t n)
{
	uint32_t cap = 1024;
	while (cap < 2 * n)
		cap *= 2;
	return cap;
}

/* the id whose bytes are p[0..n), or -1 */
static int32_t id_of(const struct bpe_vocab *v, const char *p, size_t n)
{
	for (uint32_t i = bytes_hash(p, n) & v->by_bytes_mask;; i = (i + 1) & v->by_bytes_mask) {
		int32_t id = v->by_bytes[i];
		if (id < 0 || (v->len[id] == n && !memcmp(v->blob + v->off[id], p, n)))
			return id;
	}
}

static int add_token(struct bpe_vocab *v, int32_t id, const char *p, size_t n)
{
	if (v->blob_len + n > v->blob_cap) {
		size_t cap = v->blob_cap ? v->blob_cap * 2 : 1 << 20;
		while (cap < v->blob_len + n)
			cap *= 2;
		char *b = realloc(v->blob, cap);
		if (!b)
			return -1;
		v->blob = b;
		v->blob_cap = cap;
	}
	memcpy(v->blob + v->blob_len, p, n);
	v->off[id] = (uint32_t)v->blob_len;
	v->len[id] = (uint32_t)n;
	v->blob_len += n;
	return 0;
}

/* The ids of a JSON object { "string": id, ... } (vocab.json, a tokenizer.json's
 * model.vocab), with the table of ids by bytes. */
static int load_ids(struct bpe_vocab *v, const json_t *obj, const char *file, struct err *e)
{
	int16_t byte_of[324];
	const char *key;
	const json_t *val;
	char buf[4096];
	int64_t top = -1;

	stand_in_bytes(byte_of);
	if (!json_is_object(obj) || !json_object_size(obj))
		return ERR(e, ERR_DATA, "%s: the vocabulary is not a JSON object of ids", file);
	json_object_foreach((json_t *)obj, key, val) {
		if (!json_is_integer(val) || json_integer_value(val) < 0 ||
		    json_integer_value(val) >= (1 << 30))
			return ERR(e, ERR_DATA, "%s: \"%s\": not an id", file, key);
		if (json_integer_value(val) > top)
			top = json_integer_value(val);
	}
	v->n = (int32_t)top + 1;
	v->off = malloc(sizeof *v->off * (size_t)v->n);
	v->len = calloc((size_t)v->n, sizeof *v->len);
	v->by_bytes_mask = table_size((size_t)v->n) - 1;
	v->by_bytes = malloc(sizeof *v->by_bytes * (v->by_bytes_mask + 1));
	if (!v->off || !v->len || !v->by_bytes)
		return ERR(e, ERR_NOMEM, "%s: out of memory", file);
	memset(v->off, 0xFF, sizeof *v->off * (size_t)v->n);
	memset(v->by_bytes, 0xFF, sizeof *v->by_bytes * (v->by_bytes_mask + 1));
	json_object_foreach((json_t *)obj, key, val) {
		int32_t id = (int32_t)json_integer_value(val);
		size_t klen = strlen(key);
		if (klen > sizeof buf)
			return ERR(e, ERR_DATA, "%s: a token of %zu bytes is too long", file, klen);
		size_t n = string_bytes(byte_of, key, klen, buf);
		if (v->off[id] != UINT32_MAX || id_of(v, buf, n) >= 0)
			return ERR(e, ERR_DATA, "%s: \"%s\" (id %d): an id or token given twice",
				   file, key, id);
		if (add_token(v, id, buf, n))
			return ERR(e, ERR_NOMEM, "%s: out of memory", file);
		uint32_t i = bytes_hash(buf, n) & v->by_bytes_mask;
		while (v->by_bytes[i] >= 0)
			i = (i + 1) & v->by_bytes_mask;
		v->by_bytes[i] = id;
	}
	for (int b = 0; b < 256; b++) {
		char c = (char)b;
		if ((v->byte_id[b] = id_of(v, &c, 1)) < 0)
			return ERR(e, ERR_DATA, "%s: byte %d has no token: not a byte-level "
				   "vocabulary", file, b);
	}
	v->eot = id_of(v, "<|endoftext|>", 13);
	return ERR_OK;
}

static int alloc_merges(struct bpe_vocab *v, size_t n, const char *file, struct err *e)
{
	v->merges_mask = table_size(n) - 1;
	v->merges = malloc(sizeof *v->merges * (v->merges_mask + 1));
	if (!v->merges)
		return ERR(e, ERR_NOMEM, "%s: out of memory", file);
	for (uint32_t i = 0; i <= v->merges_mask; i++)
		v->merges[i] = (struct bpe_merge){ 0, BPE_NO_RANK, -1 };
	return ERR_OK;
}

/* Adds the merge of left and right (their stand-in spellings), of rank n_merges; `where`
 * names the file and the line or index for messages. */
static int add_merge(struct bpe_vocab *v, const char *left, size_t nl, const char *right,
		     size_t nr, const char *where, struct err *e)
{
	int16_t byte_of[324];
	char a[4096], b[4096 * 2];
	int32_t ia, ib, im, merged;
	if (nl > sizeof a / 4 || nr > sizeof a / 4)
		return ERR(e, ERR_DATA, "%s: a merge of tokens too long", where);
	stand_in_bytes(byte_of);
	size_t na = string_bytes(byte_of, left, nl, a), nb = string_bytes(byte_of, right, nr, b);
	ia = id_of(v, a, na);
	ib = id_of(v, b, nb);
	memmove(b + na, b, nb);
	memcpy(b, a, na);
	im = id_of(v, b, na + nb);
	if (ia < 0 || ib < 0 || im < 0)
		return ERR(e, ERR_DATA, "%s: \"%.*s %.*s\": %s is not in the vocabulary", where,
			   (int)nl, left, (int)nr, right, ia < 0 ? "the left token" : ib < 0 ?
			   "the right token" : "the merged token");
	if (bpe_vocab_merge(v, ia, ib, &merged) != BPE_NO_RANK)
		return ERR_OK; /* a pair given twice keeps its first rank */
	uint64_t pair = (uint64_t)(uint32_t)ia << 32 | (uint32_t)ib;
	uint32_t i = (uint32_t)((pair * 0x9E3779B97F4A7C15ull) >> 32) & v->merges_mask;
	while (v->merges[i].rank != BPE_NO_RANK)
		i = (i + 1) & v->merges_mask;
	v->merges[i] = (struct bpe_merge){ pair, v->n_merges++, im };
	return ERR_OK;
}

/* merges.txt: an optional "#version" line, then "left right" per line */
static int load_merges_txt(struct bpe_vocab *v, const char *path, struct err *e)
{
	char *text = NULL, where[1200];
	size_t len, lines = 1;
	int rc = fsx_read_all(path, &text, &len, e);
	if (rc)
		return rc;
	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	rc = alloc_merges(v, lines, path, e);
	char *p = text, *end = text + len;
	for (size_t line = 1; !rc && p < end; line++) {
		char *nl = memchr(p, '\n', (size_t)(end - p)), *stop = nl ? nl : end;
		size_t n = (size_t)(stop - p);
		if (n && p[n - 1] == '\r')
			n--;
		char *sp = memchr(p, ' ', n);
		snprintf(where, sizeof where, "%s:%zu", path, line);
		if (n && !(line == 1 && p[0] == '#')) {
			if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - p)))
				rc = ERR(e, ERR_DATA, "%s: expected two tokens separated by one space", where);
			else
				rc = add_merge(v, p, (size_t)(sp - p), sp + 1, n - (size_t)(sp + 1 - p),
					       where, e);
		}
		p = stop + 1;
	}
	free(text);
	return rc;
}

int bpe_vocab_from_files(struct bpe_vocab *v, const char *vocab_json, const char *merges_txt,
			 struct err *e)
{
	json_error_t jerr;
	memset(v, 0, sizeof *v);
	json_t *obj = json_load_file(vocab_json, 0, &jerr);
	if (!obj)
		return ERR(e, ERR_DATA, "%s:%d: not valid JSON: %s", vocab_json, jerr.line, jerr.text);
	int rc = load_ids(v, obj, vocab_json, e);
	json_decref(obj);
	return rc ? rc : load_merges_txt(v, merges_txt, e);
}

/* a tokenizer.json's model.merges: "left right" strings or [left, right] pairs */
static int load_merges_json(struct bpe_vocab *v, const json_t *arr, const char *file,
			    struct err *e)
{
	char where[1200];
	size_t i;
	const json_t *m;
	if (!json_is_array(arr))
		return ERR(e, ERR_DATA, "%s: model.merges is not an array", file);
	ERR_TRY(alloc_merges(v, json_array_size(arr), file, e));
	json_array_foreach(arr, i, m) {
		const char *l = NULL, *r = NULL;
		size_t nl = 0, nr = 0;
		snprintf(where, sizeof where, "%s: model.merges[%zu]", file, i);
		if (json_is_string(m) && (r = strchr(l = json_string_value(m), ' ')))
			nl = (size_t)(r - l), r++, nr = strlen(r);
		else if (json_is_array(m) && json_array_size(m) == 2 &&
			 json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
			l = json_string_value(json_array_get(m, 0));
			r = json_string_value(json_array_get(m, 1));
			nl = strlen(l), nr = strlen(r);
		} else
			return ERR(e, ERR_DATA, "%s: expected \"left right\" or [left, right]", where);
		ERR_TRY(add_merge(v, l, nl, r, nr, where, e));
	}
	return ERR_OK;
}

/* Only GPT-2's own pre-tokenization gives tiktoken's ids: a tokenizer.json that cuts its
 * text otherwise (a Split of its own pattern, a prefix space) is refused, not misread. */
static int check_pre_tokenizer(const json_t *root, const char *file, struct err *e)
{
	const json_t *pre = json_object_get(root, "pre_tokenizer");
	const char *type = json_string_value(json_object_get(pre, "type"));
	const json_t *regex = json_object_get(pre, "use_regex"),
		     *prefix = json_object_get(pre, "add_prefix_space");
	if (type && !strcmp(type, "ByteLevel") && (!regex || json_is_true(regex)) &&
	    (!prefix || json_is_false(prefix)))
		return ERR_OK;
	return ERR(e, ERR_DATA, "%s: pre_tokenizer %s: kind = gpt2 reads byte-level BPEs cut by "
		   "GPT-2's own pattern (ByteLevel, use_regex, no prefix space) only",
		   file, type ? type : "missing");
}

/* a tokenizer.json's added_tokens that model.vocab lacks (their text as it is) */
static int load_added(struct bpe_vocab *v, const json_t *added, const char *file,
		      struct err *e)
{
	size_t i, extra = 0;
	const json_t *a;
	json_array_foreach(added, i, a) {
		json_int_t id = json_integer_value(json_object_get(a, "id"));
		const char *text = json_string_value(json_object_get(a, "content"));
		if (!text || id < 0 || id >= (1 << 30))
			return ERR(e, ERR_DATA, "%s: added_tokens[%zu]: no id or content", file, i);
		if (id < v->n && v->off[id] != UINT32_MAX)
			continue; /* in model.vocab too */
		if (id >= v->n) {
			uint32_t *off = realloc(v->off, sizeof *off * (size_t)(id + 1));
			if (off)
				v->off = off;
			uint32_t *len = off ? realloc(v->len, sizeof *len * (size_t)(id + 1)) : NULL;
			if (!len)
				return ERR(e, ERR_NOMEM, "%s: out of memory", file);
			v->len = len;
			for (json_int_t k = v->n; k <= id; k++)
				v->off[k] = UINT32_MAX, v->len[k] = 0;
			v->n = (int32_t)id + 1;
		}
		size_t n = strlen(text);
		uint32_t at = bytes_hash(text, n) & v->by_bytes_mask;
		/* the table by bytes was sized for model.vocab: a quarter more keeps it open */
		if (++extra > (v->by_bytes_mask + 1) / 4)
			return ERR(e, ERR_DATA, "%s: more added_tokens than the table holds", file);
		if (id_of(v, text, n) >= 0 || add_token(v, (int32_t)id, text, n))
			return ERR(e, ERR_DATA, "%s: added_tokens[%zu] \"%s\": given twice or out of "
				   "memory", file, i, text);
		while (v->by_bytes[at] >= 0)
			at = (at + 1) & v->by_bytes_mask;
		v->by_bytes[at] = (int32_t)id;
	}
	v->eot = id_of(v, "<|endoftext|>", 13);
	return ERR_OK;
}

int bpe_vocab_from_json(struct bpe_vocab *v, const char *tokenizer_json, struct err *e)
{
	json_error_t jerr;
	memset(v, 0, sizeof *v);
	json_t *root = json_load_file(tokenizer_json, 0, &jerr), *model;
	int rc;
	if (!root)
		return ERR(e, ERR_DATA, "%s:%d: not valid JSON: %s", tokenizer_json, jerr.line,
			   jerr.text);
	model = json_object_get(root, "model");
	const char *type = json_string_value(json_object_get(model, "type"));
	if (!type || strcmp(type, "BPE"))
		rc = ERR(e, ERR_DATA, "%s: model.type is %s, not BPE", tokenizer_json,
			 type ? type : "missing");
	else if (!(rc = check_pre_tokenizer(root, tokenizer_json, e)) &&
		 !(rc = load_ids(v, json_object_get(model, "vocab"), tokenizer_json, e)) &&
		 !(rc = load_merges_json(v, json_object_get(model, "merges"), tokenizer_json, e)))
		rc = load_added(v, json_object_get(root, "added_tokens"), tokenizer_json, e);
	json_decref(root);
	return rc;
}

void bpe_vocab_free(struct bpe_vocab *v)
{
	free(v->off);
	free(v->len);
	free(v->blob);
	free(v->by_bytes);
	free(v->merges);
	memset(v, 0, sizeof *v);
}

const char *bpe_vocab_bytes(const struct bpe_vocab *v, int32_t id, size_t *len)
{
	if (id < 0 || id >= v->n || v->off[id] == UINT32_MAX) {
		*len = 0;
		return NULL;
	}
	*len = v->len[id];
	return v->blob + v->off[id];
}
