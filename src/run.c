/*
 * run: opening the shared state of a computing command (see run.h).
 */
#include "run.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "corpus_files.h"

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

int run_open_corpus(const struct env *v, struct run *r, struct corpus *c, struct err *e)
{
	int rc;
	memset(r, 0, sizeof *r);
	r->corpus = *c; /* moved: the run owns (and frees) it from here on */
	memset(c, 0, sizeof *c);
	r->have_corpus = 1;
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
	r->init_params = malloc(r->eng->shape.n_params * sizeof(float));
	if (!r->init_params) {
		rc = ERR(e, ERR_NOMEM, "out of memory");
		goto fail;
	}
	model_init_params(&r->eng->shape, v->s->seed, r->init_params);
	ERR_TRY_GOTO(rc, engine_set_state(r->eng, r->init_params, NULL, 0, e), fail);
	/* say once per process which backend runs and why (auto may fall back to the CPU) */
	static int told;
	if (!told) {
		env_info(v, "backend: %s; collective %s", r->eng->placement.why,
			 r->eng->placement.coll_why);
		told = 1;
	}
	return ERR_OK;
fail:
	run_close(r);
	return rc;
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
