/*
 * engine: the data-parallel machinery for one window, on W device threads.
 *
 * The engine owns the device pool, one replica per rank (its device, parameters,
 * gradients, optimizer state, model workspace and host batch) and the collective. The
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
 *      not wait for it; whatever reads the parameters next does): with train.clip the
 *      reduced gradient's norm (one wait) and its clipping, then SGD or AdamW at the
 *      schedule's rate (docs/optimizers.md); with train.shard_optimizer each rank updates
 *      its slice of the parameters and holds that slice's state only, the parameters
 *      then all-gathered (an update that needs neither the norm nor the whole gradient
 *      reduce-scatters it in step 4), the same bits.
 * Results the caller may inspect: the per-rank local gradients (when captured) and the
 * reduced gradient, on the host.
 */
#ifndef DDPTOK_ENGINE_H
#define DDPTOK_ENGINE_H

#include <stdint.h>

#include "corpus.h"
#include "dev.h"
#include "engine_replica.h"
#include "fault.h"
#include "sampler.h"
#include "settings.h"

enum engine_flags {
	ENGINE_UPDATE = 1,        /* apply the optimizer step */
	ENGINE_CAPTURE_LOCAL = 2, /* copy each rank's local gradient to the host */
	ENGINE_CAPTURE_REDUCED = 4,
	ENGINE_CHECK_REPLICAS = 8, /* compare a fingerprint of the parameters across ranks */
	/* the reduced gradient's norm (grad_norm), its squares added on the device, where
	 * clipping adds them too: only the sum comes back, not the gradient */
	ENGINE_GRAD_NORM = 16
};

struct window_result {
	int rejected;      /* N == 0: every rank declined the window */
	int64_t N;
	int64_t rank_tokens[MAX_WORLD];
	double rank_loss_sum[MAX_WORLD];
	double rank_seconds_coll[MAX_WORLD]; /* each rank's time inside collectives */
	double loss_sum;   /* global sum of token losses */
	double loss;       /* loss_sum / N (the global token mean), plus loss_l2 */
	double loss_l2;    /* the l2 term lambda / 2 ||theta||^2 (train.l2; 0 without) */
	double grad_norm;  /* L2 norm of the reduced gradient before clipping (with
			      ENGINE_GRAD_NORM, or with clipping: the norm it clipped by) */
	double clip_factor; /* what clipping multiplied the gradient by (1: not clipped) */
	double lr;         /* the learning rate of this window's update */
	double seconds;    /* wall time of the window */
	double seconds_coll;    /* max over ranks of the time inside collectives (their
				   barrier waits, i.e. waiting for the slowest rank, included) */
	double seconds_coll_mean; /* mean over ranks of the same */
	/* what each rank's device issued in the window (dev.h): host waits, launches, copies */
	struct dev_counts rank_counts[MAX_WORLD];
};


/* Options of engine_create beyond the settings. */
struct engine_opts {
	struct fault_injection fault; /* tests: a failure, shard swap or hang; off by default */
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
	ENGINE_RESET_STATE = 2,    /* every replica's parameters, gradients, optimizer state, loss
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
 * gradients and the optimizer's state, exact mode's tree buffers, and the model's
 * workspace. */
struct engine_memory {
	size_t n_params, state_bytes, tree_bytes, workspace_bytes, logits_bytes, total;
	/* the optimizer's state a rank holds (part of state_bytes), and the whole state:
	 * the same unless train.shard_optimizer cuts it into devices.world slices */
	size_t optim_bytes, optim_full_bytes;
	/* host memory a training process holds beside its ranks': the buffer the first
	 * parameters are made in and checkpoints are written through (ENGINE_STATE_CHUNK
	 * floats), or with model.init the whole first parameters, read from its file */
	size_t host_bytes;
	int rows;
};
void engine_memory_per_rank(const struct settings *s, struct engine_memory *m);
/* Floats of the optimizer's state under the engine's settings: n_params times
 * optim_state_vectors (SGD's momentum; AdamW's first moments, then its second). */
size_t engine_state_floats(const struct engine *eng);
/* Copies host parameters (n_params) and optionally the optimizer's state
 * (engine_state_floats; NULL = zero) to every replica. */
int engine_set_state(struct engine *eng, const float *params, const float *opt_state,
		     int64_t updates_done, struct err *e);
/* Copies rank 0's parameters and the optimizer state to the host (either may be NULL):
 * rank 0's, or with the state sharded every rank's slice, from every process (every
 * process calls it). */
int engine_get_state(struct engine *eng, float *params, float *opt_state, struct err *e);
/* The vectors of the state engine_get_range reads: the parameters, or vector k =
 * 0 .. optim_state_vectors - 1 of the optimizer's state. */
#define ENGINE_VEC_PARAMS (-1)
/* Copies floats [lo, lo + count) of one vector of the state to host (count floats):
 * rank 0's, or with the state sharded the ranks' slices in the range, from every process
 * (every process calls it, with the same range). A checkpoint reads the state range by
 * range, so that no whole copy of it is needed on the host. */
int engine_get_range(struct engine *eng, int vec, size_t lo, size_t count, float *host,
		     struct err *e);
/* Copies host (count floats) to floats [lo, lo + count) of one vector of the state on
 * every replica (the optimizer's state: to each rank's slice of it, with the state
 * sharded, its part of the range): a model's first parameters are made, and a
 * checkpoint's state is loaded, a piece at a time. Every process calls it with its own
 * copy of the range (nothing is exchanged). */
int engine_set_range(struct engine *eng, int vec, size_t lo, size_t count, const float *host,
		     struct err *e);
/* The updates done so far, as a state set range by range had them (engine_set_state sets
 * them with the whole state): the schedule's next rate and AdamW's bias corrections. */
void engine_set_updates(struct engine *eng, int64_t updates_done);
/* Floats a piece of the state read or written on the host (16 MiB): checkpoints and the
 * first parameters go through a buffer of this size. */
#define ENGINE_STATE_CHUNK ((size_t)1 << 22)
/* The learning rate of the next update, number updates_done + 1 (optim.h). */
double engine_next_lr(const struct engine *eng);
/* Runs one window with normalization `mode` (see above). A loss or gradient norm that
 * went NaN or infinite is ERR_NONFINITE, naming the window, the update and the first rank
 * whose loss sum went (the update is taken all the same); res is then filled as for a
 * window that succeeded. */
int engine_window(struct engine *eng, const struct window *w, int mode, int flags,
		  struct window_result *res, struct err *e);
/* Single-device reference: the gradient of (sum of every supervised token loss of the
 * window) / N computed by ONE device (rank 0's) over all the window's sequences, with
 * the same microbatches in rank-major order; no collective involved. In exact mode it is
 * the tree of the window's shards on that device: of a whole window's K, the 1-device run
 * bit for bit; of a one-rank window's, that rank's subtree. */
int engine_reference(struct engine *eng, const struct window *w, float *host_grad,
		     double *loss, struct err *e);
/* engine_reference with the z-loss coefficient z_loss in place of train.z_loss (0: the
 * objective without the z term, whose difference to the reference is the term's share) */
int engine_reference_z(struct engine *eng, const struct window *w, double z_loss,
		       float *host_grad, double *loss, struct err *e);
/* Loss sum, supervised positions and correct argmax predictions of a split (rank 0). */
int engine_evaluate(struct engine *eng, int split, double *loss_sum, int64_t *tokens,
		    int64_t *hits, int64_t *sequences, struct err *e);
const char *engine_backend_name(const struct engine *eng);

#endif
