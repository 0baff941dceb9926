/*
 * cmd_protocol: the whole protocol behind `ddptok-run CONFIG`, and its report.
 *
 *   prepare -> check-loss -> reference -> parity (correct + negative controls, dumped)
 *   -> exercise -> empty-window checks -> train to stop_at -> train continuous
 *   -> resume from stop_at -> compare final parameters (must be bit-identical)
 *   -> evaluate -> figure -> report (outputs/report.md and report.json)
 *
 * A failed verification (ERR_CHECK) is recorded and the protocol goes on, so the report
 * shows every answer; any other error stops it at once. The exit status is non-zero if
 * any check failed. The report and figure of an earlier run are removed before the first
 * step, so a protocol that stops early never leaves an old verdict behind. The evaluation
 * is of the resumed run's final checkpoint, the one this protocol just wrote, never of
 * whatever else lies under the checkpoint directory.
 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "app.h"
#include "cli_signals.h"
#include "fsx.h"
#include "norm.h"
#include "parity.h"
#include "run.h"
#include "train.h"

#define MAX_STEPS 16

struct step_log {
	const char *name;
	double seconds;
	int rc;
	char msg[256];
	char skipped[256]; /* non-empty: the step did not run its work, and why */
};

struct protocol {
	struct step_log steps[MAX_STEPS];
	int nsteps;
	int failed_checks;
	/* answers */
	int empty_rejected_all, empty_ranks, empty_ok;
	int local_empty_pass;
	size_t local_empty_outside;
	double local_empty_max_abs;
	double resume_max_abs;
	size_t resume_bits_differ, n_params;
	int resume_ok;
	struct train_eval ev;
	int have_eval;
	double train_tokens_per_s[3];
	double train_seconds[3];
	int64_t train_steps[3];
	double final_loss[3];
	char stop_ckpt[FSX_PATH_MAX];
	char final_ckpt[FSX_PATH_MAX]; /* the resumed run's last checkpoint: what is evaluated */
	char figure_msg[512];
	char skipped[256]; /* set by a step that skips its work: the reason */
	struct train_result continuous; /* the continuous run's final state, for the resume check */
};

/* Runs one step; ERR_CHECK is recorded and swallowed, other errors are returned. */
static int step(struct protocol *p, struct app *a, const char *name,
		int (*fn)(struct app *, struct protocol *, struct err *), struct err *e)
{
	struct step_log *s = &p->steps[p->nsteps++];
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
		p->failed_checks++;
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

static int do_check_loss(struct app *a, struct protocol *p, struct err *e)
{
	return cmd_check_loss(a, e);
}

static int do_reference(struct app *a, struct protocol *p, struct err *e)
{
	return cmd_reference(a, e);
}

static int do_parity(struct app *a, struct protocol *p, struct err *e)
{
	char dir[FSX_PATH_MAX];
	int rc = fsx_join(dir, sizeof dir, a->s.outputs, "parity", e);
	if (rc != ERR_OK)
		return rc;
	const char *keep = a->o.dump_dir;
	a->o.dump_dir = dir;
	rc = cmd_parity(a, e);
	a->o.dump_dir = keep;
	return rc;
}

static int do_exercise(struct app *a, struct protocol *p, struct err *e)
{
	return cmd_exercise(a, e);
}

/* A globally empty window must be declined by every rank together (no hang, no rank
 * inside a collective the others skip); a rank without tokens while N > 0 must still
 * take part and the gradient must match the reference. */
static int do_empty(struct app *a, struct protocol *p, struct err *e)
{
	struct run r;
	struct window_result res;
	float *ref = NULL;
	double loss;
	int rc = run_open(&a->env, &r, e);
	if (rc != ERR_OK)
		return rc;
	int W = a->s.world, M = a->s.accumulation;
	int counts[PLAN_MAX_WORLD * PLAN_MAX_MICRO];
	memset(counts, 0, sizeof counts);
	if ((rc = window_assign(&r.w, &r.corpus, NULL, counts, e)) != ERR_OK)
		goto out;
	if ((rc = engine_window(r.eng, &r.w, NORM_GLOBAL_TOKEN, ENGINE_UPDATE, &res, e)) != ERR_OK)
		goto out;
	p->empty_rejected_all = res.rejected && r.eng->updates_done == 0;
	p->empty_ranks = W;
	env_info(&a->env, "empty window: N = 0 -> %s by all %d ranks, %s", res.rejected ? "declined" :
		 "ACCEPTED", W, r.eng->updates_done == 0 ? "no update" : "an update was applied");
	/* locally empty rank: rank 0 gets nothing, the others one sequence per microbatch */
	if (W > 1) {
		int ids[PLAN_MAX_WORLD * PLAN_MAX_MICRO], k = 0;
		for (int q = 0; q < W; q++)
			for (int m = 0; m < M; m++) {
				counts[q * M + m] = q == 0 ? 0 : 1;
				if (q)
					ids[k] = k, k++;
			}
		if ((rc = window_assign(&r.w, &r.corpus, ids, counts, e)) != ERR_OK)
			goto out;
		size_t n = r.eng->shape.n_params;
		if (!(ref = malloc(n * sizeof(float)))) {
			rc = ERR(e, ERR_DEVICE, "out of memory");
			goto out;
		}
		struct parity_stats st;
		if ((rc = engine_set_state(r.eng, r.init_params, NULL, 0, e)) != ERR_OK ||
		    (rc = engine_reference(r.eng, &r.w, ref, &loss, e)) != ERR_OK ||
		    (rc = engine_window(r.eng, &r.w, NORM_GLOBAL_TOKEN, ENGINE_CAPTURE_REDUCED, &res,
					e)) != ERR_OK)
			goto out;
		parity_compare(r.eng->host_reduced, ref, n, a->s.atol, a->s.rtol, &st);
		p->local_empty_pass = st.pass;
		p->local_empty_outside = st.outside;
		p->local_empty_max_abs = st.max_abs;
		env_info(&a->env, "empty rank: rank 0 without tokens, N = %lld: %zu components outside "
			 "tolerance, max abs error %.3e -> %s", (long long)r.w.N, st.outside, st.max_abs,
			 st.pass ? "matches the reference" : "MISMATCH");
	} else {
		p->local_empty_pass = 1;
	}
	p->empty_ok = p->empty_rejected_all && p->local_empty_pass;
	if (!p->empty_ok)
		rc = ERR(e, ERR_CHECK, "empty-window checks failed");
out:
	free(ref);
	run_close(&r);
	return rc;
}

static const char *const run_names[3] = {"stop", "continuous", "resume"};

static int train_kind(struct app *a, struct protocol *p, enum train_kind kind, const char *resume,
		      struct train_result *res, struct err *e)
{
	struct train_opts o;
	memset(res, 0, sizeof *res); /* the callers free it whatever happens */
	int rc = app_train_opts(a, kind, resume, &o, e);
	if (rc != ERR_OK)
		return rc;
	rc = train_run(&a->env, &o, res, e);
	if (rc == ERR_OK) {
		p->train_tokens_per_s[kind] = res->tokens_per_s;
		p->train_seconds[kind] = res->seconds;
		p->train_steps[kind] = res->step - res->start_step;
		p->final_loss[kind] = res->last_loss;
		char empty[64] = "";
		if (res->skipped)
			snprintf(empty, sizeof empty, ", %lld empty", (long long)res->skipped);
		env_info(&a->env, "train (%s): step %lld -> %lld (%lld window%s%s), last loss %.6f, "
			 "%.0f supervised tokens/s; checkpoint %s", run_names[kind],
			 (long long)res->start_step, (long long)res->step,
			 (long long)(res->step - res->start_step),
			 res->step - res->start_step == 1 ? "" : "s", empty, res->last_loss,
			 res->tokens_per_s, res->checkpoint[0] ? res->checkpoint : "(none written)");
	}
	return rc;
}

static int do_train_stop(struct app *a, struct protocol *p, struct err *e)
{
	struct train_result res;
	int rc = train_kind(a, p, TRAIN_STOP, NULL, &res, e);
	if (rc == ERR_OK)
		snprintf(p->stop_ckpt, sizeof p->stop_ckpt, "%s", res.checkpoint);
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
	const struct train_result *continuous_res = &p->continuous;
	/* a check that failed in either run (e.g. a non-finite loss) leaves nothing to compare */
	if (!p->stop_ckpt[0] || !continuous_res->params)
		return ERR(e, ERR_CHECK, "no resume comparison: the %s run did not finish",
			   !p->stop_ckpt[0] ? "stopped" : "continuous");
	int rc = train_kind(a, p, TRAIN_RESUME, p->stop_ckpt, &res, e);
	if (rc != ERR_OK) {
		train_result_free(&res);
		return rc;
	}
	snprintf(p->final_ckpt, sizeof p->final_ckpt, "%s", res.checkpoint);
	p->n_params = res.n;
	p->resume_max_abs = train_max_abs_diff(res.params, continuous_res->params, res.n,
					       &p->resume_bits_differ);
	size_t mom_differ = 0;
	train_max_abs_diff(res.momentum, continuous_res->momentum, res.n, &mom_differ);
	p->resume_ok = p->resume_bits_differ == 0 && mom_differ == 0 &&
		       res.step == continuous_res->step;
	env_info(&a->env, "resume vs continuous at step %lld: max abs difference %g, %zu of %zu parameters "
		 "differ in any bit, momentum %s -> %s", (long long)res.step, p->resume_max_abs,
		 p->resume_bits_differ, res.n, mom_differ ? "differs" : "identical",
		 p->resume_ok ? "bit-identical" : "MISMATCH");
	train_result_free(&res);
	if (!p->resume_ok)
		return ERR(e, ERR_CHECK, "the resumed run does not end bit-identical to the continuous "
			   "run (%zu parameters differ, max abs %g)", p->resume_bits_differ,
			   p->resume_max_abs);
	return ERR_OK;
}

/* The final checkpoint of this protocol's resumed run, named explicitly: the newest one
 * under the checkpoint directory may come from an earlier run (more updates, another
 * configuration). */
static int do_evaluate(struct app *a, struct protocol *p, struct err *e)
{
	if (!p->final_ckpt[0])
		return ERR(e, ERR_CHECK, "nothing to evaluate: the resumed run wrote no final "
			   "checkpoint");
	int rc = train_evaluate(&a->env, p->final_ckpt, &p->ev, e);
	if (rc == ERR_OK)
		rc = cmd_evaluate_write(a, &p->ev, e);
	p->have_eval = rc == ERR_OK;
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
	snprintf(p->figure_msg, sizeof p->figure_msg, "skipped (%s)", p->skipped);
	env_info(&a->env, "figure: %s", p->figure_msg);
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
			execl(pythons[i], pythons[i], script, a->s.outputs, (char *)NULL);
			_exit(127);
		}
		int st;
		if (waitpid(pid, &st, 0) < 0)
			return ERR_ERRNO(e, "waitpid");
		int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
		if (code == 0) {
			snprintf(p->figure_msg, sizeof p->figure_msg, "%.400s/figure.png and figure.svg",
				 a->s.outputs);
			return ERR_OK;
		}
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

static json_t *load_json(struct app *a, const char *name)
{
	char path[FSX_PATH_MAX];
	struct err e;
	err_clear(&e);
	if (fsx_join(path, sizeof path, a->s.outputs, name, &e) != ERR_OK)
		return NULL;
	return json_load_file(path, 0, NULL);
}

/* a number written by parity_json_number: null stands for NaN/infinity */
static double json_number_or_nan(const json_t *v)
{
	return json_is_number(v) ? json_number_value(v) : NAN;
}

static int write_report(struct app *a, struct protocol *p, struct err *e)
{
	json_t *parity = load_json(a, "parity.json");
	json_t *exercise = load_json(a, "exercise.json");
	json_t *check = load_json(a, "check-loss.json");
	char *md = NULL;
	size_t mdlen = 0;
	FILE *f = open_memstream(&md, &mdlen);
	int rc = ERR_OK;
	if (!f) {
		rc = ERR_ERRNO(e, "open_memstream");
		goto out;
	}

	fprintf(f, "# ddptok report\n\n");
	fprintf(f, "Configuration `%s`: W = %d ranks, accumulation %d, batch %d sequences per rank "
		"and microbatch, reduce %s, plan %s, layout %s, normalization %s, backend %s.\n\n",
		a->cfg.path, a->s.world, a->s.accumulation, a->s.batch_size,
		a->s.reduce ? "avg" : "sum", a->s.plan == PLAN_BALANCED ? "balanced" : "length_bands",
		a->s.layout == LAYOUT_PADDED ? "padded" : "packed", norm_mode_name(a->s.normalization),
		p->continuous.backend[0] ? p->continuous.backend : "?");
	fprintf(f, "Overall: **%s** (%d failed check%s).\n\n", p->failed_checks ? "FAIL" : "PASS",
		p->failed_checks, p->failed_checks == 1 ? "" : "s");

	fprintf(f, "## 1. Does the W-device gradient match the single-device reference?\n\n");
	if (check)
		fprintf(f, "Counterexample (check-loss): local sums 12 and 108 over 12 and 36 tokens: "
			"mean of means %g, global token mean %g.\n\n",
			json_real_value(json_object_get(check, "mean_of_means")),
			json_real_value(json_object_get(check, "global_mean")));
	if (parity) {
		json_t *w = json_object_get(parity, "window");
		fprintf(f, "Window 1, N = %lld supervised tokens (per rank:",
			(long long)json_integer_value(json_object_get(parity, "N")));
		size_t i;
		json_t *rk;
		json_array_foreach(json_object_get(w, "ranks"), i, rk)
			fprintf(f, " %lld", (long long)json_integer_value(json_object_get(rk, "tokens")));
		fprintf(f, "); every component compared with |g - ref| <= %g + %g |ref|.\n\n",
			json_real_value(json_object_get(parity, "atol")),
			json_real_value(json_object_get(parity, "rtol")));
		fprintf(f, "| normalization | components | max abs error | max rel error | outside "
			"tolerance | result |\n|---|---:|---:|---:|---:|---|\n");
		json_t *m;
		json_array_foreach(json_object_get(parity, "modes"), i, m) {
			int pass = json_is_true(json_object_get(m, "pass"));
			int neg = json_is_true(json_object_get(m, "negative_control"));
			int dist = json_is_true(json_object_get(m, "distinguishable"));
			const char *verdict = !neg ? (pass ? "pass (expected)" : "FAIL")
					      : !dist ? "same as global_token on this window"
					      : pass ? "NOT CAUGHT" : "fails: caught";
			/* the command's own verdict also knows the controls too close to be required */
			if (json_is_string(json_object_get(m, "verdict")))
				verdict = json_string_value(json_object_get(m, "verdict"));
			fprintf(f, "| %s | %lld | %.3e | %.3e | %lld | %s |\n",
				json_string_value(json_object_get(m, "normalization")),
				(long long)json_integer_value(json_object_get(m, "components")),
				json_number_or_nan(json_object_get(m, "max_abs_err")),
				json_number_or_nan(json_object_get(m, "max_rel_err")),
				(long long)json_integer_value(json_object_get(m, "outside")), verdict);
		}
		fprintf(f, "\n");
	}
	fprintf(f, "Empty windows: a window with N = 0 was %s by all %d ranks together%s. A rank "
		"with no token while N > 0 %s the reference (%zu components outside tolerance, "
		"max abs error %.3e).\n\n", p->empty_rejected_all ? "declined" : "NOT declined",
		p->empty_ranks, p->empty_rejected_all ? " (no update, no hang)" : "",
		p->local_empty_pass ? "still matches" : "does NOT match", p->local_empty_outside,
		p->local_empty_max_abs);
	if (exercise) {
		size_t i;
		json_t *c;
		fprintf(f, "Exercise (rank 0 keeps its tokens, rank 1 grows):\n\n| tokens r0 / r1 | "
			"mean of means | global mean | gradient difference (L2) |\n|---|---:|---:|---:|\n");
		json_array_foreach(json_object_get(exercise, "cases"), i, c) {
			json_t *t = json_object_get(c, "tokens");
			fprintf(f, "| %lld / %lld | %.6f | %.6f | %.3e |\n",
				(long long)json_integer_value(json_array_get(t, 0)),
				(long long)json_integer_value(json_array_get(t, 1)),
				json_real_value(json_object_get(c, "mean_of_means")),
				json_real_value(json_object_get(c, "global_mean")),
				json_real_value(json_object_get(c, "grad_diff_l2")));
		}
		fprintf(f, "\n");
	}

	fprintf(f, "## 2. Does a resumed run end exactly where a continuous run ends?\n\n");
	fprintf(f, "Stopped at step %lld (checkpoint `%s`), resumed to %lld, compared with a "
		"continuous run over %zu parameters: max abs difference **%g**, %zu parameters differ "
		"in any bit: **%s**.\n\n", (long long)a->s.stop_at, p->stop_ckpt,
		(long long)a->s.updates, p->n_params, p->resume_max_abs, p->resume_bits_differ,
		p->resume_ok ? "bit-identical" : "MISMATCH");

	fprintf(f, "## 3. What does the trained model achieve on the test split?\n\n");
	if (p->have_eval) {
		const struct train_split_eval *t = &p->ev.test, *v = &p->ev.validation;
		fprintf(f, "| split | sequences | supervised tokens | loss (token mean) | token "
			"accuracy | best constant guess |\n|---|---:|---:|---:|---:|---:|\n");
		fprintf(f, "| test | %lld | %lld | %.5f | %.2f%% | %.2f%% |\n", (long long)t->sequences,
			(long long)t->tokens, t->loss, 100 * t->accuracy, 100 * t->const_accuracy);
		fprintf(f, "| validation | %lld | %lld | %.5f | %.2f%% | %.2f%% |\n",
			(long long)v->sequences, (long long)v->tokens, v->loss, 100 * v->accuracy,
			100 * v->const_accuracy);
		fprintf(f, "\nAfter %lld updates (checkpoint `%s`). The constant guess always predicts "
			"id %d, the most frequent training target.\n\n", (long long)p->ev.step,
			p->ev.checkpoint, p->ev.const_id);
	}

	fprintf(f, "## Timing\n\n| step | seconds | result |\n|---|---:|---|\n");
	for (int i = 0; i < p->nsteps; i++) {
		const struct step_log *s = &p->steps[i];
		if (s->skipped[0])
			fprintf(f, "| %s | %.2f | skipped (%s) |\n", s->name, s->seconds, s->skipped);
		else
			fprintf(f, "| %s | %.2f | %s |\n", s->name, s->seconds, err_code_name(s->rc));
	}
	fprintf(f, "\nTraining throughput: ");
	for (int k = 0; k < 3; k++)
		fprintf(f, "%s%s %lld windows, %.0f supervised tokens/s", k ? "; " : "", run_names[k],
			(long long)p->train_steps[k], p->train_tokens_per_s[k]);
	fprintf(f, ".\n\nFigure: %s.\n\n", p->figure_msg[0] ? p->figure_msg : "not drawn");
	fprintf(f, "## What this does not show\n\nOne process on one host; the resume happens at "
		"a window boundary chosen by the protocol, not at an arbitrary instant of a "
		"preempted run; no multi-node rendezvous, no recovery policy. See README, "
		"\"Limits\".\n");
	fclose(f);

	char path[FSX_PATH_MAX];
	if ((rc = fsx_join(path, sizeof path, a->s.outputs, "report.md", e)) == ERR_OK)
		rc = fsx_write_atomic(path, md, mdlen, e);
	free(md);
	if (rc != ERR_OK)
		goto out;

	json_t *steps = json_array();
	for (int i = 0; i < p->nsteps; i++) {
		const struct step_log *s = &p->steps[i];
		json_t *js = json_pack("{s:s, s:f, s:s}", "name", s->name, "seconds", s->seconds,
				       "result", s->skipped[0] ? "skipped" : err_code_name(s->rc));
		if (s->skipped[0])
			json_object_set_new(js, "reason", json_string(s->skipped));
		json_array_append_new(steps, js);
	}
	json_t *j = json_pack("{s:b, s:i, s:O?, s:O?, s:O?, s:{s:b, s:b, s:I, s:o}, "
			      "s:{s:I, s:I, s:o, s:I, s:b}, s:o, s:s}",
		"ok", p->failed_checks == 0, "failed_checks", p->failed_checks,
		"check_loss", check, "parity", parity, "exercise", exercise,
		"empty_window", "declined_by_all_ranks", p->empty_rejected_all,
		"local_empty_rank_matches", p->local_empty_pass, "local_empty_outside",
		(json_int_t)p->local_empty_outside, "local_empty_max_abs",
		parity_json_number(p->local_empty_max_abs),
		"resume", "stop_at", (json_int_t)a->s.stop_at, "updates", (json_int_t)a->s.updates,
		"max_abs_diff", parity_json_number(p->resume_max_abs), "params_differing",
		(json_int_t)p->resume_bits_differ, "bit_identical", p->resume_ok,
		"steps", steps, "figure", p->figure_msg);
	if (p->have_eval) {
		const struct train_split_eval *t = &p->ev.test;
		json_object_set_new(j, "test", json_pack("{s:I, s:I, s:f, s:f, s:f, s:I}", "sequences",
			(json_int_t)t->sequences, "tokens", (json_int_t)t->tokens, "loss", t->loss,
			"accuracy", t->accuracy, "constant_guess_accuracy", t->const_accuracy, "step",
			(json_int_t)p->ev.step));
		json_object_set_new(j, "evaluated_checkpoint", json_string(p->ev.checkpoint));
	}
	json_t *tp = json_object();
	for (int k = 0; k < 3; k++)
		json_object_set_new(tp, run_names[k], json_pack("{s:I, s:f, s:f}", "windows",
			(json_int_t)p->train_steps[k], "seconds", p->train_seconds[k], "tokens_per_s",
			p->train_tokens_per_s[k]));
	json_object_set_new(j, "training", tp);
	rc = env_write_json(&a->env, "report.json", j, e);
	json_decref(j);
out:
	json_decref(parity);
	json_decref(exercise);
	json_decref(check);
	return rc;
}

/* Removes the report and figure of an earlier run, so that outputs never show a verdict
 * that this run did not reach (it writes them again at its end). */
static int remove_old_report(const struct app *a, struct err *e)
{
	static const char *const names[] = {"report.md", "report.json", "figure.png", "figure.svg"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		char path[FSX_PATH_MAX];
		int rc = fsx_join(path, sizeof path, a->s.outputs, names[i], e);
		if (rc != ERR_OK)
			return rc;
		if (unlink(path) != 0 && errno != ENOENT)
			return ERR_ERRNO(e, "cannot remove the previous %s", path);
	}
	return ERR_OK;
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
	if ((rc = step(&p, a, "prepare", do_prepare, e)) ||
	    (rc = step(&p, a, "check-loss", do_check_loss, e)) ||
	    (rc = step(&p, a, "reference", do_reference, e)) ||
	    (rc = step(&p, a, "parity", do_parity, e)) ||
	    (rc = step(&p, a, "exercise", do_exercise, e)) ||
	    (rc = step(&p, a, "empty-window", do_empty, e)) ||
	    (rc = step(&p, a, "train (stop)", do_train_stop, e)) ||
	    (rc = step(&p, a, "train (continuous)", do_train_continuous, e)) ||
	    (rc = step(&p, a, "train (resume)", do_resume, e)) ||
	    (rc = step(&p, a, "evaluate", do_evaluate, e)) ||
	    (rc = step(&p, a, "figure", do_figure, e)))
		goto out;
	if ((rc = write_report(a, &p, e)) != ERR_OK)
		goto out;
	env_info(&a->env, "== report: %s/report.md and report.json", a->s.outputs);
	if (p.failed_checks)
		rc = ERR(e, ERR_CHECK, "%d check%s failed (see %s/report.md)", p.failed_checks,
			 p.failed_checks == 1 ? "" : "s", a->s.outputs);
	else
		env_info(&a->env, "protocol: every check passed");
out:
	cli_signals_release();
	train_result_free(&p.continuous);
	return rc;
}
