/*
 * layout: moves an earlier version's single-directory layout into the configuration's own
 * directories (layout.h).
 */
#include "layout.h"

#include <stdio.h>
#include <string.h>

#include "corpus_store.h"
#include "dirlock.h"
#include "fsx.h"
#include "outputs.h"

void layout_old_dir(const char *configured, char *out, size_t cap)
{
	const char *hit = strstr(configured, SETTINGS_CONFIG_NAME);
	size_t keep;
	out[0] = '\0';
	if (!hit)
		return;
	keep = (size_t)(hit - configured);
	if (keep > 1 && configured[keep - 1] == '/')
		keep--; /* "outputs/{config}" was "outputs" */
	snprintf(out, cap, "%.*s%s", (int)keep, configured, hit + strlen(SETTINGS_CONFIG_NAME));
	if (!out[0])
		snprintf(out, cap, ".");
}

/* Moves old/name to new/name when it exists; appends name to m->names. */
static int move_name(const char *old, const char *new, const char *name, struct layout_moved *m,
		     struct err *e)
{
	char from[FSX_PATH_MAX], to[FSX_PATH_MAX];
	size_t used = strlen(m->names);
	ERR_TRY(fsx_join(from, sizeof from, old, name, e));
	ERR_TRY(fsx_join(to, sizeof to, new, name, e));
	if (!fsx_exists(from))
		return ERR_OK;
	ERR_TRY(fsx_mkdirs(new, e));
	if (rename(from, to) != 0)
		return ERR_ERRNO(e, "%s: cannot move it to %s", from, to);
	snprintf(m->names + used, sizeof m->names - used, "%s%s", used ? ", " : "", name);
	m->moved++;
	return ERR_OK;
}

/* Whether the old layout in m holds this configuration's corpus and no new directory
 * exists yet: only then does it move. */
static int old_layout_is_ours(const struct settings *s, const struct layout_moved *m)
{
	char corpus[FSX_PATH_MAX];
	struct err ignore;
	err_clear(&ignore);
	if (!m->old_outputs[0] || !m->old_artifacts[0] || fsx_exists(s->outputs) ||
	    fsx_exists(s->artifacts))
		return 0;
	if (fsx_join(corpus, sizeof corpus, m->old_outputs, output_name(OUT_CORPUS), &ignore))
		return 0;
	return corpus_store_vocab(corpus, s) > 0;
}

int layout_adopt_old(const struct cfg *c, const struct settings *s, struct layout_moved *out,
		     struct err *e)
{
	struct dirlock locks;
	int rc = ERR_OK;
	memset(out, 0, sizeof *out);
	layout_old_dir(cfg_str(c, "run", "outputs"), out->old_outputs, sizeof out->old_outputs);
	layout_old_dir(cfg_str(c, "run", "artifacts"), out->old_artifacts,
		       sizeof out->old_artifacts);
	if (!old_layout_is_ours(s, out))
		return ERR_OK;
	/* an earlier version still running there holds these locks: nothing moves under it */
	dirlock_init(&locks);
	if ((rc = dirlock_take(&locks, out->old_outputs, "[run] outputs", "moving the old layout",
			       e)) == ERR_OK)
		rc = dirlock_take(&locks, out->old_artifacts, "[run] artifacts",
				  "moving the old layout", e);
	for (int i = 0; rc == ERR_OK && i < OUT_COUNT; i++)
		rc = move_name(out->old_outputs, s->outputs, outputs_table[i].name, out, e);
	for (int i = 0; rc == ERR_OK && i < ART_COUNT; i++)
		rc = move_name(out->old_artifacts, s->artifacts, artifacts_table[i], out, e);
	dirlock_release(&locks);
	return rc;
}
