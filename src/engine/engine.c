/*
 * engine: device threads, replicas and the window step (see engine.h).
 */
#include "engine.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "engine_tree.h"
#include "norm.h"
#include "optim.h"
#include "placement.h"
#include "procs.h"
#include "world.h"

/* Positions of the largest batch of settings s, for a model of shape m. */
static int max_batch_rows(const struct model_shape *m, const struct settings *s)
{
	return model_max_rows(m, s->batch_size, s->max_len);
}

void engine_memory_per_rank(const struct settings *s, struct engine_memory *m)
{
	struct model_shape shape;
	struct err ignore;
	memset(m, 0, sizeof *m);
	/* settings_from_cfg() found the model: its shape cannot fail here */
	if (model_shape_init(&shape, s, &ignore) != ERR_OK)
		return;
	m->n_params = shape.n_params;
	m->rows = max_batch_rows(&shape, s);
	/* the optimizer's state (momentum; AdamW's two moments): with sharding the largest
	 * slice, rank 0's */
	size_t lo, hi;
	coll_shard_range(shape.n_params, s->shard_optimizer ? s->world : 1, 0, &lo, &hi);
	m->optim_bytes = (size_t)optim_state_vectors(s->optimizer) * (hi - lo) * sizeof(float);
	m->optim_full_bytes = (size_t)optim_state_vectors(s->optimizer) * shape.n_params *
			      sizeof(float);
	/* parameters, gradients and the optimizer's state */
	m->state_bytes = 2 * shape.n_params * sizeof(float) + m->optim_bytes;
	/* exact mode: rank 0 holds the most tree levels (those of all K shards) */
	int levels = s->shards > 0 ? coll_tree_levels(s->shards) : 0;
	m->tree_bytes = (size_t)(levels > 0 ? levels : 0) * shape.n_params * sizeof(float);
	m->workspace_bytes = model_ws_bytes(&shape, m->rows, &m->logits_bytes);
	m->total = m->state_bytes + m->tree_bytes + m->workspace_bytes;
	size_t piece = shape.n_params < ENGINE_STATE_CHUNK ? shape.n_params : ENGINE_STATE_CHUNK;
	m->host_bytes = (s->model_init[0] ? shape.n_params : piece) * sizeof(float);
}

/* ---- operations: one function run on the device threads ----
 *
 * Every operation of the engine is a rank_op run by on_ranks() (every rank) or
 * on_rank0() (rank 0 only, the others return at once): it gets the engine, the rank's
 * replica and the operation's own arguments. */

typedef int (*rank_op)(struct engine *eng, struct replica *r, void *arg, struct err *e);

struct op_call {
	struct engine *eng;
	rank_op op;
	void *arg;
	int rank0_only;
};

/* The operations' arguments. */

struct state_arg {
	const float *params, *opt_state;
};

/* The floats [lo, hi) of one vector of the state (engine_get_range) to fill in host,
 * which holds that range. */
struct range_arg {
	int vec;
	size_t lo, hi;
	float *host;
};

/* What each rank reports of a window, gathered from every process (by global rank). */
struct rank_outcome {
	double loss_sum;       /* the reduced loss sum the rank received */
	double local_loss_sum; /* its own unscaled loss sum */
	double seconds_coll;   /* its time inside the collective */
	int64_t rejected;
	uint64_t param_fingerprint; /* of its parameters after the update (replica check) */
	struct dev_counts counts; /* what its device issued in the window */
};

struct window_shared {
	const struct window *w;
	int mode, flags;
	double l2_term; /* lambda / 2 ||theta||^2 at the window's parameters (local rank 0) */
	double loss_sum[MAX_WORLD];
	int rejected[MAX_WORLD];
	uint64_t param_fingerprint[MAX_WORLD];
	double grad_norm[MAX_WORLD], clip_factor[MAX_WORLD]; /* with clipping, by global rank */
	struct dev_counts counts[MAX_WORLD];
	struct rank_outcome out[MAX_WORLD]; /* by global rank */
};

struct ref_arg {
	const struct window *w;
	float *host_grad;
	double z_loss; /* the z-loss coefficient it runs with */
	double loss_sum, l2_term;
};

struct eval_arg {
	int split;
	double loss_sum;
	int64_t tokens, hits, sequences;
};

/* What the ranks of an operation read and write beside the replicas: the engine's, never
 * the caller's stack. A rank the watchdog abandons may come back from a call that did not
 * return (a hang, a stuck BLAS or device call) after the operation failed and its caller
 * returned; then it still finds these, since an engine with an abandoned thread is never
 * freed (engine_destroy) and runs nothing again (engine_args), until it parks at its next
 * pool_mark(). */
struct engine_args {
	struct op_call call;
	union {
		struct state_arg state;
		struct range_arg range;
		struct window_shared window;
		struct ref_arg ref;
		struct eval_arg eval;
	} op;
};

/* The engine's arguments to fill for the next operation; NULL (error in e) once a thread
 * was abandoned, which may still be using them. */
static struct engine_args *engine_args(struct engine *eng, struct err *e)
{
	return pool_usable(eng->pool, e) == ERR_OK ? eng->args : NULL;
}

static int run_op(int rank, void *ctx, void *arg, struct err *e)
{
	const struct op_call *c = arg;
	if (c->rank0_only && rank != 0) /* rank: the thread, i.e. the local rank */
		return ERR_OK;
	return c->op(c->eng, ctx, c->arg, e);
}

/* A failed run may have aborted the barrier and collective (or abandoned a thread):
 * the engine is poisoned for good. arg: NULL or in eng->args (engine_args). */
static int on_threads(struct engine *eng, rank_op op, void *arg, int rank0_only, struct err *e)
{
	struct engine_args *a = engine_args(eng, e);
	if (!a) {
		eng->poisoned = 1;
		return e->code;
	}
	a->call = (struct op_call){eng, op, arg, rank0_only};
	int rc = pool_run(eng->pool, run_op, &a->call, e);
	if (rc != ERR_OK)
		eng->poisoned = 1;
	return rc;
}

static int on_ranks(struct engine *eng, rank_op op, void *arg, struct err *e)
{
	return on_threads(eng, op, arg, 0, e);
}

/* local rank 0 (global rank 0 in process 0; every process runs it on its own replica) */
static int on_rank0(struct engine *eng, rank_op op, void *arg, struct err *e)
{
	return on_threads(eng, op, arg, 1, e);
}

/* ---- replica lifecycle ---- */

/* A window's uploads under settings s (each microbatch's batch, or each sequence's with
 * the sequence unit, each of its arrays padded to 256 bytes: up to 255 bytes for each of
 * MODEL_MAX_ARRAYS), which nothing waits for in between; rank 0 runs all K shards for
 * exact mode's reference, token batching at most one microbatch per sequence. An arena
 * too small is still correct, but makes the device wait before it is reused. */
static size_t upload_bytes(const struct model_shape *m, const struct settings *s)
{
	size_t batch = model_upload_bytes(m, max_batch_rows(m, s));
	size_t steps = s->unit == UNIT_SEQUENCE ? (size_t)s->batch_size : 1;
	size_t micro = (size_t)(s->shards > s->accumulation ? s->shards : s->accumulation);
	if (s->batching == BATCHING_TOKENS) /* up to a microbatch per sequence of the share */
		micro = (size_t)s->accumulation * (size_t)s->batch_size;
	return (batch + 256 * MODEL_MAX_ARRAYS * steps) * micro;
}

/* train.class_weights of the engine's corpus on the replica's device, one weight per id
 * of the model's vocabulary (ids past the corpus's vocabulary, never a target, weigh 1),
 * for every model step; none (NULL) for a corpus without them. Run at creation and at
 * every reset that binds a corpus: a kept engine may serve a corpus with other weights,
 * and the kernel's table must always be the one the windows' W is the sum of. */
static int class_table(struct engine *eng, struct replica *r, void *arg, struct err *e)
{
	const struct corpus *c = eng->corpus;
	int V = eng->shape.vocab, rc = ERR_OK;
	(void)arg;
	r->ws->class_weights = NULL;
	if (!c || !c->class_weight)
		return ERR_OK;
	float *host = malloc(sizeof(float) * (size_t)V);
	if (!host)
		return ERR(e, ERR_NOMEM, "out of memory");
	for (int i = 0; i < V; i++)
		host[i] = i < c->vocab ? c->class_weight[i] : 1.0f;
	if (!r->class_w)
		rc = r->dev->ops->alloc(r->dev, sizeof(float) * (size_t)V, (void **)&r->class_w, e);
	if (rc == ERR_OK)
		rc = r->dev->ops->upload(r->dev, r->class_w, host, sizeof(float) * (size_t)V, e);
	if (rc == ERR_OK)
		rc = r->dev->ops->sync(r->dev, e);
	free(host);
	r->ws->class_weights = r->class_w;
	return rc;
}

/* Bytes of replica r's optimizer state for optimizer `kind`: its vectors over its slice
 * of the parameters. */
static size_t state_bytes(const struct replica *r, int kind)
{
	return (size_t)optim_state_vectors(kind) * (r->state_hi - r->state_lo) * sizeof(float);
}

/* The host doubles reduced_grad_norm exchanges the block sums in, where the ranks share
 * the norm (several ranks, a device that sums by blocks); none otherwise. Allocated
 * once: the collective may write into them after a failed call (coll.h). */
static int norm_parts_alloc(struct engine *eng, struct replica *r, struct err *e)
{
	size_t per = (size_t)r->dev->ops->squares_block, n = eng->shape.n_params;
	if (eng->world < 2 || !r->dev->ops->sum_squares_blocks || per == 0)
		return ERR_OK;
	r->norm_blocks = (n + per - 1) / per;
	if (!(r->norm_parts = calloc(r->norm_blocks, sizeof *r->norm_parts)))
		return ERR(e, ERR_NOMEM, "rank %d: out of memory for %zu block sums of the norm",
			   r->rank, r->norm_blocks);
	return ERR_OK;
}

/* AdamW's decay ranges (optim_decay_ranges) on replica r's device, for any optimizer:
 * engine_reset may switch to AdamW on the same buffers. Waited for, since the host copy
 * lives on this stack. */
static int decay_table(struct engine *eng, struct replica *r, struct err *e)
{
	int32_t ranges[2 * MODEL_MAX_TENSORS];
	struct dev *d = r->dev;
	r->n_decay = optim_decay_ranges(&eng->shape, ranges);
	ERR_TRY(d->ops->alloc(d, sizeof ranges, (void **)&r->decay, e));
	ERR_TRY(d->ops->upload(d, r->decay, ranges, sizeof(int32_t) * 2 * (size_t)r->n_decay, e));
	return d->ops->sync(d, e);
}

static int replica_init(struct engine *eng, struct replica *r, void *arg, struct err *e)
{
	const struct model_shape *m = &eng->shape;
	size_t bytes = m->n_params * sizeof(float);
	int rows = max_batch_rows(m, &eng->made);
	struct model_dev_needs needs;
	(void)arg;
	/* the uploads, and what the model's operations need of the device, at most */
	model_dev_needs(m, rows, &needs);
	ERR_TRY(placement_create_dev(&eng->placement, r->rank, upload_bytes(m, &eng->made),
				     needs.embed_slots, needs.embed_ids, needs.embed_dim, &r->dev,
				     e));
	struct dev *d = r->dev;
	ERR_TRY(d->ops->alloc(d, bytes, (void **)&r->params, e));
	ERR_TRY(d->ops->alloc(d, bytes, (void **)&r->grads, e));
	coll_shard_range(m->n_params, eng->made.shard_optimizer ? eng->world : 1,
			 eng->made.shard_optimizer ? r->rank : 0, &r->state_lo, &r->state_hi);
	/* at least one float: an empty slice (more ranks than parameters) still allocates */
	size_t state = state_bytes(r, eng->made.optimizer);
	ERR_TRY(d->ops->alloc(d, state ? state : sizeof(float), (void **)&r->opt_state, e));
	ERR_TRY(d->ops->alloc(d, sizeof(double) * ENGINE_LOSS_SLOTS, (void **)&r->loss_slots, e));
	ERR_TRY(decay_table(eng, r, e));
	const float unit[1] = {1.0f};
	ERR_TRY(d->ops->alloc(d, sizeof unit, (void **)&r->terms, e));
	ERR_TRY(d->ops->upload(d, r->terms, unit, sizeof unit, e));
	ERR_TRY(d->ops->sync(d, e));
	ERR_TRY(model_ws_create(d, m, rows, &r->ws, e));
	r->ws->z_loss = (float)eng->s.z_loss; /* train.z_loss, in every model step */
	ERR_TRY(class_table(eng, r, NULL, e));
	ERR_TRY(model_batch_alloc(m, rows, &r->batch, e));
	ERR_TRY(norm_parts_alloc(eng, r, e));
	return tree_replica_alloc(eng, r, e);
}

static int replica_destroy(struct engine *eng, struct replica *r, void *arg, struct err *e)
{
	(void)eng, (void)arg, (void)e;
	if (!r->dev)
		return ERR_OK;
	model_ws_destroy(r->ws);
	model_batch_free(r->batch);
	r->ws = NULL;
	r->batch = NULL;
	tree_replica_release(r);
	free(r->norm_parts);
	r->norm_parts = NULL;
	r->norm_blocks = 0;
	void *bufs[] = {r->params, r->grads, r->opt_state, r->loss_slots, r->terms, r->class_w,
			r->decay};
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		if (bufs[i])
			r->dev->ops->release(r->dev, bufs[i]);
	dev_destroy(r->dev);
	r->dev = NULL;
	return ERR_OK;
}

static int choose_backend(struct engine *eng, struct err *e)
{
	int gpus = 0;
	char why[512];
	struct rank_hosts hosts;
	ERR_TRY(placement_gpus(&eng->s, &gpus, why, sizeof why, e));
	ERR_TRY(placement_rank_hosts(&eng->s, &hosts, e));
	return placement_decide(&eng->s, &hosts, gpus, why, &eng->placement, e);
}

void engine_opts_init(struct engine_opts *o)
{
	fault_injection_off(&o->fault);
}

/* The collective of this process's ranks, spanning the other processes when there are
 * any. */
static int create_coll(struct engine *eng, struct err *e)
{
	return placement_create_coll_procs(&eng->placement, eng->local, eng->first_rank,
					   pool_barrier(eng->pool), eng->shape.n_params,
					   eng->s.timeout_s, &eng->coll, e);
}

/* The settings, corpus and options an engine runs under (opts NULL: the defaults). */
static void engine_bind(struct engine *eng, const struct settings *s, const struct corpus *c,
			const struct engine_opts *opts)
{
	struct engine_opts none;
	engine_opts_init(&none);
	if (!opts)
		opts = &none;
	eng->s = *s;
	eng->corpus = c;
	eng->fault = opts->fault;
}

static long engines_created;

long engine_creations(void)
{
	return engines_created;
}

int engine_create(const struct settings *s, const struct corpus *c,
		  const struct engine_opts *opts, struct engine **out, struct err *e)
{
	struct engine *eng = calloc(1, sizeof *eng);
	int rc;
	if (!eng)
		return ERR(e, ERR_NOMEM, "out of memory");
	engines_created++;
	if (!(eng->args = calloc(1, sizeof *eng->args))) {
		free(eng);
		return ERR(e, ERR_NOMEM, "out of memory");
	}
	engine_bind(eng, s, c, opts);
	eng->made = *s;
	eng->world = s->world;
	ERR_TRY_GOTO(rc, model_shape_init(&eng->shape, s, e), fail);
	if ((rc = procs_local_ranks(s, &eng->local, &eng->first_rank, e)) != ERR_OK) {
		/* every process computes this refusal from the same settings: each reports it
		 * and exits with it, none ends the others (several processes' MPI_Abort at
		 * once raced in Open MPI's teardown, and the run ended with SIGSEGV) */
		world_failed_together();
		goto fail;
	}
	ERR_TRY_GOTO(rc, choose_backend(eng, e), fail);
	ERR_TRY_GOTO(rc, pool_create(eng->local, s->timeout_s, &eng->pool, e), fail);
	pool_set_first_rank(eng->pool, eng->first_rank);
	for (int l = 0; l < eng->local; l++) {
		eng->rep[l].rank = eng->first_rank + l;
		eng->rep[l].local = l;
		pool_set_ctx(eng->pool, l, &eng->rep[l]);
	}
	ERR_TRY_GOTO(rc, on_ranks(eng, replica_init, NULL, e), fail);
	ERR_TRY_GOTO(rc, create_coll(eng, e), fail);
	pool_set_coll(eng->pool, eng->coll);
	/* zeroed, so that a reset engine (the same zeros) is this one in every bit */
	ERR_TRY_GOTO(rc, engine_reset_parts(eng, s, c, opts,
						  ENGINE_RESET_STATE | ENGINE_RESET_COUNTERS, e),
		     fail);
	*out = eng;
	return ERR_OK;
fail:
	engine_destroy(eng);
	return rc;
}

void engine_destroy(struct engine *eng)
{
	if (!eng)
		return;
	if (eng->pool && pool_abandoned(eng->pool)) {
		/* a device thread the watchdog gave up on may still be inside this engine (its
		 * replica, buffers, collective): nothing is freed, the process is ending */
		pool_destroy(eng->pool);
		return;
	}
	if (eng->pool) {
		struct err ignore;
		err_clear(&ignore);
		pool_set_coll(eng->pool, NULL);
		coll_destroy(eng->coll);
		on_ranks(eng, replica_destroy, NULL, &ignore);
		pool_destroy(eng->pool);
	}
	free(eng->host_reduced);
	for (int r = 0; r < MAX_WORLD; r++)
		free(eng->host_local[r]);
	free(eng->args);
	free(eng);
}

int engine_fits(const struct engine *eng, const struct settings *s)
{
	const struct settings *m = &eng->made;
	int local, first;
	struct err ignore;
	if (s->world != eng->world || procs_local_ranks(s, &local, &first, &ignore) != ERR_OK ||
	    local != eng->local || first != eng->first_rank)
		return 0;
	if (s->backend != m->backend || s->collective != m->collective || s->n_ids != m->n_ids ||
	    memcmp(s->ids, m->ids, sizeof s->ids) != 0 || s->timeout_s != m->timeout_s)
		return 0;
	struct model_shape shape;
	char why[256];
	if (model_shape_init(&shape, s, &ignore) != ERR_OK ||
	    !model_shape_same(&shape, &eng->shape, why, sizeof why))
		return 0;
	return max_batch_rows(&shape, s) <= max_batch_rows(&shape, m) &&
	       upload_bytes(&shape, s) <= upload_bytes(&shape, m) &&
	       optim_state_vectors(s->optimizer) <= optim_state_vectors(m->optimizer) &&
	       s->shard_optimizer == m->shard_optimizer &&
	       (s->shards == m->shards || s->shards == 0);
}

/* A fresh engine's device state: every buffer of the replica zero, nothing counted. */
static int zero_state(struct engine *eng, struct replica *r, void *arg, struct err *e)
{
	struct dev *d = r->dev;
	size_t bytes = eng->shape.n_params * sizeof(float);
	float *bufs[2 + ENGINE_TREE_LEVELS] = {r->params, r->grads};
	(void)arg;
	for (int i = 0; i < r->tree_slots; i++)
		bufs[2 + i] = r->tree[i];
	for (int i = 0; i < 2 + r->tree_slots; i++)
		ERR_TRY(d->ops->zero(d, bufs[i], bytes, e));
	ERR_TRY(d->ops->zero(d, r->opt_state, state_bytes(r, eng->made.optimizer), e));
	ERR_TRY(d->ops->zero(d, r->loss_slots, sizeof(double) * ENGINE_LOSS_SLOTS, e));
	r->loss_sum = 0.0;
	return d->ops->sync(d, e);
}

static int zero_counts(struct engine *eng, struct replica *r, void *arg, struct err *e)
{
	(void)eng, (void)arg, (void)e;
	memset(&r->dev->counts, 0, sizeof r->dev->counts);
	return ERR_OK;
}

int engine_reset_parts(struct engine *eng, const struct settings *s, const struct corpus *c,
		       const struct engine_opts *opts, unsigned parts, struct err *e)
{
	if (eng->poisoned || pool_abandoned(eng->pool))
		return ERR(e, ERR_DEVICE, "this engine failed in an earlier operation (its barrier "
			   "or collective may be aborted): it cannot be reused");
	if (!engine_fits(eng, s))
		return ERR(e, ERR_CONFIG, "an engine of %d ranks made for other devices, model or "
			   "batch sizes cannot run these settings (%d ranks)", eng->world, s->world);
	if (parts & ENGINE_RESET_SETTINGS) {
		engine_bind(eng, s, c, opts);
		ERR_TRY(on_ranks(eng, class_table, NULL, e));
	}
	if (parts & ENGINE_RESET_STATE)
		ERR_TRY(on_ranks(eng, zero_state, NULL, e));
	if (parts & ENGINE_RESET_COUNTERS) {
		eng->updates_done = 0;
		for (int l = 0; l < eng->local; l++)
			eng->coll->seconds[l] = 0;
		ERR_TRY(on_ranks(eng, zero_counts, NULL, e));
	}
	return ERR_OK;
}

int engine_reset(struct engine *eng, const struct settings *s, const struct corpus *c,
		 const struct engine_opts *opts, struct err *e)
{
	return engine_reset_parts(eng, s, c, opts, ENGINE_RESET_ALL, e);
}

const char *engine_backend_name(const struct engine *eng)
{
	return eng->placement.backend == DEV_BACKEND_CUDA ? "cuda" : "cpu";
}

/* ---- state ---- */

size_t engine_state_floats(const struct engine *eng)
{
	return (size_t)optim_state_vectors(eng->s.optimizer) * eng->shape.n_params;
}

/* Copies between the host's full optimizer state (optim_state_vectors x n_params floats,
 * the checkpoint's layout) and replica r's slice of it, one vector at a time. */
static int state_slices(struct engine *eng, struct replica *r, float *host, int to_host,
			struct err *e)
{
	size_t n = eng->shape.n_params, lo = r->state_lo, len = r->state_hi - lo;
	for (int k = 0; k < optim_state_vectors(eng->s.optimizer); k++) {
		float *full = host + (size_t)k * n + lo, *mine = r->opt_state + (size_t)k * len;
		if (len == 0)
			continue;
		if (to_host)
			ERR_TRY(r->dev->ops->download(r->dev, full, mine, len * sizeof(float), e));
		else
			ERR_TRY(r->dev->ops->upload(r->dev, mine, full, len * sizeof(float), e));
	}
	return ERR_OK;
}

static int set_state(struct engine *eng, struct replica *r, void *arg, struct err *e)
{
	const struct state_arg *a = arg;
	size_t bytes = eng->shape.n_params * sizeof(float);
	ERR_TRY(r->dev->ops->upload(r->dev, r->params, a->params, bytes, e));
	if (a->opt_state)
		ERR_TRY(state_slices(eng, r, (float *)a->opt_state, 0, e));
	else
		ERR_TRY(r->dev->ops->zero(r->dev, r->opt_state, state_bytes(r, eng->s.optimizer),
					  e));
	return r->dev->ops->sync(r->dev, e);
}

int engine_set_state(struct engine *eng, const float *params, const float *opt_state,
		     int64_t updates_done, struct err *e)
{
	struct engine_args *a = engine_args(eng, e);
	if (!a)
		return e->code;
	a->op.state = (struct state_arg){params, opt_state};
	eng->updates_done = updates_done;
	return on_ranks(eng, set_state, &a->op.state, e);
}

/* The part [*lo, *hi) of a range of state vector vec that replica r holds (all of it
 * without sharding, whose slice is the whole vector), and where it starts on r; NULL when
 * r holds none of it. */
static float *slice_part(const struct replica *r, int vec, size_t *lo, size_t *hi)
{
	*lo = *lo > r->state_lo ? *lo : r->state_lo;
	*hi = *hi < r->state_hi ? *hi : r->state_hi;
	if (*lo >= *hi)
		return NULL;
	/* a slice's vectors follow one another, each state_hi - state_lo long */
	return r->opt_state + (size_t)vec * (r->state_hi - r->state_lo) + (*lo - r->state_lo);
}

/* Local rank 0's part of the range (every replica holds all the parameters, and without
 * sharding the whole optimizer state), or with the state sharded each local rank's part
 * of it, its slice cut to the range. */
static int get_range(struct engine *eng, struct replica *r, void *arg, struct err *e)
{
	const struct range_arg *a = arg;
	size_t n = eng->shape.n_params, lo = a->lo, hi = a->hi;
	const float *src;
	if (a->vec == ENGINE_VEC_PARAMS || !eng->made.shard_optimizer) {
		if (r->local != 0)
			return ERR_OK;
		src = (a->vec == ENGINE_VEC_PARAMS ? r->params : r->opt_state + (size_t)a->vec * n) +
		      lo;
	} else if (!(src = slice_part(r, a->vec, &lo, &hi))) {
		return ERR_OK;
	}
	return r->dev->ops->download(r->dev, a->host + (lo - a->lo), src,
				     (hi - lo) * sizeof(float), e);
}

/* The parameters [*lo, *hi) whose sharded optimizer state process p's ranks hold: the
 * contiguous slices of its ranks p * L .. p * L + L - 1. */
static void process_state_range(const struct engine *eng, int p, size_t *lo, size_t *hi)
{
	size_t ignore;
	coll_shard_range(eng->shape.n_params, eng->world, p * eng->local, lo, &ignore);
	coll_shard_range(eng->shape.n_params, eng->world, p * eng->local + eng->local - 1,
			 &ignore, hi);
}

/* The other processes' parts of a range of the sharded optimizer state into a->host:
 * every process sends the whole range, its own part in place, and keeps the others'. */
static int gather_range_processes(struct engine *eng, const struct range_arg *a,
				  struct err *e)
{
	const struct world *wd = world_get();
	size_t len = a->hi - a->lo, lo, hi;
	float *all = calloc(len * (size_t)wd->procs, sizeof(float));
	if (!all)
		return ERR(e, ERR_NOMEM, "out of memory for the optimizer state's gather (%zu "
			   "floats)", len * (size_t)wd->procs);
	int rc = world_allgather(a->host, len * sizeof(float), all, eng->s.timeout_s,
				 "the optimizer state's gather", e);
	for (int p = 0; rc == ERR_OK && p < wd->procs; p++) {
		process_state_range(eng, p, &lo, &hi);
		lo = lo > a->lo ? lo : a->lo;
		hi = hi < a->hi ? hi : a->hi;
		if (p != wd->proc && lo < hi)
			memcpy(a->host + (lo - a->lo), all + (size_t)p * len + (lo - a->lo),
			       (hi - lo) * sizeof(float));
	}
	free(all);
	return rc;
}

/* The engine's argument of a range operation on vector vec, [lo, lo + count), or NULL
 * (e says why). */
static struct range_arg *range_of(struct engine *eng, int vec, size_t lo, size_t count,
				  float *host, struct err *e)
{
	struct engine_args *a = engine_args(eng, e);
	if (!a)
		return NULL;
	assert(vec >= ENGINE_VEC_PARAMS && vec < optim_state_vectors(eng->s.optimizer));
	assert(lo + count <= eng->shape.n_params);
	a->op.range = (struct range_arg){vec, lo, lo + count, host};
	return &a->op.range;
}

int engine_get_range(struct engine *eng, int vec, size_t lo, size_t count, float *host,
		     struct err *e)
{
	struct range_arg *r = range_of(eng, vec, lo, count, host, e);
	if (!r)
		return e->code;
	ERR_TRY(on_ranks(eng, get_range, r, e));
	if (vec != ENGINE_VEC_PARAMS && eng->made.shard_optimizer && world_get()->procs > 1)
		return gather_range_processes(eng, r, e);
	return ERR_OK;
}

/* The parameters of the range (every replica holds them all), or the part of the range
 * of a state vector that replica r holds: all of it, or with the state sharded its
 * slice's. */
static int set_range(struct engine *eng, struct replica *r, void *arg, struct err *e)
{
	const struct range_arg *a = arg;
	size_t lo = a->lo, hi = a->hi;
	float *dst;
	if (a->vec == ENGINE_VEC_PARAMS)
		dst = r->params + lo;
	else if (!(dst = slice_part(r, a->vec, &lo, &hi)))
		return ERR_OK;
	ERR_TRY(r->dev->ops->upload(r->dev, dst, a->host + (lo - a->lo),
				    (hi - lo) * sizeof(float), e));
	return r->dev->ops->sync(r->dev, e);
}

int engine_set_range(struct engine *eng, int vec, size_t lo, size_t count, const float *host,
		     struct err *e)
{
	/* host is only read: the argument's pointer serves both directions */
	struct range_arg *r = range_of(eng, vec, lo, count, (float *)host, e);
	if (!r)
		return e->code;
	return on_ranks(eng, set_range, r, e);
}

void engine_set_updates(struct engine *eng, int64_t updates_done)
{
	eng->updates_done = updates_done;
}

int engine_get_state(struct engine *eng, float *params, float *opt_state, struct err *e)
{
	size_t n = eng->shape.n_params;
	if (params)
		ERR_TRY(engine_get_range(eng, ENGINE_VEC_PARAMS, 0, n, params, e));
	for (int k = 0; opt_state && k < optim_state_vectors(eng->s.optimizer); k++)
		ERR_TRY(engine_get_range(eng, k, 0, n, opt_state + (size_t)k * n, e));
	return ERR_OK;
}

/* ---- the window step ---- */

/* The sequence unit: each sequence of microbatch m of rank `rank` is its own step on
 * replica r, with its own factor (1 / n_s of its unit's); the sequences' mean losses are
 * added to r's loss slot 0 (device). */
static int accumulate_sequences(struct engine *eng, struct replica *r, const struct window *w,
				int rank, int m, int mode, int reduce_avg, struct err *e)
{
	const struct microbatch *mb = &w->mb[rank][m];
	for (int k = 0; k < mb->n; k++) {
		int64_t n_s = corpus_supervised(eng->corpus, mb->ids[k]);
		if (n_s == 0)
			continue;
		double c = norm_unit_factor(UNIT_SEQUENCE, mode, reduce_avg, w, rank, m, n_s);
		ERR_TRY(model_batch_build(r->batch, eng->corpus, &mb->ids[k], 1, eng->s.layout, e));
		ERR_TRY(model_step(r->ws, r->params, r->grads, r->batch, (float)c, (double)n_s,
				       r->loss_slots, e));
	}
	return ERR_OK;
}

/* ws->out for every rank of every process: the local ranks' outcomes, gathered. */
static int gather_outcomes(struct engine *eng, struct window_shared *ws, struct err *e)
{
	struct rank_outcome mine[MAX_WORLD];
	for (int l = 0; l < eng->local; l++) {
		int g = eng->first_rank + l;
		mine[l] = (struct rank_outcome){ws->loss_sum[g], eng->rep[l].loss_sum,
						eng->coll->seconds[l], ws->rejected[g],
						ws->param_fingerprint[g], ws->counts[g]};
	}
	return world_allgather(mine, sizeof mine[0] * (size_t)eng->local, ws->out,
			       eng->s.timeout_s, "the exchange of window outcomes", e);
}

/* Default mode: the rank's microbatches accumulate into its gradient, each with its
 * normalization factor; the unscaled loss sum (the sequence unit: the sum of the
 * sequences' mean losses) is added to its loss slot 0 on the device. */
static int accumulate_micro(struct engine *eng, struct window_shared *ws, struct replica *r,
			    struct err *e)
{
	const struct window *w = ws->w;
	const struct settings *s = &eng->s;
	int avg = s->reduce == COLL_AVG;
	for (int m = 0; m < w->rank_micro[r->rank]; m++) {
		const struct microbatch *mb = &w->mb[r->rank][m];
		ERR_TRY(engine_micro_begin(eng, r->rank, w, m, e));
		if (s->unit == UNIT_SEQUENCE) {
			ERR_TRY(accumulate_sequences(eng, r, w, r->rank, m, ws->mode, avg, e));
			continue;
		}
		double c = norm_unit_factor(UNIT_TOKEN, ws->mode, avg, w, r->rank, m, 0);
		ERR_TRY(model_batch_build(r->batch, eng->corpus, mb->ids, mb->n, s->layout, e));
		ERR_TRY(model_step(r->ws, r->params, r->grads, r->batch, (float)c, 1.0,
				       r->loss_slots, e));
	}
	return ERR_OK;
}

/* The window's counts and loss sums in one collective (sum, in double: the counts are
 * exact), after this rank's loss sum was read back: *count, *seqs and *sum get the
 * totals; ERR_DEVICE when a count differs from the scheduler's. Every rank decides from
 * the same totals. Exact mode adds the loss sums in its tree. */
static int window_totals(struct engine *eng, struct replica *r, const struct window *w,
			 double local, int64_t *count, double *sum, struct err *e)
{
	struct coll *c = eng->coll;
	double *totals = r->totals;
	int n = w->weighted ? 4 : 3; /* with class weights, the rank's weight sum too */
	totals[0] = (double)w->rank_tokens[r->rank];
	totals[1] = (double)w->rank_sequences[r->rank];
	totals[2] = local;
	totals[3] = w->rank_weight[r->rank];
	ERR_TRY(pool_mark_wait(eng->pool, r->local, "the count and loss allreduce", e));
	if (eng->s.shards > 0)
		ERR_TRY(c->ops->allreduce_tree(c, r->local, r->dev, totals, n, COLL_F64, 1, e));
	else
		ERR_TRY(c->ops->allreduce(c, r->local, r->dev, totals, n, COLL_F64, COLL_SUM, 1,
					  e));
	/* the scheduler's W (rank order) is the divisor; the collective's may be added in
	 * another order, so it must agree to within the double's rounding */
	if (w->weighted && !(fabs(totals[3] - w->W) <= 1e-12 * fabs(w->W)))
		return ERR(e, ERR_DEVICE, "the collective added the class weights to %.17g, the "
			   "scheduler to %.17g", totals[3], w->W);
	*count = (int64_t)totals[0];
	*sum = totals[2];
	if (*count != w->N)
		return ERR(e, ERR_DEVICE, "the collective counted %lld supervised tokens, the "
			   "scheduler %lld", (long long)*count, (long long)w->N);
	if (eng->s.unit == UNIT_SEQUENCE && (int64_t)totals[1] != w->S)
		return ERR(e, ERR_DEVICE, "the collective counted %lld sequences, the scheduler "
			   "%lld", (long long)totals[1], (long long)w->S);
	return ERR_OK;
}

/* This rank's microbatches (or subtree of shards) into its gradient; *local: its loss
 * sum, read back from the device (the window's one wait for it). Nothing to do in a
 * window without a supervised token. */
static int window_accumulate(struct engine *eng, struct replica *r, struct window_shared *ws,
			     double *local, struct err *e)
{
	const struct window *w = ws->w;
	*local = 0.0;
	if (w->N == 0)
		return ERR_OK;
	if (eng->s.shards > 0)
		return tree_subtree(eng, r, w, r->rank, r->rank * w->micro, w->micro, ws->mode,
				    r->rank == eng->fault.inject_swap_rank, local, e);
	ERR_TRY(r->dev->ops->zero(r->dev, r->loss_slots, sizeof(double), e));
	ERR_TRY(accumulate_micro(eng, ws, r, e));
	return engine_loss_read(r, 1, local, e);
}

/* ---- the optimizer step (docs/optimizers.md) ---- */

double engine_next_lr(const struct engine *eng)
{
	const struct settings *s = &eng->s;
	struct lr_plan plan = {s->schedule, s->lr, s->lr_min, s->warmup, s->updates};
	return optim_lr(&plan, eng->updates_done + 1);
}

/* AdamW on replica r at rate lr over the parameters its state holds (state_lo ..
 * state_hi), in one operation: the matrices decay by lr * weight_decay (the replica's
 * decay table, in the whole vector's elements), the others not; the first moments fill
 * the state's first vector, the second its second. Element-wise: a slice's bits are
 * those of the whole's. */
static int adamw_step(struct engine *eng, struct replica *r, float lr, struct err *e)
{
	const struct settings *s = &eng->s;
	int64_t t = eng->updates_done + 1;
	struct dev_adamw a = {lr, (float)s->beta1, (float)s->beta2, (float)s->eps,
			      (float)s->weight_decay, (float)optim_bias_correction(s->beta1, t),
			      (float)optim_bias_correction(s->beta2, t), r->n_decay, r->decay};
	size_t first = r->state_lo, n = r->state_hi - first;
	float *m1 = r->opt_state, *m2 = r->opt_state + n;
	if (n == 0) /* an empty slice: more ranks than parameters */
		return ERR_OK;
	return r->dev->ops->adamw(r->dev, (int)n, (int)first, &a, r->params + first,
				  r->grads + first, m1, m2, e);
}

/* Whether a window with these flags needs the reduced gradient's norm: asked for, or
 * for clipping. */
static int window_wants_norm(const struct engine *eng, int flags)
{
	return (flags & ENGINE_GRAD_NORM) || ((flags & ENGINE_UPDATE) && eng->s.clip > 0);
}

/* The reduced gradient's L2 norm: its squares added in the device's fixed order, the
 * same bits on every replica; the one rule for clipping and for the reported norm. Where
 * that order is block sums added in block order (dev.h sum_squares_blocks) and there are
 * several ranks, the ranks share the work: rank g sums its range of the blocks (cut as
 * coll_shard_range cuts), a collective of doubles gives every rank every block's sum
 * (exact: each element is one rank's sum plus the others' zeros) and each adds them in
 * block order, so the bits are those of one rank summing the whole. */
static int reduced_grad_norm(struct engine *eng, struct replica *r, double *norm,
			     struct err *e)
{
	const struct dev_ops *o = r->dev->ops;
	int n = (int)eng->shape.n_params;
	double squares = 0.0;
	if (!r->norm_blocks) {
		ERR_TRY(o->sum_squares(r->dev, n, r->grads, &squares, e));
		*norm = sqrt(squares);
		return ERR_OK;
	}
	size_t lo, hi, blocks = r->norm_blocks;
	coll_shard_range(blocks, eng->world, r->rank, &lo, &hi);
	memset(r->norm_parts, 0, sizeof *r->norm_parts * blocks);
	if (hi > lo)
		ERR_TRY(o->sum_squares_blocks(r->dev, n, r->grads, (int)lo, (int)hi,
					      r->norm_parts + lo, e));
	ERR_TRY(pool_mark_wait(eng->pool, r->local, "the gradient norm's block sums", e));
	ERR_TRY(eng->coll->ops->allreduce(eng->coll, r->local, r->dev, r->norm_parts, blocks,
					  COLL_F64, COLL_SUM, 1, e));
	for (size_t b = 0; b < blocks; b++)
		squares += r->norm_parts[b];
	*norm = sqrt(squares);
	return ERR_OK;
}

/* Replica r's update from its reduced gradient, the same bits on every replica: with
 * clipping on, the factor (*factor) that the gradient's norm (before clipping) scales it
 * by; then update number updates_done + 1 at the schedule's rate, by SGD or AdamW, of
 * the parameters whose state the replica holds; with the state sharded, the parameters
 * all-gathered from the ranks' slices. */
static int optimizer_step(struct engine *eng, struct replica *r, double norm, double *factor,
			  struct err *e)
{
	const struct settings *s = &eng->s;
	struct dev *d = r->dev;
	size_t lo = r->state_lo;
	int n = (int)(r->state_hi - lo);
	float lr = (float)engine_next_lr(eng);
	*factor = 1.0;
	if (s->clip > 0) {
		/* a NaN norm leaves the gradient unscaled, +inf scales it by 0 (clip / inf);
		 * either way engine_window refuses the window (exit 12), and nothing
		 * checkpoints its update */
		*factor = optim_clip_factor(norm, s->clip);
		if (*factor < 1.0 && n > 0)
			ERR_TRY(d->ops->scale(d, n, (float)*factor, r->grads + lo, e));
	}
	if (s->optimizer == OPTIM_ADAMW)
		ERR_TRY(adamw_step(eng, r, lr, e));
	else if (n > 0)
		ERR_TRY(d->ops->sgd(d, n, lr, (float)s->momentum, (float)s->weight_decay,
				    eng->updates_done == 0, r->params + lo, r->grads + lo,
				    r->opt_state, e));
	if (!eng->made.shard_optimizer)
		return ERR_OK;
	ERR_TRY(pool_mark_wait(eng->pool, r->local, "the parameters' all-gather", e));
	return eng->coll->ops->all_gather(eng->coll, r->local, d, r->params, eng->shape.n_params,
					  e);
}

/* Whether the window reduce-scatters its gradient rather than allreducing it: with the
 * state sharded, in an update that reads only the rank's slice of the gradient. The
 * norm is summed over the whole gradient in the device's one order (sum_squares), which
 * slices' partial sums would not repeat, and a captured gradient is the whole: both
 * take the allreduce (the same bits in every slice). */
static int window_scatters(const struct engine *eng, int flags)
{
	return eng->made.shard_optimizer && (flags & ENGINE_UPDATE) &&
	       !window_wants_norm(eng, flags) && !(flags & ENGINE_CAPTURE_REDUCED);
}

/* The rank's gradient reduced over the ranks: allreduced (exact mode: in its tree), or
 * its slice reduce-scattered (window_scatters) in the same order. */
static int window_reduce(struct engine *eng, struct replica *r, int flags, struct err *e)
{
	struct coll *c = eng->coll;
	size_t n = eng->shape.n_params;
	enum coll_op op = eng->s.reduce == COLL_AVG ? COLL_AVG : COLL_SUM;
	int tree = eng->s.shards > 0;
	if (window_scatters(eng, flags)) {
		ERR_TRY(c->ops->reduce_scatter(c, r->local, r->dev, r->grads, n, op, tree, e));
		return tree ? tree_finish(eng, r, e) : ERR_OK;
	}
	if (tree)
		return tree_reduce(eng, r, e);
	return c->ops->allreduce(c, r->local, r->dev, r->grads, n, COLL_F32, op, 0, e);
}

/* The l2 term, before the gradient collective: its gradient lambda theta must reach the
 * reduced gradient once. Under avg every rank adds it (the collective's mean of W
 * copies is one); under sum rank 0 alone does: the sum then holds it once, the same
 * float lambda theta the reference adds, where lambda theta / W on every rank would
 * round W times (W = 3: 1/3 is no binary fraction). The control l2_every_rank adds it on
 * every rank whatever the reduce. Local rank 0 also evaluates the term for the loss. */
static int window_l2(struct engine *eng, struct replica *r, struct window_shared *ws,
		     struct err *e)
{
	if (eng->s.reduce == COLL_AVG || r->rank == 0 || ws->mode == NORM_L2_EVERY_RANK)
		ERR_TRY(engine_l2_add(eng, r, e));
	if (r->local == 0)
		ERR_TRY(engine_l2_value(eng, r, &ws->l2_term, e));
	return ERR_OK;
}

static int window_work(struct engine *eng, struct replica *r, struct window_shared *ws,
		       struct err *e)
{
	const int rank = r->rank;
	struct dev *d = r->dev;
	const struct dev_ops *o = d->ops;
	const struct window *w = ws->w;
	const struct settings *s = &eng->s;
	size_t n = eng->shape.n_params;

	if (eng->fault.inject_rank == rank && eng->fault.inject_window == w->index)
		return ERR(e, ERR_DEVICE, "injected failure at window %lld",
			   window_number(w));

	ERR_TRY(o->zero(d, r->grads, n * sizeof(float), e));
	r->loss_sum = 0.0; /* a declined window reports no stale sum of the previous one */
	/* the z-loss rides in each token's loss and its factor; only its control moves it */
	r->ws->z_loss = (float)(s->z_loss * norm_z_scale(s->unit, ws->mode, w, rank));

	double local = 0.0, sum = 0.0;
	int64_t count = 0;
	/* a non-finite loss sum goes on through the window like any other (every rank takes
	 * part in the same collectives): engine_window refuses the outcome, naming this rank */
	ERR_TRY(window_accumulate(eng, r, ws, &local, e));
	/* the global counts go through the collective, like they would across processes;
	 * each step is marked for the pool's watchdog, which names the step of a late rank */
	ERR_TRY(window_totals(eng, r, w, local, &count, &sum, e));
	if (count == 0 || (w->weighted && !(w->W > 0.0))) {
		/* every rank reaches this branch from the same number: nobody enters the
		 * gradient collective that the others would skip (with class weights, a window
		 * whose targets all weigh 0 has no mean either) */
		ws->rejected[rank] = 1;
		return ERR_OK;
	}
	r->loss_sum = local;
	ws->loss_sum[rank] = sum;
	ERR_TRY(window_l2(eng, r, ws, e));

	if (ws->flags & ENGINE_CAPTURE_LOCAL)
		ERR_TRY(o->download(d, eng->host_local[rank], r->grads, n * sizeof(float), e));

	ERR_TRY(pool_mark_wait(eng->pool, r->local, "the gradient allreduce", e));
	ERR_TRY(window_reduce(eng, r, ws->flags, e));

	if (r->local == 0 && (ws->flags & ENGINE_CAPTURE_REDUCED))
		ERR_TRY(o->download(d, eng->host_reduced, r->grads, n * sizeof(float), e));

	ERR_TRY(pool_mark(eng->pool, r->local, "the optimizer step", 0, e));
	if (window_wants_norm(eng, ws->flags))
		ERR_TRY(reduced_grad_norm(eng, r, &ws->grad_norm[rank], e));
	if (ws->flags & ENGINE_UPDATE)
		ERR_TRY(optimizer_step(eng, r, ws->grad_norm[rank], &ws->clip_factor[rank], e));

	/* computed on the device: only its 8 bytes come back */
	if (ws->flags & ENGINE_CHECK_REPLICAS)
		ERR_TRY(o->fingerprint(d, (int)n, r->params, 0, &ws->param_fingerprint[rank], e));
	return ERR_OK;
}

/* The rank's window, and what its device issued in it (the collectives' waits included). */
static int window_step(struct engine *eng, struct replica *r, void *arg, struct err *e)
{
	struct window_shared *ws = arg;
	const struct dev_counts before = r->dev->counts;
	int rc = window_work(eng, r, ws, e);
	const struct dev_counts *now = &r->dev->counts;
	ws->counts[r->rank] = dev_counts_since(now, &before);
	return rc;
}

/* ERR_NONFINITE when window w's loss or (when it was computed) its gradient norm went NaN
 * or infinite: a diverged run, or parameters that were not finite. res stays filled, for
 * the caller's record of the window. The ranks' loss sums say where the loss went first;
 * a gradient that alone went non-finite is only seen reduced, where no rank can be told
 * apart. */
static int window_finite(const struct engine *eng, const struct window *w,
			 const struct window_result *res, int have_norm, struct err *e)
{
	char where[96] = "";
	if (isfinite(res->loss) && (!have_norm || isfinite(res->grad_norm)))
		return ERR_OK;
	for (int r = 0; r < eng->world; r++)
		if (!isfinite(res->rank_loss_sum[r])) {
			snprintf(where, sizeof where, " (first on rank %d, whose loss sum is %g)", r,
				 res->rank_loss_sum[r]);
			break;
		}
	return ERR(e, ERR_NONFINITE, "window %lld (update %" PRId64 ") went non-finite: loss "
		   "%g%s, gradient norm %g at learning rate %g", window_number(w),
		   eng->updates_done, res->loss, where, have_norm ? res->grad_norm : NAN, res->lr);
}

/* The host copies of the gradients a window captures, allocated by the first window that
 * captures them: a training process, which captures none, holds none (they are W + 1
 * vectors of the model's size). */
static int capture_buffers(struct engine *eng, int flags, struct err *e)
{
	size_t bytes = eng->shape.n_params * sizeof(float);
	if ((flags & ENGINE_CAPTURE_REDUCED) && !eng->host_reduced &&
	    !(eng->host_reduced = malloc(bytes)))
		return ERR(e, ERR_NOMEM, "out of memory for the reduced gradient's host copy");
	for (int r = 0; r < eng->world && (flags & ENGINE_CAPTURE_LOCAL); r++)
		if (!eng->host_local[r] && !(eng->host_local[r] = malloc(bytes)))
			return ERR(e, ERR_NOMEM, "out of memory for rank %d's gradient's host copy",
				   r);
	return ERR_OK;
}

int engine_window(struct engine *eng, const struct window *w, int mode, int flags,
		  struct window_result *res, struct err *e)
{
	double t0 = clock_now_s();
	memset(res, 0, sizeof *res);
	ERR_TRY(capture_buffers(eng, flags, e));
	if (w->world != eng->world)
		return ERR(e, ERR_DEVICE, "window planned for %d ranks, engine has %d", w->world,
			   eng->world);
	if (eng->s.shards > 0 && w->world * w->micro != eng->s.shards)
		return ERR(e, ERR_DEVICE, "window of %d x %d microbatches, exact mode adds %d shards",
			   w->world, w->micro, eng->s.shards);
	struct engine_args *args = engine_args(eng, e);
	if (!args) {
		err_prefix(e, "window %lld", window_number(w));
		return e->code;
	}
	struct window_shared *ws = &args->op.window;
	memset(ws, 0, sizeof *ws);
	ws->w = w;
	ws->mode = mode;
	ws->flags = flags;
	res->lr = engine_next_lr(eng);
	res->clip_factor = 1.0;
	/* the collective times itself (its barrier waits included) */
	for (int l = 0; l < eng->local; l++)
		eng->coll->seconds[l] = 0;
	int rc = on_ranks(eng, window_step, ws, e);
	if (rc == ERR_OK && (rc = gather_outcomes(eng, ws, e)) != ERR_OK)
		eng->poisoned = 1; /* the processes may no longer be in step */
	if (rc != ERR_OK) {
		err_prefix(e, "window %lld", window_number(w));
		return rc;
	}
	const struct rank_outcome *out = ws->out;
	res->N = w->N;
	for (int r = 0; r < eng->world; r++) {
		res->rank_tokens[r] = w->rank_tokens[r];
		res->rank_loss_sum[r] = out[r].local_loss_sum;
		res->rank_seconds_coll[r] = out[r].seconds_coll;
		res->rank_counts[r] = out[r].counts;
		if (out[r].rejected != out[0].rejected)
			return ERR(e, ERR_DEVICE, "window %lld: ranks disagree on rejecting it",
				   window_number(w));
		if (out[r].seconds_coll > res->seconds_coll)
			res->seconds_coll = out[r].seconds_coll;
		res->seconds_coll_mean += out[r].seconds_coll / eng->world;
	}
	res->seconds = clock_now_s() - t0;
	if (out[0].rejected) {
		res->rejected = 1;
		return ERR_OK;
	}
	for (int r = 1; r < eng->world; r++)
		if (memcmp(&out[r].loss_sum, &out[0].loss_sum, sizeof out[0].loss_sum) != 0)
			return ERR(e, ERR_DEVICE, "window %lld: ranks received different loss sums",
				   window_number(w));
	if (flags & ENGINE_CHECK_REPLICAS)
		for (int r = 1; r < eng->world; r++)
			if (out[r].param_fingerprint != out[0].param_fingerprint)
				return ERR(e, ERR_CHECK,
					   "window %lld: replica %d's parameters differ from rank 0's",
					   window_number(w), r);
	res->loss_sum = out[0].loss_sum;
	res->loss_l2 = ws->l2_term;
	res->loss = out[0].loss_sum / norm_unit_total(eng->s.unit, w) + ws->l2_term;
	if (window_wants_norm(eng, flags))
		res->grad_norm = ws->grad_norm[eng->first_rank];
	if ((flags & ENGINE_UPDATE) && eng->s.clip > 0) /* what the step scaled by */
		res->clip_factor = ws->clip_factor[eng->first_rank];
	if (flags & ENGINE_UPDATE)
		eng->updates_done++;
	return window_finite(eng, w, res, window_wants_norm(eng, flags), e);
}

/* ---- single-device reference ---- */

static int reference_steps(struct engine *eng, struct replica *r, struct ref_arg *a,
			   struct err *e)
{
	const struct window *w = a->w;
	struct dev *d = r->dev;
	size_t n = eng->shape.n_params;
	if (eng->s.shards > 0) {
		/* the window's shards in the tree on one device: for a whole window all K of
		 * them, the 1-device run; for one rank's share (a one-rank window) its own
		 * K / W, the subtree that rank adds */
		ERR_TRY(tree_subtree(eng, r, w, 0, 0, w->world * w->micro, NORM_GLOBAL_TOKEN, 0,
				     &a->loss_sum, e));
		ERR_TRY(tree_finish(eng, r, e));
		return d->ops->download(d, a->host_grad, r->grads, n * sizeof(float), e);
	}
	ERR_TRY(d->ops->zero(d, r->grads, n * sizeof(float), e));
	ERR_TRY(d->ops->zero(d, r->loss_slots, sizeof(double), e));
	float c = (float)(1.0 / norm_unit_total(UNIT_TOKEN, w));
	for (int q = 0; q < w->world; q++)
		for (int m = 0; m < w->rank_micro[q]; m++) {
			const struct microbatch *mb = &w->mb[q][m];
			ERR_TRY(pool_mark(eng->pool, r->local, "reference microbatch",
					  q * w->micro + m + 1, e));
			if (eng->s.unit == UNIT_SEQUENCE) { /* 1 / (S n_s) per token */
				ERR_TRY(accumulate_sequences(eng, r, w, q, m, NORM_GLOBAL_TOKEN, 0,
							     e));
				continue;
			}
			ERR_TRY(model_batch_build(r->batch, eng->corpus, mb->ids, mb->n, eng->s.layout, e));
			ERR_TRY(model_step(r->ws, r->params, r->grads, r->batch, c, 1.0,
					       r->loss_slots, e));
		}
	ERR_TRY(engine_l2_add(eng, r, e)); /* once, on the one device */
	ERR_TRY(engine_l2_value(eng, r, &a->l2_term, e));
	ERR_TRY(engine_loss_read(r, 1, &a->loss_sum, e));
	return d->ops->download(d, a->host_grad, r->grads, n * sizeof(float), e);
}

/* The reference's steps with its z-loss coefficient, train.z_loss again afterwards */
static int reference(struct engine *eng, struct replica *r, void *arg, struct err *e)
{
	struct ref_arg *a = arg;
	r->ws->z_loss = (float)a->z_loss;
	int rc = reference_steps(eng, r, a, e);
	r->ws->z_loss = (float)eng->s.z_loss;
	return rc;
}

int engine_reference(struct engine *eng, const struct window *w, float *host_grad,
		     double *loss, struct err *e)
{
	return engine_reference_z(eng, w, eng->s.z_loss, host_grad, loss, e);
}

int engine_reference_z(struct engine *eng, const struct window *w, double z_loss,
		       float *host_grad, double *loss, struct err *e)
{
	if (w->N <= 0 || (w->weighted && !(w->W > 0.0)))
		return ERR(e, ERR_EMPTY, "window %lld has no supervised token%s: no reference mean",
			   window_number(w), w->N > 0 ? " of a nonzero class weight" : "");
	struct engine_args *args = engine_args(eng, e);
	if (!args)
		return e->code;
	struct ref_arg *a = &args->op.ref;
	*a = (struct ref_arg){w, host_grad, z_loss, 0.0, 0.0};
	ERR_TRY(on_rank0(eng, reference, a, e));
	*loss = a->loss_sum / norm_unit_total(eng->s.unit, w) + a->l2_term;
	return ERR_OK;
}

/* ---- evaluation ---- */

static int evaluate(struct engine *eng, struct replica *r, void *arg, struct err *e)
{
	struct eval_arg *a = arg;
	const struct corpus *c = eng->corpus;
	int first = c->split_first[a->split], count = c->split_count[a->split];
	int chunk = eng->s.batch_size;
	int ids[4096];
	for (int i = 0; i < count; i += chunk) {
		int k = count - i < chunk ? count - i : chunk;
		ERR_TRY(pool_mark(eng->pool, r->local, "evaluation batch", i / chunk + 1, e));
		for (int j = 0; j < k; j++)
			ids[j] = first + i + j;
		double part;
		int64_t hits;
		ERR_TRY(model_batch_build(r->batch, c, ids, k, LAYOUT_PACKED, e));
		ERR_TRY(model_eval(r->ws, r->params, r->batch, &part, &hits, e));
		a->loss_sum += part;
		a->hits += hits;
		a->tokens += r->batch->supervised;
		a->sequences += k;
	}
	return ERR_OK;
}

int engine_evaluate(struct engine *eng, int split, double *loss_sum, int64_t *tokens,
		    int64_t *hits, int64_t *sequences, struct err *e)
{
	struct engine_args *args = engine_args(eng, e);
	if (!args)
		return e->code;
	struct eval_arg *a = &args->op.eval;
	*a = (struct eval_arg){split, 0.0, 0, 0, 0};
	ERR_TRY(on_rank0(eng, evaluate, a, e));
	*loss_sum = a->loss_sum;
	*tokens = a->tokens;
	*hits = a->hits;
	*sequences = a->sequences;
	return ERR_OK;
}
