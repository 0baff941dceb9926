/*
 * train_runs: the run directories of the train command: choosing the checkpoint a resume
 * takes, creating or continuing a run, the `latest` link, keeping the newest checkpoints
 * and trimming a continued run's metrics (see train_runs.h).
 */
#include "train_runs.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "ckpt.h"

int train_runs_root(const struct env *v, char *out, size_t cap, struct err *e)
{
	return fsx_join(out, cap, v->s->artifacts, artifacts_table[ART_RUNS], e);
}

/* The newest checkpoint step directory of a run directory, by the store's listing (not
 * verified), and the time its manifest was written; 0 when it holds none. */
static int newest_step_time(const char *run, struct timespec *when)
{
	struct ckpt_listing l;
	struct err ignore;
	char manifest[FSX_PATH_MAX];
	struct stat st;
	int found = 0;
	if (ckpt_list(run, &l, &ignore) != ERR_OK)
		return 0;
	for (size_t i = l.n; i-- > 0 && !found;)
		if (l.v[i].kind == CKPT_STEP &&
		    fsx_join(manifest, sizeof manifest, l.v[i].path, "MANIFEST.json", &ignore) ==
			    ERR_OK && stat(manifest, &st) == 0) {
			*when = st.st_mtim;
			found = 1;
		}
	ckpt_listing_free(&l);
	return found;
}

struct run_candidate {
	char *name;
	struct timespec when;
};

/* Newest first: by the time of the newest checkpoint, then by the id (the start time). */
static int newer_first(const void *pa, const void *pb)
{
	const struct run_candidate *a = pa, *b = pb;
	if (a->when.tv_sec != b->when.tv_sec)
		return a->when.tv_sec < b->when.tv_sec ? 1 : -1;
	if (a->when.tv_nsec != b->when.tv_nsec)
		return a->when.tv_nsec < b->when.tv_nsec ? 1 : -1;
	return strcmp(b->name, a->name);
}

/* The run directories under root that hold a checkpoint step directory (by the store's
 * listing, not verified) into c[0..*n), newest first; the names point into names[]. */
static int runs_by_time(const char *root, char **names, size_t count, struct run_candidate *c,
			size_t *n, struct err *e)
{
	char run[FSX_PATH_MAX];
	struct stat st;
	*n = 0;
	/* real directories only: not the link `latest` (nor a directory put in its place) */
	for (size_t i = 0; i < count; i++) {
		if (!strcmp(names[i], OUTPUT_RUNS_LATEST) || names[i][0] == '.')
			continue;
		ERR_TRY(fsx_join(run, sizeof run, root, names[i], e));
		if (lstat(run, &st) == 0 && S_ISDIR(st.st_mode) &&
		    newest_step_time(run, &c[*n].when))
			c[(*n)++].name = names[i];
	}
	qsort(c, *n, sizeof *c, newer_first);
	return ERR_OK;
}

int train_runs_newest_complete(const char *root, char *out, size_t cap,
			       struct train_plan *found, struct err *e)
{
	char **names = NULL, run[FSX_PATH_MAX];
	size_t count = 0, n = 0;
	out[0] = '\0';
	if (!fsx_is_dir(root))
		return ERR_OK;
	ERR_TRY(fsx_list_dir(root, &names, &count, e));
	struct run_candidate *c = calloc(count ? count : 1, sizeof *c);
	int rc = c ? runs_by_time(root, names, count, c, &n, e)
		   : ERR(e, ERR_NOMEM, "out of memory listing %s", root);
	/* the listing's newest step may be damaged: the first run with a valid one */
	for (size_t i = 0; rc == ERR_OK && i < n && !out[0]; i++) {
		struct err ignore;
		uint64_t step;
		char *ck = found ? found->resume : NULL;
		size_t ck_cap = found ? sizeof found->resume : 0;
		rc = fsx_join(run, sizeof run, root, c[i].name, e);
		if (rc == ERR_OK && ckpt_latest_valid(run, ck, ck_cap, &step, NULL, &ignore) == ERR_OK) {
			snprintf(out, cap, "%s", run);
			if (found) {
				found->resume_step = (int64_t)step;
				found->from_dir = 1;
			}
		}
	}
	free(c);
	fsx_free_names(names, count);
	return rc;
}

/* The id runs/latest names (the link's target) into id; "" when it is missing or is not
 * a link. link: the link's path. */
static int read_latest_link(const char *root, char *link, size_t link_cap, char *id,
			    size_t id_cap, struct err *e)
{
	ERR_TRY(fsx_join(link, link_cap, root, OUTPUT_RUNS_LATEST, e));
	ssize_t n = readlink(link, id, id_cap - 1);
	id[n > 0 ? n : 0] = '\0';
	return ERR_OK;
}

/* Whether runs/latest (under root) names run_dir's run. */
static int latest_names(const char *root, const char *run_dir)
{
	char link[FSX_PATH_MAX], id[NAME_MAX + 1];
	struct err ignore;
	const char *slash = strrchr(run_dir, '/');
	return read_latest_link(root, link, sizeof link, id, sizeof id, &ignore) == ERR_OK &&
	       id[0] && !strcmp(id, slash ? slash + 1 : run_dir);
}

/* Why runs/latest names no run directory: "" when it names one, which is then in out. */
static int read_latest(const char *root, char *out, size_t cap, char *why, size_t why_cap,
		       struct err *e)
{
	char link[FSX_PATH_MAX], id[NAME_MAX + 1];
	struct stat st;
	why[0] = '\0';
	ERR_TRY(read_latest_link(root, link, sizeof link, id, sizeof id, e));
	if (!id[0]) {
		snprintf(why, why_cap, lstat(link, &st) != 0 ? "%s is missing"
			 : "%s is not the link this program writes", link);
		return ERR_OK;
	}
	if (!strchr(id, '/'))
		ERR_TRY(fsx_join(out, cap, root, id, e));
	if (strchr(id, '/') || !fsx_is_dir(out))
		snprintf(why, why_cap, "%s names run %s, which is gone", link, id);
	return ERR_OK;
}

/* How latest_run answers: no run at all is "" (else ERR_DATA); the fallback is not said
 * (for housekeeping, which a command that reads `latest` already said it for). */
enum { LATEST_NONE_OK = 1, LATEST_QUIET = 2 };

/* The run directory runs/latest names; when the link is missing, names no run directory
 * or is not a link (a crash before its rename, a copy that turned it into a directory):
 * the newest run with a valid checkpoint, said so, and that checkpoint in *found (already
 * verified: not searched again). how: LATEST_* bits. */
static int latest_run(const struct env *v, char *out, size_t cap, struct train_plan *found,
		      unsigned how, struct err *e)
{
	char root[FSX_PATH_MAX], why[FSX_PATH_MAX + NAME_MAX + 64];
	ERR_TRY(train_runs_root(v, root, sizeof root, e));
	ERR_TRY(read_latest(root, out, cap, why, sizeof why, e));
	if (!why[0])
		return ERR_OK;
	ERR_TRY(train_runs_newest_complete(root, out, cap, found, e));
	if (out[0] && !(how & LATEST_QUIET))
		env_info(v, "latest: %s: taking the run with the newest valid checkpoint, %s", why,
			 out);
	else if (!out[0] && !(how & LATEST_NONE_OK))
		return ERR(e, ERR_DATA, "latest: no run yet (%s, and no run under %s has a valid "
			   "checkpoint); start one with `train`", why, root);
	return ERR_OK;
}

/* Whether the store's refusal of a directory (why; it rejected `rejected` step
 * directories) says it holds no checkpoint at all, rather than some, none valid. */
static int holds_none(int rejected, const struct err *why)
{
	return !rejected && why->code == ERR_DATA;
}

/* "latest" names a run without a valid checkpoint (one stopped before its first; the
 * store rejected `rejected` step directories in it): what to do instead. */
static int latest_without_checkpoint(const struct env *v, const char *dir, int rejected,
				     const struct err *why, struct err *e)
{
	char root[FSX_PATH_MAX], other[FSX_PATH_MAX];
	ERR_TRY(train_runs_root(v, root, sizeof root, e));
	ERR_TRY(train_runs_newest_complete(root, other, sizeof other, NULL, e));
	const char *none = holds_none(rejected, why) ? "no checkpoint yet" : "no valid checkpoint";
	if (!other[0])
		return ERR(e, why->code, "latest: run %s has %s (%s); start a new run with "
			   "`train`", dir, none, why->msg);
	return ERR(e, why->code, "latest: run %s has %s (%s); the newest run that has one is "
		   "%s: name it (--resume or --checkpoint %s), or start a new run with `train`",
		   dir, none, why->msg, other, other);
}

/* A directory that holds no valid checkpoint (why: the store's word; it rejected
 * `rejected` step directories): say so, and what it holds. */
static int no_checkpoint_in(const char *dir, int rejected, const struct err *why,
			    struct err *e)
{
	char **names = NULL, held[600] = "";
	size_t count = 0, len = 0;
	if (!holds_none(rejected, why))
		return ERR(e, why->code, "%s", why->msg); /* some, none valid: the store says why */
	if (fsx_list_dir(dir, &names, &count, e) != ERR_OK)
		return e->code;
	for (size_t i = 0; i < count && len + 1 < sizeof held; i++) {
		int n = i < 8 ? snprintf(held + len, sizeof held - len, "%s%s", i ? ", " : "",
					 names[i])
			      : snprintf(held + len, sizeof held - len, " and %zu more", count - i);
		len += n > 0 ? (size_t)n : 0;
		if (i >= 8)
			break;
	}
	fsx_free_names(names, count);
	return ERR(e, ERR_DATA, "there is no checkpoint in %s (no step-NNNN directory; it holds "
		   "%s)", dir, count ? held : "nothing");
}

/* plan->resume: the newest valid checkpoint of directory dir (the latest run's when
 * is_latest), unless the search for the latest run found it already. */
static int resume_from_dir(const struct env *v, const char *dir, int is_latest,
			   struct train_plan *plan, struct err *e)
{
	struct err le;
	uint64_t step = 0;
	int rejected = 0;
	if (plan->from_dir)
		return ERR_OK;
	err_clear(&le);
	if (ckpt_latest_valid(dir, plan->resume, sizeof plan->resume, &step, &rejected, &le) ==
	    ERR_OK) {
		plan->resume_step = (int64_t)step;
		plan->from_dir = 1;
		return ERR_OK;
	}
	if (is_latest)
		return latest_without_checkpoint(v, dir, rejected, &le, e);
	return no_checkpoint_in(dir, rejected, &le, e);
}

int train_plan_resume(const struct env *v, const char *spec, struct train_plan *plan,
		      struct err *e)
{
	char dir[FSX_PATH_MAX], manifest[FSX_PATH_MAX];
	struct ckpt_report rep;
	if (!spec || !strcmp(spec, "latest")) {
		ERR_TRY(latest_run(v, dir, sizeof dir, plan, spec ? 0 : LATEST_NONE_OK, e));
		return dir[0] ? resume_from_dir(v, dir, 1, plan, e) : ERR_OK;
	}
	snprintf(dir, sizeof dir, "%s", spec);
	ERR_TRY(fsx_join(manifest, sizeof manifest, dir, "MANIFEST.json", e));
	if (fsx_is_dir(dir) && !fsx_exists(manifest))
		return resume_from_dir(v, dir, 0, plan, e);
	/* a checkpoint itself (or what is not one: the store's verification says why) */
	int rc = ckpt_verify(dir, &rep, e);
	plan->resume_step = (int64_t)rep.step;
	ckpt_report_free(&rep);
	if (rc == ERR_OK)
		snprintf(plan->resume, sizeof plan->resume, "%s", dir);
	return rc;
}

/* Whether two paths name the same existing file. */
static int same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

int train_runs_id_of(const struct env *v, const char *ckpt, char *id, size_t cap)
{
	char run[FSX_PATH_MAX], parent[FSX_PATH_MAX], root[FSX_PATH_MAX];
	struct err e;
	err_clear(&e);
	if (fsx_dirname(run, sizeof run, ckpt, &e) || fsx_dirname(parent, sizeof parent, run, &e) ||
	    train_runs_root(v, root, sizeof root, &e) || !same_file(parent, root))
		return 0;
	char real[PATH_MAX]; /* through the link `latest`: the run it names */
	const char *name = realpath(run, real) ? real : run, *slash = strrchr(name, '/');
	snprintf(id, cap, "%s", slash ? slash + 1 : name);
	return 1;
}

/* A new run directory under runs/, named after the UTC time, made by mkdir (which fails
 * on a name already taken: two runs started in the same second get -2, -3, ...). */
static int new_run(const struct env *v, char *out, size_t cap, struct err *e)
{
	char root[FSX_PATH_MAX], id[64];
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	ERR_TRY(train_runs_root(v, root, sizeof root, e));
	ERR_TRY(env_dir_ready(root, "[run] artifacts", e));
	for (int k = 1; k < 1000; k++) {
		size_t n = strftime(id, sizeof id, "%Y%m%d-%H%M%S", &tm);
		if (k > 1)
			snprintf(id + n, sizeof id - n, "-%d", k);
		ERR_TRY(fsx_join(out, cap, root, id, e));
		if (mkdir(out, 0777) == 0)
			return ERR_OK;
		if (errno != EEXIST)
			return ERR_ERRNO(e, "cannot create the run directory %s", out);
	}
	return ERR(e, ERR_IO, "%s: no free run name for this second", root);
}

int train_plan_run(const struct env *v, struct train_plan *plan, struct err *e)
{
	char id[NAME_MAX + 1], newest[FSX_PATH_MAX];
	struct err le;
	err_clear(&le);
	plan->continues = 0;
	/* the run continues when it resumes from its run's newest valid checkpoint: known
	 * without a second search (and verification) when it was chosen as that one */
	if (plan->resume[0] && train_runs_id_of(v, plan->resume, id, sizeof id) &&
	    fsx_dirname(plan->run_dir, sizeof plan->run_dir, plan->resume, &le) == ERR_OK &&
	    (plan->from_dir ||
	     (ckpt_latest_valid(plan->run_dir, newest, sizeof newest, NULL, NULL, &le) == ERR_OK &&
	      same_file(newest, plan->resume)))) {
		char root[FSX_PATH_MAX];
		plan->continues = 1; /* named by its id, not through the link `latest` */
		ERR_TRY(train_runs_root(v, root, sizeof root, e));
		ERR_TRY(fsx_join(plan->run_dir, sizeof plan->run_dir, root, id, e));
	} else {
		ERR_TRY(new_run(v, plan->run_dir, sizeof plan->run_dir, e));
	}
	/* from the start, not at the first checkpoint: `latest` is the run going on now (and
	 * goes back to the one it named when the new run ends before its first checkpoint) */
	char root[FSX_PATH_MAX], link[FSX_PATH_MAX];
	int rc = train_runs_root(v, root, sizeof root, e);
	if (rc == ERR_OK)
		rc = read_latest_link(root, link, sizeof link, plan->latest_before,
				      sizeof plan->latest_before, e);
	if (rc == ERR_OK)
		rc = train_runs_mark_latest(v, plan->run_dir, e);
	if (rc != ERR_OK && !plan->continues)
		rmdir(plan->run_dir); /* made above, still empty */
	return rc;
}

/* Whether run_dir holds a checkpoint step directory (by the store's listing). */
static int holds_a_step(const char *run_dir)
{
	struct ckpt_listing l;
	struct err ignore;
	int found = 0;
	if (ckpt_list(run_dir, &l, &ignore) != ERR_OK)
		return 1; /* unknown: as if it held one, so that nothing is taken from it */
	for (size_t i = 0; i < l.n && !found; i++)
		found = l.v[i].kind == CKPT_STEP;
	ckpt_listing_free(&l);
	return found;
}

void train_runs_give_back(const struct env *v, const struct train_plan *plan)
{
	char root[FSX_PATH_MAX], back[FSX_PATH_MAX];
	struct err ignore;
	if (plan->continues || !plan->run_dir[0] || holds_a_step(plan->run_dir) ||
	    fsx_dirname(root, sizeof root, plan->run_dir, &ignore) != ERR_OK)
		return;
	/* `latest` named the run since it was made: it names again the run it named before
	 * (or, that one gone, the newest complete run) */
	if (latest_names(root, plan->run_dir)) {
		back[0] = '\0';
		if (!plan->latest_before[0] ||
		    fsx_join(back, sizeof back, root, plan->latest_before, &ignore) != ERR_OK ||
		    !fsx_is_dir(back))
			train_runs_newest_complete(root, back, sizeof back, NULL, &ignore);
		if (back[0])
			train_runs_mark_latest(v, back, &ignore);
		else if (fsx_join(back, sizeof back, root, OUTPUT_RUNS_LATEST, &ignore) == ERR_OK)
			unlink(back);
	}
	/* rmdir removes only an empty directory: nothing the run wrote goes */
	if (rmdir(plan->run_dir) == 0)
		rmdir(root);
}

int train_runs_mark_latest(const struct env *v, const char *run_dir, struct err *e)
{
	char root[FSX_PATH_MAX], link[FSX_PATH_MAX], tmp[FSX_PATH_MAX + 32];
	struct stat st;
	ERR_TRY(fsx_dirname(root, sizeof root, run_dir, e));
	ERR_TRY(fsx_join(link, sizeof link, root, OUTPUT_RUNS_LATEST, e));
	const char *slash = strrchr(run_dir, '/');
	const char *id = slash ? slash + 1 : run_dir;
	if (latest_names(root, run_dir))
		return ERR_OK;
	/* a directory in the link's place is not the program's to replace (a copy of a run,
	 * say): `latest` is then found from the run directories (latest_run) */
	if (lstat(link, &st) == 0 && S_ISDIR(st.st_mode)) {
		env_info(v, "train: note: %s is a directory, not the link this program writes: "
			 "left as it is (`--resume latest` takes the newest complete run)", link);
		return ERR_OK;
	}
	snprintf(tmp, sizeof tmp, "%s/%s.tmp.%ld", root, OUTPUT_RUNS_LATEST, (long)getpid());
	unlink(tmp);
	if (symlink(id, tmp) != 0)
		return ERR_ERRNO(e, "cannot create the link %s", tmp);
	if (rename(tmp, link) != 0) {
		int saved = errno;
		unlink(tmp);
		errno = saved;
		return ERR_ERRNO(e, "cannot replace %s", link);
	}
	return fsx_fsync_dir(root, e);
}

/* Removes a checkpoint without ever leaving a damaged step-NNNN: it is first renamed to
 * the store's name for a copy being removed (.step-NNNN.old.<pid>), which a kill may leave
 * behind (`checkpoints` names it, `clean --scope partial` removes it) and no reader takes. */
static int remove_checkpoint(const char *run_dir, const struct ckpt_entry *en, struct err *e)
{
	char old[FSX_PATH_MAX + 64];
	snprintf(old, sizeof old, "%s/.%s.old.%ld", run_dir, en->name, (long)getpid());
	if (rename(en->path, old) != 0)
		return ERR_ERRNO(e, "cannot move %s aside to remove it", en->path);
	return fsx_remove_tree(old, e);
}

int train_runs_prune(const struct env *v, const char *run_dir, int keep, int64_t newest,
		     int *removed, struct err *e)
{
	struct ckpt_listing l;
	int rc, older = 0;
	if (keep <= 0)
		return ERR_OK;
	ERR_TRY(ckpt_list(run_dir, &l, e));
	for (size_t i = 0; i < l.n; i++)
		older += l.v[i].kind == CKPT_STEP && (int64_t)l.v[i].step < newest;
	/* the listing runs from the oldest step: the first (older - (keep - 1)) go */
	rc = ERR_OK;
	for (size_t i = 0; i < l.n && older > keep - 1 && rc == ERR_OK; i++) {
		char why[256];
		if (l.v[i].kind != CKPT_STEP || (int64_t)l.v[i].step >= newest)
			continue;
		older--;
		if (!ckpt_removable(l.v[i].path, why, sizeof why)) {
			env_info(v, "%s: keep = %d: %s left in place (%s)", v->command, keep,
				 l.v[i].path, why);
			continue;
		}
		if ((rc = remove_checkpoint(run_dir, &l.v[i], e)) != ERR_OK)
			break;
		env_debug(v, "%s: keep = %d: removed %s", v->command, keep, l.v[i].path);
		if (removed)
			++*removed;
	}
	ckpt_listing_free(&l);
	return rc;
}

/* Whether run_dir holds more checkpoint step directories than the train.keep of its
 * newest listed one (not verified: only the cheap question whether there is work). */
static int holds_more_than_kept(const char *run_dir)
{
	struct ckpt_listing l;
	struct err ignore;
	long long keep = 0;
	size_t steps = 0, newest = 0;
	if (ckpt_list(run_dir, &l, &ignore) != ERR_OK)
		return 0;
	for (size_t i = 0; i < l.n; i++)
		if (l.v[i].kind == CKPT_STEP) {
			steps++;
			newest = i;
		}
	int more = steps > 1 &&
		   checkpoint_stored_int(l.v[newest].path, "train", "keep", &keep, &ignore) ==
			   ERR_OK &&
		   keep > 0 && steps > (size_t)keep;
	ckpt_listing_free(&l);
	return more;
}

/* train_runs_prune_latest's work, its failures returned. */
static int prune_latest(const struct env *v, const char *resumed, struct err *e)
{
	char run[FSX_PATH_MAX], resumed_run[FSX_PATH_MAX];
	struct train_plan found;
	long long keep;
	memset(&found, 0, sizeof found);
	ERR_TRY(latest_run(v, run, sizeof run, &found, LATEST_NONE_OK | LATEST_QUIET, e));
	if (!run[0] || (resumed[0] &&
			fsx_dirname(resumed_run, sizeof resumed_run, resumed, e) == ERR_OK &&
			same_file(resumed_run, run)) ||
	    !holds_more_than_kept(run))
		return ERR_OK;
	/* kept counting from the newest *valid* checkpoint: newer damaged ones never make a
	 * good one go */
	struct err none;
	uint64_t step;
	if (!found.resume[0]) {
		if (ckpt_latest_valid(run, found.resume, sizeof found.resume, &step, NULL, &none))
			return ERR_OK;
		found.resume_step = (int64_t)step;
	}
	/* the keep that run was trained with: what its own pruning would have done */
	int removed = 0;
	ERR_TRY(checkpoint_stored_int(found.resume, "train", "keep", &keep, e));
	ERR_TRY(train_runs_prune(v, run, (int)keep, found.resume_step, &removed, e));
	if (removed)
		env_info(v, "train: run %s held more checkpoints than its train.keep = %lld (it "
			 "ended before removing the older ones): removed %d", run, keep, removed);
	return ERR_OK;
}

void train_runs_prune_latest(const struct env *v, const char *resumed)
{
	struct err e;
	err_clear(&e);
	if (prune_latest(v, resumed, &e) != ERR_OK)
		env_info(v, "train: note: the latest run's older checkpoints were left in place "
			 "(%s)", e.msg);
}

/* The step of a metrics line, or -1 when it has none. */
static int64_t line_step(const char *line, size_t len)
{
	json_t *j = json_loadb(line, len, 0, NULL);
	json_t *s = json_object_get(j, "step");
	int64_t step = json_is_integer(s) ? json_integer_value(s) : -1;
	json_decref(j);
	return step;
}

int train_runs_trim_metrics(const char *path, int64_t step, struct err *e)
{
	char *buf = NULL;
	size_t len = 0, kept = 0;
	if (!fsx_exists(path))
		return ERR_OK;
	ERR_TRY(fsx_read_all(path, &buf, &len, e));
	for (size_t at = 0; at < len;) {
		const char *nl = memchr(buf + at, '\n', len - at);
		size_t end = nl ? (size_t)(nl - buf) + 1 : len;
		if (line_step(buf + at, end - at) > step)
			break; /* the steps only grow: the rest is past it too */
		kept = at = end;
	}
	int rc = kept < len ? fsx_write_atomic(path, buf, kept, e) : ERR_OK;
	free(buf);
	return rc;
}
