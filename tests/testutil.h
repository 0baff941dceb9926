/*
 * testutil: small helpers shared by the Check suites: tiny settings and corpora.
 */
#ifndef DDPTOK_TESTUTIL_H
#define DDPTOK_TESTUTIL_H

#include <string.h>

#include "settings.h"

/* A tiny configuration, every field set explicitly (no config file involved). */
static inline void testutil_tiny_settings(struct settings *s)
{
	memset(s, 0, sizeof *s);
	s->seed = 7;
	strcpy(s->outputs, "outputs");
	strcpy(s->artifacts, "artifacts");
	s->log_level = 0;
	s->train_count = 96;
	s->validation_count = 16;
	s->test_count = 32;
	s->min_len = 4;
	s->max_len = 16;
	s->vocab = 16;
	s->prefix_max = 0;
	s->branching = 3;
	s->context = 3;
	s->embed = 4;
	s->hidden = 8;
	s->layout = LAYOUT_PACKED;
	s->updates = 6;
	s->stop_at = 3;
	s->accumulation = 2;
	s->batch_size = 2;
	s->lr = 0.1;
	s->momentum = 0.9;
	s->weight_decay = 0.0;
	s->normalization = NORM_GLOBAL_TOKEN;
	s->plan = PLAN_LENGTH_BANDS;
	s->empty_window = EMPTY_ERROR;
	s->world = 2;
	s->backend = BACKEND_CPU;
	s->reduce = 1; /* avg */
	s->collective = COLLECTIVE_AUTO;
	s->timeout_s = 30.0;
	s->atol = 1e-6;
	s->rtol = 1e-4;
	s->ex_short = 3;
	s->ex_long_before = 3;
	s->ex_long_after = 9;
}

#endif
