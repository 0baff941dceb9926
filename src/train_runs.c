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

#include "ckpt.h"

int train_runs_root(const struct env *v, char *out, size_t cap, struct err *e)
{
	return fsx_join(out, cap, v->s->artifacts, artifacts_table[ART_RUNS], e);
}

/* The run directory runs/latest names (it must be one). */
static int latest_run(const struct env *v, char *out, size_t cap, struct err *e)
{
	char root[FSX_PATH_MAX], link[FSX_PATH_MAX], id[NAME_MAX + 1];
	ERR_TRY(train_runs_root(v, root, sizeof root, e));
	ERR_TRY(fsx_join(link, sizeof link, root, OUTPUT_RUNS_LATEST, e));
	ssize_t n = readlink(link, id, sizeof id - 1);
	if (n < 0)
		return ERR(e, ERR_DATA, "latest: no run yet (%s: %s); start one with `train`",
			   link, strerror(errno));
	id[n] = '\0';
	ERR_TRY(fsx_join(out, cap, root, id, e));
	if (!fsx_is_dir(out))
		return ERR(e, ERR_DATA, "latest: %s names run %s, which is gone", link, id);
	return ERR_OK;
}

int train_plan_resume(const struct env *v, const char *spec, struct train_plan *plan,
		      struct err *e)
{
	char dir[FSX_PATH_MAX], manifest[FSX_PATH_MAX];
	uint64_t step = 0;
	struct ckpt_report rep;
	if (!strcmp(spec, "latest"))
		ERR_TRY(latest_run(v, dir, sizeof dir, e));
	else
		snprintf(dir, sizeof dir, "%s", spec);
	ERR_TRY(fsx_join(manifest, sizeof manifest, dir, "MANIFEST.json", e));
	if (!strcmp(spec, "latest") || (fsx_is_dir(dir) && !fsx_exists(manifest))) {
		struct err le;
		err_clear(&le);
		if (ckpt_latest_valid(dir, plan->resume, sizeof plan->resume, &step, NULL, &le) ==
		    ERR_OK) {
			plan->resume_step = (int64_t)step;
			plan->from_dir = 1;
			return ERR_OK;
		}
		if (!strcmp(spec, "latest"))
			return ERR(e, le.code, "latest: %s", le.msg);
	}
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
		return fsx_join(plan->run_dir, sizeof plan->run_dir, root, id, e);
	}
	return new_run(v, plan->run_dir, sizeof plan->run_dir, e);
}

void train_runs_drop_empty(const char *run_dir)
{
	char root[FSX_PATH_MAX];
	struct err ignore;
	/* rmdir removes only an empty directory: nothing the run wrote can go */
	if (rmdir(run_dir) == 0 && fsx_dirname(root, sizeof root, run_dir, &ignore) == ERR_OK)
		rmdir(root);
}

int train_runs_mark_latest(const char *run_dir, struct err *e)
{
	char root[FSX_PATH_MAX], link[FSX_PATH_MAX], tmp[FSX_PATH_MAX + 32];
	ERR_TRY(fsx_dirname(root, sizeof root, run_dir, e));
	ERR_TRY(fsx_join(link, sizeof link, root, OUTPUT_RUNS_LATEST, e));
	const char *slash = strrchr(run_dir, '/');
	const char *id = slash ? slash + 1 : run_dir;
	char now[NAME_MAX + 1];
	ssize_t n = readlink(link, now, sizeof now - 1);
	if (n >= 0 && (now[n] = '\0', !strcmp(now, id)))
		return ERR_OK;
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
		     struct err *e)
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
		if ((rc = remove_checkpoint(run_dir, &l.v[i], e)) == ERR_OK)
			env_debug(v, "%s: keep = %d: removed %s", v->command, keep, l.v[i].path);
	}
	ckpt_listing_free(&l);
	return rc;
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
