/*
 * dev_host: the host (CPU) backend of the device interface.
 *
 * Device memory is host memory, "asynchronous" operations complete before returning,
 * GEMMs go to the process's sgemm (gemm.h: oneDNN's or OpenBLAS's) on one thread per
 * device thread (the pool supplies the parallelism, one thread per simulated device),
 * and the element-wise
 * parts are the loops of dev_host_kernels.c over the formulas of kmath.h, vectorized by
 * the compiler, in the widest build the CPU runs (AVX-512, AVX2 or the baseline; the
 * same bits either way). Every reduction runs in a fixed order, so results are identical run to
 * run and across ranks.
 *
 * A device made with T > 1 threads (devices.threads) splits its larger operations over
 * its team (dev_host_team.h): a GEMM by rows of C, in parts of whole gemm_row_block()
 * rows, each part one single-threaded sgemm; a batch of GEMMs (gemm_batched) by whole
 * products, or each product by rows where that makes more parts; causal_softmax and its
 * backward by whole heads; bias_tanh, xent and layernorm by rows; scale, sgd, adamw (all
 * its tensors in one operation), gelu and its backward by elements. Every element of a
 * result is computed by the same operations as with one thread, so the bits do not
 * depend on T
 * (for the GEMM gemm.h checks it on this CPU before it chooses oneDNN; for OpenBLAS it
 * holds for the kernels measured, see docs/threads.md; the unit tests check both on the
 * machine they run on). sum_squares is split by its fixed blocks, whose sums this thread
 * adds in order, and count_nonfinite by elements (an integer count). The other
 * reductions (sum, column sums, embed_backward, fingerprint) stay on one thread.
 */
#include "dev.h"

#include <cblas.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "dev_host_kernels.h"
#include "dev_host_team.h"
#include "gemm.h"

/* A host device: the device, and with threads > 1 its team and its own operation table
 * (the loops' table with the split entries). */
struct host_dev {
	struct dev dev;
	struct dev_ops ops;
	const struct dev_ops *loops; /* the build of the loops this CPU runs */
	struct team team;
};

static struct host_dev *hdev(struct dev *d)
{
	return d->impl;
}

static void host_destroy(struct dev *d)
{
	struct host_dev *hd = hdev(d);
	team_destroy(&hd->team);
	free(hd);
}

static int host_alloc(struct dev *d, size_t bytes, void **out, struct err *e)
{
	/* 64-byte alignment for vector loads; round up as aligned_alloc requires */
	size_t n = (bytes + 63) / 64 * 64;
	void *p = aligned_alloc(64, n ? n : 64);
	if (!p)
		return ERR(e, ERR_DEVICE, "rank %d: cannot allocate %zu bytes of host memory", d->rank,
			   bytes);
	memset(p, 0, n ? n : 64);
	*out = p;
	return ERR_OK;
}

static void host_release(struct dev *d, void *p)
{
	free(p);
}

static void host_move(void *dst, const void *src, size_t bytes)
{
	if (bytes)
		memmove(dst, src, bytes);
}

/* upload and copy queue a copy on a GPU; download also waits for it */
static int host_upload(struct dev *d, void *dst, const void *src, size_t bytes, struct err *e)
{
	dev_count(d, 0, bytes > 0, 0);
	host_move(dst, src, bytes);
	return ERR_OK;
}

static int host_download(struct dev *d, void *dst, const void *src, size_t bytes,
			 struct err *e)
{
	dev_count(d, 0, bytes > 0, bytes > 0);
	host_move(dst, src, bytes);
	return ERR_OK;
}

static int host_zero(struct dev *d, void *p, size_t bytes, struct err *e)
{
	dev_count(d, 0, bytes > 0, 0);
	memset(p, 0, bytes);
	return ERR_OK;
}

static int host_sync(struct dev *d, struct err *e)
{
	dev_count(d, 0, 0, 1);
	return ERR_OK;
}

/* ---- GEMMs: one product, or a batch of them, on this thread or on the team ---- */

/* the least work worth handing to another thread: floating-point operations of a GEMM
 * part, elements of a loop's part */
#define GEMM_PART_FLOP (1u << 22)
#define LOOP_PART_ELEMS (1u << 14)

/* How to cut `n` items into parts of whole `align`-item blocks, at most max_parts of
 * them, each of about min_items or more: returns the number of parts (1: do not cut),
 * *step the items of each part; the last part also takes what remains. */
static int cut_parts(size_t n, size_t align, size_t min_items, int max_parts, size_t *step)
{
	size_t blocks = n / align, parts = (size_t)max_parts;
	*step = n;
	if (min_items && parts > n / min_items)
		parts = n / min_items;
	if (parts > blocks)
		parts = blocks;
	if (parts < 2)
		return 1;
	size_t per = (blocks + parts - 1) / parts; /* blocks of a part */
	*step = per * align;
	return (int)((blocks + per - 1) / per);
}

/* the range [*lo, *hi) of part p of `parts` parts of `step` items out of n */
static void part_range(int p, int parts, size_t step, size_t n, size_t *lo, size_t *hi)
{
	*lo = (size_t)p * step;
	*hi = p == parts - 1 ? n : *lo + step;
}

/* The operands of a batch of products (gemm_batched's arguments; a single product is
 * the batch of one), m, n > 0. `step` is a part's items, or rows, on a team. */
struct gemm_args {
	int trans_a, trans_b, m, n, k, lda, ldb, ldc;
	size_t stride_a, stride_b, stride_c, count, step;
	float alpha, beta;
	const float *a, *b;
	float *c;
};

/* Product i of the batch, whole, on this thread: the process's sgemm, or C = beta C for
 * k <= 0 (BLAS implementations disagree on k == 0, so it is done here). */
static void gemm_item(const struct gemm_args *g, size_t i)
{
	float *c = g->c + i * g->stride_c;
	if (g->k > 0) {
		gemm_sgemm(g->trans_a, g->trans_b, g->m, g->n, g->k, g->alpha, g->a + i * g->stride_a,
			   g->lda, g->b + i * g->stride_b, g->ldb, g->beta, c, g->ldc);
		return;
	}
	for (int r = 0; r < g->m; r++)
		for (int j = 0; j < g->n; j++)
			c[(size_t)r * g->ldc + j] =
				g->beta == 0.0f ? 0.0f : g->beta * c[(size_t)r * g->ldc + j];
}

/* items [lo, hi) of part p */
static void gemm_items_part(void *arg, int p, int parts)
{
	const struct gemm_args *g = arg;
	size_t lo, hi;
	part_range(p, parts, g->step, g->count, &lo, &hi);
	for (size_t i = lo; i < hi; i++)
		gemm_item(g, i);
}

/* rows [lo, hi) of C of the batch's only item (count 1), by one single-threaded sgemm */
static void gemm_rows_part(void *arg, int p, int parts)
{
	const struct gemm_args *g = arg;
	size_t lo, hi;
	part_range(p, parts, g->step, (size_t)g->m, &lo, &hi);
	const float *a = g->trans_a ? g->a + lo : g->a + lo * (size_t)g->lda;
	gemm_sgemm(g->trans_a, g->trans_b, (int)(hi - lo), g->n, g->k, g->alpha, a, g->lda, g->b,
		   g->ldb, g->beta, g->c + lo * (size_t)g->ldc, g->ldc);
}

/* The parts `n` pieces of `flop` each are cut into over `threads` threads (1: not cut),
 * in whole `align`-piece blocks; *step the pieces of a part. */
static int gemm_parts(size_t n, size_t align, double flop, int threads, size_t *step)
{
	*step = n;
	if (flop <= 0 || threads < 2)
		return 1;
	return cut_parts(n, align, (size_t)(GEMM_PART_FLOP / flop) + 1, threads, step);
}

/* The batch on a team of `team->threads`: cut by whole items, or, where that gives fewer
 * parts, item after item cut by whole gemm_row_block() rows. Every item has the bits of
 * one sgemm either way (gemm.h's determinism check). */
static void team_gemm(struct team *team, struct gemm_args *g)
{
	size_t item_step, row_step;
	double row_flop = 2.0 * g->n * (g->k > 0 ? g->k : 0);
	int items = gemm_parts(g->count, 1, row_flop * g->m, team->threads, &item_step);
	int rows = gemm_parts((size_t)g->m, (size_t)gemm_row_block(gemm_chosen()), row_flop,
			      team->threads, &row_step);
	if (items >= rows) {
		g->step = item_step;
		team_run(team, gemm_items_part, g, items);
		return;
	}
	for (size_t i = 0; i < g->count; i++) {
		struct gemm_args one = *g;
		one.a += i * g->stride_a;
		one.b += i * g->stride_b;
		one.c += i * g->stride_c;
		one.count = 1;
		one.step = row_step;
		team_run(team, gemm_rows_part, &one, rows);
	}
}

/* Runs and counts the batch: one launch, its products' FLOP and the time they kept the
 * thread. A team of one runs it here (team_run's part 0 is this thread). */
static int run_gemm(struct dev *d, struct gemm_args *g)
{
	if (g->m <= 0 || g->n <= 0 || g->count == 0)
		return ERR_OK;
	dev_count(d, 1, 0, 0);
	double t0 = clock_now_s();
	team_gemm(&hdev(d)->team, g);
	if (g->k > 0)
		dev_count_gemms(d, (int)g->count, g->m, g->n, g->k, clock_now_s() - t0);
	return ERR_OK;
}

static int host_gemm(struct dev *d, int trans_a, int trans_b, int m, int n, int k, float alpha,
		     const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc,
		     struct err *e)
{
	struct gemm_args g = {trans_a, trans_b, m, n, k, lda, ldb, ldc, 0, 0, 0, 1, 0, alpha,
			      beta, a, b, c};
	return run_gemm(d, &g);
}

static int host_gemm_batched(struct dev *d, int trans_a, int trans_b, int m, int n, int k,
			     float alpha, const float *a, int lda, size_t stride_a, const float *b,
			     int ldb, size_t stride_b, float beta, float *c, int ldc,
			     size_t stride_c, int count, struct err *e)
{
	struct gemm_args g = {trans_a, trans_b, m, n, k, lda, ldb, ldc, stride_a, stride_b,
			      stride_c, count > 0 ? (size_t)count : 0, 0, alpha, beta, a, b, c};
	return run_gemm(d, &g);
}

/* the memory operations and the GEMMs, shared by every build of the loops */
static void host_fill_common(struct dev_ops *o)
{
	o->name = "cpu";
	o->destroy = host_destroy;
	o->alloc = host_alloc;
	o->release = host_release;
	o->upload = host_upload;
	o->download = host_download;
	o->copy = host_upload;
	o->zero = host_zero;
	o->sync = host_sync;
	o->gemm = host_gemm;
	o->gemm_batched = host_gemm_batched;
}

/* The arguments of the split loops: the loops' table, the rows (or elements) and their
 * step, and the operation's own arguments (those an operation does not take stay 0). */
struct loop_args {
	const struct dev_ops *loops;
	size_t n, step;
	int cols, first;
	float f0, f1, f2;
	const float *bias, *in;
	const int32_t *target;
	float *x, *y, *z, *w;
	const struct dev_adamw *adamw; /* adamw: its settings and decay table */
	size_t stride;  /* causal_softmax: between heads */
	double *sums;   /* sum_squares: one per block */
	size_t block0;  /* sum_squares_blocks: the first block's index */
	int64_t *count; /* count_nonfinite: one per part */
};

/* Runs `fn` over the loop's parts, or returns 0 when the loop is too small to cut (the
 * caller then runs the loops' own operation); counts one launch for the whole. */
static int run_cut(struct dev *d, struct loop_args *l, size_t align, size_t per_item,
		   team_fn fn)
{
	struct host_dev *hd = hdev(d);
	size_t min_items = per_item ? LOOP_PART_ELEMS / per_item + 1 : 0;
	int parts = cut_parts(l->n, align, min_items, hd->team.threads, &l->step);
	if (parts < 2)
		return 0;
	dev_count(d, 1, 0, 0);
	team_run(&hd->team, fn, l, parts);
	return 1;
}

static void bias_tanh_part(void *arg, int p, int parts)
{
	const struct loop_args *l = arg;
	size_t lo, hi;
	part_range(p, parts, l->step, l->n, &lo, &hi);
	l->loops->bias_tanh(NULL, (int)(hi - lo), l->cols, l->bias, l->z + lo * l->cols, NULL);
}

static int split_bias_tanh(struct dev *d, int rows, int cols, const float *bias, float *z,
			   struct err *e)
{
	struct loop_args l = {.loops = hdev(d)->loops, .n = rows > 0 ? (size_t)rows : 0,
			      .cols = cols, .bias = bias, .z = z};
	if (cols > 0 && run_cut(d, &l, 1, (size_t)cols, bias_tanh_part))
		return ERR_OK;
	return l.loops->bias_tanh(d, rows, cols, bias, z, e);
}

static void xent_part(void *arg, int p, int parts)
{
	const struct loop_args *l = arg;
	size_t lo, hi;
	part_range(p, parts, l->step, l->n, &lo, &hi);
	l->loops->xent(NULL, (int)(hi - lo), l->cols, l->bias, l->target + lo, l->f0, l->f1,
		       l->in, l->x + lo * l->cols, l->y + lo, NULL);
}

static int split_xent(struct dev *d, int rows, int cols, const float *bias,
		      const int32_t *target, float scale, float zc, const float *class_w,
		      float *logits, float *loss, struct err *e)
{
	struct loop_args l = {.loops = hdev(d)->loops, .n = rows > 0 ? (size_t)rows : 0,
			      .cols = cols, .f0 = scale, .f1 = zc, .in = class_w, .bias = bias, .target = target,
			      .x = logits, .y = loss};
	if (cols > 0 && run_cut(d, &l, 1, (size_t)cols, xent_part))
		return ERR_OK;
	return l.loops->xent(d, rows, cols, bias, target, scale, zc, class_w, logits, loss, e);
}

/* element parts in whole cache lines of floats */
#define LOOP_ELEM_ALIGN 16

static void scale_part(void *arg, int p, int parts)
{
	const struct loop_args *l = arg;
	size_t lo, hi;
	part_range(p, parts, l->step, l->n, &lo, &hi);
	l->loops->scale(NULL, (int)(hi - lo), l->f0, l->x + lo, NULL);
}

static int split_scale(struct dev *d, int n, float alpha, float *x, struct err *e)
{
	struct loop_args l = {.loops = hdev(d)->loops, .n = n > 0 ? (size_t)n : 0, .f0 = alpha,
			      .x = x};
	if (run_cut(d, &l, LOOP_ELEM_ALIGN, 1, scale_part))
		return ERR_OK;
	return l.loops->scale(d, n, alpha, x, e);
}

static void sgd_part(void *arg, int p, int parts)
{
	const struct loop_args *l = arg;
	size_t lo, hi;
	part_range(p, parts, l->step, l->n, &lo, &hi);
	l->loops->sgd(NULL, (int)(hi - lo), l->f0, l->f1, l->f2, l->first, l->x + lo, l->in + lo,
		      l->z + lo, NULL);
}

static int split_sgd(struct dev *d, int n, float lr, float momentum, float weight_decay,
		     int first, float *p, const float *g, float *buf, struct err *e)
{
	struct loop_args l = {.loops = hdev(d)->loops, .n = n > 0 ? (size_t)n : 0, .first = first,
			      .f0 = lr, .f1 = momentum, .f2 = weight_decay, .x = p,
			      .in = g, .z = buf};
	if (run_cut(d, &l, LOOP_ELEM_ALIGN, 1, sgd_part))
		return ERR_OK;
	return l.loops->sgd(d, n, lr, momentum, weight_decay, first, p, g, buf, e);
}

/* elements [lo, hi) of the update: the whole's table, the part's offset in the whole */
static void adamw_part(void *arg, int p, int parts)
{
	const struct loop_args *l = arg;
	size_t lo, hi;
	part_range(p, parts, l->step, l->n, &lo, &hi);
	l->loops->adamw(NULL, (int)(hi - lo), l->first + (int)lo, l->adamw, l->x + lo, l->in + lo,
			l->y + lo, l->z + lo, NULL);
}

static int split_adamw(struct dev *d, int n, int first, const struct dev_adamw *a, float *p,
		       const float *g, float *m, float *v, struct err *e)
{
	struct loop_args l = {.loops = hdev(d)->loops, .n = n > 0 ? (size_t)n : 0, .first = first,
			      .adamw = a, .x = p, .in = g, .y = m, .z = v};
	if (run_cut(d, &l, LOOP_ELEM_ALIGN, 1, adamw_part))
		return ERR_OK;
	return l.loops->adamw(d, n, first, a, p, g, m, v, e);
}

static void gelu_part(void *arg, int p, int parts)
{
	const struct loop_args *l = arg;
	size_t lo, hi;
	part_range(p, parts, l->step, l->n, &lo, &hi);
	if (l->first) /* the backward, in place */
		l->loops->gelu_backward(NULL, (int)(hi - lo), l->in + lo, l->x + lo, NULL);
	else
		l->loops->gelu(NULL, (int)(hi - lo), l->in + lo, l->x + lo, NULL);
}

static int split_gelu(struct dev *d, int n, const float *x, float *out, struct err *e)
{
	struct loop_args l = {.loops = hdev(d)->loops, .n = n > 0 ? (size_t)n : 0, .in = x,
			      .x = out};
	if (run_cut(d, &l, LOOP_ELEM_ALIGN, 1, gelu_part))
		return ERR_OK;
	return l.loops->gelu(d, n, x, out, e);
}

static int split_gelu_backward(struct dev *d, int n, const float *x, float *dout,
			       struct err *e)
{
	struct loop_args l = {.loops = hdev(d)->loops, .n = n > 0 ? (size_t)n : 0, .first = 1,
			      .in = x, .x = dout};
	if (run_cut(d, &l, LOOP_ELEM_ALIGN, 1, gelu_part))
		return ERR_OK;
	return l.loops->gelu_backward(d, n, x, dout, e);
}

static void layernorm_part(void *arg, int p, int parts)
{
	const struct loop_args *l = arg;
	size_t lo, hi, c = (size_t)l->cols;
	part_range(p, parts, l->step, l->n, &lo, &hi);
	l->loops->layernorm(NULL, (int)(hi - lo), l->cols, l->in + lo * c, l->bias, l->y,
			    l->x + lo * c, l->z + lo, l->w + lo, NULL);
}

static int split_layernorm(struct dev *d, int rows, int cols, const float *x, const float *w,
			   const float *b, float *out, float *mean, float *rstd, struct err *e)
{
	/* w and b are read only: the table's float pointers hold them as such */
	struct loop_args l = {.loops = hdev(d)->loops, .n = rows > 0 ? (size_t)rows : 0,
			      .cols = cols, .in = x, .bias = w, .y = (float *)b, .x = out,
			      .z = mean, .w = rstd};
	if (cols > 0 && run_cut(d, &l, 1, (size_t)cols, layernorm_part))
		return ERR_OK;
	return l.loops->layernorm(d, rows, cols, x, w, b, out, mean, rstd, e);
}

/* heads [lo, hi) of causal_softmax, or of its backward (l->first) */
static void softmax_part(void *arg, int p, int parts)
{
	const struct loop_args *l = arg;
	size_t lo, hi;
	part_range(p, parts, l->step, l->n, &lo, &hi);
	if (l->first)
		l->loops->causal_softmax_backward(NULL, (int)(hi - lo), l->cols, l->stride, l->f0,
						  l->in + lo * l->stride, l->x + lo * l->stride,
						  NULL);
	else
		l->loops->causal_softmax(NULL, (int)(hi - lo), l->cols, l->stride, l->f0,
					 l->x + lo * l->stride, NULL);
}

/* by whole heads: each row runs as on one thread */
static int split_causal_softmax(struct dev *d, int heads, int n, size_t stride, float scale,
				float *s, struct err *e)
{
	struct loop_args l = {.loops = hdev(d)->loops, .n = heads > 0 ? (size_t)heads : 0,
			      .cols = n, .stride = stride, .f0 = scale, .x = s};
	if (n > 0 && run_cut(d, &l, 1, (size_t)n * n, softmax_part))
		return ERR_OK;
	return l.loops->causal_softmax(d, heads, n, stride, scale, s, e);
}

static int split_causal_softmax_backward(struct dev *d, int heads, int n, size_t stride,
					 float scale, const float *p, float *dp, struct err *e)
{
	struct loop_args l = {.loops = hdev(d)->loops, .n = heads > 0 ? (size_t)heads : 0,
			      .cols = n, .first = 1, .stride = stride, .f0 = scale, .in = p,
			      .x = dp};
	if (n > 0 && run_cut(d, &l, 1, (size_t)n * n, softmax_part))
		return ERR_OK;
	return l.loops->causal_softmax_backward(d, heads, n, stride, scale, p, dp, e);
}

/* blocks [lo, hi) of the part, of the blocks from l->block0 on: each block's sum into
 * l->sums */
static void squares_part(void *arg, int p, int parts)
{
	const struct loop_args *l = arg;
	size_t lo, hi, b0 = l->block0;
	part_range(p, parts, l->step, l->n, &lo, &hi);
	if (hi > lo) /* l->first: the vector's length */
		l->loops->sum_squares_blocks(NULL, l->first, l->in, (int)(b0 + lo),
					     (int)(b0 + hi), l->sums + lo, NULL);
}

/* Blocks [b_lo, b_hi) on the team, each part's blocks on one thread. */
static int split_sum_squares_blocks(struct dev *d, int n, const float *x, int b_lo, int b_hi,
				    double *host_out, struct err *e)
{
	struct loop_args l = {.loops = hdev(d)->loops, .n = b_hi > b_lo ? (size_t)(b_hi - b_lo) : 0,
			      .first = n, .in = x, .sums = host_out, .block0 = (size_t)b_lo};
	if (!run_cut(d, &l, 1, 0, squares_part))
		return l.loops->sum_squares_blocks(d, n, x, b_lo, b_hi, host_out, e);
	dev_count(d, 0, 0, 1);
	return ERR_OK;
}

/* The blocks on the team, their sums added in block order on this thread: the bits of
 * the one-thread sum (dev_host_kernels.h). */
static int split_sum_squares(struct dev *d, int n, const float *x, double *host_out,
			     struct err *e)
{
	size_t blocks = n > 0 ? ((size_t)n + HOST_SQUARES_BLOCK - 1) / HOST_SQUARES_BLOCK : 0;
	double *sums, s = 0.0;
	if (blocks < 2)
		return hdev(d)->loops->sum_squares(d, n, x, host_out, e);
	if (!(sums = malloc(sizeof *sums * blocks)))
		return ERR(e, ERR_NOMEM, "rank %d: out of memory for %zu block sums", d->rank,
			   blocks);
	int rc = split_sum_squares_blocks(d, n, x, 0, (int)blocks, sums, e);
	for (size_t b = 0; rc == ERR_OK && b < blocks; b++)
		s += sums[b];
	free(sums);
	*host_out = s;
	return rc;
}

static void nonfinite_part(void *arg, int p, int parts)
{
	const struct loop_args *l = arg;
	size_t lo, hi;
	part_range(p, parts, l->step, l->n, &lo, &hi);
	l->loops->count_nonfinite(NULL, (int)(hi - lo), l->in + lo, &l->count[p], NULL);
}

static int split_count_nonfinite(struct dev *d, int n, const float *x, int64_t *bad,
				 struct err *e)
{
	int64_t count[TEAM_MAX_THREADS] = {0};
	struct loop_args l = {.loops = hdev(d)->loops, .n = n > 0 ? (size_t)n : 0, .in = x,
			      .count = count};
	if (!run_cut(d, &l, LOOP_ELEM_ALIGN, 1, nonfinite_part))
		return l.loops->count_nonfinite(d, n, x, bad, e);
	dev_count(d, 0, 0, 1);
	*bad = 0;
	for (int p = 0; p < TEAM_MAX_THREADS; p++)
		*bad += count[p];
	return ERR_OK;
}

/* the entries of a device with a team */
static void host_split_fill(struct dev_ops *o)
{
	o->bias_tanh = split_bias_tanh;
	o->xent = split_xent;
	o->scale = split_scale;
	o->sgd = split_sgd;
	o->adamw = split_adamw;
	o->gelu = split_gelu;
	o->gelu_backward = split_gelu_backward;
	o->layernorm = split_layernorm;
	o->sum_squares = split_sum_squares;
	o->sum_squares_blocks = split_sum_squares_blocks;
	o->count_nonfinite = split_count_nonfinite;
	o->causal_softmax = split_causal_softmax;
	o->causal_softmax_backward = split_causal_softmax_backward;
}

/* one operation table per build of the loops, filled once */
static struct dev_ops host_ops_generic;
#if DDPTOK_HAVE_AVX2_KERNELS
static struct dev_ops host_ops_avx2;
#endif
#if DDPTOK_HAVE_AVX512_KERNELS
static struct dev_ops host_ops_avx512;
#endif
static pthread_once_t host_ops_once = PTHREAD_ONCE_INIT;

static void host_ops_init(void)
{
	host_fill_common(&host_ops_generic);
	host_kernels_fill_generic(&host_ops_generic);
#if DDPTOK_HAVE_AVX2_KERNELS
	host_fill_common(&host_ops_avx2);
	host_kernels_fill_avx2(&host_ops_avx2);
#endif
#if DDPTOK_HAVE_AVX512_KERNELS
	host_fill_common(&host_ops_avx512);
	host_kernels_fill_avx512(&host_ops_avx512);
#endif
}

#if DDPTOK_HAVE_AVX512_KERNELS
int host_cpu_has_avx512(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
	       __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
}
#endif

const char *dev_host_kernels_name(void)
{
#if DDPTOK_HAVE_AVX512_KERNELS
	if (host_cpu_has_avx512())
		return "avx512";
#endif
#if DDPTOK_HAVE_AVX2_KERNELS
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2"))
		return "avx2";
#endif
	return "generic";
}

static const struct dev_ops *host_ops(void)
{
	pthread_once(&host_ops_once, host_ops_init);
#if DDPTOK_HAVE_AVX512_KERNELS
	if (strcmp(dev_host_kernels_name(), "avx512") == 0)
		return &host_ops_avx512;
#endif
#if DDPTOK_HAVE_AVX2_KERNELS
	if (strcmp(dev_host_kernels_name(), "avx2") == 0)
		return &host_ops_avx2;
#endif
	return &host_ops_generic;
}

int dev_host_create_threads(int rank, int threads, struct dev **out, struct err *e)
{
	struct host_dev *hd = calloc(1, sizeof *hd);
	if (!hd)
		return ERR(e, ERR_NOMEM, "rank %d: out of memory", rank);
	int rc = team_init(&hd->team, threads, e);
	if (rc != ERR_OK) {
		free(hd);
		return rc;
	}
	struct dev *d = &hd->dev;
	hd->loops = host_ops();
	d->ops = hd->loops;
	if (threads > 1) {
		hd->ops = *hd->loops;
		host_split_fill(&hd->ops);
		d->ops = &hd->ops;
	}
	d->impl = hd;
	d->backend = DEV_BACKEND_CPU;
	d->rank = rank;
	d->device_id = rank;
	/* the pool and the teams provide the threads: BLAS must not add its own */
	openblas_set_num_threads(1);
	*out = d;
	return ERR_OK;
}

int dev_host_create(int rank, struct dev **out, struct err *e)
{
	return dev_host_create_threads(rank, 1, out, e);
}

int dev_host_threads_for(int requested, int cpus, int ranks_here)
{
	if (requested > 0)
		return requested;
	int t = ranks_here > 0 ? cpus / ranks_here : cpus;
	return t < 1 ? 1 : t > TEAM_MAX_THREADS ? TEAM_MAX_THREADS : t;
}

int dev_host_threads(int requested, int ranks_here)
{
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	int cpus = online > 0 ? (int)online : 1;
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) < cpus)
		cpus = CPU_COUNT(&set);
	return dev_host_threads_for(requested, cpus, ranks_here);
}

void dev_destroy(struct dev *d)
{
	if (d && d->ops)
		d->ops->destroy(d);
}
