/*
 * model_shape: a shape's tensor list, built by a model and compared and described for
 * the layers above (see model_shape.h).
 */
#include "model_shape.h"

#include <stdio.h>
#include <string.h>

#include "finite.h"

void model_shape_begin(struct model_shape *m, const struct model_ops *ops, int vocab)
{
	memset(m, 0, sizeof *m);
	m->ops = ops;
	m->vocab = vocab;
}

void model_shape_add(struct model_shape *m, const char *name, int rows, int cols, int decay)
{
	/* past the list, only counted: model_shape_init() refuses the shape */
	if (m->n_tensors++ >= MODEL_MAX_TENSORS)
		return;
	struct param_info *p = &m->p[m->n_tensors - 1];
	p->name = name;
	p->rows = rows;
	p->cols = cols;
	p->offset = m->n_params;
	p->count = (size_t)rows * (size_t)cols;
	p->decay = decay;
	m->n_params += p->count;
}

int model_locate(const struct model_shape *m, size_t i, int *row, int *col)
{
	for (int t = 0; t < m->n_tensors; t++) {
		if (i >= m->p[t].offset && i < m->p[t].offset + m->p[t].count) {
			size_t k = i - m->p[t].offset;
			*row = (int)(k / m->p[t].cols);
			*col = (int)(k % m->p[t].cols);
			return t;
		}
	}
	return -1;
}

void tensor_label(const struct model_shape *m, size_t i, char *out, size_t cap)
{
	int row, col;
	int t = model_locate(m, i, &row, &col);
	if (t < 0)
		snprintf(out, cap, "?[%zu]", i);
	else if (m->p[t].cols == 1)
		snprintf(out, cap, "%s[%d]", m->p[t].name, row);
	else
		snprintf(out, cap, "%s[%d, %d]", m->p[t].name, row, col);
}

void model_nonfinite_text(const struct model_shape *m, const struct finite_report *rep,
			  float first, char *what, size_t cap)
{
	char label[120];
	tensor_label(m, rep->first, label, sizeof label);
	snprintf(what, cap, "%zu non-finite value%s, the first in tensor %s = %g", rep->bad,
		 rep->bad == 1 ? "" : "s", label, (double)first);
}

size_t model_nonfinite(const struct model_shape *m, const float *x, char *what, size_t cap)
{
	struct finite_report rep;
	finite_scan(x, m->n_params, &rep);
	if (rep.bad > 0)
		model_nonfinite_text(m, &rep, x[rep.first], what, cap);
	return rep.bad;
}

void model_shape_text(const struct model_shape *m, char *out, size_t cap)
{
	char sizes[200];
	m->ops->describe(m, sizes, sizeof sizes);
	snprintf(out, cap, "%s (%s)", m->ops->name, sizes);
}

static void tensor_text(const struct param_info *p, char *out, size_t cap)
{
	if (p->cols == 1)
		snprintf(out, cap, "%s [%d]", p->name, p->rows);
	else
		snprintf(out, cap, "%s [%d x %d]", p->name, p->rows, p->cols);
}

int model_shape_same(const struct model_shape *a, const struct model_shape *b, char *why,
		     size_t cap)
{
	char ta[96], tb[96];
	if (a->ops != b->ops) {
		snprintf(why, cap, "model %s != %s", a->ops->name, b->ops->name);
		return 0;
	}
	for (int t = 0; t < a->n_tensors || t < b->n_tensors; t++) {
		if (t >= a->n_tensors || t >= b->n_tensors) {
			tensor_text(t < a->n_tensors ? &a->p[t] : &b->p[t], ta, sizeof ta);
			snprintf(why, cap, "model %s: tensor %d, %s, is in one of them only",
				 a->ops->name, t, ta);
			return 0;
		}
		const struct param_info *p = &a->p[t], *q = &b->p[t];
		if (strcmp(p->name, q->name) || p->rows != q->rows || p->cols != q->cols) {
			tensor_text(p, ta, sizeof ta);
			tensor_text(q, tb, sizeof tb);
			snprintf(why, cap, "model %s: tensor %d is %s != %s", a->ops->name, t, ta, tb);
			return 0;
		}
	}
	/* sizes that shape no tensor (a number of heads, say) still change the model */
	if (a->vocab != b->vocab || memcmp(a->dim, b->dim, sizeof a->dim) != 0) {
		a->ops->describe(a, ta, sizeof ta);
		b->ops->describe(b, tb, sizeof tb);
		snprintf(why, cap, "model %s: %s != %s", a->ops->name, ta, tb);
		return 0;
	}
	return 1;
}

/* ---- operations ---- */
