/*
 * checkpoint_tensors: the large files of a checkpoint, params.npy and the optimizer's
 * state files, loaded without a host copy of the model's size. They are read twice, a
 * chunk at a time: first while the store digests them (ckpt_verify_scan), which is when
 * their npy headers are parsed and their values scanned for NaN, infinity and (AdamW's
 * second moment) negative values; what that found is judged once the small files have
 * said what the tensors must hold (checkpoint_tensors_check), so that a checkpoint is
 * refused for the same reason, with the same message, in the same order as when it was
 * read whole. Then, only for a checkpoint accepted as a whole, each vector is read again
 * from the very files verified (ckpt_reopen: no second digest) and handed on a chunk at
 * a time (checkpoint_tensors_stream): to the ranks, or to a host vector where a command
 * needs one.
 */
#ifndef DDPTOK_CHECKPOINT_TENSORS_H
#define DDPTOK_CHECKPOINT_TENSORS_H

#include <stddef.h>

#include "ckpt.h"
#include "err.h"
#include "model_shape.h"

/* The file of vector vec of a checkpoint of `optimizer` (enum optim_kind): params.npy for
 * ENGINE_VEC_PARAMS, else the optimizer's state vector vec (momentum.npy; exp_avg.npy,
 * exp_avg_sq.npy). */
const char *checkpoint_vector_file(int optimizer, int vec);

struct checkpoint_tensors;

/* A record of what the tensor files hold, *out, and the scan that fills it while
 * ckpt_verify_scan digests them. Free with checkpoint_tensors_free (NULL is fine). */
int checkpoint_tensors_scan(struct checkpoint_tensors **out, struct ckpt_scan *scan,
			    struct err *e);
void checkpoint_tensors_free(struct checkpoint_tensors *t);

/* The checkpoint's verdict on its tensors, from what the scan recorded: params.npy and
 * `optimizer`'s files listed, float32 vectors of n values each (the parameters of model
 * m), finite, AdamW's second moment not negative; ERR_DATA naming dir, the file and the
 * first bad tensor. */
int checkpoint_tensors_check(const struct checkpoint_tensors *t, const char *dir, int optimizer,
			     const struct model_shape *m, size_t n, struct err *e);

/* Reads file `name` (checked above) again, chunk by chunk (ENGINE_STATE_CHUNK floats),
 * handing each to `to` with its position lo in the vector; ERR_DATA when the file changed
 * since it was verified (then what `to` received must not be used). */
typedef int (*checkpoint_chunk_fn)(void *arg, size_t lo, size_t len, const float *x,
				   struct err *e);
int checkpoint_tensors_stream(const struct checkpoint_tensors *t, const char *dir,
			      const char *name, checkpoint_chunk_fn to, void *arg, struct err *e);

#endif
