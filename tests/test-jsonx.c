/*
 * test-jsonx: reals are written in their shortest form that reads back the same double,
 * still as reals, in jansson's layout; integers and strings are left as jansson wrote them.
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check-run.h"
#include "jsonx.h"
#include "prng.h"

static void expect_text(double v, const char *want)
{
	char buf[40];
	jsonx_real_text(v, buf, sizeof buf);
	ck_assert_msg(!strcmp(buf, want), "%.17g written as %s, expected %s", v, buf, want);
}

START_TEST(test_known_values)
{
	expect_text(1e-6, "1e-6");
	expect_text(1e-4, "0.0001");
	expect_text(0.1, "0.1");
	expect_text(2.5, "2.5");
	expect_text(2.0, "2.0");
	expect_text(0.0, "0.0");
	expect_text(-0.5, "-0.5");
	expect_text(1000.0, "1000.0");
	expect_text(1e16, "10000000000000000.0");
	expect_text(1e17, "1e17");
	expect_text(1e-300, "1e-300");
	expect_text(1.0 / 3.0, "0.3333333333333333");
	expect_text(2.7621025274961424, "2.7621025274961424");
	expect_text(2.2351741790771484e-8, "2.2351741790771484e-8");
}
END_TEST

/* Every finite double, drawn as random bits: the text reads back as the same value, is a
 * real to a JSON reader, and is never longer than jansson's 17-digit form. */
START_TEST(test_round_trip)
{
	struct prng r;
	prng_seed(&r, 42, 0);
	for (int i = 0; i < 50000; i++) {
		uint64_t bits = prng_next(&r);
		double v;
		memcpy(&v, &bits, sizeof v);
		if (!isfinite(v))
			continue;
		if (i % 2) /* also ordinary magnitudes, where plain notation is used */
			v = ldexp(v - floor(v), (int)(bits % 80) - 40);
		char buf[40], full[40];
		jsonx_real_text(v, buf, sizeof buf);
		ck_assert_msg(strtod(buf, NULL) == v || (v == 0 && strtod(buf, NULL) == 0),
			      "%.17g read back from %s", v, buf);
		ck_assert_msg(strpbrk(buf, ".e") != NULL, "%s would read back as an integer", buf);
		json_t *j = json_real(v);
		char *t = json_dumps(j, JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
		snprintf(full, sizeof full, "%s", t);
		free(t);
		json_decref(j);
		ck_assert_msg(strlen(buf) <= strlen(full), "%s longer than %s", buf, full);
	}
}
END_TEST

START_TEST(test_document)
{
	json_t *j = json_pack("{s:f, s:I, s:s, s:[f, f], s:{s:s}}", "atol", 1e-6, "n", (json_int_t)12,
			      "text", "0.10000000000000001 \"1e-06\" \\", "pair", 0.1, 100.0, "inner",
			      "k", "-2.50");
	char *t = jsonx_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(j);
	ck_assert_ptr_nonnull(t);
	ck_assert_str_eq(t, "{\"atol\":1e-6,\"inner\":{\"k\":\"-2.50\"},\"n\":12,"
			    "\"pair\":[0.1,100.0],\"text\":\"0.10000000000000001 \\\"1e-06\\\" \\\\\"}");
	json_error_t err;
	json_t *back = json_loads(t, 0, &err);
	ck_assert_ptr_nonnull(back);
	ck_assert(json_is_real(json_object_get(back, "atol")));
	ck_assert(json_real_value(json_object_get(back, "atol")) == 1e-6);
	ck_assert(json_is_integer(json_object_get(back, "n")));
	json_decref(back);
	free(t);
	/* indented output keeps jansson's layout */
	j = json_pack("{s:f}", "x", 0.25);
	t = jsonx_dumps(j, JSON_INDENT(2));
	json_decref(j);
	ck_assert_str_eq(t, "{\n  \"x\": 0.25\n}");
	free(t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("jsonx");
	TCase *tc = tcase_create("jsonx");
	tcase_add_test(tc, test_known_values);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_document);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
