/*
 * test-gpu-emu: the emulated device (emu/, built with -Dgpu_emulator=true) is stricter
 * than a GPU, and each of its checks can fail.
 *
 *   backend    the CUDA backend's own operations on small shapes with exact answers:
 *              GEMM and a batch of two in every transpose, an upload/download round
 *              trip, scale, sum. The planted faults (tests/emu-faults.sh: a transposed
 *              GEMM operand, a wrong leading dimension, a download read before its
 *              stream synchronized, a kernel writing one past its buffer, a reduction
 *              without its barrier) each make this case fail loudly
 *   runtime    a host read before the stream's sync sees poison; pointers of another
 *              device, freed, past the end or on the host are refused; cuBLAS refuses a
 *              leading dimension below its operand's rows, and its strided batch also a
 *              negative count, items of C that overlap and a last item past its buffer
 *   nccl       two ranks issuing collectives in different orders both fail, naming both
 *              calls; a communicator used from another device's thread is refused
 * Check runs without fork: the emulator's stream workers are threads of this process.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "check-run.h"
#include "dev.h"
#include "err.h"
#include "gpu.h"

static struct err E;

static struct dev *new_dev(int id)
{
	struct cuda_dev_sizes sizes = {1 << 20, 64, 64, 8};
	struct dev *d = NULL;
	OK(cuda_dev_create(0, id, &sizes, &d, &E));
	return d;
}

static void *put(struct dev *d, const float *host, size_t n)
{
	void *p = NULL;
	OK(d->ops->alloc(d, n * sizeof(float), &p, &E));
	OK(d->ops->upload(d, p, host, n * sizeof(float), &E));
	return p;
}

/* Row-major C = op(A) op(B), m x n, k inner, small integers: every product exact. Item 0
 * by gemm, then items 0 and 1 (each operand's second item right after its first) by one
 * gemm_batched. */
static void check_gemm(struct dev *d, int ta, int tb)
{
	enum { M = 5, N = 7, K = 3, MK = M * K, KN = K * N, MN = M * N };
	float a[2 * MK], b[2 * KN], c[2 * MN], want[2 * MN];
	for (int i = 0; i < 2 * MK; i++)
		a[i] = (float)(i % 7 - 3);
	for (int i = 0; i < 2 * KN; i++)
		b[i] = (float)(i % 5 - 2);
	int lda = ta ? M : K, ldb = tb ? K : N;
	for (int t = 0; t < 2; t++)
		for (int i = 0; i < M; i++)
			for (int j = 0; j < N; j++) {
				const float *at = a + t * MK, *bt = b + t * KN;
				float s = 0.0f;
				for (int p = 0; p < K; p++)
					s += (ta ? at[p * lda + i] : at[i * lda + p]) *
					     (tb ? bt[j * ldb + p] : bt[p * ldb + j]);
				want[t * MN + i * N + j] = s;
			}
	float *da = put(d, a, 2 * MK), *db = put(d, b, 2 * KN), *dc = put(d, want, 2 * MN);
	OK(d->ops->zero(d, dc, sizeof c, &E));
	OK(d->ops->gemm(d, ta, tb, M, N, K, 1.0f, da, lda, db, ldb, 0.0f, dc, N, &E));
	OK(d->ops->download(d, c, dc, sizeof c, &E));
	for (int i = 0; i < MN; i++)
		ck_assert_msg(c[i] == want[i], "gemm ta=%d tb=%d: C[%d] = %g, not %g", ta, tb, i,
			      c[i], want[i]);
	OK(d->ops->gemm_batched(d, ta, tb, M, N, K, 1.0f, da, lda, MK, db, ldb, KN, 0.0f, dc, N,
				MN, 2, &E));
	OK(d->ops->download(d, c, dc, sizeof c, &E));
	for (int i = 0; i < 2 * MN; i++)
		ck_assert_msg(c[i] == want[i], "gemm_batched ta=%d tb=%d: C[%d] = %g, not %g", ta,
			      tb, i, c[i], want[i]);
	d->ops->release(d, da);
	d->ops->release(d, db);
	d->ops->release(d, dc);
}

START_TEST(test_backend)
{
	struct dev *d = new_dev(0);
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++)
			check_gemm(d, ta, tb);
	/* 64 floats: the allocation ends where the buffer does */
	float x[64], y[64];
	for (int i = 0; i < 64; i++)
		x[i] = (float)i;
	float *dx = put(d, x, 64);
	OK(d->ops->download(d, y, dx, sizeof y, &E));
	ck_assert_msg(memcmp(x, y, sizeof x) == 0, "upload/download round trip differs");
	OK(d->ops->scale(d, 64, 2.0f, dx, &E));
	OK(d->ops->download(d, y, dx, sizeof y, &E));
	for (int i = 0; i < 64; i++)
		ck_assert_msg(y[i] == 2.0f * x[i], "scale: y[%d] = %g", i, y[i]);
	double sum = 0.0;
	OK(d->ops->sum(d, 64, dx, &sum, &E));
	ck_assert_msg(sum == 4032.0, "sum of 2 * (0..63) = %.17g, not 4032", sum);
	d->ops->release(d, dx);
	dev_destroy(d);
}
END_TEST

START_TEST(test_poison_before_sync)
{
	cudaStream_t s;
	float *p = NULL, h[4] = {1, 2, 3, 4};
	ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
	ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
	ck_assert_int_eq(cudaMalloc((void **)&p, sizeof h), cudaSuccess);
	ck_assert_int_eq(cudaMemsetAsync(p, 0, sizeof h, s), cudaSuccess);
	ck_assert_int_eq(cudaMemcpyAsync(h, p, sizeof h, cudaMemcpyDeviceToHost, s), cudaSuccess);
	for (int i = 0; i < 4; i++) /* read too early: poison, never the result */
		ck_assert_msg(isnan(h[i]), "h[%d] = %g before the sync", i, h[i]);
	ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
	for (int i = 0; i < 4; i++)
		ck_assert_msg(h[i] == 0.0f, "h[%d] = %g after the sync", i, h[i]);
	cudaFree(p);
	cudaStreamDestroy(s);
}
END_TEST

START_TEST(test_pointer_provenance)
{
	cudaStream_t s;
	void *on1 = NULL, *on0 = NULL, *gone = NULL;
	char host[64];
	ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
	ck_assert_int_eq(cudaMalloc(&on1, 64), cudaSuccess);
	ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
	ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
	ck_assert_int_eq(cudaMalloc(&on0, 64), cudaSuccess);
	ck_assert_int_eq(cudaMalloc(&gone, 64), cudaSuccess);
	ck_assert_int_eq(cudaFree(gone), cudaSuccess);
	ck_assert_int_eq(cudaMemsetAsync(on1, 0, 64, s), cudaErrorInvalidValue);  /* device 1's */
	ck_assert_int_eq(cudaMemsetAsync(on0, 0, 65, s), cudaErrorInvalidValue);  /* past the end */
	ck_assert_int_eq(cudaMemsetAsync(gone, 0, 8, s), cudaErrorInvalidValue);  /* freed */
	ck_assert_int_eq(cudaMemsetAsync(host, 0, 8, s), cudaErrorInvalidValue);  /* host memory */
	ck_assert_int_eq(cudaMemcpyAsync(on0, on1, 64, cudaMemcpyDeviceToDevice, s),
			 cudaErrorInvalidValue);
	ck_assert_int_eq(cudaGetLastError(), cudaErrorInvalidValue);
	ck_assert_int_eq(cudaGetLastError(), cudaSuccess); /* not sticky */
	/* a stream of device 0 used while device 1 is current */
	ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
	ck_assert_int_eq(cudaMemsetAsync(on1, 0, 8, s), cudaErrorInvalidResourceHandle);
	cudaFree(on1);
	ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
	cudaFree(on0);
	cudaStreamDestroy(s);
}
END_TEST

START_TEST(test_cublas_validation)
{
	cublasHandle_t h;
	cudaStream_t s;
	float *a = NULL, one = 1.0f, zero = 0.0f;
	ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
	ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
	ck_assert_int_eq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
	ck_assert_int_eq(cublasSetStream(h, s), CUBLAS_STATUS_SUCCESS);
	ck_assert_int_eq(cudaMalloc((void **)&a, 16 * sizeof(float)), cudaSuccess);
	/* 4 x 4 operands: lda 3 is below op(A)'s 4 rows */
	ck_assert_int_eq(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, a, 3, a, 4, &zero,
				     a, 4), CUBLAS_STATUS_INVALID_VALUE);
	ck_assert_int_eq(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, 4, 4, 2, &one, a, 1, a, 2, &zero,
				     a, 4), CUBLAS_STATUS_INVALID_VALUE);
	/* lda 5 is allowed, but A then spans past its 16 floats */
	ck_assert_int_eq(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, a, 5, a, 4, &zero,
				     a, 4), CUBLAS_STATUS_INVALID_VALUE);
	ck_assert_int_eq(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, a, 4, a, 4, &zero,
				     a, 4), CUBLAS_STATUS_SUCCESS);
	ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
	cublasDestroy(h);
	cudaFree(a);
	cudaStreamDestroy(s);
}
END_TEST

/* count 4 x 4 x 4 products C_i = op(A_i) A'_i, A_i at a + i sa (lda), A'_i at a + i sb
 * (ld 4), C_i at c + i sc (ld 4) */
static cublasStatus_t batch_4x4(cublasHandle_t h, cublasOperation_t ta, const float *a,
				int lda, long long sa, long long sb, float *c, long long sc,
				int count)
{
	static const float one = 1.0f, zero = 0.0f;
	return cublasSgemmStridedBatched(h, ta, CUBLAS_OP_N, 4, 4, 4, &one, a, lda, sa, a, 4, sb,
					 &zero, c, 4, sc, count);
}

/* cublasSgemmStridedBatched: cuBLAS's own checks (a negative count, a leading dimension
 * below the rows) and the emulator's stricter ones (items of C that overlap, a last item
 * past its allocation), then a valid batch gives each item's cublasSgemm bits. */
START_TEST(test_cublas_batched_validation)
{
	cublasHandle_t h;
	cudaStream_t s;
	float *a = NULL, *c = NULL, one = 1.0f, zero = 0.0f, got[32], want[32];
	ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
	ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
	ck_assert_int_eq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
	ck_assert_int_eq(cublasSetStream(h, s), CUBLAS_STATUS_SUCCESS);
	ck_assert_int_eq(cudaMalloc((void **)&a, 32 * sizeof(float)), cudaSuccess);
	ck_assert_int_eq(cudaMalloc((void **)&c, 48 * sizeof(float)), cudaSuccess);
	for (int i = 0; i < 32; i++)
		got[i] = (float)(i % 9 - 4);
	ck_assert_int_eq(cudaMemcpyAsync(a, got, sizeof got, cudaMemcpyHostToDevice, s),
			 cudaSuccess);
	/* two 4 x 4 items, 16 floats apart, in buffers of 32 (A, B) and 48 floats (C) */
	ck_assert_int_eq(batch_4x4(h, CUBLAS_OP_N, a, 4, 16, 16, c, 16, -1),
			 CUBLAS_STATUS_INVALID_VALUE);
	ck_assert_int_eq(batch_4x4(h, CUBLAS_OP_N, a, 3, 16, 16, c, 16, 2),
			 CUBLAS_STATUS_INVALID_VALUE);
	/* C's items 8 floats apart overlap (16 floats each) */
	ck_assert_int_eq(batch_4x4(h, CUBLAS_OP_N, a, 4, 16, 16, c, 8, 2),
			 CUBLAS_STATUS_INVALID_VALUE);
	/* three items: C's fit its 48 floats, A's third would end 48 floats into its 32 */
	ck_assert_int_eq(batch_4x4(h, CUBLAS_OP_N, a, 4, 8, 0, c, 16, 3), CUBLAS_STATUS_SUCCESS);
	ck_assert_int_eq(batch_4x4(h, CUBLAS_OP_N, a, 4, 16, 0, c, 16, 3),
			 CUBLAS_STATUS_INVALID_VALUE);
	ck_assert_int_eq(batch_4x4(h, CUBLAS_OP_T, a, 4, 16, 16, c, 16, 2), CUBLAS_STATUS_SUCCESS);
	ck_assert_int_eq(cudaMemcpyAsync(got, c, sizeof got, cudaMemcpyDeviceToHost, s),
			 cudaSuccess);
	ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, 4, 4, 4, &one, a + 16 * i,
					     4, a + 16 * i, 4, &zero, c + 16 * i, 4),
				 CUBLAS_STATUS_SUCCESS);
	ck_assert_int_eq(cudaMemcpyAsync(want, c, sizeof want, cudaMemcpyDeviceToHost, s),
			 cudaSuccess);
	ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
	ck_assert_msg(memcmp(got, want, sizeof got) == 0, "the batch differs from its items");
	cublasDestroy(h);
	cudaFree(a);
	cudaFree(c);
	cudaStreamDestroy(s);
}
END_TEST

/* ---- NCCL ---- */

struct rank_ctx {
	ncclComm_t comm;
	int rank, swap; /* swap: all-gather first, then all-reduce */
	ncclResult_t async;
	char last[512];
};

/* One rank: an all-reduce and an all-gather, in the order `swap` says, then waits for
 * the communicator's verdict (at most 10 s). */
static void *two_collectives(void *arg)
{
	struct rank_ctx *r = arg;
	cudaStream_t s;
	float *buf = NULL;
	cudaSetDevice(r->rank);
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	cudaMalloc((void **)&buf, 64 * sizeof(float));
	for (int step = 0; step < 2; step++) {
		if ((step == 0) != (r->swap != 0))
			ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, r->comm, s);
		else
			ncclAllGather(buf, buf + 32, 16, ncclFloat32, r->comm, s);
	}
	r->async = ncclSuccess;
	for (int i = 0; i < 10000 && r->async == ncclSuccess; i++) {
		struct timespec ts = {0, 1000000};
		ncclCommGetAsyncError(r->comm, &r->async);
		if (r->async == ncclSuccess && cudaStreamQuery(s) == cudaSuccess)
			break;
		nanosleep(&ts, NULL);
	}
	snprintf(r->last, sizeof r->last, "%s", ncclGetLastError(r->comm));
	ncclCommAbort(r->comm); /* releases the blocked work */
	cudaStreamSynchronize(s);
	cudaFree(buf);
	cudaStreamDestroy(s);
	return NULL;
}

static void run_ranks(struct rank_ctx *ranks)
{
	ncclComm_t comms[2];
	int devs[2] = {0, 1};
	ck_assert_int_eq(ncclCommInitAll(comms, 2, devs), ncclSuccess);
	pthread_t t[2];
	for (int r = 0; r < 2; r++) {
		ranks[r].comm = comms[r];
		ranks[r].rank = r;
		pthread_create(&t[r], NULL, two_collectives, &ranks[r]);
	}
	for (int r = 0; r < 2; r++)
		pthread_join(t[r], NULL);
}

START_TEST(test_nccl_out_of_order)
{
	struct rank_ctx ranks[2] = {{.swap = 0}, {.swap = 1}};
	run_ranks(ranks);
	for (int r = 0; r < 2; r++) {
		ck_assert_msg(ranks[r].async == ncclInvalidUsage, "rank %d: async %d", r,
			      ranks[r].async);
		ck_assert_msg(strstr(ranks[r].last, "ncclAllReduce") &&
			      strstr(ranks[r].last, "ncclAllGather"), "rank %d: %s", r, ranks[r].last);
	}
}
END_TEST

/* the control: the same calls in the same order succeed */
START_TEST(test_nccl_in_order)
{
	struct rank_ctx ranks[2] = {{.swap = 1}, {.swap = 1}};
	run_ranks(ranks);
	for (int r = 0; r < 2; r++)
		ck_assert_msg(ranks[r].async == ncclSuccess, "rank %d: async %d: %s", r,
			      ranks[r].async, ranks[r].last);
}
END_TEST

START_TEST(test_nccl_wrong_device_thread)
{
	ncclComm_t comms[2];
	int devs[2] = {0, 1};
	cudaStream_t s0;
	float *buf = NULL;
	ck_assert_int_eq(ncclCommInitAll(comms, 2, devs), ncclSuccess);
	ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
	ck_assert_int_eq(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking), cudaSuccess);
	ck_assert_int_eq(cudaMalloc((void **)&buf, 64), cudaSuccess);
	ck_assert_int_eq(cudaSetDevice(1), cudaSuccess); /* device 1's thread, rank 0's comm */
	ck_assert_int_eq(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comms[0], s0),
			 ncclInvalidUsage);
	ck_assert_msg(strstr(ncclGetLastError(comms[0]), "another device's thread"), "%s",
		      ncclGetLastError(comms[0]));
	ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
	ncclCommAbort(comms[0]);
	ncclCommAbort(comms[1]);
	cudaFree(buf);
	cudaStreamDestroy(s0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gpu-emu");
	TCase *backend = tcase_create("backend");
	tcase_set_timeout(backend, 120);
	tcase_add_test(backend, test_backend);
	suite_add_tcase(s, backend);
	TCase *runtime = tcase_create("runtime");
	tcase_set_timeout(runtime, 60);
	tcase_add_test(runtime, test_poison_before_sync);
	tcase_add_test(runtime, test_pointer_provenance);
	tcase_add_test(runtime, test_cublas_validation);
	tcase_add_test(runtime, test_cublas_batched_validation);
	suite_add_tcase(s, runtime);
	TCase *nccl = tcase_create("nccl");
	tcase_set_timeout(nccl, 60);
	tcase_add_test(nccl, test_nccl_in_order);
	tcase_add_test(nccl, test_nccl_out_of_order);
	tcase_add_test(nccl, test_nccl_wrong_device_thread);
	suite_add_tcase(s, nccl);
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
