/*
 * engine: the data-parallel machinery for one window, on W device threads.
 *
 * The engine owns the device pool, one replica per rank (its device, parameters,
 * gradients, momentum buffer, model workspace and host batch) and the collective. The
 * host-side scheduler (the caller) draws a window and hands it here; engine_window()
 * then runs, on every device thread:
 *   1. zero the gradients;
 *   2. for each microbatch: build the batch, forward, loss sum, backward of c * sum with
 *      c = norm_factor(...) from the scheduler's counts (gradients accumulate locally,
 *      nothing is reduced; the loss sum is added to a double on the device, so the
 *      microbatches never wait for the device);
 *   3. the rank's loss sum read back (the window's one wait for the device), then one
 *      collective of (token count, sequence count, loss sum) in double (counts are exact
 *      below 2^53): every rank checks the counts against the scheduler's N and S, and if
 *      N == 0 every rank takes the same decision from that same number and leaves before
 *      the gradient collective (the window is rejected; its microbatches were empty);
 *   4. one allreduce of the flat gradient (sum or avg);
 *      in exact mode ([train] shards > 0) steps 2-4 follow one fixed tree over the
 *      window's shards instead (engine_tree.h), whatever the number of ranks;
 *   5. optionally the optimizer step, identical on every replica (queued: the window does
 *      not wait for it; whatever reads the parameters next does).
 * Results the caller may inspect: the per-rank local gradients (when captured) and the
 * reduced gradient, on the host.
 */
#ifndef DDPTOK_ENGINE_H
#define DDPTOK_ENGINE_H

#include <stdint.h>

#include "coll.h"
#include "corpus.h"
#include "dev.h"
#include "model.h"
#include "sampler.h"
#include "pool.h"
#include "settings.h"

/* Exact mode's subtree buffers per rank: log2 of the most shards one rank adds (64). */
#define ENGINE_TREE_LEVELS 6
/* The loss sums a rank keeps on its device in a window: one per shard of its subtree. */
#define ENGINE_LOSS_SLOTS (1 << ENGINE_TREE_LEVELS)

struct replica {
	int rank;                         /* global rank: process * local + local rank */
	int local;                        /* this process's device thread */
	struct dev *dev;
	float *params, *grads, *momentum; /* device */
	float *tree[ENGINE_TREE_LEVELS];  /* exact mode: the subtree stack (engine_tree.h) */
	int tree_slots;
	/* device doubles the microbatches add their loss sums to (slot 0; exact mode: one
	 * per shard), read back once per window */
	double *loss_slots;
	struct model_ws *ws;
	struct batch batch;               /* host */
	/* per-window output */
	double loss_sum;                  /* this rank's unscaled loss sum */
	/* the window's counts and loss sum in their collective (host memory that outlives a
	 * failed call, as coll.h asks) */
	double totals[3];
};

enum engine_flags {
	ENGINE_UPDATE = 1,        /* apply the optimizer step */
	ENGINE_CAPTURE_LOCAL = 2, /* copy each rank's local gradient to the host */
	ENGINE_CAPTURE_REDUCED = 4,
	ENGINE_CHECK_REPLICAS = 8 /* compare a fingerprint of the parameters across ranks */
};

struct window_result {
	int rejected;      /* N == 0: every rank declined the window */
	int64_t N;
	int64_t rank_tokens[MAX_WORLD];
	double rank_loss_sum[MAX_WORLD];
	double rank_seconds_coll[MAX_WORLD]; /* each rank's time inside collectives */
	double loss_sum;   /* global sum of token losses */
	double loss;       /* loss_sum / N (the global token mean) */
	double grad_norm;  /* L2 norm of the reduced gradient (when captured) */
	double seconds;    /* wall time of the window */
	double seconds_coll;    /* max over ranks of the time inside collectives (their
				   barrier waits, i.e. waiting for the slowest rank, included) */
	double seconds_coll_mean; /* mean over ranks of the same */
	/* what each rank's device issued in the window (dev.h): host waits, launches, copies */
	struct dev_counts rank_counts[MAX_WORLD];
};

/* Where the ranks run: the backend, each rank's device and the collective, decided from
 * [devices] and the GPUs visible. */
struct placement {
	int backend;              /* enum dev_backend */
	int nccl;                 /* 1: NCCL collective; 0: the host allreduce */
	int ids[MAX_WORLD];  /* device of each rank, by global rank (cuda backend) */
	int threads;              /* threads of each rank (cpu backend; devices.threads resolved) */
	char why[256];            /* how the backend was chosen, for the user */
	char coll_why[160];       /* how the collective was chosen */
};

/* Which ranks share a host, for numbering GPUs when a run spans several processes:
 * host[g] names the host of global rank g (equal numbers: the same host), `here` this
 * process's. */
struct rank_hosts {
	int host[MAX_WORLD];
	int here;
};

/* The hosts of this run's ranks (world.h); ERR_CONFIG when devices.world does not divide
 * among the processes (engine_local_ranks). */
int placement_rank_hosts(const struct settings *s, struct rank_hosts *h, struct err *e);

/* Decides the device plan for `gpus` usable GPUs (gpu_why: why there are none, when 0)
 * on this host, for ranks placed on hosts as `hosts` says (NULL: all on this one).
 * backend = auto takes cuda when every rank of this host has a GPU to run on: as many
 * visible (by default a host's ranks take its GPUs 0, 1, ... in rank order), or
 * devices.ids given (ids may repeat: ranks then share a GPU). It falls back to the
 * cpu backend, saying why, only when nothing GPU-specific was asked for (devices.ids,
 * collective = nccl); otherwise the run is refused with the reason. collective = auto
 * takes NCCL on the cuda backend unless ranks share a GPU. Choices that cannot run are
 * ERR_CONFIG / ERR_DEVICE naming the key. No side effect: the engine and `env` share it
 * (src/placement.c). */
int placement_decide(const struct settings *s, const struct rank_hosts *hosts, int gpus,
		     const char *gpu_why, struct placement *p, struct err *e);
/* The usable GPUs for the settings (none asked of the driver when devices.backend = cpu,
 * or in a build without the CUDA backend); `why` says why there are none. */
int placement_gpus(const struct settings *s, int *gpus, char *why, size_t whylen,
		     struct err *e);
/* The device of global rank `rank` as the plan says (call on that rank's device
 * thread). A GPU allocates what its operations need once, here: pinned staging for
 * upload_bytes queued between two waits, and the workspace of an embed_backward over
 * embed_slots context slots of ids below embed_ids, embeddings embed_dim wide (0, 0, 0, 0:
 * the smallest, any id). */
int placement_create_dev(const struct placement *p, int rank, size_t upload_bytes,
			   size_t embed_slots, size_t embed_ids, size_t embed_dim, struct dev **out,
			   struct err *e);
/* The plan's collective over `world` ranks meeting at `barrier` (not owned); the host
 * collective stages up to max_count elements. */
int placement_create_coll(const struct placement *p, int world, struct barrier *barrier,
			    size_t max_count, struct coll **out, struct err *e);
/* The collective of this process's `local` ranks, global ranks first.. (world.h): as
 * placement_create_coll in a world of one; with several processes, once every process
 * is found to have decided the same backend and collective, one spanning them all (the
 * host collective over MPI, or one NCCL clique whose id process 0 makes and sends). On
 * failure *out may hold a collective to destroy. */
int placement_create_coll_procs(const struct placement *p, int local, int first,
				struct barrier *barrier, size_t max_count, double timeout_s,
				struct coll **out, struct err *e);

struct engine {
	struct settings s;       /* what it runs under now (engine_reset may change it) */
	struct settings made;    /* what its devices, buffers and collective were made for */
	const struct corpus *corpus;
	struct model_shape shape;
	struct pool *pool;
	struct coll *coll;
	struct replica rep[MAX_WORLD]; /* this process's ranks, by local rank */
	int world;      /* W, every process's ranks */
	int local;      /* L, this process's ranks (W = processes * L) */
	int first_rank; /* the global rank of local rank 0 */
	struct placement placement; /* backend, devices and collective actually used */
	int64_t updates_done; /* optimizer steps taken (first step: buf = g) */
	float *host_reduced;  /* n_params, filled with ENGINE_CAPTURE_REDUCED */
	float *host_local[MAX_WORLD]; /* by global rank; this process's ranks only */
	/* failure injection (tests): rank `inject_rank` fails at window index
	 * `inject_window` (-1: off) */
	int inject_rank;
	int64_t inject_window;
	int inject_swap_rank; /* exact mode, tests: this rank swaps two shards in its tree */
	int hang_rank;          /* hang injection (engine_opts) */
	int64_t hang_window;
	double hang_seconds;
	/* an operation failed on the device threads: the barrier or collective may be
	 * aborted (NCCL's for good) or a thread abandoned, so it is never reset for reuse */
	int poisoned;
};

/* This process's share of devices.world: *local ranks from global rank *first (world.h;
 * W = processes x L). ERR_CONFIG naming devices.world and devices.local when they do not
 * divide. */
int engine_local_ranks(const struct settings *s, int *local, int *first, struct err *e);

/* Options of engine_create beyond the settings. */
struct engine_opts {
	/* failure injection (tests): rank `inject_rank` fails at window index `inject_window`
	 * (-1: off) */
	int inject_rank;
	int64_t inject_window;
	/* exact mode (tests): rank `inject_swap_rank` adds its second and third shard in
	 * each other's place in the tree (-1: off), so that the bitwise check has
	 * something to catch */
	int inject_swap_rank;
	/* hang injection (tests): rank `hang_rank` stops inside the first microbatch of window
	 * index `hang_window` for `hang_seconds` (< 0: for good), as in a call that never
	 * returns; -1: off */
	int hang_rank;
	int64_t hang_window;
	double hang_seconds;
};
/* The defaults: no injected failure or hang. */
void engine_opts_init(struct engine_opts *o);

/* opts may be NULL (the defaults). */
int engine_create(const struct settings *s, const struct corpus *c,
		  const struct engine_opts *opts, struct engine **out, struct err *e);
void engine_destroy(struct engine *eng);
/* Engines this process created so far (each: its device threads, devices, collective;
 * on a GPU its streams, cuBLAS handles and NCCL communicators). */
long engine_creations(void);
/* Whether eng can run settings s after engine_reset: the same ranks, devices and
 * collective (devices.* keys, world, local), the same model shape, and room enough in
 * what it allocated for s's batches, uploads and exact mode's tree (s->shards equal to
 * the one it was made for, or 0). */
int engine_fits(const struct engine *eng, const struct settings *s);
/* The parts of a reset (tests may leave one out to show that it matters). */
enum engine_reset_part {
	ENGINE_RESET_SETTINGS = 1, /* settings, corpus and engine_opts (injections) */
	ENGINE_RESET_STATE = 2,    /* every replica's parameters, gradients, momentum, loss
				      slots and tree buffers zeroed */
	ENGINE_RESET_COUNTERS = 4, /* updates_done, the devices' counts, collective times */
	ENGINE_RESET_ALL = 7
};
/* Makes eng what engine_create(s, c, opts) gives (which also starts from zeroed
 * buffers and counters), without new devices or collective: ERR_DEVICE for a poisoned
 * engine, ERR_CONFIG when it does not fit s. */
int engine_reset(struct engine *eng, const struct settings *s, const struct corpus *c,
		 const struct engine_opts *opts, struct err *e);
/* engine_reset of the given parts only (ENGINE_RESET_ALL: engine_reset). */
int engine_reset_parts(struct engine *eng, const struct settings *s, const struct corpus *c,
		       const struct engine_opts *opts, unsigned parts, struct err *e);
/* What one rank holds in device memory for settings s (vocab resolved): parameters,
 * gradients and momentum, exact mode's tree buffers, and the model's workspace. */
struct engine_memory {
	size_t n_params, state_bytes, tree_bytes, workspace_bytes, logits_bytes, total;
	int rows;
};
void engine_memory_per_rank(const struct settings *s, struct engine_memory *m);
/* Copies host parameters (and optionally momentum, NULL = zero) to every replica. */
int engine_set_state(struct engine *eng, const float *params, const float *momentum,
		     int64_t updates_done, struct err *e);
/* Copies rank 0's parameters and momentum to the host (either may be NULL). */
int engine_get_state(struct engine *eng, float *params, float *momentum, struct err *e);
/* Runs one window with normalization `mode` (see above). */
int engine_window(struct engine *eng, const struct window *w, int mode, int flags,
		  struct window_result *res, struct err *e);
/* Single-device reference: the gradient of (sum of every supervised token loss of the
 * window) / N computed by ONE device (rank 0's) over all the window's sequences, with
 * the same microbatches in rank-major order; no collective involved. In exact mode it is
 * the whole shard tree on that device, i.e. the 1-device run, bit for bit. */
int engine_reference(struct engine *eng, const struct window *w, float *host_grad,
		     double *loss, struct err *e);
/* Loss sum, supervised positions and correct argmax predictions of a split (rank 0). */
int engine_evaluate(struct engine *eng, int split, double *loss_sum, int64_t *tokens,
		    int64_t *hits, int64_t *sequences, struct err *e);
const char *engine_backend_name(const struct engine *eng);

#endif
