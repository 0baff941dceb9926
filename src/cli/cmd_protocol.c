/*
 * cmd_protocol: the whole protocol behind `ddptok-run CONFIG`, and its report.
 *
 *   prepare -> check-loss -> reference -> parity (correct + negative controls, dumped)
 *   -> exercise -> empty-window checks -> train to stop_at -> train continuous
 *   -> resume from stop_at -> compare final parameters (must be bit-identical)
 *   -> in exact mode, elastic: resume the same checkpoint on other device counts
 *      (must be bit-identical to the continuous run too)
 *   -> evaluate -> figure -> report (outputs/report.md and report.json)
 *
 * A failed verification (ERR_CHECK) is recorded and the protocol goes on, so the report
 * shows every answer; any other error stops it at once. The exit status is non-zero if
 * any check failed. The report and figure of an earlier run are removed before the first
 * step, so a protocol that stops early never leaves an old verdict behind. The evaluation
 * is of the resumed run's final checkpoint, the one this protocol just wrote, never of
 * whatever else lies under the checkpoint directory.
 *
 * Each step is the command of that name working on a result the protocol keeps (step_*.h,
 * report.h): the report is rendered from those values, never from the files the commands
 * wrote.
 *
 * The steps share their engines (engine_keep.h): one per device count and batch room the
 * protocol needs (the configured devices.world, which the exercise's two ranks reuse
 * when it is 2; exact mode's other device counts), each reset between steps to what a
 * new engine would be, so that every result is the one a new engine gives, bit for bit.
 * The report counts them (report.json "engines").
 */
#include "cmd_protocol.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "signals.h"
#include "engine_keep.h"
#include "fsx.h"
#include "outputs.h"
#include "cmd_evaluate.h"
#include "cmd_prepare.h"
#include "cmd_reference.h"
#include "report.h"
#include "run.h"
#include "step_check_loss.h"
#include "step_elastic.h"
#include "step_exercise.h"
#include "step_parity.h"
#include "train_loop.h"

struct protocol {
	struct report rep; /* what the report shows */
	struct train_result continuous; /* the continuous run's final state, for the resume check */
	char final_ckpt[FSX_PATH_MAX]; /* the resumed run's last checkpoint: what is evaluated */
	char skipped[256]; /* set by a step that skips its work: the reason */
};

/* Runs one step; ERR_CHECK is recorded and swallowed, other errors are returned. */
static int step(struct protocol *p, struct app *a, const char *name,
		int (*fn)(struct app *, struct protocol *, struct err *), struct err *e)
{
	struct report_step *s = &p->rep.steps[p->rep.nsteps++];
	struct err local;
	err_clear(&local);
	env_info(&a->env, "== %s", name);
	double t0 = clock_now_s();
	s->name = name;
	p->skipped[0] = '\0';
	s->rc = fn(a, p, &local);
	s->seconds = clock_now_s() - t0;
	/* a SIGINT / SIGTERM received during a step that is not a training run (those stop
	 * by themselves, with a checkpoint) stops the protocol once that step is done */
	int sig = cli_signal_received();
	if (sig && (s->rc == ERR_OK || s->rc == ERR_CHECK))
		s->rc = ERR(&local, ERR_INTERRUPTED, "interrupted by %s during this step: the "
			    "protocol stops here (no report is written)", env_stop_name(sig));
	snprintf(s->msg, sizeof s->msg, "%.255s", local.msg);
	if (s->rc == ERR_OK)
		snprintf(s->skipped, sizeof s->skipped, "%s", p->skipped);
	if (s->rc == ERR_CHECK) {
		p->rep.failed_checks++;
		fprintf(stderr, "ddptok-run: check failed in %s: %s\n", name, local.msg);
		return ERR_OK;
	}
	if (s->rc != ERR_OK) {
		*e = local;
		err_prefix(e, "%s", name);
	}
	return s->rc;
}

static int do_prepare(struct app *a, struct protocol *p, struct err *e)
{
	return cmd_prepare(a, e);
}

/* A step that computes a result: the report has it once the step ran its check, passed
 * or not. */
static int have(int rc, int *flag)
{
	*flag = rc == ERR_OK || rc == ERR_CHECK;
	return rc;
}

static int do_check_loss(struct app *a, struct protocol *p, struct err *e)
{
	return have(check_loss_step(a, &p->rep.check_loss, e), &p->rep.have_check_loss);
}

static int do_reference(struct app *a, struct protocol *p, struct err *e)
{
	return cmd_reference(a, e);
}

static int do_parity(struct app *a, struct protocol *p, struct err *e)
{
	char dir[FSX_PATH_MAX];
	int rc = fsx_join(dir, sizeof dir, a->s.outputs, output_name(OUT_PARITY_DUMP), e);
	if (rc != ERR_OK)
		return rc;
	return have(parity_step(a, dir, &p->rep.parity, e), &p->rep.have_parity);
}

static int do_exercise(struct app *a, struct protocol *p, struct err *e)
{
	return have(exercise_step(a, &p->rep.exercise, e), &p->rep.have_exercise);
}

static int do_empty(struct app *a, struct protocol *p, struct err *e)
{
	struct empty_window_result *em = &p->rep.empty;
	struct run r;
	int rc = run_open(&a->env, &r, e);
	if (rc == ERR_OK)
		rc = empty_window_run(&r, &a->s, em, e);
	run_close(&r);
	if (rc != ERR_OK)
		return rc;
	env_info(&a->env, "empty window: N = 0 -> %s by all %d ranks, %s", em->declined ? "declined" :
		 "ACCEPTED", em->ranks, em->updated ? "an update was applied" : "no update");
	if (em->local_checked)
		env_info(&a->env, "empty rank: rank 0 without tokens, N = %lld: %zu components outside "
			 "tolerance, max abs error %.3e -> %s", (long long)em->local_N,
			 em->local.outside, em->local.max_abs,
			 em->local.pass ? "matches the reference" : "MISMATCH");
	if (!em->ok)
		return ERR(e, ERR_CHECK, "empty-window checks failed");
	return ERR_OK;
}

static int train_kind(struct app *a, struct protocol *p, enum train_kind kind, const char *resume,
		      struct train_result *res, struct err *e)
{
	struct train_opts o;
	memset(res, 0, sizeof *res); /* the callers free it whatever happens */
	int rc = app_train_opts(a, kind, resume, &o, e);
	if (rc != ERR_OK || (rc = train_run(&a->env, &o, res, e)) != ERR_OK ||
	    (rc = report_write_json(a, OUT_TRAIN_STOP + kind,
				    train_summary_json(kind, res, a->s.world), e)) != ERR_OK)
		return rc;
	int64_t windows = res->step - res->start_step;
	p->rep.training[kind] = (struct report_training){windows, res->seconds, res->tokens_per_s};
	if (kind == TRAIN_CONTINUOUS)
		snprintf(p->rep.backend, sizeof p->rep.backend, "%s", res->backend);
	char empty[64] = "";
	if (res->skipped)
		snprintf(empty, sizeof empty, ", %lld empty", (long long)res->skipped);
	env_info(&a->env, "train (%s): step %lld -> %lld (%lld window%s%s), last loss %.6f, "
		 "%.0f supervised tokens/s; checkpoint %s", output_run_name(kind),
		 (long long)res->start_step, (long long)res->step, (long long)windows,
		 windows == 1 ? "" : "s", empty, res->last_loss, res->tokens_per_s,
		 res->checkpoint[0] ? res->checkpoint : "(none written)");
	return ERR_OK;
}

static int do_train_stop(struct app *a, struct protocol *p, struct err *e)
{
	struct train_result res;
	int rc = train_kind(a, p, TRAIN_STOP, NULL, &res, e);
	if (rc == ERR_OK)
		snprintf(p->rep.stop_ckpt, sizeof p->rep.stop_ckpt, "%s", res.checkpoint);
	train_result_free(&res);
	return rc;
}

static int do_train_continuous(struct app *a, struct protocol *p, struct err *e)
{
	return train_kind(a, p, TRAIN_CONTINUOUS, NULL, &p->continuous, e);
}

static int do_resume(struct app *a, struct protocol *p, struct err *e)
{
	struct train_result res;
	const struct train_result *cont = &p->continuous;
	struct resume_check *rs = &p->rep.resume;
	/* a check that failed in either run (e.g. a non-finite loss) leaves nothing to compare */
	if (!p->rep.stop_ckpt[0] || !cont->params)
		return ERR(e, ERR_CHECK, "no resume comparison: the %s run did not finish",
			   !p->rep.stop_ckpt[0] ? "stopped" : "continuous");
	int rc = train_kind(a, p, TRAIN_RESUME, p->rep.stop_ckpt, &res, e);
	if (rc == ERR_OK) {
		snprintf(p->final_ckpt, sizeof p->final_ckpt, "%s", res.checkpoint);
		resume_compare(res.params, res.momentum, res.step, cont->params, cont->momentum,
			       cont->step, res.n, res.state_n, rs);
	}
	train_result_free(&res);
	if (rc != ERR_OK)
		return rc;
	env_info(&a->env, "resume vs continuous at step %lld: max abs difference %g, %zu of %zu parameters "
		 "differ in any bit, momentum %s -> %s", (long long)rs->step, rs->max_abs_diff,
		 rs->params_differing, rs->n, rs->momentum_differing ? "differs" : "identical",
		 rs->ok ? "bit-identical" : "MISMATCH");
	if (!rs->ok)
		return ERR(e, ERR_CHECK, "the resumed run does not end bit-identical to the continuous "
			   "run (%zu parameters differ, max abs %g)", rs->params_differing,
			   rs->max_abs_diff);
	return ERR_OK;
}

/* Exact mode: the stopped run's checkpoint resumed on other device counts. */
static int do_elastic(struct app *a, struct protocol *p, struct err *e)
{
	int rc = elastic_step(a, p->rep.stop_ckpt, &p->continuous, &p->rep.elastic, e);
	if (rc == ERR_OK && p->rep.elastic.runs == 0)
		snprintf(p->skipped, sizeof p->skipped, "train.shards = %d: no other device count",
			 a->s.shards);
	return have(rc, &p->rep.have_elastic);
}

/* The final checkpoint of this protocol's resumed run, named explicitly: the newest one
 * under the checkpoint directory may come from an earlier run (more updates, another
 * configuration). */
static int do_evaluate(struct app *a, struct protocol *p, struct err *e)
{
	if (!p->final_ckpt[0])
		return ERR(e, ERR_CHECK, "nothing to evaluate: the resumed run wrote no final "
			   "checkpoint");
	int rc = train_evaluate(&a->env, p->final_ckpt, &p->rep.eval, e);
	if (rc == ERR_OK)
		rc = cmd_evaluate_write(a, &p->rep.eval, e);
	p->rep.have_eval = rc == ERR_OK;
	return rc;
}

/* The first executable file `name` in $PATH, into out (0), or -1. */
static int find_in_path(const char *name, char *out, size_t cap)
{
	const char *path = getenv("PATH");
	if (!path || !*path)
		return -1;
	while (*path) {
		size_t len = strcspn(path, ":");
		struct stat st;
		/* an empty entry stands for the current directory */
		int n = len ? snprintf(out, cap, "%.*s/%s", (int)len, path, name)
			    : snprintf(out, cap, "./%s", name);
		if (n > 0 && (size_t)n < cap && stat(out, &st) == 0 && S_ISREG(st.st_mode) &&
		    access(out, X_OK) == 0)
			return 0;
		path += len;
		if (*path == ':')
			path++;
	}
	return -1;
}

/* Whether two paths name the same file once every link is resolved. */
static int same_file(const char *x, const char *y)
{
	char rx[PATH_MAX], ry[PATH_MAX];
	if (!realpath(x, rx) || !realpath(y, ry))
		return strcmp(x, y) == 0;
	return strcmp(rx, ry) == 0;
}

/* Records the figure step as skipped, with its reason, and says so once. */
static void figure_skipped(const struct app *a, struct protocol *p, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void figure_skipped(const struct app *a, struct protocol *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->skipped, sizeof p->skipped, fmt, ap);
	va_end(ap);
	snprintf(p->rep.figure_skipped, sizeof p->rep.figure_skipped, "%s", p->skipped);
	env_info(&a->env, "figure: skipped (%s)", p->skipped);
}

/* Records the figure files plot.py drew. */
static int figure_drawn(const struct app *a, struct protocol *p, struct err *e)
{
	const enum output_id files[2] = {OUT_FIGURE_PNG, OUT_FIGURE_SVG};
	for (int i = 0; i < 2; i++) {
		int rc = fsx_join(p->rep.figures[i], sizeof p->rep.figures[i], a->s.outputs,
				  output_name(files[i]), e);
		if (rc != ERR_OK)
			return rc;
	}
	p->rep.nfigures = 2;
	return ERR_OK;
}

/* tools/plot.py is copied next to the binary by the build. It runs under the python3 found
 * on PATH; plot.py itself hands over to the system's interpreter when that one lacks numpy
 * or matplotlib (exit 3 means neither has them). The system's interpreter is tried here only
 * when no python3 on PATH could be started, and only when it is another file. */
static int do_figure(struct app *a, struct protocol *p, struct err *e)
{
	char exe[PATH_MAX], script[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return ERR(e, ERR_IO, "cannot locate the executable to find tools/plot.py");
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	snprintf(script, sizeof script, "%s/tools/plot.py", exe);
	if (!fsx_exists(script)) {
		figure_skipped(a, p, "%.200s not found", script);
		return ERR_OK;
	}
	static const char system_python[] = "/usr/bin/python3";
	char pythons[2][PATH_MAX];
	int np = 0;
	if (find_in_path("python3", pythons[0], sizeof pythons[0]) == 0)
		np++;
	if (access(system_python, X_OK) == 0 && !(np && same_file(pythons[0], system_python)))
		snprintf(pythons[np++], sizeof pythons[0], "%s", system_python);
	for (int i = 0; i < np; i++) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid < 0)
			return ERR_ERRNO(e, "fork");
		if (pid == 0) {
			/* plot.py names the files it drew: log_level = quiet means no line */
			if (a->s.log_level == 0 && !freopen("/dev/null", "w", stdout))
				_exit(127);
			execl(pythons[i], pythons[i], script, a->s.outputs, (char *)NULL);
			_exit(127);
		}
		int st;
		if (waitpid(pid, &st, 0) < 0)
			return ERR_ERRNO(e, "waitpid");
		int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
		if (code == 0)
			return figure_drawn(a, p, e);
		if (code == 3) {
			figure_skipped(a, p, "numpy or matplotlib is not available to python3");
			return ERR_OK;
		}
		if (code != 127) {
			figure_skipped(a, p, "plot.py failed with exit status %d", code);
			return ERR_OK;
		}
		/* 127: that interpreter could not be started; try the next one */
	}
	figure_skipped(a, p, "no python3 interpreter found");
	return ERR_OK;
}

/* Removes the report and figure of an earlier run, so that outputs never show a verdict
 * that this run did not reach (it writes them again at its end). */
static int remove_old_report(const struct app *a, struct err *e)
{
	for (int i = 0; i < OUT_COUNT; i++) {
		char path[FSX_PATH_MAX];
		if (!outputs_table[i].verdict)
			continue;
		int rc = fsx_join(path, sizeof path, a->s.outputs, outputs_table[i].name, e);
		if (rc != ERR_OK)
			return rc;
		if (unlink(path) != 0 && errno != ENOENT)
			return ERR_ERRNO(e, "cannot remove the previous %s", path);
	}
	return ERR_OK;
}

/* The steps that compute, up to the evaluation (the figure only draws). */
static int protocol_run(struct app *a, struct protocol *p, struct err *e)
{
	int rc;
	if ((rc = step(p, a, "prepare", do_prepare, e)) ||
	    (rc = step(p, a, "check-loss", do_check_loss, e)) ||
	    (rc = step(p, a, "reference", do_reference, e)) ||
	    (rc = step(p, a, "parity", do_parity, e)) ||
	    (rc = step(p, a, "exercise", do_exercise, e)) ||
	    (rc = step(p, a, "empty-window", do_empty, e)) ||
	    (rc = step(p, a, "train (stop)", do_train_stop, e)) ||
	    (rc = step(p, a, "train (continuous)", do_train_continuous, e)) ||
	    (rc = step(p, a, "train (resume)", do_resume, e)) ||
	    (a->s.shards > 0 && (rc = step(p, a, "elastic", do_elastic, e))) ||
	    (rc = step(p, a, "evaluate", do_evaluate, e)))
		return rc;
	return ERR_OK;
}

/* What the steps' engines were, into the report and a line. */
static void engines_counted(const struct app *a, struct protocol *p, const struct engine_keep *k,
			    long created_before)
{
	p->rep.engines_created = (int)(engine_creations() - created_before);
	p->rep.engines_reused = k->reused;
	p->rep.engines_replaced = k->replaced;
	env_info(&a->env, "engines: %d created, %d reuse%s after a reset%s", p->rep.engines_created,
		 k->reused, k->reused == 1 ? "" : "s",
		 k->replaced ? " (a failed one was replaced)" : "");
}

/* The steps, sharing the keep's engines. */
static int protocol_steps(struct app *a, struct protocol *p, struct err *e)
{
	struct engine_keep keep;
	long created_before = engine_creations();
	int rc;
	engine_keep_init(&keep);
	a->env.keep = &keep;
	rc = protocol_run(a, p, e);
	if (rc == ERR_OK)
		engines_counted(a, p, &keep, created_before);
	a->env.keep = NULL;
	engine_keep_close(&keep);
	return rc;
}

int cmd_protocol(struct app *a, struct err *e)
{
	struct protocol p;
	int rc;
	memset(&p, 0, sizeof p);
	if ((rc = settings_check_stop_at(&a->cfg, &a->s, e)) != ERR_OK ||
	    (rc = env_outputs_ready(&a->env, e)) != ERR_OK || (rc = remove_old_report(a, e)) != ERR_OK)
		return rc;
	cli_signals_hold(); /* for the whole protocol: see step() */
	if ((rc = protocol_steps(a, &p, e)) != ERR_OK ||
	    (rc = step(&p, a, "figure", do_figure, e)) != ERR_OK)
		goto out;
	ERR_TRY_GOTO(rc, report_write(a, &p.rep, e), out);
	env_info(&a->env, "== report: %s/%s and %s", a->s.outputs, output_name(OUT_REPORT_MD),
		 output_name(OUT_REPORT_JSON));
	if (p.rep.failed_checks)
		rc = ERR(e, ERR_CHECK, "%d check%s failed (see %s/%s)", p.rep.failed_checks,
			 p.rep.failed_checks == 1 ? "" : "s", a->s.outputs, output_name(OUT_REPORT_MD));
	else
		env_info(&a->env, "protocol: every check passed");
out:
	cli_signals_release();
	train_result_free(&p.continuous);
	parity_result_free(&p.rep.parity);
	return rc;
}
