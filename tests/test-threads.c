/*
 * test-threads: the threads of a CPU rank (devices.threads, runtime/dev_host.c).
 *
 * The key is read and range-checked, auto resolves to the CPUs over the ranks of the host
 * (at least 1) and reaches the device plan; a team runs each part once, on threads of its
 * own; and a host device with 2 or 3 threads gives the bits of a device with one thread
 * for every operation it splits (GEMMs of each transpose, bias_tanh, xent, scale, sgd).
 * A batch of GEMMs (gemm_batched) and the causal softmax of several heads give the bits
 * of their items called one by one, on one thread and on a team.
 * The negative control: the same comparison catches a GEMM whose inner sum is cut in two
 * (what a BLAS splitting k would do), so bit-identity is a claim the test can refute.
 * The GEMM tests run once under each implementation built in (gemm.h), each saying which.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check-run.h"
#include "config.h"
#include "dev.h"
#include "dev_host_kernels.h"
#include "dev_host_team.h"
#include "engine.h"
#include "gemm.h"
#include "gemmutil.h"
#include "prng.h"
#include "settings.h"
#include "squares-order.h"

/* devices.threads after loading `text` (NULL: the defaults); its rc in *rc */
static int threads_of(const char *text, int *rc)
{
	struct cfg c;
	struct settings s;
	struct err e;
	err_clear(&e);
	ck_assert_int_eq(cfg_init(&c, settings_keys, &e), ERR_OK);
	*rc = text ? cfg_load_text(&c, text, "t.ini", &e) : ERR_OK;
	if (*rc == ERR_OK)
		*rc = settings_from_cfg(&c, &s, &e);
	cfg_free(&c);
	return *rc == ERR_OK ? s.threads : -1;
}

START_TEST(key_is_read_and_checked)
{
	int rc;
	ck_assert_int_eq(threads_of(NULL, &rc), 0); /* auto */
	ck_assert_int_eq(threads_of("[devices]\nthreads = 4\n", &rc), 4);
	threads_of("[devices]\nthreads = -1\n", &rc);
	ck_assert_int_eq(rc, ERR_CONFIG);
	threads_of("[devices]\nthreads = 257\n", &rc);
	ck_assert_int_eq(rc, ERR_CONFIG);
	threads_of("[devices]\nthreads = 2x\n", &rc);
	ck_assert_int_eq(rc, ERR_CONFIG);
}
END_TEST

START_TEST(auto_divides_the_cpus_among_the_ranks)
{
	ck_assert_int_eq(dev_host_threads_for(0, 16, 2), 8);
	ck_assert_int_eq(dev_host_threads_for(0, 16, 3), 5);
	ck_assert_int_eq(dev_host_threads_for(0, 2, 2), 1);
	ck_assert_int_eq(dev_host_threads_for(0, 2, 4), 1); /* at least one */
	ck_assert_int_eq(dev_host_threads_for(0, 1, 8), 1);
	ck_assert_int_eq(dev_host_threads_for(3, 2, 2), 3); /* asked for: taken as is */
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int t = dev_host_threads(0, 1);
	ck_assert_int_ge(t, 1);
	ck_assert_int_le(t, cpus > 0 ? cpus : 1);
	ck_assert_int_eq(dev_host_threads(5, 1), 5);
}
END_TEST

/* the device plan resolves the key with the ranks of this host */
START_TEST(plan_carries_the_resolved_threads)
{
	struct settings s;
	struct placement p;
	struct err e;
	memset(&s, 0, sizeof s);
	err_clear(&e);
	s.world = 2;
	s.backend = BACKEND_CPU;
	ck_assert_int_eq(placement_decide(&s, NULL, 0, "none", &p, &e), ERR_OK);
	ck_assert_int_eq(p.threads, dev_host_threads(0, 2));
	s.threads = 3;
	ck_assert_int_eq(placement_decide(&s, NULL, 0, "none", &p, &e), ERR_OK);
	ck_assert_int_eq(p.threads, 3);
	/* two of the four ranks on this host: auto counts those two */
	struct rank_hosts h = {{0, 0, 1, 1}, 0};
	s.world = 4;
	s.threads = 0;
	ck_assert_int_eq(placement_decide(&s, &h, 0, "none", &p, &e), ERR_OK);
	ck_assert_int_eq(p.threads, dev_host_threads(0, 2));
}
END_TEST

struct seen {
	pthread_t who[8];
	int runs[8];
};

static void record_part(void *arg, int part, int parts)
{
	struct seen *s = arg;
	s->who[part] = pthread_self();
	s->runs[part]++;
}

START_TEST(team_runs_each_part_once_on_its_own_thread)
{
	struct team t;
	struct err e;
	err_clear(&e);
	ck_assert_int_eq(team_init(&t, 0, &e), ERR_CONFIG);
	ck_assert_int_eq(team_init(&t, 3, &e), ERR_OK);
	for (int parts = 1; parts <= 3; parts++)
		for (int round = 0; round < 50; round++) {
			struct seen s;
			memset(&s, 0, sizeof s);
			team_run(&t, record_part, &s, parts);
			for (int p = 0; p < parts; p++)
				ck_assert_int_eq(s.runs[p], 1);
			ck_assert(pthread_equal(s.who[0], pthread_self()));
			for (int p = 1; p < parts; p++)
				for (int q = 0; q < p; q++)
					ck_assert(!pthread_equal(s.who[p], s.who[q]));
		}
	team_destroy(&t);
}
END_TEST


static int same_bits(const float *a, const float *b, size_t n)
{
	return memcmp(a, b, n * sizeof *a) == 0;
}

/* C = alpha op(A) op(B) + beta C on a device with `threads` threads into c (m x n) */
static void gemm_on(int threads, int ta, int tb, int m, int n, int k, float alpha, float beta,
		    const float *a, const float *b, const float *c0, float *c)
{
	struct dev *d;
	struct err e;
	err_clear(&e);
	ck_assert_int_eq(dev_host_create_threads(0, threads, &d, &e), ERR_OK);
	memcpy(c, c0, sizeof *c * (size_t)m * n);
	ck_assert_int_eq(d->ops->gemm(d, ta, tb, m, n, k, alpha, a, ta ? m : k, b, tb ? k : n,
				      beta, c, n, &e),
			 ERR_OK);
	ck_assert_int_eq(d->counts.launches, 1); /* one operation, however many parts */
	dev_destroy(d);
}

/* shapes past the cut thresholds (parts of whole 48-row blocks), with ragged ends */
static const int gemm_shapes[][3] = {
	{480, 256, 256}, {1000, 77, 300}, {333, 257, 100}, {150, 640, 64}, {4097, 33, 170},
};

START_TEST(gemm_bits_do_not_depend_on_threads)
{
	if (!gemmutil_under(_i, "test-threads", 1))
		return;
	for (size_t s = 0; s < sizeof gemm_shapes / sizeof gemm_shapes[0]; s++)
		for (int tr = 0; tr < 4; tr++) {
			int m = gemm_shapes[s][0], n = gemm_shapes[s][1], k = gemm_shapes[s][2];
			int ta = tr & 1, tb = tr >> 1;
			float *a = gemmutil_floats((size_t)m * k, 1 + s);
			float *b = gemmutil_floats((size_t)n * k, 2 + s);
			float *c0 = gemmutil_floats((size_t)m * n, 3 + s);
			float *want = malloc(sizeof *want * (size_t)m * n);
			float *got = malloc(sizeof *got * (size_t)m * n);
			float alpha = tr == 0 ? 1.0f : 0.7f, beta = tr == 0 ? 0.0f : 0.3f;
			gemm_on(1, ta, tb, m, n, k, alpha, beta, a, b, c0, want);
			for (int t = 2; t <= 3; t++) {
				gemm_on(t, ta, tb, m, n, k, alpha, beta, a, b, c0, got);
				ck_assert_msg(same_bits(want, got, (size_t)m * n),
					      "gemm %dx%dx%d trans %d%d: %d threads differ from 1", m,
					      n, k, ta, tb, t);
			}
			free(a);
			free(b);
			free(c0);
			free(want);
			free(got);
		}
}
END_TEST

/* The negative control: the inner sum cut in two (at 101, inside any BLAS k block) and
 * the two halves added afterwards (a k split)
 * changes some bits, and the comparison above would see it. */
START_TEST(a_k_split_is_caught)
{
	if (!gemmutil_under(_i, "test-threads", 1))
		return;
	const int m = 480, n = 256, k = 256, h = 101;
	float *a = gemmutil_floats((size_t)m * k, 11), *b = gemmutil_floats((size_t)n * k, 12);
	float *zero = calloc((size_t)m * n, sizeof(float));
	float *want = malloc(sizeof *want * (size_t)m * n);
	float *split = malloc(sizeof *split * (size_t)m * n);
	float *upper = calloc((size_t)m * n, sizeof(float));
	gemm_on(2, 0, 0, m, n, k, 1.0f, 0.0f, a, b, zero, want);
	gemm_sgemm(0, 0, m, n, h, 1.0f, a, k, b, n, 0.0f, split, n);
	gemm_sgemm(0, 0, m, n, k - h, 1.0f, a + h, k, b + (size_t)h * n, n, 0.0f, upper, n);
	for (size_t i = 0; i < (size_t)m * n; i++)
		split[i] += upper[i];
	ck_assert_msg(!same_bits(want, split, (size_t)m * n), "a k split gave the same bits");
	free(a);
	free(b);
	free(zero);
	free(want);
	free(split);
	free(upper);
}
END_TEST

/* A batch of `count` products laid out as attention's heads: item i's A and B are
 * columns [i a_cols, (i + 1) a_cols) of wider matrices (ld count x cols + 3), its C an
 * m x n block of its own, C blocks m n + 5 floats apart (the gaps must stay as they were). */
struct batch {
	int ta, tb, m, n, k, count, lda, ldb;
	size_t sa, sb, sc, a_len, b_len, c_len;
};

static struct batch batch_of(int ta, int tb, int m, int n, int k, int count)
{
	int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
	struct batch g = {ta, tb, m, n, k, count, count * a_cols + 3, count * b_cols + 3,
			  (size_t)a_cols, (size_t)b_cols, (size_t)m * n + 5, 0, 0, 0};
	g.a_len = (size_t)a_rows * g.lda;
	g.b_len = (size_t)b_rows * g.ldb;
	g.c_len = g.sc * count;
	return g;
}

/* the batch into c (from c0) on a device of `threads` threads: by one gemm_batched, or
 * (one_by_one) by one gemm per item; checks what the device counted */
static void batch_on(int threads, int one_by_one, const struct batch *g, const float *a,
		     const float *b, const float *c0, float *c)
{
	struct dev *d;
	struct err e;
	err_clear(&e);
	ck_assert_int_eq(dev_host_create_threads(0, threads, &d, &e), ERR_OK);
	memcpy(c, c0, sizeof *c * g->c_len);
	if (one_by_one)
		for (int i = 0; i < g->count; i++)
			ck_assert_int_eq(d->ops->gemm(d, g->ta, g->tb, g->m, g->n, g->k, 0.7f,
						      a + i * g->sa, g->lda, b + i * g->sb, g->ldb,
						      0.3f, c + i * g->sc, g->n, &e), ERR_OK);
	else
		ck_assert_int_eq(d->ops->gemm_batched(d, g->ta, g->tb, g->m, g->n, g->k, 0.7f, a,
						      g->lda, g->sa, b, g->ldb, g->sb, 0.3f, c, g->n,
						      g->sc, g->count, &e), ERR_OK);
	ck_assert_int_eq(d->counts.launches, one_by_one ? (uint64_t)g->count : 1);
	ck_assert(d->counts.gemm_flop == 2.0 * g->m * g->n * g->k * g->count);
	dev_destroy(d);
}

/* m, n, k, count: small items on one thread; items big enough to cut the batch by items;
 * fewer items than threads, each big enough to cut by rows */
static const int batch_shapes[][4] = {{64, 64, 16, 4}, {300, 200, 96, 3}, {1000, 77, 300, 2}};

START_TEST(gemm_batched_gives_the_bits_of_its_items)
{
	if (!gemmutil_under(_i, "test-threads", 1))
		return;
	for (size_t s = 0; s < sizeof batch_shapes / sizeof batch_shapes[0]; s++)
		for (int tr = 0; tr < 4; tr++) {
			const int *sh = batch_shapes[s];
			struct batch g = batch_of(tr & 1, tr >> 1, sh[0], sh[1], sh[2], sh[3]);
			float *a = gemmutil_floats(g.a_len, 41 + s), *b = gemmutil_floats(g.b_len, 42);
			float *c0 = gemmutil_floats(g.c_len, 43);
			float *want = malloc(sizeof *want * g.c_len);
			float *got = malloc(sizeof *got * g.c_len);
			batch_on(1, 1, &g, a, b, c0, want);
			for (int t = 1; t <= 3; t++) {
				batch_on(t, 0, &g, a, b, c0, got);
				ck_assert_msg(same_bits(want, got, g.c_len),
					      "gemm_batched %dx%dx%d x %d trans %d%d on %d threads: "
					      "not the bits of its items", g.m, g.n, g.k, g.count,
					      g.ta, g.tb, t);
			}
			free(a);
			free(b);
			free(c0);
			free(want);
			free(got);
		}
}
END_TEST

/* The causal softmax and its backward of `heads` heads n x n, stride apart, on a device
 * of `threads` threads: in one call each, or (one_by_one) head by head. */
static void softmax_on(int threads, int one_by_one, int heads, int n, size_t stride,
		       float *s, float *dp)
{
	struct dev *d;
	struct err e;
	err_clear(&e);
	ck_assert_int_eq(dev_host_create_threads(0, threads, &d, &e), ERR_OK);
	int calls = one_by_one ? heads : 1, per_call = one_by_one ? 1 : heads;
	for (int h = 0; h < calls; h++)
		ck_assert_int_eq(d->ops->causal_softmax(d, per_call, n, stride, 0.3f,
							s + h * stride, &e), ERR_OK);
	for (int h = 0; h < calls; h++)
		ck_assert_int_eq(d->ops->causal_softmax_backward(d, per_call, n, stride, 0.3f,
								 s + h * stride, dp + h * stride,
								 &e), ERR_OK);
	ck_assert_int_eq(d->counts.launches, 2 * (uint64_t)calls);
	dev_destroy(d);
}

START_TEST(softmax_of_heads_gives_the_bits_of_each_head)
{
	const int heads = 5, n = 100;
	const size_t stride = (size_t)n * n + 3, len = stride * heads;
	float *s0 = gemmutil_floats(len, 51), *dp0 = gemmutil_floats(len, 52);
	float *s[2], *dp[2];
	for (int i = 0; i < 2; i++) {
		s[i] = malloc(sizeof(float) * len);
		dp[i] = malloc(sizeof(float) * len);
	}
	memcpy(s[0], s0, sizeof(float) * len);
	memcpy(dp[0], dp0, sizeof(float) * len);
	softmax_on(1, 1, heads, n, stride, s[0], dp[0]);
	for (int t = 1; t <= 3; t++) {
		memcpy(s[1], s0, sizeof(float) * len);
		memcpy(dp[1], dp0, sizeof(float) * len);
		softmax_on(t, 0, heads, n, stride, s[1], dp[1]);
		ck_assert_msg(same_bits(s[0], s[1], len), "causal_softmax of %d heads on %d "
			      "threads: not the bits of each head's", heads, t);
		ck_assert_msg(same_bits(dp[0], dp[1], len), "causal_softmax_backward of %d heads "
			      "on %d threads: not the bits of each head's", heads, t);
	}
	for (int i = 0; i < 2; i++) {
		free(s[i]);
		free(dp[i]);
	}
	free(s0);
	free(dp0);
}
END_TEST

/* The split loops against one thread: bias_tanh, xent, scale, sgd. */
static void loops_on(int threads, int rows, int cols, float **out, size_t *lens)
{
	struct dev *d;
	struct err e;
	err_clear(&e);
	ck_assert_int_eq(dev_host_create_threads(0, threads, &d, &e), ERR_OK);
	size_t n = (size_t)rows * cols;
	float *bias = gemmutil_floats((size_t)cols, 21);
	int32_t *target = malloc(sizeof *target * (size_t)rows);
	for (int p = 0; p < rows; p++)
		target[p] = p % 7 == 3 ? -1 : (p * 31) % cols;
	out[0] = gemmutil_floats(n, 22);
	ck_assert_int_eq(d->ops->bias_tanh(d, rows, cols, bias, out[0], &e), ERR_OK);
	out[1] = gemmutil_floats(n, 23);
	out[2] = calloc((size_t)rows, sizeof(float));
	ck_assert_int_eq(d->ops->xent(d, rows, cols, bias, target, 0.01f, 0.0f, NULL, out[1], out[2], &e),
			 ERR_OK);
	out[3] = gemmutil_floats(n, 24);
	ck_assert_int_eq(d->ops->scale(d, (int)n, 0.3f, out[3], &e), ERR_OK);
	float *g = gemmutil_floats(n, 25);
	out[4] = gemmutil_floats(n, 26);
	out[5] = gemmutil_floats(n, 27);
	ck_assert_int_eq(d->ops->sgd(d, (int)n, 0.1f, 0.9f, 0.01f, 0, out[4], g, out[5], &e),
			 ERR_OK);
	ck_assert_int_eq(d->counts.launches, 4);
	lens[0] = lens[1] = lens[3] = lens[4] = lens[5] = n;
	lens[2] = (size_t)rows;
	free(g);
	free(bias);
	free(target);
	dev_destroy(d);
}

START_TEST(loop_bits_do_not_depend_on_threads)
{
	const int rows = 777, cols = 131;
	float *want[6], *got[6];
	size_t lens[6];
	loops_on(1, rows, cols, want, lens);
	for (int t = 2; t <= 3; t++) {
		loops_on(t, rows, cols, got, lens);
		for (int i = 0; i < 6; i++) {
			ck_assert_msg(same_bits(want[i], got[i], lens[i]),
				      "output %d: %d threads differ from 1", i, t);
			free(got[i]);
		}
	}
	for (int i = 0; i < 6; i++)
		free(want[i]);
}
END_TEST

/* sum_squares_blocks over two ranks' ranges of the blocks of v (big elements, six
 * blocks): each block's sum is the documented one, and the sums added in block order
 * give sum_squares' bits (*squares), as the ranks' shared gradient norm adds them. */
static void blocks_add_up(struct dev *d, size_t big, const float *v, const double *squares)
{
	struct err e;
	double parts[6], blocks[6], whole = 0.0;
	err_clear(&e);
	ck_assert_uint_eq((big + HOST_SQUARES_BLOCK - 1) / HOST_SQUARES_BLOCK, 6);
	ck_assert_int_eq(d->ops->sum_squares_blocks(d, (int)big, v, 0, 2, parts, &e), ERR_OK);
	ck_assert_int_eq(d->ops->sum_squares_blocks(d, (int)big, v, 2, 6, parts + 2, &e), ERR_OK);
	squares_in_order(big, v, blocks);
	for (int b = 0; b < 6; b++) {
		ck_assert_msg(memcmp(&blocks[b], &parts[b], sizeof parts[b]) == 0,
			      "block %d: %.17g, its order gives %.17g", b, parts[b], blocks[b]);
		whole += parts[b];
	}
	ck_assert_msg(memcmp(&whole, squares, sizeof whole) == 0,
		      "the blocks add up to %.17g, sum_squares gave %.17g", whole, *squares);
}

/* The optimizer's and the GPT's split operations, and the split reductions, with
 * `threads`: out[0..7) = adamw's parameters, first and second moments, gelu, gelu's
 * backward, layernorm's output and its row statistics (mean then rstd); *squares and
 * *bad: sum_squares and count_nonfinite of a vector of several sum_squares blocks. */
static void more_loops_on(int threads, int rows, int cols, float **out, double *squares,
			  int64_t *bad)
{
	struct dev *d;
	struct err e;
	err_clear(&e);
	ck_assert_int_eq(dev_host_create_threads(0, threads, &d, &e), ERR_OK);
	size_t n = (size_t)rows * cols;
	float *g = gemmutil_floats(n, 31), *w = gemmutil_floats((size_t)cols, 32);
	float *b = gemmutil_floats((size_t)cols, 33);
	for (int i = 0; i < 3; i++)
		out[i] = gemmutil_floats(n, 34 + (uint64_t)i);
	/* the update of elements 5.. of a longer vector, decay boundaries inside the parts and
	 * across their edges */
	const int32_t decay[] = {0, 1000, 33000, 34999, 50000, 68001, 90017, (int32_t)n + 5};
	struct dev_adamw a = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 0.25f, 4, decay};
	ck_assert_int_eq(d->ops->adamw(d, (int)n, 5, &a, out[0], g, out[1], out[2], &e), ERR_OK);
	out[3] = malloc(sizeof(float) * n);
	ck_assert_int_eq(d->ops->gelu(d, (int)n, g, out[3], &e), ERR_OK);
	out[4] = gemmutil_floats(n, 37);
	ck_assert_int_eq(d->ops->gelu_backward(d, (int)n, g, out[4], &e), ERR_OK);
	out[5] = malloc(sizeof(float) * n);
	out[6] = malloc(sizeof(float) * 2 * (size_t)rows);
	ck_assert_int_eq(d->ops->layernorm(d, rows, cols, g, w, b, out[5], out[6], out[6] + rows,
					   &e), ERR_OK);
	size_t big = 5 * (size_t)HOST_SQUARES_BLOCK + 77;
	float *v = gemmutil_floats(big, 38);
	v[3] = NAN, v[big - 1] = INFINITY, v[2 * HOST_SQUARES_BLOCK] = -INFINITY;
	ck_assert_int_eq(d->ops->count_nonfinite(d, (int)big, v, bad, &e), ERR_OK);
	v[3] = v[big - 1] = v[2 * HOST_SQUARES_BLOCK] = 0.5f;
	ck_assert_int_eq(d->ops->sum_squares(d, (int)big, v, squares, &e), ERR_OK);
	double in_order = squares_in_order(big, v, NULL);
	ck_assert_msg(memcmp(&in_order, squares, sizeof in_order) == 0, "sum_squares %.17g, its "
		      "order gives %.17g", *squares, in_order);
	ck_assert_int_eq(d->counts.launches, 6);
	ck_assert_int_eq(d->counts.syncs, 2);
	blocks_add_up(d, big, v, squares);
	free(v);
	free(g);
	free(w);
	free(b);
	dev_destroy(d);
}

START_TEST(optimizer_gpt_loops_and_reductions_do_not_depend_on_threads)
{
	const int rows = 777, cols = 131;
	const size_t lens[7] = {777 * 131, 777 * 131, 777 * 131, 777 * 131, 777 * 131,
				777 * 131, 2 * 777};
	float *want[7], *got[7];
	double squares_want, squares_got;
	int64_t bad_want, bad_got;
	more_loops_on(1, rows, cols, want, &squares_want, &bad_want);
	ck_assert_int_eq(bad_want, 3);
	for (int t = 2; t <= 3; t++) {
		more_loops_on(t, rows, cols, got, &squares_got, &bad_got);
		for (int i = 0; i < 7; i++) {
			ck_assert_msg(same_bits(want[i], got[i], lens[i]),
				      "output %d: %d threads differ from 1", i, t);
			free(got[i]);
		}
		ck_assert_msg(memcmp(&squares_want, &squares_got, sizeof squares_got) == 0,
			      "sum_squares: %d threads %.17g, one %.17g", t, squares_got,
			      squares_want);
		ck_assert_int_eq(bad_got, bad_want);
	}
	for (int i = 0; i < 7; i++)
		free(want[i]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("threads");
	TCase *tc = tcase_create("threads");
	tcase_add_test(tc, key_is_read_and_checked);
	tcase_add_test(tc, auto_divides_the_cpus_among_the_ranks);
	tcase_add_test(tc, plan_carries_the_resolved_threads);
	tcase_add_test(tc, team_runs_each_part_once_on_its_own_thread);
	tcase_add_loop_test(tc, gemm_bits_do_not_depend_on_threads, GEMM_ONEDNN,
			    GEMM_OPENBLAS + 1);
	tcase_add_loop_test(tc, a_k_split_is_caught, GEMM_ONEDNN, GEMM_OPENBLAS + 1);
	tcase_add_loop_test(tc, gemm_batched_gives_the_bits_of_its_items, GEMM_ONEDNN,
			    GEMM_OPENBLAS + 1);
	tcase_add_test(tc, softmax_of_heads_gives_the_bits_of_each_head);
	tcase_add_test(tc, loop_bits_do_not_depend_on_threads);
	tcase_add_test(tc, optimizer_gpt_loops_and_reductions_do_not_depend_on_threads);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
