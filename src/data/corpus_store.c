/*
 * corpus_store: the prepared corpus on disk, corpus.bin and its description data.lock,
 * and how a stored corpus compares with a configuration.
 *
 * corpus.bin, little-endian:
 *     0    8 bytes  magic "DDPTOKC1"
 *     8   64 bytes  data lock, hex
 *     72  u32 CORPUS_FORMAT, i32 n, i32 vocab, i32 total tokens
 *     88  u64 seed, then the 8 i32 of struct corpus_params in declaration order
 *     128 i32 source, eot, split_rule[3], has_mask; 152: 64 bytes files digest; zero to 256
 *     256 i32 offset[n + 1], i32 tokens[total], i32 prefix[n], u8 split[n],
 *         u8 mask[total] when has_mask                                     (end of file)
 * data.lock is a JSON object: format, lock, sequences, vocab, source ("generated" or
 * "arrays", or the file format), parameters (named like the [data] keys; seed as a decimal string, since
 * it may exceed 2^63) and, per split, sequences, tokens and supervised tokens.
 */
#include "corpus_store.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "corpus_le.h"
#include "corpus_lock.h"
#include "digest.h"
#include "fsx.h"
#include "jsonx.h"
#include "outputs.h"
#include "sources.h"

#define CORPUS_MAGIC "DDPTOKC1"
#define CORPUS_HEADER 256

/* the eot a corpus of settings s records: only llm.c shards are cut at it */
static int recorded_eot(const struct settings *s)
{
	return s->source == DATA_LLMC ? s->eot : 0;
}

int corpus_params_diff(const struct corpus_params *p, const struct settings *s, char *out,
		       size_t cap)
{
	enum { SYN = 1, FILES = 2, ANY = 3 };
	const int files = p->source != DATA_SYNTHETIC || s->source != DATA_SYNTHETIC;
	const struct {
		const char *key;
		long long corpus, config;
		int applies;
	} f[] = {
		{"data.source", p->source, s->source, ANY},
		{"run.seed", (long long)p->seed, (long long)s->seed, SYN},
		{"data.train", p->train_count, s->train_count, SYN},
		{"data.validation", p->validation_count, s->validation_count, SYN},
		{"data.test", p->test_count, s->test_count, SYN},
		{"data.min_len", p->min_len, s->min_len, ANY},
		{"data.max_len", p->max_len, s->max_len, ANY},
		/* s->vocab 0: the files' vocabulary, whatever the corpus found in them */
		{files ? "vocabulary (model.vocab or the files' largest id + 1)" : "data.vocab",
		 corpus_user_id(p->source, p->vocab), corpus_user_id(s->source, s->vocab),
		 s->vocab ? ANY : 0},
		{"data.prefix_max", p->prefix_max, s->prefix_max, SYN},
		{"data.branching", p->branching, s->branching, SYN},
		{"data.eot", p->eot, recorded_eot(s), FILES},
		{"data.split (train)", p->split_rule[0], s->split_rule[0], FILES},
		{"data.split (validation)", p->split_rule[1], s->split_rule[1], FILES},
		{"data.split (test)", p->split_rule[2], s->split_rule[2], FILES},
	};
	size_t used = 0;
	int n = 0;
	if (cap)
		out[0] = '\0';
	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
		if (f[i].corpus == f[i].config || !(f[i].applies & (files ? FILES : SYN)))
			continue;
		n++;
		if (used < cap)
			used += (size_t)snprintf(out + used, cap - used, "%s%s: %lld (corpus) != %lld "
						 "(configuration)", used ? "; " : "", f[i].key,
						 f[i].corpus, f[i].config);
	}
	return n;
}

int corpus_params_match(const struct corpus_params *p, const struct settings *s)
{
	return corpus_params_diff(p, s, NULL, 0) == 0;
}

static void params_from_words(struct corpus_params *p, const int32_t w[8])
{
	p->train_count = w[0];
	p->validation_count = w[1];
	p->test_count = w[2];
	p->min_len = w[3];
	p->max_len = w[4];
	p->vocab = w[5];
	p->prefix_max = w[6];
	p->branching = w[7];
}

static int save_bin(const struct corpus *c, const char *path, struct err *e)
{
	size_t total = (size_t)c->offset[c->n];
	size_t size = CORPUS_HEADER + 4 * ((size_t)c->n + 1 + total + (size_t)c->n) + (size_t)c->n +
		      (c->mask ? total : 0);
	uint8_t *buf = malloc(size), *p, fw[CORPUS_FILES_WORDS];
	int32_t w[8];
	int rc;

	if (!buf)
		return ERR(e, ERR_NOMEM, "%s: out of memory", path);
	memset(buf, 0, CORPUS_HEADER);
	memcpy(buf, CORPUS_MAGIC, 8);
	memcpy(buf + 8, c->lock, 64);
	corpus_put_u32(buf + 72, CORPUS_FORMAT);
	corpus_put_u32(buf + 76, (uint32_t)c->n);
	corpus_put_u32(buf + 80, (uint32_t)c->vocab);
	corpus_put_u32(buf + 84, (uint32_t)total);
	corpus_put_u64(buf + 88, c->params.seed);
	corpus_params_words(&c->params, w);
	for (int k = 0; k < 8; k++)
		corpus_put_u32(buf + 96 + 4 * k, (uint32_t)w[k]);
	corpus_files_words(&c->params, fw);
	memcpy(buf + 128, fw, 20);
	corpus_put_u32(buf + 148, c->mask != NULL);
	memcpy(buf + 152, fw + 20, 64);
	p = buf + CORPUS_HEADER;
	for (int i = 0; i <= c->n; i++, p += 4)
		corpus_put_u32(p, (uint32_t)c->offset[i]);
	for (size_t t = 0; t < total; t++, p += 4)
		corpus_put_u32(p, (uint32_t)c->tokens[t]);
	for (int i = 0; i < c->n; i++, p += 4)
		corpus_put_u32(p, (uint32_t)c->prefix[i]);
	memcpy(p, c->split, (size_t)c->n);
	if (c->mask)
		memcpy(p + c->n, c->mask, total);
	rc = fsx_write_atomic(path, buf, size, e);
	free(buf);
	return rc;
}

static int json_set_new(json_t *obj, const char *key, json_t *v, int *bad)
{
	if (!v || json_object_set_new(obj, key, v))
		*bad = 1;
	return *bad;
}

/* The canonical text of data.lock for c (with its final newline) into *out. */
static int lock_text(const struct corpus *c, const char *path, char **out, struct err *e)
{
	json_t *root = json_object(), *par = json_object(), *spl = json_object();
	char seed[32];
	char *text = NULL;
	int bad = !root || !par || !spl;

	snprintf(seed, sizeof seed, "%llu", (unsigned long long)c->params.seed);
	json_set_new(root, "format", json_integer(CORPUS_FORMAT), &bad);
	json_set_new(root, "lock", json_string(c->lock), &bad);
	json_set_new(root, "sequences", json_integer(c->n), &bad);
	json_set_new(root, "vocab", json_integer(c->vocab), &bad);
	json_set_new(root, "source", json_string(c->params.source ?
						 data_source_name(c->params.source) :
						 c->params.vocab ? "generated" : "arrays"), &bad);
	if (c->params.source) {
		char split[48];
		snprintf(split, sizeof split, "%d,%d,%d", c->params.split_rule[0],
			 c->params.split_rule[1], c->params.split_rule[2]);
		json_set_new(root, "files_sha256", json_string(c->params.files), &bad);
		json_set_new(par, "split", json_string(split), &bad);
		json_set_new(par, "eot", json_integer(c->params.eot), &bad);
	}
	json_set_new(par, "seed", json_string(seed), &bad);
	json_set_new(par, "train", json_integer(c->params.train_count), &bad);
	json_set_new(par, "validation", json_integer(c->params.validation_count), &bad);
	json_set_new(par, "test", json_integer(c->params.test_count), &bad);
	json_set_new(par, "min_len", json_integer(c->params.min_len), &bad);
	json_set_new(par, "max_len", json_integer(c->params.max_len), &bad);
	json_set_new(par, "vocab", json_integer(c->params.vocab), &bad);
	json_set_new(par, "prefix_max", json_integer(c->params.prefix_max), &bad);
	json_set_new(par, "branching", json_integer(c->params.branching), &bad);
	for (int k = 0; k < 3; k++) {
		json_t *o = json_object();
		int64_t tok = 0, sup = 0;
		for (int i = c->split_first[k]; i < c->split_first[k] + c->split_count[k]; i++) {
			tok += corpus_len(c, i);
			sup += corpus_supervised(c, i);
		}
		if (!o) {
			bad = 1;
			break;
		}
		json_set_new(o, "sequences", json_integer(c->split_count[k]), &bad);
		json_set_new(o, "tokens", json_integer(tok), &bad);
		json_set_new(o, "supervised", json_integer(sup), &bad);
		json_set_new(spl, data_split_name(k), o, &bad);
	}
	json_set_new(root, "parameters", par, &bad);
	par = NULL;
	json_set_new(root, "splits", spl, &bad);
	spl = NULL;
	if (!bad)
		text = jsonx_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(root);
	if (!text)
		return ERR(e, ERR_DEVICE, "%s: cannot serialize the data lock", path);
	size_t len = strlen(text);
	*out = malloc(len + 2);
	if (!*out) {
		free(text);
		return ERR(e, ERR_NOMEM, "%s: out of memory", path);
	}
	memcpy(*out, text, len);
	memcpy(*out + len, "\n", 2);
	free(text);
	return ERR_OK;
}

static int save_lock(const struct corpus *c, const char *path, struct err *e)
{
	char *text = NULL;
	ERR_TRY(lock_text(c, path, &text, e));
	int rc = fsx_write_atomic(path, text, strlen(text), e);
	free(text);
	return rc;
}

int corpus_save_lock(const struct corpus *c, const char *dir, struct err *e)
{
	char path[FSX_PATH_MAX];
	ERR_TRY(fsx_join(path, sizeof path, dir, OUTPUT_DATA_LOCK, e));
	return save_lock(c, path, e);
}

/* The first key (parameters.KEY, splits.KEY) where the JSON `got` differs from `want`. */
static void first_difference(json_t *want, json_t *got, const char *prefix, char *why,
			     size_t cap)
{
	const char *key;
	json_t *w;
	json_object_foreach(want, key, w) {
		json_t *g = json_object_get(got, key);
		if (json_equal(w, g))
			continue;
		if (json_is_object(w) && json_is_object(g) && !prefix[0])
			return first_difference(w, g, key, why, cap);
		snprintf(why, cap, "its %s%s%s differs", prefix, prefix[0] ? "." : "", key);
		return;
	}
	json_object_foreach(got, key, w)
		if (!json_object_get(want, key)) {
			snprintf(why, cap, "it holds %s%s%s, which corpus.bin does not describe", prefix,
				 prefix[0] ? "." : "", key);
			return;
		}
	snprintf(why, cap, "its text is not the canonical one");
}

int corpus_lock_file_check(const char *dir, const struct corpus *c, char *why, size_t cap,
			   struct err *e)
{
	char path[FSX_PATH_MAX], *want = NULL, *got = NULL;
	size_t len;
	why[0] = '\0';
	ERR_TRY(fsx_join(path, sizeof path, dir, OUTPUT_DATA_LOCK, e));
	if (!fsx_exists(path)) {
		snprintf(why, cap, "it is missing");
		return ERR_OK;
	}
	ERR_TRY(lock_text(c, path, &want, e));
	int rc = fsx_read_all(path, &got, &len, e);
	if (rc == ERR_OK && (len != strlen(want) || memcmp(got, want, len) != 0)) {
		json_t *w = json_loads(want, 0, NULL), *g = json_loadb(got, len, 0, NULL);
		if (!json_is_object(g))
			snprintf(why, cap, "it is not a JSON object");
		else
			first_difference(w, g, "", why, cap);
		json_decref(w);
		json_decref(g);
	}
	free(want);
	free(got);
	return rc;
}

int corpus_save(const struct corpus *c, const struct settings *s, const char *dir,
		struct err *e)
{
	char path[FSX_PATH_MAX];
	int rc;

	if (s && c->params.vocab && !corpus_params_match(&c->params, s))
		return ERR(e, ERR_DATA, "corpus_save: the corpus was built with other [data] "
			   "settings than the ones given");
	rc = fsx_mkdirs(dir, e);
	if (!rc)
		rc = fsx_join(path, sizeof path, dir, OUTPUT_CORPUS_BIN, e);
	if (!rc)
		rc = save_bin(c, path, e);
	/* the lock last: a data.lock on disk always describes the corpus.bin beside it */
	if (!rc)
		rc = corpus_save_lock(c, dir, e);
	return rc;
}

/* source, eot, split rule (bytes 128-147) and the files digest (152-215) of a corpus.bin */
static int load_file_params(const uint8_t *p, const char *path, struct corpus_params *q,
			    struct err *e)
{
	q->source = (int32_t)corpus_get_u32(p + 128);
	q->eot = (int32_t)corpus_get_u32(p + 132);
	for (int k = 0; k < 3; k++)
		q->split_rule[k] = (int32_t)corpus_get_u32(p + 136 + 4 * k);
	memcpy(q->files, p + 152, 64);
	q->files[64] = '\0';
	if (q->source < 0 || q->source >= DATA_SOURCE_COUNT)
		return ERR(e, ERR_DATA, "%s: unknown source %d at byte 128", path, q->source);
	if (q->files[0] ? !digest_is_hex(q->files) : q->source != DATA_SYNTHETIC)
		return ERR(e, ERR_DATA, "%s: bytes 152-215 hold no SHA-256 of the files", path);
	return ERR_OK;
}

/* The parameters in the header p of a corpus.bin (seed at byte 88, words from 96, then
 * load_file_params). */
static int decode_params(const uint8_t *p, const char *path, struct corpus_params *q,
			 struct err *e)
{
	int32_t w[8];
	q->seed = corpus_get_u64(p + 88);
	for (int k = 0; k < 8; k++)
		w[k] = (int32_t)corpus_get_u32(p + 96 + 4 * k);
	params_from_words(q, w);
	return load_file_params(p, path, q, e);
}

/* The arrays of c as views into the mapped corpus.bin p (its layout is the file's,
 * little-endian like the host: see the top of this file): nothing is copied. */
static int map_arrays(const uint8_t *p, int64_t n, int64_t total, int has_mask,
		      struct corpus *c, const char *path, struct err *e)
{
	_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
		       "corpus.bin is mapped as it is stored: little-endian");
	c->n = (int)n;
	if (!(c->supervised = calloc(n > 0 ? (size_t)n : 1, sizeof *c->supervised)))
		return ERR(e, ERR_NOMEM, "%s: out of memory (%" PRId64 " sequences)", path, n);
	p += CORPUS_HEADER; /* 4-byte aligned, as are the i32 arrays that follow */
	c->offset = (int32_t *)(uintptr_t)p;
	c->tokens = c->offset + n + 1;
	c->prefix = c->tokens + total;
	c->split = (uint8_t *)(uintptr_t)(c->prefix + n);
	c->mask = has_mask ? c->split + n : NULL;
	return ERR_OK;
}

/* Decodes corpus.bin (buf, size bytes, mapped from `path`) into c, whose arrays then
 * point into buf. */
static int decode_corpus(const char *path, const char *buf, size_t size, char stored[65],
			 struct corpus *c, struct err *e)
{
	const uint8_t *p = (const uint8_t *)buf;
	if (size < CORPUS_HEADER || memcmp(p, CORPUS_MAGIC, 8) != 0)
		return ERR(e, ERR_DATA, "%s: not a ddptok corpus (bad magic or truncated header)",
			   path);
	if (corpus_get_u32(p + 72) != CORPUS_FORMAT)
		return ERR(e, ERR_DATA, "%s: corpus format %u, this program reads format %d", path,
			   corpus_get_u32(p + 72), CORPUS_FORMAT);
	memcpy(stored, p + 8, 64);
	stored[64] = '\0';
	int64_t n = (int32_t)corpus_get_u32(p + 76), total = (int32_t)corpus_get_u32(p + 84);
	int vocab = (int32_t)corpus_get_u32(p + 80);
	uint32_t has_mask = corpus_get_u32(p + 148);
	if (n < 0 || total < 0)
		return ERR(e, ERR_DATA, "%s: negative sizes in the header", path);
	if (has_mask > 1)
		return ERR(e, ERR_DATA, "%s: mask flag %u at byte 148 (0 or 1)", path, has_mask);
	int64_t need = CORPUS_HEADER + 4 * (n + 1 + total + n) + n + (has_mask ? total : 0);
	if ((int64_t)size != need)
		return ERR(e, ERR_DATA, "%s: %zu bytes, the header announces %" PRId64, path, size,
			   need);
	c->vocab = vocab;
	ERR_TRY(decode_params(p, path, &c->params, e));
	ERR_TRY(map_arrays(p, n, total, (int)has_mask, c, path, e));
	if (c->offset[n] != total)
		return ERR(e, ERR_DATA, "%s: offsets end at %d, the header announces %" PRId64
			   " tokens", path, c->offset[n], total);
	return ERR_OK;
}

/* The content of c against the lock stored in corpus.bin (data.lock only describes it:
 * corpus_lock_file_check). */
static int check_stored_lock(const char *path, const char *stored, const struct corpus *c,
			     struct err *e)
{
	if (strcmp(c->lock, stored) != 0)
		return ERR(e, ERR_DATA, "%s: content does not match its data lock (stored %.12s..., "
			   "computed %.12s...): the file is corrupt", path, stored, c->lock);
	return ERR_OK;
}

int corpus_load(const char *dir, struct corpus *c, struct err *e)
{
	char path[FSX_PATH_MAX], stored[65];
	void *map;
	size_t size;
	int rc;

	memset(c, 0, sizeof *c);
	ERR_TRY(fsx_join(path, sizeof path, dir, OUTPUT_CORPUS_BIN, e));
	ERR_TRY(fsx_map_read(path, &map, &size, e));
	c->map = map;
	c->map_len = size;
	rc = decode_corpus(path, map, size, stored, c, e);
	if (rc == ERR_OK)
		rc = corpus_finish(c, path, e);
	if (rc == ERR_OK)
		rc = check_stored_lock(path, stored, c, e);
	if (rc)
		corpus_free(c);
	else /* the checks read every page: training touches only those it draws */
		fsx_map_release(map, size);
	return rc;
}

int corpus_store_vocab(const char *dir, const struct settings *s)
{
	char path[FSX_PATH_MAX];
	uint8_t h[CORPUS_HEADER];
	struct corpus_params q;
	struct err ignore;
	FILE *f;
	size_t got;
	memset(&q, 0, sizeof q);
	err_clear(&ignore);
	if (fsx_join(path, sizeof path, dir, OUTPUT_CORPUS_BIN, &ignore) || !(f = fopen(path, "rb")))
		return 0;
	got = fread(h, 1, sizeof h, f);
	fclose(f);
	/* a header this program does not read: corpus_load says why when the corpus is opened */
	if (got != sizeof h || memcmp(h, CORPUS_MAGIC, 8) != 0 ||
	    corpus_get_u32(h + 72) != CORPUS_FORMAT || decode_params(h, path, &q, &ignore) ||
	    !corpus_params_match(&q, s))
		return 0;
	return (int32_t)corpus_get_u32(h + 80);
}
