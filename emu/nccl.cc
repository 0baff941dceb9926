/*
 * nccl: the emulated device's NCCL (see nccl.h), within a process and across processes.
 *
 * A unique id names a clique: a shared-memory file (shm_open) that every rank maps, in
 * whichever process it runs. Each ncclCommInitRank(Config) joins it as one rank on the
 * calling thread's current device; a communicator is ready (ncclCommGetAsyncError says
 * ncclSuccess instead of ncclInProgress) once every rank joined. Every call is checked:
 * the communicator alive, on the calling thread's current device and on the stream's
 * device, its buffers within allocations of that device. The work goes to the stream and
 * runs on its worker, in order:
 *   collectives  (all-reduce, all-gather, reduce-scatter) are matched across ranks by
 *                their position on the communicator: each rank posts its call and its
 *                data into its area of the clique; when every rank's call at one
 *                position is there they must agree in operation, count, type and
 *                reduction, or every rank fails (ncclInvalidUsage, asynchronously) with
 *                a message naming both calls; reductions add in rank order, so every rank
 *                gets the same bits
 *   send/recv    through a mailbox per (sender, receiver), in order, count and type
 *                checked; a group's sends are all posted before its receives wait
 *   groups       calls between ncclGroupStart and ncclGroupEnd are queued at the end
 * A rank that never arrives leaves its peers waiting, as on GPUs: the backend's timeout
 * sees it. After a failure the work stays blocked, as NCCL's kernels do, until the
 * communicator is aborted; ncclCommAbort releases every waiter of the clique, in every
 * process.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "emu.h"
#include "nccl.h"

#define COMM_MAGIC 0x6e63636cu
#define MAX_RANKS 64
#define AREA ((size_t)256 << 20) /* a rank's collective data, at most */
#define MAILBOX ((size_t)64 << 20) /* one (sender, receiver) message, at most */

namespace {

enum op_code { OP_NONE, OP_ALLREDUCE, OP_ALLGATHER, OP_REDUCE_SCATTER };

struct posted_call { /* one rank's collective at one position */
	int op;
	int type, red;
	uint64_t count;
};

struct rank_slot {
	std::atomic<uint64_t> posted, done; /* collectives posted / finished reading */
	posted_call call;
	int pid, device;
};

struct mailbox {
	std::atomic<uint64_t> sent, taken;
	uint64_t count;
	int type;
};

/* The shared clique: header, rank slots, mailboxes; then the data areas. */
struct shared_clique {
	std::atomic<int> nranks;
	std::atomic<uint64_t> joined; /* bit per rank */
	std::atomic<int> aborted, failed;
	char error[512];
	rank_slot slot[MAX_RANKS];
	mailbox box[MAX_RANKS][MAX_RANKS];
};

size_t clique_bytes(int nranks)
{
	return sizeof(shared_clique) + (size_t)nranks * AREA + (size_t)nranks * nranks * MAILBOX;
}

thread_local std::string t_last;
std::mutex g_mu;
std::string g_last; /* the last asynchronous error, for ncclGetLastError */
thread_local int t_group;
thread_local std::vector<std::function<void()>> t_grouped; /* queued at ncclGroupEnd */

} // namespace

struct ncclComm {
	uint32_t magic;
	shared_clique *c;
	char *base; /* the mapping */
	size_t bytes;
	std::string name; /* the clique's shared-memory name */
	int nranks, rank, device;
	std::atomic<bool> dead, aborted;
	uint64_t seq; /* collectives issued */
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

size_t type_size(int t)
{
	switch (t) {
	case ncclInt8: case ncclUint8: return 1;
	case ncclFloat16: return 2;
	case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
	default: return 8;
	}
}

const char *type_name(int t)
{
	static const char *names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
				      "float16", "float32", "float64"};
	return t >= 0 && t <= ncclFloat64 ? names[t] : "?";
}

std::string describe(const posted_call &k)
{
	static const char *ops[] = {"?", "ncclAllReduce", "ncclAllGather", "ncclReduceScatter"};
	static const char *reds[] = {"sum", "prod", "max", "min", "avg"};
	char s[160];
	if (k.op == OP_ALLGATHER)
		snprintf(s, sizeof s, "%s(count %llu, %s)", ops[k.op], (unsigned long long)k.count,
			 type_name(k.type));
	else
		snprintf(s, sizeof s, "%s(count %llu, %s, %s)", ops[k.op],
			 (unsigned long long)k.count, type_name(k.type),
			 k.red >= 0 && k.red <= ncclAvg ? reds[k.red] : "?");
	return s;
}

char *area(ncclComm_t comm, int rank)
{
	return comm->base + sizeof(shared_clique) + (size_t)rank * AREA;
}

char *mail(ncclComm_t comm, int from, int to)
{
	return comm->base + sizeof(shared_clique) + (size_t)comm->nranks * AREA +
	       ((size_t)from * comm->nranks + to) * MAILBOX;
}

/* Polls until done() holds; false when the clique was aborted or failed first. */
template <typename F> bool wait_for(ncclComm_t comm, F done)
{
	for (int spins = 0;; spins++) {
		if (done())
			return true;
		if (comm->c->aborted.load() || comm->c->failed.load())
			return false;
		struct timespec ts = {0, spins < 100 ? 1000 : 200000};
		nanosleep(&ts, nullptr);
	}
}

/* After a failure: the work blocks, as NCCL's kernels do, until this rank is aborted. */
void hang_until_abort(ncclComm_t comm)
{
	if (comm->c->failed.load())
		comm->async = ncclInvalidUsage;
	else if (!comm->aborted.load())
		comm->async = ncclRemoteError;
	while (!comm->aborted.load()) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, nullptr);
	}
}

/* Every rank learns of a failure through the clique; the first message is kept. */
void clique_fail(ncclComm_t comm, const std::string &msg)
{
	int none = 0;
	if (comm->c->failed.compare_exchange_strong(none, 1)) {
		snprintf(comm->c->error, sizeof comm->c->error, "%s", msg.c_str());
		emu::report("nccl: %s", msg.c_str());
	}
	std::lock_guard<std::mutex> lock(g_mu);
	g_last = comm->c->error;
}

template <typename T> void reduce_rank_order(ncclComm_t comm, size_t first, size_t n, int red,
					     T *out)
{
	memcpy(out, (const T *)area(comm, 0) + first, n * sizeof(T));
	for (int q = 1; q < comm->nranks; q++) {
		const T *x = (const T *)area(comm, q) + first;
		for (size_t i = 0; i < n; i++)
			out[i] = red == ncclProd  ? out[i] * x[i]
				 : red == ncclMax ? (x[i] > out[i] ? x[i] : out[i])
				 : red == ncclMin ? (x[i] < out[i] ? x[i] : out[i])
						  : out[i] + x[i];
	}
	if (red == ncclAvg)
		for (size_t i = 0; i < n; i++)
			out[i] = out[i] / (T)comm->nranks;
}

void reduce_typed(ncclComm_t comm, size_t first, size_t n, int type, int red, void *out)
{
	switch (type) {
	case ncclFloat32: return reduce_rank_order(comm, first, n, red, (float *)out);
	case ncclFloat64: return reduce_rank_order(comm, first, n, red, (double *)out);
	case ncclInt32: return reduce_rank_order(comm, first, n, red, (int32_t *)out);
	case ncclUint32: return reduce_rank_order(comm, first, n, red, (uint32_t *)out);
	case ncclInt64: return reduce_rank_order(comm, first, n, red, (int64_t *)out);
	case ncclUint64: return reduce_rank_order(comm, first, n, red, (uint64_t *)out);
	default: return reduce_rank_order(comm, first, n, red, (uint8_t *)out);
	}
}

/* The first rank whose call differs from rank 0's, or -1. */
int mismatch(ncclComm_t comm)
{
	const posted_call &a = comm->c->slot[0].call;
	for (int q = 1; q < comm->nranks; q++) {
		const posted_call &b = comm->c->slot[q].call;
		if (a.op != b.op || a.count != b.count || a.type != b.type ||
		    (a.op != OP_ALLGATHER && a.red != b.red))
			return q;
	}
	return -1;
}

/* Whether every rank's counter `field` reached v. */
bool all_reached(ncclComm_t comm, std::atomic<uint64_t> rank_slot::*field, uint64_t v)
{
	for (int q = 0; q < comm->nranks; q++)
		if ((comm->c->slot[q].*field).load() < v)
			return false;
	return true;
}

/* A collective on the stream's worker (see the top). */
void run_collective(ncclComm_t comm, uint64_t seq, posted_call k, const void *send, void *recv)
{
	shared_clique *c = comm->c;
	size_t es = type_size(k.type), w = comm->nranks;
	size_t in = k.op == OP_REDUCE_SCATTER ? k.count * w : k.count;
	memcpy(area(comm, comm->rank), send, in * es);
	c->slot[comm->rank].call = k;
	c->slot[comm->rank].posted.store(seq + 1);
	if (!wait_for(comm, [&] { return all_reached(comm, &rank_slot::posted, seq + 1); }))
		return hang_until_abort(comm);
	int q = mismatch(comm);
	if (q >= 0) {
		clique_fail(comm, "collectives out of step: call #" + std::to_string(seq + 1) + " is " +
					  describe(c->slot[0].call) + " on rank 0 but " +
					  describe(c->slot[q].call) + " on rank " + std::to_string(q));
		return hang_until_abort(comm);
	}
	if (k.op == OP_ALLGATHER) {
		for (size_t r = 0; r < w; r++)
			memcpy((char *)recv + r * k.count * es, area(comm, (int)r), k.count * es);
	} else {
		size_t first = k.op == OP_REDUCE_SCATTER ? comm->rank * k.count : 0;
		reduce_typed(comm, first, k.count, k.type, k.red, recv);
	}
	c->slot[comm->rank].done.store(seq + 1);
	/* nobody posts the next call's data over this one's before every rank read it */
	if (!wait_for(comm, [&] { return all_reached(comm, &rank_slot::done, seq + 1); }))
		return hang_until_abort(comm);
}

struct p2p_op {
	bool send;
	int peer;
	const void *sbuf;
	void *rbuf;
	size_t count;
	int type;
};

/* A group's sends and receives of one rank on the stream's worker. */
void run_p2p(ncclComm_t comm, std::vector<p2p_op> ops)
{
	for (const p2p_op &o : ops) {
		if (!o.send)
			continue;
		mailbox &b = comm->c->box[comm->rank][o.peer];
		if (!wait_for(comm, [&] { return b.taken.load() == b.sent.load(); }))
			return hang_until_abort(comm);
		memcpy(mail(comm, comm->rank, o.peer), o.sbuf, o.count * type_size(o.type));
		b.count = o.count;
		b.type = o.type;
		b.sent.fetch_add(1);
	}
	for (const p2p_op &o : ops) {
		if (o.send)
			continue;
		mailbox &b = comm->c->box[o.peer][comm->rank];
		if (!wait_for(comm, [&] { return b.sent.load() > b.taken.load(); }))
			return hang_until_abort(comm);
		if (b.count != o.count || b.type != o.type) {
			char msg[300];
			snprintf(msg, sizeof msg, "send/recv out of step: rank %d sends %llu %s to "
				 "rank %d, which receives %zu %s", o.peer, (unsigned long long)b.count,
				 type_name(b.type), comm->rank, o.count, type_name(o.type));
			clique_fail(comm, msg);
			return hang_until_abort(comm);
		}
		memcpy(o.rbuf, mail(comm, o.peer, comm->rank), o.count * type_size(o.type));
		b.taken.fetch_add(1);
	}
}

/* The checks of every call: a live communicator on the thread's device and the stream's. */
ncclResult_t usable(const char *op, ncclComm_t comm, cudaStream_t stream)
{
	if (!comm || comm->magic != COMM_MAGIC)
		return fail(ncclInvalidArgument, "%s: not a communicator", op);
	if (comm->dead.load())
		return fail(ncclInvalidUsage, "%s: rank %d's communicator was %s", op, comm->rank,
			    comm->aborted.load() ? "aborted" : "destroyed");
	if (emu::current_device() != comm->device)
		return fail(ncclInvalidUsage, "%s: rank %d's communicator is on device %d, the "
			    "calling thread's current device is %d (a communicator used from "
			    "another device's thread)", op, comm->rank, comm->device,
			    emu::current_device());
	int sd = emu::stream_device(stream);
	if (sd != comm->device)
		return fail(ncclInvalidUsage, "%s: rank %d's communicator is on device %d, the "
			    "stream on device %d", op, comm->rank, comm->device, sd);
	if (__builtin_popcountll(comm->c->joined.load()) < comm->nranks)
		return fail(ncclInvalidUsage, "%s: rank %d's communicator is not ready "
			    "(ncclInProgress: not every rank joined)", op, comm->rank);
	return ncclSuccess;
}

ncclResult_t buffer(const char *op, const char *what, const void *p, size_t bytes,
		    ncclComm_t comm, size_t limit)
{
	if (bytes > limit)
		return fail(ncclInvalidArgument, "%s: rank %d: %zu bytes exceed the emulator's %zu",
			    op, comm->rank, bytes, limit);
	if (bytes && emu::check_range(op, what, p, bytes, comm->device) != cudaSuccess)
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

ncclResult_t collective(const char *name, int op, const void *send, void *recv, size_t count,
			ncclDataType_t type, ncclRedOp_t red, ncclComm_t comm, cudaStream_t stream)
{
	ncclResult_t st;
	if ((st = usable(name, comm, stream)) != ncclSuccess)
		return st;
	if (type < 0 || type > ncclFloat64 || red < 0 || red > ncclAvg)
		return fail(ncclInvalidArgument, "%s: invalid data type %d or reduction %d", name,
			    (int)type, (int)red);
	size_t bytes = count * type_size(type), w = comm->nranks;
	size_t in = op == OP_REDUCE_SCATTER ? bytes * w : bytes;
	size_t out = op == OP_ALLGATHER ? bytes * w : bytes;
	if ((st = buffer(name, "sendbuff", send, in, comm, AREA)) != ncclSuccess ||
	    (st = buffer(name, "recvbuff", recv, out, comm, AREA * w)) != ncclSuccess)
		return st;
	posted_call k{op, (int)type, (int)red, count};
	uint64_t seq = comm->seq++;
	issue(stream, [=] { run_collective(comm, seq, k, send, recv); });
	return ncclSuccess;
}

thread_local std::map<std::pair<ncclComm_t, cudaStream_t>, std::vector<p2p_op>> t_p2p;

ncclResult_t point_to_point(bool send, const void *sbuf, void *rbuf, size_t count,
			    ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream)
{
	const char *op = send ? "ncclSend" : "ncclRecv";
	ncclResult_t st;
	if ((st = usable(op, comm, stream)) != ncclSuccess)
		return st;
	if (peer < 0 || peer >= comm->nranks)
		return fail(ncclInvalidArgument, "%s: peer %d outside 0..%d", op, peer,
			    comm->nranks - 1);
	if ((st = buffer(op, send ? "sendbuff" : "recvbuff", send ? sbuf : rbuf,
			 count * type_size(type), comm, MAILBOX)) != ncclSuccess)
		return st;
	p2p_op o{send, peer, sbuf, rbuf, count, (int)type};
	if (t_group > 0) {
		t_p2p[{comm, stream}].push_back(o);
		return ncclSuccess;
	}
	std::vector<p2p_op> one{o};
	emu::enqueue(stream, [=] { run_p2p(comm, one); });
	return ncclSuccess;
}

std::string shm_name(const ncclUniqueId &id)
{
	return std::string("/ddptok-emu-nccl-") + (id.internal + 8);
}

/* Maps the clique the id names (created by its first rank). */
shared_clique *map_clique(const ncclUniqueId &id, int nranks, char **base, size_t *bytes)
{
	std::string name = shm_name(id);
	int fd = shm_open(name.c_str(), O_RDWR | O_CREAT, 0600);
	if (fd < 0)
		return nullptr;
	*bytes = clique_bytes(nranks);
	if (ftruncate(fd, (off_t)*bytes) != 0) {
		close(fd);
		return nullptr;
	}
	void *m = mmap(nullptr, *bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return nullptr;
	*base = (char *)m;
	return (shared_clique *)m;
}

ncclResult_t join(ncclComm_t *out, int nranks, const ncclUniqueId &id, int rank, bool blocking)
{
	if (!out || nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks)
		return fail(ncclInvalidArgument, "ncclCommInitRank: rank %d of %d", rank, nranks);
	if (memcmp(id.internal, "EMUNCCL ", 8) != 0)
		return fail(ncclInvalidArgument, "ncclCommInitRank: not a unique id of the emulator");
	int dev = emu::current_device();
	if (dev >= emu::device_count())
		return fail(ncclUnhandledCudaError, "ncclCommInitRank: no device %d", dev);
	char *base = nullptr;
	size_t bytes = 0;
	shared_clique *c = map_clique(id, nranks, &base, &bytes);
	if (!c)
		return fail(ncclSystemError, "ncclCommInitRank: cannot map the clique %s",
			    shm_name(id).c_str());
	int none = 0;
	c->nranks.compare_exchange_strong(none, nranks);
	uint64_t bit = 1ull << rank;
	ncclResult_t st = ncclSuccess;
	if (c->nranks.load() != nranks)
		st = fail(ncclInvalidUsage, "ncclCommInitRank: rank %d of %d joins a clique of %d "
			  "ranks", rank, nranks, c->nranks.load());
	for (int q = 0; q < nranks && st == ncclSuccess; q++)
		if ((c->joined.load() >> q & 1) && c->slot[q].pid == getpid() &&
		    c->slot[q].device == dev)
			st = fail(ncclInvalidUsage, "ncclCommInitRank: ranks %d and %d both on "
				  "device %d", q, rank, dev);
	if (st == ncclSuccess) {
		c->slot[rank].pid = getpid();
		c->slot[rank].device = dev;
		if (c->joined.fetch_or(bit) & bit)
			st = fail(ncclInvalidUsage, "ncclCommInitRank: rank %d joins twice", rank);
	}
	if (st != ncclSuccess) {
		munmap(base, bytes);
		return st;
	}
	ncclComm_t comm = new ncclComm();
	comm->magic = COMM_MAGIC;
	comm->c = c;
	comm->base = base;
	comm->bytes = bytes;
	comm->name = shm_name(id);
	comm->nranks = nranks;
	comm->rank = rank;
	comm->device = dev;
	comm->async = ncclInProgress;
	*out = comm;
	if (blocking && t_group == 0)
		while (__builtin_popcountll(c->joined.load()) < nranks) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, nullptr);
		}
	return ncclSuccess;
}

/* The communicator is never used again; its memory is kept so that a later use is
 * recognized as one. */
ncclResult_t retire(const char *op, ncclComm_t comm, bool abort)
{
	if (!comm || comm->magic != COMM_MAGIC)
		return fail(ncclInvalidArgument, "%s: not a communicator", op);
	if (comm->dead.exchange(true))
		return abort ? ncclSuccess : fail(ncclInvalidUsage, "%s: rank %d's communicator "
						  "is already gone", op, comm->rank);
	if (abort) {
		comm->aborted = true;
		comm->c->aborted.store(1);
	}
	/* every rank joined (or the clique is dead): no new process needs the name */
	shm_unlink(comm->name.c_str());
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
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	memset(id->internal, 0, sizeof id->internal);
	snprintf(id->internal, sizeof id->internal, "EMUNCCL %d-%u-%ld", (int)getpid(),
		 counter.fetch_add(1), (long)ts.tv_nsec);
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
	if (!comm || comm->magic != COMM_MAGIC || comm->dead.load())
		return fail(ncclInvalidUsage, "ncclCommGetAsyncError: not a live communicator");
	shared_clique *c = comm->c;
	if (comm->async.load() == ncclInProgress &&
	    __builtin_popcountll(c->joined.load()) == comm->nranks) {
		comm->async = ncclSuccess;
		if (comm->rank == 0) /* all joined: the name is no longer needed */
			shm_unlink(comm->name.c_str());
	}
	if (c->failed.load())
		comm->async = ncclInvalidUsage;
	*async_error = (ncclResult_t)comm->async.load();
	return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
	if (!comm || comm->magic != COMM_MAGIC || comm->dead.load())
		return fail(ncclInvalidUsage, "ncclCommFinalize: not a live communicator");
	return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) { return retire("ncclCommDestroy", comm, false); }
ncclResult_t ncclCommAbort(ncclComm_t comm) { return retire("ncclCommAbort", comm, true); }

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
	*count = comm->nranks;
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

const char *ncclGetLastError(ncclComm_t)
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
	return collective("ncclAllReduce", OP_ALLREDUCE, sendbuff, recvbuff, count, datatype, op,
			  comm, stream);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
			   ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	return collective("ncclAllGather", OP_ALLGATHER, sendbuff, recvbuff, sendcount, datatype,
			  ncclSum, comm, stream);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
			       ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
			       cudaStream_t stream)
{
	return collective("ncclReduceScatter", OP_REDUCE_SCATTER, sendbuff, recvbuff, recvcount,
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
