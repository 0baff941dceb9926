/*
 * test-blas: the advice on OpenBLAS's kernel (blas_core.h): a kernel narrower than the
 * CPU gets the OPENBLAS_CORETYPE advice naming the kernel for that CPU; a fitting or an
 * unknown one gets none.
 */
#include <check.h>
#include <string.h>

#include "blas_core.h"
#include "check-run.h"

/* the advice for (cpu, core), asserting the return value and the text agree */
static int advice(enum blas_isa cpu, const char *core, char *out, size_t cap)
{
	int r = blas_core_advice(cpu, core, out, cap);
	ck_assert_int_eq(r, out[0] != '\0');
	return r;
}

START_TEST(prescott_on_avx512_is_advised_skylakex)
{
	char out[512];
	ck_assert_int_eq(advice(BLAS_ISA_AVX512, "Prescott", out, sizeof out), 1);
	ck_assert_ptr_nonnull(strstr(out, "OPENBLAS_CORETYPE=SkylakeX"));
	ck_assert_ptr_nonnull(strstr(out, "Prescott"));
}
END_TEST

START_TEST(narrower_kernels_are_advised_the_cpu_kernel)
{
	char out[512];
	ck_assert_int_eq(advice(BLAS_ISA_AVX2, "Sandybridge", out, sizeof out), 1);
	ck_assert_ptr_nonnull(strstr(out, "OPENBLAS_CORETYPE=Haswell"));
	ck_assert_int_eq(advice(BLAS_ISA_AVX512, "Haswell", out, sizeof out), 1);
	ck_assert_ptr_nonnull(strstr(out, "OPENBLAS_CORETYPE=SkylakeX"));
	ck_assert_int_eq(advice(BLAS_ISA_AVX, "NEHALEM", out, sizeof out), 1);
	ck_assert_ptr_nonnull(strstr(out, "OPENBLAS_CORETYPE=Sandybridge"));
}
END_TEST

START_TEST(fitting_kernels_get_no_advice)
{
	char out[512];
	ck_assert_int_eq(advice(BLAS_ISA_AVX512, "SkylakeX", out, sizeof out), 0);
	ck_assert_int_eq(advice(BLAS_ISA_AVX512, "cooperlake", out, sizeof out), 0);
	ck_assert_int_eq(advice(BLAS_ISA_AVX2, "Zen", out, sizeof out), 0);
	ck_assert_int_eq(advice(BLAS_ISA_AVX2, "Haswell", out, sizeof out), 0);
	ck_assert_int_eq(advice(BLAS_ISA_SSE, "Prescott", out, sizeof out), 0);
	/* a kernel wider than the CPU is OpenBLAS's business, not a slow choice */
	ck_assert_int_eq(advice(BLAS_ISA_AVX2, "SkylakeX", out, sizeof out), 0);
}
END_TEST

START_TEST(unknown_sides_get_no_advice)
{
	char out[512];
	ck_assert_int_eq(advice(BLAS_ISA_AVX512, "NeoverseN1", out, sizeof out), 0);
	ck_assert_int_eq(advice(BLAS_ISA_AVX512, NULL, out, sizeof out), 0);
	ck_assert_int_eq(advice(BLAS_ISA_UNKNOWN, "Prescott", out, sizeof out), 0);
	ck_assert_int_eq(blas_core_isa("Prescott"), BLAS_ISA_SSE);
	ck_assert_int_eq(blas_core_isa("skylakex"), BLAS_ISA_AVX512);
	ck_assert_int_eq(blas_core_isa("Skylake"), BLAS_ISA_UNKNOWN);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("blas");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, prescott_on_avx512_is_advised_skylakex);
	tcase_add_test(tc, narrower_kernels_are_advised_the_cpu_kernel);
	tcase_add_test(tc, fitting_kernels_get_no_advice);
	tcase_add_test(tc, unknown_sides_get_no_advice);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
