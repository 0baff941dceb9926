/*
 * cublas: the emulated device's cuBLAS (see cublas_api.h). A handle belongs to the device
 * current when it was created; its stream and math mode are honoured. cublasSgemm
 * validates its arguments as cuBLAS does (CUBLAS_STATUS_INVALID_VALUE for a negative
 * size or a leading dimension below the rows of its operand), checks, stricter, that
 * every operand lies within one allocation of the handle's device, and queues the
 * column-major product on the stream, computed by the host BLAS. A wrong transpose or
 * leading dimension therefore gives the wrong product, or an error, as on a GPU. The
 * TF32 math mode rounds the operands to TF32 first, as tensor cores would.
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

static cublasStatus_t gemm_args(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
				int m, int n, int k, const float *alpha, const float *A, int lda,
				const float *B, int ldb, const float *beta, const float *C, int ldc)
{
	int a_rows = ta == CUBLAS_OP_N ? m : k, a_cols = ta == CUBLAS_OP_N ? k : m;
	int b_rows = tb == CUBLAS_OP_N ? k : n, b_cols = tb == CUBLAS_OP_N ? n : k;
	if (!live(h))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if ((ta != CUBLAS_OP_N && ta != CUBLAS_OP_T && ta != CUBLAS_OP_C) ||
	    (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T && tb != CUBLAS_OP_C) || m < 0 || n < 0 ||
	    k < 0 || lda < (a_rows > 1 ? a_rows : 1) || ldb < (b_rows > 1 ? b_rows : 1) ||
	    ldc < (m > 1 ? m : 1) || !alpha || !beta) {
		emu::report("cublasSgemm(%c, %c, m %d, n %d, k %d, lda %d, ldb %d, ldc %d): invalid "
			    "value (op(A) has %d rows, op(B) %d, C %d)", ta ? 'T' : 'N',
			    tb ? 'T' : 'N', m, n, k, lda, ldb, ldc, a_rows, b_rows, m);
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	if (emu::current_device() != h->device) {
		emu::report("cublasSgemm: the handle is device %d's, the thread's current device is "
			    "%d", h->device, emu::current_device());
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	if (m == 0 || n == 0)
		return CUBLAS_STATUS_SUCCESS;
	if ((k > 0 && (emu::check_range("cublasSgemm", "A", A, span(a_rows, a_cols, lda), h->device) ||
		       emu::check_range("cublasSgemm", "B", B, span(b_rows, b_cols, ldb), h->device))) ||
	    emu::check_range("cublasSgemm", "C", C, span(m, n, ldc), h->device))
		return CUBLAS_STATUS_INVALID_VALUE;
	return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta,
				      cublasOperation_t tb, int m, int n, int k,
				      const float *alpha, const float *A, int lda, const float *B,
				      int ldb, const float *beta, float *C, int ldc)
{
	cublasStatus_t st = gemm_args(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
	if (st != CUBLAS_STATUS_SUCCESS || m == 0 || n == 0)
		return st;
	if (emu::sticky(h->device) != cudaSuccess)
		return CUBLAS_STATUS_EXECUTION_FAILED;
	float a = *alpha, b = *beta; /* host pointer mode: read at the call */
	bool tf = h->math == CUBLAS_TF32_TENSOR_OP_MATH || h->math == CUBLAS_TENSOR_OP_MATH;
	int a_cols = ta == CUBLAS_OP_N ? k : m, b_cols = tb == CUBLAS_OP_N ? n : k;
	emu::enqueue(h->stream, [=] {
		const float *pa = A, *pb = B;
		std::shared_ptr<std::vector<float>> ra, rb;
		if (tf && k > 0) { /* read when the product runs, as the device does */
			ra = rounded(A, span(ta == CUBLAS_OP_N ? m : k, a_cols, lda) / 4);
			rb = rounded(B, span(tb == CUBLAS_OP_N ? k : n, b_cols, ldb) / 4);
			pa = ra->data();
			pb = rb->data();
		}
		if (k == 0) {
			for (int j = 0; j < n; j++)
				for (int i = 0; i < m; i++)
					C[(size_t)j * ldc + i] = b == 0.0f ? 0.0f : b * C[(size_t)j * ldc + i];
			return;
		}
		cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
			    tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, m, n, k, a, pa, lda, pb,
			    ldb, b, C, ldc);
	});
	return CUBLAS_STATUS_SUCCESS;
}
