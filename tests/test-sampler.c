/*
 * test-sampler: the sampler's bands and draws, and the length_bands / balanced splits.
 *
 * Band membership is recomputed here from the documented integer bounds; the greedy
 * balanced split is checked on a hand-worked example and, on sampled windows, against
 * the length_bands split of the same draw (same sequences, smaller token spread). With
 * train.sampling = epochs every training sequence is drawn once per epoch and a sampler
 * restored mid-epoch continues bit for bit.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check-run.h"
#include "corpus.h"
#include "corpus_arrays.h"
#include "sampler.h"

static void data_settings(struct settings *s)
{
	memset(s, 0, sizeof *s);
	s->seed = 77;
	s->train_count = 300;
	s->validation_count = 20;
	s->test_count = 20;
	s->min_len = 16;
	s->max_len = 128;
	s->vocab = 40;
	s->prefix_max = 6;
	s->branching = 3;
	s->world = 2;
	s->accumulation = 2;
	s->batch_size = 4;
	s->rank_split = RANK_SPLIT_LENGTH_BANDS;
}

static void build_ok(const struct settings *s, struct corpus *c)
{
	struct err e;
	err_clear(&e);
	ck_assert_msg(corpus_build(s, c, &e) == ERR_OK, "corpus_build: %s", e.msg);
}

static void sampler_ok(struct sampler *sp, const struct corpus *c, const struct settings *s)
{
	struct err e;
	err_clear(&e);
	ck_assert_msg(sampler_init(sp, c, s, &e) == ERR_OK, "sampler_init: %s", e.msg);
}

static void window_ok(struct window *w, const struct settings *s)
{
	struct err e;
	err_clear(&e);
	ck_assert_int_eq(window_init(w, s->world, s->accumulation, s->batch_size, &e), ERR_OK);
}

static void next_ok(struct sampler *sp, struct window *w)
{
	struct err e;
	err_clear(&e);
	ck_assert_msg(sampler_next(sp, w, &e) == ERR_OK, "sampler_next: %s", e.msg);
}

/* The band of a length by the documented rule, written out independently. */
static int band_of(int len, int max_len, int world)
{
	for (int r = 0; r < world; r++) {
		int lo = max_len * r / world, hi = max_len * (r + 1) / world;
		if ((r == 0 || len > lo) && (r == world - 1 || len <= hi))
			return r;
	}
	return -1;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* Sorted copy of all ids of a window into out (n_ids entries); checks the packing. */
static void window_ids_sorted(const struct window *w, int *out)
{
	int k = 0;
	for (int r = 0; r < w->world; r++)
		for (int m = 0; m < w->micro; m++)
			for (int i = 0; i < w->mb[r][m].n; i++) {
				ck_assert_ptr_eq(&w->mb[r][m].ids[i], &w->storage[k]);
				out[k++] = w->mb[r][m].ids[i];
			}
	ck_assert_int_eq(k, w->n_ids);
	qsort(out, (size_t)k, sizeof *out, cmp_int);
}

/* Recounts tokens per microbatch and rank and checks the window's figures. */
static void check_counts(const struct window *w, const struct corpus *c)
{
	int64_t N = 0;
	for (int r = 0; r < w->world; r++) {
		int64_t rt = 0;
		for (int m = 0; m < w->micro; m++) {
			int64_t t = 0;
			for (int i = 0; i < w->mb[r][m].n; i++) {
				int id = w->mb[r][m].ids[i];
				t += (c->offset[id + 1] - c->offset[id]) - c->prefix[id];
			}
			ck_assert_int_eq(w->mb[r][m].tokens, t);
			rt += t;
		}
		ck_assert_int_eq(w->rank_tokens[r], rt);
		N += rt;
	}
	ck_assert_int_eq(w->N, N);
}

static int64_t spread(const struct window *w)
{
	int64_t lo = w->rank_tokens[0], hi = w->rank_tokens[0];
	for (int r = 1; r < w->world; r++) {
		if (w->rank_tokens[r] < lo)
			lo = w->rank_tokens[r];
		if (w->rank_tokens[r] > hi)
			hi = w->rank_tokens[r];
	}
	return hi - lo;
}

START_TEST(test_bands_seed_cutoff)
{
	/* W = 2 over max_len 128 gives the <= 64 / > 64 split */
	int lo, hi;
	sampler_band_bounds(128, 2, 0, &lo, &hi);
	ck_assert_int_eq(lo, 0);
	ck_assert_int_eq(hi, 64);
	sampler_band_bounds(128, 2, 1, &lo, &hi);
	ck_assert_int_eq(lo, 64);
	ck_assert_int_eq(hi, 128);
	ck_assert_int_eq(sampler_band_of(64, 128, 2), 0);
	ck_assert_int_eq(sampler_band_of(65, 128, 2), 1);
	ck_assert_int_eq(sampler_band_of(1, 128, 2), 0);
	ck_assert_int_eq(sampler_band_of(500, 128, 2), 1);
	for (int w = 1; w <= MAX_WORLD; w++)
		for (int len = 1; len <= 130; len++)
			ck_assert_int_eq(sampler_band_of(len, 128, w), band_of(len, 128, w));
}
END_TEST

START_TEST(test_pools)
{
	struct settings s;
	struct corpus c;
	struct sampler sp;
	int *owner;

	for (int world = 1; world <= 4; world++) {
		data_settings(&s);
		s.world = world;
		s.batch_size = 2;
		build_ok(&s, &c);
		sampler_ok(&sp, &c, &s);
		owner = malloc((size_t)c.n * sizeof *owner);
		for (int i = 0; i < c.n; i++)
			owner[i] = -1;
		for (int r = 0; r < world; r++)
			for (int k = 0; k < sp.pool_n[r]; k++) {
				int id = sp.pool[r][k];
				ck_assert_int_ge(id, 0);
				ck_assert_int_lt(id, s.train_count); /* training split only */
				ck_assert_int_eq(owner[id], -1);     /* pools are disjoint */
				owner[id] = r;
				if (k)
					ck_assert_int_lt(sp.pool[r][k - 1], id); /* sorted */
				ck_assert_int_eq(band_of(corpus_len(&c, id), s.max_len, world), r);
			}
		for (int i = 0; i < s.train_count; i++)
			ck_assert_int_ge(owner[i], 0); /* and cover the training set */
		free(owner);
		sampler_free(&sp);
		corpus_free(&c);
	}
}
END_TEST

START_TEST(test_length_bands_windows)
{
	struct settings s;
	struct corpus c;
	struct sampler sp;
	struct window w;
	int *seen, ids[64];

	for (int world = 2; world <= 3; world++) {
		data_settings(&s);
		s.world = world;
		build_ok(&s, &c);
		sampler_ok(&sp, &c, &s);
		window_ok(&w, &s);
		seen = calloc((size_t)c.n, sizeof *seen);
		for (int win = 0; win < 30; win++) {
			next_ok(&sp, &w);
			ck_assert_int_eq(w.index, win);
			ck_assert_int_eq(w.n_ids, world * s.accumulation * s.batch_size);
			for (int r = 0; r < world; r++)
				for (int m = 0; m < s.accumulation; m++) {
					ck_assert_int_eq(w.mb[r][m].n, s.batch_size);
					for (int i = 0; i < w.mb[r][m].n; i++) {
						int id = w.mb[r][m].ids[i];
						ck_assert_int_eq(band_of(corpus_len(&c, id), s.max_len,
									 world), r);
						seen[id]++;
					}
				}
			window_ids_sorted(&w, ids);
			for (int k = 1; k < w.n_ids; k++)
				ck_assert_int_ne(ids[k - 1], ids[k]); /* no duplicate in a window */
			check_counts(&w, &c);
		}
		/* across windows ids do come back (draws are per window, with replacement
		 * between windows), and many different ids were drawn */
		{
			int distinct = 0, repeated = 0;
			for (int i = 0; i < c.n; i++) {
				distinct += seen[i] > 0;
				repeated += seen[i] > 1;
			}
			ck_assert_int_gt(distinct, 100);
			ck_assert_int_gt(repeated, 0);
		}
		free(seen);
		window_free(&w);
		sampler_free(&sp);
		corpus_free(&c);
	}
}
END_TEST

/* The balanced plan draws W x accumulation x batch_size distinct training sequences from
 * every length (no bands), and its split is more even than the same sequences in draw
 * order. */
START_TEST(test_balanced_draws_every_length)
{
	struct settings s;
	struct corpus c;
	struct sampler sb;
	struct window wb, wd;
	struct err e;
	int ib[64], cap, counts[MAX_WORLD * WINDOW_MAX_MICRO], short_seen = 0, long_seen = 0;

	data_settings(&s);
	build_ok(&s, &c);
	s.rank_split = RANK_SPLIT_BALANCED;
	sampler_ok(&sb, &c, &s);
	window_ok(&wb, &s);
	window_ok(&wd, &s);
	cap = s.accumulation * s.batch_size;
	for (int i = 0; i < s.world * s.accumulation; i++)
		counts[i] = s.batch_size;
	for (int win = 0; win < 20; win++) {
		next_ok(&sb, &wb);
		window_ids_sorted(&wb, ib);
		ck_assert_int_eq(wb.n_ids, s.world * cap);
		for (int k = 0; k < wb.n_ids; k++) {
			ck_assert(k == 0 || ib[k] != ib[k - 1]);
			ck_assert_int_lt(ib[k], c.split_count[SPLIT_TRAIN]);
			short_seen += corpus_len(&c, ib[k]) <= s.max_len / 2;
			long_seen += corpus_len(&c, ib[k]) > s.max_len / 2;
		}
		check_counts(&wb, &c);
		for (int r = 0; r < s.world; r++)
			for (int m = 0; m < s.accumulation; m++)
				ck_assert_int_eq(wb.mb[r][m].n, s.batch_size);
		/* the same sequences in the order drawn are no more even than the balanced split */
		err_clear(&e);
		ck_assert_int_eq(window_assign(&wd, &c, wb.storage, counts, &e), ERR_OK);
		ck_assert_int_le(spread(&wb), spread(&wd));
	}
	ck_assert_int_gt(short_seen, 0);
	ck_assert_int_gt(long_seen, 0);
	window_free(&wb);
	window_free(&wd);
	sampler_free(&sb);
	corpus_free(&c);
}
END_TEST

/* Sequences all of one length (fixed-length chunks) and a handful of documents: every band
 * but one is empty. The length-band plan refuses and names the balanced plan, which
 * trains on W = 2 and 4. */
START_TEST(test_fixed_length_trains_balanced)
{
	enum { N_SEQ = 8, LEN = 24 };
	int32_t len[N_SEQ], pre[N_SEQ], tok[N_SEQ * LEN];
	struct settings s;
	struct corpus c;
	struct sampler sp;
	struct window w;
	struct err e;

	for (int i = 0; i < N_SEQ; i++) {
		len[i] = LEN;
		pre[i] = 0;
	}
	for (int i = 0; i < N_SEQ * LEN; i++)
		tok[i] = 4 + i % 4; /* ids below 4 are reserved (corpus.h) */
	err_clear(&e);
	ck_assert_msg(corpus_from_arrays(N_SEQ, len, pre, tok, 8, &c, &e) == ERR_OK, "%s", e.msg);
	data_settings(&s);
	s.max_len = 0;
	s.batch_size = 1;
	for (int world = 2; world <= 4; world *= 2) {
		s.world = world;
		s.rank_split = RANK_SPLIT_LENGTH_BANDS;
		err_clear(&e);
		ck_assert_int_eq(sampler_init(&sp, &c, &s, &e), ERR_CONFIG);
		ck_assert_msg(strstr(e.msg, "train.plan = balanced"), "%s", e.msg);
		s.rank_split = RANK_SPLIT_BALANCED;
		sampler_ok(&sp, &c, &s);
		window_ok(&w, &s);
		for (int win = 0; win < 5; win++) {
			next_ok(&sp, &w);
			check_counts(&w, &c);
			for (int r = 0; r < world; r++)
				ck_assert_int_eq(w.rank_tokens[r], s.accumulation * LEN);
		}
		window_free(&w);
		sampler_free(&sp);
	}
	/* 8 sequences cannot fill a window of 4 x 2 x 2 */
	s.world = 4;
	s.batch_size = 2;
	err_clear(&e);
	ck_assert_int_eq(sampler_init(&sp, &c, &s, &e), ERR_CONFIG);
	ck_assert_msg(strstr(e.msg, "holds only 8 sequences"), "%s", e.msg);
	corpus_free(&c);
}
END_TEST

START_TEST(test_balanced_by_hand)
{
	/* 8 sequences, supervised counts 10 9 8 7 6 5 2 1 (ids 0..7, some with prompts),
	 * W = 2, 2 microbatches of 2; the expected split is worked out by hand below. */
	const int32_t len[8] = { 12, 9, 8, 7, 9, 5, 2, 3 };
	const int32_t pre[8] = { 2, 0, 0, 0, 3, 0, 0, 2 };
	int32_t tok[64];
	struct corpus c;
	struct window w;
	struct err e;
	int ids[8] = { 7, 6, 5, 4, 3, 2, 1, 0 };
	int counts[4] = { 2, 2, 2, 2 };

	for (int i = 0; i < 64; i++)
		tok[i] = DATA_RESERVED + i % 5;
	err_clear(&e);
	ck_assert_int_eq(corpus_from_arrays(8, len, pre, tok, 10, &c, &e), ERR_OK);
	/* supervised: id0 10, id1 9, id2 8, id3 7, id4 6, id5 5, id6 2, id7 1 */
	ck_assert_int_eq(window_init(&w, 2, 2, 2, &e), ERR_OK);
	ck_assert_int_eq(window_assign(&w, &c, ids, counts, &e), ERR_OK);
	ck_assert_int_eq(w.N, 48);
	ck_assert_int_eq(window_resplit(&w, &c, RANK_SPLIT_BALANCED, &e), ERR_OK);
	/* Ranks, heaviest first, to the least loaded rank with room (4 each):
	 *   id0 10 -> r0 (0,0 tie)       r0 10  r1 0
	 *   id1  9 -> r1                 r0 10  r1 9
	 *   id2  8 -> r1                 r0 10  r1 17
	 *   id3  7 -> r0                 r0 17  r1 17
	 *   id4  6 -> r0 (tie)           r0 23  r1 17
	 *   id5  5 -> r1                 r0 23  r1 22
	 *   id6  2 -> r1                 r0 23  r1 24   (r1 full: 1,2,5,6)
	 *   id7  1 -> r0                 r0 24  r1 24
	 * Rank 0 {0,3,4,7}: id0 -> m0 (10), id3 -> m1 (7), id4 -> m1 (13), id7 -> m0 (11)
	 * Rank 1 {1,2,5,6}: id1 -> m0 (9), id2 -> m1 (8), id5 -> m1 (13), id6 -> m0 (11) */
	{
		const int want[8] = { 0, 7, 3, 4, 1, 6, 2, 5 };
		ck_assert_int_eq(w.n_ids, 8);
		ck_assert_mem_eq(w.storage, want, sizeof want);
	}
	ck_assert_int_eq(w.rank_tokens[0], 24);
	ck_assert_int_eq(w.rank_tokens[1], 24);
	ck_assert_int_eq(w.mb[0][0].tokens, 11);
	ck_assert_int_eq(w.mb[0][1].tokens, 13);
	ck_assert_int_eq(w.mb[1][0].tokens, 11);
	ck_assert_int_eq(w.mb[1][1].tokens, 13);
	ck_assert_int_eq(w.N, 48);
	window_free(&w);
	corpus_free(&c);
}
END_TEST

START_TEST(test_assign_empty_and_replan_bands)
{
	const int32_t len[4] = { 5, 6, 7, 3 };
	const int32_t pre[4] = { 5, 0, 2, 3 }; /* ids 0 and 3: no supervised position */
	int32_t tok[21];
	struct corpus c;
	struct window w;
	struct err e;
	/* rank 0: m0 = {0}, m1 = {}   rank 1: m0 = {}, m1 = {1, 2, 3} */
	int ids[4] = { 0, 1, 2, 3 };
	int counts[4] = { 1, 0, 0, 3 };
	int bad[4] = { 1, 0, 0, 4 };

	for (int i = 0; i < 21; i++)
		tok[i] = DATA_RESERVED;
	err_clear(&e);
	ck_assert_int_eq(corpus_from_arrays(4, len, pre, tok, 8, &c, &e), ERR_OK);
	ck_assert_int_eq(window_init(&w, 2, 2, 3, &e), ERR_OK);
	ck_assert_int_eq(window_assign(&w, &c, ids, counts, &e), ERR_OK);
	ck_assert_int_eq(w.mb[0][0].n, 1);
	ck_assert_int_eq(w.mb[0][1].n, 0);
	ck_assert_int_eq(w.mb[1][0].n, 0);
	ck_assert_int_eq(w.mb[1][1].n, 3);
	ck_assert_int_eq(w.rank_tokens[0], 0); /* an empty rank */
	ck_assert_int_eq(w.rank_tokens[1], 11);
	ck_assert_int_eq(w.N, 11);
	check_counts(&w, &c);

	/* length_bands replan: nothing to go by, the assignment stays */
	ck_assert_int_eq(window_resplit(&w, &c, RANK_SPLIT_LENGTH_BANDS, &e), ERR_OK);
	ck_assert_int_eq(w.mb[1][1].n, 3);
	ck_assert_int_eq(w.mb[1][1].ids[0], 1);
	ck_assert_int_eq(w.rank_tokens[0], 0);

	/* balanced replan of 4 ids over 2 ranks: 2 per rank, 1 per microbatch */
	ck_assert_int_eq(window_resplit(&w, &c, RANK_SPLIT_BALANCED, &e), ERR_OK);
	ck_assert_int_eq(w.n_ids, 4);
	ck_assert_int_eq(w.N, 11);
	for (int r = 0; r < 2; r++)
		for (int m = 0; m < 2; m++)
			ck_assert_int_eq(w.mb[r][m].n, 1);
	/* supervised 6 (id1), 5 (id2), 0, 0: r0 gets id1, r1 gets id2 */
	ck_assert_int_eq(w.rank_tokens[0], 6);
	ck_assert_int_eq(w.rank_tokens[1], 5);
	check_counts(&w, &c);

	/* too many ids in a microbatch, or an unknown id */
	ck_assert_int_ne(window_assign(&w, &c, ids, bad, &e), ERR_OK);
	err_clear(&e);
	ids[2] = 4;
	ck_assert_int_ne(window_assign(&w, &c, ids, counts, &e), ERR_OK);
	window_free(&w);
	corpus_free(&c);
}
END_TEST

/* Frees the two samplers draw_alike compares, their windows and their corpus. */
static void pair_free(struct sampler *a, struct window *wa, struct sampler *b,
		      struct window *wb, struct corpus *c)
{
	window_free(wa);
	window_free(wb);
	sampler_free(a);
	sampler_free(b);
	corpus_free(c);
}

/* The next `count` windows of a and b (a restored copy of a's state): the same window
 * numbers, ids in the same places (exact mode: the same shards, whatever each one's
 * world) and, on the same world, token counts per rank. */
static void draw_alike(struct sampler *a, struct window *wa, struct sampler *b,
		       struct window *wb, int count)
{
	for (int k = 0; k < count; k++) {
		next_ok(a, wa);
		next_ok(b, wb);
		ck_assert_int_eq(wb->index, wa->index);
		ck_assert_int_eq(wa->n_ids, wb->n_ids);
		ck_assert_msg(!memcmp(wa->storage, wb->storage, (size_t)wa->n_ids * sizeof(int)),
			      "window %lld differs after the restore", window_number(wa));
		for (int r = 0; wa->world == wb->world && r < wa->world; r++)
			ck_assert_int_eq(wa->rank_tokens[r], wb->rank_tokens[r]);
	}
}

START_TEST(test_state_round_trip)
{
	struct settings s;
	struct corpus c;
	struct sampler a, b;
	struct sampler_state st;
	struct window wa, wb;

	for (int plan = RANK_SPLIT_LENGTH_BANDS; plan <= RANK_SPLIT_BALANCED; plan++) {
		data_settings(&s);
		s.rank_split = plan;
		build_ok(&s, &c);
		sampler_ok(&a, &c, &s);
		window_ok(&wa, &s);
		window_ok(&wb, &s);
		for (int k = 0; k < 7; k++)
			next_ok(&a, &wa);
		sampler_get_state(&a, &st);
		ck_assert_int_eq(st.window_index, 7);

		sampler_ok(&b, &c, &s);
		next_ok(&b, &wb); /* a fresh sampler elsewhere in its stream */
		sampler_set_state(&b, &st);
		draw_alike(&a, &wa, &b, &wb, 5);
		/* and a sampler from the same seed that did not skip differs from window 7 on */
		{
			struct sampler f;
			int differ = 0;
			sampler_ok(&f, &c, &s);
			for (int k = 0; k < 5; k++) {
				next_ok(&f, &wb);
				if (memcmp(wa.storage, wb.storage, (size_t)wa.n_ids * sizeof(int)))
					differ = 1;
			}
			ck_assert(differ);
			sampler_free(&f);
		}
		pair_free(&a, &wa, &b, &wb, &c);
	}
}
END_TEST

/* The epoch stream by itself: window after window, positions e x n .. (e+1) x n - 1 of
 * the ids taken are a permutation of the n training ids, for every epoch e; the epochs'
 * orders differ from each other and from the ascending order. n = 30 and 7 per window:
 * windows span the ends of epochs. */
START_TEST(test_epoch_stream_once_per_epoch)
{
	enum { FIRST = 5, N = 30, NEED = 7, EPOCHS = 7 }; /* 7 x 30 = 30 windows of 7 */
	struct epoch_stream es;
	struct err e;
	int stream[EPOCHS * N];

	err_clear(&e);
	ck_assert_int_eq(epoch_init(&es, FIRST, N, NEED, 77, &e), ERR_OK);
	for (int k = 0; k < EPOCHS * N / NEED; k++)
		memcpy(stream + k * NEED, epoch_take(&es, k), NEED * sizeof *stream);
	for (int ep = 0; ep < EPOCHS; ep++) {
		int seen[N] = {0}, ascending = 1;
		for (int i = 0; i < N; i++) {
			int id = stream[ep * N + i];
			ck_assert_int_ge(id, FIRST);
			ck_assert_int_lt(id, FIRST + N);
			ck_assert_msg(!seen[id - FIRST]++, "epoch %d: id %d twice", ep, id);
			ascending &= id == FIRST + i;
		}
		ck_assert_msg(!ascending, "epoch %d is not shuffled", ep);
		if (ep > 0)
			ck_assert(memcmp(stream + ep * N, stream + (ep - 1) * N, N * sizeof *stream));
	}
	ck_assert_int_eq(es.epoch, EPOCHS); /* standing at the next window's epoch */
	epoch_free(&es);
	err_clear(&e);
	ck_assert_int_eq(epoch_init(&es, FIRST, N, N + 1, 77, &e), ERR_CHECK);
}
END_TEST

/* Sorted ids of windows [from, to) of sampler sp into out; returns how many. */
static int draw_windows(struct sampler *sp, struct window *w, int from, int to, int *out)
{
	int k = 0;
	for (int win = from; win < to; win++) {
		next_ok(sp, w);
		ck_assert_int_eq(w->index, win);
		window_ids_sorted(w, out + k);
		k += w->n_ids;
	}
	qsort(out, (size_t)k, sizeof *out, cmp_int);
	return k;
}

/* train.sampling = epochs under the balanced plan (W = 2 and 3) and in exact mode: over
 * windows that make whole epochs every training sequence is drawn once per epoch (300
 * sequences, 16 or 24 per window: whole epochs after lcm / need windows), and the windows
 * inside the first epoch never repeat one; independent windows do (the case epochs fix). */
START_TEST(test_epochs_draw_each_once)
{
	static const struct { int world, shards, epochs; } cases[] = {
		{2, 0, 4}, /* 16 per window: 4 epochs = 75 windows */
		{3, 0, 2}, /* 24 per window: 2 epochs = 25 windows */
		{2, 4, 8}, /* exact mode, 4 shards of 4: 16 per window */
	};
	struct settings s;
	struct corpus c;
	struct sampler sp;
	struct window w;
	int *ids = malloc(8 * 300 * sizeof *ids);

	for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
		data_settings(&s);
		s.world = cases[t].world;
		s.shards = cases[t].shards;
		if (s.shards)
			s.accumulation = s.shards / s.world;
		s.rank_split = RANK_SPLIT_BALANCED;
		s.sampling = SAMPLING_EPOCHS;
		build_ok(&s, &c);
		int need = s.world * s.accumulation * s.batch_size, n = s.train_count;
		int windows = cases[t].epochs * n / need;
		ck_assert_int_eq(windows * need, cases[t].epochs * n);
		sampler_ok(&sp, &c, &s);
		window_ok(&w, &s);
		ck_assert_int_eq(draw_windows(&sp, &w, 0, windows, ids), cases[t].epochs * n);
		for (int i = 0; i < cases[t].epochs * n; i++)
			ck_assert_int_eq(ids[i], i / cases[t].epochs); /* each id, epochs times */
		sampler_free(&sp);
		sampler_ok(&sp, &c, &s);
		int k = draw_windows(&sp, &w, 0, n / need, ids);
		for (int i = 1; i < k; i++)
			ck_assert_int_lt(ids[i - 1], ids[i]);
		sampler_free(&sp);
		/* the same windows drawn independently repeat sequences inside an epoch */
		s.sampling = SAMPLING_INDEPENDENT;
		sampler_ok(&sp, &c, &s);
		k = draw_windows(&sp, &w, 0, n / need, ids);
		int repeats = 0;
		for (int i = 1; i < k; i++)
			repeats += ids[i - 1] == ids[i];
		ck_assert_int_gt(repeats, 0);
		sampler_free(&sp);
		window_free(&w);
		corpus_free(&c);
	}
	free(ids);
}
END_TEST

/* The length-band plan draws by band: epochs are refused there and name the plan that
 * takes them; exact mode draws no bands and takes them. */
START_TEST(test_epochs_refuse_length_bands)
{
	struct settings s;
	struct corpus c;
	struct sampler sp;
	struct err e;
	data_settings(&s);
	s.sampling = SAMPLING_EPOCHS;
	build_ok(&s, &c);
	err_clear(&e);
	ck_assert_int_eq(sampler_init(&sp, &c, &s, &e), ERR_CONFIG);
	ck_assert_msg(strstr(e.msg, "train.plan = balanced"), "%s", e.msg);
	s.shards = 4;
	s.accumulation = 2;
	sampler_ok(&sp, &c, &s);
	sampler_free(&sp);
	corpus_free(&c);
}
END_TEST

/* A sampler restored mid-epoch (state after window 7 of an epoch of 18.75 windows) draws
 * what the continuous one draws, bit for bit, across the ends of epochs, whatever its own
 * seed and position were; a state taken after a window that spanned an epoch's end (19)
 * too. In exact mode the state restored
 * on another world (W = 2 -> 4) gives the same list per window (same shards). */
START_TEST(test_epochs_resume_mid_epoch)
{
	static const struct { int shards, world_a, world_b, stop; } cases[] = {
		{0, 2, 2, 7}, {0, 2, 2, 19}, {4, 2, 4, 7}, {4, 1, 2, 19},
	};
	struct settings sa, sb;
	struct corpus c;
	struct sampler a, b;
	struct sampler_state st;
	struct window wa, wb;

	for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
		data_settings(&sa);
		sa.rank_split = RANK_SPLIT_BALANCED;
		sa.sampling = SAMPLING_EPOCHS;
		sa.shards = cases[t].shards;
		sb = sa;
		sb.seed = sa.seed + 1; /* the state alone says where a stands */
		sa.world = cases[t].world_a;
		sb.world = cases[t].world_b;
		if (sa.shards) {
			sa.accumulation = sa.shards / sa.world;
			sb.accumulation = sb.shards / sb.world;
		}
		build_ok(&sa, &c);
		sampler_ok(&a, &c, &sa);
		sampler_ok(&b, &c, &sb);
		window_ok(&wa, &sa);
		window_ok(&wb, &sb);
		for (int k = 0; k < cases[t].stop; k++)
			next_ok(&a, &wa);
		sampler_get_state(&a, &st);
		ck_assert_int_eq(st.window_index, cases[t].stop);
		for (int k = 0; k < 40; k++)
			next_ok(&b, &wb); /* another seed's stream, two epochs further on */
		sampler_set_state(&b, &st);
		draw_alike(&a, &wa, &b, &wb, 40); /* past two more ends of epochs */
		pair_free(&a, &wa, &b, &wb, &c);
	}
}
END_TEST

/* Exact mode refuses a window of another shape before it takes anything: a retry with the
 * right window draws what a sampler that saw no refusal draws, for epochs (where the take
 * that failed would have crossed the end of the first epoch: 18 windows of 16 stand at 288
 * of 300) and independent draws alike. */
START_TEST(test_exact_refusal_takes_nothing)
{
	static const int modes[] = {SAMPLING_EPOCHS, SAMPLING_INDEPENDENT};
	struct settings s, other;
	struct corpus c;
	struct sampler a, b;
	struct window wa, wb, bad;
	struct err e;

	for (size_t t = 0; t < sizeof modes / sizeof modes[0]; t++) {
		data_settings(&s);
		s.rank_split = RANK_SPLIT_BALANCED;
		s.sampling = modes[t];
		s.world = 2;
		s.shards = 4;
		s.accumulation = 2;
		other = s;
		other.accumulation = 1; /* 2 x 1 slots for 4 shards */
		build_ok(&s, &c);
		sampler_ok(&a, &c, &s);
		sampler_ok(&b, &c, &s);
		window_ok(&wa, &s);
		window_ok(&wb, &s);
		window_ok(&bad, &other);
		for (int k = 0; k < 18; k++) {
			next_ok(&a, &wa);
			next_ok(&b, &wb);
		}
		err_clear(&e);
		ck_assert_int_eq(sampler_next(&a, &bad, &e), ERR_CHECK);
		ck_assert_msg(strstr(e.msg, "window shaped 2x1x"), "%s", e.msg);
		draw_alike(&a, &wa, &b, &wb, 3);
		window_free(&bad);
		pair_free(&a, &wa, &b, &wb, &c);
	}
}
END_TEST

/* The ids of rank r in a window, sorted, into out; returns how many. */
static int rank_ids_sorted(const struct window *w, int r, int *out)
{
	int k = 0;
	for (int m = 0; m < w->micro; m++)
		for (int i = 0; i < w->mb[r][m].n; i++)
			out[k++] = w->mb[r][m].ids[i];
	qsort(out, (size_t)k, sizeof *out, cmp_int);
	return k;
}

/* Token batching re-cuts the same draw: each rank keeps its sequences; a microbatch holds
 * at most the budget (or one longer sequence) and batch_size sequences, the next one's
 * first sequence would not have fitted; slots past a rank's own count are empty; the rank
 * of the long band runs more microbatches. A budget below every sequence gives each its
 * own microbatch. */
START_TEST(test_token_batching)
{
	struct settings s;
	struct corpus c;
	struct sampler by_seq, by_tok;
	struct window ws, wt;
	int a[64], b[64];
	const int budget = 120;

	for (int world = 2; world <= 3; world++) {
		int more = 0;
		data_settings(&s);
		s.world = world;
		build_ok(&s, &c);
		sampler_ok(&by_seq, &c, &s);
		s.batching = BATCHING_TOKENS;
		s.micro_tokens = budget;
		sampler_ok(&by_tok, &c, &s);
		window_ok(&ws, &s);
		window_ok(&wt, &s);
		for (int win = 0; win < 20; win++) {
			next_ok(&by_seq, &ws);
			next_ok(&by_tok, &wt);
			check_counts(&wt, &c);
			ck_assert_int_eq(wt.N, ws.N);
			for (int r = 0; r < world; r++) {
				int k = rank_ids_sorted(&ws, r, a);
				ck_assert_int_eq(rank_ids_sorted(&wt, r, b), k);
				ck_assert_mem_eq(a, b, (size_t)k * sizeof *a);
				for (int m = 0; m < wt.micro; m++) {
					const struct microbatch *mb = &wt.mb[r][m];
					ck_assert_int_eq(mb->n > 0, m < wt.rank_micro[r]);
					ck_assert(mb->tokens <= budget || mb->n == 1);
					ck_assert_int_le(mb->n, s.batch_size);
					if (m + 1 < wt.rank_micro[r] && mb->n < s.batch_size)
						ck_assert_int_gt(mb->tokens + corpus_supervised(
							&c, wt.mb[r][m + 1].ids[0]), budget);
				}
			}
			more += wt.rank_micro[world - 1] > wt.rank_micro[0];
		}
		ck_assert_int_gt(more, 10);
		/* a budget below every sequence: one microbatch per sequence */
		ck_assert_int_eq(window_pack_tokens(&wt, &c, 1, NULL), ERR_OK);
		for (int r = 0; r < world; r++)
			ck_assert_int_eq(wt.rank_micro[r], s.accumulation * s.batch_size);
		check_counts(&wt, &c);
		window_free(&ws);
		window_free(&wt);
		sampler_free(&by_seq);
		sampler_free(&by_tok);
		corpus_free(&c);
	}
}
END_TEST

START_TEST(test_pool_too_small)
{
	struct settings s;
	struct corpus c;
	struct sampler sp;
	struct err e;

	data_settings(&s);
	s.train_count = 30;
	build_ok(&s, &c);
	s.batch_size = 8; /* 16 per band and window; about 15 per band exist */
	err_clear(&e);
	ck_assert_int_eq(sampler_init(&sp, &c, &s, &e), ERR_CONFIG);
	ck_assert_ptr_nonnull(strstr(e.msg, "train.batch_size"));
	ck_assert_ptr_nonnull(strstr(e.msg, "train.accumulation"));
	ck_assert_ptr_nonnull(strstr(e.msg, "band"));

	/* one band empty: max_len 128 over 8 ranks with all lengths in 16..32 */
	data_settings(&s);
	corpus_free(&c);
	s.min_len = 16;
	s.max_len = 32;
	build_ok(&s, &c);
	s.max_len = 128;
	s.world = 8;
	s.batch_size = 1;
	s.accumulation = 1;
	err_clear(&e);
	ck_assert_int_eq(sampler_init(&sp, &c, &s, &e), ERR_CONFIG);
	ck_assert_ptr_nonnull(strstr(e.msg, "band 2"));

	/* just enough is fine */
	data_settings(&s);
	s.accumulation = 1;
	s.batch_size = 1;
	s.world = 1;
	err_clear(&e);
	ck_assert_int_eq(sampler_init(&sp, &c, &s, &e), ERR_OK);
	sampler_free(&sp);
	corpus_free(&c);
}
END_TEST

static Suite *plan_suite(void)
{
	Suite *s = suite_create("plan");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_bands_seed_cutoff);
	tcase_add_test(tc, test_pools);
	tcase_add_test(tc, test_length_bands_windows);
	tcase_add_test(tc, test_balanced_draws_every_length);
	tcase_add_test(tc, test_fixed_length_trains_balanced);
	tcase_add_test(tc, test_balanced_by_hand);
	tcase_add_test(tc, test_assign_empty_and_replan_bands);
	tcase_add_test(tc, test_state_round_trip);
	tcase_add_test(tc, test_pool_too_small);
	tcase_add_test(tc, test_token_batching);
	suite_add_tcase(s, tc);
	TCase *epochs = tcase_create("epochs");
	tcase_add_test(epochs, test_epoch_stream_once_per_epoch);
	tcase_add_test(epochs, test_epochs_draw_each_once);
	tcase_add_test(epochs, test_epochs_refuse_length_bands);
	tcase_add_test(epochs, test_epochs_resume_mid_epoch);
	tcase_add_test(epochs, test_exact_refusal_takes_nothing);
	tcase_set_timeout(epochs, 60); /* well under a second unloaded */
	suite_add_tcase(s, epochs);
	return s;
}

int main(void)
{
	return check_run(plan_suite(), 0);
}
