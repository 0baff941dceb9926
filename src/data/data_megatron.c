/*
 * data_megatron: the indexed dataset of Megatron-LM (and of the projects built on it),
 * PREFIX.bin holding the tokens and PREFIX.idx describing them. Both are memory-mapped.
 *
 * PREFIX.idx, little-endian:
 *     0   9 bytes  "MMIDIDX\0\0"
 *     9   u64      version, 1
 *     17  u8       dtype code of the tokens: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
 *                  8 uint16 (6 float64 and 7 float32 are not token ids: refused)
 *     18  u64      S, the number of sequences
 *     26  u64      D, the number of entries of the document index (documents + 1)
 *     34  i32 sizes[S]          tokens per sequence
 *         i64 pointers[S]       byte offset of each sequence in PREFIX.bin
 *         i64 documents[D]      document j is sequences documents[j] .. documents[j+1]-1
 *        (i8 modes[S]           only in multimodal indexes: ignored)
 * Sequences must follow each other in PREFIX.bin (pointer i + 1 = pointer i + size i
 * times the token width, as Megatron's builder writes them) and fill it exactly. Each
 * document becomes one sequence of the corpus (its sequences one after the other); every
 * token is a target; the split rule assigns the splits.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "data_megatron.h"
#include "fsx.h"

#define IDX_MAGIC "MMIDIDX\0\0"
#define IDX_HEADER 34

struct megatron_index {
	char path[FSX_PATH_MAX], bin[FSX_PATH_MAX];
	struct data_map idx, data;
	enum data_int type;
	int64_t sequences, doc_entries;
	struct data_ints sizes, pointers, documents;
};

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t x = 0;
	for (int k = 7; k >= 0; k--)
		x = x << 8 | p[k];
	return x;
}

static int dtype_code(int code, enum data_int *type)
{
	static const int known[9] = { -1, DATA_U8, DATA_I8, DATA_I16, DATA_I32, DATA_I64, -1, -1,
				      DATA_U16 };
	if (code < 1 || code > 8 || known[code] < 0)
		return -1;
	*type = (enum data_int)known[code];
	return 0;
}

static int parse_header(struct megatron_index *x, struct err *e)
{
	const uint8_t *p = x->idx.p;
	uint64_t version, s, dn, need;
	if (x->idx.len < IDX_HEADER)
		return ERR(e, ERR_DATA, "%s: truncated header (%zu bytes, %d expected)", x->path,
			   x->idx.len, IDX_HEADER);
	if (memcmp(p, IDX_MAGIC, 9) != 0)
		return ERR(e, ERR_DATA, "%s: bad magic at byte 0 (not a Megatron index: \"MMIDIDX\" "
			   "expected)", x->path);
	version = get_u64(p + 9);
	if (version != 1)
		return ERR(e, ERR_DATA, "%s: index version %" PRIu64 " at byte 9, 1 expected",
			   x->path, version);
	if (dtype_code(p[17], &x->type))
		return ERR(e, ERR_DATA, "%s: dtype code %u at byte 17 is not an integer token type "
			   "(1-5 or 8)", x->path, p[17]);
	s = get_u64(p + 18);
	dn = get_u64(p + 26);
	if (s > ((uint64_t)1 << 40) || dn > ((uint64_t)1 << 40))
		return ERR(e, ERR_DATA, "%s: %" PRIu64 " sequences and %" PRIu64 " document entries "
			   "(bytes 18-33) are implausible", x->path, s, dn);
	need = IDX_HEADER + 12 * s + 8 * dn;
	if (x->idx.len != need && x->idx.len != need + s)
		return ERR(e, ERR_DATA, "%s: %zu bytes, but its header (%" PRIu64 " sequences, %"
			   PRIu64 " document entries) needs %" PRIu64, x->path, x->idx.len, s, dn,
			   need);
	x->sequences = (int64_t)s;
	x->doc_entries = (int64_t)dn;
	x->sizes = (struct data_ints){ p + IDX_HEADER, DATA_I32 };
	x->pointers = (struct data_ints){ p + IDX_HEADER + 4 * s, DATA_I64 };
	x->documents = (struct data_ints){ p + IDX_HEADER + 12 * s, DATA_I64 };
	return ERR_OK;
}

/* sizes and pointers against the .bin, then the document index */
static int check_index(const struct megatron_index *x, struct err *e)
{
	const int64_t item = (int64_t)data_int_size(x->type);
	int64_t at = 0, prev = 0;
	for (int64_t i = 0; i < x->sequences; i++) {
		int64_t size = data_int_get(&x->sizes, i), ptr = data_int_get(&x->pointers, i);
		if (size < 0)
			return ERR(e, ERR_DATA, "%s: sizes[%" PRId64 "] = %" PRId64 " is negative",
				   x->path, i, size);
		if (ptr != at)
			return ERR(e, ERR_DATA, "%s: pointers[%" PRId64 "] = %" PRId64 ", %" PRId64
				   " expected (the sequences follow each other in %s)", x->path, i,
				   ptr, at, x->bin);
		at += size * item;
		if (at > (int64_t)x->data.len)
			return ERR(e, ERR_DATA, "%s: sizes[%" PRId64 "] takes the sequences to byte %"
				   PRId64 ", past the end of %s (%zu bytes)", x->path, i, at, x->bin,
				   x->data.len);
	}
	if (at != (int64_t)x->data.len)
		return ERR(e, ERR_DATA, "%s: the sizes cover %" PRId64 " bytes, %s has %zu", x->path,
			   at, x->bin, x->data.len);
	if (x->doc_entries < 1 || data_int_get(&x->documents, 0) != 0)
		return ERR(e, ERR_DATA, "%s: the document index must start at 0", x->path);
	for (int64_t j = 1; j < x->doc_entries; j++) {
		int64_t v = data_int_get(&x->documents, j);
		if (v < prev || v > x->sequences)
			return ERR(e, ERR_DATA, "%s: documents[%" PRId64 "] = %" PRId64 " is outside [%"
				   PRId64 ", %" PRId64 "]", x->path, j, v, prev, x->sequences);
		prev = v;
	}
	if (prev != x->sequences)
		return ERR(e, ERR_DATA, "%s: the document index ends at sequence %" PRId64 " of %"
			   PRId64, x->path, prev, x->sequences);
	return ERR_OK;
}

static int add_documents(struct data_set *d, const struct megatron_index *x, struct err *e)
{
	const int64_t item = (int64_t)data_int_size(x->type);
	for (int64_t j = 0; j + 1 < x->doc_entries; j++) {
		int64_t first = data_int_get(&x->documents, j), end = data_int_get(&x->documents, j + 1);
		int64_t from = first < x->sequences ? data_int_get(&x->pointers, first) : 0, len = 0;
		int rc;
		for (int64_t k = first; k < end; k++)
			len += data_int_get(&x->sizes, k);
		struct data_ints t = { x->data.p + from, x->type }, m = { NULL, DATA_U8 };
		struct data_where w = { x->bin, 0, from / item, NULL };
		if ((rc = data_add(d, &t, &m, len, DATA_SPLIT_BY_RULE, &w, e)))
			return rc;
		if ((j & 4095) == 0)
			data_report_read(d, x->bin, (uint64_t)from, x->data.len);
	}
	return ERR_OK;
}

int data_read_megatron(struct data_set *d, const char *prefix, struct err *e)
{
	struct megatron_index x;
	int rc;

	memset(&x, 0, sizeof x);
	if (snprintf(x.path, sizeof x.path, "%s.idx", prefix) >= (int)sizeof x.path ||
	    snprintf(x.bin, sizeof x.bin, "%s.bin", prefix) >= (int)sizeof x.bin)
		return ERR(e, ERR_IO, "%s: path too long", prefix);
	rc = data_map_file(d, x.path, &x.idx, e);
	if (!rc)
		rc = data_map_file(d, x.bin, &x.data, e);
	if (!rc)
		rc = parse_header(&x, e);
	if (!rc)
		rc = check_index(&x, e);
	if (!rc)
		rc = add_documents(d, &x, e);
	data_unmap(&x.idx);
	data_unmap(&x.data);
	return rc;
}
