/*
 * model_shape: what a model is made of, as every layer above it sees it: the table of
 * operations a model implements (struct model_ops), the shape it derives from the
 * settings with its tensor list (name, rows, cols, place in the flat parameter vector,
 * whether weight decay applies), and the common heads of its batches and workspaces.
 * Models build their shape with model_shape_begin/add; model.h finds a model by name and
 * passes calls on to it.
 */
#ifndef DDPTOK_MODEL_SHAPE_H
#define DDPTOK_MODEL_SHAPE_H

#include <stddef.h>
#include <stdint.h>

#include "corpus.h"
#include "dev.h"
#include "err.h"
#include "finite.h"
#include "prng.h"
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

/* The common head of every model's device workspace. z_loss is the coefficient of the
 * z-loss z_loss * log(Z)^2 that step adds to each supervised token's loss (train.z_loss),
 * class_weights the device table of one weight per vocabulary id that step multiplies
 * each token's loss by (train.class_weights; NULL: none), both docs/adaptations.md: 0 and
 * NULL after ws_create, set by the engine, read by step only (eval reports the plain
 * cross-entropy). */
struct model_ws {
	const struct model_ops *ops;
	float z_loss;
	const float *class_weights;
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

/* What bench's size sweep varies (docs/performance.md): one size of the model, over
 * sizes[], by each of vocabs[], a short run each on the synthetic source. A vocabulary
 * MODEL_SWEEP_VOCAB_CONFIGURED stands for the configured model's. */
#define MODEL_SWEEP_MAX 4
#define MODEL_SWEEP_VOCAB_CONFIGURED 0
/* a tokenizer-sized vocabulary that keeps a point of either built-in model within a few
 * hundred MB and about two seconds */
#define MODEL_SWEEP_VOCAB_LARGE 4096
struct model_sweep {
	const char *key; /* the [model] key it varies, e.g. "hidden" */
	int n_sizes, sizes[MODEL_SWEEP_MAX];
	int n_vocabs, vocabs[MODEL_SWEEP_MAX];
	/* s with that key at `size`, and any size that goes with it (a GPT's heads) */
	void (*set_size)(struct settings *s, int size);
};

/* A model: its operations. Every one is required but sweep (NULL: bench sweeps no
 * size). */
struct model_ops {
	const char *name; /* [model] kind */
	/* m->vocab, m->dim[] and the tensors (model_shape_add) from the settings */
	int (*shape)(const struct settings *s, struct model_shape *m, struct err *e);
	/* the first parameters, seeded, deterministic on every platform: one generator,
	 * seeded with run.seed on stream init_stream, drawn in the order of the flat vector;
	 * init_values writes the next count values of tensor t, drawing them from r (so the
	 * vector can be made a piece at a time: model_init_next) */
	uint64_t init_stream;
	void (*init_values)(const struct model_shape *m, int t, struct prng *r, float *out,
			    size_t count);
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
	/* optional: the arithmetic a sequence of `len` positions adds beyond its tokens'
	 * (the attention's over the pairs of positions that attend); NULL: none */
	double (*sequence_flop)(const struct model_shape *m, int len);
	struct model_gemm (*largest_gemm)(const struct model_shape *m, int rows);
	/* its sizes in words, e.g. "vocab 128, context 8" */
	void (*describe)(const struct model_shape *m, char *out, size_t cap);
	const struct model_sweep *sweep;
};

/* For models: an empty shape of kind ops, then tensors appended in parameter order (past
 * MODEL_MAX_TENSORS only counted, for model_shape_init to refuse). */
void model_shape_begin(struct model_shape *m, const struct model_ops *ops, int vocab);
void model_shape_add(struct model_shape *m, const char *name, int rows, int cols, int decay);
/* Which tensor holds flat index i, and its (row, col); -1 outside the vector. */
int model_locate(const struct model_shape *m, size_t i, int *row, int *col);
/* "name[row, col]" (or "name[row]" for a vector) of component i of the flat parameter
 * vector of m. */
void tensor_label(const struct model_shape *m, size_t i, char *out, size_t cap);
/* Scans x, a flat vector laid out as m's parameters, for NaN and infinity (finite.h): 0
 * when it holds none, else their count, with `what` set to "N non-finite value(s), the
 * first in tensor NAME[row, col] = VALUE". */
size_t model_nonfinite(const struct model_shape *m, const float *x, char *what, size_t cap);
/* The same text for a report of such a scan (bad > 0) made piece by piece, first being
 * the value at rep->first. */
void model_nonfinite_text(const struct model_shape *m, const struct finite_report *rep,
			  float first, char *what, size_t cap);
/* 1 when a and b are the same kind with the same tensors; otherwise 0 and `why` names the
 * kind and the first tensor that differs (a: this configuration, b: the other one). */
int model_shape_same(const struct model_shape *a, const struct model_shape *b, char *why,
		     size_t cap);
/* "KIND (SIZES)" */
void model_shape_text(const struct model_shape *m, char *out, size_t cap);

#endif
