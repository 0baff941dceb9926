/*
 * gpt_llmc: llm.c's GPT-2 model file, written from and read into the GPT's flat parameter
 * vector (see gpt_llmc.h). The GPT's tensors are already in llm.c's order, so only the
 * two tables with a row count of their own (wte: the vocabulary, padded; wpe: the
 * positions) are copied row by row; the rest is one contiguous block.
 */
#include "gpt_llmc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "corpus_core.h"
#include "fsx.h"
#include "gpt_shape.h"

/* Sizes past these are damage, refused before any product can overflow. */
#define LLMC_MAX_ROWS (1 << 24)
#define LLMC_MAX_WIDTH (1 << 16)
#define LLMC_MAX_LAYERS 1024

int gpt_llmc_reserved(int source)
{
	return (int)-corpus_user_id(source, 0);
}

/* bytes a weight takes in a file of `version` */
static int llmc_value_size(int version)
{
	return version == GPT_LLMC_VERSION_BF16 ? 2 : 4;
}

/* float32 to bfloat16, rounded to nearest even (NaN kept a NaN) */
static uint16_t to_bf16(float f)
{
	uint32_t b;
	memcpy(&b, &f, 4);
	if ((b & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((b >> 16) | 0x40);
	return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

static float from_bf16(uint16_t h)
{
	uint32_t b = (uint32_t)h << 16;
	float f;
	memcpy(&f, &b, 4);
	return f;
}

/* floats of the per-layer and final tensors: everything after wte and wpe */
static uint64_t block_floats(uint64_t layers, uint64_t width)
{
	return layers * (12 * width * width + 13 * width) + 2 * width;
}

static int round_vocab(int v)
{
	return (v + GPT_LLMC_VOCAB_ROUND - 1) / GPT_LLMC_VOCAB_ROUND * GPT_LLMC_VOCAB_ROUND;
}

/* n x width floats (rows NULL: zeros) as the file's values: float32, or bfloat16 */
static int write_rows(struct fsx_writer *w, const float *rows, size_t n, size_t width,
		      int version, struct err *e)
{
	size_t total = n * width;
	if (version == GPT_LLMC_VERSION && rows)
		return total ? fsx_writer_write(w, rows, total * sizeof(float), e) : ERR_OK;
	union {
		float f[256];
		uint16_t h[256];
	} buf;
	for (size_t i = 0; i < total; i += 256) {
		size_t k = total - i < 256 ? total - i : 256;
		for (size_t j = 0; j < k; j++) {
			float v = rows ? rows[i + j] : 0.0f;
			if (version == GPT_LLMC_VERSION)
				buf.f[j] = v;
			else
				buf.h[j] = to_bf16(v);
		}
		ERR_TRY(fsx_writer_write(w, &buf, k * (size_t)llmc_value_size(version), e));
	}
	return ERR_OK;
}

static int write_body(struct fsx_writer *w, const struct model_shape *m, int reserved,
		      const float *params, int version, struct err *e)
{
	size_t c = (size_t)GPT_C(m), users = (size_t)(m->vocab - reserved);
	size_t pad = (size_t)round_vocab((int)users) - users;
	const float *wte = params + m->p[GPT_WTE].offset + (size_t)reserved * c;
	ERR_TRY(write_rows(w, wte, users, c, version, e));
	ERR_TRY(write_rows(w, NULL, pad, c, version, e));
	size_t rest = m->p[GPT_WPE].offset;
	return write_rows(w, params + rest, m->n_params - rest, 1, version, e);
}

int gpt_llmc_write(const char *path, const struct model_shape *m, int reserved,
		   const float *params, int version, struct err *e)
{
	int32_t header[GPT_LLMC_HEADER] = {0};
	header[0] = GPT_LLMC_MAGIC;
	header[1] = version;
	header[2] = GPT_T(m);
	header[3] = m->vocab - reserved;
	header[4] = GPT_L(m);
	header[5] = GPT_H(m);
	header[6] = GPT_C(m);
	header[7] = round_vocab(m->vocab - reserved);
	struct fsx_writer w;
	int rc;
	if ((rc = fsx_writer_open(&w, path, e)) ||
	    (rc = fsx_writer_write(&w, header, sizeof header, e)) ||
	    (rc = write_body(&w, m, reserved, params, version, e)) ||
	    (rc = fsx_writer_commit(&w, e))) {
		fsx_writer_abort(&w);
		err_prefix(e, "llm.c model file %s", path);
	}
	return rc;
}

/* ERR_DATA unless 1 <= value <= most, naming the file and the field */
static int check_field(const char *path, const char *field, int value, int most, struct err *e)
{
	if (value < 1 || value > most)
		return ERR(e, ERR_DATA, "llm.c model file %s: header field %s = %d is outside "
			   "1 .. %d", path, field, value, most);
	return ERR_OK;
}

static int check_header(const char *path, const int32_t *hd, struct gpt_llmc_header *h,
			struct err *e)
{
	if (hd[0] != GPT_LLMC_MAGIC)
		return ERR(e, ERR_DATA, "llm.c model file %s: magic %d, expected %d (not an llm.c "
			   "GPT-2 model file)", path, hd[0], GPT_LLMC_MAGIC);
	if (hd[1] != GPT_LLMC_VERSION && hd[1] != GPT_LLMC_VERSION_BF16)
		return ERR(e, ERR_DATA, "llm.c model file %s: version %d, expected %d (float32 "
			   "weights) or %d (bfloat16)", path, hd[1], GPT_LLMC_VERSION,
			   GPT_LLMC_VERSION_BF16);
	*h = (struct gpt_llmc_header){hd[2], hd[3], hd[4], hd[5], hd[6], hd[7], hd[1]};
	ERR_TRY(check_field(path, "maxT", h->max_t, LLMC_MAX_ROWS, e));
	ERR_TRY(check_field(path, "V", h->vocab, LLMC_MAX_ROWS, e));
	ERR_TRY(check_field(path, "L", h->layers, LLMC_MAX_LAYERS, e));
	ERR_TRY(check_field(path, "NH", h->heads, LLMC_MAX_WIDTH, e));
	ERR_TRY(check_field(path, "C", h->width, LLMC_MAX_WIDTH, e));
	ERR_TRY(check_field(path, "Vp", h->padded_vocab, LLMC_MAX_ROWS, e));
	if (h->padded_vocab < h->vocab)
		return ERR(e, ERR_DATA, "llm.c model file %s: header field Vp = %d is below V = %d",
			   path, h->padded_vocab, h->vocab);
	return ERR_OK;
}

/* Opens `path` for reading, refusing anything but a regular file before a byte is read:
 * without O_NONBLOCK a FIFO with no writer blocks in open() for good, and a directory
 * opens, then reads nothing. st: its status. */
static int open_model_file(const char *path, FILE **out, struct stat *st, struct err *e)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return ERR(e, ERR_IO, "llm.c model file %s: %s", path, strerror(errno));
	int rc = ERR_OK;
	if (fstat(fd, st))
		rc = ERR(e, ERR_IO, "llm.c model file %s: %s", path, strerror(errno));
	else if (!S_ISREG(st->st_mode))
		rc = ERR(e, ERR_IO, "llm.c model file %s: not a regular file%s", path,
			 S_ISDIR(st->st_mode) ? " (a directory)" :
			 S_ISFIFO(st->st_mode) ? " (a FIFO)" : "");
	else if (!(*out = fdopen(fd, "rb")))
		rc = ERR(e, ERR_IO, "llm.c model file %s: %s", path, strerror(errno));
	if (rc)
		close(fd);
	return rc;
}

int gpt_llmc_read_header(const char *path, struct gpt_llmc_header *h, struct err *e)
{
	int32_t hd[GPT_LLMC_HEADER];
	struct stat st;
	FILE *f = NULL;
	ERR_TRY(open_model_file(path, &f, &st, e));
	size_t got = fread(hd, sizeof(int32_t), GPT_LLMC_HEADER, f);
	fclose(f);
	if (got != GPT_LLMC_HEADER)
		return ERR(e, ERR_DATA, "llm.c model file %s: truncated: %lld bytes, shorter than "
			   "its %d-byte header", path, (long long)st.st_size,
			   (int)sizeof hd);
	ERR_TRY(check_header(path, hd, h, e));
	uint64_t floats = (uint64_t)h->padded_vocab * (uint64_t)h->width +
			  (uint64_t)h->max_t * (uint64_t)h->width +
			  block_floats((uint64_t)h->layers, (uint64_t)h->width);
	uint64_t want = sizeof hd + floats * (uint64_t)llmc_value_size(h->version);
	if ((uint64_t)st.st_size != want)
		return ERR(e, ERR_DATA, "llm.c model file %s: %s: %lld bytes, its header (maxT %d, "
			   "Vp %d, L %d, C %d) says %llu", path,
			   (uint64_t)st.st_size < want ? "truncated" : "longer than its header says",
			   (long long)st.st_size, h->max_t, h->padded_vocab, h->layers, h->width,
			   (unsigned long long)want);
	return ERR_OK;
}

/* ERR_CONFIG naming the file, its header field and the configuration key */
static int fit(const char *path, const char *field, int have, const char *rel, int want,
	       const char *key, struct err *e)
{
	int ok = rel[0] == '=' ? have == want : have >= want;
	if (!ok)
		return ERR(e, ERR_CONFIG, "model.init: llm.c model file %s: header field %s = %d, "
			   "but %s needs %s%d", path, field, have, key,
			   rel[0] == '=' ? "" : "at least ", want);
	return ERR_OK;
}

static int check_fits(const char *path, const struct gpt_llmc_header *h,
		      const struct model_shape *m, int reserved, struct err *e)
{
	ERR_TRY(fit(path, "L", h->layers, "=", GPT_L(m), "model.layers", e));
	ERR_TRY(fit(path, "NH", h->heads, "=", GPT_H(m), "model.heads", e));
	ERR_TRY(fit(path, "C", h->width, "=", GPT_C(m), "model.width", e));
	ERR_TRY(fit(path, "maxT", h->max_t, ">=", GPT_T(m), "model.context", e));
	return fit(path, "V", h->vocab, ">=", m->vocab - reserved,
		   reserved ? "model.vocab (the files' ids)" : "data.vocab", e);
}

/* reads n values into dst (bfloat16 ones converted to float32), then skips `skip` */
static int read_part(FILE *f, const char *path, float *dst, size_t n, size_t skip,
		     int version, struct err *e)
{
	size_t size = (size_t)llmc_value_size(version), got = 0;
	if (version == GPT_LLMC_VERSION) {
		got = fread(dst, sizeof(float), n, f);
	} else {
		uint16_t buf[256];
		for (size_t k; got < n; got += k) {
			size_t want = n - got < 256 ? n - got : 256;
			if ((k = fread(buf, 2, want, f)) != want)
				break;
			for (size_t j = 0; j < k; j++)
				dst[got + j] = from_bf16(buf[j]);
		}
	}
	if (got != n || (skip && fseeko(f, (off_t)(skip * size), SEEK_CUR)))
		return ERR(e, ERR_IO, "llm.c model file %s: read failed", path);
	return ERR_OK;
}

/* The weights read must be finite (the seeded rows they leave are): a NaN a window never
 * touches would still reach every checkpoint, one it touches the first loss. */
static int check_finite_weights(const char *path, const struct model_shape *m,
				const float *params, struct err *e)
{
	char what[300];
	if (model_nonfinite(m, params, what, sizeof what) == 0)
		return ERR_OK;
	return ERR(e, ERR_DATA, "llm.c model file %s: its weights hold %s", path, what);
}

int gpt_llmc_load(const char *path, const struct model_shape *m, int reserved, float *params,
		  const char **converted, struct err *e)
{
	struct gpt_llmc_header h;
	ERR_TRY(gpt_llmc_read_header(path, &h, e));
	ERR_TRY(check_fits(path, &h, m, reserved, e));
	size_t c = (size_t)GPT_C(m), users = (size_t)(m->vocab - reserved), t = (size_t)GPT_T(m);
	size_t wpe = m->p[GPT_WPE].offset, rest = m->p[GPT_LN1W].offset;
	struct stat st;
	FILE *f = NULL;
	ERR_TRY(open_model_file(path, &f, &st, e));
	int rc = fseeko(f, GPT_LLMC_HEADER * sizeof(int32_t), SEEK_SET)
			 ? ERR(e, ERR_IO, "llm.c model file %s: seek failed", path)
			 : ERR_OK;
	if (!rc)
		rc = read_part(f, path, params + m->p[GPT_WTE].offset + (size_t)reserved * c,
			       users * c, ((size_t)h.padded_vocab - users) * c, h.version, e);
	if (!rc)
		rc = read_part(f, path, params + wpe, t * c, ((size_t)h.max_t - t) * c, h.version,
			       e);
	if (!rc)
		rc = read_part(f, path, params + rest, m->n_params - rest, 0, h.version, e);
	fclose(f);
	*converted = h.version == GPT_LLMC_VERSION_BF16 ? "bfloat16" : NULL;
	return rc ? rc : check_finite_weights(path, m, params, e);
}
