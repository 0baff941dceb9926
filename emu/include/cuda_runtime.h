/*
 * The emulated device's cuda_runtime.h (emu/): the runtime API (cuda_runtime_api.h) and,
 * for C++, the kernel language gpu/'s .cu files use, on the host:
 *   __global__, __device__, __host__, __forceinline__   plain (inline) functions
 *   __shared__    a static: one block runs at a time in the process, its shared memory
 *                 watched by the race check (emu/kernel.cc)
 *   threadIdx, blockIdx, blockDim, gridDim   the running fiber's (emu/kernel.cc)
 *   __syncthreads, atomicAdd, min, max
 *   CUDA_LAUNCH   validates the launch and queues every block of the kernel on the stream
 * Like nvcc, the build includes this header first in every .cu file.
 */
#ifndef DDPTOK_EMU_CUDA_RUNTIME_H
#define DDPTOK_EMU_CUDA_RUNTIME_H

#include <math.h>
#include <stdint.h>

#include "cuda_runtime_api.h"

#ifdef __cplusplus
#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __shared__ static

struct uint3 {
	unsigned int x, y, z;
};

struct dim3 {
	unsigned int x, y, z;
	constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
		: x(vx), y(vy), z(vz)
	{
	}
};

extern "C" {
uint3 emu_thread_idx(void);
uint3 emu_block_idx(void);
dim3 emu_block_dim(void);
dim3 emu_grid_dim(void);
void emu_syncthreads(void);
}

#define threadIdx (emu_thread_idx())
#define blockIdx (emu_block_idx())
#define blockDim (emu_block_dim())
#define gridDim (emu_grid_dim())
#define __syncthreads() emu_syncthreads()

/* one block's threads run on one host thread, one at a time, between barriers only
 * where a fiber yields: a read-modify-write is atomic */
template <typename T> static inline T atomicAdd(T *address, T val)
{
	T old = *address;
	*address = old + val;
	return old;
}

static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }

namespace emu {

/* A launched kernel: its arguments, converted to the parameters' types at the launch as
 * CUDA does, run once per thread. */
struct kernel_packet {
	size_t bytes = 0; /* of the whole object: its argument copies are not the kernel's memory */
	virtual ~kernel_packet() {}
	virtual void run_thread() = 0;
};

template <typename... P> struct kernel_call : kernel_packet {
	void (*kernel)(P...);
	std::tuple<P...> args;
	kernel_call(void (*k)(P...), std::tuple<P...> a) : kernel(k), args(a)
	{
		bytes = sizeof *this;
	}
	void run_thread() override { std::apply(kernel, args); }
};

template <typename T> static inline const void *pointer_arg(const T &v)
{
	if constexpr (std::is_pointer_v<T>)
		return (const void *)v;
	else
		return nullptr;
}

} // namespace emu

/* Queues `pk` (owned from here on); the launch's error, if any, goes to the thread's
 * last error as a real launch's does. `pointers` are the arguments that are pointers. */
cudaError_t emu_submit_kernel(const char *name, emu::kernel_packet *pk, dim3 grid, dim3 block,
			      size_t shmem, cudaStream_t stream, const void *const *pointers,
			      int n_pointers);

template <typename... P, typename... A>
static inline void emu_launch(const char *name, void (*kernel)(P...), dim3 grid, dim3 block,
			      size_t shmem, cudaStream_t stream, A &&...args)
{
	static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong argument count");
	std::tuple<P...> params(std::forward<A>(args)...);
	const void *pointers[sizeof...(P) + 1] = {};
	int n = 0;
	std::apply([&](const auto &...v) { ((pointers[n++] = emu::pointer_arg(v)), ...); }, params);
	emu_submit_kernel(name, new emu::kernel_call<P...>(kernel, params), grid, block, shmem,
			  stream, pointers, n);
}

#define CUDA_LAUNCH(kernel, grid, block, shmem, stream, ...)                                  \
	emu_launch(#kernel, kernel, (grid), (block), (shmem), (stream), __VA_ARGS__)

#endif /* __cplusplus */

#endif
