/*
 * engine_tree: exact mode's shard buffers, local subtree and tree reduction (see
 * engine_tree.h).
 */
#include "engine_tree.h"

#include <string.h>

#include "norm.h"
#include "shard.h"

int tree_replica_alloc(struct engine *eng, struct replica *r, struct err *e)
{
	const struct settings *s = &eng->s;
	size_t bytes = eng->shape.n_params * sizeof(float);
	if (s->shards <= 0)
		return ERR_OK;
	int leaves = r->local == 0 ? s->shards : s->shards / s->world;
	int levels = coll_tree_levels(leaves);
	if (levels < 0 || levels > ENGINE_TREE_LEVELS)
		return ERR(e, ERR_CONFIG, "train.shards = %d on devices.world = %d: %d shards per "
			   "rank is not a power of two up to %d", s->shards, s->world, leaves,
			   1 << ENGINE_TREE_LEVELS);
	for (int i = 0; i < levels; i++)
		ERR_TRY(r->dev->ops->alloc(r->dev, bytes, (void **)&r->tree[i], e));
	r->tree_slots = levels;
	return ERR_OK;
}

void tree_replica_release(struct replica *r)
{
	for (int i = 0; i < r->tree_slots; i++)
		if (r->tree[i])
			r->dev->ops->release(r->dev, r->tree[i]);
	memset(r->tree, 0, sizeof r->tree);
	r->tree_slots = 0;
}

/* dst += src over the gradient: the element-wise add the NCCL tree uses too */
static int add_gradient(struct engine *eng, struct replica *r, float *dst, const float *src,
			struct err *e)
{
	return r->dev->ops->col_sum_acc(r->dev, 1, (int)eng->shape.n_params, src, dst, e);
}

/* One shard's gradient of factor x (its loss sum) into a zeroed buffer; its loss sum
 * into the zeroed device double *loss. */
static int shard_gradient(struct engine *eng, struct replica *r, const struct microbatch *mb,
			  double factor, float *grad, double *loss, struct err *e)
{
	const struct dev_ops *o = r->dev->ops;
	ERR_TRY(o->zero(r->dev, grad, eng->shape.n_params * sizeof(float), e));
	ERR_TRY(model_batch_build(r->batch, eng->corpus, mb->ids, mb->n, eng->s.layout, e));
	return model_step(r->ws, r->params, grad, r->batch, (float)factor, 1.0, loss, e);
}

int tree_subtree(struct engine *eng, struct replica *r, const struct window *w, int rank,
		 int first, int count, int mode, int swap, double *loss, struct err *e)
{
	const struct settings *s = &eng->s;
	float *slot[ENGINE_TREE_LEVELS + 1];
	int level[ENGINE_TREE_LEVELS + 1], top = 0;
	double k = norm_divisor(s->reduce == COLL_AVG, s->world, s->shards);
	if (coll_tree_levels(count) < 0 || coll_tree_levels(count) > r->tree_slots)
		return ERR(e, ERR_CHECK, "rank %d: a subtree of %d shards needs more than its %d "
			   "buffers", rank, count, r->tree_slots);
	if (swap && count < 4)
		return ERR(e, ERR_CHECK, "rank %d: swapping shards in the tree needs at least 4 "
			   "shards per rank (it has %d)", rank, count);
	ERR_TRY(r->dev->ops->zero(r->dev, r->loss_slots, sizeof(double) * count, e));
	slot[0] = r->grads; /* the leftmost leaf's buffer ends up holding the root */
	for (int i = 0; i < r->tree_slots; i++)
		slot[i + 1] = r->tree[i];
	for (int j = 0; j < count; j++) {
		int leaf = swap && (j == 1 || j == 2) ? 3 - j : j;
		const struct microbatch *mb = shard_of(w, first + leaf);
		ERR_TRY(engine_micro_begin(eng, r->rank, w, j, e));
		double c = norm_factor_k(mode, k, w->world, w->micro, w->N, w->rank_tokens[rank],
					 mb->tokens);
		ERR_TRY(shard_gradient(eng, r, mb, c, slot[top], r->loss_slots + j, e));
		level[top++] = 0;
		/* two subtrees of one level make one of the next: (left) + (right) */
		while (top >= 2 && level[top - 1] == level[top - 2]) {
			ERR_TRY(add_gradient(eng, r, slot[top - 2], slot[top - 1], e));
			level[top - 2]++;
			top--;
		}
	}
	return engine_loss_read(r, count, loss, e);
}

int tree_finish(struct engine *eng, struct replica *r, struct err *e)
{
	if (eng->s.reduce != COLL_AVG)
		return ERR_OK;
	return r->dev->ops->scale(r->dev, (int)eng->shape.n_params,
				  1.0f / (float)eng->s.shards, r->grads, e);
}

int tree_reduce(struct engine *eng, struct replica *r, struct err *e)
{
	struct coll *c = eng->coll;
	ERR_TRY(c->ops->allreduce_tree(c, r->local, r->dev, r->grads, eng->shape.n_params,
				       COLL_F32, 0, e));
	return tree_finish(eng, r, e);
}
