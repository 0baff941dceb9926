/*
 * dev_host: the host (CPU) backend of the device interface.
 *
 * Device memory is host memory, "asynchronous" operations complete before returning,
 * GEMMs go to OpenBLAS's cblas_sgemm with one BLAS thread per device thread (the pool
 * supplies the parallelism, one thread per simulated device), and the element-wise
 * parts are the loops of dev_host_kernels.c over the formulas of kmath.h, vectorized by
 * the compiler, in the widest build the CPU runs (AVX-512, AVX2 or the baseline; the
 * same bits either way). Every reduction runs in a fixed order, so results are identical run to
 * run and across ranks.
 */
#include "dev.h"

#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dev_host_kernels.h"

static void host_destroy(struct dev *d)
{
	free(d);
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

static int host_gemm(struct dev *d, int trans_a, int trans_b, int m, int n, int k, float alpha,
		     const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc,
		     struct err *e)
{
	if (m <= 0 || n <= 0)
		return ERR_OK;
	dev_count(d, 1, 0, 0);
	if (k <= 0) {
		/* C = beta * C: BLAS implementations disagree on k == 0, do it here */
		for (int i = 0; i < m; i++)
			for (int j = 0; j < n; j++)
				c[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[(size_t)i * ldc + j];
		return ERR_OK;
	}
	double t0 = clock_now_s();
	cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
		    trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
	dev_count_gemm(d, m, n, k, clock_now_s() - t0);
	return ERR_OK;
}

/* the memory operations and the GEMM, shared by every build of the loops */
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

int dev_host_create(int rank, struct dev **out, struct err *e)
{
	struct dev *d = calloc(1, sizeof *d);
	if (!d)
		return ERR(e, ERR_NOMEM, "rank %d: out of memory", rank);
	d->ops = host_ops();
	d->backend = DEV_BACKEND_CPU;
	d->rank = rank;
	d->device_id = rank;
	/* the pool provides one thread per device: BLAS must not add its own */
	openblas_set_num_threads(1);
	*out = d;
	return ERR_OK;
}

void dev_destroy(struct dev *d)
{
	if (d && d->ops)
		d->ops->destroy(d);
}
