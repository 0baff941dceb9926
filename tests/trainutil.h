/*
 * trainutil: a training run of the core to a given step, for the suites that train a model
 * through train_run() and compare stopped, resumed and continuous runs.
 */
#ifndef DDPTOK_TEST_TRAINUTIL_H
#define DDPTOK_TEST_TRAINUTIL_H

#include <check.h>
#include <stdio.h>
#include <string.h>

#include "train_loop.h"

/* Trains env v's model up to `stop` (from checkpoint `resume` when not NULL) with
 * checkpoints under `root`; fails the test unless it ran and ended at `stop`. */
static inline void trainutil_run_to(const struct env *v, int64_t stop, const char *resume,
				    const char *root, struct train_result *res)
{
	struct train_opts o;
	struct err e;
	memset(&o, 0, sizeof o);
	o.stop_at = stop;
	o.resume_dir = resume;
	o.mode = v->s->normalization;
	snprintf(o.ckpt_root, sizeof o.ckpt_root, "%s", root);
	err_clear(&e);
	ck_assert_msg(train_run(v, &o, res, &e) == ERR_OK, "train to %lld: %s", (long long)stop,
		      e.msg);
	ck_assert_int_eq(res->step, stop);
}

#endif
