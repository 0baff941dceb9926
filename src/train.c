/*
 * train: the training loop, checkpoint writing and reading, resume and evaluation (see
 * train.h for what a step and a checkpoint are).
 *
 * Bit-exact resume rests on three things: the checkpoint holds everything the next window
 * depends on (parameters, momentum buffers, the count of updates already taken, which
 * decides the first momentum step, and the sampler's generator state and window index);
 * the engine's arithmetic is deterministic (fixed reduction orders); and a checkpoint is
 * only taken between windows, after engine_window() returned, so no device thread is
 * running while its state is copied out.
 */
#include "train.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "coll.h"
#include "npy.h"

/* ---- signals ------------------------------------------------------------------- */

static volatile sig_atomic_t train_signal; /* 0, or the first signal received */
static struct sigaction train_dfl_action;   /* SIG_DFL, prepared before installing */

static void train_on_signal(int sig)
{
	train_signal = sig;
	/* the next SIGINT or SIGTERM kills at once (sigaction is async-signal-safe) */
	sigaction(SIGINT, &train_dfl_action, NULL);
	sigaction(SIGTERM, &train_dfl_action, NULL);
}

struct saved_signals {
	struct sigaction old_int, old_term;
	int installed;
};

static struct saved_signals saved_signals; /* what the outermost hold replaced */
static int signal_depth;                   /* nesting of train_signals_hold() */

void train_signals_hold(void)
{
	struct saved_signals *sv = &saved_signals;
	struct sigaction sa;
	if (signal_depth++ > 0)
		return; /* an outer caller (the protocol) holds them: keep its first signal */
	memset(&train_dfl_action, 0, sizeof train_dfl_action);
	train_dfl_action.sa_handler = SIG_DFL;
	sigemptyset(&train_dfl_action.sa_mask);
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = train_on_signal;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGINT);
	sigaddset(&sa.sa_mask, SIGTERM);
	sa.sa_flags = SA_RESTART; /* no EINTR in the middle of a checkpoint write */
	train_signal = 0;
	sv->installed = sigaction(SIGINT, &sa, &sv->old_int) == 0;
	if (sv->installed && sigaction(SIGTERM, &sa, &sv->old_term) != 0) {
		sigaction(SIGINT, &sv->old_int, NULL);
		sv->installed = 0;
	}
}

void train_signals_release(void)
{
	struct saved_signals *sv = &saved_signals;
	if (signal_depth == 0 || --signal_depth > 0 || !sv->installed)
		return;
	sigaction(SIGINT, &sv->old_int, NULL);
	sigaction(SIGTERM, &sv->old_term, NULL);
	sv->installed = 0;
}

int train_signal_received(void)
{
	return train_signal;
}

const char *train_signal_name(int sig)
{
	return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a stop request";
}

/* ---- small helpers --------------------------------------------------------------- */

int train_ckpt_root(const struct app *a, int continuous, char *out, size_t cap, struct err *e)
{
	return fsx_join(out, cap, a->artifacts, continuous ? "continuous" : "checkpoints", e);
}

int train_opts_for(const struct app *a, enum train_kind kind, const char *resume_dir,
		   struct train_opts *o, struct err *e)
{
	static const char *metrics[] = {"train-stop.jsonl", "train-continuous.jsonl",
					"train-resume.jsonl"};
	int rc;
	memset(o, 0, sizeof *o);
	if (kind == TRAIN_RESUME && !resume_dir)
		return ERR(e, ERR_USAGE, "a resumed run needs a checkpoint directory");
	o->stop_at = kind == TRAIN_STOP ? a->s.stop_at : a->s.updates;
	o->resume_dir = kind == TRAIN_RESUME ? resume_dir : NULL;
	o->checkpoint_every = a->s.checkpoint_every;
	o->mode = a->s.normalization;
	o->progress = a->tty && a->s.log_level >= 1;
	if ((rc = train_ckpt_root(a, kind == TRAIN_CONTINUOUS, o->ckpt_root, sizeof o->ckpt_root,
				  e)))
		return rc;
	return fsx_join(o->metrics_path, sizeof o->metrics_path, a->outputs, metrics[kind], e);
}

double train_max_abs_diff(const float *a, const float *b, size_t n, size_t *n_differ)
{
	double mx = 0.0;
	size_t nd = 0;
	for (size_t i = 0; i < n; i++) {
		if (memcmp(&a[i], &b[i], sizeof(float)) != 0)
			nd++;
		double d = fabs((double)a[i] - (double)b[i]);
		if (d > mx || isnan(d))
			mx = isnan(d) ? INFINITY : d;
	}
	if (n_differ)
		*n_differ = nd;
	return mx;
}

/* jansson value -> canonical text with a final newline; consumes j */
static int json_text(json_t *j, char **out, size_t *len, const char *what, struct err *e)
{
	int rc = app_json_text(j, 1, out, len, what, e);
	json_decref(j);
	return rc;
}

/* ---- the corpus ------------------------------------------------------------------- */

int train_corpus(struct app *a, int rebuild, struct corpus *c, struct err *e)
{
	char dir[FSX_PATH_MAX], bin[FSX_PATH_MAX];
	int rc;
	memset(c, 0, sizeof *c);
	if ((rc = app_outputs_ready(a, e)) || (rc = fsx_join(dir, sizeof dir, a->outputs, "corpus", e)) ||
	    (rc = fsx_join(bin, sizeof bin, dir, "corpus.bin", e)))
		return rc;
	if (fsx_exists(bin)) {
		if ((rc = corpus_load(dir, c, e))) {
			err_prefix(e, "prepared corpus %s (run `prepare` to rebuild it)", dir);
			return rc;
		}
		if (corpus_params_match(&c->params, &a->s))
			return ERR_OK;
		if (!rebuild) { /* the corpus a checkpoint was trained on may not be replaced */
			char diff[700];
			corpus_params_diff(&c->params, &a->s, diff, sizeof diff);
			rc = ERR(e, ERR_DATA, "prepared corpus %s was built with other settings than "
				 "this run's: %s; run with the configuration it was built from (a "
				 "checkpoint needs the corpus it was trained on), or `prepare` again", dir,
				 diff);
			corpus_free(c);
			return rc;
		}
		app_info(a, "train: %s was prepared with other [data] settings: rebuilding it", dir);
		corpus_free(c);
	}
	if ((rc = corpus_build(&a->s, c, e)))
		return rc;
	if ((rc = corpus_save(c, &a->s, dir, e))) {
		corpus_free(c);
		return rc;
	}
	app_info(a, "train: corpus prepared in %s (data lock %.16s...)", dir, c->lock);
	return ERR_OK;
}

/* ---- reading a checkpoint ----------------------------------------------------------- */

void train_ckpt_free(struct train_ckpt *ck)
{
	if (!ck)
		return;
	free(ck->params);
	free(ck->momentum);
	ck->params = ck->momentum = NULL;
}

/* Reads a listed file of the checkpoint and parses it as JSON. */
static int read_json(const char *dir, const char *name, json_t **out, struct err *e)
{
	char *buf = NULL;
	size_t len;
	json_error_t jerr;
	int rc = ckpt_read(dir, name, &buf, &len, e);
	*out = NULL;
	if (rc)
		return rc;
	*out = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	free(buf);
	if (!*out || !json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		return ERR(e, ERR_DATA, "checkpoint %s: %s is not a JSON object (line %d: %s)", dir,
			   name, jerr.line, jerr.text);
	}
	return ERR_OK;
}

static int get_int(json_t *obj, const char *key, int64_t lo, int64_t *out)
{
	json_t *v = json_object_get(obj, key);
	if (!json_is_integer(v) || json_integer_value(v) < lo)
		return -1;
	*out = json_integer_value(v);
	return 0;
}

static int read_vector(const char *dir, const char *name, size_t n, float **out, struct err *e)
{
	char *buf = NULL;
	size_t len, shape[NPY_MAX_DIMS], count;
	enum npy_dtype dt;
	int ndim;
	void *data = NULL;
	int rc = ckpt_read(dir, name, &buf, &len, e);
	if (rc)
		return rc;
	rc = npy_read_from_memory(buf, len, name, &dt, shape, &ndim, &data, e);
	free(buf);
	if (rc) {
		err_prefix(e, "checkpoint %s", dir);
		return rc;
	}
	if (dt != NPY_F32 || ndim != 1) {
		free(data);
		return ERR(e, ERR_DATA, "checkpoint %s: %s is not a float32 vector", dir, name);
	}
	count = shape[0];
	if (count != n) {
		free(data);
		return ERR(e, ERR_DATA, "checkpoint %s: %s holds %zu values, state.json announces "
			   "%zu parameters", dir, name, count, n);
	}
	*out = data;
	return ERR_OK;
}

static int parse_state(const char *dir, json_t *st, struct train_ckpt *ck, struct err *e)
{
	json_t *v, *smp, *rng;
	int64_t world, n;
	v = json_object_get(st, "format");
	if (!json_is_string(v) || strcmp(json_string_value(v), TRAIN_STATE_FORMAT) != 0)
		return ERR(e, ERR_DATA, "checkpoint %s: state.json is not in format %s", dir,
			   TRAIN_STATE_FORMAT);
	if (get_int(st, "step", 0, &ck->step) || get_int(st, "updates_done", 0, &ck->updates_done) ||
	    get_int(st, "world", 1, &world) || get_int(st, "n_params", 1, &n))
		return ERR(e, ERR_DATA, "checkpoint %s: state.json lacks a valid step, updates_done, "
			   "world or n_params", dir);
	if (ck->updates_done > ck->step)
		return ERR(e, ERR_DATA, "checkpoint %s: state.json: %" PRId64 " updates in %" PRId64
			   " steps", dir, ck->updates_done, ck->step);
	if (ck->step > TRAIN_MAX_STEP)
		return ERR(e, ERR_DATA, "checkpoint %s: state.json: step %" PRId64 " is past any "
			   "run's end (train.updates <= %d)", dir, ck->step, TRAIN_MAX_STEP);
	if (world > PLAN_MAX_WORLD)
		return ERR(e, ERR_DATA, "checkpoint %s: state.json: %" PRId64 " ranks (at most %d)",
			   dir, world, PLAN_MAX_WORLD);
	if (n > TRAIN_MAX_PARAMS)
		return ERR(e, ERR_DATA, "checkpoint %s: state.json: %" PRId64 " parameters (at most "
			   "%lld)", dir, n, (long long)TRAIN_MAX_PARAMS);
	ck->world = (int)world;
	ck->n = (size_t)n;
	smp = json_object_get(st, "sampler");
	rng = json_object_get(smp, "rng");
	if (!json_is_object(smp) || !json_is_array(rng) || json_array_size(rng) != 4 ||
	    get_int(smp, "window_index", 0, &ck->sampler.window_index))
		return ERR(e, ERR_DATA, "checkpoint %s: state.json: no valid sampler state", dir);
	for (int i = 0; i < 4; i++) {
		json_t *h = json_array_get(rng, (size_t)i);
		const char *s = json_string_value(h);
		char *end;
		if (!s || strlen(s) != 16 || strspn(s, "0123456789abcdef") != 16)
			return ERR(e, ERR_DATA, "checkpoint %s: state.json: sampler rng word %d is not "
				   "16 hex digits", dir, i);
		errno = 0;
		ck->sampler.rng[i] = strtoull(s, &end, 16);
		if (errno || *end)
			return ERR(e, ERR_DATA, "checkpoint %s: state.json: bad rng word %d", dir, i);
	}
	/* xoshiro256** never reaches the all-zero state, and would stay there for ever */
	if (!(ck->sampler.rng[0] | ck->sampler.rng[1] | ck->sampler.rng[2] | ck->sampler.rng[3]))
		return ERR(e, ERR_DATA, "checkpoint %s: state.json: the sampler rng state is all "
			   "zero, which no run can reach", dir);
	if (ck->sampler.window_index != ck->step)
		return ERR(e, ERR_DATA, "checkpoint %s: state.json: window index %" PRId64 " at step %"
			   PRId64, dir, ck->sampler.window_index, ck->step);
	v = json_object_get(st, "normalization");
	ck->normalization = norm_mode_parse(json_string_value(v));
	if (ck->normalization < 0)
		return ERR(e, ERR_DATA, "checkpoint %s: state.json: unknown normalization", dir);
	v = json_object_get(st, "backend");
	snprintf(ck->backend, sizeof ck->backend, "%s",
		 json_is_string(v) ? json_string_value(v) : "?");
	v = json_object_get(st, "last_loss");
	ck->last_loss = json_is_number(v) ? json_number_value(v) : NAN;
	return ERR_OK;
}

static int load_config(const char *dir, struct cfg *stored, struct err *e)
{
	char *text = NULL, origin[FSX_PATH_MAX + 16];
	size_t len;
	struct err sub;
	int rc;
	if ((rc = cfg_init(stored, settings_keys, e)))
		return rc;
	if ((rc = ckpt_read(dir, "config.ini", &text, &len, e)))
		return rc;
	snprintf(origin, sizeof origin, "%s/config.ini", dir);
	err_clear(&sub);
	rc = cfg_load_text(stored, text, origin, &sub);
	free(text);
	if (rc)
		return ERR(e, ERR_DATA, "checkpoint %s: its config.ini does not load with this "
			   "program's keys: %s", dir, sub.msg);
	return ERR_OK;
}

int train_ckpt_load(const struct app *a, const char *dir, const struct corpus *c,
		    unsigned checks, struct train_ckpt *ck, struct err *e)
{
	struct ckpt_report rep;
	struct cfg stored;
	struct model_shape shape;
	json_t *j = NULL;
	int have_cfg = 0, rc;

	memset(ck, 0, sizeof *ck);
	memset(&stored, 0, sizeof stored);
	snprintf(ck->dir, sizeof ck->dir, "%s", dir);
	/* 1. the store: manifest, every file's size and digest */
	rc = ckpt_verify(dir, &rep, e);
	uint64_t manifest_step = rep.step;
	ckpt_report_free(&rep);
	if (rc)
		return rc;

	/* 2. the configuration it was trained with */
	rc = load_config(dir, &stored, e);
	have_cfg = stored.vals != NULL;
	if (rc)
		goto out;
	if ((checks & TRAIN_CHECK_CONFIG) && (checks & TRAIN_CHECK_ANY_NORMALIZATION)) {
		char assign[96];
		snprintf(assign, sizeof assign, "train.normalization=%s",
			 cfg_str(&a->cfg, "train", "normalization"));
		if ((rc = cfg_set(&stored, assign, e)) != ERR_OK)
			goto out;
	}
	if (checks & TRAIN_CHECK_CONFIG) {
		char diff[900];
		int nd = cfg_diff_math(&a->cfg, &stored, diff, sizeof diff);
		if (nd > 0) {
			rc = ERR(e, ERR_DATA, "checkpoint %s was trained with another configuration: %d "
				 "key%s that change%s the math differ%s (current != checkpoint): %s",
				 dir, nd, nd == 1 ? "" : "s", nd == 1 ? "s" : "", nd == 1 ? "s" : "",
				 diff);
			goto out;
		}
	}

	/* 3. the data it was trained on */
	if ((rc = read_json(dir, "data.lock", &j, e)))
		goto out;
	{
		const char *lk = json_string_value(json_object_get(j, "lock"));
		if (!lk || !digest_is_hex(lk)) {
			rc = ERR(e, ERR_DATA, "checkpoint %s: data.lock holds no valid \"lock\"", dir);
			goto out;
		}
		memcpy(ck->lock, lk, 65);
	}
	json_decref(j);
	j = NULL;
	if ((checks & TRAIN_CHECK_DATA) && strcmp(ck->lock, c->lock) != 0) {
		rc = ERR(e, ERR_DATA, "data lock mismatch: checkpoint %s was trained on data lock "
			 "%.16s..., the corpus in %s/corpus has %.16s... (the data changed since)", dir,
			 ck->lock, a->outputs, c->lock);
		goto out;
	}

	/* 4. the state */
	if ((rc = read_json(dir, "state.json", &j, e)) || (rc = parse_state(dir, j, ck, e)))
		goto out;
	if ((uint64_t)ck->step != manifest_step) {
		rc = ERR(e, ERR_DATA, "checkpoint %s: state.json says step %" PRId64 ", its manifest "
			 "step %" PRIu64, dir, ck->step, manifest_step);
		goto out;
	}
	json_decref(j);
	j = NULL;
	/* the model's shape: the parameters are read into (and interpreted as) this
	 * configuration's model */
	if (checks & (TRAIN_CHECK_SHAPE | TRAIN_CHECK_CONFIG)) {
		static const char *const model_keys[][2] = {
			{"data", "vocab"}, {"model", "context"}, {"model", "embed"}, {"model", "hidden"}};
		for (size_t k = 0; k < sizeof model_keys / sizeof model_keys[0]; k++) {
			long long mine = cfg_int(&a->cfg, model_keys[k][0], model_keys[k][1]);
			long long theirs = cfg_int(&stored, model_keys[k][0], model_keys[k][1]);
			if (mine != theirs) {
				rc = ERR(e, ERR_DATA, "checkpoint %s holds a model with %s.%s = %lld, "
					 "this configuration has %lld", dir, model_keys[k][0],
					 model_keys[k][1], theirs, mine);
				goto out;
			}
		}
		model_shape_init(&shape, a->s.vocab, a->s.context, a->s.embed, a->s.hidden);
		if (ck->n != shape.n_params) {
			rc = ERR(e, ERR_DATA, "checkpoint %s: %zu parameters, the model of this "
				 "configuration has %zu", dir, ck->n, shape.n_params);
			goto out;
		}
	}
	if (checks & TRAIN_CHECK_CONFIG) {
		if (ck->world != a->s.world) {
			rc = ERR(e, ERR_DATA, "checkpoint %s holds %d ranks, this configuration has "
				 "devices.world = %d", dir, ck->world, a->s.world);
			goto out;
		}
	}
	if ((rc = read_vector(dir, "params.npy", ck->n, &ck->params, e)) ||
	    (rc = read_vector(dir, "momentum.npy", ck->n, &ck->momentum, e)))
		goto out;
	/* a run stops at its first non-finite loss: no checkpoint holds NaN or infinity */
	for (int v = 0; v < 2; v++) {
		const float *x = v ? ck->momentum : ck->params;
		size_t bad = 0, first = 0;
		for (size_t i = 0; i < ck->n; i++)
			if (!isfinite(x[i]) && bad++ == 0)
				first = i;
		if (bad) {
			rc = ERR(e, ERR_DATA, "checkpoint %s: %s holds %zu non-finite value%s (the "
				 "first at index %zu)", dir, v ? "momentum.npy" : "params.npy", bad,
				 bad == 1 ? "" : "s", first);
			goto out;
		}
	}

	/* 5. the rank parts */
	for (int r = 0; r < ck->world; r++) {
		char name[32];
		int64_t rank;
		json_t *h;
		snprintf(name, sizeof name, "rank-%d.json", r);
		if ((rc = read_json(dir, name, &j, e)))
			goto out;
		h = json_object_get(j, "history");
		if (get_int(j, "rank", 0, &rank) || rank != r || !json_is_object(h) ||
		    get_int(h, "windows", 0, &ck->hist[r].windows) ||
		    get_int(h, "sequences", 0, &ck->hist[r].sequences) ||
		    get_int(h, "tokens", 0, &ck->hist[r].tokens)) {
			rc = ERR(e, ERR_DATA, "checkpoint %s: %s lacks a valid rank or history", dir,
				 name);
			goto out;
		}
		/* every rank takes part in every window; what a window holds is bounded */
		if (ck->hist[r].windows != ck->step ||
		    ck->hist[r].sequences > ck->step * (int64_t)TRAIN_MAX_WINDOW_SEQUENCES ||
		    ck->hist[r].tokens > ck->step * (int64_t)TRAIN_MAX_WINDOW_TOKENS) {
			rc = ERR(e, ERR_DATA, "checkpoint %s: %s: a history of %" PRId64 " windows, %"
				 PRId64 " sequences, %" PRId64 " tokens does not fit %" PRId64 " steps",
				 dir, name, ck->hist[r].windows, ck->hist[r].sequences,
				 ck->hist[r].tokens, ck->step);
			goto out;
		}
		json_decref(j);
		j = NULL;
	}
	rc = ERR_OK;
out:
	json_decref(j);
	if (have_cfg)
		cfg_free(&stored);
	if (rc)
		train_ckpt_free(ck);
	return rc;
}

int train_open(struct app *a, struct run *r, struct corpus *c, const struct train_ckpt *ck,
	       struct err *e)
{
	int rc = run_open_corpus(a, r, c, e);
	if (rc || !ck)
		return rc;
	if ((rc = engine_set_state(r->eng, ck->params, ck->momentum, ck->updates_done, e))) {
		run_close(r);
		return rc;
	}
	sampler_set_state(&r->sampler, &ck->sampler);
	return ERR_OK;
}

/* ---- writing a checkpoint ----------------------------------------------------------- */

struct trainer {
	struct app *a;
	const struct train_opts *o;
	struct run r;
	int64_t step;
	int64_t last_ckpt_step;
	double last_loss;
	struct train_history hist[PLAN_MAX_WORLD];
	float *params, *momentum; /* host scratch, n each */
	FILE *metrics;
};

static int add_buffer(struct ckpt_writer *w, const char *name, char *buf, size_t len,
		      struct err *e)
{
	int rc = ckpt_add(w, name, buf, len, e);
	free(buf);
	return rc;
}

static int add_json(struct ckpt_writer *w, const char *name, json_t *j, struct err *e)
{
	char *buf = NULL;
	size_t len = 0;
	int rc = json_text(j, &buf, &len, name, e);
	if (rc)
		return rc;
	return add_buffer(w, name, buf, len, e);
}

static int add_vector(struct ckpt_writer *w, const char *name, const float *x, size_t n,
		      struct err *e)
{
	void *buf = NULL;
	size_t len = 0, shape[1] = {n};
	int rc = npy_write_to_memory(NPY_F32, shape, 1, x, &buf, &len, e);
	if (rc)
		return rc;
	return add_buffer(w, name, buf, len, e);
}

/* The resolved configuration, with [train] normalization set to the one the snapshot's
 * windows were trained with (an interactive session may have switched modes): config.ini and
 * state.json of a checkpoint then always agree, and a resume needs no extra --set. */
static int add_config(struct ckpt_writer *w, const struct cfg *c, int mode, struct err *e)
{
	struct cfg copy = {0};
	char *buf = NULL;
	size_t len = 0;
	int rc;

	if (mode != cfg_enum(c, "train", "normalization")) {
		char assign[96];
		snprintf(assign, sizeof assign, "train.normalization=%s", norm_mode_name(mode));
		if ((rc = cfg_init(&copy, c->keys, e)) != ERR_OK)
			return rc;
		for (int i = 0; i < c->n; i++)
			copy.vals[i] = c->vals[i];
		if ((rc = cfg_set(&copy, assign, e)) != ERR_OK)
			goto out;
		c = &copy;
	}
	FILE *f = open_memstream(&buf, &len);
	if (!f) {
		rc = ERR_ERRNO(e, "config.ini: cannot open a memory stream");
		goto out;
	}
	int bad = cfg_write(c, f) != 0;
	if (fclose(f) != 0 || bad) {
		free(buf);
		rc = ERR(e, ERR_IO, "config.ini: cannot write the resolved configuration");
		goto out;
	}
	rc = add_buffer(w, "config.ini", buf, len, e);
out:
	if (copy.vals)
		cfg_free(&copy);
	return rc;
}

int train_checkpoint_write(const struct train_snapshot *s, const char *root, char *out,
			   size_t cap, struct err *e)
{
	const struct app *a = s->a;
	const struct engine *eng = s->r->eng;
	const struct corpus *c = &s->r->corpus;
	struct ckpt_writer *w = NULL;
	struct sampler_state ss;
	int rc;

	sampler_get_state(&s->r->sampler, &ss);
	json_t *rng = json_array();
	for (int i = 0; i < 4; i++) {
		char hex[17];
		snprintf(hex, sizeof hex, "%016" PRIx64, ss.rng[i]);
		json_array_append_new(rng, json_string(hex));
	}
	json_t *state = json_pack(
		"{s:s, s:I, s:I, s:{s:o, s:I}, s:s, s:s, s:s, s:i, s:i, s:i, s:I, s:o, s:o}",
		"format", TRAIN_STATE_FORMAT, "step", (json_int_t)s->step, "updates_done",
		(json_int_t)eng->updates_done, "sampler", "rng", rng, "window_index",
		(json_int_t)ss.window_index, "normalization", norm_mode_name(s->mode), "backend",
		engine_backend_name(eng), "reduce", coll_op_name(a->s.reduce), "world", eng->world,
		"accumulation", a->s.accumulation, "batch_size", a->s.batch_size, "n_params",
		(json_int_t)eng->shape.n_params, "layout", run_layout_json(&eng->shape), "last_loss",
		s->step > 0 && isfinite(s->last_loss) ? json_real(s->last_loss) : json_null());
	json_t *lock = json_pack("{s:s, s:i, s:{s:i, s:i, s:i}}", "lock", c->lock,
				 "corpus_format", CORPUS_FORMAT, "sequences", "train",
				 c->split_count[SPLIT_TRAIN], "validation",
				 c->split_count[SPLIT_VALIDATION], "test", c->split_count[SPLIT_TEST]);

	if ((rc = ckpt_begin(root, (uint64_t)s->step, &w, e))) {
		json_decref(state);
		json_decref(lock);
		return rc;
	}
	if ((rc = add_vector(w, "params.npy", s->params, eng->shape.n_params, e)) ||
	    (rc = add_vector(w, "momentum.npy", s->momentum, eng->shape.n_params, e)) ||
	    (rc = add_config(w, &a->cfg, s->mode, e)))
		goto fail;
	rc = add_json(w, "data.lock", lock, e);
	lock = NULL;
	if (rc)
		goto fail;
	rc = add_json(w, "state.json", state, e);
	state = NULL;
	if (rc)
		goto fail;
	for (int r = 0; r < eng->world; r++) {
		char name[32];
		char dev[32];
		snprintf(name, sizeof name, "rank-%d.json", r);
		snprintf(dev, sizeof dev, "%s:%d", engine_backend_name(eng),
			 eng->plan.backend == DEV_BACKEND_CUDA ? eng->plan.ids[r] : r);
		json_t *j = json_pack("{s:i, s:s, s:s, s:n, s:s, s:{s:I, s:I, s:I}}", "rank", r,
				      "device", dev, "backend", engine_backend_name(eng), "rng",
				      "rng_note", "none: the ranks draw no random numbers (the sampler "
				      "state in state.json is the run's only generator)", "history",
				      "windows", (json_int_t)s->hist[r].windows, "sequences",
				      (json_int_t)s->hist[r].sequences, "tokens",
				      (json_int_t)s->hist[r].tokens);
		if ((rc = add_json(w, name, j, e)))
			goto fail;
	}
	struct ckpt_commit_info ci;
	rc = ckpt_commit_ex(w, &ci, e);
	w = NULL;
	if (rc)
		return rc;
	if (out && cap)
		snprintf(out, cap, "%s", ci.path);
	if (ci.kept[0])
		app_info(a, "checkpoint: %s was in the way and is not only what the store wrote "
			 "(%s): kept as %s, not deleted", ci.path, ci.kept_why, ci.kept);
	if (ci.leftover[0])
		app_info(a, "checkpoint: the replaced copy %s could not be removed (clean --scope "
			 "partial removes it)", ci.leftover);
	app_debug(a, "train: checkpoint %s", ci.path);
	return ERR_OK;
fail:
	json_decref(state);
	json_decref(lock);
	ckpt_abort(w);
	return rc;
}

/* Writes checkpoint step-NNNN of the trainer's current step; its directory goes to out. */
static int write_checkpoint(struct trainer *t, char *out, size_t cap, struct err *e)
{
	struct train_snapshot s = {
		.a = t->a, .r = &t->r, .step = t->step, .mode = t->o->mode,
		.last_loss = t->last_loss, .hist = t->hist, .params = t->params,
		.momentum = t->momentum,
	};
	int rc = engine_get_state(t->r.eng, t->params, t->momentum, e);
	if (rc || (rc = train_checkpoint_write(&s, t->o->ckpt_root, out, cap, e)))
		return rc;
	t->last_ckpt_step = t->step;
	return ERR_OK;
}

void train_history_add(struct train_history *hist, const struct window *w)
{
	for (int r = 0; r < w->world; r++) {
		hist[r].windows++;
		hist[r].tokens += w->rank_tokens[r];
		for (int m = 0; m < w->micro; m++)
			hist[r].sequences += w->mb[r][m].n;
	}
}

/* ---- the loop --------------------------------------------------------------------- */

static int write_metrics(struct trainer *t, const struct window *w,
			 const struct window_result *wr, struct err *e)
{
	json_t *toks = json_array();
	for (int r = 0; r < w->world; r++)
		json_array_append_new(toks, json_integer(wr->rank_tokens[r]));
	json_t *j = json_pack("{s:I, s:I, s:I, s:o, s:I, s:b, s:o, s:o, s:f, s:f, s:f}", "step",
			      (json_int_t)t->step, "window", (json_int_t)w->index + 1, "updates_done",
			      (json_int_t)t->r.eng->updates_done, "rank_tokens", toks, "N",
			      (json_int_t)wr->N, "rejected", wr->rejected, "loss",
			      wr->rejected ? json_null() : json_real(wr->loss), "grad_norm",
			      wr->rejected ? json_null() : json_real(wr->grad_norm), "seconds",
			      wr->seconds, "tokens_per_s",
			      wr->seconds > 0 ? (double)wr->N / wr->seconds : 0.0, "seconds_coll",
			      wr->seconds_coll);
	char *text = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
	json_decref(j);
	if (!text)
		return ERR(e, ERR_IO, "%s: cannot serialize a metrics line", t->o->metrics_path);
	int bad = fprintf(t->metrics, "%s\n", text) < 0 || fflush(t->metrics) != 0;
	free(text);
	if (bad)
		return ERR_ERRNO(e, "%s: cannot write metrics", t->o->metrics_path);
	return ERR_OK;
}

static int is_ckpt_step(const struct train_opts *o, int64_t step)
{
	return o->ckpt_root[0] &&
	       (step == o->stop_at || (o->checkpoint_every > 0 && step % o->checkpoint_every == 0));
}

static void fill_result(struct trainer *t, struct train_result *res)
{
	res->step = t->step;
	res->updates_done = t->r.eng->updates_done;
	memcpy(res->hist, t->hist, sizeof t->hist);
	snprintf(res->backend, sizeof res->backend, "%s", engine_backend_name(t->r.eng));
	res->tokens_per_s = res->seconds > 0 ? (double)res->tokens / res->seconds : 0.0;
}

void train_result_free(struct train_result *r)
{
	if (!r)
		return;
	free(r->params);
	free(r->momentum);
	r->params = r->momentum = NULL;
}

static int train_run_held(struct app *a, const struct train_opts *o, struct train_result *res,
			  struct err *e)
{
	struct trainer t;
	struct train_ckpt ck;
	struct corpus c;
	int rc, have_run = 0;
	const char *why = NULL;

	memset(res, 0, sizeof *res);
	memset(&t, 0, sizeof t);
	memset(&ck, 0, sizeof ck);
	res->first_loss = res->last_loss = NAN;
	t.a = a;
	t.o = o;
	t.last_loss = NAN;
	t.last_ckpt_step = -1;
	if (o->stop_at < 1)
		return ERR(e, ERR_USAGE, "train: nothing to run up to step %" PRId64, o->stop_at);
	if ((rc = train_corpus(a, o->resume_dir == NULL, &c, e)))
		return rc;
	if (o->resume_dir) {
		if ((rc = train_ckpt_load(a, o->resume_dir, &c, TRAIN_CHECK_ALL, &ck, e)))
			goto out_corpus;
		if (ck.normalization != o->mode) {
			rc = ERR(e, ERR_DATA, "checkpoint %s was trained with normalization %s, this run "
				 "uses %s", o->resume_dir, norm_mode_name(ck.normalization),
				 norm_mode_name(o->mode));
			goto out_corpus;
		}
		/* [train] updates is not a math key: a resume may lengthen a run, but not end it
		 * before the step it already reached */
		if (ck.step > o->stop_at) {
			rc = ERR(e, ERR_CONFIG, "checkpoint %s is at step %" PRId64 ", past step %" PRId64
				 " where this run ends (raise [train] updates to continue it)",
				 o->resume_dir, ck.step, o->stop_at);
			goto out_corpus;
		}
	}
	if (o->resume_dir && a->o.inject_drift && ck.n > 0) {
		/* testing aid: the smallest change there is, which the resume check must see */
		uint32_t bits;
		memcpy(&bits, &ck.params[0], 4);
		bits ^= 1u;
		memcpy(&ck.params[0], &bits, 4);
		app_info(a, "train: --inject-drift: parameter 0 of the resumed state has its last "
			 "bit flipped");
	}
	if ((rc = train_open(a, &t.r, &c, o->resume_dir ? &ck : NULL, e)))
		goto out;
	have_run = 1;
	if (o->resume_dir) {
		if (strcmp(ck.backend, engine_backend_name(t.r.eng)) != 0)
			app_info(a, "train: note: checkpoint written by the %s backend, continuing on %s "
				 "(bit-exact equality holds only on one backend)", ck.backend,
				 engine_backend_name(t.r.eng));
		t.step = ck.step;
		t.last_ckpt_step = ck.step;
		t.last_loss = ck.last_loss;
		memcpy(t.hist, ck.hist, sizeof t.hist);
		snprintf(res->checkpoint, sizeof res->checkpoint, "%s", o->resume_dir);
	}
	res->start_step = t.step;
	res->n = t.r.eng->shape.n_params;
	t.params = malloc(res->n * sizeof(float));
	t.momentum = malloc(res->n * sizeof(float));
	if (!t.params || !t.momentum) {
		rc = ERR(e, ERR_DEVICE, "out of memory");
		goto out;
	}
	/* the checkpoint root must be usable before any window is spent: a bad
	 * run.artifacts found at the first checkpoint would lose the work done so far */
	if (o->ckpt_root[0] && (rc = app_dir_ready(o->ckpt_root, "[run] artifacts", e)))
		goto out;
	if (o->metrics_path[0] && t.step < o->stop_at) {
		if (!(t.metrics = fopen(o->metrics_path, "w"))) {
			rc = ERR_ERRNO(e, "cannot create %s", o->metrics_path);
			goto out;
		}
	}

	int progress_shown = 0;
	while (t.step < o->stop_at) {
		struct window_result wr;
		int flags = ENGINE_UPDATE | ENGINE_CAPTURE_REDUCED;
#ifndef NDEBUG
		flags |= ENGINE_CHECK_REPLICAS;
#else
		if (is_ckpt_step(o, t.step + 1))
			flags |= ENGINE_CHECK_REPLICAS;
#endif
		if (train_signal)
			break;
		if ((rc = sampler_next(&t.r.sampler, &t.r.w, e)))
			goto out;
		if ((rc = engine_window(t.r.eng, &t.r.w, o->mode, flags, &wr, e)))
			goto out;
		if (wr.rejected && a->s.empty_window == EMPTY_ERROR) {
			rc = ERR(e, ERR_EMPTY, "window %" PRId64 " (step %" PRId64 ") has no supervised "
				 "token on any rank; train.empty_window = error (set it to skip to step "
				 "over such windows)", t.r.w.index + 1, t.step + 1);
			goto out;
		}
		t.step++;
		if (wr.rejected)
			res->skipped++;
		train_history_add(t.hist, &t.r.w);
		res->seconds += wr.seconds;
		res->tokens += wr.N;
		if (!wr.rejected) {
			t.last_loss = wr.loss;
			if (isnan(res->first_loss))
				res->first_loss = wr.loss;
			res->last_loss = wr.loss;
		}
		if (t.metrics && (rc = write_metrics(&t, &t.r.w, &wr, e)))
			goto out;
		if (o->progress) {
			printf("\rtrain: step %" PRId64 "/%" PRId64 "  loss %.4f  N %" PRId64
			       "  %.0f tokens/s   ", t.step, o->stop_at, t.last_loss, wr.N,
			       wr.seconds > 0 ? wr.N / wr.seconds : 0.0);
			fflush(stdout);
			progress_shown = 1;
		}
		if (o->on_window && o->on_window(o->on_window_arg, t.step, &wr))
			break;
		if (t.step < o->stop_at && is_ckpt_step(o, t.step) && !train_signal) {
			if ((rc = write_checkpoint(&t, res->checkpoint, sizeof res->checkpoint, e)))
				goto out;
			res->checkpoints_written++;
		}
	}
	if (progress_shown) {
		putchar('\n');
		fflush(stdout);
	}
	/* the final (or interrupting) checkpoint, unless this step is already on disk */
	if (o->ckpt_root[0] && t.step != t.last_ckpt_step && t.step > 0) {
		if ((rc = write_checkpoint(&t, res->checkpoint, sizeof res->checkpoint, e)))
			goto out;
		res->checkpoints_written++;
	}
	/* a signal counts even when it arrived in the last window or while the final
	 * checkpoint was written: the run is then complete, but the caller (the protocol)
	 * must stop rather than go on to its next step */
	if (t.step < o->stop_at || train_signal) {
		res->interrupted = 1;
		why = train_signal_name(train_signal);
	}
	res->params = malloc(res->n * sizeof(float));
	res->momentum = malloc(res->n * sizeof(float));
	if (!res->params || !res->momentum) {
		rc = ERR(e, ERR_DEVICE, "out of memory");
		goto out;
	}
	if ((rc = engine_get_state(t.r.eng, res->params, res->momentum, e)))
		goto out;
	fill_result(&t, res);
	if (res->interrupted) {
		if (res->checkpoints_written == 0 && o->resume_dir)
			rc = ERR(e, ERR_INTERRUPTED, "interrupted by %s before any step: the state is "
				 "still that of checkpoint %s (continue with --resume %s)", why,
				 o->resume_dir, o->resume_dir);
		else if (res->checkpoints_written == 0 && t.step == 0)
			rc = ERR(e, ERR_INTERRUPTED, "interrupted by %s before the first step: "
				 "nothing to save", why);
		else if (res->checkpoint[0] && t.step >= o->stop_at)
			rc = ERR(e, ERR_INTERRUPTED, "interrupted by %s in the last window: the run "
				 "completed its %" PRId64 " steps, checkpoint %s written", why, t.step,
				 res->checkpoint);
		else if (res->checkpoint[0])
			rc = ERR(e, ERR_INTERRUPTED, "interrupted by %s after step %" PRId64 " of %" PRId64
				 ": checkpoint %s written (continue with --resume %s)", why, t.step,
				 o->stop_at, res->checkpoint, res->checkpoint);
		else
			rc = ERR(e, ERR_INTERRUPTED, "interrupted by %s after step %" PRId64 " of %" PRId64
				 " (no checkpoint root configured)", why, t.step, o->stop_at);
	}
out:
	if (t.metrics && fclose(t.metrics) != 0 && rc == ERR_OK)
		rc = ERR_ERRNO(e, "cannot write %s", o->metrics_path);
	free(t.params);
	free(t.momentum);
	if (have_run)
		run_close(&t.r);
	train_ckpt_free(&ck);
	if (rc && rc != ERR_INTERRUPTED)
		train_result_free(res);
	return rc;
out_corpus:
	corpus_free(&c);
	train_ckpt_free(&ck);
	return rc;
}

int train_run(struct app *a, const struct train_opts *o, struct train_result *res,
	      struct err *e)
{
	/* held from the start: a signal while the corpus is loaded or the engine starts
	 * stops the run before its first window, as one during a window does after it */
	train_signals_hold();
	int rc = train_run_held(a, o, res, e);
	train_signals_release();
	return rc;
}

/* ---- evaluation --------------------------------------------------------------------- */

int train_const_guess(const struct corpus *c, int split, int split2, int64_t *hits2)
{
	int64_t *count = calloc((size_t)c->vocab, sizeof *count);
	int best = DATA_RESERVED;
	if (!count) {
		*hits2 = 0;
		return -1;
	}
	for (int i = c->split_first[split]; i < c->split_first[split] + c->split_count[split]; i++)
		for (int p = c->offset[i] + c->prefix[i]; p < c->offset[i + 1]; p++)
			count[c->tokens[p]]++;
	for (int v = 0; v < c->vocab; v++)
		if (count[v] > count[best])
			best = v;
	*hits2 = 0;
	for (int i = c->split_first[split2]; i < c->split_first[split2] + c->split_count[split2];
	     i++)
		for (int p = c->offset[i] + c->prefix[i]; p < c->offset[i + 1]; p++)
			*hits2 += c->tokens[p] == best;
	free(count);
	return best;
}

static int eval_split(struct engine *eng, const struct corpus *c, int split, int const_id,
		      struct train_split_eval *se, struct err *e)
{
	int rc = engine_evaluate(eng, split, &se->loss_sum, &se->tokens, &se->hits,
				 &se->sequences, e);
	if (rc)
		return rc;
	se->loss = se->tokens ? se->loss_sum / (double)se->tokens : NAN;
	se->accuracy = se->tokens ? (double)se->hits / (double)se->tokens : NAN;
	se->const_hits = 0;
	for (int i = c->split_first[split]; i < c->split_first[split] + c->split_count[split]; i++)
		for (int p = c->offset[i] + c->prefix[i]; p < c->offset[i + 1]; p++)
			se->const_hits += c->tokens[p] == const_id;
	se->const_accuracy = se->tokens ? (double)se->const_hits / (double)se->tokens : NAN;
	return ERR_OK;
}

int train_evaluate(struct app *a, const char *dir, struct train_eval *ev, struct err *e)
{
	struct train_ckpt ck;
	struct corpus c;
	struct run r;
	char root[FSX_PATH_MAX];
	int rc;
	int64_t unused;

	memset(ev, 0, sizeof *ev);
	memset(&ck, 0, sizeof ck);
	if (!dir) {
		/* the newest valid checkpoint of the stop/resume runs or of the continuous one
		 * (the higher step; on a tie the former) */
		struct err first;
		int found = 0;
		err_clear(&first);
		for (int cont = 0; cont < 2; cont++) {
			char path[FSX_PATH_MAX];
			uint64_t step = 0;
			int skipped = 0;
			struct err le;
			err_clear(&le);
			if ((rc = train_ckpt_root(a, cont, root, sizeof root, e)))
				return rc;
			if (ckpt_latest_valid(root, path, sizeof path, &step, &skipped, &le)) {
				if (!cont)
					first = le;
				continue;
			}
			if (skipped)
				app_info(a, "evaluate: %d newer checkpoint%s under %s failed "
					 "verification and %s skipped (see the checkpoints command)",
					 skipped, skipped == 1 ? "" : "s", root,
					 skipped == 1 ? "was" : "were");
			if (!found || (int64_t)step > ev->step) {
				snprintf(ev->checkpoint, sizeof ev->checkpoint, "%s", path);
				ev->step = (int64_t)step;
				found = 1;
			}
		}
		if (!found)
			return ERR(e, first.code ? first.code : ERR_DATA, "%s (nor in %s)", first.msg,
				   root);
	} else {
		snprintf(ev->checkpoint, sizeof ev->checkpoint, "%s", dir);
	}
	if ((rc = train_corpus(a, 0, &c, e)))
		return rc;
	/* evaluation needs the checkpoint's parameters shaped like this configuration's model
	 * and the same corpus (its data lock); how they were trained does not matter, so the
	 * optimizer and world keys may differ */
	if ((rc = train_ckpt_load(a, ev->checkpoint, &c, TRAIN_CHECK_DATA | TRAIN_CHECK_SHAPE, &ck,
				  e))) {
		corpus_free(&c);
		return rc;
	}
	ev->step = ck.step;
	if ((rc = train_open(a, &r, &c, &ck, e)))
		goto out;
	ev->const_id = train_const_guess(&r.corpus, SPLIT_TRAIN, SPLIT_TEST, &unused);
	if (ev->const_id < 0)
		rc = ERR(e, ERR_DEVICE, "out of memory");
	if (!rc)
		rc = eval_split(r.eng, &r.corpus, SPLIT_TEST, ev->const_id, &ev->test, e);
	if (!rc)
		rc = eval_split(r.eng, &r.corpus, SPLIT_VALIDATION, ev->const_id, &ev->validation, e);
	run_close(&r);
out:
	train_ckpt_free(&ck);
	return rc;
}
