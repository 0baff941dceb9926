/*
 * engine_replica: the steps of one rank that both forms of the window step share (see
 * engine_replica.h).
 */
#include "engine_replica.h"

int engine_micro_begin(struct engine *eng, int rank, const struct window *w, int m,
		       struct err *e)
{
	/* rank: the global rank; the pool knows its threads by local rank */
	ERR_TRY(pool_mark(eng->pool, rank - eng->first_rank, "forward/backward of microbatch",
			  m + 1, e));
	const struct fault_injection *f = &eng->fault;
	if (m == 0 && f->hang_rank == rank && f->hang_window == w->index)
		fault_hang(f->hang_seconds);
	return ERR_OK;
}

int engine_loss_read(struct replica *r, int count, double *loss, struct err *e)
{
	double v[ENGINE_LOSS_SLOTS];
	if (count < 1 || count > ENGINE_LOSS_SLOTS)
		return ERR(e, ERR_CHECK, "rank %d: %d loss slots, it has %d", r->rank, count,
			   ENGINE_LOSS_SLOTS);
	ERR_TRY(r->dev->ops->download(r->dev, v, r->loss_slots, sizeof(double) * count, e));
	/* the pairwise tree: (0 + 1), (2 + 3), ..., then the pairs, up to the root in v[0] */
	for (int step = 1; step < count; step *= 2)
		for (int q = 0; q + step < count; q += 2 * step)
			v[q] += v[q + step];
	*loss = v[0];
	return ERR_OK;
}

int engine_l2_add(struct engine *eng, struct replica *r, struct err *e)
{
	int n = (int)eng->shape.n_params; /* within int: the model's ws_check_size */
	if (eng->s.l2 <= 0.0)
		return ERR_OK;
	return r->dev->ops->gemm(r->dev, 0, 0, 1, n, 1, (float)eng->s.l2, r->terms, 1, r->params,
				 n, 1.0f, r->grads, n, e);
}

int engine_l2_value(struct engine *eng, struct replica *r, double *value, struct err *e)
{
	int n = (int)eng->shape.n_params;
	double norm2 = 0.0;
	*value = 0.0;
	if (eng->s.l2 <= 0.0)
		return ERR_OK;
	/* the squares added in double in the device's fixed order (as the clipping norm) */
	ERR_TRY(r->dev->ops->sum_squares(r->dev, n, r->params, &norm2, e));
	*value = 0.5 * eng->s.l2 * norm2;
	return ERR_OK;
}
