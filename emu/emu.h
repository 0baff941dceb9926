/*
 * emu: what the emulated device's parts (runtime.cc, kernel.cc, cublas.cc, cub.cc,
 * nccl.cc) share: the allocation table every pointer is checked against, the per-thread
 * current device and last error, the devices' sticky errors and the streams' queues.
 */
#ifndef DDPTOK_EMU_H
#define DDPTOK_EMU_H

#include <stddef.h>

#include <atomic>
#include <functional>

#include "cuda_runtime_api.h"

namespace emu {

/* An allocation: device memory of one device, or pinned host memory (device -1). */
struct block {
	char *base;
	size_t size;
	int device;
};

enum class where { unknown, inside, redzone, freed };

/* Incremented by every free: a cached "p is inside a live allocation" is stale after. */
extern std::atomic<unsigned> g_frees;

/* Where p lies: inside a live allocation (*b is it), in the guard bytes around one, in a
 * freed one, or in memory the emulator did not hand out. */
where locate(const void *p, block *b);

/* Checks that [p, p + bytes) lies in one live allocation of `device` (-1: pinned host
 * memory; -2: device memory of any device or pinned); prints what is wrong, naming
 * `call` and `what`, and returns cudaErrorInvalidValue (cudaSuccess when it fits). */
cudaError_t check_range(const char *call, const char *what, const void *p, size_t bytes,
			int device);

/* The calling thread's device (cudaSetDevice is per thread). */
int current_device();
int device_count();

/* Records `st` as the thread's last error (unless cudaSuccess) and returns it. */
cudaError_t set_last(cudaError_t st);

/* The device's sticky error (cudaSuccess while it has none). */
cudaError_t sticky(int device);

/* Prints "cuda emulator: ..." on stderr. */
void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A fault of work running on the device: reported, and the device's sticky error. */
void fault(int device, cudaError_t st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The stream's device, or -1 for a handle that is not a live stream (the null stream is
 * the current device's). */
int stream_device(cudaStream_t s);

/* Queues fn on the stream's worker (after everything queued before it). */
void enqueue(cudaStream_t s, std::function<void()> fn);

/* A copy into host memory made by work on the stream: the host sees it only once it has
 * synchronized with the stream (until then the bytes are poisoned). Called by the
 * stream's worker. */
void publish_later(cudaStream_t s, void *host, const void *src, size_t bytes);

/* Bytes that stand for "not written yet": all ones, a NaN in every float width. */
enum { POISON = 0xff };

} // namespace emu

#endif
