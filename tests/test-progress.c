/*
 * test-progress: when a training run off a terminal prints a progress line, and what the
 * line says (progress.h).
 */
#include <check.h>
#include <math.h>
#include <string.h>

#include "check-run.h"
#include "progress.h"

/* A run of `steps` lines counted as progress_show would print them, one step a second. */
static int lines_of(struct progress *p, int64_t start, int64_t stop)
{
	int n = 0;
	for (int64_t step = start + 1; step <= stop; step++) {
		double now = (double)(step - start);
		if (progress_due(p, step, stop, now)) {
			n++;
			p->last_shown_s = now;
		}
	}
	return n;
}

static struct progress plan(int log_every, int debug, int64_t start, int64_t stop)
{
	struct progress p = {.lines = 1, .every_step = debug, .start_step = start,
			     .stride = progress_stride(log_every, stop - start),
			     .auto_gap = log_every == 0};
	return p;
}

START_TEST(test_stride)
{
	ck_assert_int_eq(progress_stride(0, 100), 5);
	ck_assert_int_eq(progress_stride(0, 101), 6);
	ck_assert_int_eq(progress_stride(0, 3), 1);
	ck_assert_int_eq(progress_stride(0, 0), 1);
	ck_assert_int_eq(progress_stride(7, 100), 7);
}
END_TEST

START_TEST(test_about_twenty_lines)
{
	/* auto: the first step, every 5th, the last; a resumed run counts from its start */
	struct progress p = plan(0, 0, 0, 25);
	p.auto_gap = 0; /* one step a second would also trip the 30 s rule on long runs */
	ck_assert_int_eq(lines_of(&p, 0, 25), 14); /* stride 2: 1, 2, 4, ..., 24, 25 */
	p = plan(0, 0, 50, 150);
	p.auto_gap = 0;
	ck_assert_int_eq(lines_of(&p, 50, 150), 21);
	ck_assert(progress_due(&p, 51, 150, 0.0));  /* the first step of the run */
	ck_assert(progress_due(&p, 55, 150, 0.0));
	ck_assert(!progress_due(&p, 56, 150, 0.0));
	ck_assert(progress_due(&p, 150, 150, 0.0)); /* the last */
}
END_TEST

START_TEST(test_every_and_debug)
{
	struct progress p = plan(10, 0, 0, 40);
	ck_assert_int_eq(lines_of(&p, 0, 40), 5); /* 1, 10, 20, 30, 40 */
	p = plan(10, 1, 0, 40);
	ck_assert_int_eq(lines_of(&p, 0, 40), 40);
}
END_TEST

START_TEST(test_thirty_seconds)
{
	/* auto on a long run: 30 s without a line gives one; an explicit log_every does not */
	struct progress p = plan(0, 0, 0, 2000);
	ck_assert(!progress_due(&p, 2, 2000, 29.0));
	ck_assert(progress_due(&p, 2, 2000, 30.0));
	p = plan(100, 0, 0, 2000);
	ck_assert(!progress_due(&p, 2, 2000, 300.0));
}
END_TEST

START_TEST(test_text)
{
	char line[256];
	struct progress_point pt = {.step = 20, .stop_at = 100, .loss = 3.14159, .val_loss = NAN,
				    .lr = 0.2, .tokens_per_s = 1234.4, .elapsed_s = 65,
				    .eta_s = 3725};
	progress_text(&pt, line, sizeof line);
	ck_assert_str_eq(line, "train: step 20/100  loss 3.1416  lr 0.2  1234 tokens/s  "
			 "elapsed 1m05s  ETA 1h02m05s");
	pt.val_loss = 3.2;
	progress_text(&pt, line, sizeof line);
	ck_assert_ptr_nonnull(strstr(line, "loss 3.1416  val 3.2000  lr 0.2"));
}
END_TEST

static Suite *progress_suite(void)
{
	Suite *s = suite_create("progress");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_stride);
	tcase_add_test(tc, test_about_twenty_lines);
	tcase_add_test(tc, test_every_and_debug);
	tcase_add_test(tc, test_thirty_seconds);
	tcase_add_test(tc, test_text);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(progress_suite(), 0);
}
