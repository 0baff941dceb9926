/*
 * model: the interface every model implements, and the registry that finds one by name.
 *
 * The normalization lives above the model: a model only has to lay out a microbatch,
 * return the SUM of its supervised token losses and backpropagate a given scale times
 * that sum (the factor c of norm_factor(), norm.h). Everything else (the window, the
 * collectives, parity, checkpoints, exact mode, inspect) only sees the table below, the
 * shape it derives from the settings and the flat parameter vector.
 *
 * Parameters live in one flat float32 buffer, the tensors of model_shape.p[] one after
 * the other in list order, so that gradients compare as one vector and dump as named
 * tensors; the engine allocates parameters, gradients and optimizer state from
 * n_params alone.
 *
 * A batch (host memory) and a workspace (device memory, allocated once per device) are
 * the model's own: each starts with the common header below, and only the model that
 * made one reads the rest. A kind is found by its name ([model] kind): the built-in ones,
 * then those registered at run time with model_register().
 */
#ifndef DDPTOK_MODEL_H
#define DDPTOK_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "model_shape.h"

/* ---- the registry ---- */

/* The model named `name`, or NULL. */
const struct model_ops *model_find(const char *name);
/* Adds a kind (ops must outlive its use); ERR_CONFIG for a name taken or too long for
 * [model] kind, an operation missing, or a full table. */
int model_register(const struct model_ops *ops, struct err *e);
/* The known names, ", "-separated, into out. */
void model_kinds(char *out, size_t cap);
/* ERR_CONFIG naming [model] kind and the known models when no model is called `kind`. */
int model_kind_check(const char *kind, struct err *e);

/* ---- the shape ---- */

/* The shape of settings s's model ([model] kind); ERR_CONFIG naming the key when no model
 * has that name, or when the model adds more than MODEL_MAX_TENSORS tensors. */
int model_shape_init(struct model_shape *m, const struct settings *s, struct err *e);
/* ---- operations, through the shape's (or batch's, workspace's) model ---- */

void model_init_params(const struct model_shape *m, uint64_t seed, float *host_params);
/* The same values a piece at a time, in order: model_init_begin, then model_init_next for
 * consecutive pieces (a large model's first parameters need never be whole on the host). */
struct model_init {
	const struct model_shape *m;
	struct prng r;
	size_t next; /* the index of the next value */
};
void model_init_begin(struct model_init *it, const struct model_shape *m, uint64_t seed);
/* The next count values (at most what remains of the vector). */
void model_init_next(struct model_init *it, float *out, size_t count);
int model_max_rows(const struct model_shape *m, int n, int max_len);
int model_batch_alloc(const struct model_shape *m, int max_rows, struct model_batch **out,
		      struct err *e);
void model_batch_free(struct model_batch *b); /* NULL: nothing */
int model_batch_build(struct model_batch *b, const struct corpus *c, const int *ids, int n,
		      int layout, struct err *e);
int model_batch_arrays(const struct model_batch *b, struct model_array *out);
size_t model_upload_bytes(const struct model_shape *m, int max_rows);
size_t model_ws_bytes(const struct model_shape *m, int max_rows, size_t *dominant);
int model_ws_check_size(const struct model_shape *m, int max_rows, struct err *e);
/* checks the size first (model_ws_check_size): nothing is allocated for a refused one */
int model_ws_create(struct dev *d, const struct model_shape *m, int max_rows,
		    struct model_ws **out, struct err *e);
void model_ws_destroy(struct model_ws *ws); /* NULL: nothing */
int model_step(struct model_ws *ws, const float *params, float *grads,
	       const struct model_batch *b, float scale, double loss_divisor, double *loss_acc,
	       struct err *e);
int model_eval(struct model_ws *ws, const float *params, const struct model_batch *b,
	       double *loss_sum, int64_t *hits, struct err *e);
void model_dev_needs(const struct model_shape *m, int max_rows, struct model_dev_needs *n);
double model_flop_per_token(const struct model_shape *m);
/* What a sequence of len positions costs beyond its tokens' arithmetic (0 for a model
 * without such a term): the training math of a batch is its supervised tokens times
 * model_flop_per_token plus this over its sequences. */
double model_sequence_flop(const struct model_shape *m, int len);
struct model_gemm model_largest_gemm(const struct model_shape *m, int rows);
/* The largest GEMM of a microbatch of the configured size (batch_size sequences of the mean
 * of min_len and max_len positions): the shape bench and env measure the sgemm at. */
struct model_gemm model_microbatch_gemm(const struct model_shape *m, const struct settings *s);

#endif
