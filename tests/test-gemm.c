/*
 * test-gemm: the host backend's one GEMM entry (runtime/gemm.h).
 *
 * Each implementation built in (OpenBLAS always, oneDNN where libdnnl was found) computes
 * C = alpha op(A) op(B) + beta C in every transposition within float rounding of a double
 * sum, and passes the determinism check the choice rests on. auto takes oneDNN exactly
 * when it is built in and passes; a process keeps the first implementation it chose and
 * refuses another one, naming both; asking for oneDNN in a build without it is refused.
 * Every test prints the implementation it ran under.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check-run.h"
#include "gemm.h"
#include "gemmutil.h"

/* element (i, j) of op(X) for row-major X with leading dimension ld */
static double op_at(const float *x, int ld, int trans, int i, int j)
{
	return trans ? x[(size_t)j * ld + i] : x[(size_t)i * ld + j];
}

START_TEST(each_implementation_computes_the_product)
{
	if (!gemmutil_under(_i, "test-gemm", 0))
		return;
	const int m = 67, n = 45, k = 131;
	const float alpha = 0.75f, beta = -0.5f;
	for (int t = 0; t < 4; t++) {
		int ta = t & 1, tb = t >> 1, lda = ta ? m : k, ldb = tb ? k : n;
		float *a = gemmutil_floats((size_t)m * k, 1), *b = gemmutil_floats((size_t)n * k, 2);
		float *c = gemmutil_floats((size_t)m * n, 3), *c0 = malloc(sizeof *c0 * (size_t)m * n);
		memcpy(c0, c, sizeof *c * (size_t)m * n);
		gemm_sgemm_by(_i, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, n);
		for (int i = 0; i < m; i++)
			for (int j = 0; j < n; j++) {
				double want = beta * (double)c0[(size_t)i * n + j];
				for (int q = 0; q < k; q++)
					want += alpha * op_at(a, lda, ta, i, q) * op_at(b, ldb, tb, q, j);
				ck_assert_msg(fabs(c[(size_t)i * n + j] - want) < 1e-4,
					      "%s trans %d%d (%d, %d): %g, want %g", gemm_impl_name(_i),
					      ta, tb, i, j, c[(size_t)i * n + j], want);
			}
		free(a);
		free(b);
		free(c);
		free(c0);
	}
}
END_TEST

START_TEST(each_implementation_is_deterministic_here)
{
	if (gemmutil_under(_i, "test-gemm", 0))
		ck_assert_msg(gemm_deterministic(_i), "%s: row blocks or a second call gave other "
			      "bits", gemm_impl_name(_i));
}
END_TEST

START_TEST(auto_takes_onednn_where_built_and_deterministic)
{
	struct err e;
	char why[160];
	err_clear(&e);
	ck_assert_int_eq(gemm_select(GEMM_AUTO, why, sizeof why, &e), ERR_OK);
	int want = gemm_have_onednn() && gemm_deterministic(GEMM_ONEDNN) ? GEMM_ONEDNN
									: GEMM_OPENBLAS;
	printf("test-gemm: auto chose %s (%s)\n", gemm_impl_name(gemm_chosen()), why);
	ck_assert_int_eq(gemm_chosen(), want);
	ck_assert_ptr_nonnull(strstr(why, gemm_have_onednn() ? "oneDNN is built in" : "not built"));
}
END_TEST

START_TEST(a_process_keeps_its_first_choice)
{
	struct err e;
	err_clear(&e);
	ck_assert_int_eq(gemm_select(GEMM_OPENBLAS, NULL, 0, &e), ERR_OK);
	ck_assert_int_eq(gemm_select(GEMM_OPENBLAS, NULL, 0, &e), ERR_OK);
	ck_assert_int_eq(gemm_chosen(), GEMM_OPENBLAS);
	if (!gemm_have_onednn())
		return;
	ck_assert_int_eq(gemm_select(GEMM_ONEDNN, NULL, 0, &e), ERR_CONFIG);
	ck_assert_msg(strstr(e.msg, "already runs its GEMMs with openblas") &&
		      strstr(e.msg, "cannot switch to onednn"), "%s", e.msg);
	ck_assert_int_eq(gemm_chosen(), GEMM_OPENBLAS);
}
END_TEST

START_TEST(onednn_without_it_is_refused)
{
	struct err e;
	err_clear(&e);
	int rc = gemm_select(GEMM_ONEDNN, NULL, 0, &e);
	if (gemm_have_onednn()) {
		ck_assert_int_eq(rc, ERR_OK);
		ck_assert_int_eq(gemm_chosen(), GEMM_ONEDNN);
		return;
	}
	ck_assert_int_eq(rc, ERR_CONFIG);
	ck_assert_ptr_nonnull(strstr(e.msg, "devices.gemm = onednn: this build has no oneDNN"));
}
END_TEST

START_TEST(names_follow_the_choices)
{
	ck_assert_str_eq(GEMM_CHOICES, "auto|onednn|openblas");
	ck_assert_str_eq(gemm_impl_name(GEMM_AUTO), "auto");
	ck_assert_str_eq(gemm_impl_name(GEMM_ONEDNN), "onednn");
	ck_assert_str_eq(gemm_impl_name(GEMM_OPENBLAS), "openblas");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gemm");
	TCase *tc = tcase_create("gemm");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, each_implementation_computes_the_product, GEMM_ONEDNN,
			    GEMM_OPENBLAS + 1);
	tcase_add_loop_test(tc, each_implementation_is_deterministic_here, GEMM_ONEDNN,
			    GEMM_OPENBLAS + 1);
	tcase_add_test(tc, auto_takes_onednn_where_built_and_deterministic);
	tcase_add_test(tc, a_process_keeps_its_first_choice);
	tcase_add_test(tc, onednn_without_it_is_refused);
	tcase_add_test(tc, names_follow_the_choices);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
