/*
 * cmd_evaluate: the evaluate command: the newest valid checkpoint of the latest train run
 * (or --checkpoint latest|DIR: a checkpoint, a run or another directory of checkpoints)
 * measured on the test and validation splits (evaluate.c), printed and written to
 * evaluate.json. Without any run it takes the newest of the protocol's checkpoints. The
 * protocol prints and writes its own evaluation the same way.
 */
#include "cmd_evaluate.h"

#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <string.h>

#include "checkpoint.h"
#include "corpus_core.h"
#include "outputs.h"
#include "report.h"
#include "train_runs.h"
#include "world.h"

int cmd_evaluate_choose(struct app *a, const char **dir, struct train_plan *plan, struct err *e)
{
	*dir = a->o.checkpoint;
	if (world_get()->proc > 0)
		return ERR_OK;
	memset(plan, 0, sizeof *plan);
	/* no --checkpoint: the latest run (also when its link is lost or stale), if any */
	ERR_TRY(train_plan_resume(&a->env, a->o.checkpoint, plan, e));
	*dir = plan->resume[0] ? plan->resume : NULL;
	return ERR_OK;
}

int cmd_evaluate(struct app *a, struct err *e)
{
	struct train_eval ev;
	struct train_plan plan;
	const char *dir = NULL;
	int rc;
	if ((rc = env_outputs_ready(&a->env, e)) || (rc = cmd_evaluate_choose(a, &dir, &plan, e)) ||
	    (dir && world_get()->proc == 0 && (rc = checkpoint_check_model(&a->env, dir, e))) ||
	    (rc = train_evaluate(&a->env, dir, &ev, e)))
		return rc;
	if (world_get()->proc > 0)
		return ERR_OK; /* it evaluated process 0's checkpoint as process 0 did: one report */
	return cmd_evaluate_write(a, &ev, e);
}

int cmd_evaluate_write(struct app *a, const struct train_eval *ev, struct err *e)
{
	int rc;
	const struct train_split_eval *sp[2] = {&ev->test, &ev->validation};
	const char *names[2] = {"test", "validation"};
	for (int i = 0; i < 2; i++)
		if (ev->skipped[i].count)
			env_info(&a->env, "evaluate: %d newer checkpoint%s under %s failed verification "
				 "and %s skipped (see the checkpoints command)", ev->skipped[i].count,
				 ev->skipped[i].count == 1 ? "" : "s", ev->skipped[i].root,
				 ev->skipped[i].count == 1 ? "was" : "were");
	char run[NAME_MAX + 1];
	int in_run = train_runs_id_of(&a->env, ev->checkpoint, run, sizeof run);
	if (in_run)
		env_info(&a->env, "evaluate: run %s, step %" PRId64 " (checkpoint %s)", run, ev->step,
			 ev->checkpoint);
	else
		env_info(&a->env, "evaluate: checkpoint %s (step %" PRId64 ")", ev->checkpoint,
			 ev->step);
	env_info(&a->env, "evaluate: %-10s %9s %9s %10s %9s %9s %14s", "split", "sequences", "tokens",
		 "loss", "hits", "accuracy", "const. guess");
	for (int i = 0; i < 2; i++)
		env_info(&a->env, "evaluate: %-10s %9" PRId64 " %9" PRId64 " %10.6f %9" PRId64 " %9.4f %14.4f",
			 names[i], sp[i]->sequences, sp[i]->tokens, sp[i]->loss, sp[i]->hits,
			 sp[i]->accuracy, sp[i]->const_accuracy);
	env_info(&a->env, "evaluate: loss = global token mean (sum of token losses / supervised tokens); "
		 "accuracy = argmax == target; the constant guess always predicts id %lld (the "
		 "data's numbering), the most frequent training target",
		 corpus_user_id(a->s.source, ev->const_id));
	if (ev->tokenizer[0])
		env_info(&a->env, "evaluate: bits per byte: test %.4f, validation %.4f (the loss in "
			 "bits over the %" PRId64 " and %" PRId64 " bytes of text the targets stand "
			 "for, %s tokenizer: comparable across tokenizers)", ev->test.bits_per_byte,
			 ev->validation.bits_per_byte, ev->test.bytes, ev->validation.bytes,
			 ev->tokenizer);
	json_t *j = evaluate_json(ev, a->s.source);
	if (in_run)
		json_object_set_new(j, "run", json_string(run));
	rc = report_write_json(a, OUT_EVALUATE, j, e);
	if (!rc)
		env_info(&a->env, "evaluate: written %s/%s", a->s.outputs, output_name(OUT_EVALUATE));
	return rc;
}
