/*
 * dev: the device memory/compute interface the model is written against.
 *
 * One `struct dev` belongs to one device thread and is only ever used from it. Its
 * operations are a table of function pointers filled by a backend: the host (CPU)
 * backend in runtime/dev_host.c, the CUDA backend in gpu/. The model calls nothing
 * else, so the same model code runs on both. Pointers handed to these functions live in
 * the device's memory space (host memory on the CPU backend, device memory on CUDA),
 * except where a parameter says `host`.
 *
 * Matrices are row-major. Every operation returns ERR_OK or an error code with `e`
 * filled; operations may be asynchronous on a backend that has streams: dev_sync() and
 * the download of results order them.
 *
 * Each compute operation mirrors a host function of the same name and argument order;
 * their per-element formulas live in runtime/kmath.h, shared by both backends.
 *
 * Costs a GPU pays in latency are counted on every backend (struct dev_counts), so that
 * the CPU tests can bound them: each backend counts where it makes the host wait for the
 * device and what it queues. The waits are the same on both (the interface's waiting
 * operations), so the CPU's count of them bounds the CUDA backend's interface calls; the
 * launches and copies are each backend's own (a CUDA sum is two kernels and a copy, the
 * CPU's one operation), and a collective's waits are counted by the collective.
 */
#ifndef DDPTOK_DEV_H
#define DDPTOK_DEV_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

enum dev_backend { DEV_BACKEND_CPU = 0, DEV_BACKEND_CUDA = 1 };

struct dev;

/* One AdamW update's settings (dev_ops.adamw): the rate, the moments' decays, eps, the
 * weight decay and the bias corrections bc1 = 1 - beta1^t, bc2 = 1 - beta2^t (computed
 * by the caller for update t), and the table of the ranges the weight decay applies to. */
struct dev_adamw {
	float lr, beta1, beta2, eps, wd, bc1, bc2;
	int n_decay;          /* ranges in the table */
	const int32_t *decay; /* device: 2 * n_decay element indices, [lo, hi) pairs */
};

/* What a device has issued since it was created (differences give a window's). */
struct dev_counts {
	/* operations that made the host wait for the device: a drained stream, a result
	 * read back, a collective waited for; on the CPU backend the interface's waiting
	 * operations (download, sum, sum_squares, argmax_hits, count_nonfinite,
	 * fingerprint, sync) */
	uint64_t syncs;
	/* kernels and library calls queued (a cuBLAS GEMM, each kernel of a CUB sort); on
	 * the CPU backend one per compute operation (gemm and the element operations) */
	uint64_t launches;
	/* copies and fills queued on the device (upload, download, copy, zero) */
	uint64_t copies;
	/* the arithmetic of the GEMMs issued, 2 m n k each, on every backend; and on the CPU
	 * backend the seconds the thread spent inside them (the BLAS call returns with the
	 * product done). A CUDA GEMM only queues its work, so there it stays 0: the time of
	 * the device's GEMMs would need events. */
	double gemm_flop;
	double gemm_seconds;
};

struct dev_ops {
	const char *name; /* "cpu" or "cuda" */
	void (*destroy)(struct dev *d);

	/* memory */
	int (*alloc)(struct dev *d, size_t bytes, void **out, struct err *e);
	void (*release)(struct dev *d, void *p);
	/* host -> device; `host` may be reused by the caller once dev_sync() returned */
	int (*upload)(struct dev *d, void *dst, const void *host, size_t bytes, struct err *e);
	/* device -> host; returns once `host` holds the data */
	int (*download)(struct dev *d, void *host, const void *src, size_t bytes, struct err *e);
	int (*copy)(struct dev *d, void *dst, const void *src, size_t bytes, struct err *e);
	int (*zero)(struct dev *d, void *p, size_t bytes, struct err *e);
	int (*sync)(struct dev *d, struct err *e);

	/* C[m x n] = alpha * op(A)[m x k] * op(B)[k x n] + beta * C, row-major;
	 * op(X) = X^T when the trans flag is non-zero. lda/ldb/ldc are row strides. */
	int (*gemm)(struct dev *d, int trans_a, int trans_b, int m, int n, int k, float alpha,
		    const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc,
		    struct err *e);
	/* `count` products of gemm's form in one call: item i is gemm's product on
	 * a + i * stride_a, b + i * stride_b and c + i * stride_c (strides in floats); the
	 * items' C must not overlap. The host runs every item through gemm's sgemm, so an
	 * item has the bits of that gemm call; CUDA issues one cublasSgemmStridedBatched
	 * (the same bits every call, not necessarily cublasSgemm's). Counted as one launch
	 * and count products' FLOP. The attention's heads: one call per product. */
	int (*gemm_batched)(struct dev *d, int trans_a, int trans_b, int m, int n, int k,
			    float alpha, const float *a, int lda, size_t stride_a, const float *b,
			    int ldb, size_t stride_b, float beta, float *c, int ldc,
			    size_t stride_c, int count, struct err *e);

	/* x[p, j*dim + t] = table[ctx[p*width + j]*dim + t] for p < rows, j < width, t < dim */
	int (*embed_gather)(struct dev *d, int rows, int width, int dim, const int32_t *ctx,
			    const float *table, float *x, struct err *e);
	/* h[p,j] = tanh(z[p,j] + bias[j]) in place on z (rows x cols) */
	int (*bias_tanh)(struct dev *d, int rows, int cols, const float *bias, float *z,
			 struct err *e);
	/* Softmax cross-entropy over each row of logits (rows x cols), after adding bias[j].
	 * For a row with target[p] >= 0: loss[p] = logsumexp(row) - row[target] and the row is
	 * replaced by scale * (softmax(row) - onehot(target)). For target[p] < 0 (not
	 * supervised): loss[p] = 0 and the row becomes 0. `loss` has `rows` entries.
	 * zc != 0 adds the z-loss zc * lse^2 (lse = logsumexp(row)) to each supervised loss
	 * and its gradient: the row becomes scale * ((1 + 2 zc lse) softmax - onehot); zc = 0
	 * is the plain cross-entropy bit for bit (kmath.h's km_xent_*). class_w (cols
	 * entries, or NULL: all 1) weighs a row by its target's class: its loss and its
	 * gradient are multiplied by class_w[target] (a weight of 1 changes no bit). */
	int (*xent)(struct dev *d, int rows, int cols, const float *bias, const int32_t *target,
		    float scale, float zc, const float *class_w, float *logits, float *loss,
		    struct err *e);
	/* *host_out = sum of x[0..n) accumulated in double in a fixed order (the same every
	 * call); waits for the result */
	int (*sum)(struct dev *d, int n, const float *x, double *host_out, struct err *e);
	/* *acc += (the same sum of x[0..n)) / divisor, in double, with acc in device memory;
	 * does not wait (a divisor of 1 adds the sum itself, exactly); divisor != 0, and
	 * nothing happens for n <= 0 */
	int (*sum_acc)(struct dev *d, int n, const float *x, double divisor, double *acc,
		       struct err *e);
	/* *host_out = sum of x[i]^2 over x[0..n), each square and every addition in double,
	 * in a fixed order (the same every call): on the host i ascending within fixed blocks,
	 * the block sums in order (dev_host_kernels.h; the same for any devices.threads), sum's
	 * two passes on CUDA (the same bits on each backend, not across them); waits for the
	 * result */
	int (*sum_squares)(struct dev *d, int n, const float *x, double *host_out,
			   struct err *e);
	/* Where sum_squares is block sums added in block order (the host's, squares_block
	 * elements a block, the last one shorter): host_out[b - b_lo] = block b's sum of
	 * squares, in sum_squares' order, for b_lo <= b < b_hi. Several ranks may each sum
	 * some of the blocks and add all the sums in block order: the bits of sum_squares.
	 * NULL (and squares_block 0) where the backend has no such blocks (CUDA). Waits. */
	int (*sum_squares_blocks)(struct dev *d, int n, const float *x, int b_lo, int b_hi,
				  double *host_out, struct err *e);
	int squares_block;
	/* out[j] += sum over p < rows of x[p*cols + j] in a fixed order: p ascending on the
	 * host (and on CUDA up to 64 rows); above that CUDA adds fixed chunks of rows, then
	 * the chunk sums in order (the same bits every call, not the host's) */
	int (*col_sum_acc)(struct dev *d, int rows, int cols, const float *x, float *out,
			   struct err *e);
	/* dz[p,j] = dh[p,j] * (1 - h[p,j]^2) in place on dh (rows x cols), and
	 * out[j] += sum over p of dz[p,j] with col_sum_acc's additions on each backend (the
	 * host does both in one pass) */
	int (*tanh_backward_col_sum)(struct dev *d, int rows, int cols, const float *h, float *dh,
				     float *out, struct err *e);
	/* table_grad[ctx[p*width+j]*dim + t] += dx[p, j*dim + t], positions p ascending
	 * then j ascending for each table row (deterministic, no float atomics) */
	int (*embed_backward)(struct dev *d, int rows, int width, int dim, const int32_t *ctx,
			      const float *dx, float *table_grad, struct err *e);
	/* x *= alpha, n elements */
	int (*scale)(struct dev *d, int n, float alpha, float *x, struct err *e);
	/* SGD with momentum, PyTorch semantics, n elements:
	 *   g' = g + weight_decay * p
	 *   buf = first ? g' : momentum * buf + g'
	 *   p  -= lr * buf                                        */
	int (*sgd)(struct dev *d, int n, float lr, float momentum, float weight_decay, int first,
		   float *p, const float *g, float *buf, struct err *e);
	/* AdamW over n elements, km_adamw (kmath.h) on each: decoupled decay p -= lr*wd*p, the
	 * moments m and v, p -= (lr / bc1) * m / (sqrt(v / bc2) + eps), in one operation
	 * whatever the mix of decaying and non-decaying tensors: a->decay (device memory)
	 * lists the a->n_decay ranges [decay[2k], decay[2k+1]), ascending and disjoint, of the
	 * elements that decay by a->wd, every other element by 0. The ranges count elements
	 * of the whole vector, p[0] being its element `first`, so that a caller updating a
	 * slice of it (a shard, a thread's part) passes the whole's table and the slice's
	 * offset. Element-wise: a slice's bits are the whole's. */
	int (*adamw)(struct dev *d, int n, int first, const struct dev_adamw *a, float *p,
		     const float *g, float *m, float *v, struct err *e);
	/* *host_hits = number of rows p with target[p] >= 0 whose argmax over j of
	 * (logits[p,j] + bias[j]) equals target[p] (ties: the lowest j). Waits. */
	int (*argmax_hits)(struct dev *d, int rows, int cols, const float *bias,
			   const float *logits, const int32_t *target, int64_t *host_hits,
			   struct err *e);
	/* all-finite check: *bad (host) = number of non-finite entries of x[0..n) */
	int (*count_nonfinite)(struct dev *d, int n, const float *x, int64_t *bad, struct err *e);
	/* *host_out = the fingerprint of the bits of x[0..n): the sum modulo 2^64 of
	 * km_fingerprint_term(first + i, bits of x[i]) over i < n (kmath.h), where `first`
	 * (>= 0) is the index of x[0] in the vector fingerprinted, so that consecutive
	 * pieces' fingerprints add up to the whole's. The same 64 bits on every backend and
	 * in any order of adding; only they reach the host. Waits. */
	int (*fingerprint)(struct dev *d, int n, const float *x, int first, uint64_t *host_out,
			   struct err *e);

	/* ---- the GPT model's operations (element math in kmath.h, docs/gpt.md) ---- */
	/* x[p] = wte[ids[p]] + wpe[pos[p]], rows p < rows of dim floats */
	int (*embed_pos)(struct dev *d, int rows, int dim, const int32_t *ids,
			 const int32_t *pos, const float *wte, const float *wpe, float *x,
			 struct err *e);
	/* x[p,j] += bias[j] (rows x cols) */
	int (*bias_add)(struct dev *d, int rows, int cols, const float *bias, float *x,
			struct err *e);
	/* LayerNorm of each row of x (rows x cols): km_ln_stats gives mean[p] and rstd[p]
	 * (both kept for the backward), out[p,j] = km_ln_hat(x[p,j]) * w[j] + b[j] */
	int (*layernorm)(struct dev *d, int rows, int cols, const float *x, const float *w,
			 const float *b, float *out, float *mean, float *rstd, struct err *e);
	/* Its backward from dout: dx[p,j] += km_ln_back_dx(...) (accumulated: dx is the
	 * residual stream's gradient); dw[j] += sum over p of dout xhat, db[j] += sum over p
	 * of dout, rows ascending on every backend (the same bits as the host) */
	int (*layernorm_backward)(struct dev *d, int rows, int cols, const float *x,
				  const float *w, const float *mean, const float *rstd,
				  const float *dout, float *dx, float *dw, float *db, struct err *e);
	/* out[i] = km_gelu(x[i]), n elements (out != x) */
	int (*gelu)(struct dev *d, int n, const float *x, float *out, struct err *e);
	/* dout[i] = km_gelu_backward(x[i], dout[i]) in place */
	int (*gelu_backward)(struct dev *d, int n, const float *x, float *dout, struct err *e);
	/* `heads` n x n matrices, head h's at s + h * stride (ld n, stride >= n * n): every
	 * row i < n of each through km_causal_softmax_row, in place, which scales, masks
	 * (j > i becomes 0) and normalizes in the one pass: the attention probabilities of
	 * the heads of one document, one launch */
	int (*causal_softmax)(struct dev *d, int heads, int n, size_t stride, float scale,
			      float *s, struct err *e);
	/* every row of every head through km_causal_softmax_back_row: dp (the same layout)
	 * becomes the gradient of the scores, given the probabilities p */
	int (*causal_softmax_backward)(struct dev *d, int heads, int n, size_t stride,
				       float scale, const float *p, float *dp, struct err *e);
};

struct dev {
	const struct dev_ops *ops;
	enum dev_backend backend;
	int rank;      /* rank of the device thread that owns it */
	int device_id; /* CPU: rank; CUDA: the GPU ordinal */
	void *impl;    /* backend state */
	struct dev_counts counts; /* filled by the backend, read by anyone on its thread */
};

/* Counts what a backend (or a collective on the device's behalf) issued; d may be NULL
 * (a kernel called without a device, in tests). */
static inline void dev_count(struct dev *d, unsigned launches, unsigned copies, unsigned syncs)
{
	if (d) {
		d->counts.launches += launches;
		d->counts.copies += copies;
		d->counts.syncs += syncs;
	}
}

/* Counts `count` GEMMs of m x n x k that kept the host `seconds` together (0 where they
 * only queued). */
static inline void dev_count_gemms(struct dev *d, int count, int m, int n, int k,
				   double seconds)
{
	if (d) {
		d->counts.gemm_flop += 2.0 * m * n * k * count;
		d->counts.gemm_seconds += seconds;
	}
}

/* Counts one GEMM of m x n x k. */
static inline void dev_count_gemm(struct dev *d, int m, int n, int k, double seconds)
{
	dev_count_gemms(d, 1, m, n, k, seconds);
}

/* what was counted between `before` and `now` */
static inline struct dev_counts dev_counts_since(const struct dev_counts *now,
						 const struct dev_counts *before)
{
	return (struct dev_counts){now->syncs - before->syncs, now->launches - before->launches,
				   now->copies - before->copies,
				   now->gemm_flop - before->gemm_flop,
				   now->gemm_seconds - before->gemm_seconds};
}

/* Host backend: one OpenBLAS thread per device thread; call from the owning thread. */
int dev_host_create(int rank, struct dev **out, struct err *e);
/* The same with `threads` threads (1..256): the device thread and threads - 1 helpers
 * that its larger GEMMs and loops are split over, with the bits of one thread. */
int dev_host_create_threads(int rank, int threads, struct dev **out, struct err *e);
/* The threads of each of `ranks_here` host devices on this host for devices.threads =
 * requested: requested when > 0, else (auto) the CPUs this process may run on divided by
 * ranks_here, at least 1. dev_host_threads_for takes the CPU count as an argument. */
int dev_host_threads(int requested, int ranks_here);
int dev_host_threads_for(int requested, int cpus, int ranks_here);
/* The build of the host backend's loops this CPU runs: "avx2" or "generic". */
const char *dev_host_kernels_name(void);
void dev_destroy(struct dev *d);

#endif
