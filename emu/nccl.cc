/*
 * nccl: the emulated device's NCCL (see nccl.h), for the ranks of one process.
 *
 * A unique id names a clique; each ncclCommInitRank(Config) joins it as one rank on the
 * calling thread's current device, and a communicator is ready (ncclCommGetAsyncError
 * answers ncclSuccess instead of ncclInProgress) once every rank joined. Every call is
 * checked: the communicator alive, on the calling thread's current device and on the
 * stream's device, its buffers within allocations of that device. The work goes to the
 * stream and runs on its worker in order:
 *   collectives  (all-reduce, all-gather, reduce-scatter) are matched across ranks by
 *                their sequence number on the communicator: when every rank's call at
 *                one position has arrived, they must agree in operation, count, type
 *                and reduction, or every rank fails (ncclInvalidUsage, asynchronously)
 *                with a message naming both calls; reductions add in rank order
 *   send/recv    matched per (sender, receiver) in order, count and type checked; a
 *                group's sends are all posted before its receives wait
 *   groups       calls between ncclGroupStart and ncclGroupEnd are queued at the end
 * A rank that never arrives leaves its peers waiting, as on GPUs: the backend's timeout
 * sees it. After a failure the work stays blocked, as NCCL's kernels do, until the
 * communicator is aborted; ncclCommAbort wakes every waiter of the clique.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "emu.h"
#include "nccl.h"

#define COMM_MAGIC 0x6e63636cu

namespace {

/* one call, as the matching compares it */
struct call {
	const char *op = nullptr; /* ncclAllReduce, ... */
	size_t count = 0;
	ncclDataType_t type = ncclFloat32;
	ncclRedOp_t red = ncclSum;
	const void *send = nullptr;
	void *recv = nullptr;
};

struct rendezvous {
	std::vector<call> calls;
	int arrived = 0, left = 0;
	bool done = false, failed = false;
};

struct post { /* a send waiting for its receive */
	const void *buf;
	size_t count;
	ncclDataType_t type;
	bool consumed;
};

struct clique {
	int nranks;
	int joined = 0;
	bool aborted = false;
	std::vector<ncclComm_t> comms;
	std::map<unsigned long long, rendezvous> colls;
	std::map<std::pair<int, int>, std::deque<post *>> p2p;
};

std::mutex g_mu; /* every clique's state */
std::condition_variable g_cv;
std::map<std::string, clique *> g_cliques;
std::string g_last; /* the last asynchronous error, for ncclGetLastError */
thread_local std::string t_last;
thread_local int t_group;
thread_local std::vector<std::function<void()>> t_grouped; /* queued at ncclGroupEnd */

} // namespace

struct ncclComm {
	uint32_t magic;
	clique *c;
	int rank, device;
	bool dead, aborted;
	unsigned long long seq; /* collectives issued */
	std::atomic<int> async;
};

namespace {

ncclResult_t fail(ncclResult_t st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
ncclResult_t fail(ncclResult_t st, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	t_last = msg;
	emu::report("nccl: %s", msg);
	return st;
}

size_t type_size(ncclDataType_t t)
{
	switch (t) {
	case ncclInt8: case ncclUint8: return 1;
	case ncclFloat16: return 2;
	case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
	default: return 8;
	}
}

const char *type_name(ncclDataType_t t)
{
	static const char *names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
				      "float16", "float32", "float64"};
	return t >= 0 && t <= ncclFloat64 ? names[t] : "?";
}

const char *red_name(ncclRedOp_t r)
{
	static const char *names[] = {"sum", "prod", "max", "min", "avg"};
	return r >= 0 && r <= ncclAvg ? names[r] : "?";
}

std::string describe(const call &k)
{
	char s[160];
	if (strcmp(k.op, "ncclAllGather") == 0)
		snprintf(s, sizeof s, "%s(count %zu, %s)", k.op, k.count, type_name(k.type));
	else
		snprintf(s, sizeof s, "%s(count %zu, %s, %s)", k.op, k.count, type_name(k.type),
			 red_name(k.red));
	return s;
}

/* The checks of every call: a live communicator on the thread's device and the stream's. */
ncclResult_t usable(const char *op, ncclComm_t comm, cudaStream_t stream)
{
	if (!comm || comm->magic != COMM_MAGIC)
		return fail(ncclInvalidArgument, "%s: not a communicator", op);
	if (comm->dead)
		return fail(ncclInvalidUsage, "%s: rank %d's communicator was %s", op, comm->rank,
			    comm->aborted ? "aborted" : "destroyed");
	if (emu::current_device() != comm->device)
		return fail(ncclInvalidUsage, "%s: rank %d's communicator is on device %d, the "
			    "calling thread's current device is %d (a communicator used from "
			    "another device's thread)", op, comm->rank, comm->device,
			    emu::current_device());
	int sd = emu::stream_device(stream);
	if (sd != comm->device)
		return fail(ncclInvalidUsage, "%s: rank %d's communicator is on device %d, the "
			    "stream on device %d", op, comm->rank, comm->device, sd);
	if (comm->async.load() == ncclInProgress) {
		std::lock_guard<std::mutex> lock(g_mu);
		if (comm->c->joined < comm->c->nranks)
			return fail(ncclInvalidUsage, "%s: rank %d's communicator is not ready "
				    "(ncclInProgress: not every rank joined)", op, comm->rank);
		comm->async = ncclSuccess;
	}
	return ncclSuccess;
}

ncclResult_t buffer(const char *op, const char *what, const void *p, size_t bytes,
		    ncclComm_t comm)
{
	if (bytes == 0)
		return ncclSuccess;
	if (emu::check_range(op, what, p, bytes, comm->device) != cudaSuccess)
		return fail(ncclInvalidArgument, "%s: rank %d: %s is not %zu bytes of device %d's "
			    "memory", op, comm->rank, what, bytes, comm->device);
	return ncclSuccess;
}

/* Queues fn on the stream now, or at ncclGroupEnd inside a group. */
void issue(cudaStream_t stream, std::function<void()> fn)
{
	if (t_group > 0)
		t_grouped.push_back([=] { emu::enqueue(stream, fn); });
	else
		emu::enqueue(stream, fn);
}

/* Blocks (lock held) until the communicator is aborted: what NCCL's kernels do after a
 * failure. */
void hang_until_abort(std::unique_lock<std::mutex> &lock, ncclComm_t comm)
{
	g_cv.wait(lock, [&] { return comm->aborted; });
}

template <typename T> void reduce_into(T *acc, const T *x, size_t n, ncclRedOp_t red)
{
	for (size_t i = 0; i < n; i++)
		acc[i] = red == ncclProd ? acc[i] * x[i]
			 : red == ncclMax ? (x[i] > acc[i] ? x[i] : acc[i])
			 : red == ncclMin ? (x[i] < acc[i] ? x[i] : acc[i])
					  : acc[i] + x[i];
}

template <typename T> void reduce_all(rendezvous &rv, size_t n, ncclRedOp_t red, T *out)
{
	memcpy(out, rv.calls[0].send, n * sizeof(T));
	for (size_t q = 1; q < rv.calls.size(); q++)
		reduce_into(out, (const T *)rv.calls[q].send, n, red);
	if (red == ncclAvg)
		for (size_t i = 0; i < n; i++)
			out[i] = out[i] / (T)rv.calls.size();
}

void reduce_typed(rendezvous &rv, size_t n, ncclDataType_t t, ncclRedOp_t red, void *out)
{
	switch (t) {
	case ncclFloat32: return reduce_all(rv, n, red, (float *)out);
	case ncclFloat64: return reduce_all(rv, n, red, (double *)out);
	case ncclInt32: return reduce_all(rv, n, red, (int32_t *)out);
	case ncclUint32: return reduce_all(rv, n, red, (uint32_t *)out);
	case ncclInt64: return reduce_all(rv, n, red, (int64_t *)out);
	case ncclUint64: return reduce_all(rv, n, red, (uint64_t *)out);
	default: return reduce_all(rv, n, red, (uint8_t *)out);
	}
}

/* Every rank's call at one position arrived: the result into every rank's buffer. */
void complete(rendezvous &rv)
{
	const call &k = rv.calls[0];
	size_t w = rv.calls.size(), es = type_size(k.type);
	if (strcmp(k.op, "ncclAllGather") == 0) {
		std::vector<char> all(w * k.count * es);
		for (size_t q = 0; q < w; q++)
			memcpy(all.data() + q * k.count * es, rv.calls[q].send, k.count * es);
		for (size_t q = 0; q < w; q++)
			memcpy(rv.calls[q].recv, all.data(), all.size());
		return;
	}
	bool scatter = strcmp(k.op, "ncclReduceScatter") == 0;
	size_t n = scatter ? k.count * w : k.count;
	std::vector<char> out(n * es);
	reduce_typed(rv, n, k.type, k.red, out.data());
	for (size_t q = 0; q < w; q++)
		memcpy(rv.calls[q].recv, out.data() + (scatter ? q * k.count * es : 0),
		       k.count * es);
}

/* The first rank whose call differs from rank 0's, or -1. */
int mismatch(const rendezvous &rv)
{
	const call &a = rv.calls[0];
	for (size_t q = 1; q < rv.calls.size(); q++) {
		const call &b = rv.calls[q];
		if (strcmp(a.op, b.op) != 0 || a.count != b.count || a.type != b.type ||
		    (strcmp(a.op, "ncclAllGather") != 0 && a.red != b.red))
			return (int)q;
	}
	return -1;
}

/* A collective on the stream's worker: waits for every rank's call at position seq. */
void run_collective(ncclComm_t comm, unsigned long long seq, call k)
{
	clique *c = comm->c;
	std::unique_lock<std::mutex> lock(g_mu);
	rendezvous &rv = c->colls[seq];
	if (rv.calls.empty())
		rv.calls.resize(c->nranks);
	rv.calls[comm->rank] = k;
	if (++rv.arrived == c->nranks) {
		int q = mismatch(rv);
		if (q >= 0) {
			char msg[512];
			snprintf(msg, sizeof msg, "collectives out of step: call #%llu is %s on rank "
				 "0 but %s on rank %d", seq + 1, describe(rv.calls[0]).c_str(),
				 describe(rv.calls[q]).c_str(), q);
			g_last = msg;
			emu::report("nccl: %s", msg);
			rv.failed = true;
			for (ncclComm_t p : c->comms)
				if (p)
					p->async = ncclInvalidUsage;
		} else {
			complete(rv);
		}
		rv.done = true;
		g_cv.notify_all();
	}
	g_cv.wait(lock, [&] { return rv.done || c->aborted; });
	bool failed = !rv.done || rv.failed;
	if (++rv.left == c->nranks)
		c->colls.erase(seq);
	if (failed)
		hang_until_abort(lock, comm);
}

struct p2p_op {
	bool send;
	int peer;
	const void *sbuf;
	void *rbuf;
	size_t count;
	ncclDataType_t type;
};

/* A group's sends and receives of one rank on the stream's worker. */
void run_p2p(ncclComm_t comm, std::vector<p2p_op> ops)
{
	clique *c = comm->c;
	std::vector<post *> mine;
	std::unique_lock<std::mutex> lock(g_mu);
	for (const p2p_op &o : ops)
		if (o.send) {
			post *p = new post{o.sbuf, o.count, o.type, false};
			c->p2p[{comm->rank, o.peer}].push_back(p);
			mine.push_back(p);
		}
	g_cv.notify_all();
	for (const p2p_op &o : ops) {
		if (o.send)
			continue;
		auto &q = c->p2p[{o.peer, comm->rank}];
		g_cv.wait(lock, [&] { return !q.empty() || c->aborted; });
		if (c->aborted)
			return hang_until_abort(lock, comm);
		post *p = q.front();
		q.pop_front();
		if (p->count != o.count || p->type != o.type) {
			char msg[300];
			snprintf(msg, sizeof msg, "send/recv out of step: rank %d sends %zu %s to rank "
				 "%d, which receives %zu %s", o.peer, p->count, type_name(p->type),
				 comm->rank, o.count, type_name(o.type));
			g_last = msg;
			emu::report("nccl: %s", msg);
			for (ncclComm_t x : c->comms)
				if (x)
					x->async = ncclInvalidUsage;
			c->aborted = true;
			g_cv.notify_all();
			return hang_until_abort(lock, comm);
		}
		memcpy(o.rbuf, p->buf, o.count * type_size(o.type));
		p->consumed = true;
		g_cv.notify_all();
	}
	for (post *p : mine) {
		g_cv.wait(lock, [&] { return p->consumed || c->aborted; });
		if (!p->consumed)
			return hang_until_abort(lock, comm);
	}
	for (post *p : mine)
		delete p;
}

thread_local std::map<std::pair<ncclComm_t, cudaStream_t>, std::vector<p2p_op>> t_p2p;

ncclResult_t collective(const char *op, const void *send, void *recv, size_t count,
			size_t send_bytes, size_t recv_bytes, ncclDataType_t type, ncclRedOp_t red,
			ncclComm_t comm, cudaStream_t stream)
{
	ncclResult_t st;
	if ((st = usable(op, comm, stream)) != ncclSuccess)
		return st;
	if (type < 0 || type > ncclFloat64 || red < 0 || red > ncclAvg)
		return fail(ncclInvalidArgument, "%s: invalid data type %d or reduction %d", op,
			    (int)type, (int)red);
	if ((st = buffer(op, "sendbuff", send, send_bytes, comm)) != ncclSuccess ||
	    (st = buffer(op, "recvbuff", recv, recv_bytes, comm)) != ncclSuccess)
		return st;
	call k;
	k.op = op;
	k.count = count;
	k.type = type;
	k.red = red;
	k.send = send;
	k.recv = recv;
	unsigned long long seq = comm->seq++;
	issue(stream, [=] { run_collective(comm, seq, k); });
	return ncclSuccess;
}

ncclResult_t point_to_point(bool send, const void *sbuf, void *rbuf, size_t count,
			    ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream)
{
	const char *op = send ? "ncclSend" : "ncclRecv";
	ncclResult_t st;
	if ((st = usable(op, comm, stream)) != ncclSuccess)
		return st;
	if (peer < 0 || peer >= comm->c->nranks)
		return fail(ncclInvalidArgument, "%s: peer %d outside 0..%d", op, peer,
			    comm->c->nranks - 1);
	if ((st = buffer(op, send ? "sendbuff" : "recvbuff", send ? sbuf : rbuf,
			 count * type_size(type), comm)) != ncclSuccess)
		return st;
	p2p_op o{send, peer, sbuf, rbuf, count, type};
	if (t_group > 0) {
		t_p2p[{comm, stream}].push_back(o);
		return ncclSuccess;
	}
	std::vector<p2p_op> one{o};
	emu::enqueue(stream, [=] { run_p2p(comm, one); });
	return ncclSuccess;
}

ncclResult_t join(ncclComm_t *out, int nranks, const ncclUniqueId &id, int rank, bool blocking)
{
	if (!out || nranks < 1 || rank < 0 || rank >= nranks)
		return fail(ncclInvalidArgument, "ncclCommInitRank: rank %d of %d", rank, nranks);
	if (memcmp(id.internal, "EMUNCCL", 7) != 0)
		return fail(ncclInvalidArgument, "ncclCommInitRank: not a unique id of the emulator");
	int dev = emu::current_device();
	if (dev >= emu::device_count())
		return fail(ncclUnhandledCudaError, "ncclCommInitRank: no device %d", dev);
	std::string key(id.internal, sizeof id.internal);
	std::unique_lock<std::mutex> lock(g_mu);
	clique *&c = g_cliques[key];
	if (!c) {
		c = new clique();
		c->nranks = nranks;
		c->comms.assign(nranks, nullptr);
	}
	if (c->nranks != nranks || c->comms[rank])
		return fail(ncclInvalidUsage, "ncclCommInitRank: rank %d of %d joins a clique of %d "
			    "ranks%s", rank, nranks, c->nranks, c->comms[rank] ? " twice" : "");
	for (ncclComm_t p : c->comms)
		if (p && p->device == dev)
			return fail(ncclInvalidUsage, "ncclCommInitRank: ranks %d and %d both on "
				    "device %d", p->rank, rank, dev);
	ncclComm_t comm = new ncclComm();
	comm->magic = COMM_MAGIC;
	comm->c = c;
	comm->rank = rank;
	comm->device = dev;
	comm->async = ncclInProgress;
	c->comms[rank] = comm;
	c->joined++;
	g_cv.notify_all();
	*out = comm;
	if (blocking && t_group == 0) {
		g_cv.wait(lock, [&] { return c->joined == c->nranks; });
		comm->async = ncclSuccess;
	}
	return ncclSuccess;
}

} // namespace

extern "C" {

ncclResult_t ncclGetVersion(int *version)
{
	*version = NCCL_VERSION_CODE;
	return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
	static std::atomic<unsigned> counter;
	memset(id->internal, 0, sizeof id->internal);
	snprintf(id->internal, sizeof id->internal, "EMUNCCL %d %u", (int)getpid(),
		 counter.fetch_add(1));
	return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
				    ncclConfig_t *config)
{
	return join(comm, nranks, id, rank, !config || config->blocking != 0);
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
	return join(comm, nranks, id, rank, true);
}

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
	ncclUniqueId id;
	int cur = emu::current_device();
	ncclGetUniqueId(&id);
	ncclGroupStart();
	for (int i = 0; i < ndev; i++) {
		cudaSetDevice(devlist ? devlist[i] : i);
		ncclResult_t st = join(&comms[i], ndev, id, i, false);
		if (st != ncclSuccess) {
			ncclGroupEnd();
			return st;
		}
	}
	cudaSetDevice(cur);
	return ncclGroupEnd();
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error)
{
	if (!comm || comm->magic != COMM_MAGIC || comm->dead)
		return fail(ncclInvalidUsage, "ncclCommGetAsyncError: not a live communicator");
	std::lock_guard<std::mutex> lock(g_mu);
	if (comm->async.load() == ncclInProgress && comm->c->joined == comm->c->nranks)
		comm->async = ncclSuccess;
	*async_error = (ncclResult_t)comm->async.load();
	return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
	if (!comm || comm->magic != COMM_MAGIC || comm->dead)
		return fail(ncclInvalidUsage, "ncclCommFinalize: not a live communicator");
	return ncclSuccess;
}

/* The communicator is never used again; its memory is kept so that a later use is
 * recognized as one. */
static ncclResult_t retire(const char *op, ncclComm_t comm, bool abort)
{
	if (!comm || comm->magic != COMM_MAGIC)
		return fail(ncclInvalidArgument, "%s: not a communicator", op);
	std::lock_guard<std::mutex> lock(g_mu);
	if (comm->dead)
		return abort ? ncclSuccess : fail(ncclInvalidUsage, "%s: rank %d's communicator "
						  "is already gone", op, comm->rank);
	comm->dead = true;
	comm->aborted = abort;
	if (abort) {
		comm->c->aborted = true;
		for (ncclComm_t p : comm->c->comms)
			if (p && !p->dead && p->async.load() == ncclSuccess)
				p->async = ncclRemoteError;
	}
	g_cv.notify_all();
	return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) { return retire("ncclCommDestroy", comm, false); }
ncclResult_t ncclCommAbort(ncclComm_t comm) { return retire("ncclCommAbort", comm, true); }

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
	*count = comm->c->nranks;
	return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
	*rank = comm->rank;
	return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
	*device = comm->device;
	return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result)
{
	switch (result) {
	case ncclSuccess: return "no error";
	case ncclUnhandledCudaError: return "unhandled cuda error";
	case ncclSystemError: return "unhandled system error";
	case ncclInternalError: return "internal error";
	case ncclInvalidArgument: return "invalid argument";
	case ncclInvalidUsage: return "invalid usage";
	case ncclRemoteError: return "remote process exited or there was a network error";
	case ncclInProgress: return "NCCL operation in progress";
	default: return "unknown result code";
	}
}

const char *ncclGetLastError(ncclComm_t comm)
{
	if (!t_last.empty())
		return t_last.c_str();
	static thread_local std::string copy;
	std::lock_guard<std::mutex> lock(g_mu);
	copy = g_last;
	return copy.c_str();
}

ncclResult_t ncclGroupStart(void)
{
	t_group++;
	return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
	if (t_group == 0)
		return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
	if (--t_group > 0)
		return ncclSuccess;
	for (auto &fn : t_grouped)
		fn();
	t_grouped.clear();
	for (auto &[key, ops] : t_p2p) {
		ncclComm_t comm = key.first;
		std::vector<p2p_op> batch = ops;
		emu::enqueue(key.second, [=] { run_p2p(comm, batch); });
	}
	t_p2p.clear();
	return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
			   ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
			   cudaStream_t stream)
{
	size_t bytes = count * type_size(datatype);
	return collective("ncclAllReduce", sendbuff, recvbuff, count, bytes, bytes, datatype, op,
			  comm, stream);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
			   ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	size_t bytes = sendcount * type_size(datatype);
	size_t w = comm && comm->magic == COMM_MAGIC ? comm->c->nranks : 1;
	return collective("ncclAllGather", sendbuff, recvbuff, sendcount, bytes, bytes * w,
			  datatype, ncclSum, comm, stream);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
			       ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
			       cudaStream_t stream)
{
	size_t bytes = recvcount * type_size(datatype);
	size_t w = comm && comm->magic == COMM_MAGIC ? comm->c->nranks : 1;
	return collective("ncclReduceScatter", sendbuff, recvbuff, recvcount, bytes * w, bytes,
			  datatype, op, comm, stream);
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
		      ncclComm_t comm, cudaStream_t stream)
{
	return point_to_point(true, sendbuff, nullptr, count, datatype, peer, comm, stream);
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
		      ncclComm_t comm, cudaStream_t stream)
{
	return point_to_point(false, nullptr, recvbuff, count, datatype, peer, comm, stream);
}

} /* extern "C" */
