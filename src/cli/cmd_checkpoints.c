/*
 * cmd_checkpoints: the checkpoints command: lists every directory under the artifacts
 * directory that holds checkpoints, verifies each checkpoint (the store's manifest and
 * digests, then its content) and describes each leftover of an interrupted write; the
 * listing is also written to checkpoints.json.
 */
#include "cmd_checkpoints.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "fsx.h"
#include "outputs.h"
#include "report.h"
#include "store_scan.h"
#include "checkpoint.h"

/* ---- where checkpoints live ------------------------------------------------------ */

/* How deep `checkpoints` looks below the artifacts directory for other directories of
 * checkpoints (copies a user made there, say). */
#define CKPT_SEARCH_DEPTH 6

struct ckpt_root {
	char path[FSX_PATH_MAX];
	char label[FSX_PATH_MAX]; /* relative to the artifacts directory; "" for itself */
};

struct ckpt_roots {
	struct ckpt_root *v;
	size_t n;
};

static int add_root(struct ckpt_roots *rs, const char *path, const char *label, struct err *e)
{
	for (size_t i = 0; i < rs->n; i++)
		if (!strcmp(rs->v[i].path, path))
			return ERR_OK; /* one of the program's roots, met again by the walk */
	struct ckpt_root *nv = realloc(rs->v, (rs->n + 1) * sizeof *nv);
	if (!nv)
		return ERR(e, ERR_NOMEM, "checkpoints: out of memory");
	rs->v = nv;
	snprintf(nv[rs->n].path, sizeof nv[rs->n].path, "%s", path);
	snprintf(nv[rs->n].label, sizeof nv[rs->n].label, "%s", label);
	rs->n++;
	return ERR_OK;
}

/* Adds dir (label: its path relative to the artifacts directory) if it holds checkpoint
 * entries, then looks into its subdirectories other than checkpoint entries, links not
 * followed. */
static int find_other_roots(const char *dir, const char *label, int depth, struct ckpt_roots *rs,
			    struct err *e)
{
	struct ckpt_listing l;
	char **names = NULL;
	size_t count = 0;
	int rc;

	if ((rc = ckpt_list(dir, &l, e)))
		return rc;
	if (l.n && (rc = add_root(rs, dir, label, e)))
		goto out;
	if (depth >= CKPT_SEARCH_DEPTH || (rc = fsx_list_dir(dir, &names, &count, e)))
		goto out;
	for (size_t i = 0; i < count && !rc; i++) {
		char child[FSX_PATH_MAX], sub[FSX_PATH_MAX];
		int skip = 0;
		for (size_t k = 0; k < l.n && !skip; k++)
			skip = !strcmp(l.v[k].name, names[i]);
		if (skip || (rc = fsx_join(child, sizeof child, dir, names[i], e)) || !store_real_dir(child))
			continue;
		if (label[0])
			snprintf(sub, sizeof sub, "%s/%s", label, names[i]);
		else
			snprintf(sub, sizeof sub, "%s", names[i]);
		rc = find_other_roots(child, sub, depth + 1, rs, e);
	}
out:
	fsx_free_names(names, count);
	ckpt_listing_free(&l);
	return rc;
}

/* Every directory under the artifacts directory that holds checkpoints: the program's
 * roots first (present or not), then any other one. */
static int all_roots(const struct app *a, struct ckpt_roots *rs, struct err *e)
{
	int rc = ERR_OK;
	rs->v = NULL;
	rs->n = 0;
	for (size_t k = 0; k < ART_COUNT && !rc; k++) {
		char p[FSX_PATH_MAX];
		if (!(rc = fsx_join(p, sizeof p, a->s.artifacts, artifacts_table[k], e)))
			rc = add_root(rs, p, artifacts_table[k], e);
	}
	if (!rc && fsx_is_dir(a->s.artifacts))
		rc = find_other_roots(a->s.artifacts, "", 0, rs, e);
	if (rc) {
		free(rs->v);
		rs->v = NULL;
		rs->n = 0;
	}
	return rc;
}

/* ---- checkpoints ---------------------------------------------------------------------- */

/* Status and detail of a leftover (partial write, replaced copy, kept-aside directory). */
static void leftover_status(const struct ckpt_entry *en, int own_root, char *status, size_t scap,
			    char *detail, size_t dcap)
{
	char manifest[FSX_PATH_MAX + 32];
	int running = store_pid_running(en->pid);
	/* clean looks only in the program's own roots (checkpoints/, continuous/, inspect/) */
	const char *how = own_root ? "`clean --scope partial` removes it"
				   : "outside the program's directories: remove it by hand";
	snprintf(manifest, sizeof manifest, "%s/%s", en->path, CKPT_MANIFEST);
	switch (en->kind) {
	case CKPT_PARTIAL:
		snprintf(status, scap, "partial write (pid %ld): never used", en->pid);
		if (running)
			snprintf(detail, dcap, "process %ld is running: it may be writing this now",
				 en->pid);
		else if (fsx_exists(manifest))
			snprintf(detail, dcap, "complete but never published (its writer stopped before "
				 "the rename, or while a replaced copy was being removed); %s", how);
		else
			snprintf(detail, dcap, "left by an interrupted write; %s", how);
		break;
	case CKPT_TRASH:
		snprintf(status, scap, "old copy being replaced (pid %ld): never used", en->pid);
		if (running)
			snprintf(detail, dcap, "process %ld is running: it may be removing this now",
				 en->pid);
		else
			snprintf(detail, dcap, "a replaced copy of step %" PRIu64 " whose removal was "
				 "interrupted; %s", en->step, how);
		break;
	default:
		snprintf(status, scap, "kept aside (pid %ld): never used", en->pid);
		snprintf(detail, dcap, "was step-%04" PRIu64 ", not only what the store wrote, when "
			 "process %ld wrote that step again; kept for you to look at (no clean scope "
			 "removes it: remove it by hand)", en->step, en->pid);
		break;
	}
}

/* What `checkpoints` found, in counts, and the first failure. */
struct ckpt_tally {
	int ok, bad, partial, kept;
	char first_bad[1024];
	json_t *rows; /* one object per entry, for checkpoints.json */
};

/* Verifies a step directory: its store (manifest, sizes, digests), then its content. */
static int verify_step(struct app *a, const struct ckpt_entry *en, char *status, size_t scap,
		       char *detail, size_t dcap, long long *files, long long *bytes)
{
	struct ckpt_report rep;
	struct err ve;
	int ok = 0;
	err_clear(&ve);
	if (ckpt_verify(en->path, &rep, &ve) == ERR_OK) {
		struct checkpoint ck;
		*files = (long long)rep.nfiles;
		*bytes = (long long)rep.total_bytes;
		ok = checkpoint_load(&a->env, en->path, NULL, 0, &ck, &ve) == ERR_OK;
		snprintf(status, scap, "%s", ok ? "ok" : "unusable");
		snprintf(detail, dcap, "%s", ok ? rep.warning : ve.msg);
		checkpoint_free(&ck);
	} else {
		snprintf(status, scap, "%s", ckpt_problem_name(rep.problem));
		snprintf(detail, dcap, "%s", ve.msg);
		if (rep.nfiles) {
			*files = (long long)rep.nfiles;
			*bytes = (long long)rep.total_bytes;
		}
	}
	ckpt_report_free(&rep);
	return ok;
}

/* One entry of a root: verified (or described, for a leftover), printed and tallied. */
static void list_entry(struct app *a, const struct ckpt_root *root, int own_root,
		       const struct ckpt_entry *en, struct ckpt_tally *t)
{
	char shown[FSX_PATH_MAX + 300], status[1200], detail[1100] = "";
	char fbuf[24] = "-", bbuf[24] = "-";
	long long files = -1, bytes = -1;
	int ok = 0;
	if (root->label[0])
		snprintf(shown, sizeof shown, "%s/%s", root->label, en->name);
	else
		snprintf(shown, sizeof shown, "%s", en->name);
	if (en->kind == CKPT_STEP) {
		ok = verify_step(a, en, status, sizeof status, detail, sizeof detail, &files, &bytes);
		if (ok)
			t->ok++;
		else if (t->bad++ == 0)
			snprintf(t->first_bad, sizeof t->first_bad, "%.300s: %.700s", shown, detail);
	} else {
		if (en->kind == CKPT_KEPT)
			t->kept++;
		else
			t->partial++;
		leftover_status(en, own_root, status, sizeof status, detail, sizeof detail);
	}
	if (files >= 0)
		snprintf(fbuf, sizeof fbuf, "%lld", files);
	if (bytes >= 0)
		snprintf(bbuf, sizeof bbuf, "%lld", bytes);
	printf("  %-32s %8" PRIu64 " %6s %12s  %s\n", shown, en->step, fbuf, bbuf, status);
	if (detail[0])
		printf("  %-32s %8s %6s %12s    %s\n", "", "", "", "", detail);
	json_array_append_new(t->rows, json_pack("{s:s, s:s, s:I, s:I, s:I, s:b, s:s, s:s}",
		"directory", en->path, "kind",
		en->kind == CKPT_STEP ? "checkpoint" : en->kind == CKPT_PARTIAL ? "partial"
		: en->kind == CKPT_TRASH ? "old" : "kept",
		"step", (json_int_t)en->step, "files", (json_int_t)files, "bytes", (json_int_t)bytes,
		"ok", ok, "status", status, "detail", detail));
}

static void print_tally(const struct ckpt_tally *t)
{
	if (t->ok + t->bad + t->partial + t->kept == 0)
		printf("  (none)\n");
	printf("checkpoints: %d valid, %d corrupt or unusable, %d partial (leftovers of interrupted "
	       "writes, never used; `clean --scope partial` removes those of checkpoints/, continuous/ "
	       "and inspect/ whose writer is gone)", t->ok, t->bad, t->partial);
	if (t->kept)
		printf(", %d kept aside (directories that were in the way of a new checkpoint and were "
		       "not only what the store wrote; never used, never removed by the program)",
		       t->kept);
	printf("\n");
	fflush(stdout);
}

int cmd_checkpoints(struct app *a, struct err *e)
{
	struct ckpt_tally t = {0, 0, 0, 0, "", json_array()};
	struct ckpt_roots rs = {NULL, 0};
	int rc;

	ERR_TRY_GOTO(rc, all_roots(a, &rs, e), out);
	printf("checkpoints under %s:\n", a->s.artifacts);
	printf("  %-32s %8s %6s %12s  %s\n", "directory", "step", "files", "bytes", "status");
	for (size_t k = 0; k < rs.n; k++) {
		struct ckpt_listing l;
		ERR_TRY_GOTO(rc, ckpt_list(rs.v[k].path, &l, e), out);
		for (size_t i = 0; i < l.n; i++)
			list_entry(a, &rs.v[k], k < ART_COUNT, &l.v[i], &t);
		ckpt_listing_free(&l);
	}
	print_tally(&t);
	ERR_TRY_GOTO(rc, env_outputs_ready(&a->env, e), out);
	json_t *j = json_pack("{s:s, s:i, s:i, s:i, s:i, s:O}", "artifacts", a->s.artifacts, "valid",
			      t.ok, "corrupt", t.bad, "partial", t.partial, "kept", t.kept, "entries",
			      t.rows);
	ERR_TRY_GOTO(rc, report_write_json(a, OUT_CHECKPOINTS, j, e), out);
	if (t.bad)
		rc = ERR(e, ERR_CHECK, "%d checkpoint%s under %s failed verification (first: %s)", t.bad,
			 t.bad == 1 ? "" : "s", a->s.artifacts, t.first_bad);
out:
	free(rs.v);
	json_decref(t.rows);
	return rc;
}
