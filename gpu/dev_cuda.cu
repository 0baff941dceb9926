/*
 * dev_cuda: the CUDA backend of the device interface (runtime/dev.h).
 *
 * One `struct cuda_dev` per device thread: a non-blocking stream of its own, a cuBLAS
 * handle bound to that stream in pedantic float32 math (no TF32, no emulated float32
 * that an environment variable could switch on) with atomics disallowed, a pinned
 * staging arena for uploads, the embed_backward sort workspace and small scratch
 * buffers for reductions. All of them are allocated at creation, sized by
 * `struct cuda_dev_sizes`: no operation allocates or frees, since freeing pinned memory
 * while other threads' NCCL kernels wait is a known way to hang them. Every operation
 * is queued on the stream; download, sum, sum_squares, argmax_hits, count_nonfinite,
 * fingerprint and sync wait.
 *
 * The kernels it queues, and the orders in which their reductions add, are those of
 * gpu/dev_cuda_kernels.cu; this file holds what surrounds them.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cub/device/device_radix_sort.cuh>
#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" {
#include "dev.h"
#include "err.h"
#include "gpu.h"
}
#include "dev_cuda.h"
#include "dev_cuda_kernels.cuh"
#include "gpt_kernels.h"
#include "gpu_rules.h"

#define EW_THREADS 256        /* element-wise kernels */
#define EW_MAX_BLOCKS 65536   /* grid-stride beyond this */
#define RED_BLOCKS 256        /* at most this many partial results */
#define STAGE_INIT (1u << 20) /* pinned upload arena: smallest size */
#define STAGE_MAX (16u << 20) /* and largest (larger uploads are copied directly) */

static struct cuda_dev *cdev(struct dev *d)
{
	return cuda_dev_of(d);
}

/* ---- error mapping ---- */

#define CU_TRY(cd, call, e)                                                                  \
	do {                                                                                 \
		cudaError_t st_ = (call);                                                    \
		if (st_ != cudaSuccess)                                                      \
			return gpu_cuda_error((e), __FILE__, __LINE__, (int)st_, #call,      \
					      (cd)->dev.rank, (cd)->dev.device_id);          \
	} while (0)

/* After a kernel launch: configuration errors show up here, faults at the next wait. */
static int launch_check(struct cuda_dev *cd, const char *kernel, const char *file, int line,
			struct err *e)
{
	cudaError_t st = cudaGetLastError();
	if (st != cudaSuccess) {
		char call[96];
		snprintf(call, sizeof call, "launch of %s", kernel);
		return gpu_cuda_error(e, file, line, (int)st, call, cd->dev.rank, cd->dev.device_id);
	}
	dev_count(&cd->dev, 1, 0, 0);
	return ERR_OK;
}

#define LAUNCH_TRY(cd, what, e)                                                              \
	do {                                                                                 \
		int launch_rc_ = launch_check((cd), (what), __FILE__, __LINE__, (e));       \
		if (launch_rc_ != ERR_OK)                                                    \
			return launch_rc_;                                                   \
	} while (0)

/* a copy or fill queued on the stream: issued as `call`, then counted */
#define COPY_TRY(cd, call, e)                                                                \
	do {                                                                                 \
		CU_TRY(cd, call, e);                                                         \
		dev_count(&(cd)->dev, 0, 1, 0);                                              \
	} while (0)

static int blas_error(struct cuda_dev *cd, cublasStatus_t st, const char *call, const char *file,
		      int line, struct err *e)
{
	return err_set(e, ERR_DEVICE, file, line, "rank %d device %d: %s failed at %s:%d: %s (%s)",
		       cd->dev.rank, cd->dev.device_id, call, file, line, cublasGetStatusString(st),
		       cublasGetStatusName(st));
}

#define BLAS_TRY(cd, call, e)                                                                \
	do {                                                                                 \
		cublasStatus_t st_ = (call);                                                 \
		if (st_ != CUBLAS_STATUS_SUCCESS)                                            \
			return blas_error((cd), st_, #call, __FILE__, __LINE__, (e));        \
	} while (0)

/* The CUDA current device is per thread; a dev may be driven from another thread than
 * the one that created it (tests, teardown), so every op selects it first. It also
 * clears the thread's last-error slot: LAUNCH_TRY reads that slot, and a call made
 * elsewhere on this thread may have left a non-sticky code in it that its caller
 * already handled (the collective's polling cudaStreamQuery leaves cudaErrorNotReady);
 * a sticky error (a faulted context) is not cleared and still shows at the launch. */
static int enter(struct cuda_dev *cd, struct err *e)
{
	CU_TRY(cd, cudaSetDevice(cd->dev.device_id), e);
	(void)cudaGetLastError();
	return ERR_OK;
}

/* The preamble of an operation: nothing to do when `nothing` holds, else the device entered. */
#define ENTER_UNLESS(cd, nothing, e)                                                         \
	do {                                                                                 \
		if (nothing)                                                                 \
			return ERR_OK;                                                       \
		int enter_rc_ = enter((cd), (e));                                            \
		if (enter_rc_ != ERR_OK)                                                     \
			return enter_rc_;                                                    \
	} while (0)

/* Waits for everything queued on the stream; the upload arena is free again. Every wait
 * of the backend for its stream comes through here, and is counted here. */
static int drain(struct cuda_dev *cd, struct err *e)
{
	dev_count(&cd->dev, 0, 0, 1);
	CU_TRY(cd, cudaStreamSynchronize(cd->stream), e);
	cd->stage_off = 0;
	return ERR_OK;
}

static unsigned int ew_blocks(size_t n)
{
	size_t b = (n + EW_THREADS - 1) / EW_THREADS;
	return (unsigned int)(b < EW_MAX_BLOCKS ? b : EW_MAX_BLOCKS);
}

/* An element-wise kernel over n elements on cd's stream, in ew_blocks(n) blocks of
 * EW_THREADS: nothing for n == 0, else the device entered, the kernel queued with args and
 * its launch checked. Through LAUNCH_EW, which names the kernel and the caller's line. */
template <typename... Params, typename... Args>
static int launch_ew(struct cuda_dev *cd, const char *name, const char *file, int line,
		     size_t n, void (*kernel)(Params...), struct err *e, Args... args)
{
	ENTER_UNLESS(cd, n == 0, e);
	CUDA_LAUNCH(kernel, ew_blocks(n), EW_THREADS, 0, cd->stream, args...);
	return launch_check(cd, name, file, line, e);
}

#define LAUNCH_EW(cd, kernel, n, e, ...) \
	launch_ew((cd), #kernel, __FILE__, __LINE__, (n), kernel, (e), __VA_ARGS__)

static size_t align_up(size_t n, size_t a)
{
	return (n + a - 1) / a * a;
}

/* ---- operations ---- */

static void cu_destroy(struct dev *d)
{
	struct cuda_dev *cd = cdev(d);
	if (!cd)
		return;
	cudaSetDevice(d->device_id);
	if (cd->stream)
		cudaStreamSynchronize(cd->stream);
	if (cd->blas)
		cublasDestroy(cd->blas);
	cudaFree(cd->red);
	cudaFree(cd->sort_ws);
	cudaFree(cd->part);
	cudaFreeHost(cd->stage);
	cudaFreeHost(cd->host_res);
	if (cd->stream)
		cudaStreamDestroy(cd->stream);
	free(cd);
}

static int cu_alloc(struct dev *d, size_t bytes, void **out, struct err *e)
{
	struct cuda_dev *cd = cdev(d);
	size_t n = align_up(bytes ? bytes : 1, 256);
	void *p = NULL;
	int rc;
	if ((rc = enter(cd, e)) != ERR_OK)
		return rc;
	cudaError_t st = cudaMalloc(&p, n);
	if (st != cudaSuccess) {
		cudaGetLastError(); /* out of memory is not sticky: clear it */
		return err_set(e, ERR_DEVICE, __FILE__, __LINE__,
			       "rank %d device %d: cannot allocate %zu bytes of GPU memory: %s",
			       d->rank, d->device_id, bytes, cudaGetErrorString(st));
	}
	/* zeroed, like the host backend's memory */
	dev_count(d, 0, 1, 0);
	st = cudaMemsetAsync(p, 0, n, cd->stream);
	if (st != cudaSuccess) {
		cudaFree(p);
		return gpu_cuda_error(e, __FILE__, __LINE__, (int)st, "cudaMemsetAsync", d->rank,
				      d->device_id);
	}
	*out = p;
	return ERR_OK;
}

static void cu_release(struct dev *d, void *p)
{
	struct cuda_dev *cd = cdev(d);
	if (!p)
		return;
	/* nothing queued may still use it; release has no error channel */
	cudaSetDevice(d->device_id);
	dev_count(d, 0, 0, 1);
	cudaStreamSynchronize(cd->stream);
	cudaFree(p);
}

static int cu_upload(struct dev *d, void *dst, const void *host, size_t bytes, struct err *e)
{
	struct cuda_dev *cd = cdev(d);
	int rc;
	ENTER_UNLESS(cd, !bytes, e);
	size_t need = align_up(bytes, 256);
	if (need > cd->stage_cap) {
		/* larger than the arena sized at creation: copy directly and wait */
		COPY_TRY(cd, cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, cd->stream), e);
		return drain(cd, e);
	}
	if (cd->stage_off + need > cd->stage_cap) {
		/* the queued copies still read the arena: wait for them before reusing it */
		if ((rc = drain(cd, e)) != ERR_OK)
			return rc;
	}
	unsigned char *slot = cd->stage + cd->stage_off;
	memcpy(slot, host, bytes);
	COPY_TRY(cd, cudaMemcpyAsync(dst, slot, bytes, cudaMemcpyHostToDevice, cd->stream), e);
	cd->stage_off += need;
	return ERR_OK;
}

static int cu_download(struct dev *d, void *host, const void *src, size_t bytes, struct err *e)
{
	struct cuda_dev *cd = cdev(d);
	ENTER_UNLESS(cd, !bytes, e);
	COPY_TRY(cd, cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, cd->stream), e);
	return drain(cd, e);
}

static int cu_copy(struct dev *d, void *dst, const void *src, size_t bytes, struct err *e)
{
	struct cuda_dev *cd = cdev(d);
	ENTER_UNLESS(cd, !bytes || dst == src, e);
	COPY_TRY(cd, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cd->stream), e);
	return ERR_OK;
}

static int cu_zero(struct dev *d, void *p, size_t bytes, struct err *e)
{
	struct cuda_dev *cd = cdev(d);
	ENTER_UNLESS(cd, !bytes, e);
	COPY_TRY(cd, cudaMemsetAsync(p, 0, bytes, cd->stream), e);
	return ERR_OK;
}

static int cu_sync(struct dev *d, struct err *e)
{
	struct cuda_dev *cd = cdev(d);
	int rc;
	if ((rc = enter(cd, e)) != ERR_OK)
		return rc;
	return drain(cd, e);
}

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the row-major
 * buffers read as column-major are the transposes, so swap the operands and m/n. */
static int cu_gemm(struct dev *d, int trans_a, int trans_b, int m, int n, int k, float alpha,
		   const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc,
		   struct err *e)
{
	struct cuda_dev *cd = cdev(d);
	ENTER_UNLESS(cd, m <= 0 || n <= 0, e);
	if (k <= 0) {
		CUDA_LAUNCH(k_gemm_beta, ew_blocks((size_t)m * n), EW_THREADS, 0, cd->stream, m, n,
			    beta, c, ldc);
		LAUNCH_TRY(cd, "k_gemm_beta", e);
		return ERR_OK;
	}
	dev_count(d, 1, 0, 0);
	dev_count_gemm(d, m, n, k, 0.0); /* queued: its time is the device's */
	BLAS_TRY(cd,
		 cublasSgemm(cd->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
			     trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, a, lda,
			     &beta, c, ldc),
		 e);
	return ERR_OK;
}

/* The batch as one cublasSgemmStridedBatched, operands swapped as in cu_gemm. k <= 0
 * (no product, C = beta C) goes item by item through cu_gemm's kernel. */
static int cu_gemm_batched(struct dev *d, int trans_a, int trans_b, int m, int n, int k,
			   float alpha, const float *a, int lda, size_t stride_a, const float *b,
			   int ldb, size_t stride_b, float beta, float *c, int ldc,
			   size_t stride_c, int count, struct err *e)
{
	struct cuda_dev *cd = cdev(d);
	if (k <= 0) {
		for (int i = 0; i < count; i++)
			ERR_TRY(cu_gemm(d, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta,
					c + i * stride_c, ldc, e));
		return ERR_OK;
	}
	ENTER_UNLESS(cd, m <= 0 || n <= 0 || count <= 0, e);
	dev_count(d, 1, 0, 0);
	dev_count_gemms(d, count, m, n, k, 0.0); /* queued: its time is the device's */
	BLAS_TRY(cd,
		 cublasSgemmStridedBatched(cd->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
					   trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b,
					   ldb, (long long)stride_b, a, lda, (long long)stride_a,
					   &beta, c, ldc, (long long)stride_c, count),
		 e);
	return ERR_OK;
}

static int cu_embed_gather(struct dev *d, int rows, int width, int dim, const int32_t *ctx,
			   const float *table, float *x, struct err *e)
{
	size_t total = (size_t)(rows > 0 ? rows : 0) * (width > 0 ? width : 0) * (dim > 0 ? dim : 0);
	return LAUNCH_EW(cdev(d), k_embed_gather, total, e, rows, width, dim, ctx, table, x);
}

static int cu_bias_tanh(struct dev *d, int rows, int cols, const float *bias, float *z,
			struct err *e)
{
	if (rows <= 0 || cols <= 0)
		return ERR_OK;
	return LAUNCH_EW(cdev(d), k_bias_tanh, (size_t)rows * cols, e, rows, cols, bias, z);
}

static int cu_xent(struct dev *d, int rows, int cols, const float *bias, const int32_t *target,
		   float scale, float zc, const float *class_w, float *logits, float *loss,
		   struct err *e)
{
	struct cuda_dev *cd = cdev(d);
	ENTER_UNLESS(cd, rows <= 0 || cols <= 0, e);
	CUDA_LAUNCH(k_xent, rows, ROW_THREADS, 0, cd->stream, cols, bias, target, scale, zc,
		    class_w, logits, loss);
	LAUNCH_TRY(cd, "k_xent", e);
	return ERR_OK;
}

/* Copies `bytes` of the reduction result at red[slot] to the host and waits. */
static int fetch_result(struct cuda_dev *cd, int slot, void *host, size_t bytes, struct err *e)
{
	COPY_TRY(cd,
	       cudaMemcpyAsync(cd->host_res, (char *)cd->red + (size_t)slot * 8, bytes,
			       cudaMemcpyDeviceToHost, cd->stream),
	       e);
	int rc = drain(cd, e);
	if (rc != ERR_OK)
		return rc;
	memcpy(host, cd->host_res, bytes);
	return ERR_OK;
}

/* Queues the two passes of the reduction of x[0..n) (n > 0; x[0] is element `first` of
 * its vector) into `out` (device): the result, or out += result / divisor when divisor
 * is non-zero. */
template <class R>
static int queue_reduce(struct cuda_dev *cd, int n, const float *x, int first,
			typename R::acc *out, typename R::acc divisor, struct err *e)
{
	typedef typename R::acc T;
	size_t blocks = ((size_t)n + RED_THREADS - 1) / RED_THREADS;
	int parts = (int)(blocks < RED_BLOCKS ? blocks : RED_BLOCKS);
	T *part = (T *)cd->red;
	launch_reduce_partial<R>((unsigned int)parts, cd->stream, (size_t)n, x, (uint32_t)first,
				 part);
	LAUNCH_TRY(cd, "k_reduce_partial", e);
	launch_reduce_final<T>(cd->stream, parts, part, out, divisor);
	LAUNCH_TRY(cd, "k_reduce_final", e);
	return ERR_OK;
}

template <class R>
static int reduce(struct cuda_dev *cd, int n, const float *x, int first, void *host_out,
		  struct err *e)
{
	typedef typename R::acc T;
	int rc;
	if ((rc = enter(cd, e)) != ERR_OK)
		return rc;
	if (n <= 0) {
		T zero = 0;
		memcpy(host_out, &zero, sizeof zero);
		return ERR_OK;
	}
	if ((rc = queue_reduce<R>(cd, n, x, first, (T *)cd->red + RED_BLOCKS, 0, e)) != ERR_OK)
		return rc;
	return fetch_result(cd, RED_BLOCKS, host_out, sizeof(T), e);
}

static int cu_sum(struct dev *d, int n, const float *x, double *host_out, struct err *e)
{
	return reduce<red_sum>(cdev(d), n, x, 0, host_out, e);
}

/* sum's two passes over the squares: the same launches, copy and wait as sum */
static int cu_sum_squares(struct dev *d, int n, const float *x, double *host_out,
			  struct err *e)
{
	return reduce<red_sum_squares>(cdev(d), n, x, 0, host_out, e);
}

static int cu_sum_acc(struct dev *d, int n, const float *x, double divisor, double *acc,
		      struct err *e)
{
	struct cuda_dev *cd = cdev(d);
	int rc;
	if (n <= 0)
		return ERR_OK; /* nothing queued, as on the host */
	if ((rc = enter(cd, e)) != ERR_OK)
		return rc;
	return queue_reduce<red_sum>(cd, n, x, 0, acc, divisor, e);
}

static int cu_count_nonfinite(struct dev *d, int n, const float *x, int64_t *bad, struct err *e)
{
	long long b = 0;
	int rc = reduce<red_nonfinite>(cdev(d), n, x, 0, &b, e);
	if (rc == ERR_OK)
		*bad = (int64_t)b;
	return rc;
}

/* two launches, the 8-byte result's copy and one wait, like sum */
static int cu_fingerprint(struct dev *d, int n, const float *x, int first, uint64_t *host_out,
			  struct err *e)
{
	unsigned long long h = 0;
	int rc = reduce<red_fingerprint>(cdev(d), n, x, first, &h, e);
	if (rc == ERR_OK)
		*host_out = (uint64_t)h;
	return rc;
}

static int cu_col_sum_acc(struct dev *d, int rows, int cols, const float *x, float *out,
			  struct err *e)
{
	struct cuda_dev *cd = cdev(d);
	ENTER_UNLESS(cd, rows <= 0 || cols <= 0, e);
	if (rows <= COLSUM_MIN_CHUNK) {
		CUDA_LAUNCH(k_col_sum_acc, ew_blocks((size_t)cols), EW_THREADS, 0, cd->stream, rows,
			    cols, x, out);
		LAUNCH_TRY(cd, "k_col_sum_acc", e);
		return ERR_OK;
	}
	int chunk = (rows + COLSUM_GROUPS - 1) / COLSUM_GROUPS;
	chunk = chunk < COLSUM_MIN_CHUNK ? COLSUM_MIN_CHUNK : chunk;
	unsigned int blocks = (unsigned int)(((size_t)cols + COLSUM_COLS - 1) / COLSUM_COLS);
	CUDA_LAUNCH(k_col_sum_acc_chunks, blocks, dim3(COLSUM_COLS, COLSUM_GROUPS), 0, cd->stream,
		    rows, cols, chunk, x, out);
	LAUNCH_TRY(cd, "k_col_sum_acc_chunks", e);
	return ERR_OK;
}

/* k_tanh_backward over the rows x cols elements, then cu_col_sum_acc of the result: two
 * launches, the column sums' bits those of col_sum_acc on the device */
static int cu_tanh_backward_col_sum(struct dev *d, int rows, int cols, const float *h,
				    float *dh, float *out, struct err *e)
{
	const size_t n = (size_t)(rows > 0 ? rows : 0) * (size_t)(cols > 0 ? cols : 0);
	if (n == 0)
		return ERR_OK;
	int rc = LAUNCH_EW(cdev(d), k_tanh_backward, n, e, n, h, dh);
	return rc != ERR_OK ? rc : cu_col_sum_acc(d, rows, cols, dh, out, e);
}

/* The arrays of the embed_backward workspace, each of one int32 per context slot. */
enum { WS_KEYS, WS_IDX_IN, WS_IDX, WS_CHUNK_END, WS_DEST_ROW, WS_FOLD, WS_ARRAYS };

/* Bytes of the embed_backward workspace for `slots` context slots: WS_ARRAYS arrays (sorted
 * keys, the slot indices before and after the sort, the plan), then CUB's temporary
 * storage (*temp_bytes). */
static int sort_bytes(struct cuda_dev *cd, int slots, size_t *total, size_t *temp_bytes,
		      struct err *e)
{
	*temp_bytes = 0;
	CU_TRY(cd,
	       cub::DeviceRadixSort::SortPairs(NULL, *temp_bytes, (const int32_t *)NULL,
					       (int32_t *)NULL, (const int32_t *)NULL,
					       (int32_t *)NULL, slots, 0, cd->sort_bits, cd->stream),
	       e);
	*total = WS_ARRAYS * align_up((size_t)slots * sizeof(int32_t), 256) + *temp_bytes;
	return ERR_OK;
}

/* Counts what CUB's radix sort over `bits` key bits queues on its onesweep path (cccl's
 * dispatch_radix_sort.cuh, read, not measured): two fills, a histogram and a scan kernel,
 * and per 8-bit digit a fill of its lookback state and one kernel. An input sorted as one
 * tile queues less (one kernel), one of over 2^28 items more (a kernel per digit per
 * portion); the counts describe the sizes a window has between those. */
static void count_sort(struct cuda_dev *cd, int bits)
{
	unsigned digits = (unsigned)(bits + 7) / 8;
	dev_count(&cd->dev, 2 + digits, 2 + digits, 0);
}

/* Refuses an embed_backward past the workspace or the scratch sized at creation. */
static int embed_fits(struct cuda_dev *cd, int slots, int dim, size_t need, struct err *e)
{
	struct dev *d = &cd->dev;
	if (need > cd->sort_cap)
		return err_set(e, ERR_DEVICE, __FILE__, __LINE__,
			       "rank %d device %d: embed_backward over %d context slots needs %zu "
			       "bytes of workspace; %zu were allocated at creation for %zu slots",
			       d->rank, d->device_id, slots, need, cd->sort_cap, cd->sort_slots);
	size_t part = gpu_embed_partial_rows((size_t)slots) * (size_t)dim;
	if (part > cd->part_cap)
		return err_set(e, ERR_DEVICE, __FILE__, __LINE__,
			       "rank %d device %d: embed_backward over %d context slots of width "
			       "%d needs %zu floats of partial sums; %zu were allocated at "
			       "creation for %zu slots of width %zu", d->rank, d->device_id, slots,
			       dim, part, cd->part_cap, cd->sort_slots, cd->part_dim);
	return ERR_OK;
}

/* Queues the plan and the two levels of the additions (see gpu_embed_position) over the
 * sorted keys and slot indices in the workspace `ws`. */
static int queue_embed_sums(struct cuda_dev *cd, int slots, int dim, int32_t *const *ws,
			    const float *dx, float *table_grad, struct err *e)
{
	unsigned int per_slot = ew_blocks((size_t)slots), per_elem = ew_blocks((size_t)slots * dim);
	CUDA_LAUNCH(k_embed_plan, per_slot, EW_THREADS, 0, cd->stream, slots, ws[WS_KEYS],
		    ws[WS_CHUNK_END], ws[WS_DEST_ROW], ws[WS_FOLD]);
	LAUNCH_TRY(cd, "k_embed_plan", e);
	CUDA_LAUNCH(k_embed_chunks, per_elem, EW_THREADS, 0, cd->stream, slots, dim, ws[WS_KEYS],
		    ws[WS_IDX], ws[WS_CHUNK_END], ws[WS_DEST_ROW], dx, table_grad, cd->part);
	LAUNCH_TRY(cd, "k_embed_chunks", e);
	CUDA_LAUNCH(k_embed_fold, per_elem, EW_THREADS, 0, cd->stream, slots, dim, ws[WS_KEYS],
		    ws[WS_DEST_ROW], ws[WS_FOLD], cd->part, table_grad);
	LAUNCH_TRY(cd, "k_embed_fold", e);
	return ERR_OK;
}

static int cu_embed_backward(struct dev *d, int rows, int width, int dim, const int32_t *ctx,
			     const float *dx, float *table_grad, struct err *e)
{
	struct cuda_dev *cd = cdev(d);
	int rc;
	if (rows <= 0 || width <= 0 || dim <= 0)
		return ERR_OK;
	if ((size_t)rows * width > (size_t)INT32_MAX)
		return err_set(e, ERR_DEVICE, __FILE__, __LINE__,
			       "rank %d device %d: embed_backward over %zu context slots exceeds "
			       "the kernel's limit", d->rank, d->device_id, (size_t)rows * width);
	if ((rc = enter(cd, e)) != ERR_OK)
		return rc;
	int slots = rows * width;
	size_t need = 0, temp_bytes = 0;
	if ((rc = sort_bytes(cd, slots, &need, &temp_bytes, e)) != ERR_OK)
		return rc;
	if ((rc = embed_fits(cd, slots, dim, need, e)) != ERR_OK)
		return rc;
	size_t arr = align_up((size_t)slots * sizeof(int32_t), 256);
	int32_t *ws[WS_ARRAYS];
	for (int a = 0; a < WS_ARRAYS; a++)
		ws[a] = (int32_t *)((char *)cd->sort_ws + a * arr);
	void *temp = (char *)cd->sort_ws + WS_ARRAYS * arr;
	CUDA_LAUNCH(k_iota, ew_blocks((size_t)slots), EW_THREADS, 0, cd->stream, slots,
		    ws[WS_IDX_IN]);
	LAUNCH_TRY(cd, "k_iota", e);
	/* stable: slots of one id stay in ascending order */
	CU_TRY(cd,
	       cub::DeviceRadixSort::SortPairs(temp, temp_bytes, ctx, ws[WS_KEYS], ws[WS_IDX_IN],
					       ws[WS_IDX], slots, 0, cd->sort_bits, cd->stream),
	       e);
	count_sort(cd, cd->sort_bits);
	return queue_embed_sums(cd, slots, dim, ws, dx, table_grad, e);
}

static int cu_scale(struct dev *d, int n, float alpha, float *x, struct err *e)
{
	if (n <= 0)
		return ERR_OK;
	return LAUNCH_EW(cdev(d), k_scale, (size_t)n, e, (size_t)n, alpha, x);
}

static int cu_sgd(struct dev *d, int n, float lr, float momentum, float weight_decay, int first,
		  float *p, const float *g, float *buf, struct err *e)
{
	if (n <= 0)
		return ERR_OK;
	return LAUNCH_EW(cdev(d), k_sgd, (size_t)n, e, (size_t)n, lr, momentum, weight_decay, first,
			 p, g, buf);
}

static int cu_adamw(struct dev *d, int n, int first, const struct dev_adamw *a, float *p,
		    const float *g, float *m, float *v, struct err *e)
{
	if (n <= 0)
		return ERR_OK;
	return LAUNCH_EW(cdev(d), k_adamw, (size_t)n, e, (size_t)n, first, *a, p, g, m, v);
}

static int cu_argmax_hits(struct dev *d, int rows, int cols, const float *bias,
			  const float *logits, const int32_t *target, int64_t *host_hits,
			  struct err *e)
{
	struct cuda_dev *cd = cdev(d);
	int rc;
	unsigned long long hits = 0;
	*host_hits = 0;
	ENTER_UNLESS(cd, rows <= 0 || cols <= 0, e);
	unsigned long long *counter = (unsigned long long *)cd->red + RED_BLOCKS;
	COPY_TRY(cd, cudaMemsetAsync(counter, 0, sizeof *counter, cd->stream), e);
	CUDA_LAUNCH(k_argmax_hits, rows, ROW_THREADS, 0, cd->stream, cols, bias, logits, target,
		    counter);
	LAUNCH_TRY(cd, "k_argmax_hits", e);
	if ((rc = fetch_result(cd, RED_BLOCKS, &hits, sizeof hits, e)) != ERR_OK)
		return rc;
	*host_hits = (int64_t)hits;
	return ERR_OK;
}

static const struct dev_ops cuda_ops = {
	.name = "cuda",
	.destroy = cu_destroy,
	.alloc = cu_alloc,
	.release = cu_release,
	.upload = cu_upload,
	.download = cu_download,
	.copy = cu_copy,
	.zero = cu_zero,
	.sync = cu_sync,
	.gemm = cu_gemm,
	.gemm_batched = cu_gemm_batched,
	.embed_gather = cu_embed_gather,
	.bias_tanh = cu_bias_tanh,
	.xent = cu_xent,
	.sum = cu_sum,
	.sum_acc = cu_sum_acc,
	.sum_squares = cu_sum_squares,
	/* its sum is two passes, no blocks a rank could share (dev.h) */
	.sum_squares_blocks = NULL,
	.squares_block = 0,
	.col_sum_acc = cu_col_sum_acc,
	.tanh_backward_col_sum = cu_tanh_backward_col_sum,
	.embed_backward = cu_embed_backward,
	.scale = cu_scale,
	.sgd = cu_sgd,
	.adamw = cu_adamw,
	.argmax_hits = cu_argmax_hits,
	.count_nonfinite = cu_count_nonfinite,
	.fingerprint = cu_fingerprint,
	/* the GPT's (gpt_kernels.cu) */
	.embed_pos = gpt_cu_embed_pos,
	.bias_add = gpt_cu_bias_add,
	.layernorm = gpt_cu_layernorm,
	.layernorm_backward = gpt_cu_layernorm_backward,
	.gelu = gpt_cu_gelu,
	.gelu_backward = gpt_cu_gelu_backward,
	.causal_softmax = gpt_cu_causal_softmax,
	.causal_softmax_backward = gpt_cu_causal_softmax_backward,
};

/* ---- creation ---- */

/* The fixed buffers of a new device (see struct cuda_dev_sizes). */
static int cu_reserve(struct cuda_dev *cd, const struct cuda_dev_sizes *sizes, struct err *e)
{
	size_t stage = sizes ? align_up(sizes->upload_bytes, 256) : 0;
	stage = stage < STAGE_INIT ? STAGE_INIT : stage > STAGE_MAX ? STAGE_MAX : stage;
	CU_TRY(cd, cudaHostAlloc((void **)&cd->stage, stage, cudaHostAllocDefault), e);
	cd->stage_cap = stage;
	size_t slots = sizes && sizes->embed_slots ? sizes->embed_slots : 1;
	if (slots > (size_t)INT32_MAX)
		return err_set(e, ERR_DEVICE, __FILE__, __LINE__,
			       "rank %d device %d: embed_backward over %zu context slots exceeds "
			       "the kernel's limit", cd->dev.rank, cd->dev.device_id, slots);
	cd->sort_bits = gpu_sort_key_bits(sizes ? sizes->embed_ids : 0);
	size_t temp = 0;
	int rc = sort_bytes(cd, (int)slots, &cd->sort_cap, &temp, e);
	if (rc != ERR_OK)
		return rc;
	CU_TRY(cd, cudaMalloc(&cd->sort_ws, cd->sort_cap), e);
	cd->sort_slots = slots;
	cd->part_dim = sizes && sizes->embed_dim ? sizes->embed_dim : 1;
	cd->part_cap = gpu_embed_partial_rows(slots) * cd->part_dim;
	CU_TRY(cd, cudaMalloc((void **)&cd->part, cd->part_cap * sizeof(float)), e);
	CU_TRY(cd, cudaMalloc(&cd->red, (RED_BLOCKS + 1) * 8), e);
	CU_TRY(cd, cudaHostAlloc(&cd->host_res, 64, cudaHostAllocDefault), e);
	return ERR_OK;
}

extern "C" int cuda_dev_create(int rank, int device_id, const struct cuda_dev_sizes *sizes,
			       struct dev **out, struct err *e)
{
	int count = 0, rc;
	*out = NULL;
	cudaError_t st = cudaGetDeviceCount(&count);
	if (st != cudaSuccess) {
		cudaGetLastError();
		return err_set(e, ERR_DEVICE, __FILE__, __LINE__,
			       "rank %d: no usable GPU for device %d: %s", rank, device_id,
			       cudaGetErrorString(st));
	}
	if (device_id < 0 || device_id >= count)
		return err_set(e, ERR_CONFIG, __FILE__, __LINE__,
			       "rank %d: GPU %d does not exist (%d visible, ordinals 0..%d)", rank,
			       device_id, count, count - 1);
	struct cuda_dev *cd = (struct cuda_dev *)calloc(1, sizeof *cd);
	if (!cd)
		return err_set(e, ERR_NOMEM, __FILE__, __LINE__, "rank %d: out of memory", rank);
	cd->dev.ops = &cuda_ops;
	cd->dev.backend = DEV_BACKEND_CUDA;
	cd->dev.rank = rank;
	cd->dev.device_id = device_id;
	cd->dev.impl = cd;
	ERR_TRY_GOTO(rc, enter(cd, e), fail);
#define CREATE_TRY(call)                                                                     \
	do {                                                                                 \
		cudaError_t cst_ = (call);                                                   \
		if (cst_ != cudaSuccess) {                                                   \
			rc = gpu_cuda_error(e, __FILE__, __LINE__, (int)cst_, #call, rank,    \
					    device_id);                                      \
			goto fail;                                                           \
		}                                                                            \
	} while (0)
#define CREATE_BLAS_TRY(call)                                                                \
	do {                                                                                 \
		cublasStatus_t bst_ = (call);                                                \
		if (bst_ != CUBLAS_STATUS_SUCCESS) {                                         \
			rc = blas_error(cd, bst_, #call, __FILE__, __LINE__, e);              \
			goto fail;                                                           \
		}                                                                            \
	} while (0)
	CREATE_TRY(cudaStreamCreateWithFlags(&cd->stream, cudaStreamNonBlocking));
	CREATE_BLAS_TRY(cublasCreate(&cd->blas));
	CREATE_BLAS_TRY(cublasSetStream(cd->blas, cd->stream));
	/* float32 stays float32: pedantic math rules out TF32 tensor cores and the emulated
	 * float32 that CUBLAS_EMULATION_STRATEGY could favour;
	 * atomics would let an accumulation order change from run to run */
	CREATE_BLAS_TRY(cublasSetMathMode(cd->blas, CUBLAS_PEDANTIC_MATH));
	CREATE_BLAS_TRY(cublasSetAtomicsMode(cd->blas, CUBLAS_ATOMICS_NOT_ALLOWED));
	ERR_TRY_GOTO(rc, cu_reserve(cd, sizes, e), fail);
#undef CREATE_TRY
#undef CREATE_BLAS_TRY
	*out = &cd->dev;
	return ERR_OK;
fail:
	cu_destroy(&cd->dev);
	return rc;
}

extern "C" struct CUstream_st *cuda_dev_stream(struct dev *d)
{
	if (!d || d->backend != DEV_BACKEND_CUDA || !d->impl)
		return NULL;
	return cdev(d)->stream;
}

/* ---- the NCCL collective's average ---- */

extern "C" int cuda_dev_divide(struct dev *d, void *buf, size_t count, int dtype, int divisor,
			       struct err *e)
{
	struct cuda_dev *cd = cdev(d);
	ENTER_UNLESS(cd, !count, e);
	unsigned int blocks = ew_blocks(count);
	switch (dtype) {
	case 0: /* COLL_F32 */
		launch_divide<float>(blocks, EW_THREADS, cd->stream, count, (float)divisor,
				     (float *)buf);
		break;
	case 1: /* COLL_F64 */
		launch_divide<double>(blocks, EW_THREADS, cd->stream, count, (double)divisor,
				      (double *)buf);
		break;
	default: /* COLL_I64 */
		launch_divide<long long>(blocks, EW_THREADS, cd->stream, count,
					 (long long)divisor, (long long *)buf);
		break;
	}
	LAUNCH_TRY(cd, "k_divide", e);
	return ERR_OK;
}
