/*
 * cmd_export: the export command. The checkpoint is chosen as evaluate chooses it and
 * checked against the configuration (its shape and data lock) as evaluate checks it; its
 * parameters are then written in llm.c's format by gpt_llmc.c, atomically, so an error
 * leaves no partial file behind.
 */
#include "cmd_export.h"

#include <inttypes.h>
#include <string.h>

#include "cmd_evaluate.h"
#include "corpus_files.h"
#include "gpt_llmc.h"
#include "gpt_shape.h"
#include "model.h"
#include "run.h"

int cmd_export_load_gpt(struct app *a, const char *what, struct checkpoint *ck,
			struct corpus *c, struct err *e)
{
	struct train_plan plan;
	const char *dir = NULL;
	int rc;
	memset(ck, 0, sizeof *ck);
	memset(c, 0, sizeof *c);
	if (strcmp(a->s.model_kind, "gpt"))
		return ERR(e, ERR_CONFIG, "%s: model.kind = %s; only a gpt checkpoint can be read "
			   "here (docs/gpt.md)", what, a->s.model_kind);
	if ((rc = env_outputs_ready(&a->env, e)) ||
	    (rc = cmd_evaluate_choose(a, &dir, &plan, e)))
		return rc;
	if (!dir)
		return ERR(e, ERR_DATA, "%s: no train run to take a checkpoint from: give "
			   "--checkpoint DIR", what);
	if ((rc = run_corpus(&a->env, CORPUS_READ, c, e)))
		return rc;
	rc = checkpoint_load(&a->env, dir, c, CHECKPOINT_CHECK_DATA | CHECKPOINT_CHECK_SHAPE, ck,
			     e);
	if (rc) {
		checkpoint_free(ck);
		corpus_free(c);
	}
	return rc;
}

int cmd_export(struct app *a, struct err *e)
{
	struct checkpoint ck;
	struct corpus c;
	struct model_shape m;
	int rc;
	if (!a->o.llmc)
		return ERR(e, ERR_USAGE, "export: give the file to write with --llmc FILE");
	if ((rc = cmd_export_load_gpt(a, "export", &ck, &c, e)))
		return rc;
	struct settings s = a->s;
	s.vocab = corpus_model_vocab(&a->s, &c);
	int reserved = gpt_llmc_reserved(a->s.source);
	if (!(rc = model_shape_init(&m, &s, e)))
		rc = gpt_llmc_write(a->o.llmc, &m, reserved, ck.params, e);
	if (!rc)
		env_info(&a->env, "export: checkpoint %s (step %" PRId64 ") written to %s: llm.c "
			 "GPT-2 model file, V = %d user ids (%d reserved rows left out), L = %d, "
			 "NH = %d, C = %d, maxT = %d", ck.dir, ck.step, a->o.llmc, m.vocab - reserved,
			 reserved, GPT_L(&m), GPT_H(&m), GPT_C(&m), GPT_T(&m));
	checkpoint_free(&ck);
	corpus_free(&c);
	return rc;
}
