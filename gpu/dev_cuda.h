/*
 * dev_cuda: the state of one CUDA device of the backend (dev_cuda.cu), for the backend's
 * other CUDA files that queue work on its stream (gpt_kernels.cu). Reading the state
 * through this header, rather than calling back into dev_cuda.cu, keeps calls between
 * the backend's files one way: dev_cuda.cu calls the kernels' files, never the reverse.
 * C++ (CUDA) callers only; C callers use gpu.h's cuda_dev_stream().
 */
#ifndef DDPTOK_DEV_CUDA_H
#define DDPTOK_DEV_CUDA_H

#include <stddef.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" {
#include "dev.h"
}

struct cuda_dev {
	struct dev dev;
	cudaStream_t stream;
	cublasHandle_t blas;
	/* pinned bump arena for uploads (fixed size); emptied whenever the stream drained */
	unsigned char *stage;
	size_t stage_cap, stage_off;
	/* device partials of a reduction (RED_BLOCKS + 1 slots of 8 bytes) */
	void *red;
	/* pinned landing slot for reduction results */
	void *host_res;
	/* embed_backward: sorted keys, slot indices, the plan's three arrays, CUB temporary
	 * storage (fixed size) */
	void *sort_ws;
	size_t sort_cap;
	size_t sort_slots; /* the slots it was sized for */
	int sort_bits;     /* key bits the sort orders: ids are below 2^sort_bits */
	/* embed_backward: the chunks' sums of busy ids (gpu_embed_partial_rows rows of the
	 * embedding width it was sized for) */
	float *part;
	size_t part_cap; /* floats */
	size_t part_dim; /* the width it was sized for */
};

/* The CUDA state of d, a device of the CUDA backend. */
static inline struct cuda_dev *cuda_dev_of(struct dev *d)
{
	return (struct cuda_dev *)d->impl;
}

#endif
