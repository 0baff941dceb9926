/*
 * gpt_hf: the Hugging Face GPT-2 directory (see gpt_hf.h): the table of tensor names, the
 * safetensors header, and the row copies with the Conv1D transposes.
 */
#include "gpt_hf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fsx.h"
#include "gpt_shape.h"
#include "jsonx.h"

#define HF_PREFIX "transformer."
#define HF_WEIGHTS "model.safetensors"
#define HF_CONFIG "config.json"
#define HF_MAX_HEADER (100u << 20) /* the format's own limit on the JSON header */

enum hf_form { HF_TABLE, HF_CONV1D, HF_VECTOR };

/* each tensor of gpt_shape.h by its name in the file; "%d": the layer */
static const struct {
	int tensor;
	const char *name;
	enum hf_form form;
} hf_names[GPT_NTENSORS] = {
	{GPT_WTE, "wte.weight", HF_TABLE},
	{GPT_WPE, "wpe.weight", HF_TABLE},
	{GPT_LN1W, "h.%d.ln_1.weight", HF_VECTOR},
	{GPT_LN1B, "h.%d.ln_1.bias", HF_VECTOR},
	{GPT_QKVW, "h.%d.attn.c_attn.weight", HF_CONV1D},
	{GPT_QKVB, "h.%d.attn.c_attn.bias", HF_VECTOR},
	{GPT_ATTPROJW, "h.%d.attn.c_proj.weight", HF_CONV1D},
	{GPT_ATTPROJB, "h.%d.attn.c_proj.bias", HF_VECTOR},
	{GPT_LN2W, "h.%d.ln_2.weight", HF_VECTOR},
	{GPT_LN2B, "h.%d.ln_2.bias", HF_VECTOR},
	{GPT_FCW, "h.%d.mlp.c_fc.weight", HF_CONV1D},
	{GPT_FCB, "h.%d.mlp.c_fc.bias", HF_VECTOR},
	{GPT_FCPROJW, "h.%d.mlp.c_proj.weight", HF_CONV1D},
	{GPT_FCPROJB, "h.%d.mlp.c_proj.bias", HF_VECTOR},
	{GPT_LNFW, "ln_f.weight", HF_VECTOR},
	{GPT_LNFB, "ln_f.bias", HF_VECTOR},
};

/* One tensor as the file holds it: where its floats start in params, its shape there. */
struct hf_part {
	char name[96];
	float *at;        /* params: model rows in this model's layout */
	int64_t shape[2]; /* in the file; shape[1] 0 for a vector */
	int rows, cols;   /* this model's [rows, cols] of it (transposed for Conv1D) */
	int transposed;
};

/* The part k-th of table entry i (k: the layer, or 0); rows_in_file: wte's user rows or
 * wpe's positions (HF_TABLE) */
static struct hf_part part_of(const struct model_shape *m, float *params, int i, int layer,
			      int rows_in_file, int reserved)
{
	const struct param_info *p = &m->p[hf_names[i].tensor];
	int stacked = strchr(hf_names[i].name, '%') != NULL;
	size_t per = stacked ? p->count / (size_t)GPT_L(m) : p->count;
	struct hf_part q = {.at = params + p->offset + (size_t)layer * per};
	snprintf(q.name, sizeof q.name, hf_names[i].name, layer);
	q.cols = p->cols;
	q.rows = (int)(per / (size_t)p->cols);
	if (hf_names[i].form == HF_TABLE) {
		q.rows = rows_in_file;
		if (hf_names[i].tensor == GPT_WTE)
			q.at += (size_t)reserved * (size_t)p->cols;
		q.shape[0] = q.rows, q.shape[1] = q.cols;
	} else if (hf_names[i].form == HF_CONV1D) {
		q.transposed = 1;
		q.shape[0] = q.cols, q.shape[1] = q.rows; /* [in, out] */
	} else {
		q.rows = 1;
		q.cols = (int)per;
		q.shape[0] = (int64_t)per;
	}
	return q;
}

/* Every part of m, in file order, into parts (n of them); wte with `vocab` user rows, wpe
 * with model.context rows */
static int parts_of(const struct model_shape *m, float *params, int reserved,
		    struct hf_part **parts, int *n, struct err *e)
{
	int L = GPT_L(m), count = 0;
	*parts = calloc((size_t)(4 + 12 * L), sizeof **parts);
	if (!*parts)
		return ERR(e, ERR_NOMEM, "out of memory");
	for (int i = 0; i < GPT_NTENSORS; i++) {
		int stacked = strchr(hf_names[i].name, '%') != NULL;
		int rows = hf_names[i].tensor == GPT_WTE ? m->vocab - reserved : GPT_T(m);
		for (int l = 0; l < (stacked ? L : 1); l++)
			(*parts)[count++] = part_of(m, params, i, l, rows, reserved);
	}
	*n = count;
	return ERR_OK;
}

/* ---- writing ---- */

static json_t *header_json(const struct hf_part *parts, int n)
{
	json_t *h = json_object();
	uint64_t at = 0;
	for (int i = 0; i < n; i++) {
		const struct hf_part *q = &parts[i];
		uint64_t bytes = (uint64_t)q->rows * (uint64_t)q->cols * sizeof(float);
		json_t *shape = q->shape[1] ? json_pack("[I,I]", (json_int_t)q->shape[0],
							(json_int_t)q->shape[1])
					    : json_pack("[I]", (json_int_t)q->shape[0]);
		char name[128];
		snprintf(name, sizeof name, HF_PREFIX "%s", q->name);
		json_object_set_new(h, name, json_pack("{s:s, s:o, s:[I,I]}", "dtype", "F32",
						       "shape", shape, "data_offsets",
						       (json_int_t)at, (json_int_t)(at + bytes)));
		at += bytes;
	}
	json_object_set_new(h, "__metadata__", json_pack("{s:s}", "format", "pt"));
	return h;
}

/* q's floats in the file's order (its transpose for a Conv1D weight) */
static int write_part(struct fsx_writer *w, const struct hf_part *q, struct err *e)
{
	size_t row = (size_t)q->cols;
	if (!q->transposed)
		return fsx_writer_write(w, q->at, (size_t)q->rows * row * sizeof(float), e);
	float *col = malloc(sizeof(float) * (size_t)q->rows);
	if (!col)
		return ERR(e, ERR_NOMEM, "out of memory");
	int rc = ERR_OK;
	for (int i = 0; rc == ERR_OK && i < q->cols; i++) { /* file row i: input i */
		for (int o = 0; o < q->rows; o++)
			col[o] = q->at[(size_t)o * row + (size_t)i];
		rc = fsx_writer_write(w, col, sizeof(float) * (size_t)q->rows, e);
	}
	free(col);
	return rc;
}

static int write_weights(const char *path, const struct hf_part *parts, int n, struct err *e)
{
	json_t *h = header_json(parts, n);
	char *text = json_dumps(h, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(h);
	if (!text)
		return ERR(e, ERR_NOMEM, "out of memory");
	size_t len = strlen(text), padded = (len + 7) / 8 * 8; /* the data 8-byte aligned */
	uint8_t size[8];
	for (int k = 0; k < 8; k++)
		size[k] = (uint8_t)((uint64_t)padded >> (8 * k));
	struct fsx_writer w;
	int rc;
	if (!(rc = fsx_writer_open(&w, path, e)) && !(rc = fsx_writer_write(&w, size, 8, e)) &&
	    !(rc = fsx_writer_write(&w, text, len, e)))
		rc = fsx_writer_write(&w, "        ", padded - len, e);
	for (int i = 0; rc == ERR_OK && i < n; i++)
		rc = write_part(&w, &parts[i], e);
	if (rc == ERR_OK)
		rc = fsx_writer_commit(&w, e);
	if (rc)
		fsx_writer_abort(&w);
	free(text);
	return rc;
}

static int write_config(const char *path, const struct model_shape *m, int reserved,
			struct err *e)
{
	json_t *c = json_pack("{s:[s], s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:f, s:b, s:s}",
			      "architectures", "GPT2LMHeadModel", "model_type", "gpt2",
			      "vocab_size", m->vocab - reserved, "n_positions", GPT_T(m), "n_ctx",
			      GPT_T(m), "n_embd", GPT_C(m), "n_layer", GPT_L(m), "n_head",
			      GPT_H(m), "activation_function", "gelu_new", "layer_norm_epsilon",
			      1e-5, "tie_word_embeddings", 1, "torch_dtype", "float32");
	char *text = jsonx_dumps(c, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(c);
	if (!text)
		return ERR(e, ERR_NOMEM, "out of memory");
	int rc = fsx_write_atomic(path, text, strlen(text), e);
	free(text);
	return rc;
}

int gpt_hf_write(const char *dir, const struct model_shape *m, int reserved,
		 const float *params, struct err *e)
{
	char path[FSX_PATH_MAX];
	struct hf_part *parts;
	int n, rc;
	ERR_TRY(fsx_mkdirs(dir, e));
	ERR_TRY(parts_of(m, (float *)params, reserved, &parts, &n, e));
	if (!(rc = fsx_join(path, sizeof path, dir, HF_WEIGHTS, e)))
		rc = write_weights(path, parts, n, e);
	free(parts);
	if (!rc && !(rc = fsx_join(path, sizeof path, dir, HF_CONFIG, e)))
		rc = write_config(path, m, reserved, e);
	if (rc)
		err_prefix(e, "Hugging Face directory %s", dir);
	return rc;
}

/* ---- reading ---- */

/* config.json's integer `key` (or `alt`) into *out; ERR_DATA naming the file when absent */
static int config_int(json_t *c, const char *path, const char *key, const char *alt, int *out,
		      struct err *e)
{
	json_t *v = json_object_get(c, key);
	if (!v && alt)
		v = json_object_get(c, alt);
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (1 << 24))
		return ERR(e, ERR_DATA, "%s: \"%s\" is missing or not a positive integer", path,
			   key);
	*out = (int)json_integer_value(v);
	return ERR_OK;
}

/* ERR_CONFIG unless have == want (rel "=") or have >= want, naming file, key and setting */
static int fits(const char *path, const char *key, int have, const char *rel, int want,
		const char *setting, struct err *e)
{
	if (rel[0] == '=' ? have == want : have >= want)
		return ERR_OK;
	return ERR(e, ERR_CONFIG, "model.init: %s: \"%s\" = %d, but %s needs %s%d", path, key,
		   have, setting, rel[0] == '=' ? "" : "at least ", want);
}

static int check_config(const char *dir, const struct model_shape *m, int reserved,
			struct err *e)
{
	char path[FSX_PATH_MAX], *text = NULL;
	size_t len;
	int L, H, C, P, V, rc;
	ERR_TRY(fsx_join(path, sizeof path, dir, HF_CONFIG, e));
	ERR_TRY(fsx_read_all(path, &text, &len, e));
	json_t *c = json_loadb(text, len, 0, NULL);
	free(text);
	if (!json_is_object(c))
		rc = ERR(e, ERR_DATA, "%s: not a JSON object", path);
	else if (!(rc = config_int(c, path, "n_layer", NULL, &L, e)) &&
		 !(rc = config_int(c, path, "n_head", NULL, &H, e)) &&
		 !(rc = config_int(c, path, "n_embd", NULL, &C, e)) &&
		 !(rc = config_int(c, path, "n_positions", "n_ctx", &P, e)) &&
		 !(rc = config_int(c, path, "vocab_size", NULL, &V, e)) &&
		 !(rc = fits(path, "n_layer", L, "=", GPT_L(m), "model.layers", e)) &&
		 !(rc = fits(path, "n_head", H, "=", GPT_H(m), "model.heads", e)) &&
		 !(rc = fits(path, "n_embd", C, "=", GPT_C(m), "model.width", e)) &&
		 !(rc = fits(path, "n_positions", P, ">=", GPT_T(m), "model.context", e)))
		rc = fits(path, "vocab_size", V, ">=", m->vocab - reserved,
			  reserved ? "model.vocab (the files' ids)" : "data.vocab", e);
	json_decref(c);
	return rc;
}

static float f16_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023u, bits;
	if (exp == 31)
		bits = sign | 0x7f800000u | (man << 13); /* inf, nan */
	else if (exp)
		bits = sign | ((exp + 112) << 23) | (man << 13);
	else if (!man)
		bits = sign;
	else { /* subnormal: normalize */
		int shift = 0;
		while (!(man & 1024u))
			man <<= 1, shift++;
		bits = sign | ((uint32_t)(113 - shift) << 23) | ((man & 1023u) << 13);
	}
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

/* element k of the data p in dtype `size` bytes (4: F32, 2: BF16 or, half, F16) */
static float element(const uint8_t *p, size_t k, int size, int half)
{
	const uint8_t *b = p + k * (size_t)size;
	uint32_t bits = 0;
	float f;
	if (size == 4) {
		bits = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
		       (uint32_t)b[3] << 24;
	} else {
		uint16_t h = (uint16_t)(b[0] | b[1] << 8);
		if (half)
			return f16_to_float(h);
		bits = (uint32_t)h << 16; /* bfloat16: float32's upper half */
	}
	memcpy(&f, &bits, 4);
	return f;
}

struct hf_file {
	const char *path;
	void *map;
	size_t len;
	json_t *header;
	const uint8_t *data;
	uint64_t data_len;
	const char *converted; /* a dtype other than F32, once met */
};

static int open_weights(const char *dir, struct hf_file *f, char *path, size_t cap,
			struct err *e)
{
	ERR_TRY(fsx_join(path, cap, dir, HF_WEIGHTS, e));
	f->path = path;
	ERR_TRY(fsx_map_read(path, &f->map, &f->len, e));
	const uint8_t *p = f->map;
	uint64_t n = 0;
	for (int k = 0; f->len >= 8 && k < 8; k++)
		n |= (uint64_t)p[k] << (8 * k);
	if (f->len < 8 || n > HF_MAX_HEADER || n > f->len - 8)
		return ERR(e, ERR_DATA, "%s: not a safetensors file (a header of %" PRIu64 " bytes "
			   "in a file of %zu)", path, n, f->len);
	f->header = json_loadb((const char *)p + 8, (size_t)n, 0, NULL);
	if (!json_is_object(f->header))
		return ERR(e, ERR_DATA, "%s: its header is not a JSON object", path);
	f->data = p + 8 + n;
	f->data_len = f->len - 8 - n;
	return ERR_OK;
}

/* the entry of q in the header (with or without the prefix), its dtype's size and kind */
static int find_entry(struct hf_file *f, const struct hf_part *q, json_t **entry, int *size,
		      int *half, struct err *e)
{
	char prefixed[128];
	snprintf(prefixed, sizeof prefixed, HF_PREFIX "%s", q->name);
	*entry = json_object_get(f->header, prefixed);
	if (!*entry)
		*entry = json_object_get(f->header, q->name);
	if (!json_is_object(*entry))
		return ERR(e, ERR_DATA, "%s: no tensor %s", f->path, prefixed);
	const char *dtype = json_string_value(json_object_get(*entry, "dtype"));
	*half = dtype && !strcmp(dtype, "F16");
	*size = dtype && !strcmp(dtype, "F32") ? 4 : *half || (dtype && !strcmp(dtype, "BF16")) ? 2
											      : 0;
	if (!*size)
		return ERR(e, ERR_DATA, "%s: tensor %s has dtype %s; F32, F16 and BF16 are read",
			   f->path, q->name, dtype ? dtype : "(none)");
	if (*size == 2)
		f->converted = *half ? "F16" : "BF16";
	return ERR_OK;
}

/* the data of q's entry, its shape checked: the file's rows (tables may hold more) */
static int entry_data(const struct hf_file *f, const struct hf_part *q, json_t *entry,
		      int size, const uint8_t **data, int64_t *file_rows, struct err *e)
{
	json_t *shape = json_object_get(entry, "shape"), *off = json_object_get(entry, "data_offsets");
	int rank = q->shape[1] ? 2 : 1;
	int64_t s0 = json_integer_value(json_array_get(shape, 0));
	int64_t s1 = rank == 2 ? json_integer_value(json_array_get(shape, 1)) : 1;
	int table = q->shape[1] && !q->transposed;
	if (json_array_size(shape) != (size_t)rank || (table ? s0 < q->shape[0] : s0 != q->shape[0]) ||
	    (rank == 2 && s1 != q->shape[1])) {
		char want[64], *have = json_dumps(shape, JSON_COMPACT);
		if (rank == 2)
			snprintf(want, sizeof want, "[%" PRId64 ", %" PRId64 "]", q->shape[0],
				 q->shape[1]);
		else
			snprintf(want, sizeof want, "[%" PRId64 "]", q->shape[0]);
		int rc = ERR(e, ERR_DATA, "%s: tensor %s has shape %s, this model needs %s%s",
			     f->path, q->name, have ? have : "(none)", want,
			     table ? " (or more rows)" : "");
		free(have);
		return rc;
	}
	json_int_t b = json_integer_value(json_array_get(off, 0));
	json_int_t end = json_integer_value(json_array_get(off, 1));
	if (json_array_size(off) != 2 || b < 0 || end < b || (uint64_t)end > f->data_len ||
	    (uint64_t)(end - b) != (uint64_t)s0 * (uint64_t)s1 * (uint64_t)size)
		return ERR(e, ERR_DATA, "%s: tensor %s: data_offsets do not hold its %" PRId64
			   " values within the file's %" PRIu64 " bytes of data", f->path, q->name,
			   s0 * s1, f->data_len);
	*data = f->data + b;
	*file_rows = s0;
	return ERR_OK;
}

static int read_part(struct hf_file *f, const struct hf_part *q, struct err *e)
{
	json_t *entry;
	const uint8_t *p = NULL;
	int64_t file_rows;
	int size, half;
	ERR_TRY(find_entry(f, q, &entry, &size, &half, e));
	ERR_TRY(entry_data(f, q, entry, size, &p, &file_rows, e));
	size_t cols = (size_t)q->cols, rows = (size_t)q->rows;
	for (size_t r = 0; r < rows; r++)
		for (size_t c = 0; c < cols; c++) /* a Conv1D weight is [in, out]: (c, r) */
			q->at[r * cols + c] = element(p, q->transposed ? c * rows + r : r * cols + c,
						      size, half);
	return ERR_OK;
}

int gpt_hf_load(const char *dir, const struct model_shape *m, int reserved, float *params,
		const char **converted, struct err *e)
{
	char path[FSX_PATH_MAX], what[300];
	struct hf_file f = {0};
	struct hf_part *parts = NULL;
	int n, rc;
	*converted = NULL;
	if ((rc = check_config(dir, m, reserved, e)) || (rc = open_weights(dir, &f, path, sizeof path, e)) ||
	    (rc = parts_of(m, params, reserved, &parts, &n, e)))
		goto done;
	for (int i = 0; rc == ERR_OK && i < n; i++)
		rc = read_part(&f, &parts[i], e);
	if (rc == ERR_OK && model_nonfinite(m, params, what, sizeof what))
		rc = ERR(e, ERR_DATA, "%s: its weights hold %s", path, what);
	*converted = f.converted;
done:
	free(parts);
	json_decref(f.header);
	fsx_unmap(f.map, f.len);
	return rc;
}
