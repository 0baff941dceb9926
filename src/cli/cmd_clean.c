/*
 * cmd_clean: the clean command: removes only names the program writes (the table of
 * outputs.h) in the chosen scope (--scope generated|checkpoints|partial|all, --dry-run to
 * only list) and lists what it leaves, and why.
 */
#include "cmd_clean.h"

#include <fnmatch.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt.h"
#include "dirlock.h"
#include "fsx.h"
#include "outputs.h"
#include "store_scan.h"

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

/* The ".tmp.<pid>" at the end of a temporary's name "<name>.tmp.<pid>", else NULL. */
static const char *tmp_suffix(const char *name)
{
	const char *t = NULL;
	for (const char *q = strstr(name, ".tmp."); q; q = strstr(q + 1, ".tmp."))
		t = q;
	if (!t || !t[5] || strspn(t + 5, "0123456789") != strlen(t + 5) || t == name)
		return NULL;
	return t;
}

/* Whether a file name is one of the formats, or the temporary "<one of them>.tmp.<pid>". */
static int file_matches(const char *const *formats, const char *name)
{
	char base[NAME_MAX + 1];
	const char *t = tmp_suffix(name);
	size_t n;
	for (size_t i = 0; formats[i]; i++)
		if (format_matches(formats[i], name))
			return 1;
	if (!t || (n = (size_t)(t - name)) >= sizeof base)
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
	const char *t = tmp_suffix(name);
	if (!t || strlen(t + 5) > 9)
		return 0;
	long pid = strtol(t + 5, NULL, 10);
	return store_pid_running(pid) ? pid : 0;
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

/* The names of `names` that are files of `files` (NULL: none), whatever their writer. */
static size_t count_files(const char *root, char **names, size_t count, const char *const *files)
{
	size_t n = 0;
	for (size_t i = 0; files && i < count; i++) {
		char q[FSX_PATH_MAX];
		struct err e;
		n += fsx_join(q, sizeof q, root, names[i], &e) == ERR_OK && is_type(q, 0) &&
		     file_matches(files, names[i]) && !live_temporary(names[i]);
	}
	return n;
}

/* One directory of checkpoints (see list_checkpoints); `files` (may be NULL) names the
 * other files the program writes in it (a run directory's). */
static int list_root(const char *root, int partial_only, const char *const *files,
		     struct clean_list *p, struct err *e)
{
	struct ckpt_listing l;
	char **names = NULL;
	size_t count = 0, kept = 0;
	int *take = NULL, rc;
	if ((rc = ckpt_list(root, &l, e)))
		return rc;
	if ((rc = fsx_list_dir(root, &names, &count, e))) {
		ckpt_listing_free(&l);
		return rc;
	}
	char (*why)[1100] = calloc(l.n ? l.n : 1, sizeof *why);
	take = calloc(l.n ? l.n : 1, sizeof *take);
	if (!why || !take) {
		rc = ERR(e, ERR_NOMEM, "clean: out of memory");
		goto out;
	}
	for (size_t i = 0; i < l.n; i++) {
		const struct ckpt_entry *en = &l.v[i];
		if (en->kind == CKPT_PARTIAL || en->kind == CKPT_TRASH) {
			if (store_pid_running(en->pid))
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
	/* the root goes whole only when every name in it is an entry or a file that goes */
	if (!partial_only && kept == 0 && count == l.n + count_files(root, names, count, files)) {
		rc = add_target(p, root, e);
		goto out;
	}
	for (size_t i = 0; i < l.n && !rc; i++) {
		if (take[i])
			rc = add_target(p, l.v[i].path, e);
		else if (why[i][0])
			rc = add_left(p, l.v[i].path, why[i], e);
	}
	for (size_t i = 0; i < count && !rc; i++) {
		int entry = 0;
		char q[FSX_PATH_MAX];
		for (size_t j = 0; j < l.n && !entry; j++)
			entry = !strcmp(l.v[j].name, names[i]);
		if (entry || (rc = fsx_join(q, sizeof q, root, names[i], e)))
			continue;
		int owned = files && is_type(q, 0) && file_matches(files, names[i]);
		/* scope partial: of the run's files, only the temporaries of writes cut short */
		if (partial_only && !(owned && tmp_suffix(names[i])))
			continue;
		if (owned)
			rc = add_owned_file(p, q, names[i], e);
		else
			rc = add_left(p, q, "not a checkpoint", e);
	}
out:
	free(why);
	free(take);
	fsx_free_names(names, count);
	ckpt_listing_free(&l);
	return rc;
}

/* The runs directory: each run directory as a directory of checkpoints with its metrics
 * and summary, and the link `latest` (and a temporary of it); the whole directory when
 * all of it goes. */
static int list_runs(const char *runs, int partial_only, struct clean_list *p, struct err *e)
{
	static const char *const run_files[] = OUTPUT_RUN_FILES;
	static const char *const link_files[] = {OUTPUT_RUNS_LATEST, NULL};
	char **names = NULL;
	size_t count = 0, n0 = p->n, left0 = p->nleft, whole = 0;
	int rc = fsx_list_dir(runs, &names, &count, e);
	for (size_t i = 0; i < count && !rc; i++) {
		char q[FSX_PATH_MAX];
		struct stat st;
		size_t before = p->n;
		if ((rc = fsx_join(q, sizeof q, runs, names[i], e)) || lstat(q, &st) != 0)
			continue;
		if (S_ISLNK(st.st_mode) && file_matches(link_files, names[i]))
			rc = partial_only && !tmp_suffix(names[i]) ? ERR_OK
								   : add_owned_file(p, q, names[i], e);
		else if (S_ISDIR(st.st_mode))
			rc = list_root(q, partial_only, run_files, p, e);
		else
			rc = add_left(p, q, "not a run directory", e);
		whole += p->n == before + 1 && !strcmp(p->v[before].path, q);
	}
	fsx_free_names(names, count);
	if (rc == ERR_OK && !partial_only && whole == count && p->nleft == left0) {
		p->n = n0; /* all of it goes: one line for the directory */
		rc = add_target(p, runs, e);
	}
	return rc;
}

/* Scope checkpoints: what the store wrote in the program's roots: valid checkpoints that
 * hold nothing but their manifest's files, and leftovers (partial writes, replaced copies)
 * whose process is gone; whole roots when that is all they hold; the run directories of
 * train with their metrics and summaries. Scope partial: only those leftovers. Left and
 * reported: anything else (a step directory that is not such a checkpoint, a kept-aside
 * directory, a leftover whose writer still runs, other names). */
static int list_checkpoints(char roots[][FSX_PATH_MAX], int partial_only, struct clean_list *p,
			    struct err *e)
{
	int rc = ERR_OK;
	for (size_t k = 0; k < ART_COUNT && !rc; k++) {
		if (!fsx_exists(roots[k]))
			continue;
		if (!store_real_dir(roots[k]))
			rc = add_left(p, roots[k], "not a directory", e);
		else if (k == ART_RUNS)
			rc = list_runs(roots[k], partial_only, p, e);
		else
			rc = list_root(roots[k], partial_only, NULL, p, e);
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
