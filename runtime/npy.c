/*
 * npy: writer and strict reader of NumPy .npy files (see npy.h for the layout).
 *
 * The header is produced and parsed here by hand: it is a tiny, fixed subset of a Python
 * literal (three keys, a quoted string, False/True and a tuple of integers).
 */
#include "npy.h"

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsx.h"

static const char npy_magic[6] = { '\x93', 'N', 'U', 'M', 'P', 'Y' };

#define PREAMBLE 10 /* magic(6) + version(2) + header length(2) for version 1.0 */

static int host_is_little_endian(void)
{
	uint16_t x = 1;
	unsigned char c;
	memcpy(&c, &x, 1);
	return c == 1;
}

static int check_host(const char *name, struct err *e)
{
	if (!host_is_little_endian())
		return ERR(e, ERR_DATA, "%s: .npy files are little-endian and big-endian hosts are not supported",
			   name);
	return 0;
}

size_t npy_dtype_size(enum npy_dtype dt)
{
	switch (dt) {
	case NPY_F32: return 4;
	case NPY_F64: return 8;
	case NPY_I32: return 4;
	case NPY_I64: return 8;
	case NPY_I8: return 1;
	case NPY_U8: return 1;
	case NPY_BOOL: return 1;
	case NPY_I16: return 2;
	case NPY_U16: return 2;
	case NPY_U32: return 4;
	case NPY_U64: return 8;
	}
	return 0;
}

const char *npy_dtype_descr(enum npy_dtype dt)
{
	switch (dt) {
	case NPY_F32: return "<f4";
	case NPY_F64: return "<f8";
	case NPY_I32: return "<i4";
	case NPY_I64: return "<i8";
	case NPY_I8: return "|i1";
	case NPY_U8: return "|u1";
	case NPY_BOOL: return "|b1";
	case NPY_I16: return "<i2";
	case NPY_U16: return "<u2";
	case NPY_U32: return "<u4";
	case NPY_U64: return "<u8";
	}
	return NULL;
}

int npy_count(const size_t *shape, int ndim, size_t *count, struct err *e)
{
	size_t n = 1;
	*count = 0;
	for (int i = 0; i < ndim; i++) {
		if (shape[i] != 0 && n > SIZE_MAX / shape[i])
			return ERR(e, ERR_DATA, "tensor shape overflows the address space");
		n *= shape[i];
	}
	*count = n;
	return 0;
}

int npy_header(enum npy_dtype dt, const size_t *shape, int ndim, const char *name, char *hdr,
	       size_t cap, size_t *hlen, size_t *nbytes, struct err *e)
{
	char dict[512];
	size_t count;
	int rc;
	const char *descr = npy_dtype_descr(dt);

	if ((rc = check_host(name, e)))
		return rc;
	if (!descr)
		return ERR(e, ERR_DATA, "%s: unknown dtype %d", name, (int)dt);
	if (ndim < 0 || ndim > NPY_MAX_DIMS)
		return ERR(e, ERR_DATA, "%s: %d dimensions (0..%d supported)", name, ndim, NPY_MAX_DIMS);
	if ((rc = npy_count(shape, ndim, &count, e)))
		return rc;
	if (count > SIZE_MAX / npy_dtype_size(dt))
		return ERR(e, ERR_DATA, "%s: tensor too large", name);
	*nbytes = count * npy_dtype_size(dt);

	size_t n = (size_t)snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
				    descr);
	for (int i = 0; i < ndim; i++)
		n += (size_t)snprintf(dict + n, sizeof dict - n, "%s%zu", i ? ", " : "", shape[i]);
	n += (size_t)snprintf(dict + n, sizeof dict - n, "%s), }", ndim == 1 ? "," : "");
	if (n >= sizeof dict)
		return ERR(e, ERR_DATA, "%s: header too long", name);

	size_t total = PREAMBLE + n + 1; /* + '\n' */
	total = (total + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
	if (total > cap || total - PREAMBLE > 65535)
		return ERR(e, ERR_DATA, "%s: header too long", name);
	size_t header_len = total - PREAMBLE;
	memcpy(hdr, npy_magic, 6);
	hdr[6] = 1;
	hdr[7] = 0;
	hdr[8] = (char)(header_len & 0xff);
	hdr[9] = (char)(header_len >> 8);
	memcpy(hdr + PREAMBLE, dict, n);
	memset(hdr + PREAMBLE + n, ' ', total - PREAMBLE - n - 1);
	hdr[total - 1] = '\n';
	*hlen = total;
	return 0;
}

int npy_write(const char *path, enum npy_dtype dt, const size_t *shape, int ndim,
	      const void *data, struct err *e)
{
	char hdr[1024];
	size_t hlen, nbytes;
	struct fsx_writer w;
	int rc;

	if ((rc = npy_header(dt, shape, ndim, path, hdr, sizeof hdr, &hlen, &nbytes, e)))
		return rc;
	if (nbytes && !data)
		return ERR(e, ERR_DATA, "%s: no data for %zu bytes", path, nbytes);
	ERR_TRY_GOTO(rc, fsx_writer_open(&w, path, e), fail);
	if ((rc = fsx_writer_write(&w, hdr, hlen, e)) || (rc = fsx_writer_write(&w, data, nbytes, e)))
		goto fail;
	return fsx_writer_commit(&w, e);
fail:
	fsx_writer_abort(&w);
	return rc;
}

/* --- reader --- */

struct cursor {
	const char *p, *end;
};

static void skip_ws(struct cursor *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
		c->p++;
}

static int eat(struct cursor *c, char ch)
{
	skip_ws(c);
	if (c->p < c->end && *c->p == ch) {
		c->p++;
		return 1;
	}
	return 0;
}

/* A quoted Python string without escapes into out (cap bytes). */
static int parse_str(struct cursor *c, char *out, size_t cap)
{
	skip_ws(c);
	if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
		return 0;
	char q = *c->p++;
	size_t n = 0;
	while (c->p < c->end && *c->p != q) {
		if (*c->p == '\\' || n + 1 >= cap)
			return 0;
		out[n++] = *c->p++;
	}
	if (c->p >= c->end)
		return 0;
	c->p++;
	out[n] = '\0';
	return 1;
}

static int parse_word(struct cursor *c, const char *w)
{
	size_t n = strlen(w);
	skip_ws(c);
	if ((size_t)(c->end - c->p) >= n && !memcmp(c->p, w, n)) {
		c->p += n;
		return 1;
	}
	return 0;
}

static int parse_size(struct cursor *c, size_t *v)
{
	size_t x = 0;
	const char *start;
	skip_ws(c);
	start = c->p;
	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		unsigned d = (unsigned)(*c->p - '0');
		if (x > (SIZE_MAX - d) / 10)
			return 0;
		x = x * 10 + d;
		c->p++;
	}
	*v = x;
	return c->p > start;
}

/* "(a, b, ...)" with an optional trailing comma ("(3,)" as numpy writes it; "(3)" is
 * tolerated); "()" is a scalar. */
static int parse_shape(struct cursor *c, size_t *shape, int *ndim)
{
	int n = 0;
	if (!eat(c, '('))
		return 0;
	if (eat(c, ')')) {
		*ndim = 0;
		return 1;
	}
	for (;;) {
		if (n == NPY_MAX_DIMS || !parse_size(c, &shape[n]))
			return 0;
		n++;
		if (eat(c, ')'))
			break;
		if (!eat(c, ','))
			return 0;
		if (eat(c, ')'))
			break;
	}
	*ndim = n;
	return 1;
}

/* The dtype named by descr ("<f4", "|u1", ...; "<" and "|" are equivalent for one-byte
 * types, as numpy writes "|"); non-zero if it is not one this reader knows. */
static int descr_parse(const char *descr, enum npy_dtype *dt)
{
	for (int k = NPY_F32; k <= NPY_U64; k++) {
		const char *d = npy_dtype_descr((enum npy_dtype)k);
		if (!strcmp(descr, d) ||
		    (d[0] == '|' && descr[0] == '<' && !strcmp(descr + 1, d + 1))) {
			*dt = (enum npy_dtype)k;
			return 0;
		}
	}
	return 1;
}

/* A Fortran-ordered array whose bytes are those of its C order: at most one dimension
 * longer than 1 (a vector, numpy writes fortran_order True for some of them). 0, or
 * ERR_DATA for any other: its bytes would be read transposed. */
static int fortran_same_bytes(const size_t *shape, int ndim, const char *name, struct err *e)
{
	int long_dims = 0;
	for (int i = 0; i < ndim; i++)
		long_dims += shape[i] > 1;
	if (long_dims > 1)
		return ERR(e, ERR_DATA, "%s: Fortran-ordered .npy arrays of more than one dimension "
			   "are not supported (write it with numpy.ascontiguousarray)", name);
	return 0;
}

static int parse_header(const char *h, size_t len, const char *name, enum npy_dtype *dt,
			size_t *shape, int *ndim, struct err *e)
{
	struct cursor c = { h, h + len };
	int have_descr = 0, have_order = 0, have_shape = 0, fortran = 0;
	char key[32], descr[32];

	if (!eat(&c, '{'))
		return ERR(e, ERR_DATA, "%s: malformed .npy header (no dict)", name);
	while (!eat(&c, '}')) {
		if (!parse_str(&c, key, sizeof key) || !eat(&c, ':'))
			return ERR(e, ERR_DATA, "%s: malformed .npy header (key expected)", name);
		if (!strcmp(key, "descr") && !have_descr) {
			have_descr = 1;
			if (!parse_str(&c, descr, sizeof descr))
				return ERR(e, ERR_DATA, "%s: malformed .npy header (descr)", name);
			if (descr_parse(descr, dt))
				return ERR(e, ERR_DATA, "%s: unsupported .npy dtype '%s' (<f4 <f8 and "
					   "little-endian integers or bool only)", name, descr);
		} else if (!strcmp(key, "fortran_order") && !have_order) {
			have_order = 1;
			fortran = parse_word(&c, "True");
			if (!fortran && !parse_word(&c, "False"))
				return ERR(e, ERR_DATA, "%s: malformed .npy header (fortran_order)", name);
		} else if (!strcmp(key, "shape") && !have_shape) {
			have_shape = 1;
			if (!parse_shape(&c, shape, ndim))
				return ERR(e, ERR_DATA, "%s: malformed or unsupported .npy shape (at most %d dims)",
					   name, NPY_MAX_DIMS);
		} else {
			return ERR(e, ERR_DATA, "%s: unexpected or repeated key '%s' in .npy header", name, key);
		}
		if (eat(&c, '}'))
			break;
		if (!eat(&c, ','))
			return ERR(e, ERR_DATA, "%s: malformed .npy header (',' expected)", name);
	}
	skip_ws(&c);
	if (c.p != c.end)
		return ERR(e, ERR_DATA, "%s: malformed .npy header (text after the dict)", name);
	if (!have_descr || !have_order || !have_shape)
		return ERR(e, ERR_DATA, "%s: .npy header lacks %s", name,
			   !have_descr ? "'descr'" : !have_order ? "'fortran_order'" : "'shape'");
	return fortran ? fortran_same_bytes(shape, *ndim, name, e) : 0;
}

size_t npy_head_size(const void *buf, size_t have)
{
	const unsigned char *b = buf;
	if (have < PREAMBLE || memcmp(b, npy_magic, 6) != 0 || b[7] != 0)
		return 0;
	if (b[6] == 1)
		return PREAMBLE + ((size_t)b[8] | (size_t)b[9] << 8);
	if ((b[6] == 2 || b[6] == 3) && have >= 12)
		return 12 + ((size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 |
			     (size_t)b[11] << 24);
	return 0;
}

int npy_parse(const void *buf, size_t len, const char *name, enum npy_dtype *dt,
	      size_t shape[NPY_MAX_DIMS], int *ndim, size_t *data_offset, struct err *e)
{
	return npy_parse_head(buf, len, len, name, dt, shape, ndim, data_offset, e);
}

int npy_parse_head(const void *buf, size_t have, size_t len, const char *name,
		   enum npy_dtype *dt, size_t shape[NPY_MAX_DIMS], int *ndim,
		   size_t *data_offset, struct err *e)
{
	const unsigned char *b = buf;
	size_t hstart, hlen, count, nbytes;
	int rc;

	*ndim = 0;
	*data_offset = 0;
	if ((rc = check_host(name, e)))
		return rc;
	assert(have <= len);
	if (len < PREAMBLE || have < PREAMBLE || memcmp(b, npy_magic, 6) != 0)
		return ERR(e, ERR_DATA, "%s: not a .npy file (bad magic)", name);
	if (b[6] == 1 && b[7] == 0) {
		hstart = PREAMBLE;
		hlen = (size_t)b[8] | (size_t)b[9] << 8;
	} else if ((b[6] == 2 || b[6] == 3) && b[7] == 0) {
		if (len < 12 || have < 12)
			return ERR(e, ERR_DATA, "%s: truncated .npy file (%zu bytes)", name, len);
		hstart = 12;
		hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
	} else {
		return ERR(e, ERR_DATA, "%s: unsupported .npy version %u.%u", name, b[6], b[7]);
	}
	if (hlen > len - hstart)
		return ERR(e, ERR_DATA, "%s: truncated .npy file (header of %zu bytes, file of %zu)", name,
			   hlen, len);
	/* the caller reads npy_head_size bytes (or the whole file) first */
	assert(hlen <= have - hstart);
	if (hlen == 0 || b[hstart + hlen - 1] != '\n')
		return ERR(e, ERR_DATA, "%s: malformed .npy header (no final newline)", name);
	if ((rc = parse_header((const char *)b + hstart, hlen, name, dt, shape, ndim, e)))
		return rc;
	if ((rc = npy_count(shape, *ndim, &count, e)))
		return rc;
	if (count > SIZE_MAX / npy_dtype_size(*dt))
		return ERR(e, ERR_DATA, "%s: .npy shape too large", name);
	nbytes = count * npy_dtype_size(*dt);
	size_t data = len - hstart - hlen;
	if (data < nbytes)
		return ERR(e, ERR_DATA, "%s: truncated .npy file (%zu data bytes, %zu expected)", name,
			   data, nbytes);
	if (data > nbytes)
		return ERR(e, ERR_DATA, "%s: %zu unexpected bytes after the .npy data", name, data - nbytes);
	*data_offset = hstart + hlen;
	return 0;
}

int npy_read_from_memory(const void *buf, size_t len, const char *name, enum npy_dtype *dt,
			 size_t shape[NPY_MAX_DIMS], int *ndim, void **data, struct err *e)
{
	size_t off, count;
	int rc;

	*data = NULL;
	if ((rc = npy_parse(buf, len, name, dt, shape, ndim, &off, e)) ||
	    (rc = npy_count(shape, *ndim, &count, e)))
		return rc;
	size_t nbytes = count * npy_dtype_size(*dt);
	void *v = malloc(nbytes ? nbytes : 1);
	if (!v)
		return ERR(e, ERR_NOMEM, "%s: out of memory (%zu bytes)", name, nbytes);
	if (nbytes)
		memcpy(v, (const char *)buf + off, nbytes);
	*data = v;
	return 0;
}

int npy_read(const char *path, enum npy_dtype *dt, size_t shape[NPY_MAX_DIMS], int *ndim,
	     void **data, struct err *e)
{
	char *buf;
	size_t len;
	int rc;

	*data = NULL;
	*ndim = 0;
	if ((rc = fsx_read_all(path, &buf, &len, e)))
		return rc;
	rc = npy_read_from_memory(buf, len, path, dt, shape, ndim, data, e);
	free(buf);
	return rc;
}
