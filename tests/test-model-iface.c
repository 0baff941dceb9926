/*
 * test-model-iface: the model interface seen from outside the program. A second model
 * (model-bigram.c, in this directory) is registered at run time and driven through the
 * core's own API, with no line of src/ naming it: [model] kind selects it, its gradient
 * matches a double-precision one, parity of W = 2 and 3 against the single-device
 * reference holds with the correct normalization while the wrong ones are caught, exact
 * mode gives the 1-device bits, and a stopped and resumed training equals the continuous
 * one bit for bit. Also the registry's refusals and the shape comparison's messages.
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check-run.h"
#include "checkpoint.h"
#include "model-bigram.h"
#include "parity.h"
#include "run.h"
#include "testutil.h"
#include "tmpdir.h"
#include "trainer.h"
#include "trainutil.h"
#include "window_mlp.h"

static void register_bigram(void)
{
	struct err e;
	err_clear(&e);
	if (!model_find("bigram"))
		ck_assert_msg(model_register(&bigram_ops, &e) == ERR_OK, "%s", e.msg);
}

/* A configuration and its env (env points into it: not copied once made). */
struct app {
	struct cfg cfg;
	struct settings s;
	struct env env;
};

/* The tiny configuration with the blank-separated overrides `sets`, its outputs and
 * artifacts under dir; ERR_CONFIG (and the message in *e) when the settings refuse it. */
static int app_open(struct app *a, const char *dir, const char *sets, struct err *e)
{
	char buf[1024], one[600];
	memset(a, 0, sizeof *a);
	ck_assert_int_eq(cfg_init(&a->cfg, settings_keys, e), ERR_OK);
	ck_assert_int_eq(cfg_load_text(&a->cfg, testutil_tiny_ini, "tiny.ini", e), ERR_OK);
	snprintf(buf, sizeof buf, "%s", sets);
	for (char *save = NULL, *s = strtok_r(buf, " ", &save); s; s = strtok_r(NULL, " ", &save))
		ck_assert_msg(cfg_set(&a->cfg, s, e) == ERR_OK, "%s", e->msg);
	snprintf(one, sizeof one, "run.outputs=%s/outputs", dir);
	ck_assert_int_eq(cfg_set(&a->cfg, one, e), ERR_OK);
	snprintf(one, sizeof one, "run.artifacts=%s/artifacts", dir);
	ck_assert_int_eq(cfg_set(&a->cfg, one, e), ERR_OK);
	int rc = settings_from_cfg(&a->cfg, &a->s, e);
	if (rc == ERR_OK) /* as the command line checks it, above the settings */
		rc = model_kind_check(a->s.model_kind, e);
	env_init(&a->env, &a->cfg, &a->s);
	return rc;
}

static void app_close(struct app *a)
{
	cfg_free(&a->cfg);
}

START_TEST(kind_names_a_registered_model)
{
	struct app a;
	struct err e;
	char *dir = tmpdir_make("ddptok-iface");
	err_clear(&e);
	/* unknown before it is registered; the message lists the models there are */
	if (!model_find("bigram")) {
		ck_assert_int_eq(app_open(&a, dir, "model.kind=bigram", &e), ERR_CONFIG);
		ck_assert_msg(strstr(e.msg, "[model] kind = bigram: no such model (models: "
				     "window_mlp, gpt)"), "%s", e.msg);
		app_close(&a);
	}
	register_bigram();
	err_clear(&e);
	ck_assert_int_eq(app_open(&a, dir, "model.kind=nothing", &e), ERR_CONFIG);
	ck_assert_msg(strstr(e.msg, "(models: window_mlp, gpt, bigram)"), "%s", e.msg);
	app_close(&a);
	ck_assert_msg(app_open(&a, dir, "model.kind=bigram", &e) == ERR_OK, "%s", e.msg);
	struct model_shape m;
	ck_assert_int_eq(model_shape_init(&m, &a.s, &e), ERR_OK);
	ck_assert_ptr_eq(m.ops, &bigram_ops);
	ck_assert_int_eq(m.n_tensors, 2);
	ck_assert_str_eq(m.p[BIGRAM_TABLE].name, "table");
	ck_assert_int_eq(m.p[BIGRAM_TABLE].decay, 1);
	ck_assert_int_eq(m.p[BIGRAM_BIAS].decay, 0);
	ck_assert_uint_eq(m.n_params, (size_t)a.s.vocab * a.s.vocab + a.s.vocab);
	/* layout.json names every tensor of it, in order */
	json_t *lay = run_layout_json(&m);
	ck_assert_uint_eq(json_array_size(lay), 2);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(lay, 1), "name")), "bias");
	json_decref(lay);
	app_close(&a);
	/* a name taken, twice */
	ck_assert_int_eq(model_register(&bigram_ops, &e), ERR_CONFIG);
	err_clear(&e);
	ck_assert_int_eq(model_register(&window_mlp_ops, &e), ERR_CONFIG);
	ck_assert_msg(strstr(e.msg, "'window_mlp' is already known"), "%s", e.msg);
	/* a table without one of its operations */
	static struct model_ops partial;
	partial = bigram_ops;
	partial.name = "partial";
	partial.eval = NULL;
	err_clear(&e);
	ck_assert_int_eq(model_register(&partial, &e), ERR_CONFIG);
	ck_assert_msg(strstr(e.msg, "'partial': it has no eval operation"), "%s", e.msg);
	ck_assert_ptr_null(model_find("partial"));
	tmpdir_drop(dir);
}
END_TEST

/* a model with one tensor more than a shape holds */
static struct model_ops wide_ops;

static int wide_shape(const struct settings *s, struct model_shape *m, struct err *e)
{
	(void)e;
	model_shape_begin(m, &wide_ops, s->vocab);
	for (int t = 0; t <= MODEL_MAX_TENSORS; t++)
		model_shape_add(m, "w", 2, 2, 1);
	return ERR_OK;
}

START_TEST(a_shape_past_its_tensor_list_is_refused)
{
	struct settings s;
	struct model_shape m;
	struct err e;
	err_clear(&e);
	wide_ops = bigram_ops;
	wide_ops.name = "wide";
	wide_ops.shape = wide_shape;
	if (!model_find("wide"))
		ck_assert_int_eq(model_register(&wide_ops, &e), ERR_OK);
	testutil_settings(&s, "model.kind=wide");
	ck_assert_int_eq(model_shape_init(&m, &s, &e), ERR_CONFIG);
	ck_assert_msg(strstr(e.msg, "model wide has 33 tensors, more than the 32"), "%s", e.msg);
}
END_TEST

START_TEST(shapes_compare_by_kind_and_tensor)
{
	struct model_shape a, b;
	char why[256];
	window_mlp_shape(&a, 16, 3, 4, 8);
	window_mlp_shape(&b, 16, 3, 4, 8);
	ck_assert(model_shape_same(&a, &b, why, sizeof why));
	window_mlp_shape(&b, 16, 3, 4, 9);
	ck_assert(!model_shape_same(&a, &b, why, sizeof why));
	ck_assert_str_eq(why, "model window_mlp: tensor 1 is w1 [8 x 12] != w1 [9 x 12]");
	/* 3 x 4 and 4 x 3 of context: the same w1, another embed */
	window_mlp_shape(&b, 16, 4, 3, 8);
	ck_assert(!model_shape_same(&a, &b, why, sizeof why));
	ck_assert_str_eq(why, "model window_mlp: tensor 0 is embed [16 x 4] != embed [16 x 3]");
	b = a;
	b.dim[WINDOW_MLP_CONTEXT] = 2; /* a size no tensor shows still counts */
	ck_assert(!model_shape_same(&a, &b, why, sizeof why));
	ck_assert_msg(strstr(why, "context 3, embed 4, hidden 8 != vocab 16, context 2"), "%s", why);
	struct settings s;
	struct err e;
	register_bigram();
	testutil_settings(&s, "model.kind=bigram");
	ck_assert_int_eq(model_shape_init(&b, &s, &e), ERR_OK);
	ck_assert(!model_shape_same(&a, &b, why, sizeof why));
	ck_assert_str_eq(why, "model window_mlp != bigram");
}
END_TEST

/* ---- the bigram's own gradient, against double precision ---- */

/* The loss sum and gradient of scale * (loss sum) of batch b, in double. */
static double bigram_reference(const struct model_shape *m, const float *p,
			       const struct bigram_batch *b, double scale, double *g)
{
	int V = m->vocab;
	const float *table = p + m->p[BIGRAM_TABLE].offset, *bias = p + m->p[BIGRAM_BIAS].offset;
	double loss = 0.0, *z = malloc(sizeof(double) * V);
	memset(g, 0, sizeof(double) * m->n_params);
	for (int r = 0; r < b->head.rows; r++) {
		if (b->target[r] < 0)
			continue;
		double mx = -INFINITY, sum = 0.0;
		for (int j = 0; j < V; j++) {
			z[j] = (double)table[(size_t)b->prev[r] * V + j] + bias[j];
			mx = z[j] > mx ? z[j] : mx;
		}
		for (int j = 0; j < V; j++)
			sum += exp(z[j] - mx);
		loss += mx + log(sum) - z[b->target[r]];
		for (int j = 0; j < V; j++) {
			double d = scale * (exp(z[j] - mx) / sum - (j == b->target[r]));
			g[m->p[BIGRAM_TABLE].offset + (size_t)b->prev[r] * V + j] += d;
			g[m->p[BIGRAM_BIAS].offset + j] += d;
		}
	}
	free(z);
	return loss;
}

START_TEST(bigram_gradient_matches_double)
{
	struct settings s;
	struct corpus c;
	struct model_shape m;
	struct model_batch *b;
	struct model_ws *ws;
	struct dev *d;
	struct err e;
	err_clear(&e);
	register_bigram();
	testutil_settings(&s, "model.kind=bigram data.prefix_max=2");
	ck_assert_int_eq(corpus_build(&s, &c, &e), ERR_OK);
	ck_assert_int_eq(model_shape_init(&m, &s, &e), ERR_OK);
	int rows = model_max_rows(&m, 3, s.max_len), ids[3] = {0, 1, 2};
	ck_assert_int_eq(dev_host_create(0, &d, &e), ERR_OK);
	ck_assert_int_eq(model_ws_create(d, &m, rows, &ws, &e), ERR_OK);
	ck_assert_int_eq(model_batch_alloc(&m, rows, &b, &e), ERR_OK);
	ck_assert_int_eq(model_batch_build(b, &c, ids, 3, LAYOUT_PADDED, &e), ERR_OK);
	ck_assert_int_gt(b->rows, b->supervised); /* prompts and padding laid out, not counted */
	float *p = malloc(m.n_params * sizeof(float)), *g = calloc(m.n_params, sizeof(float));
	double *ref = malloc(m.n_params * sizeof(double)), loss = 0.0;
	model_init_params(&m, 5, p);
	ck_assert_int_eq(model_step(ws, p, g, b, 0.25f, 1.0, &loss, &e), ERR_OK);
	double want = bigram_reference(&m, p, (struct bigram_batch *)b, 0.25, ref);
	ck_assert_msg(fabs(loss - want) <= 1e-5 * want, "loss %g, reference %g", loss, want);
	size_t bad = 0;
	for (size_t i = 0; i < m.n_params; i++)
		bad += fabs(g[i] - ref[i]) > 1e-6 + 1e-4 * fabs(ref[i]);
	ck_assert_uint_eq(bad, 0);
	free(p);
	free(g);
	free(ref);
	model_batch_free(b);
	model_ws_destroy(ws);
	dev_destroy(d);
	corpus_free(&c);
}
END_TEST

/* ---- parity through the protocol's own check ---- */

/* parity_run on window 1 of the bigram under `sets`; *controls: the controls it had to
 * catch (each was). */
static void bigram_parity(const char *sets, int *controls, size_t *bits_differ)
{
	struct app a;
	struct run r;
	struct parity_result res;
	struct err e;
	char *dir = tmpdir_make("ddptok-iface");
	err_clear(&e);
	register_bigram();
	ck_assert_msg(app_open(&a, dir, sets, &e) == ERR_OK, "%s", e.msg);
	ck_assert_msg(run_open(&a.env, &r, &e) == ERR_OK, "%s", e.msg);
	ck_assert_ptr_eq(r.eng->shape.ops, &bigram_ops);
	int rc = parity_run(&r, &a.s, NULL, &res, &e);
	ck_assert_msg(rc == ERR_OK && res.ok, "%s: parity failed (%s)", sets, e.msg);
	ck_assert_int_eq(res.modes[NORM_GLOBAL_TOKEN].verdict, PARITY_EXPECTED_PASS);
	*controls = 0;
	for (int mode = 1; mode < NORM_COUNT; mode++)
		if (res.modes[mode].required && res.modes[mode].control == PARITY_DISTINCT) {
			ck_assert_int_eq(res.modes[mode].verdict, PARITY_CAUGHT);
			(*controls)++;
		}
	*bits_differ = res.bits_differ;
	parity_result_free(&res);
	run_close(&r);
	app_close(&a);
	tmpdir_drop(dir);
}

START_TEST(bigram_parity_catches_the_wrong_normalizations)
{
	static const char *const cases[] = {
		"model.kind=bigram devices.world=2 train.accumulation=2",
		"model.kind=bigram devices.world=3 train.accumulation=2 devices.reduce=sum",
		"model.kind=bigram devices.world=2 train.accumulation=3 model.layout=padded "
		"data.prefix_max=3",
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int controls;
		size_t bits;
		bigram_parity(cases[i], &controls, &bits);
		/* imbalanced length bands and M > 1: mean_of_means, microbatch_mean and
		 * double_accumulation all move the gradient, and all were caught */
		ck_assert_msg(controls == NORM_COUNT - 1, "%s: %d controls required", cases[i],
			      controls);
	}
	/* exact mode: the 1-device reference's bits at W = 2 */
	int controls;
	size_t bits = 1;
	bigram_parity("model.kind=bigram devices.world=2 train.accumulation=2 train.shards=4",
		      &controls, &bits);
	ck_assert_uint_eq(bits, 0);
}
END_TEST

/* ---- training, checkpoint, resume ---- */

START_TEST(bigram_resume_equals_continuous)
{
	struct app a, mlp;
	struct train_result cont, stop, res;
	struct err e;
	char croot[600], sroot[600], rroot[600], ck[FSX_PATH_MAX];
	char *dir = tmpdir_make("ddptok-iface");
	err_clear(&e);
	register_bigram();
	ck_assert_msg(app_open(&a, dir, "model.kind=bigram train.updates=6 train.stop_at=3 "
			       "train.lr=0.5", &e) == ERR_OK, "%s", e.msg);
	snprintf(croot, sizeof croot, "%s/cont", dir);
	snprintf(sroot, sizeof sroot, "%s/stop", dir);
	snprintf(rroot, sizeof rroot, "%s/res", dir);
	trainutil_run_to(&a.env, 6, NULL, croot, &cont);
	ck_assert_msg(cont.last_loss < cont.first_loss, "loss %g -> %g", cont.first_loss,
		      cont.last_loss);
	trainutil_run_to(&a.env, 3, NULL, sroot, &stop);
	ck_assert(memcmp(stop.params, cont.params, cont.n * sizeof(float)) != 0);
	snprintf(ck, sizeof ck, "%s", stop.checkpoint);
	trainutil_run_to(&a.env, 6, ck, rroot, &res);
	ck_assert_int_eq(res.start_step, 3);
	ck_assert_uint_eq(res.n, cont.n);
	ck_assert(memcmp(res.params, cont.params, cont.n * sizeof(float)) == 0);
	ck_assert(memcmp(res.momentum, cont.momentum, cont.n * sizeof(float)) == 0);
	/* the window MLP's configuration refuses the bigram's checkpoint, naming the kind */
	struct checkpoint cp;
	ck_assert_int_eq(app_open(&mlp, dir, "", &e), ERR_OK);
	ck_assert_int_eq(checkpoint_load(&mlp.env, ck, NULL, CHECKPOINT_CHECK_SHAPE, &cp, &e),
			 ERR_DATA);
	ck_assert_msg(strstr(e.msg, "model.kind: window_mlp != bigram"), "%s", e.msg);
	app_close(&mlp);
	train_result_free(&cont);
	train_result_free(&stop);
	train_result_free(&res);
	app_close(&a);
	tmpdir_drop(dir);
}
END_TEST

/* A file source with model.vocab = 0 takes its vocabulary from its files; a checkpoint
 * infers it from its parameter count, which only works where the count grows by the same
 * number with each id. The bigram's V x V table does not: its checkpoint is refused
 * (ERR_DATA, not a read past its tensors' end). */
START_TEST(bigram_inferred_vocabulary_is_refused)
{
	struct app a;
	struct train_result res;
	struct checkpoint cp;
	struct settings own;
	struct err e;
	char sets[800], root[600];
	char *dir = tmpdir_make("ddptok-iface");
	err_clear(&e);
	register_bigram();
	snprintf(sets, sizeof sets, "model.kind=bigram data.source=npy data.path=%s/npy "
		 "data.max_len=128 train.updates=2 train.stop_at=2", DDPTOK_DATA_DIR);
	ck_assert_msg(app_open(&a, dir, sets, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(a.s.vocab, 0);
	snprintf(root, sizeof root, "%s/ck", dir);
	trainutil_run_to(&a.env, 2, NULL, root, &res);
	/* as export and sample read it: the checkpoint's own shape, no corpus */
	ck_assert_int_eq(checkpoint_load_model(&a.env, res.checkpoint, &cp, &own, &e), ERR_DATA);
	ck_assert_msg(strstr(e.msg, "no vocabulary makes a model") &&
		      strstr(e.msg, "(set model.vocab)"), "%s", e.msg);
	checkpoint_free(&cp);
	train_result_free(&res);
	app_close(&a);
	tmpdir_drop(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("model-iface");
	TCase *tc = tcase_create("model-iface");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, kind_names_a_registered_model);
	tcase_add_test(tc, shapes_compare_by_kind_and_tensor);
	tcase_add_test(tc, a_shape_past_its_tensor_list_is_refused);
	tcase_add_test(tc, bigram_gradient_matches_double);
	tcase_add_test(tc, bigram_parity_catches_the_wrong_normalizations);
	tcase_add_test(tc, bigram_resume_equals_continuous);
	tcase_add_test(tc, bigram_inferred_vocabulary_is_refused);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
