/*
 * runtime: the emulated CUDA runtime (see cuda_runtime_api.h), stricter than the real one.
 *
 *   devices   DDPTOK_EMULATED_GPUS of them (default 0: the backend sees no GPU); the
 *             current device is per thread, as on the real runtime
 *   memory    each cudaMalloc a heap block of its own between guard bytes, recorded with
 *             its device; every call checks its pointers against that table (another
 *             device's, freed, past the end, host memory where device memory is due)
 *   streams   each with a worker thread running its work asynchronously, in order; a
 *             copy to host memory is seen by the host only once it synchronized with the
 *             stream (cudaStreamSynchronize, or cudaStreamQuery answering cudaSuccess):
 *             before, the destination holds poison (all bits set: NaN)
 *   errors    the thread's last error as the real runtime keeps it; a fault of work on a
 *             device (a kernel out of bounds, a race) is sticky: every later call on that
 *             device answers it
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "cuda_runtime_api.h"
#include "emu.h"

#define GUARD 256 /* bytes around every allocation */
#define MAX_DEVICES 64

namespace emu {

/* ---- devices, the thread's state, errors ---- */

static thread_local int t_device = 0;
static thread_local cudaError_t t_last = cudaSuccess;
static std::atomic<int> g_sticky[MAX_DEVICES];

int device_count()
{
	static int n = [] {
		const char *v = getenv("DDPTOK_EMULATED_GPUS");
		int k = v && *v ? atoi(v) : 0;
		return k < 0 ? 0 : k > MAX_DEVICES ? MAX_DEVICES : k;
	}();
	return n;
}

int current_device() { return t_device; }

cudaError_t set_last(cudaError_t st)
{
	if (st != cudaSuccess)
		t_last = st;
	return st;
}

cudaError_t sticky(int device)
{
	if (device < 0 || device >= MAX_DEVICES)
		return cudaSuccess;
	return (cudaError_t)g_sticky[device].load();
}

void report(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fprintf(stderr, "cuda emulator: %s\n", msg);
}

void fault(int device, cudaError_t st, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fprintf(stderr, "cuda emulator: device %d: %s\n", device, msg);
	int none = cudaSuccess;
	if (device >= 0 && device < MAX_DEVICES)
		g_sticky[device].compare_exchange_strong(none, (int)st);
}

/* ---- the allocation table ---- */

static std::shared_mutex g_mu;
static std::map<const char *, block> g_live;  /* by base */
static std::map<const char *, block> g_freed; /* by base */

/* Device and pinned memory come from one reserved range of addresses, handed out in
 * order and never again: an address outside it is none of the emulator's (answered
 * without a lock), and a freed one stays recognizable as freed. */
#define ARENA ((size_t)256 << 30)
static char *g_arena;
static std::atomic<size_t> g_arena_used;
std::atomic<unsigned> g_frees;

static char *arena_take(size_t bytes)
{
	static std::once_flag once;
	std::call_once(once, [] {
		void *m = mmap(nullptr, ARENA, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (m == MAP_FAILED) {
			report("cannot reserve %zu bytes of addresses for device memory", ARENA);
			abort();
		}
		g_arena = (char *)m;
	});
	size_t off = g_arena_used.fetch_add(bytes);
	return off + bytes <= ARENA ? g_arena + off : nullptr;
}

where locate(const void *p, block *b)
{
	const char *c = (const char *)p;
	if (c < g_arena || c >= g_arena + ARENA)
		return where::unknown;
	std::shared_lock<std::shared_mutex> lock(g_mu);
	auto it = g_live.upper_bound(c);
	if (it != g_live.begin()) {
		auto prev = std::prev(it);
		const block &k = prev->second;
		if (c < k.base + k.size) {
			*b = k;
			return where::inside;
		}
		if (c < k.base + k.size + GUARD) {
			*b = k;
			return where::redzone;
		}
	}
	if (it != g_live.end() && c >= it->second.base - GUARD) {
		*b = it->second;
		return where::redzone;
	}
	auto f = g_freed.upper_bound(c);
	if (f != g_freed.begin()) {
		auto prev = std::prev(f);
		if (c < prev->second.base + prev->second.size) {
			*b = prev->second;
			return where::freed;
		}
	}
	return where::unknown;
}

struct kind_text {
	char text[32];
};

static kind_text kind(int device)
{
	kind_text k;
	if (device < 0)
		snprintf(k.text, sizeof k.text, "pinned host memory");
	else
		snprintf(k.text, sizeof k.text, "memory of device %d", device);
	return k;
}

cudaError_t check_range(const char *call, const char *what, const void *p, size_t bytes,
			int device)
{
	block b = {};
	where w = locate(p, &b);
	const char *c = (const char *)p;
	if (!p) {
		report("%s: %s is a null pointer", call, what);
		return cudaErrorInvalidValue;
	}
	if (w == where::freed) {
		report("%s: %s %p lies in %s freed before (%zu bytes at %p)", call, what, p,
		       kind(b.device).text, b.size, (void *)b.base);
		return cudaErrorInvalidValue;
	}
	if (w != where::inside) {
		report("%s: %s %p is not %s the emulator allocated", call, what, p,
		       device == -1 ? "pinned host memory" : "device memory");
		return cudaErrorInvalidValue;
	}
	bool device_ok = device == -2 || b.device == device;
	if (!device_ok) {
		report("%s: %s %p is %s, not %s", call, what, p, kind(b.device).text,
		       kind(device).text);
		return cudaErrorInvalidValue;
	}
	if (bytes > (size_t)(b.base + b.size - c)) {
		report("%s: %s %p + %zu bytes runs %zu bytes past the end of its allocation (%zu "
		       "bytes at %p, %s)", call, what, p, bytes, (size_t)(c + bytes - b.base - b.size),
		       b.size, (void *)b.base, kind(b.device).text);
		return cudaErrorInvalidValue;
	}
	return cudaSuccess;
}

static cudaError_t allocate(void **ptr, size_t size, int device)
{
	if (!ptr)
		return cudaErrorInvalidValue;
	size_t n = size ? size : 1;
	char *raw = arena_take(GUARD + ((n + GUARD - 1) / GUARD) * GUARD + GUARD);
	if (!raw)
		return cudaErrorMemoryAllocation;
	memset(raw, 0xa5, GUARD);
	memset(raw + GUARD + n, 0xa5, GUARD);
	memset(raw + GUARD, POISON, n); /* cudaMalloc does not clear */
	char *base = raw + GUARD;
	{
		std::unique_lock<std::shared_mutex> lock(g_mu);
		g_live[base] = block{base, n, device};
	}
	*ptr = base;
	return cudaSuccess;
}

/* Frees an allocation of `device` (-1: pinned); its guard bytes must be intact. */
static cudaError_t release(const char *call, void *p, int device)
{
	if (!p)
		return cudaSuccess;
	block b;
	{
		std::unique_lock<std::shared_mutex> lock(g_mu);
		auto it = g_live.find((const char *)p);
		if (it == g_live.end() || it->second.device != device) {
			lock.unlock();
			report("%s: %p is not the start of live %s", call, p,
			       device < 0 ? "pinned host memory" : "device memory");
			return cudaErrorInvalidValue;
		}
		b = it->second;
		g_live.erase(it);
		g_freed[b.base] = b;
		g_frees++;
	}
	for (size_t i = 0; i < GUARD; i++)
		if ((unsigned char)b.base[-GUARD + (long)i] != 0xa5 ||
		    (unsigned char)b.base[b.size + i] != 0xa5) {
			fault(b.device, cudaErrorIllegalAddress, "%s: the guard bytes around %zu "
			      "bytes at %p were overwritten (a write out of bounds)", call, b.size,
			      (void *)b.base);
			break;
		}
	/* the pages go back to the system; the addresses are never handed out again */
	char *lo = (char *)(((uintptr_t)b.base + 4095) & ~(uintptr_t)4095);
	char *hi = (char *)(((uintptr_t)(b.base + b.size)) & ~(uintptr_t)4095);
	if (hi > lo)
		madvise(lo, hi - lo, MADV_DONTNEED);
	return cudaSuccess;
}

} // namespace emu

using namespace emu;

/* ---- streams ---- */

struct pending_copy {
	void *host;
	std::vector<char> bytes;
};

struct CUstream_st {
	int device;
	std::mutex mu;
	std::condition_variable cv;
	std::deque<std::function<void()>> work;
	bool running = false, stop = false;
	std::vector<pending_copy> unpublished; /* copies to host the host has not synced */
	std::thread worker;

	explicit CUstream_st(int dev) : device(dev)
	{
		worker = std::thread([this] { serve(); });
	}
	void serve()
	{
		std::unique_lock<std::mutex> lock(mu);
		for (;;) {
			cv.wait(lock, [this] { return stop || !work.empty(); });
			if (work.empty())
				return;
			std::function<void()> fn = std::move(work.front());
			running = true;
			lock.unlock();
			/* after a fault the device is dead: nothing more runs on it */
			if (sticky(device) == cudaSuccess)
				fn();
			lock.lock();
			work.pop_front();
			running = false;
			cv.notify_all();
		}
	}
	bool idle() { return work.empty() && !running; }
	/* makes the host see the stream's copies to host memory (lock held) */
	void publish()
	{
		for (auto &p : unpublished)
			memcpy(p.host, p.bytes.data(), p.bytes.size());
		unpublished.clear();
	}
};

static std::mutex g_streams_mu;
static std::set<cudaStream_t> g_streams;
static cudaStream_t g_null[MAX_DEVICES];

/* The stream a handle names: the null stream is the current device's own. */
static cudaStream_t resolve(cudaStream_t s)
{
	std::lock_guard<std::mutex> lock(g_streams_mu);
	if (!s) {
		int d = t_device;
		if (!g_null[d]) {
			g_null[d] = new CUstream_st(d);
			g_streams.insert(g_null[d]);
		}
		return g_null[d];
	}
	return g_streams.count(s) ? s : nullptr;
}

int emu::stream_device(cudaStream_t s)
{
	cudaStream_t r = resolve(s);
	return r ? r->device : -1;
}

void emu::enqueue(cudaStream_t s, std::function<void()> fn)
{
	cudaStream_t r = resolve(s);
	std::lock_guard<std::mutex> lock(r->mu);
	r->work.push_back(std::move(fn));
	r->cv.notify_all();
}

void emu::publish_later(cudaStream_t s, void *host, const void *src, size_t bytes)
{
	cudaStream_t r = resolve(s);
	pending_copy p{host, std::vector<char>((const char *)src, (const char *)src + bytes)};
	std::lock_guard<std::mutex> lock(r->mu);
	r->unpublished.push_back(std::move(p));
}

/* The checks every call on stream s starts with: a live stream of the current device, no
 * sticky error. Answers the error (recorded as the thread's last) or cudaSuccess. */
static cudaError_t stream_call(const char *call, cudaStream_t s, cudaStream_t *out)
{
	cudaStream_t r = resolve(s);
	if (!r) {
		report("%s: stream %p is not a live stream", call, (void *)s);
		return set_last(cudaErrorInvalidResourceHandle);
	}
	if (r->device != t_device) {
		report("%s: the stream belongs to device %d, the calling thread's current device "
		       "is %d", call, r->device, t_device);
		return set_last(cudaErrorInvalidResourceHandle);
	}
	if (sticky(r->device) != cudaSuccess)
		return set_last(sticky(r->device));
	*out = r;
	return cudaSuccess;
}

extern "C" {

int emu_device_count(void) { return device_count(); }

cudaError_t cudaGetDeviceCount(int *count)
{
	if (!count)
		return set_last(cudaErrorInvalidValue);
	*count = device_count();
	return device_count() ? cudaSuccess : set_last(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device)
{
	if (device < 0 || device >= device_count())
		return set_last(cudaErrorInvalidDevice);
	t_device = device;
	return sticky(device) != cudaSuccess ? set_last(sticky(device)) : cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
	if (!device)
		return set_last(cudaErrorInvalidValue);
	*device = t_device;
	return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
	if (!prop)
		return set_last(cudaErrorInvalidValue);
	if (device < 0 || device >= device_count())
		return set_last(cudaErrorInvalidDevice);
	memset(prop, 0, sizeof *prop);
	snprintf(prop->name, sizeof prop->name, "EMULATED GPU %d (ddptok's CPU emulator, not a "
		 "real device)", device);
	prop->totalGlobalMem = (size_t)16 << 30;
	prop->sharedMemPerBlock = 48 << 10;
	prop->maxThreadsPerBlock = 1024;
	prop->major = 9;
	prop->minor = 0;
	prop->multiProcessorCount = 1;
	prop->pciBusID = device;
	return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
	cudaError_t st = t_last;
	cudaError_t s = sticky(t_device);
	t_last = cudaSuccess;
	return s != cudaSuccess ? s : st;
}

cudaError_t cudaPeekAtLastError(void)
{
	cudaError_t s = sticky(t_device);
	return s != cudaSuccess ? s : t_last;
}

const char *cudaGetErrorName(cudaError_t error)
{
	switch (error) {
#define NAME(x)                                                                               \
	case x:                                                                               \
		return #x;
		NAME(cudaSuccess)
		NAME(cudaErrorInvalidValue)
		NAME(cudaErrorMemoryAllocation)
		NAME(cudaErrorInvalidConfiguration)
		NAME(cudaErrorInvalidDevicePointer)
		NAME(cudaErrorInvalidMemcpyDirection)
		NAME(cudaErrorInsufficientDriver)
		NAME(cudaErrorNoDevice)
		NAME(cudaErrorInvalidDevice)
		NAME(cudaErrorInvalidResourceHandle)
		NAME(cudaErrorNotReady)
		NAME(cudaErrorIllegalAddress)
		NAME(cudaErrorLaunchFailure)
#undef NAME
	}
	return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t error)
{
	switch (error) {
	case cudaSuccess: return "no error";
	case cudaErrorInvalidValue: return "invalid argument";
	case cudaErrorMemoryAllocation: return "out of memory";
	case cudaErrorInvalidConfiguration: return "invalid configuration argument";
	case cudaErrorNoDevice: return "no CUDA-capable device is detected (emulator: "
				       "DDPTOK_EMULATED_GPUS is unset or 0)";
	case cudaErrorInvalidDevice: return "invalid device ordinal";
	case cudaErrorInvalidResourceHandle: return "invalid resource handle";
	case cudaErrorNotReady: return "device not ready";
	case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
	case cudaErrorLaunchFailure: return "unspecified launch failure";
	default: return "unknown error";
	}
}

cudaError_t cudaRuntimeGetVersion(int *version)
{
	*version = CUDART_VERSION;
	return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version)
{
	*version = CUDART_VERSION;
	return cudaSuccess;
}

cudaError_t cudaMalloc(void **ptr, size_t size)
{
	if (t_device >= device_count())
		return set_last(cudaErrorNoDevice);
	if (sticky(t_device) != cudaSuccess)
		return set_last(sticky(t_device));
	return set_last(allocate(ptr, size, t_device));
}

cudaError_t cudaFree(void *ptr)
{
	if (!ptr)
		return cudaSuccess;
	cudaDeviceSynchronize(); /* as the real cudaFree: nothing queued may still use it */
	block b;
	if (locate(ptr, &b) == where::inside && b.device >= 0 && b.device != t_device)
		report("cudaFree: %p is memory of device %d, freed while device %d is current "
		       "(allowed, noted)", ptr, b.device, t_device);
	return set_last(release("cudaFree", ptr, locate(ptr, &b) == where::inside ? b.device
										    : t_device));
}

cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags)
{
	return set_last(allocate(ptr, size, -1));
}

cudaError_t cudaFreeHost(void *ptr)
{
	return set_last(release("cudaFreeHost", ptr, -1));
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
			    cudaStream_t stream)
{
	cudaStream_t s;
	cudaError_t st = stream_call("cudaMemcpyAsync", stream, &s);
	if (st != cudaSuccess || count == 0)
		return st;
	int dev = s->device;
	switch (kind) {
	case cudaMemcpyHostToDevice: {
		if ((st = check_range("cudaMemcpyAsync (host to device)", "dst", dst, count, dev)))
			return set_last(st);
		block b;
		if (locate(src, &b) == where::inside && b.device >= 0) {
			report("cudaMemcpyAsync (host to device): src %p is memory of device %d", src,
			       b.device);
			return set_last(cudaErrorInvalidValue);
		}
		if (locate(src, &b) == where::inside) { /* pinned: read when the copy runs */
			if ((st = check_range("cudaMemcpyAsync (host to device)", "src", src, count, -1)))
				return set_last(st);
			enqueue(s, [=] { memcpy(dst, src, count); });
		} else { /* pageable: staged now, as the real runtime does */
			auto data = std::make_shared<std::vector<char>>((const char *)src,
									(const char *)src + count);
			enqueue(s, [=] { memcpy(dst, data->data(), count); });
		}
		return cudaSuccess;
	}
	case cudaMemcpyDeviceToHost: {
		if ((st = check_range("cudaMemcpyAsync (device to host)", "src", src, count, dev)))
			return set_last(st);
		block b;
		if (locate(dst, &b) == where::inside && b.device >= 0) {
			report("cudaMemcpyAsync (device to host): dst %p is memory of device %d", dst,
			       b.device);
			return set_last(cudaErrorInvalidValue);
		}
		bool pinned = locate(dst, &b) != where::unknown;
		if (pinned &&
		    (st = check_range("cudaMemcpyAsync (device to host)", "dst", dst, count, -1)))
			return set_last(st);
		/* pageable memory is poisoned now; pinned memory when the copy runs, since work
		 * queued before it may still read it (an upload from the same slot) */
		if (!pinned)
			memset(dst, POISON, count);
		enqueue(s, [=] {
			if (pinned)
				memset(dst, POISON, count);
			publish_later(s, dst, src, count);
		});
		return cudaSuccess;
	}
	case cudaMemcpyDeviceToDevice:
		if ((st = check_range("cudaMemcpyAsync (device to device)", "src", src, count, dev)) ||
		    (st = check_range("cudaMemcpyAsync (device to device)", "dst", dst, count, dev)))
			return set_last(st);
		enqueue(s, [=] { memmove(dst, src, count); });
		return cudaSuccess;
	default:
		report("cudaMemcpyAsync: direction %d is not one the backend may use", (int)kind);
		return set_last(cudaErrorInvalidMemcpyDirection);
	}
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t stream)
{
	cudaStream_t s;
	cudaError_t st = stream_call("cudaMemsetAsync", stream, &s);
	if (st != cudaSuccess || count == 0)
		return st;
	if ((st = check_range("cudaMemsetAsync", "ptr", ptr, count, s->device)))
		return set_last(st);
	enqueue(s, [=] { memset(ptr, value, count); });
	return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags)
{
	if (!stream)
		return set_last(cudaErrorInvalidValue);
	if (t_device >= device_count())
		return set_last(cudaErrorNoDevice);
	cudaStream_t s = new CUstream_st(t_device);
	std::lock_guard<std::mutex> lock(g_streams_mu);
	g_streams.insert(s);
	*stream = s;
	return cudaSuccess;
}

/* Waits until the stream ran everything queued; the host then sees its copies. */
static void drain(cudaStream_t s)
{
	std::unique_lock<std::mutex> lock(s->mu);
	s->cv.wait(lock, [s] { return s->idle(); });
	s->publish();
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	cudaStream_t s = stream ? resolve(stream) : nullptr;
	if (!s) {
		report("cudaStreamDestroy: %p is not a live stream", (void *)stream);
		return set_last(cudaErrorInvalidResourceHandle);
	}
	{
		std::lock_guard<std::mutex> lock(g_streams_mu);
		g_streams.erase(s);
	}
	drain(s);
	{
		std::lock_guard<std::mutex> lock(s->mu);
		s->stop = true;
		s->cv.notify_all();
	}
	s->worker.join();
	delete s;
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	cudaStream_t s = resolve(stream);
	if (!s) {
		report("cudaStreamSynchronize: %p is not a live stream", (void *)stream);
		return set_last(cudaErrorInvalidResourceHandle);
	}
	drain(s);
	return sticky(s->device) != cudaSuccess ? set_last(sticky(s->device)) : cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
	cudaStream_t s = resolve(stream);
	if (!s) {
		report("cudaStreamQuery: %p is not a live stream", (void *)stream);
		return set_last(cudaErrorInvalidResourceHandle);
	}
	if (sticky(s->device) != cudaSuccess)
		return set_last(sticky(s->device));
	std::lock_guard<std::mutex> lock(s->mu);
	if (!s->idle())
		return set_last(cudaErrorNotReady);
	s->publish();
	return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
	std::vector<cudaStream_t> mine;
	{
		std::lock_guard<std::mutex> lock(g_streams_mu);
		for (cudaStream_t s : g_streams)
			if (s->device == t_device)
				mine.push_back(s);
	}
	for (cudaStream_t s : mine)
		drain(s);
	return sticky(t_device) != cudaSuccess ? set_last(sticky(t_device)) : cudaSuccess;
}

} /* extern "C" */
