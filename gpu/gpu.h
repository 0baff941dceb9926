/*
 * gpu: the CUDA backend of the device interface and the NCCL collective.
 *
 * Built only when the `cuda` option allows it and the toolkit (nvcc, cuBLAS, NCCL) is
 * found; DDPTOK_HAVE_CUDA in ddptok_config.h says whether it was. The header is plain C
 * and names no CUDA type, so the program can include it without the CUDA headers.
 *
 *   gpu_device_count   how many GPUs are usable; none (or no driver) is not an error
 *   cuda_dev_create    a `struct dev` on one GPU: its own non-blocking stream, a cuBLAS
 *                      handle bound to it (pedantic float32 math: no TF32, no emulation;
 *                      no atomics), kernels that mirror the host backend op by op
 *                      (runtime/dev_host_kernels.c); every buffer it needs is allocated here,
 *                      sized by `struct cuda_dev_sizes`, never during a window
 *   nccl_coll_create   a `struct coll` over one NCCL communicator per rank, in one
 *                      process (nccl_coll_create_span: this process's ranks of a clique
 *                      spanning several, whose unique id process 0 made with
 *                      nccl_unique_id and the caller carried to the others); waits by
 *                      polling so that an aborted peer or the barrier timeout releases
 *                      every rank; avg is the sum divided by W, as the host collective
 *                      computes it
 *   gpu_env_report     driver, runtime, NCCL versions and the visible devices
 *
 * Every CUDA, cuBLAS and NCCL failure becomes ERR_DEVICE with the call, the library's
 * error string, the source location and "rank R device D". A kernel that faults is
 * reported by the next call that waits on the stream (download, sum, sync, ...).
 */
#ifndef DDPTOK_GPU_H
#define DDPTOK_GPU_H

#include <stddef.h>
#include <stdio.h>

#include "dev.h"
#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

struct barrier;
struct coll;
struct CUstream_st; /* cudaStream_t is `struct CUstream_st *` */

/* Number of usable GPUs in *count. No device, no driver or an unusable driver is not an
 * error: *count = 0, ERR_OK, and `why` (if not NULL) says what the runtime answered. */
int gpu_device_count(int *count, char *why, size_t whylen, struct err *e);

/* What a CUDA device allocates once, at creation, so that no operation allocates later
 * (freeing or pinning memory while other GPUs' NCCL kernels wait can hang them all). */
struct cuda_dev_sizes {
	size_t upload_bytes; /* uploads queued between two waits (one microbatch's token ids
				and targets): staged asynchronously through pinned memory of
				this size (at least 1 MiB, at most 16 MiB); an upload that does
				not fit is copied directly and waited for */
	size_t embed_slots;  /* the most context slots (rows x width) of one embed_backward;
				a larger call is refused */
	size_t embed_ids;    /* the table's rows: every token id is below it, so the sort of
				embed_backward orders ceil(log2(embed_ids)) key bits only
				(0: all 31 bits of a non-negative int32) */
	size_t embed_dim;    /* the embedding width: embed_backward's scratch for the chunk
				sums of busy ids is gpu_embed_partial_rows(embed_slots) rows
				of it (0: width 1); a call that needs more is refused */
};

/* Creates the device of `rank` on GPU `device_id`. Meant for the device thread of that
 * rank; every op selects its GPU first, so another thread may drive it too (one at a
 * time, like every `struct dev`). */
int cuda_dev_create(int rank, int device_id, const struct cuda_dev_sizes *sizes,
		    struct dev **out, struct err *e);
/* buf[i] /= divisor for i < count on the device's stream, without waiting; `dtype` is an
 * enum coll_dtype (float32, float64: correctly rounded division; int64: truncating, as
 * C divides). The NCCL collective's average. */
int cuda_dev_divide(struct dev *d, void *buf, size_t count, int dtype, int divisor,
		    struct err *e);
/* The stream every operation of a CUDA device runs on (NULL for another backend). */
struct CUstream_st *cuda_dev_stream(struct dev *d);

/* One NCCL communicator per rank over device_ids[0..world). A device id may appear only
 * once (ERR_CONFIG otherwise: ranks sharing a GPU use `[devices] collective = host`).
 * The barrier (not owned) supplies the abort flag and the timeout of every wait.
 * max_count: the largest allreduce (its device staging, for host buffers and for the
 * tree allreduce, is allocated here; nothing is allocated later). */
int nccl_coll_create(int world, const int *device_ids, struct barrier *barrier,
		     size_t max_count, struct coll **out, struct err *e);

/* The bytes of an NCCL unique id (ncclUniqueId), which names one clique of
 * communicators: made once, by one process, and handed to every process of the clique. */
#define GPU_NCCL_ID_BYTES 128

/* A new unique id (process 0 of a run makes it; the caller sends it to the others). */
int nccl_unique_id(unsigned char id[GPU_NCCL_ID_BYTES], struct err *e);

/* Where one process's communicators sit in a clique spanning several processes. */
struct nccl_span {
	int world; /* ranks of the clique, all processes together (at most MAX_WORLD) */
	int first; /* the clique rank of this process's first communicator */
	unsigned char id[GPU_NCCL_ID_BYTES]; /* the clique's id, the same in every process */
};

/* nccl_coll_create for `local` ranks of this process, clique ranks span->first .. +
 * local - 1 of span->world (span NULL: a clique of this process alone, as
 * nccl_coll_create). Every process of the clique must call it: the communicators are
 * created non-blocking and wait (the barrier's timeout, at least two minutes) for the
 * others to join. The collective's rank arguments stay local (0..local-1); its messages
 * name clique ranks. Averages divide by span->world. */
int nccl_coll_create_span(int local, const int *device_ids, const struct nccl_span *span,
			  struct barrier *barrier, size_t max_count, struct coll **out,
			  struct err *e);

/* Human-readable report of the CUDA/NCCL environment; a machine without GPU or driver
 * gets a line saying so (not an error). */
int gpu_env_report(FILE *out, struct err *e);

/* What the bits of a run on GPUs ids[0..n) depend on, in words, for checkpoints: the
 * number of distinct GPUs, the model, compute capability and SM count of the first (and
 * "mixed" when the others differ), the driver (release and CUDA version), the CUDA
 * runtime, cuBLAS and NCCL versions. Never fails: what cannot be asked is written as
 * unknown. */
void gpu_describe(const int *ids, int n, char *out, size_t cap);

/* Shared by the files of this module: fills `e` with ERR_DEVICE for a failed CUDA
 * runtime call (`status` is the cudaError_t) and returns ERR_DEVICE. rank/device < 0
 * are left out of the message. */
int gpu_cuda_error(struct err *e, const char *file, int line, int status, const char *call,
		   int rank, int device);

#ifdef __cplusplus
}
#endif

#endif
