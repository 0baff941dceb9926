/*
 * test-elastic: exact mode's checkpoints resume on another device count, bit for bit.
 *
 * With K = 4 shards, runs stopped at step 3 on W1 devices and resumed to step 6 on W2
 * devices, for every pair W1, W2 in {1, 2, 4}, end with the parameters, momentum and rank
 * histories of a continuous W2 run (memcmp) and with byte-identical checkpoint files; the
 * continuous runs of the three worlds agree with each other. Outside exact mode another
 * world is refused, as before. In exact mode a checkpoint of another backend is refused,
 * one of another machine type resumes with a note that bitwise continuation is not
 * promised.
 *
 * The same holds with AdamW, a cosine schedule after a warmup and gradient clipping: the
 * optimizer's step is computed from the reduced gradient alone, whose bits exact mode
 * fixes, so the continuous runs of W = 1, 2, 4 agree and every resume carries both
 * moments (exp_avg.npy, exp_avg_sq.npy) bit for bit.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check-run.h"
#include "ckpt.h"
#include "env.h"
#include "fsx.h"
#include "train_loop.h"

static char tmp_root[512];
/* optimizer settings every run_cfg adds (NULL: the defaults, SGD) */
static const char *const *optim_sets;

struct run_cfg {
	struct cfg cfg;
	struct settings s;
	struct env env;
	char notes[2048]; /* what the core logged */
};

static void keep_note(void *arg, int level, const char *line)
{
	struct run_cfg *r = arg;
	size_t n = strlen(r->notes);
	if (level == ENV_INFO && line)
		snprintf(r->notes + n, sizeof r->notes - n, "%s\n", line);
}

/* The configuration for `world` devices, `shards` shards (0: default mode), outputs and
 * artifacts shared by every run of a test (one corpus, one checkpoint tree). */
static void run_cfg(struct run_cfg *r, int world, int shards)
{
	const char *sets[] = {
		"data.train=64", "data.validation=16", "data.test=32", "data.min_len=4",
		"data.max_len=16", "data.vocab=16", "model.context=3", "model.embed=4",
		"model.hidden=16", "train.batch_size=2", "train.lr=0.2", "train.momentum=0.9",
		"train.updates=6", "train.stop_at=3", "devices.backend=cpu", "run.log_level=info",
		NULL};
	struct err e;
	char buf[FSX_PATH_MAX + 64];
	memset(r, 0, sizeof *r);
	err_clear(&e);
	ck_assert_int_eq(cfg_init(&r->cfg, settings_keys, &e), ERR_OK);
	for (int i = 0; sets[i]; i++)
		ck_assert_msg(cfg_set(&r->cfg, sets[i], &e) == ERR_OK, "%s", e.msg);
	for (int i = 0; optim_sets && optim_sets[i]; i++)
		ck_assert_msg(cfg_set(&r->cfg, optim_sets[i], &e) == ERR_OK, "%s", e.msg);
	snprintf(buf, sizeof buf, "devices.world=%d", world);
	ck_assert_int_eq(cfg_set(&r->cfg, buf, &e), ERR_OK);
	snprintf(buf, sizeof buf, "train.shards=%d", shards);
	ck_assert_int_eq(cfg_set(&r->cfg, buf, &e), ERR_OK);
	snprintf(buf, sizeof buf, "run.outputs=%s/outputs", tmp_root);
	ck_assert_int_eq(cfg_set(&r->cfg, buf, &e), ERR_OK);
	snprintf(buf, sizeof buf, "run.artifacts=%s/artifacts", tmp_root);
	ck_assert_int_eq(cfg_set(&r->cfg, buf, &e), ERR_OK);
	ck_assert_msg(settings_from_cfg(&r->cfg, &r->s, &e) == ERR_OK, "%s", e.msg);
	env_init(&r->env, &r->cfg, &r->s);
	r->env.log = keep_note;
	r->env.log_arg = r;
}

/* Trains to `stop` (from `resume` when not NULL) into root/<name>. */
static int train_into(struct run_cfg *r, int stop, const char *resume, const char *name,
		      void (*on_resume)(void *, struct checkpoint *, struct engine *),
		      struct train_result *res, struct err *e)
{
	struct train_opts o;
	memset(&o, 0, sizeof o);
	o.stop_at = stop;
	o.resume_dir = resume;
	o.mode = r->s.normalization;
	o.on_resume = on_resume;
	snprintf(o.ckpt_root, sizeof o.ckpt_root, "%s/artifacts/%s", tmp_root, name);
	err_clear(e);
	return train_run(&r->env, &o, res, e);
}

static void step_dir(char *out, size_t cap, const char *name, int step)
{
	snprintf(out, cap, "%s/artifacts/%s/step-%04d", tmp_root, name, step);
}

static void same_file(const char *dir_a, const char *dir_b, const char *file)
{
	char a[FSX_PATH_MAX + 32], b[FSX_PATH_MAX + 32], *x = NULL, *y = NULL;
	size_t nx, ny;
	struct err e;
	err_clear(&e);
	snprintf(a, sizeof a, "%s/%s", dir_a, file);
	snprintf(b, sizeof b, "%s/%s", dir_b, file);
	ck_assert_msg(fsx_read_all(a, &x, &nx, &e) == ERR_OK, "%s", e.msg);
	ck_assert_msg(fsx_read_all(b, &y, &ny, &e) == ERR_OK, "%s", e.msg);
	ck_assert_msg(nx == ny && memcmp(x, y, nx) == 0, "%s and %s differ", a, b);
	free(x);
	free(y);
}

static void setup(void)
{
	const char *t = getenv("TMPDIR");
	snprintf(tmp_root, sizeof tmp_root, "%s/ddptok-test-elastic.XXXXXX", t && *t ? t : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(tmp_root));
}

static void teardown(void)
{
	struct err e;
	err_clear(&e);
	fsx_remove_tree(tmp_root, &e);
}

/* Continuous runs of W = 1, 2, 4 and stopped ones resumed on every other W, under
 * optim_sets; `state` names the optimizer's state files compared. */
static void every_pair_of_worlds(const char *const *state)
{
	static const int worlds[] = {1, 2, 4};
	struct train_result cont[3];
	struct err e;
	for (int i = 0; i < 3; i++) {
		struct run_cfg r;
		struct train_result stop;
		char name[32];
		run_cfg(&r, worlds[i], 4);
		snprintf(name, sizeof name, "cont-w%d", worlds[i]);
		ck_assert_msg(train_into(&r, 6, NULL, name, NULL, &cont[i], &e) == ERR_OK, "%s",
			      e.msg);
		snprintf(name, sizeof name, "stop-w%d", worlds[i]);
		ck_assert_msg(train_into(&r, 3, NULL, name, NULL, &stop, &e) == ERR_OK, "%s", e.msg);
		train_result_free(&stop);
		cfg_free(&r.cfg);
		ck_assert_msg(memcmp(cont[i].params, cont[0].params, cont[0].n * sizeof(float)) == 0,
			      "the continuous runs on 1 and %d devices differ", worlds[i]);
	}
	for (int from = 0; from < 3; from++)
		for (int to = 0; to < 3; to++) {
			struct run_cfg r;
			struct train_result res;
			char ck[FSX_PATH_MAX], name[32], mine[FSX_PATH_MAX], theirs[FSX_PATH_MAX];
			snprintf(name, sizeof name, "stop-w%d", worlds[from]);
			step_dir(ck, sizeof ck, name, 3);
			snprintf(name, sizeof name, "res-w%d-w%d", worlds[from], worlds[to]);
			run_cfg(&r, worlds[to], 4);
			ck_assert_msg(train_into(&r, 6, ck, name, NULL, &res, &e) == ERR_OK,
				      "resume W = %d -> %d: %s", worlds[from], worlds[to], e.msg);
			ck_assert_uint_eq(res.state_n, cont[to].state_n);
			ck_assert_msg(memcmp(res.params, cont[to].params, res.n * sizeof(float)) == 0 &&
					      memcmp(res.momentum, cont[to].momentum,
						     res.state_n * sizeof(float)) == 0,
				      "W = %d -> %d: the state differs from the continuous run",
				      worlds[from], worlds[to]);
			ck_assert_msg(memcmp(res.hist, cont[to].hist, sizeof res.hist) == 0,
				      "W = %d -> %d: rank histories differ", worlds[from], worlds[to]);
			step_dir(mine, sizeof mine, name, 6);
			snprintf(name, sizeof name, "cont-w%d", worlds[to]);
			step_dir(theirs, sizeof theirs, name, 6);
			static const char *files[] = {"params.npy", "state.json", "config.ini",
						      "rank-0.json", NULL};
			for (int f = 0; files[f]; f++)
				same_file(mine, theirs, files[f]);
			for (int f = 0; state[f]; f++)
				same_file(mine, theirs, state[f]);
			train_result_free(&res);
			cfg_free(&r.cfg);
		}
	for (int i = 0; i < 3; i++)
		train_result_free(&cont[i]);
}

START_TEST(every_pair_of_worlds_resumes_bit_for_bit)
{
	static const char *const state[] = {"momentum.npy", NULL};
	optim_sets = NULL;
	every_pair_of_worlds(state);
}
END_TEST

/* AdamW, cosine after a warmup of 2, clipping that acts (this model's gradient norms are
 * about 0.3) and decoupled decay: the same guarantees. */
START_TEST(adamw_cosine_clip_resumes_bit_for_bit)
{
	static const char *const sets[] = {"train.optimizer=adamw", "train.lr=0.01",
					   "train.schedule=cosine", "train.warmup=2",
					   "train.lr_min=0.001", "train.clip=0.25",
					   "train.weight_decay=0.1", NULL};
	static const char *const state[] = {"exp_avg.npy", "exp_avg_sq.npy", NULL};
	optim_sets = sets;
	every_pair_of_worlds(state);
	optim_sets = NULL;
}
END_TEST

START_TEST(default_mode_keeps_its_world)
{
	struct run_cfg r;
	struct train_result res;
	struct err e;
	char ck[FSX_PATH_MAX];
	run_cfg(&r, 2, 0);
	ck_assert_msg(train_into(&r, 3, NULL, "stop", NULL, &res, &e) == ERR_OK, "%s", e.msg);
	train_result_free(&res);
	cfg_free(&r.cfg);
	step_dir(ck, sizeof ck, "stop", 3);
	run_cfg(&r, 1, 0);
	ck_assert_int_eq(train_into(&r, 6, ck, "res", NULL, &res, &e), ERR_DATA);
	ck_assert_msg(strstr(e.msg, "devices.world: 1 != 2"), "message: %s", e.msg);
	cfg_free(&r.cfg);
}
END_TEST

static void other_backend(void *arg, struct checkpoint *ck, struct engine *eng)
{
	snprintf(ck->backend, sizeof ck->backend, "cuda");
}

static void other_machine(void *arg, struct checkpoint *ck, struct engine *eng)
{
	snprintf(ck->elastic.machine, sizeof ck->elastic.machine, "cpu: another BLAS core");
}

/* A W = 2 run with `shards` (0: default mode) stopped at step 3; its checkpoint in ck. */
static void stopped_run(struct run_cfg *r, int shards, char *ck, size_t cap)
{
	struct train_result res;
	struct err e;
	run_cfg(r, 2, shards);
	ck_assert_msg(train_into(r, 3, NULL, "stop", NULL, &res, &e) == ERR_OK, "%s", e.msg);
	train_result_free(&res);
	step_dir(ck, cap, "stop", 3);
}

/* Resumes checkpoint ck as if it had been written on another machine: the run goes on,
 * with a note that bitwise continuation is not promised. */
static void expect_machine_note(struct run_cfg *r, const char *ck)
{
	struct train_result res;
	struct err e;
	r->notes[0] = '\0';
	ck_assert_msg(train_into(r, 6, ck, "res", other_machine, &res, &e) == ERR_OK, "%s",
		      e.msg);
	ck_assert_msg(strstr(r->notes, "written on [cpu: another BLAS core]") &&
			      strstr(r->notes, "bitwise continuation is not promised"),
		      "notes: %s", r->notes);
	train_result_free(&res);
}

START_TEST(another_backend_is_refused_another_machine_noted)
{
	struct run_cfg r;
	struct train_result res;
	struct err e;
	char ck[FSX_PATH_MAX];
	stopped_run(&r, 4, ck, sizeof ck);
	ck_assert_int_eq(train_into(&r, 6, ck, "res", other_backend, &res, &e), ERR_DATA);
	ck_assert_msg(strstr(e.msg, "written by the cuda backend and this run uses cpu"),
		      "message: %s", e.msg);
	ck_assert_msg(strstr(e.msg, "bitwise continuation is not possible"), "message: %s", e.msg);
	expect_machine_note(&r, ck);
	/* the same machine resumes without a note */
	r.notes[0] = '\0';
	ck_assert_msg(train_into(&r, 6, ck, "res2", NULL, &res, &e) == ERR_OK, "%s", e.msg);
	ck_assert_msg(!strstr(r.notes, "not promised"), "notes: %s", r.notes);
	train_result_free(&res);
	cfg_free(&r.cfg);
}
END_TEST

/* default mode too: a resume on another machine record is noted, not refused */
START_TEST(default_mode_notes_another_machine)
{
	struct run_cfg r;
	char ck[FSX_PATH_MAX];
	stopped_run(&r, 0, ck, sizeof ck);
	expect_machine_note(&r, ck);
	cfg_free(&r.cfg);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("elastic");
	TCase *tc = tcase_create("elastic");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, every_pair_of_worlds_resumes_bit_for_bit);
	tcase_add_test(tc, adamw_cosine_clip_resumes_bit_for_bit);
	tcase_add_test(tc, default_mode_keeps_its_world);
	tcase_add_test(tc, another_backend_is_refused_another_machine_noted);
	tcase_add_test(tc, default_mode_notes_another_machine);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
