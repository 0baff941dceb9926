/*
 * test-npy: .npy files round-trip, have the byte layout NumPy documents (checked against
 * hand-written headers, and against numpy itself when python3 has it), and malformed
 * files are refused with ERR_DATA naming the file.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check-run.h"
#include "tmpdir.h"
#include "err.h"
#include "fsx.h"
#include "npy.h"

static void slurp(const char *path, char **buf, size_t *len)
{
	struct err e;
	err_clear(&e);
	ck_assert_msg(fsx_read_all(path, buf, len, &e) == 0, "%s", e.msg);
}

static void spit(const char *path, const void *buf, size_t len)
{
	FILE *f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
	fclose(f);
}

/* Checks the preamble against a header dict written out by hand. */
static void check_layout(const char *path, const char *dict, size_t nbytes)
{
	char *b;
	size_t len;
	slurp(path, &b, &len);
	ck_assert_uint_ge(len, 10);
	ck_assert_int_eq(memcmp(b, "\x93NUMPY\x01\x00", 8), 0);
	size_t hlen = (size_t)(unsigned char)b[8] | (size_t)(unsigned char)b[9] << 8;
	ck_assert_uint_eq((10 + hlen) % 64, 0);
	ck_assert_uint_eq(len, 10 + hlen + nbytes);
	ck_assert_int_eq(b[10 + hlen - 1], '\n');
	size_t dl = strlen(dict);
	ck_assert_msg(memcmp(b + 10, dict, dl) == 0, "header is '%.*s', expected '%s'", (int)dl,
		      b + 10, dict);
	for (size_t i = 10 + dl; i < 10 + hlen - 1; i++)
		ck_assert_int_eq(b[i], ' ');
	free(b);
}

/* A python interpreter that has numpy: the one on PATH, else the system's. */
static const char *python_with_numpy(void)
{
	static const char *const cands[] = { "python3", "/usr/bin/python3" };
	char cmd[256];
	for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
		snprintf(cmd, sizeof cmd, "%s -c 'import numpy' >/dev/null 2>&1", cands[i]);
		if (system(cmd) == 0)
			return cands[i];
	}
	return NULL;
}

START_TEST(test_roundtrip_and_layout)
{
	struct err e;
	char p[1024];
	char *t = tmpdir_make("test-npy");
	enum npy_dtype dt;
	size_t shape[NPY_MAX_DIMS];
	int ndim;
	void *data;
	err_clear(&e);

	/* float32 2x3 */
	float f[6];
	for (int i = 0; i < 6; i++)
		f[i] = (float)i * 0.5f - 1.0f;
	size_t s23[] = { 2, 3 };
	snprintf(p, sizeof p, "%s/f32.npy", t);
	ck_assert_msg(npy_write(p, NPY_F32, s23, 2, f, &e) == 0, "%s", e.msg);
	check_layout(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", sizeof f);
	ck_assert_msg(npy_read(p, &dt, shape, &ndim, &data, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(dt, NPY_F32);
	ck_assert_int_eq(ndim, 2);
	ck_assert_uint_eq(shape[0], 2);
	ck_assert_uint_eq(shape[1], 3);
	ck_assert_int_eq(memcmp(data, f, sizeof f), 0);
	free(data);

	/* float64 scalar, shape () */
	double d = -3.25;
	snprintf(p, sizeof p, "%s/scalar.npy", t);
	ck_assert_int_eq(npy_write(p, NPY_F64, NULL, 0, &d, &e), 0);
	check_layout(p, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }", 8);
	ck_assert_int_eq(npy_read(p, &dt, shape, &ndim, &data, &e), 0);
	ck_assert_int_eq(dt, NPY_F64);
	ck_assert_int_eq(ndim, 0);
	ck_assert(*(double *)data == -3.25);
	free(data);

	/* int32 1-d: "(5,)" */
	int32_t iv[5] = { -2147483647 - 1, -1, 0, 1, 2147483647 };
	size_t s5[] = { 5 };
	snprintf(p, sizeof p, "%s/i32.npy", t);
	ck_assert_int_eq(npy_write(p, NPY_I32, s5, 1, iv, &e), 0);
	check_layout(p, "{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }", sizeof iv);
	ck_assert_int_eq(npy_read(p, &dt, shape, &ndim, &data, &e), 0);
	ck_assert_int_eq(dt, NPY_I32);
	ck_assert_int_eq(ndim, 1);
	ck_assert_uint_eq(shape[0], 5);
	ck_assert_int_eq(memcmp(data, iv, sizeof iv), 0);
	/* little-endian on disk, independently of how the host stores it */
	char *raw;
	size_t rawlen;
	slurp(p, &raw, &rawlen);
	size_t off = 10 + ((size_t)(unsigned char)raw[8] | (size_t)(unsigned char)raw[9] << 8);
	ck_assert_uint_eq(off, 128); /* a 58-character dict needs two 64-byte blocks */
	const unsigned char *u = (const unsigned char *)raw + off;
	ck_assert_int_eq(u[4 * 3 + 0], 1); /* value 1 */
	ck_assert_int_eq(u[4 * 3 + 3], 0);
	ck_assert_int_eq(u[4 * 4 + 0], 0xff); /* 0x7fffffff */
	ck_assert_int_eq(u[4 * 4 + 3], 0x7f);
	free(raw);
	free(data);

	/* int64 3-d, and an empty tensor */
	int64_t lv[2 * 2 * 3];
	for (int i = 0; i < 12; i++)
		lv[i] = (int64_t)i * 1000000000000LL - 5;
	size_t s223[] = { 2, 2, 3 };
	snprintf(p, sizeof p, "%s/i64.npy", t);
	ck_assert_int_eq(npy_write(p, NPY_I64, s223, 3, lv, &e), 0);
	check_layout(p, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2, 3), }", sizeof lv);
	ck_assert_int_eq(npy_read(p, &dt, shape, &ndim, &data, &e), 0);
	ck_assert_int_eq(dt, NPY_I64);
	ck_assert_int_eq(ndim, 3);
	ck_assert_uint_eq(shape[2], 3);
	ck_assert_int_eq(memcmp(data, lv, sizeof lv), 0);
	free(data);

	size_t s04[] = { 0, 4 };
	snprintf(p, sizeof p, "%s/empty.npy", t);
	ck_assert_int_eq(npy_write(p, NPY_F32, s04, 2, NULL, &e), 0);
	check_layout(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4), }", 0);
	ck_assert_int_eq(npy_read(p, &dt, shape, &ndim, &data, &e), 0);
	ck_assert_int_eq(ndim, 2);
	ck_assert_uint_eq(shape[0], 0);
	ck_assert_ptr_nonnull(data);
	free(data);

	/* a header that needs more than one 64-byte block */
	size_t big[NPY_MAX_DIMS] = { 1, 1, 1, 1, 1, 1, 1, 1 };
	big[7] = 123456789;
	snprintf(p, sizeof p, "%s/dims.npy", t);
	char hdr[1024];
	size_t hlen, nbytes;
	ck_assert_int_eq(npy_write(p, NPY_F32, big, NPY_MAX_DIMS, NULL, &e), ERR_DATA);
	err_clear(&e);
	big[7] = 2;
	float two[2] = { 1.5f, 2.5f };
	ck_assert_int_eq(npy_header(NPY_F32, big, NPY_MAX_DIMS, "dims", hdr, sizeof hdr, &hlen, &nbytes, &e), 0);
	ck_assert_uint_eq(hlen % 64, 0);
	ck_assert_uint_gt(hlen, 64);
	ck_assert_uint_eq(nbytes, sizeof two);
	char q[1024];
	snprintf(q, sizeof q, "%s/dims-written.npy", t);
	ck_assert_int_eq(npy_write(q, NPY_F32, big, NPY_MAX_DIMS, two, &e), 0);
	char *mem;
	size_t memlen;
	ck_assert_int_eq(fsx_read_all(q, &mem, &memlen, &e), 0);
	ck_assert_uint_eq(memlen, hlen + nbytes);
	ck_assert_int_eq(memcmp(mem, hdr, hlen), 0);
	ck_assert_int_eq(npy_read_from_memory(mem, memlen, "mem", &dt, shape, &ndim, &data, &e), 0);
	ck_assert_int_eq(ndim, 8);
	ck_assert_uint_eq(shape[7], 2);
	ck_assert(((float *)data)[1] == 2.5f);
	free(data);
	free(mem);

	/* too many dimensions */
	ck_assert_int_eq(npy_write(p, NPY_F32, big, NPY_MAX_DIMS + 1, two, &e), ERR_DATA);
	ck_assert(!fsx_exists(p));
	err_clear(&e);

	/* unwritable destination: ERR_IO naming it */
	snprintf(p, sizeof p, "%s/no/such/dir/x.npy", t);
	ck_assert_int_eq(npy_write(p, NPY_F32, s23, 2, f, &e), ERR_IO);
	ck_assert_ptr_nonnull(strstr(e.msg, "no/such/dir"));
	tmpdir_drop(t);
}
END_TEST

START_TEST(test_numpy_loads_it)
{
	struct err e;
	char p[1024], q[1024], cmd[4096];
	char *t = tmpdir_make("test-npy");
	err_clear(&e);

	const char *py = python_with_numpy();
	if (!py) {
		fprintf(stderr, "test-npy: python3 with numpy not available, numpy check skipped\n");
		tmpdir_drop(t);
		return;
	}
	float f[6];
	for (int i = 0; i < 6; i++)
		f[i] = (float)i * 0.5f - 1.0f;
	size_t s23[] = { 2, 3 };
	snprintf(p, sizeof p, "%s/f.npy", t);
	ck_assert_int_eq(npy_write(p, NPY_F32, s23, 2, f, &e), 0);
	int64_t s = -7;
	snprintf(q, sizeof q, "%s/s.npy", t);
	ck_assert_int_eq(npy_write(q, NPY_I64, NULL, 0, &s, &e), 0);
	snprintf(cmd, sizeof cmd,
		 "%s -c \"import sys, numpy as np\n"
		 "a = np.load(sys.argv[1]); b = np.load(sys.argv[2])\n"
		 "assert a.dtype == np.float32 and a.shape == (2, 3), (a.dtype, a.shape)\n"
		 "assert a.tolist() == [[i * 0.5 - 1 for i in range(r * 3, r * 3 + 3)] for r in range(2)], a\n"
		 "assert b.dtype == np.int64 and b.shape == () and int(b) == -7, b\n"
		 "np.save(sys.argv[3], np.arange(6, dtype='<f8').reshape(3, 2) / 4)\n"
		 "\" '%s' '%s' '%s/fromnumpy.npy'", py, p, q, t);
	ck_assert_int_eq(system(cmd), 0);

	/* and we read what numpy writes */
	enum npy_dtype dt;
	size_t shape[NPY_MAX_DIMS];
	int ndim;
	void *data;
	snprintf(p, sizeof p, "%s/fromnumpy.npy", t);
	ck_assert_msg(npy_read(p, &dt, shape, &ndim, &data, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(dt, NPY_F64);
	ck_assert_int_eq(ndim, 2);
	ck_assert_uint_eq(shape[0], 3);
	ck_assert_uint_eq(shape[1], 2);
	for (int i = 0; i < 6; i++)
		ck_assert(((double *)data)[i] == i / 4.0);
	free(data);
	tmpdir_drop(t);
}
END_TEST

/* npy_parse_head of image b (len bytes) given its head only, as a file read in pieces is
 * parsed: the first 12 bytes, or as many as npy_head_size says. */
static int parse_from_head(const char *b, size_t len, const char *name, size_t *shape,
			   size_t *offset, struct err *e)
{
	enum npy_dtype dt;
	int ndim;
	size_t pre = len < 12 ? len : 12, head = npy_head_size(b, pre);
	size_t have = head > pre && head <= len ? head : pre;
	return npy_parse_head(b, have, len, name, &dt, shape, &ndim, offset, e);
}

/* Writes a valid file, lets `mutate` damage the image, and expects ERR_DATA naming it,
 * from the whole image and from its head. */
static void expect_refused(const char *dir, const char *tag, const char *needle,
			   void (*mutate)(char *b, size_t *len))
{
	struct err e;
	char p[1024];
	char *b;
	size_t len;
	float f[4] = { 1, 2, 3, 4 };
	size_t s4[] = { 4 };
	enum npy_dtype dt;
	size_t shape[NPY_MAX_DIMS];
	int ndim;
	void *data;

	err_clear(&e);
	snprintf(p, sizeof p, "%s/%s.npy", dir, tag);
	ck_assert_int_eq(npy_write(p, NPY_F32, s4, 1, f, &e), 0);
	slurp(p, &b, &len);
	size_t offset;
	ck_assert_int_eq(parse_from_head(b, len, tag, shape, &offset, &e), ERR_OK);
	ck_assert_uint_eq(shape[0], 4);
	ck_assert_uint_eq(offset, len - sizeof f);
	b = realloc(b, len + 64);
	mutate(b, &len);
	spit(p, b, len);
	ck_assert_int_eq(parse_from_head(b, len, tag, shape, &offset, &e), ERR_DATA);
	ck_assert_msg(strstr(e.msg, needle) != NULL, "%s from its head: expected '%s' in: %s", tag,
		      needle, e.msg);
	err_clear(&e);
	free(b);
	ck_assert_int_eq(npy_read(p, &dt, shape, &ndim, &data, &e), ERR_DATA);
	ck_assert_ptr_null(data);
	ck_assert_msg(strstr(e.msg, p) != NULL, "%s: message does not name the file: %s", tag, e.msg);
	ck_assert_msg(strstr(e.msg, needle) != NULL, "%s: expected '%s' in: %s", tag, needle, e.msg);
}

static void bad_magic(char *b, size_t *len) { b[1] = 'n'; }
static void cut_data(char *b, size_t *len) { *len -= 1; }
static void cut_header(char *b, size_t *len) { *len = 30; }
static void extra_byte(char *b, size_t *len) { b[(*len)++] = 0; }
static void tiny(char *b, size_t *len) { *len = 5; }
static void fortran(char *b, size_t *len) { memcpy(strstr(b + 10, "False"), "True ", 5); }
static void fortran_2d(char *b, size_t *len)
{
	fortran(b, len);
	memcpy(strstr(b + 10, "(4,)"), "(2,2)", 5); /* the header's padding holds one more */
}
static void big_endian(char *b, size_t *len) { strstr(b + 10, "<f4")[0] = '>'; }
static void other_dtype(char *b, size_t *len) { strstr(b + 10, "<f4")[1] = 'c'; }
static void bad_shape(char *b, size_t *len) { strstr(b + 10, "(4,)")[1] = 'x'; }
static void no_newline(char *b, size_t *len) { b[63] = ' '; }
static void version9(char *b, size_t *len) { b[6] = 9; }
static void grown_shape(char *b, size_t *len) { strstr(b + 10, "(4,)")[1] = '5'; }

START_TEST(test_strict_reader)
{
	char *t = tmpdir_make("test-npy");
	expect_refused(t, "magic", "magic", bad_magic);
	expect_refused(t, "tiny", "magic", tiny);
	expect_refused(t, "cutdata", "truncated", cut_data);
	expect_refused(t, "cuthdr", "truncated", cut_header);
	expect_refused(t, "extra", "unexpected bytes", extra_byte);
	expect_refused(t, "fortran", "Fortran-ordered .npy arrays of more than one dimension",
		       fortran_2d);
	expect_refused(t, "bigendian", "dtype", big_endian);
	expect_refused(t, "complex", "dtype", other_dtype);
	expect_refused(t, "shape", "shape", bad_shape);
	expect_refused(t, "newline", "newline", no_newline);
	expect_refused(t, "version", "version", version9);
	expect_refused(t, "grown", "truncated", grown_shape);

	struct err e;
	enum npy_dtype dt;
	size_t shape[NPY_MAX_DIMS];
	int ndim;
	void *data;
	char p[1024];
	err_clear(&e);
	snprintf(p, sizeof p, "%s/absent.npy", t);
	ck_assert_int_eq(npy_read(p, &dt, shape, &ndim, &data, &e), ERR_IO);
	ck_assert_ptr_nonnull(strstr(e.msg, p));
	tmpdir_drop(t);
}
END_TEST

/* A vector with fortran_order True has the bytes of its C order (numpy writes some so):
 * read as one, as class weights are. */
START_TEST(test_fortran_vector_read)
{
	char *t = tmpdir_make("test-npy");
	struct err e;
	char p[1024], *b;
	size_t len, s4[] = { 4 }, shape[NPY_MAX_DIMS];
	float f[4] = { 0.5f, 1, 1.5f, 2 };
	enum npy_dtype dt;
	int ndim;
	void *data;
	err_clear(&e);
	snprintf(p, sizeof p, "%s/vector.npy", t);
	ck_assert_int_eq(npy_write(p, NPY_F32, s4, 1, f, &e), 0);
	slurp(p, &b, &len);
	fortran(b, &len);
	spit(p, b, len);
	free(b);
	ck_assert_msg(npy_read(p, &dt, shape, &ndim, &data, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(ndim, 1);
	ck_assert_uint_eq(shape[0], 4);
	ck_assert_int_eq(memcmp(data, f, sizeof f), 0);
	free(data);
	tmpdir_drop(t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("npy");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_roundtrip_and_layout);
	tcase_add_test(tc, test_numpy_loads_it);
	tcase_add_test(tc, test_strict_reader);
	tcase_add_test(tc, test_fortran_vector_read);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
