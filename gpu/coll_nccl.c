/*
 * coll_nccl: the NCCL collective, one communicator per rank inside one process.
 *
 * The communicators are created together from one thread, non-blocking
 * (ncclConfig_t.blocking = 0): no NCCL call ever waits for a peer on the host, so a
 * rank never hangs inside NCCL when a peer died before joining. Each rank enqueues
 * its allreduce on its device's stream (cuda_dev_stream) and then waits by polling:
 * the communicator's state (enqueue finished, asynchronous error), the stream, the
 * abort flags (this collective's and the pool barrier's) and the barrier's timeout.
 *
 * Averages: NCCL's own ncclAvg multiplies each contribution by the float 1/W before it
 * sums, which rounds differently from the host collective for W not a power of two. So
 * avg is what coll.h defines for both: ncclSum, then each element divided by W on the
 * rank's stream (cuda_dev_divide). NVLink SHARP is switched off (NCCL_NVLS_ENABLE=0)
 * before the communicators are created unless the user chose NCCL's algorithm or NVLS
 * (gpu_rules.c): its in-switch sums do not repeat bit for bit.
 *
 * Nothing is allocated once the collective exists: the device staging of host buffers is
 * sized at creation for the largest count, and a larger one is refused. Each rank counts
 * the calls it entered, so that a timeout can say which ranks reached the call.
 *
 * Aborting: any rank (or the pool on its behalf) calls the abort op; it marks the
 * collective aborted and aborts every communicator. Each communicator is guarded by a
 * mutex and is never touched again once aborted, since NCCL frees the whole clique when
 * its last communicator goes; calls on it are short (non-blocking), so the abort never
 * waits long for a lock. The kernels of the aborted communicators stop, and every rank
 * still waiting leaves with ERR_ABORTED. An aborted collective stays aborted: a new one
 * must be created.
 *
 * Exact mode's tree allreduce cannot use ncclAllReduce, whose order of additions is
 * NCCL's choice (ring, tree, NVLS: by size and topology) and not our pairwise tree. It
 * is a deterministic reduce-scatter followed by an all-gather, both in NCCL primitives
 * that add nothing: the vector is cut into W equal slices (padded with zeros), every rank
 * sends slice q to rank q and receives the W contributions to its own slice (grouped
 * ncclSend/ncclRecv), adds them in the tree's order with the device's own element-wise
 * add (the one the engine's local tree uses), and ncclAllGather hands every rank all the
 * reduced slices. Traffic is that of a ring allreduce (2 (W-1)/W of the vector per
 * rank); the alternative, an all-gather of whole vectors and a local tree, moves W times
 * more and needs W vectors of memory. Small host buffers (the loss sum) are all-gathered
 * and added on the host in the same tree.
 */
#include "clock.h"
#include "gpu.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll.h"
#include "gpu_rules.h"

struct nccl_rank {
	ncclComm_t comm;
	pthread_mutex_t mu; /* guards comm and dead */
	int dead;           /* aborted or destroyed: never used again */
	int device;
	void *scratch;      /* device staging of host buffers, sized at creation */
	size_t scratch_cap;
	void *tree;         /* the tree allreduce's slices (2 x W x slice), sized at creation */
	size_t tree_cap;
};

struct nccl_coll {
	int world;
	atomic_int aborting;
	atomic_int abort_by; /* rank whose failure first aborted the collective, -1 none */
	int mu_ready;
	atomic_long calls[8]; /* allreduce calls each rank entered */
	struct nccl_rank r[MAX_WORLD];
};

static void pause_poll(long iteration)
{
	/* spin briefly (a small allreduce takes tens of microseconds), then back off */
	if (iteration < 64)
		return;
	struct timespec ts = {0, iteration < 1000 ? 20000L : 500000L};
	nanosleep(&ts, NULL);
}

/* NCCL's last-error text is kept per thread (its comm argument is unused): it is read
 * without touching a communicator that another thread may be aborting. */
static int nccl_error(struct err *e, const char *file, int line, ncclResult_t st,
		      const char *call, int rank, int device)
{
	const char *detail = ncclGetLastError(NULL);
	return err_set(e, ERR_DEVICE, file, line, "rank %d device %d: %s failed at %s:%d: %s%s%s",
		       rank, device, call, file, line, ncclGetErrorString(st),
		       detail && *detail ? ": " : "", detail ? detail : "");
}

#define CU_CHECK(call, rank, device)                                                         \
	do {                                                                                 \
		cudaError_t st_ = (call);                                                    \
		if (st_ != cudaSuccess)                                                      \
			return gpu_cuda_error(e, __FILE__, __LINE__, (int)st_, #call, (rank),  \
					      (device));                                     \
	} while (0)

/* Aborts every communicator that is still alive (idempotent, any thread). NCCL may
 * switch the calling thread's CUDA device: it is restored. */
/* Aborts every communicator. `by` >= 0: the rank whose failure causes it, recorded
 * before the flag is raised, so a peer that sees the flag can name it. */
static void abort_all(struct nccl_coll *n, int by)
{
	int cur = -1, none = -1;
	if (by >= 0)
		atomic_compare_exchange_strong(&n->abort_by, &none, by);
	atomic_store(&n->aborting, 1);
	cudaGetDevice(&cur);
	for (int r = 0; r < n->world; r++) {
		struct nccl_rank *nr = &n->r[r];
		pthread_mutex_lock(&nr->mu);
		if (!nr->dead && nr->comm)
			ncclCommAbort(nr->comm);
		nr->dead = 1;
		pthread_mutex_unlock(&nr->mu);
	}
	if (cur >= 0)
		cudaSetDevice(cur);
	cudaGetLastError();
}

/* Names the rank whose failure aborted the collective. The collective's own record
 * comes first: the pool re-arms its barrier after a failed run, and in a later run the
 * barrier's first aborting rank is only a rank that met the dead collective. */
static int aborted_error(struct coll *c, int rank, int device, const char *when, struct err *e)
{
	struct nccl_coll *n = c->impl;
	int by = atomic_load(&n->abort_by);
	if (by < 0 && c->barrier)
		by = barrier_abort_rank(c->barrier);
	if (by >= 0 && by != rank)
		return ERR(e, ERR_ABORTED, "rank %d device %d: allreduce %s: rank %d failed (the "
			   "NCCL communicators are aborted for good)", rank, device, when, by);
	return ERR(e, ERR_ABORTED, "rank %d device %d: allreduce %s: the NCCL communicators "
		   "were aborted for good (a new collective is needed)", rank, device, when);
}

static int is_aborted(struct coll *c, struct nccl_coll *n)
{
	return atomic_load(&n->aborting) || (c->barrier && barrier_is_aborted(c->barrier));
}

/* Polls until the allreduce enqueued on stream s (dev's) has completed: a wait for the
 * device, counted on dev like the backend's own (dev.h). */
static int wait_done(struct coll *c, int rank, struct dev *dev, cudaStream_t s, double t0,
		     struct err *e)
{
	struct nccl_coll *n = c->impl;
	dev_count(dev, 0, 0, 1);
	struct nccl_rank *nr = &n->r[rank];
	double timeout = c->barrier ? barrier_timeout(c->barrier) : 0.0;
	for (long it = 0;; it++) {
		ncclResult_t state = ncclSuccess, q = ncclSuccess;
		pthread_mutex_lock(&nr->mu);
		int dead = nr->dead;
		if (!dead)
			q = ncclCommGetAsyncError(nr->comm, &state);
		pthread_mutex_unlock(&nr->mu);
		if (dead)
			return aborted_error(c, rank, nr->device, "abandoned", e);
		if (q != ncclSuccess || (state != ncclSuccess && state != ncclInProgress)) {
			int rc = nccl_error(e, __FILE__, __LINE__, q != ncclSuccess ? q : state,
					    "ncclAllReduce (asynchronous)", rank, nr->device);
			abort_all(n, rank);
			return rc;
		}
		if (state == ncclSuccess) { /* enqueued: now the stream tells */
			cudaError_t cs = cudaStreamQuery(s);
			/* an aborted kernel also ends: the flag, set before any abort, tells */
			if (cs == cudaSuccess)
				return atomic_load(&n->aborting)
					       ? aborted_error(c, rank, nr->device, "abandoned", e)
					       : ERR_OK;
			if (cs != cudaErrorNotReady) {
				int rc = gpu_cuda_error(e, __FILE__, __LINE__, (int)cs,
							"cudaStreamQuery (allreduce)", rank, nr->device);
				abort_all(n, rank);
				return rc;
			}
			/* "not ready" is also recorded as this thread's last error: clear it,
			 * or the next kernel launch check on this thread reports it */
			(void)cudaGetLastError();
		}
		if (is_aborted(c, n)) {
			abort_all(n, -1);
			return aborted_error(c, rank, nr->device, "abandoned", e);
		}
		if (timeout > 0 && clock_now_s() - t0 > timeout) {
			int arrived[8];
			char msg[512];
			long mine = atomic_load(&n->calls[rank]);
			for (int q = 0; q < n->world; q++)
				arrived[q] = atomic_load(&n->calls[q]) >= mine;
			gpu_coll_timeout_message(msg, sizeof msg, rank, nr->device, timeout, arrived,
						 n->world);
			ERR(e, ERR_DEVICE, "%s", msg);
			abort_all(n, rank);
			if (c->barrier)
				barrier_abort(c->barrier, rank);
			return ERR_DEVICE;
		}
		pause_poll(it);
	}
}

static size_t dtype_size(enum coll_dtype t)
{
	return t == COLL_F32 ? 4 : 8;
}

static ncclDataType_t nccl_dtype(enum coll_dtype t)
{
	return t == COLL_F32 ? ncclFloat32 : t == COLL_F64 ? ncclFloat64 : ncclInt64;
}

/* Whether `bytes` fit a buffer allocated at creation (`cap` bytes); ERR_DEVICE if not:
 * nothing is allocated once the collective exists. */
static int fits(size_t cap, size_t bytes, const char *what, int rank, int device, struct err *e)
{
	if (bytes <= cap)
		return ERR_OK;
	return ERR(e, ERR_DEVICE, "rank %d device %d: %s needs %zu bytes of device staging; %zu "
		   "were allocated when the collective was created", rank, device, what, bytes, cap);
}

static int nccl_allreduce(struct coll *c, int rank, struct dev *dev, void *buf, size_t count,
			  enum coll_dtype type, enum coll_op op, int host_buf, struct err *e)
{
	struct nccl_coll *n = c->impl;
	double t0 = clock_now_s();
	if (rank < 0 || rank >= n->world)
		return ERR(e, ERR_DEVICE, "allreduce: rank %d outside 0..%d", rank, n->world - 1);
	struct nccl_rank *nr = &n->r[rank];
	int device = nr->device, rc;
	cudaStream_t s = cuda_dev_stream(dev);
	if (!s)
		return ERR(e, ERR_DEVICE, "rank %d: the NCCL collective needs a CUDA device", rank);
	if (dev->device_id != device)
		return ERR(e, ERR_DEVICE, "rank %d: device %d given to allreduce, the communicator "
			   "is on device %d", rank, dev->device_id, device);
	if (is_aborted(c, n))
		return aborted_error(c, rank, device, "not started", e);
	atomic_fetch_add(&n->calls[rank], 1);
	if (count == 0)
		return ERR_OK; /* every rank has the same count: all skip together */
	size_t bytes = count * dtype_size(type);
	if (host_buf && (rc = fits(nr->scratch_cap, bytes, "an allreduce of a host buffer", rank,
				   device, e)))
		return rc;
	CU_CHECK(cudaSetDevice(device), rank, device);
	void *dbuf = buf;
	if (host_buf) {
		CU_CHECK(cudaMemcpyAsync(nr->scratch, buf, bytes, cudaMemcpyHostToDevice, s), rank,
			 device);
		dev_count(dev, 0, 1, 0);
		dbuf = nr->scratch;
	}
	pthread_mutex_lock(&nr->mu);
	ncclResult_t st = ncclInvalidUsage;
	if (!nr->dead)
		st = ncclAllReduce(dbuf, dbuf, count, nccl_dtype(type), ncclSum, nr->comm, s);
	int dead = nr->dead;
	pthread_mutex_unlock(&nr->mu);
	if (dead)
		return aborted_error(c, rank, device, "not started", e);
	if (st != ncclSuccess && st != ncclInProgress) {
		rc = nccl_error(e, __FILE__, __LINE__, st, "ncclAllReduce", rank, device);
		abort_all(n, rank);
		return rc;
	}
	dev_count(dev, 1, 0, 0);
	if ((rc = wait_done(c, rank, dev, s, t0, e)) != ERR_OK)
		return rc;
	/* queued behind the sum on the same stream: whatever reads the buffer next waits */
	if (op == COLL_AVG && (rc = cuda_dev_divide(dev, dbuf, count, (int)type, n->world, e)))
		return rc;
	if (host_buf) {
		CU_CHECK(cudaMemcpyAsync(buf, nr->scratch, bytes, cudaMemcpyDeviceToHost, s), rank,
			 device);
		dev_count(dev, 0, 1, 1);
		CU_CHECK(cudaStreamSynchronize(s), rank, device);
	}
	c->seconds[rank] += clock_now_s() - t0;
	return ERR_OK;
}


/* ---- the tree allreduce (exact mode) ---- */

/* The checks every collective call starts with; the rank's stream goes to *s. */
static int tree_prologue(struct coll *c, int rank, struct dev *dev, cudaStream_t *s,
			 struct err *e)
{
	struct nccl_coll *n = c->impl;
	if (rank < 0 || rank >= n->world)
		return ERR(e, ERR_DEVICE, "allreduce: rank %d outside 0..%d", rank, n->world - 1);
	int device = n->r[rank].device;
	*s = cuda_dev_stream(dev);
	if (!*s)
		return ERR(e, ERR_DEVICE, "rank %d: the NCCL collective needs a CUDA device", rank);
	if (dev->device_id != device)
		return ERR(e, ERR_DEVICE, "rank %d: device %d given to allreduce, the communicator "
			   "is on device %d", rank, dev->device_id, device);
	if (coll_tree_levels(n->world) < 0)
		return ERR(e, ERR_CONFIG, "the tree allreduce needs a power-of-two world, not %d",
			   n->world);
	if (is_aborted(c, n))
		return aborted_error(c, rank, device, "not started", e);
	atomic_fetch_add(&n->calls[rank], 1);
	CU_CHECK(cudaSetDevice(device), rank, device);
	return ERR_OK;
}

/* Issues one NCCL step of the tree allreduce under the communicator's lock and waits for
 * it. send/recv: the reduce-scatter exchange (slice q of `out` to rank q, rank q's
 * contribution into slice q of `in`); otherwise an all-gather of `in` (slice elements)
 * into `out`. */
static int tree_nccl_step(struct coll *c, int rank, struct dev *dev, cudaStream_t s,
			  int exchange, void *in, void *out, size_t slice, ncclDataType_t type,
			  size_t elem, double t0, struct err *e)
{
	struct nccl_coll *n = c->impl;
	struct nccl_rank *nr = &n->r[rank];
	const char *call = exchange ? "ncclSend/ncclRecv (tree reduce-scatter)"
				    : "ncclAllGather (tree)";
	ncclResult_t st = ncclInvalidUsage;
	pthread_mutex_lock(&nr->mu);
	int dead = nr->dead;
	if (!dead && exchange) {
		st = ncclGroupStart();
		for (int q = 0; q < n->world && (st == ncclSuccess || st == ncclInProgress); q++) {
			st = ncclSend((char *)out + q * slice * elem, slice, type, q, nr->comm, s);
			if (st == ncclSuccess || st == ncclInProgress)
				st = ncclRecv((char *)in + q * slice * elem, slice, type, q, nr->comm,
					      s);
		}
		ncclResult_t g = ncclGroupEnd();
		if (st == ncclSuccess || st == ncclInProgress)
			st = g;
	} else if (!dead) {
		st = ncclAllGather(in, out, slice, type, nr->comm, s);
	}
	pthread_mutex_unlock(&nr->mu);
	if (dead)
		return aborted_error(c, rank, nr->device, "not started", e);
	if (st != ncclSuccess && st != ncclInProgress) {
		int rc = nccl_error(e, __FILE__, __LINE__, st, call, rank, nr->device);
		abort_all(n, rank);
		return rc;
	}
	dev_count(dev, 1, 0, 0);
	return wait_done(c, rank, dev, s, t0, e);
}

/* The W contributions to one slice, at slices[q * slice], added in the pairwise tree's
 * order into slices[0] by the device's own add (the engine's local tree uses it too). */
static int tree_add_slices(struct dev *dev, int world, float *slices, size_t slice,
			   struct err *e)
{
	for (int step = 1; step < world; step *= 2)
		for (int q = 0; q + step < world; q += 2 * step)
			ERR_TRY(dev->ops->col_sum_acc(dev, 1, (int)slice, slices + (q + step) * slice,
						      slices + q * slice, e));
	return ERR_OK;
}

/* A small host buffer: all-gathered to every rank, added on the host in the tree. */
static int tree_host_buffer(struct coll *c, int rank, struct dev *dev, cudaStream_t s, void *buf,
			    size_t count, enum coll_dtype type, double t0, struct err *e)
{
	struct nccl_coll *n = c->impl;
	struct nccl_rank *nr = &n->r[rank];
	int device = nr->device, w = n->world, rc;
	size_t elem = dtype_size(type), bytes = count * elem;
	if ((rc = fits(nr->tree_cap, bytes * (w + 1), "a tree allreduce of a host buffer", rank,
		       device, e)))
		return rc;
	char *mine = nr->tree, *all = (char *)nr->tree + bytes;
	CU_CHECK(cudaMemcpyAsync(mine, buf, bytes, cudaMemcpyHostToDevice, s), rank, device);
	dev_count(dev, 0, 1, 0);
	if ((rc = tree_nccl_step(c, rank, dev, s, 0, mine, all, count, nccl_dtype(type), elem, t0,
				 e)))
		return rc;
	void *host = malloc(bytes * w);
	if (!host)
		return ERR(e, ERR_NOMEM, "rank %d: out of memory for the tree allreduce", rank);
	cudaError_t cs = cudaMemcpyAsync(host, all, bytes * w, cudaMemcpyDeviceToHost, s);
	dev_count(dev, 0, 1, 1);
	if (cs == cudaSuccess)
		cs = cudaStreamSynchronize(s);
	if (cs != cudaSuccess) {
		free(host);
		return gpu_cuda_error(e, __FILE__, __LINE__, (int)cs, "cudaMemcpyAsync (tree)", rank,
				      device);
	}
	const void *src[8];
	for (int q = 0; q < w; q++)
		src[q] = (const char *)host + q * bytes;
	coll_tree_add(src, w, type, 0, count, buf);
	free(host);
	return ERR_OK;
}

/* A device float vector: reduce-scatter by slices, tree adds, all-gather. */
static int tree_device_f32(struct coll *c, int rank, struct dev *dev, cudaStream_t s,
			   float *buf, size_t count, double t0, struct err *e)
{
	struct nccl_coll *n = c->impl;
	struct nccl_rank *nr = &n->r[rank];
	int device = nr->device, w = n->world, rc;
	size_t slice = (count + w - 1) / w, padded = slice * w;
	if (slice > (size_t)INT32_MAX)
		return ERR(e, ERR_DEVICE, "rank %d: tree allreduce of %zu elements: slices too large",
			   rank, count);
	if ((rc = fits(nr->tree_cap, 2 * padded * sizeof(float), "a tree allreduce", rank, device,
		       e)))
		return rc;
	float *whole = nr->tree, *slices = (float *)nr->tree + padded;
	CU_CHECK(cudaMemcpyAsync(whole, buf, count * sizeof(float), cudaMemcpyDeviceToDevice, s),
		 rank, device);
	CU_CHECK(cudaMemsetAsync(whole + count, 0, (padded - count) * sizeof(float), s), rank,
		 device);
	dev_count(dev, 0, 2, 0);
	if ((rc = tree_nccl_step(c, rank, dev, s, 1, slices, whole, slice, ncclFloat32,
				 sizeof(float), t0, e)) ||
	    (rc = tree_add_slices(dev, w, slices, slice, e)) ||
	    (rc = tree_nccl_step(c, rank, dev, s, 0, slices, whole, slice, ncclFloat32,
				 sizeof(float), t0, e)))
		return rc;
	CU_CHECK(cudaMemcpyAsync(buf, whole, count * sizeof(float), cudaMemcpyDeviceToDevice, s),
		 rank, device);
	dev_count(dev, 0, 1, 1);
	CU_CHECK(cudaStreamSynchronize(s), rank, device);
	return ERR_OK;
}

static int nccl_allreduce_tree(struct coll *c, int rank, struct dev *dev, void *buf,
			       size_t count, enum coll_dtype type, int host_buf, struct err *e)
{
	double t0 = clock_now_s();
	cudaStream_t s = NULL;
	int rc;
	if ((rc = tree_prologue(c, rank, dev, &s, e)))
		return rc;
	if (type != COLL_F32 && type != COLL_F64)
		return ERR(e, ERR_DEVICE, "the tree allreduce adds floating-point values only");
	if (count == 0)
		return ERR_OK; /* every rank has the same count: all skip together */
	if (host_buf)
		rc = tree_host_buffer(c, rank, dev, s, buf, count, type, t0, e);
	else if (type != COLL_F32)
		rc = ERR(e, ERR_DEVICE, "the tree allreduce of a device buffer adds float32 only");
	else
		rc = tree_device_f32(c, rank, dev, s, buf, count, t0, e);
	if (rc == ERR_OK)
		c->seconds[rank] += clock_now_s() - t0;
	return rc;
}

static void nccl_abort(struct coll *c, int rank)
{
	struct nccl_coll *n = c->impl;
	abort_all(n, rank);
}

/* Waits until every communicator has left ncclInProgress; 0 if all are ncclSuccess. */
static int settle_all(struct nccl_coll *n, double timeout_s)
{
	double t0 = clock_now_s();
	for (int r = 0; r < n->world; r++) {
		for (long it = 0;; it++) {
			ncclResult_t state = ncclInProgress;
			if (ncclCommGetAsyncError(n->r[r].comm, &state) != ncclSuccess)
				return -1;
			if (state == ncclSuccess)
				break;
			if (state != ncclInProgress)
				return -1;
			if (timeout_s > 0 && clock_now_s() - t0 > timeout_s)
				return -1;
			pause_poll(it);
		}
	}
	return 0;
}

static void nccl_destroy(struct coll *c)
{
	struct nccl_coll *n = c ? c->impl : NULL;
	int cur = -1;
	if (!n) {
		free(c);
		return;
	}
	cudaGetDevice(&cur);
	if (!atomic_load(&n->aborting)) {
		/* orderly: finalize all (grouped: one thread drives every rank), then free */
		int ok = 1;
		ncclGroupStart();
		for (int r = 0; r < n->world; r++) {
			ncclResult_t f = ncclCommFinalize(n->r[r].comm);
			if (f != ncclSuccess && f != ncclInProgress)
				ok = 0;
		}
		ncclResult_t g = ncclGroupEnd();
		if (g != ncclSuccess && g != ncclInProgress)
			ok = 0;
		if (ok && settle_all(n, 60.0) == 0) {
			for (int r = 0; r < n->world; r++) {
				ncclCommDestroy(n->r[r].comm);
				n->r[r].dead = 1;
			}
		}
	}
	abort_all(n, -1); /* whatever is left (a failed run, a failed finalize) */
	for (int r = 0; r < n->world; r++) {
		if (n->r[r].scratch || n->r[r].tree) {
			cudaSetDevice(n->r[r].device);
			cudaFree(n->r[r].scratch);
			cudaFree(n->r[r].tree);
		}
	}
	if (n->mu_ready)
		for (int r = 0; r < n->world; r++)
			pthread_mutex_destroy(&n->r[r].mu);
	if (cur >= 0)
		cudaSetDevice(cur);
	cudaGetLastError();
	free(n);
	free(c);
}

static const struct coll_ops nccl_coll_ops = {
	.name = "nccl",
	.allreduce = nccl_allreduce,
	.allreduce_tree = nccl_allreduce_tree,
	.abort = nccl_abort,
	.destroy = nccl_destroy,
};

/* Sets NCCL_NVLS_ENABLE=0 unless the user decided about NVLS (see the top). NCCL reads
 * its environment when the first communicator of the process is created. */
static void keep_sums_repeatable(void)
{
	if (gpu_nccl_env_disable_nvls(getenv("NCCL_ALGO"), getenv("NCCL_NVLS_ENABLE"), NULL, 0))
		setenv("NCCL_NVLS_ENABLE", "0", 1);
}

/* The device buffers of every rank, for allreduces of up to max_count elements: the
 * staging of host buffers (8-byte elements), and the tree allreduce's slices (float32:
 * the whole vector padded to W slices, and as much again; host buffers of the tree
 * need count x (W + 1) 8-byte elements, which fits for the small counts they carry). */
static int alloc_scratch(struct nccl_coll *n, size_t max_count, struct err *e)
{
	size_t count = max_count ? max_count : 1, w = (size_t)n->world;
	size_t cap = count * 8, tree = 2 * ((count + w - 1) / w * w) * sizeof(float);
	if (tree < 8 * (w + 1))
		tree = 8 * (w + 1);
	for (int r = 0; r < n->world; r++) {
		int device = n->r[r].device;
		CU_CHECK(cudaSetDevice(device), r, device);
		CU_CHECK(cudaMalloc(&n->r[r].scratch, cap), r, device);
		n->r[r].scratch_cap = cap;
		CU_CHECK(cudaMalloc(&n->r[r].tree, tree), r, device);
		n->r[r].tree_cap = tree;
	}
	return ERR_OK;
}

int nccl_coll_create(int world, const int *device_ids, struct barrier *barrier,
		     size_t max_count, struct coll **out, struct err *e)
{
	struct coll *c = NULL;
	struct nccl_coll *n = NULL;
	int visible = 0, cur = -1, rc = ERR_OK;
	ncclUniqueId id;
	*out = NULL;
	if (world < 1 || world > MAX_WORLD)
		return ERR(e, ERR_CONFIG, "devices: NCCL collective over %d ranks (1..%d)",
			   world, MAX_WORLD);
	for (int r = 0; r < world; r++)
		for (int q = 0; q < r; q++)
			if (device_ids[q] == device_ids[r])
				return ERR(e, ERR_CONFIG,
					   "devices: ranks %d and %d are both on GPU %d; NCCL needs "
					   "one GPU per rank: give each rank its own GPU in "
					   "[devices] ids, or let ranks share a GPU with "
					   "[devices] collective = host", q, r, device_ids[r]);
	cudaError_t cst = cudaGetDeviceCount(&visible);
	if (cst != cudaSuccess) {
		cudaGetLastError();
		return gpu_cuda_error(e, __FILE__, __LINE__, (int)cst, "cudaGetDeviceCount", -1, -1);
	}
	for (int r = 0; r < world; r++)
		if (device_ids[r] < 0 || device_ids[r] >= visible)
			return ERR(e, ERR_CONFIG, "devices: rank %d: GPU %d does not exist (%d visible)",
				   r, device_ids[r], visible);

	c = calloc(1, sizeof *c);
	n = calloc(1, sizeof *n);
	if (!c || !n) {
		free(c);
		free(n);
		return ERR(e, ERR_NOMEM, "out of memory");
	}
	c->ops = &nccl_coll_ops;
	c->world = world;
	c->barrier = barrier;
	c->impl = n;
	n->world = world;
	atomic_store(&n->aborting, 0);
	atomic_store(&n->abort_by, -1);
	for (int r = 0; r < world; r++) {
		pthread_mutex_init(&n->r[r].mu, NULL);
		n->r[r].device = device_ids[r];
		n->r[r].dead = 1; /* until its communicator exists */
	}
	n->mu_ready = 1;

	cudaGetDevice(&cur);
	for (int r = 0; r < world; r++)
		atomic_store(&n->calls[r], 0);
	ERR_TRY_GOTO(rc, alloc_scratch(n, max_count, e), fail);
	keep_sums_repeatable();
	ncclResult_t st = ncclGetUniqueId(&id);
	if (st != ncclSuccess) {
		rc = nccl_error(e, __FILE__, __LINE__, st, "ncclGetUniqueId", 0, device_ids[0]);
		goto fail;
	}
	ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
	config.blocking = 0;
	st = ncclGroupStart();
	for (int r = 0; r < world && st == ncclSuccess; r++) {
		cst = cudaSetDevice(device_ids[r]);
		if (cst != cudaSuccess) {
			ncclGroupEnd();
			rc = gpu_cuda_error(e, __FILE__, __LINE__, (int)cst, "cudaSetDevice", r,
					    device_ids[r]);
			goto fail;
		}
		st = ncclCommInitRankConfig(&n->r[r].comm, world, id, r, &config);
		if (st == ncclSuccess || st == ncclInProgress) {
			n->r[r].dead = 0;
			st = ncclSuccess;
		} else {
			rc = nccl_error(e, __FILE__, __LINE__, st, "ncclCommInitRankConfig", r,
					device_ids[r]);
		}
	}
	ncclResult_t g = ncclGroupEnd();
	if (rc != ERR_OK)
		goto fail;
	if (g != ncclSuccess && g != ncclInProgress) {
		rc = nccl_error(e, __FILE__, __LINE__, g, "ncclGroupEnd (communicator creation)", 0,
				device_ids[0]);
		goto fail;
	}
	/* non-blocking creation: wait until every communicator is ready (setting up many
	 * GPUs can take a while: the barrier's timeout, but at least two minutes) */
	double timeout = barrier && barrier_timeout(barrier) > 0 ? barrier_timeout(barrier) : 0.0;
	if (timeout > 0 && timeout < 120.0)
		timeout = 120.0;
	double t0 = clock_now_s();
	for (int r = 0; r < world; r++) {
		for (long it = 0;; it++) {
			ncclResult_t state = ncclInProgress;
			st = ncclCommGetAsyncError(n->r[r].comm, &state);
			if (st != ncclSuccess || (state != ncclSuccess && state != ncclInProgress)) {
				rc = nccl_error(e, __FILE__, __LINE__, st != ncclSuccess ? st : state,
						"ncclCommInitRankConfig (asynchronous)", r,
						device_ids[r]);
				goto fail;
			}
			if (state == ncclSuccess)
				break;
			if (timeout > 0 && clock_now_s() - t0 > timeout) {
				rc = ERR(e, ERR_DEVICE, "rank %d device %d: NCCL communicator not ready "
					 "after %.1f s (devices.timeout)", r, device_ids[r], timeout);
				goto fail;
			}
			pause_poll(it);
		}
	}
	if (cur >= 0)
		cudaSetDevice(cur);
	*out = c;
	return ERR_OK;
fail:
	atomic_store(&n->aborting, 1); /* destroy aborts what was created */
	nccl_destroy(c);
	if (cur >= 0)
		cudaSetDevice(cur);
	return rc;
}
