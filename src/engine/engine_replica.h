/*
 * engine_replica: the engine's state, one replica per rank, and the steps of a rank that
 * both forms of the window step share (engine.c's plain one and exact mode's tree,
 * engine_tree.h): marking a microbatch for the watchdog and reading the loss sums back.
 * It sits below both, so that the window step chooses between them without either
 * reaching back into it. Not a public API: callers use engine.h.
 */
#ifndef DDPTOK_ENGINE_REPLICA_H
#define DDPTOK_ENGINE_REPLICA_H

#include <stdint.h>

#include "coll.h"
#include "corpus.h"
#include "dev.h"
#include "fault.h"
#include "model.h"
#include "placement.h"
#include "pool.h"
#include "sampler.h"
#include "settings.h"

/* Exact mode's subtree buffers per rank: log2 of the most shards one rank adds (64). */
#define ENGINE_TREE_LEVELS 6
/* The loss sums a rank keeps on its device in a window: one per shard of its subtree. */
#define ENGINE_LOSS_SLOTS (1 << ENGINE_TREE_LEVELS)

struct replica {
	int rank;                         /* global rank: process * local + local rank */
	int local;                        /* this process's device thread */
	struct dev *dev;
	float *params, *grads;            /* device */
	/* the optimizer's state (device): SGD's momentum, or AdamW's first moments then its
	 * second ones (optim_state_vectors x n_params floats) */
	float *opt_state;
	/* the parameters [state_lo, state_hi) whose optimizer state opt_state holds: all of
	 * them, or with train.shard_optimizer the rank's slice (coll_shard_range), each
	 * vector of the state then (state_hi - state_lo) floats long */
	size_t state_lo, state_hi;
	float *tree[ENGINE_TREE_LEVELS];  /* exact mode: the subtree stack (engine_tree.h) */
	int tree_slots;
	/* device doubles the microbatches add their loss sums to (slot 0; exact mode: one
	 * per shard), read back once per window */
	double *loss_slots;
	/* the objective's extra terms (engine_l2_add): terms[0] = 1, the unit operand of the
	 * GEMM that adds lambda theta */
	float *terms;
	float *class_w;                   /* train.class_weights per id on the device, or NULL */
	/* AdamW's decay table on the device (optim_decay_ranges): n_decay [lo, hi) pairs */
	int32_t *decay;
	int n_decay;
	struct model_ws *ws;              /* the model's, on the device */
	struct model_batch *batch;        /* the model's, on the host */
	/* per-window output */
	double loss_sum;                  /* this rank's unscaled loss sum */
	/* the window's counts and loss sum in their collective (host memory that outlives a
	 * failed call, as coll.h asks) */
	double totals[4];
	/* the gradient norm's block sums when the ranks share it (engine.c reduced_grad_norm;
	 * host memory, as totals), norm_blocks of them; NULL and 0 when they do not */
	double *norm_parts;
	size_t norm_blocks;
};

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
	int64_t updates_done; /* optimizer steps taken (the next is number updates_done + 1) */
	/* n_params each, allocated by the first window that captures them (NULL before) */
	float *host_reduced;  /* filled with ENGINE_CAPTURE_REDUCED */
	float *host_local[MAX_WORLD]; /* by global rank; this process's ranks only */
	struct fault_injection fault; /* tests: what to inject (engine_opts) */
	/* an operation failed on the device threads: the barrier or collective may be
	 * aborted (NCCL's for good) or a thread abandoned, so it is never reset for reuse */
	int poisoned;
	/* what the ranks of an operation read and write (engine.c): the engine's, so that a
	 * thread abandoned in an operation never touches its caller's stack */
	struct engine_args *args;
};

/* Reads r's first `count` loss slots back from the device (one wait) and adds them in the
 * pairwise tree (count a power of two; 1: the slot itself) into *loss. */
int engine_loss_read(struct replica *r, int count, double *loss, struct err *e);
/* grads += lambda theta on r's device (train.l2 = lambda; nothing when 0), one rounding
 * per component: a GEMM of the 1 x 1 unit by the parameters' row, beta 1. */
int engine_l2_add(struct engine *eng, struct replica *r, struct err *e);
/* *value = lambda / 2 ||theta||^2 of r's parameters (0 when train.l2 = 0; waits). */
int engine_l2_value(struct engine *eng, struct replica *r, double *value, struct err *e);
/* Marks microbatch or shard m (from 0) of window w as rank's operation for the pool's
 * watchdog, and runs the hang injection where it is the chosen one. */
int engine_micro_begin(struct engine *eng, int rank, const struct window *w, int m,
		       struct err *e);

#endif
