/*
 * class_weights: reads train.class_weights and attaches its table and the sequences'
 * weight sums to the corpus (see class_weights.h).
 */
#include "class_weights.h"

#include <math.h>
#include <stdlib.h>

#include "npy.h"

/* The user's weights as read: one dimension, float32, `want` finite values >= 0. */
static int read_weights(const char *path, long long want, float **out, struct err *e)
{
	enum npy_dtype dt;
	size_t shape[NPY_MAX_DIMS];
	int ndim;
	void *data = NULL;
	ERR_TRY(npy_read(path, &dt, shape, &ndim, &data, e));
	if (dt != NPY_F32 || ndim != 1 || (long long)shape[0] != want) {
		free(data);
		return ERR(e, ERR_CONFIG, "[train] class_weights = %s: expected a float32 array of "
			   "one dimension holding %lld weights (one per vocabulary id of the data)",
			   path, want);
	}
	float *w = data;
	for (long long i = 0; i < want; i++)
		if (!isfinite(w[i]) || w[i] < 0.0f) {
			double bad = w[i]; /* read before the array is freed */
			free(data);
			return ERR(e, ERR_CONFIG, "[train] class_weights = %s: the weight of id %lld "
				   "is %g; weights must be finite and >= 0", path, i, bad);
		}
	*out = w;
	return ERR_OK;
}

int class_weights_attach(const struct settings *s, struct corpus *c, struct err *e)
{
	float *user = NULL;
	if (!s->class_weights[0])
		return ERR_OK;
	ERR_TRY(read_weights(s->class_weights, corpus_user_id(s->source, c->vocab), &user, e));
	free(c->class_weight);
	free(c->seq_weight);
	c->class_weight = malloc(sizeof(float) * (size_t)c->vocab);
	c->seq_weight = malloc(sizeof(double) * (size_t)(c->n > 0 ? c->n : 1));
	if (!c->class_weight || !c->seq_weight) {
		free(user);
		return ERR(e, ERR_NOMEM, "out of memory");
	}
	for (int i = 0; i < c->vocab; i++) { /* reserved ids: never the user's, weight 1 */
		long long u = corpus_user_id(s->source, i);
		c->class_weight[i] = u < 0 ? 1.0f : user[u];
	}
	free(user);
	for (int id = 0; id < c->n; id++) {
		const int32_t *tok = c->tokens + c->offset[id];
		double sum = 0.0;
		for (int t = 0; t < corpus_len(c, id); t++)
			if (corpus_is_target(c, id, t))
				sum += c->class_weight[tok[t]];
		c->seq_weight[id] = sum;
	}
	return ERR_OK;
}
