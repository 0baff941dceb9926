/*
 * cmd_inspect: an interactive prompt to step through training one window at a time and
 * look at the gradients it produces.
 *
 * The session opens the same state as the trainer (the prepared corpus, the sampler, the
 * engine with the seeded parameters, or the state of a checkpoint with --resume, which
 * is verified as a resume of the trainer would) and then reads commands, one per line:
 * `window` shows the next window and the factor c each rank will use, `step` runs windows
 * with updates, `grad` prints per-tensor statistics or chosen components of the last
 * window's reduced or local gradient, `compare` recomputes that window's reduced gradient
 * (or one rank's contribution) under any normalization and sets it against the
 * single-device reference (or that rank's share of it), `mode` switches the
 * normalization, `dump` writes tensors as .npy, `save` checkpoints, `eval` measures the
 * test split. The session holds the trainer itself (trainer.h): `step` is trainer_step,
 * the step `train` takes, and `save` is trainer_checkpoint, so a checkpoint of the same
 * step is the same, byte for byte, whichever of the two wrote it.
 *
 * `compare` must never change the training trajectory: before every window the session
 * keeps a host copy of the parameters and momentum, the comparison runs from that copy
 * without an update, and afterwards the state in force is uploaded again (and read back
 * to prove it is unchanged).
 *
 * On a terminal the prompt has line editing and history (libedit); otherwise lines are
 * read plainly so the session can be scripted. Either way the wait for input also ends
 * on a signal: SIGINT drops the line (a second within a second ends the session), SIGTERM
 * ends it (ERR_INTERRUPTED, as a stopped train). A mistake in a command prints a message
 * and the session goes on; a failure to read the input or a device/runtime failure ends
 * it with an error. A scripted session (stdin not a terminal) that met a mistake ends
 * with the first one's code (the exit status is not 0), so that a script can serve as a
 * check.
 *
 * The prompt's line reader is inspect_line.c; the arithmetic and the report of `compare`
 * are inspect_compare.c.
 */
#include "cmd_inspect.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "signals.h"
#include "clock.h"
#include "coll.h"
#include "fsx.h"
#include "inspect_compare.h"
#include "inspect_line.h"
#include "jsonx.h"
#include "norm.h"
#include "npy.h"
#include "outputs.h"
#include "parity.h"
#include "run.h"
#include "trainer.h"

#define INSPECT_MAX_ARGS 16
#define INSPECT_MAX_STEPS 1000000L
#define INSPECT_FIRST_VALUES 4
#define INSPECT_SIGINT_TWICE_S 1.0 /* a second SIGINT this soon after one ends the session */

struct inspect {
	struct app *a;
	struct trainer t;         /* the run: state, step count, histories, normalization */
	struct window extra;      /* the second window buffer (the first is t.r.w) */
	int have_extra;
	struct window *last;      /* the last stepped window */
	struct window *draw;      /* scratch: the next draw, or a peek at it */
	int have_last;
	int last_mode;            /* the normalization the last window used */
	struct window_result last_res;
	size_t n;
	/* the state at the start of the last window, and a scratch pair for the next one */
	float *before_p, *before_m, *next_p, *next_m;
	int64_t before_updates;
	/* the last window's gradients (engine host buffers are reused by compare) */
	float *last_reduced;
	float *last_local[MAX_WORLD];
	/* scratch */
	float *cur_p, *cur_m, *check_p, *ref, *contrib;
	int64_t last_step;        /* the step number of the last window */
	int fatal;                /* a device/runtime failure: the session ends */
	int noted_end;            /* told once that [train] updates was passed */
};

/* A device or runtime call: a failure ends the session with its code. */
#define DEV(in, call)                          \
	do {                                   \
		int rc_ = (call);              \
		if (rc_ != ERR_OK) {           \
			(in)->fatal = 1;       \
			return rc_;            \
		}                              \
	} while (0)

/* ------------------------------------------------------------------ helpers */

/* Strict positive integer: digits only, no sign, no leading zero, at most max. */
static int parse_count(const char *s, long max, long *out)
{
	long v = 0;
	if (!s || !*s || s[0] == '0')
		return -1;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
		if (v > max)
			return -1;
	}
	*out = v;
	return 0;
}

static int parse_rank(const char *s, int world, int *out, struct err *e)
{
	long v;
	if (s && strcmp(s, "0") == 0)
		v = 0;
	else if (parse_count(s, 1000000L, &v) != 0)
		return ERR(e, ERR_USAGE, "'%s' is not a rank number", s ? s : "");
	if (v >= world)
		return ERR(e, ERR_USAGE, "rank %ld is out of range (W = %d: ranks 0..%d)", v, world,
			   world - 1);
	*out = (int)v;
	return ERR_OK;
}

static const char *reduce_name(const struct app *a)
{
	return coll_op_name(a->s.reduce);
}

static void swap_windows(struct inspect *in)
{
	struct window *t = in->last;
	in->last = in->draw;
	in->draw = t;
}

/* The next window in in->draw, leaving the sampler where it was. */
static int peek_next(struct inspect *in, struct err *e)
{
	struct sampler_state st;
	sampler_get_state(&in->t.r.sampler, &st);
	int rc = sampler_next(&in->t.r.sampler, in->draw, e);
	sampler_set_state(&in->t.r.sampler, &st);
	if (rc != ERR_OK)
		in->fatal = 1;
	return rc;
}

static void shape_text(const struct param_info *p, char *out, size_t cap)
{
	if (p->cols == 1)
		snprintf(out, cap, "%d", p->rows);
	else
		snprintf(out, cap, "%dx%d", p->rows, p->cols);
}

static int find_param(const struct model_shape *m, const char *name)
{
	for (int t = 0; t < m->n_tensors; t++)
		if (strcmp(m->p[t].name, name) == 0)
			return t;
	return -1;
}

static void param_names(const struct model_shape *m, char *out, size_t cap)
{
	size_t len = 0;
	out[0] = '\0';
	for (int t = 0; t < m->n_tensors && len < cap; t++)
		len += snprintf(out + len, cap - len, "%s%s", t ? ", " : "", m->p[t].name);
}

/* The formula of norm_factor for a mode, with the symbols of norm.h. */
static const char *factor_formula(int mode)
{
	switch (mode) {
	case NORM_GLOBAL_TOKEN: return "c = k / N";
	case NORM_MEAN_OF_MEANS: return "c = k / (W * N_rank)";
	case NORM_MICROBATCH_MEAN: return "c = k / (W * M * N_micro)";
	case NORM_DOUBLE_ACCUM: return "c = k / (N * M)";
	default: return "?";
	}
}

/* The same formula with this microbatch's numbers. */
static void factor_numbers(int mode, double k, int W, int M, int64_t N, int64_t nr, int64_t nm,
			   char *out, size_t cap)
{
	switch (mode) {
	case NORM_GLOBAL_TOKEN:
		snprintf(out, cap, "%g / %lld", k, (long long)N);
		break;
	case NORM_MEAN_OF_MEANS:
		snprintf(out, cap, "%g / (%d * %lld)", k, W, (long long)nr);
		break;
	case NORM_MICROBATCH_MEAN:
		snprintf(out, cap, "%g / (%d * %d * %lld)", k, W, M, (long long)nm);
		break;
	case NORM_DOUBLE_ACCUM:
		snprintf(out, cap, "%g / (%lld * %d)", k, (long long)N, M);
		break;
	default:
		snprintf(out, cap, "?");
	}
}

/* ---------------------------------------------------------------- window */

static int do_window(struct inspect *in, int argc, char **argv, struct err *e)
{
	struct app *a = in->a;
	int rc;
	if (argc > 1)
		return ERR(e, ERR_USAGE, "window takes no argument");
	if ((rc = peek_next(in, e)) != ERR_OK)
		return rc;
	const struct window *w = in->draw;
	int avg = a->s.reduce == COLL_AVG;
	double k = norm_divisor(avg, w->world, a->s.shards);
	printf("window: next window %lld (step %lld, not consumed), W = %d, M = %d microbatches "
	       "per rank, plan %s, mode %s, reduce %s\n", window_number(w),
	       (long long)in->t.step + 1, w->world, w->micro, rank_split_name(a->s.rank_split),
	       norm_mode_name(in->t.mode), reduce_name(a));
	for (int r = 0; r < w->world; r++)
		for (int m = 0; m < w->rank_micro[r]; m++) {
			const struct microbatch *mb = &w->mb[r][m];
			char ids[1024], nums[160];
			size_t len = 0;
			ids[0] = '\0';
			for (int j = 0; j < mb->n && len < sizeof ids; j++)
				len += snprintf(ids + len, sizeof ids - len, "%s%d", j ? " " : "",
						mb->ids[j]);
			double c = norm_factor_k(in->t.mode, k, w->world, w->rank_micro[r], w->N,
						 w->rank_tokens[r], mb->tokens);
			factor_numbers(in->t.mode, k, w->world, w->rank_micro[r], w->N, w->rank_tokens[r],
				       mb->tokens, nums, sizeof nums);
			printf("window: rank %d microbatch %d: sequences [%s], %lld supervised tokens, "
			       "c = %s = %.6e%s\n", r, m, ids, (long long)mb->tokens, nums, c,
			       c == 0.0 ? " (no token here: no contribution)" : "");
		}
	for (int r = 0; r < w->world; r++)
		printf("window: rank %d: %lld supervised tokens\n", r, (long long)w->rank_tokens[r]);
	printf("window: N = %lld (sum over ranks of supervised tokens:", (long long)w->N);
	for (int r = 0; r < w->world; r++)
		printf("%s%lld", r ? " + " : " ", (long long)w->rank_tokens[r]);
	printf(")\n");
	printf("window: factor under %s: %s, with k = %g because reduce = %s %s\n",
	       norm_mode_name(in->t.mode), factor_formula(in->t.mode), k, reduce_name(a),
	       !avg ? "does not divide" : a->s.shards > 0 ? "divides the root of exact mode's "
	       "tree by its K shards" : "divides the summed gradients by W");
	printf("window: why: rank r backpropagates c * (sum of its token losses) for each "
	       "microbatch; after the reduce a token weighs c / k\n");
	if (w->N == 0) {
		printf("window: this window has no supervised token: every rank will reject it "
		       "(empty_window = %s)\n", a->s.empty_window == EMPTY_ERROR ? "error" : "skip");
		return ERR_OK;
	}
	printf("window: the window's token mean needs every token to weigh 1 / N = %.6e\n",
	       1.0 / (double)w->N);
	int off = 0;
	for (int r = 0; r < w->world; r++)
		for (int m = 0; m < w->rank_micro[r]; m++) {
			const struct microbatch *mb = &w->mb[r][m];
			if (mb->tokens == 0)
				continue;
			double c = norm_factor_k(in->t.mode, k, w->world, w->rank_micro[r], w->N,
						 w->rank_tokens[r], mb->tokens);
			double ratio = c / k * (double)w->N;
			if (fabs(ratio - 1.0) > 1e-12) {
				printf("window: rank %d microbatch %d: a token weighs %.6e = %.4f x 1 / N\n",
				       r, m, c / k, ratio);
				off = 1;
			}
		}
	printf("window: %s\n", off ? "this mode weighs tokens unequally on this window: its gradient "
				   "is not the gradient of the window's token mean"
				 : "every token weighs 1 / N: the reduced gradient is the gradient of "
				   "the window's token mean");
	return ERR_OK;
}

/* ------------------------------------------------------------------ step */

/* Keeps the window just stepped, the state at its start and its gradients, for grad,
 * compare and dump. */
static void keep_window(struct inspect *in, const struct window_result *res,
			int64_t updates_before)
{
	struct engine *eng = in->t.r.eng;
	swap_windows(in);
	float *t = in->before_p;
	in->before_p = in->next_p;
	in->next_p = t;
	t = in->before_m;
	in->before_m = in->next_m;
	in->next_m = t;
	in->before_updates = updates_before;
	memcpy(in->last_reduced, eng->host_reduced, in->n * sizeof(float));
	for (int r = 0; r < eng->world; r++)
		memcpy(in->last_local[r], eng->host_local[r], in->n * sizeof(float));
	in->last_res = *res;
	in->last_mode = in->t.mode;
	in->last_step = in->t.step;
	in->have_last = 1;
}

/* One window through the trainer's own step (trainer_step), as `train` runs it. */
static int step_once(struct inspect *in, struct err *e)
{
	struct app *a = in->a;
	struct engine *eng = in->t.r.eng;
	struct window_result res;
	int64_t updates_before = eng->updates_done;
	DEV(in, engine_get_state(eng, in->next_p, in->next_m, e));
	int rc = trainer_step(&in->t, in->draw, ENGINE_CAPTURE_LOCAL | ENGINE_CAPTURE_REDUCED,
			      &res, e);
	if (rc == ERR_EMPTY) { /* the window stays the next one; the session goes on */
		err_prefix(e, "step");
		return rc;
	}
	DEV(in, rc);
	if (res.rejected) {
		printf("step %lld: window %lld skipped: no supervised token (empty_window = skip), "
		       "no update\n", (long long)in->t.step, window_number(in->draw));
		return ERR_OK;
	}
	keep_window(in, &res, updates_before);
	printf("step %lld: window %lld, loss %.6f (global token mean), N = %lld, grad norm %.6e "
	       "[mode %s]\n", (long long)in->t.step, window_number(in->last), res.loss,
	       (long long)res.N, res.grad_norm, norm_mode_name(in->t.mode));
	if (!in->noted_end && in->t.step >= a->s.updates) {
		printf("step: note: [train] updates = %d reached; further steps go beyond the "
		       "configured run\n", a->s.updates);
		in->noted_end = 1;
	}
	return ERR_OK;
}

static int do_step(struct inspect *in, int argc, char **argv, struct err *e)
{
	long k = 1;
	if (argc > 2)
		return ERR(e, ERR_USAGE, "step takes at most one argument (a number of windows)");
	if (argc == 2 && parse_count(argv[1], INSPECT_MAX_STEPS, &k) != 0)
		return ERR(e, ERR_USAGE, "step: '%s' is not a number of windows (1..%ld)", argv[1],
			   INSPECT_MAX_STEPS);
	for (long i = 0; i < k; i++) {
		int rc = step_once(in, e);
		if (rc != ERR_OK)
			return rc;
		fflush(stdout);
		if (i + 1 < k && cli_signal_received()) {
			/* at a window boundary: back to the prompt, where SIGINT lets the session
			 * go on and SIGTERM ends it (run_session) */
			printf("step: interrupted by %s after %ld of %ld windows (step %lld)\n",
			       env_stop_name(cli_signal_received()), i + 1, k,
			       (long long)in->t.step);
			return ERR_OK;
		}
	}
	return ERR_OK;
}

/* ------------------------------------------------------------------ grad */

static void grad_line(const struct param_info *p, const float *g)
{
	double s2 = 0.0, mx = 0.0, sum = 0.0;
	char shape[48];
	for (size_t i = 0; i < p->count; i++) {
		double v = g[i];
		s2 += v * v;
		sum += v;
		if (fabs(v) > mx)
			mx = fabs(v);
	}
	shape_text(p, shape, sizeof shape);
	printf("grad:   %-6s %-9s %12.6e %12.6e %13.6e ", p->name, shape, sqrt(s2), mx,
	       p->count ? sum / (double)p->count : 0.0);
	for (size_t i = 0; i < p->count && i < INSPECT_FIRST_VALUES; i++)
		printf(" %+.4e", g[i]);
	if (p->count > INSPECT_FIRST_VALUES)
		printf(" ...");
	printf("\n");
}

/* A non-negative index: digits only, no sign, at most max. */
static int parse_index(const char *s, size_t len, size_t max, size_t *out)
{
	size_t v = 0;
	if (len == 0)
		return -1;
	for (size_t k = 0; k < len; k++) {
		if (s[k] < '0' || s[k] > '9')
			return -1;
		v = v * 10 + (size_t)(s[k] - '0');
		if (v > max)
			return -1;
	}
	*out = v;
	return 0;
}

/* The components [*lo, *hi) of a tensor of `count` that `spec` names: "i" (one), "i:j",
 * ":j" or "i:" (a half-open range, as in Python). */
static int parse_range(const char *spec, size_t count, size_t *lo, size_t *hi, struct err *e)
{
	const char *colon = strchr(spec, ':');
	size_t len = strlen(spec), big = (size_t)1 << 40;
	int bad;
	if (!colon) {
		bad = parse_index(spec, len, big, lo);
		*hi = *lo + 1;
	} else {
		*lo = 0;
		*hi = count;
		bad = (colon > spec && parse_index(spec, (size_t)(colon - spec), big, lo)) ||
		      (colon[1] && parse_index(colon + 1, strlen(colon + 1), big, hi));
	}
	if (bad)
		return ERR(e, ERR_USAGE, "'%s' is not an index or a range i:j", spec);
	if (*lo >= count) /* before the empty-range rule: "i:" past the end is empty too */
		return ERR(e, ERR_USAGE, "'%s' is not within the tensor's components 0..%zu", spec,
			   count - 1);
	if (*lo >= *hi)
		return ERR(e, ERR_USAGE, "'%s' is an empty range (i:j runs from i to j - 1)", spec);
	if (*hi > count)
		return ERR(e, ERR_USAGE, "'%s' is not within the tensor's components 0..%zu", spec,
			   count - 1);
	return ERR_OK;
}

/* What `grad` shows: the gradient (reduced, or rank's local one), a tensor (or all), and
 * a range of its components (hi = 0: the statistics only). */
struct grad_query {
	int rank;          /* -1: the reduced gradient */
	int tensor;        /* -1: every tensor */
	size_t lo, hi;
};

/* "PARAM", "PARAM[RANGE]" or "PARAM RANGE" (RANGE: see parse_range), and --rank R. */
static int parse_grad(struct inspect *in, int argc, char **argv, struct grad_query *q,
		      struct err *e)
{
	const struct model_shape *m = &in->t.r.eng->shape;
	char name[64], range[64] = "";
	int npos = 0;
	memset(q, 0, sizeof *q);
	q->rank = q->tensor = -1;
	for (int i = 1; i < argc; i++) {
		const char *br = strchr(argv[i], '[');
		size_t len = strlen(argv[i]);
		if (strcmp(argv[i], "--rank") == 0) {
			if (i + 1 >= argc)
				return ERR(e, ERR_USAGE, "--rank needs a rank number");
			ERR_TRY(parse_rank(argv[++i], in->t.r.eng->world, &q->rank, e));
		} else if (argv[i][0] == '-') {
			return ERR(e, ERR_USAGE, "unknown option '%s' (only --rank R)", argv[i]);
		} else if (npos++ == 0) {
			if (br && argv[i][len - 1] != ']')
				return ERR(e, ERR_USAGE, "'%s': a range is written PARAM[i:j]", argv[i]);
			snprintf(name, sizeof name, "%.*s", (int)(br ? br - argv[i] : (long)len), argv[i]);
			if (br)
				snprintf(range, sizeof range, "%.*s", (int)(len - 2 - (br - argv[i])), br + 1);
		} else if (npos == 2 && !range[0]) {
			snprintf(range, sizeof range, "%s", argv[i]);
		} else {
			return ERR(e, ERR_USAGE, "one parameter and one index or range at most");
		}
	}
	if (npos && (q->tensor = find_param(m, name)) < 0) {
		char names[256];
		param_names(m, names, sizeof names);
		return ERR(e, ERR_USAGE, "unknown parameter '%s' (parameters: %s)", name, names);
	}
	if (npos == 2 || range[0])
		return parse_range(range, m->p[q->tensor].count, &q->lo, &q->hi, e);
	return ERR_OK;
}

/* The components q->lo .. q->hi - 1 of tensor q->tensor of g, one per line. */
static void grad_components(const struct model_shape *m, const struct grad_query *q,
			    const float *g)
{
	const struct param_info *p = &m->p[q->tensor];
	char shape[48];
	shape_text(p, shape, sizeof shape);
	printf("grad:   %s[%zu:%zu] of %s %s (index: within the tensor, row-major; flat: in the "
	       "parameter vector of dump's .npy)\n", p->name, q->lo, q->hi, p->name, shape);
	printf("grad:   %-16s %7s %8s  %s\n", "component", "index", "flat", "value");
	for (size_t i = q->lo; i < q->hi; i++) {
		char label[96];
		tensor_label(m, p->offset + i, label, sizeof label);
		printf("grad:   %-16s %7zu %8zu  %+.8e\n", label, i, p->offset + i,
		       g[p->offset + i]);
	}
}

static int do_grad(struct inspect *in, int argc, char **argv, struct err *e)
{
	const struct model_shape *m = &in->t.r.eng->shape;
	struct grad_query q;
	int rc = parse_grad(in, argc, argv, &q, e);
	if (rc != ERR_OK) {
		err_prefix(e, "grad");
		return rc;
	}
	if (!in->have_last)
		return ERR(e, ERR_USAGE, "grad: no window has been stepped yet (run 'step' first)");
	const float *g = q.rank < 0 ? in->last_reduced : in->last_local[q.rank];
	if (q.rank < 0)
		printf("grad: reduced gradient of window %lld (step %lld, mode %s, reduce %s)\n",
		       window_number(in->last), (long long)in->last_step,
		       norm_mode_name(in->last_mode), reduce_name(in->a));
	else
		printf("grad: local gradient of rank %d before the reduce, window %lld (step %lld, "
		       "mode %s; %lld supervised tokens on this rank)\n", q.rank,
		       window_number(in->last), (long long)in->last_step,
		       norm_mode_name(in->last_mode), (long long)in->last->rank_tokens[q.rank]);
	if (q.hi > q.lo) {
		grad_components(m, &q, g);
		return ERR_OK;
	}
	printf("grad:   %-6s %-9s %12s %12s %13s  first values\n", "tensor", "shape", "L2 norm",
	       "max |g|", "mean");
	double s2 = 0.0;
	for (int t = 0; t < m->n_tensors; t++) {
		const struct param_info *p = &m->p[t];
		if (q.tensor >= 0 && t != q.tensor)
			continue;
		grad_line(p, g + p->offset);
		for (size_t i = 0; i < p->count; i++)
			s2 += (double)g[p->offset + i] * g[p->offset + i];
	}
	if (q.tensor < 0)
		printf("grad:   total: %zu components, L2 norm %.6e\n", in->n, sqrt(s2));
	return ERR_OK;
}

/* ------------------------------------------------------------------ compare */

static int restore_state(struct inspect *in, int64_t updates, struct err *e)
{
	struct engine *eng = in->t.r.eng;
	DEV(in, engine_set_state(eng, in->cur_p, in->cur_m, updates, e));
	/* read back (next_m is free between steps) */
	DEV(in, engine_get_state(eng, in->check_p, in->next_m, e));
	if (memcmp(in->check_p, in->cur_p, in->n * sizeof(float)) != 0 ||
	    memcmp(in->next_m, in->cur_m, engine_state_floats(eng) * sizeof(float)) != 0) {
		in->fatal = 1;
		return ERR(e, ERR_CHECK, "compare: the training state could not be restored exactly");
	}
	return ERR_OK;
}

/* "[MODE] [--rank R]" */
static int parse_compare(struct inspect *in, int argc, char **argv, int *mode, int *rank,
			 struct err *e)
{
	int nmode = 0;
	*mode = in->t.mode;
	*rank = -1;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--rank") == 0) {
			if (i + 1 >= argc)
				return ERR(e, ERR_USAGE, "compare: --rank needs a rank number");
			if (parse_rank(argv[++i], in->t.r.eng->world, rank, e) != ERR_OK) {
				err_prefix(e, "compare");
				return e->code;
			}
		} else if (argv[i][0] == '-') {
			return ERR(e, ERR_USAGE, "compare: unknown option '%s' (only --rank R)", argv[i]);
		} else if (nmode++) {
			return ERR(e, ERR_USAGE, "compare takes at most one normalization");
		} else if ((*mode = norm_mode_parse(argv[i])) < 0) {
			return ERR(e, ERR_USAGE, "compare: unknown normalization '%s' (global_token, "
				   "mean_of_means, microbatch_mean, double_accumulation)", argv[i]);
		}
	}
	return ERR_OK;
}

/* Runs window w under `mode` from the current engine state, without an update, and puts
 * into in->ref the reference (of the whole window, or of rank's share) and into *g what
 * is compared with it: the reduced gradient, or rank's contribution to it. */
static int compare_compute(struct inspect *in, const struct window *w, int mode, int rank,
			   const float **g, struct window_result *res, double *ref_loss,
			   struct err *e)
{
	struct engine *eng = in->t.r.eng;
	struct window share;
	int flags = ENGINE_CAPTURE_REDUCED | (rank >= 0 ? ENGINE_CAPTURE_LOCAL : 0);
	DEV(in, engine_window(eng, w, mode, flags, res, e));
	*g = eng->host_reduced;
	if (res->rejected)
		return ERR_OK;
	if (rank < 0) {
		DEV(in, engine_reference(eng, w, in->ref, ref_loss, e));
		return ERR_OK;
	}
	inspect_rank_share(w, rank, &share);
	DEV(in, engine_reference(eng, &share, in->ref, ref_loss, e));
	inspect_rank_contribution(eng->host_local[rank], in->n, &in->a->s, w->world, in->contrib);
	*g = in->contrib;
	return ERR_OK;
}

static int do_compare(struct inspect *in, int argc, char **argv, struct err *e)
{
	struct engine *eng = in->t.r.eng;
	int mode, rank, rc;
	if ((rc = parse_compare(in, argc, argv, &mode, &rank, e)) != ERR_OK)
		return rc;
	const struct window *w;
	int64_t updates = eng->updates_done;
	if (in->have_last) {
		w = in->last;
		DEV(in, engine_get_state(eng, in->cur_p, in->cur_m, e));
		DEV(in, engine_set_state(eng, in->before_p, in->before_m, in->before_updates, e));
		printf("compare: window %lld (step %lld), from the parameters at its start\n",
		       window_number(w), (long long)in->last_step);
	} else {
		if ((rc = peek_next(in, e)) != ERR_OK)
			return rc;
		w = in->draw;
		printf("compare: window %lld (the next one; nothing stepped yet), from the current "
		       "parameters, without an update\n", window_number(w));
	}
	struct window_result res;
	const float *g;
	double ref_loss = 0.0;
	rc = compare_compute(in, w, mode, rank, &g, &res, &ref_loss, e);
	if (rc == ERR_OK && in->have_last)
		rc = restore_state(in, updates, e);
	if (rc != ERR_OK)
		return rc;
	if (res.rejected) {
		printf("compare: the window has no supervised token: there is no mean to compare\n");
		return ERR_OK;
	}
	struct inspect_comparison c = {w, mode, rank, g, in->ref, in->n, res.loss, ref_loss};
	inspect_compare_print(&in->a->s, &eng->shape, &c);
	return ERR_OK;
}

/* ------------------------------------------------------------------ mode */

static int do_mode(struct inspect *in, int argc, char **argv, struct err *e)
{
	if (argc == 1) {
		printf("mode: %s (choices: global_token, mean_of_means, microbatch_mean, "
		       "double_accumulation)\n", norm_mode_name(in->t.mode));
		return ERR_OK;
	}
	if (argc > 2)
		return ERR(e, ERR_USAGE, "mode takes one argument (a normalization)");
	int m = norm_mode_parse(argv[1]);
	if (m < 0)
		return ERR(e, ERR_USAGE, "mode: unknown normalization '%s' (global_token, "
			   "mean_of_means, microbatch_mean, double_accumulation)", argv[1]);
	printf("mode: %s for the next windows (was %s)%s\n", norm_mode_name(m),
	       norm_mode_name(in->t.mode),
	       m == NORM_GLOBAL_TOKEN ? "" : "; this normalization is wrong on purpose");
	in->t.mode = m;
	return ERR_OK;
}

/* ------------------------------------------------------------------ dump */

static int dump_vec(const char *dir, const char *name, const float *x, size_t n, struct err *e)
{
	char path[FSX_PATH_MAX];
	size_t shape[1] = {n};
	int rc = fsx_join(path, sizeof path, dir, name, e);
	if (rc != ERR_OK)
		return rc;
	return npy_write(path, NPY_F32, shape, 1, x, e);
}

static int do_dump(struct inspect *in, int argc, char **argv, struct err *e)
{
	struct engine *eng = in->t.r.eng;
	char path[FSX_PATH_MAX], name[64];
	int rc;
	if (argc != 2)
		return ERR(e, ERR_USAGE, "dump needs one argument: a directory");
	if (!in->have_last)
		return ERR(e, ERR_USAGE, "dump: no window has been stepped yet (run 'step' first)");
	const char *dir = argv[1];
	if ((rc = fsx_mkdirs(dir, e)) != ERR_OK) {
		err_prefix(e, "dump");
		return rc;
	}
	DEV(in, engine_get_state(eng, in->cur_p, NULL, e));
	if ((rc = dump_vec(dir, "reduced.npy", in->last_reduced, in->n, e)) != ERR_OK) {
		err_prefix(e, "dump");
		return rc;
	}
	json_t *files = json_pack("{s:s, s:s, s:s}", "reduced",
				  "reduced.npy: the reduced gradient the update used",
				  "params_before",
				  "params-before.npy: the parameters at the start of the window (the "
				  "gradients are taken there)",
				  "params", "params.npy: the parameters after the window's update");
	json_t *locals = json_array();
	for (int r = 0; r < eng->world; r++) {
		snprintf(name, sizeof name, "rank%d-local.npy", r);
		json_array_append_new(locals, json_string(name));
		ERR_TRY_GOTO(rc, dump_vec(dir, name, in->last_local[r], in->n, e), out);
	}
	if ((rc = dump_vec(dir, "params-before.npy", in->before_p, in->n, e)) != ERR_OK ||
	    (rc = dump_vec(dir, "params.npy", in->cur_p, in->n, e)) != ERR_OK)
		goto out;
	json_t *j = json_pack(
		"{s:s, s:I, s:s, s:s, s:i, s:i, s:I, s:f, s:f, s:o, s:O, s:O, s:o}", "what",
		"gradients of one window of inspect: flat float32 vectors of n_params components; "
		"'layout' gives each parameter's slice (offset, count) and shape (row-major)",
		"step", (json_int_t)in->last_step, "normalization",
		norm_mode_name(in->last_mode), "reduce", reduce_name(in->a), "world", eng->world,
		"accumulation", in->last->micro, "n_params", (json_int_t)in->n, "loss",
		in->last_res.loss, "grad_norm", in->last_res.grad_norm, "layout",
		run_layout_json(&eng->shape), "files", files, "local", locals, "window",
		parity_window_json(in->last));
	if (!j) {
		rc = ERR(e, ERR_IO, "dump: cannot build layout.json");
		goto out;
	}
	char *txt = jsonx_dumps(j, JSON_INDENT(2));
	json_decref(j);
	if (!txt) {
		rc = ERR(e, ERR_IO, "dump: cannot serialize layout.json");
		goto out;
	}
	if ((rc = fsx_join(path, sizeof path, dir, "layout.json", e)) == ERR_OK)
		rc = fsx_write_atomic(path, txt, strlen(txt), e);
	free(txt);
	if (rc == ERR_OK)
		printf("dump: wrote reduced.npy, rank0..%d-local.npy, params-before.npy, params.npy "
		       "and layout.json to %s (step %lld, %zu components each)\n", eng->world - 1, dir,
		       (long long)in->last_step, in->n);
out:
	if (rc != ERR_OK)
		err_prefix(e, "dump");
	json_decref(files);
	json_decref(locals);
	return rc;
}

/* ------------------------------------------------------------------ save */

/*
 * A checkpoint of the session's trainer as it stands (trainer_checkpoint) under
 * <artifacts>/inspect. A checkpoint records one normalization, so a session whose windows
 * used several (the resumed checkpoint's included) is refused.
 */
static int do_save(struct inspect *in, int argc, char **argv, struct err *e)
{
	struct app *a = in->a;
	struct engine *eng = in->t.r.eng;
	char root[FSX_PATH_MAX], dir[FSX_PATH_MAX];
	int rc;
	if (argc > 1)
		return ERR(e, ERR_USAGE, "save takes no argument");
	if (in->t.step == in->t.start_step) {
		if (!in->t.o.resume_dir)
			return ERR(e, ERR_USAGE, "save: no step taken yet: the state is the seeded "
				   "initial one, there is nothing to checkpoint");
		printf("save: no step since checkpoint %s (step %lld): it already holds this "
		       "state\n", in->t.o.resume_dir, (long long)in->t.step);
		return ERR_OK;
	}
	if (in->t.run_mode == -2) {
		if (in->t.resume_mode >= 0)
			return ERR(e, ERR_USAGE, "save: unavailable in this session: its windows used "
				   "several normalizations (those of checkpoint %s used %s) and a "
				   "checkpoint records one; a session that keeps the checkpoint's mode "
				   "can be saved", in->t.o.resume_dir, norm_mode_name(in->t.resume_mode));
		return ERR(e, ERR_USAGE, "save: unavailable in this session: its windows used "
			   "several normalizations and a checkpoint records one (the trainer runs "
			   "a single normalization); a session that keeps one mode can be saved");
	}
	if ((rc = fsx_join(root, sizeof root, a->s.artifacts, artifacts_table[ART_INSPECT], e)) != ERR_OK) {
		err_prefix(e, "save");
		return rc;
	}
	if ((rc = trainer_checkpoint(&in->t, root, dir, sizeof dir, e)) != ERR_OK) {
		in->fatal = rc == ERR_DEVICE; /* reading the state from the devices failed */
		err_prefix(e, "save");
		return rc;
	}
	int mode = in->t.run_mode;
	printf("save: checkpoint %s: step %lld, %lld updates, normalization %s\n", dir,
	       (long long)in->t.step, (long long)eng->updates_done, norm_mode_name(mode));
	if (mode == a->s.normalization)
		printf("save: continue with: inspect --resume %s  (or train --resume %s)\n", dir,
		       dir);
	else
		printf("save: continue with: inspect --resume %s  (or train --resume %s --set "
		       "train.normalization=%s: the trainer runs the configured normalization, "
		       "here %s)\n", dir, dir, norm_mode_name(mode),
		       norm_mode_name(a->s.normalization));
	if (in->t.step > a->s.updates)
		printf("save: note: step %lld is past [train] updates = %lld: train --resume "
		       "needs --set train.updates=N with N >= the step\n", (long long)in->t.step,
		       (long long)a->s.updates);
	return ERR_OK;
}

/* ------------------------------------------------------------------ eval */

static int do_eval(struct inspect *in, int argc, char **argv, struct err *e)
{
	double loss_sum = 0.0;
	int64_t tokens = 0, hits = 0, seqs = 0;
	if (argc > 1)
		return ERR(e, ERR_USAGE, "eval takes no argument");
	DEV(in, engine_evaluate(in->t.r.eng, SPLIT_TEST, &loss_sum, &tokens, &hits, &seqs, e));
	if (tokens == 0) {
		printf("eval: test split: %lld sequences, no supervised token\n", (long long)seqs);
		return ERR_OK;
	}
	printf("eval: test split after %lld updates: loss %.6f (global token mean over %lld "
	       "supervised tokens of %lld sequences), accuracy %.4f (%lld / %lld tokens)\n",
	       (long long)in->t.r.eng->updates_done, loss_sum / (double)tokens, (long long)tokens,
	       (long long)seqs, (double)hits / (double)tokens, (long long)hits, (long long)tokens);
	return ERR_OK;
}

/* ------------------------------------------------------------------ help, table */

static int do_help(struct inspect *in, int argc, char **argv, struct err *e);

struct icmd {
	const char *name;
	int (*fn)(struct inspect *in, int argc, char **argv, struct err *e);
	const char *usage;
	const char *brief;
	const char *detail;
};

static const struct icmd icmds[] = {
	{"window", do_window, "window", "the next window, its token counts and each rank's factor c",
	 "Draws the next window without consuming it and shows, per rank and microbatch, the\n"
	 "sequence ids, the supervised tokens and the factor c the rank will multiply its loss\n"
	 "sum by under the current mode; then the tokens per rank, N (their sum) and why c is\n"
	 "what it is (reduce op, W, N, the formula of the mode). A token ends up weighing c / k\n"
	 "in the reduced gradient (k = W for reduce avg, 1 for sum); only global_token gives\n"
	 "every token 1 / N."},
	{"step", do_step, "step [K]", "run K windows (default 1) with updates",
	 "Runs K windows, each with the optimizer update, under the current mode, and prints\n"
	 "per window the step number, the loss (the global token mean of the window, whatever\n"
	 "the mode), N and the L2 norm of the reduced gradient. The last window is kept for\n"
	 "grad, compare and dump."},
	{"grad", do_grad, "grad [PARAM[i:j] | PARAM i] [--rank R]",
	 "gradient statistics, or chosen components, of the last window",
	 "Per parameter tensor (or only PARAM): L2 norm, max |g|, mean and the first values of\n"
	 "the last window's reduced gradient, or with --rank R of rank R's local gradient\n"
	 "before the reduce (already multiplied by its factor c). With a range, PARAM[i:j]\n"
	 "(components i to j - 1; i or j may be left out, as in PARAM[:8]), PARAM[i] or PARAM i,\n"
	 "prints those components one per line: name[row, col], the index within the tensor\n"
	 "(row-major), the index in the flat parameter vector (as in dump's .npy files) and the\n"
	 "value."},
	{"compare", do_compare, "compare [MODE] [--rank R]",
	 "reduced gradient (or rank R's part) under MODE vs the reference",
	 "Recomputes the reduced gradient of the current window (the last stepped one, from the\n"
	 "parameters at its start; if none yet, the next one) under MODE (default: the current\n"
	 "mode), without an update, and compares it component by component with the\n"
	 "single-device reference gradient of the window's token mean: max abs/rel error, the\n"
	 "number of components outside |g - ref| <= atol + rtol |ref| ([parity] atol, rtol) and\n"
	 "the worst components with their parameter name and (row, col). With --rank R, compares\n"
	 "rank R's contribution instead (its local gradient, divided by W under reduce avg, by\n"
	 "the K shards in exact mode)\n"
	 "with its share of the reference: the gradient of the losses of its own tokens / N.\n"
	 "Under global_token every rank's contribution matches its share; a wrong mode shows\n"
	 "which rank weighs its tokens wrongly. The training state is restored afterwards:\n"
	 "comparing never changes the trajectory."},
	{"mode", do_mode, "mode [NAME]", "switch the normalization for the next windows",
	 "Sets the normalization of the next windows: global_token (correct), mean_of_means,\n"
	 "microbatch_mean or double_accumulation (wrong ones, to watch them drift). Without a\n"
	 "name, shows the current one."},
	{"dump", do_dump, "dump DIR", "write the last window's tensors as .npy",
	 "Writes to DIR: reduced.npy (the reduced gradient), rankR-local.npy (each rank's local\n"
	 "gradient before the reduce), params-before.npy (the parameters the gradients were\n"
	 "taken at), params.npy (after the update) and layout.json (each tensor's name, shape,\n"
	 "offset and count in the flat vectors, and the window)."},
	{"save", do_save, "save", "write a checkpoint of the current state now",
	 "Writes a checkpoint of the current state as <artifacts>/inspect/step-NNNN with the\n"
	 "trainer's own writer: parameters, momentum, updates done, sampler state, the step,\n"
	 "the per-rank histories and the last loss, exactly as train writes them at the same\n"
	 "step (the files are byte-identical). `inspect --resume DIR` or `train --resume DIR`\n"
	 "continue from it. A session whose windows used several normalizations (those of a\n"
	 "resumed checkpoint included) cannot be saved: a checkpoint records one."},
	{"eval", do_eval, "eval", "test split loss and accuracy",
	 "Evaluates the current parameters on the test split: the global token mean of the loss\n"
	 "and the argmax accuracy, with the token and sequence counts."},
	{"help", do_help, "help [CMD]", "list the commands, or explain one", NULL},
	{"quit", NULL, "quit", "leave (end of input does the same)", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

/* The name of command i of the table (NULL past its end): the prompt completes them. */
static const char *icmd_name(int i)
{
	return icmds[i].name;
}

static const struct icmd *find_cmd(const char *name)
{
	for (const struct icmd *c = icmds; c->name; c++)
		if (strcmp(c->name, name) == 0)
			return c;
	if (strcmp(name, "exit") == 0)
		return find_cmd("quit");
	return NULL;
}

/* " (did you mean 'step'?)" for the command nearest to a mistyped name, or
 * " (type 'help')" when none is near. */
static void unknown_cmd_hint(const char *name, char *out, size_t cap)
{
	const char *best = app_nearest(name, icmd_name);
	if (best)
		snprintf(out, cap, " (did you mean '%s'?)", best);
	else
		snprintf(out, cap, " (type 'help')");
}

static int do_help(struct inspect *in, int argc, char **argv, struct err *e)
{
	if (argc > 2)
		return ERR(e, ERR_USAGE, "help takes at most one argument (a command)");
	if (argc == 2) {
		const struct icmd *c = find_cmd(argv[1]);
		if (!c) {
			char hint[64];
			unknown_cmd_hint(argv[1], hint, sizeof hint);
			return ERR(e, ERR_USAGE, "help: unknown command '%s'%s", argv[1], hint);
		}
		printf("%s: %s\n", c->usage, c->brief);
		if (c->detail)
			printf("%s\n", c->detail);
		return ERR_OK;
	}
	printf("commands (help CMD for details):\n");
	for (const struct icmd *c = icmds; c->name; c++)
		printf("  %-24s %s\n", c->usage, c->brief);
	return ERR_OK;
}

/* ------------------------------------------------------------------ session */

static void inspect_free(struct inspect *in)
{
	free(in->before_p);
	free(in->before_m);
	free(in->next_p);
	free(in->next_m);
	free(in->last_reduced);
	for (int r = 0; r < MAX_WORLD; r++)
		free(in->last_local[r]);
	free(in->cur_p);
	free(in->cur_m);
	free(in->check_p);
	free(in->ref);
	free(in->contrib);
	if (in->have_extra)
		window_free(&in->extra);
	trainer_close(&in->t, NULL);
}

/* The trainer as `train` opens it (the prepared corpus; a checkpoint verified as a resume
 * is, whatever its normalization, which the session then continues with), and the
 * session's own buffers. */
static int inspect_open(struct app *a, struct inspect *in, struct err *e)
{
	struct train_opts o;
	int rc;
	memset(in, 0, sizeof *in);
	memset(&o, 0, sizeof o);
	in->a = a;
	/* window and compare show each rank's share as a fraction of N; under class weights
	 * the divisor is the window's weight sum, which they do not know */
	if (a->s.class_weights[0])
		return ERR(e, ERR_CONFIG, "inspect divides a rank's share by the window's token "
			   "count N, not by the weight sum of train.class_weights = %s: use parity "
			   "for a weighted objective", a->s.class_weights);
	o.resume_dir = a->o.resume_dir;
	o.mode = TRAIN_MODE_ANY;
	if ((rc = trainer_open(&in->t, &a->env, &o, e)) != ERR_OK)
		return rc;
	in->last_mode = in->t.mode;
	if ((rc = window_init(&in->extra, a->s.world, a->s.accumulation, a->s.batch_size, e)) !=
	    ERR_OK)
		return rc;
	in->have_extra = 1;
	in->last = &in->t.r.w;
	in->draw = &in->extra;
	in->n = in->t.r.eng->shape.n_params;
	/* each as long as the longest vector, the optimizer's state (AdamW: 2 n_params) */
	size_t bytes = engine_state_floats(in->t.r.eng) * sizeof(float);
	float **bufs[] = {&in->before_p, &in->before_m, &in->next_p, &in->next_m,
			  &in->last_reduced, &in->cur_p, &in->cur_m, &in->check_p, &in->ref,
			  &in->contrib};
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		if (!(*bufs[i] = malloc(bytes)))
			return ERR(e, ERR_NOMEM, "out of memory");
	for (int r = 0; r < a->s.world; r++)
		if (!(in->last_local[r] = malloc(bytes)))
			return ERR(e, ERR_NOMEM, "out of memory");
	return ERR_OK;
}

/* What a session met: the errors of its commands, which fail a scripted session. */
struct session {
	struct inspect_reader rd;
	int scripted;             /* stdin is not a terminal */
	double last_sigint;       /* when the last SIGINT was honoured (monotonic s), or 0 */
	long line_no;
	int errors;
	int first_code;           /* the first error's code, line and message */
	long first_line;
	char first_msg[1024];
};

/* Reports a command's mistake; the session goes on. */
static void session_error(struct session *ss, int code, const char *msg)
{
	printf("error: %s\n", msg);
	if (ss->errors++ == 0) {
		ss->first_code = code;
		ss->first_line = ss->line_no;
		snprintf(ss->first_msg, sizeof ss->first_msg, "%s", msg);
	}
}

/* Runs one line: 1 when it asks to quit, 0 to go on, or the code of a failure that ends
 * the session (device or runtime, in e). */
static int run_line(struct inspect *in, struct session *ss, char *line, int too_long,
		    struct err *e)
{
	char *argv[INSPECT_MAX_ARGS], msg[160];
	if (too_long) {
		if (too_long == 2)
			snprintf(msg, sizeof msg, "line holds a NUL byte, ignored");
		else
			snprintf(msg, sizeof msg, "line longer than %d characters, ignored",
				 INSPECT_LINE_MAX);
		session_error(ss, ERR_USAGE, msg);
		return 0;
	}
	int argc = inspect_split_args(line, argv, INSPECT_MAX_ARGS);
	if (argc < 0) {
		snprintf(msg, sizeof msg, "too many words on the line (at most %d)", INSPECT_MAX_ARGS);
		session_error(ss, ERR_USAGE, msg);
		return 0;
	}
	if (argc == 0 || argv[0][0] == '#')
		return 0;
	const struct icmd *c = find_cmd(argv[0]);
	if (!c) {
		char hint[64];
		unknown_cmd_hint(argv[0], hint, sizeof hint);
		snprintf(msg, sizeof msg, "unknown command '%.64s'%s", argv[0], hint);
		session_error(ss, ERR_USAGE, msg);
		return 0;
	}
	if (!c->fn)
		return 1; /* quit */
	struct err ce;
	err_clear(&ce);
	int crc = c->fn(in, argc, argv, &ce);
	if (crc == ERR_OK)
		return 0;
	if (ce.code == ERR_OK)
		ERR(&ce, crc, "%s", err_code_name(crc));
	if (in->fatal) {
		*e = ce;
		err_prefix(e, "inspect: %s", c->name);
		return crc;
	}
	session_error(ss, crc, ce.msg);
	return 0;
}

/* Between commands: SIGINT (which stopped a step, or cleared the line at the prompt) is
 * honoured and the session goes on, unless it comes within a second of the previous one;
 * SIGTERM ends the session. Both ends are ERR_INTERRUPTED, as a stopped train's. */
static int take_signal(struct session *ss, struct err *e)
{
	int sig = cli_signal_received();
	if (!sig)
		return ERR_OK;
	if (sig != SIGINT)
		return ERR(e, ERR_INTERRUPTED, "inspect: interrupted by %s; the session ends",
			   env_stop_name(sig));
	double now = clock_now_s(), previous = ss->last_sigint;
	ss->last_sigint = now;
	if (previous > 0 && now - previous <= INSPECT_SIGINT_TWICE_S)
		return ERR(e, ERR_INTERRUPTED, "inspect: SIGINT twice within a second; the session "
			   "ends");
	cli_signals_rearm();
	return ERR_OK;
}

/* Reads and runs lines until quit or the end of input. */
static int run_session(struct inspect *in, struct session *ss, struct err *e)
{
	for (;;) {
		char *line = NULL;
		int too_long, rc;
		int got = inspect_read_line(&ss->rd, &line, &too_long);
		if (got == READ_ERROR)
			return ERR(e, ERR_IO, "inspect: cannot read standard input: %s",
				   strerror(errno));
		if (got == READ_END) {
			printf("\n");
			return ERR_OK;
		}
		if (got == READ_SIGNAL) { /* at the prompt: the line is dropped */
			printf(cli_signal_received() == SIGINT ? "^C\n" : "\n");
			fflush(stdout);
			if ((rc = take_signal(ss, e)) != ERR_OK)
				return rc;
			continue;
		}
		ss->line_no++;
		rc = run_line(in, ss, line, too_long, e);
		if (rc == ERR_OK && (rc = take_signal(ss, e)) != ERR_OK)
			return rc;
		if (rc == 1) {
			if (!ss->rd.edit) /* piped input is not echoed: end the prompt's line */
				printf("\n");
			return ERR_OK;
		}
		if (rc != ERR_OK)
			return rc;
		fflush(stdout);
	}
}

static void session_start(struct inspect *in, struct session *ss)
{
	struct app *a = in->a;
	memset(ss, 0, sizeof *ss);
	ss->scripted = !isatty(STDIN_FILENO);
	if (in->t.o.resume_dir)
		printf("inspect: resumed from %s at step %lld (%lld updates done)\n",
		       in->t.o.resume_dir, (long long)in->t.step,
		       (long long)in->t.r.eng->updates_done);
	printf("inspect: W = %d on the %s backend, reduce %s, plan %s, accumulation %d, mode %s, "
	       "%zu parameters, step %lld, %lld updates done; type 'help' for the commands\n",
	       a->s.world, engine_backend_name(in->t.r.eng), reduce_name(a),
	       rank_split_name(a->s.rank_split),
	       a->s.accumulation, norm_mode_name(in->t.mode), in->n, (long long)in->t.step,
	       (long long)in->t.r.eng->updates_done);
	fflush(stdout);
	inspect_reader_open(&ss->rd, !ss->scripted, icmd_name);
}

int cmd_inspect(struct app *a, struct err *e)
{
	struct inspect in;
	struct session ss;
	int rc;
	memset(&ss, 0, sizeof ss);
	/* its window view explains the token unit's factors (c = k / N, ...) */
	if (a->s.unit != UNIT_TOKEN)
		return ERR(e, ERR_CONFIG, "%s: inspect explains the token unit only ([train] unit "
			   "= sequence given); run it with --set train.unit=token", a->cfg.path);
	if ((rc = inspect_open(a, &in, e)) == ERR_OK) {
		session_start(&in, &ss);
		rc = run_session(&in, &ss, e);
	}
	/* a script that met an error fails, so that it can serve as a check */
	if (rc == ERR_OK && ss.scripted && ss.errors > 0)
		rc = ERR(e, ss.first_code, "inspect: %d command%s of the script failed; the first, "
			 "on line %ld: %s", ss.errors, ss.errors == 1 ? "" : "s", ss.first_line,
			 ss.first_msg);
	inspect_reader_close(&ss.rd);
	fflush(stdout);
	inspect_free(&in);
	return rc;
}
