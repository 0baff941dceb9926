/*
 * run: opening the shared state of a computing command, and the prepared corpus the
 * training commands open it on (see run.h).
 */
#include "run.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "class_weights.h"
#include "corpus_files.h"
#include "corpus_store.h"
#include "fsx.h"
#include "gpt_init.h"
#include "outputs.h"
#include "sources.h"

int run_open(const struct env *v, struct run *r, struct err *e)
{
	struct corpus c;
	int rc = corpus_build(v->s, &c, e);
	if (rc != ERR_OK) {
		memset(r, 0, sizeof *r);
		return rc;
	}
	return run_open_corpus(v, r, &c, e);
}

/* The length-band plan on file data, which the user chose: how much more often it draws
 * a sequence of the smallest band than one of the largest (the synthetic corpus's bands
 * are its design). */
static void tell_band_weights(const struct env *v, const struct sampler *sp)
{
	int lo = sp->pool_n[0], hi = sp->pool_n[0];
	for (int r = 1; r < sp->bands; r++) {
		lo = sp->pool_n[r] < lo ? sp->pool_n[r] : lo;
		hi = sp->pool_n[r] > hi ? sp->pool_n[r] : hi;
	}
	env_info(v, "sampler: train.plan = length_bands draws %d sequences per window from each "
		 "of %d length bands, which hold %d to %d training sequences: a sequence of the "
		 "smallest band is drawn %.2f times as often as one of the largest "
		 "(train.plan = balanced weighs every document the same)", sp->per_pool,
		 sp->bands, lo, hi, (double)hi / lo);
}

/* How the windows are drawn, when it is not the synthetic source's default: the plan and
 * the epochs, and whether the file-data default chose them. */
static void tell_sampling(const struct env *v, const struct sampler *sp)
{
	const struct settings *s = v->s;
	int chosen = v->cfg && (settings_file_default(v->cfg, "train", "plan") ||
				settings_file_default(v->cfg, "train", "sampling"));
	if (s->source != DATA_SYNTHETIC && sp->bands > 1)
		tell_band_weights(v, sp);
	if (s->sampling != SAMPLING_EPOCHS && !chosen)
		return;
	if (s->sampling == SAMPLING_EPOCHS)
		env_info(v, "sampler: train.plan = %s, train.sampling = epochs (%s): each of the %d "
			 "training sequences once per epoch, %d per window, in an order shuffled "
			 "by run.seed", rank_split_name(s->rank_split),
			 chosen ? SETTINGS_FILE_DEFAULT : "as configured", sp->epochs.n,
			 sp->epochs.need);
	else
		env_info(v, "sampler: train.plan = %s (%s), train.sampling = independent",
			 rank_split_name(s->rank_split), SETTINGS_FILE_DEFAULT);
}

/* The first parameters into every replica (the engine's optimizer state is zero, as
 * engine_keep_take gives it), made and uploaded a piece at a time: no copy of the model
 * on the host beside its ranks'. model.init = llmc:FILE replaces the seeded values it
 * has rows for, on the whole vector, which is then freed: run_init_params makes it
 * again for the commands that compare with it. */
static int upload_init_params(struct run *r, struct err *e)
{
	size_t n = r->eng->shape.n_params;
	if (r->eng->s.model_init[0]) {
		if (!run_init_params(r, e))
			return e->code;
		int rc = engine_set_state(r->eng, r->init_params, NULL, 0, e);
		free(r->init_params);
		r->init_params = NULL;
		return rc;
	}
	float *piece = malloc((n < ENGINE_STATE_CHUNK ? n : ENGINE_STATE_CHUNK) * sizeof(float));
	if (!piece)
		return ERR(e, ERR_NOMEM, "out of memory for the first parameters");
	struct model_init it;
	int rc = ERR_OK;
	model_init_begin(&it, &r->eng->shape, r->eng->s.seed);
	for (size_t lo = 0; lo < n && rc == ERR_OK; lo += ENGINE_STATE_CHUNK) {
		size_t len = n - lo < ENGINE_STATE_CHUNK ? n - lo : ENGINE_STATE_CHUNK;
		model_init_next(&it, piece, len);
		rc = engine_set_range(r->eng, ENGINE_VEC_PARAMS, lo, len, piece, e);
	}
	free(piece);
	return rc;
}

int run_open_corpus(const struct env *v, struct run *r, struct corpus *c, struct err *e)
{
	int rc;
	memset(r, 0, sizeof *r);
	r->corpus = *c; /* moved: the run owns (and frees) it from here on */
	memset(c, 0, sizeof *c);
	r->have_corpus = 1;
	/* train.class_weights: the table and the sequences' sums the windows add */
	ERR_TRY_GOTO(rc, class_weights_attach(v->s, &r->corpus, e), fail);
	if ((rc = sampler_init(&r->sampler, &r->corpus, v->s, e)) != ERR_OK) {
		if (rc == ERR_CONFIG) /* the keys come from this file (and --set) */
			err_prefix(e, "%s", v->cfg->path);
		goto fail;
	}
	r->have_sampler = 1;
	ERR_TRY_GOTO(rc, window_init(&r->w, v->s->world, v->s->accumulation, v->s->batch_size, e), fail);
	r->have_window = 1;
	r->keep = v->keep;
	/* the model is made for its corpus, whose files may be what gives the vocabulary */
	struct settings model_s = *v->s;
	model_s.vocab = corpus_model_vocab(v->s, &r->corpus);
	ERR_TRY_GOTO(rc, engine_keep_take(r->keep, &model_s, &r->corpus, &v->engine, &r->eng, e),
		     fail);
	ERR_TRY_GOTO(rc, upload_init_params(r, e), fail);
	if (r->init_converted)
		env_info(v, "model.init: %s holds %s weights: converted to float32", v->s->model_init,
			 r->init_converted);
	/* say once per process which backend runs; why (auto may fall back to the CPU) only
	 * at log_level = debug or when a backend or collective was asked for */
	static int told;
	if (!told && (v->s->log_level >= ENV_DEBUG || v->s->backend != BACKEND_AUTO ||
		      v->s->collective != COLLECTIVE_AUTO))
		env_info(v, "backend: %s; collective %s", r->eng->placement.why,
			 r->eng->placement.coll_why);
	else if (!told)
		env_info(v, "backend: %s", engine_backend_name(r->eng));
	if (!told)
		tell_sampling(v, &r->sampler);
	told = 1;
	return ERR_OK;
fail:
	run_close(r);
	return rc;
}

const float *run_init_params(struct run *r, struct err *e)
{
	if (r->init_params)
		return r->init_params;
	if (!(r->init_params = malloc(r->eng->shape.n_params * sizeof(float)))) {
		ERR(e, ERR_NOMEM, "out of memory for the first parameters (%zu floats)",
		    r->eng->shape.n_params);
		return NULL;
	}
	model_init_params(&r->eng->shape, r->eng->s.seed, r->init_params);
	/* model.init (llmc:FILE, hf:DIR) replaces the seeded values it has rows for */
	if (gpt_init_load(&r->eng->s, &r->eng->shape, r->init_params, &r->init_converted, e) !=
	    ERR_OK) {
		free(r->init_params);
		r->init_params = NULL;
	}
	return r->init_params;
}

void run_close(struct run *r)
{
	if (r->eng)
		engine_keep_give(r->keep, r->eng);
	r->eng = NULL;
	free(r->init_params);
	r->init_params = NULL;
	if (r->have_window)
		window_free(&r->w);
	if (r->have_sampler)
		sampler_free(&r->sampler);
	if (r->have_corpus)
		corpus_free(&r->corpus);
	r->have_window = r->have_sampler = r->have_corpus = 0;
}

void *run_layout_json(const struct model_shape *m)
{
	json_t *arr = json_array();
	for (int i = 0; i < m->n_tensors; i++) {
		const struct param_info *p = &m->p[i];
		json_t *shape = p->cols == 1 ? json_pack("[i]", p->rows)
					     : json_pack("[i,i]", p->rows, p->cols);
		json_array_append_new(arr, json_pack("{s:s, s:o, s:I, s:I}", "name", p->name, "shape",
						     shape, "offset", (json_int_t)p->offset, "count",
						     (json_int_t)p->count));
	}
	return arr;
}

/* Loads the prepared corpus of dir into c and says whether it is the one this run's
 * configuration describes (*usable): the same [data] settings and, for a file source,
 * the same files. One that is not is an error when it may not be replaced (rebuild == 0:
 * a checkpoint needs the corpus it was trained on), and otherwise freed and reported. */
static int check_prepared(const struct env *v, int rebuild, const char *dir, struct corpus *c,
			  int *usable, struct err *e)
{
	char diff[700];
	int rc;
	*usable = 0;
	if ((rc = corpus_load(dir, c, e))) {
		err_prefix(e, "prepared corpus %s (run `prepare` to rebuild it)", dir);
		return rc;
	}
	if (!corpus_params_match(&c->params, v->s)) {
		corpus_params_diff(&c->params, v->s, diff, sizeof diff);
		rc = ERR(e, ERR_DATA, "prepared corpus %s was built with other settings than "
			 "this run's: %s; run with the configuration it was built from (a "
			 "checkpoint needs the corpus it was trained on), or `prepare` again", dir,
			 diff);
	} else if ((rc = corpus_files_unchanged(v->s, c, e))) {
		err_prefix(e, "prepared corpus %s", dir);
	}
	if (rc == ERR_OK) {
		*usable = 1;
		return ERR_OK;
	}
	corpus_free(c);
	if (!rebuild)
		return rc;
	env_info(v, "%s: %s: rebuilding it", v->command, e->msg);
	err_clear(e);
	return ERR_OK;
}

/* data.lock describes the corpus.bin beside it; missing or saying anything else (a
 * rebuild cut between its two renames, an edit), it is written again from corpus.bin,
 * which checked itself against its own lock. A reader (CORPUS_READ) holds no writer lock
 * on the outputs, so it only says so. */
static int repair_lock_file(const struct env *v, enum corpus_use use, const char *dir,
			    const struct corpus *c, struct err *e)
{
	char why[200];
	int rc = corpus_lock_file_check(dir, c, why, sizeof why, e);
	if (rc || !why[0])
		return rc;
	if (use == CORPUS_READ) {
		env_info(v, "corpus: %s/%s: %s; %s is used (a writing command will write the "
			 "description again)", dir, OUTPUT_DATA_LOCK, why, OUTPUT_CORPUS_BIN);
		return ERR_OK;
	}
	env_info(v, "corpus: %s/%s: %s; written again from %s", dir, OUTPUT_DATA_LOCK, why,
		 OUTPUT_CORPUS_BIN);
	return corpus_save_lock(c, dir, e);
}

/* corpus.bin is missing: built from the configuration, and saved unless `use` reads only;
 * a checkpoint needs the corpus it was trained on: the synthetic one is drawn again the
 * same (its data lock is then compared with the checkpoint's), one made of the user's
 * files is not rebuilt from files that may have changed since */
static int build_missing(const struct env *v, enum corpus_use use, const char *dir,
			 const char *bin, struct corpus *c, struct err *e)
{
	int rc;
	if (use != CORPUS_TRAIN && v->s->source != DATA_SYNTHETIC)
		return ERR(e, ERR_DATA, "%s is missing: a resume or evaluate does not rebuild a "
			   "corpus of your own files (they may have changed since the checkpoint); "
			   "run `prepare` to build it from them", bin);
	if (use != CORPUS_TRAIN)
		env_info(v, "corpus: %s is missing: drawing the synthetic corpus again from [data] "
			 "and run.seed%s", bin, use == CORPUS_READ ? " (in memory only)" : "");
	if ((rc = corpus_build(v->s, c, e)) || use == CORPUS_READ)
		return rc;
	struct data_stats read = c->read; /* what the files held: not in corpus.bin */
	rc = corpus_save(c, v->s, dir, e);
	corpus_free(c);
	/* the saved corpus is read back mapped, as every later command reads it: the memory
	 * of the build goes, and the run's resident memory does not grow with the corpus */
	if (rc || (rc = corpus_load(dir, c, e)))
		return rc;
	c->read = read;
	env_info(v, "%s: corpus prepared in %s (data lock %.16s...)", v->command, dir,
		 c->lock);
	return ERR_OK;
}

int run_corpus(const struct env *v, enum corpus_use use, struct corpus *c, struct err *e)
{
	char dir[FSX_PATH_MAX], bin[FSX_PATH_MAX];
	int rc, usable = 0;
	memset(c, 0, sizeof *c);
	if ((rc = env_outputs_ready(v, e)) || (rc = fsx_join(dir, sizeof dir, v->s->outputs, output_name(OUT_CORPUS), e)) ||
	    (rc = fsx_join(bin, sizeof bin, dir, OUTPUT_CORPUS_BIN, e)))
		return rc;
	if (fsx_exists(bin) &&
	    ((rc = check_prepared(v, use == CORPUS_TRAIN, dir, c, &usable, e)) || usable)) {
		if (rc == ERR_OK && (rc = repair_lock_file(v, use, dir, c, e)))
			corpus_free(c);
		return rc;
	}
	return build_missing(v, use, dir, bin, c, e);
}
