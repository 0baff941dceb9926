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
#include "gpt_hf.h"
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

/* --dtype as llm.c's file version; ERR_USAGE naming it */
static int llmc_version(const struct app *a, int *version, struct err *e)
{
	*version = GPT_LLMC_VERSION;
	if (!a->o.dtype || !strcmp(a->o.dtype, "f32"))
		return ERR_OK;
	if (!strcmp(a->o.dtype, "bf16") && a->o.llmc) {
		*version = GPT_LLMC_VERSION_BF16;
		return ERR_OK;
	}
	return ERR(e, ERR_USAGE, "export: --dtype %s: expected f32 or bf16 (bf16 with --llmc)",
		   a->o.dtype);
}

int cmd_export(struct app *a, struct err *e)
{
	struct checkpoint ck;
	struct settings s;
	struct model_shape m;
	int rc, version;
	if (!a->o.llmc == !a->o.hf)
		return ERR(e, ERR_USAGE, "export: give the file to write with --llmc FILE or the "
			   "directory with --hf DIR (one of them)");
	if ((rc = llmc_version(a, &version, e)) ||
	    (rc = cmd_export_load_gpt(a, "export", &ck, &s, e)))
		return rc;
	int reserved = gpt_llmc_reserved(s.source);
	if (!(rc = model_shape_init(&m, &s, e)))
		rc = a->o.hf ? gpt_hf_write(a->o.hf, &m, reserved, ck.params, e)
			     : gpt_llmc_write(a->o.llmc, &m, reserved, ck.params, version, e);
	if (!rc)
		env_info(&a->env, "export: checkpoint %s (step %" PRId64 ") written to %s: %s, "
			 "V = %d user ids (%d reserved rows left out), L = %d, NH = %d, C = %d, "
			 "maxT = %d", ck.dir, ck.step, a->o.hf ? a->o.hf : a->o.llmc,
			 a->o.hf ? "Hugging Face GPT-2 directory (float32)"
			 : version == GPT_LLMC_VERSION ? "llm.c GPT-2 model file (float32)"
						       : "llm.c GPT-2 model file (bfloat16)",
			 m.vocab - reserved, reserved, GPT_L(&m), GPT_H(&m), GPT_C(&m), GPT_T(&m));
	checkpoint_free(&ck);
	return rc;
}
