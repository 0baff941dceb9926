/*
 * test-tokenizer: the tokenizers against the references' ids (tests/data/tokenizer, made
 * by tools/make-tokenizer-fixtures.js with OpenAI's tiktoken and by
 * tools/make-spm-fixtures.py with SentencePiece's own library), decoding back to the text,
 * and UTF-8 validation and repair.
 */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check-run.h"
#include "fsx.h"
#include "tmpdir.h"
#include "tokenizer.h"
#include "utf8.h"

#ifndef DDPTOK_DATA_DIR
#define DDPTOK_DATA_DIR "tests/data"
#endif

static const char *data_dir(void)
{
	const char *d = getenv("DDPTOK_DATA_DIR");
	return d && d[0] ? d : DDPTOK_DATA_DIR;
}

static void data_path(char *out, size_t cap, const char *name)
{
	snprintf(out, cap, "%s/%s", data_dir(), name);
}

static struct tokenizer *open_gpt2(int special)
{
	char vocab[1024], merges[1024];
	struct err e = {0};
	struct tokenizer *t = NULL;
	data_path(vocab, sizeof vocab, "gpt2/vocab.json");
	data_path(merges, sizeof merges, "gpt2/merges.txt");
	struct tok_spec spec = { TOKENIZER_GPT2, vocab, merges, NULL, special };
	ck_assert_msg(tokenizer_open(&t, &spec, &e) == 0, "%s", e.msg);
	return t;
}

/* Encodes text and compares with the reference's ids; decodes them back to the text (or
 * to what the reference decodes them to, `decoded`, when given). */
static void check_case(struct tokenizer *t, const char *text, size_t n, const json_t *ids,
		       const json_t *decoded, int line)
{
	struct tok_worker *w;
	struct tok_ids got = {0};
	struct err e = {0};
	char *back;
	size_t back_len;
	ck_assert_int_eq(tokenizer_worker_new(t, &w, &e), 0);
	ck_assert_msg(tokenizer_encode(w, text, n, &got, &e) == 0, "line %d: %s", line, e.msg);
	ck_assert_msg(got.n == json_array_size(ids), "line %d: %zu ids, the reference %zu", line,
		      got.n, json_array_size(ids));
	for (size_t i = 0; i < got.n; i++)
		ck_assert_msg(got.v[i] == json_integer_value(json_array_get(ids, i)),
			      "line %d: id %zu is %d, the reference's %lld", line, i, got.v[i],
			      (long long)json_integer_value(json_array_get(ids, i)));
	ck_assert_msg(tokenizer_decode(t, got.v, got.n, &back, &back_len, &e) == 0, "%s", e.msg);
	const char *want = decoded ? json_string_value(decoded) : text;
	size_t want_len = decoded ? json_string_length(decoded) : n;
	ck_assert_msg(back_len == want_len && !memcmp(back, want, want_len), "line %d: decoding "
		      "differs", line);
	free(back);
	tok_ids_free(&got);
	tokenizer_worker_free(w);
}

/* Runs every case of a fixture file {"text", "special"?, "ids"} through tokenizers[special]. */
static int check_fixture(const char *name, struct tokenizer *by_special[2])
{
	char path[1024];
	FILE *f;
	char *line = NULL;
	size_t cap = 0;
	int cases = 0;
	data_path(path, sizeof path, name);
	ck_assert_msg((f = fopen(path, "r")) != NULL, "%s", path);
	while (getline(&line, &cap, f) > 0) {
		json_error_t jerr;
		json_t *c = json_loads(line, 0, &jerr);
		ck_assert_msg(c != NULL, "%s: %s", path, jerr.text);
		const json_t *text = json_object_get(c, "text");
		int special = json_is_true(json_object_get(c, "special"));
		check_case(by_special[special], json_string_value(text), json_string_length(text),
			   json_object_get(c, "ids"), json_object_get(c, "decoded"), cases + 1);
		json_decref(c);
		cases++;
	}
	free(line);
	fclose(f);
	return cases;
}

START_TEST(test_gpt2_matches_tiktoken)
{
	struct tokenizer *t[2] = { open_gpt2(0), open_gpt2(1) };
	ck_assert_int_eq(tokenizer_vocab(t[0]), 50257);
	ck_assert_int_eq(tokenizer_eot(t[0]), 50256);
	ck_assert_int_gt(check_fixture("tokenizer/gpt2-cases.jsonl", t), 30);
	tokenizer_close(t[0]);
	tokenizer_close(t[1]);
}
END_TEST

/* The same vocabulary as a tokenizer.json (written here from the two files, merges as
 * "left right" strings) gives the same ids. */
START_TEST(test_gpt2_tokenizer_json)
{
	char vocab[1024], merges[1024], out[1200], *text;
	size_t len;
	struct err e = {0};
	json_error_t jerr;
	char *dir = tmpdir_make("tokjson");
	data_path(vocab, sizeof vocab, "gpt2/vocab.json");
	data_path(merges, sizeof merges, "gpt2/merges.txt");
	json_t *list = json_array(), *v = json_load_file(vocab, 0, &jerr);
	ck_assert_int_eq(fsx_read_all(merges, &text, &len, &e), 0);
	for (char *p = strchr(text, '\n') + 1, *nl; *p; p = nl + 1) {
		nl = strchr(p, '\n');
		if (nl > p)
			json_array_append_new(list, json_stringn(p, (size_t)(nl - p)));
	}
	free(text);
	/* with an added token beyond the vocabulary, and <|endoftext|> again */
	json_t *added = json_pack("[{s:i, s:s}, {s:i, s:s}]", "id", 50256, "content",
				  "<|endoftext|>", "id", 50257, "content", "<|pad|>");
	json_t *root = json_pack("{s:{s:s, s:o, s:o}, s:{s:s, s:b, s:b}, s:o}", "model", "type",
				 "BPE", "vocab", v, "merges", list, "pre_tokenizer", "type",
				 "ByteLevel", "add_prefix_space", 0, "use_regex", 1,
				 "added_tokens", added);
	snprintf(out, sizeof out, "%s/tokenizer.json", dir);
	ck_assert_int_eq(json_dump_file(root, out, 0), 0);
	json_decref(root);
	struct tokenizer *t[2];
	for (int special = 0; special < 2; special++) {
		struct tok_spec spec = { TOKENIZER_GPT2, NULL, NULL, out, special };
		ck_assert_msg(tokenizer_open(&t[special], &spec, &e) == 0, "%s", e.msg);
	}
	ck_assert_int_gt(check_fixture("tokenizer/gpt2-cases.jsonl", t), 30);
	const int32_t pad = 50257;
	ck_assert_int_eq(tokenizer_vocab(t[0]), 50258);
	ck_assert_int_eq(tokenizer_decode(t[0], &pad, 1, &text, &len, &e), 0);
	ck_assert_str_eq(text, "<|pad|>");
	free(text);
	tokenizer_close(t[0]);
	tokenizer_close(t[1]);
	/* a pre-tokenizer of another pattern would give other ids: refused */
	root = json_load_file(out, 0, &jerr);
	json_object_set_new(root, "pre_tokenizer", json_pack("{s:s}", "type", "Split"));
	ck_assert_int_eq(json_dump_file(root, out, 0), 0);
	json_decref(root);
	struct tok_spec spec = { TOKENIZER_GPT2, NULL, NULL, out, 0 };
	ck_assert_int_eq(tokenizer_open(&t[0], &spec, &e), ERR_DATA);
	ck_assert_msg(strstr(e.msg, "pre_tokenizer Split"), "%s", e.msg);
	tmpdir_drop(dir);
}
END_TEST

/* SentencePiece BPE and unigram models (made by the library's trainer) against the ids and
 * decodings of the library itself (tools/make-spm-fixtures.py), byte fallback included */
static void check_spm(const char *model, const char *cases)
{
	char path[1024];
	struct err e = {0};
	struct tokenizer *t;
	data_path(path, sizeof path, model);
	struct tok_spec spec = { TOKENIZER_SENTENCEPIECE, NULL, NULL, path, 0 };
	ck_assert_msg(tokenizer_open(&t, &spec, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(tokenizer_vocab(t), 500);
	ck_assert_int_eq(tokenizer_eot(t), 2); /* </s> */
	struct tokenizer *both[2] = { t, t };
	ck_assert_int_gt(check_fixture(cases, both), 30);
	tokenizer_close(t);
}

START_TEST(test_spm_bpe_matches_library)
{
	check_spm("tokenizer/spm-bpe.model", "tokenizer/spm-bpe-cases.jsonl");
}
END_TEST

START_TEST(test_spm_unigram_matches_library)
{
	check_spm("tokenizer/spm-unigram.model", "tokenizer/spm-unigram-cases.jsonl");
}
END_TEST

START_TEST(test_bytes)
{
	struct tok_spec spec = { TOKENIZER_BYTES, NULL, NULL, NULL, 1 };
	struct tokenizer *t;
	struct tok_worker *w;
	struct tok_ids ids = {0};
	struct err e = {0};
	const char text[] = "h\xc3\xa9<|endoftext|>\xff";
	char *back;
	size_t len;
	ck_assert_int_eq(tokenizer_open(&t, &spec, &e), 0);
	ck_assert_int_eq(tokenizer_vocab(t), 257);
	ck_assert_int_eq(tokenizer_worker_new(t, &w, &e), 0);
	/* any bytes, the end-of-text text as its id */
	ck_assert_int_eq(tokenizer_encode(w, text, sizeof text - 1, &ids, &e), 0);
	ck_assert_int_eq(ids.n, 5);
	ck_assert_int_eq(ids.v[1], 0xc3);
	ck_assert_int_eq(ids.v[3], 256);
	ck_assert_int_eq(ids.v[4], 255);
	ck_assert_int_eq(tokenizer_decode(t, ids.v, ids.n, &back, &len, &e), 0);
	ck_assert_mem_eq(back, text, sizeof text - 1);
	free(back);
	ids.v[0] = 257;
	ck_assert_int_eq(tokenizer_decode(t, ids.v, 1, &back, &len, &e), ERR_DATA);
	tok_ids_free(&ids);
	tokenizer_worker_free(w);
	tokenizer_close(t);
}
END_TEST

/* bits per byte counts each target's bytes: they add up to the text's, the end-of-text
 * id none */
START_TEST(test_token_bytes_add_up)
{
	const char text[] = "Ünïcödé 😀 <|endoftext|> words\n\n  spaced";
	struct tokenizer *t = open_gpt2(1);
	struct tok_worker *w;
	struct tok_ids ids = {0};
	struct err e = {0};
	size_t sum = 0;
	ck_assert_int_eq(tokenizer_worker_new(t, &w, &e), 0);
	ck_assert_int_eq(tokenizer_encode(w, text, sizeof text - 1, &ids, &e), 0);
	for (size_t i = 0; i < ids.n; i++)
		sum += tokenizer_token_bytes(t, ids.v[i]);
	ck_assert_uint_eq(sum, sizeof text - 1 - strlen(TOKENIZER_EOT_TEXT));
	tok_ids_free(&ids);
	tokenizer_worker_free(w);
	tokenizer_close(t);
}
END_TEST

START_TEST(test_invalid_utf8_named)
{
	struct tokenizer *t = open_gpt2(0);
	struct tok_worker *w;
	struct tok_ids ids = {0};
	struct err e = {0};
	ck_assert_int_eq(tokenizer_worker_new(t, &w, &e), 0);
	ck_assert_int_eq(tokenizer_encode(w, "abc\xed\xa0\x80z", 7, &ids, &e), ERR_DATA);
	ck_assert_msg(strstr(e.msg, "byte 3") != NULL, "%s", e.msg);
	tok_ids_free(&ids);
	tokenizer_worker_free(w);
	tokenizer_close(t);
}
END_TEST

START_TEST(test_utf8_rules)
{
	/* shortest forms, no surrogates, nothing above U+10FFFF */
	ck_assert_uint_eq(utf8_invalid_at("ok \xe2\x82\xac \xf0\x9f\x98\x80", 11), 11);
	ck_assert_uint_eq(utf8_invalid_at("a\xc0\x80", 3), 1);
	ck_assert_uint_eq(utf8_invalid_at("ab\xf4\x90\x80\x80", 6), 2);
	ck_assert_uint_eq(utf8_invalid_at("0123456789\xe2\x82", 12), 10);
	/* maximal subparts: E2 82 is one U+FFFD, the lone 80 another (as Python's "replace") */
	char *out;
	size_t len, replaced;
	ck_assert_int_eq(utf8_repair("x\xe2\x82y\x80", 5, &out, &len, &replaced), 0);
	ck_assert_uint_eq(replaced, 2);
	ck_assert_str_eq(out, "x\xef\xbf\xbdy\xef\xbf\xbd");
	free(out);
}
END_TEST

static Suite *tokenizer_suite(void)
{
	Suite *s = suite_create("tokenizer");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_gpt2_matches_tiktoken);
	tcase_add_test(tc, test_gpt2_tokenizer_json);
	tcase_add_test(tc, test_spm_bpe_matches_library);
	tcase_add_test(tc, test_spm_unigram_matches_library);
	tcase_add_test(tc, test_bytes);
	tcase_add_test(tc, test_token_bytes_add_up);
	tcase_add_test(tc, test_invalid_utf8_named);
	tcase_add_test(tc, test_utf8_rules);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(tokenizer_suite(), 0);
}
