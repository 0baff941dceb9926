/*
 * gpu_rules: the decisions of the GPU path that need no GPU, in plain C.
 *
 * This file is compiled into every build (with or without the CUDA backend), so that
 * the CPU test suite checks the rules the CUDA code applies on a real machine:
 *   gpu_driver_*       which NVIDIA driver a CUDA runtime needs, the driver release the
 *                      kernel module reports, and the message a too-old driver gets
 *   gpu_nccl_env_*     the NCCL environment the gradient communicator needs to stay
 *                      bit-exact from call to call (no NVLink SHARP unless asked for)
 *   gpu_coll_timeout_message  what a collective that timed out knows: which ranks
 *                      reached it, and what to try when all of them did
 *   gpu_poll_pause_ns  how the collective's poll loops pace themselves
 *   gpu_coll_plan      what one NCCL collective call queues, in order, and where the host
 *                      waits (once per call)
 *   gpu_sort_key_bits  how many key bits embed_backward's radix sort orders
 * None of these functions touches CUDA or NCCL; their callers pass in what the
 * libraries answered.
 */
#ifndef DDPTOK_GPU_RULES_H
#define DDPTOK_GPU_RULES_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The oldest driver branch (e.g. 580) that runs a program built with the CUDA runtime
 * `runtime_version` (1000 * major + 10 * minor, as cudaRuntimeGetVersion gives it);
 * 0 when the major version is not known here. */
int gpu_driver_branch_needed(int runtime_version);

/* Finds the driver release ("570.124.06") in the text of /proc/driver/nvidia/version
 * (the kernel module's banner). 0 and the release in `out` on success; -1 when the text
 * holds none (no module loaded, another format). */
int gpu_driver_release_parse(const char *banner, char *out, size_t outlen);

/* The message for a driver that cannot run this build (the runtime answered
 * cudaErrorInsufficientDriver): the release found (`release` may be NULL or empty when
 * unknown), the newest CUDA version the driver supports (`driver_version` from
 * cudaDriverGetVersion, 0 when unknown), the runtime this build uses and the branch it
 * needs, and the two ways out. With neither a release nor a driver version there is no
 * driver at all (the runtime answers the same), and the message says so. */
void gpu_driver_message(char *out, size_t outlen, const char *release, int driver_version,
			int runtime_version);

/* Whether the gradient communicator must be created with NCCL_NVLS_ENABLE=0: yes unless
 * the user chose NCCL's algorithm (NCCL_ALGO) or NVLS (NCCL_NVLS_ENABLE) themselves; the
 * arguments are those variables' values (NULL when unset). `note` (if not NULL) says
 * what was decided and why, for the log. */
int gpu_nccl_env_disable_nvls(const char *nccl_algo, const char *nccl_nvls_enable, char *note,
			      size_t notelen);

/* The message of a collective call that gave up after `timeout_s` on `rank` (GPU
 * `device`): `arrived[r]` is non-zero for every rank r < world that entered this call.
 * Ranks missing: a peer never joined (its own error, if any, is the root cause). All
 * present: the transport hangs; NCCL_P2P_DISABLE=1 and NCCL_DEBUG=INFO are named. */
void gpu_coll_timeout_message(char *out, size_t outlen, int rank, int device, double timeout_s,
			      const int *arrived, int world);

/* How long a poll loop sleeps after a wait of `waited_s` seconds so far: 0 (spin) for
 * the first 1.5 ms, since a small allreduce ends in tens of microseconds and a sleeping
 * thread wakes some 50-100 us late; then 20 us per poll up to 20 ms; then 0.5 ms. */
long gpu_poll_pause_ns(double waited_s);

/* The steps of one NCCL collective call, in the order coll_nccl.c carries them out on the
 * rank's stream (or on the host). A non-blocking communicator may return from a call
 * before its kernels are on the stream, so nothing is queued behind an NCCL call until
 * NCCL has queued it (GPU_STEP_ENQUEUED: a wait for NCCL's host side, not for the
 * device). Everything the call needs is queued before GPU_STEP_WAIT, the one wait for
 * the device (polled, with the aborts and the timeout); only host work follows it. */
enum gpu_coll_step {
	GPU_STEP_END = 0,
	GPU_STEP_STAGE_IN,  /* the host buffer through a pinned slot to the device */
	GPU_STEP_SLICE_IN,  /* tree: the device vector copied into W zero-padded slices */
	GPU_STEP_ALLREDUCE, /* ncclAllReduce (sum) in place */
	GPU_STEP_EXCHANGE,  /* tree: slice q to rank q, the contributions to our slice back */
	GPU_STEP_ENQUEUED,  /* NCCL has put the last call's kernels on the stream */
	GPU_STEP_TREE_ADD,  /* tree: the W contributions added in the tree's order */
	GPU_STEP_ALLGATHER, /* tree: every rank's reduced slice (a host buffer: every value) */
	GPU_STEP_DIVIDE,    /* avg: every element divided by W */
	GPU_STEP_STAGE_OUT, /* the result copied to the pinned slot (queued) */
	GPU_STEP_SLICE_OUT, /* tree: the gathered slices copied back into the vector */
	GPU_STEP_WAIT,      /* the host waits for the stream: the call's one device wait */
	GPU_STEP_UNSTAGE,   /* the pinned slot into the host buffer (tree: added in the tree) */
};
#define GPU_COLL_MAX_STEPS 12

/* Fills steps[] (GPU_COLL_MAX_STEPS entries, GPU_STEP_END after the last) with the plan of
 * one call: `tree` for exact mode's allreduce_tree, `host_buf` for a buffer in host
 * memory, `avg` for COLL_AVG (not with tree). Returns the number of steps. */
int gpu_coll_plan(int tree, int host_buf, int avg, enum gpu_coll_step *steps);

/* The key bits that order token ids below `ids` (the table's rows): ceil(log2(ids)), at
 * least 1; 31 (every non-negative int32) when ids is 0 (unknown) or past 2^31. */
int gpu_sort_key_bits(size_t ids);

#ifdef __cplusplus
}
#endif

#endif
