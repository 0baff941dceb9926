/*
 * cublas: the emulated device's cuBLAS (see cublas_api.h). A handle belongs to the device
 * current when it was created; its stream and math mode are honoured. cublasSgemm and
 * cublasSgemmStridedBatched validate their arguments as cuBLAS does
 * (CUBLAS_STATUS_INVALID_VALUE for a negative size or count or a leading dimension below
 * the rows of its operand), check, stricter, that every operand's items lie within one
 * allocation of the handle's device, that no stride is negative and that the items of C
 * lie stacked or side by side (valid_strides: overlapping ones would race on a GPU), and
 * queue the column-major products on the stream, computed by the host BLAS item after
 * item. A wrong transpose or leading dimension therefore gives the wrong product, or an
 * error, as on a GPU. The TF32 math mode rounds the operands to TF32 first, as tensor
 * cores would.
 */
#include <stdint.h>
#include <string.h>

#include <cblas.h>
#include <memory>
#include <vector>

#include "cublas_api.h"
#include "emu.h"

struct cublasContext {
	int device;
	cudaStream_t stream;
	cublasMath_t math;
	uint32_t magic;
};

#define HANDLE_MAGIC 0x0b1a5u

extern "C" {

cublasStatus_t cublasCreate(cublasHandle_t *handle)
{
	if (!handle)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (emu::current_device() >= emu::device_count())
		return CUBLAS_STATUS_NOT_INITIALIZED;
	*handle = new cublasContext{emu::current_device(), nullptr, CUBLAS_DEFAULT_MATH,
				    HANDLE_MAGIC};
	return CUBLAS_STATUS_SUCCESS;
}

static bool live(cublasHandle_t h)
{
	return h && h->magic == HANDLE_MAGIC;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle)
{
	if (!live(handle))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	handle->magic = 0; /* a later use is caught (the handle is not reused) */
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream)
{
	if (!live(handle))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	int d = emu::stream_device(stream);
	if (d != handle->device) {
		emu::report("cublasSetStream: the stream is device %d's, the handle device %d's", d,
			    handle->device);
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	handle->stream = stream;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
	if (!live(handle))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	handle->math = mode;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetAtomicsMode(cublasHandle_t handle, cublasAtomicsMode_t mode)
{
	return live(handle) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value)
{
	*value = type == MAJOR_VERSION ? 12 : type == MINOR_VERSION ? 8 : 0;
	return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t status)
{
	switch (status) {
	case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
	case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
	case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
	case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
	default: return "CUBLAS_STATUS_INTERNAL_ERROR";
	}
}

const char *cublasGetStatusString(cublasStatus_t status)
{
	switch (status) {
	case CUBLAS_STATUS_SUCCESS: return "success";
	case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
	case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
	case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
	default: return "an internal operation failed";
	}
}

} /* extern "C" */

/* The bytes a column-major rows x cols operand with leading dimension ld spans. */
static size_t span(int rows, int cols, int ld)
{
	return rows <= 0 || cols <= 0 ? 0 : ((size_t)(cols - 1) * ld + rows) * sizeof(float);
}

/* x rounded to TF32 (10 mantissa bits, nearest even), as a tensor core reads it */
static float tf32(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	if ((u & 0x7f800000u) != 0x7f800000u)
		u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
	memcpy(&x, &u, 4);
	return x;
}

static std::shared_ptr<std::vector<float>> rounded(const float *a, size_t floats)
{
	auto v = std::make_shared<std::vector<float>>(a, a + floats);
	for (float &x : *v)
		x = tf32(x);
	return v;
}

/* A batch of column-major products (cublasSgemm's is the batch of one, strides 0). */
struct gemm_batch {
	cublasOperation_t ta, tb;
	int m, n, k, lda, ldb, ldc, count;
	long long sa, sb, sc; /* floats between items */
};

/* The bytes an operand's `count` items of `one` bytes each, `stride` floats apart, span. */
static size_t batch_span(size_t one, long long stride, int count)
{
	if (one == 0 || count <= 0)
		return 0;
	return (size_t)(count - 1) * (size_t)stride * sizeof(float) + one;
}

/* cuBLAS's own checks: the operations, sizes, leading dimensions, scalars and count */
static bool valid_sizes(const gemm_batch &g, const float *alpha, const float *beta)
{
	int a_rows = g.ta == CUBLAS_OP_N ? g.m : g.k, b_rows = g.tb == CUBLAS_OP_N ? g.k : g.n;
	bool ops = (g.ta == CUBLAS_OP_N || g.ta == CUBLAS_OP_T || g.ta == CUBLAS_OP_C) &&
		   (g.tb == CUBLAS_OP_N || g.tb == CUBLAS_OP_T || g.tb == CUBLAS_OP_C);
	return ops && g.m >= 0 && g.n >= 0 && g.k >= 0 && g.count >= 0 &&
	       g.lda >= (a_rows > 1 ? a_rows : 1) && g.ldb >= (b_rows > 1 ? b_rows : 1) &&
	       g.ldc >= (g.m > 1 ? g.m : 1) && alpha && beta;
}

/* The emulator's own, stricter: strides that cuBLAS takes but ddptok never passes
 * (negative), and items of C that may overlap (on a GPU they would race: the result is
 * undefined). C's items are accepted stacked (each after the last element of the one
 * before) or side by side (each m rows after the one before, all within ldc rows). */
static bool valid_strides(const gemm_batch &g)
{
	if (g.sa < 0 || g.sb < 0 || g.sc < 0)
		return false;
	if (g.count <= 1 || g.m == 0 || g.n == 0)
		return true;
	bool stacked = (size_t)g.sc * sizeof(float) >= span(g.m, g.n, g.ldc);
	bool side_by_side = g.sc >= g.m && (long long)(g.count - 1) * g.sc + g.m <= g.ldc;
	return stacked || side_by_side;
}

static cublasStatus_t gemm_args(cublasHandle_t h, const char *call, const gemm_batch &g,
				const float *alpha, const float *A, const float *B,
				const float *beta, const float *C)
{
	int a_rows = g.ta == CUBLAS_OP_N ? g.m : g.k, a_cols = g.ta == CUBLAS_OP_N ? g.k : g.m;
	int b_rows = g.tb == CUBLAS_OP_N ? g.k : g.n, b_cols = g.tb == CUBLAS_OP_N ? g.n : g.k;
	if (!live(h))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!valid_sizes(g, alpha, beta) || !valid_strides(g)) {
		emu::report("%s(%c, %c, m %d, n %d, k %d, lda %d, ldb %d, ldc %d, strides "
			    "%lld %lld %lld, count %d): invalid value (op(A) has %d rows, op(B) "
			    "%d, C %d; items of C must not overlap)", call, g.ta ? 'T' : 'N',
			    g.tb ? 'T' : 'N', g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.sa, g.sb, g.sc,
			    g.count, a_rows, b_rows, g.m);
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	if (emu::current_device() != h->device) {
		emu::report("%s: the handle is device %d's, the thread's current device is %d",
			    call, h->device, emu::current_device());
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	if (g.m == 0 || g.n == 0 || g.count == 0)
		return CUBLAS_STATUS_SUCCESS;
	size_t a = batch_span(span(a_rows, a_cols, g.lda), g.sa, g.count);
	size_t b = batch_span(span(b_rows, b_cols, g.ldb), g.sb, g.count);
	size_t c = batch_span(span(g.m, g.n, g.ldc), g.sc, g.count);
	if ((g.k > 0 && (emu::check_range(call, "A", A, a, h->device) ||
			 emu::check_range(call, "B", B, b, h->device))) ||
	    emu::check_range(call, "C", C, c, h->device))
		return CUBLAS_STATUS_INVALID_VALUE;
	return CUBLAS_STATUS_SUCCESS;
}

/* Item i of the batch, C = alpha op(A) op(B) + beta C on the host, as the stream runs it;
 * with tf the operands rounded to TF32 first, read when the product runs, as the device
 * does. */
static void product(const gemm_batch &g, int i, bool tf, float alpha, const float *A,
		    const float *B, float beta, float *C)
{
	A += i * g.sa, B += i * g.sb, C += i * g.sc;
	int m = g.m, n = g.n, k = g.k;
	if (k == 0) {
		for (int j = 0; j < n; j++)
			for (int r = 0; r < m; r++)
				C[(size_t)j * g.ldc + r] =
					beta == 0.0f ? 0.0f : beta * C[(size_t)j * g.ldc + r];
		return;
	}
	bool an = g.ta == CUBLAS_OP_N, bn = g.tb == CUBLAS_OP_N;
	std::shared_ptr<std::vector<float>> ra, rb;
	if (tf) {
		ra = rounded(A, span(an ? m : k, an ? k : m, g.lda) / 4);
		rb = rounded(B, span(bn ? k : n, bn ? n : k, g.ldb) / 4);
		A = ra->data();
		B = rb->data();
	}
	cblas_sgemm(CblasColMajor, an ? CblasNoTrans : CblasTrans, bn ? CblasNoTrans : CblasTrans,
		    m, n, k, alpha, A, g.lda, B, g.ldb, beta, C, g.ldc);
}

/* Checks the batch, then queues its products, items in order, on the handle's stream. */
static cublasStatus_t batch(cublasHandle_t h, const char *call, const gemm_batch &g,
			    const float *alpha, const float *A, const float *B,
			    const float *beta, float *C)
{
	cublasStatus_t st = gemm_args(h, call, g, alpha, A, B, beta, C);
	if (st != CUBLAS_STATUS_SUCCESS || g.m == 0 || g.n == 0 || g.count == 0)
		return st;
	if (emu::sticky(h->device) != cudaSuccess)
		return CUBLAS_STATUS_EXECUTION_FAILED;
	float a = *alpha, b = *beta; /* host pointer mode: read at the call */
	bool tf = h->math == CUBLAS_TF32_TENSOR_OP_MATH || h->math == CUBLAS_TENSOR_OP_MATH;
	emu::enqueue(h->stream, [=] {
		for (int i = 0; i < g.count; i++)
			product(g, i, tf, a, A, B, b, C);
	});
	return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta,
				      cublasOperation_t tb, int m, int n, int k,
				      const float *alpha, const float *A, int lda, const float *B,
				      int ldb, const float *beta, float *C, int ldc)
{
	return batch(h, "cublasSgemm", gemm_batch{ta, tb, m, n, k, lda, ldb, ldc, 1, 0, 0, 0},
		     alpha, A, B, beta, C);
}

extern "C" cublasStatus_t
cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
			  int n, int k, const float *alpha, const float *A, int lda,
			  long long strideA, const float *B, int ldb, long long strideB,
			  const float *beta, float *C, int ldc, long long strideC, int batchCount)
{
	return batch(h, "cublasSgemmStridedBatched",
		     gemm_batch{ta, tb, m, n, k, lda, ldb, ldc, batchCount, strideA, strideB,
				strideC},
		     alpha, A, B, beta, C);
}
