/*
 * test-data: the readers of the user's own token files and the shaping rules.
 *
 * The samples under tests/data (tools/make-sample-data.py) hold the same 320 sequences
 * in four formats: each reader must find them all, npy and jsonl must give the very same
 * tokens, masks and splits, megatron the same tokens, llmc the same tokens behind one
 * end-of-text token each. Cutting, skipping, the split rule and the vocabulary check are
 * checked on small hand-made inputs, and every malformed input is refused with ERR_DATA
 * and a message that names the file and the position.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check-run.h"
#include "corpus.h"
#include "corpus_files.h"
#include "corpus_lock.h"
#include "corpus_store.h"
#include "data.h"
#include "data_llmc.h"
#include "data_npy.h"
#include "fsx.h"
#include "model.h"
#include "npy.h"
#include "settings.h"
#include "sources.h"
#include "tokenizer.h"
#include "window_mlp.h"

#ifndef DDPTOK_DATA_DIR
#define DDPTOK_DATA_DIR "tests/data"
#endif

#define SAMPLE_SEQUENCES 320

static const char *data_dir(void)
{
	const char *d = getenv("DDPTOK_DATA_DIR");
	return d && d[0] ? d : DDPTOK_DATA_DIR;
}

static void sample_path(char *out, size_t cap, const char *name)
{
	snprintf(out, cap, "%s/%s", data_dir(), name);
}

static struct data_shape wide_shape(void)
{
	struct data_shape s = { .min_len = 1, .max_len = 100000, .vocab = 0,
				.split_rule = { 8, 1, 1 }, .eot = 0 };
	return s;
}

static int load(int source, const char *path, const struct data_shape *shape,
		struct data_set *d, struct err *e)
{
	int rc;
	err_clear(e);
	rc = data_init(d, shape, e);
	if (!rc)
		rc = data_read(d, source, path, e);
	return rc;
}

static void load_ok(int source, const char *name, const struct data_shape *shape,
		    struct data_set *d)
{
	char path[FSX_PATH_MAX];
	struct err e;
	err_clear(&e);
	sample_path(path, sizeof path, name);
	ck_assert_msg(load(source, path, shape, d, &e) == ERR_OK, "%s: %s", path, e.msg);
}

/* ---- the samples ------------------------------------------------------------------------ */

START_TEST(test_npy_and_jsonl_agree)
{
	struct data_shape shape = wide_shape();
	struct data_set a, b;
	int64_t ca[3];
	load_ok(DATA_NPY, "npy", &shape, &a);
	load_ok(DATA_JSONL, "sample.jsonl", &shape, &b);
	ck_assert_int_eq(a.stats.documents, SAMPLE_SEQUENCES);
	ck_assert_int_eq(a.n, SAMPLE_SEQUENCES);
	ck_assert_int_eq(b.n, a.n);
	ck_assert_int_eq(b.offset[b.n], a.offset[a.n]);
	ck_assert_mem_eq(a.offset, b.offset, (size_t)(a.n + 1) * sizeof *a.offset);
	ck_assert_mem_eq(a.tokens, b.tokens, (size_t)a.offset[a.n] * sizeof *a.tokens);
	ck_assert_mem_eq(a.mask, b.mask, (size_t)a.offset[a.n]);
	ck_assert_mem_eq(a.split, b.split, (size_t)a.n);
	/* the sample masks prompts: some but not all tokens are targets */
	ck_assert_int_gt(a.stats.supervised, a.stats.tokens / 2);
	ck_assert_int_lt(a.stats.supervised, a.stats.tokens);
	/* its own splits, ordered train, validation, test */
	data_split_counts(&a, ca);
	ck_assert_int_gt(ca[0], ca[1]);
	ck_assert_int_gt(ca[1], 0);
	ck_assert_int_gt(ca[2], 0);
	for (int64_t i = 1; i < a.n; i++)
		ck_assert_int_le(a.split[i - 1], a.split[i]);
	ck_assert_str_ne(a.files_digest, b.files_digest);
	data_free(&a);
	data_free(&b);
}
END_TEST

START_TEST(test_megatron_same_tokens)
{
	struct data_shape shape = wide_shape();
	struct data_set a, m;
	shape.split_rule[0] = shape.split_rule[1] = shape.split_rule[2] = 1;
	load_ok(DATA_NPY, "npy", &shape, &a);
	load_ok(DATA_MEGATRON, "megatron/sample", &shape, &m);
	ck_assert_int_eq(m.stats.documents, SAMPLE_SEQUENCES);
	ck_assert_int_eq(m.offset[m.n], a.offset[a.n]);
	ck_assert_int_eq(m.stats.supervised, m.stats.tokens); /* no mask: all targets */
	/* the split rule: consecutive thirds of the documents */
	int64_t c[3];
	data_split_counts(&m, c);
	ck_assert_int_eq(c[0], SAMPLE_SEQUENCES / 3);
	ck_assert_int_eq(c[0] + c[1], 2 * SAMPLE_SEQUENCES / 3);
	/* the rule cuts consecutive blocks of documents, so the sequences stay in file order:
	 * the same tokens as the npy arrays read without finishing (file order) */
	char path[FSX_PATH_MAX];
	struct data_set raw;
	struct err e;
	err_clear(&e);
	sample_path(path, sizeof path, "npy");
	ck_assert_int_eq(data_init(&raw, &shape, &e), ERR_OK);
	ck_assert_int_eq(data_read_npy(&raw, path, &e), ERR_OK);
	ck_assert_mem_eq(m.tokens, raw.tokens, (size_t)m.offset[m.n] * sizeof *m.tokens);
	ck_assert_mem_eq(m.offset, raw.offset, (size_t)(m.n + 1) * sizeof *m.offset);
	data_free(&raw);
	data_free(&a);
	data_free(&m);
}
END_TEST

START_TEST(test_llmc_documents)
{
	struct data_shape shape = wide_shape();
	struct data_set a, l;
	load_ok(DATA_NPY, "npy", &shape, &a);
	load_ok(DATA_LLMC, "llmc/sample.bin", &shape, &l);
	ck_assert_int_eq(l.stats.documents, SAMPLE_SEQUENCES);
	/* one end-of-text token more per document, never a target */
	ck_assert_int_eq(l.offset[l.n], a.offset[a.n] + SAMPLE_SEQUENCES);
	ck_assert_int_eq(l.stats.supervised, l.stats.tokens - SAMPLE_SEQUENCES);
	for (int64_t i = 0; i < l.n; i++) {
		ck_assert_int_eq(l.tokens[l.offset[i]], 0);
		ck_assert_int_eq(l.mask[l.offset[i]], 0);
		for (int64_t t = l.offset[i] + 1; t < l.offset[i + 1]; t++)
			ck_assert_int_ne(l.tokens[t], 0);
	}
	/* a directory of shards reads the same */
	struct data_set dir;
	load_ok(DATA_LLMC, "llmc", &shape, &dir);
	ck_assert_str_eq(dir.files_digest, l.files_digest);
	ck_assert_int_eq(dir.n, l.n);
	data_free(&dir);
	data_free(&a);
	data_free(&l);
}
END_TEST

START_TEST(test_vocab_from_data_and_limit)
{
	struct data_shape shape = wide_shape();
	struct data_set d;
	struct err e;
	err_clear(&e);
	char path[FSX_PATH_MAX];
	load_ok(DATA_JSONL, "sample.jsonl", &shape, &d);
	int64_t max_id = d.stats.max_id;
	ck_assert_int_gt(max_id, 10);
	ck_assert_ptr_nonnull(strstr(d.max_where, "sample.jsonl:"));
	data_free(&d);
	/* a vocabulary one id too small is refused, naming the line and the position */
	shape.vocab = max_id;
	sample_path(path, sizeof path, "sample.jsonl");
	ck_assert_int_eq(load(DATA_JSONL, path, &shape, &d, &e), ERR_DATA);
	ck_assert_ptr_nonnull(strstr(e.msg, "sample.jsonl:"));
	ck_assert_ptr_nonnull(strstr(e.msg, ": tokens["));
	ck_assert_ptr_nonnull(strstr(e.msg, "outside the vocabulary"));
	data_free(&d);
	shape.vocab = max_id + 1;
	load_ok(DATA_JSONL, "sample.jsonl", &shape, &d);
	data_free(&d);
}
END_TEST

START_TEST(test_digest_follows_bytes)
{
	struct data_shape shape = wide_shape();
	struct data_set a, b;
	load_ok(DATA_MEGATRON, "megatron/sample", &shape, &a);
	load_ok(DATA_MEGATRON, "megatron/sample", &shape, &b);
	ck_assert_str_eq(a.files_digest, b.files_digest);
	ck_assert_int_eq(strlen(a.files_digest), 64);
	data_free(&a);
	data_free(&b);
}
END_TEST

/* ---- shaping on hand-made documents ------------------------------------------------------- */

START_TEST(test_cut_and_skip)
{
	struct data_shape shape = { .min_len = 4, .max_len = 8, .vocab = 100,
				    .split_rule = { 1, 1, 1 } };
	struct data_set d;
	struct err e;
	err_clear(&e);
	int32_t tok[20];
	uint8_t mask[20];
	for (int i = 0; i < 20; i++) {
		tok[i] = 10 + i;
		mask[i] = i >= 2;
	}
	struct data_ints t = { tok, DATA_I32 }, m = { mask, DATA_U8 };
	struct data_where w = { "hand", 0, 0, NULL };
	ck_assert_int_eq(data_init(&d, &shape, &e), ERR_OK);
	/* 20 tokens, max_len 8: three windows of 7, 7, 6 */
	ck_assert_int_eq(data_add(&d, &t, &m, 20, SPLIT_TRAIN, &w, &e), ERR_OK);
	ck_assert_int_eq(d.n, 3);
	ck_assert_int_eq(d.offset[1], 7);
	ck_assert_int_eq(d.offset[2], 14);
	ck_assert_int_eq(d.offset[3], 20);
	ck_assert_int_eq(d.tokens[14], 24);
	ck_assert_int_eq(d.mask[0], 0); /* the mask travels with the tokens */
	ck_assert_int_eq(d.mask[7], 1);
	ck_assert_int_eq(d.stats.cut, 1);
	/* 3 tokens < min_len: skipped and counted */
	ck_assert_int_eq(data_add(&d, &t, &m, 3, SPLIT_VALIDATION, &w, &e), ERR_OK);
	ck_assert_int_eq(d.n, 3);
	ck_assert_int_eq(d.stats.short_skipped, 1);
	/* exactly max_len: one sequence, not cut */
	ck_assert_int_eq(data_add(&d, &t, &m, 8, SPLIT_VALIDATION, &w, &e), ERR_OK);
	ck_assert_int_eq(d.n, 4);
	ck_assert_int_eq(d.stats.cut, 1);
	ck_assert_int_eq(d.stats.documents, 3);
	/* no test sequence: an empty split is refused */
	ck_assert_int_eq(data_finish(&d, "hand", &e), ERR_DATA);
	ck_assert_ptr_nonnull(strstr(e.msg, "no test sequence"));
	data_free(&d);
}
END_TEST

START_TEST(test_bad_ids_and_mask)
{
	struct data_shape shape = { .min_len = 1, .max_len = 8, .vocab = 50,
				    .split_rule = { 1, 1, 1 } };
	struct data_set d;
	struct err e;
	err_clear(&e);
	int64_t tok[4] = { 3, 4, 50, 5 }, neg[2] = { 1, -1 };
	uint8_t mask[4] = { 0, 1, 2, 1 };
	struct data_ints t = { tok, DATA_I64 }, m = { NULL, DATA_U8 };
	struct data_where w = { "f.bin", 0, 100, NULL };
	ck_assert_int_eq(data_init(&d, &shape, &e), ERR_OK);
	ck_assert_int_eq(data_add(&d, &t, &m, 4, SPLIT_TRAIN, &w, &e), ERR_DATA);
	ck_assert_ptr_nonnull(strstr(e.msg, "f.bin: token 102: id 50 outside the vocabulary [0, 50)"));
	err_clear(&e);
	t.p = neg;
	ck_assert_int_eq(data_add(&d, &t, &m, 2, SPLIT_TRAIN, &w, &e), ERR_DATA);
	ck_assert_ptr_nonnull(strstr(e.msg, "token 101: id -1"));
	err_clear(&e);
	tok[2] = 5;
	t.p = tok;
	m.p = mask;
	ck_assert_int_eq(data_add(&d, &t, &m, 2, SPLIT_TRAIN, &w, &e), ERR_OK);
	ck_assert_int_eq(data_add(&d, &t, &m, 3, SPLIT_TRAIN, &w, &e), ERR_DATA);
	ck_assert_ptr_nonnull(strstr(e.msg, "f.bin: mask 102: mask value 2"));
	/* a document masked whole is kept, as a sequence with no target (docs/commands.md,
	 * exit 7) */
	{
		uint8_t none_sup[3] = { 0, 0, 0 };
		struct data_ints zm = { none_sup, DATA_U8 };
		int64_t n = d.n, sup = d.stats.supervised;
		ck_assert_int_eq(data_add(&d, &t, &zm, 3, SPLIT_TRAIN, &w, &e), ERR_OK);
		ck_assert_int_eq(d.n, n + 1);
		ck_assert_int_eq(d.stats.supervised, sup);
	}
	/* a mask of its own file is named by that file */
	err_clear(&e);
	w.mask_file = "f.mask";
	ck_assert_int_eq(data_add(&d, &t, &m, 3, SPLIT_TRAIN, &w, &e), ERR_DATA);
	ck_assert_ptr_nonnull(strstr(e.msg, "f.mask: mask 102: mask value 2"));
	/* the largest uint64 is printed as it is, not clamped to INT64_MAX */
	err_clear(&e);
	uint64_t big[2] = { 3, UINT64_MAX };
	struct data_ints u = { big, DATA_U64 }, none = { NULL, DATA_U8 };
	ck_assert_int_eq(data_add(&d, &u, &none, 2, SPLIT_TRAIN, &w, &e), ERR_DATA);
	ck_assert_msg(strstr(e.msg, "f.bin: token 101: id 18446744073709551615 outside") != NULL,
		      "%s", e.msg);
	data_free(&d);
}
END_TEST

/* ---- malformed files ---------------------------------------------------------------------------- */

static char tmp_root[FSX_PATH_MAX - 256];

static void setup_tmp(void)
{
	const char *base = getenv("TMPDIR");
	snprintf(tmp_root, sizeof tmp_root, "%s/ddptok-data-XXXXXX", base && *base ? base : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(tmp_root));
}

static void teardown_tmp(void)
{
	struct err e;
	err_clear(&e);
	fsx_remove_tree(tmp_root, &e);
}

static void put_file(const char *name, const void *data, size_t len)
{
	char path[FSX_PATH_MAX], dir[FSX_PATH_MAX];
	struct err e;
	err_clear(&e);
	snprintf(path, sizeof path, "%s/%s", tmp_root, name);
	ck_assert_int_eq(fsx_dirname(dir, sizeof dir, path, &e), ERR_OK);
	ck_assert_int_eq(fsx_mkdirs(dir, &e), ERR_OK);
	FILE *f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(data, 1, len, f), len);
	fclose(f);
}

static char *slurp(const char *name, size_t *len)
{
	char path[FSX_PATH_MAX], *buf;
	struct err e;
	err_clear(&e);
	sample_path(path, sizeof path, name);
	ck_assert_msg(fsx_read_all(path, &buf, len, &e) == ERR_OK, "%s", e.msg);
	return buf;
}

/* copies a sample file into the temporary directory, optionally cut to keep bytes */
static void copy_sample(const char *name, size_t keep)
{
	size_t len;
	char *buf = slurp(name, &len);
	put_file(name, buf, keep < len ? keep : len);
	free(buf);
}

/* loads tmp_root/name with source and expects ERR_DATA with every fragment in the message */
static void expect_refused(int source, const char *name, const char *frag1, const char *frag2)
{
	struct data_shape shape = wide_shape();
	struct data_set d;
	struct err e;
	err_clear(&e);
	char path[FSX_PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", tmp_root, name);
	ck_assert_int_eq(load(source, path, &shape, &d, &e), ERR_DATA);
	ck_assert_msg(strstr(e.msg, frag1) && (!frag2 || strstr(e.msg, frag2)),
		      "message '%s' lacks '%s' / '%s'", e.msg, frag1, frag2 ? frag2 : "");
	data_free(&d);
}

static void npy_sample_dir(void)
{
	copy_sample("npy/tokens.npy", (size_t)-1);
	copy_sample("npy/offsets.npy", (size_t)-1);
	copy_sample("npy/loss_mask.npy", (size_t)-1);
	copy_sample("npy/split.npy", (size_t)-1);
}

/* an 8-byte little-endian integer at element k of the sample's offsets.npy, rewritten */
static void patch_offset(int k, int64_t v)
{
	size_t len;
	char *buf = slurp("npy/offsets.npy", &len);
	size_t data = len - 8 * (SAMPLE_SEQUENCES + 1);
	memcpy(buf + data + 8 * (size_t)k, &v, 8);
	put_file("npy/offsets.npy", buf, len);
	free(buf);
}

/* the last byte of the sample's file name (its last element, one byte wide), rewritten */
static void patch_last_byte(const char *name, char v)
{
	size_t len;
	char *buf = slurp(name, &len);
	buf[len - 1] = v;
	put_file(name, buf, len);
	free(buf);
}

START_TEST(test_npy_refusals)
{
	npy_sample_dir();
	copy_sample("npy/tokens.npy", 200);
	expect_refused(DATA_NPY, "npy", "tokens.npy", "truncated");
	npy_sample_dir();
	patch_offset(5, 3);
	expect_refused(DATA_NPY, "npy", "offsets.npy", "offsets[5] = 3 is not greater");
	npy_sample_dir();
	patch_offset(SAMPLE_SEQUENCES, 1 << 20);
	expect_refused(DATA_NPY, "npy", "offsets.npy", "past the end");
	npy_sample_dir();
	copy_sample("npy/loss_mask.npy", (size_t)-1);
	{
		size_t len;
		char *buf = slurp("npy/split.npy", &len);
		put_file("npy/loss_mask.npy", buf, len); /* 320 values for ~13k tokens */
		free(buf);
	}
	expect_refused(DATA_NPY, "npy", "loss_mask.npy", "values");
	npy_sample_dir();
	patch_last_byte("npy/split.npy", 3);
	expect_refused(DATA_NPY, "npy", "split.npy", "split[319] = 3");
	/* an invalid mask value is reported against loss_mask.npy, not tokens.npy */
	npy_sample_dir();
	patch_last_byte("npy/loss_mask.npy", 2);
	expect_refused(DATA_NPY, "npy", "loss_mask.npy: mask ", "mask value 2");
	npy_sample_dir();
	{
		const float f[3] = { 5, 6, 7 };
		const size_t shape[1] = { 3 };
		char path[FSX_PATH_MAX];
		struct err e;
		err_clear(&e);
		snprintf(path, sizeof path, "%s/npy/tokens.npy", tmp_root);
		ck_assert_int_eq(npy_write(path, NPY_F32, shape, 1, f, &e), ERR_OK);
	}
	expect_refused(DATA_NPY, "npy", "tokens.npy", "dtype <f4, integers expected");
	npy_sample_dir();
	put_file("npy/tokens.npy", "NUMPY", 5);
	expect_refused(DATA_NPY, "npy", "tokens.npy", "bad magic");
}
END_TEST

/* ---- a corpus without a supervised token to train on ---- */

START_TEST(test_unsupervised_refused)
{
	/* the train sequences all masked, the others not; then every sequence masked */
	static const char some[] =
		"{\"tokens\": [5, 6, 7, 8], \"mask\": [0, 0, 0, 0], \"split\": \"train\"}\n"
		"{\"tokens\": [5, 6, 7, 8], \"mask\": [0, 0, 0, 0], \"split\": \"train\"}\n"
		"{\"tokens\": [5, 6, 7, 8], \"mask\": [0, 1, 1, 1], \"split\": \"validation\"}\n"
		"{\"tokens\": [5, 6, 7, 8], \"mask\": [0, 1, 1, 1], \"split\": \"test\"}\n";
	put_file("masked.jsonl", some, strlen(some));
	expect_refused(DATA_JSONL, "masked.jsonl", "masked.jsonl: not one supervised token",
		       "the 8 tokens of its train sequences is 0 (the other splits hold");
	/* npy: the sample with its loss mask all zeros (one byte per value, after the header
	 * line) */
	npy_sample_dir();
	{
		size_t len;
		char *buf = slurp("npy/loss_mask.npy", &len);
		char *data = memchr(buf, '\n', len);
		ck_assert_ptr_nonnull(data);
		data++;
		memset(data, 0, len - (size_t)(data - buf));
		put_file("npy/loss_mask.npy", buf, len);
		free(buf);
	}
	expect_refused(DATA_NPY, "npy", "npy: not one supervised token", "and of every other "
		       "token too");
	/* one supervised token in the train split is enough */
	static const char one[] =
		"{\"tokens\": [5, 6, 7, 8], \"mask\": [0, 0, 0, 1], \"split\": \"train\"}\n"
		"{\"tokens\": [5, 6, 7, 8], \"mask\": [0, 0, 0, 0], \"split\": \"validation\"}\n"
		"{\"tokens\": [5, 6, 7, 8], \"mask\": [0, 0, 0, 0], \"split\": \"test\"}\n";
	put_file("one.jsonl", one, strlen(one));
	{
		struct data_shape shape = wide_shape();
		struct data_set d;
		struct err e;
		char path[FSX_PATH_MAX];
		snprintf(path, sizeof path, "%s/one.jsonl", tmp_root);
		ck_assert_msg(load(DATA_JSONL, path, &shape, &d, &e) == ERR_OK, "%s", e.msg);
		data_free(&d);
	}
}
END_TEST

START_TEST(test_jsonl_refusals)
{
	static const struct {
		const char *text, *frag;
	} cases[] = {
		{ "{\"tokens\": [5, 6]}\n[1, 2]\n", "bad.jsonl:2: not a JSON object" },
		{ "{\"tokens\": [5, 6]}\n\n{\"tokens\": [5, 6.5]}\n", "bad.jsonl:3: tokens[1] is not an integer" },
		{ "{\"tokens\": [5, \"x\"]}\n", "bad.jsonl:1: tokens[1] is not an integer" },
		{ "{\"tokens\": [5, 6]}\n{\"tokens\": [5, 6\n", "bad.jsonl:2: not valid JSON" },
		{ "{\"text\": \"hello\"}\n", "bad.jsonl:1: no \"tokens\" array" },
		{ "{\"tokens\": [5, 6], \"mask\": [1]}\n", "bad.jsonl:1: \"mask\" must be an array as long" },
		{ "{\"tokens\": [5, 6], \"mask\": [1, 3]}\n", "bad.jsonl:1: mask[1]: mask value 3" },
		{ "{\"tokens\": [5, 6], \"split\": \"dev\"}\n", "bad.jsonl:1: \"split\" must be" },
		{ "{\"tokens\": [5, -6]}\n", "bad.jsonl:1: tokens[1]: id -6 outside" },
		{ "{\"tokens\": [5, 6], \"tokens\": [1]}\n", "bad.jsonl:1: not valid JSON" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		put_file("bad.jsonl", cases[i].text, strlen(cases[i].text));
		expect_refused(DATA_JSONL, "bad.jsonl", cases[i].frag, NULL);
	}
}
END_TEST

static void put_idx(uint64_t version, uint8_t code, uint64_t s, uint64_t dn,
		    const int32_t *sizes, const int64_t *ptr, const int64_t *doc, size_t cut)
{
	uint8_t buf[512];
	size_t n = 0;
	memcpy(buf, "MMIDIDX\0\0", 9);
	n = 9;
	memcpy(buf + n, &version, 8), n += 8;
	buf[n++] = code;
	memcpy(buf + n, &s, 8), n += 8;
	memcpy(buf + n, &dn, 8), n += 8;
	memcpy(buf + n, sizes, 4 * s), n += 4 * s;
	memcpy(buf + n, ptr, 8 * s), n += 8 * s;
	memcpy(buf + n, doc, 8 * dn), n += 8 * dn;
	put_file("m.idx", buf, cut < n ? cut : n);
}

START_TEST(test_megatron_refusals)
{
	const uint16_t bin[9] = { 5, 6, 7, 8, 9, 10, 11, 12, 13 };
	const int32_t sizes[3] = { 2, 3, 4 };
	const int64_t ptr[3] = { 0, 4, 10 }, doc[4] = { 0, 1, 2, 3 }, doc2[3] = { 0, 2, 3 };
	struct data_shape shape = wide_shape();
	struct data_set d;
	struct err e;
	err_clear(&e);
	char prefix[FSX_PATH_MAX];
	snprintf(prefix, sizeof prefix, "%s/m", tmp_root);
	put_file("m.bin", bin, sizeof bin);
	/* a good one first: three documents, then two (sequences 0 and 1 joined) */
	put_idx(1, 8, 3, 4, sizes, ptr, doc, (size_t)-1);
	shape.split_rule[0] = shape.split_rule[1] = shape.split_rule[2] = 1;
	ck_assert_msg(load(DATA_MEGATRON, prefix, &shape, &d, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(d.n, 3);
	data_free(&d);
	put_idx(1, 8, 3, 3, sizes, ptr, doc2, (size_t)-1);
	shape.split_rule[2] = 0;
	ck_assert_msg(load(DATA_MEGATRON, prefix, &shape, &d, &e) == ERR_DATA, "%s", e.msg);
	ck_assert_ptr_nonnull(strstr(e.msg, "no test sequence")); /* two documents, three splits */
	data_free(&d);
	put_idx(1, 8, 3, 4, sizes, ptr, doc, 20);
	expect_refused(DATA_MEGATRON, "m", "m.idx", "truncated header");
	put_idx(1, 8, 3, 4, sizes, ptr, doc, 40);
	expect_refused(DATA_MEGATRON, "m", "m.idx", "needs");
	put_idx(2, 8, 3, 4, sizes, ptr, doc, (size_t)-1);
	expect_refused(DATA_MEGATRON, "m", "m.idx", "version 2 at byte 9");
	put_idx(1, 7, 3, 4, sizes, ptr, doc, (size_t)-1);
	expect_refused(DATA_MEGATRON, "m", "m.idx", "dtype code 7 at byte 17");
	put_idx(1, 4, 3, 4, sizes, ptr, doc, (size_t)-1); /* int32: other pointers */
	expect_refused(DATA_MEGATRON, "m", "m.idx", "pointers[1] = 4, 8 expected");
	{
		const int32_t long_sizes[3] = { 2, 3, 40 };
		put_idx(1, 8, 3, 4, long_sizes, ptr, doc, (size_t)-1);
		expect_refused(DATA_MEGATRON, "m", "m.idx", "sizes[2] takes the sequences to byte 90, "
			       "past the end of");
	}
	{
		const int32_t more[3] = { 2, 3, 3 };
		put_idx(1, 8, 3, 4, more, ptr, doc, (size_t)-1);
		expect_refused(DATA_MEGATRON, "m", "m.idx", "the sizes cover 16 bytes");
	}
	{
		const int64_t bad_ptr[3] = { 0, 4, 12 };
		put_idx(1, 8, 3, 4, sizes, bad_ptr, doc, (size_t)-1);
		expect_refused(DATA_MEGATRON, "m", "m.idx", "pointers[2] = 12, 10 expected");
	}
	{
		const int64_t bad_doc[4] = { 0, 2, 1, 3 };
		put_idx(1, 8, 3, 4, sizes, ptr, bad_doc, (size_t)-1);
		expect_refused(DATA_MEGATRON, "m", "m.idx", "documents[2] = 1");
	}
	{
		uint8_t junk[64];
		memset(junk, 'x', sizeof junk);
		put_file("m.idx", junk, sizeof junk);
		expect_refused(DATA_MEGATRON, "m", "m.idx", "bad magic at byte 0");
	}
}
END_TEST

START_TEST(test_llmc_refusals)
{
	int32_t header[256 + 4];
	memset(header, 0, sizeof header);
	header[0] = 20240520;
	header[1] = 1;
	header[2] = 6;
	uint16_t *tok = (uint16_t *)(header + 256);
	for (int i = 0; i < 6; i++)
		tok[i] = (uint16_t)(i == 3 ? 0 : 10 + i);
	put_file("s.bin", header, 1024 + 12);
	{
		struct data_shape shape = wide_shape();
		struct data_set d;
		struct err e;
		err_clear(&e);
		char path[FSX_PATH_MAX];
		snprintf(path, sizeof path, "%s/s.bin", tmp_root);
		shape.split_rule[0] = 1, shape.split_rule[1] = 1, shape.split_rule[2] = 0;
		ck_assert_int_eq(data_init(&d, &shape, &e), ERR_OK);
		ck_assert_int_eq(data_read_llmc(&d, path, &e), ERR_OK);
		/* tokens before the first end-of-text form a document; the second opens with it */
		ck_assert_int_eq(d.n, 2);
		ck_assert_int_eq(d.offset[1], 3);
		ck_assert_int_eq(d.mask[0], 1);
		ck_assert_int_eq(d.mask[3], 0);
		ck_assert_int_eq(d.stats.supervised, 5);
		data_free(&d);
	}
	put_file("s.bin", header, 1000);
	expect_refused(DATA_LLMC, "s.bin", "s.bin", "truncated header");
	put_file("s.bin", header, 1024 + 10);
	expect_refused(DATA_LLMC, "s.bin", "s.bin", "announces 6 tokens");
	header[1] = 2;
	put_file("s.bin", header, 1024 + 12);
	expect_refused(DATA_LLMC, "s.bin", "s.bin", "version 2 at byte 4");
	header[0] = 1234;
	put_file("s.bin", header, 1024 + 12);
	expect_refused(DATA_LLMC, "s.bin", "s.bin", "bad magic 1234 at byte 0");
	put_file("empty/readme.txt", "x", 1);
	expect_refused(DATA_LLMC, "empty", "no llm.c shard", NULL);
}
END_TEST

START_TEST(test_split_rule_leaves_split_empty)
{
	struct data_shape shape = wide_shape();
	struct data_set d;
	struct err e;
	err_clear(&e);
	char path[FSX_PATH_MAX];
	shape.split_rule[0] = 1;
	shape.split_rule[1] = 0;
	shape.split_rule[2] = 0;
	sample_path(path, sizeof path, "megatron/sample");
	ck_assert_int_eq(load(DATA_MEGATRON, path, &shape, &d, &e), ERR_DATA);
	ck_assert_ptr_nonnull(strstr(e.msg, "no validation sequence"));
	ck_assert_ptr_nonnull(strstr(e.msg, "split rule 1,0,0"));
	data_free(&d);
}
END_TEST

/* ---- the corpus of a file source ---------------------------------------------------------- */

static void file_settings(struct settings *s, int source, const char *name)
{
	memset(s, 0, sizeof *s);
	s->source = source;
	sample_path(s->data_path, sizeof s->data_path, name);
	s->min_len = 4;
	s->max_len = 64;
	s->split_rule[0] = 8;
	s->split_rule[1] = 1;
	s->split_rule[2] = 1;
	s->eot = 0;
}

/* The ids of the targets of sequence id, as the packed and the padded batch lay them out. */
static void check_batch_targets(const struct corpus *c, int id)
{
	struct model_shape m;
	struct model_batch *b;
	struct err e;
	int len = corpus_len(c, id), k = 0;
	err_clear(&e);
	window_mlp_shape(&m, 1, 2, 1, 1); /* the window MLP's batch, two tokens of context */
	ck_assert_int_eq(model_batch_alloc(&m, model_max_rows(&m, 1, len), &b, &e), ERR_OK);
	const int32_t *target = window_mlp_batch_of(b)->target;
	ck_assert_int_eq(model_batch_build(b, c, &id, 1, LAYOUT_PACKED, &e), ERR_OK);
	ck_assert_int_eq(b->rows, corpus_supervised(c, id));
	for (int t = 0; t < len; t++)
		if (c->mask[c->offset[id] + t])
			ck_assert_int_eq(target[k++], c->tokens[c->offset[id] + t]);
	ck_assert_int_eq(k, b->rows);
	ck_assert_int_eq(model_batch_build(b, c, &id, 1, LAYOUT_PADDED, &e), ERR_OK);
	ck_assert_int_eq(b->rows, len);
	for (int t = 0; t < len; t++)
		ck_assert_int_eq(target[t], c->mask[c->offset[id] + t] ? c->tokens[c->offset[id] + t]
								       : -1);
	model_batch_free(b);
}

START_TEST(test_corpus_from_files)
{
	struct settings s;
	struct corpus c, back;
	struct err e;
	char dir[FSX_PATH_MAX];
	int inner = -1;
	err_clear(&e);
	file_settings(&s, DATA_NPY, "npy"); /* s.vocab 0: the files' vocabulary */
	ck_assert_msg(corpus_from_files(&s, &c, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(c.vocab, 96 + DATA_RESERVED); /* the sample's ids are 1..95 */
	ck_assert_int_eq(corpus_model_vocab(&s, &c), 96 + DATA_RESERVED);
	ck_assert_ptr_nonnull(c.mask);
	ck_assert_int_eq(c.params.source, DATA_NPY);
	for (int i = 0; i < c.n; i++) {
		int sup = 0, lead = 0, len = corpus_len(&c, i);
		while (lead < len && !c.mask[c.offset[i] + lead])
			lead++;
		ck_assert_int_eq(c.prefix[i], lead); /* the prefix is the leading masked run */
		for (int t = 0; t < len; t++) {
			sup += c.mask[c.offset[i] + t];
			ck_assert_int_ge(c.tokens[c.offset[i] + t], 1 + DATA_RESERVED);
			if (t > lead && !c.mask[c.offset[i] + t])
				inner = i;
		}
		ck_assert_int_eq(corpus_supervised(&c, i), sup);
	}
	ck_assert_int_ge(inner, 0); /* the sample masks some positions inside sequences */
	check_batch_targets(&c, inner);
	check_batch_targets(&c, 0);
	/* corpus.bin keeps the mask and the files' digest; the lock follows them */
	snprintf(dir, sizeof dir, "%s/corpus", tmp_root);
	ck_assert_msg(corpus_save(&c, &s, dir, &e) == ERR_OK, "%s", e.msg);
	ck_assert_msg(corpus_load(dir, &back, &e) == ERR_OK, "%s", e.msg);
	ck_assert_str_eq(back.lock, c.lock);
	ck_assert_str_eq(back.params.files, c.params.files);
	ck_assert_mem_eq(back.mask, c.mask, (size_t)c.offset[c.n]);
	ck_assert_int_eq(corpus_files_unchanged(&s, &back, &e), ERR_OK);
	corpus_free(&back);
	/* corpus.bin records the vocabulary, for the settings it was prepared from only */
	ck_assert_int_eq(corpus_store_vocab(dir, &s), 96 + DATA_RESERVED);
	s.max_len++;
	ck_assert_int_eq(corpus_store_vocab(dir, &s), 0);
	s.max_len--;
	ck_assert_int_eq(corpus_store_vocab(tmp_root, &s), 0);
	{
		char before[65];
		int last = c.offset[inner] + corpus_len(&c, inner) - 1, sup = c.supervised[inner];
		memcpy(before, c.lock, sizeof before);
		c.mask[last] ^= 1; /* one target more or less */
		ck_assert_int_eq(corpus_finish(&c, "changed", &e), ERR_OK);
		ck_assert_str_ne(c.lock, before);
		ck_assert_int_eq(c.supervised[inner], sup + (c.mask[last] ? 1 : -1));
	}
	corpus_free(&c);
	/* settings that hold a vocabulary the files do not call for are refused, and a
	 * prepared corpus is told apart from them */
	s.vocab = 101;
	ck_assert_int_eq(corpus_from_files(&s, &c, &e), ERR_DATA);
	/* in the user's ids: the files' largest id is 95, the settings' model.vocab 97 */
	ck_assert_ptr_nonnull(strstr(e.msg, "the files call for a vocabulary of 96 ids, the "
				     "settings hold 97"));
	ck_assert_int_eq(corpus_store_vocab(dir, &s), 0);
	/* model.vocab sets the vocabulary, and an id at or above it is refused */
	err_clear(&e);
	s.model_vocab = 50257;
	s.vocab = 50257 + DATA_RESERVED; /* as settings_from_cfg sets it */
	ck_assert_int_eq(corpus_from_files(&s, &c, &e), ERR_OK);
	ck_assert_int_eq(c.vocab, 50261);
	corpus_free(&c);
	s.model_vocab = 90;
	s.vocab = 90 + DATA_RESERVED;
	ck_assert_int_eq(corpus_from_files(&s, &c, &e), ERR_DATA);
	ck_assert_ptr_nonnull(strstr(e.msg, "tokens.npy: token "));
	ck_assert_ptr_nonnull(strstr(e.msg, "outside the vocabulary [0, 90)"));
}
END_TEST

/* [data] source takes exactly the names of settings.h's DATA_SOURCES, each as its enum
 * value, and a wrong one is refused with the table's names listed in order. */
START_TEST(test_source_key_from_table)
{
	char want[256] = "expected one of ", set[64];
	struct cfg cfg;
	struct err e;
	err_clear(&e);
	ck_assert_int_eq(cfg_init(&cfg, settings_keys, &e), ERR_OK);
	for (int i = 0; i < DATA_SOURCE_COUNT; i++) {
		snprintf(set, sizeof set, "data.source=%s", data_source_name(i));
		ck_assert_msg(cfg_set(&cfg, set, &e) == ERR_OK, "%s: %s", set, e.msg);
		ck_assert_int_eq(cfg_enum(&cfg, "data", "source"), i);
		snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", i ? "|" : "",
			 data_source_name(i));
	}
	ck_assert_int_eq(cfg_set(&cfg, "data.source=parquet", &e), ERR_CONFIG);
	ck_assert_msg(strstr(e.msg, want) && !strcmp(strstr(e.msg, want) + strlen(want), ""),
		      "'%s' does not end with '%s'", e.msg, want);
	ck_assert_str_eq(data_source_name(DATA_SOURCE_COUNT), "invalid");
	/* every file source has its reader; the synthetic source has none */
	for (int i = 0; i < DATA_SOURCE_COUNT; i++)
		ck_assert_msg(data_source_has_reader(i) == (i != DATA_SYNTHETIC),
			      "source %s: reader %s", data_source_name(i),
			      data_source_has_reader(i) ? "present" : "missing");
	ck_assert(!data_source_has_reader(DATA_SOURCE_COUNT));
	struct data_set d;
	struct data_shape shape = wide_shape();
	ck_assert_int_eq(load(DATA_SYNTHETIC, "anything", &shape, &d, &e), ERR_CONFIG);
	ck_assert_ptr_nonnull(strstr(e.msg, "source synthetic has no files to read"));
	data_free(&d);
	cfg_free(&cfg);
}
END_TEST

/* Loading a configuration reads no data file: a file source's vocabulary is model.vocab's,
 * or 0 (the files') whatever the files hold, even none; a prepared corpus is compared
 * with such settings without its vocabulary, and with model.vocab's otherwise. */
START_TEST(test_configuration_reads_no_files)
{
	struct cfg cfg;
	struct settings s;
	struct corpus_params p = { .source = DATA_NPY, .min_len = 16, .max_len = 128,
				   .vocab = 100, .split_rule = { 90, 5, 5 } };
	char diff[300];
	struct err e;
	err_clear(&e);
	ck_assert_int_eq(cfg_init(&cfg, settings_keys, &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&cfg, "data.source=npy", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&cfg, "data.path=no/such/directory", &e), ERR_OK);
	ck_assert_msg(settings_from_cfg(&cfg, &s, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(s.vocab, 0);
	ck_assert_int_eq(corpus_params_diff(&p, &s, diff, sizeof diff), 0);
	ck_assert_int_eq(cfg_set(&cfg, "model.vocab=50257", &e), ERR_OK);
	ck_assert_msg(settings_from_cfg(&cfg, &s, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(s.vocab, 50257 + DATA_RESERVED);
	ck_assert_int_eq(corpus_params_diff(&p, &s, diff, sizeof diff), 1);
	ck_assert_str_eq(diff, "vocabulary (model.vocab or the files' largest id + 1): 96 (corpus) "
			 "!= 50257 (configuration)");
	cfg_free(&cfg);
}
END_TEST

/* ---- the text source ------------------------------------------------------------------ */

/* loads tmp_root/name as text with the bytes tokenizer (ids = bytes, end-of-text 256) */
static int load_text(const char *name, const char *delimiter, int split_rule_even,
		     struct data_set *d, struct err *e)
{
	struct tok_spec spec = { TOKENIZER_BYTES, NULL, NULL, NULL, 0 };
	struct data_text x = { NULL, delimiter, 0, 2 };
	struct data_shape shape = wide_shape();
	char path[FSX_PATH_MAX];
	ck_assert_int_eq(tokenizer_open(&x.tok, &spec, e), ERR_OK);
	shape.text = &x;
	if (split_rule_even)
		shape.split_rule[0] = shape.split_rule[1] = shape.split_rule[2] = 1;
	snprintf(path, sizeof path, "%s/%s", tmp_root, name);
	int rc = load(DATA_TEXT, path, &shape, d, e);
	tokenizer_close(x.tok);
	return rc;
}

/* a prompt's ids are context, the completion's and the end-of-text id targets */
START_TEST(test_text_prompt_completion)
{
	const char text[] = "{\"prompt\": \"ab\", \"completion\": \"cd\", \"split\": \"train\"}\n"
			    "\n{\"text\": \"xyz\", \"split\": \"validation\", \"other\": 1}\n"
			    "{\"text\": \"\\u00e9\", \"split\": \"test\"}\n";
	const int32_t want[] = { 'a', 'b', 'c', 'd', 256, 'x', 'y', 'z', 256, 0xc3, 0xa9, 256 };
	const uint8_t mask[] = { 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 };
	struct data_set d;
	struct err e;
	put_file("qa.jsonl", text, sizeof text - 1);
	ck_assert_msg(load_text("qa.jsonl", "", 0, &d, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(d.n, 3);
	ck_assert_int_eq(d.offset[3], 12);
	for (int i = 0; i < 12; i++) {
		ck_assert_int_eq(d.tokens[i], want[i]);
		ck_assert_int_eq(d.mask[i], mask[i]);
	}
	ck_assert_int_eq(d.split[1], SPLIT_VALIDATION);
	data_free(&d);
}
END_TEST

/* documents cut at the delimiter (escapes read), empty ones skipped */
START_TEST(test_text_delimiter)
{
	const char text[] = "one\n\ntwo\n\n\n\nthree";
	struct data_set d;
	struct err e;
	put_file("docs.txt", text, sizeof text - 1);
	ck_assert_msg(load_text("docs.txt", "\\n\\n", 1, &d, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(d.stats.documents, 3);
	ck_assert_int_eq(d.offset[3], 3 + 3 + 5 + 3);
	ck_assert_int_eq(d.tokens[d.offset[2]], 't');
	data_free(&d);
	/* one document per file without one */
	ck_assert_msg(load_text("docs.txt", "", 1, &d, &e) == ERR_DATA, "%s", e.msg);
	ck_assert_msg(strstr(e.msg, "sequence (of 1 documents"), "%s", e.msg);
	data_free(&d);
}
END_TEST

START_TEST(test_text_refusals)
{
	static const struct {
		const char *name, *text, *frag;
	} cases[] = {
		{ "bad.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\", \"completion\": \"c\"}\n",
		  "bad.jsonl:2: both \"text\" and \"completion\"" },
		{ "bad.jsonl", "{\"prompt\": \"a\"}\n", "bad.jsonl:1: expected \"text\", or" },
		{ "bad.jsonl", "{\"text\": 5}\n", "bad.jsonl:1: \"text\" is not a string" },
		{ "bad.jsonl", "{\"text\": \"a\", \"split\": \"dev\"}\n", "bad.jsonl:1: \"split\" must be" },
		{ "bad.jsonl", "{\"text\": \"a\"}\n{\"text\": \"\xff\"}\n", "bad.jsonl: byte 24: not UTF-8" },
		{ "bad.txt", "fine\xe2\x82 text", "bad.txt: byte 4: not UTF-8" },
		{ "empty.txt", "", "no document" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct data_set d;
		struct err e;
		put_file(cases[i].name, cases[i].text, strlen(cases[i].text));
		ck_assert_int_eq(load_text(cases[i].name, "", 1, &d, &e), ERR_DATA);
		ck_assert_msg(strstr(e.msg, cases[i].frag), "'%s' lacks '%s'", e.msg, cases[i].frag);
		data_free(&d);
	}
}
END_TEST

static Suite *data_suite(void)
{
	Suite *s = suite_create("data");
	TCase *tc = tcase_create("samples");
	tcase_add_test(tc, test_npy_and_jsonl_agree);
	tcase_add_test(tc, test_megatron_same_tokens);
	tcase_add_test(tc, test_llmc_documents);
	tcase_add_test(tc, test_vocab_from_data_and_limit);
	tcase_add_test(tc, test_digest_follows_bytes);
	tcase_add_test(tc, test_split_rule_leaves_split_empty);
	tcase_add_test(tc, test_source_key_from_table);
	suite_add_tcase(s, tc);
	tc = tcase_create("shaping");
	tcase_add_test(tc, test_cut_and_skip);
	tcase_add_test(tc, test_bad_ids_and_mask);
	suite_add_tcase(s, tc);
	tc = tcase_create("refusals");
	tcase_add_checked_fixture(tc, setup_tmp, teardown_tmp);
	tcase_add_test(tc, test_npy_refusals);
	tcase_add_test(tc, test_jsonl_refusals);
	tcase_add_test(tc, test_unsupervised_refused);
	tcase_add_test(tc, test_megatron_refusals);
	tcase_add_test(tc, test_llmc_refusals);
	tcase_add_test(tc, test_corpus_from_files);
	tcase_add_test(tc, test_configuration_reads_no_files);
	tcase_add_test(tc, test_text_prompt_completion);
	tcase_add_test(tc, test_text_delimiter);
	tcase_add_test(tc, test_text_refusals);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(data_suite(), 0);
}
