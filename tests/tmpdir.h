/*
 * tmpdir: a fresh temporary directory for a test (under $TMPDIR, else /tmp), and its
 * removal with everything in it.
 */
#ifndef DDPTOK_TMPDIR_H
#define DDPTOK_TMPDIR_H

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsx.h"

/* A new directory "<tmp>/<name>-XXXXXX" (malloc'd path). */
static inline char *tmpdir_make(const char *name)
{
	const char *base = getenv("TMPDIR");
	char tmpl[512];
	snprintf(tmpl, sizeof tmpl, "%s/%s-XXXXXX", base && base[0] ? base : "/tmp", name);
	char *d = mkdtemp(tmpl);
	ck_assert_msg(d != NULL, "mkdtemp: %s", strerror(errno));
	return strdup(d);
}

/* Removes d and what it holds, and frees the path. */
static inline void tmpdir_drop(char *d)
{
	struct err e;
	err_clear(&e);
	ck_assert_msg(fsx_remove_tree(d, &e) == 0, "%s", e.msg);
	ck_assert(!fsx_exists(d));
	free(d);
}

#endif
