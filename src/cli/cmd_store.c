/*
 * cmd_store: the commands that look after what the program wrote: `checkpoints` lists every
 * directory under the artifacts directory that holds checkpoints and verifies each one;
 * `clean` removes only names the program writes (the table of outputs.h) and lists what it
 * leaves.
 */
#include <errno.h>
#include <fnmatch.h>
#include <ftw.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app.h"
#include "ckpt.h"
#include "dirlock.h"
#include "fsx.h"
#include "outputs.h"
#include "report.h"
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

static int real_dir(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
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
		if (skip || (rc = fsx_join(child, sizeof child, dir, names[i], e)) || !real_dir(child))
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

/* Whether the process that named a partial write or an old copy still runs (then it may
 * be writing or removing it right now). A pid reused since is taken as running: safe. */
static int pid_running(long pid)
{
	if (pid <= 0 || pid > INT_MAX || pid == (long)getpid())
		return 0; /* this process writes nothing there: a leftover of an earlier one that
			   * had the same pid (a container's first process, say) */
	return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

/* ---- checkpoints ---------------------------------------------------------------------- */

/* Status and detail of a leftover (partial write, replaced copy, kept-aside directory). */
static void leftover_status(const struct ckpt_entry *en, int own_root, char *status, size_t scap,
			    char *detail, size_t dcap)
{
	char manifest[FSX_PATH_MAX + 32];
	int running = pid_running(en->pid);
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

/* ---- clean ---------------------------------------------------------------------------- */

/*
 * What the program writes into [run] outputs is outputs_table (outputs.h): `clean` removes
 * those names and nothing else. A directory entry lists the names (formats) the program
 * writes inside it; such a directory is removed whole only when it holds nothing else. Each
 * file may also appear as "<name>.tmp.<pid>", the temporary of an atomic write cut short.
 */

/* Whether name is one the table's printf format fmt produces: each conversion (%d, %s) read
 * as any text. */
static int format_matches(const char *fmt, const char *name)
{
	char pattern[NAME_MAX + 1];
	size_t k = 0;
	for (const char *f = fmt; *f && k + 1 < sizeof pattern; f++) {
		if (f[0] == '%' && (f[1] == 'd' || f[1] == 's')) {
			pattern[k++] = '*';
			f++;
		} else {
			pattern[k++] = *f;
		}
	}
	pattern[k] = '\0';
	return fnmatch(pattern, name, FNM_PERIOD) == 0;
}

/* Whether a file name is one of the formats, or the temporary "<one of them>.tmp.<pid>". */
static int file_matches(const char *const *formats, const char *name)
{
	char base[NAME_MAX + 1];
	const char *t = strstr(name, ".tmp.");
	size_t n;
	for (size_t i = 0; formats[i]; i++)
		if (format_matches(formats[i], name))
			return 1;
	/* the last ".tmp." followed by digits only */
	for (const char *q = t; q; q = strstr(q + 1, ".tmp."))
		t = q;
	if (!t || !t[5] || strspn(t + 5, "0123456789") != strlen(t + 5) ||
	    (n = (size_t)(t - name)) == 0 || n >= sizeof base)
		return 0;
	memcpy(base, name, n);
	base[n] = '\0';
	for (size_t i = 0; formats[i]; i++)
		if (format_matches(formats[i], base))
			return 1;
	return 0;
}

/* The pid of a "NAME.tmp.<pid>" temporary whose process still runs (it may be writing
 * it now: not to be removed), else 0. */
static long live_temporary(const char *name)
{
	const char *t = NULL;
	for (const char *q = strstr(name, ".tmp."); q; q = strstr(q + 1, ".tmp."))
		t = q;
	if (!t || !t[5] || strspn(t + 5, "0123456789") != strlen(t + 5) || strlen(t + 5) > 9)
		return 0;
	long pid = strtol(t + 5, NULL, 10);
	return pid_running(pid) ? pid : 0;
}

static long long walk_files, walk_bytes;

static int walk_count(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	if (flag == FTW_F || flag == FTW_SL || flag == FTW_SLN) {
		walk_files++;
		walk_bytes += st->st_size;
	}
	return 0;
}

/* A dir is dangerous to clean when it is empty text, only dots and slashes, or resolves
 * to "/", the home directory, the working directory or any of their ancestors. */
static int refuse_dangerous(const char *what, const char *dir, struct err *e)
{
	char real[PATH_MAX], other[PATH_MAX];
	const char *home = getenv("HOME");
	if (!dir[0] || strspn(dir, "/.") == strlen(dir))
		return ERR(e, ERR_CONFIG, "clean: refusing to clean [run] %s = \"%s\"", what, dir);
	if (!realpath(dir, real))
		return ERR_OK; /* nothing there */
	if (!strcmp(real, "/"))
		return ERR(e, ERR_CONFIG, "clean: refusing: [run] %s = \"%s\" is the root directory",
			   what, dir);
	const char *refs[2] = {home, "."};
	const char *ref_names[2] = {"home directory", "working directory"};
	for (int i = 0; i < 2; i++) {
		if (!refs[i] || !refs[i][0] || !realpath(refs[i], other))
			continue;
		size_t n = strlen(real);
		if (!strcmp(real, other) || (!strncmp(real, other, n) && other[n] == '/'))
			return ERR(e, ERR_CONFIG, "clean: refusing: [run] %s = \"%s\" is the %s or one of "
				   "its parents", what, dir, ref_names[i]);
	}
	return ERR_OK;
}

struct target {
	char path[FSX_PATH_MAX];
	long long files, bytes;
	int is_dir;
};

/* What clean removes (targets) and what it leaves in the places it looks at, with why. */
struct clean_list {
	struct target *v;
	size_t n;
	char **left;
	size_t nleft;
};

static int add_target(struct clean_list *p, const char *path, struct err *e)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return ERR_OK;
	struct target *nv = realloc(p->v, (p->n + 1) * sizeof *nv);
	if (!nv)
		return ERR(e, ERR_NOMEM, "clean: out of memory");
	p->v = nv;
	struct target *t = &nv[p->n++];
	snprintf(t->path, sizeof t->path, "%s", path);
	t->is_dir = S_ISDIR(st.st_mode);
	walk_files = walk_bytes = 0;
	if (t->is_dir)
		nftw(path, walk_count, 16, FTW_PHYS);
	else {
		walk_files = 1;
		walk_bytes = st.st_size;
	}
	t->files = walk_files;
	t->bytes = walk_bytes;
	return ERR_OK;
}

static int add_left(struct clean_list *p, const char *path, const char *why, struct err *e)
{
	char **nv = realloc(p->left, (p->nleft + 1) * sizeof *nv);
	if (!nv)
		return ERR(e, ERR_NOMEM, "clean: out of memory");
	p->left = nv;
	size_t len = strlen(path) + strlen(why) + 4;
	if (!(nv[p->nleft] = malloc(len)))
		return ERR(e, ERR_NOMEM, "clean: out of memory");
	snprintf(nv[p->nleft++], len, "%s (%s)", path, why);
	return ERR_OK;
}

/* Whether `path` resolves to `inner` or one of its ancestors. */
static int holds(const char *path, const char *inner)
{
	char a[PATH_MAX], b[PATH_MAX];
	if (!realpath(path, a) || !realpath(inner, b))
		return 0;
	size_t n = strlen(a);
	return !strcmp(a, b) || (!strncmp(a, b, n) && b[n] == '/');
}

static int is_type(const char *path, int want_dir)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return 0;
	return want_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode);
}

/* Adds a file of the program's to the list, unless it is a temporary being written. */
static int add_owned_file(struct clean_list *p, const char *path, const char *name,
			  struct err *e)
{
	long pid = live_temporary(name);
	if (pid) {
		char why[96];
		snprintf(why, sizeof why, "process %ld is running: it may be writing it", pid);
		return add_left(p, path, why, e);
	}
	return add_target(p, path, e);
}

/* An owned directory: whole when everything in it is the program's (and no temporary in
 * it is being written), else its files one by one, the rest left. */
static int list_owned_dir(struct clean_list *p, const char *dir, const char *const *inside,
			  struct err *e)
{
	char **names = NULL;
	size_t count = 0, others = 0;
	int rc;
	if ((rc = fsx_list_dir(dir, &names, &count, e)))
		return rc;
	for (size_t i = 0; i < count && !rc; i++) {
		char q[FSX_PATH_MAX];
		if (!(rc = fsx_join(q, sizeof q, dir, names[i], e)))
			others += !(is_type(q, 0) && file_matches(inside, names[i])) ||
				  live_temporary(names[i]);
	}
	if (!rc && others == 0)
		rc = add_target(p, dir, e);
	for (size_t i = 0; i < count && !rc && others; i++) {
		char q[FSX_PATH_MAX];
		if ((rc = fsx_join(q, sizeof q, dir, names[i], e)))
			break;
		if (is_type(q, 0) && file_matches(inside, names[i]))
			rc = add_owned_file(p, q, names[i], e);
		else
			rc = add_left(p, q, "not written by the program", e);
	}
	fsx_free_names(names, count);
	return rc;
}

/* Scope generated: the program's own names in the outputs directory. */
static int list_generated(const struct app *a, char roots[][FSX_PATH_MAX], struct clean_list *p,
			  struct err *e)
{
	char **names = NULL;
	size_t count = 0;
	int rc;
	if (!fsx_is_dir(a->s.outputs))
		return ERR_OK;
	if ((rc = fsx_list_dir(a->s.outputs, &names, &count, e)))
		return rc;
	for (size_t i = 0; i < count && !rc; i++) {
		char q[FSX_PATH_MAX];
		const struct output *own = NULL;
		int in_artifacts = 0;
		if (!strcmp(names[i], DIRLOCK_NAME))
			continue; /* the lock this command holds, not an output */
		if ((rc = fsx_join(q, sizeof q, a->s.outputs, names[i], e)))
			break;
		in_artifacts = holds(q, a->s.artifacts);
		for (size_t k = 0; k < ART_COUNT && !in_artifacts; k++)
			in_artifacts = holds(q, roots[k]);
		if (in_artifacts) {
			rc = add_left(p, q, "holds [run] artifacts: see --scope checkpoints", e);
			continue;
		}
		for (size_t k = 0; k < OUT_COUNT && !own; k++) {
			const char *const pat[2] = {outputs_table[k].name, NULL};
			int dir = outputs_table[k].inside != NULL;
			if (is_type(q, dir) && (dir ? !strcmp(pat[0], names[i]) : file_matches(pat, names[i])))
				own = &outputs_table[k];
		}
		if (!own)
			rc = add_left(p, q, "not written by the program", e);
		else if (own->inside)
			rc = list_owned_dir(p, q, own->inside, e);
		else
			rc = add_owned_file(p, q, names[i], e);
	}
	fsx_free_names(names, count);
	return rc;
}

/* Scope checkpoints: what the store wrote in the program's roots: valid checkpoints that
 * hold nothing but their manifest's files, and leftovers (partial writes, replaced copies)
 * whose process is gone; whole roots when that is all they hold. Scope partial: only those
 * leftovers. Left and reported: anything else (a step directory that is not such a
 * checkpoint, a kept-aside directory, a leftover whose writer still runs, other names). */
static int list_checkpoints(char roots[][FSX_PATH_MAX], int partial_only, struct clean_list *p,
			    struct err *e)
{
	int rc = ERR_OK;
	for (size_t k = 0; k < ART_COUNT && !rc; k++) {
		struct ckpt_listing l;
		char **names = NULL;
		size_t count = 0, kept = 0;
		int *take = NULL;
		if (!fsx_exists(roots[k]))
			continue;
		if (!real_dir(roots[k])) {
			rc = add_left(p, roots[k], "not a directory", e);
			continue;
		}
		if ((rc = ckpt_list(roots[k], &l, e)))
			break;
		if ((rc = fsx_list_dir(roots[k], &names, &count, e))) {
			ckpt_listing_free(&l);
			break;
		}
		char (*why)[1100] = calloc(l.n ? l.n : 1, sizeof *why);
		take = calloc(l.n ? l.n : 1, sizeof *take);
		if (!why || !take) {
			rc = ERR(e, ERR_NOMEM, "clean: out of memory");
			goto next;
		}
		for (size_t i = 0; i < l.n; i++) {
			const struct ckpt_entry *en = &l.v[i];
			if (en->kind == CKPT_PARTIAL || en->kind == CKPT_TRASH) {
				if (pid_running(en->pid))
					snprintf(why[i], sizeof why[i], "process %ld is running: it may be "
						 "%s it", en->pid,
						 en->kind == CKPT_PARTIAL ? "writing" : "removing");
				else
					take[i] = 1;
			} else if (en->kind == CKPT_KEPT) {
				snprintf(why[i], sizeof why[i], "kept aside by the store for you to look "
					 "at: remove it by hand");
			} else if (partial_only) {
				continue; /* a checkpoint: not this scope's, and not worth a line */
			} else {
				take[i] = ckpt_removable(en->path, why[i], sizeof why[i]);
			}
			kept += !take[i];
		}
		/* the root goes whole only when every name in it is an entry that goes */
		if (!partial_only && kept == 0 && count == l.n) {
			rc = add_target(p, roots[k], e);
			goto next;
		}
		for (size_t i = 0; i < l.n && !rc; i++) {
			if (take[i])
				rc = add_target(p, l.v[i].path, e);
			else if (why[i][0])
				rc = add_left(p, l.v[i].path, why[i], e);
		}
		for (size_t i = 0; i < count && !rc && !partial_only; i++) {
			int entry = 0;
			for (size_t j = 0; j < l.n && !entry; j++)
				entry = !strcmp(l.v[j].name, names[i]);
			if (!entry) {
				char q[FSX_PATH_MAX];
				if (!(rc = fsx_join(q, sizeof q, roots[k], names[i], e)))
					rc = add_left(p, q, "not a checkpoint", e);
			}
		}
next:
		free(why);
		free(take);
		fsx_free_names(names, count);
		ckpt_listing_free(&l);
	}
	return rc;
}

int cmd_clean(struct app *a, struct err *e)
{
	const char *scope = a->o.scope ? a->o.scope : "generated";
	int gen = 0, ck = 0, partial = 0, rc = ERR_OK;
	struct clean_list p = {NULL, 0, NULL, 0};
	char roots[ART_COUNT][FSX_PATH_MAX];

	if (!strcmp(scope, "generated"))
		gen = 1;
	else if (!strcmp(scope, "checkpoints"))
		ck = 1;
	else if (!strcmp(scope, "partial"))
		partial = 1;
	else if (!strcmp(scope, "all"))
		gen = ck = 1;
	else
		return ERR(e, ERR_USAGE, "clean: --scope must be generated, checkpoints, partial or "
			   "all, not '%s'", scope);
	for (size_t k = 0; k < ART_COUNT; k++)
		if ((rc = fsx_join(roots[k], sizeof roots[k], a->s.artifacts, artifacts_table[k], e)))
			return rc;
	if (gen && (rc = refuse_dangerous("outputs", a->s.outputs, e)))
		return rc;
	if ((ck || partial) && (rc = refuse_dangerous("artifacts", a->s.artifacts, e)))
		return rc;

	if ((gen && (rc = list_generated(a, roots, &p, e))) ||
	    ((ck || partial) && (rc = list_checkpoints(roots, partial, &p, e))))
		goto out;

	long long files = 0, bytes = 0;
	for (size_t i = 0; i < p.n; i++) {
		if (!a->o.dry_run && (rc = fsx_remove_tree(p.v[i].path, e)))
			goto out;
		printf("clean: %s %s%s (%lld file%s, %lld bytes)\n",
		       a->o.dry_run ? "would remove" : "removed", p.v[i].path, p.v[i].is_dir ? "/" : "",
		       p.v[i].files, p.v[i].files == 1 ? "" : "s", p.v[i].bytes);
		files += p.v[i].files;
		bytes += p.v[i].bytes;
	}
	for (size_t i = 0; i < p.nleft && i < 20; i++)
		printf("clean: left %s\n", p.left[i]);
	if (p.nleft > 20)
		printf("clean: left %zu more entries that are not the program's\n", p.nleft - 20);
	printf("clean: scope %s: %s %zu entr%s (%lld files, %lld bytes)%s", scope,
	       a->o.dry_run ? "would remove" : "removed", p.n, p.n == 1 ? "y" : "ies", files, bytes,
	       a->o.dry_run ? "; nothing was removed (dry run)" : "");
	if (p.nleft)
		printf("; %zu entr%s left in place (see the 'left' lines)", p.nleft,
		       p.nleft == 1 ? "y" : "ies");
	printf("\n");
out:
	free(p.v);
	for (size_t i = 0; i < p.nleft; i++)
		free(p.left[i]);
	free(p.left);
	fflush(stdout);
	return rc;
}
