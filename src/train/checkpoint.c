/*
 * checkpoint: the content of a training checkpoint, written and read back (the format is
 * described in checkpoint.h): checkpoint_write, checkpoint_load, checkpoint_free. The
 * atomic file store underneath, which knows no content, is runtime/ckpt.h (ckpt_*).
 */
#include "checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_tensors.h"
#include "ckpt.h"
#include "coll.h"
#include "corpus.h"
#include "corpus_files.h"
#include "elastic.h"
#include "finite.h"
#include "npy.h"
#include "optim.h"
#include "sources.h"
#include "world.h"

/* jansson value -> canonical text with a final newline; consumes j */
static int json_text(json_t *j, char **out, size_t *len, const char *what, struct err *e)
{
	int rc = env_json_text(j, 1, out, len, what, e);
	json_decref(j);
	return rc;
}

/* ---- reading a checkpoint ----------------------------------------------------------- */

void checkpoint_free(struct checkpoint *ck)
{
	if (!ck)
		return;
	free(ck->params);
	checkpoint_tensors_free(ck->tensors);
	ck->params = NULL;
	ck->tensors = NULL;
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

static int parse_state(const char *dir, json_t *st, struct checkpoint *ck, struct err *e)
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
	if (ck->step > TRAIN_MAX_STEP)
		return ERR(e, ERR_DATA, "checkpoint %s: state.json: step %" PRId64 " is past any "
			   "run's end (train.updates <= %d)", dir, ck->step, TRAIN_MAX_STEP);
	if (world > MAX_WORLD)
		return ERR(e, ERR_DATA, "checkpoint %s: state.json: %" PRId64 " ranks (at most %d)",
			   dir, world, MAX_WORLD);
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
	if (train_changes_parse(json_object_get(st, "changes"), ck->step, &ck->changes))
		return ERR(e, ERR_DATA, "checkpoint %s: state.json: \"changes\" is not a list of "
			   "at most %d changes (step, key, from, to) up to step %" PRId64, dir,
			   TRAIN_MAX_CHANGES, ck->step);
	return elastic_state_parse(dir, st, ck->step, &ck->elastic, e);
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

int checkpoint_stored_int(const char *dir, const char *section, const char *name,
			  long long *out, struct err *e)
{
	struct cfg stored = {0};
	int rc = load_config(dir, &stored, e);
	if (rc == ERR_OK)
		*out = cfg_int(&stored, section, name);
	if (stored.vals)
		cfg_free(&stored);
	return rc;
}

/* The optimizer's keys (KEY_OPTIM) whose value in the current configuration `cur` differs
 * from the stored one, as changes from the stored value to the current one. */
static int optim_changes(const char *dir, const struct cfg *cur, const struct cfg *stored,
			 struct train_changes *out, struct err *e)
{
	memset(out, 0, sizeof *out);
	for (int i = 0; i < cur->n; i++) {
		const struct cfg_key *k = &cur->keys[i];
		char key[64];
		if (!(k->flags & KEY_OPTIM))
			continue;
		for (int j = 0; j < stored->n; j++) {
			if (strcmp(stored->keys[j].section, k->section) ||
			    strcmp(stored->keys[j].name, k->name) ||
			    !strcmp(stored->vals[j].text, cur->vals[i].text))
				continue;
			snprintf(key, sizeof key, "%s.%s", k->section, k->name);
			if (train_changes_add(out, 0, key, stored->vals[j].text, cur->vals[i].text))
				return ERR(e, ERR_DATA, "checkpoint %s: too many changed settings", dir);
		}
	}
	return ERR_OK;
}

/* train.updates is no optimizer key (a resume may lengthen a run), but under a cosine or
 * linear schedule it is the schedule's horizon: a resume that changes it continues from its
 * update on the new horizon (docs/optimizers.md), a change of the optimizer's rates that the
 * run's history records. */
static int horizon_change(const char *dir, const struct cfg *cur, const struct cfg *stored,
			  struct train_changes *out, struct err *e)
{
	long long now = cfg_int(cur, "train", "updates"), then = cfg_int(stored, "train", "updates");
	int decays = cfg_enum(cur, "train", "schedule") != SCHEDULE_CONSTANT ||
		     cfg_enum(stored, "train", "schedule") != SCHEDULE_CONSTANT;
	char from[32], to[32];
	if (now == then || !decays)
		return ERR_OK;
	snprintf(from, sizeof from, "%lld", then);
	snprintf(to, sizeof to, "%lld", now);
	if (train_changes_add(out, 0, "train.updates", from, to))
		return ERR(e, ERR_DATA, "checkpoint %s: too many changed settings", dir);
	return ERR_OK;
}

/* The rate the checkpoint's own settings give its next update (NaN when its config.ini
 * does not make settings): what a change of the schedule's keys is printed against. */
static double stored_next_lr(const struct cfg *stored, int64_t updates_done)
{
	struct settings st;
	struct err ignore;
	if (settings_from_cfg(stored, &st, &ignore) != ERR_OK)
		return NAN;
	struct lr_plan plan = {st.schedule, st.lr, st.lr_min, st.warmup, st.updates};
	return optim_lr(&plan, updates_done + 1);
}

/* 2. The configuration the checkpoint was trained with (`stored`) against the current
 * one `cur`: with CHECKPOINT_CHECK_CONFIG every math key must match, except those the key
 * table marks as allowed to differ here: KEY_MODE with CHECKPOINT_CHECK_ANY_NORMALIZATION,
 * KEY_ELASTIC between checkpoints of exact mode with the same shards. */
static int check_config(const char *dir, const struct cfg *cur, const struct cfg *stored,
			unsigned checks, struct checkpoint *ck, struct err *e)
{
	char diff[900];
	unsigned may_differ = 0;
	if (!(checks & CHECKPOINT_CHECK_CONFIG))
		return ERR_OK;
	if (checks & CHECKPOINT_CHECK_ANY_NORMALIZATION)
		may_differ |= KEY_MODE;
	if (checks & CHECKPOINT_CHECK_OPTIM_MAY_CHANGE) {
		may_differ |= KEY_OPTIM;
		ERR_TRY(optim_changes(dir, cur, stored, &ck->changed, e));
		ERR_TRY(horizon_change(dir, cur, stored, &ck->changed, e));
	}
	if (elastic_resizable(cur, stored))
		may_differ |= KEY_ELASTIC;
	int nd = cfg_diff(cur, stored, CFG_MATH, may_differ, diff, sizeof diff);
	if (nd > 0)
		return ERR(e, ERR_DATA, "checkpoint %s was trained with another configuration: %d "
			   "key%s that change%s the math differ%s (current != checkpoint): %s", dir,
			   nd, nd == 1 ? "" : "s", nd == 1 ? "s" : "", nd == 1 ? "s" : "", diff);
	return ERR_OK;
}

/* 3. The data it was trained on: its data lock, against corpus c's with CHECKPOINT_CHECK_DATA
 * (the corpus lives in `outputs`). */
static int check_data_lock(const char *dir, const struct corpus *c, const char *outputs,
			   unsigned checks, struct checkpoint *ck, struct err *e)
{
	json_t *j = NULL;
	int rc = read_json(dir, "data.lock", &j, e);
	if (rc)
		return rc;
	const char *lk = json_string_value(json_object_get(j, "lock"));
	if (!lk || !digest_is_hex(lk))
		rc = ERR(e, ERR_DATA, "checkpoint %s: data.lock holds no valid \"lock\"", dir);
	else
		memcpy(ck->lock, lk, 65);
	json_decref(j);
	if (rc == ERR_OK && (checks & CHECKPOINT_CHECK_DATA) && strcmp(ck->lock, c->lock) != 0)
		rc = ERR(e, ERR_DATA, "data lock mismatch: checkpoint %s was trained on data lock "
			 "%.16s..., the corpus in %s/corpus has %.16s... (the data changed since)", dir,
			 ck->lock, outputs, c->lock);
	return rc;
}

/* 4a. state.json, which must name the step of the store's manifest. */
static int read_state(const char *dir, uint64_t manifest_step, struct checkpoint *ck,
		      struct err *e)
{
	json_t *j = NULL;
	int rc = read_json(dir, "state.json", &j, e);
	if (rc == ERR_OK)
		rc = parse_state(dir, j, ck, e);
	json_decref(j);
	if (rc == ERR_OK && (uint64_t)ck->step != manifest_step)
		rc = ERR(e, ERR_DATA, "checkpoint %s: state.json says step %" PRId64 ", its manifest "
			 "step %" PRIu64, dir, ck->step, manifest_step);
	return rc;
}

/* The vocabulary of the model a stored configuration describes: the synthetic source's,
 * or model.vocab's with the reserved ids; 0 when a file source took it from its files. */
static int stored_vocab(const struct cfg *stored)
{
	int model_vocab = (int)cfg_int(stored, "model", "vocab");
	if (cfg_enum(stored, "data", "source") == DATA_SYNTHETIC)
		return (int)cfg_int(stored, "data", "vocab");
	return model_vocab ? model_vocab + DATA_RESERVED : 0;
}

/* The shape of the model the stored configuration describes, with `vocab` ids. */
static int stored_shape(const char *dir, const struct cfg *stored, int vocab,
			struct model_shape *m, struct err *e)
{
	struct settings st;
	struct err sub;
	err_clear(&sub);
	int rc = settings_from_cfg(stored, &st, &sub);
	st.vocab = vocab;
	if (rc == ERR_OK)
		rc = model_shape_init(m, &st, &sub);
	if (rc != ERR_OK)
		return ERR(e, ERR_DATA, "checkpoint %s: its config.ini describes no model this "
			   "program knows: %s", dir, sub.msg);
	return ERR_OK;
}

/* 4b. The checkpoint must agree with its own config.ini (its keys as written, not the
 * relations this program checks between them), whatever the current configuration:
 * nothing could load one that does not (its updates_done: 6. below). The model its
 * config.ini describes holds ck->n parameters, with its vocabulary (stored_vocab); a
 * file source that leaves model.vocab = 0 took its vocabulary from its files: then the
 * vocabulary that makes the count is the model's (a model's parameters grow by the same
 * number with each id). The vocabulary goes to ck->vocab, the shape to m. */
static int check_own_shape(const char *dir, const struct cfg *stored, struct checkpoint *ck,
			   struct model_shape *m, struct err *e)
{
	struct model_shape none, one;
	char text[300];
	int vocab = stored_vocab(stored);
	if (vocab) {
		ERR_TRY(stored_shape(dir, stored, vocab, m, e));
		ck->vocab = vocab;
		if (m->n_params == ck->n)
			return ERR_OK;
		model_shape_text(m, text, sizeof text);
		return ERR(e, ERR_DATA, "checkpoint %s: its config.ini describes a model of %zu "
			   "parameters, %s, it holds %zu", dir, m->n_params, text, ck->n);
	}
	ERR_TRY(stored_shape(dir, stored, 0, &none, e));
	ERR_TRY(stored_shape(dir, stored, 1, &one, e));
	size_t per_id = one.n_params - none.n_params;
	if (ck->n > none.n_params && per_id > 0 && (ck->n - none.n_params) % per_id == 0) {
		ck->vocab = (int)((ck->n - none.n_params) / per_id);
		ERR_TRY(stored_shape(dir, stored, ck->vocab, m, e));
		/* a model whose count is not linear in the vocabulary (the bigram's V x V
		 * table) gives another count: its tensors would be read past their end */
		if (m->n_params == ck->n)
			return ERR_OK;
	}
	model_shape_text(&none, text, sizeof text);
	return ERR(e, ERR_DATA, "checkpoint %s: no vocabulary makes a model %s (its config.ini) "
		   "hold its %zu parameters (set model.vocab)", dir, text, ck->n);
}

/* 4c. The parameters are read into (and interpreted as) the current configuration's
 * model: its shape keys must be the stored ones, the model's tensors the same (the
 * vocabulary of a file source comes from its files) and the parameter count the
 * checkpoint's; with CHECKPOINT_CHECK_CONFIG the rank count too. */
static int check_shape(const char *dir, const struct cfg *cur, const struct settings *s,
		       const struct corpus *c, const struct cfg *stored, unsigned checks,
		       const struct checkpoint *ck, struct err *e)
{
	char diff[600], text[300];
	struct model_shape shape, theirs;
	if (checks & (CHECKPOINT_CHECK_SHAPE | CHECKPOINT_CHECK_CONFIG)) {
		if (cfg_diff(cur, stored, KEY_SHAPE, 0, diff, sizeof diff) > 0)
			return ERR(e, ERR_DATA, "checkpoint %s holds a model of another shape "
				   "(this configuration != checkpoint): %s", dir, diff);
		/* the current model's vocabulary: a file source's comes from its corpus */
		struct settings sv = *s;
		sv.vocab = corpus_model_vocab(s, c);
		int vocab = stored_vocab(stored);
		ERR_TRY(model_shape_init(&shape, &sv, e));
		ERR_TRY(stored_shape(dir, stored, vocab ? vocab : sv.vocab, &theirs, e));
		if (!model_shape_same(&shape, &theirs, diff, sizeof diff))
			return ERR(e, ERR_DATA, "checkpoint %s holds a model of another shape "
				   "(this configuration != checkpoint): %s", dir, diff);
		model_shape_text(&shape, text, sizeof text);
		if (ck->n != shape.n_params)
			return ERR(e, ERR_DATA, "checkpoint %s: %zu parameters, the model of this "
				   "configuration, %s, has %zu", dir, ck->n, text, shape.n_params);
	}
	if ((checks & CHECKPOINT_CHECK_CONFIG) && !elastic_world_ok(ck->world, ck->elastic.shards, s))
		return ERR(e, ERR_DATA, "checkpoint %s holds %d ranks, this configuration has "
			   "devices.world = %d", dir, ck->world, s->world);
	return ERR_OK;
}

/* 2b. The optimizer whose state it holds (train.optimizer of its config.ini, sgd for a
 * checkpoint older than the key) must be this run's: SGD's momentum is not AdamW's
 * moments, and the other way round, so a change is refused rather than started afresh. */
static int check_optimizer(const char *dir, const struct settings *s, const struct cfg *stored,
			   unsigned checks, struct checkpoint *ck, struct err *e)
{
	ck->optimizer = (int)cfg_enum(stored, "train", "optimizer");
	if (!(checks & CHECKPOINT_CHECK_CONFIG) || ck->optimizer == s->optimizer)
		return ERR_OK;
	return ERR(e, ERR_DATA, "checkpoint %s holds the state of train.optimizer = %s (%s), this "
		   "run uses %s: one optimizer cannot continue from the other's state (resume with "
		   "train.optimizer = %s, or start afresh)", dir, optim_kind_name(ck->optimizer),
		   ck->optimizer == OPTIM_ADAMW ? "its two moments" : "its momentum",
		   optim_kind_name(s->optimizer), optim_kind_name(ck->optimizer));
}

/* 5. One rank part, rank-R.json: its rank and a history that fits the steps. */
static int read_rank_part(const char *dir, int r, struct checkpoint *ck, struct err *e)
{
	char name[32];
	int64_t rank;
	json_t *j = NULL;
	struct train_history *rh = &ck->hist[r];
	int rc;
	snprintf(name, sizeof name, "rank-%d.json", r);
	if ((rc = read_json(dir, name, &j, e)))
		return rc;
	if (get_int(j, "rank", 0, &rank) || rank != r ||
	    train_history_parse(json_object_get(j, "history"), rh))
		rc = ERR(e, ERR_DATA, "checkpoint %s: %s lacks a valid rank or history", dir, name);
	else if (!train_history_fits(rh, ck->step))
		rc = ERR(e, ERR_DATA, "checkpoint %s: %s: a history of %" PRId64 " windows, %" PRId64
			 " sequences, %" PRId64 " tokens does not fit %" PRId64 " steps", dir, name,
			 rh->windows, rh->sequences, rh->tokens, ck->step);
	json_decref(j);
	return rc;
}

/* 6. updates_done decides whether the next update starts its momentum afresh, so it must
 * be what the history says: every step is an update except the windows declined for want
 * of a token, which every rank (and in exact mode every shard) counts alike; under
 * train.empty_window = error (the checkpoint's own config.ini) no window is declined. */
static int check_updates(const char *dir, const struct cfg *stored, const struct checkpoint *ck,
			 struct err *e)
{
	int64_t declined = ck->hist[0].declined;
	for (int r = 1; r < ck->world; r++)
		if (ck->hist[r].declined != declined)
			return ERR(e, ERR_DATA, "checkpoint %s: rank-%d.json's history declares %" PRId64
				   " declined windows, rank-0.json's %" PRId64 " (every rank declines "
				   "a window together)", dir, r, ck->hist[r].declined, declined);
	for (int s = 0; s < ck->elastic.shards; s++)
		if (ck->elastic.shard_hist[s].declined != declined)
			return ERR(e, ERR_DATA, "checkpoint %s: state.json: the history of shard %d "
				   "declares %" PRId64 " declined windows, rank-0.json's %" PRId64, dir,
				   s, ck->elastic.shard_hist[s].declined, declined);
	if (declined > 0 && cfg_enum(stored, "train", "empty_window") == EMPTY_ERROR)
		return ERR(e, ERR_DATA, "checkpoint %s: rank-0.json's history declares %" PRId64
			   " declined windows, but with train.empty_window = error (its config.ini) "
			   "no window is declined", dir, declined);
	ERR_TRY(elastic_check_rank_totals(dir, &ck->elastic, ck->hist, ck->world, ck->step, e));
	if (ck->updates_done != ck->step - declined)
		return ERR(e, ERR_DATA, "checkpoint %s: state.json: updates_done = %" PRId64 ", but "
			   "step %" PRId64 " minus the %" PRId64 " declined windows of rank-0.json's "
			   "history makes %" PRId64, dir, ck->updates_done, ck->step, declined,
			   ck->step - declined);
	return ERR_OK;
}

int checkpoint_check_model(const struct env *v, const char *dir, struct err *e)
{
	struct cfg stored = {0};
	char diff[600];
	int rc = load_config(dir, &stored, e);
	if (rc == ERR_OK) {
		const char *kind = cfg_str(&stored, "model", "kind");
		if (strcmp(kind, v->s->model_kind) != 0)
			rc = ERR(e, ERR_DATA, "checkpoint %s holds a model of kind %s (model.kind of "
				 "its config.ini), this configuration's model.kind is %s: use it with "
				 "the configuration it was trained with", dir, kind, v->s->model_kind);
		else if (cfg_diff(v->cfg, &stored, KEY_SHAPE, 0, diff, sizeof diff) > 0)
			rc = ERR(e, ERR_DATA, "checkpoint %s holds a model of another shape (this "
				 "configuration != checkpoint): %s", dir, diff);
	}
	if (stored.vals)
		cfg_free(&stored);
	return rc;
}

int checkpoint_load_model(const struct env *v, const char *dir, struct checkpoint *ck,
			  struct settings *s, struct err *e)
{
	struct cfg stored = {0};
	struct err sub;
	err_clear(&sub);
	int rc = checkpoint_load(v, dir, NULL, 0, ck, e);
	/* these commands compute with the parameters on the host */
	if (rc == ERR_OK && !(ck->params = malloc(ck->n * sizeof(float))))
		rc = ERR(e, ERR_NOMEM, "out of memory for the parameters of %s (%zu floats)", dir,
			 ck->n);
	if (rc == ERR_OK)
		rc = checkpoint_read_vector(ck, ENGINE_VEC_PARAMS, ck->params, e);
	if (rc == ERR_OK && (rc = load_config(dir, &stored, e)) == ERR_OK &&
	    settings_from_cfg(&stored, s, &sub) != ERR_OK)
		rc = ERR(e, ERR_DATA, "checkpoint %s: its config.ini describes no model this "
			 "program knows: %s", dir, sub.msg);
	s->vocab = ck->vocab;
	if (stored.vals)
		cfg_free(&stored);
	if (rc)
		checkpoint_free(ck);
	return rc;
}

int checkpoint_load(const struct env *v, const char *dir, const struct corpus *c,
		    unsigned checks, struct checkpoint *ck, struct err *e)
{
	struct ckpt_report rep;
	struct cfg stored = {0};
	struct model_shape own; /* the model its config.ini describes */
	int rc;

	memset(ck, 0, sizeof *ck);
	snprintf(ck->dir, sizeof ck->dir, "%s", dir);
	/* 1. the store: manifest, every file's size and digest; the tensors' content is
	 * scanned as it is digested, and judged in 7. */
	struct ckpt_scan scan;
	if ((rc = checkpoint_tensors_scan(&ck->tensors, &scan, e)))
		goto out;
	rc = ckpt_verify_scan(dir, &rep, &scan, e);
	uint64_t manifest_step = rep.step;
	ckpt_report_free(&rep);
	if (rc)
		goto out;
	/* 2. the configuration, 3. the data, 4. the state, 5. the rank parts, 6. the updates,
	 * then the tensors: the small files first, so that a checkpoint they refuse is refused
	 * for what they say before its parameters' and momentum's scan is judged */
	if ((rc = load_config(dir, &stored, e)) ||
	    (rc = check_optimizer(dir, v->s, &stored, checks, ck, e)) ||
	    (rc = check_config(dir, v->cfg, &stored, checks, ck, e)) ||
	    (rc = check_data_lock(dir, c, v->s->outputs, checks, ck, e)) ||
	    (rc = read_state(dir, manifest_step, ck, e)) ||
	    (rc = check_own_shape(dir, &stored, ck, &own, e)) ||
	    (rc = check_shape(dir, v->cfg, v->s, c, &stored, checks, ck, e)))
		goto out;
	for (int r = 0; r < ck->world && rc == ERR_OK; r++)
		rc = read_rank_part(dir, r, ck, e);
	if (rc == ERR_OK)
		rc = check_updates(dir, &stored, ck, e);
	ck->stored_next_lr = stored_next_lr(&stored, ck->updates_done);
	/* 7. params.npy and the optimizer's state files, what step 1 found in them */
	if (rc == ERR_OK)
		rc = checkpoint_tensors_check(ck->tensors, dir, ck->optimizer, &own, ck->n, e);
	for (int i = 0; i < ck->changed.n; i++)
		ck->changed.v[i].step = ck->step;
out:
	if (stored.vals)
		cfg_free(&stored);
	if (rc)
		checkpoint_free(ck);
	return rc;
}

static int chunk_to_host(void *arg, size_t lo, size_t len, const float *x, struct err *e)
{
	(void)e;
	memcpy((float *)arg + lo, x, len * sizeof(float));
	return ERR_OK;
}

int checkpoint_read_vector(const struct checkpoint *ck, int vec, float *host, struct err *e)
{
	return checkpoint_tensors_stream(ck->tensors, ck->dir,
					 checkpoint_vector_file(ck->optimizer, vec), chunk_to_host,
					 host, e);
}

/* Where a chunk of a vector goes: the engine's ranks. */
struct to_engine {
	struct engine *eng;
	int vec;
};

static int chunk_to_engine(void *arg, size_t lo, size_t len, const float *x, struct err *e)
{
	const struct to_engine *to = arg;
	return engine_set_range(to->eng, to->vec, lo, len, x, e);
}

/* The parameters, and with_state the optimizer's state, into the ranks of eng a chunk at
 * a time (without it the fresh engine's state stays zero), and the updates done. */
static int state_to_engine(const struct checkpoint *ck, struct engine *eng, int with_state,
			   struct err *e)
{
	int vectors = with_state ? optim_state_vectors(ck->optimizer) : 0;
	for (int k = ENGINE_VEC_PARAMS; k < vectors; k++) {
		struct to_engine to = {eng, k};
		ERR_TRY(checkpoint_tensors_stream(ck->tensors, ck->dir,
						  checkpoint_vector_file(ck->optimizer, k),
						  chunk_to_engine, &to, e));
	}
	engine_set_updates(eng, ck->updates_done);
	return ERR_OK;
}

int checkpoint_open_run(const struct env *v, const struct checkpoint *ck, struct run *r,
			struct corpus *c, struct err *e)
{
	/* the checkpoint's parameters replace the initial ones: model.init's file, which
	 * may be gone since, is not read */
	struct settings no_init = *v->s;
	struct env v_no_init = *v;
	no_init.model_init[0] = '\0';
	v_no_init.s = &no_init;
	int rc = run_open_corpus(&v_no_init, r, c, e);
	if (rc)
		return rc;
	/* another optimizer's state passes only unchecked (CHECKPOINT_CHECK_CONFIG refuses
	 * it), where nothing trains on: the engine's then stays at zero. A failure (the
	 * files changed since they were verified) closes the engine that took a part. */
	if ((rc = state_to_engine(ck, r->eng, ck->optimizer == v->s->optimizer, e))) {
		run_close(r);
		return rc;
	}
	sampler_set_state(&r->sampler, &ck->sampler);
	return ERR_OK;
}

/* ---- writing a checkpoint ----------------------------------------------------------- */

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

/* The resolved configuration, with [train] normalization set to the one the trainer's
 * windows were trained with (an interactive session may have switched modes) and, in exact
 * mode, [train] accumulation to the one it derived: config.ini and state.json of a
 * checkpoint then always agree, and a resume needs no extra --set. */
static int add_config(struct ckpt_writer *w, const struct cfg *c, int mode,
		      const struct settings *s, struct err *e)
{
	struct cfg copy = {0};
	char *buf = NULL, assign[2][96];
	size_t len = 0;
	int rc, n = 0;

	if (mode != cfg_enum(c, "train", "normalization"))
		snprintf(assign[n++], sizeof assign[0], "train.normalization=%s",
			 norm_mode_name(mode));
	/* exact mode derives the accumulation (shards / world) when it is not given: the
	 * checkpoint says what ran */
	if (s->shards > 0 && cfg_int(c, "train", "accumulation") != s->accumulation)
		snprintf(assign[n++], sizeof assign[0], "train.accumulation=%d", s->accumulation);
	if (n > 0) {
		if ((rc = cfg_init(&copy, c->keys, e)) != ERR_OK)
			return rc;
		for (int i = 0; i < c->n; i++)
			copy.vals[i] = c->vals[i];
		for (int k = 0; k < n; k++)
			ERR_TRY_GOTO(rc, cfg_set(&copy, assign[k], e), out);
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

/* state.json: step, optimizer and sampler state, and what the run was made of. */
static json_t *state_json(const struct checkpoint_source *t)
{
	const struct env *v = t->v;
	const struct engine *eng = t->r->eng;
	struct sampler_state ss;
	sampler_get_state(&t->r->sampler, &ss);
	json_t *rng = json_array();
	for (int i = 0; i < 4; i++) {
		char hex[17];
		snprintf(hex, sizeof hex, "%016" PRIx64, ss.rng[i]);
		json_array_append_new(rng, json_string(hex));
	}
	char machine[512];
	elastic_machine(eng, machine, sizeof machine);
	json_t *exact = elastic_state_json(t->v->s, t->shard_hist);
	json_t *changes = t->changes ? train_changes_json(t->changes) : NULL;
	return json_pack(
		"{s:s, s:I, s:I, s:{s:o, s:I}, s:s, s:s, s:s, s:s*, s:s, s:i, s:i, s:i, s:I, s:o, s:o, "
		"s:o*, s:o*}",
		"format", TRAIN_STATE_FORMAT, "step", (json_int_t)t->step, "updates_done",
		(json_int_t)eng->updates_done, "sampler", "rng", rng, "window_index",
		(json_int_t)ss.window_index, "normalization", norm_mode_name(t->run_mode), "backend",
		engine_backend_name(eng), "machine", machine, "gemm", elastic_gemm(eng), "reduce", coll_op_name(v->s->reduce), "world", eng->world,
		"accumulation", v->s->accumulation, "batch_size", v->s->batch_size, "n_params",
		(json_int_t)eng->shape.n_params, "layout", run_layout_json(&eng->shape), "last_loss",
		t->step > 0 && isfinite(t->last_loss) ? json_real(t->last_loss) : json_null(),
		"exact", exact, "changes", changes);
}

/* data.lock: the corpus the run was trained on. */
static json_t *lock_json(const struct corpus *c)
{
	return json_pack("{s:s, s:i, s:{s:i, s:i, s:i}}", "lock", c->lock, "corpus_format",
			 CORPUS_FORMAT, "sequences", "train", c->split_count[SPLIT_TRAIN],
			 "validation", c->split_count[SPLIT_VALIDATION], "test",
			 c->split_count[SPLIT_TEST]);
}

/* rank-R.json: the rank's device and its history. */
static json_t *rank_json(const struct checkpoint_source *t, int r)
{
	const struct engine *eng = t->r->eng;
	char dev[32];
	snprintf(dev, sizeof dev, "%s:%d", engine_backend_name(eng),
		 eng->placement.backend == DEV_BACKEND_CUDA ? eng->placement.ids[r] : r);
	return json_pack("{s:i, s:s, s:s, s:n, s:s, s:o}", "rank", r, "device", dev, "backend",
			 engine_backend_name(eng), "rng", "rng_note", "none: the ranks draw no random "
			 "numbers (the sampler state in state.json is the run's only generator)",
			 "history", train_history_json(&t->hist[r]));
}

/* Floats of a vector fetched from the ranks and scanned or written at a time: the host
 * never holds a whole copy of the parameters or of the optimizer's state. */
#define CHECKPOINT_CHUNK ENGINE_STATE_CHUNK

/* What is done with the chunks of the state's vectors: the gate's scan (w NULL), or the
 * writing of each vector as an npy file into w. */
struct vector_pass {
	const struct checkpoint_source *t;
	struct ckpt_writer *w;
	int fetch_only;           /* a process that does not write: it only takes part */
	struct ckpt_file_writer file;
	int open;                 /* file is being written */
	struct finite_report bad; /* the gate: NaN and infinity seen, the first's index */
	float first_bad;          /* the value at bad.first */
};

/* Vector `name` of n floats begins: the gate's count at zero, or its file with the npy
 * header. */
static int pass_begin(struct vector_pass *p, const char *name, size_t n, struct err *e)
{
	char hdr[256];
	size_t hlen, nbytes, shape[1] = {n};
	memset(&p->bad, 0, sizeof p->bad);
	if (!p->w)
		return ERR_OK;
	ERR_TRY(npy_header(NPY_F32, shape, 1, name, hdr, sizeof hdr, &hlen, &nbytes, e));
	ERR_TRY(ckpt_file_begin(p->w, name, &p->file, e));
	int rc = ckpt_file_write(&p->file, hdr, hlen, e);
	p->open = rc == ERR_OK; /* a failed write has released the file */
	return rc;
}

/* Floats x[0, len), at lo in the vector: scanned, or written. */
static int pass_chunk(struct vector_pass *p, const float *x, size_t lo, size_t len,
		      struct err *e)
{
	struct finite_report rep;
	if (p->w) {
		int rc = ckpt_file_write(&p->file, x, len * sizeof(float), e);
		p->open = rc == ERR_OK;
		return rc;
	}
	finite_scan(x, len, &rep);
	if (rep.bad > 0 && p->bad.bad == 0) {
		p->bad.first = lo + rep.first;
		p->first_bad = x[rep.first];
	}
	p->bad.bad += rep.bad;
	return ERR_OK;
}

/* The publication gate: a checkpoint is what a run resumes from and what runs/latest
 * points to, so parameters or optimizer state holding NaN or infinity (a diverged run)
 * are never written; the caller's newest checkpoint stays the newest. The replicas are
 * equal (checked before every checkpoint), so the rank where the values went bad is not
 * known here; the loss and gradient norm checked at every window (trainer_step) usually
 * stop the run first. Writing: the file is complete. */
static int pass_end(struct vector_pass *p, const char *name, struct err *e)
{
	const struct engine *eng = p->t->r->eng;
	char what[300];
	if (p->w) {
		p->open = 0;
		return ckpt_file_end(&p->file, e);
	}
	if (p->bad.bad == 0)
		return ERR_OK;
	model_nonfinite_text(&eng->shape, &p->bad, p->first_bad, what, sizeof what);
	return ERR(e, ERR_NONFINITE, "non-finite state after window %" PRId64 " (update %"
		   PRId64 "): %s would hold %s; no checkpoint of step %" PRId64 " is written",
		   p->t->step, eng->updates_done, name, what, p->t->step);
}

/* Vector vec of the engine's state (engine_get_range) fetched chunk by chunk through buf
 * (CHECKPOINT_CHUNK floats) and passed to p while rc, the pass's result so far, is
 * ERR_OK. Every chunk is fetched whatever rc is: the sharded state's chunks are gathered
 * from every process, which all fetch the same ones. */
static int pass_vector(struct vector_pass *p, int vec, const char *name, float *buf, int rc,
		       struct err *e)
{
	struct engine *eng = p->t->r->eng;
	size_t n = eng->shape.n_params;
	struct err later;
	if (rc == ERR_OK && !p->fetch_only)
		rc = pass_begin(p, name, n, e);
	for (size_t lo = 0; lo < n; lo += CHECKPOINT_CHUNK) {
		size_t len = n - lo < CHECKPOINT_CHUNK ? n - lo : CHECKPOINT_CHUNK;
		int got = engine_get_range(eng, vec, lo, len, buf, rc == ERR_OK ? e : &later);
		if (got != ERR_OK) { /* the engine failed: every process fails with it */
			rc = rc == ERR_OK ? got : rc;
			break;
		}
		if (rc == ERR_OK && !p->fetch_only)
			rc = pass_chunk(p, buf, lo, len, e);
	}
	if (rc == ERR_OK)
		return p->fetch_only ? ERR_OK : pass_end(p, name, e);
	if (p->open)
		ckpt_file_abort(&p->file);
	p->open = 0;
	return rc;
}

/* The state's vectors, params.npy then the optimizer's, through p. */
static int pass_vectors(struct vector_pass *p, float *buf, int rc, struct err *e)
{
	int optimizer = p->t->r->eng->s.optimizer;
	for (int k = ENGINE_VEC_PARAMS; k < optim_state_vectors(optimizer); k++)
		rc = pass_vector(p, k, checkpoint_vector_file(optimizer, k), buf, rc, e);
	return rc;
}

/* The other files of the checkpoint, into the open writer w. */
static int add_files(struct ckpt_writer *w, const struct checkpoint_source *t, struct err *e)
{
	const struct engine *eng = t->r->eng;
	ERR_TRY(add_config(w, t->v->cfg, t->run_mode, t->v->s, e));
	ERR_TRY(add_json(w, "data.lock", lock_json(&t->r->corpus), e));
	ERR_TRY(add_json(w, "state.json", state_json(t), e));
	for (int r = 0; r < eng->world; r++) {
		char name[32];
		snprintf(name, sizeof name, "rank-%d.json", r);
		ERR_TRY(add_json(w, name, rank_json(t, r), e));
	}
	return ERR_OK;
}

/* The gate's pass over the state, then its files'; process 0 writes, the others take
 * part in both passes' gathers. */
int checkpoint_write(const struct checkpoint_source *t, const char *root, char *out,
		     size_t cap, struct err *e)
{
	const struct env *v = t->v;
	struct ckpt_writer *w = NULL;
	struct ckpt_commit_info ci;
	int fetch_only = world_get()->proc != 0;
	float *buf = malloc(CHECKPOINT_CHUNK * sizeof(float));
	if (!buf)
		return ERR(e, ERR_NOMEM, "out of memory for a checkpoint's buffer (%zu floats)",
			   (size_t)CHECKPOINT_CHUNK);
	struct vector_pass gate = {.t = t, .fetch_only = fetch_only};
	int rc = pass_vectors(&gate, buf, ERR_OK, e);
	/* nothing is written before the gate passed every value */
	if (rc == ERR_OK && !fetch_only)
		rc = ckpt_begin(root, (uint64_t)t->step, &w, e);
	struct vector_pass write = {.t = t, .w = w, .fetch_only = fetch_only};
	rc = pass_vectors(&write, buf, rc, e);
	free(buf);
	if (rc == ERR_OK && w)
		rc = add_files(w, t, e);
	if (rc != ERR_OK || !w) {
		if (w)
			ckpt_abort(w);
		return rc;
	}
	ERR_TRY(ckpt_commit_ex(w, &ci, e));
	if (out && cap)
		snprintf(out, cap, "%s", ci.path);
	if (ci.kept[0])
		env_info(v, "checkpoint: %s was in the way and is not only what the store wrote "
			 "(%s): kept as %s, not deleted", ci.path, ci.kept_why, ci.kept);
	if (ci.leftover[0])
		env_info(v, "checkpoint: the replaced copy %s could not be removed (clean --scope "
			 "partial removes it)", ci.leftover);
	env_debug(v, "%s: checkpoint %s", v->command, ci.path);
	return ERR_OK;
}
