/*
 * data_llmc: the token shards of llm.c. A shard is a header of 256 little-endian int32
 *     header[0]  magic: 20240520 (GPT-2 shards, tokens uint16, header[1] = version 1)
 *                    or 20240801 (Llama 3 shards, tokens uint32, header[1] = version 7)
 *     header[2]  number of tokens
 * then the tokens (the rest of the header is zero). A shard is one long stream in which
 * the end-of-text id (data.eot) opens every document; the stream is cut into documents
 * there, each starting with its end-of-text token, which is context only (mask 0): the
 * model is not asked to predict the start of a document from nothing. Tokens before the
 * first end-of-text id form a document of their own.
 *
 * The path is one shard or a directory whose *.bin files are read in name order; each
 * is memory-mapped. The split rule assigns the splits.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_llmc.h"
#include "fsx.h"

#define LLMC_HEADER_INTS 256
#define LLMC_HEADER_BYTES (4 * LLMC_HEADER_INTS)

struct llmc_kind {
	int32_t magic, version;
	enum data_int type;
};

static const struct llmc_kind llmc_kinds[] = {
	{ 20240520, 1, DATA_U16 },
	{ 20240801, 7, DATA_U32 },
};

static int32_t header_int(const uint8_t *p, int k)
{
	const struct data_ints v = { p, DATA_I32 };
	return (int32_t)data_int_get(&v, k);
}

static int parse_header(const char *path, const struct data_map *m, enum data_int *type,
			int64_t *ntok, struct err *e)
{
	const struct llmc_kind *kind = NULL;
	int32_t magic, version;
	if (m->len < LLMC_HEADER_BYTES)
		return ERR(e, ERR_DATA, "%s: truncated header (%zu bytes, %d expected)", path, m->len,
			   LLMC_HEADER_BYTES);
	magic = header_int(m->p, 0);
	version = header_int(m->p, 1);
	for (size_t k = 0; k < sizeof llmc_kinds / sizeof llmc_kinds[0]; k++)
		if (llmc_kinds[k].magic == magic)
			kind = &llmc_kinds[k];
	if (!kind)
		return ERR(e, ERR_DATA, "%s: bad magic %" PRId32 " at byte 0 (20240520 or 20240801 "
			   "expected: not an llm.c shard)", path, magic);
	if (version != kind->version)
		return ERR(e, ERR_DATA, "%s: version %" PRId32 " at byte 4, %" PRId32 " expected "
			   "with magic %" PRId32, path, version, kind->version, magic);
	*type = kind->type;
	*ntok = header_int(m->p, 2);
	if (*ntok < 0 ||
	    (uint64_t)*ntok * data_int_size(*type) != m->len - LLMC_HEADER_BYTES)
		return ERR(e, ERR_DATA, "%s: the header announces %" PRId64 " tokens (byte 8), the "
			   "file holds %zu bytes of tokens", path, *ntok, m->len - LLMC_HEADER_BYTES);
	return ERR_OK;
}

/* Adds the documents of one token stream: each runs from an end-of-text id to the next. */
static int add_stream(struct data_set *d, const char *path, const struct data_ints *tok,
		      int64_t ntok, uint8_t **mask, int64_t *mask_cap, struct err *e)
{
	int64_t start = 0;
	while (start < ntok) {
		int64_t end = start + 1;
		int rc;
		while (end < ntok && data_int_get(tok, end) != d->shape.eot)
			end++;
		if (end - start > *mask_cap) {
			uint8_t *m = realloc(*mask, (size_t)(end - start));
			if (!m)
				return ERR(e, ERR_NOMEM, "%s: out of memory for a document of %" PRId64
					   " tokens", path, end - start);
			memset(m, 1, (size_t)(end - start));
			*mask = m;
			*mask_cap = end - start;
		}
		(*mask)[0] = data_int_get(tok, start) != d->shape.eot;
		struct data_ints t = { (const uint8_t *)tok->p + (size_t)start * data_int_size(tok->type),
				       tok->type };
		struct data_ints m = { *mask, DATA_U8 };
		struct data_where w = { path, 0, start, NULL };
		if ((rc = data_add(d, &t, &m, end - start, DATA_SPLIT_BY_RULE, &w, e)))
			return rc;
		if ((d->stats.documents & 4095) == 0)
			data_report_read(d, path, (uint64_t)end, (uint64_t)ntok);
		start = end;
	}
	return ERR_OK;
}

static int read_shard(struct data_set *d, const char *path, uint8_t **mask, int64_t *mask_cap,
		      struct err *e)
{
	struct data_map m;
	enum data_int type = DATA_U16;
	int64_t ntok = 0;
	int rc = data_map_file(d, path, &m, e);
	if (!rc)
		rc = parse_header(path, &m, &type, &ntok, e);
	if (!rc) {
		struct data_ints tok = { m.p + LLMC_HEADER_BYTES, type };
		rc = add_stream(d, path, &tok, ntok, mask, mask_cap, e);
	}
	data_unmap(&m);
	return rc;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

int data_read_llmc(struct data_set *d, const char *path, struct err *e)
{
	uint8_t *mask = NULL;
	int64_t mask_cap = 0;
	char **names = NULL;
	size_t count = 0, shards = 0;
	int rc;

	if (!fsx_is_dir(path)) {
		rc = read_shard(d, path, &mask, &mask_cap, e);
		free(mask);
		return rc;
	}
	if ((rc = fsx_list_dir(path, &names, &count, e)))
		return rc;
	for (size_t i = 0; !rc && i < count; i++) {
		char file[FSX_PATH_MAX];
		if (!ends_with(names[i], ".bin"))
			continue;
		shards++;
		rc = fsx_join(file, sizeof file, path, names[i], e);
		if (!rc)
			rc = read_shard(d, file, &mask, &mask_cap, e);
	}
	if (!rc && shards == 0)
		rc = ERR(e, ERR_DATA, "%s: no llm.c shard (*.bin) in this directory", path);
	fsx_free_names(names, count);
	free(mask);
	return rc;
}
