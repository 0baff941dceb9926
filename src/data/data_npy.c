/*
 * data_npy: a directory of NumPy arrays, the format anyone with numpy can write.
 *
 *     tokens.npy     1-D integers, every sequence one after the other
 *     offsets.npy    1-D integers, n + 1 of them: sequence i is tokens[offsets[i]:offsets[i+1]];
 *                    offsets[0] = 0, strictly increasing, the last = len(tokens)
 *     loss_mask.npy  optional, 1-D, as long as tokens, 0 or 1 (bool or integer):
 *                    1 when the token is a target
 *     split.npy      optional, 1-D, n values: 0 train, 1 validation, 2 test
 *                    (absent: the split rule decides)
 * The arrays are read in place from memory-mapped files (runtime/npy.c checks the
 * header and the length).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "data_npy.h"
#include "fsx.h"
#include "npy.h"

struct npy_array {
	char path[FSX_PATH_MAX];
	struct data_map map;
	struct data_ints v;
	int64_t len;
	int present;
};

static int int_type(enum npy_dtype dt, enum data_int *out)
{
	switch (dt) {
	case NPY_I8: *out = DATA_I8; return 0;
	case NPY_U8: *out = DATA_U8; return 0;
	case NPY_BOOL: *out = DATA_U8; return 0;
	case NPY_I16: *out = DATA_I16; return 0;
	case NPY_U16: *out = DATA_U16; return 0;
	case NPY_I32: *out = DATA_I32; return 0;
	case NPY_U32: *out = DATA_U32; return 0;
	case NPY_I64: *out = DATA_I64; return 0;
	case NPY_U64: *out = DATA_U64; return 0;
	case NPY_F32:
	case NPY_F64:
		break;
	}
	return -1;
}

/* Maps dir/name and checks that it holds a 1-D integer (or bool) array. */
static int open_array(struct data_set *d, const char *dir, const char *name, int optional,
		      struct npy_array *a, struct err *e)
{
	enum npy_dtype dt;
	size_t shape[NPY_MAX_DIMS], off;
	int ndim, rc;

	memset(a, 0, sizeof *a);
	if ((rc = fsx_join(a->path, sizeof a->path, dir, name, e)))
		return rc;
	if (optional && !fsx_exists(a->path))
		return ERR_OK;
	if ((rc = data_map_file(d, a->path, &a->map, e)))
		return rc;
	a->present = 1;
	if ((rc = npy_parse(a->map.p, a->map.len, a->path, &dt, shape, &ndim, &off, e)))
		return rc;
	if (ndim != 1)
		return ERR(e, ERR_DATA, "%s: %d dimensions, a 1-D array expected", a->path, ndim);
	if (int_type(dt, &a->v.type))
		return ERR(e, ERR_DATA, "%s: dtype %s, integers expected", a->path,
			   npy_dtype_descr(dt));
	if (shape[0] > (size_t)INT64_MAX / 8)
		return ERR(e, ERR_DATA, "%s: %zu elements are too many", a->path, shape[0]);
	a->v.p = a->map.p + off;
	a->len = (int64_t)shape[0];
	return ERR_OK;
}

/* offsets: at least one, from 0, strictly increasing, ending at the token count */
static int check_offsets(const struct npy_array *off, int64_t ntok, struct err *e)
{
	int64_t prev;
	if (off->len < 1)
		return ERR(e, ERR_DATA, "%s: empty, n + 1 offsets expected", off->path);
	prev = data_int_get(&off->v, 0);
	if (prev != 0)
		return ERR(e, ERR_DATA, "%s: offsets[0] = %" PRId64 ", 0 expected", off->path, prev);
	for (int64_t i = 1; i < off->len; i++) {
		int64_t o = data_int_get(&off->v, i);
		if (o <= prev)
			return ERR(e, ERR_DATA, "%s: offsets[%" PRId64 "] = %" PRId64 " is not greater "
				   "than offsets[%" PRId64 "] = %" PRId64, off->path, i, o, i - 1, prev);
		if (o > ntok)
			return ERR(e, ERR_DATA, "%s: offsets[%" PRId64 "] = %" PRId64 " is past the end "
				   "of the %" PRId64 " tokens", off->path, i, o, ntok);
		prev = o;
	}
	if (prev != ntok)
		return ERR(e, ERR_DATA, "%s: the offsets end at %" PRId64 ", the tokens at %" PRId64,
			   off->path, prev, ntok);
	return ERR_OK;
}

static int check_lengths(const struct npy_array *tok, const struct npy_array *off,
			 const struct npy_array *mask, const struct npy_array *split,
			 struct err *e)
{
	int rc = check_offsets(off, tok->len, e);
	if (rc)
		return rc;
	if (mask->present && mask->len != tok->len)
		return ERR(e, ERR_DATA, "%s: %" PRId64 " values, %s has %" PRId64 " tokens",
			   mask->path, mask->len, tok->path, tok->len);
	if (split->present && split->len != off->len - 1)
		return ERR(e, ERR_DATA, "%s: %" PRId64 " values, %s describes %" PRId64 " sequences",
			   split->path, split->len, off->path, off->len - 1);
	return ERR_OK;
}

static int add_sequences(struct data_set *d, const struct npy_array *tok,
			 const struct npy_array *off, const struct npy_array *mask,
			 const struct npy_array *split, struct err *e)
{
	for (int64_t i = 0; i + 1 < off->len; i++) {
		int64_t from = data_int_get(&off->v, i), to = data_int_get(&off->v, i + 1);
		int s = DATA_SPLIT_BY_RULE, rc;
		struct data_ints t = tok->v, m = mask->v;
		struct data_where w = { tok->path, 0, from, mask->present ? mask->path : NULL };
		if (split->present) {
			int64_t v = data_int_get(&split->v, i);
			if (v < 0 || v > 2)
				return ERR(e, ERR_DATA, "%s: split[%" PRId64 "] = %" PRId64 " (0 train, 1 "
					   "validation or 2 test expected)", split->path, i, v);
			s = (int)v;
		}
		t.p = (const uint8_t *)t.p + (size_t)from * data_int_size(t.type);
		if (m.p)
			m.p = (const uint8_t *)m.p + (size_t)from * data_int_size(m.type);
		if ((rc = data_add(d, &t, &m, to - from, s, &w, e)))
			return rc;
		if ((i & 4095) == 0)
			data_report_read(d, tok->path, (uint64_t)to, (uint64_t)tok->len);
	}
	return ERR_OK;
}

int data_read_npy(struct data_set *d, const char *dir, struct err *e)
{
	struct npy_array tok, off, mask, split;
	int rc;

	memset(&off, 0, sizeof off);
	memset(&mask, 0, sizeof mask);
	memset(&split, 0, sizeof split);
	if (!fsx_is_dir(dir))
		return ERR(e, ERR_DATA, "%s: not a directory (the npy source reads tokens.npy, "
			   "offsets.npy and optionally loss_mask.npy and split.npy in it)", dir);
	rc = open_array(d, dir, "tokens.npy", 0, &tok, e);
	if (!rc)
		rc = open_array(d, dir, "offsets.npy", 0, &off, e);
	if (!rc)
		rc = open_array(d, dir, "loss_mask.npy", 1, &mask, e);
	if (!rc)
		rc = open_array(d, dir, "split.npy", 1, &split, e);
	if (!rc)
		rc = check_lengths(&tok, &off, &mask, &split, e);
	if (!rc)
		rc = add_sequences(d, &tok, &off, &mask, &split, e);
	data_unmap(&tok.map);
	data_unmap(&off.map);
	data_unmap(&mask.map);
	data_unmap(&split.map);
	return rc;
}
