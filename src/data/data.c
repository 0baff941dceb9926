/*
 * data: the shaping rules shared by the readers of the user's token files (see data.h),
 * the memory mapping of those files and the digest of their bytes.
 *
 * Cutting: a document of len > max_len tokens becomes k = ceil(len / max_len) windows
 * of near-equal length (the first len % k windows one token longer), so that no window
 * is a short leftover: each holds at least max_len / 2 tokens. Windows keep their part
 * of the mask and their document's split.
 */
#include "data.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

const char *data_split_name(int split)
{
	static const char *const names[3] = { "train", "validation", "test" };
	return split >= SPLIT_TRAIN && split <= SPLIT_TEST ? names[split] : "invalid";
}

int data_split_parse(const char *name)
{
	for (int k = SPLIT_TRAIN; k <= SPLIT_TEST; k++)
		if (!strcmp(name, data_split_name(k)))
			return k;
	return -1;
}

int data_init(struct data_set *d, const struct data_shape *shape, struct err *e)
{
	memset(d, 0, sizeof *d);
	d->shape = *shape;
	d->stats.max_id = -1;
	if (shape->min_len < 1 || shape->max_len < shape->min_len)
		return ERR(e, ERR_CONFIG, "data: min_len = %d, max_len = %d: need 1 <= min_len "
			   "<= max_len", shape->min_len, shape->max_len);
	if (shape->split_rule[0] < 0 || shape->split_rule[1] < 0 || shape->split_rule[2] < 0 ||
	    shape->split_rule[0] + shape->split_rule[1] + shape->split_rule[2] <= 0)
		return ERR(e, ERR_CONFIG, "data: split rule %d,%d,%d: weights must not be negative "
			   "and must not all be zero", shape->split_rule[0], shape->split_rule[1],
			   shape->split_rule[2]);
	d->offset = calloc(1, sizeof *d->offset);
	if (!d->offset)
		return ERR(e, ERR_NOMEM, "data: out of memory");
	return digest_init(&d->files, e);
}

void data_free(struct data_set *d)
{
	if (!d)
		return;
	free(d->offset);
	free(d->tokens);
	free(d->mask);
	free(d->split);
	free(d->doc);
	digest_free(d->files);
	memset(d, 0, sizeof *d);
}

/* ---- files ------------------------------------------------------------------------ */

int data_map_file(struct data_set *d, const char *path, struct data_map *m, struct err *e)
{
	struct stat st;
	const char *base = strrchr(path, '/');
	uint8_t size_le[8];
	int fd, rc;

	memset(m, 0, sizeof *m);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ERR_ERRNO(e, "%s: cannot open", path);
	if (fstat(fd, &st) != 0) {
		rc = ERR_ERRNO(e, "%s: cannot stat", path);
		close(fd);
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return ERR(e, ERR_DATA, "%s: not a regular file", path);
	}
	m->len = (size_t)st.st_size;
	if (m->len) {
		void *p = mmap(NULL, m->len, PROT_READ, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED) {
			rc = ERR_ERRNO(e, "%s: cannot map", path);
			close(fd);
			memset(m, 0, sizeof *m);
			return rc;
		}
		madvise(p, m->len, MADV_SEQUENTIAL);
		m->p = p;
	}
	close(fd);
	/* name (without directories, so that a moved directory keeps its lock), size, bytes */
	base = base ? base + 1 : path;
	for (int k = 0; k < 8; k++)
		size_le[k] = (uint8_t)((uint64_t)m->len >> (8 * k));
	rc = digest_update(d->files, base, strlen(base) + 1, e);
	if (!rc)
		rc = digest_update(d->files, size_le, 8, e);
	for (size_t at = 0; !rc && at < m->len; at += (size_t)1 << 26) {
		size_t k = m->len - at < (size_t)1 << 26 ? m->len - at : (size_t)1 << 26;
		rc = digest_update(d->files, m->p + at, k, e);
	}
	if (rc)
		data_unmap(m);
	return rc;
}

void data_unmap(struct data_map *m)
{
	if (m->p)
		munmap((void *)m->p, m->len);
	memset(m, 0, sizeof *m);
}

void data_report_read(struct data_set *d, const char *file, uint64_t done, uint64_t total)
{
	if (d->report_read)
		d->report_read(d->report_arg, file, done, total);
}

/* ---- typed integers ------------------------------------------------------------------- */

size_t data_int_size(enum data_int type)
{
	static const size_t size[] = { 1, 1, 2, 2, 4, 4, 8, 8 };
	return size[type];
}

/* the value of element i (little-endian, any alignment); a u64 above INT64_MAX reads as
 * INT64_MAX, which every range check refuses */
int64_t data_int_get(const struct data_ints *v, int64_t i)
{
	const uint8_t *p = (const uint8_t *)v->p + (size_t)i * data_int_size(v->type);
	uint64_t x = 0;
	for (size_t k = data_int_size(v->type); k-- > 0;)
		x = x << 8 | p[k];
	switch (v->type) {
	case DATA_I8: return (int8_t)x;
	case DATA_U8: return (int64_t)x;
	case DATA_I16: return (int16_t)x;
	case DATA_U16: return (int64_t)x;
	case DATA_I32: return (int32_t)x;
	case DATA_U32: return (int64_t)x;
	case DATA_I64: return (int64_t)x;
	case DATA_U64: return x > INT64_MAX ? INT64_MAX : (int64_t)x;
	}
	return INT64_MAX;
}

void data_int_text(const struct data_ints *v, int64_t i, char *out, size_t cap)
{
	uint64_t x;
	if (v->type != DATA_U64) {
		snprintf(out, cap, "%" PRId64, data_int_get(v, i));
		return;
	}
	const uint8_t *p = (const uint8_t *)v->p + (size_t)i * 8;
	x = 0;
	for (size_t k = 8; k-- > 0;)
		x = x << 8 | p[k];
	snprintf(out, cap, "%" PRIu64, x);
}

/* ---- shaping ---------------------------------------------------------------------------- */

/* "file:line: tokens[k]" or "file: token k" for the token at index k of the document */
static void where_token(const struct data_where *w, const char *array, int64_t k, char *out,
			size_t cap)
{
	if (w->line > 0)
		snprintf(out, cap, "%s:%" PRId64 ": %s[%" PRId64 "]", w->file, w->line, array, k);
	else
		snprintf(out, cap, "%s: %s %" PRId64, w->file, array, w->first + k);
}

/* realloc to count elements; *p unchanged on failure */
static int resize(void *pp, int64_t count, size_t elem)
{
	void **p = pp, *q = realloc(*p, (size_t)count * elem);
	if (!q)
		return -1;
	*p = q;
	return 0;
}

/* room for one more sequence of len tokens */
static int reserve(struct data_set *d, int64_t len, struct err *e)
{
	int64_t ntok = d->offset[d->n];
	if (d->n + 2 > d->cap_n) {
		int64_t c = d->cap_n ? d->cap_n * 2 : 1024;
		if (resize(&d->offset, c, sizeof *d->offset) || resize(&d->split, c, 1) ||
		    resize(&d->doc, c, sizeof *d->doc))
			goto oom;
		d->cap_n = c;
	}
	if (ntok + len > d->cap_tokens) {
		int64_t c = d->cap_tokens ? d->cap_tokens : 4096;
		while (c < ntok + len)
			c *= 2;
		if (resize(&d->tokens, c, sizeof *d->tokens) || resize(&d->mask, c, 1))
			goto oom;
		d->cap_tokens = c;
	}
	return ERR_OK;
oom:
	return ERR(e, ERR_NOMEM, "data: out of memory after %" PRId64 " sequences and %" PRId64
		   " tokens", d->n, ntok);
}

/* Appends tokens [from, from + len) of the document (already checked) as one sequence. */
static int append(struct data_set *d, const struct data_ints *tokens,
		  const struct data_ints *mask, int64_t from, int64_t len, int split,
		  struct err *e)
{
	int64_t at = d->offset[d->n], sup = 0;
	int rc = reserve(d, len, e);
	if (rc)
		return rc;
	for (int64_t i = 0; i < len; i++) {
		d->tokens[at + i] = (int32_t)data_int_get(tokens, from + i);
		d->mask[at + i] = mask->p ? (uint8_t)data_int_get(mask, from + i) : 1;
		sup += d->mask[at + i];
	}
	d->split[d->n] = (uint8_t)split;
	d->doc[d->n] = split == DATA_SPLIT_BY_RULE ? d->rule_documents : -1;
	d->offset[d->n + 1] = at + len;
	d->n++;
	d->stats.sequences++;
	d->stats.tokens += len;
	d->stats.supervised += sup;
	return ERR_OK;
}

/* Checks every id and mask value of a document. */
static int check_document(struct data_set *d, const struct data_ints *tokens,
			  const struct data_ints *mask, int64_t len, const struct data_where *w,
			  struct err *e)
{
	int64_t limit = d->shape.vocab > 0 ? d->shape.vocab : DATA_MAX_ID;
	char at[400];
	for (int64_t i = 0; i < len; i++) {
		int64_t id = data_int_get(tokens, i);
		if (id < 0 || id >= limit) {
			char value[32];
			data_int_text(tokens, i, value, sizeof value);
			where_token(w, w->line > 0 ? "tokens" : "token", i, at, sizeof at);
			return ERR(e, ERR_DATA, "%s: id %s outside the vocabulary [0, %" PRId64 ")%s",
				   at, value, limit, d->shape.vocab > 0 ? "" :
				   " (the largest id this program takes)");
		}
		if (id > d->stats.max_id) {
			d->stats.max_id = id;
			where_token(w, w->line > 0 ? "tokens" : "token", i, d->max_where,
				    sizeof d->max_where);
		}
		if (mask->p) {
			int64_t v = data_int_get(mask, i);
			if (v != 0 && v != 1) {
				char value[32];
				struct data_where mw = *w;
				if (w->mask_file)
					mw.file = w->mask_file;
				data_int_text(mask, i, value, sizeof value);
				where_token(&mw, "mask", i, at, sizeof at);
				return ERR(e, ERR_DATA, "%s: mask value %s (0 or 1 expected)", at, value);
			}
		}
	}
	return ERR_OK;
}

int data_add(struct data_set *d, const struct data_ints *tokens, const struct data_ints *mask,
	     int64_t len, int split, const struct data_where *w, struct err *e)
{
	const int64_t max_len = d->shape.max_len;
	int rc;

	if (split != DATA_SPLIT_BY_RULE && (split < 0 || split > SPLIT_TEST))
		return ERR(e, ERR_DATA, "%s: unknown split %d", w->file, split);
	if ((rc = check_document(d, tokens, mask, len, w, e)))
		return rc;
	if (d->offset[d->n] + len > INT32_MAX)
		return ERR(e, ERR_DATA, "%s: more than %d tokens in all", w->file, INT32_MAX);
	d->stats.documents++;
	if (len > max_len) {
		int64_t k = (len + max_len - 1) / max_len, from = 0;
		d->stats.cut++;
		for (int64_t j = 0; j < k; j++) {
			int64_t wlen = len / k + (j < len % k);
			if (wlen < d->shape.min_len)
				d->stats.short_skipped++;
			else if ((rc = append(d, tokens, mask, from, wlen, split, e)))
				return rc;
			from += wlen;
		}
	} else if (len < d->shape.min_len) {
		d->stats.short_skipped++;
	} else if ((rc = append(d, tokens, mask, 0, len, split, e))) {
		return rc;
	}
	if (split == DATA_SPLIT_BY_RULE)
		d->rule_documents++;
	return ERR_OK;
}

/* ---- finishing ------------------------------------------------------------------------------ */

/* The split of a document by the rule: consecutive blocks, train first. */
static int rule_split(const struct data_set *d, int64_t doc)
{
	const int *r = d->shape.split_rule;
	int64_t total = (int64_t)r[0] + r[1] + r[2];
	int64_t end_train = d->rule_documents * r[0] / total;
	int64_t end_validation = d->rule_documents * (r[0] + r[1]) / total;
	return doc < end_train ? SPLIT_TRAIN : doc < end_validation ? SPLIT_VALIDATION : SPLIT_TEST;
}

/* Reorders the sequences train, validation, test, keeping the file order inside each. */
static int order_by_split(struct data_set *d, struct err *e)
{
	int64_t n = d->n, ntok = d->offset[n], count[3], first[3] = {0, 0, 0}, tfirst[3] = {0, 0, 0};
	int64_t *offset = malloc(((size_t)n + 1) * sizeof *offset);
	int32_t *tokens = malloc(((size_t)ntok + 1) * sizeof *tokens);
	uint8_t *mask = malloc((size_t)ntok + 1), *split = malloc((size_t)n + 1);

	if (!offset || !tokens || !mask || !split) {
		free(offset);
		free(tokens);
		free(mask);
		free(split);
		return ERR(e, ERR_NOMEM, "data: out of memory ordering %" PRId64 " sequences", n);
	}
	data_split_counts(d, count);
	first[1] = count[0];
	first[2] = count[0] + count[1];
	for (int64_t i = 0; i < n; i++)
		if (d->split[i] < SPLIT_TEST)
			tfirst[d->split[i] + 1] += d->offset[i + 1] - d->offset[i];
	tfirst[2] += tfirst[1];
	offset[0] = 0;
	for (int64_t i = 0; i < n; i++) {
		int s = d->split[i];
		int64_t len = d->offset[i + 1] - d->offset[i], to = first[s]++;
		memcpy(tokens + tfirst[s], d->tokens + d->offset[i], (size_t)len * sizeof *tokens);
		memcpy(mask + tfirst[s], d->mask + d->offset[i], (size_t)len);
		tfirst[s] += len;
		split[to] = (uint8_t)s;
		offset[to + 1] = len; /* lengths first, summed below */
	}
	for (int64_t i = 0; i < n; i++)
		offset[i + 1] += offset[i];
	free(d->offset);
	free(d->tokens);
	free(d->mask);
	free(d->split);
	d->offset = offset;
	d->tokens = tokens;
	d->mask = mask;
	d->split = split;
	d->cap_n = n + 1;
	d->cap_tokens = ntok + 1;
	return ERR_OK;
}

void data_split_counts(const struct data_set *d, int64_t count[3])
{
	count[0] = count[1] = count[2] = 0;
	for (int64_t i = 0; i < d->n; i++)
		if (d->split[i] <= SPLIT_TEST)
			count[d->split[i]]++;
}

/* The train split must hold a supervised token: without one every window would be
 * declined, and a loss divided by its token count would be NaN. */
static int check_supervised(const struct data_set *d, const char *what, struct err *e)
{
	int64_t supervised = 0, tokens = 0;
	for (int64_t i = 0; i < d->n; i++) {
		if (d->split[i] != SPLIT_TRAIN)
			continue;
		tokens += d->offset[i + 1] - d->offset[i];
		for (int64_t t = d->offset[i]; t < d->offset[i + 1]; t++)
			supervised += d->mask[t];
	}
	if (supervised > 0)
		return ERR_OK;
	return ERR(e, ERR_DATA, "%s: not one supervised token: every loss-mask value of the %"
		   PRId64 " tokens of its train sequences is 0 (%s), so training has nothing to "
		   "learn from", what, tokens, d->stats.supervised > 0 ?
		   "the other splits hold the supervised ones" : "and of every other token too");
}

int data_finish(struct data_set *d, const char *what, struct err *e)
{
	int64_t count[3];
	int rc;

	for (int64_t i = 0; i < d->n; i++)
		if (d->split[i] == DATA_SPLIT_BY_RULE)
			d->split[i] = (uint8_t)rule_split(d, d->doc[i]);
	data_split_counts(d, count);
	for (int k = 0; k < 3; k++)
		if (count[k] == 0)
			return ERR(e, ERR_DATA, "%s: no %s sequence (of %" PRId64 " documents, %"
				   PRId64 " shorter than data.min_len = %d skipped; split rule %d,%d,%d "
				   "for the documents without a split of their own)", what,
				   data_split_name(k), d->stats.documents, d->stats.short_skipped,
				   d->shape.min_len, d->shape.split_rule[0], d->shape.split_rule[1],
				   d->shape.split_rule[2]);
	if ((rc = check_supervised(d, what, e)) || (rc = order_by_split(d, e)))
		return rc;
	rc = digest_final(d->files, d->files_digest, e);
	d->files = NULL;
	return rc;
}
