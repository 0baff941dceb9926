/*
 * coll_host: the host collective, deterministic allreduce through shared memory.
 *
 * Every rank publishes a host pointer to its data (device buffers are first staged into
 * host memory through the device's download), then, after a barrier, rank r reduces
 * the r-th slice of the vector for everybody: element i is the sum over ranks taken in
 * rank order 0..W-1 (then divided by W for avg), written straight into slice r of every
 * local rank's buffer. That is safe because slice r of any buffer is read by rank r
 * alone, which reads a block of it from every rank before writing the block back; no
 * shared result and no copy back, the element's bits are the same. After a second
 * barrier every buffer holds the whole result (a staged one is then uploaded). Two
 * barriers per call suffice: nobody writes into a buffer before every rank has
 * published it at the first barrier, nobody returns before every slice is written.
 * The one exception is a failed call: a rank whose second barrier times out (a peer
 * stalled in its slice for longer than the timeout) returns the error while the stalled
 * peer may still write into its buffer, which is why coll.h asks callers to keep their
 * buffers allocated after a failure, as pool.h does for a rank it leaves behind.
 *
 * The tree mode (exact mode) is the same exchange with another rule for element i: the
 * pairwise tree over the ranks' values (see coll.h), so that the sum is the upper part
 * of the one tree exact mode builds over its shards.
 */
#include "coll.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "world.h"

struct host_coll {
	size_t max_count;
	/* each local rank's published buffer (its own, or its staging): what the reduction
	 * reads and, in place, writes */
	void *dst[MAX_WORLD];
	void *stage[MAX_WORLD];   /* per-rank host staging for device buffers */
	/* across processes (coll_host_span_processes): procs > 1 */
	int procs, proc;
	double timeout_s;
	void *packed;     /* this process's contributions, local rank order */
	void *gathered;   /* every process's `packed`, process order = global rank order */
	const void *all[COLL_MAX_RANKS]; /* the sources of the reduction, global rank order */
};

static size_t dtype_size(enum coll_dtype t)
{
	return t == COLL_F32 ? 4 : 8;
}

/* Float elements b..b+m-1 of the reduction (m <= SUM_BLOCK): each element adds its ranks
 * in order into a local block, which avg then scales. Dividing by a power of two n is
 * multiplying by 1/n, which is exact: both round the same real number once, so the bits
 * are the division's (subnormals, zeros, infinities and NaNs included) at a fraction of
 * its cost, which was most of the reduction's; any other n divides. Called with
 * m = SUM_BLOCK, the loops have a fixed length and vectorize at -O2. */
#define SUM_BLOCK 256
static inline __attribute__((always_inline)) void
sum_block_f32(const void *const *src, int n, size_t b, size_t m, enum coll_op op,
	      void *const *dst, int ndst)
{
	float acc[SUM_BLOCK];
	memcpy(acc, (const float *)src[0] + b, m * sizeof(float));
	for (int q = 1; q < n; q++) {
		const float *s = (const float *)src[q] + b;
		for (size_t j = 0; j < m; j++)
			acc[j] += s[j];
	}
	if (op == COLL_AVG && (n & (n - 1)) == 0) {
		const float inverse = 1.0f / (float)n;
		for (size_t j = 0; j < m; j++)
			acc[j] *= inverse;
	} else if (op == COLL_AVG) {
		for (size_t j = 0; j < m; j++)
			acc[j] /= (float)n;
	}
	for (int q = 0; q < ndst; q++)
		memcpy((float *)dst[q] + b, acc, m * sizeof(float));
}

/* dst[0..ndst)[i] = the sum of src[0..n)[i] in that order (then / n for avg),
 * lo <= i < hi; each element is read from every source before any destination is
 * written, so a destination may be one of the sources */
static void reduce_slice(const void *const *src, int n, size_t lo, size_t hi,
			 enum coll_dtype type, enum coll_op op, void *const *dst, int ndst)
{
	switch (type) {
	case COLL_F32: {
		size_t b = lo;
		for (; b + SUM_BLOCK <= hi; b += SUM_BLOCK)
			sum_block_f32(src, n, b, SUM_BLOCK, op, dst, ndst);
		if (b < hi)
			sum_block_f32(src, n, b, hi - b, op, dst, ndst);
		break;
	}
	case COLL_F64:
		for (size_t i = lo; i < hi; i++) {
			double acc = ((const double *)src[0])[i];
			for (int q = 1; q < n; q++)
				acc += ((const double *)src[q])[i];
			acc = op == COLL_AVG ? acc / (double)n : acc;
			for (int q = 0; q < ndst; q++)
				((double *)dst[q])[i] = acc;
		}
		break;
	case COLL_I64:
		for (size_t i = lo; i < hi; i++) {
			int64_t acc = ((const int64_t *)src[0])[i];
			for (int q = 1; q < n; q++)
				acc += ((const int64_t *)src[q])[i];
			acc = op == COLL_AVG ? acc / n : acc;
			for (int q = 0; q < ndst; q++)
				((int64_t *)dst[q])[i] = acc;
		}
		break;
	}
}

/* The pairwise tree over the `world` values of each element, a block of TREE_BLOCK
 * elements at a time: level 1 adds value 1 into value 0, 3 into 2, ...; level 2 adds 2
 * into 0, 6 into 4, ...; up to the root in value 0. Written per block so that the adds
 * vectorize; element i's additions are the tree's whatever the block. */
#define TREE_BLOCK 256

#define TREE_ADD(T, src, world, lo, hi, dst, ndst)                                            \
	do {                                                                                  \
		T acc_[MAX_WORLD][TREE_BLOCK];                                                \
		for (size_t b_ = (lo); b_ < (hi); b_ += TREE_BLOCK) {                         \
			size_t m_ = (hi) - b_ < TREE_BLOCK ? (hi) - b_ : TREE_BLOCK;          \
			for (int q_ = 0; q_ < (world); q_++)                                  \
				memcpy(acc_[q_], (const T *)(src)[q_] + b_, m_ * sizeof(T));  \
			for (int step_ = 1; step_ < (world); step_ *= 2)                      \
				for (int q_ = 0; q_ + step_ < (world); q_ += 2 * step_)        \
					for (size_t j_ = 0; j_ < m_; j_++)                    \
						acc_[q_][j_] += acc_[q_ + step_][j_];         \
			for (int d_ = 0; d_ < (ndst); d_++)                                   \
				memcpy((T *)(dst)[d_] + b_, acc_[0], m_ * sizeof(T));         \
		}                                                                             \
	} while (0)

/* the tree of coll_tree_add into every dst[0..ndst) (a source may be among them: a block
 * is read from every source before it is written) */
static void tree_add_to(const void *const *src, int world, enum coll_dtype type, size_t lo,
			size_t hi, void *const *dst, int ndst)
{
	if (type == COLL_F32)
		TREE_ADD(float, src, world, lo, hi, dst, ndst);
	else
		TREE_ADD(double, src, world, lo, hi, dst, ndst);
}

void coll_tree_add(const void *const *src, int world, enum coll_dtype type, size_t lo,
		   size_t hi, void *out)
{
	tree_add_to(src, world, type, lo, hi, &out, 1);
}

/* Across processes: local rank 0 packs the local contributions and gathers every
 * process's; the reduction then reads all W of them in global rank order. */
static int gather_processes(struct coll *c, int rank, size_t bytes, struct err *e)
{
	struct host_coll *h = c->impl;
	if (rank == 0) {
		for (int q = 0; q < c->world; q++)
			memcpy((char *)h->packed + (size_t)q * bytes, h->dst[q], bytes);
		ERR_TRY(world_allgather(h->packed, bytes * (size_t)c->world, h->gathered,
					h->timeout_s, "the collective's exchange", e));
		for (int q = 0; q < c->world * h->procs; q++)
			h->all[q] = (const char *)h->gathered + (size_t)q * bytes;
	}
	return barrier_wait(c->barrier, rank, e);
}

/* What one exchange computes (host_exchange). */
enum exchange_kind {
	EXCHANGE_ALLREDUCE,      /* every element reduced into every local buffer */
	EXCHANGE_REDUCE_SCATTER, /* each rank's slice reduced into its own buffer */
	EXCHANGE_ALL_GATHER      /* each rank's slice copied into every buffer */
};

struct exchange {
	enum exchange_kind kind;
	enum coll_dtype type;
	enum coll_op op;
	int tree, host_buf;
};

/* Elements of a full slice of `count` cut for `world` ranks (coll_shard_range's first). */
static size_t full_slice(size_t count, int world)
{
	size_t lo, hi;
	coll_shard_range(count, world, 0, &lo, &hi);
	return hi;
}

/* Global rank g's slice of `count` elements, from the sources of an all-gather: its own
 * buffer in this process, or its place in the gathered slices of another process. */
static const char *gather_source(const struct host_coll *h, const struct coll *c, int g,
				 size_t count, size_t elem)
{
	size_t lo, hi;
	int world = c->world * (h->procs > 1 ? h->procs : 1);
	if (h->procs > 1 && g / c->world != h->proc)
		return (const char *)h->gathered + (size_t)g * full_slice(count, world) * elem;
	coll_shard_range(count, world, g, &lo, &hi);
	return (const char *)h->dst[g % c->world] + lo * elem;
}

/* Across processes, for an all-gather: local rank 0 packs the local ranks' slices (each
 * padded to a full slice) and gathers every process's, in global rank order. */
static int gather_slices(struct coll *c, int rank, size_t count, size_t elem, struct err *e)
{
	struct host_coll *h = c->impl;
	size_t slice = full_slice(count, c->world * h->procs);
	if (rank == 0) {
		for (int q = 0; q < c->world; q++) {
			size_t qlo, qhi;
			coll_shard_range(count, c->world * h->procs, h->proc * c->world + q, &qlo,
					 &qhi);
			memcpy((char *)h->packed + (size_t)q * slice * elem,
			       (const char *)h->dst[q] + qlo * elem, (qhi - qlo) * elem);
		}
		ERR_TRY(world_allgather(h->packed, slice * elem * (size_t)c->world, h->gathered,
					h->timeout_s, "the collective's all-gather", e));
	}
	return barrier_wait(c->barrier, rank, e);
}

/* Local rank `rank`'s part of the exchange x, once every buffer is published (and, across
 * processes, gathered): its share of the allreduce, its own slice of the reduce-scatter,
 * or every other rank's slice copied into its buffer. */
static void exchange_part(struct coll *c, int rank, size_t count, const struct exchange *x)
{
	struct host_coll *h = c->impl;
	const void *const *src = h->procs > 1 ? h->all : (const void *const *)h->dst;
	int n = c->world * (h->procs > 1 ? h->procs : 1), g = h->proc * c->world + rank;
	size_t lo, hi, elem = dtype_size(x->type);
	if (x->kind == EXCHANGE_ALL_GATHER) {
		for (int q = 0; q < n; q++) {
			coll_shard_range(count, n, q, &lo, &hi);
			if (q != g)
				memcpy((char *)h->dst[rank] + lo * elem,
				       gather_source(h, c, q, count, elem), (hi - lo) * elem);
		}
		return;
	}
	int ndst = c->world;
	void *const *dst = h->dst;
	if (x->kind == EXCHANGE_REDUCE_SCATTER) { /* the global rank's slice, into its buffer */
		coll_shard_range(count, n, g, &lo, &hi);
		dst = &h->dst[rank];
		ndst = 1;
	} else { /* this process's local slice, into every local buffer */
		lo = count * rank / c->world;
		hi = count * (rank + 1) / c->world;
	}
	if (x->tree)
		tree_add_to(src, n, x->type, lo, hi, dst, ndst);
	else
		reduce_slice(src, n, lo, hi, x->type, x->op, dst, ndst);
}

/* One exchange: publish (staging device buffers), barrier, [gather across processes,
 * barrier,] this rank's part (exchange_part), barrier, upload a staged buffer. */
static int host_exchange(struct coll *c, int rank, struct dev *dev, void *buf, size_t count,
			 const struct exchange *x, struct err *e)
{
	struct host_coll *h = c->impl;
	double t0 = clock_now_s();
	size_t bytes = count * dtype_size(x->type);
	int rc;
	if (count > h->max_count)
		return ERR(e, ERR_DEVICE, "rank %d: allreduce of %zu elements exceeds the collective's "
			   "capacity of %zu", h->proc * c->world + rank, count, h->max_count);
	/* a lone rank's sum is its own values, its average them divided by 1, i.e. the same
	 * (quiet NaNs included), its slice the whole: no pass over the buffer */
	if (c->world == 1 && h->procs <= 1)
		return ERR_OK;
	int direct = x->host_buf || !dev || dev->backend == DEV_BACKEND_CPU;
	h->dst[rank] = direct ? buf : h->stage[rank];
	if (!direct && (rc = dev->ops->download(dev, h->stage[rank], buf, bytes, e)) != ERR_OK)
		return rc;
	if ((rc = barrier_wait(c->barrier, rank, e)) != ERR_OK)
		return rc;
	if (h->procs > 1) {
		rc = x->kind == EXCHANGE_ALL_GATHER
			     ? gather_slices(c, rank, count, dtype_size(x->type), e)
			     : gather_processes(c, rank, bytes, e);
		if (rc != ERR_OK)
			return rc;
	}
	exchange_part(c, rank, count, x);
	if ((rc = barrier_wait(c->barrier, rank, e)) != ERR_OK)
		return rc;
	if (!direct && (rc = dev->ops->upload(dev, buf, h->stage[rank], bytes, e)) != ERR_OK)
		return rc;
	c->seconds[rank] += clock_now_s() - t0;
	return ERR_OK;
}

static int host_allreduce(struct coll *c, int rank, struct dev *dev, void *buf, size_t count,
			  enum coll_dtype type, enum coll_op op, int host_buf, struct err *e)
{
	struct exchange x = {EXCHANGE_ALLREDUCE, type, op, 0, host_buf};
	return host_exchange(c, rank, dev, buf, count, &x, e);
}

/* The tree's conditions: a power-of-two world of at most MAX_WORLD ranks, floats. */
static int tree_check(const struct coll *c, enum coll_dtype type, struct err *e)
{
	const struct host_coll *h = c->impl;
	int world = c->world * (h->procs > 1 ? h->procs : 1);
	if (coll_tree_levels(world) < 0)
		return ERR(e, ERR_CONFIG, "the tree allreduce needs a power-of-two world, not %d",
			   world);
	if (world > MAX_WORLD) /* its blocks hold one row per rank */
		return ERR(e, ERR_CONFIG, "the tree allreduce adds at most %d ranks, not %d",
			   MAX_WORLD, world);
	if (type != COLL_F32 && type != COLL_F64)
		return ERR(e, ERR_DEVICE, "the tree allreduce adds floating-point values only");
	return ERR_OK;
}

static int host_allreduce_tree(struct coll *c, int rank, struct dev *dev, void *buf,
			       size_t count, enum coll_dtype type, int host_buf, struct err *e)
{
	struct exchange x = {EXCHANGE_ALLREDUCE, type, COLL_SUM, 1, host_buf};
	ERR_TRY(tree_check(c, type, e));
	return host_exchange(c, rank, dev, buf, count, &x, e);
}

static int host_reduce_scatter(struct coll *c, int rank, struct dev *dev, float *buf,
			       size_t count, enum coll_op op, int tree, struct err *e)
{
	struct exchange x = {EXCHANGE_REDUCE_SCATTER, COLL_F32, tree ? COLL_SUM : op, tree, 0};
	if (tree)
		ERR_TRY(tree_check(c, COLL_F32, e));
	return host_exchange(c, rank, dev, buf, count, &x, e);
}

static int host_all_gather(struct coll *c, int rank, struct dev *dev, float *buf,
			   size_t count, struct err *e)
{
	struct exchange x = {EXCHANGE_ALL_GATHER, COLL_F32, COLL_SUM, 0, 0};
	return host_exchange(c, rank, dev, buf, count, &x, e);
}

static void host_abort(struct coll *c, int rank)
{
	barrier_abort(c->barrier, rank);
}

static void host_destroy(struct coll *c)
{
	struct host_coll *h = c->impl;
	if (h) {
		for (int r = 0; r < MAX_WORLD; r++)
			free(h->stage[r]);
		free(h->packed);
		free(h->gathered);
		free(h);
	}
	free(c);
}

static const struct coll_ops host_coll_ops = {
	.name = "host",
	.allreduce = host_allreduce,
	.allreduce_tree = host_allreduce_tree,
	.reduce_scatter = host_reduce_scatter,
	.all_gather = host_all_gather,
	.abort = host_abort,
	.destroy = host_destroy,
};

int coll_host_create(int world, struct barrier *barrier, size_t max_count, struct coll **out,
		     struct err *e)
{
	struct coll *c = calloc(1, sizeof *c);
	struct host_coll *h = calloc(1, sizeof *h);
	if (!c || !h)
		goto oom;
	c->ops = &host_coll_ops;
	c->world = world;
	c->barrier = barrier;
	c->impl = h;
	h->max_count = max_count;
	for (int r = 0; r < world; r++)
		if (!(h->stage[r] = malloc(max_count * 8 + 8)))
			goto oom;
	*out = c;
	return ERR_OK;
oom:
	if (c) {
		c->impl = h;
		host_destroy(c);
	} else {
		free(h);
	}
	return ERR(e, ERR_NOMEM, "out of memory for the host collective (%zu elements)", max_count);
}

int coll_host_span_processes(struct coll *c, int procs, int proc, double timeout_s,
			     struct err *e)
{
	struct host_coll *h = c->impl;
	if (c->ops != &host_coll_ops || procs * c->world > COLL_MAX_RANKS)
		return ERR(e, ERR_CONFIG, "the host collective spans at most %d ranks",
			   COLL_MAX_RANKS);
	size_t per_rank = h->max_count * 8 + 8;
	if (!(h->packed = malloc(per_rank * (size_t)c->world)) ||
	    !(h->gathered = malloc(per_rank * (size_t)(c->world * procs))))
		return ERR(e, ERR_NOMEM, "out of memory for the collective across processes");
	h->procs = procs;
	h->proc = proc;
	h->timeout_s = timeout_s;
	return ERR_OK;
}

void coll_destroy(struct coll *c)
{
	if (c && c->ops)
		c->ops->destroy(c);
}

int coll_tree_levels(int world)
{
	int levels = 0;
	if (world < 1 || (world & (world - 1)) != 0)
		return -1;
	while ((1 << levels) < world)
		levels++;
	return levels;
}

const char *coll_op_name(enum coll_op op)
{
	return op == COLL_AVG ? "avg" : "sum";
}

void coll_shard_range(size_t count, int world, int rank, size_t *lo, size_t *hi)
{
	size_t slice = world > 0 ? (count + (size_t)world - 1) / (size_t)world : count;
	size_t start = slice * (size_t)rank;
	*lo = start < count ? start : count;
	*hi = count - *lo < slice ? count : *lo + slice;
}
