/*
 * test-gpu: the CUDA backend against the host backend, and the NCCL collective.
 *
 * Without a usable GPU only the checks that need none run (the device count answers
 * ERR_OK with a reason, the environment report, a repeated device id refused with a
 * hint to `collective = host`), then the program exits 77 (skipped). With a GPU, every
 * op of the CUDA device is run on random inputs next to the host backend and compared:
 * gemm within 1e-5 of the magnitude sum_k |a||b| (+ |beta c|); the element-wise ops that
 * share their formulas with the host (bias_tanh, tanh_backward_col_sum, scale, sgd, adamw,
 * col_sum_acc up to 64 rows, embed_backward over 31 and over 6 key bits for ids in fewer
 * than 128 slots, xent gradients) bit for bit (col_sum_acc over more rows: repeatable,
 * within rounding; embed_backward's busier ids, up to 5,000 slots: the two-level order of
 * gpu/gpu_rules.h computed here bit for bit, a double sum within 1e-4), also past one
 * launch's grid (16.7 M elements); xent losses within 1e-6 (log differs in its last ulp),
 * sums within 1e-6 relative (sums of squares 1e-12), gathers, counts, hits and the parameter fingerprint exactly
 * (over 3 M elements). sum and embed_backward must repeat bit for bit on the GPU; a device
 * allocates at creation only. Then NCCL allreduce over every
 * visible GPU (sum and avg, float32, float64 and int64, device and host buffers) against
 * references computed here, avg bit for bit equal to sum / W, exact mode's tree
 * allreduce over the largest power-of-two number of GPUs against the host's tree bit for
 * bit (a float vector whose length W does not divide, and a double scalar), each call
 * waiting for the device once (dev_counts), and injected
 * failures:
 * a failing rank releases the others with ERR_ABORTED well within the timeout, an
 * aborted collective stays aborted, a peer that never joins is a timeout.
 *
 * Check runs without fork here: CUDA does not survive a fork after initialization.
 */
#include <check.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check-run.h"
#include "clock.h"
#include "barrier.h"
#include "coll.h"
#include "dev.h"
#include "err.h"
#include "gpu.h"
#include "gpu_rules.h"
#include "pool.h"
#include "prng.h"

static struct dev *G; /* GPU 0 */
static struct dev *H; /* host backend */
static int n_gpus;
static struct err E;

/* ---- buffers on a device ---- */

static void *dalloc(struct dev *d, size_t bytes)
{
	void *p = NULL;
	OK(d->ops->alloc(d, bytes, &p, &E));
	return p;
}

static void *dput(struct dev *d, const void *host, size_t bytes)
{
	void *p = dalloc(d, bytes);
	OK(d->ops->upload(d, p, host, bytes, &E));
	return p;
}

static void dget(struct dev *d, void *host, const void *p, size_t bytes)
{
	OK(d->ops->download(d, host, p, bytes, &E));
}

static void dfree(struct dev *d, void *p)
{
	d->ops->release(d, p);
}

static float *frand(struct prng *r, size_t n, float lo, float hi)
{
	float *x = malloc(sizeof(float) * (n ? n : 1));
	for (size_t i = 0; i < n; i++)
		x[i] = lo + (hi - lo) * prng_unit(r);
	return x;
}

/* |gpu - host| <= tol * max(1, |host|) everywhere (NaN only where both are NaN) */
static void expect_close(const char *what, const float *gpu, const float *host, size_t n,
			 double tol)
{
	double worst = 0.0;
	for (size_t i = 0; i < n; i++) {
		if (isnan(gpu[i]) || isnan(host[i])) {
			ck_assert_msg(isnan(gpu[i]) && isnan(host[i]), "%s[%zu]: gpu %g host %g", what,
				      i, gpu[i], host[i]);
			continue;
		}
		double d = fabs((double)gpu[i] - host[i]);
		double lim = tol * fmax(1.0, fabs((double)host[i]));
		ck_assert_msg(d <= lim, "%s[%zu]: gpu %.9g host %.9g (diff %.3g > %.3g)", what, i,
			      gpu[i], host[i], d, lim);
		worst = fmax(worst, d / fmax(1.0, fabs((double)host[i])));
	}
	printf("  %-28s n=%-8zu max rel diff %.3g\n", what, n, worst);
}

/* gpu and host hold the same bits: the element-wise kernels share their formulas with
 * the host (runtime/kmath.h) and are compiled without fused multiply-add, so a
 * difference means an fmad, flush-to-zero or fast-math regression */
static void expect_same(const char *what, const float *gpu, const float *host, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t bg, bh;
		memcpy(&bg, &gpu[i], sizeof bg);
		memcpy(&bh, &host[i], sizeof bh);
		ck_assert_msg(bg == bh, "%s[%zu]: gpu %.9g (0x%08x) host %.9g (0x%08x): not the "
			      "same bits", what, i, gpu[i], (unsigned)bg, host[i], (unsigned)bh);
	}
	printf("  %-28s n=%-8zu bit-identical\n", what, n);
}

/* ---- checks that need no GPU ---- */

START_TEST(test_device_count_answers)
{
	int count = -1;
	char why[200] = "";
	OK(gpu_device_count(&count, why, sizeof why, &E));
	ck_assert_int_ge(count, 0);
	ck_assert_msg(why[0] != '\0', "no reason given");
}
END_TEST

START_TEST(test_env_report)
{
	char buf[4096] = "";
	FILE *f = tmpfile();
	ck_assert_ptr_nonnull(f);
	OK(gpu_env_report(f, &E));
	rewind(f);
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = '\0';
	fclose(f);
	ck_assert_msg(strstr(buf, "CUDA runtime") != NULL, "report: %s", buf);
	ck_assert_msg(strstr(buf, "GPUs") != NULL, "report: %s", buf);
	ck_assert_msg(strstr(buf, "NCCL") != NULL, "report: %s", buf);
}
END_TEST

START_TEST(test_nccl_refuses_shared_gpu)
{
	struct coll *c = NULL;
	int ids[3] = {0, 1, 0};
	err_clear(&E);
	ck_assert_int_eq(nccl_coll_create(3, ids, NULL, 16, &c, &E), ERR_CONFIG);
	ck_assert_ptr_null(c);
	ck_assert_msg(strstr(E.msg, "collective = host") != NULL, "message: %s", E.msg);
	ck_assert_msg(strstr(E.msg, "GPU 0") != NULL, "message: %s", E.msg);
}
END_TEST

START_TEST(test_missing_device_refused)
{
	struct dev *d = NULL;
	err_clear(&E);
	ck_assert_int_ne(cuda_dev_create(0, 4096, NULL, &d, &E), ERR_OK);
	ck_assert_ptr_null(d);
	ck_assert_msg(strstr(E.msg, "4096") != NULL, "message: %s", E.msg);
}
END_TEST

/* ---- memory ---- */

START_TEST(test_memory)
{
	struct prng r;
	prng_seed(&r, 1, 1);
	/* fresh memory is zeroed, as on the host */
	unsigned char z[1000];
	memset(z, 0xff, sizeof z);
	void *p = dalloc(G, sizeof z);
	dget(G, z, p, sizeof z);
	for (size_t i = 0; i < sizeof z; i++)
		ck_assert_int_eq(z[i], 0);
	dfree(G, p);

	/* many small uploads: the pinned arena fills, drains and is reused; the caller's
	 * buffer is reused at once */
	enum { PIECES = 3000, PIECE = 700 };
	float *whole = frand(&r, (size_t)PIECES * PIECE, -1, 1), *back = malloc(sizeof(float) * PIECES * PIECE);
	float *tmp = malloc(sizeof(float) * PIECE);
	float *dw = dalloc(G, sizeof(float) * PIECES * PIECE);
	for (int k = 0; k < PIECES; k++) {
		memcpy(tmp, whole + (size_t)k * PIECE, sizeof(float) * PIECE);
		OK(G->ops->upload(G, dw + (size_t)k * PIECE, tmp, sizeof(float) * PIECE, &E));
		memset(tmp, 0xab, sizeof(float) * PIECE); /* must not affect the copy */
	}
	dget(G, back, dw, sizeof(float) * PIECES * PIECE);
	ck_assert_int_eq(memcmp(whole, back, sizeof(float) * PIECES * PIECE), 0);

	/* copy and zero of a sub-range */
	float *dc = dalloc(G, sizeof(float) * PIECES * PIECE);
	OK(G->ops->copy(G, dc, dw, sizeof(float) * PIECES * PIECE, &E));
	OK(G->ops->zero(G, dc + 100, sizeof(float) * 50, &E));
	dget(G, back, dc, sizeof(float) * PIECES * PIECE);
	for (size_t i = 0; i < (size_t)PIECES * PIECE; i++) {
		float want = i >= 100 && i < 150 ? 0.0f : whole[i];
		ck_assert_msg(back[i] == want, "copy/zero at %zu: %g != %g", i, back[i], want);
	}
	OK(G->ops->sync(G, &E));

	/* an upload larger than the arena's limit goes directly */
	size_t big = (size_t)6 << 20; /* floats: 24 MiB */
	float *hb = frand(&r, big, -5, 5), *hb2 = malloc(sizeof(float) * big);
	float *db = dput(G, hb, sizeof(float) * big);
	dget(G, hb2, db, sizeof(float) * big);
	ck_assert_int_eq(memcmp(hb, hb2, sizeof(float) * big), 0);
	dfree(G, db);
	dfree(G, dw);
	dfree(G, dc);
	free(hb);
	free(hb2);
	free(whole);
	free(back);
	free(tmp);
}
END_TEST

/* ---- gemm ---- */

static void gemm_case(struct prng *r, int ta, int tb, int m, int n, int k, float alpha, float beta,
		      int pad, int nan_c)
{
	int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
	size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb, nc = (size_t)m * ldc;
	float *a = frand(r, na, -1, 1), *b = frand(r, nb, -1, 1), *c = frand(r, nc, -1, 1);
	if (nan_c)
		for (size_t i = 0; i < nc; i++)
			c[i] = NAN;
	float *cg = malloc(sizeof(float) * nc), *ch = malloc(sizeof(float) * nc);
	struct dev *devs[2] = {G, H};
	float *outs[2] = {cg, ch};
	for (int v = 0; v < 2; v++) {
		struct dev *d = devs[v];
		float *da = dput(d, a, sizeof(float) * na), *db = dput(d, b, sizeof(float) * nb);
		float *dc = dput(d, c, sizeof(float) * nc);
		OK(d->ops->gemm(d, ta, tb, m, n, k, alpha, da, lda, db, ldb, beta, dc, ldc, &E));
		dget(d, outs[v], dc, sizeof(float) * nc);
		dfree(d, da);
		dfree(d, db);
		dfree(d, dc);
	}
	double worst = 0.0;
	for (int i = 0; i < m; i++) {
		for (int j = 0; j < n; j++) {
			double mag = nan_c || beta == 0.0f ? 0.0 : fabs((double)beta * c[(size_t)i * ldc + j]);
			for (int q = 0; q < k; q++) {
				float av = ta ? a[(size_t)q * lda + i] : a[(size_t)i * lda + q];
				float bv = tb ? b[(size_t)j * ldb + q] : b[(size_t)q * ldb + j];
				mag += fabs((double)alpha * av * bv);
			}
			float g = cg[(size_t)i * ldc + j], h = ch[(size_t)i * ldc + j];
			ck_assert_msg(!isnan(g) && !isnan(h), "gemm ta=%d tb=%d: NaN at (%d,%d)", ta, tb, i, j);
			double d = fabs((double)g - h);
			ck_assert_msg(d <= 1e-5 * mag + 1e-30,
				      "gemm ta=%d tb=%d m=%d n=%d k=%d (%d,%d): gpu %.9g host %.9g, "
				      "diff %.3g > 1e-5 * %.3g", ta, tb, m, n, k, i, j, g, h, d, mag);
			if (mag > 0)
				worst = fmax(worst, d / mag);
		}
		/* the padding between rows is not written */
		for (int j = n; j < ldc; j++)
			ck_assert_msg(memcmp(&cg[(size_t)i * ldc + j], &c[(size_t)i * ldc + j], 4) == 0,
				      "gemm wrote padding at (%d,%d)", i, j);
	}
	printf("  gemm ta=%d tb=%d %4dx%4dx%4d max rel diff %.3g\n", ta, tb, m, n, k, worst);
	free(a);
	free(b);
	free(c);
	free(cg);
	free(ch);
}

START_TEST(test_gemm)
{
	struct prng r;
	prng_seed(&r, 2, 2);
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++) {
			gemm_case(&r, ta, tb, 37, 29, 53, 0.7f, 0.3f, 3, 0);
			gemm_case(&r, ta, tb, 300, 128, 512, 1.0f, 1.0f, 0, 0);
			gemm_case(&r, ta, tb, 64, 33, 17, 1.0f, 0.0f, 1, 1); /* beta 0 ignores NaN in C */
		}
	gemm_case(&r, 0, 1, 20, 10, 0, 1.0f, 0.5f, 2, 0); /* k = 0: C = beta C */
	gemm_case(&r, 1, 0, 20, 10, 0, 1.0f, 0.0f, 0, 1); /* k = 0, beta 0: zeros */
}
END_TEST

/* ---- element-wise ops ---- */

START_TEST(test_elementwise)
{
	struct prng r;
	prng_seed(&r, 3, 3);
	int rows = 33, cols = 70, n = rows * cols;
	float *z = frand(&r, (size_t)n, -6, 6), *bias = frand(&r, (size_t)cols, -0.5f, 0.5f);
	for (int i = 0; i < n; i += 5)
		z[i] *= 0.03f; /* the small-|x| branch of km_tanh */
	float *h = frand(&r, (size_t)n, -1, 1), *dh = frand(&r, (size_t)n, -2, 2);
	float *p = frand(&r, (size_t)n, -1, 1), *g = frand(&r, (size_t)n, -1, 1);
	float *sum0 = frand(&r, (size_t)cols, -1, 1);
	float *sums[2] = {malloc(sizeof(float) * cols), malloc(sizeof(float) * cols)};
	float *out[2][9];
	struct dev *devs[2] = {G, H};
	for (int v = 0; v < 2; v++) {
		struct dev *d = devs[v];
		for (int k = 0; k < 9; k++)
			out[v][k] = malloc(sizeof(float) * n);
		float *dz = dput(d, z, sizeof(float) * n), *db = dput(d, bias, sizeof(float) * cols);
		OK(d->ops->bias_tanh(d, rows, cols, db, dz, &E));
		dget(d, out[v][0], dz, sizeof(float) * n);
		float *dhh = dput(d, h, sizeof(float) * n), *ddh = dput(d, dh, sizeof(float) * n);
		float *dsum = dput(d, sum0, sizeof(float) * cols);
		OK(d->ops->tanh_backward_col_sum(d, rows, cols, dhh, ddh, dsum, &E));
		dget(d, out[v][1], ddh, sizeof(float) * n);
		dget(d, sums[v], dsum, sizeof(float) * cols);
		OK(d->ops->scale(d, n, -0.37f, ddh, &E));
		dget(d, out[v][2], ddh, sizeof(float) * n);
		/* two SGD steps: first (buffer = gradient), then with momentum, weight decay */
		float *dp = dput(d, p, sizeof(float) * n), *dg = dput(d, g, sizeof(float) * n);
		float *dbuf = dalloc(d, sizeof(float) * n);
		OK(d->ops->sgd(d, n, 0.05f, 0.9f, 1e-3f, 1, dp, dg, dbuf, &E));
		OK(d->ops->sgd(d, n, 0.05f, 0.9f, 1e-3f, 0, dp, dz, dbuf, &E));
		dget(d, out[v][3], dp, sizeof(float) * n);
		dget(d, out[v][4], dbuf, sizeof(float) * n);
		OK(d->ops->sgd(d, n, 0.1f, 0.0f, 0.0f, 0, dp, dg, dbuf, &E));
		dget(d, out[v][5], dp, sizeof(float) * n);
		/* two AdamW steps on fresh moments, the host's bits: elements 7.. of a longer
		 * vector with decay ranges (adjacent ones, one from the slice's start, one past
		 * its end), then the whole slice without decay */
		const int32_t ranges[] = {0, 100, 500, 1200, 1200, 1300, 2000, 2400};
		int32_t *dranges = dput(d, ranges, sizeof ranges);
		struct dev_adamw a1 = {3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.1f, 0.05f, 4, dranges};
		struct dev_adamw a2 = {2e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.19f, 0.0975f, 0, NULL};
		float *dm = dalloc(d, sizeof(float) * n), *dv = dalloc(d, sizeof(float) * n);
		OK(d->ops->zero(d, dm, sizeof(float) * n, &E));
		OK(d->ops->zero(d, dv, sizeof(float) * n, &E));
		OK(d->ops->adamw(d, n, 7, &a1, dp, dg, dm, dv, &E));
		OK(d->ops->adamw(d, n, 7, &a2, dp, dz, dm, dv, &E));
		dget(d, out[v][6], dp, sizeof(float) * n);
		dget(d, out[v][7], dm, sizeof(float) * n);
		dget(d, out[v][8], dv, sizeof(float) * n);
		void *bufs[] = {dz, db, dhh, ddh, dsum, dp, dg, dbuf, dm, dv, dranges};
		for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
			dfree(d, bufs[i]);
	}
	const char *names[9] = {"bias_tanh", "tanh_backward_col_sum dz", "scale", "sgd params",
				"sgd momentum", "sgd plain", "adamw params", "adamw m", "adamw v"};
	for (int k = 0; k < 9; k++) {
		expect_same(names[k], out[0][k], out[1][k], (size_t)n);
		free(out[0][k]);
		free(out[1][k]);
	}
	/* 33 rows: col_sum_acc's one-level case, the host's bits */
	expect_same("tanh_backward_col_sum sums", sums[0], sums[1], (size_t)cols);
	free(sum0);
	free(sums[0]);
	free(sums[1]);
	/* the ops did something: tanh of z differs from z, values in [-1, 1] */
	ck_assert_msg(fabsf(out[1][0][1] - z[1]) > 1e-3f, "bias_tanh left z unchanged");
	free(z);
	free(bias);
	free(h);
	free(dh);
	free(p);
	free(g);
}
END_TEST

START_TEST(test_embed_gather)
{
	struct prng r;
	prng_seed(&r, 4, 4);
	int rows = 211, width = 8, dim = 32, vocab = 97;
	int32_t *ctx = malloc(sizeof(int32_t) * rows * width);
	for (int i = 0; i < rows * width; i++)
		ctx[i] = (int32_t)prng_below(&r, vocab);
	float *table = frand(&r, (size_t)vocab * dim, -1, 1);
	size_t n = (size_t)rows * width * dim;
	float *xg = malloc(sizeof(float) * n), *xh = malloc(sizeof(float) * n);
	struct dev *devs[2] = {G, H};
	float *outs[2] = {xg, xh};
	for (int v = 0; v < 2; v++) {
		struct dev *d = devs[v];
		int32_t *dctx = dput(d, ctx, sizeof(int32_t) * rows * width);
		float *dt = dput(d, table, sizeof(float) * vocab * dim), *dx = dalloc(d, sizeof(float) * n);
		OK(d->ops->embed_gather(d, rows, width, dim, dctx, dt, dx, &E));
		dget(d, outs[v], dx, sizeof(float) * n);
		dfree(d, dctx);
		dfree(d, dt);
		dfree(d, dx);
	}
	ck_assert_int_eq(memcmp(xg, xh, sizeof(float) * n), 0);
	/* and it is the gather itself */
	ck_assert(xh[(size_t)(5 * width + 3) * dim + 7] == table[(size_t)ctx[5 * width + 3] * dim + 7]);
	free(ctx);
	free(table);
	free(xg);
	free(xh);
}
END_TEST

/* ---- cross-entropy ---- */

static void xent_case(struct prng *r, int rows, int cols, float scale, float zc)
{
	size_t n = (size_t)rows * cols;
	float *logits = frand(r, n, -8, 8), *bias = frand(r, (size_t)cols, -1, 1);
	int32_t *target = malloc(sizeof(int32_t) * rows);
	for (int p = 0; p < rows; p++)
		target[p] = prng_below(r, 5) == 0 ? -1 : (int32_t)prng_below(r, (uint32_t)cols);
	target[0] = cols - 1;
	if (rows > 1)
		target[1] = -1;
	float *gg = malloc(sizeof(float) * n), *gh = malloc(sizeof(float) * n);
	float *lg = malloc(sizeof(float) * rows), *lh = malloc(sizeof(float) * rows);
	struct dev *devs[2] = {G, H};
	float *grads[2] = {gg, gh}, *losses[2] = {lg, lh};
	for (int v = 0; v < 2; v++) {
		struct dev *d = devs[v];
		float *dl = dput(d, logits, sizeof(float) * n), *db = dput(d, bias, sizeof(float) * cols);
		int32_t *dt = dput(d, target, sizeof(int32_t) * rows);
		float *dloss = dalloc(d, sizeof(float) * rows);
		OK(d->ops->xent(d, rows, cols, db, dt, scale, zc, NULL, dl, dloss, &E));
		dget(d, grads[v], dl, sizeof(float) * n);
		dget(d, losses[v], dloss, sizeof(float) * rows);
		dfree(d, dl);
		dfree(d, db);
		dfree(d, dt);
		dfree(d, dloss);
	}
	char what[64];
	snprintf(what, sizeof what, "xent loss %dx%d", rows, cols);
	expect_close(what, lg, lh, (size_t)rows, 1e-6);
	snprintf(what, sizeof what, "xent grad %dx%d", rows, cols);
	expect_same(what, gg, gh, n);
	for (int p = 0; p < rows; p++) {
		if (target[p] >= 0) { /* one class: the loss is exactly 0 */
			ck_assert_msg(cols > 1 ? lg[p] > 0.0f : lg[p] == 0.0f, "row %d: loss %g", p, lg[p]);
			continue;
		}
		ck_assert(lg[p] == 0.0f);
		for (int j = 0; j < cols; j++)
			ck_assert(gg[(size_t)p * cols + j] == 0.0f);
	}
	free(logits);
	free(bias);
	free(target);
	free(gg);
	free(gh);
	free(lg);
	free(lh);
}

START_TEST(test_xent)
{
	struct prng r;
	prng_seed(&r, 5, 5);
	xent_case(&r, 50, 128, 0.37f, 0.0f);  /* one column per thread */
	xent_case(&r, 40, 1000, 1.0f, 0.0f);  /* several per thread */
	xent_case(&r, 7, 1, 0.5f, 0.0f);      /* a single class */
	xent_case(&r, 9, 300, 0.0f, 0.0f);    /* evaluation: gradients scaled to zero */
	xent_case(&r, 50, 128, 0.37f, 0.02f); /* with the z-loss: the same bits as the host */
	xent_case(&r, 40, 1000, 1.0f, 0.02f);
}
END_TEST

/* ---- reductions ---- */

START_TEST(test_sum)
{
	struct prng r;
	prng_seed(&r, 6, 6);
	int sizes[] = {0, 1, 255, 256, 257, 100003, 1 << 20};
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		int n = sizes[s];
		float *x = frand(&r, (size_t)n, -1, 3);
		float *dg = dput(G, x, sizeof(float) * (n ? n : 1)), *dh = dput(H, x, sizeof(float) * (n ? n : 1));
		double sg = -1, sg2 = -2, sh = -3;
		OK(G->ops->sum(G, n, dg, &sg, &E));
		OK(G->ops->sum(G, n, dg, &sg2, &E));
		OK(H->ops->sum(H, n, dh, &sh, &E));
		ck_assert_msg(memcmp(&sg, &sg2, sizeof sg) == 0, "sum n=%d not repeatable: %.17g %.17g",
			      n, sg, sg2);
		ck_assert_msg(fabs(sg - sh) <= 1e-6 * fmax(1e-300, fabs(sh)) || (n == 0 && sg == 0.0),
			      "sum n=%d: gpu %.17g host %.17g", n, sg, sh);
		printf("  sum n=%-8d gpu %.17g host %.17g\n", n, sg, sh);
		/* sum_squares: the same passes over the squares (clipping's norm) */
		OK(G->ops->sum_squares(G, n, dg, &sg, &E));
		OK(G->ops->sum_squares(G, n, dg, &sg2, &E));
		OK(H->ops->sum_squares(H, n, dh, &sh, &E));
		ck_assert_msg(memcmp(&sg, &sg2, sizeof sg) == 0, "sum_squares n=%d not repeatable", n);
		ck_assert_msg(fabs(sg - sh) <= 1e-12 * fabs(sh) || (n == 0 && sg == 0.0),
			      "sum_squares n=%d: gpu %.17g host %.17g", n, sg, sh);
		dfree(G, dg);
		dfree(H, dh);
		free(x);
	}
}
END_TEST

/* col_sum_acc twice (rows, then rows / 2: it accumulates) on device d into out */
static void col_sum_twice(struct dev *d, int rows, int cols, const float *x, const float *out0,
			  float *out)
{
	float *dx = dput(d, x, sizeof(float) * rows * cols), *dout = dput(d, out0, sizeof(float) * cols);
	OK(d->ops->col_sum_acc(d, rows, cols, dx, dout, &E));
	OK(d->ops->col_sum_acc(d, rows / 2, cols, dx, dout, &E));
	dget(d, out, dout, sizeof(float) * cols);
	dfree(d, dx);
	dfree(d, dout);
}

/* Up to 64 rows the GPU adds each column in the host's order (bit for bit); more rows go
 * through the fixed two-level order: the same bits every run, the host's sum within
 * float rounding, a 300-row (one chunk of 64 and more) and a 5,000-row (16 chunks) case. */
START_TEST(test_col_sum_acc)
{
	const int sizes[] = {60, 300, 5000};
	for (int i = 0; i < 3; i++) {
		struct prng r;
		prng_seed(&r, 7, 7 + i);
		int rows = sizes[i], cols = 77;
		float *x = frand(&r, (size_t)rows * cols, -1, 1), *out0 = frand(&r, (size_t)cols, -3, 3);
		float *og = malloc(sizeof(float) * cols), *og2 = malloc(sizeof(float) * cols);
		float *oh = malloc(sizeof(float) * cols);
		col_sum_twice(G, rows, cols, x, out0, og);
		col_sum_twice(G, rows, cols, x, out0, og2);
		col_sum_twice(H, rows, cols, x, out0, oh);
		ck_assert_msg(memcmp(og, og2, sizeof(float) * cols) == 0,
			      "col_sum_acc over %d rows is not repeatable on the GPU", rows);
		if (rows <= 64)
			expect_same("col_sum_acc", og, oh, (size_t)cols);
		else
			expect_close("col_sum_acc (two levels)", og, oh, (size_t)cols, 1e-5 * sqrt(rows));
		double want = out0[3];
		for (int p = 0; p < rows; p++)
			want += x[(size_t)p * cols + 3] * (p < rows / 2 ? 2.0 : 1.0);
		ck_assert_msg(fabs(og[3] - want) < 1e-5 * rows, "col_sum_acc: %g, expected about %g",
			      og[3], want);
		free(x);
		free(out0);
		free(og);
		free(og2);
		free(oh);
	}
}
END_TEST

START_TEST(test_count_nonfinite)
{
	struct prng r;
	prng_seed(&r, 8, 8);
	int n = 50000;
	float *x = frand(&r, (size_t)n, -1e30f, 1e30f);
	int bad = 0;
	for (int i = 7; i < n; i += 1999, bad++)
		x[i] = (bad % 3 == 0) ? NAN : (bad % 3 == 1 ? INFINITY : -INFINITY);
	x[n - 1] = NAN;
	bad++;
	x[0] = 3.4e38f; /* large but finite */
	float *dg = dput(G, x, sizeof(float) * n), *dh = dput(H, x, sizeof(float) * n);
	int64_t bg = -1, bh = -1;
	OK(G->ops->count_nonfinite(G, n, dg, &bg, &E));
	OK(H->ops->count_nonfinite(H, n, dh, &bh, &E));
	ck_assert_int_eq(bh, bad);
	ck_assert_int_eq(bg, bad);
	OK(G->ops->count_nonfinite(G, 0, dg, &bg, &E));
	ck_assert_int_eq(bg, 0);
	dfree(G, dg);
	dfree(H, dh);
	free(x);
}
END_TEST

/* The replica check's fingerprint: the GPU's grid reduction gives the host's 64 bits
 * (the same terms added modulo 2^64, in another order), empty, odd and past 1 M
 * elements, with NaNs of several payloads (a signalling one) and signed zeros among the
 * words; pieces add up to the whole on the GPU too; each call is two launches, one 8-byte
 * copy and one wait. */
START_TEST(test_fingerprint)
{
	struct prng r;
	prng_seed(&r, 12, 12);
	const int sizes[] = {0, 1, 255, 256, 257, 65537, 100003, (1 << 20) + 7, 3 << 20};
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		int n = sizes[s];
		float *x = frand(&r, (size_t)n, -2, 2);
		/* -0, +0 and NaNs of other signs, payloads and quiet bits (a signalling one),
		 * stored as bits: the device must read the words, not make one NaN of them */
		const uint32_t words[] = {0x80000000u, 0x00000000u, 0x7fc00000u, 0xffc00001u,
					  0x7fe5a5a5u, 0x7f800001u};
		for (int i = 3; i < n; i += 1001)
			memcpy(&x[i], &words[(i / 1001) % 6], sizeof(float));
		size_t bytes = sizeof(float) * (n ? n : 1);
		float *dg = dput(G, x, bytes), *dh = dput(H, x, bytes);
		uint64_t fg = 1, fg2 = 2, fh = 3, lo = 4, hi = 5;
		const struct dev_counts before = G->counts;
		OK(G->ops->fingerprint(G, n, dg, 0, &fg, &E));
		if (n > 0) {
			ck_assert_uint_eq(G->counts.launches - before.launches, 2);
			ck_assert_uint_eq(G->counts.copies - before.copies, 1);
			ck_assert_uint_eq(G->counts.syncs - before.syncs, 1);
		}
		OK(G->ops->fingerprint(G, n, dg, 0, &fg2, &E));
		OK(H->ops->fingerprint(H, n, dh, 0, &fh, &E));
		ck_assert_msg(fg == fh, "fingerprint n=%d: gpu %016llx host %016llx", n,
			      (unsigned long long)fg, (unsigned long long)fh);
		ck_assert_uint_eq(fg2, fg);
		int cut = n / 3 + (n > 0); /* uneven pieces */
		if (cut > n)
			cut = n;
		OK(G->ops->fingerprint(G, cut, dg, 0, &lo, &E));
		OK(G->ops->fingerprint(G, n - cut, dg + cut, cut, &hi, &E));
		ck_assert_msg(lo + hi == fg, "fingerprint n=%d in pieces cut at %d: %016llx, whole "
			      "%016llx", n, cut, (unsigned long long)(lo + hi), (unsigned long long)fg);
		printf("  fingerprint n=%-8d gpu %016llx = host\n", n, (unsigned long long)fg);
		dfree(G, dg);
		dfree(H, dh);
		free(x);
	}
}
END_TEST

START_TEST(test_argmax_hits)
{
	struct prng r;
	prng_seed(&r, 9, 9);
	int shapes[][2] = {{200, 130}, {64, 1000}, {10, 1}};
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		int rows = shapes[s][0], cols = shapes[s][1];
		float *logits = malloc(sizeof(float) * rows * cols), *bias = malloc(sizeof(float) * cols);
		int32_t *target = malloc(sizeof(int32_t) * rows);
		/* small integers: many ties, which the lowest index must win */
		for (int i = 0; i < rows * cols; i++)
			logits[i] = (float)prng_below(&r, 6);
		for (int j = 0; j < cols; j++)
			bias[j] = (float)prng_below(&r, 2);
		int expect = 0;
		for (int p = 0; p < rows; p++) {
			int first = 0;
			float m = logits[(size_t)p * cols] + bias[0];
			for (int j = 1; j < cols; j++)
				if (logits[(size_t)p * cols + j] + bias[j] > m) {
					m = logits[(size_t)p * cols + j] + bias[j];
					first = j;
				}
			int last = first; /* another index holding the maximum, if any */
			for (int j = cols - 1; j > first; j--)
				if (logits[(size_t)p * cols + j] + bias[j] == m) {
					last = j;
					break;
				}
			switch (p % 4) {
			case 0: target[p] = first; expect++; break;
			case 1: target[p] = last; expect += last == first; break;
			case 2: target[p] = -1; break;
			default: target[p] = (int32_t)prng_below(&r, (uint32_t)cols);
				 expect += target[p] == first; break;
			}
		}
		int64_t hits[2] = {-1, -1};
		struct dev *devs[2] = {G, H};
		for (int v = 0; v < 2; v++) {
			struct dev *d = devs[v];
			float *dl = dput(d, logits, sizeof(float) * rows * cols), *db = dput(d, bias, sizeof(float) * cols);
			int32_t *dt = dput(d, target, sizeof(int32_t) * rows);
			OK(d->ops->argmax_hits(d, rows, cols, db, dl, dt, &hits[v], &E));
			dfree(d, dl);
			dfree(d, db);
			dfree(d, dt);
		}
		ck_assert_int_eq(hits[1], expect);
		ck_assert_int_eq(hits[0], expect);
		free(logits);
		free(bias);
		free(target);
	}
}
END_TEST

/* What embed_backward on the GPU must give: grad (vocab x dim, holding the start) gets the
 * dx rows of each id's slots in the order gpu/gpu_rules.h fixes, computed here in float
 * (one chain in slot order, the CPU backend's, for ids in one chunk; else the chunks in
 * slot order, the first onto the start, then their sums in chunk order); wide[] gets the
 * same sums in double. n_of[id] = the id's slots. */
static void embed_expected(int slots, int dim, int vocab, const int32_t *ctx, const float *dx,
			   float *grad, double *wide, int *n_of)
{
	int *first = calloc((size_t)vocab + 1, sizeof(int)), *order = malloc(sizeof(int) * slots);
	memset(n_of, 0, sizeof(int) * vocab);
	for (int i = 0; i < slots; i++)
		n_of[ctx[i]]++;
	for (int id = 0; id < vocab; id++)
		first[id + 1] = first[id] + n_of[id];
	int *fill = calloc((size_t)vocab, sizeof(int));
	for (int i = 0; i < slots; i++) /* each id's slots, ascending */
		order[first[ctx[i]] + fill[ctx[i]]++] = i;
	for (int id = 0; id < vocab; id++) {
		const int *mine = order + first[id], n = n_of[id];
		int len = gpu_embed_chunk_len(n), chunks = gpu_embed_chunks(n);
		for (int t = 0; t < dim; t++) {
			float *g = grad + (size_t)id * dim + t, total = 0.0f;
			double w = *g;
			for (int c = 0; c < chunks; c++) {
				int lo = c * len, hi = c == chunks - 1 ? n : lo + len;
				float acc = c == 0 ? *g : 0.0f;
				for (int p = lo; p < hi; p++) {
					acc += dx[(size_t)mine[p] * dim + t];
					w += dx[(size_t)mine[p] * dim + t];
				}
				total = c == 0 ? acc : total + acc;
			}
			if (n)
				*g = total;
			wide[(size_t)id * dim + t] = w;
		}
	}
	free(first);
	free(order);
	free(fill);
}

/* The first t < n where a and b hold different bits, -1 if none. */
static int first_difference(const float *a, const float *b, int n)
{
	for (int t = 0; t < n; t++)
		if (memcmp(&a[t], &b[t], sizeof(float)) != 0)
			return t;
	return -1;
}

/* The GPU's embed_backward result gg against the CPU backend's gh and embed_expected's
 * (want, wide): ids in fewer than 128 slots give the CPU backend's bits, every id the
 * expected order's bits, busier ids a sum within 1e-4 (relative, at least 1) of the
 * double one. Returns how many ids were busy. */
static int expect_embed(const char *what, int dim, int vocab, const int *n_of, const float *gg,
			const float *gh, const float *want, const double *wide)
{
	int busy = 0;
	double worst = 0.0;
	for (int id = 0; id < vocab; id++) {
		const size_t row = (size_t)id * dim;
		int t = first_difference(gg + row, want + row, dim);
		ck_assert_msg(t < 0, "%s: id %d (%d slots), column %d: gpu %.9g, expected %.9g in "
			      "the order of gpu_rules.h", what, id, n_of[id], t, gg[row + t],
			      want[row + t]);
		if (gpu_embed_chunks(n_of[id]) == 1) {
			t = first_difference(gg + row, gh + row, dim);
			ck_assert_msg(t < 0, "%s: id %d (%d slots), column %d: gpu %.9g, cpu %.9g: "
				      "not the same bits", what, id, n_of[id], t, gg[row + t],
				      gh[row + t]);
			continue;
		}
		busy++;
		for (t = 0; t < dim; t++) {
			double d = fabs(gg[row + t] - wide[row + t]) / fmax(1.0, fabs(wide[row + t]));
			ck_assert_msg(d <= 1e-4, "%s: id %d, column %d: gpu %.9g, double sum %.9g",
				      what, id, t, gg[row + t], wide[row + t]);
			worst = fmax(worst, d);
		}
	}
	printf("  %-28s %d ids bit-identical, %d busy: max rel diff %.3g to double\n", what,
	       vocab, busy, worst);
	return busy;
}

/* embed_backward of ctx on device d from the start g0 into out (vocab x dim); `launches`
 * (if not NULL) gets the launches it counted. */
static void embed_on(struct dev *d, int rows, int width, int dim, int vocab, const int32_t *ctx,
		     const float *dx, const float *g0, float *out, uint64_t *launches)
{
	int slots = rows * width;
	int32_t *dctx = dput(d, ctx, sizeof(int32_t) * slots);
	float *ddx = dput(d, dx, sizeof(float) * slots * dim);
	float *dgr = dput(d, g0, sizeof(float) * vocab * dim);
	uint64_t before = d->counts.launches;
	OK(d->ops->embed_backward(d, rows, width, dim, dctx, ddx, dgr, &E));
	if (launches)
		*launches = d->counts.launches - before;
	dget(d, out, dgr, sizeof(float) * vocab * dim);
	dfree(d, dctx);
	dfree(d, ddx);
	dfree(d, dgr);
}

/* embed_backward of ctx from the start g0 on GPU device d, twice, and on the CPU backend:
 * the two GPU runs the same bits, then expect_embed. The GPU's result in out (vocab x
 * dim), each id's slots in n_of; returns how many ids were busy. */
static int embed_check(const char *what, struct dev *d, int rows, int width, int dim, int vocab,
		       const int32_t *ctx, const float *dx, const float *g0, float *out, int *n_of)
{
	size_t n = (size_t)vocab * dim;
	float *again = malloc(sizeof(float) * n), *cpu = malloc(sizeof(float) * n);
	float *want = malloc(sizeof(float) * n);
	double *wide = malloc(sizeof(double) * n);
	embed_on(d, rows, width, dim, vocab, ctx, dx, g0, out, NULL);
	embed_on(d, rows, width, dim, vocab, ctx, dx, g0, again, NULL);
	embed_on(H, rows, width, dim, vocab, ctx, dx, g0, cpu, NULL);
	ck_assert_msg(memcmp(out, again, sizeof(float) * n) == 0,
		      "%s is not repeatable on the GPU", what);
	memcpy(want, g0, sizeof(float) * n);
	embed_expected(rows * width, dim, vocab, ctx, dx, want, wide, n_of);
	int busy = expect_embed(what, dim, vocab, n_of, out, cpu, want, wide);
	free(again);
	free(cpu);
	free(want);
	free(wide);
	return busy;
}

START_TEST(test_embed_backward)
{
	struct prng r;
	prng_seed(&r, 10, 10);
	int rows = 500, width = 8, dim = 32, vocab = 64;
	int slots = rows * width;
	int32_t *ctx = malloc(sizeof(int32_t) * slots);
	for (int i = 0; i < slots; i++) /* id 1 (like a BOS) is in about 40% of the slots */
		ctx[i] = prng_below(&r, 5) < 2 ? 1 : (int32_t)prng_below(&r, vocab);
	float *dx = frand(&r, (size_t)slots * dim, -1, 1), *g0 = frand(&r, (size_t)vocab * dim, -1, 1);
	size_t n = (size_t)vocab * dim;
	float *gg = malloc(sizeof(float) * n), *narrow_out = malloc(sizeof(float) * n);
	int *n_of = malloc(sizeof(int) * vocab);
	ck_assert_int_eq(embed_check("embed_backward", G, rows, width, dim, vocab, ctx, dx, g0, gg,
				     n_of), 1);
	/* a row no slot uses keeps its start value; the busy row moved */
	int unused = -1;
	for (int id = 0; id < vocab && unused < 0; id++)
		if (!n_of[id])
			unused = id;
	if (unused >= 0)
		ck_assert(gg[(size_t)unused * dim] == g0[(size_t)unused * dim]);
	ck_assert(fabsf(gg[(size_t)1 * dim] - g0[(size_t)1 * dim]) > 1e-3f);
	/* a device told the table's rows sorts log2(64) = 6 key bits instead of 31: the same
	 * bits again, with fewer sort kernels (one 8-bit digit instead of four): the slot
	 * indices, 3 for the sort, the plan, the chunks and the fold */
	struct dev *narrow;
	struct cuda_dev_sizes sizes = {1 << 20, (size_t)slots, (size_t)vocab, (size_t)dim};
	OK(cuda_dev_create(0, 0, &sizes, &narrow, &E));
	uint64_t launches = 0;
	embed_on(narrow, rows, width, dim, vocab, ctx, dx, g0, narrow_out, &launches);
	ck_assert_uint_eq(launches, 7);
	expect_same("embed_backward (6 key bits)", narrow_out, gg, n);
	dev_destroy(narrow);
	free(ctx);
	free(dx);
	free(g0);
	free(gg);
	free(narrow_out);
	free(n_of);
}
END_TEST

/* A padding id in 5,000 of 6,000 slots, next to ids at the threshold (127 slots: one
 * chain, the CPU backend's bits; 128: two chunks) and rare ones: every id in the
 * expected order bit for bit, two runs the same bits, the padding id within 1e-4 of a
 * double sum. */
START_TEST(test_embed_backward_busy)
{
	struct prng r;
	prng_seed(&r, 14, 14);
	int rows = 750, width = 8, dim = 48, vocab = 64;
	int slots = rows * width;
	int32_t *ctx = malloc(sizeof(int32_t) * slots);
	for (int i = 0; i < slots; i++)
		ctx[i] = i < 5000 ? 7 : i < 5127 ? 1 : i < 5255 ? 2 : 10 + (int32_t)prng_below(&r, 54);
	for (int i = slots - 1; i > 0; i--) { /* shuffled: every id's slots spread out */
		int j = (int)prng_below(&r, (uint32_t)i + 1);
		int32_t tmp = ctx[i];
		ctx[i] = ctx[j];
		ctx[j] = tmp;
	}
	/* mostly positive, so that the padding id's sum is far from zero */
	float *dx = frand(&r, (size_t)slots * dim, -0.5f, 1), *g0 = frand(&r, (size_t)vocab * dim, -1, 1);
	float *gg = malloc(sizeof(float) * vocab * dim);
	int *n_of = malloc(sizeof(int) * vocab);
	struct dev *d;
	struct cuda_dev_sizes sizes = {1 << 20, (size_t)slots, (size_t)vocab, (size_t)dim};
	OK(cuda_dev_create(0, 0, &sizes, &d, &E));
	ck_assert_int_eq(embed_check("embed_backward (busy)", d, rows, width, dim, vocab, ctx, dx,
				     g0, gg, n_of), 2);
	dev_destroy(d);
	ck_assert_int_eq(n_of[7], 5000);
	ck_assert_int_eq(gpu_embed_chunks(n_of[1]), 1);
	ck_assert_int_eq(gpu_embed_chunks(n_of[2]), 2);
	free(ctx);
	free(dx);
	free(g0);
	free(gg);
	free(n_of);
}
END_TEST

/* More elements than one launch's grid covers (EW_MAX_BLOCKS x EW_THREADS = 16.7 M): the
 * grid-stride loops must reach the last element, with the host's bits. */
START_TEST(test_grid_stride)
{
	const int rows = 4099, cols = 4096; /* 16.79 M elements */
	const size_t n = (size_t)rows * cols;
	struct prng r;
	prng_seed(&r, 11, 11);
	float *z = frand(&r, n, -4, 4), *bias = frand(&r, (size_t)cols, -0.5f, 0.5f);
	float *g = frand(&r, n, -1, 1), *sum0 = calloc((size_t)cols, sizeof(float));
	float *out[2][3];
	struct dev *devs[2] = {G, H};
	for (int v = 0; v < 2; v++) {
		struct dev *d = devs[v];
		float *dz = dput(d, z, sizeof(float) * n), *db = dput(d, bias, sizeof(float) * cols);
		float *dg = dput(d, g, sizeof(float) * n), *dbuf = dalloc(d, sizeof(float) * n);
		float *dsum = dput(d, sum0, sizeof(float) * cols);
		for (int k = 0; k < 3; k++)
			out[v][k] = malloc(sizeof(float) * n);
		OK(d->ops->bias_tanh(d, rows, cols, db, dz, &E));
		dget(d, out[v][0], dz, sizeof(float) * n);
		OK(d->ops->tanh_backward_col_sum(d, rows, cols, dz, dg, dsum, &E));
		dget(d, out[v][1], dg, sizeof(float) * n);
		OK(d->ops->sgd(d, (int)n, 0.05f, 0.9f, 1e-3f, 1, dz, dg, dbuf, &E));
		dget(d, out[v][2], dz, sizeof(float) * n);
		dfree(d, dz);
		dfree(d, db);
		dfree(d, dg);
		dfree(d, dbuf);
		dfree(d, dsum);
	}
	const char *names[3] = {"bias_tanh 16.8M", "tanh_backward_col_sum 16.8M", "sgd 16.8M"};
	for (int k = 0; k < 3; k++) {
		ck_assert_msg(out[0][k][n - 1] != 0.0f || out[1][k][n - 1] == 0.0f,
			      "%s: the last element was not reached", names[k]);
		expect_same(names[k], out[0][k], out[1][k], n);
		free(out[0][k]);
		free(out[1][k]);
	}
	free(z);
	free(bias);
	free(g);
	free(sum0);
}
END_TEST

/* The device allocates at creation only: an embed_backward past the slots it was sized
 * for is refused (not a workspace grown mid-window), and an upload larger than its
 * pinned arena is copied directly, correctly. */
START_TEST(test_sizes_fixed_at_creation)
{
	struct cuda_dev_sizes sizes = {4096, 100, 0, 2};
	struct dev *d = NULL;
	OK(cuda_dev_create(0, 0, &sizes, &d, &E));
	int32_t ctx[400];
	for (int i = 0; i < 400; i++)
		ctx[i] = i % 7;
	float *dx = dalloc(d, sizeof(float) * 400 * 3), *grad = dalloc(d, sizeof(float) * 7 * 3);
	int32_t *dctx = dput(d, ctx, sizeof ctx);
	OK(d->ops->embed_backward(d, 25, 4, 2, dctx, dx, grad, &E)); /* 100 slots: fits */
	err_clear(&E);
	ck_assert_int_eq(d->ops->embed_backward(d, 100, 4, 2, dctx, dx, grad, &E), ERR_DEVICE);
	ck_assert_msg(strstr(E.msg, "allocated at creation for 100 slots"), "%s", E.msg);
	/* wider than it was created for: its scratch for chunk sums is too small */
	err_clear(&E);
	ck_assert_int_eq(d->ops->embed_backward(d, 25, 4, 3, dctx, dx, grad, &E), ERR_DEVICE);
	ck_assert_msg(strstr(E.msg, "for 100 slots of width 2"), "%s", E.msg);
	size_t big = (size_t)3 << 20; /* floats: 12 MiB, past the 1 MiB arena */
	float *host = malloc(sizeof(float) * big), *back = malloc(sizeof(float) * big);
	for (size_t i = 0; i < big; i++)
		host[i] = (float)i;
	float *dbig = dput(d, host, sizeof(float) * big);
	dget(d, back, dbig, sizeof(float) * big);
	ck_assert(memcmp(host, back, sizeof(float) * big) == 0);
	dfree(d, dbig);
	dfree(d, dx);
	dfree(d, grad);
	dfree(d, dctx);
	free(host);
	free(back);
	dev_destroy(d);
}
END_TEST

/* ---- NCCL ---- */

struct nccl_env {
	int world;
	struct pool *pool;
	struct coll *coll;
	struct dev *dev[MAX_WORLD];
	/* per-rank outcome of the threaded parts, checked on the main thread */
	int rc[MAX_WORLD];
	double seconds[MAX_WORLD];
	char msg[MAX_WORLD][sizeof E.msg];
	int fail_rank;  /* abort test: the rank that fails, -1 none */
	double fail_after_s;
};

static int rank_init_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct nccl_env *v = arg;
	return cuda_dev_create(rank, rank, NULL, &v->dev[rank], e);
}

static int rank_fini_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct nccl_env *v = arg;
	dev_destroy(v->dev[rank]);
	v->dev[rank] = NULL;
	return ERR_OK;
}

/* NCCL over the first `world` GPUs */
static void nccl_open_world(struct nccl_env *v, int world, double timeout_s)
{
	int ids[MAX_WORLD];
	memset(v, 0, sizeof *v);
	v->world = world;
	v->fail_rank = -1;
	for (int r = 0; r < v->world; r++)
		ids[r] = r;
	OK(pool_create(v->world, timeout_s, &v->pool, &E));
	OK(pool_run(v->pool, rank_init_fn, v, &E));
	/* the largest allreduce here: the tree's 300,007 floats (its staging is sized for it) */
	OK(nccl_coll_create(v->world, ids, pool_barrier(v->pool), 1 << 19, &v->coll, &E));
	ck_assert_str_eq(v->coll->ops->name, "nccl");
	pool_set_coll(v->pool, v->coll);
}

/* NCCL over every visible GPU (at most MAX_WORLD) */
static void nccl_open(struct nccl_env *v, double timeout_s)
{
	nccl_open_world(v, n_gpus < MAX_WORLD ? n_gpus : MAX_WORLD, timeout_s);
}

static void nccl_close(struct nccl_env *v)
{
	pool_set_coll(v->pool, NULL);
	coll_destroy(v->coll);
	/* a pool whose watchdog abandoned a late thread runs nothing more, and what that
	 * thread may still touch (the devices, v) stays allocated (runtime/pool.h) */
	if (!pool_abandoned(v->pool))
		OK(pool_run(v->pool, rank_fini_fn, v, &E));
	pool_destroy(v->pool);
}

/* rank-dependent values; the reference is summed here in double */
static float f32_of(int rank, size_t i)
{
	return (float)(((i * 2654435761u + (size_t)rank * 40503u) % 2000u) / 1000.0 - 1.0);
}

static int64_t i64_of(int rank, size_t i)
{
	return (int64_t)((i * 7919u + (size_t)rank * 104729u) % 1000003u) - 500000 +
	       (int64_t)rank * 1000000000000LL;
}

/* the first mismatch of a rank, as an ERR_CHECK error (checked on the main thread) */
static int rank_fail(struct nccl_env *v, int rank, struct err *e, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int rank_fail(struct nccl_env *v, int rank, struct err *e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v->msg[rank], sizeof v->msg[rank], fmt, ap);
	va_end(ap);
	return ERR(e, ERR_CHECK, "%s", v->msg[rank]);
}

static int allreduce_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct nccl_env *v = arg;
	struct dev *d = v->dev[rank];
	struct coll *c = v->coll;
	int W = v->world, rc;
	size_t n = 300007;
	float *hx = malloc(sizeof(float) * n);
	int64_t *hi = malloc(sizeof(int64_t) * n);
	float *dx = NULL;
	int64_t *di = NULL;
	if ((rc = d->ops->alloc(d, sizeof(float) * n, (void **)&dx, e)) ||
	    (rc = d->ops->alloc(d, sizeof(int64_t) * n, (void **)&di, e)))
		goto out;
	for (int op = COLL_SUM; op <= COLL_AVG; op++) {
		for (size_t i = 0; i < n; i++) {
			hx[i] = f32_of(rank, i);
			hi[i] = i64_of(rank, i);
		}
		if ((rc = d->ops->upload(d, dx, hx, sizeof(float) * n, e)) ||
		    (rc = d->ops->upload(d, di, hi, sizeof(int64_t) * n, e)) ||
		    (rc = c->ops->allreduce(c, rank, d, dx, n, COLL_F32, op, 0, e)) ||
		    (rc = c->ops->allreduce(c, rank, d, di, n, COLL_I64, op, 0, e)) ||
		    (rc = d->ops->download(d, hx, dx, sizeof(float) * n, e)) ||
		    (rc = d->ops->download(d, hi, di, sizeof(int64_t) * n, e)))
			goto out;
		for (size_t i = 0; i < n; i++) {
			double want = 0.0;
			int64_t iwant = 0;
			for (int q = 0; q < W; q++) {
				want += f32_of(q, i);
				iwant += i64_of(q, i);
			}
			if (op == COLL_AVG) {
				want /= W;
				iwant /= W; /* truncation toward zero, as the host collective */
			}
			if (fabs(hx[i] - want) > 1e-6 * fmax(1.0, fabs(want))) {
				rc = rank_fail(v, rank, e, "rank %d %s f32[%zu]: %.9g, expected %.9g",
					       rank, coll_op_name(op), i, hx[i], want);
				goto out;
			}
			if (hi[i] != iwant) {
				rc = rank_fail(v, rank, e, "rank %d %s i64[%zu]: %lld, expected %lld",
					       rank, coll_op_name(op), i, (long long)hi[i],
					       (long long)iwant);
				goto out;
			}
		}
	}
	/* avg is the sum divided by W, as the host collective computes it: integer-valued
	 * contributions sum exactly in any order, so every element has one right answer,
	 * which ncclAvg's premultiplication by float(1/W) misses for W = 3, 5, 6, 7 */
	for (size_t i = 0; i < n; i++)
		hx[i] = (float)((rank + 1) * ((int)(i % 29) - 14) + (int)(i % 1013));
	if ((rc = d->ops->upload(d, dx, hx, sizeof(float) * n, e)) ||
	    (rc = c->ops->allreduce(c, rank, d, dx, n, COLL_F32, COLL_AVG, 0, e)) ||
	    (rc = d->ops->download(d, hx, dx, sizeof(float) * n, e)))
		goto out;
	for (size_t i = 0; i < n; i++) {
		float sum = 0.0f;
		for (int q = 0; q < W; q++)
			sum += (float)((q + 1) * ((int)(i % 29) - 14) + (int)(i % 1013));
		float want = sum / (float)W;
		if (memcmp(&hx[i], &want, sizeof want) != 0) {
			rc = rank_fail(v, rank, e, "rank %d avg f32[%zu]: %.9g, sum/W is %.9g", rank,
				       i, hx[i], want);
			goto out;
		}
	}
	/* scalars in host memory, as the engine reduces counts and loss sums */
	int64_t count = 1000 + rank;
	double loss = 0.25 * (rank + 1);
	uint64_t syncs = d->counts.syncs;
	if ((rc = c->ops->allreduce(c, rank, d, &count, 1, COLL_I64, COLL_SUM, 1, e)) ||
	    (rc = c->ops->allreduce(c, rank, d, &loss, 1, COLL_F64, COLL_SUM, 1, e)) ||
	    (rc = c->ops->allreduce(c, rank, d, dx, n, COLL_F32, COLL_AVG, 0, e)))
		goto out;
	/* one wait for the device per call: a host buffer's copies both ways and avg's
	 * division are queued before it */
	if (d->counts.syncs - syncs != 3) {
		rc = rank_fail(v, rank, e, "rank %d: three allreduces waited %llu times for the "
			       "device", rank, (unsigned long long)(d->counts.syncs - syncs));
		goto out;
	}
	if (count != 1000LL * W + (int64_t)W * (W - 1) / 2 || fabs(loss - 0.125 * W * (W + 1)) > 1e-12) {
		rc = rank_fail(v, rank, e, "rank %d host scalars: count %lld loss %.17g", rank,
			       (long long)count, loss);
		goto out;
	}
	/* the waits leave this thread's CUDA error state clean: a kernel op right after an
	 * allreduce (the engine launches the forward pass after the count) succeeds */
	cudaError_t last = cudaPeekAtLastError();
	if (last != cudaSuccess) {
		rc = rank_fail(v, rank, e, "rank %d: allreduce left CUDA error %s behind", rank,
			       cudaGetErrorName(last));
		goto out;
	}
	double s = 0.0;
	if ((rc = c->ops->allreduce(c, rank, d, dx, n, COLL_F32, COLL_SUM, 0, e)) ||
	    (rc = d->ops->scale(d, (int)n, 0.5f, dx, e)) || (rc = d->ops->sum(d, (int)n, dx, &s, e)))
		goto out;
	if (!isfinite(s))
		rc = rank_fail(v, rank, e, "rank %d: sum after allreduce and scale: %g", rank, s);
out:
	free(hx);
	free(hi);
	if (dx)
		d->ops->release(d, dx);
	if (di)
		d->ops->release(d, di);
	return rc;
}

START_TEST(test_nccl_allreduce)
{
	struct nccl_env v;
	nccl_open(&v, 60.0);
	printf("  nccl allreduce over %d GPU(s)\n", v.world);
	err_clear(&E);
	int rc = pool_run(v.pool, allreduce_fn, &v, &E);
	ck_assert_msg(rc == ERR_OK, "allreduce: %s", E.msg);
	for (int r = 0; r < v.world; r++)
		ck_assert_msg(v.coll->seconds[r] > 0.0, "rank %d: no time recorded", r);
	nccl_close(&v);
}
END_TEST

/* exact mode's tree allreduce: a device vector and a host scalar on every rank must come
 * back as the host's tree over the ranks' values, bit for bit (coll_tree_add, the rule
 * the host collective applies) */
static int tree_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct nccl_env *v = arg;
	struct dev *d = v->dev[rank];
	int W = v->world, rc;
	size_t n = 300007; /* not a multiple of W: the slices are padded */
	float *hx = malloc(sizeof(float) * n), *want = malloc(sizeof(float) * n);
	float *per[MAX_WORLD] = {NULL}, *dx = NULL;
	double loss = 1.0 / (3.0 + rank), losses[MAX_WORLD], want_loss;
	const void *src[MAX_WORLD] = {NULL};
	rc = hx && want ? ERR_OK : ERR(e, ERR_NOMEM, "out of memory");
	for (int q = 0; q < W && rc == ERR_OK; q++) {
		if (!(per[q] = malloc(sizeof(float) * n))) {
			rc = ERR(e, ERR_NOMEM, "out of memory");
			break;
		}
		for (size_t i = 0; i < n; i++)
			per[q][i] = f32_of(q, i) * (q % 2 ? 1e4f : 1e-3f);
		src[q] = per[q];
		losses[q] = 1.0 / (3.0 + q);
	}
	if (rc == ERR_OK) {
		coll_tree_add(src, W, COLL_F32, 0, n, want);
		for (int q = 0; q < W; q++)
			src[q] = &losses[q];
		coll_tree_add(src, W, COLL_F64, 0, 1, &want_loss);
	}
	uint64_t syncs = 0;
	if (rc == ERR_OK &&
	    ((rc = d->ops->alloc(d, sizeof(float) * n, (void **)&dx, e)) ||
	     (rc = d->ops->upload(d, dx, per[rank], sizeof(float) * n, e)) ||
	     (syncs = d->counts.syncs,
	      rc = v->coll->ops->allreduce_tree(v->coll, rank, d, dx, n, COLL_F32, 0, e)) ||
	     (rc = v->coll->ops->allreduce_tree(v->coll, rank, d, &loss, 1, COLL_F64, 1, e)) ||
	     (syncs = d->counts.syncs - syncs,
	      rc = d->ops->download(d, hx, dx, sizeof(float) * n, e))) == ERR_OK) {
		/* one wait for the device per call (the tree's steps are all queued first) */
		if (syncs != 2)
			rc = rank_fail(v, rank, e, "rank %d: the two tree allreduces waited %llu "
				       "times for the device, not twice", rank,
				       (unsigned long long)syncs);
		else if (memcmp(hx, want, sizeof(float) * n) != 0)
			rc = rank_fail(v, rank, e, "rank %d: the tree allreduce's floats differ from "
				       "the host tree's bits", rank);
		else if (memcmp(&loss, &want_loss, sizeof loss) != 0)
			rc = rank_fail(v, rank, e, "rank %d: tree loss %.17g, host tree %.17g", rank,
				       loss, want_loss);
	}
	for (int q = 0; q < W; q++)
		free(per[q]);
	free(hx);
	free(want);
	if (dx)
		d->ops->release(d, dx);
	return rc;
}

START_TEST(test_nccl_tree_allreduce)
{
	struct nccl_env v;
	int world = 1;
	while (world * 2 <= n_gpus && world * 2 <= MAX_WORLD)
		world *= 2;
	nccl_open_world(&v, world, 60.0);
	printf("  nccl tree allreduce over %d GPU(s)\n", v.world);
	err_clear(&E);
	int rc = pool_run(v.pool, tree_fn, &v, &E);
	ck_assert_msg(rc == ERR_OK, "tree allreduce: %s", E.msg);
	nccl_close(&v);
}
END_TEST

/* rank fail_rank fails after a while without joining; the others sit in an allreduce */
static int abort_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct nccl_env *v = arg;
	struct dev *d = v->dev[rank];
	float *buf = NULL;
	int rc;
	double t0 = clock_now_s();
	if (rank == v->fail_rank) {
		struct timespec ts = {(time_t)v->fail_after_s,
				      (long)((v->fail_after_s - (time_t)v->fail_after_s) * 1e9)};
		nanosleep(&ts, NULL);
		v->rc[rank] = ERR_DEVICE;
		return ERR(e, ERR_DEVICE, "rank %d: injected failure", rank);
	}
	if (v->world == 1) /* nobody else to fail: abort from here */
		v->coll->ops->abort(v->coll, rank);
	if ((rc = d->ops->alloc(d, sizeof(float) * 4096, (void **)&buf, e)) != ERR_OK)
		return rc;
	rc = v->coll->ops->allreduce(v->coll, rank, d, buf, 4096, COLL_F32, COLL_SUM, 0, e);
	v->rc[rank] = rc;
	v->seconds[rank] = clock_now_s() - t0;
	snprintf(v->msg[rank], sizeof v->msg[rank], "%s", e->msg);
	d->ops->release(d, buf);
	return rc;
}

static int warmup_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct nccl_env *v = arg;
	double x = rank;
	return v->coll->ops->allreduce(v->coll, rank, v->dev[rank], &x, 1, COLL_F64, COLL_SUM, 1, e);
}

START_TEST(test_nccl_abort)
{
	struct nccl_env v;
	double timeout = 30.0;
	nccl_open(&v, timeout);
	OK(pool_run(v.pool, warmup_fn, &v, &E)); /* connections established, all healthy */
	v.fail_rank = v.world >= 2 ? v.world - 1 : -1;
	v.fail_after_s = 0.5;
	err_clear(&E);
	int rc = pool_run(v.pool, abort_fn, &v, &E);
	ck_assert_int_ne(rc, ERR_OK);
	if (v.world >= 2)
		ck_assert_msg(strstr(E.msg, "injected failure") != NULL, "root cause: %s", E.msg);
	for (int r = 0; r < v.world; r++) {
		if (r == v.fail_rank)
			continue;
		ck_assert_msg(v.rc[r] == ERR_ABORTED, "rank %d: rc %d (%s)", r, v.rc[r], v.msg[r]);
		ck_assert_msg(v.seconds[r] < timeout / 3, "rank %d left after %.2f s", r, v.seconds[r]);
		printf("  rank %d released after %.3f s: %s\n", r, v.seconds[r], v.msg[r]);
	}
	/* the collective stays aborted, and says so naming the rank that failed first (not
	 * a rank that merely met the dead collective in this later run) */
	int failed = v.fail_rank;
	memset(v.rc, 0, sizeof v.rc);
	v.fail_rank = -1;
	err_clear(&E);
	ck_assert_int_eq(pool_run(v.pool, warmup_fn, &v, &E), ERR_ABORTED);
	ck_assert_msg(strstr(E.msg, "not started") != NULL, "second run: %s", E.msg);
	if (failed >= 0) {
		char want[32];
		snprintf(want, sizeof want, "rank %d failed", failed);
		ck_assert_msg(strstr(E.msg, want) != NULL, "second run: %s", E.msg);
	}
	printf("  after the abort: %s\n", E.msg);
	nccl_close(&v);
}
END_TEST

static int late_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct nccl_env *v = arg;
	if (rank == v->fail_rank) { /* never joins, and fails only long after the timeout */
		struct timespec ts = {3, 0};
		nanosleep(&ts, NULL);
		return ERR_OK;
	}
	double t0 = clock_now_s(), x = 1.0;
	int rc = v->coll->ops->allreduce(v->coll, rank, v->dev[rank], &x, 1, COLL_F64, COLL_SUM, 1, e);
	v->rc[rank] = rc;
	v->seconds[rank] = clock_now_s() - t0;
	snprintf(v->msg[rank], sizeof v->msg[rank], "%s", e->msg);
	return rc;
}

START_TEST(test_nccl_timeout)
{
	static struct nccl_env v; /* the late rank's thread outlives this function */
	if (n_gpus < 2) {
		printf("  timeout test needs 2 GPUs: skipped\n");
		return;
	}
	nccl_open(&v, 60.0);
	OK(pool_run(v.pool, warmup_fn, &v, &E));
	barrier_set_timeout(pool_barrier(v.pool), 1.0); /* now a peer that never joins fails fast */
	v.fail_rank = v.world - 1;
	err_clear(&E);
	ck_assert_int_ne(pool_run(v.pool, late_fn, &v, &E), ERR_OK);
	int timed_out = 0;
	for (int r = 0; r < v.world - 1; r++) {
		ck_assert_msg(v.rc[r] == ERR_DEVICE || v.rc[r] == ERR_ABORTED, "rank %d: rc %d (%s)", r,
			      v.rc[r], v.msg[r]);
		ck_assert_msg(v.seconds[r] < 2.5, "rank %d left after %.2f s", r, v.seconds[r]);
		timed_out += v.rc[r] == ERR_DEVICE && strstr(v.msg[r], "timed out") != NULL;
		printf("  rank %d left after %.3f s: %s\n", r, v.seconds[r], v.msg[r]);
	}
	ck_assert_msg(timed_out >= 1, "no rank reported the timeout");
	/* the rank that never joined is still asleep: the watchdog left it behind */
	ck_assert_int_eq(pool_abandoned(v.pool), 1);
	nccl_close(&v);
}
END_TEST

/* ---- main ---- */

static Suite *hostless_suite(void)
{
	Suite *s = suite_create("gpu-nodevice");
	TCase *tc = tcase_create("nodevice");
	tcase_add_test(tc, test_device_count_answers);
	tcase_add_test(tc, test_env_report);
	tcase_add_test(tc, test_nccl_refuses_shared_gpu);
	tcase_add_test(tc, test_missing_device_refused);
	suite_add_tcase(s, tc);
	return s;
}

static void gpu_setup(void)
{
	struct cuda_dev_sizes sizes = {1 << 20, 500 * 8, 0, 32}; /* test_embed_backward's */
	OK(cuda_dev_create(0, 0, &sizes, &G, &E));
	OK(dev_host_create(0, &H, &E));
}

static void gpu_teardown(void)
{
	dev_destroy(G);
	dev_destroy(H);
	G = H = NULL;
}

static Suite *gpu_suite(void)
{
	Suite *s = suite_create("gpu");
	TCase *ops = tcase_create("ops");
	tcase_add_checked_fixture(ops, gpu_setup, gpu_teardown);
	tcase_add_test(ops, test_memory);
	tcase_add_test(ops, test_gemm);
	tcase_add_test(ops, test_elementwise);
	tcase_add_test(ops, test_embed_gather);
	tcase_add_test(ops, test_xent);
	tcase_add_test(ops, test_sum);
	tcase_add_test(ops, test_col_sum_acc);
	tcase_add_test(ops, test_count_nonfinite);
	tcase_add_test(ops, test_fingerprint);
	tcase_add_test(ops, test_argmax_hits);
	tcase_add_test(ops, test_embed_backward);
	tcase_add_test(ops, test_embed_backward_busy);
	tcase_add_test(ops, test_grid_stride);
	tcase_add_test(ops, test_sizes_fixed_at_creation);
	suite_add_tcase(s, ops);
	TCase *nccl = tcase_create("nccl");
	tcase_add_test(nccl, test_nccl_allreduce);
	tcase_add_test(nccl, test_nccl_tree_allreduce);
	tcase_add_test(nccl, test_nccl_abort);
	tcase_add_test(nccl, test_nccl_timeout);
	suite_add_tcase(s, nccl);
	return s;
}

int main(void)
{
	char why[256] = "";
	struct err e;
	err_clear(&e);
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* in this process: CUDA does not survive fork() */
	if (check_run(hostless_suite(), 1) != EXIT_SUCCESS)
		return EXIT_FAILURE;
	if (gpu_device_count(&n_gpus, why, sizeof why, &e) != ERR_OK || n_gpus == 0) {
		printf("test-gpu: no GPU, skipping the device tests: %s\n", why[0] ? why : e.msg);
		return 77;
	}
	printf("test-gpu: %s\n", why);
	gpu_env_report(stdout, &e);
	return check_run(gpu_suite(), 1);
}
