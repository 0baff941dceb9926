/*
 * checkpoint_tensors: a checkpoint's parameters and optimizer state, scanned while they
 * are verified and read again into their destination, a chunk at a time (the order and
 * the reasons are described in checkpoint_tensors.h).
 */
#include "checkpoint_tensors.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "finite.h"
#include "npy.h"
#include "optim.h"

/* The files of an optimizer's state, in the order of its state vectors. */
static const char *const sgd_files[] = {"momentum.npy"};
static const char *const adamw_files[] = {"exp_avg.npy", "exp_avg_sq.npy"};
#define PARAMS_FILE "params.npy"
#define SECOND_MOMENT_FILE "exp_avg_sq.npy"

const char *checkpoint_vector_file(int optimizer, int vec)
{
	if (vec == ENGINE_VEC_PARAMS)
		return PARAMS_FILE;
	return optimizer == OPTIM_ADAMW ? adamw_files[vec] : sgd_files[vec];
}

/* What the scan found in one file. */
struct tensor_file {
	const char *name;
	int listed;                  /* the manifest lists it: scanned */
	struct ckpt_file file;       /* its entry, the identity its second read checks */
	int rc;                      /* its npy header's refusal (err), or ERR_OK */
	struct err err;
	enum npy_dtype dt;
	int ndim;
	size_t count, offset;        /* its values (a vector's length), where they start */
	struct finite_report bad;    /* NaN and infinity, the first's index */
	float first_bad;             /* the value at bad.first */
	size_t negative, first_negative; /* values below zero, the first's index */
	float negative_value;        /* the value there */
};

#define TENSOR_FILES 4

struct checkpoint_tensors {
	struct tensor_file f[TENSOR_FILES];
};

/* The record of file `name` (as strchr does, the caller knows whether it may change it) */
static struct tensor_file *find(const struct checkpoint_tensors *t, const char *name)
{
	for (int i = 0; i < TENSOR_FILES; i++)
		if (!strcmp(t->f[i].name, name))
			return (struct tensor_file *)&t->f[i];
	return NULL;
}

static int wants(void *arg, const char *name)
{
	return find(arg, name) != NULL;
}

/* The preamble and npy header of tf (the file's size is the manifest's: the store
 * checked it before the digest): parsed into tf, a refusal kept in tf->rc. */
static int read_head(struct tensor_file *tf, struct ckpt_stream *s, struct err *e)
{
	char pre[12];
	size_t got, more = 0, shape[NPY_MAX_DIMS];
	uint64_t len = tf->file.size;
	ERR_TRY(ckpt_stream_read(s, pre, sizeof pre, &got, e));
	size_t head = npy_head_size(pre, got), have = head > got && head <= len ? head : got;
	char *buf = malloc(have ? have : 1);
	if (!buf)
		return ERR(e, ERR_NOMEM, "out of memory for the header of %s", tf->name);
	memcpy(buf, pre, got);
	int rc = have > got ? ckpt_stream_read(s, buf + got, have - got, &more, e) : ERR_OK;
	err_clear(&tf->err);
	if (rc == ERR_OK && got + more < have) /* it shrank: the store's size check fails */
		tf->rc = ERR(&tf->err, ERR_DATA, "%s: shorter than its size", tf->name);
	else if (rc == ERR_OK) {
		tf->rc = npy_parse_head(buf, got + more, (size_t)len, tf->name, &tf->dt, shape,
					&tf->ndim, &tf->offset, &tf->err);
		/* a header holds at least its three keys: the values start past the preamble */
		assert(tf->rc != ERR_OK || tf->offset == got + more);
		tf->count = tf->rc == ERR_OK && tf->ndim == 1 ? shape[0] : 0;
	}
	free(buf);
	return rc;
}

/* Floats x[0, len), at lo in tf's vector, scanned. */
static void scan_chunk(struct tensor_file *tf, const float *x, size_t lo, size_t len)
{
	struct finite_report rep;
	finite_scan(x, len, &rep);
	if (rep.bad > 0 && tf->bad.bad == 0) {
		tf->bad.first = lo + rep.first;
		tf->first_bad = x[rep.first];
	}
	tf->bad.bad += rep.bad;
	if (strcmp(tf->name, SECOND_MOMENT_FILE) != 0)
		return;
	for (size_t i = 0; i < len; i++)
		if (x[i] < 0.0f && tf->negative++ == 0) {
			tf->first_negative = lo + i;
			tf->negative_value = x[i];
		}
}

/* ckpt_scan's read: the header, then a float32 vector's values chunk by chunk. */
static int scan_file(void *arg, const struct ckpt_file *f, struct ckpt_stream *s,
		     struct err *e)
{
	struct tensor_file *tf = find(arg, f->name);
	tf->listed = 1;
	tf->file = *f;
	ERR_TRY(read_head(tf, s, e));
	if (tf->rc != ERR_OK || tf->dt != NPY_F32 || tf->ndim != 1)
		return ERR_OK; /* refused as it is (checkpoint_tensors_check) */
	float *buf = malloc((tf->count < ENGINE_STATE_CHUNK ? tf->count : ENGINE_STATE_CHUNK) *
			    sizeof(float) + 1);
	if (!buf)
		return ERR(e, ERR_NOMEM, "out of memory for a checkpoint's buffer");
	int rc = ERR_OK;
	for (size_t lo = 0, got = 1; lo < tf->count && rc == ERR_OK && got > 0;
	     lo += ENGINE_STATE_CHUNK) {
		size_t len = tf->count - lo < ENGINE_STATE_CHUNK ? tf->count - lo : ENGINE_STATE_CHUNK;
		rc = ckpt_stream_read(s, buf, len * sizeof(float), &got, e);
		/* a file shorter than its size a moment ago fails the store's check */
		if (rc == ERR_OK && got == len * sizeof(float))
			scan_chunk(tf, buf, lo, len);
	}
	free(buf);
	return rc;
}

int checkpoint_tensors_scan(struct checkpoint_tensors **out, struct ckpt_scan *scan,
			    struct err *e)
{
	static const char *const names[TENSOR_FILES] = {PARAMS_FILE, "momentum.npy",
							"exp_avg.npy", SECOND_MOMENT_FILE};
	struct checkpoint_tensors *t = calloc(1, sizeof *t);
	*out = t;
	if (!t)
		return ERR(e, ERR_NOMEM, "out of memory");
	for (int i = 0; i < TENSOR_FILES; i++)
		t->f[i].name = names[i];
	*scan = (struct ckpt_scan){wants, scan_file, t};
	return ERR_OK;
}

void checkpoint_tensors_free(struct checkpoint_tensors *t)
{
	free(t);
}

/* A vector's file must be listed, a float32 vector of n values, all finite. A run stops
 * at its first non-finite loss or gradient norm and checks what it checkpoints
 * (checkpoint_write), so only damage or an edit with a recomputed manifest brings NaN or
 * infinity here, and a resume from it would train on nothing but NaN. */
static int check_vector(const struct tensor_file *tf, const char *dir,
			const struct model_shape *m, size_t n, struct err *e)
{
	char what[300];
	if (!tf->listed)
		return ERR(e, ERR_DATA, "checkpoint %s: no file %s in its %s", dir, tf->name,
			   CKPT_MANIFEST);
	if (tf->rc != ERR_OK) {
		*e = tf->err;
		err_prefix(e, "checkpoint %s", dir);
		return tf->rc;
	}
	if (tf->dt != NPY_F32 || tf->ndim != 1)
		return ERR(e, ERR_DATA, "checkpoint %s: %s is not a float32 vector", dir, tf->name);
	if (tf->count != n)
		return ERR(e, ERR_DATA, "checkpoint %s: %s holds %zu values, state.json announces "
			   "%zu parameters", dir, tf->name, tf->count, n);
	if (tf->bad.bad == 0)
		return ERR_OK;
	model_nonfinite_text(m, &tf->bad, tf->first_bad, what, sizeof what);
	return ERR(e, ERR_DATA, "checkpoint %s: %s holds %s", dir, tf->name, what);
}

/* AdamW's second moment is an average of squares: a negative one (an edit, or the first
 * moment in its place) would make the update's square root NaN. */
static int check_second_moment(const struct tensor_file *tf, const char *dir,
			       const struct model_shape *m, struct err *e)
{
	char label[120];
	if (tf->negative == 0)
		return ERR_OK;
	tensor_label(m, tf->first_negative, label, sizeof label);
	return ERR(e, ERR_DATA, "checkpoint %s: %s holds %zu negative value%s (a second moment "
		   "is an average of squares; the first at index %zu, tensor %s = %g)", dir,
		   tf->name, tf->negative, tf->negative == 1 ? "" : "s", tf->first_negative, label,
		   (double)tf->negative_value);
}

int checkpoint_tensors_check(const struct checkpoint_tensors *t, const char *dir, int optimizer,
			     const struct model_shape *m, size_t n, struct err *e)
{
	assert(m->n_params == n); /* the messages label indices of m's tensors */
	for (int k = ENGINE_VEC_PARAMS; k < optim_state_vectors(optimizer); k++)
		ERR_TRY(check_vector(find(t, checkpoint_vector_file(optimizer, k)), dir, m, n, e));
	if (optimizer == OPTIM_ADAMW)
		ERR_TRY(check_second_moment(find(t, SECOND_MOMENT_FILE), dir, m, e));
	return ERR_OK;
}

int checkpoint_tensors_stream(const struct checkpoint_tensors *t, const char *dir,
			      const char *name, checkpoint_chunk_fn to, void *arg, struct err *e)
{
	const struct tensor_file *tf = find(t, name);
	struct ckpt_reread rr;
	struct err later;
	assert(tf && tf->listed && tf->rc == ERR_OK);
	float *buf = malloc((tf->count < ENGINE_STATE_CHUNK ? tf->count : ENGINE_STATE_CHUNK) *
			    sizeof(float) + 1);
	if (!buf)
		return ERR(e, ERR_NOMEM, "out of memory for a checkpoint's buffer");
	int rc = ckpt_reopen(dir, &tf->file, &rr, e);
	for (size_t lo = 0; lo < tf->count && rc == ERR_OK; lo += ENGINE_STATE_CHUNK) {
		size_t len = tf->count - lo < ENGINE_STATE_CHUNK ? tf->count - lo : ENGINE_STATE_CHUNK;
		rc = ckpt_reread_at(&rr, buf, len * sizeof(float), tf->offset + lo * sizeof(float),
				    e);
		if (rc == ERR_OK)
			rc = to(arg, lo, len, buf, e);
	}
	/* the file must still be the one verified once it has been read */
	err_clear(&later);
	int end = ckpt_reread_end(&rr, rc == ERR_OK ? e : &later);
	free(buf);
	return rc ? rc : end;
}
