/*
 * model: the window MLP language model, written against the device interface only.
 *
 * For each position t of a sequence, the ids of the C previous tokens (DATA_BOS before
 * the start) are embedded (V x D table), concatenated (C*D), h = tanh(W1 x + b1) with H
 * hidden units, logits = W2 h + b2 over V ids; loss_t = logsumexp(logits) -
 * logits[target]. The model returns loss SUMS: normalization happens outside, through
 * the `scale` each caller passes to the backward (the factor c of norm_factor(), norm.h).
 *
 * Parameters live in one flat float32 buffer, in the order of model_shape.p[]:
 *   embed [V x D], w1 [H x C*D], b1 [H], w2 [V x H], b2 [V]
 * so that gradients compare as one vector and dump as named tensors.
 *
 * A batch is built on the host from sequence ids: `packed` keeps only supervised
 * positions (no padding compute); `padded` lays out every position of a rectangle
 * (batch x longest sequence) and marks padding and prompt positions with target -1,
 * which the loss ignores. Both give the same sums.
 */
#ifndef DDPTOK_MODEL_H
#define DDPTOK_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "corpus.h"
#include "dev.h"
#include "err.h"

enum { MODEL_EMBED = 0, MODEL_W1, MODEL_B1, MODEL_W2, MODEL_B2, MODEL_NPARAM };

struct param_info {
	const char *name;
	int rows, cols; /* cols == 1 for vectors */
	size_t offset;  /* in floats */
	size_t count;
};

struct model_shape {
	int vocab, context, embed, hidden;
	size_t n_params;
	struct param_info p[MODEL_NPARAM];
};

void model_shape_init(struct model_shape *m, int vocab, int context, int embed, int hidden);
/* Seeded initialization (uniform +-1/sqrt(fan_in) for weights, like PyTorch's Linear
 * default; biases zero; embedding uniform +-1). Deterministic on every platform. */
void model_init_params(const struct model_shape *m, uint64_t seed, float *host_params);
/* Which parameter tensor holds flat index i, and its (row, col). */
int model_locate(const struct model_shape *m, size_t i, int *row, int *col);

/* A batch as the model sees it (host memory). */
struct batch {
	int rows;          /* positions laid out (packed: supervised only) */
	int cap;           /* allocated rows */
	int context;
	int32_t *ctx;      /* rows x context ids */
	int32_t *target;   /* rows; -1 = not supervised */
	int64_t supervised;
};

int batch_alloc(struct batch *b, int cap_rows, int context, struct err *e);
void batch_free(struct batch *b);
/* Lays out sequences ids[0..n) of the corpus. ERR_DEVICE if it does not fit b->cap. */
int batch_build(struct batch *b, const struct corpus *c, const int *ids, int n, int layout,
		struct err *e);
/* Rows a batch of `n` sequences may need at most (for allocation). */
int batch_max_rows(int n, int max_len);

/* Per-device workspace: activations and batch buffers, allocated once. */
struct model_ws;

/* Bytes of device memory a workspace for max_rows positions takes; *logits: of which the
 * max_rows x vocab logits (the part a large vocabulary makes dominant). */
size_t model_ws_bytes(const struct model_shape *m, int max_rows, size_t *logits);

/* The device interface counts elements in int: every count an op of a batch of up to
 * max_rows rows gets (rows x context, rows x context x embed, rows x hidden, rows x vocab,
 * the parameter count) must stay within INT_MAX, or it would wrap negative and the op
 * would do nothing. ERR_CONFIG naming the product and the keys to lower if one does not;
 * model_ws_create checks it before allocating anything. */
int model_ws_check_size(const struct model_shape *m, int max_rows, struct err *e);

int model_ws_create(struct dev *d, const struct model_shape *m, int max_rows,
		    struct model_ws **out, struct err *e);
void model_ws_destroy(struct model_ws *ws);
/* Forward + backward of scale * (loss sum) for one batch; gradients are ADDED to
 * `grads` (device), and the unscaled loss sum (double) divided by loss_divisor is added
 * to *loss_acc, a double in device memory: nothing waits for the device, so a window's
 * microbatches run without a host synchronisation. */
int model_step(struct model_ws *ws, const float *params, float *grads, const struct batch *b,
	       float scale, double loss_divisor, double *loss_acc, struct err *e);
/* Forward only: loss sum and number of supervised positions where argmax == target. */
int model_eval(struct model_ws *ws, const float *params, const struct batch *b,
	       double *loss_sum, int64_t *hits, struct err *e);

#endif
