/*
 * testutil: small helpers shared by the Check suites: tiny settings and corpora.
 */
#ifndef DDPTOK_TESTUTIL_H
#define DDPTOK_TESTUTIL_H

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "settings.h"

/* A tiny configuration, as a configuration file would give it. */
static const char testutil_tiny_ini[] =
	"[run]\nseed = 7\nlog_level = quiet\n"
	"[data]\ntrain = 96\nvalidation = 16\ntest = 32\nmin_len = 4\nmax_len = 16\nvocab = 16\n"
	"prefix_max = 0\nbranching = 3\n"
	"[model]\ncontext = 3\nembed = 4\nhidden = 8\nlayout = packed\n"
	"[train]\nupdates = 6\nstop_at = 3\naccumulation = 2\nbatch_size = 2\nlr = 0.1\n"
	"momentum = 0.9\nweight_decay = 0\nnormalization = global_token\nplan = length_bands\n"
	"empty_window = error\n"
	"[devices]\nworld = 2\nbackend = cpu\nreduce = avg\ncollective = auto\ntimeout = 30\n"
	"[parity]\natol = 1e-6\nrtol = 1e-4\n"
	"[exercise]\nshort = 3\nlong_before = 3\nlong_after = 9\n";

/* The tiny configuration with the overrides `fmt` formats (blank-separated
 * "section.key=value" assignments, as --set takes them; "" for none), read and validated
 * by the program's own configuration path. Fails the test on any refusal. */
static inline void testutil_settings(struct settings *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static inline void testutil_settings(struct settings *s, const char *fmt, ...)
{
	struct cfg c;
	struct err e;
	char sets[1024];
	va_list ap;
	err_clear(&e);
	va_start(ap, fmt);
	vsnprintf(sets, sizeof sets, fmt, ap);
	va_end(ap);
	ck_assert_msg(cfg_init(&c, settings_keys, &e) == ERR_OK, "%s", e.msg);
	ck_assert_msg(cfg_load_text(&c, testutil_tiny_ini, "tiny.ini", &e) == ERR_OK, "%s", e.msg);
	for (char *save = NULL, *a = strtok_r(sets, " \n", &save); a; a = strtok_r(NULL, " \n", &save))
		ck_assert_msg(cfg_set(&c, a, &e) == ERR_OK, "%s", e.msg);
	ck_assert_msg(settings_from_cfg(&c, s, &e) == ERR_OK, "%s", e.msg);
	cfg_free(&c);
}

static inline void testutil_tiny_settings(struct settings *s)
{
	testutil_settings(s, "%s", "");
}

#endif
