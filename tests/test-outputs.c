/*
 * test-outputs: the table of output names that the writers and `clean` share: every entry
 * named once, the summaries and metrics of each training run where enum train_kind finds
 * them, only the verdict files marked as such.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "check-run.h"
#include "outputs.h"
#include "train_loop.h"

START_TEST(test_every_entry_named_once)
{
	for (int i = 0; i < OUT_COUNT; i++) {
		ck_assert_msg(outputs_table[i].name && outputs_table[i].name[0], "entry %d has no name", i);
		for (int j = 0; j < i; j++)
			ck_assert_msg(strcmp(outputs_table[i].name, outputs_table[j].name),
				      "%s twice", outputs_table[i].name);
	}
	for (int i = 0; i < ART_COUNT; i++)
		ck_assert_msg(artifacts_table[i] && artifacts_table[i][0], "artifact %d has no name", i);
}
END_TEST

START_TEST(test_runs_and_their_files)
{
	const int kinds[3] = {TRAIN_STOP, TRAIN_CONTINUOUS, TRAIN_RESUME};
	for (int k = 0; k < 3; k++) {
		char json[64], jsonl[64];
		snprintf(json, sizeof json, "train-%s.json", output_run_name(kinds[k]));
		snprintf(jsonl, sizeof jsonl, "train-%s.jsonl", output_run_name(kinds[k]));
		ck_assert_str_eq(output_name(OUT_TRAIN_STOP + kinds[k]), json);
		ck_assert_str_eq(output_name(OUT_METRICS_STOP + kinds[k]), jsonl);
	}
	ck_assert_str_eq(output_run_name(TRAIN_CONTINUOUS), "continuous");
}
END_TEST

START_TEST(test_verdict_files)
{
	for (int i = 0; i < OUT_COUNT; i++) {
		int verdict = i == OUT_REPORT_MD || i == OUT_REPORT_JSON || i == OUT_FIGURE_PNG ||
			      i == OUT_FIGURE_SVG;
		ck_assert_msg(outputs_table[i].verdict == verdict, "%s", outputs_table[i].name);
		ck_assert_msg(!outputs_table[i].inside ||
			      (i == OUT_CORPUS || i == OUT_REFERENCE || i == OUT_PARITY_DUMP),
			      "%s is not a directory", outputs_table[i].name);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("outputs");
	TCase *tc = tcase_create("outputs");
	tcase_add_test(tc, test_every_entry_named_once);
	tcase_add_test(tc, test_runs_and_their_files);
	tcase_add_test(tc, test_verdict_files);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
