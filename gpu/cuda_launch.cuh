/*
 * cuda_launch: one spelling of a kernel launch for the backend's CUDA files.
 *
 * CUDA_LAUNCH(kernel, grid, block, shmem, stream, args...) is
 * kernel<<<grid, block, shmem, stream>>>(args...) under nvcc. The launch syntax is the
 * only part of the backend's sources a host C++ compiler cannot read, so the emulated
 * device (emu/, the `gpu_emulator` build option) defines CUDA_LAUNCH itself, in its
 * cuda_runtime.h, and the same files run there unchanged.
 */
#ifndef DDPTOK_CUDA_LAUNCH_CUH
#define DDPTOK_CUDA_LAUNCH_CUH

#include <cuda_runtime.h>

#ifndef CUDA_LAUNCH
#define CUDA_LAUNCH(kernel, grid, block, shmem, stream, ...) \
	kernel<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)
#endif

#endif
