/*
 * cmd_export: the export command. The checkpoint is chosen as evaluate chooses it and read
 * alone: its model is the one its own config.ini describes (no corpus, nothing of this
 * configuration's data or model is needed); its parameters are then written in llm.c's
 * format by gpt_llmc.c, atomically, so an error leaves no partial file behind.
 */
#include "cmd_export.h"

#include <inttypes.h>
#include <string.h>

#include "cmd_evaluate.h"
#include "gpt_llmc.h"
#include "gpt_shape.h"
#include "model.h"

int cmd_export_load_gpt(struct app *a, const char *what, struct checkpoint *ck,
			struct settings *s, struct err *e)
{
	struct train_plan plan;
	const char *dir = NULL;
	int rc;
	memset(ck, 0, sizeof *ck);
	if ((rc = env_outputs_ready(&a->env, e)) ||
	    (rc = cmd_evaluate_choose(a, &dir, &plan, e)))
		return rc;
	if (!dir)
		return ERR(e, ERR_DATA, "%s: no train run to take a checkpoint from: give "
			   "--checkpoint DIR", what);
	/* the checkpoint alone: its own config.ini says its model, whatever this
	 * configuration's data (no corpus is read) */
	if ((rc = checkpoint_load_model(&a->env, dir, ck, s, e)))
		return rc;
	if (strcmp(s->model_kind, "gpt")) {
		rc = ERR(e, ERR_DATA, "%s: checkpoint %s holds a model of kind %s (model.kind of "
			 "its config.ini); only a gpt checkpoint can be read here (docs/gpt.md)",
			 what, dir, s->model_kind);
		checkpoint_free(ck);
	}
	return rc;
}

int cmd_export(struct app *a, struct err *e)
{
	struct checkpoint ck;
	struct settings s;
	struct model_shape m;
	int rc;
	if (!a->o.llmc)
		return ERR(e, ERR_USAGE, "export: give the file to write with --llmc FILE");
	if ((rc = cmd_export_load_gpt(a, "export", &ck, &s, e)))
		return rc;
	int reserved = gpt_llmc_reserved(s.source);
	if (!(rc = model_shape_init(&m, &s, e)))
		rc = gpt_llmc_write(a->o.llmc, &m, reserved, ck.params, e);
	if (!rc)
		env_info(&a->env, "export: checkpoint %s (step %" PRId64 ") written to %s: llm.c "
			 "GPT-2 model file, V = %d user ids (%d reserved rows left out), L = %d, "
			 "NH = %d, C = %d, maxT = %d", ck.dir, ck.step, a->o.llmc, m.vocab - reserved,
			 reserved, GPT_L(&m), GPT_H(&m), GPT_C(&m), GPT_T(&m));
	checkpoint_free(&ck);
	return rc;
}
