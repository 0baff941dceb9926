/*
 * fuzz-data: the readers of the user's files on damaged copies of the samples under
 * tests/data (the text source's with GPT-2's tokenizer, invalid UTF-8 replaced, so that
 * damaged text reaches the pre-tokenizer and the merges): random truncations and random byte changes (biased towards the
 * headers), a few hundred per format. Whatever a reader answers, it must not crash, read
 * outside its files or hang: the build compiles this test and the readers with
 * AddressSanitizer and UndefinedBehaviorSanitizer where the compiler has them, and an
 * alarm fails a run that takes too long. A damaged input may still be readable (a changed
 * token id is a valid id); the test counts how many were refused and requires that most
 * truncations were.
 *
 * Usage: fuzz-data SAMPLE_DIR [ROUNDS]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sources.h"
#include "tokenizer.h"
#include "fsx.h"
#include "prng.h"

struct target {
	int source;
	const char *read_as;   /* what the reader is given, relative to the copy */
	const char *files[4];  /* the sample files that make it up */
};

static const struct target targets[] = {
	{ DATA_NPY, "npy", { "npy/tokens.npy", "npy/offsets.npy", "npy/loss_mask.npy",
			     "npy/split.npy" } },
	{ DATA_JSONL, "sample.jsonl", { "sample.jsonl" } },
	{ DATA_MEGATRON, "megatron/sample", { "megatron/sample.idx", "megatron/sample.bin" } },
	{ DATA_LLMC, "llmc/sample.bin", { "llmc/sample.bin" } },
	{ DATA_TEXT, "text/qa.jsonl", { "text/qa.jsonl" } },
};

/* the text source's tokenizer (GPT-2's, from the samples), opened by main */
static struct data_text text_source;

static int write_file(const char *root, const char *name, const char *buf, size_t len)
{
	char path[FSX_PATH_MAX], dir[FSX_PATH_MAX];
	struct err e;
	FILE *f;
	err_clear(&e);
	snprintf(path, sizeof path, "%s/%s", root, name);
	if (fsx_dirname(dir, sizeof dir, path, &e) || fsx_mkdirs(dir, &e))
		return -1;
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len) {
		if (f)
			fclose(f);
		return -1;
	}
	return fclose(f);
}

/* a damaged copy of buf: truncated (kind 0), bytes changed (1) or both (2) */
static size_t damage(struct prng *r, char *buf, size_t len)
{
	int kind = (int)prng_below(r, 3);
	if (kind != 0) {
		int flips = 1 + (int)prng_below(r, 8);
		for (int k = 0; k < flips && len; k++) {
			size_t at = prng_below(r, 2) ? prng_below(r, len < 1100 ? (uint32_t)len : 1100)
						     : prng_below(r, (uint32_t)len);
			buf[at] = (char)prng_below(r, 256);
		}
	}
	if (kind != 1 && len)
		len = prng_below(r, (uint32_t)len);
	return len;
}

/* one round: copies every file of t into root, damages one, reads; 1 if refused */
static int round_once(struct prng *r, const char *sample, const char *root,
		      const struct target *t, int *was_cut, int *failed)
{
	int nfiles = 0, victim, rc;
	while (nfiles < 4 && t->files[nfiles])
		nfiles++;
	victim = (int)prng_below(r, (uint32_t)nfiles);
	*was_cut = 0;
	for (int f = 0; f < nfiles; f++) {
		char path[FSX_PATH_MAX], *buf;
		size_t len;
		struct err e;
		err_clear(&e);
		snprintf(path, sizeof path, "%s/%s", sample, t->files[f]);
		if (fsx_read_all(path, &buf, &len, &e)) {
			fprintf(stderr, "fuzz-data: %s\n", e.msg);
			*failed = 1;
			return 0;
		}
		if (f == victim) {
			size_t cut = damage(r, buf, len);
			*was_cut = cut < len;
			len = cut;
		}
		if (write_file(root, t->files[f], buf, len)) {
			fprintf(stderr, "fuzz-data: cannot write into %s\n", root);
			*failed = 1;
		}
		free(buf);
	}
	struct data_shape shape = { .min_len = 1, .max_len = 64, .vocab = 0,
				    .split_rule = { 8, 1, 1 }, .eot = 0 };
	struct data_set d;
	struct err e;
	char path[FSX_PATH_MAX];
	err_clear(&e);
	snprintf(path, sizeof path, "%s/%s", root, t->read_as);
	shape.text = t->source == DATA_TEXT ? &text_source : NULL;
	rc = data_init(&d, &shape, &e);
	if (!rc)
		rc = data_read(&d, t->source, path, &e);
	data_free(&d);
	if (rc && !e.msg[0]) {
		fprintf(stderr, "fuzz-data: %s refused without a message\n", path);
		*failed = 1;
	}
	return rc != 0;
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR");
	char root[FSX_PATH_MAX - 512];
	int rounds = argc > 2 ? atoi(argv[2]) : 200, failed = 0;
	struct prng r;
	struct err e;

	if (argc < 2) {
		fprintf(stderr, "usage: fuzz-data SAMPLE_DIR [ROUNDS]\n");
		return 2;
	}
	alarm(240); /* a hang ends the test (SIGALRM: failure) */
	snprintf(root, sizeof root, "%s/ddptok-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	prng_seed(&r, 20240607, 0x66757a7a);
	char vocab[FSX_PATH_MAX], merges[FSX_PATH_MAX];
	snprintf(vocab, sizeof vocab, "%s/gpt2/vocab.json", argv[1]);
	snprintf(merges, sizeof merges, "%s/gpt2/merges.txt", argv[1]);
	struct tok_spec spec = { TOKENIZER_GPT2, vocab, merges, NULL, 0 };
	text_source = (struct data_text){ NULL, "", 1, 2 };
	err_clear(&e);
	if (tokenizer_open(&text_source.tok, &spec, &e)) {
		fprintf(stderr, "fuzz-data: %s\n", e.msg);
		return 1;
	}
	for (size_t k = 0; k < sizeof targets / sizeof targets[0]; k++) {
		int refused = 0, cut = 0, cut_refused = 0;
		for (int i = 0; i < rounds; i++) {
			int was_cut, no = round_once(&r, argv[1], root, &targets[k], &was_cut, &failed);
			refused += no;
			cut += was_cut;
			cut_refused += was_cut && no;
		}
		printf("fuzz-data: %-8s %d damaged copies, %d refused; %d truncated, %d of them "
		       "refused\n", data_source_name(targets[k].source), rounds, refused, cut,
		       cut_refused);
		/* a cut file loses its end: every format announces its length somewhere, except
		 * JSONL, where a cut at a line end leaves a shorter valid file */
		if (targets[k].source != DATA_JSONL && targets[k].source != DATA_TEXT &&
		    cut_refused < cut * 9 / 10) {
			fprintf(stderr, "fuzz-data: %s: only %d of %d truncated copies refused\n",
				data_source_name(targets[k].source), cut_refused, cut);
			failed = 1;
		}
	}
	tokenizer_close(text_source.tok);
	err_clear(&e);
	fsx_remove_tree(root, &e);
	return failed ? 1 : 0;
}
