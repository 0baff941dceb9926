/*
 * evaluate: the held-out loss and accuracy of a checkpoint, and the best constant guess
 * they are compared with.
 */
#include "evaluate.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "ckpt.h"
#include "coll.h"
#include "npy.h"
#include "procs.h"
#include "run.h"
#include "tokenizer.h"
#include "train_loop.h"
#include "validation.h"
#include "world.h"

/* How many targets of split are token id (all of them: counts[] of vocab entries). */
static int64_t split_targets(const struct corpus *c, int split, int id, int64_t *counts)
{
	int64_t hits = 0;
	for (int i = c->split_first[split]; i < c->split_first[split] + c->split_count[split]; i++)
		for (int t = c->prefix[i]; t < corpus_len(c, i); t++) {
			int32_t tok = c->tokens[c->offset[i] + t];
			if (!corpus_is_target(c, i, t))
				continue;
			hits += tok == id;
			if (counts)
				counts[tok]++;
		}
	return hits;
}

int train_const_guess(const struct corpus *c, int split, int split2, int64_t *hits2)
{
	int64_t *count = calloc((size_t)c->vocab, sizeof *count);
	int best = DATA_RESERVED;
	if (!count) {
		*hits2 = 0;
		return -1;
	}
	split_targets(c, split, -1, count);
	for (int v = 0; v < c->vocab; v++)
		if (count[v] > count[best])
			best = v;
	*hits2 = split_targets(c, split2, best, NULL);
	free(count);
	return best;
}

/* The bytes of text the targets of split stand for (the tokenizer's ids are the model's
 * less DATA_RESERVED). */
static int64_t split_bytes(const struct corpus *c, int split, const struct tokenizer *tok)
{
	int64_t bytes = 0;
	for (int i = c->split_first[split]; i < c->split_first[split] + c->split_count[split]; i++)
		for (int t = c->prefix[i]; t < corpus_len(c, i); t++)
			if (corpus_is_target(c, i, t))
				bytes += (int64_t)tokenizer_token_bytes(tok, c->tokens[c->offset[i] + t] -
									     DATA_RESERVED);
	return bytes;
}

static int eval_split(struct engine *eng, const struct corpus *c, int split, int const_id,
		      const struct tokenizer *tok, struct train_split_eval *se, struct err *e)
{
	int rc = engine_evaluate(eng, split, &se->loss_sum, &se->tokens, &se->hits,
				 &se->sequences, e);
	if (rc)
		return rc;
	se->loss = per_target(se->loss_sum, se->tokens);
	se->accuracy = per_target((double)se->hits, se->tokens);
	se->const_hits = split_targets(c, split, const_id, NULL);
	se->const_accuracy = per_target((double)se->const_hits, se->tokens);
	se->bytes = tok ? split_bytes(c, split, tok) : 0;
	se->bits_per_byte = se->bytes ? se->loss_sum / log(2.0) / (double)se->bytes : 0.0;
	return ERR_OK;
}

/* The newest valid checkpoint of the stop/resume runs or of the continuous one (the higher
 * step; on a tie the former), into ev->checkpoint and ev->step; the newer ones that failed
 * verification are counted in ev->skipped. */
static int newest_checkpoint(const struct env *v, struct train_eval *ev, struct err *e)
{
	char root[FSX_PATH_MAX];
	struct err first;
	int found = 0, rc;
	err_clear(&first);
	for (int cont = 0; cont < 2; cont++) {
		char path[FSX_PATH_MAX];
		uint64_t step = 0;
		int skipped = 0;
		struct err le;
		err_clear(&le);
		if ((rc = train_ckpt_root(v, cont, root, sizeof root, e)))
			return rc;
		if (ckpt_latest_valid(root, path, sizeof path, &step, &skipped, &le)) {
			if (!cont)
				first = le;
			continue;
		}
		ev->skipped[cont].count = skipped;
		snprintf(ev->skipped[cont].root, sizeof ev->skipped[cont].root, "%s", root);
		if (!found || (int64_t)step > ev->step) {
			snprintf(ev->checkpoint, sizeof ev->checkpoint, "%s", path);
			ev->step = (int64_t)step;
			found = 1;
		}
	}
	if (!found)
		return ERR(e, first.code ? first.code : ERR_DATA, "%s (nor in %s)", first.msg, root);
	return ERR_OK;
}

int train_evaluate(const struct env *v, const char *dir, struct train_eval *ev, struct err *e)
{
	struct checkpoint ck;
	struct corpus c;
	struct run r;
	int rc;
	int64_t unused;

	char local[FSX_PATH_MAX];
	memset(ev, 0, sizeof *ev);
	memset(&ck, 0, sizeof ck);
	/* with several processes, process 0 chooses the checkpoint and sends it to the others
	 * (no shared file system needed): every process evaluates the same state */
	rc = dir || world_get()->proc > 0 ? ERR_OK : newest_checkpoint(v, ev, e);
	if (dir)
		snprintf(ev->checkpoint, sizeof ev->checkpoint, "%s", dir);
	if ((rc = procs_from_process0(rc, ev->checkpoint, sizeof ev->checkpoint,
				      "the newest checkpoint", v->s->timeout_s, e)) ||
	    (rc = procs_share_checkpoint(ev->checkpoint, v->s->outputs, "evaluate", local,
					 sizeof local, v->s->timeout_s, e)) ||
	    (rc = run_corpus(v, CORPUS_READ, &c, e)))
		return rc;
	/* evaluation needs the checkpoint's parameters shaped like this configuration's model
	 * and the same corpus (its data lock); how they were trained does not matter, so the
	 * optimizer and world keys may differ */
	if ((rc = checkpoint_load(v, local, &c,
				  CHECKPOINT_CHECK_DATA | CHECKPOINT_CHECK_SHAPE, &ck, e))) {
		corpus_free(&c);
		return rc;
	}
	ev->step = ck.step;
	ERR_TRY_GOTO(rc, checkpoint_open_run(v, &ck, &r, &c, e), out);
	snprintf(ev->backend, sizeof ev->backend, "%s", engine_backend_name(r.eng));
	ev->const_id = train_const_guess(&r.corpus, SPLIT_TRAIN, SPLIT_TEST, &unused);
	if (ev->const_id < 0)
		rc = ERR(e, ERR_NOMEM, "out of memory");
	/* text: bits per byte, comparable across tokenizers */
	struct tokenizer *tok = NULL;
	if (!rc && v->s->source == DATA_TEXT && !(rc = tokenizer_from_settings(&tok, v->s, e)))
		snprintf(ev->tokenizer, sizeof ev->tokenizer, "%s",
			 tokenizer_kind_name(v->s->tokenizer));
	if (!rc)
		rc = eval_split(r.eng, &r.corpus, SPLIT_TEST, ev->const_id, tok, &ev->test, e);
	if (!rc)
		rc = eval_split(r.eng, &r.corpus, SPLIT_VALIDATION, ev->const_id, tok,
				&ev->validation, e);
	tokenizer_close(tok);
	run_close(&r);
out:
	checkpoint_free(&ck);
	return rc;
}
