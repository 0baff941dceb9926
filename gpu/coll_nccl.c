/*
 * coll_nccl: the NCCL collective, one communicator per rank of this process.
 *
 * The ranks of one process form a clique of their own, or are part of one spanning
 * several processes (nccl_coll_create_span): process 0 makes the clique's unique id, the
 * caller carries it to the others (MPI lives above this layer), and each process creates
 * its communicators with ncclCommInitRankConfig in one group, as clique ranks first ..
 * first + local - 1. Everything below is written over the clique's ranks where NCCL
 * needs them (the tree's peers, the divisor of avg) and over the local communicators
 * everywhere else.
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
 * One wait for the device per call: each call is a plan of steps (gpu_coll_plan in
 * gpu_rules.c, tested without a GPU): the NCCL calls, the division of avg, the copies of a
 * host buffer to and from a pinned host slot and the tree's adds are all queued on the
 * rank's stream, and the host waits once, polling, before it reads the result. Between an
 * NCCL call and the next work queued behind it the host only waits for NCCL to have
 * queued the call (a non-blocking communicator may return before it did).
 *
 * Nothing is allocated once the collective exists: the device staging of host buffers and
 * the pinned slot are sized at creation for the largest count, and a larger one is
 * refused. Each rank counts
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
 *
 * The sharded optimizer's reduce-scatter and all-gather (coll.h) use the same padded
 * slices: a reduce-scatter is the tree's exchange and adds (exact mode) or
 * ncclReduceScatter (the default mode, NCCL's order of additions), then the rank's
 * slice (coll_shard_range, as NCCL cuts) copied into its place; an all-gather copies the
 * rank's slice out, zero-padded, and ncclAllGather hands every rank the whole.
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

#define PINNED_MAX ((size_t)1 << 20) /* the pinned host slot of a rank, at most */

struct nccl_rank {
	ncclComm_t comm;
	pthread_mutex_t mu; /* guards comm and dead */
	int dead;           /* aborted or destroyed: never used again */
	int device;
	void *scratch;      /* device staging of host buffers, sized at creation */
	size_t scratch_cap;
	void *tree;         /* the tree allreduce's slices (2 x W x slice), sized at creation */
	size_t tree_cap;
	void *pinned;       /* pinned host slot: host buffers go to and come back from the
			       device through it, queued before the call's one wait */
	size_t pinned_cap;
};

struct nccl_coll {
	int world;  /* ranks of the clique, every process's (NCCL's nranks) */
	int local;  /* communicators of this process: r[0..local) */
	int first;  /* the clique rank of r[0]: r[l] is rank first + l */
	atomic_int aborting;
	atomic_int abort_by; /* rank whose failure first aborted the collective, -1 none */
	int mu_ready;
	atomic_long calls[MAX_WORLD]; /* allreduce calls each local rank entered */
	struct nccl_rank r[MAX_WORLD];
};

/* One pause of a poll loop whose wait began at `started` (clock_now_s): gpu_rules.h */
static void pause_poll(double started)
{
	long ns = gpu_poll_pause_ns(clock_now_s() - started);
	if (ns == 0)
		return;
	struct timespec ts = {0, ns};
	nanosleep(&ts, NULL);
}

/* NCCL's last-error text is kept per thread (its comm argument is unused): it is read
 * without touching a communicator that another thread may be aborting. */
static int nccl_error(struct err *e, const char *file, int line, ncclResult_t st,
		      const char *call, int rank, int device)
{
	const char *detail = ncclGetLastError(NULL);
	char who[48] = "";
	if (rank >= 0)
		snprintf(who, sizeof who, "rank %d device %d: ", rank, device);
	return err_set(e, ERR_DEVICE, file, line, "%s%s failed at %s:%d: %s%s%s", who, call, file,
		       line, ncclGetErrorString(st), detail && *detail ? ": " : "",
		       detail ? detail : "");
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
	for (int r = 0; r < n->local; r++) {
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
	/* local ranks here; messages name the clique's (global) ranks */
	if (by >= 0 && by != rank)
		return ERR(e, ERR_ABORTED, "rank %d device %d: allreduce %s: rank %d failed (the "
			   "NCCL communicators are aborted for good)", n->first + rank, device, when,
			   n->first + by);
	return ERR(e, ERR_ABORTED, "rank %d device %d: allreduce %s: the NCCL communicators "
		   "were aborted for good (a new collective is needed)", n->first + rank, device,
		   when);
}

static int is_aborted(struct coll *c, struct nccl_coll *n)
{
	return atomic_load(&n->aborting) || (c->barrier && barrier_is_aborted(c->barrier));
}

/* The error of local rank `rank` whose collective did not end within timeout_s. In one
 * process the message says which ranks reached the call; the ranks of other processes
 * are not seen from here, so across processes it names the call only. */
static void timeout_message(struct nccl_coll *n, int rank, double timeout_s, struct err *e)
{
	int arrived[MAX_WORLD];
	char msg[512];
	long mine = atomic_load(&n->calls[rank]);
	if (n->local < n->world) {
		ERR(e, ERR_DEVICE, "rank %d device %d: allreduce timed out after %g s "
		    "(devices.timeout): a rank of this process or of another one failed or hangs "
		    "before the collective, or the transport between the GPUs hangs (NCCL_DEBUG=INFO "
		    "shows which path NCCL takes)", n->first + rank, n->r[rank].device, timeout_s);
		return;
	}
	for (int q = 0; q < n->local; q++)
		arrived[q] = atomic_load(&n->calls[q]) >= mine;
	gpu_coll_timeout_message(msg, sizeof msg, rank, n->r[rank].device, timeout_s, arrived,
				 n->local);
	ERR(e, ERR_DEVICE, "%s", msg);
}

/* Polls until NCCL has queued the last call on stream s (dev's), and with `stream` set
 * until the stream has run everything queued on it: a wait for the device, counted on
 * dev like the backend's own (dev.h). The first alone waits for NCCL's host side only
 * (a non-blocking communicator may return before its kernels are queued), which is not
 * a device wait and is not counted. */
static int wait_done(struct coll *c, int rank, struct dev *dev, cudaStream_t s, double t0,
		     int stream, struct err *e)
{
	struct nccl_coll *n = c->impl;
	if (stream)
		dev_count(dev, 0, 0, 1);
	struct nccl_rank *nr = &n->r[rank];
	int global_rank = n->first + rank; /* the rank its messages name */
	double timeout = c->barrier ? barrier_timeout(c->barrier) : 0.0;
	for (double started = clock_now_s();;) {
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
					    "ncclAllReduce (asynchronous)", global_rank,
					    nr->device);
			abort_all(n, rank);
			return rc;
		}
		if (state == ncclSuccess && !stream)
			return ERR_OK;
		if (state == ncclSuccess) { /* enqueued: now the stream tells */
			cudaError_t cs = cudaStreamQuery(s);
			/* an aborted kernel also ends: the flag, set before any abort, tells */
			if (cs == cudaSuccess)
				return atomic_load(&n->aborting)
					       ? aborted_error(c, rank, nr->device, "abandoned", e)
					       : ERR_OK;
			if (cs != cudaErrorNotReady) {
				int rc = gpu_cuda_error(e, __FILE__, __LINE__, (int)cs,
							"cudaStreamQuery (allreduce)", global_rank,
							nr->device);
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
			timeout_message(n, rank, timeout, e);
			abort_all(n, rank);
			if (c->barrier)
				barrier_abort(c->barrier, rank);
			return ERR_DEVICE;
		}
		pause_poll(started);
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

/* Whether `bytes` fit a buffer allocated at creation (`cap` bytes of `kind`); ERR_DEVICE if
 * not: nothing is allocated once the collective exists. */
static int fits(size_t cap, size_t bytes, const char *what, const char *kind, int rank,
		int device, struct err *e)
{
	if (bytes <= cap)
		return ERR_OK;
	return ERR(e, ERR_DEVICE, "rank %d device %d: %s needs %zu bytes of %s; %zu were "
		   "allocated when the collective was created", rank, device, what, bytes, kind, cap);
}

/* ---- one call, step by step (gpu_coll_plan) ---- */

/* One collective call being carried out: what its steps read and write. */
struct call {
	struct coll *c;
	struct nccl_rank *nr;
	struct dev *dev;
	cudaStream_t s;
	int rank, tree, host_buf; /* rank: local (0..local-1) */
	int global_rank;          /* the rank its messages name */
	double t0;
	void *buf;             /* the caller's buffer (host memory for a host buffer) */
	size_t count, bytes;   /* its elements and their bytes */
	enum coll_dtype type;
	void *dbuf;            /* ncclAllReduce's vector: buf, or the staging of a host buffer */
	void *stage;           /* where a host buffer lands on the device */
	void *whole, *slices;  /* tree: the padded vector (a host buffer: every rank's value)
				  and the contributions to this rank's slice */
	size_t slice, padded;  /* tree: elements per slice (a host buffer: count), W slices */
	size_t out_bytes;      /* what STAGE_OUT copies to the pinned slot */
	int zero;              /* a reduce-scatter or all-gather (gpu_zero_plan) */
	size_t lo, hi;         /* zero: this rank's slice of buf (coll_shard_range) */
};

/* The checks every call starts with (the tree's: a power-of-two world); fills k's
 * rank, device and stream, counts the call and selects the GPU. */
static int call_begin(struct coll *c, int rank, struct dev *dev, int tree, struct call *k,
		      struct err *e)
{
	struct nccl_coll *n = c->impl;
	memset(k, 0, sizeof *k);
	k->t0 = clock_now_s();
	if (rank < 0 || rank >= n->local)
		return ERR(e, ERR_DEVICE, "allreduce: local rank %d outside 0..%d", rank,
			   n->local - 1);
	int device = n->r[rank].device;
	int global_rank = n->first + rank; /* the rank its messages name */
	cudaStream_t s = cuda_dev_stream(dev);
	if (!s)
		return ERR(e, ERR_DEVICE, "rank %d: the NCCL collective needs a CUDA device",
			   global_rank);
	if (dev->device_id != device)
		return ERR(e, ERR_DEVICE, "rank %d: device %d given to allreduce, the communicator "
			   "is on device %d", global_rank, dev->device_id, device);
	if (tree && coll_tree_levels(n->world) < 0)
		return ERR(e, ERR_CONFIG, "the tree allreduce needs a power-of-two world, not %d",
			   n->world);
	if (is_aborted(c, n))
		return aborted_error(c, rank, device, "not started", e);
	atomic_fetch_add(&n->calls[rank], 1);
	CU_CHECK(cudaSetDevice(device), global_rank, device);
	*k = (struct call){.c = c, .nr = &n->r[rank], .dev = dev, .s = s, .rank = rank,
			   .global_rank = global_rank, .tree = tree, .t0 = k->t0};
	return ERR_OK;
}

/* Issues the NCCL call of `step` under the communicator's lock; does not wait. */
static int issue_nccl(struct call *k, enum gpu_coll_step step, struct err *e)
{
	struct nccl_coll *n = k->c->impl;
	struct nccl_rank *nr = k->nr;
	ncclDataType_t type = nccl_dtype(k->type);
	size_t elem = dtype_size(k->type);
	const char *call = step == GPU_STEP_ALLREDUCE	     ? "ncclAllReduce"
			   : step == GPU_STEP_EXCHANGE	     ? "ncclSend/ncclRecv (tree reduce-scatter)"
			   : step == GPU_STEP_REDUCE_SCATTER ? "ncclReduceScatter"
							     : "ncclAllGather";
	ncclResult_t st = ncclInvalidUsage;
	pthread_mutex_lock(&nr->mu);
	int dead = nr->dead;
	if (!dead && step == GPU_STEP_ALLREDUCE) {
		st = ncclAllReduce(k->dbuf, k->dbuf, k->count, type, ncclSum, nr->comm, k->s);
	} else if (!dead && step == GPU_STEP_REDUCE_SCATTER) {
		st = ncclReduceScatter(k->whole, k->slices, k->slice, type, ncclSum, nr->comm, k->s);
	} else if (!dead && step == GPU_STEP_EXCHANGE) {
		st = ncclGroupStart();
		for (int q = 0; q < n->world && (st == ncclSuccess || st == ncclInProgress); q++) {
			st = ncclSend((char *)k->whole + q * k->slice * elem, k->slice, type, q,
				      nr->comm, k->s);
			if (st == ncclSuccess || st == ncclInProgress)
				st = ncclRecv((char *)k->slices + q * k->slice * elem, k->slice, type,
					      q, nr->comm, k->s);
		}
		ncclResult_t g = ncclGroupEnd();
		if (st == ncclSuccess || st == ncclInProgress)
			st = g;
	} else if (!dead) {
		void *in = k->host_buf ? k->stage : k->slices;
		st = ncclAllGather(in, k->whole, k->slice, type, nr->comm, k->s);
	}
	pthread_mutex_unlock(&nr->mu);
	if (dead)
		return aborted_error(k->c, k->rank, nr->device, "not started", e);
	if (st != ncclSuccess && st != ncclInProgress) {
		int rc = nccl_error(e, __FILE__, __LINE__, st, call, k->global_rank,
				    nr->device);
		abort_all(n, k->rank);
		return rc;
	}
	dev_count(k->dev, 1, 0, 0);
	return ERR_OK;
}

/* The plan's queued copies: host buffers through the pinned slot, the tree's slices. */
static int queue_copy(struct call *k, enum gpu_coll_step step, struct err *e)
{
	struct nccl_rank *nr = k->nr;
	int rank = k->global_rank, device = nr->device;
	cudaStream_t s = k->s;
	switch (step) {
	case GPU_STEP_STAGE_IN:
		memcpy(nr->pinned, k->buf, k->bytes);
		CU_CHECK(cudaMemcpyAsync(k->stage, nr->pinned, k->bytes, cudaMemcpyHostToDevice, s),
			 rank, device);
		break;
	case GPU_STEP_STAGE_OUT:
		CU_CHECK(cudaMemcpyAsync(nr->pinned, k->tree ? k->whole : k->stage, k->out_bytes,
					 cudaMemcpyDeviceToHost, s),
			 rank, device);
		break;
	case GPU_STEP_SLICE_IN:
		CU_CHECK(cudaMemcpyAsync(k->whole, k->buf, k->bytes, cudaMemcpyDeviceToDevice, s),
			 rank, device);
		CU_CHECK(cudaMemsetAsync((float *)k->whole + k->count, 0,
					 (k->padded - k->count) * sizeof(float), s),
			 rank, device);
		dev_count(k->dev, 0, 1, 0);
		break;
	case GPU_STEP_SHARD_IN: /* padded with zeros: every byte sent is defined */
		CU_CHECK(cudaMemcpyAsync(k->slices, (float *)k->buf + k->lo,
					 (k->hi - k->lo) * sizeof(float), cudaMemcpyDeviceToDevice, s),
			 rank, device);
		CU_CHECK(cudaMemsetAsync((float *)k->slices + (k->hi - k->lo), 0,
					 (k->slice - (k->hi - k->lo)) * sizeof(float), s),
			 rank, device);
		dev_count(k->dev, 0, 1, 0);
		break;
	case GPU_STEP_SHARD_OUT:
		CU_CHECK(cudaMemcpyAsync((float *)k->buf + k->lo, k->slices,
					 (k->hi - k->lo) * sizeof(float), cudaMemcpyDeviceToDevice, s),
			 rank, device);
		break;
	default: /* GPU_STEP_SLICE_OUT */
		CU_CHECK(cudaMemcpyAsync(k->buf, k->whole, k->bytes, cudaMemcpyDeviceToDevice, s),
			 rank, device);
		break;
	}
	dev_count(k->dev, 0, 1, 0);
	return ERR_OK;
}

/* The result from the pinned slot into the host buffer; the tree's W values of each
 * element are added on the host in the tree. */
static void unstage(struct call *k)
{
	struct nccl_coll *n = k->c->impl;
	if (!k->tree) {
		memcpy(k->buf, k->nr->pinned, k->bytes);
		return;
	}
	const void *src[MAX_WORLD];
	for (int q = 0; q < n->world; q++)
		src[q] = (const char *)k->nr->pinned + q * k->bytes;
	coll_tree_add(src, n->world, k->type, 0, k->count, k->buf);
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

static int run_step(struct call *k, enum gpu_coll_step step, struct err *e)
{
	struct nccl_coll *n = k->c->impl;
	switch (step) {
	case GPU_STEP_ALLREDUCE:
	case GPU_STEP_EXCHANGE:
	case GPU_STEP_ALLGATHER:
	case GPU_STEP_REDUCE_SCATTER:
		return issue_nccl(k, step, e);
	case GPU_STEP_ENQUEUED:
		return wait_done(k->c, k->rank, k->dev, k->s, k->t0, 0, e);
	case GPU_STEP_WAIT:
		return wait_done(k->c, k->rank, k->dev, k->s, k->t0, 1, e);
	case GPU_STEP_TREE_ADD:
		return tree_add_slices(k->dev, n->world, k->slices, k->slice, e);
	case GPU_STEP_DIVIDE: /* a reduce-scatter divides its slice only */
		if (k->zero)
			return cuda_dev_divide(k->dev, k->slices, k->slice, (int)k->type, n->world,
					       e);
		return cuda_dev_divide(k->dev, k->dbuf, k->count, (int)k->type, n->world, e);
	case GPU_STEP_UNSTAGE:
		unstage(k);
		return ERR_OK;
	case GPU_STEP_END:
		return ERR_OK;
	default:
		return queue_copy(k, step, e);
	}
}

/* Carries out the steps of a plan; its time goes to the rank's statistics. */
static int run_steps(struct call *k, const enum gpu_coll_step *steps, struct err *e)
{
	for (int i = 0; steps[i] != GPU_STEP_END; i++)
		ERR_TRY(run_step(k, steps[i], e));
	k->c->seconds[k->rank] += clock_now_s() - k->t0;
	return ERR_OK;
}

/* Carries out the call's plan (gpu_coll_plan). */
static int run_plan(struct call *k, int avg, struct err *e)
{
	enum gpu_coll_step steps[GPU_COLL_MAX_STEPS];
	gpu_coll_plan(k->tree, k->host_buf, avg, steps);
	return run_steps(k, steps, e);
}

/* k's buffer: count elements of `type` at buf, in host memory when host_buf is set. */
static void call_buffer(struct call *k, void *buf, size_t count, enum coll_dtype type,
			int host_buf)
{
	k->buf = k->dbuf = buf;
	k->count = count;
	k->type = type;
	k->bytes = count * dtype_size(type);
	k->host_buf = host_buf;
}

static int nccl_allreduce(struct coll *c, int rank, struct dev *dev, void *buf, size_t count,
			  enum coll_dtype type, enum coll_op op, int host_buf, struct err *e)
{
	struct call k;
	ERR_TRY(call_begin(c, rank, dev, 0, &k, e));
	if (count == 0)
		return ERR_OK; /* every rank has the same count: all skip together */
	call_buffer(&k, buf, count, type, host_buf);
	if (host_buf) {
		ERR_TRY(fits(k.nr->scratch_cap, k.bytes, "an allreduce of a host buffer",
			     "device staging", k.global_rank, k.nr->device, e));
		ERR_TRY(fits(k.nr->pinned_cap, k.bytes, "an allreduce of a host buffer",
			     "pinned host staging", k.global_rank, k.nr->device, e));
		k.stage = k.dbuf = k.nr->scratch;
		k.out_bytes = k.bytes;
	}
	return run_plan(&k, op == COLL_AVG, e);
}


/* ---- the tree allreduce (exact mode) ---- */

/* A small host buffer: all-gathered to every rank, added on the host in the tree. */
static int tree_host_layout(struct call *k, struct err *e)
{
	struct nccl_coll *n = k->c->impl;
	size_t w = (size_t)n->world;
	ERR_TRY(fits(k->nr->tree_cap, k->bytes * (w + 1), "a tree allreduce of a host buffer",
		     "device staging", k->global_rank, k->nr->device, e));
	ERR_TRY(fits(k->nr->pinned_cap, k->bytes * w, "a tree allreduce of a host buffer",
		     "pinned host staging", k->global_rank, k->nr->device, e));
	k->stage = k->nr->tree;
	k->whole = (char *)k->nr->tree + k->bytes;
	k->slice = k->count;
	k->out_bytes = k->bytes * w;
	return ERR_OK;
}

/* A device float vector: reduce-scatter by slices, tree adds, all-gather. */
static int tree_device_layout(struct call *k, struct err *e)
{
	struct nccl_coll *n = k->c->impl;
	size_t w = (size_t)n->world;
	k->slice = (k->count + w - 1) / w;
	k->padded = k->slice * w;
	if (k->slice > (size_t)INT32_MAX)
		return ERR(e, ERR_DEVICE, "rank %d: tree allreduce of %zu elements: slices too large",
			   k->global_rank, k->count);
	ERR_TRY(fits(k->nr->tree_cap, 2 * k->padded * sizeof(float), "a tree allreduce",
		     "device staging", k->global_rank, k->nr->device, e));
	k->whole = k->nr->tree;
	k->slices = (float *)k->nr->tree + k->padded;
	return ERR_OK;
}

static int nccl_allreduce_tree(struct coll *c, int rank, struct dev *dev, void *buf,
			       size_t count, enum coll_dtype type, int host_buf, struct err *e)
{
	struct call k;
	ERR_TRY(call_begin(c, rank, dev, 1, &k, e));
	if (type != COLL_F32 && type != COLL_F64)
		return ERR(e, ERR_DEVICE, "the tree allreduce adds floating-point values only");
	if (count == 0)
		return ERR_OK; /* every rank has the same count: all skip together */
	call_buffer(&k, buf, count, type, host_buf);
	if (host_buf)
		ERR_TRY(tree_host_layout(&k, e));
	else if (type != COLL_F32)
		return ERR(e, ERR_DEVICE, "the tree allreduce of a device buffer adds float32 only");
	else
		ERR_TRY(tree_device_layout(&k, e));
	return run_plan(&k, 0, e);
}

/* ---- ZeRO's halves: reduce-scatter and all-gather of a float device vector ---- */

/* One reduce-scatter (gather = 0) or all-gather (gather = 1) of buf[0..count): the
 * vector's padded slices as the tree allreduce lays them out, this rank's slice of buf
 * [lo, hi) by coll_shard_range over the clique, then the steps of gpu_zero_plan. */
static int zero_call(struct coll *c, int rank, struct dev *dev, float *buf, size_t count,
		     int gather, int tree, int avg, struct err *e)
{
	struct nccl_coll *n = c->impl;
	struct call k;
	enum gpu_coll_step steps[GPU_COLL_MAX_STEPS];
	ERR_TRY(call_begin(c, rank, dev, tree, &k, e));
	if (count == 0)
		return ERR_OK; /* every rank has the same count: all skip together */
	call_buffer(&k, buf, count, COLL_F32, 0);
	ERR_TRY(tree_device_layout(&k, e));
	k.zero = 1;
	coll_shard_range(count, n->world, k.global_rank, &k.lo, &k.hi);
	gpu_zero_plan(gather, tree, avg, steps);
	return run_steps(&k, steps, e);
}

/* NCCL's reduce-scatter adds in its own order, like its allreduce (not necessarily the
 * same one); the tree's is exact mode's, the bits of allreduce_tree. */
static int nccl_reduce_scatter(struct coll *c, int rank, struct dev *dev, float *buf,
			       size_t count, enum coll_op op, int tree, struct err *e)
{
	return zero_call(c, rank, dev, buf, count, 0, tree, !tree && op == COLL_AVG, e);
}

static int nccl_all_gather(struct coll *c, int rank, struct dev *dev, float *buf,
			   size_t count, struct err *e)
{
	return zero_call(c, rank, dev, buf, count, 1, 0, 0, e);
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
	for (int r = 0; r < n->local; r++) {
		for (double started = clock_now_s();;) {
			ncclResult_t state = ncclInProgress;
			if (ncclCommGetAsyncError(n->r[r].comm, &state) != ncclSuccess)
				return -1;
			if (state == ncclSuccess)
				break;
			if (state != ncclInProgress)
				return -1;
			if (timeout_s > 0 && clock_now_s() - t0 > timeout_s)
				return -1;
			pause_poll(started);
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
		for (int r = 0; r < n->local; r++) {
			ncclResult_t f = ncclCommFinalize(n->r[r].comm);
			if (f != ncclSuccess && f != ncclInProgress)
				ok = 0;
		}
		ncclResult_t g = ncclGroupEnd();
		if (g != ncclSuccess && g != ncclInProgress)
			ok = 0;
		if (ok && settle_all(n, 60.0) == 0) {
			for (int r = 0; r < n->local; r++) {
				ncclCommDestroy(n->r[r].comm);
				n->r[r].dead = 1;
			}
		}
	}
	abort_all(n, -1); /* whatever is left (a failed run, a failed finalize) */
	for (int r = 0; r < n->local; r++) {
		if (n->r[r].scratch || n->r[r].tree || n->r[r].pinned) {
			cudaSetDevice(n->r[r].device);
			cudaFree(n->r[r].scratch);
			cudaFree(n->r[r].tree);
			cudaFreeHost(n->r[r].pinned);
		}
	}
	if (n->mu_ready)
		for (int r = 0; r < n->local; r++)
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
	.reduce_scatter = nccl_reduce_scatter,
	.all_gather = nccl_all_gather,
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

/* The buffers of every rank, for allreduces of up to max_count elements: the device
 * staging of host buffers (8-byte elements, at most PINNED_MAX bytes like the pinned
 * slot they pass through, which bounds what a host buffer may carry), the tree
 * allreduce's slices (float32: the
 * whole vector padded to W slices, and as much again; host buffers of the tree need
 * count x (W + 1) 8-byte elements, which fits for the small counts they carry), and the
 * pinned host slot of host buffers (the tree's W values of each; at most
 * PINNED_MAX bytes: host buffers carry counts and loss sums). */
static int alloc_scratch(struct nccl_coll *n, size_t max_count, struct err *e)
{
	size_t count = max_count ? max_count : 1, w = (size_t)n->world;
	size_t cap = count * 8, tree = 2 * ((count + w - 1) / w * w) * sizeof(float);
	size_t pinned = cap * w < PINNED_MAX ? cap * w : PINNED_MAX;
	size_t staged = cap < PINNED_MAX ? cap : PINNED_MAX;
	if (tree < 8 * (w + 1))
		tree = 8 * (w + 1);
	for (int r = 0; r < n->local; r++) {
		int device = n->r[r].device;
		CU_CHECK(cudaSetDevice(device), n->first + r, device);
		CU_CHECK(cudaMalloc(&n->r[r].scratch, staged), n->first + r, device);
		n->r[r].scratch_cap = staged;
		CU_CHECK(cudaMalloc(&n->r[r].tree, tree), n->first + r, device);
		n->r[r].tree_cap = tree;
		CU_CHECK(cudaHostAlloc(&n->r[r].pinned, pinned, cudaHostAllocDefault), n->first + r,
			 device);
		n->r[r].pinned_cap = pinned;
	}
	return ERR_OK;
}

_Static_assert(sizeof(ncclUniqueId) == GPU_NCCL_ID_BYTES, "GPU_NCCL_ID_BYTES is not NCCL's");

int nccl_unique_id(unsigned char id[GPU_NCCL_ID_BYTES], struct err *e)
{
	ncclUniqueId u;
	keep_sums_repeatable(); /* before NCCL reads its environment */
	ncclResult_t st = ncclGetUniqueId(&u);
	if (st != ncclSuccess)
		return nccl_error(e, __FILE__, __LINE__, st, "ncclGetUniqueId", -1, -1);
	memcpy(id, u.internal, GPU_NCCL_ID_BYTES);
	return ERR_OK;
}

/* This process's GPUs device_ids[0..local), of global ranks first .. first + local - 1:
 * each used once, each visible. */
static int check_devices(int first, int local, const int *device_ids, struct err *e)
{
	int visible = 0;
	for (int r = 0; r < local; r++)
		for (int q = 0; q < r; q++)
			if (device_ids[q] == device_ids[r])
				return ERR(e, ERR_CONFIG,
					   "devices: ranks %d and %d are both on GPU %d; NCCL needs "
					   "one GPU per rank: give each rank its own GPU in "
					   "[devices] ids, or let ranks share a GPU with "
					   "[devices] collective = host", first + q, first + r,
					   device_ids[r]);
	cudaError_t cst = cudaGetDeviceCount(&visible);
	if (cst != cudaSuccess) {
		cudaGetLastError();
		return gpu_cuda_error(e, __FILE__, __LINE__, (int)cst, "cudaGetDeviceCount", -1, -1);
	}
	for (int r = 0; r < local; r++)
		if (device_ids[r] < 0 || device_ids[r] >= visible)
			return ERR(e, ERR_CONFIG, "devices: rank %d: GPU %d does not exist (%d visible)",
				   first + r, device_ids[r], visible);
	return ERR_OK;
}

/* The collective's structures for `local` communicators of a clique of span->world ranks,
 * none created yet (each marked dead until it is). */
static int new_coll(int local, const int *device_ids, const struct nccl_span *span,
		    struct barrier *barrier, struct coll **out, struct err *e)
{
	struct coll *c = calloc(1, sizeof *c);
	struct nccl_coll *n = calloc(1, sizeof *n);
	if (!c || !n) {
		free(c);
		free(n);
		return ERR(e, ERR_NOMEM, "out of memory");
	}
	c->ops = &nccl_coll_ops;
	c->world = local;
	c->barrier = barrier;
	c->impl = n;
	n->world = span->world;
	n->local = local;
	n->first = span->first;
	atomic_store(&n->aborting, 0);
	atomic_store(&n->abort_by, -1);
	for (int r = 0; r < local; r++) {
		pthread_mutex_init(&n->r[r].mu, NULL);
		n->r[r].device = device_ids[r];
		n->r[r].dead = 1; /* until its communicator exists */
		atomic_store(&n->calls[r], 0);
	}
	n->mu_ready = 1;
	*out = c;
	return ERR_OK;
}

/* Starts every local communicator of the clique `id`, non-blocking, in one group (one
 * thread drives several GPUs: NCCL needs the group to create them together). */
static int init_comms(struct nccl_coll *n, const unsigned char *id_bytes, struct err *e)
{
	ncclUniqueId id;
	ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
	int rc = ERR_OK;
	memcpy(id.internal, id_bytes, GPU_NCCL_ID_BYTES);
	config.blocking = 0;
	ncclResult_t st = ncclGroupStart();
	for (int r = 0; r < n->local && st == ncclSuccess; r++) {
		int rank = n->first + r;
		cudaError_t cst = cudaSetDevice(n->r[r].device);
		if (cst != cudaSuccess) {
			rc = gpu_cuda_error(e, __FILE__, __LINE__, (int)cst, "cudaSetDevice", rank,
					    n->r[r].device);
			break;
		}
		st = ncclCommInitRankConfig(&n->r[r].comm, n->world, id, rank, &config);
		if (st == ncclSuccess || st == ncclInProgress) {
			n->r[r].dead = 0;
			st = ncclSuccess;
		} else {
			rc = nccl_error(e, __FILE__, __LINE__, st, "ncclCommInitRankConfig", rank,
					n->r[r].device);
		}
	}
	ncclResult_t g = ncclGroupEnd();
	if (rc != ERR_OK)
		return rc;
	if (g != ncclSuccess && g != ncclInProgress)
		return nccl_error(e, __FILE__, __LINE__, g, "ncclGroupEnd (communicator creation)",
				  n->first, n->r[0].device);
	return ERR_OK;
}

/* Non-blocking creation: waits until every local communicator is ready. Setting up many
 * GPUs (and waiting for the other processes to join) can take a while: the barrier's
 * timeout, but at least two minutes. */
static int wait_ready(struct nccl_coll *n, struct barrier *barrier, struct err *e)
{
	double timeout = barrier && barrier_timeout(barrier) > 0 ? barrier_timeout(barrier) : 0.0;
	if (timeout > 0 && timeout < 120.0)
		timeout = 120.0;
	double t0 = clock_now_s();
	for (int r = 0; r < n->local; r++) {
		int rank = n->first + r, device = n->r[r].device;
		for (double started = clock_now_s();;) {
			ncclResult_t state = ncclInProgress;
			ncclResult_t st = ncclCommGetAsyncError(n->r[r].comm, &state);
			if (st != ncclSuccess || (state != ncclSuccess && state != ncclInProgress))
				return nccl_error(e, __FILE__, __LINE__, st != ncclSuccess ? st : state,
						  "ncclCommInitRankConfig (asynchronous)", rank, device);
			if (state == ncclSuccess)
				break;
			if (timeout > 0 && clock_now_s() - t0 > timeout)
				return ERR(e, ERR_DEVICE, "rank %d device %d: NCCL communicator not ready "
					   "after %.1f s (devices.timeout)%s", rank, device, timeout,
					   n->local < n->world ? ": another process did not join" : "");
			pause_poll(started);
		}
	}
	return ERR_OK;
}

int nccl_coll_create_span(int local, const int *device_ids, const struct nccl_span *span,
			  struct barrier *barrier, size_t max_count, struct coll **out,
			  struct err *e)
{
	struct coll *c = NULL;
	struct nccl_span one = {local, 0, {0}};
	int cur = -1, rc;
	*out = NULL;
	if (local < 1 || local > MAX_WORLD)
		return ERR(e, ERR_CONFIG, "devices: NCCL collective over %d ranks (1..%d)", local,
			   MAX_WORLD);
	if (span && (span->world > MAX_WORLD || span->first < 0 ||
		     span->first + local > span->world))
		return ERR(e, ERR_CONFIG, "devices: ranks %d..%d of an NCCL collective over %d "
			   "(at most %d)", span->first, span->first + local - 1, span->world,
			   MAX_WORLD);
	ERR_TRY(check_devices(span ? span->first : 0, local, device_ids, e));
	if (!span) { /* one process: its own clique */
		ERR_TRY(nccl_unique_id(one.id, e));
		span = &one;
	}
	keep_sums_repeatable();
	ERR_TRY(new_coll(local, device_ids, span, barrier, &c, e));
	struct nccl_coll *n = c->impl;
	cudaGetDevice(&cur);
	if ((rc = alloc_scratch(n, max_count, e)) == ERR_OK &&
	    (rc = init_comms(n, span->id, e)) == ERR_OK)
		rc = wait_ready(n, barrier, e);
	if (rc != ERR_OK) {
		atomic_store(&n->aborting, 1); /* destroy aborts what was created */
		nccl_destroy(c);
		c = NULL;
	}
	if (cur >= 0)
		cudaSetDevice(cur);
	*out = c;
	return rc;
}

int nccl_coll_create(int world, const int *device_ids, struct barrier *barrier,
		     size_t max_count, struct coll **out, struct err *e)
{
	return nccl_coll_create_span(world, device_ids, NULL, barrier, max_count, out, e);
}
