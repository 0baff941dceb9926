/*
 * test-train: the training loop, checkpoints, resume and evaluation (src/train.c).
 *
 * On a tiny configuration built in code (CPU backend, a model of a few hundred
 * parameters) it checks that:
 *   - stopping at every step k = 1..updates-1 and resuming gives final parameters and
 *     momentum bit-identical (memcmp) to a continuous run, for W = 1 and 2, reduce sum and
 *     avg, momentum 0.9, and that the final checkpoint files are byte-identical too; the
 *     negative controls (momentum not restored, first-step rule not restored) must differ;
 *   - extra checkpoints (checkpoint_every) and a stop flag raised during training as a
 *     SIGTERM handler would (finish the window, checkpoint, ERR_INTERRUPTED naming the
 *     signal) resume to the same result;
 *   - a run stopped at 3 of 6 updates resumes to 8 updates (updates and stop_at are not
 *     math keys): at step 6 it equals the 6-update continuous run bit for bit, at step 8
 *     the 8-update one; a resume that would end before its checkpoint is refused;
 *   - a trainer stepped by hand as inspect steps it (trainer_step, local gradients
 *     captured, two window buffers) ends K steps where a K-step train_run ends: parameters,
 *     momentum, sampler state, counters and histories bit-identical, and its checkpoint
 *     byte-identical (also across skipped empty windows);
 *   - empty windows are skipped as steps without update (and resume exactly across them)
 *     or refused with ERR_EMPTY naming the window;
 *   - a corrupted byte, a truncated file, a deleted manifest, a deleted file, a changed
 *     corpus on disk, a changed math key and another normalization are each refused with
 *     ERR_DATA and their own message, while a changed non-math key is accepted;
 *   - evaluate equals a naive double-precision host computation of the same sums.
 */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check-run.h"
#include "checkpoint.h"
#include "ckpt.h"
#include "config.h"
#include "corpus.h"
#include "corpus_lock.h"
#include "corpus_store.h"
#include "env.h"
#include "evaluate.h"
#include "fsx.h"
#include "model.h"
#include "run.h"
#include "settings.h"
#include "train_loop.h"
#include "trainer.h"
#include "validation.h"
#include "window_mlp.h"

#define UPDATES 7

static char tmp_root[FSX_PATH_MAX];

static void make_tmp(void)
{
	const char *t = getenv("TMPDIR");
	snprintf(tmp_root, sizeof tmp_root, "%s/ddptok-test-train.XXXXXX", t && *t ? t : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(tmp_root));
}

static void remove_tmp(void)
{
	struct err e;
	err_clear(&e);
	fsx_remove_tree(tmp_root, &e);
}

/* out = a/b (asserting that it fits) */
static void pjoin(char *out, size_t cap, const char *a, const char *b)
{
	struct err e;
	err_clear(&e);
	ck_assert_msg(fsx_join(out, cap, a, b, &e) == ERR_OK, "%s", e.msg);
}

static void sub(char *out, size_t cap, const char *name)
{
	pjoin(out, cap, tmp_root, name);
}

/* A configuration and the env the core gets for it. Not copied once made: env points to
 * cfg and s. */
struct app {
	struct cfg cfg;
	struct settings s;
	struct env env;
};

/* An app on the tiny configuration, with NULL-terminated extra "section.key=value". */
static void app_make(struct app *a, const char *dir, ...)
{
	static const char *base[] = {
		"data.train=64", "data.validation=16", "data.test=32", "data.min_len=4",
		"data.max_len=16", "data.vocab=16", "model.context=3", "model.embed=4",
		"model.hidden=8", "train.accumulation=2", "train.batch_size=2", "train.lr=0.2",
		"train.momentum=0.9", "devices.world=2", "devices.backend=cpu", "run.log_level=quiet",
		NULL};
	struct err e;
	char buf[2 * FSX_PATH_MAX];
	va_list ap;
	memset(a, 0, sizeof *a);
	err_clear(&e);
	ck_assert_int_eq(cfg_init(&a->cfg, settings_keys, &e), ERR_OK);
	for (int i = 0; base[i]; i++)
		ck_assert_msg(cfg_set(&a->cfg, base[i], &e) == ERR_OK, "%s: %s", base[i], e.msg);
	snprintf(buf, sizeof buf, "train.updates=%d", UPDATES);
	ck_assert_int_eq(cfg_set(&a->cfg, buf, &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&a->cfg, "train.stop_at=3", &e), ERR_OK);
	snprintf(buf, sizeof buf, "run.outputs=%s/%s/outputs", tmp_root, dir);
	ck_assert_int_eq(cfg_set(&a->cfg, buf, &e), ERR_OK);
	snprintf(buf, sizeof buf, "run.artifacts=%s/%s/artifacts", tmp_root, dir);
	ck_assert_int_eq(cfg_set(&a->cfg, buf, &e), ERR_OK);
	va_start(ap, dir);
	for (const char *s = va_arg(ap, const char *); s; s = va_arg(ap, const char *))
		ck_assert_msg(cfg_set(&a->cfg, s, &e) == ERR_OK, "%s: %s", s, e.msg);
	va_end(ap);
	ck_assert_msg(settings_from_cfg(&a->cfg, &a->s, &e) == ERR_OK, "%s", e.msg);
	env_init(&a->env, &a->cfg, &a->s);
}

static void app_drop(struct app *a)
{
	cfg_free(&a->cfg);
}

/* Trains up to `stop` (from `resume` when not NULL) with checkpoints under `root`. */
static int train_to(struct app *a, int64_t stop, const char *resume, const char *root,
		    struct train_result *res, struct err *e)
{
	struct train_opts o;
	memset(&o, 0, sizeof o);
	o.stop_at = stop;
	o.resume_dir = resume;
	o.mode = a->s.normalization;
	o.checkpoint_every = a->s.checkpoint_every;
	snprintf(o.ckpt_root, sizeof o.ckpt_root, "%s", root);
	err_clear(e);
	return train_run(&a->env, &o, res, e);
}

static void must_train(struct app *a, int64_t stop, const char *resume, const char *root,
		       struct train_result *res)
{
	struct err e;
	int rc = train_to(a, stop, resume, root, res, &e);
	ck_assert_msg(rc == ERR_OK, "train to %lld: %s", (long long)stop, e.msg);
	ck_assert_int_eq(res->step, stop);
	ck_assert_int_eq(res->interrupted, 0);
}

static void ckpt_path(char *out, size_t cap, const char *root, int64_t step)
{
	char name[32];
	ckpt_step_name((uint64_t)step, name, sizeof name);
	pjoin(out, cap, root, name);
}

static void same_file(const char *a, const char *b)
{
	char *x = NULL, *y = NULL;
	size_t nx, ny;
	struct err e;
	err_clear(&e);
	ck_assert_msg(fsx_read_all(a, &x, &nx, &e) == ERR_OK, "%s", e.msg);
	ck_assert_msg(fsx_read_all(b, &y, &ny, &e) == ERR_OK, "%s", e.msg);
	ck_assert_msg(nx == ny && memcmp(x, y, nx) == 0, "%s and %s differ", a, b);
	free(x);
	free(y);
}

static void same_result(const struct train_result *r, const struct train_result *c,
			const char *what)
{
	size_t ndiff;
	ck_assert_uint_eq(r->n, c->n);
	double d = train_max_abs_diff(r->params, c->params, r->n, &ndiff);
	ck_assert_msg(memcmp(r->params, c->params, r->n * sizeof(float)) == 0,
		      "%s: params differ from the continuous run (%zu values, max %g)", what, ndiff,
		      d);
	ck_assert_uint_eq(r->state_n, c->state_n);
	ck_assert_msg(memcmp(r->momentum, c->momentum, r->state_n * sizeof(float)) == 0,
		      "%s: the optimizer's state differs from the continuous run", what);
	ck_assert_int_eq(r->updates_done, c->updates_done);
	ck_assert_msg(memcmp(r->hist, c->hist, sizeof r->hist) == 0, "%s: rank histories differ",
		      what);
}

/* ---- resume equality at every stop point ---- */

static void resume_everywhere(int world, const char *reduce)
{
	struct app a;
	struct train_result cont, stop, res;
	char dir[64], w[32], rd[32], croot[FSX_PATH_MAX], sroot[FSX_PATH_MAX],
		rroot[FSX_PATH_MAX], p[FSX_PATH_MAX], q[FSX_PATH_MAX];
	snprintf(dir, sizeof dir, "w%d-%s", world, reduce);
	snprintf(w, sizeof w, "devices.world=%d", world);
	snprintf(rd, sizeof rd, "devices.reduce=%s", reduce);
	make_tmp();
	app_make(&a, dir, w, rd, NULL);
	sub(croot, sizeof croot, "cont");
	sub(sroot, sizeof sroot, "stop");
	sub(rroot, sizeof rroot, "res");
	must_train(&a, UPDATES, NULL, croot, &cont);
	ck_assert_int_eq(cont.updates_done, UPDATES);
	ck_assert_int_eq(cont.hist[0].windows, UPDATES);
	for (int k = 1; k < UPDATES; k++) {
		char ck[FSX_PATH_MAX];
		must_train(&a, k, NULL, sroot, &stop);
		ckpt_path(ck, sizeof ck, sroot, k);
		ck_assert_str_eq(stop.checkpoint, ck);
		/* the stopped run is a prefix of the continuous one, so its state differs */
		ck_assert(memcmp(stop.params, cont.params, cont.n * sizeof(float)) != 0);
		must_train(&a, UPDATES, ck, rroot, &res);
		ck_assert_int_eq(res.start_step, k);
		char what[64];
		snprintf(what, sizeof what, "W=%d %s stop at %d", world, reduce, k);
		same_result(&res, &cont, what);
		/* the final checkpoints are byte-identical, file by file */
		static const char *files[] = {"params.npy", "momentum.npy", "state.json",
					      "rank-0.json", "data.lock", "config.ini", NULL};
		for (int f = 0; files[f]; f++) {
			char d[FSX_PATH_MAX];
			ckpt_path(d, sizeof d, rroot, UPDATES);
			pjoin(p, sizeof p, d, files[f]);
			ckpt_path(d, sizeof d, croot, UPDATES);
			pjoin(q, sizeof q, d, files[f]);
			same_file(p, q);
		}
		train_result_free(&stop);
		train_result_free(&res);
	}
	train_result_free(&cont);
	app_drop(&a);
	remove_tmp();
}

START_TEST(test_resume_w1_sum) { resume_everywhere(1, "sum"); }
END_TEST
START_TEST(test_resume_w1_avg) { resume_everywhere(1, "avg"); }
END_TEST
START_TEST(test_resume_w2_sum) { resume_everywhere(2, "sum"); }
END_TEST
START_TEST(test_resume_w2_avg) { resume_everywhere(2, "avg"); }
END_TEST

/* Resuming without the momentum buffers, or with the first-step rule re-applied, must NOT
 * reproduce the continuous run: the equality above depends on both being restored. */
START_TEST(test_resume_negative_controls)
{
	struct app a;
	struct train_result cont, stop;
	struct checkpoint ck;
	struct corpus c;
	struct run r;
	struct err e;
	char croot[FSX_PATH_MAX], sroot[FSX_PATH_MAX], dir[FSX_PATH_MAX];
	make_tmp();
	app_make(&a, "neg", NULL);
	sub(croot, sizeof croot, "cont");
	sub(sroot, sizeof sroot, "stop");
	must_train(&a, UPDATES, NULL, croot, &cont);
	must_train(&a, 3, NULL, sroot, &stop);
	ckpt_path(dir, sizeof dir, sroot, 3);
	for (int variant = 0; variant < 3; variant++) {
		err_clear(&e);
		ck_assert_int_eq(run_corpus(&a.env, 0, &c, &e), ERR_OK);
		ck_assert_msg(checkpoint_load(&a.env, dir, &c, CHECKPOINT_CHECK_ALL, &ck, &e) == ERR_OK, "%s",
			      e.msg);
		ck_assert_int_eq(ck.step, 3);
		ck_assert_int_eq(ck.updates_done, 3);
		ck_assert_int_eq(checkpoint_open_run(&a.env, &ck, &r, &c, &e), ERR_OK);
		float *params = malloc(ck.n * sizeof(float)), *momentum = malloc(ck.n * sizeof(float));
		ck_assert_int_eq(checkpoint_read_vector(&ck, ENGINE_VEC_PARAMS, params, &e), ERR_OK);
		ck_assert_int_eq(checkpoint_read_vector(&ck, 0, momentum, &e), ERR_OK);
		if (variant == 1) /* momentum lost */
			ck_assert_int_eq(engine_set_state(r.eng, params, NULL, 3, &e), ERR_OK);
		if (variant == 2) /* first step rule re-applied (buf = g) */
			ck_assert_int_eq(engine_set_state(r.eng, params, momentum, 0, &e), ERR_OK);
		free(params);
		free(momentum);
		for (int k = 3; k < UPDATES; k++) {
			struct window_result wr;
			ck_assert_int_eq(sampler_next(&r.sampler, &r.w, &e), ERR_OK);
			ck_assert_int_eq(engine_window(r.eng, &r.w, a.s.normalization, ENGINE_UPDATE, &wr,
						       &e), ERR_OK);
		}
		float *p = malloc(cont.n * sizeof(float));
		ck_assert_int_eq(engine_get_state(r.eng, p, NULL, &e), ERR_OK);
		int same = memcmp(p, cont.params, cont.n * sizeof(float)) == 0;
		if (variant == 0)
			ck_assert_msg(same, "the hand-driven resume must equal the continuous run");
		else
			ck_assert_msg(!same, "negative control %d went unnoticed", variant);
		free(p);
		run_close(&r);
		checkpoint_free(&ck);
	}
	train_result_free(&cont);
	train_result_free(&stop);
	app_drop(&a);
	remove_tmp();
}
END_TEST

/* [train] updates and stop_at are not math keys: a run stopped at 3 of 6 updates may be
 * continued to 8 (with another stop_at too). Its step 6 is the 6-update continuous run's
 * step 6 bit for bit (the sampler, the model and the optimizer never read updates), and
 * its step 8 the 8-update continuous run's. A resume that would end before the
 * checkpoint's step is refused. */
START_TEST(test_resume_to_more_updates)
{
	struct app a6, a8, a4;
	struct train_result cont6, cont8, stop, res;
	struct checkpoint ck6;
	struct corpus c;
	struct err e;
	char c6[FSX_PATH_MAX], c8[FSX_PATH_MAX], sroot[FSX_PATH_MAX], rroot[FSX_PATH_MAX],
		ck[FSX_PATH_MAX], p[FSX_PATH_MAX], q[FSX_PATH_MAX], d[FSX_PATH_MAX];
	make_tmp();
	app_make(&a6, "longer", "train.updates=6", NULL);
	/* another length, another stop_at, a checkpoint at step 6 on the way */
	app_make(&a8, "longer", "train.updates=8", "train.stop_at=5", "train.checkpoint_every=6",
		 NULL);
	sub(c6, sizeof c6, "cont6");
	sub(c8, sizeof c8, "cont8");
	sub(sroot, sizeof sroot, "stop");
	sub(rroot, sizeof rroot, "res");
	must_train(&a6, 6, NULL, c6, &cont6);
	must_train(&a8, 8, NULL, c8, &cont8);
	/* the two continuous runs end in different states: the comparisons below can fail */
	ck_assert(memcmp(cont6.params, cont8.params, cont6.n * sizeof(float)) != 0);
	must_train(&a6, 3, NULL, sroot, &stop);
	ckpt_path(ck, sizeof ck, sroot, 3);

	int rc = train_to(&a8, 8, ck, rroot, &res, &e);
	ck_assert_msg(rc == ERR_OK, "resume to 8 updates refused: %s", e.msg);
	ck_assert_int_eq(res.start_step, 3);
	ck_assert_int_eq(res.step, 8);
	same_result(&res, &cont8, "stopped at 3 of 6, resumed to 8");

	/* its step-6 checkpoint holds the 6-update continuous run's final state */
	ckpt_path(d, sizeof d, rroot, 6);
	err_clear(&e);
	ck_assert_int_eq(run_corpus(&a6.env, 0, &c, &e), ERR_OK);
	ck_assert_msg(checkpoint_load(&a6.env, d, &c, CHECKPOINT_CHECK_ALL, &ck6, &e) == ERR_OK, "%s",
		      e.msg);
	ck_assert_int_eq(ck6.step, 6);
	ck_assert_int_eq(ck6.updates_done, cont6.updates_done);
	ck_assert_uint_eq(ck6.n, cont6.n);
	float *v6 = malloc(cont6.n * sizeof(float));
	ck_assert_int_eq(checkpoint_read_vector(&ck6, ENGINE_VEC_PARAMS, v6, &e), ERR_OK);
	ck_assert_msg(memcmp(v6, cont6.params, cont6.n * sizeof(float)) == 0,
		      "step 6 of the lengthened run differs from the 6-update run");
	ck_assert_int_eq(checkpoint_read_vector(&ck6, 0, v6, &e), ERR_OK);
	ck_assert_msg(memcmp(v6, cont6.momentum, cont6.n * sizeof(float)) == 0,
		      "momentum at step 6 differs from the 6-update run");
	free(v6);
	ck_assert_msg(memcmp(ck6.hist, cont6.hist, sizeof ck6.hist) == 0, "histories differ");
	/* every file but config.ini (which records updates = 8) is byte-identical */
	static const char *files[] = {"params.npy", "momentum.npy", "state.json", "rank-0.json",
				      "rank-1.json", "data.lock", NULL};
	for (int f = 0; files[f]; f++) {
		pjoin(p, sizeof p, d, files[f]);
		char c6dir[FSX_PATH_MAX];
		ckpt_path(c6dir, sizeof c6dir, c6, 6);
		pjoin(q, sizeof q, c6dir, files[f]);
		same_file(p, q);
	}
	checkpoint_free(&ck6);
	corpus_free(&c);
	train_result_free(&res);

	/* a run that ends before the checkpoint's step is refused, and writes nothing */
	app_make(&a4, "longer", "train.updates=4", NULL);
	char r4[FSX_PATH_MAX];
	sub(r4, sizeof r4, "res4");
	ckpt_path(d, sizeof d, rroot, 6);
	rc = train_to(&a4, 4, d, r4, &res, &e);
	ck_assert_int_eq(rc, ERR_CONFIG);
	ck_assert_msg(strstr(e.msg, "step 6") && strstr(e.msg, "updates"), "%s", e.msg);
	ck_assert(!fsx_exists(r4));

	train_result_free(&cont6);
	train_result_free(&cont8);
	train_result_free(&stop);
	app_drop(&a4);
	app_drop(&a6);
	app_drop(&a8);
	remove_tmp();
}
END_TEST

/* AdamW with a cosine schedule after a warmup, clipping and decay, in the default mode:
 * stopped at 3 and resumed, it ends where the continuous run does (parameters, both
 * moments, histories; the final checkpoints' files byte for byte). A checkpoint of one
 * optimizer is refused under the other, naming both. */
START_TEST(test_resume_adamw)
{
	struct app a, sgd;
	struct train_result cont, stop, res;
	struct err e;
	char croot[FSX_PATH_MAX], sroot[FSX_PATH_MAX], rroot[FSX_PATH_MAX], ck[FSX_PATH_MAX],
		p[FSX_PATH_MAX], q[FSX_PATH_MAX], d[FSX_PATH_MAX];
	make_tmp();
	app_make(&a, "adamw", "train.optimizer=adamw", "train.lr=0.01", "train.schedule=cosine",
		 "train.warmup=2", "train.lr_min=0.001", "train.clip=0.25",
		 "train.weight_decay=0.1", NULL);
	sub(croot, sizeof croot, "cont");
	sub(sroot, sizeof sroot, "stop");
	sub(rroot, sizeof rroot, "res");
	must_train(&a, UPDATES, NULL, croot, &cont);
	ck_assert_uint_eq(cont.state_n, 2 * cont.n);
	must_train(&a, 3, NULL, sroot, &stop);
	ckpt_path(ck, sizeof ck, sroot, 3);
	must_train(&a, UPDATES, ck, rroot, &res);
	same_result(&res, &cont, "adamw, stopped at 3");
	static const char *files[] = {"params.npy", "exp_avg.npy", "exp_avg_sq.npy", "state.json",
				      "rank-1.json", NULL};
	for (int f = 0; files[f]; f++) {
		ckpt_path(d, sizeof d, rroot, UPDATES);
		pjoin(p, sizeof p, d, files[f]);
		ckpt_path(d, sizeof d, croot, UPDATES);
		pjoin(q, sizeof q, d, files[f]);
		same_file(p, q);
	}
	pjoin(p, sizeof p, ck, "momentum.npy");
	ck_assert_msg(!fsx_exists(p), "an AdamW checkpoint holds momentum.npy");
	train_result_free(&res);

	/* SGD cannot continue AdamW's state, nor AdamW SGD's */
	app_make(&sgd, "adamw", NULL);
	sub(rroot, sizeof rroot, "res-sgd");
	ck_assert_int_eq(train_to(&sgd, UPDATES, ck, rroot, &res, &e), ERR_DATA);
	ck_assert_msg(strstr(e.msg, "train.optimizer = adamw") && strstr(e.msg, "uses sgd"), "%s",
		      e.msg);
	train_result_free(&res);
	sub(sroot, sizeof sroot, "stop-sgd");
	train_result_free(&stop);
	must_train(&sgd, 3, NULL, sroot, &stop);
	ckpt_path(ck, sizeof ck, sroot, 3);
	sub(rroot, sizeof rroot, "res-adamw");
	ck_assert_int_eq(train_to(&a, UPDATES, ck, rroot, &res, &e), ERR_DATA);
	ck_assert_msg(strstr(e.msg, "train.optimizer = sgd") && strstr(e.msg, "uses adamw"), "%s",
		      e.msg);
	train_result_free(&res);
	train_result_free(&stop);
	train_result_free(&cont);
	app_drop(&a);
	app_drop(&sgd);
	remove_tmp();
}
END_TEST

/* ---- checkpoint_every and signals ---- */

START_TEST(test_checkpoint_every)
{
	struct app a;
	struct train_result cont, all, res;
	char croot[FSX_PATH_MAX], eroot[FSX_PATH_MAX], rroot[FSX_PATH_MAX], p[FSX_PATH_MAX];
	make_tmp();
	app_make(&a, "every", "train.checkpoint_every=2", NULL);
	sub(croot, sizeof croot, "cont");
	sub(eroot, sizeof eroot, "every");
	sub(rroot, sizeof rroot, "res");
	must_train(&a, UPDATES, NULL, croot, &cont);
	must_train(&a, UPDATES, NULL, eroot, &all);
	same_result(&all, &cont, "with extra checkpoints");
	ck_assert_int_eq(all.checkpoints_written, UPDATES / 2 + 1);
	for (int k = 1; k <= UPDATES; k++) {
		struct err e;
		err_clear(&e);
		ckpt_path(p, sizeof p, eroot, k);
		int expect = k % 2 == 0 || k == UPDATES;
		ck_assert_msg(fsx_exists(p) == expect, "step %d: checkpoint %s", k,
			      expect ? "missing" : "unexpected");
		if (!expect)
			continue;
		ck_assert_msg(ckpt_verify(p, NULL, &e) == ERR_OK, "%s", e.msg);
		if (k == UPDATES)
			continue;
		must_train(&a, UPDATES, p, rroot, &res);
		same_result(&res, &cont, "resume from a periodic checkpoint");
		train_result_free(&res);
	}
	train_result_free(&cont);
	train_result_free(&all);
	app_drop(&a);
	remove_tmp();
}
END_TEST

/* The stop flag as a driver's signal handler raises it (cli_signals.c). */
static volatile sig_atomic_t stop_flag;

static int stop_at_4(void *arg, int64_t step, const struct window_result *wr)
{
	(void)arg;
	(void)wr;
	if (step == 4)
		stop_flag = SIGTERM;
	return 0;
}

START_TEST(test_sigterm_checkpoints_and_resumes)
{
	struct app a;
	struct train_result cont, res, res2;
	struct train_opts o;
	struct err e;
	char croot[FSX_PATH_MAX], sroot[FSX_PATH_MAX], rroot[FSX_PATH_MAX], want[FSX_PATH_MAX];
	make_tmp();
	app_make(&a, "sig", NULL);
	sub(croot, sizeof croot, "cont");
	sub(sroot, sizeof sroot, "stop");
	sub(rroot, sizeof rroot, "res");
	must_train(&a, UPDATES, NULL, croot, &cont);

	stop_flag = 0;
	a.env.stop = &stop_flag;
	memset(&o, 0, sizeof o);
	o.stop_at = UPDATES;
	o.mode = a.s.normalization;
	o.on_window = stop_at_4;
	snprintf(o.ckpt_root, sizeof o.ckpt_root, "%s", sroot);
	err_clear(&e);
	int rc = train_run(&a.env, &o, &res, &e);
	ck_assert_int_eq(rc, ERR_INTERRUPTED);
	ck_assert_int_eq(res.interrupted, 1);
	ck_assert_int_eq(res.step, 4); /* the window in flight was finished, nothing more */
	ckpt_path(want, sizeof want, sroot, 4);
	ck_assert_str_eq(res.checkpoint, want);
	ck_assert_msg(strstr(e.msg, "SIGTERM") && strstr(e.msg, want), "message: %s", e.msg);
	a.env.stop = NULL;
	err_clear(&e);
	ck_assert_msg(ckpt_verify(want, NULL, &e) == ERR_OK, "%s", e.msg);

	must_train(&a, UPDATES, want, rroot, &res2);
	same_result(&res2, &cont, "resume after SIGTERM");
	train_result_free(&res);
	train_result_free(&res2);
	train_result_free(&cont);
	app_drop(&a);
	remove_tmp();
}
END_TEST

/* ---- empty windows ---- */

/* Rewrites <outputs>/corpus so that every third training sequence has no supervised
 * position (prefix = length). */
static void write_hollow_corpus(struct app *a)
{
	struct corpus c;
	struct err e;
	char dir[FSX_PATH_MAX];
	err_clear(&e);
	ck_assert_int_eq(corpus_build(&a->s, &c, &e), ERR_OK);
	for (int i = 0; i < c.split_count[SPLIT_TRAIN]; i += 3)
		c.prefix[i] = corpus_len(&c, i);
	ck_assert_int_eq(corpus_compute_lock(&c, c.lock, &e), ERR_OK);
	pjoin(dir, sizeof dir, a->s.outputs, "corpus");
	ck_assert_msg(corpus_save(&c, NULL, dir, &e) == ERR_OK, "%s", e.msg);
	corpus_free(&c);
}

START_TEST(test_empty_windows)
{
	struct app a, b;
	struct train_result cont, stop, res;
	struct err e;
	char croot[FSX_PATH_MAX], sroot[FSX_PATH_MAX], rroot[FSX_PATH_MAX], ck[FSX_PATH_MAX];
	make_tmp();
	/* one sequence per window: a third of the windows are empty */
	app_make(&a, "empty", "devices.world=1", "train.accumulation=1", "train.batch_size=1",
		 "train.empty_window=skip", "train.updates=12", NULL);
	write_hollow_corpus(&a);
	sub(croot, sizeof croot, "cont");
	sub(sroot, sizeof sroot, "stop");
	sub(rroot, sizeof rroot, "res");
	must_train(&a, 12, NULL, croot, &cont);
	ck_assert_msg(cont.skipped > 0 && cont.skipped < 12, "skipped %lld",
		      (long long)cont.skipped);
	ck_assert_int_eq(cont.updates_done, 12 - cont.skipped);
	ck_assert_int_eq(cont.hist[0].windows, 12);
	for (int k = 1; k < 12; k++) {
		must_train(&a, k, NULL, sroot, &stop);
		ckpt_path(ck, sizeof ck, sroot, k);
		must_train(&a, 12, ck, rroot, &res);
		char what[64];
		snprintf(what, sizeof what, "empty windows, stop at %d", k);
		same_result(&res, &cont, what);
		train_result_free(&stop);
		train_result_free(&res);
	}
	/* the same corpus with empty_window = error stops at the first empty window */
	app_make(&b, "empty", "devices.world=1", "train.accumulation=1", "train.batch_size=1",
		 "train.empty_window=error", "train.updates=12", NULL);
	int rc = train_to(&b, 12, NULL, sroot, &res, &e);
	ck_assert_int_eq(rc, ERR_EMPTY);
	ck_assert_msg(strstr(e.msg, "window") && strstr(e.msg, "no supervised token"), "%s", e.msg);
	train_result_free(&cont);
	app_drop(&a);
	app_drop(&b);
	remove_tmp();
}
END_TEST

/* ---- the trainer stepped by hand (as inspect's `step` does) equals train_run ---- */

/* Steps a trainer opened as inspect opens it k times, alternating two window buffers and
 * capturing the local gradients as inspect does, and checks that it ends where train_run
 * of k steps ended (run written to root): parameters, momentum, sampler state, counters,
 * histories, and a checkpoint byte-identical to the run's. */
static int64_t hand_steps_equal_run(struct app *a, int64_t k, const char *root,
				    const char *hroot)
{
	struct train_result run;
	struct train_opts o;
	struct trainer t;
	struct checkpoint ck;
	struct corpus c;
	struct window extra;
	struct err e;
	char want[FSX_PATH_MAX], got[FSX_PATH_MAX];
	must_train(a, k, NULL, root, &run);
	ckpt_path(want, sizeof want, root, k);
	err_clear(&e);
	memset(&o, 0, sizeof o);
	o.mode = TRAIN_MODE_ANY;
	ck_assert_msg(trainer_open(&t, &a->env, &o, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(window_init(&extra, a->s.world, a->s.accumulation, a->s.batch_size, &e),
			 ERR_OK);
	float *p = malloc(run.n * sizeof(float)), *m = malloc(run.n * sizeof(float));
	ck_assert(p && m);
	for (int64_t i = 0; i < k; i++) {
		struct window_result wr;
		if (i == k - 1) { /* one step short, the state cannot be the run's */
			ck_assert_int_eq(engine_get_state(t.r.eng, p, NULL, &e), ERR_OK);
			ck_assert(memcmp(p, run.params, run.n * sizeof(float)) != 0);
		}
		ck_assert_msg(trainer_step(&t, i % 2 ? &extra : &t.r.w, ENGINE_CAPTURE_LOCAL, &wr,
					   &e) == ERR_OK, "%s", e.msg);
	}
	ck_assert_int_eq(engine_get_state(t.r.eng, p, m, &e), ERR_OK);
	ck_assert_msg(memcmp(p, run.params, run.n * sizeof(float)) == 0, "parameters differ");
	ck_assert_msg(memcmp(m, run.momentum, run.n * sizeof(float)) == 0, "momentum differs");
	ck_assert_int_eq(t.step, run.step);
	ck_assert_int_eq(t.r.eng->updates_done, run.updates_done);
	ck_assert_int_eq(t.skipped, run.skipped);
	ck_assert(memcmp(t.hist, run.hist, sizeof t.hist) == 0);
	ck_assert_int_eq(t.run_mode, a->s.normalization);
	/* the sampler is where the run's checkpoint says it is */
	ck_assert_int_eq(run_corpus(&a->env, 0, &c, &e), ERR_OK);
	ck_assert_msg(checkpoint_load(&a->env, want, &c, CHECKPOINT_CHECK_ALL, &ck, &e) == ERR_OK, "%s",
		      e.msg);
	struct sampler_state ss;
	sampler_get_state(&t.r.sampler, &ss);
	ck_assert(memcmp(&ss, &ck.sampler, sizeof ss) == 0);
	/* and a checkpoint of it is the run's, byte for byte */
	ck_assert_msg(trainer_checkpoint(&t, hroot, got, sizeof got, &e) == ERR_OK, "%s", e.msg);
	const char *files[] = {"params.npy", "momentum.npy", "state.json", "config.ini",
			       "data.lock", "rank-0.json", "rank-1.json"};
	for (int i = 0; i < 5 + a->s.world; i++) {
		char x[FSX_PATH_MAX], y[FSX_PATH_MAX];
		pjoin(x, sizeof x, want, files[i]);
		pjoin(y, sizeof y, got, files[i]);
		same_file(x, y);
	}
	free(p);
	free(m);
	window_free(&extra);
	checkpoint_free(&ck);
	corpus_free(&c);
	ck_assert_int_eq(trainer_close(&t, &e), ERR_OK);
	train_result_free(&run);
	return t.skipped;
}

START_TEST(test_hand_steps_equal_train_run)
{
	struct app a, b;
	char root[FSX_PATH_MAX], hroot[FSX_PATH_MAX];
	make_tmp();
	app_make(&a, "hand", NULL);
	sub(root, sizeof root, "hand-run");
	sub(hroot, sizeof hroot, "hand-steps");
	ck_assert_int_eq(a.s.world, 2);
	hand_steps_equal_run(&a, 5, root, hroot);
	/* with empty windows skipped on the way */
	app_make(&b, "hand-empty", "devices.world=1", "train.accumulation=1",
		 "train.batch_size=1", "train.empty_window=skip", "train.updates=12", NULL);
	write_hollow_corpus(&b);
	sub(root, sizeof root, "hand-empty-run");
	sub(hroot, sizeof hroot, "hand-empty-steps");
	ck_assert_int_gt(hand_steps_equal_run(&b, 9, root, hroot), 0);
	app_drop(&a);
	app_drop(&b);
	remove_tmp();
}
END_TEST

/* ---- refusals ---- */

static void copy_dir(const char *from, const char *to)
{
	char **names;
	size_t n;
	struct err e;
	err_clear(&e);
	ck_assert_int_eq(fsx_list_dir(from, &names, &n, &e), ERR_OK);
	ck_assert_int_eq(fsx_mkdirs(to, &e), ERR_OK);
	for (size_t i = 0; i < n; i++) {
		char a[FSX_PATH_MAX], b[FSX_PATH_MAX], *buf;
		size_t len;
		pjoin(a, sizeof a, from, names[i]);
		pjoin(b, sizeof b, to, names[i]);
		ck_assert_int_eq(fsx_read_all(a, &buf, &len, &e), ERR_OK);
		ck_assert_int_eq(fsx_write_durable(b, buf, len, &e), ERR_OK);
		free(buf);
	}
	fsx_free_names(names, n);
}

/* Expects resuming from dir to be refused with ERR_DATA and every needle in the message;
 * returns the message (static buffer slot i). */
static char refusal[8][1024];

static void expect_refused(struct app *a, const char *dir, int slot, ...)
{
	struct train_result res;
	struct err e;
	char root[FSX_PATH_MAX];
	va_list ap;
	sub(root, sizeof root, "refused-out");
	int rc = train_to(a, UPDATES, dir, root, &res, &e);
	ck_assert_msg(rc == ERR_DATA, "resume from %s: rc %d (%s), expected ERR_DATA", dir, rc,
		      e.msg);
	va_start(ap, slot);
	for (const char *s = va_arg(ap, const char *); s; s = va_arg(ap, const char *))
		ck_assert_msg(strstr(e.msg, s), "message '%s' lacks '%s'", e.msg, s);
	va_end(ap);
	ck_assert_msg(!fsx_exists(root), "a refused resume wrote a checkpoint");
	snprintf(refusal[slot], sizeof refusal[slot], "%s", e.msg);
}

START_TEST(test_refusals)
{
	struct app a, hid, quiet;
	struct train_result stop, ok;
	struct err e;
	char sroot[FSX_PATH_MAX], good[FSX_PATH_MAX], bad[FSX_PATH_MAX], p[FSX_PATH_MAX],
		corpus_dir[FSX_PATH_MAX], rroot[FSX_PATH_MAX];
	make_tmp();
	app_make(&a, "ref", NULL);
	sub(sroot, sizeof sroot, "stop");
	sub(rroot, sizeof rroot, "res");
	must_train(&a, 3, NULL, sroot, &stop);
	ckpt_path(good, sizeof good, sroot, 3);

	/* 0: one byte of params.npy altered */
	sub(bad, sizeof bad, "c0/step-0003");
	copy_dir(good, bad);
	pjoin(p, sizeof p, bad, "params.npy");
	{
		FILE *f = fopen(p, "r+b");
		ck_assert_ptr_nonnull(f);
		fseek(f, 200, SEEK_SET);
		int ch = fgetc(f);
		fseek(f, 200, SEEK_SET);
		fputc(ch ^ 0x10, f);
		fclose(f);
	}
	expect_refused(&a, bad, 0, "digest mismatch", "params.npy", NULL);

	/* 1: momentum.npy truncated */
	sub(bad, sizeof bad, "c1/step-0003");
	copy_dir(good, bad);
	pjoin(p, sizeof p, bad, "momentum.npy");
	ck_assert_int_eq(truncate(p, 100), 0);
	expect_refused(&a, bad, 1, "size mismatch", "momentum.npy", "truncated", NULL);

	/* 2: manifest deleted */
	sub(bad, sizeof bad, "c2/step-0003");
	copy_dir(good, bad);
	pjoin(p, sizeof p, bad, "MANIFEST.json");
	ck_assert_int_eq(unlink(p), 0);
	expect_refused(&a, bad, 2, "MANIFEST.json", "incomplete", NULL);

	/* 3: a listed file deleted */
	sub(bad, sizeof bad, "c3/step-0003");
	copy_dir(good, bad);
	pjoin(p, sizeof p, bad, "rank-1.json");
	ck_assert_int_eq(unlink(p), 0);
	expect_refused(&a, bad, 3, "missing file", "rank-1.json", NULL);

	/* 4: a math key changed */
	app_make(&hid, "ref", "model.hidden=9", NULL);
	expect_refused(&hid, good, 4, "another configuration", "model.hidden", "9 != 8", NULL);

	/* 5: another normalization requested by the caller */
	{
		struct train_opts o;
		struct train_result res;
		memset(&o, 0, sizeof o);
		o.stop_at = UPDATES;
		o.resume_dir = good;
		o.mode = NORM_MEAN_OF_MEANS;
		err_clear(&e);
		ck_assert_int_eq(train_run(&a.env, &o, &res, &e), ERR_DATA);
		ck_assert_msg(strstr(e.msg, "normalization") && strstr(e.msg, "mean_of_means"), "%s",
			      e.msg);
		snprintf(refusal[5], sizeof refusal[5], "%s", e.msg);
	}

	/* a non-math key may change: accepted, and the run is the same */
	app_make(&quiet, "ref", "devices.timeout=77", "parity.atol=0.5", NULL);
	must_train(&quiet, UPDATES, good, rroot, &ok);
	train_result_free(&ok);

	/* 6: the corpus on disk changed (one token, re-locked so that it loads) */
	{
		struct corpus c, orig;
		pjoin(corpus_dir, sizeof corpus_dir, a.s.outputs, "corpus");
		err_clear(&e);
		ck_assert_int_eq(corpus_load(corpus_dir, &orig, &e), ERR_OK);
		/* drawn again in memory: a loaded corpus is a read-only mapping of the file */
		ck_assert_int_eq(corpus_build(&a.s, &c, &e), ERR_OK);
		c.tokens[5] = c.tokens[5] == DATA_RESERVED ? DATA_RESERVED + 1 : DATA_RESERVED;
		ck_assert_int_eq(corpus_compute_lock(&c, c.lock, &e), ERR_OK);
		ck_assert_int_eq(corpus_save(&c, &a.s, corpus_dir, &e), ERR_OK);
		expect_refused(&a, good, 6, "data lock mismatch", NULL);
		ck_assert_msg(strstr(refusal[6], "corpus"), "%s", refusal[6]);
		/* put the original back: accepted again */
		ck_assert_int_eq(corpus_save(&orig, &a.s, corpus_dir, &e), ERR_OK);
		must_train(&a, UPDATES, good, rroot, &ok);
		train_result_free(&ok);
		corpus_free(&c);
		corpus_free(&orig);
	}

	/* every refusal says something different */
	for (int i = 0; i < 7; i++)
		for (int j = i + 1; j < 7; j++)
			ck_assert_msg(strcmp(refusal[i], refusal[j]) != 0, "refusals %d and %d read "
				      "the same: %s", i, j, refusal[i]);
	/* the untouched checkpoint still verifies */
	err_clear(&e);
	ck_assert_msg(ckpt_verify(good, NULL, &e) == ERR_OK, "%s", e.msg);
	train_result_free(&stop);
	app_drop(&a);
	app_drop(&hid);
	app_drop(&quiet);
	remove_tmp();
}
END_TEST

/* A copy of checkpoint `from` as root/step-0003, sealed by the store (its manifest matches),
 * with file `name` replaced by `edit(text)`: damage that only the content checks can see. */
static void resealed_at(const char *from, const char *root, uint64_t step, const char *name,
			void (*edit)(char **buf, size_t *len))
{
	char **names;
	size_t n;
	struct err e;
	struct ckpt_writer *w;
	err_clear(&e);
	ck_assert_int_eq(fsx_list_dir(from, &names, &n, &e), ERR_OK);
	ck_assert_int_eq(ckpt_begin(root, step, &w, &e), ERR_OK);
	for (size_t i = 0; i < n; i++) {
		char q[FSX_PATH_MAX], *buf;
		size_t len;
		if (!strcmp(names[i], "MANIFEST.json"))
			continue;
		pjoin(q, sizeof q, from, names[i]);
		ck_assert_int_eq(fsx_read_all(q, &buf, &len, &e), ERR_OK);
		if (!strcmp(names[i], name))
			edit(&buf, &len);
		ck_assert_msg(ckpt_add(w, names[i], buf, len, &e) == ERR_OK, "%s", e.msg);
		free(buf);
	}
	ck_assert_msg(ckpt_commit(w, NULL, 0, &e) == ERR_OK, "%s", e.msg);
	fsx_free_names(names, n);
}

static void resealed(const char *from, const char *root, const char *name,
		     void (*edit)(char **buf, size_t *len))
{
	resealed_at(from, root, 3, name, edit);
}

static void nothing(char **buf, size_t *len)
{
	(void)buf;
	(void)len;
}

static void nan_momentum(char **buf, size_t *len)
{
	const float inf_value = INFINITY;
	memcpy(*buf + *len - 4, &inf_value, 4);
}

static void replace_text(char **buf, size_t *len, const char *from, const char *to)
{
	char *p = strstr(*buf, from);
	ck_assert_msg(p != NULL, "'%s' not found", from);
	size_t head = (size_t)(p - *buf), fl = strlen(from), tl = strlen(to);
	char *out = malloc(*len - fl + tl + 1);
	ck_assert_ptr_nonnull(out);
	memcpy(out, *buf, head);
	memcpy(out + head, to, tl);
	memcpy(out + head + tl, p + fl, *len - head - fl);
	*len = *len - fl + tl;
	out[*len] = '\0';
	free(*buf);
	*buf = out;
}

static void nan_param(char **buf, size_t *len)
{
	const float nan_value = NAN;
	memcpy(*buf + *len - 4 * 7, &nan_value, 4); /* the data ends the .npy file */
}

static void zero_rng(char **buf, size_t *len)
{
	/* the four words of the sampler state, whatever they were */
	char *p = strstr(*buf, "\"rng\"");
	ck_assert_ptr_nonnull(p);
	p += strlen("\"rng\"");
	for (int k = 0; k < 4; k++) {
		p = strchr(p, '"'); /* the opening quote of word k */
		ck_assert_ptr_nonnull(p);
		ck_assert_int_eq(strspn(p + 1, "0123456789abcdef"), 16);
		memset(p + 1, '0', 16);
		p += 18;
	}
	(void)len;
}

static void other_hidden(char **buf, size_t *len)
{
	replace_text(buf, len, "hidden = 8\n", "hidden = 9\n");
}

static void no_updates(char **buf, size_t *len)
{
	replace_text(buf, len, "\"updates_done\": 3", "\"updates_done\": 0");
}

static void huge_history(char **buf, size_t *len)
{
	char *p = strstr(*buf, "\"tokens\"");
	ck_assert_ptr_nonnull(p);
	char *num = p + strlen("\"tokens\"");
	while (*num == ' ' || *num == ':')
		num++;
	size_t digits = strspn(num, "0123456789");
	char old[32];
	snprintf(old, sizeof old, "%.*s", (int)digits, num);
	char key[64];
	snprintf(key, sizeof key, "\"tokens\": %s", old);
	if (!strstr(*buf, key))
		snprintf(key, sizeof key, "\"tokens\":%s", old);
	replace_text(buf, len, key, "\"tokens\": 9223372036854775807");
}

START_TEST(test_content_refusals)
{
	struct app a;
	struct train_result stop;
	char sroot[FSX_PATH_MAX], good[FSX_PATH_MAX], root[FSX_PATH_MAX], bad[FSX_PATH_MAX];
	make_tmp();
	app_make(&a, "content", NULL);
	sub(sroot, sizeof sroot, "stop");
	must_train(&a, 3, NULL, sroot, &stop);
	ckpt_path(good, sizeof good, sroot, 3);
	/* a NaN among the parameters */
	sub(root, sizeof root, "nan");
	resealed(good, root, "params.npy", nan_param);
	ckpt_path(bad, sizeof bad, root, 3);
	expect_refused(&a, bad, 0, "params.npy holds 1 non-finite value", NULL);
	/* a sampler state no run can reach (xoshiro would stay at zero for ever) */
	sub(root, sizeof root, "rng");
	resealed(good, root, "state.json", zero_rng);
	ckpt_path(bad, sizeof bad, root, 3);
	expect_refused(&a, bad, 1, "rng state is all zero", NULL);
	/* a rank history that would overflow the counts */
	sub(root, sizeof root, "hist");
	resealed(good, root, "rank-1.json", huge_history);
	ckpt_path(bad, sizeof bad, root, 3);
	expect_refused(&a, bad, 2, "rank-1.json", "does not fit 3 steps", NULL);
	/* an infinite momentum */
	sub(root, sizeof root, "inf");
	resealed(good, root, "momentum.npy", nan_momentum);
	ckpt_path(bad, sizeof bad, root, 3);
	expect_refused(&a, bad, 3, "momentum.npy holds 1 non-finite value", NULL);
	/* a config.ini that describes another model than the parameters (hidden 9 for 8):
	 * refused whatever the current configuration, as `checkpoints` loads it (no checks
	 * against the current one) */
	sub(root, sizeof root, "hidden");
	resealed(good, root, "config.ini", other_hidden);
	ckpt_path(bad, sizeof bad, root, 3);
	{
		struct checkpoint ck;
		struct err e;
		err_clear(&e);
		ck_assert_int_eq(checkpoint_load(&a.env, good, NULL, 0, &ck, &e), ERR_OK);
		checkpoint_free(&ck);
		ck_assert_int_eq(checkpoint_load(&a.env, bad, NULL, 0, &ck, &e), ERR_DATA);
		ck_assert_msg(strstr(e.msg, "config.ini describes a model of ") &&
			      strstr(e.msg, "hidden 9), it holds "), "message: %s", e.msg);
	}
	/* updates_done edited to 0 (which would restart the momentum on resume): with
	 * empty_window = error every step is an update */
	sub(root, sizeof root, "updates");
	resealed(good, root, "state.json", no_updates);
	ckpt_path(bad, sizeof bad, root, 3);
	{
		struct checkpoint ck;
		struct err e;
		err_clear(&e);
		ck_assert_int_eq(checkpoint_load(&a.env, bad, NULL, 0, &ck, &e), ERR_DATA);
		ck_assert_msg(strstr(e.msg, "state.json: updates_done = 0, but step 3 minus the 0 "
				     "declined windows of rank-0.json's history makes 3"), "message: %s",
			      e.msg);
	}
	/* the same edit on a checkpoint whose parameters hold a NaN too: the counts are
	 * checked before the tensors are read, so the updates are what is refused (as a
	 * resume, ERR_DATA and nothing written) */
	{
		char nan_dir[FSX_PATH_MAX];
		sub(root, sizeof root, "nan");
		ckpt_path(nan_dir, sizeof nan_dir, root, 3);
		sub(root, sizeof root, "nan-updates");
		resealed(nan_dir, root, "state.json", no_updates);
		ckpt_path(bad, sizeof bad, root, 3);
		expect_refused(&a, bad, 5, "state.json: updates_done = 0, but step 3 minus the 0 "
			       "declined windows of rank-0.json's history makes 3", NULL);
	}
	/* the state of step 3 sealed as step 4: the manifest and state.json disagree */
	sub(root, sizeof root, "moved");
	resealed_at(good, root, 4, "state.json", nothing);
	ckpt_path(bad, sizeof bad, root, 4);
	expect_refused(&a, bad, 4, "state.json says step 3, its manifest step 4", NULL);
	train_result_free(&stop);
	app_drop(&a);
	remove_tmp();
}
END_TEST

/* ---- AdamW's state checked on load: what no run can train on is refused ---- */

/* resealed() into the temporary directory's `dir`, its checkpoint's path into bad. */
static void resealed_as(const char *from, const char *dir, const char *name,
			void (*edit)(char **buf, size_t *len), char *bad)
{
	char root[FSX_PATH_MAX];
	sub(root, sizeof root, dir);
	resealed(from, root, name, edit);
	ckpt_path(bad, FSX_PATH_MAX, root, 3);
}

static char *first_moments; /* exp_avg.npy of the checkpoint being edited */
static size_t first_moments_len;

static void negative_second_moment(char **buf, size_t *len)
{
	const float negative = -0.5f;
	memcpy(*buf + *len - 4 * 5, &negative, 4);
}

static void nan_first_moment(char **buf, size_t *len)
{
	const float nan_value = NAN;
	memcpy(*buf + *len - 4 * 2, &nan_value, 4);
}

/* The first moments in the second's place: the same shape, and digests recomputed. */
static void first_as_second(char **buf, size_t *len)
{
	char *copy = malloc(first_moments_len);
	ck_assert_ptr_nonnull(copy);
	memcpy(copy, first_moments, first_moments_len);
	free(*buf);
	*buf = copy;
	*len = first_moments_len;
}

START_TEST(test_adamw_state_refusals)
{
	struct app a;
	struct train_result stop;
	struct err e;
	char sroot[FSX_PATH_MAX], good[FSX_PATH_MAX], bad[FSX_PATH_MAX], p[FSX_PATH_MAX];
	make_tmp();
	err_clear(&e);
	app_make(&a, "adamw-state", "train.optimizer=adamw", "train.lr=0.01", NULL);
	sub(sroot, sizeof sroot, "stop");
	must_train(&a, 3, NULL, sroot, &stop);
	ckpt_path(good, sizeof good, sroot, 3);
	/* a negative second moment (the square root of the update would be NaN) */
	resealed_as(good, "negative", "exp_avg_sq.npy", negative_second_moment, bad);
	ck_assert_msg(ckpt_verify(bad, NULL, &e) == ERR_OK, "the store must accept it: %s", e.msg);
	expect_refused(&a, bad, 0, bad, "exp_avg_sq.npy holds 1 negative value", "tensor ",
		       "= -0.5", NULL);
	/* a NaN among the first moments */
	resealed_as(good, "nan", "exp_avg.npy", nan_first_moment, bad);
	expect_refused(&a, bad, 1, bad, "exp_avg.npy holds 1 non-finite value", "tensor ", NULL);
	/* the two moments swapped: the first moments hold negative values */
	pjoin(p, sizeof p, good, "exp_avg.npy");
	ck_assert_int_eq(fsx_read_all(p, &first_moments, &first_moments_len, &e), ERR_OK);
	resealed_as(good, "swapped", "exp_avg_sq.npy", first_as_second, bad);
	expect_refused(&a, bad, 2, "exp_avg_sq.npy holds ", " negative value", NULL);
	free(first_moments);
	first_moments = NULL;
	/* the untouched checkpoint resumes */
	{
		struct train_result res;
		char root[FSX_PATH_MAX];
		sub(root, sizeof root, "resumed");
		must_train(&a, 4, good, root, &res);
		train_result_free(&res);
	}
	train_result_free(&stop);
	app_drop(&a);
	remove_tmp();
}
END_TEST

/* ---- the publication gate: non-finite state is never checkpointed ---- */

/* Publishes the trainer's state with params[pi] / state[si] (when >= 0) made `bad`, and
 * expects the gate's refusal naming `file` and the tensor of the index, with nothing
 * written under root. */
static void expect_gate_refusal(struct trainer *t, const float *params, const float *state,
				long pi, long si, float bad, const char *file, const char *root)
{
	size_t n = t->r.eng->shape.n_params, sn = engine_state_floats(t->r.eng);
	float *p = malloc(n * sizeof *p), *m = malloc(sn * sizeof *m);
	char label[120], want[300];
	struct err e;
	err_clear(&e);
	ck_assert(p && m);
	memcpy(p, params, n * sizeof *p);
	memcpy(m, state, sn * sizeof *m);
	if (pi >= 0)
		p[pi] = bad;
	if (si >= 0)
		m[si] = bad;
	ck_assert_int_eq(engine_set_state(t->r.eng, p, m, t->r.eng->updates_done, &e), ERR_OK);
	tensor_label(&t->r.eng->shape, (size_t)(pi >= 0 ? pi : si) % n, label, sizeof label);
	snprintf(want, sizeof want, "non-finite state after window 1 (update 1): %s would hold 1 "
		 "non-finite value, the first in tensor %s", file, label);
	ck_assert_int_eq(trainer_checkpoint(t, root, NULL, 0, &e), ERR_NONFINITE);
	ck_assert_msg(strstr(e.msg, want), "message '%s' lacks '%s'", e.msg, want);
	ck_assert_msg(!fsx_exists(root), "the gate let %s be written", root);
	free(p);
	free(m);
}

START_TEST(test_publication_gate)
{
	struct app a;
	struct train_opts o;
	struct trainer t;
	struct window_result wr;
	struct err e;
	char root[FSX_PATH_MAX], out[FSX_PATH_MAX];
	make_tmp();
	err_clear(&e);
	app_make(&a, "gate", NULL);
	sub(root, sizeof root, "gate-ckpts");
	memset(&o, 0, sizeof o);
	o.mode = TRAIN_MODE_ANY;
	ck_assert_msg(trainer_open(&t, &a.env, &o, &e) == ERR_OK, "%s", e.msg);
	ck_assert_msg(trainer_step(&t, &t.r.w, 0, &wr, &e) == ERR_OK, "%s", e.msg);
	size_t n = t.r.eng->shape.n_params, sn = engine_state_floats(t.r.eng);
	float *p = malloc(n * sizeof *p), *m = malloc(sn * sizeof *m);
	ck_assert(p && m);
	ck_assert_int_eq(engine_get_state(t.r.eng, p, m, &e), ERR_OK);
	expect_gate_refusal(&t, p, m, (long)n / 2, -1, NAN, "params.npy", root);
	expect_gate_refusal(&t, p, m, -1, (long)sn - 1, -INFINITY, "momentum.npy", root);
	/* the state restored is published */
	ck_assert_int_eq(engine_set_state(t.r.eng, p, m, t.r.eng->updates_done, &e), ERR_OK);
	ck_assert_msg(trainer_checkpoint(&t, root, out, sizeof out, &e) == ERR_OK, "%s", e.msg);
	ck_assert_msg(ckpt_verify(out, NULL, &e) == ERR_OK, "%s", e.msg);
	free(p);
	free(m);
	trainer_close(&t, NULL);
	app_drop(&a);
	remove_tmp();
}
END_TEST

/* ---- updates_done against the history under empty_window = skip ---- */

static char edit_from[64], edit_to[64];
static void swap_edit(char **buf, size_t *len)
{
	replace_text(buf, len, edit_from, edit_to);
}

/* Reseals the checkpoint `good` of step `step` under root with edit_from -> edit_to in
 * file `name`, and expects every load of it (as resume, evaluate and checkpoints load it)
 * refused with a message holding want. */
static void expect_edit_refused(struct app *a, const char *good, int64_t step,
				const char *root, const char *name, const char *want)
{
	struct checkpoint ck;
	struct err e;
	char bad[FSX_PATH_MAX];
	err_clear(&e);
	resealed_at(good, root, (uint64_t)step, name, swap_edit);
	ckpt_path(bad, sizeof bad, root, step);
	ck_assert_int_eq(checkpoint_load(&a->env, bad, NULL, 0, &ck, &e), ERR_DATA);
	ck_assert_msg(strstr(e.msg, want), "message '%s' lacks '%s'", e.msg, want);
}

START_TEST(test_updates_against_history)
{
	struct app a;
	struct train_result cont;
	struct checkpoint ck;
	struct err e;
	char croot[FSX_PATH_MAX], good[FSX_PATH_MAX], root[FSX_PATH_MAX], want[200];
	make_tmp();
	err_clear(&e);
	app_make(&a, "skipped", "devices.world=2", "train.accumulation=1", "train.batch_size=1",
		 "train.empty_window=skip", "train.updates=12", NULL);
	write_hollow_corpus(&a);
	sub(croot, sizeof croot, "cont");
	must_train(&a, 12, NULL, croot, &cont);
	ckpt_path(good, sizeof good, croot, 12);
	/* the history records the declined windows; the checkpoint as written loads */
	ck_assert_msg(checkpoint_load(&a.env, good, NULL, 0, &ck, &e) == ERR_OK, "%s", e.msg);
	int64_t updates = ck.updates_done, declined = ck.hist[1].declined;
	ck_assert_msg(declined > 0 && declined < 12, "declined %lld", (long long)declined);
	ck_assert_int_eq(declined, cont.skipped);
	ck_assert_int_eq(updates, 12 - declined);
	checkpoint_free(&ck);
	/* updates_done edited to the step (as if nothing had been declined) */
	snprintf(edit_from, sizeof edit_from, "\"updates_done\": %lld", (long long)updates);
	snprintf(edit_to, sizeof edit_to, "\"updates_done\": 12");
	snprintf(want, sizeof want, "state.json: updates_done = 12, but step 12 minus the %lld "
		 "declined windows of rank-0.json's history makes %lld", (long long)declined,
		 (long long)updates);
	sub(root, sizeof root, "all-updates");
	expect_edit_refused(&a, good, 12, root, "state.json", want);
	/* and a resume from it is refused before it writes anything */
	{
		struct train_result res;
		char bad[FSX_PATH_MAX], out[FSX_PATH_MAX];
		ckpt_path(bad, sizeof bad, root, 12);
		sub(out, sizeof out, "refused-out");
		ck_assert_int_eq(train_to(&a, 14, bad, out, &res, &e), ERR_DATA);
		ck_assert_msg(strstr(e.msg, want), "%s", e.msg);
		ck_assert(!fsx_exists(out));
	}
	/* updates_done edited to 0, which would restart the momentum */
	snprintf(edit_to, sizeof edit_to, "\"updates_done\": 0");
	snprintf(want, sizeof want, "updates_done = 0, but step 12 minus the %lld declined",
		 (long long)declined);
	sub(root, sizeof root, "no-updates");
	expect_edit_refused(&a, good, 12, root, "state.json", want);
	/* one rank's declined count edited: the ranks disagree */
	snprintf(edit_from, sizeof edit_from, "\"declined\": %lld", (long long)declined);
	snprintf(edit_to, sizeof edit_to, "\"declined\": 0");
	sub(root, sizeof root, "rank-declined");
	expect_edit_refused(&a, good, 12, root, "rank-1.json",
			    "rank-1.json's history declares 0 declined windows, rank-0.json's");
	train_result_free(&cont);
	app_drop(&a);
	remove_tmp();
}
END_TEST

/* ---- exact mode: the shard histories against the rank histories ---- */

START_TEST(test_shard_history_against_ranks)
{
	struct app a;
	struct train_result stop;
	struct checkpoint ck;
	struct err e;
	char sroot[FSX_PATH_MAX], good[FSX_PATH_MAX], root[FSX_PATH_MAX];
	make_tmp();
	err_clear(&e);
	app_make(&a, "exact-hist", "train.shards=4", NULL);
	sub(sroot, sizeof sroot, "stop");
	must_train(&a, 3, NULL, sroot, &stop);
	ckpt_path(good, sizeof good, sroot, 3);
	ck_assert_msg(checkpoint_load(&a.env, good, NULL, 0, &ck, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(ck.elastic.shards, 4);
	int64_t tokens = ck.elastic.shard_hist[0].tokens;
	checkpoint_free(&ck);
	/* shard 0's tokens edited and the checkpoint resealed: rank 0 (shards 0 and 1) no
	 * longer adds up, and a resume would carry the edit forward */
	snprintf(edit_from, sizeof edit_from, "\"tokens\": %lld", (long long)tokens);
	snprintf(edit_to, sizeof edit_to, "\"tokens\": %lld", (long long)tokens - 1);
	sub(root, sizeof root, "edited");
	expect_edit_refused(&a, good, 3, root, "state.json", "rank-0.json's history (");
	train_result_free(&stop);
	app_drop(&a);
	remove_tmp();
}
END_TEST

/* ---- evaluation ---- */

struct naive {
	double loss_sum;
	int64_t tokens, hits, ambiguous, sequences;
};

/* The model's formulas in double precision, one position at a time. */
static void naive_eval(const struct corpus *c, const struct model_shape *m, const float *p,
		       int split, struct naive *out)
{
	int C = m->dim[WINDOW_MLP_CONTEXT], D = m->dim[WINDOW_MLP_EMBED_DIM],
	    H = m->dim[WINDOW_MLP_HIDDEN], V = m->vocab, CD = C * D;
	const float *emb = p + m->p[WINDOW_MLP_EMBED].offset, *w1 = p + m->p[WINDOW_MLP_W1].offset,
		    *b1 = p + m->p[WINDOW_MLP_B1].offset, *w2 = p + m->p[WINDOW_MLP_W2].offset,
		    *b2 = p + m->p[WINDOW_MLP_B2].offset;
	double *x = malloc(sizeof(double) * CD), *h = malloc(sizeof(double) * H),
	       *z = malloc(sizeof(double) * V);
	memset(out, 0, sizeof *out);
	for (int i = c->split_first[split]; i < c->split_first[split] + c->split_count[split]; i++) {
		const int32_t *tok = c->tokens + c->offset[i];
		int len = corpus_len(c, i);
		out->sequences++;
		for (int t = c->prefix[i]; t < len; t++) {
			for (int j = 0; j < C; j++) {
				int pos = t - C + j;
				int id = pos >= 0 ? tok[pos] : DATA_BOS;
				for (int d = 0; d < D; d++)
					x[j * D + d] = emb[id * D + d];
			}
			for (int k = 0; k < H; k++) {
				double s = b1[k];
				for (int q = 0; q < CD; q++)
					s += (double)w1[(size_t)k * CD + q] * x[q];
				h[k] = tanh(s);
			}
			double mx = -INFINITY, second = -INFINITY;
			int arg = 0;
			for (int v = 0; v < V; v++) {
				double s = b2[v];
				for (int k = 0; k < H; k++)
					s += (double)w2[(size_t)v * H + k] * h[k];
				z[v] = s;
				if (s > mx) {
					second = mx;
					mx = s;
					arg = v;
				} else if (s > second) {
					second = s;
				}
			}
			double se = 0.0;
			for (int v = 0; v < V; v++)
				se += exp(z[v] - mx);
			out->loss_sum += mx + log(se) - z[tok[t]];
			out->tokens++;
			out->hits += arg == tok[t];
			out->ambiguous += mx - second < 1e-4;
		}
	}
	free(x);
	free(h);
	free(z);
}

static void compare_split(const struct train_split_eval *ev, const struct naive *nv,
			  const char *what)
{
	ck_assert_int_eq(ev->sequences, nv->sequences);
	ck_assert_int_eq(ev->tokens, nv->tokens);
	ck_assert_msg(fabs(ev->loss_sum - nv->loss_sum) <= 1e-5 * fabs(nv->loss_sum), "%s: loss sum "
		      "%.9g, naive %.9g", what, ev->loss_sum, nv->loss_sum);
	ck_assert_msg(fabs(ev->loss - nv->loss_sum / nv->tokens) <= 1e-5 * (nv->loss_sum / nv->tokens),
		      "%s: loss %.9g is not the global token mean", what, ev->loss);
	ck_assert_msg(llabs(ev->hits - nv->hits) <= nv->ambiguous, "%s: hits %lld, naive %lld "
		      "(%lld near-ties)", what, (long long)ev->hits, (long long)nv->hits,
		      (long long)nv->ambiguous);
	ck_assert(fabs(ev->accuracy - (double)ev->hits / ev->tokens) < 1e-15);
}

START_TEST(test_evaluate_matches_naive)
{
	struct app a;
	struct train_result stop;
	struct train_eval ev, latest;
	struct corpus c;
	struct model_shape m;
	struct naive nt, nv;
	struct err e;
	char root[FSX_PATH_MAX];
	make_tmp();
	app_make(&a, "eval", "train.stop_at=5", NULL);
	ck_assert_int_eq(train_ckpt_root(&a.env, 0, root, sizeof root, &e), ERR_OK);
	must_train(&a, 2, NULL, root, &stop);
	train_result_free(&stop);
	must_train(&a, 5, NULL, root, &stop);
	err_clear(&e);
	ck_assert_msg(train_evaluate(&a.env, stop.checkpoint, &ev, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(ev.step, 5);
	/* no directory: the newest valid checkpoint (step 5, not 2) */
	ck_assert_msg(train_evaluate(&a.env, NULL, &latest, &e) == ERR_OK, "%s", e.msg);
	ck_assert_str_eq(latest.checkpoint, stop.checkpoint);
	ck_assert(latest.test.loss_sum == ev.test.loss_sum);

	ck_assert_int_eq(run_corpus(&a.env, 0, &c, &e), ERR_OK);
	window_mlp_shape(&m, a.s.vocab, a.s.context, a.s.embed, a.s.hidden);
	naive_eval(&c, &m, stop.params, SPLIT_TEST, &nt);
	naive_eval(&c, &m, stop.params, SPLIT_VALIDATION, &nv);
	ck_assert_int_eq(nt.sequences, 32);
	ck_assert_int_eq(nv.sequences, 16);
	compare_split(&ev.test, &nt, "test");
	compare_split(&ev.validation, &nv, "validation");

	/* the constant guess: most frequent training target, counted here independently */
	int64_t count[64] = {0};
	for (int i = 0; i < c.split_count[SPLIT_TRAIN]; i++)
		for (int t = c.prefix[i]; t < corpus_len(&c, i); t++)
			count[c.tokens[c.offset[i] + t]]++;
	int best = 0;
	for (int v = 1; v < a.s.vocab; v++)
		if (count[v] > count[best])
			best = v;
	ck_assert_int_eq(ev.const_id, best);
	int64_t hits = 0;
	for (int i = c.split_first[SPLIT_TEST]; i < c.split_first[SPLIT_TEST] + 32; i++)
		for (int t = c.prefix[i]; t < corpus_len(&c, i); t++)
			hits += c.tokens[c.offset[i] + t] == best;
	ck_assert_int_eq(ev.test.const_hits, hits);

	/* an evaluation of other parameters gives other sums (the comparison can fail) */
	struct naive other;
	naive_eval(&c, &m, stop.momentum, SPLIT_TEST, &other);
	ck_assert(fabs(other.loss_sum - ev.test.loss_sum) > 1e-3 * fabs(ev.test.loss_sum));
	corpus_free(&c);
	train_result_free(&stop);
	app_drop(&a);
	remove_tmp();
}
END_TEST

/* The mean per target of the validation line and of evaluate: the plain quotient, bit for
 * bit, and NaN (reported as null) for a split without a supervised target. */
START_TEST(test_per_target)
{
	ck_assert(isnan(per_target(0.0, 0)));
	ck_assert(isnan(per_target(12.5, 0)));
	double sums[] = {0.0, 1.0, 4869.017, 1e-300};
	int64_t counts[] = {1, 3, 2226, 1 << 30};
	for (size_t i = 0; i < sizeof sums / sizeof sums[0]; i++)
		for (size_t j = 0; j < sizeof counts / sizeof counts[0]; j++) {
			double q = sums[i] / (double)counts[j];
			double got = per_target(sums[i], counts[j]);
			ck_assert_msg(memcmp(&got, &q, sizeof q) == 0, "%.17g / %lld: %.17g, not %.17g",
				      sums[i], (long long)counts[j], got, q);
		}
}
END_TEST

/* An interrupted write leaves a partial directory that is never taken as a checkpoint. */
START_TEST(test_partial_never_latest)
{
	struct app a;
	struct train_result stop;
	struct err e;
	char root[FSX_PATH_MAX], partial[FSX_PATH_MAX], path[FSX_PATH_MAX];
	uint64_t step;
	make_tmp();
	app_make(&a, "partial", NULL);
	ck_assert_int_eq(train_ckpt_root(&a.env, 0, root, sizeof root, &e), ERR_OK);
	must_train(&a, 2, NULL, root, &stop);
	/* a later step whose manifest never got written, published or not */
	pjoin(partial, sizeof partial, root, ".step-0005.tmp.4242");
	copy_dir(stop.checkpoint, partial);
	pjoin(path, sizeof path, partial, "MANIFEST.json");
	unlink(path);
	pjoin(partial, sizeof partial, root, "step-0006");
	copy_dir(stop.checkpoint, partial);
	pjoin(path, sizeof path, partial, "MANIFEST.json");
	unlink(path);
	err_clear(&e);
	ck_assert_int_eq(ckpt_latest_valid(root, path, sizeof path, &step, NULL, &e), ERR_OK);
	ck_assert_int_eq(step, 2);
	train_result_free(&stop);
	app_drop(&a);
	remove_tmp();
}
END_TEST

static Suite *train_suite(void)
{
	Suite *s = suite_create("train");
	TCase *tc = tcase_create("resume");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_resume_w1_sum);
	tcase_add_test(tc, test_resume_w1_avg);
	tcase_add_test(tc, test_resume_w2_sum);
	tcase_add_test(tc, test_resume_w2_avg);
	tcase_add_test(tc, test_resume_negative_controls);
	tcase_add_test(tc, test_resume_to_more_updates);
	tcase_add_test(tc, test_resume_adamw);
	tcase_add_test(tc, test_checkpoint_every);
	tcase_add_test(tc, test_sigterm_checkpoints_and_resumes);
	tcase_add_test(tc, test_empty_windows);
	tcase_add_test(tc, test_hand_steps_equal_train_run);
	suite_add_tcase(s, tc);
	TCase *tr = tcase_create("refusals");
	tcase_set_timeout(tr, 240);
	tcase_add_test(tr, test_refusals);
	tcase_add_test(tr, test_content_refusals);
	tcase_add_test(tr, test_adamw_state_refusals);
	tcase_add_test(tr, test_publication_gate);
	tcase_add_test(tr, test_updates_against_history);
	tcase_add_test(tr, test_shard_history_against_ranks);
	tcase_add_test(tr, test_partial_never_latest);
	suite_add_tcase(s, tr);
	TCase *te = tcase_create("evaluate");
	tcase_set_timeout(te, 240);
	tcase_add_test(te, test_evaluate_matches_naive);
	tcase_add_test(te, test_per_target);
	suite_add_tcase(s, te);
	return s;
}

int main(void)
{
	return check_run(train_suite(), 0);
}
