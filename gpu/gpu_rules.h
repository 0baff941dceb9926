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
 *   gpu_embed_*        embed_backward's order of additions for one token id: how its slots
 *                      are cut into chunks, where the chunks' sums go, and the scratch
 *                      that holds them
 * None of these functions touches CUDA or NCCL; their callers pass in what the
 * libraries answered. The gpu_embed_ rules that the kernels apply per slot are static
 * inline functions here, compiled as C for the tests and as device code for the kernels
 * (as runtime/kmath.h is), so that the CPU tests check the code the GPU runs.
 */
#ifndef DDPTOK_GPU_RULES_H
#define DDPTOK_GPU_RULES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define GPU_RULE_FN static __host__ __device__ __forceinline__
#else
#define GPU_RULE_FN static inline
#endif

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
	/* ZeRO's halves (gpu_zero_plan): */
	GPU_STEP_REDUCE_SCATTER, /* ncclReduceScatter (sum) of the padded vector's slices */
	GPU_STEP_SHARD_OUT, /* the rank's reduced slice into its place in the vector */
	GPU_STEP_SHARD_IN,  /* the rank's slice of the vector into the all-gather's slot */
};
#define GPU_COLL_MAX_STEPS 12

/* Fills steps[] (GPU_COLL_MAX_STEPS entries, GPU_STEP_END after the last) with the plan of
 * one call: `tree` for exact mode's allreduce_tree, `host_buf` for a buffer in host
 * memory, `avg` for COLL_AVG (not with tree). Returns the number of steps. */
int gpu_coll_plan(int tree, int host_buf, int avg, enum gpu_coll_step *steps);
/* The plan of a reduce-scatter (gather = 0: `tree` for exact mode's order, else NCCL's
 * sum, `avg` dividing the slice) or an all-gather (gather = 1) of a device float vector,
 * in the same form. Returns the number of steps. */
int gpu_zero_plan(int gather, int tree, int avg, enum gpu_coll_step *steps);

/* The key bits that order token ids below `ids` (the table's rows): ceil(log2(ids)), at
 * least 1; 31 (every non-negative int32) when ids is 0 (unknown) or past 2^31. */
int gpu_sort_key_bits(size_t ids);

/*
 * embed_backward adds the dx rows of every context slot holding a token id into that id's
 * row of the table's gradient. On the GPU the slots are sorted by id (stably: each id's
 * slots stay in ascending slot order), and each id's n slots, at sorted positions
 * [lo, lo + n), are added in an order fixed by n alone:
 *   n < 2 * GPU_EMBED_CHUNK_MIN (127 slots or fewer): one chain in ascending slot order
 *     onto the gradient's value, the CPU backend's order, so these ids get its bits;
 *   more: gpu_embed_chunks(n) chunks of gpu_embed_chunk_len(n) consecutive slots (the
 *     last one also takes the remainder, so it is shorter than twice that), each added in
 *     ascending order, the first onto the gradient's value and the others from zero; the
 *     chunks' sums are then added in chunk order into the gradient. This is col_sum_acc's
 *     two-level rule; from 4,096 slots on a chunk of about sqrt(n) slots makes both levels
 *     about sqrt(n) additions long (a padding id in 500,000 slots: some 1,600 instead of
 *     500,000); below that the chunks hold 64 slots and the chain is 65 to 189 additions.
 * A chunk holds GPU_EMBED_CHUNK_MIN slots or more: an id needs twice that for the second
 * level to shorten its chain at all, an id in fewer slots keeps the CPU backend's bits
 * (in a batch of text, every id but a few frequent ones), and the scratch for the chunks'
 * sums stays at 1/64 of dx (gpu_embed_partial_rows).
 */
#define GPU_EMBED_CHUNK_MIN 64

/* floor(sqrt(n)) for 0 <= n <= INT32_MAX, in integers (digit by digit), so that the host
 * and the device agree on it whatever their square roots round to */
GPU_RULE_FN int gpu_isqrt(int n)
{
	unsigned int rem = (unsigned int)n, root = 0, bit = 1u << 30;
	while (bit > rem)
		bit >>= 2;
	while (bit) {
		if (rem >= root + bit) {
			rem -= root + bit;
			root = (root >> 1) + bit;
		} else {
			root >>= 1;
		}
		bit >>= 2;
	}
	return (int)root;
}

/* The slots of each chunk of an id in n slots (the last chunk takes the remainder too). */
GPU_RULE_FN int gpu_embed_chunk_len(int n)
{
	int r = gpu_isqrt(n);
	return r > GPU_EMBED_CHUNK_MIN ? r : GPU_EMBED_CHUNK_MIN;
}

/* How many chunks an id in n slots is added in: 1 (one chain, the CPU backend's order)
 * below 2 * GPU_EMBED_CHUNK_MIN slots, else n / gpu_embed_chunk_len(n), at most
 * n / GPU_EMBED_CHUNK_MIN. */
GPU_RULE_FN int gpu_embed_chunks(int n)
{
	int k = n / gpu_embed_chunk_len(n);
	return k > 1 ? k : 1;
}

/* What sorted position i does for the id whose n slots sit at sorted positions
 * [lo, lo + n) (lo <= i < lo + n). */
struct gpu_embed_pos {
	int chunk_end; /* i starts a chunk, slots [i, chunk_end) (> i); 0: it starts none */
	int dest_row;  /* that chunk's row of the partial sums; -1 when the chunk is the id's
			  only one and is added into the gradient directly */
	int fold;      /* at the id's first position, with 2 chunks or more: how many chunk
			  sums (rows dest_row ..) to add into the gradient; 0 elsewhere */
};

/* The rows of an id's chunk sums start at lo / GPU_EMBED_CHUNK_MIN: an id at [lo, lo + n)
 * has at most n / GPU_EMBED_CHUNK_MIN chunks, so its rows end by (lo + n) /
 * GPU_EMBED_CHUNK_MIN, where the next id's rows can start at the earliest: the rows of two
 * ids never overlap, and they all lie below gpu_embed_partial_rows(slots). */
GPU_RULE_FN struct gpu_embed_pos gpu_embed_position(int lo, int n, int i)
{
	struct gpu_embed_pos p = {0, -1, 0};
	int len = gpu_embed_chunk_len(n), chunks = gpu_embed_chunks(n);
	int off = i - lo, c = off / len;
	if (off % len != 0 || c >= chunks)
		return p;
	p.chunk_end = c == chunks - 1 ? lo + n : i + len;
	if (chunks > 1) {
		p.dest_row = lo / GPU_EMBED_CHUNK_MIN + c;
		p.fold = c == 0 ? chunks : 0;
	}
	return p;
}

/* What sorted position i does, found from the sorted ids keys[0..slots) alone (the plan
 * kernel's work for one position): the positions [lo, end) holding keys[i], by binary
 * search on either side of i, then gpu_embed_position. */
GPU_RULE_FN struct gpu_embed_pos gpu_embed_plan_at(const int32_t *keys, int slots, int i)
{
	const int32_t id = keys[i];
	int lo = 0, hi = i; /* the first position in [0, i] holding id */
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		if (keys[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	int end = i + 1, top = slots; /* the first position in (i, slots] past id */
	while (end < top) {
		int mid = end + (top - end) / 2;
		if (keys[mid] <= id)
			end = mid + 1;
		else
			top = mid;
	}
	return gpu_embed_position(lo, end - lo, i);
}

/* Rows of partial sums (each of the embedding width) an embed_backward over `slots`
 * context slots may need: slots / GPU_EMBED_CHUNK_MIN, at least 1. */
size_t gpu_embed_partial_rows(size_t slots);

#ifdef __cplusplus
}
#endif

#endif
