/*
 * cmd_prepare: the prepare command, the protocol's first step: builds the corpus (the
 * synthetic one, or one read from the configured files), checks that the sampler can plan
 * windows from it, and writes it with its data lock under outputs/corpus.
 */
#include "cmd_prepare.h"

#include "corpus.h"
#include "corpus_files.h"
#include "corpus_store.h"
#include "fsx.h"
#include "outputs.h"
#include "sampler.h"
#include "sources.h"
#include "tokenizer.h"

/* Sequences and targets per split, the masked share, the length histogram and, for a
 * file source, what the files held. */
static void prepare_summary(struct app *a, const struct corpus *c)
{
	struct corpus_summary m;
	char hist[CORPUS_HIST * 32];
	size_t used = 0;
	int64_t tokens, sup;
	corpus_summarize(c, &m);
	tokens = m.tokens[0] + m.tokens[1] + m.tokens[2];
	sup = m.supervised[0] + m.supervised[1] + m.supervised[2];
	if (c->params.source != DATA_SYNTHETIC)
		env_info(&a->env, "prepare: read %lld documents from %s (%s): %lld longer than "
			 "max_len = %d cut into windows, %lld shorter than min_len = %d skipped",
			 (long long)c->read.documents, a->s.data_path,
			 data_source_name(c->params.source), (long long)c->read.cut, a->s.max_len,
			 (long long)c->read.short_skipped, a->s.min_len);
	if (c->params.source == DATA_TEXT)
		env_info(&a->env, "prepare: tokenized %.2f MB of text with the %s tokenizer on %d "
			 "thread%s in %.2f s (%.1f MB/s); %lld invalid UTF-8 sequence%s replaced",
			 (double)c->read.text_bytes / 1e6, tokenizer_kind_name(a->s.tokenizer),
			 c->read.text_threads, c->read.text_threads == 1 ? "" : "s",
			 c->read.text_seconds, c->read.text_seconds > 0 ?
			 (double)c->read.text_bytes / 1e6 / c->read.text_seconds : 0.0,
			 (long long)c->read.text_replaced, c->read.text_replaced == 1 ? "" : "s");
	env_info(&a->env, "prepare: %d train, %d validation, %d test sequences; supervised tokens "
		 "%lld / %lld / %lld", c->split_count[0], c->split_count[1], c->split_count[2],
		 (long long)m.supervised[0], (long long)m.supervised[1], (long long)m.supervised[2]);
	env_info(&a->env, "prepare: %lld tokens, %.1f%% of them masked (prompts and ignored "
		 "positions: context, never targets)", (long long)tokens,
		 tokens ? 100.0 * (double)(tokens - sup) / (double)tokens : 0.0);
	for (int k = 0; k < CORPUS_HIST && m.shortest + k * m.width <= m.longest; k++) {
		int hi = m.shortest + (k + 1) * m.width - 1;
		used += (size_t)snprintf(hist + used, sizeof hist - used, "%s%d-%d: %lld",
					 k ? ", " : "", m.shortest + k * m.width,
					 hi < m.longest ? hi : m.longest, (long long)m.hist[k]);
	}
	env_info(&a->env, "prepare: sequence lengths %s", hist);
}

/* A file source's progress on a terminal: one line per whole percent of each file. */
struct prepare_progress {
	struct app *a;
	const char *file;
	int percent;
};

static void prepare_progress(void *arg, const char *file, uint64_t done, uint64_t total)
{
	struct prepare_progress *p = arg;
	int percent = total ? (int)(100 * done / total) : 100;
	if (file == p->file && percent == p->percent)
		return;
	p->file = file;
	p->percent = percent;
	env_progress(&p->a->env, "prepare: reading %s: %d%%", file, percent);
}

int cmd_prepare(struct app *a, struct err *e)
{
	struct corpus c;
	char dir[2048];
	int rc;
	if ((rc = env_outputs_ready(&a->env, e)) != ERR_OK)
		return rc;
	if ((rc = fsx_join(dir, sizeof dir, a->s.outputs, output_name(OUT_CORPUS), e)) != ERR_OK)
		return rc;
	struct prepare_progress pp = {a, NULL, -1};
	rc = a->s.source == DATA_SYNTHETIC ? corpus_build(&a->s, &c, e)
		: corpus_from_files_reporting(&a->s, prepare_progress, &pp, &c, e);
	env_progress_end(&a->env);
	if (rc != ERR_OK)
		return rc;
	/* a corpus the sampler cannot plan windows from (a band holding fewer sequences than
	 * a window takes) would only be refused by every later command: refuse it here */
	struct sampler sp;
	if ((rc = sampler_init(&sp, &c, &a->s, e)) != ERR_OK) {
		if (rc == ERR_CONFIG)
			err_prefix(e, "%s", a->cfg.path);
		corpus_free(&c);
		return rc;
	}
	sampler_free(&sp);
	if ((rc = corpus_save(&c, &a->s, dir, e)) == ERR_OK) {
		prepare_summary(a, &c);
		env_info(&a->env, "prepare: data lock %s", c.lock);
		env_info(&a->env, "prepare: wrote %s/" OUTPUT_CORPUS_BIN " and %s/" OUTPUT_DATA_LOCK, dir,
			 dir);
	}
	corpus_free(&c);
	return rc;
}
