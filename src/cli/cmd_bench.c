/*
 * cmd_bench: throughput of the training window on the configured backend.
 *
 * Runs a few warm-up windows, then `--windows N` timed training windows (forward,
 * backward, allreduce, SGD) and prints supervised tokens per second, the FLOP rate of
 * the training math (6 (C*D*H + H*V) FLOP per supervised token: two GEMMs forward, four
 * backward), and, measured by this same binary on this machine, the rate of a
 * single-thread cblas_sgemm on the model's largest GEMM shape, so the ratio training
 * rate / (W x sgemm rate) says how close the window step gets to the BLAS bound (W x T x
 * sgemm with devices.threads = T: the cores the ranks compute on). The
 * same ratio is also given per CPU-second (the process's CPU time over the windows
 * against the sgemm thread's): on a machine shared with other work the wall-clock
 * figures drop with the load, the CPU-time one much less. It also reports the share of
 * window time spent in collectives (which includes waiting for the slowest rank at their
 * barriers), and what a window costs in device latency on the backend that runs: the
 * device's host waits (synchronisations), kernel launches and queued copies per window
 * (dev.h's counts, on the rank that issues most).
 *
 * With --sweep (minutes of runs, so only when asked for), a size sweep then shows how
 * the costs grow with the shape: the configuration with the size its model declares
 * (struct model_sweep: the window MLP's hidden = 512, 1024, 2048 by vocab = 128 and
 * 4096; the GPT's width = 256, 512, 768, heads = width / 64, by the
 * configured vocabulary and 4096) on the synthetic source, a short run each (at most
 * --windows windows, about two seconds of them), each point's share of W x sgemm against
 * the sgemm of that point's own largest GEMM. A model that declares no size has no
 * sweep. Figures go to outputs/bench.json as well.
 *
 * Then exact mode next to the default mode on the same window shape (W devices, W x
 * accumulation microbatches of batch_size): the configured mode and the other one, its
 * shard order matching the plan (length with length_bands, balanced with balanced), so
 * the cost of exact mode's per-shard buffers and tree reads as a ratio of the two.
 *
 * Last, batching by sequences next to batching by tokens (train.micro_tokens) on the
 * same draws: the microbatches each rank runs, the positions the padded layout lays out
 * per supervised token, and the share of window time in collectives (waiting included).
 */
#include "cmd_bench.h"

#include <cblas.h>
#include <jansson.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "blas_core.h"
#include "gemm.h"
#include "memstat.h"
#include "outputs.h"
#include "run.h"
#include "shard.h"
#include "sources.h"

/* the model's largest GEMM of a microbatch, rows ~ batch * mean length (the window MLP:
 * rows x H x C*D or, for a large vocabulary, rows x V x H) */
struct gemm_shape {
	int m, n, k;
};

static struct gemm_shape largest_gemm(const struct settings *s, const struct model_shape *m)
{
	struct model_gemm g = model_microbatch_gemm(m, s);
	return (struct gemm_shape){g.m, g.n, g.k};
}

static double thread_cpu_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec + 1e-9 * t.tv_nsec;
}

static double process_cpu_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* the reference GEMM's operands, C[m x n] = A[m x k] B[n x k]^T */
struct sgemm_mats {
	struct gemm_shape g;
	float *a, *b, *c;
};

static void sgemm_mats_free(struct sgemm_mats *x)
{
	free(x->a);
	free(x->b);
	free(x->c);
	x->a = x->b = x->c = NULL;
}

static void sgemm_run(const struct sgemm_mats *x)
{
	int m = x->g.m, n = x->g.n, k = x->g.k;
	gemm_sgemm(0, 1, m, n, k, 1.0f, x->a, k, x->b, k, 0.0f, x->c, n);
}

/* Allocates and fills the operands and runs the GEMM once (first-touch, BLAS set-up);
 * 0 when they cannot be allocated. */
static int sgemm_mats_alloc(struct gemm_shape g, struct sgemm_mats *x)
{
	size_t mk = (size_t)g.m * g.k, nk = (size_t)g.n * g.k;
	x->g = g;
	x->a = malloc(sizeof(float) * mk);
	x->b = malloc(sizeof(float) * nk);
	x->c = malloc(sizeof(float) * (size_t)g.m * g.n);
	if (!x->a || !x->b || !x->c) {
		sgemm_mats_free(x);
		return 0;
	}
	for (size_t i = 0; i < mk; i++)
		x->a[i] = (float)(i % 7) * 0.1f;
	for (size_t i = 0; i < nk; i++)
		x->b[i] = (float)(i % 5) * 0.1f;
	openblas_set_num_threads(1);
	sgemm_run(x);
	return 1;
}

/* GFLOP per second of the one-thread GEMM run for about min_s seconds: per wall second
 * (returned) and per CPU second of this thread (*per_cpu) */
static double sgemm_trial(const struct sgemm_mats *x, double min_s, double *per_cpu)
{
	long reps = 0;
	double t0 = clock_now_s(), c0 = thread_cpu_s(), t;
	do {
		sgemm_run(x);
		reps++;
	} while ((t = clock_now_s() - t0) < min_s);
	double cpu = thread_cpu_s() - c0;
	double gflop = 2.0 * x->g.m * x->g.n * x->g.k * reps * 1e-9;
	*per_cpu = cpu > 0.0 ? gflop / cpu : 0.0;
	return gflop / t;
}

/* The one-thread sgemm reference of one shape. Its rate on a shared or virtual machine
 * moves from one second to the next, so it is measured in SGEMM_TRIALS short trials, half
 * before the timed windows and half after, and the median is the reference (the range is
 * printed beside it). On a virtual machine a core's rate also depends on how many cores
 * are busy: W one-thread sgemms running at once are measured too, printed beside, not
 * used as the reference. */
#define SGEMM_TRIALS 6
#define SGEMM_MAX_THREADS 64
#define SGEMM_TRIAL_S 0.1
#define SGEMM_CONCURRENT_S 0.3
struct sgemm_ref {
	int trials;
	double wall[SGEMM_TRIALS], cpu[SGEMM_TRIALS]; /* GFLOP/s per wall, per CPU second */
	int threads;                                  /* of the concurrent run (0: none) */
	double each[SGEMM_MAX_THREADS];               /* their GFLOP/s per wall second */
};

static void sgemm_trials(const struct sgemm_mats *x, int count, struct sgemm_ref *ref)
{
	for (int i = 0; i < count && ref->trials < SGEMM_TRIALS; i++, ref->trials++)
		ref->wall[ref->trials] = sgemm_trial(x, SGEMM_TRIAL_S, &ref->cpu[ref->trials]);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* median, min and max of v[0..n-1] (0 for all when n == 0) */
static double median_range(const double *v, int n, double *lo, double *hi)
{
	double s[SGEMM_TRIALS > SGEMM_MAX_THREADS ? SGEMM_TRIALS : SGEMM_MAX_THREADS];
	*lo = *hi = 0.0;
	if (n <= 0)
		return 0.0;
	memcpy(s, v, sizeof(double) * n);
	qsort(s, n, sizeof(double), cmp_double);
	*lo = s[0];
	*hi = s[n - 1];
	return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/* one of the concurrent sgemm threads */
struct sgemm_thread {
	struct sgemm_mats mats;
	atomic_int *go; /* set once every thread is created: they start together */
	double rate;
};

static void *sgemm_thread_main(void *arg)
{
	struct sgemm_thread *t = arg;
	double per_cpu;
	while (!atomic_load(t->go))
		sched_yield();
	t->rate = sgemm_trial(&t->mats, SGEMM_CONCURRENT_S, &per_cpu);
	return NULL;
}

/* `threads` one-thread sgemms of shape g at once, each on its own operands; their rates
 * go to ref->each (nothing when a thread or its operands cannot be had) */
static void sgemm_concurrent(struct gemm_shape g, int threads, struct sgemm_ref *ref)
{
	struct sgemm_thread t[SGEMM_MAX_THREADS];
	pthread_t id[SGEMM_MAX_THREADS];
	atomic_int go = 0;
	int made = 0, started = 0;
	threads = threads < SGEMM_MAX_THREADS ? threads : SGEMM_MAX_THREADS;
	while (made < threads && sgemm_mats_alloc(g, &t[made].mats))
		made++;
	while (made == threads && started < threads) {
		t[started].go = &go;
		t[started].rate = 0.0;
		if (pthread_create(&id[started], NULL, sgemm_thread_main, &t[started]) != 0)
			break;
		started++;
	}
	atomic_store(&go, 1);
	for (int i = 0; i < started; i++)
		pthread_join(id[i], NULL);
	if (started == threads) {
		ref->threads = threads;
		for (int i = 0; i < threads; i++)
			ref->each[i] = t[i].rate;
	}
	for (int i = 0; i < made; i++)
		sgemm_mats_free(&t[i].mats);
}

/* what the timed windows of one shape gave */
struct bench_result {
	int64_t tokens;
	long windows;
	double seconds, cpu_seconds; /* window time; process CPU time over the windows */
	double coll, coll_mean;      /* collective time: rank that waits most, mean over ranks */
	double flop_per_token;       /* the model's arithmetic per supervised token */
	double sequence_flop;        /* and per sequence, summed over the timed windows (the
					attention's, over the pairs that attend) */
	struct gemm_shape gemm;
	struct sgemm_ref ref;        /* the sgemm trials (none: not measured) */
	double sgemm, sgemm_per_cpu; /* their medians, one-thread sgemm GFLOP/s (0: not measured) */
	double sgemm_lo, sgemm_hi;   /* the range of the trials' rates */
	/* the one-thread sgemms the window could run at once: W ranks x each rank's threads
	 * (devices.threads on the cpu backend; 1 elsewhere), what the ratios divide by */
	int world, threads, lanes;
	double concurrent;           /* median rate of `lanes` sgemms at once (0: not measured) */
	double concurrent_lo, concurrent_hi;
	struct dev_counts counts;    /* summed over the timed windows: the busiest rank's */
	/* each rank's GEMM arithmetic over the timed windows, and the seconds it spent inside
	 * them (CPU backend; 0 where GEMMs are only queued) */
	double gemm_flop[MAX_WORLD], gemm_seconds[MAX_WORLD];
	/* the microbatches each rank ran, and the positions the padded layout lays out
	 * (each microbatch's sequences times its longest), over the timed windows */
	int64_t micro[MAX_WORLD], padded;
};

/* Adds window w's microbatches per rank, padded-layout positions and the arithmetic its
 * sequences cost beyond their tokens' to b. */
static void add_window_shape(const struct window *w, const struct corpus *c,
			     const struct model_shape *shape, struct bench_result *b)
{
	for (int r = 0; r < w->world; r++) {
		b->micro[r] += w->rank_micro[r];
		for (int m = 0; m < w->rank_micro[r]; m++) {
			const struct microbatch *mb = &w->mb[r][m];
			int longest = 0;
			for (int k = 0; k < mb->n; k++) {
				int len = corpus_len(c, mb->ids[k]);
				longest = len > longest ? len : longest;
				b->sequence_flop += model_sequence_flop(shape, len);
			}
			b->padded += (int64_t)mb->n * longest;
		}
	}
}

/* Adds the window's counts of the rank that issued most of each kind to *sum. */
static void add_window_counts(const struct window_result *res, int world,
			      struct dev_counts *sum)
{
	struct dev_counts most = {0, 0, 0, 0.0, 0.0};
	for (int r = 0; r < world; r++) {
		const struct dev_counts *c = &res->rank_counts[r];
		most.syncs = c->syncs > most.syncs ? c->syncs : most.syncs;
		most.launches = c->launches > most.launches ? c->launches : most.launches;
		most.copies = c->copies > most.copies ? c->copies : most.copies;
	}
	sum->syncs += most.syncs;
	sum->launches += most.launches;
	sum->copies += most.copies;
}

/* per window, of a count summed over b->windows */
static double per_window(const struct bench_result *b, uint64_t total)
{
	return b->windows > 0 ? (double)total / b->windows : 0.0;
}

/* `warmup` windows, then timed ones until `windows` of them or max_s seconds of window
 * time (max_s <= 0: no time bound) */
static int timed_windows(struct run *r, const struct settings *s, long warmup, long windows,
			 double max_s, struct bench_result *b, struct err *e)
{
	for (long i = 0; i < warmup + windows; i++) {
		struct window_result res;
		double c0 = process_cpu_s();
		ERR_TRY(sampler_next(&r->sampler, &r->w, e));
		ERR_TRY(engine_window(r->eng, &r->w, s->normalization, ENGINE_UPDATE, &res, e));
		if (i < warmup)
			continue;
		b->cpu_seconds += process_cpu_s() - c0;
		b->windows++;
		b->tokens += res.N;
		b->seconds += res.seconds;
		b->coll += res.seconds_coll;
		b->coll_mean += res.seconds_coll_mean;
		add_window_counts(&res, s->world, &b->counts);
		add_window_shape(&r->w, &r->corpus, &r->eng->shape, b);
		for (int q = 0; q < s->world; q++) {
			b->gemm_flop[q] += res.rank_counts[q].gemm_flop;
			b->gemm_seconds[q] += res.rank_counts[q].gemm_seconds;
		}
		if (max_s > 0.0 && b->seconds >= max_s)
			break;
	}
	return ERR_OK;
}

/* The windows of timed_windows, with the one-thread sgemm reference measured around them
 * (struct sgemm_ref) on the CPU backend. */
static int bench_windows(struct run *r, const struct settings *s, long warmup, long windows,
			 double max_s, struct bench_result *b, struct err *e)
{
	const struct model_shape *m = &r->eng->shape;
	struct sgemm_mats mats;
	memset(b, 0, sizeof *b);
	b->flop_per_token = model_flop_per_token(m);
	b->gemm = largest_gemm(s, m);
	b->world = s->world;
	b->threads = r->eng->placement.backend == DEV_BACKEND_CPU ? r->eng->placement.threads : 1;
	b->lanes = b->world * b->threads;
	int sgemm = r->eng->placement.backend == DEV_BACKEND_CPU && sgemm_mats_alloc(b->gemm, &mats);
	if (sgemm)
		sgemm_trials(&mats, SGEMM_TRIALS / 2, &b->ref);
	int rc = timed_windows(r, s, warmup, windows, max_s, b, e);
	if (sgemm) {
		sgemm_trials(&mats, SGEMM_TRIALS - SGEMM_TRIALS / 2, &b->ref);
		sgemm_mats_free(&mats);
		if (b->lanes > 1)
			sgemm_concurrent(b->gemm, b->lanes, &b->ref);
	}
	b->sgemm = median_range(b->ref.wall, b->ref.trials, &b->sgemm_lo, &b->sgemm_hi);
	double lo, hi;
	b->sgemm_per_cpu = median_range(b->ref.cpu, b->ref.trials, &lo, &hi);
	b->concurrent = median_range(b->ref.each, b->ref.threads, &b->concurrent_lo,
				     &b->concurrent_hi);
	return rc;
}

static double tokens_per_s(const struct bench_result *b)
{
	return b->seconds > 0.0 ? b->tokens / b->seconds : 0.0;
}

/* the training math of the timed windows, FLOP: per token and per sequence */
static double math_flop(const struct bench_result *b)
{
	return (double)b->tokens * b->flop_per_token + b->sequence_flop;
}

/* its mean per supervised token */
static double math_per_token(const struct bench_result *b)
{
	return b->tokens > 0 ? math_flop(b) / b->tokens : b->flop_per_token;
}

/* training GFLOP per second of window */
static double train_gflops(const struct bench_result *b)
{
	return b->seconds > 0.0 ? math_flop(b) * 1e-9 / b->seconds : 0.0;
}

/* training GFLOP/s over lanes x `rate` GFLOP/s (0: no rate) */
static double of_rate(const struct bench_result *b, double rate)
{
	return rate > 0.0 ? train_gflops(b) / (b->lanes * rate) : 0.0;
}

/* training GFLOP/s over lanes x one-thread sgemm GFLOP/s, the trials' median (0: no
 * sgemm figure) */
static double of_sgemm(const struct bench_result *b)
{
	return of_rate(b, b->sgemm);
}

/* what the ratios divide by, as the lines say it: "W x sgemm", or with helper threads
 * "W x 4 threads x sgemm" */
static const char *lanes_text(const struct bench_result *b)
{
	static _Thread_local char text[64];
	if (b->threads <= 1)
		return "W x sgemm";
	snprintf(text, sizeof text, "W x %d threads x sgemm", b->threads);
	return text;
}

/* the same per CPU-second: training GFLOP per process CPU second over sgemm's */
static double of_sgemm_cpu(const struct bench_result *b)
{
	return b->sgemm_per_cpu > 0.0 && b->cpu_seconds > 0.0
		       ? math_flop(b) * 1e-9 / b->cpu_seconds / b->sgemm_per_cpu
		       : 0.0;
}

/* The GEMM the windows and the reference run (gemm.h), and OpenBLAS as the loader gave
 * it: its kernel, a warning when that kernel is narrower than the CPU, and where the
 * chosen GEMM is another one, OpenBLAS's one-thread rate at the reference's shape `g`,
 * so the gain shows. Returns that rate (0: not measured). */
static double report_gemm(const struct env *v, struct gemm_shape g)
{
	char chosen[256], blas[256], advice[512];
	enum gemm_impl impl = gemm_chosen();
	gemm_describe(impl, chosen, sizeof chosen);
	int slow = blas_describe(blas, sizeof blas, advice, sizeof advice);
	env_info(v, "bench: GEMM %s; the sgemm figures below are its", chosen);
	if (impl == GEMM_OPENBLAS) {
		if (slow)
			env_info(v, "bench: warning: %s; the %% of sgemm figures below compare with "
				 "that slower sgemm", advice);
		return 0.0;
	}
	double rate = gemm_rate(GEMM_OPENBLAS, g.m, g.n, g.k, SGEMM_TRIAL_S);
	env_info(v, "bench: OpenBLAS as loaded (%s): one-thread sgemm %.1f GFLOP/s at %d x %d x "
		 "%d%s%s", blas, rate, g.m, g.n, g.k, slow ? "; " : "", slow ? advice : "");
	return rate;
}

/* The main figures; `openblas`: OpenBLAS's rate as loaded, when the GEMM is another one
 * (0: not measured). */
static void report_main(const struct env *v, const struct bench_result *b, double openblas)
{
	double tps = tokens_per_s(b);
	env_info(v, "bench: %lld supervised tokens in %.3f s: %.0f tokens/s", (long long)b->tokens,
		 b->seconds, tps);
	env_info(v, "bench: training math %.1f GFLOP/s (%.2f MFLOP per token)",
		 train_gflops(b), math_per_token(b) * 1e-6);
	if (b->sgemm > 0.0) {
		env_info(v, "bench: one-thread sgemm %.1f GFLOP/s (%d x %d x %d; median of %d trials "
			 "around the windows, range %.1f-%.1f); training reaches %.0f%% of %s "
			 "(%.0f-%.0f%% over the trials' range)", b->sgemm, b->gemm.m, b->gemm.n,
			 b->gemm.k, b->ref.trials, b->sgemm_lo, b->sgemm_hi, 100.0 * of_sgemm(b),
			 lanes_text(b), 100.0 * of_rate(b, b->sgemm_hi), 100.0 * of_rate(b, b->sgemm_lo));
		env_info(v, "bench: per CPU-second: training %.1f GFLOP (%.2f CPU-s for %.3f s of "
			 "windows), sgemm %.1f GFLOP: %.0f%%", math_flop(b) * 1e-9 / b->cpu_seconds, b->cpu_seconds, b->seconds, b->sgemm_per_cpu,
			 100.0 * of_sgemm_cpu(b));
	}
	if (b->sgemm > 0.0 && openblas > 0.0)
		env_info(v, "bench: the %s sgemm runs at %.2fx OpenBLAS as loaded", gemm_impl_name(
				 gemm_chosen()), b->sgemm / openblas);
	if (b->concurrent > 0.0)
		env_info(v, "bench: %d one-thread sgemms at once: %.1f GFLOP/s each (median, range "
			 "%.1f-%.1f); training reaches %.0f%% of their sum", b->ref.threads,
			 b->concurrent, b->concurrent_lo, b->concurrent_hi,
			 100.0 * of_rate(b, b->concurrent));
	env_info(v, "bench: time inside collectives (their barriers included, so waiting for the "
		 "slowest rank too): %.1f%% of window time on the rank that waits most, %.1f%% on "
		 "average over ranks", 100.0 * b->coll / b->seconds, 100.0 * b->coll_mean / b->seconds);
	env_info(v, "bench: per window (the rank that issues most): %.1f host synchronisations, "
		 "%.1f launches, %.1f device copies", per_window(b, b->counts.syncs),
		 per_window(b, b->counts.launches), per_window(b, b->counts.copies));
}

/* Rank q's GEMM rate over the one-thread sgemm's (*rate) and the share of window time
 * it spent in GEMMs (*share): their product is its GEMM FLOP per window second over
 * sgemm's, so the ratio training / (W x sgemm) is the mean over ranks of the products
 * when the GEMMs compute exactly the training math. Returns 1 with both set; 0 when the
 * rank issued no GEMM (both 0); -1 when they are not measured: no sgemm figure, or GEMMs
 * that the host did not wait for (a backend that only queues them). */
static int gemm_factors(const struct bench_result *b, int q, double *rate, double *share)
{
	*rate = *share = 0.0;
	if (b->sgemm <= 0.0 || b->seconds <= 0.0)
		return -1;
	if (b->gemm_flop[q] <= 0.0)
		return 0;
	if (b->gemm_seconds[q] <= 0.0)
		return -1;
	*rate = b->gemm_flop[q] * 1e-9 / b->gemm_seconds[q] / b->sgemm;
	*share = b->gemm_seconds[q] / b->seconds;
	return 1;
}

/* Where the ratio to sgemm goes, rank by rank: GEMMs slower inside the window than the
 * reference (the first factor) or time outside GEMMs (element operations, collectives,
 * waiting for a slower rank: the second). Returns the JSON array of the factors (NULL:
 * not measured). */
static json_t *report_gemm_factors(const struct env *v, const struct bench_result *b)
{
	int world = b->world;
	char line[1024];
	int at = 0;
	double flop = 0.0, rate, share;
	json_t *ranks = json_array();
	for (int q = 0; q < world; q++) {
		int measured = gemm_factors(b, q, &rate, &share);
		if (measured < 0) {
			json_decref(ranks);
			return NULL;
		}
		flop += b->gemm_flop[q];
		if (measured)
			at += snprintf(line + at, sizeof line - (size_t)at, "%s%d: %.1f GFLOP/s = "
				       "%.2f x sgemm, %.0f%% of window time", q ? "; " : "", q,
				       rate * b->sgemm, rate, 100.0 * share);
		else
			at += snprintf(line + at, sizeof line - (size_t)at, "%s%d: no GEMM",
				       q ? "; " : "", q);
		if (at >= (int)sizeof line)
			at = (int)sizeof line - 1;
		json_array_append_new(ranks, json_pack("{s:f, s:f, s:f}", "gemm_gflops",
						       rate * b->sgemm, "gemm_of_sgemm", rate,
						       "gemm_share_of_window", share));
	}
	double math = math_flop(b);
	env_info(v, "bench: GEMMs inside the window, rank by rank (their rate against the "
		 "one-thread sgemm, and the share of window time they take; the rest is element "
		 "operations, collectives and waiting): %s; the mean of the products is %.0f%% of "
		 "%s; the GEMMs computed %.2fx the training math's FLOP (above 1: products the "
		 "math does not need, such as attention's masked half, its recomputation or "
		 "padding rows)", line, 100.0 * flop * 1e-9 / b->seconds / (b->lanes * b->sgemm),
		 lanes_text(b), math > 0.0 ? flop / math : 0.0);
	return ranks;
}

/* Runs and prints one point of the size sweep: the model of kind `sweep` with its size
 * `size` and vocabulary `vocab`; appends it to `points`. */
static int sweep_point(const struct env *v, const struct model_sweep *sweep, int size,
		       int vocab, long windows, json_t *points, struct err *e)
{
	struct settings s = *v->s;
	struct env pv = *v;
	struct run r;
	struct bench_result b;
	/* the shape is what is measured: the synthetic source of that vocabulary stands in for
	 * whatever data the configuration reads, seeded parameters for any it loads, no class
	 * weights (theirs are the configured vocabulary's) */
	s.source = DATA_SYNTHETIC;
	s.model_vocab = 0;
	s.model_init[0] = '\0';
	s.class_weights[0] = '\0';
	sweep->set_size(&s, size);
	s.vocab = vocab;
	pv.s = &s;
	ERR_TRY(run_open(&pv, &r, e));
	int rc = bench_windows(&r, &s, 1, windows, 2.0, &b, e);
	run_close(&r);
	if (rc != ERR_OK) {
		err_prefix(e, "bench sweep, %s %d, vocab %d", sweep->key, size, vocab);
		return rc;
	}
	char pct[160] = "";
	if (b.sgemm > 0.0)
		snprintf(pct, sizeof pct, ", %.0f%% of %s (%.0f-%.0f%%; %.0f%% per CPU-second)",
			 100.0 * of_sgemm(&b), lanes_text(&b), 100.0 * of_rate(&b, b.sgemm_hi),
			 100.0 * of_rate(&b, b.sgemm_lo), 100.0 * of_sgemm_cpu(&b));
	env_info(v, "bench: sweep %s %4d vocab %4d: %8.0f tokens/s, %6.2f MFLOP per token%s",
		 sweep->key, size, vocab, tokens_per_s(&b), math_per_token(&b) * 1e-6, pct);
	json_array_append_new(points, json_pack("{s:i, s:i, s:I, s:f, s:f, s:f, s:f, s:[iii]}",
						sweep->key, size, "vocab", vocab, "tokens",
						(json_int_t)b.tokens, "seconds", b.seconds,
						"tokens_per_s", tokens_per_s(&b),
						"fraction_of_w_sgemm", of_sgemm(&b),
						"fraction_of_sgemm_per_cpu_s", of_sgemm_cpu(&b),
						"gemm", b.gemm.m, b.gemm.n, b.gemm.k));
	return ERR_OK;
}

/* the sweep's j-th vocabulary, `configured` standing for MODEL_SWEEP_VOCAB_CONFIGURED */
static int sweep_vocab(const struct model_sweep *sw, int j, int configured)
{
	return sw->vocabs[j] == MODEL_SWEEP_VOCAB_CONFIGURED ? configured : sw->vocabs[j];
}

/* The size sweep of the configured model (struct model_sweep), its points appended to
 * `points`; `vocab` is the configured model's vocabulary. */
static int size_sweep(const struct env *v, const struct model_ops *ops, int vocab,
		      long windows, json_t *points, struct err *e)
{
	const struct model_sweep *sw = ops->sweep;
	if (!sw) {
		env_info(v, "bench: no size sweep: model.kind = %s declares no size to vary",
			 ops->name);
		return ERR_OK;
	}
	for (int i = 0; i < sw->n_sizes && i < MODEL_SWEEP_MAX; i++)
		for (int j = 0; j < sw->n_vocabs && j < MODEL_SWEEP_MAX; j++) {
			int seen = 0; /* the configured vocabulary may be a listed one too */
			for (int q = 0; q < j; q++)
				seen |= sweep_vocab(sw, q, vocab) == sweep_vocab(sw, j, vocab);
			if (!seen)
				ERR_TRY(sweep_point(v, sw, sw->sizes[i], sweep_vocab(sw, j, vocab),
						    windows, points, e));
		}
	return ERR_OK;
}

/* The timed windows of a comparison, under settings o of a run of its own. */
static int bench_other(const struct env *v, const struct settings *o, long warmup,
		       long windows, struct bench_result *b, struct err *e)
{
	struct env pv = *v;
	struct run r;
	pv.s = o;
	ERR_TRY(run_open(&pv, &r, e));
	int rc = bench_windows(&r, o, warmup, windows, 0.0, b, e);
	run_close(&r);
	return rc;
}

/* Settings for the other mode of the comparison, into *o; 0 when the window shape has
 * none (exact mode needs W a power of two and W x accumulation shards, a power of two up
 * to 64), with the reason in why. */
static int other_mode(const struct settings *s, struct settings *o, char *why, size_t cap)
{
	int k = s->world * s->accumulation;
	*o = *s;
	if (s->shards > 0) {
		o->shards = 0;
		/* epochs draw from one pool, which the length bands do not */
		o->rank_split = s->shard_order == SHARD_ORDER_BALANCED ||
					s->sampling == SAMPLING_EPOCHS ? RANK_SPLIT_BALANCED
								       : RANK_SPLIT_LENGTH_BANDS;
		return 1;
	}
	if ((s->world & (s->world - 1)) || (k & (k - 1)) || k > SHARD_MAX) {
		snprintf(why, cap, "W = %d x accumulation %d = %d shards: exact mode needs powers of "
			 "two (at most %d shards)", s->world, s->accumulation, k, SHARD_MAX);
		return 0;
	}
	o->shards = k;
	o->shard_order = s->rank_split == RANK_SPLIT_BALANCED ? SHARD_ORDER_BALANCED : SHARD_ORDER_LENGTH;
	return 1;
}

/* Exact mode against the default mode (configured: the configured one's figures); the
 * JSON entry goes to *out (NULL when the shape has no exact mode). */
static int exact_vs_default(const struct env *v, const struct bench_result *configured,
			    long warmup, long windows, json_t **out, struct err *e)
{
	struct settings o;
	struct bench_result other;
	char why[160];
	*out = NULL;
	if (!other_mode(v->s, &o, why, sizeof why)) {
		env_info(v, "bench: no exact-mode comparison: %s", why);
		return ERR_OK;
	}
	ERR_TRY(bench_other(v, &o, warmup, windows, &other, e));
	const struct bench_result *ex = o.shards ? &other : configured;
	const struct bench_result *df = o.shards ? configured : &other;
	int k = o.shards ? o.shards : v->s->shards;
	double ratio = tokens_per_s(ex) / tokens_per_s(df);
	double cpu_ratio = (ex->tokens / ex->cpu_seconds) / (df->tokens / df->cpu_seconds);
	env_info(v, "bench: exact mode (%d shards) %.0f tokens/s, default mode %.0f tokens/s: "
		 "exact runs at %.1f%% of the default (%.1f%% per CPU-second)", k,
		 tokens_per_s(ex), tokens_per_s(df), 100.0 * ratio, 100.0 * cpu_ratio);
	*out = json_pack("{s:i, s:f, s:f, s:f, s:f}", "shards", k, "exact_tokens_per_s",
			 tokens_per_s(ex), "default_tokens_per_s", tokens_per_s(df), "ratio", ratio,
			 "ratio_per_cpu_s", cpu_ratio);
	return ERR_OK;
}

/* The other batching of the comparison, into *o; 0 when there is none (exact mode, or
 * a share too large for token batching), with the reason in why. */
static int other_batching(const struct settings *s, struct settings *o, char *why, size_t cap)
{
	*o = *s;
	o->batching = s->batching == BATCHING_TOKENS ? BATCHING_SEQUENCES : BATCHING_TOKENS;
	if (s->shards > 0)
		snprintf(why, cap, "exact mode cuts fixed shards");
	else if (s->accumulation * s->batch_size > SETTINGS_MAX_MICRO)
		snprintf(why, cap, "accumulation x batch_size = %d sequences per rank, more than "
			 "the %d microbatches token batching may need", s->accumulation *
			 s->batch_size, SETTINGS_MAX_MICRO);
	else
		return 1;
	return 0;
}

/* One side of the batching comparison as text: microbatches per rank and window, padded
 * positions per supervised token, waiting, rate. */
static void batching_text(const struct bench_result *b, int world, char *out, size_t cap)
{
	int at = snprintf(out, cap, "microbatches per rank");
	for (int r = 0; r < world && at < (int)cap; r++)
		at += snprintf(out + at, cap - (size_t)at, " %.1f", per_window(b, (uint64_t)b->micro[r]));
	if (at < (int)cap)
		snprintf(out + at, cap - (size_t)at, ", padded layout %.3f positions per supervised "
			 "token, collectives %.1f%% of window time on the rank that waits most, %.0f "
			 "tokens/s", b->tokens ? (double)b->padded / b->tokens : 0.0,
			 100.0 * b->coll / b->seconds, tokens_per_s(b));
}

/* The configured batching next to the other one (sequences / tokens), on the same draws:
 * how many microbatches each rank runs, how much the padded layout pads, how long the
 * ranks wait for each other. */
static int batching_vs_other(const struct env *v, const struct bench_result *configured,
			     long warmup, long windows, json_t **out, struct err *e)
{
	struct settings o;
	struct bench_result other;
	char why[160], text[2][400];
	*out = NULL;
	if (!other_batching(v->s, &o, why, sizeof why)) {
		env_info(v, "bench: no batching comparison: %s", why);
		return ERR_OK;
	}
	ERR_TRY(bench_other(v, &o, warmup, windows, &other, e));
	const struct bench_result *tok = o.batching == BATCHING_TOKENS ? &other : configured;
	const struct bench_result *seq = o.batching == BATCHING_TOKENS ? configured : &other;
	batching_text(seq, o.world, text[0], sizeof text[0]);
	batching_text(tok, o.world, text[1], sizeof text[1]);
	env_info(v, "bench: batching by sequences (plan %s, layout %s): %s",
		 rank_split_name(o.rank_split), o.layout == LAYOUT_PADDED ? "padded" : "packed",
		 text[0]);
	env_info(v, "bench: batching by tokens (micro_tokens %d): %s", o.micro_tokens, text[1]);
	*out = json_pack("{s:i, s:f, s:f, s:f, s:f, s:f, s:f}", "micro_tokens", o.micro_tokens,
			 "sequences_padded_per_token", (double)seq->padded / seq->tokens,
			 "tokens_padded_per_token", (double)tok->padded / tok->tokens,
			 "sequences_collective_share", seq->coll / seq->seconds,
			 "tokens_collective_share", tok->coll / tok->seconds,
			 "sequences_tokens_per_s", tokens_per_s(seq), "tokens_tokens_per_s",
			 tokens_per_s(tok));
	return ERR_OK;
}

int cmd_bench(struct app *a, struct err *e)
{
	const struct env *v = &a->env;
	const struct settings *s = v->s;
	struct run r;
	struct bench_result b;
	int rc;
	long windows = a->o.windows ? a->o.windows : 20;
	const long warmup = 2;
	if ((rc = env_outputs_ready(v, e)) != ERR_OK)
		return rc;
	if ((rc = run_open(v, &r, e)) != ERR_OK)
		return rc;
	const char *backend = engine_backend_name(r.eng);
	int r_cpu = r.eng->placement.backend == DEV_BACKEND_CPU;
	double openblas = 0.0;
	if (r.eng->placement.backend == DEV_BACKEND_CPU)
		openblas = report_gemm(v, largest_gemm(s, &r.eng->shape));
	env_info(v, "bench: %s backend, W = %d, plan %s, layout %s, %ld timed windows after %ld "
		 "warm-up", backend, s->world, rank_split_name(s->rank_split),
		 s->layout == LAYOUT_PADDED ? "padded" : "packed", windows, warmup);
	rc = bench_windows(&r, s, warmup, windows, 0.0, &b, e);
	struct mem_usage mem;
	int64_t corpus_bytes = (int64_t)r.corpus.map_len;
	mem_usage_read(&mem); /* what the timed windows held, before the run closes */
	const struct model_ops *ops = r.eng->shape.ops;
	int vocab = r.eng->shape.vocab;
	run_close(&r);
	if (rc != ERR_OK)
		return rc;
	report_main(v, &b, openblas);
	env_show_memory(v, "bench", &mem, corpus_bytes);
	json_t *gemm_ranks = report_gemm_factors(v, &b);

	json_t *points = a->o.sweep ? json_array() : NULL;
	if (points)
		rc = size_sweep(v, ops, vocab, windows, points, e);
	json_t *exact = NULL, *batching = NULL;
	if (rc == ERR_OK)
		rc = exact_vs_default(v, &b, warmup, windows, &exact, e);
	if (rc == ERR_OK)
		rc = batching_vs_other(v, &b, warmup, windows, &batching, e);
	if (rc != ERR_OK) {
		json_decref(points);
		json_decref(gemm_ranks);
		json_decref(exact);
		return rc;
	}
	json_t *j = json_pack("{s:s, s:s*, s:f, s:i, s:i, s:s, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, "
			      "s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:o*, s:o*, s:o*, s:o*}",
			      "backend", backend, "gemm", r_cpu ? gemm_impl_name(gemm_chosen()) : NULL,
			      "openblas_as_loaded_gflops", openblas, "world", s->world,
			      "threads_per_rank", b.threads, "plan",
			      rank_split_name(s->rank_split), "tokens",
			      (json_int_t)b.tokens, "seconds", b.seconds, "cpu_seconds", b.cpu_seconds,
			      "tokens_per_s", tokens_per_s(&b), "train_gflops",
			      train_gflops(&b), "sgemm_gflops_one_thread",
			      b.sgemm, "sgemm_gflops_min", b.sgemm_lo, "sgemm_gflops_max", b.sgemm_hi,
			      "sgemm_gflops_concurrent", b.concurrent, "fraction_of_concurrent_sgemm",
			      of_rate(&b, b.concurrent), "fraction_of_w_sgemm",
			      of_sgemm(&b),
			      "fraction_of_sgemm_per_cpu_s", of_sgemm_cpu(&b), "collective_share",
			      b.coll / b.seconds, "collective_share_mean", b.coll_mean / b.seconds,
			      "syncs_per_window", per_window(&b, b.counts.syncs), "launches_per_window",
			      per_window(&b, b.counts.launches), "copies_per_window",
			      per_window(&b, b.counts.copies), "gemm_per_rank", gemm_ranks, "sweep",
			      points, "exact_vs_default", exact, "batching", batching);
	json_object_set_new(j, "memory", json_pack("{s:I, s:I, s:I, s:I, s:I}", "resident",
						    (json_int_t)mem.resident, "anonymous",
						    (json_int_t)mem.anonymous, "file",
						    (json_int_t)mem.file, "peak", (json_int_t)mem.peak,
						    "corpus_mapped", (json_int_t)corpus_bytes));
	rc = env_write_json(v, output_name(OUT_BENCH), j, e);
	json_decref(j);
	return rc;
}
