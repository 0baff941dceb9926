/*
 * cmd_sample: the sample command. The checkpoint is chosen and checked as export does
 * (cmd_export.h). A checkpoint trained on text (data.source = text) takes the prompt as
 * text, encoded by the configuration's [tokenizer], and prints text: the prompt and what
 * was generated up to the first end-of-text id. Otherwise, and with --ids, the prompt is
 * user ids, as the corpus files hold them (for a file source the model's id is the
 * user's + DATA_RESERVED, corpus_user_id()), and so are the ids printed. Options arrive as text and are parsed here, each refused with a usage
 * error that names it.
 */
#include "cmd_sample.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_export.h"
#include "corpus_files.h"
#include "fsx.h"
#include "gpt_llmc.h"
#include "model.h"
#include "report.h"
#include "sample.h"
#include "tokenizer.h"
#include "utf8.h"

#define SAMPLE_DEFAULT_TOKENS 16

/* a number in [lo, hi] from option `name`'s text (NULL: dflt); ERR_USAGE otherwise */
static int number(const char *name, const char *text, double dflt, double lo, double hi,
		  double *out, struct err *e)
{
	char *end;
	*out = dflt;
	if (!text)
		return ERR_OK;
	errno = 0;
	*out = strtod(text, &end);
	if (!*text || *end || errno || !isfinite(*out) || *out < lo || *out > hi)
		return ERR(e, ERR_USAGE, "sample: %s '%s': expected a number in %.0f .. %.0f", name,
			   text, lo, hi); /* the bounds are whole numbers, written out */
	return ERR_OK;
}

/* the ids of `text` (user ids, whitespace-separated) as model ids into ids[0..*n) */
static int parse_ids(const char *text, const char *what, int shift, int vocab, int32_t *ids,
		     int cap, int *n, struct err *e)
{
	const char *p = text;
	long long u;
	int len, got;
	*n = 0;
	/* a word is an id only whole ("5,6" and "5x" are named as given) */
	while ((got = app_next_id(&p, DATA_RESERVED - shift, vocab - shift - 1, &u, &len)) > 0) {
		if (*n == cap)
			return ERR(e, ERR_USAGE, "sample: %s holds more than model.context = %d ids",
				   what, cap);
		ids[(*n)++] = (int32_t)(u + shift);
	}
	if (got < 0)
		return ERR(e, ERR_USAGE, "sample: %s: '%.*s' is not an id of the model (user ids %d "
			   ".. %d)", what, len, p, DATA_RESERVED - shift, vocab - shift - 1);
	return ERR_OK;
}

/* The prompt as given: --prompt's text, or the content of --prompt-file (*owned: to free),
 * and what to call it in messages; NULL when none was given. */
static int prompt_text(const struct app *a, const char **text, char **owned, const char **what,
		       struct err *e)
{
	size_t len;
	*text = NULL;
	*owned = NULL;
	*what = a->o.prompt ? "--prompt" : a->o.prompt_file;
	if (a->o.prompt && a->o.prompt_file)
		return ERR(e, ERR_USAGE, "sample: give --prompt or --prompt-file, not both");
	if (a->o.prompt)
		*text = a->o.prompt;
	else if (a->o.prompt_file) {
		ERR_TRY(fsx_read_all(a->o.prompt_file, owned, &len, e));
		*text = *owned;
	}
	return ERR_OK;
}

/* The prompt's text encoded by the tokenizer, as model ids */
static int encode_prompt(struct tokenizer *t, const char *text, const char *what, int shift,
			 int32_t *ids, int cap, int *n, struct err *e)
{
	struct tok_worker *w;
	struct tok_ids got = {0};
	int rc = tokenizer_worker_new(t, &w, e);
	if (!rc && (rc = tokenizer_encode(w, text, strlen(text), &got, e)))
		err_prefix(e, "sample: %s", what);
	/* the window slides during generation too: a longer prompt keeps its last tokens */
	size_t skip = !rc && got.n > (size_t)cap ? got.n - (size_t)cap : 0;
	if (skip)
		fprintf(stderr, "sample: %s is %zu tokens, more than model.context = %d: its last "
			"%d are the prompt\n", what, got.n, cap, cap);
	for (size_t i = skip; !rc && i < got.n; i++)
		ids[i - skip] = got.v[i] + shift;
	*n = rc ? 0 : (int)(got.n - skip);
	tok_ids_free(&got);
	tokenizer_worker_free(w);
	return rc;
}

/* the prompt as model ids: text through t, or (t NULL) user ids */
static int read_prompt(const struct app *a, struct tokenizer *t, int shift, int vocab,
		       int32_t *ids, int cap, int *n, struct err *e)
{
	const char *text, *what;
	char *owned;
	int rc;
	*n = 0;
	ERR_TRY(prompt_text(a, &text, &owned, &what, e));
	if (!text)
		return ERR_OK;
	rc = t ? encode_prompt(t, text, what, shift, ids, cap, n, e)
	       : parse_ids(text, what, shift, vocab, ids, cap, n, e);
	free(owned);
	return rc;
}

/* the options as sample_opts; o->eot is --stop-id's user id here (stop_id_of makes it
 * the model's once the checkpoint says the vocabulary) */
static int options(const struct app *a, struct sample_opts *o, struct err *e)
{
	double tokens, temperature, top_k, seed, top_p, penalty, stop;
	ERR_TRY(number("--tokens", a->o.tokens, SAMPLE_DEFAULT_TOKENS, 0, 1 << 20, &tokens, e));
	ERR_TRY(number("--temperature", a->o.temperature, 1.0, 0.0, 1e6, &temperature, e));
	ERR_TRY(number("--top-k", a->o.top_k, 0, 0, 1 << 30, &top_k, e));
	ERR_TRY(number("--seed", a->o.sample_seed, (double)a->s.seed, 0, 9007199254740992.0, &seed,
		       e));
	ERR_TRY(number("--top-p", a->o.top_p, 1.0, 0.0, 1.0, &top_p, e));
	ERR_TRY(number("--repetition-penalty", a->o.repetition_penalty, 1.0, 0.0, 1e6, &penalty,
		       e));
	ERR_TRY(number("--stop-id", a->o.stop_id, -1.0, 0, 2147483647.0, &stop, e));
	if (tokens != floor(tokens) || top_k != floor(top_k) || seed != floor(seed) ||
	    stop != floor(stop))
		return ERR(e, ERR_USAGE, "sample: --tokens, --top-k, --seed and --stop-id take "
			   "whole numbers");
	if (top_p == 0.0 || penalty == 0.0)
		return ERR(e, ERR_USAGE, "sample: --top-p and --repetition-penalty must be above 0");
	*o = (struct sample_opts){.tokens = (int)tokens, .temperature = temperature,
				  .top_k = (int)top_k, .top_p = top_p,
				  .repetition_penalty = penalty, .seed = (uint64_t)seed,
				  .eot = (int32_t)stop, .no_cache = a->o.no_cache};
	return ERR_OK;
}

/* --stop-id (a user id, in o->eot) as the model's id; ERR_USAGE outside the model's ids */
static int stop_id_of(struct sample_opts *o, int shift, int vocab, struct err *e)
{
	if (o->eot < 0)
		return ERR_OK;
	if (o->eot < DATA_RESERVED - shift || o->eot + shift >= vocab)
		return ERR(e, ERR_USAGE, "sample: --stop-id %d is not an id of the model (user ids "
			   "%d .. %d)", o->eot, DATA_RESERVED - shift, vocab - shift - 1);
	o->eot += shift;
	return ERR_OK;
}

static json_t *user_ids(const int32_t *ids, int n, int shift)
{
	json_t *arr = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(arr, json_integer(ids[i] - shift));
	return arr;
}

/* The text of the tokens generated up to the first end-of-text id (*kept gets their count)
 * into *gen (to free), for sample.json: the terminal got it as it was generated. */
static int generated_text(struct tokenizer *t, const int32_t *out, int tokens, int shift,
			  int *kept, char **gen, struct err *e)
{
	int32_t *ids = malloc(sizeof *ids * ((size_t)tokens + 1));
	size_t gen_len;
	*gen = NULL;
	if (!ids)
		return ERR(e, ERR_NOMEM, "sample: out of memory");
	for (*kept = 0; *kept < tokens && out[*kept] - shift != tokenizer_eot(t); (*kept)++)
		ids[*kept] = out[*kept] - shift;
	int rc = tokenizer_decode(t, ids, (size_t)*kept, gen, &gen_len, e);
	free(ids);
	return rc;
}

/* Text printed as it is generated: every generated id so far decoded again, and the
 * bytes past those already printed written out (decoding a piece alone could lose what
 * depends on its neighbours: a SentencePiece word's leading space, a UTF-8 character cut
 * between byte tokens). */
struct text_stream {
	struct tokenizer *t;
	int shift;
	int32_t *ids; /* the user ids generated so far */
	int n;
	size_t printed;
};

static void stream_token(void *arg, int32_t id)
{
	struct text_stream *ts = arg;
	char *text = NULL;
	size_t len = 0;
	if (id - ts->shift == tokenizer_eot(ts->t))
		return; /* the end: printed as the marker once the generation is over */
	ts->ids[ts->n++] = id - ts->shift;
	if (tokenizer_decode(ts->t, ts->ids, (size_t)ts->n, &text, &len, NULL) == ERR_OK &&
	    len > ts->printed) {
		fwrite(text + ts->printed, 1, len - ts->printed, stdout);
		ts->printed = len;
		fflush(stdout);
	}
	free(text);
}

/* The prompt's text, printed with no end of line: the generated text follows it. */
static int print_prompt(struct app *a, struct tokenizer *t, const int32_t *prompt, int n,
			int shift, struct err *e)
{
	int32_t *ids = malloc(sizeof *ids * ((size_t)n + 1));
	char *head = NULL;
	size_t len;
	if (!ids)
		return ERR(e, ERR_NOMEM, "sample: out of memory");
	for (int i = 0; i < n; i++)
		ids[i] = prompt[i] - shift;
	int rc = tokenizer_decode(t, ids, (size_t)n, &head, &len, e);
	if (!rc) {
		app_progress_close(a);
		fwrite(head, 1, len, stdout);
		fflush(stdout);
	}
	free(head);
	free(ids);
	return rc;
}

/* The generation's pace, and how it ended. */
static void print_speed(struct app *a, const struct sample_opts *o,
			const struct sample_result *res)
{
	env_info(&a->env, "sample: generated %d token%s in %.3f s (%.1f tokens/s, %s)%s%s",
		 res->produced, res->produced == 1 ? "" : "s", res->seconds, res->tokens_per_s,
		 o->no_cache ? "no cache: the window run whole for each token" :
			       "cache of keys and values",
		 res->ended_at_eot ? "; ended at the end-of-text id" : "",
		 res->slides ? "; the window slid past model.context" : "");
}

/* What is sampled from what: printed before the generation. */
static void print_header(struct app *a, const struct checkpoint *ck, const struct sample_opts *o,
			 int n, int text)
{
	env_info(&a->env, "sample: checkpoint %s (step %" PRId64 "), prompt of %d %s%s, %d "
		 "token%s, temperature %g, top-k %d, seed %" PRIu64, ck->dir, ck->step, n,
		 text ? "token" : "id", n == 1 ? "" : "s", o->tokens, o->tokens == 1 ? "" : "s",
		 o->temperature, o->top_k, o->seed);
}

/* After the generation: the ids (the text was printed as it came, its end here), the pace,
 * and sample.json. */
static int report(struct app *a, const struct checkpoint *ck, const struct sample_opts *o,
		  const int32_t *prompt, int n, const int32_t *out, const struct sample_result *res,
		  int shift, struct tokenizer *t, struct err *e)
{
	/* every id whole: at most 11 characters and a space each */
	size_t cap = (size_t)res->produced * 12 + 1, at = 0;
	char *line = malloc(cap), *gen = NULL;
	int kept = res->produced, rc = ERR_OK;
	if (!line)
		return ERR(e, ERR_NOMEM, "sample: out of memory for the printed line");
	line[0] = '\0';
	for (int i = 0; i < res->produced; i++)
		at += (size_t)snprintf(line + at, cap - at, "%s%d", i ? " " : "", out[i] - shift);
	if (t) {
		printf("%s\n", res->ended_at_eot ? TOKENIZER_EOT_TEXT : "");
		fflush(stdout);
		rc = generated_text(t, out, res->produced, shift, &kept, &gen, e);
	} else {
		env_info(&a->env, "sample: %s", line);
	}
	free(line);
	print_speed(a, o, res);
	json_t *j = json_pack("{s:s, s:I, s:o, s:o, s:f, s:i, s:I}", "checkpoint", ck->dir,
			      "step", (json_int_t)ck->step, "prompt", user_ids(prompt, n, shift),
			      "tokens", user_ids(out, kept, shift), "temperature",
			      o->temperature, "top_k", o->top_k, "seed", (json_int_t)o->seed);
	if (gen) { /* JSON holds UTF-8 only: a byte-level model may end inside a character */
		char *valid = NULL;
		size_t len, replaced;
		if (!utf8_repair(gen, strlen(gen), &valid, &len, &replaced))
			json_object_set_new(j, "text", json_stringn(valid, len));
		free(valid);
	}
	free(gen);
	return rc ? (json_decref(j), rc) : report_write_json(a, OUT_SAMPLE, j, e);
}

/* The configuration's tokenizer for a checkpoint trained on text (NULL with --ids or for
 * token files): its kind must be the checkpoint's and its ids fit the model's. */
static int text_tokenizer(struct app *a, const struct settings *ck_s, int vocab, int shift,
			  struct tokenizer **t, struct err *e)
{
	*t = NULL;
	if (a->o.ids || ck_s->source != DATA_TEXT)
		return ERR_OK;
	if (a->s.tokenizer != ck_s->tokenizer)
		return ERR(e, ERR_CONFIG, "sample: the checkpoint was trained with tokenizer.kind = "
			   "%s, this configuration names %s", tokenizer_kind_name(ck_s->tokenizer),
			   tokenizer_kind_name(a->s.tokenizer));
	ERR_TRY(tokenizer_from_settings(t, &a->s, e));
	if (tokenizer_vocab(*t) + shift > vocab) {
		int ids = tokenizer_vocab(*t);
		tokenizer_close(*t);
		*t = NULL;
		return ERR(e, ERR_CONFIG, "sample: the tokenizer has %d ids, the model %d", ids,
			   vocab - shift);
	}
	return ERR_OK;
}

int cmd_sample(struct app *a, struct err *e)
{
	struct checkpoint ck;
	struct settings s;
	struct model_shape m;
	struct sample_opts o;
	struct tokenizer *t = NULL;
	int32_t *prompt = NULL, *out = NULL;
	int n = 0, rc;
	struct sample_result res;
	if ((rc = options(a, &o, e)) || (rc = cmd_export_load_gpt(a, "sample", &ck, &s, e)))
		return rc;
	int shift = gpt_llmc_reserved(s.source);
	ERR_TRY_GOTO(rc, model_shape_init(&m, &s, e), done);
	ERR_TRY_GOTO(rc, text_tokenizer(a, &s, m.vocab, shift, &t, e), done);
	ERR_TRY_GOTO(rc, stop_id_of(&o, shift, m.vocab, e), done);
	if (t && o.eot < 0) /* text ends at the tokenizer's end-of-text unless told otherwise */
		o.eot = tokenizer_eot(t) + shift;
	prompt = malloc(sizeof(int32_t) * (size_t)s.context);
	/* the generated ids, then the stream's copy of them as user ids */
	out = malloc(sizeof(int32_t) * 2 * ((size_t)o.tokens + 1));
	if (!prompt || !out) {
		rc = ERR(e, ERR_NOMEM, "out of memory");
		goto done;
	}
	ERR_TRY_GOTO(rc, read_prompt(a, t, shift, m.vocab, prompt, s.context, &n, e), done);
	print_header(a, &ck, &o, n, t != NULL);
	struct text_stream ts = {.t = t, .shift = shift, .ids = out + o.tokens + 1};
	if (t) {
		ERR_TRY_GOTO(rc, print_prompt(a, t, prompt, n, shift, e), done);
		o.on_token = stream_token;
		o.on_token_arg = &ts;
	}
	ERR_TRY_GOTO(rc, sample_generate(&m, ck.params, prompt, n, &o, out, &res, e), done);
	rc = report(a, &ck, &o, prompt, n, out, &res, shift, t, e);
done:
	tokenizer_close(t);
	free(prompt);
	free(out);
	checkpoint_free(&ck);
	return rc;
}
