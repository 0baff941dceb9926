/*
 * cmd_export: `export --llmc FILE`, a gpt checkpoint's weights as an llm.c GPT-2 model
 * file (gpt_llmc.h), which llm.c's trainer and `model.init = llmc:FILE` start from.
 */
#ifndef DDPTOK_CMD_EXPORT_H
#define DDPTOK_CMD_EXPORT_H

#include "app.h"
#include "checkpoint.h"

int cmd_export(struct app *a, struct err *e);
/* For the commands that read one gpt checkpoint (export, sample): chooses the checkpoint
 * as evaluate does (--checkpoint or the latest run's newest valid one) and loads it alone
 * into ck, with the settings it was trained with into s (checkpoint_load_model: no
 * corpus); a checkpoint of another model.kind is refused naming `what`. Free ck on
 * success. */
int cmd_export_load_gpt(struct app *a, const char *what, struct checkpoint *ck,
			struct settings *s, struct err *e);

#endif
