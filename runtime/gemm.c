/*
 * gemm: the host backend's one sgemm entry (see gemm.h).
 */
#include "gemm.h"

#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas_core.h"
#include "clock.h"
#include "ddptok_config.h"
#if DDPTOK_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#endif

static const char *const impl_names[] = {"auto", "onednn", "openblas"};

const char *gemm_impl_name(enum gemm_impl impl)
{
	return impl >= GEMM_AUTO && impl <= GEMM_OPENBLAS ? impl_names[impl] : "invalid";
}

int gemm_have_onednn(void)
{
	return DDPTOK_HAVE_ONEDNN;
}

/* OpenBLAS's x86-64 kernels tile the rows of a row-major C by 16 or 24, and a part
 * starting inside a tile moves the tiles after it, which rounds some elements differently
 * (measured, docs/threads.md): parts of whole 48-row blocks keep the bits. oneDNN's
 * sgemm gave other bits for some shapes when cut into 48-row blocks (its blocking
 * depends on the row count), so it is always called on fixed blocks of 128 rows: a GEMM
 * cut at any multiple of them makes the same calls as the whole one. */
#define OPENBLAS_ROW_BLOCK 48
#define ONEDNN_ROW_BLOCK 128

int gemm_row_block(enum gemm_impl impl)
{
	return impl == GEMM_ONEDNN ? ONEDNN_ROW_BLOCK : OPENBLAS_ROW_BLOCK;
}

#if DDPTOK_HAVE_ONEDNN
/* oneDNN's threads are OpenMP's, whose thread count is each calling thread's own setting:
 * set it to one on every thread that calls, once */
static _Thread_local int onednn_one_thread;

static void onednn_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha,
			 const float *a, int lda, const float *b, int ldb, float beta, float *c,
			 int ldc)
{
	if (!onednn_one_thread) {
		omp_set_num_threads(1);
		onednn_one_thread = 1;
	}
	for (int lo = 0; lo < m; lo += ONEDNN_ROW_BLOCK) {
		int rows = m - lo < ONEDNN_ROW_BLOCK ? m - lo : ONEDNN_ROW_BLOCK;
		const float *ap = trans_a ? a + lo : a + (size_t)lo * lda;
		dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', rows, n, k, alpha, ap, lda, b,
			   ldb, beta, c + (size_t)lo * ldc, ldc);
	}
}
#endif

void gemm_sgemm_by(enum gemm_impl impl, int trans_a, int trans_b, int m, int n, int k,
		   float alpha, const float *a, int lda, const float *b, int ldb, float beta,
		   float *c, int ldc)
{
#if DDPTOK_HAVE_ONEDNN
	if (impl == GEMM_ONEDNN) {
		onednn_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
		return;
	}
#endif
	cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
		    trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c,
		    ldc);
}

/* ---- the determinism check ---- */

/* rows, columns and inner size of the checked GEMM: three row blocks of either
 * implementation and a ragged end, columns and inner size past one kernel tile */
#define CHECK_M (3 * ONEDNN_ROW_BLOCK + 37)
#define CHECK_N 80
#define CHECK_K 96

/* Whether C computed whole, again whole, and in row blocks has the same bits, for one
 * transposition; the operands are filled by the caller. */
static int same_bits_one(enum gemm_impl impl, int ta, int tb, const float *a, const float *b,
			 float *whole, float *again)
{
	int m = CHECK_M, n = CHECK_N, k = CHECK_K;
	int lda = ta ? m : k, ldb = tb ? k : n;
	size_t bytes = sizeof(float) * (size_t)m * n;
	gemm_sgemm_by(impl, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, whole, n);
	gemm_sgemm_by(impl, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, again, n);
	if (memcmp(whole, again, bytes) != 0)
		return 0;
	int block = gemm_row_block(impl);
	for (int lo = 0; lo < m; lo += block) {
		int rows = lo + block <= m ? block : m - lo;
		const float *ap = ta ? a + lo : a + (size_t)lo * lda;
		gemm_sgemm_by(impl, ta, tb, rows, n, k, 1.0f, ap, lda, b, ldb, 0.0f,
			      again + (size_t)lo * n, n);
	}
	return memcmp(whole, again, bytes) == 0;
}

int gemm_deterministic(enum gemm_impl impl)
{
	if (impl == GEMM_ONEDNN && !DDPTOK_HAVE_ONEDNN)
		return 0;
	size_t na = (size_t)CHECK_M * CHECK_K, nb = (size_t)CHECK_N * CHECK_K;
	size_t nc = (size_t)CHECK_M * CHECK_N;
	float *buf = malloc(sizeof(float) * (na + nb + 2 * nc));
	if (!buf)
		return 0;
	float *a = buf, *b = a + na, *whole = b + nb, *again = whole + nc;
	uint32_t x = 0x9e3779b9u; /* any values with rounding to do: an xorshift's */
	for (size_t i = 0; i < na + nb; i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		buf[i] = (float)(x >> 8) / 16777216.0f - 0.5f;
	}
	int same = 1;
	for (int t = 0; t < 4 && same; t++)
		same = same_bits_one(impl, t & 1, t >> 1, a, b, whole, again);
	free(buf);
	return same;
}

/* ---- the choice ---- */

static atomic_int chosen = GEMM_AUTO;
static pthread_mutex_t choice_lock = PTHREAD_MUTEX_INITIALIZER;

/* auto's choice, with its reason in why */
static enum gemm_impl auto_choice(char *why, size_t cap)
{
	if (!DDPTOK_HAVE_ONEDNN) {
		snprintf(why, cap, "oneDNN is not built in");
		return GEMM_OPENBLAS;
	}
	if (!gemm_deterministic(GEMM_ONEDNN)) {
		snprintf(why, cap, "oneDNN's sgemm is not deterministic on this CPU (row blocks "
			 "or a second call gave other bits)");
		return GEMM_OPENBLAS;
	}
	snprintf(why, cap, "oneDNN is built in and deterministic on this CPU");
	return GEMM_ONEDNN;
}

int gemm_select(int want, char *why, size_t cap, struct err *e)
{
	char reason[160] = "";
	enum gemm_impl impl = (enum gemm_impl)want;
	if (want == GEMM_ONEDNN && !DDPTOK_HAVE_ONEDNN)
		return ERR(e, ERR_CONFIG, "devices.gemm = onednn: this build has no oneDNN (install "
			   "libdnnl-dev and rebuild)");
	if (want == GEMM_ONEDNN && !gemm_deterministic(GEMM_ONEDNN))
		return ERR(e, ERR_CONFIG, "devices.gemm = onednn: oneDNN's sgemm is not "
			   "deterministic on this CPU (row blocks or a second call gave other bits)");
	if (want == GEMM_AUTO)
		impl = auto_choice(reason, sizeof reason);
	else
		snprintf(reason, sizeof reason, "devices.gemm = %s", gemm_impl_name(impl));
	pthread_mutex_lock(&choice_lock);
	int before = atomic_load(&chosen);
	if (before == GEMM_AUTO)
		atomic_store(&chosen, impl);
	pthread_mutex_unlock(&choice_lock);
	if (before != GEMM_AUTO && before != (int)impl)
		return ERR(e, ERR_CONFIG, "devices.gemm: this process already runs its GEMMs with "
			   "%s and cannot switch to %s (one implementation per process)",
			   gemm_impl_name(before), gemm_impl_name(impl));
	if (why && cap)
		snprintf(why, cap, "%s", reason);
	return ERR_OK;
}

enum gemm_impl gemm_chosen(void)
{
	int impl = atomic_load(&chosen);
	if (impl != GEMM_AUTO)
		return (enum gemm_impl)impl;
	struct err ignore = {0};
	gemm_select(GEMM_AUTO, NULL, 0, &ignore); /* auto cannot fail */
	return (enum gemm_impl)atomic_load(&chosen);
}

void gemm_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
		int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
	gemm_sgemm_by(gemm_chosen(), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
		      ldc);
}

/* ---- what it is and how fast ---- */

#if DDPTOK_HAVE_ONEDNN
/* oneDNN's name of the instruction set its JIT kernels target */
static const char *onednn_isa_name(dnnl_cpu_isa_t isa)
{
	switch (isa) {
	case dnnl_cpu_isa_sse41: return "sse41";
	case dnnl_cpu_isa_avx: return "avx";
	case dnnl_cpu_isa_avx2: return "avx2";
	case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
	case dnnl_cpu_isa_avx512_core: return "avx512_core";
	case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
	case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
	case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
	default: return "another instruction set";
	}
}
#endif

void gemm_describe(enum gemm_impl impl, char *out, size_t cap)
{
#if DDPTOK_HAVE_ONEDNN
	if (impl == GEMM_ONEDNN) {
		const dnnl_version_t *v = dnnl_version();
		snprintf(out, cap, "onednn %d.%d.%d (JIT kernels for %s)", v->major, v->minor,
			 v->patch, onednn_isa_name(dnnl_get_effective_cpu_isa()));
		return;
	}
#endif
	const char *core = blas_core_name();
	snprintf(out, cap, "openblas (%s, kernel %s)", blas_library(), core ? core : "not named");
}

double gemm_rate(enum gemm_impl impl, int m, int n, int k, double seconds)
{
	size_t na = (size_t)m * k, nb = (size_t)n * k;
	float *a = malloc(sizeof(float) * (na + nb + (size_t)m * n));
	if (!a)
		return 0.0;
	float *b = a + na, *c = b + nb;
	for (size_t i = 0; i < na + nb; i++)
		a[i] = (float)(i % 7) * 0.1f;
	openblas_set_num_threads(1);
	gemm_sgemm_by(impl, 0, 1, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);
	long reps = 0;
	double t0 = clock_now_s(), t;
	do {
		gemm_sgemm_by(impl, 0, 1, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);
		reps++;
	} while ((t = clock_now_s() - t0) < seconds);
	free(a);
	return 2.0 * m * n * k * reps * 1e-9 / t;
}
