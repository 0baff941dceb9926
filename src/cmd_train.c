/*
 * cmd_train: the commands around training: train, evaluate, checkpoints and clean.
 *
 * They are thin: the loop, the checkpoint format and the checks live in train.c so that
 * the protocol command can run the same code; these functions choose the run from the
 * command line, print what happened and write the JSON beside it.
 */
#include <ftw.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app.h"
#include "ckpt.h"
#include "fsx.h"
#include "train.h"

/* ---- train ---------------------------------------------------------------------------- */

int cmd_train(struct app *a, struct err *e)
{
	static const char *names[] = {"stop", "continuous", "resume"};
	struct train_opts o;
	struct train_result res;
	enum train_kind kind;
	char json_name[64];
	int rc;

	if (a->o.resume_dir && a->o.continuous)
		return ERR(e, ERR_USAGE, "train: --continuous and --resume exclude each other");
	kind = a->o.resume_dir ? TRAIN_RESUME : a->o.continuous ? TRAIN_CONTINUOUS : TRAIN_STOP;
	if ((rc = app_outputs_ready(a, e)) || (rc = train_opts_for(a, kind, a->o.resume_dir, &o, e)))
		return rc;
	app_info(a, "train: %s run to step %" PRId64 " (W = %d, accumulation %d, batch %d, lr %g, "
		 "momentum %g, normalization %s)%s%s", names[kind], o.stop_at, a->s.world,
		 a->s.accumulation, a->s.batch_size, a->s.lr, a->s.momentum,
		 norm_mode_name(o.mode), kind == TRAIN_RESUME ? " from " : "",
		 kind == TRAIN_RESUME ? a->o.resume_dir : "");
	rc = train_run(a, &o, &res, e);
	if (rc != ERR_OK && rc != ERR_INTERRUPTED)
		return rc;
	app_info(a, "train: steps %" PRId64 " -> %" PRId64 " (%" PRId64 " updates in total, %" PRId64
		 " empty windows skipped), loss %.6f -> %.6f, %" PRId64 " tokens in %.2f s "
		 "(%.0f tokens/s, %s)", res.start_step, res.step, res.updates_done, res.skipped,
		 res.first_loss, res.last_loss, res.tokens, res.seconds, res.tokens_per_s,
		 res.backend);
	if (res.checkpoint[0])
		app_info(a, "train: checkpoint %s", res.checkpoint);
	if (o.metrics_path[0] && res.step > res.start_step)
		app_info(a, "train: metrics %s", o.metrics_path);

	json_t *hist = json_array();
	for (int r = 0; r < a->s.world; r++)
		json_array_append_new(hist, json_pack("{s:i, s:I, s:I, s:I}", "rank", r, "windows",
						      (json_int_t)res.hist[r].windows, "sequences",
						      (json_int_t)res.hist[r].sequences, "tokens",
						      (json_int_t)res.hist[r].tokens));
	json_t *j = json_pack("{s:s, s:I, s:I, s:I, s:I, s:s, s:b, s:o, s:o, s:I, s:f, s:f, s:s, "
			      "s:o}",
			      "run", names[kind], "start_step", (json_int_t)res.start_step, "step",
			      (json_int_t)res.step, "updates_done", (json_int_t)res.updates_done,
			      "skipped_windows", (json_int_t)res.skipped, "checkpoint", res.checkpoint,
			      "interrupted", res.interrupted, "first_loss",
			      isfinite(res.first_loss) ? json_real(res.first_loss) : json_null(),
			      "last_loss", isfinite(res.last_loss) ? json_real(res.last_loss) : json_null(),
			      "tokens", (json_int_t)res.tokens, "seconds", res.seconds, "tokens_per_s",
			      res.tokens_per_s, "backend", res.backend, "ranks", hist);
	snprintf(json_name, sizeof json_name, "train-%s.json", names[kind]);
	struct err we;
	err_clear(&we);
	int wrc = app_write_json(a, json_name, j, &we);
	json_decref(j);
	train_result_free(&res);
	if (rc == ERR_INTERRUPTED)
		return rc; /* e holds the message naming the checkpoint */
	if (wrc) {
		*e = we;
		return wrc;
	}
	return ERR_OK;
}

/* ---- evaluate ------------------------------------------------------------------------- */

static json_t *split_json(const struct train_split_eval *s)
{
	return json_pack("{s:I, s:I, s:I, s:f, s:o, s:o, s:I, s:o}", "sequences",
			 (json_int_t)s->sequences, "tokens", (json_int_t)s->tokens, "hits",
			 (json_int_t)s->hits, "loss_sum", s->loss_sum, "loss",
			 isfinite(s->loss) ? json_real(s->loss) : json_null(), "accuracy",
			 isfinite(s->accuracy) ? json_real(s->accuracy) : json_null(),
			 "constant_guess_hits", (json_int_t)s->const_hits, "constant_guess_accuracy",
			 isfinite(s->const_accuracy) ? json_real(s->const_accuracy) : json_null());
}

int cmd_evaluate(struct app *a, struct err *e)
{
	struct train_eval ev;
	int rc;
	if ((rc = app_outputs_ready(a, e)) || (rc = train_evaluate(a, a->o.checkpoint, &ev, e)))
		return rc;
	const struct train_split_eval *sp[2] = {&ev.test, &ev.validation};
	const char *names[2] = {"test", "validation"};
	app_info(a, "evaluate: checkpoint %s (step %" PRId64 ")", ev.checkpoint, ev.step);
	app_info(a, "evaluate: %-10s %9s %9s %10s %9s %9s %14s", "split", "sequences", "tokens",
		 "loss", "hits", "accuracy", "const. guess");
	for (int i = 0; i < 2; i++)
		app_info(a, "evaluate: %-10s %9" PRId64 " %9" PRId64 " %10.6f %9" PRId64 " %9.4f %14.4f",
			 names[i], sp[i]->sequences, sp[i]->tokens, sp[i]->loss, sp[i]->hits,
			 sp[i]->accuracy, sp[i]->const_accuracy);
	app_info(a, "evaluate: loss = global token mean (sum of token losses / supervised tokens); "
		 "accuracy = argmax == target; the constant guess always predicts id %d, the most "
		 "frequent training target", ev.const_id);
	json_t *j = json_pack("{s:s, s:I, s:i, s:o, s:o}", "checkpoint", ev.checkpoint, "step",
			      (json_int_t)ev.step, "constant_guess_id", ev.const_id, "test",
			      split_json(&ev.test), "validation", split_json(&ev.validation));
	rc = app_write_json(a, "evaluate.json", j, e);
	json_decref(j);
	if (!rc)
		app_info(a, "evaluate: written %s/evaluate.json", a->outputs);
	return rc;
}

/* ---- checkpoints ---------------------------------------------------------------------- */

static void path_below(const char *root_label, const char *name, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s", root_label, name);
}

int cmd_checkpoints(struct app *a, struct err *e)
{
	static const char *labels[2] = {"checkpoints", "continuous"};
	int n_ok = 0, n_bad = 0, n_partial = 0, rc;
	json_t *rows = json_array();
	char first_bad[1024] = "";

	printf("checkpoints under %s:\n", a->artifacts);
	printf("  %-32s %8s %6s %12s  %s\n", "directory", "step", "files", "bytes", "status");
	for (int k = 0; k < 2; k++) {
		char root[FSX_PATH_MAX];
		struct ckpt_listing l;
		if ((rc = train_ckpt_root(a, k, root, sizeof root, e)) || (rc = ckpt_list(root, &l, e)))
			goto out;
		for (size_t i = 0; i < l.n; i++) {
			const struct ckpt_entry *en = &l.v[i];
			char shown[512], status[1200], detail[1100] = "";
			struct ckpt_report rep;
			struct err ve;
			long long files = -1, bytes = -1;
			int ok = 0;
			path_below(labels[k], en->name, shown, sizeof shown);
			err_clear(&ve);
			if (en->kind == CKPT_STEP) {
				if (ckpt_verify(en->path, &rep, &ve) == ERR_OK) {
					struct train_ckpt ck;
					files = (long long)rep.nfiles;
					bytes = (long long)rep.total_bytes;
					if (train_ckpt_load(a, en->path, NULL, 0, &ck, &ve) == ERR_OK) {
						ok = 1;
						snprintf(status, sizeof status, "ok");
						if (rep.warning[0])
							snprintf(detail, sizeof detail, "%s", rep.warning);
					} else {
						snprintf(status, sizeof status, "unusable");
						snprintf(detail, sizeof detail, "%s", ve.msg);
					}
					train_ckpt_free(&ck);
				} else {
					snprintf(status, sizeof status, "%s",
						 ckpt_problem_name(rep.problem));
					snprintf(detail, sizeof detail, "%s", ve.msg);
					if (rep.nfiles) {
						files = (long long)rep.nfiles;
						bytes = (long long)rep.total_bytes;
					}
				}
				ckpt_report_free(&rep);
				if (ok)
					n_ok++;
				else {
					n_bad++;
					if (!first_bad[0])
						snprintf(first_bad, sizeof first_bad, "%s: %s", shown,
							 detail);
				}
			} else {
				n_partial++;
				snprintf(status, sizeof status, "%s (pid %ld): never used",
					 en->kind == CKPT_PARTIAL ? "partial write" : "old copy being replaced",
					 en->pid);
			}
			char fbuf[24] = "-", bbuf[24] = "-";
			if (files >= 0)
				snprintf(fbuf, sizeof fbuf, "%lld", files);
			if (bytes >= 0)
				snprintf(bbuf, sizeof bbuf, "%lld", bytes);
			printf("  %-32s %8" PRIu64 " %6s %12s  %s\n", shown, en->step, fbuf, bbuf,
			       status);
			if (detail[0])
				printf("  %-32s %8s %6s %12s    %s\n", "", "", "", "", detail);
			json_array_append_new(rows, json_pack("{s:s, s:s, s:I, s:I, s:I, s:b, s:s, s:s}",
				"directory", en->path, "kind",
				en->kind == CKPT_STEP ? "checkpoint" : en->kind == CKPT_PARTIAL ? "partial"
											: "old",
				"step", (json_int_t)en->step, "files", (json_int_t)files, "bytes",
				(json_int_t)bytes, "ok", ok, "status", status, "detail", detail));
		}
		ckpt_listing_free(&l);
	}
	if (n_ok + n_bad + n_partial == 0)
		printf("  (none)\n");
	printf("checkpoints: %d valid, %d corrupt or unusable, %d partial (incomplete writes, never "
	       "used; `clean --scope checkpoints` removes them)\n", n_ok, n_bad, n_partial);
	if ((rc = app_outputs_ready(a, e)))
		goto out;
	json_t *j = json_pack("{s:s, s:i, s:i, s:i, s:o}", "artifacts", a->artifacts, "valid", n_ok,
			      "corrupt", n_bad, "partial", n_partial, "entries", rows);
	rows = NULL;
	rc = app_write_json(a, "checkpoints.json", j, e);
	json_decref(j);
	if (rc)
		goto out;
	if (n_bad)
		rc = ERR(e, ERR_CHECK, "%d checkpoint%s under %s failed verification (first: %s)", n_bad,
			 n_bad == 1 ? "" : "s", a->artifacts, first_bad);
out:
	json_decref(rows);
	return rc;
}

/* ---- clean ---------------------------------------------------------------------------- */

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

static int add_target(struct target **v, size_t *n, const char *path, struct err *e)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return ERR_OK;
	struct target *nv = realloc(*v, (*n + 1) * sizeof **v);
	if (!nv)
		return ERR(e, ERR_IO, "clean: out of memory");
	*v = nv;
	struct target *t = &nv[(*n)++];
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

/* Whether `path` resolves to `inner` or one of its ancestors (keep it out of "generated"). */
static int holds(const char *path, const char *inner)
{
	char a[PATH_MAX], b[PATH_MAX];
	if (!realpath(path, a) || !realpath(inner, b))
		return 0;
	size_t n = strlen(a);
	return !strcmp(a, b) || (!strncmp(a, b, n) && b[n] == '/');
}

int cmd_clean(struct app *a, struct err *e)
{
	const char *scope = a->o.scope ? a->o.scope : "generated";
	int gen = 0, ck = 0, rc = ERR_OK;
	struct target *v = NULL;
	size_t n = 0;
	char roots[2][FSX_PATH_MAX];

	if (!strcmp(scope, "generated"))
		gen = 1;
	else if (!strcmp(scope, "checkpoints"))
		ck = 1;
	else if (!strcmp(scope, "all"))
		gen = ck = 1;
	else
		return ERR(e, ERR_USAGE, "clean: --scope must be generated, checkpoints or all, not '%s'",
			   scope);
	if ((rc = train_ckpt_root(a, 0, roots[0], sizeof roots[0], e)) ||
	    (rc = train_ckpt_root(a, 1, roots[1], sizeof roots[1], e)))
		return rc;
	if (gen && (rc = refuse_dangerous("outputs", a->outputs, e)))
		return rc;
	if (ck && (rc = refuse_dangerous("artifacts", a->artifacts, e)))
		return rc;

	if (gen && fsx_is_dir(a->outputs)) {
		char **names = NULL;
		size_t count = 0;
		if ((rc = fsx_list_dir(a->outputs, &names, &count, e)))
			return rc;
		for (size_t i = 0; i < count && !rc; i++) {
			char p[FSX_PATH_MAX];
			if ((rc = fsx_join(p, sizeof p, a->outputs, names[i], e)))
				break;
			/* artifacts (and checkpoints) placed inside outputs are not "generated" */
			if (holds(p, a->artifacts) || holds(p, roots[0]) || holds(p, roots[1]))
				continue;
			rc = add_target(&v, &n, p, e);
		}
		fsx_free_names(names, count);
		if (rc)
			goto out;
	}
	if (ck)
		for (int k = 0; k < 2 && !rc; k++)
			rc = add_target(&v, &n, roots[k], e);
	if (rc)
		goto out;

	long long files = 0, bytes = 0;
	for (size_t i = 0; i < n; i++) {
		if (!a->o.dry_run && (rc = fsx_remove_tree(v[i].path, e)))
			goto out;
		printf("clean: %s %s%s (%lld file%s, %lld bytes)\n",
		       a->o.dry_run ? "would remove" : "removed", v[i].path, v[i].is_dir ? "/" : "",
		       v[i].files, v[i].files == 1 ? "" : "s", v[i].bytes);
		files += v[i].files;
		bytes += v[i].bytes;
	}
	printf("clean: scope %s: %s %zu entr%s (%lld files, %lld bytes)%s\n", scope,
	       a->o.dry_run ? "would remove" : "removed", n, n == 1 ? "y" : "ies", files, bytes,
	       a->o.dry_run ? "; nothing was removed (dry run)" : "");
out:
	free(v);
	fflush(stdout);
	return rc;
}
