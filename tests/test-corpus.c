/*
 * test-corpus: the synthetic corpus, its data lock and its files.
 *
 * Checks the shape of a built corpus (split counts, lengths, prefixes, ids), that it is
 * a function of its settings only, that the lock follows the documented serialization
 * (recomputed here with OpenSSL directly), that the Markov source is learnable, and that
 * corpus.bin / data.lock round-trip and refuse corruption.
 */
#include <check.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check-run.h"
#include "corpus.h"
#include "corpus_arrays.h"
#include "corpus_lock.h"
#include "corpus_store.h"
#include "fsx.h"

static void small_settings(struct settings *s)
{
	memset(s, 0, sizeof *s);
	s->seed = 1234;
	s->train_count = 200;
	s->validation_count = 30;
	s->test_count = 40;
	s->min_len = 16;
	s->max_len = 128;
	s->vocab = 68;
	s->prefix_max = 8;
	s->branching = 4;
}

static void build_ok(const struct settings *s, struct corpus *c)
{
	struct err e;
	err_clear(&e);
	ck_assert_msg(corpus_build(s, c, &e) == ERR_OK, "corpus_build: %s", e.msg);
}

static void make_tmpdir(char *dir, size_t cap)
{
	const char *base = getenv("TMPDIR");
	snprintf(dir, cap, "%s/ddptok-corpus-XXXXXX", base && *base ? base : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_tmpdir(const char *dir)
{
	struct err e;
	err_clear(&e);
	ck_assert_int_eq(fsx_remove_tree(dir, &e), ERR_OK);
}

START_TEST(test_split_counts)
{
	struct settings s;
	struct corpus c;

	small_settings(&s);
	build_ok(&s, &c);
	ck_assert_int_eq(c.n, 270);
	ck_assert_int_eq(c.vocab, 68);
	ck_assert_int_eq(c.split_count[SPLIT_TRAIN], 200);
	ck_assert_int_eq(c.split_count[SPLIT_VALIDATION], 30);
	ck_assert_int_eq(c.split_count[SPLIT_TEST], 40);
	ck_assert_int_eq(c.split_first[SPLIT_TRAIN], 0);
	ck_assert_int_eq(c.split_first[SPLIT_VALIDATION], 200);
	ck_assert_int_eq(c.split_first[SPLIT_TEST], 230);
	for (int i = 0; i < c.n; i++) {
		int want = i < 200 ? SPLIT_TRAIN : i < 230 ? SPLIT_VALIDATION : SPLIT_TEST;
		ck_assert_int_eq(c.split[i], want);
	}
	ck_assert_int_eq(strlen(c.lock), 64);
	corpus_free(&c);
}
END_TEST

START_TEST(test_shape_bounds)
{
	struct settings s;
	struct corpus c;
	int seen_min = 1 << 30, seen_max = 0, seen_prefix_max = 0, zero_prefix = 0;

	small_settings(&s);
	build_ok(&s, &c);
	ck_assert_int_eq(c.offset[0], 0);
	for (int i = 0; i < c.n; i++) {
		int len = corpus_len(&c, i);
		ck_assert_int_ge(len, s.min_len);
		ck_assert_int_le(len, s.max_len);
		ck_assert_int_ge(c.prefix[i], 0);
		ck_assert_int_le(c.prefix[i], s.prefix_max);
		ck_assert_int_lt(c.prefix[i], len);
		ck_assert_int_ge(corpus_supervised(&c, i), 1);
		if (len < seen_min)
			seen_min = len;
		if (len > seen_max)
			seen_max = len;
		if (c.prefix[i] > seen_prefix_max)
			seen_prefix_max = c.prefix[i];
		zero_prefix += c.prefix[i] == 0;
	}
	/* the ranges are actually used, not collapsed to one value */
	ck_assert_int_lt(seen_min, 24);
	ck_assert_int_gt(seen_max, 120);
	ck_assert_int_eq(seen_prefix_max, s.prefix_max);
	ck_assert_int_gt(zero_prefix, 0);
	for (int t = 0; t < c.offset[c.n]; t++) {
		ck_assert_int_ge(c.tokens[t], DATA_RESERVED);
		ck_assert_int_lt(c.tokens[t], c.vocab);
	}
	corpus_free(&c);
}
END_TEST

START_TEST(test_prefix_short_sequences)
{
	/* prefix_max larger than the sequences: still at least one supervised position */
	struct settings s;
	struct corpus c;

	small_settings(&s);
	s.min_len = 1;
	s.max_len = 6;
	s.prefix_max = 50;
	build_ok(&s, &c);
	for (int i = 0; i < c.n; i++) {
		ck_assert_int_lt(c.prefix[i], corpus_len(&c, i));
		ck_assert_int_ge(corpus_supervised(&c, i), 1);
	}
	corpus_free(&c);
}
END_TEST

static int corpus_equal(const struct corpus *a, const struct corpus *b)
{
	if (a->n != b->n || a->vocab != b->vocab)
		return 0;
	if (memcmp(a->offset, b->offset, ((size_t)a->n + 1) * sizeof *a->offset))
		return 0;
	if (memcmp(a->tokens, b->tokens, (size_t)a->offset[a->n] * sizeof *a->tokens))
		return 0;
	if (memcmp(a->prefix, b->prefix, (size_t)a->n * sizeof *a->prefix))
		return 0;
	return memcmp(a->split, b->split, (size_t)a->n) == 0;
}

START_TEST(test_determinism)
{
	struct settings s;
	struct corpus a, b, d, f;

	small_settings(&s);
	build_ok(&s, &a);
	build_ok(&s, &b);
	ck_assert(corpus_equal(&a, &b));
	ck_assert_str_eq(a.lock, b.lock);

	s.seed = 1235;
	build_ok(&s, &d);
	ck_assert(!corpus_equal(&a, &d));
	ck_assert_str_ne(a.lock, d.lock);

	/* a parameter that shapes the corpus changes the lock */
	small_settings(&s);
	s.branching = 3;
	build_ok(&s, &f);
	ck_assert_str_ne(a.lock, f.lock);
	corpus_free(&a);
	corpus_free(&b);
	corpus_free(&d);
	corpus_free(&f);
}
END_TEST

/* The documented lock serialization, written independently of corpus.c. */
static void le32(EVP_MD_CTX *ctx, uint32_t v)
{
	unsigned char b[4] = { v & 255, (v >> 8) & 255, (v >> 16) & 255, v >> 24 };
	ck_assert_int_eq(EVP_DigestUpdate(ctx, b, 4), 1);
}

static void reference_lock(const struct corpus *c, const struct settings *s, char out[65])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char md[32];
	unsigned int len = 0;
	uint64_t seed = s ? s->seed : 0;

	ck_assert_ptr_nonnull(ctx);
	ck_assert_int_eq(EVP_DigestInit_ex(ctx, EVP_sha256(), NULL), 1);
	ck_assert_int_eq(EVP_DigestUpdate(ctx, "ddptok-corpus", 13), 1);
	le32(ctx, 2); /* format */
	le32(ctx, (uint32_t)seed);
	le32(ctx, (uint32_t)(seed >> 32));
	le32(ctx, s ? s->train_count : 0);
	le32(ctx, s ? s->validation_count : 0);
	le32(ctx, s ? s->test_count : 0);
	le32(ctx, s ? s->min_len : 0);
	le32(ctx, s ? s->max_len : 0);
	le32(ctx, s ? s->vocab : 0);
	le32(ctx, s ? s->prefix_max : 0);
	le32(ctx, s ? s->branching : 0);
	for (int k = 0; k < 5; k++) /* source, eot, split rule: synthetic, none */
		le32(ctx, 0);
	{
		const uint8_t no_files[64] = { 0 };
		ck_assert_int_eq(EVP_DigestUpdate(ctx, no_files, 64), 1);
	}
	le32(ctx, c->n);
	le32(ctx, c->vocab);
	for (int i = 0; i <= c->n; i++)
		le32(ctx, c->offset[i]);
	for (int t = 0; t < c->offset[c->n]; t++)
		le32(ctx, c->tokens[t]);
	for (int i = 0; i < c->n; i++)
		le32(ctx, c->prefix[i]);
	ck_assert_int_eq(EVP_DigestUpdate(ctx, c->split, c->n), 1);
	ck_assert_int_eq(EVP_DigestUpdate(ctx, "\0", 1), 1); /* no mask */
	ck_assert_int_eq(EVP_DigestFinal_ex(ctx, md, &len), 1);
	ck_assert_int_eq(len, 32);
	EVP_MD_CTX_free(ctx);
	for (int i = 0; i < 32; i++)
		sprintf(out + 2 * i, "%02x", md[i]);
}

START_TEST(test_lock_golden)
{
	struct settings s;
	struct corpus c1, c2;
	char ref[65];

	small_settings(&s);
	s.train_count = 5;
	s.validation_count = 2;
	s.test_count = 1;
	s.min_len = 3;
	s.max_len = 9;
	s.vocab = 12;
	s.prefix_max = 2;
	s.branching = 2;
	s.seed = 0xfedcba9876543210ULL; /* high bits of the seed count too */
	build_ok(&s, &c1);
	build_ok(&s, &c2);
	ck_assert_str_eq(c1.lock, c2.lock);
	reference_lock(&c1, &s, ref);
	ck_assert_str_eq(c1.lock, ref);
	corpus_free(&c1);
	corpus_free(&c2);
}
END_TEST

/* Mean share of the most frequent next token, over the (previous two tokens) contexts
 * seen at least 40 times; *contexts gets their number. */
static double top_share(const struct settings *s, int *contexts)
{
	struct corpus c;
	int v, pairs = 0;
	int *count;
	double share_sum = 0;

	build_ok(s, &c);
	v = c.vocab;
	count = calloc((size_t)v * v * v, sizeof *count);
	ck_assert_ptr_nonnull(count);
	for (int i = 0; i < c.n; i++) {
		int p2 = DATA_BOS, p1 = DATA_BOS;
		for (int t = c.offset[i]; t < c.offset[i + 1]; t++) {
			count[((size_t)p2 * v + p1) * v + c.tokens[t]]++;
			p2 = p1;
			p1 = c.tokens[t];
		}
	}
	for (int a = 0; a < v * v; a++) {
		int total = 0, top = 0;
		for (int k = 0; k < v; k++) {
			int x = count[(size_t)a * v + k];
			total += x;
			if (x > top)
				top = x;
		}
		if (total < 40)
			continue;
		pairs++;
		share_sum += (double)top / total;
	}
	free(count);
	corpus_free(&c);
	*contexts = pairs;
	return pairs ? share_sum / pairs : 0;
}

START_TEST(test_learnable)
{
	/* Conditioned on the two previous tokens, the most frequent next token must take far
	 * more than the 1/(vocab - reserved) a uniform source would give it. */
	struct settings s;
	int pairs;
	double share;

	small_settings(&s);
	s.train_count = 800;
	share = top_share(&s, &pairs);
	ck_assert_int_ge(pairs, 20);
	/* 4 successors weighted 1/(k+1): 0.48 * 0.95 expected; uniform would be 1/64 */
	ck_assert_msg(share > 0.35 && share < 0.7, "mean top share %.3f over %d contexts",
		      share, pairs);

	/* one successor: only the noise leaves the chain */
	s.branching = 1;
	share = top_share(&s, &pairs);
	ck_assert_int_ge(pairs, 20);
	ck_assert_msg(share > 0.9, "branching 1: mean top share %.3f", share);

	/* the widest table the settings allow still builds, and is much flatter */
	s.branching = 64;
	share = top_share(&s, &pairs);
	ck_assert_int_ge(pairs, 5);
	ck_assert_msg(share < 0.35, "branching 64: mean top share %.3f", share);
}
END_TEST

START_TEST(test_bad_settings)
{
	struct settings s;
	struct corpus c;
	struct err e;

	small_settings(&s);
	s.vocab = 20;
	s.branching = 17; /* more than the 16 usable ids */
	err_clear(&e);
	ck_assert_int_eq(corpus_build(&s, &c, &e), ERR_CONFIG);
	ck_assert_ptr_nonnull(strstr(e.msg, "data.branching"));

	small_settings(&s);
	s.min_len = 50;
	s.max_len = 40;
	err_clear(&e);
	ck_assert_int_eq(corpus_build(&s, &c, &e), ERR_CONFIG);

	small_settings(&s);
	s.vocab = DATA_RESERVED;
	err_clear(&e);
	ck_assert_int_eq(corpus_build(&s, &c, &e), ERR_CONFIG);
}
END_TEST

START_TEST(test_from_arrays)
{
	const int32_t len[3] = { 3, 1, 2 };
	const int32_t pre[3] = { 1, 1, 0 };
	int32_t tok[6] = { 4, 5, 6, 7, 8, 9 };
	struct corpus c, d;
	struct err e;
	char ref[65];

	err_clear(&e);
	ck_assert_int_eq(corpus_from_arrays(3, len, pre, tok, 10, &c, &e), ERR_OK);
	ck_assert_int_eq(c.n, 3);
	ck_assert_int_eq(c.split_count[SPLIT_TRAIN], 3);
	ck_assert_int_eq(c.split_count[SPLIT_VALIDATION], 0);
	ck_assert_int_eq(c.split_first[SPLIT_TEST], 3);
	ck_assert_int_eq(corpus_len(&c, 0), 3);
	ck_assert_int_eq(corpus_supervised(&c, 0), 2);
	ck_assert_int_eq(corpus_supervised(&c, 1), 0); /* all prompt: allowed */
	ck_assert_int_eq(c.tokens[c.offset[2] + 1], 9);
	reference_lock(&c, NULL, ref);
	ck_assert_str_eq(c.lock, ref);

	tok[5] = 8;
	ck_assert_int_eq(corpus_from_arrays(3, len, pre, tok, 10, &d, &e), ERR_OK);
	ck_assert_str_ne(c.lock, d.lock);
	corpus_free(&d);

	tok[2] = DATA_PAD; /* reserved */
	ck_assert_int_eq(corpus_from_arrays(3, len, pre, tok, 10, &d, &e), ERR_DATA);
	tok[2] = 10; /* out of the vocabulary */
	err_clear(&e);
	ck_assert_int_eq(corpus_from_arrays(3, len, pre, tok, 10, &d, &e), ERR_DATA);
	tok[2] = 6;
	{
		const int32_t bad_pre[3] = { 4, 0, 0 };
		err_clear(&e);
		ck_assert_int_eq(corpus_from_arrays(3, len, bad_pre, tok, 10, &d, &e), ERR_DATA);
	}
	corpus_free(&c);
}
END_TEST

static void save_ok(const struct corpus *c, const struct settings *s, const char *dir)
{
	struct err e;
	err_clear(&e);
	ck_assert_msg(corpus_save(c, s, dir, &e) == ERR_OK, "corpus_save: %s", e.msg);
}

START_TEST(test_save_load)
{
	struct settings s;
	struct corpus c, d;
	struct err e;
	char dir[512], sub[600], why[200], path[700];
	json_t *root, *train;
	json_error_t jerr;
	long long sup = 0;

	small_settings(&s);
	s.seed = 18446744073709551615ULL;
	build_ok(&s, &c);
	make_tmpdir(dir, sizeof dir);
	snprintf(sub, sizeof sub, "%s/data/run", dir); /* created by corpus_save */
	save_ok(&c, &s, sub);

	err_clear(&e);
	ck_assert_int_eq(corpus_lock_file_check(sub, &c, why, sizeof why, &e), ERR_OK);
	ck_assert_str_eq(why, ""); /* data.lock describes the corpus saved beside it */
	ck_assert_msg(corpus_load(sub, &d, &e) == ERR_OK, "corpus_load: %s", e.msg);
	ck_assert_str_eq(d.lock, c.lock);
	ck_assert(corpus_equal(&c, &d));
	ck_assert_int_eq(d.split_count[SPLIT_VALIDATION], 30);
	ck_assert_int_eq(d.split_first[SPLIT_TEST], 230);
	ck_assert(d.params.seed == s.seed);
	ck_assert_int_eq(d.params.branching, s.branching);

	/* data.lock carries the parameters and per-split counts */
	snprintf(path, sizeof path, "%s/data.lock", sub);
	root = json_load_file(path, 0, &jerr);
	ck_assert_ptr_nonnull(root);
	ck_assert_str_eq(json_string_value(json_object_get(root, "lock")), c.lock);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(root, "parameters"),
							   "seed")), "18446744073709551615");
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(root, "parameters"),
							    "max_len")), 128);
	train = json_object_get(json_object_get(root, "splits"), "train");
	ck_assert_int_eq(json_integer_value(json_object_get(train, "sequences")), 200);
	for (int i = 0; i < 200; i++)
		sup += corpus_len(&c, i) - c.prefix[i];
	ck_assert_int_eq(json_integer_value(json_object_get(train, "supervised")), sup);
	json_decref(root);

	/* settings that did not build this corpus are refused */
	s.branching = 5;
	err_clear(&e);
	ck_assert_int_eq(corpus_save(&c, &s, sub, &e), ERR_DATA);

	corpus_free(&d);
	corpus_free(&c);
	remove_tmpdir(dir);
}
END_TEST

static void patch_file(const char *path, long off, const void *data, size_t len)
{
	FILE *f = fopen(path, "r+b");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fseek(f, off, SEEK_SET), 0);
	ck_assert_uint_eq(fwrite(data, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
}

START_TEST(test_corrupt)
{
	struct settings s;
	struct corpus c, d;
	struct err e;
	char dir[512], bin[600], lck[600];
	unsigned char b4[4];
	long tok_off;

	small_settings(&s);
	build_ok(&s, &c);
	make_tmpdir(dir, sizeof dir);
	snprintf(bin, sizeof bin, "%s/corpus.bin", dir);
	snprintf(lck, sizeof lck, "%s/data.lock", dir);

	/* a token replaced by another valid id: only the lock can tell */
	save_ok(&c, &s, dir);
	tok_off = 256 + 4L * (c.n + 1) + 4L * 10; /* header of 256 bytes, offsets */
	{
		int32_t other = c.tokens[10] == 4 ? 5 : 4;
		b4[0] = (unsigned char)other;
		b4[1] = b4[2] = b4[3] = 0;
	}
	patch_file(bin, tok_off, b4, 4);
	err_clear(&e);
	ck_assert_int_eq(corpus_load(dir, &d, &e), ERR_DATA);
	ck_assert_ptr_nonnull(strstr(e.msg, "corpus.bin"));

	/* a reserved id */
	save_ok(&c, &s, dir);
	b4[0] = DATA_BOS;
	patch_file(bin, tok_off, b4, 4);
	err_clear(&e);
	ck_assert_int_eq(corpus_load(dir, &d, &e), ERR_DATA);

	/* bad magic */
	save_ok(&c, &s, dir);
	patch_file(bin, 0, "X", 1);
	err_clear(&e);
	ck_assert_int_eq(corpus_load(dir, &d, &e), ERR_DATA);
	ck_assert_ptr_nonnull(strstr(e.msg, "corpus.bin"));

	/* truncated */
	save_ok(&c, &s, dir);
	ck_assert_int_eq(truncate(bin, 1000), 0);
	err_clear(&e);
	ck_assert_int_eq(corpus_load(dir, &d, &e), ERR_DATA);

	/* corpus.bin intact but data.lock names another corpus */
	save_ok(&c, &s, dir);
	{
		char *text;
		size_t len;
		char *p;
		FILE *f;
		err_clear(&e);
		ck_assert_int_eq(fsx_read_all(lck, &text, &len, &e), ERR_OK);
		p = strstr(text, c.lock);
		ck_assert_ptr_nonnull(p);
		p[0] = p[0] == '0' ? '1' : '0';
		f = fopen(lck, "wb");
		ck_assert_ptr_nonnull(f);
		fwrite(text, 1, len, f);
		fclose(f);
		free(text);
	}
	/* corpus.bin is the authority: it loads; data.lock is found not to describe it */
	err_clear(&e);
	ck_assert_msg(corpus_load(dir, &d, &e) == ERR_OK, "%s", e.msg);
	{
		char why[200];
		ck_assert_int_eq(corpus_lock_file_check(dir, &d, why, sizeof why, &e), ERR_OK);
		ck_assert_msg(strstr(why, "its lock differs"), "%s", why);
		ck_assert_int_eq(corpus_save_lock(&d, dir, &e), ERR_OK);
		ck_assert_int_eq(corpus_lock_file_check(dir, &d, why, sizeof why, &e), ERR_OK);
		ck_assert_str_eq(why, "");
		/* read whole: a count under "splits" edited, or the file gone */
		char *text;
		size_t len;
		ck_assert_int_eq(fsx_read_all(lck, &text, &len, &e), ERR_OK);
		char *q = strstr(text, "\"supervised\": ");
		ck_assert_ptr_nonnull(q);
		q += strlen("\"supervised\": ");
		*q = *q == '1' ? '2' : '1';
		FILE *f = fopen(lck, "wb");
		ck_assert_ptr_nonnull(f);
		fwrite(text, 1, len, f);
		fclose(f);
		free(text);
		ck_assert_int_eq(corpus_lock_file_check(dir, &d, why, sizeof why, &e), ERR_OK);
		ck_assert_msg(strstr(why, "its splits.") && strstr(why, "differs"), "%s", why);
		ck_assert_int_eq(unlink(lck), 0);
		ck_assert_int_eq(corpus_lock_file_check(dir, &d, why, sizeof why, &e), ERR_OK);
		ck_assert_str_eq(why, "it is missing");
		ck_assert_int_eq(corpus_save_lock(&d, dir, &e), ERR_OK);
		corpus_free(&d);
	}

	/* data.lock that is not JSON */
	patch_file(lck, 0, "#", 1);
	{
		char why[200];
		err_clear(&e);
		ck_assert_int_eq(corpus_lock_file_check(dir, &c, why, sizeof why, &e), ERR_OK);
		ck_assert_str_eq(why, "it is not a JSON object");
	}

	/* a corpus that is not what its own parameters describe, with a matching lock: the
	 * vocab (ids would be read past the model's rows), a split count, a length */
	for (int k = 0; k < 3; k++) {
		struct corpus_params keep = c.params;
		if (k == 0)
			c.params.vocab = 64;
		else if (k == 1)
			c.params.train_count += 1;
		else
			c.params.max_len = c.params.min_len;
		ck_assert_int_eq(corpus_compute_lock(&c, c.lock, &e), ERR_OK);
		save_ok(&c, NULL, dir);
		err_clear(&e);
		ck_assert_int_eq(corpus_load(dir, &d, &e), ERR_DATA);
		ck_assert_msg(strstr(e.msg, k == 0 ? "vocab 68, its parameters say 64"
					  : k == 1 ? "train sequences, its parameters say"
						   : "tokens, its parameters allow"),
			      "case %d: %s", k, e.msg);
		c.params = keep;
		ck_assert_int_eq(corpus_compute_lock(&c, c.lock, &e), ERR_OK);
	}

	/* nothing there */
	remove_tmpdir(dir);
	err_clear(&e);
	ck_assert_int_eq(corpus_load(dir, &d, &e), ERR_IO);
	corpus_free(&c);
}
END_TEST

static Suite *corpus_suite(void)
{
	Suite *s = suite_create("corpus");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_split_counts);
	tcase_add_test(tc, test_shape_bounds);
	tcase_add_test(tc, test_prefix_short_sequences);
	tcase_add_test(tc, test_determinism);
	tcase_add_test(tc, test_lock_golden);
	tcase_add_test(tc, test_learnable);
	tcase_add_test(tc, test_bad_settings);
	tcase_add_test(tc, test_from_arrays);
	tcase_add_test(tc, test_save_load);
	tcase_add_test(tc, test_corrupt);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(corpus_suite(), 0);
}
