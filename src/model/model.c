/*
 * model: the registry of models (see model.h). The operations here only pass a call on
 * to the model that made the shape, batch or workspace, so that the engine, checkpoints
 * and the command line name no model.
 */
#include "model.h"

#include <stdio.h>
#include <string.h>

#include "gpt.h"
#include "window_mlp.h"

/* the models the program is built with, then those registered at run time */
static const struct model_ops *const builtin[] = {&window_mlp_ops, &gpt_ops};
#define N_BUILTIN ((int)(sizeof builtin / sizeof builtin[0]))
#define MAX_REGISTERED 8
static const struct model_ops *registered[MAX_REGISTERED];
static int n_registered;

static const struct model_ops *kind_at(int i)
{
	return i < N_BUILTIN ? builtin[i] : registered[i - N_BUILTIN];
}

const struct model_ops *model_find(const char *name)
{
	for (int i = 0; i < N_BUILTIN + n_registered; i++)
		if (strcmp(kind_at(i)->name, name) == 0)
			return kind_at(i);
	return NULL;
}

/* The first operation ops lacks ("" when it has them all). */
static const char *missing_op(const struct model_ops *ops)
{
	const struct {
		const char *name;
		int present;
	} need[] = {
		{"shape", !!ops->shape}, {"init_values", !!ops->init_values},
		{"max_rows", !!ops->max_rows}, {"batch_alloc", !!ops->batch_alloc},
		{"batch_free", !!ops->batch_free}, {"batch_build", !!ops->batch_build},
		{"batch_arrays", !!ops->batch_arrays}, {"upload_bytes", !!ops->upload_bytes},
		{"ws_bytes", !!ops->ws_bytes}, {"ws_check_size", !!ops->ws_check_size},
		{"ws_create", !!ops->ws_create}, {"ws_destroy", !!ops->ws_destroy},
		{"step", !!ops->step}, {"eval", !!ops->eval}, {"dev_needs", !!ops->dev_needs},
		{"flop_per_token", !!ops->flop_per_token}, {"largest_gemm", !!ops->largest_gemm},
		{"describe", !!ops->describe},
	};
	for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
		if (!need[i].present)
			return need[i].name;
	return "";
}

int model_register(const struct model_ops *ops, struct err *e)
{
	if (!ops->name || !ops->name[0])
		return ERR(e, ERR_CONFIG, "cannot register a model without a name");
	if (missing_op(ops)[0])
		return ERR(e, ERR_CONFIG, "cannot register model '%s': it has no %s operation",
			   ops->name, missing_op(ops));
	if (strlen(ops->name) >= sizeof(((struct settings *)0)->model_kind))
		return ERR(e, ERR_CONFIG, "model name '%s' is longer than [model] kind holds",
			   ops->name);
	if (model_find(ops->name))
		return ERR(e, ERR_CONFIG, "a model named '%s' is already known", ops->name);
	if (n_registered == MAX_REGISTERED)
		return ERR(e, ERR_CONFIG, "cannot register model '%s': %d models registered "
			   "already", ops->name, MAX_REGISTERED);
	registered[n_registered++] = ops;
	return ERR_OK;
}

void model_kinds(char *out, size_t cap)
{
	size_t len = 0;
	if (cap)
		out[0] = '\0';
	for (int i = 0; i < N_BUILTIN + n_registered && len < cap; i++)
		len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? ", " : "",
					kind_at(i)->name);
}

int model_kind_check(const char *kind, struct err *e)
{
	char kinds[256];
	if (model_find(kind))
		return ERR_OK;
	model_kinds(kinds, sizeof kinds);
	return ERR(e, ERR_CONFIG, "[model] kind = %s: no such model (models: %s)", kind, kinds);
}

int model_shape_init(struct model_shape *m, const struct settings *s, struct err *e)
{
	const struct model_ops *ops = model_find(s->model_kind);
	if (!ops)
		return model_kind_check(s->model_kind, e);
	ERR_TRY(ops->shape(s, m, e));
	if (m->n_tensors > MODEL_MAX_TENSORS)
		return ERR(e, ERR_CONFIG, "model %s has %d tensors, more than the %d a shape holds",
			   ops->name, m->n_tensors, MODEL_MAX_TENSORS);
	return ERR_OK;
}

void model_init_params(const struct model_shape *m, uint64_t seed, float *host_params)
{
	struct model_init it;
	model_init_begin(&it, m, seed);
	model_init_next(&it, host_params, m->n_params);
}

void model_init_begin(struct model_init *it, const struct model_shape *m, uint64_t seed)
{
	it->m = m;
	it->next = 0;
	prng_seed(&it->r, seed, m->ops->init_stream);
}

void model_init_next(struct model_init *it, float *out, size_t count)
{
	const struct model_shape *m = it->m;
	/* the tensors lie one after the other in the flat vector */
	for (int t = 0; t < m->n_tensors && count > 0; t++) {
		size_t end = m->p[t].offset + m->p[t].count;
		if (it->next < m->p[t].offset || it->next >= end)
			continue;
		size_t len = end - it->next < count ? end - it->next : count;
		m->ops->init_values(m, t, &it->r, out, len);
		out += len;
		it->next += len;
		count -= len;
	}
}

int model_max_rows(const struct model_shape *m, int n, int max_len)
{
	return m->ops->max_rows(m, n, max_len);
}

int model_batch_alloc(const struct model_shape *m, int max_rows, struct model_batch **out,
		      struct err *e)
{
	*out = NULL;
	return m->ops->batch_alloc(m, max_rows, out, e);
}

void model_batch_free(struct model_batch *b)
{
	if (b)
		b->ops->batch_free(b);
}

int model_batch_build(struct model_batch *b, const struct corpus *c, const int *ids, int n,
		      int layout, struct err *e)
{
	return b->ops->batch_build(b, c, ids, n, layout, e);
}

int model_batch_arrays(const struct model_batch *b, struct model_array *out)
{
	return b->ops->batch_arrays(b, out);
}

size_t model_upload_bytes(const struct model_shape *m, int max_rows)
{
	return m->ops->upload_bytes(m, max_rows);
}

size_t model_ws_bytes(const struct model_shape *m, int max_rows, size_t *dominant)
{
	return m->ops->ws_bytes(m, max_rows, dominant);
}

int model_ws_check_size(const struct model_shape *m, int max_rows, struct err *e)
{
	return m->ops->ws_check_size(m, max_rows, e);
}

int model_ws_create(struct dev *d, const struct model_shape *m, int max_rows,
		    struct model_ws **out, struct err *e)
{
	*out = NULL;
	ERR_TRY(m->ops->ws_check_size(m, max_rows, e));
	return m->ops->ws_create(d, m, max_rows, out, e);
}

void model_ws_destroy(struct model_ws *ws)
{
	if (ws)
		ws->ops->ws_destroy(ws);
}

int model_step(struct model_ws *ws, const float *params, float *grads,
	       const struct model_batch *b, float scale, double loss_divisor, double *loss_acc,
	       struct err *e)
{
	return ws->ops->step(ws, params, grads, b, scale, loss_divisor, loss_acc, e);
}

int model_eval(struct model_ws *ws, const float *params, const struct model_batch *b,
	       double *loss_sum, int64_t *hits, struct err *e)
{
	return ws->ops->eval(ws, params, b, loss_sum, hits, e);
}

void model_dev_needs(const struct model_shape *m, int max_rows, struct model_dev_needs *n)
{
	memset(n, 0, sizeof *n);
	m->ops->dev_needs(m, max_rows, n);
}

double model_flop_per_token(const struct model_shape *m)
{
	return m->ops->flop_per_token(m);
}

double model_sequence_flop(const struct model_shape *m, int len)
{
	return m->ops->sequence_flop ? m->ops->sequence_flop(m, len) : 0.0;
}

struct model_gemm model_largest_gemm(const struct model_shape *m, int rows)
{
	return m->ops->largest_gemm(m, rows);
}

struct model_gemm model_microbatch_gemm(const struct model_shape *m, const struct settings *s)
{
	return model_largest_gemm(m, s->batch_size * (s->min_len + s->max_len) / 2);
}
