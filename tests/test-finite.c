/*
 * test-finite: the scan for NaN and infinity over a vector of several chunks, where threads
 * (one per part of whole chunks, as many as the processors allow) share it: the count and
 * the first index are a plain serial scan's, wherever the values sit: at the edges of the
 * chunks, in the last, partial chunk only, in several parts at once, or nowhere.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "check-run.h"
#include "finite.h"

/* Three whole chunks and a partial fourth: four chunks, so up to four parts. */
#define N (3 * FINITE_CHUNK + 17)

/* The serial scan, written out independently of finite.c. */
static void serial_scan(const float *x, size_t n, struct finite_report *out)
{
	out->bad = 0;
	out->first = 0;
	for (size_t i = 0; i < n; i++)
		if (isnan(x[i]) || isinf(x[i])) {
			if (out->bad++ == 0)
				out->first = i;
		}
}

/* x all finite (a value per index, so that no two vectors of the cases alias), then
 * bad[0..k) set to NaN, +inf and -inf in turn; the scan must match the serial one and
 * find k values. */
static void check_case(float *x, const size_t *bad, size_t k)
{
	struct finite_report got, want;
	for (size_t i = 0; i < N; i++)
		x[i] = (float)(i % 1000) - 500.0f;
	for (size_t j = 0; j < k; j++)
		x[bad[j]] = j % 3 == 0 ? NAN : j % 3 == 1 ? INFINITY : -INFINITY;
	finite_scan(x, N, &got);
	serial_scan(x, N, &want);
	ck_assert_uint_eq(want.bad, k);
	ck_assert_uint_eq(got.bad, want.bad);
	if (k)
		ck_assert_uint_eq(got.first, want.first);
}

START_TEST(test_threaded_scan_matches_serial)
{
	const size_t C = FINITE_CHUNK;
	const size_t none[1] = {0};
	const size_t edges[] = {0, C - 1, C, 2 * C - 1, 2 * C, 3 * C - 1, 3 * C, N - 1};
	const size_t last_only[] = {3 * C, 3 * C + 5, N - 1};
	const size_t last_element[] = {N - 1};
	const size_t several[] = {C + 7, 3 * C + 16, 2 * C + 3};
	const size_t late_first[] = {2 * C + 1, 2 * C + 2};
	float *x = malloc(N * sizeof *x);
	ck_assert_ptr_nonnull(x);
	check_case(x, none, 0);
	check_case(x, edges, sizeof edges / sizeof edges[0]);
	check_case(x, last_only, sizeof last_only / sizeof last_only[0]);
	check_case(x, last_element, 1);
	check_case(x, several, sizeof several / sizeof several[0]);
	check_case(x, late_first, sizeof late_first / sizeof late_first[0]);
	free(x);
}
END_TEST

/* A vector below one chunk (every model of the tests) is the caller's alone: the same. */
START_TEST(test_small_scan_matches_serial)
{
	float x[200];
	struct finite_report got, want;
	for (size_t i = 0; i < 200; i++)
		x[i] = (float)i;
	finite_scan(x, 200, &got);
	ck_assert_uint_eq(got.bad, 0);
	x[64] = NAN;
	x[199] = INFINITY;
	finite_scan(x, 200, &got);
	serial_scan(x, 200, &want);
	ck_assert_uint_eq(got.bad, 2);
	ck_assert_uint_eq(got.bad, want.bad);
	ck_assert_uint_eq(got.first, 64);
	finite_scan(x, 0, &got);
	ck_assert_uint_eq(got.bad, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("finite");
	TCase *tc = tcase_create("finite");
	tcase_set_timeout(tc, 60); /* about a tenth of a second unloaded */
	tcase_add_test(tc, test_threaded_scan_matches_serial);
	tcase_add_test(tc, test_small_scan_matches_serial);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
