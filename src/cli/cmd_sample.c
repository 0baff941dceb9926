/*
 * cmd_sample: the sample command. The checkpoint is chosen and checked as export does
 * (cmd_export.h); the prompt is user ids, as the corpus files hold them (for a file
 * source the model's id is the user's + DATA_RESERVED, corpus_user_id()), and so are the
 * ids printed. Options arrive as text and are parsed here, each refused with a usage
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
	*n = 0;
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
			p++;
		if (!*p)
			return ERR_OK;
		char *end;
		errno = 0;
		long long u = strtoll(p, &end, 10);
		/* a word is an id only whole ("5,6" and "5x" are named as given) */
		if (end == p || errno || (*end && !strchr(" \t\r\n", *end)) ||
		    u < DATA_RESERVED - shift || u + shift >= vocab)
			return ERR(e, ERR_USAGE, "sample: %s: '%.*s' is not an id of the model (user "
				   "ids %d .. %d)", what, (int)strcspn(p, " \t\r\n"), p,
				   DATA_RESERVED - shift, vocab - shift - 1);
		if (*n == cap)
			return ERR(e, ERR_USAGE, "sample: %s holds more than model.context = %d ids",
				   what, cap);
		ids[(*n)++] = (int32_t)(u + shift);
		p = end;
	}
}

static int read_prompt(const struct app *a, int shift, int vocab, int32_t *ids, int cap, int *n,
		       struct err *e)
{
	char *text = NULL;
	size_t len;
	int rc;
	*n = 0;
	if (a->o.prompt && a->o.prompt_file)
		return ERR(e, ERR_USAGE, "sample: give --prompt or --prompt-file, not both");
	if (a->o.prompt)
		return parse_ids(a->o.prompt, "--prompt", shift, vocab, ids, cap, n, e);
	if (!a->o.prompt_file)
		return ERR_OK;
	if ((rc = fsx_read_all(a->o.prompt_file, &text, &len, e)))
		return rc;
	rc = parse_ids(text, a->o.prompt_file, shift, vocab, ids, cap, n, e);
	free(text);
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

/* prints and writes what was generated */
static int report(struct app *a, const struct checkpoint *ck, const struct sample_opts *o,
		  const int32_t *prompt, int n, const int32_t *out, const struct sample_result *res,
		  int shift, struct err *e)
{
	/* every id whole: at most 11 characters and a space each */
	size_t cap = (size_t)res->produced * 12 + 1, at = 0;
	char *line = malloc(cap);
	if (!line)
		return ERR(e, ERR_NOMEM, "sample: out of memory for the printed line");
	line[0] = '\0';
	for (int i = 0; i < res->produced; i++)
		at += (size_t)snprintf(line + at, cap - at, "%s%d", i ? " " : "", out[i] - shift);
	env_info(&a->env, "sample: checkpoint %s (step %" PRId64 "), prompt of %d id%s, %d "
		 "token%s, temperature %g, top-k %d, seed %" PRIu64, ck->dir, ck->step, n,
		 n == 1 ? "" : "s", o->tokens, o->tokens == 1 ? "" : "s", o->temperature,
		 o->top_k, o->seed);
	env_info(&a->env, "sample: %s", line);
	free(line);
	env_info(&a->env, "sample: generated %d token%s in %.3f s (%.1f tokens/s, %s)%s%s",
		 res->produced,
		 res->produced == 1 ? "" : "s", res->seconds, res->tokens_per_s,
		 o->no_cache ? "no cache: the window run whole for each token" :
			       "cache of keys and values",
		 res->ended_at_eot ? "; ended at --stop-id" : "",
		 res->slides ? "; the window slid past model.context" : "");
	json_t *j = json_pack("{s:s, s:I, s:o, s:o, s:f, s:i, s:I}", "checkpoint", ck->dir,
			      "step", (json_int_t)ck->step, "prompt", user_ids(prompt, n, shift),
			      "tokens", user_ids(out, res->produced, shift), "temperature",
			      o->temperature, "top_k", o->top_k, "seed", (json_int_t)o->seed);
	return report_write_json(a, OUT_SAMPLE, j, e);
}

int cmd_sample(struct app *a, struct err *e)
{
	struct checkpoint ck;
	struct settings s;
	struct model_shape m;
	struct sample_opts o;
	int32_t *prompt = NULL, *out = NULL;
	int n = 0, rc;
	struct sample_result res;
	if ((rc = options(a, &o, e)) || (rc = cmd_export_load_gpt(a, "sample", &ck, &s, e)))
		return rc;
	int shift = gpt_llmc_reserved(s.source);
	ERR_TRY_GOTO(rc, model_shape_init(&m, &s, e), done);
	ERR_TRY_GOTO(rc, stop_id_of(&o, shift, m.vocab, e), done);
	prompt = malloc(sizeof(int32_t) * (size_t)s.context);
	out = malloc(sizeof(int32_t) * ((size_t)o.tokens + 1));
	if (!prompt || !out) {
		rc = ERR(e, ERR_NOMEM, "out of memory");
		goto done;
	}
	ERR_TRY_GOTO(rc, read_prompt(a, shift, m.vocab, prompt, s.context, &n, e), done);
	ERR_TRY_GOTO(rc, sample_generate(&m, ck.params, prompt, n, &o, out, &res, e), done);
	rc = report(a, &ck, &o, prompt, n, out, &res, shift, e);
done:
	free(prompt);
	free(out);
	checkpoint_free(&ck);
	return rc;
}
