/*
 * layout: finds the single-directory layout of earlier versions, where every configuration
 * wrote into the same [run] outputs and artifacts, and moves what belongs to this
 * configuration into its own directories (outputs/{config}, artifacts/{config}).
 *
 * What belongs to it is decided by the prepared corpus: the old outputs/corpus was made from
 * this configuration's [data] settings (its header says so). Then the names the program
 * writes (the tables of outputs.h) move from the old directories into the new ones, which
 * must not exist yet; nothing else is touched, and a corpus of another configuration leaves
 * the old layout where it is.
 */
#ifndef DDPTOK_LAYOUT_H
#define DDPTOK_LAYOUT_H
#include <stddef.h>
#include "config.h"
#include "err.h"
#include "settings.h"

struct layout_moved {
	int moved;                 /* how many names moved (0: nothing found or not ours) */
	char old_outputs[512], old_artifacts[512];
	char names[512];           /* the names moved, as "corpus, report.md, runs" */
};

/* The directories of [run] outputs and artifacts as an earlier version used them: the
 * configured value with its SETTINGS_CONFIG_NAME (and the '/' before it) taken out; ""
 * when the value holds no SETTINGS_CONFIG_NAME. */
void layout_old_dir(const char *configured, char *out, size_t cap);

/* Moves the old layout of c into s->outputs and s->artifacts when it is this
 * configuration's (above); out says what moved. ERR_IO when a rename fails. */
int layout_adopt_old(const struct cfg *c, const struct settings *s, struct layout_moved *out,
		     struct err *e);
#endif
