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

#include "corpus.h"
#include "dev.h"
#include "err.h"
#include "settings.h"

#define MODEL_MAX_TENSORS 32
#define MODEL_MAX_DIMS 8
#define MODEL_MAX_ARRAYS 8

/* One parameter tensor: a slice of the flat vector, row-major. */
struct param_info {
	const char *name;
	int rows, cols; /* cols == 1 for vectors */
	size_t offset;  /* in floats */
	size_t count;
	int decay;      /* weight decay applies (matrices), or not (biases, norms) */
};

struct model_ops;

struct model_shape {
	const struct model_ops *ops; /* the kind of model */
	int vocab;                   /* ids, reserved ones included */
	int dim[MODEL_MAX_DIMS];     /* the model's own sizes, indexed as it defines */
	int n_tensors;
	struct param_info p[MODEL_MAX_TENSORS];
	size_t n_params;
};

/* The common head of every model's host batch. */
struct model_batch {
	const struct model_ops *ops;
	int rows;           /* positions laid out */
	int64_t supervised; /* supervised positions among them */
};

/* The common head of every model's device workspace. */
struct model_ws {
	const struct model_ops *ops;
};

/* One int32 array of a built batch, as the model reads it (parity --dump writes it). */
struct model_array {
	const char *name;
	const int32_t *data;
	int ndim;
	size_t dim[2];
};

/* What a device allocates once at creation for this model's operations (placement.c):
 * the workspace of an embed_backward over embed_slots context slots of ids below
 * embed_ids, embed_dim wide (0, 0, 0: none, the smallest). */
struct model_dev_needs {
	size_t embed_slots, embed_ids, embed_dim;
};

struct model_gemm {
	int m, n, k;
};

/* A model: its operations. Every one is required. */
struct model_ops {
	const char *name; /* [model] kind */
	/* m->vocab, m->dim[] and the tensors (model_shape_add) from the settings */
	int (*shape)(const struct settings *s, struct model_shape *m, struct err *e);
	/* seeded, deterministic on every platform */
	void (*init_params)(const struct model_shape *m, uint64_t seed, float *host_params);
	/* positions a batch of n sequences of up to max_len tokens may lay out */
	int (*max_rows)(const struct model_shape *m, int n, int max_len);
	int (*batch_alloc)(const struct model_shape *m, int max_rows, struct model_batch **out,
			   struct err *e);
	void (*batch_free)(struct model_batch *b);
	/* lays out sequences ids[0..n) of the corpus (enum layout_kind); ERR_DEVICE if they
	 * do not fit the batch */
	int (*batch_build)(struct model_batch *b, const struct corpus *c, const int *ids, int n,
			   int layout, struct err *e);
	/* the batch's arrays (at most MODEL_MAX_ARRAYS); returns how many */
	int (*batch_arrays)(const struct model_batch *b, struct model_array *out);
	/* bytes one batch of max_rows positions uploads to the device */
	size_t (*upload_bytes)(const struct model_shape *m, int max_rows);
	/* device bytes of a workspace; *dominant: of which the part that grows with the
	 * vocabulary (the logits) */
	size_t (*ws_bytes)(const struct model_shape *m, int max_rows, size_t *dominant);
	/* ERR_CONFIG when an element count of the device interface (int) would overflow */
	int (*ws_check_size)(const struct model_shape *m, int max_rows, struct err *e);
	int (*ws_create)(struct dev *d, const struct model_shape *m, int max_rows,
			 struct model_ws **out, struct err *e);
	void (*ws_destroy)(struct model_ws *ws);
	/* forward + backward of scale * (loss sum); gradients ADDED to `grads`; the unscaled
	 * loss sum / loss_divisor added to *loss_acc (device double); no host wait */
	int (*step)(struct model_ws *ws, const float *params, float *grads,
		    const struct model_batch *b, float scale, double loss_divisor,
		    double *loss_acc, struct err *e);
	/* forward only: loss sum and supervised positions whose argmax is the target */
	int (*eval)(struct model_ws *ws, const float *params, const struct model_batch *b,
		    double *loss_sum, int64_t *hits, struct err *e);
	void (*dev_needs)(const struct model_shape *m, int max_rows, struct model_dev_needs *n);
	/* arithmetic of forward + backward per supervised token, and the largest GEMM of a
	 * batch of `rows` positions (for bench) */
	double (*flop_per_token)(const struct model_shape *m);
	struct model_gemm (*largest_gemm)(const struct model_shape *m, int rows);
	/* its sizes in words, e.g. "vocab 128, context 8" */
	void (*describe)(const struct model_shape *m, char *out, size_t cap);
};

/* ---- the registry ---- */

/* The model named `name`, or NULL. */
const struct model_ops *model_find(const char *name);
/* Adds a kind (ops must outlive its use); ERR_CONFIG for a name taken or too long for
 * [model] kind, an operation missing, or a full table. */
int model_register(const struct model_ops *ops, struct err *e);
/* The known names, ", "-separated, into out. */
void model_kinds(char *out, size_t cap);

/* ---- the shape ---- */

/* The shape of settings s's model ([model] kind); ERR_CONFIG naming the key when no model
 * has that name, or when the model adds more than MODEL_MAX_TENSORS tensors. */
int model_shape_init(struct model_shape *m, const struct settings *s, struct err *e);
/* For models: an empty shape of kind ops, then tensors appended in parameter order (past
 * MODEL_MAX_TENSORS only counted, for model_shape_init to refuse). */
void model_shape_begin(struct model_shape *m, const struct model_ops *ops, int vocab);
void model_shape_add(struct model_shape *m, const char *name, int rows, int cols, int decay);
/* Which tensor holds flat index i, and its (row, col); -1 outside the vector. */
int model_locate(const struct model_shape *m, size_t i, int *row, int *col);
/* 1 when a and b are the same kind with the same tensors; otherwise 0 and `why` names the
 * kind and the first tensor that differs (a: this configuration, b: the other one). */
int model_shape_same(const struct model_shape *a, const struct model_shape *b, char *why,
		     size_t cap);
/* "KIND (SIZES)" */
void model_shape_text(const struct model_shape *m, char *out, size_t cap);

/* ---- operations, through the shape's (or batch's, workspace's) model ---- */

void model_init_params(const struct model_shape *m, uint64_t seed, float *host_params);
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
struct model_gemm model_largest_gemm(const struct model_shape *m, int rows);

#endif
